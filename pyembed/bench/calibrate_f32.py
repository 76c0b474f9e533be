"""The float32 groups of the instruction model, measured on QEMU and fitted
(issue #30 / #31: float32 operators were priced with the int8 classes).

    python -m pyembed.bench calibrate_f32 [--boards mps2-an386,mps2-an500] [--write] [--json]
                                          [--save F.json | --load F.json]

The float32 models of pyembed.bench._f32_models (built in-process, random
float32 weights) are built as firmware (pyembed firmware, dsp build, -O2) for
mps2-an386 (Cortex-M4F, fpv4-sp-d16 hard float) and mps2-an500 (Cortex-M7,
fpv5-d16), run under ``qemu-system-arm -icount shift=0`` with instruction
tracing (pyembed.target.imix: every executed instruction counted per
operator and classified). Outputs are compared with the host run (bits of
every output; the transcendental functions are newlib's on the board, glibc's
on the host, so a few ulps may differ: the largest difference is printed).

The fit (firmware_sim.icount_f32): per core, every float32 group
("TYPE@float32" and "class:f32_<kind>") by non-negative least squares on
relative error over the CALIBRATION models only (calibrate_qemu._fit_group);
the group's instruction mix as traced. The VALIDATION models (the float32
CNN of tests/test_ops_f32_conv.py and an element-wise chain of a size not
fitted) are predicted, never fitted.

``--write`` merges the float32 groups into firmware_sim/profiles/pyembed_icount.json
(the core's dsp table, and its portable table: the float32 kernels have no
DSP-extension path, -DPE_FORCE_PORTABLE compiles the same code) and stores the
measurements with the command in pyembed/bench/data/icount_f32.json, which
tests/test_icount_f32.py predicts again from the committed table.
"""
import json
import os
import tempfile

import numpy as np

BOARDS = {"mps2-an386": "cortex-m4", "mps2-an500": "cortex-m7"}
DATA_FILE = os.path.join(os.path.dirname(__file__), "data", "icount_f32.json")
COMMAND = "python -m pyembed.bench calibrate_f32 --write"


def is_f32_group(key):
    return key.endswith("@float32") or key.startswith("class:f32_")


def _ulps(a, b):
    a = np.asarray(a, np.float32).ravel().view(np.int32).astype(np.int64)
    b = np.asarray(b, np.float32).ravel().view(np.int32).astype(np.int64)
    return int(np.abs(a - b).max()) if a.size else 0


def measure(boards=tuple(BOARDS), workdir=None, log=None):
    """Rows {model, set, core, board, build, max_ulps, total_instructions (traced, operators),
    systick_instructions, operators: [{index, type, group_keys, features, systick_instructions,
    traced_instructions, mix_counts}]} of every CALIBRATION and VALIDATION model on every board."""
    from firmware_sim.cost import kernel_class
    from firmware_sim.icount import features, group_keys
    from pyembed.bench._f32_models import CALIBRATION, VALIDATION
    from pyembed.model.load import load_tflite_bytes
    from pyembed.target import imix
    from pyembed.target.firmware import _input_bytes, build_project, generate, load_manifest, run_project
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="pe_calib_f32_") as tmp:
            return measure(boards, tmp, log)
    rows = []
    todo = [(n, b, "calibration") for n, b in CALIBRATION.items()] + [(n, b, "validation")
                                                                        for n, b in VALIDATION.items()]
    for name, builder, which in todo:
        g = load_tflite_bytes(builder(), name=name)
        rng = np.random.default_rng(0)
        xs = [rng.standard_normal(g.tensors[t].shape).astype(np.float32) for t in g.inputs]
        host = g.run(xs)
        host = list(host) if isinstance(host, (list, tuple)) else [host]
        for board in boards:
            core = BOARDS[board]
            proj = generate(g, board, os.path.join(workdir, f"{name}-{board}"))
            build_project(proj.outdir, make_vars={"RUNTIME_BUILD": os.path.join(workdir, f"runtime-{board}"),
                                                  "OPT": "-O2"})
            run = run_project(proj, xs)
            ulps = max(_ulps(a, b) for a, b in zip(run.outputs, host))
            mixes = imix.trace_operators(proj.outdir / "firmware.elf", board,
                                         _input_bytes(load_manifest(proj.outdir), xs))
            if len(mixes) != len(run.operators):
                raise RuntimeError(f"{name} {board}: traced {len(mixes)} operators, timed {len(run.operators)}")
            pg = proj.graph
            ops = []
            for k, o in enumerate(run.operators):
                op = pg.operators[o["index"]]
                aliased = any(pg.aliases.get(t) is not None for t in op.outputs)
                ops.append({"index": o["index"], "type": o["type"],
                            "group_keys": group_keys(pg, op, kernel_class(op.type, aliased)),
                            "features": features(pg, op), "systick_instructions": o["instructions"],
                            "traced_instructions": mixes[k].instructions,
                            "mix_counts": dict(sorted(mixes[k].counts.items()))})
            rows.append({"model": name, "set": which, "core": core, "board": board, "build": "dsp",
                         "max_ulps": ulps, "total_instructions": sum(o["traced_instructions"] for o in ops),
                         "systick_instructions": run.total_instructions, "operators": ops})
            if log:
                log(f"{name} {board}: {rows[-1]['total_instructions']:,} instructions traced "
                    f"({run.total_instructions:,} SysTick), outputs within {ulps} ulp(s) of the host")
    return rows


def fit(rows):
    """{core: {group: {"coef", "mix", "n"}}} of the float32 groups over the calibration rows."""
    from firmware_sim.icount import FEATURES

    from pyembed.bench.calibrate_qemu import _fit_group, _mix
    out = {}
    for core in dict.fromkeys(r["core"] for r in rows):
        samples = {}
        for r in rows:
            if r["core"] == core and r["set"] == "calibration":
                for o in r["operators"]:
                    for key in o["group_keys"]:
                        if is_f32_group(key):
                            samples.setdefault(key, []).append(o)
        table = {}
        for key, ops in sorted(samples.items()):
            kclass = next(k for k in ops[0]["group_keys"] if k.startswith("class:"))[6:]
            table[key] = {"coef": _fit_group(ops, FEATURES[kclass]), "mix": _mix(ops), "n": len(ops)}
        out[core] = table
    return out


def _table_path():
    import firmware_sim.profiles as fp

    from pyembed.bench.calibrate_qemu import TABLE_FILE
    return os.path.join(os.path.dirname(fp.__file__), TABLE_FILE)


def stored_table(core, build="dsp"):
    with open(_table_path()) as f:
        return json.load(f)["tables"][core][build]


def predict_row(table, core, row):
    """(instructions, cycles, [(type, group, predicted)]) of a measured row with table (every operator)."""
    from pyembed.bench.calibrate_qemu import _predict_op
    n = c = 0.0
    per = []
    for o in row["operators"]:
        pi, key, pc = _predict_op(table, core, o)
        n, c = n + pi, c + pc
        per.append((o["type"], key, round(pi)))
    return n, c, per


def compare(rows, fitted):
    """Per row: measured (traced) against the table with the fitted float32 groups and against the
    stored table without any float32 group (the int8 classes the operators fell back to before)."""
    out = []
    for r in rows:
        core = r["core"]
        base = {k: v for k, v in stored_table(core).items() if not is_f32_group(k)}
        table = {**base, **fitted[core]}
        pred, cyc, per = predict_row(table, core, r)
        meas = r["total_instructions"]
        # the float32 classes alone (per MAC, per tap, per element), as for an operator type not fitted
        cls, _, _ = predict_row({**base, **{k: v for k, v in fitted[core].items() if k.startswith("class:")}},
                                core, r)
        # before: the int8 groups of the operator's type / kernel class (the float32 keys dropped)
        from firmware_sim.cost import kernel_class
        old = 0.0
        for o in r["operators"]:
            keys = [o["type"], f"class:{kernel_class(o['type'])}", "class:other"] \
                if is_f32_group(o["group_keys"][0]) else o["group_keys"]
            n, _, _ = _predict_op_keys(base, o, keys)
            old += n
        out.append({"model": r["model"], "set": r["set"], "core": core, "board": r["board"],
                    "max_ulps": r["max_ulps"], "measured": meas, "systick": r["systick_instructions"],
                    "predicted": round(pred), "error_pct": round(100.0 * (pred - meas) / meas, 2),
                    "predicted_f32_classes": round(cls), "error_f32_classes_pct": round(100.0 * (cls - meas) / meas, 2),
                    "predicted_int8_classes": round(old),
                    "error_int8_classes_pct": round(100.0 * (old - meas) / meas, 2),
                    "predicted_cycles": round(cyc),
                    "operators": [{"type": t, "group": k, "predicted": p, "measured": o["traced_instructions"]}
                                  for (t, k, p), o in zip(per, r["operators"])]})
    return out


def _predict_op_keys(table, op, keys):
    for key in keys:
        g = table.get(key)
        if g is not None:
            return max(0.0, sum(v * op["features"].get(k, 0.0) for k, v in g["coef"].items())), key, 0.0
    return 0.0, None, 0.0


def write(fitted, rows):
    """Merge the float32 groups into pyembed_icount.json (dsp and portable tables of each core) and store
    the measurements (pyembed/bench/data/icount_f32.json)."""
    path = _table_path()
    with open(path) as f:
        doc = json.load(f)
    for core, groups in fitted.items():
        for build, t in doc["tables"].get(core, {}).items():
            for k in [k for k in t if is_f32_group(k)]:
                del t[k]
            for k, g in groups.items():
                t[k] = dict(g, **({"from": "dsp (the float32 kernels have no DSP-extension path)"}
                                  if build != "dsp" else {}))
    doc["_doc_f32"] = (f"'TYPE@float32' and 'class:f32_*' groups: fitted by '{COMMAND}' "
                       "(pyembed/bench/calibrate_f32.py) on QEMU-traced instruction counts of the float32 "
                       "calibration models (pyembed.bench._f32_models) per core; features "
                       "firmware_sim.icount_f32.F32_FEATURES; mix as traced")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    data = {"_doc": "QEMU measurements of the float32 models (pyembed.bench._f32_models) written by the command "
                    "below; tests/test_icount_f32.py predicts the validation rows again from the committed "
                    "pyembed_icount.json and compares with these measured counts",
            "command": COMMAND, "rows": rows}
    with open(DATA_FILE, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    return [os.path.relpath(path), os.path.relpath(DATA_FILE)]


def render(result):
    lines = ["== float32 operators under QEMU (-icount shift=0, traced): measured instructions against the "
             "instruction model", "   float32 groups fitted on the calibration models only; 'f32 cls': the float32 "
             "classes alone (no per-type group); 'int8 cls': without float32 groups (before issue #31)", ""]
    lines.append(f"{'model':<16} {'set':<11} {'core':<10} {'measured':>10} {'predicted':>10} {'err':>7} "
                 f"{'f32 cls':>10} {'err':>7} {'int8 cls':>10} {'err':>7} {'ulps':>5}")
    for r in result["rows"]:
        lines.append(f"{r['model']:<16} {r['set']:<11} {r['core']:<10} {r['measured']:>10,} {r['predicted']:>10,} "
                     f"{r['error_pct']:>+6.1f}% {r['predicted_f32_classes']:>10,} {r['error_f32_classes_pct']:>+6.1f}% "
                     f"{r['predicted_int8_classes']:>10,} "
                     f"{r['error_int8_classes_pct']:>+6.1f}% {r['max_ulps']:>5}")
    lines.append("\nfitted groups (instructions per unit of each feature):")
    for core, groups in result["fit"].items():
        for k, g in groups.items():
            lines.append(f"  {core} {k} (n={g['n']}): " + ", ".join(f"{f} {v:g}" for f, v in g["coef"].items()))
    for r in result["rows"]:
        if r["set"] == "validation":
            lines.append(f"\n{r['model']} {r['core']} per operator:")
            for o in r["operators"]:
                lines.append(f"    {o['type']:<20} {str(o['group']):<26} measured {o['measured']:>9,} "
                             f"predicted {o['predicted']:>9,}")
    if result.get("written"):
        lines.append("\nwritten: " + ", ".join(result["written"]))
    return "\n".join(lines)


def run(boards=tuple(BOARDS), write_out=False, load=None, save=None, log=None):
    from pyembed.bench.common import measured_rows
    rows = measured_rows(lambda: measure(boards, log=log), load, save)
    fitted = fit(rows)
    result = {"fit": fitted, "rows": compare(rows, fitted)}
    if write_out:
        result["written"] = write(fitted, rows)
    return result


def main(argv=None):
    import argparse
    import sys

    from pyembed.bench.common import emit
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench calibrate_f32", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--write", action="store_true", help="merge the float32 groups into "
                    "firmware_sim/profiles/pyembed_icount.json and store the measurements in "
                    "pyembed/bench/data/icount_f32.json")
    ap.add_argument("--boards", default=",".join(BOARDS), help=f"QEMU boards of {', '.join(BOARDS)}")
    ap.add_argument("--save", default=None, help="save the raw measurements to this JSON file")
    ap.add_argument("--load", default=None, help="fit measurements saved with --save (or the data file)")
    args = ap.parse_args(argv)
    boards = tuple(b for b in args.boards.split(",") if b)
    bad = [b for b in boards if b not in BOARDS]
    if bad:
        ap.error(f"--boards: unknown {', '.join(bad)} (known: {', '.join(BOARDS)})")
    result = run(boards, write_out=args.write, load=args.load, save=args.save,
                 log=lambda s: print(s, file=sys.stderr, flush=True))
    emit(result, args.json, render)
    return 0
