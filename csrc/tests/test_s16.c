/* Plain C tests of the int16x8 kernels (pe_s16.h): TFLite's int64
 * requantization on hand-checked values, CONV_2D with groups / dilation /
 * padding against a naive int64 loop, FULLY_CONNECTED in both bias modes,
 * ADD with broadcasting, and the status checks. (Bit-exactness with the
 * TFLM interpreter is tested from Python, tests/test_ops_heavy.py.) */
#include <stdint.h>
#include <string.h>
#include "pyembed/pyembed.h"
#include "pyembed/pe_s16.h"
#include "pe_test.h"

static uint64_t rng_state = 0xA0761D6478BD642Full;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static int32_t rnd_in(int32_t lo, int32_t hi)
{
    return lo + (int32_t)(rnd() % (uint32_t)(hi - lo + 1));
}

static int16_t x16[4096], got[4096], want[4096];
static int8_t w8[4096];
static int64_t b64[64];
static int32_t bpairs[128];

static void to_pairs(int32_t n)
{
    int32_t i;
    for (i = 0; i < n; i++) {
        const uint64_t u = (uint64_t)b64[i];
        bpairs[2 * i] = (int32_t)(uint32_t)(u & 0xFFFFFFFFu);
        bpairs[2 * i + 1] = (int32_t)(uint32_t)(u >> 32);
    }
}
static int32_t mult[64], shift[64];

static void requant64_values(void)
{
    /* m = 2^30 (0.5): m16 = 2^14; acc * 2^14 >> 15 rounds halves up */
    PE_CHECK_EQ(pe_fx_requant64(3, 1 << 30, 0), 2);
    PE_CHECK_EQ(pe_fx_requant64(-3, 1 << 30, 0), -1);
    PE_CHECK_EQ(pe_fx_requant64(1000, 1 << 30, -2), 125);
    PE_CHECK_EQ(pe_fx_requant64(1000, PE_INT32_MAX, 1), 2000); /* m16 saturates at 0x7FFF */
    PE_CHECK_EQ(pe_fx_requant64((int64_t)1 << 40, 1 << 30, -31), 256);
}

static void conv_cases(void)
{
    int iter, done = 0;
    for (iter = 0; iter < 300; iter++) {
        pe_conv_params p;
        pe_dims in, f, out;
        pe_per_channel_quant q = {mult, shift};
        int32_t i, n, oy, ox, oc, ky, kx, ic, bad = 0, groups = rnd_in(1, 2), ocg = rnd_in(1, 3);
        memset(&p, 0, sizeof(p));
        in.n = 1; in.h = rnd_in(1, 7); in.w = rnd_in(1, 7);
        f.c = rnd_in(1, 4); in.c = f.c * groups;
        f.h = rnd_in(1, 3); f.w = rnd_in(1, 3); f.n = ocg * groups;
        p.stride.h = rnd_in(1, 3); p.stride.w = rnd_in(1, 3);
        p.dilation.h = rnd_in(1, 2); p.dilation.w = rnd_in(1, 2);
        p.padding.top = rnd_in(0, 2); p.padding.left = rnd_in(0, 2);
        p.groups = groups;
        p.activation.min = rnd_in(-32768, 0);
        p.activation.max = rnd_in(p.activation.min, 32767);
        out.n = 1; out.c = f.n;
        out.h = (in.h + 2 * p.padding.top - ((f.h - 1) * p.dilation.h + 1)) / p.stride.h + 1;
        out.w = (in.w + 2 * p.padding.left - ((f.w - 1) * p.dilation.w + 1)) / p.stride.w + 1;
        if (out.h < 1 || out.w < 1) continue;
        for (i = 0; i < in.h * in.w * in.c; i++) x16[i] = (int16_t)rnd_in(-32768, 32767);
        for (i = 0; i < f.n * f.h * f.w * f.c; i++) w8[i] = (int8_t)rnd_in(-127, 127);
        for (i = 0; i < out.c; i++) {
            b64[i] = (int64_t)rnd_in(-100000, 100000) * 1000;
            mult[i] = rnd_in(1 << 30, PE_INT32_MAX);
            shift[i] = rnd_in(-20, -8);
        }
        for (n = 0; n < 1; n++)
            for (oy = 0; oy < out.h; oy++)
                for (ox = 0; ox < out.w; ox++)
                    for (oc = 0; oc < out.c; oc++) {
                        int64_t acc = b64[oc];
                        int32_t v, g = oc / ocg;
                        for (ky = 0; ky < f.h; ky++)
                            for (kx = 0; kx < f.w; kx++) {
                                const int32_t iy = oy * p.stride.h - p.padding.top + ky * p.dilation.h;
                                const int32_t ix = ox * p.stride.w - p.padding.left + kx * p.dilation.w;
                                if (iy < 0 || iy >= in.h || ix < 0 || ix >= in.w) continue;
                                for (ic = 0; ic < f.c; ic++)
                                    acc += (int64_t)w8[((oc * f.h + ky) * f.w + kx) * f.c + ic] *
                                           x16[(iy * in.w + ix) * in.c + g * f.c + ic];
                            }
                        v = pe_fx_requant64(acc, mult[oc], shift[oc]);
                        v = v < p.activation.min ? p.activation.min : (v > p.activation.max ? p.activation.max : v);
                        want[(oy * out.w + ox) * out.c + oc] = (int16_t)v;
                    }
        to_pairs(out.c);
        PE_CHECK_EQ(pe_conv2d_s16x8(NULL, &p, &q, &in, x16, &f, w8, bpairs, &out, got), PE_OK);
        for (i = 0; i < out.h * out.w * out.c; i++) bad += got[i] != want[i];
        PE_CHECK_EQ(bad, 0);
        done++;
    }
    PE_CHECK(done > 150);
}

static void status_checks(void)
{
    pe_conv_params p;
    pe_dims in = {1, 3, 3, 2}, f = {2, 2, 2, 2}, out = {1, 2, 2, 2};
    pe_per_channel_quant q = {mult, shift};
    pe_fc_s16_params fp;
    pe_add_params ap;
    pe_dims d = {1, 2, 2, 3}, d1 = {1, 1, 2, 1}, bad_d = {1, 3, 2, 3};
    int32_t b32[4] = {0, 0, 0, 0};
    memset(&p, 0, sizeof(p));
    p.stride.h = p.stride.w = p.dilation.h = p.dilation.w = p.groups = 1;
    p.activation.min = -32768;
    p.activation.max = 32767;
    mult[0] = mult[1] = 1 << 30;
    shift[0] = shift[1] = -10;
    PE_CHECK_EQ(pe_conv2d_s16x8(NULL, &p, &q, &in, x16, &f, w8, NULL, &out, got), PE_OK);
    p.input_offset = 1;
    PE_CHECK_EQ(pe_conv2d_s16x8(NULL, &p, &q, &in, x16, &f, w8, NULL, &out, got), PE_ERR_ARG);
    p.input_offset = 0;
    p.activation.min = -32769;
    PE_CHECK_EQ(pe_conv2d_s16x8(NULL, &p, &q, &in, x16, &f, w8, NULL, &out, got), PE_ERR_ARG);
    p.activation.min = -32768;
    shift[1] = 8;
    PE_CHECK_EQ(pe_conv2d_s16x8(NULL, &p, &q, &in, x16, &f, w8, NULL, &out, got), PE_ERR_ARG);
    shift[1] = -10;
    b64[0] = (int64_t)1 << 47;
    to_pairs(2);
    PE_CHECK_EQ(pe_conv2d_s16x8(NULL, &p, &q, &in, x16, &f, w8, bpairs, &out, got), PE_ERR_UNSUPPORTED);
    b64[0] = 0;
    PE_CHECK_EQ(pe_conv2d_s16x8(NULL, &p, &q, &in, NULL, &f, w8, NULL, &out, got), PE_ERR_ARG);
    out.h = 3;
    PE_CHECK_EQ(pe_conv2d_s16x8(NULL, &p, &q, &in, x16, &f, w8, NULL, &out, got), PE_OK); /* explicit size */
    out.c = 3;
    PE_CHECK_EQ(pe_conv2d_s16x8(NULL, &p, &q, &in, x16, &f, w8, NULL, &out, got), PE_ERR_ARG);

    memset(&fp, 0, sizeof(fp));
    fp.quant = q;
    fp.quant_count = 1;
    fp.activation.min = -32768;
    fp.activation.max = 32767;
    PE_CHECK_EQ(pe_fully_connected_s16x8(NULL, &fp, 2, 5, 3, x16, w8, NULL, got), PE_OK);
    fp.bias32 = 1;
    PE_CHECK_EQ(pe_fully_connected_s16x8(NULL, &fp, 2, 5, 3, x16, w8, b32, got), PE_OK);
    PE_CHECK_EQ(pe_fully_connected_s16x8(NULL, &fp, 2, 600, 3, x16, w8, b32, got), PE_ERR_UNSUPPORTED);
    fp.quant_count = 2;
    PE_CHECK_EQ(pe_fully_connected_s16x8(NULL, &fp, 2, 5, 3, x16, w8, b32, got), PE_ERR_ARG);
    fp.quant_count = 1;
    fp.bias32 = 2;
    PE_CHECK_EQ(pe_fully_connected_s16x8(NULL, &fp, 2, 5, 3, x16, w8, b32, got), PE_ERR_ARG);
    fp.bias32 = 0;
    PE_CHECK_EQ(pe_fully_connected_s16x8(NULL, &fp, 0, 5, 3, x16, w8, NULL, got), PE_ERR_ARG);
    fp.single_rounding = 2;
    PE_CHECK_EQ(pe_fully_connected_s16x8(NULL, &fp, 2, 5, 3, x16, w8, NULL, got), PE_ERR_ARG);
    fp.single_rounding = 1;
    PE_CHECK_EQ(pe_fully_connected_s16x8(NULL, &fp, 2, 5, 3, x16, w8, NULL, got), PE_OK);
    fp.single_rounding = 0;
    {
        /* the exact split form equals the plain int64 formula wherever that
         * does not overflow (|acc| < 2^31) */
        uint32_t seed = 12345u;
        int32_t k;
        for (k = 0; k < 20000; k++) {
            int64_t acc, want;
            int32_t m, sh;
            seed = seed * 1664525u + 1013904223u;
            acc = (int64_t)(int32_t)seed;
            seed = seed * 1664525u + 1013904223u;
            m = (int32_t)(seed >> 1);
            seed = seed * 1664525u + 1013904223u;
            sh = (int32_t)(seed % 31u) - 31;
            want = (acc * (int64_t)m + ((int64_t)1 << (30 - sh)));
            want = want >= 0 ? want >> (31 - sh) : ~((~want) >> (31 - sh));
            PE_CHECK_EQ(pe_fx_requant64_single(acc, m, sh), (int32_t)want);
        }
    }

    memset(&ap, 0, sizeof(ap));
    ap.left_shift = 15;
    ap.input1_quant.multiplier = ap.input2_quant.multiplier = 1 << 30;
    ap.output_quant.multiplier = 1 << 30;
    ap.input1_quant.shift = ap.input2_quant.shift = 0;
    ap.output_quant.shift = -15;
    ap.activation.min = -32768;
    ap.activation.max = 32767;
    x16[0] = 1000;
    x16[1] = -2000;
    PE_CHECK_EQ(pe_add_s16(NULL, &ap, &d, x16, &d1, x16, &d, got), PE_OK);
    /* out[0] = x[0] + broadcast x[0], each halved then the sum scaled by 2^15 / 2^15 / 2 */
    PE_CHECK_EQ(got[0], 500);
    PE_CHECK_EQ(pe_add_s16(NULL, &ap, &d, x16, &bad_d, x16, &d, got), PE_ERR_ARG);
    ap.left_shift = 20;
    PE_CHECK_EQ(pe_add_s16(NULL, &ap, &d, x16, &d1, x16, &d, got), PE_ERR_ARG);
    ap.left_shift = 15;
    ap.output_quant.shift = 1;
    PE_CHECK_EQ(pe_add_s16(NULL, &ap, &d, x16, &d1, x16, &d, got), PE_ERR_ARG);
}

int main(void)
{
    requant64_values();
    conv_cases();
    status_checks();
    return PE_TEST_END("test_s16");
}
