/*
 * pe_run_batch5.c - graph runners of the kernels in kernels/batch5/pe_batch5.c
 * (issue #30's fifth batch of TFLM operators).
 */
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_batch5.h"

static void sum_q8_from_words(const int32_t *w, pe_sum_q8 *q)
{
    q->input_offset = w[0];
    q->input_multiplier = w[1];
    q->input_shift = w[2];
    q->output_multiplier = w[3];
    q->output_shift = w[4];
    q->output_offset = w[5];
    q->act_min = w[6];
    q->act_max = w[7];
}

/* Input 0 and output 0 of an int8 one-to-one operator with count elements each; 0 when missing. */
static int int8_io(const pe_graph *g, const pe_graph_op *op, const pe_context *arena, int64_t count,
                   const int8_t **x, int8_t **y)
{
    const int32_t ti = pe_graph_input_index(op, 0), to = pe_graph_output_index(op, 0);
    if (op->num_inputs != 1 || op->num_outputs != 1 || ti < 0 || to < 0) {
        return 0;
    }
    *x = (const int8_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT8);
    *y = (int8_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT8);
    return *x != NULL && *y != NULL && (int64_t)pe_graph_count(g, ti) == count &&
           (int64_t)pe_graph_count(g, to) == count;
}

pe_status pe_graph_run_add_n(const pe_graph *g, const pe_graph_op *op,
                             const pe_context *scratch, const pe_context *arena)
{
    const int8_t *ins[PE_GRAPH_MAX_IO];
    const int32_t *w = op->params;
    pe_sum_q8 q;
    int8_t *y;
    int32_t k, n, to, count;
    (void)scratch;
    if (w == NULL || op->num_params != PE_ADD_N_WORDS || op->num_outputs != 1 || op->num_inputs < 1 ||
        op->num_inputs > PE_GRAPH_MAX_IO || w[0] != op->num_inputs) {
        return PE_ERR_ARG;
    }
    n = w[0];
    sum_q8_from_words(w + 1, &q);
    to = pe_graph_output_index(op, 0);
    y = (int8_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT8);
    if (to < 0 || y == NULL) {
        return PE_ERR_ARG;
    }
    count = pe_graph_count(g, to);
    for (k = 0; k < n; ++k) {
        const int32_t t = pe_graph_input_index(op, k);
        ins[k] = (const int8_t *)pe_graph_input(g, op, k, arena, PE_DT_INT8);
        if (t < 0 || ins[k] == NULL || pe_graph_count(g, t) != count) {
            return PE_ERR_ARG;
        }
    }
    return pe_add_n_s8(&q, n, ins, count, y);
}

pe_status pe_graph_run_cumsum(const pe_graph *g, const pe_graph_op *op,
                              const pe_context *scratch, const pe_context *arena)
{
    const int32_t *w = op->params;
    const int8_t *x;
    int8_t *y;
    pe_sum_q8 q;
    (void)scratch;
    if (w == NULL || op->num_params != PE_CUMSUM_WORDS || w[0] < 1 || w[1] < 1 || w[2] < 1 ||
        (int64_t)w[0] * w[1] > INT32_MAX || (int64_t)w[0] * w[1] * w[2] > INT32_MAX) {
        return PE_ERR_ARG;
    }
    if (!int8_io(g, op, arena, (int64_t)w[0] * w[1] * w[2], &x, &y)) {
        return PE_ERR_ARG;
    }
    sum_q8_from_words(w + 5, &q);
    return pe_cumsum_s8(&q, w[0], w[1], w[2], w[3], w[4], x, y);
}

pe_status pe_graph_run_elu(const pe_graph *g, const pe_graph_op *op,
                           const pe_context *scratch, const pe_context *arena)
{
    const int8_t *x;
    int8_t *y;
    int32_t ti;
    (void)scratch;
    ti = pe_graph_input_index(op, 0);
    if (op->params == NULL || op->num_params != PE_ELU_WORDS || ti < 0 ||
        !pe_graph_tensor_valid(g, ti, arena->size)) {
        return PE_ERR_ARG;
    }
    if (!int8_io(g, op, arena, pe_graph_count(g, ti), &x, &y)) {
        return PE_ERR_ARG;
    }
    return pe_lut_packed_s8(op->params, pe_graph_count(g, ti), x, y);
}

pe_status pe_graph_run_embedding_lookup(const pe_graph *g, const pe_graph_op *op,
                                        const pe_context *scratch, const pe_context *arena)
{
    const int32_t *w = op->params;
    const int32_t *idx;
    const int8_t *v;
    int8_t *y;
    int32_t ti, tv, to;
    (void)scratch;
    if (w == NULL || op->num_params != PE_EMBEDDING_LOOKUP_WORDS || op->num_inputs != 2 || op->num_outputs != 1 ||
        w[0] < 1 || w[1] < 1 || w[2] < 1 || (int64_t)w[0] * w[1] > INT32_MAX || (int64_t)w[2] * w[1] > INT32_MAX) {
        return PE_ERR_ARG;
    }
    ti = pe_graph_input_index(op, 0);
    tv = pe_graph_input_index(op, 1);
    to = pe_graph_output_index(op, 0);
    idx = (const int32_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT32);
    v = (const int8_t *)pe_graph_input(g, op, 1, arena, PE_DT_INT8);
    y = (int8_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT8);
    if (ti < 0 || tv < 0 || to < 0 || idx == NULL || v == NULL || y == NULL || pe_graph_count(g, ti) != w[2] ||
        (int64_t)pe_graph_count(g, tv) != (int64_t)w[0] * w[1] ||
        (int64_t)pe_graph_count(g, to) != (int64_t)w[2] * w[1]) {
        return PE_ERR_ARG;
    }
    return pe_embedding_lookup(1, w[0], w[1], w[2], idx, v, y);
}

pe_status pe_graph_run_log_softmax(const pe_graph *g, const pe_graph_op *op,
                                   const pe_context *scratch, const pe_context *arena)
{
    const int32_t *w = op->params;
    const int8_t *x;
    int8_t *y;
    pe_log_softmax_q8 q;
    (void)scratch;
    if (w == NULL || op->num_params != PE_LOG_SOFTMAX_WORDS || w[0] < 1 || w[1] < 1 ||
        (int64_t)w[0] * w[1] > INT32_MAX) {
        return PE_ERR_ARG;
    }
    if (!int8_io(g, op, arena, (int64_t)w[0] * w[1], &x, &y)) {
        return PE_ERR_ARG;
    }
    q.input_multiplier = w[2];
    q.input_left_shift = w[3];
    q.reverse_scaling_divisor = w[4];
    q.reverse_scaling_right_shift = w[5];
    q.diff_min = w[6];
    return pe_log_softmax_s8(&q, w[0], w[1], x, y);
}
