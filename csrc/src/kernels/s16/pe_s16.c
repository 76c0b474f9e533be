/*
 * pe_s16.c - int16x8 CONV_2D, FULLY_CONNECTED and ADD (pe_s16.h).
 */
#include <stdint.h>

#include "pyembed/pe_conv.h"
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_s16.h"

#define PE_S16_ACC_LIMIT ((int64_t)1 << 47)

/* an int64 stored as (lo, hi) int32 words */
static int64_t word_pair(const int32_t *w)
{
    return (int64_t)(((uint64_t)(uint32_t)w[1] << 32) | (uint64_t)(uint32_t)w[0]);
}

/* int64 -> int32 keeping the low 32 bits (TFLite's static_cast), portably */
static int32_t wrap32(int64_t v)
{
    const uint32_t u = (uint32_t)((uint64_t)v & 0xFFFFFFFFu);
    return u <= (uint32_t)PE_INT32_MAX ? (int32_t)u : -(int32_t)(~u) - 1;
}

int32_t pe_fx_requant64(int64_t acc, int32_t multiplier, int32_t shift)
{
    const int32_t m16 = multiplier < 0x7FFF0000 ? (multiplier + (1 << 15)) >> 16 : 0x7FFF;
    const int32_t total = 15 - shift;
    const int64_t r = acc * (int64_t)m16 + ((int64_t)1 << (total - 1));
    return wrap32(pe_fx_asr64(r, total));
}

int32_t pe_fx_requant64_single(int64_t acc, int32_t multiplier, int32_t shift)
{
    /* floor((acc * m + 2^(T - 1)) / 2^T), T = 31 - shift >= 24, computed
     * exactly without a 128-bit product: acc = hi * 2^16 + lo, 0 <= lo < 2^16 */
    const int32_t total = 31 - shift;
    const int64_t hi = pe_fx_asr64(acc, 16);
    const int64_t lo = acc - hi * 65536;
    const int64_t low_part = lo * (int64_t)multiplier + ((int64_t)1 << (total - 1));
    const int64_t sum = hi * (int64_t)multiplier + pe_fx_asr64(low_part, 16);
    return wrap32(pe_fx_asr64(sum, total - 16));
}

static int32_t clamp16(int32_t v, const pe_activation *a)
{
    return v < a->min ? a->min : (v > a->max ? a->max : v);
}

static int act16_ok(const pe_activation *a)
{
    return a->min >= -32768 && a->max <= 32767 && a->min <= a->max;
}

static pe_status check_quant64(const pe_per_channel_quant *q, int32_t n)
{
    int32_t i;
    if (q == NULL || q->multiplier == NULL || q->shift == NULL || n < 1) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < n; i++) {
        if (q->multiplier[i] < 0 || q->shift[i] < -31 || q->shift[i] > 7) {
            return PE_ERR_ARG;
        }
    }
    return PE_OK;
}

pe_status pe_conv2d_s16x8(const pe_context *ctx, const pe_conv_params *p,
                          const pe_per_channel_quant *q, const pe_dims *in, const int16_t *input,
                          const pe_dims *f, const int8_t *filter, const int32_t *bias,
                          const pe_dims *out, int16_t *output)
{
    pe_conv_params g;
    pe_status s;
    int32_t n, oy, ox, oc, ky, kx, i, oc_g;
    int64_t max_bias = 0, taps;
    uint64_t macs = 0;
    if (p == NULL) {
        return PE_ERR_ARG;
    }
    g = *p;
    g.activation.min = -128; /* the int8 checks of everything but the int16 clamp */
    g.activation.max = 127;
    s = pe_conv_check_geometry(&g, in, f, out, 0);
    if (s != PE_OK) {
        return s;
    }
    if (p->input_offset != 0 || p->output_offset != 0 || !act16_ok(&p->activation) ||
        input == NULL || filter == NULL || output == NULL) {
        return PE_ERR_ARG;
    }
    s = check_quant64(q, out->c);
    if (s != PE_OK) {
        return s;
    }
    for (oc = 0; bias != NULL && oc < out->c; oc++) {
        const int64_t b = word_pair(bias + 2 * oc);
        if (b <= -PE_S16_ACC_LIMIT || b >= PE_S16_ACC_LIMIT) {
            return PE_ERR_UNSUPPORTED;
        }
        max_bias = (b < 0 ? -b : b) > max_bias ? (b < 0 ? -b : b) : max_bias;
    }
    taps = (int64_t)f->h * f->w * f->c;
    if (taps * 128 * 32768 + max_bias >= PE_S16_ACC_LIMIT) {
        return PE_ERR_UNSUPPORTED;
    }
    oc_g = out->c / p->groups;
    for (n = 0; n < in->n; n++) {
        for (oy = 0; oy < out->h; oy++) {
            for (ox = 0; ox < out->w; ox++) {
                int16_t *dst = output + (((size_t)n * (size_t)out->h + (size_t)oy) * (size_t)out->w +
                                         (size_t)ox) * (size_t)out->c;
                for (oc = 0; oc < out->c; oc++) {
                    const int32_t grp = oc / oc_g;
                    int64_t acc = 0;
                    for (ky = 0; ky < f->h; ky++) {
                        const int32_t iy = oy * p->stride.h - p->padding.top + ky * p->dilation.h;
                        if (iy < 0 || iy >= in->h) {
                            continue;
                        }
                        for (kx = 0; kx < f->w; kx++) {
                            const int32_t ix =
                                ox * p->stride.w - p->padding.left + kx * p->dilation.w;
                            const int16_t *x;
                            const int8_t *w;
                            int64_t part64 = 0;
                            if (ix < 0 || ix >= in->w) {
                                continue;
                            }
                            x = input + (((size_t)n * (size_t)in->h + (size_t)iy) * (size_t)in->w +
                                         (size_t)ix) * (size_t)in->c + (size_t)grp * (size_t)f->c;
                            w = filter + (((size_t)oc * (size_t)f->h + (size_t)ky) * (size_t)f->w +
                                          (size_t)kx) * (size_t)f->c;
                            for (i = 0; i < f->c; i++) {
                                part64 += (int32_t)(w[i] * x[i]); /* |w * x| <= 2^22 */
                            }
                            acc += part64;
                            macs += (uint64_t)f->c;
                        }
                    }
                    if (bias != NULL) {
                        acc += word_pair(bias + 2 * oc);
                    }
                    dst[oc] = (int16_t)clamp16(pe_fx_requant64(acc, q->multiplier[oc], q->shift[oc]),
                                               &p->activation);
                }
            }
        }
    }
    if (ctx != NULL && ctx->stats != NULL) {
        ctx->stats->macs += macs;
    }
    return PE_OK;
}

pe_status pe_fully_connected_s16x8(const pe_context *ctx, const pe_fc_s16_params *p,
                                   int32_t batches, int32_t depth, int32_t out_f,
                                   const int16_t *input, const int8_t *filter, const int32_t *bias,
                                   int16_t *output)
{
    int32_t b, o, d;
    pe_status s;
    if (p == NULL || input == NULL || filter == NULL || output == NULL || batches < 1 ||
        depth < 1 || out_f < 1 || !act16_ok(&p->activation) ||
        (p->quant_count != 1 && p->quant_count != out_f) || (p->bias32 != 0 && p->bias32 != 1) ||
        (p->single_rounding != 0 && p->single_rounding != 1)) {
        return PE_ERR_ARG;
    }
    if ((int64_t)batches * depth > PE_INT32_MAX || (int64_t)batches * out_f > PE_INT32_MAX ||
        (int64_t)out_f * depth > PE_INT32_MAX) {
        return PE_ERR_OVERFLOW;
    }
    s = check_quant64(&p->quant, p->quant_count);
    if (s != PE_OK) {
        return s;
    }
    if (p->bias32) {
        int64_t max_bias = 0;
        for (o = 0; bias != NULL && o < out_f; o++) {
            const int64_t v = bias[o];
            max_bias = (v < 0 ? -v : v) > max_bias ? (v < 0 ? -v : v) : max_bias;
        }
        if ((int64_t)depth * 128 * 32768 + max_bias > PE_INT32_MAX) {
            return PE_ERR_UNSUPPORTED;
        }
    } else {
        for (o = 0; bias != NULL && o < out_f; o++) {
            const int64_t v = word_pair(bias + 2 * o);
            if (v <= -PE_S16_ACC_LIMIT || v >= PE_S16_ACC_LIMIT) {
                return PE_ERR_UNSUPPORTED;
            }
        }
        if ((int64_t)depth * 128 * 32768 >= PE_S16_ACC_LIMIT / 2) {
            return PE_ERR_UNSUPPORTED;
        }
    }
    for (b = 0; b < batches; b++) {
        const int16_t *x = input + (size_t)b * (size_t)depth;
        for (o = 0; o < out_f; o++) {
            const int8_t *w = filter + (size_t)o * (size_t)depth;
            const int32_t qi = p->quant_count == 1 ? 0 : o;
            int32_t v;
            if (p->bias32) {
                int32_t acc = 0;
                for (d = 0; d < depth; d++) {
                    acc += w[d] * x[d];
                }
                if (bias != NULL) {
                    acc += bias[o];
                }
                v = p->single_rounding ? pe_fx_requant_single(acc, p->quant.multiplier[qi], p->quant.shift[qi])
                                       : pe_fx_requant(acc, p->quant.multiplier[qi], p->quant.shift[qi]);
            } else {
                int64_t acc = 0;
                for (d = 0; d < depth; d++) {
                    acc += (int32_t)(w[d] * x[d]);
                }
                if (bias != NULL) {
                    acc += word_pair(bias + 2 * o);
                }
                v = p->single_rounding ? pe_fx_requant64_single(acc, p->quant.multiplier[qi], p->quant.shift[qi])
                                       : pe_fx_requant64(acc, p->quant.multiplier[qi], p->quant.shift[qi]);
            }
            output[(size_t)b * (size_t)out_f + (size_t)o] = (int16_t)clamp16(v, &p->activation);
        }
    }
    if (ctx != NULL && ctx->stats != NULL) {
        ctx->stats->macs += (uint64_t)batches * (uint64_t)out_f * (uint64_t)depth;
    }
    return PE_OK;
}

static int bcast_ok(const pe_dims *a, const pe_dims *o)
{
    return (a->n == o->n || a->n == 1) && (a->h == o->h || a->h == 1) &&
           (a->w == o->w || a->w == 1) && (a->c == o->c || a->c == 1) && a->n >= 1 && a->h >= 1 &&
           a->w >= 1 && a->c >= 1;
}

/* Element (n, h, w, c) of an output position in input d, which broadcasts
 * (numpy rules, pe_dims) against the output. */
static size_t bcast_at(const pe_dims *d, int32_t n, int32_t h, int32_t w, int32_t c)
{
    return (((size_t)(d->n == 1 ? 0 : n) * (size_t)d->h + (size_t)(d->h == 1 ? 0 : h)) * (size_t)d->w +
            (size_t)(d->w == 1 ? 0 : w)) * (size_t)d->c + (size_t)(d->c == 1 ? 0 : c);
}

/* Element (n, h, w, c) of the output od. */
static size_t out_at(const pe_dims *od, int32_t n, int32_t h, int32_t w, int32_t c)
{
    return (((size_t)n * (size_t)od->h + (size_t)h) * (size_t)od->w + (size_t)w) * (size_t)od->c + (size_t)c;
}

/* A non-empty output of at most PE_INT32_MAX elements that both inputs
 * broadcast against. */
static int out_dims_ok(const pe_dims *d1, const pe_dims *d2, const pe_dims *od)
{
    return od->n >= 1 && od->h >= 1 && od->w >= 1 && od->c >= 1 && bcast_ok(d1, od) && bcast_ok(d2, od) &&
           (int64_t)od->n * od->h * od->w * od->c <= PE_INT32_MAX;
}

pe_status pe_add_s16(const pe_context *ctx, const pe_add_params *p, const pe_dims *d1,
                     const int16_t *x1, const pe_dims *d2, const int16_t *x2, const pe_dims *od,
                     int16_t *out)
{
    int32_t n, h, w, c;
    (void)ctx;
    if (p == NULL || d1 == NULL || d2 == NULL || od == NULL || x1 == NULL || x2 == NULL ||
        out == NULL) {
        return PE_ERR_ARG;
    }
    if (!out_dims_ok(d1, d2, od)) {
        return PE_ERR_ARG;
    }
    if (p->left_shift != 15 || p->input1_offset <= -32767 || p->input1_offset >= 32767 ||
        p->input2_offset <= -32767 || p->input2_offset >= 32767 || p->output_offset < -32768 ||
        p->output_offset > 32767 || !act16_ok(&p->activation) ||
        p->input1_quant.multiplier < 0 || p->input2_quant.multiplier < 0 ||
        p->output_quant.multiplier < 0 || p->input1_quant.shift > 0 || p->input2_quant.shift > 0 ||
        p->output_quant.shift > 0 || p->input1_quant.shift < -31 || p->input2_quant.shift < -31 ||
        p->output_quant.shift < -31 || p->rounding != PE_ROUND_DOUBLE) {
        return PE_ERR_ARG;
    }
    for (n = 0; n < od->n; n++) {
        for (h = 0; h < od->h; h++) {
            for (w = 0; w < od->w; w++) {
                for (c = 0; c < od->c; c++) {
                    const int32_t x1v = x1[bcast_at(d1, n, h, w, c)] + p->input1_offset;
                    const int32_t x2v = x2[bcast_at(d2, n, h, w, c)] + p->input2_offset;
                    const int32_t a = pe_fx_requant(x1v * (1 << 15), p->input1_quant.multiplier,
                                                    p->input1_quant.shift);
                    const int32_t b = pe_fx_requant(x2v * (1 << 15), p->input2_quant.multiplier,
                                                    p->input2_quant.shift);
                    /* TFLite adds in int32; keep its wrap without overflowing */
                    const int64_t v = (int64_t)pe_fx_requant(wrap32((int64_t)a + b),
                                                             p->output_quant.multiplier,
                                                             p->output_quant.shift) +
                                      p->output_offset;
                    out[out_at(od, n, h, w, c)] =
                        (int16_t)(v < p->activation.min
                                      ? p->activation.min
                                      : (v > p->activation.max ? p->activation.max : v));
                }
            }
        }
    }
    return PE_OK;
}

/* -- SOFTMAX int16 ------------------------------------------------------------ */

static int16_t lut_at(const int32_t *packed, int32_t i)
{
    const uint32_t w = (uint32_t)packed[i >> 1];
    const uint32_t h = (i & 1) ? (w >> 16) : (w & 0xFFFFu);
    return (int16_t)(h < 0x8000u ? (int32_t)h : (int32_t)h - 65536);
}

/* TFLite's LUTLookup(int16_t, const int16_t *): 512 segments, linear
 * interpolation on the low 7 bits */
static int16_t lut_lookup(int16_t value, const int32_t *lut)
{
    const int32_t index = 256 + pe_fx_asr32(value, 7);
    const int32_t offset = value & 0x7f;
    const int32_t base = lut_at(lut, index);
    const int32_t slope = lut_at(lut, index + 1) - base;
    const int32_t delta = pe_fx_asr32(slope * offset + 64, 7);
    return (int16_t)pe_fx_clamp(base + delta, -32768, 32767);
}

pe_status pe_softmax_s16(const pe_context *ctx, int32_t rows, int32_t depth, int32_t multiplier,
                         int32_t left_shift, const int32_t *exp_lut, const int32_t *recip_lut,
                         const int16_t *input, int16_t *output)
{
    int32_t r, c;
    (void)ctx;
    if (rows < 1 || depth < 1 || depth > 65535 || multiplier < 0 || left_shift < -31 ||
        left_shift > 30 || exp_lut == NULL || recip_lut == NULL || input == NULL ||
        output == NULL || (int64_t)rows * depth > PE_INT32_MAX) {
        return PE_ERR_ARG;
    }
    for (r = 0; r < rows; r++) {
        const int16_t *x = input + (size_t)r * (size_t)depth;
        int16_t *y = output + (size_t)r * (size_t)depth;
        int16_t mx = -32768;
        int32_t sum = 0, head, shifted, sym, right;
        int16_t recip;
        for (c = 0; c < depth; c++) {
            mx = x[c] > mx ? x[c] : mx;
        }
        for (c = 0; c < depth; c++) {
            const int32_t diff = (int32_t)x[c] - mx;
            const int32_t scaled = pe_fx_requant(diff, multiplier, left_shift);
            const int32_t s = pe_fx_clamp(scaled + 32767 < scaled ? 32767 : scaled + 32767, -32768, 32767);
            y[c] = lut_lookup((int16_t)s, exp_lut);
            sum += y[c]; /* |sum| < 65535 * 32768: fits int32 */
        }
        if (sum < 2) {
            return PE_ERR_ARG;
        }
        head = pe_fx_clz32((uint32_t)sum);
        shifted = (int32_t)((((int64_t)sum << (head - 1)) + (1 << 13)) >> 14);
        sym = pe_fx_clamp(shifted - ((1 << 15) + (1 << 16)), -32768, 32767);
        recip = lut_lookup((int16_t)sym, recip_lut);
        right = 31 - head;
        for (c = 0; c < depth; c++) {
            const int64_t v = ((int64_t)y[c] * recip + ((int64_t)1 << (right - 1))) >> right;
            y[c] = (int16_t)(v < 0 ? 0 : (v > 32767 ? 32767 : v));
        }
    }
    return PE_OK;
}

/* -- SQUARED_DIFFERENCE / PRELU int16 ------------------------------------------- */

pe_status pe_squared_difference_s16(const pe_context *ctx, const int32_t *q, const pe_dims *d1,
                                    const int16_t *x1, const pe_dims *d2, const int16_t *x2,
                                    const pe_dims *od, int16_t *out)
{
    int32_t n, h, w, c;
    (void)ctx;
    if (q == NULL || d1 == NULL || d2 == NULL || od == NULL || x1 == NULL || x2 == NULL || out == NULL ||
        !out_dims_ok(d1, d2, od)) {
        return PE_ERR_ARG;
    }
    /* input multipliers below one (shift <= 0), the output's any */
    if (q[0] < 0 || q[2] < 0 || q[4] < 0 || q[1] > 0 || q[3] > 0 || q[1] < -31 || q[3] < -31 ||
        q[5] < -31 || q[5] > 30) {
        return PE_ERR_ARG;
    }
    for (n = 0; n < od->n; n++) {
        for (h = 0; h < od->h; h++) {
            for (w = 0; w < od->w; w++) {
                for (c = 0; c < od->c; c++) {
                    const int32_t a = pe_fx_requant(x1[bcast_at(d1, n, h, w, c)], q[0], q[1]);
                    const int32_t b = pe_fx_requant(x2[bcast_at(d2, n, h, w, c)], q[2], q[3]);
                    /* |a|, |b| <= 2^15: the square fits (TFLite computes it in int32) */
                    const int64_t diff = (int64_t)a - b;
                    const int32_t sq = wrap32(diff * diff);
                    out[out_at(od, n, h, w, c)] = pe_fx_sat_s16(pe_fx_requant(sq, q[4], q[5]));
                }
            }
        }
    }
    return PE_OK;
}

pe_status pe_prelu_s16(const pe_context *ctx, const int32_t *q, const pe_dims *di, const int16_t *x,
                       const pe_dims *da, const int8_t *alpha, const pe_dims *od, int16_t *out)
{
    int32_t n, h, w, c;
    (void)ctx;
    if (q == NULL || di == NULL || da == NULL || od == NULL || x == NULL || alpha == NULL || out == NULL ||
        !out_dims_ok(di, da, od)) {
        return PE_ERR_ARG;
    }
    /* offsets: input in int16, alpha in int8, output in int16; shifts keep
     * the left-shifted products inside int32 (|x - zp| < 2^16) */
    if (q[0] < -32767 || q[0] > 32768 || q[1] < -127 || q[1] > 128 || q[2] < -32768 || q[2] > 32767 ||
        q[3] < 0 || q[5] < 0 || q[4] < -31 || q[4] > 14 || q[6] < -31 || q[6] > 6) {
        return PE_ERR_ARG;
    }
    for (n = 0; n < od->n; n++) {
        for (h = 0; h < od->h; h++) {
            for (w = 0; w < od->w; w++) {
                for (c = 0; c < od->c; c++) {
                    const int32_t v = x[bcast_at(di, n, h, w, c)] + q[0];
                    int64_t r;
                    if (v >= 0) {
                        r = pe_fx_requant(v, q[3], q[4]);
                    } else {
                        r = pe_fx_requant(v * (alpha[bcast_at(da, n, h, w, c)] + q[1]), q[5], q[6]);
                    }
                    r += q[2];
                    out[out_at(od, n, h, w, c)] = (int16_t)(r < -32768 ? -32768 : (r > 32767 ? 32767 : r));
                }
            }
        }
    }
    return PE_OK;
}
