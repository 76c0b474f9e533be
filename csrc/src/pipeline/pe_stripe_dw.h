/*
 * pe_stripe_dw.h - the stripe executor's depthwise row loops (issue #29),
 * private to pe_stripe.c, which includes it after the functions they use
 * (stripe_run, out_slot, publish, compute_windowed; the executor's file is
 * at its size limit): dw_rows takes a depthwise layer that dw_rows_apply
 * (pe_stripe_internal.h) accepts in blocks of at least
 * PE_STRIPE_CONV_MIN_COLS columns, on Arm DSP-extension builds, and runs
 * the whole-tensor depthwise kernel's channel-group loop (pe_dw_dsp_run,
 * pe_conv_gather.h) over runs of output columns.
 */
#ifndef PE_STRIPE_DW_H
#define PE_STRIPE_DW_H

#if PE_DSP
/* Whether output column x of row o of depthwise layer L can join a run of
 * dw_rows: its window inside the image horizontally and, in the row being
 * received, wholly in the row temporary (in_pixel's rule: columns from
 * committed on; its first kw - 1 slots repeated past its end, temp_mirror,
 * so a window never wraps) or wholly in the ring. *t: the window's first
 * temporary slot (-1 when it reads no temporary). */
static int dw_column_whole(const stripe_state *s, const layer_geo *g, int32_t x, int reads_temp, int32_t *t)
{
    const int32_t col0 = x * g->sw - g->pl;
    *t = -1;
    if (col0 < 0 || col0 + g->kw > g->in_w) {
        return 0;
    }
    if (!reads_temp || col0 + g->kw <= s->committed) {
        return 1;
    }
    if (col0 < s->committed) {
        return 0; /* split between the ring and the temporary */
    }
    *t = col0 % s->temp_cols;
    return 1; /* (the mirror: a window from any slot is whole) */
}

/* Output columns [x, x + m) of row o of depthwise layer L, a run of whole
 * windows one stride apart in their stores (t0: the first window's
 * temporary slot, or -1) whose outputs lie one pixel apart from d0: the
 * taps' byte offsets from the first window's tap 0 (ring rows and the
 * temporary are one arena), then per group of four channels the start
 * values, weight pairs and requantization constants set up once and one
 * pe_dw_dsp_run call for the run; the last co % 4 channels per pixel.
 * (Not inlined: its table stays off the frames of the per-pixel path.) */
__attribute__((noinline)) static void dw_run(stripe_run *R, int32_t L, int32_t o, int32_t x, int32_t m, int32_t t0,
                                             int8_t *d0, int32_t ky0, int32_t ky1)
{
    const pe_stripe_layer *l = &R->net->layers[L];
    const layer_geo *g = &R->G->g[L];
    const stripe_state *s = &R->st[L + 1];
    const int32_t ci = g->in_c, co = g->out_c, c4 = co & ~3;
    /* the kernel rows inside the image: a kernel of nky rows whose weights start at row ky0 / dh */
    const int32_t nky = (ky1 - ky0 - 1) / g->dh + 1, kw_t = (g->kw - 1) / g->dw + 1, taps = nky * kw_t;
    const int8_t *const wts = l->weights + (size_t)(ky0 / g->dh) * (size_t)kw_t * (size_t)co;
    const int32_t row0 = o * g->sh - g->pt, col0 = x * g->sw - g->pl;
    const int32_t ring_w = s->in_b - s->in_a;
    /* the loop's table and the tap offsets in the work block (off the stack) */
    int32_t *const tab = (int32_t *)(void *)R->work;
    int32_t *const toff = tab + PE_DW_ROW_TAB_WORDS;
    const int8_t *win = NULL;
    pe_conv_params p;
    pe_dims f;
    int32_t i = 0, j, ky, kx, oc;
    for (ky = ky0; ky < ky1; ky += g->dh) {
        const int32_t r = row0 + ky;
        for (kx = 0; kx < g->kw; kx += g->dw) {
            const int8_t *tp;
            if (t0 >= 0 && r == s->in_row) {
                tp = s->temp + (size_t)(t0 + kx) * (size_t)ci;
            } else {
                const int32_t slot = g->ring_rows > 1 ? r % g->ring_rows : 0;
                tp = s->ring + ((size_t)slot * (size_t)ring_w + (size_t)(col0 + kx - s->in_a)) * (size_t)ci;
            }
            win = i == 0 ? tp : win;
            toff[i++] = (int32_t)(tp - win);
        }
    }
    memset(&p, 0, sizeof p);
    p.input_offset = l->input_offset;
    p.output_offset = l->output_offset;
    p.activation = l->activation;
    p.rounding = l->rounding;
    p.ch_mult = 1;
    f.n = 1;
    f.h = nky;
    f.w = kw_t;
    f.c = co;
    pe_dw_dsp_taps(tab, taps, toff, co, g->sw * ci);
    for (oc = 0; oc < c4; oc += 4) {
        const int32_t fast = pe_dw_dsp_group(tab, &p, &l->quant, &f, wts, l->bias, oc);
        pe_dw_dsp_run(d0 + oc, m, win + oc, tab, taps, fast, &p, &l->quant, oc);
    }
    for (j = 0; j < m; j++) {
        const int8_t *const w = win + (size_t)j * (size_t)(g->sw * ci);
        int8_t *const d = d0 + (size_t)j * (size_t)co;
        for (oc = c4; oc < co; oc++) {
            int32_t acc = l->bias != NULL ? l->bias[oc] : 0;
            for (i = 0; i < taps; i++) {
                acc += (int32_t)wts[i * co + oc] * ((int32_t)w[toff[i] + oc] + l->input_offset);
            }
            d[oc] = requant_s8(l, acc, oc);
        }
        publish(R, L + 1, o, x + j, d, co);
    }
    R->macs += (uint64_t)m * (uint64_t)taps * (uint64_t)co;
}

/* Output columns [x0, x1) of row o of a depthwise layer that dw_rows_apply
 * accepts: runs of whole windows (dw_column_whole) whose windows lie one
 * stride apart in their stores and whose outputs lie one pixel apart go
 * through the whole-tensor kernel's channel-group loop (dw_run,
 * pe_dw_dsp_run in pe_conv_gather.h), windows with padding rows as a
 * kernel of their inside rows (the padding adds nothing to the sums); the
 * run's length is worked out from the image, the ring / temporary border
 * (committed), the temporary's wrap and the output store's, not column by
 * column. Accumulators that may reach 2^30 (the loop's doubled sums) and
 * the other columns (padding columns, a window split between the ring and
 * the temporary or across its wrap) are left to compute_windowed: the runs
 * from x0 on are done up to the returned column, and the columns from
 * there up to *e are the caller's (not inlined, and not the caller of
 * compute_windowed: its frame stays off the per-pixel path's). Same bytes
 * as dw_pixel. */
__attribute__((noinline)) static int32_t dw_rows(stripe_run *R, int32_t L, int32_t o, int32_t x0, int32_t x1,
                                                 int32_t *e)
{
    const pe_stripe_layer *l = &R->net->layers[L];
    const layer_geo *g = &R->G->g[L];
    const stripe_state *s = &R->st[L + 1];
    const int32_t co = g->out_c, kw = g->kw, sw = g->sw;
    const int32_t taps = ((g->kh - 1) / g->dh + 1) * ((g->kw - 1) / g->dw + 1);
    const int32_t row0 = o * g->sh - g->pt;
    /* kernel rows [ky0, ky1) inside the image (every dh-th a tap) */
    const int32_t ky0 = (max32(0, -row0) + g->dh - 1) / g->dh * g->dh;
    const int32_t ky1 = min32(g->kh, g->in_h - row0);
    const int reads_temp = s->temp_cols > 0 && s->in_row >= row0 + ky0 && s->in_row < row0 + ky1 &&
                           (s->in_row - row0) % g->dh == 0;
    /* the last output column whose window is inside the image */
    const int32_t x_in = (g->in_w - kw + g->pl) >= 0 ? (g->in_w - kw + g->pl) / sw : -1;
    int32_t x = x0, oc;
    *e = x1;
    if (ky0 >= ky1) {
        return x0;
    }
    for (oc = 0; oc < co; oc++) {
        const int64_t b = l->bias != NULL ? (int64_t)l->bias[oc] : 0;
        if ((int64_t)taps * 32640 + (b < 0 ? -b : b) >= ((int64_t)1 << 30)) {
            return x0;
        }
    }
    while (x < x1) {
        int32_t t0, tm, m, most, j;
        int8_t *d0;
        if (!dw_column_whole(s, g, x, reads_temp, &t0)) {
            int32_t end = x + 1;
            while (end < x1 && !dw_column_whole(s, g, end, reads_temp, &tm)) {
                end++;
            }
            *e = end;
            return x;
        }
        most = min32(x1, x_in + 1) - x;
        if (t0 >= 0) { /* windows in the temporary up to its wrap (window starts below temp_cols) */
            most = min32(most, (s->temp_cols - 1 - t0) / sw + 1);
        } else if (reads_temp) { /* windows in the ring up to committed */
            most = min32(most, (s->committed - kw + g->pl) / sw - x + 1);
        }
        most = max32(most, 1);
        d0 = out_slot(R, L, o, x);
        m = most;
        if (m > 1 && out_slot(R, L, o, x + m - 1) != d0 + (size_t)(m - 1) * (size_t)co) {
            /* the output store wraps inside the run: up to the wrap */
            for (j = 1; j < m && out_slot(R, L, o, x + j) == d0 + (size_t)j * (size_t)co; j++) {
            }
            m = j;
        }
        dw_run(R, L, o, x, m, t0, d0, ky0, ky1);
        x += m;
    }
    return x1;
}
#endif

#endif /* PE_STRIPE_DW_H */
