/*
 * pe_stripe_rows.h - the stripe executor's convolution row loops (issue #29),
 * private to pe_stripe.c, which includes it after the functions they use
 * (stripe_run, in_pixel, out_slot, publish, requant_s8; the executor's file
 * is at its size limit): conv_rows takes a conv / pointwise layer that
 * conv_rows_apply (pe_stripe_internal.h) accepts, conv_patch_rows one that
 * conv_patch_apply accepts, in blocks of at least PE_STRIPE_CONV_MIN_COLS
 * columns on Arm DSP-extension builds, and both run the whole-tensor conv
 * kernel's block loop (pe_cv_dsp_widen, pe_cv_dsp_cols, pe_conv_gather.h).
 */
#ifndef PE_STRIPE_ROWS_H
#define PE_STRIPE_ROWS_H

#if PE_DSP
/* requant_s8 out of line: the rare values rows_store's fast loop leaves
 * (a call keeps the loop's registers free) */
__attribute__((noinline)) static int8_t requant_slow(const pe_stripe_layer *l, int32_t acc, int32_t oc)
{
    return requant_s8(l, acc, oc);
}

/* Columns j < n of channels [oc, oc + nb) from their sums acc[4 j + c] into
 * dst[j][oc + c]: pe_dsp_requant's bytes with the constants set up once per
 * channel (the rounding constant and the output offset folded into k;
 * |acc| < 2^30 keeps the sum in int32), else requant_s8 */
static void rows_store(const pe_stripe_layer *l, const int32_t *acc, int32_t n, int32_t oc, int32_t nb,
                       int32_t fsize, int8_t *const *dst)
{
    const int32_t amin = l->activation.min, amax = l->activation.max;
    int32_t c, j;
    for (c = 0; c < nb; c++) {
        const int32_t m = l->quant.multiplier[oc + c], sh = l->quant.shift[oc + c];
        const int32_t at = oc + c;
        const int32_t *a4 = acc + c;
        const int32_t bias = l->bias != NULL ? l->bias[at] : 0;
        /* every sum of fsize products |w (x + offset)| <= 128 * 255 and the
         * bias below 2^30: no value needs the range check */
        const int small = (int64_t)fsize * (128 * 255) + (bias < 0 ? -(int64_t)bias : (int64_t)bias) <
                          ((int64_t)1 << 30);
        if (l->rounding != PE_ROUND_SINGLE && m >= 0 && sh <= -1 && sh >= -23 && small) {
            const int32_t right = -sh;
            const int32_t k = ((int32_t)1 << (right - 1)) + (int32_t)((uint32_t)l->output_offset << right);
            for (j = 0; j < n; j++, a4 += 4) {
                int32_t d, v;
                __asm__("smmulr %0, %1, %2" : "=r"(d) : "r"((int32_t)((uint32_t)*a4 << 1)), "r"(m));
                v = pe_fx_asr32(d + pe_fx_asr32(d, 31) + k, right);
                v = v > amin ? v : amin;
                v = v < amax ? v : amax;
                dst[j][at] = (int8_t)v;
            }
        } else if (l->rounding != PE_ROUND_SINGLE && m >= 0 && sh <= -1 && sh >= -23) {
            const int32_t right = -sh;
            const int32_t k = ((int32_t)1 << (right - 1)) + (int32_t)((uint32_t)l->output_offset << right);
            for (j = 0; j < n; j++, a4 += 4) {
                const int32_t a = *a4;
                int32_t v;
                if (a > -(1 << 30) && a < (1 << 30)) {
                    int32_t d;
                    __asm__("smmulr %0, %1, %2" : "=r"(d) : "r"((int32_t)((uint32_t)a << 1)), "r"(m));
                    v = pe_fx_asr32(d + pe_fx_asr32(d, 31) + k, right);
                    v = v > amin ? v : amin;
                    v = v < amax ? v : amax;
                } else {
                    v = requant_slow(l, a, at);
                }
                dst[j][at] = (int8_t)v;
            }
        } else {
            for (j = 0; j < n; j++, a4 += 4) {
                dst[j][at] = requant_slow(l, *a4, at);
            }
        }
    }
}

/* The bias of channels [oc, oc + nb) (zero past nb) as the starting sums of
 * columns j < n. */
static void rows_start(const pe_stripe_layer *l, int32_t *acc, int32_t n, int32_t oc, int32_t nb)
{
    int32_t b4[4];
    int32_t c, j;
    for (c = 0; c < 4; c++) {
        b4[c] = (l->bias != NULL && c < nb) ? l->bias[oc + c] : 0;
    }
    for (j = 0; j < n; j++) {
        memcpy(acc + 4 * j, b4, sizeof b4);
    }
}

/* Channels [oc, oc + 4)'s constants for the fused requantization
 * (pe_cv_dsp_cols_q): q[0..3] the bias (start sums), q[4..15] (m, k, right)
 * per channel; 1 when all four take it (double rounding, shifts in
 * [-23, -1], multipliers >= 0, every sum of fsize products and the bias
 * below 2^30 as rows_store's fast loop asks, and an activation of the
 * whole int8 range: the fused loop clamps by SSAT only), else 0 (rows_store) */
static int rows_fused(const pe_stripe_layer *l, int32_t oc, int32_t nb, int32_t fsize, int32_t *q)
{
    /* |bias| < room: the sums' bound, fsize * 128 * 255 + |bias| < 2^30, checked in int32 */
    const int64_t room = ((int64_t)1 << 30) - (int64_t)fsize * (128 * 255);
    const uint32_t ooff = (uint32_t)l->output_offset;
    int32_t c, lim;
    if (nb != 4 || l->rounding != PE_ROUND_DOUBLE || l->activation.min != -128 || l->activation.max != 127 ||
        room <= 0) {
        return 0;
    }
    lim = (int32_t)room; /* (room <= 2^30) */
    for (c = 0; c < 4; c++) {
        const int32_t m = l->quant.multiplier[oc + c], sh = l->quant.shift[oc + c];
        const int32_t bias = l->bias != NULL ? l->bias[oc + c] : 0;
        if (m < 0 || (uint32_t)(-1 - sh) > 22u || bias >= lim || bias <= -lim) { /* (sh outside [-23, -1]) */
            return 0;
        }
        q[c] = bias;
        q[4 + 3 * c] = m;
        q[5 + 3 * c] = ((int32_t)1 << (-sh - 1)) + (int32_t)(ooff << -sh);
        q[6 + 3 * c] = -sh;
    }
    return 1;
}

/* Columns [j, j + m) whose outputs (dst[j] on) lie co bytes apart: m cut
 * at the next start of a run of output slots (bit i of brk: column i's
 * slot was asked of out_slot, not continued from column i - 1's; out_span) */
typedef char pe_stripe_rows_brk_fits[PE_STRIPE_CONV_COLS <= 32 && PE_STRIPE_PATCH_COLS <= 32 ? 1 : -1];
static inline int32_t rows_dst_run(uint32_t brk, int32_t j, int32_t m)
{
    const uint32_t later = j + 1 < 32 ? brk >> (j + 1) : 0u;
    const int32_t i = later != 0u ? __builtin_ctz(later) + 1 : 32;
    return i < m ? i : m;
}

/* The pe_cv_dsp_cols calls of input row r for output columns [xa, xa + n)
 * (acc: column j's four sums at acc + 4 j), the kernel row's weights
 * widened in R->work. Columns whose windows lie one stride apart in one
 * store share a call: in a ring row every window inside the image; in the
 * current row's temporary (its first kw - 1 slots repeated past the end,
 * so a window never wraps) the windows up to the wrap. A window with
 * columns in the ring and in the temporary (committed in between) is
 * summed piece by piece. */
static void conv_row_calls(stripe_run *R, int32_t L, int32_t r, int32_t xa, int32_t n, int32_t *acc,
                           const int32_t *q, int8_t *const *dst, uint32_t brk, int32_t oc)
{
    const pe_stripe_layer *l = &R->net->layers[L];
    const layer_geo *g = &R->G->g[L];
    const stripe_state *s = &R->st[L + 1];
    const int32_t ci = g->in_c, kw = g->kw, run = kw * ci, step = g->sw * ci;
    const int in_temp = s->temp_cols > 0 && r == s->in_row;
    const int8_t *const ring_row =
        g->ring_rows > 0
            ? s->ring + (size_t)(g->ring_rows > 1 ? r % g->ring_rows : 0) * (size_t)(s->in_b - s->in_a) * (size_t)ci
            : NULL;
    const uint32_t *const wblk = R->work;
    int32_t j = 0;
    while (j < n) {
        const int32_t col0 = (xa + j) * g->sw - g->pl;
        const int32_t c_lo = max32(col0, 0), c_hi = min32(col0 + kw, g->in_w);
        if (c_lo >= c_hi) {
            j++;
            continue;
        }
        if (c_lo == col0 && c_hi == col0 + kw && (!in_temp || c_lo >= s->committed)) {
            /* a whole window in one store: this and the next columns while theirs are too */
            const int8_t *p;
            int32_t m = 1;
            int32_t most = n - j;
            /* windows inside the image: col0 + i * sw + kw <= in_w */
            const int32_t inside = (g->in_w - kw - col0) / g->sw + 1;
            most = min32(most, inside);
            if (in_temp) {
                const int32_t t = col0 % s->temp_cols;
                /* no wrap: the window starts t + i * sw stay below temp_cols */
                most = min32(most, (s->temp_cols - 1 - t) / g->sw + 1);
                p = s->temp + (size_t)t * (size_t)ci;
            } else {
                p = ring_row + (size_t)(col0 - s->in_a) * (size_t)ci;
            }
            m = max32(most, 1);
            if (q != NULL) {
                m = rows_dst_run(brk, j, m);
                pe_cv_dsp_cols_q(q, m, p, step, wblk, run, l->input_offset, q + 4, dst[j] + oc, g->out_c);
            } else {
                pe_cv_dsp_cols(acc + 4 * j, m, p, step, wblk, run, l->input_offset);
            }
            j += m;
            continue;
        }
        {
            /* a clipped or split window: its pieces one by one (fused: into
             * acc[0..3] from the bias, then requantized) */
            int32_t *const aj = q != NULL ? acc : acc + 4 * j;
            int32_t c = c_lo;
            if (q != NULL) {
                memcpy(aj, q, 4 * sizeof(int32_t));
            }
            while (c < c_hi) {
                const int8_t *p;
                int32_t e;
                if (in_temp && c >= s->committed) {
                    const int32_t t = c % s->temp_cols;
                    e = min32(c_hi, c + s->temp_cols + temp_mirror(l, g, R->block_w) - t);
                    p = s->temp + (size_t)t * (size_t)ci;
                } else {
                    e = in_temp ? min32(c_hi, s->committed) : c_hi;
                    p = ring_row + (size_t)(c - s->in_a) * (size_t)ci;
                }
                pe_cv_dsp_cols(aj, 1, p, step, wblk + 2 * (c - col0) * ci, (e - c) * ci, l->input_offset);
                c = e;
            }
            if (q != NULL) {
                for (c = 0; c < 4; c++) {
                    dst[j][oc + c] = requant_slow(l, aj[c], oc + c);
                }
            }
        }
        j++;
    }
}

/* Output columns [x0, x1) of row o of a conv / pointwise that
 * conv_rows_apply accepts: the whole-tensor block loop's structure in a
 * region (pe_cv_dsp_widen / pe_cv_dsp_cols, pe_conv_gather.h). Columns go
 * in groups of PE_STRIPE_CONV_COLS; per group, four output channels at a
 * time, and per kernel row the block's weights of that row are widened once
 * into the work block, then conv_row_calls sums the columns' window rows;
 * the requantization's constants are set up once per channel. The int32
 * sums are conv_pixel's in another order (accumulator_fits bounds them). */
__attribute__((noinline)) static void conv_rows(stripe_run *R, int32_t L, int32_t o, int32_t x0, int32_t x1)
{
    const pe_stripe_layer *l = &R->net->layers[L];
    const layer_geo *g = &R->G->g[L];
    const int32_t ci = g->in_c, co = g->out_c, kw = g->kw;
    const int32_t run = kw * ci; /* bytes of a kernel row */
    const int32_t fsize = ((g->kh - 1) / g->dh + 1) * run;
    const int32_t row0 = o * g->sh - g->pt;
    const int32_t ky0 = (max32(0, -row0) + g->dh - 1) / g->dh * g->dh;
    const int32_t ky1 = min32(g->kh, g->in_h - row0);
    uint32_t *const wblk = R->work;
    int32_t *const acc = (int32_t *)(void *)(R->work + 2 * run);
    const int32_t nky = ky1 > ky0 ? (ky1 - ky0 - 1) / g->dh + 1 : 0;
    int32_t xa, oc, ky, j;
    for (xa = x0; xa < x1; xa += PE_STRIPE_CONV_COLS) {
        const int32_t n = min32(x1 - xa, PE_STRIPE_CONV_COLS);
        int8_t *dst[PE_STRIPE_CONV_COLS];
        int32_t run_end = 0; /* dst[j] for j < run_end follow on from the last out_slot */
        uint32_t brk = 0;    /* the columns that start a run of slots */
        int32_t cols = 0;    /* the windows' columns inside the image */
        for (j = 0; j < n; j++) {
            const int32_t col0 = (xa + j) * g->sw - g->pl;
            if (j > 0 && j < run_end) {
                dst[j] = dst[j - 1] + co;
            } else {
                dst[j] = out_slot(R, L, o, xa + j);
                run_end = j + out_span(R, L, xa + j, n - j);
                brk |= (uint32_t)1 << j;
            }
            cols += min32(col0 + kw, g->in_w) - max32(col0, 0);
        }
        R->macs += (uint64_t)cols * (uint64_t)nky * (uint64_t)ci * (uint64_t)co;
        for (oc = 0; oc < co; oc += 4) {
            const int32_t nb = min32(4, co - oc);
            /* the fused constants in the accumulator block past column 0's
             * (the fused calls' only accumulators, a clipped window's) */
            int32_t *const q = acc + 4;
            /* one kernel row: summed and requantized in one pass */
            const int fused = nky == 1 && rows_fused(l, oc, nb, fsize, q);
            if (!fused) {
                rows_start(l, acc, n, oc, nb);
            }
            for (ky = ky0; ky < ky1; ky += g->dh) {
                pe_cv_dsp_widen(wblk, l->weights + (size_t)oc * (size_t)fsize + (size_t)(ky / g->dh) * (size_t)run,
                                fsize, run, nb);
                conv_row_calls(R, L, row0 + ky, xa, n, acc, fused ? q : NULL, dst, brk, oc);
            }
            if (fused) {
                continue;
            }
            rows_store(l, acc, n, oc, nb, fsize, dst);
        }
        if (R->st[L + 1].listener >= 0) { /* (publish's test once per block) */
            const int32_t A = R->st[L + 1].listener;
            for (j = 0; j < n; j++) {
                publish_to(R, A, o, xa + j, dst[j], co);
            }
        }
    }
}

/* Output columns [x0, x1) of row o of a conv that conv_patch_apply takes:
 * per group of PE_STRIPE_PATCH_COLS columns each window is copied into its
 * patch in the work block (a tap outside the image as the input zero point,
 * which adds nothing once the offset is added; zero bytes up to the patch
 * length, whose weights are zero), then per four output channels the whole
 * filter is widened once and one pe_cv_dsp_cols call sums every patch.
 * The int32 sums are conv_pixel's in another order. */
__attribute__((noinline)) static void conv_patch_rows(stripe_run *R, int32_t L, int32_t o, int32_t x0, int32_t x1)
{
    const pe_stripe_layer *l = &R->net->layers[L];
    const layer_geo *g = &R->G->g[L];
    const stripe_state *s = &R->st[L + 1];
    const int32_t ci = g->in_c, co = g->out_c;
    const int32_t kw_taps = (g->kw - 1) / g->dw + 1, kh_taps = (g->kh - 1) / g->dh + 1;
    const int32_t fsize = kh_taps * kw_taps * ci;
    const int32_t plen = conv_patch_len(g);
    const int32_t row0 = o * g->sh - g->pt;
    const int8_t pad = (int8_t)(-l->input_offset);
    /* the row still partly in the temporary (in_pixel's rule), or none */
    const int32_t temp_row = s->temp_cols > 0 ? s->in_row : -1;
    uint32_t *const wblk = R->work;
    int32_t *const acc = (int32_t *)(void *)(R->work + 2 * plen);
    int8_t *const patches = (int8_t *)(void *)(acc + 4 * PE_STRIPE_PATCH_COLS);
    /* ring offset of tap row ky's input row, less in_a columns (in_pixel's
     * rule; rows outside the image unused): the tap tables' row table */
    int32_t *const roff = R->taps.roff;
    int32_t xa, oc, j, ky, kx;
    for (ky = 0; ky < kh_taps; ky++) {
        const int32_t r = row0 + ky * g->dh;
        roff[ky] = ((g->ring_rows > 1 ? r % g->ring_rows : 0) * (s->in_b - s->in_a) - s->in_a) * ci;
    }
    for (xa = x0; xa < x1; xa += PE_STRIPE_PATCH_COLS) {
        const int32_t n = min32(x1 - xa, PE_STRIPE_PATCH_COLS);
        int8_t *dst[PE_STRIPE_PATCH_COLS];
        int32_t run_end = 0; /* dst[j] for j < run_end follow on from the last out_slot */
        uint32_t brk = 0;    /* the columns that start a run of slots */
        for (j = 0; j < n; j++) {
            const int32_t col0 = (xa + j) * g->sw - g->pl;
            /* the window's columns inside the image, undilated: a row of it is one copy */
            const int inside = g->dw == 1 && col0 >= 0 && col0 + g->kw <= g->in_w;
            int8_t *d = patches + (size_t)j * (size_t)plen;
            int32_t taps = 0, k;
            for (ky = 0; ky < kh_taps; ky++) {
                const int32_t r = row0 + ky * g->dh;
                if (r < 0 || r >= g->in_h) {
                    for (k = 0; k < kw_taps * ci; k++) {
                        *d++ = pad;
                    }
                    continue;
                }
                if (inside && (r != temp_row || col0 >= s->committed || col0 + g->kw <= s->committed)) {
                    /* the window row in one store (the temporary's mirror
                     * columns continue it past its end): one copy, a word
                     * at a time */
                    const int8_t *src = (r == temp_row && col0 >= s->committed)
                                            ? s->temp + (size_t)(col0 % s->temp_cols) * (size_t)ci
                                            : s->ring + roff[ky] + (ptrdiff_t)col0 * ci;
                    int32_t left = g->kw * ci;
                    for (; left >= 4; left -= 4, d += 4, src += 4) {
                        memcpy(d, src, 4);
                    }
                    for (; left > 0; left--) {
                        *d++ = *src++;
                    }
                    taps += g->kw;
                    continue;
                }
                for (kx = 0; kx < kw_taps; kx++) {
                    const int32_t c = col0 + kx * g->dw;
                    if (c < 0 || c >= g->in_w) {
                        memset(d, pad, (size_t)ci);
                    } else {
                        memcpy(d, in_pixel(s, g, r, c), (size_t)ci);
                        taps++;
                    }
                    d += ci;
                }
            }
            for (k = fsize; k < plen; k++) {
                *d++ = 0; /* (zero weights there) */
            }
            if (j > 0 && j < run_end) {
                dst[j] = dst[j - 1] + co;
            } else {
                dst[j] = out_slot(R, L, o, xa + j);
                run_end = j + out_span(R, L, xa + j, n - j);
                brk |= (uint32_t)1 << j;
            }
            R->macs += (uint64_t)taps * (uint64_t)ci * (uint64_t)co;
        }
        for (oc = 0; oc < co; oc += 4) {
            const int32_t nb = min32(4, co - oc);
            int32_t *const q = acc; /* (the fused calls use no accumulators) */
            pe_cv_dsp_widen(wblk, l->weights + (size_t)oc * (size_t)fsize, fsize, fsize, nb);
            if (rows_fused(l, oc, nb, fsize, q)) {
                /* summed and requantized in one pass, per run of outputs co bytes apart */
                for (j = 0; j < n;) {
                    const int32_t m = rows_dst_run(brk, j, n - j);
                    pe_cv_dsp_cols_q(q, m, patches + (size_t)j * (size_t)plen, plen, wblk, plen, l->input_offset,
                                     q + 4, dst[j] + oc, co);
                    j += m;
                }
                continue;
            }
            rows_start(l, acc, n, oc, nb);
            pe_cv_dsp_cols(acc, n, patches, plen, wblk, plen, l->input_offset);
            rows_store(l, acc, n, oc, nb, fsize, dst);
        }
        if (R->st[L + 1].listener >= 0) { /* (publish's test once per block) */
            const int32_t A = R->st[L + 1].listener;
            for (j = 0; j < n; j++) {
                publish_to(R, A, o, xa + j, dst[j], co);
            }
        }
    }
}
#endif

#endif /* PE_STRIPE_ROWS_H */
