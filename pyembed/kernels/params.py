"""Kernel parameter arithmetic exactly as TFLite's Prepare steps compute it:
fused-activation clamps, output sizes and SAME/VALID padding, softmax input
scaling, ADD's fixed-point rescaling, NHWC views of shapes.

These are shared by the layer objects (pyembed.kernels.layers) and the
operator preparation of imported models (pyembed.model.ops), so both derive
every formula once.
"""
import math

import numpy as np

from pyembed.kernels.quant import quantize_multiplier

INT8_MIN, INT8_MAX = -128, 127


class Unsupported(Exception):
    """Valid, but not something the runtime executes (carries the reason)."""


def _round_away(x):
    return math.floor(x + 0.5) if x >= 0 else math.ceil(x - 0.5)


def activation_range(activation, scale, zero_point, qmin=INT8_MIN, qmax=INT8_MAX):
    """TFLite CalculateActivationRangeQuantized: the clamp of a fused activation."""
    scale = np.float32(scale)

    def q(f):
        return zero_point + int(_round_away(float(np.float32(f) / scale)))

    if activation is None:
        return qmin, qmax
    if activation == "RELU":
        return max(qmin, q(0.0)), qmax
    if activation == "RELU6":
        return max(qmin, q(0.0)), min(qmax, q(6.0))
    if activation == "RELU_N1_TO_1":
        return max(qmin, q(-1.0)), min(qmax, q(1.0))
    raise Unsupported(f"fused activation {activation}")


def out_size(padding, size, kernel, stride, dilation=1):
    eff = (kernel - 1) * dilation + 1
    if padding == "SAME":
        return (size + stride - 1) // stride
    if padding == "VALID":
        return (size + stride - eff) // stride
    raise Unsupported(f"padding {padding!r}")


def padded_out_size(size, kernel, stride, before, after, dilation=1):
    """Output length along one axis with explicit padding (floor rule)."""
    eff = (kernel - 1) * dilation + 1
    return (size + before + after - eff) // stride + 1


def pad_amounts(padding, size, kernel, stride, dilation, out):
    """(before, after) padding along one axis, as TFLite computes it."""
    eff = (kernel - 1) * dilation + 1
    total = max(0, (out - 1) * stride + eff - size)
    if padding == "VALID":
        return 0, 0  # VALID never pads
    return total // 2, total - total // 2


def softmax_params(beta, input_scale, integer_bits=5, cap=False):
    """(input_multiplier, input_left_shift, diff_min) of TFLite's int8 softmax.
    cap=True: SOFTMAX's own preparation (PreprocessSoftmaxScaling), which
    also gives a left shift of 31 (an input scale of 2^30 / (beta * 2^26)
    or more); without it such a scale is refused."""
    real = min(float(beta) * float(input_scale) * float(1 << (31 - integer_bits)), float((1 << 31) - 1))
    if cap and real >= float(1 << 30):
        # TFLite caps the real multiplier at 2^31 - 1 (a huge input scale, e.g. an attention mask of
        # -1e9 before the softmax) and keeps the left shift of 31 its QuantizeMultiplier gives; then
        # diff_min is 0: only a row's maximum counts
        q, shift = math.frexp(real)
        mult = math.floor(q * (1 << 31) + 0.5)
        if mult == 1 << 31:
            mult, shift = mult // 2, shift + 1
    else:
        mult, shift = quantize_multiplier(real)
    if shift < 0:
        raise Unsupported(f"softmax beta * input_scale = {float(beta) * float(input_scale)!r} is too small "
                          f"(left shift {shift} < 0)")
    max_input_rescaled = 1.0 * ((1 << integer_bits) - 1) * (1 << (31 - integer_bits)) / (1 << shift)
    diff_min = -int(math.floor(max_input_rescaled))
    return mult, shift, diff_min


ADD_LEFT_SHIFT = 20  # TFLite's int8 ADD


def add_rescale(scale1, scale2, output_scale, left_shift=ADD_LEFT_SHIFT):
    """TFLite int8 ADD's fixed-point rescaling: both inputs to twice the
    larger input scale, the sum back to the output scale. Returns
    (input1_multiplier, input1_shift, input2_multiplier, input2_shift,
    output_multiplier, output_shift). Doubling is exact in float32 and
    float64 alike, so float32 scales give TFLite's values."""
    twice_max = 2.0 * max(float(scale1), float(scale2))
    m1, sh1 = quantize_multiplier(float(scale1) / twice_max)
    m2, sh2 = quantize_multiplier(float(scale2) / twice_max)
    mo, sho = quantize_multiplier(twice_max / ((1 << left_shift) * float(output_scale)))
    return m1, sh1, m2, sh2, mo, sho


def _multipliers(reals):
    ms, ss = [], []
    for r in reals:
        m, s = quantize_multiplier(float(r))
        ms.append(m)
        ss.append(s)
    return np.array(ms, dtype=np.int32), np.array(ss, dtype=np.int32)


def dims4(shape):
    """NHWC view of a shape: leading 1s added, leading dimensions beyond 4 folded into n."""
    shape = tuple(int(d) for d in shape)
    if len(shape) > 4:
        lead = int(np.prod(shape[:-3], dtype=np.int64))
        return (lead,) + shape[-3:]
    return (1,) * (4 - len(shape)) + shape
