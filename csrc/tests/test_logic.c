/* test_logic.c - C unit tests of operators 80-93 (pe_logic.h, pe_reduce.h's
 * REDUCE_MAX / REDUCE_MIN): broadcasting results against a naive loop,
 * TFLM's rescaled int8 comparison on hand-computed values, first-index ties
 * of ARG_MAX / ARG_MIN, and every refused argument and word. Bit-exactness
 * with the TFLM interpreter is tested from Python (tests/test_ops_logic.py). */
#include <stdlib.h>
#include <string.h>

#include "pe_test.h"
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_logic.h"
#include "pyembed/pe_reduce.h"

static pe_shape_nd shape2(int32_t a, int32_t b)
{
    pe_shape_nd s;
    s.rank = 2;
    s.dims[0] = a;
    s.dims[1] = b;
    return s;
}

static void test_compare(void)
{
    /* [3, 1] against [1, 4]: every pair, raw int8 */
    const int8_t a[3] = {-128, 0, 127};
    const int8_t b[4] = {127, 0, -128, 1};
    const pe_shape_nd sa = shape2(3, 1), sb = shape2(1, 4), so = shape2(3, 4);
    uint8_t out[12];
    int32_t k, i, j;
    for (k = PE_CMP_EQUAL; k <= PE_CMP_LESS_EQUAL; k++) {
        PE_CHECK_EQ(pe_compare_s8(NULL, (pe_compare_kind)k, NULL, &sa, a, &sb, b, &so, out), PE_OK);
        for (i = 0; i < 3; i++) {
            for (j = 0; j < 4; j++) {
                const int32_t x = a[i], y = b[j];
                const int want = k == PE_CMP_EQUAL ? x == y : k == PE_CMP_NOT_EQUAL ? x != y
                                 : k == PE_CMP_GREATER ? x > y : k == PE_CMP_GREATER_EQUAL ? x >= y
                                 : k == PE_CMP_LESS ? x < y : x <= y;
                PE_CHECK_EQ(out[i * 4 + j], want);
            }
        }
    }
    /* rescaled: x scale 0.5 (mult 2^30, shift 0), y scale 0.25 (2^30, -1), left
     * shift 8: x = 1 (real 0.5) equals y = 2 (real 0.5); x = 1 > y = 1 */
    {
        pe_compare_params p;
        const int8_t x[1] = {1};
        const int8_t y[3] = {2, 1, 3};
        const pe_shape_nd s1 = shape2(1, 1), s3 = shape2(1, 3);
        p.input1_offset = 0;
        p.input2_offset = 0;
        p.left_shift = 8;
        p.input1_quant.multiplier = 1 << 30;
        p.input1_quant.shift = 0;
        p.input2_quant.multiplier = 1 << 30;
        p.input2_quant.shift = -1;
        PE_CHECK_EQ(pe_compare_s8(NULL, PE_CMP_EQUAL, &p, &s1, x, &s3, y, &s3, out), PE_OK);
        PE_CHECK(out[0] == 1 && out[1] == 0 && out[2] == 0);
        PE_CHECK_EQ(pe_compare_s8(NULL, PE_CMP_GREATER, &p, &s1, x, &s3, y, &s3, out), PE_OK);
        PE_CHECK(out[0] == 0 && out[1] == 1 && out[2] == 0);
        p.left_shift = 9;
        PE_CHECK_EQ(pe_compare_s8(NULL, PE_CMP_EQUAL, &p, &s1, x, &s3, y, &s3, out), PE_ERR_ARG);
        p.left_shift = 8;
        p.input2_quant.shift = 1;
        PE_CHECK_EQ(pe_compare_s8(NULL, PE_CMP_EQUAL, &p, &s1, x, &s3, y, &s3, out), PE_ERR_ARG);
    }
    /* bool compares truth values; a shape that does not broadcast is refused */
    {
        const uint8_t t[2] = {0, 7};
        const uint8_t u[2] = {0, 1};
        const pe_shape_nd s = shape2(1, 2), bad = shape2(1, 3);
        PE_CHECK_EQ(pe_compare_bool(NULL, PE_CMP_EQUAL, &s, t, &s, u, &s, out), PE_OK);
        PE_CHECK(out[0] == 1 && out[1] == 1);
        PE_CHECK_EQ(pe_compare_bool(NULL, PE_CMP_LESS, &s, t, &s, u, &s, out), PE_ERR_ARG);
        PE_CHECK_EQ(pe_compare_bool(NULL, PE_CMP_EQUAL, &s, t, &bad, u, &s, out), PE_ERR_ARG);
        PE_CHECK_EQ(pe_compare_s8(NULL, (pe_compare_kind)6, NULL, &s, a, &s, b, &s, out), PE_ERR_ARG);
    }
    {
        const int32_t x[2] = {PE_INT32_MIN, PE_INT32_MAX};
        const pe_shape_nd s = shape2(1, 2), sc = shape2(1, 1);
        const int32_t y[1] = {0};
        PE_CHECK_EQ(pe_compare_s32(NULL, PE_CMP_LESS, &s, x, &sc, y, &s, out), PE_OK);
        PE_CHECK(out[0] == 1 && out[1] == 0);
    }
}

static void test_logical_select(void)
{
    const uint8_t a[2] = {0, 1};
    const uint8_t b[2] = {0, 2};
    const pe_shape_nd sa = shape2(2, 1), sb = shape2(1, 2), so = shape2(2, 2);
    uint8_t out[4];
    PE_CHECK_EQ(pe_logical_bool(NULL, 0, &sa, a, &sb, b, &so, out), PE_OK);
    PE_CHECK(out[0] == 0 && out[1] == 0 && out[2] == 0 && out[3] == 1);
    PE_CHECK_EQ(pe_logical_bool(NULL, 1, &sa, a, &sb, b, &so, out), PE_OK);
    PE_CHECK(out[0] == 0 && out[1] == 1 && out[2] == 1 && out[3] == 1);
    PE_CHECK_EQ(pe_logical_bool(NULL, 2, &sa, a, &sb, b, &so, out), PE_ERR_ARG);
    PE_CHECK_EQ(pe_logical_not_bool(NULL, 2, b, out), PE_OK);
    PE_CHECK(out[0] == 1 && out[1] == 0);
    PE_CHECK_EQ(pe_logical_not_bool(NULL, -1, b, out), PE_ERR_ARG);
    {
        /* cond [2, 1], x [1, 3], y scalar [1, 1] -> [2, 3] int16 */
        const uint8_t c[2] = {1, 0};
        const int16_t x[3] = {-1, -2, -3};
        const int16_t y[1] = {9};
        const pe_shape_nd sc = shape2(2, 1), sx = shape2(1, 3), sy = shape2(1, 1), s = shape2(2, 3);
        int16_t o[6];
        PE_CHECK_EQ(pe_select_v2(NULL, 2, &sc, c, &sx, x, &sy, y, &s, o), PE_OK);
        PE_CHECK(o[0] == -1 && o[1] == -2 && o[2] == -3 && o[3] == 9 && o[4] == 9 && o[5] == 9);
        PE_CHECK_EQ(pe_select_v2(NULL, 3, &sc, c, &sx, x, &sy, y, &s, o), PE_ERR_ARG);
        {
            const pe_shape_nd s12 = shape2(1, 2);
            PE_CHECK_EQ(pe_select_v2(NULL, 2, &sc, c, &sx, x, &s12, y, &s, o), PE_ERR_ARG);
        }
        PE_CHECK_EQ(pe_select_v2(NULL, 2, &s, c, &sx, x, &sy, y, &sc, o), PE_ERR_ARG);
    }
}

static void test_arg_reduce(void)
{
    /* [2, 3, 2] along the middle axis, with ties */
    const int8_t x[12] = {5, -1, 5, 3, 0, 3, /* outer 0 */ -128, 7, -128, 7, 127, 7};
    int32_t idx[4];
    int8_t r[6];
    const int32_t dims[3] = {2, 3, 2};
    PE_CHECK_EQ(pe_arg_minmax_s8(NULL, 1, 2, 3, 2, x, idx), PE_OK);
    PE_CHECK(idx[0] == 0 && idx[1] == 1 && idx[2] == 2 && idx[3] == 0);
    PE_CHECK_EQ(pe_arg_minmax_s8(NULL, 0, 2, 3, 2, x, idx), PE_OK);
    PE_CHECK(idx[0] == 2 && idx[1] == 0 && idx[2] == 0 && idx[3] == 0);
    PE_CHECK_EQ(pe_arg_minmax_s8(NULL, 1, 0, 3, 2, x, idx), PE_ERR_ARG);
    PE_CHECK_EQ(pe_arg_minmax_s8(NULL, 1, 1 << 20, 1 << 20, 1 << 20, x, idx), PE_ERR_ARG);
    PE_CHECK_EQ(pe_arg_minmax_s8(NULL, 1, PE_INT32_MAX, PE_INT32_MAX, PE_INT32_MAX, x, idx), PE_ERR_ARG);
    /* REDUCE_MAX over axes 0 and 2 -> 3 values; REDUCE_MIN over axis 1 -> 4 */
    PE_CHECK_EQ(pe_reduce_minmax_s8(NULL, 1, dims, 3, 5u, x, 3, r), PE_OK);
    PE_CHECK(r[0] == 7 && r[1] == 7 && r[2] == 127);
    PE_CHECK_EQ(pe_reduce_minmax_s8(NULL, 0, dims, 3, 2u, x, 4, r), PE_OK);
    PE_CHECK(r[0] == 0 && r[1] == -1 && r[2] == -128 && r[3] == 7);
    PE_CHECK_EQ(pe_reduce_minmax_s8(NULL, 0, dims, 3, 2u, x, 3, r), PE_ERR_ARG);
    PE_CHECK_EQ(pe_reduce_minmax_s8(NULL, 0, dims, 3, 8u, x, 4, r), PE_ERR_ARG);
    PE_CHECK_EQ(pe_reduce_minmax_s8(NULL, 2, dims, 3, 2u, x, 4, r), PE_ERR_ARG);
}

static void test_words(void)
{
    /* EQUAL int32 through the words: 9 words, then the shape block */
    const int32_t a[2] = {4, -4};
    const int32_t b[2] = {4, 4};
    const void *ins[3];
    int32_t counts[3] = {2, 2, 0};
    int32_t in_dt[3], out_dt;
    uint8_t out[2];
    int32_t w[16] = {2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 2, 2};
    ins[0] = a;
    ins[1] = b;
    ins[2] = NULL;
    PE_CHECK_EQ(pe_logic_op_types(PE_LOP_EQUAL, w, 13, in_dt, &out_dt), PE_OK);
    PE_CHECK(in_dt[0] == PE_LOGIC_DT_INT32 && out_dt == PE_LOGIC_DT_BOOL);
    PE_CHECK_EQ(pe_logic_invoke(NULL, PE_LOP_EQUAL, w, 13, ins, counts, 2, out, 2), PE_OK);
    PE_CHECK(out[0] == 1 && out[1] == 0);
    /* wrong counts, word counts, types, nonzero unused quantization words */
    PE_CHECK_EQ(pe_logic_invoke(NULL, PE_LOP_EQUAL, w, 13, ins, counts, 2, out, 3), PE_ERR_ARG);
    PE_CHECK_EQ(pe_logic_invoke(NULL, PE_LOP_EQUAL, w, 12, ins, counts, 2, out, 2), PE_ERR_ARG);
    PE_CHECK_EQ(pe_logic_invoke(NULL, PE_LOP_EQUAL, w, 13, ins, counts, 3, out, 2), PE_ERR_ARG);
    w[3] = 5;
    PE_CHECK_EQ(pe_logic_invoke(NULL, PE_LOP_EQUAL, w, 13, ins, counts, 2, out, 2), PE_ERR_ARG);
    w[3] = 0;
    w[0] = PE_LOGIC_DT_BOOL;
    PE_CHECK_EQ(pe_logic_op_types(PE_LOP_GREATER, w, 13, in_dt, &out_dt), PE_ERR_ARG);
    w[0] = 3; /* float32 */
    PE_CHECK_EQ(pe_logic_op_types(PE_LOP_EQUAL, w, 13, in_dt, &out_dt), PE_ERR_ARG);
    PE_CHECK_EQ(pe_logic_op_types(79, w, 13, in_dt, &out_dt), PE_ERR_ARG);
    PE_CHECK_EQ(pe_logic_op_inputs(94), 0);
    /* ARG_MAX words: outer * axis * inner must be the input count */
    {
        const int8_t x[6] = {1, 2, 3, 4, 5, 6};
        int32_t idx[2];
        int32_t aw[3] = {1, 3, 2};
        int32_t c1[1] = {6};
        const void *in1[1];
        in1[0] = x;
        PE_CHECK_EQ(pe_logic_invoke(NULL, PE_LOP_ARG_MAX, aw, 3, in1, c1, 1, idx, 2), PE_OK);
        PE_CHECK(idx[0] == 2 && idx[1] == 2);
        aw[1] = 4;
        PE_CHECK_EQ(pe_logic_invoke(NULL, PE_LOP_ARG_MAX, aw, 3, in1, c1, 1, idx, 2), PE_ERR_ARG);
        aw[1] = PE_INT32_MAX;
        aw[0] = PE_INT32_MAX;
        aw[2] = PE_INT32_MAX;
        PE_CHECK_EQ(pe_logic_invoke(NULL, PE_LOP_ARG_MAX, aw, 3, in1, c1, 1, idx, 2), PE_ERR_ARG);
    }
}

int main(void)
{
    test_compare();
    test_logical_select();
    test_arg_reduce();
    test_words();
    return PE_TEST_END("test_logic");
}
