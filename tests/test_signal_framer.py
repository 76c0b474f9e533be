"""CUSTOM:SignalFramer, SignalStacker and SignalOverlapAdd (codes 196-198,
pyembed.model.ops.signal_stream): bit-exact (==) with the tflite-micro
interpreter over several consecutive invokes (their ring buffers are state:
variable tensors here) and after reset(); one chain under QEMU on a
Cortex-M4 firmware.

TFLM leaves a framer frame, or the stacker's whole output, unwritten while it
is not available (valid false): those elements hold whatever its arena held.
The tests compare every element TFLM writes and the valid flag on every
invoke, and check that pyembed writes zeros where TFLM writes nothing; which
frames TFLM writes is found by counting its ring's occupancy (frame_step in
per frame, frame_step out per frame cut once frame_size are held)."""
import numpy as np
import pytest

from pyembed.errors import ModelError
from pyembed.model.load import load_tflite_bytes
from pyembed.model.tflite_writer import build, custom_op, tensor
from test_signal_ops import ours_sequence, rand, tflm_sequence


def framer_model(shape, fs, step, prefill):
    n = shape[-1] // step
    ts = [tensor(shape, np.int16), tensor(tuple(shape[:-1]) + (n, fs), np.int16), tensor((), np.bool_)]
    opts = {"frame_size": fs, "frame_step": step, "prefill": bool(prefill)}
    return build(ts, [custom_op("SignalFramer", [0], [1, 2], opts)], [0], [1, 2])


def stacker_model(nc, left, right, step):
    span = left + right + 1
    ts = [tensor((nc,), np.int16), tensor((nc * span,), np.int16), tensor((), np.bool_)]
    opts = {"num_channels": nc, "stacker_left_context": left, "stacker_right_context": right,
            "stacker_step": step}
    return build(ts, [custom_op("SignalStacker", [0], [1, 2], opts)], [0], [1, 2])


def overlap_add_model(shape, step, t=7):
    dt = np.float32 if t == 0 else np.int16
    ts = [tensor(shape, dt), tensor(tuple(shape[:-2]) + (shape[-2] * step,), dt)]
    return build(ts, [custom_op("SignalOverlapAdd", [0], [1], {"T": t, "frame_step": step})], [0], [1])


def framer_written(fs, step, prefill, n_frames, invokes):
    """[invoke][frame] -> does TFLM write that frame: its ring's occupancy,
    counted (prefill primes frame_size - frame_step zeros)."""
    held = fs - step if prefill else 0
    out = []
    for _ in range(invokes):
        row = []
        for _ in range(n_frames):
            held += step
            row.append(held >= fs)
            if held >= fs:
                held -= step
        out.append(row)
    return out


def compare_framer(blob, frames, fs, step, prefill, reset=False):
    g = load_tflite_bytes(blob)
    assert not g.unsupported, g.unsupported
    ref = tflm_sequence(blob, frames, reset=reset)
    got = [ours_sequence(g, [f])[0] for f in frames] if reset else ours_sequence(g, frames)
    n = frames[0][0].shape[-1] // step
    written = framer_written(fs, step, prefill, n, 1 if reset else len(frames))
    for k, (r, o) in enumerate(zip(ref, got)):
        w = written[0 if reset else k]
        assert r[1].dtype == o[1].dtype == np.bool_ and bool(r[1]) == bool(o[1]) == all(w), (k, r[1], o[1], w)
        assert r[0].dtype == o[0].dtype == np.int16 and r[0].shape == o[0].shape
        for f in range(n):
            if w[f]:
                assert np.array_equal(r[0][..., f, :], o[0][..., f, :]), (k, f, r[0][..., f, :], o[0][..., f, :])
            else:
                assert not o[0][..., f, :].any()
    return g, written


FRAMER_CASES = [((16,), 8, 4, False), ((16,), 8, 4, True), ((2, 12), 10, 4, False), ((2, 12), 10, 4, True),
                ((3, 6), 4, 6, False), ((8,), 8, 8, True), ((1, 2, 9), 7, 3, True), ((5,), 25, 5, False),
                ((2, 4), 9, 2, False), ((6,), 3, 1, True)]


@pytest.mark.parametrize("shape,fs,step,prefill", FRAMER_CASES)
def test_framer_sequence_bit_exact(shape, fs, step, prefill):
    """Eight consecutive invokes: every frame TFLM writes, and the valid flag, equal."""
    rng = np.random.default_rng(fs * 7 + step)
    frames = [[rand(rng, np.int16, shape)] for _ in range(8)]
    g, written = compare_framer(framer_model(shape, fs, step, prefill), frames, fs, step, prefill)
    assert any(all(w) for w in written)   # some invoke gave every frame
    hist = (fs - step) if prefill else (fs - 1) // step * step
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    state = sorted((t.dtype.name, t.size) for t in g.tensors if t.is_variable)
    assert state == ([("int16", rows * hist), ("int32", 1)] if hist else [])


@pytest.mark.parametrize("shape,fs,step,prefill", [((2, 12), 10, 4, False), ((16,), 8, 4, True)])
def test_framer_after_reset(shape, fs, step, prefill):
    """TFLM's reset() (before every invoke) against a new arena for each frame;
    and the carried state matters (a continuous run differs)."""
    rng = np.random.default_rng(5)
    frames = [[rand(rng, np.int16, shape)] for _ in range(4)]
    blob = framer_model(shape, fs, step, prefill)
    compare_framer(blob, frames, fs, step, prefill, reset=True)
    g = load_tflite_bytes(blob)
    rt = g.compile()
    arena = rt.new_arena()
    for f in frames[:3]:   # GraphRuntime.reset_variables between runs on one arena
        rt.set_input(arena, 0, f[0])
        for step_ in range(len(rt.order)):
            rt.invoke_op(step_, arena)
    rt.reset_variables(arena)
    rt.set_input(arena, 0, frames[3][0])
    for step_ in range(len(rt.order)):
        rt.invoke_op(step_, arena)
    assert np.array_equal(rt.get_output(arena, 0), ours_sequence(g, [frames[3]])[0][0])
    cont, fresh = ours_sequence(g, frames)[3][0], ours_sequence(g, [frames[3]])[0][0]
    assert not np.array_equal(cont, fresh)


def test_framer_float_reference_and_refusals():
    from pyembed.model.ops.signal_stream import float_reference, float_reference_extra
    rng = np.random.default_rng(2)
    for shape, fs, step, prefill in FRAMER_CASES:
        g = load_tflite_bytes(framer_model(shape, fs, step, prefill))
        x = rand(rng, np.int16, shape)
        ours = ours_sequence(g, [[x]])[0]
        op = g.operators[0]
        assert np.array_equal(float_reference(g, op, [x]), ours[0].astype(np.float64)), (shape, fs, step)
        assert float(float_reference_extra(g, op, [x])[0]) == float(ours[1])
    with pytest.raises(ModelError, match="prefill with frame_step"):
        load_tflite_bytes(framer_model((12,), 4, 6, True))
    with pytest.raises(ModelError, match="multiple of"):
        load_tflite_bytes(framer_model((10,), 8, 4, False))
    bad = build([tensor((8,), np.int16), tensor((2, 5), np.int16), tensor((), np.bool_)],
                [custom_op("SignalFramer", [0], [1, 2], {"frame_size": 4, "frame_step": 4, "prefill": False})],
                [0], [1, 2])
    with pytest.raises(ModelError, match="expected \\[2, 4\\]"):
        load_tflite_bytes(bad)
    with pytest.raises(ModelError, match="frame_step' is missing"):
        load_tflite_bytes(build([tensor((8,), np.int16), tensor((2, 4), np.int16), tensor((), np.bool_)],
                                [custom_op("SignalFramer", [0], [1, 2], {"frame_size": 4})], [0], [1, 2]))
    g = load_tflite_bytes(build([tensor((8,), np.int32), tensor((2, 4), np.int32), tensor((), np.bool_)],
                                [custom_op("SignalFramer", [0], [1, 2], {"frame_size": 4, "frame_step": 4,
                                                                         "prefill": False})], [0], [1, 2]))
    assert g.unsupported and "only int16" in g.operators[0].reason


# -- stacker --------------------------------------------------------------------------

def compare_stacker(blob, frames, reset=False):
    g = load_tflite_bytes(blob)
    assert not g.unsupported, g.unsupported
    ref = tflm_sequence(blob, frames, reset=reset)
    got = [ours_sequence(g, [f])[0] for f in frames] if reset else ours_sequence(g, frames)
    valid = []
    for k, (r, o) in enumerate(zip(ref, got)):
        assert r[1].dtype == o[1].dtype == np.bool_ and bool(r[1]) == bool(o[1]), (k, r[1], o[1])
        assert r[0].dtype == o[0].dtype == np.int16 and r[0].shape == o[0].shape
        if bool(r[1]):
            assert np.array_equal(r[0], o[0]), (k, r[0], o[0])
        else:
            assert not o[0].any()
        valid.append(bool(r[1]))
    return g, valid


STACKER_CASES = [(4, 1, 1, 1), (3, 2, 0, 1), (5, 0, 2, 2), (2, 3, 1, 3), (4, 0, 0, 1), (6, 1, 2, 4),
                 (1, 2, 3, 2)]


@pytest.mark.parametrize("nc,left,right,step", STACKER_CASES)
def test_stacker_sequence_bit_exact(nc, left, right, step):
    """Ten consecutive invokes: the valid flag on each, the stack when valid."""
    rng = np.random.default_rng(nc * 13 + left * 5 + right + step)
    frames = [[rand(rng, np.int16, (nc,))] for _ in range(10)]
    g, valid = compare_stacker(stacker_model(nc, left, right, step), frames)
    assert sum(valid) >= 2
    if right:
        assert not valid[0]
    state = sorted((t.dtype.name, t.size) for t in g.tensors if t.is_variable)
    span = left + right + 1
    assert state == sorted([("int32", 1)] + ([("int16", nc * (span - 1))] if span > 1 else []))


def test_stacker_after_reset():
    rng = np.random.default_rng(9)
    frames = [[rand(rng, np.int16, (3,))] for _ in range(4)]
    compare_stacker(stacker_model(3, 2, 0, 1), frames, reset=True)   # valid at once: left copies
    _, valid = compare_stacker(stacker_model(3, 1, 1, 1), frames, reset=True)
    assert not any(valid)   # after every reset the right context is missing again


def test_stacker_float_reference_and_refusals():
    from pyembed.model.ops.signal_stream import float_reference, float_reference_extra
    rng = np.random.default_rng(4)
    for nc, left, right, step in STACKER_CASES:
        g = load_tflite_bytes(stacker_model(nc, left, right, step))
        x = rand(rng, np.int16, (nc,))
        ours = ours_sequence(g, [[x]])[0]
        op = g.operators[0]
        assert np.array_equal(float_reference(g, op, [x]), ours[0].astype(np.float64))
        assert float(float_reference_extra(g, op, [x])[0]) == float(ours[1])
    with pytest.raises(ModelError, match="stacker_step"):
        load_tflite_bytes(stacker_model(3, 1, 0, 3))
    bad = build([tensor((4,), np.int16), tensor((8,), np.int16), tensor((), np.bool_)],
                [custom_op("SignalStacker", [0], [1, 2], {"num_channels": 4, "stacker_left_context": 1,
                                                         "stacker_right_context": 1, "stacker_step": 1})],
                [0], [1, 2])
    with pytest.raises(ModelError, match="num_channels"):
        load_tflite_bytes(bad)


# -- overlap-add ------------------------------------------------------------------------

OA_CASES = [((3, 8), 4), ((2, 3, 8), 2), ((1, 5), 5), ((4, 6), 1), ((2, 10), 3), ((2, 1, 7), 7)]


@pytest.mark.parametrize("shape,step", OA_CASES)
def test_overlap_add_sequence_bit_exact(shape, step):
    """Eight invokes of full-range int16 frames (the sums saturate often),
    then eight of small ones (they do not)."""
    rng = np.random.default_rng(shape[-1] * 3 + step)
    blob = overlap_add_model(shape, step)
    frames = [[rand(rng, np.int16, shape)] for _ in range(8)]
    frames += [[rand(rng, np.int16, shape, -300, 300)] for _ in range(8)]
    g = load_tflite_bytes(blob)
    assert not g.unsupported
    ref, got = tflm_sequence(blob, frames), ours_sequence(g, frames)
    for k, (r, o) in enumerate(zip(ref, got)):
        assert r[0].dtype == o[0].dtype == np.int16 and r[0].shape == o[0].shape
        assert np.array_equal(r[0], o[0]), (k, np.flatnonzero(r[0] != o[0])[:8])
    rows = int(np.prod(shape[:-2], dtype=np.int64))
    state = [(t.dtype.name, t.size) for t in g.tensors if t.is_variable]
    assert state == ([("int16", rows * (shape[-1] - step))] if shape[-1] > step else [])


@pytest.mark.parametrize("shape,step", [((3, 8), 4), ((2, 3, 8), 2), ((1, 5), 5), ((4, 6), 1)])
def test_overlap_add_float32_sequence_bit_exact(shape, step):
    """T = FLOAT32: eight invokes of values of every magnitude (sums that
    round, cancel to -0.0 / +0.0, overflow to inf), bit for bit (the float32
    bits compared as integers), then after reset()."""
    rng = np.random.default_rng(shape[-1] * 5 + step)
    blob = overlap_add_model(shape, step, t=0)

    def draw():
        v = (rng.standard_normal(shape) * 10.0 ** rng.integers(-30, 39, size=shape)).astype(np.float32)
        v[rng.random(shape) < 0.1] = -0.0
        return v
    frames = [[draw()] for _ in range(8)]
    g = load_tflite_bytes(blob)
    assert not g.unsupported, g.unsupported
    for ref, got in ((tflm_sequence(blob, frames), ours_sequence(g, frames)),
                     (tflm_sequence(blob, frames, reset=True), [ours_sequence(g, [f])[0] for f in frames])):
        for k, (r, o) in enumerate(zip(ref, got)):
            assert r[0].dtype == o[0].dtype == np.float32 and r[0].shape == o[0].shape
            assert np.array_equal(r[0].view(np.uint32), o[0].view(np.uint32)), (k, r[0], o[0])
    state = [(t.dtype.name, t.size) for t in g.tensors if t.is_variable]
    rows = int(np.prod(shape[:-2], dtype=np.int64))
    assert state == ([("float32", rows * (shape[-1] - step))] if shape[-1] > step else [])


def test_overlap_add_after_reset_and_float_reference():
    from pyembed.model.ops.signal_stream import float_reference
    rng = np.random.default_rng(8)
    shape, step = (2, 3, 8), 3
    blob = overlap_add_model(shape, step)
    g = load_tflite_bytes(blob)
    frames = [[rand(rng, np.int16, shape, -1000, 1000)] for _ in range(3)]
    ref_reset = tflm_sequence(blob, frames, reset=True)
    for k, f in enumerate(frames):
        alone = ours_sequence(g, [f])[0][0]
        assert np.array_equal(ref_reset[k][0], alone)
        # small values: no saturation, so the float64 sums are exact
        assert np.array_equal(float_reference(g, g.operators[0], [f[0]]), alone.astype(np.float64))
    assert not np.array_equal(tflm_sequence(blob, frames)[1][0], ref_reset[1][0])


def test_overlap_add_refusals():
    with pytest.raises(ModelError, match="frame_step 6 > frame_size 4"):
        load_tflite_bytes(overlap_add_model((2, 4), 6))
    bad = build([tensor((3, 8), np.int16), tensor((10,), np.int16)],
                [custom_op("SignalOverlapAdd", [0], [1], {"T": 7, "frame_step": 4})], [0], [1])
    with pytest.raises(ModelError, match="expected \\[12\\]"):
        load_tflite_bytes(bad)
    g = load_tflite_bytes(build([tensor((3, 8), np.int32), tensor((12,), np.int32)],
                                [custom_op("SignalOverlapAdd", [0], [1], {"T": 2, "frame_step": 4})], [0], [1]))
    assert g.unsupported and "INT16" in g.operators[0].reason
    g = load_tflite_bytes(build([tensor((3, 8), np.int16), tensor((12,), np.int16)],
                                [custom_op("SignalOverlapAdd", [0], [1], {"T": 0, "frame_step": 4})], [0], [1]))
    assert g.unsupported and "only float32" in g.operators[0].reason   # T says float32, the tensors int16


# -- a chain: frames -> overlap-add -> stack ----------------------------------------------

def _chain_model():
    """x [32] -> Framer (16 every 8, prefill) [4, 16] -> OverlapAdd (8) [32]
    -> Stacker (32 channels, left 1) [64]; outputs the stack and both flags."""
    ts = [tensor((32,), np.int16), tensor((4, 16), np.int16), tensor((), np.bool_), tensor((32,), np.int16),
          tensor((64,), np.int16), tensor((), np.bool_)]
    ops = [custom_op("SignalFramer", [0], [1, 2], {"frame_size": 16, "frame_step": 8, "prefill": True}),
           custom_op("SignalOverlapAdd", [1], [3], {"T": 7, "frame_step": 8}),
           custom_op("SignalStacker", [3], [4, 5], {"num_channels": 32, "stacker_left_context": 1,
                                                    "stacker_right_context": 0, "stacker_step": 1})]
    return build(ts, ops, [0], [4, 2, 5])


def test_chain_bit_exact():
    rng = np.random.default_rng(12)
    blob = _chain_model()
    frames = [[rand(rng, np.int16, (32,), -8000, 8000)] for _ in range(6)]
    g = load_tflite_bytes(blob)
    assert not g.unsupported
    for r, o in zip(tflm_sequence(blob, frames), ours_sequence(g, frames)):
        assert bool(r[1]) and bool(r[2]) and bool(o[1]) and bool(o[2])   # prefill, left context only
        assert np.array_equal(r[0], o[0])


def _qemu_missing():
    from pyembed.target import qemu
    return qemu.missing_tools()


@pytest.mark.skipif(_qemu_missing() is not None, reason=str(_qemu_missing()))
def test_chain_firmware_under_qemu(tmp_path):
    """A Cortex-M4 (mps2-an386) firmware of the chain gives the host run (== TFLM) on its first invoke."""
    from pyembed.target.firmware import build_project, generate, run_project
    blob = _chain_model()
    g = load_tflite_bytes(blob, name="signal_stream_chain")
    proj = generate(g, "mps2-an386", tmp_path / "fw")
    build_project(proj.outdir)
    x = (np.arange(32, dtype=np.int16) - 16) * 900
    want = ours_sequence(g, [[x]])[0]
    ref = tflm_sequence(blob, [[x]])[0]
    for a, b in zip(want, ref):
        assert np.array_equal(a, b)
    assert want[0].any()
    run = run_project(proj, [x])
    for k, w in enumerate(want):
        got = np.asarray(run.outputs[k]).reshape(w.shape)
        assert np.array_equal(got.astype(np.int64), w.astype(np.int64)), k
