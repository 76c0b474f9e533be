"""Preparation of the comparison, logical, select and arg / reduce max-min
operators (C codes 80-93, csrc/include/pyembed/pe_logic.h): EQUAL,
NOT_EQUAL, GREATER, GREATER_EQUAL, LESS, LESS_EQUAL, LOGICAL_AND,
LOGICAL_OR, LOGICAL_NOT, SELECT_V2, ARG_MAX, ARG_MIN, REDUCE_MAX,
REDUCE_MIN, in the element types TFLite Micro's kernels accept that the
runtime holds (int8, int16 SELECT_V2, int32, bool).

bool tensors are one byte per element, 0 or 1 (PE_DT_BOOL).

int8 comparisons rescale both sides as TFLM's
comparisons kernel does: ``QuantizeMultiplierSmallerThanOneExp(double(scale))``
of each input's own scale, left shift 8, so inputs of different scales and
zero points compare by real value, to TFLM's rounding. TFLM cannot do that
for a scale of 1 or more (its Prepare check fails); pyembed refuses those
as unsupported. SELECT_V2, REDUCE_MAX / REDUCE_MIN and ARG_MAX / ARG_MIN
move or compare raw values, as TFLM does (REDUCE_MAX / REDUCE_MIN require
the output to have the input's quantization, as TFLM checks).
"""
import numpy as np

from pyembed.errors import ArgumentError
from pyembed.kernels.quant import quantize_multiplier
from pyembed.model.ops.base import Unsupported
from pyembed.model.ops.registry import register

CODES = {"EQUAL": 80, "NOT_EQUAL": 81, "GREATER": 82, "GREATER_EQUAL": 83, "LESS": 84, "LESS_EQUAL": 85,
         "LOGICAL_AND": 86, "LOGICAL_OR": 87, "LOGICAL_NOT": 88, "SELECT_V2": 89, "ARG_MAX": 90, "ARG_MIN": 91,
         "REDUCE_MAX": 92, "REDUCE_MIN": 93}
COMPARISONS = ("EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL")

# pe_dtype values (pe_graph.h)
DT = {np.dtype(np.int8): 0, np.dtype(np.int16): 1, np.dtype(np.int32): 2, np.dtype(np.bool_): 4}

# input element types per comparison: TFLM's comparisons.cc less float32 / int64
# (no float32 or int64 tensors in the runtime) and int16 GREATER, which TFLM's
# kernel lists but its Prepare leaves without rescaling parameters (the
# tflite-micro interpreter's int16 answers come from parameters it never set:
# all false in one run, all true in another): nothing to be bit-exact with
COMPARE_TYPES = {"EQUAL": (np.int8, np.int32, np.bool_), "NOT_EQUAL": (np.int8, np.int32, np.bool_),
                 "GREATER": (np.int8, np.int32), "GREATER_EQUAL": (np.int8, np.int32),
                 "LESS": (np.int8, np.int32), "LESS_EQUAL": (np.int8, np.int32)}
SELECT_TYPES = (np.int8, np.int16, np.int32)
COMPARE_LEFT_SHIFT = 8
MAX_RANK = 6

CONSTRAINTS = {
    **{n: f"{' / '.join(np.dtype(t).name for t in COMPARE_TYPES[n])} -> bool; broadcasting up to 6-D; "
          f"int8 sides rescaled by their own scales (< 1) as TFLM does" for n in COMPARISONS},
    "LOGICAL_AND": "bool; broadcasting up to 6-D",
    "LOGICAL_OR": "bool; broadcasting up to 6-D",
    "LOGICAL_NOT": "bool",
    "SELECT_V2": "bool condition; int8 / int16 / int32 values (raw copies); condition, x, y broadcasting up to 6-D",
    "ARG_MAX": "int8 -> int32 (TFLM writes no int64); constant int32 axis; rank 1-6; first index of equal values",
    "ARG_MIN": "int8 -> int32 (TFLM writes no int64); constant int32 axis; rank 1-6; first index of equal values",
    "REDUCE_MAX": "int8 (output quantized as the input); constant axes; keep_dims; rank 1-6",
    "REDUCE_MIN": "int8 (output quantized as the input); constant axes; keep_dims; rank 1-6",
}


def shape_block(out_shape, *in_shapes):
    """rank, output dims, then each input's dims right-aligned with leading 1s (a scalar is [1])."""
    rank = max(1, len(out_shape))

    def pad(s):
        s = [int(d) for d in s]
        return [1] * (rank - len(s)) + s

    words = [rank] + pad(out_shape)
    for s in in_shapes:
        words += pad(s)
    return words


def _finish(c, words, elements=None):
    c.op.params = {"logic_op": CODES[c.op.type], "words": [int(w) for w in words]}
    c.op.macs = int(elements if elements is not None else np.prod(c.output().shape))
    c.op.scratch_bytes = 0


def _dtype_name(t):
    return np.dtype(t.dtype).name if t.dtype is not None else (t.type_name or "?").lower()


def _broadcast(c, tensors, names, y):
    """The broadcast shape of tensors (ModelError if they do not broadcast or y
    has another shape)."""
    sizes = [int(np.prod(t.shape)) for t in tensors] + [int(np.prod(y.shape))]
    if all(s == 1 for s in sizes):
        return (1,)   # TFLM keeps the output's own shape when every operand has one element
    try:
        shape = np.broadcast_shapes(*(tuple(t.shape) for t in tensors))
    except ValueError:
        listed = ", ".join(f"{n} {list(t.shape)}" for n, t in zip(names, tensors))
        raise c.error(f"input shapes do not broadcast: {listed}") from None
    if tuple(shape) != tuple(y.shape):
        raise c.error(f"output shape {list(y.shape)} must be the broadcast shape {list(shape)}")
    if len(shape) > MAX_RANK:
        raise Unsupported(f"broadcasting over {len(shape)} dimensions (at most {MAX_RANK})")
    return tuple(shape)


def _block(shape, tensors):
    if shape == (1,):
        return shape_block((1,), *[(1,)] * len(tensors))
    return shape_block(shape, *(t.shape for t in tensors))


def _require_bool(c, t, what):
    if t.dtype is None or np.dtype(t.dtype) != np.bool_:
        raise Unsupported(f"{what} is {_dtype_name(t)}, only bool is supported")


def compare_quant(scale, what):
    """TFLM's QuantizeMultiplierSmallerThanOneExp(double(scale)): (multiplier, shift <= 0)."""
    s = float(np.float32(scale))
    m, sh = quantize_multiplier(s)
    if sh > 0 or s >= 1.0:
        raise ArgumentError(f"{what} scale {s!r} is not below 1 (TFLM's comparison kernel rescales each side "
                            f"by its own scale with a multiplier below one)")
    return m, sh


def prepare_compare(c):
    kind = c.op.type
    a, b, y = c.tensor(0, "input 1"), c.tensor(1, "input 2"), c.output()
    allowed = COMPARE_TYPES[kind]
    c.dtype(a, "input 1", allowed)
    c.dtype(b, "input 2", allowed)
    if a.dtype != b.dtype:
        raise c.error(f"input 1 is {_dtype_name(a)} but input 2 is {_dtype_name(b)}")
    _require_bool(c, y, "output")
    shape = _broadcast(c, (a, b), ("input 1", "input 2"), y)
    dt = np.dtype(a.dtype)
    if dt in (np.dtype(np.int8), np.dtype(np.int16)):
        (s1, z1), (s2, z2) = c.qparams(a, "input 1"), c.qparams(b, "input 2")
        try:
            m1, sh1 = compare_quant(s1, "input 1")
            m2, sh2 = compare_quant(s2, "input 2")
        except ArgumentError as e:
            raise Unsupported(str(e)) from None
        head = [DT[dt], 1, -int(z1), m1, sh1, -int(z2), m2, sh2, COMPARE_LEFT_SHIFT]
    else:
        head = [DT[dt], 0] + [0] * 7
    _finish(c, head + _block(shape, (a, b)))


def prepare_logical(c):
    a, b, y = c.tensor(0, "input 1"), c.tensor(1, "input 2"), c.output()
    for t, what in ((a, "input 1"), (b, "input 2"), (y, "output")):
        _require_bool(c, t, what)
    shape = _broadcast(c, (a, b), ("input 1", "input 2"), y)
    _finish(c, _block(shape, (a, b)))


def prepare_logical_not(c):
    x, y = c.tensor(0, "input"), c.output()
    _require_bool(c, x, "input")
    _require_bool(c, y, "output")
    if int(np.prod(x.shape)) != int(np.prod(y.shape)):
        raise c.error(f"output shape {list(y.shape)} must equal the input shape {list(x.shape)}")
    _finish(c, [])


def prepare_select_v2(c):
    cond, x, yv, out = c.tensor(0, "condition"), c.tensor(1, "x"), c.tensor(2, "y"), c.output()
    _require_bool(c, cond, "condition")
    c.dtype(x, "x", SELECT_TYPES)
    if x.dtype != yv.dtype or x.dtype != out.dtype:
        raise c.error(f"x, y and output must have one type, got {_dtype_name(x)}, {_dtype_name(yv)}, "
                      f"{_dtype_name(out)}")
    shape = _broadcast(c, (cond, x, yv), ("condition", "x", "y"), out)
    _finish(c, [DT[np.dtype(x.dtype)]] + _block(shape, (cond, x, yv)))


def _const_ints(c, k, what, allowed=(np.int32,)):
    t = c.tensor(k, what)
    if t.data is None:
        raise Unsupported(f"{c.op.type} with a non-constant {what} tensor")
    if np.dtype(t.dtype) not in [np.dtype(a) for a in allowed]:
        raise Unsupported(f"{what} tensor is {_dtype_name(t)}, only int32 is supported (as TFLM)")
    return [int(v) for v in np.asarray(t.data).ravel()]


def prepare_arg_minmax(c):
    x, y = c.tensor(0, "input"), c.output()
    c.dtype(x, "input", (np.int8,))
    c.dtype(y, "output", (np.int32,))
    axes = _const_ints(c, 1, "axis")
    rank = len(x.shape)
    if rank < 1 or rank > MAX_RANK:
        raise Unsupported(f"{c.op.type} of a {rank}-D input (1 to {MAX_RANK} dimensions)")
    if len(axes) != 1:
        raise c.error(f"axis must hold one value, holds {len(axes)}")
    axis = axes[0]
    if not -rank <= axis < rank:
        raise c.error(f"axis {axis} is out of range for a {rank}-D input")
    axis %= rank
    dims = [int(d) for d in x.shape]
    expect = dims[:axis] + dims[axis + 1:]
    if [int(d) for d in y.shape] != expect and not (expect == [] and [int(d) for d in y.shape] == [1]):
        raise c.error(f"output shape {list(y.shape)} must be the input shape {dims} without axis {axis}")
    outer = int(np.prod(dims[:axis])) if axis else 1
    inner = int(np.prod(dims[axis + 1:])) if axis + 1 < rank else 1
    _finish(c, [outer, dims[axis], inner], elements=int(np.prod(dims)))
    c.op.params["c_inputs"] = [0]   # the axis is folded into the words
    c.op.params["axis"] = axis


def reduced_axes(c, kind, x, y, axes):
    """(set of axes reduced, keep_dims) of a REDUCE_* operator over constant
    axes (negative counted from the end, repeats allowed), checking the rank
    (1 to MAX_RANK) and the output shape TFLM gives it."""
    rank = len(x.shape)
    if rank < 1 or rank > MAX_RANK:
        raise Unsupported(f"{kind} of a {rank}-D input (1 to {MAX_RANK} dimensions)")
    resolved = set()
    for a in axes:
        if not -rank <= a < rank:
            raise c.error(f"axis {a} is out of range for a {rank}-D input")
        resolved.add(a % rank)
    keep = bool(c.op.options.get("keep_dims", False))
    if keep:
        expect = [1 if d in resolved else int(s) for d, s in enumerate(x.shape)]
    else:
        expect = [int(s) for d, s in enumerate(x.shape) if d not in resolved]
    if [int(s) for s in y.shape] != expect and not (expect == [] and [int(s) for s in y.shape] == [1]):
        raise c.error(f"output shape {list(y.shape)} disagrees with input {list(x.shape)}, axes {axes}, "
                      f"keep_dims {keep}: expected {expect}")
    return resolved, keep


def prepare_reduce_minmax(c):
    kind = c.op.type
    x, y = c.tensor(0, "input"), c.output()
    c.dtype(x, "input", (np.int8,))
    c.dtype(y, "output", (np.int8,))
    axes = _const_ints(c, 1, "axis")
    resolved, keep = reduced_axes(c, kind, x, y, axes)
    (xs, xz), (ys, yz) = c.qparams(x, "input"), c.qparams(y, "output")
    if np.float32(xs) != np.float32(ys) or xz != yz:
        raise c.error(f"int8 {kind} needs the output quantized as the input (TFLM checks it): input scale "
                      f"{float(xs)!r} zero point {xz}, output scale {float(ys)!r} zero point {yz}")
    mask = sum(1 << d for d in resolved)
    _finish(c, [mask, len(x.shape)] + [int(d) for d in x.shape], elements=int(np.prod(x.shape)))
    c.op.params["c_inputs"] = [0]   # the axes are folded into the words
    c.op.params["axes"] = sorted(resolved)


PREPARE = {**{n: prepare_compare for n in COMPARISONS},
           "LOGICAL_AND": prepare_logical, "LOGICAL_OR": prepare_logical, "LOGICAL_NOT": prepare_logical_not,
           "SELECT_V2": prepare_select_v2, "ARG_MAX": prepare_arg_minmax, "ARG_MIN": prepare_arg_minmax,
           "REDUCE_MAX": prepare_reduce_minmax, "REDUCE_MIN": prepare_reduce_minmax}

for _name, _fn in PREPARE.items():
    register(_name, code=CODES[_name])(_fn)


# -- float64 reference (pyembed.model.float_ref calls this) -----------------------

_CMP = {"EQUAL": np.equal, "NOT_EQUAL": np.not_equal, "GREATER": np.greater, "GREATER_EQUAL": np.greater_equal,
        "LESS": np.less, "LESS_EQUAL": np.less_equal}


def float_reference(graph, op, inputs):
    """The real (float64) output of one of these operators from the real values
    of its inputs: comparisons and logical operators give 0.0 / 1.0, ARG_MAX /
    ARG_MIN the index, SELECT_V2 and REDUCE_MAX / REDUCE_MIN real values."""
    t = op.type
    y_shape = tuple(graph.tensors[op.outputs[0]].shape)
    xs = [None if v is None else np.asarray(v, dtype=np.float64) for v in inputs]
    if t in _CMP:
        return np.broadcast_to(_CMP[t](xs[0], xs[1]).astype(np.float64), y_shape).copy()
    if t in ("LOGICAL_AND", "LOGICAL_OR"):
        f = np.logical_and if t == "LOGICAL_AND" else np.logical_or
        return np.broadcast_to(f(xs[0] != 0, xs[1] != 0).astype(np.float64), y_shape).copy()
    if t == "LOGICAL_NOT":
        return (xs[0] == 0).astype(np.float64).reshape(y_shape)
    if t == "SELECT_V2":
        return np.broadcast_to(np.where(xs[0] != 0, xs[1], xs[2]), y_shape).copy()
    x = xs[0]
    if t in ("ARG_MAX", "ARG_MIN"):
        axis = int(op.params.get("axis", int(np.asarray(graph.tensors[op.inputs[1]].data).ravel()[0]) % x.ndim))
        f = np.argmax if t == "ARG_MAX" else np.argmin
        return f(x, axis=axis).astype(np.float64).reshape(y_shape)
    if t in ("REDUCE_MAX", "REDUCE_MIN"):
        axes = tuple(sorted({int(a) % x.ndim for a in np.asarray(graph.tensors[op.inputs[1]].data).ravel()}))
        f = np.max if t == "REDUCE_MAX" else np.min
        return np.asarray(f(x, axis=axes) if axes else x).reshape(y_shape)
    from pyembed.errors import UnsupportedError
    raise UnsupportedError(f"float reference: {t} is not modelled")
