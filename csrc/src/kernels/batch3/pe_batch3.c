/*
 * pe_batch3.c - kernels of issue #30's third batch of operators (pe_batch3.h).
 */
#include "pyembed/pe_batch3.h"

#include <string.h>

int64_t pe_batch3_count(int32_t rank, const int32_t *dims)
{
    int64_t n = 1;
    int32_t k;
    if (dims == NULL || rank < 1 || rank > PE_BATCH3_MAX_RANK) {
        return -1;
    }
    for (k = 0; k < rank; ++k) {
        if (dims[k] < 1) {
            return -1;
        }
        n *= dims[k];
        if (n > INT32_MAX) {
            return -1;
        }
    }
    return n;
}

pe_status pe_reverse_v2(int32_t elem_size, int32_t rank, const int32_t *dims, const int32_t *flip,
                        const void *input, void *output)
{
    const uint8_t *x = (const uint8_t *)input;
    uint8_t *y = (uint8_t *)output;
    int32_t stride[PE_BATCH3_MAX_RANK];
    int32_t coord[PE_BATCH3_MAX_RANK];
    int64_t count;
    int32_t n, i, k, src;
    if (input == NULL || output == NULL || flip == NULL ||
        (elem_size != 1 && elem_size != 2 && elem_size != 4)) {
        return PE_ERR_ARG;
    }
    count = pe_batch3_count(rank, dims);
    if (count < 0) {
        return PE_ERR_ARG;
    }
    n = (int32_t)count;
    stride[rank - 1] = 1;
    for (k = rank - 1; k > 0; --k) {
        stride[k - 1] = stride[k] * dims[k];
    }
    /* source of output element 0: the last index along every flipped axis */
    src = 0;
    for (k = 0; k < rank; ++k) {
        coord[k] = 0;
        if (flip[k] != 0) {
            src += (dims[k] - 1) * stride[k];
        }
    }
    for (i = 0; i < n; ++i) {
        memcpy(y + (size_t)i * (size_t)elem_size, x + (size_t)src * (size_t)elem_size, (size_t)elem_size);
        /* odometer step of the output coordinate, moving the source with it */
        for (k = rank - 1; k >= 0; --k) {
            int32_t step = flip[k] != 0 ? -stride[k] : stride[k];
            if (coord[k] + 1 < dims[k]) {
                coord[k] += 1;
                src += step;
                break;
            }
            src -= step * (dims[k] - 1);
            coord[k] = 0;
        }
    }
    return PE_OK;
}
