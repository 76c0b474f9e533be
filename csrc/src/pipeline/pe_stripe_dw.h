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

/* The taps' byte offsets from the first window's tap 0 (ring rows and the
 * temporary are one arena) into toff, for windows of kernel rows [ky0, ky1)
 * whose first is at column col0 (t0: its temporary slot, or -1); returns
 * the first window's tap 0 */
static const int8_t *dw_tap_offsets(const stripe_state *s, const layer_geo *g, int32_t row0, int32_t col0,
                                    int32_t t0, int32_t ky0, int32_t ky1, int32_t *toff)
{
    const int32_t ci = g->in_c, ring_w = s->in_b - s->in_a, step = g->dw * ci, kw = g->kw;
    const int8_t *win = NULL;
    int32_t ky, kx, r = row0 + ky0;
    /* the ring row of input row r: r % ring_rows, stepped by dh without a division per row */
    int32_t rr = g->ring_rows > 1 ? r % g->ring_rows : 0;
    for (ky = ky0; ky < ky1; ky += g->dh, r += g->dh) {
        /* the window row's first column: in the temporary or in the ring */
        const int8_t *const base = (t0 >= 0 && r == s->in_row)
                                       ? s->temp + (size_t)t0 * (size_t)ci
                                       : s->ring + ((size_t)rr * (size_t)ring_w + (size_t)(col0 - s->in_a)) * (size_t)ci;
        int32_t d;
        win = win == NULL ? base : win;
        d = (int32_t)(base - win);
        for (kx = 0; kx < kw; kx += g->dw, d += step) {
            *toff++ = d;
        }
        if (g->ring_rows > 1) {
            rr += g->dh;
            while (rr >= g->ring_rows) {
                rr -= g->ring_rows;
            }
        }
    }
    return win;
}

/* Runs dw_rows has found and not yet computed: output columns [x, x + m),
 * the first window's temporary slot t0 (or -1), outputs from d0 on */
typedef struct {
    int32_t x, m, t0;
    int8_t *d0;
} dw_pending;

/* The runs of row o of layer L (a depthwise layer, or a conv of one input
 * channel: conv1_rows_apply), whole windows of kernel rows [ky0, ky1)
 * inside the image (a kernel of their rows: the padding adds nothing),
 * each a run of windows one stride apart in their stores whose outputs lie
 * one pixel apart. The channel groups of four go outermost: per group the
 * start values, weight pairs and requantization constants are set up once
 * for every run (pe_dw_dsp_group_s, from the layer's weights in place: the
 * depthwise's a tap's four channels as one word, a conv of one input
 * channel's four filters a stride apart), then each run is one
 * channel-group loop call (pe_dw_dsp_run; pe_dw_dsp_run1 for a conv of one
 * input channel, whose group reads one input byte per tap); the runs' tap
 * offsets are worked out once (in the work block: the table, PE_DW_RUNS
 * offset tables) and put in the table once when the runs' are the same,
 * else per run and group. A depthwise layer's last out_c % 4 channels per pixel. (Not
 * inlined: its table stays off the frames of the per-pixel path.) */
__attribute__((noinline)) static void dw_flush(stripe_run *R, int32_t L, int32_t o, const dw_pending *run, int32_t nrun,
                                               int32_t ky0, int32_t ky1)
{
    const pe_stripe_layer *l = &R->net->layers[L];
    const layer_geo *g = &R->G->g[L];
    const stripe_state *s = &R->st[L + 1];
    const int one = l->op != PE_STRIPE_DEPTHWISE; /* a conv of one input channel */
    const int32_t ci = g->in_c, co = g->out_c, c4 = co & ~3;
    const int32_t nky = (ky1 - ky0 - 1) / g->dh + 1, kw_t = (g->kw - 1) / g->dw + 1, taps = nky * kw_t;
    /* the conv's filter: [co][fsize] from kernel row 0; the depthwise's [taps][co] from row ky0 */
    const int32_t fsize = ((g->kh - 1) / g->dh + 1) * kw_t;
    const int8_t *const wts = l->weights + (size_t)(ky0 / g->dh) * (size_t)kw_t * (size_t)(one ? 1 : co);
    const int32_t row0 = o * g->sh - g->pt;
    int32_t *const tab = (int32_t *)(void *)R->work;
    int32_t *const toffs = tab + PE_DW_ROW_TAB_WORDS;
    const int8_t *win[PE_DW_RUNS];
    const int32_t *const bias = l->bias, *const mult = l->quant.multiplier, *const shift = l->quant.shift;
    pe_conv_params p; /* (the run loops read activation, offsets, rounding only) */
    int32_t i, j, k, oc, same = 1;
    for (k = 0; k < nrun; k++) {
        win[k] = dw_tap_offsets(s, g, row0, run[k].x * g->sw - g->pl, run[k].t0, ky0, ky1,
                                toffs + k * PE_DW_ROW_TAPS);
    }
    for (k = 1; k < nrun && same; k++) { /* runs with the same offsets share the table's */
        for (i = 0; i < taps && toffs[i] == toffs[k * PE_DW_ROW_TAPS + i]; i++) {
        }
        same = i == taps;
    }
    p.input_offset = l->input_offset;
    p.output_offset = l->output_offset;
    p.activation = l->activation;
    p.rounding = l->rounding;
    if (same) { /* (the group set-up leaves the offsets) */
        pe_dw_dsp_taps(tab, taps, toffs, co, g->sw * ci);
    }
    for (oc = 0; oc < c4; oc += 4) {
        /* channels oc..oc+3: the conv's filter [co][fsize] from kernel row 0, a channel's taps
         * consecutive; the depthwise's [taps][co] from row ky0, a tap's channels consecutive */
        const int32_t fast = one ? pe_dw_dsp_group_s(tab, taps, wts + (size_t)oc * (size_t)fsize, 1, fsize,
                                                     bias != NULL ? bias + oc : NULL, mult + oc, shift + oc,
                                                     l->input_offset, l->output_offset, l->rounding)
                                 : pe_dw_dsp_group_s(tab, taps, wts + oc, co, 1, bias != NULL ? bias + oc : NULL,
                                                     mult + oc, shift + oc, l->input_offset, l->output_offset,
                                                     l->rounding);
        for (k = 0; k < nrun; k++) {
            if (!same) {
                pe_dw_dsp_taps(tab, taps, toffs + k * PE_DW_ROW_TAPS, co, g->sw * ci);
            }
            if (one) {
                pe_dw_dsp_run1(run[k].d0 + oc, run[k].m, win[k], tab, taps, fast, &p, &l->quant, oc);
            } else {
                pe_dw_dsp_run(run[k].d0 + oc, run[k].m, win[k] + oc, tab, taps, fast, &p, &l->quant, oc);
            }
        }
    }
    for (k = 0; k < nrun; k++) {
        const int32_t *const toff = toffs + k * PE_DW_ROW_TAPS;
        R->macs += (uint64_t)run[k].m * (uint64_t)taps * (uint64_t)co;
        if (c4 == co && R->st[L + 1].listener < 0) {
            continue; /* (nothing left per pixel: publish would copy nowhere) */
        }
        for (j = 0; j < run[k].m; j++) {
            const int8_t *const w = win[k] + (size_t)j * (size_t)(g->sw * ci);
            int8_t *const d = run[k].d0 + (size_t)j * (size_t)co;
            for (oc = c4; oc < co; oc++) { /* (a depthwise layer's only: conv1_rows_apply) */
                int32_t acc = l->bias != NULL ? l->bias[oc] : 0;
                for (i = 0; i < taps; i++) {
                    acc += (int32_t)wts[i * co + oc] * ((int32_t)w[toff[i] + oc] + l->input_offset);
                }
                d[oc] = requant_s8(l, acc, oc);
            }
            publish(R, L + 1, o, run[k].x + j, d, co);
        }
    }
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
    dw_pending run[PE_DW_RUNS];
    int32_t x = x0, oc, nrun = 0;
    *e = x1;
    if (ky0 >= ky1) {
        return x0;
    }
    if (l->bias != NULL) { /* taps * 32640 + |bias| < 2^30 (taps <= PE_DW_ROW_TAPS: lim > 0) */
        const int32_t lim = (int32_t)((1L << 30) - (long)taps * 32640L);
        for (oc = 0; oc < co; oc++) {
            if (l->bias[oc] >= lim || l->bias[oc] <= -lim) {
                return x0;
            }
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
            if (nrun > 0) {
                dw_flush(R, L, o, run, nrun, ky0, ky1);
            }
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
        if (nrun == PE_DW_RUNS) {
            dw_flush(R, L, o, run, nrun, ky0, ky1);
            nrun = 0;
        }
        run[nrun].x = x;
        run[nrun].m = m;
        run[nrun].t0 = t0;
        run[nrun].d0 = d0;
        nrun++;
        x += m;
    }
    if (nrun > 0) {
        dw_flush(R, L, o, run, nrun, ky0, ky1);
    }
    return x1;
}
#endif

#endif /* PE_STRIPE_DW_H */
