"""Reference schedules to compare the cooperative split schedule with, on the
same workload and the same timing model (one unit):

* first-come-first-served, run to completion, no splitting: every job (a
  priority frame, or a whole low-priority model run) runs in release order
  until it ends; a long low-priority model blocks the next priority frames,
  which then miss;
* rate-monotonic with ideal pre-emption: the shorter the period, the higher
  the priority; a release pre-empts lower-priority work at once, at no cost
  (no context switch, no saved state) - the theoretical reference that a
  cooperative schedule can at best match.

The low-priority models are released at the rate the cooperative schedule
delivers their results (one release every windows/results windows), so the
three schedules do the same work.
"""
import heapq

import numpy as np

from pyembed.schedule.plan import LOW, PRIORITY


def _jitter(n, jitter, rng):
    return 1.0 + rng.uniform(-jitter, jitter, size=n) if jitter else np.ones(n)


def workload_jobs(schedule, windows, periods, jitter=0.01, seed=1, unit=0):
    """Jobs (release, rank, cost, kind, model) of the schedule's models on
    `unit` over `windows` windows. periods: {low model name: windows between
    releases (float allowed)}."""
    rng = np.random.default_rng(seed)
    W = schedule.window_cycles
    jobs = []
    ranks = {mp.name: mp.rank for mp in schedule.model_plans}
    for mi, m in enumerate(schedule.models):
        mp = next(p for p in schedule.model_plans if p.name == m.name)
        if unit not in mp.units:
            continue
        cost = schedule.costs[mi].total(unit)
        if mp.kind == PRIORITY:
            rel = np.arange(windows, dtype=np.int64) * W
        else:
            per = periods.get(m.name)
            if not per:
                continue
            k = np.arange(int(windows / per) + 1)
            rel = (np.floor(k * per).astype(np.int64)) * W
            rel = rel[rel < windows * W]
        c = (cost * _jitter(len(rel), jitter, rng)).astype(np.int64)
        for r, cc in zip(rel.tolist(), c.tolist()):
            jobs.append((r, ranks[m.name], cc, mp.kind, mi))
    return jobs


def fcfs(jobs):
    """Run to completion in release order (priority first on ties)."""
    t = 0
    out = []
    for rel, rank, cost, kind, mi in sorted(jobs, key=lambda j: (j[0], j[1])):
        start = max(t, rel)
        t = start + cost
        out.append((rel, kind, mi, [(start, t)], t))
    return out


def rate_monotonic(jobs, periods_by_model):
    """Ideal pre-emptive fixed priority by period (ties by rank)."""
    pending = sorted(jobs, key=lambda j: j[0])
    ready = []
    seq = 0
    t = 0
    i = 0
    out = {}
    spans = {}
    n = len(pending)
    while i < n or ready:
        if not ready:
            t = max(t, pending[i][0])
        while i < n and pending[i][0] <= t:
            rel, rank, cost, kind, mi = pending[i]
            heapq.heappush(ready, (periods_by_model[mi], rank, rel, seq, cost, kind, mi))
            spans[seq] = []
            seq += 1
            i += 1
        per, rank, rel, s, left, kind, mi = heapq.heappop(ready)
        nxt = pending[i][0] if i < n else None
        run = left if nxt is None else min(left, nxt - t)
        if run > 0:
            spans[s].append((t, t + run))
        t += run
        left -= run
        if left > 0:
            heapq.heappush(ready, (per, rank, rel, s, left, kind, mi))
        else:
            out[s] = (rel, kind, mi, spans.pop(s), t)
    return [out[k] for k in sorted(out)]


def figures(schedule, done, windows):
    """The figures of merit of a finished job list (as Run.summary gives)."""
    W = schedule.window_cycles
    busy = {PRIORITY: np.zeros(windows, dtype=np.int64), LOW: np.zeros(windows, dtype=np.int64)}
    prio_comp = {}
    misses = 0
    lat = {}
    for rel, kind, mi, spans, end in done:
        for a, b in spans:
            while a < b:
                w = a // W
                if w >= windows:
                    break
                e = min(b, (w + 1) * W)
                busy[kind][w] += e - a
                a = e
        if rel >= windows * W:
            continue
        if kind == PRIORITY:
            prio_comp.setdefault(mi, []).append(end - rel)
            if end > rel + W:
                misses += 1
        else:
            lat.setdefault(mi, []).append((end - rel) / W)
    rem = W * windows - int(busy[PRIORITY].sum())
    prio = {}
    for mi, comp in prio_comp.items():
        c = np.array(comp)
        prio[schedule.models[mi].name] = {
            "runs": len(c), "deadline_misses": int((c > W).sum()),
            "jitter_ms": schedule.ms(int(c.max() - c.min())),
            "jitter_pct_window": 100.0 * float(c.max() - c.min()) / W,
            "completion_ms_max": schedule.ms(int(c.max())),
        }
    low = {}
    for mi, ls in lat.items():
        a = np.array(ls)
        low[schedule.models[mi].name] = {"results": len(a), "latency_windows_mean": float(a.mean()),
                                         "latency_windows_max": float(a.max())}
    return {
        "priority": prio,
        "priority_deadline_misses": misses,
        "priority_jitter_pct_window": max((v["jitter_pct_window"] for v in prio.values()), default=0.0),
        "utilisation": {"overall": int(busy[LOW].sum()) / rem if rem > 0 else 0.0},
        "low": low,
    }


def compare(schedule, run, jitter=0.01, seed=1):
    """FCFS and rate-monotonic figures for the workload `run` (a Run of the
    cooperative schedule) delivered: {"fcfs": ..., "rm_preemptive": ...}."""
    windows = run.windows
    low = run.low_latency()
    periods = {name: windows / v["results"] for name, v in low.items() if v.get("results")}
    jobs = workload_jobs(schedule, windows, periods, jitter, seed)
    per_model = {}
    for mi, m in enumerate(schedule.models):
        mp = next(p for p in schedule.model_plans if p.name == m.name)
        per_model[mi] = 1.0 if mp.kind == PRIORITY else periods.get(m.name, float("inf"))
    return {"fcfs": figures(schedule, fcfs(jobs), windows),
            "rm_preemptive": figures(schedule, rate_monotonic(jobs, per_model), windows),
            "release_periods_windows": periods}
