"""Operator preparation and dispatch: from an imported operator (type,
tensors, options) to the kernel parameters the C graph runtime runs with.

For each supported operator, ``prepare_<op>`` checks the tensors (types,
shapes, quantization) and computes, exactly the way TFLite's reference
kernels do in their Prepare step:

* requantization multipliers: per channel ``double(in_scale) *
  double(w_scale[c]) / double(out_scale)``; per-tensor FULLY_CONNECTED
  multiplies the two scales in float32 first (TFLite's
  GetQuantizedConvolutionMultipler), then QuantizeMultiplier
  (:func:`pyembed.quant.quantize_multiplier`);
* fused activations: the clamp ``zero_point + round(f / scale)`` of 0, 6,
  -1 and 1 computed in float32 (CalculateActivationRangeQuantized);
* SAME / VALID padding: total = max(0, (out - 1) * stride + dilated_kernel
  - in), top/left = total // 2, the odd pixel at the bottom/right;
* ADD: left shift 20, both inputs rescaled to twice the larger input scale;
* SOFTMAX: beta * input_scale * 2^26 as a Q31 multiplier and left shift,
  and diff_min from the input radius (PreprocessSoftmaxScaling,
  CalculateInputRadius).

Shape or quantization inconsistencies raise ModelError (naming the model,
the operator and what is wrong); a valid operator the runtime does not
implement (another data type, an unknown builtin) is marked unsupported.
:func:`build_runtime` turns a Graph and a Layout into the C tables.
"""
import math

import numpy as np

from pyembed.errors import ArgumentError, ModelError
from pyembed.graph import Graph, Operator, Tensor
from pyembed.quant import quantize_multiplier

INT8_MIN, INT8_MAX = -128, 127


class Unsupported(Exception):
    """Valid, but not something the runtime executes (carries the reason)."""


class _Ctx:
    """Error context: the model label and the operator being prepared."""

    def __init__(self, label, graph, op):
        self.label, self.graph, self.op = label, graph, op

    def error(self, msg):
        return ModelError(f"{self.label}: operator {self.op.index} ({self.op.type}): {msg}")

    def tensor(self, k, what, optional=False):
        ins = self.op.inputs
        if k >= len(ins) or ins[k] < 0:
            if optional:
                return None
            raise self.error(f"missing input {k} ({what})")
        return self.graph.tensors[ins[k]]

    def output(self, k=0):
        if k >= len(self.op.outputs) or self.op.outputs[k] < 0:
            raise self.error(f"missing output {k}")
        return self.graph.tensors[self.op.outputs[k]]

    def dtype(self, t, what, allowed=(np.int8,)):
        if t.dtype is None or t.dtype not in [np.dtype(a) for a in allowed]:
            names = "/".join(np.dtype(a).name for a in allowed)
            raise Unsupported(f"{what} is {t.type_name or t.dtype}, only {names} is supported")

    def rank(self, t, what, n):
        if len(t.shape) != n:
            raise self.error(f"{what} (tensor {t.index} {t.name!r}) must be {n}-D, has shape {list(t.shape)}")

    def qparams(self, t, what):
        """Per-tensor (scale float32, zero point int) of an int8 tensor."""
        if not t.is_quantized:
            raise self.error(f"{what} (tensor {t.index} {t.name!r}) is {t.dtype.name} but has no "
                             f"quantization parameters (scale / zero point)")
        scale = np.float32(t.scale[0])
        if not (np.isfinite(scale) and scale > 0):
            raise self.error(f"{what} (tensor {t.index} {t.name!r}) has scale {float(scale)!r}, expected > 0")
        zp = 0
        if t.zero_point is not None and len(t.zero_point):
            zp = int(t.zero_point[0])
        if t.dtype == np.int8 and not INT8_MIN <= zp <= INT8_MAX:
            raise self.error(f"{what} (tensor {t.index} {t.name!r}) has zero point {zp}, outside int8")
        return scale, zp

    def constant(self, t, what):
        if not t.is_constant:
            raise Unsupported(f"{what} (tensor {t.index} {t.name!r}) is not constant")


# -- TFLite arithmetic helpers -------------------------------------------------

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


def softmax_params(beta, input_scale, integer_bits=5):
    """(input_multiplier, input_left_shift, diff_min) of TFLite's int8 softmax."""
    real = min(float(beta) * float(input_scale) * float(1 << (31 - integer_bits)), float((1 << 31) - 1))
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


# -- per-operator preparation -------------------------------------------------

def _geometry(c, o, hw, k, stride, dilation):
    """((out_h, out_w), (top, bottom, left, right)) for SAME / VALID (TFLite)
    or EXPLICIT padding (ONNX pads given as top, left, bottom, right)."""
    if o["padding"] == "EXPLICIT":
        t, l, b, r = (int(v) for v in o["explicit_pad"])
        if min(t, l, b, r) < 0:
            raise c.error(f"negative padding {(t, l, b, r)}")
        outs = [padded_out_size(hw[ax], k[ax], stride[ax], lo, hi, dilation[ax])
                for ax, (lo, hi) in enumerate(((t, b), (l, r)))]
        return tuple(outs), (t, b, l, r)
    oh = out_size(o["padding"], hw[0], k[0], stride[0], dilation[0])
    ow = out_size(o["padding"], hw[1], k[1], stride[1], dilation[1])
    pt, pb = pad_amounts(o["padding"], hw[0], k[0], stride[0], dilation[0], oh)
    pl, pr = pad_amounts(o["padding"], hw[1], k[1], stride[1], dilation[1], ow)
    return (oh, ow), (pt, pb, pl, pr)


def _check_stride(c, stride, dilation=(1, 1)):
    if min(stride) < 1 or min(dilation) < 1:
        raise c.error(f"stride {stride} and dilation {dilation} must be >= 1")


def _conv_common(c, depthwise):
    op = c.op
    x = c.tensor(0, "input")
    w = c.tensor(1, "filter")
    b = c.tensor(2, "bias", optional=True)
    y = c.output()
    c.dtype(x, "input")
    c.dtype(w, "filter")
    c.dtype(y, "output")
    if b is not None:
        c.dtype(b, "bias", (np.int32,))
    c.constant(w, "filter")
    if b is not None:
        c.constant(b, "bias")
    for t, what in ((x, "input"), (w, "filter"), (y, "output")):
        c.rank(t, what, 4)
    o = op.options
    for key in ("padding", "stride"):
        if key not in o:
            raise c.error(f"options lack {key!r} (missing or malformed builtin options)")
    stride = tuple(o["stride"])
    dilation = tuple(o.get("dilation", (1, 1)))
    _check_stride(c, stride, dilation)
    n, h, wd, cin = x.shape
    if depthwise:
        one, kh, kw, cout = w.shape
        if one != 1:
            raise c.error(f"depthwise filter shape {list(w.shape)} must be [1, kh, kw, out_channels]")
        if cin <= 0 or cout % cin != 0:
            raise c.error(f"depthwise output channels {cout} are not a multiple of input channels {cin}")
        mult = cout // cin
        groups = cin
    else:
        cout, kh, kw, kin = w.shape
        if kin <= 0 or cin % kin != 0:
            raise c.error(f"filter input channels {kin} do not divide input channels {cin}")
        groups = cin // kin
        if cout % groups != 0:
            raise c.error(f"output channels {cout} are not a multiple of the {groups} groups")
        mult = 1
    (oh, ow), pad = _geometry(c, o, (h, wd), (kh, kw), stride, dilation)
    if tuple(y.shape) != (n, oh, ow, cout):
        raise c.error(f"output shape {list(y.shape)} disagrees with input {list(x.shape)}, filter "
                      f"{list(w.shape)}, stride {stride}, padding {o['padding']}: expected {[n, oh, ow, cout]}")
    if b is not None and tuple(b.shape) != (cout,):
        raise c.error(f"bias shape {list(b.shape)} must be [{cout}]")
    xs, xz = c.qparams(x, "input")
    ys, yz = c.qparams(y, "output")
    if not w.is_quantized:
        raise c.error(f"filter (tensor {w.index} {w.name!r}) is int8 but has no quantization parameters")
    ws = np.asarray(w.scale, dtype=np.float32)
    if len(ws) not in (1, cout):
        raise c.error(f"filter has {len(ws)} scales, expected 1 or {cout} (one per output channel)")
    if len(ws) > 1 and w.quant_axis != (3 if depthwise else 0):
        raise c.error(f"filter is quantized per channel along axis {w.quant_axis}, expected "
                      f"{3 if depthwise else 0} (the output channels)")
    if w.zero_point is not None and np.any(np.asarray(w.zero_point) != 0):
        raise Unsupported("filter zero points other than 0 (int8 weights must be symmetric)")
    if np.any(~np.isfinite(ws)) or np.any(ws <= 0):
        raise c.error("filter scales must be finite and > 0")
    scales = np.broadcast_to(ws, (cout,))
    reals = [float(xs) * float(s) / float(ys) for s in scales]
    mult_arr, shift_arr = _multipliers(reals)
    act_min, act_max = activation_range(o.get("activation"), ys, yz)
    op.params = {
        "stride": stride, "dilation": dilation, "padding": o["padding"],
        "pad": pad, "kernel": (kh, kw),
        "groups": groups, "depth_multiplier": mult,
        "activation": o.get("activation"), "act_min": act_min, "act_max": act_max,
        "input_offset": -xz, "output_offset": yz,
        "multiplier": mult_arr, "shift": shift_arr,
    }
    per_out = kh * kw * (1 if depthwise else cin // groups)
    op.macs = int(n * oh * ow * cout * per_out)
    op.scratch_bytes = _conv_scratch(op, x, w, y, depthwise)


def prepare_conv_2d(c):
    _conv_common(c, depthwise=False)


def prepare_depthwise_conv_2d(c):
    _conv_common(c, depthwise=True)


def _pool(c, kind):
    op = c.op
    x = c.tensor(0, "input")
    y = c.output()
    c.dtype(x, "input")
    c.dtype(y, "output")
    c.rank(x, "input", 4)
    c.rank(y, "output", 4)
    o = op.options
    for key in ("padding", "stride", "filter"):
        if key not in o:
            raise c.error(f"options lack {key!r} (missing or malformed builtin options)")
    stride, filt = tuple(o["stride"]), tuple(o["filter"])
    _check_stride(c, stride)
    if min(filt) < 1:
        raise c.error(f"filter size {filt} must be >= 1")
    n, h, w, ch = x.shape
    (oh, ow), pad = _geometry(c, o, (h, w), filt, stride, (1, 1))
    if tuple(y.shape) != (n, oh, ow, ch):
        raise c.error(f"output shape {list(y.shape)} disagrees with input {list(x.shape)}, filter {filt}, "
                      f"stride {stride}, padding {o['padding']}: expected {[n, oh, ow, ch]}")
    xs, xz = c.qparams(x, "input")
    ys, yz = c.qparams(y, "output")
    if xs != ys or xz != yz:
        raise Unsupported(f"int8 pooling with different input and output quantization "
                          f"({float(xs)}, {xz}) -> ({float(ys)}, {yz})")
    act_min, act_max = activation_range(o.get("activation"), ys, yz)
    op.params = {"kind": kind, "filter": filt, "stride": stride, "padding": o["padding"],
                 "pad": pad, "activation": o.get("activation"),
                 "act_min": act_min, "act_max": act_max}
    op.macs = int(n * oh * ow * ch * filt[0] * filt[1])
    op.scratch_bytes = _pool_scratch(op, x, y)


def prepare_average_pool_2d(c):
    _pool(c, "avg")


def prepare_max_pool_2d(c):
    _pool(c, "max")


def prepare_fully_connected(c):
    op = c.op
    x = c.tensor(0, "input")
    w = c.tensor(1, "weights")
    b = c.tensor(2, "bias", optional=True)
    y = c.output()
    c.dtype(x, "input")
    c.dtype(w, "weights")
    c.dtype(y, "output")
    if b is not None:
        c.dtype(b, "bias", (np.int32,))
        c.constant(b, "bias")
    c.constant(w, "weights")
    if op.options.get("weights_format", 0) != 0:
        raise Unsupported("shuffled weights format")
    c.rank(w, "weights", 2)
    out_f, depth = w.shape
    if depth <= 0 or x.size % depth != 0:
        raise c.error(f"input shape {list(x.shape)} ({x.size} elements) is not a whole number of rows of "
                      f"the weights' depth {depth}")
    batches = x.size // depth
    if y.size != batches * out_f or (len(y.shape) and y.shape[-1] != out_f):
        raise c.error(f"output shape {list(y.shape)} disagrees with {batches} row(s) of {out_f} features")
    if b is not None and b.size != out_f:
        raise c.error(f"bias shape {list(b.shape)} must hold {out_f} values")
    if depth > 33025:
        raise Unsupported(f"accumulation depth {depth} > 33025 (int32 dot product bound)")
    xs, xz = c.qparams(x, "input")
    ys, yz = c.qparams(y, "output")
    if not w.is_quantized:
        raise c.error(f"weights (tensor {w.index} {w.name!r}) are int8 but have no quantization parameters")
    ws = np.asarray(w.scale, dtype=np.float32)
    wz = np.asarray(w.zero_point if w.zero_point is not None else [0], dtype=np.int64)
    if np.any(wz != 0):
        raise Unsupported("weight zero points other than 0")
    if len(ws) == 1:
        reals = [float(np.float32(xs) * np.float32(ws[0])) / float(ys)]
    elif len(ws) == out_f:
        reals = [float(xs) * float(s) / float(ys) for s in ws]
    else:
        raise c.error(f"weights have {len(ws)} scales, expected 1 or {out_f}")
    mult_arr, shift_arr = _multipliers(reals)
    act_min, act_max = activation_range(op.options.get("activation"), ys, yz)
    op.params = {"activation": op.options.get("activation"), "act_min": act_min, "act_max": act_max,
                 "input_offset": -xz, "filter_offset": 0, "output_offset": yz,
                 "multiplier": mult_arr, "shift": shift_arr, "batches": batches, "depth": depth,
                 "keep_num_dims": bool(op.options.get("keep_num_dims", False))}
    op.macs = int(batches * out_f * depth)
    from pyembed._ext import _graph
    op.scratch_bytes = _graph.fc_buffer_size((batches, 1, 1, depth), (out_f, 1, 1, depth))


def prepare_softmax(c):
    op = c.op
    x = c.tensor(0, "input")
    y = c.output()
    c.dtype(x, "input")
    c.dtype(y, "output")
    if x.shape != y.shape:
        raise c.error(f"output shape {list(y.shape)} differs from input shape {list(x.shape)}")
    if len(x.shape) < 1 or x.shape[-1] < 1:
        raise c.error(f"input shape {list(x.shape)} has no last axis to normalise")
    xs, _ = c.qparams(x, "input")
    ys, yz = c.qparams(y, "output")
    if float(ys) != 1.0 / 256 or yz != -128:
        raise Unsupported(f"int8 softmax output must have scale 1/256 and zero point -128, "
                          f"got {float(ys)} and {yz}")
    if "beta" not in op.options:
        raise c.error("options lack 'beta' (missing or malformed builtin options)")
    beta = op.options["beta"]
    mult, shift, diff_min = softmax_params(beta, xs)
    op.params = {"beta": beta, "input_multiplier": mult, "input_left_shift": shift, "diff_min": diff_min,
                 "rows": x.size // x.shape[-1], "row_size": x.shape[-1]}
    op.macs = int(x.size)


def prepare_reshape(c):
    op = c.op
    x = c.tensor(0, "input")
    y = c.output()
    if x.dtype is None or y.dtype is None or x.dtype != y.dtype:
        raise c.error(f"input type {x.type_name or x.dtype} and output type {y.type_name or y.dtype} differ")
    if x.size != y.size:
        raise c.error(f"input shape {list(x.shape)} ({x.size} elements) cannot be reshaped to "
                      f"{list(y.shape)} ({y.size} elements)")
    c.dtype(x, "input", (np.int8, np.int16, np.int32, np.float32))
    op.params = {"shape": tuple(y.shape)}
    op.macs = 0


def _broadcast_shape(c, a, b, y):
    try:
        shape = np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
    except ValueError:
        raise c.error(f"input shapes {list(a.shape)} and {list(b.shape)} do not broadcast") from None
    if tuple(shape) != tuple(y.shape):
        raise c.error(f"output shape {list(y.shape)} differs from the broadcast shape {list(shape)}")
    if len(shape) > 4 and (tuple(a.shape) != tuple(shape) or tuple(b.shape) != tuple(shape)):
        raise Unsupported("broadcasting over more than 4 dimensions")
    return shape


def prepare_add(c):
    op = c.op
    a, b, y = c.tensor(0, "input 1"), c.tensor(1, "input 2"), c.output()
    for t, what in ((a, "input 1"), (b, "input 2"), (y, "output")):
        c.dtype(t, what)
    _broadcast_shape(c, a, b, y)
    s1, z1 = c.qparams(a, "input 1")
    s2, z2 = c.qparams(b, "input 2")
    so, zo = c.qparams(y, "output")
    left_shift = ADD_LEFT_SHIFT
    m1, sh1, m2, sh2, mo, sho = add_rescale(s1, s2, so, left_shift)
    act_min, act_max = activation_range(op.options.get("activation"), so, zo)
    op.params = {"activation": op.options.get("activation"), "act_min": act_min, "act_max": act_max,
                 "input1_offset": -z1, "input2_offset": -z2, "output_offset": zo, "left_shift": left_shift,
                 "input1_multiplier": m1, "input1_shift": sh1, "input2_multiplier": m2, "input2_shift": sh2,
                 "output_multiplier": mo, "output_shift": sho}
    op.macs = int(y.size)


def prepare_mul(c):
    op = c.op
    a, b, y = c.tensor(0, "input 1"), c.tensor(1, "input 2"), c.output()
    for t, what in ((a, "input 1"), (b, "input 2"), (y, "output")):
        c.dtype(t, what)
    _broadcast_shape(c, a, b, y)
    s1, z1 = c.qparams(a, "input 1")
    s2, z2 = c.qparams(b, "input 2")
    so, zo = c.qparams(y, "output")
    mo, sho = quantize_multiplier(float(s1) * float(s2) / float(so))
    act_min, act_max = activation_range(op.options.get("activation"), so, zo)
    op.params = {"activation": op.options.get("activation"), "act_min": act_min, "act_max": act_max,
                 "input1_offset": -z1, "input2_offset": -z2, "output_offset": zo,
                 "output_multiplier": mo, "output_shift": sho}
    op.macs = int(y.size)


def prepare_quantize(c):
    op = c.op
    x, y = c.tensor(0, "input"), c.output()
    if x.shape != y.shape:
        raise c.error(f"output shape {list(y.shape)} differs from input shape {list(x.shape)}")
    c.dtype(y, "output")
    c.dtype(x, "input", (np.float32, np.int8))
    ys, yz = c.qparams(y, "output")
    if x.dtype == np.float32:
        op.params = {"kind": "QUANTIZE", "scale": float(ys), "zero_point": yz,
                     "round_half_even": bool(op.options.get("round_half_even", False))}
    else:
        xs, xz = c.qparams(x, "input")
        m, s = quantize_multiplier(float(xs) / float(ys))
        op.params = {"kind": "REQUANTIZE", "input_offset": -xz, "output_offset": yz, "multiplier": m,
                     "shift": s, "act_min": INT8_MIN, "act_max": INT8_MAX}
    op.macs = int(x.size)


def prepare_dequantize(c):
    op = c.op
    x, y = c.tensor(0, "input"), c.output()
    if x.shape != y.shape:
        raise c.error(f"output shape {list(y.shape)} differs from input shape {list(x.shape)}")
    c.dtype(x, "input")
    c.dtype(y, "output", (np.float32,))
    xs, xz = c.qparams(x, "input")
    op.params = {"kind": "DEQUANTIZE", "scale": float(xs), "zero_point": xz}
    op.macs = int(x.size)


PREPARE = {
    "CONV_2D": prepare_conv_2d,
    "DEPTHWISE_CONV_2D": prepare_depthwise_conv_2d,
    "AVERAGE_POOL_2D": prepare_average_pool_2d,
    "MAX_POOL_2D": prepare_max_pool_2d,
    "FULLY_CONNECTED": prepare_fully_connected,
    "SOFTMAX": prepare_softmax,
    "RESHAPE": prepare_reshape,
    "ADD": prepare_add,
    "MUL": prepare_mul,
    "QUANTIZE": prepare_quantize,
    "DEQUANTIZE": prepare_dequantize,
}

SUPPORTED_OPS = tuple(PREPARE)


# -- kernel scratch queries (conv / pool kernels belong to their families) ------

def _conv_scratch(op, x, w, y, depthwise):
    try:
        from pyembed._ext import _graph
        query = _graph.conv_buffer_size
    except (ImportError, AttributeError):
        return 0
    return int(query(op.params, dims4(x.shape), dims4(w.shape), dims4(y.shape), depthwise))


def _pool_scratch(op, x, y):
    try:
        from pyembed._ext import _graph
        query = _graph.pool_buffer_size
    except (ImportError, AttributeError):
        return 0
    return int(query(op.params, dims4(x.shape), dims4(y.shape)))


# -- building a Graph -----------------------------------------------------------

def prepare_operator(graph, op, label):
    """Fill op.params / macs / scratch_bytes, or mark op unsupported."""
    prep = PREPARE.get(op.type)
    op.params, op.macs, op.scratch_bytes = {}, 0, 0
    if prep is None:
        op.supported = False
        op.reason = "operator not implemented by pyembed"
        return
    for t in list(op.inputs) + list(op.outputs):
        if t >= len(graph.tensors):
            raise ModelError(f"{label}: operator {op.index} ({op.type}) refers to tensor {t}, but the graph "
                             f"has {len(graph.tensors)}")
    try:
        prep(_Ctx(label, graph, op))
        op.supported, op.reason = True, ""
    except Unsupported as e:
        op.supported, op.reason = False, str(e)
        op.params = {}
    except ArgumentError as e:
        # a derived kernel parameter out of range (e.g. a requantization
        # multiplier from absurd scales): the model is inconsistent
        raise ModelError(f"{label}: operator {op.index} ({op.type}): {e}") from None


def check_tensor_sizes(tensors, label):
    """Every tensor must fit the C runtime's int32 byte counts."""
    for t in tensors:
        if any(d > 2**31 - 1 for d in t.shape) or t.nbytes > 2**31 - 1:
            raise ModelError(f"{label}: tensor {t.index} ({t.name!r}) with shape {list(t.shape)} is too large "
                             f"(more than 2^31 - 1 bytes)")


def graph_from_raw(raw, label, source_format=""):
    """A Graph from the importer's plain description (see tflite_import.read_tflite)."""
    tensors = [Tensor(index=t["index"], name=t["name"], shape=tuple(t["shape"]), dtype=t["dtype"],
                      scale=t["scale"], zero_point=t["zero_point"], quant_axis=t["quant_axis"], data=t["data"],
                      is_variable=t["is_variable"], type_name=t.get("type_name", ""))
               for t in raw["tensors"]]
    operators = [Operator(index=o["index"], type=o["type"], inputs=list(o["inputs"]), outputs=list(o["outputs"]),
                          options=dict(o.get("options", {})), version=o.get("version", 1))
                 for o in raw["operators"]]
    check_tensor_sizes(tensors, label)
    for what in ("inputs", "outputs"):
        for t in raw[what]:
            if not 0 <= t < len(tensors):
                raise ModelError(f"{label}: graph {what[:-1]} refers to tensor {t}, but the graph has "
                                 f"{len(tensors)}")
    g = Graph(raw["name"], tensors, operators, raw["inputs"], raw["outputs"], source_path=raw.get("source_path"),
              metadata=raw.get("metadata"), source_format=source_format)
    for op in operators:
        prepare_operator(g, op, label)
    written = {}
    for op in operators:
        for t in op.outputs:
            if t < 0:
                continue
            if t in written:
                raise ModelError(f"{label}: tensor {t} ({tensors[t].name!r}) is written by operators "
                                 f"{written[t]} and {op.index}")
            if tensors[t].is_constant:
                raise ModelError(f"{label}: operator {op.index} ({op.type}) writes tensor {t} "
                                 f"({tensors[t].name!r}), which is constant")
            written[t] = op.index
    for op in operators:
        if op.type == "RESHAPE" and op.supported and op.inputs and op.inputs[0] >= 0:
            src = op.inputs[0]
            if not tensors[src].is_constant and op.outputs[0] not in g.inputs:
                g.aliases[op.outputs[0]] = src
    g.unsupported = [(op.index, op.type) for op in operators if not op.supported]
    from pyembed.conv_form import choose_conv_forms
    choose_conv_forms(g)
    return g


# -- the C runtime ----------------------------------------------------------------

_DTYPES = (np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32), np.dtype(np.float32))


class GraphRuntime:
    """A graph compiled into the C runtime's tables on one arena layout.

    order[step] is the graph operator run at that step (the C table is in
    this order); invoke_op(step, arena) runs it. The arena is a 1-D uint8
    array of at least arena_size bytes (new_arena() makes one)."""

    def __init__(self, graph, layout, compiled):
        self.graph = graph
        self.layout = layout
        self.compiled = compiled
        self.order = list(layout.order)
        self.arena_size = int(layout.arena_size)
        self.plan = None

    def new_arena(self):
        return np.zeros(self.arena_size, dtype=np.uint8)

    def _offset(self, t):
        off = self.layout.tensor_offsets.get(t)
        if off is None:
            raise ArgumentError(f"tensor {t} ({self.graph.tensors[t].name!r}) has no place in the arena "
                                f"(a constant?)")
        return off

    def tensor_view(self, arena, t):
        """A numpy view of tensor t inside arena (activations only)."""
        tensor = self.graph.tensors[t]
        off = self._offset(t)
        raw = arena[off: off + tensor.nbytes]
        return raw.view(tensor.dtype).reshape(tensor.shape)

    def tensor_value(self, arena, t):
        tensor = self.graph.tensors[t]
        if tensor.is_constant:
            return np.array(tensor.data)
        return np.array(self.tensor_view(arena, t))

    def set_input(self, arena, k, x):
        t = self.graph.inputs[k]
        view = self.tensor_view(arena, t)
        x = np.asarray(x)
        if x.dtype != view.dtype or x.size != view.size:
            raise ArgumentError(f"x: input {k} expects {view.size} {view.dtype.name} values "
                                f"(shape {view.shape}), got {x.dtype} {x.shape}")
        view[...] = x.reshape(view.shape)

    def get_output(self, arena, k):
        return self.tensor_value(arena, self.graph.outputs[k])

    def invoke_op(self, step, arena, stats=False):
        """Run the operator at this step of the order; returns its kernel
        counters (dict) when stats is true."""
        return self.compiled.invoke_op(int(step), arena, stats)

    def invoke(self, arena, stats=False):
        return self.compiled.invoke(arena, stats)

    def run(self, xs):
        arena = self.new_arena()
        for k, x in enumerate(xs):
            self.set_input(arena, k, x)
        self.invoke(arena)
        return [self.get_output(arena, k) for k in range(len(self.graph.outputs))]


def _kind(op):
    if op.type == "QUANTIZE":
        return op.params["kind"]
    return op.type


# inputs the C runtime reads per operator type (RESHAPE's shape operand and
# the like are left out)
_C_INPUTS = {"RESHAPE": 1, "SOFTMAX": 1, "AVERAGE_POOL_2D": 1, "MAX_POOL_2D": 1, "QUANTIZE": 1, "DEQUANTIZE": 1,
             "ADD": 2, "MUL": 2}


def runtime_tables(graph, layout):
    """The C graph runtime's tables as plain data, in layout.order:

    tensors: [{tensor, data, offset, bytes, dims, dtype}] -- only tensors an
      operator or the graph boundary uses, in graph index order; "tensor" is
      the graph index, the list position is the C table index;
    ops: [{op, kind, inputs, output, scratch_offset, scratch_size, params}]
      with C table indices, kind the pe_graph operator (REQUANTIZE for an
      int8 -> int8 QUANTIZE).
    build_runtime hands these to the Cython binding; pyembed.emit writes
    them as C initializers."""
    used = set(graph.inputs) | set(graph.outputs)
    for op in graph.operators:
        used.update(t for t in op.inputs[:3] if t >= 0)
        used.update(t for t in op.outputs if t >= 0)
    c_index, tensors = {}, []
    for t in sorted(used):
        tensor = graph.tensors[t]
        if tensor.dtype not in _DTYPES:
            continue  # never read by a kernel
        c_index[t] = len(tensors)
        tensors.append({"tensor": t, "data": tensor.data if tensor.is_constant else None,
                        "offset": -1 if tensor.is_constant else int(layout.tensor_offsets[t]),
                        "bytes": int(tensor.nbytes), "dims": dims4(tensor.shape), "dtype": tensor.dtype})
    ops = []
    for opi in layout.order:
        op = graph.operators[opi]
        n_in = _C_INPUTS.get(op.type, 3)
        scratch = int(op.scratch_bytes)
        ops.append({"op": opi, "kind": _kind(op),
                    "inputs": [c_index[t] if t >= 0 else -1 for t in op.inputs[:n_in]],
                    "output": c_index[op.outputs[0]],
                    "scratch_offset": int(layout.scratch_offsets.get(opi, -1)) if scratch else -1,
                    "scratch_size": scratch, "params": op.params})
    return tensors, ops


ROUNDINGS = ("double", "single")

# Rounding presets: op type -> requantization rounding, "*" for the rest.
# "litert": what the LiteRT wheel's BUILTIN_REF resolver computes (measured
# operator by operator against it in tests/test_tflite_models.py): its int8
# FULLY_CONNECTED requantizes with a single rounding (the ruy-style
# MultiplyByQuantizedMultiplier), every other kernel with TFLite's double
# rounding.
ROUNDING_PRESETS = {
    "double": {"*": "double"},
    "single": {"*": "single"},
    "litert": {"*": "double", "FULLY_CONNECTED": "single"},
}


def rounding_table(rounding):
    """Normalise rounding (a preset name or {op type: mode}) to a dict."""
    if isinstance(rounding, str):
        if rounding not in ROUNDING_PRESETS:
            raise ArgumentError(f"rounding: expected one of {', '.join(ROUNDING_PRESETS)} or a dict "
                                f"{{op type: 'double'|'single'}}, got {rounding!r}")
        return dict(ROUNDING_PRESETS[rounding])
    if isinstance(rounding, dict):
        table = {"*": "double"}
        for k, v in rounding.items():
            if v not in ROUNDINGS:
                raise ArgumentError(f"rounding[{k!r}]: expected 'double' or 'single', got {v!r}")
            table[k] = v
        return table
    raise ArgumentError(f"rounding: expected a preset name or a dict, got {type(rounding).__name__}")


def build_runtime(graph, layout, rounding="double"):
    """Compile graph on layout into a GraphRuntime (the C tables).

    rounding: "double" (default: TFLite's reference build, TFLM, CMSIS-NN),
    "single" (TFLITE_SINGLE_ROUNDING builds), "litert" (the LiteRT wheel:
    single for FULLY_CONNECTED only) or a dict {op type: mode}; it selects
    the rounding of every fixed-point requantization."""
    table = rounding_table(rounding)
    from pyembed._ext import _graph
    tensors, ops = runtime_tables(graph, layout)
    for spec in ops:
        spec["rounding"] = table.get(graph.operators[spec["op"]].type, table["*"])
    tensors = [(t["data"], t["offset"], t["bytes"], t["dims"], t["dtype"]) for t in tensors]
    compiled = _graph.CompiledGraph(tensors, ops, int(layout.arena_size))
    compiled.check()
    rt = GraphRuntime(graph, layout, compiled)
    rt.rounding = rounding
    return rt


# -- direct kernel wrappers (validated; the graph runtime calls the same C) -----------

def _out_array(out, shape, name="out"):
    from pyembed._validate import exact_array
    if out is None:
        return None
    out = exact_array(out, name, np.int8, shape=shape)
    if tuple(out.shape) != tuple(shape) or not out.flags.c_contiguous or not out.flags.writeable:
        raise ArgumentError(f"{name}: expected a writeable C-contiguous int8 array of shape {tuple(shape)}, "
                            f"got {out.shape}")
    return out


def fully_connected(x, weights, bias, multiplier, shift, *, input_offset, output_offset, act_min=INT8_MIN,
                    act_max=INT8_MAX, rounding="double", out=None, stats=False):
    """int8 FULLY_CONNECTED (pe_fully_connected_s8): x [batches, K] (or any
    shape whose size is a multiple of K), weights [O, K], bias int32 [O] or
    None, multiplier / shift int32 of length 1 (per tensor) or O.
    Returns the int8 [batches, O] output (written into out if given), and
    the kernel's counters too when stats is true."""
    from pyembed._ext import _graph
    from pyembed._validate import as_int_array, exact_array, int_in_range
    w = exact_array(weights, "weights", np.int8, ndim=2)
    o_f, k = w.shape
    if o_f < 1 or k < 1:
        raise ArgumentError(f"weights: expected a non-empty [O, K] array, got shape {w.shape}")
    x = exact_array(x, "x", np.int8)
    if x.size == 0 or x.size % k:
        raise ArgumentError(f"x: expected a whole number of rows of {k} values, got shape {x.shape}")
    x2 = np.ascontiguousarray(x.reshape(-1, k))
    b = None
    if bias is not None:
        b = as_int_array(bias, "bias", np.int32, ndim=1)
        if b.size != o_f:
            raise ArgumentError(f"bias: expected {o_f} values, got {b.size}")
    m = as_int_array(np.atleast_1d(multiplier), "multiplier", np.int32, ndim=1)
    s = as_int_array(np.atleast_1d(shift), "shift", np.int32, ndim=1)
    if m.size not in (1, o_f) or s.size != m.size:
        raise ArgumentError(f"multiplier/shift: expected 1 or {o_f} values each, got {m.size} and {s.size}")
    if rounding not in ROUNDINGS:
        raise ArgumentError(f"rounding: expected 'double' or 'single', got {rounding!r}")
    input_offset = int_in_range(input_offset, "input_offset", -255, 255)
    output_offset = int_in_range(output_offset, "output_offset", -128, 127)
    act_min = int_in_range(act_min, "act_min", -128, 127)
    act_max = int_in_range(act_max, "act_max", act_min, 127)
    target = _out_array(out, (x2.shape[0], o_f))
    res, counters = _graph.fully_connected_s8(x2, w, b, m, s, input_offset, 0, output_offset, act_min, act_max,
                                              rounding == "single", stats)
    if target is not None:
        target[...] = res
        res = target
    return (res, counters) if stats else res


def add(a, b, params, *, mul=False, rounding="double", out=None):
    """int8 ADD (or MUL with mul=True) with numpy broadcasting up to 4-D:
    params as pyembed.ops.prepare_add / prepare_mul compute them
    (Operator.params of an ADD / MUL)."""
    from pyembed._ext import _graph
    from pyembed._validate import exact_array
    a = exact_array(a, "a", np.int8)
    b = exact_array(b, "b", np.int8)
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ArgumentError(f"a, b: shapes {a.shape} and {b.shape} do not broadcast") from None
    if len(shape) > 4 or a.size == 0 or b.size == 0:
        raise ArgumentError(f"a, b: expected non-empty arrays of at most 4 dimensions, got {a.shape}, {b.shape}")
    keys = (["input1_offset", "input2_offset", "output_offset", "output_multiplier", "output_shift", "act_min",
             "act_max"] + ([] if mul else ["left_shift", "input1_multiplier", "input1_shift", "input2_multiplier",
                                          "input2_shift"]))
    missing = [k for k in keys if k not in params]
    if missing:
        raise ArgumentError(f"params: missing {', '.join(missing)}")
    if rounding not in ROUNDINGS:
        raise ArgumentError(f"rounding: expected 'double' or 'single', got {rounding!r}")
    pad = (1,) * (4 - len(shape))
    da, db = pad + (1,) * (len(shape) - a.ndim) + a.shape, pad + (1,) * (len(shape) - b.ndim) + b.shape
    res = _graph.add_s8(np.ascontiguousarray(a).ravel(), da, np.ascontiguousarray(b).ravel(), db, pad + shape,
                        {k: int(params[k]) for k in keys}, mul, rounding == "single").reshape(shape)
    target = _out_array(out, shape)
    if target is not None:
        target[...] = res
        return target
    return res
