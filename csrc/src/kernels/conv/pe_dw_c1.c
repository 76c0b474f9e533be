/*
 * pe_dw_c1.c - depthwise convolution of a one-channel input
 * (pe_depthwise_conv2d_c1_s8, pe_conv_gather.h): out_c = ch_mult output
 * channels, each a plain 2-D filter over the same single input plane.
 *
 * Same parameters, checks, sums and bytes as the gather kernel
 * (pe_conv_gather.c); the loops differ. Output pixels in raster order, every
 * channel of a pixel before the next pixel (so a plan's output-over-input
 * allowance, pyembed.plan.overlap "pixels", holds as for the gather kernel):
 *
 *   rows     for each output row, its kh input rows copied into a block of
 *            kh rows of bw = (out_w - 1) * stride.w + kw4 bytes (kw4 = kw
 *            rounded up to 4), columns and rows in the padding filled with
 *            the input zero point (-input_offset), so that x + offset is 0
 *            there and every window is kh runs of kw4 bytes;
 *   weights  the filter re-ordered once per call to [channel block of 4]
 *            [group of 4 taps][channel][tap] (int8, taps kw .. kw4-1 and
 *            channels out_c .. 4k-1 zero);
 *   sums     per pixel and block of four channels: per four taps one word of
 *            input widened with the offset (two SXTAB16) and one word of
 *            weights per channel (two SXTB16, two SMLAD) under PE_DSP, or the
 *            same products in C.
 *
 * The block and the weights live on the stack (PE_DW_C1_MAX_ROWS and
 * PE_DW_C1_MAX_WEIGHTS bytes); a shape whose arrays would be larger, with
 * dilation.w != 1 or an input offset outside [-127, 128] runs the
 * tap-by-tap loop of the same sums. The products of the zero taps add 0 and
 * the sums are bounded like the gather kernel's (pe_conv_check_quant), so
 * the int32 results are the same integers in every path.
 */
#include <stdint.h>

#include "pyembed/pe_conv.h"
#include "pyembed/pe_conv_gather.h"
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_simd.h"

#define PE_DW_C1_MAX_ROWS 480
#define PE_DW_C1_MAX_WEIGHTS PE_DW_C1_WEIGHT_BYTES

/* [lo, hi] of the taps k in [0, k_n) with 0 <= v0 + k * d < n (hi < lo: none) */
static void c1_tap_range(int32_t v0, int32_t d, int32_t k_n, int32_t n, int32_t *lo, int32_t *hi)
{
    int32_t a = 0, b = k_n - 1;
    while (a <= b && v0 + a * d < 0) {
        a++;
    }
    while (b >= a && v0 + b * d >= n) {
        b--;
    }
    *lo = a;
    *hi = b;
}

static int8_t c1_requant(int32_t acc, const pe_conv_params *p, int32_t m, int32_t s)
{
    /* clamped before the offset is added (the requantized value may be
     * near the int32 limits), as the other conv kernels do */
    const int32_t v = pe_fx_requant_mode(acc, m, s, p->rounding);
    return (int8_t)(pe_fx_clamp(v, p->activation.min - p->output_offset,
                                p->activation.max - p->output_offset) +
                    p->output_offset);
}

/* c1_requant, on the DSP build through pe_dsp_requant where its conditions
 * hold (small: |acc| < 2^30 for every sum of the call, double rounding) */
static int8_t c1_requant_fast(int32_t acc, const pe_conv_params *p, int32_t m, int32_t s,
                              int32_t small)
{
#if PE_DSP
    if (small && s <= -1 && s >= -23) {
        return pe_dsp_requant(acc, m, -s, p->activation.min, p->activation.max, p->output_offset);
    }
#else
    (void)small;
#endif
    return c1_requant(acc, p, m, s);
}

/* tap-by-tap over the in-bounds taps, straight from the filter */
static void c1_pixel_plain(const pe_conv_params *p, const pe_per_channel_quant *q,
                           const pe_dims *in, const int8_t *x, const pe_dims *f,
                           const int8_t *filter, const int32_t *bias, int32_t out_c,
                           int32_t iy0, int32_t ix0, int8_t *dst)
{
    int32_t ky_lo, ky_hi, kx_lo, kx_hi, m, ky, kx;
    c1_tap_range(iy0, p->dilation.h, f->h, in->h, &ky_lo, &ky_hi);
    c1_tap_range(ix0, p->dilation.w, f->w, in->w, &kx_lo, &kx_hi);
    for (m = 0; m < out_c; m++) {
        int32_t acc = bias != NULL ? bias[m] : 0;
        for (ky = ky_lo; ky <= ky_hi; ky++) {
            const int8_t *row = x + (size_t)(iy0 + ky * p->dilation.h) * (size_t)in->w;
            for (kx = kx_lo; kx <= kx_hi; kx++) {
                acc += ((int32_t)row[ix0 + kx * p->dilation.w] + p->input_offset) *
                       (int32_t)filter[(size_t)(ky * f->w + kx) * (size_t)out_c + (size_t)m];
            }
        }
        dst[m] = c1_requant(acc, p, q->multiplier[m], q->shift[m]);
    }
}

/* the block of output row oy: rows iy0 + ky * dilation.h, columns
 * -padding.left .. bw - padding.left - 1, the zero point outside the input */
static void c1_rows(const pe_conv_params *p, const pe_dims *in, const int8_t *x, int32_t kh,
                    int32_t bw, int32_t iy0, int8_t *blk)
{
    const int8_t zp = (int8_t)(-p->input_offset);
    const int32_t left = p->padding.left;
    int32_t ky, j;
    for (ky = 0; ky < kh; ky++, blk += bw) {
        const int32_t iy = iy0 + ky * p->dilation.h;
        if (iy < 0 || iy >= in->h) {
            for (j = 0; j < bw; j++) {
                blk[j] = zp;
            }
            continue;
        }
        {
            const int8_t *row = x + (size_t)iy * (size_t)in->w;
            const int32_t a = left < bw ? left : bw;            /* [0, a): left padding */
            const int32_t e = in->w + left < bw ? in->w + left : bw; /* [a, e): the row */
            for (j = 0; j < a; j++) {
                blk[j] = zp;
            }
            for (; j < e; j++) {
                blk[j] = row[j - left];
            }
            for (; j < bw; j++) {
                blk[j] = zp;
            }
        }
    }
}

/* acc[c] += the window at xw (kh rows bw bytes apart, n4 groups of four
 * bytes each) . the weights of channel c, c = 0 .. 3; w holds per group the
 * four channels' four bytes, 16 bytes */
static void c1_dot4(int32_t *acc, const int8_t *xw, int32_t bw, int32_t kh, int32_t n4,
                    const int8_t *w, int32_t off)
{
    int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3], ky, g;
#if PE_DSP
    const uint32_t off2 = pe_dup16(off);
    const int32_t step = bw - 4 * n4;
    const int8_t *xp = xw;
    /* (rows counted down and one pointer walking the block: few enough live
     * values that the four accumulators stay in registers) */
    for (ky = kh; ky > 0; ky--, xp += step) {
#if PE_DSP_ASM
        /* a kernel row, n4 groups of four taps, in fixed form (the
         * intrinsics below, which gcc -O2 compiles with the block pointer
         * and counters spilled): 25 instructions per group for 16 MACs */
        uint32_t x02, x13, t, u;
        g = n4;
        __asm__("1:\n\t"
                "ldr     %[t], [%[xp]], #4\n\t"
                "sxtab16 %[x02], %[o2], %[t]\n\t"
                "sxtab16 %[x13], %[o2], %[t], ror #8\n\t"
                "ldr     %[t], [%[w]], #4\n\t"
                "sxtb16  %[u], %[t]\n\t"
                "smlad   %[a0], %[x02], %[u], %[a0]\n\t"
                "sxtb16  %[u], %[t], ror #8\n\t"
                "smlad   %[a0], %[x13], %[u], %[a0]\n\t"
                "ldr     %[t], [%[w]], #4\n\t"
                "sxtb16  %[u], %[t]\n\t"
                "smlad   %[a1], %[x02], %[u], %[a1]\n\t"
                "sxtb16  %[u], %[t], ror #8\n\t"
                "smlad   %[a1], %[x13], %[u], %[a1]\n\t"
                "ldr     %[t], [%[w]], #4\n\t"
                "sxtb16  %[u], %[t]\n\t"
                "smlad   %[a2], %[x02], %[u], %[a2]\n\t"
                "sxtb16  %[u], %[t], ror #8\n\t"
                "smlad   %[a2], %[x13], %[u], %[a2]\n\t"
                "ldr     %[t], [%[w]], #4\n\t"
                "sxtb16  %[u], %[t]\n\t"
                "smlad   %[a3], %[x02], %[u], %[a3]\n\t"
                "sxtb16  %[u], %[t], ror #8\n\t"
                "smlad   %[a3], %[x13], %[u], %[a3]\n\t"
                "subs    %[g], %[g], #1\n\t"
                "bne     1b\n\t"
                : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [xp] "+r"(xp),
                  [w] "+r"(w), [g] "+r"(g), [x02] "=&r"(x02), [x13] "=&r"(x13), [t] "=&r"(t),
                  [u] "=&r"(u)
                : [o2] "r"(off2)
                : "cc", "memory");
#else
        for (g = n4; g > 0; g--, xp += 4, w += 16) {
            const uint32_t xv = pe_rd32(xp);
            const uint32_t x02 = __sxtab16(off2, xv), x13 = pe_sxtab16_ror8(off2, xv);
            uint32_t v = pe_rd32(w);
            a0 = __smlad(x02, __sxtb16(v), a0);
            a0 = __smlad(x13, pe_sxtb16_ror8(v), a0);
            v = pe_rd32(w + 4);
            a1 = __smlad(x02, __sxtb16(v), a1);
            a1 = __smlad(x13, pe_sxtb16_ror8(v), a1);
            v = pe_rd32(w + 8);
            a2 = __smlad(x02, __sxtb16(v), a2);
            a2 = __smlad(x13, pe_sxtb16_ror8(v), a2);
            v = pe_rd32(w + 12);
            a3 = __smlad(x02, __sxtb16(v), a3);
            a3 = __smlad(x13, pe_sxtb16_ror8(v), a3);
        }
#endif
    }
#else
    for (ky = 0; ky < kh; ky++, xw += bw) {
        const int8_t *xp = xw;
        for (g = 0; g < n4; g++, xp += 4, w += 16) {
            const int32_t x0 = xp[0] + off, x1 = xp[1] + off, x2 = xp[2] + off, x3 = xp[3] + off;
            a0 += x0 * w[0] + x1 * w[1] + x2 * w[2] + x3 * w[3];
            a1 += x0 * w[4] + x1 * w[5] + x2 * w[6] + x3 * w[7];
            a2 += x0 * w[8] + x1 * w[9] + x2 * w[10] + x3 * w[11];
            a3 += x0 * w[12] + x1 * w[13] + x2 * w[14] + x3 * w[15];
        }
    }
#endif
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}

/* The fast loops' weight order: [channel block of 4][group of 4 taps]
 * [channel in block][tap in group], taps kx >= kw and channels >= out_c zero
 * (kw4 = kw rounded up to 4, n4 = kh * kw4 / 4 groups). */
static void c1_order_weights(const int8_t *filter, int32_t kh, int32_t kw, int32_t kw4, int32_t out_c,
                             int32_t out_c4, int32_t n4, int8_t *wr)
{
    int32_t m, ky, kx;
    for (m = 0; m < out_c4; m++) {
        /* tap t = ky * kw4 + kx goes to wb[(t / 4) * 16 + t % 4] (kw4 is a multiple of 4) */
        int8_t *wb = wr + ((size_t)(m >> 2) * (size_t)n4 * 4 + (size_t)(m & 3)) * 4;
        const int8_t *fm = filter + m;
        for (ky = 0; ky < kh; ky++) {
            for (kx = 0; kx < kw4; kx += 4, wb += 16) {
                int32_t j;
                for (j = 0; j < 4; j++) {
                    wb[j] = kx + j < kw && m < out_c ? fm[(size_t)(ky * kw + kx + j) * (size_t)out_c] : 0;
                }
            }
        }
    }
}

int32_t pe_depthwise_conv2d_c1_s8_weights(const pe_dims *filter_dims, const int8_t *filter, int8_t *wr)
{
    int32_t kw4, out_c4;
    if (filter_dims == NULL || filter == NULL || wr == NULL || filter_dims->h <= 0 ||
        filter_dims->w <= 0 || filter_dims->c <= 0) {
        return 0;
    }
    kw4 = (filter_dims->w + 3) & ~3;
    out_c4 = (filter_dims->c + 3) & ~3;
    if ((int64_t)filter_dims->h * kw4 * out_c4 > PE_DW_C1_MAX_WEIGHTS) {
        return 0;
    }
    c1_order_weights(filter, filter_dims->h, filter_dims->w, kw4, filter_dims->c, out_c4,
                     filter_dims->h * kw4 / 4, wr);
    return 1;
}

/* the kernel; wr_pre: the weights in the fast loops' order (from
 * pe_depthwise_conv2d_c1_s8_weights) or NULL, then ordered into wr_own
 * (PE_DW_C1_MAX_WEIGHTS bytes) where the fast loops apply */
static pe_status c1_body(const pe_context *ctx, const pe_conv_params *params,
                         const pe_per_channel_quant *quant, const pe_dims *input_dims,
                         const int8_t *input, const pe_dims *filter_dims, const int8_t *filter,
                         const int32_t *bias, const pe_dims *output_dims, int8_t *output,
                         const int8_t *wr_pre, int8_t *wr_own)
{
    int8_t blk[PE_DW_C1_MAX_ROWS];
    const int8_t *wr = wr_pre != NULL ? wr_pre : wr_own;
    const pe_conv_params *p = params;
    int32_t kh, kw, kw4, out_c, out_c4, n4, bw, n, oy, ox, m, lo, hi, fast, small;
    int64_t bound;
    int64_t taps4;
    uint64_t ny = 0, nx = 0;
    size_t in_img, out_img;
    pe_status s = pe_conv_check_geometry(params, input_dims, filter_dims, output_dims, 1);
    if (s != PE_OK) {
        return s;
    }
    if (input == NULL || filter == NULL || output == NULL || input_dims->c != 1) {
        return PE_ERR_ARG;
    }
    kh = filter_dims->h;
    kw = filter_dims->w;
    out_c = output_dims->c;
    s = pe_conv_check_quant(quant, bias, out_c, (int64_t)kh * kw);
    if (s != PE_OK) {
        return s;
    }
    /* every sum's bound (pe_conv_check_quant's): |x + offset| <= 255, |w| <= 128 */
    bound = 0;
    for (m = 0; bias != NULL && m < out_c; m++) {
        const int64_t b = bias[m] < 0 ? -(int64_t)bias[m] : (int64_t)bias[m];
        bound = b > bound ? b : bound;
    }
    bound += (int64_t)kh * kw * 128 * 255;
    small = p->rounding == PE_ROUND_DOUBLE && bound < ((int64_t)1 << 30);
    kw4 = (kw + 3) & ~3;
    out_c4 = (out_c + 3) & ~3;
    taps4 = (int64_t)kh * kw4;
    n4 = (int32_t)(taps4 / 4);
    bw = (output_dims->w - 1) * p->stride.w + kw4;
    fast = p->dilation.w == 1 && p->input_offset >= -127 && p->input_offset <= 128 &&
           (int64_t)kh * bw <= PE_DW_C1_MAX_ROWS && taps4 * out_c4 <= PE_DW_C1_MAX_WEIGHTS;
    if (fast && wr_pre == NULL) {
        c1_order_weights(filter, kh, kw, kw4, out_c, out_c4, n4, wr_own);
    }
    in_img = (size_t)input_dims->h * (size_t)input_dims->w;
    out_img = (size_t)output_dims->h * (size_t)output_dims->w * (size_t)out_c;
    for (n = 0; n < input_dims->n; n++) {
        const int8_t *x = input + (size_t)n * in_img;
        int8_t *dst = output + (size_t)n * out_img;
        for (oy = 0; oy < output_dims->h; oy++) {
            const int32_t iy0 = oy * p->stride.h - p->padding.top;
            if (fast) {
                c1_rows(p, input_dims, x, kh, bw, iy0, blk);
            }
            for (ox = 0; ox < output_dims->w; ox++, dst += out_c) {
                const int32_t ix0 = ox * p->stride.w - p->padding.left;
                if (!fast) {
                    c1_pixel_plain(p, quant, input_dims, x, filter_dims, filter, bias, out_c, iy0,
                                   ix0, dst);
                    continue;
                }
                for (m = 0; m < out_c; m += 4) {
                    int32_t acc[4], c;
                    for (c = 0; c < 4; c++) {
                        acc[c] = bias != NULL && m + c < out_c ? bias[m + c] : 0;
                    }
                    c1_dot4(acc, blk + (size_t)ox * (size_t)p->stride.w, bw, kh, n4 / kh,
                            wr + (size_t)m * (size_t)taps4, p->input_offset);
                    for (c = 0; c < 4 && m + c < out_c; c++) {
                        dst[m + c] = c1_requant_fast(acc[c], p, quant->multiplier[m + c],
                                                     quant->shift[m + c], small);
                    }
                }
            }
        }
    }
    if (ctx != NULL && ctx->stats != NULL) {
        /* the in-bounds taps of every window, counted per axis (separable) */
        for (oy = 0; oy < output_dims->h; oy++) {
            c1_tap_range(oy * p->stride.h - p->padding.top, p->dilation.h, kh, input_dims->h, &lo,
                         &hi);
            ny += (uint64_t)(hi >= lo ? hi - lo + 1 : 0);
        }
        for (ox = 0; ox < output_dims->w; ox++) {
            c1_tap_range(ox * p->stride.w - p->padding.left, p->dilation.w, kw, input_dims->w, &lo,
                         &hi);
            nx += (uint64_t)(hi >= lo ? hi - lo + 1 : 0);
        }
        ctx->stats->macs += ny * nx * (uint64_t)out_c * (uint64_t)input_dims->n;
        ctx->stats->input_reads += ny * nx * (uint64_t)out_c * (uint64_t)input_dims->n;
    }
    return PE_OK;
}

pe_status pe_depthwise_conv2d_c1_s8(const pe_context *ctx, const pe_conv_params *params,
                                    const pe_per_channel_quant *quant,
                                    const pe_dims *input_dims, const int8_t *input,
                                    const pe_dims *filter_dims, const int8_t *filter,
                                    const int32_t *bias, const pe_dims *output_dims,
                                    int8_t *output)
{
    int8_t wr[PE_DW_C1_MAX_WEIGHTS];
    return c1_body(ctx, params, quant, input_dims, input, filter_dims, filter, bias, output_dims,
                   output, NULL, wr);
}

pe_status pe_depthwise_conv2d_c1_s8_with_weights(const pe_context *ctx, const pe_conv_params *params,
                                                 const pe_per_channel_quant *quant,
                                                 const pe_dims *input_dims, const int8_t *input,
                                                 const pe_dims *filter_dims, const int8_t *filter,
                                                 const int32_t *bias, const pe_dims *output_dims,
                                                 int8_t *output, const int8_t *wr)
{
    if (wr == NULL) {
        return PE_ERR_ARG;
    }
    return c1_body(ctx, params, quant, input_dims, input, filter_dims, filter, bias, output_dims,
                   output, wr, NULL);
}
