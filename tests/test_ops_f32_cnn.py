"""float32 operators a converter-made float32 CNN / U-Net needs beyond the
conv family (issue #30; tests/test_converter_cnn.py runs the converter's
models): RESIZE_BILINEAR and TRANSPOSE_CONV (pyembed.model.ops.f32cnn, csrc
pe_f32_cnn.h), and PAD / PADV2, CONCATENATION, RESIZE_NEAREST_NEIGHBOR moving
float32 elements (pyembed.model.ops.data). Models built with tflite_writer,
outputs compared with the tflite-micro interpreter as float32 BIT PATTERNS."""
import numpy as np
import pytest

from pyembed.bench.coverage import _c, _t, build_named
from pyembed.errors import PyEmbedError
from pyembed.model import tflite_writer as W
from pyembed.model.float_ref import run_float
from pyembed.model.load import load_tflite_bytes

F = np.float32
SAME, VALID = 0, 1


def _f(shape, data=None):
    return _t(shape, F, scale=None, data=None if data is None else np.asarray(data, F))


def _bits(x):
    return np.ascontiguousarray(x, F).view(np.int32)


def _check(blob, xs, name):
    g = load_tflite_bytes(blob, name=name)
    assert not g.unsupported, g.summary()
    got = g.run(xs if len(xs) > 1 else xs[0])
    want = W.tflm_run(blob, xs, arena_size=1 << 20)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype == F and a.shape == b.shape
        bad = np.nonzero(_bits(a).reshape(-1) != _bits(b).reshape(-1))[0]
        assert bad.size == 0, (f"{bad.size} of {a.size} differ",
                               [(int(i), a.reshape(-1)[i], b.reshape(-1)[i]) for i in bad[:8]])
    # the float64 reference (pyembed check / simulate --report) agrees within float32 rounding
    ref = run_float(g, [np.asarray(x, np.float64) for x in xs] if len(xs) > 1 else np.asarray(xs[0], np.float64))
    for t, a in zip(g.outputs, got):
        assert np.allclose(np.asarray(a, np.float64), ref[t], rtol=1e-5, atol=1e-4), t
    return g


def _x(rng, shape):
    x = (rng.standard_normal(shape) * rng.choice([0.01, 1.0, 30.0], shape)).astype(F)
    x.reshape(-1)[:3] = [0.0, -0.0, 1e-40]
    return x


@pytest.mark.parametrize("size,align,half", [((7, 9), False, True), ((16, 16), False, False),
                                             ((5, 11), True, False), ((3, 4), False, True),
                                             ((12, 8), False, False)])
def test_resize_bilinear_f32(size, align, half):
    x = _x(np.random.default_rng(sum(size)), (1, 4, 6, 3))
    blob = build_named([_f((1, 4, 6, 3)), _c(list(size)), _f((1, *size, 3))],
                       [("RESIZE_BILINEAR", [0, 1], [2], {"align_corners": align, "half_pixel_centers": half})],
                       [0], [2])
    g = _check(blob, [x], "rb")
    assert g.operators[0].params["variant"] == "RESIZE_BILINEAR@float32"


@pytest.mark.parametrize("k,stride,padding,act,bias", [(2, 2, SAME, None, True), (3, 2, SAME, "RELU", True),
                                                       (3, 1, VALID, None, False), (3, 2, VALID, "RELU6", True),
                                                       (4, 3, SAME, "RELU_N1_TO_1", False)])
def test_transpose_conv_f32(k, stride, padding, act, bias):
    rng = np.random.default_rng(k * 10 + stride)
    ih, iw, ci, co = 5, 4, 3, 6
    if padding == SAME:
        oh, ow = ih * stride, iw * stride
    else:
        oh, ow = (ih - 1) * stride + k, (iw - 1) * stride + k
    w = (rng.standard_normal((co, k, k, ci)) * 0.5).astype(F)
    tensors = [_c([1, oh, ow, co]), _f((co, k, k, ci), w), _f((1, ih, iw, ci)), _f((1, oh, ow, co))]
    ins = [0, 1, 2]
    if bias:
        tensors.append(_f((co,), rng.standard_normal(co)))
        ins.append(4)
    blob = build_named(tensors, [("TRANSPOSE_CONV", ins, [3], {"padding": padding, "stride_h": stride,
                                                                "stride_w": stride, "activation": act})],
                       [2], [3])
    g = _check(blob, [_x(rng, (1, ih, iw, ci))], "tc")
    assert g.operators[0].params["variant"] == "TRANSPOSE_CONV@float32"


def test_data_movement_f32():
    """PAD (zeros), PADV2 (its float value, as a bit pattern), CONCATENATION
    of three inputs and an x2 nearest resize, all float32."""
    rng = np.random.default_rng(3)
    pads = _c([[0, 0], [1, 2], [2, 0], [0, 0]])
    blob = build_named(
        [_f((1, 3, 4, 2)), pads, _f((1, 6, 6, 2)), _f((), np.array(-2.75, F)), _f((1, 6, 6, 2)),
         _f((1, 6, 6, 3)), _f((1, 6, 6, 7)), _c([12, 12]), _f((1, 12, 12, 7))],
        [("PAD", [0, 1], [2], {}), ("PADV2", [0, 1, 3], [4], {}),
         ("CONCATENATION", [2, 5, 4], [6], {"axis": 3}),
         ("RESIZE_NEAREST_NEIGHBOR", [6, 7], [8], {"half_pixel_centers": True})],
        [0, 5], [8, 4])
    g = _check(blob, [_x(rng, (1, 3, 4, 2)), _x(rng, (1, 6, 6, 3))], "moves")
    padv2 = np.asarray(g.run([_x(rng, (1, 3, 4, 2)), _x(rng, (1, 6, 6, 3))])[1])
    assert padv2[0, 0, 0, 0] == np.float32(-2.75)


def test_float32_refusals_name_the_problem():
    # a bias of the wrong length is a model error; an unknown fused activation is not run
    blob = build_named([_c([1, 4, 4, 2]), _f((2, 2, 2, 3), np.ones((2, 2, 2, 3))), _f((1, 2, 2, 3)),
                        _f((1, 4, 4, 2)), _f((3,), np.ones(3))],
                       [("TRANSPOSE_CONV", [0, 1, 2, 4], [3], {"padding": SAME, "stride_h": 2, "stride_w": 2})],
                       [2], [3])
    with pytest.raises(PyEmbedError, match="bias shape"):
        load_tflite_bytes(blob, name="bad_bias")
    blob = build_named([_f((1, 4, 4, 2)), _c([8, 8]), _f((1, 8, 8, 2))],
                       [("RESIZE_BILINEAR", [0, 1], [2], {"align_corners": True, "half_pixel_centers": True})],
                       [0], [2])
    with pytest.raises(PyEmbedError, match="align_corners and half_pixel_centers"):
        load_tflite_bytes(blob, name="bad_resize")
