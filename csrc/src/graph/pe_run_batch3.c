/*
 * pe_run_batch3.c - graph runners of the kernels in kernels/batch3/pe_batch3.c
 * (issue #30's third batch of TFLM operators).
 */
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_batch3.h"

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
    ti = pe_graph_input_index(op, 0);
    to = pe_graph_output_index(op, 0);
    if (ti < 0 || to < 0 || !pe_graph_tensor_valid(g, ti, arena->size)) {
        return PE_ERR_ARG;
    }
    dt = g->tensors[ti].dtype;
    if (dt != PE_DT_INT8 && dt != PE_DT_INT16 && dt != PE_DT_INT32) {
        return PE_ERR_ARG;
    }
    x = pe_graph_input(g, op, 0, arena, dt);
    y = pe_graph_output(g, op, 0, arena, dt);
    count = pe_batch3_count(rank, w + 1);
    if (x == NULL || y == NULL || count < 0 || (int64_t)pe_graph_count(g, ti) != count ||
        (int64_t)pe_graph_count(g, to) != count) {
        return PE_ERR_ARG;
    }
    return pe_reverse_v2(pe_graph_dtype_size(dt), rank, w + 1, w + 1 + rank, x, y);
}
