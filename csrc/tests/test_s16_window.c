/* test_s16_window.c - C unit tests of the int16 DEPTHWISE_CONV_2D (int8
 * filter), AVERAGE_POOL_2D and MAX_POOL_2D kernels (pe_s16.h): a naive loop
 * here for the depthwise sums (a multiplier of 2^30 with shift 1 makes the
 * requantization the identity), hand-worked pooling values with the
 * half-away-from-zero average, the clamps and the refused arguments.
 * Bit-exactness with the TFLM interpreter is tested from Python
 * (tests/test_ops_int16_window.py). */
#include "pe_test.h"
#include "pyembed/pe_s16.h"

static void test_depthwise(void)
{
    /* x 1x3x4x2, filter 1x2x2x4 (multiplier 2), stride 1, pad (1, 0), bias: out 1x3x3x4 */
    const pe_dims xd = {1, 3, 4, 2}, fd = {1, 2, 2, 4}, yd = {1, 3, 3, 4};
    int16_t x[24], y[36];
    int8_t f[16];
    int32_t mult[4], shift[4], bias[8];
    pe_dw_s16_params p = {1, 1, 1, 0, 1, 1, 2, -30000, 30000};
    pe_per_channel_quant q;
    int32_t i, oy, ox, oc, ky, kx;
    for (i = 0; i < 24; i++) x[i] = (int16_t)((i * 977) % 2001 - 1000);
    for (i = 0; i < 16; i++) f[i] = (int8_t)((i * 5) % 11 - 5);
    for (i = 0; i < 4; i++) {
        mult[i] = 1 << 30;   /* 0.5 * 2^1: the identity */
        shift[i] = 1;
        bias[2 * i] = 100 * i - 150;
        bias[2 * i + 1] = bias[2 * i] < 0 ? -1 : 0;
    }
    q.multiplier = mult;
    q.shift = shift;
    PE_CHECK_EQ(pe_depthwise_s16x8(NULL, &p, &q, &xd, x, &fd, f, bias, &yd, y), PE_OK);
    for (oy = 0; oy < 3; oy++)
        for (ox = 0; ox < 3; ox++)
            for (oc = 0; oc < 4; oc++) {
                int32_t s = 100 * oc - 150;
                for (ky = 0; ky < 2; ky++)
                    for (kx = 0; kx < 2; kx++) {
                        const int32_t iy = oy - 1 + ky, ix = ox + kx;
                        if (iy < 0 || iy >= 3) continue;
                        s += f[(ky * 2 + kx) * 4 + oc] * x[(iy * 4 + ix) * 2 + oc / 2];
                    }
                s = s < -30000 ? -30000 : (s > 30000 ? 30000 : s);
                PE_CHECK_EQ(y[(oy * 3 + ox) * 4 + oc], s);
            }
    shift[0] = 8;
    PE_CHECK_EQ(pe_depthwise_s16x8(NULL, &p, &q, &xd, x, &fd, f, bias, &yd, y), PE_ERR_ARG);
    shift[0] = 1;
    p.depth_multiplier = 1;
    PE_CHECK_EQ(pe_depthwise_s16x8(NULL, &p, &q, &xd, x, &fd, f, bias, &yd, y), PE_ERR_ARG);
    p.depth_multiplier = 2;
    p.act_min = -40000;
    PE_CHECK_EQ(pe_depthwise_s16x8(NULL, &p, &q, &xd, x, &fd, f, bias, &yd, y), PE_ERR_ARG);
}

static void test_pools(void)
{
    /* x 1x2x3x1, 2x2 window, stride 1, pad (0, 1): out 1x1x3x1 */
    const pe_dims xd = {1, 2, 3, 1}, yd = {1, 1, 3, 1};
    const int16_t x[6] = {1, -6, 7, 2, -3, -1};
    int16_t y[3];
    pe_pool_s16_params p = {2, 2, 1, 1, 0, 1, -32768, 32767};
    /* windows: {1, 2} -> 3 / 2 = 1.5 -> 2; {1, -6, 2, -3} -> -6 / 4 = -1.5 -> -2;
     * {-6, 7, -3, -1} -> -3 / 4 = -0.75 -> -1 */
    PE_CHECK_EQ(pe_avgpool_s16(NULL, &p, &xd, x, &yd, y), PE_OK);
    PE_CHECK(y[0] == 2 && y[1] == -2 && y[2] == -1);
    PE_CHECK_EQ(pe_maxpool_s16(NULL, &p, &xd, x, &yd, y), PE_OK);
    PE_CHECK(y[0] == 2 && y[1] == 2 && y[2] == 7);
    p.act_max = 5;
    PE_CHECK_EQ(pe_maxpool_s16(NULL, &p, &xd, x, &yd, y), PE_OK);
    PE_CHECK(y[2] == 5);
    p.pad_left = 2;   /* the first window holds no tap */
    PE_CHECK_EQ(pe_avgpool_s16(NULL, &p, &xd, x, &yd, y), PE_ERR_ARG);
    p.pad_left = 1;
    p.kh = 0;
    PE_CHECK_EQ(pe_maxpool_s16(NULL, &p, &xd, x, &yd, y), PE_ERR_ARG);
    p.kh = 2;
    PE_CHECK_EQ(pe_maxpool_s16(NULL, &p, &xd, NULL, &yd, y), PE_ERR_ARG);
}

static void test_transpose_conv_and_requantize(void)
{
    /* x 1x2x3x2, filter 3 x 3x2 x 2, stride (2, 1), pad (1, 0): out 1x3x4x3; identity requantization */
    const pe_dims xd = {1, 2, 3, 2}, fd = {3, 3, 2, 2}, yd = {1, 3, 4, 3};
    int16_t x[12], y[36], r[4];
    int8_t f[36];
    int32_t mult[3] = {1 << 30, 1 << 30, 1 << 30}, shift[3] = {1, 1, 1};
    const int16_t src[4] = {-32768, -3, 5, 32767};
    pe_tconv_s16_params p = {2, 1, 1, 0, -32768, 32767};
    pe_per_channel_quant q;
    int32_t i, oy, ox, oc, iy, ix, ic;
    for (i = 0; i < 12; i++) x[i] = (int16_t)((i * 1237) % 4001 - 2000);
    for (i = 0; i < 36; i++) f[i] = (int8_t)((i * 7) % 13 - 6);
    q.multiplier = mult;
    q.shift = shift;
    PE_CHECK_EQ(pe_transpose_conv_s16x8(NULL, &p, &q, &xd, x, &fd, f, NULL, &yd, y), PE_OK);
    for (oy = 0; oy < 3; oy++)
        for (ox = 0; ox < 4; ox++)
            for (oc = 0; oc < 3; oc++) {
                int32_t s = 0;
                for (iy = 0; iy < 2; iy++)
                    for (ix = 0; ix < 3; ix++) {
                        const int32_t ky = oy + 1 - iy * 2, kx = ox - ix;
                        if (ky < 0 || ky >= 3 || kx < 0 || kx >= 2) continue;
                        for (ic = 0; ic < 2; ic++)
                            s += x[(iy * 3 + ix) * 2 + ic] * f[((oc * 3 + ky) * 2 + kx) * 2 + ic];
                    }
                s = s < -32768 ? -32768 : (s > 32767 ? 32767 : s);
                PE_CHECK_EQ(y[(oy * 4 + ox) * 3 + oc], s);
            }
    p.stride_w = 0;
    PE_CHECK_EQ(pe_transpose_conv_s16x8(NULL, &p, &q, &xd, x, &fd, f, NULL, &yd, y), PE_ERR_ARG);
    /* requantize by 0.5 (2^30, shift 0), TFLite's doubling high multiply rounding (-1.5 -> -1,
     * 2.5 -> 3), zero points 0 -> 3 */
    PE_CHECK_EQ(pe_requantize_s16(4, src, 1 << 30, 0, 0, 3, r), PE_OK);
    PE_CHECK(r[0] == -16381 && r[1] == 2 && r[2] == 6 && r[3] == 16387);
    PE_CHECK_EQ(pe_requantize_s16(4, src, 1 << 30, 0, 40000, 0, r), PE_ERR_ARG);
    PE_CHECK_EQ(pe_requantize_s16(-1, src, 1 << 30, 0, 0, 0, r), PE_ERR_ARG);
}

int main(void)
{
    test_depthwise();
    test_pools();
    test_transpose_conv_and_requantize();
    return PE_TEST_END("test_s16_window");
}
