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
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_signal.h"

#include "pe_signal_q15.h"

static void butterfly4(int16_t *out, int32_t fstride, const int32_t *tw, int32_t m)
{
    int32_t k;
    for (k = 0; k < m; k++) {
        pe_cpx16 f0, s0, s1, s2, s3, s4, s5, r;
        f0 = fixdiv(ld(out, k), 4);
        s0 = cmul(fixdiv(ld(out, k + m), 4), twiddle(tw, k * fstride));
        s1 = cmul(fixdiv(ld(out, k + 2 * m), 4), twiddle(tw, 2 * k * fstride));
        s2 = cmul(fixdiv(ld(out, k + 3 * m), 4), twiddle(tw, 3 * k * fstride));
        s5 = csub(f0, s1);
        f0 = cadd(f0, s1);
        s3 = cadd(s0, s2);
        s4 = csub(s0, s2);
        st(out, k + 2 * m, csub(f0, s3));
        st(out, k, cadd(f0, s3));
        /* forward transform: s5 -/+ i * s4 */
        r.r = wrap16((int32_t)s5.r + s4.i);
        r.i = wrap16((int32_t)s5.i - s4.r);
        st(out, k + m, r);
        r.r = wrap16((int32_t)s5.r - s4.i);
        r.i = wrap16((int32_t)s5.i + s4.r);
        st(out, k + 3 * m, r);
    }
}

/* complex sample j of a row of n int16 samples zero-padded: (x[2j], x[2j + 1]) */
static pe_cpx16 sample(const int16_t *x, int32_t n, int32_t j)
{
    pe_cpx16 c;
    c.r = 2 * j < n ? x[2 * j] : 0;
    c.i = 2 * j + 1 < n ? x[2 * j + 1] : 0;
    return c;
}

/* The complex FFT of the row's ncfft samples into out, decimation in time
 * as kissfft orders it, without recursion: stage s (0 the outermost) has
 * radix radices[s], m_s = the product of the later radices, stride_s = the
 * product of the earlier ones; out[i] starts as sample j, where the digits of
 * i over (m_0, m_1, ...) are the digits of j over (1, stride_1, ...); then the
 * butterflies run from the innermost stage out, stride_s blocks of
 * radix * m_s each (blocks of one stage share no data, so their order is
 * free). */
static void fft_complex(int16_t *out, const int16_t *x, int32_t n, const int32_t *radices, int32_t n_stages,
                        int32_t ncfft, const int32_t *tw)
{
    int32_t i, s, blk, shift[PE_SIGNAL_MAX_FFT_STAGES], log_n = 0;
    /* radices 2 and 4 only: every m_s is a power of two, its digit a shift and a mask */
    while ((1 << log_n) < ncfft) {
        log_n++;
    }
    for (s = 0; s < n_stages; s++) {
        log_n -= radices[s] == 4 ? 2 : 1;
        shift[s] = log_n;
    }
    for (i = 0; i < ncfft; i++) {
        int32_t stride = 1, j = 0;
        for (s = 0; s < n_stages; s++) {
            j += ((i >> shift[s]) & (radices[s] - 1)) * stride;
            stride *= radices[s];
        }
        st(out, i, sample(x, n, j));
    }
    for (s = n_stages - 1; s >= 0; s--) {
        int32_t stride = 1, m = ncfft, k;
        for (k = 0; k < s; k++) {
            stride *= radices[k];
        }
        m = ncfft / (stride * radices[s]);
        for (blk = 0; blk < stride; blk++) {
            int16_t *o = out + 2 * blk * radices[s] * m;
            if (radices[s] == 4) {
                butterfly4(o, stride, tw, m);
            } else {
                butterfly2(o, stride, tw, m);
            }
        }
    }
}

pe_status pe_signal_rfft_get_buffer_size(int32_t fft_length, int32_t *size)
{
    if (size == NULL || fft_length < 4 || fft_length > (1 << 20) || (fft_length & 1) != 0) {
        return PE_ERR_ARG;
    }
    /* none: the transform reads the input row in place (zero padding on the
     * fly) and is computed in the output row, which then takes the split into
     * real bins in place (bins k and ncfft - k are read and written together) */
    *size = 0;
    return PE_OK;
}

pe_status pe_signal_rfft_s16(const pe_context *ctx, int32_t fft_length, int32_t input_length,
                             int32_t n_stages, const int32_t *radices, const int32_t *twiddles,
                             const int32_t *super_twiddles, const int16_t *input, int32_t batches,
                             int16_t *output)
{
    int32_t need, ncfft, prod = 1, s, b, k;
    (void)ctx;
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
    {
        /* the output is written while the input is read: they must not overlap */
        const uintptr_t i0 = (uintptr_t)input, i1 = i0 + (uintptr_t)batches * input_length * 2u;
        const uintptr_t o0 = (uintptr_t)output, o1 = o0 + (uintptr_t)batches * (ncfft + 1) * 4u;
        if (batches > 0 && i0 < o1 && o0 < i1) {
            return PE_ERR_ARG;
        }
    }
    for (b = 0; b < batches; b++) {
        const int16_t *x = input + (int32_t)b * input_length;
        int16_t *y = output + (int32_t)b * (ncfft + 1) * 2;
        pe_cpx16 dc;
        /* the complex transform, computed in the output row */
        fft_complex(y, x, input_length, radices, n_stages, ncfft, twiddles);
        /* DC and Nyquist from the even / odd sums */
        dc = fixdiv(ld(y, 0), 2);
        y[0] = wrap16((int32_t)dc.r + dc.i);
        y[1] = 0;
        y[2 * ncfft] = wrap16((int32_t)dc.r - dc.i);
        y[2 * ncfft + 1] = 0;
        for (k = 1; k <= ncfft / 2; k++) {
            pe_cpx16 fpk = ld(y, k), fpnk = ld(y, ncfft - k), f1k, f2k, tw;
            fpnk.i = wrap16(-(int32_t)fpnk.i);
            fpk = fixdiv(fpk, 2);
            fpnk = fixdiv(fpnk, 2);
            f1k = cadd(fpk, fpnk);
            f2k = csub(fpk, fpnk);
            tw = cmul(f2k, twiddle(super_twiddles, k - 1));
            y[2 * k] = wrap16(pe_fx_asr32((int32_t)f1k.r + tw.r, 1));
            y[2 * k + 1] = wrap16(pe_fx_asr32((int32_t)f1k.i + tw.i, 1));
            y[2 * (ncfft - k)] = wrap16(pe_fx_asr32((int32_t)f1k.r - tw.r, 1));
            y[2 * (ncfft - k) + 1] = wrap16(pe_fx_asr32((int32_t)tw.i - f1k.i, 1));
        }
    }
    return PE_OK;
}
