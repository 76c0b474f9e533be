"""The transformer operators in the instruction model (issues #29 / #30): PE_ATTENTION (tflm mode) and
PE_LAYERNORM (and PE_LUT) measured on QEMU and fitted as groups of their own.

    python -m pyembed.bench calibrate_transformer [--boards mps2-an386,mps2-an500] [--write] [--json]
                                                  [--save F.json | --load F.json]

Before this, the fused attention of tflm mode (pe_transformer.c tflm_row) was priced as a fully connected
layer on its MACs (class:fc) and the LayerNorm row chain (pe_layernorm.c) as an int8 element-wise operator on
its work elements (class:eltwise): the converter-made keyword transformer (tests/data/converter/seq_kwt.tflite)
measured 2,913,000 instructions on mps2-an386 against 747,856 predicted.

What the kernels do, and so the features (firmware_sim.icount.OWN_FEATURES):
* PE_ATTENTION/tflm, per head and query row (``attn_rows``): m dot products of d, each score requantized,
  multiplied by the scale constant (pe_mul_s8), masked (pe_add_s8, ``attn_mask_scores``), TFLite's softmax
  over the row (``attn_scores``: heads x keys), then dv dot products of m and dv requantized outputs
  (``attn_outputs``); ``macs`` = heads x keys x (d + dv), ``call``.
* PE_LAYERNORM, per row (``ln_rows``) each step of the chain is one kernel call (``ln_row_steps``) over a row
  or one value (the chain's elements: ``macs``, its work_elements; the row elements its MEANs read:
  ``ln_reduce_elements``; the elements of the steps pe_math_invoke runs, dearer than the chain's own ADD /
  MUL: ``ln_math_elements``), ``call``.
* PE_LUT (a fused element-wise chain such as the converter's GELU, one table lookup per element): ``call``,
  ``outputs`` (it fell back to class:other, a constant per call: -92 % on the KWT's two GELUs).
* FULLY_CONNECTED/rows, an int8 FULLY_CONNECTED over more than one row (the token rows of a transformer; the
  CNNs' one-row layers keep FULLY_CONNECTED's group): per row (``batches``) fc_row_dsp, ``macs``, ``outputs``,
  the depth's remainder run byte by byte for every feature (``fc_tail_macs``: depth % 16 on the four-row block
  path, depth % 8 on the short one), the features % 4 last ones one dot product each (``fc_single_macs``), the
  outputs requantized one at a time when the weights have a scale per feature (``fc_channel_outputs``, the
  converter's Dense layers). Fitted on FULLY_CONNECTED's table group it priced the KWT's 17-row layers -46 %.
* SOFTMAX/rows, an int8 SOFTMAX over more than one row: ``softmax_rows``, ``outputs`` and
  ``softmax_exp_elements`` (the elements the exponential runs on: each row's maximum costs none, and only
  differences down to diff_min count, which a wide input scale such as a -1e9 causal mask's makes 0; the part
  of the int8 range diff_min lets in stands for the part of the elements). The one-row SOFTMAX group priced
  the causal transformer's masked scores +148 %. At diff_min 0 the elements that tie with their row's maximum
  run the active branch without the exponential's work (``softmax_tie_elements``: behind a constant SELECT_V2
  mask, the elements it keeps, as the mask's -FLT_MAX quantization rounds every score onto one level).
* TRANSPOSE/walk (pe_transpose_x): ``outputs``, ``copy_runs`` (one per innermost run after the walk merges the
  axes both sides step through together) and ``strided_outputs`` (the elements of runs that are not contiguous
  on both sides), ``call``; it had class:other's constant per call (-89 %).
* BATCH_MATMUL/s8 (pe_matmul.c): ``mm_rows`` (output rows over all batches), ``macs``, ``outputs``, the
  columns % 4 run one at a time (``mm_single_macs``), ``call``; class:fc priced it -17 .. -27 %.

Calibration graphs (pyembed.bench._transformer_models: build_attention, and _Builder.layernorm alone) cover
sequence lengths 8 to 48, key counts apart from query counts, heads 1 to 4, head sizes 4 to 32, with and
without a mask, LayerNorm widths 8 to 128 in the keras2, keras3, keras3-with-float-island, RMSNorm and SUB-first chains, GELU chains of 128 to 2048
elements, FULLY_CONNECTED layers of 5 to 30 rows (depths 8 to 96, 6 to 64 features, per tensor with a bias and
per feature without), SOFTMAX over 4 to 40 rows (after a FULLY_CONNECTED, on inputs of scales 0.01 to 8:
diff_min -1984 to -1, and behind the converter's causal mask: diff_min 0), BATCH_MATMULs of 1 to 4 heads and
TRANSPOSEs of 3-D and 4-D head splits (none of them the validation models' shapes).
They are built as firmware
(pyembed firmware, dsp build, -O2) for mps2-an386 (Cortex-M4), mps2-an500 (Cortex-M7), mps2-an505
(Cortex-M33) and mps3-an547 (Cortex-M55) and run under
``qemu-system-arm -icount shift=0`` (per-operator SysTick counts; outputs == the host run); each group is
fitted per core by non-negative least squares on relative error (calibrate_qemu._fit_group). The
converter-made KWT and causal transformer (tests/data/converter/) are measured and predicted, never fitted.
The runs are not traced: the groups' instruction mixes are the core's class:fc (attention), class:eltwise
(LayerNorm, PE_LUT), FULLY_CONNECTED, SOFTMAX, class:other (TRANSPOSE) and class:fc (BATCH_MATMUL)
mixes (``mix_from``). Only FULLY_CONNECTED has a DSP-extension path here: the portable tables take the other
groups, not FULLY_CONNECTED/rows (its portable kernel is another loop; it keeps FULLY_CONNECTED's group).

``--reuse`` keeps the committed measurements (or those of ``--load F``), refeatured, and runs QEMU only for
the graphs and boards they lack.

``--write`` merges the groups into firmware_sim/profiles/pyembed_icount.json and stores the measurements with
the command in pyembed/bench/data/icount_transformer.json (tests/test_icount_transformer.py predicts them
again from the committed table).
"""
import os
import tempfile

import numpy as np

BOARDS = {"mps2-an386": "cortex-m4", "mps2-an500": "cortex-m7", "mps2-an505": "cortex-m33", "mps3-an547": "cortex-m55"}
DATA_FILE = os.path.join(os.path.dirname(__file__), "data", "icount_transformer.json")
COMMAND = "python -m pyembed.bench calibrate_transformer --write"
# group -> (operator type, the class whose mix it borrows)
GROUPS = {"PE_ATTENTION/tflm": ("PE_ATTENTION", "class:fc"), "PE_LAYERNORM": ("PE_LAYERNORM", "class:eltwise"),
          "PE_LUT": ("PE_LUT", "class:eltwise"),
          # the transformer-shaped forms of three builtins (firmware_sim.icount._own_shape_group)
          "FULLY_CONNECTED/rows": ("FULLY_CONNECTED", "FULLY_CONNECTED"),
          "SOFTMAX/rows": ("SOFTMAX", "SOFTMAX"), "TRANSPOSE/walk": ("TRANSPOSE", "class:other"),
          "BATCH_MATMUL/s8": ("BATCH_MATMUL", "class:fc")}
# groups whose coefficients hold for the dsp build only (the portable FULLY_CONNECTED is another kernel)
DSP_ONLY = ("FULLY_CONNECTED/rows",)
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VALIDATION = ("seq_kwt", "seq_causal_transformer")


def _attention(tokens, heads, dh, kv=None, mask=False):
    from pyembed.bench._transformer_models import build_attention
    return build_attention(tokens, heads=heads, dh=dh, kv_tokens=kv, mask=mask)[0]


def _layernorm(rows, width, variant="keras2", seed=0):
    from pyembed.bench._transformer_models import _Builder, serialize
    rng = np.random.default_rng(seed)
    b = _Builder(rng)
    x = b.act(rng.normal(0, 1.0, (4, rows, width)))
    y = b.layernorm(x, rng.uniform(0.8, 1.2, width), rng.normal(0, 0.1, width), variant=variant)
    return serialize(b.tensors, b.ops, [x], [y])


def _fc_rows(rows, depth, feats, seed=0, per_channel=False, bias=True):
    """One FULLY_CONNECTED over rows x depth (a token sequence) to feats features; per_channel: a weight scale
    per feature (the converter's Dense layers), with or without a bias."""
    from pyembed.bench._transformer_models import _Builder, _glorot, serialize
    rng = np.random.default_rng(seed)
    b = _Builder(rng)
    x = b.act(rng.normal(0, 1.0, (4, rows, depth)))
    w = _glorot(rng, feats, depth)
    if not per_channel:
        y = b.fc(x, w, rng.normal(0, 0.1, feats))
        return serialize(b.tensors, b.ops, [x], [y])
    ws = np.maximum(np.abs(w).max(axis=1), 1e-6).astype(np.float32) / np.float32(127.0)
    wq = np.clip(np.round(w / ws[:, None]), -127, 127).astype(np.int8)
    wt = b._add(w.shape, np.int8, data=wq, scale=ws.astype(np.float64), zp=np.zeros(feats, np.int64))
    wf = wq.astype(np.float64) * ws[:, None]
    ins = [x, wt]
    yv = b.vals[x] @ wf.T
    if bias:
        bs = np.float32(b.tensors[x]["scale"]) * ws
        bq = np.round(rng.normal(0, 0.1, feats) / bs).astype(np.int32)
        ins.append(b._add((feats,), np.int32, data=bq, scale=bs.astype(np.float64), zp=np.zeros(feats, np.int64)))
        yv = yv + bq * bs
    y = b.act(yv)
    b.ops.append(("FULLY_CONNECTED", ins, [y], {"relu": False}))
    return serialize(b.tensors, b.ops, [x], [y])


def _softmax_rows(rows, length, depth=16, seed=0):
    """Scores as attention makes them (a FULLY_CONNECTED of the tokens, scaled up to logits of a few units),
    then SOFTMAX over rows of length."""
    from pyembed.bench._transformer_models import _Builder, _glorot, serialize
    rng = np.random.default_rng(seed)
    b = _Builder(rng)
    x = b.act(rng.normal(0, 1.0, (4, rows, depth)))
    s = b.fc(x, _glorot(rng, length, depth, gain=3.0), np.zeros(length))
    return serialize(b.tensors, b.ops, [x], [b.softmax(s)])


def _softmax_scaled(rows, length, scale, seed=0):
    """SOFTMAX straight on a graph input of the given scale (the measurement's inputs are uniform int8, so the
    differences to a row's maximum spread over the int8 range): a wide scale leaves a small diff_min, few
    elements exponentiated (as the converter's -1e9 masks do)."""
    from pyembed.bench._transformer_models import _Builder, serialize
    rng = np.random.default_rng(seed)
    b = _Builder(rng)
    x = b.act(rng.normal(0, 1.0, (4, rows, length)), fixed=(float(np.float32(scale)), 0))
    return serialize(b.tensors, b.ops, [x], [b.softmax(x)])


def _masked_softmax(heads, tokens, keys=None, seed=0, offset=0):
    """The converter's causal attention mask: scores scaled by a MUL into the mask's quantization (scale
    9.3e35, as -FLT_MAX makes it: every score rounds to the zero point, so each row's unmasked elements tie
    with its maximum), SELECT_V2 of a constant lower-triangular condition against the -FLT_MAX constant, then
    SOFTMAX (diff_min 0)."""
    from pyembed.bench._transformer_models import _Builder, serialize
    rng = np.random.default_rng(seed)
    keys = tokens if keys is None else keys
    b = _Builder(rng)
    x = b.act(rng.normal(0, 2.0, (4, heads, tokens, keys)))
    wide = (float(np.float32(9.304592e35)), 127)
    ct = b._add((1,), np.int8, data=np.array([127], np.int8), scale=float(np.float32(0.35 / 127)), zp=0)
    m = b.act(b.vals[x] * 0.35, fixed=wide)
    b.ops.append(("MUL", [x, ct], [m], {}))
    mask = np.arange(keys)[None, :] <= np.arange(tokens)[:, None] + offset
    cond = b._add((heads, tokens, keys), np.bool_, data=np.broadcast_to(mask, (heads, tokens, keys)).copy())
    neg = b._add((), np.int8, data=np.array(-128, np.int8), scale=wide[0], zp=wide[1])
    sel = b.act(np.where(mask, b.vals[m], -wide[0] * 255), fixed=wide)
    b.ops.append(("SELECT_V2", [cond, m, neg], [sel], {"table": "SelectV2Options", "fields": {}}))
    return serialize(b.tensors, b.ops, [x], [b.softmax(sel)])


def _matmul(heads, rows, depth, cols, adj_y=False, seed=0):
    """BATCH_MATMUL of two graph inputs, heads x rows x depth by heads x depth x cols (x cols x depth with
    adj_y), as attention's scores and context products are."""
    from pyembed.bench._transformer_models import _Builder, serialize
    rng = np.random.default_rng(seed)
    b = _Builder(rng)
    a = b.act(rng.normal(0, 1.0, (4, heads, rows, depth)))
    w = b.act(rng.normal(0, 1.0, (4, heads) + ((cols, depth) if adj_y else (depth, cols))))
    return serialize(b.tensors, b.ops, [a, w], [b.batch_matmul(a, w, adj_y=adj_y)])


def _transpose(shape, perm, seed=0):
    from pyembed.bench._transformer_models import _Builder, serialize
    rng = np.random.default_rng(seed)
    b = _Builder(rng)
    x = b.act(rng.normal(0, 1.0, (4,) + tuple(shape)))
    return serialize(b.tensors, b.ops, [x], [b.transpose(x, list(perm))])


def _gelu(rows, width, seed=0):
    """The converter's tanh-approximation GELU chain alone: one PE_LUT after pyembed.passes.elementwise."""
    from pyembed.bench._transformer_models import _Builder, serialize
    rng = np.random.default_rng(seed)
    b = _Builder(rng)
    x = b.act(rng.normal(0, 1.0, (4, rows, width)))
    return serialize(b.tensors, b.ops, [x], [b.gelu_tanh(x)])


CALIBRATION = {
    "attn_t16_h2_d8": lambda: _attention(16, 2, 8),
    "attn_t32_h2_d16": lambda: _attention(32, 2, 16),
    "attn_t24_h4_d8": lambda: _attention(24, 4, 8),
    "attn_t8_h1_d32": lambda: _attention(8, 1, 32),
    "attn_t12_m48_h2_d8": lambda: _attention(12, 2, 8, kv=48),
    "attn_t48_h1_d4": lambda: _attention(48, 1, 4),
    "attn_t20_h2_d16_mask": lambda: _attention(20, 2, 16, mask=True),
    "attn_t12_h3_d4_mask": lambda: _attention(12, 3, 4, mask=True),
    "ln_8x32": lambda: _layernorm(8, 32),
    "ln_16x64": lambda: _layernorm(16, 64),
    "ln_32x16": lambda: _layernorm(32, 16),
    "ln_4x128": lambda: _layernorm(4, 128),
    "ln_24x48_keras3": lambda: _layernorm(24, 48, "keras3"),
    "ln_10x96_keras3": lambda: _layernorm(10, 96, "keras3"),
    "ln_12x24": lambda: _layernorm(12, 24),
    "ln_20x8_keras3": lambda: _layernorm(20, 8, "keras3"),
    # other chains: fewer or more row-long steps per reduction (RMSNorm, SUB-then-square), and the
    # converter's float island (NEG as a PE_LUT step on the mean)
    "ln_16x32_rms": lambda: _layernorm(16, 32, "rms"),
    "ln_8x64_rms": lambda: _layernorm(8, 64, "rms"),
    "ln_12x48_manual": lambda: _layernorm(12, 48, "manual"),
    "ln_24x16_manual": lambda: _layernorm(24, 16, "manual"),
    "ln_14x40_keras3_island": lambda: _layernorm(14, 40, "keras3_island"),
    "lut_gelu_8x16": lambda: _gelu(8, 16),
    "lut_gelu_32x64": lambda: _gelu(32, 64),
    "lut_gelu_12x96": lambda: _gelu(12, 96),
    # FULLY_CONNECTED over token rows (none of the validation models' rows x depth x features): depths with
    # and without a remainder of 16 / 8, features below 8 and not a multiple of 4
    "fc_r5_d20_f36": lambda: _fc_rows(5, 20, 36),
    "fc_r9_d64_f20": lambda: _fc_rows(9, 64, 20),
    "fc_r14_d40_f12": lambda: _fc_rows(14, 40, 12),
    "fc_r20_d12_f32": lambda: _fc_rows(20, 12, 32),
    "fc_r8_d96_f6": lambda: _fc_rows(8, 96, 6),
    "fc_r24_d32_f40": lambda: _fc_rows(24, 32, 40),
    "fc_r6_d28_f64": lambda: _fc_rows(6, 28, 64),
    "fc_r30_d8_f10": lambda: _fc_rows(30, 8, 10),
    "fc_r16_d56_f28": lambda: _fc_rows(16, 56, 28),
    "fc_r10_d18_f18": lambda: _fc_rows(10, 18, 18),
    # the converter's form: a weight scale per feature, no bias (and one with a bias)
    "fcc_r7_d24_f20": lambda: _fc_rows(7, 24, 20, per_channel=True, bias=False),
    "fcc_r13_d36_f12": lambda: _fc_rows(13, 36, 12, per_channel=True, bias=False),
    "fcc_r22_d16_f24": lambda: _fc_rows(22, 16, 24, per_channel=True, bias=False),
    "fcc_r9_d10_f28": lambda: _fc_rows(9, 10, 28, per_channel=True, bias=False),
    "fcc_r15_d64_f8": lambda: _fc_rows(15, 64, 8, per_channel=True, bias=False),
    "fcc_r5_d40_f44": lambda: _fc_rows(5, 40, 44, per_channel=True, bias=False),
    "fcc_r18_d32_f6": lambda: _fc_rows(18, 32, 6, per_channel=True, bias=False),
    "fcc_r11_d20_f16_bias": lambda: _fc_rows(11, 20, 16, per_channel=True, bias=True),
    "fcc_r26_d8_f32": lambda: _fc_rows(26, 8, 32, per_channel=True, bias=False),
    # SOFTMAX over rows of attention-like scores (each after a FULLY_CONNECTED: more rows for that group)
    "sm_r8_l8": lambda: _softmax_rows(8, 8),
    "sm_r16_l16": lambda: _softmax_rows(16, 16),
    "sm_r32_l6": lambda: _softmax_rows(32, 6),
    "sm_r4_l48": lambda: _softmax_rows(4, 48),
    "sm_r20_l20": lambda: _softmax_rows(20, 20, depth=24),
    "sm_r40_l10": lambda: _softmax_rows(40, 10, depth=8),
    # SOFTMAX on inputs of wide and narrow scales: diff_min -7 .. 0 (few exponentials) to -1984 (all)
    "smx_r30_l8_s2": lambda: _softmax_scaled(30, 8, 2.0),
    "smx_r16_l10_s0.5": lambda: _softmax_scaled(16, 10, 0.5),
    "smx_r6_l32_s0.2": lambda: _softmax_scaled(6, 32, 0.2),
    "smx_r10_l24_s0.1": lambda: _softmax_scaled(10, 24, 0.1),
    "smx_r20_l6_s0.01": lambda: _softmax_scaled(20, 6, 0.01),
    "smx_r8_l40_s8": lambda: _softmax_scaled(8, 40, 8.0),
    # the converter's causal mask (diff_min 0, the unmasked scores tied with the row maximum): heads x queries
    # x keys, keys ahead of the queries by an offset
    "msm_h2_t10": lambda: _masked_softmax(2, 10),
    "msm_h1_t24": lambda: _masked_softmax(1, 24),
    "msm_h4_t6": lambda: _masked_softmax(4, 6),
    "msm_h3_t8_k16": lambda: _masked_softmax(3, 8, keys=16, offset=8),
    "msm_h1_t16": lambda: _masked_softmax(1, 16),
    # BATCH_MATMUL of attention's shapes: heads x queries x head size by keys, columns % 4 from 0 to 3
    "mm_h2_r10_d8_c10": lambda: _matmul(2, 10, 8, 10),
    "mm_h1_r16_d16_c16": lambda: _matmul(1, 16, 16, 16),
    "mm_h4_r6_d4_c6": lambda: _matmul(4, 6, 4, 6),
    "mm_h2_r20_d20_c8": lambda: _matmul(2, 20, 20, 8),
    "mm_h3_r8_d8_c9_adj": lambda: _matmul(3, 8, 8, 9, adj_y=True),
    "mm_h1_r24_d12_c7_adj": lambda: _matmul(1, 24, 12, 7, adj_y=True),
    "mm_h2_r14_d6_c16": lambda: _matmul(2, 14, 6, 16),
    # TRANSPOSE of head splits and merges: inner runs contiguous and strided, 3-D and 4-D
    "tr_10x3x8_102": lambda: _transpose((10, 3, 8), (1, 0, 2)),
    "tr_4x16x6_021": lambda: _transpose((4, 16, 6), (0, 2, 1)),
    "tr_1x20x2x12_0213": lambda: _transpose((1, 20, 2, 12), (0, 2, 1, 3)),
    "tr_1x3x10x8_0231": lambda: _transpose((1, 3, 10, 8), (0, 2, 3, 1)),
    "tr_32x24_10": lambda: _transpose((32, 24), (1, 0)),
    "tr_2x8x4x16_0213": lambda: _transpose((2, 8, 4, 16), (0, 2, 1, 3)),
    "tr_6x5x4_210": lambda: _transpose((6, 5, 4), (2, 1, 0)),
}


def _validation_path(name):
    return os.path.join(_ROOT, "tests", "data", "converter", name + ".tflite")


def _validation():
    def reader(name):
        def read():
            with open(_validation_path(name), "rb") as f:
                return f.read()
        return read
    return {n: reader(n) for n in VALIDATION}


def measure(boards=tuple(BOARDS), workdir=None, log=None, names=None):
    """Rows {model, set, core, board, bit_exact, systick_instructions, operators: [{index, type,
    group_keys, features, systick_instructions}]} (every operator of each graph)."""
    from firmware_sim.cost import kernel_class
    from firmware_sim.icount import features, group_keys
    from pyembed.model.load import load_tflite_bytes
    from pyembed.target.firmware import build_project, generate, run_project
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="pe_calib_transformer_") as tmp:
            return measure(boards, tmp, log, names)
    rows = []
    todo = [(n, b, "calibration") for n, b in CALIBRATION.items()] + [(n, b, "validation")
                                                                        for n, b in _validation().items()]
    if names:
        todo = [t for t in todo if t[0] in names]
    for name, builder, which in todo:
        data = builder()
        g = load_tflite_bytes(data, name=name)
        rng = np.random.default_rng(0)
        xs = [rng.integers(-128, 128, size=g.tensors[t].shape).astype(g.tensors[t].dtype) for t in g.inputs]
        host = g.run(xs)   # (on its own copy: the converter graphs' host run leaves state generate trips on)
        host = list(host) if isinstance(host, (list, tuple)) else [host]
        for board in boards:
            proj = generate(load_tflite_bytes(data, name=name), board, os.path.join(workdir, f"{name}-{board}"))
            build_project(proj.outdir, make_vars={"RUNTIME_BUILD": os.path.join(workdir, f"runtime-{board}"),
                                                  "OPT": "-O2"})
            run = run_project(proj, xs)
            exact = all(np.array_equal(a.ravel(), np.asarray(b).ravel()) for a, b in zip(run.outputs, host))
            pg = proj.graph
            ops = []
            for o in run.operators:
                op = pg.operators[o["index"]]
                aliased = any(pg.aliases.get(t) is not None for t in op.outputs)
                ops.append({"index": o["index"], "type": o["type"],
                            "group_keys": group_keys(pg, op, kernel_class(op.type, aliased)),
                            "features": features(pg, op), "systick_instructions": o["instructions"]})
            rows.append({"model": name, "set": which, "core": BOARDS[board], "board": board, "build": "dsp",
                         "bit_exact": exact, "systick_instructions": run.total_instructions, "operators": ops})
            if log:
                mine = sum(o["systick_instructions"] for o in ops if o["group_keys"][0] in GROUPS)
                log(f"{name} {board}: {run.total_instructions:,} instructions, in the bench's groups {mine:,}, "
                    f"bit-exact {exact}")
    return rows


def refeature(rows):
    """Rows read back (--load) with each operator's group keys and features recomputed from the graph
    generated again (the same project generate made when it was measured)."""
    from firmware_sim.cost import kernel_class
    from firmware_sim.icount import features, group_keys
    from pyembed.model.load import load_tflite_bytes
    from pyembed.target.firmware import generate
    builders = {**CALIBRATION, **_validation()}
    with tempfile.TemporaryDirectory(prefix="pe_calib_transformer_") as tmp:
        for r in rows:
            pg = generate(load_tflite_bytes(builders[r["model"]](), name=r["model"]), r["board"],
                          os.path.join(tmp, f"{r['model']}-{r['board']}")).graph
            for o in r["operators"]:
                op = pg.operators[o["index"]]
                aliased = any(pg.aliases.get(t) is not None for t in op.outputs)
                o["group_keys"] = group_keys(pg, op, kernel_class(op.type, aliased))
                o["features"] = features(pg, op)
    return rows


def fit(rows):
    from firmware_sim.icount import feature_names

    from pyembed.bench.calibrate_qemu import _fit_group
    out = {}
    for core in dict.fromkeys(r["core"] for r in rows):
        for grp in GROUPS:
            ops = [o for r in rows if r["core"] == core and r["set"] == "calibration" for o in r["operators"]
                   if o["group_keys"][0] == grp]
            if ops:
                out.setdefault(core, {})[grp] = {"coef": _fit_group(ops, feature_names(None, grp)), "n": len(ops)}
    return out


def predict_op(table, op):
    """Instructions of a stored operator row with a table (its first group key the table has)."""
    for key in op["group_keys"]:
        g = table.get(key)
        if g is not None:
            return max(0.0, sum(v * op["features"].get(k, 0.0) for k, v in g["coef"].items())), key
    return 0.0, None


def _before(table):
    return {k: v for k, v in table.items() if k not in GROUPS}


def compare(rows, fitted, tables=None):
    """Per row: each group's operators and the whole graph, measured against the table with the fitted groups
    (after) and without them (before: the kernel-class fallbacks)."""
    from pyembed.bench.calibrate_f32 import stored_table
    out = []
    for r in rows:
        base = _before((tables or {}).get(r["core"]) or stored_table(r["core"]))
        after_t = dict(base)
        for grp, g in fitted.get(r["core"], {}).items():
            after_t[grp] = g
        row = {"model": r["model"], "set": r["set"], "core": r["core"], "bit_exact": r["bit_exact"],
               "measured": r["systick_instructions"]}
        meas_ops = sum(o["systick_instructions"] for o in r["operators"])
        pb = sum(predict_op(base, o)[0] for o in r["operators"])
        pa = sum(predict_op(after_t, o)[0] for o in r["operators"])
        row.update(measured_ops=meas_ops, predicted=round(pa), error_pct=round(100.0 * (pa - meas_ops) / meas_ops, 2),
                   predicted_before=round(pb), error_before_pct=round(100.0 * (pb - meas_ops) / meas_ops, 2))
        per = {}
        for o in r["operators"]:
            key = o["type"] if o["group_keys"][0] not in GROUPS else o["group_keys"][0]
            e = per.setdefault(key, {"operators": 0, "measured": 0, "predicted": 0.0, "predicted_before": 0.0})
            e["operators"] += 1
            e["measured"] += o["systick_instructions"]
            e["predicted"] += predict_op(after_t, o)[0]
            e["predicted_before"] += predict_op(base, o)[0]
        for e in per.values():
            e["predicted"], e["predicted_before"] = round(e["predicted"]), round(e["predicted_before"])
        row["by_type"] = per
        out.append(row)
    return out


def write(fitted, rows, command=COMMAND):
    from pyembed.bench.calibrate_f32 import _table_path
    from pyembed.bench.common import write_fitted_groups
    return write_fitted_groups(
        _table_path(), fitted, {grp: GROUPS[grp][1] for grp in GROUPS},
        "dsp (tflm_row and the LayerNorm chain have no DSP-extension path)", "_doc_transformer",
        f"PE_ATTENTION/tflm, PE_LAYERNORM, PE_LUT and the many-row FULLY_CONNECTED / SOFTMAX and TRANSPOSE "
        f"groups: fitted by '{command}' (pyembed/bench/"
        "calibrate_transformer.py) on QEMU SysTick counts of small attention and LayerNorm "
        "graphs; mixes class:fc's and class:eltwise's", DATA_FILE,
        "QEMU measurements written by the command below; tests/test_icount_transformer.py "
        "predicts the operators again from the committed pyembed_icount.json", command, rows, dsp_only=DSP_ONLY)


def render(result):
    lines = ["== transformer operators under QEMU (-icount shift=0, SysTick counts): each graph measured against "
             "the table with the fitted groups (after) and without them (before)", ""]
    lines.append(f"{'model':<24} {'set':<11} {'core':<10} {'measured':>10} {'predicted':>10} {'err':>7} "
                 f"{'before':>10} {'err':>8} exact")
    for r in result["rows"]:
        lines.append(f"{r['model']:<24} {r['set']:<11} {r['core']:<10} {r['measured_ops']:>10,} {r['predicted']:>10,} "
                     f"{r['error_pct']:>+6.1f}% {r['predicted_before']:>10,} {r['error_before_pct']:>+7.1f}% "
                     f"{'yes' if r['bit_exact'] else 'NO'}")
        if r["set"] == "validation":
            for k, e in sorted(r["by_type"].items()):
                err = 100.0 * (e["predicted"] - e["measured"]) / max(e["measured"], 1)
                errb = 100.0 * (e["predicted_before"] - e["measured"]) / max(e["measured"], 1)
                lines.append(f"    {k:<22} x{e['operators']:<3} measured {e['measured']:>10,} predicted "
                             f"{e['predicted']:>10,} ({err:+.1f}%) before {e['predicted_before']:>10,} ({errb:+.1f}%)")
    for core, groups in result["fit"].items():
        for grp, g in groups.items():
            lines.append(f"\n{core} {grp} (n={g['n']}): " + ", ".join(f"{k} {v:g}" for k, v in g["coef"].items()))
    if result.get("written"):
        lines.append("\nwritten: " + ", ".join(result["written"]))
    return "\n".join(lines)


def stored_rows():
    """The measurement rows of the committed data file (none if it is absent)."""
    import json
    if not os.path.exists(DATA_FILE):
        return []
    with open(DATA_FILE) as f:
        return json.load(f)["rows"]


def reuse_rows(boards, log=None, base=None):
    """The committed rows (or base's) of the graphs and boards asked for, refeatured (their operators' group
    keys and features from the code as it is now), and QEMU runs of only the (graph, board) pairs they lack."""
    base = stored_rows() if base is None else base
    known = {(r["model"], r["board"]) for r in base}
    rows = refeature([r for r in base if r["board"] in boards and
                      (r["model"] in CALIBRATION or r["model"] in VALIDATION)])
    for board in boards:
        todo = [n for n in list(CALIBRATION) + list(VALIDATION) if (n, board) not in known]
        if todo:
            rows += measure((board,), log=log, names=set(todo))
    order = {n: i for i, n in enumerate(list(CALIBRATION) + list(VALIDATION))}
    return sorted(rows, key=lambda r: (order[r["model"]], list(BOARDS).index(r["board"])))


def run(boards=tuple(BOARDS), write_out=False, load=None, save=None, log=None, refeature_rows=False, reuse=False):
    from pyembed.bench.common import measured_rows
    if reuse:
        base = measured_rows(None, load) if load else None
        rows = measured_rows(lambda: reuse_rows(boards, log=log, base=base), None, save)
    else:
        rows = measured_rows(lambda: measure(boards, log=log), load, save)
    if load and refeature_rows and not reuse:
        rows = refeature(rows)
    fitted = fit(rows)
    result = {"fit": fitted, "rows": compare(rows, fitted)}
    if write_out:
        result["written"] = write(fitted, rows, COMMAND.replace(" --write", " --reuse --write") if reuse else COMMAND)
    return result


def main(argv=None):
    import argparse
    import sys

    from pyembed.bench.common import emit
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench calibrate_transformer",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--write", action="store_true", help="merge the groups into pyembed_icount.json and store the "
                    "measurements in pyembed/bench/data/icount_transformer.json")
    ap.add_argument("--boards", default=",".join(BOARDS), help=f"QEMU boards of {', '.join(BOARDS)}")
    ap.add_argument("--save", default=None)
    ap.add_argument("--load", default=None)
    ap.add_argument("--refeature", action="store_true", help="with --load: recompute the operators' features "
                    "from the graphs generated again")
    ap.add_argument("--reuse", action="store_true", help="keep the committed measurements (or --load's), "
                    "refeatured, and run QEMU only for the graphs and boards they lack")
    args = ap.parse_args(argv)
    boards = tuple(b for b in args.boards.split(",") if b)
    bad = [b for b in boards if b not in BOARDS]
    if bad:
        ap.error(f"--boards: unknown {', '.join(bad)} (known: {', '.join(BOARDS)})")
    result = run(boards, write_out=args.write, load=args.load, save=args.save,
                 log=lambda s: print(s, file=sys.stderr, flush=True), refeature_rows=args.refeature,
                 reuse=args.reuse)
    emit(result, args.json, render)
    return 0
