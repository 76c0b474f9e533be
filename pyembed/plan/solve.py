"""Run a placement algorithm on a problem and turn the result into a checked
Plan, or into a PlanError that says how many bytes are missing."""
import dataclasses
import time

from pyembed.errors import FitError, OverflowSizeError, PlanError
from pyembed.model.validate import INT32_MAX
from pyembed.plan import algorithms as A
from pyembed.plan.core import Plan, Region, check_plan

# "auto" tries these in turn and keeps the smallest arena
AUTO_SEQUENCE = ("greedy_size", "greedy_conflicts", "order_search", "cpsat")
CPSAT_MAX_BUFFERS = 100


def default_regions(size=None):
    return [Region("ram", size)]


def _validate_regions(regions):
    if regions is None:
        return default_regions()
    if isinstance(regions, (str, bytes)):
        raise PlanError(f"regions: expected a list of Region objects, got the string {regions!r}")
    try:
        regions = list(regions)
    except TypeError:
        raise PlanError(f"regions: expected a list of Region objects, got {type(regions).__name__}") from None
    if not regions:
        raise PlanError("no RAM region given: a plan needs at least one region with a size")
    bad = [r for r in regions if not isinstance(r, Region)]
    if bad:
        raise PlanError(f"regions: expected Region objects (pyembed.plan.Region(name, size)), got {bad[0]!r}")
    names = [r.name for r in regions]
    if len(set(names)) != len(names):
        raise PlanError(f"region names must be unique, got {names}")
    return regions


def _check_sizes(problem, regions):
    """A buffer larger than every region it may go to can never fit."""
    names = [r.name for r in regions]
    for b in problem.buffers:
        choices = regions if b.region is None else [regions[names.index(b.region)]] if b.region in names else []
        if not choices:
            raise PlanError(f"buffer {b.name} is pinned to region {b.region!r}, which does not exist "
                            f"(regions: {', '.join(names)})")
        caps = [r.size for r in choices]
        if None in caps:
            continue
        biggest = max(choices, key=lambda r: r.size)
        if b.aligned_size > biggest.size:
            raise FitError(f"buffer {b.name} ({b.kind}, {b.aligned_size} B) is larger than every region it may use: "
                            f"the largest, {biggest.name}, has {biggest.size} B ({b.aligned_size - biggest.size} B "
                            f"missing)")


def _run(name, problem, regions, time_limit, info):
    fn = A.ALGORITHMS[name]
    t0 = time.perf_counter()
    sub = {}
    pos = fn(problem, regions, time_limit=time_limit, info=sub)
    dt = time.perf_counter() - t0
    total = A.placement_total(problem, regions, pos)
    info.setdefault("runs", {})[name] = {"arena": total, "seconds": round(dt, 4), **sub}
    return pos, A.placement_key(problem, regions, pos)


def _missing_bytes(problem, regions, algorithm, time_limit):
    """Plan again with the last region unbounded: what it then needs beyond
    its size is what is missing."""
    relaxed = list(regions[:-1]) + [dataclasses.replace(regions[-1], size=None)]
    name = algorithm if algorithm != "auto" else "order_search"
    try:
        pos = A.ALGORITHMS[name](problem, relaxed, time_limit=time_limit)
    except A.DoesNotFit:
        return None
    used = max((off + b.aligned_size for b, (k, off) in zip(problem.buffers, pos) if k == len(regions) - 1),
               default=0)
    return used - regions[-1].size


def plan_problem(problem, regions=None, algorithm="auto", time_limit=5.0, **plan_fields):
    """Place every buffer of problem in regions with the named algorithm
    ("auto": several, keep the best). Returns a checked Plan."""
    regions = _validate_regions(regions)
    if algorithm != "auto" and algorithm not in A.ALGORITHMS:
        raise PlanError(f"unknown algorithm {algorithm!r}; choose one of auto, {', '.join(A.ALGORITHMS)}")
    _check_sizes(problem, regions)
    info = {}
    t0 = time.perf_counter()
    try:
        if algorithm == "auto":
            target = problem.lower_bound(with_overlaps=True)
            one_class = len(set(A.speed_classes(regions))) == 1   # one region, or equally fast ones
            best = None
            for name in AUTO_SEQUENCE:
                if name == "cpsat":
                    if len(problem.buffers) > CPSAT_MAX_BUFFERS or (best and one_class and A.key_is_optimal(
                            problem, regions, best[1], target)):
                        continue
                    from pyembed._extras import have, install_hint
                    if not have("ortools"):
                        # said on the plan, so a larger arena than another install's is explained
                        info["note"] = (f"the CP-SAT step was skipped (OR-Tools not installed: "
                                        f"{install_hint('ortools')}); the plan may be above the optimum")
                        continue
                budget = time_limit if name == "cpsat" else min(1.0, time_limit / 5)
                try:
                    pos, total = _run(name, problem, regions, budget, info)
                except A.DoesNotFit:
                    continue
                if best is None or total < best[1]:
                    best = (pos, total, name)
            if best is None:
                raise A.DoesNotFit(-1)
            placement, _, chosen = best
        else:
            placement, _ = _run(algorithm, problem, regions, time_limit, info)
            chosen = algorithm
    except A.DoesNotFit:
        missing = _missing_bytes(problem, regions, algorithm, time_limit)
        caps = ", ".join(f"{r.name} {r.size} B" for r in regions)
        lb = problem.lower_bound(with_overlaps=True)
        how = f"{missing} B missing" if missing is not None else "a pinned buffer does not fit its region"
        raise FitError(f"the plan does not fit the regions ({caps}): {how} "
                        f"(the liveness lower bound is {lb} B)") from None
    info["seconds"] = round(time.perf_counter() - t0, 4)
    plan = Plan(problem, regions, placement, algorithm=chosen, info=info, **plan_fields)
    used = plan.region_used()
    if any(v > INT32_MAX for v in used.values()):
        raise OverflowSizeError(f"the plan needs {max(used.values())} B in one region, more than the C runtime's "
                                f"int32 byte offsets allow ({INT32_MAX} B)")
    check_plan(plan)
    return plan
