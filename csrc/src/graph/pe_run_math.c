/*
 * pe_run_math.c - graph runner(s) of the kernels in kernels/eltwise/pe_math_ops.c
 * (moved out of the kernel file: kernels know no graph types).
 */
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_math_ops.h"

/* the two enumerations must agree (a negative array size fails the build) */
typedef char pe_math_codes_agree[(PE_MOP_MEAN == (int)PE_GOP_MEAN &&
                                  PE_MOP_L2_NORMALIZATION == (int)PE_GOP_L2_NORMALIZATION &&
                                  PE_MOP_SUB == (int)PE_GOP_SUB && PE_MOP_GELU == (int)PE_GOP_GELU)
                                     ? 1
                                     : -1];
#include "pyembed/pe_activations.h"
#include "pyembed/pe_binary.h"
#include "pyembed/pe_reduce.h"

pe_status pe_graph_run_math(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                            const pe_context *arena)
{
    const int32_t type = (int32_t)op->type;
    const int32_t n_in = pe_math_op_inputs(type);
    int32_t t_out, dtype;
    pe_dtype dt;
    const void *in0, *in1 = NULL;
    int32_t c1 = 0;
    void *out;
    if (!pe_math_op_known(type) || op->num_outputs != 1 || op->num_inputs != n_in ||
        (op->params == NULL && op->num_params != 0)) {
        return PE_ERR_ARG;
    }
    t_out = pe_graph_output_index(op, 0);
    if (!pe_graph_tensor_valid(g, t_out, arena->size)) {
        return PE_ERR_ARG;
    }
    dt = g->tensors[t_out].dtype;
    if (dt != PE_DT_INT8 && dt != PE_DT_INT16) {
        return PE_ERR_ARG;
    }
    dtype = dt == PE_DT_INT8 ? PE_MATH_DT_INT8 : PE_MATH_DT_INT16;
    out = pe_graph_output(g, op, 0, arena, dt);
    in0 = pe_graph_input(g, op, 0, arena, dt);
    if (n_in == 2) {
        in1 = pe_graph_input(g, op, 1, arena, type == PE_MOP_PRELU ? PE_DT_INT8 : dt);
        if (in1 == NULL) {
            return PE_ERR_ARG;
        }
        c1 = pe_graph_count(g, pe_graph_input_index(op, 1));
    }
    if (out == NULL || in0 == NULL) {
        return PE_ERR_ARG;
    }
    return pe_math_invoke(scratch, type, op->params, op->num_params, dtype, in0,
                          pe_graph_count(g, pe_graph_input_index(op, 0)), in1, c1, out,
                          pe_graph_count(g, t_out));
}
