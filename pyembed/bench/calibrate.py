"""Calibrate the simulator's cycle cost model against published MLPerf Tiny latencies.

    python -m pyembed.bench calibrate [--json] [--fit [--write]] [--no-kernels]

For every (board, benchmark) pair with a published median throughput, the
model is planned and run on the simulated board (real kernels, bit-exact
outputs checked against ``graph.run``), and the simulated latency is printed
beside the published one. ``--fit`` solves, per CPU core, for the
cycles-per-MAC of the three MAC-heavy kernel classes (conv, depthwise, fc)
that minimise the squared relative error over that core's benchmarks (the
simulated cycles are linear in them); ``--write`` stores the fitted values in
firmware_sim/profiles/cores.json, the one place they live. A cross-check row
(STM32F746, SPEC section 8) is never fitted.
"""
import argparse
import json
import os

import numpy as np

from pyembed.bench.common import emit, table

SOURCE = ("MLPerf Tiny v1.0 closed division, STMicroelectronics submission (X-CUBE-AI): 'Median throughput' in "
          "github.com/mlcommons/tiny_results_v1.0, closed/STMicroelectronics/results/<board>/<task>/performance/"
          "results.txt")

# (profile, task, bundled model, published inferences per second, used for fitting)
PUBLISHED = [
    ("nucleo_l4r5zi", "KWS", "tiny_kws_dscnn_int8", 13.323, True),
    ("nucleo_l4r5zi", "VWW", "tiny_vww_mobilenetv1_96_int8", 4.339, True),
    ("nucleo_l4r5zi", "IC", "tiny_ic_resnet8_int8", 4.407, True),
    ("nucleo_l4r5zi", "AD", "tiny_ad_autoencoder_int8", 131.950, True),
    ("nucleo_h7a3zi", "KWS", "tiny_kws_dscnn_int8", 59.667, True),
    ("nucleo_h7a3zi", "VWW", "tiny_vww_mobilenetv1_96_int8", 19.722, True),
    ("nucleo_h7a3zi", "IC", "tiny_ic_resnet8_int8", 18.401, True),
    ("nucleo_h7a3zi", "AD", "tiny_ad_autoencoder_int8", 547.705, True),
    # cross-check, not fitted: SPEC section 8 quotes MLPerf Tiny IC ~63 ms on the STM32F746
    ("stm32f746", "IC", "tiny_ic_resnet8_int8", 1000.0 / 63.0, False),
]
FITTED_CLASSES = ("conv", "depthwise", "fc")


def _load(model):
    from pyembed.data import model_path
    from pyembed.graph import load_model
    return load_model(model_path(model))


def _input(graph, seed=0):
    rng = np.random.default_rng(seed)
    xs = []
    for t in graph.inputs:
        tensor = graph.tensors[t]
        info = np.iinfo(tensor.dtype)
        xs.append(rng.integers(info.min, info.max + 1, size=tensor.shape, dtype=tensor.dtype))
    return xs[0] if len(xs) == 1 else xs


def measure(run_kernels=True):
    """One row per published figure: simulated cycles and the per-class MAC sums."""
    from firmware_sim.cost import CostModel
    from firmware_sim.profiles import load_profile
    from firmware_sim.sim import default_plan, simulate
    rows = []
    graphs = {}
    for prof_name, task, model, ips, fit in PUBLISHED:
        prof = load_profile(prof_name)
        g = graphs.get(model) or graphs.setdefault(model, _load(model))
        cm = CostModel(prof)
        macs = {c: 0 for c in FITTED_CLASSES}
        fixed = 0.0
        total = 0
        for op in g.operators:
            oc = cm.op_cost(g, op)
            total += oc.cycles
            if oc.kernel_class in macs:
                macs[oc.kernel_class] += oc.macs
                fixed += oc.cycles - prof.kernel_cost(oc.kernel_class).cycles_per_mac * oc.macs
            else:
                fixed += oc.cycles
        row = {"board": prof_name, "part": prof.part, "core": prof.core, "clock_mhz": prof.clock_hz / 1e6,
               "task": task, "model": model, "published_ms": 1000.0 / ips, "fitted": fit,
               "macs": macs, "fixed_cycles": fixed, "model_cycles": total}
        if run_kernels:
            x = _input(g)
            plan, rmap = default_plan(g, prof)
            r = simulate(g, plan, prof, x, region_map=rmap)
            ref = g.run(x)
            row["bit_exact"] = all(np.array_equal(a, b) for a, b in zip(r.outputs, ref))
            row["sim_cycles"] = r.cycles
            if r.cycles != total:
                raise RuntimeError(f"{model} on {prof_name}: simulated {r.cycles} cycles, cost model {total}")
        else:
            row["sim_cycles"] = total
        row["sim_ms"] = prof.cycles_to_ms(row["sim_cycles"])
        row["error_pct"] = 100.0 * (row["sim_ms"] - row["published_ms"]) / row["published_ms"]
        rows.append(row)
    return rows


def leave_one_out(rows):
    """Honest prediction error: each fitted row predicted by a fit of the other rows of its core
    (3 unknowns from 3 rows: what the model predicts for a benchmark it has not seen)."""
    from firmware_sim.profiles import load_profile
    out = []
    for i, r in enumerate(rows):
        if not r["fitted"]:
            continue
        others = [q for j, q in enumerate(rows) if j != i]
        vals = fit(others).get(r["core"])
        if vals is None:
            continue
        cycles = r["fixed_cycles"] + sum(vals[c] * r["macs"][c] for c in FITTED_CLASSES)
        ms = cycles * 1000.0 / load_profile(r["board"]).clock_hz
        out.append({"board": r["board"], "task": r["task"], "predicted_ms": ms,
                    "error_pct": 100.0 * (ms - r["published_ms"]) / r["published_ms"]})
    return out


def fit(rows):
    """Per core: cycles_per_mac of conv, depthwise, fc minimising squared relative error."""
    from firmware_sim.profiles import load_profile
    out = {}
    for core in sorted({r["core"] for r in rows if r["fitted"]}):
        rs = [r for r in rows if r["fitted"] and r["core"] == core]
        A, b = [], []
        for r in rs:
            clock = load_profile(r["board"]).clock_hz
            target = r["published_ms"] * clock / 1000.0
            A.append([r["macs"][c] / target for c in FITTED_CLASSES])
            b.append((target - r["fixed_cycles"]) / target)
        A, b = np.array(A), np.array(b)
        active = [i for i in range(len(FITTED_CLASSES)) if A[:, i].any()]
        sol = np.zeros(len(FITTED_CLASSES))
        # non-negative least squares by elimination of negative coefficients (3 unknowns)
        while active:
            x, *_ = np.linalg.lstsq(A[:, active], b, rcond=None)
            if (x >= 0).all():
                sol[active] = x
                break
            active = [a for a, v in zip(active, x) if v > 0]
        out[core] = {c: round(float(v), 4) for c, v in zip(FITTED_CLASSES, sol)}
    return out


def write_fit(fitted):
    from firmware_sim.profiles import CORES_FILE
    with open(CORES_FILE) as f:
        cores = json.load(f)
    for core, vals in fitted.items():
        for cls, v in vals.items():
            cores[core][cls]["cycles_per_mac"] = v
    with open(CORES_FILE, "w") as f:
        json.dump(cores, f, indent=1)
        f.write("\n")
    return CORES_FILE


def _render(result):
    rows = [(r["board"], r["core"], f"{r['clock_mhz']:g}", r["task"], f"{r['published_ms']:.2f}",
             f"{r['sim_ms']:.2f}", f"{r['error_pct']:+.1f}%", "fit" if r["fitted"] else "check",
             {True: "yes", False: "NO"}.get(r.get("bit_exact"), "-"))
            for r in result["rows"]]
    text = [table(["board", "core", "MHz", "task", "published ms", "simulated ms", "error", "use", "bit-exact"],
                  rows)]
    errs = [abs(r["error_pct"]) for r in result["rows"] if r["fitted"]]
    text.append(f"\nmean |error| over fitted rows: {np.mean(errs):.1f}%, max {np.max(errs):.1f}%")
    chk = [r for r in result["rows"] if not r["fitted"]]
    for r in chk:
        text.append(f"cross-check {r['board']} {r['task']}: {r['sim_ms']:.1f} ms simulated vs "
                    f"{r['published_ms']:.1f} ms quoted ({r['error_pct']:+.1f}%)")
    loo = result.get("leave_one_out", [])
    if loo:
        text.append("leave-one-out (each benchmark predicted by a fit without it): " + ", ".join(
            f"{r['board']} {r['task']} {r['error_pct']:+.0f}%" for r in loo))
        text.append(f"  mean |error| {np.mean([abs(r['error_pct']) for r in loo]):.1f}% -- the in-sample errors "
                    f"above come from 3 coefficients fitted to 4 benchmarks per core")
    for core, vals in result.get("fit", {}).items():
        text.append(f"fit {core}: " + ", ".join(f"{c} {v:g} cycles/MAC" for c, v in vals.items()))
    if result.get("written"):
        text.append(f"written to {result['written']}")
    text.append(f"\npublished figures: {SOURCE}")
    return "\n".join(text)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench calibrate", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--fit", action="store_true", help="fit cycles/MAC per core and show the fitted table")
    ap.add_argument("--write", action="store_true", help="with --fit: store the fit in cores.json")
    ap.add_argument("--no-kernels", action="store_true", help="cost model only (skip running the kernels)")
    args = ap.parse_args(argv)
    rows = measure(run_kernels=not args.no_kernels)
    result = {"rows": rows, "source": SOURCE, "leave_one_out": leave_one_out(rows)}
    if args.fit:
        result["fit"] = fit(rows)
        if args.write:
            result["written"] = os.path.relpath(write_fit(result["fit"]))
            rows = measure(run_kernels=not args.no_kernels)
            result["rows"] = rows
    emit(result, args.json, _render)
    return 0
