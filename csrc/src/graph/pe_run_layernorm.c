/*
 * pe_run_layernorm.c - graph runner(s) of the kernels in kernels/attention/pe_layernorm.c
 * (moved out of the kernel file: kernels know no graph types).
 */
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_layernorm.h"

/* the row program's step codes are the graph's (a negative array size fails the build) */
typedef char pe_ln_codes_agree[(PE_LN_STEP_ADD == (int)PE_GOP_ADD && PE_LN_STEP_MUL == (int)PE_GOP_MUL &&
                                PE_LN_MAX_INPUTS == PE_GRAPH_MAX_IO)
                                   ? 1
                                   : -1];
#include "pyembed/pe_eltwise.h"
#include "pyembed/pe_math_ops.h"

#define LN_HEADER 4
#define LN_STEP_HEADER 5
#define LN_ADD_WORDS 12
#define LN_MUL_WORDS 7

pe_status pe_graph_run_layernorm(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                 const pe_context *arena)
{
    const int8_t *consts[PE_GRAPH_MAX_IO];
    int32_t counts[PE_GRAPH_MAX_IO];
    const int8_t *x;
    int8_t *y;
    int32_t k, n, rows, depth;
    pe_status st;
    if (op->num_inputs < 1 || op->num_inputs > PE_GRAPH_MAX_IO || op->num_outputs != 1 ||
        op->params == NULL) {
        return PE_ERR_ARG;
    }
    st = pe_layernorm_shape(op->params, op->num_params, &rows, &depth);
    if (st != PE_OK) {
        return st;
    }
    x = (const int8_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT8);
    y = (int8_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT8);
    if (x == NULL || y == NULL) {
        return PE_ERR_ARG;
    }
    n = rows * depth;
    if (pe_graph_count(g, pe_graph_input_index(op, 0)) != n ||
        pe_graph_count(g, pe_graph_output_index(op, 0)) != n) {
        return PE_ERR_ARG;
    }
    consts[0] = NULL;
    counts[0] = 0;
    for (k = 1; k < op->num_inputs; k++) {
        consts[k] = (const int8_t *)pe_graph_input(g, op, k, arena, PE_DT_INT8);
        if (consts[k] == NULL) {
            return PE_ERR_ARG;
        }
        counts[k] = pe_graph_count(g, pe_graph_input_index(op, k));
    }
    return pe_layernorm_s8(scratch, op->params, op->num_params, x, consts, counts, op->num_inputs - 1, y);
}

#define LN_HP_MAX_DEPTH 4096
#define LN_HP_MAX_G ((int32_t)1 << 24)

pe_status pe_graph_run_layernorm_hp(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                    const pe_context *arena)
{
    const int8_t *x;
    const int32_t *gq, *bq;
    int8_t *y;
    const int32_t *w = op->params;
    int64_t eps;
    (void)scratch;
    if (op->num_inputs != 3 || op->num_outputs != 1 || op->num_params != 6 || w == NULL || w[1] < 2 ||
        w[0] < 1 || w[4] < 0 || w[5] < 0 || w[5] >= ((int32_t)1 << 29)) {
        return PE_ERR_ARG;
    }
    x = (const int8_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT8);
    gq = (const int32_t *)pe_graph_input(g, op, 1, arena, PE_DT_INT32);
    bq = (const int32_t *)pe_graph_input(g, op, 2, arena, PE_DT_INT32);
    y = (int8_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT8);
    if (x == NULL || gq == NULL || bq == NULL || y == NULL) {
        return PE_ERR_ARG;
    }
    if ((int64_t)w[0] * w[1] > (int64_t)0x7FFFFFFF ||
        pe_graph_count(g, pe_graph_input_index(op, 0)) != w[0] * w[1] ||
        pe_graph_count(g, pe_graph_output_index(op, 0)) != w[0] * w[1] ||
        pe_graph_count(g, pe_graph_input_index(op, 1)) != w[1] ||
        pe_graph_count(g, pe_graph_input_index(op, 2)) != w[1]) {
        return PE_ERR_ARG;
    }
    eps = (int64_t)w[4] + (int64_t)w[5] * ((int64_t)1 << 31);
    return pe_layernorm_hp_s8(w[0], w[1], w[2], w[3], eps, x, gq, bq, y);
}
