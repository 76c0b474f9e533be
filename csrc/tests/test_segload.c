/* test_segload.c - the segment loader: plan checks, memcpy and asynchronous
 * DMA loading, order of loads against computes, errors. */
#include <stdint.h>
#include <string.h>

#include "pe_test.h"
#include "pyembed/pe_segload.h"

static uint8_t flash_a[24], flash_b[8], flash_c[16], flash_d[20];
static uint8_t block[64];

/* three segments, compact placement in a 64-byte block:
 * seg 0: a (24 B) at 0; seg 1: b, c at 40 (24 B, overlaps nothing);
 * seg 2: d (20 B) at 0, over seg 0 (waits for its compute) */
static pe_segload_copy copies[4];
static pe_segload_segment segs[3];
static pe_segload_plan plan;

static void make_plan(void)
{
    int i;
    for (i = 0; i < 24; i++) flash_a[i] = (uint8_t)(1 + i);
    for (i = 0; i < 8; i++) flash_b[i] = (uint8_t)(100 + i);
    for (i = 0; i < 16; i++) flash_c[i] = (uint8_t)(150 + i);
    for (i = 0; i < 20; i++) flash_d[i] = (uint8_t)(200 + i);
    copies[0].src = flash_a; copies[0].dst_offset = 0; copies[0].bytes = 24;
    copies[1].src = flash_b; copies[1].dst_offset = 40; copies[1].bytes = 8;
    copies[2].src = flash_c; copies[2].dst_offset = 48; copies[2].bytes = 16;
    copies[3].src = flash_d; copies[3].dst_offset = 0; copies[3].bytes = 20;
    segs[0].first_copy = 0; segs[0].n_copies = 1; segs[0].offset = 0; segs[0].bytes = 24;
    segs[0].wait_for = -1; segs[0].first_op = 0; segs[0].end_op = 2;
    segs[1].first_copy = 1; segs[1].n_copies = 2; segs[1].offset = 40; segs[1].bytes = 24;
    segs[1].wait_for = -1; segs[1].first_op = 2; segs[1].end_op = 3;
    segs[2].first_copy = 3; segs[2].n_copies = 1; segs[2].offset = 0; segs[2].bytes = 20;
    segs[2].wait_for = 0; segs[2].first_op = 3; segs[2].end_op = 5;
    plan.segments = segs; plan.n_segments = 3; plan.copies = copies; plan.n_copies = 4;
    plan.block_bytes = 64;
}

static int resident(int32_t k)
{
    int32_t j;
    for (j = segs[k].first_copy; j < segs[k].first_copy + segs[k].n_copies; j++) {
        if (memcmp(block + copies[j].dst_offset, copies[j].src, copies[j].bytes) != 0) {
            return 0;
        }
    }
    return 1;
}

/* A FIFO DMA that copies only when waited for, and checks that no copy lands
 * on the segment being computed. */
typedef struct {
    int32_t started, done;
    void *dst[8];
    const void *src[8];
    uint32_t n[8];
    int32_t computing; /* segment running, -1 none */
    int32_t overwrites, out_of_order, fail_at;
} fake_dma;

static void complete_upto(fake_dma *d, int32_t end)
{
    while (d->done < end && d->done < d->started) {
        int32_t i = d->done;
        if (d->computing >= 0) {
            const uint32_t off = (uint32_t)((uint8_t *)d->dst[i] - block);
            const pe_segload_segment *s = &segs[d->computing];
            if (off < s->offset + s->bytes && s->offset < off + d->n[i]) {
                d->overwrites++;
            }
        }
        memcpy(d->dst[i], d->src[i], d->n[i]);
        d->done++;
    }
}

static pe_status dma_start(void *user, int32_t copy, void *dst, const void *src, uint32_t n)
{
    fake_dma *d = (fake_dma *)user;
    if (copy == d->fail_at) {
        return PE_ERR_STATE;
    }
    if (copy != d->started || d->started >= 8) {
        d->out_of_order++;
        return PE_ERR_ARG;
    }
    d->dst[copy] = dst;
    d->src[copy] = src;
    d->n[copy] = n;
    d->started++;
    return PE_OK;
}

static pe_status dma_wait(void *user, int32_t copy_end)
{
    complete_upto((fake_dma *)user, copy_end);
    return PE_OK;
}

static void memcpy_loading(void)
{
    pe_segload_state s;
    int32_t k;
    make_plan();
    memset(block, 0, sizeof block);
    PE_CHECK_EQ(pe_segload_check_plan(&plan), PE_OK);
    PE_CHECK_EQ(pe_segload_init(&s, &plan, block, sizeof block, NULL), PE_OK);
    PE_CHECK_EQ(pe_segload_acquire(&s, 0), PE_ERR_STATE); /* before begin */
    PE_CHECK_EQ(pe_segload_begin(&s), PE_OK);
    PE_CHECK_EQ(pe_segload_begin(&s), PE_ERR_STATE);
    PE_CHECK_EQ(s.loads, 2u); /* seg 0 and seg 1 (overlaps nothing) */
    for (k = 0; k < 3; k++) {
        PE_CHECK_EQ(pe_segload_release(&s, k), PE_ERR_STATE); /* not acquired */
        PE_CHECK_EQ(pe_segload_acquire(&s, k + 1 < 3 ? k + 1 : 0), PE_ERR_STATE); /* out of order */
        PE_CHECK_EQ(pe_segload_acquire(&s, k), PE_OK);
        PE_CHECK(resident(k));
        PE_CHECK_EQ(pe_segload_acquire(&s, k), PE_ERR_STATE); /* twice */
        PE_CHECK_EQ(pe_segload_release(&s, k), PE_OK);
    }
    PE_CHECK_EQ(s.loads, 3u);
    PE_CHECK_EQ(s.bytes_loaded, 24u + 8u + 16u + 20u);
    PE_CHECK_EQ(pe_segload_acquire(&s, 3), PE_ERR_ARG);
}

static void dma_loading(void)
{
    pe_segload_state s;
    pe_segload_dma dma;
    fake_dma d;
    int32_t k;
    make_plan();
    memset(block, 0, sizeof block);
    memset(&d, 0, sizeof d);
    d.computing = -1;
    d.fail_at = -1;
    dma.start = dma_start;
    dma.wait = dma_wait;
    dma.user = &d;
    PE_CHECK_EQ(pe_segload_init(&s, &plan, block, sizeof block, &dma), PE_OK);
    PE_CHECK_EQ(pe_segload_begin(&s), PE_OK);
    PE_CHECK_EQ(d.started, 3); /* seg 0's copy and seg 1's two copies */
    PE_CHECK_EQ(d.done, 0);
    for (k = 0; k < 3; k++) {
        PE_CHECK_EQ(pe_segload_acquire(&s, k), PE_OK);
        PE_CHECK(resident(k));
        d.computing = k;
        if (k == 0) {
            /* seg 1 is still in flight while seg 0 runs */
            PE_CHECK_EQ(d.done, 1);
            PE_CHECK(!resident(1));
        }
        /* the DMA makes progress while the segment computes */
        complete_upto(&d, d.started);
        d.computing = -1;
        PE_CHECK_EQ(pe_segload_release(&s, k), PE_OK);
        if (k == 0) {
            PE_CHECK_EQ(d.started, 4); /* seg 2 loads once seg 0 is released */
        }
    }
    PE_CHECK_EQ(d.overwrites, 0);
    PE_CHECK_EQ(d.out_of_order, 0);
    /* a failing DMA start is returned */
    make_plan();
    memset(&d, 0, sizeof d);
    d.computing = -1;
    d.fail_at = 1;
    PE_CHECK_EQ(pe_segload_init(&s, &plan, block, sizeof block, &dma), PE_OK);
    PE_CHECK_EQ(pe_segload_begin(&s), PE_ERR_STATE);
}

static void bad_plans(void)
{
    pe_segload_state s;
    pe_segload_dma dma;
    make_plan();
    PE_CHECK_EQ(pe_segload_check_plan(NULL), PE_ERR_ARG);
    PE_CHECK_EQ(pe_segload_init(NULL, &plan, block, sizeof block, NULL), PE_ERR_ARG);
    PE_CHECK_EQ(pe_segload_init(&s, &plan, NULL, sizeof block, NULL), PE_ERR_ARG);
    PE_CHECK_EQ(pe_segload_init(&s, &plan, block, 63u, NULL), PE_ERR_ARG); /* block too small */
    dma.start = NULL;
    dma.wait = dma_wait;
    dma.user = NULL;
    PE_CHECK_EQ(pe_segload_init(&s, &plan, block, sizeof block, &dma), PE_ERR_ARG);
    /* seg 2 would load over seg 0 before seg 0 ran */
    segs[2].wait_for = -1;
    PE_CHECK_EQ(pe_segload_check_plan(&plan), PE_ERR_ARG);
    segs[2].wait_for = 2;
    PE_CHECK_EQ(pe_segload_check_plan(&plan), PE_ERR_ARG);
    make_plan();
    copies[2].bytes = 17; /* runs past its segment */
    PE_CHECK_EQ(pe_segload_check_plan(&plan), PE_ERR_ARG);
    make_plan();
    copies[3].dst_offset = 40; /* outside its segment */
    PE_CHECK_EQ(pe_segload_check_plan(&plan), PE_ERR_ARG);
    make_plan();
    copies[2].dst_offset = 44; /* overlaps copy 1 of the same segment */
    copies[2].bytes = 8;
    PE_CHECK_EQ(pe_segload_check_plan(&plan), PE_ERR_ARG);
    make_plan();
    segs[2].first_copy = 0; /* copy ranges must follow each other */
    segs[2].n_copies = 1;
    PE_CHECK_EQ(pe_segload_check_plan(&plan), PE_ERR_ARG);
    make_plan();
    segs[1].first_op = 3; /* operators not consecutive */
    PE_CHECK_EQ(pe_segload_check_plan(&plan), PE_ERR_ARG);
    make_plan();
    segs[1].bytes = 25; /* past the block */
    PE_CHECK_EQ(pe_segload_check_plan(&plan), PE_ERR_ARG);
    make_plan();
    segs[2].n_copies = 2; /* past the copy table */
    PE_CHECK_EQ(pe_segload_check_plan(&plan), PE_ERR_ARG);
    make_plan();
    copies[1].src = NULL;
    PE_CHECK_EQ(pe_segload_check_plan(&plan), PE_ERR_ARG);
    make_plan();
    plan.n_segments = 0;
    PE_CHECK_EQ(pe_segload_check_plan(&plan), PE_ERR_ARG);
}

int main(void)
{
    memcpy_loading();
    dma_loading();
    bad_plans();
    return PE_TEST_END("test_segload");
}
