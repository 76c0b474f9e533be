/*
 * pe_run_batch4.c - graph runners of the kernels in kernels/batch4/pe_batch4.c
 * (issue #30's fourth batch of TFLM operators, data movement).
 */
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_batch4.h"

/* Element type of input k (checked against the arena), or -1 when absent or invalid. */
static int32_t in_dtype(const pe_graph *g, const pe_graph_op *op, int32_t k, const pe_context *arena)
{
    const int32_t t = pe_graph_input_index(op, k);
    if (t < 0 || !pe_graph_tensor_valid(g, t, arena->size)) {
        return -1;
    }
    return (int32_t)g->tensors[t].dtype;
}

/* A type these raw copies accept: int8, int16, int32, float32 or bool. */
static int data_type(int32_t dt)
{
    return dt == PE_DT_INT8 || dt == PE_DT_INT16 || dt == PE_DT_INT32 || dt == PE_DT_FLOAT32 || dt == PE_DT_BOOL;
}

pe_status pe_graph_run_fill(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                            const pe_context *arena)
{
    const int32_t *w = op->params;
    const int fill = op->type == PE_GOP_FILL;
    const int32_t dt = in_dtype(g, op, 0, arena);
    const void *x;
    void *y;
    int32_t to;
    (void)scratch;
    if (op->num_inputs != 1 || op->num_outputs != 1 || w == NULL || op->num_params != 1 || w[0] < 1 ||
        !data_type(dt)) {
        return PE_ERR_ARG;
    }
    to = pe_graph_output_index(op, 0);
    x = pe_graph_input(g, op, 0, arena, (pe_dtype)dt);
    y = pe_graph_output(g, op, 0, arena, (pe_dtype)dt);
    if (x == NULL || y == NULL || pe_graph_count(g, to) != w[0] ||
        pe_graph_count(g, pe_graph_input_index(op, 0)) != (fill ? 1 : w[0])) {
        return PE_ERR_ARG;
    }
    if (fill) {
        return pe_fill(pe_graph_dtype_size((pe_dtype)dt), w[0], x, y);
    }
    return pe_zeros(pe_graph_dtype_size((pe_dtype)dt), w[0], y);
}

pe_status pe_graph_run_shape(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                             const pe_context *arena)
{
    const int32_t *w = op->params;
    int32_t *y;
    int32_t k;
    (void)scratch;
    if (op->num_inputs != 1 || op->num_outputs != 1 || w == NULL || op->num_params < 1 || w[0] < 1 ||
        w[0] > PE_BATCH4_MAX_RANK || op->num_params != 1 + w[0] || in_dtype(g, op, 0, arena) < 0) {
        return PE_ERR_ARG;
    }
    for (k = 0; k < w[0]; ++k) {
        if (w[1 + k] < 0) {
            return PE_ERR_ARG;
        }
    }
    y = (int32_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT32);
    if (y == NULL || pe_graph_count(g, pe_graph_output_index(op, 0)) != w[0]) {
        return PE_ERR_ARG;
    }
    return pe_shape_of(w[0], w + 1, y);
}

pe_status pe_graph_run_broadcast_args(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                      const pe_context *arena)
{
    const int32_t *w = op->params;
    const int32_t *a, *b;
    int32_t *y;
    (void)scratch;
    if (op->num_inputs != 2 || op->num_outputs != 1 || w == NULL || op->num_params != 3) {
        return PE_ERR_ARG;
    }
    a = (const int32_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT32);
    b = (const int32_t *)pe_graph_input(g, op, 1, arena, PE_DT_INT32);
    y = (int32_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT32);
    if (a == NULL || b == NULL || y == NULL || pe_graph_count(g, pe_graph_input_index(op, 0)) != w[0] ||
        pe_graph_count(g, pe_graph_input_index(op, 1)) != w[1] ||
        pe_graph_count(g, pe_graph_output_index(op, 0)) != w[2]) {
        return PE_ERR_ARG;
    }
    return pe_broadcast_args(w[0], a, w[1], b, w[2], y);
}

pe_status pe_graph_run_space_to_batch_nd(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                         const pe_context *arena)
{
    const int32_t *w = op->params;
    const int s2b = op->type == PE_GOP_SPACE_TO_BATCH_ND;
    const int32_t dt = in_dtype(g, op, 0, arena);
    const void *x;
    void *y;
    int64_t space, batch;
    (void)scratch;
    if (op->num_inputs != 1 || op->num_outputs != 1 || w == NULL || op->num_params != PE_S2B_WORDS ||
        (dt != PE_DT_INT8 && dt != PE_DT_FLOAT32) || (!s2b && w[PE_S2B_GEOM] != 0)) {
        return PE_ERR_ARG;
    }
    x = pe_graph_input(g, op, 0, arena, (pe_dtype)dt);
    y = pe_graph_output(g, op, 0, arena, (pe_dtype)dt);
    if (x == NULL || y == NULL) {
        return PE_ERR_ARG;
    }
    /* the kernel checks the words; here the tensors must hold what they describe */
    if (w[0] < 1 || w[1] < 1 || w[2] < 1 || w[3] < 1 || w[8] < 1 || w[9] < 1 || w[10] < 1) {
        return PE_ERR_ARG;
    }
    space = (int64_t)w[0] * w[1];
    batch = (int64_t)w[8] * w[9];
    if (space > INT32_MAX || batch > INT32_MAX) {
        return PE_ERR_ARG;
    }
    space *= w[2];
    batch *= w[10];
    if (space > INT32_MAX || batch > INT32_MAX) {
        return PE_ERR_ARG;
    }
    space *= w[3];
    batch *= w[3];
    if (space > INT32_MAX || batch > INT32_MAX ||
        pe_graph_count(g, pe_graph_input_index(op, 0)) != (s2b ? space : batch) ||
        pe_graph_count(g, pe_graph_output_index(op, 0)) != (s2b ? batch : space)) {
        return PE_ERR_ARG;
    }
    if (s2b) {
        return pe_space_to_batch_nd(pe_graph_dtype_size((pe_dtype)dt), w, w[PE_S2B_GEOM], x, y);
    }
    return pe_batch_to_space_nd(pe_graph_dtype_size((pe_dtype)dt), w, x, y);
}

pe_status pe_graph_run_gather_nd(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                 const pe_context *arena)
{
    const int32_t *w = op->params;
    const int32_t dt = in_dtype(g, op, 0, arena);
    const int32_t *idx;
    const void *x;
    void *y;
    (void)scratch;
    if (op->num_inputs != 2 || op->num_outputs != 1 || w == NULL || op->num_params < 4 || w[1] < 1 ||
        w[1] > PE_BATCH4_MAX_RANK || op->num_params != PE_GATHER_ND_WORDS(w[1]) ||
        (dt != PE_DT_INT8 && dt != PE_DT_FLOAT32) || w[0] < 1 || w[2] < 1 ||
        (int64_t)w[0] * w[1] > INT32_MAX || (int64_t)w[0] * w[2] > INT32_MAX) {
        return PE_ERR_ARG;
    }
    x = pe_graph_input(g, op, 0, arena, (pe_dtype)dt);
    idx = (const int32_t *)pe_graph_input(g, op, 1, arena, PE_DT_INT32);
    y = pe_graph_output(g, op, 0, arena, (pe_dtype)dt);
    if (x == NULL || idx == NULL || y == NULL || pe_graph_count(g, pe_graph_input_index(op, 0)) != w[3] ||
        pe_graph_count(g, pe_graph_input_index(op, 1)) != w[0] * w[1] ||
        pe_graph_count(g, pe_graph_output_index(op, 0)) != w[0] * w[2]) {
        return PE_ERR_ARG;
    }
    return pe_gather_nd(pe_graph_dtype_size((pe_dtype)dt), w[0], w[1], w[2], w[3], w + 4, idx, x, y);
}

pe_status pe_graph_run_dynamic_update_slice(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                            const pe_context *arena)
{
    const int32_t *w = op->params;
    const int32_t dt = in_dtype(g, op, 0, arena);
    const int32_t *start;
    const void *x, *u;
    void *y;
    int64_t count = 1, ucount = 1;
    int32_t rank, k;
    (void)scratch;
    if (op->num_inputs != 3 || op->num_outputs != 1 || w == NULL || op->num_params < 1) {
        return PE_ERR_ARG;
    }
    rank = w[0];
    if (rank < 1 || rank > PE_BATCH4_MAX_RANK || op->num_params != PE_DUS_WORDS(rank) || !data_type(dt) ||
        dt == PE_DT_BOOL) {
        return PE_ERR_ARG;
    }
    for (k = 0; k < rank; ++k) {
        if (w[1 + k] < 1 || w[1 + rank + k] < 1 || w[1 + rank + k] > w[1 + k]) {
            return PE_ERR_ARG;
        }
        count *= w[1 + k];
        ucount *= w[1 + rank + k];
        if (count > INT32_MAX) {
            return PE_ERR_ARG;
        }
    }
    x = pe_graph_input(g, op, 0, arena, (pe_dtype)dt);
    u = pe_graph_input(g, op, 1, arena, (pe_dtype)dt);
    start = (const int32_t *)pe_graph_input(g, op, 2, arena, PE_DT_INT32);
    y = pe_graph_output(g, op, 0, arena, (pe_dtype)dt);
    if (x == NULL || u == NULL || start == NULL || y == NULL ||
        pe_graph_count(g, pe_graph_input_index(op, 0)) != count ||
        pe_graph_count(g, pe_graph_input_index(op, 1)) != ucount ||
        pe_graph_count(g, pe_graph_input_index(op, 2)) != rank ||
        pe_graph_count(g, pe_graph_output_index(op, 0)) != count) {
        return PE_ERR_ARG;
    }
    return pe_dynamic_update_slice(pe_graph_dtype_size((pe_dtype)dt), rank, w + 1, w + 1 + rank, start, x, u, y);
}
