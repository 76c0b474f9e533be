"""Preparation of the data movement operators (ops-data family): PAD, PADV2,
MIRROR_PAD, CONCATENATION, SPLIT, SPLIT_V, STRIDED_SLICE, SLICE, SQUEEZE,
EXPAND_DIMS, TRANSPOSE, GATHER, DEPTH_TO_SPACE, SPACE_TO_DEPTH,
RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR.

Each prepare function checks the operator the way TFLite Micro's Prepare
does (types, constant parameter tensors, shapes) and computes the int32
parameter words the C runner (csrc/src/kernels/shape/pe_shape_ops.c, pe_resize.c) decodes:

==========================  =========================================================
PAD (20), PADV2 (21)        rank, in dims[rank], before[rank], after[rank], value
MIRROR_PAD (22)             rank, in dims[rank], before[rank], after[rank], mode
CONCATENATION (23)          rank, axis, out dims[rank], then per input: extent
                            along axis, requantize (0/1), input offset, output
                            offset, multiplier, shift
SPLIT (24), SPLIT_V (25)    axis, rank, in dims[rank], extent of each output
STRIDED_SLICE (26),         rank, in dims[rank], begin[rank], stride[rank],
SLICE (27)                  count[rank]
TRANSPOSE (28)              rank, in dims[rank], perm[rank]
GATHER (29)                 rank, in dims[rank], axis (positions: input 1, int32)
DEPTH_TO_SPACE (30),        block
SPACE_TO_DEPTH (31)
RESIZE_NEAREST_NEIGHBOR(32) out h, out w, y source[out h], x source[out w]
RESIZE_BILINEAR (33)        align_corners, half_pixel_centers
SQUEEZE (34), EXPAND_DIMS   none: aliases, the output is the input's bytes
(35)
==========================  =========================================================

(the pe_graph_op_type codes in parentheses). Constant operands (paddings,
begin / end / strides, perm, size, axis) are folded into the words, so the C
runner receives only the data tensors ("c_inputs").
The N-D dims travel in the words because the runtime's tensor descriptor is
a 4-D NHWC view; the runner checks that their product matches the tensors'
element counts. SQUEEZE and EXPAND_DIMS are RESHAPEs (the importer aliases
their output to their input: no copy, no arena).
"""
import numpy as np

from pyembed.errors import ArgumentError
from pyembed.kernels.quant import quantize_multiplier
from pyembed.kernels.shape_ref import bilinear_supported, nearest_indices, strided_slice_plan
from pyembed.model.ops.base import Unsupported
from pyembed.model.ops.registry import register

OP_CODES = {"PAD": 20, "PADV2": 21, "MIRROR_PAD": 22, "CONCATENATION": 23, "SPLIT": 24, "SPLIT_V": 25,
            "STRIDED_SLICE": 26, "SLICE": 27, "TRANSPOSE": 28, "GATHER": 29, "DEPTH_TO_SPACE": 30,
            "SPACE_TO_DEPTH": 31, "RESIZE_NEAREST_NEIGHBOR": 32, "RESIZE_BILINEAR": 33, "SQUEEZE": 34,
            "EXPAND_DIMS": 35}
MAX_RANK = 6  # PE_SHAPE_MAX_RANK
_DATA_TYPES = (np.int8, np.int16, np.int32)
# PAD / PADV2, CONCATENATION and RESIZE_NEAREST_NEIGHBOR also move float32
# elements (TFLM registers them for float32; the C runners copy 4-byte
# elements as for int32, a PADV2 float value travels as its bit pattern)
_WITH_F32 = _DATA_TYPES + (np.float32,)


def _same_type(c, x, y):
    if x.dtype != y.dtype:
        raise c.error(f"input type {x.type_name or x.dtype} and output type {y.type_name or y.dtype} differ")


def _same_quant(c, x, y, what="input"):
    """Scale and zero point of x must be y's (TFLM checks this for PADV2's
    constant_values; its other data movement kernels copy bytes unchecked,
    and so does pyembed, to stay bit-exact with it)."""
    if x.dtype == np.int8 and x.is_quantized and y.is_quantized:
        xs, xz = c.qparams(x, what)
        ys, yz = c.qparams(y, "output")
        if xs != ys or xz != yz:
            raise c.error(f"{what} quantization (scale {float(xs)!r}, zero point {xz}) differs from the "
                          f"output's (scale {float(ys)!r}, zero point {yz}); this operator copies values")


def _const_ints(c, k, what, optional=False):
    t = c.tensor(k, what, optional=optional)
    if t is None:
        return None
    c.constant(t, what)
    if t.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise c.error(f"{what} (tensor {t.index}) must be int32 or int64, is {t.type_name or t.dtype}")
    return [int(v) for v in np.asarray(t.data).ravel()]


def _rank_ok(c, t, what, lo=1, hi=MAX_RANK):
    if not lo <= len(t.shape) <= hi:
        raise Unsupported(f"{what} has rank {len(t.shape)}, this operator supports {lo}..{hi}")


def _finish(c, kind, words, c_inputs=(0,), **extra):
    op = c.op
    op.params = {"words": [int(w) for w in words], "c_inputs": list(c_inputs), **extra}
    op.macs = 0
    op.scratch_bytes = 0


# -- PAD / PADV2 / MIRROR_PAD ---------------------------------------------------------

def _paddings(c, x, y):
    pads = _const_ints(c, 1, "paddings")
    rank = len(x.shape)
    if len(pads) != 2 * rank:
        raise c.error(f"paddings has {len(pads)} values, expected {2 * rank} (a (before, after) pair per axis)")
    before, after = pads[0::2], pads[1::2]
    if min(pads) < 0:
        raise c.error(f"negative padding {pads}")
    want = [d + b + a for d, b, a in zip(x.shape, before, after)]
    if list(y.shape) != want:
        raise c.error(f"output shape {list(y.shape)} differs from the padded shape {want}")
    return before, after


def prepare_pad(c):
    x, y = c.tensor(0, "input"), c.output()
    c.dtype(x, "input", _WITH_F32)
    _same_type(c, x, y)
    _rank_ok(c, x, "input", 1, 5)
    before, after = _paddings(c, x, y)
    value = 0
    cv = c.tensor(2, "constant_values", optional=True) if c.op.type == "PADV2" else None
    if cv is not None:
        c.constant(cv, "constant_values")
        if cv.dtype != x.dtype or cv.size != 1:
            raise c.error(f"constant_values must be one {x.dtype.name} value, is {cv.type_name}{list(cv.shape)}")
        value = np.asarray(cv.data).ravel()[:1]
        value = int(value.view(np.int32)[0] if x.dtype == np.float32 else value[0])
        if x.dtype == np.int8 and cv.is_quantized and y.is_quantized:
            _same_quant(c, cv, y, "constant_values")
    elif x.dtype == np.int8 and y.is_quantized:
        value = c.qparams(y, "output")[1]  # TFLM pads int8 with the output zero point
    rank = len(x.shape)
    _finish(c, c.op.type, [rank, *x.shape, *before, *after, value], pad_value=value)


def prepare_mirror_pad(c):
    x, y = c.tensor(0, "input"), c.output()
    c.dtype(x, "input", (np.int8,))
    _same_type(c, x, y)
    _rank_ok(c, x, "input")
    before, after = _paddings(c, x, y)
    mode = c.op.options.get("mode", "REFLECT")
    if mode not in ("REFLECT", "SYMMETRIC"):
        raise c.error(f"mirror pad mode {mode!r}, expected REFLECT or SYMMETRIC")
    sym = mode == "SYMMETRIC"
    for k, (d, b, a) in enumerate(zip(x.shape, before, after)):
        limit = d if sym else d - 1
        if b > limit or a > limit:
            raise c.error(f"{mode} padding ({b}, {a}) of axis {k} exceeds {limit} (the axis has {d} elements)")
    _finish(c, "MIRROR_PAD", [len(x.shape), *x.shape, *before, *after, int(sym)], mode=mode)


# -- CONCATENATION / SPLIT / SPLIT_V ----------------------------------------------------

def prepare_concatenation(c):
    op = c.op
    y = c.output()
    ins = [c.tensor(k, f"input {k}") for k in range(len(op.inputs))]
    if not ins:
        raise c.error("no inputs")
    c.dtype(y, "output", _WITH_F32)
    _rank_ok(c, y, "output")
    act = op.options.get("activation")
    if act is not None:
        raise Unsupported(f"fused activation {act} (TFLM's CONCATENATION accepts none)")
    rank = len(y.shape)
    axis = int(op.options.get("axis", 0))
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank:
        raise c.error(f"axis {op.options.get('axis')} outside a {rank}-D output")
    words = [rank, axis, *y.shape]
    total = 0
    requantized = 0
    for k, t in enumerate(ins):
        _same_type(c, t, y)
        if len(t.shape) != rank or any(a != b for i, (a, b) in enumerate(zip(t.shape, y.shape)) if i != axis):
            raise c.error(f"input {k} shape {list(t.shape)} does not match output {list(y.shape)} off axis {axis}")
        total += t.shape[axis]
        rq = [0, 0, 0, 0, 0]
        if y.dtype == np.int8 and y.is_quantized:
            xs, xz = c.qparams(t, f"input {k}")
            ys, yz = c.qparams(y, "output")
            if xs != ys or xz != yz:
                # TFLM refuses this; pyembed requantizes with TFLite's int8 QUANTIZE arithmetic
                m, s = quantize_multiplier(float(xs) / float(ys))
                rq = [1, -xz, yz, m, s]
                requantized += 1
        elif y.dtype == np.int16 and ((t.is_quantized and c.qparams(t, f"input {k}")[1] != 0)):
            raise c.error("int16 inputs must have zero point 0")
        words += [t.shape[axis], *rq]
    if total != y.shape[axis]:
        raise c.error(f"inputs add up to {total} along axis {axis}, output has {y.shape[axis]}")
    _finish(c, "CONCATENATION", words, c_inputs=range(len(ins)), axis=axis, requantized_inputs=requantized)
    op.macs = int(y.size) if requantized else 0


def _split_common(c, x, outs, axis, kind_sizes, data_input):
    rank = len(x.shape)
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank:
        raise c.error(f"axis outside a {rank}-D input")
    for k, t in enumerate(outs):
        _same_type(c, x, t)
        if len(t.shape) != rank or any(a != b for i, (a, b) in enumerate(zip(t.shape, x.shape)) if i != axis):
            raise c.error(f"output {k} shape {list(t.shape)} does not match input {list(x.shape)} off axis {axis}")
    sizes = [t.shape[axis] for t in outs]
    if kind_sizes is not None and list(kind_sizes) != sizes:
        raise c.error(f"size_splits {list(kind_sizes)} differ from the output extents {sizes}")
    if sum(sizes) != x.shape[axis]:
        raise c.error(f"outputs add up to {sum(sizes)} along axis {axis}, the input has {x.shape[axis]}")
    _finish(c, c.op.type, [axis, rank, *x.shape, *sizes], c_inputs=(data_input,), axis=axis)


def prepare_split(c):
    op = c.op
    axis = _const_ints(c, 0, "axis")
    x = c.tensor(1, "input")
    c.dtype(x, "input", _DATA_TYPES)
    _rank_ok(c, x, "input")
    if len(axis) != 1:
        raise c.error(f"axis must hold one value, holds {len(axis)}")
    outs = [c.output(k) for k in range(len(op.outputs))]
    if len({t.shape for t in outs}) > 1:
        raise c.error(f"SPLIT outputs must have one shape, have {[list(t.shape) for t in outs]}")
    _split_common(c, x, outs, axis[0], None, 1)


def prepare_split_v(c):
    op = c.op
    x = c.tensor(0, "input")
    c.dtype(x, "input", _DATA_TYPES)
    _rank_ok(c, x, "input")
    sizes = _const_ints(c, 1, "size_splits")
    axis = _const_ints(c, 2, "axis")
    if len(axis) != 1:
        raise c.error(f"axis must hold one value, holds {len(axis)}")
    outs = [c.output(k) for k in range(len(op.outputs))]
    if len(sizes) != len(outs):
        raise c.error(f"size_splits has {len(sizes)} entries for {len(outs)} outputs")
    ax = axis[0] + len(x.shape) if axis[0] < 0 else axis[0]
    if -1 in sizes and 0 <= ax < len(x.shape):
        rest = x.shape[ax] - sum(s for s in sizes if s != -1)
        sizes = [rest if s == -1 else s for s in sizes]
    _split_common(c, x, outs, axis[0], sizes, 0)


# -- STRIDED_SLICE / SLICE ------------------------------------------------------------

def _slice_words(c, x, y, begins, steps, counts, out_shape):
    if any(n == 0 for n in counts):
        raise Unsupported("an empty slice (zero elements)")
    if list(y.shape) != list(out_shape):
        raise c.error(f"output shape {list(y.shape)} differs from the slice's shape {list(out_shape)}")
    _same_type(c, x, y)
    rank = len(x.shape)
    _finish(c, c.op.type, [rank, *x.shape, *begins, *steps, *counts], begin=list(begins), stride=list(steps),
            count=list(counts))


def prepare_strided_slice(c):
    x, y = c.tensor(0, "input"), c.output()
    c.dtype(x, "input", _DATA_TYPES)
    _rank_ok(c, x, "input", 1, 5)
    begin, end, strides = (_const_ints(c, k, w) for k, w in ((1, "begin"), (2, "end"), (3, "strides")))
    o = c.op.options
    try:
        plan = strided_slice_plan(x.shape, begin, end, strides, o.get("begin_mask", 0), o.get("end_mask", 0),
                                  o.get("ellipsis_mask", 0), o.get("new_axis_mask", 0),
                                  o.get("shrink_axis_mask", 0), o.get("offset", False))
    except ArgumentError as e:
        raise c.error(str(e)) from None
    _slice_words(c, x, y, *plan)


def prepare_slice(c):
    x, y = c.tensor(0, "input"), c.output()
    c.dtype(x, "input", _DATA_TYPES)
    _rank_ok(c, x, "input", 1, 5)
    begin, size = _const_ints(c, 1, "begin"), _const_ints(c, 2, "size")
    rank = len(x.shape)
    if len(begin) != rank or len(size) != rank:
        raise c.error(f"begin {begin} and size {size} must have {rank} entries")
    counts = []
    for k, (b, s, d) in enumerate(zip(begin, size, x.shape)):
        n = d - b if s == -1 else s
        if b < 0 or n < 0 or b + n > d:
            raise c.error(f"axis {k}: begin {b} and size {s} outside a dimension of {d}")
        counts.append(n)
    _slice_words(c, x, y, begin, [1] * rank, counts, counts)


# -- SQUEEZE / EXPAND_DIMS (aliases) ---------------------------------------------------

def prepare_alias(c):
    """SQUEEZE / EXPAND_DIMS: a RESHAPE (same bytes, new shape)."""
    op = c.op
    x, y = c.tensor(0, "input"), c.output()
    if x.dtype is None or x.dtype != y.dtype:
        raise c.error(f"input type {x.type_name or x.dtype} and output type {y.type_name or y.dtype} differ")
    if x.size != y.size:
        raise c.error(f"input shape {list(x.shape)} and output shape {list(y.shape)} hold different counts")
    if op.type == "SQUEEZE":
        dims = [d + len(x.shape) if d < 0 else d for d in op.options.get("squeeze_dims", ())]
        keep = [s for i, s in enumerate(x.shape) if not ((i in dims) if dims else s == 1)]
        if any(x.shape[d] != 1 for d in dims if 0 <= d < len(x.shape)) or list(y.shape) != keep:
            raise c.error(f"squeezing {list(x.shape)} along {dims or 'every size-1 axis'} gives {keep}, "
                          f"the output is {list(y.shape)}")
    else:
        axis = _const_ints(c, 1, "axis")
        if len(axis) != 1:
            raise c.error(f"axis must hold one value, holds {len(axis)}")
        a = axis[0] + len(x.shape) + 1 if axis[0] < 0 else axis[0]
        want = list(x.shape[:a]) + [1] + list(x.shape[a:])
        if not 0 <= a <= len(x.shape) or list(y.shape) != want:
            raise c.error(f"expanding {list(x.shape)} at axis {axis[0]} gives {want}, the output is {list(y.shape)}")
    c.dtype(x, "input", (np.int8, np.int16, np.int32, np.float32))
    op.params = {"words": [], "c_inputs": [0], "shape": tuple(y.shape)}
    op.macs = 0


# -- TRANSPOSE / GATHER / DEPTH_TO_SPACE / SPACE_TO_DEPTH -------------------------------

def prepare_transpose(c):
    x, y = c.tensor(0, "input"), c.output()
    c.dtype(x, "input", (np.int8, np.int16))
    _rank_ok(c, x, "input", 1, 5)
    perm = _const_ints(c, 1, "perm")
    rank = len(x.shape)
    if sorted(perm) != list(range(rank)):
        raise c.error(f"perm {perm} is not a permutation of 0..{rank - 1}")
    if list(y.shape) != [x.shape[p] for p in perm]:
        raise c.error(f"output shape {list(y.shape)} differs from the permuted {[x.shape[p] for p in perm]}")
    _same_type(c, x, y)
    _finish(c, "TRANSPOSE", [rank, *x.shape, *perm], perm=perm)


def prepare_gather(c):
    op = c.op
    x, idx, y = c.tensor(0, "input"), c.tensor(1, "positions"), c.output()
    c.dtype(x, "input", (np.int8,))
    _rank_ok(c, x, "input")
    c.dtype(idx, "positions", (np.int32,))
    if int(op.options.get("batch_dims", 0)) != 0:
        from pyembed.model.ops.gather import prepare_gather_batched   # its own C runner (pe_gather.h)
        return prepare_gather_batched(c)
    rank = len(x.shape)
    axis = int(op.options.get("axis", 0))
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank:
        raise c.error(f"axis {op.options.get('axis')} outside a {rank}-D input")
    want = list(x.shape[:axis]) + list(idx.shape) + list(x.shape[axis + 1:])
    if list(y.shape) != want:
        raise c.error(f"output shape {list(y.shape)} differs from the gathered shape {want}")
    if idx.is_constant:
        bad = [int(v) for v in np.asarray(idx.data).ravel() if not 0 <= v < x.shape[axis]]
        if bad:
            raise c.error(f"positions {bad[:5]} outside [0, {x.shape[axis]})")
    _same_type(c, x, y)
    _finish(c, "GATHER", [rank, *x.shape, axis], c_inputs=(0, 1), axis=axis)


def _block_op(c, kind):
    x, y = c.tensor(0, "input"), c.output()
    c.dtype(x, "input", (np.int8,))
    c.rank(x, "input", 4)
    c.rank(y, "output", 4)
    b = int(c.op.options.get("block_size", 0))
    if b < 1:
        raise c.error(f"block_size {b}, expected >= 1")
    n, h, w, ch = x.shape
    if kind == "DEPTH_TO_SPACE":
        if ch % (b * b):
            raise c.error(f"input depth {ch} is not a multiple of block_size^2 = {b * b}")
        want = [n, h * b, w * b, ch // (b * b)]
    else:
        if h % b or w % b:
            raise c.error(f"input height {h} and width {w} must be multiples of block_size {b}")
        want = [n, h // b, w // b, ch * b * b]
    if list(y.shape) != want:
        raise c.error(f"output shape {list(y.shape)}, expected {want}")
    _same_type(c, x, y)
    _finish(c, kind, [b], block_size=b)


def prepare_depth_to_space(c):
    _block_op(c, "DEPTH_TO_SPACE")


def prepare_space_to_depth(c):
    _block_op(c, "SPACE_TO_DEPTH")


# -- RESIZE_NEAREST_NEIGHBOR / RESIZE_BILINEAR ----------------------------------------

def _resize_common(c, types):
    x, y = c.tensor(0, "input"), c.output()
    c.dtype(x, "input", types)
    c.rank(x, "input", 4)
    c.rank(y, "output", 4)
    size = _const_ints(c, 1, "size")
    if len(size) != 2:
        raise c.error(f"size must hold (height, width), holds {size}")
    if list(y.shape) != [x.shape[0], size[0], size[1], x.shape[3]]:
        raise c.error(f"output shape {list(y.shape)} differs from {[x.shape[0], *size, x.shape[3]]}")
    _same_type(c, x, y)
    o = c.op.options
    return x, y, size, bool(o.get("align_corners", False)), bool(o.get("half_pixel_centers", False))


def prepare_resize_nearest_neighbor(c):
    x, y, (oh, ow), align, half = _resize_common(c, (np.int8, np.int16, np.float32))
    ys = nearest_indices(x.shape[1], oh, align, half)
    xs = nearest_indices(x.shape[2], ow, align, half)
    _finish(c, "RESIZE_NEAREST_NEIGHBOR", [oh, ow, *ys.tolist(), *xs.tolist()], align_corners=align,
            half_pixel_centers=half)


def prepare_resize_bilinear(c):
    x, y, (oh, ow), align, half = _resize_common(c, (np.int8,))
    if align and half:
        raise c.error("align_corners and half_pixel_centers cannot both be set")
    if max(x.shape[1:3]) >= 1 << 20 or max(oh, ow) >= 1 << 20:
        raise Unsupported("sizes of 2^20 or more")
    if not bilinear_supported(x.shape[1:3], (oh, ow), align, half):
        raise Unsupported(f"resize {list(x.shape[1:3])} -> {[oh, ow]}: TFLite's rounded scale reads outside "
                          "the input for this ratio")
    _finish(c, "RESIZE_BILINEAR", [int(align), int(half)], align_corners=align, half_pixel_centers=half)
    c.op.macs = int(y.size) * 4


PREPARE = {
    "PAD": prepare_pad, "PADV2": prepare_pad, "MIRROR_PAD": prepare_mirror_pad,
    "CONCATENATION": prepare_concatenation, "SPLIT": prepare_split, "SPLIT_V": prepare_split_v,
    "STRIDED_SLICE": prepare_strided_slice, "SLICE": prepare_slice, "SQUEEZE": prepare_alias,
    "EXPAND_DIMS": prepare_alias, "TRANSPOSE": prepare_transpose, "GATHER": prepare_gather,
    "DEPTH_TO_SPACE": prepare_depth_to_space, "SPACE_TO_DEPTH": prepare_space_to_depth,
    "RESIZE_NEAREST_NEIGHBOR": prepare_resize_nearest_neighbor, "RESIZE_BILINEAR": prepare_resize_bilinear,
}
for _name, _prepare in PREPARE.items():
    register(_name, code=OP_CODES[_name])(_prepare)

# Constraints per operator, for `pyembed ops` (pyembed.cli.ops): dtypes, ranks, options.
CONSTRAINTS = {
    "PAD": "int8 (pads with the output zero point) / int16 / int32 / float32; rank 1-5; constant paddings",
    "PADV2": "int8 / int16 / int32 / float32; rank 1-5; constant paddings and constant_values (output "
             "quantization)",
    "MIRROR_PAD": "int8; rank 1-6; REFLECT (pad <= dim - 1) or SYMMETRIC (pad <= dim)",
    "CONCATENATION": "int8 / int16 / int32 / float32; rank 1-6; any axis; <= 16 inputs; int8 inputs with their own "
                     "scale are requantized; no fused activation",
    "SPLIT": "int8 / int16 / int32; rank 1-6; constant axis; equal parts",
    "SPLIT_V": "int8 / int16 / int32; rank 1-6; constant size_splits (one -1) and axis",
    "STRIDED_SLICE": "int8 / int16 / int32; rank 1-5; constant begin/end/strides; begin, end, ellipsis, "
                     "new_axis, shrink_axis masks; negative strides; offset",
    "SLICE": "int8 / int16 / int32; rank 1-5; constant begin / size (-1 = to the end)",
    "SQUEEZE": "int8 / int16 / int32 / float32; aliased (no copy)",
    "EXPAND_DIMS": "int8 / int16 / int32 / float32; constant axis; aliased (no copy)",
    "TRANSPOSE": "int8 / int16; rank 1-5; constant perm",
    "GATHER": "int8; rank 1-6; int32 positions (constant or computed); batch_dims 0 (> 0: the batched variant)",
    "DEPTH_TO_SPACE": "int8; 4-D NHWC; block_size >= 1",
    "SPACE_TO_DEPTH": "int8; 4-D NHWC; block_size >= 1",
    "RESIZE_NEAREST_NEIGHBOR": "int8 / int16 / float32; 4-D NHWC; constant size; align_corners, half_pixel_centers",
    "RESIZE_BILINEAR": "int8; 4-D NHWC; constant size; align_corners or half_pixel_centers (TFLM's integer "
                       "arithmetic)",
}


# -- float64 reference (pyembed.model.float_ref) -------------------------------------------

def _real_pad_value(graph, op):
    y = graph.tensors[op.outputs[0]]
    v = op.params.get("pad_value", 0)
    if y.dtype == np.float32:   # a float32 PADV2 value travels as its bit pattern
        return float(np.array([v], np.int32).view(np.float32)[0])
    if y.is_quantized:
        s, z = y.qparams()
        return (v - z) * float(s)
    return float(v)


def _bilinear_float(x, out_hw, align, half):
    """TFLite's float ResizeBilinear on NHWC values (float64)."""
    def axis(n_in, n_out):
        scale = (n_in - 1) / (n_out - 1) if align and n_out > 1 else n_in / n_out
        i = np.arange(n_out, dtype=np.float64)
        v = (i + 0.5) * scale - 0.5 if half else i * scale
        lo = np.maximum(np.floor(v), 0).astype(np.int64)
        hi = np.minimum(np.ceil(v), n_in - 1).astype(np.int64)
        return v - lo, lo, hi
    fy, y0, y1 = axis(x.shape[1], out_hw[0])
    fx, x0, x1 = axis(x.shape[2], out_hw[1])
    fy, fx = fy[None, :, None, None], fx[None, None, :, None]

    def tap(ys, xs):
        return x[:, ys][:, :, xs]
    return (tap(y0, x0) * (1 - fy) * (1 - fx) + tap(y1, x0) * fy * (1 - fx) + tap(y0, x1) * (1 - fy) * fx +
            tap(y1, x1) * fy * fx)


def float_reference(graph, op, inputs):
    """The real (float64) output of a data movement operator: the same index
    mapping on dequantized values (pyembed.model.float_ref calls this)."""
    from pyembed.errors import UnsupportedError
    from pyembed.kernels import shape_ref
    p, x, t = op.params, inputs[0], op.type
    y_shape = tuple(graph.tensors[op.outputs[0]].shape)
    w = p.get("words", [])
    if t in ("SQUEEZE", "EXPAND_DIMS"):
        return x.reshape(y_shape)
    if t in ("PAD", "PADV2", "MIRROR_PAD"):
        r = w[0]
        pads = list(zip(w[1 + r: 1 + 2 * r], w[1 + 2 * r: 1 + 3 * r]))
        if t == "MIRROR_PAD":
            return shape_ref.mirror_pad(x, pads, p["mode"])
        return np.pad(x, pads, constant_values=_real_pad_value(graph, op))
    if t == "CONCATENATION":
        return np.concatenate([v for v in inputs if v is not None], axis=p["axis"])
    if t in ("STRIDED_SLICE", "SLICE"):
        return shape_ref.strided_slice(x, p["begin"], p["stride"], p["count"], y_shape)
    if t == "TRANSPOSE":
        return x.transpose(p["perm"])
    if t == "GATHER":
        idx_t = graph.tensors[op.inputs[1]]
        idx = idx_t.data if idx_t.is_constant else inputs[1]
        if p.get("batch_dims"):
            from pyembed.model.ops.gather import gather_batched_reference
            return gather_batched_reference(x, idx, p["axis"], p["batch_dims"])
        return np.take(x, np.asarray(idx).astype(np.int64), axis=p["axis"])
    if t == "DEPTH_TO_SPACE":
        return shape_ref.depth_to_space(x, p["block_size"])
    if t == "SPACE_TO_DEPTH":
        return shape_ref.space_to_depth(x, p["block_size"])
    if t == "RESIZE_NEAREST_NEIGHBOR":
        return shape_ref.resize_nearest(x, y_shape[1:3], p["align_corners"], p["half_pixel_centers"])
    if t == "RESIZE_BILINEAR":
        return _bilinear_float(x, y_shape[1:3], p["align_corners"], p["half_pixel_centers"])
    raise UnsupportedError(f"float reference: operator {op.index} ({t}) has several outputs")
