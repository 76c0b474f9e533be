/* pe_segload.c - the segment loader (see pe_segload.h). */
#include "pyembed/pe_segload.h"

#include <string.h>

static int ranges_overlap(uint32_t a0, uint32_t an, uint32_t b0, uint32_t bn)
{
    return an != 0u && bn != 0u && a0 < b0 + bn && b0 < a0 + an;
}

pe_status pe_segload_check_plan(const pe_segload_plan *p)
{
    int32_t k, j, i, next_op = 0, next_copy = 0;
    if (p == NULL || p->n_segments < 1 || p->segments == NULL || p->n_copies < 0 ||
        (p->n_copies > 0 && p->copies == NULL)) {
        return PE_ERR_ARG;
    }
    for (k = 0; k < p->n_segments; k++) {
        const pe_segload_segment *s = &p->segments[k];
        if (s->first_op != next_op || s->end_op < s->first_op || s->first_copy != next_copy || s->wait_for < -1 || s->wait_for >= k ||
            s->offset > p->block_bytes || s->bytes > p->block_bytes - s->offset || s->first_copy < 0 ||
            s->n_copies < 0 || s->first_copy > p->n_copies || s->n_copies > p->n_copies - s->first_copy) {
            return PE_ERR_ARG;
        }
        next_op = s->end_op;
        next_copy = s->first_copy + s->n_copies;
        for (j = s->first_copy; j < s->first_copy + s->n_copies; j++) {
            const pe_segload_copy *c = &p->copies[j];
            if ((c->src == NULL && c->bytes > 0u) || c->dst_offset < s->offset ||
                c->dst_offset - s->offset > s->bytes || c->bytes > s->bytes - (c->dst_offset - s->offset)) {
                return PE_ERR_ARG;
            }
            for (i = s->first_copy; i < j; i++) { /* one segment's copies do not overlap */
                if (ranges_overlap(c->dst_offset, c->bytes, p->copies[i].dst_offset, p->copies[i].bytes)) {
                    return PE_ERR_ARG;
                }
            }
        }
        /* segments after wait_for may still be running or resident when k loads */
        for (j = s->wait_for + 1; j < k; j++) {
            const pe_segload_segment *o = &p->segments[j];
            if (ranges_overlap(s->offset, s->bytes, o->offset, o->bytes)) {
                return PE_ERR_ARG;
            }
        }
    }
    return PE_OK;
}

pe_status pe_segload_init(pe_segload_state *s, const pe_segload_plan *plan, uint8_t *block,
                          uint32_t block_bytes, const pe_segload_dma *dma)
{
    pe_status st;
    if (s == NULL || block == NULL) {
        return PE_ERR_ARG;
    }
    st = pe_segload_check_plan(plan);
    if (st != PE_OK) {
        return st;
    }
    if (block_bytes < plan->block_bytes) {
        return PE_ERR_ARG;
    }
    if (dma != NULL && (dma->start == NULL || dma->wait == NULL)) {
        return PE_ERR_ARG;
    }
    memset(s, 0, sizeof(*s));
    s->plan = plan;
    s->block = block;
    s->use_dma = dma != NULL;
    if (dma != NULL) {
        s->dma = *dma;
    }
    s->next_load = -1; /* begin not called */
    s->acquired = -1;
    return PE_OK;
}

static pe_status start_load(pe_segload_state *s, int32_t k)
{
    const pe_segload_plan *p = s->plan;
    const pe_segload_segment *seg = &p->segments[k];
    int32_t j;
    for (j = seg->first_copy; j < seg->first_copy + seg->n_copies; j++) {
        const pe_segload_copy *c = &p->copies[j];
        if (c->bytes == 0u) {
            continue;
        }
        if (s->use_dma) {
            pe_status st = s->dma.start(s->dma.user, j, s->block + c->dst_offset, c->src, c->bytes);
            if (st != PE_OK) {
                return st;
            }
        } else {
            memcpy(s->block + c->dst_offset, c->src, c->bytes);
        }
        s->bytes_loaded += c->bytes;
    }
    s->loads++;
    return PE_OK;
}

/* Start every load, in order, whose wait_for segment has been released. */
static pe_status start_allowed(pe_segload_state *s)
{
    const pe_segload_plan *p = s->plan;
    while (s->next_load < p->n_segments && p->segments[s->next_load].wait_for < s->computed) {
        pe_status st = start_load(s, s->next_load);
        if (st != PE_OK) {
            return st;
        }
        s->next_load++;
    }
    return PE_OK;
}

pe_status pe_segload_begin(pe_segload_state *s)
{
    if (s == NULL || s->plan == NULL) {
        return PE_ERR_ARG;
    }
    if (s->next_load != -1) {
        return PE_ERR_STATE;
    }
    s->next_load = 0;
    s->computed = 0;
    return start_allowed(s);
}

pe_status pe_segload_acquire(pe_segload_state *s, int32_t k)
{
    pe_status st;
    if (s == NULL || s->plan == NULL || k < 0 || k >= s->plan->n_segments) {
        return PE_ERR_ARG;
    }
    if (s->next_load < 0 || s->acquired != -1 || k != s->computed) {
        return PE_ERR_STATE;
    }
    /* every segment before k is released, so k's own load is allowed */
    st = start_allowed(s);
    if (st != PE_OK) {
        return st;
    }
    if (s->next_load <= k) {
        return PE_ERR_STATE; /* unreachable with a checked plan */
    }
    if (s->use_dma) {
        /* only k's copies: later segments' copies may go on while k runs */
        const pe_segload_segment *seg = &s->plan->segments[k];
        st = s->dma.wait(s->dma.user, seg->first_copy + seg->n_copies);
        if (st != PE_OK) {
            return st;
        }
    }
    s->acquired = k;
    /* segment k computes now; loads that do not touch it may proceed */
    return PE_OK;
}

pe_status pe_segload_release(pe_segload_state *s, int32_t k)
{
    if (s == NULL || s->plan == NULL || k < 0 || k >= s->plan->n_segments) {
        return PE_ERR_ARG;
    }
    if (s->acquired != k) {
        return PE_ERR_STATE;
    }
    s->acquired = -1;
    s->computed = k + 1;
    return start_allowed(s);
}
