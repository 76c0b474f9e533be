"""float32 RESIZE_BILINEAR and TRANSPOSE_CONV run in the graph (issue #30:
converter-made float32 U-Nets), on the kernels of
csrc/include/pyembed/pe_f32_cnn.h through csrc/src/graph/pe_run_f32_cnn.c.

==========================  ====================================================
RESIZE_BILINEAR@float32     align_corners, half_pixel_centers
(296)
TRANSPOSE_CONV@float32      stride_h, stride_w, pad_top, pad_left, act_min,
(297)                       act_max (float32 bit patterns); C inputs (input,
                            filter, bias or -1)
==========================  ====================================================

Both are "TYPE@float32" variants of the int8 operators, taken when the data
input is float32 (TRANSPOSE_CONV's input 2: pyembed.model.ops dispatches on
it). Each output is the float32 value of TFLM's reference kernel: bilinear
weights from float32 source coordinates in the reference's order of
operations; the transpose convolution scattered into the output in the
reference's order (input rows, columns, channels, then filter taps), the
bias added last and the fused activation's float clamp.
"""
import numpy as np

from pyembed.kernels.f32 import ACTIVATIONS
from pyembed.kernels.shape_ref import bilinear_supported
from pyembed.model.ops.base import Unsupported
from pyembed.model.ops.heavy import _taps, _tconv_geometry
from pyembed.model.ops.registry import register

CODES = {"RESIZE_BILINEAR": 296, "TRANSPOSE_CONV": 297}
MAX_SIDE = 1 << 20


def _bits(v):
    return int(np.array([v], np.float32).view(np.int32)[0])


def _float32(c, t, what):
    c.dtype(t, what, (np.float32,))


@register("RESIZE_BILINEAR@float32", code=CODES["RESIZE_BILINEAR"], c_name="PE_GOP_RESIZE_BILINEAR_F32")
def prepare_resize_bilinear_f32(c):
    x, y = c.tensor(0, "input"), c.output()
    _float32(c, x, "input")
    _float32(c, y, "output")
    c.rank(x, "input", 4)
    c.rank(y, "output", 4)
    size = c.tensor(1, "size")
    c.constant(size, "size")
    if size.dtype != np.dtype(np.int32) or size.size != 2:
        raise c.error(f"size must be two int32 values (height, width), is {size.type_name or size.dtype}"
                      f"{list(size.shape)}")
    oh, ow = (int(v) for v in np.asarray(size.data).reshape(-1))
    if list(y.shape) != [x.shape[0], oh, ow, x.shape[3]]:
        raise c.error(f"output shape {list(y.shape)} differs from {[x.shape[0], oh, ow, x.shape[3]]}")
    o = c.op.options
    align, half = bool(o.get("align_corners", False)), bool(o.get("half_pixel_centers", False))
    if align and half:
        raise c.error("align_corners and half_pixel_centers cannot both be set")
    if max(x.shape[1:3]) >= MAX_SIDE or max(oh, ow) >= MAX_SIDE:
        raise Unsupported("sizes of 2^20 or more")
    if not bilinear_supported(x.shape[1:3], (oh, ow), align, half):
        raise Unsupported(f"resize {list(x.shape[1:3])} -> {[oh, ow]}: TFLite's rounded scale reads outside "
                          "the input for this ratio")
    c.op.params = {"words": [int(align), int(half)], "c_inputs": [0], "f32": "RESIZE_BILINEAR",
                   "align_corners": align, "half_pixel_centers": half}
    c.op.macs = int(y.size) * 4
    c.op.scratch_bytes = 0


@register("TRANSPOSE_CONV@float32", code=CODES["TRANSPOSE_CONV"], c_name="PE_GOP_TRANSPOSE_CONV_F32")
def prepare_transpose_conv_f32(c):
    op = c.op
    shp, w, x = c.tensor(0, "output_shape"), c.tensor(1, "filter"), c.tensor(2, "input")
    b = c.tensor(3, "bias", optional=True)
    y = c.output()
    c.dtype(shp, "output_shape", (np.int32,))
    c.constant(shp, "output_shape")
    for t, what in ((x, "input"), (w, "filter"), (y, "output")):
        _float32(c, t, what)
        c.rank(t, what, 4)
    c.constant(w, "filter")
    if b is not None:
        _float32(c, b, "bias")
        c.constant(b, "bias")
    o = op.options
    (sh, sw), (kh, kw), (pt, pl) = _tconv_geometry(c, shp, x, w, y, b)
    n, ih, iw, ic = x.shape
    oc = w.shape[0]
    oh, ow = int(y.shape[1]), int(y.shape[2])
    act = o.get("activation") or "NONE"
    if act not in ACTIVATIONS:
        raise Unsupported(f"float32 TRANSPOSE_CONV with fused activation {act}")
    lo, hi = ACTIVATIONS[act]
    op.params = {"stride": (sh, sw), "padding": o["padding"], "pad": (pt, pl), "kernel": (kh, kw),
                 "activation": act, "f32": "TRANSPOSE_CONV", "c_inputs": [2, 1, 3],
                 "words": [sh, sw, pt, pl, _bits(lo), _bits(hi)]}
    op.macs = int(n * _taps(oh, ih, kh, sh, pt) * _taps(ow, iw, kw, sw, pl) * ic * oc)
    op.scratch_bytes = 0


CONSTRAINTS = {}


def float_reference(graph, op, inputs):
    """The real (float64) output (pyembed.model.float_ref calls this): the
    int8 operators' float64 references, which read float32 tensors as they are."""
    from pyembed.model.ops.data import _bilinear_float
    from pyembed.model.ops.heavy import _tconv_float
    if op.type == "TRANSPOSE_CONV":
        return _tconv_float(graph, op, inputs[2])
    p = op.params
    return _bilinear_float(inputs[0], tuple(graph.tensors[op.outputs[0]].shape[1:3]), p["align_corners"],
                           p["half_pixel_centers"])
