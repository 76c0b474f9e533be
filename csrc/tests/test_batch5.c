/* test_batch5.c - C unit tests of issue #30's fifth batch (pe_batch5.h):
 * ADD_N and CUMSUM with equal input and output scales (where TFLM's
 * requantization reduces to a saturated integer sum, plus its extra -zp_in
 * term), every exclusive / reverse combination against naive loops, the
 * packed table lookup, LOG_SOFTMAX rows of known value, EMBEDDING_LOOKUP rows and its out-of-range index, and
 * the refused arguments. Bit-exactness with the TFLM interpreter is tested
 * from Python (tests/test_ops_batch5.py). */
#include <string.h>

#include "pe_test.h"
#include "pyembed/pe_batch5.h"

/* s_in == s_out: input multiplier 0.5 = (2^30, 0), output 2 / 2^20 = (2^30, -18) */
static pe_sum_q8 equal_scales(int32_t zp_in, int32_t zp_out)
{
    pe_sum_q8 q;
    q.input_offset = -zp_in;
    q.input_multiplier = 1 << 30;
    q.input_shift = 0;
    q.output_multiplier = 1 << 30;
    q.output_shift = -18;
    q.output_offset = zp_out;
    q.act_min = -128;
    q.act_max = 127;
    return q;
}

static int32_t sat8(int32_t v)
{
    return v < -128 ? -128 : (v > 127 ? 127 : v);
}

static void test_add_n(void)
{
    const pe_sum_q8 q = equal_scales(0, 0), qz = equal_scales(3, -2);
    int8_t a[16], b[16], c[16], y[16];
    const int8_t *ins[3];
    int32_t i;
    for (i = 0; i < 16; i++) {
        a[i] = (int8_t)(17 * i - 128);
        b[i] = (int8_t)(100 - 13 * i);
        c[i] = (int8_t)((i % 5) * 31 - 60);
    }
    ins[0] = a;
    ins[1] = b;
    ins[2] = c;
    PE_CHECK_EQ(pe_add_n_s8(&q, 3, ins, 16, y), PE_OK);
    for (i = 0; i < 16; i++) {
        PE_CHECK_EQ(y[i], sat8(a[i] + b[i] + c[i]));
    }
    /* TFLM's accumulator starts at the scaled -zp_in: one extra -zp_in term */
    PE_CHECK_EQ(pe_add_n_s8(&qz, 2, ins, 16, y), PE_OK);
    for (i = 0; i < 16; i++) {
        PE_CHECK_EQ(y[i], sat8((a[i] - 3) + (b[i] - 3) - 3 - 2));
    }
    PE_CHECK_EQ(pe_add_n_s8(&q, 0, ins, 16, y), PE_ERR_ARG);
    PE_CHECK_EQ(pe_add_n_s8(NULL, 2, ins, 16, y), PE_ERR_ARG);
    ins[1] = NULL;
    PE_CHECK_EQ(pe_add_n_s8(&q, 2, ins, 16, y), PE_ERR_ARG);
}

static void test_cumsum(void)
{
    const pe_sum_q8 q = equal_scales(0, 0);
    int8_t x[2 * 5 * 3], y[2 * 5 * 3];
    int32_t flags, o, d, i;
    for (i = 0; i < 30; i++) {
        x[i] = (int8_t)((i * 37) % 61 - 30);
    }
    for (flags = 0; flags < 4; flags++) {
        const int32_t excl = flags & 1, rev = flags >> 1;
        PE_CHECK_EQ(pe_cumsum_s8(&q, 2, 5, 3, excl, rev, x, y), PE_OK);
        for (o = 0; o < 2; o++) {
            for (i = 0; i < 3; i++) {
                for (d = 0; d < 5; d++) {
                    int32_t s = 0, k;
                    for (k = 0; k < 5; k++) {
                        const int in_range = rev ? (excl ? k > d : k >= d) : (excl ? k < d : k <= d);
                        if (in_range) {
                            s += x[(o * 5 + k) * 3 + i];
                        }
                    }
                    PE_CHECK_EQ(y[(o * 5 + d) * 3 + i], sat8(s));
                }
            }
        }
    }
    PE_CHECK_EQ(pe_cumsum_s8(&q, 2, 0, 3, 0, 0, x, y), PE_ERR_ARG);
    PE_CHECK_EQ(pe_cumsum_s8(&q, 2, 5, 3, 2, 0, x, y), PE_ERR_ARG);
    PE_CHECK_EQ(pe_cumsum_s8(&q, 65536, 65536, 1, 0, 0, x, y), PE_ERR_ARG);
}

static void test_sum_q8_check(void)
{
    pe_sum_q8 q = equal_scales(0, 0);
    PE_CHECK_EQ(pe_sum_q8_check(&q), PE_OK);
    q.input_shift = 1;
    PE_CHECK_EQ(pe_sum_q8_check(&q), PE_ERR_ARG);
    q = equal_scales(0, 0);
    q.act_min = 5;
    q.act_max = 4;
    PE_CHECK_EQ(pe_sum_q8_check(&q), PE_ERR_ARG);
    q = equal_scales(-128, 0); /* input offset 128 is allowed, 129 is not */
    PE_CHECK_EQ(pe_sum_q8_check(&q), PE_OK);
    q.input_offset = 129;
    PE_CHECK_EQ(pe_sum_q8_check(&q), PE_ERR_ARG);
}

static void test_lut(void)
{
    int32_t packed[64];
    int8_t x[256], y[256];
    int32_t k, i;
    /* table[j] = 127 - j (wrapping), packed byte j of word k = table[4k + j] */
    for (k = 0; k < 64; k++) {
        uint32_t w = 0;
        for (i = 0; i < 4; i++) {
            w |= (uint32_t)(uint8_t)(int8_t)(127 - (4 * k + i)) << (8 * i);
        }
        packed[k] = (int32_t)w;
    }
    for (i = 0; i < 256; i++) {
        x[i] = (int8_t)(i - 128);
    }
    PE_CHECK_EQ(pe_lut_packed_s8(packed, 256, x, y), PE_OK);
    for (i = 0; i < 256; i++) {
        PE_CHECK_EQ(y[i], (int8_t)(127 - i));
    }
    PE_CHECK_EQ(pe_lut_packed_s8(NULL, 256, x, y), PE_ERR_ARG);
    PE_CHECK_EQ(pe_lut_packed_s8(packed, -1, x, y), PE_ERR_ARG);
}

/* LOG_SOFTMAX with TFLM's parameters of input scale 0.05 (pyembed.model.ops.batch5.log_softmax_words):
 * a one-element row is log 1 = 0 (127), a uniform row of 4 is -log 4 * 16 = -22.2 (105 within one step),
 * an element 12.75 below two maxima is -12.75 - log 2 = -13.44 (-88 within one step). */
static void test_log_softmax(void)
{
    const pe_log_softmax_q8 q = {1717986944, 22, 1342177260, 21, -496};
    const int8_t one[1] = {-40}, flat[4] = {9, 9, 9, 9}, far[3] = {127, -128, 127};
    int8_t y[4];
    int32_t i;
    PE_CHECK_EQ(pe_log_softmax_s8(&q, 1, 1, one, y), PE_OK);
    PE_CHECK_EQ(y[0], 127);
    PE_CHECK_EQ(pe_log_softmax_s8(&q, 1, 4, flat, y), PE_OK);
    for (i = 0; i < 4; i++) {
        PE_CHECK(y[i] >= 104 && y[i] <= 106);
        PE_CHECK_EQ(y[i], y[0]);
    }
    /* two maxima: -log 2 * 16 = -11.1; the -128 is 12.75 below them in real terms */
    PE_CHECK_EQ(pe_log_softmax_s8(&q, 1, 3, far, y), PE_OK);
    PE_CHECK(y[0] >= 115 && y[0] <= 117);
    PE_CHECK_EQ(y[2], y[0]);
    PE_CHECK(y[1] >= -89 && y[1] <= -87);
    /* in place */
    memcpy(y, flat, 4);
    PE_CHECK_EQ(pe_log_softmax_s8(&q, 2, 2, y, y), PE_OK);
    PE_CHECK(y[0] >= 115 && y[0] <= 117 && y[3] == y[0]);
    PE_CHECK_EQ(pe_log_softmax_s8(&q, 1, 0, flat, y), PE_ERR_ARG);
    PE_CHECK_EQ(pe_log_softmax_s8(NULL, 1, 4, flat, y), PE_ERR_ARG);
}

static void test_embedding(void)
{
    int8_t value[4][3], y[3][3], keep[3][3];
    const int32_t idx[3] = {2, 0, 2}, bad[3] = {1, 4, 0}, neg[1] = {-1};
    int32_t r, c;
    for (r = 0; r < 4; r++) {
        for (c = 0; c < 3; c++) {
            value[r][c] = (int8_t)(10 * r + c);
        }
    }
    PE_CHECK_EQ(pe_embedding_lookup(1, 4, 3, 3, idx, value, y), PE_OK);
    for (r = 0; r < 3; r++) {
        PE_CHECK(memcmp(y[r], value[idx[r]], 3) == 0);
    }
    memcpy(keep, y, sizeof(y));
    PE_CHECK_EQ(pe_embedding_lookup(1, 4, 3, 3, bad, value, y), PE_ERR_ARG);
    PE_CHECK(memcmp(keep, y, sizeof(y)) == 0); /* nothing written before the error */
    PE_CHECK_EQ(pe_embedding_lookup(1, 4, 3, 1, neg, value, y), PE_ERR_ARG);
    PE_CHECK_EQ(pe_embedding_lookup(3, 4, 3, 3, idx, value, y), PE_ERR_ARG);
    PE_CHECK_EQ(pe_embedding_lookup(1, 0, 3, 3, idx, value, y), PE_ERR_ARG);
    PE_CHECK_EQ(pe_embedding_lookup(1, 4, 3, 3, NULL, value, y), PE_ERR_ARG);
}

int main(void)
{
    test_add_n();
    test_cumsum();
    test_sum_q8_check();
    test_lut();
    test_log_softmax();
    test_embedding();
    return PE_TEST_END("test_batch5");
}
