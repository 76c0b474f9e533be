"""Kernel parameters of the math operators (activations, broadcasting binary
operators, MEAN / SUM, L2_NORMALIZATION), computed from tensor scales and
zero points exactly the way the Prepare step of TFLite Micro's reference
kernels computes them: each float32 / float64 step is reproduced in the same
precision and order (numpy float32 scalars for C++ ``float`` arithmetic),
then TFLite's QuantizeMultiplier (:func:`pyembed.kernels.quant.quantize_multiplier`).

Every function returns a dict whose keys are the fields of the matching C
parameter struct (csrc/include/pyembed/pe_activations.h, pe_binary.h,
pe_reduce.h). A scale combination that TFLite's kernel cannot represent
raises :class:`pyembed.errors.ArgumentError` naming what is wrong; the model
layer turns it into a ModelError naming the operator.
"""
import math

import numpy as np

from pyembed.errors import ArgumentError
from pyembed.kernels.params import _round_away
from pyembed.kernels.quant import quantize_multiplier

F32 = np.float32


def _f32(x):
    return F32(x)


def _qm(real, what):
    try:
        return quantize_multiplier(float(real))
    except ArgumentError as e:
        raise ArgumentError(f"{what}: {e}") from None


def _qm_signed(real, what):
    """QuantizeMultiplier of a possibly negative real: TFLite's frexp and
    round-half-away are odd functions, so the pair is the negated pair of |real|."""
    m, s = _qm(abs(float(real)), what)
    return (-m if real < 0 else m), s


def sigmoid_params(input_scale, input_zero_point):
    """LOGISTIC / TANH int8: input rescaled into Q4.27 (kInputIntegerBits 4)."""
    real = float(F32(input_scale)) * float(1 << 27)
    q, shift = math.frexp(real)
    mult = int(_round_away(q * (1 << 31)))
    if mult >= 1 << 31:
        raise ArgumentError(f"input scale {float(input_scale)!r}: its Q4.27 multiplier rounds to 2^31")
    if shift < 0 or shift > 30:
        raise ArgumentError(f"input scale {float(input_scale)!r} is out of the range TFLite's LOGISTIC/TANH "
                            f"handles (left shift {shift}, expected 0..30)")
    radius = math.floor(1.0 * 15 * (1 << 27) / (1 << shift))
    return {"input_zero_point": int(input_zero_point), "input_range_radius": int(radius),
            "input_multiplier": mult, "input_left_shift": int(shift)}


def _downscale_int16(m32):
    """TFLite DownScaleInt32ToInt16Multiplier."""
    if m32 >= (2**31 - 1) - (1 << 15):
        return 32767
    return (m32 + (1 << 15)) >> 16


def hard_swish_params(input_scale, input_zero_point, output_scale, output_zero_point):
    in_s, out_s = F32(input_scale), F32(output_scale)
    hires = F32(F32(1.0) / F32(128.0)) * in_s
    reluish_scale = F32(3.0) / F32(32768.0)
    om, oe = _qm(float(F32(hires / out_s)), "HARD_SWISH output multiplier")
    if oe > 0:
        raise ArgumentError(f"HARD_SWISH output multiplier exponent {oe} > 0 (input scale {float(in_s)!r} is "
                            f"more than 128 times the output scale {float(out_s)!r})")
    rm, re_ = _qm(float(F32(hires / reluish_scale)), "HARD_SWISH reluish multiplier")
    if re_ > 15:
        raise ArgumentError(f"HARD_SWISH reluish exponent {re_} > 15")
    return {"input_zero_point": int(input_zero_point), "output_zero_point": int(output_zero_point),
            "reluish_multiplier_fixedpoint_int16": _downscale_int16(rm), "reluish_multiplier_exponent": re_,
            "output_multiplier_fixedpoint_int16": _downscale_int16(om), "output_multiplier_exponent": oe}


def leaky_relu_params(input_scale, input_zero_point, output_scale, output_zero_point, alpha, rounding="tflm"):
    """TFLM divides the scales in float64, LiteRT in float32 (rounding="litert")."""
    in_s, out_s, a = F32(input_scale), F32(output_scale), F32(alpha)
    if rounding == "litert":
        ra, ri = float(F32(F32(in_s * a) / out_s)), float(F32(in_s / out_s))
    else:
        ra, ri = float(in_s) * float(a) / float(out_s), float(in_s) / float(out_s)
    ma, sa = _qm_signed(ra, "LEAKY_RELU alpha multiplier")
    mi, si = _qm(ri, "LEAKY_RELU identity multiplier")
    return {"input_zero_point": int(input_zero_point), "output_zero_point": int(output_zero_point),
            "multiplier_identity": mi, "shift_identity": si, "multiplier_alpha": ma, "shift_alpha": sa}


def relu_params(kind, input_scale, input_zero_point, output_scale, output_zero_point, qmin=-128, qmax=127,
                rounding="tflm"):
    """RELU / RELU6 / RELU_N1_TO_1. TFLM's RELU requantizes and clamps at the
    output zero point; TFLM's RELU6 only clamps in the input domain at the
    input's zero point and round(6 / input_scale) + zero point. With
    rounding="litert" RELU6 and RELU_N1_TO_1 requantize like RELU (LiteRT's
    QuantizedReluX), clamping at the output's quantized -1 / 0 and 1 / 6."""
    in_s, out_s = F32(input_scale), F32(output_scale)
    m, s = _qm(float(F32(in_s / out_s)), f"{kind} multiplier")
    base = {"input_zero_point": int(input_zero_point), "output_zero_point": int(output_zero_point),
            "multiplier": m, "shift": s, "requantize": 1}

    def q(f, scale, zp):
        return zp + int(_round_away(float(F32(F32(f) / scale))))

    if kind == "RELU":
        return dict(base, act_min=max(qmin, q(0.0, out_s, output_zero_point)), act_max=qmax)
    if kind == "RELU6" and rounding != "litert":
        six = min(qmax, max(qmin, q(6.0, in_s, input_zero_point)))
        return dict(base, requantize=0, multiplier=0, shift=0, act_min=int(input_zero_point), act_max=six)
    lo, hi = (0.0, 6.0) if kind == "RELU6" else (-1.0, 1.0)
    return dict(base, act_min=max(qmin, q(lo, out_s, output_zero_point)),
                act_max=min(qmax, q(hi, out_s, output_zero_point)))


def abs_params(input_scale, input_zero_point, output_scale, output_zero_point, rounding="tflm"):
    """TFLM divides the scales in float64, LiteRT in float32 (rounding="litert")."""
    in_s, out_s = F32(input_scale), F32(output_scale)
    rescale = int(in_s != out_s)
    real = float(F32(in_s / out_s)) if rounding == "litert" else float(in_s) / float(out_s)
    m, s = _qm(real, "ABS multiplier") if rescale else (0, 0)
    return {"input_zero_point": int(input_zero_point), "output_zero_point": int(output_zero_point),
            "multiplier": m, "shift": s, "rescale": rescale}


def rsqrt_params(input_scale, input_zero_point, output_scale, output_zero_point):
    in_s, out_s = F32(input_scale), F32(output_scale)
    real = 1.0 / float(F32(np.sqrt(in_s) * out_s))
    m, s = _qm(real, "RSQRT multiplier")
    if s - 20 < -31:
        raise ArgumentError(f"RSQRT multiplier shift {s} is below -11")
    return {"input_zero_point": int(input_zero_point), "output_zero_point": int(output_zero_point),
            "multiplier": m, "shift": s, "rescale": 0}


def sub_params(scale1, zp1, scale2, zp2, output_scale, output_zp, act_min=-128, act_max=127, left_shift=20):
    """SUB int8 (TFLM sub_common.cc: float32 twice-max and divisions)."""
    s1, s2, so = float(F32(scale1)), float(F32(scale2)), float(F32(output_scale))
    twice = 2.0 * max(s1, s2)
    m1, sh1 = _qm(s1 / twice, "SUB input 1 multiplier")
    m2, sh2 = _qm(s2 / twice, "SUB input 2 multiplier")
    mo, sho = _qm(twice / ((1 << left_shift) * so), "SUB output multiplier")
    if sho > 0:
        raise ArgumentError(f"SUB output multiplier above one (shift {sho}): the input scales are more than "
                            f"2^{left_shift - 1} times the output scale")
    return {"input1_offset": -int(zp1), "input2_offset": -int(zp2), "output_offset": int(output_zp),
            "left_shift": left_shift, "input1_multiplier": m1, "input1_shift": sh1, "input2_multiplier": m2,
            "input2_shift": sh2, "output_multiplier": mo, "output_shift": sho, "act_min": int(act_min),
            "act_max": int(act_max)}


def squared_difference_params(scale1, zp1, scale2, zp2, output_scale, output_zp):
    """SQUARED_DIFFERENCE int8 (TFLM squared_difference.cc: float64, left shift 7)."""
    s1, s2, so = float(F32(scale1)), float(F32(scale2)), F32(output_scale)
    twice = 2.0 * max(s1, s2)
    m1, sh1 = _qm(s1 / twice, "SQUARED_DIFFERENCE input 1 multiplier")
    m2, sh2 = _qm(s2 / twice, "SQUARED_DIFFERENCE input 2 multiplier")
    mo, sho = _qm((twice * twice) / float(F32(F32(1 << 14) * so)), "SQUARED_DIFFERENCE output multiplier")
    return {"input1_offset": -int(zp1), "input2_offset": -int(zp2), "output_offset": int(output_zp),
            "left_shift": 7, "input1_multiplier": m1, "input1_shift": sh1, "input2_multiplier": m2,
            "input2_shift": sh2, "output_multiplier": mo, "output_shift": sho, "act_min": -128, "act_max": 127}


def prelu_params(input_scale, input_zp, alpha_scale, alpha_zp, output_scale, output_zp, rounding="tflm"):
    """TFLM multiplies and divides the scales in float64, LiteRT in float32 (rounding="litert")."""
    if rounding == "litert":
        fi, fa, fo = F32(input_scale), F32(alpha_scale), F32(output_scale)
        r1, r2 = float(F32(fi / fo)), float(F32(F32(fi * fa) / fo))
    else:
        si, sa, so = float(F32(input_scale)), float(F32(alpha_scale)), float(F32(output_scale))
        r1, r2 = si / so, si * sa / so
    m1, s1 = _qm(r1, "PRELU positive multiplier")
    m2, s2 = _qm(r2, "PRELU negative multiplier")
    return {"input_offset": -int(input_zp), "alpha_offset": -int(alpha_zp), "output_offset": int(output_zp),
            "positive_multiplier": m1, "positive_shift": s1, "negative_multiplier": m2, "negative_shift": s2}


def gelu_table(input_scale, input_zero_point, output_scale, output_zero_point, approximate):
    """GELU int8 as LiteRT computes it (TFLM has no GELU): a 256-entry table
    filled by LUTPopulate in float32: dequantize, GeluTransform (erf form) or
    GeluTransformApproximate (tanh form), multiply by 1 / output_scale, round
    half away from zero, add the zero point, clamp. erf and tanh are evaluated
    in float64 and rounded to float32 (the correctly rounded float32 value,
    which glibc's erff / tanhf return for these arguments)."""
    in_s, out_s = F32(input_scale), F32(output_scale)
    inv = F32(F32(1.0) / out_s)
    sqrt1_2 = F32(math.sqrt(0.5))
    k = F32(2.0 / math.sqrt(math.pi) * math.sqrt(0.5))
    table = []
    for v in range(-128, 128):
        x = F32(in_s * F32(v - int(input_zero_point)))
        if approximate:
            inner = F32(k * F32(x + F32(F32(F32(F32(0.044715) * x) * x) * x)))
            y = F32(F32(F32(0.5) * x) * F32(F32(1.0) + F32(math.tanh(float(inner)))))
        else:
            y = F32(F32(F32(0.5) * x) * F32(F32(1.0) + F32(math.erf(float(F32(x * sqrt1_2))))))
        r = _round_away(float(F32(y * inv)))
        q = int(F32(F32(r) + F32(int(output_zero_point))))
        table.append(max(-128, min(127, q)))
    return table


def neg_params(input_scale, input_zero_point, output_scale, output_zero_point):
    """NEG int8. LiteRT (the only reference with an int8 NEG) negates the raw
    values; that is exact when the output has the input's scale and the
    negated zero point, and then this is what pyembed does. Otherwise pyembed
    requantizes -(x - zp_in) to the output scale (no reference implements
    that case)."""
    in_s, out_s = F32(input_scale), F32(output_scale)
    base = {"input_zero_point": int(input_zero_point), "output_zero_point": int(output_zero_point),
            "act_min": -128, "act_max": 127}
    if in_s == out_s and int(output_zero_point) == -int(input_zero_point):
        return dict(base, multiplier=0, shift=0, requantize=0)
    m, s = _qm(float(in_s) / float(out_s), "NEG multiplier")
    return dict(base, multiplier=m, shift=s, requantize=1)


REDUCE_MODES = {"SUM": 0, "MEAN": 1, "MEAN_DIV": 2, "MEAN_SPATIAL": 3}


def reduce_params(mode, input_scale, input_zp, output_scale, output_zp):
    m, s = _qm(float(F32(input_scale)) / float(F32(output_scale)), f"{mode} multiplier")
    return {"mode": REDUCE_MODES[mode], "input_zero_point": int(input_zp), "output_zero_point": int(output_zp),
            "multiplier": m, "shift": s}


# -- int32 parameter words of the graph runtime (csrc/include/pyembed/pe_math_ops.h)

MATH_OPS = {"MEAN": 60, "SUM": 61, "LOGISTIC": 62, "TANH": 63, "HARD_SWISH": 64, "LEAKY_RELU": 65,
            "PRELU": 66, "RELU": 67, "RELU6": 68, "RELU_N1_TO_1": 69, "MINIMUM": 70, "MAXIMUM": 71,
            "SUB": 72, "NEG": 73, "ABS": 74, "SQUARED_DIFFERENCE": 75, "RSQRT": 76, "GELU": 77,
            "L2_NORMALIZATION": 78}

_FIELDS = {
    "LOGISTIC": ("input_zero_point", "input_range_radius", "input_multiplier", "input_left_shift"),
    "HARD_SWISH": ("input_zero_point", "output_zero_point", "reluish_multiplier_fixedpoint_int16",
                   "reluish_multiplier_exponent", "output_multiplier_fixedpoint_int16",
                   "output_multiplier_exponent"),
    "LEAKY_RELU": ("input_zero_point", "output_zero_point", "multiplier_identity", "shift_identity",
                   "multiplier_alpha", "shift_alpha"),
    "RELU": ("input_zero_point", "output_zero_point", "multiplier", "shift", "requantize", "act_min", "act_max"),
    "ABS": ("input_zero_point", "output_zero_point", "multiplier", "shift", "rescale"),
    "SUB": ("input1_offset", "input2_offset", "output_offset", "left_shift", "input1_multiplier", "input1_shift",
            "input2_multiplier", "input2_shift", "output_multiplier", "output_shift", "act_min", "act_max"),
    "PRELU": ("input_offset", "alpha_offset", "output_offset", "positive_multiplier", "positive_shift",
              "negative_multiplier", "negative_shift"),
    "REDUCE": ("mode", "input_zero_point", "output_zero_point", "multiplier", "shift"),
}
_FIELDS["TANH"] = _FIELDS["LOGISTIC"]
_FIELDS["RELU6"] = _FIELDS["RELU_N1_TO_1"] = _FIELDS["NEG"] = _FIELDS["RELU"]
_FIELDS["RSQRT"] = _FIELDS["ABS"]
_FIELDS["SQUARED_DIFFERENCE"] = _FIELDS["SUB"]
_FIELDS["MEAN"] = _FIELDS["SUM"] = _FIELDS["REDUCE"]
_FIELDS["MINIMUM"] = _FIELDS["MAXIMUM"] = ()


def shape_block(out_shape, shape0, shape1):
    """rank, output dims, input dims right-aligned with leading 1s (a scalar is [1])."""
    rank = max(1, len(out_shape))

    def pad(s):
        s = [int(d) for d in s]
        return [1] * (rank - len(s)) + s

    return [rank] + pad(out_shape) + pad(shape0) + pad(shape1)


def lut_words(table):
    """GELU: 256 int8 outputs packed four to a word, byte j of word k = table[4k + j]."""
    t = np.asarray(table, dtype=np.int64)
    if t.shape != (256,) or t.min() < -128 or t.max() > 127:
        raise ArgumentError("table: expected 256 int8 values")
    u = (t & 0xFF).reshape(64, 4)
    w = u[:, 0] | (u[:, 1] << 8) | (u[:, 2] << 16) | (u[:, 3] << 24)
    return [int(x) - (1 << 32) if x >= 1 << 31 else int(x) for x in w]


def op_words(op, params, shapes=None, axis_mask=0, input_dims=()):
    """The int32 words of operator `op` from its parameter dict; `shapes`
    (out, in0, in1) for the broadcasting operators, `axis_mask` and the
    input dims for MEAN / SUM, params["depth"] for L2_NORMALIZATION, the
    table (params["table"]) for GELU."""
    if op == "GELU":
        return lut_words(params["table"])
    if op == "L2_NORMALIZATION":
        return [int(params["input_zero_point"]), int(params["depth"])]
    words = [int(params[k]) for k in _FIELDS[op]]
    if op in ("MEAN", "SUM"):
        dims = [int(d) for d in input_dims] or [1]
        return words + [int(axis_mask), len(dims)] + dims
    if op in ("SUB", "SQUARED_DIFFERENCE", "PRELU", "MINIMUM", "MAXIMUM"):
        return words + shape_block(*shapes)
    return words
