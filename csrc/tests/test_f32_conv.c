/* test_f32_conv.c - C unit tests of the float32 window and matrix kernels
 * (pe_f32_conv.h) and their graph runners (pe_run_f32_conv.c): small
 * integer-valued operands, whose sums are exact in float32 in any order, so
 * that a naive loop here gives the expected values independently of the
 * kernels' order; known pooling and softmax values; the refused arguments.
 * Bit-exactness with the TFLM interpreter (order of accumulation on
 * arbitrary floats) is tested from Python (tests/test_ops_f32_conv.py). */
#include <math.h>
#include <string.h>

#include "pe_test.h"
#include "pyembed/pe_f32_conv.h"
#include "pyembed/pe_graph.h"

static float at(const float *x, const pe_dims *d, int32_t n, int32_t h, int32_t w, int32_t c)
{
    if (h < 0 || h >= d->h || w < 0 || w >= d->w) {
        return 0.0f;
    }
    return x[((n * d->h + h) * d->w + w) * d->c + c];
}

static void test_conv_and_depthwise(void)
{
    /* x 1x5x4x2, filter 3 x (3x2) x 2, stride (2,1), pad (1,0), dilation (1,2): out 1x3x2x3 */
    const pe_dims xd = {1, 5, 4, 2}, wd = {3, 3, 2, 2}, yd = {1, 3, 2, 3};
    const pe_dims dwd = {1, 2, 2, 4}, dyd = {1, 4, 3, 4};
    float x[40], w[36], b[3] = {0.5f, -1.0f, 2.0f}, y[18], dw[16], dy[48];
    pe_f32_window p = {2, 1, 1, 2, 1, 0, -100.0f, 3.0f};
    int32_t i, oy, ox, co, ky, kx, ci, size = -1;
    for (i = 0; i < 40; i++) x[i] = (float)((i * 7) % 9 - 4);
    for (i = 0; i < 36; i++) w[i] = (float)((i * 5) % 7 - 3);
    for (i = 0; i < 16; i++) dw[i] = (float)((i * 3) % 5 - 2);
    PE_CHECK_EQ(pe_f32_conv_scratch_size(&size), PE_OK);
    PE_CHECK_EQ(size, 0);
    PE_CHECK_EQ(pe_f32_conv2d(&p, x, &xd, w, &wd, b, y, &yd), PE_OK);
    for (oy = 0; oy < 3; oy++)
        for (ox = 0; ox < 2; ox++)
            for (co = 0; co < 3; co++) {
                float s = 0.0f;
                for (ky = 0; ky < 3; ky++)
                    for (kx = 0; kx < 2; kx++)
                        for (ci = 0; ci < 2; ci++)
                            s += at(x, &xd, 0, oy * 2 - 1 + ky, ox + 2 * kx, ci) * w[((co * 3 + ky) * 2 + kx) * 2 + ci];
                s += b[co];
                s = s < -100.0f ? -100.0f : (s > 3.0f ? 3.0f : s);
                PE_CHECK(y[(oy * 2 + ox) * 3 + co] == s);
            }
    /* depthwise, multiplier 2, no bias, stride 1, pad (0, 0), kernel 2x2: out 1x4x3x4 */
    p.stride_h = 1;
    p.dilation_w = 1;
    p.pad_top = 0;
    PE_CHECK_EQ(pe_f32_depthwise_conv2d(&p, 2, x, &xd, dw, &dwd, NULL, dy, &dyd), PE_OK);
    for (oy = 0; oy < 4; oy++)
        for (ox = 0; ox < 3; ox++)
            for (co = 0; co < 4; co++) {
                float s = 0.0f;
                for (ky = 0; ky < 2; ky++)
                    for (kx = 0; kx < 2; kx++)
                        s += at(x, &xd, 0, oy + ky, ox + kx, co / 2) * dw[(ky * 2 + kx) * 4 + co];
                s = s > 3.0f ? 3.0f : s;
                PE_CHECK(dy[(oy * 3 + ox) * 4 + co] == s);
            }
    /* refused: NULL, stride 0, negative padding, output channels not the filter's, bad multiplier */
    PE_CHECK_EQ(pe_f32_conv2d(&p, NULL, &xd, w, &wd, b, y, &yd), PE_ERR_ARG);
    p.stride_w = 0;
    PE_CHECK_EQ(pe_f32_conv2d(&p, x, &xd, w, &wd, b, y, &yd), PE_ERR_ARG);
    p.stride_w = 1;
    p.pad_left = -1;
    PE_CHECK_EQ(pe_f32_conv2d(&p, x, &xd, w, &wd, b, y, &yd), PE_ERR_ARG);
    p.pad_left = 0;
    PE_CHECK_EQ(pe_f32_conv2d(&p, x, &xd, w, &wd, b, y, &dyd), PE_ERR_ARG);
    PE_CHECK_EQ(pe_f32_depthwise_conv2d(&p, 3, x, &xd, dw, &dwd, NULL, dy, &dyd), PE_ERR_ARG);
    PE_CHECK_EQ(pe_f32_depthwise_conv2d(&p, 0, x, &xd, dw, &dwd, NULL, dy, &dyd), PE_ERR_ARG);
}

static void test_fully_connected(void)
{
    const float x[6] = {1.0f, -2.0f, 3.0f, 0.5f, 0.25f, -4.0f};
    const float w[6] = {2.0f, 1.0f, -1.0f, 0.0f, 4.0f, 0.5f};
    const float b[2] = {0.125f, -1.0f};
    float y[4];
    PE_CHECK_EQ(pe_f32_fully_connected(x, 2, 3, w, 2, NULL, y, -2.0f, 0.0f), PE_OK);
    PE_CHECK(y[0] == -2.0f);           /* 2 - 2 - 3 = -3, clamped to -2 */
    PE_CHECK(y[1] == -2.0f);           /* -6.5 */
    PE_CHECK(y[2] == 0.0f);            /* 5.25 */
    PE_CHECK_EQ(pe_f32_fully_connected(x, 2, 3, w, 2, b, y, -100.0f, 100.0f), PE_OK);
    PE_CHECK(y[0] == -2.875f);
    PE_CHECK(y[1] == -8.0f + 1.5f - 1.0f);
    PE_CHECK(y[2] == 1.0f + 0.25f + 4.0f + 0.125f);
    PE_CHECK(y[3] == 1.0f - 2.0f - 1.0f);
    PE_CHECK_EQ(pe_f32_fully_connected(x, 0, 3, w, 2, b, y, 0.0f, 1.0f), PE_ERR_ARG);
    PE_CHECK_EQ(pe_f32_fully_connected(x, 2, 3, NULL, 2, b, y, 0.0f, 1.0f), PE_ERR_ARG);
}

static void test_pool_and_softmax(void)
{
    /* x 1x2x3x1 = [[3, 4, -1], [0, NaN, 2]]; window 2x2 stride 1 VALID: out 1x1x2x1 */
    const pe_dims xd = {1, 2, 3, 1}, yd = {1, 1, 2, 1};
    const pe_dims sd = {1, 2, 2, 1};
    float x[6] = {3.0f, 4.0f, -1.0f, 0.0f, 0.0f, 2.0f};
    float y[2], sm[4];
    pe_f32_window p = {1, 1, 1, 1, 0, 0, -1e30f, 1e30f};
    x[4] = nanf("");
    PE_CHECK_EQ(pe_f32_pool(PE_F32_POOL_MAX, &p, 2, 2, x, &xd, y, &yd), PE_OK);
    PE_CHECK(y[0] == 4.0f && y[1] == 4.0f);   /* the NaN tap is passed over */
    x[4] = 1.0f;
    PE_CHECK_EQ(pe_f32_pool(PE_F32_POOL_AVERAGE, &p, 2, 2, x, &xd, y, &yd), PE_OK);
    PE_CHECK(y[0] == 2.0f && y[1] == 1.5f);
    PE_CHECK_EQ(pe_f32_pool(PE_F32_POOL_L2, &p, 2, 2, x, &xd, y, &yd), PE_OK);
    PE_CHECK(y[0] == sqrtf(26.0f / 4.0f) && y[1] == sqrtf(22.0f / 4.0f));
    /* SAME-like padding: the corner window sees one tap; average = that tap */
    p.pad_top = 1;
    p.pad_left = 1;
    PE_CHECK_EQ(pe_f32_pool(PE_F32_POOL_AVERAGE, &p, 2, 2, x, &xd, sm, &sd), PE_OK);
    PE_CHECK(sm[0] == 3.0f && sm[1] == 3.5f);
    /* a window entirely in the padding, an unknown kind, dilation 2 */
    p.pad_top = 2;
    PE_CHECK_EQ(pe_f32_pool(PE_F32_POOL_MAX, &p, 2, 2, x, &xd, sm, &sd), PE_ERR_ARG);
    p.pad_top = 0;
    PE_CHECK_EQ(pe_f32_pool(3, &p, 2, 2, x, &xd, y, &yd), PE_ERR_ARG);
    p.dilation_h = 2;
    PE_CHECK_EQ(pe_f32_pool(PE_F32_POOL_MAX, &p, 2, 2, x, &xd, y, &yd), PE_ERR_ARG);
    /* softmax: equal values give 1/n exactly; in place */
    sm[0] = sm[1] = sm[2] = sm[3] = -7.5f;
    PE_CHECK_EQ(pe_f32_softmax(sm, sm, 1, 4, 1.0f), PE_OK);
    PE_CHECK(sm[0] == 0.25f && sm[3] == 0.25f);
    sm[0] = 0.0f;
    sm[1] = 1.0f;
    PE_CHECK_EQ(pe_f32_softmax(sm, y, 1, 2, 2.0f), PE_OK);
    PE_CHECK(y[1] == 1.0f / (expf(-2.0f) + 1.0f) && y[0] == expf(-2.0f) / (expf(-2.0f) + 1.0f));
    PE_CHECK_EQ(pe_f32_softmax(sm, y, 0, 2, 1.0f), PE_ERR_ARG);
}

/* A 2x2 average pooling and a fully connected layer through pe_graph_invoke;
 * wrong word counts and dims refused. */
static void test_graph_runners(void)
{
    static const float wts[8] = {1.0f, 2.0f, 3.0f, 4.0f, -1.0f, 0.5f, 0.0f, 2.0f};
    static const float bias[2] = {0.5f, -0.5f};
    /* 0 input (1,2,2,4) @0, 1 pooled (1,1,1,4) @64, 2 weights (2,4), 3 bias, 4 output (1,1,1,2) @80 */
    static const pe_graph_tensor t[5] = {
        {NULL, 0, 64, {1, 2, 2, 4}, PE_DT_FLOAT32}, {NULL, 64, 16, {1, 1, 1, 4}, PE_DT_FLOAT32},
        {wts, -1, 32, {1, 1, 2, 4}, PE_DT_FLOAT32}, {bias, -1, 8, {1, 1, 1, 2}, PE_DT_FLOAT32},
        {NULL, 80, 8, {1, 1, 1, 2}, PE_DT_FLOAT32}};
    static const int32_t in0[1] = {0}, out1[1] = {1}, fc_in[3] = {1, 2, 3}, out4[1] = {4};
    int32_t pw[8] = {2, 2, 2, 2, 0, 0, (int32_t)0xFF7FFFFF, 0x7F7FFFFF};   /* -FLT_MAX..FLT_MAX */
    int32_t fw[5] = {1, 4, 2, 0, 0x42C80000};                            /* 0..100 */
    static float buf[24];
    pe_graph_op ops[2];
    pe_graph g;
    pe_context arena;
    int32_t bad_op, bad_tensor, i;
    memset(ops, 0, sizeof(ops));
    ops[0].type = PE_GOP_AVERAGE_POOL_2D_F32;
    ops[0].inputs = in0;
    ops[0].num_inputs = 1;
    ops[0].outputs = out1;
    ops[0].num_outputs = 1;
    ops[0].params = pw;
    ops[0].num_params = 8;
    ops[0].scratch_offset = -1;
    ops[1] = ops[0];
    ops[1].type = PE_GOP_FULLY_CONNECTED_F32;
    ops[1].inputs = fc_in;
    ops[1].num_inputs = 3;
    ops[1].outputs = out4;
    ops[1].params = fw;
    ops[1].num_params = 5;
    g.tensors = t;
    g.num_tensors = 5;
    g.ops = ops;
    g.num_ops = 2;
    g.arena_size = 96;
    PE_CHECK_EQ(pe_graph_check(&g, &bad_op, &bad_tensor), PE_OK);
    for (i = 0; i < 16; i++) buf[i] = (float)i;   /* channel c: c, c+4, c+8, c+12 -> average c + 6 */
    arena.buf = buf;
    arena.size = 96;
    arena.stats = NULL;
    PE_CHECK_EQ(pe_graph_invoke(&g, &arena), PE_OK);
    for (i = 0; i < 4; i++) PE_CHECK(buf[16 + i] == (float)i + 6.0f);
    PE_CHECK(buf[20] == 6.0f + 14.0f + 24.0f + 36.0f + 0.5f);
    PE_CHECK(buf[21] == -6.0f + 3.5f + 0.0f + 18.0f - 0.5f);
    /* words: wrong counts; an FC row count disagreeing with the tensors */
    ops[0].num_params = 7;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &arena), PE_ERR_ARG);
    ops[0].num_params = 8;
    fw[0] = 2;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 1, &arena), PE_ERR_ARG);
    fw[0] = 1;
    ops[1].type = PE_GOP_CONV_2D_F32;   /* a conv with FC words: refused */
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 1, &arena), PE_ERR_ARG);
    ops[1].type = PE_GOP_FULLY_CONNECTED_F32;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 1, &arena), PE_OK);
}

int main(void)
{
    test_conv_and_depthwise();
    test_fully_connected();
    test_pool_and_softmax();
    test_graph_runners();
    return PE_TEST_END("test_f32_conv");
}
