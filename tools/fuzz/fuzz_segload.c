/* fuzz_segload.c - the segment loader (pe_segload) on decoded plans.
 *
 * A plan of up to 8 segments and 16 copies over a block of up to 256 bytes is
 * decoded (mostly in range, sometimes not); pe_segload_check_plan must accept
 * exactly the consistent ones (re-checked here independently). An accepted
 * plan is run with memcpy and with a FIFO DMA that copies only when waited
 * for or while a segment computes: at every acquire the segment's bytes are
 * the flash bytes of its copies, and no copy lands on the segment computing.
 * The block is allocated at its exact size, so ASan catches a write past it. */
#include "fuzz_common.h"
#include "pyembed/pe_segload.h"

#define MAXS 8
#define MAXC 16
#define FLASH 512

static uint8_t flash[FLASH];

typedef struct {
    const pe_segload_plan *plan;
    uint8_t *block;
    int32_t started, done, computing;
    void *dst[MAXC];
    const void *src[MAXC];
    uint32_t n[MAXC];
} fifo_dma;

static void complete(fifo_dma *d, int32_t end)
{
    while (d->done < end && d->done < d->started) {
        int32_t i = d->done;
        if (d->computing >= 0) {
            const pe_segload_segment *s = &d->plan->segments[d->computing];
            const uint32_t off = (uint32_t)((uint8_t *)d->dst[i] - d->block);
            FZ_CHECK(!(d->n[i] && s->bytes && off < s->offset + s->bytes && s->offset < off + d->n[i]),
                     "copy %d [%u, +%u) lands on segment %d [%u, +%u) while it computes", i, off, d->n[i],
                     d->computing, s->offset, s->bytes);
        }
        memcpy(d->dst[i], d->src[i], d->n[i]);
        d->done++;
    }
}

static pe_status dma_start(void *user, int32_t copy, void *dst, const void *src, uint32_t n)
{
    fifo_dma *d = (fifo_dma *)user;
    FZ_CHECK(copy >= 0 && copy < MAXC && copy >= d->started, "copy %d started after %d", copy, d->started);
    while (d->started < copy) { /* zero-byte copies are skipped by the loader */
        d->dst[d->started] = dst;
        d->src[d->started] = src;
        d->n[d->started] = 0;
        d->started++;
    }
    d->dst[copy] = dst;
    d->src[copy] = src;
    d->n[copy] = n;
    d->started = copy + 1;
    return PE_OK;
}

static pe_status dma_wait(void *user, int32_t copy_end)
{
    complete((fifo_dma *)user, copy_end);
    return PE_OK;
}

static int overlap(uint32_t a, uint32_t an, uint32_t b, uint32_t bn)
{
    return an && bn && a < b + bn && b < a + an;
}

/* the plan rules, written again */
static int consistent(const pe_segload_plan *p)
{
    int32_t k, j, i, next = 0, next_copy = 0;
    if (p->n_segments < 1) return 0;
    for (k = 0; k < p->n_segments; k++) {
        const pe_segload_segment *s = &p->segments[k];
        if (s->first_op != next || s->end_op < s->first_op || s->first_copy != next_copy) return 0;
        next = s->end_op;
        next_copy = s->first_copy + s->n_copies;
        if (s->wait_for < -1 || s->wait_for >= k) return 0;
        if ((int64_t)s->offset + s->bytes > (int64_t)p->block_bytes) return 0;
        if (s->first_copy < 0 || s->n_copies < 0 || s->first_copy + s->n_copies > p->n_copies) return 0;
        for (j = s->first_copy; j < s->first_copy + s->n_copies; j++) {
            const pe_segload_copy *c = &p->copies[j];
            if (c->src == NULL && c->bytes) return 0;
            if (c->dst_offset < s->offset || (int64_t)c->dst_offset + c->bytes > (int64_t)s->offset + s->bytes)
                return 0;
            for (i = s->first_copy; i < j; i++)
                if (overlap(c->dst_offset, c->bytes, p->copies[i].dst_offset, p->copies[i].bytes)) return 0;
        }
        for (j = s->wait_for + 1; j < k; j++)
            if (overlap(s->offset, s->bytes, p->segments[j].offset, p->segments[j].bytes)) return 0;
    }
    return 1;
}

static void check_resident(const pe_segload_plan *p, const uint8_t *block, int32_t k)
{
    int32_t j;
    const pe_segload_segment *s = &p->segments[k];
    for (j = s->first_copy; j < s->first_copy + s->n_copies; j++) {
        const pe_segload_copy *c = &p->copies[j];
        FZ_CHECK(c->bytes == 0 || memcmp(block + c->dst_offset, c->src, c->bytes) == 0,
                 "segment %d acquired but copy %d not in place", k, j);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_reader r;
    pe_segload_segment segs[MAXS];
    pe_segload_copy copies[MAXC];
    pe_segload_plan plan;
    pe_segload_state st;
    pe_segload_dma dma;
    fifo_dma fd;
    uint8_t *block;
    int32_t k, i, op = 0, ncopy, mode;
    pe_status s;
    r.p = data;
    r.n = size;
    for (i = 0; i < FLASH; i++) {
        flash[i] = (uint8_t)(i * 7 + 3);
    }
    plan.block_bytes = (uint32_t)fz_range(&r, 1, 256);
    plan.n_segments = fz_range(&r, 0, MAXS);
    ncopy = fz_range(&r, 0, MAXC);
    plan.n_copies = ncopy;
    for (i = 0; i < ncopy; i++) {
        const uint32_t nb = (uint32_t)fz_range(&r, 0, 64);
        const int32_t from = fz_range(&r, 0, FLASH - (int32_t)nb);
        copies[i].src = fz_range(&r, 0, 63) == 0 ? NULL : flash + from;
        copies[i].dst_offset = (uint32_t)fz_range(&r, 0, (int32_t)plan.block_bytes + 4);
        copies[i].bytes = nb;
    }
    {
        int32_t c = 0;
        for (k = 0; k < plan.n_segments; k++) {
            segs[k].first_copy = fz_bool(&r) ? c : fz_range(&r, 0, ncopy);
            segs[k].n_copies = fz_range(&r, 0, ncopy - segs[k].first_copy + (fz_range(&r, 0, 15) == 0));
            c = segs[k].first_copy + segs[k].n_copies;
            segs[k].offset = (uint32_t)fz_range(&r, 0, (int32_t)plan.block_bytes);
            segs[k].bytes = (uint32_t)fz_range(&r, 0, (int32_t)plan.block_bytes - (int32_t)segs[k].offset +
                                                          (fz_range(&r, 0, 15) == 0));
            segs[k].wait_for = fz_range(&r, -2, k);
            segs[k].first_op = fz_range(&r, 0, 15) == 0 ? op + 1 : op;
            segs[k].end_op = segs[k].first_op + fz_range(&r, 0, 3);
            op = segs[k].end_op;
        }
    }
    plan.segments = segs;
    plan.copies = copies;
    s = pe_segload_check_plan(&plan);
    FZ_CHECK((s == PE_OK) == consistent(&plan), "check_plan says %d, the rules say %d", s, consistent(&plan));
    if (s != PE_OK) {
        return 0;
    }
    if (fz_verbose()) {
        fprintf(stderr, "accepted: %d segments, %d copies, block %u\n", plan.n_segments, plan.n_copies,
                plan.block_bytes);
    }
    block = (uint8_t *)fz_alloc(plan.block_bytes);
    FZ_CHECK(pe_segload_init(&st, &plan, block, plan.block_bytes - 1u, NULL) == PE_ERR_ARG, "short block");
    for (mode = 0; mode < 2; mode++) {
        fz_poison(block, plan.block_bytes);
        memset(&fd, 0, sizeof fd);
        fd.plan = &plan;
        fd.block = block;
        fd.computing = -1;
        dma.start = dma_start;
        dma.wait = dma_wait;
        dma.user = &fd;
        FZ_CHECK(pe_segload_init(&st, &plan, block, plan.block_bytes, mode ? &dma : NULL) == PE_OK, "init");
        FZ_CHECK(pe_segload_begin(&st) == PE_OK, "begin");
        for (k = 0; k < plan.n_segments; k++) {
            FZ_CHECK(pe_segload_acquire(&st, k) == PE_OK, "acquire %d", k);
            check_resident(&plan, block, k);
            fd.computing = k;
            complete(&fd, fd.started); /* the DMA goes on while k computes */
            check_resident(&plan, block, k);
            fd.computing = -1;
            FZ_CHECK(pe_segload_release(&st, k) == PE_OK, "release %d", k);
        }
        FZ_CHECK(st.loads == (uint32_t)plan.n_segments, "%u loads of %d segments", st.loads, plan.n_segments);
    }
    free(block);
    return 0;
}
