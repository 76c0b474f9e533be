"""GATHER with batch_dims > 0 (csrc/include/pyembed/pe_gather.h), as TFLite
Micro computes it: input dims [batch..., outer..., axis, inner...],
positions [batch..., coords...], output [batch..., outer..., coords...,
inner...]. pyembed.model.ops.data's GATHER hands batched gathers here; the
operator keeps its type and runs as the "GATHER@batched" variant (code 111).
"""
import math

import numpy as np

from pyembed.model.ops.registry import register

INPUT_TYPES = (np.int8, np.int16, np.int32)


@register("GATHER@batched", code=111, c_name="PE_GOP_GATHER_BATCHED")
def prepare_gather_batched(c):
    """Batched GATHER: int8 / int16 / int32 input, int32 positions."""
    op = c.op
    x, idx, y = c.tensor(0, "input"), c.tensor(1, "positions"), c.output()
    c.dtype(x, "input", INPUT_TYPES)
    c.dtype(idx, "positions", (np.int32,))
    if y.dtype != x.dtype:
        raise c.error(f"output type {y.dtype} differs from the input type {x.dtype}")
    if x.dtype == np.int8 and x.is_quantized and y.is_quantized:
        if (np.float32(x.scale[0]), c.qparams(x, "input")[1]) != (np.float32(y.scale[0]), c.qparams(y, "output")[1]):
            raise c.error("input and output quantization differ (GATHER copies values)")
    rank, irank = len(x.shape), len(idx.shape)
    axis = int(op.options.get("axis", 0))
    axis = axis + rank if axis < 0 else axis
    bd = int(op.options.get("batch_dims", 0))
    bd = bd + irank if bd < 0 else bd
    if not 0 <= axis < rank:
        raise c.error(f"axis {op.options.get('axis')} outside a {rank}-D input")
    if not (0 <= bd < rank and bd <= irank and bd <= axis):
        raise c.error(f"batch_dims {op.options.get('batch_dims')} must lie in [0, min(axis, rank(positions))]")
    if tuple(x.shape[:bd]) != tuple(idx.shape[:bd]):
        raise c.error(f"the first {bd} dims of input {list(x.shape)} and positions {list(idx.shape)} differ")
    want = list(x.shape[:axis]) + list(idx.shape[bd:]) + list(x.shape[axis + 1:])
    if list(y.shape) != want:
        raise c.error(f"output shape {list(y.shape)} differs from the gathered shape {want}")
    batch = math.prod(int(d) for d in x.shape[:bd])
    outer = math.prod(int(d) for d in x.shape[bd:axis])
    inner = math.prod(int(d) for d in x.shape[axis + 1:])
    coords = math.prod(int(d) for d in idx.shape[bd:])
    if min(batch, outer, inner, coords, int(x.shape[axis])) < 1:
        raise c.error("empty input or positions")
    if idx.is_constant:
        bad = [int(v) for v in np.asarray(idx.data).ravel() if not 0 <= v < x.shape[axis]]
        if bad:
            raise c.error(f"positions {bad[:5]} outside [0, {x.shape[axis]})")
    op.params = {"variant": "GATHER@batched", "axis": axis, "batch_dims": bd, "c_inputs": [0, 1],
                 "words": [batch, outer, int(x.shape[axis]), inner, coords]}
    op.macs = int(y.size)
    op.scratch_bytes = 0


def gather_batched_reference(x, idx, axis, batch_dims):
    """numpy reference of the batched gather (any dtype)."""
    x, idx = np.asarray(x), np.asarray(idx).astype(np.int64)
    bshape = x.shape[:batch_dims]
    batch = math.prod(bshape)
    outer = math.prod(x.shape[batch_dims:axis])
    inner = math.prod(x.shape[axis + 1:])
    xa = x.reshape(batch, outer, x.shape[axis], inner)
    ia = idx.reshape(batch, -1)
    out = np.stack([xa[b][:, ia[b], :] for b in range(batch)])
    return out.reshape(tuple(x.shape[:axis]) + tuple(idx.shape[batch_dims:]) + tuple(x.shape[axis + 1:]))
