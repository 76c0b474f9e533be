/* test_fc_w16_graph.c - the graph runner of PE_GOP_FULLY_CONNECTED_W16
 * (pe_fc_w16.h): the same bytes as a PE_GOP_FULLY_CONNECTED operator on the
 * int8 weights, through pe_graph_invoke_op on exact-size buffers (ragged
 * depths and features, per-tensor and per-channel, bias or none, both
 * roundings), and PE_ERR_ARG / PE_ERR_SCRATCH for bad tables. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pe_test.h"
#include "pyembed/pe_fc.h"
#include "pyembed/pe_fc_w16.h"
#include "pyembed/pe_graph.h"

static uint32_t rng_state = 777u;

static int32_t rnd(int32_t lo, int32_t hi) /* [lo, hi] */
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return lo + (int32_t)((rng_state >> 8) % (uint32_t)(hi - lo + 1));
}

static int32_t align16(int32_t v)
{
    return (v + 15) & ~15;
}

static void tensor(pe_graph_tensor *t, const void *data, int32_t offset, int32_t n, int32_t c, pe_dtype dt,
                   int32_t esize)
{
    memset(t, 0, sizeof(*t));
    t->data = data;
    t->offset = offset;
    t->dims.n = n;
    t->dims.h = 1;
    t->dims.w = 1;
    t->dims.c = c;
    t->bytes = n * c * esize;
    t->dtype = dt;
}

/* one layer: the int8 operator and the packed one on the same input */
static void one_layer(int32_t batches, int32_t depth, int32_t features, int32_t per_channel, int32_t with_bias,
                      int32_t single)
{
    const int32_t qc = per_channel ? features : 1; /* the int8 runner: per_channel == (count != 1) */
    int8_t *w = malloc((size_t)(features * depth));
    int32_t *bias = malloc((size_t)features * 4u), *mult = malloc((size_t)qc * 4u);
    int32_t *shift = malloc((size_t)qc * 4u), *words = malloc((size_t)(PE_FC_W16_WORDS + 2 * qc) * 4u);
    int32_t pbytes = 0, sbytes = 0, arena_size, out_off, scr_off, i;
    int16_t *packed;
    uint8_t *arena, *ref;
    pe_graph_tensor t[5];
    pe_graph_op op;
    pe_graph g;
    pe_context ctx;
    pe_dims fd = {0, 1, 1, 0};
    const int32_t ins8[3] = {0, 1, with_bias ? 2 : -1}, ins16[3] = {0, 4, with_bias ? 2 : -1}, outs[1] = {3};
    fd.n = features;
    fd.c = depth;
    PE_CHECK_EQ(pe_fc_w16_get_buffer_sizes(&fd, &pbytes, &sbytes), PE_OK);
    packed = malloc((size_t)pbytes);
    for (i = 0; i < features * depth; i++) {
        w[i] = (int8_t)rnd(-128, 127);
    }
    for (i = 0; i < features; i++) {
        bias[i] = rnd(-30000, 30000);
    }
    for (i = 0; i < qc; i++) {
        mult[i] = rnd(1 << 30, 0x7FFFFFFF);
        shift[i] = rnd(-12, 2);
    }
    PE_CHECK_EQ(pe_fc_w16_pack(&fd, w, 0, packed, pbytes), PE_OK);
    out_off = align16(batches * depth);
    scr_off = out_off + align16(batches * features);
    arena_size = scr_off + sbytes;
    arena = malloc((size_t)arena_size);
    ref = malloc((size_t)(batches * features));
    for (i = 0; i < arena_size; i++) {
        arena[i] = (uint8_t)rnd(0, 255);
    }
    tensor(&t[0], NULL, 0, batches, depth, PE_DT_INT8, 1);
    tensor(&t[1], w, -1, features, depth, PE_DT_INT8, 1);
    tensor(&t[2], bias, -1, 1, features, PE_DT_INT32, 4);
    tensor(&t[3], NULL, out_off, batches, features, PE_DT_INT8, 1);
    tensor(&t[4], packed, -1, 1, pbytes / 2, PE_DT_INT16, 2);
    g.tensors = t;
    g.num_tensors = 5;
    g.ops = &op;
    g.num_ops = 1;
    g.arena_size = arena_size;
    ctx.buf = arena;
    ctx.size = arena_size;
    ctx.stats = NULL;

    /* the int8 operator */
    memset(&op, 0, sizeof(op));
    op.type = PE_GOP_FULLY_CONNECTED;
    op.inputs = ins8;
    op.num_inputs = 3;
    op.outputs = outs;
    op.num_outputs = 1;
    op.scratch_offset = -1;
    op.p.fc.params.input_offset = rnd(-128, 127);
    op.p.fc.params.output_offset = rnd(-128, 127);
    op.p.fc.params.per_channel = per_channel;
    op.p.fc.params.activation.min = -120;
    op.p.fc.params.activation.max = 110;
    op.p.fc.params.rounding = single ? PE_ROUND_SINGLE : PE_ROUND_DOUBLE;
    op.p.fc.quant.quant.multiplier = mult;
    op.p.fc.quant.quant.shift = shift;
    op.p.fc.quant.count = qc;
    PE_CHECK_EQ(pe_graph_check(&g, NULL, NULL), PE_OK);
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &ctx), PE_OK);
    memcpy(ref, arena + out_off, (size_t)(batches * features));

    /* the packed one */
    words[0] = depth;
    words[1] = features;
    words[2] = op.p.fc.params.input_offset;
    words[3] = op.p.fc.params.output_offset;
    words[4] = -120;
    words[5] = 110;
    words[6] = single;
    words[7] = qc;
    for (i = 0; i < qc; i++) {
        words[PE_FC_W16_WORDS + i] = mult[i];
        words[PE_FC_W16_WORDS + qc + i] = shift[i];
    }
    memset(&op, 0, sizeof(op));
    op.type = PE_GOP_FULLY_CONNECTED_W16;
    op.inputs = ins16;
    op.num_inputs = with_bias ? 3 : (rnd(0, 1) ? 3 : 2);
    op.outputs = outs;
    op.num_outputs = 1;
    op.scratch_offset = scr_off;
    op.scratch_size = sbytes;
    op.params = words;
    op.num_params = PE_FC_W16_WORDS + 2 * qc;
    memset(arena + out_off, 0x5A, (size_t)(batches * features));
    PE_CHECK_EQ(pe_graph_check(&g, NULL, NULL), PE_OK);
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &ctx), PE_OK);
    PE_CHECK_EQ(memcmp(ref, arena + out_off, (size_t)(batches * features)), 0);

    /* bad tables: never a crash, a status */
    op.num_params--;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &ctx), PE_ERR_ARG);
    op.num_params++;
    words[6] = 2;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &ctx), PE_ERR_ARG);
    words[6] = single;
    words[0] = depth + 1; /* the input is no longer whole rows, or the packed count disagrees */
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &ctx), PE_ERR_ARG);
    words[0] = depth;
    words[1] = features + 4; /* more features than the packed tensor and the output hold */
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &ctx), PE_ERR_ARG);
    words[1] = features;
    words[7] = qc + 1;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &ctx), PE_ERR_ARG);
    words[7] = qc;
    words[4] = 5;
    words[5] = 4; /* act.min > act.max */
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &ctx), PE_ERR_ARG);
    words[4] = -120;
    words[5] = 110;
    t[4].bytes -= 2;
    t[4].dims.c -= 1; /* one packed value short */
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &ctx), PE_ERR_ARG);
    t[4].bytes += 2;
    t[4].dims.c += 1;
    op.scratch_size = sbytes - 1;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &ctx), PE_ERR_SCRATCH);
    op.scratch_size = sbytes;
    t[4].dtype = PE_DT_INT8;
    t[4].bytes = pbytes;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &ctx), PE_ERR_ARG);
    t[4].dtype = PE_DT_INT16;
    t[4].bytes = pbytes;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &ctx), PE_OK);
    PE_CHECK_EQ(memcmp(ref, arena + out_off, (size_t)(batches * features)), 0);

    free(w);
    free(bias);
    free(mult);
    free(shift);
    free(words);
    free(packed);
    free(arena);
    free(ref);
}

int main(void)
{
    static const int32_t shapes[][3] = {{1, 1, 1}, {3, 13, 7}, {2, 16, 16}, {1, 5, 4}, {4, 8, 9},
                                        {1, 40, 6}, {2, 3, 2}, {1, 64, 12}};
    size_t s;
    int32_t pc, b, r;
    for (s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        for (pc = 0; pc < 2; pc++) {
            for (b = 0; b < 2; b++) {
                for (r = 0; r < 2; r++) {
                    one_layer(shapes[s][0], shapes[s][1], shapes[s][2], pc && shapes[s][2] > 1, b, r);
                }
            }
        }
    }
    return PE_TEST_END("test_fc_w16_graph");
}
