"""CONV_2D@w4 (code 118) and DEPTHWISE_CONV_2D@w4 (code 119, pe_depthwise_conv2d_w4_s8:
the filter [1, KH, KW, O] packed the same way, unpacked whole into the scratch for the int8
depthwise kernel; words [6] the depth multiplier, [14] O).

CONV_2D@w4: an int8 CONV_2D of any kernel size, stride,
padding, dilation and groups whose filter is TFLite's packed int4 (TensorType
INT4: two values a byte, element 2i in the low nibble of byte i, over the
whole OHWI [O, KH, KW, C] tensor), run by the C pe_conv2d_w4_s8
(csrc/include/pyembed/pe_conv_w4.h): ceil(O * KH * KW * C / 2) bytes of
flash instead of O * KH * KW * C, the integers of the int8 CONV_2D on the
same values (and TFLM's, which unpacks INT4 filters to int8).
pyembed.model.fc_w4_pack writes it at import in place of such a CONV_2D
(a 1x1 stride-1 one becomes FULLY_CONNECTED@w4 instead).

Inputs: the int8 input, the packed constant (int8 tensor of the packed
bytes), the optional int32 bias; one int8 output. Options: the CONV_2D's,
plus "filter_shape" ([O, KH, KW, C]), "weight_scale" (1 or O scales) and
"int4_weights" (the unpacked tensor's index). The requantization is the int8
CONV_2D's (double rounding as TFLM and LiteRT; words_single for the
rounding="single" preset). The float64 reference is CONV_2D's on the
unpacked values.
"""
import copy

import numpy as np

from pyembed.model.ops.base import Unsupported, _multipliers, activation_range
from pyembed.model.ops.core import _check_stride, _geometry
from pyembed.model.ops.registry import register

CONV_W4_TYPE = "CONV_2D@w4"
DW_W4_TYPE = "DEPTHWISE_CONV_2D@w4"
WRITER = "pyembed.model.fc_w4_pack.pack_int4_fc"


def _words(geo, p, kernel, depth, single):
    stride, pad, dil, groups = geo
    return ([stride[0], stride[1], pad[0], pad[2], dil[0], dil[1], groups, int(p["input_offset"]),
             int(p["output_offset"]), int(p["act_min"]), int(p["act_max"]), int(bool(single)),
             kernel[0], kernel[1], depth] + [int(v) for v in p["multiplier"]] + [int(v) for v in p["shift"]])


@register(CONV_W4_TYPE, code=118, c_name="PE_GOP_CONV_2D_W4")
def prepare_conv_2d_w4(c):
    """int8 CONV_2D on a packed int4 filter (TFLite INT4; pyembed.model.fc_w4_pack at import)."""
    _prepare(c, depthwise=False)


@register(DW_W4_TYPE, code=119, c_name="PE_GOP_DEPTHWISE_CONV_2D_W4")
def prepare_depthwise_conv_2d_w4(c):
    """int8 DEPTHWISE_CONV_2D on a packed int4 filter [1, KH, KW, O] (pyembed.model.fc_w4_pack at import)."""
    _prepare(c, depthwise=True)


def _prepare(c, depthwise):
    op = c.op
    x, w, y = c.tensor(0, "input"), c.tensor(1, "packed filter"), c.output()
    b = c.tensor(2, "bias", optional=True)
    c.dtype(x, "input")
    c.dtype(y, "output")
    c.dtype(w, "packed filter", (np.int8,))
    c.constant(w, "packed filter")
    if b is not None:
        c.dtype(b, "bias", (np.int32,))
        c.constant(b, "bias")
    c.rank(x, "input", 4)
    c.rank(y, "output", 4)
    o = op.options
    for key in ("padding", "stride", "filter_shape", "weight_scale"):
        if key not in o:
            raise c.error(f"options lack {key!r} (written by {WRITER})")
    stride, dilation = tuple(o["stride"]), tuple(o.get("dilation", (1, 1)))
    _check_stride(c, stride, dilation)
    n, h, wd, cin = x.shape
    if depthwise:
        one, kh, kw, cout = (int(d) for d in o["filter_shape"])
        if one != 1 or min(kh, kw, cout) < 1 or cout % cin != 0:
            raise c.error(f"depthwise filter {[one, kh, kw, cout]} does not fit input channels {cin}")
        kin, groups, taps_c = cout, cout // cin, 1     # words [6]: the depth multiplier, [14]: O
    else:
        cout, kh, kw, kin = (int(d) for d in o["filter_shape"])
        if min(cout, kh, kw, kin) < 1 or cin % kin != 0 or cout % (cin // kin) != 0:
            raise c.error(f"filter {[cout, kh, kw, kin]} does not fit input channels {cin}")
        groups, taps_c = cin // kin, kin
    packed = (kh * kw * kin * (1 if depthwise else cout) + 1) // 2
    if len(w.shape) != 1 or w.size != packed:
        raise c.error(f"packed filter shape {list(w.shape)}: expected [{packed}] (ceil({cout}*{kh}*{kw}*{kin} / 2))")
    (oh, ow), pad = _geometry(c, o, (h, wd), (kh, kw), stride, dilation)
    if tuple(y.shape) != (n, oh, ow, cout):
        raise c.error(f"output shape {list(y.shape)} disagrees with the convolution: expected {[n, oh, ow, cout]}")
    if b is not None and tuple(b.shape) != (cout,):
        raise c.error(f"bias shape {list(b.shape)} must be [{cout}]")
    xs, xz = c.qparams(x, "input")
    ys, yz = c.qparams(y, "output")
    ws = np.asarray(o["weight_scale"], dtype=np.float32).reshape(-1)
    if len(ws) not in (1, cout) or np.any(~np.isfinite(ws)) or np.any(ws <= 0):
        raise c.error(f"weight_scale must be 1 or {cout} finite values > 0")
    if kh * kw * taps_c * 128 * 255 >= 2 ** 31:
        raise Unsupported(f"{kh * kw * taps_c} taps per output: the int32 accumulator could overflow")
    mult, shift = _multipliers([float(xs) * float(s) / float(ys) for s in np.broadcast_to(ws, (cout,))])
    act_min, act_max = activation_range(o.get("activation"), ys, yz)
    p = {"stride": stride, "dilation": dilation, "padding": o["padding"], "pad": pad, "kernel": (kh, kw),
         "groups": cin if depthwise else groups, "depth_multiplier": groups if depthwise else 1, "activation": o.get("activation"), "act_min": act_min,
         "act_max": act_max, "input_offset": -xz, "output_offset": yz, "multiplier": mult, "shift": shift}
    geo = (stride, pad, dilation, groups)
    p.update(words=_words(geo, p, (kh, kw), kin, False), words_single=_words(geo, p, (kh, kw), kin, True))
    op.params = p
    op.macs = int(n * oh * ow * cout * kh * kw * taps_c)
    from pyembed._ext import _graph
    op.scratch_bytes = int(_graph.conv_w4_sizes(p["words"], tuple(x.shape), tuple(y.shape), depthwise)[1])


def unpacked_filter(graph, op):
    """The int8 filter values (options["filter_shape"]) of a CONV_2D@w4 or DEPTHWISE_CONV_2D@w4,
    from its packed tensor."""
    from pyembed._ext import _graph
    shape = tuple(int(d) for d in op.options["filter_shape"])
    packed = np.ascontiguousarray(np.asarray(graph.tensors[op.inputs[1]].data).view(np.uint8).ravel())
    return _graph.fc_w4_unpack(packed, int(np.prod(shape))).reshape(shape)


def float_reference(graph, op, inputs):
    """CONV_2D's (DEPTHWISE_CONV_2D's) float64 reference on the unpacked filter values and their scales."""
    dw = op.type == DW_W4_TYPE
    from pyembed.model.float_ref import _conv
    from pyembed.model.graph import Tensor
    ws = np.asarray(op.options["weight_scale"], dtype=np.float32).reshape(-1)
    g = copy.copy(graph)
    g.tensors = list(graph.tensors)
    wi = op.inputs[1]
    g.tensors[wi] = Tensor(index=wi, name=graph.tensors[wi].name, shape=tuple(op.options["filter_shape"]),
                           dtype=np.dtype(np.int8), scale=ws, zero_point=np.zeros(ws.size, dtype=np.int64),
                           quant_axis=3 if dw else 0, data=unpacked_filter(graph, op))
    conv = copy.copy(op)
    conv.type = "DEPTHWISE_CONV_2D" if dw else "CONV_2D"
    return _conv(g, conv, inputs[0], dw)
