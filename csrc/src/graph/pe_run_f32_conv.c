/*
 * pe_run_f32_conv.c - graph runners of the float32 window and matrix
 * kernels (kernels/f32/pe_f32_conv.c, pe_f32_conv.h) on float32 tensors.
 *
 * CONV_2D (289) / DEPTHWISE_CONV_2D (290): inputs x [n, h, w, c], the
 * constant filter, an optional bias (absent: -1), output [n, oh, ow, co];
 * words stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left,
 * act_min, act_max (float32 bit patterns), and for depthwise the depth
 * multiplier. The filter's dims are its tensor's.
 *
 * FULLY_CONNECTED (291): inputs x, the weights [out_depth, accum_depth], an
 * optional bias; words batches, accum_depth, out_depth, act_min, act_max.
 * x holds batches * accum_depth values, the output batches * out_depth.
 *
 * AVERAGE_POOL_2D (292) / MAX_POOL_2D (293) / L2_POOL_2D (294): input x,
 * output y; words kh, kw, stride_h, stride_w, pad_top, pad_left, act_min,
 * act_max.
 *
 * SOFTMAX (295): input x, output y of the same count; words rows, depth,
 * beta (float32 bits), rows * depth the count. y may be x exactly.
 *
 * Except for softmax in place, an output sharing bytes with an input is
 * refused (every kernel reads inputs after writing outputs).
 */
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_f32_conv.h"

/* Input k as float32 with its element count into *count, or NULL. */
static const float *f32_in(const pe_graph *g, const pe_graph_op *op, int32_t k, const pe_context *arena,
                           int32_t *count)
{
    const int32_t t = pe_graph_input_index(op, k);
    const float *p;
    if (t < 0) {
        return NULL;
    }
    p = (const float *)pe_graph_input(g, op, k, arena, PE_DT_FLOAT32);
    if (p != NULL) {
        *count = pe_graph_count(g, t);
    }
    return p;
}

/* The optional bias (input 2): *ok 0 when present but unusable or not n long. */
static const float *f32_bias(const pe_graph *g, const pe_graph_op *op, const pe_context *arena, int32_t n,
                             int *ok)
{
    int32_t count = 0;
    const float *b;
    *ok = 1;
    if (op->num_inputs < 3 || pe_graph_input_index(op, 2) < 0) {
        return NULL;
    }
    b = f32_in(g, op, 2, arena, &count);
    if (b == NULL || count != n) {
        *ok = 0;
    }
    return b;
}

pe_status pe_graph_run_f32_conv(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                const pe_context *arena)
{
    const int depthwise = op->type == PE_GOP_DEPTHWISE_CONV_2D_F32;
    const int32_t *w = op->params;
    pe_f32_window p;
    const float *x, *f, *bias;
    float *y;
    int32_t nx = 0, nf = 0, tx, tf, to;
    int ok;
    (void)scratch;
    if ((op->type != PE_GOP_CONV_2D_F32 && !depthwise) || op->num_inputs < 2 || op->num_inputs > 3 ||
        op->num_outputs != 1 || w == NULL || op->num_params != (depthwise ? 9 : 8)) {
        return PE_ERR_ARG;
    }
    tx = pe_graph_input_index(op, 0);
    tf = pe_graph_input_index(op, 1);
    to = pe_graph_output_index(op, 0);
    x = f32_in(g, op, 0, arena, &nx);
    f = f32_in(g, op, 1, arena, &nf);
    y = (float *)pe_graph_output(g, op, 0, arena, PE_DT_FLOAT32);
    if (tx < 0 || tf < 0 || to < 0 || x == NULL || f == NULL || y == NULL) {
        return PE_ERR_ARG;
    }
    bias = f32_bias(g, op, arena, pe_graph_dims(g, to)->c, &ok);
    if (!ok || pe_graph_f32_overlap(x, nx, y, pe_graph_count(g, to)) || pe_graph_f32_overlap(f, nf, y, pe_graph_count(g, to)) ||
        (bias != NULL && pe_graph_f32_overlap(bias, pe_graph_dims(g, to)->c, y, pe_graph_count(g, to)))) {
        return PE_ERR_ARG;
    }
    p.stride_h = w[0];
    p.stride_w = w[1];
    p.dilation_h = w[2];
    p.dilation_w = w[3];
    p.pad_top = w[4];
    p.pad_left = w[5];
    p.act_min = pe_graph_word_float(w[6]);
    p.act_max = pe_graph_word_float(w[7]);
    if (depthwise) {
        return pe_f32_depthwise_conv2d(&p, w[8], x, pe_graph_dims(g, tx), f, pe_graph_dims(g, tf), bias, y,
                                       pe_graph_dims(g, to));
    }
    return pe_f32_conv2d(&p, x, pe_graph_dims(g, tx), f, pe_graph_dims(g, tf), bias, y, pe_graph_dims(g, to));
}

pe_status pe_graph_run_f32_fully_connected(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                           const pe_context *arena)
{
    const int32_t *w = op->params;
    const float *x, *f, *bias;
    float *y;
    int32_t nx = 0, nf = 0, ny, to;
    int ok;
    (void)scratch;
    if (op->num_inputs < 2 || op->num_inputs > 3 || op->num_outputs != 1 || w == NULL || op->num_params != 5 ||
        w[0] <= 0 || w[1] <= 0 || w[2] <= 0) {
        return PE_ERR_ARG;
    }
    to = pe_graph_output_index(op, 0);
    x = f32_in(g, op, 0, arena, &nx);
    f = f32_in(g, op, 1, arena, &nf);
    y = (float *)pe_graph_output(g, op, 0, arena, PE_DT_FLOAT32);
    if (to < 0 || x == NULL || f == NULL || y == NULL) {
        return PE_ERR_ARG;
    }
    ny = pe_graph_count(g, to);
    /* the counts must be the words' products (64-bit: the words are not trusted) */
    if ((int64_t)w[0] * w[1] != nx || (int64_t)w[2] * w[1] != nf || (int64_t)w[0] * w[2] != ny) {
        return PE_ERR_ARG;
    }
    bias = f32_bias(g, op, arena, w[2], &ok);
    if (!ok || pe_graph_f32_overlap(x, nx, y, ny) || pe_graph_f32_overlap(f, nf, y, ny) || (bias != NULL && pe_graph_f32_overlap(bias, w[2], y, ny))) {
        return PE_ERR_ARG;
    }
    return pe_f32_fully_connected(x, w[0], w[1], f, w[2], bias, y, pe_graph_word_float(w[3]), pe_graph_word_float(w[4]));
}

pe_status pe_graph_run_f32_pool(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                const pe_context *arena)
{
    const int32_t *w = op->params;
    pe_f32_window p;
    const float *x;
    float *y;
    int32_t nx = 0, tx, to, kind;
    (void)scratch;
    switch (op->type) {
    case PE_GOP_AVERAGE_POOL_2D_F32: kind = PE_F32_POOL_AVERAGE; break;
    case PE_GOP_MAX_POOL_2D_F32: kind = PE_F32_POOL_MAX; break;
    case PE_GOP_L2_POOL_2D: kind = PE_F32_POOL_L2; break;
    default: return PE_ERR_ARG;
    }
    if (op->num_inputs != 1 || op->num_outputs != 1 || w == NULL || op->num_params != 8) {
        return PE_ERR_ARG;
    }
    tx = pe_graph_input_index(op, 0);
    to = pe_graph_output_index(op, 0);
    x = f32_in(g, op, 0, arena, &nx);
    y = (float *)pe_graph_output(g, op, 0, arena, PE_DT_FLOAT32);
    if (tx < 0 || to < 0 || x == NULL || y == NULL || pe_graph_f32_overlap(x, nx, y, pe_graph_count(g, to))) {
        return PE_ERR_ARG;
    }
    p.stride_h = w[2];
    p.stride_w = w[3];
    p.dilation_h = 1;
    p.dilation_w = 1;
    p.pad_top = w[4];
    p.pad_left = w[5];
    p.act_min = pe_graph_word_float(w[6]);
    p.act_max = pe_graph_word_float(w[7]);
    return pe_f32_pool(kind, &p, w[0], w[1], x, pe_graph_dims(g, tx), y, pe_graph_dims(g, to));
}

pe_status pe_graph_run_f32_softmax(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                   const pe_context *arena)
{
    const int32_t *w = op->params;
    const float *x;
    float *y;
    int32_t nx = 0, ny, to;
    (void)scratch;
    if (op->num_inputs != 1 || op->num_outputs != 1 || w == NULL || op->num_params != 3 || w[0] <= 0 ||
        w[1] <= 0) {
        return PE_ERR_ARG;
    }
    to = pe_graph_output_index(op, 0);
    x = f32_in(g, op, 0, arena, &nx);
    y = (float *)pe_graph_output(g, op, 0, arena, PE_DT_FLOAT32);
    if (to < 0 || x == NULL || y == NULL) {
        return PE_ERR_ARG;
    }
    ny = pe_graph_count(g, to);
    if ((int64_t)w[0] * w[1] != nx || nx != ny || (x != y && pe_graph_f32_overlap(x, nx, y, ny))) {
        return PE_ERR_ARG;
    }
    return pe_f32_softmax(x, y, w[0], w[1], pe_graph_word_float(w[2]));
}
