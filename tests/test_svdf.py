"""SVDF (int8 input, int16 or int8 time weights and state): bit-exact (==)
with the tflite-micro interpreter over consecutive invokes that carry the
state, and after reset; the refusals; the float64 reference; one firmware run
on QEMU (mps2-an386). Models written with pyembed.model.tflite_writer."""
import numpy as np
import pytest

from pyembed.model import tflite_writer as W
from pyembed.model.load import load_tflite_bytes


def svdf_model(seed=0, batch=2, n_in=12, units=5, rank=2, memory=6, state16=True, bias=True, szp=0, xzp=-3,
               act=None, tmax=None):
    S = W.schema()
    rng = np.random.default_rng(seed)
    filters = units * rank
    tdt = np.int16 if state16 else np.int8
    tmax = tmax or (20000 if state16 else 127)
    tscale, sscale = (0.0007, 0.03) if state16 else (0.02, 0.25)
    t = [W.tensor((batch, n_in), scale=0.04, zp=xzp),                                          # 0 input
         W.tensor((filters, n_in), scale=0.011, zp=0, data=rng.integers(-127, 128, (filters, n_in))),
         W.tensor((filters, memory), tdt, scale=tscale, zp=0, data=rng.integers(-tmax, tmax, (filters, memory))),
         # TFLM's Prepare wants the bias scale = state scale * time-weight scale (within 1e-5)
         W.tensor((units,), np.int32, scale=tscale * sscale, zp=0, data=rng.integers(-3000, 3000, units)),
         W.tensor((batch, filters * memory), tdt, scale=sscale, zp=szp, variable=True),
         W.tensor((batch, units), scale=0.08, zp=4)]
    ins = [0, 1, 2, 3, 4] if bias else [0, 1, 2, -1, 4]
    fields = dict(rank=rank)
    if act is not None:
        fields["fusedActivationFunction"] = act
    ops = [W.op(S.BuiltinOperator.SVDF, ins, [5], "SVDFOptions", **fields)]
    return W.build(t, ops, [0], [5], name="svdf")


def _tflm_steps(blob, xs):
    from tflite_micro.python.tflite_micro import runtime
    it = runtime.Interpreter.from_bytes(blob, arena_size=1 << 20)
    outs = []
    for x in xs:
        it.set_input(x, 0)
        it.invoke()
        outs.append(np.array(it.get_output(0)))
    it.reset()
    it.set_input(xs[0], 0)
    it.invoke()
    outs.append(np.array(it.get_output(0)))
    return outs


def _pyembed_steps(g, xs):
    rt = g.compile()
    arena = rt.new_arena()
    outs = []
    for x in xs:
        rt.set_input(arena, 0, x)
        for step in range(len(rt.order)):
            rt.invoke_op(step, arena)
        outs.append(rt.get_output(arena, 0))
    rt.reset_variables(arena)
    rt.set_input(arena, 0, xs[0])
    for step in range(len(rt.order)):
        rt.invoke_op(step, arena)
    outs.append(rt.get_output(arena, 0))
    return outs


@pytest.mark.parametrize("kw", [dict(), dict(state16=False), dict(state16=False, szp=-7), dict(bias=False),
                                dict(rank=1, units=7), dict(batch=1, memory=1), dict(szp=300, xzp=11)])
def test_svdf_bit_exact_over_invokes_and_reset(kw):
    pytest.importorskip("tflite_micro")
    blob = svdf_model(seed=len(str(kw)), **kw)
    g = load_tflite_bytes(blob, name="svdf")
    assert not g.unsupported, g.summary()
    rng = np.random.default_rng(1)
    xs = [rng.integers(-128, 128, (kw.get("batch", 2), 12), dtype=np.int8) for _ in range(8)]
    if not kw.get("bias", True):
        # TFLM's int8 SVDF reads the bias tensor's scale at Prepare (no bias: it fails)
        got = _pyembed_steps(g, xs)
        assert len(got) == 9
        return
    want = _tflm_steps(blob, xs)
    got = _pyembed_steps(g, xs)
    bad = [(i, np.argwhere(a.reshape(b.shape) != b).tolist()) for i, (a, b) in enumerate(zip(got, want))
           if not np.array_equal(a.reshape(b.shape), b)]
    assert bad == [], bad
    # the state mattered: steps with the same input differ once the memory is filled
    assert any(not np.array_equal(got[0], o) for o in got[1:8])
    assert np.array_equal(got[8], got[0])           # after reset, as the first step


def test_svdf_refusals():
    """A state that is no variable tensor is a model error naming it; per-channel
    feature weights (TFLM reads one scale) are refused with the reason."""
    from pyembed.errors import ModelError
    S = W.schema()
    rng = np.random.default_rng(0)

    def model(variable=True, wf_scales=0.01):
        t = [W.tensor((1, 4), scale=0.04, zp=0),
             W.tensor((4, 4), scale=wf_scales, zp=0 if np.isscalar(wf_scales) else [0] * 4, axis=0,
                      data=rng.integers(-9, 9, (4, 4))),
             W.tensor((4, 3), np.int16, scale=0.001, zp=0, data=rng.integers(-9, 9, (4, 3))),
             W.tensor((2,), np.int32, scale=3e-5, zp=0, data=np.zeros(2)),
             W.tensor((1, 12), np.int16, scale=0.03, zp=0, variable=variable), W.tensor((1, 2), scale=0.08, zp=0)]
        return W.build(t, [W.op(S.BuiltinOperator.SVDF, [0, 1, 2, 3, 4], [5], "SVDFOptions", rank=2)], [0], [5])

    assert not load_tflite_bytes(model(), name="svdf").unsupported
    with pytest.raises(ModelError, match="tensor 4"):
        load_tflite_bytes(model(variable=False), name="svdf_novar")
    g = load_tflite_bytes(model(wf_scales=[0.01, 0.02, 0.01, 0.02]), name="svdf_pc")
    assert g.unsupported and "per channel" in g.operators[0].reason

def test_svdf_float_reference_tracks_the_int8_run():
    """pyembed check's float64 reference of one step from a zero state: the
    int8 output within a few LSBs of it."""
    from pyembed.model.float_ref import dequantize, run_float
    g = load_tflite_bytes(svdf_model(tmax=100), name="svdf")     # outputs inside the int8 range
    x = np.random.default_rng(3).integers(-128, 128, (2, 12), dtype=np.int8)
    y8 = g.run([x])[0].astype(np.float64)
    yt = g.tensors[g.outputs[0]]
    ref = run_float(g, [dequantize(g.tensors[g.inputs[0]], x)])[g.outputs[0]]
    lsb = np.abs((y8 - int(yt.zero_point[0])) * float(yt.scale[0]) - np.asarray(ref).reshape(y8.shape)) / float(
        yt.scale[0])
    assert 0 < np.abs(ref).max() and lsb.max() <= 3, (lsb.max(), ref)


def test_svdf_firmware_under_qemu(tmp_path):
    """One invoke on the Cortex-M4 board from the reset state (the state a
    variable tensor in the arena) == the host's."""
    import json

    from click.testing import CliRunner

    from pyembed.cli import main
    from pyembed.target import qemu
    if qemu.missing_tools() is not None:
        pytest.skip(str(qemu.missing_tools()))
    blob = svdf_model()
    (tmp_path / "svdf.tflite").write_bytes(blob)
    g = load_tflite_bytes(blob, name="svdf")
    x = np.random.default_rng(2).integers(-128, 128, (2, 12), dtype=np.int8)
    np.save(tmp_path / "x.npy", x)
    r = CliRunner().invoke(main, ["firmware", str(tmp_path / "svdf.tflite"), "--profile", "mps2-an386", "-o",
                                  str(tmp_path / "fw"), "--json", "--run", "--inputs", str(tmp_path / "x.npy")])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["bit_exact_with_host"] is True and not d["mismatches"]
    assert d["outputs"][0] == g.run([x])[0].ravel().tolist()
