"""Regions of the same speed are one pool (issue #29): the planner minimises
the sum of their tops instead of filling the first one up, so a plan that fits
one memory is not split over two equally fast ones; regions of different
speed still fill the fast one first."""
import dataclasses
import importlib.util
import json
import os

import pytest

from pyembed.errors import PlanError
from pyembed.plan import Problem, Region, plan_problem
from pyembed.plan import algorithms as A
from pyembed.plan.planjson import plan_from_dict, plan_to_dict

HAVE_ORTOOLS = importlib.util.find_spec("ortools") is not None
PLACERS = ["greedy_size", "greedy_conflicts", "order_search", "auto"] + (["cpsat"] if HAVE_ORTOOLS else [])
SAME, SLOW = (0, 0, 100_000_000), (1, 1, 50_000_000)


def _split_problem():
    """x (64 B) and y (16 B) live at step 0, z (80 B) alone at step 1: the
    liveness bound is 80 B. With a first region of 64 B, first fit puts z
    (too big for it) in the second region, then x in the first and y, which
    no longer fits beside x, in the second below z's slot: 64 + 80 = 144 B
    over both regions, where the second one alone holds all of it in 80 B."""
    p = Problem()
    x = p.add_buffer(64, 0, 0, name="x")
    y = p.add_buffer(16, 0, 0, name="y")
    z = p.add_buffer(80, 1, 1, name="z")
    return p, (x, y, z)


def _regions(fast_speed, big_speed):
    return [Region("fast", 64, speed=fast_speed), Region("big", 4096, speed=big_speed)]


@pytest.mark.parametrize("alg", PLACERS)
def test_equal_speed_regions_keep_the_single_memory_packing(alg):
    p, _ = _split_problem()
    plan = plan_problem(p, _regions(SAME, SAME), algorithm=alg, time_limit=1.0)
    used = plan.region_used()
    # the pool's total is what counts: the one-memory packing at the bound, not 64 + 80
    assert plan.arena_size == p.lower_bound() == 80
    assert used == {"fast": 0, "big": 80}


def _fast_first_problem():
    """x (64 B) and y (16 B) live at step 0, z (48 B) alone at step 1, with a
    first region of 64 B: x and z can take turns in it, y cannot join x."""
    p = Problem()
    x = p.add_buffer(64, 0, 0, name="x")
    y = p.add_buffer(16, 0, 0, name="y")
    z = p.add_buffer(48, 1, 1, name="z")
    return p, (x, y, z)


@pytest.mark.parametrize("alg", PLACERS)
def test_different_speeds_fill_the_fast_region_first(alg):
    """With a slower second region (or regions without a speed: a class
    each, as before) bytes there weigh most: it holds only y, which cannot
    live beside x in the fast one, and the fast one holds x and then z. First
    fit tries only the given region order."""
    p, (x, y, z) = _fast_first_problem()
    for fast_speed, big_speed in ((SAME, SLOW), (None, None)):
        regions = _regions(fast_speed, big_speed)
        assert A.region_orders(regions) == [[0, 1]]
        plan = plan_problem(p, regions, algorithm=alg, time_limit=1.0)
        assert plan.region_used() == {"fast": p.buffers[x].size, "big": p.buffers[y].size}, fast_speed
        assert [plan.region_of(i).name for i in (x, y, z)] == ["fast", "big", "fast"]
    # the split problem: z fits only the slow one; then the fewest bytes there is z's 80 B, and
    # the planner must not make the slow region's top higher to use the fast one more
    p, (x, y, z) = _split_problem()
    plan = plan_problem(p, _regions(SAME, SLOW), algorithm=alg, time_limit=1.0)
    assert plan.region_used()["big"] == p.buffers[z].size


def test_the_key_counts_a_class_as_the_sum_of_its_regions():
    p, (x, y, z) = _split_problem()
    split = [(0, 0), (1, 0), (1, 0)]       # x in fast; y and z share big's first bytes (never live together)
    alone = [(1, 0), (1, 64), (1, 0)]
    same = _regions(SAME, SAME)
    assert A.class_totals(p, same, split) == [144] and A.class_totals(p, same, alone) == [80]
    assert A.placement_key(p, same, alone) < A.placement_key(p, same, split)
    for differ in (_regions(SAME, SLOW), _regions(None, None)):   # a class each: the tops, slow region first
        for placement in (split, alone):
            assert A.placement_key(p, differ, placement) == tuple(reversed(A.region_tops(p, differ, placement)))
    # equal sums: the placement with fewer bytes in the later region wins (fast first)
    p2 = Problem()
    p2.add_buffer(32, 0, 0)
    assert A.placement_key(p2, same, [(0, 0)]) < A.placement_key(p2, same, [(1, 0)])


def test_speed_classes_and_region_orders():
    regs = [Region("a", 10, speed=SAME), Region("b", 10, speed=SLOW), Region("c", 10, speed=SAME),
            Region("d", 10)]
    assert A.speed_classes(regs) == [0, 1, 0, 2]
    assert A.speed_classes([Region("e", 1), Region("f", 1)]) == [0, 1]     # no speed: a class each
    orders = A.region_orders(regs)
    assert orders[0] == [0, 1, 2, 3]
    # a alone, c alone (the slow class and d keep their place), and c before a
    assert [0, 1, 3] in orders and [1, 2, 3] in orders and [2, 1, 0, 3] in orders
    assert len(orders) == len({tuple(o) for o in orders})
    assert A.region_orders([Region("r", 10)]) == [[0]]


def test_a_pinned_buffer_stays_in_its_region():
    p, (x, y, z) = _split_problem()
    p.buffers[y] = dataclasses.replace(p.buffers[y], region="fast")
    plan = plan_problem(p, _regions(SAME, SAME), algorithm="order_search", time_limit=1.0)
    assert plan.region_of(y).name == "fast"
    # x and z in big: the pool holds 16 + 80 B, the least possible with y pinned apart
    assert plan.region_used() == {"fast": 16, "big": 80}


def test_speed_survives_plan_json_and_bad_speed_is_refused():
    p, _ = _split_problem()
    plan = plan_problem(p, _regions(SAME, SAME), algorithm="greedy_size")
    back = plan_from_dict(json.loads(json.dumps(plan_to_dict(plan))))
    assert [r.speed for r in back.regions] == [SAME, SAME]
    assert back.placement == plan.placement
    with pytest.raises(PlanError, match="region fast: speed must be a tuple of numbers"):
        Region("fast", 64, speed="quick")


def test_profile_regions_carry_their_speed():
    """mps2-an386: block RAM and SSRAM2/3 have the same wait states and
    bandwidth in the profile, PSRAM not; the plan's regions say so."""
    from firmware_sim.profiles import load_profile
    from pyembed.target.planning import profile_regions
    prof, regs = profile_regions("mps2-an386")
    by = {r.name: r for r in regs}
    for r in regs:
        spec = prof.regions[r.name]
        assert r.speed == (spec.read_wait, spec.write_wait, spec.bandwidth)
    assert by["blockram"].speed == by["ssram23"].speed != by["psram"].speed
    assert A.speed_classes(regs) == [0, 0, 1]
    assert load_profile("mps2-an386").regions["blockram"].size < 32768


def test_resnet_on_mps2_is_not_split_over_equal_memories():
    """The issue's case: image classification (stripes, --optimize ram) on
    mps2-an386 used to take block RAM's 16 KB plus SSRAM2/3's rest; planned
    now as on one memory of SSRAM2/3's size (same pipeline, same planner)."""
    from pyembed.data import MODELS_DIR
    from pyembed.target.planning import PlanOptions, plan_for_target, profile_regions
    model = os.path.join(MODELS_DIR, "tiny_ic_resnet8_int8.tflite")
    opts = dict(strategy="auto", optimize="ram")
    tp = plan_for_target(model, "mps2-an386", PlanOptions(**opts))
    _, regs = profile_regions("mps2-an386")
    ssram = next(r for r in regs if r.name == "ssram23")
    one = plan_for_target(model, None, PlanOptions(**opts), regions=[ssram])
    used = tp.plan.region_used()
    assert tp.plan.arena_size <= one.plan.arena_size
    # one memory holds it all (block RAM's 16 KB alone is too small for it)
    assert sorted(used.values())[-2] == 0, used
    assert tp.plan.arena_size > next(r.size for r in regs if r.name == "blockram")


def _widen_plan(fast_speed, big_speed):
    """Everything in the second region: a (96 B) at step 0, b (80 B) at step 1,
    d (96 B) at step 2; the first region is empty."""
    from pyembed.plan.core import Plan
    p = Problem()
    for size, step, name in ((96, 0, "a"), (80, 1, "b"), (96, 2, "d")):
        p.add_buffer(size, step, step, name=name)
    return Plan(p, _regions(fast_speed, big_speed), [(1, 0)] * 3, order=[0, 1, 2])


def test_widened_scratch_grows_the_pool_least():
    """pyembed.plan.widen with grow: a scratch that finds no free bytes goes
    past a region's end. Among equally fast regions the one that grows the
    least, counting what earlier grants already grew: op 1's 48 B after b
    (big grows 80 + 48 - 96 = 32 B, the empty fast one would grow 48 B), op 2's
    after d (big grows 96 + 48 - 128 = 16 B more). With a faster first region
    it takes both, as before (the first region where they fit)."""
    from pyembed.plan.widen import widen_scratch
    new, granted = widen_scratch(_widen_plan(SAME, SAME), {1: 48, 2: 48}, grow=True)
    assert granted == {1: (0, 48, "big", 80), 2: (0, 48, "big", 96)}
    assert new.region_used() == {"fast": 0, "big": 96 + 48}
    for speeds in ((SAME, SLOW), (None, None)):
        new, granted = widen_scratch(_widen_plan(*speeds), {1: 48, 2: 48}, grow=True)
        assert granted == {1: (0, 48, "fast", 0), 2: (0, 48, "fast", 0)}, speeds
        assert new.region_used() == {"fast": 48, "big": 96}


@pytest.mark.parametrize("alg", PLACERS)
def test_a_tie_in_the_pool_goes_to_the_earlier_region(alg):
    """What fits the first region entirely stays there (its total is the same
    in either memory): the exact search weighs a class's regions alike, so
    its answer is settled into the earlier region too."""
    p = Problem()
    a = p.add_buffer(48, 0, 1)
    p.add_buffer(16, 1, 2)
    p.add_buffer(32, 2, 2)
    plan = plan_problem(p, _regions(SAME, SAME), algorithm=alg, time_limit=1.0)
    assert plan.region_used() == {"fast": 64, "big": 0} and plan.region_of(a).name == "fast"


def test_settle_in_classes_moves_whole_regions_only_where_they_fit():
    p = Problem()
    p.add_buffer(48, 0, 0)
    p.add_buffer(48, 1, 1)
    in_big = [(1, 0), (1, 0)]
    assert A.settle_in_classes(p, _regions(SAME, SAME), in_big) == [(0, 0), (0, 0)]
    assert A.settle_in_classes(p, _regions(SAME, SLOW), in_big) == in_big           # another class: no move
    small = [Region("fast", 32, speed=SAME), Region("big", 4096, speed=SAME)]
    assert A.settle_in_classes(p, small, in_big) == in_big                         # 48 B do not fit 32 B
    p.buffers[0] = dataclasses.replace(p.buffers[0], region="big")
    assert A.settle_in_classes(p, _regions(SAME, SAME), in_big) == in_big          # pinned: stays
