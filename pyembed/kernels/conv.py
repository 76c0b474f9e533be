"""Reverse (output-centric) int8 convolution and depthwise convolution.

Each input element is read once and scattered into every output it reaches,
weighted by the tap it lands on (SPEC section 2); int32 accumulators are kept
only for the ceil(k_eff / stride) output rows in flight. The kernels are C
(csrc/src/kernels/conv/pe_conv_rev.c, documented in csrc/include/pyembed/pe_conv.h); this
module validates arguments and computes output sizes.

    conv2d(x, weights, bias, multiplier, shift, stride=1, padding=0, ...)
    depthwise_conv2d(x, weights, bias, multiplier, shift, ch_mult=1, ...)
    Conv2dStream / DepthwiseConv2dStream: push one input row, get the output
        rows that became final.
    vector_conv_s8 / vector_depthwise_conv_s8: runners for pyembed.check.vectors.

Arithmetic (bit-exact with TFLite / CMSIS-NN int8):
    acc = bias[oc] + sum over in-bounds taps of w * (x + input_offset)
    y   = clamp(requantize(acc, multiplier[oc], shift[oc]) + output_offset, *activation)

Layouts: x NHWC int8 ([n, h, w, c], or [h, w, c] for one image); conv
weights OHWI [out_c, kh, kw, in_c/groups]; depthwise weights
[1, kh, kw, in_c*ch_mult] with output channel o = c*ch_mult + m reading input
channel c. bias int32 [out_c] or None; multiplier / shift int32 [out_c].

Output size per axis (pyembed.kernels.pooling.output_size, C pe_out_size),
k_eff = (k - 1) * dilation + 1:
    "floor": (d + before + after - k_eff) // s + 1      (default)
    "ceil":  ceil((d + before + after - k_eff) / s) + 1
    "nopad": (d - k_eff) // s + 1, padding ignored
    output_size=(h, w): explicit (then only top/left padding matter).
padding: int, (h, w), (top, bottom, left, right), "valid", or "same" (TFLite
SAME: ceil(d / s) outputs, the odd padded pixel at the bottom / right).
"""
import numpy as np

from pyembed._ext import _conv as _c
from pyembed._validate import as_int_array, exact_array, int_in_range
from pyembed.errors import ArgumentError
from pyembed.kernels.pooling import output_size as _axis_size  # the one output-size rule (pe_out_size)

__all__ = ["conv2d", "depthwise_conv2d", "Conv2dStream", "DepthwiseConv2dStream", "buffer_size",
           "conv_pool2d", "STRATEGIES", "vector_conv_s8", "vector_depthwise_conv_s8"]

_RULES = ("floor", "ceil", "nopad")


_I32 = 2**31 - 1


def _pair(value, name, lo):
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ArgumentError(f"{name}: expected an int or a pair (h, w), got {value!r}")
        h, w = value
    else:
        h = w = value
    return int_in_range(h, f"{name}[0]", lo, _I32), int_in_range(w, f"{name}[1]", lo, _I32)


def _geometry(in_hw, k_hw, stride, padding, dilation, shape_rule, output_size):
    """-> (padding (t, b, l, r) as the kernel sees it, (out_h, out_w))."""
    sh, sw = _pair(stride, "stride", 1)
    dh, dw = _pair(dilation, "dilation", 1)
    k_eff = ((k_hw[0] - 1) * dh + 1, (k_hw[1] - 1) * dw + 1)
    if isinstance(padding, str):
        if padding == "valid":
            pads = (0, 0, 0, 0)
        elif padding == "same":
            pads = []
            for d, k, s in zip(in_hw, k_eff, (sh, sw)):
                total = max((-(-d // s) - 1) * s + k - d, 0)
                pads += [total // 2, total - total // 2]
            pads = tuple(pads)
        else:
            raise ArgumentError(f"padding: expected 'valid', 'same', an int or a tuple, got {padding!r}")
    elif isinstance(padding, (tuple, list)) and len(padding) == 4:
        pads = tuple(int_in_range(p, f"padding[{i}]", 0, _I32) for i, p in enumerate(padding))
    else:
        ph, pw = _pair(padding, "padding", 0)
        pads = (ph, ph, pw, pw)
    if output_size is not None:
        oh, ow = _pair(output_size, "output_size", 1)
        return pads, (oh, ow)
    if shape_rule == "nopad":
        pads = (0, 0, 0, 0)
    try:
        out = (_axis_size(in_hw[0], k_eff[0], sh, pads[0], pads[1], shape_rule),
               _axis_size(in_hw[1], k_eff[1], sw, pads[2], pads[3], shape_rule))
    except ArgumentError:
        raise ArgumentError(
            f"output size: input {tuple(in_hw)} with effective kernel {k_eff}, stride {(sh, sw)}, "
            f"padding {pads} and rule {shape_rule!r} leaves no output (need >= 1 per axis)") from None
    return pads, out


def _params(input_offset, output_offset, stride, pads, dilation, groups, ch_mult, activation,
            rounding):
    if rounding not in ("double", "single"):
        raise ArgumentError(f"rounding: expected 'double' or 'single', got {rounding!r}")
    if not isinstance(activation, (tuple, list)) or len(activation) != 2:
        raise ArgumentError(f"activation: expected (min, max), got {activation!r}")
    amin = int_in_range(activation[0], "activation[0]", -128, 127)
    amax = int_in_range(activation[1], "activation[1]", -128, 127)
    if amin > amax:
        raise ArgumentError(f"activation: min {amin} > max {amax}")
    return {
        "input_offset": int_in_range(input_offset, "input_offset", -127, 128),
        "output_offset": int_in_range(output_offset, "output_offset", -128, 127),
        "stride": _pair(stride, "stride", 1),
        "padding": pads,
        "dilation": _pair(dilation, "dilation", 1),
        "groups": groups,
        "ch_mult": ch_mult,
        "activation": (amin, amax),
        "single_rounding": rounding == "single",
    }


def _input4d(x):
    x = exact_array(x, "x", np.int8)
    if x.ndim == 3:
        return x[None], True
    if x.ndim != 4:
        raise ArgumentError(f"x: expected an NHWC (4-D) or HWC (3-D) int8 array, got shape {x.shape}")
    if min(x.shape) < 1:
        raise ArgumentError(f"x: every dimension must be >= 1, got shape {x.shape}")
    return np.ascontiguousarray(x), False


def _quant(bias, multiplier, shift, out_c):
    mult = as_int_array(multiplier, "multiplier", ndim=1)
    sh = as_int_array(shift, "shift", ndim=1)
    for name, arr in (("multiplier", mult), ("shift", sh)):
        if arr.shape != (out_c,):
            raise ArgumentError(f"{name}: expected {out_c} values (one per output channel), got {arr.shape[0]}")
    if mult.min() < 0:
        raise ArgumentError(f"multiplier: expected values in [0, 2^31), got {mult.min()}")
    if sh.min() < -31 or sh.max() > 30:
        raise ArgumentError(f"shift: expected values in [-31, 30], got range [{sh.min()}, {sh.max()}]")
    if bias is not None:
        bias = as_int_array(bias, "bias", ndim=1)
        if bias.shape != (out_c,):
            raise ArgumentError(f"bias: expected {out_c} values (one per output channel), got {bias.shape[0]}")
    return bias, mult, sh


def _prepare(depthwise, x_shape, weights, bias, multiplier, shift, stride, padding, dilation,
             groups, ch_mult, input_offset, output_offset, activation, rounding, shape_rule,
             output_size):
    """Validate everything C cannot see; returns (params, weights, bias, mult, shift, out_shape)."""
    n, h, w, c = x_shape
    weights = exact_array(weights, "weights", np.int8, ndim=4)
    if min(weights.shape) < 1:
        raise ArgumentError(f"weights: every dimension must be >= 1, got shape {weights.shape}")
    if depthwise:
        ch_mult = int_in_range(ch_mult, "ch_mult", 1, _I32)
        out_c = c * ch_mult
        if weights.shape[0] != 1 or weights.shape[3] != out_c:
            raise ArgumentError(
                f"weights: expected depthwise shape [1, kh, kw, in_c*ch_mult = {out_c}], got {weights.shape}")
        groups = 1
    else:
        groups = int_in_range(groups, "groups", 1, _I32)
        out_c = weights.shape[0]
        if c % groups != 0 or weights.shape[3] * groups != c:
            raise ArgumentError(
                f"weights: expected OHWI with in_c/groups = {c}/{groups} input channels, got shape {weights.shape}")
        if out_c % groups != 0:
            raise ArgumentError(f"weights: out_c {out_c} is not a multiple of groups {groups}")
        ch_mult = 1
    bias, mult, sh = _quant(bias, multiplier, shift, out_c)
    if shape_rule not in _RULES:
        raise ArgumentError(f"shape_rule: expected one of {_RULES}, got {shape_rule!r}")
    pads, (oh, ow) = _geometry((h, w), weights.shape[1:3], stride, padding, dilation, shape_rule,
                               output_size)
    params = _params(input_offset, output_offset, stride, pads, dilation, groups, ch_mult,
                     activation, rounding)
    return params, weights, bias, mult, sh, (n, oh, ow, out_c)


def _output(out, shape):
    if out is None:
        return np.empty(shape, dtype=np.int8)
    if not isinstance(out, np.ndarray) or out.dtype != np.int8:
        raise ArgumentError(f"out: expected an int8 numpy array, got {getattr(out, 'dtype', type(out).__name__)}")
    if out.shape != tuple(shape):
        raise ArgumentError(f"out: expected shape {tuple(shape)}, got {out.shape}")
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise ArgumentError("out: expected a writable C-contiguous array")
    return out


def _scratch(scratch):
    if scratch is None:
        return None
    if not isinstance(scratch, np.ndarray) or not scratch.flags.c_contiguous or not scratch.flags.writeable:
        raise ArgumentError("scratch: expected a writable C-contiguous numpy array")
    return scratch.reshape(-1).view(np.uint8)


def _run(depthwise, x, weights, bias, multiplier, shift, stride, padding, dilation, groups,
         ch_mult, input_offset, output_offset, activation, rounding, shape_rule, output_size,
         out, return_stats, scratch):
    x4, squeeze = _input4d(x)
    params, weights, bias, mult, sh, oshape = _prepare(
        depthwise, x4.shape, weights, bias, multiplier, shift, stride, padding, dilation, groups,
        ch_mult, input_offset, output_offset, activation, rounding, shape_rule, output_size)
    res = _output(out, oshape[1:] if squeeze else oshape)
    res4 = res[None] if squeeze else res
    stats = _c.conv_rev(depthwise, params, x4, weights, bias, mult, sh, res4, _scratch(scratch),
                        bool(return_stats))
    return (res, stats) if return_stats else res


def conv2d(x, weights, bias, multiplier, shift, *, stride=1, padding=0, dilation=1, groups=1,
           input_offset=0, output_offset=0, activation=(-128, 127), rounding="double",
           shape_rule="floor", output_size=None, out=None, return_stats=False, scratch=None):
    """Reverse int8 2-D convolution (grouped when groups > 1).

    Returns the int8 output (written into out= when given), or (output, stats)
    with return_stats=True: stats counts MACs executed (padded taps skipped),
    input elements read (each once) and the peak int32 accumulators held.
    scratch: optional writable C-contiguous array used as the kernel's scratch
    (at least buffer_size() bytes, 4-byte aligned), e.g. a view into simulated
    RAM; allocated when omitted."""
    return _run(False, x, weights, bias, multiplier, shift, stride, padding, dilation, groups, 1,
                input_offset, output_offset, activation, rounding, shape_rule, output_size, out,
                return_stats, scratch)


def depthwise_conv2d(x, weights, bias, multiplier, shift, *, ch_mult=1, stride=1, padding=0,
                     dilation=1, input_offset=0, output_offset=0, activation=(-128, 127),
                     rounding="double", shape_rule="floor", output_size=None, out=None,
                     return_stats=False, scratch=None):
    """Reverse int8 depthwise convolution with channel multiplier ch_mult
    (other arguments as conv2d)."""
    return _run(True, x, weights, bias, multiplier, shift, stride, padding, dilation, 1, ch_mult,
                input_offset, output_offset, activation, rounding, shape_rule, output_size, out,
                return_stats, scratch)


def buffer_size(x_shape, weights_shape, *, depthwise=False, ch_mult=1, groups=1, stride=1,
                padding=0, dilation=1, shape_rule="floor", output_size=None):
    """Scratch bytes of the C kernel (and of the stream) for these shapes."""
    x_shape = tuple(x_shape)
    if len(x_shape) == 3:
        x_shape = (1,) + x_shape
    weights = np.zeros(tuple(weights_shape), dtype=np.int8)
    out_c = weights.shape[3] if depthwise else weights.shape[0]
    params, weights, _, _, _, oshape = _prepare(
        depthwise, x_shape, weights, None, np.full(out_c, 1 << 30, np.int32), np.zeros(out_c, np.int32), stride,
        padding, dilation, groups, ch_mult, 0, 0, (-128, 127), "double", shape_rule, output_size)
    return _c.buffer_size(depthwise, params, x_shape, weights.shape, oshape)


class Conv2dStream:
    """Row streaming reverse convolution of one image.

    s = Conv2dStream((h, w, c), weights, bias, multiplier, shift, stride=..., ...)
    for row in image:            # row: int8 [w, c]
        for index, out_row in s.push(row):
            ...                  # out_row: int8 [out_w, out_c], index ascending
    Only the output rows in flight are held (s.scratch_bytes of accumulators);
    s.stats has the counters, s.output_shape the (out_h, out_w, out_c)."""

    _depthwise = False

    def __init__(self, input_shape, weights, bias, multiplier, shift, *, stride=1, padding=0,
                 dilation=1, groups=1, ch_mult=1, input_offset=0, output_offset=0,
                 activation=(-128, 127), rounding="double", shape_rule="floor", output_size=None):
        if not isinstance(input_shape, (tuple, list)) or len(input_shape) != 3:
            raise ArgumentError(f"input_shape: expected (h, w, c), got {input_shape!r}")
        h, w, c = (int_in_range(v, f"input_shape[{i}]", 1) for i, v in enumerate(input_shape))
        params, weights, bias, mult, sh, oshape = _prepare(
            self._depthwise, (1, h, w, c), weights, bias, multiplier, shift, stride, padding,
            dilation, groups, ch_mult, input_offset, output_offset, activation, rounding,
            shape_rule, output_size)
        self._s = _c.ConvRevStream(self._depthwise, params, (1, h, w, c), weights, bias, mult, sh,
                                   oshape)
        self.input_shape = (h, w, c)
        self.output_shape = oshape[1:]
        self.rows_pushed = 0

    def _drain(self):
        rows = []
        while True:
            r = self._s.pop()
            if r is None:
                return rows
            rows.append(r)

    def push(self, row):
        """Consume one input row; return [(index, out_row), ...] that became final."""
        row = exact_array(row, "row", np.int8, ndim=2, shape=self.input_shape[1:])
        ready = self._drain()
        self._s.push(row)
        self.rows_pushed += 1
        return ready + self._drain()

    @property
    def stats(self):
        return self._s.stats

    @property
    def scratch_bytes(self):
        return self._s.scratch_bytes


class DepthwiseConv2dStream(Conv2dStream):
    """Row streaming reverse depthwise convolution (same interface, ch_mult=)."""

    _depthwise = True


STRATEGIES = ("fused", "none", "naive", "striped", "reverse")


def conv_pool2d(x, weights, bias, multiplier, shift, *, window, pool="max", pool_stride=None,
                pool_padding=0, pool_rule="floor", pool_output_size=None,
                pool_activation=(-128, 127), pool_multiplier=0, pool_shift=0,
                pool_output_offset=0, strategy="fused", stride=1, padding=0, dilation=1,
                groups=1, input_offset=0, output_offset=0, activation=(-128, 127),
                rounding="double", shape_rule="floor", output_size=None, out=None,
                return_stats=False):
    """Convolution followed by pooling, without storing the convolution output.

    Convolution arguments as conv2d; pooling arguments as
    pyembed.kernels.pooling.pool2d (pool = "max" | "avg" | "sum", window, pool_stride
    defaulting to the window, pool_padding, pool_rule or pool_output_size,
    pool_activation; sum pooling also pool_multiplier, pool_shift,
    pool_output_offset) applied to the int8 convolution output.

    strategy:
      "fused"    (default) the reverse convolution's final rows are scattered
                 at once into reverse pooling (pe_conv_pool_rev_s8): only the
                 two rings of rows in flight and one convolution row are held.
      "none", "naive", "striped", "reverse": the four strategies of the
                 seed's Table I (max pooling only), for measurement; they give
                 the same bits and different counters (see pe_fused.h).
    Returns the pooled int8 output, or (output, stats) with return_stats:
    the kernel counters (for the Table I strategies conv_macs_nominal,
    pool_ops_nominal, conv_macs, pool_ops, conv_outputs, peak_elems, ...).
    """
    from pyembed.kernels import pooling
    if strategy not in STRATEGIES:
        raise ArgumentError(f"strategy: expected one of {STRATEGIES}, got {strategy!r}")
    x4, squeeze = _input4d(x)
    params, weights, bias, mult, sh, cshape = _prepare(
        False, x4.shape, weights, bias, multiplier, shift, stride, padding, dilation, groups, 1,
        input_offset, output_offset, activation, rounding, shape_rule, output_size)
    prm = pooling.make_params(pool, window, pool_stride, pool_padding, pool_activation,
                              pool_multiplier, pool_shift, pool_output_offset)
    if strategy != "fused" and pool != "max":
        raise ArgumentError(f"pool: the Table I strategies pool with 'max' only, got {pool!r}")
    pshape = pooling.pool_output_shape(cshape, window, pool_stride, pool_padding, pool_rule,
                                       pool_output_size)
    res = _output(out, pshape[1:] if squeeze else pshape)
    res4 = res[None] if squeeze else res
    stats = _c.conv_pool(None if strategy == "fused" else strategy, params, prm, x4, weights,
                         bias, mult, sh, cshape, res4)
    return (res, stats) if return_stats else res


def _vector_args(arrays, params):
    p = {k: int(v) for k, v in params.items() if not isinstance(v, str)}
    bias = None if p.get("bias_all_zero") and "bias" not in arrays else arrays.get("bias")
    kw = dict(stride=(p["stride_y"], p["stride_x"]),
              padding=(p["pad_y"], 0, p["pad_x"], 0),
              dilation=(p["dilation_y"], p["dilation_x"]),
              input_offset=p["input_offset"], output_offset=p["output_offset"],
              activation=(p["act_min"], p["act_max"]),
              output_size=(p["output_h"], p["output_w"]))
    return bias, kw, p


def vector_conv_s8(arrays, params):
    """pyembed.check.vectors runner for the CMSIS-NN conv_s8 cases."""
    bias, kw, p = _vector_args(arrays, params)
    return conv2d(arrays["input"], arrays["weights"], bias, arrays["output_mult"],
                  arrays["output_shift"], groups=p.get("groups", 1), **kw)


def vector_depthwise_conv_s8(arrays, params):
    """pyembed.check.vectors runner for the CMSIS-NN depthwise_conv_s8 cases."""
    bias, kw, p = _vector_args(arrays, params)
    return depthwise_conv2d(arrays["input"], arrays["weights"], bias, arrays["output_mult"],
                            arrays["output_shift"], ch_mult=p["ch_mult"], **kw)
