"""Thumb-2 instruction counts of the kernels on a Cortex-M4 under QEMU,
portable C path beside the DSP-extension path (``python -m pyembed.bench
kernels --target cortex-m4 [--json]``).

Both builds are ``arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb -O2`` for QEMU's
``mps2-an386`` (pyembed.target.qemu); the portable one adds
``-DPE_FORCE_PORTABLE`` so it runs the portable C loops every non-DSP target
compiles. pyembed/target/kernel_cases.c calls each kernel once (whole tensor,
set-up and requantization included) between two SysTick reads; under
``qemu-system-arm -icount shift=0`` a tick is exactly 40 instructions, so each
count is exact to 40 instructions. Outputs of both builds are compared with
the host build's with == before a figure is printed (a mismatch is an error).

Convolutions are measured with both kernels: the reverse one (int32
accumulator rows in scratch) and the scratch-free gather one ("(gather)"),
which the graph runtime runs where the planner gives a convolution no scratch
(most bundled models). The reverse kernel gets the scratch of
pe_conv2d_rev_s8_get_fast_buffer_size: on the DSP build (in_c % 4 == 0) that
is in_w*in_c*2 + kernel_w*in_c*8 bytes more than the minimum (conv 3x3
16->16 on 48x48: 9,304 + 1,920 B), for its int16 column blocks; the portable
build's fast size is the minimum; depthwise gets
pe_depthwise_conv2d_rev_s8_get_fast_buffer_size (DSP build, 3x3 stride 1:
the minimum + the int16 channel planes of pe_dw3_dsp.c, 48x48x16: 9,304 +
9,216 B; the gather row widens into a 3 KB stack block). On the DSP build the whole-tensor conv with
one group, in_c % 4 == 0 and dilation.w 1 runs the block loops of
pe_conv_dsp_pw.c (widened 4-channel weight block in the scratch or on the
stack) with either scratch, as the gather kernel does; the int16 column
blocks serve the row stream. The bundled models' plans give the minimum (or
none).

Units: conv and FC per layer MAC (padded taps included, as the host bench),
pooling per tap (in-bounds window positions x channels), ADD/MUL per output
element, attention per MAC (d per score + dv per weighted value row), LSTM
per MAC of its gate matmuls (the gates' element-wise work included).

"fully connected (int16 weights)" runs pe_fully_connected_w16_s8 on weights
packed once by pe_fc_w16_pack (not timed, as it runs offline); its row
carries "weight_bytes", the packed weights' flash (round4(O) * round4(K) * 2
bytes), the int8 rows the int8 filter's (O * K bytes). A bundled model with
int8 FULLY_CONNECTED layers is also built a third time, DSP with
fc_int16_weights (pyembed.passes.fc_w16, default min_macs): its row adds
dsp_fc_w16_instructions, the widened FC layers' MACs and instructions in both DSP
runs (dsp_fc_instructions, dsp_fc_w16_fc_instructions) and the flash of the
packed weights (fc_int8_weight_bytes, fc_w16_weight_bytes,
fc_w16_flash_delta_bytes).
"""
import os
import tempfile

import numpy as np

from pyembed.target import kernels as K


def _pool_taps(h, w, c, k, s, pad, oh, ow):
    taps = 0
    for oy in range(oh):
        y0 = oy * s - pad
        ny = min(y0 + k, h) - max(y0, 0)
        for ox in range(ow):
            x0 = ox * s - pad
            nx = min(x0 + k, w) - max(x0, 0)
            taps += max(ny, 0) * max(nx, 0)
    return taps * c


def cases():
    """(kernel, shape, unit, Case) for every benchmarked shape."""
    rng = np.random.default_rng(12345)
    out = []

    def quant(n):
        return rng.integers(1 << 30, (1 << 31) - 1, n), np.full(n, -9)

    def conv(name, shape, h, w, ic, oc, k, depthwise=False):
        x = rng.integers(-128, 128, (1, h, w, ic))
        wt = rng.integers(-128, 128, (1, k, k, oc) if depthwise else (oc, k, k, ic))
        m, s = quant(oc)
        p = k // 2
        for gather in (False, True):
            c = K.conv_case(x, wt, rng.integers(-700, 800, oc), m, s, padding=(p, p, p, p),
                            input_offset=128, output_offset=-3, depthwise=depthwise,
                            gather=gather, name=name)
            out.append((name + (" (gather)" if gather else ""), shape, "MAC", c))

    conv("conv 3x3", "8->8 25x25", 25, 25, 8, 8, 3)
    conv("conv 3x3", "16->16 48x48", 48, 48, 16, 16, 3)
    conv("conv 1x1", "16->16 48x48", 48, 48, 16, 16, 1)
    # the 1x1 and 3x3 shapes that carry most MACs of the bundled models
    # (person / VWW MobileNet, KWS DS-CNN, ResNet-8)
    conv("conv 1x1", "8->16 48x48", 48, 48, 8, 16, 1)
    conv("conv 1x1", "32->32 24x24", 24, 24, 32, 32, 1)
    conv("conv 1x1", "64->64 25x5", 25, 5, 64, 64, 1)
    conv("conv 1x1", "128->128 6x6", 6, 6, 128, 128, 1)
    conv("conv 1x1", "256->256 3x3", 3, 3, 256, 256, 1)
    conv("conv 3x3", "32->32 16x16", 16, 16, 32, 32, 3)
    conv("depthwise 3x3", "48x48x16", 48, 48, 16, 16, 3, depthwise=True)
    for depth, feats in ((256, 64), (1024, 32)):
        x = rng.integers(-128, 128, (1, depth))
        wt = rng.integers(-128, 128, (feats, depth))
        m, s = quant(feats)
        bias = rng.integers(-700, 800, feats)
        c = K.fc_case(x, wt, bias, m, s, input_offset=7, output_offset=-2, name="fully connected")
        c.weight_bytes = feats * depth
        out.append(("fully connected", f"{depth}->{feats}", "MAC", c))
        c = K.fc_case(x, wt, bias, m, s, input_offset=7, output_offset=-2, w16=True,
                      name="fully connected (int16 weights)")
        c.weight_bytes = -(-feats // 4) * 4 * (-(-depth // 4) * 4) * 2
        out.append(("fully connected (int16 weights)", f"{depth}->{feats}", "MAC", c))
    x = rng.integers(-128, 128, (1, 25, 25, 8))
    for kind, kid in (("avg", 1), ("max", 0)):
        for s in (5, 2):
            pad = 2 if s == 2 else 0
            o = (25 + 2 * pad - 5) // s + 1
            c = K.pool_case(x, kid, (5, 5), (s, s), (pad, pad, pad, pad), (o, o),
                            name=f"{kind} pool")
            c.macs = _pool_taps(25, 25, 8, 5, s, pad, o, o)
            out.append((f"{kind} pool 5x5", f"25x25x8 stride {s}", "tap", c))
    a = rng.integers(-128, 128, (1, 48, 48, 16))
    b = rng.integers(-128, 128, (1, 48, 48, 16))
    out.append(("add", "48x48x16", "element", K.add_case(
        a, b, (1, 48, 48, 16), in1_offset=3, in2_offset=-7, out_offset=2, left_shift=20,
        q1=(1500000000, -1), q2=(1200000000, -2), qo=(1700000000, -19), name="add")))
    out.append(("mul", "48x48x16", "element", K.mul_case(
        a, b, (1, 48, 48, 16), in1_offset=3, in2_offset=-7, out_offset=2,
        qo=(1700000000, -9), name="mul")))
    q = rng.integers(-128, 128, (64, 64))
    kk = rng.integers(-128, 128, (64, 64))
    v = rng.integers(-128, 128, (64, 64))
    out.append(("attention (streaming)", "n=m=64 d=dv=32 2 heads", "MAC", K.attn_case(
        q, kk, v, 2, q_offset=3, k_offset=-2, v_offset=1, score_quant=(1 << 30, -12), block=16,
        name="attention")))
    # the same with the early fold (two score passes, normalised weights times V);
    # MACs counted as for the late fold (d per score + dv per weighted value row)
    out.append(("attention (streaming, early fold)", "n=m=64 d=dv=32 2 heads", "MAC", K.attn_case(
        q, kk, v, 2, q_offset=3, k_offset=-2, v_offset=1, score_quant=(1 << 30, -12), block=16,
        fold=1, name="attention early fold")))
    # UNIDIRECTIONAL_SEQUENCE_LSTM (TFLM arithmetic), the bundled models'
    # shapes: DTLN's first layer (one step, 257 -> 128) and MNIST-LSTM's (28
    # steps, 28 -> 20); per MAC of the gate matmuls (4 * state * (input + state)
    # per step), the gate element-wise work included
    for b, t, nd, ns in ((1, 1, 257, 128), (1, 28, 28, 20)):
        words = [0, b, t, nd, ns, -128, 0, 0, 1, 20480]
        for _ in range(4):
            words += [int(rng.integers(1 << 30, (1 << 31) - 1)), 1,
                      int(rng.integers(1 << 30, (1 << 31) - 1)), -1]
        words += [1 << 30, -14, 1 << 30, -18, 1095936456, -22]
        out.append(("lstm", f"{t} step{'s' if t > 1 else ''} {nd}->{ns}", "MAC", K.lstm_case(
            words, rng.integers(-128, 128, b * t * nd), rng.integers(-40, 40, (4, ns, nd)),
            rng.integers(-40, 40, (4, ns, ns)), rng.integers(-3000, 3000, (4, ns)),
            rng.integers(-128, 128, b * ns), rng.integers(-20000, 20000, b * ns), name="lstm")))
    return out


def runnable_models():
    """Bundled models the graph runtime runs (no unsupported operator)."""
    from pyembed.data import MODELS_DIR
    from pyembed.model.load import load_model
    out = []
    for f in sorted(os.listdir(MODELS_DIR)):
        if f.endswith(".tflite"):
            g = load_model(os.path.join(MODELS_DIR, f))
            if not g.unsupported:
                out.append((f[:-len(".tflite")], g))
    return out


def measure_models(names=None, workdir=None, board="mps2-an386"):
    """Each bundled model end to end on the mps2-an386 firmware project
    (pyembed.target.firmware), built twice: -O2 (DSP paths) and
    -O2 -DPE_FORCE_PORTABLE. Both runs get the same random input; their outputs
    must equal each other and the host graph run. Instructions are the sum of
    the per-operator SysTick counts (40-instruction resolution)."""
    from pyembed.target.firmware import build_project, generate, run_project
    rows = []
    with tempfile.TemporaryDirectory(prefix="pe_models_m4_") as td:
        root = workdir or td
        for name, g in runnable_models():
            if names and name not in names:
                continue
            rng = np.random.default_rng(sum(map(ord, name)))
            xs = [rng.integers(-128, 128, size=g.tensors[t].shape).astype(g.tensors[t].dtype)
                  for t in g.inputs]
            host = g.run(xs if len(xs) > 1 else xs[0])
            host = list(host) if isinstance(host, (list, tuple)) else [host]
            runs, widened = {}, 0
            for variant, opt in (("dsp", "-O2"), ("portable", "-O2 -DPE_FORCE_PORTABLE")):
                proj = generate(g, board, os.path.join(root, f"{name}-{variant}"))
                build_project(proj.outdir, make_vars={
                    "OPT": opt, "RUNTIME_BUILD": os.path.join(root, f"runtime-{variant}")})
                runs[variant] = run_project(proj, xs)
                widened = len(proj.dsp_scratch)  # the same plan for both builds (the board has DSP)
                for k, (o, h) in enumerate(zip(runs[variant].outputs, host)):
                    if not np.array_equal(o.ravel(), np.asarray(h).ravel()):
                        raise RuntimeError(f"{name}: the {variant} firmware's output {k} differs from "
                                           f"the host run")
            p, d = runs["portable"].total_instructions, runs["dsp"].total_instructions
            by_type = {}
            for v in ("portable", "dsp"):
                for o in runs[v].operators:
                    by_type.setdefault(o["type"], {"portable": 0, "dsp": 0})[v] += o["instructions"]
            rows.append({"model": name, "portable_instructions": p, "dsp_instructions": d,
                         "speedup": p / d if d else None,
                         "macs": int(sum(op.macs for op in g.operators)),
                         "convs_with_dsp_scratch": widened,
                         "by_operator_type": by_type})
            if board == "mps2-an386":
                rows[-1].update(_fc_w16_run(name, g, xs, host, root, runs["dsp"]))
    return rows


def _fc_w16_run(name, g, xs, host, root, dsp_run):
    """A model with int8 FULLY_CONNECTED layers once more on the DSP build with
    fc_int16_weights (pyembed.passes.fc_w16: weights packed into int16 offline):
    dsp_fc_w16_instructions (whole model), the FC layers' instructions and
    MACs in both DSP runs, and the flash the packed weights cost. {} for a
    model the pass widens nothing in."""
    from pyembed.passes.fc_w16 import flash_delta, widen_fc_weights
    from pyembed.target.firmware import build_project, generate, run_project
    _, report = widen_fc_weights(g)
    if not any(r["result"] == "widened" for r in report):
        return {}
    proj = generate(g, "mps2-an386", os.path.join(root, f"{name}-dsp-fc-w16"), fc_int16_weights=True)
    build_project(proj.outdir, make_vars={"OPT": "-O2", "RUNTIME_BUILD": os.path.join(root, "runtime-dsp")})
    run = run_project(proj, xs)
    for k, (o, h) in enumerate(zip(run.outputs, host)):
        if not np.array_equal(o.ravel(), np.asarray(h).ravel()):
            raise RuntimeError(f"{name}: the DSP firmware with int16 FC weights: output {k} differs from the host run")
    fc_macs = int(sum(op.macs for op in proj.graph.operators if op.type == "FULLY_CONNECTED@w16"))
    widened_ops = {o["op"] for o in proj.ops if o["type"] == "FULLY_CONNECTED@w16"}
    # the same layers in the int8 run (the pass rewrites operators in place:
    # same indices); layers below its min_macs stay int8 in both runs
    widened_idx = {op.index for op in proj.graph.operators if op.type == "FULLY_CONNECTED@w16"}
    fc_int8 = sum(o["instructions"] for o in dsp_run.operators
                  if o["type"] == "FULLY_CONNECTED" and o["index"] in widened_idx)
    fc_w16 = sum(o["instructions"] for o in run.operators if o["type"] == "FULLY_CONNECTED@w16")
    d = flash_delta(proj.fc_w16)
    return {"dsp_fc_w16_instructions": run.total_instructions, "fc_w16_layers": len(widened_ops),
            "fc_macs": fc_macs, "dsp_fc_instructions": fc_int8, "dsp_fc_w16_fc_instructions": fc_w16,
            "fc_w16_flash_delta_bytes": d["delta"], "fc_int8_weight_bytes": d["int8_bytes"],
            "fc_w16_weight_bytes": d["int16_bytes"],
            # the widened graph is planned anew: its convs may get the DSP fast scratch elsewhere
            "fc_w16_convs_with_dsp_scratch": len(proj.dsp_scratch)}


# --target CORE: the QEMU board of each core (pyembed.target.qemu.BOARDS). The Cortex-M0's micro:bit
# runs the case runner with its nRF51 SRAM enlarged (pyembed.target.kernels.RUNNER_SRAM: 16 KiB hold
# neither the runner's buffers nor the 48x48x16 shapes).
TARGETS = {"cortex-m0": "microbit", "cortex-m3": "mps2-an385", "cortex-m4": "mps2-an386", "cortex-m7": "mps2-an500",
           "cortex-m33": "mps2-an505", "cortex-m55": "mps3-an547"}


def measure(models=True, model_names=None, target="cortex-m4"):
    from pyembed.plan.widen import DSP_CORES
    from pyembed.target import qemu
    board = TARGETS[target]
    dsp = target in DSP_CORES
    spec = cases()
    cs = [c for *_, c in spec]
    host = K.run(cs, "host")
    variants = ("portable", "dsp") if dsp else ("portable",)
    res = {v: K.run(cs, v, board=board) for v in variants}
    rows = []
    for i, (kernel, shape, unit, c) in enumerate(spec):
        for v in variants:
            r = res[v][i]
            if r.status != 0 or host[i].status != 0 or r.output != host[i].output:
                raise RuntimeError(f"{kernel} {shape}: the {v} build's output differs from the "
                                   f"host's (status {r.status} vs {host[i].status})")
        p = res["portable"][i].instructions
        d = res["dsp"][i].instructions if dsp else None
        rows.append({"kernel": kernel, "shape": shape, "unit": unit, "units": c.macs,
                     "portable_instructions": p, "dsp_instructions": d,
                     "portable_per_mac": p / c.macs, "dsp_per_mac": None if d is None else d / c.macs,
                     "speedup": p / d if d else None})
        if getattr(c, "weight_bytes", None) is not None:
            rows[-1]["weight_bytes"] = c.weight_bytes
    b = qemu.BOARDS[board]
    ram = K.RUNNER_SRAM.get(board)
    return {"target": f"{target} (QEMU {board}"
                      + (f" with its SRAM enlarged to {ram // 1024:,} KiB for the case runner (-global "
                         f"nrf51-soc.sram-size={ram}; the board has {b.ram_size // 1024} KiB)" if ram else "")
                      + f", -icount shift=0, SysTick: {float(b.instructions_per_tick):g}-instruction "
                      f"resolution){'' if dsp else '; no DSP extension: the portable path only'}",
            "flags": f"arm-none-eabi-gcc {' '.join(b.cpu_flags)} -O2" + (" (portable: + -DPE_FORCE_PORTABLE)"
                                                                         if dsp else ""),
            "rows": rows, "models": measure_models(model_names, board=board) if models and dsp else []}


def render(res):
    from pyembed.bench.common import table
    head = ["kernel", "shape", "unit", "portable instr/unit", "DSP instr/unit", "portable/DSP",
            "weight bytes"]
    body = [[r["kernel"], r["shape"], r["unit"], f"{r['portable_per_mac']:.2f}",
             "-" if r["dsp_per_mac"] is None else f"{r['dsp_per_mac']:.2f}",
             "-" if r["speedup"] is None else f"{r['speedup']:.2f}x", r.get("weight_bytes", "")]
            for r in res["rows"]]
    text = [f"Thumb-2 instructions on {res['target']}", res["flags"], table(head, body),
            "outputs of every build equal the host build's (compared with == before printing)"]
    if res["models"]:
        mh = ["model", "MACs", "portable instr", "DSP instr", "portable/DSP", "convs w/ DSP scratch"]
        mb = [[m["model"], m["macs"], m["portable_instructions"], m["dsp_instructions"],
               f"{m['speedup']:.2f}x", m.get("convs_with_dsp_scratch", 0)] for m in res["models"]]
        text += ["", "bundled models end to end (firmware project, sum of per-operator counts; "
                 "outputs == host run; both builds run the same plan, in which the convolutions "
                 "counted got the DSP build's fast scratch in free bytes, pyembed/plan/widen.py)",
                 table(mh, mb)]
        fh = ["model", "FC layers", "FC MACs", "DSP FC instr/MAC", "FC w16 instr/MAC", "DSP instr",
              "DSP + FC w16 instr", "gain", "convs w/ DSP scratch", "flash int8 -> int16 (delta)"]
        fb = [[m["model"], m["fc_w16_layers"], m["fc_macs"], f"{m['dsp_fc_instructions'] / m['fc_macs']:.2f}",
               f"{m['dsp_fc_w16_fc_instructions'] / m['fc_macs']:.2f}", m["dsp_instructions"],
               m["dsp_fc_w16_instructions"], f"{m['dsp_instructions'] / m['dsp_fc_w16_instructions']:.2f}x",
               f"{m.get('convs_with_dsp_scratch', 0)} -> {m['fc_w16_convs_with_dsp_scratch']}",
               f"{m['fc_int8_weight_bytes']:,} -> {m['fc_w16_weight_bytes']:,} ({m['fc_w16_flash_delta_bytes']:+,} B)"]
              for m in res["models"] if "dsp_fc_w16_instructions" in m]
        if fb:
            text += ["", "--fc-int16-weights (pyembed.passes.fc_w16): the DSP build once more with the int8 "
                     "FULLY_CONNECTED layers of at least 2,048 MACs per row (the pass's MIN_MACS) on int16 "
                     "weights packed offline (outputs == host run); FC instr/MAC over the widened layers only "
                     "(their per-operator counts in both runs, 40-instruction resolution); the widened "
                     "graph is planned anew, so its convolutions may get the fast scratch "
                     "(pyembed/plan/widen.py) elsewhere", table(fh, fb)]
    return "\n".join(text)
