/* Plain C tests of the stripe executor (pe_stripe.h) against a naive
 * full-frame layer-by-layer implementation written here, over a network with
 * every layer kind (conv 3x3 and 5x5 stride 2, depthwise with a channel
 * multiplier, average pooling, pointwise, x2 upsampling, a residual add, max
 * pooling) for many stripe and block widths; nearest-neighbour upsampling
 * by factors (3, 1) and depth to space (block 2); plus arena poisoning, an
 * unaligned arena and the error statuses. Built with
 * -fsanitize=address,undefined by tools/check_c.sh. */
#include <stdint.h>
#include <string.h>
#include "pyembed/pyembed.h"
#include "pyembed/pe_resize.h"
#include "pyembed/pe_stripe.h"
#include "pe_test.h"

#define H 20
#define W 26
#define MAXE (H * W * 8)
#define NL 9

static uint64_t rng_state = 0x243F6A8885A308D3ull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static int8_t rnd8(void) { return (int8_t)((int32_t)(rnd() % 255u) - 127); }

static void fill8(int8_t *p, int n)
{
    int i;
    for (i = 0; i < n; i++) {
        p[i] = rnd8();
    }
}

/* weights / quantization storage */
static int8_t w0[4 * 3 * 3 * 3], w1[4 * 5 * 5 * 4], w2[3 * 3 * 8], w4[4 * 8], w7[2 * 3 * 3 * 4];
static int32_t b0[4], b1[4], b2[8], b4[4], b7[2];
static int32_t m0[4], m1[4], m2[8], m4[4], m7[2];
static int32_t s0[4], s1[4], s2[8], s4[4], s7[2];
static pe_stripe_layer layers[NL];

static void quant(int32_t *m, int32_t *s, int32_t *b, int n, int32_t shift)
{
    int i;
    for (i = 0; i < n; i++) {
        m[i] = (int32_t)(0x40000000u + (rnd() & 0x3FFFFFFFu));
        s[i] = shift - (int32_t)(rnd() % 2u);
        b[i] = (int32_t)(rnd() % 4001u) - 2000;
    }
}

static pe_stripe_layer conv(pe_stripe_op op, int32_t ci, int32_t co, int32_t k, int32_t s, int32_t p,
                            const int8_t *w, const int32_t *b, const int32_t *m, const int32_t *sh)
{
    pe_stripe_layer l;
    memset(&l, 0, sizeof(l));
    l.op = op;
    l.in_c = ci;
    l.out_c = co;
    l.kernel.h = l.kernel.w = k;
    l.stride.h = l.stride.w = s;
    l.padding.top = l.padding.bottom = l.padding.left = l.padding.right = p;
    l.input_offset = 7;
    l.output_offset = -5;
    l.activation.min = -128;
    l.activation.max = 127;
    l.rounding = PE_ROUND_DOUBLE;
    l.weights = w;
    l.bias = b;
    l.quant.multiplier = m;
    l.quant.shift = sh;
    return l;
}

/* input 20x26x3 -> L0 conv3 (4) -> L1 conv5 s2 (4, 10x13) -> L2 dw3 x2 (8)
 * -> L3 avgpool 2x2 s1 pad bottom/right -> L4 pointwise (4) -> L5 upsample
 * (20x26) -> L6 add(L0) -> L7 conv3 (2) -> L8 maxpool 3x3 s1 pad 1 */
static void build(void)
{
    fill8(w0, (int)sizeof(w0));
    fill8(w1, (int)sizeof(w1));
    fill8(w2, (int)sizeof(w2));
    fill8(w4, (int)sizeof(w4));
    fill8(w7, (int)sizeof(w7));
    quant(m0, s0, b0, 4, -10);
    quant(m1, s1, b1, 4, -12);
    quant(m2, s2, b2, 8, -7);
    quant(m4, s4, b4, 4, -9);
    quant(m7, s7, b7, 2, -11);
    layers[0] = conv(PE_STRIPE_CONV, 3, 4, 3, 1, 1, w0, b0, m0, s0);
    layers[1] = conv(PE_STRIPE_CONV, 4, 4, 5, 2, 2, w1, b1, m1, s1);
    layers[2] = conv(PE_STRIPE_DEPTHWISE, 4, 8, 3, 1, 1, w2, NULL, m2, s2);
    layers[3] = conv(PE_STRIPE_POOL, 8, 8, 2, 1, 0, NULL, NULL, NULL, NULL);
    layers[3].padding.bottom = layers[3].padding.right = 1;
    layers[3].pool_kind = PE_POOL_AVG;
    layers[4] = conv(PE_STRIPE_POINTWISE, 8, 4, 1, 1, 0, w4, b4, m4, s4);
    layers[4].activation.min = -5; /* ReLU at the output zero point */
    layers[5] = conv(PE_STRIPE_UPSAMPLE2X, 4, 4, 1, 1, 0, NULL, NULL, NULL, NULL);
    layers[6] = conv(PE_STRIPE_ADD, 4, 4, 1, 1, 0, NULL, NULL, NULL, NULL);
    layers[6].add.from_layer = 0;
    layers[6].add.left_shift = 20;
    layers[6].add.main_offset = 5;
    layers[6].add.main_quant.multiplier = 1073741824;
    layers[6].add.main_quant.shift = -1;
    layers[6].add.branch_offset = 5;
    layers[6].add.branch_quant.multiplier = 1431655765;
    layers[6].add.branch_quant.shift = 0;
    layers[6].add.out_quant.multiplier = 1717986918;
    layers[6].add.out_quant.shift = -19;
    layers[6].output_offset = 3;
    layers[7] = conv(PE_STRIPE_CONV, 4, 2, 3, 1, 1, w7, b7, m7, s7);
    layers[8] = conv(PE_STRIPE_POOL, 2, 2, 3, 1, 1, NULL, NULL, NULL, NULL);
    layers[8].pool_kind = PE_POOL_MAX;
}

/* ---- naive full-frame reference ---- */

static int32_t finish(int32_t acc, const pe_stripe_layer *l, int32_t mult, int32_t shift)
{
    int64_t v = (int64_t)pe_fx_requant_mode(acc, mult, shift, l->rounding) + l->output_offset;
    return (int32_t)(v < l->activation.min ? l->activation.min
                                           : (v > l->activation.max ? l->activation.max : v));
}

static uint64_t ref_macs;

static void ref_layer(const pe_stripe_layer *l, const int8_t *in, int ih, int iw, const int8_t *branch,
                      int8_t *out, int *oh_out, int *ow_out)
{
    const int ci = l->in_c, co = l->out_c;
    int oh, ow, oy, ox, o, ky, kx, i;
    if (l->op == PE_STRIPE_UPSAMPLE2X) {
        for (oy = 0; oy < 2 * ih; oy++)
            for (ox = 0; ox < 2 * iw; ox++)
                for (o = 0; o < co; o++)
                    out[(oy * 2 * iw + ox) * co + o] = in[((oy / 2) * iw + ox / 2) * ci + o];
        *oh_out = 2 * ih;
        *ow_out = 2 * iw;
        return;
    }
    if (l->op == PE_STRIPE_CONCAT) {
        const int cb = co - ci;
        const int mfirst = l->add.left_shift ? cb : 0, bfirst = l->add.left_shift ? 0 : ci;
        for (i = 0; i < ih * iw; i++) {
            for (o = 0; o < ci; o++) {
                out[i * co + mfirst + o] = in[i * ci + o];
            }
            for (o = 0; o < cb; o++) {
                out[i * co + bfirst + o] = branch[i * cb + o];
            }
        }
        *oh_out = ih;
        *ow_out = iw;
        return;
    }
    if (l->op == PE_STRIPE_ADD) {
        const pe_stripe_add_params *p = &l->add;
        for (i = 0; i < ih * iw * co; i++) {
            const int32_t a = pe_fx_requant((in[i] + p->main_offset) * (1 << p->left_shift),
                                            p->main_quant.multiplier, p->main_quant.shift);
            const int32_t b = pe_fx_requant((branch[i] + p->branch_offset) * (1 << p->left_shift),
                                            p->branch_quant.multiplier, p->branch_quant.shift);
            out[i] = (int8_t)finish(a + b, l, p->out_quant.multiplier, p->out_quant.shift);
        }
        *oh_out = ih;
        *ow_out = iw;
        return;
    }
    oh = (ih + l->padding.top + l->padding.bottom - l->kernel.h) / l->stride.h + 1;
    ow = (iw + l->padding.left + l->padding.right - l->kernel.w) / l->stride.w + 1;
    for (oy = 0; oy < oh; oy++) {
        for (ox = 0; ox < ow; ox++) {
            for (o = 0; o < co; o++) {
                int32_t acc = l->bias != NULL ? l->bias[o] : 0;
                int32_t mx = -128, cnt = 0, sum = 0;
                for (ky = 0; ky < l->kernel.h; ky++) {
                    for (kx = 0; kx < l->kernel.w; kx++) {
                        const int iy = oy * l->stride.h - l->padding.top + ky;
                        const int ix = ox * l->stride.w - l->padding.left + kx;
                        const int8_t *px;
                        if (iy < 0 || iy >= ih || ix < 0 || ix >= iw) {
                            continue;
                        }
                        px = in + (iy * iw + ix) * ci;
                        if (l->op == PE_STRIPE_CONV || l->op == PE_STRIPE_POINTWISE) {
                            const int8_t *wk = l->weights + ((o * l->kernel.h + ky) * l->kernel.w + kx) * ci;
                            for (i = 0; i < ci; i++) {
                                acc += wk[i] * (px[i] + l->input_offset);
                                ref_macs++;
                            }
                        } else if (l->op == PE_STRIPE_DEPTHWISE) {
                            acc += l->weights[(ky * l->kernel.w + kx) * co + o] *
                                   (px[o / (co / ci)] + l->input_offset);
                            ref_macs++;
                        } else {
                            mx = px[o] > mx ? px[o] : mx;
                            sum += px[o];
                            cnt++;
                        }
                    }
                }
                if (l->op == PE_STRIPE_POOL) {
                    int32_t v = l->pool_kind == PE_POOL_MAX
                                    ? mx
                                    : (sum > 0 ? (sum + cnt / 2) / cnt : (sum - cnt / 2) / cnt);
                    v = v < l->activation.min ? l->activation.min : v;
                    v = v > l->activation.max ? l->activation.max : v;
                    out[(oy * ow + ox) * co + o] = (int8_t)v;
                } else {
                    out[(oy * ow + ox) * co + o] =
                        (int8_t)finish(acc, l, l->quant.multiplier[o], l->quant.shift[o]);
                }
            }
        }
    }
    *oh_out = oh;
    *ow_out = ow;
}

static int8_t maps[NL][MAXE];
static int8_t input[H * W * 3];
static int8_t output[H * W * 2];
static int8_t arena_mem[1 << 16];

static void reference(int *oh, int *ow)
{
    int L, h = H, w = W;
    const int8_t *in = input;
    ref_macs = 0;
    for (L = 0; L < NL; L++) {
        const int8_t *br = layers[L].op == PE_STRIPE_ADD ? maps[layers[L].add.from_layer] : NULL;
        ref_layer(&layers[L], in, h, w, br, maps[L], &h, &w);
        in = maps[L];
    }
    *oh = h;
    *ow = w;
}

static pe_stripe_net make_net(void)
{
    pe_stripe_net net;
    net.layers = layers;
    net.n_layers = NL;
    net.input.n = 1;
    net.input.h = H;
    net.input.w = W;
    net.input.c = 3;
    return net;
}

static int count_mismatches(const int8_t *a, const int8_t *b, int n)
{
    int i, bad = 0;
    for (i = 0; i < n; i++) {
        if (a[i] != b[i]) {
            if (bad < 5) {
                fprintf(stderr, "  element %d: got %d, expected %d\n", i, a[i], b[i]);
            }
            bad++;
        }
    }
    return bad;
}

static void test_bit_exact(void)
{
    static const int32_t stripes[] = {1, 2, 5, 7, 13, 25, 26, 1000};
    static const int32_t blocks[] = {1, 3, 16};
    pe_stripe_net net = make_net();
    pe_dims in_d = {1, H, W, 3};
    pe_dims out_d;
    int oh, ow;
    size_t si, bi;
    uint64_t full_macs = 0;
    reference(&oh, &ow);
    PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_OK);
    PE_CHECK_EQ(out_d.h, oh);
    PE_CHECK_EQ(out_d.w, ow);
    PE_CHECK_EQ(out_d.c, 2);
    for (si = 0; si < sizeof(stripes) / sizeof(stripes[0]); si++) {
        for (bi = 0; bi < sizeof(blocks) / sizeof(blocks[0]); bi++) {
            pe_stats stats;
            pe_context ctx;
            int32_t size = 0;
            int64_t predicted = 0;
            int bad;
            memset(&stats, 0, sizeof(stats));
            PE_CHECK_EQ(pe_stripe_get_buffer_size_s8(&net, stripes[si], blocks[bi], &size), PE_OK);
            PE_CHECK(size > 0 && size <= (int32_t)sizeof(arena_mem));
            ctx.buf = arena_mem;
            ctx.size = size;
            ctx.stats = &stats;
            memset(output, 0x55, sizeof(output));
            PE_CHECK_EQ(pe_stripe_run_s8(&ctx, &net, stripes[si], blocks[bi], &in_d, input, &out_d, output),
                        PE_OK);
            bad = count_mismatches(output, maps[NL - 1], oh * ow * 2);
            if (bad) {
                fprintf(stderr, "stripe %d block %d: %d mismatches\n", stripes[si], blocks[bi], bad);
            }
            PE_CHECK_EQ(bad, 0);
            PE_CHECK_EQ(pe_stripe_predict_macs(&net, stripes[si], &predicted), PE_OK);
            PE_CHECK_EQ(stats.macs, predicted);
            PE_CHECK(stats.peak_bytes > 0 && stats.peak_bytes <= size);
            if (stripes[si] >= W) {
                full_macs = stats.macs;
            } else {
                PE_CHECK(stats.macs > ref_macs);
            }
        }
    }
    PE_CHECK_EQ(full_macs, ref_macs); /* one stripe: no extra arithmetic */
}

static void test_arena_poison_and_alignment(void)
{
    pe_stripe_net net = make_net();
    pe_dims in_d = {1, H, W, 3};
    pe_dims out_d = {1, H, W, 2};
    pe_context ctx;
    int32_t size = 0;
    int oh, ow;
    reference(&oh, &ow);
    PE_CHECK_EQ(pe_stripe_get_buffer_size_s8(&net, 6, 4, &size), PE_OK);
    /* stale arena content must not leak into results; any alignment works */
    memset(arena_mem, 0x7F, sizeof(arena_mem));
    ctx.buf = arena_mem + 3;
    ctx.size = size;
    ctx.stats = NULL;
    PE_CHECK_EQ(pe_stripe_run_s8(&ctx, &net, 6, 4, &in_d, input, &out_d, output), PE_OK);
    PE_CHECK_EQ(count_mismatches(output, maps[NL - 1], oh * ow * 2), 0);
    memset(arena_mem, 0x80, sizeof(arena_mem));
    ctx.buf = arena_mem + 1;
    PE_CHECK_EQ(pe_stripe_run_s8(&ctx, &net, 6, 4, &in_d, input, &out_d, output), PE_OK);
    PE_CHECK_EQ(count_mismatches(output, maps[NL - 1], oh * ow * 2), 0);
}

static void test_errors(void)
{
    pe_stripe_net net = make_net();
    pe_stripe_layer saved;
    pe_dims in_d = {1, H, W, 3};
    pe_dims out_d = {1, H, W, 2};
    pe_dims bad_out = {1, H, W, 3};
    pe_context ctx;
    int32_t size = 0;
    int64_t macs;
    PE_CHECK_EQ(pe_stripe_get_buffer_size_s8(&net, 4, 4, &size), PE_OK);
    ctx.buf = arena_mem;
    ctx.size = size;
    ctx.stats = NULL;
    PE_CHECK_EQ(pe_stripe_get_buffer_size_s8(&net, 0, 4, &size), PE_ERR_ARG);
    PE_CHECK_EQ(pe_stripe_get_buffer_size_s8(&net, 4, 0, &size), PE_ERR_ARG);
    PE_CHECK_EQ(pe_stripe_get_buffer_size_s8(NULL, 4, 4, &size), PE_ERR_ARG);
    PE_CHECK_EQ(pe_stripe_get_buffer_size_s8(&net, 4, 4, NULL), PE_ERR_ARG);
    PE_CHECK_EQ(pe_stripe_predict_macs(&net, 0, &macs), PE_ERR_ARG);
    PE_CHECK_EQ(pe_stripe_run_s8(NULL, &net, 4, 4, &in_d, input, &out_d, output), PE_ERR_ARG);
    PE_CHECK_EQ(pe_stripe_run_s8(&ctx, &net, 0, 4, &in_d, input, &out_d, output), PE_ERR_ARG);
    PE_CHECK_EQ(pe_stripe_run_s8(&ctx, &net, 4, 4, &in_d, input, &bad_out, output), PE_ERR_ARG);
    ctx.size = size - 1;
    PE_CHECK_EQ(pe_stripe_run_s8(&ctx, &net, 4, 4, &in_d, input, &out_d, output), PE_ERR_SCRATCH);
    ctx.size = size;
    ctx.buf = NULL;
    PE_CHECK_EQ(pe_stripe_run_s8(&ctx, &net, 4, 4, &in_d, input, &out_d, output), PE_ERR_SCRATCH);
    ctx.buf = arena_mem;

    /* channel counts that do not chain */
    saved = layers[4];
    layers[4].in_c = 6;
    PE_CHECK_EQ(pe_stripe_get_buffer_size_s8(&net, 4, 4, &size), PE_ERR_ARG);
    layers[4] = saved;
    /* padding not smaller than the kernel */
    saved = layers[0];
    layers[0].padding.left = 3;
    PE_CHECK_EQ(pe_stripe_get_buffer_size_s8(&net, 4, 4, &size), PE_ERR_ARG);
    layers[0] = saved;
    /* kernel over the limit */
    saved = layers[3];
    layers[3].kernel.w = PE_STRIPE_MAX_KERNEL + 1;
    PE_CHECK_EQ(pe_stripe_get_buffer_size_s8(&net, 4, 4, &size), PE_ERR_UNSUPPORTED);
    layers[3] = saved;
    /* add from a later layer / of a different shape */
    saved = layers[6];
    layers[6].add.from_layer = 6;
    PE_CHECK_EQ(pe_stripe_get_buffer_size_s8(&net, 4, 4, &size), PE_ERR_ARG);
    layers[6].add.from_layer = 2;
    PE_CHECK_EQ(pe_stripe_get_buffer_size_s8(&net, 4, 4, &size), PE_ERR_ARG);
    layers[6] = saved;
    /* receptive field taller than the image */
    net.input.h = 12;
    PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_ERR_ARG);
    net.input.h = H;
    net.n_layers = 0;
    PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_ERR_ARG);
    net.n_layers = NL;
    PE_CHECK_EQ(pe_stripe_get_buffer_size_s8(&net, 4, 4, &size), PE_OK);
}

/* input 20x26x3 -> C0 conv3 (4) -> C1 maxpool 2x2 s2 -> C2 conv3 (4) -> C3
 * upsample -> C4 concat(C0) (8 channels; both orders) -> C5 conv3 (2): the
 * skip branch of a U-Net through a row-delay store, against the full-frame
 * reference, every stripe and block width; streamed rows give the same. */
static pe_status image_rows(void *user, int32_t row, int32_t col, int32_t n_cols, int8_t *dst)
{
    (void)user;
    memcpy(dst, input + ((size_t)row * W + (size_t)col) * 3, (size_t)n_cols * 3);
    return PE_OK;
}

static void test_concat(void)
{
    static pe_stripe_layer cl[6];
    static int8_t cmaps[6][MAXE];
    static int8_t cw5[2 * 3 * 3 * 8];
    static int32_t cm5[2], cs5[2], cb5[2];
    static const int32_t stripes[] = {1, 3, 8, 1000};
    pe_stripe_net net;
    pe_dims in_d = {1, H, W, 3}, out_d;
    pe_row_source src;
    int L, h, w, order;
    size_t si;
    fill8(cw5, (int)sizeof(cw5));
    quant(cm5, cs5, cb5, 2, -11);
    src.read = image_rows;
    src.user = NULL;
    for (order = 0; order < 2; order++) {
        const int8_t *in = input;
        cl[0] = conv(PE_STRIPE_CONV, 3, 4, 3, 1, 1, w0, b0, m0, s0);
        cl[1] = conv(PE_STRIPE_POOL, 4, 4, 2, 2, 0, NULL, NULL, NULL, NULL);
        cl[1].pool_kind = PE_POOL_MAX;
        cl[2] = conv(PE_STRIPE_CONV, 4, 4, 3, 1, 1, w7, b7, m7, s7);
        cl[2].out_c = 4;
        cl[2].weights = w1; /* 4x5x5x4 weights hold a 4x3x3x4 filter */
        cl[2].quant.multiplier = m1;
        cl[2].quant.shift = s1;
        cl[2].bias = b1;
        cl[3] = conv(PE_STRIPE_UPSAMPLE2X, 4, 4, 1, 1, 0, NULL, NULL, NULL, NULL);
        cl[4] = conv(PE_STRIPE_CONCAT, 4, 8, 1, 1, 0, NULL, NULL, NULL, NULL);
        cl[4].add.from_layer = 0;
        cl[4].add.left_shift = order;
        cl[5] = conv(PE_STRIPE_CONV, 8, 2, 3, 1, 1, cw5, cb5, cm5, cs5);
        h = H;
        w = W;
        for (L = 0; L < 6; L++) {
            ref_layer(&cl[L], in, h, w, L == 4 ? cmaps[0] : NULL, cmaps[L], &h, &w);
            in = cmaps[L];
        }
        net.layers = cl;
        net.n_layers = 6;
        net.input = in_d;
        PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_OK);
        PE_CHECK_EQ(out_d.h, h);
        PE_CHECK_EQ(out_d.w, w);
        PE_CHECK_EQ(out_d.c, 2);
        for (si = 0; si < sizeof(stripes) / sizeof(stripes[0]); si++) {
            pe_context ctx;
            int32_t size = 0;
            PE_CHECK_EQ(pe_stripe_get_buffer_size_s8(&net, stripes[si], 2, &size), PE_OK);
            PE_CHECK(size > 0 && size <= (int32_t)sizeof(arena_mem));
            ctx.buf = arena_mem;
            ctx.size = size;
            ctx.stats = NULL;
            memset(output, 0x55, sizeof(output));
            PE_CHECK_EQ(pe_stripe_run_s8(&ctx, &net, stripes[si], 2, &in_d, input, &out_d, output), PE_OK);
            PE_CHECK_EQ(count_mismatches(output, cmaps[5], h * w * 2), 0);
            PE_CHECK_EQ(pe_stripe_get_buffer_size_rows_s8(&net, stripes[si], 2, &size), PE_OK);
            ctx.size = size;
            memset(output, 0x55, sizeof(output));
            PE_CHECK_EQ(pe_stripe_run_rows_s8(&ctx, &net, stripes[si], 2, &src, &out_d, output), PE_OK);
            PE_CHECK_EQ(count_mismatches(output, cmaps[5], h * w * 2), 0);
        }
        /* a concat whose channel count does not add up, or a branch out of range */
        cl[4].out_c = 7;
        PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_ERR_ARG);
        cl[4].out_c = 8;
        cl[4].add.left_shift = 2;
        PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_ERR_ARG);
        cl[4].add.left_shift = order;
        cl[4].add.from_layer = 4;
        PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_ERR_ARG);
    }
}

/* Naive full-frame UPSAMPLE (fh = stride.h, fw = stride.w) and
 * DEPTH_TO_SPACE (block stride.h): out[y][x][c] = in[y / fh][x / fw][c]
 * and in[y / b][x / b][((y % b) * b + x % b) * co + c]. */
static void ref_expand(const pe_stripe_layer *l, const int8_t *in, int ih, int iw, int8_t *out, int *oh,
                       int *ow)
{
    const int fh = l->stride.h, fw = l->stride.w, ci = l->in_c, co = l->out_c;
    int y, x, c;
    for (y = 0; y < ih * fh; y++)
        for (x = 0; x < iw * fw; x++)
            for (c = 0; c < co; c++) {
                const int sub = l->op == PE_STRIPE_DEPTH_TO_SPACE ? ((y % fh) * fw + x % fw) * co : 0;
                out[(y * iw * fw + x) * co + c] = in[((y / fh) * iw + x / fw) * ci + sub + c];
            }
    *oh = ih * fh;
    *ow = iw * fw;
}

/* conv3 (4) -> max pool 2x2 s2 (10x13) -> upsample (3, 1) (30x13) -> conv3
 * (4) -> depth to space 2 (60x26x1): every stripe and block width against
 * the reference (arena poisoned), from the image and from the row source,
 * then the parameter errors. */
static void test_expand(void)
{
    static pe_stripe_layer el[5];
    static int8_t emaps[5][MAXE];
    static int8_t eout[MAXE];
    static const int32_t stripes[] = {1, 2, 5, 7, 1000};
    static const int32_t blocks[] = {1, 3, 16};
    pe_stripe_net net;
    pe_dims in_d = {1, H, W, 3}, out_d;
    pe_row_source src;
    const int8_t *in = input;
    int L, h = H, w = W;
    size_t si, bi;
    src.read = image_rows;
    src.user = NULL;
    el[0] = conv(PE_STRIPE_CONV, 3, 4, 3, 1, 1, w0, b0, m0, s0);
    el[1] = conv(PE_STRIPE_POOL, 4, 4, 2, 2, 0, NULL, NULL, NULL, NULL);
    el[1].pool_kind = PE_POOL_MAX;
    el[2] = conv(PE_STRIPE_UPSAMPLE, 4, 4, 1, 1, 0, NULL, NULL, NULL, NULL);
    el[2].stride.h = 3;
    el[2].stride.w = 1;
    el[3] = conv(PE_STRIPE_CONV, 4, 4, 3, 1, 1, w1, b1, m1, s1); /* 4x5x5x4 weights hold a 4x3x3x4 filter */
    el[4] = conv(PE_STRIPE_DEPTH_TO_SPACE, 4, 1, 1, 2, 0, NULL, NULL, NULL, NULL);
    for (L = 0; L < 5; L++) {
        if (el[L].op == PE_STRIPE_UPSAMPLE || el[L].op == PE_STRIPE_DEPTH_TO_SPACE) {
            ref_expand(&el[L], in, h, w, emaps[L], &h, &w);
        } else {
            ref_layer(&el[L], in, h, w, NULL, emaps[L], &h, &w);
        }
        in = emaps[L];
    }
    PE_CHECK_EQ(h, 60);
    PE_CHECK_EQ(w, 26);
    net.layers = el;
    net.n_layers = 5;
    net.input = in_d;
    PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_OK);
    PE_CHECK_EQ(out_d.h, 60);
    PE_CHECK_EQ(out_d.w, 26);
    PE_CHECK_EQ(out_d.c, 1);
    for (si = 0; si < sizeof(stripes) / sizeof(stripes[0]); si++) {
        for (bi = 0; bi < sizeof(blocks) / sizeof(blocks[0]); bi++) {
            pe_context ctx;
            int32_t size = 0;
            PE_CHECK_EQ(pe_stripe_get_buffer_size_s8(&net, stripes[si], blocks[bi], &size), PE_OK);
            PE_CHECK(size > 0 && size <= (int32_t)sizeof(arena_mem));
            ctx.buf = arena_mem;
            ctx.size = size;
            ctx.stats = NULL;
            memset(arena_mem, 0xA5, sizeof(arena_mem));
            memset(eout, 0x55, sizeof(eout));
            PE_CHECK_EQ(pe_stripe_run_s8(&ctx, &net, stripes[si], blocks[bi], &in_d, input, &out_d, eout), PE_OK);
            PE_CHECK_EQ(count_mismatches(eout, emaps[4], 60 * 26), 0);
            PE_CHECK_EQ(pe_stripe_get_buffer_size_rows_s8(&net, stripes[si], blocks[bi], &size), PE_OK);
            ctx.size = size;
            memset(eout, 0x55, sizeof(eout));
            PE_CHECK_EQ(pe_stripe_run_rows_s8(&ctx, &net, stripes[si], blocks[bi], &src, &out_d, eout), PE_OK);
            PE_CHECK_EQ(count_mismatches(eout, emaps[4], 60 * 26), 0);
        }
    }
    /* factors below 1 or above PE_STRIPE_MAX_FACTOR; a depth to space whose
     * channels are not block^2 * out_c or whose block differs per axis */
    el[2].stride.w = 0;
    PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_ERR_ARG);
    el[2].stride.w = PE_STRIPE_MAX_FACTOR + 1;
    PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_ERR_UNSUPPORTED);
    el[2].stride.w = 1;
    el[2].out_c = 3;
    PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_ERR_ARG);
    el[2].out_c = 4;
    el[4].out_c = 2;
    PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_ERR_ARG);
    el[4].out_c = 1;
    el[4].stride.w = 1;
    PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_ERR_ARG);
    el[4].stride.w = 2;
    PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_OK);
}

/* conv3 (4) -> max pool 2x2 s2 (10x13) -> resize_bilinear (fh, fw) with
 * each flag set -> crop (1 row, 3 columns) -> conv3 (4): every stripe and
 * block width against the whole-tensor kernel pe_resize_bilinear_s8 (== TFLM
 * in tests/test_ops_data.py) and a naive crop, arena poisoned; then the
 * parameter errors of both kinds. */
static void test_bilinear_crop(void)
{
    static pe_stripe_layer bl[5];
    static int8_t bmaps[5][MAXE];
    static int8_t bout[MAXE];
    static const int32_t stripes[] = {1, 2, 5, 1000};
    static const int32_t blocks[] = {1, 3, 16};
    static const int32_t factors[][2] = {{2, 2}, {4, 1}, {1, 2}};
    pe_stripe_net net;
    pe_dims in_d = {1, H, W, 3}, out_d;
    int32_t flags, fi;
    for (fi = 0; fi < 3; fi++) {
        for (flags = 0; flags <= 2; flags++) {
            pe_resize_params rp;
            pe_dims bi_d, bo_d;
            int h = H, w = W, y;
            size_t si, bi;
            bl[0] = conv(PE_STRIPE_CONV, 3, 4, 3, 1, 1, w0, b0, m0, s0);
            bl[1] = conv(PE_STRIPE_POOL, 4, 4, 2, 2, 0, NULL, NULL, NULL, NULL);
            bl[1].pool_kind = PE_POOL_MAX;
            bl[2] = conv(PE_STRIPE_RESIZE_BILINEAR, 4, 4, 1, 1, 0, NULL, NULL, NULL, NULL);
            bl[2].stride.h = factors[fi][0];
            bl[2].stride.w = factors[fi][1];
            bl[2].add.left_shift = flags;
            bl[3] = conv(PE_STRIPE_CROP, 4, 4, 1, 1, 0, NULL, NULL, NULL, NULL);
            bl[3].padding.bottom = 1;
            bl[3].padding.right = 3;
            bl[4] = conv(PE_STRIPE_CONV, 4, 4, 3, 1, 1, w1, b1, m1, s1);
            ref_layer(&bl[0], input, h, w, NULL, bmaps[0], &h, &w);
            ref_layer(&bl[1], bmaps[0], h, w, NULL, bmaps[1], &h, &w);
            rp.align_corners = flags & 1;
            rp.half_pixel_centers = (flags >> 1) & 1;
            bi_d.n = bo_d.n = 1;
            bi_d.h = h;
            bi_d.w = w;
            bi_d.c = bo_d.c = 4;
            bo_d.h = h * factors[fi][0];
            bo_d.w = w * factors[fi][1];
            PE_CHECK_EQ(pe_resize_bilinear_s8(&rp, &bi_d, bmaps[1], &bo_d, bmaps[2]), PE_OK);
            h = bo_d.h - 1;
            w = bo_d.w - 3;
            for (y = 0; y < h; y++) {
                memcpy(bmaps[3] + y * w * 4, bmaps[2] + y * bo_d.w * 4, (size_t)(w * 4));
            }
            ref_layer(&bl[4], bmaps[3], h, w, NULL, bmaps[4], &h, &w);
            net.layers = bl;
            net.n_layers = 5;
            net.input = in_d;
            PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_OK);
            PE_CHECK_EQ(out_d.h, h);
            PE_CHECK_EQ(out_d.w, w);
            for (si = 0; si < sizeof(stripes) / sizeof(stripes[0]); si++) {
                for (bi = 0; bi < sizeof(blocks) / sizeof(blocks[0]); bi++) {
                    pe_context ctx;
                    int32_t size = 0;
                    PE_CHECK_EQ(pe_stripe_get_buffer_size_s8(&net, stripes[si], blocks[bi], &size), PE_OK);
                    PE_CHECK(size > 0 && size <= (int32_t)sizeof(arena_mem));
                    ctx.buf = arena_mem;
                    ctx.size = size;
                    ctx.stats = NULL;
                    memset(arena_mem, 0xA5, sizeof(arena_mem));
                    memset(bout, 0x55, sizeof(bout));
                    PE_CHECK_EQ(pe_stripe_run_s8(&ctx, &net, stripes[si], blocks[bi], &in_d, input, &out_d, bout),
                                PE_OK);
                    PE_CHECK_EQ(count_mismatches(bout, bmaps[4], h * w * 4), 0);
                }
            }
        }
    }
    /* both flags, a flag word above 3, a factor of 0; a crop leaving no
     * row, a negative one, a top crop */
    bl[2].add.left_shift = 3;
    PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_ERR_ARG);
    bl[2].add.left_shift = 4;
    PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_ERR_ARG);
    bl[2].add.left_shift = 0;
    bl[2].stride.h = 0;
    PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_ERR_ARG);
    bl[2].stride.h = 2;
    bl[3].padding.bottom = 100;
    PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_ERR_ARG);
    bl[3].padding.bottom = -1;
    PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_ERR_ARG);
    bl[3].padding.bottom = 1;
    bl[3].padding.top = 1;
    PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_ERR_ARG);
    bl[3].padding.top = 0;
    PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_OK);
}

/* conv3 (4, 20x26) -> space to depth 2 (10x13x16) -> max pool 3x3 s1
 * pad 1: every stripe and block width against a naive full-frame
 * reference (out[y][x][(i * 2 + j) * 4 + c] = in[2y + i][2x + j][c]), image
 * and row source, arena poisoned; then the parameter errors. */
static void test_space_to_depth(void)
{
    static pe_stripe_layer sl[3];
    static int8_t smaps[3][MAXE];
    static int8_t sout[MAXE];
    static const int32_t stripes[] = {1, 2, 5, 1000};
    static const int32_t blocks[] = {1, 3, 16};
    pe_stripe_net net;
    pe_dims in_d = {1, H, W, 3}, out_d;
    pe_row_source src;
    int h = H, w = W, y, x, i, j, c;
    size_t si, bi;
    src.read = image_rows;
    src.user = NULL;
    sl[0] = conv(PE_STRIPE_CONV, 3, 4, 3, 1, 1, w0, b0, m0, s0);
    sl[1] = conv(PE_STRIPE_SPACE_TO_DEPTH, 4, 16, 2, 2, 0, NULL, NULL, NULL, NULL);
    sl[2] = conv(PE_STRIPE_POOL, 16, 16, 3, 1, 1, NULL, NULL, NULL, NULL);
    sl[2].pool_kind = PE_POOL_MAX;
    ref_layer(&sl[0], input, h, w, NULL, smaps[0], &h, &w);
    for (y = 0; y < H / 2; y++)
        for (x = 0; x < W / 2; x++)
            for (i = 0; i < 2; i++)
                for (j = 0; j < 2; j++)
                    for (c = 0; c < 4; c++)
                        smaps[1][(y * (W / 2) + x) * 16 + (i * 2 + j) * 4 + c] =
                            smaps[0][((2 * y + i) * W + 2 * x + j) * 4 + c];
    h = H / 2;
    w = W / 2;
    ref_layer(&sl[2], smaps[1], h, w, NULL, smaps[2], &h, &w);
    PE_CHECK_EQ(h, 10);
    PE_CHECK_EQ(w, 13);
    net.layers = sl;
    net.n_layers = 3;
    net.input = in_d;
    PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_OK);
    PE_CHECK_EQ(out_d.h, 10);
    PE_CHECK_EQ(out_d.w, 13);
    PE_CHECK_EQ(out_d.c, 16);
    for (si = 0; si < sizeof(stripes) / sizeof(stripes[0]); si++) {
        for (bi = 0; bi < sizeof(blocks) / sizeof(blocks[0]); bi++) {
            pe_context ctx;
            int32_t size = 0;
            PE_CHECK_EQ(pe_stripe_get_buffer_size_s8(&net, stripes[si], blocks[bi], &size), PE_OK);
            PE_CHECK(size > 0 && size <= (int32_t)sizeof(arena_mem));
            ctx.buf = arena_mem;
            ctx.size = size;
            ctx.stats = NULL;
            memset(arena_mem, 0xA5, sizeof(arena_mem));
            memset(sout, 0x55, sizeof(sout));
            PE_CHECK_EQ(pe_stripe_run_s8(&ctx, &net, stripes[si], blocks[bi], &in_d, input, &out_d, sout), PE_OK);
            PE_CHECK_EQ(count_mismatches(sout, smaps[2], 10 * 13 * 16), 0);
            PE_CHECK_EQ(pe_stripe_get_buffer_size_rows_s8(&net, stripes[si], blocks[bi], &size), PE_OK);
            ctx.size = size;
            memset(sout, 0x55, sizeof(sout));
            PE_CHECK_EQ(pe_stripe_run_rows_s8(&ctx, &net, stripes[si], blocks[bi], &src, &out_d, sout), PE_OK);
            PE_CHECK_EQ(count_mismatches(sout, smaps[2], 10 * 13 * 16), 0);
        }
    }
    /* the stride unlike the block, padding, out_c other than b * b * in_c,
     * a block of 1, a block not dividing the input (26 % 4 != 0) */
    sl[1].stride.w = 1;
    PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_ERR_ARG);
    sl[1].stride.w = 2;
    sl[1].padding.top = 1;
    PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_ERR_ARG);
    sl[1].padding.top = 0;
    sl[1].out_c = 12;
    PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_ERR_ARG);
    sl[1] = conv(PE_STRIPE_SPACE_TO_DEPTH, 4, 4, 1, 1, 0, NULL, NULL, NULL, NULL);
    PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_ERR_ARG);
    sl[1] = conv(PE_STRIPE_SPACE_TO_DEPTH, 4, 64, 4, 4, 0, NULL, NULL, NULL, NULL);
    net.n_layers = 2;
    PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_ERR_ARG);
    net.n_layers = 3;
    sl[1] = conv(PE_STRIPE_SPACE_TO_DEPTH, 4, 16, 2, 2, 0, NULL, NULL, NULL, NULL);
    PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_OK);
}

/* Streamed output: a row sink that copies each row into a frame, counts the
 * calls and the rows that came out of order or with the wrong length. */
typedef struct {
    int8_t *frame;
    int32_t row_bytes, rows, calls, next, bad, fail_at;
} sink_frame;

static pe_status frame_sink(void *user, int32_t row, const int8_t *src, int32_t n)
{
    sink_frame *f = (sink_frame *)user;
    f->calls++;
    if (row != f->next || n != f->row_bytes || row < 0 || row >= f->rows) {
        f->bad++;
        return PE_ERR_ARG;
    }
    if (row == f->fail_at) {
        return PE_ERR_STATE;
    }
    memcpy(f->frame + (size_t)row * (size_t)n, src, (size_t)n);
    f->next = row + 1;
    return PE_OK;
}

/* The 9-layer network (and the U-Net of test_concat's kind is the graph
 * tests' business) with its output streamed to a sink: the same bytes as the
 * full-frame reference from an image and from a row source, every block
 * width; one call per row, in order; the query counts exactly one output
 * row more (aligned); several stripes, a bad mask, a small arena and a
 * failing sink are refused. */
static void test_stream_output(void)
{
    static const int32_t blocks[] = {1, 3, 16};
    pe_stripe_net net = make_net();
    pe_dims in_d = {1, H, W, 3};
    pe_dims out_d;
    pe_row_source src;
    pe_row_sink snk;
    sink_frame f;
    pe_context ctx;
    pe_stats stats;
    int32_t plain = 0, in_only = 0, out_only = 0, both = 0;
    int oh, ow, from_rows;
    size_t bi;
    reference(&oh, &ow);
    PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_OK);
    src.read = image_rows;
    src.user = NULL;
    snk.write = frame_sink;
    snk.user = &f;
    for (bi = 0; bi < sizeof(blocks) / sizeof(blocks[0]); bi++) {
        PE_CHECK_EQ(pe_stripe_get_buffer_size_io_s8(&net, W, blocks[bi], 0, &plain), PE_OK);
        PE_CHECK_EQ(pe_stripe_get_buffer_size_io_s8(&net, W, blocks[bi], PE_STRIPE_STREAM_IN, &in_only), PE_OK);
        PE_CHECK_EQ(pe_stripe_get_buffer_size_io_s8(&net, W, blocks[bi], PE_STRIPE_STREAM_OUT, &out_only), PE_OK);
        PE_CHECK_EQ(pe_stripe_get_buffer_size_io_s8(&net, W, blocks[bi], PE_STRIPE_STREAM_IN | PE_STRIPE_STREAM_OUT,
                                                    &both), PE_OK);
        /* one output row (26 x 2 bytes), placed 8-aligned after the rest */
        PE_CHECK(out_only - plain >= ow * 2 && out_only - plain < ow * 2 + 8);
        PE_CHECK(both - in_only >= ow * 2 && both - in_only < ow * 2 + 8);
        for (from_rows = 0; from_rows < 2; from_rows++) {
            const int32_t size = from_rows ? both : out_only;
            memset(&f, 0, sizeof(f));
            memset(output, 0x55, sizeof(output));
            memset(arena_mem, 0x7F, sizeof(arena_mem));
            memset(&stats, 0, sizeof(stats));
            f.frame = output;
            f.row_bytes = ow * 2;
            f.rows = oh;
            f.fail_at = -1;
            ctx.buf = arena_mem + 1; /* any alignment */
            ctx.size = size;
            ctx.stats = &stats;
            PE_CHECK_EQ(pe_stripe_run_io_s8(&ctx, &net, W, blocks[bi], &in_d, from_rows ? NULL : input,
                                            from_rows ? &src : NULL, &out_d, NULL, &snk), PE_OK);
            PE_CHECK_EQ(f.calls, oh);
            PE_CHECK_EQ(f.bad, 0);
            PE_CHECK_EQ(count_mismatches(output, maps[NL - 1], oh * ow * 2), 0);
            PE_CHECK(stats.peak_bytes > 0 && stats.peak_bytes <= size);
            /* one byte short of the query */
            ctx.size = size - 1;
            PE_CHECK_EQ(pe_stripe_run_io_s8(&ctx, &net, W, blocks[bi], &in_d, from_rows ? NULL : input,
                                            from_rows ? &src : NULL, &out_d, NULL, &snk), PE_ERR_SCRATCH);
        }
    }
    ctx.buf = arena_mem;
    ctx.size = (int32_t)sizeof(arena_mem);
    ctx.stats = NULL;
    /* a failing sink stops the run with its status, after the rows before it */
    memset(&f, 0, sizeof(f));
    f.frame = output;
    f.row_bytes = ow * 2;
    f.rows = oh;
    f.fail_at = 5;
    PE_CHECK_EQ(pe_stripe_run_io_s8(&ctx, &net, W, 4, &in_d, input, NULL, &out_d, NULL, &snk), PE_ERR_STATE);
    PE_CHECK_EQ(f.calls, 6);
    /* several stripes: rows are not final when a stripe ends */
    f.fail_at = -1;
    PE_CHECK_EQ(pe_stripe_run_io_s8(&ctx, &net, W - 1, 4, &in_d, input, NULL, &out_d, NULL, &snk),
                PE_ERR_UNSUPPORTED);
    /* exactly one of output / sink, of input / rows; a sink without write */
    PE_CHECK_EQ(pe_stripe_run_io_s8(&ctx, &net, W, 4, &in_d, input, NULL, &out_d, output, &snk), PE_ERR_ARG);
    PE_CHECK_EQ(pe_stripe_run_io_s8(&ctx, &net, W, 4, &in_d, input, NULL, &out_d, NULL, NULL), PE_ERR_ARG);
    PE_CHECK_EQ(pe_stripe_run_io_s8(&ctx, &net, W, 4, &in_d, input, &src, &out_d, NULL, &snk), PE_ERR_ARG);
    snk.write = NULL;
    PE_CHECK_EQ(pe_stripe_run_io_s8(&ctx, &net, W, 4, &in_d, input, NULL, &out_d, NULL, &snk), PE_ERR_ARG);
    PE_CHECK_EQ(pe_stripe_get_buffer_size_io_s8(&net, W, 4, 4, &plain), PE_ERR_ARG);
}

/* Memories per part: the line stores and delay lines in a block of their
 * own (a second memory), the rest in ctx; the same bytes as the full-frame
 * reference at several stripe and block widths, with an image output and
 * with a row sink; the two sizes add up to the one-block query (give or take
 * the second block's alignment slack) and the line-store block holds
 * exactly the rings and branch stores of pe_stripe_buffer_breakdown. */
static int8_t lines_mem[1 << 15];

static void test_split_memories(void)
{
    static const int32_t stripes[] = {1, 5, W};
    static const int32_t blocks[] = {1, 3};
    pe_stripe_net net = make_net();
    pe_dims in_d = {1, H, W, 3};
    pe_dims out_d;
    int32_t ring[NL], temp[NL], branch[NL], brows[NL], fixed;
    int oh, ow;
    size_t si, bi;
    reference(&oh, &ow);
    PE_CHECK_EQ(pe_stripe_output_dims(&net, &out_d), PE_OK);
    for (si = 0; si < sizeof(stripes) / sizeof(stripes[0]); si++) {
        for (bi = 0; bi < sizeof(blocks) / sizeof(blocks[0]); bi++) {
            pe_context ctx, lc;
            pe_stats stats;
            int32_t plain = 0, scratch = 0, lines = 0, stores = 0;
            int L;
            PE_CHECK_EQ(pe_stripe_get_buffer_size_s8(&net, stripes[si], blocks[bi], &plain), PE_OK);
            PE_CHECK_EQ(pe_stripe_get_buffer_sizes_split_s8(&net, stripes[si], blocks[bi], 0, &scratch, &lines),
                        PE_OK);
            PE_CHECK_EQ(pe_stripe_buffer_breakdown(&net, stripes[si], blocks[bi], 0, ring, temp, branch, brows,
                                                   &fixed), PE_OK);
            for (L = 0; L < NL; L++) {
                stores += ring[L] + branch[L];
            }
            PE_CHECK_EQ(lines, stores + 7);
            PE_CHECK(scratch + lines >= plain && scratch + lines <= plain + 7 + 7);
            PE_CHECK(scratch < plain && lines <= (int32_t)sizeof(lines_mem));
            memset(arena_mem, 0x7F, sizeof(arena_mem));
            memset(lines_mem, 0x80, sizeof(lines_mem));
            memset(output, 0x55, sizeof(output));
            memset(&stats, 0, sizeof(stats));
            ctx.buf = arena_mem + 3;
            ctx.size = scratch;
            ctx.stats = &stats;
            lc.buf = lines_mem + 5;
            lc.size = lines;
            lc.stats = NULL;
            PE_CHECK_EQ(pe_stripe_run_split_s8(&ctx, &lc, &net, stripes[si], blocks[bi], &in_d, input, NULL, &out_d,
                                               output, NULL), PE_OK);
            PE_CHECK_EQ(count_mismatches(output, maps[NL - 1], oh * ow * 2), 0);
            PE_CHECK(stats.peak_bytes > 0 && stats.peak_bytes <= scratch + lines);
            lc.size = lines - 1;
            PE_CHECK_EQ(pe_stripe_run_split_s8(&ctx, &lc, &net, stripes[si], blocks[bi], &in_d, input, NULL, &out_d,
                                               output, NULL), PE_ERR_SCRATCH);
            lc.size = lines;
            ctx.size = scratch - 1;
            PE_CHECK_EQ(pe_stripe_run_split_s8(&ctx, &lc, &net, stripes[si], blocks[bi], &in_d, input, NULL, &out_d,
                                               output, NULL), PE_ERR_SCRATCH);
            /* the blocks must not overlap */
            ctx.size = scratch;
            lc.buf = arena_mem + 3 + scratch - 8;
            PE_CHECK_EQ(pe_stripe_run_split_s8(&ctx, &lc, &net, stripes[si], blocks[bi], &in_d, input, NULL, &out_d,
                                               output, NULL), PE_ERR_ARG);
        }
    }
    /* with a streamed input and output: one stripe */
    {
        pe_context ctx, lc;
        pe_row_source src;
        pe_row_sink snk;
        sink_frame f;
        int32_t scratch = 0, lines = 0;
        PE_CHECK_EQ(pe_stripe_get_buffer_sizes_split_s8(&net, W, 4, PE_STRIPE_STREAM_IN | PE_STRIPE_STREAM_OUT,
                                                        &scratch, &lines), PE_OK);
        src.read = image_rows;
        src.user = NULL;
        snk.write = frame_sink;
        snk.user = &f;
        memset(&f, 0, sizeof(f));
        memset(output, 0x55, sizeof(output));
        f.frame = output;
        f.row_bytes = ow * 2;
        f.rows = oh;
        f.fail_at = -1;
        ctx.buf = arena_mem;
        ctx.size = scratch;
        ctx.stats = NULL;
        lc.buf = lines_mem;
        lc.size = lines;
        lc.stats = NULL;
        PE_CHECK_EQ(pe_stripe_run_split_s8(&ctx, &lc, &net, W, 4, &in_d, NULL, &src, &out_d, NULL, &snk), PE_OK);
        PE_CHECK_EQ(f.calls, oh);
        PE_CHECK_EQ(count_mismatches(output, maps[NL - 1], oh * ow * 2), 0);
        PE_CHECK_EQ(pe_stripe_get_buffer_sizes_split_s8(&net, W, 4, 8, &scratch, &lines), PE_ERR_ARG);
    }
}

int main(void)
{
    build();
    fill8(input, (int)sizeof(input));
    test_concat();
    test_expand();
    test_bilinear_crop();
    test_space_to_depth();
    test_stream_output();
    test_split_memories();
    test_bit_exact();
    test_arena_poison_and_alignment();
    test_errors();
    return PE_TEST_END("test_stripe");
}
