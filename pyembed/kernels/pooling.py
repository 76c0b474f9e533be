"""Reverse (output-centric) int8 pooling: max, average and sum over NHWC
tensors, whole tensor or row by row; the arithmetic runs in C
(csrc/src/kernels/pool/pe_pool_rev.c, documented in csrc/include/pyembed/pe_pool.h).

Reverse pooling reads each input element once and combines it at once into
every output whose window contains it (SPEC section 2); an output row leaves
as soon as no later input row can reach it, so only ceil(k_h / s_h) rows of
int32 accumulators are ever held, never the input.

    max_pool2d(x, window, stride=None, padding=0, rule="floor", ...)
    avg_pool2d(...)      divisor = in-bounds taps (CMSIS-NN / TFLite rounding)
    sum_pool2d(..., multiplier=0, shift=0, output_offset=0)
    PoolStream(kind, input_shape, window, ...)  push rows, get final rows
    pool_output_shape(input_shape, window, stride, padding, rule, output_size)
    output_size(d_in, k_eff, stride, pad_lo, pad_hi, rule)   one axis

Arguments shared by every entry point:
    x        int8 ndarray, C-contiguous, NHWC (n, h, w, c) or HWC (h, w, c);
             1-D pooling is h = 1.
    window   k or (k_h, k_w), each >= 1.        stride: s or (s_h, s_w) >= 1,
             default the window (stride > window leaves gaps).
    padding  p, (p_h, p_w) or (top, bottom, left, right), each >= 0, any size.
    rule     "floor", "ceil" or "nopad" (output-size rule, SPEC section 2;
             "nopad" requires zero padding); or pass output_size=(h_o, w_o)
             for an explicit size (bottom/right padding then follows from it).
    activation  (act_min, act_max) within [-128, 127].
    out      optional C-contiguous int8 array of the output shape to write into.
    return_stats  also return the kernel's measured counters (dict).
An output whose window has no in-bounds tap is the clamped absorbing element:
act_min for max, clamp(0) for avg, clamp(requant(0) + output_offset) for sum.
"""
import numpy as np

from pyembed._ext import _pool as _c
from pyembed._validate import int_in_range
from pyembed.errors import ArgumentError

KINDS = {"max": _c.KIND_MAX, "avg": _c.KIND_AVG, "sum": _c.KIND_SUM}
RULES = {"floor": _c.RULE_FLOOR, "ceil": _c.RULE_CEIL, "nopad": _c.RULE_NOPAD,
         "explicit": _c.RULE_EXPLICIT}
_I32 = 2**31 - 1


def _pair(value, name, lo=1):
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ArgumentError(f"{name}: expected an integer or a pair (h, w), got {value!r}")
        return tuple(int_in_range(v, f"{name}[{i}]", lo, _I32) for i, v in enumerate(value))
    v = int_in_range(value, name, lo, _I32)
    return (v, v)


def _padding(value):
    """-> (top, bottom, left, right)"""
    if isinstance(value, (tuple, list)):
        if len(value) == 2:
            ph, pw = _pair(value, "padding", 0)
            return (ph, ph, pw, pw)
        if len(value) == 4:
            return tuple(int_in_range(v, f"padding[{i}]", 0, _I32) for i, v in enumerate(value))
        raise ArgumentError(f"padding: expected p, (p_h, p_w) or (top, bottom, left, right), got {value!r}")
    p = int_in_range(value, "padding", 0, _I32)
    return (p, p, p, p)


def _activation(value):
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise ArgumentError(f"activation: expected a pair (act_min, act_max), got {value!r}")
    lo = int_in_range(value[0], "activation[0] (act_min)", -128, 127)
    hi = int_in_range(value[1], "activation[1] (act_max)", -128, 127)
    if lo > hi:
        raise ArgumentError(f"activation: act_min {lo} > act_max {hi}")
    return lo, hi


def _rule(rule):
    if rule not in RULES or rule == "explicit":
        raise ArgumentError(f"rule: expected 'floor', 'ceil' or 'nopad' (or output_size=...), got {rule!r}")
    return rule


def make_params(kind, window, stride=None, padding=0, activation=(-128, 127),
                multiplier=0, shift=0, output_offset=0):
    """Validated parameter tuple in the order pyembed._ext._pool expects."""
    if kind not in KINDS:
        raise ArgumentError(f"kind: expected one of {sorted(KINDS)}, got {kind!r}")
    wh, ww = _pair(window, "window")
    sh, sw = (wh, ww) if stride is None else _pair(stride, "stride")
    pt, pb, pl, pr = _padding(padding)
    amin, amax = _activation(activation)
    if kind == "sum":
        multiplier = int_in_range(multiplier, "multiplier", 0, _I32)
        shift = int_in_range(shift, "shift", -31, 30)
        output_offset = int_in_range(output_offset, "output_offset", -128, 127)
    else:
        multiplier = shift = output_offset = 0
    if wh * ww > 2**23:
        raise ArgumentError(f"window: area {wh}x{ww} exceeds 2^23 taps")
    return (KINDS[kind], wh, ww, sh, sw, pt, pb, pl, pr, amin, amax, multiplier, shift, output_offset)


def output_size(d_in, k_eff, stride, pad_lo=0, pad_hi=0, rule="floor"):
    """Output length along one axis (pe_out_size, SPEC section 2):
    floor / ceil of (d_in + pad_lo + pad_hi - k_eff) / stride, plus 1; "nopad"
    ignores the pads. Raises ArgumentError when the rule leaves no output."""
    d_in = int_in_range(d_in, "d_in", 1, _I32)
    k_eff = int_in_range(k_eff, "k_eff", 1, _I32)
    stride = int_in_range(stride, "stride", 1, _I32)
    pad_lo = int_in_range(pad_lo, "pad_lo", 0, _I32)
    pad_hi = int_in_range(pad_hi, "pad_hi", 0, _I32)
    return _c.out_size(d_in, k_eff, stride, pad_lo, pad_hi, RULES[_rule(rule)])


def _shape4(shape, name):
    if not isinstance(shape, (tuple, list)) or len(shape) not in (3, 4):
        raise ArgumentError(f"{name}: expected (h, w, c) or (n, h, w, c), got {shape!r}")
    dims = tuple(int_in_range(v, f"{name}[{i}]", 1, _I32) for i, v in enumerate(shape))
    return dims if len(dims) == 4 else (1,) + dims


def _out_dims(prm, in4, rule, out_size):
    if out_size is not None:
        oh, ow = _pair(out_size, "output_size")
        return _c.output_dims(prm, _c.RULE_EXPLICIT, in4, (oh, ow))
    rule = _rule(rule)
    if rule == "nopad" and any(prm[5:9]):
        raise ArgumentError(f"padding: rule 'nopad' requires zero padding, got {tuple(prm[5:9])}")
    in_h, in_w = in4[1], in4[2]
    span_h = in_h + (0 if rule == "nopad" else prm[5] + prm[6]) - prm[1]
    span_w = in_w + (0 if rule == "nopad" else prm[7] + prm[8]) - prm[2]
    try:
        return _c.output_dims(prm, RULES[rule], in4)
    except ArgumentError:
        raise ArgumentError(
            f"rule {rule!r} gives no output for input {in_h}x{in_w}, window {prm[1]}x{prm[2]}, "
            f"stride {prm[3]}x{prm[4]}, padding {tuple(prm[5:9])} "
            f"(padded span minus window: {span_h}x{span_w})") from None


def pool_output_shape(input_shape, window, stride=None, padding=0, rule="floor", output_size=None):
    """Output shape for an input shape (h, w, c) or (n, h, w, c), same rank."""
    in4 = _shape4(input_shape, "input_shape")
    out4 = _out_dims(make_params("max", window, stride, padding), in4, rule, output_size)
    return out4 if len(input_shape) == 4 else out4[1:]


def _input(x, name="x"):
    if not isinstance(x, np.ndarray):
        raise ArgumentError(f"{name}: expected a numpy array of int8, got {type(x).__name__}")
    if x.dtype != np.int8:
        raise ArgumentError(f"{name}: expected dtype int8, got {x.dtype}")
    if x.ndim not in (3, 4):
        raise ArgumentError(f"{name}: expected NHWC (n, h, w, c) or HWC (h, w, c), got shape {x.shape}")
    if 0 in x.shape:
        raise ArgumentError(f"{name}: expected every dimension >= 1, got shape {x.shape}")
    if not x.flags.c_contiguous:
        raise ArgumentError(f"{name}: expected a C-contiguous array (np.ascontiguousarray)")
    return x


def _output(out, shape):
    if out is None:
        return np.empty(shape, dtype=np.int8)
    if not isinstance(out, np.ndarray) or out.dtype != np.int8:
        got = type(out).__name__ if not isinstance(out, np.ndarray) else out.dtype
        raise ArgumentError(f"out: expected an int8 numpy array, got {got}")
    if out.shape != tuple(shape):
        raise ArgumentError(f"out: expected shape {tuple(shape)}, got {out.shape}")
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise ArgumentError("out: expected a writeable C-contiguous array")
    return out


def pool2d(x, kind, window, stride=None, padding=0, *, rule="floor", output_size=None,
           activation=(-128, 127), multiplier=0, shift=0, output_offset=0, out=None,
           return_stats=False, _scratch_bytes=None):
    """Reverse pooling of kind "max", "avg" or "sum" (see the module doc)."""
    prm = make_params(kind, window, stride, padding, activation, multiplier, shift, output_offset)
    x = _input(x)
    x4 = x if x.ndim == 4 else x[np.newaxis]
    out4 = _out_dims(prm, x4.shape, rule, output_size)
    shape = out4 if x.ndim == 4 else out4[1:]
    n_out = int(np.prod(np.asarray(shape, dtype=object)))
    if n_out > 2**31 - 1:
        # refuse before allocating: the kernels index with int32
        raise ArgumentError(f"output_size: an output of shape {tuple(shape)} has {n_out} elements, "
                            f"more than the int32 range the kernels address")
    result = _output(out, shape)
    if np.shares_memory(result, x):
        raise ArgumentError("out: must not overlap x")
    r4 = result if result.ndim == 4 else result[np.newaxis]
    stats = _c.pool2d(prm, x4, r4, _scratch_bytes, return_stats)
    return (result, stats) if return_stats else result


def max_pool2d(x, window, stride=None, padding=0, *, rule="floor", output_size=None,
               activation=(-128, 127), out=None, return_stats=False):
    """Max pooling; padded positions never take part."""
    return pool2d(x, "max", window, stride, padding, rule=rule, output_size=output_size,
                  activation=activation, out=out, return_stats=return_stats)


def avg_pool2d(x, window, stride=None, padding=0, *, rule="floor", output_size=None,
               activation=(-128, 127), out=None, return_stats=False):
    """Average pooling: window sum / in-bounds taps, nearest with halves away
    from zero (bit-exact with CMSIS-NN arm_avgpool_s8 and TFLite)."""
    return pool2d(x, "avg", window, stride, padding, rule=rule, output_size=output_size,
                  activation=activation, out=out, return_stats=return_stats)


def sum_pool2d(x, window, stride=None, padding=0, *, rule="floor", output_size=None,
               activation=(-128, 127), multiplier=0, shift=0, output_offset=0, out=None,
               return_stats=False):
    """Sum pooling: the int32 window sum of the raw int8 values, requantized by
    (multiplier, shift) unless multiplier is 0, plus output_offset, clamped."""
    return pool2d(x, "sum", window, stride, padding, rule=rule, output_size=output_size,
                  activation=activation, multiplier=multiplier, shift=shift,
                  output_offset=output_offset, out=out, return_stats=return_stats)


class PoolStream:
    """Row-streaming reverse pooling ("burning front").

    s = PoolStream("avg", (h, w, c), window=3, stride=2, padding=1, rule="ceil")
    for row in rows:            # each (w, c) int8
        final = s.push(row)     # (k, w_o, c) int8: the k output rows now final
    s.done, s.rows_in, s.rows_out, s.stats, s.peak_rows

    For n > 1 (input_shape (n, h, w, c)) rows of the batches follow each other
    and output rows are numbered over the batches. The fusion API
    begin_row() / scatter(x, values) / end_row() feeds pixel values (int8 or
    int32, shape (pixels, c) or (c,)) into the open row as a producer computes
    them; end_row() returns the final rows like push().
    """

    def __init__(self, kind, input_shape, window, stride=None, padding=0, *, rule="floor",
                 output_size=None, activation=(-128, 127), multiplier=0, shift=0,
                 output_offset=0, _scratch_bytes=None):
        prm = make_params(kind, window, stride, padding, activation, multiplier, shift, output_offset)
        self.input_shape = _shape4(input_shape, "input_shape")
        self.output_shape = _out_dims(prm, self.input_shape, rule, output_size)
        self.kind = kind
        self._s = _c.Stream(prm, self.input_shape, self.output_shape, _scratch_bytes)
        self.scratch_bytes = self._s.scratch_bytes
        self.max_rows_out = self._s.max_rows
        self.last_first_row = None

    def _row(self, row):
        _, _, w, c = self.input_shape
        if not isinstance(row, np.ndarray) or row.dtype != np.int8:
            got = type(row).__name__ if not isinstance(row, np.ndarray) else row.dtype
            raise ArgumentError(f"row: expected an int8 numpy array of shape ({w}, {c}), got {got}")
        if row.shape == (w * c,):
            row = row.reshape(w, c)
        if row.shape != (w, c):
            raise ArgumentError(f"row: expected shape ({w}, {c}), got {row.shape}")
        if not row.flags.c_contiguous:
            raise ArgumentError("row: expected a C-contiguous array (np.ascontiguousarray)")
        return row

    def _emitted(self, first, rows):
        self.last_first_row = first
        return rows.copy()

    def push(self, row):
        """Combine one input row; returns the output rows it made final."""
        return self._emitted(*self._s.push(self._row(row)))

    def begin_row(self):
        self._s.begin_row()

    def scatter(self, x, values):
        """Combine pixels x, x+1, ... (values (pixels, c), int8 or int32) of the open row."""
        c = self.input_shape[3]
        if not isinstance(values, np.ndarray) or values.dtype not in (np.int8, np.int32):
            raise ArgumentError("values: expected an int8 or int32 numpy array")
        if values.shape == (c,):
            values = values.reshape(1, c)
        if values.ndim != 2 or values.shape[1] != c:
            raise ArgumentError(f"values: expected shape (pixels, {c}) or ({c},), got {values.shape}")
        if not values.flags.c_contiguous:
            raise ArgumentError("values: expected a C-contiguous array")
        x = int_in_range(x, "x", 0, self.input_shape[2] - values.shape[0])
        if values.shape[0] == 0:
            return
        if values.dtype == np.int8:
            self._s.scatter_s8(x, values)
        else:
            self._s.scatter_s32(x, values)

    def end_row(self):
        return self._emitted(*self._s.end_row())

    @property
    def rows_in(self):
        return self._s.progress()[0]

    @property
    def rows_out(self):
        return self._s.progress()[1]

    @property
    def done(self):
        n, h = self.input_shape[0], self.input_shape[1]
        return self.rows_in == n * h

    @property
    def stats(self):
        return self._s.stats

    @property
    def peak_rows(self):
        """Peak output rows held as accumulators, from the measured counter."""
        _, _, w_o, c = self.output_shape
        return self.stats["peak_elems"] // (w_o * c)


# ---- runners for the CMSIS-NN vectors (pyembed.check.vectors.RUNNERS) ------------------

def _vector_args(params):
    k = (int(params["kernel_h"]), int(params["kernel_w"]))
    s = (int(params["stride_y"]), int(params["stride_x"]))
    # left/top padding only; bottom/right follow from the explicit output size
    pad = (int(params["pad_y"]), 0, int(params["pad_x"]), 0)
    return dict(window=k, stride=s, padding=pad,
                output_size=(int(params["output_h"]), int(params["output_w"])),
                activation=(int(params["act_min"]), int(params["act_max"])))


def vector_avgpool_s8(arrays, params):
    return avg_pool2d(np.ascontiguousarray(arrays["input"]), **_vector_args(params))


def vector_maxpool_s8(arrays, params):
    return max_pool2d(np.ascontiguousarray(arrays["input"]), **_vector_args(params))
