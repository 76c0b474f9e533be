"""Tests of the cooperative periodic scheduler (pyembed.schedule, pe_sched.c).

Oracles: the firmware simulator's cost model (estimates), brute force over
cut positions (balanced splitting), invariants checked on the dispatcher's
event trace (no overlap, guard, order, frames), the whole-model run of
pyembed.model.graph (outputs and every intermediate fetched across a window), and
a host C program built from the emitted header and pe_sched.c (same events
as the Python-driven run).
"""
import itertools
import os
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyembed.data import model_path
from pyembed.errors import ArgumentError, PlanError
from pyembed.model.load import load_model
from pyembed.schedule import (LOW, PRIORITY, Model, Overrun, Platform, ScheduleError, emit_header, plan_schedule,
                               rank_models, replan, run_kernels, simulate, state_bytes)
from pyembed.schedule.baselines import compare
from pyembed.schedule.plan import FLAG_CARRY, FLAG_FIRST, FLAG_LAST, _Splitter
from pyembed.schedule.run import EV_LATE, EV_MISS, EV_OVERRUN, EV_PREFETCH, dispatcher
from pyembed.schedule.table import EVENT_DTYPE

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def graphs():
    names = {"kws": "tiny_kws_dscnn_int8", "vww": "tiny_vww_mobilenetv1_96_int8", "ic": "tiny_ic_resnet8_int8",
             "ad": "tiny_ad_autoencoder_int8", "hello": "tflm_hello_world_int8"}
    return {k: load_model(model_path(v)) for k, v in names.items()}


def three(graphs, **kw):
    return [Model(graphs["kws"], "kws", latency_sensitive=True), Model(graphs["ic"], "ic"),
            Model(graphs["vww"], "vww", rate="max")]


@pytest.fixture(scope="module")
def sched(graphs):
    return plan_schedule(three(graphs), platform="stm32f746", window_ms=50)


@pytest.fixture(scope="module")
def long_run(sched):
    return simulate(sched, 3000, jitter=0.01, seed=3)


# ---------------------------------------------------------------------------
# planning


def test_estimates_come_from_the_simulator_cost_model(sched, graphs):
    from firmware_sim.cost import CostModel
    from firmware_sim.profiles import load_profile
    cm = CostModel(load_profile("stm32f746"))
    for name in ("kws", "ic", "vww"):
        mi = sched.model_index(name)
        want = [cm.op_cost(graphs[name], op).cycles for op in graphs[name].operators]
        assert sched.costs[mi].cycles[0] == want
    kws = [p for p in sched.items if p.kind == PRIORITY]
    assert len(kws) == sched.hyper_windows
    assert all(p.est == sum(sched.costs[p.model].cycles[0]) for p in kws)


def test_every_instance_covers_its_model_once_in_order(sched):
    inst = {}
    for k, p in enumerate(sched.items):
        if p.kind == LOW:
            inst.setdefault(p.instance, []).append(p)
    assert sched.n_instances == len(inst)
    for slot, pieces in inst.items():
        pieces.sort(key=lambda p: p.sub)
        n = sched.costs[pieces[0].model].n_ops
        assert [p.sub for p in pieces] == list(range(len(pieces)))
        assert pieces[0].first_op == 0 and pieces[-1].last_op == n
        assert pieces[0].flags & FLAG_FIRST and pieces[-1].flags & FLAG_LAST
        for a, b in zip(pieces, pieces[1:]):
            assert a.last_op == b.first_op
            # fill layer: fetch what the previous group stored; output layer: store it
            nbytes = sched.costs[a.model].cut_bytes[a.last_op]
            assert a.store == b.fetch == sched.platform.copy_cycles(nbytes) > 0


def test_each_window_fits_its_remaining_period(sched):
    W = sched.window_cycles
    for w in range(sched.hyper_windows):
        prio = sum(p.est for p in sched.items if p.phase == w and p.kind == PRIORITY)
        low = sum(p.est for p in sched.items if p.phase == w and p.kind == LOW)
        assert prio == sched.priority_cycles[0]
        assert prio + low <= W
        assert low <= int((W - prio) * sched.fill)
    # the split was needed: both low models are larger than one remaining period
    for name in ("ic", "vww"):
        mi = sched.model_index(name)
        assert sched.costs[mi].total(0) > sched.remaining_cycles[0]
        assert len({p.sub for p in sched.items if p.model == mi}) >= 3


def test_ranking_from_dependencies_latency_and_size(graphs):
    ms = [Model(graphs["vww"], "big"), Model(graphs["ad"], "small"), Model(graphs["kws"], "audio",
                                                                                latency_sensitive=True)]
    order, classes = rank_models(ms)
    assert [ms[i].name for i in order] == ["audio", "small", "big"]
    assert classes == ["low", "low", "priority"]
    # a model whose output a priority model consumes is a priority model, ranked first
    ms[0] = Model(graphs["vww"], "big", feeds=("audio",))
    order, classes = rank_models(ms)
    assert classes[0] == "priority" and ms[order[0]].name == "big"
    # user overrides
    ms = [Model(graphs["vww"], "big", rank=0), Model(graphs["ad"], "small", priority="low"),
          Model(graphs["kws"], "audio", latency_sensitive=True, priority="low")]
    order, classes = rank_models(ms)
    assert ms[order[0]].name == "big" and classes == ["priority", "low", "low"]
    with pytest.raises(ArgumentError, match="cycle"):
        rank_models([Model(graphs["ad"], "a", feeds=("b",)), Model(graphs["hello"], "b", feeds=("a",))])
    with pytest.raises(ArgumentError, match="not one of the models"):
        rank_models([Model(graphs["ad"], "a", feeds=("zz",))])


def _brute_force_minmax(sp, n_groups):
    best = None
    for cuts in itertools.combinations(range(sp.first + 1, sp.last), n_groups - 1):
        b = (sp.first,) + cuts + (sp.last,)
        v = max(sp.est(b[i], b[i + 1]) for i in range(n_groups))
        best = v if best is None else min(best, v)
    return best


@settings(max_examples=15, deadline=None)
@given(cap_share=st.floats(0.25, 0.9))
def test_balanced_split_is_optimal_against_brute_force(graphs, cap_share):
    plat = Platform.from_profile("stm32f746")
    from pyembed.schedule.workload import ModelCosts
    c = ModelCosts(Model(graphs["ic"], "ic"), plat)
    sp = _Splitter(c, plat, 0)
    biggest = max(sp.est(k, k + 1) for k in range(c.n_ops))
    cap = max(biggest, int(cap_share * c.total(0)))
    greedy = sp.fit([cap] * c.n_ops)
    bal = sp.balanced([cap] * c.n_ops)
    assert len(bal) == len(greedy)
    ests = [sp.est(a, b) for _, a, b in bal]
    assert max(ests) <= cap and max(ests) <= max(sp.est(a, b) for _, a, b in greedy)
    assert max(ests) == _brute_force_minmax(sp, len(bal))


def test_balanced_and_periodic_modes(graphs):
    ms = [Model(graphs["kws"], "kws", latency_sensitive=True), Model(graphs["vww"], "vww", rate=3)]
    s = plan_schedule(ms, platform="stm32f746", window_ms=50, split="balanced")
    vww = [p for p in s.items if p.kind == LOW]
    assert {p.phase % 3 for p in vww if p.sub == 0} == {0}      # an instance every 3 windows
    ests = [p.est for p in vww if p.instance == vww[0].instance]
    assert len(ests) == 3 and max(ests) - min(ests) < 0.25 * max(ests)


# ---------------------------------------------------------------------------
# the dispatcher on the timing model


def test_long_run_meets_the_goals(long_run, sched):
    f = long_run.summary()
    kws = f["priority"]["kws"]
    assert kws["runs"] == 3000 and kws["frames_missing"] == 0
    assert f["priority_deadline_misses"] == 0 and kws["late_starts"] == 0
    assert f["priority_jitter_pct_window"] <= 1.0
    assert f["utilisation"]["overall"] >= 0.90
    assert f["counters"]["dropped"] == 0 and f["counters"]["overruns"] == 0
    assert f["low"]["ic"]["results"] >= 3000 // 4 - 1 and f["low"]["vww"]["results"] > 0


def test_event_trace_invariants(long_run, sched):
    """Checked on the events, independently of the dispatcher's own flags."""
    e = long_run.ran()
    W = sched.window_cycles
    for u in range(sched.n_units):
        x = e[e["unit"] == u]
        assert (x["start"][1:] >= x["end"][:-1]).all()          # run to completion, one at a time
    kinds = np.array([p.kind for p in sched.items])[e["item"]]
    low = e[kinds == LOW]
    # guard: a low run started only if its estimate ended it by the next window start
    next_window = (low["start"] // W + 1) * W
    assert (low["start"] + low["est_cycles"] <= next_window).all()
    # priority runs start exactly at their release when nothing overran
    prio = e[kinds == PRIORITY]
    assert (prio["start"] == prio["release"]).all() and (prio["frame"] * W == prio["release"]).all()
    # sub-models of one instance: same frame, in order, previous one ended first
    by_inst = {}
    for ev in low:
        p = sched.items[int(ev["item"])]
        by_inst.setdefault((p.instance, int(ev["frame"])), []).append((p.sub, int(ev["start"]), int(ev["end"])))
    complete = 0
    for (slot, frame), runs in by_inst.items():
        runs.sort()
        assert [r[0] for r in runs] == list(range(len(runs)))
        assert all(b[1] >= a[2] for a, b in zip(runs, runs[1:]))
        assert runs[0][1] >= frame * W
        complete += 1
    assert complete > 100


def test_injected_overrun_is_reported_and_recovered(sched):
    # the raised estimate of the overrun sub-model ages back only in the
    # windows that hold it back, once per table period: give it 4 periods
    n = 40 + 5 * sched.hyper_windows + 50
    clean = simulate(sched, n, jitter=0.0)
    ic = sched.model_index("ic")
    ev = next(ev for ev in clean.ran(LOW) if sched.items[int(ev["item"])].model == ic
              and sched.items[int(ev["item"])].sub == 1 and ev["frame"] >= 40)
    frame = int(ev["frame"])
    run = simulate(sched, n, jitter=0.0, overruns=[Overrun("ic", 1, frame, 0.6)])
    lines = run.faults()
    over = [ln for ln in lines if "OVERRUN" in ln]
    assert len(over) == 1 and f"frame {frame}" in over[0] and "ic sub-model 1" in over[0] and "+60.0 %" in over[0]
    f = run.summary()
    # the priority model ran every frame; what the overrun did to it is reported, not dropped
    assert f["priority"]["kws"]["runs"] == n and f["priority"]["kws"]["frames_missing"] == 0
    late = run.ran(PRIORITY)
    late = late[(late["flags"] & EV_LATE) != 0]
    assert len(late) == 1
    took = int(ev["end"] - ev["start"])
    assert int(late[0]["start"] - late[0]["release"]) == int(ev["start"]) + int(round(took * 1.6)) - \
        int(late[0]["release"])
    assert any("LATE priority model kws" in ln for ln in lines)
    # the dispatcher got back on time: the last 50 windows are exactly the clean run's
    tail = run.ran()[run.ran()["start"] >= (n - 50) * sched.window_cycles]
    ctail = clean.ran()[clean.ran()["start"] >= (n - 50) * sched.window_cycles]
    assert len(ctail) > 50
    assert np.array_equal(tail[["item", "start", "end"]], ctail[["item", "start", "end"]])


@settings(max_examples=8, deadline=None)
@given(fraction=st.floats(0.10, 1.00), pick=st.integers(0, 10_000))
def test_overruns_10_to_100_percent(sched, fraction, pick):
    clean = simulate(sched, 120, jitter=0.0)
    low = clean.ran(LOW)
    ev = low[pick % len(low)]
    p = sched.items[int(ev["item"])]
    name = sched.models[p.model].name
    run = simulate(sched, 120, jitter=0.0, overruns=[Overrun(name, p.sub, int(ev["frame"]), fraction)])
    over = run.events[(run.events["flags"] & EV_OVERRUN) != 0]
    assert len(over) == 1 and int(over[0]["frame"]) == int(ev["frame"])
    took = int(over[0]["end"] - over[0]["start"])
    assert took == p.est + int(round(p.est * fraction))
    f = run.summary()
    assert f["priority"]["kws"]["runs"] == 120 and f["priority"]["kws"]["frames_missing"] == 0
    # a low run never starts when its (updated) estimate says it would end after the next release
    e = run.ran(LOW)
    W = sched.window_cycles
    assert (e["start"] + e["est_cycles"] <= (e["start"] // W + 1) * W).all()
    # every problem is in the report with its frame or window
    assert len(run.faults()) >= 1


def test_priority_larger_than_window(graphs):
    ms = [Model(graphs["kws"], "kws", latency_sensitive=True)]
    with pytest.raises(ScheduleError, match=r"kws on unit 0 need \d+ cycles .* more than the 20 ms window.*over by"):
        plan_schedule(ms, platform="stm32f746", window_ms=20)
    s = plan_schedule(ms, platform="stm32f746", window_ms=20, strict=False)
    assert s.problems and "every frame will miss" in s.problems[0]
    run = simulate(s, 30, jitter=0.0)
    e = run.ran(PRIORITY)
    assert list(e["frame"]) == list(range(len(e)))            # every frame, in order, none dropped
    assert ((e["flags"] & EV_MISS) != 0).all()
    misses = [ln for ln in run.faults() if "DEADLINE MISS" in ln]
    over = s.costs[0].total(0) - s.window_cycles
    assert "frame 0:" in misses[0] and f"{s.ms(over):.3f} ms after its deadline" in misses[0]
    assert "frame 5:" in misses[5] and f"{s.ms(6 * over):.3f} ms after its deadline" in misses[5]


def test_frame_rate_without_remaining_period(graphs):
    kws_ms = plan_schedule([Model(graphs["kws"], "kws")], platform="stm32f746").ms(
        sum(load_costs(graphs["kws"])))
    ms = [Model(graphs["kws"], "kws", latency_sensitive=True), Model(graphs["vww"], "vww")]
    with pytest.raises(ScheduleError, match="operator 0 .* of low-priority model 'vww' needs .* ms"):
        plan_schedule(ms, platform="stm32f746", window_ms=kws_ms + 0.5)
    s = plan_schedule(ms, platform="stm32f746", window_ms=kws_ms + 0.5, strict=False)
    assert len(s.problems) == 1 and all(p.kind == PRIORITY for p in s.items)
    # priority period + guard == window: nothing remains at all
    W, P = s.window_cycles, s.priority_cycles[0]
    guard_us = (W - P) / s.platform.clock_hz * 1e6
    with pytest.raises(ScheduleError, match="leaves no remaining period on unit 0 for low-priority model 'vww'"):
        plan_schedule(ms, platform="stm32f746", window_ms=kws_ms + 0.5, guard_us=guard_us)
    s = plan_schedule(ms, platform="stm32f746", window_ms=kws_ms + 0.5, guard_us=guard_us, strict=False)
    assert s.guard_cycles == W - P and "takes" in s.problems[0]
    # the priority model alone still runs every frame, on time
    run = simulate(s, 20, jitter=0.0)
    assert run.summary()["priority"]["kws"]["runs"] == 20 and run.summary()["priority_deadline_misses"] == 0


def load_costs(g):
    from pyembed.schedule.workload import layer_cycles
    return layer_cycles(g, Platform.from_profile("stm32f746").units[0])


def test_bad_arguments(graphs):
    ms = three(graphs)
    for kw, what in [({"window_ms": -1}, "window_ms"), ({"fill": 0}, "fill"), ({"split": "x"}, "split"),
                     ({"frame_rate": 0}, "frame_rate"), ({"max_hyper": 0}, "max_hyper"),
                     ({"overrun_tolerance": 2}, "overrun_tolerance")]:
        with pytest.raises(ArgumentError, match=what):
            plan_schedule(ms, platform="stm32f746", **kw)
    with pytest.raises(ArgumentError, match="rate"):
        Model(graphs["ic"], "ic", rate=0)
    with pytest.raises(ArgumentError, match="unit 3 does not exist"):
        plan_schedule([Model(graphs["ic"], "ic", units=(3,))], platform="stm32f746")
    with pytest.raises(ArgumentError, match="windows"):
        simulate(plan_schedule(ms[:1], platform="stm32f746"), 0)
    assert issubclass(ScheduleError, PlanError)


# ---------------------------------------------------------------------------
# real kernels and persistent buffers


def test_real_kernels_bit_exact_across_windows(sched):
    run = run_kernels(sched, 9, seed=5)
    host = run.checks["host"]
    assert run.checks["mismatches"] == []
    assert run.checks["fetches"] >= 8                     # intermediates fetched in later windows
    got = {(n, f) for n, f in run.results}
    assert {("kws", f) for f in range(9)} <= got
    assert ("ic", 0) in got and ("ic", 4) in got and ("vww", 0) in got
    for (name, frame), outs in run.results.items():
        g = sched.models[sched.model_index(name)].graph
        ref = g.run(host.inputs(name, frame)[0])
        for a, b in zip(outs, ref):
            assert np.array_equal(a, b), (name, frame, np.argwhere(a != b)[:5])
    assert run.summary()["priority_deadline_misses"] == 0


def test_persistent_buffer_check_can_fail(sched):
    """Negative control: scribbling on a persistent buffer between its store and
    its fetch is caught, by the stored copy and by the reference tensor."""
    state = {}

    def hook(host, idx, p):
        if p.kind == LOW and p.sub == 0 and sched.models[p.model].name == "ic" and not state.get("done"):
            b = host.buf_of[(p.model, p.instance, p.last_op)]
            host.persistent[b.offset] ^= 0x55
            state["done"] = True

    from pyembed.schedule.run import KernelHost, random_inputs
    host = KernelHost(sched, random_inputs(sched, 1), hook=hook)
    d = dispatcher(sched, work=host, prefetch=host.prefetch)
    d.run(3 * sched.window_cycles, EVENT_DTYPE)
    kinds = {m[0] for m in host.mismatches}
    assert "persistent buffer changed or lost before it was read" in kinds
    assert "fetched intermediate differs from the reference" in kinds


def test_real_kernels_with_an_overrun_keep_intermediates(sched):
    """An overrun pushes later sub-models out of their windows: the dispatcher
    drops the affected instances (reported) and whatever it delivers is still
    exact; no persistent buffer is overwritten while still needed."""
    vww = sched.model_index("vww")

    def cost(idx, p):
        if p.model == vww and p.sub == 0:
            return int(p.est * 2.0)
        return p.est

    run = run_kernels(sched, 10, seed=2, cost=cost)
    assert run.checks["mismatches"] == []
    host = run.checks["host"]
    for (name, frame), outs in run.results.items():
        ref = sched.models[sched.model_index(name)].graph.run(host.inputs(name, frame)[0])
        assert all(np.array_equal(a, b) for a, b in zip(outs, ref))
    f = run.summary()
    assert f["priority"]["kws"]["runs"] == 10 and f["priority"]["kws"]["frames_missing"] == 0
    assert f["counters"]["overruns"] >= 1
    assert any("OVERRUN vww sub-model 0" in ln for ln in run.faults())


# ---------------------------------------------------------------------------
# several units


@pytest.fixture(scope="module")
def dual(graphs):
    plat = Platform.from_profile("stm32f746", units=2)
    ms = [Model(graphs["kws"], "kws", latency_sensitive=True), Model(graphs["ic"], "ic", units=(0, 1)),
          Model(graphs["vww"], "vww", rate="max", units=(1,))]
    return plan_schedule(ms, platform=plat, window_ms=50)


def test_two_units_pipeline(dual):
    s = dual
    ic = s.model_index("ic")
    pieces = [p for p in s.items if p.model == ic]
    assert {p.unit for p in pieces} == {0, 1}
    assert any(p.flags & FLAG_CARRY for p in pieces)            # stage 1 carries into the next table period
    cross = [a for a in s.after if a.why == "inputs" and s.items[a.item].unit != s.items[a.on].unit]
    assert cross and all(a.handover == s.platform.copy_cycles(s.costs[ic].cut_bytes[s.items[a.item].first_op])
                         for a in cross)
    run = simulate(s, 600, jitter=0.01)
    f = run.summary()
    assert f["priority_deadline_misses"] == 0 and f["counters"]["dropped"] == 0
    assert f["low"]["ic"]["results"] >= 290 and f["low"]["vww"]["results"] > 0
    e = run.ran()
    for u in range(2):
        x = e[e["unit"] == u]
        assert (x["start"][1:] >= x["end"][:-1]).all()
    # the consumer stage starts only after the producer ended plus the hand-over
    ends = {}
    for ev in e:
        p = s.items[int(ev["item"])]
        if p.model == ic:
            ends[(int(ev["frame"]), p.sub)] = (int(ev["start"]), int(ev["end"]), p.unit)
    hand = max(a.handover for a in cross)
    checked = 0
    for (frame, sub), (start, end, unit) in ends.items():
        prev = ends.get((frame, sub - 1))
        if prev and prev[2] != unit:
            assert start >= prev[1] + hand
            checked += 1
    assert checked > 100
    # units run in parallel within a window
    busy = [set(int(t) // s.window_cycles for t in e[e["unit"] == u]["start"]) for u in range(2)]
    assert len(busy[0] & busy[1]) > 500


def test_cpu_plus_accelerator(graphs):
    plat = Platform.from_profile("stm32f746", units=2, cost_scales=[1.0, 0.25])
    ms = [Model(graphs["kws"], "kws", latency_sensitive=True), Model(graphs["ic"], "ic", units=(0, 1))]
    s = plan_schedule(ms, platform=plat, window_ms=50)
    ic = s.model_index("ic")
    full = s.costs[ic].cycles
    assert all(b == int(np.ceil(a * 0.25)) or b == max(1, int(np.ceil(a * 0.25))) for a, b in zip(full[0], full[1]))
    # the accelerator takes the heavy tail, so a result comes every window
    assert next(mp for mp in s.model_plans if mp.name == "ic").period == 1
    on_acc = sum(s.costs[ic].range_cycles(0, p.first_op, p.last_op) for p in s.items if p.model == ic and p.unit == 1)
    on_cpu = sum(s.costs[ic].range_cycles(0, p.first_op, p.last_op) for p in s.items if p.model == ic and p.unit == 0)
    assert on_acc > on_cpu
    f = simulate(s, 500).summary()
    assert f["priority_deadline_misses"] == 0 and f["low"]["ic"]["results"] >= 498


def test_two_units_real_kernels(dual):
    run = run_kernels(dual, 6, seed=4)
    assert run.checks["mismatches"] == [] and run.checks["fetches"] > 0
    host = run.checks["host"]
    assert any(n == "ic" for n, _ in run.results)
    for (name, frame), outs in run.results.items():
        ref = dual.models[dual.model_index(name)].graph.run(host.inputs(name, frame)[0])
        assert all(np.array_equal(a, b) for a, b in zip(outs, ref))


# ---------------------------------------------------------------------------
# online re-estimation and re-splitting


def test_measured_overruns_lead_to_a_resplit(sched):
    ic = sched.model_index("ic")
    slow = [int(p.est * 1.3) if p.model == ic else p.est for p in sched.items]
    run = simulate(sched, 200, jitter=0.0, cycles=slow)
    f = run.summary()
    assert f["priority_deadline_misses"] == 0 and f["counters"]["overruns"] > 0
    ests = run.estimates()
    # every sub-model's estimate went up to what it measured; one that was then
    # held back has aged half way back towards the plan for each window it waited
    raised = [ests[k] / p.est for k, p in enumerate(sched.items) if p.model == ic and p.kind == LOW]
    assert min(raised) > 1.1 and max(raised) == pytest.approx(1.3, rel=1e-3)
    assert f["counters"]["dropped"] > 0                      # the plan no longer holds
    s2 = replan(sched, run)
    assert s2.costs[ic].total(0) == pytest.approx(1.3 * sched.costs[ic].total(0), rel=0.01)
    old_groups = {(p.first_op, p.last_op) for p in sched.items if p.model == ic}
    new_groups = {(p.first_op, p.last_op) for p in s2.items if p.model == ic}
    assert new_groups != old_groups                           # cut again where the measured costs fit
    # the re-split plan holds when the model really is that slow (its estimates now are)
    run2 = simulate(s2, 200, jitter=0.0)
    f2 = run2.summary()
    assert f2["counters"]["overruns"] == 0 and f2["counters"]["dropped"] == 0
    assert f2["priority_deadline_misses"] == 0 and f2["low"]["ic"]["results"] > 0


# ---------------------------------------------------------------------------
# baselines


def test_fcfs_misses_and_rate_monotonic_does_not(long_run, sched):
    c = compare(sched, long_run)
    assert c["fcfs"]["priority_deadline_misses"] > 100
    assert c["rm_preemptive"]["priority_deadline_misses"] == 0
    # the same jobs ran: the low results counts agree with the split schedule's
    for name, v in long_run.low_latency().items():
        assert abs(c["rm_preemptive"]["low"][name]["results"] - v["results"]) <= 1


# ---------------------------------------------------------------------------
# the C header: what is simulated is what would be flashed

HOST_MAIN = r"""
#include <stdio.h>
#include <stdint.h>
#define PE_SCHEDULE_IMPLEMENTATION
#include "schedule.h"

static pe_status work(void *user, int32_t idx, const pe_sched_item *item, int64_t frame, uint64_t start,
                      uint32_t *cycles)
{
    (void)user; (void)idx; (void)frame; (void)start;
    *cycles = item->est_cycles;
    return PE_OK;
}

static pe_status prefetch(void *user, int32_t op, int32_t idx, const pe_sched_item *item, int64_t frame,
                          uint64_t now, uint64_t *ready_at)
{
    (void)user; (void)idx; (void)frame;
    if (op == PE_SCHED_PREFETCH_START) *ready_at = now + item->prefetch_cycles;
    return PE_OK;
}

static uint64_t state[(PE_SCHEDULE_STATE_BYTES + 7) / 8];
static pe_sched_event events[4096];

int main(void)
{
    pe_sched_work_fn fns[PE_SCHEDULE_N_WORK];
    pe_sched_state s;
    pe_context ctx;
    int32_t i, n = 0, size = 0;
    for (i = 0; i < PE_SCHEDULE_N_WORK; i++) fns[i] = work;
    ctx.buf = state; ctx.size = (int32_t)sizeof(state); ctx.stats = NULL;
    if (pe_sched_get_buffer_size(&pe_schedule_table, &size) != PE_OK || size != PE_SCHEDULE_STATE_BYTES) return 3;
    if (pe_sched_init(&ctx, &pe_schedule_table, fns, PE_SCHEDULE_N_WORK, NULL, &s) != PE_OK) return 2;
    if (pe_sched_set_prefetch(&s, prefetch) != PE_OK) return 4;
    if (pe_sched_run(&s, (uint64_t)WINDOWS * PE_SCHEDULE_WINDOW_CYCLES, events, 4096, &n) != PE_OK) return 1;
    for (i = 0; i < n; i++)
        printf("%d %d %u %llu %llu %lld\n", events[i].item, events[i].unit, events[i].flags,
               (unsigned long long)events[i].start, (unsigned long long)events[i].end, (long long)events[i].frame);
    return 0;
}
"""


@pytest.mark.parametrize("which", ["single", "dual"])
def test_emitted_header_compiles_and_runs_like_the_simulation(tmp_path, sched, dual, which):
    s = sched if which == "single" else dual
    text = emit_header(s, tmp_path / "schedule.h")
    assert "PE_SCHEDULE_WINDOW_CYCLES 10800000u" in text
    inc = os.path.join(REPO, "csrc", "include")
    src = os.path.join(REPO, "csrc", "src", "sched", "pe_sched.c")
    (tmp_path / "main.c").write_text(HOST_MAIN)
    windows = 60
    exe = tmp_path / "sched_host"
    cmd = ["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", f"-DWINDOWS={windows}", f"-I{inc}",
           f"-I{tmp_path}", str(tmp_path / "main.c"), src, "-o", str(exe)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split("\n")
    rows = [tuple(int(x) for x in ln.split()) for ln in out if ln.strip()]
    run = simulate(s, windows, jitter=0.0)
    want = [(int(e["item"]), int(e["unit"]), int(e["flags"]), int(e["start"]), int(e["end"]), int(e["frame"]))
            for e in run.events]
    assert rows == want
    assert state_bytes(s) == run.dispatcher.state_bytes()
    if shutil.which("arm-none-eabi-gcc"):
        (tmp_path / "fw.c").write_text('#define PE_SCHEDULE_IMPLEMENTATION\n#include "schedule.h"\n'
                                       "const pe_sched_table *table_for_flash(void);\n"
                                       "const pe_sched_table *table_for_flash(void) { return &pe_schedule_table; }\n")
        subprocess.run(["arm-none-eabi-gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic",
                        "-mcpu=cortex-m4", "-mthumb", "-O2", "-ffreestanding", f"-I{inc}", f"-I{tmp_path}", "-c",
                        str(tmp_path / "fw.c"), "-o", str(tmp_path / "fw.o")], check=True, capture_output=True,
                       text=True)


def test_trace_and_gantt(tmp_path, long_run):
    import json
    tr = long_run.trace(0, 4)
    path = tr.write(tmp_path / "t.json")
    data = json.load(open(path))
    spans = [e for e in data["traceEvents"] if e.get("ph") == "X"]
    ran = long_run.ran()
    n = int((ran["start"] < 4 * long_run.schedule.window_cycles).sum())
    pre = long_run.events[(long_run.events["flags"] & EV_PREFETCH) != 0]
    n_pre = int((pre["start"] < 4 * long_run.schedule.window_cycles).sum())
    assert n_pre > 0 and len(spans) == n + n_pre and {e["cat"] for e in spans} == {"priority", "low", "dma"}
    png = long_run.plot_gantt(tmp_path / "g.png", 0, 4)
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------------------
# on the firmware simulator: event core, simulated RAM, write watch


@pytest.mark.parametrize("which", ["single", "dual"])
def test_on_the_simulated_mcu(sched, dual, which):
    from pyembed.schedule.mcu import run_on_mcu
    s = sched if which == "single" else dual
    windows = 8 if which == "single" else 12
    run = run_on_mcu(s, windows, seed=6)
    ref = simulate(s, windows, jitter=0.0)
    key = ["item", "unit", "flags", "start", "end", "frame"]
    assert np.array_equal(np.sort(run.events[key], order=["start", "unit"]),
                          np.sort(ref.events[key], order=["start", "unit"]))
    assert run.checks["mismatches"] == [] and run.checks["fetches"] > 0
    host = run.checks["host"]
    for (name, frame), outs in run.results.items():
        want = s.models[s.model_index(name)].graph.run(host.inputs(name, frame)[0])
        assert all(np.array_equal(a, b) for a, b in zip(outs, want))
    used = run.layout["used"]
    for r, n in used.items():
        assert n <= s.platform.profile.region(r).size


def test_mcu_write_watch_catches_a_stray_write(sched):
    from pyembed.errors import SimulationFault
    from pyembed.schedule.mcu import run_on_mcu
    ic = sched.model_index("ic")
    victim = next(b for b in sched.buffers if b.model == ic)

    def hook(host, idx, p):
        if p.kind == PRIORITY:
            # the priority model scribbles on a persistent buffer it does not own
            host.persistent[victim.offset + 3] ^= 0xFF

    with pytest.raises(SimulationFault, match=f"wrote outside its planned buffers.*persistent {victim.name}"):
        run_on_mcu(sched, 2, hook=hook)


def test_mcu_memory_that_does_not_fit(sched):
    from pyembed.schedule.mcu import run_on_mcu
    with pytest.raises(PlanError, match=r"does not fit stm32f746.*dtcm.*B missing"):
        run_on_mcu(sched, 1, region="dtcm")


def test_cli_command(tmp_path):
    import json
    from click.testing import CliRunner
    from pyembed.cli.schedule import schedule_command
    out = tmp_path / "s"
    r = CliRunner().invoke(schedule_command, ["--priority", "tiny_kws_dscnn_int8", "--low", "tiny_ic_resnet8_int8",
                                              "--low", "tiny_vww_mobilenetv1_96_int8:max", "--windows", "40",
                                              "--c-glue", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "0 priority deadline misses" in r.output
    d = json.load(open(out / "schedule.json"))
    assert d["run"]["priority"]["tiny_kws_dscnn_int8"]["runs"] == 40
    assert {"schedule.h", "gantt.png", "trace.json", "glue"} <= set(os.listdir(out))
    assert {"pe_schedule_glue.c", "pe_schedule_main.c", "tiny_kws_dscnn_int8"} <= set(os.listdir(out / "glue"))
    r = CliRunner().invoke(schedule_command, ["--priority", "tiny_kws_dscnn_int8", "--window-ms", "10", "-o",
                                              str(out)])
    assert isinstance(r.exception, ScheduleError) and "over by" in str(r.exception)
    r = CliRunner().invoke(schedule_command, ["--priority", "tiny_kws_dscnn_int8", "--low", "tiny_ic_resnet8_int8:x",
                                              "-o", str(out)])
    assert isinstance(r.exception, ArgumentError)


# ---------------------------------------------------------------------------
# prefetch of intermediates during the priority period


def test_prefetch_runs_during_the_priority_period_and_saves_low_time(sched, long_run, graphs):
    from pyembed.schedule.plan import FLAG_PREFETCH
    sync = plan_schedule(three(graphs), platform="stm32f746", window_ms=50, prefetch=False)
    # the same split; prefetched groups lose exactly their fetch from the estimate
    assert [(p.model, p.phase, p.first_op, p.last_op) for p in sync.items] == \
        [(p.model, p.phase, p.first_op, p.last_op) for p in sched.items]
    pre = [k for k, p in enumerate(sched.items) if p.flags & FLAG_PREFETCH]
    assert pre and not any(p.prefetch for p in sync.items)
    for k in pre:
        p, q = sched.items[k], sync.items[k]
        assert p.est == q.est - q.fetch and p.prefetch_cycles >= q.fetch > 0 and p.first_op > 0
    # in the run: every prefetch starts with a priority run on its unit, lands
    # before that run ends, and its sub-model starts after it has landed
    ev = long_run.events
    ran = long_run.ran()
    prio = {(int(e["unit"]), int(e["start"])): e for e in long_run.ran(PRIORITY)}
    starts = {}
    for e in ran:
        starts.setdefault(int(e["item"]), []).append(int(e["start"]))
    pev = ev[(ev["flags"] & EV_PREFETCH) != 0]
    assert len(pev) > 100
    for e in pev:
        pr = prio[(int(e["unit"]), int(e["start"]))]
        assert e["end"] == e["start"] and e["wake"] <= pr["end"]
        nxt = min(s for s in starts[int(e["item"])] if s >= int(e["start"]))
        assert nxt >= int(e["wake"])
    st = long_run.prefetch_stats()
    assert st["late"] == 0 and st["waited"] == 0 and st["overlapped"] == len(pev)
    # against synchronous fetches: the same windows, no misses, less low time per result
    srun = simulate(sync, long_run.windows, jitter=0.01, seed=3)
    a, b = long_run.summary(), srun.summary()
    assert a["priority_deadline_misses"] == b["priority_deadline_misses"] == 0
    fetch_of = np.array([q.fetch if p.prefetch else 0 for p, q in zip(sched.items, sync.items)])
    assert st["low_cycles_saved"] == int(fetch_of[long_run.ran(LOW)["item"]].sum()) > 0
    for name in ("ic", "vww"):
        assert a["low"][name]["results"] >= b["low"][name]["results"] - 1


def test_slow_prefetch_is_reported_and_its_sub_model_waits(sched):
    """A DMA 300x slower than the profile declares: the largest prefetch is
    still running when its sub-model is due; the dispatcher holds the
    sub-model back until the bytes landed (the simulated MCU faults any
    sub-model that starts earlier) and reports it; the results stay exact."""
    from pyembed.errors import SimulationFault
    from pyembed.schedule.mcu import run_on_mcu
    from pyembed.schedule.run import EV_PREFETCH_LATE
    run = run_on_mcu(sched, 6, dma_bandwidth_scale=1 / 300, dma_late="stall")
    late = run.events[(run.events["flags"] & EV_PREFETCH_LATE) != 0]
    assert len(late) >= 1 and run.counters["prefetch_late"] == len(late)
    ran = run.ran()
    for e in late:
        nxt = ran[(ran["item"] == e["item"]) & (ran["start"] >= e["start"])]
        dma = [t for t in run.dma if t.start is not None and t.start <= int(e["start"])]
        assert len(nxt) and int(nxt["start"][0]) >= max(t.end for t in dma) > int(e["start"])
    assert any("PREFETCH LATE" in ln for ln in run.faults())
    assert run.checks["mismatches"] == [] and run.checks["prefetches"] > 0
    with pytest.raises(SimulationFault, match="DMA transfer prefetch .* still running at its deadline"):
        run_on_mcu(sched, 2, dma_bandwidth_scale=1 / 300, dma_late="fault")


def test_measured_jitter_on_the_simulator_comes_from_dma_contention(sched):
    """With bus contention on, a priority run that a prefetch overlaps is
    stretched by the profile's stall per word moved (the transfers end well
    inside it), every other run takes exactly its charge: the measured
    completion jitter is that stretch."""
    from pyembed.schedule.mcu import run_on_mcu
    run = run_on_mcu(sched, 8, contention=True)
    stall = sched.platform.profile.dma.cpu_stall_per_word
    ev = run.events
    pre = ev[(ev["flags"] & EV_PREFETCH) != 0]
    stretched, plain = [], 0
    for e in run.ran(PRIORITY):
        took = int(e["end"] - e["start"])
        est = sched.items[int(e["item"])].est
        starts = pre[(pre["start"] == e["start"]) & (pre["unit"] == e["unit"])]
        if len(starts):
            nbytes = sum(t.nbytes for t in run.dma if t.requested is not None and e["start"] <= t.requested < e["end"])
            assert abs((took - est) - stall * nbytes / 4) <= 2, (took - est, nbytes)
            stretched.append(took - est)
        else:
            assert took == est
            plain += 1
    assert stretched and max(stretched) > 0 and run.checks["contention_cycles"] == sum(stretched)
    # every priority run starts at its release here: completion jitter = spread of the stretches
    spread = max(stretched) - (0 if plain else min(stretched))
    assert run.priority_stats()["kws"]["jitter_ms"] == pytest.approx(sched.ms(spread))


def test_models_without_units_spread_over_the_units(graphs):
    """--units 2 with no unit named: the low models go to the least loaded unit, so the second
    unit works and the low models return more results than on one unit; an idle unit is said."""
    def plan(n):
        ms = [Model(graphs["kws"], "kws", latency_sensitive=True), Model(graphs["ic"], "ic"),
              Model(graphs["vww"], "vww", rate="max")]
        return plan_schedule(ms, platform=Platform.from_profile("stm32f746", units=n), window_ms=50)
    one, two = plan(1), plan(2)
    assert {p.unit for p in two.items} == {0, 1}
    assert not two.notes
    units = {mp.name: mp.units for mp in two.model_plans}
    assert units["kws"] == (0,) and units["ic"] != units["vww"]
    r1, r2 = simulate(one, 200).summary(), simulate(two, 200).summary()
    assert r2["priority_deadline_misses"] == 0
    for name in ("ic", "vww"):
        assert r2["low"][name]["results"] > r1["low"][name]["results"], (name, r1["low"], r2["low"])
    lone = plan_schedule([Model(graphs["kws"], "kws", latency_sensitive=True)],
                         platform=Platform.from_profile("stm32f746", units=2), window_ms=50)
    assert lone.notes and "unit 1 has no work" in lone.notes[0] and "note: unit 1" in lone.describe()


def test_background_model_fills_the_other_units_leftover(graphs):
    """The bundled mix on two units with no unit named: VWW (back to back) goes to unit 0 beside KWS and
    ResNet-8 to unit 1, whose windows its large operators cannot fill; VWW also runs whole instances
    (each on one unit) in what ResNet-8 leaves there, so unit 1's planned and simulated utilisation
    rise and VWW returns more results, with no priority miss (against the same plan with spread=False).
    A model pinned with @UNIT never moves."""
    def plan(vww_units=None, spread=True):
        ms = [Model(graphs["kws"], "kws", latency_sensitive=True), Model(graphs["ic"], "ic"),
              Model(graphs["vww"], "vww", rate="max", units=vww_units)]
        return plan_schedule(ms, platform=Platform.from_profile("stm32f746", units=2), window_ms=50, spread=spread)
    free, alone = plan(), plan(spread=False)
    mp = {m.name: m for m in free.model_plans}
    assert mp["vww"].units == (0,) and mp["ic"].units == (1,) and set(mp["vww"].fills) == {1}
    assert all(not m.fills for m in plan((0,)).model_plans) and all(not m.fills for m in alone.model_plans)
    vww = [p for p in free.items if p.kind == LOW and free.models[p.model].name == "vww"]
    per_instance = {}
    for p in vww:
        per_instance.setdefault(p.instance, set()).add(p.unit)
    assert all(len(u) == 1 for u in per_instance.values())               # each instance on one unit
    assert sum(u == {1} for u in per_instance.values()) == mp["vww"].fills[1]
    assert "on unit 1, in its leftover" in free.describe()
    assert free.hyper_windows == alone.hyper_windows
    r_free, r_alone = simulate(free, 1000).summary(), simulate(alone, 1000).summary()
    assert r_free["priority_deadline_misses"] == 0
    assert r_free["low"]["vww"]["results"] > r_alone["low"]["vww"]["results"]
    assert r_free["low"]["ic"]["results"] == r_alone["low"]["ic"]["results"]
    assert r_free["utilisation"]["per_unit"][1] > r_alone["utilisation"]["per_unit"][1]


def test_cli_unit_suffix():
    from pyembed.cli.schedule import _model
    m = _model("tiny_ic_resnet8_int8:4@0+1", priority="low")
    assert m.units == (0, 1) and m.rate == 4
    with pytest.raises(ArgumentError, match="after '@'"):
        _model("tiny_ic_resnet8_int8@x", priority="low")
