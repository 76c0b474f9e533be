/* test_conv_w4.c - convolution and depthwise convolution on packed int4
 * filters (pe_conv_w4.h): the kernels' bytes == the int8 gather kernels
 * (pe_conv_gather.h) on the unpacked values over kernel sizes, strides,
 * padding, dilation, groups, odd per-channel filter sizes (filters starting
 * mid-byte), per-channel quantization, bias or none, both roundings, batches
 * and an exact-size misaligned scratch, and again with the scratch of the
 * target queries (dsp 0 and 1: a work block behind the unpacked chunk, which
 * a DSP build runs the int8 block loops with) and sizes between; the block
 * path's edges: output channels 1 to 3 past a chunk of four, one-column
 * outputs, inputs off the word grid, filters wider than the work block;
 * the target queries' sizes; PE_ERR_ARG / PE_ERR_SCRATCH for bad
 * arguments. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pe_test.h"
#include "pyembed/pe_conv_gather.h"
#include "pyembed/pe_conv_w4.h"
#include "pyembed/pe_fc_w4.h"

static uint32_t rng_state = 777u;

static int32_t rnd(int32_t lo, int32_t hi) /* [lo, hi] */
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return lo + (int32_t)((rng_state >> 8) % (uint32_t)(hi - lo + 1));
}

static int32_t out_len(int32_t n, int32_t k, int32_t s, int32_t d, int32_t pad)
{
    return (n + pad - ((k - 1) * d + 1)) / s + 1;
}

/* one random layer: kind 0 conv (groups g), 1 depthwise (ch_mult g) */
static void one_layer(int32_t kind, int32_t n, int32_t h, int32_t w, int32_t ic, int32_t oc, int32_t k_h,
                      int32_t k_w, int32_t s, int32_t d, int32_t g, int32_t with_bias, int32_t single)
{
    pe_conv_params p;
    pe_dims in, f, out;
    int32_t i, pb, sb, s8, count, pad_h, pad_w;
    int32_t *mult, *shift, *bias;
    int8_t *x, *filt, *want, *got;
    uint8_t *packed, *scratch, *scratch8;
    pe_context ctx, ctx8;
    pe_per_channel_quant q;
    memset(&p, 0, sizeof(p));
    p.input_offset = rnd(-127, 128);
    p.output_offset = rnd(-128, 127);
    p.stride.h = s;
    p.stride.w = s == 1 ? 1 : s - 1;
    p.dilation.h = d;
    p.dilation.w = 1;
    p.groups = kind == 0 ? g : 1;
    p.ch_mult = kind == 1 ? g : 1;
    p.activation.min = -128 + rnd(0, 20);
    p.activation.max = 127 - rnd(0, 20);
    p.rounding = single ? PE_ROUND_SINGLE : PE_ROUND_DOUBLE;
    pad_h = (k_h - 1) * d / 2;
    pad_w = (k_w - 1) / 2;
    p.padding.top = pad_h;
    p.padding.left = pad_w;
    in.n = n;
    in.h = h;
    in.w = w;
    in.c = ic;
    if (kind == 0) {
        f.n = oc;
        f.c = ic / g;
    } else {
        oc = ic * g;
        f.n = 1;
        f.c = oc;
    }
    f.h = k_h;
    f.w = k_w;
    out.n = n;
    out.h = out_len(h, k_h, p.stride.h, d, 2 * pad_h);
    out.w = out_len(w, k_w, p.stride.w, 1, 2 * pad_w);
    out.c = oc;
    count = f.n * f.h * f.w * f.c;
    if (kind == 0) {
        PE_CHECK_EQ(pe_conv2d_w4_s8_get_buffer_size(&p, &in, &f, &out, &pb, &sb), PE_OK);
        PE_CHECK_EQ(pe_conv2d_gather_s8_get_buffer_size(&p, &in, &f, &out, &s8), PE_OK);
    } else {
        PE_CHECK_EQ(pe_depthwise_conv2d_w4_s8_get_buffer_size(&p, &in, &f, &out, &pb, &sb), PE_OK);
        PE_CHECK_EQ(pe_depthwise_conv2d_gather_s8_get_buffer_size(&p, &in, &f, &out, &s8), PE_OK);
    }
    PE_CHECK_EQ(pb, (count + 1) / 2);
    x = malloc((size_t)(n * h * w * ic));
    filt = malloc((size_t)count);
    packed = malloc((size_t)pb);
    want = malloc((size_t)(n * out.h * out.w * oc));
    got = malloc((size_t)(n * out.h * out.w * oc));
    mult = malloc(sizeof(int32_t) * (size_t)oc);
    shift = malloc(sizeof(int32_t) * (size_t)oc);
    bias = malloc(sizeof(int32_t) * (size_t)oc);
    scratch = malloc((size_t)sb + 1);
    scratch8 = malloc((size_t)s8 + 4);
    for (i = 0; i < n * h * w * ic; i++) {
        x[i] = (int8_t)rnd(-128, 127);
    }
    for (i = 0; i < count; i++) {
        filt[i] = (int8_t)rnd(-8, 7);
    }
    for (i = 0; i < oc; i++) {
        mult[i] = rnd(1 << 30, 0x7fffffff);
        shift[i] = rnd(-12, -6);
        bias[i] = rnd(-4000, 4000);
    }
    PE_CHECK_EQ(pe_fc_w4_pack(filt, count, packed, pb), PE_OK);
    q.multiplier = mult;
    q.shift = shift;
    ctx8.buf = (void *)(((uintptr_t)scratch8 + 3u) & ~(uintptr_t)3u);
    ctx8.size = s8;
    ctx8.stats = NULL;
    ctx.buf = scratch + 1; /* misaligned, exactly the size asked for */
    ctx.size = sb;
    ctx.stats = NULL;
    memset(got, 0x5a, (size_t)(n * out.h * out.w * oc));
    if (kind == 0) {
        PE_CHECK_EQ(pe_conv2d_gather_s8(&ctx8, &p, &q, &in, x, &f, filt, with_bias ? bias : NULL, &out, want),
                    PE_OK);
        PE_CHECK_EQ(pe_conv2d_w4_s8(&ctx, &p, &q, &in, x, &f, packed, with_bias ? bias : NULL, &out, got), PE_OK);
        ctx.size = sb - 1;
        PE_CHECK_EQ(pe_conv2d_w4_s8(&ctx, &p, &q, &in, x, &f, packed, NULL, &out, got), PE_ERR_SCRATCH);
        PE_CHECK_EQ(pe_conv2d_w4_s8(NULL, &p, &q, &in, x, &f, packed, NULL, &out, got), PE_ERR_ARG);
        PE_CHECK_EQ(pe_conv2d_w4_s8(&ctx, &p, &q, &in, x, &f, NULL, NULL, &out, got), PE_ERR_ARG);
    } else {
        PE_CHECK_EQ(pe_depthwise_conv2d_gather_s8(&ctx8, &p, &q, &in, x, &f, filt, with_bias ? bias : NULL, &out,
                                                  want), PE_OK);
        PE_CHECK_EQ(pe_depthwise_conv2d_w4_s8(&ctx, &p, &q, &in, x, &f, packed, with_bias ? bias : NULL, &out,
                                              got), PE_OK);
        ctx.size = sb - 1;
        PE_CHECK_EQ(pe_depthwise_conv2d_w4_s8(&ctx, &p, &q, &in, x, &f, packed, NULL, &out, got),
                    PE_ERR_SCRATCH);
        PE_CHECK_EQ(pe_depthwise_conv2d_w4_s8(NULL, &p, &q, &in, x, &f, packed, NULL, &out, got), PE_ERR_ARG);
    }
    PE_CHECK_EQ(memcmp(got, want, (size_t)(n * out.h * out.w * oc)), 0);
    {
        /* the target scratch (dsp 1) and sizes up to it, misaligned: the same bytes */
        int32_t t1, t0, k;
        uint8_t *big;
        if (kind == 0) {
            PE_CHECK_EQ(pe_conv2d_w4_s8_get_target_buffer_size(&p, &in, &f, &out, 0, &t0), PE_OK);
            PE_CHECK_EQ(pe_conv2d_w4_s8_get_target_buffer_size(&p, &in, &f, &out, 1, &t1), PE_OK);
        } else {
            PE_CHECK_EQ(pe_depthwise_conv2d_w4_s8_get_target_buffer_size(&p, &in, &f, &out, 0, &t0),
                        PE_OK);
            PE_CHECK_EQ(pe_depthwise_conv2d_w4_s8_get_target_buffer_size(&p, &in, &f, &out, 1, &t1),
                        PE_OK);
        }
        PE_CHECK_EQ(t0, sb);
        PE_CHECK(t1 >= sb);
        big = malloc((size_t)t1 + 3);
        for (k = 0; k < 4; k++) {
            const int32_t size = k == 0 ? t1 : k == 1 ? sb + 35 : k == 2 ? sb + (t1 - sb) / 2 : t1 - 1;
            if (size < sb || size > t1) {
                continue;
            }
            ctx.buf = big + (k & 3);
            ctx.size = size;
            memset(got, 0x5a, (size_t)(n * out.h * out.w * oc));
            if (kind == 0) {
                PE_CHECK_EQ(pe_conv2d_w4_s8(&ctx, &p, &q, &in, x, &f, packed, with_bias ? bias : NULL, &out,
                                            got), PE_OK);
            } else {
                PE_CHECK_EQ(pe_depthwise_conv2d_w4_s8(&ctx, &p, &q, &in, x, &f, packed,
                                                      with_bias ? bias : NULL, &out, got), PE_OK);
            }
            PE_CHECK_EQ(memcmp(got, want, (size_t)(n * out.h * out.w * oc)), 0);
        }
        free(big);
    }
    free(x);
    free(filt);
    free(packed);
    free(want);
    free(got);
    free(mult);
    free(shift);
    free(bias);
    free(scratch);
    free(scratch8);
}

static void test_bad_sizes(void)
{
    pe_conv_params p;
    pe_dims in = {1, 5, 5, 4}, f = {3, 3, 3, 4}, out = {1, 3, 3, 3};
    int32_t pb, sb;
    memset(&p, 0, sizeof(p));
    p.stride.h = p.stride.w = 1;
    p.dilation.h = p.dilation.w = 1;
    p.groups = 1;
    p.ch_mult = 1;
    p.activation.min = -128;
    p.activation.max = 127;
    PE_CHECK_EQ(pe_conv2d_w4_s8_get_buffer_size(&p, &in, &f, &out, &pb, &sb), PE_OK);
    PE_CHECK_EQ(pb, 54);
    PE_CHECK_EQ(sb, 3 * 36 + 3);
    PE_CHECK_EQ(pe_conv2d_w4_s8_get_buffer_size(&p, &in, &f, &out, NULL, &sb), PE_ERR_ARG);
    f.c = 3; /* does not divide the input channels */
    PE_CHECK_EQ(pe_conv2d_w4_s8_get_buffer_size(&p, &in, &f, &out, &pb, &sb), PE_ERR_ARG);
    f.c = 4;
    out.n = 2; /* output batches != input batches */
    PE_CHECK_EQ(pe_conv2d_w4_s8_get_buffer_size(&p, &in, &f, &out, &pb, &sb), PE_ERR_ARG);
    out.n = 1;
    f.n = 1; /* depthwise: filter [1, 3, 3, out_c] with out_c = in_c * ch_mult */
    out.c = 4;
    PE_CHECK_EQ(pe_depthwise_conv2d_w4_s8_get_buffer_size(&p, &in, &f, &out, &pb, &sb), PE_OK);
    PE_CHECK_EQ(pb, 18);
    f.n = 3;
    PE_CHECK_EQ(pe_depthwise_conv2d_w4_s8_get_buffer_size(&p, &in, &f, &out, &pb, &sb), PE_ERR_ARG);
}

/* the target queries: dsp 0 the minimum; dsp 1 the word-rounded chunk + 3
 * + the int8 gather kernel's work block (ungrouped), the minimum for a
 * grouped conv; the depthwise filter's bytes + the gather target; bad dsp
 * or NULL: PE_ERR_ARG */
static void test_target_sizes(void)
{
    pe_conv_params p;
    pe_dims in = {1, 8, 8, 12}, f = {6, 3, 3, 12}, out = {1, 8, 8, 6};
    int32_t pb, sb, t, g8;
    memset(&p, 0, sizeof(p));
    p.stride.h = p.stride.w = 1;
    p.dilation.h = p.dilation.w = 1;
    p.padding.top = p.padding.left = 1;
    p.groups = 1;
    p.ch_mult = 1;
    p.activation.min = -128;
    p.activation.max = 127;
    PE_CHECK_EQ(pe_conv2d_w4_s8_get_buffer_size(&p, &in, &f, &out, &pb, &sb), PE_OK);
    PE_CHECK_EQ(sb, 4 * 108 + 3);
    PE_CHECK_EQ(pe_conv2d_w4_s8_get_target_buffer_size(&p, &in, &f, &out, 0, &t), PE_OK);
    PE_CHECK_EQ(t, sb);
    PE_CHECK_EQ(pe_conv2d_gather_s8_get_target_buffer_size(&p, &in, &f, &out, 1, &g8), PE_OK);
    PE_CHECK(g8 > 0);
    PE_CHECK_EQ(pe_conv2d_w4_s8_get_target_buffer_size(&p, &in, &f, &out, 1, &t), PE_OK);
    PE_CHECK_EQ(t, 4 * 108 + 3 + g8);
    f.c = 5; /* kernel rows of 15 bytes: patches, a chunk of all 6 filters (6 * 45 -> 272 B) */
    in.c = 5;
    PE_CHECK_EQ(pe_conv2d_gather_s8_get_target_buffer_size(&p, &in, &f, &out, 1, &g8), PE_OK);
    PE_CHECK(g8 > 0);
    PE_CHECK_EQ(pe_conv2d_w4_s8_get_target_buffer_size(&p, &in, &f, &out, 1, &t), PE_OK);
    PE_CHECK_EQ(t, 272 + 3 + g8);
    f.n = 3; /* fewer channels than a chunk: 3 filters of 45, 135 -> 136 */
    out.c = 3;
    PE_CHECK_EQ(pe_conv2d_gather_s8_get_target_buffer_size(&p, &in, &f, &out, 1, &g8), PE_OK);
    PE_CHECK_EQ(pe_conv2d_w4_s8_get_target_buffer_size(&p, &in, &f, &out, 1, &t), PE_OK);
    PE_CHECK_EQ(t, 136 + 3 + g8);
    f.n = 20; /* patches: 16 of 20 filters a chunk */
    out.c = 20;
    PE_CHECK_EQ(pe_conv2d_gather_s8_get_target_buffer_size(&p, &in, &f, &out, 1, &g8), PE_OK);
    PE_CHECK_EQ(pe_conv2d_w4_s8_get_target_buffer_size(&p, &in, &f, &out, 1, &t), PE_OK);
    PE_CHECK_EQ(t, 16 * 45 + 3 + g8);
    f.n = 6;
    out.c = 6;
    in.c = 12;
    f.c = 6; /* two groups: the per-pixel loops, no work block */
    p.groups = 2;
    PE_CHECK_EQ(pe_conv2d_w4_s8_get_buffer_size(&p, &in, &f, &out, &pb, &sb), PE_OK);
    PE_CHECK_EQ(pe_conv2d_w4_s8_get_target_buffer_size(&p, &in, &f, &out, 1, &t), PE_OK);
    PE_CHECK_EQ(t, sb);
    PE_CHECK_EQ(pe_conv2d_w4_s8_get_target_buffer_size(&p, &in, &f, &out, 2, &t), PE_ERR_ARG);
    PE_CHECK_EQ(pe_conv2d_w4_s8_get_target_buffer_size(&p, &in, &f, &out, 1, NULL), PE_ERR_ARG);
    p.groups = 1;
    f.c = 7; /* does not divide the input channels */
    PE_CHECK_EQ(pe_conv2d_w4_s8_get_target_buffer_size(&p, &in, &f, &out, 1, &t), PE_ERR_ARG);
    /* depthwise [1, 3, 3, 12] */
    f.n = 1;
    f.c = 12;
    out.c = 12;
    PE_CHECK_EQ(pe_depthwise_conv2d_w4_s8_get_buffer_size(&p, &in, &f, &out, &pb, &sb), PE_OK);
    PE_CHECK_EQ(sb, 108 + 3);
    PE_CHECK_EQ(pe_depthwise_conv2d_gather_s8_get_target_buffer_size(&p, &in, &f, &out, 1, &g8), PE_OK);
    PE_CHECK_EQ(pe_depthwise_conv2d_w4_s8_get_target_buffer_size(&p, &in, &f, &out, 1, &t), PE_OK);
    PE_CHECK_EQ(t, sb + g8);
    PE_CHECK_EQ(pe_depthwise_conv2d_w4_s8_get_target_buffer_size(&p, &in, &f, &out, 0, &t), PE_OK);
    PE_CHECK_EQ(t, sb);
    PE_CHECK_EQ(pe_depthwise_conv2d_w4_s8_get_target_buffer_size(&p, &in, &f, &out, 3, &t), PE_ERR_ARG);
    PE_CHECK_EQ(pe_depthwise_conv2d_w4_s8_get_target_buffer_size(&p, &in, &f, &out, 1, NULL), PE_ERR_ARG);
}

int main(void)
{
    /* kind, n, h, w, ic, oc, kh, kw, stride, dilation, groups / ch_mult */
    static const int32_t layers[][11] = {
        {0, 1, 6, 6, 3, 5, 3, 3, 1, 1, 1},  {0, 1, 9, 7, 8, 8, 3, 3, 1, 1, 1},  {0, 2, 8, 8, 5, 7, 3, 3, 2, 1, 1},
        {0, 1, 11, 9, 3, 6, 5, 5, 2, 1, 1}, {0, 1, 12, 10, 6, 5, 3, 3, 1, 2, 1}, {0, 1, 7, 7, 8, 6, 3, 3, 1, 1, 2},
        {0, 1, 6, 5, 9, 9, 3, 2, 3, 1, 3},  {0, 1, 5, 5, 40, 17, 3, 3, 1, 1, 1}, {0, 1, 8, 8, 16, 12, 1, 1, 2, 1, 1},
        {0, 1, 10, 4, 3, 4, 7, 1, 1, 1, 1}, {0, 1, 4, 4, 1, 1, 1, 1, 1, 1, 1},   {0, 1, 9, 9, 24, 9, 3, 3, 2, 2, 1},
        {1, 1, 8, 8, 5, 0, 3, 3, 1, 1, 1},  {1, 1, 9, 7, 8, 0, 3, 3, 2, 1, 1},   {1, 2, 7, 7, 3, 0, 5, 5, 1, 1, 2},
        {1, 1, 10, 10, 16, 0, 3, 3, 1, 2, 1}, {1, 1, 6, 6, 7, 0, 3, 3, 1, 1, 4}, {1, 1, 5, 9, 1, 0, 3, 3, 1, 1, 1},
        /* the block path's edges: chunks of 1..3 channels after fours, a one-column output (the
         * per-pixel DSP loops), filters wider than the work block (weights widened in pieces),
         * inputs off the word grid (patches) */
        {0, 2, 7, 9, 12, 1, 3, 3, 1, 1, 1}, {0, 1, 6, 6, 8, 6, 3, 3, 1, 1, 1},   {0, 1, 7, 5, 16, 11, 3, 3, 1, 1, 1},
        {0, 1, 5, 1, 8, 7, 3, 1, 1, 1, 1},  {0, 1, 6, 6, 48, 5, 3, 3, 1, 1, 1},  {0, 1, 9, 8, 6, 9, 3, 3, 2, 1, 1},
        {0, 1, 6, 7, 4, 3, 1, 5, 1, 1, 1}};
    size_t i;
    int32_t b, r;
    test_bad_sizes();
    test_target_sizes();
    for (i = 0; i < sizeof(layers) / sizeof(layers[0]); i++) {
        const int32_t *l = layers[i];
        for (b = 0; b < 2; b++) {
            for (r = 0; r < 2; r++) {
                one_layer(l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7], l[8], l[9], l[10], b, r);
            }
        }
    }
    return PE_TEST_END("test_conv_w4");
}
