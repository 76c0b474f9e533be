/*
 * pe_gather.h - GATHER with batch_dims > 0 (TFLite's batched gather; the
 * plain gather is a data movement operator of pe_shape_ops.h).
 *
 * With input dims split as [batch..., outer..., axis, inner...] and the
 * positions as [batch..., coords...]:
 *   out[b, o, k, i] = in[b, o, pos[b, k], i]
 * for b < batch, o < outer, k < coords, i < inner (flattened counts).
 * Every position must lie in [0, axis) (PE_ERR_ARG otherwise, before
 * anything is written). Elements of 1, 2 or 4 bytes; no scratch.
 */
#ifndef PYEMBED_PE_GATHER_H
#define PYEMBED_PE_GATHER_H
#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

pe_status pe_gather_batched(int32_t elem_size, int32_t batch, int32_t outer, int32_t axis, int32_t inner,
                            int32_t coords, const void *input, const int32_t *positions, void *output);

/*
 * PE_GOP_GATHER_BATCHED: inputs (input, positions int32), output of the
 *   input's type; words [0] batch [1] outer [2] axis [3] inner [4] coords.
 *   The input holds batch * outer * axis * inner elements, the positions
 *   batch * coords, the output batch * outer * coords * inner.
 */
#define PE_GATHER_BATCHED_WORDS 5

/* a * b * c * d for positive factors, or -1 once the product passes INT32_MAX. */
int64_t pe_gather_count4(int32_t a, int32_t b, int32_t c, int32_t d);

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_GATHER_H */
