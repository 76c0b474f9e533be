/*
 * pe_stripe_lazy.h - the stripe executor's lazy schedule (issue #29),
 * private to pe_stripe.c, which includes it after its stripe_run and the
 * declaration of deliver: a layer may leave fewer than block_w computable
 * columns for later (lazy_wait, read by advance), and a producer about to
 * write into a row temporary that would overrun first has its layer compute
 * what it can (make_room).
 */
#ifndef PE_STRIPE_LAZY_H
#define PE_STRIPE_LAZY_H

/* Lazy runs (R->lazy): before columns up to end of layer L's input row are
 * written into its row temporary, a layer that waited computes what it can
 * (and commits), so the temporary does not overrun: what the eager schedule
 * would have done by then (a delivery of no new columns, R->force = L).
 * room_upto: whether it must, as the column its input arrived up to (R->force
 * set), or -1 (not inlined: the depth-first path's frames stay small). */
__attribute__((noinline)) static int32_t room_upto(stripe_run *R, int32_t L, int32_t end)
{
    const stripe_state *s = &R->st[L + 1];
    if (R->lazy && L < R->G->n && s->triggering && s->temp_cols > 0 && end - s->committed > s->temp_cols) {
        R->force = L; /* (advance reads it and sets it back to -1) */
        return s->arrived;
    }
    return -1;
}

/* Whether layer L, whose input row just grew by chunk columns, may leave
 * fewer than block_w computable columns for later: a lazy run, not the layer
 * make_room forces (R->force, set back to -1 here), its input row incomplete,
 * and room in its row temporary for another chunk as large (else make_room
 * would soon force it: computing now costs less). Not inlined, as room_upto. */
__attribute__((noinline)) static int lazy_wait(stripe_run *R, int32_t L, int32_t chunk)
{
    const stripe_state *s = &R->st[L + 1];
    const int forced = R->force == L;
    R->force = -1;
    return R->lazy && !forced && s->arrived < s->in_b &&
           (s->temp_cols == 0 || s->arrived - s->committed + chunk <= s->temp_cols);
}

static inline __attribute__((always_inline)) void make_room(stripe_run *R, int32_t L, int32_t end)
{
    if (R->lazy) {
        const int32_t upto = room_upto(R, L, end);
        if (upto >= 0) {
            deliver(R, L, upto);
        }
    }
}

#endif /* PE_STRIPE_LAZY_H */
