"""Constant folding at import: shape arithmetic never reaches the runtime.

Converters leave small integer computations in graphs: SHAPE of an
activation (its shape is static), then STRIDED_SLICE / PACK / CAST / FILL /
CONCATENATION / arithmetic on the result, ending in a shape input (RESHAPE's
new shape, FILL's dims, PAD's paddings, ...). :func:`fold_constants` walks the
operators in order and evaluates, with numpy, every operator that

* is SHAPE (only the static shape of its input is needed), or
* has only constant inputs, is one of the operators below, and either
  produces unquantized integers (int32 / int64 / bool: shape arithmetic) or
  feeds only shape inputs of other operators;

its outputs become constant tensors and the operator is removed (the
remaining operators are renumbered). Quantized data (int8 with a scale) is
never folded: its arithmetic is the runtime's business.
"""
import numpy as np

from pyembed.errors import ArgumentError, ModelError

# inputs that are shapes / axes / sizes, never data, per consumer type
SHAPE_INPUTS = {
    "RESHAPE": {1}, "FILL": {0}, "RESIZE_BILINEAR": {1}, "RESIZE_NEAREST_NEIGHBOR": {1}, "PAD": {1},
    "PADV2": {1}, "MIRROR_PAD": {1}, "STRIDED_SLICE": {1, 2, 3}, "SLICE": {1, 2}, "TRANSPOSE": {1},
    "EXPAND_DIMS": {1}, "SPLIT": {0}, "SPLIT_V": {1, 2}, "MEAN": {1}, "SUM": {1}, "REDUCE_MAX": {1},
    "REDUCE_MIN": {1}, "REDUCE_PROD": {1}, "BROADCAST_TO": {1}, "TILE": {1},
}

_INTEGER = (np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.bool_))


def _axis(a, rank):
    a = int(a)
    return a + rank if a < 0 else a


def _strided_slice(op, x, begin, end, strides):
    from pyembed.kernels.shape_ref import strided_slice, strided_slice_plan
    o = op.options
    plan = strided_slice_plan(x.shape, begin.ravel(), end.ravel(), strides.ravel(), o.get("begin_mask", 0),
                              o.get("end_mask", 0), o.get("ellipsis_mask", 0), o.get("new_axis_mask", 0),
                              o.get("shrink_axis_mask", 0), o.get("offset", False))
    return strided_slice(x, *plan)


def _eval(op, ins, out_tensors):
    """numpy value(s) of a foldable operator, or None if it is not foldable."""
    t = op.type
    o = op.options
    if t == "SHAPE":
        return None  # handled by the caller (needs only the input's static shape)
    if t == "PACK":
        return np.stack(ins, axis=_axis(o.get("axis", 0), ins[0].ndim + 1))
    if t in ("CAST", "RESHAPE", "SQUEEZE", "EXPAND_DIMS"):
        return ins[0].reshape(out_tensors[0].shape)  # cast happens when stored
    if t == "FILL":
        return np.full(tuple(int(d) for d in ins[0].ravel()), ins[1].reshape(()))
    if t == "STRIDED_SLICE":
        return _strided_slice(op, *ins[:4])
    if t == "SLICE":
        begin, size = (a.ravel().astype(np.int64) for a in ins[1:3])
        idx = tuple(slice(int(b), int(b) + (int(s) if s >= 0 else d - int(b)))
                    for b, s, d in zip(begin, size, ins[0].shape))
        return ins[0][idx]
    if t == "CONCATENATION":
        return np.concatenate(ins, axis=_axis(o.get("axis", 0), ins[0].ndim))
    if t == "GATHER":
        return np.take(ins[0], ins[1].astype(np.int64), axis=_axis(o.get("axis", 0), ins[0].ndim))
    if t == "TRANSPOSE":
        return np.transpose(ins[0], [int(p) for p in ins[1].ravel()])
    if t == "UNPACK":
        axis = _axis(o.get("axis", 0), ins[0].ndim)
        return [np.take(ins[0], i, axis=axis) for i in range(ins[0].shape[axis])]
    binary = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "FLOOR_DIV": np.floor_divide,
              "MAXIMUM": np.maximum, "MINIMUM": np.minimum}
    if t in binary and len(ins) == 2:
        if t == "FLOOR_DIV" and np.any(ins[1] == 0):
            return None
        return binary[t](ins[0], ins[1])
    if t == "REDUCE_PROD":
        axes = tuple(_axis(a, ins[0].ndim) for a in ins[1].ravel())
        return np.prod(ins[0], axis=axes, keepdims=bool(o.get("keep_dims", False)))
    if t == "RANGE":
        return np.arange(ins[0].reshape(()), ins[1].reshape(()), ins[2].reshape(()))
    return None


def _feeds_only_shapes(graph, tensor_index, consumers):
    uses = consumers.get(tensor_index, [])
    if not uses or tensor_index in graph.outputs:
        return False
    for op, k in uses:
        if k not in SHAPE_INPUTS.get(op.type, ()):
            return False
    return True


def fold_constants(graph, label):
    """Fold shape arithmetic in place; returns the folded operators' types."""
    consumers = {}
    for op in graph.operators:
        for k, t in enumerate(op.inputs):
            if t >= 0:
                consumers.setdefault(t, []).append((op, k))
    folded, keep = [], []
    for op in graph.operators:
        outs = [graph.tensors[t] for t in op.outputs if t >= 0]
        # graph inputs and outputs stay tensors the runtime reads and writes
        if not outs or any(t.is_quantized for t in outs) or any(t in graph.inputs or t in graph.outputs
                                                                 for t in op.outputs):
            keep.append(op)
            continue
        value = None
        if op.type == "SHAPE" and op.inputs and op.inputs[0] >= 0:
            value = np.asarray(graph.tensors[op.inputs[0]].shape, dtype=np.int64)
        else:
            ins = [graph.tensors[t] for t in op.inputs if t >= 0]
            integer_out = all(t.dtype in _INTEGER for t in outs)
            shapes_only = all(_feeds_only_shapes(graph, t, consumers) for t in op.outputs if t >= 0)
            if ins and all(t.is_constant for t in ins) and (integer_out or shapes_only):
                try:
                    value = _eval(op, [np.asarray(t.data) for t in ins], outs)
                except (ValueError, IndexError, TypeError, ArgumentError) as e:
                    raise ModelError(f"{label}: operator {op.index} ({op.type}) on constant inputs: {e}") from None
        if value is None:
            keep.append(op)
            continue
        values = value if isinstance(value, list) else [value]
        if len(values) != len(outs):
            keep.append(op)
            continue
        for t, v in zip(outs, values):
            v = np.asarray(v)
            if t.dtype is None or v.size != t.size:
                raise ModelError(f"{label}: operator {op.index} ({op.type}) on constant inputs gives shape "
                                 f"{list(v.shape)}, but its output tensor {t.index} ({t.name!r}) has shape "
                                 f"{list(t.shape)}")
            data = v.astype(t.dtype).reshape(t.shape)
            data.setflags(write=False)
            t.data = data
        folded.append(op.type)
    if folded:
        for i, op in enumerate(keep):
            op.index = i
        graph.operators = keep
    return folded
