"""Cycles of pyembed's own kernels on a Cortex-M4 / M7: instructions predicted
from the operator's shape, times the cycles per instruction of each class.

    cycles(op) = instructions(op) * sum over classes c of mix(op)[c] * CPI[core][c]
                 (+ the registers an LDM/STM moves, times their per-register cycles)

* ``instructions(op)`` = sum_j coef[group][j] * feature_j(op): a linear model
  per operator group (type and kernel form, e.g. ``CONV_2D/gather``), fitted by
  non-negative least squares on relative error to QEMU instruction counts of
  pyembed's firmware (``python -m pyembed.bench calibrate --qemu-write`` writes
  the table ``firmware_sim/profiles/pyembed_icount.json``; nothing in it is
  typed by hand). One table per core and build: ``dsp`` (the Arm DSP-extension
  inner loops a Cortex-M4/M7 compiles) and ``portable`` (``-DPE_FORCE_PORTABLE``).
* ``mix(op)``: the executed instruction mix of the group, measured by tracing
  the same firmware runs (pyembed.target.imix), as fractions.
* ``CPI``: per instruction class, below, from ARM's documentation.

Features (``features``): ``call`` (1), ``macs``, ``outputs`` (output elements),
``pixels`` (output positions n*h*w), ``rows`` (n*h), ``dot_loops`` (the inner
dot products the gather kernels run: positions x output-channel blocks x taps),
``tail_macs`` (MACs over the input-channel remainder not a multiple of 4),
``mult_macs`` (MACs of a depthwise with channel multiplier > 1), ``odd_col_macs``
(MACs of the output column a convolution of odd output width cannot pair), ``batches``.

The compiler pipeline's operators (pyembed.passes.pipeline) have groups of
their own, never a kernel class's (their cost is not a convolution's):
``PE_STRIPE_REGION`` reads its layers from its parameter words (kind,
channels, kernel, stride, padding per layer; the output shape of each
follows from the region's input) and prices what the stripe executor does
with them, per stripe, per row, per column block, per output position and
per element of each layer, the halo columns each layer recomputes in each
stripe included (firmware_sim.icount_region: ``layers``, ``layer_stripes``,
``layer_rows``, ``in_rows``, ``blocks``, ``pixels``, ``window_taps``,
``conv_macs`` / ``dw_macs`` / ``pw_macs`` / ``pool_macs``, ``dot_calls``,
``tail_macs``, ``outputs``, ``in_elements`` and ``bilinear_outputs``, the
output elements of its RESIZE_BILINEAR layers, kind
11). A stand-alone RESIZE_BILINEAR has a group of its own too (``call``,
``outputs``, ``pixels``). The float32 kernels' groups: firmware_sim.icount_f32.
``PE_CONV_POOL`` (its words): ``macs`` (the convolution's),
``outputs`` (convolution outputs, never stored), ``pool_outputs``, ``rows``
(convolution rows) and ``pool_taps``.

CPI tables. Cortex-M4: ARM Cortex-M4 Processor Technical Reference Manual
r0p1 (ARM 100166_0001_00), section 3.3.1 "Table of processor instructions",
Table 3-1, and section 3.3.2 "Load/store timings" (zero-wait memory):
ALU / MOV / shifts / compares / extends / SSAT 1; MUL, MLA, MLS, SMULL, SMLAL
and the halfword multiplies 1; the DSP SIMD and dual-MAC instructions (SMLAD,
SXTB16, SADD16, QADD ...) 1; LDR 2, but a load after a load is pipelined: one
cycle less (3.3.2: "LDR R0,[R1]; LDR R1,[R2] - normally three cycles total");
STR 1 (3.3.2: "STR Rx,[Ry,#imm] is always one cycle", the write buffer); LDRD /
STRD 1+N = 3; LDM / STM / PUSH / POP 1+N (N registers); branch taken 1+P with
P, the pipeline refill, "1 to 3": we take P = 2; a conditional branch not
taken 1; SDIV / UDIV "2 to 12": we take 7; anything else 1.

Cortex-M7: ARM does not publish an instruction timing table for the
Cortex-M7 (its TRM, ARM DDI 0489, describes a 6-stage in-order superscalar
pipeline that can issue two instructions per cycle, one load/store pipe, one
MAC pipe, a 64-bit TCM/AXI data path and a branch target cache, without cycle
counts). Stated assumption, not a measurement: ALU instructions and
not-taken branches dual-issue with a neighbour (0.5 each); MUL/MLA, DSP, loads,
stores and LDRD/STRD take their pipe's single slot (1 each; a pipelined load
also 1); LDM/STM move two registers per cycle on the 64-bit path (1 + N/2);
taken branches are predicted by the branch target cache (1); SDIV/UDIV 7 (the
M4's midpoint, same divider class); anything else 1.
"""
import math

import numpy as np

from firmware_sim.icount_f32 import F32_FEATURES, float32_class, float32_name, window_features
from firmware_sim.icount_region import REGION_FEATURES, WIDE_REGION_FEATURES, region_features

CLASSES = ("alu", "mul", "dsp", "load", "load_pipelined", "store", "ldrd_strd", "ldm_stm",
           "branch_taken", "branch_not_taken", "div", "other")

# cycles per instruction of each class (ldm_stm: per instruction; ldm_stm_regs: per register moved)
CPI = {
    "cortex-m4": {"alu": 1.0, "mul": 1.0, "dsp": 1.0, "load": 2.0, "load_pipelined": 1.0, "store": 1.0,
                  "ldrd_strd": 3.0, "ldm_stm": 1.0, "ldm_stm_regs": 1.0, "branch_taken": 3.0,
                  "branch_not_taken": 1.0, "div": 7.0, "other": 1.0},
    "cortex-m7": {"alu": 0.5, "mul": 1.0, "dsp": 1.0, "load": 1.0, "load_pipelined": 1.0, "store": 1.0,
                  "ldrd_strd": 1.0, "ldm_stm": 1.0, "ldm_stm_regs": 0.5, "branch_taken": 1.0,
                  "branch_not_taken": 0.5, "div": 7.0, "other": 1.0},
}
# Cortex-M33 / M55: no timing table is used for them yet; the Cortex-M4's is assumed (their instruction
# tables, pyembed_icount.json, are fitted on their own QEMU counts: python -m pyembed.bench calibrate_qemu
# --cores cortex-m33,cortex-m55 --builds dsp --no-trace --write)
CPI["cortex-m33"] = dict(CPI["cortex-m4"])
CPI["cortex-m55"] = dict(CPI["cortex-m4"])
CPI_SOURCE = {
    "cortex-m4": "ARM Cortex-M4 TRM r0p1 (ARM 100166_0001_00) section 3.3.1 Table 3-1 and 3.3.2 load/store "
                 "timings; assumed P (pipeline refill) = 2, SDIV/UDIV = 7 of 2-12",
    "cortex-m7": "assumption (ARM publishes no Cortex-M7 timing table; TRM ARM DDI 0489 describes the dual-issue "
                 "pipeline): ALU and not-taken branches pair (0.5), one load/store and one MAC pipe (1), "
                 "LDM/STM 2 registers per cycle, taken branches predicted (1), divide 7",
    "cortex-m33": "assumption: the Cortex-M4 table (ARM Cortex-M4 TRM r0p1 Table 3-1), not the Cortex-M33's",
    "cortex-m55": "assumption: the Cortex-M4 table (ARM Cortex-M4 TRM r0p1 Table 3-1), not the Cortex-M55's",
}

FEATURES = {
    "conv": ("call", "macs", "outputs", "pixels", "rows", "dot_loops", "tail_macs", "odd_col_macs"),
    "depthwise": ("call", "macs", "outputs", "pixels", "rows", "dot_loops", "mult_macs"),
    "fc": ("call", "macs", "outputs", "batches"),
    "pool": ("call", "macs", "outputs"),
    "eltwise": ("call", "outputs"),
    "softmax": ("call", "outputs", "rows"),
    "copy": ("call", "outputs"),
    "alias": ("call",),
    "other": ("call", "outputs"),
    **F32_FEATURES,   # the float32 kernels' classes (firmware_sim.icount_f32)
}
# groups with their own features (and no kernel-class fallback)
GROUP_FEATURES = {
    # the stripe executor's work per call, stripe, row, column block, position and element of every layer,
    # halo columns included (firmware_sim.icount_region)
    "PE_STRIPE_REGION": REGION_FEATURES,
    # a region in wide blocks (block width >= WIDE_BLOCK_MIN): the C executor's row loops (conv rows,
    # window patches), another cost per MAC, fitted on its own (fewer rows: fewer features)
    "PE_STRIPE_REGION/wide": WIDE_REGION_FEATURES,
    "PE_CONV_POOL": ("call", "macs", "outputs", "pool_outputs", "rows", "pool_taps"),
    # stand-alone int8 RESIZE_BILINEAR (pe_resize.c): the source rows, columns and weights of each output
    # position ("pixels"), then the four-tap interpolation of each element; fitted by python -m pyembed.bench
    # calibrate_bilinear (a table without it prices the operator by the class table)
    "RESIZE_BILINEAR": ("call", "outputs", "pixels"),
}
# groups with features of their own that sit in front of the usual keys (a table without them keeps the
# kernel-class fallback): the transformer operators (pe_transformer.c tflm_row, pe_layernorm.c), fitted by
# python -m pyembed.bench calibrate_transformer
OWN_FEATURES = {
    # per query row and head: m dot products of d (qk) and dv of m (av), each score requantized, scaled,
    # masked and through TFLite's softmax (two passes), dv outputs requantized
    "PE_ATTENTION/tflm": ("call", "attn_rows", "attn_scores", "macs", "attn_outputs", "attn_mask_scores"),
    # per row, each chain step runs one kernel call over a row (or one value): rows x steps calls, the
    # chain's elements (work_elements) and the row elements its reductions read
    "PE_LAYERNORM": ("call", "ln_rows", "ln_row_steps", "macs", "ln_reduce_elements", "ln_math_elements"),
    # a fused element-wise chain (pe_lut_s8): one table lookup per element
    "PE_LUT": ("call", "outputs"),
    # an int8 FULLY_CONNECTED of more than one row (pe_fc.c fc_s8_run: fc_row_dsp once per row; a row's
    # features in blocks of four over the depth in steps of 16 (8 on the short path), the depth's remainder
    # byte by byte for every feature (fc_tail_macs), the features % 4 last ones one dot product each
    # (fc_single_macs)); the CNN's one-row layers keep FULLY_CONNECTED's group
    # fc_channel_outputs: the outputs of a layer with a weight scale per feature (the converter's), which
    # fc_requant_general requantizes one at a time instead of fc_requant_tensor's register loop
    "FULLY_CONNECTED/rows": ("call", "batches", "macs", "outputs", "fc_tail_macs", "fc_single_macs",
                             "fc_channel_outputs"),
    # an int8 SOFTMAX of more than one row (pe_softmax.c softmax_row per row: max, sum and output passes over
    # every element; the exponential only where the difference to the row's maximum reaches diff_min and is
    # not zero: softmax_exp_elements, the elements but each row's maximum, times the part of the int8 range
    # diff_min lets in (a wide input scale, as a -1e9 mask makes, leaves only the maxima: diff_min 0))
    # softmax_tie_elements: at diff_min 0 (an input step wider than the exponential's range, as the -FLT_MAX
    # mask's quantization makes) the elements that equal their row's maximum, but the maximum: every element a
    # constant SELECT_V2 mask leaves (the scores round onto one level), else every element
    "SOFTMAX/rows": ("call", "softmax_rows", "outputs", "softmax_exp_elements", "softmax_tie_elements"),
    # an int8 BATCH_MATMUL (pe_matmul.c matmul_one: per output row, the columns four at a time over the depth,
    # the columns % 4 last ones one at a time: mm_single_macs)
    "BATCH_MATMUL/s8": ("call", "mm_rows", "macs", "outputs", "mm_single_macs"),
    # TRANSPOSE (pe_shape_ops.c: the walk with adjacent axes merged, one copy_run per innermost run, the
    # runs' elements strided unless both sides step by one)
    "TRANSPOSE/walk": ("call", "outputs", "copy_runs", "strided_outputs"),
}
# pe_pipeline.h
_REGION_HEADER, _REGION_LAYER = 5, 32
_KIND = {0: "conv", 1: "dw", 2: "pw", 3: "pool", 4: "add", 5: "upsample", 6: "concat", 7: "table", 8: "upsample",
         9: "depth_to_space", 10: "space_to_depth", 11: "bilinear",
         12: "crop"}
GATHER_DW_BLOCK = 16     # csrc/src/kernels/conv/pe_conv_gather.c PE_GATHER_DW_BLOCK
# the convolutions with the shape features below: int8 filters, and the packed-int4 forms
# (pyembed.model.ops.conv_w4; their own groups, fitted on their own QEMU counts)
W4_TYPES = ("CONV_2D@w4", "DEPTHWISE_CONV_2D@w4")
CONV_FEATURE_TYPES = ("CONV_2D", "DEPTHWISE_CONV_2D") + W4_TYPES
WIDE_BLOCK_MIN = 32      # csrc/src/pipeline/pe_stripe_internal.h PE_STRIPE_CONV_MIN_COLS


def _input_channels(graph, op):
    if not op.inputs or op.inputs[0] < 0:
        return None
    shape = graph.tensors[op.inputs[0]].shape
    return int(shape[-1]) if len(shape) else None


def group_keys(graph, op, kc):
    """A float32 kernel's operator: ['TYPE@float32', 'class:f32_<kind>'] (firmware_sim.icount_f32).
    Otherwise most to least specific: 'DEPTHWISE_CONV_2D/c1' (a one-channel input in the gather form, which
    runs pe_depthwise_conv2d_c1_s8), 'TYPE/form', 'TYPE', kernel class kc
    (firmware_sim.cost.kernel_class), 'other'."""
    if op.type == "PE_ATTENTION" and isinstance(op.options, dict) and op.options.get("mode") == "tflm":
        return ["PE_ATTENTION/tflm", op.type, f"class:{kc}", "class:other"]
    own = _own_shape_group(graph, op)
    if own is not None:
        return [own, op.type, f"class:{kc}", "class:other"]
    if op.type in GROUP_FEATURES:
        params = op.params if isinstance(op.params, dict) else {}
        if op.type == "PE_STRIPE_REGION" and "words" in params and \
                int(np.asarray(params["words"]).ravel()[3]) >= WIDE_BLOCK_MIN:
            return ["PE_STRIPE_REGION/wide", op.type]
        return [op.type]
    f32 = float32_name(op)
    if f32 is not None:      # a float32 kernel: its own group, then its float32 class, never an int8 one
        return [f32, f"class:{float32_class(op)}"]
    keys = []
    form = ((op.params or {}).get("conv_form") or (op.params or {}).get("pool_form")) \
        if isinstance(op.params, dict) else None
    if form == "gather" and op.type == "DEPTHWISE_CONV_2D" and _input_channels(graph, op) == 1:
        keys.append(f"{op.type}/c1")    # the runtime runs it on pe_depthwise_conv2d_c1_s8
    if form:
        keys.append(f"{op.type}/{form}")
    keys.append(op.type if kc != "alias" else "alias")
    keys += [f"class:{kc}", "class:other"]
    return keys


def _int8_io(graph, op):
    ts = [graph.tensors[t] for t in list(op.inputs[:1]) + list(op.outputs[:1]) if t >= 0]
    return len(ts) == 2 and all(np.dtype(t.dtype) == np.int8 for t in ts)


def _own_shape_group(graph, op):
    """The transformer-shaped forms with groups of their own (OWN_FEATURES): an int8 FULLY_CONNECTED or
    SOFTMAX of more than one row, an int8 TRANSPOSE; None otherwise (and for a form with a rewritten
    kernel: params with 'f32', a w16 / w4 type)."""
    params = op.params if isinstance(op.params, dict) else {}
    if "f32" in params or not op.inputs or not op.outputs or not _int8_io(graph, op):
        return None
    if op.type == "FULLY_CONNECTED" and int(params.get("batches", 1) or 1) > 1 and "depth" in params:
        return "FULLY_CONNECTED/rows"
    if op.type == "SOFTMAX":
        y = graph.tensors[op.outputs[0]].shape
        if len(y) >= 2 and int(np.prod(y[:-1])) > 1:
            return "SOFTMAX/rows"
    if op.type == "TRANSPOSE" and _transpose_perm(graph, op) is not None:
        return "TRANSPOSE/walk"
    if op.type == "BATCH_MATMUL" and "out_shape" in params:
        return "BATCH_MATMUL/s8"
    return None


def _unmasked(graph, op):
    """The elements of op's input a constant SELECT_V2 mask does not replace by its constant (all of them when
    the input is not such a mask's output)."""
    t = op.inputs[0]
    n = float(int(np.prod(graph.tensors[t].shape)))
    prod = next((p for p in graph.operators if t in p.outputs), None)
    if prod is None or prod.type != "SELECT_V2" or len(prod.inputs) < 3:
        return n
    cond, a, b = (graph.tensors[i] for i in prod.inputs[:3])
    if cond.data is None or (a.data is None) == (b.data is None):
        return n
    keep = np.broadcast_to(np.asarray(cond.data, bool), graph.tensors[t].shape)
    return float(np.count_nonzero(keep if b.data is not None else ~keep))


def _transpose_perm(graph, op):
    perm = op.options.get("perm") if isinstance(op.options, dict) else None
    if perm is None and isinstance(op.params, dict):
        perm = op.params.get("perm")
    if perm is None and len(op.inputs) > 1 and op.inputs[1] >= 0:
        perm = graph.tensors[op.inputs[1]].data
    if perm is None:
        return None
    perm = [int(p) for p in np.asarray(perm).ravel()]
    return perm if len(perm) == len(graph.tensors[op.inputs[0]].shape) else None


def _transpose_features(graph, op, f):
    """pe_transpose_x's walk: output axis k steps the input by the input stride of perm[k]; walk_compact
    merges adjacent axes both sides step through as one and drops axes of one; the innermost merged axis is
    one copy_run (a byte loop if both strides are 1, else a strided one) per position of the others."""
    perm = _transpose_perm(graph, op)
    x = [int(d) for d in graph.tensors[op.inputs[0]].shape]
    n = len(x)
    ins = [int(np.prod(x[k + 1:])) for k in range(n)]
    y = [x[p] for p in perm]
    outs = [int(np.prod(y[k + 1:])) for k in range(n)]
    axes = []   # innermost first: [count, in_stride, out_stride]
    for k in range(n - 1, -1, -1):
        c, si, so = y[k], ins[perm[k]], outs[k]
        if c == 1:
            continue
        if axes and si == axes[-1][1] * axes[-1][0] and so == axes[-1][2] * axes[-1][0]:
            axes[-1][0] *= c
        else:
            axes.append([c, si, so])
    total = int(np.prod(y)) if y else 1
    inner = axes[0] if axes else [1, 1, 1]
    f["copy_runs"] = float(total // max(inner[0], 1))
    f["strided_outputs"] = 0.0 if inner[1] == 1 and inner[2] == 1 else float(total)


def _fc_rows_features(graph, op, f):
    """pe_fc.c fc_row_dsp per row: symmetric weights, depth >= 16 and >= 8 features run fc_row_blocks
    (four features at a time over depth & ~15, the rest of the depth byte by byte per feature), else
    fc_dots_dsp (depth & ~7 in the four-row block, the rest per feature); the features % 4 last ones by
    dot1_dsp (all of their MACs)."""
    params = op.params
    rows, depth = int(params.get("batches", 1) or 1), int(params["depth"])
    feats = int(graph.tensors[op.outputs[0]].shape[-1])
    w = graph.tensors[op.inputs[1]]
    zp = w.zero_point
    symmetric = zp is None or not np.any(np.asarray(zp))
    if symmetric and depth >= 16 and feats >= 8:
        tail = depth % 16
    elif symmetric and depth >= 8:
        tail = depth % 8
    else:
        tail = depth % 4
    f4 = feats & ~3
    f["fc_tail_macs"] = float(rows * f4 * tail)
    f["fc_single_macs"] = float(rows * (feats - f4) * depth)
    f["fc_channel_outputs"] = f["outputs"] if w.scale is not None and np.size(w.scale) > 1 else 0.0


def region_layers(graph, op):
    """[(kind, out_h, out_w, out_c, macs)] of a PE_STRIPE_REGION's layers, from its words and the
    shape of its input; kind one of conv, dw, pw, pool (macs = taps), add, upsample, concat, table,
    depth_to_space, crop, bilinear (macs 0: the region's groups price its output elements,
    bilinear_outputs, firmware_sim.icount_region)."""
    w = [int(v) for v in np.asarray(op.params["words"]).ravel()]
    x = graph.tensors[op.inputs[0]].shape
    h, wd = int(x[-3]), int(x[-2])
    out = []
    for i in range(w[1]):
        lw = w[_REGION_HEADER + _REGION_LAYER * i:_REGION_HEADER + _REGION_LAYER * (i + 1)]
        kind, in_c, out_c, kh, kw, sh, sw = _KIND.get(lw[0], "other"), lw[1], lw[2], lw[3], lw[4], lw[5], lw[6]
        pt, pb, pl, pr = lw[7:11]
        dh, dw = (lw[31] // 256, lw[31] % 256) if lw[31] else (1, 1)   # conv / depthwise dilation
        if lw[0] == 5:                               # PE_STRIPE_UPSAMPLE2X
            h, wd = 2 * h, 2 * wd
        elif kind in ("upsample", "depth_to_space", "bilinear"):   # factors / block in the stride words
            h, wd = h * max(sh, 1), wd * max(sw, 1)
        elif kind == "crop":                          # rows, columns dropped in the bottom, right padding words
            h, wd = h - pb, wd - pr
        elif kind in ("conv", "dw", "pw", "pool", "space_to_depth"):   # space to depth: b x b at stride b
            eh, ew = (kh - 1) * dh + 1, (kw - 1) * dw + 1                 # the window's extent
            h, wd = (h + pt + pb - eh) // max(sh, 1) + 1, (wd + pl + pr - ew) // max(sw, 1) + 1
        taps = kh * kw
        if kind == "conv" and lw[17] > 1:             # a grouped conv: in_c / groups per output
            in_c //= lw[17]
        macs = h * wd * out_c * (taps * in_c if kind in ("conv", "pw") else taps if kind in ("dw", "pool") else 0)
        out.append((kind, h, wd, out_c, macs))
    return out


def _region_features(graph, op, f):
    region_features(op.params["words"], graph.tensors[op.inputs[0]].shape, f)


def _conv_pool_features(graph, op, f):
    w = [int(v) for v in np.asarray(op.params["words"]).ravel()]
    ch, cw = w[13], w[14]
    y = graph.tensors[op.outputs[0]].shape
    oc = int(y[-1])
    f["outputs"] = float(ch * cw * oc)
    f["pool_outputs"] = float(int(np.prod(y)))
    f["rows"] = float(ch)
    f["pool_taps"] = float(int(np.prod(y)) * w[16] * w[17])


def features(graph, op):
    """{feature: value} of an operator (all the features any group uses)."""
    outs = [graph.tensors[o] for o in op.outputs if o >= 0]
    outputs = sum(int(np.prod(t.shape)) for t in outs)
    params = op.params if isinstance(op.params, dict) else {}
    f = {"call": 1.0, "macs": float(int(getattr(op, "macs", 0) or 0)), "outputs": float(outputs)}
    y = outs[0].shape if outs else (1,)
    c = int(y[-1]) if len(y) else 1
    f["pixels"] = float(outputs // max(c, 1))
    f["rows"] = float(int(np.prod(y[:-1])) // (int(y[-2]) if len(y) >= 3 else 1)) if len(y) >= 2 else 1.0
    f["batches"] = float(params.get("batches", f["pixels"]) or 1)
    f["dot_loops"] = f["tail_macs"] = f["mult_macs"] = f["odd_col_macs"] = 0.0
    if op.type in CONV_FEATURE_TYPES and len(op.inputs) > 1:
        kh, kw = params.get("kernel", (1, 1))
        taps = int(kh) * int(kw)
        ow = int(y[-2]) if len(y) >= 3 else 1
        # the reverse kernels pair output columns; an odd width leaves one column per row unpaired
        f["odd_col_macs"] = f["macs"] * (ow % 2) / max(ow, 1)
        # (a packed-int4 filter is a byte string: its shape is the option's)
        shape = op.options["filter_shape"] if op.type in W4_TYPES else graph.tensors[op.inputs[1]].shape
        if op.type in ("CONV_2D", "CONV_2D@w4"):
            groups = int(params.get("groups", 1) or 1)
            ic_g = int(shape[-1])
            oc_g = c // max(groups, 1)
            f["dot_loops"] = f["pixels"] * groups * math.ceil(oc_g / 4) * taps
            f["tail_macs"] = f["pixels"] * c * taps * (ic_g % 4)
        else:
            f["dot_loops"] = f["pixels"] * math.ceil(c / GATHER_DW_BLOCK) * taps
            if int(params.get("depth_multiplier", 1) or 1) > 1:
                f["mult_macs"] = f["macs"]
    if "f32" in params:
        window_features(graph, op, f)
    elif op.type == "PE_STRIPE_REGION" and "words" in params:
        _region_features(graph, op, f)
    elif op.type == "PE_CONV_POOL" and "words" in params:
        _conv_pool_features(graph, op, f)
    own = _own_shape_group(graph, op)
    if own == "FULLY_CONNECTED/rows":
        _fc_rows_features(graph, op, f)
    elif own == "SOFTMAX/rows":
        rows = int(np.prod(graph.tensors[op.outputs[0]].shape[:-1]))
        reach = min(1.0, -float(params.get("diff_min", -255)) / 255.0)
        f["softmax_rows"] = float(rows)
        f["softmax_exp_elements"] = (f["outputs"] - rows) * max(reach, 0.0)
        f["softmax_tie_elements"] = max(_unmasked(graph, op) - rows, 0.0) if reach <= 0.0 else 0.0
    elif own == "TRANSPOSE/walk":
        _transpose_features(graph, op, f)
    elif own == "BATCH_MATMUL/s8":
        y = [int(d) for d in params["out_shape"]]
        f["mm_rows"] = float(int(np.prod(y[:-1])))
        depth = f["macs"] / max(float(int(np.prod(y))), 1.0)
        f["mm_single_macs"] = f["mm_rows"] * (y[-1] % 4) * depth
    if op.type == "PE_ATTENTION" and isinstance(op.options, dict) and "heads" in op.options:
        _attention_features(op, f)
    elif op.type == "PE_LAYERNORM" and "words" in params:
        _layernorm_features(params["words"], f)
    return f


_LN_OWN_STEPS = (7, 8, 161)   # pe_layernorm.c's own ADD, MUL and table steps (the rest: pe_math_invoke)


def _layernorm_features(words, f):
    """PE_LAYERNORM's program (pe_layernorm.h): rows, depth, slots, steps, the slots' lengths, then per step
    code, in0, in1, out, word count and its words. ln_reduce_elements: the row elements the steps that
    leave one value per row (MEAN, SUM) read, which work_elements (the outputs) does not count;
    ln_math_elements: the output elements of the steps run by pe_math_invoke (MEAN, SQUARED_DIFFERENCE,
    SUB, RSQRT, NEG ...), dearer than the chain's own ADD / MUL / table steps."""
    w = [int(v) for v in np.asarray(words).ravel()]
    rows, nslots, nsteps = w[0], w[2], w[3]
    slot_len = w[4:4 + nslots]
    f["ln_rows"] = float(rows)
    f["ln_row_steps"] = float(rows * nsteps)
    at, reads, math = 4 + nslots, 0, 0
    for _ in range(nsteps):
        code, in0, out, nw = w[at], w[at + 1], w[at + 3], w[at + 4]
        if 0 <= out < nslots and slot_len[out] == 1 and 0 <= in0 < nslots and slot_len[in0] > 1:
            reads += slot_len[in0]
        if code not in _LN_OWN_STEPS and 0 <= out < nslots:
            math += slot_len[out]
        at += 5 + nw
    f["ln_reduce_elements"] = float(rows * reads)
    f["ln_math_elements"] = float(rows * math)


def _attention_features(op, f):
    o = op.options
    params = op.params if isinstance(op.params, dict) else {}
    heads, n, m = int(o["heads"]), int(o["n"]), int(o["m"])
    keys = int(params.get("keys", n * m))
    f["attn_rows"] = float(heads * n)
    f["attn_scores"] = float(heads * keys)
    f["attn_outputs"] = float(heads * n * int(o["dv"]))
    masked = params.get("has_mask") or params.get("range_kind") or (len(op.inputs) > 3 and op.inputs[3] >= 0)
    f["attn_mask_scores"] = float(heads * keys) if masked else 0.0


def feature_names(kc, group=None):
    """The features of a group (group key, kernel class kc)."""
    if group in GROUP_FEATURES:
        return GROUP_FEATURES[group]
    if group in OWN_FEATURES:
        return OWN_FEATURES[group]
    return FEATURES.get(kc, FEATURES["other"])


# operators predicted as the sum of the operators they run (params["members"]): a
# convolution streamed into a fully connected layer (pyembed.passes.conv_fc) runs the
# convolution's kernel band by band and the layer's dot products slice by slice
MEMBER_GROUPS = ("PE_CONV_FC",)


def _members(op):
    params = op.params if isinstance(op.params, dict) else {}
    return params.get("members") or ()


def instructions(table, graph, op, kc, kind_of=None):
    """Predicted instructions of op (kernel class kc) with a fitted table ({group: {"coef": {...},
    "mix": {...}}}); returns (instructions, group used). kind_of(op type) -> kernel class
    (firmware_sim.cost.kernel_class) for the members of a MEMBER_GROUPS operator (default: kc)."""
    if op.type in MEMBER_GROUPS and _members(op):
        total = 0.0
        for m in _members(op):
            n, key = instructions(table, graph, m, kind_of(m.type) if kind_of else kc, kind_of)
            if key is None:
                return 0.0, None
            total += n
        return total, op.type
    f = features(graph, op)
    for key in group_keys(graph, op, kc):
        g = table.get(key)
        if g is not None:
            return max(0.0, sum(v * f.get(k, 0.0) for k, v in g["coef"].items())), key
    return 0.0, None


def cpi_of_mix(core, mix):
    """Cycles per instruction of an instruction mix (fractions of instructions per class, plus
    ldm_stm_regs per instruction) with the core's CPI table."""
    cpi = CPI[core]
    return sum(cpi[k] * v for k, v in mix.items() if k in cpi)


def cycles(table, core, graph, op, kc, kind_of=None):
    """(cycles, instructions, group, CPI) of op (kernel class kc): predicted instructions x the CPI of
    the group's mix (kind_of: as instructions')."""
    if op.type in MEMBER_GROUPS and _members(op):
        cyc = n = 0.0
        for m in _members(op):
            c, k, key, _cpi = cycles(table, core, graph, m, kind_of(m.type) if kind_of else kc, kind_of)
            if key is None:
                return 0.0, 0.0, None, 0.0
            cyc, n = cyc + c, n + k
        return cyc, n, op.type, (cyc / n if n else 0.0)
    n, key = instructions(table, graph, op, kc)
    if key is None:
        return 0.0, 0.0, None, 0.0
    c = cpi_of_mix(core, table[key]["mix"])
    return n * c, n, key, c
