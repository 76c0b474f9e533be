/*
 * pe_batch6.h - issue #30's sixth batch of TFLite Micro operators.
 *
 * REDUCE_ALL: logical AND of a bool tensor (one byte per element, 0 or 1)
 *   over a set of axes, as TFLM's reduce kernel does it: an output element
 *   is 1 when every input element reduced into it is nonzero, 0 otherwise.
 *   No axis reduced: the output is a copy (each byte normalized to 0 / 1).
 *   No scratch (pe_reduce_all_bool_scratch_size answers 0).
 *
 * The input and output must not overlap.
 */
#ifndef PYEMBED_PE_BATCH6_H
#define PYEMBED_PE_BATCH6_H
#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bound on REDUCE_ALL's rank (pyembed.model.ops.logic.MAX_RANK). */
#define PE_REDUCE_ALL_MAX_RANK 6

/* Scratch bytes pe_reduce_all_bool needs: 0 (PE_ERR_ARG for a bad shape). */
pe_status pe_reduce_all_bool_scratch_size(int32_t rank, const int32_t *dims, int32_t *bytes);

/* y = AND of x over the axes whose bit is set in axis_mask (bit d: axis d);
 * x has shape dims[0..rank), y the shape without (or with 1 in place of)
 * the reduced axes, in row-major order. rank 1..PE_REDUCE_ALL_MAX_RANK,
 * dims >= 1, element count <= INT32_MAX, axis_mask < 2^rank. */
pe_status pe_reduce_all_bool(int32_t rank, const int32_t *dims, int32_t axis_mask, const uint8_t *x, uint8_t *y,
                             void *scratch, int32_t scratch_bytes);

/*
 * PE_GOP_REDUCE_ALL: input 0 bool (the constant axes are folded), bool
 *   output; words [0] axis_mask, [1] rank, [2..2+rank) the input dims.
 */
#define PE_REDUCE_ALL_MIN_WORDS 3

#ifdef __cplusplus
}
#endif
#endif /* PYEMBED_PE_BATCH6_H */
