"""Issue #30's third batch of TFLite Micro operators (csrc/include/pyembed/pe_batch3.h).

==========================  =========================================================
REVERSE_V2 (220)            rank, in dims[rank], flip[rank] (1: the axis is reversed)
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


CONSTRAINTS = {
    "REVERSE_V2": "int8 / int16 / int32; rank 1-6; constant int32 axes, contiguous once sorted (negative allowed); "
                  "raw copy",
}


def float_reference(graph, op, inputs):
    """The real (float64) output: the same reversal of the dequantized values."""
    x = inputs[0]
    if op.type == "REVERSE_V2":
        return np.flip(x, axis=tuple(op.params["axes"])) if op.params["axes"] else x.copy()
    from pyembed.errors import UnsupportedError
    raise UnsupportedError(f"float reference: operator {op.index} ({op.type}) is not in pyembed.model.ops.batch3")
