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
 *
 * With the Arm DSP extension (PE_DSP) conv and depthwise take the loops of
 * the "Arm DSP-extension path" section below (same sums, same bytes; the
 * order rules are in pe_conv_gather.h); tests/test_dsp_kernels.py runs both
 * builds under QEMU, also with the output placed over the input.
 */
#include <stdint.h>

#include "pyembed/pe_conv.h"
#include "pyembed/pe_conv_gather.h"
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_simd.h"

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


#if PE_DSP
/* ---- Arm DSP-extension path (pe_simd.h) ----
 * conv (one group): output channels in pairs, outermost, so each channel's
 * requantization constants and the sum of its weights are set up once; for
 * each pair, output columns in pairs. Two columns whose windows are whole
 * (no tap in the padding) run pe_dsp_dot_2x2 over each kernel row's run of
 * kw * in_c bytes (dilation 1; else per tap) with the input offset folded
 * into the start value: bias + offset * sum(w) (the same int32 sum,
 * re-associated; the partial sums wrap modulo 2^32 at worst and the final
 * sum fits int32, checked by pe_conv_check_quant). Clipped windows and odd
 * columns take pe_dsp_dot_1x2_off (offset applied while widening).
 * depthwise: channel groups of four outermost (dw_image_dsp, below: tap
 * pairs, one SMLAD per channel and pair, multiplier 1 or a multiple of 4,
 * also for overlapping outputs through a stack block); otherwise per pixel,
 * four output channels at a time with SMLABB/SMLATT on SXTB16-widened words:
 * channel multiplier 1 (four input channels per word) or a multiplier
 * divisible by 4 (four outputs of one input channel, one input byte per
 * tap). Same int32 sums, same requantization. */
typedef struct {
    int32_t m, sh, fast;
} gq;

/* the SMMULR requantization (pe_dsp_requant) needs |acc| < 2^30: bias +
 * taps products of at most 128 * 255 each */
static int32_t acc_small(int64_t taps, int32_t b)
{
    const int64_t ab = b < 0 ? -(int64_t)b : (int64_t)b;
    return taps * 32640 + ab < ((int64_t)1 << 30);
}

static gq gq_setup(const pe_per_channel_quant *q, int32_t o, pe_rounding mode, int32_t small)
{
    gq r;
    r.m = q->multiplier[o];
    r.sh = q->shift[o];
    r.fast = small && mode == PE_ROUND_DOUBLE && r.sh <= -1 && r.sh >= -23;
    return r;
}

__attribute__((noinline)) static int8_t finish_slow(int32_t acc, int32_t m, int32_t sh,
                                                    pe_rounding mode, int32_t amin,
                                                    int32_t amax, int32_t ooff)
{
    return finish(acc, m, sh, mode, amin - ooff, amax - ooff, ooff);
}

static inline int8_t gq_finish(int32_t acc, const gq *r, pe_rounding mode, int32_t amin,
                               int32_t amax, int32_t off)
{
    if (r->fast) {
        return pe_dsp_requant(acc, r->m, -r->sh, amin, amax, off);
    }
    return finish_slow(acc, r->m, r->sh, mode, amin, amax, off);
}

/* uint32 sum, as SMLAD accumulates: the caller's final value fits int32 */
static inline int32_t add_wrap(int32_t a, int32_t b)
{
    return (int32_t)((uint32_t)a + (uint32_t)b);
}

/* one pixel x two output channels, a clipped window [ky_lo, ky_hi] x
 * [kx_lo, kx_hi] (may be empty), input offset applied while widening */
static void conv_1x2_window(int32_t *a, const int8_t *wa, const int8_t *wb, const int8_t *img,
                            int32_t in_w, int32_t ic, int32_t kw, int32_t iy0, int32_t ix0,
                            int32_t d_h, int32_t d_w, int32_t ky_lo, int32_t ky_hi,
                            int32_t kx_lo, int32_t kx_hi, int32_t off)
{
    const size_t row_px = (size_t)in_w * (size_t)ic;
    int32_t ky, kx;
    if (ky_lo > ky_hi || kx_lo > kx_hi) {
        return;
    }
    for (ky = ky_lo; ky <= ky_hi; ky++) {
        const int8_t *const xr = img + (size_t)(iy0 + ky * d_h) * row_px;
        const size_t wk = (size_t)ky * (size_t)kw * (size_t)ic;
        if (d_w == 1) {
            const size_t xs = (size_t)(ix0 + kx_lo) * (size_t)ic;
            const size_t wt = wk + (size_t)kx_lo * (size_t)ic;
            pe_dsp_dot_1x2_off(a, wa + wt, wb + wt, xr + xs, (kx_hi - kx_lo + 1) * ic, off);
        } else {
            for (kx = kx_lo; kx <= kx_hi; kx++) {
                const size_t xs = (size_t)(ix0 + kx * d_w) * (size_t)ic;
                const size_t wt = wk + (size_t)kx * (size_t)ic;
                pe_dsp_dot_1x2_off(a, wa + wt, wb + wt, xr + xs, ic, off);
            }
        }
    }
}

/* one pixel x four output channels over a clipped window (not empty):
 * pe_dsp_dot_1x4_off on each run's multiple of 8 bytes, the rest by bytes */
static void conv_1x4_window(int32_t *a, const int8_t *w0, size_t ws, const int8_t *img,
                            int32_t in_w, int32_t ic, int32_t kw, int32_t iy0, int32_t ix0,
                            int32_t d_h, int32_t d_w, int32_t ky_lo, int32_t ky_hi,
                            int32_t kx_lo, int32_t kx_hi, int32_t off)
{
    const size_t row_px = (size_t)in_w * (size_t)ic;
    const int32_t run = d_w == 1 ? (kx_hi - kx_lo + 1) * ic : ic;
    const int32_t runs = d_w == 1 ? 1 : kx_hi - kx_lo + 1;
    int32_t ky, r, i, j;
    for (ky = ky_lo; ky <= ky_hi; ky++) {
        for (r = 0; r < runs; r++) {
            const int32_t kx = kx_lo + r;
            const int8_t *const x =
                img + (size_t)(iy0 + ky * d_h) * row_px + (size_t)(ix0 + kx * d_w) * (size_t)ic;
            const int8_t *const w = w0 + ((size_t)ky * (size_t)kw + (size_t)kx) * (size_t)ic;
            const int32_t n8 = run >> 3;
            if (n8 > 0) {
                pe_dsp_dot_1x4_off(a, w, w + ws, w + 2 * ws, w + 3 * ws, x, n8, off);
            }
            for (i = n8 * 8; i < run; i++) {
                const int32_t xv = (int32_t)x[i] + off;
                for (j = 0; j < 4; j++) {
                    a[j] += w[(size_t)j * ws + (size_t)i] * xv;
                }
            }
        }
    }
}

/* conv, one pixel, every output channel (fours, then pairs), in the raster
 * order of the portable conv_pixel: for an output placed over its own input
 * (see run) */
__attribute__((noinline)) static void conv_pixel_dsp(
    const pe_conv_params *p, const pe_per_channel_quant *q, const pe_dims *in,
    const int8_t *img, const pe_dims *f, const int8_t *filter, const int32_t *bias,
    const pe_dims *out, int32_t iy0, int32_t ix0, int32_t ky_lo, int32_t ky_hi, int32_t kx_lo,
    int32_t kx_hi, int8_t *dst)
{
    const int32_t oc_n = out->c, any = ky_lo <= ky_hi && kx_lo <= kx_hi;
    const size_t ws = (size_t)f->h * (size_t)f->w * (size_t)in->c;
    const pe_rounding mode = p->rounding;
    const int32_t amin = p->activation.min, amax = p->activation.max, ooff = p->output_offset;
    int32_t oc = 0, j;
    for (; oc + 4 <= oc_n; oc += 4) {
        int32_t a[4];
        for (j = 0; j < 4; j++) {
            a[j] = bias != NULL ? bias[oc + j] : 0;
        }
        if (any) {
            conv_1x4_window(a, filter + (size_t)oc * ws, ws, img, in->w, in->c, f->w, iy0, ix0,
                            p->dilation.h, p->dilation.w, ky_lo, ky_hi, kx_lo, kx_hi,
                            p->input_offset);
        }
        for (j = 0; j < 4; j++) {
            const gq r = gq_setup(q, oc + j, mode,
                                  acc_small((int64_t)ws, bias != NULL ? bias[oc + j] : 0));
            dst[oc + j] = gq_finish(a[j], &r, mode, amin, amax, ooff);
        }
    }
    for (; oc < oc_n; oc += 2) {
        const int32_t two = oc + 1 < oc_n;
        const int32_t ob = two ? oc + 1 : oc;
        const int32_t ba = bias != NULL ? bias[oc] : 0, bb = bias != NULL ? bias[ob] : 0;
        const gq ra = gq_setup(q, oc, mode, acc_small((int64_t)ws, ba));
        const gq rb = gq_setup(q, ob, mode, acc_small((int64_t)ws, bb));
        int32_t a[2];
        a[0] = ba;
        a[1] = bb;
        conv_1x2_window(a, filter + (size_t)oc * ws, filter + (size_t)ob * ws, img, in->w,
                        in->c, f->w, iy0, ix0, p->dilation.h, p->dilation.w, ky_lo, ky_hi,
                        kx_lo, kx_hi, p->input_offset);
        dst[oc] = gq_finish(a[0], &ra, mode, amin, amax, ooff);
        if (two) {
            dst[ob] = gq_finish(a[1], &rb, mode, amin, amax, ooff);
        }
    }
}

static void conv_dsp(const pe_conv_params *p, const pe_per_channel_quant *q, const pe_dims *in,
                     const int8_t *img, const pe_dims *f, const int8_t *filter,
                     const int32_t *bias, const pe_dims *out, int8_t *dst)
{
    const int32_t in_h = in->h, in_w = in->w, ic = in->c, kh = f->h, kw = f->w;
    const int32_t out_h = out->h, out_w = out->w, oc_n = out->c;
    const int32_t s_h = p->stride.h, s_w = p->stride.w, d_h = p->dilation.h, d_w = p->dilation.w;
    const int32_t off = p->input_offset, amin = p->activation.min, amax = p->activation.max;
    const int32_t ooff = p->output_offset;
    const pe_rounding mode = p->rounding;
    const size_t ws = (size_t)kh * (size_t)kw * (size_t)ic;
    const size_t row_px = (size_t)in_w * (size_t)ic;
    const size_t col_next = (size_t)s_w * (size_t)ic;
    /* dilation.w 1 and kernel rows of whole 8-byte words: a window's rows
     * in one pe_dsp_dot_2x2_rows call */
    const int32_t rows_call = d_w == 1 && ((kw * ic) & 7) == 0;
    const int32_t rows_stride = (int32_t)((size_t)d_h * row_px);
    /* output columns [ox_a, ox_b] have every tap inside the input row
     * (ox_b < ox_a + 1 when fewer than two, or without rows_call) */
    const int32_t ox_a = p->padding.left / s_w + (p->padding.left % s_w != 0 ? 1 : 0);
    const int32_t room = in_w - 1 - (kw - 1) * d_w + p->padding.left;
    const int32_t ox_b = !rows_call || room < 0 ? -1 : (room / s_w < out_w - 1 ? room / s_w
                                                                              : out_w - 1);
    int32_t oc, oy, ox, ky, kx;
    for (oc = 0; oc < oc_n; oc += 2) {
        const int32_t two = oc + 1 < oc_n;
        const int32_t ob = two ? oc + 1 : oc;
        const int8_t *const wa = filter + (size_t)oc * ws;
        const int8_t *const wb = filter + (size_t)ob * ws;
        const int32_t ba = bias != NULL ? bias[oc] : 0, bb = bias != NULL ? bias[ob] : 0;
        const int32_t sa = add_wrap(ba, off * pe_dsp_wsum(wa, (int32_t)ws));
        const int32_t sb = add_wrap(bb, off * pe_dsp_wsum(wb, (int32_t)ws));
        const gq ra = gq_setup(q, oc, mode, acc_small((int64_t)ws, ba));
        const gq rb = gq_setup(q, ob, mode, acc_small((int64_t)ws, bb));
        for (oy = 0; oy < out_h; oy++) {
            const int32_t iy0 = oy * s_h - p->padding.top;
            int32_t ky_lo, ky_hi;
            int8_t *const drow = dst + (size_t)oy * (size_t)out_w * (size_t)oc_n;
            tap_range(iy0, d_h, kh, in_h, &ky_lo, &ky_hi);
            ox = 0;
            while (ox < out_w) {
                if (ox == ox_a && ox_a + 1 <= ox_b && ky_lo == 0 && ky_hi == kh - 1) {
                    /* the row's whole windows in pairs, one call each */
                    const int8_t *x0 = img + (size_t)iy0 * row_px +
                                       (size_t)(ox * s_w - p->padding.left) * (size_t)ic;
                    int8_t *o0 = drow + (size_t)ox * (size_t)oc_n + (size_t)oc;
                    for (; ox + 1 <= ox_b; ox += 2) {
                        int32_t a[4];
                        a[0] = sa;
                        a[1] = sb;
                        a[2] = sa;
                        a[3] = sb;
                        if (kh == 1) { /* (no run ends to step over) */
                            pe_dsp_dot_2x2(a, wa, wb, x0, x0 + col_next, (kw * ic) >> 3);
                        } else {
                            pe_dsp_dot_2x2_rows(a, wa, wb, x0, x0 + col_next, (kw * ic) >> 3,
                                                kh, rows_stride);
                        }
                        o0[0] = gq_finish(a[0], &ra, mode, amin, amax, ooff);
                        o0[oc_n] = gq_finish(a[2], &ra, mode, amin, amax, ooff);
                        if (two) {
                            o0[1] = gq_finish(a[1], &rb, mode, amin, amax, ooff);
                            o0[oc_n + 1] = gq_finish(a[3], &rb, mode, amin, amax, ooff);
                        }
                        x0 += 2 * col_next;
                        o0 += 2 * (size_t)oc_n;
                    }
                    continue;
                }
                const int32_t ix0 = ox * s_w - p->padding.left;
                int32_t kx_lo, kx_hi, a[4];
                int8_t *const o0 = drow + (size_t)ox * (size_t)oc_n + (size_t)oc;
                tap_range(ix0, d_w, kw, in_w, &kx_lo, &kx_hi);
                if (ky_lo == 0 && ky_hi == kh - 1 && kx_lo == 0 && kx_hi == kw - 1 &&
                    ox + 1 < out_w && ix0 + s_w + (kw - 1) * d_w <= in_w - 1) {
                    /* two whole windows: the folded 2x2 block */
                    a[0] = sa;
                    a[1] = sb;
                    a[2] = sa;
                    a[3] = sb;
                    if (rows_call) {
                        /* the kernel rows' runs in one call */
                        const int8_t *const x0 =
                            img + (size_t)iy0 * row_px + (size_t)ix0 * (size_t)ic;
                        pe_dsp_dot_2x2_rows(a, wa, wb, x0, x0 + col_next, (kw * ic) >> 3, kh,
                                            rows_stride);
                        ky = kh;
                    } else {
                        ky = 0;
                    }
                    for (; ky < kh; ky++) {
                        const int8_t *const x0 =
                            img + (size_t)(iy0 + ky * d_h) * row_px + (size_t)ix0 * (size_t)ic;
                        const size_t wk = (size_t)ky * (size_t)kw * (size_t)ic;
                        if (d_w == 1) {
                            pe_dsp_dot_2x2_n(a, wa + wk, wb + wk, x0, x0 + col_next, kw * ic);
                        } else {
                            for (kx = 0; kx < kw; kx++) {
                                const size_t xk = (size_t)kx * (size_t)d_w * (size_t)ic;
                                const size_t wt = wk + (size_t)kx * (size_t)ic;
                                pe_dsp_dot_2x2_n(a, wa + wt, wb + wt, x0 + xk, x0 + xk + col_next,
                                            ic);
                            }
                        }
                    }
                    o0[0] = gq_finish(a[0], &ra, mode, amin, amax, ooff);
                    o0[oc_n] = gq_finish(a[2], &ra, mode, amin, amax, ooff);
                    if (two) {
                        o0[1] = gq_finish(a[1], &rb, mode, amin, amax, ooff);
                        o0[oc_n + 1] = gq_finish(a[3], &rb, mode, amin, amax, ooff);
                    }
                    ox += 2;
                    continue;
                }
                a[0] = ba;
                a[1] = bb;
                conv_1x2_window(a, wa, wb, img, in_w, ic, kw, iy0, ix0, d_h, d_w, ky_lo, ky_hi,
                                kx_lo, kx_hi, off);
                o0[0] = gq_finish(a[0], &ra, mode, amin, amax, ooff);
                if (two) {
                    o0[1] = gq_finish(a[1], &rb, mode, amin, amax, ooff);
                }
                ox++;
            }
        }
    }
}

/* ---- pointwise (1x1) conv on the DSP extension ----
 * A 1x1 convolution without padding is a matrix product: output pixel
 * (oy, ox) is the dot product of input pixel (oy * s_h, ox * s_w) (in_c
 * contiguous bytes) with each output channel's in_c weights. Output channels
 * go in blocks of four, outermost over the rows asked for: the block's
 * weights are widened once into wblk (8 * in_c bytes, the interleaved int16
 * layout of pe_dsp_widen_w4; missing channels of a last, short block are
 * zero weights), then each pixel runs pw_job's inline-asm loop: per four
 * input channels one LDR of the input word, two SXTAB16 (input offset added
 * while widening, so the sums are exactly the portable ones), two LDM of the
 * four channels' widened weights and 8 SMLAD for 16 MACs, with the four
 * accumulators in registers. Accumulators start at the bias and go to a
 * stack block of PE_PW_COLS pixels, which is then requantized channel by
 * channel (one SMMULR and four ALU instructions per output where the shift
 * allows it, see pw_rq). Every partial sum is a sum of some of the
 * products plus the bias, bounded by pe_conv_check_quant, so SMLAD never
 * wraps. */
#define PE_PW_COLS 32

typedef struct {
    int32_t *acc;      /* [0]  first column's four accumulators (read, added to, written) */
    int32_t ncol;      /* [4]  >= 1 */
    int32_t acc_step;  /* [8]  bytes from one column's accumulators to the next */
    int32_t x_adv;     /* [12] bytes from the end of a column's last run to the next start */
    const uint32_t *w; /* [16] the widened block of the first run */
    int32_t nit;       /* [20] >= 1: iterations of U groups of four input channels per run */
    const int8_t *x;   /* [24] the first column's first run */
    uint32_t off2;     /* [28] the input offset, in both halfwords */
    int32_t rows;      /* [32] >= 1: runs per column (kernel rows; the weights continue) */
    int32_t row_adv;   /* [36] bytes from the end of a run to the next run's start */
    const int32_t *rq; /* [40] pw_run_q: per channel (m, k, right), 12 words */
    int8_t *out;       /* [44] pw_run_q: the first column's four output bytes */
    int32_t out_step;  /* [48] pw_run_q: bytes from one column's outputs to the next */
} pw_job;

#if PE_DSP_ASM
/* one group of four input channels: r0-r3 the accumulators, r4-r7 the
 * weights, r8/r9 the widened input, r10 x, r11 w, r12 the offset pair, lr
 * the iteration count; the job's words 0-5 and 8-9 are pushed with a run
 * counter and read from sp */
#define PE_PW_GROUP                                                           \
    "ldr    r8, [r10], #4\n\t"                                                \
    "sxtab16 r9, r12, r8, ror #8\n\t"                                         \
    "sxtab16 r8, r12, r8\n\t"                                                 \
    "ldmia  r11!, {r4-r7}\n\t"                                                \
    "smlad  r0, r4, r8, r0\n\t"                                               \
    "smlad  r0, r5, r9, r0\n\t"                                               \
    "smlad  r1, r6, r8, r1\n\t"                                               \
    "smlad  r1, r7, r9, r1\n\t"                                               \
    "ldmia  r11!, {r4-r7}\n\t"                                                \
    "smlad  r2, r4, r8, r2\n\t"                                               \
    "smlad  r2, r5, r9, r2\n\t"                                               \
    "smlad  r3, r6, r8, r3\n\t"                                               \
    "smlad  r3, r7, r9, r3\n\t"
/* the run and column loops both forms share: the job's words 0-5 and 8-9
 * pushed with a run counter, runs of rows summed by body into r0-r3, then
 * the column's tail (label 4) */
#define PE_PW_LOOPS(body)                                                     \
    "ldr    r10, [r0, #24]\n\t"                                              \
    "ldr    r12, [r0, #28]\n\t"                                              \
    "ldrd   r4, r5, [r0, #32]\n\t"                                           \
    "push   {r4, r5, r6}\n\t"                                                \
    "ldm    r0, {r4-r9}\n\t"                                                 \
    "push   {r4-r9}\n\t"                                                     \
    "1:\n\t"                                                                 \
    "ldm    r4, {r0-r3}\n\t"                                                 \
    "ldr    r11, [sp, #16]\n\t"                                              \
    "ldr    r9, [sp, #24]\n\t"                                               \
    "str    r9, [sp, #32]\n\t"                                               \
    "3:\n\t"                                                                 \
    "ldr    lr, [sp, #20]\n\t"                                               \
    "2:\n\t" body                                                            \
    "subs   lr, lr, #1\n\t"                                                  \
    "bne    2b\n\t"                                                          \
    "ldr    r9, [sp, #32]\n\t"                                               \
    "subs   r9, r9, #1\n\t"                                                  \
    "beq    4f\n\t"                                                          \
    "str    r9, [sp, #32]\n\t"                                               \
    "ldr    r8, [sp, #28]\n\t"                                               \
    "add    r10, r10, r8\n\t"                                                \
    "b      3b\n\t"                                                          \
    "4:\n\t"
/* the operands and clobbers of every pointwise asm loop (job in r0) */
#define PE_PW_OPERANDS                                                        \
    : "+r"(r0_job)                                                            \
    :                                                                         \
    : "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "r12", "lr", "cc", \
      "memory"
/* the fused loops' next column: the input pointer on by the column step,
 * one column fewer, back to label 1 while any is left */
#define PE_PWQ_NEXT_COLUMN                                                    \
    "ldrd   r4, r5, [sp]\n\t"                                                 \
    "ldr    r7, [sp, #12]\n\t"                                                \
    "add    r10, r10, r7\n\t"                                                 \
    "subs   r5, r5, #1\n\t"                                                   \
    "str    r5, [sp, #4]\n\t"                                                 \
    "bne    1b\n\t"
#define PE_PW_FN(name, body)                                                  \
    __attribute__((noinline)) static void name(const pw_job *job)             \
    {                                                                         \
        register const pw_job *r0_job __asm__("r0") = job;                    \
        __asm__ volatile(PE_PW_LOOPS(body)                                    \
                         "ldrd   r4, r5, [sp]\n\t"                            \
                         "stm    r4, {r0-r3}\n\t"                             \
                         "ldrd   r6, r7, [sp, #8]\n\t"                        \
                         "add    r4, r4, r6\n\t"                              \
                         "add    r10, r10, r7\n\t"                            \
                         "subs   r5, r5, #1\n\t"                              \
                         "strd   r4, r5, [sp]\n\t"                            \
                         "bne    1b\n\t"                                      \
                         "add    sp, sp, #36\n\t"                             \
                         PE_PW_OPERANDS);                                     \
    }
PE_PW_FN(pw_u1, PE_PW_GROUP)
PE_PW_FN(pw_u2, PE_PW_GROUP PE_PW_GROUP)
PE_PW_FN(pw_u4, PE_PW_GROUP PE_PW_GROUP PE_PW_GROUP PE_PW_GROUP)
/* the same loops, each column's sums then requantized in registers (the
 * pw_rq "fast" arithmetic with SSAT to int8: every channel fast, the full
 * int8 activation range) and its four bytes stored as one word; the
 * accumulators start from the 4 words at acc (acc_step 0) */
#define PE_PWQ_CH(a)                                                          \
    "ldm    r11!, {r4-r6}\n\t"                                                 \
    "lsl    " a ", " a ", #1\n\t"                                              \
    "smmulr " a ", " a ", r4\n\t"                                              \
    "add    " a ", " a ", " a ", asr #31\n\t"                                   \
    "add    " a ", " a ", r5\n\t"                                              \
    "asr    " a ", " a ", r6\n\t"                                              \
    "ssat   " a ", #8, " a "\n\t"
#define PE_PWQ_FN(name, body)                                                 \
    __attribute__((noinline)) static void name(const pw_job *job)             \
    {                                                                         \
        register const pw_job *r0_job __asm__("r0") = job;                    \
        __asm__ volatile("add    r4, r0, #40\n\t"                              \
                         "ldm    r4, {r4-r6}\n\t"                              \
                         "push   {r4-r6}\n\t"                                  \
                         PE_PW_LOOPS(body)                                    \
                         "ldr    r11, [sp, #36]\n\t"                          \
                         PE_PWQ_CH("r0") PE_PWQ_CH("r1") PE_PWQ_CH("r2")       \
                         PE_PWQ_CH("r3")                                      \
                         "and    r0, r0, #255\n\t"                             \
                         "bfi    r0, r1, #8, #8\n\t"                           \
                         "bfi    r0, r2, #16, #8\n\t"                          \
                         "bfi    r0, r3, #24, #8\n\t"                          \
                         "ldrd   r4, r5, [sp, #40]\n\t"                       \
                         "str    r0, [r4]\n\t"                                \
                         "add    r4, r4, r5\n\t"                              \
                         "str    r4, [sp, #40]\n\t"                           \
                         PE_PWQ_NEXT_COLUMN                                   \
                         "add    sp, sp, #48\n\t"                             \
                         PE_PW_OPERANDS);                                     \
    }
PE_PWQ_FN(pwq_u1, PE_PW_GROUP)
PE_PWQ_FN(pwq_u2, PE_PW_GROUP PE_PW_GROUP)
PE_PWQ_FN(pwq_u4, PE_PW_GROUP PE_PW_GROUP PE_PW_GROUP PE_PW_GROUP)
/* the fused loops for one run per column (rows 1: 1x1 kernels, patches):
 * no run counter */
#define PE_PWQ1_FN(name, body)                                                \
    __attribute__((noinline)) static void name(const pw_job *job)             \
    {                                                                         \
        register const pw_job *r0_job __asm__("r0") = job;                    \
        __asm__ volatile("add    r4, r0, #40\n\t"                              \
                         "ldm    r4, {r4-r6}\n\t"                              \
                         "push   {r4-r6}\n\t"                                  \
                         "ldr    r10, [r0, #24]\n\t"                          \
                         "ldr    r12, [r0, #28]\n\t"                          \
                         "ldm    r0, {r4-r9}\n\t"                             \
                         "push   {r4-r9}\n\t"                                 \
                         "1:\n\t"                                             \
                         "ldm    r4, {r0-r3}\n\t"                             \
                         "ldrd   r11, lr, [sp, #16]\n\t"                      \
                         "2:\n\t" body                                        \
                         "subs   lr, lr, #1\n\t"                              \
                         "bne    2b\n\t"                                      \
                         "ldr    r11, [sp, #24]\n\t"                          \
                         PE_PWQ_CH("r0") PE_PWQ_CH("r1") PE_PWQ_CH("r2")       \
                         PE_PWQ_CH("r3")                                      \
                         "ldrd   r4, r5, [sp, #28]\n\t"                       \
                         "strb   r0, [r4]\n\t"                                \
                         "strb   r1, [r4, #1]\n\t"                            \
                         "strb   r2, [r4, #2]\n\t"                            \
                         "strb   r3, [r4, #3]\n\t"                            \
                         "add    r4, r4, r5\n\t"                              \
                         "str    r4, [sp, #28]\n\t"                           \
                         PE_PWQ_NEXT_COLUMN                                   \
                         "add    sp, sp, #36\n\t"                             \
                         PE_PW_OPERANDS);                                     \
    }
PE_PWQ1_FN(pwq1_u1, PE_PW_GROUP)
PE_PWQ1_FN(pwq1_u2, PE_PW_GROUP PE_PW_GROUP)
PE_PWQ1_FN(pwq1_u4, PE_PW_GROUP PE_PW_GROUP PE_PW_GROUP PE_PW_GROUP)
#undef PE_PWQ1_FN
#undef PE_PWQ_FN
#undef PE_PWQ_NEXT_COLUMN
#undef PE_PW_OPERANDS
#undef PE_PWQ_CH
#undef PE_PW_FN
#undef PE_PW_GROUP
#endif

/* run a job whose runs have ng >= 1 groups of four input channels */
static void pw_run(pw_job *job, int32_t ng)
{
#if PE_DSP_ASM
    PE_DSP_UNROLL_421(job, ng, pw_u1, pw_u2, pw_u4);
#else
    const int8_t *x = job->x;
    int32_t *acc = job->acc;
    int32_t c, g, j, r;
    for (c = 0; c < job->ncol; c++) {
        const uint32_t *w = job->w;
        int32_t a[4];
        for (j = 0; j < 4; j++) {
            a[j] = acc[j];
        }
        for (r = 0; r < job->rows; r++) {
            if (r > 0) {
                x += job->row_adv;
            }
            for (g = 0; g < ng; g++) {
                const uint32_t v = pe_rd32(x);
                const uint32_t xe = __sxtab16(job->off2, v), xo = pe_sxtab16_ror8(job->off2, v);
                for (j = 0; j < 4; j++) {
                    a[j] = __smlad(w[2 * j], xe, __smlad(w[2 * j + 1], xo, a[j]));
                }
                w += 8;
                x += 4;
            }
        }
        for (j = 0; j < 4; j++) {
            acc[j] = a[j];
        }
        acc = (int32_t *)(void *)((uint8_t *)(void *)acc + job->acc_step);
        x += job->x_adv;
    }
#endif
}

/* pw_run with the requantization fused (job->rq, out, out_step; the
 * accumulators start from the 4 words at job->acc for every column):
 * pw_store's fast arithmetic, full int8 range, all four channels fast */
static void pw_run_q(pw_job *job, int32_t ng)
{
#if PE_DSP_ASM
    job->acc_step = 0;
    if (job->rows == 1) {
        PE_DSP_UNROLL_421(job, ng, pwq1_u1, pwq1_u2, pwq1_u4);
        return;
    }
    PE_DSP_UNROLL_421(job, ng, pwq_u1, pwq_u2, pwq_u4);
#else
    int32_t *const start = job->acc;
    int8_t *o = job->out;
    int32_t acc[4], c, j, n = job->ncol;
    job->acc = acc;
    job->acc_step = 0;
    job->ncol = 1;
    for (c = 0; c < n; c++) {
        for (j = 0; j < 4; j++) {
            acc[j] = start[j];
        }
        pw_run(job, ng);
        for (j = 0; j < 4; j++) {
            const int32_t *r = job->rq + 3 * j;
            int32_t d;
            __asm__("smmulr %0, %1, %2" : "=r"(d) : "r"((int32_t)((uint32_t)acc[j] << 1)), "r"(r[0]));
            o[j] = (int8_t)__ssat(pe_fx_asr32(d + pe_fx_asr32(d, 31) + r[1], r[2]), 8);
        }
        o += job->out_step;
        job->x += (ptrdiff_t)job->rows * (job->row_adv + 4 * ng) - job->row_adv + job->x_adv;
    }
    job->acc = start;
    job->ncol = n;
#endif
}

/* nb (1..4) output channels' weights [0, kn) (rows w, w + ws, ...; kn % 4
 * == 0) widened into the interleaved block pw_run reads; channels nb..3
 * get zero weights */
static void pw_widen(uint32_t *restrict dst, const int8_t *restrict w, int32_t ws, int32_t kn,
                     int32_t nb)
{
    int32_t g, j;
    if (nb == 4) {
        pe_dsp_widen_w4(dst, w, (size_t)ws, kn >> 2);
        return;
    }
    for (g = 0; g < kn >> 2; g++) {
        for (j = 0; j < 4; j++) {
            uint32_t v = 0;
            if (j < nb) {
                v = pe_rd32(w + (size_t)j * (size_t)ws + (size_t)g * 4u);
            }
            dst[2 * j] = __sxtb16(v);
            dst[2 * j + 1] = pe_sxtb16_ror8(v);
        }
        dst += 8;
    }
}

/* one output channel's requantization: fast = pe_dsp_requant's arithmetic
 * with the rounding constant and the output offset folded into k:
 *   d = SMMULR(2acc, m) = (acc * m + 2^30) >> 31      (|acc| < 2^30: no wrap)
 *   v = (d + [d < 0 ? -1 : 0] + 2^(right-1) + off * 2^right) >> right
 * (|d| < 2^30 and -128 <= off <= 127 keep the sum inside int32, and adding
 * off * 2^right before the floor shift adds off after it), then the clamp;
 * else the general finish (single rounding, shifts outside 1..23, large
 * accumulators). */
typedef struct {
    int32_t m, sh, right, k, fast;
} pw_rq;

static void pw_rq_setup(pw_rq *r, const pe_per_channel_quant *q, int32_t o, pe_rounding mode,
                        int32_t small, int32_t ooff)
{
    r->m = q->multiplier[o];
    r->sh = q->shift[o];
    r->fast = small && mode == PE_ROUND_DOUBLE && r->sh <= -1 && r->sh >= -23;
    r->right = r->fast ? -r->sh : 0;
    r->k = r->fast ? ((int32_t)1 << (r->right - 1)) + (int32_t)((uint32_t)ooff << r->right) : 0;
}

/* n outputs of one channel: acc[4 c] -> o[c * o_step] */
static void pw_store(const int32_t *restrict acc, int8_t *restrict o, size_t o_step, int32_t n,
                     const pw_rq *r, pe_rounding mode, int32_t amin, int32_t amax, int32_t ooff)
{
    const int32_t *const end = acc + 4 * (size_t)n;
    if (r->fast) {
        const int32_t m = r->m, k = r->k, right = r->right;
        int32_t d;
        if (amin == -128 && amax == 127) {
            while (acc != end) {
                __asm__("smmulr %0, %1, %2" : "=r"(d) : "r"((int32_t)((uint32_t)*acc << 1)), "r"(m));
                *o = (int8_t)__ssat(pe_fx_asr32(d + pe_fx_asr32(d, 31) + k, right), 8);
                acc += 4;
                o += o_step;
            }
            return;
        }
        while (acc != end) {
            int32_t v;
            __asm__("smmulr %0, %1, %2" : "=r"(d) : "r"((int32_t)((uint32_t)*acc << 1)), "r"(m));
            v = pe_fx_asr32(d + pe_fx_asr32(d, 31) + k, right);
            v = v > amin ? v : amin;
            *o = (int8_t)(v < amax ? v : amax);
            acc += 4;
            o += o_step;
        }
        return;
    }
    while (acc != end) {
        *o = finish_slow(*acc, r->m, r->sh, mode, amin, amax, ooff);
        acc += 4;
        o += o_step;
    }
}

/* n columns (x_step bytes apart) x nb output channels (ws bytes apart) over
 * len bytes: acc[4 c + j] += sum w_j[t] * (x_c[t] + off) */
static void cv_edge(int32_t *acc, int32_t n, const int8_t *x, size_t x_step, const int8_t *w,
                    size_t ws, int32_t nb, int32_t len, int32_t off)
{
    int32_t c, t, j;
    for (c = 0; c < n; c++) {
        for (t = 0; t < len; t++) {
            const int32_t xv = (int32_t)x[(size_t)c * x_step + (size_t)t] + off;
            for (j = 0; j < nb; j++) {
                acc[4 * c + j] += w[(size_t)j * ws + (size_t)t] * xv;
            }
        }
    }
}

/* Convs whose kernel rows (of a kernel with more than one row) are under
 * 16 bytes, or off the word grid (in_c % 4 != 0:
 * the first conv of an image model, 3 channels; of an audio one, 1): each
 * output pixel's window is gathered into a patch of L = kh * kw * in_c
 * bytes (padding taps as -input_offset, which the widening turns into 0;
 * padded up to a multiple of 4 with zero weights), PE_PW_COLS pixels at a
 * time, then each 4-channel block (weights widened once per batch of
 * patches, the last partial word padded with zeros) runs the column loops
 * over the patches as one contiguous run each. */
static int32_t cv_patch_len(const pe_conv_params *p, const pe_dims *in, const pe_dims *f)
{
    const int64_t run = (int64_t)f->w * in->c;
    if ((run & 3) == 0 && p->dilation.w == 1 && (run >= 16 || f->h == 1)) {
        return 0; /* the block loops (a one-row kernel needs no patch) */
    }
    return (int32_t)(((int64_t)f->h * run + 3) & ~(int64_t)3);
}

/* nb channels' first len bytes (rows ws apart) widened, zero weights up to
 * len rounded up to 4 and for channels nb..3 */
static void cv_widen_pad(uint32_t *restrict dst, const int8_t *restrict w, size_t ws, int32_t len,
                         int32_t nb)
{
    int32_t g, j, b;
    for (g = 0; g < (len + 3) >> 2; g++) {
        for (j = 0; j < 4; j++) {
            uint32_t v = 0;
            if (j < nb) {
                const int8_t *const r = w + (size_t)j * ws + (size_t)g * 4u;
                if (4 * g + 4 <= len) {
                    v = pe_rd32(r);
                } else {
                    for (b = 0; b < len - 4 * g; b++) {
                        v |= (uint32_t)(uint8_t)r[b] << (8 * b);
                    }
                }
            }
            dst[2 * j] = __sxtb16(v);
            dst[2 * j + 1] = pe_sxtb16_ror8(v);
        }
        dst += 8;
    }
}

static void cv_patch_rows(const pe_conv_params *p, const pe_per_channel_quant *q,
                          const pe_dims *in, const int8_t *image, const pe_dims *f,
                          const int8_t *filter, const int32_t *bias, const pe_dims *out,
                          int32_t oy0, int32_t oy1, int8_t *o, uint32_t *wblk, int32_t wbytes)
{
    const int32_t ic = in->c, oc_n = out->c, out_w = out->w, kh = f->h, kw = f->w;
    const int32_t L = kh * kw * ic, L4 = (L + 3) & ~3;
    const int32_t amin = p->activation.min, amax = p->activation.max, ooff = p->output_offset;
    const int8_t pad_v = (int8_t)(-p->input_offset);
    const pe_rounding mode = p->rounding;
    const int32_t total = (oy1 - oy0) * out_w;
    int8_t *const patch = (int8_t *)(void *)(wblk + 2 * L4);
    int32_t cap = (wbytes - 8 * L4) / L4;
    int32_t acc[PE_PW_COLS * 4];
    int32_t start[4], rqw[12];
    pw_rq rq[4];
    pw_job job;
    int32_t i0, n, i, oc, nb, j, fuse, ky, kx, c;
    cap = cap < PE_PW_COLS ? cap : PE_PW_COLS;
    job.off2 = pe_dup16(p->input_offset);
    job.rq = rqw;
    job.out_step = oc_n;
    job.rows = 1;
    job.row_adv = 0;
    job.x_adv = 0;
    job.w = wblk;
    for (i0 = 0; i0 < total; i0 += n) {
        n = total - i0 < cap ? total - i0 : cap;
        for (i = 0; i < n; i++) {
            const int32_t oy = oy0 + (i0 + i) / out_w, ox = (i0 + i) % out_w;
            const int32_t iy0 = oy * p->stride.h - p->padding.top;
            const int32_t ix0 = ox * p->stride.w - p->padding.left;
            int8_t *d = patch + (size_t)i * (size_t)L4;
            for (ky = 0; ky < kh; ky++) {
                const int32_t iy = iy0 + ky * p->dilation.h;
                for (kx = 0; kx < kw; kx++) {
                    const int32_t ix = ix0 + kx * p->dilation.w;
                    if (iy < 0 || iy >= in->h || ix < 0 || ix >= in->w) {
                        for (c = 0; c < ic; c++) {
                            d[c] = pad_v;
                        }
                    } else {
                        const int8_t *const s =
                            image + ((size_t)iy * (size_t)in->w + (size_t)ix) * (size_t)ic;
                        for (c = 0; c < ic; c++) {
                            d[c] = s[c];
                        }
                    }
                    d += ic;
                }
            }
            for (c = L; c < L4; c++) {
                *d++ = 0;
            }
        }
        for (oc = 0; oc < oc_n; oc += 4) {
            nb = oc_n - oc < 4 ? oc_n - oc : 4;
            cv_widen_pad(wblk, filter + (size_t)oc * (size_t)L, (size_t)L, L, nb);
            fuse = nb == 4 && amin == -128 && amax == 127;
            for (j = 0; j < 4; j++) {
                const int32_t b = bias != NULL && j < nb ? bias[oc + j] : 0;
                start[j] = b;
                if (j < nb) {
                    pw_rq_setup(&rq[j], q, oc + j, mode, acc_small((int64_t)L, b), ooff);
                    fuse = fuse && rq[j].fast;
                    rqw[3 * j] = rq[j].m;
                    rqw[3 * j + 1] = rq[j].k;
                    rqw[3 * j + 2] = rq[j].right;
                }
            }
            job.ncol = n;
            job.x = patch;
            if (fuse) {
                job.acc = start;
                job.out = o + (size_t)i0 * (size_t)oc_n + (size_t)oc;
                pw_run_q(&job, L4 >> 2);
                continue;
            }
            for (i = 0; i < n; i++) {
                __builtin_memcpy(acc + 4 * i, start, 16);
            }
            job.acc = acc;
            job.acc_step = 16;
            pw_run(&job, L4 >> 2);
            for (j = 0; j < nb; j++) {
                pw_store(acc + j, o + (size_t)i0 * (size_t)oc_n + (size_t)(oc + j), (size_t)oc_n,
                         n, &rq[j], mode, amin, amax, ooff);
            }
        }
    }
}

int32_t pe_cv_dsp_applies(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                          const pe_dims *out)
{
    const int64_t run = (int64_t)f->w * in->c;
    (void)out;
    if (p->groups != 1 || f->c != in->c || run > ((int64_t)1 << 24)) {
        return 0;
    }
    if ((run & 3) == 0 && p->dilation.w == 1 && (run >= 16 || f->h == 1)) {
        return 1;
    }
    /* patches of at most 128 bytes (PE_PW_COLS of them beside the widened
     * block fit 5 KB; 2 KB hold 10) */
    return (int64_t)f->h * run <= 128;
}

int32_t pe_cv_dsp_bytes(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                        int32_t *least)
{
    const int32_t L4 = cv_patch_len(p, in, f);
    if (L4 > 0) {
        *least = 12 * L4;
        return (8 + PE_PW_COLS) * L4;
    }
    *least = 256;
    return (int32_t)((int64_t)f->h * f->w * in->c * 8);
}

/* the output columns of one output row in segments of equal tap ranges
 * [kx_lo, kx_hi]: the interior ones (every tap inside the input row) in
 * pieces of at most PE_PW_COLS, every other column alone */
typedef struct {
    int32_t ox, n, lo, hi;
} cv_seg;

static int32_t cv_next_seg(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                           const pe_dims *out, int32_t ox, int32_t ox_a, int32_t ox_b,
                           cv_seg *sg)
{
    sg->ox = ox;
    if (ox >= ox_a && ox <= ox_b) {
        sg->n = ox_b - ox + 1 < PE_PW_COLS ? ox_b - ox + 1 : PE_PW_COLS;
        sg->lo = 0;
        sg->hi = f->w - 1;
    } else {
        sg->n = 1;
        tap_range(ox * p->stride.w - p->padding.left, 1, f->w, in->w, &sg->lo, &sg->hi);
    }
    (void)out;
    return ox + sg->n;
}

void pe_cv_dsp_rows(const pe_conv_params *p, const pe_per_channel_quant *q, const pe_dims *in,
                    const int8_t *image, const pe_dims *f, const int8_t *filter,
                    const int32_t *bias, const pe_dims *out, int32_t oy0, int32_t oy1, int8_t *o,
                    uint32_t *wblk, int32_t wbytes)
{
    const int32_t ic = in->c, oc_n = out->c, out_w = out->w, kh = f->h, kw = f->w;
    const int32_t s_h = p->stride.h, s_w = p->stride.w, d_h = p->dilation.h;
    const int32_t pad_l = p->padding.left;
    const int32_t amin = p->activation.min, amax = p->activation.max, ooff = p->output_offset;
    const pe_rounding mode = p->rounding;
    const size_t in_row = (size_t)in->w * (size_t)ic;
    const int32_t run = kw * ic;                   /* bytes of a kernel row */
    const size_t ws = (size_t)kh * (size_t)run;    /* bytes of a filter */
    /* the whole 4-channel block widened once, else pieces of kc bytes of a
     * kernel row widened per segment group (multiples of 4) */
    const int32_t whole = (int64_t)ws * 8 <= (int64_t)wbytes;
    const int32_t kc = whole ? run : (wbytes / 32) * 4;
    /* 1x1, stride 1, equal widths: the rows' pixels are one run of columns */
    const int32_t flat = kh == 1 && kw == 1 && s_h == 1 && s_w == 1 && in->w == out_w &&
                         p->padding.top == 0 && pad_l == 0 && out->h <= in->h;
    /* output columns [ox_a, ox_b] have every tap inside the input row */
    const int32_t ox_a = pad_l / s_w + (pad_l % s_w != 0 ? 1 : 0);
    const int32_t room = in->w - kw + pad_l;
    int32_t ox_b = room < 0 ? -1 : room / s_w;
    int32_t acc[PE_PW_COLS * 4];
    int32_t start[4];
    pw_rq rq[4];
    pw_job job;
    cv_seg seg[PE_PW_COLS];
    int32_t rqw[12];
    int32_t oc, nb, j, oy, ox, c, ns, si, ky, ky_lo, ky_hi, k0, kn, n_done, fuse;
    if (ox_b > out_w - 1) {
        ox_b = out_w - 1;
    }
    if (cv_patch_len(p, in, f) > 0 && (int64_t)(oy1 - oy0) * out_w >= 2) {
        cv_patch_rows(p, q, in, image, f, filter, bias, out, oy0, oy1, o, wblk, wbytes);
        return;
    }
    if ((int64_t)(oy1 - oy0) * out_w < 2) {
        /* one pixel: each weight is used once, widening it first costs
         * more than it saves; the per-pixel loops (SXTB16 on both) */
        for (oy = oy0; oy < oy1; oy++) {
            for (ox = 0; ox < out_w; ox++) {
                const int32_t iy0 = oy * s_h - p->padding.top, ix0 = ox * s_w - pad_l;
                int32_t kx_lo, kx_hi;
                tap_range(iy0, d_h, kh, in->h, &ky_lo, &ky_hi);
                tap_range(ix0, 1, kw, in->w, &kx_lo, &kx_hi);
                conv_pixel_dsp(p, q, in, image, f, filter, bias, out, iy0, ix0, ky_lo, ky_hi,
                               kx_lo, kx_hi,
                               o + ((size_t)(oy - oy0) * (size_t)out_w + (size_t)ox) *
                                       (size_t)oc_n);
            }
        }
        return;
    }
    job.off2 = pe_dup16(p->input_offset);
    job.rq = rqw;
    job.out_step = oc_n;
    for (oc = 0; oc < oc_n; oc += 4) {
        const int8_t *const wo = filter + (size_t)oc * ws;
        nb = oc_n - oc < 4 ? oc_n - oc : 4;
        if (whole) {
            pw_widen(wblk, wo, (int32_t)ws, (int32_t)ws, nb);
        }
        fuse = nb == 4 && amin == -128 && amax == 127;
        for (j = 0; j < 4; j++) {
            const int32_t b = bias != NULL && j < nb ? bias[oc + j] : 0;
            start[j] = b;
            if (j < nb) {
                pw_rq_setup(&rq[j], q, oc + j, mode, acc_small((int64_t)ws, b), ooff);
                fuse = fuse && rq[j].fast;
                rqw[3 * j] = rq[j].m;
                rqw[3 * j + 1] = rq[j].k;
                rqw[3 * j + 2] = rq[j].right;
            }
        }
        if (flat && whole && fuse) {
            /* every pixel of the call in one fused job */
            job.acc = start;
            job.ncol = (oy1 - oy0) * out_w;
            job.rows = 1;
            job.row_adv = 0;
            job.x_adv = 0;
            job.x = image + (size_t)oy0 * in_row;
            job.w = wblk;
            job.out = o + (size_t)oc;
            pw_run_q(&job, ic >> 2);
            continue;
        }
        for (oy = oy0; oy < oy1; oy++) {
            const int32_t iy0 = oy * s_h - p->padding.top;
            int8_t *const orow = o + (size_t)(oy - oy0) * (size_t)out_w * (size_t)oc_n +
                                 (size_t)oc;
            tap_range(iy0, d_h, kh, in->h, &ky_lo, &ky_hi);
            if (flat) {
                /* every row of the call as one run of pixels */
                ky_lo = 0;
                ky_hi = 0;
            }
            n_done = 0;
            ox = 0;
            while (ox < (flat ? (oy1 - oy0) * out_w : out_w)) {
                /* a group of segments with at most PE_PW_COLS columns */
                ns = 0;
                c = 0;
                while (ns < PE_PW_COLS && ox < (flat ? (oy1 - oy0) * out_w : out_w)) {
                    if (flat) {
                        const int32_t left = (oy1 - oy0) * out_w - ox;
                        seg[ns].ox = ox;
                        seg[ns].n = left < PE_PW_COLS - c ? left : PE_PW_COLS - c;
                        seg[ns].lo = 0;
                        seg[ns].hi = 0;
                        ox += seg[ns].n;
                    } else {
                        if (ox >= ox_a && ox <= ox_b && ox_b - ox + 1 > PE_PW_COLS - c) {
                            if (c > 0) {
                                break; /* the interior piece starts the next group */
                            }
                        }
                        ox = cv_next_seg(p, in, f, out, ox, ox_a, ox_b, &seg[ns]);
                    }
                    c += seg[ns].n;
                    ns++;
                    if (c >= PE_PW_COLS) {
                        break;
                    }
                }
                for (j = 0; j < c; j++) {
                    __builtin_memcpy(acc + 4 * j, start, 16);
                }
                for (ky = ky_lo; ky <= ky_hi; ky++) {
                    const int8_t *const xrow =
                        image + (flat ? (size_t)oy0 * in_row
                                      : (size_t)(iy0 + ky * d_h) * in_row);
                    for (k0 = 0; k0 < run; k0 += kc) {
                        kn = run - k0 < kc ? run - k0 : kc;
                        if (!whole) {
                            pw_widen(wblk, wo + (size_t)ky * (size_t)run + (size_t)k0, (int32_t)ws,
                                     kn, nb);
                        }
                        for (si = 0, j = 0; si < ns; j += seg[si].n, si++) {
                            /* the segment's tap bytes within this piece */
                            int32_t lo = seg[si].lo * ic, hi = (seg[si].hi + 1) * ic, nr = 1;
                            const int32_t all = whole && lo == 0 && hi == run;
                            lo = lo > k0 ? lo : k0;
                            hi = hi < k0 + kn ? hi : k0 + kn;
                            if (lo >= hi) {
                                continue;
                            }
                            if (((lo | hi) & 3) != 0) {
                                /* clipped taps off the word grid (in_c % 4
                                 * != 0): plain multiply-adds, once per row */
                                if (k0 == 0) {
                                    cv_edge(acc + 4 * j, seg[si].n,
                                            xrow + ((ptrdiff_t)(seg[si].ox * s_w - pad_l) * ic + lo),
                                            (size_t)s_w * (size_t)ic,
                                            wo + (size_t)ky * (size_t)run + (size_t)lo, ws, nb,
                                            hi - lo, p->input_offset);
                                }
                                continue;
                            }
                            if (all) {
                                /* every kernel row's whole run: one job,
                                 * the widened rows follow each other */
                                if (ky > ky_lo) {
                                    continue; /* (done with the first row) */
                                }
                                nr = ky_hi - ky_lo + 1;
                            }
                            job.acc = acc + 4 * j;
                            job.ncol = seg[si].n;
                            job.acc_step = 16;
                            job.rows = nr;
                            job.row_adv = (int32_t)((size_t)d_h * in_row) - (hi - lo);
                            job.x_adv = s_w * ic - (hi - lo) -
                                        (nr - 1) * (int32_t)((size_t)d_h * in_row);
                            job.x = xrow + ((ptrdiff_t)(seg[si].ox * s_w - pad_l) * ic + lo);
                            job.w = wblk + (size_t)(whole ? (size_t)ky * (size_t)run + (size_t)lo
                                                          : (size_t)(lo - k0)) * 2u;
                            if (all && fuse) {
                                /* requantized and stored by the job */
                                job.acc = start;
                                job.out = orow + (size_t)(n_done + j) * (size_t)oc_n;
                                pw_run_q(&job, (hi - lo) >> 2);
                                continue;
                            }
                            pw_run(&job, (hi - lo) >> 2);
                        }
                    }
                }
                for (si = 0, j = 0; si < ns; j += seg[si].n, si++) {
                    int32_t jj;
                    if (fuse && whole && seg[si].lo == 0 && seg[si].hi == kw - 1 &&
                        ky_lo <= ky_hi) {
                        continue; /* (stored by pw_run_q) */
                    }
                    for (jj = 0; jj < nb; jj++) {
                        pw_store(acc + 4 * j + jj,
                                 orow + (size_t)(n_done + j) * (size_t)oc_n + (size_t)jj,
                                 (size_t)oc_n, seg[si].n, &rq[jj], mode, amin, amax, ooff);
                    }
                }
                n_done += c;
            }
            if (flat) {
                break;
            }
        }
    }
}

/* whole output rows of every image through pe_cv_dsp_rows on the stack:
 * PE_CV_STACK bytes for the widened weight block and, where the output
 * overlaps the input (the planner's "pixels" model, pe_conv_gather.h),
 * batches of finished int8 rows, written once every window of the batch has
 * been read (so every later window still reads only bytes the raster order
 * would not have overwritten yet). Returns 0 (nothing done) where the block
 * cannot hold a useful piece of weights and one output row. */
#define PE_CV_STACK 2048
static void cv_copy(int8_t *restrict d, const int8_t *restrict s, size_t n)
{
    size_t i;
    for (i = 0; i + 4 <= n; i += 4) {
        __builtin_memcpy(d + i, s + i, 4);
    }
    for (; i < n; i++) {
        d[i] = s[i];
    }
}

__attribute__((noinline)) static int32_t cv_image(const pe_conv_params *p,
                                                  const pe_per_channel_quant *q,
                                                  const pe_dims *in, const int8_t *img,
                                                  const pe_dims *f, const int8_t *filter,
                                                  const int32_t *bias, const pe_dims *out,
                                                  int8_t *dst, int32_t disjoint)
{
    uint32_t buf[PE_CV_STACK / 4];
    const size_t row_b = (size_t)out->w * (size_t)out->c;
    int32_t least;
    const int64_t need = pe_cv_dsp_bytes(p, in, f, &least);
    int32_t wb, cap, a, e;
    if (disjoint) {
        pe_cv_dsp_rows(p, q, in, img, f, filter, bias, out, 0, out->h, dst, buf, PE_CV_STACK);
        return 1;
    }
    if (row_b > PE_CV_STACK - 256) {
        return 0;
    }
    wb = (int32_t)((PE_CV_STACK - row_b) / 32u * 32u);
    if (need <= wb) {
        wb = (int32_t)((need + 31) / 32 * 32);
    }
    if (wb < least && wb < need) {
        return 0;
    }
    cap = (int32_t)((PE_CV_STACK - (size_t)wb) / row_b);
    for (a = 0; a < out->h; a = e) {
        int8_t *const stage = (int8_t *)(void *)buf + wb;
        e = a + cap < out->h ? a + cap : out->h;
        pe_cv_dsp_rows(p, q, in, img, f, filter, bias, out, a, e, stage, buf, wb);
        cv_copy(dst + (size_t)a * row_b, stage, (size_t)(e - a) * row_b);
    }
    return 1;
}

/* requantization of output channel o: pe_dsp_requant where it applies
 * (double rounding, right shift 1..23, |acc| < 2^30 by the bound) */
static inline __attribute__((always_inline)) int8_t dw_finish(int32_t acc,
                                                               const pe_per_channel_quant *q,
                                                               int32_t o, pe_rounding mode,
                                                               int32_t small, int32_t amin,
                                                               int32_t amax, int32_t ooff)
{
    const int32_t m = q->multiplier[o], sh = q->shift[o];
    if (small && mode == PE_ROUND_DOUBLE && sh <= -1 && sh >= -23) {
        return pe_dsp_requant(acc, m, -sh, amin, amax, ooff);
    }
    return finish_slow(acc, m, sh, mode, amin, amax, ooff);
}

/* depthwise, one pixel, every output channel (raster order, as the portable
 * depthwise_pixel: see run), four channels per pass: multiplier 1 takes
 * four input channels per word (SXTAB16 with the offset), a multiplier
 * divisible by 4 one input byte per tap for four outputs; SMLABB / SMLATT
 * (or SMLATB) on SXTB16-widened weight words. The last out_c % 4 channels
 * (multiplier 1) one at a time. */
__attribute__((noinline)) static void depthwise_pixel_dsp(const pe_conv_params *p, const pe_per_channel_quant *q,
                                const pe_dims *in, const int8_t *img, const pe_dims *f,
                                const int8_t *filter, const int32_t *bias, const pe_dims *out,
                                int32_t iy0, int32_t ix0, int32_t ky_lo, int32_t ky_hi,
                                int32_t kx_lo, int32_t kx_hi, int8_t *dst, int32_t small)
{
    const int32_t in_w = in->w, in_c = in->c, kw = f->w, out_c = out->c, mult = p->ch_mult;
    const int32_t off = p->input_offset, amin = p->activation.min, amax = p->activation.max;
    const int32_t ooff = p->output_offset;
    const pe_rounding mode = p->rounding;
    const int32_t any = ky_lo <= ky_hi && kx_lo <= kx_hi;
    const int32_t nky = any ? ky_hi - ky_lo + 1 : 0, nkx = any ? kx_hi - kx_lo + 1 : 0;
    const size_t x_tap = (size_t)p->dilation.w * (size_t)in_c;
    const size_t x_row = (size_t)p->dilation.h * (size_t)in_w * (size_t)in_c;
    const size_t w_row = (size_t)kw * (size_t)out_c;
    const int8_t *const x00 =
        any ? img + ((size_t)(iy0 + ky_lo * p->dilation.h) * (size_t)in_w +
                     (size_t)(ix0 + kx_lo * p->dilation.w)) * (size_t)in_c
            : img;
    const int8_t *const w00 =
        any ? filter + ((size_t)ky_lo * (size_t)kw + (size_t)kx_lo) * (size_t)out_c : filter;
    const uint32_t off2 = pe_dup16(off);
    const int32_t c4 = out_c & ~3;
    int32_t o, ky, kx;
    for (o = 0; o < c4; o += 4) {
        int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        if (bias != NULL) {
            a0 = bias[o];
            a1 = bias[o + 1];
            a2 = bias[o + 2];
            a3 = bias[o + 3];
        }
        if (mult == 1) {
            for (ky = 0; ky < nky; ky++) {
                const int8_t *xp = x00 + (size_t)ky * x_row + (size_t)o;
                const int8_t *wp = w00 + (size_t)ky * w_row + (size_t)o;
                for (kx = 0; kx < nkx; kx++) {
                    const uint32_t r = pe_rd32(xp), v = pe_rd32(wp);
                    const int32_t xe = (int32_t)__sxtab16(off2, r);
                    const int32_t xo = (int32_t)pe_sxtab16_ror8(off2, r);
                    const int32_t we = (int32_t)__sxtb16(v), wo = (int32_t)pe_sxtb16_ror8(v);
                    a0 = __smlabb(we, xe, a0);
                    a2 = __smlatt(we, xe, a2);
                    a1 = __smlabb(wo, xo, a1);
                    a3 = __smlatt(wo, xo, a3);
                    xp += x_tap;
                    wp += out_c;
                }
            }
        } else {
            const int32_t xc = o / mult;
            for (ky = 0; ky < nky; ky++) {
                const int8_t *xp = x00 + (size_t)ky * x_row + (size_t)xc;
                const int8_t *wp = w00 + (size_t)ky * w_row + (size_t)o;
                for (kx = 0; kx < nkx; kx++) {
                    const int32_t xv = (int32_t)*xp + off;
                    const uint32_t v = pe_rd32(wp);
                    const int32_t we = (int32_t)__sxtb16(v), wo = (int32_t)pe_sxtb16_ror8(v);
                    a0 = __smlabb(we, xv, a0);
                    a2 = __smlatb(we, xv, a2);
                    a1 = __smlabb(wo, xv, a1);
                    a3 = __smlatb(wo, xv, a3);
                    xp += x_tap;
                    wp += out_c;
                }
            }
        }
        dst[o] = dw_finish(a0, q, o, mode, small, amin, amax, ooff);
        dst[o + 1] = dw_finish(a1, q, o + 1, mode, small, amin, amax, ooff);
        dst[o + 2] = dw_finish(a2, q, o + 2, mode, small, amin, amax, ooff);
        dst[o + 3] = dw_finish(a3, q, o + 3, mode, small, amin, amax, ooff);
    }
    for (; o < out_c; o++) { /* multiplier 1 only */
        int32_t a = bias != NULL ? bias[o] : 0;
        for (ky = 0; ky < nky; ky++) {
            for (kx = 0; kx < nkx; kx++) {
                a += w00[(size_t)ky * w_row + (size_t)kx * (size_t)out_c + (size_t)o] *
                     ((int32_t)x00[(size_t)ky * x_row + (size_t)kx * x_tap + (size_t)o] + off);
            }
        }
        dst[o] = dw_finish(a, q, o, mode, small, amin, amax, ooff);
    }
}

/* depthwise on the DSP extension: multiplier 1 with at least four channels,
 * or a multiplier divisible by 4 */
static int dw_dsp_ok(const pe_conv_params *p, const pe_dims *out)
{
    return (p->ch_mult == 1 && out->c >= 4) || (p->ch_mult % 4 == 0);
}

/* |acc| < 2^30 for every channel: taps * 128 * 255 + max |bias| */
static int32_t dw_small(const int32_t *bias, int32_t out_c, int64_t taps)
{
    int32_t o, mb = 0;
    if (bias != NULL) {
        for (o = 0; o < out_c; o++) {
            const int32_t b = bias[o] < 0 ? (bias[o] == PE_INT32_MIN ? PE_INT32_MAX : -bias[o])
                                          : bias[o];
            mb = b > mb ? b : mb;
        }
    }
    return acc_small(taps, mb);
}

/* ---- depthwise (multiplier 1), whole image, channels outermost ----
 * For each group of four channels the kernel taps are taken in pairs and
 * each pair gets a record of six words, built once per group:
 *   { o0, o1, W0, W1, W2, W3 }
 * o0, o1: byte offsets of the two taps' input pixels from the window origin;
 * Wj: the int16 pair (2 w[t0][j], 2 w[t1][j]) of channel j (an odd last tap
 * is paired with itself under weight 0). Per pair and window the two input
 * words X0, X1 (channels 0..3 of each tap) are loaded, PKHBT / PKHTB gather
 * bytes (X0.j, X1.j) of channels {0,1} / {2,3} into one word, SXTB16 widens
 * each channel's pair and one SMLAD adds both taps: 13 instructions for 8
 * MACs (1 LDM, 2 LDR, 2 PKH, 4 SXTB16, 4 SMLAD).
 *
 * The input offset is folded into the start value, and every product is
 * doubled (weights stored as 2w, start value 2 * (bias + offset * sum w)):
 * the same int32 sum re-associated and doubled, exact since |acc| < 2^30
 * (dw_small), partial sums wrapping modulo 2^32 at worst. The doubled sum is
 * what the requantization's SMMULR takes, so per output it is
 *   SMMULR, ADD (sign), ADD (rounding constant + output offset << right),
 *   ASR, SSAT (or the clamp), STRB
 * with the per-channel constants set up once per group. Windows clipped by
 * the padding take dw4_clipped (SMLABB / SMLATT per tap, offset applied). */
#define PE_DW_MAX_PAIRS 32

typedef struct {
    int32_t init[4];  /* 2 * (bias + offset * sum w), modulo 2^32 */
    int32_t bias[4];  /* bias (clipped windows) */
    int32_t m[4];     /* multiplier */
    int32_t k[4];     /* 2^(right-1) + output offset * 2^right */
    int32_t r[4];     /* right shift */
    int32_t fast;     /* every channel of the group takes the fast requantization */
} dw_group;

/* a[0..3] += sum over the records [rec, end) of the pairs at window xp
 * (not inlined: its inline assembly needs 13 core registers and lr, which
 * gcc cannot always free inside dw_rect_dsp) */
__attribute__((noinline)) static void dw4_pairs(int32_t *a, const int8_t *xp, const int32_t *rec,
                             const int32_t *end)
{
#if PE_DSP_ASM
    register int32_t o0 __asm__("r4");
    register int32_t o1 __asm__("r5");
    register int32_t w0 __asm__("r6");
    register int32_t w1 __asm__("r8");
    register int32_t w2 __asm__("r9");
    register int32_t w3 __asm__("r10");
    int32_t a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
    __asm__ volatile("1:\n\t"
                     "ldmia  %[rec]!, {%[o0], %[o1], %[w0], %[w1], %[w2], %[w3]}\n\t"
                     "ldr    %[o0], [%[xp], %[o0]]\n\t"
                     "ldr    %[o1], [%[xp], %[o1]]\n\t"
                     "pkhbt  lr, %[o0], %[o1], lsl #16\n\t"
                     "pkhtb  %[o1], %[o1], %[o0], asr #16\n\t"
                     "sxtb16 %[o0], lr\n\t"
                     "smlad  %[a0], %[o0], %[w0], %[a0]\n\t"
                     "sxtb16 %[o0], lr, ror #8\n\t"
                     "smlad  %[a1], %[o0], %[w1], %[a1]\n\t"
                     "sxtb16 %[o0], %[o1]\n\t"
                     "smlad  %[a2], %[o0], %[w2], %[a2]\n\t"
                     "sxtb16 %[o0], %[o1], ror #8\n\t"
                     "smlad  %[a3], %[o0], %[w3], %[a3]\n\t"
                     "cmp    %[rec], %[end]\n\t"
                     "bne    1b\n\t"
                     : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3),
                       [rec] "+r"(rec), [o0] "=&r"(o0), [o1] "=&r"(o1), [w0] "=&r"(w0),
                       [w1] "=&r"(w1), [w2] "=&r"(w2), [w3] "=&r"(w3)
                     : [xp] "r"(xp), [end] "r"(end)
                     : "cc", "memory", "lr");
    a[0] = a0;
    a[1] = a1;
    a[2] = a2;
    a[3] = a3;
#else
    for (; rec != end; rec += 6) {
        const uint32_t x0 = pe_rd32(xp + rec[0]), x1 = pe_rd32(xp + rec[1]);
        const uint32_t lo = (x0 & 0xFFFFu) | (x1 << 16), hi = (x0 >> 16) | (x1 & 0xFFFF0000u);
        a[0] = __smlad(__sxtb16(lo), (uint32_t)rec[2], a[0]);
        a[1] = __smlad(pe_sxtb16_ror8(lo), (uint32_t)rec[3], a[1]);
        a[2] = __smlad(__sxtb16(hi), (uint32_t)rec[4], a[2]);
        a[3] = __smlad(pe_sxtb16_ror8(hi), (uint32_t)rec[5], a[3]);
    }
#endif
}

/* dw4_pairs for a channel multiplier divisible by 4: the four output
 * channels share one input channel, so each tap is one byte and a pair is
 * one halfword pair (x[t0], x[t1]) for all four SMLADs */
static inline void dw4_pairs1(int32_t *a, const int8_t *xp, const int32_t *rec,
                              const int32_t *end)
{
    int32_t a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
    for (; rec != end; rec += 6) {
        const uint32_t x2 = ((uint32_t)(int32_t)xp[rec[0]] & 0xFFFFu) |
                            ((uint32_t)(int32_t)xp[rec[1]] << 16);
        a0 = __smlad(x2, (uint32_t)rec[2], a0);
        a1 = __smlad(x2, (uint32_t)rec[3], a1);
        a2 = __smlad(x2, (uint32_t)rec[4], a2);
        a3 = __smlad(x2, (uint32_t)rec[5], a3);
    }
    a[0] = a0;
    a[1] = a1;
    a[2] = a2;
    a[3] = a3;
}

/* dw4_clipped for a channel multiplier divisible by 4 (one input byte per
 * tap for the four output channels) */
static void dw4_clipped1(int32_t *a, const int8_t *x00, const int8_t *w00, int32_t nky,
                         int32_t nkx, size_t x_row, size_t x_tap, size_t w_row, size_t w_tap,
                         int32_t off)
{
    int32_t a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3], ky, kx;
    for (ky = 0; ky < nky; ky++) {
        const int8_t *xp = x00 + (size_t)ky * x_row;
        const int8_t *wp = w00 + (size_t)ky * w_row;
        for (kx = 0; kx < nkx; kx++) {
            const int32_t xv = (int32_t)*xp + off;
            const uint32_t v = pe_rd32(wp);
            const int32_t we = (int32_t)__sxtb16(v), wo = (int32_t)pe_sxtb16_ror8(v);
            a0 = __smlabb(we, xv, a0);
            a2 = __smlatb(we, xv, a2);
            a1 = __smlabb(wo, xv, a1);
            a3 = __smlatb(wo, xv, a3);
            xp += x_tap;
            wp += w_tap;
        }
    }
    a[0] = a0;
    a[1] = a1;
    a[2] = a2;
    a[3] = a3;
}

/* one output of the fast requantization from a doubled accumulator */
static inline int32_t dw_rq(int32_t a2, int32_t m, int32_t k, int32_t r)
{
    int32_t d;
    __asm__("smmulr %0, %1, %2" : "=r"(d) : "r"(a2), "r"(m));
    d = d + pe_fx_asr32(d, 31) + k;
    return pe_fx_asr32(d, r);
}

/* four channels' accumulators (doubled) to int8 at dst[0..3] */
static inline void dw4_store(int8_t *dst, const int32_t *a, const dw_group *g, int32_t full,
                             int32_t amin, int32_t amax)
{
    int32_t j;
    if (full) {
        for (j = 0; j < 4; j++) {
            dst[j] = (int8_t)__ssat(dw_rq(a[j], g->m[j], g->k[j], g->r[j]), 8);
        }
        return;
    }
    for (j = 0; j < 4; j++) {
        int32_t v = dw_rq(a[j], g->m[j], g->k[j], g->r[j]);
        v = v > amin ? v : amin;
        dst[j] = (int8_t)(v < amax ? v : amax);
    }
}

/* four channels over a clipped window, input offset applied: a[j] starts at
 * the bias */
static void dw4_clipped(int32_t *a, const int8_t *x00, const int8_t *w00, int32_t nky,
                        int32_t nkx, size_t x_row, size_t x_tap, size_t w_row, size_t w_tap,
                        int32_t off)
{
    const uint32_t off2 = pe_dup16(off);
    int32_t a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3], ky, kx;
    for (ky = 0; ky < nky; ky++) {
        const int8_t *xp = x00 + (size_t)ky * x_row;
        const int8_t *wp = w00 + (size_t)ky * w_row;
        for (kx = 0; kx < nkx; kx++) {
            const uint32_t r = pe_rd32(xp), v = pe_rd32(wp);
            const int32_t xe = (int32_t)__sxtab16(off2, r), xo = (int32_t)pe_sxtab16_ror8(off2, r);
            const int32_t we = (int32_t)__sxtb16(v), wo = (int32_t)pe_sxtb16_ror8(v);
            a0 = __smlabb(we, xe, a0);
            a2 = __smlatt(we, xe, a2);
            a1 = __smlabb(wo, xo, a1);
            a3 = __smlatt(wo, xo, a3);
            xp += x_tap;
            wp += w_tap;
        }
    }
    a[0] = a0;
    a[1] = a1;
    a[2] = a2;
    a[3] = a3;
}

#if PE_DSP_ASM
/* The interior pixels of one output row for one channel group (every tap
 * inside the input, full int8 clamp, fast requantization), one inline-asm
 * block with every core register pinned: r0-r3 the accumulators, r4-r6 and
 * r8-r10 the LDM record, r7 the record pointer, r11 the window, r12 the end
 * of the pair records, lr a temporary. tab holds, in order: the group's
 * four start values, the pair records, the requantization constants of
 * channels 0, 1 ({m, k, r} each) and 2, 3, then {dst step, window step}.
 * Per pixel: 1 LDM of the start values, 13 instructions per pair (+ CMP/BNE
 * unless the kernel has five pairs, 3x3, which is unrolled), 2 LDM + 5 per
 * output for SMMULR / sign / constant / ASR / SSAT, 4 STRB and 8 for the
 * pointers and the loop. */
#define PE_DW_PAIR                                                            \
    "ldmia  r7!, {r4, r5, r6, r8, r9, r10}\n\t"                               \
    "ldr    r4, [r11, r4]\n\t"                                                \
    "ldr    r5, [r11, r5]\n\t"                                                \
    "pkhbt  lr, r4, r5, lsl #16\n\t"                                          \
    "pkhtb  r5, r5, r4, asr #16\n\t"                                          \
    "sxtb16 r4, lr\n\t"                                                       \
    "smlad  r0, r4, r6, r0\n\t"                                               \
    "sxtb16 r4, lr, ror #8\n\t"                                               \
    "smlad  r1, r4, r8, r1\n\t"                                               \
    "sxtb16 r4, r5\n\t"                                                       \
    "smlad  r2, r4, r9, r2\n\t"                                               \
    "sxtb16 r4, r5, ror #8\n\t"                                               \
    "smlad  r3, r4, r10, r3\n\t"
#define PE_DW_PAIR1                                                           \
    "ldmia  r7!, {r4, r5, r6, r8, r9, r10}\n\t"                               \
    "ldrsb  r4, [r11, r4]\n\t"                                                \
    "ldrsb  r5, [r11, r5]\n\t"                                                \
    "pkhbt  r4, r4, r5, lsl #16\n\t"                                          \
    "smlad  r0, r4, r6, r0\n\t"                                               \
    "smlad  r1, r4, r8, r1\n\t"                                               \
    "smlad  r2, r4, r9, r2\n\t"                                               \
    "smlad  r3, r4, r10, r3\n\t"
/* SMMLAR adds k + sign(a) as the high word: k + (a >> 31) + the rounded
 * high word of a * m, where dw_rq adds the sign of that high word d
 * instead. The two signs differ only when a < 0 and d = 0, and then
 * (k - 1) >> r == k >> r (k = 2^(r-1) + ooff * 2^r, r >= 1): the same
 * bytes, one instruction fewer (k is reloaded per pixel). */
#define PE_DW_RQ(a, m, k, r)                                                  \
    "add    " k ", " k ", " a ", asr #31\n\t"                                 \
    "smmlar " a ", " a ", " m ", " k "\n\t"                                     \
    "asr    " a ", " a ", " r "\n\t"                                          \
    "ssat   " a ", #8, " a "\n\t"
/* the last, single tap of an odd tap count (3x3): its record's weights are
 * (2w, 0) per channel, so SMLABB / SMLATB take the tap alone (8
 * instructions instead of the pair's 13) */
#define PE_DW_LAST                                                            \
    "ldmia  r7!, {r4, r5, r6, r8, r9, r10}\n\t"                               \
    "ldr    r4, [r11, r4]\n\t"                                                \
    "sxtb16 r5, r4\n\t"                                                       \
    "sxtb16 r4, r4, ror #8\n\t"                                               \
    "smlabb r0, r5, r6, r0\n\t"                                               \
    "smlatb r2, r5, r9, r2\n\t"                                               \
    "smlabb r1, r4, r8, r1\n\t"                                               \
    "smlatb r3, r4, r10, r3\n\t"
/* PE_DW_TAIL with the output pointer kept in r12 (the unrolled form has no
 * pair-end pointer) */
#define PE_DW_TAIL12                                                          \
    "ldmia  r7!, {r4, r5, r6, r8, r9, r10}\n\t"                               \
    PE_DW_RQ("r0", "r4", "r5", "r6") PE_DW_RQ("r1", "r8", "r9", "r10")        \
    "ldmia  r7!, {r4, r5, r6, r8, r9, r10}\n\t"                               \
    PE_DW_RQ("r2", "r4", "r5", "r6") PE_DW_RQ("r3", "r8", "r9", "r10")        \
    "strb   r0, [r12]\n\t"                                                    \
    "strb   r1, [r12, #1]\n\t"                                                \
    "strb   r2, [r12, #2]\n\t"                                                \
    "strb   r3, [r12, #3]\n\t"                                                \
    "ldmia  r7, {r4, r5}\n\t"                                                 \
    "add    r12, r12, r4\n\t"                                                 \
    "add    r11, r11, r5\n\t"                                                 \
    "ldr    r4, %[dend]\n\t"                                                  \
    "cmp    r12, r4\n\t"                                                      \
    "bne    0b\n\t"
#define PE_DW_TAIL                                                            \
    "ldmia  r7!, {r4, r5, r6, r8, r9, r10}\n\t"                               \
    PE_DW_RQ("r0", "r4", "r5", "r6") PE_DW_RQ("r1", "r8", "r9", "r10")        \
    "ldmia  r7!, {r4, r5, r6, r8, r9, r10}\n\t"                               \
    PE_DW_RQ("r2", "r4", "r5", "r6") PE_DW_RQ("r3", "r8", "r9", "r10")        \
    "ldr    lr, %[dst]\n\t"                                                   \
    "strb   r0, [lr]\n\t"                                                     \
    "strb   r1, [lr, #1]\n\t"                                                 \
    "strb   r2, [lr, #2]\n\t"                                                 \
    "strb   r3, [lr, #3]\n\t"                                                 \
    "ldmia  r7, {r4, r5}\n\t"                                                 \
    "add    lr, lr, r4\n\t"                                                   \
    "str    lr, %[dst]\n\t"                                                   \
    "add    r11, r11, r5\n\t"                                                 \
    "ldr    r4, %[dend]\n\t"                                                  \
    "cmp    lr, r4\n\t"                                                       \
    "bne    0b\n\t"
#define PE_DW_OPERANDS                                                        \
    : [dst] "+m"(dst)                                                         \
    : [tab] "m"(tab), [dend] "m"(dend), [win] "m"(win), [end] "m"(pend)       \
    : "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", \
      "r12", "lr", "cc", "memory"

__attribute__((noinline)) static void dw_run_asm(int8_t *dst, int32_t n, const int8_t *win,
                                                 const int32_t *tab, int32_t npairs,
                                                 int32_t bytes, int32_t taps)
{
    const int32_t *const pend = tab + 4 + 6 * npairs;
    int8_t *const dend = dst + (size_t)n * (size_t)pend[12];
    if (n <= 0) {
        return;
    }
    if (bytes) { /* a channel multiplier divisible by 4: PE_DW_PAIR1 */
        if (npairs == 5) {
            __asm__ volatile("ldr    r11, %[win]\n\t"
                             "0:\n\t"
                             "ldr    r7, %[tab]\n\t"
                             "ldmia  r7!, {r0, r1, r2, r3}\n\t"
                             PE_DW_PAIR1 PE_DW_PAIR1 PE_DW_PAIR1 PE_DW_PAIR1 PE_DW_PAIR1
                             PE_DW_TAIL PE_DW_OPERANDS);
        } else {
            __asm__ volatile("ldr    r11, %[win]\n\t"
                             "ldr    r12, %[end]\n\t"
                             "0:\n\t"
                             "ldr    r7, %[tab]\n\t"
                             "ldmia  r7!, {r0, r1, r2, r3}\n\t"
                             "1:\n\t"
                             PE_DW_PAIR1
                             "cmp    r7, r12\n\t"
                             "bne    1b\n\t"
                             PE_DW_TAIL PE_DW_OPERANDS);
        }
        return;
    }
    if (npairs == 5 && taps == 9) {
        __asm__ volatile("ldr    r11, %[win]\n\t"
                         "ldr    r12, %[dst]\n\t"
                         "0:\n\t"
                         "ldr    r7, %[tab]\n\t"
                         "ldmia  r7!, {r0, r1, r2, r3}\n\t"
                         PE_DW_PAIR PE_DW_PAIR PE_DW_PAIR PE_DW_PAIR PE_DW_LAST
                         PE_DW_TAIL12 PE_DW_OPERANDS);
    } else if (npairs == 5) {
        __asm__ volatile("ldr    r11, %[win]\n\t"
                         "ldr    r12, %[dst]\n\t"
                         "0:\n\t"
                         "ldr    r7, %[tab]\n\t"
                         "ldmia  r7!, {r0, r1, r2, r3}\n\t"
                         PE_DW_PAIR PE_DW_PAIR PE_DW_PAIR PE_DW_PAIR PE_DW_PAIR
                         PE_DW_TAIL12 PE_DW_OPERANDS);
    } else {
        __asm__ volatile("ldr    r11, %[win]\n\t"
                         "ldr    r12, %[end]\n\t"
                         "0:\n\t"
                         "ldr    r7, %[tab]\n\t"
                         "ldmia  r7!, {r0, r1, r2, r3}\n\t"
                         "1:\n\t"
                         PE_DW_PAIR
                         "cmp    r7, r12\n\t"
                         "bne    1b\n\t"
                         PE_DW_TAIL PE_DW_OPERANDS);
    }
}
/* dw_run_asm's unrolled five-pair forms (3x3 or ten taps, multiplier 1)
 * over a rectangle: rows of n outputs each, the next row's outputs o_row
 * bytes and its windows w_row bytes after the previous row's (one call per
 * channel group instead of one per row) */
#define PE_DW_ROWS                                                            \
    "ldr    r4, %[rows]\n\t"                                                  \
    "subs   r4, r4, #1\n\t"                                                   \
    "beq    9f\n\t"                                                           \
    "str    r4, %[rows]\n\t"                                                  \
    "ldr    r4, %[dadv]\n\t"                                                  \
    "add    r12, r12, r4\n\t"                                                 \
    "ldr    r4, %[wadv]\n\t"                                                  \
    "add    r11, r11, r4\n\t"                                                 \
    "ldr    r4, %[dend]\n\t"                                                  \
    "ldr    r5, %[orow]\n\t"                                                  \
    "add    r4, r4, r5\n\t"                                                   \
    "str    r4, %[dend]\n\t"                                                  \
    "b      0b\n\t"                                                           \
    "9:\n\t"
#define PE_DW_ROWS_OPERANDS                                                   \
    : [dst] "+m"(dst), [dend] "+m"(dend), [rows] "+m"(rows)                   \
    : [tab] "m"(tab), [win] "m"(win), [dadv] "m"(dadv), [wadv] "m"(wadv),     \
      [orow] "m"(o_row)                                                       \
    : "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", \
      "r12", "lr", "cc", "memory"

__attribute__((noinline)) static void dw_rows_asm(int8_t *dst, int32_t n, int32_t rows,
                                                  const int8_t *win, const int32_t *tab,
                                                  int32_t taps, int32_t o_row, int32_t w_row)
{
    const int32_t *const pend = tab + 4 + 6 * 5;
    const int32_t dadv = o_row - n * pend[12], wadv = w_row - n * pend[13];
    int8_t *dend = dst + (size_t)n * (size_t)pend[12];
    if (n <= 0 || rows <= 0) {
        return;
    }
    if (taps == 9) {
        __asm__ volatile("ldr    r11, %[win]\n\t"
                         "ldr    r12, %[dst]\n\t"
                         "0:\n\t"
                         "ldr    r7, %[tab]\n\t"
                         "ldmia  r7!, {r0, r1, r2, r3}\n\t"
                         PE_DW_PAIR PE_DW_PAIR PE_DW_PAIR PE_DW_PAIR PE_DW_LAST
                         PE_DW_TAIL12 PE_DW_ROWS PE_DW_ROWS_OPERANDS);
    } else {
        __asm__ volatile("ldr    r11, %[win]\n\t"
                         "ldr    r12, %[dst]\n\t"
                         "0:\n\t"
                         "ldr    r7, %[tab]\n\t"
                         "ldmia  r7!, {r0, r1, r2, r3}\n\t"
                         PE_DW_PAIR PE_DW_PAIR PE_DW_PAIR PE_DW_PAIR PE_DW_PAIR
                         PE_DW_TAIL12 PE_DW_ROWS PE_DW_ROWS_OPERANDS);
    }
}
#undef PE_DW_ROWS
#undef PE_DW_ROWS_OPERANDS
#undef PE_DW_PAIR
#undef PE_DW_PAIR1
#undef PE_DW_RQ
#undef PE_DW_LAST
#undef PE_DW_TAIL12
#undef PE_DW_TAIL
#undef PE_DW_OPERANDS
#endif

#if PE_DSP_ASM
/* windows clipped by the padding through dw_run_asm: tables for kernels of
 * at most PE_DW_CLIP_PAIRS pairs, PE_DW_CLIP_SLOTS of them per group (the
 * current run's, the left side's, the right side's) */
#define PE_DW_CLIP_PAIRS 5
#define PE_DW_CLIP_SLOTS 3
#define PE_DW_TAB_WORDS(np) (4 + 6 * (np) + 14)

/* dw_run_asm's table for windows whose taps inside the input are rows
 * [ky_lo, ky_hi] x columns [kx_lo, kx_hi] of the kernel, read from the
 * window pointer of tap (ky_lo, kx_lo): every offset relative to that tap;
 * an outside tap gets weight 0 and that tap's offset (so every load stays
 * inside the input), and its 2 * offset * w leaves the start value. The
 * sum is then the padded window's int32 sum (outside taps contribute
 * nothing, as x + offset = 0 for the padding), re-associated. */
static void dw_clip_tab(int32_t *restrict dst, const int32_t *restrict tab, int32_t npairs,
                        int32_t kw, int32_t taps, int32_t ky_lo, int32_t ky_hi, int32_t kx_lo,
                        int32_t kx_hi, int32_t off)
{
    const int32_t tb = ky_lo * kw + kx_lo;
    const int32_t base = tab[4 + 6 * (tb / 2) + (tb & 1)];
    const int32_t *restrict src = tab + 4;
    int32_t *restrict r = dst + 4;
    uint32_t i0 = (uint32_t)tab[0], i1 = (uint32_t)tab[1], i2 = (uint32_t)tab[2];
    uint32_t i3 = (uint32_t)tab[3];
    const uint32_t uoff = (uint32_t)off;
    int32_t pr, lane, i, ky = 0, kx = 0, t = 0;
    for (pr = 0; pr < npairs; pr++, src += 6, r += 6) {
        const uint32_t w0 = (uint32_t)src[2], w1 = (uint32_t)src[3];
        const uint32_t w2 = (uint32_t)src[4], w3 = (uint32_t)src[5];
        uint32_t keep = 0;
        int32_t o[2];
        for (lane = 0; lane < 2; lane++, t++) {
            const int32_t sh = 16 * lane;
            if (t >= taps) { /* the weight-0 partner of an odd last tap */
                o[1] = o[0];
                break;
            }
            if (ky >= ky_lo && ky <= ky_hi && kx >= kx_lo && kx <= kx_hi) {
                o[lane] = src[lane] - base;
                keep |= 0xFFFFu << sh;
            } else {
                o[lane] = 0;
                i0 -= uoff * (uint32_t)(int32_t)(int16_t)(uint16_t)(w0 >> sh);
                i1 -= uoff * (uint32_t)(int32_t)(int16_t)(uint16_t)(w1 >> sh);
                i2 -= uoff * (uint32_t)(int32_t)(int16_t)(uint16_t)(w2 >> sh);
                i3 -= uoff * (uint32_t)(int32_t)(int16_t)(uint16_t)(w3 >> sh);
            }
            if (++kx == kw) {
                kx = 0;
                ky++;
            }
        }
        r[0] = o[0];
        r[1] = o[1];
        r[2] = (int32_t)(w0 & keep);
        r[3] = (int32_t)(w1 & keep);
        r[4] = (int32_t)(w2 & keep);
        r[5] = (int32_t)(w3 & keep);
    }
    dst[0] = (int32_t)i0;
    dst[1] = (int32_t)i1;
    dst[2] = (int32_t)i2;
    dst[3] = (int32_t)i3;
    for (i = 0; i < 14; i++) { /* the requantization constants and the steps */
        r[i] = src[i];
    }
}
#endif

/* the pairs' records of channels [c, c + 4) at rec, and the group's
 * constants: in g, and around rec as dw_run_asm reads them (the start values
 * at rec[-4..-1], the requantization constants after the records) */
static void dw_group_setup(dw_group *g, int32_t *rec, const pe_conv_params *p,
                           const pe_per_channel_quant *q, const pe_dims *f,
                           const int8_t *filter, const int32_t *bias, int32_t c)
{
    const int32_t taps = f->h * f->w, out_c = f->c, npairs = (taps + 1) / 2;
    const uint32_t off = (uint32_t)p->input_offset, one2 = 0x00010001u;
    const int32_t ooff = p->output_offset;
    const int8_t *w = filter + c;
    int32_t *r = rec + 2, *const qc = rec + 6 * npairs;
    int32_t t, j;
    int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    g->fast = p->rounding == PE_ROUND_DOUBLE;
    for (j = 0; j < 4; j++) {
        const int32_t sh = q->shift[c + j];
        const int32_t right = sh <= -1 && sh >= -23 ? -sh : 1;
        g->bias[j] = bias != NULL ? bias[c + j] : 0;
        g->m[j] = q->multiplier[c + j];
        g->r[j] = right;
        g->k[j] = (int32_t)(((uint32_t)1u << (right - 1)) + ((uint32_t)ooff << right));
        if (!(sh <= -1 && sh >= -23)) {
            g->fast = 0;
        }
        qc[3 * j] = g->m[j];
        qc[3 * j + 1] = g->k[j];
        qc[3 * j + 2] = right;
    }
    /* the weights of taps t, t + 1 for channels c..c+3 regrouped per channel
     * (the input words' PKH + SXTB16 in reverse), summed, and doubled */
    for (t = 0; t < taps; t += 2) {
        const uint32_t v0 = pe_rd32(w);
        const uint32_t v1 = t + 1 < taps ? pe_rd32(w + out_c) : 0u;
        const uint32_t lo = (v0 & 0xFFFFu) | (v1 << 16), hi = (v0 >> 16) | (v1 & 0xFFFF0000u);
        const uint32_t w0 = __sxtb16(lo), w1 = pe_sxtb16_ror8(lo);
        const uint32_t w2 = __sxtb16(hi), w3 = pe_sxtb16_ror8(hi);
        s0 = __smlad(w0, one2, s0);
        s1 = __smlad(w1, one2, s1);
        s2 = __smlad(w2, one2, s2);
        s3 = __smlad(w3, one2, s3);
        r[0] = (int32_t)__sadd16(w0, w0);
        r[1] = (int32_t)__sadd16(w1, w1);
        r[2] = (int32_t)__sadd16(w2, w2);
        r[3] = (int32_t)__sadd16(w3, w3);
        r += 6;
        w += 2 * (size_t)out_c;
    }
    g->init[0] = (int32_t)(((uint32_t)g->bias[0] + off * (uint32_t)s0) << 1);
    g->init[1] = (int32_t)(((uint32_t)g->bias[1] + off * (uint32_t)s1) << 1);
    g->init[2] = (int32_t)(((uint32_t)g->bias[2] + off * (uint32_t)s2) << 1);
    g->init[3] = (int32_t)(((uint32_t)g->bias[3] + off * (uint32_t)s3) << 1);
    for (j = 0; j < 4; j++) {
        rec[j - 4] = g->init[j];
    }
}

/* the pairs' input offsets (the same for every channel group): rec[6i],
 * rec[6i + 1] for taps 2i, 2i + 1 (an odd last tap paired with itself) */
static void dw_offsets(int32_t *rec, const pe_conv_params *p, const pe_dims *in,
                       const pe_dims *f)
{
    const int32_t taps = f->h * f->w, kw = f->w;
    int32_t t, ky = 0, kx = 0;
    for (t = 0; t < taps; t++) {
        rec[6 * (t / 2) + (t & 1)] = (ky * p->dilation.h * in->w + kx * p->dilation.w) * in->c;
        if (t == taps - 1 && (t & 1) == 0) {
            rec[6 * (t / 2) + 1] = rec[6 * (t / 2)];
        }
        if (++kx == kw) {
            kx = 0;
            ky++;
        }
    }
}

/* depthwise, channel multiplier 1, out_c >= 4, kh * kw <= 2 * PE_DW_MAX_PAIRS,
 * |acc| < 2^30 for every channel: the output pixels of rows [oy0, oy1) x
 * columns [ox0, ox1), channel groups of four outermost (each group's records
 * built once for the whole rectangle), the last out_c % 4 channels per pixel
 * by bytes. Pixel (oy, ox) goes to o + (oy - oy0) * o_row + (ox - ox0) * out_c. */
static void dw_rect_dsp(const pe_conv_params *p, const pe_per_channel_quant *q,
                        const pe_dims *in, const int8_t *img, const pe_dims *f,
                        const int8_t *filter, const int32_t *bias, int32_t oy0, int32_t oy1,
                        int32_t ox0, int32_t ox1, int8_t *o, size_t o_row)
{
    const int32_t in_h = in->h, in_w = in->w, in_c = in->c, c_n = f->c, kh = f->h, kw = f->w;
    const int32_t mult = p->ch_mult, bytes = mult != 1;
    const int32_t s_h = p->stride.h, s_w = p->stride.w, d_h = p->dilation.h, d_w = p->dilation.w;
    const int32_t off = p->input_offset, amin = p->activation.min, amax = p->activation.max;
    const int32_t ooff = p->output_offset;
    const int32_t full = amin == -128 && amax == 127;
    const int32_t npairs = (kh * kw + 1) / 2;
    const size_t row_px = (size_t)in_w * (size_t)in_c;
    const size_t x_tap = (size_t)d_w * (size_t)in_c, x_row = (size_t)d_h * row_px;
    const size_t w_row = (size_t)kw * (size_t)c_n;
    const int32_t c4 = c_n & ~3;
    int32_t tab[4 + PE_DW_MAX_PAIRS * 6 + 14];
    int32_t *const rec = tab + 4;
    /* output columns whose taps all lie inside the input row: [ox_a, ox_b],
     * clipped to [ox0, ox1) */
    const int32_t lim = in_w - 1 + p->padding.left - (kw - 1) * d_w;
    int32_t ox_a = p->padding.left / s_w + (p->padding.left % s_w != 0 ? 1 : 0);
    int32_t ox_b = lim < 0 ? -1 : lim / s_w;
    dw_group g;
    int32_t c, oy, ox, j;
#if PE_DSP_ASM
    const int32_t clip_ok = !bytes && full && npairs <= PE_DW_CLIP_PAIRS;
    int32_t ctab[PE_DW_CLIP_SLOTS][PE_DW_TAB_WORDS(PE_DW_CLIP_PAIRS)];
    int32_t ckey[PE_DW_CLIP_SLOTS][4];
    const int32_t many_rows = oy1 - oy0 >= 12;
    int32_t cl_run = 0, cl_side = 0, rect_done = 0;
    /* output rows whose kernel rows all lie inside the input: [oy_a, oy_b],
     * clipped to [oy0, oy1) */
    const int32_t ylim = in_h - 1 + p->padding.top - (kh - 1) * d_h;
    int32_t oy_a = p->padding.top / s_h + (p->padding.top % s_h != 0 ? 1 : 0);
    int32_t oy_b = ylim < 0 ? -1 : ylim / s_h;
#endif
    ox_a = ox_a > ox0 ? ox_a : ox0;
    ox_b = ox_b < ox1 - 1 ? ox_b : ox1 - 1;
#if PE_DSP_ASM
    oy_a = oy_a > oy0 ? oy_a : oy0;
    oy_b = oy_b < oy1 - 1 ? oy_b : oy1 - 1;
#endif
    rec[6 * npairs + 12] = c_n;
    rec[6 * npairs + 13] = s_w * in_c;
    dw_offsets(rec, p, in, f);
    for (c = 0; c < c4; c += 4) {
        /* the input channel of output channels c..c+3 (c + j for multiplier 1) */
        const size_t xc = (size_t)(bytes ? c / mult : c);
        dw_group_setup(&g, rec, p, q, f, filter, bias, c);
#if PE_DSP_ASM
        for (j = 0; j < PE_DW_CLIP_SLOTS; j++) {
            ckey[j][0] = -1; /* the cached clipped tables hold another group's weights */
        }
        cl_run = clip_ok && g.fast && ox_b - ox_a >= 7;
        cl_side = clip_ok && g.fast && many_rows;
        /* the rows whose kernel rows are all inside, [oy_a, oy_b], by one
         * dw_rows_asm call over their inside columns (five pairs); the
         * row loop below then skips those windows */
        rect_done = 0;
        if (npairs == 5 && !bytes && full && g.fast && ox_a <= ox_b && oy_a <= oy_b) {
            const int32_t ix_a = ox_a * s_w - p->padding.left;
            const int32_t iy_a = oy_a * s_h - p->padding.top;
            dw_rows_asm(o + (size_t)(oy_a - oy0) * o_row + (size_t)(ox_a - ox0) * (size_t)c_n +
                            (size_t)c,
                        ox_b - ox_a + 1, oy_b - oy_a + 1,
                        img + (size_t)iy_a * row_px + (size_t)ix_a * (size_t)in_c + xc, tab,
                        kh * kw, (int32_t)o_row, (int32_t)((size_t)s_h * row_px));
            rect_done = 1;
        }
#endif
        for (oy = oy0; oy < oy1; oy++) {
            const int32_t iy0 = oy * s_h - p->padding.top;
            int32_t ky_lo, ky_hi;
            int8_t *const drow = o + (size_t)(oy - oy0) * o_row + (size_t)c;
            tap_range(iy0, d_h, kh, in_h, &ky_lo, &ky_hi);
            for (ox = ox0; ox < ox1; ox++) {
                const int32_t ix0 = ox * s_w - p->padding.left;
                int32_t kx_lo, kx_hi, a[4];
                int8_t *const d = drow + (size_t)(ox - ox0) * (size_t)c_n;
#if PE_DSP_ASM
                if (ox == ox_a && ox_a <= ox_b && full && g.fast && ky_lo == 0 &&
                    ky_hi == kh - 1) {
                    if (!rect_done) {
                        dw_run_asm(d, ox_b - ox_a + 1,
                                   img + (size_t)iy0 * row_px + (size_t)ix0 * (size_t)in_c + xc,
                                   tab, npairs, bytes, kh * kw);
                    }
                    ox = ox_b;
                    continue;
                }
#endif
                tap_range(ix0, d_w, kw, in_w, &kx_lo, &kx_hi);
#if PE_DSP_ASM
                /* clipped windows through dw_run_asm with a table built by
                 * dw_clip_tab: with clipped kernel rows the run of columns
                 * [ox_a, ox_b] (kernel columns all inside, at least eight:
                 * slot 0, rebuilt when the pattern changes), and with all
                 * kernel rows the clipped columns on each side (slots 1 and
                 * 2: the first pattern met on that side, which recurs on
                 * row of a rectangle of at least 12 rows). Building a
                 * table costs what about eight windows save (measured on
                 * 6x6 to 48x48 images): other windows take the loop below. */
                if ((cl_run && ox == ox_a && ky_lo <= ky_hi) ||
                    (cl_side && ky_lo == 0 && ky_hi == kh - 1 && kx_lo <= kx_hi &&
                     (ckey[ox < ox_a ? 1 : 2][0] < 0 ||
                      (ckey[ox < ox_a ? 1 : 2][2] == kx_lo &&
                       ckey[ox < ox_a ? 1 : 2][3] == kx_hi)))) {
                    const int32_t n = cl_run && ox == ox_a ? ox_b - ox_a + 1 : 1;
                    const int32_t sl = n > 1 ? 0 : (ox < ox_a ? 1 : 2);
                    if (!(ckey[sl][0] == ky_lo && ckey[sl][1] == ky_hi &&
                          ckey[sl][2] == kx_lo && ckey[sl][3] == kx_hi)) {
                        dw_clip_tab(ctab[sl], tab, npairs, kw, kh * kw, ky_lo, ky_hi, kx_lo,
                                    kx_hi, off);
                        ckey[sl][0] = ky_lo;
                        ckey[sl][1] = ky_hi;
                        ckey[sl][2] = kx_lo;
                        ckey[sl][3] = kx_hi;
                    }
                    dw_run_asm(d, n,
                               img + (size_t)(iy0 + ky_lo * d_h) * row_px +
                                   (size_t)(ix0 + kx_lo * d_w) * (size_t)in_c + xc,
                               ctab[sl], npairs, 0, kh * kw);
                    ox += n - 1;
                    continue;
                }
#endif
                if (ky_lo == 0 && ky_hi == kh - 1 && kx_lo == 0 && kx_hi == kw - 1 && g.fast) {
                    const int8_t *const win =
                        img + (size_t)iy0 * row_px + (size_t)ix0 * (size_t)in_c + xc;
                    a[0] = g.init[0];
                    a[1] = g.init[1];
                    a[2] = g.init[2];
                    a[3] = g.init[3];
                    if (bytes) {
                        dw4_pairs1(a, win, rec, rec + (size_t)npairs * 6u);
                    } else {
                        dw4_pairs(a, win, rec, rec + (size_t)npairs * 6u);
                    }
                    dw4_store(d, a, &g, full, amin, amax);
                    continue;
                }
                for (j = 0; j < 4; j++) {
                    a[j] = g.bias[j];
                }
                if (ky_lo <= ky_hi && kx_lo <= kx_hi) {
                    const int8_t *const x00 = img + (size_t)(iy0 + ky_lo * d_h) * row_px +
                                              (size_t)(ix0 + kx_lo * d_w) * (size_t)in_c + xc;
                    const int8_t *const w00 =
                        filter + ((size_t)ky_lo * (size_t)kw + (size_t)kx_lo) * (size_t)c_n +
                        (size_t)c;
                    if (bytes) {
                        dw4_clipped1(a, x00, w00, ky_hi - ky_lo + 1, kx_hi - kx_lo + 1, x_row,
                                     x_tap, w_row, (size_t)c_n, off);
                    } else {
                        dw4_clipped(a, x00, w00, ky_hi - ky_lo + 1, kx_hi - kx_lo + 1, x_row,
                                    x_tap, w_row, (size_t)c_n, off);
                    }
                }
                if (g.fast) {
                    for (j = 0; j < 4; j++) {
                        a[j] = (int32_t)((uint32_t)a[j] << 1);
                    }
                    dw4_store(d, a, &g, full, amin, amax);
                } else {
                    for (j = 0; j < 4; j++) {
                        d[j] = finish_slow(a[j], q->multiplier[c + j], q->shift[c + j],
                                           p->rounding, amin, amax, ooff);
                    }
                }
            }
        }
    }
    if (c4 == c_n) {
        return;
    }
    /* (multiplier 1 only: a multiplier divisible by 4 leaves no tail) */
    for (oy = oy0; oy < oy1; oy++) {
        const int32_t iy0 = oy * s_h - p->padding.top;
        int32_t ky_lo, ky_hi;
        tap_range(iy0, d_h, kh, in_h, &ky_lo, &ky_hi);
        for (ox = ox0; ox < ox1; ox++) {
            const int32_t ix0 = ox * s_w - p->padding.left;
            int32_t kx_lo, kx_hi, ky, kx;
            int8_t *const d = o + (size_t)(oy - oy0) * o_row + (size_t)(ox - ox0) * (size_t)c_n;
            tap_range(ix0, d_w, kw, in_w, &kx_lo, &kx_hi);
            for (c = c4; c < c_n; c++) {
                int32_t a = bias != NULL ? bias[c] : 0;
                for (ky = ky_lo; ky <= ky_hi; ky++) {
                    for (kx = kx_lo; kx <= kx_hi; kx++) {
                        a += filter[((size_t)ky * (size_t)kw + (size_t)kx) * (size_t)c_n +
                                    (size_t)c] *
                             ((int32_t)img[(size_t)(iy0 + ky * d_h) * row_px +
                                           (size_t)(ix0 + kx * d_w) * (size_t)in_c + (size_t)c] +
                              off);
                    }
                }
                d[c] = finish_slow(a, q->multiplier[c], q->shift[c], p->rounding, amin, amax,
                                   ooff);
            }
        }
    }
}

/* bytes of the stack block an overlapping call computes before writing it */
#define PE_DW_BLOCK_BYTES 1024

int32_t pe_dw_dsp_applies(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                          const pe_dims *out, const int32_t *bias)
{
    return ((p->ch_mult == 1 && out->c >= 4) || p->ch_mult % 4 == 0) &&
           out->c <= PE_DW_BLOCK_BYTES &&
           (int64_t)f->h * f->w <= 2 * PE_DW_MAX_PAIRS &&
           ((int64_t)(f->h - 1) * p->dilation.h * in->w + (int64_t)(f->w - 1) * p->dilation.w) *
                   in->c <= PE_INT32_MAX &&
           dw_small(bias, out->c, (int64_t)f->h * f->w);
}

void pe_dw_dsp_rows(const pe_conv_params *p, const pe_per_channel_quant *q, const pe_dims *in,
                    const int8_t *img, const pe_dims *f, const int8_t *filter,
                    const int32_t *bias, const pe_dims *out, int32_t oy0, int32_t oy1, int8_t *o,
                    size_t o_row)
{
    dw_rect_dsp(p, q, in, img, f, filter, bias, oy0, oy1, 0, out->w, o, o_row);
}

/* n bytes from an aligned buffer */
static void dw_copy(int8_t *d, const uint8_t *b, size_t n)
{
    size_t i;
    for (i = 0; i + 4 <= n; i += 4) {
        __builtin_memcpy(d + i, b + i, 4);
    }
    for (; i < n; i++) {
        d[i] = (int8_t)b[i];
    }
}

/* dw_rect_dsp over one image. An output disjoint from the input is written
 * in place, the whole image at once. An output placed over its input (the
 * planner's "pixels" allowance: pixel p may overwrite input bytes before the
 * window of every pixel >= p) is computed in blocks of whole rows, or of up
 * to PE_DW_BLOCK_BYTES / out_c pixels of one row, into a stack buffer and
 * copied out once every window of the block has been read, so no output
 * byte is written earlier than the raster order writes it. */
/* stack bytes of the int16 channel planes (pe_dw3_dsp.c) a depthwise 3x3
 * stride-1 call widens into: bands of 4 output rows of up to 60 columns,
 * 10 of up to 28, 22 of up to 12; an output placed over its input also
 * holds a band's finished int8 rows there */
#define PE_DW3_STACK 3072

/* output rows per band of dw3_image_stack for the shape (0: no planes): the
 * whole block for planes when the output is disjoint from the input (a
 * band's outputs of one channel group are written while other channels'
 * input is still unread otherwise), else at least two rows of planes and
 * finished int8 rows each */
static int32_t dw3_stack_rows(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                              const pe_dims *out, const int32_t *bias, int32_t disjoint)
{
    int32_t least, g, rowb, ns;
    if (pe_dw3_plane_bytes(p, in, f, out, &least) == 0 || least > PE_DW3_STACK ||
        !pe_dw3_applies(p, in, f, out, bias)) {
        return 0;
    }
    if (disjoint) {
        return out->h;
    }
    g = out->c < 4 ? out->c : 4;
    rowb = least / (4 * g);
    ns = (int32_t)((PE_DW3_STACK - 2 * g * rowb) / (out->w * out->c + g * rowb));
    ns = ns < out->h ? ns : out->h;
    /* (the staged rows are rounded up to whole words) */
    while (ns > 0 && PE_DW3_STACK - (int32_t)(((size_t)ns * (size_t)out->w * (size_t)out->c + 3u) &
                                              ~(size_t)3u) < g * (ns + 2) * rowb) {
        ns--;
    }
    return ns >= 2 || (ns >= 1 && ns == out->h) ? ns : 0;
}

/* one image through the planes in a stack block: rows ns at a time, staged
 * in the block and written in raster order once all of a band's windows
 * are read (ns < out->h: the output overlaps the input as the "pixels" row
 * model of pyembed.plan.overlap allows it, every later window's input
 * still intact), else written in place */
__attribute__((noinline)) static void dw3_image_stack(const pe_conv_params *p,
                                                      const pe_per_channel_quant *q,
                                                      const pe_dims *in, const int8_t *img,
                                                      const pe_dims *f, const int8_t *filter,
                                                      const int32_t *bias, const pe_dims *out,
                                                      int8_t *dst, int32_t ns, int32_t disjoint)
{
    uint32_t block[PE_DW3_STACK / 4];
    const size_t row_b = (size_t)out->w * (size_t)out->c;
    int32_t oy, stage;
    if (disjoint) {
        pe_dw3_rows(p, q, in, img, f, filter, bias, out, 0, out->h, dst, row_b,
                    (int16_t *)(void *)block, PE_DW3_STACK);
        return;
    }
    stage = (int32_t)(((size_t)ns * row_b + 3u) & ~(size_t)3u);
    for (oy = 0; oy < out->h; oy += ns) {
        const int32_t ny = out->h - oy < ns ? out->h - oy : ns;
        pe_dw3_rows(p, q, in, img, f, filter, bias, out, oy, oy + ny, (int8_t *)block, row_b,
                    (int16_t *)(void *)((uint8_t *)block + stage), PE_DW3_STACK - stage);
        dw_copy(dst + (size_t)oy * row_b, (const uint8_t *)block, (size_t)ny * row_b);
    }
}

static void dw_image_dsp(const pe_conv_params *p, const pe_per_channel_quant *q,
                         const pe_dims *in, const int8_t *img, const pe_dims *f,
                         const int8_t *filter, const int32_t *bias, const pe_dims *out,
                         int8_t *dst, int32_t disjoint)
{
    const int32_t out_w = out->w, c_n = out->c;
    const int32_t k = PE_DW_BLOCK_BYTES / c_n;
    uint32_t buf[PE_DW_BLOCK_BYTES / 4];
    int32_t oy, ox;
    if (disjoint) {
        dw_rect_dsp(p, q, in, img, f, filter, bias, 0, out->h, 0, out_w, dst,
                    (size_t)out_w * (size_t)c_n);
        return;
    }
    if (k >= out_w) {
        /* whole rows per block */
        const int32_t rows = k / out_w;
        const size_t row_b = (size_t)out_w * (size_t)c_n;
        for (oy = 0; oy < out->h; oy += rows) {
            const int32_t ny = out->h - oy < rows ? out->h - oy : rows;
            dw_rect_dsp(p, q, in, img, f, filter, bias, oy, oy + ny, 0, out_w, (int8_t *)buf,
                        row_b);
            dw_copy(dst + (size_t)oy * row_b, (const uint8_t *)buf, (size_t)ny * row_b);
        }
        return;
    }
    for (oy = 0; oy < out->h; oy++) {
        for (ox = 0; ox < out_w; ox += k) {
            const int32_t nx = out_w - ox < k ? out_w - ox : k;
            dw_rect_dsp(p, q, in, img, f, filter, bias, oy, oy + 1, ox, ox + nx, (int8_t *)buf,
                        0);
            dw_copy(dst + ((size_t)oy * (size_t)out_w + (size_t)ox) * (size_t)c_n,
                    (const uint8_t *)buf, (size_t)nx * (size_t)c_n);
        }
    }
}

#endif /* PE_DSP */

static pe_status run(const pe_context *ctx, const pe_conv_params *p,
                     const pe_per_channel_quant *q, const pe_dims *in, const int8_t *input,
                     const pe_dims *f, const int8_t *filter, const int32_t *bias,
                     const pe_dims *out, int8_t *output, int32_t depthwise)
{
    int32_t n, oy, ox;
    uint64_t macs = 0, reads = 0;
    size_t in_img, out_img;
#if PE_DSP
    int32_t disjoint, dw_sm = 0, dw_img = 0, dw_planes = 0;
#endif
    const pe_status s = check_all(p, q, in, input, f, filter, bias, out, output, depthwise);
    if (s != PE_OK) {
        return s;
    }
    in_img = (size_t)in->h * (size_t)in->w * (size_t)in->c;
    out_img = (size_t)out->h * (size_t)out->w * (size_t)out->c;
#if PE_DSP
    /* The whole-image DSP loops run channels outermost; a planner may place
     * the output over input bytes the portable raster order has finished
     * with (pyembed.plan.overlap, "pixels"), so an overlapping call keeps
     * that order (the per-pixel DSP loops). */
    disjoint = (uintptr_t)output >= (uintptr_t)(input + (size_t)in->n * in_img) ||
               (uintptr_t)(output + (size_t)in->n * out_img) <= (uintptr_t)input;
    if (depthwise) {
        dw_sm = dw_small(bias, out->c, (int64_t)f->h * f->w);
        /* (an overlapping call in blocks of at least 8 pixels or a row) */
        dw_planes = dw3_stack_rows(p, in, f, out, bias, disjoint);
        dw_img = dw_planes || (pe_dw_dsp_applies(p, in, f, out, bias) &&
                               (disjoint || PE_DW_BLOCK_BYTES / out->c >= (out->w < 8 ? out->w : 8)));
    }
#endif
    for (n = 0; n < in->n; n++) {
        const int8_t *img = input + (size_t)n * in_img;
        int8_t *dst = output + (size_t)n * out_img;
#if PE_DSP
        if (!depthwise && pe_cv_dsp_applies(p, in, f, out) &&
            cv_image(p, q, in, img, f, filter, bias, out, dst, disjoint)) {
            /* the in-bounds taps of every window, counted per axis (the
             * counts of the loop below, without walking it) */
            uint64_t ny = 0, nx = 0;
            int32_t lo, hi;
            for (oy = 0; oy < out->h; oy++) {
                tap_range(oy * p->stride.h - p->padding.top, p->dilation.h, f->h, in->h, &lo, &hi);
                ny += (uint64_t)(hi >= lo ? hi - lo + 1 : 0);
            }
            for (ox = 0; ox < out->w; ox++) {
                tap_range(ox * p->stride.w - p->padding.left, p->dilation.w, f->w, in->w, &lo,
                          &hi);
                nx += (uint64_t)(hi >= lo ? hi - lo + 1 : 0);
            }
            macs += ny * nx * (uint64_t)out->c * (uint64_t)f->c;
            reads += ny * nx * (uint64_t)f->c * (uint64_t)((out->c + 3) / 4);
            continue;
        }
        if (disjoint && !depthwise && p->groups == 1) {
            conv_dsp(p, q, in, img, f, filter, bias, out, dst);
        }
        if (dw_img) {
            /* the in-bounds taps of every window, counted per axis: the
             * window clipping is separable */
            uint64_t ny = 0, nx = 0;
            int32_t lo, hi;
            if (dw_planes) { /* (not inside dw_image_dsp: one stack block at a time) */
                dw3_image_stack(p, q, in, img, f, filter, bias, out, dst, dw_planes, disjoint);
            } else {
                dw_image_dsp(p, q, in, img, f, filter, bias, out, dst, disjoint);
            }
            for (oy = 0; oy < out->h; oy++) {
                tap_range(oy * p->stride.h - p->padding.top, p->dilation.h, f->h, in->h, &lo, &hi);
                ny += (uint64_t)(hi >= lo ? hi - lo + 1 : 0);
            }
            for (ox = 0; ox < out->w; ox++) {
                tap_range(ox * p->stride.w - p->padding.left, p->dilation.w, f->w, in->w, &lo,
                          &hi);
                nx += (uint64_t)(hi >= lo ? hi - lo + 1 : 0);
            }
            macs += ny * nx * (uint64_t)out->c;
            reads += ny * nx * (uint64_t)out->c;
            continue;
        }
#endif
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
#if PE_DSP
                    if (dw_img) {
                        reads += taps * (uint64_t)out->c;
                    } else if (dw_dsp_ok(p, out)) {
                        depthwise_pixel_dsp(p, q, in, img, f, filter, bias, out, iy0, ix0,
                                            y_lo, y_hi, kx_lo, kx_hi, dst, dw_sm);
                        reads += taps * (uint64_t)out->c;
                    } else
#endif
                    {
                        depthwise_pixel(p, q, in, img, f, filter, bias, out, iy0, ix0, y_lo,
                                        y_hi, kx_lo, kx_hi, dst, &reads);
                    }
                    macs += taps * (uint64_t)out->c;
                } else {
#if PE_DSP
                    if (p->groups == 1) {
                        if (!disjoint) {
                            conv_pixel_dsp(p, q, in, img, f, filter, bias, out, iy0, ix0, y_lo,
                                           y_hi, kx_lo, kx_hi, dst);
                        }
                        reads += taps * (uint64_t)f->c * (uint64_t)((out->c + 3) / 4);
                    } else
#endif
                    {
                        conv_pixel(p, q, in, img, f, filter, bias, out, iy0, ix0, y_lo, y_hi,
                                   kx_lo, kx_hi, dst, &reads);
                    }
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
