/*
 * pe_batch3.h - issue #30's third batch of TFLite Micro operators.
 *
 * REVERSE_V2: the output is the input with the order of elements reversed
 *   along every axis k with flip[k] != 0 (any number of axes). Elements of
 *   1, 2 or 4 bytes, rank 1..PE_BATCH3_MAX_RANK, every dim >= 1; no scratch.
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

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_BATCH3_H */
