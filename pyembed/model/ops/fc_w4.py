"""FULLY_CONNECTED@w4 (code 113): an int8 FULLY_CONNECTED whose weights are
TFLite's packed int4 (TensorType INT4: two values a byte, element 2i in the
low nibble of byte i, over the whole [O, K] tensor), run by the C
pe_fully_connected_w4_s8 (csrc/include/pyembed/pe_fc_w4.h): the flash holds
ceil(O * K / 2) bytes instead of O * K. pyembed.model.fc_w4_pack writes it at
import in place of a FULLY_CONNECTED on an INT4 constant; the results are
the integers of the int8 layer on the same values (and TFLM's).

Inputs: the int8 input, the packed constant (an int8 tensor of
ceil(O * K / 2) bytes), the optional int32 bias; one int8 output. The
options carry what the packed tensor no longer shows: "depth" (K),
"features" (O), "weight_scale" (1 or O scales), "int4_weights" (the index
of the unpacked int8 tensor the importer made) and the original
FULLY_CONNECTED's options. The requantization is the int8 operator's
(pyembed.model.ops.core.fc_quantization): the rounding presets of Graph.run
apply as to FULLY_CONNECTED (words: double rounding as TFLM, words_single,
words_litert), or, for a 1x1 CONV_2D rewritten into it
(options["rewritten_from"]), as to CONV_2D (LiteRT: double rounding).
"""
import numpy as np

from pyembed.model.ops.core import fc_quantization, fc_rows
from pyembed.model.ops.fc_w16 import packed_fc_operands
from pyembed.model.ops.registry import register

W4_TYPE = "FULLY_CONNECTED@w4"


def packed_bytes(out_f, depth):
    """Bytes of an [out_f, depth] int4 filter packed over the whole tensor."""
    return (int(out_f) * int(depth) + 1) // 2


def _words(p, depth, out_f, single, f32=False):
    m = p["multiplier_f32"] if f32 and "multiplier_f32" in p else p["multiplier"]
    s = p["shift_f32"] if f32 and "shift_f32" in p else p["shift"]
    return [depth, out_f, int(p["input_offset"]), int(p["output_offset"]), int(p["act_min"]), int(p["act_max"]),
            int(bool(single)), len(m)] + [int(v) for v in m] + [int(v) for v in s]


@register(W4_TYPE, code=113, c_name="PE_GOP_FULLY_CONNECTED_W4")
def prepare_fully_connected_w4(c):
    """int8 FULLY_CONNECTED on packed int4 weights (TFLite INT4; pyembed.model.fc_w4_pack at import)."""
    op = c.op
    x, w, y, b, depth, out_f = packed_fc_operands(c, np.int8, "pyembed.model.fc_w4_pack.pack_int4_fc")
    o = op.options
    if len(w.shape) != 1 or w.size != packed_bytes(out_f, depth):
        raise c.error(f"packed weights shape {list(w.shape)}: expected [{packed_bytes(out_f, depth)}] "
                      f"(ceil({out_f} * {depth} / 2) bytes)")
    batches = fc_rows(c, x, y, b, out_f, depth)
    p = fc_quantization(c, x, y, o["weight_scale"], out_f)
    # LiteRT rounds FULLY_CONNECTED once (its float32 scale product per tensor) but
    # CONV_2D twice: a pointwise conv rewritten here keeps the conv's (double) words
    from_conv = o.get("rewritten_from") == "CONV_2D"
    p.update(batches=batches, depth=depth, features=out_f,
             words=_words(p, depth, out_f, False), words_single=_words(p, depth, out_f, True),
             words_litert=_words(p, depth, out_f, not from_conv, f32=not from_conv))
    op.params = p
    op.macs = int(batches * out_f * depth)
    from pyembed._ext import _graph
    op.scratch_bytes = int(_graph.fc_w4_sizes(out_f, depth)[1])


def unpacked_weights(graph, op):
    """The int8 [O, K] weight values of a FULLY_CONNECTED@w4, from its packed tensor."""
    from pyembed._ext import _graph
    depth, out_f = int(op.options["depth"]), int(op.options["features"])
    packed = np.ascontiguousarray(np.asarray(graph.tensors[op.inputs[1]].data).view(np.uint8).ravel())
    return _graph.fc_w4_unpack(packed, out_f * depth).reshape(out_f, depth)


def float_reference(graph, op, inputs):
    """The layer in float64: the unpacked weights times their scales (per
    tensor or per feature), the bias in the accumulator's unit
    (input_scale * weight_scale[o]), the fused activation."""
    from pyembed.model.float_ref import _activation
    depth, out_f = int(op.options["depth"]), int(op.options["features"])
    ws = np.broadcast_to(np.asarray(op.options["weight_scale"], dtype=np.float64).reshape(-1), (out_f,))
    w = unpacked_weights(graph, op).astype(np.float64) * ws[:, None]
    x_t = graph.tensors[op.inputs[0]]
    y = np.asarray(inputs[0], dtype=np.float64).reshape(-1, depth) @ w.T
    if len(op.inputs) > 2 and op.inputs[2] >= 0:
        b = graph.tensors[op.inputs[2]].data
        y = y + np.asarray(b, dtype=np.float64).reshape(-1) * float(x_t.scale[0]) * ws
    return _activation(y, op.options.get("activation")).reshape(graph.tensors[op.outputs[0]].shape)
