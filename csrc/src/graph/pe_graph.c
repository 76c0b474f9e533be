/*
 * pe_graph.c - the static graph runtime's core: check a graph once, resolve
 * each operator's tensors to pointers (constant data or arena offset) and
 * hand the operator to its runner. The runners live in pe_run_<family>.c;
 * which runners exist is the linked operator table's choice
 * (pe_graph_runner_for, pe_graph_runners.h).
 */
#include "pyembed/pe_graph.h"
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pe_graph_access.h"

/* Does the region [lo, hi) share a byte with activation tensor t? */
static int region_hits(const pe_graph *g, int32_t t, int64_t lo, int64_t hi)
{
    const pe_graph_tensor *x;
    if (t < 0 || t >= g->num_tensors) {
        return 0;
    }
    x = &g->tensors[t];
    return x->data == NULL && x->offset >= 0 && x->bytes > 0 && (int64_t)x->offset < hi &&
           lo < (int64_t)x->offset + x->bytes;
}

/* Does operator op's scratch region share a byte with one of its arena
 * tensors (inputs or outputs)? A kernel writes its scratch while it reads
 * its inputs and writes its outputs, so a plan must keep them apart.
 * Indices out of range are left to the other checks. */
static int scratch_overlaps(const pe_graph *g, const pe_graph_op *op)
{
    const int64_t lo = op->scratch_offset;
    const int64_t hi = lo + op->scratch_size;
    int32_t k;
    if (op->scratch_size <= 0) {
        return 0;
    }
    for (k = 0; k < op->num_inputs; k++) {
        if (region_hits(g, op->inputs[k], lo, hi)) {
            return 1;
        }
    }
    for (k = 0; k < op->num_outputs; k++) {
        if (region_hits(g, op->outputs[k], lo, hi)) {
            return 1;
        }
    }
    return 0;
}

/* Are op's lists well formed: counts within PE_GRAPH_MAX_IO, pointers
 * present, every input -1 or a tensor index, every output an activation
 * tensor, parameter words present when counted? */
static int io_lists_ok(const pe_graph *g, const pe_graph_op *op)
{
    int32_t k;
    if (op->num_inputs < 0 || op->num_inputs > PE_GRAPH_MAX_IO || op->num_outputs < 1 ||
        op->num_outputs > PE_GRAPH_MAX_IO || (op->num_inputs > 0 && op->inputs == NULL) ||
        op->outputs == NULL || op->num_params < 0 || (op->num_params > 0 && op->params == NULL)) {
        return 0;
    }
    for (k = 0; k < op->num_inputs; k++) {
        if (op->inputs[k] < -1 || op->inputs[k] >= g->num_tensors) {
            return 0;
        }
    }
    for (k = 0; k < op->num_outputs; k++) {
        const int32_t t = op->outputs[k];
        if (t < 0 || t >= g->num_tensors || g->tensors[t].data != NULL ||
            (g->tensors[t].offset == PE_GRAPH_STREAMED && op->type != PE_GOP_STRIPE_REGION)) {
            return 0; /* only a stripe region writes a streamed output (to its row sink) */
        }
    }
    return 1;
}

#define LEGACY_MAX_INPUTS 3

/* dtypes the first twelve operators' inputs (0..2) and output must have;
 * -1 = unused */
static void op_signature(pe_graph_op_type type, int32_t in[LEGACY_MAX_INPUTS], int32_t *out)
{
    in[0] = PE_DT_INT8;
    in[1] = -1;
    in[2] = -1;
    *out = PE_DT_INT8;
    switch (type) {
    case PE_GOP_CONV_2D:
    case PE_GOP_DEPTHWISE_CONV_2D:
    case PE_GOP_FULLY_CONNECTED:
        in[1] = PE_DT_INT8;
        in[2] = PE_DT_INT32;
        break;
    case PE_GOP_ADD:
    case PE_GOP_MUL:
        in[1] = PE_DT_INT8;
        break;
    case PE_GOP_QUANTIZE:
        in[0] = PE_DT_FLOAT32;
        break;
    case PE_GOP_DEQUANTIZE:
        *out = PE_DT_FLOAT32;
        break;
    default:
        break;
    }
}

static int is_legacy(pe_graph_op_type t)
{
    switch (t) {
    case PE_GOP_CONV_2D:
    case PE_GOP_DEPTHWISE_CONV_2D:
    case PE_GOP_AVERAGE_POOL_2D:
    case PE_GOP_MAX_POOL_2D:
    case PE_GOP_FULLY_CONNECTED:
    case PE_GOP_SOFTMAX:
    case PE_GOP_RESHAPE:
    case PE_GOP_ADD:
    case PE_GOP_MUL:
    case PE_GOP_REQUANTIZE:
    case PE_GOP_QUANTIZE:
    case PE_GOP_DEQUANTIZE:
        return 1;
    default:
        return 0;
    }
}

/* The typed signature of one of the first twelve operators. */
static int legacy_ok(const pe_graph *g, const pe_graph_op *op)
{
    int32_t in_t[LEGACY_MAX_INPUTS];
    int32_t out_t, k, t;
    int ok = op->num_inputs <= LEGACY_MAX_INPUTS && op->num_outputs == 1;
    op_signature(op->type, in_t, &out_t);
    if (ok && op->type == PE_GOP_RESHAPE && IN(0) != -1 && pe_graph_dtype_size(g->tensors[IN(0)].dtype) > 0) {
        /* RESHAPE moves bytes: any element type, the output's the input's */
        in_t[0] = (int32_t)g->tensors[IN(0)].dtype;
        out_t = in_t[0];
    }
    for (k = 0; k < LEGACY_MAX_INPUTS && ok; k++) {
        t = IN(k);
        if (t == -1) {
            /* only the bias is optional */
            ok = in_t[k] == -1 || k == 2;
        } else {
            ok = in_t[k] != -1 && (int32_t)g->tensors[t].dtype == in_t[k];
        }
    }
    ok = ok && (int32_t)g->tensors[OUT0].dtype == out_t;
    if (ok && op->type == PE_GOP_RESHAPE) {
        ok = g->tensors[IN(0)].bytes == g->tensors[OUT0].bytes;
    }
    return ok;
}

/* Scratch inside the arena and clear of the operator's own tensors. */
static int scratch_ok(const pe_graph *g, const pe_graph_op *op, int32_t arena_size)
{
    if (op->scratch_size < 0) {
        return 0;
    }
    if (op->scratch_size > 0 &&
        (op->scratch_offset < 0 || (int64_t)op->scratch_offset + op->scratch_size > (int64_t)arena_size)) {
        return 0;
    }
    return !scratch_overlaps(g, op);
}

pe_status pe_graph_check(const pe_graph *g, int32_t *bad_op, int32_t *bad_tensor)
{
    int32_t i;
    if (bad_op != NULL) {
        *bad_op = -1;
    }
    if (bad_tensor != NULL) {
        *bad_tensor = -1;
    }
    if (g == NULL || g->num_tensors < 0 || g->num_ops < 0 || g->arena_size < 0 ||
        (g->num_tensors > 0 && g->tensors == NULL) || (g->num_ops > 0 && g->ops == NULL)) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < g->num_tensors; i++) {
        if (!pe_graph_tensor_valid(g, i, g->arena_size)) {
            if (bad_tensor != NULL) {
                *bad_tensor = i;
            }
            return PE_ERR_ARG;
        }
    }
    for (i = 0; i < g->num_ops; i++) {
        const pe_graph_op *op = &g->ops[i];
        int ok = pe_graph_runner_for(op->type) != NULL && io_lists_ok(g, op) &&
                 scratch_ok(g, op, g->arena_size);
        if (ok && is_legacy(op->type)) {
            ok = legacy_ok(g, op);
        }
#if PE_GRAPH_TRUST_CHECKED
        /* what the FC runner of such a build no longer checks per call */
        if (ok && op->type == PE_GOP_FULLY_CONNECTED) {
            ok = pe_graph_check_fc(g, op) == PE_OK;
        }
#endif
        if (!ok) {
            if (bad_op != NULL) {
                *bad_op = i;
            }
            return PE_ERR_ARG;
        }
    }
    return PE_OK;
}

static pe_status invoke_op(const pe_graph *g, int32_t i, const pe_context *arena, const pe_row_source *rows,
                           const pe_row_sink *sink)
{
    const pe_graph_op *op;
    pe_graph_runner run;
    pe_context ctx;
    if (g == NULL || arena == NULL || i < 0 || i >= g->num_ops || g->ops == NULL ||
        g->tensors == NULL) {
        return PE_ERR_ARG;
    }
    if (arena->buf == NULL || arena->size < g->arena_size || arena->size < 0) {
        return PE_ERR_SCRATCH;
    }
    op = &g->ops[i];
    run = pe_graph_runner_for(op->type);
#if PE_GRAPH_TRUST_CHECKED
    /* lists and scratch checked at init; every tensor offset is a multiple
     * of its element size (at most 4), so a 4-aligned arena aligns them all */
    if (run == NULL || ((uintptr_t)arena->buf & 3u) != 0u) {
        return PE_ERR_ARG;
    }
    ctx.buf = op->scratch_size > 0 ? (int8_t *)arena->buf + op->scratch_offset : NULL;
    ctx.size = op->scratch_size;
    ctx.stats = arena->stats;
#else
    if (run == NULL || !io_lists_ok(g, op)) {
        return PE_ERR_ARG;
    }
    if (is_legacy(op->type) && (op->num_inputs > LEGACY_MAX_INPUTS || op->num_outputs != 1)) {
        return PE_ERR_ARG;
    }
    ctx.buf = NULL;
    ctx.size = 0;
    ctx.stats = arena->stats;
    if (op->scratch_size > 0) {
        if (!scratch_ok(g, op, arena->size)) {
            return PE_ERR_ARG;
        }
        ctx.buf = (int8_t *)arena->buf + op->scratch_offset;
        ctx.size = op->scratch_size;
    } else if (op->scratch_size < 0) {
        return PE_ERR_ARG;
    }
#endif
    if (rows != NULL || sink != NULL) {
        const pe_graph_rows_runner run_rows = pe_graph_rows_runner_for(op->type);
        if (run_rows != NULL) {
            return run_rows(g, op, &ctx, arena, rows, sink);
        }
    }
    return run(g, op, &ctx, arena);
}

pe_status pe_graph_invoke_op(const pe_graph *g, int32_t i, const pe_context *arena)
{
    return invoke_op(g, i, arena, NULL, NULL);
}

pe_status pe_graph_invoke_op_rows(const pe_graph *g, int32_t i, const pe_context *arena,
                                  const pe_row_source *rows)
{
    return pe_graph_invoke_op_io(g, i, arena, rows, NULL);
}

pe_status pe_graph_invoke_op_io(const pe_graph *g, int32_t i, const pe_context *arena,
                                const pe_row_source *rows, const pe_row_sink *sink)
{
    if ((rows != NULL && rows->read == NULL) || (sink != NULL && sink->write == NULL)) {
        return PE_ERR_ARG;
    }
    return invoke_op(g, i, arena, rows, sink);
}

pe_status pe_graph_invoke_rows(const pe_graph *g, const pe_context *arena, const pe_row_source *rows)
{
    return pe_graph_invoke_io(g, arena, rows, NULL);
}

pe_status pe_graph_invoke_io(const pe_graph *g, const pe_context *arena, const pe_row_source *rows,
                             const pe_row_sink *sink)
{
    int32_t i;
    if (g == NULL) {
        return PE_ERR_ARG;
    }
    i = 0;
    while (i < g->num_ops) {
        pe_status st = pe_graph_invoke_op_io(g, i, arena, rows, sink);
        if (st == PE_OK) {
            st = pe_graph_next(g, i, arena, &i);
        }
        if (st != PE_OK) {
            return st;
        }
    }
    return PE_OK;
}

pe_status pe_graph_invoke(const pe_graph *g, const pe_context *arena)
{
    return pe_graph_invoke_rows(g, arena, NULL);
}
