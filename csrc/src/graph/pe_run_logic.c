/*
 * pe_run_logic.c - the graph runner of operators 80-93 (kernels in
 * kernels/eltwise/pe_logic.c and pe_reduce.c, words in pe_logic.h).
 */
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_logic.h"

/* the enumerations and element types must agree (a negative array size fails the build) */
typedef char pe_logic_codes_agree[(PE_LOP_EQUAL == (int)PE_GOP_EQUAL &&
                                   PE_LOP_SELECT_V2 == (int)PE_GOP_SELECT_V2 &&
                                   PE_LOP_REDUCE_MIN == (int)PE_GOP_REDUCE_MIN &&
                                   PE_LOGIC_DT_BOOL == (int)PE_DT_BOOL &&
                                   PE_LOGIC_DT_INT32 == (int)PE_DT_INT32 &&
                                   PE_LOGIC_DT_INT16 == (int)PE_DT_INT16 &&
                                   PE_LOGIC_DT_INT8 == (int)PE_DT_INT8)
                                      ? 1
                                      : -1];

pe_status pe_graph_run_logic(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                             const pe_context *arena)
{
    const int32_t type = (int32_t)op->type;
    const int32_t n_in = pe_logic_op_inputs(type);
    int32_t in_dt[3], out_dt, counts[3], k, t_out;
    const void *ins[3];
    void *out;
    if (!pe_logic_op_known(type) || op->num_outputs != 1 || op->num_inputs != n_in ||
        (op->params == NULL && op->num_params != 0) ||
        pe_logic_op_types(type, op->params, op->num_params, in_dt, &out_dt) != PE_OK) {
        return PE_ERR_ARG;
    }
    t_out = pe_graph_output_index(op, 0);
    out = pe_graph_output(g, op, 0, arena, (pe_dtype)out_dt);
    if (out == NULL) {
        return PE_ERR_ARG;
    }
    for (k = 0; k < n_in; k++) {
        ins[k] = pe_graph_input(g, op, k, arena, (pe_dtype)in_dt[k]);
        if (ins[k] == NULL) {
            return PE_ERR_ARG;
        }
        counts[k] = pe_graph_count(g, pe_graph_input_index(op, k));
    }
    return pe_logic_invoke(scratch, type, op->params, op->num_params, ins, counts, n_in, out,
                           pe_graph_count(g, t_out));
}
