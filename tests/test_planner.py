"""Static memory planner: algorithms against the no-reuse oracle and the
liveness bound, the independent checker, regions and bad input."""
import importlib.util
import os
import types

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pyembed.errors import PlanError
from pyembed.planner import (ALGORITHMS, Plan, Problem, Region, build_problem, check_order, check_plan,
                             plan_graph, plan_problem, search_execution_order)
from pyembed.planner.core import align_up

HAVE_ORTOOLS = importlib.util.find_spec("ortools") is not None
HEURISTICS = ["linear", "greedy_size", "greedy_conflicts", "order_search"]
ALL = HEURISTICS + (["cpsat"] if HAVE_ORTOOLS else [])


def brute_bytes_shared(plan):
    """Reference for the checker: pairs of (live together, sharing a byte),
    found by painting every byte of every step."""
    bad = set()
    for s in range(plan.problem.num_steps):
        owner = {}
        for i, b in enumerate(plan.buffers):
            if not b.lives_at(s):
                continue
            r, off = plan.placement[i]
            for x in range(off, off + b.size):
                if (r, x) in owner:
                    bad.add((owner[(r, x)], i))
                owner[(r, x)] = i
    return bad


problems = st.lists(
    st.tuples(st.integers(0, 300), st.integers(0, 9), st.integers(0, 4)),
    min_size=1, max_size=14,
).map(lambda rows: _problem(rows))


def _problem(rows):
    p = Problem()
    for size, first, length in rows:
        p.add_buffer(size, first, first + length)
    return p


@pytest.mark.parametrize("alg", ALL)
@settings(max_examples=40, deadline=None)
@given(p=problems)
def test_every_algorithm_gives_a_valid_plan_between_bound_and_no_reuse(alg, p):
    plan = plan_problem(p, algorithm=alg, time_limit=2.0)
    assert brute_bytes_shared(plan) == set()
    check_plan(plan)
    linear_total = sum(b.aligned_size for b in p.buffers)
    assert p.lower_bound() <= plan.arena_size <= linear_total
    assert all(off % 16 == 0 for _, off in plan.placement)


@settings(max_examples=30, deadline=None)
@given(p=problems)
def test_lower_bound_is_the_largest_live_sum(p):
    # independent of Problem.live_bytes: sum per step by brute force
    steps = range(max(b.last for b in p.buffers) + 1)
    want = max(sum(align_up(b.size, 16) for b in p.buffers if b.first <= s <= b.last) for s in steps)
    assert p.lower_bound() == want


@pytest.mark.skipif(not HAVE_ORTOOLS, reason="OR-Tools not installed")
@settings(max_examples=25, deadline=None)
@given(p=problems)
def test_cpsat_is_never_worse_than_the_heuristics(p):
    cp = plan_problem(p, algorithm="cpsat", time_limit=5.0)
    for alg in HEURISTICS:
        assert cp.arena_size <= plan_problem(p, algorithm=alg).arena_size


@pytest.mark.skipif(not HAVE_ORTOOLS, reason="OR-Tools not installed")
def test_cpsat_beats_greedy_on_a_known_trap():
    # greedy by size puts the two long 32 B buffers at 0 and 32; the short
    # ones then cannot share. Optimal: stack so the step peaks coincide.
    p = Problem()
    for size, first, last in [(48, 0, 1), (32, 1, 2), (32, 2, 3), (48, 3, 4), (16, 0, 4)]:
        p.add_buffer(size, first, last)
    best = plan_problem(p, algorithm="cpsat").arena_size
    assert best == p.lower_bound()
    assert best <= plan_problem(p, algorithm="greedy_size").arena_size


def test_checker_catches_two_live_buffers_sharing_bytes():
    p = Problem()
    a = p.add_buffer(64, 0, 2, name="a")
    b = p.add_buffer(64, 1, 3, name="b")
    plan = plan_problem(p, algorithm="greedy_size")
    plan.placement[b] = (0, plan.placement[a][1] + 16)  # edit by hand
    with pytest.raises(PlanError, match="share bytes"):
        check_plan(plan)


def test_checker_allows_disjoint_lifetimes_at_the_same_offset():
    p = Problem()
    p.add_buffer(64, 0, 1)
    p.add_buffer(64, 2, 3)
    plan = Plan(p, [Region("ram", 64)], [(0, 0), (0, 0)])
    check_plan(plan)
    assert plan.arena_size == 64


def test_checker_accepts_a_proven_overlap_only_within_its_delta():
    p = Problem()
    src = p.add_buffer(256, 0, 1, name="in")
    dst = p.add_buffer(256, 1, 2, name="out")
    p.allow_overlap(src, dst, max_delta=-32, step=1, proven=True)
    ok = Plan(p, [Region("ram", None)], [(0, 64), (0, 32)])
    check_plan(ok)
    too_far = Plan(p, [Region("ram", None)], [(0, 64), (0, 48)])
    with pytest.raises(PlanError, match="share bytes"):
        check_plan(too_far)
    p.overlaps[0] = p.overlaps[0].__class__(src, dst, -32, 1, proven=False)
    with pytest.raises(PlanError):
        check_plan(ok)


@pytest.mark.parametrize("alg", ["greedy_size", "order_search"] + (["cpsat"] if HAVE_ORTOOLS else []))
def test_overlap_allowance_lowers_the_arena_below_the_bound(alg):
    p = Problem()
    a = p.add_buffer(1024, 0, 1, name="in")
    b = p.add_buffer(1024, 1, 2, name="out")
    p.allow_overlap(a, b, max_delta=-128, step=1, proven=True)
    plan = plan_problem(p, algorithm=alg)
    assert p.lower_bound() == 2048
    assert plan.arena_size == 1024 + 128
    assert brute_bytes_shared(plan) == {(a, b)}


def test_regions_fill_in_order_and_report_missing_bytes():
    p = Problem()
    for _ in range(3):
        p.add_buffer(100, 0, 0)  # all live together: 3 * 112 B
    plan = plan_problem(p, [Region("dtcm", 224), Region("sram", 1000)], algorithm="greedy_size")
    used = plan.region_used()
    assert used == {"dtcm": 224, "sram": 112}
    with pytest.raises(PlanError, match=r"112 B missing"):
        plan_problem(p, [Region("dtcm", 112), Region("sram", 112)], algorithm="greedy_size")


@pytest.mark.parametrize("alg", ALL)
def test_plan_that_does_not_fit_says_how_many_bytes_are_missing(alg):
    p = Problem()
    p.add_buffer(100, 0, 1)
    p.add_buffer(200, 1, 2)  # live together at step 1: 112 + 208 = 320 B
    assert plan_problem(p, [Region("ram", 320)], algorithm=alg).arena_size == 320
    with pytest.raises(PlanError, match=r"\b16 B missing"):
        plan_problem(p, [Region("ram", 304)], algorithm=alg)


def test_buffer_larger_than_every_region():
    p = Problem()
    p.add_buffer(5000, 0, 0, name="big")
    with pytest.raises(PlanError, match=r"big .* larger than every region.*sram, has 4096 B \(912 B missing\)"):
        plan_problem(p, [Region("dtcm", 1024), Region("sram", 4096)])


def test_empty_region_list():
    p = Problem()
    p.add_buffer(16, 0, 0)
    with pytest.raises(PlanError, match="no RAM region"):
        plan_problem(p, [])


def test_pinned_buffer_stays_in_its_region():
    p = Problem()
    p.add_buffer(64, 0, 1, region="sram")
    p.add_buffer(64, 0, 1)
    plan = plan_problem(p, [Region("dtcm", 1024), Region("sram", 1024)], algorithm="greedy_size")
    assert plan.region_of(0).name == "sram" and plan.region_of(1).name == "dtcm"


# -- graphs ---------------------------------------------------------------------

def fake_graph(tensors, ops, inputs, outputs, aliases=None, scratch=None):
    """A graph shaped like pyembed.graph.Graph: tensors (nbytes, constant?),
    ops (type, inputs, outputs)."""
    T = [types.SimpleNamespace(index=i, name=f"t{i}", nbytes=n, is_constant=c, is_variable=False,
                               shape=(n,), dtype=np.dtype(np.int8)) for i, (n, c) in enumerate(tensors)]
    O = [types.SimpleNamespace(index=k, type=t, inputs=list(i), outputs=list(o), params={},
                               scratch_bytes=(scratch or {}).get(k, 0), macs=0, supported=True)
         for k, (t, i, o) in enumerate(ops)]
    return types.SimpleNamespace(name="fake", tensors=T, operators=O, inputs=inputs, outputs=outputs,
                                 aliases=aliases or {}, unsupported=[])


def test_graph_liveness_aliases_scratch_and_flash():
    g = fake_graph([(100, False), (50, True), (200, False), (200, False), (20, False)],
                   [("CONV_2D", [0, 1], [2]), ("RESHAPE", [2], [3]), ("FULLY_CONNECTED", [3, 1], [4])],
                   inputs=[0], outputs=[4], aliases={3: 2}, scratch={0: 64})
    p, tb, flash = build_problem(g)
    names = {p.buffers[b].tensors[0]: p.buffers[b] for b in set(tb.values())}
    assert tb[3] == tb[2]                       # RESHAPE shares its input's buffer
    assert (names[2].first, names[2].last) == (0, 2)
    assert (names[0].first, names[0].last, names[0].kind) == (0, 0, "input")
    assert (names[4].first, names[4].last, names[4].kind) == (2, 2, "output")
    scratch = [b for b in p.buffers if b.kind == "scratch"]
    assert [(b.size, b.first, b.last, b.op) for b in scratch] == [(64, 0, 0, 0)]
    assert [(f.tensor, f.size) for f in flash] == [(1, 50)]
    plan = plan_graph(g)
    assert plan.tensor_offset(1) is None and plan.tensor_offset(3) == plan.tensor_offset(2)


def test_graph_with_a_cycle_is_rejected():
    g = fake_graph([(16, False)] * 3, [("ADD", [0, 2], [1]), ("ADD", [1], [2])], inputs=[0], outputs=[2])
    with pytest.raises(PlanError, match="cycle"):
        plan_graph(g)


def test_invalid_execution_order_is_rejected():
    g = fake_graph([(16, False)] * 3, [("ADD", [0], [1]), ("ADD", [1], [2])], inputs=[0], outputs=[2])
    with pytest.raises(PlanError, match="before operator 0"):
        check_order(g, [1, 0])
    with pytest.raises(PlanError, match="exactly once"):
        check_order(g, [0, 0])


def test_order_search_finds_the_cheaper_branch_order():
    # x -> A (big, read late) and x -> B -> C (small chain); the model lists the
    # big branch first, so it stays live while the chain runs
    g = fake_graph([(64, False), (1024, False), (512, False), (16, False), (16, False)],
                   [("A", [0], [1]), ("B", [0], [2]), ("C", [2], [3]), ("ADD", [1, 3], [4])],
                   inputs=[0], outputs=[4])
    given_bound = build_problem(g)[0].lower_bound()
    order, bound = search_execution_order(g, time_limit=0.5)
    check_order(g, order)
    assert bound < given_bound
    assert bound == build_problem(g, order)[0].lower_bound()

