/*
 * pe_conv_gather.c - gather-form convolution and depthwise convolution
 * without scratch (pe_conv_gather.h; the DSP build's loops take a work block
 * from the caller's scratch where given, never from the stack).
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
 * builds under QEMU, also with the output placed over the input. The DSP
 * loops the reverse form runs too are in pe_conv_dsp_pw.c (conv block loops)
 * and pe_conv_dsp.c (depthwise channel groups; where they apply is decided
 * here, pe_cv_dsp_applies / pe_dw_dsp_applies); the argument checks in
 * pe_conv_check.c.
 */
#include <stdint.h>

#include "pyembed/pe_conv.h"
#include "pyembed/pe_conv_gather.h"
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_simd.h"

#include "pe_conv_internal.h"

#define PE_GATHER_DW_BLOCK 16

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

/* One output pixel of a conv for the out->c channels whose filters are at
 * filter (pe_conv_internal.h; the packed-int4 kernel, pe_conv_w4.c, runs it
 * on each unpacked chunk of channels). */
void pe_cv_pixel(const pe_conv_params *p, const pe_per_channel_quant *q, const pe_dims *in,
                 const int8_t *img, const pe_dims *f, const int8_t *filter, const int32_t *bias,
                 const pe_dims *out, int32_t iy0, int32_t ix0, int32_t ky_lo, int32_t ky_hi,
                 int32_t kx_lo, int32_t kx_hi, int8_t *dst)
{
    uint64_t reads = 0;
#if PE_DSP
    if (p->groups == 1 && f->c == in->c) {
        conv_pixel_dsp(p, q, in, img, f, filter, bias, out, iy0, ix0, ky_lo, ky_hi, kx_lo, kx_hi,
                       dst);
        return;
    }
#endif
    conv_pixel(p, q, in, img, f, filter, bias, out, iy0, ix0, ky_lo, ky_hi, kx_lo, kx_hi, dst,
               &reads);
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

/* whether pe_cv_dsp_rows (pe_conv_dsp_pw.c) applies: the shape alone, on
 * every build (the target size query below answers for a DSP build on any
 * host) */
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

/* The DSP build's work blocks (pe_conv_gather.h: the caller's ctx->buf, of
 * the size pe_..._gather_s8_get_target_buffer_size answers for dsp 1):
 * conv block loops, the widened weight block and staged rows; depthwise 3x3
 * stride 1, the int16 channel planes and staged rows; other depthwise
 * channel-group loops, staged rows of an output placed over its input. */
#define PE_CV_WORK 2048
/* a conv whose four-channel block of widened weights (pe_cv_dsp_bytes) is
 * larger than PE_CV_WORK but at most this asks for that block whole: in
 * PE_CV_WORK its block loops widen each kernel row again for every output
 * row and requantize in a second pass (ResNet-8's 3x3x32 stride-2 and
 * 3x3x64 convs on mps2-an386: 1.22 and 1.04 instructions per MAC in
 * 2,048 B, 0.99 and 0.86 with their whole blocks, 2,304 and 4,608 B) */
#define PE_CV_WORK_MAX 8192
#define PE_DW3_WORK 3072
#define PE_DW_WORK 1024

/* depthwise shapes of the channel-group loops (pe_dw_dsp_applies without
 * the bias bound, which a size query cannot see) */
static int32_t dw_shape_ok(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                           const pe_dims *out)
{
    return ((p->ch_mult == 1 && out->c >= 4) || p->ch_mult % 4 == 0) && out->c <= PE_DW_WORK &&
           (int64_t)f->h * f->w <= 2 * PE_DW_MAX_PAIRS &&
           ((int64_t)(f->h - 1) * p->dilation.h * in->w + (int64_t)(f->w - 1) * p->dilation.w) *
                   in->c <= PE_INT32_MAX;
}

/* the conv block loops' target work block (pe_cv_dsp_applies holds):
 * PE_CV_WORK, or a block loop's whole widened four-channel block where that
 * is larger, up to PE_CV_WORK_MAX (patches: PE_CV_WORK) */
static int32_t cv_target(const pe_conv_params *p, const pe_dims *in, const pe_dims *f)
{
    const int64_t run = (int64_t)f->w * in->c;
    int32_t least;
    const int32_t need = pe_cv_dsp_bytes(p, in, f, &least);
    const int32_t blocks = (run & 3) == 0 && p->dilation.w == 1 && (run >= 16 || f->h == 1);
    return blocks && need > PE_CV_WORK && need <= PE_CV_WORK_MAX ? need : PE_CV_WORK;
}

/* How a work block of `bytes` (a multiple of 4) serves the conv block
 * loops (cv_image): disjoint output, the weights in pieces; an output over
 * its input, *wb bytes of widened weights and *cap staged output rows.
 * 0: the block is too small for them. Every build: the least-size query
 * below asks it for a DSP target. */
static int32_t cv_work_split(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                             const pe_dims *out, int32_t disjoint, int32_t bytes, int32_t *wb,
                             int32_t *cap)
{
    const size_t row_b = (size_t)out->w * (size_t)out->c;
    int32_t least;
    const int64_t need = pe_cv_dsp_bytes(p, in, f, &least);
    int32_t w;
    *wb = 0;
    *cap = 0;
    if (bytes < 32) {
        return 0;
    }
    if (disjoint) {
        return bytes >= least || bytes >= need;
    }
    if (bytes < 256 || row_b > (size_t)bytes - 256u) {
        return 0;
    }
    w = (int32_t)(((size_t)bytes - row_b) / 32u * 32u);
    if (need <= w) {
        w = (int32_t)((need + 31) / 32 * 32);
    }
    if (w < least && w < need) {
        return 0;
    }
    *wb = w;
    *cap = (int32_t)(((size_t)bytes - (size_t)w) / row_b);
    return 1;
}

/* output rows per band of the depthwise 3x3 planes (dw3_image_work) with a
 * work block of `bytes` (0: no planes), the bias bound aside (see
 * dw3_stack_rows): the whole block for planes when the output is disjoint
 * from the input (a band's outputs of one channel group are written while
 * other channels' input is still unread otherwise), else at least two rows
 * of planes and finished int8 rows each */
static int32_t dw3_rows(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                        const pe_dims *out, int32_t disjoint, int32_t bytes)
{
    int32_t least, g, rowb, ns;
    if (pe_dw3_plane_bytes(p, in, f, out, &least) == 0 || least > bytes) {
        return 0;
    }
    if (disjoint) {
        return out->h;
    }
    g = out->c < 4 ? out->c : 4;
    rowb = least / (4 * g);
    ns = (int32_t)((bytes - 2 * g * rowb) / (out->w * out->c + g * rowb));
    ns = ns < out->h ? ns : out->h;
    /* (the staged rows are rounded up to whole words) */
    while (ns > 0 && bytes - (int32_t)(((size_t)ns * (size_t)out->w * (size_t)out->c + 3u) &
                                              ~(size_t)3u) < g * (ns + 2) * rowb) {
        ns--;
    }
    return ns >= 2 || (ns >= 1 && ns == out->h) ? ns : 0;
}

/* whether the depthwise channel-group loops (dw_image_dsp) run with
 * `bytes`: always on a disjoint output, else blocks of at least 8 pixels
 * or a whole row */
static int32_t dw_group_runs(const pe_dims *out, int32_t disjoint, int32_t bytes)
{
    return disjoint || bytes / out->c >= (out->w < 8 ? out->w : 8);
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
 * columns take pe_dsp_dot_1x2_off (offset applied while widening:
 * conv_1x2_window, pe_conv_internal.h).
 * depthwise: channel groups of four outermost (dw_image_dsp, below: tap
 * pairs, one SMLAD per channel and pair, multiplier 1 or a multiple of 4,
 * also for overlapping outputs through the work block); otherwise per pixel,
 * four output channels at a time with SMLABB/SMLATT on SXTB16-widened words:
 * channel multiplier 1 (four input channels per word) or a multiplier
 * divisible by 4 (four outputs of one input channel, one input byte per
 * tap). Same int32 sums, same requantization. */

/* uint32 sum, as SMLAD accumulates: the caller's final value fits int32 */
static inline int32_t add_wrap(int32_t a, int32_t b)
{
    return (int32_t)((uint32_t)a + (uint32_t)b);
}

__attribute__((noinline)) static void conv_dsp(const pe_conv_params *p, const pe_per_channel_quant *q, const pe_dims *in,
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

/* whole output rows of every image through pe_cv_dsp_rows in the work
 * block (buf, bytes: 4-byte aligned): the widened weight block and, where
 * the output overlaps the input (the planner's "pixels" model,
 * pe_conv_gather.h), batches of finished int8 rows, written once every
 * window of the batch has been read (so every later window still reads only
 * bytes the raster order would not have overwritten yet). Returns 0 (nothing
 * done) where the block cannot hold a useful piece of weights (and one
 * output row). */
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
                                                  int8_t *dst, int32_t disjoint, uint32_t *buf,
                                                  int32_t bytes)
{
    const size_t row_b = (size_t)out->w * (size_t)out->c;
    int32_t wb, cap, a, e;
    if (buf == NULL || !cv_work_split(p, in, f, out, disjoint, bytes, &wb, &cap)) {
        return 0;
    }
    if (disjoint) {
        pe_cv_dsp_rows(p, q, in, img, f, filter, bias, out, 0, out->h, dst, buf, bytes);
        return 1;
    }
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


/* whether pe_dw_dsp_rows / pe_dw_dsp_rect (pe_conv_dsp.c) apply; here,
 * beside run, for the reason of pe_cv_dsp_applies */
int32_t pe_dw_dsp_applies(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                          const pe_dims *out, const int32_t *bias)
{
    return ((p->ch_mult == 1 && out->c >= 4) || p->ch_mult % 4 == 0) &&
           out->c <= PE_DW_WORK &&
           (int64_t)f->h * f->w <= 2 * PE_DW_MAX_PAIRS &&
           ((int64_t)(f->h - 1) * p->dilation.h * in->w + (int64_t)(f->w - 1) * p->dilation.w) *
                   in->c <= PE_INT32_MAX &&
           dw_small(bias, out->c, (int64_t)f->h * f->w);
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

/* pe_dw_dsp_rect over one image. An output disjoint from the input is written
 * in place, the whole image at once. An output placed over its input (the
 * planner's "pixels" allowance: pixel p may overwrite input bytes before the
 * window of every pixel >= p) is computed in blocks of whole rows, or of up
 * to bytes / out_c pixels of one row, into the work block and
 * copied out once every window of the block has been read, so no output
 * byte is written earlier than the raster order writes it. */
/* the int16 channel planes (pe_dw3_dsp.c) a depthwise 3x3 stride-1 call
 * widens into, in the work block: of PE_DW3_WORK bytes, bands of 4 output
 * rows of up to 60 columns, 10 of up to 28, 22 of up to 12; an output placed
 * over its input also holds a band's finished int8 rows there */

/* dw3_rows where the DSP planes apply to the call (the bias bound) */
static int32_t dw3_stack_rows(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                              const pe_dims *out, const int32_t *bias, int32_t disjoint,
                              int32_t bytes)
{
    return pe_dw3_applies(p, in, f, out, bias) ? dw3_rows(p, in, f, out, disjoint, bytes) : 0;
}

/* one image through the planes in the work block: rows ns at a time, staged
 * in the block and written in raster order once all of a band's windows
 * are read (ns < out->h: the output overlaps the input as the "pixels" row
 * model of pyembed.plan.overlap allows it, every later window's input
 * still intact), else written in place */
__attribute__((noinline)) static void dw3_image_work(const pe_conv_params *p,
                                                      const pe_per_channel_quant *q,
                                                      const pe_dims *in, const int8_t *img,
                                                      const pe_dims *f, const int8_t *filter,
                                                      const int32_t *bias, const pe_dims *out,
                                                      int8_t *dst, int32_t ns, int32_t disjoint,
                                                      uint32_t *block, int32_t bytes)
{
    const size_t row_b = (size_t)out->w * (size_t)out->c;
    int32_t oy, ny, stage;
    if (disjoint) {
        pe_dw3_rows(p, q, in, img, f, filter, bias, out, 0, out->h, dst, row_b,
                    (int16_t *)(void *)block, bytes);
        return;
    }
    stage = (int32_t)(((size_t)ns * row_b + 3u) & ~(size_t)3u);
    for (oy = 0; oy < out->h; oy += ny) {
        /* no band of one row after a larger one: one row runs the planes'
         * C loops (the assembly takes row pairs), so the band before it is
         * a row shorter and the last has two (KWS's 25 rows in bands of 3:
         * 3 x 7, 2, 2; in 1,600 B 561,240 -> 491,120 instructions with
         * pe_dw3_rows' band of 3 in one pass) */
        ny = out->h - oy < ns ? out->h - oy : ns;
        if (ny > 2 && out->h - oy - ny == 1) {
            ny--;
        }
        pe_dw3_rows(p, q, in, img, f, filter, bias, out, oy, oy + ny, (int8_t *)block, row_b,
                    (int16_t *)(void *)((uint8_t *)block + stage), bytes - stage);
        dw_copy(dst + (size_t)oy * row_b, (const uint8_t *)block, (size_t)ny * row_b);
    }
}

static void dw_image_dsp(const pe_conv_params *p, const pe_per_channel_quant *q,
                         const pe_dims *in, const int8_t *img, const pe_dims *f,
                         const int8_t *filter, const int32_t *bias, const pe_dims *out,
                         int8_t *dst, int32_t disjoint, uint32_t *buf, int32_t bytes)
{
    const int32_t out_w = out->w, c_n = out->c;
    const int32_t k = bytes / c_n;
    int32_t oy, ox;
    if (disjoint) {
        pe_dw_dsp_rect(p, q, in, img, f, filter, bias, 0, out->h, 0, out_w, dst,
                       (size_t)out_w * (size_t)c_n);
        return;
    }
    if (k >= out_w) {
        /* whole rows per block */
        const int32_t rows = k / out_w;
        const size_t row_b = (size_t)out_w * (size_t)c_n;
        for (oy = 0; oy < out->h; oy += rows) {
            const int32_t ny = out->h - oy < rows ? out->h - oy : rows;
            pe_dw_dsp_rect(p, q, in, img, f, filter, bias, oy, oy + ny, 0, out_w, (int8_t *)buf,
                           row_b);
            dw_copy(dst + (size_t)oy * row_b, (const uint8_t *)buf, (size_t)ny * row_b);
        }
        return;
    }
    for (oy = 0; oy < out->h; oy++) {
        for (ox = 0; ox < out_w; ox += k) {
            const int32_t nx = out_w - ox < k ? out_w - ox : k;
            pe_dw_dsp_rect(p, q, in, img, f, filter, bias, oy, oy + 1, ox, ox + nx, (int8_t *)buf,
                           0);
            dw_copy(dst + ((size_t)oy * (size_t)out_w + (size_t)ox) * (size_t)c_n,
                    (const uint8_t *)buf, (size_t)nx * (size_t)c_n);
        }
    }
}

#endif /* PE_DSP */

/* one image pixel by pixel, in raster order (the portable loops, and the
 * DSP build's per-pixel ones); MACs and input reads added to *macs, *reads.
 * Out of line, once per image: its locals stay off the stack of the
 * whole-image DSP loops. dsp_flags (DSP build): bit 0 the depthwise image
 * loops ran (count only), bit 1 |acc| < 2^30 (dw_small), bit 2 the output is
 * disjoint from the input. */
static inline __attribute__((always_inline)) void pixels(const pe_conv_params *p, const pe_per_channel_quant *q,
                                                          const pe_dims *in, const int8_t *img,
                                                          const pe_dims *f, const int8_t *filter,
                                                          const int32_t *bias, const pe_dims *out, int8_t *dst,
                                                          const int32_t depthwise, int32_t dsp_flags,
                                                          uint64_t *macs_p, uint64_t *reads_p)
{
    uint64_t macs = 0, reads = 0;
    int32_t oy, ox;
#if PE_DSP
    const int32_t dw_img = dsp_flags & 1, dw_sm = (dsp_flags >> 1) & 1, disjoint = (dsp_flags >> 2) & 1;
#else
    (void)dsp_flags;
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
    *macs_p += macs;
    *reads_p += reads;
}

/* pixels for each type, out of line (a firmware whose model has only one of
 * the two types links only that one's loops) */
__attribute__((noinline)) static void pixels_conv(const pe_conv_params *p, const pe_per_channel_quant *q,
                                                  const pe_dims *in, const int8_t *img, const pe_dims *f,
                                                  const int8_t *filter, const int32_t *bias, const pe_dims *out,
                                                  int8_t *dst, int32_t dsp_flags, uint64_t *macs_p,
                                                  uint64_t *reads_p)
{
    pixels(p, q, in, img, f, filter, bias, out, dst, 0, dsp_flags, macs_p, reads_p);
}

__attribute__((noinline)) static void pixels_dw(const pe_conv_params *p, const pe_per_channel_quant *q,
                                                const pe_dims *in, const int8_t *img, const pe_dims *f,
                                                const int8_t *filter, const int32_t *bias, const pe_dims *out,
                                                int8_t *dst, int32_t dsp_flags, uint64_t *macs_p,
                                                uint64_t *reads_p)
{
    pixels(p, q, in, img, f, filter, bias, out, dst, 1, dsp_flags, macs_p, reads_p);
}

/* one convolution (depthwise a constant at each entry point, so that each
 * keeps only its own type's loops) */
static inline __attribute__((always_inline)) pe_status run(const pe_context *ctx, const pe_conv_params *p,
                                                           const pe_per_channel_quant *q, const pe_dims *in,
                                                           const int8_t *input, const pe_dims *f,
                                                           const int8_t *filter, const int32_t *bias,
                                                           const pe_dims *out, int8_t *output, const int32_t depthwise)
{
    int32_t n;
    uint64_t macs = 0, reads = 0;
    size_t in_img, out_img;
    int32_t dsp_flags = 0;
#if PE_DSP
    int32_t oy, ox, disjoint, dw_sm = 0, dw_img = 0, dw_planes = 0, wbytes = 0;
    uint32_t *work = NULL;
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
    /* the work block: the caller's scratch (none: the loops that need none) */
    if (ctx != NULL && ctx->buf != NULL && ctx->size >= 4 && ((uintptr_t)ctx->buf & 3u) == 0u) {
        work = (uint32_t *)ctx->buf;
        wbytes = ctx->size & ~3;
    }
    if (depthwise) {
        dw_sm = dw_small(bias, out->c, (int64_t)f->h * f->w);
        /* (an overlapping call in blocks of at least 8 pixels or a row) */
        dw_planes = work != NULL ? dw3_stack_rows(p, in, f, out, bias, disjoint, wbytes) : 0;
        dw_img = dw_planes ||
                 (pe_dw_dsp_applies(p, in, f, out, bias) && dw_group_runs(out, disjoint, wbytes));
    }
    dsp_flags = (dw_img ? 1 : 0) | (dw_sm ? 2 : 0) | (disjoint ? 4 : 0);
#endif
    for (n = 0; n < in->n; n++) {
        const int8_t *img = input + (size_t)n * in_img;
        int8_t *dst = output + (size_t)n * out_img;
#if PE_DSP
        if (!depthwise && pe_cv_dsp_applies(p, in, f, out) &&
            cv_image(p, q, in, img, f, filter, bias, out, dst, disjoint, work, wbytes)) {
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
            if (dw_planes) {
                dw3_image_work(p, q, in, img, f, filter, bias, out, dst, dw_planes, disjoint, work,
                               wbytes);
            } else {
                dw_image_dsp(p, q, in, img, f, filter, bias, out, dst, disjoint, work, wbytes);
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
        if (depthwise) {
            pixels_dw(p, q, in, img, f, filter, bias, out, dst, dsp_flags, &macs, &reads);
        } else {
            pixels_conv(p, q, in, img, f, filter, bias, out, dst, dsp_flags, &macs, &reads);
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

/* the work block a DSP build's loops take (dsp 1; 0 for dsp 0): see
 * pe_conv_gather.h */
static pe_status target_query(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                              const pe_dims *out, int32_t depthwise, int32_t dsp, int32_t *size)
{
    int32_t least;
    const pe_status s = size_query(p, in, f, out, depthwise, size);
    if (s != PE_OK) {
        return s;
    }
    if (dsp != 0 && dsp != 1) {
        return PE_ERR_ARG;
    }
    if (!dsp) {
        return PE_OK;
    }
    if (!depthwise) {
        *size = pe_cv_dsp_applies(p, in, f, out) ? cv_target(p, in, f) : 0;
    } else if (pe_dw3_plane_bytes(p, in, f, out, &least) > 0 && least <= PE_DW3_WORK) {
        *size = PE_DW3_WORK;
    } else {
        *size = dw_shape_ok(p, in, f, out) ? PE_DW_WORK : 0;
    }
    return PE_OK;
}

/* Whether a DSP build runs, with a work block of `bytes`, the loops the
 * target size runs (target_query's choice; the bias bound aside) at about
 * their speed: the conv block loops with each four-channel block's weights
 * widened whole and, on an output over its input, at least 16 pixels (or
 * every row) per batch of staged rows (a batch widens the weights again);
 * the depthwise planes in bands of at least 2 rows (each band moves its two
 * halo plane rows and has its own set-up); the channel-group loops in blocks of at least a row. A
 * smaller block still runs these loops (cv_work_split, dw3_rows,
 * dw_group_runs), in pieces the planner's instruction model does not see.
 * (16 pixels and 2-row bands, down from 32 and 4, take KWS's lean plan from
 * 12,096 to 11,392 B of arena for 4.62 -> 4.97 M instructions on
 * mps2-an386: python -m pyembed.bench target.) */
static int32_t target_loops_run(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                                const pe_dims *out, int32_t depthwise, int32_t disjoint,
                                int32_t bytes)
{
    int32_t wb, cap, least, need, ns;
    if (!depthwise) {
        if (!cv_work_split(p, in, f, out, disjoint, bytes, &wb, &cap)) {
            return 0;
        }
        need = pe_cv_dsp_bytes(p, in, f, &least);
        if (disjoint) {
            return bytes >= need;
        }
        return wb >= need && (cap >= out->h || (int64_t)cap * out->w >= 16);
    }
    if (pe_dw3_plane_bytes(p, in, f, out, &least) > 0 && least <= PE_DW3_WORK) {
        ns = dw3_rows(p, in, f, out, disjoint, bytes);
        return ns >= (out->h < 2 ? out->h : 2);
    }
    return dw_group_runs(out, disjoint, bytes) && (disjoint || bytes / out->c >= out->w);
}

static pe_status least_query(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                             const pe_dims *out, int32_t depthwise, int32_t overlap,
                             int32_t *size)
{
    int32_t target, b;
    const pe_status s = target_query(p, in, f, out, depthwise, 1, &target);
    if (s != PE_OK) {
        return s;
    }
    if (overlap != 0 && overlap != 1) {
        return PE_ERR_ARG;
    }
    *size = 0;
    if (target == 0) {
        return PE_OK;
    }
    /* the conditions are monotonic in the block size: the first multiple
     * of 4 that meets them; the target itself where none below it does */
    *size = target;
    for (b = 0; b < target; b += 4) {
        if (target_loops_run(p, in, f, out, depthwise, !overlap, b)) {
            *size = b;
            break;
        }
    }
    return PE_OK;
}

pe_status pe_conv2d_gather_s8_get_least_buffer_size(const pe_conv_params *params,
                                                    const pe_dims *input_dims,
                                                    const pe_dims *filter_dims,
                                                    const pe_dims *output_dims, int32_t overlap,
                                                    int32_t *size)
{
    return least_query(params, input_dims, filter_dims, output_dims, 0, overlap, size);
}

pe_status pe_depthwise_conv2d_gather_s8_get_least_buffer_size(const pe_conv_params *params,
                                                              const pe_dims *input_dims,
                                                              const pe_dims *filter_dims,
                                                              const pe_dims *output_dims,
                                                              int32_t overlap, int32_t *size)
{
    return least_query(params, input_dims, filter_dims, output_dims, 1, overlap, size);
}

pe_status pe_conv2d_gather_s8_get_target_buffer_size(const pe_conv_params *params,
                                                     const pe_dims *input_dims,
                                                     const pe_dims *filter_dims,
                                                     const pe_dims *output_dims, int32_t dsp,
                                                     int32_t *size)
{
    return target_query(params, input_dims, filter_dims, output_dims, 0, dsp, size);
}

pe_status pe_depthwise_conv2d_gather_s8_get_target_buffer_size(const pe_conv_params *params,
                                                               const pe_dims *input_dims,
                                                               const pe_dims *filter_dims,
                                                               const pe_dims *output_dims,
                                                               int32_t dsp, int32_t *size)
{
    return target_query(params, input_dims, filter_dims, output_dims, 1, dsp, size);
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
