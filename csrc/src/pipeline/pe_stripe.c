/*
 * pe_stripe.c - stripe executor with line buffers (see pe_stripe.h); the
 * network analysis, stripe ranges and arena layout it runs on are in
 * pe_stripe_plan.c (pe_stripe_internal.h).
 *
 * The executor is push-driven. The network input is fed one row at a time,
 * block by block. A layer told that columns of its current input row arrived
 * computes every output column it now can, block_w at a time, and after each
 * block tells the next layer (deliver -> advance, one recursion level per
 * layer: depth-first). When its input row is complete, a layer moves the
 * row into its ring and emits the further output rows that row completes
 * (the bottom rows of the image, the further rows of an upsampling or a
 * depth to space), now entirely from the ring. Which input row completes which output row is the
 * same rule everywhere (last_needed_row); the arena query runs that rule dry
 * over the image height to size each residual branch's row store.
 */
#include "pyembed/pe_stripe.h"

#include <string.h>

#include "pyembed/pe_conv_gather.h"
#include "pyembed/pe_eltwise.h"
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_simd.h"
#include "pyembed/pe_stripe_kinds.h"
#include "pe_stripe_internal.h"

/* ------------------------------------------------------------------------ */
/* Execution                                                                */

typedef struct pe_stripe_run_s {
    const pe_stripe_net *net;
    const net_geo *G;
    stripe_state *st; /* st[L + 1] is layer L, st[0] the network input */
    int32_t block_w;
    const int8_t *input;          /* the whole input image, or NULL when streamed */
    const pe_row_source *rows;    /* streamed input: where rows come from */
    int8_t *rowbuf;               /* streamed input: the current row's column range */
    int64_t row_hw;               /* streamed input: high-water mark of rowbuf, bytes */
    int8_t *output;
    const pe_row_sink *sink;      /* streamed output: where finished rows go */
    int8_t *outrow;               /* streamed output: the row being produced */
    uint32_t *work;               /* the conv row loops' work block (pe_stripe_work_bytes), or NULL */
    int32_t lazy;                 /* layers wait for a block's worth of columns (advance) */
    int32_t force;                /* the layer make_room has computing what it can, or -1 */
    stripe_taps taps;             /* windowed()'s tap tables, in the arena */
    uint64_t macs, combines, reads;
    pe_status err;
} stripe_run;

static void note_hw(int32_t *hw, int32_t end)
{
    if (end > *hw) {
        *hw = end;
    }
}

static void begin_input_row(stripe_run *R, int32_t L, int32_t r);
static void deliver(stripe_run *R, int32_t L, int32_t upto);

#include "pe_stripe_lazy.h"

/* Streamed output: the last layer finished output row o (one stripe, so the
 * whole row) in R->outrow; hand it to the sink. */
static void sink_row(stripe_run *R, int32_t o)
{
    const pe_status st = R->sink->write(R->sink->user, o, R->outrow, R->G->out_w * R->G->out_c);
    if (st != PE_OK && R->err == PE_OK) {
        R->err = st;
    }
}

/* Where column col of layer L's current input row is written. */
static int8_t *in_slot(stripe_run *R, int32_t L, int32_t col)
{
    stripe_state *s = &R->st[L + 1];
    const layer_geo *g = &R->G->g[L];
    int32_t off;
    if (s->temp_cols == 0 || (!s->triggering && g->ring_rows > 0)) {
        const int32_t slot = g->ring_rows > 1 ? s->in_row % g->ring_rows : 0;
        off = (slot * (s->in_b - s->in_a) + (col - s->in_a)) * g->in_c;
        note_hw(&s->hw_ring, off + g->in_c);
        return s->ring + off;
    }
    off = (col % s->temp_cols) * g->in_c;
    note_hw(&s->hw_temp, off + g->in_c);
    return s->temp + off;
}

/* Column col of layer L's input row `row` (any row the window may read). */
static const int8_t *in_pixel(const stripe_state *s, const layer_geo *g, int32_t row, int32_t col)
{
    int32_t slot;
    if (s->temp_cols > 0 && row == s->in_row && col >= s->committed) {
        return s->temp + (col % s->temp_cols) * g->in_c;
    }
    slot = g->ring_rows > 1 ? row % g->ring_rows : 0;
    return s->ring + (slot * (s->in_b - s->in_a) + (col - s->in_a)) * g->in_c;
}

static int8_t *out_slot(stripe_run *R, int32_t L, int32_t o, int32_t x)
{
    if (L == R->G->n - 1) {
        const net_geo *G = R->G;
        if (R->sink != NULL) {
            return R->outrow + (size_t)x * (size_t)G->out_c; /* one stripe: x from 0 */
        }
        return R->output + ((size_t)o * (size_t)G->out_w + (size_t)x) * (size_t)G->out_c;
    }
    return in_slot(R, L + 1, x);
}

/* Output columns [x, x + n) of layer L: how many from x on have their
 * slots one pixel apart from out_slot(x) on (the consumer's row temporary
 * wraps; a ring row, the output row are whole), their high-water mark
 * noted. */
static int32_t out_span(stripe_run *R, int32_t L, int32_t x, int32_t n)
{
    if (L + 1 < R->G->n) {
        const stripe_state *s = &R->st[L + 2];
        if (!(s->temp_cols == 0 || (!s->triggering && R->G->g[L + 1].ring_rows > 0))) {
            n = min32(n, s->temp_cols - x % s->temp_cols);
        }
        (void)in_slot(R, L + 1, x + n - 1);
    }
    return n;
}

/* publish's work: the copies into the branch stores */
static void publish_to(stripe_run *R, int32_t A, int32_t row, int32_t x, const int8_t *px, int32_t c)
{
    while (A >= 0) {
        stripe_state *a = &R->st[A + 1];
        if (x >= a->out_a && x < a->out_b) {
            const int32_t rows = R->G->g[A].branch_rows;
            const int32_t off = ((row % rows) * (a->out_b - a->out_a) + (x - a->out_a)) * c;
            memcpy(a->branch + off, px, (size_t)c);
            note_hw(&a->hw_branch, off + c);
        }
        A = a->next_listener;
    }
}

/* Copy producer p's (layer p - 1's) output pixel into its adds' branch
 * stores (inline: most producers have none, one test per pixel) */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((always_inline))
#endif
static inline void publish(stripe_run *R, int32_t p, int32_t row, int32_t x, const int8_t *px, int32_t c)
{
    if (R->st[p].listener >= 0) {
        publish_to(R, R->st[p].listener, row, x, px, c);
    }
}

/* v + offset clamped to the activation range, in int32: |offset| <= 128 and
 * the range is inside int8, so clamping v to [-1024, 1024] first changes no
 * result and keeps the sum from overflowing. */
static int32_t finish_s8(int32_t v, int32_t offset, const pe_activation *act)
{
    int32_t r = v < -1024 ? -1024 : (v > 1024 ? 1024 : v);
    r += offset;
    return r < act->min ? act->min : (r > act->max ? act->max : r);
}

/* Output channel oc's int8 from its accumulator: requantization, output
 * offset and activation. On the DSP extension the double-rounding case with
 * a right shift of 1..23, a non-negative multiplier and |acc| < 2^30 takes
 * pe_dsp_requant (the same bytes, see pe_simd.h); every other case the
 * portable pe_fx_requant_mode. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((always_inline)) /* one call per output value: no call overhead */
#endif
static inline int8_t requant_s8(const pe_stripe_layer *l, int32_t acc, int32_t oc)
{
    const int32_t m = l->quant.multiplier[oc];
    const int32_t sh = l->quant.shift[oc];
#if PE_DSP
    if (l->rounding != PE_ROUND_SINGLE && m >= 0 && sh <= -1 && sh >= -23 &&
        acc > -(1 << 30) && acc < (1 << 30)) {
        return pe_dsp_requant(acc, m, -sh, l->activation.min, l->activation.max,
                              l->output_offset);
    }
#endif
    return (int8_t)finish_s8(pe_fx_requant_mode(acc, m, sh, l->rounding), l->output_offset,
                             &l->activation);
}

/* One output pixel of a conv / pointwise: nrun runs of the window, run r
 * being rlen[r] consecutive input pixels from run_px[r] whose weights start
 * at tap woff[r] (a window row inside one ring row is one run, so the dot
 * products run over rlen * in_c contiguous bytes). On the DSP extension,
 * four output channels at a time with the input offset applied while
 * widening (pe_dsp_dot_1x4_off): the same int32 sums in another order
 * (accumulator_fits bounds every partial sum). */
static void conv_pixel(const pe_stripe_layer *l, int32_t ci, int32_t co, int32_t fsize,
                       const int8_t *const *run_px, const int32_t *woff, const uint8_t *rlen,
                       int32_t nrun, int8_t *dst)
{
    const int32_t off = l->input_offset;
    int32_t oc = 0, r;
#if PE_DSP
    for (; oc + 4 <= co; oc += 4) {
        const int8_t *w0 = l->weights + (size_t)oc * (size_t)fsize;
        const int8_t *w1 = w0 + fsize, *w2 = w1 + fsize, *w3 = w2 + fsize;
        int32_t acc[4];
        int32_t j;
        for (j = 0; j < 4; j++) {
            acc[j] = l->bias != NULL ? l->bias[oc + j] : 0;
        }
        for (r = 0; r < nrun; r++) {
            const int32_t wo = woff[r] * ci;
            const int32_t n = (int32_t)rlen[r] * ci;
            const int32_t n8 = n >> 3;
            const int8_t *px = run_px[r];
            if (n8 > 0) {
                pe_dsp_dot_1x4_off(acc, w0 + wo, w1 + wo, w2 + wo, w3 + wo, px, n8, off);
            }
            if ((n & 7) != 0) {
                const int32_t i = n8 * 8;
                pe_dsp_dot_1x2_off(acc, w0 + wo + i, w1 + wo + i, px + i, n - i, off);
                pe_dsp_dot_1x2_off(acc + 2, w2 + wo + i, w3 + wo + i, px + i, n - i, off);
            }
        }
        for (j = 0; j < 4; j++) {
            dst[oc + j] = requant_s8(l, acc[j], oc + j);
        }
    }
#endif
    for (; oc < co; oc++) {
        const int8_t *wf = l->weights + (size_t)oc * (size_t)fsize;
        int32_t acc = l->bias != NULL ? l->bias[oc] : 0;
        for (r = 0; r < nrun; r++) {
            const int8_t *wt = wf + woff[r] * ci;
            const int8_t *px = run_px[r];
            const int32_t n = (int32_t)rlen[r] * ci;
            int32_t i;
            for (i = 0; i < n; i++) {
                acc += (int32_t)wt[i] * ((int32_t)px[i] + off);
            }
        }
        dst[oc] = requant_s8(l, acc, oc);
    }
}

/* One output pixel of a grouped conv (groups > 1): conv_pixel's runs, but
 * output channel oc reads only the cig = ci / groups input channels of its
 * group, so each pixel of a run is its own dot product of cig bytes (the
 * weights of tap t at t * cig in the channel's filter of fsize bytes). */
static void conv_pixel_grouped(const pe_stripe_layer *l, int32_t ci, int32_t co, int32_t groups,
                               int32_t fsize, const int8_t *const *run_px, const int32_t *woff,
                               const uint8_t *rlen, int32_t nrun, int8_t *dst)
{
    const int32_t off = l->input_offset;
    const int32_t cig = ci / groups, cog = co / groups;
    int32_t g, r, p;
    for (g = 0; g < groups; g++) {
        const int32_t oc_end = (g + 1) * cog;
        int32_t oc = g * cog;
#if PE_DSP
        for (; oc + 4 <= oc_end; oc += 4) {
            const int8_t *w0 = l->weights + (size_t)oc * (size_t)fsize;
            int32_t acc[4];
            int32_t j;
            for (j = 0; j < 4; j++) {
                acc[j] = l->bias != NULL ? l->bias[oc + j] : 0;
            }
            for (r = 0; r < nrun; r++) {
                for (p = 0; p < (int32_t)rlen[r]; p++) {
                    const int8_t *px = run_px[r] + p * ci + g * cig;
                    const int8_t *wt = w0 + (woff[r] + p) * cig;
                    const int32_t n8 = cig >> 3;
                    if (n8 > 0) {
                        pe_dsp_dot_1x4_off(acc, wt, wt + fsize, wt + 2 * fsize, wt + 3 * fsize, px, n8,
                                           off);
                    }
                    if ((cig & 7) != 0) {
                        const int32_t i = n8 * 8;
                        pe_dsp_dot_1x2_off(acc, wt + i, wt + fsize + i, px + i, cig - i, off);
                        pe_dsp_dot_1x2_off(acc + 2, wt + 2 * fsize + i, wt + 3 * fsize + i, px + i,
                                           cig - i, off);
                    }
                }
            }
            for (j = 0; j < 4; j++) {
                dst[oc + j] = requant_s8(l, acc[j], oc + j);
            }
        }
#endif
        for (; oc < oc_end; oc++) {
            const int8_t *wf = l->weights + (size_t)oc * (size_t)fsize;
            int32_t acc = l->bias != NULL ? l->bias[oc] : 0;
            for (r = 0; r < nrun; r++) {
                for (p = 0; p < (int32_t)rlen[r]; p++) {
                    const int8_t *px = run_px[r] + p * ci + g * cig;
                    const int8_t *wt = wf + (woff[r] + p) * cig;
                    int32_t i;
                    for (i = 0; i < cig; i++) {
                        acc += (int32_t)wt[i] * ((int32_t)px[i] + off);
                    }
                }
            }
            dst[oc] = requant_s8(l, acc, oc);
        }
    }
}

/* One output pixel of a depthwise conv over ntap taps. Channel multiplier 1:
 * four channels at a time, each tap one word of input and one of weights
 * (on the DSP extension widened by SXTAB16 / SXTB16 and accumulated by
 * SMLABB / SMLATT, the same int32 sums). woff[t]: where tap t's weights
 * start (tap index * out_c). */
static void dw_pixel(const pe_stripe_layer *l, int32_t ci, int32_t co, const int8_t *const *tap,
                     const int32_t *woff, int32_t ntap, int8_t *dst)
{
    const int32_t off = l->input_offset;
    const int32_t mult = co / ci;
    int32_t oc = 0, t;
    if (mult == 1) {
        for (; oc + 4 <= co; oc += 4) {
            int32_t a0, a1, a2, a3;
            if (l->bias != NULL) {
                a0 = l->bias[oc];
                a1 = l->bias[oc + 1];
                a2 = l->bias[oc + 2];
                a3 = l->bias[oc + 3];
            } else {
                a0 = a1 = a2 = a3 = 0;
            }
#if PE_DSP
            {
                const uint32_t off2 = pe_dup16(off);
                const int8_t *wb = l->weights + oc;
                for (t = 0; t < ntap; t++) {
                    const uint32_t xw = pe_rd32(tap[t] + oc);
                    const uint32_t ww = pe_rd32(wb + woff[t]);
                    const uint32_t xe = __sxtab16(off2, xw), xo = pe_sxtab16_ror8(off2, xw);
                    const uint32_t we = __sxtb16(ww), wo = pe_sxtb16_ror8(ww);
                    a0 = __smlabb(we, xe, a0);
                    a2 = __smlatt(we, xe, a2);
                    a1 = __smlabb(wo, xo, a1);
                    a3 = __smlatt(wo, xo, a3);
                }
            }
#else
            for (t = 0; t < ntap; t++) {
                const int8_t *px = tap[t] + oc;
                const int8_t *wt = l->weights + woff[t] + oc;
                a0 += (int32_t)wt[0] * ((int32_t)px[0] + off);
                a1 += (int32_t)wt[1] * ((int32_t)px[1] + off);
                a2 += (int32_t)wt[2] * ((int32_t)px[2] + off);
                a3 += (int32_t)wt[3] * ((int32_t)px[3] + off);
            }
#endif
            dst[oc] = requant_s8(l, a0, oc);
            dst[oc + 1] = requant_s8(l, a1, oc + 1);
            dst[oc + 2] = requant_s8(l, a2, oc + 2);
            dst[oc + 3] = requant_s8(l, a3, oc + 3);
        }
    }
    for (; oc < co; oc++) {
        const int32_t ic = oc / mult;
        int32_t acc = l->bias != NULL ? l->bias[oc] : 0;
        for (t = 0; t < ntap; t++) {
            acc += (int32_t)l->weights[woff[t] + oc] * ((int32_t)tap[t][ic] + off);
        }
        dst[oc] = requant_s8(l, acc, oc);
    }
}

/* the per-pixel (windowed) forms, one function each, so that a firmware
 * links only those of the kinds its regions use (pe_stripe_kinds.h) */
enum { WIN_CONV, WIN_DW, WIN_POOL, WIN_S2D };

/* Output columns [x0, x1) of row o of a conv / pointwise (WIN_CONV), a
 * depthwise (WIN_DW), a pool (WIN_POOL) or a space to depth (WIN_S2D); win
 * is a constant at each call, so each caller keeps only its own arm. */
static inline __attribute__((always_inline)) void windowed(stripe_run *R, int32_t L, int32_t o, int32_t x0,
                                                           int32_t x1, const int win)
{
    const pe_stripe_layer *l = &R->net->layers[L];
    const layer_geo *g = &R->G->g[L];
    const stripe_state *s = &R->st[L + 1];
    /* tap tables (the arena's, sized to the network's largest window) */
    const int8_t **tap = R->taps.tap;
    int32_t *woff = R->taps.woff;
    uint8_t *rlen = R->taps.rlen;
    int32_t *roff = R->taps.roff; /* ring offset of window row ky, less in_a columns */
    const int32_t row0 = o * g->sh - g->pt;
    /* window rows [ky0, ky1) inside the image; with dilation only every
     * dh-th of them is a tap (ky0 rounded up to one) */
    const int32_t ky0 = (max32(0, -row0) + g->dh - 1) / g->dh * g->dh;
    const int32_t ky1 = min32(g->kh, g->in_h - row0);
    const int32_t ci = g->in_c;
    const int32_t co = g->out_c;
    const int32_t ring_w = s->in_b - s->in_a;
    /* the row still partly in temp (in_pixel's rule), or none */
    const int32_t temp_row = s->temp_cols > 0 ? s->in_row : -1;
    const int conv = win == WIN_CONV;
    /* the kernel's own size (the window without the dilation's gaps) */
    const int32_t kw_taps = (g->kw - 1) / g->dw + 1;
    const int32_t fsize = ((g->kh - 1) / g->dh + 1) * kw_taps * (ci / g->groups);
    int32_t x, ky;

    for (ky = ky0; ky < ky1; ky += g->dh) {
        const int32_t r = row0 + ky;
        const int32_t slot = g->ring_rows > 1 ? r % g->ring_rows : 0;
        roff[ky] = (slot * ring_w - s->in_a) * ci;
    }
    for (x = x0; x < x1; x++) {
        const int32_t col0 = x * g->sw - g->pl;
        const int32_t kx0 = (max32(0, -col0) + g->dw - 1) / g->dw * g->dw;
        const int32_t kx1 = min32(g->kw, g->in_w - col0);
        int32_t ntap = 0, nrun = 0;
        int32_t kx, t, oc;
        int8_t *dst;
        for (ky = ky0; ky < ky1; ky += g->dh) {
            const int32_t r = row0 + ky;
            for (kx = kx0; kx < kx1; kx += g->dw) {
                const int32_t c = col0 + kx;
                const int8_t *px = (r == temp_row && c >= s->committed)
                                       ? s->temp + (c % s->temp_cols) * ci
                                       : s->ring + roff[ky] + c * ci;
                /* the tap's index in the (undilated) kernel */
                const int32_t w = ky / g->dh * kw_taps + kx / g->dw;
                if (conv) {
                    /* extend the current run when pixel and weights follow on */
                    if (nrun > 0 && kx > kx0 && px == tap[nrun - 1] + rlen[nrun - 1] * ci &&
                        w == woff[nrun - 1] + rlen[nrun - 1]) {
                        rlen[nrun - 1]++;
                    } else {
                        tap[nrun] = px;
                        woff[nrun] = w;
                        rlen[nrun] = 1;
                        nrun++;
                    }
                } else {
                    tap[ntap] = px;
                    woff[ntap] = w * co;
                }
                ntap++;
            }
        }
        dst = out_slot(R, L, o, x);
        if (conv) {
            if (g->groups > 1) {
                conv_pixel_grouped(l, ci, co, g->groups, fsize, tap, woff, rlen, nrun, dst);
            } else {
                conv_pixel(l, ci, co, fsize, tap, woff, rlen, nrun, dst);
            }
            R->macs += (uint64_t)ntap * (uint64_t)(ci / g->groups) * (uint64_t)co;
        } else if (win == WIN_DW) {
            dw_pixel(l, ci, co, tap, woff, ntap, dst);
            R->macs += (uint64_t)ntap * (uint64_t)co;
        } else if (win == WIN_S2D) {
            /* no padding: all b * b taps, row-major, tap t to channels [t * ci, (t + 1) * ci) */
            for (t = 0; t < ntap; t++) {
                for (oc = 0; oc < ci; oc++) {
                    dst[t * ci + oc] = tap[t][oc];
                }
            }
            R->combines += (uint64_t)ntap * (uint64_t)ci;
        } else { /* pool */
            for (oc = 0; oc < co; oc++) {
                int32_t v;
                if (l->pool_kind == PE_POOL_MAX) {
                    v = -128;
                    for (t = 0; t < ntap; t++) {
                        v = max32(v, tap[t][oc]);
                    }
                } else {
                    int32_t sum = 0;
                    for (t = 0; t < ntap; t++) {
                        sum += tap[t][oc];
                    }
                    v = sum > 0 ? (sum + ntap / 2) / ntap : (sum - ntap / 2) / ntap;
                }
                dst[oc] = (int8_t)pe_fx_clamp(v, l->activation.min, l->activation.max);
            }
            R->combines += (uint64_t)ntap * (uint64_t)co;
        }
        publish(R, L + 1, o, x, dst, co);
    }
}

__attribute__((noinline)) static void windowed_conv(stripe_run *R, int32_t L, int32_t o, int32_t x0, int32_t x1)
{
    windowed(R, L, o, x0, x1, WIN_CONV);
}

__attribute__((noinline)) static void windowed_dw(stripe_run *R, int32_t L, int32_t o, int32_t x0, int32_t x1)
{
    windowed(R, L, o, x0, x1, WIN_DW);
}

/* the convolution row loops (conv_rows, conv_patch_rows: stripe_run,
 * in_pixel, out_slot, publish and requant_s8 above) */
#include "pe_stripe_rows.h"

/* the depthwise row loops (dw_rows: stripe_run, out_slot and publish above;
 * the columns they leave go to windowed_dw, below) */
#include "pe_stripe_dw.h"

/* ADD pixel by pixel, for parameters outside pe_add_s8's range (left shift
 * above 20, an input multiplier of one or more) */
__attribute__((noinline)) static void add_pixels(stripe_run *R, int32_t L, int32_t o, int32_t x0, int32_t x1)
{
    const pe_stripe_layer *l = &R->net->layers[L];
    const pe_stripe_add_params *p = &l->add;
    const layer_geo *g = &R->G->g[L];
    const stripe_state *s = &R->st[L + 1];
    const int32_t c = g->out_c;
    const int32_t slot = o % g->branch_rows;
    const int32_t one = 1 << p->left_shift;
    int32_t x, i;
    for (x = x0; x < x1; x++) {
        const int8_t *a = in_pixel(s, g, o, x);
        const int8_t *b = s->branch + (slot * (s->out_b - s->out_a) + (x - s->out_a)) * c;
        int8_t *dst = out_slot(R, L, o, x);
        for (i = 0; i < c; i++) {
            const int32_t sa = pe_fx_requant_mode(((int32_t)a[i] + p->main_offset) * one,
                                                  p->main_quant.multiplier, p->main_quant.shift,
                                                  l->rounding);
            const int32_t sb = pe_fx_requant_mode(((int32_t)b[i] + p->branch_offset) * one,
                                                  p->branch_quant.multiplier,
                                                  p->branch_quant.shift, l->rounding);
            const int32_t sum = pe_fx_sat_s32_from_s64((int64_t)sa + (int64_t)sb);
            const int32_t v = pe_fx_requant_mode(sum, p->out_quant.multiplier,
                                                 p->out_quant.shift, l->rounding);
            dst[i] = (int8_t)finish_s8(v, l->output_offset, &l->activation);
        }
        R->combines += (uint64_t)c;
        publish(R, L + 1, o, x, dst, c);
    }
}

/* An ADD's output columns [x0, x1) of row o: runs of columns whose main
 * input, branch and destination pixels each follow on in memory go through
 * the whole-tensor kernel pe_add_s8 (the same arithmetic as TFLite's ADD,
 * its DSP loop on Cortex-M), then each pixel is published. */
__attribute__((noinline)) static void compute_add(stripe_run *R, int32_t L, int32_t o, int32_t x0, int32_t x1)
{
    const pe_stripe_layer *l = &R->net->layers[L];
    const pe_stripe_add_params *p = &l->add;
    const layer_geo *g = &R->G->g[L];
    const stripe_state *s = &R->st[L + 1];
    const int32_t c = g->out_c;
    const int32_t slot = o % g->branch_rows;
    pe_add_params ap;
    int32_t x = x0;
    ap.input1_offset = p->main_offset;
    ap.input2_offset = p->branch_offset;
    ap.output_offset = l->output_offset;
    ap.left_shift = p->left_shift;
    ap.input1_quant = p->main_quant;
    ap.input2_quant = p->branch_quant;
    ap.output_quant = p->out_quant;
    ap.activation = l->activation;
    ap.rounding = l->rounding;
    if (p->left_shift > 20 || p->main_quant.shift > 0 || p->branch_quant.shift > 0) {
        add_pixels(R, L, o, x0, x1); /* outside pe_add_s8's parameter range */
        return;
    }
    while (x < x1) {
        const int8_t *a = in_pixel(s, g, o, x);
        const int8_t *b = s->branch + (slot * (s->out_b - s->out_a) + (x - s->out_a)) * c;
        int8_t *dst = out_slot(R, L, o, x);
        int32_t m = 1, k;
        pe_dims d;
        pe_status st;
        while (x + m < x1 && in_pixel(s, g, o, x + m) == a + (size_t)m * (size_t)c &&
               out_slot(R, L, o, x + m) == dst + (size_t)m * (size_t)c) {
            m++; /* (the branch row is one run over the stripe) */
        }
        d.n = 1;
        d.h = 1;
        d.w = m;
        d.c = c;
        st = pe_add_s8(NULL, &ap, &d, a, &d, b, &d, dst);
        if (st != PE_OK && R->err == PE_OK) {
            R->err = st;
        }
        for (k = 0; k < m; k++) {
            publish(R, L + 1, o, x + k, dst + (size_t)k * (size_t)c, c);
        }
        R->combines += (uint64_t)m * (uint64_t)c;
        x += m;
    }
}

#include "pe_stripe_copy.h"

#include "pe_stripe_resize.h"

/* The kinds' entry points (pe_stripe_kinds.h): pe_stripe_compute_kind (the
 * full table pe_stripe_kinds.c, or a firmware's generated one) calls the one
 * of each layer's kind. */
void pe_stripe_compute_conv(stripe_run *R, int32_t L, int32_t o, int32_t x0, int32_t x1)
{
#if PE_DSP
    if (R->work != NULL && x1 - x0 >= PE_STRIPE_CONV_MIN_CALL &&
        conv_rows_apply(&R->net->layers[L], &R->G->g[L])) {
        conv_rows(R, L, o, x0, x1);
        return;
    }
    if (R->work != NULL && x1 - x0 >= PE_STRIPE_CONV_MIN_CALL &&
        conv_patch_apply(&R->net->layers[L], &R->G->g[L])) {
        conv_patch_rows(R, L, o, x0, x1);
        return;
    }
#endif
    windowed_conv(R, L, o, x0, x1);
}

void pe_stripe_compute_depthwise(stripe_run *R, int32_t L, int32_t o, int32_t x0, int32_t x1)
{
#if PE_DSP
    if (R->net->layers[L].op == PE_STRIPE_CONV) {
        /* a one-channel conv sent here by compute (conv1_rows_apply) */
        int32_t x = x0, e;
        while (x < x1) { /* runs by the depthwise row loops, the columns between them per pixel */
            x = dw_rows(R, L, o, x, x1, &e);
            if (e > x) {
                windowed_conv(R, L, o, x, e);
            }
            x = e;
        }
        return;
    }
    if (R->work != NULL && x1 - x0 >= PE_STRIPE_CONV_MIN_CALL &&
        dw_rows_apply(&R->net->layers[L], &R->G->g[L])) {
        int32_t x = x0, e;
        while (x < x1) { /* runs by dw_rows, the columns between them per pixel */
            x = dw_rows(R, L, o, x, x1, &e);
            if (e > x) {
                windowed_dw(R, L, o, x, e);
            }
            x = e;
        }
        return;
    }
#endif
    windowed_dw(R, L, o, x0, x1);
}

void pe_stripe_compute_pool(stripe_run *R, int32_t L, int32_t o, int32_t x0, int32_t x1)
{
    windowed(R, L, o, x0, x1, WIN_POOL);
}

void pe_stripe_compute_space_to_depth(stripe_run *R, int32_t L, int32_t o, int32_t x0, int32_t x1)
{
    windowed(R, L, o, x0, x1, WIN_S2D);
}

void pe_stripe_compute_add(stripe_run *R, int32_t L, int32_t o, int32_t x0, int32_t x1)
{
    compute_add(R, L, o, x0, x1);
}

void pe_stripe_compute_concat(stripe_run *R, int32_t L, int32_t o, int32_t x0, int32_t x1)
{
    compute_concat(R, L, o, x0, x1);
}

void pe_stripe_compute_expand(stripe_run *R, int32_t L, int32_t o, int32_t x0, int32_t x1)
{
    compute_expand(R, L, o, x0, x1);
}

void pe_stripe_compute_table(stripe_run *R, int32_t L, int32_t o, int32_t x0, int32_t x1)
{
    compute_table(R, L, o, x0, x1);
}

void pe_stripe_compute_bilinear(stripe_run *R, int32_t L, int32_t o, int32_t x0, int32_t x1)
{
    compute_bilinear(R, L, o, x0, x1);
}

void pe_stripe_compute_crop(stripe_run *R, int32_t L, int32_t o, int32_t x0, int32_t x1)
{
    compute_crop(R, L, o, x0, x1);
}

static void compute(stripe_run *R, int32_t L, int32_t o, int32_t x0, int32_t x1)
{
    int32_t kind = R->net->layers[L].op;
#if PE_DSP
    if (kind == PE_STRIPE_CONV && R->work != NULL && x1 - x0 >= PE_STRIPE_CONV_MIN_CALL &&
        conv1_rows_apply(&R->net->layers[L], &R->G->g[L]) && pe_stripe_kind_linked(PE_STRIPE_DEPTHWISE)) {
        /* a one-channel conv runs the depthwise row loops, by the depthwise
         * kind's entry: a firmware whose regions have no depthwise layer
         * does not link them for it (ResNet-8: 6 KB of runtime code) and
         * its conv entry runs the patch loops */
        kind = PE_STRIPE_DEPTHWISE;
    }
#endif
    pe_stripe_compute_kind(R, kind, L, o, x0, x1);
}

/* Producer p (layer p - 1, or the input for p = 0) starts output row o. */
static void begin_output_row(stripe_run *R, int32_t p, int32_t o)
{
    stripe_state *s = &R->st[p];
    int32_t A;
    s->prod_row = o;
    s->prod_done = s->out_a;
    s->next_out = o + 1;
    /* the branch slot about to be overwritten must hold a finished row */
    for (A = s->listener; A >= 0; A = R->st[A + 1].next_listener) {
        if (o - R->st[A + 1].rows_done >= R->G->g[A].branch_rows) {
            R->err = PE_ERR_STATE;
            return;
        }
    }
    if (p < R->G->n) {
        begin_input_row(R, p, o);
    }
}

static void begin_input_row(stripe_run *R, int32_t L, int32_t r)
{
    stripe_state *s = &R->st[L + 1];
    const layer_geo *g = &R->G->g[L];
    s->in_row = r;
    s->arrived = s->in_a;
    s->committed = s->in_a;
    if (is_expand(R->net->layers[L].op)) {
        s->triggering = 1;
        begin_output_row(R, L + 1, g->fh * r);
        return;
    }
    s->triggering = s->next_out < g->out_h && last_needed_row(g, s->next_out) <= r;
    if (s->triggering) {
        begin_output_row(R, L + 1, s->next_out);
    }
}

/* First output column of the current row layer L cannot compute yet. */
static int32_t computable_limit(const stripe_run *R, int32_t L)
{
    const pe_stripe_layer *l = &R->net->layers[L];
    const layer_geo *g = &R->G->g[L];
    const stripe_state *s = &R->st[L + 1];
    int32_t lim;
    if (s->arrived >= s->in_b) {
        lim = s->out_b;
    } else if (is_expand(l->op)) {
        lim = g->fw * s->arrived;
    } else if (geo_bilinear(g)) {
        lim = bilinear_limit(g, s->prod_done, s->out_b, s->arrived);
    } else if (is_windowed(l->op)) {
        const int32_t num = s->arrived + g->pl - g->kw;
        lim = num < 0 ? 0 : num / g->sw + 1;
    } else {
        lim = s->arrived;
    }
    if (is_branch_op(l->op)) {
        const stripe_state *b = &R->st[l->add.from_layer + 1];
        if (b->prod_row < s->prod_row) {
            lim = 0;
        } else if (b->prod_row == s->prod_row) {
            lim = min32(lim, b->prod_done);
        }
    }
    return min32(lim, s->out_b);
}

/* Move the current row's input columns that the remaining outputs of this
 * row no longer need in the oldest row from the temporary into the ring. */
static void commit(stripe_run *R, int32_t L)
{
    const layer_geo *g = &R->G->g[L];
    stripe_state *s = &R->st[L + 1];
    int32_t cb;
    if (s->temp_cols == 0) {
        return; /* upsampling: the row was written to its store directly */
    }
    if (s->prod_done >= s->out_b) {
        cb = s->arrived;
    } else {
        cb = min32(s->arrived, s->prod_done * g->sw - g->pl);
    }
    if (g->ring_rows > 0 && cb > s->committed) {
        const int32_t slot = g->ring_rows > 1 ? s->in_row % g->ring_rows : 0;
        int8_t *row = s->ring + slot * (s->in_b - s->in_a) * g->in_c;
        int32_t col = s->committed;
        /* the temporary is circular: at most two contiguous pieces */
        while (col < cb) {
            const int32_t t = col % s->temp_cols;
            const int32_t n = min32(cb - col, s->temp_cols - t);
            memcpy(row + (col - s->in_a) * g->in_c, s->temp + t * g->in_c, (size_t)(n * g->in_c));
            col += n;
        }
        note_hw(&s->hw_ring, (int32_t)(row - s->ring) + (cb - s->in_a) * g->in_c);
    }
    if (cb > s->committed) {
        s->committed = cb;
    }
}

/* Layer L emits a whole output row o from what it has stored. */
static void emit_row(stripe_run *R, int32_t L, int32_t o)
{
    stripe_state *s = &R->st[L + 1];
    begin_output_row(R, L + 1, o);
    while (R->err == PE_OK && s->prod_done < s->out_b) {
        const int32_t end = min32(s->out_b, s->prod_done + R->block_w);
        make_room(R, L + 1, end);
        compute(R, L, o, s->prod_done, end);
        s->prod_done = end;
        if (L + 1 < R->G->n) {
            deliver(R, L + 1, end);
        } else if (R->sink != NULL && end == s->out_b) {
            sink_row(R, o);
        }
    }
    s->rows_done++;
}

static void end_input_row(stripe_run *R, int32_t L)
{
    stripe_state *s = &R->st[L + 1];
    const layer_geo *g = &R->G->g[L];
    if (!s->triggering) {
        return;
    }
    if (s->prod_done < s->out_b) {
        /* an add whose branch columns did not arrive in time */
        R->err = PE_ERR_UNSUPPORTED;
        return;
    }
    s->rows_done++;
    if (is_expand(R->net->layers[L].op)) {
        int32_t i;
        for (i = 1; i < g->fh && R->err == PE_OK; i++) {
            emit_row(R, L, g->fh * s->in_row + i);
        }
        return;
    }
    while (R->err == PE_OK && s->next_out < g->out_h && last_needed_row(g, s->next_out) <= s->in_row) {
        emit_row(R, L, s->next_out);
    }
}

/* Layer L computes the output columns its arrived input allows, block_w at
 * a time, each block delivered to the next layer (its input grew by chunk
 * columns). Lazy (lazy_wait): fewer than block_w such columns wait for more
 * input (the per-call set-up of the row loops then serves more columns;
 * make_room bounds the wait by the row temporary). */
static inline __attribute__((always_inline)) void advance(stripe_run *R, int32_t L, int32_t chunk)
{
    stripe_state *s = &R->st[L + 1];
    const int lazy = R->lazy && lazy_wait(R, L, chunk);
    if (!s->triggering) {
        s->committed = s->arrived; /* written straight into the ring (or dropped) */
    } else {
        while (R->err == PE_OK && s->prod_done < s->out_b) {
            const int32_t lim = computable_limit(R, L);
            int32_t end;
            if (lim <= s->prod_done || (lazy && lim - s->prod_done < R->block_w)) {
                break;
            }
            end = min32(lim, s->prod_done + R->block_w);
            make_room(R, L + 1, end);
            compute(R, L, s->prod_row, s->prod_done, end);
            s->prod_done = end;
            if (L + 1 < R->G->n) {
                deliver(R, L + 1, end);
            } else if (R->sink != NULL && end == s->out_b) {
                sink_row(R, s->prod_row);
            }
        }
        if (R->err != PE_OK) {
            return;
        }
        commit(R, L);
    }
    if (s->arrived == s->in_b) {
        end_input_row(R, L);
    }
}

/* The columns [s->arrived, upto) that went to a row temporary's first
 * mirror slots, again past its end: one copy a wrap. (Not inlined: deliver's
 * frame is on the depth-first path once a layer.) */
__attribute__((noinline)) static void mirror_cols(stripe_state *s, int32_t ci, int32_t mirror, int32_t upto)
{
    int32_t col = s->arrived;
    while (col < upto) {
        const int32_t t = col % s->temp_cols;
        if (t < mirror) {
            const int32_t k = min32(mirror - t, upto - col);
            memcpy(s->temp + (size_t)(s->temp_cols + t) * (size_t)ci, s->temp + (size_t)t * (size_t)ci,
                   (size_t)k * (size_t)ci);
            note_hw(&s->hw_temp, (s->temp_cols + t + k) * ci);
        }
        col += s->temp_cols - t;
    }
}

static void deliver(stripe_run *R, int32_t L, int32_t upto)
{
    stripe_state *s = &R->st[L + 1];
    const int32_t mirror = temp_mirror(&R->net->layers[L], &R->G->g[L], R->block_w);
    const int32_t chunk = upto - s->arrived;
    if (mirror > 0 && s->temp_cols > 0 && !(!s->triggering && R->G->g[L].ring_rows > 0)) {
        /* the new columns in the temporary's first mirror slots, again past its end */
        mirror_cols(s, R->G->g[L].in_c, mirror, upto);
    }
    s->arrived = upto;
    if (s->triggering && s->temp_cols > 0 && s->arrived - s->committed > s->temp_cols) {
        R->err = PE_ERR_UNSUPPORTED; /* temporary overrun: a blocked add */
        return;
    }
    advance(R, L, chunk);
}

static void run_stripe(stripe_run *R, int32_t x0, int32_t x1)
{
    const pe_stripe_net *net = R->net;
    net_geo *G = (net_geo *)R->G;
    stripe_state *in = &R->st[0];
    const int32_t c = net->input.c;
    int32_t L, r;

    pe_stripe_ranges(net, G, x0, x1);
    for (L = -1; L < G->n; L++) {
        stripe_state *s = &R->st[L + 1];
        s->out_a = G->a[L + 1];
        s->out_b = G->b[L + 1];
        s->in_a = L >= 0 ? G->a[L] : 0;
        s->in_b = L >= 0 ? G->b[L] : 0;
        s->in_row = -1;
        s->arrived = s->committed = s->in_a;
        s->triggering = 0;
        s->next_out = 0;
        s->prod_row = -1;
        s->prod_done = s->out_a;
        s->rows_done = 0;
    }
    for (r = 0; r < net->input.h && R->err == PE_OK; r++) {
        int32_t x = in->out_a;
        const int8_t *row;
        if (R->rows != NULL) {
            /* the row source fills this stripe's column range of row r */
            const pe_status rs = R->rows->read(R->rows->user, r, in->out_a, in->out_b - in->out_a, R->rowbuf);
            if (rs != PE_OK) {
                R->err = rs;
                break;
            }
            row = R->rowbuf - (size_t)in->out_a * (size_t)c;
            if ((int64_t)(in->out_b - in->out_a) * c > R->row_hw) {
                R->row_hw = (int64_t)(in->out_b - in->out_a) * c;
            }
        } else {
            row = R->input + (size_t)r * (size_t)net->input.w * (size_t)c;
        }
        begin_output_row(R, 0, r);
        while (R->err == PE_OK && x < in->out_b) {
            const int32_t end = min32(in->out_b, x + R->block_w);
            make_room(R, 0, end);
            while (x < end) {
                /* columns whose slots follow on in one copy */
                const int8_t *src = row + (size_t)x * (size_t)c;
                int8_t *dst = in_slot(R, 0, x);
                const int32_t m = out_span(R, -1, x, end - x);
                int32_t k;
                memcpy(dst, src, (size_t)m * (size_t)c);
                for (k = 0; k < m && in->listener >= 0; k++) {
                    publish(R, 0, r, x + k, src + (size_t)k * (size_t)c, c);
                }
                x += m;
            }
            R->reads += (uint64_t)(end - in->prod_done) * (uint64_t)c;
            in->prod_done = end;
            deliver(R, 0, end);
        }
        in->rows_done++;
    }
    if (R->err != PE_OK) {
        return;
    }
    for (L = 0; L < G->n; L++) {
        if (R->st[L + 1].rows_done != G->g[L].out_h) {
            R->err = PE_ERR_STATE; /* cannot happen: the schedule lost a row */
            return;
        }
    }
}

static pe_status run_impl(const pe_context *ctx, const pe_stripe_net *net, int32_t stripe_w,
                          int32_t block_w, const pe_dims *input_dims, const int8_t *input,
                          const pe_row_source *rows, const pe_dims *output_dims, int8_t *output,
                          const pe_row_sink *sink, const pe_context *lines)
{
    int64_t ltotal = 0;
    net_geo G; /* its tables at the front of the arena (pe_stripe_geo_bind) */
    stripe_run R;
    stripe_state *st = NULL;
    int8_t *rowbuf = NULL;
    int8_t *outrow = NULL;
    pe_status status;
    int64_t total;
    int32_t L, x0;
    const int streamed = (rows != NULL ? PE_STRIPE_STREAM_IN : 0) | (sink != NULL ? PE_STRIPE_STREAM_OUT : 0);

    if (ctx == NULL || input_dims == NULL || (input == NULL) == (rows == NULL) ||
        (rows != NULL && rows->read == NULL) || output_dims == NULL || (output == NULL) == (sink == NULL) ||
        (sink != NULL && sink->write == NULL) || stripe_w < 1 || block_w < 1) {
        return PE_ERR_ARG;
    }
    if (net == NULL || net->layers == NULL || net->n_layers < 1 || net->n_layers > PE_STRIPE_MAX_LAYERS) {
        return PE_ERR_ARG; /* (pe_stripe_analyse's first checks, before the geometry has a place) */
    }
    {
        /* the geometry in the arena's first bytes, sized to the layer count */
        const int64_t geo = pe_stripe_geo_bind(&G, net->n_layers, NULL);
        const uintptr_t p = (uintptr_t)ctx->buf;
        if (ctx->buf == NULL || (int64_t)ctx->size < geo + PE_STRIPE_ALIGN - 1) {
            return PE_ERR_SCRATCH;
        }
        pe_stripe_geo_bind(&G, net->n_layers,
                           (int8_t *)ctx->buf + ((PE_STRIPE_ALIGN - (p % PE_STRIPE_ALIGN)) % PE_STRIPE_ALIGN));
    }
    status = pe_stripe_analyse(net, &G);
    if (status != PE_OK) {
        return status;
    }
    for (L = 0; L < G.n; L++) {
        if (!pe_stripe_kind_linked(net->layers[L].op)) {
            return PE_ERR_UNSUPPORTED; /* a kind this build's table leaves out (pe_stripe_kinds.h) */
        }
    }
    if (input_dims->n != 1 || input_dims->h != net->input.h || input_dims->w != net->input.w ||
        input_dims->c != net->input.c || output_dims->n != 1 || output_dims->h != G.out_h ||
        output_dims->w != G.out_w || output_dims->c != G.out_c) {
        return PE_ERR_ARG;
    }
    if (sink != NULL && stripe_w < G.out_w) {
        return PE_ERR_UNSUPPORTED; /* rows are final only with one stripe */
    }
    if (streamed == 0) {
        /* input and output share bytes only as pe_stripe_max_overlap_delta allows */
        const uintptr_t xi = (uintptr_t)input;
        const uintptr_t yo = (uintptr_t)output;
        const uintptr_t in_bytes = (uintptr_t)input_dims->h * (uintptr_t)input_dims->w * (uintptr_t)input_dims->c;
        const uintptr_t out_bytes = (uintptr_t)G.out_h * (uintptr_t)G.out_w * (uintptr_t)G.out_c;
        if (xi < yo + out_bytes && yo < xi + in_bytes) {
            int64_t most;
            const int64_t delta = yo >= xi ? (int64_t)(yo - xi) : -(int64_t)(xi - yo);
            if (pe_stripe_overlap_bound(net, &G, stripe_w, &most) != PE_OK || delta > most) {
                return PE_ERR_ARG;
            }
        }
    }
    block_w = min32(block_w, PE_STRIPE_MAX_BLOCK);
    status = pe_stripe_layout_split(net, &G, stripe_w, block_w, streamed, NULL, NULL, NULL, NULL, &total, NULL,
                                    lines != NULL ? &ltotal : NULL, NULL, NULL);
    if (status != PE_OK) {
        return status;
    }
    if (ctx->buf == NULL || (int64_t)ctx->size < total) {
        return PE_ERR_SCRATCH;
    }
    if (lines != NULL) {
        const uintptr_t a0 = (uintptr_t)ctx->buf, a1 = a0 + (uintptr_t)ctx->size;
        const uintptr_t b0 = (uintptr_t)lines->buf, b1 = b0 + (uintptr_t)lines->size;
        if (lines->buf == NULL || (int64_t)lines->size < ltotal) {
            return PE_ERR_SCRATCH;
        }
        if (a0 < b1 && b0 < a1) {
            return PE_ERR_ARG; /* the two blocks overlap */
        }
    }
    status = pe_stripe_layout_split(net, &G, stripe_w, block_w, streamed, (int8_t *)ctx->buf, &st,
                                    &rowbuf, &outrow, &total, lines != NULL ? (int8_t *)lines->buf : NULL,
                                    lines != NULL ? &ltotal : NULL, &R.work, &R.taps);
    if (status != PE_OK) {
        return status;
    }
    /* producer -> add lists, and the input pseudo-state */
    for (L = -1; L < G.n; L++) {
        st[L + 1].listener = -1;
        st[L + 1].next_listener = -1;
        st[L + 1].hw_ring = st[L + 1].hw_temp = st[L + 1].hw_branch = 0;
    }
    st[0].ring = st[0].temp = st[0].branch = NULL;
    st[0].temp_cols = 0;
    for (L = G.n - 1; L >= 0; L--) {
        if (is_branch_op(net->layers[L].op)) {
            stripe_state *p = &st[net->layers[L].add.from_layer + 1];
            st[L + 1].next_listener = p->listener;
            p->listener = L;
        }
    }

    R.net = net;
    R.G = &G;
    R.st = st;
    R.block_w = block_w;
    /* waiting for whole blocks where the row loops run (their set-up is per
     * call), in networks of several layers without residual branches (a branch's consumer
     * reads the rows its producers made in step) */
    R.lazy = R.work != NULL && G.n > 1;
    R.force = -1;
    for (L = 0; L < G.n; L++) {
        if (is_branch_op(net->layers[L].op)) {
            R.lazy = 0;
        }
    }
    R.input = rows != NULL ? NULL : input;
    R.rows = rows;
    R.rowbuf = rowbuf;
    R.row_hw = 0;
    R.output = output;
    R.sink = sink;
    R.outrow = outrow;
    R.macs = R.combines = R.reads = 0;
    R.err = PE_OK;
    for (x0 = 0; x0 < G.out_w && R.err == PE_OK; x0 += stripe_w) {
        const int32_t x1 = (int32_t)((int64_t)x0 + stripe_w < G.out_w ? x0 + stripe_w : G.out_w);
        run_stripe(&R, x0, x1);
        if ((int64_t)x0 + stripe_w >= G.out_w) {
            break;
        }
    }
    if (R.err != PE_OK) {
        return R.err;
    }
    if (ctx->stats != NULL) {
        pe_stats *s = ctx->stats;
        int64_t elems = 0;
        int64_t bytes;
        for (L = 0; L < G.n; L++) {
            elems += (int64_t)st[L + 1].hw_ring + st[L + 1].hw_temp + st[L + 1].hw_branch;
        }
        bytes = elems + R.row_hw + (sink != NULL ? (int64_t)G.out_w * G.out_c : 0) + ((int8_t *)st - (int8_t *)ctx->buf) +
                (int64_t)(G.n + 1) * (int64_t)sizeof(stripe_state);
        s->macs += R.macs;
        s->combines += R.combines;
        s->input_reads += R.reads;
        s->peak_bytes = bytes > s->peak_bytes ? bytes : s->peak_bytes;
        s->peak_elems = elems > s->peak_elems ? elems : s->peak_elems;
    }
    return PE_OK;
}

pe_status pe_stripe_run_s8(const pe_context *ctx, const pe_stripe_net *net, int32_t stripe_w,
                           int32_t block_w, const pe_dims *input_dims, const int8_t *input,
                           const pe_dims *output_dims, int8_t *output)
{
    if (input == NULL) {
        return PE_ERR_ARG;
    }
    return run_impl(ctx, net, stripe_w, block_w, input_dims, input, NULL, output_dims, output, NULL, NULL);
}

pe_status pe_stripe_run_rows_s8(const pe_context *ctx, const pe_stripe_net *net, int32_t stripe_w,
                                int32_t block_w, const pe_row_source *rows, const pe_dims *output_dims,
                                int8_t *output)
{
    if (rows == NULL || net == NULL) {
        return PE_ERR_ARG;
    }
    return run_impl(ctx, net, stripe_w, block_w, &net->input, NULL, rows, output_dims, output, NULL, NULL);
}

pe_status pe_stripe_run_io_s8(const pe_context *ctx, const pe_stripe_net *net, int32_t stripe_w,
                              int32_t block_w, const pe_dims *input_dims, const int8_t *input,
                              const pe_row_source *rows, const pe_dims *output_dims, int8_t *output,
                              const pe_row_sink *sink)
{
    if (net == NULL) {
        return PE_ERR_ARG;
    }
    return run_impl(ctx, net, stripe_w, block_w, rows != NULL && input_dims == NULL ? &net->input : input_dims,
                    input, rows, output_dims, output, sink, NULL);
}

pe_status pe_stripe_run_split_s8(const pe_context *ctx, const pe_context *lines, const pe_stripe_net *net,
                                 int32_t stripe_w, int32_t block_w, const pe_dims *input_dims, const int8_t *input,
                                 const pe_row_source *rows, const pe_dims *output_dims, int8_t *output,
                                 const pe_row_sink *sink)
{
    if (net == NULL || lines == NULL) {
        return PE_ERR_ARG;
    }
    return run_impl(ctx, net, stripe_w, block_w, rows != NULL && input_dims == NULL ? &net->input : input_dims,
                    input, rows, output_dims, output, sink, lines);
}
