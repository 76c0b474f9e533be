"""BATCH_MATMUL and TRANSPOSE_CONV (int8): preparation as TFLite Micro's
Prepare steps compute it (csrc/include/pyembed/pe_matmul.h, pe_tconv.h).

* BATCH_MATMUL: shapes extended to rank 5 with leading 1s, batch dims
  broadcast (equal or 1), adj_x / adj_y, any lhs / rhs zero point (the rhs
  constant or not); one multiplier from the float32 product of the two input
  scales divided in double by the output scale (GetQuantizedConvolution-
  Multipler); no fused activation (the whole int8 range).
* TRANSPOSE_CONV: inputs (output_shape int32 constant, filter [O, kh, kw, I]
  int8 constant, input, optional int32 bias); per-channel multipliers
  double(in_scale) * double(w_scale[c]) / double(out_scale); padding from the
  OUTPUT size as ComputePaddingHeightWidth does (SAME: total = max(0,
  (ceil(out / stride) - 1) * stride + k - out), top/left = total // 2;
  VALID: 0); fused activation clamp.

Neither needs scratch: both C kernels read their operands in place (TFLM's
TRANSPOSE_CONV asks for an int32 copy of its output, out elements * 4 bytes;
BATCH_MATMUL keeps transposed copies in its persistent arena).

float_reference: both in float64 from the model's options (the float
reference of pyembed check and simulate --report).
"""
import numpy as np

from pyembed.model.ops.base import Unsupported, _multipliers, activation_range
from pyembed.model.ops.registry import register

INT32_MAX = 2**31 - 1


def _extend5(shape):
    shape = tuple(int(d) for d in shape)
    return (1,) * (5 - len(shape)) + shape


@register("BATCH_MATMUL", code=100)
def prepare_batch_matmul(c):
    op = c.op
    a = c.tensor(0, "lhs")
    b = c.tensor(1, "rhs")
    y = c.output()
    for t, what in ((a, "lhs"), (b, "rhs"), (y, "output")):
        c.dtype(t, what)
    for t, what in ((a, "lhs"), (b, "rhs")):
        if not 2 <= len(t.shape) <= 5:
            raise c.error(f"{what} (tensor {t.index} {t.name!r}) must have rank 2 to 5, has shape "
                          f"{list(t.shape)}")
    adj_x = bool(op.options.get("adj_x", False))
    adj_y = bool(op.options.get("adj_y", False))
    l5, r5 = _extend5(a.shape), _extend5(b.shape)
    batch = []
    for i in range(3):
        if l5[i] != r5[i] and 1 not in (l5[i], r5[i]):
            raise c.error(f"batch dimensions of lhs {list(a.shape)} and rhs {list(b.shape)} do not broadcast")
        batch.append(max(l5[i], r5[i]))
    rows, k_l = (l5[4], l5[3]) if adj_x else (l5[3], l5[4])
    k_r, cols = (r5[4], r5[3]) if adj_y else (r5[3], r5[4])
    if k_l != k_r:
        raise c.error(f"lhs {list(a.shape)} (adj_x={adj_x}) and rhs {list(b.shape)} (adj_y={adj_y}) disagree "
                      f"on the accumulation depth ({k_l} vs {k_r})")
    rank = max(len(a.shape), len(b.shape))
    want = tuple(batch + [rows, cols])[5 - rank:]
    if tuple(y.shape) != want:
        raise c.error(f"output shape {list(y.shape)} disagrees with lhs {list(a.shape)} x rhs {list(b.shape)}: "
                      f"expected {list(want)}")
    if k_l * 255 * 255 > INT32_MAX:
        raise Unsupported(f"accumulation depth {k_l} > 33025 (int32 dot product bound)")
    xs, xz = c.qparams(a, "lhs")
    ws, wz = c.qparams(b, "rhs")
    ys, yz = c.qparams(y, "output")
    (m,), (s,) = _multipliers([float(np.float32(xs) * np.float32(ws)) / float(ys)])
    op.params = {"adj_x": adj_x, "adj_y": adj_y, "lhs_shape": l5, "rhs_shape": r5,
                 "out_shape": tuple(batch + [rows, cols]), "lhs_offset": -xz, "rhs_offset": -wz,
                 "output_offset": yz, "multiplier": int(m), "shift": int(s), "act_min": -128, "act_max": 127}
    p = op.params
    # the C runner's words (pe_matmul.h); TFLM and LiteRT both round twice
    p["words"] = (list(l5) + list(r5) + list(p["out_shape"])
                  + [p["lhs_offset"], p["rhs_offset"], yz, p["multiplier"], p["shift"], -128, 127,
                     int(adj_x), int(adj_y)])
    op.macs = int(np.prod(batch)) * rows * cols * k_l
    op.scratch_bytes = 0


def _tconv_pad(padding, out, k, stride):
    if padding == "VALID":
        return 0
    if padding != "SAME":
        raise Unsupported(f"padding {padding!r}")
    n = (out + stride - 1) // stride
    return max(0, (n - 1) * stride + k - out) // 2


def _tconv_geometry(c, shp, x, w, y, b):
    """TRANSPOSE_CONV's geometry, whatever the types: the constant output_shape equal to the output
    tensor's (TFLM does not resize), padding and stride in the options, filter [oc, kh, kw, ic] against
    the input and output, the bias's length. Returns (stride (sh, sw), kernel (kh, kw), pad (top, left))."""
    if [int(v) for v in np.asarray(shp.data).reshape(-1)] != [int(d) for d in y.shape]:
        raise c.error(f"output_shape {np.asarray(shp.data).tolist()} disagrees with the output tensor "
                      f"{list(y.shape)} (TFLM does not resize)")
    o = c.op.options
    for key in ("padding", "stride"):
        if key not in o:
            raise c.error(f"options lack {key!r} (missing or malformed builtin options)")
    sh, sw = (int(v) for v in o["stride"])
    if sh < 1 or sw < 1:
        raise c.error(f"stride {(sh, sw)} must be >= 1")
    n, ih, iw, ic = x.shape
    oc, kh, kw, wc = w.shape
    if wc != ic:
        raise c.error(f"filter input channels {wc} differ from the input's {ic}")
    if y.shape[0] != n or y.shape[3] != oc:
        raise c.error(f"output shape {list(y.shape)} must be [{n}, h, w, {oc}]")
    if b is not None and b.size != oc:
        raise c.error(f"bias shape {list(b.shape)} must hold {oc} values")
    oh, ow = int(y.shape[1]), int(y.shape[2])
    return (sh, sw), (kh, kw), (_tconv_pad(o["padding"], oh, kh, sh), _tconv_pad(o["padding"], ow, kw, sw))


def _taps(out, inp, k, stride, pad):
    """(output index, kernel tap) pairs reached along one axis."""
    n = 0
    for i in range(inp):
        for t in range(k):
            if 0 <= i * stride - pad + t < out:
                n += 1
    return n


@register("TRANSPOSE_CONV", code=101)
def prepare_transpose_conv(c):
    op = c.op
    shp = c.tensor(0, "output_shape")
    w = c.tensor(1, "filter")
    x = c.tensor(2, "input")
    b = c.tensor(3, "bias", optional=True)
    y = c.output()
    c.dtype(x, "input")
    c.dtype(w, "filter")
    c.dtype(y, "output")
    c.dtype(shp, "output_shape", (np.int32,))
    c.constant(shp, "output_shape")
    c.constant(w, "filter")
    if b is not None:
        c.dtype(b, "bias", (np.int32,))
        c.constant(b, "bias")
    for t, what in ((x, "input"), (w, "filter"), (y, "output")):
        c.rank(t, what, 4)
    o = op.options
    (sh, sw), (kh, kw), (pt, pl) = _tconv_geometry(c, shp, x, w, y, b)
    n, ih, iw, ic = x.shape
    oc = w.shape[0]
    oh, ow = int(y.shape[1]), int(y.shape[2])
    xs, xz = c.qparams(x, "input")
    ys, yz = c.qparams(y, "output")
    if not w.is_quantized:
        raise c.error(f"filter (tensor {w.index} {w.name!r}) is int8 but has no quantization parameters")
    wsc = np.asarray(w.scale, dtype=np.float32)
    if len(wsc) not in (1, oc):
        raise c.error(f"filter has {len(wsc)} scales, expected 1 or {oc}")
    if len(wsc) > 1 and w.quant_axis != 0:
        raise c.error(f"filter is quantized per channel along axis {w.quant_axis}, expected 0")
    if w.zero_point is not None and np.any(np.asarray(w.zero_point) != 0):
        raise Unsupported("filter zero points other than 0 (TFLM ignores them)")
    if np.any(~np.isfinite(wsc)) or np.any(wsc <= 0):
        raise c.error("filter scales must be finite and > 0")
    taps = kh * kw * ic
    max_bias = int(np.abs(np.asarray(b.data, dtype=np.int64)).max()) if b is not None else 0
    if taps * 128 * 255 + max_bias > INT32_MAX:
        raise Unsupported(f"{taps} taps per output: the int32 accumulator could overflow")
    mult, shift = _multipliers([float(xs) * float(s) / float(ys) for s in np.broadcast_to(wsc, (oc,))])
    act_min, act_max = activation_range(o.get("activation"), ys, yz)
    op.params = {"stride": (sh, sw), "padding": o["padding"], "pad": (pt, pl), "kernel": (kh, kw),
                 "activation": o.get("activation"), "act_min": act_min, "act_max": act_max,
                 "input_offset": -xz, "output_offset": yz, "multiplier": mult, "shift": shift,
                 "tflm_scratch": int(np.prod(y.shape)) * 4,
                 # the C runner: (input, filter, bias) and its words (pe_tconv.h)
                 "c_inputs": [2, 1, 3],
                 "words": [sh, sw, pt, pl, -xz, yz, act_min, act_max, 0] + [int(v) for v in mult]
                 + [int(v) for v in shift]}
    op.macs = int(n * _taps(oh, ih, kh, sh, pt) * _taps(ow, iw, kw, sw, pl) * ic * oc)
    op.scratch_bytes = 0


# -- float64 references (pyembed.model.float_ref calls float_reference) ----------

def _tconv_float(graph, op, x):
    """TRANSPOSE_CONV in float64 from the model's options: every input pixel
    scatters x * w[oc, ky, kx, :] to output (iy * sh + ky - pad_top,
    ix * sw + kx - pad_left); bias in the accumulator's unit; fused activation."""
    from pyembed.model.float_ref import _activation, _bias, dequantize
    o = op.options
    w_t = graph.tensors[op.inputs[1]]
    w = dequantize(w_t)
    n, oh, ow, oc = (int(d) for d in graph.tensors[op.outputs[0]].shape)
    _, kh, kw, ic = w.shape
    sh, sw = (int(v) for v in o["stride"])
    pt, pl = _tconv_pad(o["padding"], oh, kh, sh), _tconv_pad(o["padding"], ow, kw, sw)
    x = np.asarray(x, dtype=np.float64).reshape(graph.tensors[op.inputs[2]].shape)
    ih, iw = x.shape[1:3]
    full = np.zeros((n, max((ih - 1) * sh + kh, pt + oh), max((iw - 1) * sw + kw, pl + ow), oc))
    for ky in range(kh):
        for kx in range(kw):
            full[:, ky:ky + (ih - 1) * sh + 1:sh, kx:kx + (iw - 1) * sw + 1:sw, :] += x @ w[:, ky, kx, :].T
    y = full[:, pt:pt + oh, pl:pl + ow, :] + _bias(graph, op, 3, graph.tensors[op.inputs[2]], w_t, oc)
    return _activation(y, o.get("activation"))


def _bmm_float(graph, op, a, b):
    """BATCH_MATMUL in float64: ranks extended to 5, adj_x / adj_y, batch
    dimensions broadcast."""
    o = op.options
    a = np.asarray(a, dtype=np.float64).reshape(_extend5(graph.tensors[op.inputs[0]].shape))
    b = np.asarray(b, dtype=np.float64).reshape(_extend5(graph.tensors[op.inputs[1]].shape))
    if o.get("adj_x"):
        a = np.swapaxes(a, -1, -2)
    if o.get("adj_y"):
        b = np.swapaxes(b, -1, -2)
    return np.matmul(a, b).reshape(graph.tensors[op.outputs[0]].shape)


def float_reference(graph, op, inputs):
    """The real (float64) output of BATCH_MATMUL / TRANSPOSE_CONV on real inputs."""
    from pyembed.errors import UnsupportedError
    if op.type == "TRANSPOSE_CONV":
        return _tconv_float(graph, op, inputs[2])
    if op.type == "BATCH_MATMUL":
        return _bmm_float(graph, op, inputs[0], inputs[1])
    raise UnsupportedError(f"float reference: operator {op.index} ({op.type}) is not modelled")
