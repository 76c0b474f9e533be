"""Calibrate firmware_sim's Cortex-M4/M7 cost model from pyembed's own kernels
measured under QEMU, per instruction class.

    python -m pyembed.bench calibrate [--qemu-only] [--qemu-write] [--json] [--models a,b]
    python -m pyembed.bench calibrate_qemu [--json] [--write] [--models a,b] [--builds dsp,portable]
                                           [--save F.json | --load F.json] [--groups G1,G2]

For every bundled model pyembed runs, the firmware project (pyembed firmware)
is built for mps2-an386 (Cortex-M4) and mps2-an500 (Cortex-M7), twice: the
``dsp`` build (what these cores compile: the Arm DSP-extension inner loops)
and the ``portable`` build (``-DPE_FORCE_PORTABLE``, the plain C loops). Each
is run under ``qemu-system-arm -icount shift=0`` twice: plainly (outputs
compared with the host run, per-operator SysTick counts, 40-instruction
resolution) and with instruction tracing (pyembed.target.imix: every executed
instruction, classified: ALU, MUL, DSP, load, pipelined load, store,
LDRD/STRD, LDM/STM and their registers, branch taken / not taken, divide,
other).

The fit (firmware_sim.icount): per core, build and operator group (type and
kernel form, e.g. ``CONV_2D/gather``), instructions = a linear model of the
operator's shape (MACs, outputs, positions, dot-product loops, ...) by
non-negative least squares on relative error to the traced counts; the
group's instruction mix as measured. Predicted cycles = predicted
instructions x the CPI of the mix (CPI per class from ARM's manuals,
firmware_sim.icount.CPI). Leave-one-model-out: every model predicted from a
fit of the other models only (groups it alone has fall back to the type, then
the kernel class). ``--write`` stores the table (fitted on every model) in
firmware_sim/profiles/pyembed_icount.json, which the mps2 profiles
(cortex-m4-pyembed / cortex-m7-pyembed) use: ``pyembed simulate`` then predicts
pyembed's code.
"""
import json
import os
import tempfile

import numpy as np

BOARDS = {"cortex-m4": "mps2-an386", "cortex-m7": "mps2-an500"}
# --cores: further cores fitted the same way on their QEMU boards (issue #35). Their runs are not traced
# (--no-trace: SysTick counts, 50 / 31.25-instruction resolution per operator): the instruction counts are
# fitted on their own measurements, the instruction mix of each group is the Cortex-M4 dsp table's (the same
# C and the same DSP-extension path: the mix that prices the instructions, not the count, is borrowed)
MORE_BOARDS = {"cortex-m33": "mps2-an505", "cortex-m55": "mps3-an547"}
ALL_BOARDS = {**BOARDS, **MORE_BOARDS}
BUILDS = {"dsp": "-O2", "portable": "-O2 -DPE_FORCE_PORTABLE"}


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


def measure(models=None, builds=tuple(BUILDS), workdir=None, trace=True, log=None, calibration_set=True,
            cores=tuple(BOARDS), groups=None):
    """[{model, calibration, core, board, build, bit_exact, total_instructions, operators: [{index, type,
    group_keys, features, systick_instructions, traced_instructions, mix_counts}]}]. calibration_set adds
    the small operators of pyembed.bench._calib_models (always fitted, never validated)."""
    from firmware_sim.cost import kernel_class
    from firmware_sim.icount import features, group_keys
    from pyembed.target import imix
    from pyembed.target.firmware import _input_bytes, build_project, generate, load_manifest, run_project
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="pe_calib_qemu_") as tmp:
            return measure(models, builds, tmp, trace, log, calibration_set, cores, groups)
    rows = []
    todo = [(n, g, False) for n, g in runnable_models() if not models or n in models]
    if calibration_set:
        from pyembed.bench._calib_models import calibration_graphs
        todo += [(n, g, True) for n, g in calibration_graphs()]
    if groups:
        # --groups: only the graphs with an operator of those groups (type or type/form)
        def _has(g):
            return any(op.type in groups or f"{op.type}/{(op.params or {}).get('conv_form')}" in groups
                       for op in g.operators)
        todo = [t for t in todo if _has(t[1])]
    for name, g, is_calibration in todo:
        rng = np.random.default_rng(0)
        xs = [rng.integers(-128, 128, size=g.tensors[t].shape).astype(g.tensors[t].dtype) for t in g.inputs]
        host = g.run(xs if len(xs) > 1 else xs[0])
        host = list(host) if isinstance(host, (list, tuple)) else [host]
        for core, board in ((c, ALL_BOARDS[c]) for c in cores):
            for build in builds:
                proj = generate(g, board, os.path.join(workdir, f"{name}-{board}-{build}"))
                build_project(proj.outdir, make_vars={
                    "RUNTIME_BUILD": os.path.join(workdir, f"runtime-{board}-{build}"), "OPT": BUILDS[build]})
                run = run_project(proj, xs)
                exact = all(np.array_equal(a.ravel(), np.asarray(b).ravel()) for a, b in zip(run.outputs, host))
                mixes = None
                if trace:
                    mixes = imix.trace_operators(proj.outdir / "firmware.elf", board,
                                                 _input_bytes(load_manifest(proj.outdir), xs))
                    if len(mixes) != len(run.operators):
                        raise RuntimeError(f"{name} {board} {build}: traced {len(mixes)} operators, "
                                           f"timed {len(run.operators)}")
                ops = []
                for k, o in enumerate(run.operators):
                    op = g.operators[o["index"]]
                    aliased = any(g.aliases.get(t) is not None for t in op.outputs)
                    row = {"index": o["index"], "type": o["type"],
                           "group_keys": group_keys(g, op, kernel_class(op.type, aliased)),
                           "features": features(g, op), "systick_instructions": o["instructions"]}
                    if mixes is not None:
                        row["traced_instructions"] = mixes[k].instructions
                        row["mix_counts"] = dict(sorted(mixes[k].counts.items()))
                    ops.append(row)
                rows.append({"model": name, "calibration": is_calibration, "core": core, "board": board, "build": build, "bit_exact": exact,
                             "total_instructions": sum(o.get("traced_instructions", o["systick_instructions"])
                                                       for o in ops),
                             "systick_instructions": run.total_instructions, "operators": ops})
                if log:
                    log(f"{name} {board} {build}: {rows[-1]['total_instructions']:,} instructions, "
                        f"bit-exact {exact}")
    return rows


def _instr(op):
    return op.get("traced_instructions", op["systick_instructions"])


def _fit_group(ops, names):
    from scipy.optimize import nnls
    y = np.array([_instr(o) for o in ops], dtype=float)
    A = np.array([[o["features"].get(n, 0.0) for n in names] for o in ops], dtype=float)
    keep = [j for j in range(len(names)) if A[:, j].any()]
    w = 1.0 / np.maximum(y, 1.0)
    sol = np.zeros(len(names))
    if keep:
        s, _ = nnls(A[:, keep] * w[:, None], y * w)
        sol[keep] = s
    return {n: round(float(v), 5) for n, v in zip(names, sol)}


def _mix(ops):
    tot = {}
    for o in ops:
        for k, v in o.get("mix_counts", {}).items():
            tot[k] = tot.get(k, 0) + v
    n = sum(v for k, v in tot.items() if k != "ldm_stm_regs")
    return {k: round(v / n, 6) for k, v in sorted(tot.items())} if n else {"alu": 1.0}


def _borrowed_mix(key):
    """The Cortex-M4 dsp table's mix of group key (stored pyembed_icount.json), for an untraced core."""
    import firmware_sim.profiles as fp
    path = os.path.join(os.path.dirname(fp.__file__), TABLE_FILE)
    with open(path) as f:
        m4 = json.load(f)["tables"]["cortex-m4"]["dsp"]
    return dict(m4.get(key, m4["class:other"])["mix"])


def fit(rows):
    """{core: {build: {group: {"coef": {feature: instructions per unit}, "mix": {class: fraction}, "n": ops}}}}.
    Every operator is a sample of each of its group keys (type/form, type, class, other). A core whose runs
    were not traced takes each group's mix from the Cortex-M4 dsp table (its "mix_from" says so)."""
    from firmware_sim.icount import feature_names
    out = {}
    for core in dict.fromkeys(r["core"] for r in rows):
        for build in sorted({r["build"] for r in rows}):
            samples = {}
            for r in rows:
                if r["core"] != core or r["build"] != build:
                    continue
                for o in r["operators"]:
                    for key in o["group_keys"]:
                        samples.setdefault(key, []).append(o)
            table = {}
            for key, ops in sorted(samples.items()):
                kclass = next((k for k in ops[0]["group_keys"] if k.startswith("class:")), "class:other")[6:]
                names = (feature_names(kclass, key) if key != "class:other" else ("call", "outputs"))
                traced = any("mix_counts" in o for o in ops)
                table[key] = {"coef": _fit_group(ops, names), "mix": _mix(ops) if traced else _borrowed_mix(key),
                              "n": len(ops)}
                if not traced:
                    table[key]["mix_from"] = "cortex-m4 dsp"
            out.setdefault(core, {})[build] = table
    return out


def _predict_op(table, core, op):
    from firmware_sim.icount import cpi_of_mix
    for key in op["group_keys"]:
        g = table.get(key)
        if g is not None:
            n = max(0.0, sum(v * op["features"].get(k, 0.0) for k, v in g["coef"].items()))
            return n, key, n * cpi_of_mix(core, g["mix"])
    return 0.0, None, 0.0


def _measured_cycles(core, op):
    from firmware_sim.icount import CPI
    cpi = CPI[core]
    return sum(cpi[k] * v for k, v in op.get("mix_counts", {}).items() if k in cpi)


def compare(rows, fitted, loo=None):
    """Per model, core and build: measured instructions (traced), predicted instructions (in-sample and
    leave-one-model-out), error %, predicted and trace-derived cycles and the CPI used."""
    out = []
    for r in rows:
        core, build = r["core"], r["build"]
        ops = []
        for op in r["operators"]:
            n, key, cyc = _predict_op(fitted[core][build], core, op)
            row = {"index": op["index"], "type": op["type"], "group": key, "instructions": _instr(op),
                   "predicted": round(n), "predicted_cycles": round(cyc),
                   "trace_cycles": round(_measured_cycles(core, op))}
            if loo is not None and r["model"] in loo:
                ln, lkey, lcyc = _predict_op(loo[r["model"]][core][build], core, op)
                row.update({"predicted_loo": round(ln), "group_loo": lkey, "predicted_cycles_loo": round(lcyc)})
            ops.append(row)
        meas = sum(o["instructions"] for o in ops)
        pred = sum(o["predicted"] for o in ops)
        cyc = sum(o["predicted_cycles"] for o in ops)
        entry = {"model": r["model"], "core": core, "board": r["board"], "build": build, "bit_exact": r["bit_exact"],
                 "instructions": meas, "systick_instructions": r["systick_instructions"], "predicted": pred,
                 "error_pct": round(100.0 * (pred - meas) / meas, 2) if meas else None,
                 "predicted_cycles": cyc, "trace_cycles": sum(o["trace_cycles"] for o in ops),
                 "cpi": round(cyc / pred, 3) if pred else None, "operators": ops}
        entry["calibration"] = bool(r.get("calibration"))
        if loo is not None and r["model"] in loo:
            lp = sum(o["predicted_loo"] for o in ops)
            entry.update({"predicted_loo": lp, "error_loo_pct": round(100.0 * (lp - meas) / meas, 2) if meas else None,
                          "predicted_cycles_loo": sum(o["predicted_cycles_loo"] for o in ops)})
        out.append(entry)
    return out


def leave_one_model_out(rows):
    """{model: fit on every other row} for each bundled model (the calibration set is always fitted)."""
    return {name: fit([r for r in rows if r["model"] != name])
            for name in sorted({r["model"] for r in rows if not r.get("calibration")})}


TABLE_FILE = "pyembed_icount.json"


def write_table(fitted, path=None):
    """Store the fitted tables (with the CPI tables and their sources) for firmware_sim."""
    import firmware_sim.profiles as fp
    from firmware_sim.icount import CPI, CPI_SOURCE
    path = path or os.path.join(os.path.dirname(fp.__file__), TABLE_FILE)
    # the compiler pipeline's groups are fitted by calibrate_pipeline on other builds: kept unless refitted
    kept, note, other_cores = {}, None, {}
    if os.path.isfile(path):
        with open(path) as f:
            old = json.load(f)
        note = old.get("_doc_pipeline")
        # the tables of cores not refitted now stay (--cores fits some cores only)
        other_cores = {c: t for c, t in old.get("tables", {}).items() if c not in fitted}
        for core, builds in old.get("tables", {}).items():
            for build, t in builds.items():
                # and the float32 groups (calibrate_f32), RESIZE_BILINEAR (calibrate_bilinear) and the
                # transformer groups (calibrate_transformer)
                for k in t:
                    if (k in ("PE_STRIPE_REGION", "PE_STRIPE_REGION/wide", "PE_CONV_POOL", "RESIZE_BILINEAR",
                              "PE_ATTENTION/tflm", "PE_LAYERNORM", "PE_LUT", "FULLY_CONNECTED/rows",
                              "SOFTMAX/rows", "TRANSPOSE/walk", "BATCH_MATMUL/s8")
                            or k.endswith("@float32") or k.startswith("class:f32_")) \
                            and k not in fitted.get(core, {}).get(build, {}):
                        kept.setdefault((core, build), {})[k] = t[k]
    doc = {"_doc": "Generated by 'python -m pyembed.bench calibrate --qemu-write' (pyembed/bench/calibrate_qemu.py): "
                   "per core, build (dsp / portable) and operator group, instructions = sum coef[f] * feature f "
                   "(firmware_sim/icount.py), fitted to QEMU-traced instruction counts of pyembed's firmware for "
                   "every bundled model; mix = measured fraction of executed instructions per class "
                   "(pyembed/target/imix.py); cycles = instructions x sum mix x CPI (firmware_sim.icount.CPI).",
           "cpi": CPI, "cpi_source": CPI_SOURCE,
           "tables": {**other_cores,
                      **{core: {build: {k: {"coef": v["coef"], "mix": v["mix"], "n": v["n"],
                                            **({"mix_from": v["mix_from"]} if "mix_from" in v else {})}
                                        for k, v in t.items()}
                                for build, t in builds.items()} for core, builds in fitted.items()}}}
    for (core, build), groups in kept.items():
        if build in doc["tables"].get(core, {}):
            doc["tables"][core][build].update(groups)
    # a core of MORE_BOARDS has no pipeline groups of its own (calibrate_pipeline fits the Cortex-M4's):
    # it takes the Cortex-M4 dsp table's, marked, rather than none (which would price its stripe regions
    # by the kernel classes and change the plans the optimizer picks)
    m4 = doc["tables"].get("cortex-m4", {}).get("dsp", {})
    if any(core in doc["tables"] for core in MORE_BOARDS):
        doc["_doc_more_cores"] = ("cortex-m33 / cortex-m55 (mps2-an505 / mps3-an547): 'python -m pyembed.bench "
                                  "calibrate_qemu --cores cortex-m33,cortex-m55 --builds dsp --no-trace --write': "
                                  "coefficients fitted to their own QEMU SysTick counts (not traced); each group's mix "
                                  "('mix_from') and the pipeline groups ('from') are the cortex-m4 dsp table's; CPI: "
                                  "the Cortex-M4's, assumed")
    for core in MORE_BOARDS:
        for build, t in doc["tables"].get(core, {}).items():
            for k in ("PE_STRIPE_REGION", "PE_CONV_POOL"):
                if k not in t and k in m4:
                    t[k] = {**m4[k], "from": "cortex-m4 dsp"}
    if note and kept:
        doc["_doc_pipeline"] = note
    for k in ("_doc_f32", "_doc_bilinear", "_doc_transformer"):
        if os.path.isfile(path) and old.get(k):
            doc[k] = old[k]
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    return path


def merge_groups(fitted, groups, path=None):
    """Store only the given groups of the fitted tables (each core and build fitted) into the stored
    table, every other group as it was: a refit of some operator groups on their own QEMU runs
    (--groups) that leaves the rest of the calibration alone."""
    import firmware_sim.profiles as fp
    path = path or os.path.join(os.path.dirname(fp.__file__), TABLE_FILE)
    with open(path) as f:
        doc = json.load(f)
    for core, builds in fitted.items():
        for build, t in builds.items():
            dst = doc.setdefault("tables", {}).setdefault(core, {}).setdefault(build, {})
            for k in groups:
                if k in t:
                    v = t[k]
                    dst[k] = {"coef": v["coef"], "mix": v["mix"], "n": v["n"],
                              **({"mix_from": v["mix_from"]} if "mix_from" in v else {})}
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    return path


def _pct(x):
    return "-" if x is None else f"{x:+.1f}%"


def _mix_text(table, core, groups):
    from firmware_sim.icount import cpi_of_mix
    out = []
    for key in groups:
        g = table.get(key)
        if g is None:
            continue
        m = g["mix"]
        top = ", ".join(f"{k} {100 * v:.0f}%" for k, v in sorted(m.items(), key=lambda kv: -kv[1])
                        if k != "ldm_stm_regs" and v >= 0.03)
        out.append(f"    {key:<28} CPI {cpi_of_mix(core, m):.3f}  ({top})")
    return out


def render(result):
    lines = ["== pyembed's kernels under QEMU (-icount shift=0, instructions traced and classified): measured vs "
             "predicted by firmware_sim.icount",
             "   predicted instructions: per-group linear model of the operator's shape, fitted to these counts; "
             "LOO = fitted without the model; cal-only = fitted on the calibration set alone",
             "   cycles = instructions x CPI of the group's measured mix (CPI per class: "
             "firmware_sim.icount.CPI_SOURCE); trace cycles = the traced instructions x their own classes' CPI",
             ""]
    hdr = (f"{'model':<30} {'core':<10} {'build':<9} {'measured':>12} {'predicted':>12} {'err':>7} "
           f"{'LOO pred.':>12} {'LOO err':>8} {'cal-only':>9} {'pred. cycles':>13} {'CPI':>6} "
           f"{'trace cycles':>13} exact")
    lines.append(hdr)
    for r in result["models"]:
        lines.append(f"{r['model']:<30} {r['core']:<10} {r['build']:<9} {r['instructions']:>12,} "
                     f"{r['predicted']:>12,} {_pct(r['error_pct']):>7} {r.get('predicted_loo', 0):>12,} "
                     f"{_pct(r.get('error_loo_pct')):>8} {_pct(r.get('error_calibration_only_pct')):>9} "
                     f"{r['predicted_cycles']:>13,} {r['cpi'] or 0:>6.3f} {r['trace_cycles']:>13,} "
                     f"{'yes' if r['bit_exact'] else 'NO'}")
    loo = [abs(r["error_loo_pct"]) for r in result["models"] if r.get("error_loo_pct") is not None]
    ins = [abs(r["error_pct"]) for r in result["models"] if r.get("error_pct") is not None]
    if loo:
        lines.append(f"\n|error| in-sample: mean {np.mean(ins):.1f}%, max {np.max(ins):.1f}%; leave-one-model-out: "
                     f"mean {np.mean(loo):.1f}%, max {np.max(loo):.1f}%")
        over = [f"{r['model']} {r['core']} {r['build']} {r['error_loo_pct']:+.1f}%" for r in result["models"]
                if abs(r.get("error_loo_pct") or 0) > 15]
        lines.append("leave-one-out |error| > 15 %: " + (", ".join(over) if over else "none"))
        cal = [abs(r["error_calibration_only_pct"]) for r in result["models"]
               if r.get("error_calibration_only_pct") is not None]
        if cal:
            lines.append(f"cal-only (fitted on the calibration set alone, no bundled model): mean |error| "
                         f"{np.mean(cal):.1f}%, max {np.max(cal):.1f}%")
    cal = result.get("calibration_set") or []
    if cal:
        lines.append("calibration set (pyembed.bench._calib_models, always fitted): "
                     + ", ".join(f"{r['model']} {r['core']} {r['build']} {r['instructions']:,} instr "
                                 f"({_pct(r['error_pct'])} in-sample, {'bit-exact' if r['bit_exact'] else 'NOT bit-exact'})"
                                 for r in cal))
    lines.append("\nCPI of the measured mix per group (cycles per instruction used for the prediction):")
    for core, builds in result["fit"].items():
        for build, table in builds.items():
            lines.append(f"  {core} {build}:")
            lines.extend(_mix_text(table, core, [k for k in table if not k.startswith("class:")]))
    lines.append("\nper operator (first board/build of each model shown with --json):")
    for r in result["models"]:
        if r["build"] != "dsp" or r["core"] != "cortex-m4":
            continue
        lines.append(f"  {r['model']} (cortex-m4, dsp):")
        for o in r["operators"]:
            lines.append(f"    {o['index']:>3} {o['type']:<20} {str(o['group']):<28} measured {o['instructions']:>11,} "
                         f"predicted {o['predicted']:>11,} LOO {o.get('predicted_loo', 0):>11,} "
                         f"cycles {o['predicted_cycles']:>11,}")
    if result.get("written"):
        lines.append(f"\nwritten: {result['written']}")
    return "\n".join(lines)


def run(models=None, write=False, builds=tuple(BUILDS), load=None, save=None, log=None, calibration_set=True,
        cores=tuple(BOARDS), trace=True, groups=None):
    if load:
        with open(load) as f:
            rows = json.load(f)
        if not calibration_set:
            rows = [r for r in rows if not r.get("calibration")]
    else:
        rows = measure(models, builds, log=log, calibration_set=calibration_set, cores=cores, trace=trace,
                       groups=groups)
        if save:
            with open(save, "w") as f:
                json.dump(rows, f)
    fitted = fit(rows)
    loo = leave_one_model_out(rows) if len({r["model"] for r in rows}) > 1 else None
    result_rows = compare(rows, fitted, loo)
    cal_rows = [r for r in rows if r.get("calibration")]
    if cal_rows:   # the strictest check: fitted on the small calibration operators only
        cal_fit = fit(cal_rows)
        for r, c in zip([r for r in result_rows if not r["calibration"]],
                        compare([r for r in rows if not r.get("calibration")], cal_fit)):
            r["predicted_calibration_only"], r["error_calibration_only_pct"] = c["predicted"], c["error_pct"]
    result = {"cpi": None, "models": [r for r in result_rows if not r["calibration"]],
              "calibration_set": [{k: v for k, v in r.items() if k != "operators"} for r in result_rows
                                  if r["calibration"]], "fit": fitted}
    from firmware_sim.icount import CPI, CPI_SOURCE
    result["cpi"], result["cpi_source"] = CPI, CPI_SOURCE
    if write:
        result["written"] = os.path.relpath(merge_groups(fitted, groups) if groups else write_table(fitted))
    return result


def main(argv=None):
    import argparse
    import sys

    from pyembed.bench.common import emit
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench calibrate_qemu", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--write", action="store_true", help=f"store the fitted tables in firmware_sim/profiles/{TABLE_FILE}")
    ap.add_argument("--models", default=None, help="comma-separated bundled model names (default: all that run)")
    ap.add_argument("--builds", default=",".join(BUILDS), help="dsp,portable (default both)")
    ap.add_argument("--save", default=None, help="save the raw measurements to this JSON file")
    ap.add_argument("--load", default=None, help="fit raw measurements saved with --save (no QEMU run)")
    ap.add_argument("--no-calibration-set", action="store_true",
                    help="fit the bundled models only (without the small operators of pyembed.bench._calib_models)")
    ap.add_argument("--cores", default=",".join(BOARDS),
                    help=f"cores to measure and fit, of {', '.join(ALL_BOARDS)} (default {','.join(BOARDS)}); "
                         f"--write keeps the stored tables of the others")
    ap.add_argument("--no-trace", action="store_true",
                    help="SysTick counts only, no instruction tracing: each group's mix is the Cortex-M4 dsp "
                         "table's (how the M33 / M55 tables are fitted)")
    ap.add_argument("--groups", default=None,
                    help="comma-separated operator groups (e.g. CONV_2D@w4,DEPTHWISE_CONV_2D@w4): measure only the "
                         "graphs that have them; --write stores only those groups, the rest of the table as it was")
    args = ap.parse_args(argv)
    cores = tuple(c.strip() for c in args.cores.split(",") if c.strip())
    bad = [c for c in cores if c not in ALL_BOARDS]
    if bad:
        ap.error(f"--cores: unknown {', '.join(bad)} (known: {', '.join(ALL_BOARDS)})")
    result = run(args.models.split(",") if args.models else None, write=args.write,
                 builds=tuple(args.builds.split(",")), load=args.load, save=args.save,
                 calibration_set=not args.no_calibration_set, cores=cores, trace=not args.no_trace,
                 groups=tuple(g.strip() for g in args.groups.split(",") if g.strip()) if args.groups else None,
                 log=lambda s: print(s, file=sys.stderr, flush=True))
    emit(result, args.json, render)
    return 0
