"""FULLY_CONNECTED@w16 (code 112): an int8 FULLY_CONNECTED whose weights are
packed offline into int16 (csrc/include/pyembed/pe_fc_w16.h,
pe_fc_w16_pack's layout with the filter offset folded in), run by
pe_fully_connected_w16_s8: about twice the weights' flash for fewer
instructions per MAC on a DSP target (SMLAD on the stored halfwords, no
SXTB16 per weight). pyembed.passes.fc_w16.widen_fc_weights writes it in
place of an int8 FULLY_CONNECTED with constant weights; the results are the
same integers.

Inputs: the int8 input, the packed int16 constant (1-D, round4(O) *
round4(K) values), the optional int32 bias; one int8 output. The operator's
options carry what the packed tensor no longer shows: "depth" (K),
"features" (O), "weight_scale" (the int8 weights' scales, 1 or O values),
and the original FULLY_CONNECTED's options (fused activation,
keep_num_dims). Its requantization is the int8 operator's
(pyembed.model.ops.core.fc_quantization), so the rounding presets of
Graph.run apply as to FULLY_CONNECTED: words (TFLM: double rounding),
words_single (single rounding) and words_litert (single rounding, the
per-tensor multiplier from the float32 product of the scales).
"""
import numpy as np

from pyembed.model.ops.base import Unsupported
from pyembed.model.ops.core import fc_quantization, fc_rows
from pyembed.model.ops.registry import register

FC_MAX_DEPTH = 33025  # PE_FC_MAX_DEPTH


def round4(v):
    return (int(v) + 3) & ~3


def _words(p, depth, out_f, single, f32=False):
    m = p["multiplier_f32"] if f32 and "multiplier_f32" in p else p["multiplier"]
    s = p["shift_f32"] if f32 and "shift_f32" in p else p["shift"]
    return [depth, out_f, int(p["input_offset"]), int(p["output_offset"]), int(p["act_min"]), int(p["act_max"]),
            int(bool(single)), len(m)] + [int(v) for v in m] + [int(v) for v in s]


def packed_fc_operands(c, weight_dtype, writer):
    """(x, w, y, b, depth, features) of a FULLY_CONNECTED on packed weights (@w16, @w4): int8 input
    and output, constant packed weights of weight_dtype, optional constant int32 bias, and the
    options writer (the pass named in the error) left: depth, features, weight_scale."""
    x, w, y = c.tensor(0, "input"), c.tensor(1, "packed weights"), c.output()
    b = c.tensor(2, "bias", optional=True)
    c.dtype(x, "input")
    c.dtype(y, "output")
    c.dtype(w, "packed weights", (weight_dtype,))
    c.constant(w, "packed weights")
    if b is not None:
        c.dtype(b, "bias", (np.int32,))
        c.constant(b, "bias")
    o = c.op.options
    for key in ("depth", "features", "weight_scale"):
        if key not in o:
            raise c.error(f"options lack {key!r} (written by {writer})")
    depth, out_f = int(o["depth"]), int(o["features"])
    if depth < 1 or out_f < 1:
        raise c.error(f"depth {depth} and features {out_f} must be >= 1")
    if depth > FC_MAX_DEPTH:
        raise Unsupported(f"accumulation depth {depth} > {FC_MAX_DEPTH} (int32 dot product bound)")
    return x, w, y, b, depth, out_f


@register("FULLY_CONNECTED@w16", code=112, c_name="PE_GOP_FULLY_CONNECTED_W16")
def prepare_fully_connected_w16(c):
    """int8 FULLY_CONNECTED from int16 weights packed offline (pyembed.passes.fc_w16; opt-in)."""
    op = c.op
    x, w, y, b, depth, out_f = packed_fc_operands(c, np.int16, "pyembed.passes.fc_w16.widen_fc_weights")
    o = op.options
    if len(w.shape) != 1 or w.size != round4(out_f) * round4(depth):
        raise c.error(f"packed weights shape {list(w.shape)}: expected [{round4(out_f) * round4(depth)}] "
                      f"(round4({out_f}) * round4({depth}) int16 values)")
    batches = fc_rows(c, x, y, b, out_f, depth)
    p = fc_quantization(c, x, y, o["weight_scale"], out_f)
    p.update(batches=batches, depth=depth, features=out_f,
             words=_words(p, depth, out_f, False), words_single=_words(p, depth, out_f, True),
             words_litert=_words(p, depth, out_f, True, f32=True))
    op.params = p
    op.macs = int(batches * out_f * depth)
    from pyembed._ext import _graph
    op.scratch_bytes = int(_graph.fc_w16_sizes(out_f, depth)[1])
