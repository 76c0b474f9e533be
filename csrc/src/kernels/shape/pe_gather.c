/*
 * pe_gather.c - GATHER with batch_dims > 0 (see pe_gather.h).
 */
#include "pyembed/pe_gather.h"

#include "pyembed/pe_fixed.h"

/* a * b * c * d for positive int32 factors, or -1 once the product passes
 * INT32_MAX (no int64 overflow: each step multiplies values < 2^31) */
int64_t pe_gather_count4(int32_t a, int32_t b, int32_t c, int32_t d)
{
    int64_t p = (int64_t)a * b;
    if (p > PE_INT32_MAX) {
        return -1;
    }
    p *= c;
    if (p > PE_INT32_MAX) {
        return -1;
    }
    p *= d;
    return p > PE_INT32_MAX ? -1 : p;
}

pe_status pe_gather_batched(int32_t elem_size, int32_t batch, int32_t outer, int32_t axis, int32_t inner,
                            int32_t coords, const void *input, const int32_t *positions, void *output)
{
    const uint8_t *in = (const uint8_t *)input;
    uint8_t *out = (uint8_t *)output;
    int64_t b, o, k, j;
    size_t row;
    if ((elem_size != 1 && elem_size != 2 && elem_size != 4) || batch < 1 || outer < 1 || axis < 1 ||
        inner < 1 || coords < 1 || input == NULL || positions == NULL || output == NULL) {
        return PE_ERR_ARG;
    }
    if (pe_gather_count4(batch, outer, axis, inner) < 0 || pe_gather_count4(batch, outer, coords, inner) < 0 ||
        pe_gather_count4(batch, coords, 1, 1) < 0) {
        return PE_ERR_OVERFLOW;
    }
    for (j = 0; j < (int64_t)batch * coords; j++) {
        if (positions[j] < 0 || positions[j] >= axis) {
            return PE_ERR_ARG;
        }
    }
    row = (size_t)inner * (size_t)elem_size;
    for (b = 0; b < batch; b++) {
        for (o = 0; o < outer; o++) {
            for (k = 0; k < coords; k++) {
                const size_t src = (size_t)(((b * outer) + o) * axis + positions[b * coords + k]) * row;
                const size_t dst = (size_t)(((b * outer) + o) * coords + k) * row;
                size_t i;
                for (i = 0; i < row; i++) {
                    out[dst + i] = in[src + i];
                }
            }
        }
    }
    return PE_OK;
}
