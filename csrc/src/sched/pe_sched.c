/*
 * pe_sched.c - the cooperative dispatcher of pe_sched.h. Each poll looks at
 * the head of the unit's priority queue, then at the head of its low queue,
 * and either runs one item to completion or returns the time to wake up.
 * Prefetches are decisions of their own: starting one is an event, and the
 * next poll at the same time goes on with the priority item (or waits for
 * the copy, when the low item is due and was not prefetched early).
 *
 * Invariant (no silent stall): every released run of an item either runs
 * (or is dropped, or skipped as a first-period CARRY run), or an event names
 * it while it cannot: DEFER (NO_FIT) in every window the guard holds it
 * back, PREFETCH_LATE while its copy is late, STALL when a priority run
 * waits for its own unit's low work that cannot run now. Why it holds: a run
 * that has not run waits either
 *  (a) for time: its release, a handover in progress, its DMA copy, or the
 *      guard until the next priority release (a DEFER each window), or
 *  (b) for another run: the previous run of its queue, a run its
 *      constraints name, or, for a low run, the released priority run at
 *      the head of its unit's queue when that one is planned in the low
 *      run's window or earlier.
 * Every (b) wait is an edge of the "needs" relation of
 * pe_sched_check_table (queue order, constraints, a low run behind the
 * priority runs released by its planned window), which the check proved
 * acyclic for an accepted table; so from any run the chain of (b) waits is
 * finite and ends in a run that waits only for time, and by induction
 * every run goes on. The rule in (b) is what keeps the waits inside that
 * relation: a released priority run waiting for a run that has not
 * happened does NOT hold back low work planned in an earlier window (that
 * work may lag behind its plan after a deferral or an overrun, and the
 * priority run may need it, through another unit: sched/priority-never-
 * runs-silent, sched/priority-waits-on-deferred-low); that low work runs
 * without the guard, since the priority run cannot start before the run it
 * waits for anyway. tools/fuzz/fuzz_sched.c checks this invariant on every
 * table it runs (no cycle of waits, no idle unit with work that could run).
 */
#include "pyembed/pe_sched.h"

#define ALIGN8(x) (((x) + 7) & ~(size_t)7)

/* instance_frame of a dropped instance: -2 - frame (frame >= 0) */
#define DROPPED(frame) (-2 - (frame))
#define IS_DROPPED(v) ((v) <= -2)

/* ---- constraints that can never be met ------------------------------------
 *
 * Runs wait for three things: the previous run of their queue (unit, kind)
 * in table order, their constraints (run k of i needs run k + offset - 1 of
 * `item`), and, for a low run, every priority run of its unit released in
 * or before its planned window (a released priority item runs, or waits,
 * before any low work). The table deadlocks exactly when some run (i, k)
 * needs, through these, a run at or after itself in its own queue: queues
 * run in order, so neither can ever run.
 *
 * A queue is walked in ranks: run k of the item at position p of a queue of
 * n items has rank k * n + p; needing a run means needing every lower rank.
 * Starting from run 0 of each constrained item, the highest rank needed in
 * each queue grows by relaxation (a few int64 per queue, no table-sized
 * memory; ranks are relative, as if run 0 were far from the first period).
 * Reaching the start's queue at or above the start's rank is a cycle; ranks
 * still growing after as many rounds as there are queues mean a cycle that
 * gains a period per turn (an offset 2 loop), a deadlock as well. */

#define NO_RANK INT64_MIN

static int32_t queue_of(const pe_sched_item *it)
{
    return it->unit * 2 + it->kind;
}

/* Position of item i among the items of its queue, in table order. */
static int32_t queue_pos(const pe_sched_table *t, int32_t i)
{
    const int32_t q = queue_of(&t->items[i]);
    int32_t k, n = 0;
    for (k = 0; k < i; k++) {
        n += queue_of(&t->items[k]) == q;
    }
    return n;
}

static int64_t floor_div64(int64_t a, int64_t b) /* b > 0 */
{
    const int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

/* Raise reach[q] to rank; returns 1 when that needs the start run itself. */
static int need_rank(int64_t *reach, int32_t q, int64_t rank, int32_t q0, int64_t r0,
                     int *changed)
{
    if (q == q0 && rank >= r0) {
        return 1;
    }
    if (rank > reach[q]) {
        reach[q] = rank;
        *changed = 1;
    }
    return 0;
}

static int constraints_deadlock(const pe_sched_table *t)
{
    int32_t len[2 * PE_SCHED_MAX_UNITS];
    int32_t pos[2 * PE_SCHED_MAX_UNITS];
    int64_t reach[2 * PE_SCHED_MAX_UNITS];
    const int32_t nq = 2 * t->n_units;
    const int64_t hw = t->hyper_windows;
    int32_t s, i, q, round;
    for (q = 0; q < nq; q++) {
        len[q] = 0;
    }
    for (i = 0; i < t->n_items; i++) {
        len[queue_of(&t->items[i])]++;
    }
    for (s = 0; s < t->n_items; s++) {
        const int32_t q0 = queue_of(&t->items[s]);
        const int64_t r0 = queue_pos(t, s);
        int changed = 1;
        if (t->items[s].n_after == 0) {
            continue; /* every cycle goes through a constraint */
        }
        for (q = 0; q < nq; q++) {
            reach[q] = NO_RANK;
        }
        reach[q0] = r0;
        for (round = 0; round <= nq && changed; round++) {
            changed = 0;
            for (q = 0; q < nq; q++) {
                pos[q] = 0;
            }
            /* constraints of every needed run */
            for (i = 0; i < t->n_items; i++) {
                const pe_sched_item *it = &t->items[i];
                const int32_t qi = queue_of(it);
                const int32_t p = pos[qi]++;
                int64_t k;
                int32_t a;
                if (reach[qi] == NO_RANK || it->n_after == 0) {
                    continue;
                }
                k = floor_div64(reach[qi] - p, len[qi]); /* latest needed run of i */
                for (a = it->first_after; a < it->first_after + it->n_after; a++) {
                    const pe_sched_after *af = &t->after[a];
                    const int32_t qt = queue_of(&t->items[af->item]);
                    const int64_t rank = (k + af->offset - 1) * len[qt] + queue_pos(t, af->item);
                    if (need_rank(reach, qt, rank, q0, r0, &changed)) {
                        return 1;
                    }
                }
            }
            /* a needed low run waits for the priority runs of its unit
             * released by its planned window (the queue is in time order,
             * so the latest needed run has the latest window) */
            for (q = 1; q < nq; q += 2) {
                const int32_t qp = q - 1;
                int64_t k, window;
                int32_t p, n = 0, last = -1;
                if (reach[q] == NO_RANK || len[qp] == 0) {
                    continue;
                }
                k = floor_div64(reach[q], len[q]);
                p = (int32_t)(reach[q] - k * len[q]);
                for (i = 0; i < t->n_items && last < 0; i++) {
                    if (queue_of(&t->items[i]) == q && n++ == p) {
                        last = i;
                    }
                }
                window = k * hw + t->items[last].phase;
                n = 0;
                for (i = 0; i < t->n_items; i++) {
                    if (queue_of(&t->items[i]) == qp) {
                        const int64_t kp = floor_div64(window - t->items[i].phase, hw);
                        if (need_rank(reach, qp, kp * len[qp] + n, q0, r0, &changed)) {
                            return 1;
                        }
                        n++;
                    }
                }
            }
        }
        if (changed) {
            return 1; /* still growing after nq + 1 rounds: a gaining cycle */
        }
    }
    return 0;
}

pe_status pe_sched_check_table(const pe_sched_table *t)
{
    int32_t i, k;
    if (t == NULL || t->items == NULL || t->window_cycles == 0u || t->tick_cycles == 0u ||
        t->hyper_windows > (1 << 28)) {
        return PE_ERR_ARG;
    }
    if (t->window_cycles % t->tick_cycles != 0u || t->hyper_windows < 1 || t->n_units < 1 ||
        t->n_items < 1 || t->n_after < 0 || t->n_instances < 0) {
        return PE_ERR_ARG;
    }
    if (t->n_after > 0 && t->after == NULL) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < t->n_items; i++) {
        const pe_sched_item *it = &t->items[i];
        if (it->kind != PE_SCHED_PRIORITY && it->kind != PE_SCHED_LOW) {
            return PE_ERR_ARG;
        }
        if (it->unit < 0 || it->unit >= t->n_units || it->work < 0 || it->phase < 0 ||
            it->phase >= 2 * t->hyper_windows || it->instance < -1 || it->instance >= t->n_instances) {
            return PE_ERR_ARG;
        }
        if (i > 0 && it->phase < t->items[i - 1].phase) {
            return PE_ERR_ARG; /* not sorted by phase */
        }
        for (k = 0; k < i; k++) {
            const pe_sched_item *o = &t->items[k];
            if (o->unit == it->unit && o->kind == it->kind &&
                it->phase - o->phase >= t->hyper_windows) {
                return PE_ERR_ARG; /* table order would not be time order */
            }
        }
        if ((it->flags & ~(PE_SCHED_FIRST | PE_SCHED_LAST | PE_SCHED_CARRY | PE_SCHED_PREFETCH)) != 0u) {
            return PE_ERR_ARG;
        }
        if ((it->flags & PE_SCHED_PREFETCH) != 0u &&
            (it->kind != PE_SCHED_LOW || it->instance < 0 ||
             (it->flags & (PE_SCHED_FIRST | PE_SCHED_CARRY)) != 0u)) {
            return PE_ERR_ARG;
        }
        if ((it->flags & PE_SCHED_CARRY) != 0u && it->kind != PE_SCHED_LOW) {
            return PE_ERR_ARG;
        }
        if ((it->flags & PE_SCHED_FIRST) != 0u && it->instance < 0) {
            return PE_ERR_ARG;
        }
        if (it->n_after < 0 || it->first_after < 0 || it->first_after > t->n_after ||
            it->n_after > t->n_after - it->first_after) {
            return PE_ERR_ARG;
        }
        for (k = it->first_after; k < it->first_after + it->n_after; k++) {
            const pe_sched_after *a = &t->after[k];
            if (a->item < 0 || a->item >= t->n_items || a->item == i || a->offset < -1 ||
                a->offset > 2) {
                return PE_ERR_ARG;
            }
        }
    }
    if (t->n_units > PE_SCHED_MAX_UNITS) {
        return PE_ERR_UNSUPPORTED;
    }
    if (constraints_deadlock(t)) {
        return PE_ERR_ARG; /* constraints that can never all be met */
    }
    return PE_OK;
}

static size_t state_bytes(const pe_sched_table *t)
{
    return ALIGN8(sizeof(pe_sched_item_state) * (size_t)t->n_items) +
           ALIGN8(sizeof(pe_sched_unit_state) * (size_t)t->n_units) +
           ALIGN8(sizeof(int64_t) * (size_t)t->n_instances);
}

pe_status pe_sched_get_buffer_size(const pe_sched_table *table, int32_t *size)
{
    size_t bytes;
    const pe_status st = pe_sched_check_table(table);
    if (st != PE_OK) {
        return st;
    }
    if (size == NULL) {
        return PE_ERR_ARG;
    }
    bytes = state_bytes(table);
    if (bytes > (size_t)0x7FFFFFFF) {
        return PE_ERR_OVERFLOW;
    }
    *size = (int32_t)bytes;
    return PE_OK;
}

/* Next item of (unit, kind) after position pos in table order, wrapping;
 * *wrapped is set when the search passed the end of the table. -1 if the
 * unit has no item of that kind. pos == -1 starts from the beginning. */
static int32_t next_item(const pe_sched_table *t, int32_t unit, int32_t kind, int32_t pos,
                         int32_t *wrapped)
{
    int32_t n;
    int32_t i = pos;
    *wrapped = 0;
    for (n = 0; n < t->n_items; n++) {
        i++;
        if (i >= t->n_items) {
            i = 0;
            if (pos >= 0) {
                *wrapped = 1;
            }
        }
        if (t->items[i].unit == unit && t->items[i].kind == kind) {
            return i;
        }
    }
    return -1;
}

pe_status pe_sched_init(const pe_context *ctx, const pe_sched_table *table,
                        const pe_sched_work_fn *fns, int32_t n_fns, void *user,
                        pe_sched_state *s)
{
    int32_t size = 0;
    int32_t i, u, wrapped;
    unsigned char *p;
    pe_status st = pe_sched_get_buffer_size(table, &size);
    if (st != PE_OK) {
        return st;
    }
    if (s == NULL || fns == NULL || n_fns < 1 || ctx == NULL) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < table->n_items; i++) {
        if (table->items[i].work >= n_fns || fns[table->items[i].work] == NULL) {
            return PE_ERR_ARG;
        }
    }
    if (ctx->buf == NULL || ctx->size < size) {
        return PE_ERR_SCRATCH;
    }
    if (((uintptr_t)ctx->buf & 7u) != 0u) {
        return PE_ERR_ARG; /* state holds 64-bit fields */
    }
    p = (unsigned char *)ctx->buf;
    s->table = table;
    s->fns = fns;
    s->n_fns = n_fns;
    s->user = user;
    s->prefetch = NULL;
    s->items = (pe_sched_item_state *)(void *)p;
    p += ALIGN8(sizeof(pe_sched_item_state) * (size_t)table->n_items);
    s->units = (pe_sched_unit_state *)(void *)p;
    p += ALIGN8(sizeof(pe_sched_unit_state) * (size_t)table->n_units);
    s->instance_frame = table->n_instances > 0 ? (int64_t *)(void *)p : NULL;
    for (i = 0; i < table->n_items; i++) {
        s->items[i].est = table->items[i].est_cycles;
        s->items[i].runs = 0u;
        s->items[i].last_start = 0u;
        s->items[i].last_end = 0u;
        s->items[i].prefetch_run = 0u;
        s->items[i].prefetch_late = 0u;
        s->items[i].prefetch_ready = 0u;
    }
    for (i = 0; i < table->n_instances; i++) {
        s->instance_frame[i] = -1;
    }
    for (u = 0; u < table->n_units; u++) {
        pe_sched_unit_state *us = &s->units[u];
        int32_t w;
        us->prio_pos = next_item(table, u, PE_SCHED_PRIORITY, -1, &wrapped);
        us->low_pos = next_item(table, u, PE_SCHED_LOW, -1, &wrapped);
        us->prio_period = 0u;
        us->low_period = 0u;
        us->clock = 0u;
        us->deferred_window = -1;
        us->prio_reserve = 0u;
        us->wake = 0u;
        us->stall_item = -1;
        /* largest planned priority work in one window of this unit */
        for (w = 0; w < table->hyper_windows; w++) {
            uint64_t sum = 0u;
            for (i = 0; i < table->n_items; i++) {
                const pe_sched_item *it = &table->items[i];
                if (it->unit == u && it->kind == PE_SCHED_PRIORITY && it->phase == w) {
                    sum += it->est_cycles;
                }
            }
            if (sum > us->prio_reserve) {
                us->prio_reserve = sum > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)sum;
            }
        }
    }
    s->counters.priority_runs = 0u;
    s->counters.low_runs = 0u;
    s->counters.deadline_misses = 0u;
    s->counters.late_starts = 0u;
    s->counters.overruns = 0u;
    s->counters.deferrals = 0u;
    s->counters.no_fit = 0u;
    s->counters.lagging_runs = 0u;
    s->counters.dropped = 0u;
    s->counters.priority_cycles = 0u;
    s->counters.low_cycles = 0u;
    s->counters.max_late_cycles = 0u;
    s->counters.max_overrun_cycles = 0u;
    s->counters.prefetches = 0u;
    s->counters.prefetch_waits = 0u;
    s->counters.prefetch_late = 0u;
    s->counters.prefetch_cycles = 0u;
    return PE_OK;
}

pe_status pe_sched_set_prefetch(pe_sched_state *s, pe_sched_prefetch_fn fn)
{
    if (s == NULL || s->table == NULL || fn == NULL) {
        return PE_ERR_ARG;
    }
    s->prefetch = fn;
    return PE_OK;
}

/* Planned window of the item at the head of a queue. */
static int64_t planned_window(const pe_sched_table *t, int32_t item, uint32_t period)
{
    return (int64_t)period * (int64_t)t->hyper_windows + (int64_t)t->items[item].phase;
}

/* Are the constraints of the next run of `item` met at `now`? If a needed
 * run has ended but its hand-over is still going on, *ready_at says when it
 * will be met; if a needed run has not started, *ready_at is 0 (unknown). */
static int constraints_met(const pe_sched_state *s, int32_t item, uint64_t now, uint64_t *ready_at)
{
    const pe_sched_table *t = s->table;
    const pe_sched_item *it = &t->items[item];
    const uint32_t k = s->items[item].runs;
    uint64_t latest = 0u;
    int32_t j;
    for (j = it->first_after; j < it->first_after + it->n_after; j++) {
        const pe_sched_after *a = &t->after[j];
        const pe_sched_item_state *dep = &s->items[a->item];
        const int64_t need = (int64_t)k + (int64_t)a->offset;
        if (need <= 0) {
            continue;
        }
        if ((int64_t)dep->runs < need) {
            *ready_at = 0u;
            return 0;
        }
        if ((int64_t)dep->runs == need) {
            /* the needed run is the latest one: it may still be going on */
            const uint64_t at = dep->last_end + a->handover_cycles;
            if (at > latest) {
                latest = at;
            }
        }
    }
    if (latest > now) {
        *ready_at = latest;
        return 0;
    }
    return 1;
}

static uint64_t round_up_tick(uint64_t t, uint32_t tick)
{
    const uint64_t r = t % tick;
    return r == 0u ? t : t + (tick - r);
}

static void clear_event(pe_sched_event *ev, int32_t unit, uint64_t now)
{
    ev->item = -1;
    ev->unit = unit;
    ev->flags = 0u;
    ev->est_cycles = 0u;
    ev->frame = -1;
    ev->planned_window = -1;
    ev->release = 0u;
    ev->start = now;
    ev->end = now;
    ev->wake = now;
}

/* Frame a (non-FIRST) low item's next run processes. */
static int64_t instance_frame_of(const pe_sched_state *s, const pe_sched_item *it, int64_t fallback)
{
    if (it->instance < 0) {
        return fallback;
    }
    return s->instance_frame[it->instance];
}

/* Start the prefetch of the next run of a PE_SCHED_PREFETCH item and
 * describe it in *ev. wait: the unit waits for the copy (ev->end = ready). */
static pe_status start_prefetch(pe_sched_state *s, int32_t unit, int32_t item, int64_t planned,
                                uint64_t now, int wait, pe_sched_event *ev)
{
    const pe_sched_table *t = s->table;
    const pe_sched_item *it = &t->items[item];
    pe_sched_item_state *is = &s->items[item];
    const int64_t frame = instance_frame_of(s, it, (int64_t)(now / t->window_cycles));
    uint64_t ready = now + it->prefetch_cycles;
    pe_status st;
    if (s->prefetch == NULL) {
        return PE_ERR_STATE;
    }
    st = s->prefetch(s->user, PE_SCHED_PREFETCH_START, item, it, frame, now, &ready);
    ev->item = item;
    ev->unit = unit;
    ev->est_cycles = it->prefetch_cycles;
    ev->frame = frame;
    ev->planned_window = planned;
    ev->release = (uint64_t)planned * t->window_cycles;
    ev->start = now;
    if (st != PE_OK) {
        ev->flags = PE_SCHED_EV_FAULT;
        ev->end = now;
        ev->wake = now;
        return st;
    }
    if (ready < now) {
        ready = now;
    }
    is->prefetch_run = is->runs + 1u;
    is->prefetch_late = 0u;
    is->prefetch_ready = ready;
    ev->flags = PE_SCHED_EV_PREFETCH;
    ev->end = wait ? ready : now;
    ev->wake = ready;
    if (wait) {
        s->counters.prefetch_waits++;
    } else {
        s->counters.prefetches++;
        s->counters.prefetch_cycles += it->prefetch_cycles;
    }
    return PE_OK;
}

/* The early prefetch: before the priority item of window pw runs on unit,
 * start the copy of the unit's next low item if it is prefetched, due by pw,
 * not started yet, not about to be dropped, and its producers have ended.
 * Returns 1 (and fills *ev) when it started one. */
static int early_prefetch(pe_sched_state *s, int32_t unit, int64_t pw, uint64_t now,
                          pe_sched_event *ev, pe_status *st)
{
    const pe_sched_table *t = s->table;
    const pe_sched_unit_state *us = &s->units[unit];
    const int32_t item = us->low_pos;
    const pe_sched_item *it;
    int64_t lw;
    uint64_t ready_at = 0u;
    if (item < 0) {
        return 0;
    }
    it = &t->items[item];
    if ((it->flags & PE_SCHED_PREFETCH) == 0u || s->items[item].prefetch_run == s->items[item].runs + 1u) {
        return 0;
    }
    lw = planned_window(t, item, us->low_period);
    if (lw > pw || IS_DROPPED(s->instance_frame[it->instance]) ||
        (t->max_lag_windows >= 0 && lw + t->max_lag_windows < pw) ||
        !constraints_met(s, item, now, &ready_at)) {
        return 0;
    }
    *st = start_prefetch(s, unit, item, lw, now, 0, ev);
    return 1;
}

static pe_status run_item(pe_sched_state *s, int32_t unit, int32_t item, int64_t planned,
                          uint64_t now, pe_sched_event *ev)
{
    const pe_sched_table *t = s->table;
    const pe_sched_item *it = &t->items[item];
    pe_sched_item_state *is = &s->items[item];
    pe_sched_unit_state *us = &s->units[unit];
    const uint64_t release = (uint64_t)planned * t->window_cycles;
    const int64_t cur_window = (int64_t)(now / t->window_cycles);
    uint32_t cycles = 0u;
    int64_t frame;
    int32_t wrapped = 0;
    pe_status st;

    if (it->kind == PE_SCHED_PRIORITY) {
        frame = planned;
    } else {
        if ((it->flags & PE_SCHED_FIRST) != 0u) {
            s->instance_frame[it->instance] = cur_window;
        }
        frame = it->instance >= 0 ? s->instance_frame[it->instance] : cur_window;
    }
    ev->item = item;
    ev->est_cycles = is->est;
    ev->frame = frame;
    ev->planned_window = planned;
    ev->release = release;
    ev->start = now;
    st = s->fns[it->work](s->user, item, it, frame, now, &cycles);
    if (st != PE_OK) {
        ev->flags = PE_SCHED_EV_FAULT;
        ev->end = now;
        ev->wake = now;
        return st;
    }
    ev->flags = PE_SCHED_EV_RAN;
    ev->end = now + cycles;
    ev->wake = ev->end;
    is->runs++;
    is->last_start = now;
    is->last_end = ev->end;

    if ((uint64_t)cycles * 65536u >
        (uint64_t)it->est_cycles * (65536u + (uint64_t)t->overrun_tolerance_q16)) {
        const uint64_t over = (uint64_t)(cycles - it->est_cycles);
        ev->flags |= PE_SCHED_EV_OVERRUN;
        s->counters.overruns++;
        if (over > s->counters.max_overrun_cycles) {
            s->counters.max_overrun_cycles = over;
        }
    }
    if (cycles > is->est) {
        is->est = cycles; /* believe a slower measurement at once */
    } else {
        is->est -= (is->est - cycles) >> 3; /* drift down slowly */
    }

    if (it->kind == PE_SCHED_PRIORITY) {
        s->counters.priority_runs++;
        s->counters.priority_cycles += cycles;
        if (now > release) {
            const uint64_t late = now - release;
            ev->flags |= PE_SCHED_EV_LATE;
            s->counters.late_starts++;
            if (late > s->counters.max_late_cycles) {
                s->counters.max_late_cycles = late;
            }
        }
        if (ev->end > release + it->deadline_cycles) {
            ev->flags |= PE_SCHED_EV_MISS;
            s->counters.deadline_misses++;
        }
        us->prio_pos = next_item(t, unit, PE_SCHED_PRIORITY, item, &wrapped);
        us->stall_item = -1; /* a new priority run: its stall, if any, is reported anew */
        us->prio_period += (uint32_t)wrapped;
    } else {
        s->counters.low_runs++;
        s->counters.low_cycles += cycles;
        if (cur_window > planned) {
            ev->flags |= PE_SCHED_EV_LAG;
            s->counters.lagging_runs++;
        }
        us->low_pos = next_item(t, unit, PE_SCHED_LOW, item, &wrapped);
        us->low_period += (uint32_t)wrapped;
    }
    return PE_OK;
}

/* Skip a low item: its instance's result will not be produced. */
static pe_status drop_item(pe_sched_state *s, int32_t unit, int32_t item, int64_t planned,
                           uint64_t now, pe_sched_event *ev)
{
    const pe_sched_table *t = s->table;
    const pe_sched_item *it = &t->items[item];
    pe_sched_item_state *is = &s->items[item];
    pe_sched_unit_state *us = &s->units[unit];
    const int64_t cur_window = (int64_t)(now / t->window_cycles);
    int32_t wrapped = 0;
    int64_t frame = cur_window;
    if (it->instance >= 0) {
        const int64_t f = s->instance_frame[it->instance];
        if ((it->flags & PE_SCHED_FIRST) == 0u) {
            frame = IS_DROPPED(f) ? -2 - f : f;
        }
        s->instance_frame[it->instance] = DROPPED(frame < 0 ? 0 : frame);
    }
    ev->item = item;
    ev->flags = PE_SCHED_EV_DROP;
    ev->est_cycles = is->est;
    ev->frame = frame;
    ev->planned_window = planned;
    ev->release = (uint64_t)planned * t->window_cycles;
    ev->start = now;
    ev->end = now;
    ev->wake = now;
    is->runs++;
    is->last_start = now;
    is->last_end = now;
    s->counters.dropped++;
    us->low_pos = next_item(t, unit, PE_SCHED_LOW, item, &wrapped);
    us->low_period += (uint32_t)wrapped;
    return PE_OK;
}

/* 1 when item cannot start because a run of a LOW item of `unit` that it
 * needs has not happened yet (as opposed to a handover still in progress or
 * work of another unit). */
static int waits_on_own_low(const pe_sched_state *s, int32_t unit, int32_t item)
{
    const pe_sched_table *t = s->table;
    const pe_sched_item *it = &t->items[item];
    const uint32_t k = s->items[item].runs;
    int32_t j;
    for (j = it->first_after; j < it->first_after + it->n_after; j++) {
        const pe_sched_after *a = &t->after[j];
        const pe_sched_item *dep = &t->items[a->item];
        const int64_t need = (int64_t)k + (int64_t)a->offset;
        if (need > 0 && (int64_t)s->items[a->item].runs < need && dep->unit == unit &&
            dep->kind == PE_SCHED_LOW) {
            return 1;
        }
    }
    return 0;
}

pe_status pe_sched_poll(pe_sched_state *s, int32_t unit, uint64_t now, pe_sched_event *ev)
{
    const pe_sched_table *t;
    pe_sched_unit_state *us;
    uint64_t wake;
    uint64_t next_prio = 0u;
    int has_prio = 0;
    uint64_t ready_at = 0u;
    int prio_blocked = 0;     /* the released priority run waits for a run that has not happened */
    int64_t prio_window = 0;  /* its planned window */

    if (s == NULL || s->table == NULL || ev == NULL || unit < 0 || unit >= s->table->n_units) {
        return PE_ERR_ARG;
    }
    t = s->table;
    us = &s->units[unit];
    clear_event(ev, unit, now);
    wake = ((now / t->window_cycles) + 1u) * t->window_cycles; /* next window at the latest */

    if (us->prio_pos >= 0) {
        const int64_t pw = planned_window(t, us->prio_pos, us->prio_period);
        const uint64_t release = (uint64_t)pw * t->window_cycles;
        has_prio = 1;
        next_prio = release;
        if (release <= now) {
            if (constraints_met(s, us->prio_pos, now, &ready_at)) {
                pe_status st = PE_OK;
                if (early_prefetch(s, unit, pw, now, ev, &st)) {
                    return st;
                }
                return run_item(s, unit, us->prio_pos, pw, now, ev);
            }
            if (ready_at == 0u) {
                /* it waits for a run that has not happened (of any unit): it
                 * cannot start before that run, so low work planned in an
                 * earlier window runs meanwhile, without the guard (below);
                 * low work planned in its window or later waits for it (the
                 * no-silent-stall invariant at the top of this file) */
                prio_blocked = 1;
                prio_window = pw;
            } else {
                /* a handover in progress (ends at ready_at): no low work
                 * meanwhile, the priority item starts when it ends */
                if (ready_at > now && ready_at < wake) {
                    wake = ready_at;
                }
                ev->wake = round_up_tick(wake, t->tick_cycles);
                return PE_OK;
            }
        } else if (release < wake) {
            wake = release;
        }
    }

    /* a carried-over pipeline stage has nothing to do in the first period */
    while (us->low_pos >= 0 && us->low_period == 0u &&
           (t->items[us->low_pos].flags & PE_SCHED_CARRY) != 0u) {
        int32_t wrapped = 0;
        s->items[us->low_pos].runs++;
        us->low_pos = next_item(t, unit, PE_SCHED_LOW, us->low_pos, &wrapped);
        us->low_period += (uint32_t)wrapped;
    }

    if (us->low_pos >= 0) {
        const int32_t item = us->low_pos;
        const int64_t pw = planned_window(t, item, us->low_period);
        const uint64_t release = (uint64_t)pw * t->window_cycles;
        if (prio_blocked && pw >= prio_window) {
            /* planned in or after the window of the waiting priority run:
             * held back behind it (pe_sched_check_table proved that run does
             * not need this one) */
        } else if (release > now) {
            if (release < wake) {
                wake = release;
            }
        } else if (!constraints_met(s, item, now, &ready_at)) {
            if (ready_at > now && ready_at < wake) {
                wake = ready_at;
            }
        } else {
            const pe_sched_item *it = &t->items[item];
            pe_sched_item_state *is = &s->items[item];
            const int prefetched = (it->flags & PE_SCHED_PREFETCH) != 0u;
            const int pending = prefetched && is->prefetch_run == is->runs + 1u;
            const uint32_t est = is->est;
            const uint64_t need = (uint64_t)est + (prefetched && !pending ? it->prefetch_cycles : 0u);
            const int64_t window = (int64_t)(now / t->window_cycles);
            if (pending) {
                /* never start (nor drop) an item whose input copy is still in flight */
                uint64_t ready = is->prefetch_ready;
                pe_status st;
                if (s->prefetch == NULL) {
                    return PE_ERR_STATE;
                }
                st = s->prefetch(s->user, PE_SCHED_PREFETCH_CHECK, item, it,
                                 instance_frame_of(s, it, window), now, &ready);
                if (st != PE_OK) {
                    ev->item = item;
                    ev->flags = PE_SCHED_EV_FAULT;
                    return st;
                }
                is->prefetch_ready = ready;
                if (ready > now) {
                    if (is->prefetch_late == 0u) {
                        is->prefetch_late = 1u;
                        s->counters.prefetch_late++;
                        ev->item = item;
                        ev->flags = PE_SCHED_EV_PREFETCH_LATE;
                        ev->est_cycles = it->prefetch_cycles;
                        ev->frame = instance_frame_of(s, it, window);
                        ev->planned_window = pw;
                        ev->release = release;
                    }
                    /* wake at the DMA completion (not the next tick), or the release */
                    ev->wake = ready < wake ? ready : wake;
                    return PE_OK;
                }
            }
            if ((t->max_lag_windows >= 0 && pw + t->max_lag_windows < window) ||
                (it->instance >= 0 && (it->flags & PE_SCHED_FIRST) == 0u &&
                 IS_DROPPED(s->instance_frame[it->instance]))) {
                return drop_item(s, unit, item, pw, now, ev);
            }
            if (!has_prio || prio_blocked || now + need + t->guard_cycles <= next_prio) {
                if (prefetched && !pending) {
                    /* not prefetched early: copy now, the unit waits for it */
                    return start_prefetch(s, unit, item, pw, now, 1, ev);
                }
                return run_item(s, unit, item, pw, now, ev);
            }
            /* would push the next priority period late: hold it back */
            {
                if (us->deferred_window != window) {
                    us->deferred_window = window;
                    s->counters.deferrals++;
                    ev->item = item;
                    ev->flags = PE_SCHED_EV_DEFER;
                    ev->est_cycles = (uint32_t)(need > 0xFFFFFFFFu ? 0xFFFFFFFFu : need);
                    ev->planned_window = pw;
                    ev->release = release;
                    if (need + t->guard_cycles + us->prio_reserve > t->window_cycles) {
                        /* cannot fit any window: report it (the planner should re-split) */
                        ev->flags |= PE_SCHED_EV_NO_FIT;
                        s->counters.no_fit++;
                    }
                    /* an estimate raised by an overrun ages halfway back to the plan
                     * per window it holds the item back, so a one-off overrun heals
                     * (a persistent one is measured, and raises it, again) */
                    if (est > t->items[item].est_cycles) {
                        const uint32_t planned_est = t->items[item].est_cycles;
                        s->items[item].est = planned_est + ((est - planned_est) >> 1);
                    }
                }
            }
        }
    }
    if (prio_blocked && ev->flags == 0u && waits_on_own_low(s, unit, us->prio_pos)) {
        /* the priority item waits for this unit's low work, and none can run
         * now (waiting for its own inputs, e.g. another unit's work): report
         * the stall once per priority run instead of idling silently */
        if (us->stall_item != us->prio_pos) {
            us->stall_item = us->prio_pos;
            ev->item = us->prio_pos;
            ev->flags = PE_SCHED_EV_STALL;
            ev->planned_window = planned_window(t, us->prio_pos, us->prio_period);
            ev->release = next_prio;
        }
    }
    if (wake <= now) {
        wake = now + 1u;
    }
    ev->wake = round_up_tick(wake, t->tick_cycles);
    return PE_OK;
}

pe_status pe_sched_run(pe_sched_state *s, uint64_t until, pe_sched_event *events,
                       int32_t max_events, int32_t *n_events)
{
    const pe_sched_table *t;
    int32_t n = 0;
    int32_t u;
    if (s == NULL || s->table == NULL || events == NULL || max_events < 1 || n_events == NULL) {
        return PE_ERR_ARG;
    }
    t = s->table;
    *n_events = 0;
    for (;;) {
        uint64_t tmin = 0u;
        int found = 0;
        int ran = 0;
        for (u = 0; u < t->n_units; u++) {
            if (s->units[u].clock < until && (!found || s->units[u].clock < tmin)) {
                tmin = s->units[u].clock;
                found = 1;
            }
        }
        if (!found) {
            break;
        }
        /* Poll every unit standing at tmin; a run there may unblock another
         * unit at the same instant, so repeat until nobody runs. Units that
         * stay idle then sleep until their wake time or the next moment
         * another unit finishes, whichever is first. */
        do {
            ran = 0;
            for (u = 0; u < t->n_units; u++) {
                pe_sched_event ev;
                pe_status st;
                if (s->units[u].clock != tmin) {
                    continue;
                }
                if (n >= max_events) {
                    *n_events = n;
                    return PE_OK;
                }
                st = pe_sched_poll(s, u, tmin, &ev);
                if (ev.flags != 0u) {
                    events[n++] = ev;
                }
                if (st != PE_OK) {
                    *n_events = n;
                    return st;
                }
                s->units[u].wake = ev.wake;
                if ((ev.flags & (PE_SCHED_EV_RAN | PE_SCHED_EV_PREFETCH)) != 0u && ev.end > tmin) {
                    s->units[u].clock = ev.end; /* ran, or waited for a prefetch */
                    ran = 1;
                } else if ((ev.flags & (PE_SCHED_EV_RAN | PE_SCHED_EV_DROP | PE_SCHED_EV_PREFETCH)) != 0u) {
                    ran = 1; /* zero-cycle item, a drop or a prefetch started: poll again */
                }
            }
        } while (ran);
        for (u = 0; u < t->n_units; u++) {
            uint64_t next;
            int32_t v;
            if (s->units[u].clock != tmin) {
                continue;
            }
            next = s->units[u].wake;
            for (v = 0; v < t->n_units; v++) {
                if (v != u && s->units[v].clock > tmin) {
                    const uint64_t other = round_up_tick(s->units[v].clock, t->tick_cycles);
                    if (other < next) {
                        next = other;
                    }
                }
            }
            s->units[u].clock = next > tmin ? next : tmin + 1u;
        }
    }
    *n_events = n;
    return PE_OK;
}

pe_status pe_sched_get_estimate(const pe_sched_state *s, int32_t item, uint32_t *est)
{
    if (s == NULL || s->table == NULL || est == NULL || item < 0 || item >= s->table->n_items) {
        return PE_ERR_ARG;
    }
    *est = s->items[item].est;
    return PE_OK;
}
