"""int16x8 DEPTHWISE_CONV_2D and TRANSPOSE_CONV, int16 AVERAGE_POOL_2D /
MAX_POOL_2D and QUANTIZE int16 -> int16, as
TFLite Micro's reference integer kernels compute them
(csrc/include/pyembed/pe_s16.h, kernels/s16/pe_s16_window.c). They register
as "TYPE@int16" variants, taken when the input is int16 (the converter's
EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8 models).

* DEPTHWISE_CONV_2D: input / output zero points 0, symmetric int8 filter
  [1, kh, kw, out_c] (per channel along axis 3, or per tensor), int64 bias
  (or none); multipliers double(in_scale) * double(w_scale[c]) /
  double(out_scale); the int64 sum requantized by TFLite's int64
  MultiplyByQuantizedMultiplier (shift <= 7); fused activation clamped in
  int16.
* AVERAGE_POOL_2D: the int32 sum of the taps inside the input, divided by
  their count rounding half away from zero; MAX_POOL_2D the largest tap;
  input and output quantization equal (zero point 0); fused activation.
"""
import numpy as np

from pyembed.model.ops.base import Unsupported, activation_range
from pyembed.model.ops.core import _check_stride, _geometry
from pyembed.model.ops.int16 import I16, I16_MAX, I16_MIN, _need, _pairs, _s16x8_operands, _s16x8_requant, _zero_zp
from pyembed.model.ops.registry import register

CONSTRAINTS = {}


@register("DEPTHWISE_CONV_2D@int16", code=115, c_name="PE_GOP_DEPTHWISE_CONV_2D_S16X8")
def prepare_depthwise_int16(c):
    op = c.op
    x, w, y = c.tensor(0, "input"), c.tensor(1, "filter"), c.output()
    b = c.tensor(2, "bias", optional=True)
    _s16x8_operands(c, x, w, b, y)
    _need(c, ("padding", "stride"))
    o = op.options
    stride, dilation = tuple(o["stride"]), tuple(o.get("dilation", (1, 1)))
    _check_stride(c, stride, dilation)
    n, h, wd, cin = x.shape
    one, kh, kw, cout = w.shape
    if one != 1 or cout % cin != 0:
        raise c.error(f"depthwise filter shape {list(w.shape)} must be [1, kh, kw, a multiple of {cin}]")
    mult = cout // cin
    (oh, ow), pad = _geometry(c, o, (h, wd), (kh, kw), stride, dilation)
    if tuple(y.shape) != (n, oh, ow, cout):
        raise c.error(f"output shape {list(y.shape)} disagrees with the convolution: expected {[n, oh, ow, cout]}")
    if b is not None and b.size != cout:
        raise c.error(f"bias shape {list(b.shape)} must hold {cout} values")
    m, s, act_min, act_max = _s16x8_requant(c, x, w, y, cout, 3, o.get("activation"))
    words = [stride[0], stride[1], pad[0], pad[2], dilation[0], dilation[1], mult, act_min, act_max,
             int(b is not None)] + [int(v) for v in m] + [int(v) for v in s]
    if b is not None:
        words += _pairs(b.data)
    op.params = {"stride": stride, "dilation": dilation, "padding": o["padding"], "pad": pad, "kernel": (kh, kw),
                 "depth_multiplier": mult, "act_min": act_min, "act_max": act_max, "multiplier": m, "shift": s,
                 "c_inputs": [0, 1], "words": words}
    op.macs = int(n * oh * ow * cout * kh * kw)
    op.scratch_bytes = 0


def _pool_int16(c, kind):
    op = c.op
    x, y = c.tensor(0, "input"), c.output()
    c.dtype(x, "input", I16)
    c.dtype(y, "output", I16)
    c.rank(x, "input", 4)
    c.rank(y, "output", 4)
    _need(c, ("padding", "stride", "filter"))
    o = op.options
    stride, filt = tuple(o["stride"]), tuple(o["filter"])
    _check_stride(c, stride)
    if min(filt) < 1 or filt[0] * filt[1] > 65536:
        raise c.error(f"filter size {filt} must be >= 1 with at most 65536 taps")
    n, h, w, ch = x.shape
    (oh, ow), pad = _geometry(c, o, (h, w), filt, stride, (1, 1))
    if tuple(y.shape) != (n, oh, ow, ch):
        raise c.error(f"output shape {list(y.shape)} disagrees with the pooling: expected {[n, oh, ow, ch]}")
    if pad[0] >= filt[0] or pad[2] >= filt[1]:
        raise Unsupported(f"padding {pad} leaves a window without taps")
    xs, ys = _zero_zp(c, x, "input"), _zero_zp(c, y, "output")
    if xs != ys:
        raise Unsupported(f"int16 pooling with different input and output scales ({float(xs)} -> {float(ys)})")
    act_min, act_max = activation_range(o.get("activation"), ys, 0, I16_MIN, I16_MAX)
    op.params = {"kind": kind, "filter": filt, "stride": stride, "padding": o["padding"], "pad": pad,
                 "activation": o.get("activation"), "act_min": act_min, "act_max": act_max, "c_inputs": [0],
                 "words": [filt[0], filt[1], stride[0], stride[1], pad[0], pad[2], act_min, act_max]}
    op.macs = int(n * oh * ow * ch * filt[0] * filt[1])
    op.scratch_bytes = 0


@register("AVERAGE_POOL_2D@int16", code=116, c_name="PE_GOP_AVERAGE_POOL_2D_S16")
def prepare_average_pool_int16(c):
    _pool_int16(c, "avg")


@register("MAX_POOL_2D@int16", code=117, c_name="PE_GOP_MAX_POOL_2D_S16")
def prepare_max_pool_int16(c):
    _pool_int16(c, "max")


@register("TRANSPOSE_CONV@int16", code=120, c_name="PE_GOP_TRANSPOSE_CONV_S16X8")
def prepare_transpose_conv_int16(c):
    """TRANSPOSE_CONV int16 x int8: TFLM's int64 sums (gathered per output),
    int64 bias (or none), TFLite's int64 requantization (shift <= 7)."""
    from pyembed.model.ops.heavy import _taps, _tconv_geometry
    op = c.op
    shp, w, x = c.tensor(0, "output_shape"), c.tensor(1, "filter"), c.tensor(2, "input")
    b = c.tensor(3, "bias", optional=True)
    y = c.output()
    c.dtype(shp, "output_shape", (np.int32,))
    c.constant(shp, "output_shape")
    _s16x8_operands(c, x, w, b, y)
    o = op.options
    (sh, sw), (kh, kw), (pt, pl) = _tconv_geometry(c, shp, x, w, y, b)
    n, ih, iw, ic = x.shape
    oc = w.shape[0]
    oh, ow = int(y.shape[1]), int(y.shape[2])
    m, s, act_min, act_max = _s16x8_requant(c, x, w, y, oc, 0, o.get("activation"))
    words = [sh, sw, pt, pl, act_min, act_max, int(b is not None)] + [int(v) for v in m] + [int(v) for v in s]
    if b is not None:
        words += _pairs(b.data)
    op.params = {"stride": (sh, sw), "padding": o["padding"], "pad": (pt, pl), "kernel": (kh, kw),
                 "activation": o.get("activation"), "act_min": act_min, "act_max": act_max, "multiplier": m,
                 "shift": s, "c_inputs": [2, 1], "words": words}
    op.macs = int(n * _taps(oh, ih, kh, sh, pt) * _taps(ow, iw, kw, sw, pl) * ic * oc)
    op.scratch_bytes = 0


@register("QUANTIZE@int16", code=121, c_name="PE_GOP_REQUANTIZE_S16")
def prepare_requantize_int16(c):
    """QUANTIZE int16 -> int16 (a requantization, TFLite's Requantize: int32
    double-rounding multiplier from double(in_scale) / double(out_scale))."""
    from pyembed.kernels.quant import quantize_multiplier
    x, y = c.tensor(0, "input"), c.output()
    c.dtype(x, "input", I16)
    if y.dtype != np.int16:
        raise Unsupported(f"QUANTIZE int16 -> {y.type_name or y.dtype}: only int16 -> int16")
    if tuple(x.shape) != tuple(y.shape):
        raise c.error(f"output shape {list(y.shape)} differs from the input's {list(x.shape)}")
    xs, xz = c.qparams(x, "input")
    ys, yz = c.qparams(y, "output")
    m, s = quantize_multiplier(float(xs) / float(ys))
    if not -31 <= s <= 30:
        raise Unsupported(f"a requantization shift of {s}")
    c.op.params = {"kind": "REQUANTIZE", "input_offset": -xz, "output_offset": yz, "multiplier": m, "shift": s,
                   "c_inputs": [0], "words": [int(m), int(s), int(xz), int(yz)]}
    c.op.macs = int(y.size)
    c.op.scratch_bytes = 0
