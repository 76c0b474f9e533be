/*
 * pe_conv_gather.c - gather-form convolution and depthwise convolution
 * without scratch (pe_conv_gather.h).
 *
 * For each output pixel the kernel window is clipped to the input once
 * (ky, kx ranges whose taps land inside the image, so padding is skipped
 * without a per-tap test), then:
 *   conv       four output channels per pass, their accumulators in
 *              registers; each offset input value is loaded once for the
 *              four multiplies (OHWI weights are contiguous along the input
 *              channels the dot product runs over);
 *   depthwise  blocks of PE_GATHER_DW_BLOCK output channels, accumulators in
 *              a small stack array, input and filter read contiguously along
 *              the channels.
 * Accumulators start at the bias; requantization, output offset and clamp
 * are those of the reverse kernels (pe_conv_rev.c), so the results are equal.
 */
#include <stdint.h>

#include "pyembed/pe_conv.h"
#include "pyembed/pe_conv_gather.h"
#include "pyembed/pe_fixed.h"

#define PE_GATHER_DW_BLOCK 16

/* The taps k in [0, k_n) with 0 <= origin + k * dil < size: [*lo, *hi]
 * (empty when *lo > *hi). origin may be negative (padding). */
static void tap_range(int32_t origin, int32_t dil, int32_t k_n, int32_t size, int32_t *lo,
                      int32_t *hi)
{
    int32_t a = 0;
    int32_t b = k_n - 1;
    if (origin < 0) {
        const int32_t need = -origin; /* smallest k with k * dil >= need */
        a = need / dil + (need % dil != 0 ? 1 : 0);
    }
    if (origin > size - 1) {
        b = -1;
    } else {
        const int32_t room = (size - 1 - origin) / dil;
        if (room < b) {
            b = room;
        }
    }
    *lo = a;
    *hi = b;
}

static inline int8_t finish(int32_t acc, int32_t m, int32_t sh, pe_rounding mode, int32_t lo,
                            int32_t hi, int32_t off)
{
    const int32_t v = pe_fx_requant_mode(acc, m, sh, mode);
    return (int8_t)((v < lo ? lo : (v > hi ? hi : v)) + off);
}

static pe_status check_all(const pe_conv_params *p, const pe_per_channel_quant *q,
                           const pe_dims *in, const int8_t *input, const pe_dims *f,
                           const int8_t *filter, const int32_t *bias, const pe_dims *out,
                           const int8_t *output, int32_t depthwise)
{
    pe_status s = pe_conv_check_geometry(p, in, f, out, depthwise);
    if (s != PE_OK) {
        return s;
    }
    if (input == NULL || filter == NULL || output == NULL) {
        return PE_ERR_ARG;
    }
    return pe_conv_check_quant(q, bias, out->c, (int64_t)f->h * f->w * (depthwise ? 1 : f->c));
}

static void conv_pixel(const pe_conv_params *p, const pe_per_channel_quant *q,
                       const pe_dims *in, const int8_t *img, const pe_dims *f,
                       const int8_t *filter, const int32_t *bias, const pe_dims *out,
                       int32_t iy0, int32_t ix0, int32_t ky_lo, int32_t ky_hi, int32_t kx_lo,
                       int32_t kx_hi, int8_t *dst, uint64_t *reads)
{
    const int32_t in_w = in->w, in_c = in->c, kw = f->w, ic_g = f->c;
    const int32_t groups = p->groups, oc_g = out->c / groups;
    const int32_t d_h = p->dilation.h, d_w = p->dilation.w, offset = p->input_offset;
    const int32_t lo = p->activation.min - p->output_offset;
    const int32_t hi = p->activation.max - p->output_offset;
    const size_t ws = (size_t)f->h * (size_t)kw * (size_t)ic_g;
    int32_t g, oc, ky, kx, i;
    for (g = 0; g < groups; g++) {
        const int32_t oc0 = g * oc_g;
        const int32_t ic0 = g * ic_g;
        for (oc = 0; oc < oc_g; oc += 4) {
            const int32_t nb = oc_g - oc < 4 ? oc_g - oc : 4;
            const int32_t o = oc0 + oc;
            int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
            for (ky = ky_lo; ky <= ky_hi; ky++) {
                const int32_t iy = iy0 + ky * d_h;
                for (kx = kx_lo; kx <= kx_hi; kx++) {
                    const int32_t ix = ix0 + kx * d_w;
                    const int8_t *restrict x =
                        img + ((size_t)iy * (size_t)in_w + (size_t)ix) * (size_t)in_c + ic0;
                    const int8_t *restrict w0 =
                        filter + (size_t)o * ws + ((size_t)ky * (size_t)kw + (size_t)kx) * ic_g;
                    *reads += (uint64_t)ic_g;
                    if (nb == 4) {
                        const int8_t *restrict w1 = w0 + ws;
                        const int8_t *restrict w2 = w0 + 2 * ws;
                        const int8_t *restrict w3 = w0 + 3 * ws;
                        for (i = 0; i + 4 <= ic_g; i += 4) {
                            const int32_t x0 = (int32_t)x[i] + offset;
                            const int32_t x1 = (int32_t)x[i + 1] + offset;
                            const int32_t x2 = (int32_t)x[i + 2] + offset;
                            const int32_t x3 = (int32_t)x[i + 3] + offset;
                            a0 += w0[i] * x0 + w0[i + 1] * x1 + w0[i + 2] * x2 + w0[i + 3] * x3;
                            a1 += w1[i] * x0 + w1[i + 1] * x1 + w1[i + 2] * x2 + w1[i + 3] * x3;
                            a2 += w2[i] * x0 + w2[i + 1] * x1 + w2[i + 2] * x2 + w2[i + 3] * x3;
                            a3 += w3[i] * x0 + w3[i + 1] * x1 + w3[i + 2] * x2 + w3[i + 3] * x3;
                        }
                        for (; i < ic_g; i++) {
                            const int32_t xv = (int32_t)x[i] + offset;
                            a0 += w0[i] * xv;
                            a1 += w1[i] * xv;
                            a2 += w2[i] * xv;
                            a3 += w3[i] * xv;
                        }
                    } else {
                        for (i = 0; i < ic_g; i++) {
                            const int32_t xv = (int32_t)x[i] + offset;
                            a0 += w0[i] * xv;
                            if (nb > 1) {
                                a1 += w0[ws + (size_t)i] * xv;
                            }
                            if (nb > 2) {
                                a2 += w0[2 * ws + (size_t)i] * xv;
                            }
                        }
                    }
                }
            }
            {
                int32_t acc[4];
                int32_t j;
                acc[0] = a0;
                acc[1] = a1;
                acc[2] = a2;
                acc[3] = a3;
                for (j = 0; j < nb; j++) {
                    const int32_t b = bias != NULL ? bias[o + j] : 0;
                    dst[o + j] = finish(acc[j] + b, q->multiplier[o + j], q->shift[o + j],
                                        p->rounding, lo, hi, p->output_offset);
                }
            }
        }
    }
}

static void depthwise_pixel(const pe_conv_params *p, const pe_per_channel_quant *q,
                            const pe_dims *in, const int8_t *img, const pe_dims *f,
                            const int8_t *filter, const int32_t *bias, const pe_dims *out,
                            int32_t iy0, int32_t ix0, int32_t ky_lo, int32_t ky_hi,
                            int32_t kx_lo, int32_t kx_hi, int8_t *dst, uint64_t *reads)
{
    const int32_t in_w = in->w, in_c = in->c, kw = f->w, out_c = out->c;
    const int32_t mult = p->ch_mult;
    const int32_t d_h = p->dilation.h, d_w = p->dilation.w, offset = p->input_offset;
    const int32_t lo = p->activation.min - p->output_offset;
    const int32_t hi = p->activation.max - p->output_offset;
    int32_t acc[PE_GATHER_DW_BLOCK];
    int32_t o0, j, ky, kx;
    for (o0 = 0; o0 < out_c; o0 += PE_GATHER_DW_BLOCK) {
        const int32_t nb = out_c - o0 < PE_GATHER_DW_BLOCK ? out_c - o0 : PE_GATHER_DW_BLOCK;
        for (j = 0; j < nb; j++) {
            acc[j] = bias != NULL ? bias[o0 + j] : 0;
        }
        for (ky = ky_lo; ky <= ky_hi; ky++) {
            const int32_t iy = iy0 + ky * d_h;
            for (kx = kx_lo; kx <= kx_hi; kx++) {
                const int32_t ix = ix0 + kx * d_w;
                const int8_t *restrict x =
                    img + ((size_t)iy * (size_t)in_w + (size_t)ix) * (size_t)in_c;
                const int8_t *restrict w =
                    filter + ((size_t)ky * (size_t)kw + (size_t)kx) * (size_t)out_c + o0;
                *reads += (uint64_t)nb;
                if (mult == 1) {
                    const int8_t *restrict xc = x + o0;
                    for (j = 0; j < nb; j++) {
                        acc[j] += w[j] * ((int32_t)xc[j] + offset);
                    }
                } else {
                    int32_t c = o0 / mult, m = o0 % mult;
                    for (j = 0; j < nb; j++) {
                        acc[j] += w[j] * ((int32_t)x[c] + offset);
                        if (++m == mult) {
                            m = 0;
                            c++;
                        }
                    }
                }
            }
        }
        for (j = 0; j < nb; j++) {
            const int32_t o = o0 + j;
            dst[o] = finish(acc[j], q->multiplier[o], q->shift[o], p->rounding, lo, hi,
                            p->output_offset);
        }
    }
}

static pe_status run(const pe_context *ctx, const pe_conv_params *p,
                     const pe_per_channel_quant *q, const pe_dims *in, const int8_t *input,
                     const pe_dims *f, const int8_t *filter, const int32_t *bias,
                     const pe_dims *out, int8_t *output, int32_t depthwise)
{
    int32_t n, oy, ox;
    uint64_t macs = 0, reads = 0;
    size_t in_img, out_img;
    const pe_status s = check_all(p, q, in, input, f, filter, bias, out, output, depthwise);
    if (s != PE_OK) {
        return s;
    }
    in_img = (size_t)in->h * (size_t)in->w * (size_t)in->c;
    out_img = (size_t)out->h * (size_t)out->w * (size_t)out->c;
    for (n = 0; n < in->n; n++) {
        const int8_t *img = input + (size_t)n * in_img;
        int8_t *dst = output + (size_t)n * out_img;
        for (oy = 0; oy < out->h; oy++) {
            const int32_t iy0 = oy * p->stride.h - p->padding.top;
            int32_t ky_lo, ky_hi;
            tap_range(iy0, p->dilation.h, f->h, in->h, &ky_lo, &ky_hi);
            for (ox = 0; ox < out->w; ox++) {
                const int32_t ix0 = ox * p->stride.w - p->padding.left;
                int32_t kx_lo, kx_hi, y_lo = ky_lo, y_hi = ky_hi;
                uint64_t taps = 0;
                tap_range(ix0, p->dilation.w, f->w, in->w, &kx_lo, &kx_hi);
                if (y_lo > y_hi || kx_lo > kx_hi) {
                    y_lo = 1; /* window wholly in padding: bias only */
                    y_hi = 0;
                } else {
                    taps = (uint64_t)(y_hi - y_lo + 1) * (uint64_t)(kx_hi - kx_lo + 1);
                }
                if (depthwise) {
                    depthwise_pixel(p, q, in, img, f, filter, bias, out, iy0, ix0, y_lo, y_hi,
                                    kx_lo, kx_hi, dst, &reads);
                    macs += taps * (uint64_t)out->c;
                } else {
                    conv_pixel(p, q, in, img, f, filter, bias, out, iy0, ix0, y_lo, y_hi, kx_lo,
                               kx_hi, dst, &reads);
                    macs += taps * (uint64_t)out->c * (uint64_t)f->c;
                }
                dst += out->c;
            }
        }
    }
    if (ctx != NULL && ctx->stats != NULL) {
        ctx->stats->macs += macs;
        ctx->stats->input_reads += reads;
    }
    return PE_OK;
}

static pe_status size_query(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                            const pe_dims *out, int32_t depthwise, int32_t *size)
{
    const pe_status s = pe_conv_check_geometry(p, in, f, out, depthwise);
    if (s != PE_OK) {
        return s;
    }
    if (size == NULL) {
        return PE_ERR_ARG;
    }
    *size = 0;
    return PE_OK;
}

pe_status pe_conv2d_gather_s8_get_buffer_size(const pe_conv_params *params,
                                              const pe_dims *input_dims,
                                              const pe_dims *filter_dims,
                                              const pe_dims *output_dims, int32_t *size)
{
    return size_query(params, input_dims, filter_dims, output_dims, 0, size);
}

pe_status pe_depthwise_conv2d_gather_s8_get_buffer_size(const pe_conv_params *params,
                                                        const pe_dims *input_dims,
                                                        const pe_dims *filter_dims,
                                                        const pe_dims *output_dims,
                                                        int32_t *size)
{
    return size_query(params, input_dims, filter_dims, output_dims, 1, size);
}

pe_status pe_conv2d_gather_s8(const pe_context *ctx, const pe_conv_params *params,
                              const pe_per_channel_quant *quant, const pe_dims *input_dims,
                              const int8_t *input, const pe_dims *filter_dims,
                              const int8_t *filter, const int32_t *bias,
                              const pe_dims *output_dims, int8_t *output)
{
    return run(ctx, params, quant, input_dims, input, filter_dims, filter, bias, output_dims,
               output, 0);
}

pe_status pe_depthwise_conv2d_gather_s8(const pe_context *ctx, const pe_conv_params *params,
                                        const pe_per_channel_quant *quant,
                                        const pe_dims *input_dims, const int8_t *input,
                                        const pe_dims *filter_dims, const int8_t *filter,
                                        const int32_t *bias, const pe_dims *output_dims,
                                        int8_t *output)
{
    return run(ctx, params, quant, input_dims, input, filter_dims, filter, bias, output_dims,
               output, 1);
}
