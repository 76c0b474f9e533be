"""CONV_2D@w4 (code 118, C pe_conv2d_w4_s8): CONV_2D on TFLite's packed
INT4 filters of any kernel size, stride, padding, dilation and fused
activation run on the packed bytes; outputs == the tflite-micro interpreter
(which unpacks INT4 filters and runs its int8 convolution) on models written
here with pyembed.model.tflite_writer; the flash holds half the filter; the
float64 reference equals the int8 twin's; one Cortex-M4 (DSP build)
firmware under QEMU == the host == TFLM."""
import importlib.util

import numpy as np
import pytest

from pyembed.model import tflite_writer as W
from pyembed.model.load import load_tflite_bytes
from pyembed.model.ops.conv_w4 import CONV_W4_TYPE

needs_tflm = pytest.mark.skipif(importlib.util.find_spec("tflite_micro") is None,
                                reason="tflite-micro not installed")


def _out(n, k, s, d, same):
    eff = (k - 1) * d + 1
    return -(-n // s) if same else (n - eff) // s + 1


def _conv_model(hw, ci, co, k, stride=(1, 1), dil=(1, 1), same=True, per_channel=True, act=None,
                bias=True, batches=1, int4=True, seed=0, groups=1):
    S = W.schema()
    rng = np.random.default_rng(seed)
    kh, kw = k
    w = rng.integers(-8, 8, size=(co, kh, kw, ci // groups))
    ws = [float(v) for v in rng.uniform(0.02, 0.1, size=co)] if per_channel else 0.05
    oh, ow = (_out(hw[i], k[i], stride[i], dil[i], same) for i in range(2))
    y_scale = 0.02 * np.sqrt(kh * kw * ci / groups)
    t = [W.tensor((batches, hw[0], hw[1], ci), scale=0.05, zp=-3),
         W.tensor((co, kh, kw, ci // groups), scale=ws, zp=[0] * co if per_channel else 0, axis=0, data=w, int4=int4),
         W.tensor((co,), np.int32, scale=0.0025, zp=0, data=rng.integers(-300, 300, size=co)),
         W.tensor((batches, oh, ow, co), scale=float(y_scale), zp=1)]
    f = {"fusedActivationFunction": getattr(S.ActivationFunctionType, act)} if act else {}
    op = W.op(S.BuiltinOperator.CONV_2D, [0, 1, 2 if bias else -1], [3], "Conv2DOptions",
              padding=S.Padding.SAME if same else S.Padding.VALID, strideH=stride[0], strideW=stride[1],
              dilationHFactor=dil[0], dilationWFactor=dil[1], **f)
    return W.build(t, [op], [0], [3], name="int4_conv")


CASES = {   # hw, ci, co, k, stride, dilation, same, per_channel, act, bias, batches[, groups]
    "3x3": ((9, 9), 8, 8, (3, 3), (1, 1), (1, 1), True, True, None, True, 1),
    "3x3_odd_depth_relu": ((8, 7), 5, 7, (3, 3), (1, 1), (1, 1), True, False, "RELU", True, 1),
    "5x5_stride2": ((11, 11), 3, 6, (5, 5), (2, 2), (1, 1), True, True, None, True, 1),
    "3x3_stride2_valid": ((10, 9), 4, 9, (3, 3), (2, 2), (1, 1), False, True, "RELU6", False, 1),
    "3x3_dilated": ((12, 12), 6, 5, (3, 3), (1, 1), (2, 2), True, True, None, True, 1),
    "2x3_dil_stride": ((13, 10), 7, 10, (2, 3), (2, 1), (1, 3), False, True, None, True, 1),
    "1x1_stride2": ((8, 8), 16, 12, (1, 1), (2, 2), (1, 1), True, False, None, True, 1),
    "7x1_batches": ((10, 6), 3, 4, (7, 1), (1, 1), (1, 1), True, True, "RELU", True, 2),
    "3x3_wide": ((6, 6), 40, 17, (3, 3), (1, 1), (1, 1), True, True, None, True, 1),
    "3x3_grouped": ((7, 7), 8, 6, (3, 3), (1, 1), (1, 1), True, True, None, True, 1, 2),
    "3x3_grouped_odd": ((6, 5), 9, 9, (3, 3), (2, 1), (1, 1), True, False, "RELU", True, 1, 3),
}


@needs_tflm
@pytest.mark.parametrize("name", sorted(CASES))
def test_conv_w4_equals_tflm(name):
    hw, ci, co, k, stride, dil, same, pc, act, bias, batches, *grp = CASES[name]
    groups = grp[0] if grp else 1
    seed = sum(map(ord, name))
    kw = dict(stride=stride, dil=dil, same=same, per_channel=pc, act=act, bias=bias, batches=batches, seed=seed,
              groups=groups)
    blob = _conv_model(hw, ci, co, k, **kw)
    g = load_tflite_bytes(blob, name=name)
    twin = load_tflite_bytes(_conv_model(hw, ci, co, k, int4=False, **kw), name=name + "8")
    assert [op.type for op in g.operators] == [CONV_W4_TYPE]
    n_w = co * k[0] * k[1] * (ci // groups)
    row = g.int4_fc[0]
    assert row["result"] == "packed" and row["int4_bytes"] == (n_w + 1) // 2
    assert g.weights_bytes == twin.weights_bytes - n_w + (n_w + 1) // 2
    rng = np.random.default_rng(seed)
    for _ in range(2):
        x = rng.integers(-128, 128, size=(batches, hw[0], hw[1], ci)).astype(np.int8)
        got = np.asarray(g.run(x)[0])
        want = W.tflm_run(blob, [x])[0]
        assert got.shape == want.shape
        assert got.tolist() == want.tolist(), f"{name}: {int(np.sum(got != want))} of {got.size} outputs differ"
        assert got.tolist() == np.asarray(twin.run(x)[0]).tolist()
        assert len(set(got.ravel().tolist())) > 4
    from pyembed.model.float_ref import dequantize, run_float
    xr = dequantize(g.tensors[g.inputs[0]], x)
    assert np.allclose(run_float(g, xr)[g.outputs[0]], run_float(twin, xr)[twin.outputs[0]], rtol=0, atol=1e-12)


def test_conv_w4_bad_options():
    from pyembed.errors import ModelError
    from pyembed.model.ops import prepare_operator
    g = load_tflite_bytes(_conv_model((6, 6), 3, 4, (3, 3)), name="m")
    op = g.operators[0]
    op.options["filter_shape"] = [4, 3, 3, 4]
    with pytest.raises(ModelError, match="does not fit input channels 3"):
        prepare_operator(g, op, "m")
    op.options["filter_shape"] = [4, 2, 3, 3]
    with pytest.raises(ModelError, match=r"packed filter shape \[54\]: expected \[36\]"):
        prepare_operator(g, op, "m")
    del op.options["filter_shape"]
    with pytest.raises(ModelError, match="options lack 'filter_shape'"):
        prepare_operator(g, op, "m")


def _qemu_missing():
    from pyembed.target import qemu
    return qemu.missing_tools()


def _two_convs(int4=True):
    """3x3 SAME (12 -> 16 channels, RELU: the DSP pixel loops) then a grouped
    3x3 stride-2 VALID conv (16 -> 10 channels in 2 groups, odd filter size:
    the portable loops, channels starting mid-byte), both on INT4 filters."""
    S = W.schema()
    rng = np.random.default_rng(11)
    t = [W.tensor((1, 10, 10, 12), scale=0.05, zp=-3),
         W.tensor((16, 3, 3, 12), scale=[float(v) for v in rng.uniform(0.02, 0.1, 16)], zp=[0] * 16, axis=0,
                  data=rng.integers(-8, 8, size=(16, 3, 3, 12)), int4=int4),
         W.tensor((16,), np.int32, scale=0.0025, zp=0, data=rng.integers(-300, 300, size=16)),
         W.tensor((1, 10, 10, 16), scale=0.3, zp=-100),
         W.tensor((10, 3, 3, 8), scale=0.04, zp=0, data=rng.integers(-8, 8, size=(10, 3, 3, 8)), int4=int4),
         W.tensor((10,), np.int32, scale=0.012, zp=0, data=rng.integers(-100, 100, size=10)),
         W.tensor((1, 4, 4, 10), scale=0.5, zp=3)]
    ops = [W.op(S.BuiltinOperator.CONV_2D, [0, 1, 2], [3], "Conv2DOptions", padding=S.Padding.SAME, strideH=1,
                strideW=1, dilationHFactor=1, dilationWFactor=1,
                fusedActivationFunction=S.ActivationFunctionType.RELU),
           W.op(S.BuiltinOperator.CONV_2D, [3, 4, 5], [6], "Conv2DOptions", padding=S.Padding.VALID, strideH=2,
                strideW=2, dilationHFactor=1, dilationWFactor=1)]
    return W.build(t, ops, [0], [6], name="int4_convs")


@pytest.mark.skipif(_qemu_missing() is not None, reason=str(_qemu_missing()))
def test_firmware_on_cortex_m4_equals_host_and_tflm(tmp_path):
    """One mps2-an386 (Cortex-M4, DSP build) firmware of two int4 convs
    (_two_convs): outputs == the host run == TFLM on two samples; the plan's
    weights are the int8 twin's less half of each filter."""
    from pyembed.target.firmware import build_project, generate, run_project
    blob = _two_convs()
    g = load_tflite_bytes(blob, name="int4_convs")
    twin = load_tflite_bytes(_two_convs(int4=False), name="int8_convs")
    assert g.weights_bytes == twin.weights_bytes - (16 * 108 + 10 * 72) // 2
    proj = generate(g, "mps2-an386", tmp_path / "fw")
    assert [o["type"] for o in proj.ops] == [CONV_W4_TYPE] * 2
    assert "PE_GOP_CONV_2D_W4" in (tmp_path / "fw" / "model" / "model_graph.c").read_text()
    build_project(proj.outdir)
    rng = np.random.default_rng(5)
    for k in range(2):
        x = rng.integers(-128, 128, size=(1, 10, 10, 12)).astype(np.int8)
        run = run_project(proj, [x])
        want = np.asarray(g.run(x)[0])
        got = np.asarray(run.outputs[0]).reshape(want.shape)
        assert len(set(want.ravel().tolist())) > 4
        assert got.tolist() == want.tolist(), f"sample {k}: {int(np.sum(got != want))} outputs differ from the host"
        if importlib.util.find_spec("tflite_micro") is not None:
            assert got.tolist() == W.tflm_run(blob, [x])[0].tolist()


def _dw_model(hw, c, mult, k, stride=(1, 1), dil=(1, 1), same=True, per_channel=True, act=None, int4=True,
              seed=0):
    S = W.schema()
    rng = np.random.default_rng(seed)
    co = c * mult
    w = rng.integers(-8, 8, size=(1, k[0], k[1], co))
    ws = [float(v) for v in rng.uniform(0.02, 0.1, size=co)] if per_channel else 0.05
    oh, ow = (_out(hw[i], k[i], stride[i], dil[i], same) for i in range(2))
    t = [W.tensor((1, hw[0], hw[1], c), scale=0.05, zp=-3),
         W.tensor((1, k[0], k[1], co), scale=ws, zp=[0] * co if per_channel else 0, axis=3, data=w, int4=int4),
         W.tensor((co,), np.int32, scale=0.0025, zp=0, data=rng.integers(-300, 300, size=co)),
         W.tensor((1, oh, ow, co), scale=0.02 * k[0] * k[1] ** 0.5, zp=1)]
    f = {"fusedActivationFunction": getattr(S.ActivationFunctionType, act)} if act else {}
    op = W.op(S.BuiltinOperator.DEPTHWISE_CONV_2D, [0, 1, 2], [3], "DepthwiseConv2DOptions",
              padding=S.Padding.SAME if same else S.Padding.VALID, strideH=stride[0], strideW=stride[1],
              depthMultiplier=mult, dilationHFactor=dil[0], dilationWFactor=dil[1], **f)
    return W.build(t, [op], [0], [3], name="int4_dw")


DW_CASES = {   # hw, c, mult, k, stride, dilation, same, per_channel, act
    "3x3": ((8, 8), 6, 1, (3, 3), (1, 1), (1, 1), True, True, None),
    "3x3_odd_channels_relu": ((7, 9), 5, 1, (3, 3), (1, 1), (1, 1), True, False, "RELU"),
    "5x5_stride2_mult2": ((11, 11), 3, 2, (5, 5), (2, 2), (1, 1), True, True, None),
    "3x3_dilated_valid": ((12, 10), 8, 1, (3, 3), (1, 1), (2, 2), False, True, "RELU6"),
}


@needs_tflm
@pytest.mark.parametrize("name", sorted(DW_CASES))
def test_depthwise_w4_equals_tflm(name):
    from pyembed.model.ops.conv_w4 import DW_W4_TYPE
    hw, c, mult, k, stride, dil, same, pc, act = DW_CASES[name]
    seed = sum(map(ord, name))
    kw = dict(stride=stride, dil=dil, same=same, per_channel=pc, act=act, seed=seed)
    blob = _dw_model(hw, c, mult, k, **kw)
    g = load_tflite_bytes(blob, name=name)
    twin = load_tflite_bytes(_dw_model(hw, c, mult, k, int4=False, **kw), name=name + "8")
    assert [op.type for op in g.operators] == [DW_W4_TYPE]
    n_w = k[0] * k[1] * c * mult
    assert g.int4_fc[0]["result"] == "packed" and g.int4_fc[0]["int4_bytes"] == (n_w + 1) // 2
    assert g.weights_bytes == twin.weights_bytes - n_w + (n_w + 1) // 2
    rng = np.random.default_rng(seed)
    for _ in range(2):
        x = rng.integers(-128, 128, size=(1, hw[0], hw[1], c)).astype(np.int8)
        got = np.asarray(g.run(x)[0])
        want = W.tflm_run(blob, [x])[0]
        assert got.tolist() == want.tolist(), f"{name}: {int(np.sum(got != want))} of {got.size} outputs differ"
        assert got.tolist() == np.asarray(twin.run(x)[0]).tolist()
        assert len(set(got.ravel().tolist())) > 4
    from pyembed.model.float_ref import dequantize, run_float
    xr = dequantize(g.tensors[g.inputs[0]], x)
    assert np.allclose(run_float(g, xr)[g.outputs[0]], run_float(twin, xr)[twin.outputs[0]], rtol=0, atol=1e-12)


def _block_edges(int4=True):
    """Five layers on INT4 filters for the DSP build's block path (pe_conv_w4.c cw4_blocks): a 5x5
    stride-2 SAME conv on 3 channels (12 outputs: the patch loops), a 3x3 SAME conv 12 -> 40 (ten
    chunks, the block loops with the padding columns clipped, odd width 7), a 3x3 VALID conv 40 -> 10
    (kernel rows of 120 bytes: the weights widened in pieces; chunks 4, 4, 2), a 3x3 depthwise RELU6
    and a 1x1 stride-2 conv 10 -> 6 without bias (one-row kernel off the word grid)."""
    S = W.schema()
    rng = np.random.default_rng(23)

    def filt(shape, axis):
        n = shape[axis]
        return dict(scale=[float(v) for v in rng.uniform(0.02, 0.1, n)], zp=[0] * n, axis=axis,
                    data=rng.integers(-8, 8, size=shape), int4=int4)

    t = [W.tensor((1, 13, 11, 3), scale=0.05, zp=-3),
         W.tensor((12, 5, 5, 3), **filt((12, 5, 5, 3), 0)),
         W.tensor((12,), np.int32, scale=0.0025, zp=0, data=rng.integers(-300, 300, size=12)),
         W.tensor((1, 7, 6, 12), scale=0.2, zp=-20),
         W.tensor((40, 3, 3, 12), **filt((40, 3, 3, 12), 0)),
         W.tensor((40,), np.int32, scale=0.004, zp=0, data=rng.integers(-300, 300, size=40)),
         W.tensor((1, 7, 6, 40), scale=0.4, zp=5),
         W.tensor((10, 3, 3, 40), scale=0.05, zp=0, data=rng.integers(-8, 8, size=(10, 3, 3, 40)), int4=int4),
         W.tensor((10,), np.int32, scale=0.02, zp=0, data=rng.integers(-300, 300, size=10)),
         W.tensor((1, 5, 4, 10), scale=1.0, zp=-7),
         W.tensor((1, 3, 3, 10), **filt((1, 3, 3, 10), 3)),
         W.tensor((10,), np.int32, scale=0.05, zp=0, data=rng.integers(-300, 300, size=10)),
         W.tensor((1, 5, 4, 10), scale=0.03, zp=-128),
         W.tensor((6, 1, 1, 10), **filt((6, 1, 1, 10), 0)),
         W.tensor((1, 3, 2, 6), scale=0.05, zp=2)]
    conv = dict(dilationHFactor=1, dilationWFactor=1)
    ops = [W.op(S.BuiltinOperator.CONV_2D, [0, 1, 2], [3], "Conv2DOptions", padding=S.Padding.SAME, strideH=2,
                strideW=2, **conv),
           W.op(S.BuiltinOperator.CONV_2D, [3, 4, 5], [6], "Conv2DOptions", padding=S.Padding.SAME, strideH=1,
                strideW=1, fusedActivationFunction=S.ActivationFunctionType.RELU, **conv),
           W.op(S.BuiltinOperator.CONV_2D, [6, 7, 8], [9], "Conv2DOptions", padding=S.Padding.VALID, strideH=1,
                strideW=1, **conv),
           W.op(S.BuiltinOperator.DEPTHWISE_CONV_2D, [9, 10, 11], [12], "DepthwiseConv2DOptions",
                padding=S.Padding.SAME, strideH=1, strideW=1, depthMultiplier=1,
                fusedActivationFunction=S.ActivationFunctionType.RELU6, **conv),
           W.op(S.BuiltinOperator.CONV_2D, [12, 13, -1], [14], "Conv2DOptions", padding=S.Padding.SAME, strideH=2,
                strideW=2, **conv)]
    return W.build(t, ops, [0], [14], name="int4_edges")


@needs_tflm
def test_block_edges_model_equals_tflm_on_the_host():
    """The block-edge model (_block_edges) == TFLM == its int8 twin on the host (portable loops)."""
    from pyembed.model.ops.conv_w4 import DW_W4_TYPE
    blob = _block_edges()
    g = load_tflite_bytes(blob, name="int4_edges")
    twin = load_tflite_bytes(_block_edges(int4=False), name="int8_edges")
    assert [op.type for op in g.operators] == [CONV_W4_TYPE] * 3 + [DW_W4_TYPE, CONV_W4_TYPE]
    rng = np.random.default_rng(8)
    for _ in range(2):
        x = rng.integers(-128, 128, size=(1, 13, 11, 3)).astype(np.int8)
        got = np.asarray(g.run(x)[0])
        assert got.tolist() == W.tflm_run(blob, [x])[0].tolist()
        assert got.tolist() == np.asarray(twin.run(x)[0]).tolist()
        assert len(set(got.ravel().tolist())) > 4


def test_w4_dsp_scratch_wants():
    """The DSP build's scratch of the packed-int4 convs (pe_..._w4_s8_get_target_buffer_size, dsp 1):
    the word-rounded chunk (4 filters, 16 where the block loops gather patches) + 3 + the int8 gather
    kernel's work block where the block loops apply (ungrouped), nothing more for a grouped conv; dsp 0
    answers the size query's minimum."""
    from pyembed._ext import _graph
    from pyembed.model.conv_form import w4_least_wants, w4_work_wants
    g = load_tflite_bytes(_block_edges(), name="int4_edges")
    want = w4_work_wants(g)
    for op in g.operators:
        x, y = g.tensors[op.inputs[0]].shape, g.tensors[op.outputs[0]].shape
        dw = op.type != CONV_W4_TYPE
        assert _graph.conv_w4_sizes(op.params["words"], x, y, dw, dsp=False)[1] == op.scratch_bytes
        target = _graph.conv_w4_sizes(op.params["words"], x, y, dw, dsp=True)[1]
        shape = op.options["filter_shape"]
        gather = _graph.gather_target_buffer_size(op.params, tuple(x), tuple(shape), tuple(y), True, dw)
        if dw:
            assert target == op.scratch_bytes + gather
        else:
            per_oc = shape[1] * shape[2] * shape[3]
            # 16 filters a chunk where the block loops gather patches (kernel rows off the word grid)
            chunk = 4 if (shape[2] * shape[3]) % 4 == 0 and shape[2] * shape[3] >= 16 else 16
            assert gather > 0 and target == (min(shape[0], chunk) * per_oc + 3) // 4 * 4 + 3 + gather
        assert want.get(op.index, op.scratch_bytes) == target
    least = w4_least_wants(g)
    assert set(least) == set(want) and all(op.scratch_bytes < least[k] <= want[k] for k, op in
                                            ((k, g.operators[k]) for k in want))
    grouped = load_tflite_bytes(_conv_model((7, 7), 8, 6, (3, 3), groups=2), name="grouped")
    assert w4_work_wants(grouped) == {}


@pytest.mark.skipif(_qemu_missing() is not None, reason=str(_qemu_missing()))
def test_block_edges_firmware_on_cortex_m4_equals_tflm(tmp_path):
    """The block-edge model (_block_edges) as one mps2-an386 firmware (DSP build): every packed-int4 conv
    gets the scratch of its DSP target query (so the CONV_2D@w4 run the block loops), outputs == the
    host == TFLM on two samples."""
    from pyembed.target.firmware import build_project, generate, run_project
    blob = _block_edges()
    g = load_tflite_bytes(blob, name="int4_edges")
    proj = generate(g, "mps2-an386", tmp_path / "fw")
    from pyembed.model.conv_form import w4_work_wants
    want = w4_work_wants(g)
    assert len(want) == 5 and all(proj.dsp_scratch.get(k, (0, 0))[1] == v for k, v in want.items()), \
        (want, proj.dsp_scratch)
    build_project(proj.outdir)
    rng = np.random.default_rng(9)
    for k in range(2):
        x = rng.integers(-128, 128, size=(1, 13, 11, 3)).astype(np.int8)
        run = run_project(proj, [x])
        want_y = np.asarray(g.run(x)[0])
        got = np.asarray(run.outputs[0]).reshape(want_y.shape)
        assert len(set(want_y.ravel().tolist())) > 4
        assert got.tolist() == want_y.tolist(), f"sample {k}: {int(np.sum(got != want_y))} outputs differ"
        if importlib.util.find_spec("tflite_micro") is not None:
            assert got.tolist() == W.tflm_run(blob, [x])[0].tolist()
