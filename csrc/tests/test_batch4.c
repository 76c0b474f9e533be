/* test_batch4.c - C unit tests of issue #30's fourth batch (pe_batch4.h):
 * FILL / ZEROS_LIKE / SHAPE / BROADCAST_ARGS, SPACE_TO_BATCH_ND and
 * BATCH_TO_SPACE_ND against a naive index computation (and each other's
 * inverse), GATHER_ND's flat position check, DYNAMIC_UPDATE_SLICE's clamping,
 * and the refused arguments. Bit-exactness with the TFLM interpreter is
 * tested from Python (tests/test_ops_batch4.py). */
#include <string.h>

#include "pe_test.h"
#include "pyembed/pe_batch4.h"

static void test_fill_zeros_shape(void)
{
    const int16_t v16 = -1234;
    const float vf = -2.5f;
    const int32_t dims[3] = {2, 3, 4};
    int16_t y16[5];
    float yf[3];
    int32_t s[3], i;
    PE_CHECK_EQ(pe_fill(2, 5, &v16, y16), PE_OK);
    for (i = 0; i < 5; i++) {
        PE_CHECK_EQ(y16[i], -1234);
    }
    PE_CHECK_EQ(pe_fill(4, 3, &vf, yf), PE_OK);
    for (i = 0; i < 3; i++) {
        PE_CHECK(yf[i] == -2.5f);
    }
    PE_CHECK_EQ(pe_zeros(2, 5, y16), PE_OK);
    for (i = 0; i < 5; i++) {
        PE_CHECK_EQ(y16[i], 0);
    }
    PE_CHECK_EQ(pe_shape_of(3, dims, s), PE_OK);
    PE_CHECK_EQ(s[0], 2);
    PE_CHECK_EQ(s[2], 4);
    PE_CHECK_EQ(pe_fill(3, 5, &v16, y16), PE_ERR_ARG);
    PE_CHECK_EQ(pe_fill(2, 0, &v16, y16), PE_ERR_ARG);
    PE_CHECK_EQ(pe_fill(2, 5, NULL, y16), PE_ERR_ARG);
    PE_CHECK_EQ(pe_zeros(1, -1, y16), PE_ERR_ARG);
    PE_CHECK_EQ(pe_shape_of(7, dims, s), PE_ERR_ARG);
}

static void test_broadcast_args(void)
{
    const int32_t a[2] = {2, 1}, b[3] = {4, 1, 3}, c[2] = {2, 3}, d[2] = {4, 3};
    int32_t y[3] = {-1, -1, -1};
    PE_CHECK_EQ(pe_broadcast_args(2, a, 3, b, 3, y), PE_OK);
    PE_CHECK_EQ(y[0], 4);
    PE_CHECK_EQ(y[1], 2);
    PE_CHECK_EQ(y[2], 3);
    PE_CHECK_EQ(pe_broadcast_args(3, b, 2, a, 3, y), PE_OK);
    PE_CHECK_EQ(y[1], 2);
    y[0] = y[1] = -7;
    PE_CHECK_EQ(pe_broadcast_args(2, c, 2, d, 2, y), PE_ERR_ARG);   /* 2 vs 4 */
    PE_CHECK_EQ(y[0], -7);                                            /* nothing written */
    PE_CHECK_EQ(pe_broadcast_args(2, a, 3, b, 2, y), PE_ERR_ARG);    /* n_out != max */
}

/* naive SPACE_TO_BATCH_ND of an int16 [1, 3, 5, 2] tensor, block [2, 2], pads top 1, left 2 (bottom 0, right 1) */
static void test_space_batch(void)
{
    const int32_t geom[PE_S2B_GEOM] = {1, 3, 5, 2, 2, 2, 1, 2, 4, 2, 4};
    int16_t x[30], y[64], back[30];
    int32_t b, h, w, c, i;
    for (i = 0; i < 30; i++) {
        x[i] = (int16_t)(1000 - 37 * i);
    }
    PE_CHECK_EQ(pe_space_to_batch_nd(2, geom, 0x7f, x, y), PE_OK);
    for (b = 0; b < 4; b++) {
        for (h = 0; h < 2; h++) {
            for (w = 0; w < 4; w++) {
                for (c = 0; c < 2; c++) {
                    const int32_t sh = h * 2 + b / 2 - 1, sw = w * 2 + b % 2 - 2;
                    const int16_t got = y[((b * 2 + h) * 4 + w) * 2 + c];
                    if (sh < 0 || sh >= 3 || sw < 0 || sw >= 5) {
                        PE_CHECK_EQ(got, 0x7f7f);   /* pad byte in both bytes */
                    } else {
                        PE_CHECK_EQ(got, x[(sh * 5 + sw) * 2 + c]);
                    }
                }
            }
        }
    }
    /* BATCH_TO_SPACE_ND with the same geometry (crops = pads) restores the input */
    memset(back, 0, sizeof(back));
    PE_CHECK_EQ(pe_batch_to_space_nd(2, geom, y, back), PE_OK);
    for (i = 0; i < 30; i++) {
        PE_CHECK_EQ(back[i], x[i]);
    }
    {
        int32_t bad[PE_S2B_GEOM];
        memcpy(bad, geom, sizeof(bad));
        bad[8] = 5;   /* batch != B * bh * bw */
        PE_CHECK_EQ(pe_space_to_batch_nd(2, bad, 0, x, y), PE_ERR_ARG);
        memcpy(bad, geom, sizeof(bad));
        bad[6] = -1;
        PE_CHECK_EQ(pe_batch_to_space_nd(2, bad, y, back), PE_ERR_ARG);
        memcpy(bad, geom, sizeof(bad));
        bad[1] = 65536;
        bad[2] = 65536;   /* past INT32_MAX elements */
        PE_CHECK_EQ(pe_space_to_batch_nd(2, bad, 0, x, y), PE_ERR_ARG);
        PE_CHECK_EQ(pe_space_to_batch_nd(2, geom, 300, x, y), PE_ERR_ARG);
        PE_CHECK_EQ(pe_space_to_batch_nd(3, geom, 0, x, y), PE_ERR_ARG);
    }
}

static void test_gather_nd(void)
{
    /* params [3, 4] int8 0..11; nd 2, slices of 1 element */
    const int32_t stride2[2] = {4, 1}, stride1[1] = {4};
    const int32_t idx[6] = {0, 5, 1, -1, 2, 3}, rows[2] = {2, 0}, bad[2] = {2, 4}, neg[2] = {-1, 3};
    const int32_t stride84[2] = {8, 4}, huge[2] = {1 << 29, -(1 << 30)}; /* terms +-2^32, sum 0 */
    int8_t p[12], y[8];
    int32_t i;
    for (i = 0; i < 12; i++) {
        p[i] = (int8_t)i;
    }
    PE_CHECK_EQ(pe_gather_nd(1, 3, 2, 1, 12, stride2, idx, p, y), PE_OK);
    PE_CHECK_EQ(y[0], 5);    /* [0, 5] is flat position 5, inside the params (TFLM's check) */
    PE_CHECK_EQ(y[1], 3);
    PE_CHECK_EQ(y[2], 11);
    PE_CHECK_EQ(pe_gather_nd(1, 2, 1, 4, 12, stride1, rows, p, y), PE_OK);
    for (i = 0; i < 4; i++) {
        PE_CHECK_EQ(y[i], 8 + i);
        PE_CHECK_EQ(y[4 + i], i);
    }
    PE_CHECK_EQ(pe_gather_nd(1, 1, 2, 1, 12, stride2, bad, p, y), PE_ERR_ARG);
    PE_CHECK_EQ(pe_gather_nd(1, 1, 2, 1, 12, stride2, neg, p, y), PE_ERR_ARG);
    PE_CHECK_EQ(pe_gather_nd(1, 1, 2, 1, 12, stride84, huge, p, y), PE_ERR_ARG);
    PE_CHECK_EQ(pe_gather_nd(1, 1, 0, 1, 12, stride2, bad, p, y), PE_ERR_ARG);
    PE_CHECK_EQ(pe_gather_nd(1, 1, 2, 13, 12, stride2, idx, p, y), PE_ERR_ARG);
}

static void test_dynamic_update_slice(void)
{
    const int32_t dims[2] = {3, 4}, udims[2] = {2, 2}, over[2] = {4, 1};
    const int32_t starts[3][2] = {{1, 1}, {-5, 9}, {2, 3}};
    const int32_t want[3][2] = {{1, 1}, {0, 2}, {1, 2}};
    int32_t x[12], u[4] = {-1, -2, -3, -4}, y[12], s, i, j;
    for (i = 0; i < 12; i++) {
        x[i] = 100 + i;
    }
    for (s = 0; s < 3; s++) {
        PE_CHECK_EQ(pe_dynamic_update_slice(4, 2, dims, udims, starts[s], x, u, y), PE_OK);
        for (i = 0; i < 3; i++) {
            for (j = 0; j < 4; j++) {
                const int32_t ui = i - want[s][0], uj = j - want[s][1];
                const int32_t e = (ui >= 0 && ui < 2 && uj >= 0 && uj < 2) ? u[ui * 2 + uj] : x[i * 4 + j];
                PE_CHECK_EQ(y[i * 4 + j], e);
            }
        }
    }
    PE_CHECK_EQ(pe_dynamic_update_slice(4, 2, dims, over, starts[0], x, u, y), PE_ERR_ARG);
    PE_CHECK_EQ(pe_dynamic_update_slice(4, 0, dims, udims, starts[0], x, u, y), PE_ERR_ARG);
    PE_CHECK_EQ(pe_dynamic_update_slice(8, 2, dims, udims, starts[0], x, u, y), PE_ERR_ARG);
}

int main(void)
{
    test_fill_zeros_shape();
    test_broadcast_args();
    test_space_batch();
    test_gather_nd();
    test_dynamic_update_slice();
    return PE_TEST_END("test_batch4");
}
