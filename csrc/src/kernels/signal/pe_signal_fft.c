/*
 * pe_signal_fft.c - the signal library's int16 real FFT (pe_signal.h), in
 * the 16-bit fixed-point arithmetic TFLM's RFFT uses (kissfft with
 * FIXED_POINT=16): a complex FFT of half the length over the even / odd
 * samples, mixed radix 4 and 2, every butterfly input divided by its radix
 * (Q15 multiply by 32767 / radix, rounded), Q15 twiddle products rounded
 * half up, results narrowed to int16 with wrap-around; then the split into
 * the real transform's ncfft + 1 bins with the "super" twiddles.
 *
 * The twiddles (Q15 cos / sin of the stage angles, computed once by the
 * preparation in double precision) arrive as parameter words; nothing here
 * uses floating point.
 */
#include "pyembed/pe_signal.h"

typedef struct {
    int16_t r;
    int16_t i;
} pe_cpx16;

static int16_t wrap16(int32_t v)
{
    uint32_t u = (uint32_t)v & 0xFFFFu;
    return (int16_t)(u <= 0x7FFFu ? (int32_t)u : (int32_t)u - 0x10000);
}

/* floor(v / 2^s) for a signed 64-bit v (an arithmetic shift, written portably) */
static int64_t asr64(int64_t v, int32_t s)
{
    return v >= 0 ? v >> s : -((-(v + 1)) >> s) - 1;
}

/* Q15 rounding of a product sum: (x + 2^14) >> 15, narrowed to int16 */
static int16_t q15_round(int64_t x)
{
    return wrap16((int32_t)asr64(x + 16384, 15));
}

static pe_cpx16 twiddle(const int32_t *words, int32_t k)
{
    const uint32_t w = (uint32_t)words[k];
    pe_cpx16 c;
    c.r = wrap16((int32_t)(w & 0xFFFFu));
    c.i = wrap16((int32_t)(w >> 16));
    return c;
}

static pe_cpx16 cmul(pe_cpx16 a, pe_cpx16 b)
{
    pe_cpx16 m;
    m.r = q15_round((int64_t)a.r * b.r - (int64_t)a.i * b.i);
    m.i = q15_round((int64_t)a.r * b.i + (int64_t)a.i * b.r);
    return m;
}

/* divide both parts by the radix: multiply by 32767 / radix in Q15 */
static pe_cpx16 fixdiv(pe_cpx16 c, int32_t radix)
{
    const int32_t k = 32767 / radix;
    c.r = q15_round((int64_t)c.r * k);
    c.i = q15_round((int64_t)c.i * k);
    return c;
}

static pe_cpx16 cadd(pe_cpx16 a, pe_cpx16 b)
{
    pe_cpx16 s;
    s.r = wrap16((int32_t)a.r + b.r);
    s.i = wrap16((int32_t)a.i + b.i);
    return s;
}

static pe_cpx16 csub(pe_cpx16 a, pe_cpx16 b)
{
    pe_cpx16 s;
    s.r = wrap16((int32_t)a.r - b.r);
    s.i = wrap16((int32_t)a.i - b.i);
    return s;
}

static void butterfly2(pe_cpx16 *out, int32_t fstride, const int32_t *tw, int32_t m)
{
    int32_t k;
    for (k = 0; k < m; k++) {
        pe_cpx16 t;
        out[k] = fixdiv(out[k], 2);
        out[k + m] = fixdiv(out[k + m], 2);
        t = cmul(out[k + m], twiddle(tw, k * fstride));
        out[k + m] = csub(out[k], t);
        out[k] = cadd(out[k], t);
    }
}

static void butterfly4(pe_cpx16 *out, int32_t fstride, const int32_t *tw, int32_t m)
{
    int32_t k;
    for (k = 0; k < m; k++) {
        pe_cpx16 s0, s1, s2, s3, s4, s5;
        out[k] = fixdiv(out[k], 4);
        out[k + m] = fixdiv(out[k + m], 4);
        out[k + 2 * m] = fixdiv(out[k + 2 * m], 4);
        out[k + 3 * m] = fixdiv(out[k + 3 * m], 4);
        s0 = cmul(out[k + m], twiddle(tw, k * fstride));
        s1 = cmul(out[k + 2 * m], twiddle(tw, 2 * k * fstride));
        s2 = cmul(out[k + 3 * m], twiddle(tw, 3 * k * fstride));
        s5 = csub(out[k], s1);
        out[k] = cadd(out[k], s1);
        s3 = cadd(s0, s2);
        s4 = csub(s0, s2);
        out[k + 2 * m] = csub(out[k], s3);
        out[k] = cadd(out[k], s3);
        /* forward transform: multiply s4 by -i */
        out[k + m].r = wrap16((int32_t)s5.r + s4.i);
        out[k + m].i = wrap16((int32_t)s5.i - s4.r);
        out[k + 3 * m].r = wrap16((int32_t)s5.r - s4.i);
        out[k + 3 * m].i = wrap16((int32_t)s5.i + s4.r);
    }
}

/* one stage of the decimation in time: radices[0] sub-transforms of length m
 * (over the input taken every fstride * radix), then their butterflies */
static void fft_stage(pe_cpx16 *out, const pe_cpx16 *in, int32_t fstride, const int32_t *radices,
                      int32_t n_stages, int32_t m, const int32_t *tw)
{
    const int32_t p = radices[0];
    int32_t q;
    if (n_stages == 1) {
        for (q = 0; q < p; q++) {
            out[q] = in[q * fstride];
        }
    } else {
        for (q = 0; q < p; q++) {
            fft_stage(out + q * m, in + q * fstride, fstride * p, radices + 1, n_stages - 1, m / radices[1],
                      tw);
        }
    }
    if (p == 4) {
        butterfly4(out, fstride, tw, m);
    } else {
        butterfly2(out, fstride, tw, m);
    }
}

pe_status pe_signal_rfft_get_buffer_size(int32_t fft_length, int32_t *size)
{
    if (size == NULL || fft_length < 4 || fft_length > (1 << 20) || (fft_length & 1) != 0) {
        return PE_ERR_ARG;
    }
    /* the zero-padded row (fft_length int16) and the complex transform (ncfft pairs) */
    *size = fft_length * 2 + (fft_length / 2) * 4;
    return PE_OK;
}

pe_status pe_signal_rfft_s16(const pe_context *ctx, int32_t fft_length, int32_t input_length,
                             int32_t n_stages, const int32_t *radices, const int32_t *twiddles,
                             const int32_t *super_twiddles, const int16_t *input, int32_t batches,
                             int16_t *output)
{
    int32_t need, ncfft, prod = 1, s, b, k;
    pe_cpx16 *row, *tmp;
    if (pe_signal_rfft_get_buffer_size(fft_length, &need) != PE_OK || radices == NULL || twiddles == NULL ||
        super_twiddles == NULL || input == NULL || output == NULL || batches < 0 || input_length < 0 ||
        input_length > fft_length || n_stages < 1 || n_stages > PE_SIGNAL_MAX_FFT_STAGES) {
        return PE_ERR_ARG;
    }
    ncfft = fft_length / 2;
    for (s = 0; s < n_stages; s++) {
        if (radices[s] != 2 && radices[s] != 4) {
            return PE_ERR_UNSUPPORTED;
        }
        prod *= radices[s];
        if (prod > ncfft) {
            return PE_ERR_ARG;
        }
    }
    if (prod != ncfft) {
        return PE_ERR_ARG;
    }
    if (ctx == NULL || ctx->buf == NULL || ctx->size < need) {
        return PE_ERR_SCRATCH;
    }
    row = (pe_cpx16 *)ctx->buf;
    tmp = row + ncfft;
    for (b = 0; b < batches; b++) {
        const int16_t *x = input + (int32_t)b * input_length;
        int16_t *y = output + (int32_t)b * (ncfft + 1) * 2;
        pe_cpx16 dc;
        for (k = 0; k < ncfft; k++) {
            const int32_t e = 2 * k, o = 2 * k + 1;
            row[k].r = e < input_length ? x[e] : 0;
            row[k].i = o < input_length ? x[o] : 0;
        }
        fft_stage(tmp, row, 1, radices, n_stages, ncfft / radices[0], twiddles);
        /* DC and Nyquist from the even / odd sums */
        dc = fixdiv(tmp[0], 2);
        y[0] = wrap16((int32_t)dc.r + dc.i);
        y[1] = 0;
        y[2 * ncfft] = wrap16((int32_t)dc.r - dc.i);
        y[2 * ncfft + 1] = 0;
        for (k = 1; k <= ncfft / 2; k++) {
            pe_cpx16 fpk = tmp[k], fpnk, f1k, f2k, tw;
            fpnk.r = tmp[ncfft - k].r;
            fpnk.i = wrap16(-(int32_t)tmp[ncfft - k].i);
            fpk = fixdiv(fpk, 2);
            fpnk = fixdiv(fpnk, 2);
            f1k = cadd(fpk, fpnk);
            f2k = csub(fpk, fpnk);
            tw = cmul(f2k, twiddle(super_twiddles, k - 1));
            y[2 * k] = wrap16((int32_t)asr64((int64_t)f1k.r + tw.r, 1));
            y[2 * k + 1] = wrap16((int32_t)asr64((int64_t)f1k.i + tw.i, 1));
            y[2 * (ncfft - k)] = wrap16((int32_t)asr64((int64_t)f1k.r - tw.r, 1));
            y[2 * (ncfft - k) + 1] = wrap16((int32_t)asr64((int64_t)tw.i - f1k.i, 1));
        }
    }
    return PE_OK;
}
