/*
 * pe_run_batch6.c - graph runners of the kernels in kernels/batch6/pe_batch6.c
 * (issue #30's sixth batch of TFLM operators).
 */
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_batch6.h"

pe_status pe_graph_run_reduce_all(const pe_graph *g, const pe_graph_op *op,
                                  const pe_context *scratch, const pe_context *arena)
{
    const int32_t *w = op->params;
    const uint8_t *x;
    uint8_t *y;
    int64_t nx = 1, ny = 1;
    int32_t ti, to, rank, d;
    (void)scratch;
    if (w == NULL || op->num_params < PE_REDUCE_ALL_MIN_WORDS || op->num_inputs != 1 || op->num_outputs != 1) {
        return PE_ERR_ARG;
    }
    rank = w[1];
    if (rank < 1 || rank > PE_REDUCE_ALL_MAX_RANK || op->num_params != 2 + rank || w[0] < 0 ||
        w[0] >= (int32_t)1 << rank) {
        return PE_ERR_ARG;
    }
    for (d = 0; d < rank; ++d) {
        if (w[2 + d] < 1) {
            return PE_ERR_ARG;
        }
        nx *= w[2 + d];
        if (nx > INT32_MAX) {
            return PE_ERR_ARG;
        }
        if (!((w[0] >> d) & 1)) {
            ny *= w[2 + d];
        }
    }
    ti = pe_graph_input_index(op, 0);
    to = pe_graph_output_index(op, 0);
    x = (const uint8_t *)pe_graph_input(g, op, 0, arena, PE_DT_BOOL);
    y = (uint8_t *)pe_graph_output(g, op, 0, arena, PE_DT_BOOL);
    if (ti < 0 || to < 0 || x == NULL || y == NULL || (int64_t)pe_graph_count(g, ti) != nx ||
        (int64_t)pe_graph_count(g, to) != ny) {
        return PE_ERR_ARG;
    }
    return pe_reduce_all_bool(rank, w + 2, w[0], x, y, NULL, 0);
}
