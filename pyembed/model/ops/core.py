"""Preparation of the original twelve operators (convolution, depthwise,
pooling, fully connected, softmax, reshape, add, mul, quantize, dequantize):
from an imported operator to the kernel parameters the C runtime runs with.
See pyembed.model.ops.base for the conventions."""
import numpy as np

from pyembed.model.ops.base import (ADD_LEFT_SHIFT, INT8_MAX, INT8_MIN, Unsupported, _multipliers,  # noqa: F401
                                    _round_away, activation_range, add_rescale, dims4, out_size, pad_amounts,
                                    padded_out_size, softmax_params)
from pyembed.kernels.quant import quantize_multiplier  # noqa: F401


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


def fc_quantization(c, x, y, weight_scale, out_f):
    """The requantization of an int8 FULLY_CONNECTED (shared with its
    int16-weight form, pyembed.model.ops.fc_w16): {activation, act_min,
    act_max, input_offset, filter_offset, output_offset, multiplier, shift}
    plus multiplier_f32 / shift_f32 per tensor."""
    op = c.op
    xs, xz = c.qparams(x, "input")
    ys, yz = c.qparams(y, "output")
    ws = np.asarray(weight_scale, dtype=np.float32)
    reals_f32 = None
    if len(ws) == 1:
        # TFLM (GetQuantizedConvolutionMultipler) multiplies the two scales in
        # double; the LiteRT wheel's reference FULLY_CONNECTED multiplies them
        # in float32 first. They differ on rare ties: keep both, the
        # "litert" rounding preset picks the float32 one.
        reals = [float(xs) * float(ws[0]) / float(ys)]
        reals_f32 = [float(np.float32(xs) * np.float32(ws[0])) / float(ys)]
    elif len(ws) == out_f:
        reals = [float(xs) * float(s) / float(ys) for s in ws]
    else:
        raise c.error(f"weights have {len(ws)} scales, expected 1 or {out_f}")
    mult_arr, shift_arr = _multipliers(reals)
    act_min, act_max = activation_range(op.options.get("activation"), ys, yz)
    params = {"activation": op.options.get("activation"), "act_min": act_min, "act_max": act_max,
              "input_offset": -xz, "filter_offset": 0, "output_offset": yz,
              "multiplier": mult_arr, "shift": shift_arr}
    if reals_f32 is not None:
        params["multiplier_f32"], params["shift_f32"] = _multipliers(reals_f32)
    return params


def fc_rows(c, x, y, b, out_f, depth):
    """The rows (batches) of a fully connected layer of out_f features on
    depth inputs, once input, output and bias shapes agree with them."""
    if depth <= 0 or x.size % depth != 0:
        raise c.error(f"input shape {list(x.shape)} ({x.size} elements) is not a whole number of rows of "
                      f"the weights' depth {depth}")
    batches = x.size // depth
    if y.size != batches * out_f or (len(y.shape) and y.shape[-1] != out_f):
        raise c.error(f"output shape {list(y.shape)} disagrees with {batches} row(s) of {out_f} features")
    if b is not None and b.size != out_f:
        raise c.error(f"bias shape {list(b.shape)} must hold {out_f} values")
    return batches


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
    batches = fc_rows(c, x, y, b, out_f, depth)
    if depth > 33025:
        raise Unsupported(f"accumulation depth {depth} > 33025 (int32 dot product bound)")
    if not w.is_quantized:
        raise c.error(f"weights (tensor {w.index} {w.name!r}) are int8 but have no quantization parameters")
    wz = np.asarray(w.zero_point if w.zero_point is not None else [0], dtype=np.int64)
    if np.any(wz != 0):
        raise Unsupported("weight zero points other than 0")
    op.params = fc_quantization(c, x, y, w.scale, out_f)
    op.params.update(batches=batches, depth=depth, keep_num_dims=bool(op.options.get("keep_num_dims", False)))
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
    mult, shift, diff_min = softmax_params(beta, xs, cap=True)
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
