/* test_f32.c - C unit tests of the float32 element-wise kernels (pe_f32.h):
 * exact results (ROUND's ties to even, ABS/NEG/CEIL/FLOOR/SQUARE of known
 * values), broadcasting against a naive index computation, the fused clamp,
 * MAXIMUM/MINIMUM/SQUARED_DIFFERENCE, and the refused arguments. Bit-exactness
 * with the TFLM interpreter is tested from Python (tests/test_ops_f32.py). */
#include <math.h>
#include <string.h>

#include "pe_test.h"
#include "pyembed/pe_f32.h"
#include "pyembed/pe_graph.h"

static void test_unary_exact(void)
{
    const float x[8] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.25f, 3.75f, -7.0f};
    const float round_want[8] = {0.0f, 2.0f, 2.0f, -0.0f, -2.0f, -2.0f, 4.0f, -7.0f};
    const float ceil_want[8] = {1.0f, 2.0f, 3.0f, -0.0f, -1.0f, -2.0f, 4.0f, -7.0f};
    const float floor_want[8] = {0.0f, 1.0f, 2.0f, -1.0f, -2.0f, -3.0f, 3.0f, -7.0f};
    float y[8];
    int i;
    int32_t size = -1;
    PE_CHECK_EQ(pe_f32_scratch_size(&size), PE_OK);
    PE_CHECK_EQ(size, 0);
    PE_CHECK_EQ(pe_f32_unary(PE_F32_ROUND, x, y, 8), PE_OK);
    for (i = 0; i < 8; i++) PE_CHECK(y[i] == round_want[i]);
    PE_CHECK_EQ(pe_f32_unary(PE_F32_CEIL, x, y, 8), PE_OK);
    for (i = 0; i < 8; i++) PE_CHECK(y[i] == ceil_want[i]);
    PE_CHECK_EQ(pe_f32_unary(PE_F32_FLOOR, x, y, 8), PE_OK);
    for (i = 0; i < 8; i++) PE_CHECK(y[i] == floor_want[i]);
    PE_CHECK_EQ(pe_f32_unary(PE_F32_ABS, x, y, 8), PE_OK);
    for (i = 0; i < 8; i++) PE_CHECK(y[i] == (x[i] < 0.0f ? -x[i] : x[i]));
    PE_CHECK_EQ(pe_f32_unary(PE_F32_SQUARE, x, y, 8), PE_OK);
    for (i = 0; i < 8; i++) PE_CHECK(y[i] == x[i] * x[i]);
    memcpy(y, x, sizeof y);   /* in place */
    PE_CHECK_EQ(pe_f32_unary(PE_F32_NEG, y, y, 8), PE_OK);
    for (i = 0; i < 8; i++) PE_CHECK(y[i] == -x[i]);
    PE_CHECK_EQ(pe_f32_unary(PE_F32_SQRT, round_want + 1, y, 2), PE_OK);   /* sqrt(2)^2 ~ 2 */
    PE_CHECK(y[0] > 1.4142f && y[0] < 1.4143f);
    PE_CHECK_EQ(pe_f32_unary(PE_F32_EXP, x, y, 0), PE_OK);
    PE_CHECK_EQ(pe_f32_unary(PE_F32_UNARY_COUNT, x, y, 8), PE_ERR_ARG);
    PE_CHECK_EQ(pe_f32_unary(-1, x, y, 8), PE_ERR_ARG);
    PE_CHECK_EQ(pe_f32_unary(PE_F32_EXP, x, y, -1), PE_ERR_ARG);
    PE_CHECK_EQ(pe_f32_unary(PE_F32_EXP, NULL, y, 2), PE_ERR_ARG);
}

static void test_binary_broadcast(void)
{
    /* a: 2x1x4, b: 3x1, y: 2x3x4 */
    const int32_t as[3] = {2, 1, 4}, bs[3] = {1, 3, 1}, ys[3] = {2, 3, 4};
    float a[8], b[3], y[24];
    int32_t i, j, k;
    for (i = 0; i < 8; i++) a[i] = (float)i - 3.5f;
    for (i = 0; i < 3; i++) b[i] = (float)(i + 1) * 0.75f;
    PE_CHECK_EQ(pe_f32_binary(PE_F32_SUB, a, as, b, bs, y, ys, 3, -2.0f, 2.0f), PE_OK);
    for (i = 0; i < 2; i++)
        for (j = 0; j < 3; j++)
            for (k = 0; k < 4; k++) {
                float r = a[i * 4 + k] - b[j];
                r = r < -2.0f ? -2.0f : (r > 2.0f ? 2.0f : r);
                PE_CHECK(y[(i * 3 + j) * 4 + k] == r);
            }
    PE_CHECK_EQ(pe_f32_binary(PE_F32_MAXIMUM, a, as, b, bs, y, ys, 3, 0.0f, 0.0f), PE_OK);
    PE_CHECK(y[0] == 0.75f && y[23] == 3.5f);
    PE_CHECK_EQ(pe_f32_binary(PE_F32_SQUARED_DIFFERENCE, a, as, b, bs, y, ys, 3, 0.0f, 0.0f), PE_OK);
    PE_CHECK(y[0] == (-3.5f - 0.75f) * (-3.5f - 0.75f));
    PE_CHECK_EQ(pe_f32_binary(PE_F32_MINIMUM, b, bs, a, as, y, ys, 3, 0.0f, 0.0f), PE_OK);
    PE_CHECK(y[0] == -3.5f && y[23] == 2.25f);
    /* refused: a dim that is neither the output's nor 1, a bad rank, op */
    {
        const int32_t bad[3] = {2, 2, 4};
        PE_CHECK_EQ(pe_f32_binary(PE_F32_ADD, a, bad, b, bs, y, ys, 3, 0.0f, 1.0f), PE_ERR_ARG);
        PE_CHECK_EQ(pe_f32_binary(PE_F32_ADD, a, as, b, bs, y, ys, 0, 0.0f, 1.0f), PE_ERR_ARG);
        PE_CHECK_EQ(pe_f32_binary(PE_F32_ADD, a, as, b, bs, y, ys, PE_F32_MAX_RANK + 1, 0.0f, 1.0f), PE_ERR_ARG);
        PE_CHECK_EQ(pe_f32_binary(PE_F32_BINARY_COUNT, a, as, b, bs, y, ys, 3, 0.0f, 1.0f), PE_ERR_ARG);
        PE_CHECK_EQ(pe_f32_binary(PE_F32_ADD, NULL, as, b, bs, y, ys, 3, 0.0f, 1.0f), PE_ERR_ARG);
    }
    {
        const int32_t big[2] = {65536, 65536};
        PE_CHECK_EQ(pe_f32_binary(PE_F32_ADD, a, big, b, big, y, big, 2, 0.0f, 1.0f), PE_ERR_OVERFLOW);
    }
}

/* FLOOR_DIV / FLOOR_MOD on exact values: every quotient and remainder below is representable */
static void test_floor_div_mod(void)
{
    const float a[6] = {7.0f, -7.0f, 7.0f, -7.0f, 6.0f, -0.0f};
    const float b[6] = {2.0f, 2.0f, -2.0f, -2.0f, 3.0f, 3.0f};
    const float div_want[6] = {3.0f, -4.0f, -4.0f, 3.0f, 2.0f, -0.0f};
    const float mod_want[6] = {1.0f, 1.0f, -1.0f, -1.0f, 0.0f, -0.0f};
    const int32_t s[1] = {6};
    float y[6], zero[6];
    int i;
    PE_CHECK_EQ(pe_f32_binary(PE_F32_FLOOR_DIV, a, s, b, s, y, s, 1, 0.0f, 0.0f), PE_OK);
    PE_CHECK(memcmp(y, div_want, sizeof y) == 0);
    PE_CHECK_EQ(pe_f32_binary(PE_F32_FLOOR_MOD, a, s, b, s, y, s, 1, 0.0f, 0.0f), PE_OK);
    PE_CHECK(memcmp(y, mod_want, sizeof y) == 0);
    /* a zero divisor: FLOOR_DIV refuses it and leaves y alone; FLOOR_MOD gives fmodf's NaN */
    memcpy(zero, b, sizeof zero);
    zero[5] = -0.0f;
    for (i = 0; i < 6; i++) {
        y[i] = 42.0f;
    }
    PE_CHECK_EQ(pe_f32_binary(PE_F32_FLOOR_DIV, a, s, zero, s, y, s, 1, 0.0f, 0.0f), PE_ERR_ARG);
    PE_CHECK(y[0] == 42.0f && y[5] == 42.0f);
    PE_CHECK_EQ(pe_f32_binary(PE_F32_FLOOR_MOD, a, s, zero, s, y, s, 1, 0.0f, 0.0f), PE_OK);
    PE_CHECK(y[5] != y[5] && y[0] == 1.0f);
}

/* The graph runners (pe_run_f32.c): SIN of a float32 input, then its sum with
 * a broadcast constant clamped by RELU6; the words' checks; a shifted overlap. */
static void test_graph_runners(void)
{
    static const float cst[3] = {1.0f, 10.0f, -0.25f};
    /* tensors: 0 input (1,1,2,3) @0, 1 SIN (1,1,2,3) @32, 2 constant (1,1,1,3), 3 ADD (1,1,2,3) @64 */
    static const pe_graph_tensor t[4] = {
        {NULL, 0, 24, {1, 1, 2, 3}, PE_DT_FLOAT32}, {NULL, 32, 24, {1, 1, 2, 3}, PE_DT_FLOAT32},
        {cst, -1, 12, {1, 1, 1, 3}, PE_DT_FLOAT32}, {NULL, 64, 24, {1, 1, 2, 3}, PE_DT_FLOAT32}};
    static const int32_t in0[1] = {0}, out1[1] = {1}, add_in[2] = {1, 2}, out3[1] = {3};
    int32_t w[9] = {2, 2, 3, 1, 3, 2, 3, 0, 0x40C00000}; /* rank 2: [2,3] + [1,3] -> [2,3], clamp 0..6 */
    static float buf[24];
    const float x[6] = {0.0f, 1.0f, -1.0f, 3.0f, -0.0f, 100.0f};
    pe_graph_op ops[2];
    pe_graph g;
    pe_context arena;
    int32_t bad_op, bad_tensor, i;
    memset(ops, 0, sizeof(ops));
    ops[0].type = PE_GOP_SIN;
    ops[0].inputs = in0;
    ops[0].num_inputs = 1;
    ops[0].outputs = out1;
    ops[0].num_outputs = 1;
    ops[0].scratch_offset = -1;
    ops[1] = ops[0];
    ops[1].type = PE_GOP_ADD_F32;
    ops[1].inputs = add_in;
    ops[1].num_inputs = 2;
    ops[1].outputs = out3;
    ops[1].params = w;
    ops[1].num_params = 9;
    g.tensors = t;
    g.num_tensors = 4;
    g.ops = ops;
    g.num_ops = 2;
    g.arena_size = 96;
    PE_CHECK_EQ(pe_graph_check(&g, &bad_op, &bad_tensor), PE_OK);
    memcpy(buf, x, sizeof x);
    arena.buf = buf;
    arena.size = 96;
    arena.stats = NULL;
    PE_CHECK_EQ(pe_graph_invoke(&g, &arena), PE_OK);
    for (i = 0; i < 6; i++) {
        float s = sinf(x[i]), v = s + cst[i % 3];
        v = v < 0.0f ? 0.0f : v;
        v = v > 6.0f ? 6.0f : v;
        PE_CHECK(memcmp(&buf[8 + i], &s, 4) == 0);
        PE_CHECK(memcmp(&buf[16 + i], &v, 4) == 0);
    }
    /* words: a shape whose product is not the tensor's count, a wrong word count, rank 0 */
    w[3] = 4;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 1, &arena), PE_ERR_ARG);
    w[3] = 1;
    ops[1].num_params = 8;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 1, &arena), PE_ERR_ARG);
    ops[1].num_params = 9;
    w[0] = 0;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 1, &arena), PE_ERR_ARG);
    w[0] = 2;
    /* a unary operator with words: refused */
    ops[0].num_params = 1;
    ops[0].params = w;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &arena), PE_ERR_ARG);
    ops[0].num_params = 0;
    ops[0].params = NULL;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &arena), PE_OK);
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 1, &arena), PE_OK);
}

int main(void)
{
    test_graph_runners();
    test_unary_exact();
    test_binary_broadcast();
    test_floor_div_mod();
    return PE_TEST_END("test_f32");
}
