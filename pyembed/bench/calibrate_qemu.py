"""Calibrate firmware_sim's Cortex-M4/M7 cost tables from pyembed's own kernels
measured under QEMU.

    python -m pyembed.bench calibrate [--qemu-only] [--qemu-write] [--json] [--models a,b]
    python -m pyembed.bench calibrate_qemu [--json] [--write] [--models a,b]

For every bundled model pyembed runs, the firmware project (pyembed firmware)
is built for mps2-an386 (Cortex-M4) and mps2-an500 (Cortex-M7) and run under
``qemu-system-arm -icount shift=0``: each operator's instruction count is
SysTick ticks * 40 (resolution 40 instructions). QEMU counts instructions, not
cycles; they become cycles with a stated CPI per kernel class (``CPI`` below:
an estimate from the cores' published pipeline timings, not a measurement).
Per core and kernel class the cost model's form

    cycles = call_cycles + cycles_per_mac * MACs + cycles_per_element * outputs
             (+ cycles_per_patch * im2col elements for kxk convolutions)

is fitted (non-negative least squares on relative error) to those cycles, and
each operator's firmware_sim prediction -- with the current table of the core
(fitted to MLPerf Tiny's CMSIS-NN latencies) and with the recalibrated one --
is printed beside the measurement. ``--write`` stores the recalibrated tables
as ``cortex-m4-pyembed`` / ``cortex-m7-pyembed`` in firmware_sim/profiles/
cores.json (the mps2 profiles use them).
"""
import json
import os
import tempfile

import numpy as np

BOARDS = {"cortex-m4": "mps2-an386", "cortex-m7": "mps2-an500"}
CLASSES = ("conv", "depthwise", "fc", "pool", "eltwise", "softmax", "copy", "alias", "other")

# Cycles per instruction, per core and kernel class. Estimates, stated, not measured:
# pyembed's kernels are portable C (no SIMD MACs); their inner loops are byte loads
# (LDRSB), a multiply-accumulate (MLA), an add and a loop branch. Cortex-M4 (3-stage,
# single issue, zero-wait SSRAM here): ALU/MLA 1 cycle, LDR 2 (1 when pipelined back
# to back), taken branch 2-3 -> about 1.3 for load/MAC loops, 1.2 for element-wise
# loops with fewer loads. Cortex-M7 (6-stage, dual issue, loads from TCM/cache): about
# 0.8 for MAC loops, 0.75 element-wise (ARM Cortex-M4/M7 technical reference manuals,
# instruction timing chapters).
CPI = {
    "cortex-m4": {"conv": 1.3, "depthwise": 1.3, "fc": 1.3, "pool": 1.2, "eltwise": 1.2, "softmax": 1.2,
                  "copy": 1.2, "alias": 1.2, "other": 1.2},
    "cortex-m7": {"conv": 0.8, "depthwise": 0.8, "fc": 0.8, "pool": 0.75, "eltwise": 0.75, "softmax": 0.75,
                  "copy": 0.75, "alias": 0.75, "other": 0.75},
}
CPI_SOURCE = ("stated CPI per kernel class (estimates from the Cortex-M4/M7 TRM instruction timings for "
              "load/MLA/branch loops), not measured: QEMU counts instructions only")


def runnable_models():
    from pyembed.data import MODELS_DIR
    from pyembed.model.load import load_model
    out = []
    for f in sorted(os.listdir(MODELS_DIR)):
        if f.endswith(".tflite"):
            g = load_model(os.path.join(MODELS_DIR, f))
            if not g.unsupported:
                out.append((f[:-len(".tflite")], g))
    return out


def _features(graph, op):
    from firmware_sim.cost import patch_elements
    elements = sum(int(np.prod(graph.tensors[o].shape)) for o in op.outputs if o >= 0)
    macs = int(getattr(op, "macs", 0) or 0)
    return macs, elements, patch_elements(graph, op)


def measure(models=None, workdir=None):
    """[{model, core, board, operators: [{index, type, class, macs, elements, patches,
    instructions}], total_instructions}] from QEMU runs of the firmware."""
    from firmware_sim.cost import kernel_class
    from pyembed.target.firmware import build_project, generate, run_project
    workdir = workdir or tempfile.mkdtemp(prefix="pe_calib_qemu_")
    rows = []
    for name, g in runnable_models():
        if models and name not in models:
            continue
        rng = np.random.default_rng(0)
        xs = [rng.integers(-128, 128, size=g.tensors[t].shape).astype(g.tensors[t].dtype) for t in g.inputs]
        host = g.run(xs if len(xs) > 1 else xs[0])
        host = list(host) if isinstance(host, (list, tuple)) else [host]
        for core, board in BOARDS.items():
            proj = generate(g, board, os.path.join(workdir, f"{name}-{board}"))
            build_project(proj.outdir, make_vars={"RUNTIME_BUILD": os.path.join(workdir, f"runtime-{board}")})
            run = run_project(proj, xs)
            exact = all(np.array_equal(a.ravel(), np.asarray(b).ravel()) for a, b in zip(run.outputs, host))
            ops = []
            for o in run.operators:
                op = g.operators[o["index"]]
                aliased = any(g.aliases.get(t) is not None for t in op.outputs)
                macs, elements, patches = _features(g, op)
                ops.append({"index": o["index"], "type": o["type"], "class": kernel_class(op.type, aliased),
                            "macs": macs, "elements": elements, "patches": patches,
                            "instructions": o["instructions"]})
            rows.append({"model": name, "core": core, "board": board, "bit_exact": exact, "operators": ops,
                         "total_instructions": run.total_instructions})
    return rows


def _cycles(core, op):
    return op["instructions"] * CPI[core][op["class"]]


def fit(rows):
    """{core: {class: {call_cycles, cycles_per_mac, cycles_per_element, cycles_per_patch, n}}}:
    non-negative least squares on relative error per core and class."""
    from scipy.optimize import nnls
    out = {}
    for core in BOARDS:
        out[core] = {}
        samples = [op for r in rows if r["core"] == core for op in r["operators"]]
        for cls in CLASSES:
            ops = [op for op in samples if op["class"] == cls]
            if not ops:
                continue
            y = np.array([_cycles(core, op) for op in ops], dtype=float)
            cols = [np.ones(len(ops)), [op["macs"] for op in ops], [op["elements"] for op in ops]]
            if cls == "conv":
                cols.append([op["patches"] for op in ops])
            A = np.array(cols, dtype=float).T
            if len(ops) < A.shape[1] + 1:      # too few operators: a call cost and a per-element cost only
                A = A[:, [0, 2]]
            w = 1.0 / np.maximum(y, 1.0)        # relative error
            sol, _ = nnls(A * w[:, None], y * w)
            if A.shape[1] == 2:
                coef = {"call_cycles": sol[0], "cycles_per_mac": 0.0, "cycles_per_element": sol[1]}
            else:
                coef = {"call_cycles": sol[0], "cycles_per_mac": sol[1], "cycles_per_element": sol[2]}
            coef["cycles_per_patch"] = float(sol[3]) if cls == "conv" and A.shape[1] == 4 else 0.0
            out[core][cls] = {k: round(float(v), 4) for k, v in coef.items()}
            out[core][cls]["n"] = len(ops)
    return out


def _predict(table, op):
    k = table.get(op["class"]) or table.get("other")
    return (k["call_cycles"] + k["cycles_per_mac"] * op["macs"] + k["cycles_per_element"] * op["elements"]
            + k.get("cycles_per_patch", 0.0) * op["patches"])


def _current_tables():
    from firmware_sim.profiles import load_profile
    out = {}
    for core, board in BOARDS.items():
        # the bundled table the core's MLPerf-calibrated profiles use (not the mps2 profile's own)
        prof = load_profile("nucleo_l4r5zi" if core == "cortex-m4" else "nucleo_h7a3zi")
        out[core] = {c: {"call_cycles": k.call_cycles, "cycles_per_mac": k.cycles_per_mac,
                         "cycles_per_element": k.cycles_per_element, "cycles_per_patch": k.cycles_per_patch}
                     for c, k in prof.kernel_costs.items()}
    return out


def compare(rows, fitted):
    """Per model/core: measured cycles, prediction with the current table and with the fit."""
    current = _current_tables()
    out = []
    for r in rows:
        core = r["core"]
        ops = []
        for op in r["operators"]:
            meas = _cycles(core, op)
            ops.append({**op, "cycles": round(meas), "predicted_current": round(_predict(current[core], op)),
                        "predicted_fit": round(_predict(fitted[core], op))})
        tot = sum(o["cycles"] for o in ops)
        pc = sum(o["predicted_current"] for o in ops)
        pf = sum(o["predicted_fit"] for o in ops)
        out.append({"model": r["model"], "core": core, "board": r["board"], "bit_exact": r["bit_exact"],
                    "instructions": r["total_instructions"], "cycles": tot,
                    "predicted_current": pc, "predicted_fit": pf,
                    "error_current": round((pc - tot) / tot, 4) if tot else None,
                    "error_fit": round((pf - tot) / tot, 4) if tot else None, "operators": ops})
    return out


def leave_one_model_out(rows):
    """{(model, core): relative error of the total predicted by a fit on the other models}."""
    out = {}
    names = sorted({r["model"] for r in rows})
    if len(names) < 2:
        return out
    for name in names:
        fitted = fit([r for r in rows if r["model"] != name])
        for r in rows:
            if r["model"] != name:
                continue
            core = r["core"]
            tot = sum(_cycles(core, op) for op in r["operators"])
            pred = sum(_predict(fitted[core], op) for op in r["operators"]
                       if op["class"] in fitted[core] or "other" in fitted[core])
            out[(name, core)] = round((pred - tot) / tot, 4) if tot else None
    return out


def write_tables(fitted, path=None):
    """Store the fitted tables as cortex-m4-pyembed / cortex-m7-pyembed in cores.json
    (classes not measured copied from the base core, noted)."""
    import firmware_sim.profiles as fp
    path = path or os.path.join(os.path.dirname(fp.__file__), "cores.json")
    with open(path) as f:
        cores = json.load(f)
    for core, table in fitted.items():
        base = cores[core]
        entry = {"source": f"pyembed's own kernels (portable C) measured under QEMU -icount shift=0 on "
                           f"{BOARDS[core]} (python -m pyembed.bench calibrate --qemu-only --qemu-write): instructions "
                           f"x {CPI_SOURCE}; classes with no measured operator copied from {core}"}
        for cls in CLASSES:
            if cls in table:
                entry[cls] = {k: v for k, v in table[cls].items() if k != "n"}
            elif cls in base:
                entry[cls] = base[cls]
        cores[f"{core}-pyembed"] = entry
    with open(path, "w") as f:
        json.dump(cores, f, indent=1)
        f.write("\n")
    return path


def _pct(x):
    return "-" if x is None else f"{100 * x:.1f}%"


def render(result):
    lines = ["== QEMU-measured instruction counts of pyembed's own kernels (mps2-an386 Cortex-M4, "
             "mps2-an500 Cortex-M7; -icount shift=0, 40-instruction resolution per operator)",
             f"   cycles = instructions x CPI: {CPI_SOURCE}",
             "   predicted: firmware_sim cost model with the current core table (fitted to MLPerf Tiny, "
             "CMSIS-NN) and recalibrated from these counts", ""]
    lines.append(f"{'model':<30} {'core':<10} {'instructions':>13} {'cycles':>13} {'pred. current':>14} "
                 f"{'err':>7} {'pred. fit':>12} {'err':>7} {'LOO err':>8} exact")
    for r in result["models"]:
        lines.append(f"{r['model']:<30} {r['core']:<10} {r['instructions']:>13,} {r['cycles']:>13,} "
                     f"{r['predicted_current']:>14,} {100 * r['error_current']:>6.1f}% {r['predicted_fit']:>12,} "
                     f"{100 * r['error_fit']:>6.1f}% {_pct(r.get('error_fit_leave_one_out')):>8} "
                     f"{'yes' if r['bit_exact'] else 'NO'}")
    lines.append("   (err: prediction vs measured cycles; fit in-sample; LOO: fitted without that model)")
    lines.append("")
    lines.append("per operator (cycles = measured instructions x CPI):")
    for r in result["models"]:
        lines.append(f"  {r['model']} on {r['core']}:")
        lines.append(f"    {'op':>3} {'type':<20} {'class':<9} {'MACs':>10} {'instr':>11} {'cycles':>11} "
                     f"{'current':>11} {'fit':>11}")
        for o in r["operators"]:
            lines.append(f"    {o['index']:>3} {o['type']:<20} {o['class']:<9} {o['macs']:>10,} "
                         f"{o['instructions']:>11,} {o['cycles']:>11,} {o['predicted_current']:>11,} "
                         f"{o['predicted_fit']:>11,}")
    lines.append("")
    lines.append("fitted tables (cycles; n = operators measured):")
    for core, table in result["fit"].items():
        for cls, k in table.items():
            lines.append(f"  {core:<10} {cls:<9} call {k['call_cycles']:>10.1f}  /MAC {k['cycles_per_mac']:>7.4f}  "
                         f"/output {k['cycles_per_element']:>8.3f}  /im2col {k['cycles_per_patch']:>7.4f}  n={k['n']}")
    if result.get("written"):
        lines.append(f"written: {result['written']}")
    return "\n".join(lines)


def run(models=None, write=False):
    rows = measure(models)
    fitted = fit(rows)
    result = {"cpi": CPI, "cpi_source": CPI_SOURCE, "models": compare(rows, fitted), "fit": fitted}
    loo = leave_one_model_out(rows)
    for r in result["models"]:
        r["error_fit_leave_one_out"] = loo.get((r["model"], r["core"]))
    if write:
        result["written"] = os.path.relpath(write_tables(fitted))
    return result


def main(argv=None):
    import argparse

    from pyembed.bench.common import emit
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench calibrate_qemu", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--write", action="store_true", help="store the fitted tables in cores.json")
    ap.add_argument("--models", default=None, help="comma-separated bundled model names (default: all that run)")
    args = ap.parse_args(argv)
    result = run(args.models.split(",") if args.models else None, write=args.write)
    emit(result, args.json, render)
    return 0
