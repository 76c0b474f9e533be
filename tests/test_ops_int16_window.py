"""int16x8 DEPTHWISE_CONV_2D and int16 AVERAGE_POOL_2D / MAX_POOL_2D
(pyembed.model.ops.int16_window, csrc pe_s16.h), which a converter-made
int16x8 CNN needs (tests/data/converter/cnn_small_int16x8): tflite_writer
models, outputs compared with the tflite-micro interpreter with ==, every
mismatch reported."""
import numpy as np
import pytest

from pyembed.errors import PyEmbedError
from pyembed.model import tflite_writer as W
from pyembed.model.load import load_tflite_bytes


def _act(k):
    S = W.schema()
    return [S.ActivationFunctionType.NONE, S.ActivationFunctionType.RELU, S.ActivationFunctionType.RELU6][k % 3]


def _check(blob, x, variant):
    g = load_tflite_bytes(blob)
    assert not g.unsupported, g.unsupported
    assert g.operators[0].params["variant"] == variant
    got = np.asarray(g.run(x)[0])
    want = np.asarray(W.tflm_run(blob, [x], arena_size=1 << 20)[0]).reshape(got.shape)
    bad = [(tuple(int(v) for v in i), int(got[tuple(i)]), int(want[tuple(i)])) for i in np.argwhere(got != want)]
    assert bad == [], bad
    return g


def test_int16x8_depthwise_is_bit_exact_with_tflm():
    S = W.schema()
    rng = np.random.default_rng(31)
    for k in range(14):
        ih, iw, ic = (int(v) for v in rng.integers(1, 7, 3))
        mult = int(rng.integers(1, 3))
        oc = ic * mult
        kh, kw, s = int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(rng.integers(1, 3))
        same = k % 2 == 0
        oh, ow = ((ih + s - 1) // s, (iw + s - 1) // s) if same else ((ih - kh) // s + 1, (iw - kw) // s + 1)
        if oh < 1 or ow < 1:
            continue
        ws = (0.005 + rng.random(oc) * 0.02).astype(np.float32) if k % 3 else np.float32(0.01)
        xs = 0.0005 + rng.random() * 0.005
        ys = xs * float(np.mean(ws)) * 140 * np.sqrt(kh * kw) * [0.3, 2.0][k % 2]
        wl = list(np.atleast_1d(ws))
        w = rng.integers(-127, 128, (1, kh, kw, oc)).astype(np.int8)
        t = [W.tensor((1, ih, iw, ic), np.int16, scale=xs, zp=0),
             W.tensor((1, kh, kw, oc), scale=wl, zp=[0] * len(wl), axis=3, data=w),
             W.tensor((1, oh, ow, oc), np.int16, scale=ys, zp=0)]
        ins = [0, 1]
        if k % 4 != 3:
            bs = list(np.float32(xs) * np.broadcast_to(np.atleast_1d(ws), (oc,)))
            t.append(W.tensor((oc,), np.int64, scale=bs, zp=[0] * oc, axis=0,
                              data=rng.integers(-2**30, 2**30, oc).astype(np.int64)))
            ins.append(3)
        ops = [W.op(S.BuiltinOperator.DEPTHWISE_CONV_2D, ins, [2], "DepthwiseConv2DOptions",
                    padding=S.Padding.SAME if same else S.Padding.VALID, strideH=s, strideW=s, depthMultiplier=mult,
                    fusedActivationFunction=_act(k))]
        blob = W.build(t, ops, inputs=[0], outputs=[2])
        x = rng.integers(-32768, 32768, (1, ih, iw, ic)).astype(np.int16)
        _check(blob, x, "DEPTHWISE_CONV_2D@int16")


@pytest.mark.parametrize("kind", ["AVERAGE_POOL_2D", "MAX_POOL_2D"])
def test_int16_pooling_is_bit_exact_with_tflm(kind):
    S = W.schema()
    rng = np.random.default_rng(len(kind))
    for k in range(10):
        ih, iw, c = (int(v) for v in rng.integers(1, 8, 3))
        kh, kw, s = int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(rng.integers(1, 3))
        same = k % 2 == 0
        oh, ow = ((ih + s - 1) // s, (iw + s - 1) // s) if same else ((ih - kh) // s + 1, (iw - kw) // s + 1)
        if oh < 1 or ow < 1:
            continue
        sc = 0.001 + rng.random() * 0.01
        t = [W.tensor((1, ih, iw, c), np.int16, scale=sc, zp=0), W.tensor((1, oh, ow, c), np.int16, scale=sc, zp=0)]
        ops = [W.op(getattr(S.BuiltinOperator, kind), [0], [1], "Pool2DOptions",
                    padding=S.Padding.SAME if same else S.Padding.VALID, strideH=s, strideW=s, filterHeight=kh,
                    filterWidth=kw, fusedActivationFunction=_act(k))]
        blob = W.build(t, ops, inputs=[0], outputs=[1])
        x = rng.integers(-32768, 32768, (1, ih, iw, c)).astype(np.int16)
        _check(blob, x, f"{kind}@int16")


def test_int16_window_refusals():
    S = W.schema()
    # a nonzero int16 zero point is a model error TFLite does not make
    t = [W.tensor((1, 4, 4, 2), np.int16, scale=0.01, zp=3), W.tensor((1, 2, 2, 2), np.int16, scale=0.01, zp=3)]
    blob = W.build(t, [W.op(S.BuiltinOperator.MAX_POOL_2D, [0], [1], "Pool2DOptions", padding=S.Padding.VALID,
                            strideH=2, strideW=2, filterHeight=2, filterWidth=2)], inputs=[0], outputs=[1])
    g = load_tflite_bytes(blob)
    assert g.unsupported and "zero point" in g.operators[0].reason
    # pooling that would need requantization (different scales) is not run
    t = [W.tensor((1, 4, 4, 2), np.int16, scale=0.01, zp=0), W.tensor((1, 2, 2, 2), np.int16, scale=0.02, zp=0)]
    blob = W.build(t, [W.op(S.BuiltinOperator.AVERAGE_POOL_2D, [0], [1], "Pool2DOptions", padding=S.Padding.VALID,
                            strideH=2, strideW=2, filterHeight=2, filterWidth=2)], inputs=[0], outputs=[1])
    g = load_tflite_bytes(blob)
    assert g.unsupported and "scales" in g.operators[0].reason
    # a depthwise filter that does not fit the input channels
    t = [W.tensor((1, 4, 4, 3), np.int16, scale=0.01, zp=0),
         W.tensor((1, 2, 2, 4), scale=[0.01], zp=[0], data=np.ones((1, 2, 2, 4), np.int8)),
         W.tensor((1, 3, 3, 4), np.int16, scale=0.01, zp=0)]
    blob = W.build(t, [W.op(S.BuiltinOperator.DEPTHWISE_CONV_2D, [0, 1], [2], "DepthwiseConv2DOptions",
                            padding=S.Padding.VALID, strideH=1, strideW=1, depthMultiplier=1)], inputs=[0], outputs=[2])
    with pytest.raises(PyEmbedError, match="depthwise filter shape"):
        load_tflite_bytes(blob)


def test_int16x8_transpose_conv_is_bit_exact_with_tflm():
    S = W.schema()
    rng = np.random.default_rng(41)
    for k in range(10):
        ih, iw, ic, oc = (int(v) for v in rng.integers(1, 6, 4))
        kk, s = int(rng.integers(1, 4)), int(rng.integers(1, 3))
        same = k % 2 == 0
        oh, ow = (ih * s, iw * s) if same else ((ih - 1) * s + kk, (iw - 1) * s + kk)
        ws = (0.005 + rng.random(oc) * 0.02).astype(np.float32) if k % 3 else np.float32(0.01)
        xs = 0.0005 + rng.random() * 0.005
        ys = xs * float(np.mean(ws)) * 140 * np.sqrt(kk * kk * ic) * [0.3, 2.0][k % 2] / s
        wl = list(np.atleast_1d(ws))
        t = [W.tensor((4,), np.int32, data=np.array([1, oh, ow, oc], np.int32)),
             W.tensor((oc, kk, kk, ic), scale=wl, zp=[0] * len(wl), axis=0,
                      data=rng.integers(-127, 128, (oc, kk, kk, ic)).astype(np.int8)),
             W.tensor((1, ih, iw, ic), np.int16, scale=xs, zp=0), W.tensor((1, oh, ow, oc), np.int16, scale=ys, zp=0)]
        ins = [0, 1, 2]
        if k % 4 != 3:
            bs = list(np.float32(xs) * np.broadcast_to(np.atleast_1d(ws), (oc,)))
            t.append(W.tensor((oc,), np.int64, scale=bs, zp=[0] * oc, axis=0,
                              data=rng.integers(-2**30, 2**30, oc).astype(np.int64)))
            ins.append(4)
        ops = [W.op(S.BuiltinOperator.TRANSPOSE_CONV, ins, [3], "TransposeConvOptions",
                    padding=S.Padding.SAME if same else S.Padding.VALID, strideH=s, strideW=s,
                    fusedActivationFunction=_act(k))]
        blob = W.build(t, ops, inputs=[2], outputs=[3])
        x = rng.integers(-32768, 32768, (1, ih, iw, ic)).astype(np.int16)
        _check(blob, x, "TRANSPOSE_CONV@int16")


def test_int16_requantize_is_bit_exact_with_tflm():
    S = W.schema()
    rng = np.random.default_rng(43)
    for xs, ys in ((1.44e-5, 2.71e-5), (3e-4, 1e-4), (1e-3, 1e-3), (2e-5, 9e-4)):
        t = [W.tensor((2, 5, 7), np.int16, scale=xs, zp=0), W.tensor((2, 5, 7), np.int16, scale=ys, zp=0)]
        blob = W.build(t, [W.op(S.BuiltinOperator.QUANTIZE, [0], [1])], inputs=[0], outputs=[1])
        x = rng.integers(-32768, 32768, (2, 5, 7)).astype(np.int16)
        _check(blob, x, "QUANTIZE@int16")
