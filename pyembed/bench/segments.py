"""Segmented execution from flash: load-then-run versus the overlapped pipeline.

    python -m pyembed.bench segments [--json] [--quick]

For real models and a chained two-model use case (keyword spotting, whose
"person" wake word then runs the visual-wake-words MobileNet), on several
boards, external-flash bandwidths and RAM budgets for the weights, the graph
is divided into segments and simulated three ways on the event core:

* load-all: load every weight from flash, then run (RAM: all weights);
* serial:   load a segment, run it, load the next (RAM: largest segment);
* overlap:  run segment k while the DMA loads k+1 (the sliding window, two in flight);
* prefetch: the same runtime with more segments in flight where the budget allows.

Each is compared with the analytic bound T = L1 + sum max(C_k, L_k+1) + C_n.
"ceiling" is the best any overlap can do against load-all, (L + C) / max(L, C):
below 1.6 the 1.6x goal is out of reach by arithmetic, not by the runtime.
One configuration per model is also run with the real kernels on simulated
memory: outputs bit-exact with graph.run, cycles equal to the cost-only run.
"""
import argparse
import dataclasses

import numpy as np

from pyembed.bench.common import emit, table

# tiny_ic_resnet8 is left out: two neighbouring 36 KB convolutions hold 93 % of its weights, so no
# division into layers fits a block smaller than almost the whole model
MODELS = ["tiny_vww_mobilenetv1_96_int8", "tiny_ad_autoencoder_int8", "tflm_person_detect_int8"]
CHAIN = ("tiny_kws_dscnn_int8", "tiny_vww_mobilenetv1_96_int8")
# (board, external flash MB/s to try): the profile's QSPI figure, and slower parts (single-SPI NOR
# flash at ~8 MB/s, or a slow SD/SPI link at ~4 MB/s) where loading and computing take similar time
BOARDS = [("stm32f446", (45, 8)), ("stm32h743", (66, 8, 4)), ("nrf52840", (16, 4))]
BUDGETS = (0.3, 0.45, 0.65)    # fraction of the model's weights the block may hold


def with_bandwidth(profile, region, mb_s):
    regions = dict(profile.regions)
    regions[region] = dataclasses.replace(regions[region], bandwidth=int(mb_s * 1_000_000))
    return dataclasses.replace(profile, regions=regions)


def _graph(name):
    from pyembed.data import model_path
    from pyembed.graph import load_model
    return load_model(model_path(name))


def _arena(graph, profile):
    from firmware_sim.sim import default_plan
    plan, _ = default_plan(graph, profile)
    return plan.arena_size


def _layers(graph, profile):
    from firmware_sim.cost import CostModel
    from firmware_sim.segments import graph_layers
    cm = CostModel(profile)
    block = profile.defaults["activations"]

    def locate(t):
        return block if graph.tensors[t].data is not None else None
    return graph_layers(graph, lambda op: cm.op_cost(graph, op, locate).cycles)


def evaluate(name, layers, profile, budget, activations, criteria=("latency",)):
    from firmware_sim.segments import plan_segments, run_abstract
    src = profile.defaults["segment_source"]
    blk = profile.defaults["activations"]

    def lc(nb):
        return profile.transfer_cycles(nb, src, blk)
    plan = plan_segments(layers, budget, lc, criteria, prefetch=False)
    fast = plan_segments(layers, budget, lc, criteria, prefetch=True)
    for p in (plan, fast):
        p.source_region, p.block_region = src, blk
    t = {s: run_abstract(plan, profile, s)[0] for s in ("all", "serial", "overlap")}
    t["prefetch"] = run_abstract(fast, profile, "overlap")[0]
    L, C = sum(plan.loads), sum(plan.computes)
    ms = profile.cycles_to_ms
    bound = plan.bound()
    ratio = L / C if C else float("inf")
    best = min(t["overlap"], t["prefetch"])
    speedup = t["all"] / best
    ceiling = (L + C) / max(L, C)
    within = (t["overlap"] - bound) / bound
    balanced = 0.5 <= ratio <= 2.0
    ram = plan.block_bytes + activations
    ram_cap = plan.two_largest() + activations
    return {"model": name, "board": profile.name, "flash_mb_s": profile.regions[src].bandwidth / 1e6,
            "budget": budget, "segments": len(plan.segments), "load_ms": ms(L), "compute_ms": ms(C),
            "load_over_compute": ratio, "all_ms": ms(t["all"]), "serial_ms": ms(t["serial"]),
            "overlap_ms": ms(t["overlap"]), "bound_ms": ms(bound), "vs_bound": within,
            "prefetch_ms": ms(t["prefetch"]), "prefetch_segments": len(fast.segments),
            "prefetch_placement": fast.placement, "prefetch_ram_bytes": fast.block_bytes + activations,
            "speedup": speedup, "ceiling": ceiling, "ram_bytes": ram, "ram_cap_bytes": ram_cap,
            "all_ram_bytes": plan.total_bytes + activations, "within_5pct": within <= 0.05 and
            t["prefetch"] <= bound * 1.05, "speed_goal": (speedup >= 1.6) if balanced else None,
            "ram_goal": ram <= ram_cap, "carry_bytes": sum(s.carry_bytes for s in plan.segments[:-1])}


def real_check(name, graph, profile, budget):
    """The overlapped run with real kernels on simulated memory."""
    from firmware_sim.sim import default_plan, segment_graph, simulate
    rng = np.random.default_rng(1)
    t = graph.tensors[graph.inputs[0]]
    x = rng.integers(-128, 128, size=t.shape, dtype=np.int8)
    plan, rmap = default_plan(graph, profile)
    seg = segment_graph(graph, profile, budget, order=plan.order)
    r = simulate(graph, plan, profile, x, segments=seg, region_map=rmap)
    from firmware_sim.segments import run_abstract
    abstract, _ = run_abstract(seg, profile, "overlap")
    ref = graph.run(x)
    return {"model": name, "board": profile.name, "budget": budget, "segments": len(seg.segments),
            "bit_exact": all(np.array_equal(a, b) for a, b in zip(r.outputs, ref)),
            "cycles": r.cycles, "cost_only_cycles": abstract, "dma_bytes": r.dma_bytes,
            "peak_block_region_bytes": r.peak_bytes.get(seg.block_region)}


def run(quick=False):
    from firmware_sim.profiles import load_profile
    from firmware_sim.segments import chain
    rows, checks = [], []
    models = MODELS[:2] if quick else MODELS
    graphs = {m: _graph(m) for m in set(models) | set(CHAIN)}
    for board, bandwidths in BOARDS[:2] if quick else BOARDS:
        base = load_profile(board)
        for bw in bandwidths:
            prof = with_bandwidth(base, base.defaults["segment_source"], bw)
            cases = [(m, _layers(graphs[m], prof), _arena(graphs[m], prof)) for m in models]
            kws, vww = CHAIN
            chained = chain(_layers(graphs[kws], prof), _layers(graphs[vww], prof))
            act = max(_arena(graphs[kws], prof), _arena(graphs[vww], prof))
            cases.append(("kws->vww (chained)", chained, act))
            for name, layers, activations in cases:
                total = sum(la.weight_bytes for la in layers)
                for frac in BUDGETS:
                    budget = int(total * frac)
                    crit = ("latency", "models") if "chained" in name else ("latency",)
                    try:
                        rows.append(evaluate(name, layers, prof, budget, activations, crit))
                    except Exception as e:   # a budget below the largest layer: say so, keep going
                        rows.append({"model": name, "board": prof.name, "budget": budget,
                                     "flash_mb_s": bw, "error": str(e).split("\n")[0]})
    prof = load_profile("stm32h743")
    for m in (models[:1] if quick else models[:2]):
        g = graphs[m]
        checks.append(real_check(m, g, prof, int(g.weights_bytes * 0.4)))
    return {"rows": rows, "real_kernel_checks": checks}


def _render(result):
    hdr = ["model", "board", "MB/s", "budget KB", "segs", "L ms", "C ms", "L/C", "load-all", "serial",
           "overlap", "bound", "vs bound", "prefetch", "speedup", "ceiling", "RAM KB", "cap KB", "pf RAM KB",
           "goals"]
    rows = []
    for r in result["rows"]:
        if "error" in r:
            rows.append([r["model"], r["board"], f"{r['flash_mb_s']:g}", f"{r['budget'] / 1024:.0f}",
                         "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", r["error"][:40]])
            continue
        goals = []
        goals.append("bound ok" if r["within_5pct"] else "BOUND MISS")
        if r["speed_goal"] is not None:
            goals.append("1.6x ok" if r["speed_goal"] else
                         ("1.6x n/a" if r["ceiling"] < 1.6 else "1.6x MISS"))
        goals.append("ram ok" if r["ram_goal"] else "RAM MISS")
        rows.append([r["model"][:22], r["board"], f"{r['flash_mb_s']:g}", f"{r['budget'] / 1024:.0f}",
                     r["segments"], f"{r['load_ms']:.2f}", f"{r['compute_ms']:.2f}",
                     f"{r['load_over_compute']:.2f}", f"{r['all_ms']:.2f}", f"{r['serial_ms']:.2f}",
                     f"{r['overlap_ms']:.2f}", f"{r['bound_ms']:.2f}", f"{100 * r['vs_bound']:+.2f}%",
                     f"{r['prefetch_ms']:.2f}", f"{r['speedup']:.2f}x", f"{r['ceiling']:.2f}x",
                     f"{r['ram_bytes'] / 1024:.0f}", f"{r['ram_cap_bytes'] / 1024:.0f}",
                     f"{r['prefetch_ram_bytes'] / 1024:.0f}", ", ".join(goals)])
    out = [table(hdr, rows)]
    ok = [r for r in result["rows"] if "error" not in r]
    bal = [r for r in ok if r["speed_goal"] is not None]
    out.append(f"\n{len(ok)} configurations: {sum(r['within_5pct'] for r in ok)} within 5% of the bound, "
               f"{sum(r['ram_goal'] for r in ok)} within RAM = two largest segments + activations; "
               f"{len(bal)} with 0.5 <= L/C <= 2: {sum(bool(r['speed_goal']) for r in bal)} reach 1.6x, "
               f"{sum(r['ceiling'] < 1.6 for r in bal)} have a ceiling below 1.6x")
    out.append("times in ms. overlap: two segments in flight in a block of the largest neighbouring pair; "
               "prefetch: the best of a few segment sizes laid compact or as a FIFO ring in the whole budget "
               "(more in flight); speedup = load-all / best overlap; ceiling = (L + C) / max(L, C)")
    out.append("RAM KB = overlap block + activation arena; cap KB = two largest segments + activation arena; "
               "pf RAM KB = prefetch block + arena; load-all needs all weights in RAM")
    for c in result["real_kernel_checks"]:
        out.append(f"real kernels: {c['model']} on {c['board']}, {c['segments']} segments: bit-exact "
                   f"{'yes' if c['bit_exact'] else 'NO'}, {c['cycles']} cycles (cost-only run "
                   f"{c['cost_only_cycles']}), {c['dma_bytes']} B by DMA")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench segments", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true", help="fewer models and boards")
    args = ap.parse_args(argv)
    emit(run(args.quick), args.json, _render)
    return 0
