"""Segmented execution from flash: load-then-run versus the overlapped pipeline.

    python -m pyembed.bench segments [--json] [--quick] [--no-split] [--stall-per-word X]

For real models and a chained two-model use case (keyword spotting, whose
"person" wake word then runs the visual-wake-words MobileNet), on several
boards, external-flash bandwidths and RAM budgets for the weights, the graph
is divided into segments and simulated on the event core:

* load-all: load every weight from flash in one transfer, then run the
  unsplit model (RAM: all weights) -- the baseline of the speed-up;
* serial:   load a segment, run it, load the next (RAM: largest segment);
* overlap:  run segment k while the DMA loads k+1 (the sliding window, two in flight);
* prefetch: the same runtime with more segments in flight where the budget allows.

Segments may cut inside a layer: CONV_2D / DEPTHWISE / FC weights larger than
1/64 of the model's are split into output-channel groups (firmware_sim.split),
so the division balances segment sizes; ``--no-split`` divides at layer
boundaries only (the "whole layers" columns show that division either way).

Each overlapped run is compared with the analytic bound
T = L1 + sum max(C_k, L_k+1) + C_n twice: without bus contention (the bound's
own model, where a compact two-in-flight run meets it exactly) and with the
profile's DMA/CPU contention (kernels run slower while a transfer writes RAM),
where "within 5 %" is a measurement. "ceiling" is the best any overlap can do
against load-all, (L + C) / max(L, C) of the unsplit model: below 1.6 the
1.6x goal is out of reach by arithmetic, not by the runtime; "at budget" is
load-all over a lower bound on any overlapped run inside the RAM budget
(``fluid_time``: weights streamed in order in fine pieces, no overheads), the
best the budget allows whatever the cuts. One
configuration per model is also run with the real kernels on simulated
memory: outputs bit-exact with graph.run, cycles equal to the cost-only run.
"""
import argparse
import dataclasses

import numpy as np

from pyembed.bench.common import emit, table

# tiny_ic_resnet8 is left out: two neighbouring 36 KB convolutions hold 93 % of its weights
MODELS = ["tiny_vww_mobilenetv1_96_int8", "tiny_ad_autoencoder_int8", "tflm_person_detect_int8"]
CHAIN = ("tiny_kws_dscnn_int8", "tiny_vww_mobilenetv1_96_int8")
# (board, external flash MB/s to try): the profile's QSPI figure, and slower parts (single-SPI NOR
# flash at ~8 MB/s, or a slow SD/SPI link at ~4 MB/s) where loading and computing take similar time
BOARDS = [("stm32f446", (45, 8)), ("stm32h743", (66, 8, 4)), ("nrf52840", (16, 4))]
QUICK_BOARDS = [("stm32h743", (8,)), ("nrf52840", (16,))]
BUDGETS = (0.3, 0.45, 0.65)    # fraction of the model's weights the block may hold
SPLIT_DIVISOR = 64             # split weights larger than 1/64 of the model's into channel groups


def with_bandwidth(profile, region, mb_s):
    regions = dict(profile.regions)
    regions[region] = dataclasses.replace(regions[region], bandwidth=int(mb_s * 1_000_000))
    return dataclasses.replace(profile, regions=regions)


def _graph(name):
    from pyembed.data import model_path
    from pyembed.model.load import load_model
    return load_model(model_path(name))


def _arena(graph, profile):
    from firmware_sim.sim import default_plan
    plan, _ = default_plan(graph, profile)
    return plan.arena_size


def _layers(graph, profile, split_bytes=None):
    from firmware_sim.sim import model_layers
    return model_layers(graph, profile, split_bytes=split_bytes)


def load_all_baseline(whole_layers, profile):
    """Load-then-run with nothing split: one DMA transfer of every weight, then the
    unsplit model's compute (no overlap, so no bus contention either)."""
    from firmware_sim.segments import span_cycles
    src, blk = profile.defaults["segment_source"], profile.defaults["activations"]
    total = sum(la.weight_bytes for la in whole_layers)
    L = profile.transfer_cycles(total, src, blk)
    C = span_cycles(whole_layers, 0, len(whole_layers) - 1)
    return L, C


def fluid_time(whole_layers, profile, budget, slices=32):
    """A lower bound on any overlapped run within ``budget`` bytes: weights stream in layer
    order at the flash rate with no per-transfer setup, each layer cut into ``slices`` equal
    pieces of weights and compute (finer than any real division); a piece's bytes stay in
    the block from its load until its compute ends, and the DMA waits for room. The greedy
    schedule is optimal for this relaxation. Returns cycles (0 if a piece exceeds the budget)."""
    src, blk = profile.defaults["segment_source"], profile.defaults["activations"]
    rate = min(profile.regions[src].bandwidth, profile.regions[blk].bandwidth, profile.dma.bandwidth) \
        / profile.clock_hz                                      # bytes per cycle
    pieces = []
    for la in whole_layers:
        pieces.extend([(la.weight_bytes / slices, la.compute_cycles / slices)] * slices)
    load_end, comp_end = [], []
    free_from, in_block = 0, 0.0
    for i, (w, c) in enumerate(pieces):
        if w > budget:
            return 0
        in_block += w
        start = load_end[-1] if load_end else 0.0
        while in_block > budget:                   # wait for the oldest resident pieces' compute
            in_block -= pieces[free_from][0]
            start = max(start, comp_end[free_from])
            free_from += 1
        load_end.append(start + w / rate)
        comp_end.append(max(load_end[-1], comp_end[-1] if comp_end else 0.0) + c)
    return comp_end[-1]


def _plans(layers, profile, budget, criteria):
    from firmware_sim.sim import divide_layers
    src, blk = profile.defaults["segment_source"], profile.defaults["activations"]
    plan = divide_layers(layers, profile, budget, criteria, blk, src, prefetch=False)
    fast = divide_layers(layers, profile, budget, criteria, blk, src, prefetch=True)
    return plan, fast


def evaluate(name, layers, profile, budget, activations, criteria=("latency",), whole=None):
    """One configuration: the division of ``layers`` (split or not) run four ways, with and
    without bus contention, against load-all of the unsplit model (``whole``: its layers)."""
    from firmware_sim.segments import run_abstract
    whole = whole if whole is not None else layers
    plan, fast = _plans(layers, profile, budget, criteria)
    t = {}
    for c in (False, True):
        for s in ("all", "serial", "overlap"):
            t[s, c] = run_abstract(plan, profile, s, contention=c)[0]
        t["prefetch", c] = run_abstract(fast, profile, "overlap", contention=c)[0]
    L_all, C_all = load_all_baseline(whole, profile)
    t_all = L_all + C_all
    L, C = sum(plan.loads), sum(plan.computes)
    ms = profile.cycles_to_ms
    bound = plan.bound()
    ratio = L_all / C_all if C_all else float("inf")
    best = {c: min(t["overlap", c], t["prefetch", c]) for c in (False, True)}
    ceiling = (L_all + C_all) / max(L_all, C_all)
    fluid = fluid_time(whole, profile, budget)
    budget_ceiling = t_all / fluid if fluid else float("nan")
    balanced = 0.5 <= ratio <= 2.0
    work = plan.work_bytes()
    ram = plan.block_bytes + activations + work
    ram_cap = plan.two_largest() + activations + work
    src = profile.defaults["segment_source"]
    slowdown = profile.dma.cpu_slowdown(profile.regions[src].bandwidth, profile.clock_hz)
    within = {c: (t["overlap", c] - bound) / bound for c in (False, True)}
    speedup = {c: t_all / best[c] for c in (False, True)}
    return {"model": name, "board": profile.name, "flash_mb_s": profile.regions[src].bandwidth / 1e6,
            "budget": budget, "segments": len(plan.segments), "split_layers": plan.split_layers,
            "load_ms": ms(L), "compute_ms": ms(C), "load_all_load_ms": ms(L_all), "load_all_compute_ms": ms(C_all),
            "load_over_compute": ratio, "all_ms": ms(t_all), "serial_ms": ms(t["serial", True]),
            "overlap_ms": ms(t["overlap", True]), "overlap_no_contention_ms": ms(t["overlap", False]),
            "bound_ms": ms(bound), "vs_bound": within[True], "vs_bound_no_contention": within[False],
            "prefetch_ms": ms(t["prefetch", True]), "prefetch_no_contention_ms": ms(t["prefetch", False]),
            "prefetch_segments": len(fast.segments), "prefetch_placement": fast.placement,
            "prefetch_ram_bytes": fast.block_bytes + activations + fast.work_bytes(),
            "cpu_slowdown": slowdown, "speedup": speedup[True], "speedup_no_contention": speedup[False],
            "ceiling": ceiling, "budget_ceiling": budget_ceiling, "ram_bytes": ram, "ram_cap_bytes": ram_cap, "work_bytes": work,
            "all_ram_bytes": sum(la.weight_bytes for la in whole) + activations,
            "within_5pct": within[True] <= 0.05 and t["prefetch", True] <= bound * 1.05,
            "within_5pct_no_contention": within[False] <= 0.05 and t["prefetch", False] <= bound * 1.05,
            "speed_goal": (speedup[True] >= 1.6) if balanced else None,
            "ram_goal": ram <= ram_cap, "carry_bytes": sum(s.carry_bytes for s in plan.segments[:-1])}


def real_check(name, graph, profile, budget, split_bytes):
    """The overlapped run with real kernels on simulated memory (split layers, contention)."""
    from firmware_sim.segments import run_abstract
    from firmware_sim.sim import default_plan, segment_graph, simulate
    rng = np.random.default_rng(1)
    t = graph.tensors[graph.inputs[0]]
    x = rng.integers(-128, 128, size=t.shape, dtype=np.int8)
    plan, rmap = default_plan(graph, profile)
    seg = segment_graph(graph, profile, budget, order=plan.order, split_bytes=split_bytes)
    r = simulate(graph, plan, profile, x, segments=seg, region_map=rmap)
    abstract, _ = run_abstract(seg, profile, "overlap")
    ref = graph.run(x)
    return {"model": name, "board": profile.name, "budget": budget, "segments": len(seg.segments),
            "split_layers": seg.split_layers, "bit_exact": all(np.array_equal(a, b) for a, b in zip(r.outputs, ref)),
            "cycles": r.cycles, "cost_only_cycles": abstract, "dma_bytes": r.dma_bytes,
            "contention_cycles": r.contention_cycles, "split_work_bytes": r.split_work_bytes,
            "peak_block_region_bytes": r.peak_bytes.get(seg.block_region)}


def with_stall(profile, stall_per_word):
    """The profile with another DMA/CPU contention figure (a sensitivity study)."""
    return dataclasses.replace(profile, dma=dataclasses.replace(profile.dma, cpu_stall_per_word=float(stall_per_word)))


def run(quick=False, split=True, stall_per_word=None):
    from firmware_sim.profiles import load_profile
    from firmware_sim.sim import chained_layers, use_case_criteria
    rows, checks = [], []
    models = MODELS[:2] if quick else MODELS
    graphs = {m: _graph(m) for m in set(models) | set(CHAIN)}
    kws, vww = CHAIN
    chained_bytes = graphs[kws].weights_bytes + graphs[vww].weights_bytes
    for board, bandwidths in QUICK_BOARDS if quick else BOARDS:
        base = load_profile(board)
        if stall_per_word is not None:
            base = with_stall(base, stall_per_word)
        for bw in bandwidths:
            prof = with_bandwidth(base, base.defaults["segment_source"], bw)
            cases = []
            for m in models:
                whole = _layers(graphs[m], prof)
                cut = _layers(graphs[m], prof, graphs[m].weights_bytes / SPLIT_DIVISOR) if split else whole
                cases.append((m, whole, cut, _arena(graphs[m], prof)))
            whole = chained_layers([graphs[g] for g in CHAIN], prof)
            cut = chained_layers([graphs[g] for g in CHAIN], prof, split_bytes=chained_bytes / SPLIT_DIVISOR) \
                if split else whole
            act = max(_arena(graphs[kws], prof), _arena(graphs[vww], prof))
            cases.append(("kws->vww (chained)", whole, cut, act))
            for name, whole, cut, activations in cases:
                total = sum(la.weight_bytes for la in whole)
                for frac in BUDGETS:
                    budget = int(total * frac)
                    crit = use_case_criteria(("latency",)) if "chained" in name else ("latency",)
                    row = {}
                    try:
                        row = evaluate(name, cut, prof, budget, activations, crit, whole=whole)
                    except Exception as e:   # a budget below the largest layer / group: say so, keep going
                        row = {"model": name, "board": prof.name, "budget": budget, "flash_mb_s": bw,
                               "error": str(e).split("\n")[0]}
                    try:
                        w = evaluate(name, whole, prof, budget, activations, crit, whole=whole)
                        row["whole_layers"] = {k: w[k] for k in ("segments", "speedup", "overlap_ms", "prefetch_ms",
                                                                 "bound_ms", "speed_goal")}
                    except Exception as e:
                        row["whole_layers"] = {"error": str(e).split("\n")[0]}
                    rows.append(row)
    # real kernels where splitting matters: the H743 with an 8 MB/s flash (load ~ compute)
    prof = with_bandwidth(load_profile("stm32h743"), "qspi", 8)
    for m in (models[:1] if quick else models[:2]):
        g = graphs[m]
        checks.append(real_check(m, g, prof, int(g.weights_bytes * 0.3), g.weights_bytes / SPLIT_DIVISOR))
    return {"rows": rows, "real_kernel_checks": checks, "split_divisor": SPLIT_DIVISOR if split else None,
            "stall_per_word": stall_per_word}


def _render(result):
    hdr = ["model", "board", "MB/s", "budget KB", "segs", "split", "L ms", "C ms", "L/C", "load-all", "serial",
           "overlap", "bound", "vs bound", "(no cont.)", "prefetch", "speedup", "(no cont.)", "whole layers",
           "ceiling", "at budget", "RAM KB", "cap KB", "work B", "goals"]
    rows = []
    for r in result["rows"]:
        wl = r.get("whole_layers", {})
        whole = "-" if "error" in wl else f"{wl['speedup']:.2f}x"
        if "error" in r:
            rows.append([r["model"][:22], r["board"], f"{r['flash_mb_s']:g}", f"{r['budget'] / 1024:.0f}"]
                        + ["-"] * 14 + [whole] + ["-"] * 5 + [r["error"][:40]])
            continue
        goals = ["bound ok" if r["within_5pct"] else "BOUND MISS"]
        if r["speed_goal"] is not None:
            goals.append("1.6x ok" if r["speed_goal"] else ("1.6x n/a" if r["ceiling"] < 1.6 else "1.6x MISS"))
        goals.append("ram ok" if r["ram_goal"] else "RAM MISS")
        rows.append([r["model"][:22], r["board"], f"{r['flash_mb_s']:g}", f"{r['budget'] / 1024:.0f}",
                     r["segments"], r["split_layers"], f"{r['load_ms']:.2f}", f"{r['compute_ms']:.2f}",
                     f"{r['load_over_compute']:.2f}", f"{r['all_ms']:.2f}", f"{r['serial_ms']:.2f}",
                     f"{r['overlap_ms']:.2f}", f"{r['bound_ms']:.2f}", f"{100 * r['vs_bound']:+.2f}%",
                     f"{100 * r['vs_bound_no_contention']:+.2f}%", f"{r['prefetch_ms']:.2f}",
                     f"{r['speedup']:.2f}x", f"{r['speedup_no_contention']:.2f}x", whole, f"{r['ceiling']:.2f}x",
                     f"{r['budget_ceiling']:.2f}x",
                     f"{r['ram_bytes'] / 1024:.0f}", f"{r['ram_cap_bytes'] / 1024:.0f}", r["work_bytes"],
                     ", ".join(goals)])
    out = [table(hdr, rows)]
    ok = [r for r in result["rows"] if "error" not in r]
    bal = [r for r in ok if r["speed_goal"] is not None]
    reach = [r for r in bal if r["ceiling"] >= 1.6]
    whole_hits = sum(1 for r in bal if r.get("whole_layers", {}).get("speed_goal"))
    out.append(f"\n{len(ok)} configurations ({len(result['rows']) - len(ok)} budgets too small): "
               f"{sum(r['within_5pct'] for r in ok)} within 5% of the bound with bus contention "
               f"({sum(r['within_5pct_no_contention'] for r in ok)} without), "
               f"{sum(r['ram_goal'] for r in ok)} within RAM = two largest segments + activations (+ work)")
    out.append(f"{len(bal)} with 0.5 <= L/C <= 2 (load-all's L and C): {sum(bool(r['speed_goal']) for r in bal)} "
               f"reach 1.6x with contention ({sum(r['speedup_no_contention'] >= 1.6 for r in bal)} without; "
               f"{whole_hits} with whole layers only); {len(bal) - len(reach)} have a ceiling below 1.6x; of the "
               f"{len(reach)} whose ceiling allows it, {sum(bool(r['speed_goal']) for r in reach)} reach 1.6x")
    if result.get("split_divisor"):
        out.append(f"split: layers whose weights exceed 1/{result['split_divisor']} of the model's are cut into "
                   f"output-channel groups; 'split' = such layers in the plan; 'whole layers' = speed-up when cuts "
                   f"fall between layers only")
    out.append("times in ms. overlap: two segments in flight in a block of the largest neighbouring pair, with bus "
               "contention; prefetch: the best of a few segment sizes laid compact or as a FIFO ring in the whole "
               "budget; load-all: one transfer of all weights then the unsplit model; speedup = load-all / best "
               "overlap; ceiling = (L + C) / max(L, C) of load-all; vs bound: overlap against the analytic bound "
               "with contention (no cont.: without, where the compact run meets the bound exactly)")
    out.append("at budget = load-all / a lower bound on any overlap inside the budget (weights streamed in order "
               "in 1/32-layer pieces, no setup or call overheads, a piece held from its load to its compute): "
               "what the budget allows, ignoring how segments are cut")
    out.append("RAM KB = overlap block + activation arena + split work buffer; cap KB = two largest segments + "
               "arena + work; load-all needs all weights in RAM")
    if result.get("stall_per_word") is not None:
        out.append(f"contention overridden: {result['stall_per_word']:g} CPU stall cycles per DMA word on every board")
    slow = sorted({(r["board"], r["flash_mb_s"], round(100 * r["cpu_slowdown"], 2)) for r in ok})
    out.append("CPU slowdown while a transfer runs (profile dma.cpu_stall_per_word x words per cycle): "
               + ", ".join(f"{b} @ {m:g} MB/s {s:g}%" for b, m, s in slow))
    for c in result["real_kernel_checks"]:
        out.append(f"real kernels: {c['model']} on {c['board']}, {c['segments']} segments ({c['split_layers']} "
                   f"split layers, {c['split_work_bytes']} B work buffer): bit-exact "
                   f"{'yes' if c['bit_exact'] else 'NO'}, {c['cycles']} cycles (cost-only run "
                   f"{c['cost_only_cycles']}; {c['contention_cycles']} lost to bus contention), "
                   f"{c['dma_bytes']} B by DMA")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench segments", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true", help="fewer models and boards")
    ap.add_argument("--no-split", action="store_true", help="cut between layers only")
    ap.add_argument("--stall-per-word", type=float, default=None,
                    help="override every profile's DMA/CPU contention (CPU stall cycles per DMA word)")
    args = ap.parse_args(argv)
    emit(run(args.quick, split=not args.no_split, stall_per_word=args.stall_per_word), args.json, _render)
    return 0
