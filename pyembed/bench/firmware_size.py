"""Flash of each bundled model's firmware, per part, from the link map: the
runtime a firmware links with its model's own operator table
(model/model_ops.c: only the runners, hence the kernels, its model calls)
against the same project linked with the runtime's full tables
(csrc/src/graph/pe_graph_ops.c and csrc/src/pipeline/pe_stripe_kinds.c, the
stripe executor's kind table: every firmware linked them before the tables
were generated per model).

    python -m pyembed.bench firmware_size [--json] [--models a,b] [--board mps2-an386]

Per model: runtime bytes (code + read-only data of pyembed's C runtime) with
the full table and with the model's table, the model's tables (graph table,
operator table, API) and weights, all from firmware.map
(pyembed.target.linkmap). The projects are built with the Makefile's defaults
(-O2, the checked-once graph build) for the board's core, each on the plan
`pyembed firmware M --profile BOARD` makes with its default options
(pyembed.target.planning.plan_for_target with PlanOptions()).
"""
import os
import tempfile

from pyembed.bench.common import emit, table


def run(models=None, board="mps2-an386", workdir=None, log=None):
    from pyembed import _csrc
    from pyembed.bench.calibrate_qemu import runnable_models
    from pyembed.codegen import optable
    from pyembed.target import linkmap
    from pyembed.target.firmware import build_project, generate
    from pyembed.target.planning import PlanOptions, plan_for_target
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="pe_fwsize_") as tmp:
            return run(models, board, tmp, log)
    # the full tables in one file, standing in for model_ops.c (the graph's and the stripe kinds')
    full_tables = "".join((_csrc.csrc_dir() / "src" / room / name).read_text()
                          for room, name in (("graph", _csrc.FULL_TABLE), ("pipeline", _csrc.STRIPE_TABLE)))
    rt = {"RUNTIME_BUILD": os.path.join(workdir, f"runtime-{board}")}
    rows = []
    for name, g in runnable_models():
        if models and name not in models:
            continue
        row = {"model": name, "board": board}
        try:
            # the plan of `pyembed firmware NAME --profile BOARD` (default options)
            tp = plan_for_target(g, board, PlanOptions(), action="build firmware for")
            row["strategy"] = (tp.plan.info.get("pipeline") or {}).get("strategy")
            proj = generate(tp.graph, tp.profile, os.path.join(workdir, name), plan=tp.plan, strategy="none")
            ops_c = proj.outdir / "model" / optable.GENERATED_NAME
            row["operator_types"] = optable.op_types_in((proj.outdir / "model" / "model_graph.c").read_text())
            build_project(proj.outdir, make_vars=rt)
            after = linkmap.breakdown(proj.outdir / "firmware.map")
            ops_c.write_text(full_tables)
            build_project(proj.outdir, make_vars=rt)
            before = linkmap.breakdown(proj.outdir / "firmware.map")
            row.update({"runtime_full_table": before["runtime"]["flash"],
                        "runtime_model_table": after["runtime"]["flash"],
                        "runtime_text_full_table": before["runtime"]["text"],
                        "runtime_text_model_table": after["runtime"]["text"],
                        "tables": after["tables"]["flash"], "weights": after["weights"]["flash"],
                        "harness_libc": after["harness"]["flash"] + after["libc"]["flash"]})
        except Exception as e:  # report the failure in the table, keep going
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        rows.append(row)
        if log:
            log(row)
    return {"board": board, "rows": rows}


def render(result):
    rows = []
    for r in result["rows"]:
        if "error" in r:
            rows.append([r["model"], "error: " + r["error"], "", "", "", ""])
            continue
        b, a = r["runtime_full_table"], r["runtime_model_table"]
        rows.append([r["model"], f"{b:,}", f"{a:,}", f"{1 - a / b:.0%}", f"{r['tables']:,}", f"{r['weights']:,}"])
    return table(["model", "runtime, full table (B)", "runtime, model's table (B)", "saved",
                  "model tables (B)", "weights (B)"], rows)


def render_markdown(result):
    """The README's table (between its firmware-size-table markers), smallest runtime first."""
    lines = ["| model | operator types | runtime, full table (B) | runtime, the model's table (B) | saved "
             "| model tables (B) | weights (B) |", "|---|---:|---:|---:|---:|---:|---:|"]
    ok = sorted((r for r in result["rows"] if "error" not in r),
                key=lambda r: (r["runtime_model_table"], r["model"]))
    for r in ok:
        b, a = r["runtime_full_table"], r["runtime_model_table"]
        lines.append(f"| {r['model']} | {len(r['operator_types'])} | {b:,} | {a:,} | {1 - a / b:.0%} | "
                     f"{r['tables']:,} | {r['weights']:,} |")
    lines += [f"| {r['model']} | error: {r['error'][:90]} | | | | | |" for r in result["rows"] if "error" in r]
    return "\n".join(lines)


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench firmware_size", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--markdown", action="store_true", help="The README's table (Markdown) after the text table.")
    ap.add_argument("--models", default=None, help="comma-separated model names (default: all runnable)")
    ap.add_argument("--board", default="mps2-an386")
    args = ap.parse_args(argv)
    res = run(args.models.split(",") if args.models else None, args.board)
    emit(res, args.json, render)
    if args.markdown and not args.json:
        print("\n" + render_markdown(res))
    return 0 if all("error" not in r for r in res["rows"]) else 1
