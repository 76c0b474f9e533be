"""Planning a cooperative periodic schedule (SPEC section 7).

Algorithm, in the order the seed gives it:

1. Rank the models: priority class first, then declared output dependencies
   (a producer above its consumers), then latency-sensitive ones, then by
   size (smaller first);
   the user may force a model's class ("priority" / "low") and its rank.
   Latency-sensitive models and everything they depend on are priority models.
2. Reserve the priority period on each unit: the priority models' estimated
   cycles, every window. If it exceeds the window that is a fault.
3. Remaining period of every window and unit = (window - priority period -
   guard) x fill; fill < 1 keeps slack for estimate errors.
4. Estimate every low-priority model per layer (workload.layer_cycles).
5. Place the low models one after the other into what the earlier ones left:
   * rate "auto" / a period P: every P windows an instance starts; its layers
     are split greedily into consecutive groups that each fit the window they
     go to ("fit"), or into the same number of groups of near-equal estimate
     ("balanced"). A group that is not the first starts with a fill step that
     fetches the previous group's intermediate outputs from persistent buffers;
     a group that is not the last ends by storing them (both priced with the
     platform's copy cost). The smallest P that fits is taken for "auto".
   * rate "max": instances back to back through every remaining window.
   * several units: the model is cut into one stage per unit (balancing each
     stage's share of its unit's remaining period); stage s of an instance
     runs P windows after stage s-1, so the units work in parallel on
     successive instances, with a DMA hand-over (time) and a hand-over
     buffer per instance (memory).
   The table covers the least common multiple of the periods (the
   hyperperiod), lengthened for "max" models to cut the idle tail.
6. Intermediates that cross a window boundary get persistent buffers, planned
   with pyembed.plan over the table's step order (buffers that wrap into
   the next table period live all the time). Constraints tell the dispatcher
   the order: a group runs after the group that produced its inputs, a
   producer does not overwrite a buffer its consumer has not read, and two
   buffers that share bytes are used in turn.
7. Prefetch (prefetch=True): a group that fetches its inputs and is the
   first low group of its unit in a window with priority work gets the flag
   PREFETCH: the dispatcher starts that copy by DMA just before the priority
   work of the window (the copy runs during the priority period) and the
   group's estimate drops by its fetch. Its working arena must then survive
   the priority work: on such a unit the priority models and the low models
   get disjoint arenas (Schedule.arena_blocks). The split itself is planned
   with the fetch included, so a group whose prefetch could not start early
   (after a deferral) still fits with a synchronous copy.

The result is a :class:`Schedule`: the static table for the C dispatcher
(pe_sched.h), its memory plan and the planned figures.
"""
import math

from pyembed.errors import ArgumentError
from pyembed.schedule.workload import Model, ModelCosts, Platform, align

from pyembed.schedule.types import (FLAG_CARRY, FLAG_FIRST, FLAG_LAST, FLAG_PREFETCH, LOW, PRIORITY,  # noqa: F401
                                     After, ModelPlan, PersistentBuffer, Piece, Schedule, ScheduleError)


# ---------------------------------------------------------------------------
# ranking

def rank_models(models):
    """(order, classes): model indices from most to least important, and
    "priority" / "low" per model (see the module docstring)."""
    names = [m.name for m in models]
    if len(set(names)) != len(names):
        raise ArgumentError(f"models: names must be unique, got {names}")
    index = {n: i for i, n in enumerate(names)}
    consumers = {i: [] for i in range(len(models))}
    for i, m in enumerate(models):
        for f in m.feeds:
            if f not in index:
                raise ArgumentError(f"model {m.name!r} feeds {f!r}, which is not one of the models ({', '.join(names)})")
            consumers[i].append(index[f])
    # depth: how many producers are upstream (a producer gets a smaller depth)
    depth = [0] * len(models)
    for _ in range(len(models)):
        changed = False
        for i in range(len(models)):
            for c in consumers[i]:
                if depth[c] < depth[i] + 1:
                    depth[c] = depth[i] + 1
                    changed = True
        if not changed:
            break
    else:
        raise ArgumentError("models: the declared output dependencies (feeds) form a cycle")
    classes = []
    for i, m in enumerate(models):
        classes.append(m.priority or ("priority" if m.latency_sensitive else "low"))
    # producers of priority models are priority models (their output is needed each frame)
    for _ in range(len(models)):
        changed = False
        for i in range(len(models)):
            if classes[i] == "low" and models[i].priority is None and any(classes[c] == "priority"
                                                                         for c in consumers[i]):
                classes[i] = "priority"
                changed = True
        if not changed:
            break
    size = [m.graph.macs if hasattr(m.graph, "macs") else 0 for m in models]

    def key(i):
        m = models[i]
        return (m.rank if m.rank is not None else 1 << 30, 0 if classes[i] == "priority" else 1,
                depth[i], 0 if m.latency_sensitive else 1, size[i], m.name)

    order = sorted(range(len(models)), key=key)
    # nothing declared latency-sensitive: the most important model takes the priority period
    if "priority" not in classes and models[order[0]].priority is None:
        classes[order[0]] = "priority"
        order = sorted(range(len(models)), key=key)
    return order, classes


# ---------------------------------------------------------------------------
# splitting

class _Splitter:
    """Cost of operator groups of one model on one unit, with the fetch/store
    of the intermediates crossing the group's cuts."""

    def __init__(self, costs, platform, unit, first=0, last=None):
        self.c = costs
        self.p = platform
        self.unit = unit
        self.first = first
        self.last = costs.n_ops if last is None else last

    def fetch(self, a):
        return self.p.copy_cycles(self.c.cut_bytes[a]) if a > 0 else 0

    def store(self, b):
        return self.p.copy_cycles(self.c.cut_bytes[b]) if b < self.c.n_ops else 0

    def est(self, a, b):
        return self.c.range_cycles(self.unit, a, b) + self.fetch(a) + self.store(b)

    def fit(self, caps):
        """Greedy: consecutive groups, each as long as the window it goes to
        allows. Returns [(window, first, last)] or None when the caps run out."""
        out, a, w = [], self.first, 0
        while a < self.last:
            if w >= len(caps):
                return None
            b = a
            while b < self.last and self.est(a, b + 1) <= caps[w]:
                b += 1
            if b > a:
                out.append((w, a, b))
                a = b
            w += 1
        return out

    def balanced(self, caps):
        """The fit's number of groups, cut so that the largest group estimate
        is as small as possible (dynamic programming over cut positions),
        each group in its own window. None when a group does not fit its window."""
        greedy = self.fit(caps)
        if greedy is None:
            return None
        k = len(greedy)
        ops = list(range(self.first, self.last + 1))
        n = len(ops) - 1
        inf = float("inf")
        # best[j][i]: smallest max estimate splitting ops[0:i] into j groups
        best = [[inf] * (n + 1) for _ in range(k + 1)]
        cut = [[0] * (n + 1) for _ in range(k + 1)]
        best[0][0] = 0
        for j in range(1, k + 1):
            for i in range(j, n + 1):
                for h in range(j - 1, i):
                    v = max(best[j - 1][h], self.est(ops[h], ops[i]))
                    if v < best[j][i]:
                        best[j][i], cut[j][i] = v, h
        bounds, i = [], n
        for j in range(k, 0, -1):
            h = cut[j][i]
            bounds.append((ops[h], ops[i]))
            i = h
        bounds.reverse()
        windows = [w for w, _, _ in greedy]
        out = []
        for (a, b), w in zip(bounds, windows):
            if self.est(a, b) > caps[w]:
                return greedy
            out.append((w, a, b))
        return out


def _lcm(a, b):
    return a * b // math.gcd(a, b)


# ---------------------------------------------------------------------------
# the planner

def assign_units(models, costs, classes, order, n_units):
    """Models given no unit on a platform of several: each goes to the unit
    with the least work so far (priority models first, then low models by
    rank, longest first within a class), so no unit stays idle while another
    holds every model. A model with units keeps them. Returns (models with
    units set, notes: one per unit left without work)."""
    import dataclasses as _dc
    load = [0] * n_units
    out = list(models)
    for i in order:
        if models[i].units:
            for u in models[i].units:
                load[u] += costs[i].total(u) // len(models[i].units)
    free = [i for i in order if not models[i].units]
    free.sort(key=lambda i: (classes[i] != "priority", models[i].rate == "max", -costs[i].total(0)))
    for i in free:
        u = min(range(n_units), key=lambda k: (load[k], k))
        load[u] += costs[i].total(u)
        out[i] = _dc.replace(models[i], units=(u,))
    idle = [u for u in range(n_units) if load[u] == 0]
    notes = [f"unit {u} has no work: {len(models)} model(s) for {n_units} units (give a model two units, "
             f"NAME@0+1, to pipeline it)" for u in idle]
    return out, notes


def plan_schedule(models, platform="stm32f746", window_ms=None, frame_rate=None, split="fit", fill=0.97,
                  guard_us=0.0, tick_us=100.0, max_hyper=64, strict=True, plan_memory=True, overrun_tolerance=0.02,
                  max_lag=0, layer_scale=None, prefetch=True, spread=True):
    """Plan the static schedule of `models` (Model objects, or graphs) on
    `platform` (a Platform or a firmware_sim profile name) with one window per
    frame (window_ms, or 1000 / frame_rate; default 50 ms).

    split: "fit" (greedy, each group fills its window) or "balanced" (the
    same number of groups, near-equal estimates). fill: share of each
    remaining period the plan may use. guard_us: margin the dispatcher keeps
    free before each priority release. overrun_tolerance: how far over its
    estimate a run may go before the dispatcher reports an overrun. max_lag:
    windows a low sub-model may slip behind its plan before the dispatcher
    drops the rest of its instance to get back on time (reported; -1: never).
    layer_scale: {model name: [factor per operator]} applied to the cost
    model's estimates (re-estimation from measurements, see replan).
    prefetch: copy the inputs of the first low group after a priority
    period by DMA during that period (step 7 above); False: every fetch is a
    synchronous copy charged to the group.
    spread: a background model (rate "max") whose unit the planner chose
    also runs whole instances, each on one unit, in what the other models
    leave on the other units (ModelPlan.fills); False: only on its unit.
    strict: raise ScheduleError on a fault;
    with strict=False the faults are listed in Schedule.problems and what can
    be planned is (a priority model larger than the window still runs every
    frame: the dispatcher then reports each miss)."""
    if not isinstance(platform, Platform):
        platform = Platform.from_profile(platform)
    if models is None or isinstance(models, (str, bytes)) or not hasattr(models, "__iter__"):
        raise ArgumentError(f"models: expected a list of Model objects or graphs, got {type(models).__name__}")
    models = [m if isinstance(m, Model) else Model(m) for m in models]
    if not models:
        raise ArgumentError("models: expected at least one model")
    from pyembed.model.ops.ctrlflow import is_control_flow
    for m in models:   # the schedule runs operator ranges once each: no jumps
        if is_control_flow(m.graph):
            from pyembed.errors import UnsupportedError
            raise UnsupportedError(f"models: {m.graph.name!r} holds inlined IF / WHILE, whose jumps leave the "
                                   f"schedule's operator pieces: not supported by plan_schedule")
    if split not in ("fit", "balanced"):
        raise ArgumentError(f"split: expected 'fit' or 'balanced', got {split!r}")
    if not (0.0 < float(fill) <= 1.0):
        raise ArgumentError(f"fill: expected a share in (0, 1], got {fill!r}")
    if window_ms is None and frame_rate is None:
        window_ms = 50.0
    elif window_ms is None:
        if not frame_rate or frame_rate <= 0:
            raise ArgumentError(f"frame_rate: expected a positive number of frames per second, got {frame_rate!r}")
        window_ms = 1000.0 / frame_rate
    elif frame_rate is not None:
        raise ArgumentError("give window_ms or frame_rate, not both")
    if not isinstance(window_ms, (int, float)) or not math.isfinite(window_ms) or window_ms <= 0:
        raise ArgumentError(f"window_ms: expected a positive finite duration, got {window_ms!r}")
    if tick_us <= 0 or guard_us < 0:
        raise ArgumentError(f"tick_us must be > 0 and guard_us >= 0, got {tick_us!r}, {guard_us!r}")
    if not isinstance(max_hyper, int) or max_hyper < 1:
        raise ArgumentError(f"max_hyper: expected a positive number of windows, got {max_hyper!r}")
    clock = platform.clock_hz
    n_units = len(platform.units)
    tick = max(1, int(round(tick_us * 1e-6 * clock)))
    if window_ms * 1e-3 * clock < tick:
        raise ArgumentError(f"window_ms: {window_ms!r} ms is shorter than one scheduler tick "
                            f"({tick_us} us); use a longer window or a smaller tick_us")
    window = max(1, int(round(window_ms * 1e-3 * clock / tick))) * tick
    guard = int(round(guard_us * 1e-6 * clock))
    if window >= 1 << 32:
        raise ArgumentError(f"window of {window_ms} ms is {window} cycles, more than 32 bits")
    for m in models:
        for u in (m.units or (0,)):
            if not 0 <= u < n_units:
                raise ArgumentError(f"model {m.name!r}: unit {u} does not exist (platform has {n_units})")

    if not 0.0 <= float(overrun_tolerance) < 1.0:
        raise ArgumentError(f"overrun_tolerance: expected a share in [0, 1), got {overrun_tolerance!r}")
    costs = [ModelCosts(m, platform) for m in models]
    for name, factors in (layer_scale or {}).items():
        c = costs[[m.name for m in models].index(name)] if name in [m.name for m in models] else None
        if c is None:
            raise ArgumentError(f"layer_scale: no model named {name!r}")
        if len(factors) != c.n_ops or min(factors) <= 0:
            raise ArgumentError(f"layer_scale[{name!r}]: expected {c.n_ops} positive factors, got {len(factors)}")
        c.scale(factors)
    order, classes = rank_models(models)
    problems = []
    notes = []
    chosen = [not m.units for m in models]     # units the planner chooses (no @UNIT given)
    if n_units > 1:
        models, notes = assign_units(models, costs, classes, order, n_units)
        for c, m in zip(costs, models):
            c.model = m     # the costs do not depend on the unit list (identical units)

    def fault(msg):
        if strict:
            raise ScheduleError(msg)
        problems.append(msg)

    mplans = []
    for rank, i in enumerate(order):
        m = models[i]
        units = m.units or (0,)
        mplans.append(ModelPlan(m.name, PRIORITY if classes[i] == "priority" else LOW, rank, units,
                                {u: costs[i].total(u) for u in units}, rate=m.rate))
    by_model = {order[r]: mplans[r] for r in range(len(order))}

    # 2. priority period per unit
    prio_models = [i for i in order if classes[i] == "priority"]
    prio_cycles = [0] * n_units
    for i in prio_models:
        u = (models[i].units or (0,))[0]
        by_model[i].units = (u,)
        prio_cycles[u] += costs[i].total(u)
    for u in range(n_units):
        if prio_cycles[u] + guard > window:
            names = ", ".join(models[i].name for i in prio_models if by_model[i].units[0] == u)
            over = prio_cycles[u] + guard - window
            fault(f"priority model(s) {names} on unit {u} need {prio_cycles[u]} cycles "
                  f"({prio_cycles[u] * 1e3 / clock:.2f} ms) per frame, more than the {window_ms:g} ms window "
                  f"({window} cycles): over by {over} cycles ({over * 1e3 / clock:.2f} ms, "
                  f"{100.0 * over / window:.1f} %); every frame will miss its deadline")
    remaining = [window - prio_cycles[u] - guard for u in range(n_units)]
    caps_unit = [max(0, int((window - prio_cycles[u] - guard) * fill)) for u in range(n_units)]

    # 3-5. low models into the remaining periods
    # low models in rank order, those that run back to back ("max") last: they
    # soak up whatever the others leave
    low_models = [i for i in order if classes[i] == "low" and models[i].rate != "max"]
    low_models += [i for i in order if classes[i] == "low" and models[i].rate == "max"]
    H = 1
    left = [[caps_unit[u]] for u in range(n_units)]      # leftover capacity per unit and window
    placed = []    # (model, instance, sub, unit, window, first, last) -- window may be >= H (next period)
    n_inst = {}    # model -> instances per table period
    seq = [0]

    def tile(new_h):
        nonlocal H, placed
        reps = new_h // H
        for u in range(n_units):
            left[u] = left[u] * reps
        out = []
        for r in range(reps):
            for (mi, inst, sub, u, w, a, b, s) in placed:
                out.append((mi, inst + r * n_inst[mi], sub, u, w + r * H, a, b, s))
        for mi in n_inst:
            n_inst[mi] *= reps
        placed = out
        H = new_h

    def take(mi, inst, sub, u, w, a, b, cost):
        left[u][w % H] -= cost
        placed.append((mi, inst, sub, u, w, a, b, seq[0]))
        seq[0] += 1

    last_low = low_models[-1] if low_models else None
    # the largest single operator of the models placed later, per unit: a model
    # placed earlier must leave at least one window where it fits
    peak_after = {}
    for pos, i in enumerate(low_models):
        need = [0] * n_units
        for j in low_models[pos + 1:]:
            for u in (models[j].units or (0,)):
                sp = _Splitter(costs[j], platform, u)
                need[u] = max(need[u], max(sp.est(k, k + 1) for k in range(costs[j].n_ops)))
        peak_after[i] = need
    for i in low_models:
        m, c, mp = models[i], costs[i], by_model[i]
        units = list(m.units or (0,))
        rate = m.rate
        if rate == "max" and len(units) > 1:
            fault(f"model {m.name!r}: rate 'max' runs on one unit; give a period for a pipeline over units {units}")
            rate = "auto"
        if rate == "auto" and len(units) == 1 and i == last_low and m.rate == "auto" and len(low_models) == 1:
            rate = "max"      # a single low model soaks up every remaining period
        mp.rate = rate
        # a layer that can never fit
        bad = False
        for u in units:
            sp = _Splitter(c, platform, u)
            cap = max(left[u]) if left[u] else 0
            if caps_unit[u] <= 0:
                fault(f"window of {window_ms:g} ms ({1000.0 / window_ms:g} fps) leaves no remaining period on unit {u} "
                      f"for low-priority model {m.name!r}: the priority period takes "
                      f"{prio_cycles[u] * 1e3 / clock:.2f} ms of the window")
                bad = True
                break
            for k in range(c.n_ops):
                need = sp.est(k, k + 1)
                if need > cap:
                    op = c.graph.operators[k]
                    fault(f"operator {k} ({op.type}) of low-priority model {m.name!r} needs {need} cycles "
                          f"({need * 1e3 / clock:.2f} ms) with its fetch/store, more than the "
                          f"{cap * 1e3 / clock:.2f} ms left of the remaining period on unit {u}: it cannot be "
                          f"split finer than one operator; lower the frame rate or use a faster unit")
                    bad = True
                    break
            if bad:
                break
        if bad:
            continue
        if len(units) > 1:
            ok = _place_pipeline(i, c, platform, units, rate, left, lambda: H, tile, take, n_inst, max_hyper, mp,
                                 split)
        elif rate == "max":
            ok = _place_background(i, c, platform, units[0], left, lambda: H, tile, take, n_inst, max_hyper, mp)
        else:
            ok = _place_periodic(i, c, platform, units[0], rate, left, lambda: H, tile, take, n_inst, max_hyper,
                                 mp, split, peak_after[i][units[0]])
        if not ok:
            need = c.total(units[0])
            fault(f"low-priority model {m.name!r} ({need * 1e3 / clock:.2f} ms on unit {units[0]}) does not fit "
                  f"the remaining periods{'' if rate in ('auto', 'max') else f' with a period of {rate} windows'} "
                  f"within {max_hyper} windows (left after the models before it: "
                  f"{sum(left[units[0]]) * 1e3 / clock / max(1, len(left[units[0]])):.2f} ms per window on average)")

    # 6. a background model ("max") whose unit was chosen for it also runs whole instances, each on one
    # unit, in what every other model leaves on the other units (no unit idles while one has work)
    for i in low_models:
        if spread and models[i].rate == "max" and chosen[i] and i in n_inst and len(by_model[i].units) == 1:
            for u in range(n_units):
                if u != by_model[i].units[0] and caps_unit[u] > 0:
                    got = _fill_unit(i, costs[i], platform, u, left, H, take, n_inst)
                    if got:
                        by_model[i].fills[u] = got

    # items in table order
    pieces = []
    for w in range(H):
        for i in prio_models:
            u = by_model[i].units[0]
            pieces.append(Piece(i, PRIORITY, u, w, -1, 0, 0, costs[i].n_ops, costs[i].total(u),
                                flags=0, seq=-1, deadline=window))
    inst_slot = {}
    for (mi, inst, sub, u, w, a, b, s) in placed:
        key = (mi, inst)
        if key not in inst_slot:
            inst_slot[key] = len(inst_slot)
    for (mi, inst, sub, u, w, a, b, s) in placed:
        c = costs[mi]
        fetch = platform.copy_cycles(c.cut_bytes[a]) if a > 0 else 0
        store = platform.copy_cycles(c.cut_bytes[b]) if b < c.n_ops else 0
        flags = (FLAG_FIRST if a == 0 else 0) | (FLAG_LAST if b == c.n_ops else 0)
        if w >= H:
            # a pipeline stage that runs in the next table period: the same table
            # position as window w - H, working on the previous period's instance
            flags |= FLAG_CARRY
            w -= H
        pieces.append(Piece(mi, LOW, u, w, inst_slot[(mi, inst)], sub, a, b, c.range_cycles(u, a, b), fetch, store,
                            flags, s))
    prio_pos = {i: k for k, i in enumerate(order)}
    pieces.sort(key=lambda p: (p.phase, p.kind, prio_pos[p.model] if p.kind == PRIORITY else p.seq))
    _check_spans(pieces, H, n_units)
    if prefetch:
        _mark_prefetch(pieces, costs, platform)

    after = _constraints(pieces, models, costs, platform, prio_models)
    buffers, pbytes, unshared = _persistent(pieces, costs, models, H, after, plan_memory)
    # constraints are stored per constrained item, in item order
    after.sort(key=lambda a: (a.item, a.on, a.offset))
    sched = Schedule(platform, models, costs, mplans, window, tick, guard, float(fill), H, len(inst_slot), pieces,
                     after, buffers, pbytes, unshared, prio_cycles, remaining, problems, split,
                     overrun_tolerance=float(overrun_tolerance), max_lag=int(max_lag))
    for mp in mplans:
        if mp.kind == LOW:
            mi = models.index(next(m for m in models if m.name == mp.name))
            mp.instances = n_inst.get(mi, 0)
    sched.notes = list(notes)
    sched.memory = _memory_summary(sched, plan_memory)
    sched.options = dict(window_ms=window_ms, split=split, fill=fill, guard_us=guard_us, tick_us=tick_us,
                         max_hyper=max_hyper, strict=strict, plan_memory=plan_memory,
                         overrun_tolerance=overrun_tolerance, max_lag=max_lag, layer_scale=layer_scale,
                         prefetch=prefetch, spread=spread)
    return sched


def _mark_prefetch(pieces, costs, platform):
    """FLAG_PREFETCH on every low group that fetches inputs produced on its
    own unit in an earlier window and is the first low group of its unit in a
    window that has priority work on that unit."""
    prio = {(p.unit, p.phase) for p in pieces if p.kind == PRIORITY}
    first_low = {}
    for k, p in enumerate(pieces):
        if p.kind == LOW:
            first_low.setdefault((p.unit, p.phase), k)
    pos = {(p.model, p.instance, p.sub): k for k, p in enumerate(pieces) if p.kind == LOW}
    for k, p in enumerate(pieces):
        if (p.kind != LOW or p.sub == 0 or p.fetch <= 0 or p.flags & (FLAG_FIRST | FLAG_CARRY)
                or (p.unit, p.phase) not in prio or first_low[(p.unit, p.phase)] != k):
            continue
        q = pieces[pos[(p.model, p.instance, p.sub - 1)]]
        if q.unit != p.unit or q.carry or q.phase >= p.phase:
            continue
        c = costs[p.model]
        p.flags |= FLAG_PREFETCH
        p.prefetch_cycles = platform.prefetch_cycles([c.graph.tensors[t].nbytes for t in c.cut_tensors[p.first_op]])


def _place_periodic(i, c, platform, u, rate, left, get_h, tile, take, n_inst, max_hyper, mp, split, peak=0):
    """One instance every P windows, each split into groups that fit; the
    smallest P that leaves a window with room for `peak` cycles (the largest
    operator of the models still to place) when the period is free."""
    sp = _Splitter(c, platform, u)
    periods = [rate] if isinstance(rate, int) else range(1, max_hyper + 1)
    for P in periods:
        H = get_h()
        L = _lcm(H, P)
        if L > max_hyper:
            continue
        plans = []
        rest = [left[u][w % H] for w in range(L)]
        for k in range(L // P):
            caps = [left[u][(k * P + w) % H] for w in range(P)]
            groups = sp.balanced(caps) if split == "balanced" else sp.fit(caps)
            if groups is None:
                break
            plans.append(groups)
            for w, a, b in groups:
                rest[k * P + w] -= sp.est(a, b)
        else:
            if peak and max(rest) < peak and not isinstance(rate, int):
                continue
            tile(L)
            n_inst[i] = L // P
            for k, groups in enumerate(plans):
                for sub, (w, a, b) in enumerate(groups):
                    take(i, k, sub, u, k * P + w, a, b, sp.est(a, b))
            mp.period = P
            mp.groups = [(a, b) for _, a, b in plans[0]]
            return True
    return False


def _place_background(i, c, platform, u, left, get_h, tile, take, n_inst, max_hyper, mp):
    """Instances back to back through the leftover capacity; the table is
    lengthened (multiples of the current one) while that cuts the idle tail."""
    sp = _Splitter(c, platform, u)
    H0 = get_h()
    best = None
    for reps in range(1, max_hyper // H0 + 1):
        Hn = H0 * reps
        caps = [left[u][w % H0] for w in range(Hn)]
        pieces = _back_to_back(sp, c.n_ops, caps)
        if not pieces:
            continue
        used = sum(sp.est(a, b) for inst_pieces in pieces for _, a, b in inst_pieces)
        share = used / max(1, sum(caps))
        if best is None or share > best[0] + 1e-3:
            best = (share, Hn, pieces)
        if share > 0.995:
            break
    if best is None:
        return False
    _, Hn, pieces = best
    tile(Hn)
    n_inst[i] = len(pieces)
    for k, inst_pieces in enumerate(pieces):
        for sub, (w, a, b) in enumerate(inst_pieces):
            take(i, k, sub, u, w, a, b, sp.est(a, b))
    mp.period = None
    mp.groups = [(a, b) for _, a, b in pieces[0]]
    return True


def _back_to_back(sp, n_ops, caps):
    """Instances of a model (its _Splitter sp, n_ops operators) back to back through the windows'
    capacities caps, each group of operators as long as the room left in its window allows:
    [[(window, first, last), ...] per whole instance]; an unfinished last instance is dropped."""
    done, cur, a, w = [], [], 0, 0
    room = caps[0] if caps else 0
    while w < len(caps):
        b = a
        while b < n_ops and sp.est(a, b + 1) <= room:
            b += 1
        if b > a:
            cur.append((w, a, b))
            room -= sp.est(a, b)
            a = b
            if a == n_ops:
                done.append(cur)
                cur, a = [], 0
            continue
        w += 1
        room = caps[w] if w < len(caps) else 0
    return done


def _fill_unit(i, c, platform, u, left, H, take, n_inst):
    """More whole instances of background model i on unit u, back to back through what is left of
    u's remaining periods over the current table (not lengthened); an instance not finished within
    the table is not placed. Returns how many were placed."""
    sp = _Splitter(c, platform, u)
    done = _back_to_back(sp, c.n_ops, [left[u][w] for w in range(H)])
    k0 = n_inst[i]
    for k, inst_pieces in enumerate(done):
        for sub, (win, a, b) in enumerate(inst_pieces):
            take(i, k0 + k, sub, u, win, a, b, sp.est(a, b))
    n_inst[i] = k0 + len(done)
    return len(done)


def _place_pipeline(i, c, platform, units, rate, left, get_h, tile, take, n_inst, max_hyper, mp, split):
    """One stage per unit; stage s of instance k in windows [kP + sP, kP + sP + P).
    For each period P (smallest first), the stage cuts are chosen by dynamic
    programming among those where every stage fits its unit's P windows in
    every instance, minimising the largest share of a unit's capacity."""
    S = len(units)
    n = c.n_ops
    inf = float("inf")
    periods = [rate] if isinstance(rate, int) else range(1, max_hyper + 1)
    for P in periods:
        H = get_h()
        L = _lcm(H, P)
        while L < (S - 1) * P:   # every stage's window must stay below 2 table periods
            L *= 2
        if L > max_hyper:
            continue
        caps_of = {}
        for s in range(S):
            u = units[s]
            caps_of[s] = [[left[u][(k * P + s * P + w) % H] for w in range(P)] for k in range(L // P)]

        def stage(s, a, b, _memo={}):
            """(groups per instance) when ops [a, b) fit unit s's windows in every instance, else None."""
            key = (P, s, a, b)
            if key not in _memo:
                sp = _Splitter(c, platform, units[s], a, b)
                out = []
                for caps in caps_of[s]:
                    g = sp.balanced(caps) if split == "balanced" else sp.fit(caps)
                    if g is None:
                        out = None
                        break
                    out.append(g)
                _memo[key] = out
            return _memo[key]

        share = [max(1.0, P * sum(left[u]) / len(left[u])) for u in units]
        best = [[inf] * (n + 1) for _ in range(S + 1)]
        cut = [[0] * (n + 1) for _ in range(S + 1)]
        best[0][0] = 0.0
        for s in range(1, S + 1):
            for b in range(s, n + 1) if s < S else (n,):
                for a in range(s - 1, b):
                    if best[s - 1][a] == inf:
                        continue
                    v = max(best[s - 1][a], c.range_cycles(units[s - 1], a, b) / share[s - 1])
                    if v < best[s][b] and stage(s - 1, a, b) is not None:
                        best[s][b], cut[s][b] = v, a
        if best[S][n] == inf:
            continue
        bounds, b = [], n
        for s in range(S, 0, -1):
            a = cut[s][b]
            bounds.append((a, b))
            b = a
        bounds.reverse()
        plans = [[(s, units[s], stage(s, a, b)[k]) for s, (a, b) in enumerate(bounds)] for k in range(L // P)]
        tile(L)
        n_inst[i] = L // P
        for k, inst in enumerate(plans):
            sub = 0
            for s, u, groups in inst:
                sp = _Splitter(c, platform, u, bounds[s][0], bounds[s][1])
                for (w, a, b) in groups:
                    take(i, k, sub, u, k * P + s * P + w, a, b, sp.est(a, b))
                    sub += 1
        mp.period = P
        mp.groups = [(a, b) for _, _, groups in plans[0] for _, a, b in groups]
        return True
    return False


def _check_spans(pieces, H, n_units):
    for u in range(n_units):
        for kind in (PRIORITY, LOW):
            ph = [p.phase for p in pieces if p.unit == u and p.kind == kind]
            if ph and max(ph) - min(ph) >= H:
                raise ScheduleError(f"unit {u}: its work spans windows {min(ph)}..{max(ph)} of a table of {H} "
                                    f"windows, so table order would not be time order; give this unit fewer "
                                    f"pipeline stages or a longer period")


def _constraints(pieces, models, costs, platform, prio_models):
    """Data order, buffer protection and priority dependencies."""
    after = []
    pos = {}
    for k, p in enumerate(pieces):
        if p.kind == LOW:
            pos[(p.model, p.instance, p.sub)] = k
    for k, p in enumerate(pieces):
        if p.kind != LOW:
            continue
        # run r of an item works on instance r - carry: offsets follow from that
        if p.sub > 0:
            prev = pos[(p.model, p.instance, p.sub - 1)]
            q = pieces[prev]
            nbytes = costs[p.model].cut_bytes[p.first_op]
            hand = platform.handover_cycles(nbytes, q.unit, p.unit)
            after.append(After(k, prev, 1 - p.carry + q.carry, hand, "inputs"))
            # the producer may not overwrite the buffer before this consumer read it
            after.append(After(prev, k, p.carry - q.carry, 0, "buffer"))
        if p.flags & FLAG_LAST and p.sub > 0:
            first = pos[(p.model, p.instance, 0)]
            if not any(a.item == first and a.on == k for a in after):
                after.append(After(first, k, p.carry - pieces[first].carry, 0, "instance"))
    # a priority model that feeds another: the consumer's run of a window waits for it
    for k, p in enumerate(pieces):
        if p.kind != PRIORITY:
            continue
        for q, r in enumerate(pieces):
            if (r.kind == PRIORITY and r.phase == p.phase and r.model in prio_models
                    and models[r.model].name in models[p.model].feeds):
                after.append(After(q, k, 1, platform.handover_cycles(costs[p.model].output_bytes, p.unit, r.unit),
                                   "feeds"))
    return after


def _persistent(pieces, costs, models, H, after, plan_memory):
    """Persistent buffers for intermediates crossing a window (or unit), with
    lifetimes in table order, placed by pyembed.plan; buffers that share
    bytes get constraints so they are used in turn."""
    step = {k: k for k in range(len(pieces))}
    last_step = len(pieces) - 1
    bufs = []
    for a in list(after):
        if a.why != "inputs":
            continue
        cons, prod = pieces[a.item], pieces[a.on]
        c = costs[cons.model]
        size = c.cut_bytes[cons.first_op]
        if size <= 0:
            continue
        wraps = bool(cons.carry or prod.carry)
        first, last = (0, last_step) if wraps else (step[a.on], step[a.item])
        bufs.append(PersistentBuffer(f"{models[cons.model].name}_i{cons.instance}_cut{cons.first_op}", cons.model,
                                     cons.instance, cons.first_op, list(c.cut_tensors[cons.first_op]), size, a.on,
                                     a.item, first, last, wraps))
    unshared = sum(align(b.size) for b in bufs)
    if not bufs:
        return bufs, 0, 0
    placed = None
    if plan_memory:
        try:
            from pyembed.plan import Problem, plan_problem
            prob = Problem(num_steps=len(pieces))
            for b in bufs:
                prob.add_buffer(int(b.size), int(b.first_step), int(b.last_step), name=b.name, kind="persistent")
            plan = plan_problem(prob, None, "greedy_size")
            placed = [int(plan.offset_of(k)) for k in range(len(bufs))]
            total = int(plan.arena_size)
        except ImportError:  # pragma: no cover - the planner ships with pyembed
            placed = None
    if placed is None:
        placed, total = [], 0
        for b in bufs:
            placed.append(total)
            total += align(b.size)
    for b, off in zip(bufs, placed):
        b.offset = off
    # buffers sharing bytes are used in turn
    for x in range(len(bufs)):
        for y in range(len(bufs)):
            b1, b2 = bufs[x], bufs[y]
            if x == y or b1.last_step >= b2.first_step:
                continue
            if b1.offset < b2.offset + align(b2.size) and b2.offset < b1.offset + align(b1.size):
                after.append(After(b2.producer, b1.consumer, 1, 0, "shared bytes"))
                after.append(After(b1.producer, b2.consumer, 0, 0, "shared bytes"))
    return bufs, total, unshared


def _memory_summary(s, plan_memory):
    """RAM the schedule needs: per unit, the largest activation arena of the
    models it runs (they run one at a time, to completion); the persistent
    buffers; the dispatcher state."""
    arenas = {}
    for i, m in enumerate(s.models):
        size = None
        if plan_memory:
            try:
                from pyembed.plan import plan_graph
                size = int(plan_graph(m.graph, algorithm="greedy_size").arena_size)
            except Exception:  # noqa: BLE001 - fall back to the graph's own no-reuse layout
                size = None
        if size is None:
            try:
                size = int(m.graph.linear_layout().arena_size)
            except Exception:  # noqa: BLE001
                size = 0
        arenas[m.name] = size
    per_unit = [0] * s.n_units
    for u, kinds in s.arena_blocks():
        names = {s.models[p.model].name for p in s.items if p.unit == u and p.kind in kinds}
        per_unit[u] += max((arenas[n] for n in names), default=0)
    state = 8 * ((24 * len(s.items) + 7) // 8) + 48 * s.n_units + 8 * s.n_instances
    return {"arena_per_model": arenas, "arena_per_unit": per_unit, "persistent": s.persistent_bytes,
            "persistent_unshared": s.persistent_bytes_unshared, "dispatcher_state": state,
            "total": sum(per_unit) + s.persistent_bytes + state}
