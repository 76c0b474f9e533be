"""Issue #30's third batch of TFLM operators (pyembed.model.ops.batch3)
against the tflite-micro interpreter (==), with their float64 references
and refused models."""
import numpy as np
import pytest

from pyembed.errors import ModelError
from pyembed.model import tflite_writer as W
from pyembed.model.float_ref import run_float
from pyembed.model.load import load_tflite_bytes

_INFO = {np.int8: (-128, 128), np.int16: (-32768, 32768), np.int32: (-(1 << 31), 1 << 31)}


def _tflm(blob, xs, n=1):
    return W.tflm_run(blob, xs, n, arena_size=1 << 18)


def _q(dtype):
    return {"scale": 0.05, "zp": 3} if dtype == np.int8 else {"scale": 0.01, "zp": 0} if dtype == np.int16 else {}


# -- REVERSE_V2 -------------------------------------------------------------------------------

def _reverse_model(shape, axes, dtype):
    S = W.schema()
    t = [W.tensor(shape, dtype, **_q(dtype)), W.tensor([len(axes)], np.int32, data=np.array(axes, np.int32)),
         W.tensor(shape, dtype, **_q(dtype))]
    ops = [W.op(S.BuiltinOperator.REVERSE_V2, [0, 1], [2], "ReverseV2Options")]
    return W.build(t, ops, inputs=[0], outputs=[2])


REVERSE_CASES = [((7,), [0]), ((3, 5), [1]), ((3, 5), [0, 1]), ((2, 3, 4), [-1, -2]), ((2, 3, 4, 5), [1, 2]),
                 ((2, 1, 3, 2, 4), [3, 1, 2]), ((1, 2, 3, 1, 2, 3), [0, 1, 2, 3, 4, 5])]


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32])
@pytest.mark.parametrize("case", REVERSE_CASES)
def test_reverse_v2_bit_exact_with_tflm(case, dtype):
    shape, axes = case
    rng = np.random.default_rng(len(shape) * 7 + len(axes))
    lo, hi = _INFO[dtype]
    x = rng.integers(lo, hi, shape, dtype=np.int64).astype(dtype)
    blob = _reverse_model(shape, axes, dtype)
    g = load_tflite_bytes(blob, name="reverse")
    assert not g.unsupported, g.summary()
    assert g.operators[0].type == "REVERSE_V2"
    got = g.run([x])[0]
    want = np.asarray(_tflm(blob, [x])[0]).reshape(got.shape)
    assert got.dtype == want.dtype == dtype
    assert np.array_equal(got, want)
    assert np.array_equal(got, np.flip(x, axis=tuple(a % len(shape) for a in axes)))


def test_reverse_v2_float_reference():
    blob = _reverse_model((2, 3, 4), [1], np.int8)
    g = load_tflite_bytes(blob, name="reverse")
    x = np.arange(24, dtype=np.float64).reshape(2, 3, 4) * 0.05
    y = run_float(g, x)[g.operators[0].outputs[0]]
    assert np.array_equal(y, np.flip(x, axis=1))


def test_reverse_v2_refuses_bad_axes():
    with pytest.raises(ModelError, match="axis 3 outside a 3-D input"):
        load_tflite_bytes(_reverse_model((2, 3, 4), [3], np.int8), name="bad")
    with pytest.raises(ModelError, match="listed twice"):
        load_tflite_bytes(_reverse_model((2, 3, 4), [1, -2], np.int8), name="bad")
    with pytest.raises(ModelError, match="not contiguous"):
        load_tflite_bytes(_reverse_model((2, 3, 4), [0, 2], np.int8), name="bad")
    with pytest.raises(ModelError):   # a zero-length axis tensor holds no data: the loader refuses it first
        load_tflite_bytes(_reverse_model((2, 3, 4), [], np.int8), name="bad")


# -- PACK / UNPACK ----------------------------------------------------------------------------

def _pack_model(piece, n, axis, dtype):
    S = W.schema()
    rank = len(piece) + 1
    a = axis % rank
    whole = list(piece[:a]) + [n] + list(piece[a:])
    t = [W.tensor(piece, dtype, **_q(dtype)) for _ in range(n)] + [W.tensor(whole, dtype, **_q(dtype))]
    ops = [W.op(S.BuiltinOperator.PACK, list(range(n)), [n], "PackOptions", valuesCount=n, axis=axis)]
    return W.build(t, ops, inputs=list(range(n)), outputs=[n])


def _unpack_model(whole, axis, dtype):
    S = W.schema()
    a = axis % len(whole)
    n = whole[a]
    piece = list(whole[:a]) + list(whole[a + 1:])
    t = [W.tensor(whole, dtype, **_q(dtype))] + [W.tensor(piece, dtype, **_q(dtype)) for _ in range(n)]
    ops = [W.op(S.BuiltinOperator.UNPACK, [0], list(range(1, n + 1)), "UnpackOptions", num=n, axis=axis)]
    return W.build(t, ops, inputs=[0], outputs=list(range(1, n + 1)))


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32])
@pytest.mark.parametrize("case", [((5,), 3, 0), ((5,), 2, 1), ((2, 3), 4, 1), ((2, 3, 4), 2, -1), ((3, 1, 2), 3, 2)])
def test_pack_bit_exact_with_tflm(case, dtype):
    piece, n, axis = case
    rng = np.random.default_rng(n * 11 + len(piece))
    lo, hi = _INFO[dtype]
    xs = [rng.integers(lo, hi, piece, dtype=np.int64).astype(dtype) for _ in range(n)]
    blob = _pack_model(piece, n, axis, dtype)
    g = load_tflite_bytes(blob, name="pack")
    assert not g.unsupported, g.summary()
    assert [op.type for op in g.operators] == ["PACK"]
    got = g.run(xs)[0]
    want = np.asarray(_tflm(blob, xs)[0]).reshape(got.shape)
    assert got.dtype == want.dtype == dtype
    assert np.array_equal(got, want)
    assert np.array_equal(got, np.stack(xs, axis=axis))


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32])
@pytest.mark.parametrize("case", [((3,), 0), ((2, 3), 0), ((2, 3), 1), ((2, 3, 4), -1), ((2, 4, 3), 1)])
def test_unpack_bit_exact_with_tflm(case, dtype):
    whole, axis = case
    n = whole[axis % len(whole)]
    rng = np.random.default_rng(n * 13 + len(whole))
    lo, hi = _INFO[dtype]
    x = rng.integers(lo, hi, whole, dtype=np.int64).astype(dtype)
    blob = _unpack_model(whole, axis, dtype)
    g = load_tflite_bytes(blob, name="unpack")
    assert not g.unsupported, g.summary()
    got = g.run([x])
    want = _tflm(blob, [x], n)
    assert len(got) == len(want) == n
    for k in range(n):
        assert got[k].dtype == dtype
        assert np.array_equal(got[k], np.asarray(want[k]).reshape(got[k].shape))
        assert np.array_equal(got[k].reshape(np.take(x, k, axis=axis).shape), np.take(x, k, axis=axis))


def test_pack_unpack_float_reference():
    g = load_tflite_bytes(_unpack_model((2, 3, 4), 1, np.int8), name="unpack")
    x = np.arange(24, dtype=np.float64).reshape(2, 3, 4) * 0.05
    vals = run_float(g, x)
    for k, t in enumerate(g.operators[0].outputs):
        assert np.array_equal(vals[t], x[:, k, :])
    g = load_tflite_bytes(_pack_model((2, 3), 2, 1, np.int8), name="pack")
    a, b = np.ones((2, 3)), np.arange(6.0).reshape(2, 3)
    assert np.array_equal(run_float(g, [a, b])[g.operators[0].outputs[0]], np.stack([a, b], axis=1))


def test_pack_refuses_mismatched_inputs():
    S = W.schema()
    t = [W.tensor((2, 3)), W.tensor((3, 2)), W.tensor((2, 2, 3))]
    blob = W.build(t, [W.op(S.BuiltinOperator.PACK, [0, 1], [2], "PackOptions", valuesCount=2, axis=0)],
                   inputs=[0, 1], outputs=[2])
    with pytest.raises(ModelError, match="input 1"):
        load_tflite_bytes(blob, name="bad")


# -- BROADCAST_TO -----------------------------------------------------------------------------

def _broadcast_model(in_shape, shape, dtype):
    S = W.schema()
    t = [W.tensor(in_shape, dtype, **_q(dtype)), W.tensor([len(shape)], np.int32, data=np.array(shape, np.int32)),
         W.tensor(shape, dtype, **_q(dtype))]
    ops = [W.op(S.BuiltinOperator.BROADCAST_TO, [0, 1], [2], "BroadcastToOptions")]
    return W.build(t, ops, inputs=[0], outputs=[2])


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32])
@pytest.mark.parametrize("case", [((1,), (5,)), ((3,), (2, 3)), ((2, 1), (2, 4)), ((1, 3, 1), (2, 3, 4)),
                                  ((4, 1, 2), (3, 4, 5, 2)), ((1, 2, 1, 3, 1), (2, 2, 2, 3, 2)), ((2, 3), (2, 3))])
def test_broadcast_to_bit_exact_with_tflm(case, dtype):
    in_shape, shape = case
    rng = np.random.default_rng(len(in_shape) * 5 + len(shape))
    lo, hi = _INFO[dtype]
    x = rng.integers(lo, hi, in_shape, dtype=np.int64).astype(dtype)
    blob = _broadcast_model(in_shape, shape, dtype)
    g = load_tflite_bytes(blob, name="bcast")
    assert not g.unsupported, g.summary()
    assert [op.type for op in g.operators] == ["BROADCAST_TO"]
    got = g.run([x])[0]
    want = np.asarray(_tflm(blob, [x])[0]).reshape(got.shape)
    assert got.dtype == want.dtype == dtype
    assert np.array_equal(got, want)
    assert np.array_equal(got, np.broadcast_to(x, shape))
    f = run_float(g, x.astype(np.float64))[g.operators[0].outputs[0]]
    assert np.array_equal(f, np.broadcast_to(x.astype(np.float64), shape))


def test_broadcast_to_refuses_incompatible_shape():
    with pytest.raises(ModelError, match="does not broadcast"):
        load_tflite_bytes(_broadcast_model((3,), (2, 4), np.int8), name="bad")
