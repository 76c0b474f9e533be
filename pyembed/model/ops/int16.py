"""int16x8 variants (int16 activations, int8 weights) of CONV_2D,
FULLY_CONNECTED and ADD, as TFLite Micro's reference kernels compute them
(csrc/include/pyembed/pe_s16.h). They register as "TYPE@int16": the
operator keeps its TFLite type and pyembed.model.ops dispatches on its first
input's element type.

* CONV_2D: input / output zero points 0, symmetric int8 filter (per channel
  along axis 0 or per tensor), int64 bias (or none); multipliers
  double(in_scale) * double(w_scale[c]) / double(out_scale); the int64
  accumulator requantized by TFLite's int64 MultiplyByQuantizedMultiplier
  (shift must be <= 7).
* FULLY_CONNECTED: like CONV_2D per channel; per tensor the two scales are
  multiplied in float32 first; an int32 bias selects TFLite's int32 sum and
  int32 (double rounding) requantization, an int64 bias (or none) the int64
  one.
* ADD: TFLite's general int16 path, left shift 15, inputs rescaled to twice
  the larger input scale; the output multiplier must be < 1.
Fused activations clamp in int16 (CalculateActivationRangeQuantized).
* SOFTMAX: TFLM's SoftmaxInt16 with the two LUTs LUTPopulate<int16_t> fills,
  computed here (float32, libm expf) and kept in the parameter words (flash)
  where TFLM keeps them in its persistent arena.

Bit-exact with TFLM (tests/test_ops_heavy.py). LiteRT: measured on the same
random cases, its CONV_2D (when it accepts the model: it requires a bias) and
ADD agree; its int16 FULLY_CONNECTED with an int64 bias (or none) requantizes
as TFLITE_SINGLE_ROUNDING builds do (the full 31-bit multiplier, one
rounding, pe_fx_requant64_single), which rounding="litert" reproduces
(words_litert). With an int32 bias, LiteRT's reference kernel reads the
bias buffer as int64 values: output channel j < O/2 gets b[2j] + 2^32 b[2j+1]
(reproduced by an int64-bias model in tests/test_ops_heavy.py::
test_litert_int16_fc_reads_an_int32_bias_as_int64), channels j >= O/2 read
the bytes past the buffer's end, which nothing can reproduce; so that case
keeps TFLM's arithmetic, which LiteRT's optimized (default) resolver
computes. Its int16 SOFTMAX differs by one in a few elements.
"""
import numpy as np

from pyembed.model.ops.base import Unsupported, _multipliers, activation_range, add_rescale
from pyembed.model.ops.core import _check_stride, _geometry, _broadcast_shape
from pyembed.model.ops.registry import register

I16 = (np.int16,)
I16_MIN, I16_MAX = -32768, 32767


def _pairs(values):
    """int64 values as (lo, hi) int32 words."""
    out = []
    for v in np.asarray(values, dtype=np.int64).reshape(-1):
        u = int(v) & 0xFFFFFFFFFFFFFFFF
        lo, hi = u & 0xFFFFFFFF, u >> 32
        out += [lo - (1 << 32) if lo >= 1 << 31 else lo, hi - (1 << 32) if hi >= 1 << 31 else hi]
    return out


def _binary_int16(c):
    """Input 1, input 2 and the output of a two-input int16 operator, checked:
    int16 all three, the inputs broadcasting to the output, at most 4-D."""
    a, b, y = c.tensor(0, "input 1"), c.tensor(1, "input 2"), c.output()
    for t, what in ((a, "input 1"), (b, "input 2"), (y, "output")):
        c.dtype(t, what, I16)
    if len(_broadcast_shape(c, a, b, y)) > 4:
        raise Unsupported("more than 4 dimensions")
    return a, b, y


def _zero_zp(c, t, what):
    s, z = c.qparams(t, what)
    if z != 0:
        raise Unsupported(f"{what} zero point {z}: int16 tensors must have zero point 0 (TFLite)")
    return s


def _check_shifts(shift):
    if np.any(np.asarray(shift) > 7):
        raise Unsupported("a requantization shift above 7 (TFLite's int64 requantization takes shifts <= 7)")


def _need(c, keys):
    """The options an operator cannot run without (an error names the first one missing)."""
    for key in keys:
        if key not in c.op.options:
            raise c.error(f"options lack {key!r} (missing or malformed builtin options)")


def _s16x8_operands(c, x, w, b, y):
    """The int16 x int8 convolutions' operands (CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV): int16
    input and output, a constant int8 filter, an optional constant int64 bias, all of rank 4."""
    c.dtype(x, "input", I16)
    c.dtype(y, "output", I16)
    c.dtype(w, "filter")
    c.constant(w, "filter")
    if b is not None:
        c.dtype(b, "bias", (np.int64,))
        c.constant(b, "bias")
    for t, what in ((x, "input"), (w, "filter"), (y, "output")):
        c.rank(t, what, 4)


def _s16x8_requant(c, x, w, y, cout, axis, activation):
    """The int16 x int8 convolutions' output scaling: zero points 0, one filter scale or one per
    output channel (along ``axis``; None: not checked), TFLite's int64 requantization (shifts <= 7)
    and the activation's int16 range. Returns (multipliers, shifts, act_min, act_max)."""
    xs, ys = _zero_zp(c, x, "input"), _zero_zp(c, y, "output")
    ws = np.asarray(w.scale, dtype=np.float32)
    if len(ws) not in (1, cout) or np.any(~np.isfinite(ws)) or np.any(ws <= 0):
        raise c.error(f"filter scales must be 1 or {cout} finite values > 0")
    if axis is not None and len(ws) > 1 and w.quant_axis != axis:
        raise c.error(f"filter is quantized per channel along axis {w.quant_axis}, expected {axis}")
    if w.zero_point is not None and np.any(np.asarray(w.zero_point) != 0):
        raise Unsupported("filter zero points other than 0")
    m, s = _multipliers([float(xs) * float(v) / float(ys) for v in np.broadcast_to(ws, (cout,))])
    _check_shifts(s)
    act_min, act_max = activation_range(activation, ys, 0, I16_MIN, I16_MAX)
    return m, s, act_min, act_max


@register("CONV_2D@int16", code=102, c_name="PE_GOP_CONV_2D_S16X8")
def prepare_conv_2d_int16(c):
    op = c.op
    x, w, y = c.tensor(0, "input"), c.tensor(1, "filter"), c.output()
    b = c.tensor(2, "bias", optional=True)
    _s16x8_operands(c, x, w, b, y)
    _need(c, ("padding", "stride"))
    o = op.options
    stride, dilation = tuple(o["stride"]), tuple(o.get("dilation", (1, 1)))
    _check_stride(c, stride, dilation)
    n, h, wd, cin = x.shape
    cout, kh, kw, kin = w.shape
    if kin <= 0 or cin % kin != 0 or cout % (cin // kin) != 0:
        raise c.error(f"filter {list(w.shape)} does not fit input channels {cin}")
    groups = cin // kin
    (oh, ow), pad = _geometry(c, o, (h, wd), (kh, kw), stride, dilation)
    if tuple(y.shape) != (n, oh, ow, cout):
        raise c.error(f"output shape {list(y.shape)} disagrees with the convolution: expected {[n, oh, ow, cout]}")
    if b is not None and b.size != cout:
        raise c.error(f"bias shape {list(b.shape)} must hold {cout} values")
    mult, shift, act_min, act_max = _s16x8_requant(c, x, w, y, cout, None, o.get("activation"))
    words = [stride[0], stride[1], pad[0], pad[2], dilation[0], dilation[1], groups, act_min, act_max,
             int(b is not None)] + [int(v) for v in mult] + [int(v) for v in shift]
    if b is not None:
        words += _pairs(b.data)
    op.params = {"stride": stride, "dilation": dilation, "padding": o["padding"], "pad": pad, "kernel": (kh, kw),
                 "groups": groups, "act_min": act_min, "act_max": act_max, "multiplier": mult, "shift": shift,
                 "c_inputs": [0, 1], "words": words}
    op.macs = int(n * oh * ow * cout * kh * kw * kin)
    op.scratch_bytes = 0


@register("FULLY_CONNECTED@int16", code=103, c_name="PE_GOP_FULLY_CONNECTED_S16X8")
def prepare_fully_connected_int16(c):
    op = c.op
    x, w, y = c.tensor(0, "input"), c.tensor(1, "weights"), c.output()
    b = c.tensor(2, "bias", optional=True)
    c.dtype(x, "input", I16)
    c.dtype(y, "output", I16)
    c.dtype(w, "weights")
    c.constant(w, "weights")
    if b is not None:
        c.dtype(b, "bias", (np.int64, np.int32))
        c.constant(b, "bias")
    if op.options.get("weights_format", 0) != 0:
        raise Unsupported("shuffled weights format")
    c.rank(w, "weights", 2)
    out_f, depth = w.shape
    if depth <= 0 or x.size % depth != 0:
        raise c.error(f"input shape {list(x.shape)} is not a whole number of rows of depth {depth}")
    batches = x.size // depth
    if y.size != batches * out_f:
        raise c.error(f"output shape {list(y.shape)} disagrees with {batches} row(s) of {out_f} features")
    if b is not None and b.size != out_f:
        raise c.error(f"bias shape {list(b.shape)} must hold {out_f} values")
    bias32 = b is not None and b.dtype == np.int32
    if bias32 and depth * 128 * 32768 > 2**31 - 1:
        raise Unsupported(f"depth {depth} with an int32 bias: the int32 sum could overflow")
    xs, ys = _zero_zp(c, x, "input"), _zero_zp(c, y, "output")
    ws = np.asarray(w.scale, dtype=np.float32)
    if w.zero_point is not None and np.any(np.asarray(w.zero_point) != 0):
        raise Unsupported("weight zero points other than 0")
    if len(ws) == 1:
        reals = [float(np.float32(xs) * np.float32(ws[0])) / float(ys)]
    elif len(ws) == out_f:
        reals = [float(xs) * float(s) / float(ys) for s in ws]
    else:
        raise c.error(f"weights have {len(ws)} scales, expected 1 or {out_f}")
    mult, shift = _multipliers(reals)
    if not bias32:
        _check_shifts(shift)
    act_min, act_max = activation_range(op.options.get("activation"), ys, 0, I16_MIN, I16_MAX)
    words = [len(mult), act_min, act_max, int(bias32), int(b is not None)] + [int(v) for v in mult] \
        + [int(v) for v in shift]
    if b is not None:
        words += [int(v) for v in np.asarray(b.data).reshape(-1)] if bias32 else _pairs(b.data)
    op.params = {"act_min": act_min, "act_max": act_max, "multiplier": mult, "shift": shift, "bias32": bias32,
                 "batches": batches, "depth": depth, "c_inputs": [0, 1], "words": words}
    if not bias32:
        # LiteRT (rounding="litert"): TFLITE_SINGLE_ROUNDING's int64 requantization,
        # the full 31-bit multiplier and one rounding (word 3, bit 1)
        op.params["words_litert"] = words[:3] + [words[3] | 2] + words[4:]
    op.macs = int(batches * out_f * depth)
    op.scratch_bytes = 0


@register("ADD@int16", code=104, c_name="PE_GOP_ADD_S16")
def prepare_add_int16(c):
    op = c.op
    a, b, y = _binary_int16(c)
    s1, z1 = c.qparams(a, "input 1")
    s2, z2 = c.qparams(b, "input 2")
    so, zo = c.qparams(y, "output")
    m1, sh1, m2, sh2, mo, sho = add_rescale(s1, s2, so, 15)
    if max(sh1, sh2, sho) > 0:
        raise Unsupported("an ADD rescale >= 1 (TFLite's int16 ADD takes multipliers below one)")
    act_min, act_max = activation_range(op.options.get("activation"), so, zo, I16_MIN, I16_MAX)
    op.params = {"act_min": act_min, "act_max": act_max,
                 "words": [-z1, -z2, zo, m1, sh1, m2, sh2, mo, sho, act_min, act_max]}
    op.macs = int(y.size)
    op.scratch_bytes = 0


# -- SOFTMAX int16 --------------------------------------------------------------

def _libm_expf():
    import ctypes
    import ctypes.util
    libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
    f = libm.expf
    f.restype, f.argtypes = ctypes.c_float, [ctypes.c_float]
    return lambda v: np.float32(f(float(v)))


def _round_away32(v):
    import math
    v = float(v)
    return np.float32(math.floor(v + 0.5) if v >= 0 else -math.floor(-v + 0.5))


def lut_populate_int16(input_scale, input_zp, output_scale, output_zp, fn):
    """TFLite's LUTPopulate<int16_t> (513 entries) in float32 arithmetic,
    operation by operation as the C++ evaluates it."""
    f32 = np.float32
    input_scale, output_scale = f32(input_scale), f32(output_scale)
    in_min = input_scale * f32(-32768 - input_zp)
    in_max = input_scale * f32(32767 - input_zp)
    out_min = output_scale * f32(-32768 - output_zp)
    out_max = output_scale * f32(32767 - output_zp)
    step = (in_max - in_min) / f32(512)
    half = step / f32(2)
    inv = f32(65536) / (out_max - out_min)
    lut = []
    for i in range(512):
        val = fn(in_min + f32(i) * step)
        mid = fn(in_min + f32(i) * step + half)
        nxt = fn(in_min + f32(i + 1) * step)
        sample = _round_away32(val * inv)
        mid_interp = _round_away32((nxt * inv + _round_away32(val * inv)) / f32(2))
        mid_val = _round_away32(mid * inv)
        bias = _round_away32((mid_interp - mid_val) / f32(2))
        lut.append(int(min(max(sample - bias, f32(-32768)), f32(32767))))
    lut.append(int(min(max(_round_away32(fn(in_max) * inv), f32(-32768)), f32(32767))))
    return lut


def _pack16(values):
    vals = [v & 0xFFFF for v in values] + [0] * (len(values) % 2)
    words = []
    for k in range(0, len(vals), 2):
        u = vals[k] | (vals[k + 1] << 16)
        words.append(u - (1 << 32) if u >= 1 << 31 else u)
    return words


def softmax_int16_luts():
    """(exp LUT, 1 / (1 + x) LUT) of TFLM's int16 SOFTMAX."""
    f32 = np.float32
    expf = _libm_expf()
    rng = f32(65535)
    exp_lut = lut_populate_int16(f32(10.0) / rng, 32767, f32(2.0) / rng, 0, expf)
    one = lut_populate_int16(f32(1.0) / rng, -32768, f32(2.0) / rng, 0, lambda v: f32(1.0) / (f32(1.0) + v))
    return exp_lut, one


@register("SOFTMAX@int16", code=105, c_name="PE_GOP_SOFTMAX_S16")
def prepare_softmax_int16(c):
    from pyembed.kernels.quant import quantize_multiplier
    op = c.op
    x, y = c.tensor(0, "input"), c.output()
    c.dtype(x, "input", I16)
    c.dtype(y, "output", I16)
    if tuple(x.shape) != tuple(y.shape) or len(x.shape) < 1:
        raise c.error(f"output shape {list(y.shape)} must equal the input shape {list(x.shape)}")
    xs = _zero_zp(c, x, "input")
    ys = _zero_zp(c, y, "output")
    if abs(float(ys) - 1.0 / 32768) > 0.001 / 32768:
        raise Unsupported(f"output scale {float(ys)}: TFLite's int16 SOFTMAX needs 1/32768")
    beta = float(np.float32(op.options.get("beta", 1.0)))
    m, s = quantize_multiplier(float(xs) * beta / (10.0 / 65535.0))
    if s > 30:
        raise Unsupported("input scale * beta too large")
    exp_lut, one = softmax_int16_luts()
    op.params = {"beta": beta, "input_multiplier": m, "input_left_shift": s,
                 "words": [int(m), int(s)] + _pack16(exp_lut) + _pack16(one)}
    op.macs = int(x.size)
    op.scratch_bytes = 0


# -- SQUARED_DIFFERENCE / PRELU int16 -----------------------------------------------

@register("SQUARED_DIFFERENCE@int16", code=109, c_name="PE_GOP_SQUARED_DIFFERENCE_S16")
def prepare_squared_difference_int16(c):
    """TFLM's int16 SQUARED_DIFFERENCE: zero points 0, left shift 0, both
    inputs rescaled to twice the larger input scale, the squared difference
    requantized to the output (multipliers in float64)."""
    from pyembed.kernels.quant import quantize_multiplier
    op = c.op
    a, b, y = _binary_int16(c)
    s1, s2, so = _zero_zp(c, a, "input 1"), _zero_zp(c, b, "input 2"), _zero_zp(c, y, "output")
    twice = 2.0 * max(float(s1), float(s2))
    m1, sh1 = quantize_multiplier(float(s1) / twice)
    m2, sh2 = quantize_multiplier(float(s2) / twice)
    mo, sho = quantize_multiplier(twice * twice / float(np.float32(so)))
    if sho > 0:
        raise Unsupported("an output rescale >= 1 (the int32 square would overflow when shifted left)")
    op.params = {"words": [m1, sh1, m2, sh2, mo, sho]}
    op.macs = int(y.size)
    op.scratch_bytes = 0


@register("PRELU@int16", code=110, c_name="PE_GOP_PRELU_S16")
def prepare_prelu_int16(c):
    """TFLM's PRELU with int16 input / output and int8 alpha (broadcast to the
    input): multipliers in_scale / out_scale and in_scale * alpha_scale /
    out_scale in float64."""
    from pyembed.kernels.quant import quantize_multiplier
    op = c.op
    x, alpha, y = c.tensor(0, "input"), c.tensor(1, "alpha"), c.output()
    c.dtype(x, "input", I16)
    c.dtype(y, "output", I16)
    c.dtype(alpha, "alpha")
    _broadcast_shape(c, x, alpha, y)
    if tuple(y.shape) != tuple(x.shape) or len(x.shape) > 4:
        raise c.error(f"alpha shape {list(alpha.shape)} must broadcast to the input shape {list(x.shape)} "
                      f"(at most 4-D)")
    sx, zx = c.qparams(x, "input")
    sa, za = c.qparams(alpha, "alpha")
    sy, zy = c.qparams(y, "output")
    m1, s1 = quantize_multiplier(float(sx) / float(sy))
    m2, s2 = quantize_multiplier(float(sx) * float(sa) / float(sy))
    if s1 > 14 or s2 > 6:
        raise Unsupported("PRELU rescale too large for TFLite's int32 arithmetic")
    op.params = {"words": [-zx, -za, zy, m1, s1, m2, s2]}
    op.macs = int(y.size)
    op.scratch_bytes = 0
