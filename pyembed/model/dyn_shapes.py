"""Placeholder shapes of dynamic-batch models, settled after constant folding
(issue #30).

A Keras model with a dynamic batch (``keras.Input(shape)``) converts to a
graph whose tensors have a -1 in their shape signature; the shapes stored
beside the signatures are what the converter had at hand (1 for every
unknown dimension), and RESHAPE's new shape is computed at run time from
SHAPE -> GATHER -> REDUCE_PROD -> PACK. Once pyembed.model.fold has folded
that arithmetic (the input shapes are static), a RESHAPE can name a shape
that its stored output shape does not have: ``[1, 16, 8] -> [1, 1]`` where
the real target is ``[16, 8]``. :func:`settle_dynamic_shapes` walks the
operators in order and, for an output whose signature is dynamic, replaces
the stored shape by the one its operator computes when they differ:

* RESHAPE: the constant new shape (input 1 after folding, else the
  new_shape option), -1 resolved from the input's size;
* FULLY_CONNECTED: (input size / input depth, units), or the input's
  leading dimensions with keep_num_dims;
* element-wise operators of one input (QUANTIZE, activations, SOFTMAX,
  ...): the input's shape; of two inputs (ADD, MUL, ...): their broadcast.

Only the signature's -1 dimensions may change: a settled shape has the
signature's rank and its fixed dimensions, which the stored shape must have
too (otherwise the file is inconsistent and the operator's preparation
reports it). Other operators keep their stored shapes (their preparation
then checks them as usual). Tensors whose signature is static are never
changed.
"""
import math

import numpy as np

UNARY_SAME = ("QUANTIZE", "DEQUANTIZE", "RELU", "RELU6", "RELU_N1_TO_1", "LOGISTIC", "TANH", "GELU", "ELU",
              "HARD_SWISH", "LEAKY_RELU", "SOFTMAX", "LOG_SOFTMAX", "NEG", "ABS", "EXP", "LOG", "SQRT", "RSQRT",
              "SQUARE", "SIN", "COS", "FLOOR", "CEIL", "ROUND", "CAST", "PRELU")
BINARY = ("ADD", "SUB", "MUL", "DIV", "SQUARED_DIFFERENCE", "MAXIMUM", "MINIMUM", "POW")


def _reshape_target(graph, op, x):
    target = None
    if len(op.inputs) > 1 and op.inputs[1] >= 0 and graph.tensors[op.inputs[1]].is_constant:
        target = [int(v) for v in np.asarray(graph.tensors[op.inputs[1]].data).ravel()]
    elif op.options.get("new_shape"):
        target = [int(v) for v in op.options["new_shape"]]
    if target is None or sum(1 for d in target if d == -1) > 1 or any(d < -1 for d in target):
        return None
    known = math.prod(d for d in target if d != -1)
    if -1 in target:
        if known == 0 or x.size % known:
            return None
        target = [x.size // known if d == -1 else d for d in target]
    return tuple(target) if math.prod(target) == x.size else None


def _inferred(graph, op):
    ins = [graph.tensors[i] if i >= 0 else None for i in op.inputs]
    if not ins or ins[0] is None:
        return None
    x = ins[0]
    if op.type == "RESHAPE":
        return _reshape_target(graph, op, x)
    if op.type == "FULLY_CONNECTED" and len(ins) > 1 and ins[1] is not None and len(ins[1].shape) == 2:
        units, depth = (int(d) for d in ins[1].shape)
        if depth < 1 or not x.shape or x.size % depth:
            return None
        if op.options.get("keep_num_dims"):
            return tuple(x.shape[:-1]) + (units,) if x.shape[-1] == depth else None
        return (x.size // depth, units)
    if op.type in UNARY_SAME and len(op.outputs) == 1:
        return tuple(x.shape)
    if op.type in BINARY and len(ins) == 2 and ins[1] is not None:
        try:
            return tuple(np.broadcast_shapes(tuple(x.shape), tuple(ins[1].shape)))
        except ValueError:
            return None
    return None


def _fits(signature, stored, want):
    """want differs from stored only where the signature has -1."""
    if len(signature) != len(stored) or len(signature) != len(want):
        return False
    return all(s < 0 or (s == a == b) for s, a, b in zip(signature, stored, want))


def settle_dynamic_shapes(graph, dynamic):
    """Settle the placeholder shapes of the tensors in dynamic ({tensor
    index: shape signature with a -1}), in place. Returns [(tensor index,
    stored shape, settled shape)]."""
    changed = []
    if not dynamic:
        return changed
    for op in graph.operators:
        if len(op.outputs) != 1 or op.outputs[0] < 0 or op.outputs[0] not in dynamic:
            continue
        y = graph.tensors[op.outputs[0]]
        if y.is_constant:
            continue
        want = _inferred(graph, op)
        if want is None or tuple(want) == tuple(y.shape) or not _fits(dynamic[y.index], y.shape, want):
            continue
        changed.append((y.index, tuple(y.shape), tuple(want)))
        y.shape = tuple(want)
    return changed
