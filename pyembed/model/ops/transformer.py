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

A structured constant mask (causal, banded, key padding: options["range"],
found by the pass) is no input at all: the range words give each query row
its keys [lo(i), hi(i)) (key_ranges), only those are computed, and in tflm
mode the mask's allowed code is added to them with the ADD arithmetic above.

A constant V that is a pixel-coordinate grid (options["v_gen"]: kind
V_INDEX - the key's image column, stereo - or V_GRID - its (column, row),
flow -, the image width and the coordinate extent; found by the pass) is no
input either: the kernel generates each key's int8 values (coord_codes, the
values pyembed.kernels.matching._coordinates stores), the constant's
quantization still gives V's scale and zero point.

The params words (pe_transformer.h's pe_xattn_params, in this order) are
WORDS; the C runner decodes and validates them.
"""
import math

import numpy as np

from pyembed.kernels.matching import coord_codes  # noqa: F401  (pe_xattn_coord, shared with the matcher)
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
         "logit_multiplier", "logit_shift", "block", "fold",
         "range_kind", "range_lo", "range_hi", "range_len", "range_code", "range_width",
         "v_kind", "v_width", "v_extent")
RANGE_LOWER, RANGE_UPPER, RANGE_PADDING, RANGE_ROWS = 1, 2, 4, 8   # pe_transformer.h's PE_XATTN_RANGE_*
V_TENSOR, V_INDEX, V_GRID = 0, 1, 2   # pe_transformer.h's PE_XATTN_V_*
V_MAX_EXTENT = 1 << 20


def generated_values(kind, width, extent, m):
    """The int8 V [m, dv] the kernel generates for v_kind kind (V_INDEX: the
    key's column j % width; V_GRID: (column, row j // width))."""
    j = np.arange(m, dtype=np.int64)
    x, y = j % width, j // width
    if kind == V_INDEX:
        return coord_codes(x, extent)[:, None]
    if kind == V_GRID:
        return np.stack([coord_codes(x, extent), coord_codes(y, extent)], axis=1)
    raise ValueError(f"v_kind {kind} generates nothing")


def key_ranges(n, m, rng):
    """(lo, hi) int64 arrays [n]: the keys [lo[i], hi[i]) query row i sees
    under a structured mask rng = {"kind", "lo", "hi", "len"[, "width"]} (or
    None: all m keys), the formula of pe_xattn_key_range."""
    i = np.arange(n, dtype=np.int64)
    if not rng:
        return np.zeros(n, np.int64), np.full(n, m, np.int64)
    kind, length = int(rng["kind"]), int(rng["len"])
    base = np.zeros(n, np.int64)
    top = np.full(n, length, np.int64)
    if kind & RANGE_ROWS:
        width = int(rng["width"])
        base = (i // width) * width
        top = np.minimum(top, base + width)
    lo = np.maximum(base, i + int(rng["lo"])) if kind & RANGE_LOWER else base
    hi = np.minimum(top, i + int(rng["hi"]) + 1) if kind & RANGE_UPPER else top
    return np.minimum(lo, length), np.maximum(hi, 0)


def _add_words(p):
    return {"input1_offset": p["add_input1_offset"], "input2_offset": p["add_input2_offset"],
            "output_offset": p["add_output_offset"], "left_shift": p["add_left_shift"],
            "input1_multiplier": p["add_input1_multiplier"], "input1_shift": p["add_input1_shift"],
            "input2_multiplier": p["add_input2_multiplier"], "input2_shift": p["add_input2_shift"],
            "output_multiplier": p["add_output_multiplier"], "output_shift": p["add_output_shift"],
            "act_min": p["add_act_min"], "act_max": p["add_act_max"]}


def range_is_exact(p, allowed_code, masked_code):
    """True when skipping the masked keys is provably the same bytes in
    TFLM's arithmetic: for every pair of int8 scores, the ADD of the masked
    code lies below the ADD of the allowed code by more than the softmax's
    diff_min cut-off, so a masked key is never the row maximum and its
    exponent and probability are exactly 0 (p + p_offset = 0 in P.V)."""
    from pyembed.model.runtime import add
    s = np.arange(-128, 128, dtype=np.int8)
    words = _add_words(p)
    allowed = add(s, np.array([allowed_code], np.int8), words).astype(np.int64)
    masked = add(s, np.array([masked_code], np.int8), words).astype(np.int64)
    return int(masked.max()) - int(allowed.min()) < int(p["softmax_diff_min"])


def _fc_real(a_scale, b_scale, out_scale):
    # TFLite Micro's BATCH_MATMUL multiplies the two scales in double (the
    # float32 product of the TFLite reference kernels differs in rare ties:
    # measured against the tflite-micro interpreter, see tests)
    return float(a_scale) * float(b_scale) / float(out_scale)


@register("PE_ATTENTION", code=160, c_name="PE_GOP_ATTENTION")
def prepare_pe_attention(c):
    """PE_ATTENTION (pyembed.passes.transformer): int8 multi-head attention, tflm or stream mode, scratch independent of n."""
    op = c.op
    o = op.options
    g = c.graph
    q, k = c.tensor(0, "Q"), c.tensor(1, "K")
    vgen = o.get("v_gen")
    if vgen is not None:
        # generated V: no input; the replaced constant's quantization
        if len(op.inputs) > 2 and op.inputs[2] >= 0:
            raise c.error("options: a generated V (v_gen) and a V tensor together")
        v = g.tensors[vgen["tensor"]]
    else:
        v = c.tensor(2, "V")
    mask = c.tensor(3, "mask", optional=True)
    rng = o.get("range")
    if rng is not None and mask is not None:
        raise c.error("options: a structured mask (range) and a mask tensor together")
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
    if rng is not None:
        p.update(range_kind=rng["kind"], range_lo=rng["lo"], range_hi=rng["hi"], range_len=rng["len"],
                 range_width=rng.get("width", 0))
        if not 1 <= int(rng["len"]) <= o["m"]:
            raise c.error(f"options: range length {rng['len']} outside [1, {o['m']}]")
        if int(rng["kind"]) & RANGE_ROWS and not 1 <= int(rng.get("width", 0)) <= o["m"]:
            raise c.error(f"options: range row width {rng.get('width')} outside [1, {o['m']}]")
    if vgen is not None:
        kind, width, extent = int(vgen["kind"]), int(vgen["width"]), int(vgen["extent"])
        if kind not in (V_INDEX, V_GRID) or o["dv"] != kind:
            raise c.error(f"options: v_gen kind {kind} with dv {o['dv']} (index: dv 1, grid: dv 2)")
        if not 1 <= width or not 1 <= extent <= V_MAX_EXTENT:
            raise c.error(f"options: v_gen width {width} / extent {extent} out of range")
        if o["mode"] == "stream" and mask is not None:
            raise Unsupported("a generated V with a mask tensor in stream mode")
        p.update(v_kind=kind, v_width=width, v_extent=extent)
    lo_keys, hi_keys = key_ranges(o["n"], o["m"], rng)
    if np.any(lo_keys >= hi_keys):
        raise c.error("options: the structured mask leaves a query row without keys")
    if o["mode"] == "tflm" and o["m"] > 32768:
        raise Unsupported(f"{o['m']} keys > 32768 (int32 P.V sums)")
    if o["m"] > 1 << 24:
        raise Unsupported(f"{o['m']} keys > 2^24 (the streaming kernel's int64 sums)")
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
        elif rng is not None:
            # the constant mask's quantization (its tensor stays in the list,
            # unreferenced) gives the ADD applied to the keys in range
            mt = g.tensors[rng["mask_tensor"]]
            s2, z2 = c.qparams(mt, "mask")
            so, zo = c.qparams(g.tensors[o["mask_sum"]], "masked scores")
            m1, sh1, m2, sh2, mo, sho = add_rescale(cur_s, s2, so, 20)
            lo, hi = activation_range(o.get("mask_activation"), so, zo)
            p.update(add_input1_offset=-cur_z, add_input2_offset=-z2, add_output_offset=zo,
                     add_left_shift=20, add_input1_multiplier=m1, add_input1_shift=sh1,
                     add_input2_multiplier=m2, add_input2_shift=sh2, add_output_multiplier=mo,
                     add_output_shift=sho, add_act_min=lo, add_act_max=hi, range_code=rng["allowed_code"])
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
        if rng is not None:
            p["range_exact"] = range_is_exact(p, rng["allowed_code"], rng["masked_code"])
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
        if vgen is not None:
            # pe_attention_nf_vgen_get_buffer_size: one block of generated values
            scratch += p["block"] * o["dv"]
    for key in ("score_shift", "out_shift", "logit_shift", "mul_shift"):
        if not -31 <= p[key] <= 30:
            raise Unsupported(f"{key} {p[key]} outside [-31, 30] (scales too far apart)")
    op.params = p
    op.params["words"] = [int(p[name]) for name in WORDS]
    # keys actually computed per head (n * m without a structured mask)
    op.params["keys"] = int((hi_keys - lo_keys).sum())
    op.macs = int(o["heads"] * op.params["keys"] * (o["d"] + o["dv"]))
    op.scratch_bytes = int(scratch)


PE_GOP_LUT = 161


@register("PE_LUT", code=161, c_name="PE_GOP_LUT")
def prepare_pe_lut(c):
    """PE_LUT (pyembed.passes.elementwise, pyembed.model.float_islands): out[i] = table[in[i] + 128]."""
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


PE_GOP_LAYERNORM = 162
LN_NONE = -1000000          # pe_layernorm.h's PE_LN_NONE: no second operand
LN_MAX_SLOTS = 64
LN_MAX_STEPS = 64
LN_STEP_LUT = 161           # pe_layernorm.h's PE_LN_STEP_LUT (a PE_LUT step, its table a constant)
LN_LUT_ENTRIES = 256
_ADD_WORDS = ("input1_offset", "input2_offset", "output_offset", "left_shift", "input1_multiplier",
              "input1_shift", "input2_multiplier", "input2_shift", "output_multiplier", "output_shift",
              "act_min", "act_max")
_MUL_WORDS = ("input1_offset", "input2_offset", "output_offset", "output_multiplier", "output_shift",
              "act_min", "act_max")


def _step_words(c, sub, lens, litert):
    """The words of one chain operator on row shapes (pe_layernorm.h)."""
    from pyembed.kernels import math_params as mp
    g = c.graph
    p = sub.params
    if sub.type == "ADD":
        return [int(p[k]) for k in _ADD_WORDS]
    if sub.type == "MUL":
        return [int(p[k]) for k in _MUL_WORDS]
    if sub.type == "PE_LUT":
        return []
    if sub.type not in mp.MATH_OPS or "words" not in p:
        raise Unsupported(f"{sub.type} cannot run inside a row chain")
    words = list(p["words_litert"] if litert and "words_litert" in p else p["words"])
    lo, l0, l1 = lens
    if sub.type in ("MEAN", "SUM"):
        x = g.tensors[sub.inputs[0]]
        rank = len(x.shape)
        block = [1 << (rank - 1), rank] + [int(d) for d in x.shape]
        if words[-len(block):] != block:
            raise Unsupported(f"{sub.type} does not reduce the last axis alone")
        return words[:-len(block)] + [1, 1, l0]
    if sub.type in ("SUB", "SQUARED_DIFFERENCE", "PRELU", "MINIMUM", "MAXIMUM"):
        a, b, y = (g.tensors[t] for t in (sub.inputs[0], sub.inputs[1], sub.outputs[0]))
        block = mp.shape_block(tuple(y.shape), tuple(a.shape), tuple(b.shape))
        if words[-len(block):] != block:
            raise c.error(f"{sub.type}'s words do not end in its shape block")
        return words[:-len(block)] + mp.shape_block((lo,), (l0,), (l1,))
    if sub.type == "L2_NORMALIZATION":
        raise Unsupported("L2_NORMALIZATION inside a row chain")
    return words


@register("PE_LAYERNORM", code=162, c_name="PE_GOP_LAYERNORM")
def prepare_pe_layernorm(c):
    """PE_LAYERNORM (pyembed.passes.layernorm): int8 LayerNorm / RMSNorm chains run row by row, bit-exact.

    A row-wise chain of int8 operators (LayerNorm's MEAN, SQUARED_DIFFERENCE,
    ADD, RSQRT, MUL, SUB, NEG, ...) run one row of the last axis at a time
    with the unfused operators' parameters (pe_layernorm.h); options["chain"] holds the
    absorbed operators (prepared), input 0 is the row source, inputs 1.. the
    chain's constants (1 or D values each, or the 256 entries of a PE_LUT
    step: a float island of the chain, pyembed.model.float_islands)."""
    op = c.op
    g = c.graph
    x, y = c.tensor(0, "input"), c.output()
    c.dtype(x, "input")
    c.dtype(y, "output")
    if tuple(x.shape) != tuple(y.shape) or len(x.shape) < 1:
        raise c.error(f"input shape {list(x.shape)} and output shape {list(y.shape)} must be equal")
    depth = int(x.shape[-1])
    rows = int(x.size) // depth
    consts = {}
    chain = op.options.get("chain") or []
    tables = {s.inputs[1] for s in chain if s.type == "PE_LUT" and len(s.inputs) > 1}
    for k in range(1, len(op.inputs)):
        t = c.tensor(k, f"constant {k}")
        c.dtype(t, f"constant {k}")
        c.constant(t, f"constant {k}")
        if op.inputs[k] in tables and t.size == LN_LUT_ENTRIES:
            pass   # a PE_LUT step's table
        elif t.size not in (1, depth) or any(int(s) != 1 for s in tuple(t.shape)[:-1]):
            raise c.error(f"constant {k} has shape {list(t.shape)}: expected one value or a row of {depth}")
        consts[op.inputs[k]] = -k
    if not chain or len(chain) > LN_MAX_STEPS:
        raise c.error(f"options: chain must hold 1..{LN_MAX_STEPS} operators, has {len(chain)}")
    slots = {op.inputs[0]: 0, op.outputs[0]: 1}
    slot_len = [depth, depth]
    for sub in chain:
        if not sub.supported:
            raise Unsupported(f"chain operator {sub.type}: {sub.reason}")
        t = sub.outputs[0]
        if t not in slots:
            ts = g.tensors[t]
            if int(ts.size) == rows * depth and tuple(ts.shape) == tuple(x.shape):
                slot_len.append(depth)
            elif int(ts.size) == rows and (len(ts.shape) == 0 or int(ts.shape[-1]) == 1 or depth == 1):
                slot_len.append(1)
            else:
                raise c.error(f"chain tensor {ts.name} of shape {list(ts.shape)} is neither a row nor one "
                              f"value per row of {list(x.shape)}")
            slots[t] = len(slot_len) - 1
    if len(slot_len) > LN_MAX_SLOTS:
        raise Unsupported(f"{len(slot_len)} row buffers > {LN_MAX_SLOTS}")

    def ref(t):
        if t < 0:
            return LN_NONE
        if t in slots:
            return slots[t]
        if t in consts:
            return consts[t]
        raise c.error(f"chain operand {g.tensors[t].name} is neither a chain tensor nor an input")

    def length(t):
        if t < 0:
            return 0
        return slot_len[slots[t]] if t in slots else int(g.tensors[t].size)

    def program(litert):
        words = [rows, depth, len(slot_len), len(chain)] + slot_len
        for sub in chain:
            ins = [t for t in sub.inputs]
            if sub.type in ("MEAN", "SUM"):
                ins = ins[:1]
            in0 = ins[0]
            in1 = ins[1] if len(ins) > 1 else -1
            sw = _step_words(c, sub, (length(sub.outputs[0]), length(in0), length(in1)), litert)
            code = 7 if sub.type == "ADD" else 8 if sub.type == "MUL" else LN_STEP_LUT if sub.type == "PE_LUT" \
                else None
            if code is None:
                from pyembed.kernels import math_params as mp
                code = mp.MATH_OPS[sub.type]
            words += [code, ref(in0), ref(in1), slots[sub.outputs[0]], len(sw)] + sw
        return [int(w) for w in words]

    words = program(False)
    op.params = {"words": words}
    lit = program(True)
    if lit != words:
        op.params["words_litert"] = lit
    op.macs = int(sum(int(np.prod(g.tensors[s.outputs[0]].shape)) for s in chain))
    op.params["work_elements"] = op.macs
    op.scratch_bytes = int(sum(slot_len[2:]))


PE_GOP_LAYERNORM_HP = 163


@register("PE_LAYERNORM_HP", code=163, c_name="PE_GOP_LAYERNORM_HP")
def prepare_pe_layernorm_hp(c):
    """PE_LAYERNORM_HP (pyembed.passes.layernorm, mode="precise"): LayerNorm in integers, one rounding (not bit-exact).

    Inputs: x, the gamma and beta rows as int32 Q16 multiples of the output
    scale (made by the pass from the chain's float64 semantics);
    options["eps"], the epsilon; options["chain"] the absorbed operators
    (the float64 reference). Words (pe_layernorm.h): rows, D, x_zp, out_zp,
    E low 31 bits, E high bits, E = round(D^2 eps / sx^2)."""
    op = c.op
    x, gq, bq, y = c.tensor(0, "input"), c.tensor(1, "gamma row"), c.tensor(2, "beta row"), c.output()
    c.dtype(x, "input")
    c.dtype(y, "output")
    for t, what in ((gq, "gamma row"), (bq, "beta row")):
        c.dtype(t, what, (np.int32,))
        c.constant(t, what)
    if tuple(x.shape) != tuple(y.shape) or len(x.shape) < 1:
        raise c.error(f"input shape {list(x.shape)} and output shape {list(y.shape)} must be equal")
    depth = int(x.shape[-1])
    if not 2 <= depth <= 4096:
        raise Unsupported(f"row of {depth} values (2..4096)")
    if gq.size != depth or bq.size != depth:
        raise c.error(f"gamma / beta rows must hold {depth} values")
    if np.any(np.abs(np.asarray(gq.data, np.int64)) >= 1 << 24):
        raise Unsupported("gamma / output scale >= 256")
    xs, xz = c.qparams(x, "input")
    _, yz = c.qparams(y, "output")
    eps = float(op.options.get("eps", 0.0))
    if not eps >= 0:
        raise c.error(f"options: eps must be >= 0, got {eps}")
    e = max(1, int(round(depth * depth * eps / (float(xs) ** 2))))
    if e >= 1 << 60:
        raise Unsupported("epsilon too large against the input scale")
    op.params = {"words": [int(x.size) // depth, depth, int(xz), int(yz), e & 0x7FFFFFFF, e >> 31]}
    op.macs = int(3 * x.size)
    op.scratch_bytes = 0
