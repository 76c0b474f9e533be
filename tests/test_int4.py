"""Packed int4 weights (TFLite TensorType INT4) for FULLY_CONNECTED: the
importer unpacks them for the Python paths and rewrites each layer into
FULLY_CONNECTED@w4 (code 113, C pe_fully_connected_w4_s8) on the packed bytes;
outputs == the tflite-micro interpreter's on models written here (odd depths,
depths past one unpacked slice, several row tiles, bias or none, fused RELU,
batches), per-channel scales == LiteRT's reference kernels (TFLM's
FULLY_CONNECTED refuses per-channel int4 filters) and the int8 twin under
TFLM; the plan's flash holds half the weight bytes; one Cortex-M4 firmware
under QEMU == the host."""
import importlib.util

import numpy as np
import pytest

from pyembed.errors import ModelError, PyEmbedError
from pyembed.model import tflite_writer as W
from pyembed.model.load import load_tflite_bytes
from pyembed.model.ops.fc_w4 import W4_TYPE, packed_bytes

HAVE_TFLM = importlib.util.find_spec("tflite_micro") is not None
HAVE_LITERT = importlib.util.find_spec("ai_edge_litert") is not None
needs_tflm = pytest.mark.skipif(not HAVE_TFLM, reason="tflite-micro not installed")


def _fc_model(out_f, depth, batches=1, per_channel=False, bias=True, relu=False, int4=True, seed=0):
    """One FULLY_CONNECTED [batches, depth] -> [batches, out_f] on int4-range
    weights, stored as INT4 (int4=True) or as int8 (the twin)."""
    S = W.schema()
    rng = np.random.default_rng(seed)
    w = rng.integers(-8, 8, size=(out_f, depth))
    ws = [float(s) for s in rng.uniform(0.02, 0.12, size=out_f)] if per_channel else 0.06
    t = [W.tensor((batches, depth), scale=0.05, zp=-3),
         W.tensor((out_f, depth), scale=ws, zp=[0] * out_f if per_channel else 0, data=w, int4=int4),
         W.tensor((out_f,), np.int32, scale=0.003, zp=0, data=rng.integers(-800, 800, size=out_f)),
         W.tensor((batches, out_f), scale=0.1 * np.sqrt(depth) / 4, zp=2)]
    f = {"fusedActivationFunction": S.ActivationFunctionType.RELU} if relu else {}
    op = W.op(S.BuiltinOperator.FULLY_CONNECTED, [0, 1, 2 if bias else -1], [3], "FullyConnectedOptions", **f)
    return W.build(t, [op], [0], [3], name="int4_fc")


def _inputs(batches, depth, n, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(-128, 128, size=(batches, depth)).astype(np.int8) for _ in range(n)]


def test_import_rewrites_onto_the_packed_bytes():
    blob = _fc_model(7, 13, per_channel=False)
    g = load_tflite_bytes(blob, name="m")
    twin = load_tflite_bytes(_fc_model(7, 13, int4=False), name="m8")
    assert [op.type for op in g.operators] == [W4_TYPE]
    op = g.operators[0]
    packed = g.tensors[op.inputs[1]]
    assert packed.dtype == np.int8 and packed.shape == (46,) == (packed_bytes(7, 13),)
    # the unpacked int8 tensor left the constants; its values are the twin's
    assert not g.tensors[1].is_constant and g.tensors[1].type_name == f"INT4 (packed into tensor {op.inputs[1]})"
    from pyembed.model.ops.fc_w4 import unpacked_weights
    assert unpacked_weights(g, op).tolist() == twin.tensors[1].data.tolist()
    # the packed bytes are the file's (the writer packs in numpy, the C pe_fc_w4_pack here)
    assert packed.data.view(np.uint8).tolist() == W.pack_int4(twin.tensors[1].data).tolist()
    assert g.int4_fc == [{"op": 0, "type": "FULLY_CONNECTED", "shape": [7, 13], "result": "packed", "int8_bytes": 91,
                          "int4_bytes": 46}]
    assert g.weights_bytes == twin.weights_bytes - 91 + 46
    from pyembed._ext import _graph
    assert op.scratch_bytes == _graph.fc_w4_sizes(7, 13)[1] == 4 * 7 + 7 * 13 + 3


# (features, depth, batches, bias, relu): odd depth and odd O*K, depths not a
# multiple of 4 or 8, a depth past one unpacked slice (PE_FC_W4_SLICE 512),
# features past one row tile (PE_FC_W4_ROWS 8), depth 1
SHAPES = [(3, 5, 1, True, False), (7, 13, 2, False, True), (12, 30, 1, True, True), (33, 7, 3, True, False),
          (20, 600, 2, True, False), (9, 1, 1, False, False), (17, 1100, 1, False, True)]


@needs_tflm
@pytest.mark.parametrize("out_f, depth, batches, bias, relu", SHAPES)
def test_per_tensor_equals_tflm(out_f, depth, batches, bias, relu):
    seed = out_f * 1000 + depth
    blob = _fc_model(out_f, depth, batches, False, bias, relu, seed=seed)
    g = load_tflite_bytes(blob, name="m")
    assert [op.type for op in g.operators] == [W4_TYPE]
    twin = load_tflite_bytes(_fc_model(out_f, depth, batches, False, bias, relu, int4=False, seed=seed), name="m8")
    for k, x in enumerate(_inputs(batches, depth, 3, seed)):
        want = W.tflm_run(blob, [x])[0]
        got = np.asarray(g.run(x)[0])
        assert got.tolist() == want.tolist(), f"sample {k}: TFLM {want.tolist()} pyembed {got.tolist()}"
        # the other rounding presets as on the int8 layer
        for rounding in ("single", "litert"):
            assert np.asarray(g.run(x, rounding=rounding)[0]).tolist() == \
                np.asarray(twin.run(x, rounding=rounding)[0]).tolist()
    if HAVE_LITERT:
        x = _inputs(batches, depth, 1, seed + 1)[0]
        assert np.asarray(g.run(x, rounding="litert")[0]).tolist() == W.litert_run(blob, [x])[0].tolist()


@needs_tflm
@pytest.mark.parametrize("out_f, depth, batches, bias, relu", [(7, 13, 2, True, False), (20, 600, 1, False, True),
                                                              (11, 31, 1, True, True)])
def test_per_channel_equals_litert_and_the_int8_twin_under_tflm(out_f, depth, batches, bias, relu):
    seed = out_f + depth
    blob = _fc_model(out_f, depth, batches, True, bias, relu, seed=seed)
    blob8 = _fc_model(out_f, depth, batches, True, bias, relu, int4=False, seed=seed)
    g = load_tflite_bytes(blob, name="m")
    assert [op.type for op in g.operators] == [W4_TYPE]
    for k, x in enumerate(_inputs(batches, depth, 3, seed)):
        got = np.asarray(g.run(x)[0])
        want = W.tflm_run(blob8, [x])[0]
        assert got.tolist() == want.tolist(), f"sample {k}: TFLM (int8 twin) {want.tolist()} pyembed {got.tolist()}"
        if HAVE_LITERT:
            assert np.asarray(g.run(x, rounding="litert")[0]).tolist() == W.litert_run(blob, [x])[0].tolist()


def test_float_reference_is_the_int8_twins():
    from pyembed.model.float_ref import dequantize, run_float
    g = load_tflite_bytes(_fc_model(12, 30, 2, True, True, True, seed=4), name="m")
    twin = load_tflite_bytes(_fc_model(12, 30, 2, True, True, True, int4=False, seed=4), name="m8")
    x = _inputs(2, 30, 1, 9)[0]
    xr = dequantize(g.tensors[g.inputs[0]], x)
    a, b = run_float(g, xr), run_float(twin, xr)
    out = g.outputs[0]
    assert np.allclose(a[out], b[out], rtol=0, atol=1e-12) and np.abs(b[out]).max() > 0


def test_plan_flash_holds_half_the_weights():
    from pyembed.target.planning import plan_for_target
    blob = _fc_model(64, 250, seed=2)
    p4 = plan_for_target(load_tflite_bytes(blob, name="m4"), "mps2-an386").plan
    p8 = plan_for_target(load_tflite_bytes(_fc_model(64, 250, int4=False, seed=2), name="m8"), "mps2-an386").plan
    w8 = 64 * 250

    def weight_bytes(plan):   # the plan's flash items of the weight tensor (int8 [64, 250] or its packed form)
        return sum(f.size for f in plan.flash if f.tensor >= 0 and f.size >= 8000)

    print(f"\nplan flash: int8 weights {p8.flash_size:,} B (weight tensor {weight_bytes(p8):,} B), int4 weights "
          f"{p4.flash_size:,} B (packed {weight_bytes(p4):,} B): {p8.flash_size - p4.flash_size:,} B saved")
    assert weight_bytes(p8) == w8 and weight_bytes(p4) == w8 // 2
    # the whole flash drops by half the weights less the int4 operator's parameter words
    # (typed FULLY_CONNECTED parameters live in the operator table; @w4 has 10 int32 words)
    words = sum(f.size for f in p4.flash if f.tensor < 0)
    assert words == 40
    assert w8 // 2 - words - 16 <= p8.flash_size - p4.flash_size <= w8 // 2 - words


def test_shared_weights_packed_once_and_skips_reported():
    S = W.schema()
    rng = np.random.default_rng(1)
    w = rng.integers(-8, 8, size=(6, 6))
    t = [W.tensor((1, 6), scale=0.05, zp=0), W.tensor((6, 6), scale=0.05, zp=0, data=w, int4=True),
         W.tensor((1, 6), scale=0.1, zp=1), W.tensor((1, 6), scale=0.1, zp=-1)]
    ops = [W.op(S.BuiltinOperator.FULLY_CONNECTED, [0, 1, -1], [2], "FullyConnectedOptions"),
           W.op(S.BuiltinOperator.FULLY_CONNECTED, [2, 1, -1], [3], "FullyConnectedOptions")]
    g = load_tflite_bytes(W.build(t, ops, [0], [3]), name="shared")
    assert [op.type for op in g.operators] == [W4_TYPE] * 2
    assert g.operators[0].inputs[1] == g.operators[1].inputs[1]
    assert [r["int4_bytes"] for r in g.int4_fc] == [18, 0]
    # a layer the runtime does not execute (a weight zero point other than 0) stays, reported
    t[1] = W.tensor((6, 6), scale=0.05, zp=1, data=w, int4=True)
    g = load_tflite_bytes(W.build(t, ops[:1], [0], [2]), name="zp")
    assert [op.type for op in g.operators] == ["FULLY_CONNECTED"] and g.unsupported == [(0, "FULLY_CONNECTED")]
    assert g.int4_fc[0]["result"] == "skipped: not executed by pyembed (weight zero points other than 0)"


def test_bad_input_errors():
    import flatbuffers

    from pyembed._ext import _graph
    from pyembed.model.ops import prepare_operator
    S = W.schema()
    blob = _fc_model(3, 5)
    # a packed buffer of the wrong length
    m = S.ModelT.InitFromObj(S.Model.GetRootAs(blob, 0))
    tb = m.subgraphs[0].tensors[1]
    m.buffers[tb.buffer].data = np.zeros(7, np.uint8)
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    with pytest.raises(ModelError, match=r"15 int4 values, 8 packed bytes\) but its buffer \d+ holds 7 bytes"):
        load_tflite_bytes(bytes(b.Output()), name="bad")
    with pytest.raises(PyEmbedError, match="pe_fc_w4_pack"):
        _graph.fc_w4_pack(np.array([1, 9], np.int8))
    with pytest.raises(PyEmbedError, match="count: expected 0..4"):
        _graph.fc_w4_unpack(np.zeros(2, np.uint8), 5)
    with pytest.raises(ValueError, match=r"int4 values must lie in \[-8, 7\]"):
        W.pack_int4([0, 8])
    with pytest.raises(PyEmbedError):
        _graph.fc_w4_sizes(4, 40000)              # K > PE_FC_MAX_DEPTH
    g = load_tflite_bytes(blob, name="m")
    op = g.operators[0]
    op.options.pop("depth")
    with pytest.raises(ModelError, match="options lack 'depth'"):
        prepare_operator(g, op, "m")
    g = load_tflite_bytes(blob, name="m")
    op = g.operators[0]
    op.options["features"] = 4
    with pytest.raises(ModelError, match=r"packed weights shape \[8\]: expected \[10\]"):
        prepare_operator(g, op, "m")


def _conv_model(kh, kw, stride, per_channel, relu, seed, int4=True):
    S = W.schema()
    rng = np.random.default_rng(seed)
    co, ci = 6, 5
    w = rng.integers(-8, 8, size=(co, kh, kw, ci))
    ws = [float(v) for v in rng.uniform(0.02, 0.1, size=co)] if per_channel else 0.05
    oh = (7 + stride - 1) // stride
    t = [W.tensor((1, 7, 7, ci), scale=0.05, zp=-3),
         W.tensor((co, kh, kw, ci), scale=ws, zp=[0] * co if per_channel else 0, axis=0, data=w, int4=int4),
         W.tensor((co,), np.int32, scale=0.0025, zp=0, data=rng.integers(-300, 300, size=co)),
         W.tensor((1, oh, oh, co), scale=0.25 if kh > 1 else 0.1, zp=1)]
    f = {"fusedActivationFunction": S.ActivationFunctionType.RELU} if relu else {}
    op = W.op(S.BuiltinOperator.CONV_2D, [0, 1, 2], [3], "Conv2DOptions", padding=S.Padding.SAME,
              strideH=stride, strideW=stride, dilationHFactor=1, dilationWFactor=1, **f)
    return W.build(t, [op], [0], [3])


@needs_tflm
@pytest.mark.parametrize("kh, stride, per_channel, relu, packed", [
    (1, 1, True, False, True), (1, 1, False, True, True),      # pointwise: FULLY_CONNECTED@w4 over the pixels
    (3, 1, True, False, False), (3, 1, False, True, False),    # 3x3: CONV_2D@w4 on the packed filter
    (1, 2, True, False, False)])                               # strided pointwise: CONV_2D@w4
def test_conv_2d_on_int4_weights(kh, stride, per_channel, relu, packed):
    """CONV_2D on an INT4 filter == TFLM and LiteRT, on the packed bytes
    (half the filter's flash): a 1x1 stride-1 one as FULLY_CONNECTED@w4,
    the others as CONV_2D@w4 (more shapes: tests/test_int4_conv.py)."""
    from pyembed.model.ops.conv_w4 import CONV_W4_TYPE
    seed = kh * 10 + stride + 2 * per_channel
    blob = _conv_model(kh, kh, stride, per_channel, relu, seed)
    g = load_tflite_bytes(blob, name="conv4")
    twin = load_tflite_bytes(_conv_model(kh, kh, stride, per_channel, relu, seed, int4=False), name="conv8")
    n_w = 6 * kh * kh * 5
    assert [op.type for op in g.operators] == [W4_TYPE if packed else CONV_W4_TYPE]
    row = g.int4_fc[0]
    assert row["type"] == "CONV_2D" and row["shape"] == [6, kh, kh, 5]
    assert row["result"] == "packed" and row["int4_bytes"] == n_w // 2
    assert g.weights_bytes == twin.weights_bytes - n_w // 2
    for x in _inputs(1, 7 * 7 * 5, 2, seed=3):
        x = x.reshape(1, 7, 7, 5)
        got = np.asarray(g.run(x)[0])
        assert got.tolist() == W.tflm_run(blob, [x])[0].tolist()
        assert len(set(got.ravel().tolist())) > 4
        if HAVE_LITERT:
            assert np.asarray(g.run(x, rounding="litert")[0]).tolist() == W.litert_run(blob, [x])[0].tolist()
    from pyembed.model.float_ref import dequantize, run_float
    xr = dequantize(g.tensors[g.inputs[0]], x)
    assert np.allclose(run_float(g, xr)[g.outputs[0]], run_float(twin, xr)[twin.outputs[0]], rtol=0, atol=1e-12)


def _qemu_missing():
    from pyembed.target import qemu
    return qemu.missing_tools()


@pytest.mark.skipif(_qemu_missing() is not None, reason=str(_qemu_missing()))
def test_firmware_on_cortex_m4_equals_host_and_tflm(tmp_path):
    """One mps2-an386 (Cortex-M4, DSP build) firmware of a three-layer int4
    MLP, 600 -> 40 (RELU) -> 9 (no bias) -> 5 (odd depth, rows starting
    mid-byte), all on the DSP path reading the packed words, and beside it
    600 -> 1 (its widened input does not fit the tile scratch: unpacked
    tiles, a depth past one slice): its outputs == the host run == TFLM on
    two samples."""
    from pyembed.target.firmware import build_project, generate, run_project
    S = W.schema()
    rng = np.random.default_rng(3)
    t = [W.tensor((1, 600), scale=0.05, zp=-3),
         W.tensor((40, 600), scale=0.02, zp=0, data=rng.integers(-8, 8, size=(40, 600)), int4=True),
         W.tensor((40,), np.int32, scale=0.001, zp=0, data=rng.integers(-500, 500, size=40)),
         W.tensor((1, 40), scale=0.3, zp=-100),
         W.tensor((9, 40), scale=0.05, zp=0, data=rng.integers(-8, 8, size=(9, 40)), int4=True),
         W.tensor((1, 9), scale=0.4, zp=-1),
         W.tensor((5, 9), scale=0.07, zp=0, data=rng.integers(-8, 8, size=(5, 9)), int4=True),
         W.tensor((5,), np.int32, scale=0.028, zp=0, data=rng.integers(-50, 50, size=5)),
         W.tensor((1, 5), scale=0.2, zp=4),
         W.tensor((1, 600), scale=0.02, zp=0, data=rng.integers(-8, 8, size=(1, 600)), int4=True),
         W.tensor((1, 1), scale=0.3, zp=-5)]
    ops = [W.op(S.BuiltinOperator.FULLY_CONNECTED, [0, 1, 2], [3], "FullyConnectedOptions",
                fusedActivationFunction=S.ActivationFunctionType.RELU),
           W.op(S.BuiltinOperator.FULLY_CONNECTED, [3, 4, -1], [5], "FullyConnectedOptions"),
           W.op(S.BuiltinOperator.FULLY_CONNECTED, [5, 6, 7], [8], "FullyConnectedOptions"),
           W.op(S.BuiltinOperator.FULLY_CONNECTED, [0, 9, -1], [10], "FullyConnectedOptions")]
    blob = W.build(t, ops, [0], [8, 10], name="int4_mlp")
    g = load_tflite_bytes(blob, name="int4_mlp")
    proj = generate(g, "mps2-an386", tmp_path / "fw")
    assert [o["type"] for o in proj.ops] == [W4_TYPE] * 4
    assert "PE_GOP_FULLY_CONNECTED_W4" in (tmp_path / "fw" / "model" / "model_graph.c").read_text()
    build_project(proj.outdir)
    for k, x in enumerate(_inputs(1, 600, 2, seed=8)):
        run = run_project(proj, [x])
        host = g.run(x)
        tflm = W.tflm_run(blob, [x]) if HAVE_TFLM else host
        assert len(set(np.asarray(host[0]).ravel().tolist())) > 1
        for i in range(2):
            want = np.asarray(host[i])
            got = np.asarray(run.outputs[i]).reshape(want.shape)
            assert got.tolist() == want.tolist(), f"sample {k} output {i}: firmware {got.tolist()} host {want.tolist()}"
            assert got.tolist() == np.asarray(tflm[i]).tolist()
