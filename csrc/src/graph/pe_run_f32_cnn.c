/*
 * pe_run_f32_cnn.c - graph runners of the float32 RESIZE_BILINEAR and
 * TRANSPOSE_CONV kernels (kernels/f32/pe_f32_cnn.c, pe_f32_cnn.h).
 *
 * RESIZE_BILINEAR (296): input x [n, ih, iw, c] float32, output y
 * [n, oh, ow, c]; words align_corners, half_pixel_centers.
 *
 * TRANSPOSE_CONV (297): inputs x [n, ih, iw, ci], the constant filter
 * [co, kh, kw, ci], an optional bias [co] (absent: -1), output
 * [n, oh, ow, co]; words stride_h, stride_w, pad_top, pad_left, act_min,
 * act_max (float32 bit patterns). The filter's dims are its tensor's.
 *
 * An output sharing bytes with an input is refused (the kernels write the
 * output while they still read the inputs).
 */
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_f32_cnn.h"

pe_status pe_graph_run_f32_resize_bilinear(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                           const pe_context *arena)
{
    int32_t ti, to;
    const float *x;
    float *y;
    (void)scratch;
    if (op->num_inputs != 1 || op->num_outputs != 1 || op->params == NULL || op->num_params != 2) {
        return PE_ERR_ARG;
    }
    ti = pe_graph_input_index(op, 0);
    to = pe_graph_output_index(op, 0);
    x = (const float *)pe_graph_input(g, op, 0, arena, PE_DT_FLOAT32);
    y = (float *)pe_graph_output(g, op, 0, arena, PE_DT_FLOAT32);
    if (ti < 0 || to < 0 || x == NULL || y == NULL ||
        pe_graph_f32_overlap(x, pe_graph_count(g, ti), y, pe_graph_count(g, to))) {
        return PE_ERR_ARG;
    }
    return pe_f32_resize_bilinear(op->params[0], op->params[1], x, pe_graph_dims(g, ti), y, pe_graph_dims(g, to));
}

pe_status pe_graph_run_f32_transpose_conv(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                          const pe_context *arena)
{
    const int32_t *w = op->params;
    pe_f32_tconv_params p;
    int32_t tx, tf, to, tb, ny;
    const float *x, *f, *bias = NULL;
    float *y;
    (void)scratch;
    if (op->num_inputs < 2 || op->num_inputs > 3 || op->num_outputs != 1 || w == NULL || op->num_params != 6) {
        return PE_ERR_ARG;
    }
    tx = pe_graph_input_index(op, 0);
    tf = pe_graph_input_index(op, 1);
    to = pe_graph_output_index(op, 0);
    x = (const float *)pe_graph_input(g, op, 0, arena, PE_DT_FLOAT32);
    f = (const float *)pe_graph_input(g, op, 1, arena, PE_DT_FLOAT32);
    y = (float *)pe_graph_output(g, op, 0, arena, PE_DT_FLOAT32);
    if (tx < 0 || tf < 0 || to < 0 || x == NULL || f == NULL || y == NULL) {
        return PE_ERR_ARG;
    }
    ny = pe_graph_count(g, to);
    tb = op->num_inputs == 3 ? pe_graph_input_index(op, 2) : -1;
    if (tb >= 0) {
        bias = (const float *)pe_graph_input(g, op, 2, arena, PE_DT_FLOAT32);
        if (bias == NULL || pe_graph_count(g, tb) != pe_graph_dims(g, to)->c ||
            pe_graph_f32_overlap(bias, pe_graph_count(g, tb), y, ny)) {
            return PE_ERR_ARG;
        }
    }
    if (pe_graph_f32_overlap(x, pe_graph_count(g, tx), y, ny) || pe_graph_f32_overlap(f, pe_graph_count(g, tf), y, ny)) {
        return PE_ERR_ARG;
    }
    p.stride_h = w[0];
    p.stride_w = w[1];
    p.pad_top = w[2];
    p.pad_left = w[3];
    p.act_min = pe_graph_word_float(w[4]);
    p.act_max = pe_graph_word_float(w[5]);
    return pe_f32_transpose_conv(&p, x, pe_graph_dims(g, tx), f, pe_graph_dims(g, tf), bias, y,
                                 pe_graph_dims(g, to));
}
