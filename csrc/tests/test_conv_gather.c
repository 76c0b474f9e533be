/* Plain C tests of the scratch-free gather convolution (pe_conv_gather.h):
 * pseudo-random geometries (stride > kernel, padding >= kernel, dilation,
 * groups, channel multipliers, 1-D shapes, windows wholly in padding)
 * against a naive int64 reference and against the reverse kernels
 * (pe_conv.h) with ==, the MAC counter, and the status checks.
 * Built with -fsanitize=address,undefined by tools/check_c.sh. */
#include <stdint.h>
#include <string.h>
#include "pyembed/pyembed.h"
#include "pyembed/pe_conv.h"
#include "pyembed/pe_conv_gather.h"
#include "pyembed/pe_graph.h"
#include "pe_test.h"

#define MAX_IN 4096
#define MAX_W 4096
#define MAX_OUT 4096
#define MAX_C 40
#define MAX_SCRATCH 65536

static int8_t input[MAX_IN], weights[MAX_W], out_ref[MAX_OUT], out_rev[MAX_OUT], out_got[MAX_OUT];
static int32_t bias[MAX_C], mult[MAX_C], shift[MAX_C];
static int32_t scratch[MAX_SCRATCH / 4];

#define PE_CONV_REF_SEED 0x9E3779B97F4A7C15ull
#include "pe_conv_ref.h"

/* 1: depthwise cases draw a one-channel input (pe_depthwise_conv2d_c1_s8) */
static int force_c1 = 0;

static int draw_case(pe_conv_params *p, pe_dims *in, pe_dims *f, pe_dims *out, int depthwise)
{
    int32_t i, shape = rnd_in(0, 3);
    memset(p, 0, sizeof(*p));
    in->n = rnd_in(1, 2);
    in->h = rnd_in(1, 10);
    in->w = rnd_in(1, 10);
    f->h = rnd_in(1, 5);
    f->w = rnd_in(1, 5);
    if (shape == 0) { /* 1-D along h (a KWS [t, 1, c] input) */
        in->w = 1;
        f->w = 1;
    } else if (shape == 1) { /* 1-D along w */
        in->h = 1;
        f->h = 1;
    }
    draw_conv_params(p, 4);
    if (depthwise) {
        in->c = force_c1 ? 1 : rnd_in(1, 12);
        p->ch_mult = force_c1 ? rnd_in(1, 12) : rnd_in(1, 3);
        out->c = in->c * p->ch_mult;
        f->n = 1;
        f->c = out->c;
    } else {
        int32_t ocg;
        p->groups = rnd_in(1, 3);
        f->c = rnd_in(1, 9);
        ocg = rnd_in(1, 9);
        in->c = f->c * p->groups;
        out->c = ocg * p->groups;
        f->n = out->c;
    }
    draw_conv_out(p, in, f, out);
    if (in->n * in->h * in->w * in->c > MAX_IN || f->n * f->h * f->w * f->c > MAX_W ||
        out->n * out->h * out->w * out->c > MAX_OUT || out->c > MAX_C) {
        return 0;
    }
    for (i = 0; i < in->n * in->h * in->w * in->c; i++) input[i] = (int8_t)rnd_in(-128, 127);
    for (i = 0; i < f->n * f->h * f->w * f->c; i++) weights[i] = (int8_t)rnd_in(-128, 127);
    for (i = 0; i < out->c; i++) {
        bias[i] = rnd_in(-100000, 100000);
        mult[i] = rnd_in(1 << 30, PE_INT32_MAX);
        shift[i] = (rnd() % 8u == 0u) ? (int32_t[]){-31, -30, 0, 29, 30}[rnd() % 5u] : rnd_in(-12, 4);
    }
    return 1;
}

static void random_cases(int depthwise)
{
    int iter, done = 0;
    for (iter = 0; iter < 600; iter++) {
        pe_conv_params p;
        pe_dims in, f, out;
        pe_stats stats;
        pe_context ctx;
        const pe_per_channel_quant q = {mult, shift};
        int32_t size = -1, rsize = 0, i, bad = 0, bad_rev = 0;
        long pairs;
        const int32_t *b;
        pe_status s;
        if (!draw_case(&p, &in, &f, &out, depthwise)) continue;
        b = (rnd() & 1u) ? bias : NULL;
        s = depthwise ? pe_depthwise_conv2d_gather_s8_get_buffer_size(&p, &in, &f, &out, &size)
                      : pe_conv2d_gather_s8_get_buffer_size(&p, &in, &f, &out, &size);
        PE_CHECK_EQ(s, PE_OK);
        PE_CHECK_EQ(size, 0);
        pairs = ref_conv(&p, &in, &f, &out, depthwise, b, out_ref);
        memset(&stats, 0, sizeof(stats));
        ctx.buf = NULL;
        ctx.size = 0;
        ctx.stats = &stats;
        s = depthwise ? pe_depthwise_conv2d_gather_s8(&ctx, &p, &q, &in, input, &f, weights, b, &out, out_got)
                      : pe_conv2d_gather_s8(&ctx, &p, &q, &in, input, &f, weights, b, &out, out_got);
        PE_CHECK_EQ(s, PE_OK);
        for (i = 0; i < out.n * out.h * out.w * out.c; i++) bad += out_got[i] != out_ref[i];
        PE_CHECK_EQ(bad, 0);
        PE_CHECK_EQ(stats.macs, (uint64_t)pairs * (uint64_t)(depthwise ? out.c : out.c * f.c));
        PE_CHECK_EQ(stats.peak_bytes, 0);
        /* the reverse kernel gives the same bytes */
        s = depthwise ? pe_depthwise_conv2d_rev_s8_get_buffer_size(&p, &in, &f, &out, &rsize)
                      : pe_conv2d_rev_s8_get_buffer_size(&p, &in, &f, &out, &rsize);
        PE_CHECK_EQ(s, PE_OK);
        if (rsize <= MAX_SCRATCH) {
            ctx.buf = scratch;
            ctx.size = rsize;
            ctx.stats = NULL;
            s = depthwise ? pe_depthwise_conv2d_rev_s8(&ctx, &p, &q, &in, input, &f, weights, b, &out, out_rev)
                          : pe_conv2d_rev_s8(&ctx, &p, &q, &in, input, &f, weights, b, &out, out_rev);
            PE_CHECK_EQ(s, PE_OK);
            for (i = 0; i < out.n * out.h * out.w * out.c; i++) bad_rev += out_got[i] != out_rev[i];
            PE_CHECK_EQ(bad_rev, 0);
        }
        /* NULL context: no counters, same result */
        memset(out_rev, 0, sizeof(out_rev));
        s = depthwise ? pe_depthwise_conv2d_gather_s8(NULL, &p, &q, &in, input, &f, weights, b, &out, out_rev)
                      : pe_conv2d_gather_s8(NULL, &p, &q, &in, input, &f, weights, b, &out, out_rev);
        PE_CHECK_EQ(s, PE_OK);
        PE_CHECK_EQ(memcmp(out_rev, out_got, (size_t)(out.n * out.h * out.w * out.c)), 0);
        done++;
    }
    PE_CHECK(done > 200);
}

/* pe_depthwise_conv2d_c1_s8 on one-channel depthwise cases: the reference's
 * bytes, the gather kernel's MAC count, NULL context, and PE_ERR_ARG for an
 * input of more than one channel */
static void c1_cases(void)
{
    int iter, done = 0;
    force_c1 = 1;
    for (iter = 0; iter < 600; iter++) {
        pe_conv_params p;
        pe_dims in, f, out, in2, f2, out2;
        pe_stats stats, stats_g;
        pe_context ctx;
        const pe_per_channel_quant q = {mult, shift};
        int32_t i, bad = 0;
        const int32_t *b;
        pe_status s;
        if (!draw_case(&p, &in, &f, &out, 1)) continue;
        b = (rnd() & 1u) ? bias : NULL;
        ref_conv(&p, &in, &f, &out, 1, b, out_ref);
        memset(&stats, 0, sizeof(stats));
        memset(&stats_g, 0, sizeof(stats_g));
        ctx.buf = NULL;
        ctx.size = 0;
        ctx.stats = &stats;
        s = pe_depthwise_conv2d_c1_s8(&ctx, &p, &q, &in, input, &f, weights, b, &out, out_got);
        PE_CHECK_EQ(s, PE_OK);
        for (i = 0; i < out.n * out.h * out.w * out.c; i++) bad += out_got[i] != out_ref[i];
        PE_CHECK_EQ(bad, 0);
        ctx.stats = &stats_g;
        s = pe_depthwise_conv2d_gather_s8(&ctx, &p, &q, &in, input, &f, weights, b, &out, out_rev);
        PE_CHECK_EQ(s, PE_OK);
        PE_CHECK_EQ(stats.macs, stats_g.macs);
        memset(out_rev, 0, sizeof(out_rev));
        s = pe_depthwise_conv2d_c1_s8(NULL, &p, &q, &in, input, &f, weights, b, &out, out_rev);
        PE_CHECK_EQ(s, PE_OK);
        PE_CHECK_EQ(memcmp(out_rev, out_got, (size_t)(out.n * out.h * out.w * out.c)), 0);
        /* two input channels (a valid depthwise): not this kernel's */
        in2 = in;
        f2 = f;
        out2 = out;
        in2.c = 2;
        out2.c = 2 * p.ch_mult;
        f2.c = out2.c;
        if (in2.n * in2.h * in2.w * 2 <= MAX_IN && f2.h * f2.w * f2.c <= MAX_W &&
            out2.n * out2.h * out2.w * out2.c <= MAX_OUT && out2.c <= MAX_C) {
            PE_CHECK_EQ(pe_depthwise_conv2d_c1_s8(NULL, &p, &q, &in2, input, &f2, weights, NULL, &out2,
                                                  out_rev),
                        PE_ERR_ARG);
        }
        done++;
    }
    force_c1 = 0;
    PE_CHECK(done > 200);
}

static void status_checks(void)
{
    pe_conv_params p;
    pe_dims in = {1, 4, 4, 2}, f = {3, 2, 2, 2}, out = {1, 3, 3, 3};
    const pe_per_channel_quant q = {mult, shift};
    pe_per_channel_quant badq = {mult, shift};
    int32_t size = 0, i;
    memset(&p, 0, sizeof(p));
    p.stride.h = p.stride.w = 1;
    p.dilation.h = p.dilation.w = 1;
    p.groups = 1;
    p.activation.min = -128;
    p.activation.max = 127;
    for (i = 0; i < 3; i++) {
        mult[i] = 1 << 30;
        shift[i] = -3;
    }
    PE_CHECK_EQ(pe_conv2d_gather_s8(NULL, &p, &q, &in, input, &f, weights, NULL, &out, out_got), PE_OK);
    PE_CHECK_EQ(pe_conv2d_gather_s8(NULL, &p, &q, &in, NULL, &f, weights, NULL, &out, out_got), PE_ERR_ARG);
    PE_CHECK_EQ(pe_conv2d_gather_s8(NULL, &p, &q, &in, input, &f, NULL, NULL, &out, out_got), PE_ERR_ARG);
    PE_CHECK_EQ(pe_conv2d_gather_s8(NULL, &p, &q, &in, input, &f, weights, NULL, &out, NULL), PE_ERR_ARG);
    PE_CHECK_EQ(pe_conv2d_gather_s8(NULL, NULL, &q, &in, input, &f, weights, NULL, &out, out_got), PE_ERR_ARG);
    PE_CHECK_EQ(pe_conv2d_gather_s8(NULL, &p, NULL, &in, input, &f, weights, NULL, &out, out_got), PE_ERR_ARG);
    PE_CHECK_EQ(pe_conv2d_gather_s8_get_buffer_size(&p, &in, &f, &out, NULL), PE_ERR_ARG);
    PE_CHECK_EQ(pe_conv2d_gather_s8_get_buffer_size(&p, &in, &f, &out, &size), PE_OK);
    PE_CHECK_EQ(size, 0);
    badq.shift = NULL;
    PE_CHECK_EQ(pe_conv2d_gather_s8(NULL, &p, &badq, &in, input, &f, weights, NULL, &out, out_got), PE_ERR_ARG);
    shift[1] = 31;
    PE_CHECK_EQ(pe_conv2d_gather_s8(NULL, &p, &q, &in, input, &f, weights, NULL, &out, out_got), PE_ERR_ARG);
    shift[1] = -3;
    p.input_offset = 129;
    PE_CHECK_EQ(pe_conv2d_gather_s8(NULL, &p, &q, &in, input, &f, weights, NULL, &out, out_got), PE_ERR_ARG);
    p.input_offset = 0;
    p.activation.min = 5;
    p.activation.max = 4;
    PE_CHECK_EQ(pe_conv2d_gather_s8(NULL, &p, &q, &in, input, &f, weights, NULL, &out, out_got), PE_ERR_ARG);
    p.activation.min = -128;
    p.activation.max = 127;
    out.c = 4; /* filter has 3 output channels */
    PE_CHECK_EQ(pe_conv2d_gather_s8(NULL, &p, &q, &in, input, &f, weights, NULL, &out, out_got), PE_ERR_ARG);
    PE_CHECK_EQ(pe_conv2d_gather_s8_get_buffer_size(&p, &in, &f, &out, &size), PE_ERR_ARG);
    out.c = 3;
    /* a bias that can overflow the int32 accumulator */
    bias[0] = PE_INT32_MAX - 10;
    PE_CHECK_EQ(pe_conv2d_gather_s8(NULL, &p, &q, &in, input, &f, weights, bias, &out, out_got),
                PE_ERR_UNSUPPORTED);
    bias[0] = 0;
    /* depthwise: ch_mult inconsistent with the channels */
    {
        pe_dims df = {1, 2, 2, 4}, dout = {1, 3, 3, 4};
        p.ch_mult = 2;
        PE_CHECK_EQ(pe_depthwise_conv2d_gather_s8(NULL, &p, &q, &in, input, &df, weights, NULL, &dout, out_got),
                    PE_OK);
        p.ch_mult = 3;
        PE_CHECK_EQ(pe_depthwise_conv2d_gather_s8(NULL, &p, &q, &in, input, &df, weights, NULL, &dout, out_got),
                    PE_ERR_ARG);
        PE_CHECK_EQ(pe_depthwise_conv2d_gather_s8_get_buffer_size(&p, &in, &df, &dout, &size), PE_ERR_ARG);
    }
}

/* pe_graph runs a conv with no scratch region in the gather form, with one
 * in the reverse form (a region too small for the reverse kernel is still
 * PE_ERR_SCRATCH); both give the same bytes. */
static void graph_forms(int depthwise)
{
    static int32_t arena_words[4096];
    static const int32_t io_in[3] = {0, 1, 2}, io_out[1] = {3};
    int8_t *arena = (int8_t *)arena_words;
    pe_graph_tensor t[4];
    pe_graph_op op;
    pe_graph g;
    pe_context a;
    pe_conv_params p;
    pe_dims in, f, out;
    int32_t rsize = 0, n_in, n_out, n_w, base;
    int8_t first[MAX_OUT];
    int tries = 0;
    do {
        tries++;
    } while (!draw_case(&p, &in, &f, &out, depthwise) && tries < 100);
    PE_CHECK(tries < 100);
    n_in = in.n * in.h * in.w * in.c;
    n_out = out.n * out.h * out.w * out.c;
    n_w = f.n * f.h * f.w * f.c;
    memset(t, 0, sizeof(t));
    t[0].data = NULL; t[0].offset = 0; t[0].bytes = n_in; t[0].dims = in; t[0].dtype = PE_DT_INT8;
    t[1].data = weights; t[1].offset = -1; t[1].bytes = n_w; t[1].dims = f; t[1].dtype = PE_DT_INT8;
    t[2].data = bias; t[2].offset = -1; t[2].bytes = 4 * out.c; t[2].dtype = PE_DT_INT32;
    t[2].dims.n = 1; t[2].dims.h = 1; t[2].dims.w = 1; t[2].dims.c = out.c;
    base = (n_in + 15) / 16 * 16;
    t[3].data = NULL; t[3].offset = base; t[3].bytes = n_out; t[3].dims = out; t[3].dtype = PE_DT_INT8;
    base += (n_out + 15) / 16 * 16;
    memset(&op, 0, sizeof(op));
    op.type = depthwise ? PE_GOP_DEPTHWISE_CONV_2D : PE_GOP_CONV_2D;
    op.inputs = io_in;
    op.num_inputs = 3;
    op.outputs = io_out;
    op.num_outputs = 1;
    op.params = NULL;
    op.num_params = 0;
    op.p.conv.params = p;
    op.p.conv.quant.quant.multiplier = mult;
    op.p.conv.quant.quant.shift = shift;
    op.p.conv.quant.count = out.c;
    op.scratch_offset = -1;
    op.scratch_size = 0;
    g.tensors = t; g.num_tensors = 4; g.ops = &op; g.num_ops = 1; g.arena_size = base;
    PE_CHECK_EQ(depthwise ? pe_depthwise_conv2d_rev_s8_get_buffer_size(&p, &in, &f, &out, &rsize)
                          : pe_conv2d_rev_s8_get_buffer_size(&p, &in, &f, &out, &rsize), PE_OK);
    PE_CHECK(base + rsize <= (int32_t)sizeof(arena_words));
    memcpy(arena, input, (size_t)n_in);
    a.buf = arena; a.size = (int32_t)sizeof(arena_words); a.stats = NULL;
    PE_CHECK_EQ(pe_graph_check(&g, NULL, NULL), PE_OK);
    PE_CHECK_EQ(pe_graph_invoke(&g, &a), PE_OK);
    ref_conv(&p, &in, &f, &out, depthwise, bias, out_ref);
    PE_CHECK_EQ(memcmp(arena + t[3].offset, out_ref, (size_t)n_out), 0);
    memcpy(first, arena + t[3].offset, (size_t)n_out);
    memset(arena + t[3].offset, 0, (size_t)n_out);
    op.scratch_offset = base;
    op.scratch_size = rsize;
    g.arena_size = base + rsize;
    PE_CHECK_EQ(pe_graph_invoke(&g, &a), PE_OK);
    PE_CHECK_EQ(memcmp(arena + t[3].offset, first, (size_t)n_out), 0);
    /* a region below the reverse minimum is a gather work block
     * (pe_graph.h): the gather form runs, to the same bytes */
    memset(arena + t[3].offset, 0, (size_t)n_out);
    op.scratch_size = rsize - 4;
    PE_CHECK_EQ(pe_graph_invoke(&g, &a), PE_OK);
    PE_CHECK_EQ(memcmp(arena + t[3].offset, first, (size_t)n_out), 0);
}

int main(void)
{
    random_cases(0);
    random_cases(1);
    c1_cases();
    status_checks();
    {
        int k;
        for (k = 0; k < 20; k++) {
            graph_forms(k & 1);
        }
    }
    return PE_TEST_END("test_conv_gather");
}
