/*
 * pe_batch6.c - kernels of issue #30's sixth batch (pe_batch6.h).
 */
#include "pyembed/pe_batch6.h"

/* Element counts of x and y, PE_ERR_ARG / PE_ERR_OVERFLOW for a bad shape. */
static pe_status reduce_shape(int32_t rank, const int32_t *dims, int32_t axis_mask, int32_t *nx, int32_t *ny)
{
    int64_t cx = 1, cy = 1;
    int32_t d;
    if (dims == NULL || rank < 1 || rank > PE_REDUCE_ALL_MAX_RANK || axis_mask < 0 ||
        axis_mask >= (int32_t)1 << rank) {
        return PE_ERR_ARG;
    }
    for (d = 0; d < rank; ++d) {
        if (dims[d] < 1) {
            return PE_ERR_ARG;
        }
        cx *= dims[d]; /* at most INT32_MAX * INT32_MAX after the check below */
        if (cx > INT32_MAX) {
            return PE_ERR_OVERFLOW;
        }
        if (!((axis_mask >> d) & 1)) {
            cy *= dims[d];
        }
    }
    *nx = (int32_t)cx;
    *ny = (int32_t)cy;
    return PE_OK;
}

pe_status pe_reduce_all_bool_scratch_size(int32_t rank, const int32_t *dims, int32_t *bytes)
{
    int32_t nx, ny;
    pe_status st;
    if (bytes == NULL) {
        return PE_ERR_ARG;
    }
    st = reduce_shape(rank, dims, 0, &nx, &ny);
    if (st != PE_OK) {
        return st;
    }
    *bytes = 0;
    return PE_OK;
}

pe_status pe_reduce_all_bool(int32_t rank, const int32_t *dims, int32_t axis_mask, const uint8_t *x, uint8_t *y,
                             void *scratch, int32_t scratch_bytes)
{
    int32_t idx[PE_REDUCE_ALL_MAX_RANK], ystride[PE_REDUCE_ALL_MAX_RANK];
    int32_t nx, ny, i, d, yi, s;
    pe_status st;
    (void)scratch;
    if (x == NULL || y == NULL || scratch_bytes < 0) {
        return PE_ERR_ARG;
    }
    st = reduce_shape(rank, dims, axis_mask, &nx, &ny);
    if (st != PE_OK) {
        return st;
    }
    /* the output stride of each input axis (0 for a reduced axis) */
    s = 1;
    for (d = rank - 1; d >= 0; --d) {
        idx[d] = 0;
        if ((axis_mask >> d) & 1) {
            ystride[d] = 0;
        } else {
            ystride[d] = s;
            s *= dims[d];
        }
    }
    for (i = 0; i < ny; ++i) {
        y[i] = 1;
    }
    yi = 0;
    for (i = 0; i < nx; ++i) {
        if (x[i] == 0) {
            y[yi] = 0;
        }
        /* next input index, row-major, keeping yi = sum idx[d] * ystride[d] */
        for (d = rank - 1; d >= 0; --d) {
            if (++idx[d] < dims[d]) {
                yi += ystride[d];
                break;
            }
            yi -= (dims[d] - 1) * ystride[d];
            idx[d] = 0;
        }
    }
    return PE_OK;
}
