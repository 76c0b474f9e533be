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
        memmove(y + (size_t)i * (size_t)elem_size, x + (size_t)src * (size_t)elem_size, (size_t)elem_size);
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

/* Checks shared by PACK / UNPACK; the element count of the packed tensor or -1. */
static int64_t pack_check(int32_t elem_size, int32_t outer, int32_t n, int32_t k, int32_t inner,
                          const void *a, const void *b)
{
    const int32_t dims[3] = {outer, n, inner};
    if (a == NULL || b == NULL || (elem_size != 1 && elem_size != 2 && elem_size != 4) || k < 0 || k >= n) {
        return -1;
    }
    return pe_batch3_count(3, dims);
}

pe_status pe_pack_slot(int32_t elem_size, int32_t outer, int32_t n, int32_t k, int32_t inner,
                       const void *piece, void *packed)
{
    const uint8_t *x = (const uint8_t *)piece;
    uint8_t *y = (uint8_t *)packed;
    const size_t row = (size_t)inner * (size_t)elem_size;
    int32_t o;
    if (pack_check(elem_size, outer, n, k, inner, piece, packed) < 0) {
        return PE_ERR_ARG;
    }
    for (o = 0; o < outer; ++o) {
        memmove(y + ((size_t)o * (size_t)n + (size_t)k) * row, x + (size_t)o * row, row);
    }
    return PE_OK;
}

pe_status pe_unpack_slot(int32_t elem_size, int32_t outer, int32_t n, int32_t k, int32_t inner,
                         const void *packed, void *piece)
{
    const uint8_t *x = (const uint8_t *)packed;
    uint8_t *y = (uint8_t *)piece;
    const size_t row = (size_t)inner * (size_t)elem_size;
    int32_t o;
    if (pack_check(elem_size, outer, n, k, inner, packed, piece) < 0) {
        return PE_ERR_ARG;
    }
    for (o = 0; o < outer; ++o) {
        memmove(y + (size_t)o * row, x + ((size_t)o * (size_t)n + (size_t)k) * row, row);
    }
    return PE_OK;
}

pe_status pe_broadcast_to(int32_t elem_size, int32_t rank, const int32_t *dims, const int32_t *in_stride,
                          int32_t in_count, const void *input, void *output)
{
    const uint8_t *x = (const uint8_t *)input;
    uint8_t *y = (uint8_t *)output;
    int32_t coord[PE_BATCH3_MAX_RANK];
    int64_t count, last = 0;
    int32_t n, i, k, src = 0;
    if (input == NULL || output == NULL || in_stride == NULL || in_count < 1 ||
        (elem_size != 1 && elem_size != 2 && elem_size != 4)) {
        return PE_ERR_ARG;
    }
    count = pe_batch3_count(rank, dims);
    if (count < 0) {
        return PE_ERR_ARG;
    }
    for (k = 0; k < rank; ++k) {
        if (in_stride[k] < 0 || in_stride[k] > in_count) {
            return PE_ERR_ARG;
        }
        last += (int64_t)(dims[k] - 1) * in_stride[k];
        coord[k] = 0;
    }
    if (last >= in_count) {
        return PE_ERR_ARG;
    }
    n = (int32_t)count;
    for (i = 0; i < n; ++i) {
        memmove(y + (size_t)i * (size_t)elem_size, x + (size_t)src * (size_t)elem_size, (size_t)elem_size);
        for (k = rank - 1; k >= 0; --k) {
            if (coord[k] + 1 < dims[k]) {
                coord[k] += 1;
                src += in_stride[k];
                break;
            }
            src -= in_stride[k] * (dims[k] - 1);
            coord[k] = 0;
        }
    }
    return PE_OK;
}
