/*
 * pe_signal_fft32.c - the signal library's int32 real FFT and its inverse
 * (pe_signal.h), in the 32-bit fixed-point arithmetic TFLM's int32 RFFT and
 * IRFFT use (kissfft with FIXED_POINT=32): Q31 twiddles, products formed in
 * 64 bits and rounded half up by 31 bits, every butterfly input divided by
 * its radix (Q31 multiply by 2147483647 / radix), sums narrowed to int32
 * with wrap-around (done here in unsigned arithmetic so that the C is
 * defined). The same stage structure as the int16 transform in
 * pe_signal_fft.c; forward and inverse differ in the twiddles (words) and in
 * the sign of the radix-4 butterfly's i * s4 term. Twiddles arrive as
 * parameter words (re, im pairs); nothing here uses floating point.
 */
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_signal.h"

typedef struct {
    int32_t r;
    int32_t i;
} pe_cpx32;

/* two's-complement reinterpretation of 32 bits */
static int32_t s32_of(uint32_t v)
{
    return v <= 0x7FFFFFFFu ? (int32_t)v : (int32_t)(v - 0x80000000u) - PE_INT32_MAX - 1;
}

static int32_t add32(int32_t a, int32_t b)
{
    return s32_of((uint32_t)a + (uint32_t)b);
}

static int32_t sub32(int32_t a, int32_t b)
{
    return s32_of((uint32_t)a - (uint32_t)b);
}

/* (x + 2^30) >> 31 narrowed to int32 (wraps): |x| < 2^63 - 2^32 here, so the
 * 64-bit sum does not overflow; the shift is arithmetic */
static int32_t q31_round(int64_t x)
{
    const int64_t y = x + ((int64_t)1 << 30);
    const int64_t q = y >= 0 ? y / ((int64_t)1 << 31) : -((-(y + 1)) / ((int64_t)1 << 31)) - 1;
    return s32_of((uint32_t)((uint64_t)q & 0xFFFFFFFFu));
}

static pe_cpx32 cmul(pe_cpx32 a, pe_cpx32 b)
{
    pe_cpx32 m;
    m.r = q31_round((int64_t)a.r * b.r - (int64_t)a.i * b.i);
    m.i = q31_round((int64_t)a.r * b.i + (int64_t)a.i * b.r);
    return m;
}

static pe_cpx32 fixdiv(pe_cpx32 c, int32_t radix)
{
    const int32_t k = PE_INT32_MAX / radix;
    c.r = q31_round((int64_t)c.r * k);
    c.i = q31_round((int64_t)c.i * k);
    return c;
}

static pe_cpx32 cadd(pe_cpx32 a, pe_cpx32 b)
{
    pe_cpx32 s;
    s.r = add32(a.r, b.r);
    s.i = add32(a.i, b.i);
    return s;
}

static pe_cpx32 csub(pe_cpx32 a, pe_cpx32 b)
{
    pe_cpx32 s;
    s.r = sub32(a.r, b.r);
    s.i = sub32(a.i, b.i);
    return s;
}

static pe_cpx32 ld(const int32_t *z, int32_t k)
{
    pe_cpx32 c;
    c.r = z[2 * k];
    c.i = z[2 * k + 1];
    return c;
}

static void st(int32_t *z, int32_t k, pe_cpx32 c)
{
    z[2 * k] = c.r;
    z[2 * k + 1] = c.i;
}

static void butterfly2(int32_t *out, int32_t fstride, const int32_t *tw, int32_t m)
{
    int32_t k;
    for (k = 0; k < m; k++) {
        const pe_cpx32 a = fixdiv(ld(out, k), 2);
        const pe_cpx32 t = cmul(fixdiv(ld(out, k + m), 2), ld(tw, k * fstride));
        st(out, k + m, csub(a, t));
        st(out, k, cadd(a, t));
    }
}

/* the radix-4 butterfly; its outputs m and 3m are s5 -/+ i * s4 (forward) or
 * s5 +/- i * s4 (inverse) */
static void butterfly4(int32_t *out, int32_t fstride, const int32_t *tw, int32_t m, int inverse)
{
    int32_t k;
    for (k = 0; k < m; k++) {
        pe_cpx32 f0, s0, s1, s2, s3, s4, s5, r;
        f0 = fixdiv(ld(out, k), 4);
        s0 = cmul(fixdiv(ld(out, k + m), 4), ld(tw, k * fstride));
        s1 = cmul(fixdiv(ld(out, k + 2 * m), 4), ld(tw, 2 * k * fstride));
        s2 = cmul(fixdiv(ld(out, k + 3 * m), 4), ld(tw, 3 * k * fstride));
        s5 = csub(f0, s1);
        f0 = cadd(f0, s1);
        s3 = cadd(s0, s2);
        s4 = csub(s0, s2);
        st(out, k + 2 * m, csub(f0, s3));
        st(out, k, cadd(f0, s3));
        if (inverse) {
            r.r = sub32(s5.r, s4.i);
            r.i = add32(s5.i, s4.r);
            st(out, k + m, r);
            r.r = add32(s5.r, s4.i);
            r.i = sub32(s5.i, s4.r);
        } else {
            r.r = add32(s5.r, s4.i);
            r.i = sub32(s5.i, s4.r);
            st(out, k + m, r);
            r.r = sub32(s5.r, s4.i);
            r.i = add32(s5.i, s4.r);
        }
        st(out, k + 3 * m, r);
    }
}

/* complex value j of src read as n_src int32 words zero-padded:
 * (src[2j], src[2j + 1]) */
static pe_cpx32 padded(const int32_t *src, int32_t n_src, int32_t j)
{
    pe_cpx32 c;
    c.r = 2 * j < n_src ? src[2 * j] : 0;
    c.i = 2 * j + 1 < n_src ? src[2 * j + 1] : 0;
    return c;
}

/* the complex FFT (forward or inverse, as the twiddles and `inverse` say)
 * of the ncfft values of src (n_src words, zero-padded) into out, kissfft's
 * order (fft_complex in pe_signal_fft.c: the same digit permutation, then
 * the stages from the innermost out) */
static void fft_complex32(int32_t *out, const int32_t *src, int32_t n_src, const int32_t *radices, int32_t n_stages,
                          int32_t ncfft, const int32_t *tw, int inverse)
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
        st(out, i, padded(src, n_src, j));
    }
    for (s = n_stages - 1; s >= 0; s--) {
        int32_t stride = 1, m, k;
        for (k = 0; k < s; k++) {
            stride *= radices[k];
        }
        m = ncfft / (stride * radices[s]);
        for (blk = 0; blk < stride; blk++) {
            int32_t *o = out + 2 * blk * radices[s] * m;
            if (radices[s] == 4) {
                butterfly4(o, stride, tw, m, inverse);
            } else {
                butterfly2(o, stride, tw, m);
            }
        }
    }
}

pe_status pe_signal_irfft_s32_get_buffer_size(int32_t fft_length, int32_t *size)
{
    if (size == NULL || fft_length < 4 || fft_length > (1 << 20) || (fft_length & 1) != 0) {
        return PE_ERR_ARG;
    }
    *size = fft_length * 4; /* ncfft complex int32 values: the fold */
    return PE_OK;
}

pe_status pe_signal_irfft_s32(const pe_context *ctx, int32_t fft_length, int32_t n_stages, const int32_t *radices,
                              const int32_t *twiddles, const int32_t *super_twiddles, const int32_t *input,
                              int32_t batches, int32_t *output)
{
    int32_t need, ncfft, prod = 1, s, b, k;
    int32_t *tmp;
    if (pe_signal_irfft_s32_get_buffer_size(fft_length, &need) != PE_OK || radices == NULL || twiddles == NULL ||
        super_twiddles == NULL || input == NULL || output == NULL || batches < 0 || n_stages < 1 ||
        n_stages > PE_SIGNAL_MAX_FFT_STAGES) {
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
    tmp = (int32_t *)ctx->buf;
    for (b = 0; b < batches; b++) {
        const int32_t *z = input + (int64_t)b * (ncfft + 1) * 2;
        int32_t *y = output + (int64_t)b * fft_length;
        pe_cpx32 t0;
        t0.r = add32(z[0], z[2 * ncfft]);
        t0.i = sub32(z[0], z[2 * ncfft]);
        st(tmp, 0, fixdiv(t0, 2));
        for (k = 1; k <= ncfft / 2; k++) {
            pe_cpx32 fk = fixdiv(ld(z, k), 2), fnkc = ld(z, ncfft - k), fek, fok, d;
            fnkc.i = sub32(0, fnkc.i);
            fnkc = fixdiv(fnkc, 2);
            fek = cadd(fk, fnkc);
            fok = cmul(csub(fk, fnkc), ld(super_twiddles, k - 1));
            st(tmp, k, cadd(fek, fok));
            d = csub(fek, fok); /* at k = ncfft / 2 this one is kept, as kissfft writes it last */
            d.i = sub32(0, d.i);
            st(tmp, ncfft - k, d);
        }
        fft_complex32(y, tmp, fft_length, radices, n_stages, ncfft, twiddles, 1);
    }
    return PE_OK;
}

pe_status pe_signal_rfft_s32_get_buffer_size(int32_t fft_length, int32_t *size)
{
    if (size == NULL || fft_length < 4 || fft_length > (1 << 20) || (fft_length & 1) != 0) {
        return PE_ERR_ARG;
    }
    *size = 0; /* computed in the output row, as the int16 transform */
    return PE_OK;
}

/* (a + b) >> 1 with a + b wrapped to int32 first, as kissfft's HALF_OF of an
 * int32 sum */
static int32_t half_of(int32_t sum)
{
    return sum >= 0 ? sum / 2 : -((-(sum + 1)) / 2) - 1;
}

pe_status pe_signal_rfft_s32(const pe_context *ctx, int32_t fft_length, int32_t input_length, int32_t n_stages,
                             const int32_t *radices, const int32_t *twiddles, const int32_t *super_twiddles,
                             const int32_t *input, int32_t batches, int32_t *output)
{
    int32_t need, ncfft, prod = 1, s, b, k;
    (void)ctx;
    if (pe_signal_rfft_s32_get_buffer_size(fft_length, &need) != PE_OK || radices == NULL || twiddles == NULL ||
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
        const uintptr_t i0 = (uintptr_t)input, i1 = i0 + (uintptr_t)batches * input_length * 4u;
        const uintptr_t o0 = (uintptr_t)output, o1 = o0 + (uintptr_t)batches * (ncfft + 1) * 8u;
        if (batches > 0 && i0 < o1 && o0 < i1) {
            return PE_ERR_ARG;
        }
    }
    for (b = 0; b < batches; b++) {
        const int32_t *x = input + (int64_t)b * input_length;
        int32_t *y = output + (int64_t)b * (ncfft + 1) * 2;
        pe_cpx32 dc;
        /* the complex transform of the (even, odd) sample pairs, in the output row */
        fft_complex32(y, x, input_length, radices, n_stages, ncfft, twiddles, 0);
        /* DC and Nyquist from the even / odd sums */
        dc = fixdiv(ld(y, 0), 2);
        y[0] = add32(dc.r, dc.i);
        y[1] = 0;
        y[2 * ncfft] = sub32(dc.r, dc.i);
        y[2 * ncfft + 1] = 0;
        /* the split: bins k and ncfft - k from the transform's k and ncfft - k,
         * both read before either is written */
        for (k = 1; k <= ncfft / 2; k++) {
            pe_cpx32 fpk = ld(y, k), fpnk = ld(y, ncfft - k), f1k, f2k, tw;
            fpnk.i = sub32(0, fpnk.i);
            fpk = fixdiv(fpk, 2);
            fpnk = fixdiv(fpnk, 2);
            f1k = cadd(fpk, fpnk);
            f2k = csub(fpk, fpnk);
            tw = cmul(f2k, ld(super_twiddles, k - 1));
            y[2 * k] = half_of(add32(f1k.r, tw.r));
            y[2 * k + 1] = half_of(add32(f1k.i, tw.i));
            y[2 * (ncfft - k)] = half_of(sub32(f1k.r, tw.r));
            y[2 * (ncfft - k) + 1] = half_of(sub32(tw.i, f1k.i));
        }
    }
    return PE_OK;
}
