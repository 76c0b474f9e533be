"""Issue #30's fourth batch of TFLite Micro operators, data movement (csrc/include/pyembed/pe_batch4.h).

===============================  =====================================================
FILL (224)                       count (the scalar value repeated; constant dims folded)
ZEROS_LIKE (225)                 count
SHAPE (226)                      rank, dims[rank] (the input's static shape)
BROADCAST_ARGS (227)             na, nb, n_out (the shape vectors are read at run time)
SPACE_TO_BATCH_ND (228),         space b, h, w, depth, block h, block w, pad / crop top,
BATCH_TO_SPACE_ND (229)          left, batch b, h, w, pad byte (0 for BATCH_TO_SPACE_ND)
GATHER_ND (230)                  n_slices, nd, slice_size, params_count, strides[nd]
DYNAMIC_UPDATE_SLICE (231)       rank, operand dims[rank], update dims[rank]
===============================  =====================================================

(the pe_graph_op_type codes in parentheses; 224-239 are this batch's range).
Every operator copies raw elements in the types TFLite Micro accepts for it
(checked against the tflite-micro interpreter): constant operands (FILL's
dims, the block shapes, paddings and crops) are folded into the words, so the
C runner receives only the data tensors.

Constant FILL / SHAPE / ... feeding shape inputs are still folded at import
(pyembed.model.fold); these runners take what folding cannot: a FILL value,
a ZEROS_LIKE input or BROADCAST_ARGS shapes that are activations, a SHAPE
whose output is a graph output.
"""
import numpy as np

from pyembed.model.ops.base import Unsupported
from pyembed.model.ops.registry import register

MAX_RANK = 6  # PE_BATCH4_MAX_RANK
_FILL_TYPES = (np.int8, np.int32, np.float32)           # TFLM's FILL values
_ZEROS_TYPES = (np.int8, np.int32, np.float32)          # TFLM's ZEROS_LIKE (and int64, which pyembed lacks)
_SPACE_TYPES = (np.int8, np.float32)                    # TFLM's SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND
_GATHER_TYPES = (np.int8, np.float32)                   # TFLM's GATHER_ND params
_DUS_TYPES = (np.int8, np.int16, np.int32, np.float32)  # TFLM's DYNAMIC_UPDATE_SLICE
_I32 = np.dtype(np.int32)


def _name(t):
    return t.type_name or t.dtype


def _same_type(c, x, y, what="input"):
    if y.dtype != x.dtype:
        raise c.error(f"output type {_name(y)} differs from the {what} type {_name(x)}")


def _size(shape):
    return int(np.prod([int(d) for d in shape], dtype=np.int64))


def _int_vector(c, k, what, n=None):
    """The values of constant int32 / int64 input k."""
    t = c.tensor(k, what)
    c.constant(t, what)
    if t.dtype not in (_I32, np.dtype(np.int64)):
        raise c.error(f"{what} (tensor {t.index}) must be int32 or int64, is {_name(t)}")
    v = [int(a) for a in np.asarray(t.data).ravel()]
    if n is not None and len(v) != n:
        raise c.error(f"{what} has {len(v)} values, expected {n}")
    return v


def _done(c, words, **extra):
    c.op.params = {"words": [int(w) for w in words], **extra}
    c.op.macs = 0
    c.op.scratch_bytes = 0


@register("FILL", code=224)
def prepare_fill(c):
    """FILL at run time: a scalar int8 / int32 / float32 value (e.g. a model input) repeated over constant dims."""
    dims = _int_vector(c, 0, "dims")
    v, y = c.tensor(1, "value"), c.output()
    c.dtype(v, "value", _FILL_TYPES)
    _same_type(c, v, y, "value")
    if len(v.shape) != 0 and _size(v.shape) != 1:
        raise c.error(f"value must be a scalar, has shape {list(v.shape)}")
    if list(y.shape) != dims:
        raise c.error(f"output shape {list(y.shape)} differs from dims {dims}")
    n = _size(dims)
    if min(dims or [1]) < 1 or n >= 1 << 31:
        raise c.error(f"empty or oversized dims {dims}")
    _done(c, [n], c_inputs=[1])


@register("ZEROS_LIKE", code=225)
def prepare_zeros_like(c):
    """ZEROS_LIKE at run time: int8 / int32 / float32 zeros (raw 0, whatever the zero point) of the input's shape."""
    x, y = c.tensor(0, "input"), c.output()
    c.dtype(x, "input", _ZEROS_TYPES)
    _same_type(c, x, y)
    if list(y.shape) != list(x.shape):
        raise c.error(f"output shape {list(y.shape)} differs from the input shape {list(x.shape)}")
    n = _size(x.shape)
    if n < 1 or n >= 1 << 31:
        raise c.error(f"empty or oversized input {list(x.shape)}")
    _done(c, [n], c_inputs=[0])


@register("SHAPE", code=226)
def prepare_shape(c):
    """SHAPE at run time (when its output is a graph output, so not folded): the input's static shape as int32."""
    x, y = c.tensor(0, "input"), c.output()
    if y.dtype != _I32:
        raise Unsupported(f"output is {_name(y)}, only int32 is supported (TFLite Micro refuses int64)")
    rank = len(x.shape)
    if not 1 <= rank <= MAX_RANK:
        raise Unsupported(f"input has rank {rank}, SHAPE supports 1..{MAX_RANK}")
    if _size(y.shape) != rank:
        raise c.error(f"output shape {list(y.shape)} does not hold the input's {rank} dims")
    _done(c, [rank, *[int(d) for d in x.shape]], c_inputs=[0], dims=[int(d) for d in x.shape])


@register("BROADCAST_ARGS", code=227)
def prepare_broadcast_args(c):
    """BROADCAST_ARGS at run time: the broadcast shape of two int32 shape vectors."""
    a, b, y = c.tensor(0, "shape 1"), c.tensor(1, "shape 2"), c.output()
    for t, what in ((a, "shape 1"), (b, "shape 2"), (y, "output")):
        c.dtype(t, what, (np.int32,))
        if len(t.shape) != 1:
            raise c.error(f"{what} must be 1-D, has shape {list(t.shape)}")
    na, nb = int(a.shape[0]), int(b.shape[0])
    if int(y.shape[0]) != max(na, nb) or max(na, nb) < 1:
        raise c.error(f"output has {int(y.shape[0])} entries, expected max({na}, {nb})")
    _done(c, [na, nb, max(na, nb)])


def _space_geom(c, space_shape, batch_shape, block, pads, what):
    """[space b, h, w, depth, bh, bw, top, left, batch b, h, w] after TFLM's 3-D -> 4-D extension,
    checked as TFLM's output shape computation."""
    rank = len(space_shape)
    if rank not in (3, 4):
        raise Unsupported(f"input has rank {len(space_shape)}, TFLite Micro supports 3-D and 4-D")
    if len(batch_shape) != rank:
        raise c.error(f"input and output ranks differ ({list(space_shape)}, {list(batch_shape)})")
    s = [int(d) for d in space_shape]
    o = [int(d) for d in batch_shape]
    nsp = rank - 2
    if len(block) != nsp or len(pads) != 2 * nsp:
        raise c.error(f"block_shape {block} and {what} {pads} must cover the {nsp} spatial dims")
    if min(block) < 1 or min(pads) < 0:
        raise c.error(f"block_shape {block} must be >= 1 and {what} {pads} >= 0")
    if rank == 3:
        s, o = [s[0], s[1], 1, s[2]], [o[0], o[1], 1, o[2]]
        block, pads = [block[0], 1], [pads[0], pads[1], 0, 0]
    if min(s) < 1 or min(o) < 1:
        raise c.error(f"empty tensor {list(space_shape)} / {list(batch_shape)}")
    if max(_size(s), _size(o)) >= 1 << 31:
        raise c.error("oversized tensors")
    return s, o, block, pads


@register("SPACE_TO_BATCH_ND", code=228)
def prepare_space_to_batch_nd(c):
    """SPACE_TO_BATCH_ND: int8 / float32, 3-D or 4-D, constant block shape and paddings; padding is real 0."""
    x, y = c.tensor(0, "input"), c.output()
    c.dtype(x, "input", _SPACE_TYPES)
    _same_type(c, x, y)
    block = _int_vector(c, 1, "block_shape")
    pads = _int_vector(c, 2, "paddings")
    s, o, block, pads = _space_geom(c, x.shape, y.shape, block, pads, "paddings")
    want = [s[0] * block[0] * block[1], (s[1] + pads[0] + pads[1]) // block[0],
            (s[2] + pads[2] + pads[3]) // block[1], s[3]]
    if (s[1] + pads[0] + pads[1]) % block[0] or (s[2] + pads[2] + pads[3]) % block[1]:
        raise c.error(f"padded spatial dims of {list(x.shape)} with paddings {pads} are not multiples of the "
                      f"block {block}")
    if o != want:
        raise c.error(f"output shape {list(y.shape)} differs from {want if len(x.shape) == 4 else want[:2] + want[3:]}")
    pad = 0
    if x.dtype == np.int8 and y.is_quantized:
        pad = int(c.qparams(y, "output")[1]) & 0xff   # the output's real 0 (LiteRT's pad value)
    _done(c, [*s, *block, pads[0], pads[2], *o[:3], pad], c_inputs=[0], block=block, pads=pads)


@register("BATCH_TO_SPACE_ND", code=229)
def prepare_batch_to_space_nd(c):
    """BATCH_TO_SPACE_ND: int8 / float32, 3-D or 4-D, constant block shape and crops."""
    x, y = c.tensor(0, "input"), c.output()
    c.dtype(x, "input", _SPACE_TYPES)
    _same_type(c, x, y)
    block = _int_vector(c, 1, "block_shape")
    crops = _int_vector(c, 2, "crops")
    s, o, block, crops = _space_geom(c, y.shape, x.shape, block, crops, "crops")
    if o[0] % (block[0] * block[1]):
        raise c.error(f"input batch {o[0]} is not a multiple of the block {block}")
    want = [o[0] // (block[0] * block[1]), o[1] * block[0] - crops[0] - crops[1],
            o[2] * block[1] - crops[2] - crops[3], o[3]]
    if s != want:
        raise c.error(f"output shape {list(y.shape)} differs from {want if len(x.shape) == 4 else want[:2] + want[3:]}")
    _done(c, [*s, *block, crops[0], crops[2], *o[:3], 0], c_inputs=[0], block=block, crops=crops)


@register("GATHER_ND", code=230)
def prepare_gather_nd(c):
    """GATHER_ND: int8 / float32 params, int32 indices (run-time data; an index past the params is an error)."""
    p, idx, y = c.tensor(0, "params"), c.tensor(1, "indices"), c.output()
    c.dtype(p, "params", _GATHER_TYPES)
    c.dtype(idx, "indices", (np.int32,))
    _same_type(c, p, y, "params")
    if not 1 <= len(p.shape) <= MAX_RANK or len(idx.shape) < 1:
        raise Unsupported(f"params of rank {len(p.shape)} (1..{MAX_RANK}) or scalar indices")
    nd = int(idx.shape[-1])
    if not 1 <= nd <= len(p.shape):
        raise c.error(f"indices' last dim {nd} must be 1..{len(p.shape)} (the params' rank)")
    want = [int(d) for d in idx.shape[:-1]] + [int(d) for d in p.shape[nd:]]
    if [int(d) for d in y.shape] != want:
        raise c.error(f"output shape {list(y.shape)} differs from {want}")
    n_slices, slice_size, count = _size(idx.shape[:-1]), _size(p.shape[nd:]), _size(p.shape)
    if min(n_slices, slice_size) < 1 or max(count, n_slices * nd, n_slices * slice_size) >= 1 << 31:
        raise c.error(f"empty or oversized params {list(p.shape)} / indices {list(idx.shape)}")
    strides = [_size(p.shape[j + 1:]) for j in range(nd)]
    _done(c, [n_slices, nd, slice_size, count, *strides])


@register("DYNAMIC_UPDATE_SLICE", code=231)
def prepare_dynamic_update_slice(c):
    """DYNAMIC_UPDATE_SLICE: int8 / int16 / int32 / float32 operand and update, int32 start indices (clamped)."""
    x, u, s, y = c.tensor(0, "operand"), c.tensor(1, "update"), c.tensor(2, "start indices"), c.output()
    c.dtype(x, "operand", _DUS_TYPES)
    c.dtype(s, "start indices", (np.int32,))
    if u.dtype != x.dtype:
        raise c.error(f"update type {_name(u)} differs from the operand type {_name(x)}")
    _same_type(c, x, y, "operand")
    rank = len(x.shape)
    if not 1 <= rank <= MAX_RANK:
        raise Unsupported(f"operand has rank {rank}, DYNAMIC_UPDATE_SLICE supports 1..{MAX_RANK}")
    if len(u.shape) != rank or list(s.shape) != [rank] or list(y.shape) != list(x.shape):
        raise c.error(f"update {list(u.shape)}, start indices {list(s.shape)} and output {list(y.shape)} "
                      f"must match the rank-{rank} operand {list(x.shape)}")
    dims, udims = [int(d) for d in x.shape], [int(d) for d in u.shape]
    if min(udims) < 1 or any(a > b for a, b in zip(udims, dims)) or _size(dims) >= 1 << 31:
        raise c.error(f"update {udims} must be non-empty and fit in the operand {dims}")
    _done(c, [rank, *dims, *udims])


CONSTRAINTS = {
    "FILL": "int8 / int32 / float32 scalar value (at run time), constant int32 / int64 dims; raw copy",
    "ZEROS_LIKE": "int8 / int32 / float32; raw zeros",
    "SHAPE": "any input type; int32 output, rank 1-6 (folded unless its output is a graph output)",
    "BROADCAST_ARGS": "int32 shape vectors at run time; incompatible shapes are an error status",
    "SPACE_TO_BATCH_ND": "int8 / float32; 3-D or 4-D; constant block shape and paddings; pads with real 0 "
                         "(the output zero point)",
    "BATCH_TO_SPACE_ND": "int8 / float32; 3-D or 4-D; constant block shape and crops; raw copy",
    "GATHER_ND": "int8 / float32 params, int32 indices (run time; out of range: error status, as TFLM)",
    "DYNAMIC_UPDATE_SLICE": "int8 / int16 / int32 / float32, int32 start indices (run time, clamped as TFLM); "
                            "rank 1-6",
}


# -- float64 references ----------------------------------------------------------------------

def space_to_batch_ref(x, block, pads, pad_value=0.0):
    """SPACE_TO_BATCH_ND of a 4-D array (block [bh, bw], pads [top, bottom, left, right])."""
    bh, bw = block
    p = np.pad(x, ((0, 0), (pads[0], pads[1]), (pads[2], pads[3]), (0, 0)), constant_values=pad_value)
    b, h, w, d = p.shape
    return p.reshape(b, h // bh, bh, w // bw, bw, d).transpose(2, 4, 0, 1, 3, 5).reshape(bh * bw * b, h // bh,
                                                                                        w // bw, d)


def batch_to_space_ref(x, block, crops):
    """BATCH_TO_SPACE_ND of a 4-D array (block [bh, bw], crops [top, bottom, left, right])."""
    bh, bw = block
    n, h, w, d = x.shape
    y = x.reshape(bh, bw, n // (bh * bw), h, w, d).transpose(2, 3, 0, 4, 1, 5).reshape(n // (bh * bw), h * bh,
                                                                                      w * bw, d)
    return y[:, crops[0]:h * bh - crops[1], crops[2]:w * bw - crops[3], :]


def gather_nd_ref(params, indices):
    """GATHER_ND with TFLM's flat position check (IndexError past the params)."""
    nd = indices.shape[-1]
    flat = params.reshape(-1)
    strides = [int(np.prod(params.shape[j + 1:], dtype=np.int64)) for j in range(nd)]
    size = int(np.prod(params.shape[nd:], dtype=np.int64))
    rows = []
    for ix in indices.reshape(-1, nd).astype(np.int64):
        start = int(np.dot(ix, strides))
        if start < 0 or start + size > flat.size:
            raise IndexError(f"gather_nd index {list(ix)} out of bounds")
        rows.append(flat[start:start + size])
    return np.stack(rows).reshape(tuple(indices.shape[:-1]) + tuple(params.shape[nd:]))


def dynamic_update_slice_ref(x, u, start):
    y = np.array(x, copy=True)
    st = [min(max(0, int(s)), int(d) - int(e)) for s, d, e in zip(start, x.shape, u.shape)]
    y[tuple(slice(a, a + int(e)) for a, e in zip(st, u.shape))] = u
    return y


def _to4(a):
    return a.reshape(a.shape[0], a.shape[1], 1, a.shape[2]) if a.ndim == 3 else a


def float_reference(graph, op, inputs):
    """The real (float64) output: the same data movement of the dequantized values."""
    t = op.type
    shape = tuple(graph.tensors[op.outputs[0]].shape)
    if t == "FILL":
        return np.full(shape, np.asarray(inputs[1]).reshape(()))
    if t == "ZEROS_LIKE":
        return np.zeros(shape)
    if t == "SHAPE":
        return np.asarray(op.params["dims"], dtype=np.float64)
    if t == "BROADCAST_ARGS":
        a, b = (tuple(int(v) for v in np.asarray(x).ravel()) for x in inputs[:2])
        return np.asarray(np.broadcast_shapes(a, b), dtype=np.float64)
    if t == "SPACE_TO_BATCH_ND":
        return space_to_batch_ref(_to4(inputs[0]), op.params["block"], op.params["pads"]).reshape(shape)
    if t == "BATCH_TO_SPACE_ND":
        return batch_to_space_ref(_to4(inputs[0]), op.params["block"], op.params["crops"]).reshape(shape)
    if t == "GATHER_ND":
        return gather_nd_ref(np.asarray(inputs[0]), np.rint(np.asarray(inputs[1])).astype(np.int64))
    if t == "DYNAMIC_UPDATE_SLICE":
        return dynamic_update_slice_ref(inputs[0], inputs[1], np.rint(np.asarray(inputs[2]).ravel()))
    from pyembed.errors import UnsupportedError
    raise UnsupportedError(f"float reference: operator {op.index} ({t}) is not in pyembed.model.ops.batch4")
