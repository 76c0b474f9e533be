"""Plan-time code and stack figures (pyembed.target.codefig, from the packaged runtime table)
against the firmware's own (link map, static stack bound) for the bundled models:

    python -m pyembed.bench codefig [--json] [--models a,b] [--profile mps2-an386]

Per model: the plan of ``pyembed firmware M --profile P`` (the default options, the one
planning path), its prediction, then the project generated and built (make, the static
stack bound), and the errors: runtime code (predicted - linked) / linked, the stack bound
(predicted - built), tables and weights likewise."""
import argparse
import json
import os
import sys
import tempfile


def one(name, profile, workdir, rt=None):
    from pyembed.data import MODELS_DIR
    from pyembed.model.load import load_model
    from pyembed.target import codefig
    from pyembed.target.firmware import build_project, generate, load_manifest
    from pyembed.target.planning import PlanOptions, plan_for_target
    g = load_model(os.path.join(MODELS_DIR, name + ".tflite"))
    tp = plan_for_target(g, profile, PlanOptions(), action="build firmware for")
    fig = codefig.predict(tp.graph, tp.plan, tp.profile)
    proj = generate(tp.graph, tp.profile, os.path.join(workdir, name), plan=tp.plan, strategy="none")
    build_project(proj.outdir, make_vars={"RUNTIME_BUILD": rt} if rt else None)
    m = load_manifest(proj.outdir)
    fl, st = m["flash"], m["stack"]
    row = {"model": name, "strategy": tp.strategy, "predicted": fig.to_dict(),
           "linked": {"runtime_code": fl["runtime_code"], "tables": fl["model_tables"], "weights": fl["weights"],
                      "stack_bound": st["bound_total_bytes"], "stack_path": st["bound_bytes"]}}
    lk = row["linked"]
    row["errors"] = {"runtime_code_pct": 100.0 * (fig.runtime_code - lk["runtime_code"]) / lk["runtime_code"],
                     "stack_bytes": (None if fig.stack_total is None or lk["stack_bound"] is None
                                     else fig.stack_total - lk["stack_bound"]),
                     "tables_pct": 100.0 * (fig.tables - lk["tables"]) / max(1, lk["tables"]),
                     "weights_pct": 100.0 * (fig.weights - lk["weights"]) / max(1, lk["weights"])}
    return row


def run(models=None, profile="mps2-an386", workdir=None, log=None):
    from pyembed.bench.target import tflm_reference
    names = list(models or tflm_reference()["models"])
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        wd = workdir or tmp
        rt = os.path.join(wd, "runtime")
        for n in names:
            try:
                rows.append(one(n, profile, wd, rt))
            except Exception as e:   # noqa: BLE001 -- reported per model
                rows.append({"model": n, "error": f"{type(e).__name__}: {e}"})
            if log:
                log(_line(rows[-1]))
    return rows


def _line(r):
    if "error" in r:
        return f"{r['model']:<30} error: {r['error']}"
    p, lk, e = r["predicted"], r["linked"], r["errors"]
    return (f"{r['model']:<30} runtime code {p['runtime_code_bytes']:>7,} / {lk['runtime_code']:>7,} B "
            f"({e['runtime_code_pct']:+.2f} %)  stack {p['stack_bound_bytes']} / {lk['stack_bound']} B "
            f"({e['stack_bytes']:+d})  tables {p['tables_bytes']:,} / {lk['tables']:,} ({e['tables_pct']:+.1f} %)  "
            f"weights {p['weights_bytes']:,} / {lk['weights']:,} ({e['weights_pct']:+.1f} %)")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench codefig")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--models", default=None)
    ap.add_argument("--profile", default="mps2-an386")
    args = ap.parse_args(argv)
    models = [m for m in args.models.split(",") if m] if args.models else None
    print("predicted / linked (python -m pyembed.bench codefig" + (f" --models {args.models}" if models else "")
          + f" --profile {args.profile})", file=sys.stderr)
    rows = run(models, args.profile, log=None if args.json else print)
    if args.json:
        print(json.dumps(rows, indent=1))
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
