/*
 * pe_batch3.h - issue #30's third batch of TFLite Micro operators.
 *
 * REVERSE_V2: the output is the input with the order of elements reversed
 *   along every axis k with flip[k] != 0 (any number of axes). Elements of
 *   1, 2 or 4 bytes, rank 1..PE_BATCH3_MAX_RANK, every dim >= 1; no scratch.
 *
 * The kernels below expect input and output not to overlap (the planner
 * never places them so); if they do, the copies stay memory-safe (memmove)
 * but the result is unspecified.
 *
 * PACK / UNPACK: with the packed tensor viewed as [outer, n, inner] and each
 *   piece as [outer, inner], piece k is the packed tensor's slot k:
 *   packed[o, k, i] = piece_k[o, i]. pe_pack_slot writes one piece into its
 *   slot, pe_unpack_slot reads one slot into a piece (the runner calls them
 *   once per piece, so no table of pointers is needed). Elements of 1, 2 or
 *   4 bytes; outer, n, inner >= 1, 0 <= k < n, outer * n * inner <= INT32_MAX.
 *
 * BROADCAST_TO: out[c] = in[sum_k c[k] * in_stride[k]] over the output's
 *   coordinates c (dims[0..rank)); a broadcast axis has stride 0. The input
 *   must hold more than sum_k (dims[k] - 1) * in_stride[k] elements
 *   (in_count; PE_ERR_ARG otherwise, before anything is written).
 */
#ifndef PYEMBED_PE_BATCH3_H
#define PYEMBED_PE_BATCH3_H
#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PE_BATCH3_MAX_RANK 6

/* Element count of dims[0..rank) (each >= 1), or -1 when rank is out of
 * range, a dim is < 1, or the product passes INT32_MAX. */
int64_t pe_batch3_count(int32_t rank, const int32_t *dims);

pe_status pe_reverse_v2(int32_t elem_size, int32_t rank, const int32_t *dims, const int32_t *flip,
                        const void *input, void *output);

/*
 * PE_GOP_REVERSE_V2: input 0 (int8 / int16 / int32), output of its type;
 *   words [0] rank, [1..rank] dims, [1+rank..1+2*rank) flip (0 or 1 per axis).
 */
#define PE_REVERSE_V2_WORDS(rank) (1 + 2 * (rank))

pe_status pe_pack_slot(int32_t elem_size, int32_t outer, int32_t n, int32_t k, int32_t inner,
                       const void *piece, void *packed);
pe_status pe_unpack_slot(int32_t elem_size, int32_t outer, int32_t n, int32_t k, int32_t inner,
                         const void *packed, void *piece);

/*
 * PE_GOP_PACK: n inputs of one type (int8 / int16 / int32), one output;
 * PE_GOP_UNPACK: one input, n outputs of its type.
 *   words [0] outer, [1] n (the number of pieces), [2] inner.
 */
#define PE_PACK_WORDS 3

pe_status pe_broadcast_to(int32_t elem_size, int32_t rank, const int32_t *dims, const int32_t *in_stride,
                          int32_t in_count, const void *input, void *output);

/*
 * PE_GOP_BROADCAST_TO: input 0 (int8 / int16 / int32), output of its type;
 *   words [0] rank, [1..rank] output dims, [1+rank..1+2*rank) input strides
 *   (elements; 0 along broadcast axes).
 */
#define PE_BROADCAST_TO_WORDS(rank) (1 + 2 * (rank))

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_BATCH3_H */
