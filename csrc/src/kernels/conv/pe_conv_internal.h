/*
 * pe_conv_internal.h - private to csrc/src/kernels/conv/: the helpers and
 * internal entry points the convolution files share (no public header
 * includes it; a firmware never calls what it declares).
 *
 * The helpers are static (inline where small), so each file compiles them
 * as it did when the code lived in one file: the Cortex-M4 instruction
 * counts of python -m pyembed.bench kernels stay those of the unsplit
 * files. Calls between the files go one way (tools/check_c_layout.py):
 *   pe_conv_w4.c        -> pe_conv_dsp_pw.c (pe_cv_dsp_rows_px), pe_conv_gather.c
 *                          (pe_cv_pixel, the gather target size query)
 *   pe_conv_gather.c    -> pe_conv_dsp_pw.c (pe_cv_dsp_bytes, pe_cv_dsp_rows),
 *                          pe_conv_dsp.c (pe_dw_dsp_rect), pe_dw3_dsp.c,
 *                          pe_conv_check.c
 *   pe_conv_rev_whole.c -> pe_conv_rev.c (the row stream's push and pop),
 *                          pe_conv_gather.c (pe_cv_dsp_applies,
 *                          pe_dw_dsp_applies), pe_conv_dsp_pw.c,
 *                          pe_conv_dsp.c (pe_dw_dsp_rows), pe_dw3_dsp.c,
 *                          pe_conv_check.c
 * (pe_conv_dsp_pw.c, pe_conv_dsp.c, pe_conv_rev.c and pe_conv_check.c call
 * no other conv file.)
 */
#ifndef PE_CONV_INTERNAL_H
#define PE_CONV_INTERNAL_H

#include <stdint.h>

#include "pyembed/pe_conv.h"
#include "pyembed/pe_conv_gather.h"
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_simd.h"

/* ---- the reverse form (pe_conv_rev.c, pe_conv_rev_whole.c) ---- */

/* ceil(a / b) for a >= 0, b > 0; no a + b - 1, which overflows int32 for a
 * large stride (pe_conv_check_geometry bounds (out - 1) * stride, not the
 * stride). */
static inline int32_t ceil_div_pos(int32_t a, int32_t b)
{
    return a / b + (a % b != 0 ? 1 : 0);
}

/* Tap range [k_lo, k_hi] of a kernel row whose tap 0 is input column x0. */
static inline void row_tap_range(int32_t x0, int32_t kw, int32_t d_w, int32_t in_w,
                                 int32_t *k_lo, int32_t *k_hi)
{
    *k_lo = x0 < 0 ? ceil_div_pos(-x0, d_w) : 0;
    *k_hi = kw - 1;
    if (x0 + (kw - 1) * d_w > in_w - 1) {
        *k_hi = x0 > in_w - 1 ? -1 : (in_w - 1 - x0) / d_w;
    }
}

/* ---- the gather form and the DSP loops (pe_conv_gather.c, pe_conv_dsp.c,
 * pe_conv_dsp_pw.c) ---- */

/* The taps k in [0, k_n) with 0 <= origin + k * dil < size: [*lo, *hi]
 * (empty when *lo > *hi). origin may be negative (padding). */
static inline void tap_range(int32_t origin, int32_t dil, int32_t k_n, int32_t size, int32_t *lo,
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

/* at most this many tap pairs for the depthwise channel-group loops
 * (pe_conv_dsp.c; pe_dw_dsp_applies, pe_conv_gather.c, checks the kernel;
 * every build: the gather target size query) */
#define PE_DW_MAX_PAIRS 32

#if PE_DSP
typedef struct {
    int32_t m, sh, fast;
} gq;

/* the SMMULR requantization (pe_dsp_requant) needs |acc| < 2^30: bias +
 * taps products of at most 128 * 255 each */
static inline int32_t acc_small(int64_t taps, int32_t b)
{
    const int64_t ab = b < 0 ? -(int64_t)b : (int64_t)b;
    return taps * 32640 + ab < ((int64_t)1 << 30);
}

static inline gq gq_setup(const pe_per_channel_quant *q, int32_t o, pe_rounding mode,
                          int32_t small)
{
    gq r;
    r.m = q->multiplier[o];
    r.sh = q->shift[o];
    r.fast = small && mode == PE_ROUND_DOUBLE && r.sh <= -1 && r.sh >= -23;
    return r;
}

/* finish out of line: the fallback of the DSP loops' fast requantization.
 * Each file that calls it gets its own copy (static, as pe_simd.h's loops):
 * gcc then knows which registers it leaves alone and compiles its callers
 * as in one file (an extern call cost pw_store an instruction per call). */
__attribute__((noinline, unused)) static int8_t finish_slow(int32_t acc, int32_t m, int32_t sh,
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

/* conv, one pixel: conv_1x2_window (two output channels over a clipped
 * window; also the clipped windows of the gather kernel's conv_dsp) and
 * conv_pixel_dsp (every output channel, in the raster order of the portable
 * loop: an output placed over its own input, pe_conv_gather.c, and a single
 * output pixel, pe_cv_dsp_rows in pe_conv_dsp_pw.c). Each of the two files
 * has its own copy (static, as pe_simd.h's loops): as extern functions they
 * lose gcc's clone with fewer arguments (IPA-SRA) and what it knows of their
 * registers, and the gather kernel's dilated and grouped convs ran 0.4% more
 * instructions. */

/* one pixel x two output channels, a clipped window [ky_lo, ky_hi] x
 * [kx_lo, kx_hi] (may be empty), input offset applied while widening */
__attribute__((unused))
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
__attribute__((unused))
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
__attribute__((noinline, unused)) static void conv_pixel_dsp(
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

/* pe_conv_dsp.c: depthwise (multiplier 1 or a multiple of 4) over output rows
 * [oy0, oy1) x columns [ox0, ox1), channel groups of four outermost; pixel
 * (oy, ox) goes to o + (oy - oy0) * o_row + (ox - ox0) * out_c (the
 * conditions: pe_dw_dsp_applies) */
void pe_dw_dsp_rect(const pe_conv_params *p, const pe_per_channel_quant *q, const pe_dims *in,
                    const int8_t *img, const pe_dims *f, const int8_t *filter,
                    const int32_t *bias, int32_t oy0, int32_t oy1, int32_t ox0, int32_t ox1,
                    int8_t *o, size_t o_row);

/* pe_conv_dsp_pw.c: pe_cv_dsp_rows (pe_conv_gather.h) with the output
 * pixels o_px bytes apart instead of out->c: the packed-int4 conv
 * (pe_conv_w4.c) runs the block loops on a tile of out->c (<= o_px)
 * channels, o pointing at the tile's first channel of the wider output */
void pe_cv_dsp_rows_px(const pe_conv_params *p, const pe_per_channel_quant *q, const pe_dims *in,
                       const int8_t *image, const pe_dims *f, const int8_t *filter,
                       const int32_t *bias, const pe_dims *out, int32_t oy0, int32_t oy1,
                       int8_t *o, uint32_t *wblk, int32_t wbytes, int32_t o_px);
#endif /* PE_DSP */

/* pe_conv_gather.c: one output pixel of a conv (groups == 1 as far as p
 * says: img points at the first input channel the filters read, in->c is
 * the image's channel stride, f->c the filters' depth) for the out->c
 * channels whose filters start at filter, bias / q / dst already offset to
 * them; an empty window (ky_lo > ky_hi) gives the bias alone. The DSP loops
 * when f->c == in->c on a DSP build, the portable ones otherwise. */
void pe_cv_pixel(const pe_conv_params *p, const pe_per_channel_quant *q, const pe_dims *in,
                 const int8_t *img, const pe_dims *f, const int8_t *filter, const int32_t *bias,
                 const pe_dims *out, int32_t iy0, int32_t ix0, int32_t ky_lo, int32_t ky_hi,
                 int32_t kx_lo, int32_t kx_hi, int8_t *dst);

#endif /* PE_CONV_INTERNAL_H */
