/*
 * pe_conv_rev.c - reverse convolution and depthwise convolution (pe_conv.h).
 *
 * The whole-tensor calls run the row stream over each image. A pushed input
 * row is turned into the list of (output row, kernel row) pairs it reaches;
 * each pixel of it is offset once into xo[] and, for every output column it
 * reaches (ox range from SPEC section 2 step 3, tap kx = x + pad - ox*stride,
 * divided by the dilation when that is exact), added into the accumulators
 * of every reached output pixel with output channels innermost:
 *   conv       acc[oc] += dot(filter[oc, ky, kx, :], xo[group of oc])
 *   depthwise  acc[c*M + m] += filter[ky, kx, c*M + m] * xo[c]
 * Accumulators start at the bias; a final row is requantized on pop.
 *
 * Within one (output row, kernel row) pair the common cases run output-column
 * oriented instead (conv with dilation 1 and one group, depthwise with
 * multiplier 1): each output column sums the taps of the kernel row that
 * land inside the input row and adds them to its accumulators once. For conv
 * those taps are one contiguous run of kw*in_c bytes in the input row and in
 * each OHWI filter row, so a column is a flat dot product per output channel.
 * The other cases (dilated or grouped conv, channel multipliers) take the
 * per-pixel scatter above. Both orders visit the same (pixel, tap) pairs and
 * add the same int32 products.
 *
 * Cost (python -m pyembed.bench kernels): portable C, four output channels
 * per pass share each offset input, as int8 x int16 -> int32 reductions that
 * gcc -O3 vectorises (PMADDWD on x86); requantization runs channel-outer so
 * its shift constants are set up once per channel. With the Arm DSP
 * extension (PE_DSP, pe_simd.h; `kernels --target cortex-m4`): conv pairs two
 * output columns x two output channels per pass on SXTB16/SXTAB16-widened
 * words and SMLAD (rows with at least 8 interior columns through the
 * inline-asm block pe_dsp_dot_2x2 with the input offset folded into the
 * start value), depthwise sums three-tap rows with SMLABB/SMLATT and
 * weights widened once per run of columns, and the requantization of a column
 * is SMLAL + QADD + SSAT.
 *
 * This file holds the stream's work: the accumulation of pushed rows
 * (pe_conv2d_rev_stream_push_s8) and the requantization of finished ones
 * (pe_conv2d_rev_stream_pop_s8). The scratch sizes, the stream's set-up and
 * the whole-tensor calls are in pe_conv_rev_whole.c, the argument checks in
 * pe_conv_check.c.
 */
#include <stdint.h>

#include "pyembed/pe_conv.h"
#include "pyembed/pe_conv_gather.h"
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_simd.h"

#include "pe_conv_internal.h"

/* unroll hint for the scalar code of a loop kept simple for the vectoriser */
#if defined(__GNUC__) && !defined(__clang__)
#define PE_UNROLL4 _Pragma("GCC unroll 4")
#else
#define PE_UNROLL4
#endif

/* Set the accumulators of output row oy to its bias. */
static void init_row(pe_conv_rev_stream *st, int32_t oy)
{
    const int32_t out_w = st->output_dims.w;
    const int32_t out_c = st->output_dims.c;
    int32_t *acc = st->ring + (size_t)(oy % st->ring_rows) * (size_t)out_w * (size_t)out_c;
    int32_t ox, oc;
    for (ox = 0; ox < out_w; ox++) {
        if (st->bias != NULL) {
            for (oc = 0; oc < out_c; oc++) {
                acc[oc] = st->bias[oc];
            }
        } else {
            for (oc = 0; oc < out_c; oc++) {
                acc[oc] = 0;
            }
        }
        acc += out_c;
    }
}

/* sum of w[i] * x[i], i < n: a plain int8 x int16 -> int32 reduction, the
 * form gcc -O3 turns into PMADDWD (x86) / SDOT-like widening multiplies */
static inline int32_t dot_s8(const int8_t *restrict w, const int16_t *restrict x, int32_t n)
{
    int32_t s = 0;
    int32_t i;
    for (i = 0; i < n; i++) {
        s += (int32_t)w[i] * (int32_t)x[i];
    }
    return s;
}

/* conv, one kernel tap of one input pixel, one group:
 *   acc[oc] += dot(w[oc*ws .. oc*ws + ic), x[0 .. ic)),  oc < oc_n.
 * Four output channels per pass share every load of x (four independent
 * reductions over the input channels: scalar code loads each offset input
 * once for four multiplies; gcc -O3 vectorises the four reductions, each a
 * widening int16 multiply-add of 8 lanes). x holds the offset inputs as
 * int16 (|x + offset| <= 255). */
static void conv_tap(int32_t *restrict acc, const int8_t *restrict w,
                     const int16_t *restrict x, size_t ws, int32_t ic, int32_t oc_n)
{
    int32_t oc = 0;
    int32_t i;
    for (; oc + 4 <= oc_n; oc += 4) {
        const int8_t *restrict w0 = w;
        const int8_t *restrict w1 = w + ws;
        const int8_t *restrict w2 = w + 2 * ws;
        const int8_t *restrict w3 = w + 3 * ws;
        int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        for (i = 0; i < ic; i++) {
            const int32_t x0 = x[i];
            a0 += (int32_t)w0[i] * x0;
            a1 += (int32_t)w1[i] * x0;
            a2 += (int32_t)w2[i] * x0;
            a3 += (int32_t)w3[i] * x0;
        }
        acc[oc] += a0;
        acc[oc + 1] += a1;
        acc[oc + 2] += a2;
        acc[oc + 3] += a3;
        w += 4 * ws;
    }
    for (; oc < oc_n; oc++) {
        acc[oc] += dot_s8(w, x, ic);
        w += ws;
    }
}

/* conv, one output column, every output channel, taps contiguous in the
 * input row and in the filter rows (dilation 1, one group):
 *   acc[oc] += sum_{i < len} w[oc*ws + i] * (x[i] + offset)
 * Four output channels per pass share each offset input (four independent
 * int8 x int16 reductions: gcc -O3 vectorises them as widening
 * multiply-adds, PMADDWD on x86); each accumulator is read and written once
 * per kernel row instead of once per tap. */
static void conv_col_flat(int32_t *restrict acc, const int8_t *restrict x,
                          const int8_t *restrict w, size_t ws, int32_t len, int32_t oc_n,
                          int32_t offset)
{
    const int16_t off = (int16_t)offset;
    int32_t oc = 0;
    int32_t i;
    for (; oc + 4 <= oc_n; oc += 4) {
        const int8_t *restrict w0 = w;
        const int8_t *restrict w1 = w + ws;
        const int8_t *restrict w2 = w + 2 * ws;
        const int8_t *restrict w3 = w + 3 * ws;
        int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        PE_UNROLL4
        for (i = 0; i < len; i++) {
            const int32_t xv = (int16_t)(x[i] + off);
            a0 += (int32_t)w0[i] * xv;
            a1 += (int32_t)w1[i] * xv;
            a2 += (int32_t)w2[i] * xv;
            a3 += (int32_t)w3[i] * xv;
        }
        acc[oc] += a0;
        acc[oc + 1] += a1;
        acc[oc + 2] += a2;
        acc[oc + 3] += a3;
        w += 4 * ws;
    }
    for (; oc < oc_n; oc++) {
        int32_t a = 0;
        for (i = 0; i < len; i++) {
            a += (int32_t)w[i] * (int32_t)(int16_t)(x[i] + off);
        }
        acc[oc] += a;
        w += ws;
    }
}

/* conv, one (output row, kernel row) pair of an input row, output-column
 * oriented, for contiguous taps (dilation 1, one group): each output column
 * sums the taps of the kernel row that land inside the input row. Returns
 * the (pixel, tap) pairs visited, as the per-pixel scatter counts them. */
static uint64_t conv_row_cols(int32_t *restrict acc_row, const int8_t *restrict w_row,
                              const int8_t *restrict row, int32_t in_w, int32_t in_c,
                              int32_t out_w, int32_t out_c, int32_t kw, int32_t s_w, int32_t pad,
                              int32_t offset, size_t ws)
{
    uint64_t pairs = 0;
    int32_t ox;
    for (ox = 0; ox < out_w; ox++) {
        const int32_t x0 = ox * s_w - pad;
        int32_t k_lo, k_hi;
        row_tap_range(x0, kw, 1, in_w, &k_lo, &k_hi);
        if (k_lo > k_hi) {
            continue;
        }
        pairs += (uint64_t)(k_hi - k_lo + 1);
        conv_col_flat(acc_row + (size_t)ox * (size_t)out_c,
                      row + (size_t)(x0 + k_lo) * (size_t)in_c, w_row + (size_t)k_lo * (size_t)in_c,
                      ws, (k_hi - k_lo + 1) * in_c, out_c, offset);
    }
    return pairs;
}

/* depthwise (channel multiplier 1), one (output row, kernel row) pair of an
 * input row, output-column oriented: for each output column and each tap of
 * the kernel row inside the input row, one plain loop over the channels
 *   acc[c] += w[k][c] * (x[k][c] + offset)
 * which gcc -O3 vectorises across channels. Returns the (pixel, tap) pairs
 * visited. */
static uint64_t depthwise_row_cols(int32_t *restrict acc_row, const int8_t *restrict w_row,
                                   const int8_t *restrict row, int32_t in_w, int32_t c_n,
                                   int32_t out_w, int32_t kw, int32_t s_w, int32_t d_w,
                                   int32_t pad, int32_t offset)
{
    const int16_t off = (int16_t)offset;
    uint64_t pairs = 0;
    int32_t ox, k, c;
    for (ox = 0; ox < out_w; ox++) {
        const int32_t x0 = ox * s_w - pad;
        int32_t *restrict acc = acc_row + (size_t)ox * (size_t)c_n;
        int32_t k_lo, k_hi;
        row_tap_range(x0, kw, d_w, in_w, &k_lo, &k_hi);
        for (k = k_lo; k <= k_hi; k++) {
            const int8_t *restrict xk = row + (size_t)(x0 + k * d_w) * (size_t)c_n;
            const int8_t *restrict wk = w_row + (size_t)k * (size_t)c_n;
            PE_UNROLL4
            for (c = 0; c < c_n; c++) {
                acc[c] += (int32_t)wk[c] * (int32_t)(int16_t)(xk[c] + off);
            }
            pairs++;
        }
    }
    return pairs;
}

/* depthwise, one kernel tap of one input pixel:
 *   acc[c*mult + m] += w[c*mult + m] * x[c] */
static void depthwise_tap(int32_t *restrict acc, const int8_t *restrict w,
                          const int16_t *restrict x, int32_t in_c, int32_t mult)
{
    int32_t c = 0, m;
    if (mult == 1) {
        /* one plain loop: gcc -O3 vectorises it (widening multiplies) */
        for (; c < in_c; c++) {
            acc[c] += (int32_t)w[c] * (int32_t)x[c];
        }
        return;
    }
    for (; c < in_c; c++) {
        const int32_t xv = x[c];
        for (m = 0; m < mult; m++) {
            acc[m] += w[m] * xv;
        }
        acc += mult;
        w += mult;
    }
}

#if PE_DSP
/* ---- Arm DSP-extension path (pe_simd.h) ---- */
/* Conv on the DSP extension, one whole (output row, kernel row) pair of an
 * input row at a time, output-column oriented: for each output column the
 * taps of the kernel row that land inside the input row are summed in
 * registers and added to the accumulators once. Two adjacent output columns
 * (same taps, pixels one stride apart) share every widened weight word and
 * two output channels share every widened input word: per four input
 * channels 2 input words and 2 weight words are loaded and widened
 * (SXTAB16 / SXTB16, and with ROR #8), then 8 SMLAD do 16 MACs. The input
 * offset is added while widening (SXTAB16 of the offset pair). */
__attribute__((noinline)) static void conv_block_2x2(int32_t *restrict c0, int32_t *restrict c1,
                                  const int8_t *restrict px, const int8_t *restrict w,
                                  size_t ws, size_t px_next, size_t px_tap, int32_t nk,
                                  int32_t ic, int32_t offset)
{
    const uint32_t off2 = pe_dup16(offset);
    int32_t a00 = c0[0], a01 = c0[1]; /* column 0, channels 0 and 1 */
    int32_t a10 = c1[0], a11 = c1[1]; /* column 1 */
    int32_t k, i;
    for (k = 0; k < nk; k++) {
        const int8_t *restrict p0 = px + (size_t)k * px_tap;
        const int8_t *restrict p1 = p0 + px_next;
        const int8_t *restrict wa = w + (size_t)k * (size_t)ic;
        const int8_t *restrict wb = wa + ws;
        for (i = 0; i + 4 <= ic; i += 4) {
            const uint32_t va = pe_rd32(wa + i), vb = pe_rd32(wb + i);
            const uint32_t ae = __sxtb16(va), ao = pe_sxtb16_ror8(va);
            const uint32_t be = __sxtb16(vb), bo = pe_sxtb16_ror8(vb);
            uint32_t r = pe_rd32(p0 + i);
            uint32_t xe = __sxtab16(off2, r), xo = pe_sxtab16_ror8(off2, r);
            a00 = __smlad(ae, xe, a00);
            a00 = __smlad(ao, xo, a00);
            a01 = __smlad(be, xe, a01);
            a01 = __smlad(bo, xo, a01);
            r = pe_rd32(p1 + i);
            xe = __sxtab16(off2, r);
            xo = pe_sxtab16_ror8(off2, r);
            a10 = __smlad(ae, xe, a10);
            a10 = __smlad(ao, xo, a10);
            a11 = __smlad(be, xe, a11);
            a11 = __smlad(bo, xo, a11);
        }
        for (; i < ic; i++) {
            const int32_t x0 = (int32_t)p0[i] + offset, x1 = (int32_t)p1[i] + offset;
            a00 += wa[i] * x0;
            a01 += wb[i] * x0;
            a10 += wa[i] * x1;
            a11 += wb[i] * x1;
        }
    }
    c0[0] = a00;
    c0[1] = a01;
    c1[0] = a10;
    c1[1] = a11;
}

/* conv_block_2x2 for the common case of contiguous taps (dilation 1, one
 * group): the taps of a kernel row are one run of L = taps * in_c bytes in
 * the input row and in each filter row, so the whole block is one flat loop;
 * it also walks every pair of output channels itself (n_oc even). */
__attribute__((noinline)) static void conv_cols2_flat(int32_t *restrict c0,
                                                      int32_t *restrict c1,
                                                      const int8_t *restrict px,
                                                      const int8_t *restrict w, size_t ws,
                                                      size_t px_next, int32_t len,
                                                      int32_t n_oc, int32_t offset)
{
    const uint32_t off2 = pe_dup16(offset);
    const int32_t len4 = len & ~3;
    int32_t oc, i;
    for (oc = 0; oc < n_oc; oc += 2) {
        const int8_t *restrict wa = w + (size_t)oc * ws;
        const int8_t *restrict wb = wa + ws;
        const int8_t *restrict p0 = px;
        const int8_t *const p0_end = px + len4;
        int32_t a00 = c0[oc], a01 = c0[oc + 1];
        int32_t a10 = c1[oc], a11 = c1[oc + 1];
        while (p0 < p0_end) {
            const uint32_t va = pe_rd32(wa), vb = pe_rd32(wb);
            const uint32_t ae = __sxtb16(va), ao = pe_sxtb16_ror8(va);
            const uint32_t be = __sxtb16(vb), bo = pe_sxtb16_ror8(vb);
            uint32_t r = pe_rd32(p0);
            uint32_t xe = __sxtab16(off2, r), xo = pe_sxtab16_ror8(off2, r);
            a00 = __smlad(ae, xe, a00);
            a00 = __smlad(ao, xo, a00);
            a01 = __smlad(be, xe, a01);
            a01 = __smlad(bo, xo, a01);
            r = pe_rd32(p0 + px_next);
            xe = __sxtab16(off2, r);
            xo = pe_sxtab16_ror8(off2, r);
            a10 = __smlad(ae, xe, a10);
            a10 = __smlad(ao, xo, a10);
            a11 = __smlad(be, xe, a11);
            a11 = __smlad(bo, xo, a11);
            p0 += 4;
            wa += 4;
            wb += 4;
        }
        for (i = len4; i < len; i++) {
            const int32_t x0 = (int32_t)px[i] + offset, x1 = (int32_t)px[i + px_next] + offset;
            const int32_t u = w[(size_t)oc * ws + i], v = w[(size_t)(oc + 1) * ws + i];
            a00 += u * x0;
            a01 += v * x0;
            a10 += u * x1;
            a11 += v * x1;
        }
        c0[oc] = a00;
        c0[oc + 1] = a01;
        c1[oc] = a10;
        c1[oc + 1] = a11;
    }
}

/* One output column, contiguous taps (the columns conv_cols2_flat cannot
 * pair: image edges, odd counts): two output channels share each widened
 * input word. */
__attribute__((noinline)) static void conv_col1_flat(int32_t *restrict c0,
                                                     const int8_t *restrict px,
                                                     const int8_t *restrict w, size_t ws,
                                                     int32_t len, int32_t n_oc, int32_t offset)
{
    int32_t oc;
    for (oc = 0; oc < n_oc; oc += 2) {
        const int32_t two = oc + 1 < n_oc;
        const int8_t *restrict wa = w + (size_t)oc * ws;
        int32_t a[2] = {0, 0};
        pe_dsp_dot_1x2_off(a, wa, two ? wa + ws : wa, px, len, offset);
        c0[oc] += a[0];
        if (two) {
            c0[oc + 1] += a[1];
        }
    }
}

/* One output column, one output channel: the tails of conv_block_2x2. */
static inline int32_t conv_block_1x1(const int8_t *restrict px, const int8_t *restrict w,
                                     size_t px_tap, int32_t nk, int32_t ic, int32_t offset)
{
    const uint32_t off2 = pe_dup16(offset);
    int32_t a = 0, k, i;
    for (k = 0; k < nk; k++) {
        const int8_t *restrict p0 = px + (size_t)k * px_tap;
        const int8_t *restrict wa = w + (size_t)k * (size_t)ic;
        for (i = 0; i + 4 <= ic; i += 4) {
            const uint32_t va = pe_rd32(wa + i), r = pe_rd32(p0 + i);
            a = __smlad(__sxtb16(va), __sxtab16(off2, r), a);
            a = __smlad(pe_sxtb16_ror8(va), pe_sxtab16_ror8(off2, r), a);
        }
        for (; i < ic; i++) {
            a += wa[i] * ((int32_t)p0[i] + offset);
        }
    }
    return a;
}

/* The int16 column blocks (pe_simd.h pe_dsp_c4_run) over a whole (output
 * row, kernel row) pair, for conv with one group, dilation.w 1 and in_c % 4
 * == 0: the input row was widened once with the offset (xw), each four
 * output channels' kernel row is widened here into wblk, then the interior
 * columns (every tap inside the input row) run as one job and each edge
 * column as a job over its in-bounds taps (a shorter run of the same
 * block). Per group of four input channels 1 LDRD + 2 LDM + 8 SMLAD do 16
 * MACs. The out_c % 4 last channels take conv_col1_flat. */
__attribute__((noinline)) static uint64_t conv_row_c4(int32_t *restrict acc_row, const int8_t *restrict w_row,
                            const int8_t *restrict row, int32_t in_w, int32_t in_c,
                            int32_t out_w, int32_t out_c, int32_t kw, int32_t s_w, int32_t pad,
                            int32_t offset, size_t ws, const uint32_t *xw, uint32_t *wblk)
{
    const int32_t len = kw * in_c, g_tap = in_c / 4;
    int32_t ox_a = ceil_div_pos(pad, s_w);
    int32_t ox_b = in_w - kw + pad < 0 ? -1 : (in_w - kw + pad) / s_w;
    uint64_t pairs = 0;
    int32_t oc, ox, k_lo, k_hi;
    pe_dsp_c4_job job;
    if (ox_b > out_w - 1) {
        ox_b = out_w - 1;
    }
    job.acc_step = out_c * 4;
    job.x_adv = (s_w * in_c - len) * 2;
    for (oc = 0; oc + 4 <= out_c; oc += 4) {
        pe_dsp_widen_w4(wblk, w_row + (size_t)oc * ws, ws, kw * g_tap);
        if (ox_a <= ox_b) {
            job.acc = acc_row + (size_t)ox_a * (size_t)out_c + (size_t)oc;
            job.ncol = ox_b - ox_a + 1;
            job.w = wblk;
            job.x = xw + (size_t)(ox_a * s_w - pad) * (size_t)in_c / 2u;
            pe_dsp_c4_run(&job, kw * g_tap);
        }
        for (ox = 0; ox < out_w; ox++) {
            if (ox == ox_a && ox_a <= ox_b) {
                ox = ox_b; /* done above */
                continue;
            }
            row_tap_range(ox * s_w - pad, kw, 1, in_w, &k_lo, &k_hi);
            if (k_lo <= k_hi) {
                job.acc = acc_row + (size_t)ox * (size_t)out_c + (size_t)oc;
                job.ncol = 1;
                job.w = wblk + (size_t)k_lo * (size_t)g_tap * 8u;
                job.x = xw + (size_t)(ox * s_w - pad + k_lo) * (size_t)in_c / 2u;
                pe_dsp_c4_run(&job, (k_hi - k_lo + 1) * g_tap);
            }
        }
    }
    for (ox = 0; ox < out_w; ox++) {
        row_tap_range(ox * s_w - pad, kw, 1, in_w, &k_lo, &k_hi);
        if (k_lo <= k_hi) {
            pairs += (uint64_t)(k_hi - k_lo + 1);
            if (oc < out_c) {
                conv_col1_flat(acc_row + (size_t)ox * (size_t)out_c + (size_t)oc,
                               row + (size_t)(ox * s_w - pad + k_lo) * (size_t)in_c,
                               w_row + (size_t)oc * ws + (size_t)k_lo * (size_t)in_c, ws,
                               (k_hi - k_lo + 1) * in_c, out_c - oc, offset);
            }
        }
    }
    return pairs;
}

static uint64_t conv_row_dsp(int32_t *restrict acc_row, const int8_t *restrict w_row,
                             const int8_t *restrict row, int32_t in_w, int32_t in_c,
                             int32_t out_w, int32_t out_c, int32_t kw, int32_t s_w, int32_t d_w,
                             int32_t pad, int32_t offset, int32_t groups, int32_t ic_g,
                             size_t ws, const uint32_t *xw, uint32_t *wblk)
{
    const int32_t oc_g = out_c / groups;
    const size_t px_tap = (size_t)d_w * (size_t)in_c;
    const size_t px_next = (size_t)s_w * (size_t)in_c;
    uint64_t pairs = 0;
    int32_t ox = 0, ox_a = 0, ox_b = -1;
    if (xw != NULL) { /* (stream_init set it for this shape only) */
        return conv_row_c4(acc_row, w_row, row, in_w, in_c, out_w, out_c, kw, s_w, pad, offset,
                           ws, xw, wblk);
    }
    if (d_w == 1 && groups == 1 && out_c >= 2 && kw * in_c >= 8) {
        /* interior columns (every tap of the kernel row inside the input
         * row) in pairs, channel pairs outermost: the folded 2x2 block
         * (pe_dsp_dot_2x2: no offset in the loop, offset * sum(w) of the
         * kernel row added to the start value, an exact re-association of
         * the same int32 sum, wrapping at most transiently) */
        const int32_t len = kw * in_c;
        int32_t oc, c;
        ox_a = ceil_div_pos(pad, s_w);
        ox_b = in_w - kw + pad < 0 ? -1 : (in_w - kw + pad) / s_w;
        if (ox_b > out_w - 1) {
            ox_b = out_w - 1;
        }
        if (ox_b - ox_a + 1 < 8) {
            /* fewer than four pairs do not repay the two weight sums per
             * channel pair: the general loop below */
            ox_b = ox_a - 1;
        } else {
            ox_b = ox_a + ((ox_b - ox_a + 1) & ~1) - 1; /* an even count */
            for (oc = 0; oc + 2 <= out_c; oc += 2) {
                const int8_t *const wa = w_row + (size_t)oc * ws;
                const int8_t *const wb = wa + ws;
                const uint32_t fa = (uint32_t)(offset * pe_dsp_wsum(wa, len));
                const uint32_t fb = (uint32_t)(offset * pe_dsp_wsum(wb, len));
                for (c = ox_a; c < ox_b; c += 2) {
                    int32_t *const c0 = acc_row + (size_t)c * (size_t)out_c + (size_t)oc;
                    int32_t *const c1 = c0 + out_c;
                    const int8_t *const x0 = row + (size_t)(c * s_w - pad) * (size_t)in_c;
                    int32_t a[4];
                    a[0] = (int32_t)((uint32_t)c0[0] + fa);
                    a[1] = (int32_t)((uint32_t)c0[1] + fb);
                    a[2] = (int32_t)((uint32_t)c1[0] + fa);
                    a[3] = (int32_t)((uint32_t)c1[1] + fb);
                    pe_dsp_dot_2x2_n(a, wa, wb, x0, x0 + px_next, len);
                    c0[0] = a[0];
                    c0[1] = a[1];
                    c1[0] = a[2];
                    c1[1] = a[3];
                }
            }
            if (oc < out_c) { /* an odd channel count: the last one */
                for (c = ox_a; c <= ox_b; c++) {
                    conv_col1_flat(acc_row + (size_t)c * (size_t)out_c + (size_t)oc,
                                   row + (size_t)(c * s_w - pad) * (size_t)in_c,
                                   w_row + (size_t)oc * ws, ws, len, out_c - oc, offset);
                }
            }
            pairs += (uint64_t)(ox_b - ox_a + 1) * (uint64_t)kw;
        }
    }
    while (ox < out_w) {
        if (ox == ox_a && ox_b >= ox_a) {
            ox = ox_b + 1; /* done above */
            continue;
        }
        const int32_t x0 = ox * s_w - pad;
        int32_t k_lo, k_hi, k_lo1 = 0, k_hi1 = -1, ncol = 1, g, oc;
        row_tap_range(x0, kw, d_w, in_w, &k_lo, &k_hi);
        if (ox + 1 < out_w) {
            row_tap_range(x0 + s_w, kw, d_w, in_w, &k_lo1, &k_hi1);
            if (k_lo1 == k_lo && k_hi1 == k_hi && !(ox + 1 == ox_a && ox_b >= ox_a)) {
                ncol = 2; /* (never into the columns done above) */
            }
        }
        if (k_lo <= k_hi) {
            const int32_t nk = k_hi - k_lo + 1;
            const int8_t *const px = row + (size_t)(x0 + k_lo * d_w) * (size_t)in_c;
            int32_t *const c0 = acc_row + (size_t)ox * (size_t)out_c;
            pairs += (uint64_t)nk * (uint64_t)ncol;
            for (g = 0; g < groups; g++) {
                const int8_t *const pg = px + (size_t)g * (size_t)ic_g;
                const int8_t *const wg = w_row + (size_t)g * (size_t)oc_g * ws +
                                         (size_t)k_lo * (size_t)ic_g;
                int32_t *const a0 = c0 + (size_t)g * (size_t)oc_g;
                oc = 0;
                if (d_w == 1 && groups == 1 && nk * ic_g < 8) {
                    /* runs too short for the SIMD words: the plain loop */
                    int32_t col;
                    for (col = 0; col < ncol; col++) {
                        conv_col_flat(a0 + (size_t)col * (size_t)out_c, pg + (size_t)col * px_next,
                                      wg, ws, nk * ic_g, oc_g, offset);
                    }
                    continue;
                }
                if (d_w == 1 && groups == 1) {
                    int32_t col;
                    if (ncol == 2) {
                        oc = oc_g & ~1;
                        conv_cols2_flat(a0, a0 + out_c, pg, wg, ws, px_next, nk * ic_g, oc,
                                        offset);
                    }
                    for (col = 0; col < ncol && oc < oc_g; col++) {
                        conv_col1_flat(a0 + (size_t)col * (size_t)out_c + (size_t)oc,
                                       pg + (size_t)col * px_next, wg + (size_t)oc * ws, ws,
                                       nk * ic_g, oc_g - oc, offset);
                    }
                    continue;
                }
                for (; oc < oc_g; oc += 2) {
                    const int8_t *const wo = wg + (size_t)oc * ws;
                    if (ncol == 2 && oc + 2 <= oc_g) {
                        conv_block_2x2(a0 + oc, a0 + oc + out_c, pg, wo, ws, px_next, px_tap,
                                       nk, ic_g, offset);
                    } else {
                        int32_t o;
                        for (o = oc; o < oc + 2 && o < oc_g; o++) {
                            const int8_t *const wq = wg + (size_t)o * ws;
                            int32_t col;
                            for (col = 0; col < ncol; col++) {
                                a0[(size_t)col * (size_t)out_c + (size_t)o] +=
                                    conv_block_1x1(pg + (size_t)col * px_next, wq, px_tap, nk,
                                                   ic_g, offset);
                            }
                        }
                    }
                }
            }
        }
        ox += ncol; /* a pair with an empty range skips both columns */
    }
    return pairs;
}

/* Depthwise with channel multiplier 1 on the DSP extension, one whole
 * (output row, kernel row) pair of an input row at a time: for each output
 * column the taps of the kernel row that land inside the input row are
 * summed in registers (SMLABB / SMLATT on sign-extended halfword pairs,
 * four channels per word), then added to the accumulators once. Returns the
 * (pixel, tap) pairs visited, as scatter_row counts them. */
/* Depthwise 3-tap kernel rows on the DSP extension, four channels over a run
 * of output columns whose three taps all lie inside the input row: the six
 * widened weight pairs are set up once per run, then each column takes
 * three input words (widened with the offset) and 12 SMLABB/SMLATT, and
 * reads and writes its four accumulators once. */
__attribute__((noinline)) static void dw3_run_dsp(int32_t *restrict acc,
                                                  const int8_t *restrict xp,
                                                  const int8_t *restrict w, int32_t n_cols,
                                                  size_t acc_step, size_t x_step, size_t tap,
                                                  size_t w_tap, int32_t offset)
{
    const uint32_t off2 = pe_dup16(offset);
    const uint32_t v0 = pe_rd32(w), v1 = pe_rd32(w + w_tap), v2 = pe_rd32(w + 2 * w_tap);
    const int32_t e0 = (int32_t)__sxtb16(v0), o0 = (int32_t)pe_sxtb16_ror8(v0);
    const int32_t e1 = (int32_t)__sxtb16(v1), o1 = (int32_t)pe_sxtb16_ror8(v1);
    const int32_t e2 = (int32_t)__sxtb16(v2), o2 = (int32_t)pe_sxtb16_ror8(v2);
    int32_t k;
    for (k = 0; k < n_cols; k++) {
        int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
        uint32_t r = pe_rd32(xp);
        int32_t xe = (int32_t)__sxtab16(off2, r), xo = (int32_t)pe_sxtab16_ror8(off2, r);
        a0 = __smlabb(e0, xe, a0);
        a2 = __smlatt(e0, xe, a2);
        a1 = __smlabb(o0, xo, a1);
        a3 = __smlatt(o0, xo, a3);
        r = pe_rd32(xp + tap);
        xe = (int32_t)__sxtab16(off2, r);
        xo = (int32_t)pe_sxtab16_ror8(off2, r);
        a0 = __smlabb(e1, xe, a0);
        a2 = __smlatt(e1, xe, a2);
        a1 = __smlabb(o1, xo, a1);
        a3 = __smlatt(o1, xo, a3);
        r = pe_rd32(xp + 2 * tap);
        xe = (int32_t)__sxtab16(off2, r);
        xo = (int32_t)pe_sxtab16_ror8(off2, r);
        a0 = __smlabb(e2, xe, a0);
        a2 = __smlatt(e2, xe, a2);
        a1 = __smlabb(o2, xo, a1);
        a3 = __smlatt(o2, xo, a3);
        acc[0] = a0;
        acc[1] = a1;
        acc[2] = a2;
        acc[3] = a3;
        acc += acc_step;
        xp += x_step;
    }
}

/* Depthwise, one output column's taps [k_lo, k_hi] for channels [c0, c_n),
 * four at a time (SMLABB / SMLATT on widened halfword pairs) then singly. */
static void dw_col_dsp(int32_t *restrict acc, const int8_t *restrict xs0,
                       const int8_t *restrict ws0, int32_t c0, int32_t c_n, int32_t nk,
                       size_t px_step, int32_t offset)
{
    const uint32_t off2 = pe_dup16(offset);
    int32_t c, k;
    for (c = c0; c + 4 <= c_n; c += 4) {
        int32_t a0 = acc[c], a1 = acc[c + 1], a2 = acc[c + 2], a3 = acc[c + 3];
        const int8_t *xp = xs0 + c;
        const int8_t *wp = ws0 + c;
        for (k = 0; k < nk; k++) {
            const uint32_t raw = pe_rd32(xp);
            const uint32_t wv = pe_rd32(wp);
            const uint32_t xe = __sxtab16(off2, raw), xodd = pe_sxtab16_ror8(off2, raw);
            const uint32_t we = __sxtb16(wv), wodd = pe_sxtb16_ror8(wv);
            a0 = __smlabb((int32_t)we, (int32_t)xe, a0);
            a2 = __smlatt((int32_t)we, (int32_t)xe, a2);
            a1 = __smlabb((int32_t)wodd, (int32_t)xodd, a1);
            a3 = __smlatt((int32_t)wodd, (int32_t)xodd, a3);
            xp += px_step;
            wp += c_n;
        }
        acc[c] = a0;
        acc[c + 1] = a1;
        acc[c + 2] = a2;
        acc[c + 3] = a3;
    }
    for (; c < c_n; c++) {
        int32_t a = acc[c];
        const int8_t *xp = xs0 + c;
        const int8_t *wp = ws0 + c;
        for (k = 0; k < nk; k++) {
            a += *wp * (*xp + offset);
            xp += px_step;
            wp += c_n;
        }
        acc[c] = a;
    }
}

/* Depthwise with channel multiplier 1 on the DSP extension, one whole
 * (output row, kernel row) pair of an input row at a time, output-column
 * oriented: each output column sums the taps of the kernel row that land
 * inside the input row in registers and adds them to its accumulators once.
 * Three-tap rows run their interior columns (all taps inside) through
 * dw3_run_dsp, four channels at a time with the weights widened once per
 * run. Returns the (pixel, tap) pairs visited, as scatter_row counts them. */
static uint64_t depthwise_row_dsp(int32_t *restrict acc_row, const int8_t *restrict w_row,
                                  const int8_t *restrict row, int32_t in_w, int32_t c_n,
                                  int32_t out_w, int32_t kw, int32_t s_w, int32_t d_w,
                                  int32_t pad, int32_t offset)
{
    const size_t px_step = (size_t)d_w * (size_t)c_n;
    uint64_t pairs = 0;
    int32_t ox, ox_a = 0, ox_b = -1, c4 = 0;
    if (kw == 3 && c_n >= 4) {
        /* columns with x0 = ox*s - pad >= 0 and x0 + 2d <= in_w - 1 */
        ox_a = ceil_div_pos(pad, s_w);
        ox_b = in_w - 1 + pad - 2 * d_w < 0 ? -1 : (in_w - 1 + pad - 2 * d_w) / s_w;
        if (ox_b > out_w - 1) {
            ox_b = out_w - 1;
        }
        if (ox_a <= ox_b) {
            const int32_t x0 = ox_a * s_w - pad;
            int32_t c;
            c4 = c_n & ~3;
            for (c = 0; c < c4; c += 4) {
                dw3_run_dsp(acc_row + (size_t)ox_a * (size_t)c_n + (size_t)c,
                            row + (size_t)x0 * (size_t)c_n + (size_t)c, w_row + c,
                            ox_b - ox_a + 1, (size_t)c_n, (size_t)s_w * (size_t)c_n, px_step,
                            (size_t)c_n, offset);
            }
        }
    }
    for (ox = 0; ox < out_w; ox++) {
        const int32_t x0 = ox * s_w - pad; /* input column of tap 0 */
        const int32_t inner = ox >= ox_a && ox <= ox_b;
        int32_t k_lo, k_hi;
        row_tap_range(x0, kw, d_w, in_w, &k_lo, &k_hi);
        if (k_lo > k_hi) {
            continue;
        }
        pairs += (uint64_t)(k_hi - k_lo + 1);
        if (inner && c4 == c_n) {
            continue; /* done by dw3_run_dsp */
        }
        dw_col_dsp(acc_row + (size_t)ox * (size_t)c_n,
                   row + (size_t)(x0 + k_lo * d_w) * (size_t)c_n, w_row + (size_t)k_lo * (size_t)c_n,
                   inner ? c4 : 0, c_n, k_hi - k_lo + 1, px_step, offset);
    }
    return pairs;
}
#endif /* PE_DSP */

/* Scatter one input row into the accumulators of the npairs reached output
 * rows; returns the (pixel, tap) pairs visited. */
static uint64_t scatter_row(pe_conv_rev_stream *st, const int8_t *restrict row, int32_t npairs)
{
    const pe_conv_params *p = &st->params;
    const int32_t in_w = st->input_dims.w, in_c = st->input_dims.c;
    const int32_t out_w = st->output_dims.w, out_c = st->output_dims.c;
    const int32_t kw = st->filter_dims.w, s_w = p->stride.w, d_w = p->dilation.w;
    const int32_t k_eff_w = st->k_eff_w, pad = p->padding.left, offset = p->input_offset;
    const int32_t depthwise = st->depthwise, mult = p->ch_mult;
    const int32_t groups = depthwise ? 1 : p->groups;
    const int32_t ic_g = depthwise ? in_c : st->filter_dims.c;
    const int32_t oc_g = out_c / groups;
    const size_t tap_elems = depthwise ? (size_t)out_c : (size_t)ic_g;
    const size_t ws = (size_t)st->filter_dims.h * (size_t)kw * (size_t)ic_g;
    const int8_t *const filter = st->filter;
    int32_t *const ring = st->ring;
    int16_t *restrict xo = (int16_t *)(void *)st->xo; /* in_c int16 in in_c int32 slots */
    const int32_t *const pair_off = st->pair_off;
    const int32_t *const pair_tap = st->pair_tap;
    uint64_t pairs = 0;
    int32_t x, j, c, g;

#if PE_DSP
    if (!depthwise) {
        if (st->simd_x != NULL) { /* the row widened once for every pair */
            pe_dsp_widen_row(st->simd_x, row, in_w * (in_c / 4), offset);
        }
        for (j = 0; j < npairs; j++) {
            pairs += conv_row_dsp(ring + pair_off[j],
                                  filter + (size_t)pair_tap[j] * (size_t)kw * tap_elems, row,
                                  in_w, in_c, out_w, out_c, kw, s_w, d_w, pad, offset, groups,
                                  ic_g, ws, st->simd_x, st->simd_w);
        }
        return pairs;
    }
    if (depthwise && mult == 1 && kw >= 2 && in_c >= 4) {
        /* (one-tap kernel rows have no taps to sum in registers: the plain
         * loop below does as well) */
        for (j = 0; j < npairs; j++) {
            pairs += depthwise_row_dsp(ring + pair_off[j],
                                       filter + (size_t)pair_tap[j] * (size_t)kw * tap_elems, row,
                                       in_w, in_c, out_w, kw, s_w, d_w, pad, offset);
        }
        return pairs;
    }
#endif
    if (depthwise && mult == 1) {
        for (j = 0; j < npairs; j++) {
            pairs += depthwise_row_cols(ring + pair_off[j],
                                        filter + (size_t)pair_tap[j] * (size_t)kw * tap_elems,
                                        row, in_w, in_c, out_w, kw, s_w, d_w, pad, offset);
        }
        return pairs;
    }
    if (!depthwise && d_w == 1 && groups == 1) {
        for (j = 0; j < npairs; j++) {
            pairs += conv_row_cols(ring + pair_off[j],
                                   filter + (size_t)pair_tap[j] * (size_t)kw * tap_elems, row,
                                   in_w, in_c, out_w, out_c, kw, s_w, pad, offset, ws);
        }
        return pairs;
    }
    for (x = 0; x < in_w; x++) {
        const int8_t *px = row + (size_t)x * (size_t)in_c;
        const int32_t xp = x + pad;
        const int32_t lo_num = xp - k_eff_w + 1;
        const int32_t ox_lo = lo_num <= 0 ? 0 : ceil_div_pos(lo_num, s_w);
        const int32_t ox_hi = xp / s_w < out_w - 1 ? xp / s_w : out_w - 1;
        if (ox_lo > ox_hi) {
            continue; /* in a gap (stride > kernel) or beyond every output */
        }
        for (c = 0; c < in_c; c++) {
            xo[c] = (int16_t)((int32_t)px[c] + offset);
        }
        for (j = 0; j < npairs; j++) {
            int32_t *acc_row = ring + pair_off[j];
            const int8_t *w_row = filter + (size_t)pair_tap[j] * (size_t)kw * tap_elems;
            int32_t ox;
            for (ox = ox_lo; ox <= ox_hi; ox++) {
                int32_t kx = xp - ox * s_w;
                int32_t *acc = acc_row + (size_t)ox * (size_t)out_c;
                const int8_t *w;
                if (d_w != 1) {
                    if (kx % d_w != 0) {
                        continue;
                    }
                    kx /= d_w;
                }
                pairs++;
                w = w_row + (size_t)kx * tap_elems;
                if (depthwise) {
                    depthwise_tap(acc, w, xo, in_c, mult);
                } else {
                    for (g = 0; g < groups; g++) {
                        conv_tap(acc + (size_t)g * (size_t)oc_g, w + (size_t)g * (size_t)oc_g * ws,
                                 xo + (size_t)g * (size_t)ic_g, ws, ic_g, oc_g);
                    }
                }
            }
        }
    }
    return pairs;
}

pe_status pe_conv2d_rev_stream_push_s8(pe_conv_rev_stream *st, const int8_t *input_row)
{
    const pe_conv_params *p;
    int32_t in_w, in_c, out_w, out_c, y, hi, oy, npairs;
    uint64_t pairs;

    if (st == NULL || input_row == NULL) {
        return PE_ERR_ARG;
    }
    p = &st->params;
    if (st->rows_in >= st->input_dims.h) {
        return PE_ERR_STATE;
    }
    y = st->rows_in;
    /* a row that is already final must be popped first: its slot may be needed */
    if (st->next_out < st->output_dims.h &&
        (int64_t)st->next_out * p->stride.h - p->padding.top + st->k_eff_h - 1 < y) {
        return PE_ERR_STATE;
    }
    in_w = st->input_dims.w;
    in_c = st->input_dims.c;
    out_w = st->output_dims.w;
    out_c = st->output_dims.c;

    /* output rows this input row reaches, and their kernel rows */
    {
        const int32_t yp = y + p->padding.top;
        const int32_t lo_num = yp - st->k_eff_h + 1;
        int32_t lo = lo_num <= 0 ? 0 : ceil_div_pos(lo_num, p->stride.h);
        hi = yp / p->stride.h;
        if (hi > st->output_dims.h - 1) {
            hi = st->output_dims.h - 1;
        }
        if (lo < st->next_out) {
            lo = st->next_out; /* cannot happen once ready rows are popped */
        }
        while (st->rows_live <= hi) {
            init_row(st, st->rows_live);
            st->rows_live++;
        }
        if (st->rows_live - st->next_out > st->peak_rows) {
            st->peak_rows = st->rows_live - st->next_out;
        }
        npairs = 0;
        for (oy = lo; oy <= hi; oy++) {
            const int32_t t = yp - oy * p->stride.h;
            if (t % p->dilation.h == 0) {
                st->pair_off[npairs] = (oy % st->ring_rows) * out_w * out_c;
                st->pair_tap[npairs] = t / p->dilation.h;
                npairs++;
            }
        }
    }

    pairs = npairs > 0 ? scatter_row(st, input_row, npairs) : 0;
    st->rows_in++;
    if (st->stats != NULL) {
        const uint64_t per_pair = st->depthwise ? (uint64_t)out_c
                                                : (uint64_t)out_c * (uint64_t)st->filter_dims.c;
        const int64_t peak = (int64_t)st->peak_rows * out_w * out_c;
        st->stats->macs += pairs * per_pair;
        st->stats->input_reads += (uint64_t)in_w * (uint64_t)in_c;
        if (peak > st->stats->peak_elems) {
            st->stats->peak_elems = peak;
        }
        if (peak * 4 > st->stats->peak_bytes) {
            st->stats->peak_bytes = peak * 4;
        }
    }
    return PE_OK;
}

/* pe_fx_requant(acc, m, shift) with every shift-derived constant computed
 * once per channel instead of once per element. The arithmetic is the same
 * (rounding doubling high multiply, then rounding divide by 2^right, halves
 * away from zero); m >= 0 is checked at init, so the one saturating case of
 * the doubling multiply (both operands INT32_MIN) cannot occur. The C tests
 * compare it with pe_fx_requant. */
typedef struct {
    int32_t m;
    int32_t left;
    int32_t right;
    int32_t mask;
    int32_t half;
} requant_ch;

static requant_ch requant_setup(int32_t m, int32_t shift)
{
    requant_ch r;
    r.m = m;
    r.left = shift > 0 ? shift : 0;
    r.right = shift > 0 ? 0 : -shift;
    r.mask = (int32_t)(((uint32_t)1u << r.right) - 1u);
    r.half = r.mask >> 1;
    return r;
}

static inline int32_t requant_hoisted(int32_t acc, const requant_ch *r)
{
    const int32_t v = r->left > 0 ? pe_fx_sat_shl(acc, r->left) : acc;
    const int32_t d = (int32_t)pe_fx_asr64((int64_t)v * r->m + ((int64_t)1 << 30), 31);
    const int32_t rem = (int32_t)((uint32_t)d & (uint32_t)r->mask);
    return pe_fx_asr32(d, r->right) + (rem > r->half + (d < 0 ? 1 : 0) ? 1 : 0);
}

#if PE_DSP
/* requant_hoisted, clamp and output offset for a right shift 1 <= right <=
 * 23, a whole output column of one channel, on the DSP path:
 *   d = (acc * m + 2^30) >> 31      one SMLAL onto the rounding constant; the
 *                                    32 result bits taken from the 64-bit sum
 *                                    (|acc * m| < 2^62, so d fits int32 and
 *                                    d > INT32_MIN)
 *   v = (d + 2^(right-1) - [d < 0]) >> right
 *                                    the rounding divide (halves away from
 *                                    zero) as an add with the sign and a
 *                                    saturating add (QADD) of the constant
 * QADD only saturates when the exact sum exceeds INT32_MAX, where both the
 * exact quotient and the saturated one are >= 2^(31-right) - 1 >= 255 and the
 * clamp to [act_min, act_max] - off gives the same int8. Same bytes as the
 * portable path (pe_fx_requant; m >= 0, so its saturating case cannot occur). */
__attribute__((noinline)) static void requant_column_dsp(const int32_t *restrict a,
                                                         int8_t *restrict o, int32_t n,
                                                         size_t step, int32_t m, int32_t right,
                                                         int32_t amin, int32_t amax, int32_t off)
{
    const int32_t c = (int32_t)1 << (right - 1);
    const int32_t *const a_end = a + (size_t)n * step;
    if (amin == -128 && amax == 127) {
        /* the usual full int8 range: the clamp is one SSAT */
        while (a != a_end) {
            const uint64_t p = (uint64_t)((int64_t)*a * m + ((int64_t)1 << 30));
            const int32_t d = (int32_t)(((uint32_t)(p >> 32) << 1) | ((uint32_t)p >> 31));
            const int32_t t = __qadd(d + pe_fx_asr32(d, 31), c);
            *o = (int8_t)__ssat(pe_fx_asr32(t, right) + off, 8);
            a += step;
            o += step;
        }
        return;
    }
    while (a != a_end) {
        const uint64_t p = (uint64_t)((int64_t)*a * m + ((int64_t)1 << 30));
        const int32_t d = (int32_t)(((uint32_t)(p >> 32) << 1) | ((uint32_t)p >> 31));
        const int32_t t = __qadd(d + pe_fx_asr32(d, 31), c);
        int32_t v = pe_fx_asr32(t, right) + off;
        v = v > amin ? v : amin;
        v = v < amax ? v : amax;
        *o = (int8_t)v;
        a += step;
        o += step;
    }
}
#endif

#if PE_DSP
/* requant_column_dsp for accumulators known to satisfy |acc| < 2^30 (the
 * conv rows of the int16 column blocks, checked per channel by the caller):
 *   d = SMMULR(2acc, m) = (acc * m + 2^30) >> 31   (|2acc| < 2^31: no wrap)
 *   v = (d + [d < 0 ? -1 : 0] + 2^(right-1) + off * 2^right) >> right
 * which is pe_dsp_requant's value: |d| < 2^30 so its QADD cannot saturate,
 * and adding off * 2^right before the floor shift adds off after it; the
 * sum stays below 2^31 (|off| <= 128, right <= 23). Then the clamp. */
__attribute__((noinline)) static void requant_column_small(const int32_t *restrict a,
                                                           int8_t *restrict o, int32_t n,
                                                           size_t step, int32_t m, int32_t right,
                                                           int32_t amin, int32_t amax,
                                                           int32_t off)
{
    const int32_t k = ((int32_t)1 << (right - 1)) + (int32_t)((uint32_t)off << right);
    const int32_t *const a_end = a + (size_t)n * step;
    int32_t d;
    if (amin == -128 && amax == 127) {
        while (a != a_end) {
            __asm__("smmulr %0, %1, %2" : "=r"(d) : "r"((int32_t)((uint32_t)*a << 1)), "r"(m));
            *o = (int8_t)__ssat(pe_fx_asr32(d + pe_fx_asr32(d, 31) + k, right), 8);
            a += step;
            o += step;
        }
        return;
    }
    while (a != a_end) {
        int32_t v;
        __asm__("smmulr %0, %1, %2" : "=r"(d) : "r"((int32_t)((uint32_t)*a << 1)), "r"(m));
        v = pe_fx_asr32(d + pe_fx_asr32(d, 31) + k, right);
        v = v > amin ? v : amin;
        *o = (int8_t)(v < amax ? v : amax);
        a += step;
        o += step;
    }
}
#endif

pe_status pe_conv2d_rev_stream_pop_s8(pe_conv_rev_stream *st, int8_t *output_row,
                                      int32_t *row_index)
{
    const pe_conv_params *p;
    int32_t oy, ox, oc, out_w, out_c;
    const int32_t *acc;

    if (st == NULL || output_row == NULL || row_index == NULL) {
        return PE_ERR_ARG;
    }
    p = &st->params;
    oy = st->next_out;
    *row_index = -1;
    if (oy >= st->output_dims.h) {
        return PE_OK;
    }
    if (st->rows_in < st->input_dims.h &&
        (int64_t)oy * p->stride.h - p->padding.top + st->k_eff_h - 1 >= st->rows_in) {
        return PE_OK; /* still waiting for input */
    }
    if (oy >= st->rows_live) {
        init_row(st, oy); /* reached by no input: bias only */
        st->rows_live = oy + 1;
    }
    out_w = st->output_dims.w;
    out_c = st->output_dims.c;
    acc = st->ring + (size_t)(oy % st->ring_rows) * (size_t)out_w * (size_t)out_c;
    /* channel outer: each channel's multiplier, shifts and clamp are set up
     * once per row */
    {
        const int32_t off = p->output_offset;
        const int32_t lo = p->activation.min - off;
        const int32_t hi = p->activation.max - off;
        const int32_t single = p->rounding == PE_ROUND_SINGLE;
        const int32_t *const mult = st->quant.multiplier;
        const int32_t *const shift = st->quant.shift;
        for (oc = 0; oc < out_c; oc++) {
            const int32_t *a = acc + oc;
            int8_t *o = output_row + oc;
#if PE_DSP
            if (!single && shift[oc] <= -1 && shift[oc] >= -23 && st->simd_x != NULL &&
                (int64_t)st->filter_dims.h * st->filter_dims.w * st->filter_dims.c * 32640 +
                        (st->bias == NULL ? 0 : st->bias[oc] < 0 ? -(int64_t)st->bias[oc]
                                                                 : (int64_t)st->bias[oc]) <
                    ((int64_t)1 << 30)) {
                /* conv with the int16 blocks: accumulators below 2^30 */
                requant_column_small(a, o, out_w, (size_t)out_c, mult[oc], -shift[oc],
                                     p->activation.min, p->activation.max, off);
                continue;
            }
            if (!single && shift[oc] <= -1 && shift[oc] >= -23) {
                requant_column_dsp(a, o, out_w, (size_t)out_c, mult[oc], -shift[oc],
                                   p->activation.min, p->activation.max, off);
                continue;
            }
#endif
            if (!single) {
                const requant_ch r = requant_setup(mult[oc], shift[oc]);
                for (ox = 0; ox < out_w; ox++) {
                    const int32_t v = requant_hoisted(*a, &r);
                    *o = (int8_t)((v < lo ? lo : (v > hi ? hi : v)) + off);
                    a += out_c;
                    o += out_c;
                }
            } else {
                const int32_t m = mult[oc], sh = shift[oc];
                for (ox = 0; ox < out_w; ox++) {
                    const int32_t v = pe_fx_requant_single(*a, m, sh);
                    *o = (int8_t)((v < lo ? lo : (v > hi ? hi : v)) + off);
                    a += out_c;
                    o += out_c;
                }
            }
        }
    }
    st->next_out = oy + 1;
    *row_index = oy;
    return PE_OK;
}
