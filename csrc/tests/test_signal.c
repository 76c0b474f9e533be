/* test_signal.c - C unit tests of the signal kernels (pe_signal.h): the
 * integer square root and log against libm within their rounding, window
 * saturation, FFT auto-scale's shift, the real FFT of constant and single-tone
 * rows against the exact transform within the fixed-point error, the
 * inverse FFT of one bin and of the forward one's output, wrap-around
 * of CAST and the int32 operators, and every refused argument.
 * Bit-exactness with the TFLM interpreter is tested from Python
 * (tests/test_signal_ops.py). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pe_test.h"
#include "pyembed/pe_signal.h"

static int32_t q15_word(double phase)
{
    const int32_t r = (int32_t)floor(0.5 + 32767.0 * cos(phase));
    const int32_t i = (int32_t)floor(0.5 + 32767.0 * sin(phase));
    const uint32_t w = ((uint32_t)r & 0xFFFFu) | (((uint32_t)i & 0xFFFFu) << 16);
    return (int32_t)w;
}

/* twiddles and super twiddles of a real FFT of length n (ncfft = n / 2) */
static void rfft_tables(int32_t n, int32_t *tw, int32_t *sup)
{
    const int32_t ncfft = n / 2;
    const double pi = 3.14159265358979323846;
    int32_t i;
    for (i = 0; i < ncfft; i++) {
        tw[i] = q15_word(-2.0 * pi * i / ncfft);
    }
    for (i = 0; i < ncfft / 2; i++) {
        sup[i] = q15_word(-pi * ((double)(i + 1) / ncfft + 0.5));
    }
}

static void test_sqrt_and_log(void)
{
    uint64_t x = 1;
    int32_t k;
    PE_CHECK_EQ(pe_signal_sqrt64(0), 0);
    for (k = 0; k < 400; k++) {
        const double want = sqrt((double)x);
        const uint32_t got = pe_signal_sqrt64(x);
        PE_CHECK(fabs((double)got - want) <= 1.0);
        x = x * 3u + 7u + (uint64_t)k;
        if (x >> 62) {
            x = (uint64_t)k + 2u;
        }
    }
    PE_CHECK_EQ(pe_signal_sqrt64((uint64_t)1 << 40), 1u << 20);
    PE_CHECK_EQ(pe_signal_sqrt64(144u), 12u);
    for (k = 2; k < 32; k++) {
        const uint32_t v = (1u << k) + (uint32_t)k * 977u;
        const double want = 64.0 * log((double)v);
        PE_CHECK(fabs((double)pe_signal_log32(v, 64u) - want) <= 0.01 * want + 1.0);
    }
}

static void test_window_and_scale(void)
{
    const int16_t in[4] = {32767, -32768, 1000, -3};
    const int16_t win[2] = {32767, 16384};
    int16_t out[4];
    int32_t bits = -1;
    PE_CHECK_EQ(pe_signal_window_s16(in, 4, win, 2, 0, out), PE_OK);
    PE_CHECK_EQ(out[0], 32767);  /* saturated */
    PE_CHECK_EQ(out[1], -32768); /* saturated */
    PE_CHECK_EQ(pe_signal_window_s16(in, 4, win, 2, 14, out), PE_OK);
    PE_CHECK_EQ(out[2], (1000 * 32767) >> 14);
    PE_CHECK_EQ(out[3], -3); /* -3 * 16384 >> 14 */
    PE_CHECK_EQ(pe_signal_window_s16(in, 3, win, 2, 0, out), PE_ERR_ARG); /* not whole windows */
    PE_CHECK_EQ(pe_signal_window_s16(in, 4, win, 2, 32, out), PE_ERR_ARG);
    {
        const int16_t a[3] = {1000, -20, 3};
        PE_CHECK_EQ(pe_signal_fft_auto_scale_s16(a, 3, out, &bits), PE_OK);
        PE_CHECK_EQ(bits, 5); /* 1000 has 10 bits: 16 - 10 - 1 */
        PE_CHECK_EQ(out[0], 32000);
        PE_CHECK_EQ(out[1], -640);
    }
    {
        const int16_t z[2] = {0, 0}, m[2] = {-32768, -32768}, q[2] = {-32768, 5};
        PE_CHECK_EQ(pe_signal_fft_auto_scale_s16(z, 2, out, &bits), PE_OK);
        PE_CHECK_EQ(bits, 0);
        PE_CHECK_EQ(pe_signal_fft_auto_scale_s16(m, 2, out, &bits), PE_OK);
        PE_CHECK_EQ(bits, 0);
        PE_CHECK_EQ(out[0], -32768);
        /* TFLM's int16 maximum: |-32768| narrows back to -32768, so a later 5 is
         * "larger", the shift is 12 and -32768 << 12 wraps to 0 (as the interpreter does) */
        PE_CHECK_EQ(pe_signal_fft_auto_scale_s16(q, 2, out, &bits), PE_OK);
        PE_CHECK_EQ(bits, 12);
        PE_CHECK_EQ(out[0], 0);
        PE_CHECK_EQ(out[1], 5 << 12);
    }
}

static void test_rfft(void)
{
    enum { N = 32, NC = N / 2 };
    const int32_t radices[2] = {4, 4};
    int32_t tw[NC], sup[NC / 2], k;
    int16_t in[N], out[N + 2];
    pe_context none = {NULL, 0, NULL};
    int32_t size = -1;
    rfft_tables(N, tw, sup);
    PE_CHECK_EQ(pe_signal_rfft_get_buffer_size(N, &size), PE_OK);
    PE_CHECK_EQ(size, 0);
    /* a constant row: bin 0 = the mean, every other bin ~0 */
    for (k = 0; k < N; k++) {
        in[k] = 12000;
    }
    PE_CHECK_EQ(pe_signal_rfft_s16(&none, N, N, 2, radices, tw, sup, in, 1, out), PE_OK);
    PE_CHECK(abs(out[0] - 12000) <= 4);
    for (k = 1; k < NC + 1; k++) {
        PE_CHECK(abs(out[2 * k]) <= 4 && abs(out[2 * k + 1]) <= 4);
    }
    /* a cosine at bin 3: out[3] ~ amplitude / 2 */
    for (k = 0; k < N; k++) {
        in[k] = (int16_t)floor(0.5 + 16000.0 * cos(2.0 * 3.14159265358979323846 * 3.0 * k / N));
    }
    PE_CHECK_EQ(pe_signal_rfft_s16(&none, N, N, 2, radices, tw, sup, in, 1, out), PE_OK);
    PE_CHECK(abs(out[6] - 8000) <= 8 && abs(out[7]) <= 8);
    PE_CHECK(abs(out[4]) <= 8 && abs(out[10]) <= 8);
    /* refusals */
    {
        const int32_t bad3[2] = {4, 3}, short1[1] = {4};
        PE_CHECK_EQ(pe_signal_rfft_s16(&none, N, N, 2, bad3, tw, sup, in, 1, out), PE_ERR_UNSUPPORTED);
        PE_CHECK_EQ(pe_signal_rfft_s16(&none, N, N, 1, short1, tw, sup, in, 1, out), PE_ERR_ARG);
        PE_CHECK_EQ(pe_signal_rfft_s16(&none, N, N + 1, 2, radices, tw, sup, in, 1, out), PE_ERR_ARG);
        PE_CHECK_EQ(pe_signal_rfft_s16(&none, N, N, 2, radices, tw, sup, out, 1, out), PE_ERR_ARG); /* overlap */
        PE_CHECK_EQ(pe_signal_rfft_get_buffer_size(7, &size), PE_ERR_ARG);
    }
}

/* the inverse's tables: every angle of rfft_tables negated (kissfft's inverse configuration) */
static void irfft_tables(int32_t n, int32_t *tw, int32_t *sup)
{
    const int32_t ncfft = n / 2;
    const double pi = 3.14159265358979323846;
    int32_t i;
    for (i = 0; i < ncfft; i++) {
        tw[i] = q15_word(2.0 * pi * i / ncfft);
    }
    for (i = 0; i < ncfft / 2; i++) {
        sup[i] = q15_word(pi * ((double)(i + 1) / ncfft + 0.5));
    }
}

static void test_irfft(void)
{
    enum { N = 32, NC = N / 2 };
    const int32_t radices[2] = {4, 4};
    int32_t tw[NC], sup[NC / 2], itw[NC], isup[NC / 2], k;
    int16_t in[N], spec[N + 2], back[N], scratch[N];
    pe_context none = {NULL, 0, NULL}, ctx = {scratch, (int32_t)sizeof scratch, NULL};
    pe_context small = {scratch, (int32_t)sizeof scratch - 2, NULL};
    int32_t size = -1;
    rfft_tables(N, tw, sup);
    irfft_tables(N, itw, isup);
    PE_CHECK_EQ(pe_signal_irfft_get_buffer_size(N, &size), PE_OK);
    PE_CHECK_EQ(size, 2 * N);
    /* one real bin 3 of 16000: the inverse divides by N in all (numpy's
     * irfft), so x[k] ~ 2 * 16000 * cos(2 pi 3 k / N) / N (measured within 1) */
    memset(spec, 0, sizeof spec);
    spec[6] = 16000;
    PE_CHECK_EQ(pe_signal_irfft_s16(&ctx, N, 2, radices, itw, isup, spec, 1, back), PE_OK);
    for (k = 0; k < N; k++) {
        const double want = 2.0 * 16000.0 * cos(2.0 * 3.14159265358979323846 * 3.0 * k / N) / N;
        PE_CHECK(fabs(back[k] - want) <= 4.0);
    }
    /* the round trip: rfft then irfft gives the row divided by N (two 16-bit
     * transforms' rounding: measured within 3.2) */
    for (k = 0; k < N; k++) {
        in[k] = (int16_t)floor(0.5 + 16000.0 * sin(2.0 * 3.14159265358979323846 * 5.0 * k / N) + 300.0 * k);
    }
    PE_CHECK_EQ(pe_signal_rfft_s16(&none, N, N, 2, radices, tw, sup, in, 1, spec), PE_OK);
    PE_CHECK_EQ(pe_signal_irfft_s16(&ctx, N, 2, radices, itw, isup, spec, 1, back), PE_OK);
    for (k = 0; k < N; k++) {
        PE_CHECK(fabs(back[k] - in[k] / (double)N) <= 4.0);
    }
    /* refusals */
    {
        const int32_t bad3[2] = {4, 3}, short1[1] = {4};
        PE_CHECK_EQ(pe_signal_irfft_s16(&ctx, N, 2, bad3, itw, isup, spec, 1, back), PE_ERR_UNSUPPORTED);
        PE_CHECK_EQ(pe_signal_irfft_s16(&ctx, N, 1, short1, itw, isup, spec, 1, back), PE_ERR_ARG);
        PE_CHECK_EQ(pe_signal_irfft_s16(&small, N, 2, radices, itw, isup, spec, 1, back), PE_ERR_SCRATCH);
        PE_CHECK_EQ(pe_signal_irfft_s16(&none, N, 2, radices, itw, isup, spec, 1, back), PE_ERR_SCRATCH);
        PE_CHECK_EQ(pe_signal_irfft_s16(&ctx, N, 2, radices, itw, isup, spec, -1, back), PE_ERR_ARG);
        PE_CHECK_EQ(pe_signal_irfft_get_buffer_size(7, &size), PE_ERR_ARG);
    }
}

/* Q31 (re, im) pairs of the inverse tables */
static void irfft_tables32(int32_t n, int32_t *tw, int32_t *sup)
{
    const int32_t ncfft = n / 2;
    const double pi = 3.14159265358979323846;
    int32_t i;
    for (i = 0; i < ncfft; i++) {
        tw[2 * i] = (int32_t)floor(0.5 + 2147483647.0 * cos(2.0 * pi * i / ncfft));
        tw[2 * i + 1] = (int32_t)floor(0.5 + 2147483647.0 * sin(2.0 * pi * i / ncfft));
    }
    for (i = 0; i < ncfft / 2; i++) {
        const double ph = pi * ((double)(i + 1) / ncfft + 0.5);
        sup[2 * i] = (int32_t)floor(0.5 + 2147483647.0 * cos(ph));
        sup[2 * i + 1] = (int32_t)floor(0.5 + 2147483647.0 * sin(ph));
    }
}

static void test_irfft_s32(void)
{
    enum { N = 64, NC = N / 2 };
    const int32_t radices[3] = {4, 4, 2};
    int32_t tw[2 * NC], sup[NC], spec[N + 2], back[N], scratch[N], k, size = -1;
    pe_context ctx = {scratch, (int32_t)sizeof scratch, NULL};
    pe_context small = {scratch, (int32_t)sizeof scratch - 4, NULL};
    irfft_tables32(N, tw, sup);
    PE_CHECK_EQ(pe_signal_irfft_s32_get_buffer_size(N, &size), PE_OK);
    PE_CHECK_EQ(size, 4 * N);
    /* bin 5 of 2^30 (real) and bin 9 of -2^29 i: 2 / N * (2^30 cos - (-2^29) * -sin ...) */
    memset(spec, 0, sizeof spec);
    spec[10] = 1 << 30;
    spec[19] = -(1 << 29);
    PE_CHECK_EQ(pe_signal_irfft_s32(&ctx, N, 3, radices, tw, sup, spec, 1, back), PE_OK);
    for (k = 0; k < N; k++) {
        const double pi = 3.14159265358979323846;
        const double want = 2.0 * (1073741824.0 * cos(2.0 * pi * 5.0 * k / N) +
                                   536870912.0 * sin(2.0 * pi * 9.0 * k / N)) / N;
        PE_CHECK(fabs(back[k] - want) <= 8.0);
    }
    {
        const int32_t bad3[3] = {4, 4, 3};
        PE_CHECK_EQ(pe_signal_irfft_s32(&ctx, N, 3, bad3, tw, sup, spec, 1, back), PE_ERR_UNSUPPORTED);
        PE_CHECK_EQ(pe_signal_irfft_s32(&ctx, N, 2, radices, tw, sup, spec, 1, back), PE_ERR_ARG);
        PE_CHECK_EQ(pe_signal_irfft_s32(&small, N, 3, radices, tw, sup, spec, 1, back), PE_ERR_SCRATCH);
        PE_CHECK_EQ(pe_signal_irfft_s32(&ctx, N, 3, radices, tw, sup, NULL, 1, back), PE_ERR_ARG);
        PE_CHECK_EQ(pe_signal_irfft_s32_get_buffer_size(2, &size), PE_ERR_ARG);
    }
}

/* Q31 (re, im) pairs of the forward tables */
static void rfft_tables32(int32_t n, int32_t *tw, int32_t *sup)
{
    const int32_t ncfft = n / 2;
    const double pi = 3.14159265358979323846;
    int32_t i;
    for (i = 0; i < ncfft; i++) {
        tw[2 * i] = (int32_t)floor(0.5 + 2147483647.0 * cos(-2.0 * pi * i / ncfft));
        tw[2 * i + 1] = (int32_t)floor(0.5 + 2147483647.0 * sin(-2.0 * pi * i / ncfft));
    }
    for (i = 0; i < ncfft / 2; i++) {
        const double ph = -pi * ((double)(i + 1) / ncfft + 0.5);
        sup[2 * i] = (int32_t)floor(0.5 + 2147483647.0 * cos(ph));
        sup[2 * i + 1] = (int32_t)floor(0.5 + 2147483647.0 * sin(ph));
    }
}

static void test_rfft_s32(void)
{
    enum { N = 32, NC = N / 2 };
    const int32_t radices[2] = {4, 4};
    int32_t tw[2 * NC], sup[NC], in[N], out[N + 2], k, size = -1;
    pe_context none = {NULL, 0, NULL};
    rfft_tables32(N, tw, sup);
    PE_CHECK_EQ(pe_signal_rfft_s32_get_buffer_size(N, &size), PE_OK);
    PE_CHECK_EQ(size, 0);
    /* a cosine at bin 3 of amplitude 2^30 over 29 samples of 32 (zero padded): the scaled
     * transform (every stage divides by its radix, the split by 2) is sum / N */
    for (k = 0; k < N; k++) {
        in[k] = (int32_t)floor(0.5 + 1073741824.0 * cos(2.0 * 3.14159265358979323846 * 3.0 * k / N));
    }
    PE_CHECK_EQ(pe_signal_rfft_s32(&none, N, N - 3, 2, radices, tw, sup, in, 1, out), PE_OK);
    for (k = 0; k <= NC; k++) {
        double re = 0.0, im = 0.0;
        int32_t j;
        for (j = 0; j < N - 3; j++) {
            const double ph = -2.0 * 3.14159265358979323846 * k * j / N;
            re += in[j] * cos(ph);
            im += in[j] * sin(ph);
        }
        PE_CHECK(fabs(out[2 * k] - re / N) <= 8.0 && fabs(out[2 * k + 1] - im / N) <= 8.0);
    }
    PE_CHECK(out[6] > 400000000 && out[1] == 0 && out[2 * NC + 1] == 0);
    {
        const int32_t bad3[2] = {4, 3}, short1[1] = {4};
        PE_CHECK_EQ(pe_signal_rfft_s32(&none, N, N, 2, bad3, tw, sup, in, 1, out), PE_ERR_UNSUPPORTED);
        PE_CHECK_EQ(pe_signal_rfft_s32(&none, N, N, 1, short1, tw, sup, in, 1, out), PE_ERR_ARG);
        PE_CHECK_EQ(pe_signal_rfft_s32(&none, N, N + 1, 2, radices, tw, sup, in, 1, out), PE_ERR_ARG);
        PE_CHECK_EQ(pe_signal_rfft_s32(&none, N, N, 2, radices, tw, sup, out, 1, out), PE_ERR_ARG); /* overlap */
        PE_CHECK_EQ(pe_signal_rfft_s32(&none, N, N, 2, radices, tw, NULL, in, 1, out), PE_ERR_ARG);
        PE_CHECK_EQ(pe_signal_rfft_s32_get_buffer_size(7, &size), PE_ERR_ARG);
    }
}

/* float32 bit patterns of (float) cos / sin of the angles, (re, im) pairs; sign -1 forward, +1 inverse */
static int32_t f32_word(double v)
{
    union {
        float f;
        int32_t i;
    } u;
    u.f = (float)v;
    return u.i;
}

static void fft_tables_f32(int32_t n, double sign, int32_t *tw, int32_t *sup)
{
    const int32_t ncfft = n / 2;
    const double pi = 3.14159265358979323846;
    int32_t i;
    for (i = 0; i < ncfft; i++) {
        tw[2 * i] = f32_word(cos(sign * 2.0 * pi * i / ncfft));
        tw[2 * i + 1] = f32_word(sin(sign * 2.0 * pi * i / ncfft));
    }
    for (i = 0; i < ncfft / 2; i++) {
        const double ph = sign * pi * ((double)(i + 1) / ncfft + 0.5);
        sup[2 * i] = f32_word(cos(ph));
        sup[2 * i + 1] = f32_word(sin(ph));
    }
}

static void test_fft_f32(void)
{
    enum { N = 64, NC = N / 2 };
    const int32_t radices[3] = {4, 4, 2};
    int32_t twf[2 * NC], supf[NC], twi[2 * NC], supi[NC], k, size = -1;
    float in[N], spec[N + 2], back[N], scratch[N];
    pe_context none = {NULL, 0, NULL};
    pe_context ctx = {scratch, (int32_t)sizeof scratch, NULL};
    pe_context small = {scratch, (int32_t)sizeof scratch - 4, NULL};
    fft_tables_f32(N, -1.0, twf, supf);
    fft_tables_f32(N, 1.0, twi, supi);
    PE_CHECK_EQ(pe_signal_rfft_f32_get_buffer_size(N, &size), PE_OK);
    PE_CHECK_EQ(size, 0);
    PE_CHECK_EQ(pe_signal_irfft_f32_get_buffer_size(N, &size), PE_OK);
    PE_CHECK_EQ(size, 4 * N);
    for (k = 0; k < N; k++) {
        in[k] = (float)(3.0 * cos(2.0 * 3.14159265358979323846 * 5.0 * k / N) - 1.5 * sin(2.0 *
                        3.14159265358979323846 * 11.0 * k / N) + 0.25);
    }
    /* forward, unscaled: bin 0 = 0.25 N, bin 5 = 1.5 N, bin 11 = 0.75 N i */
    PE_CHECK_EQ(pe_signal_rfft_f32(&none, N, N, 3, radices, twf, supf, in, 1, spec), PE_OK);
    PE_CHECK(fabs(spec[0] - 0.25 * N) < 1e-3 && spec[1] == 0.0f && spec[2 * NC + 1] == 0.0f);
    PE_CHECK(fabs(spec[10] - 1.5 * N) < 1e-3 && fabs(spec[11]) < 1e-3);
    PE_CHECK(fabs(spec[22]) < 1e-3 && fabs(spec[23] - 0.75 * N) < 1e-3);
    /* the inverse brings the samples back (kissfft's unscaled inverse divided by fft_length) */
    PE_CHECK_EQ(pe_signal_irfft_f32(&ctx, N, 3, radices, twi, supi, spec, 1, back), PE_OK);
    for (k = 0; k < N; k++) {
        PE_CHECK(fabs(back[k] - in[k]) < 1e-5);
    }
    {
        const int32_t bad3[3] = {4, 4, 3};
        PE_CHECK_EQ(pe_signal_rfft_f32(&none, N, N, 3, bad3, twf, supf, in, 1, spec), PE_ERR_UNSUPPORTED);
        PE_CHECK_EQ(pe_signal_rfft_f32(&none, N, N, 2, radices, twf, supf, in, 1, spec), PE_ERR_ARG);
        PE_CHECK_EQ(pe_signal_rfft_f32(&none, N, N, 3, radices, twf, supf, spec, 1, spec), PE_ERR_ARG);
        PE_CHECK_EQ(pe_signal_irfft_f32(&ctx, N, 3, bad3, twi, supi, spec, 1, back), PE_ERR_UNSUPPORTED);
        PE_CHECK_EQ(pe_signal_irfft_f32(&small, N, 3, radices, twi, supi, spec, 1, back), PE_ERR_SCRATCH);
        PE_CHECK_EQ(pe_signal_irfft_f32(&none, N, 3, radices, twi, supi, spec, 1, back), PE_ERR_SCRATCH);
        PE_CHECK_EQ(pe_signal_irfft_f32(&ctx, N, 3, radices, twi, NULL, spec, 1, back), PE_ERR_ARG);
        PE_CHECK_EQ(pe_signal_irfft_f32_get_buffer_size(2, &size), PE_ERR_ARG);
    }
}

static void test_filter_bank_and_friends(void)
{
    const uint32_t in[6] = {1, 2, 3, 4, 5, 6};
    const int16_t wts[4] = {1, 2, 3, -1}, uw[4] = {4, 5, 6, 7};
    const int16_t f0[3] = {0, 1, 3}, w0[3] = {0, 1, 2}, wd[3] = {1, 1, 2};
    const int16_t bad[3] = {0, 1, 5};
    uint64_t out[2];
    uint32_t o32[6], noise[6] = {0};
    int16_t lut[125];
    PE_CHECK_EQ(pe_signal_filter_bank(in, 6, wts, uw, 4, f0, w0, wd, 2, out), PE_OK);
    /* channel 1: weights of slot 1 plus unweights of slot 0: 2 * 2 + 4 * 1 */
    PE_CHECK_EQ((long long)out[0], 8);
    /* channel 2: 3 * 4 + (-1) * 5 (wrapping uint64) + unweights of slot 1: 5 * 2 */
    PE_CHECK_EQ((long long)out[1], 12 - 5 + 10);
    PE_CHECK_EQ(pe_signal_filter_bank(in, 6, wts, uw, 4, bad, w0, wd, 2, out), PE_ERR_ARG);
    PE_CHECK_EQ(pe_signal_filter_bank_sqrt(out, 2, 1, o32), PE_OK);
    PE_CHECK_EQ(o32[0], 1u); /* sqrt(8) rounds to 3, >> 1 */
    PE_CHECK_EQ(o32[1], 2u); /* sqrt(17) rounds to 4, >> 1 */
    PE_CHECK_EQ(pe_signal_filter_bank_sqrt(out, 2, 32, o32), PE_ERR_ARG);
    memset(lut, 0, sizeof(lut));
    PE_CHECK_EQ(pe_signal_pcan(in, noise, 6, lut, 124, 6, o32), PE_ERR_ARG);
    PE_CHECK_EQ(pe_signal_pcan(in, noise, 6, lut, 125, 6, o32), PE_OK);
    PE_CHECK_EQ(o32[5], 0u); /* zero gain */
    {
        pe_signal_spectral_params p;
        uint32_t state[6] = {0}, y[6], nz[6];
        memset(&p, 0, sizeof(p));
        p.num_channels = 6;
        p.smoothing = p.alternate_smoothing = 1u << 13;
        p.one_minus_smoothing = p.alternate_one_minus_smoothing = 1u << 13;
        p.smoothing_bits = 2;
        p.spectral_subtraction_bits = 14;
        PE_CHECK_EQ(pe_signal_spectral_subtraction(&p, in, state, y, nz), PE_OK);
        PE_CHECK_EQ(state[5], (6u << 2) / 2u); /* half of the scaled signal */
        PE_CHECK_EQ(nz[5], state[5]);
        PE_CHECK_EQ(y[5], ((6u << 2) - 12u) >> 2);
        p.smoothing_bits = 32;
        PE_CHECK_EQ(pe_signal_spectral_subtraction(&p, in, state, y, nz), PE_ERR_ARG);
    }
    {
        int16_t lg[2];
        const uint32_t v[2] = {1, 0xFFFFFFFFu};
        PE_CHECK_EQ(pe_signal_filter_bank_log(v, 2, 0, 1600, lg), PE_OK);
        PE_CHECK_EQ(lg[0], 0);
        PE_CHECK_EQ(lg[1], 32767); /* saturated */
    }
}

static void test_cast_and_int32(void)
{
    const int32_t a[3] = {300, -1, INT32_MAX};
    const uint32_t u[2] = {0xFFFFFFFFu, 0x80000000u};
    const uint8_t b[2] = {0, 2};
    int8_t o8[3];
    int32_t o32[3];
    const int32_t one = 1, zero = 0, minus1 = -1;
    PE_CHECK_EQ(pe_signal_cast(PE_SIGNAL_DT_INT32, a, PE_SIGNAL_DT_INT8, o8, 3), PE_OK);
    PE_CHECK_EQ(o8[0], 44);
    PE_CHECK_EQ(o8[1], -1);
    PE_CHECK_EQ(o8[2], -1);
    PE_CHECK_EQ(pe_signal_cast(PE_SIGNAL_DT_UINT32, u, PE_SIGNAL_DT_INT32, o32, 2), PE_OK);
    PE_CHECK_EQ(o32[0], -1);
    PE_CHECK_EQ(o32[1], INT32_MIN);
    PE_CHECK_EQ(pe_signal_cast(PE_SIGNAL_DT_BOOL, b, PE_SIGNAL_DT_INT32, o32, 2), PE_OK);
    PE_CHECK_EQ(o32[1], 1);
    PE_CHECK_EQ(pe_signal_cast(PE_SIGNAL_DT_INT32, a, PE_SIGNAL_DT_BOOL, o8, 3), PE_ERR_ARG);
    PE_CHECK_EQ(pe_signal_binary_s32(PE_SIGNAL_I32_ADD, a, 3, &one, 1, INT32_MIN, INT32_MAX, o32, 3), PE_OK);
    PE_CHECK_EQ(o32[2], INT32_MIN); /* wraps */
    PE_CHECK_EQ(pe_signal_binary_s32(PE_SIGNAL_I32_DIV, a, 3, &minus1, 1, -5, 5, o32, 3), PE_OK);
    PE_CHECK_EQ(o32[0], -5); /* clamped */
    PE_CHECK_EQ(o32[1], 1);
    PE_CHECK_EQ(pe_signal_binary_s32(PE_SIGNAL_I32_DIV, a, 3, &zero, 1, INT32_MIN, INT32_MAX, o32, 3),
                PE_ERR_ARG);
    {
        const int32_t m[1] = {INT32_MIN};
        PE_CHECK_EQ(pe_signal_binary_s32(PE_SIGNAL_I32_DIV, m, 1, &minus1, 1, INT32_MIN, INT32_MAX, o32, 1),
                    PE_ERR_ARG);
    }
    PE_CHECK_EQ(pe_signal_binary_s32(PE_SIGNAL_I32_MIN, a, 3, a, 2, INT32_MIN, INT32_MAX, o32, 3), PE_ERR_ARG);
    PE_CHECK_EQ(pe_signal_binary_s32(5, a, 3, a, 3, INT32_MIN, INT32_MAX, o32, 3), PE_ERR_ARG);
}

static void test_delay(void)
{
    /* two rows of 4, delay 3: the first frame comes out behind 3 zeros, the
     * second behind the first's last 3; delay 6 > frame 4 spans two frames */
    const int16_t a[8] = {1, 2, 3, 4, -1, -2, -3, -4};
    const int16_t b[8] = {5, 6, 7, 8, -5, -6, -7, -8};
    int16_t h[12] = {0}, out[8];
    int16_t h6[6] = {0}, o6[4];
    const int16_t want_a[8] = {0, 0, 0, 1, 0, 0, 0, -1};
    const int16_t want_b[8] = {2, 3, 4, 5, -2, -3, -4, -5};
    int k;
    PE_CHECK_EQ(pe_signal_delay_s16(a, 2, 4, 3, h, out), PE_OK);
    for (k = 0; k < 8; k++) {
        PE_CHECK_EQ(out[k], want_a[k]);
    }
    PE_CHECK_EQ(pe_signal_delay_s16(b, 2, 4, 3, h, out), PE_OK);
    for (k = 0; k < 8; k++) {
        PE_CHECK_EQ(out[k], want_b[k]);
    }
    PE_CHECK_EQ(h[0], 6);
    PE_CHECK_EQ(h[5], -8);
    PE_CHECK_EQ(pe_signal_delay_s16(a, 1, 4, 6, h6, o6), PE_OK);
    PE_CHECK_EQ(o6[3], 0);
    PE_CHECK_EQ(pe_signal_delay_s16(b, 1, 4, 6, h6, o6), PE_OK);
    PE_CHECK_EQ(o6[0], 0);
    PE_CHECK_EQ(o6[1], 0);
    PE_CHECK_EQ(o6[2], 1);
    PE_CHECK_EQ(o6[3], 2);
    PE_CHECK_EQ(pe_signal_delay_s16(a, 1, 4, 0, NULL, o6), PE_OK); /* no delay: a copy */
    PE_CHECK_EQ(o6[3], 4);
    PE_CHECK_EQ(pe_signal_delay_s16(a, 1, 0, 3, h, out), PE_ERR_ARG);
    PE_CHECK_EQ(pe_signal_delay_s16(a, 1, 4, -1, h, out), PE_ERR_ARG);
    PE_CHECK_EQ(pe_signal_delay_s16(a, 1, 4, 3, NULL, out), PE_ERR_ARG);
}

int main(void)
{
    test_sqrt_and_log();
    test_window_and_scale();
    test_rfft();
    test_irfft();
    test_irfft_s32();
    test_rfft_s32();
    test_fft_f32();
    test_filter_bank_and_friends();
    test_cast_and_int32();
    test_delay();
    return PE_TEST_END("test_signal");
}
