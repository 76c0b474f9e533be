/*
 * pe_run_batch3.c - graph runners of the kernels in kernels/batch3/pe_batch3.c
 * (issue #30's third batch of TFLM operators).
 */
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_batch3.h"

/* The one input and one output of a one-to-one operator: their tensor indices, the input checked
 * against the arena, its element type (int8, int16 or int32) and both buffers (NULL when a check
 * of pe_graph_input / pe_graph_output fails). 0 when an index or the type is wrong. */
static int one_io(const pe_graph *g, const pe_graph_op *op, const pe_context *arena, int32_t *ti,
                  int32_t *to, pe_dtype *dt, const void **x, void **y)
{
    *ti = pe_graph_input_index(op, 0);
    *to = pe_graph_output_index(op, 0);
    if (*ti < 0 || *to < 0 || !pe_graph_tensor_valid(g, *ti, arena->size)) {
        return 0;
    }
    *dt = g->tensors[*ti].dtype;
    if (*dt != PE_DT_INT8 && *dt != PE_DT_INT16 && *dt != PE_DT_INT32) {
        return 0;
    }
    *x = pe_graph_input(g, op, 0, arena, *dt);
    *y = pe_graph_output(g, op, 0, arena, *dt);
    return 1;
}

pe_status pe_graph_run_reverse_v2(const pe_graph *g, const pe_graph_op *op,
                                  const pe_context *scratch, const pe_context *arena)
{
    const int32_t *w = op->params;
    const void *x;
    void *y;
    int32_t ti, to, rank, k;
    int64_t count;
    pe_dtype dt;
    (void)scratch;
    if (op->num_inputs != 1 || op->num_outputs != 1 || w == NULL || op->num_params < 1) {
        return PE_ERR_ARG;
    }
    rank = w[0];
    if (rank < 1 || rank > PE_BATCH3_MAX_RANK || op->num_params != PE_REVERSE_V2_WORDS(rank)) {
        return PE_ERR_ARG;
    }
    for (k = 0; k < rank; ++k) {
        if (w[1 + rank + k] != 0 && w[1 + rank + k] != 1) {
            return PE_ERR_ARG;
        }
    }
    if (!one_io(g, op, arena, &ti, &to, &dt, &x, &y)) {
        return PE_ERR_ARG;
    }
    count = pe_batch3_count(rank, w + 1);
    if (x == NULL || y == NULL || count < 0 || (int64_t)pe_graph_count(g, ti) != count ||
        (int64_t)pe_graph_count(g, to) != count) {
        return PE_ERR_ARG;
    }
    return pe_reverse_v2(pe_graph_dtype_size(dt), rank, w + 1, w + 1 + rank, x, y);
}

pe_status pe_graph_run_pack(const pe_graph *g, const pe_graph_op *op,
                            const pe_context *scratch, const pe_context *arena)
{
    const int32_t *w = op->params;
    const int pack = op->type == PE_GOP_PACK;
    const int32_t n_pieces = pack ? op->num_inputs : op->num_outputs;
    int32_t whole, k, esize;
    int64_t count;
    pe_dtype dt;
    (void)scratch;
    if (w == NULL || op->num_params != PE_PACK_WORDS || (pack ? op->num_outputs : op->num_inputs) != 1 ||
        n_pieces < 1 || n_pieces > PE_GRAPH_MAX_IO || w[1] != n_pieces || w[0] < 1 || w[2] < 1) {
        return PE_ERR_ARG;
    }
    whole = pack ? pe_graph_output_index(op, 0) : pe_graph_input_index(op, 0);
    if (whole < 0 || !pe_graph_tensor_valid(g, whole, arena->size)) {
        return PE_ERR_ARG;
    }
    dt = g->tensors[whole].dtype;
    if (dt != PE_DT_INT8 && dt != PE_DT_INT16 && dt != PE_DT_INT32) {
        return PE_ERR_ARG;
    }
    count = pe_batch3_count(3, w);
    if (count < 0 || (int64_t)pe_graph_count(g, whole) != count) {
        return PE_ERR_ARG;
    }
    esize = pe_graph_dtype_size(dt);
    /* every piece is checked before anything is written */
    for (k = 0; k < n_pieces; ++k) {
        const int32_t t = pack ? pe_graph_input_index(op, k) : pe_graph_output_index(op, k);
        const void *p = pack ? pe_graph_input(g, op, k, arena, dt) : (const void *)pe_graph_output(g, op, k, arena, dt);
        if (t < 0 || p == NULL || (int64_t)pe_graph_count(g, t) != (int64_t)w[0] * w[2]) {
            return PE_ERR_ARG;
        }
    }
    if (pack) {
        void *y = pe_graph_output(g, op, 0, arena, dt);
        if (y == NULL) {
            return PE_ERR_ARG;
        }
        for (k = 0; k < n_pieces; ++k) {
            const pe_status s = pe_pack_slot(esize, w[0], w[1], k, w[2], pe_graph_input(g, op, k, arena, dt), y);
            if (s != PE_OK) {
                return s;
            }
        }
    } else {
        const void *x = pe_graph_input(g, op, 0, arena, dt);
        if (x == NULL) {
            return PE_ERR_ARG;
        }
        for (k = 0; k < n_pieces; ++k) {
            const pe_status s = pe_unpack_slot(esize, w[0], w[1], k, w[2], x, pe_graph_output(g, op, k, arena, dt));
            if (s != PE_OK) {
                return s;
            }
        }
    }
    return PE_OK;
}

pe_status pe_graph_run_broadcast_to(const pe_graph *g, const pe_graph_op *op,
                                    const pe_context *scratch, const pe_context *arena)
{
    const int32_t *w = op->params;
    const void *x;
    void *y;
    int32_t ti, to, rank;
    int64_t count;
    pe_dtype dt;
    (void)scratch;
    if (op->num_inputs != 1 || op->num_outputs != 1 || w == NULL || op->num_params < 1) {
        return PE_ERR_ARG;
    }
    rank = w[0];
    if (rank < 1 || rank > PE_BATCH3_MAX_RANK || op->num_params != PE_BROADCAST_TO_WORDS(rank)) {
        return PE_ERR_ARG;
    }
    if (!one_io(g, op, arena, &ti, &to, &dt, &x, &y)) {
        return PE_ERR_ARG;
    }
    count = pe_batch3_count(rank, w + 1);
    if (x == NULL || y == NULL || count < 0 || (int64_t)pe_graph_count(g, to) != count) {
        return PE_ERR_ARG;
    }
    return pe_broadcast_to(pe_graph_dtype_size(dt), rank, w + 1, w + 1 + rank, pe_graph_count(g, ti), x, y);
}
