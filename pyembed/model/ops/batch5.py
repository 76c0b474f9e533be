"""Issue #30's fifth batch of TFLite Micro operators: int8 arithmetic
(csrc/include/pyembed/pe_batch5.h).

==========================  =========================================================
ADD_N (240)                 n, pe_sum_q8 (8 words: input offset, input multiplier /
                            shift, output multiplier / shift, output zero point,
                            activation min / max)
CUMSUM (241)                outer, depth, inner (the input as [outer, depth, inner],
                            summed along depth), exclusive, reverse, pe_sum_q8
ELU (242)                   the 256-entry int8 table packed four to a word (64 words)
LOG_SOFTMAX (243)           outer, depth (the last axis), input multiplier, input left
                            shift, reverse scaling divisor, its right shift, diff_min
EMBEDDING_LOOKUP (244)      rows, row elements, number of lookups
==========================  =========================================================

(the pe_graph_op_type codes in parentheses; 240-259 are this batch's range).
TFLM (the tflite-micro interpreter) runs these in int8 and float32 only
(checked against it for int8, int16, int32 and float32 models); pyembed runs
the int8 forms. FLOOR_DIV, FLOOR_MOD and L2_POOL_2D are float32-only in TFLM
and are left to the float32 work.

ADD_N and CUMSUM requantize as TFLM's quantized kernels do: each term
(q - zp_in) * 2^20 is scaled by 0.5 (QuantizeMultiplierSmallerThanOneExp),
the int32 sum starts from the scaled -zp_in (TFLM's accumulator start), and
is requantized by 2 * s_in / (2^20 * s_out).
"""
import math

import numpy as np

from pyembed.kernels.quant import quantize_multiplier
from pyembed.model.ops.base import Unsupported
from pyembed.model.ops.registry import register

SUM_LEFT_SHIFT = 20  # TFLM's kAddNIntegerShift / kCumSumIntegerShift (PE_SUM_LEFT_SHIFT)


def _smaller_than_one(c, real, what):
    """TFLM's QuantizeMultiplierSmallerThanOneExp: (multiplier, shift <= 0) of 0 < real < 1."""
    if not 0.0 < real < 1.0:
        raise c.error(f"{what} {real!r} is not in (0, 1) (TFLM's kernel needs a multiplier below one)")
    m, sh = quantize_multiplier(real)
    return int(m), int(sh)


def sum_q8_words(c, xscale, xzp, yscale, yzp):
    """The 8 pe_sum_q8 words of an int8 sum from input (scale, zero point) to output's."""
    twice = 2.0 * float(xscale)
    im, ish = _smaller_than_one(c, float(xscale) / twice, "input multiplier")
    om, osh = _smaller_than_one(c, twice / ((1 << SUM_LEFT_SHIFT) * float(yscale)),
                                "output multiplier 2 * input scale / (2^20 * output scale)")
    return [-int(xzp), im, ish, om, osh, int(yzp), -128, 127]


def _same_int8(c, x, y, what="output"):
    c.dtype(x, "input", (np.int8,))
    if y.dtype != x.dtype:
        raise c.error(f"{what} type {y.type_name or y.dtype} differs from the input type {x.type_name or x.dtype}")
    if list(y.shape) != list(x.shape):
        raise c.error(f"{what} shape {list(y.shape)} differs from the input shape {list(x.shape)}")
    if min([int(d) for d in x.shape] or [1]) < 1:
        raise c.error(f"empty input {list(x.shape)}")


@register("ADD_N", code=240)
def prepare_add_n(c):
    """ADD_N: n int8 inputs of one shape, scale and zero point (TFLM checks them), int8 output."""
    op = c.op
    n = len(op.inputs)
    if n < 2:
        raise c.error(f"{n} input(s): ADD_N needs at least 2 inputs (TFLM checks it)")
    xs = [c.tensor(k, f"input {k}") for k in range(n)]
    y = c.output()
    _same_int8(c, xs[0], y)
    xq = c.qparams(xs[0], "input 0")
    for k, x in enumerate(xs[1:], 1):
        if x.dtype != xs[0].dtype or list(x.shape) != list(xs[0].shape):
            raise c.error(f"input {k} ({x.type_name or x.dtype}{list(x.shape)}) differs from input 0 "
                          f"({xs[0].type_name or xs[0].dtype}{list(xs[0].shape)})")
        if c.qparams(x, f"input {k}") != xq:
            raise c.error(f"input {k} is quantized as (scale {float(c.qparams(x, 'x')[0])!r}, zero point "
                          f"{c.qparams(x, 'x')[1]}), input 0 as ({float(xq[0])!r}, {xq[1]}): TFLM's ADD_N "
                          f"needs them equal")
    if n > 64:
        raise Unsupported(f"{n} inputs, the runtime takes at most 64 (PE_GRAPH_MAX_IO)")
    yq = c.qparams(y, "output")
    op.params = {"words": [n, *sum_q8_words(c, xq[0], xq[1], yq[0], yq[1])]}
    count = int(np.prod(y.shape, dtype=np.int64))
    op.macs = n * count
    op.scratch_bytes = 0


@register("CUMSUM", code=241)
def prepare_cumsum(c):
    """CUMSUM: int8 input, constant int32 axis (negative allowed), exclusive / reverse flags."""
    x, y = c.tensor(0, "input"), c.output()
    _same_int8(c, x, y)
    rank = len(x.shape)
    if rank < 1:
        raise c.error("CUMSUM of a scalar (TFLM needs rank >= 1)")
    a = c.tensor(1, "axis")
    c.constant(a, "axis")
    if a.dtype != np.dtype(np.int32) or np.asarray(a.data).size != 1:
        raise c.error(f"axis (tensor {a.index}) must be one int32, is {a.type_name or a.dtype}"
                      f"{list(np.asarray(a.data).shape)}")
    axis = int(np.asarray(a.data).ravel()[0])
    k = axis + rank if axis < 0 else axis
    if not 0 <= k < rank:
        raise c.error(f"axis {axis} outside a {rank}-D input")
    dims = [int(d) for d in x.shape]
    outer = int(np.prod(dims[:k], dtype=np.int64))
    inner = int(np.prod(dims[k + 1:], dtype=np.int64))
    o = c.op.options
    excl, rev = int(bool(o.get("exclusive", False))), int(bool(o.get("reverse", False)))
    xq, yq = c.qparams(x, "input"), c.qparams(y, "output")
    c.op.params = {"words": [outer, dims[k], inner, excl, rev, *sum_q8_words(c, xq[0], xq[1], yq[0], yq[1])],
                   "c_inputs": [0], "axis": k, "exclusive": excl, "reverse": rev}
    c.op.macs = outer * dims[k] * inner
    c.op.scratch_bytes = 0


def _expf():
    from pyembed.model.float_islands import _libm
    return _libm()["expf"]


def elu_table(xscale, xzp, yscale, yzp):
    """TFLM's ELU table (its Prepare's PopulateLookupTable<int8_t>), float32 throughout with the C
    library's expf: entry v + 128 = clamp(int(round(f(s_in * (v - zp_in)) * (1 / s_out)) + zp_out))."""
    f32 = np.float32
    expf = _expf()
    inv = f32(1.0) / f32(yscale)
    table = np.zeros(256, np.int8)
    for v in range(-128, 128):
        d = f32(f32(xscale) * f32(v - xzp))
        t = f32(f32(expf(float(d))) - f32(1.0)) if d < 0 else d
        p = f32(t * inv)
        r = f32(math.copysign(math.floor(abs(float(p)) + 0.5), float(p)))  # std::round: halves away, exact in double
        q = int(np.trunc(f32(r + f32(yzp))))
        table[v + 128] = min(127, max(-128, q))
    return table


def pack_table(table):
    """256 int8 entries as 64 int32 words, byte j of word k = table[4k + j] (pe_lut_packed_s8)."""
    b = np.asarray(table, np.int8).view(np.uint8).astype(np.uint32).reshape(64, 4)
    w = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16) | (b[:, 3] << 24)
    return [int(v) for v in w.astype(np.uint32).view(np.int32)]


@register("ELU", code=242)
def prepare_elu(c):
    """ELU int8: TFLM's 256-entry table (float32, libm expf) computed here, kept in the words."""
    x, y = c.tensor(0, "input"), c.output()
    _same_int8(c, x, y)
    xq, yq = c.qparams(x, "input"), c.qparams(y, "output")
    table = elu_table(xq[0], xq[1], yq[0], yq[1])
    c.op.params = {"words": pack_table(table), "table": table}
    c.op.macs = int(np.prod(x.shape, dtype=np.int64))
    c.op.scratch_bytes = 0


def log_softmax_words(c, xscale):
    """TFLM's int8 LOG_SOFTMAX Prepare (PreprocessLogSoftmaxScalingExp, beta 1, 5 integer bits):
    [input multiplier, input left shift, reverse scaling divisor, its right shift, diff_min]."""
    from pyembed.kernels.params import softmax_params
    mult, shift, diff_min = softmax_params(1.0, float(xscale), 5)
    if not 1 <= shift <= 30:
        raise Unsupported(f"input scale {float(xscale)!r}: left shift {shift} outside 1..30 (TFLM's Prepare "
                          f"needs input scale * 2^26 > 1)")
    rdiv, rshift = _smaller_than_one(c, float(1 << (31 - shift)) / mult, "reverse scaling divisor")
    return [mult, shift, rdiv, -rshift, diff_min]


@register("LOG_SOFTMAX", code=243)
def prepare_log_softmax(c):
    """LOG_SOFTMAX int8 over the last axis: output scale 16/256 and zero point 127 (TFLM checks them)."""
    x, y = c.tensor(0, "input"), c.output()
    _same_int8(c, x, y)
    if len(x.shape) < 1:
        raise c.error("LOG_SOFTMAX of a scalar")
    xq, yq = c.qparams(x, "input"), c.qparams(y, "output")
    if yq[0] != np.float32(16.0 / 256) or yq[1] != 127:
        raise c.error(f"output quantized as (scale {float(yq[0])!r}, zero point {yq[1]}): TFLM's int8 LOG_SOFTMAX "
                      f"needs scale 16/256 and zero point 127")
    depth = int(x.shape[-1])
    outer = int(np.prod(x.shape[:-1], dtype=np.int64))
    c.op.params = {"words": [outer, depth, *log_softmax_words(c, xq[0])]}
    c.op.macs = 2 * outer * depth
    c.op.scratch_bytes = 0


@register("EMBEDDING_LOOKUP", code=244)
def prepare_embedding_lookup(c):
    """EMBEDDING_LOOKUP: int32 1-D indices, int8 values of rank >= 2 -> int8 rows (TFLM's raw copy;
    its int8 -> float32 dequantizing form is left to the float32 work)."""
    ix, v, y = c.tensor(0, "lookup"), c.tensor(1, "value"), c.output()
    if ix.dtype != np.dtype(np.int32):
        raise c.error(f"lookup (tensor {ix.index}) must be int32, is {ix.type_name or ix.dtype}")
    c.rank(ix, "lookup", 1)
    c.dtype(v, "value", (np.int8,))
    if y.dtype != np.dtype(np.int8):
        raise Unsupported(f"output is {y.type_name or y.dtype}: only the int8 -> int8 lookup is supported "
                          f"(int8 -> float32 dequantizes: float32 work)")
    if len(v.shape) < 2:
        raise c.error(f"value (tensor {v.index}) must have rank >= 2, has shape {list(v.shape)}")
    n, rows = int(ix.shape[0]), int(v.shape[0])
    want = [n, *[int(d) for d in v.shape[1:]]]
    if list(y.shape) != want:
        raise c.error(f"output shape {list(y.shape)} differs from {want} ({n} rows of value {list(v.shape)})")
    row = int(np.prod(v.shape[1:], dtype=np.int64))
    if min(n, rows, row) < 1 or rows * row >= 1 << 31 or n * row >= 1 << 31:
        raise c.error(f"empty or oversized lookup {list(ix.shape)} / value {list(v.shape)}")
    if ix.is_constant:
        bad = [int(i) for i in np.asarray(ix.data).ravel() if not 0 <= int(i) < rows]
        if bad:
            raise c.error(f"lookup indices {bad} outside [0, {rows})")
    c.op.params = {"words": [rows, row, n]}
    c.op.macs = 0
    c.op.scratch_bytes = 0


CONSTRAINTS = {
    "ADD_N": "int8 (TFLM: int8 / float32); 2-64 inputs of one shape, scale and zero point; TFLM's requantization "
             "(2^20 left shift, its accumulator start)",
    "CUMSUM": "int8 (TFLM: int8 / float32); constant int32 axis; exclusive / reverse; TFLM's requantization",
    "ELU": "int8 (TFLM: int8 / float32); TFLM's 256-entry table (float32, libm expf)",
    "LOG_SOFTMAX": "int8 (TFLM: int8 / float32); last axis; output scale 16/256, zero point 127; TFLM's "
                   "fixed-point exp / log",
    "EMBEDDING_LOOKUP": "int32 1-D indices, int8 values (rank >= 2) -> int8; raw row copy; an index out of "
                        "range is an error status",
}


def float_reference(graph, op, inputs):
    """The real (float64) output of the dequantized inputs."""
    if op.type == "ADD_N":
        return np.sum(np.stack([np.asarray(v, np.float64) for v in inputs]), axis=0)
    if op.type == "CUMSUM":
        x = np.asarray(inputs[0], np.float64)
        p = op.params
        ax = p["axis"]
        if p["reverse"]:
            x = np.flip(x, axis=ax)
        y = np.cumsum(x, axis=ax)
        if p["exclusive"]:
            y = y - x
        return np.flip(y, axis=ax) if p["reverse"] else y
    if op.type == "ELU":
        x = np.asarray(inputs[0], np.float64)
        return np.where(x < 0, np.expm1(np.minimum(x, 0.0)), x)
    if op.type == "LOG_SOFTMAX":
        x = np.asarray(inputs[0], np.float64)
        m = np.max(x, axis=-1, keepdims=True)
        return x - m - np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True))
    if op.type == "EMBEDDING_LOOKUP":
        idx = graph.tensors[op.inputs[0]]
        ids = np.asarray(idx.data if idx.is_constant else inputs[0]).astype(np.int64).ravel()
        return np.asarray(inputs[1], np.float64)[ids]
    from pyembed.errors import UnsupportedError
    raise UnsupportedError(f"float reference: operator {op.index} ({op.type}) is not in pyembed.model.ops.batch5")
