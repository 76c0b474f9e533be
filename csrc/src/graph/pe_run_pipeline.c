/*
 * pe_pipeline_graph.c - graph runners of the compiler pipeline's operators
 * (pe_pipeline.h): PE_GOP_STRIPE_REGION and PE_GOP_CONV_POOL. Kept apart from
 * pe_pipeline.c so the stripe bindings link the kernels without the runtime.
 */
#include <stddef.h>
#include <stdint.h>

#include "pyembed/pe_pipeline.h"
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"

typedef struct {
    const pe_graph *g;
    const pe_graph_op *op;
    const pe_context *arena;
} lookup_ctx;

/* Constant slot of the operator: an int8 (elem_bytes 1) or int32 (4) tensor
 * of exactly count elements. */
static const void *graph_lookup(const void *user, int32_t slot, int32_t elem_bytes, int32_t count)
{
    const lookup_ctx *c = (const lookup_ctx *)user;
    const void *p;
    int32_t t;
    pe_dtype want;
    if (slot < 1 || (elem_bytes != 1 && elem_bytes != 4)) {
        return NULL;
    }
    want = elem_bytes == 1 ? PE_DT_INT8 : PE_DT_INT32;
    t = pe_graph_input_index(c->op, slot);
    if (t < 0) {
        return NULL;
    }
    p = pe_graph_input(c->g, c->op, slot, c->arena, want);
    if (p == NULL || pe_graph_count(c->g, t) != count) {
        return NULL;
    }
    return p;
}

/* Do tensors a and b share arena bytes? (Constants never do.) */
static int shares_bytes(const pe_graph *g, int32_t a, int32_t b)
{
    const pe_graph_tensor *ta = &g->tensors[a];
    const pe_graph_tensor *tb = &g->tensors[b];
    if (ta->data != NULL || tb->data != NULL || ta->offset < 0 || tb->offset < 0) {
        return 0;
    }
    return (int64_t)ta->offset < (int64_t)tb->offset + tb->bytes &&
           (int64_t)tb->offset < (int64_t)ta->offset + ta->bytes;
}

pe_status pe_graph_run_stripe_region_rows(const pe_graph *g, const pe_graph_op *op,
                                          const pe_context *scratch, const pe_context *arena,
                                          const pe_row_source *rows, const pe_row_sink *sink)
{
    const int8_t *x = NULL;
    int8_t *y = NULL;
    int32_t ti, to;
    int streamed, streamed_out;
    lookup_ctx lc;
    pe_context lines;
    const pe_context *linesp = NULL;
    if (op->num_inputs < 1 || op->num_outputs < 1 || op->num_outputs > 2 || op->params == NULL ||
        op->num_params < PE_STRIPE_REGION_HEADER_WORDS) {
        return PE_ERR_ARG;
    }
    if (op->num_outputs == 2) {
        /* memories per part (PE_STRIPE_REGION_SPLIT): the line stores are output 1 */
        const int32_t tl = pe_graph_output_index(op, 1);
        if ((op->params[4] & PE_STRIPE_REGION_SPLIT) == 0 || tl < 0) {
            return PE_ERR_ARG;
        }
        lines.buf = pe_graph_output(g, op, 1, arena, PE_DT_INT8);
        if (lines.buf == NULL) {
            return PE_ERR_ARG;
        }
        lines.size = pe_graph_count(g, tl);
        lines.stats = NULL;
        linesp = &lines;
    }
    ti = pe_graph_input_index(op, 0);
    to = pe_graph_output_index(op, 0);
    if (ti < 0 || ti >= g->num_tensors || to < 0 || to >= g->num_tensors) {
        return PE_ERR_ARG;
    }
    streamed_out = g->tensors[to].offset == PE_GRAPH_STREAMED && g->tensors[to].data == NULL;
    if (streamed_out && (sink == NULL || sink->write == NULL || !pe_graph_tensor_valid(g, to, arena->size))) {
        return PE_ERR_ARG; /* a streamed output needs its row sink */
    }
    streamed = g->tensors[ti].offset == PE_GRAPH_STREAMED && g->tensors[ti].data == NULL;
    if (streamed) {
        if (rows == NULL || rows->read == NULL || !pe_graph_tensor_valid(g, ti, arena->size)) {
            return PE_ERR_ARG; /* a streamed input needs its row source */
        }
    } else {
        x = (const int8_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT8);
    }
    if (!streamed_out) {
        y = (int8_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT8);
    }
    /* x and y may share bytes: pe_stripe_run_s8 checks the overlap is one it allows */
    if ((x == NULL && !streamed) || (y == NULL && !streamed_out)) {
        return PE_ERR_ARG;
    }
    lc.g = g;
    lc.op = op;
    lc.arena = arena;
    if (linesp != NULL) {
        return pe_stripe_region_run_split(scratch, linesp, op->params, op->num_params, graph_lookup, &lc,
                                          pe_graph_dims(g, ti), streamed ? NULL : x, streamed ? rows : NULL,
                                          pe_graph_dims(g, to), streamed_out ? NULL : y, streamed_out ? sink : NULL);
    }
    if (streamed_out) {
        return pe_stripe_region_run_io(scratch, op->params, op->num_params, graph_lookup, &lc,
                                       pe_graph_dims(g, ti), x, streamed ? rows : NULL, pe_graph_dims(g, to), NULL,
                                       sink);
    }
    if (streamed) {
        return pe_stripe_region_run_rows(scratch, op->params, op->num_params, graph_lookup, &lc,
                                         pe_graph_dims(g, ti), rows, pe_graph_dims(g, to), y);
    }
    return pe_stripe_region_run(scratch, op->params, op->num_params, graph_lookup, &lc, pe_graph_dims(g, ti), x,
                                pe_graph_dims(g, to), y);
}

pe_status pe_graph_run_stripe_region(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                     const pe_context *arena)
{
    return pe_graph_run_stripe_region_rows(g, op, scratch, arena, NULL, NULL);
}

pe_status pe_graph_run_conv_pool(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                 const pe_context *arena)
{
    const int8_t *x, *f, *table = NULL;
    const int32_t *b = NULL, *m, *s;
    int8_t *y;
    int32_t ti, tf, to, oc, table_channels = 1;
    if ((op->num_inputs != 5 && op->num_inputs != 6) || op->num_outputs != 1 || op->params == NULL) {
        return PE_ERR_ARG;
    }
    x = (const int8_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT8);
    f = (const int8_t *)pe_graph_input(g, op, 1, arena, PE_DT_INT8);
    m = (const int32_t *)pe_graph_input(g, op, 3, arena, PE_DT_INT32);
    s = (const int32_t *)pe_graph_input(g, op, 4, arena, PE_DT_INT32);
    y = (int8_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT8);
    ti = pe_graph_input_index(op, 0);
    tf = pe_graph_input_index(op, 1);
    to = pe_graph_output_index(op, 0);
    if (x == NULL || f == NULL || m == NULL || s == NULL || y == NULL || shares_bytes(g, ti, to)) {
        return PE_ERR_ARG;
    }
    oc = pe_graph_dims(g, tf)->n;
    if (pe_graph_count(g, pe_graph_input_index(op, 3)) != oc || pe_graph_count(g, pe_graph_input_index(op, 4)) != oc) {
        return PE_ERR_ARG;
    }
    if (pe_graph_input_index(op, 2) >= 0) {
        b = (const int32_t *)pe_graph_input(g, op, 2, arena, PE_DT_INT32);
        if (b == NULL || pe_graph_count(g, pe_graph_input_index(op, 2)) != oc) {
            return PE_ERR_ARG;
        }
    }
    if (op->num_inputs == 6 && pe_graph_input_index(op, 5) >= 0) {
        /* input 5: the element-wise table between the two (256 bytes, or 256 per channel) */
        const int32_t tt = pe_graph_input_index(op, 5);
        table = (const int8_t *)pe_graph_input(g, op, 5, arena, PE_DT_INT8);
        if (table == NULL || (pe_graph_count(g, tt) != 256 && pe_graph_count(g, tt) != 256 * oc)) {
            return PE_ERR_ARG;
        }
        table_channels = pe_graph_count(g, tt) / 256;
    }
    return pe_conv_pool_op_run(scratch, op->params, op->num_params, pe_graph_dims(g, ti), x, pe_graph_dims(g, tf), f,
                               b, m, s, table, table_channels, pe_graph_dims(g, to), y);
}
