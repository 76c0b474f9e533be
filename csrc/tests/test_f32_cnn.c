/* test_f32_cnn.c - C unit tests of the float32 RESIZE_BILINEAR and
 * TRANSPOSE_CONV kernels (pe_f32_cnn.h) and of the LOGISTIC / TANH /
 * HARD_SWISH unary kernels (pe_f32.h): values exact in float32 computed
 * independently here (a gather loop for the scatter kernel, hand-worked
 * bilinear weights), the activation clamp, the refused arguments.
 * Bit-exactness with the TFLM interpreter on arbitrary floats is tested from
 * Python (tests/test_ops_f32_cnn.py, tests/test_ops_f32.py). */
#include <math.h>

#include "pe_test.h"
#include "pyembed/pe_f32.h"
#include "pyembed/pe_f32_cnn.h"

static void test_transpose_conv(void)
{
    /* x 1x3x2x2, filter 3 x 3x3 x 2, stride (2, 1), pad (1, 1): out 1x5x2x3 */
    const pe_dims xd = {1, 3, 2, 2}, wd = {3, 3, 3, 2}, yd = {1, 5, 2, 3};
    float x[12], w[54], b[3] = {0.5f, -1.0f, 2.0f}, y[30];
    pe_f32_tconv_params p = {2, 1, 1, 1, -20.0f, 25.0f};
    int32_t i, oy, ox, co, iy, ix, ci, size = -1;
    for (i = 0; i < 12; i++) x[i] = (float)((i * 7) % 9 - 4);
    for (i = 0; i < 54; i++) w[i] = (float)((i * 5) % 7 - 3);
    PE_CHECK_EQ(pe_f32_cnn_scratch_size(&size), PE_OK);
    PE_CHECK_EQ(size, 0);
    for (i = 0; i < 30; i++) y[i] = 1234.0f;   /* every output is written */
    PE_CHECK_EQ(pe_f32_transpose_conv(&p, x, &xd, w, &wd, b, y, &yd), PE_OK);
    for (oy = 0; oy < 5; oy++)
        for (ox = 0; ox < 2; ox++)
            for (co = 0; co < 3; co++) {
                float s = 0.0f;
                /* gather: input pixels whose taps land on (oy, ox) */
                for (iy = 0; iy < 3; iy++)
                    for (ix = 0; ix < 2; ix++) {
                        const int32_t ky = oy - (iy * 2 - 1), kx = ox - (ix - 1);
                        if (ky < 0 || ky >= 3 || kx < 0 || kx >= 3) continue;
                        for (ci = 0; ci < 2; ci++)
                            s += x[(iy * 2 + ix) * 2 + ci] * w[((co * 3 + ky) * 3 + kx) * 2 + ci];
                    }
                s += b[co];
                s = s < -20.0f ? -20.0f : (s > 25.0f ? 25.0f : s);
                PE_CHECK(y[(oy * 2 + ox) * 3 + co] == s);
            }
    /* no bias */
    PE_CHECK_EQ(pe_f32_transpose_conv(&p, x, &xd, w, &wd, NULL, y, &yd), PE_OK);
    /* refusals */
    PE_CHECK_EQ(pe_f32_transpose_conv(NULL, x, &xd, w, &wd, b, y, &yd), PE_ERR_ARG);
    PE_CHECK_EQ(pe_f32_transpose_conv(&p, x, &xd, NULL, &wd, b, y, &yd), PE_ERR_ARG);
    p.stride_h = 0;
    PE_CHECK_EQ(pe_f32_transpose_conv(&p, x, &xd, w, &wd, b, y, &yd), PE_ERR_ARG);
    p.stride_h = 2;
    p.pad_left = -1;
    PE_CHECK_EQ(pe_f32_transpose_conv(&p, x, &xd, w, &wd, b, y, &yd), PE_ERR_ARG);
    p.pad_left = 1;
    {
        const pe_dims bad_w = {3, 3, 3, 1}, bad_y = {1, 5, 2, 4};
        PE_CHECK_EQ(pe_f32_transpose_conv(&p, x, &xd, w, &bad_w, b, y, &yd), PE_ERR_ARG);
        PE_CHECK_EQ(pe_f32_transpose_conv(&p, x, &xd, w, &wd, b, y, &bad_y), PE_ERR_ARG);
    }
}

static void test_resize_bilinear(void)
{
    /* align_corners 2x2 -> 3x3: the midpoints */
    const pe_dims xd = {1, 2, 2, 1}, yd = {1, 3, 3, 1};
    const float x[4] = {0.0f, 1.0f, 2.0f, 3.0f};
    const float want[9] = {0.0f, 0.5f, 1.0f, 1.0f, 1.5f, 2.0f, 2.0f, 2.5f, 3.0f};
    /* half pixel centers 1x2 -> 1x4: s = -0.25, 0.25, 0.75, 1.25 (weights past the edge as TFLM) */
    const pe_dims hd = {1, 1, 2, 1}, hyd = {1, 1, 4, 1};
    const float h[2] = {0.0f, 4.0f}, hwant[4] = {0.0f, 1.0f, 3.0f, 4.0f};
    float y[9], hy[4];
    int32_t i;
    PE_CHECK_EQ(pe_f32_resize_bilinear(1, 0, x, &xd, y, &yd), PE_OK);
    for (i = 0; i < 9; i++) PE_CHECK(y[i] == want[i]);
    PE_CHECK_EQ(pe_f32_resize_bilinear(0, 1, h, &hd, hy, &hyd), PE_OK);
    for (i = 0; i < 4; i++) PE_CHECK(hy[i] == hwant[i]);
    /* -0 inputs come out +0 (the reference adds a 0 offset last) */
    {
        const float z[2] = {-0.0f, -0.0f};
        PE_CHECK_EQ(pe_f32_resize_bilinear(0, 0, z, &hd, hy, &hyd), PE_OK);
        for (i = 0; i < 4; i++) PE_CHECK(hy[i] == 0.0f && !signbit(hy[i]));
    }
    PE_CHECK_EQ(pe_f32_resize_bilinear(1, 1, x, &xd, y, &yd), PE_ERR_ARG);
    PE_CHECK_EQ(pe_f32_resize_bilinear(2, 0, x, &xd, y, &yd), PE_ERR_ARG);
    PE_CHECK_EQ(pe_f32_resize_bilinear(0, 0, NULL, &xd, y, &yd), PE_ERR_ARG);
    {
        const pe_dims other_c = {1, 3, 3, 2};
        PE_CHECK_EQ(pe_f32_resize_bilinear(0, 0, x, &xd, y, &other_c), PE_ERR_ARG);
    }
}

static void test_unary_activations(void)
{
    const float x[6] = {0.0f, 20.0f, -10.0f, -4.0f, 1.0f, 10.0f};
    float y[6];
    PE_CHECK_EQ(pe_f32_unary(PE_F32_LOGISTIC, x, y, 6), PE_OK);
    PE_CHECK(y[0] == 0.5f && y[1] == 1.0f && y[2] == expf(-10.0f));
    PE_CHECK(y[4] == 1.0f / (1.0f + expf(-1.0f)));
    PE_CHECK_EQ(pe_f32_unary(PE_F32_TANH, x, y, 6), PE_OK);
    PE_CHECK(y[0] == 0.0f && y[4] == tanhf(1.0f));
    PE_CHECK_EQ(pe_f32_unary(PE_F32_HARD_SWISH, x, y, 6), PE_OK);
    PE_CHECK(y[0] == 0.0f && y[1] == 20.0f && y[2] == 0.0f && y[3] == 0.0f && signbit(y[3]));
    PE_CHECK(y[4] == 4.0f / 6.0f && y[5] == 10.0f);
    PE_CHECK_EQ(pe_f32_unary(PE_F32_UNARY_COUNT, x, y, 6), PE_ERR_ARG);
}

int main(void)
{
    test_transpose_conv();
    test_resize_bilinear();
    test_unary_activations();
    return PE_TEST_END("test_f32_cnn");
}
