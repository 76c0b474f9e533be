/*
 * pe_run_gather.c - graph runner(s) of the kernels in kernels/shape/pe_gather.c
 * (moved out of the kernel file: kernels know no graph types).
 */
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_gather.h"

#include "pyembed/pe_fixed.h"

pe_status pe_graph_run_gather_batched(const pe_graph *g, const pe_graph_op *op,
                                      const pe_context *scratch, const pe_context *arena)
{
    const int32_t *w = op->params;
    const void *x;
    const int32_t *pos;
    void *y;
    int32_t ti, to;
    pe_dtype dt;
    (void)scratch;
    if (op->num_inputs != 2 || op->num_outputs != 1 || w == NULL || op->num_params != PE_GATHER_BATCHED_WORDS) {
        return PE_ERR_ARG;
    }
    ti = pe_graph_input_index(op, 0);
    to = pe_graph_output_index(op, 0);
    if (ti < 0 || to < 0 || !pe_graph_tensor_valid(g, ti, arena->size)) {
        return PE_ERR_ARG;
    }
    dt = g->tensors[ti].dtype;
    x = pe_graph_input(g, op, 0, arena, dt);
    pos = (const int32_t *)pe_graph_input(g, op, 1, arena, PE_DT_INT32);
    y = pe_graph_output(g, op, 0, arena, dt);
    if (x == NULL || pos == NULL || y == NULL || w[0] < 1 || w[1] < 1 || w[2] < 1 || w[3] < 1 || w[4] < 1) {
        return PE_ERR_ARG;
    }
    if (pe_gather_count4(w[0], w[1], w[2], w[3]) < 0 || pe_gather_count4(w[0], w[1], w[4], w[3]) < 0 || pe_gather_count4(w[0], w[4], 1, 1) < 0 ||
        (int64_t)pe_graph_count(g, ti) != pe_gather_count4(w[0], w[1], w[2], w[3]) ||
        (int64_t)pe_graph_count(g, op->inputs[1]) != pe_gather_count4(w[0], w[4], 1, 1) ||
        (int64_t)pe_graph_count(g, to) != pe_gather_count4(w[0], w[1], w[4], w[3])) {
        return PE_ERR_ARG;
    }
    return pe_gather_batched(pe_graph_dtype_size(dt), w[0], w[1], w[2], w[3], w[4], x, pos, y);
}
