"""Stripe execution with line buffers: memory and MAC overhead (issue 5).

    python -m pyembed.bench stripe [--json] [--height 480 --width 640]
                                   [--budgets 65536,32768,16384] [--no-reference]

Network: pixel-to-pixel, 8 layers of 3x3 'same' convolutions, 3 -> 16 -> ...
-> 16 -> 3 channels, random int8 weights (pyembed.kernels.stripe.pixel_network), on a
random VGA image. Figures and where they come from:

* full frame: the numpy layer-by-layer reference (pyembed.kernels.layers.run_layers)
  measures its MACs and the peak bytes of intermediate maps alive at once;
* stripe: the C executor's counters (MACs) and arena query (bytes), plus the
  arena bytes it actually touched (high-water marks), from real runs; every
  stripe output is compared bit for bit with the reference (or, with
  --no-reference, with the full-width stripe run);
* patch-based with recomputed halos (MCUNetV2): a Python counting model
  (pyembed.kernels.stripe.PatchModel) of that scheme's tile buffers and MACs - it is
  not run.
The network input and output images are the caller's in every scheme and
are not counted.

Real model prefixes (--models, on by default; --only-models skips the VGA
network): for each bundled model, the longest run of its first operators
the stripe executor takes (pyembed.kernels.stripes.executable_chain, layer objects
built from the graph's operators by pyembed.kernels.layers), run in stripes on a
random input and compared bit for bit with the C graph runtime's tensor at
that point (graph.run(x, keep_intermediates=True)). Memory: the planner's
arena for those operators run full frame, layer by layer
(pyembed.plan.plan_graph on Graph.subgraph: input, output, every map and
kernel scratch), against the stripe arena (the executor's query) plus the
input and output images; MACs: the executor's counter against the numpy
full-frame reference's count.
"""
import argparse
import time

import numpy as np

from pyembed.kernels import stripe
from pyembed.plan import stripes
from pyembed.bench.common import emit, table

# (model, first operator): KWS's operator 0 is a 10x4 convolution, larger
# than the executor's 7x7 kernels, so its chain starts at operator 1
MODEL_PREFIXES = (("tiny_vww_mobilenetv1_96_int8", 0), ("tflm_person_detect_int8", 0),
                  ("tiny_kws_dscnn_int8", 1), ("tiny_ic_resnet8_int8", 0))


def _run(layers, x, s, b, reference):
    t0 = time.perf_counter()
    out, st = stripe.run_stripes(layers, x, s, b, return_stats=True)
    dt = time.perf_counter() - t0
    exact = bool(np.array_equal(out, reference)) if reference is not None else None
    return out, st, dt, exact


def _best_within(values, limit):
    """(bytes, macs, *cfg) with the fewest bytes among those whose MACs <= limit."""
    ok = [v for v in values if v[1] <= limit]
    return min(ok) if ok else None


def measure(height=480, width=640, budgets=(65536, 32768, 16384), seed=0, reference=True):
    layers = stripe.pixel_network(seed, n_layers=8, channels=16, in_channels=3, out_channels=3)
    x = np.random.default_rng(seed + 1).integers(-128, 128, size=(height, width, 3), dtype=np.int8)
    shape = x.shape
    res = {"network": {"layers": len(layers), "kernel": 3, "channels": 16, "input": list(shape),
                       "output": list(stripe.output_shape(layers, shape))}}

    if reference:
        t0 = time.perf_counter()
        ref = stripe.run_full_frame(layers, x)
        ff = {"peak_bytes": ref.peak_bytes, "macs": ref.macs, "seconds": time.perf_counter() - t0,
              "source": "numpy reference run"}
        ref_out = ref.output
    else:
        ff = {"peak_bytes": stripe.full_frame_peak_bytes(layers, shape),
              "macs": stripe.full_frame_macs(layers, shape), "seconds": None,
              "source": "liveness of the reference's shapes (not run)"}
        ref_out = None
    res["full_frame"] = ff

    out_w = res["network"]["output"][1]
    full_out, st, dt, exact = _run(layers, x, out_w, stripe.DEFAULT_BLOCK, ref_out)
    if ref_out is None:
        ref_out, exact = full_out, None
    res["stripe_full_width"] = {
        "stripe_width": out_w, "block_width": stripe.DEFAULT_BLOCK, "arena_bytes": st.arena_bytes,
        "touched_bytes": st.peak_bytes, "macs": st.macs,
        "mac_overhead": st.macs / ff["macs"] - 1.0,
        "memory_reduction": ff["peak_bytes"] / st.arena_bytes, "bit_exact": exact, "seconds": dt}
    net = stripe.compile_network(layers, shape)
    res["arena_by_block"] = {b: net.buffer_size(out_w, b) for b in (1, 4, 16, 64)}

    model = stripe.PatchModel(layers, shape)
    rows = []
    for budget in budgets:
        row = {"budget": budget}
        w = stripe.widest_stripe(layers, shape, budget, stripe.DEFAULT_BLOCK)
        if w is not None:
            _, st, dt, ok = _run(layers, x, w.stripe_width, w.block_width, ref_out)
            row["widest"] = {"stripe_width": w.stripe_width, "block_width": w.block_width,
                             "arena_bytes": st.arena_bytes, "touched_bytes": st.peak_bytes,
                             "macs": st.macs, "mac_overhead": st.macs / ff["macs"] - 1.0,
                             "bit_exact": ok, "seconds": dt}
        try:
            p = stripe.plan(layers, shape, budget)
        except stripe.PlanError:
            p = None
        row["plan"] = None
        if p is not None:
            if w is None or (p.stripe_width, p.block_width) != (w.stripe_width, w.block_width):
                _, st, dt, ok = _run(layers, x, p.stripe_width, p.block_width, ref_out)
            row["plan"] = {"stripe_width": p.stripe_width, "block_width": p.block_width,
                           "arena_bytes": st.arena_bytes, "macs": st.macs,
                           "mac_overhead": st.macs / ff["macs"] - 1.0, "bit_exact": ok}
        try:
            pp = stripe.patch_plan(layers, shape, budget, model)
            row["patch"] = {"tile": [pp.block_width, pp.stripe_width], "peak_bytes": pp.peak_bytes,
                            "macs": pp.macs, "mac_overhead": pp.mac_overhead}
        except stripe.PlanError:
            row["patch"] = None
        rows.append(row)
    res["budgets"] = rows

    # the same question from the other side: least memory at <= 10 % extra MACs
    limit = 1.10 * ff["macs"]
    s_best = _best_within([(net.buffer_size(s, 1), net.predict_macs(s), s) for s in range(1, out_w + 1)], limit)
    oh = res["network"]["output"][0]
    p_vals = [(model.peak_bytes(th, tw), model.macs(th, tw), th, tw)
              for th in stripe._tile_sizes(oh) for tw in stripe._tile_sizes(out_w)
              if model.macs(th, tw) <= limit]
    p_best = _best_within(p_vals, limit)
    res["at_10pct_macs"] = {
        "stripe": None if s_best is None else {
            "stripe_width": s_best[2], "block_width": 1, "arena_bytes": s_best[0],
            "mac_overhead": s_best[1] / ff["macs"] - 1.0,
            "memory_reduction": ff["peak_bytes"] / s_best[0], "source": "arena query, C stripe geometry"},
        "patch": None if p_best is None else {
            "tile": [p_best[2], p_best[3]], "peak_bytes": p_best[0],
            "mac_overhead": p_best[1] / ff["macs"] - 1.0,
            "memory_reduction": ff["peak_bytes"] / p_best[0], "source": "patch model"},
    }
    return res


def measure_models(prefixes=MODEL_PREFIXES, seed=0, block=stripe.DEFAULT_BLOCK):
    """The real-model prefix section (see the module comment)."""
    from pyembed.data import model_path
    from pyembed.model.load import load_model
    rows = []
    for name, first in prefixes:
        g = load_model(model_path(name))
        chain = stripes.executable_chain(g, first)
        t = g.tensors[g.inputs[0]]
        xin = np.random.default_rng(seed).integers(-128, 128, size=t.shape).astype(np.int8)
        values = g.run(xin, keep_intermediates=True)
        x, want = chain.input_array(values), chain.output_array(values)
        refused = None
        if chain.ops[-1] + 1 < len(g.operators):
            try:
                longer = g.layers(first, chain.ops[-1] + 1)
                stripe.check_network(longer, longer.input_shape)
            except (stripe.ArgumentError, stripe.UnsupportedError) as e:
                refused = str(e)
        full = stripes.chain_memory(chain, None, block)
        got, st, dt, exact = _run(chain, x, full.stripe_width, block, want)
        net = stripe.compile_network(chain, chain.input_shape)
        ow = full.stripe_width
        # least arena over every stripe width (block 1), and least within 10 % extra MACs
        cands = [(net.buffer_size(w, 1), net.predict_macs(w), w) for w in range(1, ow + 1)]
        least = min(cands)
        within = _best_within(cands, 1.10 * full.full_frame_macs)
        narrow = []
        for cand in {least, within} - {None}:
            _, nst, _, nexact = _run(chain, x, cand[2], 1, want)
            narrow.append({"stripe_width": cand[2], "block_width": 1, "arena_bytes": nst.arena_bytes,
                           "macs": nst.macs, "mac_overhead": nst.macs / full.full_frame_macs - 1.0,
                           "bit_exact": nexact})
        narrow.sort(key=lambda r: r["arena_bytes"])
        rows.append({
            "model": name, "operators": [chain.ops[0], chain.ops[-1]], "layers": len(chain),
            "kinds": [type(layer).__name__ for layer in chain],
            "input": list(chain.input_shape), "output": list(chain.output_shape), "next_refused": refused,
            "planned_arena": full.planned_arena, "planned_lower_bound": full.planned_lower_bound,
            "full_frame_peak": full.full_frame_peak, "input_bytes": full.input_bytes,
            "output_bytes": full.output_bytes, "full_frame_macs": full.full_frame_macs,
            "graph_runtime_macs": int(sum(g.operators[i].macs for i in chain.ops)),
            "stripe": {"stripe_width": full.stripe_width, "block_width": block, "arena_bytes": st.arena_bytes,
                       "touched_bytes": st.peak_bytes, "total_bytes": full.stripe_total, "macs": st.macs,
                       "mac_overhead": st.macs / full.full_frame_macs - 1.0, "bit_exact": exact, "seconds": dt},
            "narrow": narrow,
        })
    return rows


def render_models(rows):
    lines = ["real model prefixes: the first operators the stripe executor takes, layer objects built from",
             "the graph (pyembed.kernels.layers), bit-exact against graph.run's tensor at that point; full frame =",
             "the planner's arena for those operators (input + output + maps + kernel scratch)"]
    for r in rows:
        s = r["stripe"]
        lines.append("")
        lines.append(f"{r['model']}: operators {r['operators'][0]}..{r['operators'][1]} ({r['layers']} layers), "
                     f"{tuple(r['input'])} -> {tuple(r['output'])}")
        if r["next_refused"]:
            lines.append(f"  stops before operator {r['operators'][1] + 1}: {r['next_refused']}")
        lines.append(f"  full frame: planned arena {r['planned_arena']} B (liveness bound "
                     f"{r['planned_lower_bound']} B; intermediate maps alone {r['full_frame_peak']} B), "
                     f"{r['full_frame_macs']} MACs on image taps ({r['graph_runtime_macs']} with padding taps)")
        lines.append(f"  stripe (one full-width stripe, block {s['block_width']}): arena {s['arena_bytes']} B "
                     f"(touched {s['touched_bytes']} B) + input {r['input_bytes']} B + output {r['output_bytes']} B "
                     f"= {s['total_bytes']} B = {100.0 * s['total_bytes'] / r['planned_arena']:.1f} % of the "
                     f"planned arena; extra MACs {_pct(s['mac_overhead'])}; bit-exact: {s['bit_exact']}")
        for n in r["narrow"]:
            total = n["arena_bytes"] + r["input_bytes"] + r["output_bytes"]
            lines.append(f"  stripe width {n['stripe_width']}, block {n['block_width']}: arena {n['arena_bytes']} B "
                         f"(with the images {total} B = {100.0 * total / r['planned_arena']:.1f} %), "
                         f"extra MACs {_pct(n['mac_overhead'])}; bit-exact: {n['bit_exact']}")
    return "\n".join(lines)


def _pct(v):
    return f"{100.0 * v:.2f} %"


def render(r):
    parts = []
    if "network" in r:
        parts.append(render_pixel(r))
    if "model_prefixes" in r:
        parts.append(render_models(r["model_prefixes"]))
    return "\n\n".join(parts)


def render_pixel(r):
    n = r["network"]
    ff = r["full_frame"]
    fw = r["stripe_full_width"]
    lines = [
        f"pixel-to-pixel network: {n['layers']} x {n['kernel']}x{n['kernel']} conv, {n['channels']} channels, "
        f"input {tuple(n['input'])} -> output {tuple(n['output'])}",
        f"full frame ({ff['source']}): peak {ff['peak_bytes']} B of intermediate maps, {ff['macs']} MACs",
        "",
        "one full-width stripe (C executor, block "
        f"{fw['block_width']}): arena {fw['arena_bytes']} B (touched {fw['touched_bytes']} B), "
        f"{fw['macs']} MACs = {_pct(fw['mac_overhead'])} extra, "
        f"{fw['memory_reduction']:.1f}x less memory than full frame, bit-exact: {fw['bit_exact']}",
        "arena at full width by block width: " + ", ".join(f"{b}: {v} B" for b, v in r["arena_by_block"].items()),
        "",
        "per RAM budget: widest stripe (block 16) and the planned stripe (fewest MACs), both run in C;",
        "patch-based with recomputed halos (MCUNetV2) from the counting model",
    ]
    rows = []
    for row in r["budgets"]:
        w = row.get("widest")
        p = row["plan"]
        pa = row["patch"]
        rows.append([
            row["budget"],
            f"{w['stripe_width']}" if w else "-",
            f"{w['arena_bytes']}" if w else "-",
            _pct(w["mac_overhead"]) if w else "-",
            f"{p['stripe_width']}/{p['block_width']}" if p else "none fits",
            p["arena_bytes"] if p else "-",
            _pct(p["mac_overhead"]) if p else "-",
            "-" if not p else ("yes" if p["bit_exact"] and (not w or w["bit_exact"]) else str(p["bit_exact"])),
            f"{pa['tile'][0]}x{pa['tile'][1]}" if pa else "none fits",
            pa["peak_bytes"] if pa else "-",
            _pct(pa["mac_overhead"]) if pa else "-",
        ])
    lines.append(table(["budget B", "widest", "arena B", "extra MACs", "plan S/B", "arena B", "extra MACs",
                        "exact", "patch tile", "peak B", "extra MACs"], rows))
    a = r["at_10pct_macs"]
    lines.append("")
    lines.append("least memory with at most 10 % extra MACs:")
    if a["stripe"]:
        s = a["stripe"]
        lines.append(f"  stripe: width {s['stripe_width']}, block 1: {s['arena_bytes']} B "
                     f"({s['memory_reduction']:.1f}x less than full frame), {_pct(s['mac_overhead'])} extra MACs")
    if a["patch"]:
        p = a["patch"]
        lines.append(f"  patch:  tile {p['tile'][0]}x{p['tile'][1]}: {p['peak_bytes']} B "
                     f"({p['memory_reduction']:.1f}x less than full frame), {_pct(p['mac_overhead'])} extra MACs")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench stripe", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--height", type=int, default=480)
    ap.add_argument("--width", type=int, default=640)
    ap.add_argument("--budgets", default="65536,32768,16384")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-reference", action="store_true",
                    help="skip the numpy full-frame run (compare with the full-width stripe instead)")
    ap.add_argument("--no-models", action="store_true", help="skip the real model prefixes")
    ap.add_argument("--only-models", action="store_true", help="only the real model prefixes")
    a = ap.parse_args(argv)
    budgets = [int(v) for v in a.budgets.split(",") if v.strip()]
    res = {} if a.only_models else measure(a.height, a.width, budgets, a.seed, reference=not a.no_reference)
    if not a.no_models:
        res["model_prefixes"] = measure_models(seed=a.seed)
    emit(res, a.json, render)
    return 0
