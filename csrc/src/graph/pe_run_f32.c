/*
 * pe_run_f32.c - graph runners of the float32 element-wise kernels
 * (kernels/f32/pe_f32.c, pe_f32.h) on float32 tensors of the graph.
 *
 * Unary operators (codes 260-274, the code minus 260 is the pe_f32_unary_op):
 * one float32 input, one float32 output of the same element count, no words.
 *
 * Binary operators (codes 280-288, the code minus 280 is the
 * pe_f32_binary_op): two float32 inputs, one float32 output, words
 *     rank (1..PE_F32_MAX_RANK),
 *     a's shape, b's shape, the output's shape (rank words each, padded
 *     with leading 1s, every a / b dim equal to the output's or 1),
 *     act_min, act_max (the float32 bit patterns of the clamp bounds).
 * Each shape's product must be its tensor's element count. An output
 * sharing bytes with an input must be that input exactly (same start, same
 * count), the only overlap the kernel allows.
 */
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_f32.h"

#define PE_F32_UNARY_BASE 260
#define PE_F32_BINARY_BASE 280

pe_status pe_graph_run_f32_unary(const pe_graph *g, const pe_graph_op *op,
                                 const pe_context *scratch, const pe_context *arena)
{
    const int32_t kind = (int32_t)op->type - PE_F32_UNARY_BASE;
    int32_t ti, to;
    const float *x;
    float *y;
    (void)scratch;
    if (kind < 0 || kind >= PE_F32_UNARY_COUNT || op->num_inputs != 1 || op->num_outputs != 1 ||
        op->num_params != 0) {
        return PE_ERR_ARG;
    }
    ti = pe_graph_input_index(op, 0);
    to = pe_graph_output_index(op, 0);
    x = (const float *)pe_graph_input(g, op, 0, arena, PE_DT_FLOAT32);
    y = (float *)pe_graph_output(g, op, 0, arena, PE_DT_FLOAT32);
    if (ti < 0 || to < 0 || x == NULL || y == NULL || pe_graph_count(g, ti) != pe_graph_count(g, to)) {
        return PE_ERR_ARG;
    }
    /* element i is read before it is written: in place or apart, never shifted */
    if (x != y && (const float *)y < x + pe_graph_count(g, ti) && x < (const float *)y + pe_graph_count(g, to)) {
        return PE_ERR_ARG;
    }
    return pe_f32_unary(kind, x, y, pe_graph_count(g, to));
}

/* The product of n dims, -1 for a negative dim or more than INT32_MAX elements. */
static int64_t shape_count(const int32_t *s, int32_t n)
{
    int64_t c = 1;
    int32_t d;
    for (d = 0; d < n; d++) {
        if (s[d] < 0) {
            return -1;
        }
        c *= s[d];
        if (c > 0x7FFFFFFF) {
            return -1;
        }
    }
    return c;
}

/* Does the output [y, y + ny) overlap the input [x, x + nx) other than as the same buffer? */
static int bad_overlap(const float *x, int32_t nx, const float *y, int32_t ny)
{
    if (x == y) {
        return nx != ny;
    }
    return y < x + nx && x < y + ny;
}

pe_status pe_graph_run_f32_binary(const pe_graph *g, const pe_graph_op *op,
                                  const pe_context *scratch, const pe_context *arena)
{
    const int32_t kind = (int32_t)op->type - PE_F32_BINARY_BASE;
    const int32_t *w = op->params;
    int32_t rank, ta, tb, to, na, nb, ny;
    const float *a, *b;
    float *y;
    (void)scratch;
    if (kind < 0 || kind >= PE_F32_BINARY_COUNT || op->num_inputs != 2 || op->num_outputs != 1 ||
        w == NULL || op->num_params < 1) {
        return PE_ERR_ARG;
    }
    rank = w[0];
    if (rank < 1 || rank > PE_F32_MAX_RANK || op->num_params != 3 + 3 * rank) {
        return PE_ERR_ARG;
    }
    ta = pe_graph_input_index(op, 0);
    tb = pe_graph_input_index(op, 1);
    to = pe_graph_output_index(op, 0);
    a = (const float *)pe_graph_input(g, op, 0, arena, PE_DT_FLOAT32);
    b = (const float *)pe_graph_input(g, op, 1, arena, PE_DT_FLOAT32);
    y = (float *)pe_graph_output(g, op, 0, arena, PE_DT_FLOAT32);
    if (ta < 0 || tb < 0 || to < 0 || a == NULL || b == NULL || y == NULL) {
        return PE_ERR_ARG;
    }
    na = pe_graph_count(g, ta);
    nb = pe_graph_count(g, tb);
    ny = pe_graph_count(g, to);
    if (shape_count(w + 1, rank) != na || shape_count(w + 1 + rank, rank) != nb ||
        shape_count(w + 1 + 2 * rank, rank) != ny || bad_overlap(a, na, y, ny) || bad_overlap(b, nb, y, ny)) {
        return PE_ERR_ARG;
    }
    return pe_f32_binary(kind, a, w + 1, b, w + 1 + rank, y, w + 1 + 2 * rank, rank,
                         pe_graph_word_float(w[1 + 3 * rank]), pe_graph_word_float(w[2 + 3 * rank]));
}
