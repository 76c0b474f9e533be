"""Arena placement algorithms behind one interface.

Every algorithm is ``f(problem, regions, **options) -> placement`` where a
placement gives each buffer a (region index, offset). Regions are filled in
the order given (e.g. DTCM before SRAM), equally fast ones as one pool (see
below). All but ``linear`` reuse memory:

* linear            - no reuse: buffers one after another (baseline and oracle).
* greedy_size       - largest buffer first, each at the lowest offset that does
                      not collide with an already placed buffer whose lifetime
                      overlaps (TensorFlow Lite Micro's greedy planner).
* greedy_conflicts  - "greedy by breadth": visit steps from the most to the
                      least live bytes and place that step's buffers largest
                      first, so the tightest step is packed first.
* order_search      - first fit over many buffer orders (the two above, by
                      lifetime, by conflict degree, then random perturbations
                      of the best so far) until the lower bound or the time
                      limit is reached.
* cpsat             - an exact model for OR-Tools' CP-SAT solver: one offset
                      variable per buffer, one disjunction per pair of buffers
                      that live at the same time, minimise the arena; seeded
                      with the best heuristic placement, bounded below by the
                      liveness bound, stopped at a time limit (then the best
                      placement found so far is returned, never worse than the
                      seed).

Overlap allowances (core.Overlap) change a pair's rule from "disjoint" to
"dst starts at most max_delta after src, or after src's end".

Regions of the same speed (Region.speed) form one speed class: the key all
algorithms minimise (placement_key) is the bytes of the slowest class first,
each class counted as the SUM of its regions' tops, so two equally fast
memories are one pool and a model that fits one of them is not split over
both (a split pays each region's fragmentation for no speed). First fit
fills the regions in the given order, so every first-fit algorithm also
tries the other region orders of region_orders (each region of a class alone,
each first) and keeps the best key.

Regions are stacked in one virtual address line so that a placement inside a
region never straddles into the next; a buffer pinned to a region may only be
placed there.
"""
import random

from pyembed.errors import PlanError
from pyembed.plan.core import align_down, align_up


# Every search here is bounded by work, never by the clock, so the same
# problem gives the same placement on any machine and under any load. The
# time_limit arguments are budgets in nominal seconds, turned into work units
# by work_budget: one unit is one buffer placed or one neighbour looked at by
# a first-fit pass (about what this planner does per microsecond on a 2020s
# x86 core; only the count matters). CP-SAT gets the same budget as its
# deterministic time on one worker.
WORK_PER_SECOND = 250_000


def work_budget(time_limit):
    """Work units of a budget of time_limit nominal seconds."""
    return int(WORK_PER_SECOND * max(float(time_limit), 0.0))


class DoesNotFit(Exception):
    """Raised inside an algorithm when a buffer fits no region."""

    def __init__(self, buffer_index):
        super().__init__(buffer_index)
        self.buffer_index = buffer_index


class _Placer:
    """First-fit placement of buffers one at a time."""

    def __init__(self, problem, regions, region_order=None):
        self.p = problem
        self.regions = regions
        self.nb = problem.neighbours()
        self.allow = usable_allowances(problem)
        self.size = [b.aligned_size for b in problem.buffers]
        self.pos = [None] * len(problem.buffers)
        names = [r.name for r in regions]
        free = list(range(len(regions))) if region_order is None else list(region_order)
        self.region_choices = []
        for b in problem.buffers:
            if b.region is None:
                self.region_choices.append(free)
            elif b.region in names:
                self.region_choices.append([names.index(b.region)])
            else:
                raise PlanError(f"buffer {b.name} is pinned to region {b.region!r}, which the target does not have "
                                f"(regions: {', '.join(names)})")

    def forbidden(self, i, k):
        """Open intervals (lo, hi) of start offsets i may not take in region k."""
        out = []
        si = self.size[i]
        for j in self.nb[i]:
            pj = self.pos[j]
            if pj is None or pj[0] != k or si == 0 or self.size[j] == 0:
                continue
            oj, sj = pj[1], self.size[j]
            ov = self.allow.get((j, i))
            if ov is not None:  # i writes over j
                out.append((oj + ov.max_delta, oj + sj))
                continue
            ov = self.allow.get((i, j))
            if ov is not None:  # j writes over i
                out.append((oj - si, oj - ov.max_delta))
                continue
            out.append((oj - si, oj + sj))
        return out

    def place(self, i):
        b = self.p.buffers[i]
        a = b.alignment
        si = self.size[i]
        for k in self.region_choices[i]:
            cap = self.regions[k].size
            forb = self.forbidden(i, k)
            cands = {0}
            for lo, hi in forb:
                cands.add(align_up(max(hi, 0), a))
                if lo >= 0:
                    cands.add(align_down(lo, a))
            for c in sorted(cands):
                if cap is not None and c + si > cap:
                    break
                if all(not (lo < c < hi) for lo, hi in forb):
                    self.pos[i] = (k, c)
                    return self.pos[i]
        raise DoesNotFit(i)

    def run(self, order):
        for i in overlap_order(order, self.allow):
            self.place(i)
        return list(self.pos)


def usable_allowances(problem):
    """{(src, dst): Overlap} for the proven allowances that can actually save bytes."""
    out = {}
    for key, ov in problem.allowance(proven_only=True).items():
        src, dst = problem.buffers[ov.src], problem.buffers[ov.dst]
        if ov.max_delta <= -dst.aligned_size:
            continue  # dst would have to end before src starts: no sharing possible
        if src.last != ov.step or dst.first != ov.step:
            continue  # the pair is live together beyond the overlapping step
        out[key] = ov
    return out


def overlap_order(order, allow):
    """Where an output must start below its input (max_delta < 0), place it
    first: first fit then slides the input up under it. Chains (a -> b -> c)
    need a few passes."""
    order = list(order)
    below = [(src, dst) for (src, dst), ov in allow.items() if ov.max_delta < 0]
    for _ in range(len(below) + 1):
        moved = False
        for src, dst in below:
            i, j = order.index(src), order.index(dst)
            if j > i:
                order.insert(i, order.pop(j))
                moved = True
        if not moved:
            break
    return order


def region_tops(problem, regions, placement):
    used = [0] * len(regions)
    for b, (k, off) in zip(problem.buffers, placement):
        used[k] = max(used[k], off + b.aligned_size)
    return used


def placement_total(problem, regions, placement):
    return sum(region_tops(problem, regions, placement))


def speed_classes(regions):
    """The speed class of each region: regions with the same Region.speed
    (not None) share one; a region without a speed is a class of its own.
    Classes are numbered in the order of their first region (the given
    regions come fastest first)."""
    ids, out = {}, []
    for k, r in enumerate(regions):
        speed = getattr(r, "speed", None)
        out.append(ids.setdefault(("region", k) if speed is None else ("speed", speed), len(ids)))
    return out


def class_totals(problem, regions, placement):
    """Bytes used in each speed class (the sum of its regions' tops)."""
    cls = speed_classes(regions)
    out = [0] * (max(cls) + 1 if cls else 0)
    for k, top in enumerate(region_tops(problem, regions, placement)):
        out[cls[k]] += top
    return out


def placement_key(problem, regions, placement):
    """What the algorithms minimise: bytes in the last (slowest) speed class
    first, then the class before... so faster classes fill up first; a class
    of several equally fast regions counts the sum of their tops (where the
    bytes go inside it buys no speed). Ties between such sums go to the
    placement with fewer bytes in later regions. With one region per class
    this is the regions' tops, last first; with one region the arena size."""
    tops = tuple(reversed(region_tops(problem, regions, placement)))
    cls = speed_classes(regions)
    if len(set(cls)) == len(cls):
        return tops
    return tuple(reversed(class_totals(problem, regions, placement))) + tops


def key_is_optimal(problem, regions, key, target):
    """True when no placement can have a smaller key: everything sits in the
    fastest class and the total there is at the bound target (the sum of
    the tops of a class is at least the bytes it holds at any step)."""
    ncls = len(set(speed_classes(regions)))
    return all(v == 0 for v in key[:ncls - 1]) and key[ncls - 1] <= target


def region_orders(regions):
    """The orders in which first fit tries the regions for a buffer that is
    not pinned: the given order first; then, for every speed class of several
    regions, each of its regions alone (the class's other regions left out:
    the whole class's share in that one memory) and each of its regions first
    (the others of the class after it, as fallback). Other classes keep their
    place. Deterministic, without duplicates."""
    base = list(range(len(regions)))
    cls = speed_classes(regions)
    out = [base]
    for c in sorted(set(cls)):
        members = [k for k in base if cls[k] == c]
        if len(members) < 2:
            continue
        for k in members:
            out.append([j for j in base if cls[j] != c or j == k])
            rest = iter([k] + [j for j in members if j != k])
            out.append([next(rest) if cls[j] == c else j for j in base])
    seen, uniq = set(), []
    for order in out:
        if tuple(order) not in seen:
            seen.add(tuple(order))
            uniq.append(order)
    return uniq


def settle_in_classes(problem, regions, placement, max_class=6):
    """The placement with each speed class's regions' contents exchanged as
    whole blocks (same offsets, so still valid) where that lowers the key:
    e.g. a plan that an exact search put in the second of two equally fast
    memories moves to the first when it fits there. A region holding a
    pinned buffer keeps its contents; classes of more than max_class regions
    are left as they are."""
    from itertools import permutations
    cls = speed_classes(regions)
    if len(set(cls)) == len(cls):
        return placement
    tops = region_tops(problem, regions, placement)
    pinned = {k for b, (k, _) in zip(problem.buffers, placement) if b.region is not None}
    best, best_key = list(placement), placement_key(problem, regions, placement)
    for c in sorted(set(cls)):
        members = [k for k in range(len(regions)) if cls[k] == c and k not in pinned]
        if len(members) < 2 or len(members) > max_class:
            continue
        current = best
        for perm in permutations(members):
            where = dict(zip(members, perm))   # contents of region k go to region where[k]
            if any(regions[where[k]].size is not None and tops[k] > regions[where[k]].size for k in members):
                continue
            cand = [(where.get(k, k), off) for k, off in current]
            key = placement_key(problem, regions, cand)
            if key < best_key:
                best, best_key = cand, key
    return best


def first_fit_best(problem, regions, order):
    """First fit of buffer order under every region order of region_orders:
    (placement, key, region order) of the smallest key. Raises DoesNotFit
    when no region order fits."""
    best, last_error = None, None
    for ro in region_orders(regions):
        try:
            pos = settle_in_classes(problem, regions, _Placer(problem, regions, ro).run(order))
        except DoesNotFit as e:
            last_error = e
            continue
        key = placement_key(problem, regions, pos)
        if best is None or key < best[1]:
            best = (pos, key, ro)
    if best is None:
        raise last_error
    return best


# -- the algorithms ----------------------------------------------------------

def linear(problem, regions, **_):
    """No reuse: each buffer after the previous one (next region when full)."""
    pos = []
    top = [0] * len(regions)
    names = [r.name for r in regions]
    for i, b in enumerate(problem.buffers):
        choices = range(len(regions)) if b.region is None else [names.index(b.region)] if b.region in names else []
        for k in choices:
            off = align_up(top[k], b.alignment)
            if regions[k].size is None or off + b.aligned_size <= regions[k].size:
                pos.append((k, off))
                top[k] = off + b.aligned_size
                break
        else:
            raise DoesNotFit(i)
    return pos


def order_by_size(problem):
    return sorted(range(len(problem.buffers)),
                  key=lambda i: (-problem.buffers[i].aligned_size, problem.buffers[i].first, i))


def order_by_breadth(problem):
    live = problem.live_bytes()
    steps = sorted(range(problem.num_steps), key=lambda s: (-live[s], s))
    seen = set()
    order = []
    alive = [[] for _ in range(problem.num_steps)]   # buffers live at each step, in index order
    for i, b in enumerate(problem.buffers):
        for s in range(max(b.first, 0), min(b.last, problem.num_steps - 1) + 1):
            alive[s].append(i)
    for s in steps:
        here = [i for i in alive[s] if i not in seen]
        here.sort(key=lambda i: (-problem.buffers[i].aligned_size, problem.buffers[i].first, i))
        order += here
        seen.update(here)
    order += [i for i in range(len(problem.buffers)) if i not in seen]
    return order


def greedy_size(problem, regions, **_):
    return first_fit_best(problem, regions, order_by_size(problem))[0]


def greedy_conflicts(problem, regions, **_):
    return first_fit_best(problem, regions, order_by_breadth(problem))[0]


def _seed_orders(problem):
    n = len(problem.buffers)
    B = problem.buffers
    nb = problem.neighbours()
    conflict_bytes = [sum(B[j].aligned_size for j in nb[i]) for i in range(n)]
    yield order_by_size(problem)
    yield order_by_breadth(problem)
    yield sorted(range(n), key=lambda i: (-(B[i].last - B[i].first), -B[i].aligned_size, i))
    yield sorted(range(n), key=lambda i: (-(conflict_bytes[i] + B[i].aligned_size), i))
    yield sorted(range(n), key=lambda i: (B[i].first, -B[i].aligned_size, i))
    yield sorted(range(n), key=lambda i: (-B[i].aligned_size, -B[i].first, i))
    yield sorted(range(n), key=lambda i: (-B[i].aligned_size, -(B[i].last - B[i].first), i))


def order_search(problem, regions, time_limit=2.0, seed=0, target=None, info=None, **_):
    """First fit over many orders; stops at `target` bytes (default: the
    overlap-aware lower bound), after a run of non-improving tries, or when
    the work budget of time_limit nominal seconds (work_budget: each try costs
    its buffers plus their neighbours) is spent."""
    if target is None:
        target = problem.lower_bound(with_overlaps=True)
    try_cost = len(problem.buffers) + sum(len(x) for x in problem.neighbours())
    max_tries = max(1, work_budget(time_limit) // max(try_cost, 1))
    tries = 0
    best, best_total, best_order, best_ro = None, None, None, None
    last_error = None
    # with one speed class (one region, or equally fast ones) the bound ends the search
    one_class = len(set(speed_classes(regions))) == 1
    for order in _seed_orders(problem):
        try:
            pos, total, ro = first_fit_best(problem, regions, order)
        except DoesNotFit as e:
            last_error = e
            continue
        if best is None or total < best_total:
            best, best_total, best_order, best_ro = pos, total, order, ro
        if one_class and key_is_optimal(problem, regions, best_total, target):
            return best
    rng = random.Random(seed)
    n = len(problem.buffers)
    stale = 0
    patience = max(300, 30 * n)  # non-improving tries before giving up early
    while n > 1 and tries < max_tries \
            and (best is None or not one_class or not key_is_optimal(problem, regions, best_total, target)) \
            and stale < patience:
        tries += 1
        stale += 1
        base = list(best_order) if best_order is not None else list(range(n))
        # a few random moves of one buffer to an earlier position
        for _ in range(rng.randint(1, 3)):
            a = rng.randrange(n)
            b = rng.randrange(n)
            base.insert(b, base.pop(a))
        try:
            pos = settle_in_classes(problem, regions, _Placer(problem, regions, best_ro).run(base))
        except DoesNotFit as e:
            last_error = e
            continue
        total = placement_key(problem, regions, pos)
        if best is not None and total < best_total:
            stale = 0
        if best is None or total <= best_total:  # accept ties: a random walk on plateaus
            best, best_total, best_order = pos, total, base
    if info is not None:
        info["tries"] = tries
    if best is None:
        raise last_error
    return best


def cpsat(problem, regions, time_limit=10.0, hint=None, workers=1, max_buffers=200, info=None, **_):
    """Exact placement with OR-Tools CP-SAT (optimal when it finishes within
    time_limit deterministic seconds, CP-SAT's own measure of work: the same
    answer on any machine; otherwise the best placement found, never worse
    than hint). workers: 1, the deterministic search (more workers race)."""
    from pyembed._extras import require
    cp_model = require("ortools.sat.python.cp_model", "the cpsat planning algorithm")
    n = len(problem.buffers)
    if n > max_buffers:
        raise PlanError(f"cpsat: {n} buffers is more than max_buffers={max_buffers}; use order_search")
    B = problem.buffers
    size = [b.aligned_size for b in B]
    if hint is None:
        try:
            hint = order_search(problem, regions, time_limit=min(1.0, time_limit / 4))
        except DoesNotFit:
            hint = None
    # stack the regions on one virtual line, each base aligned to the largest alignment
    amax = max([b.alignment for b in B] + [1])
    upper = sum(size) + amax * (n + 1)
    base, caps = [], []
    v = 0
    for r in regions:
        base.append(v)
        cap = r.size if r.size is not None else upper
        caps.append(cap)
        v = align_up(v + cap, amax) + amax
    names = [r.name for r in regions]

    from ortools.util.python import sorted_interval_list as sil

    m = cp_model.CpModel()
    unit = []  # offset = alignment * unit
    reg_lit = []
    off = []
    for i, b in enumerate(B):
        a = b.alignment
        allowed = range(len(regions)) if b.region is None else [names.index(b.region)]
        intervals = []
        lits = {}
        for k in allowed:
            lo = -(-base[k] // a)
            hi = (base[k] + caps[k] - size[i]) // a
            if hi >= lo:
                intervals.append([lo, hi])
        if not intervals:
            raise DoesNotFit(i)
        u = m.NewIntVarFromDomain(sil.Domain.FromIntervals(intervals), f"u{i}")
        unit.append(u)
        off.append(a * u)
        if len(regions) > 1:
            for k in allowed:
                lit = m.NewBoolVar(f"r{i}_{k}")
                lits[k] = lit
                m.Add(a * u >= base[k]).OnlyEnforceIf(lit)
                m.Add(a * u + size[i] <= base[k] + caps[k]).OnlyEnforceIf(lit)
            m.AddExactlyOne(lits.values())
        reg_lit.append(lits)
    allow = usable_allowances(problem)
    for i, j in problem.conflicts():
        if size[i] == 0 or size[j] == 0:
            continue
        lit = m.NewBoolVar(f"b{i}_{j}")
        if (i, j) in allow:  # j may start up to max_delta after i
            m.Add(off[j] <= off[i] + allow[(i, j)].max_delta).OnlyEnforceIf(lit)
            m.Add(off[j] >= off[i] + size[i]).OnlyEnforceIf(lit.Not())
        elif (j, i) in allow:
            m.Add(off[i] <= off[j] + allow[(j, i)].max_delta).OnlyEnforceIf(lit)
            m.Add(off[i] >= off[j] + size[j]).OnlyEnforceIf(lit.Not())
        else:
            m.Add(off[i] + size[i] <= off[j]).OnlyEnforceIf(lit)
            m.Add(off[j] + size[j] <= off[i]).OnlyEnforceIf(lit.Not())
    if len(regions) == 1:
        peak = m.NewIntVar(0, caps[0], "peak")
        for i in range(n):
            m.Add(peak >= off[i] + size[i])
        m.Add(peak >= problem.lower_bound(with_overlaps=True))
        m.Minimize(peak)
    else:
        tops = []
        for k in range(len(regions)):
            t = m.NewIntVar(0, caps[k], f"top{k}")
            tops.append(t)
            for i in range(n):
                if k in reg_lit[i]:
                    m.Add(t >= off[i] + size[i] - base[k]).OnlyEnforceIf(reg_lit[i][k])
        # lexicographic over speed classes as placement_key: the last class
        # weighs most, the tops of one class's regions count alike (their sum)
        cls = speed_classes(regions)
        weight, class_weight = 1, []
        for c in range(max(cls) + 1):
            class_weight.append(weight)
            weight *= sum(caps[k] for k in range(len(regions)) if cls[k] == c) + 1
        if weight >= 2**62:
            class_weight = [c + 1 for c in range(max(cls) + 1)]
        m.Minimize(sum(class_weight[cls[k]] * t for k, t in enumerate(tops)))
    if hint is not None:
        for i, (k, o) in enumerate(hint):
            m.AddHint(unit[i], (base[k] + o) // B[i].alignment)
    solver = cp_model.CpSolver()
    solver.parameters.max_deterministic_time = float(time_limit)
    solver.parameters.num_workers = int(workers)
    solver.parameters.random_seed = 0
    status = solver.Solve(m)
    if info is not None:
        info["status"] = solver.StatusName(status)
        info["optimal"] = status == cp_model.OPTIMAL
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        if hint is not None:
            return hint
        if status == cp_model.INFEASIBLE:
            raise DoesNotFit(max(range(n), key=lambda i: size[i]))
        raise PlanError(f"cpsat found no placement within {time_limit} deterministic s "
                        f"({solver.StatusName(status)})")
    out = []
    for i in range(n):
        o = solver.Value(unit[i]) * B[i].alignment
        k = max(kk for kk in range(len(regions)) if base[kk] <= o)
        out.append((k, o - base[k]))
    # the objective weighs a class's regions alike: prefer the earlier ones on a tie, as placement_key
    out = settle_in_classes(problem, regions, out)
    if hint is not None and placement_key(problem, regions, hint) < placement_key(problem, regions, out):
        return hint
    return out


ALGORITHMS = {
    "linear": linear,
    "greedy_size": greedy_size,
    "greedy_conflicts": greedy_conflicts,
    "order_search": order_search,
    "cpsat": cpsat,
}
