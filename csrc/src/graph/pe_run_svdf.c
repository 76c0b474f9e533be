/*
 * pe_run_svdf.c - graph runner of pe_svdf_s8 (kernels/recurrent/pe_svdf.c).
 * Inputs: 0 x (int8), 1 feature weights (int8), 2 time weights (int16 or
 * int8), 3 bias (int32, optional), 4 the activation state (a variable
 * tensor of the time weights' type, read and written); output 0 (int8).
 */
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_svdf.h"

pe_status pe_graph_run_svdf(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                            const pe_context *arena)
{
    pe_svdf_params p;
    pe_dtype st;
    const int8_t *x, *wf;
    const void *wt;
    const int32_t *bias = NULL;
    void *state;
    int8_t *y;
    if (op->num_inputs != 5 || op->num_outputs != 1 ||
        pe_svdf_params_from_words(op->params, op->num_params, &p) != PE_OK) {
        return PE_ERR_ARG;
    }
    st = p.state_bytes == 2 ? PE_DT_INT16 : PE_DT_INT8;
    x = (const int8_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT8);
    wf = (const int8_t *)pe_graph_input(g, op, 1, arena, PE_DT_INT8);
    wt = pe_graph_input(g, op, 2, arena, st);
    state = pe_graph_state(g, op, 4, arena, st);
    y = (int8_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT8);
    if (x == NULL || wf == NULL || wt == NULL || state == NULL || y == NULL) {
        return PE_ERR_ARG;
    }
    if (op->inputs[3] >= 0) {
        bias = (const int32_t *)pe_graph_input(g, op, 3, arena, PE_DT_INT32);
        if (bias == NULL || pe_graph_count(g, op->inputs[3]) != p.filters / p.rank) {
            return PE_ERR_ARG;
        }
    }
    if ((int64_t)pe_graph_count(g, op->inputs[0]) != (int64_t)p.batch * p.input_size ||
        (int64_t)pe_graph_count(g, op->inputs[1]) != (int64_t)p.filters * p.input_size ||
        (int64_t)pe_graph_count(g, op->inputs[2]) != (int64_t)p.filters * p.memory ||
        (int64_t)pe_graph_count(g, op->inputs[4]) != (int64_t)p.batch * p.filters * p.memory ||
        (int64_t)pe_graph_count(g, op->outputs[0]) != (int64_t)p.batch * (p.filters / p.rank)) {
        return PE_ERR_ARG;
    }
    return pe_svdf_s8(scratch, &p, x, wf, wt, bias, state, y);
}
