"""Fused transformer operators (issue 17): PE_ATTENTION (enum 160).

PE_ATTENTION is made by pyembed.passes.transformer from a recognised
BATCH_MATMUL -> [MUL] -> [ADD mask] -> SOFTMAX -> BATCH_MATMUL chain. Its
inputs are the Q, K, V source tensors (read through element strides) and an
optional mask; its output is the tensor the chain ended in. The options hold
the geometry and the indices of the absorbed intermediate tensors, whose
quantization gives the TFLM-mode parameters exactly as TFLite Micro's
Prepare steps compute them:

* scores = BATCH_MATMUL(Q, K): double(q_scale) * double(k_scale) /
  double(score_scale), QuantizeMultiplier (the tflite-micro interpreter's
  result; a float32 product of the two scales disagrees in rare ties);
* MUL by the constant: double(s1) * double(s2) / double(s_out);
* ADD of the mask: left shift 20, both inputs rescaled to twice the larger
  input scale (the score chain is input 1; ADD's arithmetic is symmetric);
* SOFTMAX: beta * input_scale * 2^26, diff_min (pyembed.kernels.params);
* P.V: like the scores, with the probabilities' scale 1/256.

The stream mode's score multiplier is the real score scale in base-2 logits,
q_scale * k_scale * c * beta * log2(e) * 2^22 (c the dequantized constant),
and its output multiplier v_scale / out_scale / 2^16 (the kernel's Q16
result is in units of V); a mask is input 4's table of Q22 logit biases
(one per int8 mask code, made by the pass).

The params words (pe_transformer.h's pe_xattn_params, in this order) are
WORDS; the C runner decodes and validates them.
"""
import math

import numpy as np

from pyembed.kernels.quant import quantize_multiplier
from pyembed.model.ops.base import Unsupported, activation_range, add_rescale, softmax_params
from pyembed.model.ops.registry import register

PE_GOP_ATTENTION = 160
MODES = {"tflm": 0, "stream": 1}
FOLDS = {"late": 0, "early": 1, "auto": 2}
WORDS = ("mode", "n", "m", "d", "dv", "heads",
         "q_row", "k_row", "v_row", "out_row", "q_head", "k_head", "v_head", "out_head",
         "q_offset", "k_offset", "v_offset", "out_zero_point", "out_multiplier", "out_shift",
         "score_multiplier", "score_shift", "score_zero_point",
         "has_scale", "scale_value", "mul_input1_offset", "mul_input2_offset", "mul_output_offset",
         "mul_multiplier", "mul_shift", "mul_act_min", "mul_act_max",
         "has_mask", "add_input1_offset", "add_input2_offset", "add_output_offset", "add_left_shift",
         "add_input1_multiplier", "add_input1_shift", "add_input2_multiplier", "add_input2_shift",
         "add_output_multiplier", "add_output_shift", "add_act_min", "add_act_max", "mask_row", "mask_head",
         "softmax_multiplier", "softmax_shift", "softmax_diff_min", "p_offset",
         "logit_multiplier", "logit_shift", "block", "fold")


def _fc_real(a_scale, b_scale, out_scale):
    # TFLite Micro's BATCH_MATMUL multiplies the two scales in double (the
    # float32 product of the TFLite reference kernels differs in rare ties:
    # measured against the tflite-micro interpreter, see tests)
    return float(a_scale) * float(b_scale) / float(out_scale)


@register("PE_ATTENTION", code=160, c_name="PE_GOP_ATTENTION")
def prepare_pe_attention(c):
    op = c.op
    o = op.options
    g = c.graph
    q, k, v = c.tensor(0, "Q"), c.tensor(1, "K"), c.tensor(2, "V")
    mask = c.tensor(3, "mask", optional=True)
    out = c.output()
    for t, what in ((q, "Q"), (k, "K"), (v, "V"), (out, "output")):
        c.dtype(t, what)
    if o.get("mode") not in MODES:
        raise c.error(f"options: mode must be one of {', '.join(MODES)}, got {o.get('mode')!r}")
    qs, qz = c.qparams(q, "Q")
    ks, kz = c.qparams(k, "K")
    vs, vz = c.qparams(v, "V")
    pv_out = g.tensors[o["pv_out"]]
    ys, yz = c.qparams(pv_out, "P.V output")
    if out.qparams() != (ys, yz):
        raise Unsupported("the views after P.V change the quantization")
    p = {name: 0 for name in WORDS}
    p.update(mode=MODES[o["mode"]], n=o["n"], m=o["m"], d=o["d"], dv=o["dv"], heads=o["heads"],
             q_row=o["q_row"], k_row=o["k_row"], v_row=o["v_row"], out_row=o["out_row"],
             q_head=o["q_head"], k_head=o["k_head"], v_head=o["v_head"], out_head=o["out_head"],
             q_offset=-qz, k_offset=-kz, v_offset=-vz, out_zero_point=yz, block=o.get("block", 64),
             fold=FOLDS[o.get("fold", "auto")])
    if o["m"] > 32768:
        raise Unsupported(f"{o['m']} keys > 32768 (int32 P.V sums)")
    scale_real = 1.0
    if o["mode"] == "tflm":
        st, sz = c.qparams(g.tensors[o["scores"]], "scores")
        p["score_multiplier"], p["score_shift"] = quantize_multiplier(_fc_real(qs, ks, st))
        p["score_zero_point"] = sz
        cur_s, cur_z = st, sz
        if o.get("scale") is not None:
            ct = g.tensors[o["scale"]]
            cs, cz = c.qparams(ct, "scale constant")
            ms, mz = c.qparams(g.tensors[o["scaled"]], "scaled scores")
            mm, msh = quantize_multiplier(float(cur_s) * float(cs) / float(ms))
            lo, hi = activation_range(o.get("scale_activation"), ms, mz)
            p.update(has_scale=1, scale_value=int(np.asarray(ct.data).reshape(-1)[0]), mul_input1_offset=-cur_z,
                     mul_input2_offset=-cz, mul_output_offset=mz, mul_multiplier=mm, mul_shift=msh,
                     mul_act_min=lo, mul_act_max=hi)
            cur_s, cur_z = ms, mz
        if mask is not None:
            c.dtype(mask, "mask")
            s2, z2 = c.qparams(mask, "mask")
            so, zo = c.qparams(g.tensors[o["mask_sum"]], "masked scores")
            m1, sh1, m2, sh2, mo, sho = add_rescale(cur_s, s2, so, 20)
            lo, hi = activation_range(o.get("mask_activation"), so, zo)
            p.update(has_mask=1, add_input1_offset=-cur_z, add_input2_offset=-z2, add_output_offset=zo,
                     add_left_shift=20, add_input1_multiplier=m1, add_input1_shift=sh1,
                     add_input2_multiplier=m2, add_input2_shift=sh2, add_output_multiplier=mo,
                     add_output_shift=sho, add_act_min=lo, add_act_max=hi,
                     mask_row=o["mask_row"], mask_head=o["mask_head"])
            cur_s = so
        xs, _ = c.qparams(g.tensors[o["softmax_in"]], "softmax input")
        if float(xs) != float(cur_s):
            raise c.error("softmax input quantization disagrees with the scores chain")
        p["softmax_multiplier"], p["softmax_shift"], p["softmax_diff_min"] = softmax_params(o["beta"], xs)
        ps, pz = c.qparams(g.tensors[o["probs"]], "probabilities")
        if float(ps) != 1.0 / 256 or pz != -128:
            raise Unsupported("int8 softmax output must have scale 1/256 and zero point -128")
        p["p_offset"] = -pz
        p["out_multiplier"], p["out_shift"] = quantize_multiplier(_fc_real(ps, vs, ys))
        scratch = o["m"]
    else:
        if mask is not None:
            c.dtype(mask, "mask")
            lut = c.tensor(4, "mask table")
            c.dtype(lut, "mask table", (np.int32,))
            c.constant(lut, "mask table")
            if lut.size != 256:
                raise c.error(f"the mask table has {lut.size} entries, expected 256")
            p.update(has_mask=1, mask_row=o["mask_row"], mask_head=o["mask_head"])
        if o.get("scale") is not None:
            ct = g.tensors[o["scale"]]
            cs, cz = c.qparams(ct, "scale constant")
            scale_real = float(cs) * (int(np.asarray(ct.data).reshape(-1)[0]) - cz)
        real = float(qs) * float(ks) * scale_real * float(o["beta"]) * math.log2(math.e) * 2.0 ** 22
        if not real > 0:
            raise Unsupported(f"score scale {real} <= 0 in the stream mode")
        p["logit_multiplier"], p["logit_shift"] = quantize_multiplier(real)
        p["out_multiplier"], p["out_shift"] = quantize_multiplier(float(vs) / float(ys) / 65536.0)
        # pe_xattn_get_buffer_size: the streaming kernel's row state and block
        # of scores (pe_attention_nf_get_buffer_size), the int32 row, alignment
        scratch = (7 + 8 * o["dv"] + 2 * o["d"] + 4 * p["block"]) + 4 * o["dv"] + 3
    for key in ("score_shift", "out_shift", "logit_shift", "mul_shift"):
        if not -31 <= p[key] <= 30:
            raise Unsupported(f"{key} {p[key]} outside [-31, 30] (scales too far apart)")
    op.params = p
    op.params["words"] = [int(p[name]) for name in WORDS]
    op.macs = int(o["heads"] * o["n"] * o["m"] * (o["d"] + o["dv"]))
    op.scratch_bytes = int(scratch)


PE_GOP_LUT = 161


@register("PE_LUT", code=161, c_name="PE_GOP_LUT")
def prepare_pe_lut(c):
    """PE_LUT (pyembed.passes.elementwise): out[i] = table[in[i] + 128]."""
    op = c.op
    x, table, y = c.tensor(0, "input"), c.tensor(1, "table"), c.output()
    for t, what in ((x, "input"), (table, "table"), (y, "output")):
        c.dtype(t, what)
    c.constant(table, "table")
    if table.size != 256:
        raise c.error(f"the table has {table.size} entries, expected 256")
    if x.size != y.size:
        raise c.error(f"input shape {list(x.shape)} and output shape {list(y.shape)} differ in size")
    op.params = {"words": [int(x.size)]}
    op.macs = int(x.size)
    op.scratch_bytes = 0
