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
