/*
 * pe_run_s16.c - graph runner(s) of the kernels in kernels/s16/pe_s16.c
 * (moved out of the kernel file: kernels know no graph types).
 */
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_s16.h"

#include "pyembed/pe_conv.h"
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_s16.h"

#define PE_S16_ACC_LIMIT ((int64_t)1 << 47)

/* Input 1 (of type second) of a runner with two inputs, one output and
 * parameter words, with its int16 input 0 in *x and int16 output 0 in *y;
 * NULL when the op has other counts or a tensor is missing, misplaced or of
 * another type. */
static const void *two_inputs_s16(const pe_graph *g, const pe_graph_op *op, const pe_context *arena,
                                  pe_dtype second, const int16_t **x, int16_t **y)
{
    const void *in1;
    if (op->num_inputs != 2 || op->num_outputs != 1 || op->params == NULL) {
        return NULL;
    }
    *x = (const int16_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT16);
    in1 = pe_graph_input(g, op, 1, arena, second);
    *y = (int16_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT16);
    return (*x == NULL || *y == NULL) ? NULL : in1;
}

/* The operands of the int16 x int8 convolutions whose parameters are `head`
 * words (word `flag`: has a bias), then one multiplier and one shift per output
 * channel and, with a bias, one int64 bias per channel as two words: the
 * int8 filter, with *x, *y, *oc and *has_bias set; NULL when a tensor or the
 * word count is wrong. */
static const int8_t *conv_operands_s16x8(const pe_graph *g, const pe_graph_op *op, const pe_context *arena,
                                         int32_t head, int32_t flag, const int16_t **x, int16_t **y,
                                         int32_t *oc, int32_t *has_bias)
{
    const int8_t *f = (const int8_t *)two_inputs_s16(g, op, arena, PE_DT_INT8, x, y);
    if (f == NULL || op->num_params < head) {
        return NULL;
    }
    *oc = pe_graph_dims(g, op->outputs[0])->c;
    *has_bias = op->params[flag];
    if ((*has_bias != 0 && *has_bias != 1) ||
        (int64_t)op->num_params != head + 2 * (int64_t)*oc * (1 + *has_bias)) {
        return NULL;
    }
    return f;
}

pe_status pe_graph_run_conv_s16x8(const pe_graph *g, const pe_graph_op *op,
                                  const pe_context *scratch, const pe_context *arena)
{
    const int32_t *w = op->params;
    const int16_t *x;
    const int8_t *f;
    int16_t *y;
    pe_conv_params p;
    pe_per_channel_quant q;
    int32_t oc, has_bias;
    f = conv_operands_s16x8(g, op, arena, PE_CONV_S16X8_WORDS, 9, &x, &y, &oc, &has_bias);
    if (f == NULL) {
        return PE_ERR_ARG;
    }
    p.input_offset = 0;
    p.output_offset = 0;
    p.padding.bottom = 0;
    p.padding.right = 0;
    p.stride.h = w[0];
    p.stride.w = w[1];
    p.padding.top = w[2];
    p.padding.left = w[3];
    p.dilation.h = w[4];
    p.dilation.w = w[5];
    p.groups = w[6];
    p.ch_mult = 1;
    p.activation.min = w[7];
    p.activation.max = w[8];
    p.rounding = PE_ROUND_DOUBLE;
    q.multiplier = w + PE_CONV_S16X8_WORDS;
    q.shift = w + PE_CONV_S16X8_WORDS + oc;
    return pe_conv2d_s16x8(scratch, &p, &q, pe_graph_dims(g, op->inputs[0]), x,
                           pe_graph_dims(g, op->inputs[1]), f,
                           has_bias ? w + PE_CONV_S16X8_WORDS + 2 * oc : NULL, pe_graph_dims(g, op->outputs[0]), y);
}

pe_status pe_graph_run_fc_s16x8(const pe_graph *g, const pe_graph_op *op,
                                const pe_context *scratch, const pe_context *arena)
{
    const int32_t *w = op->params;
    const int16_t *x;
    const int8_t *f;
    int16_t *y;
    pe_fc_s16_params p;
    int32_t depth, out_f, count, qc, has_bias;
    int64_t need;
    f = (const int8_t *)two_inputs_s16(g, op, arena, PE_DT_INT8, &x, &y);
    if (f == NULL || op->num_params < PE_FC_S16X8_WORDS) {
        return PE_ERR_ARG;
    }
    depth = pe_graph_dims(g, op->inputs[1])->c;
    out_f = pe_graph_count(g, op->inputs[1]) / depth;
    count = pe_graph_count(g, op->inputs[0]);
    qc = w[0];
    has_bias = w[4];
    if (count % depth != 0 || (qc != 1 && qc != out_f) || (has_bias != 0 && has_bias != 1) ||
        w[3] < 0 || w[3] > 3 ||
        (int64_t)(count / depth) * out_f != (int64_t)pe_graph_count(g, op->outputs[0])) {
        return PE_ERR_ARG;
    }
    need = PE_FC_S16X8_WORDS + 2 * (int64_t)qc + (has_bias ? ((w[3] & 1) ? 1 : 2) * (int64_t)out_f : 0);
    if ((int64_t)op->num_params != need) {
        return PE_ERR_ARG;
    }
    p.quant.multiplier = w + PE_FC_S16X8_WORDS;
    p.quant.shift = w + PE_FC_S16X8_WORDS + qc;
    p.quant_count = qc;
    p.activation.min = w[1];
    p.activation.max = w[2];
    p.bias32 = w[3] & 1;
    p.single_rounding = (w[3] >> 1) & 1;
    return pe_fully_connected_s16x8(scratch, &p, count / depth, depth, out_f, x, f,
                                    has_bias ? w + PE_FC_S16X8_WORDS + 2 * qc : NULL, y);
}

pe_status pe_graph_run_add_s16(const pe_graph *g, const pe_graph_op *op,
                               const pe_context *scratch, const pe_context *arena)
{
    const int32_t *w = op->params;
    const int16_t *a, *b;
    int16_t *y;
    pe_add_params p;
    b = (const int16_t *)two_inputs_s16(g, op, arena, PE_DT_INT16, &a, &y);
    if (b == NULL || op->num_params != PE_ADD_S16_WORDS) {
        return PE_ERR_ARG;
    }
    p.input1_offset = w[0];
    p.input2_offset = w[1];
    p.output_offset = w[2];
    p.left_shift = 15;
    p.input1_quant.multiplier = w[3];
    p.input1_quant.shift = w[4];
    p.input2_quant.multiplier = w[5];
    p.input2_quant.shift = w[6];
    p.output_quant.multiplier = w[7];
    p.output_quant.shift = w[8];
    p.activation.min = w[9];
    p.activation.max = w[10];
    p.rounding = PE_ROUND_DOUBLE;
    return pe_add_s16(scratch, &p, pe_graph_dims(g, op->inputs[0]), a, pe_graph_dims(g, op->inputs[1]),
                      b, pe_graph_dims(g, op->outputs[0]), y);
}

pe_status pe_graph_run_softmax_s16(const pe_graph *g, const pe_graph_op *op,
                                   const pe_context *scratch, const pe_context *arena)
{
    const int32_t *w = op->params;
    const int16_t *x;
    int16_t *y;
    int32_t depth, count;
    if (op->num_inputs != 1 || op->num_outputs != 1 || w == NULL ||
        op->num_params != PE_SOFTMAX_S16_WORDS) {
        return PE_ERR_ARG;
    }
    x = (const int16_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT16);
    y = (int16_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT16);
    if (x == NULL || y == NULL) {
        return PE_ERR_ARG;
    }
    depth = pe_graph_dims(g, op->inputs[0])->c;
    count = pe_graph_count(g, op->inputs[0]);
    if (count != pe_graph_count(g, op->outputs[0]) || pe_graph_dims(g, op->outputs[0])->c != depth) {
        return PE_ERR_ARG;
    }
    return pe_softmax_s16(scratch, count / depth, depth, w[0], w[1], w + 2,
                          w + 2 + PE_SOFTMAX_S16_LUT_WORDS, x, y);
}

pe_status pe_graph_run_squared_difference_s16(const pe_graph *g, const pe_graph_op *op,
                                              const pe_context *scratch, const pe_context *arena)
{
    const int16_t *a, *b;
    int16_t *y;
    b = (const int16_t *)two_inputs_s16(g, op, arena, PE_DT_INT16, &a, &y);
    if (b == NULL || op->num_params != PE_SQDIFF_S16_WORDS) {
        return PE_ERR_ARG;
    }
    return pe_squared_difference_s16(scratch, op->params, pe_graph_dims(g, op->inputs[0]), a,
                                     pe_graph_dims(g, op->inputs[1]), b, pe_graph_dims(g, op->outputs[0]), y);
}

pe_status pe_graph_run_prelu_s16(const pe_graph *g, const pe_graph_op *op,
                                 const pe_context *scratch, const pe_context *arena)
{
    const int16_t *x;
    const int8_t *alpha;
    int16_t *y;
    alpha = (const int8_t *)two_inputs_s16(g, op, arena, PE_DT_INT8, &x, &y);
    if (alpha == NULL || op->num_params != PE_PRELU_S16_WORDS) {
        return PE_ERR_ARG;
    }
    return pe_prelu_s16(scratch, op->params, pe_graph_dims(g, op->inputs[0]), x, pe_graph_dims(g, op->inputs[1]),
                        alpha, pe_graph_dims(g, op->outputs[0]), y);
}

pe_status pe_graph_run_depthwise_s16x8(const pe_graph *g, const pe_graph_op *op,
                                       const pe_context *scratch, const pe_context *arena)
{
    const int32_t *w = op->params;
    const int16_t *x;
    const int8_t *f;
    int16_t *y;
    pe_dw_s16_params p;
    pe_per_channel_quant q;
    int32_t oc, has_bias;
    f = conv_operands_s16x8(g, op, arena, PE_DW_S16X8_WORDS, 9, &x, &y, &oc, &has_bias);
    if (f == NULL) {
        return PE_ERR_ARG;
    }
    p.stride_h = w[0];
    p.stride_w = w[1];
    p.pad_top = w[2];
    p.pad_left = w[3];
    p.dilation_h = w[4];
    p.dilation_w = w[5];
    p.depth_multiplier = w[6];
    p.act_min = w[7];
    p.act_max = w[8];
    q.multiplier = w + PE_DW_S16X8_WORDS;
    q.shift = w + PE_DW_S16X8_WORDS + oc;
    return pe_depthwise_s16x8(scratch, &p, &q, pe_graph_dims(g, op->inputs[0]), x,
                              pe_graph_dims(g, op->inputs[1]), f,
                              has_bias ? w + PE_DW_S16X8_WORDS + 2 * oc : NULL, pe_graph_dims(g, op->outputs[0]), y);
}

pe_status pe_graph_run_pool_s16(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                const pe_context *arena)
{
    const int32_t *w = op->params;
    const int16_t *x;
    int16_t *y;
    pe_pool_s16_params p;
    if (op->num_inputs != 1 || op->num_outputs != 1 || w == NULL || op->num_params != PE_POOL_S16_WORDS) {
        return PE_ERR_ARG;
    }
    x = (const int16_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT16);
    y = (int16_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT16);
    if (x == NULL || y == NULL) {
        return PE_ERR_ARG;
    }
    /* the kernels read the window after writing earlier outputs: no overlap */
    if ((const int16_t *)y < x + pe_graph_count(g, op->inputs[0]) && x < (const int16_t *)y +
        pe_graph_count(g, op->outputs[0])) {
        return PE_ERR_ARG;
    }
    p.kh = w[0];
    p.kw = w[1];
    p.stride_h = w[2];
    p.stride_w = w[3];
    p.pad_top = w[4];
    p.pad_left = w[5];
    p.act_min = w[6];
    p.act_max = w[7];
    if (op->type == PE_GOP_AVERAGE_POOL_2D_S16) {
        return pe_avgpool_s16(scratch, &p, pe_graph_dims(g, op->inputs[0]), x, pe_graph_dims(g, op->outputs[0]),
                              y);
    }
    return pe_maxpool_s16(scratch, &p, pe_graph_dims(g, op->inputs[0]), x, pe_graph_dims(g, op->outputs[0]), y);
}

pe_status pe_graph_run_tconv_s16x8(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                   const pe_context *arena)
{
    const int32_t *w = op->params;
    const int16_t *x;
    const int8_t *f;
    int16_t *y;
    pe_tconv_s16_params p;
    pe_per_channel_quant q;
    int32_t oc, has_bias;
    f = conv_operands_s16x8(g, op, arena, PE_TCONV_S16X8_WORDS, 6, &x, &y, &oc, &has_bias);
    if (f == NULL) {
        return PE_ERR_ARG;
    }
    /* the kernel writes outputs while it still reads the input */
    if ((const int16_t *)y < x + pe_graph_count(g, op->inputs[0]) &&
        x < (const int16_t *)y + pe_graph_count(g, op->outputs[0])) {
        return PE_ERR_ARG;
    }
    p.stride_h = w[0];
    p.stride_w = w[1];
    p.pad_top = w[2];
    p.pad_left = w[3];
    p.act_min = w[4];
    p.act_max = w[5];
    q.multiplier = w + PE_TCONV_S16X8_WORDS;
    q.shift = w + PE_TCONV_S16X8_WORDS + oc;
    return pe_transpose_conv_s16x8(scratch, &p, &q, pe_graph_dims(g, op->inputs[0]), x,
                                   pe_graph_dims(g, op->inputs[1]), f,
                                   has_bias ? w + PE_TCONV_S16X8_WORDS + 2 * oc : NULL,
                                   pe_graph_dims(g, op->outputs[0]), y);
}

pe_status pe_graph_run_requantize_s16(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                      const pe_context *arena)
{
    const int32_t *w = op->params;
    const int16_t *x;
    int16_t *y;
    int32_t n;
    (void)scratch;
    if (op->num_inputs != 1 || op->num_outputs != 1 || w == NULL || op->num_params != PE_REQUANT_S16_WORDS) {
        return PE_ERR_ARG;
    }
    x = (const int16_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT16);
    y = (int16_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT16);
    if (x == NULL || y == NULL) {
        return PE_ERR_ARG;
    }
    n = pe_graph_count(g, op->inputs[0]);
    /* element i is read before it is written: in place or apart, never shifted */
    if (n != pe_graph_count(g, op->outputs[0]) ||
        (x != (const int16_t *)y && (const int16_t *)y < x + n && x < (const int16_t *)y + n)) {
        return PE_ERR_ARG;
    }
    return pe_requantize_s16(n, x, w[0], w[1], w[2], w[3], y);
}
