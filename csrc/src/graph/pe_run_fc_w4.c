/*
 * pe_run_fc_w4.c - graph runner of the int4-weight fully connected operator
 * (PE_GOP_FULLY_CONNECTED_W4, see pe_graph_runners.h and pe_fc_w4.h) and of the
 * int4-filter convolution (PE_GOP_CONV_2D_W4, pe_conv_w4.h).
 */
#include "pyembed/pe_conv_w4.h"
#include "pyembed/pe_fc_w4.h"
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"

pe_status pe_graph_run_fc_w4(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                             const pe_context *arena)
{
    const int32_t *w = op->params;
    const int8_t *x;
    const uint8_t *packed;
    const int32_t *bias = NULL;
    int8_t *y;
    pe_fc_params p;
    pe_per_channel_quant q;
    pe_dims in_d, w_d, out_d;
    int32_t depth, features, qc, count, pbytes, sbytes;
    int64_t rows;
    pe_status st;
    if (op->num_inputs < 2 || op->num_inputs > 3 || op->num_outputs != 1 || w == NULL ||
        op->num_params < PE_FC_W4_WORDS) {
        return PE_ERR_ARG;
    }
    depth = w[0];
    features = w[1];
    qc = w[7];
    if (depth < 1 || features < 1 || (qc != 1 && qc != features) ||
        (int64_t)op->num_params != PE_FC_W4_WORDS + 2 * (int64_t)qc || (w[6] != 0 && w[6] != 1)) {
        return PE_ERR_ARG;
    }
    x = (const int8_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT8);
    packed = (const uint8_t *)pe_graph_input(g, op, 1, arena, PE_DT_INT8);
    y = (int8_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT8);
    if (x == NULL || packed == NULL || y == NULL) {
        return PE_ERR_ARG;
    }
    if (pe_graph_input_index(op, 2) != -1) {
        bias = (const int32_t *)pe_graph_input(g, op, 2, arena, PE_DT_INT32);
        if (bias == NULL || pe_graph_count(g, op->inputs[2]) != features) {
            return PE_ERR_ARG;
        }
    }
    w_d.n = features;
    w_d.h = 1;
    w_d.w = 1;
    w_d.c = depth;
    st = pe_fc_w4_get_buffer_sizes(&w_d, &pbytes, &sbytes);
    if (st != PE_OK) {
        return st;
    }
    count = pe_graph_count(g, op->inputs[0]);
    rows = count / depth;
    if (count % depth != 0 || pe_graph_count(g, op->inputs[1]) != pbytes ||
        rows * features != (int64_t)pe_graph_count(g, op->outputs[0])) {
        return PE_ERR_ARG;
    }
    in_d.n = (int32_t)rows;
    in_d.h = 1;
    in_d.w = 1;
    in_d.c = depth;
    out_d.n = (int32_t)rows;
    out_d.h = 1;
    out_d.w = 1;
    out_d.c = features;
    p.input_offset = w[2];
    p.filter_offset = 0; /* TFLite's int4 filters are symmetric */
    p.output_offset = w[3];
    p.per_channel = qc != 1 ? 1 : 0;
    p.activation.min = w[4];
    p.activation.max = w[5];
    p.rounding = w[6] ? PE_ROUND_SINGLE : PE_ROUND_DOUBLE;
    q.multiplier = w + PE_FC_W4_WORDS;
    q.shift = w + PE_FC_W4_WORDS + qc;
    return pe_fully_connected_w4_s8(scratch, &p, &q, &in_d, x, &w_d, packed, bias, &out_d, y);
}

pe_status pe_graph_run_conv_w4(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                               const pe_context *arena)
{
    const int32_t *w = op->params;
    const int8_t *x;
    const uint8_t *packed;
    const int32_t *bias = NULL;
    int8_t *y;
    const pe_dims *in_d, *out_d;
    pe_conv_params p;
    pe_per_channel_quant q;
    pe_dims f_d;
    int32_t oc, pbytes, sbytes, dw;
    pe_status st;
    if (op->num_inputs < 2 || op->num_inputs > 3 || op->num_outputs != 1 || w == NULL ||
        op->num_params < PE_CONV_W4_WORDS || (w[11] != 0 && w[11] != 1)) {
        return PE_ERR_ARG;
    }
    x = (const int8_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT8);
    packed = (const uint8_t *)pe_graph_input(g, op, 1, arena, PE_DT_INT8);
    y = (int8_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT8);
    if (x == NULL || packed == NULL || y == NULL) {
        return PE_ERR_ARG;
    }
    in_d = pe_graph_dims(g, op->inputs[0]);
    out_d = pe_graph_dims(g, op->outputs[0]);
    oc = out_d->c;
    if ((int64_t)op->num_params != PE_CONV_W4_WORDS + 2 * (int64_t)oc) {
        return PE_ERR_ARG;
    }
    if (pe_graph_input_index(op, 2) != -1) {
        bias = (const int32_t *)pe_graph_input(g, op, 2, arena, PE_DT_INT32);
        if (bias == NULL || pe_graph_count(g, op->inputs[2]) != oc) {
            return PE_ERR_ARG;
        }
    }
    p.stride.h = w[0];
    p.stride.w = w[1];
    p.padding.top = w[2];
    p.padding.left = w[3];
    p.padding.bottom = 0;
    p.padding.right = 0;
    p.dilation.h = w[4];
    p.dilation.w = w[5];
    dw = op->type == PE_GOP_DEPTHWISE_CONV_2D_W4;
    p.groups = dw ? 1 : w[6];
    p.ch_mult = dw ? w[6] : 1;
    p.input_offset = w[7];
    p.output_offset = w[8];
    p.activation.min = w[9];
    p.activation.max = w[10];
    p.rounding = w[11] ? PE_ROUND_SINGLE : PE_ROUND_DOUBLE;
    f_d.n = dw ? 1 : oc;
    f_d.h = w[12];
    f_d.w = w[13];
    f_d.c = w[14];
    st = dw ? pe_depthwise_conv2d_w4_s8_get_buffer_size(&p, in_d, &f_d, out_d, &pbytes, &sbytes)
            : pe_conv2d_w4_s8_get_buffer_size(&p, in_d, &f_d, out_d, &pbytes, &sbytes);
    if (st != PE_OK) {
        return st;
    }
    if (pe_graph_count(g, op->inputs[1]) != pbytes) {
        return PE_ERR_ARG;
    }
    q.multiplier = w + PE_CONV_W4_WORDS;
    q.shift = w + PE_CONV_W4_WORDS + oc;
    if (dw) {
        return pe_depthwise_conv2d_w4_s8(scratch, &p, &q, in_d, x, &f_d, packed, bias, out_d, y);
    }
    return pe_conv2d_w4_s8(scratch, &p, &q, in_d, x, &f_d, packed, bias, out_d, y);
}
