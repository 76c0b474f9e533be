/* test_batch3.c - C unit tests of issue #30's third batch (pe_batch3.h):
 * REVERSE_V2 against a naive index computation for every subset of flipped
 * axes and every element size, PACK / UNPACK slots,
 * BROADCAST_TO, and the refused arguments. Bit-exactness with
 * the TFLM interpreter is tested from Python (tests/test_ops_batch3.py). */
#include <string.h>

#include "pe_test.h"
#include "pyembed/pe_batch3.h"

static void test_reverse(void)
{
    const int32_t dims[3] = {2, 3, 4};
    int32_t x[24], y[24];
    int16_t x16[24], y16[24];
    int8_t x8[24], y8[24];
    int32_t mask, i, j, k;
    for (i = 0; i < 24; i++) {
        x[i] = 1000 * i - 7;
        x16[i] = (int16_t)(300 * i - 5000);
        x8[i] = (int8_t)(11 * i - 128);
    }
    for (mask = 0; mask < 8; mask++) {
        const int32_t flip[3] = {mask & 1, (mask >> 1) & 1, (mask >> 2) & 1};
        PE_CHECK_EQ(pe_reverse_v2(4, 3, dims, flip, x, y), PE_OK);
        PE_CHECK_EQ(pe_reverse_v2(2, 3, dims, flip, x16, y16), PE_OK);
        PE_CHECK_EQ(pe_reverse_v2(1, 3, dims, flip, x8, y8), PE_OK);
        for (i = 0; i < 2; i++) {
            for (j = 0; j < 3; j++) {
                for (k = 0; k < 4; k++) {
                    const int32_t si = flip[0] ? 1 - i : i, sj = flip[1] ? 2 - j : j, sk = flip[2] ? 3 - k : k;
                    const int32_t o = (i * 3 + j) * 4 + k, s = (si * 3 + sj) * 4 + sk;
                    PE_CHECK_EQ(y[o], x[s]);
                    PE_CHECK_EQ(y16[o], x16[s]);
                    PE_CHECK_EQ(y8[o], x8[s]);
                }
            }
        }
    }
}

static void test_refused(void)
{
    const int32_t dims[2] = {2, 3}, bad[2] = {2, 0}, flip[2] = {1, 0};
    const int32_t big[6] = {2048, 2048, 2048, 1, 1, 1};
    int8_t x[6] = {0}, y[6];
    PE_CHECK_EQ(pe_reverse_v2(3, 2, dims, flip, x, y), PE_ERR_ARG);
    PE_CHECK_EQ(pe_reverse_v2(1, 0, dims, flip, x, y), PE_ERR_ARG);
    PE_CHECK_EQ(pe_reverse_v2(1, 7, dims, flip, x, y), PE_ERR_ARG);
    PE_CHECK_EQ(pe_reverse_v2(1, 2, bad, flip, x, y), PE_ERR_ARG);
    PE_CHECK_EQ(pe_reverse_v2(1, 2, dims, flip, NULL, y), PE_ERR_ARG);
    PE_CHECK_EQ(pe_reverse_v2(1, 2, dims, NULL, x, y), PE_ERR_ARG);
    PE_CHECK_EQ(pe_batch3_count(6, big), -1);
    PE_CHECK_EQ(pe_batch3_count(2, dims), 6);
}

static void test_pack(void)
{
    /* packed [2, 3, 4] from 3 pieces of [2, 4] and back */
    int16_t pieces[3][8], packed[24], back[8];
    int32_t k, o, i;
    for (k = 0; k < 3; k++) {
        for (i = 0; i < 8; i++) {
            pieces[k][i] = (int16_t)(100 * k + i - 50);
        }
        PE_CHECK_EQ(pe_pack_slot(2, 2, 3, k, 4, pieces[k], packed), PE_OK);
    }
    for (o = 0; o < 2; o++) {
        for (k = 0; k < 3; k++) {
            for (i = 0; i < 4; i++) {
                PE_CHECK_EQ(packed[(o * 3 + k) * 4 + i], pieces[k][o * 4 + i]);
            }
        }
    }
    for (k = 0; k < 3; k++) {
        PE_CHECK_EQ(pe_unpack_slot(2, 2, 3, k, 4, packed, back), PE_OK);
        PE_CHECK(memcmp(back, pieces[k], sizeof(back)) == 0);
    }
    PE_CHECK_EQ(pe_pack_slot(2, 2, 3, 3, 4, pieces[0], packed), PE_ERR_ARG);
    PE_CHECK_EQ(pe_pack_slot(2, 2, 3, -1, 4, pieces[0], packed), PE_ERR_ARG);
    PE_CHECK_EQ(pe_unpack_slot(3, 2, 3, 0, 4, packed, back), PE_ERR_ARG);
    PE_CHECK_EQ(pe_unpack_slot(2, 0, 3, 0, 4, packed, back), PE_ERR_ARG);
    PE_CHECK_EQ(pe_unpack_slot(2, 2, 3, 0, 4, NULL, back), PE_ERR_ARG);
}

static void test_broadcast(void)
{
    /* [3, 1] -> [2, 3, 4]: strides (0, 1, 0) */
    const int32_t dims[3] = {2, 3, 4}, stride[3] = {0, 1, 0}, over[3] = {0, 2, 0};
    const int8_t x[3] = {-128, 5, 127};
    int8_t y[24];
    int32_t i, j, k;
    PE_CHECK_EQ(pe_broadcast_to(1, 3, dims, stride, 3, x, y), PE_OK);
    for (i = 0; i < 2; i++) {
        for (j = 0; j < 3; j++) {
            for (k = 0; k < 4; k++) {
                PE_CHECK_EQ(y[(i * 3 + j) * 4 + k], x[j]);
            }
        }
    }
    PE_CHECK_EQ(pe_broadcast_to(1, 3, dims, over, 3, x, y), PE_ERR_ARG);   /* would read x[4] */
    PE_CHECK_EQ(pe_broadcast_to(1, 3, dims, stride, 2, x, y), PE_ERR_ARG);
    PE_CHECK_EQ(pe_broadcast_to(1, 3, dims, stride, 0, x, y), PE_ERR_ARG);
    PE_CHECK_EQ(pe_broadcast_to(5, 3, dims, stride, 3, x, y), PE_ERR_ARG);
}

int main(void)
{
    test_broadcast();
    test_reverse();
    test_pack();
    test_refused();
    return PE_TEST_END("test_batch3");
}
