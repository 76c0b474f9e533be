/* test_math.c - C unit tests of the math operators (pe_activations.h,
 * pe_binary.h, pe_reduce.h, pe_math_ops.h): exact values that follow from the
 * definitions (zero maps to the zero point, MEAN of a constant, broadcasting
 * against a naive loop, gemmlowp constants), and every refused argument.
 * Bit-exactness with the TFLM interpreter is tested from Python
 * (tests/test_ops_math.py). */
#include <stdlib.h>
#include <string.h>

#include "pe_test.h"
#include "pyembed/pe_activations.h"
#include "pyembed/pe_binary.h"
#include "pyembed/pe_math_ops.h"
#include "pyembed/pe_reduce.h"
#include "../src/core/pe_mathfx.h"

static void test_fixed_helpers(void)
{
    int32_t m, s;
    /* exp(0) = 1; exp(-1/4) and exp(-1) within the quartic's 5e-7 (gemmlowp) */
    PE_CHECK_EQ(pe_mf_exp_on_negative(0, 4), PE_INT32_MAX);
    PE_CHECK(abs(pe_mf_exp_on_negative(-(1 << 25), 4) - 1672461947) <= 1000);
    PE_CHECK(abs(pe_mf_exp_on_negative(-(1 << 27), 4) - 790015084) <= 1000);
    /* logistic(0) = 1/2, tanh(0) = 0, odd / complementary symmetry */
    PE_CHECK_EQ(pe_mf_logistic_q4(0), 1 << 30);
    PE_CHECK_EQ(pe_mf_tanh_q4(0), 0);
    PE_CHECK_EQ(pe_mf_tanh_q4(1 << 27), -pe_mf_tanh_q4(-(1 << 27)));
    PE_CHECK_EQ(pe_mf_logistic_q4(1 << 27) + pe_mf_logistic_q4(-(1 << 27)), PE_INT32_MAX);
    /* tanh(1) = 0.7616 in Q0.31 */
    PE_CHECK(abs(pe_mf_tanh_q4(1 << 27) - 1635508502) < 3000);
    /* 1 / sqrt(x) multiplier: x = 4 -> 1/2 */
    pe_mf_inv_sqrt(4, &m, &s);
    PE_CHECK(m > 0 && s <= 0);
    PE_CHECK_EQ(pe_mf_mbqm(1 << 20, m, s + 0), 1 << 19);
    pe_mf_inv_sqrt(1, &m, &s);
    PE_CHECK_EQ(m, PE_INT32_MAX);
    PE_CHECK_EQ(s, 0);
    /* wrapping helpers */
    PE_CHECK_EQ(pe_mf_wrap_shl(0x40000000, 1), PE_INT32_MIN);
    PE_CHECK_EQ(pe_mf_wrap16(32768), -32768);
    PE_CHECK_EQ(pe_mf_srdhm16(-32768, -32768), 32767);
}

static void test_activations(void)
{
    int8_t in[256], out[256];
    int32_t i;
    pe_sigmoid_params sp = {0, 120, 1717986944, 24}; /* input scale 0.1 */
    pe_relu_params rp = {-5, -5, 1 << 30, 1, 0, {-5, 60}};
    pe_unary_quant_params ap = {3, -128, 0, 0, 0};
    for (i = 0; i < 256; i++) {
        in[i] = (int8_t)(i - 128);
    }
    PE_CHECK_EQ(pe_logistic_s8(NULL, &sp, 256, in, out), PE_OK);
    PE_CHECK_EQ(out[128], 0);   /* logistic(0) * 256 - 128 */
    PE_CHECK_EQ(out[0], -128);  /* saturated below -radius */
    PE_CHECK_EQ(out[255], 127);
    for (i = 1; i < 256; i++) {
        PE_CHECK(out[i] >= out[i - 1]); /* monotonic */
    }
    PE_CHECK_EQ(pe_tanh_s8(NULL, &sp, 256, in, out), PE_OK);
    PE_CHECK_EQ(out[128], 0);
    for (i = 1; i < 128; i++) {
        if (out[128 - i] > -128) {
            PE_CHECK_EQ(out[128 + i], -out[128 - i]);
        }
    }
    /* TFLM RELU6: a clamp in the input domain */
    PE_CHECK_EQ(pe_relu_s8(NULL, &rp, 256, in, out), PE_OK);
    for (i = 0; i < 256; i++) {
        PE_CHECK_EQ(out[i], in[i] < -5 ? -5 : (in[i] > 60 ? 60 : in[i]));
    }
    /* ABS without rescale: |x - zp| + out_zp, saturated */
    PE_CHECK_EQ(pe_abs_s8(NULL, &ap, 256, in, out), PE_OK);
    for (i = 0; i < 256; i++) {
        const int32_t v = abs((int32_t)in[i] - 3) - 128;
        PE_CHECK_EQ(out[i], v > 127 ? 127 : v);
    }
    /* the 256-entry table path (512+ elements) equals the direct path */
    {
        static int8_t big_in[768], big_out[768];
        pe_leaky_relu_params lp = {5, -3, 1 << 30, 0, -(1 << 30), -2};
        for (i = 0; i < 768; i++) {
            big_in[i] = (int8_t)((i * 7) % 256 - 128);
        }
        PE_CHECK_EQ(pe_tanh_s8(NULL, &sp, 768, big_in, big_out), PE_OK);
        PE_CHECK_EQ(pe_tanh_s8(NULL, &sp, 256, in, out), PE_OK);
        for (i = 0; i < 768; i++) {
            PE_CHECK_EQ(big_out[i], out[(int32_t)big_in[i] + 128]);
        }
        PE_CHECK_EQ(pe_leaky_relu_s8(NULL, &lp, 768, big_in, big_out), PE_OK);
        PE_CHECK_EQ(pe_leaky_relu_s8(NULL, &lp, 256, in, out), PE_OK);
        for (i = 0; i < 768; i++) {
            PE_CHECK_EQ(big_out[i], out[(int32_t)big_in[i] + 128]);
        }
    }
    /* refused parameters */
    sp.input_left_shift = 31;
    PE_CHECK_EQ(pe_logistic_s8(NULL, &sp, 256, in, out), PE_ERR_ARG);
    sp.input_left_shift = 24;
    sp.input_range_radius = -1;
    PE_CHECK_EQ(pe_tanh_s8(NULL, &sp, 256, in, out), PE_ERR_ARG);
    PE_CHECK_EQ(pe_logistic_s8(NULL, NULL, 256, in, out), PE_ERR_ARG);
    rp.activation.min = 100;
    PE_CHECK_EQ(pe_relu_s8(NULL, &rp, 256, in, out), PE_ERR_ARG);
    ap.rescale = 2;
    PE_CHECK_EQ(pe_abs_s8(NULL, &ap, 256, in, out), PE_ERR_ARG);
    PE_CHECK_EQ(pe_act_lut_s8(NULL, NULL, 4, in, out), PE_ERR_ARG);
    PE_CHECK_EQ(pe_act_lut_s8(NULL, in, -1, in, out), PE_ERR_ARG);
    /* RSQRT refuses inputs below the zero point, leaving the output alone */
    {
        pe_unary_quant_params q = {0, 0, 1 << 30, 0, 0};
        int8_t x[2] = {4, -1}, y[2] = {55, 55};
        PE_CHECK_EQ(pe_rsqrt_s8(NULL, &q, 2, x, y), PE_ERR_ARG);
        PE_CHECK_EQ(y[0], 55);
    }
}

static void test_binary(void)
{
    const pe_shape_nd s1 = {3, {2, 1, 4}}, s2 = {2, {3, 1}}, so = {3, {2, 3, 4}};
    int8_t a[8], b[3], out[24];
    int32_t i, j, k;
    const pe_shape_nd sbad = {2, {2, 4}};
    pe_sub_params sp = {0, 0, 0, 20, {1 << 30, 0}, {1 << 30, 0}, {1 << 30, -18}, {-128, 127}};
    for (i = 0; i < 8; i++) {
        a[i] = (int8_t)(i * 13 - 50);
    }
    for (i = 0; i < 3; i++) {
        b[i] = (int8_t)(i * 40 - 40);
    }
    PE_CHECK_EQ(pe_minmax_s8(NULL, PE_MINMAX_MAX, &s1, a, &s2, b, &so, out), PE_OK);
    for (i = 0; i < 2; i++) {
        for (j = 0; j < 3; j++) {
            for (k = 0; k < 4; k++) {
                const int8_t x = a[i * 4 + k], y = b[j];
                PE_CHECK_EQ(out[(i * 3 + j) * 4 + k], x > y ? x : y);
            }
        }
    }
    /* SUB with equal scales and zero points: x - y exactly */
    PE_CHECK_EQ(pe_sub_s8(NULL, &sp, &s1, a, &s2, b, &so, out), PE_OK);
    for (i = 0; i < 2; i++) {
        for (j = 0; j < 3; j++) {
            for (k = 0; k < 4; k++) {
                const int32_t v = a[i * 4 + k] - b[j];
                PE_CHECK_EQ(out[(i * 3 + j) * 4 + k], v < -128 ? -128 : (v > 127 ? 127 : v));
            }
        }
    }
    /* shapes that do not broadcast, bad params */
    PE_CHECK_EQ(pe_minmax_s8(NULL, PE_MINMAX_MIN, &sbad, a, &s2, b, &so, out), PE_ERR_ARG);
    PE_CHECK_EQ(pe_minmax_s8(NULL, (pe_minmax_kind)7, &s1, a, &s2, b, &so, out), PE_ERR_ARG);
    sp.output_quant.shift = 1;
    PE_CHECK_EQ(pe_sub_s8(NULL, &sp, &s1, a, &s2, b, &so, out), PE_ERR_ARG);
    PE_CHECK_EQ(pe_sub_s8(NULL, NULL, &s1, a, &s2, b, &so, out), PE_ERR_ARG);
}

static void test_reduce(void)
{
    const int32_t dims[4] = {2, 3, 5, 4};
    int8_t in[120], out[8];
    int16_t in16[120], out16[8];
    int32_t i, n;
    pe_reduce_params p = {PE_REDUCE_MEAN, 7, 7, 1 << 30, 1}; /* scale ratio 1 */
    for (i = 0; i < 120; i++) {
        in[i] = (int8_t)(-33 + (i % 4)); /* constant along H and W */
        in16[i] = (int16_t)(1000 * (i % 4));
    }
    PE_CHECK_EQ(pe_reduce_output_count(dims, 4, 0x6u, &n), PE_OK);
    PE_CHECK_EQ(n, 8);
    PE_CHECK_EQ(pe_reduce_get_buffer_size(dims, 4, 0x6u, &n), PE_OK);
    PE_CHECK_EQ(n, 0);
    PE_CHECK_EQ(pe_reduce_s8(NULL, &p, dims, 4, 0x6u, in, 8, out), PE_OK);
    for (i = 0; i < 8; i++) {
        PE_CHECK_EQ(out[i], -33 + (i % 4)); /* mean of a constant */
    }
    p.input_zero_point = 0;
    p.output_zero_point = 0;
    PE_CHECK_EQ(pe_reduce_s16(NULL, &p, dims, 4, 0x6u, in16, 8, out16), PE_OK);
    for (i = 0; i < 8; i++) {
        PE_CHECK_EQ(out16[i], 1000 * (i % 4));
    }
    /* SUM over everything saturates */
    p.mode = PE_REDUCE_SUM;
    PE_CHECK_EQ(pe_reduce_s8(NULL, &p, dims, 4, 0xFu, in, 1, out), PE_OK);
    PE_CHECK_EQ(out[0], -128);
    /* refused */
    PE_CHECK_EQ(pe_reduce_s8(NULL, &p, dims, 4, 0x10u, in, 1, out), PE_ERR_ARG);
    PE_CHECK_EQ(pe_reduce_s8(NULL, &p, dims, 4, 0xFu, in, 2, out), PE_ERR_ARG);
    PE_CHECK_EQ(pe_reduce_s8(NULL, &p, dims, 7, 0x1u, in, 1, out), PE_ERR_ARG);
    p.mode = (pe_reduce_mode)9;
    PE_CHECK_EQ(pe_reduce_s8(NULL, &p, dims, 4, 0x1u, in, 60, out), PE_ERR_ARG);
    /* L2 norm of (3, 4) * k is (0.6, 0.8) in 1/128 steps */
    {
        int8_t x[4] = {30, 40, -3, 4}, y[4];
        PE_CHECK_EQ(pe_l2norm_s8(NULL, 0, 2, 2, x, y), PE_OK);
        PE_CHECK(abs(y[0] - 77) <= 1 && abs(y[1] - 102) <= 1);
        PE_CHECK(abs(y[2] + 77) <= 1 && abs(y[3] - 102) <= 1);
        PE_CHECK_EQ(pe_l2norm_s8(NULL, 0, 2, 0, x, y), PE_ERR_ARG);
    }
}

static void test_words(void)
{
    int8_t in[6] = {-128, -3, 0, 5, 100, 127}, out[6];
    int32_t words[64];
    int32_t k;
    /* GELU table: identity */
    for (k = 0; k < 64; k++) {
        uint32_t w = 0;
        int32_t j;
        for (j = 0; j < 4; j++) {
            w |= (uint32_t)((4 * k + j - 128) & 0xFF) << (8 * j);
        }
        words[k] = (int32_t)w;
    }
    PE_CHECK_EQ(pe_math_invoke(NULL, PE_MOP_GELU, words, 64, PE_MATH_DT_INT8, in, 6, NULL, 0, out, 6),
                PE_OK);
    PE_CHECK(memcmp(in, out, 6) == 0);
    PE_CHECK_EQ(pe_math_invoke(NULL, PE_MOP_GELU, words, 63, PE_MATH_DT_INT8, in, 6, NULL, 0, out, 6),
                PE_ERR_ARG);
    PE_CHECK_EQ(pe_math_invoke(NULL, PE_MOP_GELU, words, 64, PE_MATH_DT_INT8, in, 6, NULL, 0, out, 5),
                PE_ERR_ARG);
    PE_CHECK_EQ(pe_math_invoke(NULL, 99, words, 64, PE_MATH_DT_INT8, in, 6, NULL, 0, out, 6), PE_ERR_ARG);
    PE_CHECK_EQ(pe_math_invoke(NULL, PE_MOP_GELU, words, 64, 3, in, 6, NULL, 0, out, 6), PE_ERR_ARG);
    /* MAXIMUM: shape block must match the counts */
    {
        int32_t w[7] = {2, 2, 3, 2, 3, 1, 3};
        int8_t b[3] = {0, 0, 0};
        PE_CHECK_EQ(pe_math_invoke(NULL, PE_MOP_MAXIMUM, w, 7, PE_MATH_DT_INT8, in, 6, b, 3, out, 6), PE_OK);
        PE_CHECK_EQ(out[0], 0);
        PE_CHECK_EQ(out[5], 127);
        PE_CHECK_EQ(pe_math_invoke(NULL, PE_MOP_MAXIMUM, w, 7, PE_MATH_DT_INT8, in, 6, b, 2, out, 6),
                    PE_ERR_ARG);
        PE_CHECK_EQ(pe_math_invoke(NULL, PE_MOP_MAXIMUM, w, 6, PE_MATH_DT_INT8, in, 6, b, 3, out, 6),
                    PE_ERR_ARG);
        w[0] = 7;
        PE_CHECK_EQ(pe_math_invoke(NULL, PE_MOP_MAXIMUM, w, 7, PE_MATH_DT_INT8, in, 6, b, 3, out, 6),
                    PE_ERR_ARG);
    }
    /* MEAN words: dims must multiply to the input count */
    {
        int32_t w[9] = {1, 0, 0, 1 << 30, 1, 1, 2, 2, 3};
        PE_CHECK_EQ(pe_math_invoke(NULL, PE_MOP_MEAN, w, 9, PE_MATH_DT_INT8, in, 6, NULL, 0, out, 3), PE_OK);
        w[8] = 4;
        PE_CHECK_EQ(pe_math_invoke(NULL, PE_MOP_MEAN, w, 9, PE_MATH_DT_INT8, in, 6, NULL, 0, out, 3),
                    PE_ERR_ARG);
        w[8] = 3;
        w[0] = 5;
        PE_CHECK_EQ(pe_math_invoke(NULL, PE_MOP_MEAN, w, 9, PE_MATH_DT_INT8, in, 6, NULL, 0, out, 3),
                    PE_ERR_ARG);
    }
}

int main(void)
{
    test_fixed_helpers();
    test_activations();
    test_binary();
    test_reduce();
    test_words();
    return PE_TEST_END("test_math");
}
