/*
 * pe_sched.h - cooperative periodic dispatcher for a static schedule table
 * (SPEC section 7).
 *
 * Frames arrive at a fixed rate; each opens a window of window_cycles. The
 * host-side planner (pyembed/schedule) reserves a priority period in every
 * window, splits the low-priority models into sub-models that fit what is
 * left, and writes the result as a static table of work items covering
 * hyper_windows windows (the table repeats). This file executes that table:
 *
 *  - Work items run to completion through a function-pointer table the host
 *    provides (pe_sched_work_fn); nothing is pre-empted.
 *  - Each processing unit (core or accelerator) has two queues in table
 *    order: its priority items and its low-priority items. A priority item is
 *    released at the start of its window and always runs first (late if a
 *    low item overran, never dropped); while it waits for a run that has
 *    not happened (its constraints), low items planned in an earlier window
 *    (lagging) run meanwhile without the guard, and the others wait for it.
 *    A low item is released at the start of
 *    the window it was planned in and starts only if, by its current
 *    estimate, it ends guard_cycles before the next priority release on its
 *    unit; otherwise it waits for the next window (a "deferral") and the
 *    queue behind it waits too, so the table order is never changed.
 *  - An item may have constraints ("after" records): its k-th run needs the
 *    (k + offset)-th run of another item to have ended (plus a hand-over time
 *    for data crossing units). The planner uses them for sub-model order
 *    across units and to stop a producer from overwriting a persistent buffer
 *    before its consumer has read it.
 *  - Measured cycles update the item's estimate online: up at once when a
 *    run is slower, down by 1/8 of the difference when faster, so a
 *    sub-model that overran is not started again where it would push a
 *    priority period late. An item whose estimate no longer fits even an
 *    empty remaining period is reported (PE_SCHED_EV_NO_FIT: the planner
 *    should re-split). A raised estimate ages back halfway towards the
 *    planned one for every window it holds its item back, so a one-off
 *    overrun does not block the model for good.
 *  - An overrun is a run longer than its planned estimate (est_cycles) by more
 *    than the table's tolerance (normal run-to-run variation is not a fault).
 *  - Catching up: a low item that could not start within max_lag_windows of
 *    the window it was planned in is dropped (PE_SCHED_EV_DROP), and so are the
 *    remaining items of its model instance: that low-priority result is
 *    skipped and reported, and the table is back on time. Priority items are
 *    never dropped. A dropped item still counts as run for the constraints
 *    (its consumers are dropped with it, its producers may go on).
 *  - Prefetch: a low item flagged PE_SCHED_PREFETCH gets its input
 *    intermediate (a persistent buffer written by an earlier sub-model) copied
 *    into its working arena by DMA, started through the host's
 *    pe_sched_prefetch_fn just before the priority item that precedes it runs
 *    (when the item heads its unit's low queue, is due by that priority
 *    item's window and its producers have ended), so the copy overlaps the
 *    priority work. Its est_cycles excludes the copy. The dispatcher never
 *    starts (nor drops) such an item before the host says its prefetch has
 *    completed: an item that is due while its prefetch is still running waits
 *    and is reported (PE_SCHED_EV_PREFETCH_LATE, a fault: the DMA was slower
 *    than planned). An item that was not prefetched early (it was not at the
 *    head of its queue when the priority item started, e.g. after a deferral)
 *    starts its prefetch when it is due and fits with prefetch_cycles added,
 *    and the unit waits for it (a synchronous fetch, counted). The working
 *    arena of prefetched items must not be written by the priority items
 *    that run while the copy is in flight (the planner gives them disjoint
 *    arenas).
 *
 *  - No silent stall: for a table pe_sched_check_table accepts, every
 *    released run runs (or is dropped), or an event names it while it
 *    cannot (DEFER / NO_FIT each window, PREFETCH_LATE, STALL); the waits
 *    never form a cycle (the argument is at the top of pe_sched.c).
 *
 * Time is a 64-bit cycle count. The dispatcher never reads a clock: the host
 * passes "now" and the work function reports the cycles it used (measured on
 * hardware, e.g. DWT->CYCCNT; simulated on the host). Idle waits end on
 * multiples of tick_cycles (the timer tick that wakes the main loop).
 *
 * Memory: all state lives in the caller's pe_context buffer, sized by
 * pe_sched_get_buffer_size(table). No allocation, no stdio, no floats.
 */
#ifndef PYEMBED_PE_SCHED_H
#define PYEMBED_PE_SCHED_H

#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Processing units a table may use (pe_sched_check_table keeps a few
 * integers per unit on the stack; PE_ERR_UNSUPPORTED above). */
#define PE_SCHED_MAX_UNITS 16

/* Item kinds. */
#define PE_SCHED_PRIORITY 0
#define PE_SCHED_LOW 1

/* Item flags. */
#define PE_SCHED_FIRST 1u /* starts a model instance: captures the current frame */
#define PE_SCHED_LAST 2u  /* ends a model instance: its output is the model result */
#define PE_SCHED_CARRY 4u /* low: works on the instance started in the previous table
                           * period (a pipeline stage that carries over); its run in
                           * the first period has nothing to work on and is skipped */
#define PE_SCHED_PREFETCH 8u /* low, not FIRST, not CARRY: its input is copied by DMA
                              * before it runs (pe_sched_prefetch_fn); est_cycles
                              * excludes the copy, prefetch_cycles is its duration */

/* One unit of work: a whole priority model or one sub-model (a consecutive
 * range of operators) of a low-priority model, on one processing unit. */
typedef struct {
    int32_t model;        /* model index, for reports */
    int32_t sub;          /* sub-model index within the model instance */
    int32_t kind;         /* PE_SCHED_PRIORITY or PE_SCHED_LOW */
    int32_t unit;         /* processing unit, 0 .. n_units-1 */
    int32_t work;         /* index into the host's work-function table */
    int32_t phase;        /* window it is planned in, 0 .. 2*hyper_windows-1 (>= hyper_windows:
                           * the next table period, for work that carries on from it) */
    int32_t instance;     /* instance slot whose frame it processes, or -1 */
    uint32_t flags;       /* PE_SCHED_FIRST | PE_SCHED_LAST */
    int32_t first_op;     /* operator range [first_op, last_op) of the model */
    int32_t last_op;
    int32_t first_after;  /* constraints: after[first_after .. first_after+n_after-1] */
    int32_t n_after;
    uint32_t est_cycles;  /* planned duration, including fetching its inputs */
    uint32_t deadline_cycles; /* priority: must end this long after its release */
    uint32_t prefetch_cycles; /* PE_SCHED_PREFETCH: planned duration of the input copy */
} pe_sched_item;

/* Run k of the constrained item needs run k + offset - 1 of `item` (counting
 * from 0) to have ended, and handover_cycles to have passed since; nothing
 * when that index is negative. offset 1: the same table period (data
 * produced for this run); 0: the previous one (e.g. a producer waiting until
 * the consumer has read the buffer it is about to overwrite); -1 and 2 arise
 * with PE_SCHED_CARRY items, whose run k works on the instance of period k-1. */
typedef struct {
    int32_t item;
    int32_t offset;
    uint32_t handover_cycles;
} pe_sched_after;

/* The static schedule. Items are sorted by phase (non-decreasing); within a
 * unit and kind they run in table order, and their phases span less than
 * hyper_windows (so table order is time order across periods). Period p of
 * the table plans item i in window p * hyper_windows + phase. */
typedef struct {
    uint32_t window_cycles;  /* > 0, a multiple of tick_cycles */
    uint32_t tick_cycles;    /* > 0 */
    uint32_t guard_cycles;   /* margin kept free before each priority release */
    int32_t hyper_windows;   /* >= 1: windows covered by the table */
    int32_t n_units;         /* >= 1 */
    int32_t n_instances;     /* instance slots (low-priority model runs per table period) */
    int32_t n_items;         /* >= 1 */
    int32_t n_after;         /* >= 0 */
    const pe_sched_item *items;
    const pe_sched_after *after;
    uint32_t overrun_tolerance_q16; /* a run is an overrun when it exceeds its planned
                                     * estimate by more than this share (Q16: 655 = 1 %) */
    int32_t max_lag_windows; /* a low item not started by the end of window planned +
                              * max_lag_windows is dropped with the rest of its instance
                              * (reported); < 0: never drop */
} pe_sched_table;

/* The host's work function: run the item to completion (the sub-model's
 * kernels, reading its persistent inputs and writing its outputs), and store
 * the cycles it took in *cycles. A non-OK status stops the dispatcher and is
 * returned by pe_sched_poll. frame is the window index whose input the item
 * processes; start is the dispatcher's "now". */
typedef pe_status (*pe_sched_work_fn)(void *user, int32_t item_index, const pe_sched_item *item,
                                      int64_t frame, uint64_t start, uint32_t *cycles);

/* Operations of the prefetch function. */
#define PE_SCHED_PREFETCH_START 0 /* start the input copy of the item's next run; set
                                   * *ready_at to when it is expected to complete (>= now) */
#define PE_SCHED_PREFETCH_CHECK 1 /* *ready_at holds what START said; leave it when that
                                   * is right, or set it to the completion time if the
                                   * copy has completed (<= now), or to a later expected
                                   * time (> now) if it is still running */

/* The host's prefetch function (pe_sched_set_prefetch): start or check the
 * DMA copy of a PE_SCHED_PREFETCH item's input (persistent buffer -> working
 * arena) for the run that processes `frame`. A non-OK status stops the
 * dispatcher like a failing work function. */
typedef pe_status (*pe_sched_prefetch_fn)(void *user, int32_t op, int32_t item_index,
                                          const pe_sched_item *item, int64_t frame, uint64_t now,
                                          uint64_t *ready_at);

/* Event flags. */
#define PE_SCHED_EV_RAN 0x001u       /* the item ran from start to end */
#define PE_SCHED_EV_OVERRUN 0x002u   /* it took longer than its planned estimate */
#define PE_SCHED_EV_MISS 0x004u      /* priority: ended after release + deadline */
#define PE_SCHED_EV_LATE 0x008u      /* priority: started after its release */
#define PE_SCHED_EV_LAG 0x010u       /* low: started in a later window than planned */
#define PE_SCHED_EV_DEFER 0x020u     /* low: held back by the guard (not run) */
#define PE_SCHED_EV_NO_FIT 0x040u    /* low: its estimate exceeds the remaining period */
#define PE_SCHED_EV_FAULT 0x080u     /* the work function returned an error */
#define PE_SCHED_EV_DROP 0x100u      /* low: dropped (too late, or its instance was) */
#define PE_SCHED_EV_PREFETCH 0x200u  /* low: its input prefetch was started; end: when the
                                      * unit may go on (now, or the ready time when the
                                      * unit waits for the copy); wake: expected ready time */
#define PE_SCHED_EV_STALL 0x800u     /* priority: released, waits for a run of its own unit's
                                      * low work that cannot run now (waiting itself for
                                      * another unit's work); reported once per run, the
                                      * unit idles until it can go on */
#define PE_SCHED_EV_PREFETCH_LATE 0x400u /* low: due but its prefetch has not completed
                                          * (fault, once per run): it waits until wake */

/* What one poll did. */
typedef struct {
    int32_t item;          /* item that ran or was deferred, -1 when idle */
    int32_t unit;
    uint32_t flags;        /* PE_SCHED_EV_*; 0 when idle */
    uint32_t est_cycles;   /* estimate held when the decision was made */
    int64_t frame;         /* frame processed */
    int64_t planned_window;/* window the table planned it in */
    uint64_t release;      /* start of the planned window */
    uint64_t start;
    uint64_t end;          /* start + cycles; == start when not run */
    uint64_t wake;         /* idle / deferred: when to poll this unit next */
} pe_sched_event;

/* Counters since pe_sched_init. */
typedef struct {
    uint64_t priority_runs;
    uint64_t low_runs;
    uint64_t deadline_misses;
    uint64_t late_starts;
    uint64_t overruns;
    uint64_t deferrals;       /* windows in which a released low item was held back */
    uint64_t no_fit;          /* deferrals whose estimate no longer fits at all */
    uint64_t lagging_runs;    /* low runs that started after their planned window */
    uint64_t dropped;         /* low items dropped (late, or part of a dropped instance) */
    uint64_t priority_cycles; /* busy cycles, by kind */
    uint64_t low_cycles;
    uint64_t max_late_cycles;    /* worst priority start after release */
    uint64_t max_overrun_cycles; /* worst measured - planned estimate */
    uint64_t prefetches;      /* prefetches started before a priority item (overlapped) */
    uint64_t prefetch_waits;  /* prefetches started when the item was due (the unit waited) */
    uint64_t prefetch_late;   /* items due whose prefetch had not completed (faults) */
    uint64_t prefetch_cycles; /* planned copy cycles of the overlapped prefetches */
} pe_sched_counters;

/* Per-item and per-unit run state (inside the caller's buffer). */
typedef struct {
    uint32_t est;        /* online estimate */
    uint32_t runs;       /* completed runs */
    uint64_t last_start;
    uint64_t last_end;
    uint32_t prefetch_run;   /* runs + 1 of the run whose prefetch was started, 0: none */
    uint32_t prefetch_late;  /* 1 when that prefetch was reported late */
    uint64_t prefetch_ready; /* its expected (or actual) completion time */
} pe_sched_item_state;

typedef struct {
    int32_t prio_pos;        /* next priority item of the unit, -1 if it has none */
    int32_t low_pos;         /* next low item of the unit, -1 if it has none */
    uint32_t prio_period;    /* table periods completed by the priority queue */
    uint32_t low_period;
    uint64_t clock;          /* used by pe_sched_run */
    int64_t deferred_window; /* last window a deferral was counted in */
    uint64_t wake;           /* used by pe_sched_run: wake time of the last idle poll */
    uint32_t prio_reserve;   /* largest planned priority work of one window */
    int32_t stall_item;      /* priority item whose current run's stall was reported, -1: none */
} pe_sched_unit_state;

typedef struct {
    const pe_sched_table *table;
    const pe_sched_work_fn *fns;
    int32_t n_fns;
    void *user;
    pe_sched_prefetch_fn prefetch; /* NULL until pe_sched_set_prefetch */
    pe_sched_item_state *items;
    pe_sched_unit_state *units;
    int64_t *instance_frame;
    pe_sched_counters counters;
} pe_sched_state;

/* Checks the table: sizes positive, window a multiple of tick, items sorted
 * by phase, phases of each unit and kind spanning less than hyper_windows,
 * every index (unit, instance, constraint, after-range) in range, offsets in
 * -1..2, kinds and flags known, PE_SCHED_PREFETCH only on low items that are
 * neither FIRST nor CARRY. PE_ERR_ARG otherwise.
 * Also PE_ERR_ARG: constraints that can never all be met, which would stop
 * the units involved for good (a deadlock, not reported by the dispatcher).
 * A run waits for the previous run of its queue (unit and kind, table
 * order), for its constraints, and, if low, for the priority runs of its
 * unit released by its planned window; the table is refused when a run
 * would thereby wait for itself or a later run of its own queue, e.g. a
 * priority item waiting (offset 1) for an item behind it in its own queue,
 * (offset 2) for any item of its queue, or a cycle through another unit's
 * queue. Cost: up to n_items x (2 n_units + 1) passes over the items and
 * constraints, without memory beyond a few integers per unit.
 * PE_ERR_UNSUPPORTED: more than PE_SCHED_MAX_UNITS units. */
pe_status pe_sched_check_table(const pe_sched_table *table);

/* Bytes of state the table needs (after it passes pe_sched_check_table). */
pe_status pe_sched_get_buffer_size(const pe_sched_table *table, int32_t *size);

/* Prepares the state in ctx->buf (ctx->size checked against the query) and
 * keeps pointers to table, fns and user: they must outlive the state. Every
 * item's work index must name a non-NULL function of fns[0 .. n_fns-1].
 * Time starts at 0 on every unit. ctx->stats is not used. */
pe_status pe_sched_init(const pe_context *ctx, const pe_sched_table *table,
                        const pe_sched_work_fn *fns, int32_t n_fns, void *user,
                        pe_sched_state *state);

/* One decision for `unit` at time `now`: run the next due item (through its
 * work function, to completion) or say when to poll again. *ev describes
 * it. On hardware each unit calls this in its main loop; after a run it
 * polls again at once, when idle it sleeps until ev->wake. */
pe_status pe_sched_poll(pe_sched_state *state, int32_t unit, uint64_t now, pe_sched_event *ev);

/* Drives every unit from its own clock (state->units[u].clock) until all
 * reach `until`, always advancing the unit with the earliest clock, and
 * appends what happened (runs and deferrals) to events[0 .. max_events-1].
 * Stops early when events is full (*n_events == max_events); call again to
 * continue. A simulator with its own event queue uses pe_sched_poll instead. */
pe_status pe_sched_run(pe_sched_state *state, uint64_t until, pe_sched_event *events,
                       int32_t max_events, int32_t *n_events);

/* Sets the prefetch function (after pe_sched_init, before the first poll);
 * a table with PE_SCHED_PREFETCH items needs one: pe_sched_poll returns
 * PE_ERR_STATE when it reaches such an item without it. */
pe_status pe_sched_set_prefetch(pe_sched_state *state, pe_sched_prefetch_fn fn);

/* Current online estimate of an item. */
pe_status pe_sched_get_estimate(const pe_sched_state *state, int32_t item, uint32_t *est);

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_SCHED_H */
