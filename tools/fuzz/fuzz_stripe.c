/*
 * fuzz_stripe.c - libFuzzer harness for the stripe executor (pe_stripe.h).
 *
 * Each input is a random chain of up to 8 layers (conv, depthwise,
 * pointwise, pooling, residual add, x2 upsampling, upsampling by factors
 * 1..3 per axis, bilinear upsampling by factors 1..4 with its flags, crops
 * of the last rows and columns, depth to space, concatenation, tables) with weights, biases and
 * requantization, an input image, a stripe width and a block width. The
 * executor's output must equal, bit for bit, a naive full-frame
 * layer-by-layer model written here from the header's arithmetic (every
 * intermediate map stored whole); its measured MACs must equal
 * pe_stripe_predict_macs, and with one stripe at most the full-frame count.
 * The same network also runs with its line stores in a block of their own
 * (pe_stripe_run_split_s8) and, with one stripe, its output streamed to a
 * row sink: the same bytes, every row once and in order.
 * Parameters are sometimes out of range (fz_wild) so the network checks are
 * fuzzed too; a network pe_stripe_output_dims accepts must run.
 */
#include "fuzz_common.h"
#include "pyembed/pe_stripe.h"

#define MAX_LAYERS 8
#define MAX_MAP (1 << 14)
#define MAX_WORK (1 << 22)

typedef struct {
    int32_t h, w, c;
} shape;

/* round(S / n) with halves away from zero */
static int32_t avg_round(int64_t s, int64_t n)
{
    const int64_t m = s < 0 ? -s : s;
    const int64_t q = (2 * m + n) / (2 * n);
    return (int32_t)(s < 0 ? -q : q);
}

static int32_t clamp_act(int64_t v, const pe_activation *a)
{
    return (int32_t)(v < a->min ? a->min : (v > a->max ? a->max : v));
}

/* Bilinear source taps of output index i along an axis of n_in inputs and
 * n_out outputs (pe_stripe.h: TFLite's 10-fraction-bit positions), in int64. */
static void bil_axis(int64_t i, int64_t n_in, int64_t n_out, int align, int half, int64_t *w1,
                     int64_t *lo, int64_t *hi)
{
    const int64_t sc = align && n_out > 1 ? (1024 * (n_in - 1) + (n_out - 1) / 2) / (n_out - 1)
                                          : (1024 * n_in + n_out / 2) / n_out;
    const int64_t v = i * sc + (half ? sc / 2 - 512 : 0);
    *lo = v / 1024 > 0 ? v / 1024 : 0;
    *hi = (v + 1023) / 1024 < n_in - 1 ? (v + 1023) / 1024 : n_in - 1;
    *w1 = v - *lo * 1024;
}

/* resize_bilinear over a whole map: each value the four taps' sum with
 * weights (1024 - w1 or w1) per axis, rounded half away from zero at 2^20.
 * Returns 0 where a lower tap leaves the input (the executor refuses). */
static int ref_bilinear(const pe_stripe_layer *l, const int8_t *in, shape si, int8_t *out, shape so)
{
    const int align = (l->add.left_shift & 1) != 0, half = (l->add.left_shift & 2) != 0;
    int64_t oy, ox, o;
    for (oy = 0; oy < so.h; oy++) {
        int64_t wy, y0, y1;
        bil_axis(oy, si.h, so.h, align, half, &wy, &y0, &y1);
        if (y0 > si.h - 1) {
            return 0;
        }
        for (ox = 0; ox < so.w; ox++) {
            int64_t wx, x0, x1;
            bil_axis(ox, si.w, so.w, align, half, &wx, &x0, &x1);
            if (x0 > si.w - 1) {
                return 0;
            }
            for (o = 0; o < so.c; o++) {
                const int64_t a = in[(y0 * si.w + x0) * si.c + o], b = in[(y0 * si.w + x1) * si.c + o];
                const int64_t c = in[(y1 * si.w + x0) * si.c + o], d = in[(y1 * si.w + x1) * si.c + o];
                const int64_t acc = a * (1024 - wy) * (1024 - wx) + b * (1024 - wy) * wx +
                                    c * wy * (1024 - wx) + d * wy * wx;
                const int64_t q = (acc + (acc > 0 ? (1 << 19) : -(1 << 19))) / (1 << 20);
                out[(oy * so.w + ox) * so.c + o] = (int8_t)(q < -128 ? -128 : (q > 127 ? 127 : q));
            }
        }
    }
    return 1;
}

/* One layer over a whole map. Returns 0 if the int32 accumulator of an
 * accepted network would overflow (reported by the caller). */
/* input channels per group of a conv: in_c / groups when groups > 1
 * divides in_c (the executor refuses any other groups), else in_c */
static int32_t group_c(const pe_stripe_layer *l)
{
    return l->groups > 1 && l->in_c % l->groups == 0 ? l->in_c / l->groups : l->in_c;
}

static int ref_layer(const pe_stripe_layer *l, const int8_t *in, shape si, const int8_t *branch,
                     int8_t *out, shape so, uint64_t *macs)
{
    int64_t oy, ox, o, ky, kx, i;
    if (l->op == PE_STRIPE_UPSAMPLE2X || l->op == PE_STRIPE_UPSAMPLE || l->op == PE_STRIPE_DEPTH_TO_SPACE) {
        /* out[y][x] = in[y / fh][x / fw]; depth to space takes channel block
         * (y % fh) * fw + x % fw of the input pixel */
        const int64_t fh = l->op == PE_STRIPE_UPSAMPLE2X ? 2 : l->stride.h;
        const int64_t fw = l->op == PE_STRIPE_UPSAMPLE2X ? 2 : l->stride.w;
        for (oy = 0; oy < so.h; oy++) {
            for (ox = 0; ox < so.w; ox++) {
                const int64_t sub = l->op == PE_STRIPE_DEPTH_TO_SPACE ? ((oy % fh) * fw + ox % fw) * so.c : 0;
                for (o = 0; o < so.c; o++) {
                    out[(oy * so.w + ox) * so.c + o] = in[((oy / fh) * si.w + ox / fw) * si.c + sub + o];
                }
            }
        }
        return 1;
    }
    if (l->op == PE_STRIPE_RESIZE_BILINEAR) {
        return ref_bilinear(l, in, si, out, so);
    }
    if (l->op == PE_STRIPE_CROP) {
        /* out[y][x] = in[y][x]: the first rows and columns */
        for (oy = 0; oy < so.h; oy++) {
            memcpy(out + oy * so.w * so.c, in + oy * si.w * si.c, (size_t)(so.w * so.c));
        }
        return 1;
    }
    if (l->op == PE_STRIPE_SPACE_TO_DEPTH) {
        /* out[y][x][(i * b + j) * in_c + c] = in[y * b + i][x * b + j][c] */
        const int64_t b = l->kernel.h;
        for (oy = 0; oy < so.h; oy++) {
            for (ox = 0; ox < so.w; ox++) {
                for (ky = 0; ky < b; ky++) {
                    for (kx = 0; kx < b; kx++) {
                        for (o = 0; o < si.c; o++) {
                            out[((oy * so.w + ox) * so.c) + (ky * b + kx) * si.c + o] =
                                in[((oy * b + ky) * si.w + ox * b + kx) * si.c + o];
                        }
                    }
                }
            }
        }
        return 1;
    }
    if (l->op == PE_STRIPE_TABLE) {
        for (i = 0; i < (int64_t)so.h * so.w; i++) {
            for (o = 0; o < so.c; o++) {
                const int64_t t = l->table_channels == 1 ? 0 : o;
                out[i * so.c + o] = l->table[t * 256 + in[i * si.c + o] + 128];
            }
        }
        return 1;
    }
    if (l->op == PE_STRIPE_CONCAT) {
        const int64_t cb = so.c - si.c;
        const int64_t mf = l->add.left_shift ? cb : 0, bf = l->add.left_shift ? 0 : si.c;
        for (i = 0; i < (int64_t)so.h * so.w; i++) {
            for (o = 0; o < si.c; o++) {
                out[i * so.c + mf + o] = in[i * si.c + o];
            }
            for (o = 0; o < cb; o++) {
                out[i * so.c + bf + o] = branch[i * cb + o];
            }
        }
        return 1;
    }
    if (l->op == PE_STRIPE_ADD) {
        const pe_stripe_add_params *p = &l->add;
        for (i = 0; i < (int64_t)so.h * so.w * so.c; i++) {
            const int32_t a = fz_requant((in[i] + p->main_offset) * (1 << p->left_shift),
                                         p->main_quant.multiplier, p->main_quant.shift,
                                         l->rounding == PE_ROUND_SINGLE);
            const int32_t b = fz_requant((branch[i] + p->branch_offset) * (1 << p->left_shift),
                                         p->branch_quant.multiplier, p->branch_quant.shift,
                                         l->rounding == PE_ROUND_SINGLE);
            int64_t s = (int64_t)a + b;
            s = s > INT32_MAX ? INT32_MAX : (s < INT32_MIN ? INT32_MIN : s); /* saturates */
            out[i] = (int8_t)clamp_act((int64_t)fz_requant((int32_t)s, p->out_quant.multiplier,
                                                           p->out_quant.shift,
                                                           l->rounding == PE_ROUND_SINGLE) +
                                           l->output_offset,
                                       &l->activation);
        }
        return 1;
    }
    for (oy = 0; oy < so.h; oy++) {
        for (ox = 0; ox < so.w; ox++) {
            for (o = 0; o < so.c; o++) {
                const int pw = l->op == PE_STRIPE_POINTWISE;
                const int64_t kh = pw ? 1 : l->kernel.h, kw = pw ? 1 : l->kernel.w;
                const int64_t sh = pw ? 1 : l->stride.h, sw = pw ? 1 : l->stride.w;
                const int64_t pt = pw ? 0 : l->padding.top, pl = pw ? 0 : l->padding.left;
                const int64_t dh = l->dilation.h > 1 ? l->dilation.h : 1;
                const int64_t dw = l->dilation.w > 1 ? l->dilation.w : 1;
                int64_t acc = l->bias != NULL && l->op != PE_STRIPE_POOL ? l->bias[o] : 0;
                int64_t mx = -128, cnt = 0;
                for (ky = 0; ky < kh; ky++) {
                    for (kx = 0; kx < kw; kx++) {
                        const int64_t iy = oy * sh - pt + ky * dh, ix = ox * sw - pl + kx * dw;
                        const int8_t *px;
                        if (iy < 0 || iy >= si.h || ix < 0 || ix >= si.w) {
                            continue;
                        }
                        px = in + (iy * si.w + ix) * si.c;
                        if (l->op == PE_STRIPE_CONV || pw) {
                            /* a grouped conv reads its group's cg input channels */
                            const int64_t cg = pw ? si.c : group_c(l);
                            const int8_t *wk = l->weights + ((o * kh + ky) * kw + kx) * cg;
                            const int8_t *pg = px + o / (so.c / (si.c / cg)) * cg;
                            for (i = 0; i < cg; i++) {
                                acc += (int64_t)wk[i] * (pg[i] + l->input_offset);
                            }
                            *macs += (uint64_t)cg;
                        } else if (l->op == PE_STRIPE_DEPTHWISE) {
                            acc += (int64_t)l->weights[(ky * kw + kx) * so.c + o] *
                                   (px[o / (so.c / si.c)] + l->input_offset);
                            *macs += 1;
                        } else {
                            mx = px[o] > mx ? px[o] : mx;
                            acc += px[o];
                            cnt++;
                        }
                    }
                }
                if (l->op == PE_STRIPE_POOL) {
                    const int64_t v = l->pool_kind == PE_POOL_MAX ? mx : avg_round(acc, cnt);
                    out[(oy * so.w + ox) * so.c + o] = (int8_t)clamp_act(v, &l->activation);
                } else {
                    if (acc < INT32_MIN || acc > INT32_MAX) {
                        return 0;
                    }
                    out[(oy * so.w + ox) * so.c + o] = (int8_t)clamp_act(
                        (int64_t)fz_requant((int32_t)acc, l->quant.multiplier[o],
                                            l->quant.shift[o], l->rounding == PE_ROUND_SINGLE) +
                            l->output_offset,
                        &l->activation);
                }
            }
        }
    }
    return 1;
}

/* Output shape of one layer by the header's rule; 0 if none. */
static int layer_shape(const pe_stripe_layer *l, shape si, shape *so)
{
    int64_t h, w;
    so->c = l->out_c;
    if (si.h < 1 || si.w < 1) {
        return 0;
    }
    switch (l->op) {
    case PE_STRIPE_UPSAMPLE2X:
        if (si.h > INT32_MAX / 2 || si.w > INT32_MAX / 2) {
            return 0;
        }
        so->h = 2 * si.h;
        so->w = 2 * si.w;
        return 1;
    case PE_STRIPE_UPSAMPLE:
    case PE_STRIPE_DEPTH_TO_SPACE:
    case PE_STRIPE_RESIZE_BILINEAR:
        if (l->stride.h < 1 || l->stride.w < 1 || si.h > INT32_MAX / l->stride.h ||
            si.w > INT32_MAX / l->stride.w) {
            return 0;
        }
        so->h = si.h * l->stride.h;
        so->w = si.w * l->stride.w;
        return 1;
    case PE_STRIPE_CROP:
        /* (wild paddings: int64, and no shape unless a row and a column stay) */
        h = (int64_t)si.h - l->padding.bottom;
        w = (int64_t)si.w - l->padding.right;
        if (l->padding.bottom < 0 || l->padding.right < 0 || h < 1 || w < 1) {
            return 0;
        }
        so->h = (int32_t)h;
        so->w = (int32_t)w;
        return 1;
    case PE_STRIPE_POINTWISE:
    case PE_STRIPE_ADD:
    case PE_STRIPE_CONCAT:
    case PE_STRIPE_TABLE:
        *so = si;
        so->c = l->out_c;
        return 1;
    default:
        if (l->stride.h < 1 || l->stride.w < 1) {
            return 0;
        }
        /* the window's extent: (k - 1) * dilation + 1 */
        h = ((int64_t)si.h + l->padding.top + l->padding.bottom -
             (((int64_t)l->kernel.h - 1) * (l->dilation.h > 1 ? l->dilation.h : 1) + 1));
        w = ((int64_t)si.w + l->padding.left + l->padding.right -
             (((int64_t)l->kernel.w - 1) * (l->dilation.w > 1 ? l->dilation.w : 1) + 1));
        if (h < 0 || w < 0 || h / l->stride.h >= INT32_MAX || w / l->stride.w >= INT32_MAX) {
            return 0;
        }
        so->h = (int32_t)(h / l->stride.h + 1);
        so->w = (int32_t)(w / l->stride.w + 1);
        return 1;
    }
}

typedef struct {
    pe_stripe_layer layers[MAX_LAYERS];
    int8_t *weights[MAX_LAYERS];
    int32_t *bias[MAX_LAYERS], *mult[MAX_LAYERS], *shift[MAX_LAYERS];
    int32_t n;
} net_store;

static void free_net(net_store *s)
{
    int32_t i;
    for (i = 0; i < MAX_LAYERS; i++) {
        free(s->weights[i]);
        free(s->bias[i]);
        free(s->mult[i]);
        free(s->shift[i]);
    }
}

static void draw_quant(fz_reader *r, pe_per_tensor_quant *q)
{
    q->multiplier = fz_wild(r, 1 << 30, 0x7FFFFFFF);
    q->shift = fz_wild(r, -20, 0);
}

/* Draws layer L on input shape si; shapes[] holds every earlier output
 * (shapes[0] is the network input) so an add can find a matching branch. */
static void draw_layer(fz_reader *r, net_store *s, int32_t L, shape si, const shape *shapes)
{
    pe_stripe_layer *l = &s->layers[L];
    size_t nw = 0;
    int32_t o, j;
    memset(l, 0, sizeof(*l));
    l->op = (pe_stripe_op)fz_wild(r, 0, 12);
    l->in_c = fz_bool(r) ? si.c : fz_wild(r, 1, 6); /* usually chained */
    l->kernel.h = fz_wild(r, 1, 5);
    l->kernel.w = fz_wild(r, 1, 5);
    l->stride.h = fz_wild(r, 1, 3);
    l->stride.w = fz_wild(r, 1, 3);
    l->padding.top = fz_wild(r, 0, l->kernel.h > 1 ? l->kernel.h - 1 : 0);
    l->padding.bottom = fz_wild(r, 0, l->kernel.h > 1 ? l->kernel.h - 1 : 0);
    l->padding.left = fz_wild(r, 0, l->kernel.w > 1 ? l->kernel.w - 1 : 0);
    l->padding.right = fz_wild(r, 0, l->kernel.w > 1 ? l->kernel.w - 1 : 0);
    l->input_offset = fz_wild(r, -127, 128);
    l->output_offset = fz_wild(r, -128, 127);
    l->activation.min = fz_wild(r, -128, 127);
    l->activation.max = fz_wild(r, l->activation.min < 127 ? l->activation.min : 127, 127);
    l->rounding = (pe_rounding)fz_wild(r, 0, 1);
    l->pool_kind = (pe_pool_kind)fz_wild(r, 0, 1);
    switch (l->op) {
    case PE_STRIPE_CONV:
    case PE_STRIPE_POINTWISE:
        l->out_c = fz_wild(r, 1, 6);
        break;
    case PE_STRIPE_DEPTHWISE:
        l->out_c = (int32_t)((int64_t)l->in_c * fz_wild(r, 1, 2));
        break;
    case PE_STRIPE_ADD:
        l->out_c = l->in_c;
        l->add.from_layer = fz_wild(r, -1, L - 1);
        for (j = L - 1; j >= -1; j--) { /* prefer an earlier output of the same shape */
            const shape b = shapes[j + 1];
            if (b.h == si.h && b.w == si.w && b.c == si.c && fz_bool(r)) {
                l->add.from_layer = j;
                break;
            }
        }
        l->add.left_shift = fz_wild(r, 0, 22);
        l->add.main_offset = fz_wild(r, -127, 128);
        l->add.branch_offset = fz_wild(r, -127, 128);
        draw_quant(r, &l->add.main_quant);
        draw_quant(r, &l->add.branch_quant);
        draw_quant(r, &l->add.out_quant);
        l->add.out_quant.shift = fz_wild(r, -31, -10);
        break;
    case PE_STRIPE_CONCAT:
        l->add.from_layer = fz_wild(r, -1, L - 1);
        for (j = L - 1; j >= -1; j--) { /* prefer an earlier output of the same size */
            const shape b = shapes[j + 1];
            if (b.h == si.h && b.w == si.w && fz_bool(r)) {
                l->add.from_layer = j;
                break;
            }
        }
        {
            /* the two channel counts (wild ones included) without int32 overflow */
            const int from_ok = l->add.from_layer >= -1 && l->add.from_layer < L;
            const int64_t oc = (int64_t)l->in_c + (from_ok ? shapes[l->add.from_layer + 1].c : 1);
            l->out_c = oc > 0x7FFFFFFF ? 0x7FFFFFFF : (int32_t)oc;
        }
        l->add.left_shift = fz_wild(r, 0, 1);
        break;
    case PE_STRIPE_TABLE: {
        /* one table for every channel or one per channel (a wild count now and then) */
        const int32_t tc = fz_bool(r) ? 1 : (fz_u8(r) == 7 ? fz_wild(r, 1, 6) : l->in_c);
        l->out_c = l->in_c;
        l->kernel.h = l->kernel.w = 1;
        l->stride.h = l->stride.w = 1;
        l->padding.top = l->padding.bottom = l->padding.left = l->padding.right = 0;
        l->table_channels = tc;
        if (tc >= 1 && tc <= 64) {
            s->weights[L] = (int8_t *)fz_alloc((size_t)tc * 256u);
            fz_fill_s8(r, s->weights[L], (size_t)tc * 256u);
            l->table = s->weights[L];
        }
        return;
    }
    case PE_STRIPE_DEPTH_TO_SPACE: {
        /* block stride.h, the same along both axes unless a byte says
         * otherwise; often the largest block whose square divides in_c */
        int64_t b2;
        if (fz_bool(r)) {
            l->stride.h = l->in_c % 9 == 0 ? 3 : (l->in_c % 4 == 0 ? 2 : l->stride.h);
        }
        b2 = (int64_t)l->stride.h * l->stride.h;
        if (fz_u8(r) != 5) {
            l->stride.w = l->stride.h;
        }
        l->out_c = b2 > 0 && l->in_c % b2 == 0 ? (int32_t)(l->in_c / b2) : fz_wild(r, 1, 6);
        break;
    }
    case PE_STRIPE_SPACE_TO_DEPTH: {
        /* block kernel.h, mostly with the stride, no padding and b * b * in_c
         * outputs its kind asks for, now and then not (the executor refuses) */
        const int64_t b = l->kernel.h < 2 ? 2 : l->kernel.h;
        int64_t oc;
        if (fz_u8(r) != 5) {
            l->kernel.h = l->kernel.w = l->stride.h = l->stride.w = (int32_t)b;
            l->padding.top = l->padding.bottom = l->padding.left = l->padding.right = 0;
        }
        /* a wild block or in_c: keep the product in int64 and out_c in int32 */
        oc = b <= 65536 && l->in_c >= 0 && l->in_c <= 65536 ? b * b * l->in_c : 0x7FFFFFFF;
        l->out_c = oc > 0x7FFFFFFF ? 0x7FFFFFFF : (int32_t)oc;
        break;
    }
    case PE_STRIPE_RESIZE_BILINEAR: {
        /* factors 1, 2, 3 or 4 per axis (the stride draws, or a byte), flags
         * 0..2 in add.left_shift (a wild value now and then: refused) */
        static const int32_t fac[4] = {1, 2, 4, 3};
        if (fz_bool(r)) {
            l->stride.h = fac[fz_u8(r) & 3u];
            l->stride.w = fz_bool(r) ? l->stride.h : fac[fz_u8(r) & 3u];
        }
        l->add.left_shift = fz_wild(r, 0, 2);
        l->out_c = l->in_c;
        break;
    }
    case PE_STRIPE_CROP:
        /* rows, columns dropped at the end in the bottom and right padding
         * (the top and left ones 0 unless a byte says otherwise: refused) */
        l->padding.bottom = fz_wild(r, 0, 2);
        l->padding.right = fz_wild(r, 0, 2);
        if (fz_u8(r) != 9) {
            l->padding.top = l->padding.left = 0;
        }
        l->out_c = l->in_c;
        break;
    default: /* pool, upsample (factors stride.h, stride.w) */
        l->out_c = l->in_c;
        break;
    }
    if (fz_u8(r) == 3) {
        l->out_c = fz_wild(r, 1, 6); /* an out_c that may not fit the kind */
    }
    /* now and then a grouped conv: often groups dividing both channel
     * counts, sometimes a wild value (on any kind) the executor must refuse */
    if (fz_u8(r) % 4 == 2) {
        l->groups = fz_wild(r, 1, 4);
        if (l->op == PE_STRIPE_CONV && fz_bool(r) && l->in_c >= 2 && l->in_c % 2 == 0 &&
            l->out_c % 2 == 0) {
            l->groups = l->in_c % 4 == 0 && l->out_c % 4 == 0 && fz_bool(r) ? 4 : 2;
        }
    }
    /* weights sized by the layout the header gives for the final out_c */
    if (l->kernel.h >= 1 && l->kernel.w >= 1 && l->in_c >= 1 && l->out_c >= 1 &&
        l->kernel.h <= 64 && l->kernel.w <= 64 && l->in_c <= 4096 && l->out_c <= 4096) {
        if (l->op == PE_STRIPE_CONV) {
            nw = (size_t)l->out_c * (size_t)l->kernel.h * (size_t)l->kernel.w * (size_t)group_c(l);
        } else if (l->op == PE_STRIPE_DEPTHWISE) {
            nw = (size_t)l->kernel.h * (size_t)l->kernel.w * (size_t)l->out_c;
        } else if (l->op == PE_STRIPE_POINTWISE) {
            nw = (size_t)l->out_c * (size_t)l->in_c;
        }
    }
    if (nw > 0 && nw <= MAX_MAP && l->out_c >= 1 && l->out_c <= 64) {
        s->weights[L] = (int8_t *)fz_alloc(nw);
        fz_fill_s8(r, s->weights[L], nw);
        s->mult[L] = (int32_t *)fz_alloc(sizeof(int32_t) * (size_t)l->out_c);
        s->shift[L] = (int32_t *)fz_alloc(sizeof(int32_t) * (size_t)l->out_c);
        if (fz_bool(r)) {
            s->bias[L] = (int32_t *)fz_alloc(sizeof(int32_t) * (size_t)l->out_c);
        }
        for (o = 0; o < l->out_c; o++) {
            s->mult[L][o] = fz_wild(r, 1 << 30, 0x7FFFFFFF);
            s->shift[L][o] = fz_wild(r, -14, -4);
            if (s->bias[L]) {
                s->bias[L][o] = fz_wild(r, -4000, 4000);
            }
        }
        l->weights = s->weights[L];
        l->bias = s->bias[L];
        l->quant.multiplier = s->mult[L];
        l->quant.shift = s->shift[L];
    }
    /* now and then a dilated conv / depthwise (a wild value on any kind) */
    if (fz_u8(r) % 4 == 1) {
        l->dilation.h = fz_wild(r, 1, 3);
        l->dilation.w = fz_wild(r, 1, 3);
    }
}

/* A row sink filling a frame: rows must come once, in order, whole. */
typedef struct {
    int8_t *frame;
    int32_t row_bytes, rows, next, bad;
} sink_frame;

static pe_status frame_sink(void *user, int32_t row, const int8_t *src, int32_t n)
{
    sink_frame *f = (sink_frame *)user;
    if (row != f->next || row >= f->rows || n != f->row_bytes) {
        f->bad++;
        return PE_ERR_ARG;
    }
    memcpy(f->frame + (size_t)row * (size_t)n, src, (size_t)n);
    f->next = row + 1;
    return PE_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size_in);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size_in)
{
    fz_reader r = {data, size_in};
    net_store s;
    pe_stripe_net net;
    pe_dims out_dims, in_dims;
    shape shapes[MAX_LAYERS + 1];
    int8_t *maps[MAX_LAYERS + 1];
    int8_t *got = NULL;
    uint8_t *block = NULL;
    uint8_t *split_a = NULL;
    uint8_t *split_b = NULL;
    int32_t L, stripe_w, block_w, size = -1;
    int64_t predicted = -1;
    uint64_t ref_macs = 0, work = 0;
    pe_status st;
    pe_context ctx;
    pe_stats stats;
    int ok = 1;

    memset(&s, 0, sizeof(s));
    memset(maps, 0, sizeof(maps));
    s.n = fz_wild(&r, 1, MAX_LAYERS);
    in_dims.n = fz_wild(&r, 1, 1);
    in_dims.h = fz_wild(&r, 1, 16);
    in_dims.w = fz_wild(&r, 1, 16);
    in_dims.c = fz_wild(&r, 1, 5);
    shapes[0].h = in_dims.h;
    shapes[0].w = in_dims.w;
    shapes[0].c = in_dims.c;
    stripe_w = fz_wild(&r, 1, 20);
    block_w = fz_wild(&r, 1, 20);
    net.layers = s.layers;
    net.n_layers = s.n;
    net.input = in_dims;
    if (s.n < 1 || s.n > MAX_LAYERS) {
        /* the layer table is MAX_LAYERS long: the count is a lie the
         * executor must catch before reading beyond PE_STRIPE_MAX_LAYERS */
        if (s.n > MAX_LAYERS && s.n <= PE_STRIPE_MAX_LAYERS) {
            return 0;
        }
        FZ_CHECK(pe_stripe_output_dims(&net, &out_dims) != PE_OK, "n_layers %d accepted", s.n);
        return 0;
    }
    for (L = 0; L < s.n; L++) {
        draw_layer(&r, &s, L, shapes[L], shapes);
        if (!layer_shape(&s.layers[L], shapes[L], &shapes[L + 1])) {
            shapes[L + 1].h = shapes[L + 1].w = 0;
        }
        shapes[L + 1].c = s.layers[L].out_c;
    }
    if (fz_verbose()) {
        fprintf(stderr, "case: %d layers on %dx%dx%d, stripe %d block %d\n", s.n, in_dims.h,
                in_dims.w, in_dims.c, stripe_w, block_w);
        for (L = 0; L < s.n; L++) {
            const pe_stripe_layer *l = &s.layers[L];
            fprintf(stderr,
                    "  L%d op %d in_c %d out_c %d k %dx%d s %dx%d pad t%d b%d l%d r%d offs %d/%d "
                    "act [%d,%d] round %d pool %d add from %d shift %d dil %dx%d weights %s\n",
                    L, l->op, l->in_c, l->out_c, l->kernel.h, l->kernel.w, l->stride.h,
                    l->stride.w, l->padding.top, l->padding.bottom, l->padding.left,
                    l->padding.right, l->input_offset, l->output_offset, l->activation.min,
                    l->activation.max, l->rounding, l->pool_kind, l->add.from_layer,
                    l->add.left_shift, l->dilation.h, l->dilation.w, l->weights ? "yes" : "no");
        }
    }
    if (in_dims.h > 4096 || in_dims.w > 4096) {
        /* the network check dry-runs the row schedule over the image height
         * (time proportional to it, by design): keep huge images out */
        goto done;
    }
    st = pe_stripe_output_dims(&net, &out_dims);
    if (st != PE_OK) {
        int8_t one[4] = {0}, res[4];
        uint64_t scratch[64];
        ctx.buf = scratch;
        ctx.size = (int32_t)sizeof(scratch);
        ctx.stats = NULL;
        FZ_CHECK(pe_stripe_get_buffer_size_s8(&net, stripe_w, block_w, &size) != PE_OK,
                 "output_dims said %d, size query said OK", st);
        FZ_CHECK(pe_stripe_run_s8(&ctx, &net, stripe_w, block_w, &in_dims, one, &out_dims, res) !=
                     PE_OK,
                 "output_dims said %d, run said OK", st);
        goto done;
    }
    /* an accepted network has the shapes the header's rules give */
    FZ_CHECK(out_dims.n == 1 && out_dims.h == shapes[s.n].h && out_dims.w == shapes[s.n].w &&
                 out_dims.c == shapes[s.n].c,
             "output dims %dx%dx%d, the layer rules give %dx%dx%d", out_dims.h, out_dims.w,
             out_dims.c, shapes[s.n].h, shapes[s.n].w, shapes[s.n].c);
    for (L = 0; L <= s.n; L++) {
        const size_t e = (size_t)shapes[L].h * (size_t)shapes[L].w * (size_t)shapes[L].c;
        if (e > MAX_MAP) {
            goto done;
        }
        if (L < s.n) {
            const pe_stripe_layer *l = &s.layers[L];
            const int windowed = l->op == PE_STRIPE_CONV || l->op == PE_STRIPE_DEPTHWISE ||
                                 l->op == PE_STRIPE_POOL;
            const uint64_t taps =
                windowed ? (uint64_t)l->kernel.h * (uint64_t)l->kernel.w : (uint64_t)1;
            work += (uint64_t)e * taps * (uint64_t)(l->out_c + 1);
        }
    }
    if (work > MAX_WORK) {
        goto done;
    }
    if (fz_verbose()) {
        fprintf(stderr, "accepted: output %dx%dx%d, compared with the full-frame reference\n",
                out_dims.h, out_dims.w, out_dims.c);
    }
    st = pe_stripe_get_buffer_size_s8(&net, stripe_w, block_w, &size);
    if (st != PE_OK) {
        FZ_CHECK(st == PE_ERR_ARG || st == PE_ERR_OVERFLOW, "size query status %d", st);
        FZ_CHECK(stripe_w < 1 || block_w < 1 || st == PE_ERR_OVERFLOW,
                 "size query refused valid widths %d/%d: %d", stripe_w, block_w, st);
        goto done;
    }
    FZ_CHECK(pe_stripe_predict_macs(&net, stripe_w, &predicted) == PE_OK, "predict_macs");
    if (size > (1 << 22)) {
        goto done; /* valid, but larger than this harness allocates */
    }

    /* the full-frame reference */
    for (L = 0; L <= s.n; L++) {
        maps[L] = (int8_t *)fz_alloc((size_t)shapes[L].h * shapes[L].w * shapes[L].c);
    }
    fz_fill_s8(&r, maps[0], (size_t)in_dims.h * in_dims.w * in_dims.c);
    for (L = 0; L < s.n && ok; L++) {
        const pe_stripe_layer *l = &s.layers[L];
        const int8_t *branch =
            l->op == PE_STRIPE_ADD || l->op == PE_STRIPE_CONCAT ? maps[l->add.from_layer + 1] : NULL;
        ok = ref_layer(l, maps[L], shapes[L], branch, maps[L + 1], shapes[L + 1], &ref_macs);
    }
    if (!ok) {
        /* an int32 accumulator overflow the network check let through:
         * the executor's result is undefined, so report it */
        FZ_FAIL("layer %d: accumulator leaves int32 on a network pe_stripe_output_dims accepted",
                L - 1);
    }

    got = (int8_t *)fz_alloc((size_t)out_dims.h * out_dims.w * out_dims.c);
    block = (uint8_t *)fz_alloc((size_t)size);
    fz_poison(block, (size_t)size);
    memset(&stats, 0, sizeof(stats));
    ctx.buf = block;
    ctx.size = size - 1;
    ctx.stats = &stats;
    st = pe_stripe_run_s8(&ctx, &net, stripe_w, block_w, &in_dims, maps[0], &out_dims, got);
    FZ_CHECK(st == PE_ERR_SCRATCH, "one byte short of the query: status %d", st);
    memset(&stats, 0, sizeof(stats));
    ctx.size = size;
    st = pe_stripe_run_s8(&ctx, &net, stripe_w, block_w, &in_dims, maps[0], &out_dims, got);
    FZ_CHECK(st == PE_OK, "run status %d on an accepted network", st);
    if (!fz_compare_s8("stripe output", got, maps[s.n],
                       (size_t)out_dims.h * out_dims.w * out_dims.c)) {
        FZ_FAIL("stripe execution differs from the full-frame model");
    }
    FZ_CHECK((int64_t)stats.macs == predicted, "measured macs %llu, predicted %lld",
             (unsigned long long)stats.macs, (long long)predicted);
    /* one stripe has no halo: never more work than full frame (less when a
     * strided consumer skips producer columns, which the executor never computes) */
    FZ_CHECK(stripe_w < out_dims.w || stats.macs <= ref_macs,
             "one stripe: %llu macs, full frame %llu", (unsigned long long)stats.macs,
             (unsigned long long)ref_macs);
    FZ_CHECK(stats.peak_bytes <= size, "peak_bytes %lld > %d", (long long)stats.peak_bytes,
             size);
    /* memories per part: the line stores in a block of their own; with one
     * stripe also the output streamed to a row sink. The same bytes. */
    {
        const int sink_ok = stripe_w >= out_dims.w;
        int32_t scratch = 0, lines = 0;
        pe_context lc;
        pe_row_sink snk;
        sink_frame f;
        st = pe_stripe_get_buffer_sizes_split_s8(&net, stripe_w, block_w, sink_ok ? PE_STRIPE_STREAM_OUT : 0,
                                                 &scratch, &lines);
        FZ_CHECK(st == PE_OK, "split size query status %d on an accepted network", st);
        split_a = (uint8_t *)fz_alloc((size_t)scratch);
        split_b = (uint8_t *)fz_alloc((size_t)lines);
        fz_poison(split_a, (size_t)scratch);
        fz_poison(split_b, (size_t)lines);
        memset(got, 0x5A, (size_t)out_dims.h * out_dims.w * out_dims.c);
        ctx.buf = split_a;
        ctx.size = scratch;
        ctx.stats = NULL;
        lc.buf = split_b;
        lc.size = lines;
        lc.stats = NULL;
        memset(&f, 0, sizeof(f));
        f.frame = got;
        f.row_bytes = out_dims.w * out_dims.c;
        f.rows = out_dims.h;
        snk.write = frame_sink;
        snk.user = &f;
        st = pe_stripe_run_split_s8(&ctx, &lc, &net, stripe_w, block_w, &in_dims, maps[0], NULL, &out_dims,
                                    sink_ok ? NULL : got, sink_ok ? &snk : NULL);
        FZ_CHECK(st == PE_OK, "split run status %d", st);
        FZ_CHECK(!sink_ok || (f.next == out_dims.h && f.bad == 0), "row sink: %d rows, %d bad", f.next, f.bad);
        if (!fz_compare_s8("split / streamed output", got, maps[s.n],
                           (size_t)out_dims.h * out_dims.w * out_dims.c)) {
            FZ_FAIL("split line stores (or the row sink) differ from the full-frame model");
        }
    }
done:
    for (L = 0; L <= MAX_LAYERS; L++) {
        free(maps[L]);
    }
    free(got);
    free(block);
    free(split_a);
    free(split_b);
    free_net(&s);
    return 0;
}
