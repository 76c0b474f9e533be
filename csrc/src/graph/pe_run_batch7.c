/*
 * pe_run_batch7.c - graph runners of the kernels in kernels/batch7/pe_batch7.c
 * (issue #30's seventh batch: int8 DIV, CIRCULAR_BUFFER).
 */
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_batch7.h"

/* rank, then three blocks of rank dims (output, input 1, input 2) */
static pe_status read_shapes(const int32_t *w, int32_t n, pe_shape_nd *o, pe_shape_nd *a, pe_shape_nd *b)
{
    int32_t rank, d;
    if (n < 1) {
        return PE_ERR_ARG;
    }
    rank = w[0];
    if (rank < 1 || rank > PE_SHAPE_MAX_RANK || n != 1 + 3 * rank) {
        return PE_ERR_ARG;
    }
    o->rank = a->rank = b->rank = rank;
    for (d = 0; d < rank; ++d) {
        o->dims[d] = w[1 + d];
        a->dims[d] = w[1 + rank + d];
        b->dims[d] = w[1 + 2 * rank + d];
    }
    return PE_OK;
}

pe_status pe_graph_run_div_s8(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                              const pe_context *arena)
{
    const int32_t *w = op->params;
    pe_div_s8_params p;
    pe_shape_nd so, s1, s2;
    const int8_t *x1, *x2;
    int8_t *y;
    int32_t n1, n2, no;
    (void)scratch;
    if (w == NULL || op->num_params < PE_DIV_WORDS + 1 || op->num_inputs != 2 || op->num_outputs != 1 ||
        read_shapes(w + PE_DIV_WORDS, op->num_params - PE_DIV_WORDS, &so, &s1, &s2) != PE_OK) {
        return PE_ERR_ARG;
    }
    p.input1_offset = w[0];
    p.input2_offset = w[1];
    p.output_offset = w[2];
    p.output_multiplier = w[3];
    p.output_shift = w[4];
    p.act_min = w[5];
    p.act_max = w[6];
    x1 = (const int8_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT8);
    x2 = (const int8_t *)pe_graph_input(g, op, 1, arena, PE_DT_INT8);
    y = (int8_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT8);
    if (x1 == NULL || x2 == NULL || y == NULL || pe_shape_count(&so, &no) != PE_OK ||
        pe_shape_count(&s1, &n1) != PE_OK || pe_shape_count(&s2, &n2) != PE_OK ||
        pe_graph_count(g, pe_graph_input_index(op, 0)) != n1 || pe_graph_count(g, pe_graph_input_index(op, 1)) != n2 ||
        pe_graph_count(g, pe_graph_output_index(op, 0)) != no) {
        return PE_ERR_ARG;
    }
    return pe_div_s8(&p, &s1, x1, &s2, x2, &so, y);
}

pe_status pe_graph_run_circular_buffer(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                       const pe_context *arena)
{
    const int32_t *w = op->params;
    const int8_t *x;
    int8_t *buf, *y;
    (void)scratch;
    if (w == NULL || op->num_params != PE_CIRCULAR_BUFFER_WORDS || op->num_inputs != 2 || op->num_outputs != 1 ||
        w[0] < 1 || w[1] < 1 || w[2] < 1 || (int64_t)w[0] * (int64_t)w[1] > (int64_t)INT32_MAX) {
        return PE_ERR_ARG;
    }
    x = (const int8_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT8);
    buf = (int8_t *)pe_graph_state(g, op, 1, arena, PE_DT_INT8);
    y = (int8_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT8);
    if (x == NULL || buf == NULL || y == NULL || pe_graph_count(g, pe_graph_input_index(op, 0)) != w[1] ||
        pe_graph_count(g, pe_graph_input_index(op, 1)) != w[0] * w[1] ||
        pe_graph_count(g, pe_graph_output_index(op, 0)) != w[0] * w[1]) {
        return PE_ERR_ARG;
    }
    return pe_circular_buffer_s8(x, w[0], w[1], buf, y);
}
