/* pe_conv_ref.h - what test_conv.c and test_conv_gather.c share: the
 * xorshift case generator, the draws of a random convolution's parameters
 * and output size, and the naive int64 gather reference. The including file
 * defines PE_CONV_REF_SEED and, before including this, the int8 buffers
 * input and weights and the int32 buffers mult and shift the reference reads
 * (host only, like pe_test.h). */
#ifndef PE_CONV_REF_H
#define PE_CONV_REF_H
#include <stdint.h>
#include "pyembed/pe_conv.h"

static uint64_t rng_state = PE_CONV_REF_SEED;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static int32_t rnd_in(int32_t lo, int32_t hi) /* inclusive */
{
    return lo + (int32_t)(rnd() % (uint32_t)(hi - lo + 1));
}

/* stride (1..stride_max), dilation, padding, offsets, activation, rounding */
static void draw_conv_params(pe_conv_params *p, int32_t stride_max)
{
    p->stride.h = rnd_in(1, stride_max);
    p->stride.w = rnd_in(1, stride_max);
    p->dilation.h = rnd_in(1, 3);
    p->dilation.w = rnd_in(1, 3);
    p->padding.top = rnd_in(0, 5);
    p->padding.left = rnd_in(0, 5);
    p->input_offset = rnd_in(-127, 128);
    p->output_offset = rnd_in(-128, 127);
    p->activation.min = rnd_in(-128, 127);
    p->activation.max = rnd_in(p->activation.min, 127);
    p->rounding = (rnd() & 1u) ? PE_ROUND_SINGLE : PE_ROUND_DOUBLE;
}

/* out n, h, w: the floor rule with a random bottom / right padding, at least
 * one output */
static void draw_conv_out(const pe_conv_params *p, const pe_dims *in, const pe_dims *f, pe_dims *out)
{
    const int32_t k_eff_h = (f->h - 1) * p->dilation.h + 1;
    const int32_t k_eff_w = (f->w - 1) * p->dilation.w + 1;
    out->n = in->n;
    out->h = (in->h + p->padding.top + rnd_in(0, 5) - k_eff_h);
    out->w = (in->w + p->padding.left + rnd_in(0, 5) - k_eff_w);
    out->h = out->h < 0 ? 1 : out->h / p->stride.h + 1;
    out->w = out->w < 0 ? 1 : out->w / p->stride.w + 1;
}

/* Naive gather convolution with an int64 accumulator; returns the number of
 * in-bounds (pixel, tap) pairs. */
static long ref_conv(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                     const pe_dims *out, int depthwise, const int32_t *b, int8_t *dst)
{
    long pairs = 0;
    int32_t n, oy, ox, oc, ky, kx, ic;
    for (n = 0; n < in->n; n++) {
        for (oy = 0; oy < out->h; oy++) {
            for (ox = 0; ox < out->w; ox++) {
                for (oc = 0; oc < out->c; oc++) {
                    long long acc = b != NULL ? b[oc] : 0;
                    for (ky = 0; ky < f->h; ky++) {
                        const int32_t iy = oy * p->stride.h - p->padding.top + ky * p->dilation.h;
                        if (iy < 0 || iy >= in->h) {
                            continue;
                        }
                        for (kx = 0; kx < f->w; kx++) {
                            const int32_t ix =
                                ox * p->stride.w - p->padding.left + kx * p->dilation.w;
                            const int8_t *px;
                            if (ix < 0 || ix >= in->w) {
                                continue;
                            }
                            if (oc == 0) {
                                pairs++;
                            }
                            px = input + ((n * in->h + iy) * in->w + ix) * in->c;
                            if (depthwise) {
                                acc += (long long)weights[(ky * f->w + kx) * f->c + oc] *
                                       (px[oc / p->ch_mult] + p->input_offset);
                            } else {
                                const int32_t g = oc / (out->c / p->groups);
                                for (ic = 0; ic < f->c; ic++) {
                                    acc += (long long)weights[((oc * f->h + ky) * f->w + kx) *
                                                                  f->c + ic] *
                                           (px[g * f->c + ic] + p->input_offset);
                                }
                            }
                        }
                    }
                    {
                        const int32_t q =
                            pe_fx_requant_mode((int32_t)acc, mult[oc], shift[oc], p->rounding);
                        long long v = (long long)q + p->output_offset;
                        v = v < p->activation.min ? p->activation.min : v;
                        v = v > p->activation.max ? p->activation.max : v;
                        dst[((n * out->h + oy) * out->w + ox) * out->c + oc] = (int8_t)v;
                    }
                }
            }
        }
    }
    return pairs;
}

#endif
