/*
 * pe_stripe_plan.c - the stripe executor's planning side (see pe_stripe.h):
 * network validation and geometry (pe_stripe_analyse, with the dry run of
 * the row schedule that sizes each residual branch's row store), the column
 * ranges of a stripe (backward pass over the layers), the arena layout, and
 * the size queries built on them: output dims, scratch bytes and their
 * breakdown, the largest input / output overlap, the predicted MACs. The
 * executor (pe_stripe.c) calls the analysis, the ranges and the layout
 * through pe_stripe_internal.h; nothing here calls the executor.
 */
#include "pyembed/pe_stripe.h"

#include "pyembed/pe_fixed.h"
#include "pe_stripe_internal.h"

/* ------------------------------------------------------------------------ */
/* Geometry                                                                 */

/* floor(x / d) for d > 0 */
static int64_t floordiv64(int64_t x, int64_t d)
{
    int64_t q = x / d;
    if ((x % d) != 0 && x < 0) {
        q -= 1;
    }
    return q;
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

/* Input interval [*ia, *ib) (64-bit, unclipped when clip == 0) that output
 * interval [a, b) needs, along columns (axis 1) or rows (axis 0). */
static void need_input(const pe_stripe_layer *l, const layer_geo *g, int axis, int clip,
                       int64_t a, int64_t b, int64_t *ia, int64_t *ib)
{
    const int64_t k = axis ? g->kw : g->kh;
    const int64_t s = axis ? g->sw : g->sh;
    const int64_t p = axis ? g->pl : g->pt;
    const int64_t d = axis ? g->in_w : g->in_h;
    if (is_expand(l->op)) {
        const int64_t f = axis ? g->fw : g->fh;
        *ia = floordiv64(a, f);
        *ib = floordiv64(b - 1, f) + 1;
    } else if (is_windowed(l->op)) {
        *ia = a * s - p;
        *ib = (b - 1) * s - p + k;
    } else if (geo_bilinear(g)) {
        /* the taps of the first and the last output (those of padding
         * positions past the image: its edge output's) */
        const int64_t n = axis ? g->out_w : g->out_h;
        const int64_t i0 = a < 0 ? 0 : (a > n - 1 ? n - 1 : a);
        const int64_t i1 = b - 1 < 0 ? 0 : (b - 1 > n - 1 ? n - 1 : b - 1);
        int32_t v, lo, hi;
        bilinear_taps((int32_t)i0, (int32_t)s, g->groups == -2, (int32_t)d, &v, &lo, &hi);
        *ia = lo;
        bilinear_taps((int32_t)i1, (int32_t)s, g->groups == -2, (int32_t)d, &v, &lo, &hi);
        *ib = (int64_t)hi + 1;
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

void pe_stripe_ranges(const pe_stripe_net *net, net_geo *G, int32_t x0, int32_t x1)
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

/* An element-wise table layer: a table, one per tensor or one per channel,
 * and as many output channels as input channels. */
static int table_ok(const pe_stripe_layer *l)
{
    return l->table != NULL && l->out_c == l->in_c &&
           (l->table_channels == 1 || l->table_channels == l->in_c);
}

static pe_status check_layer_params(const pe_stripe_layer *l, int32_t L)
{
    int32_t o;
    if (!is_expand(l->op) && l->op != PE_STRIPE_RESIZE_BILINEAR && l->op != PE_STRIPE_CROP &&
        !act_ok(&l->activation)) {
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
    if (l->op == PE_STRIPE_TABLE && !table_ok(l)) {
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
        taps = (int64_t)l->kernel.h * l->kernel.w * (l->in_c / (l->groups > 1 ? l->groups : 1));
    }
    for (o = 0; o < l->out_c; o++) {
        const int64_t b = l->bias != NULL ? (int64_t)l->bias[o] : 0;
        if (taps * 128 * 255 + (b < 0 ? -b : b) > (int64_t)PE_INT32_MAX) {
            return 0;
        }
    }
    return 1;
}

/* Geometry of an UPSAMPLE (factors stride.h, stride.w) or DEPTH_TO_SPACE
 * (block stride.h == stride.w, in_c = block^2 * out_c) layer; g->in_* set. */
static pe_status expand_geometry(const pe_stripe_layer *l, layer_geo *g)
{
    const int32_t fh = l->stride.h;
    const int32_t fw = l->stride.w;
    if (fh < 1 || fw < 1) {
        return PE_ERR_ARG;
    }
    if (fh > PE_STRIPE_MAX_FACTOR || fw > PE_STRIPE_MAX_FACTOR) {
        return PE_ERR_UNSUPPORTED;
    }
    if (l->op == PE_STRIPE_UPSAMPLE ? l->out_c != g->in_c
                                    : (fh != fw || (int64_t)fh * fh * l->out_c != g->in_c)) {
        return PE_ERR_ARG;
    }
    if ((int64_t)g->in_h * fh > PE_INT32_MAX || (int64_t)g->in_w * fw > PE_INT32_MAX) {
        return PE_ERR_OVERFLOW;
    }
    g->fh = (int16_t)fh; /* <= PE_STRIPE_MAX_FACTOR */
    g->fw = (int16_t)fw;
    g->out_h = g->in_h * fh;
    g->out_w = g->in_w * fw;
    g->ring_rows = 1;
    return PE_OK;
}

/* TFLite's source scale with 10 fraction bits (pe_resize.c's rule). */
static int32_t bilinear_scale(int32_t in, int32_t out, int align)
{
    if (align && out > 1) {
        return (int32_t)((1024 * (int64_t)(in - 1) + (out - 1) / 2) / (out - 1));
    }
    return (int32_t)((1024 * (int64_t)in + out / 2) / out);
}

/* Geometry of a RESIZE_BILINEAR layer (factors stride.h, stride.w,
 * add.left_shift bit 0 align_corners, bit 1 half_pixel_centers); g->in_* set.
 * See geo_bilinear for the fields it keeps. */
static pe_status bilinear_geometry(const pe_stripe_layer *l, layer_geo *g)
{
    const int32_t fh = l->stride.h;
    const int32_t fw = l->stride.w;
    const int align = (l->add.left_shift & 1) != 0;
    const int half = (l->add.left_shift & 2) != 0;
    int32_t v, lo, hi;
    if (fh < 1 || fw < 1 || l->out_c != g->in_c || (l->add.left_shift & ~3) != 0 || (align && half)) {
        return PE_ERR_ARG;
    }
    if (fh > PE_STRIPE_MAX_FACTOR || fw > PE_STRIPE_MAX_FACTOR) {
        return PE_ERR_UNSUPPORTED;
    }
    /* i * scale (about 1024 * in) and the output sizes stay inside int32 */
    if ((int64_t)g->in_h * fh >= (1 << 20) || (int64_t)g->in_w * fw >= (1 << 20)) {
        return PE_ERR_UNSUPPORTED;
    }
    g->fh = (int16_t)fh; /* <= PE_STRIPE_MAX_FACTOR */
    g->fw = (int16_t)fw;
    g->out_h = g->in_h * fh;
    g->out_w = g->in_w * fw;
    g->sh = bilinear_scale(g->in_h, g->out_h, align);
    g->sw = bilinear_scale(g->in_w, g->out_w, align);
    g->groups = half ? -2 : -1;
    g->kh = g->kw = 2;
    g->ring_rows = 2;
    /* a rounded scale whose last output's lower tap leaves the input
     * (TFLite would read past it): refused, as pe_resize_bilinear_s8 does */
    bilinear_taps(g->out_h - 1, g->sh, half, g->in_h, &v, &lo, &hi);
    if (lo > g->in_h - 1) {
        return PE_ERR_UNSUPPORTED;
    }
    bilinear_taps(g->out_w - 1, g->sw, half, g->in_w, &v, &lo, &hi);
    return lo > g->in_w - 1 ? PE_ERR_UNSUPPORTED : PE_OK;
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
    if (is_expand(d->net->layers[L].op)) {
        int32_t i;
        for (i = 0; i < g->fh && d->err == PE_OK; i++) {
            dry_emit(d, L, g->fh * r + i);
        }
        return;
    }
    while (d->err == PE_OK && d->next_out[L] < g->out_h &&
           last_needed_row(g, d->next_out[L]) <= r) {
        const int32_t o = d->next_out[L]++;
        dry_emit(d, L, o);
    }
}

/* Whether the receptive field of one output pixel (padding positions
 * included) fits inside the input image, in both directions. Not inlined:
 * its range tables (0.5 KB) stay off the frame of the dry run after it. */
__attribute__((noinline)) static int receptive_field_fits(const pe_stripe_net *net, const net_geo *G)
{
    int64_t ra[PE_STRIPE_MAX_LAYERS + 1];
    int64_t rb[PE_STRIPE_MAX_LAYERS + 1];
    backward_ranges(net, G, 1, 0, G->out_w / 2, G->out_w / 2 + 1, ra, rb);
    if (rb[0] - ra[0] > net->input.w) {
        return 0;
    }
    backward_ranges(net, G, 0, 0, G->out_h / 2, G->out_h / 2 + 1, ra, rb);
    return rb[0] - ra[0] <= net->input.h;
}

/* Validates the network and fills G (geometry, line store and branch rows). */
pe_status pe_stripe_analyse(const pe_stripe_net *net, net_geo *G)
{
    int32_t h, w, c, L, r;
    pe_status st;
    dry_run d;

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
        g->sh = g->sw = 1;
        g->kh = g->kw = 1;
        g->dh = g->dw = 1;
        g->pt = g->pb = g->pl = g->pr = 0;
        if (l->dilation.h < 0 || l->dilation.w < 0 ||
            ((l->dilation.h > 1 || l->dilation.w > 1) && l->op != PE_STRIPE_CONV &&
             l->op != PE_STRIPE_DEPTHWISE)) {
            return PE_ERR_ARG;
        }
        /* groups: conv only, dividing both channel counts */
        if (l->groups < 0 || (l->groups > 1 && (l->op != PE_STRIPE_CONV || l->in_c % l->groups != 0 ||
                                                l->out_c % l->groups != 0))) {
            return PE_ERR_ARG;
        }
        g->groups = l->groups > 1 ? l->groups : 1;
        g->branch_rows = 0;
        g->ring_rows = 0;
        g->fh = g->fw = 1;
        switch (l->op) {
        case PE_STRIPE_CONV:
        case PE_STRIPE_DEPTHWISE:
        case PE_STRIPE_POOL:
        case PE_STRIPE_SPACE_TO_DEPTH: {
            int64_t oh, ow, eh, ew;
            int32_t dh, dw;
            if (l->kernel.h < 1 || l->kernel.w < 1 || l->stride.h < 1 || l->stride.w < 1) {
                return PE_ERR_ARG;
            }
            dh = l->dilation.h > 1 ? l->dilation.h : 1;
            dw = l->dilation.w > 1 ? l->dilation.w : 1;
            /* the window's extent (int64: no overflow on any field value) */
            eh = (int64_t)(l->kernel.h - 1) * dh + 1;
            ew = (int64_t)(l->kernel.w - 1) * dw + 1;
            if (eh > PE_STRIPE_MAX_KERNEL || ew > PE_STRIPE_MAX_KERNEL ||
                l->kernel.h * l->kernel.w > PE_STRIPE_MAX_TAPS) {
                return PE_ERR_UNSUPPORTED;
            }
            /* int16 fields: a one-tap direction's dilation is any value and
             * changes nothing (its only tap is at 0); stored as 1. Otherwise
             * dilation < the window <= PE_STRIPE_MAX_KERNEL. */
            g->dh = (int16_t)(l->kernel.h > 1 ? dh : 1);
            g->dw = (int16_t)(l->kernel.w > 1 ? dw : 1);
            if (l->padding.top < 0 || l->padding.top >= eh || l->padding.bottom < 0 ||
                l->padding.bottom >= eh || l->padding.left < 0 || l->padding.left >= ew ||
                l->padding.right < 0 || l->padding.right >= ew) {
                return PE_ERR_ARG;
            }
            if (l->op == PE_STRIPE_DEPTHWISE && (l->out_c % l->in_c) != 0) {
                return PE_ERR_ARG;
            }
            if (l->op == PE_STRIPE_POOL && l->out_c != l->in_c) {
                return PE_ERR_ARG;
            }
            /* space to depth: a b x b window at stride b, no padding, no
             * dilation, the input a whole number of blocks, b * b * in_c out */
            if (l->op == PE_STRIPE_SPACE_TO_DEPTH &&
                (l->kernel.h < 2 || l->kernel.w != l->kernel.h || l->stride.h != l->kernel.h ||
                 l->stride.w != l->kernel.h || g->dh != 1 || g->dw != 1 || l->padding.top != 0 ||
                 l->padding.bottom != 0 || l->padding.left != 0 || l->padding.right != 0 ||
                 h % l->kernel.h != 0 || w % l->kernel.h != 0 ||
                 (int64_t)l->out_c != (int64_t)l->in_c * l->kernel.h * l->kernel.h)) {
                return PE_ERR_ARG;
            }
            g->kh = (int16_t)eh; /* <= PE_STRIPE_MAX_KERNEL, and the padding below it */
            g->kw = (int16_t)ew;
            g->sh = l->stride.h;
            g->sw = l->stride.w;
            g->pt = (int16_t)l->padding.top;
            g->pb = (int16_t)l->padding.bottom;
            g->pl = (int16_t)l->padding.left;
            g->pr = (int16_t)l->padding.right;
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
        case PE_STRIPE_TABLE: /* out_c == in_c checked by table_ok */
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
            g->fh = g->fw = 2;
            g->ring_rows = 1;
            break;
        case PE_STRIPE_CROP:
            /* trailing rows and columns dropped, at least one of each kept */
            if (l->out_c != c || l->padding.top != 0 || l->padding.left != 0 || l->padding.bottom < 0 ||
                l->padding.bottom >= h || l->padding.right < 0 || l->padding.right >= w) {
                return PE_ERR_ARG;
            }
            g->out_h = h - l->padding.bottom;
            g->out_w = w - l->padding.right;
            break;
        case PE_STRIPE_RESIZE_BILINEAR:
            st = bilinear_geometry(l, g);
            if (st != PE_OK) {
                return st;
            }
            break;
        case PE_STRIPE_UPSAMPLE:
        case PE_STRIPE_DEPTH_TO_SPACE:
            st = expand_geometry(l, g);
            if (st != PE_OK) {
                return st;
            }
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
    if (!receptive_field_fits(net, G)) {
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
        pe_stripe_ranges(net, G, x0, x1);
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
    /* an expanding layer's input goes straight into its one-row store */
    *temp_cols = is_expand(net->layers[L].op) || geo_bilinear(g) ? 0 : g->kw - 1 + block_w;
    *temp = (int64_t)(*temp_cols + temp_mirror(&net->layers[L], g, block_w)) * g->in_c;
    *branch = (int64_t)g->branch_rows * add_w * branch_channels(&net->layers[L]);
}

/* A streamed output's one-row buffer (the whole output width: a sink needs
 * one stripe) at off; returns the end, and the buffer in *outrow when given. */
static int64_t out_row_layout(const net_geo *G, int64_t off, int8_t *aligned, int8_t **outrow)
{
    off = align_up(off);
    if (outrow != NULL) {
        *outrow = aligned + off;
    }
    return off + (int64_t)G->out_w * G->out_c;
}

int64_t pe_stripe_geo_bind(net_geo *G, int32_t n, int8_t *base)
{
    const int64_t geo = align_up((int64_t)n * (int64_t)sizeof(layer_geo));
    const int64_t ranges = align_up(((int64_t)n + 1) * (int64_t)sizeof(int32_t));
    if (base != NULL) {
        G->g = (layer_geo *)(void *)base;
        G->a = (int32_t *)(void *)(base + geo);
        G->b = (int32_t *)(void *)(base + geo + ranges);
    }
    return geo + 2 * ranges;
}

/* The tap tables at off (aligned): as many entries as the largest window of
 * a layer compute_windowed runs (the windowed ones and pointwise) has taps,
 * and a row offset per row of the tallest window; none without such a
 * layer. Returns the end (aligned); fills
 * *taps when aligned and taps are not NULL. */
static int64_t tap_layout(const pe_stripe_net *net, const net_geo *G, int64_t off, int8_t *aligned,
                          stripe_taps *taps)
{
    int64_t most = 0, rows = 0, t_tap, t_woff, t_roff;
    int32_t L;
    for (L = 0; L < G->n; L++) {
        const layer_geo *g = &G->g[L];
        const pe_stripe_op op = net->layers[L].op;
        if (is_windowed(op) || op == PE_STRIPE_POINTWISE) {
            const int64_t n = (int64_t)((g->kh - 1) / g->dh + 1) * ((g->kw - 1) / g->dw + 1);
            most = n > most ? n : most;
            rows = g->kh > rows ? g->kh : rows;
        }
    }
    t_tap = off;
    t_woff = align_up(t_tap + most * (int64_t)sizeof(const int8_t *));
    t_roff = align_up(t_woff + most * (int64_t)sizeof(int32_t));
    off = t_roff + rows * (int64_t)sizeof(int32_t); /* rlen (bytes) right after roff */
    if (aligned != NULL && taps != NULL) {
        taps->tap = (const int8_t **)(void *)(aligned + t_tap);
        taps->woff = (int32_t *)(void *)(aligned + t_woff);
        taps->roff = (int32_t *)(void *)(aligned + t_roff);
        taps->rlen = (uint8_t *)(aligned + off);
    }
    return align_up(off + most);
}

/* Total arena bytes; when base != NULL also carves the buffers into st. */
/* streamed: also a buffer for one input row range (the row source writes
 * into it), returned in *rowbuf when base != NULL. */
pe_status pe_stripe_layout(const pe_stripe_net *net, net_geo *G, int32_t stripe_w, int32_t block_w,
                           int streamed, int8_t *base, stripe_state **states, int8_t **rowbuf,
                           int8_t **outrow, int64_t *total)
{
    return pe_stripe_layout_split(net, G, stripe_w, block_w, streamed, base, states, rowbuf, outrow, total, NULL,
                                  NULL, NULL, NULL);
}

int64_t pe_stripe_work_bytes(const pe_stripe_net *net, const net_geo *G, int32_t block_w)
{
    int64_t most = 0;
    int32_t L;
    if (block_w < PE_STRIPE_CONV_MIN_COLS) {
        return 0;
    }
    for (L = 0; L < G->n; L++) {
        const layer_geo *g = &G->g[L];
        if (conv_rows_apply(&net->layers[L], g)) {
            const int64_t w = 8 * (int64_t)g->kw * g->in_c + 16 * PE_STRIPE_CONV_COLS;
            most = w > most ? w : most;
        } else if (dw_rows_apply(&net->layers[L], g)) {
            /* the depthwise row loops' table and their runs' tap offsets */
            const int64_t w = PE_DW_WORK_BYTES;
            most = w > most ? w : most;
        } else if (conv_patch_apply(&net->layers[L], g)) {
            /* the widened filter, the patches and their accumulators */
            const int64_t w = (8 + (int64_t)PE_STRIPE_PATCH_COLS) * conv_patch_len(g) + 16 * PE_STRIPE_PATCH_COLS;
            most = w > most ? w : most;
        }
    }
    return most;
}

pe_status pe_stripe_layout_split(const pe_stripe_net *net, net_geo *G, int32_t stripe_w, int32_t block_w,
                                 int streamed, int8_t *base, stripe_state **states, int8_t **rowbuf,
                                 int8_t **outrow, int64_t *total, int8_t *lines_base, int64_t *lines_total,
                                 uint32_t **work, stripe_taps *taps)
{
    int32_t in_w[PE_STRIPE_MAX_LAYERS];
    int32_t add_w[PE_STRIPE_MAX_LAYERS];
    int64_t off, loff = 0;
    int32_t L;
    int8_t *aligned = NULL;
    int8_t *laligned = NULL;
    stripe_state *st = NULL;
    const int split = lines_total != NULL;

    max_widths(net, G, stripe_w, in_w, add_w);
    if (base != NULL) {
        const uintptr_t p = (uintptr_t)base;
        aligned = base + ((PE_STRIPE_ALIGN - (p % PE_STRIPE_ALIGN)) % PE_STRIPE_ALIGN);
        if (split) {
            const uintptr_t q = (uintptr_t)lines_base;
            laligned = lines_base + ((PE_STRIPE_ALIGN - (q % PE_STRIPE_ALIGN)) % PE_STRIPE_ALIGN);
        }
    }
    /* the geometry first (bound there by the caller), then the states */
    off = pe_stripe_geo_bind(G, G->n, NULL);
    if (base != NULL) {
        st = (stripe_state *)(void *)(aligned + off);
        *states = st;
    }
    off = align_up(off + (int64_t)(G->n + 1) * (int64_t)sizeof(stripe_state));
    {
        /* the conv row loops' work block, after the states */
        const int64_t wb = pe_stripe_work_bytes(net, G, block_w);
        if (work != NULL) {
            *work = (base != NULL && wb > 0) ? (uint32_t *)(void *)(aligned + off) : NULL;
        }
        off = align_up(off + wb);
    }
    off = tap_layout(net, G, off, aligned, taps);
    for (L = 0; L < G->n; L++) {
        int64_t ring, temp, branch;
        int32_t temp_cols;
        buffer_bytes(net, G, L, in_w[L], add_w[L], block_w, &ring, &temp, &branch, &temp_cols);
        if (split) {
            /* line stores and delay lines in their own block, the row temporaries here */
            if (st != NULL) {
                stripe_state *s = &st[L + 1];
                s->ring = laligned + loff;
                s->branch = laligned + loff + ring;
                s->temp = aligned + off;
                s->ring_w = in_w[L];
                s->temp_cols = temp_cols;
                s->branch_w = add_w[L];
            }
            loff += ring + branch;
            off += temp;
            if (off > (int64_t)PE_INT32_MAX || loff > (int64_t)PE_INT32_MAX - PE_STRIPE_ALIGN) {
                return PE_ERR_OVERFLOW;
            }
            continue;
        }
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
    if (split) {
        *lines_total = loff + PE_STRIPE_ALIGN - 1; /* slack for an unaligned caller buffer */
    }
    if (streamed & PE_STRIPE_STREAM_IN) {
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
    if (streamed & PE_STRIPE_STREAM_OUT) {
        off = out_row_layout(G, off, aligned, base != NULL ? outrow : NULL);
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
    net_geo_full GF;
    net_geo *G = net_geo_full_bind(&GF);
    pe_status st;
    if (output == NULL) {
        return PE_ERR_ARG;
    }
    st = pe_stripe_analyse(net, G);
    if (st != PE_OK) {
        return st;
    }
    output->n = 1;
    output->h = G->out_h;
    output->w = G->out_w;
    output->c = G->out_c;
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
    st = pe_stripe_analyse(net, G);
    if (st != PE_OK) {
        return st;
    }
    *block_w = min32(*block_w, PE_STRIPE_MAX_BLOCK);
    return pe_stripe_layout(net, G, stripe_w, *block_w, streamed, NULL, NULL, NULL, NULL, total);
}

static pe_status buffer_size(const pe_stripe_net *net, int32_t stripe_w, int32_t block_w,
                             int streamed, int32_t *size)
{
    net_geo_full GF;
    net_geo *G = net_geo_full_bind(&GF);
    pe_status st;
    int64_t total;
    if (size == NULL) {
        return PE_ERR_ARG;
    }
    st = sized_layout(net, G, stripe_w, &block_w, streamed, &total);
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

pe_status pe_stripe_get_buffer_size_io_s8(const pe_stripe_net *net, int32_t stripe_w, int32_t block_w,
                                          int32_t streams, int32_t *size)
{
    if ((streams & ~(PE_STRIPE_STREAM_IN | PE_STRIPE_STREAM_OUT)) != 0) {
        return PE_ERR_ARG;
    }
    return buffer_size(net, stripe_w, block_w, (int)streams, size);
}

pe_status pe_stripe_get_buffer_sizes_split_s8(const pe_stripe_net *net, int32_t stripe_w, int32_t block_w,
                                              int32_t streams, int32_t *scratch, int32_t *lines)
{
    net_geo_full GF;
    net_geo *G = net_geo_full_bind(&GF);
    pe_status st;
    int64_t total = 0, ltotal = 0;
    if (scratch == NULL || lines == NULL || (streams & ~(PE_STRIPE_STREAM_IN | PE_STRIPE_STREAM_OUT)) != 0 ||
        stripe_w < 1 || block_w < 1) {
        return PE_ERR_ARG;
    }
    st = pe_stripe_analyse(net, G);
    if (st != PE_OK) {
        return st;
    }
    block_w = min32(block_w, PE_STRIPE_MAX_BLOCK);
    st = pe_stripe_layout_split(net, G, stripe_w, block_w, (int)streams, NULL, NULL, NULL, NULL, &total, NULL,
                                &ltotal, NULL, NULL);
    if (st != PE_OK) {
        return st;
    }
    *scratch = (int32_t)total;
    *lines = (int32_t)ltotal;
    return PE_OK;
}

pe_status pe_stripe_buffer_breakdown(const pe_stripe_net *net, int32_t stripe_w, int32_t block_w,
                                     int streamed, int32_t *ring, int32_t *temp, int32_t *branch,
                                     int32_t *branch_rows, int32_t *fixed)
{
    net_geo_full GF;
    net_geo *G = net_geo_full_bind(&GF);
    pe_status st;
    int64_t total, parts = 0;
    int32_t in_w[PE_STRIPE_MAX_LAYERS];
    int32_t add_w[PE_STRIPE_MAX_LAYERS];
    int32_t L;
    if (ring == NULL || temp == NULL || branch == NULL || branch_rows == NULL || fixed == NULL) {
        return PE_ERR_ARG;
    }
    st = sized_layout(net, G, stripe_w, &block_w, streamed, &total);
    if (st != PE_OK) {
        return st;
    }
    max_widths(net, G, stripe_w, in_w, add_w);
    for (L = 0; L < G->n; L++) {
        int64_t r, t, b;
        int32_t temp_cols;
        buffer_bytes(net, G, L, in_w[L], add_w[L], block_w, &r, &t, &b, &temp_cols);
        ring[L] = (int32_t)r; /* each part <= total <= INT32_MAX (layout checked) */
        temp[L] = (int32_t)t;
        branch[L] = (int32_t)b;
        branch_rows[L] = G->g[L].branch_rows;
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
pe_status pe_stripe_overlap_bound(const pe_stripe_net *net, const net_geo *G, int32_t stripe_w,
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
    net_geo_full GF;
    net_geo *G = net_geo_full_bind(&GF);
    pe_status st;
    if (max_delta == NULL || stripe_w < 1) {
        return PE_ERR_ARG;
    }
    st = pe_stripe_analyse(net, G);
    if (st != PE_OK) {
        return st;
    }
    return pe_stripe_overlap_bound(net, G, stripe_w, max_delta);
}

/* Sum over outputs o in [a, b) of the number of taps inside [0, d): a
 * window of extent k from o * s - p with a tap every dil positions. */
static int64_t valid_taps(int64_t a, int64_t b, int32_t k, int32_t s, int32_t p, int32_t d,
                          int32_t dil)
{
    int64_t o;
    int64_t n = 0;
    for (o = a; o < b; o++) {
        const int64_t lo = o * s - p;
        const int64_t hi = lo + k; /* exclusive */
        /* first tap index inside the image, one past the last */
        const int64_t t0 = lo >= 0 ? 0 : (-lo + dil - 1) / dil;
        const int64_t t1 = (hi < d ? hi : d) - lo;
        const int64_t t1n = t1 > 0 ? (t1 - 1) / dil + 1 : 0;
        n += t1n > t0 ? t1n - t0 : 0;
    }
    return n;
}

pe_status pe_stripe_predict_macs(const pe_stripe_net *net, int32_t stripe_w, int64_t *macs)
{
    net_geo_full GF;
    net_geo *G = net_geo_full_bind(&GF);
    pe_status st;
    int32_t x0, L;
    int64_t total = 0;
    int64_t row_taps[PE_STRIPE_MAX_LAYERS];
    if (macs == NULL || stripe_w < 1) {
        return PE_ERR_ARG;
    }
    st = pe_stripe_analyse(net, G);
    if (st != PE_OK) {
        return st;
    }
    for (L = 0; L < G->n; L++) {
        const layer_geo *g = &G->g[L];
        row_taps[L] = valid_taps(0, g->out_h, g->kh, g->sh, g->pt, g->in_h, g->dh);
    }
    for (x0 = 0; x0 < G->out_w; x0 += stripe_w) {
        const int32_t x1 = (int32_t)((int64_t)x0 + stripe_w < G->out_w ? x0 + stripe_w : G->out_w);
        pe_stripe_ranges(net, G, x0, x1);
        for (L = 0; L < G->n; L++) {
            const pe_stripe_layer *l = &net->layers[L];
            const layer_geo *g = &G->g[L];
            int64_t per_tap;
            if (!is_conv_family(l->op)) {
                continue;
            }
            per_tap = l->op == PE_STRIPE_DEPTHWISE ? g->out_c : (int64_t)g->in_c / g->groups * g->out_c;
            total += per_tap * row_taps[L] *
                     valid_taps(G->a[L + 1], G->b[L + 1], g->kw, g->sw, g->pl, g->in_w, g->dw);
        }
        if ((int64_t)x0 + stripe_w >= G->out_w) {
            break;
        }
    }
    *macs = total;
    return PE_OK;
}
