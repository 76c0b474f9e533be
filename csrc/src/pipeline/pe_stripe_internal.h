/*
 * pe_stripe_internal.h - private to csrc/src/pipeline/: what the stripe
 * executor (pe_stripe.c) takes from its planner (pe_stripe_plan.c). The
 * geometry and arena types, the small rules both sides apply (inline: the
 * executor calls them per row), and the planner's network analysis, stripe
 * column ranges and arena layout. Not a public header.
 */
#ifndef PE_STRIPE_INTERNAL_H
#define PE_STRIPE_INTERNAL_H

#include <stdint.h>

#include "pyembed/pe_conv_gather.h"
#include "pyembed/pe_stripe.h"

/* ------------------------------------------------------------------------ */
/* Geometry                                                                 */

/* The fields bounded by PE_STRIPE_MAX_KERNEL (window, padding, dilation)
 * or PE_STRIPE_MAX_FACTOR (fh, fw) are int16_t: the executor keeps one
 * layer_geo per layer in its arena (20 bytes a layer less); they promote
 * to int in every expression, so the arithmetic is the same. */
typedef struct {
    int32_t in_h, in_w, in_c, out_h, out_w, out_c;
    int32_t sh, sw;
    int32_t groups;       /* conv: channel groups (1 = an ordinary convolution) */
    int32_t ring_rows;    /* line store rows */
    int32_t branch_rows;  /* add: rows kept of the branch input */
    int16_t kh, kw;       /* the window's extent (k - 1) * d + 1, <= PE_STRIPE_MAX_KERNEL */
    int16_t pt, pb, pl, pr; /* padding, < the window */
    int16_t dh, dw;       /* dilation: taps at multiples of dh, dw inside the window */
    int16_t fh, fw;       /* expanding layers: output rows (columns) per input row (column); 1 otherwise */
} layer_geo;

/* Everything derived from a network; ranges a[i], b[i] are the output column
 * range of producer i - 1 in the current stripe (i = 0: the network input).
 * g, a and b point at storage for the network's layers: g[n], a[n + 1],
 * b[n + 1]. The executor keeps them at the front of its arena
 * (pe_stripe_geo_bind), sized to the region's layer count, so an invoke's
 * stack holds no geometry; the size queries, which run at plan time, bind
 * a net_geo_full of their own. */
typedef struct {
    int32_t n;
    int32_t out_h, out_w, out_c;
    layer_geo *g;
    int32_t *a;
    int32_t *b;
} net_geo;

/* Storage for any network's geometry (PE_STRIPE_MAX_LAYERS layers), for the
 * plan-time queries. */
typedef struct {
    net_geo G;
    layer_geo g[PE_STRIPE_MAX_LAYERS];
    int32_t a[PE_STRIPE_MAX_LAYERS + 1];
    int32_t b[PE_STRIPE_MAX_LAYERS + 1];
} net_geo_full;

static inline net_geo *net_geo_full_bind(net_geo_full *f)
{
    f->G.g = f->g;
    f->G.a = f->a;
    f->G.b = f->b;
    return &f->G;
}

static inline int32_t min32(int32_t x, int32_t y) { return x < y ? x : y; }
static inline int32_t max32(int32_t x, int32_t y) { return x > y ? x : y; }

static inline int is_windowed(pe_stripe_op op)
{
    return op == PE_STRIPE_CONV || op == PE_STRIPE_DEPTHWISE || op == PE_STRIPE_POOL ||
           op == PE_STRIPE_SPACE_TO_DEPTH;
}

/* A layer emitting fh whole output rows per input row from its one stored
 * input row, output pixel (y, x) reading input pixel (y / fh, x / fw):
 * nearest-neighbour upsampling, depth to space. */
static inline int is_expand(pe_stripe_op op)
{
    return op == PE_STRIPE_UPSAMPLE2X || op == PE_STRIPE_UPSAMPLE || op == PE_STRIPE_DEPTH_TO_SPACE;
}

/* A layer reading an earlier layer's output through a branch store (row
 * delay line): residual add, channel concatenation. */
static inline int is_branch_op(pe_stripe_op op)
{
    return op == PE_STRIPE_ADD || op == PE_STRIPE_CONCAT;
}

/* A bilinear layer (PE_STRIPE_RESIZE_BILINEAR) keeps in its geometry: fh,
 * fw the factors, sh, sw TFLite's source scales with 10 fraction bits, kh =
 * kw = 2 (two taps a direction), ring_rows 2, and groups -1 (source index
 * i * scale) or -2 (half-pixel centres: i * scale + scale / 2 - 512); no
 * other layer has groups below 1. */
static inline int geo_bilinear(const layer_geo *g)
{
    return g->groups < 0;
}

/* Source position v (10 fraction bits) of output index i of a bilinear axis
 * and its two input taps lo <= hi (clipped to [0, in - 1]). */
static inline void bilinear_taps(int32_t i, int32_t scale, int half, int32_t in, int32_t *v,
                                 int32_t *lo, int32_t *hi)
{
    const int32_t s = half ? i * scale + scale / 2 - 512 : i * scale;
    const int32_t l = s / 1024;            /* toward zero: s >= -512 gives 0 */
    const int32_t h = (s + 1023) / 1024;
    *v = s;
    *lo = l > 0 ? l : 0;
    *hi = h < in - 1 ? h : in - 1;
}

/* Last input row output row o reads (inclusive, clipped to the image). */
static inline int32_t last_needed_row(const layer_geo *g, int32_t o)
{
    if (geo_bilinear(g)) {
        int32_t v, lo, hi;
        bilinear_taps(o, g->sh, g->groups == -2, g->in_h, &v, &lo, &hi);
        return hi;
    }
    const int64_t last = (int64_t)o * g->sh - g->pt + g->kh - 1;
    return last < (int64_t)g->in_h - 1 ? (int32_t)last : g->in_h - 1;
}

/* The convolution row loops (pe_stripe.c conv_rows, on the Arm DSP
 * extension): a conv / pointwise layer of one group, no column dilation and
 * a multiple of 4 input channels computes up to PE_STRIPE_CONV_COLS output
 * columns per pass, four output channels at a time, with that block's
 * weights of one kernel row widened to int16 once into the region's work
 * block (the pointwise block loop of pe_conv_dsp_pw.c). */
#define PE_STRIPE_CONV_COLS 32
/* columns per pass of the patch loops (conv_patch_apply): their patches are
 * in the work block too */
#define PE_STRIPE_PATCH_COLS 16
/* ... in blocks of at least this many columns (the planner's wide blocks,
 * pyembed.passes.pipeline WIDE_BLOCK; its default block widths are
 * narrower): a narrower block width reserves no work block and runs the
 * per-pixel loops */
#define PE_STRIPE_CONV_MIN_COLS 32
/* (a call with fewer columns than this, the end of a row, a layer's lag
 * behind a strided producer, takes the per-pixel loops) */
#define PE_STRIPE_CONV_MIN_CALL 4

static inline int conv_rows_apply(const pe_stripe_layer *l, const layer_geo *g)
{
    return (l->op == PE_STRIPE_CONV || l->op == PE_STRIPE_POINTWISE) && g->groups == 1 &&
           g->dw == 1 && (g->in_c & 3) == 0;
}

/* Bytes of a conv layer's window patch: its taps' input bytes (with
 * dilation only the taps) rounded up to 4 */
static inline int32_t conv_patch_len(const layer_geo *g)
{
    const int64_t taps = (int64_t)((g->kh - 1) / g->dh + 1) * ((g->kw - 1) / g->dw + 1);
    return (int32_t)((taps * g->in_c + 3) & ~(int64_t)3);
}

/* the longest patch the patch loops take (PE_STRIPE_PATCH_COLS of them in the work block) */
#define PE_STRIPE_PATCH_MAX 1024

/* The conv layers the row loops cannot read in place (in_c not a multiple of
 * 4, a dilated row: a 3-channel image's first layer) run on window patches:
 * each column's window copied into one patch (padding as the input zero
 * point), then the same block loop over the patches */
static inline int conv_patch_apply(const pe_stripe_layer *l, const layer_geo *g)
{
    return (l->op == PE_STRIPE_CONV || l->op == PE_STRIPE_POINTWISE) && g->groups == 1 &&
           !conv_rows_apply(l, g) && conv_patch_len(g) <= PE_STRIPE_PATCH_MAX;
}

/* The depthwise row loops (pe_stripe.c dw_rows, on the Arm DSP extension,
 * in blocks of at least PE_STRIPE_CONV_MIN_COLS columns): channel
 * multiplier 1, at least 4 channels, a kernel of at most PE_DW_ROW_TAPS
 * taps (pe_conv_gather.h). No work block: the loop's table is on the
 * stack. */
static inline int dw_rows_apply(const pe_stripe_layer *l, const layer_geo *g)
{
    return l->op == PE_STRIPE_DEPTHWISE && g->out_c == g->in_c && g->in_c >= 4 &&
           ((g->kh - 1) / g->dh + 1) * ((g->kw - 1) / g->dw + 1) <= PE_DW_ROW_TAPS;
}

/* A conv of one input channel (a depthwise with a channel multiplier over
 * a one-channel image, as the chain maps it) takes the depthwise row loops
 * too (pe_stripe.c conv1_run: multiplier out_c): out_c a multiple of 4, an
 * undilated row, at most PE_DW_ROW_TAPS taps. Its work block is the patch
 * loops' (conv_patch_apply), which holds the depthwise table and tap
 * offsets (the check below; the filters are read in place). */
static inline int conv1_rows_apply(const pe_stripe_layer *l, const layer_geo *g)
{
    return l->op == PE_STRIPE_CONV && g->groups == 1 && g->in_c == 1 && (g->out_c & 3) == 0 && g->dw == 1 &&
           ((g->kh - 1) / g->dh + 1) * g->kw <= PE_DW_ROW_TAPS && conv_patch_apply(l, g);
}
/* runs of the depthwise row loops computed together (pe_stripe.c dw_flush:
 * each group's set-up serves them all), each with its tap offsets in the
 * work block */
#define PE_DW_RUNS 2
/* the depthwise row loops' work block: the table, the runs' tap offsets */
#define PE_DW_WORK_BYTES (4 * (PE_DW_ROW_TAB_WORDS + PE_DW_RUNS * PE_DW_ROW_TAPS))
typedef char pe_stripe_conv1_work_fits[PE_DW_WORK_BYTES + 4 * PE_DW_ROW_TAPS <=
                                               (8 + PE_STRIPE_PATCH_COLS) * 4 + 16 * PE_STRIPE_PATCH_COLS
                                           ? 1
                                           : -1];

/* Columns of a layer's row temporary repeated past its end (its first
 * kw - 1 slots, written again by the executor as they arrive): with the conv
 * row loops (and the patch loops' undilated rows, the depthwise row loops) a
 * window row is read from the temporary in one piece */
static inline int32_t temp_mirror(const pe_stripe_layer *l, const layer_geo *g, int32_t block_w)
{
    return block_w >= PE_STRIPE_CONV_MIN_COLS &&
                   (conv_rows_apply(l, g) || dw_rows_apply(l, g) || (conv_patch_apply(l, g) && g->dw == 1))
               ? g->kw - 1
               : 0;
}

/* ------------------------------------------------------------------------ */
/* Arena layout                                                             */

/* Every block of the arena starts at a multiple of this */
#define PE_STRIPE_ALIGN 8

typedef struct {
    int32_t in_a, in_b, out_a, out_b; /* column ranges in the current stripe */
    int32_t in_row;                    /* input row being received */
    int32_t arrived;                   /* its columns [in_a, arrived) are written */
    int32_t committed;                 /* ... and [in_a, committed) are in the ring */
    int32_t triggering;                /* this input row completes an output row */
    int32_t next_out;                  /* next output row to start */
    int32_t prod_row;                  /* output row being (or last) produced */
    int32_t prod_done;                 /* its columns [out_a, prod_done) are done */
    int32_t rows_done;                 /* output rows completed in this stripe */
    int32_t listener;                  /* first add whose branch is this output, or -1 */
    int32_t next_listener;             /* add: next add with the same branch, or -1 */
    int8_t *ring;
    int8_t *temp;
    int8_t *branch;
    int32_t ring_w, temp_cols;         /* ring row capacity (columns), temp columns */
    int32_t branch_w;
    int32_t hw_ring, hw_temp, hw_branch; /* high-water marks, bytes */
} stripe_state;

/* The planner (pe_stripe_plan.c) */

/* Bytes of a network of n layers' geometry in the arena (layer_geo[n],
 * a[n + 1], b[n + 1]), a multiple of PE_STRIPE_ALIGN; when base != NULL
 * (PE_STRIPE_ALIGN-aligned) also points G's tables there. n in
 * [1, PE_STRIPE_MAX_LAYERS]. pe_stripe_layout_split counts these bytes at
 * the front of the arena. */
int64_t pe_stripe_geo_bind(net_geo *G, int32_t n, int8_t *base);

/* The tap tables compute_windowed fills per output pixel, sized to the
 * network: taps entries of each kind, roff rows entries */
typedef struct {
    const int8_t **tap;
    int32_t *woff;
    uint8_t *rlen;
    int32_t *roff;
} stripe_taps;

/* Validates the network and fills G (geometry, line store and branch rows). */
pe_status pe_stripe_analyse(const pe_stripe_net *net, net_geo *G);

/* G->a / G->b: the column range of every producer's output that output
 * columns [x0, x1) of the last layer need (clipped to the images). */
void pe_stripe_ranges(const pe_stripe_net *net, net_geo *G, int32_t x0, int32_t x1);

/* The work block of the conv row loops: 8 bytes per weight byte of one
 * kernel row (four output channels widened) of the widest layer they run,
 * and their PE_STRIPE_CONV_COLS x 4 accumulators (the patch loops: the
 * widened filter, PE_STRIPE_PATCH_COLS patches and as many columns'
 * accumulators); 0 when no layer takes them
 * or block_w < PE_STRIPE_CONV_MIN_COLS. Every build reserves it, so a host
 * plans a Cortex-M region's bytes. */
int64_t pe_stripe_work_bytes(const pe_stripe_net *net, const net_geo *G, int32_t block_w);

/* Total arena bytes; when base != NULL also carves the buffers into *states
 * (streamed, a PE_STRIPE_STREAM_IN / _OUT mask: the row buffer of a streamed
 * input into *rowbuf, of a streamed output into *outrow). The arena, from
 * its first PE_STRIPE_ALIGN-aligned byte: the geometry
 * (pe_stripe_geo_bind; the caller binds G there before analysing), the
 * layer states, the conv row loops' work block, the tap tables, then each
 * layer's buffers and the row buffers. */
pe_status pe_stripe_layout(const pe_stripe_net *net, net_geo *G, int32_t stripe_w, int32_t block_w,
                           int streamed, int8_t *base, stripe_state **states, int8_t **rowbuf,
                           int8_t **outrow, int64_t *total);

/* pe_stripe_layout with the line stores and delay lines (every ring and
 * branch store) in a block of their own: *lines_total gets its bytes (with
 * alignment slack) and, when base != NULL, lines_base holds them; *total
 * then counts the rest (states, row temporaries, row buffers). lines_total
 * NULL: pe_stripe_layout. work, taps (when not NULL and base != NULL) get the
 * work block (NULL when it has no bytes) and the tap tables. */
pe_status pe_stripe_layout_split(const pe_stripe_net *net, net_geo *G, int32_t stripe_w, int32_t block_w,
                                 int streamed, int8_t *base, stripe_state **states, int8_t **rowbuf,
                                 int8_t **outrow, int64_t *total, int8_t *lines_base, int64_t *lines_total,
                                 uint32_t **work, stripe_taps *taps);

/* pe_stripe_max_overlap_delta for an analysed network. */
pe_status pe_stripe_overlap_bound(const pe_stripe_net *net, const net_geo *G, int32_t stripe_w,
                                  int64_t *max_delta);

#endif /* PE_STRIPE_INTERNAL_H */
