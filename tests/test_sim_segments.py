"""Segmented execution from flash on abstract layers: division, placement, runtime."""
import itertools
import json

import pytest
from hypothesis import given, settings, strategies as st

from firmware_sim.profiles import load_profile
from firmware_sim.segments import (Layer, SegmentPlan, chain, divide, pipeline_bound, pipeline_cycles, place,
                                   plan_segments, run_abstract)
from firmware_sim.trace import Trace
from pyembed.errors import PlanError, SimulationFault

PROFILE = load_profile("stm32f446")


def load_cycles(nbytes):
    return PROFILE.transfer_cycles(nbytes, "qspi", "sram")


def make_layers(spec, model=""):
    return [Layer(f"l{i}", w, c, model=model, carry_bytes=carry) for i, (w, c, carry) in enumerate(spec)]


def reference_times(plan, strategy):
    """Independent recurrence for the three strategies (no event queue):
    load k may start when the loader is free and its wait_for segment has run;
    compute k starts when it is loaded and the CPU is free."""
    segs = plan.segments
    n = len(segs)
    L, C = plan.loads, plan.computes
    load_end, comp_end = [0] * n, [0] * n
    loader_free = 0
    for k in range(n):
        if strategy == "all":
            dep = 0
        elif strategy == "serial":
            dep = comp_end[k - 1] if k else 0
        else:
            dep = comp_end[segs[k].wait_for] if segs[k].wait_for >= 0 else 0
        start = max(loader_free, dep)
        load_end[k] = start + L[k]
        loader_free = load_end[k]
        if strategy == "all":
            continue
        comp_end[k] = max(load_end[k], comp_end[k - 1] if k else 0) + C[k]
        # in "serial" and "overlap" the loader needs comp_end of earlier segments only
    if strategy == "all":
        return load_end[-1] + sum(C)
    return comp_end[-1]


def brute_force_best_bound(layers, budget):
    n = len(layers)
    best = None
    for mask in range(1 << (n - 1)):
        cuts, start = [], 0
        for i in range(n - 1):
            if mask >> i & 1:
                cuts.append((start, i))
                start = i + 1
        cuts.append((start, n - 1))
        sizes = [sum(la.weight_bytes for la in layers[a:b + 1]) for a, b in cuts]
        if any(s > budget for s in sizes) or any(x + y > budget for x, y in zip(sizes, sizes[1:])):
            continue
        comps = [sum(la.compute_cycles for la in layers[a:b + 1]) for a, b in cuts]
        t = pipeline_bound([load_cycles(s) for s in sizes], comps)
        best = t if best is None else min(best, t)
    return best


layer_spec = st.lists(st.tuples(st.integers(1000, 30000), st.integers(10000, 400000), st.integers(0, 5000)),
                      min_size=2, max_size=9)


@settings(max_examples=40, deadline=None)
@given(layer_spec, st.floats(0.3, 1.0))
def test_division_reaches_the_best_bound_and_runtime_matches_reference(spec, frac):
    layers = make_layers(spec)
    total = sum(w for w, _, _ in spec)
    budget = max(int(total * frac), 2 * max(w for w, _, _ in spec) + 32)
    plan = divide(layers, budget, load_cycles, ["latency"])
    plan.validate()
    sizes = [s.nbytes for s in plan.segments]
    assert all(a + b <= plan.block_bytes <= budget for a, b in zip(sizes, sizes[1:]))
    assert plan.bound() == brute_force_best_bound(layers, budget)
    for strategy in ("all", "serial", "overlap"):
        cycles, runner = run_abstract(plan, PROFILE, strategy, contention=False)
        assert cycles == reference_times(plan, strategy), strategy
    cycles, runner = run_abstract(plan, PROFILE, "overlap", contention=False)
    assert cycles == plan.bound() == pipeline_cycles(plan)   # compact layout: exactly the bound
    assert runner.peak_in_use <= plan.block_bytes
    place(plan, budget, "ring")
    cycles, runner = run_abstract(plan, PROFILE, "overlap", contention=False)
    assert cycles == reference_times(plan, "overlap") == pipeline_cycles(plan)
    assert runner.peak_in_use <= budget


def test_overlap_is_close_to_the_bound_and_beats_load_then_run_when_balanced():
    # 12 layers, load ~ compute: overlap must approach (L + C) / max(L, C) ~ 2x over load-all-then-run
    spec = [(20000, 0, 0)] * 12
    c = load_cycles(20000)
    layers = make_layers([(w, c, 0) for w, _, _ in spec])
    plan = divide(layers, 60000, load_cycles, ["latency"])
    t_over, _ = run_abstract(plan, PROFILE, "overlap", contention=False)
    t_all, _ = run_abstract(plan, PROFILE, "all", contention=False)
    assert t_over <= plan.bound() * 1.05
    assert t_all / t_over >= 1.6


def test_ring_placement_keeps_more_than_two_segments_in_flight():
    # compute-heavy first segments, then load-heavy ones: prefetching ahead pays off
    spec = [(8000, 600000, 0)] * 4 + [(8000, 10000, 0)] * 4
    layers = make_layers(spec)
    plan = divide(layers, 16032, load_cycles, ["latency"])
    compact, _ = run_abstract(plan, PROFILE, "overlap", contention=False)
    place(plan, 64000, mode="ring")
    ring, runner = run_abstract(plan, PROFILE, "overlap", contention=False)
    assert ring < compact
    assert runner.peak_in_use > 2 * 8000          # more than two segments resident at once
    assert ring == reference_times(plan, "overlap") == pipeline_cycles(plan)
    # the search finds a plan at least as fast, inside the budget
    best = plan_segments(layers, 64000, load_cycles)
    assert pipeline_cycles(best) <= ring and best.block_bytes <= 64000
    assert run_abstract(best, PROFILE, contention=False)[0] == pipeline_cycles(best)


def test_models_criterion_cuts_at_every_model_boundary():
    a = make_layers([(5000, 50000, 100)] * 3, model="kws")
    b = make_layers([(7000, 80000, 200)] * 4, model="vww")
    layers = chain(a, b)
    plan = divide(layers, 40000, load_cycles, ["latency", "models"])
    assert all(len(s.models) == 1 for s in plan.segments)
    assert any(s.last == 2 for s in plan.segments)
    free = divide(layers, 40000, load_cycles, ["latency"])
    assert free.bound() <= plan.bound()


def test_carry_criterion_prefers_cuts_where_little_is_live():
    # equal layers except the activations live after each: only one cheap cut point (after layer 2)
    spec = [(10000, 100000, 9000), (10000, 100000, 9000), (10000, 100000, 100), (10000, 100000, 9000),
            (10000, 100000, 9000), (10000, 100000, 0)]
    layers = make_layers(spec)
    plan = divide(layers, 60000, load_cycles, {"carry": 1.0}, min_segments=2)
    assert [s.last for s in plan.segments] == [2, 5]
    assert plan.segments[0].carry_bytes == 100


def test_balance_criterion_evens_out_sizes():
    spec = [(4000, 10000, 0), (4000, 10000, 0), (4000, 10000, 0), (4000, 10000, 0), (12000, 10000, 0),
            (4000, 10000, 0), (4000, 10000, 0), (4000, 10000, 0)]
    layers = make_layers(spec)
    plan = divide(layers, 24000, load_cycles, {"balance": 1.0})
    sizes = [s.nbytes for s in plan.segments]
    mean = sum(sizes) / len(sizes)
    # an independent check: no other division into the same count has a smaller deviation
    best = None
    n = len(layers)
    for cut in itertools.combinations(range(1, n), len(sizes) - 1):
        bounds = (0,) + cut + (n,)
        ss = [sum(w for w, _, _ in spec[a:b]) for a, b in zip(bounds, bounds[1:])]
        if any(x + y > 24000 for x, y in zip(ss, ss[1:])):
            continue
        dev = sum(abs(s - sum(ss) / len(ss)) for s in ss)
        best = dev if best is None else min(best, dev)
    assert sum(abs(s - mean) for s in sizes) == best


def test_segment_larger_than_the_block_is_a_clear_error():
    layers = make_layers([(5000, 1000, 0), (50000, 1000, 0)])
    with pytest.raises(PlanError, match="segment larger than the block: layer 1.*50000"):
        divide(layers, 40000, load_cycles)
    layers = make_layers([(30000, 1000, 0), (30000, 1000, 0)])
    with pytest.raises(PlanError, match="cannot divide"):
        divide(layers, 40000, load_cycles)


def test_plan_round_trips_through_json_and_rejects_tampering(tmp_path):
    layers = make_layers([(9000, 100000, 10)] * 6)
    plan = divide(layers, 30000, load_cycles, ["latency", "carry"])
    path = tmp_path / "segments.json"
    plan.to_json(path)
    again = SegmentPlan.from_json(str(path))
    assert again.to_dict() == plan.to_dict()
    assert run_abstract(again, PROFILE, contention=False)[0] == run_abstract(plan, PROFILE, contention=False)[0]
    bad = plan.to_dict()
    bad["segments"][1]["offset"] = bad["segments"][0]["offset"]
    with pytest.raises(PlanError, match="load over segment 0"):
        SegmentPlan.from_dict(bad)


def test_slow_flash_is_reported_with_the_timeline_so_far():
    layers = make_layers([(9000, 100000, 0)] * 6)
    plan = divide(layers, 30000, load_cycles)
    trace = Trace(PROFILE.clock_hz)
    with pytest.raises(SimulationFault, match="load seg 0.*deadline"):
        run_abstract(plan, PROFILE, "overlap", bandwidth_scale=0.7, trace=trace, contention=False)
    assert trace.instants and trace.instants[0].name == "DMA late"
    # tolerated as a stall, it only costs time
    slow, _ = run_abstract(plan, PROFILE, "overlap", bandwidth_scale=0.7, late="stall", contention=False)
    assert slow > plan.bound()


# --- sub-layer segments: operators split by output-channel groups ----------------------------

def split_layers(spec):
    """spec: list of (groups, weight bytes per group, lin cycles per group, call, split, split_call);
    groups == 1 is an ordinary layer (its compute = lin)."""
    layers, t = [], 0
    for i, (k, w, lin, call, spl, spl_call) in enumerate(spec):
        t += 1
        for part in range(k):
            if k == 1:
                layers.append(Layer(f"op{i}", w, lin, ops=(i,), tensors=((t, w),)))
            else:
                layers.append(Layer(f"op{i}[{part}]", w, lin, ops=(i,), tensors=((t, w, 4 * part, 4 * part + 4, 0),),
                                    part=part, parts=k, channels=(4 * part, 4 * part + 4), call_cycles=call,
                                    split_cycles=spl, split_call_cycles=spl_call))
    return layers


def reference_cycles(layers, a, b):
    """Independent: group the layers a..b by operator; a group missing some of its
    operator's parts pays the copies."""
    groups = {}
    for i in range(a, b + 1):
        groups.setdefault(layers[i].ops[0], []).append(layers[i])
    total = 0
    for parts in groups.values():
        total += sum(la.compute_cycles for la in parts) + parts[0].call_cycles
        if parts[0].parts > 1 and len(parts) < parts[0].parts:
            total += parts[0].split_call_cycles + sum(la.split_cycles for la in parts)
    return total


def reference_size(layers, a, b):
    raw = {}
    for la in layers[a:b + 1]:
        for e in la.tensors:
            raw[e[0]] = raw.get(e[0], 0) + e[1] if len(e) > 2 else e[1]
    return sum((n + 15) // 16 * 16 for n in raw.values())


split_spec = st.lists(st.tuples(st.integers(1, 3), st.integers(100, 9000), st.integers(1000, 300000),
                                st.integers(0, 3000), st.integers(0, 5000), st.integers(0, 500)), min_size=1, max_size=4)


@settings(max_examples=40, deadline=None)
@given(split_spec, st.floats(0.2, 1.0))
def test_split_layers_cost_and_size_every_span_exactly_and_division_stays_optimal(spec, frac):
    from firmware_sim.segments import _Compute, _Sizes, span_cycles
    layers = split_layers(spec)
    n = len(layers)
    C, S = _Compute(layers), _Sizes(layers)
    for a in range(n):
        for b in range(a, n):
            assert C(a, b) == span_cycles(layers, a, b) == reference_cycles(layers, a, b), (a, b)
            assert S(a, b) == reference_size(layers, a, b), (a, b)
    budget = max(int(reference_size(layers, 0, n - 1) * frac),
                 2 * max(reference_size(layers, i, i) for i in range(n)) + 32)
    plan = divide(layers, budget, load_cycles)
    # brute force over every cut set, with the reference size and cycles
    best = None
    for mask in range(1 << (n - 1)):
        cuts, start = [], 0
        for i in range(n - 1):
            if mask >> i & 1:
                cuts.append((start, i))
                start = i + 1
        cuts.append((start, n - 1))
        sizes = [reference_size(layers, a, b) for a, b in cuts]
        if any(x + y > budget for x, y in zip(sizes, sizes[1:])) or max(sizes) > budget:
            continue
        t = pipeline_bound([load_cycles(s) for s in sizes], [reference_cycles(layers, a, b) for a, b in cuts])
        best = t if best is None else min(best, t)
    assert plan.bound() == best
    assert run_abstract(plan, PROFILE, "overlap", contention=False)[0] == pipeline_cycles(plan) == plan.bound()


def test_split_operators_run_bit_exact_on_the_real_kernels():
    """KWS cut so finely that convolution, depthwise (input gathered) and FC layers all run
    as channel slices in several segments: outputs equal graph.run, cycles equal the
    cost-only pipeline, every byte of the weights moved once."""
    import numpy as np
    from firmware_sim.segments import is_partial, pieces
    from firmware_sim.sim import default_plan, segment_graph, simulate
    from pyembed.data import model_path
    from pyembed.model.load import load_model
    g = load_model(model_path("tiny_kws_dscnn_int8"))
    x = np.random.default_rng(2).integers(-128, 128, size=g.tensors[g.inputs[0]].shape, dtype=np.int8)
    plan, rmap = default_plan(g, PROFILE)
    seg = segment_graph(g, PROFILE, 600, order=plan.order, split_bytes=120, prefetch=False)
    partial = {seg.layers[f].name.split(":")[1].split("[")[0] for s in seg.segments
               for f, z in pieces(seg.layers, s.first, s.last) if is_partial(seg.layers, f, z)}
    assert partial == {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"}
    r = simulate(g, plan, PROFILE, x, segments=seg, region_map=rmap)
    ref = g.run(x)
    for a, b in zip(r.outputs, ref):
        assert np.array_equal(a, b), np.flatnonzero(a != b)
    assert r.cycles == run_abstract(seg, PROFILE, "overlap")[0]
    assert r.dma_bytes == sum(s.nbytes for s in seg.segments) >= g.weights_bytes
    assert r.split_work_bytes >= seg.work_bytes() > 0
    # the whole of a split operator costs what the unsplit operator costs
    from firmware_sim.cost import CostModel
    from firmware_sim.split import channel_groups, part_costs
    cm = CostModel(PROFILE)
    for op in g.operators:
        groups = channel_groups(g, op, 120)
        if groups:
            c = part_costs(cm, g, op, groups)
            assert c["call"] + sum(c["lin"]) == cm.op_cost(g, op).cycles


def test_split_plan_with_overlapping_slices_is_refused():
    import numpy as np
    from firmware_sim.sim import segment_graph, simulate
    from pyembed.data import model_path
    from pyembed.model.load import load_model
    g = load_model(model_path("tiny_ad_autoencoder_int8"))
    seg = segment_graph(g, PROFILE, int(g.weights_bytes * 0.3), split_bytes=g.weights_bytes // 32, prefetch=False)
    d = json.loads(seg.to_json())
    sliced = [(k, j) for k, s in enumerate(d["segments"]) for j, e in enumerate(s["tensors"]) if len(e) > 3]
    assert sliced
    k, j = sliced[1]
    e = d["segments"][k]["tensors"][j]
    if e[3] >= 4:
        e[3] -= 4                   # claims 4 channels its neighbour also loads
    else:
        e[4] += 4
    e[2] += 4 * g.tensors[e[0]].nbytes // g.tensors[e[0]].shape[e[5]]
    bad = SegmentPlan.from_dict(d)
    x = np.zeros(g.tensors[g.inputs[0]].shape, np.int8)
    with pytest.raises(PlanError, match="channel slices .* do not cover"):
        simulate(g, None, PROFILE, x, segments=bad)
