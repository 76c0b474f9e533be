/*
 * pe_run_conv_fc.c - the graph runner of PE_GOP_CONV_FC (pe_conv_fc.h): a
 * one-channel depthwise convolution streamed a band of rows at a time into
 * the FULLY_CONNECTED layer that reads its whole output.
 */
#include "pyembed/pe_conv_fc.h"
#include "pyembed/pe_graph_runners.h"
#include "pe_graph_access.h"

/* an int32 constant of the operator with exactly count elements, or NULL */
static const int32_t *words_in(const pe_graph *g, const pe_graph_op *op, int32_t k,
                               const pe_context *arena, int32_t count)
{
    const int32_t t = IN(k);
    if (t < 0 || count_of(g, t) != count) {
        return NULL;
    }
    return (const int32_t *)tensor_in(g, t, arena, PE_DT_INT32);
}

pe_status pe_graph_run_conv_fc(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                               const pe_context *arena)
{
    const int8_t *x, *f, *fw;
    const int32_t *b = NULL, *fb = NULL, *cm, *cs, *fm, *fs;
    int8_t *y;
    int32_t features, out_c, nq;
    pe_per_channel_quant cq, fq;
    if (op->num_inputs != 9 || op->num_outputs != 1 || op->params == NULL ||
        op->num_params != PE_CONV_FC_WORDS || IN(0) < 0 || IN(1) < 0 || IN(5) < 0 || OUT0 < 0) {
        return PE_ERR_ARG;
    }
    x = (const int8_t *)tensor_in(g, IN(0), arena, PE_DT_INT8);
    f = (const int8_t *)tensor_in(g, IN(1), arena, PE_DT_INT8);
    fw = (const int8_t *)tensor_in(g, IN(5), arena, PE_DT_INT8);
    y = (int8_t *)tensor_out(g, OUT0, arena, PE_DT_INT8);
    if (x == NULL || f == NULL || fw == NULL || y == NULL) {
        return PE_ERR_ARG;
    }
    out_c = op->params[17];
    features = count_of(g, OUT0);
    nq = op->params[24] ? features : 1;
    /* the conv's dims: input [1, H, W, 1]; the fc's weights [features][K] */
    if (out_c <= 0 || dims_of(g, IN(1))->c != out_c ||
        (int64_t)count_of(g, IN(5)) != (int64_t)features * op->params[15] * op->params[16] * out_c) {
        return PE_ERR_ARG;
    }
    if (IN(2) >= 0 && (b = words_in(g, op, 2, arena, out_c)) == NULL) {
        return PE_ERR_ARG;
    }
    if (IN(6) >= 0 && (fb = words_in(g, op, 6, arena, features)) == NULL) {
        return PE_ERR_ARG;
    }
    cm = words_in(g, op, 3, arena, out_c);
    cs = words_in(g, op, 4, arena, out_c);
    fm = words_in(g, op, 7, arena, nq);
    fs = words_in(g, op, 8, arena, nq);
    if (cm == NULL || cs == NULL || fm == NULL || fs == NULL) {
        return PE_ERR_ARG;
    }
    cq.multiplier = cm;
    cq.shift = cs;
    fq.multiplier = fm;
    fq.shift = fs;
    return pe_conv_fc_s8(scratch, op->params, op->num_params, dims_of(g, IN(0)), x, dims_of(g, IN(1)),
                         f, b, &cq, fw, fb, &fq, features, y);
}
