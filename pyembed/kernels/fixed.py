"""Fixed-point core, vectorised over numpy arrays; the arithmetic runs in C
(csrc/src/core/pe_fixed.c, csrc/include/pyembed/pe_fixed.h).

Every function broadcasts its arguments like a numpy ufunc and returns an
array of the broadcast shape. Integer inputs must fit int32; anything else is
an ArgumentError naming the argument.

    dhm(a, b)                   saturating rounding doubling high multiply
    rdiv_pot(x, exponent)       x / 2^exponent, nearest, halves away from 0
    sat_shl(x, exponent)        x * 2^exponent, saturated to int32
    requantize(acc, mult, shift, rounding="double"|"single")
    exp_on_negative(a_q5_26)    exp(a) for a <= 0, Q5.26 -> Q0.31
    one_over_one_plus_x(x_q0_31)  1/(1+x), Q0.31 -> Q0.31
    exp2_neg(x_q9_22)           2^x for x <= 0, Q9.22 -> Q1.30
    saturate_s8(x), saturate_s16(x)
    softmax_s8(x, mult, shift, diff_min, out_dtype=np.int8|np.int16)
"""
import numpy as np

from pyembed._ext import _fixed as _c
from pyembed._validate import as_int_array, exact_array, int_in_range
from pyembed.errors import ArgumentError
from pyembed.kernels.quant import quantize_multiplier  # noqa: F401  (re-exported)

EXP2_FRAC_BITS = 22   # input of exp2_neg is Q9.22
EXP2_OUT_BITS = 30    # output of exp2_neg is Q1.30
Q31_ONE = 1 << 31


def _broadcast(*named):
    arrays = [as_int_array(v, n) for n, v in named]
    try:
        b = np.broadcast_arrays(*arrays)
    except ValueError:
        shapes = ", ".join(f"{n}{a.shape}" for (n, _), a in zip(named, arrays))
        raise ArgumentError(f"arguments do not broadcast together: {shapes}") from None
    shape = b[0].shape
    return shape, [np.ascontiguousarray(x, dtype=np.int32).ravel() for x in b]


def _check_range(arr, name, lo, hi):
    if arr.size and (arr.min() < lo or arr.max() > hi):
        raise ArgumentError(f"{name}: expected values in [{lo}, {hi}], got range [{arr.min()}, {arr.max()}]")


def dhm(a, b):
    shape, (a, b) = _broadcast(("a", a), ("b", b))
    return _c.dhm(a, b).reshape(shape)


def rdiv_pot(x, exponent):
    shape, (x, e) = _broadcast(("x", x), ("exponent", exponent))
    _check_range(e, "exponent", 0, 63)
    return _c.rdiv_pot(x, e).reshape(shape)


def sat_shl(x, exponent):
    shape, (x, e) = _broadcast(("x", x), ("exponent", exponent))
    _check_range(e, "exponent", 0, 31)
    return _c.sat_shl(x, e).reshape(shape)


def requantize(acc, multiplier, shift, rounding="double"):
    """Requantize int32 accumulators: the TFLite/CMSIS-NN MultiplyByQuantizedMultiplier.

    rounding="double" (default) is bit-exact with the peers' default builds;
    "single" rounds the exact product once (TFLITE_SINGLE_ROUNDING)."""
    if rounding not in ("double", "single"):
        raise ArgumentError(f"rounding: expected 'double' or 'single', got {rounding!r}")
    shape, (a, m, s) = _broadcast(("acc", acc), ("multiplier", multiplier), ("shift", shift))
    _check_range(m, "multiplier", 0, 2**31 - 1)
    _check_range(s, "shift", -31, 30)
    return _c.requant(a, m, s, rounding == "single").reshape(shape)


def exp_on_negative(a_q5_26):
    shape, (a,) = _broadcast(("a_q5_26", a_q5_26))
    _check_range(a, "a_q5_26", -(2**31), 0)
    return _c.exp_on_negative(a).reshape(shape)


def one_over_one_plus_x(x_q0_31):
    shape, (x,) = _broadcast(("x_q0_31", x_q0_31))
    _check_range(x, "x_q0_31", 0, 2**31 - 1)
    return _c.one_over_one_plus_x(x).reshape(shape)


def exp2_neg(x_q9_22):
    shape, (x,) = _broadcast(("x_q9_22", x_q9_22))
    _check_range(x, "x_q9_22", -(2**31), 0)
    return _c.exp2_neg_q22(x).reshape(shape)


def exp2_table():
    """The compiled 1025-entry table round(2^30 * 2^(-i/1024))."""
    return _c.exp2_table()


def saturate_s8(x):
    shape, (x,) = _broadcast(("x", x))
    return _c.sat_s8(x).reshape(shape)


def saturate_s16(x):
    shape, (x,) = _broadcast(("x", x))
    return _c.sat_s16(x).reshape(shape)


def softmax_s8(x, mult, shift, diff_min, out_dtype=np.int8):
    """int8 softmax over the last axis (TFLite / CMSIS-NN arithmetic).

    x: int8 array of any rank >= 1; mult: Q31 multiplier > 0; shift: 0..31;
    diff_min: cut-off (usually negative). out_dtype int8 (scale 1/256, zero
    point -128) or int16 (scale 1/65536, zero point -32768)."""
    x = exact_array(x, "x", np.int8)
    if x.ndim < 1 or x.shape[-1] < 1:
        raise ArgumentError(f"x: expected at least one element along the last axis, got shape {x.shape}")
    mult = int_in_range(mult, "mult", 1, 2**31 - 1)
    shift = int_in_range(shift, "shift", 0, 31)
    diff_min = int_in_range(diff_min, "diff_min", -(2**31), 2**31 - 1)
    out_dtype = np.dtype(out_dtype)
    if out_dtype not in (np.dtype(np.int8), np.dtype(np.int16)):
        raise ArgumentError(f"out_dtype: expected int8 or int16, got {out_dtype}")
    rows = int(np.prod(x.shape[:-1], dtype=np.int64))
    flat = np.ascontiguousarray(x.reshape(rows, x.shape[-1]))
    out = _c.softmax_s8(flat, mult, shift, diff_min, out_dtype == np.dtype(np.int16))
    return out.reshape(x.shape)
