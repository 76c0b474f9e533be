/* Plain C tests of reverse convolution (pe_conv.h): a naive gather
 * reference over pseudo-random geometries (stride > kernel, padding >=
 * kernel, dilation, groups, channel multipliers, positive shifts), the row
 * stream against the whole tensor, counters, and every status check.
 * Built with -fsanitize=address,undefined by tools/check_c.sh. */
#include <stdint.h>
#include <string.h>
#include "pyembed/pyembed.h"
#include "pyembed/pe_conv.h"
#include "pyembed/pe_fused.h"
#include "pyembed/pe_pool.h"
#include "pe_test.h"

#define MAX_IN 2048
#define MAX_W 2048
#define MAX_OUT 4096
#define MAX_C 32
#define MAX_SCRATCH 65536

static int8_t input[MAX_IN], weights[MAX_W], out_ref[MAX_OUT], out_got[MAX_OUT];
static int8_t out_stream[MAX_OUT];
static int32_t bias[MAX_C], mult[MAX_C], shift[MAX_C];
static int32_t scratch[MAX_SCRATCH / 4];

#define PE_CONV_REF_SEED 0x2545F4914F6CDD1Dull
#include "pe_conv_ref.h"

/* Draws a random valid case; returns 0 when the sizes exceed the buffers. */
static int draw_case(pe_conv_params *p, pe_dims *in, pe_dims *f, pe_dims *out, int depthwise)
{
    int32_t i, ocg;
    memset(p, 0, sizeof(*p));
    in->n = rnd_in(1, 2);
    in->h = rnd_in(1, 8);
    in->w = rnd_in(1, 8);
    f->h = rnd_in(1, 4);
    f->w = rnd_in(1, 4);
    draw_conv_params(p, 5);
    if (depthwise) {
        in->c = rnd_in(1, 6);
        p->ch_mult = rnd_in(1, 4);
        out->c = in->c * p->ch_mult;
        f->n = 1;
        f->c = out->c;
    } else {
        p->groups = rnd_in(1, 3);
        f->c = rnd_in(1, 5);
        ocg = rnd_in(1, 4);
        in->c = f->c * p->groups;
        out->c = ocg * p->groups;
        f->n = out->c;
    }
    draw_conv_out(p, in, f, out);
    if (in->n * in->h * in->w * in->c > MAX_IN || f->n * f->h * f->w * f->c > MAX_W ||
        out->n * out->h * out->w * out->c > MAX_OUT || out->c > MAX_C) {
        return 0;
    }
    for (i = 0; i < in->n * in->h * in->w * in->c; i++) {
        input[i] = (int8_t)rnd_in(-128, 127);
    }
    for (i = 0; i < f->n * f->h * f->w * f->c; i++) {
        weights[i] = (int8_t)rnd_in(-128, 127);
    }
    for (i = 0; i < out->c; i++) {
        bias[i] = rnd_in(-100000, 100000);
        mult[i] = rnd_in(1 << 30, PE_INT32_MAX);
        /* positive shifts too, and now and then the extremes of the range */
        shift[i] = (rnd() % 8u == 0u) ? (int32_t[]){-31, -30, 0, 29, 30}[rnd() % 5u] : rnd_in(-12, 6);
        if (rnd() % 16u == 0u) {
            mult[i] = 0;
        }
    }
    return 1;
}

static void random_cases(int depthwise)
{
    int iter, done = 0;
    for (iter = 0; iter < 400; iter++) {
        pe_conv_params p;
        pe_dims in, f, out;
        pe_stats stats;
        pe_context ctx;
        int32_t size = 0, i, bad = 0;
        long pairs;
        const int32_t *b;
        pe_status s;
        if (!draw_case(&p, &in, &f, &out, depthwise)) {
            continue;
        }
        b = (rnd() & 1u) ? bias : NULL;
        s = depthwise ? pe_depthwise_conv2d_rev_s8_get_buffer_size(&p, &in, &f, &out, &size)
                      : pe_conv2d_rev_s8_get_buffer_size(&p, &in, &f, &out, &size);
        PE_CHECK_EQ(s, PE_OK);
        if (size > MAX_SCRATCH) {
            continue;
        }
        pairs = ref_conv(&p, &in, &f, &out, depthwise, b, out_ref);
        memset(&stats, 0, sizeof(stats));
        ctx.buf = scratch;
        ctx.size = size;
        ctx.stats = &stats;
        {
            const pe_per_channel_quant q = {mult, shift};
            s = depthwise ? pe_depthwise_conv2d_rev_s8(&ctx, &p, &q, &in, input, &f, weights, b,
                                                       &out, out_got)
                          : pe_conv2d_rev_s8(&ctx, &p, &q, &in, input, &f, weights, b, &out,
                                             out_got);
            PE_CHECK_EQ(s, PE_OK);
            for (i = 0; i < out.n * out.h * out.w * out.c; i++) {
                bad += out_got[i] != out_ref[i];
            }
            PE_CHECK_EQ(bad, 0);
            /* pairs already counts every image */
            PE_CHECK_EQ(stats.macs, (uint64_t)pairs * (uint64_t)(depthwise ? out.c : out.c * f.c));
            PE_CHECK_EQ(stats.input_reads, (uint64_t)(in.n * in.h * in.w * in.c));

            /* the stream of the first image, popping after every push */
            if (in.n >= 1) {
                pe_conv_rev_stream st;
                int32_t y, idx, expect = 0, row = out.w * out.c;
                pe_dims in1 = in, out1 = out;
                in1.n = 1;
                out1.n = 1;
                s = depthwise ? pe_depthwise_conv2d_rev_stream_init_s8(&st, &ctx, &p, &q, &in1,
                                                                       &f, weights, b, &out1)
                              : pe_conv2d_rev_stream_init_s8(&st, &ctx, &p, &q, &in1, &f,
                                                             weights, b, &out1);
                PE_CHECK_EQ(s, PE_OK);
                for (y = 0; y <= in.h; y++) {
                    for (;;) {
                        s = pe_conv2d_rev_stream_pop_s8(&st, out_stream + expect * row, &idx);
                        PE_CHECK_EQ(s, PE_OK);
                        if (idx < 0) {
                            break;
                        }
                        PE_CHECK_EQ(idx, expect);
                        expect++;
                    }
                    if (y < in.h) {
                        s = pe_conv2d_rev_stream_push_s8(&st, input + y * in.w * in.c);
                        PE_CHECK_EQ(s, PE_OK);
                    }
                }
                PE_CHECK_EQ(expect, out.h);
                PE_CHECK_EQ(pe_conv2d_rev_stream_push_s8(&st, input), PE_ERR_STATE);
                PE_CHECK_EQ(memcmp(out_stream, out_ref, (size_t)(out.h * row)), 0);
            }
        }
        done++;
    }
    PE_CHECK(done > 100);
}

static void status_checks(void)
{
    pe_conv_params p;
    pe_dims in = {1, 4, 4, 2}, f = {3, 3, 3, 2}, out = {1, 4, 4, 3};
    pe_context ctx;
    const pe_per_channel_quant q = {mult, shift};
    int32_t size = 0, i;
    memset(&p, 0, sizeof(p));
    p.stride.h = p.stride.w = 1;
    p.dilation.h = p.dilation.w = 1;
    p.padding.top = p.padding.left = 1;
    p.groups = 1;
    p.activation.min = -128;
    p.activation.max = 127;
    for (i = 0; i < 3; i++) {
        mult[i] = 1 << 30;
        shift[i] = -4;
        bias[i] = 0;
    }
    PE_CHECK_EQ(pe_conv2d_rev_s8_get_buffer_size(&p, &in, &f, &out, &size), PE_OK);
    /* 2 ring rows (ceil(3/1) = 3 capped ... rows in flight) of 4x3, xo, pair lists */
    PE_CHECK(size > 0 && size <= MAX_SCRATCH);
    ctx.buf = scratch;
    ctx.size = size;
    ctx.stats = NULL;
    PE_CHECK_EQ(pe_conv2d_rev_s8(&ctx, &p, &q, &in, input, &f, weights, bias, &out, out_got),
                PE_OK);
    ctx.size = size - 1;
    PE_CHECK_EQ(pe_conv2d_rev_s8(&ctx, &p, &q, &in, input, &f, weights, bias, &out, out_got),
                PE_ERR_SCRATCH);
    ctx.size = size;
    ctx.buf = NULL;
    PE_CHECK_EQ(pe_conv2d_rev_s8(&ctx, &p, &q, &in, input, &f, weights, bias, &out, out_got),
                PE_ERR_SCRATCH);
    ctx.buf = (char *)scratch + 1; /* misaligned */
    PE_CHECK_EQ(pe_conv2d_rev_s8(&ctx, &p, &q, &in, input, &f, weights, bias, &out, out_got),
                PE_ERR_SCRATCH);
    ctx.buf = scratch;
    PE_CHECK_EQ(pe_conv2d_rev_s8(NULL, &p, &q, &in, input, &f, weights, bias, &out, out_got),
                PE_ERR_ARG);
    PE_CHECK_EQ(pe_conv2d_rev_s8(&ctx, &p, &q, &in, NULL, &f, weights, bias, &out, out_got),
                PE_ERR_ARG);
    PE_CHECK_EQ(pe_conv2d_rev_s8(&ctx, &p, &q, &in, input, &f, NULL, bias, &out, out_got),
                PE_ERR_ARG);
    PE_CHECK_EQ(pe_conv2d_rev_s8(&ctx, &p, &q, &in, input, &f, weights, bias, &out, NULL),
                PE_ERR_ARG);
#define EXPECT_ARG(field, value)                                                              \
    do {                                                                                      \
        pe_conv_params bad = p;                                                               \
        bad.field = value;                                                                    \
        PE_CHECK_EQ(pe_conv2d_rev_s8_get_buffer_size(&bad, &in, &f, &out, &size), PE_ERR_ARG); \
        PE_CHECK_EQ(pe_conv2d_rev_s8(&ctx, &bad, &q, &in, input, &f, weights, bias, &out,      \
                                     out_got),                                                \
                    PE_ERR_ARG);                                                              \
    } while (0)
    EXPECT_ARG(stride.h, 0);
    EXPECT_ARG(stride.w, -1);
    EXPECT_ARG(dilation.w, 0);
    EXPECT_ARG(padding.top, -1);
    EXPECT_ARG(groups, 0);
    EXPECT_ARG(groups, 2); /* in_c 2 / 2 = 1 != filter.c 2 */
    EXPECT_ARG(input_offset, 129);
    EXPECT_ARG(output_offset, -129);
    EXPECT_ARG(activation.min, -129);
    EXPECT_ARG(activation.max, 128);
    {
        pe_conv_params bad = p;
        bad.activation.min = 10;
        bad.activation.max = 9;
        PE_CHECK_EQ(pe_conv2d_rev_s8_get_buffer_size(&bad, &in, &f, &out, &size), PE_ERR_ARG);
    }
    EXPECT_ARG(rounding, (pe_rounding)7);
    {
        pe_conv_params big = p;
        pe_dims wide = out;
        big.padding.top = PE_INT32_MAX - 2;
        PE_CHECK_EQ(pe_conv2d_rev_s8_get_buffer_size(&big, &in, &f, &out, &size), PE_ERR_OVERFLOW);
        big = p;
        big.stride.w = 1 << 30;
        wide.w = 3;
        PE_CHECK_EQ(pe_conv2d_rev_s8_get_buffer_size(&big, &in, &f, &wide, &size), PE_ERR_OVERFLOW);
    }
    {
        /* the fast size: the minimum one off the DSP build (this host
         * build), the same errors as the minimum query */
        int32_t fast = -1, min = -2;
        PE_CHECK_EQ(pe_conv2d_rev_s8_get_buffer_size(&p, &in, &f, &out, &min), PE_OK);
        PE_CHECK_EQ(pe_conv2d_rev_s8_get_fast_buffer_size(&p, &in, &f, &out, &fast), PE_OK);
        PE_CHECK_EQ(fast, min);
        PE_CHECK_EQ(pe_conv2d_rev_s8_get_fast_buffer_size(&p, &in, &f, &out, NULL), PE_ERR_ARG);
        {
            pe_conv_params big = p;
            big.padding.top = PE_INT32_MAX - 2;
            PE_CHECK_EQ(pe_conv2d_rev_s8_get_fast_buffer_size(&big, &in, &f, &out, &fast),
                        PE_ERR_OVERFLOW);
        }
    }
    size = 0;
    {
        pe_dims bad = out;
        bad.h = 0;
        PE_CHECK_EQ(pe_conv2d_rev_s8_get_buffer_size(&p, &in, &f, &bad, &size), PE_ERR_ARG);
        bad = out;
        bad.c = 4; /* filter.n 3 != out_c */
        PE_CHECK_EQ(pe_conv2d_rev_s8_get_buffer_size(&p, &in, &f, &bad, &size), PE_ERR_ARG);
        bad = f;
        bad.h = 0;
        PE_CHECK_EQ(pe_conv2d_rev_s8_get_buffer_size(&p, &in, &bad, &out, &size), PE_ERR_ARG);
        bad = out;
        bad.n = 2;
        PE_CHECK_EQ(pe_conv2d_rev_s8_get_buffer_size(&p, &in, &f, &bad, &size), PE_ERR_ARG);
        PE_CHECK_EQ(pe_conv2d_rev_s8_get_buffer_size(&p, &in, &f, &out, NULL), PE_ERR_ARG);
        /* depthwise: out_c must be in_c * ch_mult */
        p.ch_mult = 2;
        bad.n = 1;
        bad.h = 3;
        bad.w = 3;
        bad.c = 4;
        PE_CHECK_EQ(pe_depthwise_conv2d_rev_s8_get_buffer_size(&p, &in, &bad, &out, &size),
                    PE_ERR_ARG);
        bad.c = 3; /* filter.c must equal out_c */
        PE_CHECK_EQ(pe_depthwise_conv2d_rev_s8_get_buffer_size(&p, &in, &bad, &out, &size),
                    PE_ERR_ARG);
        bad.c = 4;
        {
            pe_dims o4 = {1, 4, 4, 4};
            PE_CHECK_EQ(pe_depthwise_conv2d_rev_s8_get_buffer_size(&p, &in, &bad, &o4, &size),
                        PE_OK);
            p.ch_mult = 0;
            PE_CHECK_EQ(pe_depthwise_conv2d_rev_s8_get_buffer_size(&p, &in, &bad, &o4, &size),
                        PE_ERR_ARG);
            p.ch_mult = 1;
        }
    }
    /* multiplier / shift out of range, accumulator overflow */
    PE_CHECK_EQ(pe_conv2d_rev_s8_get_buffer_size(&p, &in, &f, &out, &size), PE_OK);
    ctx.size = size;
    shift[1] = 31;
    PE_CHECK_EQ(pe_conv2d_rev_s8(&ctx, &p, &q, &in, input, &f, weights, bias, &out, out_got),
                PE_ERR_ARG);
    shift[1] = -4;
    mult[2] = -1;
    PE_CHECK_EQ(pe_conv2d_rev_s8(&ctx, &p, &q, &in, input, &f, weights, bias, &out, out_got),
                PE_ERR_ARG);
    mult[2] = 1 << 30;
    bias[0] = PE_INT32_MAX - 1000;
    PE_CHECK_EQ(pe_conv2d_rev_s8(&ctx, &p, &q, &in, input, &f, weights, bias, &out, out_got),
                PE_ERR_UNSUPPORTED);
    bias[0] = 0;
    /* streams take one image; pushing past the end or before popping is a state error */
    {
        pe_conv_rev_stream st;
        pe_dims in2 = in;
        int32_t idx;
        in2.n = 2;
        PE_CHECK_EQ(pe_conv2d_rev_stream_init_s8(&st, &ctx, &p, &q, &in2, &f, weights, bias, &out),
                    PE_ERR_ARG);
        PE_CHECK_EQ(pe_conv2d_rev_stream_init_s8(&st, &ctx, &p, &q, &in, &f, weights, bias, &out),
                    PE_OK);
        PE_CHECK_EQ(pe_conv2d_rev_stream_push_s8(&st, input), PE_OK);
        PE_CHECK_EQ(pe_conv2d_rev_stream_push_s8(&st, input), PE_OK);
        /* output row 0 (rows -1..1) is final now and not popped */
        PE_CHECK_EQ(pe_conv2d_rev_stream_push_s8(&st, input), PE_ERR_STATE);
        PE_CHECK_EQ(pe_conv2d_rev_stream_pop_s8(&st, out_got, &idx), PE_OK);
        PE_CHECK_EQ(idx, 0);
        PE_CHECK_EQ(pe_conv2d_rev_stream_pop_s8(&st, out_got, &idx), PE_OK);
        PE_CHECK_EQ(idx, -1);
        PE_CHECK_EQ(pe_conv2d_rev_stream_push_s8(&st, input), PE_OK);
        PE_CHECK_EQ(pe_conv2d_rev_stream_pop_s8(&st, out_got, NULL), PE_ERR_ARG);
    }
}


/* Naive max pooling of out_ref (the convolution output) into pool_ref. */
static void ref_maxpool(const pe_pool_params *pp, const pe_dims *co, const pe_dims *po,
                        const int8_t *src, int8_t *dst)
{
    int32_t n, py, px, c, wy, wx;
    for (n = 0; n < po->n; n++) {
        for (py = 0; py < po->h; py++) {
            for (px = 0; px < po->w; px++) {
                for (c = 0; c < po->c; c++) {
                    int32_t m = -128;
                    for (wy = 0; wy < pp->window.h; wy++) {
                        const int32_t y = py * pp->stride.h - pp->padding.top + wy;
                        for (wx = 0; wx < pp->window.w; wx++) {
                            const int32_t x = px * pp->stride.w - pp->padding.left + wx;
                            if (y >= 0 && y < co->h && x >= 0 && x < co->w) {
                                const int8_t v = src[((n * co->h + y) * co->w + x) * co->c + c];
                                m = v > m ? v : m;
                            }
                        }
                    }
                    m = m < pp->activation.min ? pp->activation.min : m;
                    m = m > pp->activation.max ? pp->activation.max : m;
                    dst[((n * po->h + py) * po->w + px) * po->c + c] = (int8_t)m;
                }
            }
        }
    }
}

static int8_t pool_ref[MAX_OUT], pool_got[MAX_OUT];

/* Every strategy and the fused stream against conv (gather) then max pool. */
static void fused_cases(void)
{
    int iter, done = 0;
    for (iter = 0; iter < 300; iter++) {
        pe_conv_params p;
        pe_pool_params pp;
        pe_dims in, f, co, po;
        pe_context ctx;
        pe_fused_counters cnt;
        const pe_per_channel_quant q = {mult, shift};
        int32_t size = 0, i, strategy, bad;
        pe_status s;
        if (!draw_case(&p, &in, &f, &co, 0)) {
            continue;
        }
        memset(&pp, 0, sizeof(pp));
        pp.kind = PE_POOL_MAX;
        pp.window.h = rnd_in(1, 4);
        pp.window.w = rnd_in(1, 4);
        pp.stride.h = rnd_in(1, 5);
        pp.stride.w = rnd_in(1, 5);
        pp.padding.top = rnd_in(0, 3);
        pp.padding.left = rnd_in(0, 3);
        pp.activation.min = rnd_in(-128, 0);
        pp.activation.max = rnd_in(0, 127);
        po = co;
        po.h = rnd_in(1, 4);
        po.w = rnd_in(1, 4);
        ref_conv(&p, &in, &f, &co, 0, bias, out_ref);
        ref_maxpool(&pp, &co, &po, out_ref, pool_ref);
        for (strategy = 0; strategy <= 4; strategy++) {
            s = strategy < 4 ? pe_conv_pool_strategy_get_buffer_size((pe_fuse_strategy)strategy, &p,
                                                                     &pp, &in, &f, &co, &po, &size)
                             : pe_conv_pool_rev_get_buffer_size(&p, &pp, &in, &f, &co, &po, &size);
            PE_CHECK_EQ(s, PE_OK);
            if (s != PE_OK || size > MAX_SCRATCH) {
                continue;
            }
            ctx.buf = scratch;
            ctx.size = size;
            ctx.stats = NULL;
            memset(pool_got, 0x55, sizeof(pool_got));
            s = strategy < 4 ? pe_conv_pool_strategy_s8(&ctx, (pe_fuse_strategy)strategy, &p, &q,
                                                        &pp, &in, input, &f, weights, bias, &co,
                                                        &po, pool_got, &cnt)
                             : pe_conv_pool_rev_s8(&ctx, &p, &q, &pp, &in, input, &f, weights,
                                                   bias, &co, &po, pool_got);
            PE_CHECK_EQ(s, PE_OK);
            bad = 0;
            for (i = 0; i < po.n * po.h * po.w * po.c; i++) {
                bad += pool_got[i] != pool_ref[i];
            }
            PE_CHECK_EQ(bad, 0);
            if (size > 0) {
                ctx.size = size - 1;
                s = strategy < 4 ? pe_conv_pool_strategy_s8(&ctx, (pe_fuse_strategy)strategy, &p,
                                                            &q, &pp, &in, input, &f, weights, bias,
                                                            &co, &po, pool_got, &cnt)
                                 : pe_conv_pool_rev_s8(&ctx, &p, &q, &pp, &in, input, &f,
                                                       weights, bias, &co, &po, pool_got);
                PE_CHECK_EQ(s, PE_ERR_SCRATCH);
            }
        }
        /* status checks: unknown strategy, other pooling kinds, channel mismatch */
        PE_CHECK_EQ(pe_conv_pool_strategy_get_buffer_size((pe_fuse_strategy)9, &p, &pp, &in, &f,
                                                          &co, &po, &size),
                    PE_ERR_ARG);
        pp.kind = PE_POOL_AVG;
        PE_CHECK_EQ(pe_conv_pool_strategy_get_buffer_size(PE_FUSE_REVERSE, &p, &pp, &in, &f, &co,
                                                          &po, &size),
                    PE_ERR_UNSUPPORTED);
        pp.kind = PE_POOL_MAX;
        po.c = co.c + 1;
        PE_CHECK_EQ(pe_conv_pool_rev_get_buffer_size(&p, &pp, &in, &f, &co, &po, &size),
                    PE_ERR_ARG);
        pp.window.h = 0;
        po.c = co.c;
        PE_CHECK_EQ(pe_conv_pool_strategy_get_buffer_size(PE_FUSE_NONE, &p, &pp, &in, &f, &co,
                                                          &po, &size),
                    PE_ERR_ARG);
        done++;
    }
    PE_CHECK(done > 100);
}

/* pe_conv_pool_rev_table_s8: conv, an element-wise table (one, or one per
 * channel), then max pool, against the reference conv mapped through the
 * table then pooled; a bad table channel count is refused. */
static int8_t mid_tab[MAX_OUT], table_buf[8 * 256];
static void fused_table_cases(void)
{
    int iter, done = 0;
    for (iter = 0; iter < 200; iter++) {
        pe_conv_params p;
        pe_pool_params pp;
        pe_dims in, f, co, po;
        pe_context ctx;
        const pe_per_channel_quant q = {mult, shift};
        int32_t size = 0, i, tc, bad;
        pe_status s;
        if (!draw_case(&p, &in, &f, &co, 0) || co.c > 8) {
            continue;
        }
        memset(&pp, 0, sizeof(pp));
        pp.kind = PE_POOL_MAX;
        pp.window.h = rnd_in(1, 3);
        pp.window.w = rnd_in(1, 3);
        pp.stride.h = rnd_in(1, 3);
        pp.stride.w = rnd_in(1, 3);
        pp.activation.min = -128;
        pp.activation.max = 127;
        po = co;
        po.h = (co.h - pp.window.h) / pp.stride.h + 1;
        po.w = (co.w - pp.window.w) / pp.stride.w + 1;
        if (po.h < 1 || po.w < 1) {
            continue;
        }
        tc = rnd_in(0, 1) ? co.c : 1;
        for (i = 0; i < tc * 256; i++) {
            table_buf[i] = (int8_t)rnd_in(-128, 127);
        }
        ref_conv(&p, &in, &f, &co, 0, bias, out_ref);
        for (i = 0; i < co.n * co.h * co.w * co.c; i++) {
            const int32_t ch = tc == 1 ? 0 : i % co.c;
            mid_tab[i] = table_buf[ch * 256 + (out_ref[i] + 128)];
        }
        ref_maxpool(&pp, &co, &po, mid_tab, pool_ref);
        PE_CHECK_EQ(pe_conv_pool_rev_get_buffer_size(&p, &pp, &in, &f, &co, &po, &size), PE_OK);
        if (size > MAX_SCRATCH) {
            continue;
        }
        ctx.buf = scratch;
        ctx.size = size;
        ctx.stats = NULL;
        memset(pool_got, 0x55, sizeof(pool_got));
        s = pe_conv_pool_rev_table_s8(&ctx, &p, &q, &pp, &in, input, &f, weights, bias, table_buf, tc,
                                      &co, &po, pool_got);
        PE_CHECK_EQ(s, PE_OK);
        bad = 0;
        for (i = 0; i < po.n * po.h * po.w * po.c; i++) {
            bad += pool_got[i] != pool_ref[i];
        }
        PE_CHECK_EQ(bad, 0);
        PE_CHECK_EQ(pe_conv_pool_rev_table_s8(&ctx, &p, &q, &pp, &in, input, &f, weights, bias,
                                              table_buf, co.c + 1, &co, &po, pool_got),
                    co.c + 1 == 1 ? PE_OK : PE_ERR_ARG);
        done++;
    }
    PE_CHECK(done > 50);
}

/* One given case with random tensors, whole tensor against ref_conv;
 * returns the mismatching elements, or -1 when a call fails. */
static int32_t run_case(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                        const pe_dims *out, int depthwise)
{
    const pe_per_channel_quant q = {mult, shift};
    pe_context ctx;
    int32_t i, size = 0, bad = 0;
    pe_status s;
    for (i = 0; i < in->n * in->h * in->w * in->c; i++) {
        input[i] = (int8_t)rnd_in(-128, 127);
    }
    for (i = 0; i < f->n * f->h * f->w * f->c; i++) {
        weights[i] = (int8_t)rnd_in(-128, 127);
    }
    for (i = 0; i < out->c; i++) {
        bias[i] = rnd_in(-100000, 100000);
        mult[i] = rnd_in(1 << 30, PE_INT32_MAX);
        shift[i] = rnd_in(-12, 0);
    }
    s = depthwise ? pe_depthwise_conv2d_rev_s8_get_buffer_size(p, in, f, out, &size)
                  : pe_conv2d_rev_s8_get_buffer_size(p, in, f, out, &size);
    if (s != PE_OK || size > MAX_SCRATCH) {
        return -1;
    }
    ctx.buf = scratch;
    ctx.size = size;
    ctx.stats = NULL;
    s = depthwise ? pe_depthwise_conv2d_rev_s8(&ctx, p, &q, in, input, f, weights, bias, out,
                                               out_got)
                  : pe_conv2d_rev_s8(&ctx, p, &q, in, input, f, weights, bias, out, out_got);
    if (s != PE_OK) {
        return -1;
    }
    ref_conv(p, in, f, out, depthwise, bias, out_ref);
    for (i = 0; i < out->n * out->h * out->w * out->c; i++) {
        bad += out_got[i] != out_ref[i];
    }
    return bad;
}

/* Fuzzer findings (tests/data/regressions/conv/), run under UBSan. */
static void regressions(void)
{
    pe_conv_params p;
    memset(&p, 0, sizeof(p));
    p.input_offset = -127;
    p.output_offset = -128;
    p.activation.min = -128;
    p.activation.max = 127;
    p.rounding = PE_ROUND_DOUBLE;
    /* conv/ring-rows-ceil-overflow: one output row, a huge stride and
     * dilation: ceil(k_eff / stride) formed k_eff + stride - 1 */
    {
        const pe_dims in = {1, 1, 1, 2}, f = {4, 4, 1, 2}, out = {1, 1, 1, 4};
        p.groups = 1;
        p.stride.h = 805306387;
        p.stride.w = 1;
        p.dilation.h = 521672728;
        p.dilation.w = 1;
        p.padding.left = 5;
        PE_CHECK_EQ(run_case(&p, &in, &f, &out, 0), 0);
    }
    /* conv/push-ceil-overflow: the same rounding of the first output row an
     * input row reaches, through the depthwise row stream */
    {
        const pe_dims in = {1, 1, 1, 1}, f = {1, 2, 1, 3}, out = {1, 1, 1, 3};
        p.groups = 0;
        p.ch_mult = 3;
        p.stride.h = 1936945963;
        p.dilation.h = 1;
        p.padding.top = 872466176;
        p.padding.left = 0;
        PE_CHECK_EQ(run_case(&p, &in, &f, &out, 1), 0);
        p.padding.top = 1;
        PE_CHECK_EQ(run_case(&p, &in, &f, &out, 1), 0);
    }
}

/* the depthwise fast and target scratch queries: on this (host, non-DSP)
 * build the fast size is the minimum; the DSP target size adds the int16
 * channel planes of a 3x3 stride-1 multiplier-1 layer with an output of at
 * least 4x4 (min(out_c, 4) planes of min(out_h, 16) + 2 rows of 32, 64 or
 * 128 bytes), nothing for other shapes; the errors of the minimum query */
static void dw_scratch_queries(void)
{
    pe_conv_params p;
    pe_dims in = {1, 48, 48, 16}, f = {1, 3, 3, 16}, out = {1, 48, 48, 16};
    int32_t min = -1, fast = -2, t0 = -3, t1 = -4;
    memset(&p, 0, sizeof(p));
    p.stride.h = p.stride.w = 1;
    p.dilation.h = p.dilation.w = 1;
    p.padding.top = p.padding.bottom = p.padding.left = p.padding.right = 1;
    p.groups = 1;
    p.ch_mult = 1;
    p.activation.min = -128;
    p.activation.max = 127;
    PE_CHECK_EQ(pe_depthwise_conv2d_rev_s8_get_buffer_size(&p, &in, &f, &out, &min), PE_OK);
    PE_CHECK_EQ(pe_depthwise_conv2d_rev_s8_get_fast_buffer_size(&p, &in, &f, &out, &fast), PE_OK);
    PE_CHECK_EQ(fast, min);
    PE_CHECK_EQ(pe_depthwise_conv2d_rev_s8_get_target_buffer_size(&p, &in, &f, &out, 0, &t0), PE_OK);
    PE_CHECK_EQ(t0, min);
    PE_CHECK_EQ(pe_depthwise_conv2d_rev_s8_get_target_buffer_size(&p, &in, &f, &out, 1, &t1), PE_OK);
    PE_CHECK_EQ(t1, min + 4 * 18 * 128);
    PE_CHECK_EQ(pe_depthwise_conv2d_rev_s8_get_target_buffer_size(&p, &in, &f, &out, 2, &t1),
                PE_ERR_ARG);
    PE_CHECK_EQ(pe_depthwise_conv2d_rev_s8_get_target_buffer_size(&p, &in, &f, &out, 1, NULL),
                PE_ERR_ARG);
    PE_CHECK_EQ(pe_depthwise_conv2d_rev_s8_get_fast_buffer_size(&p, &in, &f, &out, NULL), PE_ERR_ARG);
    {
        /* KWS-like 25x5x3: 3 planes of 18 rows of 32 bytes */
        pe_dims i2 = {1, 25, 5, 3}, f2 = {1, 3, 3, 3}, o2 = {1, 25, 5, 3};
        PE_CHECK_EQ(pe_depthwise_conv2d_rev_s8_get_buffer_size(&p, &i2, &f2, &o2, &min), PE_OK);
        PE_CHECK_EQ(pe_depthwise_conv2d_rev_s8_get_target_buffer_size(&p, &i2, &f2, &o2, 1, &t1),
                    PE_OK);
        PE_CHECK_EQ(t1, min + 3 * 18 * 32);
    }
    {
        /* stride 2: no planes */
        pe_conv_params s2 = p;
        pe_dims o3 = {1, 24, 24, 16};
        s2.stride.h = s2.stride.w = 2;
        PE_CHECK_EQ(pe_depthwise_conv2d_rev_s8_get_buffer_size(&s2, &in, &f, &o3, &min), PE_OK);
        PE_CHECK_EQ(pe_depthwise_conv2d_rev_s8_get_target_buffer_size(&s2, &in, &f, &o3, 1, &t1),
                    PE_OK);
        PE_CHECK_EQ(t1, min);
    }
    {
        pe_conv_params big = p;
        big.padding.top = PE_INT32_MAX - 2;
        PE_CHECK_EQ(pe_depthwise_conv2d_rev_s8_get_target_buffer_size(&big, &in, &f, &out, 1, &t1),
                    PE_ERR_OVERFLOW);
    }
}

int main(void)
{
    dw_scratch_queries();
    random_cases(0);
    random_cases(1);
    status_checks();
    fused_cases();
    fused_table_cases();
    regressions();
    return PE_TEST_END("test_conv");
}
