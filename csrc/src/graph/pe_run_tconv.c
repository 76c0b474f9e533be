/*
 * pe_run_tconv.c - graph runner(s) of the kernels in kernels/conv/pe_tconv.c
 * (moved out of the kernel file: kernels know no graph types).
 */
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_tconv.h"

#include "pyembed/pe_conv.h"
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_tconv.h"

pe_status pe_graph_run_transpose_conv(const pe_graph *g, const pe_graph_op *op,
                                      const pe_context *scratch, const pe_context *arena)
{
    const int32_t *w;
    pe_conv_params p;
    pe_per_channel_quant q;
    const int8_t *x, *f;
    const int32_t *bias = NULL;
    int8_t *y;
    const pe_dims *od;
    if (op->num_inputs != 3 || op->num_outputs != 1 || op->num_params < PE_TRANSPOSE_CONV_WORDS ||
        op->params == NULL) {
        return PE_ERR_ARG;
    }
    x = (const int8_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT8);
    f = (const int8_t *)pe_graph_input(g, op, 1, arena, PE_DT_INT8);
    y = (int8_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT8);
    if (x == NULL || f == NULL || y == NULL) {
        return PE_ERR_ARG;
    }
    od = pe_graph_dims(g, op->outputs[0]);
    if ((int64_t)op->num_params != PE_TRANSPOSE_CONV_WORDS + 2 * (int64_t)od->c) {
        return PE_ERR_ARG;
    }
    if (pe_graph_input_index(op, 2) != -1) {
        bias = (const int32_t *)pe_graph_input(g, op, 2, arena, PE_DT_INT32);
        if (bias == NULL || pe_graph_count(g, op->inputs[2]) != od->c) {
            return PE_ERR_ARG;
        }
    }
    w = op->params;
    p.stride.h = w[0];
    p.stride.w = w[1];
    p.padding.top = w[2];
    p.padding.left = w[3];
    p.padding.bottom = 0;
    p.padding.right = 0;
    p.input_offset = w[4];
    p.output_offset = w[5];
    p.activation.min = w[6];
    p.activation.max = w[7];
    if (w[8] != PE_ROUND_DOUBLE && w[8] != PE_ROUND_SINGLE) {
        return PE_ERR_ARG;
    }
    p.rounding = (pe_rounding)w[8];
    p.dilation.h = p.dilation.w = 1;
    p.groups = 1;
    p.ch_mult = 1;
    q.multiplier = w + PE_TRANSPOSE_CONV_WORDS;
    q.shift = w + PE_TRANSPOSE_CONV_WORDS + od->c;
    return pe_transpose_conv_s8(scratch, &p, &q, pe_graph_dims(g, op->inputs[0]), x,
                                pe_graph_dims(g, op->inputs[1]), f, bias, od, y);
}
