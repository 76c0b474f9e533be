"""Random buffer sets (up to thousands of buffers) through every planner
algorithm (issue 10): the independent checker verifies every plan, and the
emitted memplan.h compiles with gcc -std=c99 -Wall -Wextra -Werror -pedantic
into a program that re-checks the emitted tables itself (no two buffers live
at the same step share bytes, every buffer inside its region) and runs.
Regions too small must be a PlanError. Engine in pyembed/bench/reliability.py.
"""
import random
import shutil
import tempfile

import pytest

from pyembed.bench import reliability as rel
from pyembed.codegen.emit import memplan_header
from pyembed.errors import PlanError
from pyembed.plan import ALGORITHMS, Region, check_plan, plan_problem

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")


@needs_gcc
def test_random_plans_every_algorithm():
    res = rel.plan_campaign(7, seed=11, max_buffers=2000, time_limit=1.0)
    assert set(res["per_algorithm"]) == set(ALGORITHMS)
    assert all(n > 0 for n in res["per_algorithm"].values()), res["per_algorithm"]
    assert res["headers_compiled"] > 0
    assert not res["failures"], res["failures"][:5]


@needs_gcc
def test_two_thousand_buffers_greedy_plan_and_header():
    rng = random.Random(3)
    problem = rel.random_problem(rng, 2000)
    for alg in ("greedy_size", "greedy_conflicts", "linear"):
        plan = plan_problem(problem, None, alg, 2.0)
        check_plan(plan)
        with tempfile.TemporaryDirectory() as tmp:
            ok, out = rel.compile_header(memplan_header(plan), tmp, plan=plan)
        assert ok, out


@needs_gcc
def test_the_c_checker_catches_a_corrupted_plan():
    """The emitted-table checker can fail: move one buffer onto another live one."""
    problem = rel.random_problem(random.Random(8), 30)
    plan = plan_problem(problem, None, "greedy_size", 1.0)
    live_together = [(i, j) for i, a in enumerate(plan.buffers) for j, b in enumerate(plan.buffers)
                     if i < j and a.first <= b.last and b.first <= a.last]
    i, j = live_together[0]
    plan.placement[j] = plan.placement[i]
    with pytest.raises(PlanError):
        check_plan(plan)
    with tempfile.TemporaryDirectory() as tmp:
        ok, out = rel.compile_header(memplan_header(plan), tmp, plan=plan)
    assert not ok and "share bytes" in out


def test_regions_too_small_are_a_plan_error():
    problem = rel.random_problem(random.Random(4), 50)
    need = plan_problem(problem, None, "greedy_size", 1.0).arena_size
    for alg in ALGORITHMS:
        with pytest.raises(PlanError):
            plan_problem(problem, [Region("ram", need // 4)], alg, 1.0)
