/* pe_segload.h - segmented execution from flash: the segment loader.
 *
 * When a model's weights do not fit the RAM set aside for them (the block),
 * its operators are divided into consecutive segments (planned ahead of time,
 * firmware_sim.segments / SPEC section 6). Segment k's constants are copied
 * from flash into the block at its planned offset; segment k+1 is copied while
 * segment k runs, into space no running segment uses (the plan's wait_for:
 * the segment whose compute must end before the load may start).
 *
 * Copies go through a DMA hook (start a copy, wait for all started copies);
 * without one the loader copies with memcpy when a load starts. Nothing is
 * allocated: the caller provides the state and the block.
 *
 *   pe_segload_init(&s, &plan, block, block_bytes, &dma or NULL);
 *   pe_segload_begin(&s);                   start loading (segment 0 and what fits)
 *   for k: pe_segload_acquire(&s, k);       segment k resident (and k+1 loading)
 *          run segment k's operators;
 *          pe_segload_release(&s, k);       its space may be reused
 *
 * Every function returns PE_OK, PE_ERR_ARG (bad plan or argument) or
 * PE_ERR_STATE (called out of order), or the DMA hook's error.
 */
#ifndef PE_SEGLOAD_H
#define PE_SEGLOAD_H

#include <stdint.h>

#include "pyembed/pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One contiguous copy: bytes from src (flash) to block + dst_offset. */
typedef struct {
    const void *src;
    uint32_t dst_offset; /* from the start of the block */
    uint32_t bytes;
} pe_segload_copy;

typedef struct {
    int32_t first_copy;  /* copies[first_copy .. first_copy + n_copies - 1] */
    int32_t n_copies;
    uint32_t offset;     /* the segment's place in the block */
    uint32_t bytes;      /* its size there; every copy lies inside [offset, offset + bytes) */
    int32_t wait_for;    /* segment whose compute must end before this one loads, -1: none */
    int32_t first_op;    /* the operators it runs (graph table entries [first_op, end_op)) */
    int32_t end_op;
} pe_segload_segment;

typedef struct {
    const pe_segload_segment *segments;
    int32_t n_segments;
    const pe_segload_copy *copies;
    int32_t n_copies;
    uint32_t block_bytes;
} pe_segload_plan;

/* DMA hook: start(copy, dst, src, n) starts the plan's copy number `copy`
 * (n bytes src -> dst) and may return before it completes; copies are
 * started in increasing `copy` order. wait(copy_end) returns once every
 * started copy with a number below copy_end has completed. */
typedef struct {
    pe_status (*start)(void *user, int32_t copy, void *dst, const void *src, uint32_t n);
    pe_status (*wait)(void *user, int32_t copy_end);
    void *user;
} pe_segload_dma;

typedef struct {
    const pe_segload_plan *plan;
    uint8_t *block;
    pe_segload_dma dma;
    int32_t use_dma;
    int32_t next_load;    /* next segment to start loading */
    int32_t computed;     /* segments [0, computed) have been released */
    int32_t acquired;     /* segment currently acquired, -1: none */
    int32_t pad_;
    uint32_t loads;       /* segments whose load was started */
    uint32_t bytes_loaded;
} pe_segload_state;

/* Validates a plan: segments in order covering consecutive operator ranges
 * and consecutive copy ranges (so copies start in increasing order),
 * inside the block, copies inside their segment and not overlapping each
 * other, wait_for < own index, and no
 * segment loading over a segment that may still run (between wait_for + 1
 * and itself). */
pe_status pe_segload_check_plan(const pe_segload_plan *plan);

/* dma NULL: memcpy. block must hold plan->block_bytes. */
pe_status pe_segload_init(pe_segload_state *s, const pe_segload_plan *plan, uint8_t *block,
                          uint32_t block_bytes, const pe_segload_dma *dma);
/* Starts the loads allowed before any compute (segment 0 and those that
 * overlap nothing). */
pe_status pe_segload_begin(pe_segload_state *s);
/* Returns once segment k (the next one in order) is resident; starts the
 * loads that may run while k computes. */
pe_status pe_segload_acquire(pe_segload_state *s, int32_t k);
/* Segment k (the acquired one) has finished computing. */
pe_status pe_segload_release(pe_segload_state *s, int32_t k);

#ifdef __cplusplus
}
#endif

#endif /* PE_SEGLOAD_H */
