# pyembed-csrc: pe_sched.c
# cython: language_level=3, boundscheck=False, wraparound=False
"""Bindings for the cooperative dispatcher (pe_sched.h).

The table arrives as numpy structured arrays whose dtypes mirror the C
structs (pyembed.schedule.dispatch defines them and validates the values);
this module keeps them alive, runs the C dispatcher over them, and provides
two kinds of work functions:

* a Python callable work(item_index, frame, start) -> cycles (the host runs
  the real kernels of the sub-model and reports the cycles it charged);
* a built-in timing model in C (no Python per item, for long runs):
  cycles = cycles[item] * (1 + variation) + injected overrun, where the
  variation is a deterministic pseudo-random fraction in [-jitter, +jitter]
  per run and the overruns are (item, frame, extra cycles) triples.

Prefetches (items flagged PE_SCHED_PREFETCH) go to a Python callable
prefetch(op, item_index, frame, now, ready_at) -> ready_at when one is given
(op 0: start the copy, 1: check it), else to a C function that takes the
planned prefetch_cycles (the timing model's view of the DMA).
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memset
from pyembed._ext.pe_types cimport *

cnp.import_array()

cdef extern from "pyembed/pe_sched.h":
    ctypedef struct pe_sched_item:
        int32_t model
        int32_t sub
        int32_t kind
        int32_t unit
        int32_t work
        int32_t phase
        int32_t instance
        uint32_t flags
        int32_t first_op
        int32_t last_op
        int32_t first_after
        int32_t n_after
        uint32_t est_cycles
        uint32_t deadline_cycles
        uint32_t prefetch_cycles

    ctypedef struct pe_sched_after:
        int32_t item
        int32_t offset
        uint32_t handover_cycles

    ctypedef struct pe_sched_table:
        uint32_t window_cycles
        uint32_t tick_cycles
        uint32_t guard_cycles
        int32_t hyper_windows
        int32_t n_units
        int32_t n_instances
        int32_t n_items
        int32_t n_after
        const pe_sched_item *items
        const pe_sched_after *after
        uint32_t overrun_tolerance_q16
        int32_t max_lag_windows

    ctypedef pe_status (*pe_sched_work_fn)(void *user, int32_t item_index, const pe_sched_item *item,
                                           int64_t frame, uint64_t start, uint32_t *cycles)
    ctypedef pe_status (*pe_sched_prefetch_fn)(void *user, int32_t op, int32_t item_index,
                                               const pe_sched_item *item, int64_t frame, uint64_t now,
                                               uint64_t *ready_at)

    ctypedef struct pe_sched_event:
        int32_t item
        int32_t unit
        uint32_t flags
        uint32_t est_cycles
        int64_t frame
        int64_t planned_window
        uint64_t release
        uint64_t start
        uint64_t end
        uint64_t wake

    ctypedef struct pe_sched_counters:
        uint64_t priority_runs
        uint64_t low_runs
        uint64_t deadline_misses
        uint64_t late_starts
        uint64_t overruns
        uint64_t deferrals
        uint64_t no_fit
        uint64_t lagging_runs
        uint64_t dropped
        uint64_t priority_cycles
        uint64_t low_cycles
        uint64_t max_late_cycles
        uint64_t max_overrun_cycles
        uint64_t prefetches
        uint64_t prefetch_waits
        uint64_t prefetch_late
        uint64_t prefetch_cycles

    ctypedef struct pe_sched_unit_state:
        int32_t prio_pos
        int32_t low_pos
        uint32_t prio_period
        uint32_t low_period
        uint64_t clock
        int64_t deferred_window
        uint64_t wake
        uint32_t prio_reserve
        int32_t stall_item

    ctypedef struct pe_sched_state:
        const pe_sched_table *table
        pe_sched_unit_state *units
        pe_sched_counters counters

    int PE_SCHED_EV_RAN, PE_SCHED_EV_OVERRUN, PE_SCHED_EV_MISS, PE_SCHED_EV_LATE
    int PE_SCHED_EV_LAG, PE_SCHED_EV_DEFER, PE_SCHED_EV_NO_FIT, PE_SCHED_EV_FAULT, PE_SCHED_EV_DROP
    int PE_SCHED_EV_PREFETCH, PE_SCHED_EV_PREFETCH_LATE, PE_SCHED_EV_STALL, PE_SCHED_PREFETCH_START, PE_SCHED_PREFETCH_CHECK

    pe_status pe_sched_check_table(const pe_sched_table *table) nogil
    pe_status pe_sched_get_buffer_size(const pe_sched_table *table, int32_t *size) nogil
    pe_status pe_sched_init(const pe_context *ctx, const pe_sched_table *table,
                            const pe_sched_work_fn *fns, int32_t n_fns, void *user,
                            pe_sched_state *state) nogil
    pe_status pe_sched_poll(pe_sched_state *state, int32_t unit, uint64_t now,
                            pe_sched_event *ev) nogil
    pe_status pe_sched_run(pe_sched_state *state, uint64_t until, pe_sched_event *events,
                           int32_t max_events, int32_t *n_events) nogil
    pe_status pe_sched_get_estimate(const pe_sched_state *state, int32_t item, uint32_t *est) nogil
    pe_status pe_sched_set_prefetch(pe_sched_state *state, pe_sched_prefetch_fn fn) nogil


ITEM_SIZE = sizeof(pe_sched_item)
AFTER_SIZE = sizeof(pe_sched_after)
EVENT_SIZE = sizeof(pe_sched_event)
EV_RAN = PE_SCHED_EV_RAN
EV_OVERRUN = PE_SCHED_EV_OVERRUN
EV_MISS = PE_SCHED_EV_MISS
EV_LATE = PE_SCHED_EV_LATE
EV_LAG = PE_SCHED_EV_LAG
EV_DEFER = PE_SCHED_EV_DEFER
EV_NO_FIT = PE_SCHED_EV_NO_FIT
EV_FAULT = PE_SCHED_EV_FAULT
EV_DROP = PE_SCHED_EV_DROP
EV_PREFETCH = PE_SCHED_EV_PREFETCH
EV_PREFETCH_LATE = PE_SCHED_EV_PREFETCH_LATE
EV_STALL = PE_SCHED_EV_STALL
PREFETCH_START = PE_SCHED_PREFETCH_START
PREFETCH_CHECK = PE_SCHED_PREFETCH_CHECK


# ---- the built-in timing model -------------------------------------------------

cdef struct timing_model:
    const uint32_t *cycles       # per item
    uint32_t jitter_ppm          # +- variation, parts per million
    uint64_t seed
    const int32_t *ov_item       # injected overruns
    const int64_t *ov_frame
    const uint32_t *ov_extra
    int32_t n_ov


cdef inline uint64_t mix64(uint64_t x) noexcept nogil:
    # splitmix64 finaliser: a deterministic hash of (seed, item, run)
    x += <uint64_t>0x9E3779B97F4A7C15
    x = (x ^ (x >> 30)) * <uint64_t>0xBF58476D1CE4E5B9
    x = (x ^ (x >> 27)) * <uint64_t>0x94D049BB133111EB
    return x ^ (x >> 31)


cdef pe_status timing_work(void *user, int32_t idx, const pe_sched_item *item, int64_t frame,
                           uint64_t start, uint32_t *cycles) noexcept nogil:
    cdef timing_model *m = <timing_model *>user
    cdef uint64_t base = m.cycles[idx]
    cdef uint64_t h
    cdef int64_t delta = 0
    cdef int32_t k
    cdef uint64_t total
    if m.jitter_ppm > 0:
        h = mix64(m.seed ^ (<uint64_t>idx * <uint64_t>0x100000001B3) ^ (<uint64_t>frame << 20) ^ start)
        # uniform in [-jitter, +jitter] of base
        delta = <int64_t>((h % (2 * <uint64_t>m.jitter_ppm + 1))) - <int64_t>m.jitter_ppm
        delta = delta * <int64_t>base // 1000000
    total = <uint64_t>(<int64_t>base + delta)
    for k in range(m.n_ov):
        if m.ov_item[k] == idx and m.ov_frame[k] == frame:
            total += m.ov_extra[k]
    if total > <uint64_t>0xFFFFFFFF:
        return PE_ERR_OVERFLOW
    cycles[0] = <uint32_t>total
    return PE_OK


cdef pe_status planned_prefetch(void *user, int32_t op, int32_t idx, const pe_sched_item *item, int64_t frame,
                                uint64_t now, uint64_t *ready_at) noexcept nogil:
    # the copy takes its planned cycles; a check finds what the start said
    if op == PE_SCHED_PREFETCH_START:
        ready_at[0] = now + item.prefetch_cycles
    return PE_OK


# ---- Python work functions -----------------------------------------------------

cdef pe_status python_work(void *user, int32_t idx, const pe_sched_item *item, int64_t frame,
                           uint64_t start, uint32_t *cycles) noexcept with gil:
    cdef Dispatcher d = <Dispatcher>user
    try:
        c = d._work(int(idx), int(frame), int(start))
        c = int(c)
        if c < 0 or c > 0xFFFFFFFF:
            raise ValueError(f"work function returned {c} cycles for item {idx}; expected 0..2**32-1")
        cycles[0] = <uint32_t>c
        return PE_OK
    except BaseException as e:  # re-raised by the caller after the C loop returns
        d._error = e
        return PE_ERR_STATE


cdef pe_status python_prefetch(void *user, int32_t op, int32_t idx, const pe_sched_item *item, int64_t frame,
                               uint64_t now, uint64_t *ready_at) noexcept with gil:
    cdef Dispatcher d = <Dispatcher>user
    try:
        r = int(d._prefetch(int(op), int(idx), int(frame), int(now), int(ready_at[0])))
        if r < 0 or r > 0xFFFFFFFFFFFFFFFF:
            raise ValueError(f"prefetch function returned the time {r} for item {idx}")
        ready_at[0] = <uint64_t>r
        return PE_OK
    except BaseException as e:  # re-raised by the caller after the C loop returns
        d._error = e
        return PE_ERR_STATE


cdef dict counters_dict(pe_sched_counters *c):
    return {
        "priority_runs": c.priority_runs,
        "low_runs": c.low_runs,
        "deadline_misses": c.deadline_misses,
        "late_starts": c.late_starts,
        "overruns": c.overruns,
        "deferrals": c.deferrals,
        "no_fit": c.no_fit,
        "lagging_runs": c.lagging_runs,
        "dropped": c.dropped,
        "priority_cycles": c.priority_cycles,
        "low_cycles": c.low_cycles,
        "max_late_cycles": c.max_late_cycles,
        "max_overrun_cycles": c.max_overrun_cycles,
        "prefetches": c.prefetches,
        "prefetch_waits": c.prefetch_waits,
        "prefetch_late": c.prefetch_late,
        "prefetch_cycles": c.prefetch_cycles,
    }


cdef class Dispatcher:
    """The C dispatcher over a table held in numpy arrays.

    work: a callable (item_index, frame, start_cycle) -> cycles, or None to use
    the timing model given by timing=(cycles_per_item uint32 array,
    jitter_ppm, seed, overrun_items int32, overrun_frames int64,
    overrun_extra uint32). prefetch: a callable (op, item_index, frame, now,
    ready_at) -> ready_at for prefetched items (op 0 starts the copy, 1
    checks it), or None for the planned prefetch time."""
    cdef pe_sched_table table
    cdef pe_sched_state state
    cdef pe_sched_work_fn fns[64]
    cdef int32_t n_fns
    cdef timing_model model
    cdef object _items, _after, _arena, _timing_arrays
    cdef public object _work
    cdef public object _prefetch
    cdef public object _error
    cdef bint python_mode

    def __init__(self, items, after, uint32_t window_cycles, uint32_t tick_cycles,
                 uint32_t guard_cycles, int32_t hyper_windows, int32_t n_units, int32_t n_instances,
                 work=None, timing=None, uint32_t overrun_tolerance_q16=0,
                 int32_t max_lag_windows=-1, prefetch=None):
        cdef int32_t size = 0
        cdef pe_context ctx
        cdef cnp.ndarray arena
        if items.dtype.itemsize != sizeof(pe_sched_item) or not items.flags.c_contiguous:
            raise TypeError("items: expected a C-contiguous array of the pe_sched_item dtype")
        if len(after) and (after.dtype.itemsize != sizeof(pe_sched_after) or not after.flags.c_contiguous):
            raise TypeError("after: expected a C-contiguous array of the pe_sched_after dtype")
        self._items = items
        self._after = after
        self.n_fns = int(items["work"].max()) + 1 if len(items) else 1
        if self.n_fns > 64 or self.n_fns < 1:
            raise ValueError(f"items: work indices must lie in 0..63, got up to {self.n_fns - 1}")
        self._error = None
        memset(&self.table, 0, sizeof(self.table))
        self.table.window_cycles = window_cycles
        self.table.tick_cycles = tick_cycles
        self.table.guard_cycles = guard_cycles
        self.table.hyper_windows = hyper_windows
        self.table.n_units = n_units
        self.table.n_instances = n_instances
        self.table.overrun_tolerance_q16 = overrun_tolerance_q16
        self.table.max_lag_windows = max_lag_windows
        self.table.n_items = <int32_t>len(items)
        self.table.n_after = <int32_t>len(after)
        self.table.items = <const pe_sched_item *>cnp.PyArray_DATA(items) if len(items) else NULL
        self.table.after = <const pe_sched_after *>cnp.PyArray_DATA(after) if len(after) else NULL
        check(pe_sched_get_buffer_size(&self.table, &size), "pe_sched_get_buffer_size",
              "the schedule table is inconsistent (pe_sched_check_table)")
        arena = np.zeros((size + 7) // 8, dtype=np.uint64)
        self._arena = arena
        ctx.buf = cnp.PyArray_DATA(arena)
        ctx.size = size
        ctx.stats = NULL
        if work is not None:
            self.python_mode = True
            self._work = work
            for k in range(self.n_fns):
                self.fns[k] = python_work
            check(pe_sched_init(&ctx, &self.table, self.fns, self.n_fns, <void *>self, &self.state),
                  "pe_sched_init")
            self._prefetch = prefetch
            check(pe_sched_set_prefetch(&self.state, python_prefetch if prefetch is not None else planned_prefetch),
                  "pe_sched_set_prefetch")
        else:
            if timing is None:
                raise TypeError("give work= (a callable) or timing= (the timing model)")
            self.python_mode = False
            cyc, jitter_ppm, seed, ov_item, ov_frame, ov_extra = timing
            cyc = np.ascontiguousarray(cyc, dtype=np.uint32)
            ov_item = np.ascontiguousarray(ov_item, dtype=np.int32)
            ov_frame = np.ascontiguousarray(ov_frame, dtype=np.int64)
            ov_extra = np.ascontiguousarray(ov_extra, dtype=np.uint32)
            if len(cyc) != len(items) or not (len(ov_item) == len(ov_frame) == len(ov_extra)):
                raise ValueError("timing: one cycle count per item, overrun arrays of equal length")
            self._timing_arrays = (cyc, ov_item, ov_frame, ov_extra)
            self.model.cycles = <const uint32_t *>cnp.PyArray_DATA(cyc)
            self.model.jitter_ppm = <uint32_t>jitter_ppm
            self.model.seed = <uint64_t>seed
            self.model.n_ov = <int32_t>len(ov_item)
            self.model.ov_item = <const int32_t *>cnp.PyArray_DATA(ov_item)
            self.model.ov_frame = <const int64_t *>cnp.PyArray_DATA(ov_frame)
            self.model.ov_extra = <const uint32_t *>cnp.PyArray_DATA(ov_extra)
            for k in range(self.n_fns):
                self.fns[k] = timing_work
            check(pe_sched_init(&ctx, &self.table, self.fns, self.n_fns, <void *>&self.model, &self.state),
                  "pe_sched_init")
            if prefetch is not None:
                raise TypeError("prefetch= goes with work= (the timing model prefetches in the planned time)")
            check(pe_sched_set_prefetch(&self.state, planned_prefetch), "pe_sched_set_prefetch")

    def run(self, uint64_t until, event_dtype, int32_t chunk=65536):
        """Drive every unit to `until`; returns the events (structured array)."""
        cdef cnp.ndarray buf
        cdef int32_t n = 0
        cdef int st
        parts = []
        while True:
            buf = np.zeros(chunk, dtype=event_dtype)
            if self.python_mode:
                st = pe_sched_run(&self.state, until, <pe_sched_event *>cnp.PyArray_DATA(buf), chunk, &n)
            else:
                with nogil:
                    st = pe_sched_run(&self.state, until, <pe_sched_event *>cnp.PyArray_DATA(buf),
                                      chunk, &n)
            parts.append(buf[:n])
            if st != PE_OK:
                err, self._error = self._error, None
                if err is not None:
                    raise err
                check(st, "pe_sched_run", "a work function failed")
            if n < chunk:
                break
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def poll(self, int32_t unit, uint64_t now, event_dtype):
        """One dispatcher decision for `unit` at `now`; returns a 1-element event array."""
        cdef cnp.ndarray buf = np.zeros(1, dtype=event_dtype)
        cdef int st = pe_sched_poll(&self.state, unit, now, <pe_sched_event *>cnp.PyArray_DATA(buf))
        if st != PE_OK:
            err, self._error = self._error, None
            if err is not None:
                raise err
            check(st, "pe_sched_poll", "unit out of range or a work function failed")
        return buf

    def counters(self):
        return counters_dict(&self.state.counters)

    def estimate(self, int32_t item):
        cdef uint32_t est = 0
        check(pe_sched_get_estimate(&self.state, item, &est), "pe_sched_get_estimate", "item out of range")
        return int(est)

    def state_bytes(self):
        cdef int32_t size = 0
        check(pe_sched_get_buffer_size(&self.table, &size), "pe_sched_get_buffer_size")
        return int(size)

    def clocks(self):
        return [int(self.state.units[u].clock) for u in range(self.table.n_units)]
