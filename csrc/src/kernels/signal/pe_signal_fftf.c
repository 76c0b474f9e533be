/*
 * pe_signal_fftf.c - the signal library's float32 real FFT and its inverse
 * (pe_signal.h), in the order of float operations TFLM's float32 RFFT and
 * IRFFT use (kissfft built for float): no scaling in the butterflies, each
 * complex product as (a.r b.r - a.i b.i, a.r b.i + a.i b.r), every sum and
 * product rounded to float32 on its own (build with -ffp-contract=off: a
 * fused multiply-add would change bits). The forward split halves each bin
 * (a multiply by 0.5f); the inverse divides its samples by fft_length at the
 * end. Stage structure and digit permutation as the fixed-point transforms
 * (pe_signal_fft.c, pe_signal_fft32.c). The twiddles (float32 cos / sin of
 * kissfft's angles, rounded from double by the preparation) arrive as
 * parameter words holding float32 bit patterns, (re, im) pairs.
 */
#include "pyembed/pe_signal.h"

typedef struct {
    float r;
    float i;
} pe_cpxf;

static float f32_of_word(int32_t w)
{
    union {
        int32_t i;
        float f;
    } u;
    u.i = w;
    return u.f;
}

static pe_cpxf twf(const int32_t *tw, int32_t k)
{
    pe_cpxf c;
    c.r = f32_of_word(tw[2 * k]);
    c.i = f32_of_word(tw[2 * k + 1]);
    return c;
}

static pe_cpxf ldf(const float *z, int32_t k)
{
    pe_cpxf c;
    c.r = z[2 * k];
    c.i = z[2 * k + 1];
    return c;
}

static void stf(float *z, int32_t k, pe_cpxf c)
{
    z[2 * k] = c.r;
    z[2 * k + 1] = c.i;
}

static pe_cpxf cmulf(pe_cpxf a, pe_cpxf b)
{
    pe_cpxf m;
    m.r = a.r * b.r - a.i * b.i;
    m.i = a.r * b.i + a.i * b.r;
    return m;
}

static pe_cpxf caddf(pe_cpxf a, pe_cpxf b)
{
    pe_cpxf s;
    s.r = a.r + b.r;
    s.i = a.i + b.i;
    return s;
}

static pe_cpxf csubf(pe_cpxf a, pe_cpxf b)
{
    pe_cpxf s;
    s.r = a.r - b.r;
    s.i = a.i - b.i;
    return s;
}

static void butterfly2f(float *out, int32_t fstride, const int32_t *tw, int32_t m)
{
    int32_t k;
    for (k = 0; k < m; k++) {
        const pe_cpxf a = ldf(out, k);
        const pe_cpxf t = cmulf(ldf(out, k + m), twf(tw, k * fstride));
        stf(out, k + m, csubf(a, t));
        stf(out, k, caddf(a, t));
    }
}

/* outputs m and 3m: s5 -/+ i * s4 forward, s5 +/- i * s4 inverse */
static void butterfly4f(float *out, int32_t fstride, const int32_t *tw, int32_t m, int inverse)
{
    int32_t k;
    for (k = 0; k < m; k++) {
        pe_cpxf f0, s0, s1, s2, s3, s4, s5, r;
        f0 = ldf(out, k);
        s0 = cmulf(ldf(out, k + m), twf(tw, k * fstride));
        s1 = cmulf(ldf(out, k + 2 * m), twf(tw, 2 * k * fstride));
        s2 = cmulf(ldf(out, k + 3 * m), twf(tw, 3 * k * fstride));
        s5 = csubf(f0, s1);
        f0 = caddf(f0, s1);
        s3 = caddf(s0, s2);
        s4 = csubf(s0, s2);
        stf(out, k + 2 * m, csubf(f0, s3));
        stf(out, k, caddf(f0, s3));
        if (inverse) {
            r.r = s5.r - s4.i;
            r.i = s5.i + s4.r;
            stf(out, k + m, r);
            r.r = s5.r + s4.i;
            r.i = s5.i - s4.r;
        } else {
            r.r = s5.r + s4.i;
            r.i = s5.i - s4.r;
            stf(out, k + m, r);
            r.r = s5.r - s4.i;
            r.i = s5.i + s4.r;
        }
        stf(out, k + 3 * m, r);
    }
}

/* complex value j of src read as n_src floats zero-padded */
static pe_cpxf paddedf(const float *src, int32_t n_src, int32_t j)
{
    pe_cpxf c;
    c.r = 2 * j < n_src ? src[2 * j] : 0.0f;
    c.i = 2 * j + 1 < n_src ? src[2 * j + 1] : 0.0f;
    return c;
}

/* the complex FFT of src's ncfft values into out: kissfft's digit
 * permutation, then the stages from the innermost out (see fft_complex in
 * pe_signal_fft.c) */
static void fft_complexf(float *out, const float *src, int32_t n_src, const int32_t *radices, int32_t n_stages,
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
        stf(out, i, paddedf(src, n_src, j));
    }
    for (s = n_stages - 1; s >= 0; s--) {
        int32_t stride = 1, m, k;
        for (k = 0; k < s; k++) {
            stride *= radices[k];
        }
        m = ncfft / (stride * radices[s]);
        for (blk = 0; blk < stride; blk++) {
            float *o = out + 2 * blk * radices[s] * m;
            if (radices[s] == 4) {
                butterfly4f(o, stride, tw, m, inverse);
            } else {
                butterfly2f(o, stride, tw, m);
            }
        }
    }
}

/* the radices must be 2 or 4 with product ncfft */
static pe_status check_radices(int32_t ncfft, int32_t n_stages, const int32_t *radices)
{
    int32_t prod = 1, s;
    if (n_stages < 1 || n_stages > PE_SIGNAL_MAX_FFT_STAGES) {
        return PE_ERR_ARG;
    }
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

pe_status pe_signal_rfft_f32_get_buffer_size(int32_t fft_length, int32_t *size)
{
    if (size == NULL || fft_length < 4 || fft_length > (1 << 20) || (fft_length & 1) != 0) {
        return PE_ERR_ARG;
    }
    *size = 0; /* computed in the output row */
    return PE_OK;
}

pe_status pe_signal_rfft_f32(const pe_context *ctx, int32_t fft_length, int32_t input_length, int32_t n_stages,
                             const int32_t *radices, const int32_t *twiddles, const int32_t *super_twiddles,
                             const float *input, int32_t batches, float *output)
{
    int32_t need, ncfft, b, k;
    pe_status st;
    (void)ctx;
    if (pe_signal_rfft_f32_get_buffer_size(fft_length, &need) != PE_OK || radices == NULL || twiddles == NULL ||
        super_twiddles == NULL || input == NULL || output == NULL || batches < 0 || input_length < 0 ||
        input_length > fft_length) {
        return PE_ERR_ARG;
    }
    ncfft = fft_length / 2;
    st = check_radices(ncfft, n_stages, radices);
    if (st != PE_OK) {
        return st;
    }
    {
        const uintptr_t i0 = (uintptr_t)input, i1 = i0 + (uintptr_t)batches * input_length * 4u;
        const uintptr_t o0 = (uintptr_t)output, o1 = o0 + (uintptr_t)batches * (ncfft + 1) * 8u;
        if (batches > 0 && i0 < o1 && o0 < i1) {
            return PE_ERR_ARG;
        }
    }
    for (b = 0; b < batches; b++) {
        const float *x = input + (int64_t)b * input_length;
        float *y = output + (int64_t)b * (ncfft + 1) * 2;
        pe_cpxf dc;
        fft_complexf(y, x, input_length, radices, n_stages, ncfft, twiddles, 0);
        dc = ldf(y, 0);
        y[0] = dc.r + dc.i;
        y[1] = 0.0f;
        y[2 * ncfft] = dc.r - dc.i;
        y[2 * ncfft + 1] = 0.0f;
        for (k = 1; k <= ncfft / 2; k++) {
            pe_cpxf fpk = ldf(y, k), fpnk = ldf(y, ncfft - k), f1k, f2k, tw;
            fpnk.i = -fpnk.i;
            f1k = caddf(fpk, fpnk);
            f2k = csubf(fpk, fpnk);
            tw = cmulf(f2k, twf(super_twiddles, k - 1));
            y[2 * k] = (f1k.r + tw.r) * 0.5f;
            y[2 * k + 1] = (f1k.i + tw.i) * 0.5f;
            y[2 * (ncfft - k)] = (f1k.r - tw.r) * 0.5f;
            y[2 * (ncfft - k) + 1] = (tw.i - f1k.i) * 0.5f;
        }
    }
    return PE_OK;
}

pe_status pe_signal_irfft_f32_get_buffer_size(int32_t fft_length, int32_t *size)
{
    if (size == NULL || fft_length < 4 || fft_length > (1 << 20) || (fft_length & 1) != 0) {
        return PE_ERR_ARG;
    }
    *size = fft_length * 4; /* ncfft complex float32 values: the fold */
    return PE_OK;
}

pe_status pe_signal_irfft_f32(const pe_context *ctx, int32_t fft_length, int32_t n_stages, const int32_t *radices,
                              const int32_t *twiddles, const int32_t *super_twiddles, const float *input,
                              int32_t batches, float *output)
{
    int32_t need, ncfft, b, k;
    pe_status st;
    float *tmp, scale;
    if (pe_signal_irfft_f32_get_buffer_size(fft_length, &need) != PE_OK || radices == NULL || twiddles == NULL ||
        super_twiddles == NULL || input == NULL || output == NULL || batches < 0) {
        return PE_ERR_ARG;
    }
    ncfft = fft_length / 2;
    st = check_radices(ncfft, n_stages, radices);
    if (st != PE_OK) {
        return st;
    }
    if (ctx == NULL || ctx->buf == NULL || ctx->size < need) {
        return PE_ERR_SCRATCH;
    }
    tmp = (float *)ctx->buf;
    scale = (float)fft_length;
    for (b = 0; b < batches; b++) {
        const float *z = input + (int64_t)b * (ncfft + 1) * 2;
        float *y = output + (int64_t)b * fft_length;
        tmp[0] = z[0] + z[2 * ncfft];
        tmp[1] = z[0] - z[2 * ncfft];
        for (k = 1; k <= ncfft / 2; k++) {
            pe_cpxf fk = ldf(z, k), fnkc = ldf(z, ncfft - k), fek, fok, d;
            fnkc.i = -fnkc.i;
            fek = caddf(fk, fnkc);
            fok = cmulf(csubf(fk, fnkc), twf(super_twiddles, k - 1));
            stf(tmp, k, caddf(fek, fok));
            d = csubf(fek, fok); /* at k = ncfft / 2 this one is kept, written last */
            d.i = -d.i;
            stf(tmp, ncfft - k, d);
        }
        fft_complexf(y, tmp, fft_length, radices, n_stages, ncfft, twiddles, 1);
        for (k = 0; k < fft_length; k++) {
            y[k] = y[k] / scale;
        }
    }
    return PE_OK;
}
