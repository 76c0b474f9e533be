"""Issue #30's sixth batch of TFLite Micro operators (csrc/include/pyembed/pe_batch6.h).

==========================  =========================================================
REDUCE_ALL (247)            axis mask (bit d: axis d reduced), rank, the input dims
==========================  =========================================================

(the pe_graph_op_type codes in parentheses; 245-255 are this batch's range).
REDUCE_ALL is TFLM's logical AND over constant axes of a bool tensor (keep_dims
or not), with REDUCE_MAX's shape rules (pyembed.model.ops.logic).
SVDF and CUSTOM:CIRCULAR_BUFFER are not in this module yet (issue #30).
"""
import numpy as np

from pyembed.model.ops.base import Unsupported
from pyembed.model.ops.logic import reduced_axes
from pyembed.model.ops.registry import register

CODES = {"REDUCE_ALL": 247}


def _require_bool(t, what):
    if t.dtype is None or np.dtype(t.dtype) != np.bool_:
        name = np.dtype(t.dtype).name if t.dtype is not None else (t.type_name or "?").lower()
        raise Unsupported(f"{what} is {name}, only bool is supported (TFLM's REDUCE_ALL)")


@register("REDUCE_ALL", code=CODES["REDUCE_ALL"])
def prepare_reduce_all(c):
    x, y = c.tensor(0, "input"), c.output()
    _require_bool(x, "input")
    _require_bool(y, "output")
    a = c.tensor(1, "axis")
    if a.data is None:
        raise Unsupported("REDUCE_ALL with a non-constant axis tensor")
    if np.dtype(a.dtype) != np.dtype(np.int32):
        raise Unsupported(f"axis tensor is {np.dtype(a.dtype).name}, only int32 is supported (as TFLM)")
    axes = [int(v) for v in np.asarray(a.data).ravel()]
    rank = len(x.shape)
    resolved, keep = reduced_axes(c, "REDUCE_ALL", x, y, axes)
    dims = [int(d) for d in x.shape]
    if min(dims) < 1 or int(np.prod(dims, dtype=np.int64)) >= 1 << 31:
        raise c.error(f"empty or oversized input {dims}")
    c.op.params = {"words": [sum(1 << d for d in resolved), rank] + dims, "c_inputs": [0],
                   "axes": sorted(resolved)}
    c.op.macs = int(np.prod(dims))
    c.op.scratch_bytes = 0


CONSTRAINTS = {
    "REDUCE_ALL": "bool; constant int32 axes; keep_dims; rank 1-6",
}


def float_reference(graph, op, inputs):
    """The real (float64, 0.0 / 1.0) output."""
    if op.type == "REDUCE_ALL":
        x = np.asarray(inputs[0]) != 0
        axes = tuple(op.params["axes"])
        y_shape = tuple(graph.tensors[op.outputs[0]].shape)
        return np.asarray(np.all(x, axis=axes) if axes else x).astype(np.float64).reshape(y_shape)
    from pyembed.errors import UnsupportedError
    raise UnsupportedError(f"float reference: operator {op.index} ({op.type}) is not in pyembed.model.ops.batch6")
