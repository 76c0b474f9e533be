"""The dispatcher never stalls silently (pe_sched.c's invariant, issue 18).

Tables driven straight through pyembed._ext._sched.Dispatcher (the planner
never writes these shapes; the fuzzer did): a released priority run that
waits for another unit's work must not hold back its unit's lagging low
work that this other work needs, or both units stop with no event.
"""
import numpy as np
import pytest

from pyembed.schedule.run import EV_DROP, EV_RAN, EV_STALL
from pyembed.schedule.table import AFTER_DTYPE, EVENT_DTYPE, ITEM_DTYPE

_sched = pytest.importorskip("pyembed._ext._sched")

PRIO, LOW = 0, 1
FIRST, LAST, CARRY, PREFETCH = 1, 2, 4, 8


def _table(rows, after):
    items = np.zeros(len(rows), dtype=ITEM_DTYPE)
    for k, (kind, unit, phase, inst, flags, first_after, n_after, est, deadline, prefetch) in enumerate(rows):
        items[k] = (k, 0, kind, unit, 0, phase, inst, flags, 0, 1, first_after, n_after, est, deadline, prefetch)
    return items, np.array(after, dtype=AFTER_DTYPE)


def _run(items, after, periods, window, tick, guard, hyper, n_units, n_instances, max_lag=-1):
    def work(idx, frame, start):
        return int(items["est_cycles"][idx])

    d = _sched.Dispatcher(items, after, window, tick, guard, hyper, n_units, n_instances, work=work,
                          max_lag_windows=max_lag)
    return d.run(window * hyper * periods, EVENT_DTYPE)


def test_priority_waiting_across_units_lets_lagging_low_work_run():
    """Reduced sched/priority-never-runs-silent: priority item 3 (unit 1,
    window 1) waits for priority item 2 (unit 0), which waits for low item 1
    (unit 1, window 0) that the guard deferred in window 0."""
    items, after = _table([
        (PRIO, 1, 0, -1, 0, 0, 0, 300, 1000, 0),
        (LOW, 1, 0, 0, FIRST | LAST, 0, 0, 600, 0, 0),
        (PRIO, 0, 1, -1, 0, 0, 1, 100, 1000, 0),
        (PRIO, 1, 1, -1, 0, 1, 1, 100, 1000, 0),
    ], [(1, 1, 0), (2, 1, 0)])
    ev = _run(items, after, periods=3, window=1000, tick=10, guard=150, hyper=2, n_units=2, n_instances=1)
    ran = ev[(ev["flags"] & EV_RAN) != 0]
    for k in range(4):
        assert (ran["item"] == k).sum() == 3, k
    # in each period: item 1 at the start of window 1, then item 2, then item 3
    for k, offset in ((1, 0), (2, 600), (3, 700)):
        assert list(ran["start"][ran["item"] == k]) == [(2 * i + 1) * 1000 + offset for i in range(3)]
    assert not (ev["flags"] & EV_STALL).any()


def test_fuzz_table_priority_never_runs_silent():
    """The table of tests/data/regressions/sched/priority-never-runs-silent
    (decoded with FUZZ_VERBOSE=1), every run taking its estimate: every
    priority item runs once per table period, every low item runs or is
    dropped in every period but the last."""
    items, after = _table([
        (PRIO, 1, 0, -1, 0, 1, 1, 974, 1262, 379),
        (LOW, 1, 1, 0, CARRY, 6, 0, 0, 1262, 379),
        (LOW, 1, 2, 1, PREFETCH | LAST, 2, 0, 817, 674, 337),
        (LOW, 1, 2, 1, PREFETCH | LAST, 2, 0, 804, 1467, 780),
        (PRIO, 0, 2, 1, LAST, 2, 0, 804, 2052, 780),
        (PRIO, 0, 2, 1, LAST, 0, 1, 974, 1311, 337),
        (PRIO, 0, 2, 1, LAST, 2, 1, 618, 1262, 428),
        (PRIO, 0, 2, 0, FIRST, 1, 1, 974, 1262, 429),
        (PRIO, 0, 3, -1, 0, 6, 1, 970, 1262, 379),
        (LOW, 1, 3, 2, FIRST | LAST, 3, 2, 31, 271, 379),
    ], [(9, 0, 250), (6, 1, 140), (0, -1, 0), (0, -1, 0), (0, -1, 0), (0, -1, 0), (0, -1, 0)])
    periods = 6
    ev = _run(items, after, periods=periods, window=2160, tick=54, guard=39, hyper=4, n_units=2,
              n_instances=3, max_lag=3)
    done = ev[(ev["flags"] & (EV_RAN | EV_DROP)) != 0]
    for k in range(len(items)):
        n = (done["item"] == k).sum()
        if items["kind"][k] == PRIO:
            assert n == periods, (k, n)
        elif not items["flags"][k] & CARRY:
            assert n >= periods - 1, (k, n)
