"""The compiler pipeline's operators in the Cortex-M instruction model:
PE_STRIPE_REGION and PE_CONV_POOL measured on real firmware under QEMU and
fitted into firmware_sim/profiles/pyembed_icount.json.

    python -m pyembed.bench calibrate_pipeline [--json] [--write] [--models a,b]
                                               [--save F.json | --load F.json]

Each conv model (PIPELINE_MODELS) is built with ``pyembed firmware
--strategy`` stripes, layers and auto for mps2-an386 (Cortex-M4), DSP build,
and run under ``qemu-system-arm -icount shift=0`` (per-operator SysTick
counts, 40-instruction resolution; outputs compared with the host run); a
strategy whose rewritten graph has no PE_STRIPE_REGION / PE_CONV_POOL, or
repeats another's, is not run. ``--models`` may also name the bench's built
networks (pyembed.bench._built: mobilenetv2_035_96, unet_64, unet_64_concat;
random weights), which give the fit region shapes the bundled models lack
(inverted residuals, decoder ADDs). The features of each operator
(firmware_sim.icount.GROUP_FEATURES: a region's layers read from its
parameter words) are fitted per group as calibrate_qemu fits the others
(non-negative least squares on relative error). Printed: per (model,
strategy) the pipeline operators' measured instructions against the fit
(in-sample) and against a fit without that model (leave-one-model-out), and
the whole firmware's measured instructions against the prediction of the
table with the new groups (what ``--optimize`` compares).

``--write`` merges the two groups into the cortex-m4 / dsp table of
pyembed_icount.json (the other groups are left as they are). The runs are
not traced: a group's instruction mix (for the simulator's cycles) is the
table's ``class:conv`` mix, and says so (``mix_from``).
"""
import json
import os
import tempfile

import numpy as np

from pyembed.bench.calibrate_qemu import BOARDS, BUILDS, TABLE_FILE, _fit_group, _predict_op, runnable_models

PIPELINE_OPS = ("PE_STRIPE_REGION", "PE_CONV_POOL")
PIPELINE_MODELS = ("tiny_kws_dscnn_int8", "tiny_vww_mobilenetv1_96_int8", "tflm_person_detect_int8",
                   "tiny_ic_resnet8_int8", "tiny_sww_int8", "tflm_micro_speech_int8")
# the bench's built networks fitted with them (random weights): MobileNetV2 inverted residuals, U-Nets with
# ADD / bilinear decoders, and two small regions whose RESIZE_BILINEAR layer is much of the work
BUILT_MODELS = ("mobilenetv2_035_96", "unet_64", "unet_64_bilinear", "bilinear_region_32x32x8",
                "bilinear_region_24x24x12")
DEFAULT_MODELS = PIPELINE_MODELS + BUILT_MODELS
COMMAND = "python -m pyembed.bench calibrate_pipeline --write"
DATA_FILE = os.path.join(os.path.dirname(__file__), "data", "icount_pipeline.json")


def measure_pipeline(models=PIPELINE_MODELS, strategies=("stripes", "layers", "auto", "wide"), board="mps2-an386",
                     build="dsp", workdir=None, log=None):
    """The compiler pipeline's operators on real firmware: each model built with each strategy
    (pyembed firmware --strategy) for board and build, run under QEMU (SysTick counts, no trace).
    Rows as measure()'s, one per (model, strategy) whose rewritten graph has a PE_STRIPE_REGION or
    PE_CONV_POOL, features read from the project's graph (the one the firmware runs)."""
    from firmware_sim.cost import kernel_class
    from firmware_sim.icount import features, group_keys
    from pyembed.target.firmware import build_project, generate, run_project
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="pe_calib_pipeline_") as tmp:
            return measure_pipeline(models, strategies, board, build, tmp, log)
    core = next(c for c, b in BOARDS.items() if b == board)
    rows, seen = [], set()
    from pyembed.bench import _built
    from pyembed.model.load import load_tflite_bytes
    todo = [(n, g) for n, g in runnable_models() if not models or n in models]
    # the bench's built networks (random weights: MobileNetV2 inverted residuals, U-Nets), when named
    from pyembed.bench._bilinear_models import REGION_MODELS
    builders = {**_built.BUILDERS, **REGION_MODELS}   # and the small bilinear regions of calibrate_bilinear
    todo += [(n, load_tflite_bytes(builders[n](), name=n)) for n in (models or ()) if n in builders]
    for name, g in todo:
        rng = np.random.default_rng(0)
        xs = [rng.integers(-128, 128, size=g.tensors[t].shape).astype(g.tensors[t].dtype) for t in g.inputs]
        host = g.run(xs if len(xs) > 1 else xs[0])
        host = list(host) if isinstance(host, (list, tuple)) else [host]
        for strategy in strategies:
            # "wide": auto's regions in wide blocks (the executor's row loops)
            proj = generate(g, board, os.path.join(workdir, f"{name}-{strategy}"),
                            strategy="auto" if strategy == "wide" else strategy, wide_blocks=strategy == "wide")
            pg = proj.graph
            sig = (name, tuple(op.type for op in pg.operators), tuple(op.scratch_bytes for op in pg.operators))
            if sig in seen or not any(op.type in PIPELINE_OPS for op in pg.operators):
                continue           # auto = stripes or layers: measured once
            seen.add(sig)
            build_project(proj.outdir, make_vars={"RUNTIME_BUILD": os.path.join(workdir, f"runtime-{board}-{build}"),
                                                  "OPT": BUILDS[build]})
            run = run_project(proj, xs)
            exact = all(np.array_equal(a.ravel(), np.asarray(b).ravel()) for a, b in zip(run.outputs, host))
            ops = []
            for o in run.operators:
                op = pg.operators[o["index"]]
                aliased = any(pg.aliases.get(t) is not None for t in op.outputs)
                ops.append({"index": o["index"], "type": o["type"],
                            "group_keys": group_keys(pg, op, kernel_class(op.type, aliased)),
                            "features": features(pg, op), "systick_instructions": o["instructions"]})
            rows.append({"model": name, "strategy": strategy, "calibration": False, "core": core, "board": board,
                         "build": build, "bit_exact": exact, "arena_bytes": int(proj.plan.arena_size),
                         "total_instructions": run.total_instructions,
                         "systick_instructions": run.total_instructions,
                         "invoke_instructions": run.invoke_instructions, "operators": ops})
            if log:
                log(f"{name} {strategy} {board} {build}: {run.total_instructions:,} instructions, bit-exact {exact}")
    return rows


def _builders():
    from pyembed.bench import _built
    from pyembed.bench._bilinear_models import REGION_MODELS
    return {**_built.BUILDERS, **REGION_MODELS}


def _load_graph(name):
    """A bundled model by name, or one of the bench's built networks."""
    from pyembed.model.load import load_tflite_bytes
    b = _builders()
    if name in b:
        return load_tflite_bytes(b[name](), name=name)
    from pyembed.data import MODELS_DIR
    from pyembed.model.load import load_model
    return load_model(os.path.join(MODELS_DIR, name + ".tflite"))


def refeature(rows, workdir=None):
    """Rows with each operator's group keys and features recomputed from its firmware project's graph
    (generated again, not built or run: the measured counts do not depend on the feature definitions)."""
    from firmware_sim.cost import kernel_class
    from firmware_sim.icount import features, group_keys
    from pyembed.target.firmware import generate
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="pe_refeature_") as tmp:
            return refeature(rows, tmp)
    graphs = {}
    for r in rows:
        g = graphs.get(r["model"]) or graphs.setdefault(r["model"], _load_graph(r["model"]))
        s = r["strategy"]
        pg = generate(g, r["board"], os.path.join(workdir, f"{r['model']}-{s}"), strategy="auto" if s == "wide" else s,
                      wide_blocks=s == "wide").graph
        for o in r["operators"]:
            op = pg.operators[o["index"]]
            if op.type != o["type"]:
                raise RuntimeError(f"{r['model']} {s}: operator {o['index']} is {op.type} now, measured {o['type']}")
            aliased = any(pg.aliases.get(t) is not None for t in op.outputs)
            o["group_keys"] = group_keys(pg, op, kernel_class(op.type, aliased))
            o["features"] = features(pg, op)
    return rows


def fit_groups(rows):
    """{group: {"coef", "n"}} of PIPELINE_OPS over every operator of rows."""
    from firmware_sim.icount import GROUP_FEATURES
    out = {}
    for key in PIPELINE_OPS + ("PE_STRIPE_REGION/wide",):
        ops = [o for r in rows for o in r["operators"] if o["group_keys"][0] == key]
        if ops:
            out[key] = {"coef": _fit_group(ops, GROUP_FEATURES[key]), "n": len(ops)}
    return out


def _table(core, build, path=None):
    import firmware_sim.profiles as fp
    path = path or os.path.join(os.path.dirname(fp.__file__), TABLE_FILE)
    with open(path) as f:
        doc = json.load(f)
    return doc, doc["tables"][core][build], path


def _with(table, groups):
    t = dict(table)
    mix = table.get("class:conv", {}).get("mix", {"alu": 1.0})
    for k, g in groups.items():
        t[k] = {"coef": g["coef"], "mix": mix, "n": g["n"], "mix_from": "class:conv"}
    return t


def compare(rows, fitted, table, core):
    """Per (model, strategy): the pipeline operators measured / in-sample / leave-one-model-out, and the
    whole firmware measured / predicted by the table with the fitted groups."""
    models = sorted({r["model"] for r in rows})
    loo = {m: fit_groups([r for r in rows if r["model"] != m]) for m in models} if len(models) > 1 else {}
    full = _with(table, fitted)
    out = []
    for r in rows:
        pe = [o for o in r["operators"] if o["type"] in PIPELINE_OPS]
        meas = sum(o["systick_instructions"] for o in pe)
        ins = sum(_predict_op(full, core, o)[0] for o in pe)
        row = {"model": r["model"], "strategy": r["strategy"], "bit_exact": r["bit_exact"],
               "arena_bytes": r.get("arena_bytes"), "pipeline_ops": len(pe),
               "regions": sum(o["type"] == "PE_STRIPE_REGION" for o in pe),
               "conv_pool": sum(o["type"] == "PE_CONV_POOL" for o in pe),
               "pipeline_measured": meas, "pipeline_predicted": round(ins),
               "pipeline_error_pct": round(100.0 * (ins - meas) / meas, 2) if meas else None}
        lt = _with(table, loo[r["model"]]) if r["model"] in loo else None
        if lt is not None:
            lp = 0.0
            for o in pe:
                n, key, _ = _predict_op(lt, core, o)
                lp += n if key is not None else 0.0
            missing = [o["group_keys"][0] for o in pe if not any(k in lt for k in o["group_keys"])]
            row.update({"pipeline_predicted_loo": round(lp), "loo_missing_groups": sorted(set(missing)),
                        "pipeline_error_loo_pct": round(100.0 * (lp - meas) / meas, 2) if meas else None})
        total = r["total_instructions"]
        pred = sum(_predict_op(full, core, o)[0] for o in r["operators"])
        row.update({"total_measured": total, "total_predicted": round(pred),
                    "total_error_pct": round(100.0 * (pred - total) / total, 2) if total else None})
        out.append(row)
    return out


def refresh_borrowed(doc, core, build):
    """The tables that borrow these groups (calibrate_qemu marks them "from": "cortex-m4 dsp": the
    Cortex-M33 / M55 tables) get the new coefficients too (old ones on redefined features would misprice)."""
    src = doc["tables"][core][build]
    for c, builds in doc["tables"].items():
        for b, t in builds.items():
            for k in PIPELINE_OPS + ("PE_STRIPE_REGION/wide",):
                if k in t and k in src and t[k].get("from") == f"{core} {build}":
                    t[k] = {**src[k], "from": f"{core} {build}"}


def write_groups(fitted, core, build, path=None):
    """Merge the fitted groups into pyembed_icount.json's core / build table."""
    doc, table, path = _table(core, build, path)
    doc["tables"][core][build] = _with(table, fitted)
    refresh_borrowed(doc, core, build)
    doc["_doc_pipeline"] = ("PE_STRIPE_REGION / PE_CONV_POOL of the " + f"{core} {build} table: fitted by 'python -m "
                            "pyembed.bench calibrate_pipeline --write' (pyembed/bench/calibrate_pipeline.py) on QEMU "
                            "SysTick counts of the bundled conv models' and the bench's built networks' firmware built "
                            "with --strategy stripes / layers / auto and auto in wide blocks (rows: "
                            "pyembed/bench/data/icount_pipeline.json); features firmware_sim.icount.GROUP_FEATURES "
                            "(regions: firmware_sim.icount_region); mix copied from class:conv (not traced).")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    return path


def _pct(x):
    return "-" if x is None else f"{x:+.1f}%"


def render(result):
    lines = [f"== PE_STRIPE_REGION / PE_CONV_POOL on {result['board']} ({result['core']}, {result['build']} build), "
             "QEMU -icount shift=0, SysTick counts (40-instruction resolution)",
             "   pipeline ops: the stripe regions and fused conv->pool pairs of the firmware; LOO = fitted without "
             "the model; total: the whole firmware against the table with the fitted groups", ""]
    hdr = (f"{'model':<30} {'strategy':<8} {'arena B':>8} {'reg':>3} {'c->p':>4} {'pipeline meas.':>14} "
           f"{'in-sample':>10} {'LOO':>9} {'total meas.':>12} {'total pred.':>12} {'err':>7} exact")
    lines.append(hdr)
    for r in result["rows"]:
        lines.append(f"{r['model']:<30} {r['strategy']:<8} {r['arena_bytes'] or 0:>8,} {r['regions']:>3} "
                     f"{r['conv_pool']:>4} {r['pipeline_measured']:>14,} {_pct(r['pipeline_error_pct']):>10} "
                     f"{_pct(r.get('pipeline_error_loo_pct')):>9} {r['total_measured']:>12,} "
                     f"{r['total_predicted']:>12,} {_pct(r['total_error_pct']):>7} "
                     f"{'yes' if r['bit_exact'] else 'NO'}")
    ins = [abs(r["pipeline_error_pct"]) for r in result["rows"] if r["pipeline_error_pct"] is not None]
    loo = [abs(r["pipeline_error_loo_pct"]) for r in result["rows"] if r.get("pipeline_error_loo_pct") is not None]
    tot = [abs(r["total_error_pct"]) for r in result["rows"] if r["total_error_pct"] is not None]
    if ins:
        lines.append(f"\npipeline ops |error|: in-sample mean {np.mean(ins):.1f}%, max {np.max(ins):.1f}%"
                     + (f"; leave-one-model-out mean {np.mean(loo):.1f}%, max {np.max(loo):.1f}%" if loo else ""))
        lines.append(f"whole firmware |error| (table with the fitted groups): mean {np.mean(tot):.1f}%, "
                     f"max {np.max(tot):.1f}%")
    lines.append("\nfitted groups (instructions per unit of each feature):")
    for k, g in result["fit"].items():
        lines.append(f"  {k} (n={g['n']}): " + ", ".join(f"{f} {v:g}" for f, v in g["coef"].items() if v))
    if result.get("written"):
        lines.append(f"\nwritten: {result['written']} ({result['core']} / {result['build']})")
    return "\n".join(lines)


def write_rows(rows):
    """Store the measured rows with the command (tests/test_icount_pipeline.py predicts them again)."""
    with open(DATA_FILE, "w") as f:
        json.dump({"_doc": "QEMU SysTick counts of the pipeline operators written by the command below "
                           "(mps2-an386, dsp build); tests/test_icount_pipeline.py predicts every region again "
                           "from the committed pyembed_icount.json", "command": COMMAND, "rows": rows},
                  f, indent=1, sort_keys=True)
        f.write("\n")
    return DATA_FILE


def run(models=DEFAULT_MODELS, write=False, load=None, save=None, board="mps2-an386", build="dsp", log=None,
        strategies=("stripes", "layers", "auto", "wide")):
    """load: one or more files saved with save (their rows are fitted together)."""
    if load:
        rows = []
        for path in ([load] if isinstance(load, str) else load):
            with open(path) as f:
                rows += json.load(f)
        rows = refeature(rows)     # the features as defined now (the counts do not depend on them)
    else:
        rows = measure_pipeline(models, strategies=tuple(strategies), board=board, build=build, log=log)
        if save:
            with open(save, "w") as f:
                json.dump(rows, f)
    core = next(c for c, b in BOARDS.items() if b == board)
    fitted = fit_groups(rows)
    _, table, _ = _table(core, build)
    table = {k: v for k, v in table.items() if k not in PIPELINE_OPS + ("PE_STRIPE_REGION/wide",)}   # the fit, not a stored one
    result = {"board": board, "core": core, "build": build, "fit": fitted, "rows": compare(rows, fitted, table, core)}
    if write:
        result["written"] = (os.path.relpath(write_groups(fitted, core, build)) + ", "
                             + os.path.relpath(write_rows(rows)))
    return result


def main(argv=None):
    import argparse
    import sys

    from pyembed.bench.common import emit
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench calibrate_pipeline", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--write", action="store_true", help=f"merge the fitted groups into firmware_sim/profiles/{TABLE_FILE}")
    ap.add_argument("--models", default=None, help="comma-separated model names (default: the bundled conv models "
                                                   f"and the built {', '.join(BUILT_MODELS)}; also unet_64_concat)")
    ap.add_argument("--strategies", default="stripes,layers,auto,wide", help="strategies built (default stripes,layers,auto,wide; wide: auto in wide blocks)")
    ap.add_argument("--save", default=None, help="save the raw measurements to this JSON file")
    ap.add_argument("--load", default=None, help="fit raw measurements saved with --save (no QEMU run); "
                                                 "comma-separated files are fitted together")
    args = ap.parse_args(argv)
    result = run(tuple(args.models.split(",")) if args.models else DEFAULT_MODELS, write=args.write,
                 load=args.load.split(",") if args.load else None, save=args.save,
                 strategies=args.strategies.split(","), log=lambda s: print(s, file=sys.stderr, flush=True))
    emit(result, args.json, render)
    return 0
