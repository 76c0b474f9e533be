/*
 * pe_signal_fft32.c - the signal library's int32 inverse real FFT
 * (pe_signal.h), in the 32-bit fixed-point arithmetic TFLM's int32 IRFFT uses
 * (kissfft with FIXED_POINT=32): Q31 twiddles, products formed in 64 bits
 * and rounded half up by 31 bits, every butterfly input divided by its radix
 * (Q31 multiply by 2147483647 / radix), sums narrowed to int32 with
 * wrap-around (done here in unsigned arithmetic so that the C is defined).
 * The same stage structure as the int16 transforms (pe_signal_fft.c,
 * pe_signal_ifft.c).
 * Twiddles arrive as parameter words (re, im pairs); nothing here uses
 * floating point.
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

/* the inverse butterfly: s5 +/- i * s4 */
static void butterfly4(int32_t *out, int32_t fstride, const int32_t *tw, int32_t m)
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
        r.r = sub32(s5.r, s4.i);
        r.i = add32(s5.i, s4.r);
        st(out, k + m, r);
        r.r = add32(s5.r, s4.i);
        r.i = sub32(s5.i, s4.r);
        st(out, k + 3 * m, r);
    }
}

/* the inverse complex FFT of src (ncfft values) into out, kissfft's order
 * (fft_complex in pe_signal_fft.c: the same digit permutation, then the
 * stages from the innermost out) */
static void ifft_complex(int32_t *out, const int32_t *src, const int32_t *radices, int32_t n_stages, int32_t ncfft,
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
            int32_t *o = out + 2 * blk * radices[s] * m;
            if (radices[s] == 4) {
                butterfly4(o, stride, tw, m);
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
        ifft_complex(y, tmp, radices, n_stages, ncfft, twiddles);
    }
    return PE_OK;
}
