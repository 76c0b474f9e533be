/*
 * pe_signal_ifft.c - the signal library's int16 inverse real FFT
 * (pe_signal.h, TFLM's int16 SignalIrfft): kissfft's kiss_fftri with
 * FIXED_POINT=16, the arithmetic of the forward transform in
 * pe_signal_fft.c (Q15 products rounded half up, every butterfly input
 * divided by its radix, int16 wrap-around) run as the inverse: radix 4's
 * +/- i swapped, the twiddles (parameter words) of the negated angles.
 *
 * A file of its own (the complex helpers and the radix-2 butterfly shared
 * through pe_signal_q15.h; its own radix-4 butterfly and stage loop), so that
 * the forward transform (the audio preprocessor's FFT, 56,240 instructions
 * on mps2-an386) keeps its code and its speed: a direction flag in the
 * shared butterflies cost it 8,200 instructions.
 */
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_signal.h"

#include "pe_signal_q15.h"

/* the inverse radix-4 butterfly: s5 +/- i * s4 */
static void butterfly4_inv(int16_t *out, int32_t fstride, const int32_t *tw, int32_t m)
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
        r.r = wrap16((int32_t)s5.r - s4.i);
        r.i = wrap16((int32_t)s5.i + s4.r);
        st(out, k + m, r);
        r.r = wrap16((int32_t)s5.r + s4.i);
        r.i = wrap16((int32_t)s5.i - s4.r);
        st(out, k + 3 * m, r);
    }
}

/* the inverse complex FFT of src (ncfft values) into out, in kissfft's
 * order: the digit permutation and the stages of fft_complex in
 * pe_signal_fft.c */
static void ifft_complex(int16_t *out, const int16_t *src, const int32_t *radices, int32_t n_stages, int32_t ncfft,
                         const int32_t *tw)
{
    int32_t i, s, blk, shift[PE_SIGNAL_MAX_FFT_STAGES], log_n = 0;
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
        st(out, i, ld(src, j));
    }
    for (s = n_stages - 1; s >= 0; s--) {
        int32_t stride = 1, m, k;
        for (k = 0; k < s; k++) {
            stride *= radices[k];
        }
        m = ncfft / (stride * radices[s]);
        for (blk = 0; blk < stride; blk++) {
            int16_t *o = out + 2 * blk * radices[s] * m;
            if (radices[s] == 4) {
                butterfly4_inv(o, stride, tw, m);
            } else {
                butterfly2(o, stride, tw, m);
            }
        }
    }
}

/* radices 2 / 4 only, their product ncfft */
static pe_status check_radices(const int32_t *radices, int32_t n_stages, int32_t ncfft)
{
    int32_t prod = 1, s;
    for (s = 0; s < n_stages; s++) {
        if (radices[s] != 2 && radices[s] != 4) {
            return PE_ERR_UNSUPPORTED;
        }
        prod *= radices[s];
        if (prod > ncfft) {
            return PE_ERR_ARG;
        }
    }
    return prod == ncfft ? PE_OK : PE_ERR_ARG;
}

pe_status pe_signal_irfft_get_buffer_size(int32_t fft_length, int32_t *size)
{
    if (size == NULL || fft_length < 4 || fft_length > (1 << 20) || (fft_length & 1) != 0) {
        return PE_ERR_ARG;
    }
    /* the ncfft complex values the split computes, the complex transform's input */
    *size = fft_length * 2;
    return PE_OK;
}

/* Inverse: kissfft's kiss_fftri in 16-bit fixed point. The ncfft + 1 bins
 * fold into ncfft complex values (bins k and ncfft - k, each halved, their
 * difference turned by the inverse super twiddle; DC and Nyquist into value
 * 0), then the inverse complex FFT (each stage divides by its radix) whose
 * ncfft complex results are the fft_length real samples in order. */
pe_status pe_signal_irfft_s16(const pe_context *ctx, int32_t fft_length, int32_t n_stages, const int32_t *radices,
                              const int32_t *twiddles, const int32_t *super_twiddles, const int16_t *input,
                              int32_t batches, int16_t *output)
{
    int32_t need, ncfft, b, k;
    pe_status s;
    int16_t *tmp;
    if (pe_signal_irfft_get_buffer_size(fft_length, &need) != PE_OK || radices == NULL || twiddles == NULL ||
        super_twiddles == NULL || input == NULL || output == NULL || batches < 0 || n_stages < 1 ||
        n_stages > PE_SIGNAL_MAX_FFT_STAGES) {
        return PE_ERR_ARG;
    }
    ncfft = fft_length / 2;
    s = check_radices(radices, n_stages, ncfft);
    if (s != PE_OK) {
        return s;
    }
    if (ctx == NULL || ctx->buf == NULL || ctx->size < need) {
        return PE_ERR_SCRATCH;
    }
    tmp = (int16_t *)ctx->buf;
    for (b = 0; b < batches; b++) {
        const int16_t *z = input + (int64_t)b * (ncfft + 1) * 2;
        int16_t *y = output + (int64_t)b * fft_length;
        pe_cpx16 t0;
        t0.r = wrap16((int32_t)z[0] + z[2 * ncfft]);
        t0.i = wrap16((int32_t)z[0] - z[2 * ncfft]);
        st(tmp, 0, fixdiv(t0, 2));
        for (k = 1; k <= ncfft / 2; k++) {
            pe_cpx16 fk = fixdiv(ld(z, k), 2), fnkc = ld(z, ncfft - k), fek, fok, d;
            fnkc.i = wrap16(-(int32_t)fnkc.i);
            fnkc = fixdiv(fnkc, 2);
            fek = cadd(fk, fnkc);
            fok = cmul(csub(fk, fnkc), twiddle(super_twiddles, k - 1));
            st(tmp, k, cadd(fek, fok));
            d = csub(fek, fok); /* at k = ncfft / 2 this one is kept, as kissfft writes it last */
            d.i = wrap16(-(int32_t)d.i);
            st(tmp, ncfft - k, d);
        }
        ifft_complex(y, tmp, radices, n_stages, ncfft, twiddles);
    }
    return PE_OK;
}
