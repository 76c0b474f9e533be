/* test_batch7.c - C unit tests of issue #30's seventh batch (pe_batch7.h):
 * int8 DIV (broadcasting against the per-element quotient, the sign flip,
 * the quotient within one step of the real one, clamps, no write past the
 * output, refused arguments) and CIRCULAR_BUFFER (the slots over several
 * calls, guards, refused arguments). Bit-exactness with the TFLM interpreter
 * is tested from Python (tests/test_ops_batch7.py). */
#include <math.h>
#include <string.h>

#include "pe_test.h"
#include "pyembed/pe_batch7.h"

/* multiplier and shift of a real ratio in [2^-20, 2^20] (frexp, rounded) */
static void quantize(double r, int32_t *m, int32_t *s)
{
    int e;
    double f = frexp(r, &e);
    double q = floor(f * 2147483648.0 + 0.5);
    if (q >= 2147483648.0) {
        q /= 2.0;
        e++;
    }
    *m = (int32_t)q;
    *s = (int32_t)e;
}

static pe_div_s8_params params(double s1, int32_t z1, double s2, int32_t z2, double so, int32_t zo)
{
    pe_div_s8_params p;
    p.input1_offset = -z1;
    p.input2_offset = -z2;
    p.output_offset = zo;
    quantize(s1 / (s2 * so), &p.output_multiplier, &p.output_shift);
    p.act_min = -128;
    p.act_max = 127;
    return p;
}

static void test_div_values(void)
{
    const pe_div_s8_params p = params(0.05, 3, 0.02, -7, 0.1, 2);
    const pe_div_s8_params q = params(0.02, 0, 0.02, 0, 0.02, 0);
    int32_t x1, x2, worst = 0;
    for (x1 = -128; x1 < 128; ++x1) {
        for (x2 = -128; x2 < 128; ++x2) {
            const int32_t got = pe_div_s8_one(&p, x1, x2);
            PE_CHECK(got >= -128 && got <= 127);
            /* |a| >= 3 keeps the total right shift below 32 bits here (a of
             * -2..2 has 29+ redundant sign bits; TFLM's host build then shifts
             * modulo 32 and so does the kernel, far from the real quotient) */
            if (x2 != -7 && (x1 - 3 >= 3 || x1 - 3 <= -3)) {
                const double real = (x1 - 3) * 0.05 / ((x2 + 7) * 0.02) / 0.1 + 2.0;
                if (real > -127.0 && real < 126.0) {
                    const int32_t err = (int32_t)fabs((double)got - real);
                    worst = err > worst ? err : worst;
                }
            }
            if (x1 > -128 && x2 > -128 && x2 != 0) { /* zero points 0: the sign flip is exact */
                PE_CHECK_EQ(pe_div_s8_one(&q, x1, x2), pe_div_s8_one(&q, -x1, -x2));
            }
        }
    }
    PE_CHECK_EQ(worst, 0); /* |got - real| < 1 wherever it does not clamp */
}

static void test_div_broadcast(void)
{
    pe_div_s8_params p = params(0.03, -4, 0.015, 6, 0.05, -10);
    pe_shape_nd so = {4, {2, 3, 4, 5}}, sa = {4, {2, 1, 4, 1}}, sb = {4, {1, 3, 1, 5}};
    int8_t a[8], b[15], y[120 + 4];
    int32_t i0, i1, i2, i3, k;
    for (k = 0; k < 8; ++k) {
        a[k] = (int8_t)(k * 37 - 128);
    }
    for (k = 0; k < 15; ++k) {
        b[k] = (int8_t)(k * 17 - 120);
    }
    b[3] = 6; /* a zero divisor */
    memset(y, 0x5a, sizeof(y));
    p.act_min = -100;
    p.act_max = 90;
    PE_CHECK_EQ(pe_div_s8(&p, &sa, a, &sb, b, &so, y), PE_OK);
    for (i0 = 0; i0 < 2; ++i0) {
        for (i1 = 0; i1 < 3; ++i1) {
            for (i2 = 0; i2 < 4; ++i2) {
                for (i3 = 0; i3 < 5; ++i3) {
                    const int32_t o = ((i0 * 3 + i1) * 4 + i2) * 5 + i3;
                    const int32_t want = pe_div_s8_one(&p, a[i0 * 4 + i2], b[i1 * 5 + i3]);
                    PE_CHECK_EQ(y[o], want);
                    PE_CHECK(y[o] >= -100 && y[o] <= 90);
                }
            }
        }
    }
    for (k = 120; k < 124; ++k) {
        PE_CHECK_EQ(y[k], 0x5a);
    }
}

static void test_div_refuses(void)
{
    pe_div_s8_params p = params(0.1, 0, 0.1, 0, 0.1, 0);
    pe_shape_nd s = {1, {4}}, s3 = {1, {3}}, s2 = {2, {1, 4}};
    int8_t a[4] = {1, 2, 3, 4}, y[4];
    int32_t bytes = -1;
    PE_CHECK_EQ(pe_div_s8_scratch_size(&bytes), PE_OK);
    PE_CHECK_EQ(bytes, 0);
    PE_CHECK_EQ(pe_div_s8_scratch_size(NULL), PE_ERR_ARG);
    PE_CHECK_EQ(pe_div_s8(&p, &s, a, &s3, a, &s, y), PE_ERR_ARG);  /* does not broadcast */
    PE_CHECK_EQ(pe_div_s8(&p, &s, a, &s2, a, &s, y), PE_ERR_ARG);  /* ranks differ */
    PE_CHECK_EQ(pe_div_s8(&p, &s, NULL, &s, a, &s, y), PE_ERR_ARG);
    PE_CHECK_EQ(pe_div_s8(NULL, &s, a, &s, a, &s, y), PE_ERR_ARG);
    p.output_shift = 22;
    PE_CHECK_EQ(pe_div_s8(&p, &s, a, &s, a, &s, y), PE_ERR_ARG);
    p.output_shift = -25;
    PE_CHECK_EQ(pe_div_s8(&p, &s, a, &s, a, &s, y), PE_ERR_ARG);
    p.output_shift = 0;
    p.act_min = 10;
    p.act_max = 9;
    PE_CHECK_EQ(pe_div_s8(&p, &s, a, &s, a, &s, y), PE_ERR_ARG);
}

static void test_circular_buffer(void)
{
    int8_t buf[3 * 4 + 2], out[3 * 4 + 2], in[4];
    int32_t call, k, bytes = -1;
    memset(buf, 0, sizeof(buf));
    buf[12] = buf[13] = 0x77;
    out[12] = out[13] = 0x66;
    for (call = 1; call <= 5; ++call) {
        for (k = 0; k < 4; ++k) {
            in[k] = (int8_t)(call * 10 + k);
        }
        PE_CHECK_EQ(pe_circular_buffer_s8(in, 3, 4, buf, out), PE_OK);
        /* slot s holds the frame of call - (2 - s), zeros before the first */
        for (k = 0; k < 12; ++k) {
            const int32_t frame = call - (2 - k / 4);
            PE_CHECK_EQ(buf[k], frame >= 1 ? frame * 10 + k % 4 : 0);
            PE_CHECK_EQ(out[k], buf[k]);
        }
    }
    PE_CHECK_EQ(buf[12], 0x77);
    PE_CHECK_EQ(out[13], 0x66);
    PE_CHECK_EQ(pe_circular_buffer_s8_scratch_size(&bytes), PE_OK);
    PE_CHECK_EQ(bytes, 0);
    PE_CHECK_EQ(pe_circular_buffer_s8(in, 0, 4, buf, out), PE_ERR_ARG);
    PE_CHECK_EQ(pe_circular_buffer_s8(in, 3, 0, buf, out), PE_ERR_ARG);
    PE_CHECK_EQ(pe_circular_buffer_s8(NULL, 3, 4, buf, out), PE_ERR_ARG);
    PE_CHECK_EQ(pe_circular_buffer_s8(in, 3, 4, buf, NULL), PE_ERR_ARG);
    PE_CHECK_EQ(pe_circular_buffer_s8(in, 65536, 65536, buf, out), PE_ERR_ARG);
}

int main(void)
{
    test_div_values();
    test_div_broadcast();
    test_div_refuses();
    test_circular_buffer();
    return PE_TEST_END("test_batch7");
}
