/*
 * pe_tconv.c - int8 transpose convolution in gather form (pe_tconv.h).
 *
 * For output row oy the kernel rows that receive an input row are
 * ky = (oy + pad.top) mod stride.h, then every stride.h-th, with
 * iy = (oy + pad.top - ky) / stride.h inside [0, in_h); columns likewise.
 * Four output channels per pass keep their accumulators in registers and
 * share each offset input value.
 */
#include <stdint.h>

#include "pyembed/pe_conv.h"
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_tconv.h"

static pe_status check_geometry(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                                const pe_dims *out)
{
    if (p == NULL || in == NULL || f == NULL || out == NULL) {
        return PE_ERR_ARG;
    }
    if (in->n < 1 || in->h < 1 || in->w < 1 || in->c < 1 || out->n != in->n || out->h < 1 ||
        out->w < 1 || out->c < 1 || f->n != out->c || f->h < 1 || f->w < 1 || f->c != in->c) {
        return PE_ERR_ARG;
    }
    if (p->stride.h < 1 || p->stride.w < 1 || p->padding.top < 0 || p->padding.left < 0) {
        return PE_ERR_ARG;
    }
    if (p->input_offset < -127 || p->input_offset > 128 || p->output_offset < -128 ||
        p->output_offset > 127 || p->activation.min < -128 || p->activation.max > 127 ||
        p->activation.min > p->activation.max) {
        return PE_ERR_ARG;
    }
    if (p->rounding != PE_ROUND_DOUBLE && p->rounding != PE_ROUND_SINGLE) {
        return PE_ERR_ARG;
    }
    /* coordinates stay inside int32 */
    if ((int64_t)out->h + p->padding.top + f->h > PE_INT32_MAX ||
        (int64_t)out->w + p->padding.left + f->w > PE_INT32_MAX) {
        return PE_ERR_OVERFLOW;
    }
    return PE_OK;
}

pe_status pe_transpose_conv_s8_get_buffer_size(const pe_conv_params *params,
                                               const pe_dims *input_dims,
                                               const pe_dims *filter_dims,
                                               const pe_dims *output_dims, int32_t *size)
{
    const pe_status s = check_geometry(params, input_dims, filter_dims, output_dims);
    if (s != PE_OK) {
        return s;
    }
    if (size == NULL) {
        return PE_ERR_ARG;
    }
    *size = 0;
    return PE_OK;
}

/* kernel taps k = first, first + stride, ... < k_n whose source index
 * (pos - k) / stride lies in [0, size); pos = out index + pad >= 0.
 * Returns the first tap and sets *last (none when first > *last). */
static int32_t taps_of(int32_t pos, int32_t stride, int32_t k_n, int32_t size, int32_t *last)
{
    int32_t first = pos % stride;
    int32_t hi = k_n - 1;
    /* source index (pos - k) / stride <= size - 1  <=>  k >= pos - (size-1)*stride */
    const int64_t min_k = (int64_t)pos - (int64_t)(size - 1) * stride;
    if (min_k > first) {
        const int64_t steps = (min_k - first + stride - 1) / stride;
        first += (int32_t)(steps * stride > k_n ? k_n : steps * stride);
    }
    /* source index >= 0  <=>  k <= pos */
    if (pos < hi) {
        hi = pos;
    }
    *last = hi;
    return first;
}

static inline int8_t finish(int32_t acc, int32_t m, int32_t sh, const pe_conv_params *p)
{
    const int32_t v = pe_fx_requant_mode(acc, m, sh, p->rounding);
    const int32_t lo = p->activation.min - p->output_offset;
    const int32_t hi = p->activation.max - p->output_offset;
    return (int8_t)((v < lo ? lo : (v > hi ? hi : v)) + p->output_offset);
}

pe_status pe_transpose_conv_s8(const pe_context *ctx, const pe_conv_params *p,
                               const pe_per_channel_quant *q, const pe_dims *in,
                               const int8_t *input, const pe_dims *f, const int8_t *filter,
                               const int32_t *bias, const pe_dims *out, int8_t *output)
{
    int32_t n, oy, ox, oc, ky, kx, i;
    uint64_t macs = 0;
    const int32_t in_c = in != NULL ? in->c : 0;
    size_t ws;
    pe_status s = check_geometry(p, in, f, out);
    if (s != PE_OK) {
        return s;
    }
    if (input == NULL || filter == NULL || output == NULL) {
        return PE_ERR_ARG;
    }
    s = pe_conv_check_quant(q, bias, out->c, (int64_t)f->h * f->w * in_c);
    if (s != PE_OK) {
        return s;
    }
    ws = (size_t)f->h * (size_t)f->w * (size_t)in_c;
    for (n = 0; n < in->n; n++) {
        const int8_t *img = input + (size_t)n * (size_t)in->h * (size_t)in->w * (size_t)in_c;
        for (oy = 0; oy < out->h; oy++) {
            const int32_t py = oy + p->padding.top;
            int32_t ky_last;
            const int32_t ky_first = taps_of(py, p->stride.h, f->h, in->h, &ky_last);
            for (ox = 0; ox < out->w; ox++) {
                const int32_t px = ox + p->padding.left;
                int32_t kx_last;
                const int32_t kx_first = taps_of(px, p->stride.w, f->w, in->w, &kx_last);
                int8_t *dst = output + (((size_t)n * (size_t)out->h + (size_t)oy) * (size_t)out->w +
                                        (size_t)ox) * (size_t)out->c;
                for (oc = 0; oc < out->c; oc += 4) {
                    const int32_t nb = out->c - oc < 4 ? out->c - oc : 4;
                    int32_t acc[4] = {0, 0, 0, 0};
                    int32_t j;
                    for (ky = ky_first; ky <= ky_last; ky += p->stride.h) {
                        const int32_t iy = (py - ky) / p->stride.h;
                        for (kx = kx_first; kx <= kx_last; kx += p->stride.w) {
                            const int32_t ix = (px - kx) / p->stride.w;
                            const int8_t *restrict x =
                                img + ((size_t)iy * (size_t)in->w + (size_t)ix) * (size_t)in_c;
                            const int8_t *restrict w0 = filter + (size_t)oc * ws +
                                                        ((size_t)ky * (size_t)f->w + (size_t)kx) *
                                                            (size_t)in_c;
                            if (nb == 4) {
                                int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
                                for (i = 0; i < in_c; i++) {
                                    const int32_t xv = (int32_t)x[i] + p->input_offset;
                                    a0 += w0[i] * xv;
                                    a1 += w0[ws + (size_t)i] * xv;
                                    a2 += w0[2 * ws + (size_t)i] * xv;
                                    a3 += w0[3 * ws + (size_t)i] * xv;
                                }
                                acc[0] += a0;
                                acc[1] += a1;
                                acc[2] += a2;
                                acc[3] += a3;
                            } else {
                                for (j = 0; j < nb; j++) {
                                    const int8_t *w = w0 + (size_t)j * ws;
                                    int32_t a = 0;
                                    for (i = 0; i < in_c; i++) {
                                        a += w[i] * ((int32_t)x[i] + p->input_offset);
                                    }
                                    acc[j] += a;
                                }
                            }
                            macs += (uint64_t)nb * (uint64_t)in_c;
                        }
                    }
                    for (j = 0; j < nb; j++) {
                        const int32_t o = oc + j;
                        const int32_t b = bias != NULL ? bias[o] : 0;
                        dst[o] = finish(acc[j] + b, q->multiplier[o], q->shift[o], p);
                    }
                }
            }
        }
    }
    if (ctx != NULL && ctx->stats != NULL) {
        ctx->stats->macs += macs;
        ctx->stats->input_reads += macs;
    }
    return PE_OK;
}
