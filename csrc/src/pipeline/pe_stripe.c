/*
 * pe_stripe.c - stripe executor with line buffers (see pe_stripe.h).
 *
 * The executor is push-driven. The network input is fed one row at a time,
 * block by block. A layer told that columns of its current input row arrived
 * computes every output column it now can, block_w at a time, and after each
 * block tells the next layer (deliver -> advance, one recursion level per
 * layer: depth-first). When its input row is complete, a layer moves the
 * row into its ring and emits the further output rows that row completes
 * (the bottom rows of the image, the second row of an upsampling), now
 * entirely from the ring. Which input row completes which output row is the
 * same rule everywhere (last_needed_row); the arena query runs that rule dry
 * over the image height to size each residual branch's row store.
 */
#include "pyembed/pe_stripe.h"

#include <string.h>

#include "pyembed/pe_fixed.h"
#include "pyembed/pe_simd.h"

/* ------------------------------------------------------------------------ */
/* Geometry                                                                 */

typedef struct {
    int32_t in_h, in_w, in_c, out_h, out_w, out_c;
    int32_t kh, kw, sh, sw, pt, pb, pl, pr;
    int32_t ring_rows;    /* line store rows */
    int32_t branch_rows;  /* add: rows kept of the branch input */
} layer_geo;

/* Everything derived from a network; ranges a[i], b[i] are the output column
 * range of producer i - 1 in the current stripe (i = 0: the network input). */
typedef struct {
    int32_t n;
    int32_t out_h, out_w, out_c;
    layer_geo g[PE_STRIPE_MAX_LAYERS];
    int32_t a[PE_STRIPE_MAX_LAYERS + 1];
    int32_t b[PE_STRIPE_MAX_LAYERS + 1];
} net_geo;

static int32_t min32(int32_t x, int32_t y) { return x < y ? x : y; }
static int32_t max32(int32_t x, int32_t y) { return x > y ? x : y; }

/* floor(x / d) for d > 0 */
static int64_t floordiv64(int64_t x, int64_t d)
{
    int64_t q = x / d;
    if ((x % d) != 0 && x < 0) {
        q -= 1;
    }
    return q;
}

static int is_windowed(pe_stripe_op op)
{
    return op == PE_STRIPE_CONV || op == PE_STRIPE_DEPTHWISE || op == PE_STRIPE_POOL;
}

/* A layer reading an earlier layer's output through a branch store (row
 * delay line): residual add, channel concatenation. */
static int is_branch_op(pe_stripe_op op)
{
    return op == PE_STRIPE_ADD || op == PE_STRIPE_CONCAT;
}

/* Channels of the branch store of layer l (the earlier layer's channels). */
static int32_t branch_channels(const pe_stripe_layer *l)
{
    return l->op == PE_STRIPE_CONCAT ? l->out_c - l->in_c : l->out_c;
}

static int is_conv_family(pe_stripe_op op)
{
    return op == PE_STRIPE_CONV || op == PE_STRIPE_DEPTHWISE || op == PE_STRIPE_POINTWISE;
}

/* Last input row output row o reads (inclusive, clipped to the image). */
static int32_t last_needed_row(const layer_geo *g, int32_t o)
{
    const int64_t last = (int64_t)o * g->sh - g->pt + g->kh - 1;
    return last < (int64_t)g->in_h - 1 ? (int32_t)last : g->in_h - 1;
}

/* Input interval [*ia, *ib) (64-bit, unclipped when clip == 0) that output
 * interval [a, b) needs, along columns (axis 1) or rows (axis 0). */
static void need_input(const pe_stripe_layer *l, const layer_geo *g, int axis, int clip,
                       int64_t a, int64_t b, int64_t *ia, int64_t *ib)
{
    const int64_t k = axis ? g->kw : g->kh;
    const int64_t s = axis ? g->sw : g->sh;
    const int64_t p = axis ? g->pl : g->pt;
    const int64_t d = axis ? g->in_w : g->in_h;
    if (l->op == PE_STRIPE_UPSAMPLE2X) {
        *ia = floordiv64(a, 2);
        *ib = floordiv64(b - 1, 2) + 1;
    } else if (is_windowed(l->op)) {
        *ia = a * s - p;
        *ib = (b - 1) * s - p + k;
    } else {
        *ia = a;
        *ib = b;
    }
    if (clip) {
        *ia = *ia < 0 ? 0 : *ia;
        *ib = *ib > d ? d : *ib;
    }
}

static void hull64(int64_t *a, int64_t *b, int64_t na, int64_t nb)
{
    if (nb <= na) {
        return;
    }
    if (*b <= *a) {
        *a = na;
        *b = nb;
        return;
    }
    *a = na < *a ? na : *a;
    *b = nb > *b ? nb : *b;
}

/* Backward pass: the interval of every producer's output that output
 * interval [x0, x1) of the last layer needs (hull over consumers). */
static void backward_ranges(const pe_stripe_net *net, const net_geo *G, int axis, int clip,
                            int64_t x0, int64_t x1, int64_t *ra, int64_t *rb)
{
    int32_t i;
    int32_t L;
    for (i = 0; i <= G->n; i++) {
        ra[i] = 0;
        rb[i] = 0;
    }
    ra[G->n] = x0;
    rb[G->n] = x1;
    for (L = G->n - 1; L >= 0; L--) {
        const pe_stripe_layer *l = &net->layers[L];
        int64_t ia;
        int64_t ib;
        need_input(l, &G->g[L], axis, clip, ra[L + 1], rb[L + 1], &ia, &ib);
        hull64(&ra[L], &rb[L], ia, ib);
        if (is_branch_op(l->op)) {
            const int32_t p = l->add.from_layer + 1;
            hull64(&ra[p], &rb[p], ra[L + 1], rb[L + 1]);
        }
    }
}

static void stripe_ranges(const pe_stripe_net *net, net_geo *G, int32_t x0, int32_t x1)
{
    int64_t ra[PE_STRIPE_MAX_LAYERS + 1];
    int64_t rb[PE_STRIPE_MAX_LAYERS + 1];
    int32_t i;
    backward_ranges(net, G, 1, 1, x0, x1, ra, rb);
    for (i = 0; i <= G->n; i++) {
        G->a[i] = (int32_t)ra[i];
        G->b[i] = (int32_t)rb[i];
    }
}

static int act_ok(const pe_activation *a)
{
    return a->min >= -128 && a->max <= 127 && a->min <= a->max;
}

static int quant_ok(int32_t m, int32_t s)
{
    return m >= 0 && s >= -31 && s <= 30;
}

static pe_status check_layer_params(const pe_stripe_layer *l, int32_t L)
{
    int32_t o;
    if (l->op != PE_STRIPE_UPSAMPLE2X && !act_ok(&l->activation)) {
        return PE_ERR_ARG;
    }
    if (l->rounding != PE_ROUND_DOUBLE && l->rounding != PE_ROUND_SINGLE) {
        return PE_ERR_ARG;
    }
    if (is_conv_family(l->op)) {
        if (l->weights == NULL || l->quant.multiplier == NULL || l->quant.shift == NULL) {
            return PE_ERR_ARG;
        }
        if (l->input_offset < -127 || l->input_offset > 128 || l->output_offset < -128 ||
            l->output_offset > 127) {
            return PE_ERR_ARG;
        }
        for (o = 0; o < l->out_c; o++) {
            if (!quant_ok(l->quant.multiplier[o], l->quant.shift[o])) {
                return PE_ERR_ARG;
            }
        }
    }
    if (l->op == PE_STRIPE_CONCAT) {
        if (l->add.from_layer < -1 || l->add.from_layer >= L || l->add.left_shift < 0 ||
            l->add.left_shift > 1) {
            return PE_ERR_ARG;
        }
    }
    if (l->op == PE_STRIPE_ADD) {
        const pe_stripe_add_params *p = &l->add;
        if (p->from_layer < -1 || p->from_layer >= L) {
            return PE_ERR_ARG;
        }
        if (p->left_shift < 0 || p->left_shift > 22 || p->main_offset < -127 ||
            p->main_offset > 128 || p->branch_offset < -127 || p->branch_offset > 128 ||
            l->output_offset < -128 || l->output_offset > 127) {
            return PE_ERR_ARG;
        }
        if (!quant_ok(p->main_quant.multiplier, p->main_quant.shift) ||
            !quant_ok(p->branch_quant.multiplier, p->branch_quant.shift) ||
            !quant_ok(p->out_quant.multiplier, p->out_quant.shift)) {
            return PE_ERR_ARG;
        }
    }
    if (l->op == PE_STRIPE_POOL && l->pool_kind != PE_POOL_MAX && l->pool_kind != PE_POOL_AVG) {
        return PE_ERR_ARG;
    }
    return PE_OK;
}

/* The int32 accumulator of a conv-family layer cannot overflow: taps * 128 *
 * 255 + |bias| <= INT32_MAX for every output channel (the bound pe_conv.h
 * states for the reverse kernels). Called once the kernel size is checked. */
static int accumulator_fits(const pe_stripe_layer *l)
{
    int64_t taps;
    int32_t o;
    if (l->op == PE_STRIPE_POINTWISE) {
        taps = l->in_c;
    } else if (l->op == PE_STRIPE_DEPTHWISE) {
        taps = (int64_t)l->kernel.h * l->kernel.w;
    } else {
        taps = (int64_t)l->kernel.h * l->kernel.w * l->in_c;
    }
    for (o = 0; o < l->out_c; o++) {
        const int64_t b = l->bias != NULL ? (int64_t)l->bias[o] : 0;
        if (taps * 128 * 255 + (b < 0 ? -b : b) > (int64_t)PE_INT32_MAX) {
            return 0;
        }
    }
    return 1;
}

/* Dry run of the row schedule (no arithmetic): sizes the branch stores and
 * checks that every branch row exists before its add reads it. */
typedef struct {
    const pe_stripe_net *net;
    net_geo *G;
    int32_t next_out[PE_STRIPE_MAX_LAYERS];
    int32_t cur[PE_STRIPE_MAX_LAYERS + 1]; /* row each producer started last */
    pe_status err;
} dry_run;

static void dry_input_row(dry_run *d, int32_t L, int32_t r);

static void dry_emit(dry_run *d, int32_t L, int32_t o)
{
    const pe_stripe_layer *l = &d->net->layers[L];
    d->cur[L + 1] = o;
    if (is_branch_op(l->op)) {
        const int32_t p = l->add.from_layer + 1;
        if (d->cur[p] < o) {
            d->err = PE_ERR_UNSUPPORTED;
            return;
        }
        d->G->g[L].branch_rows = max32(d->G->g[L].branch_rows, d->cur[p] - o + 1);
    }
    dry_input_row(d, L + 1, o);
}

static void dry_input_row(dry_run *d, int32_t L, int32_t r)
{
    const layer_geo *g;
    if (L >= d->G->n || d->err != PE_OK) {
        return;
    }
    g = &d->G->g[L];
    if (d->net->layers[L].op == PE_STRIPE_UPSAMPLE2X) {
        dry_emit(d, L, 2 * r);
        dry_emit(d, L, 2 * r + 1);
        return;
    }
    while (d->err == PE_OK && d->next_out[L] < g->out_h &&
           last_needed_row(g, d->next_out[L]) <= r) {
        const int32_t o = d->next_out[L]++;
        dry_emit(d, L, o);
    }
}

/* Validates the network and fills G (geometry, line store and branch rows). */
static pe_status analyse(const pe_stripe_net *net, net_geo *G)
{
    int32_t h, w, c, L, r;
    pe_status st;
    dry_run d;
    int64_t ra[PE_STRIPE_MAX_LAYERS + 1];
    int64_t rb[PE_STRIPE_MAX_LAYERS + 1];

    if (net == NULL || net->layers == NULL || G == NULL) {
        return PE_ERR_ARG;
    }
    if (net->n_layers < 1 || net->n_layers > PE_STRIPE_MAX_LAYERS) {
        return PE_ERR_ARG;
    }
    if (net->input.n != 1 || net->input.h < 1 || net->input.w < 1 || net->input.c < 1) {
        return PE_ERR_ARG;
    }
    G->n = net->n_layers;
    h = net->input.h;
    w = net->input.w;
    c = net->input.c;
    for (L = 0; L < G->n; L++) {
        const pe_stripe_layer *l = &net->layers[L];
        layer_geo *g = &G->g[L];
        if (l->in_c != c || l->out_c < 1) {
            return PE_ERR_ARG;
        }
        st = check_layer_params(l, L);
        if (st != PE_OK) {
            return st;
        }
        g->in_h = h;
        g->in_w = w;
        g->in_c = c;
        g->out_c = l->out_c;
        g->kh = g->kw = g->sh = g->sw = 1;
        g->pt = g->pb = g->pl = g->pr = 0;
        g->branch_rows = 0;
        g->ring_rows = 0;
        switch (l->op) {
        case PE_STRIPE_CONV:
        case PE_STRIPE_DEPTHWISE:
        case PE_STRIPE_POOL: {
            int64_t oh, ow;
            if (l->kernel.h < 1 || l->kernel.w < 1 || l->stride.h < 1 || l->stride.w < 1) {
                return PE_ERR_ARG;
            }
            if (l->kernel.h > PE_STRIPE_MAX_KERNEL || l->kernel.w > PE_STRIPE_MAX_KERNEL ||
                l->kernel.h * l->kernel.w > PE_STRIPE_MAX_TAPS) {
                return PE_ERR_UNSUPPORTED;
            }
            if (l->padding.top < 0 || l->padding.top >= l->kernel.h || l->padding.bottom < 0 ||
                l->padding.bottom >= l->kernel.h || l->padding.left < 0 ||
                l->padding.left >= l->kernel.w || l->padding.right < 0 ||
                l->padding.right >= l->kernel.w) {
                return PE_ERR_ARG;
            }
            if (l->op == PE_STRIPE_DEPTHWISE && (l->out_c % l->in_c) != 0) {
                return PE_ERR_ARG;
            }
            if (l->op == PE_STRIPE_POOL && l->out_c != l->in_c) {
                return PE_ERR_ARG;
            }
            g->kh = l->kernel.h;
            g->kw = l->kernel.w;
            g->sh = l->stride.h;
            g->sw = l->stride.w;
            g->pt = l->padding.top;
            g->pb = l->padding.bottom;
            g->pl = l->padding.left;
            g->pr = l->padding.right;
            oh = (int64_t)h + g->pt + g->pb - g->kh;
            ow = (int64_t)w + g->pl + g->pr - g->kw;
            if (oh < 0 || ow < 0) {
                return PE_ERR_ARG; /* window larger than the padded input */
            }
            g->out_h = (int32_t)(oh / g->sh + 1);
            g->out_w = (int32_t)(ow / g->sw + 1);
            g->ring_rows = g->kh - 1;
            break;
        }
        case PE_STRIPE_POINTWISE:
            g->out_h = h;
            g->out_w = w;
            break;
        case PE_STRIPE_ADD: {
            const int32_t p = l->add.from_layer;
            const int32_t ph = p < 0 ? net->input.h : G->g[p].out_h;
            const int32_t pw = p < 0 ? net->input.w : G->g[p].out_w;
            const int32_t pc = p < 0 ? net->input.c : G->g[p].out_c;
            if (l->out_c != c || ph != h || pw != w || pc != c) {
                return PE_ERR_ARG;
            }
            g->out_h = h;
            g->out_w = w;
            break;
        }
        case PE_STRIPE_CONCAT: {
            const int32_t p = l->add.from_layer;
            const int32_t ph = p < 0 ? net->input.h : G->g[p].out_h;
            const int32_t pw = p < 0 ? net->input.w : G->g[p].out_w;
            const int32_t pc = p < 0 ? net->input.c : G->g[p].out_c;
            if ((int64_t)l->out_c != (int64_t)c + pc || ph != h || pw != w) {
                return PE_ERR_ARG;
            }
            g->out_h = h;
            g->out_w = w;
            break;
        }
        case PE_STRIPE_UPSAMPLE2X:
            if (l->out_c != c) {
                return PE_ERR_ARG;
            }
            if (h > PE_INT32_MAX / 2 || w > PE_INT32_MAX / 2) {
                return PE_ERR_OVERFLOW;
            }
            g->out_h = 2 * h;
            g->out_w = 2 * w;
            g->ring_rows = 1;
            break;
        default:
            return PE_ERR_ARG;
        }
        if (is_conv_family(l->op) && !accumulator_fits(l)) {
            return PE_ERR_UNSUPPORTED;
        }
        if ((int64_t)g->out_h * g->out_w * g->out_c > (int64_t)PE_INT32_MAX) {
            return PE_ERR_OVERFLOW;
        }
        h = g->out_h;
        w = g->out_w;
        c = g->out_c;
    }
    G->out_h = h;
    G->out_w = w;
    G->out_c = c;
    if ((int64_t)net->input.h * net->input.w * net->input.c > (int64_t)PE_INT32_MAX) {
        return PE_ERR_OVERFLOW;
    }

    /* Receptive field of one output pixel (padding positions included) must
     * fit inside the input image, in both directions. */
    backward_ranges(net, G, 1, 0, G->out_w / 2, G->out_w / 2 + 1, ra, rb);
    if (rb[0] - ra[0] > net->input.w) {
        return PE_ERR_ARG;
    }
    backward_ranges(net, G, 0, 0, G->out_h / 2, G->out_h / 2 + 1, ra, rb);
    if (rb[0] - ra[0] > net->input.h) {
        return PE_ERR_ARG;
    }

    /* Row schedule dry run. */
    d.net = net;
    d.G = G;
    d.err = PE_OK;
    for (L = 0; L <= G->n; L++) {
        d.cur[L] = -1;
        if (L < G->n) {
            d.next_out[L] = 0;
        }
    }
    for (r = 0; r < net->input.h && d.err == PE_OK; r++) {
        d.cur[0] = r;
        dry_input_row(&d, 0, r);
    }
    return d.err;
}

/* ------------------------------------------------------------------------ */
/* Arena layout                                                             */

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

#define PE_STRIPE_ALIGN 8

static int64_t align_up(int64_t v)
{
    return (v + (PE_STRIPE_ALIGN - 1)) & ~(int64_t)(PE_STRIPE_ALIGN - 1);
}

/* Maximum, over the stripes, of every layer's input range width and every
 * add's output range width. */
static void max_widths(const pe_stripe_net *net, net_geo *G, int32_t stripe_w, int32_t *in_w,
                       int32_t *add_w)
{
    int32_t L;
    int32_t x0;
    for (L = 0; L < G->n; L++) {
        in_w[L] = 0;
        add_w[L] = 0;
    }
    for (x0 = 0; x0 < G->out_w; x0 += stripe_w) {
        const int32_t x1 = (int32_t)((int64_t)x0 + stripe_w < G->out_w ? x0 + stripe_w : G->out_w);
        stripe_ranges(net, G, x0, x1);
        for (L = 0; L < G->n; L++) {
            in_w[L] = max32(in_w[L], G->b[L] - G->a[L]);
            if (is_branch_op(net->layers[L].op)) {
                add_w[L] = max32(add_w[L], G->b[L + 1] - G->a[L + 1]);
            }
        }
        if ((int64_t)x0 + stripe_w >= G->out_w) {
            break;
        }
    }
}

/* Bytes of each buffer of layer L. */
static void buffer_bytes(const pe_stripe_net *net, const net_geo *G, int32_t L, int32_t in_w,
                         int32_t add_w, int32_t block_w, int64_t *ring, int64_t *temp,
                         int64_t *branch, int32_t *temp_cols)
{
    const layer_geo *g = &G->g[L];
    *ring = (int64_t)g->ring_rows * in_w * g->in_c;
    /* an upsampling layer's input goes straight into its one-row store */
    *temp_cols = net->layers[L].op == PE_STRIPE_UPSAMPLE2X ? 0 : g->kw - 1 + block_w;
    *temp = (int64_t)*temp_cols * g->in_c;
    *branch = (int64_t)g->branch_rows * add_w * branch_channels(&net->layers[L]);
}

/* Total arena bytes; when base != NULL also carves the buffers into st. */
/* streamed: also a buffer for one input row range (the row source writes
 * into it), returned in *rowbuf when base != NULL. */
static pe_status layout(const pe_stripe_net *net, net_geo *G, int32_t stripe_w, int32_t block_w,
                        int streamed, int8_t *base, stripe_state **states, int8_t **rowbuf,
                        int64_t *total)
{
    int32_t in_w[PE_STRIPE_MAX_LAYERS];
    int32_t add_w[PE_STRIPE_MAX_LAYERS];
    int64_t off;
    int32_t L;
    int8_t *aligned = NULL;
    stripe_state *st = NULL;

    max_widths(net, G, stripe_w, in_w, add_w);
    off = align_up((int64_t)(G->n + 1) * (int64_t)sizeof(stripe_state));
    if (base != NULL) {
        const uintptr_t p = (uintptr_t)base;
        aligned = base + ((PE_STRIPE_ALIGN - (p % PE_STRIPE_ALIGN)) % PE_STRIPE_ALIGN);
        st = (stripe_state *)(void *)aligned;
        *states = st;
    }
    for (L = 0; L < G->n; L++) {
        int64_t ring, temp, branch;
        int32_t temp_cols;
        buffer_bytes(net, G, L, in_w[L], add_w[L], block_w, &ring, &temp, &branch, &temp_cols);
        if (st != NULL) {
            stripe_state *s = &st[L + 1];
            s->ring = aligned + off;
            s->temp = aligned + off + ring;
            s->branch = aligned + off + ring + temp;
            s->ring_w = in_w[L];
            s->temp_cols = temp_cols;
            s->branch_w = add_w[L];
        }
        off += ring + temp + branch;
        if (off > (int64_t)PE_INT32_MAX) {
            return PE_ERR_OVERFLOW;
        }
    }
    if (streamed) {
        /* in_w[0]: the widest input column range of a stripe */
        off = align_up(off);
        if (base != NULL && rowbuf != NULL) {
            *rowbuf = aligned + off;
        }
        off += (int64_t)in_w[0] * net->input.c;
        if (off > (int64_t)PE_INT32_MAX) {
            return PE_ERR_OVERFLOW;
        }
    }
    off += PE_STRIPE_ALIGN - 1; /* slack for an unaligned caller buffer */
    if (off > (int64_t)PE_INT32_MAX) {
        return PE_ERR_OVERFLOW;
    }
    *total = off;
    return PE_OK;
}

pe_status pe_stripe_output_dims(const pe_stripe_net *net, pe_dims *output)
{
    net_geo G;
    pe_status st;
    if (output == NULL) {
        return PE_ERR_ARG;
    }
    st = analyse(net, &G);
    if (st != PE_OK) {
        return st;
    }
    output->n = 1;
    output->h = G.out_h;
    output->w = G.out_w;
    output->c = G.out_c;
    return PE_OK;
}

/* The geometry and total scratch bytes of a stripe width / block width
 * (block_w clamped to PE_STRIPE_MAX_BLOCK) */
static pe_status sized_layout(const pe_stripe_net *net, net_geo *G, int32_t stripe_w,
                              int32_t *block_w, int streamed, int64_t *total)
{
    pe_status st;
    if (stripe_w < 1 || *block_w < 1) {
        return PE_ERR_ARG;
    }
    st = analyse(net, G);
    if (st != PE_OK) {
        return st;
    }
    *block_w = min32(*block_w, PE_STRIPE_MAX_BLOCK);
    return layout(net, G, stripe_w, *block_w, streamed, NULL, NULL, NULL, total);
}

static pe_status buffer_size(const pe_stripe_net *net, int32_t stripe_w, int32_t block_w,
                             int streamed, int32_t *size)
{
    net_geo G;
    pe_status st;
    int64_t total;
    if (size == NULL) {
        return PE_ERR_ARG;
    }
    st = sized_layout(net, &G, stripe_w, &block_w, streamed, &total);
    if (st != PE_OK) {
        return st;
    }
    *size = (int32_t)total;
    return PE_OK;
}

pe_status pe_stripe_get_buffer_size_s8(const pe_stripe_net *net, int32_t stripe_w,
                                       int32_t block_w, int32_t *size)
{
    return buffer_size(net, stripe_w, block_w, 0, size);
}

pe_status pe_stripe_get_buffer_size_rows_s8(const pe_stripe_net *net, int32_t stripe_w,
                                            int32_t block_w, int32_t *size)
{
    return buffer_size(net, stripe_w, block_w, 1, size);
}

pe_status pe_stripe_buffer_breakdown(const pe_stripe_net *net, int32_t stripe_w, int32_t block_w,
                                     int streamed, int32_t *ring, int32_t *temp, int32_t *branch,
                                     int32_t *branch_rows, int32_t *fixed)
{
    net_geo G;
    pe_status st;
    int64_t total, parts = 0;
    int32_t in_w[PE_STRIPE_MAX_LAYERS];
    int32_t add_w[PE_STRIPE_MAX_LAYERS];
    int32_t L;
    if (ring == NULL || temp == NULL || branch == NULL || branch_rows == NULL || fixed == NULL) {
        return PE_ERR_ARG;
    }
    st = sized_layout(net, &G, stripe_w, &block_w, streamed, &total);
    if (st != PE_OK) {
        return st;
    }
    max_widths(net, &G, stripe_w, in_w, add_w);
    for (L = 0; L < G.n; L++) {
        int64_t r, t, b;
        int32_t temp_cols;
        buffer_bytes(net, &G, L, in_w[L], add_w[L], block_w, &r, &t, &b, &temp_cols);
        ring[L] = (int32_t)r; /* each part <= total <= INT32_MAX (layout checked) */
        temp[L] = (int32_t)t;
        branch[L] = (int32_t)b;
        branch_rows[L] = G.g[L].branch_rows;
        parts += r + t + b;
    }
    *fixed = (int32_t)(total - parts);
    return PE_OK;
}

/* Largest delta (bytes) for which one stripe may write its output at
 * input + delta: output row o is written while input row last(o) (the last
 * one its receptive field reaches) or a later one is being read, rows
 * arriving in order, each once; counting that row as unread, the bytes
 * written so far, (o + 1) * out_row, must end by last(o) * in_row. */
static pe_status max_overlap_delta(const pe_stripe_net *net, const net_geo *G, int32_t stripe_w,
                                   int64_t *max_delta)
{
    int64_t ra[PE_STRIPE_MAX_LAYERS + 1];
    int64_t rb[PE_STRIPE_MAX_LAYERS + 1];
    const int64_t in_row = (int64_t)net->input.w * net->input.c;
    const int64_t out_row = (int64_t)G->out_w * G->out_c;
    int64_t best = INT64_MAX;
    int32_t o;
    if (stripe_w < G->out_w) {
        return PE_ERR_UNSUPPORTED; /* every stripe reads the input again */
    }
    for (o = 0; o < G->out_h; o++) {
        int64_t last, v;
        backward_ranges(net, G, 0, 1, o, (int64_t)o + 1, ra, rb);
        last = rb[0] - 1 < 0 ? 0 : rb[0] - 1;
        v = last * in_row - ((int64_t)o + 1) * out_row;
        best = v < best ? v : best;
    }
    *max_delta = best;
    return PE_OK;
}

pe_status pe_stripe_max_overlap_delta(const pe_stripe_net *net, int32_t stripe_w, int64_t *max_delta)
{
    net_geo G;
    pe_status st;
    if (max_delta == NULL || stripe_w < 1) {
        return PE_ERR_ARG;
    }
    st = analyse(net, &G);
    if (st != PE_OK) {
        return st;
    }
    return max_overlap_delta(net, &G, stripe_w, max_delta);
}

/* Sum over outputs o in [a, b) of the number of taps inside [0, d). */
static int64_t valid_taps(int64_t a, int64_t b, int32_t k, int32_t s, int32_t p, int32_t d)
{
    int64_t o;
    int64_t n = 0;
    for (o = a; o < b; o++) {
        const int64_t lo = o * s - p;
        const int64_t hi = lo + k;
        n += (hi < d ? hi : d) - (lo > 0 ? lo : 0);
    }
    return n;
}

pe_status pe_stripe_predict_macs(const pe_stripe_net *net, int32_t stripe_w, int64_t *macs)
{
    net_geo G;
    pe_status st;
    int32_t x0, L;
    int64_t total = 0;
    int64_t row_taps[PE_STRIPE_MAX_LAYERS];
    if (macs == NULL || stripe_w < 1) {
        return PE_ERR_ARG;
    }
    st = analyse(net, &G);
    if (st != PE_OK) {
        return st;
    }
    for (L = 0; L < G.n; L++) {
        const layer_geo *g = &G.g[L];
        row_taps[L] = valid_taps(0, g->out_h, g->kh, g->sh, g->pt, g->in_h);
    }
    for (x0 = 0; x0 < G.out_w; x0 += stripe_w) {
        const int32_t x1 = (int32_t)((int64_t)x0 + stripe_w < G.out_w ? x0 + stripe_w : G.out_w);
        stripe_ranges(net, &G, x0, x1);
        for (L = 0; L < G.n; L++) {
            const pe_stripe_layer *l = &net->layers[L];
            const layer_geo *g = &G.g[L];
            int64_t per_tap;
            if (!is_conv_family(l->op)) {
                continue;
            }
            per_tap = l->op == PE_STRIPE_DEPTHWISE ? g->out_c : (int64_t)g->in_c * g->out_c;
            total += per_tap * row_taps[L] *
                     valid_taps(G.a[L + 1], G.b[L + 1], g->kw, g->sw, g->pl, g->in_w);
        }
        if ((int64_t)x0 + stripe_w >= G.out_w) {
            break;
        }
    }
    *macs = total;
    return PE_OK;
}

/* ------------------------------------------------------------------------ */
/* Execution                                                                */

typedef struct {
    const pe_stripe_net *net;
    const net_geo *G;
    stripe_state *st; /* st[L + 1] is layer L, st[0] the network input */
    int32_t block_w;
    const int8_t *input;          /* the whole input image, or NULL when streamed */
    const pe_row_source *rows;    /* streamed input: where rows come from */
    int8_t *rowbuf;               /* streamed input: the current row's column range */
    int64_t row_hw;               /* streamed input: high-water mark of rowbuf, bytes */
    int8_t *output;
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
        return R->output + ((size_t)o * (size_t)G->out_w + (size_t)x) * (size_t)G->out_c;
    }
    return in_slot(R, L + 1, x);
}

/* Copy producer p's (layer p - 1's) output pixel into its adds' branch stores. */
static void publish(stripe_run *R, int32_t p, int32_t row, int32_t x, const int8_t *px, int32_t c)
{
    int32_t A = R->st[p].listener;
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

/* Output columns [x0, x1) of row o of a conv / depthwise / pointwise / pool. */
static void compute_windowed(stripe_run *R, int32_t L, int32_t o, int32_t x0, int32_t x1)
{
    const pe_stripe_layer *l = &R->net->layers[L];
    const layer_geo *g = &R->G->g[L];
    const stripe_state *s = &R->st[L + 1];
    const int8_t *tap[PE_STRIPE_MAX_TAPS];
    int32_t woff[PE_STRIPE_MAX_TAPS];
    uint8_t rlen[PE_STRIPE_MAX_TAPS];
    int32_t roff[PE_STRIPE_MAX_KERNEL]; /* ring offset of window row ky, less in_a columns */
    const int32_t row0 = o * g->sh - g->pt;
    const int32_t ky0 = max32(0, -row0);
    const int32_t ky1 = min32(g->kh, g->in_h - row0);
    const int32_t ci = g->in_c;
    const int32_t co = g->out_c;
    const int32_t ring_w = s->in_b - s->in_a;
    /* the row still partly in temp (in_pixel's rule), or none */
    const int32_t temp_row = s->temp_cols > 0 ? s->in_row : -1;
    const int conv = l->op == PE_STRIPE_CONV || l->op == PE_STRIPE_POINTWISE;
    const int32_t fsize = g->kh * g->kw * ci;
    int32_t x, ky;

    for (ky = ky0; ky < ky1; ky++) {
        const int32_t r = row0 + ky;
        const int32_t slot = g->ring_rows > 1 ? r % g->ring_rows : 0;
        roff[ky] = (slot * ring_w - s->in_a) * ci;
    }
    for (x = x0; x < x1; x++) {
        const int32_t col0 = x * g->sw - g->pl;
        const int32_t kx0 = max32(0, -col0);
        const int32_t kx1 = min32(g->kw, g->in_w - col0);
        int32_t ntap = 0, nrun = 0;
        int32_t kx, t, oc;
        int8_t *dst;
        for (ky = ky0; ky < ky1; ky++) {
            const int32_t r = row0 + ky;
            for (kx = kx0; kx < kx1; kx++) {
                const int32_t c = col0 + kx;
                const int8_t *px = (r == temp_row && c >= s->committed)
                                       ? s->temp + (c % s->temp_cols) * ci
                                       : s->ring + roff[ky] + c * ci;
                const int32_t w = ky * g->kw + kx;
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
            conv_pixel(l, ci, co, fsize, tap, woff, rlen, nrun, dst);
            R->macs += (uint64_t)ntap * (uint64_t)ci * (uint64_t)co;
        } else if (l->op == PE_STRIPE_DEPTHWISE) {
            dw_pixel(l, ci, co, tap, woff, ntap, dst);
            R->macs += (uint64_t)ntap * (uint64_t)co;
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

static void compute_add(stripe_run *R, int32_t L, int32_t o, int32_t x0, int32_t x1)
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

/* Concatenation (TFLite CONCATENATION on channels, int8 with one scale and
 * zero point for inputs and output): a copy, the previous layer's channels
 * then the branch's (branch first when add.left_shift is 1). */
static void compute_concat(stripe_run *R, int32_t L, int32_t o, int32_t x0, int32_t x1)
{
    const pe_stripe_layer *l = &R->net->layers[L];
    const layer_geo *g = &R->G->g[L];
    const stripe_state *s = &R->st[L + 1];
    const int32_t cm = g->in_c;
    const int32_t cb = g->out_c - g->in_c;
    const int32_t slot = o % g->branch_rows;
    const int32_t first = l->add.left_shift ? cb : 0;   /* where the main channels go */
    const int32_t bfirst = l->add.left_shift ? 0 : cm;  /* where the branch channels go */
    int32_t x, i;
    for (x = x0; x < x1; x++) {
        const int8_t *a = in_pixel(s, g, o, x);
        const int8_t *b = s->branch + (slot * (s->out_b - s->out_a) + (x - s->out_a)) * cb;
        int8_t *dst = out_slot(R, L, o, x);
        for (i = 0; i < cm; i++) {
            dst[first + i] = a[i];
        }
        for (i = 0; i < cb; i++) {
            dst[bfirst + i] = b[i];
        }
        R->combines += (uint64_t)g->out_c;
        publish(R, L + 1, o, x, dst, g->out_c);
    }
}

static void compute_upsample(stripe_run *R, int32_t L, int32_t o, int32_t x0, int32_t x1)
{
    const layer_geo *g = &R->G->g[L];
    const stripe_state *s = &R->st[L + 1];
    const int32_t c = g->out_c;
    int32_t x, i;
    for (x = x0; x < x1; x++) {
        const int8_t *src = in_pixel(s, g, o / 2, x / 2);
        int8_t *dst = out_slot(R, L, o, x);
        for (i = 0; i < c; i++) {
            dst[i] = src[i];
        }
        publish(R, L + 1, o, x, dst, c);
    }
}

static void compute(stripe_run *R, int32_t L, int32_t o, int32_t x0, int32_t x1)
{
    switch (R->net->layers[L].op) {
    case PE_STRIPE_ADD:
        compute_add(R, L, o, x0, x1);
        break;
    case PE_STRIPE_CONCAT:
        compute_concat(R, L, o, x0, x1);
        break;
    case PE_STRIPE_UPSAMPLE2X:
        compute_upsample(R, L, o, x0, x1);
        break;
    default:
        compute_windowed(R, L, o, x0, x1);
        break;
    }
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
    if (R->net->layers[L].op == PE_STRIPE_UPSAMPLE2X) {
        s->triggering = 1;
        begin_output_row(R, L + 1, 2 * r);
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
    } else if (l->op == PE_STRIPE_UPSAMPLE2X) {
        lim = 2 * s->arrived;
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
        compute(R, L, o, s->prod_done, end);
        s->prod_done = end;
        if (L + 1 < R->G->n) {
            deliver(R, L + 1, end);
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
    if (R->net->layers[L].op == PE_STRIPE_UPSAMPLE2X) {
        emit_row(R, L, 2 * s->in_row + 1);
        return;
    }
    while (R->err == PE_OK && s->next_out < g->out_h && last_needed_row(g, s->next_out) <= s->in_row) {
        emit_row(R, L, s->next_out);
    }
}

static void advance(stripe_run *R, int32_t L)
{
    stripe_state *s = &R->st[L + 1];
    if (!s->triggering) {
        s->committed = s->arrived; /* written straight into the ring (or dropped) */
    } else {
        while (R->err == PE_OK && s->prod_done < s->out_b) {
            const int32_t lim = computable_limit(R, L);
            int32_t end;
            if (lim <= s->prod_done) {
                break;
            }
            end = min32(lim, s->prod_done + R->block_w);
            compute(R, L, s->prod_row, s->prod_done, end);
            s->prod_done = end;
            if (L + 1 < R->G->n) {
                deliver(R, L + 1, end);
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

static void deliver(stripe_run *R, int32_t L, int32_t upto)
{
    stripe_state *s = &R->st[L + 1];
    s->arrived = upto;
    if (s->triggering && s->temp_cols > 0 && s->arrived - s->committed > s->temp_cols) {
        R->err = PE_ERR_UNSUPPORTED; /* temporary overrun: a blocked add */
        return;
    }
    advance(R, L);
}

static void run_stripe(stripe_run *R, int32_t x0, int32_t x1)
{
    const pe_stripe_net *net = R->net;
    net_geo *G = (net_geo *)R->G;
    stripe_state *in = &R->st[0];
    const int32_t c = net->input.c;
    int32_t L, r;

    stripe_ranges(net, G, x0, x1);
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
            for (; x < end; x++) {
                const int8_t *src = row + (size_t)x * (size_t)c;
                int8_t *dst = in_slot(R, 0, x);
                int32_t i;
                for (i = 0; i < c; i++) {
                    dst[i] = src[i];
                }
                publish(R, 0, r, x, src, c);
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
                          const pe_row_source *rows, const pe_dims *output_dims, int8_t *output)
{
    net_geo G;
    stripe_run R;
    stripe_state *st = NULL;
    int8_t *rowbuf = NULL;
    pe_status status;
    int64_t total;
    int32_t L, x0;
    const int streamed = rows != NULL;

    if (ctx == NULL || input_dims == NULL || (input == NULL && !streamed) ||
        (streamed && rows->read == NULL) || output_dims == NULL || output == NULL ||
        stripe_w < 1 || block_w < 1) {
        return PE_ERR_ARG;
    }
    status = analyse(net, &G);
    if (status != PE_OK) {
        return status;
    }
    if (input_dims->n != 1 || input_dims->h != net->input.h || input_dims->w != net->input.w ||
        input_dims->c != net->input.c || output_dims->n != 1 || output_dims->h != G.out_h ||
        output_dims->w != G.out_w || output_dims->c != G.out_c) {
        return PE_ERR_ARG;
    }
    if (!streamed) {
        /* input and output share bytes only as pe_stripe_max_overlap_delta allows */
        const uintptr_t xi = (uintptr_t)input;
        const uintptr_t yo = (uintptr_t)output;
        const uintptr_t in_bytes = (uintptr_t)input_dims->h * (uintptr_t)input_dims->w * (uintptr_t)input_dims->c;
        const uintptr_t out_bytes = (uintptr_t)G.out_h * (uintptr_t)G.out_w * (uintptr_t)G.out_c;
        if (xi < yo + out_bytes && yo < xi + in_bytes) {
            int64_t most;
            const int64_t delta = yo >= xi ? (int64_t)(yo - xi) : -(int64_t)(xi - yo);
            if (max_overlap_delta(net, &G, stripe_w, &most) != PE_OK || delta > most) {
                return PE_ERR_ARG;
            }
        }
    }
    block_w = min32(block_w, PE_STRIPE_MAX_BLOCK);
    status = layout(net, &G, stripe_w, block_w, streamed, NULL, NULL, NULL, &total);
    if (status != PE_OK) {
        return status;
    }
    if (ctx->buf == NULL || (int64_t)ctx->size < total) {
        return PE_ERR_SCRATCH;
    }
    status = layout(net, &G, stripe_w, block_w, streamed, (int8_t *)ctx->buf, &st, &rowbuf, &total);
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
    R.input = streamed ? NULL : input;
    R.rows = rows;
    R.rowbuf = rowbuf;
    R.row_hw = 0;
    R.output = output;
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
        bytes = elems + R.row_hw + ((int8_t *)st - (int8_t *)ctx->buf) +
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
    return run_impl(ctx, net, stripe_w, block_w, input_dims, input, NULL, output_dims, output);
}

pe_status pe_stripe_run_rows_s8(const pe_context *ctx, const pe_stripe_net *net, int32_t stripe_w,
                                int32_t block_w, const pe_row_source *rows, const pe_dims *output_dims,
                                int8_t *output)
{
    if (rows == NULL || net == NULL) {
        return PE_ERR_ARG;
    }
    return run_impl(ctx, net, stripe_w, block_w, &net->input, NULL, rows, output_dims, output);
}
