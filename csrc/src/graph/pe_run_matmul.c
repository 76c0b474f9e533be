/*
 * pe_run_matmul.c - graph runner(s) of the kernels in kernels/fc/pe_matmul.c
 * (moved out of the kernel file: kernels know no graph types).
 */
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_matmul.h"

#include "pyembed/pe_fixed.h"
#include "pyembed/pe_matmul.h"

static int64_t shape_count(const pe_shape5 *s)
{
    return pe_shape5_count(s);
}

pe_status pe_graph_run_batch_matmul(const pe_graph *g, const pe_graph_op *op,
                                    const pe_context *scratch, const pe_context *arena)
{
    const int32_t *w;
    pe_batch_matmul_params p;
    pe_shape5 ls, rs, os;
    const int8_t *lhs, *rhs;
    int8_t *out;
    int32_t i;
    if (op->num_inputs != 2 || op->num_outputs != 1 || op->num_params != PE_BATCH_MATMUL_WORDS ||
        op->params == NULL) {
        return PE_ERR_ARG;
    }
    w = op->params;
    for (i = 0; i < 5; i++) {
        ls.dims[i] = w[i];
        rs.dims[i] = w[5 + i];
        os.dims[i] = w[10 + i];
    }
    p.lhs_offset = w[15];
    p.rhs_offset = w[16];
    p.output_offset = w[17];
    p.multiplier = w[18];
    p.shift = w[19];
    p.activation.min = w[20];
    p.activation.max = w[21];
    p.adj_x = w[22];
    p.adj_y = w[23];
    p.rounding = PE_ROUND_DOUBLE;
    lhs = (const int8_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT8);
    rhs = (const int8_t *)pe_graph_input(g, op, 1, arena, PE_DT_INT8);
    out = (int8_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT8);
    if (lhs == NULL || rhs == NULL || out == NULL) {
        return PE_ERR_ARG;
    }
    /* the words' shapes must describe the tensors' bytes */
    if (shape_count(&ls) != pe_graph_count(g, op->inputs[0]) ||
        shape_count(&rs) != pe_graph_count(g, op->inputs[1]) ||
        shape_count(&os) != pe_graph_count(g, op->outputs[0])) {
        return PE_ERR_ARG;
    }
    return pe_batch_matmul_s8(scratch, &p, &ls, lhs, &rs, rhs, &os, out);
}
