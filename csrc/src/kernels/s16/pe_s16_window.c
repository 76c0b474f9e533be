/*
 * pe_s16_window.c - int16 DEPTHWISE_CONV_2D (int8 filter), AVERAGE_POOL_2D
 * and MAX_POOL_2D (pe_s16.h).
 */
#include <stdint.h>

#include "pyembed/pe_fixed.h"
#include "pyembed/pe_s16.h"

#define PE_S16W_ACC_LIMIT ((int64_t)1 << 47)

static int64_t bias_at(const int32_t *w)
{
    return (int64_t)(((uint64_t)(uint32_t)w[1] << 32) | (uint64_t)(uint32_t)w[0]);
}

/* The per-channel requantization of the int16 x int8 window kernels: every
 * multiplier >= 0 and shift in [-31, 7] (else PE_ERR_ARG), every int64 bias
 * (two words each, optional) inside the accumulator's range (else
 * PE_ERR_UNSUPPORTED); the largest bias magnitude into *max_bias. */
static pe_status check_channels(const pe_per_channel_quant *q, const int32_t *bias, int32_t channels,
                                int64_t *max_bias)
{
    int32_t oc;
    *max_bias = 0;
    for (oc = 0; oc < channels; oc++) {
        if (q->multiplier[oc] < 0 || q->shift[oc] < -31 || q->shift[oc] > 7) {
            return PE_ERR_ARG;
        }
        if (bias != NULL) {
            const int64_t b = bias_at(bias + 2 * oc);
            if (b <= -PE_S16W_ACC_LIMIT || b >= PE_S16W_ACC_LIMIT) {
                return PE_ERR_UNSUPPORTED;
            }
            if ((b < 0 ? -b : b) > *max_bias) {
                *max_bias = b < 0 ? -b : b;
            }
        }
    }
    return PE_OK;
}

static int dims_ok(const pe_dims *d)
{
    return d != NULL && d->n > 0 && d->h > 0 && d->w > 0 && d->c > 0 &&
           (int64_t)d->n * d->h * d->w * d->c <= (int64_t)PE_INT32_MAX;
}

static int act_ok(int32_t lo, int32_t hi)
{
    return lo >= -32768 && hi <= 32767 && lo <= hi;
}

static int32_t clamp(int32_t v, int32_t lo, int32_t hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

pe_status pe_depthwise_s16x8(const pe_context *ctx, const pe_dw_s16_params *p,
                             const pe_per_channel_quant *q, const pe_dims *in, const int16_t *input,
                             const pe_dims *f, const int8_t *filter, const int32_t *bias,
                             const pe_dims *out, int16_t *output)
{
    int32_t n, oy, ox, ic, m, ky, kx, oc;
    int64_t max_bias = 0;
    uint64_t macs = 0;
    pe_status st;
    if (p == NULL || q == NULL || q->multiplier == NULL || q->shift == NULL || input == NULL ||
        filter == NULL || output == NULL || !dims_ok(in) || !dims_ok(f) || !dims_ok(out) ||
        p->stride_h < 1 || p->stride_w < 1 || p->dilation_h < 1 || p->dilation_w < 1 ||
        p->depth_multiplier < 1 || p->pad_top < 0 || p->pad_left < 0 || !act_ok(p->act_min, p->act_max) ||
        f->n != 1 || out->n != in->n || (int64_t)in->c * p->depth_multiplier != out->c || f->c != out->c) {
        return PE_ERR_ARG;
    }
    if ((int64_t)(f->h - 1) * p->dilation_h + (int64_t)(out->h - 1) * p->stride_h > (int64_t)PE_INT32_MAX / 2 ||
        (int64_t)(f->w - 1) * p->dilation_w + (int64_t)(out->w - 1) * p->stride_w > (int64_t)PE_INT32_MAX / 2) {
        return PE_ERR_OVERFLOW;
    }
    st = check_channels(q, bias, out->c, &max_bias);
    if (st != PE_OK) {
        return st;
    }
    if ((int64_t)f->h * f->w * 128 * 32768 + max_bias >= PE_S16W_ACC_LIMIT) {
        return PE_ERR_UNSUPPORTED;
    }
    for (n = 0; n < in->n; n++) {
        for (oy = 0; oy < out->h; oy++) {
            for (ox = 0; ox < out->w; ox++) {
                int16_t *dst = output + (((size_t)n * (size_t)out->h + (size_t)oy) * (size_t)out->w +
                                         (size_t)ox) * (size_t)out->c;
                for (ic = 0; ic < in->c; ic++) {
                    for (m = 0; m < p->depth_multiplier; m++) {
                        int64_t acc = 0;
                        oc = ic * p->depth_multiplier + m;
                        for (ky = 0; ky < f->h; ky++) {
                            const int32_t iy = oy * p->stride_h - p->pad_top + ky * p->dilation_h;
                            if (iy < 0 || iy >= in->h) {
                                continue;
                            }
                            for (kx = 0; kx < f->w; kx++) {
                                const int32_t ix = ox * p->stride_w - p->pad_left + kx * p->dilation_w;
                                if (ix < 0 || ix >= in->w) {
                                    continue;
                                }
                                acc += (int64_t)filter[((size_t)ky * (size_t)f->w + (size_t)kx) * (size_t)f->c +
                                                       (size_t)oc] *
                                       (int64_t)input[(((size_t)n * (size_t)in->h + (size_t)iy) * (size_t)in->w +
                                                       (size_t)ix) * (size_t)in->c + (size_t)ic];
                                macs++;
                            }
                        }
                        if (bias != NULL) {
                            acc += bias_at(bias + 2 * oc);
                        }
                        dst[oc] = (int16_t)clamp(pe_fx_requant64(acc, q->multiplier[oc], q->shift[oc]),
                                                 p->act_min, p->act_max);
                    }
                }
            }
        }
    }
    if (ctx != NULL && ctx->stats != NULL) {
        ctx->stats->macs += macs;
    }
    return PE_OK;
}

static pe_status pool_check(const pe_pool_s16_params *p, const pe_dims *in, const int16_t *input,
                            const pe_dims *out, const int16_t *output)
{
    if (p == NULL || input == NULL || output == NULL || !dims_ok(in) || !dims_ok(out) || p->kh < 1 ||
        p->kw < 1 || (int64_t)p->kh * p->kw > 65536 || p->stride_h < 1 || p->stride_w < 1 || p->pad_top < 0 ||
        p->pad_left < 0 || !act_ok(p->act_min, p->act_max) || in->n != out->n || in->c != out->c) {
        return PE_ERR_ARG;
    }
    if ((int64_t)(out->h - 1) * p->stride_h + p->kh > (int64_t)PE_INT32_MAX / 2 ||
        (int64_t)(out->w - 1) * p->stride_w + p->kw > (int64_t)PE_INT32_MAX / 2) {
        return PE_ERR_OVERFLOW;
    }
    return PE_OK;
}

/* One pooling; average 1 or max 0. */
static pe_status pool_s16(const pe_context *ctx, const pe_pool_s16_params *p, const pe_dims *in,
                          const int16_t *input, const pe_dims *out, int16_t *output, int average)
{
    int32_t n, oy, ox, c, ky, kx;
    uint64_t taps = 0;
    const pe_status s = pool_check(p, in, input, out, output);
    if (s != PE_OK) {
        return s;
    }
    for (n = 0; n < out->n; n++) {
        for (oy = 0; oy < out->h; oy++) {
            const int32_t y0 = oy * p->stride_h - p->pad_top;
            const int32_t ky0 = y0 < 0 ? -y0 : 0;
            const int32_t ky1 = p->kh < in->h - y0 ? p->kh : in->h - y0;
            for (ox = 0; ox < out->w; ox++) {
                const int32_t x0 = ox * p->stride_w - p->pad_left;
                const int32_t kx0 = x0 < 0 ? -x0 : 0;
                const int32_t kx1 = p->kw < in->w - x0 ? p->kw : in->w - x0;
                int16_t *dst = output + (((size_t)n * (size_t)out->h + (size_t)oy) * (size_t)out->w +
                                         (size_t)ox) * (size_t)out->c;
                if (ky0 >= ky1 || kx0 >= kx1) {
                    return PE_ERR_ARG;   /* no tap inside the input */
                }
                for (c = 0; c < out->c; c++) {
                    int32_t acc = average ? 0 : -32768, count = 0;
                    for (ky = ky0; ky < ky1; ky++) {
                        for (kx = kx0; kx < kx1; kx++) {
                            const int32_t v = input[(((size_t)n * (size_t)in->h + (size_t)(y0 + ky)) *
                                                     (size_t)in->w + (size_t)(x0 + kx)) * (size_t)in->c + (size_t)c];
                            if (average) {
                                acc += v;
                            } else if (v > acc) {
                                acc = v;
                            }
                            count++;
                        }
                    }
                    if (average) {
                        acc = acc > 0 ? (acc + count / 2) / count : (acc - count / 2) / count;
                    }
                    dst[c] = (int16_t)clamp(acc, p->act_min, p->act_max);
                    taps += (uint64_t)count;
                }
            }
        }
    }
    if (ctx != NULL && ctx->stats != NULL) {
        ctx->stats->macs += taps;
    }
    return PE_OK;
}

pe_status pe_avgpool_s16(const pe_context *ctx, const pe_pool_s16_params *p, const pe_dims *in,
                         const int16_t *input, const pe_dims *out, int16_t *output)
{
    return pool_s16(ctx, p, in, input, out, output, 1);
}

pe_status pe_maxpool_s16(const pe_context *ctx, const pe_pool_s16_params *p, const pe_dims *in,
                         const int16_t *input, const pe_dims *out, int16_t *output)
{
    return pool_s16(ctx, p, in, input, out, output, 0);
}

pe_status pe_transpose_conv_s16x8(const pe_context *ctx, const pe_tconv_s16_params *p,
                                  const pe_per_channel_quant *q, const pe_dims *in, const int16_t *input,
                                  const pe_dims *f, const int8_t *filter, const int32_t *bias,
                                  const pe_dims *out, int16_t *output)
{
    int32_t n, oy, ox, oc, iy, ix, ic;
    int64_t max_bias = 0, taps;
    uint64_t macs = 0;
    pe_status st;
    if (p == NULL || q == NULL || q->multiplier == NULL || q->shift == NULL || input == NULL ||
        filter == NULL || output == NULL || !dims_ok(in) || !dims_ok(f) || !dims_ok(out) || p->stride_h < 1 ||
        p->stride_w < 1 || p->pad_top < 0 || p->pad_left < 0 || !act_ok(p->act_min, p->act_max) ||
        in->n != out->n || f->c != in->c || f->n != out->c) {
        return PE_ERR_ARG;
    }
    if ((int64_t)(in->h - 1) * p->stride_h + f->h + p->pad_top > (int64_t)PE_INT32_MAX / 2 ||
        (int64_t)(in->w - 1) * p->stride_w + f->w + p->pad_left > (int64_t)PE_INT32_MAX / 2 ||
        (int64_t)out->h + p->pad_top > (int64_t)PE_INT32_MAX / 2 ||
        (int64_t)out->w + p->pad_left > (int64_t)PE_INT32_MAX / 2) {
        return PE_ERR_OVERFLOW;
    }
    st = check_channels(q, bias, out->c, &max_bias);
    if (st != PE_OK) {
        return st;
    }
    /* an output gathers at most ceil(kh / sh) * ceil(kw / sw) input pixels */
    taps = (int64_t)((f->h + p->stride_h - 1) / p->stride_h) * ((f->w + p->stride_w - 1) / p->stride_w) * in->c;
    if (taps * 128 * 32768 + max_bias >= PE_S16W_ACC_LIMIT) {
        return PE_ERR_UNSUPPORTED;
    }
    /* TFLM scatters each input pixel into an int64 copy of the output; the
     * integer sums do not depend on the order, so each output gathers its
     * input pixels instead (no scratch) */
    for (n = 0; n < out->n; n++) {
        for (oy = 0; oy < out->h; oy++) {
            const int32_t ty = oy + p->pad_top;   /* = iy * sh + ky */
            for (ox = 0; ox < out->w; ox++) {
                const int32_t tx = ox + p->pad_left;
                int16_t *dst = output + (((size_t)n * (size_t)out->h + (size_t)oy) * (size_t)out->w +
                                         (size_t)ox) * (size_t)out->c;
                for (oc = 0; oc < out->c; oc++) {
                    int64_t acc = 0;
                    for (iy = 0; iy < in->h; iy++) {
                        const int32_t ky = ty - iy * p->stride_h;
                        if (ky < 0) {
                            break;
                        }
                        if (ky >= f->h) {
                            continue;
                        }
                        for (ix = 0; ix < in->w; ix++) {
                            const int32_t kx = tx - ix * p->stride_w;
                            const int16_t *x;
                            const int8_t *w;
                            if (kx < 0) {
                                break;
                            }
                            if (kx >= f->w) {
                                continue;
                            }
                            x = input + (((size_t)n * (size_t)in->h + (size_t)iy) * (size_t)in->w + (size_t)ix) *
                                            (size_t)in->c;
                            w = filter + (((size_t)oc * (size_t)f->h + (size_t)ky) * (size_t)f->w + (size_t)kx) *
                                             (size_t)f->c;
                            for (ic = 0; ic < in->c; ic++) {
                                acc += (int64_t)x[ic] * (int64_t)w[ic];
                            }
                            macs += (uint64_t)in->c;
                        }
                    }
                    if (bias != NULL) {
                        acc += bias_at(bias + 2 * oc);
                    }
                    dst[oc] = (int16_t)clamp(pe_fx_requant64(acc, q->multiplier[oc], q->shift[oc]), p->act_min,
                                             p->act_max);
                }
            }
        }
    }
    if (ctx != NULL && ctx->stats != NULL) {
        ctx->stats->macs += macs;
    }
    return PE_OK;
}

pe_status pe_requantize_s16(int32_t count, const int16_t *input, int32_t multiplier, int32_t shift,
                            int32_t input_zp, int32_t output_zp, int16_t *output)
{
    int32_t i;
    if (count < 0 || (count > 0 && (input == NULL || output == NULL)) || multiplier < 0 || shift < -31 ||
        shift > 30 || input_zp < -32768 || input_zp > 32767 || output_zp < -32768 || output_zp > 32767) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < count; i++) {
        const int32_t v = pe_fx_requant(input[i] - input_zp, multiplier, shift) + output_zp;
        output[i] = (int16_t)clamp(v, -32768, 32767);
    }
    return PE_OK;
}
