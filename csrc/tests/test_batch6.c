/* test_batch6.c - C unit tests of issue #30's sixth batch (pe_batch6.h):
 * REDUCE_ALL on bool over every axis subset of a 4-D shape against a naive
 * loop, its copy when no axis is reduced, its size query and the refused
 * arguments. Bit-exactness with the TFLM interpreter is tested from Python
 * (tests/test_ops_batch6.py). */
#include <string.h>

#include "pe_test.h"
#include "pyembed/pe_batch6.h"

/* The naive AND over the masked axes of a [2, 3, 4, 5] input. */
static void naive_all(const int32_t *dims, int32_t mask, const uint8_t *x, uint8_t *y)
{
    int32_t i0, i1, i2, i3, o[4], od[4], d;
    for (d = 0; d < 4; ++d) {
        od[d] = ((mask >> d) & 1) ? 1 : dims[d];
    }
    for (d = 0; d < od[0] * od[1] * od[2] * od[3]; ++d) {
        y[d] = 1;
    }
    for (i0 = 0; i0 < dims[0]; ++i0) {
        for (i1 = 0; i1 < dims[1]; ++i1) {
            for (i2 = 0; i2 < dims[2]; ++i2) {
                for (i3 = 0; i3 < dims[3]; ++i3) {
                    const int32_t xi = ((i0 * dims[1] + i1) * dims[2] + i2) * dims[3] + i3;
                    int32_t yi;
                    o[0] = ((mask >> 0) & 1) ? 0 : i0;
                    o[1] = ((mask >> 1) & 1) ? 0 : i1;
                    o[2] = ((mask >> 2) & 1) ? 0 : i2;
                    o[3] = ((mask >> 3) & 1) ? 0 : i3;
                    yi = ((o[0] * od[1] + o[1]) * od[2] + o[2]) * od[3] + o[3];
                    if (x[xi] == 0) {
                        y[yi] = 0;
                    }
                }
            }
        }
    }
}

static void test_reduce_all(void)
{
    const int32_t dims[4] = {2, 3, 4, 5};
    uint8_t x[120], y[121], want[120];
    int32_t i, mask, bytes = -1, pass;
    PE_CHECK_EQ(pe_reduce_all_bool_scratch_size(4, dims, &bytes), PE_OK);
    PE_CHECK_EQ(bytes, 0);
    for (pass = 0; pass < 3; ++pass) {
        /* mostly ones, a few zeros at pass-dependent places; values 2.. count as true */
        for (i = 0; i < 120; ++i) {
            x[i] = (uint8_t)((i * 37 + pass * 11) % 23 == 0 ? 0 : 1 + (pass == 2 ? i % 3 : 0));
        }
        for (mask = 0; mask < 16; ++mask) {
            int32_t ny = 1, d, ok = 1;
            for (d = 0; d < 4; ++d) {
                ny *= ((mask >> d) & 1) ? 1 : dims[d];
            }
            memset(y, 0xAA, sizeof y);
            naive_all(dims, mask, x, want);
            PE_CHECK_EQ(pe_reduce_all_bool(4, dims, mask, x, y, NULL, 0), PE_OK);
            for (i = 0; i < ny; ++i) {
                ok &= y[i] == want[i];
            }
            PE_CHECK(ok);
            PE_CHECK_EQ(y[ny], 0xAA); /* nothing written past the output */
        }
    }
    /* the full reduction of a 1-D input, then its copy (bytes normalized to 0 / 1) */
    x[0] = 3;
    x[1] = 2;
    PE_CHECK_EQ(pe_reduce_all_bool(1, dims, 1, x, y, NULL, 0), PE_OK);
    PE_CHECK_EQ(y[0], 1);
    x[0] = 1;
    x[1] = 0;
    PE_CHECK_EQ(pe_reduce_all_bool(1, dims, 1, x, y, NULL, 0), PE_OK);
    PE_CHECK_EQ(y[0], 0);
    PE_CHECK_EQ(pe_reduce_all_bool(1, dims, 0, x, y, NULL, 0), PE_OK);
    PE_CHECK(y[0] == 1 && y[1] == 0);
}

static void test_reduce_all_refuses(void)
{
    const int32_t dims[2] = {2, 3}, bad[2] = {2, 0}, big[2] = {65536, 65536};
    uint8_t x[6] = {1, 1, 1, 1, 1, 1}, y[6];
    int32_t bytes;
    PE_CHECK_EQ(pe_reduce_all_bool(2, dims, 4, x, y, NULL, 0), PE_ERR_ARG);   /* mask beyond the rank */
    PE_CHECK_EQ(pe_reduce_all_bool(2, dims, -1, x, y, NULL, 0), PE_ERR_ARG);
    PE_CHECK_EQ(pe_reduce_all_bool(0, dims, 0, x, y, NULL, 0), PE_ERR_ARG);
    PE_CHECK_EQ(pe_reduce_all_bool(7, dims, 0, x, y, NULL, 0), PE_ERR_ARG);
    PE_CHECK_EQ(pe_reduce_all_bool(2, bad, 1, x, y, NULL, 0), PE_ERR_ARG);
    PE_CHECK_EQ(pe_reduce_all_bool(2, big, 1, x, y, NULL, 0), PE_ERR_OVERFLOW);
    PE_CHECK_EQ(pe_reduce_all_bool(2, dims, 1, NULL, y, NULL, 0), PE_ERR_ARG);
    PE_CHECK_EQ(pe_reduce_all_bool(2, dims, 1, x, NULL, NULL, 0), PE_ERR_ARG);
    PE_CHECK_EQ(pe_reduce_all_bool(2, NULL, 1, x, y, NULL, 0), PE_ERR_ARG);
    PE_CHECK_EQ(pe_reduce_all_bool_scratch_size(2, dims, NULL), PE_ERR_ARG);
    PE_CHECK_EQ(pe_reduce_all_bool_scratch_size(2, bad, &bytes), PE_ERR_ARG);
}

int main(void)
{
    test_reduce_all();
    test_reduce_all_refuses();
    return PE_TEST_END("test_batch6");
}
