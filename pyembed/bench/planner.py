"""Memory planner on the bundled models: arena bytes per algorithm against
the liveness lower bound and TensorFlow Lite Micro.

    python -m pyembed.bench planner [--json] [--models NAME,...] [--time-limit S]

Per model, activation bytes with 16-byte alignment as in models/README.md
(graph inputs live from step 0, outputs to the end; every tensor its own
buffer, RESHAPE outputs included; no kernel scratch, no variables):

  no reuse       every buffer after the previous one
  bound          the liveness lower bound (largest live sum over the steps)
  <algorithm>    arena each placement algorithm reaches, and its run time
  TFLM           TFLM's greedy planner ("head" of the arena, measured by
                 running the tflite-micro interpreter)
  TFLM+plan      TFLM's head when the model carries pyembed's plan as
                 OfflineMemoryAllocation metadata (among equally small
                 placements, the one TFLM's online scratch fits best with)
  overlap        arena when row-streaming kernels write their output over
                 finished input rows (each overlap proven by running the C
                 kernel on the overlapped layout), and how many were proven
  order bound    the liveness bound after the execution-order search

A second table gives the full plan pyembed itself runs with: RESHAPE
aliased, the kernels' scratch buffers (their size queries) and variables
included, with and without proven overlaps.
"""
import argparse
import glob
import os
import time

from pyembed.bench.common import emit, table

ALGS = ("linear", "greedy_size", "greedy_conflicts", "order_search", "cpsat")


def models_dir():
    from pyembed.data import __file__ as data_init
    return os.path.join(os.path.dirname(data_init), "models")


def bench_model(path, time_limit):
    from pyembed.model.load import load_model
    from pyembed.plan import build_problem, plan_graph, plan_problem, search_execution_order
    from pyembed.codegen.tflite_offline import tflm_head, tune_for_tflm

    g = load_model(path)
    readme = dict(include_scratch=False, include_variables=False, use_aliases=False)
    problem, tb, flash = build_problem(g, **readme)
    row = {"model": g.name, "buffers": len(problem.buffers), "no_reuse": sum(b.aligned_size for b in problem.buffers),
           "bound": problem.lower_bound(), "algorithms": {}}
    best = None
    for alg in ALGS:
        t0 = time.perf_counter()
        plan = plan_problem(problem, algorithm=alg, time_limit=time_limit, order=list(range(len(g.operators))),
                            tensor_buffer=tb, graph_name=g.name)
        dt = time.perf_counter() - t0
        row["algorithms"][alg] = {"arena": plan.arena_size, "ms": round(dt * 1000, 1)}
        if best is None or plan.arena_size < best.arena_size:
            best = plan
    with open(path, "rb") as f:
        data = f.read()
    row["tflm"] = tflm_head(data)
    row["tflm_offline"] = tune_for_tflm(data, best)[1] if row["tflm"] is not None else None
    if not g.unsupported:
        t0 = time.perf_counter()
        ov = plan_graph(g, overlaps=True, time_limit=time_limit, **readme)
        row["overlap"] = {"arena": ov.arena_size, "ms": round((time.perf_counter() - t0) * 1000, 1),
                          "proven": sum(1 for r in ov.info.get("overlaps", []) if r.get("status") == "proven"),
                          "candidates": len(ov.info.get("overlaps", []))}
    else:
        row["overlap"] = None
    order, bound = search_execution_order(g, time_limit=min(1.0, time_limit), **readme)
    row["order_bound"] = bound
    # the plan pyembed runs with
    full = plan_graph(g, time_limit=time_limit)
    row["full"] = {"arena": full.arena_size, "bound": full.lower_bound,
                   "scratch": sum(b.aligned_size for b in full.buffers if b.kind == "scratch" and b.size)}
    if not g.unsupported:
        fo = plan_graph(g, overlaps=True, time_limit=time_limit)
        row["full"]["overlap_arena"] = fo.arena_size
    return row


def render(res):
    heads = ["model", "no reuse", "bound"] + list(ALGS) + ["TFLM", "TFLM+plan", "overlap (proven)", "order bound"]
    rows = []
    for r in res["models"]:
        ov = r["overlap"]
        rows.append([r["model"], r["no_reuse"], r["bound"]]
                    + [r["algorithms"][a]["arena"] for a in ALGS]
                    + [r["tflm"] if r["tflm"] is not None else "-", r["tflm_offline"] if r["tflm_offline"] else "-",
                       f"{ov['arena']} ({ov['proven']}/{ov['candidates']})" if ov else "unsupported ops",
                       r["order_bound"]])
    out = ["Activation arena in bytes (16-byte alignment, models/README.md definition):", table(heads, rows), ""]
    trows = [[r["model"]] + [r["algorithms"][a]["ms"] for a in ALGS] + [r["overlap"]["ms"] if r["overlap"] else "-"]
             for r in res["models"]]
    out += ["Planning time in ms:", table(["model"] + list(ALGS) + ["overlap+proofs"], trows), ""]
    frows = [[r["model"], r["full"]["bound"], r["full"]["arena"], r["full"]["scratch"],
              r["full"].get("overlap_arena", "-")] for r in res["models"]]
    out += ["Full plan pyembed runs with (RESHAPE aliased, kernel scratch and variables included):",
            table(["model", "bound", "arena", "scratch (sum of sizes)", "with overlaps"], frows), ""]
    s = res["summary"]
    out.append(f"best algorithm at the bound on {s['at_bound']}/{s['models']} models; TFLM at the bound on "
               f"{s['tflm_at_bound']}/{s['tflm_measured']}; proven overlaps below the bound on "
               f"{s['below_bound']}/{s['models']} models")
    return "\n".join(out)


def main(argv):
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench planner", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--models", default="", help="comma-separated model names (default: all bundled)")
    ap.add_argument("--time-limit", type=float, default=10.0, help="seconds per CP-SAT / search run")
    a = ap.parse_args(argv)
    paths = sorted(glob.glob(os.path.join(models_dir(), "*.tflite")))
    if a.models:
        want = set(a.models.split(","))
        paths = [p for p in paths if os.path.splitext(os.path.basename(p))[0] in want]
    res = {"models": [bench_model(p, a.time_limit) for p in paths]}
    ms = res["models"]
    res["summary"] = {
        "models": len(ms),
        "at_bound": sum(1 for r in ms if min(v["arena"] for v in r["algorithms"].values()) <= r["bound"]),
        "tflm_measured": sum(1 for r in ms if r["tflm"] is not None),
        "tflm_at_bound": sum(1 for r in ms if r["tflm"] is not None and r["tflm"] <= r["bound"]),
        "below_bound": sum(1 for r in ms if r["overlap"] and r["overlap"]["arena"] < r["bound"]),
    }
    emit(res, a.json, render)
    return 0
