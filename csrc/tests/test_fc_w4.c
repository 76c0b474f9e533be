/* test_fc_w4.c - packed int4 fully connected (pe_fc_w4.h) and its graph
 * runner (PE_GOP_FULLY_CONNECTED_W4): pack / unpack round trips from every
 * start, the kernel's bytes == pe_fully_connected_s8 on the unpacked values
 * (odd depths, depths past a slice, features past a row tile, per tensor and
 * per channel, bias or none, both roundings, a misaligned exact-size
 * scratch), the runner == the int8 operator through pe_graph_invoke_op, and
 * PE_ERR_ARG / PE_ERR_SCRATCH for bad arguments and tables. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pe_test.h"
#include "pyembed/pe_fc.h"
#include "pyembed/pe_fc_w4.h"
#include "pyembed/pe_graph.h"
#include "pyembed/pe_graph_runners.h"

static uint32_t rng_state = 4242u;

static int32_t rnd(int32_t lo, int32_t hi) /* [lo, hi] */
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return lo + (int32_t)((rng_state >> 8) % (uint32_t)(hi - lo + 1));
}

static void test_pack_unpack(void)
{
    int8_t v[37], back[37];
    uint8_t packed[19];
    int32_t n, first, i;
    for (i = 0; i < 37; i++) {
        v[i] = (int8_t)rnd(-8, 7);
    }
    v[0] = -8;
    v[1] = 7;
    PE_CHECK_EQ(pe_fc_w4_pack(v, 37, packed, 19), PE_OK);
    /* the layout: element 2i in the low nibble of byte i */
    PE_CHECK_EQ(packed[0], 0x78);
    PE_CHECK_EQ(packed[18] >> 4, 0);
    for (first = 0; first < 37; first++) {
        for (n = 0; first + n <= 37; n += 1 + (n > 4 ? 5 : 0)) {
            memset(back, 0x55, sizeof(back));
            pe_fc_w4_unpack(packed, first, n, back);
            PE_CHECK_EQ(memcmp(back, v + first, (size_t)n), 0);
            if (n < 37) {
                PE_CHECK_EQ(back[n], 0x55); /* nothing written past n */
            }
        }
    }
    PE_CHECK_EQ(pe_fc_w4_pack(v, 37, packed, 18), PE_ERR_SCRATCH);
    v[5] = 8;
    PE_CHECK_EQ(pe_fc_w4_pack(v, 37, packed, 19), PE_ERR_ARG);
    v[5] = -9;
    PE_CHECK_EQ(pe_fc_w4_pack(v, 37, packed, 19), PE_ERR_ARG);
    PE_CHECK_EQ(pe_fc_w4_pack(NULL, 37, packed, 19), PE_ERR_ARG);
    PE_CHECK_EQ(pe_fc_w4_pack(v, 0, packed, 19), PE_ERR_ARG);
}

static void test_sizes(void)
{
    pe_dims d = {5, 1, 1, 3};
    int32_t pb = 0, sb = 0;
    PE_CHECK_EQ(pe_fc_w4_get_buffer_sizes(&d, &pb, &sb), PE_OK);
    PE_CHECK_EQ(pb, 8);
    PE_CHECK_EQ(sb, 4 * 5 + 5 * 3 + 3);
    d.n = 100;
    d.c = 1000;
    PE_CHECK_EQ(pe_fc_w4_get_buffer_sizes(&d, &pb, &sb), PE_OK);
    PE_CHECK_EQ(pb, 50000);
    PE_CHECK_EQ(sb, 4 * PE_FC_W4_ROWS + PE_FC_W4_ROWS * PE_FC_W4_SLICE + 3);
    d.c = PE_FC_MAX_DEPTH + 1;
    PE_CHECK_EQ(pe_fc_w4_get_buffer_sizes(&d, &pb, &sb), PE_ERR_UNSUPPORTED);
    d.c = 4;
    d.h = 2;
    PE_CHECK_EQ(pe_fc_w4_get_buffer_sizes(&d, &pb, &sb), PE_ERR_ARG);
    d.h = 1;
    d.n = 0;
    PE_CHECK_EQ(pe_fc_w4_get_buffer_sizes(&d, &pb, &sb), PE_ERR_ARG);
    d.n = 1;
    PE_CHECK_EQ(pe_fc_w4_get_buffer_sizes(&d, NULL, &sb), PE_ERR_ARG);
}

/* one layer through the kernel and through the graph runner */
static void one_layer(int32_t batches, int32_t depth, int32_t features, int32_t per_channel, int32_t with_bias,
                      int32_t single)
{
    const int32_t qc = per_channel ? features : 1, n_w = features * depth;
    int8_t *w = malloc((size_t)n_w), *x = malloc((size_t)(batches * depth));
    int8_t *ref = malloc((size_t)(batches * features)), *got = malloc((size_t)(batches * features));
    int32_t *bias = malloc((size_t)features * 4u), *mult = malloc((size_t)qc * 4u);
    int32_t *shift = malloc((size_t)qc * 4u), *words = malloc((size_t)(PE_FC_W4_WORDS + 2 * qc) * 4u);
    int32_t pbytes = 0, sbytes = 0, i, arena_size, in_off, out_off, scr_off;
    uint8_t *packed, *scratch, *arena;
    pe_dims in_d, fd, out_d;
    pe_fc_params p;
    pe_per_channel_quant q;
    pe_context ctx;
    pe_stats stats;
    pe_graph_tensor t[4];
    pe_graph_op op;
    pe_graph g;
    const int32_t ins[3] = {0, 1, with_bias ? 2 : -1}, outs[1] = {3};
    in_d.n = batches;
    in_d.h = 1;
    in_d.w = 1;
    in_d.c = depth;
    fd.n = features;
    fd.h = 1;
    fd.w = 1;
    fd.c = depth;
    out_d.n = batches;
    out_d.h = 1;
    out_d.w = 1;
    out_d.c = features;
    PE_CHECK_EQ(pe_fc_w4_get_buffer_sizes(&fd, &pbytes, &sbytes), PE_OK);
    PE_CHECK_EQ(pbytes, (n_w + 1) / 2);
    packed = malloc((size_t)pbytes);
    scratch = malloc((size_t)sbytes + 1u);
    for (i = 0; i < n_w; i++) {
        w[i] = (int8_t)rnd(-8, 7);
    }
    for (i = 0; i < batches * depth; i++) {
        x[i] = (int8_t)rnd(-128, 127);
    }
    for (i = 0; i < features; i++) {
        bias[i] = rnd(-30000, 30000);
    }
    for (i = 0; i < qc; i++) {
        mult[i] = rnd(1 << 30, 0x7FFFFFFF);
        shift[i] = rnd(-10, 1);
    }
    PE_CHECK_EQ(pe_fc_w4_pack(w, n_w, packed, pbytes), PE_OK);
    p.input_offset = rnd(-128, 127);
    p.filter_offset = 0;
    p.output_offset = rnd(-128, 127);
    p.per_channel = per_channel;
    p.activation.min = -120;
    p.activation.max = 110;
    p.rounding = single ? PE_ROUND_SINGLE : PE_ROUND_DOUBLE;
    q.multiplier = mult;
    q.shift = shift;
    PE_CHECK_EQ(pe_fully_connected_s8(NULL, &p, &q, &in_d, x, &fd, w, with_bias ? bias : NULL, &out_d, ref), PE_OK);

    /* the kernel, the scratch exact-size and misaligned by one byte */
    memset(&stats, 0, sizeof(stats));
    ctx.buf = scratch + 1;
    ctx.size = sbytes;
    ctx.stats = &stats;
    memset(got, 0x5A, (size_t)(batches * features));
    PE_CHECK_EQ(pe_fully_connected_w4_s8(&ctx, &p, &q, &in_d, x, &fd, packed, with_bias ? bias : NULL, &out_d, got),
                PE_OK);
    PE_CHECK_EQ(memcmp(ref, got, (size_t)(batches * features)), 0);
    PE_CHECK_EQ(stats.macs, (long long)batches * depth * features);
    ctx.size = sbytes - 1;
    PE_CHECK_EQ(pe_fully_connected_w4_s8(&ctx, &p, &q, &in_d, x, &fd, packed, NULL, &out_d, got), PE_ERR_SCRATCH);
    ctx.size = sbytes;
    PE_CHECK_EQ(pe_fully_connected_w4_s8(NULL, &p, &q, &in_d, x, &fd, packed, NULL, &out_d, got), PE_ERR_ARG);
    out_d.c = features + 1;
    PE_CHECK_EQ(pe_fully_connected_w4_s8(&ctx, &p, &q, &in_d, x, &fd, packed, NULL, &out_d, got), PE_ERR_ARG);
    out_d.c = features;
    p.output_offset = 200;
    PE_CHECK_EQ(pe_fully_connected_w4_s8(&ctx, &p, &q, &in_d, x, &fd, packed, NULL, &out_d, got), PE_ERR_ARG);
    p.output_offset = 0;

    /* the graph runner on an arena: input, output, scratch */
    in_off = 0;
    out_off = (batches * depth + 15) & ~15;
    scr_off = out_off + ((batches * features + 15) & ~15) + 1; /* a misaligned scratch region */
    arena_size = scr_off + sbytes;
    arena = malloc((size_t)arena_size);
    memcpy(arena + in_off, x, (size_t)(batches * depth));
    memset(t, 0, sizeof(t));
    t[0].offset = in_off;
    t[0].dims = in_d;
    t[0].bytes = batches * depth;
    t[0].dtype = PE_DT_INT8;
    t[1].data = packed;
    t[1].offset = -1;
    t[1].dims.n = 1;
    t[1].dims.h = 1;
    t[1].dims.w = 1;
    t[1].dims.c = pbytes;
    t[1].bytes = pbytes;
    t[1].dtype = PE_DT_INT8;
    t[2].data = bias;
    t[2].offset = -1;
    t[2].dims.n = 1;
    t[2].dims.h = 1;
    t[2].dims.w = 1;
    t[2].dims.c = features;
    t[2].bytes = 4 * features;
    t[2].dtype = PE_DT_INT32;
    t[3].offset = out_off;
    t[3].dims = out_d;
    t[3].bytes = batches * features;
    t[3].dtype = PE_DT_INT8;
    memset(&g, 0, sizeof(g));
    g.tensors = t;
    g.num_tensors = 4;
    g.ops = &op;
    g.num_ops = 1;
    g.arena_size = arena_size;
    words[0] = depth;
    words[1] = features;
    words[2] = p.input_offset;
    words[3] = rnd(-128, 127);
    words[4] = -120;
    words[5] = 110;
    words[6] = single;
    words[7] = qc;
    for (i = 0; i < qc; i++) {
        words[PE_FC_W4_WORDS + i] = mult[i];
        words[PE_FC_W4_WORDS + qc + i] = shift[i];
    }
    p.output_offset = words[3];
    PE_CHECK_EQ(pe_fully_connected_s8(NULL, &p, &q, &in_d, x, &fd, w, with_bias ? bias : NULL, &out_d, ref), PE_OK);
    memset(&op, 0, sizeof(op));
    op.type = PE_GOP_FULLY_CONNECTED_W4;
    op.inputs = ins;
    op.num_inputs = with_bias ? 3 : (rnd(0, 1) ? 3 : 2);
    op.outputs = outs;
    op.num_outputs = 1;
    op.scratch_offset = scr_off;
    op.scratch_size = sbytes;
    op.params = words;
    op.num_params = PE_FC_W4_WORDS + 2 * qc;
    ctx.buf = arena;
    ctx.size = arena_size;
    ctx.stats = NULL;
    PE_CHECK_EQ(pe_graph_check(&g, NULL, NULL), PE_OK);
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &ctx), PE_OK);
    PE_CHECK_EQ(memcmp(ref, arena + out_off, (size_t)(batches * features)), 0);

    /* bad tables: a status, never a crash */
    op.num_params--;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &ctx), PE_ERR_ARG);
    op.num_params++;
    words[6] = 2;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &ctx), PE_ERR_ARG);
    words[6] = single;
    words[0] = depth + 1;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &ctx), PE_ERR_ARG);
    words[0] = depth;
    words[1] = features + 1;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &ctx), PE_ERR_ARG);
    words[1] = features;
    words[7] = qc + 1;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &ctx), PE_ERR_ARG);
    words[7] = qc;
    words[4] = 5;
    words[5] = 4;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &ctx), PE_ERR_ARG);
    words[4] = -120;
    words[5] = 110;
    t[1].bytes -= 1;
    t[1].dims.c -= 1; /* one packed byte short */
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &ctx), PE_ERR_ARG);
    t[1].bytes += 1;
    t[1].dims.c += 1;
    op.scratch_size = sbytes - 1;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &ctx), PE_ERR_SCRATCH);
    op.scratch_size = sbytes;
    t[1].dtype = PE_DT_INT16;
    t[1].bytes = pbytes * 2;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &ctx), PE_ERR_ARG);
    t[1].dtype = PE_DT_INT8;
    t[1].bytes = pbytes;
    memset(arena + out_off, 0, (size_t)(batches * features));
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &ctx), PE_OK);
    PE_CHECK_EQ(memcmp(ref, arena + out_off, (size_t)(batches * features)), 0);

    free(w);
    free(x);
    free(ref);
    free(got);
    free(bias);
    free(mult);
    free(shift);
    free(words);
    free(packed);
    free(scratch);
    free(arena);
}

int main(void)
{
    /* batches, depth, features */
    static const int32_t shapes[][3] = {{1, 1, 1}, {3, 13, 7}, {2, 16, 16}, {1, 5, 4}, {4, 8, 9}, {1, 40, 6},
                                        {2, 3, 2}, {1, 64, 12}, {2, 600, 11}, {1, 1100, 3}, {1, 513, 9},
                                        {3, 31, 17}};
    size_t s;
    int32_t pc, b, r;
    test_pack_unpack();
    test_sizes();
    for (s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        for (pc = 0; pc < 2; pc++) {
            for (b = 0; b < 2; b++) {
                for (r = 0; r < 2; r++) {
                    one_layer(shapes[s][0], shapes[s][1], shapes[s][2], pc, b, r);
                }
            }
        }
    }
    return PE_TEST_END("test_fc_w4");
}
