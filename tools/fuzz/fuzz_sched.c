/*
 * fuzz_sched.c - libFuzzer harness for the cooperative dispatcher (pe_sched.h).
 *
 * Each input is a schedule table (priority and low items on one or two units,
 * phases, instances, FIRST / LAST / CARRY / PREFETCH flags, "after"
 * constraints, guard, tolerance, lag limit), sometimes with out-of-range
 * fields, plus the durations the work functions report (runs that overrun
 * their estimate up to 4x, occasional faults) and DMA prefetch times. A table
 * pe_sched_check_table accepts is run with pe_sched_run for six table
 * periods; every event is checked against the header's promises:
 *  - per unit, runs never overlap and time never goes back;
 *  - a priority item's runs process consecutive frames, one per table
 *    period, in order: priority work is never dropped (no DROP event);
 *  - no silent stall (the invariant of pe_sched.c): at the end, no released
 *    queue head waits in a cycle, and none that could run sits on a unit
 *    that has done nothing for two windows (no_silent_stall below);
 *  - LATE and MISS flags agree with start / end against release + deadline;
 *    a low item never starts before its release;
 *  - each unit's low items run (or are dropped) in table order, cyclically;
 *  - the counters equal the events' tallies.
 */
#include "fuzz_common.h"
#include "pyembed/pe_sched.h"

#define MAX_ITEMS 10
#define MAX_AFTER 8
#define MAX_EVENTS 4096
#define PERIODS 6

typedef struct {
    fz_reader *r;
    uint8_t durations[256];
    int32_t next;
    int faulted;
} host;

static pe_status work(void *user, int32_t item_index, const pe_sched_item *item, int64_t frame,
                      uint64_t start, uint32_t *cycles)
{
    host *h = (host *)user;
    const uint32_t f = h->durations[h->next++ & 255];
    (void)item_index;
    (void)frame;
    (void)start;
    if (f == 255) {
        h->faulted = 1;
        return PE_ERR_STATE; /* the work function fails */
    }
    /* mostly near the estimate, sometimes up to 4x over */
    *cycles = (uint32_t)(((uint64_t)item->est_cycles * (f < 192 ? 12u + (f & 7u) : (f & 63u))) / 16u);
    return PE_OK;
}

static pe_status prefetch(void *user, int32_t op, int32_t item_index, const pe_sched_item *item,
                          int64_t frame, uint64_t now, uint64_t *ready_at)
{
    host *h = (host *)user;
    const uint32_t f = h->durations[h->next++ & 255];
    (void)item_index;
    (void)frame;
    if (op == PE_SCHED_PREFETCH_START) {
        *ready_at = now + ((uint64_t)item->prefetch_cycles * (8u + (f & 31u))) / 16u;
    } else if (f & 1u) {
        /* the copy is done: report when (no later than now) */
        *ready_at = *ready_at <= now ? *ready_at : now;
    }
    return PE_OK;
}

static int cmp_phase(const void *a, const void *b)
{
    const pe_sched_item *x = (const pe_sched_item *)a, *y = (const pe_sched_item *)b;
    return (x->phase > y->phase) - (x->phase < y->phase);
}

/* ---- the no-silent-stall invariant (pe_sched.c) ---------------------------
 *
 * Every released run runs, or an event names it while it cannot; the waits
 * never form a cycle. Checked at the end of a run from the header's rules
 * and the dispatcher's visible state: a run behind the head of its queue
 * waits for that head, so only heads matter. A released head that has not
 * run waits
 *  - for time: a handover still in progress, its DMA copy; fine until then;
 *  - for another queue's head: a run its constraints need that has not
 *    happened (the head of that item's queue must run first), or, for a low
 *    head, the released priority head of its unit planned in its window or
 *    earlier; follow it;
 *  - for nothing: it can run, so its unit must run it or report on it
 *    (DEFER each window) soon: a unit with no event for two windows (plus
 *    ticks, handovers and copies) while such a head waits has stopped
 *    silently.
 * A cycle in the "waits for another head" graph is a deadlock: nothing in
 * it can ever run, and the waits are not all reported. */

typedef struct {
    const pe_sched_table *t;
    const pe_sched_state *s;
    uint64_t until;
    uint64_t slack;
    uint64_t act[8];  /* last activity (event) of each unit */
    int color[16];    /* per queue: 0 unvisited, 1 on the walk, 2 fine */
    int32_t path[16];
    int32_t depth;
} stall_walk;

/* head item of queue q = unit * 2 + kind and its planned window; -1: none */
static int32_t queue_head(const stall_walk *w, int32_t q, int64_t *window)
{
    const pe_sched_unit_state *us = &w->s->units[q / 2];
    const int32_t item = (q & 1) == PE_SCHED_PRIORITY ? us->prio_pos : us->low_pos;
    const uint32_t period = (q & 1) == PE_SCHED_PRIORITY ? us->prio_period : us->low_period;
    if (item >= 0) {
        *window = (int64_t)period * w->t->hyper_windows + w->t->items[item].phase;
    }
    return item;
}

static int walk_queue(stall_walk *w, int32_t q)
{
    const pe_sched_table *t = w->t;
    int64_t wh = 0, wp = 0;
    const int32_t h = queue_head(w, q, &wh);
    const int32_t unit = q / 2;
    uint64_t ready = 0;
    int blocked = 0, a;
    if (w->color[q] == 2) {
        return 1;
    }
    if (w->color[q] == 1) {
        int32_t d;
        fprintf(stderr, "wait cycle:");
        for (d = 0; d < w->depth; d++) {
            fprintf(stderr, " queue %d (unit %d %s)", w->path[d], w->path[d] / 2,
                    (w->path[d] & 1) ? "low" : "priority");
        }
        fprintf(stderr, " -> queue %d\n", q);
        return 0;
    }
    if (h < 0 || (uint64_t)wh * t->window_cycles > w->until) {
        w->color[q] = 2; /* nothing queued, or not released yet */
        return 1;
    }
    w->color[q] = 1;
    w->path[w->depth++] = q;
    ready = (uint64_t)wh * t->window_cycles;
    if (t->items[h].kind == PE_SCHED_LOW && (t->items[h].flags & PE_SCHED_PREFETCH) != 0u &&
        w->s->items[h].prefetch_run == w->s->items[h].runs + 1u &&
        w->s->items[h].prefetch_ready > ready) {
        ready = w->s->items[h].prefetch_ready; /* its DMA copy lands then (this host's copies
                                                * end when START said) */
    }
    for (a = t->items[h].first_after; a < t->items[h].first_after + t->items[h].n_after; a++) {
        const pe_sched_after *af = &t->after[a];
        const int64_t need = (int64_t)w->s->items[h].runs + af->offset;
        const pe_sched_item_state *dep = &w->s->items[af->item];
        if (need <= 0) {
            continue;
        }
        if ((int64_t)dep->runs < need) {
            blocked = 1;
            if (!walk_queue(w, t->items[af->item].unit * 2 + t->items[af->item].kind)) {
                return 0;
            }
        } else if ((int64_t)dep->runs == need && dep->last_end + af->handover_cycles > ready) {
            ready = dep->last_end + af->handover_cycles;
        }
    }
    if (t->items[h].kind == PE_SCHED_LOW) {
        const int32_t p = queue_head(w, unit * 2 + PE_SCHED_PRIORITY, &wp);
        if (p >= 0 && (uint64_t)wp * t->window_cycles <= w->until && wp <= wh) {
            blocked = 1; /* behind the released priority run of its window */
            if (!walk_queue(w, unit * 2 + PE_SCHED_PRIORITY)) {
                return 0;
            }
        }
    }
    if (!blocked && ready <= w->until) {
        const uint64_t since = ready > w->act[unit] ? ready : w->act[unit];
        if (since < w->until && w->until - since > w->slack) {
            fprintf(stderr, "item %d (unit %d, %s, planned window %lld) could run from %llu, its "
                            "unit did nothing from %llu to the end (%llu)\n",
                    h, unit, t->items[h].kind == PE_SCHED_LOW ? "low" : "priority", (long long)wh,
                    (unsigned long long)ready, (unsigned long long)since,
                    (unsigned long long)w->until);
            return 0;
        }
    }
    w->depth--;
    w->color[q] = 2;
    return 1;
}

static int no_silent_stall(const pe_sched_table *t, const pe_sched_state *s,
                           const pe_sched_event *ev, int32_t n_ev, uint64_t until)
{
    stall_walk w;
    int32_t k, q;
    memset(&w, 0, sizeof(w));
    w.t = t;
    w.s = s;
    w.until = until;
    /* an idle unit wakes by the next window boundary (tick-rounded); then it
     * runs or reports; handovers <= 500 cycles, copies <= ~2500 */
    w.slack = 2u * (uint64_t)t->window_cycles + 2u * t->tick_cycles + 3000u;
    for (k = 0; k < n_ev; k++) {
        const uint64_t at = ev[k].end > ev[k].start ? ev[k].end : ev[k].start;
        if (ev[k].unit >= 0 && ev[k].unit < 8 && at > w.act[ev[k].unit]) {
            w.act[ev[k].unit] = at;
        }
    }
    for (q = 0; q < 2 * t->n_units; q++) {
        if (!walk_queue(&w, q)) {
            return 0;
        }
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size_in);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size_in)
{
    fz_reader r = {data, size_in};
    pe_sched_item items[MAX_ITEMS];
    pe_sched_after after[MAX_AFTER];
    pe_sched_table t;
    pe_sched_work_fn fns[2];
    pe_sched_state state;
    pe_context ctx;
    host h;
    pe_sched_event *ev = NULL;
    uint8_t *buf = NULL;
    int32_t i, k, u, n_ev = 0, size = -1;
    uint64_t until;
    pe_status st;
    /* tallies */
    int64_t prio_next_frame[MAX_ITEMS];
    uint64_t unit_busy_until[8];
    int32_t low_last[8];
    uint64_t n_prio = 0, n_low = 0, n_drop = 0, n_miss = 0, n_late = 0;

    memset(&t, 0, sizeof(t));
    memset(items, 0, sizeof(items));
    memset(after, 0, sizeof(after));
    memset(&h, 0, sizeof(h));
    t.tick_cycles = (uint32_t)fz_wild(&r, 1, 100);
    t.window_cycles = t.tick_cycles * (uint32_t)fz_range(&r, 1, 100);
    if (fz_u8(&r) == 7) {
        t.window_cycles = fz_u32(&r); /* maybe not a multiple of the tick */
    }
    t.guard_cycles = (uint32_t)fz_range(&r, 0, 200);
    t.hyper_windows = fz_wild(&r, 1, 4);
    t.n_units = fz_wild(&r, 1, 2);
    t.n_instances = fz_wild(&r, 0, 3);
    t.n_items = fz_wild(&r, 1, MAX_ITEMS);
    t.n_after = fz_wild(&r, 0, MAX_AFTER);
    t.overrun_tolerance_q16 = (uint32_t)fz_range(&r, 0, 65536);
    t.max_lag_windows = fz_range(&r, -1, 3);
    if (t.n_items < 1 || t.n_items > MAX_ITEMS || t.n_after < 0 || t.n_after > MAX_AFTER) {
        /* counts beyond the arrays: only the check may look (it must refuse
         * n_items < 1 and n_after < 0 without reading) */
        if (t.n_items < 1 || t.n_after < 0) {
            t.items = items;
            t.after = after;
            FZ_CHECK(pe_sched_check_table(&t) == PE_ERR_ARG, "bad counts accepted");
        }
        return 0;
    }
    for (i = 0; i < t.n_items; i++) {
        pe_sched_item *it = &items[i];
        it->model = i;
        it->kind = fz_wild(&r, 0, 1);
        it->unit = fz_wild(&r, 0, t.n_units > 0 ? t.n_units - 1 : 0);
        it->work = fz_wild(&r, 0, 1);
        it->phase = fz_wild(&r, 0, t.hyper_windows > 0 ? t.hyper_windows - 1 : 0);
        it->instance = fz_wild(&r, -1, t.n_instances > 0 ? t.n_instances - 1 : -1);
        it->flags = (uint32_t)fz_range(&r, 0, 15);
        if ((fz_u8(&r) & 3u) != 0u) { /* keep most flag sets legal */
            if (it->kind == PE_SCHED_PRIORITY) {
                it->flags &= ~(PE_SCHED_CARRY | PE_SCHED_PREFETCH);
            }
            if (it->flags & (PE_SCHED_FIRST | PE_SCHED_CARRY)) {
                it->flags &= ~PE_SCHED_PREFETCH;
            }
        }
        it->first_after = fz_wild(&r, 0, t.n_after);
        {
            /* a wild first_after may be far outside [0, n_after]: no int overflow */
            const int64_t room = (int64_t)t.n_after - it->first_after;
            it->n_after = fz_wild(&r, 0, room > 2 ? 2 : (int32_t)room);
        }
        it->est_cycles = (uint32_t)fz_range(&r, 0, (int32_t)(t.window_cycles / 2u > 0x7FFFFFFFu
                                                                 ? 0x7FFFFFFF
                                                                 : t.window_cycles / 2u));
        it->deadline_cycles = (uint32_t)fz_range(&r, 0, (int32_t)(t.window_cycles > 0x7FFFFFFFu
                                                                      ? 0x7FFFFFFF
                                                                      : t.window_cycles));
        it->prefetch_cycles = (uint32_t)fz_range(&r, 0, 1000);
        it->first_op = 0;
        it->last_op = 1;
    }
    qsort(items, (size_t)t.n_items, sizeof(items[0]), cmp_phase);
    for (k = 0; k < t.n_after; k++) {
        after[k].item = fz_wild(&r, 0, t.n_items - 1);
        after[k].offset = fz_wild(&r, -1, 2);
        after[k].handover_cycles = (uint32_t)fz_range(&r, 0, 500);
    }
    t.items = items;
    t.after = after;
    for (i = 0; i < 256; i++) {
        h.durations[i] = (uint8_t)fz_u8(&r);
        if (r.n == 0 && h.durations[i] == 0) {
            h.durations[i] = (uint8_t)(12 + (i & 7)); /* input exhausted: near the estimate */
        }
    }
    st = pe_sched_check_table(&t);
    if (fz_verbose()) {
        fprintf(stderr, "case: window %u tick %u guard %u hyper %d units %d inst %d items %d after %d "
                        "tol %u lag %d check %d\n",
                t.window_cycles, t.tick_cycles, t.guard_cycles, t.hyper_windows, t.n_units,
                t.n_instances, t.n_items, t.n_after, t.overrun_tolerance_q16, t.max_lag_windows, st);
        for (i = 0; i < t.n_items; i++) {
            const pe_sched_item *it = &items[i];
            fprintf(stderr, "  item %d kind %d unit %d work %d phase %d inst %d flags %u after %d+%d est %u dl %u pf %u\n",
                    i, it->kind, it->unit, it->work, it->phase, it->instance, it->flags,
                    it->first_after, it->n_after, it->est_cycles, it->deadline_cycles,
                    it->prefetch_cycles);
        }
        for (k = 0; k < t.n_after; k++) {
            fprintf(stderr, "  after %d: item %d offset %d handover %u\n", k, after[k].item,
                    after[k].offset, after[k].handover_cycles);
        }
    }
    if (st != PE_OK) {
        return 0;
    }
    st = pe_sched_get_buffer_size(&t, &size);
    FZ_CHECK(st == PE_OK || st == PE_ERR_OVERFLOW, "size query status %d", st);
    if (st != PE_OK || t.n_units > 8 || t.hyper_windows > 64 || size > (1 << 24)) {
        /* valid but big: pe_sched_init alone loops units x hyper_windows x
         * items times, six table periods are too many windows to run, and a
         * state of more than 16 MiB (many instances) would only exhaust the
         * fuzzer's 2 GiB memory limit */
        return 0;
    }
    FZ_CHECK(size > 0, "size %d", size);
    fns[0] = work;
    fns[1] = work;
    buf = (uint8_t *)fz_alloc((size_t)size);
    fz_poison(buf, (size_t)size);
    ctx.buf = buf;
    ctx.size = size - 1;
    ctx.stats = NULL;
    st = pe_sched_init(&ctx, &t, fns, 2, &h, &state);
    for (i = 0; i < t.n_items; i++) {
        if (items[i].work >= 2) {
            FZ_CHECK(st == PE_ERR_ARG, "work index %d of 2 functions: status %d", items[i].work, st);
            goto done;
        }
    }
    FZ_CHECK(st == PE_ERR_SCRATCH, "one byte short: status %d", st);
    ctx.size = size;
    st = pe_sched_init(&ctx, &t, fns, 2, &h, &state);
    FZ_CHECK(st == PE_OK, "init status %d", st);
    FZ_CHECK(pe_sched_set_prefetch(&state, prefetch) == PE_OK, "set_prefetch");

    until = (uint64_t)t.window_cycles * (uint64_t)t.hyper_windows * PERIODS;
    ev = (pe_sched_event *)fz_alloc(sizeof(pe_sched_event) * MAX_EVENTS);
    {
        int32_t calls = 0, got = 0;
        do {
            st = pe_sched_run(&state, until, ev + n_ev, MAX_EVENTS - n_ev, &got);
            n_ev += got;
            calls++;
        } while (st == PE_OK && got > 0 && n_ev < MAX_EVENTS && calls < 64);
        if (st != PE_OK) {
            /* only the host's failures stop the dispatcher */
            FZ_CHECK(h.faulted || st == PE_ERR_STATE, "pe_sched_run status %d", st);
            goto done;
        }
        if (n_ev >= MAX_EVENTS) {
            goto done; /* more than we look at */
        }
    }

    if (fz_verbose()) {
        for (k = 0; k < n_ev; k++) {
            fprintf(stderr, "  ev %d: unit %d item %d flags 0x%x frame %lld planned %lld start %llu end %llu wake %llu\n",
                    k, ev[k].unit, ev[k].item, ev[k].flags, (long long)ev[k].frame,
                    (long long)ev[k].planned_window, (unsigned long long)ev[k].start,
                    (unsigned long long)ev[k].end, (unsigned long long)ev[k].wake);
        }
    }
    for (i = 0; i < MAX_ITEMS; i++) {
        prio_next_frame[i] = -1;
    }
    for (u = 0; u < 8; u++) {
        unit_busy_until[u] = 0;
        low_last[u] = -1;
    }
    for (k = 0; k < n_ev; k++) {
        const pe_sched_event *e = &ev[k];
        const pe_sched_item *it;
        FZ_CHECK(e->unit >= 0 && e->unit < t.n_units, "event %d unit %d", k, e->unit);
        if (e->item < 0) {
            continue;
        }
        FZ_CHECK(e->item < t.n_items, "event %d item %d", k, e->item);
        it = &items[e->item];
        FZ_CHECK(it->unit == e->unit, "event %d: item of unit %d reported on %d", k, it->unit,
                 e->unit);
        if (e->flags & (PE_SCHED_EV_RAN | PE_SCHED_EV_DROP)) {
            FZ_CHECK(e->start >= unit_busy_until[e->unit],
                     "event %d: unit %d starts item %d at %llu, busy until %llu", k, e->unit,
                     e->item, (unsigned long long)e->start,
                     (unsigned long long)unit_busy_until[e->unit]);
            FZ_CHECK(e->end >= e->start, "event %d ends before it starts", k);
            FZ_CHECK(e->release == (uint64_t)e->planned_window * t.window_cycles,
                     "event %d: release %llu of planned window %lld", k,
                     (unsigned long long)e->release, (long long)e->planned_window);
        }
        if (e->flags & PE_SCHED_EV_RAN) {
            FZ_CHECK(e->start >= e->release, "event %d: item %d starts at %llu before its release %llu",
                     k, e->item, (unsigned long long)e->start, (unsigned long long)e->release);
            unit_busy_until[e->unit] = e->end;
        }
        if (e->flags & PE_SCHED_EV_STALL) {
            FZ_CHECK(it->kind == PE_SCHED_PRIORITY && e->flags == PE_SCHED_EV_STALL,
                     "event %d: stall of item %d (kind %d) with flags 0x%x", k, e->item, it->kind,
                     e->flags);
        }
        if (it->kind == PE_SCHED_PRIORITY) {
            FZ_CHECK(!(e->flags & PE_SCHED_EV_DROP), "priority item %d dropped", e->item);
            if (e->flags & PE_SCHED_EV_RAN) {
                const int64_t want = prio_next_frame[e->item] < 0 ? it->phase
                                                                  : prio_next_frame[e->item];
                FZ_CHECK(e->frame == want && e->planned_window == want,
                         "priority item %d processed frame %lld (planned %lld), expected %lld", e->item,
                         (long long)e->frame, (long long)e->planned_window, (long long)want);
                prio_next_frame[e->item] = want + t.hyper_windows;
                FZ_CHECK(!!(e->flags & PE_SCHED_EV_LATE) == (e->start > e->release),
                         "event %d: LATE flag %d, start %llu release %llu", k,
                         !!(e->flags & PE_SCHED_EV_LATE), (unsigned long long)e->start,
                         (unsigned long long)e->release);
                FZ_CHECK(!!(e->flags & PE_SCHED_EV_MISS) ==
                             (e->end > e->release + it->deadline_cycles),
                         "event %d: MISS flag disagrees with end %llu, deadline %llu", k,
                         (unsigned long long)e->end,
                         (unsigned long long)(e->release + it->deadline_cycles));
                n_prio++;
                n_late += (e->flags & PE_SCHED_EV_LATE) != 0u;
                n_miss += (e->flags & PE_SCHED_EV_MISS) != 0u;
            }
        } else if (e->flags & (PE_SCHED_EV_RAN | PE_SCHED_EV_DROP)) {
            /* the unit's low queue in table order, cyclically (CARRY items
             * skipped silently in the first period may be missing) */
            if (low_last[e->unit] >= 0) {
                int32_t j = low_last[e->unit], steps = 0;
                do {
                    j = (j + 1) % t.n_items;
                    steps++;
                } while (!(items[j].unit == e->unit && items[j].kind == PE_SCHED_LOW) &&
                         steps <= t.n_items);
                FZ_CHECK(j == e->item || (items[j].flags & PE_SCHED_CARRY),
                         "unit %d low queue: item %d after %d, table order says %d", e->unit,
                         e->item, low_last[e->unit], j);
            }
            low_last[e->unit] = e->item;
            n_low += (e->flags & PE_SCHED_EV_RAN) != 0u;
            n_drop += (e->flags & PE_SCHED_EV_DROP) != 0u;
        }
    }
    FZ_CHECK(state.counters.priority_runs == n_prio && state.counters.low_runs == n_low &&
                 state.counters.dropped == n_drop && state.counters.deadline_misses == n_miss &&
                 state.counters.late_starts == n_late,
             "counters prio %llu low %llu drop %llu miss %llu late %llu, events %llu %llu %llu "
             "%llu %llu",
             (unsigned long long)state.counters.priority_runs,
             (unsigned long long)state.counters.low_runs,
             (unsigned long long)state.counters.dropped,
             (unsigned long long)state.counters.deadline_misses,
             (unsigned long long)state.counters.late_starts, (unsigned long long)n_prio,
             (unsigned long long)n_low, (unsigned long long)n_drop, (unsigned long long)n_miss,
             (unsigned long long)n_late);

    /* no silent stall (the invariant at the top of pe_sched.c): at the end,
     * follow what each queue's released head waits for */
    for (u = 0; u < t.n_units; u++) {
        FZ_CHECK(state.units[u].clock >= until, "unit %d stopped at %llu before %llu", u,
                 (unsigned long long)state.units[u].clock, (unsigned long long)until);
    }
    FZ_CHECK(no_silent_stall(&t, &state, ev, n_ev, until), "silent stall");
done:
    free(ev);
    free(buf);
    return 0;
}
