/*
 * pe_run_lstm.c - graph runner(s) of the kernels in kernels/recurrent/pe_lstm.c
 * (moved out of the kernel file: kernels know no graph types).
 */
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_lstm.h"

#include "pyembed/pe_fixed.h"
#include "pyembed/pe_simd.h"
#define Q15_ONE_THIRD 10923     /* round(2^15 / 3) */
#define Q13_48_17 23130         /* round(2^13 * 48 / 17) */
#define Q13_M32_17 (-15420)     /* round(-2^13 * 32 / 17) */

/* -- graph runners ---------------------------------------------------------- */

static pe_status run_act_s16(const pe_graph *g, const pe_graph_op *op, const pe_context *arena, int is_tanh)
{
    const int16_t *x;
    int16_t *y;
    int32_t n;
    if (op->num_inputs != 1 || op->num_outputs != 1 || op->params == NULL || op->num_params != PE_ACT_S16_WORDS) {
        return PE_ERR_ARG;
    }
    x = (const int16_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT16);
    y = (int16_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT16);
    if (x == NULL || y == NULL) {
        return PE_ERR_ARG;
    }
    n = pe_graph_count(g, op->inputs[0]);
    if (n != pe_graph_count(g, op->outputs[0])) {
        return PE_ERR_ARG;
    }
    return is_tanh ? pe_tanh_s16(NULL, op->params[0], op->params[1], n, x, y)
                   : pe_logistic_s16(NULL, op->params[0], op->params[1], n, x, y);
}

pe_status pe_graph_run_logistic_s16(const pe_graph *g, const pe_graph_op *op,
                                    const pe_context *scratch, const pe_context *arena)
{
    (void)scratch;
    return run_act_s16(g, op, arena, 0);
}

pe_status pe_graph_run_tanh_s16(const pe_graph *g, const pe_graph_op *op,
                                const pe_context *scratch, const pe_context *arena)
{
    (void)scratch;
    return run_act_s16(g, op, arena, 1);
}

static int has_count(const pe_graph *g, int32_t t, int64_t n)
{
    return (int64_t)pe_graph_count(g, t) == n;
}

pe_status pe_graph_run_lstm(const pe_graph *g, const pe_graph_op *op,
                            const pe_context *scratch, const pe_context *arena)
{
    const int32_t *w = op->params;
    pe_lstm_params p;
    const int8_t *x, *weights[4], *rec[4];
    const int32_t *bias[4];
    int8_t *hidden, *y;
    int16_t *cell;
    int32_t k, rows_total;
    if (op->num_inputs != PE_LSTM_INPUTS || op->num_outputs != 1) {
        return PE_ERR_ARG;
    }
    if (pe_lstm_params_from_words(w, op->num_params, &p) != PE_OK) {
        return PE_ERR_ARG;
    }
    x = (const int8_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT8);
    hidden = (int8_t *)pe_graph_state(g, op, 13, arena, PE_DT_INT8);
    cell = (int16_t *)pe_graph_state(g, op, 14, arena, PE_DT_INT16);
    y = (int8_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT8);
    if (x == NULL || hidden == NULL || cell == NULL || y == NULL) {
        return PE_ERR_ARG;
    }
    rows_total = p.batch * p.time;
    if (!has_count(g, op->inputs[0], (int64_t)rows_total * p.input_dim) ||
        !has_count(g, op->outputs[0], (int64_t)rows_total * p.state_dim) ||
        !has_count(g, op->inputs[13], (int64_t)p.batch * p.state_dim) ||
        !has_count(g, op->inputs[14], (int64_t)p.batch * p.state_dim)) {
        return PE_ERR_ARG;
    }
    for (k = 0; k < 4; k++) {
        weights[k] = (const int8_t *)pe_graph_input(g, op, 1 + k, arena, PE_DT_INT8);
        rec[k] = (const int8_t *)pe_graph_input(g, op, 5 + k, arena, PE_DT_INT8);
        bias[k] = (const int32_t *)pe_graph_input(g, op, 9 + k, arena, PE_DT_INT32);
        if (weights[k] == NULL || rec[k] == NULL || bias[k] == NULL ||
            !has_count(g, op->inputs[1 + k], (int64_t)p.state_dim * p.input_dim) ||
            !has_count(g, op->inputs[5 + k], (int64_t)p.state_dim * p.state_dim) ||
            !has_count(g, op->inputs[9 + k], p.state_dim)) {
            return PE_ERR_ARG;
        }
    }
    /* the states are updated in place: they must not share bytes with the
     * input, the output or each other */
    if (op->inputs[13] == op->inputs[14] || op->inputs[13] == op->inputs[0] || op->inputs[14] == op->inputs[0] ||
        op->inputs[13] == op->outputs[0] || op->inputs[14] == op->outputs[0]) {
        return PE_ERR_ARG;
    }
    return pe_lstm_s8s16(scratch, &p, x, weights, rec, bias, hidden, cell, y);
}
