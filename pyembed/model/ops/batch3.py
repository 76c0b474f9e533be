"""Issue #30's third batch of TFLite Micro operators (csrc/include/pyembed/pe_batch3.h).

==========================  =========================================================
REVERSE_V2 (220)            rank, in dims[rank], flip[rank] (1: the axis is reversed)
PACK (221), UNPACK (222)    outer, n, inner (the packed tensor as [outer, n, inner],
                            each piece as [outer, inner])
BROADCAST_TO (223)          rank, out dims[rank], input strides[rank] (elements; 0 along
                            broadcast axes)
==========================  =========================================================

(the pe_graph_op_type codes in parentheses; 220-259 are this batch's range).
Constant operands (REVERSE_V2's axes) are folded into the words, so the C
runner receives only the data tensor.
"""
import numpy as np

from pyembed.model.ops.base import Unsupported
from pyembed.model.ops.registry import register

MAX_RANK = 6  # PE_BATCH3_MAX_RANK
_DATA_TYPES = (np.int8, np.int16, np.int32)


@register("REVERSE_V2", code=220)
def prepare_reverse_v2(c):
    """REVERSE_V2: int8 / int16 / int32, rank 1-6, constant int32 axes that are contiguous once
    sorted (TFLite Micro refuses others; the C kernel reverses any set)."""
    x, y = c.tensor(0, "input"), c.output()
    c.dtype(x, "input", _DATA_TYPES)
    if y.dtype != x.dtype:
        raise c.error(f"output type {y.type_name or y.dtype} differs from the input type {x.type_name or x.dtype}")
    rank = len(x.shape)
    if not 1 <= rank <= MAX_RANK:
        raise Unsupported(f"input has rank {rank}, REVERSE_V2 supports 1..{MAX_RANK}")
    if list(y.shape) != list(x.shape):
        raise c.error(f"output shape {list(y.shape)} differs from the input shape {list(x.shape)}")
    if min(int(d) for d in x.shape) < 1:
        raise c.error(f"empty input {list(x.shape)}")
    a = c.tensor(1, "axis")
    c.constant(a, "axis")
    if a.dtype != np.dtype(np.int32):
        raise c.error(f"axis (tensor {a.index}) must be int32, is {a.type_name or a.dtype}")
    axes = [int(v) for v in np.asarray(a.data).ravel()]
    flip = [0] * rank
    for v in axes:
        k = v + rank if v < 0 else v
        if not 0 <= k < rank:
            raise c.error(f"axis {v} outside a {rank}-D input")
        if flip[k]:
            raise c.error(f"axis {v} is listed twice in {axes}")
        flip[k] = 1
    on = [k for k in range(rank) if flip[k]]
    if not on:
        raise c.error("axis is empty: REVERSE_V2 needs at least one axis")
    if on[-1] - on[0] + 1 != len(on):
        raise c.error(f"axes {axes} are not contiguous (TFLite Micro's REVERSE_V2 refuses them)")
    c.op.params = {"words": [rank, *[int(d) for d in x.shape], *flip], "c_inputs": [0],
                   "axes": [k for k in range(rank) if flip[k]]}
    c.op.macs = 0
    c.op.scratch_bytes = 0


def _pack_words(c, piece_shape, whole, axis_opt, n):
    rank = len(piece_shape) + 1
    axis = int(axis_opt)
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank:
        raise c.error(f"axis {axis_opt} outside the {rank}-D packed tensor")
    want = list(piece_shape[:axis]) + [n] + list(piece_shape[axis:])
    if list(whole.shape) != want:
        raise c.error(f"packed shape {list(whole.shape)} differs from {want} ({n} pieces of {list(piece_shape)} "
                      f"along axis {axis})")
    outer = int(np.prod(piece_shape[:axis], dtype=np.int64))
    inner = int(np.prod(piece_shape[axis:], dtype=np.int64))
    if min(outer, inner) < 1 or outer * n * inner >= 1 << 31:
        raise c.error(f"empty or oversized pieces {list(piece_shape)}")
    return axis, [outer, n, inner]


@register("PACK", code=221)
def prepare_pack(c):
    """PACK (run time): n int8 / int16 / int32 inputs of one shape stacked along a new axis."""
    op = c.op
    n = len(op.inputs)
    xs = [c.tensor(k, f"input {k}") for k in range(n)]
    y = c.output()
    c.dtype(xs[0], "input 0", _DATA_TYPES)
    for k, x in enumerate(xs):
        if x.dtype != xs[0].dtype or list(x.shape) != list(xs[0].shape):
            raise c.error(f"input {k} ({x.type_name or x.dtype}{list(x.shape)}) differs from input 0 "
                          f"({xs[0].type_name or xs[0].dtype}{list(xs[0].shape)})")
    if y.dtype != xs[0].dtype:
        raise c.error(f"output type {y.type_name or y.dtype} differs from the inputs' {xs[0].type_name or xs[0].dtype}")
    count = int(op.options.get("values_count", n))
    if count != n:
        raise c.error(f"values_count {count} differs from the {n} inputs")
    axis, words = _pack_words(c, list(xs[0].shape), y, op.options.get("axis", 0), n)
    op.params = {"words": words, "axis": axis}
    op.macs = 0
    op.scratch_bytes = 0


@register("UNPACK", code=222)
def prepare_unpack(c):
    """UNPACK: one int8 / int16 / int32 input split into its slices along an axis."""
    op = c.op
    x = c.tensor(0, "input")
    c.dtype(x, "input", _DATA_TYPES)
    if len(x.shape) < 1:
        raise Unsupported("UNPACK of a scalar")
    n = len(op.outputs)
    rank = len(x.shape)
    axis = int(op.options.get("axis", 0))
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank:
        raise c.error(f"axis {op.options.get('axis', 0)} outside a {rank}-D input")
    num = int(op.options.get("num", n))
    if num != n or x.shape[axis] != n:
        raise c.error(f"num {num}, {n} outputs and input dim {x.shape[axis]} along axis {axis} must agree")
    piece = list(x.shape[:axis]) + list(x.shape[axis + 1:])
    for k in range(n):
        y = c.output(k)
        if list(y.shape) != piece or y.dtype != x.dtype:
            raise c.error(f"output {k} ({y.type_name or y.dtype}{list(y.shape)}) differs from "
                          f"{x.type_name or x.dtype}{piece}")
    axis, words = _pack_words(c, piece, x, axis, n)
    op.params = {"words": words, "axis": axis}
    op.macs = 0
    op.scratch_bytes = 0


@register("BROADCAST_TO", code=223)
def prepare_broadcast_to(c):
    """BROADCAST_TO: int8 / int16 / int32 input broadcast to a constant shape (numpy rules, rank <= 6)."""
    x, y = c.tensor(0, "input"), c.output()
    c.dtype(x, "input", _DATA_TYPES)
    if y.dtype != x.dtype:
        raise c.error(f"output type {y.type_name or y.dtype} differs from the input type {x.type_name or x.dtype}")
    s = c.tensor(1, "shape")
    c.constant(s, "shape")
    if s.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise c.error(f"shape (tensor {s.index}) must be int32 or int64, is {s.type_name or s.dtype}")
    shape = [int(v) for v in np.asarray(s.data).ravel()]
    rank = len(shape)
    if not 1 <= rank <= MAX_RANK:
        raise Unsupported(f"output rank {rank}, BROADCAST_TO supports 1..{MAX_RANK}")
    if len(x.shape) > rank:
        raise c.error(f"input rank {len(x.shape)} exceeds the target shape {shape}'s")
    if min(shape) < 1 or min([int(d) for d in x.shape] or [1]) < 1:
        raise c.error(f"empty shape {shape} or input {list(x.shape)}")
    if list(y.shape) != shape:
        raise c.error(f"output shape {list(y.shape)} differs from the target shape {shape}")
    xin = [1] * (rank - len(x.shape)) + [int(d) for d in x.shape]
    strides, step = [0] * rank, 1
    for k in range(rank - 1, -1, -1):
        if xin[k] != shape[k] and xin[k] != 1:
            raise c.error(f"input shape {list(x.shape)} does not broadcast to {shape} (axis {k}: {xin[k]} vs {shape[k]})")
        strides[k] = step if xin[k] != 1 else 0
        step *= xin[k]
    c.op.params = {"words": [rank, *shape, *strides], "c_inputs": [0], "shape": shape}
    c.op.macs = 0
    c.op.scratch_bytes = 0


CONSTRAINTS = {
    "BROADCAST_TO": "int8 / int16 / int32; constant shape (int32 / int64), output rank 1-6; numpy broadcasting; "
                    "raw copy",
    "PACK": "int8 / int16 / int32; inputs of one shape and type; any axis; raw copy (constant PACKs are folded)",
    "UNPACK": "int8 / int16 / int32; any axis; one output per slice; raw copy",
    "REVERSE_V2": "int8 / int16 / int32; rank 1-6; constant int32 axes, contiguous once sorted (negative allowed); "
                  "raw copy",
}


def float_reference(graph, op, inputs):
    """The real (float64) output: the same reversal of the dequantized values."""
    x = inputs[0]
    if op.type == "PACK":
        return np.stack(list(inputs), axis=op.params["axis"])
    if op.type == "UNPACK":
        return np.take(x, 0, axis=op.params["axis"])
    if op.type == "BROADCAST_TO":
        return np.broadcast_to(x, tuple(op.params["shape"])).copy()
    if op.type == "REVERSE_V2":
        return np.flip(x, axis=tuple(op.params["axes"])) if op.params["axes"] else x.copy()
    from pyembed.errors import UnsupportedError
    raise UnsupportedError(f"float reference: operator {op.index} ({op.type}) is not in pyembed.model.ops.batch3")


def float_reference_extra(graph, op, inputs):
    """UNPACK's outputs after the first."""
    if op.type != "UNPACK":
        return ()
    return [np.take(inputs[0], k, axis=op.params["axis"]) for k in range(1, len(op.outputs))]
