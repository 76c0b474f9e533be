/*
 * pe_logic.c - comparisons, logical operators, SELECT_V2 and ARG_MAX /
 * ARG_MIN, and the decoding of the parameter words of operators 80-93
 * (pe_logic.h). REDUCE_MAX / REDUCE_MIN run in pe_reduce.c.
 *
 * The broadcasting kernels walk the output in row-major order with one
 * offset per operand, each advanced by the operand's own stride (0 along a
 * dimension it broadcasts).
 */
#include "pyembed/pe_logic.h"
#include "pyembed/pe_reduce.h"
#include "../../core/pe_mathfx.h"

#define MAX_OPERANDS 3

typedef struct {
    int32_t rank, total, n;
    int32_t dims[PE_SHAPE_MAX_RANK];
    int32_t stride[MAX_OPERANDS][PE_SHAPE_MAX_RANK];
    int32_t idx[PE_SHAPE_MAX_RANK];
    int32_t off[MAX_OPERANDS];
} bwalk;

/* Strides of operand `in` seen through the output shape (same rank, each
 * dimension equal to the output's or 1); 0 if it does not broadcast. */
static int operand_strides(const pe_shape_nd *in, const pe_shape_nd *out, int32_t *s)
{
    int32_t d, stride = 1;
    if (in->rank != out->rank) {
        return 0;
    }
    for (d = out->rank - 1; d >= 0; d--) {
        const int32_t dim = in->dims[d];
        if (dim == out->dims[d]) {
            s[d] = dim == 1 ? 0 : stride;
        } else if (dim == 1) {
            s[d] = 0;
        } else {
            return 0;
        }
        stride *= dim;
    }
    return 1;
}

static pe_status bwalk_init(bwalk *w, int32_t n, const pe_shape_nd *const *shapes,
                            const pe_shape_nd *out)
{
    int32_t k, d, count;
    if (out == NULL || pe_shape_count(out, &w->total) != PE_OK) {
        return PE_ERR_ARG;
    }
    for (k = 0; k < n; k++) {
        if (shapes[k] == NULL || pe_shape_count(shapes[k], &count) != PE_OK ||
            !operand_strides(shapes[k], out, w->stride[k])) {
            return PE_ERR_ARG;
        }
        w->off[k] = 0;
    }
    w->n = n;
    w->rank = out->rank;
    for (d = 0; d < out->rank; d++) {
        w->dims[d] = out->dims[d];
        w->idx[d] = 0;
    }
    return PE_OK;
}

static void bwalk_next(bwalk *w)
{
    int32_t d, k;
    for (d = w->rank - 1; d >= 0; d--) {
        w->idx[d]++;
        for (k = 0; k < w->n; k++) {
            w->off[k] += w->stride[k][d];
        }
        if (w->idx[d] < w->dims[d]) {
            return;
        }
        for (k = 0; k < w->n; k++) {
            w->off[k] -= w->stride[k][d] * w->dims[d];
        }
        w->idx[d] = 0;
    }
}

static void count_stats(const pe_context *ctx, int32_t elements, int32_t reads)
{
    if (ctx != NULL && ctx->stats != NULL) {
        ctx->stats->combines += (uint64_t)elements;
        ctx->stats->input_reads += (uint64_t)reads * (uint64_t)elements;
    }
}

static uint8_t compare_i32(pe_compare_kind kind, int32_t a, int32_t b)
{
    switch (kind) {
    case PE_CMP_EQUAL:
        return (uint8_t)(a == b);
    case PE_CMP_NOT_EQUAL:
        return (uint8_t)(a != b);
    case PE_CMP_GREATER:
        return (uint8_t)(a > b);
    case PE_CMP_GREATER_EQUAL:
        return (uint8_t)(a >= b);
    case PE_CMP_LESS:
        return (uint8_t)(a < b);
    default:
        return (uint8_t)(a <= b);
    }
}

static int kind_ok(pe_compare_kind kind)
{
    const int32_t k = (int32_t)kind;
    return k >= (int32_t)PE_CMP_EQUAL && k <= (int32_t)PE_CMP_LESS_EQUAL;
}

static int compare_params_ok(const pe_compare_params *p)
{
    return p->input1_offset >= -32768 && p->input1_offset <= 32768 &&
           p->input2_offset >= -32768 && p->input2_offset <= 32768 && p->left_shift >= 0 &&
           p->left_shift <= 8 && p->input1_quant.multiplier >= 0 && p->input1_quant.shift >= -31 &&
           p->input1_quant.shift <= 0 && p->input2_quant.multiplier >= 0 &&
           p->input2_quant.shift >= -31 && p->input2_quant.shift <= 0;
}

/* TFLM's rescaled operand: (x + offset) * 2^left_shift (|.| < 2^25, no
 * overflow), then MultiplyByQuantizedMultiplier with a shift <= 0. */
static int32_t rescale(int32_t x, int32_t offset, int32_t left_shift, const pe_per_tensor_quant *q)
{
    return pe_mf_mbqm((x + offset) * ((int32_t)1 << left_shift), q->multiplier, q->shift);
}

/* One comparison loop for every element type: a, b the operands as int32. */
#define COMPARE_LOOP(READ1, READ2)                                                          \
    do {                                                                                    \
        for (i = 0; i < w.total; i++) {                                                     \
            int32_t a = (int32_t)(READ1), b = (int32_t)(READ2);                             \
            if (p != NULL) {                                                                \
                a = rescale(a, p->input1_offset, p->left_shift, &p->input1_quant);          \
                b = rescale(b, p->input2_offset, p->left_shift, &p->input2_quant);          \
            }                                                                               \
            out[i] = compare_i32(kind, a, b);                                               \
            bwalk_next(&w);                                                                 \
        }                                                                                   \
    } while (0)

static pe_status compare_setup(bwalk *w, pe_compare_kind kind, const pe_compare_params *p,
                               const pe_shape_nd *s1, const void *in1, const pe_shape_nd *s2,
                               const void *in2, const pe_shape_nd *so, const void *out)
{
    const pe_shape_nd *shapes[2];
    shapes[0] = s1;
    shapes[1] = s2;
    if (!kind_ok(kind) || in1 == NULL || in2 == NULL || out == NULL ||
        (p != NULL && !compare_params_ok(p))) {
        return PE_ERR_ARG;
    }
    return bwalk_init(w, 2, shapes, so);
}

pe_status pe_compare_s8(const pe_context *ctx, pe_compare_kind kind, const pe_compare_params *p,
                        const pe_shape_nd *s1, const int8_t *in1, const pe_shape_nd *s2,
                        const int8_t *in2, const pe_shape_nd *so, uint8_t *out)
{
    bwalk w;
    int32_t i;
    if (compare_setup(&w, kind, p, s1, in1, s2, in2, so, out) != PE_OK) {
        return PE_ERR_ARG;
    }
    COMPARE_LOOP(in1[w.off[0]], in2[w.off[1]]);
    count_stats(ctx, w.total, 2);
    return PE_OK;
}

pe_status pe_compare_s16(const pe_context *ctx, pe_compare_kind kind, const pe_compare_params *p,
                         const pe_shape_nd *s1, const int16_t *in1, const pe_shape_nd *s2,
                         const int16_t *in2, const pe_shape_nd *so, uint8_t *out)
{
    bwalk w;
    int32_t i;
    if (compare_setup(&w, kind, p, s1, in1, s2, in2, so, out) != PE_OK) {
        return PE_ERR_ARG;
    }
    COMPARE_LOOP(in1[w.off[0]], in2[w.off[1]]);
    count_stats(ctx, w.total, 2);
    return PE_OK;
}

pe_status pe_compare_s32(const pe_context *ctx, pe_compare_kind kind, const pe_shape_nd *s1,
                         const int32_t *in1, const pe_shape_nd *s2, const int32_t *in2,
                         const pe_shape_nd *so, uint8_t *out)
{
    bwalk w;
    int32_t i;
    const pe_compare_params *p = NULL;
    if (compare_setup(&w, kind, p, s1, in1, s2, in2, so, out) != PE_OK) {
        return PE_ERR_ARG;
    }
    COMPARE_LOOP(in1[w.off[0]], in2[w.off[1]]);
    count_stats(ctx, w.total, 2);
    return PE_OK;
}

pe_status pe_compare_bool(const pe_context *ctx, pe_compare_kind kind, const pe_shape_nd *s1,
                          const uint8_t *in1, const pe_shape_nd *s2, const uint8_t *in2,
                          const pe_shape_nd *so, uint8_t *out)
{
    bwalk w;
    int32_t i;
    const pe_compare_params *p = NULL;
    if ((kind != PE_CMP_EQUAL && kind != PE_CMP_NOT_EQUAL) ||
        compare_setup(&w, kind, p, s1, in1, s2, in2, so, out) != PE_OK) {
        return PE_ERR_ARG;
    }
    COMPARE_LOOP(in1[w.off[0]] != 0u, in2[w.off[1]] != 0u);
    count_stats(ctx, w.total, 2);
    return PE_OK;
}

pe_status pe_logical_bool(const pe_context *ctx, int32_t or_, const pe_shape_nd *s1,
                          const uint8_t *in1, const pe_shape_nd *s2, const uint8_t *in2,
                          const pe_shape_nd *so, uint8_t *out)
{
    bwalk w;
    int32_t i;
    const pe_shape_nd *shapes[2];
    shapes[0] = s1;
    shapes[1] = s2;
    if ((or_ != 0 && or_ != 1) || in1 == NULL || in2 == NULL || out == NULL ||
        bwalk_init(&w, 2, shapes, so) != PE_OK) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < w.total; i++) {
        const int a = in1[w.off[0]] != 0u, b = in2[w.off[1]] != 0u;
        out[i] = (uint8_t)(or_ ? (a || b) : (a && b));
        bwalk_next(&w);
    }
    count_stats(ctx, w.total, 2);
    return PE_OK;
}

pe_status pe_logical_not_bool(const pe_context *ctx, int32_t count, const uint8_t *in, uint8_t *out)
{
    int32_t i;
    if (count < 0 || in == NULL || out == NULL) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < count; i++) {
        out[i] = (uint8_t)(in[i] == 0u);
    }
    count_stats(ctx, count, 1);
    return PE_OK;
}

pe_status pe_select_v2(const pe_context *ctx, int32_t elem_bytes, const pe_shape_nd *sc,
                       const uint8_t *cond, const pe_shape_nd *sx, const void *x,
                       const pe_shape_nd *sy, const void *y, const pe_shape_nd *so, void *out)
{
    bwalk w;
    int32_t i;
    const pe_shape_nd *shapes[3];
    shapes[0] = sc;
    shapes[1] = sx;
    shapes[2] = sy;
    if ((elem_bytes != 1 && elem_bytes != 2 && elem_bytes != 4) || cond == NULL || x == NULL ||
        y == NULL || out == NULL || bwalk_init(&w, 3, shapes, so) != PE_OK) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < w.total; i++) {
        const int take_x = cond[w.off[0]] != 0u;
        if (elem_bytes == 1) {
            ((int8_t *)out)[i] = take_x ? ((const int8_t *)x)[w.off[1]] : ((const int8_t *)y)[w.off[2]];
        } else if (elem_bytes == 2) {
            ((int16_t *)out)[i] =
                take_x ? ((const int16_t *)x)[w.off[1]] : ((const int16_t *)y)[w.off[2]];
        } else {
            ((int32_t *)out)[i] =
                take_x ? ((const int32_t *)x)[w.off[1]] : ((const int32_t *)y)[w.off[2]];
        }
        bwalk_next(&w);
    }
    count_stats(ctx, w.total, 2);
    return PE_OK;
}

pe_status pe_arg_minmax_s8(const pe_context *ctx, int32_t is_max, int32_t outer, int32_t axis_size,
                           int32_t inner, const int8_t *in, int32_t *out)
{
    int32_t o, j, a;
    if ((is_max != 0 && is_max != 1) || outer < 1 || axis_size < 1 || inner < 1 || in == NULL ||
        out == NULL || (int64_t)outer * axis_size > PE_INT32_MAX ||
        (int64_t)outer * axis_size * inner > PE_INT32_MAX) {
        return PE_ERR_ARG;
    }
    for (o = 0; o < outer; o++) {
        const int8_t *base = in + (int64_t)o * axis_size * inner;
        for (j = 0; j < inner; j++) {
            int32_t best = base[j], at = 0;
            for (a = 1; a < axis_size; a++) {
                const int32_t v = base[(int64_t)a * inner + j];
                /* strictly better only: the first of equal values wins */
                if (is_max ? v > best : v < best) {
                    best = v;
                    at = a;
                }
            }
            out[(int64_t)o * inner + j] = at;
        }
    }
    count_stats(ctx, outer * inner, axis_size);
    return PE_OK;
}

/* -- operators 80-93 from their parameter words ------------------------------ */

#define CMP_WORDS 9

int pe_logic_op_known(int32_t type)
{
    return type >= PE_LOP_EQUAL && type <= PE_LOP_REDUCE_MIN;
}

int32_t pe_logic_op_inputs(int32_t type)
{
    if (!pe_logic_op_known(type)) {
        return 0;
    }
    if (type == PE_LOP_SELECT_V2) {
        return 3;
    }
    if (type <= PE_LOP_LOGICAL_OR) {
        return 2;
    }
    return 1;
}

static int is_compare(int32_t type)
{
    return type >= PE_LOP_EQUAL && type <= PE_LOP_LESS_EQUAL;
}

pe_status pe_logic_op_types(int32_t type, const int32_t *params, int32_t num_params,
                            int32_t *in_dtypes, int32_t *out_dtype)
{
    int32_t k, dt;
    if (!pe_logic_op_known(type) || in_dtypes == NULL || out_dtype == NULL ||
        (params == NULL && num_params != 0) || num_params < 0) {
        return PE_ERR_ARG;
    }
    if (is_compare(type)) {
        if (num_params < 1) {
            return PE_ERR_ARG;
        }
        dt = params[0];
        if (dt != PE_LOGIC_DT_INT8 && dt != PE_LOGIC_DT_INT16 && dt != PE_LOGIC_DT_INT32 &&
            !(dt == PE_LOGIC_DT_BOOL && (type == PE_LOP_EQUAL || type == PE_LOP_NOT_EQUAL))) {
            return PE_ERR_ARG;
        }
        in_dtypes[0] = in_dtypes[1] = dt;
        *out_dtype = PE_LOGIC_DT_BOOL;
        return PE_OK;
    }
    switch (type) {
    case PE_LOP_LOGICAL_AND:
    case PE_LOP_LOGICAL_OR:
    case PE_LOP_LOGICAL_NOT:
        for (k = 0; k < pe_logic_op_inputs(type); k++) {
            in_dtypes[k] = PE_LOGIC_DT_BOOL;
        }
        *out_dtype = PE_LOGIC_DT_BOOL;
        return PE_OK;
    case PE_LOP_SELECT_V2:
        if (num_params < 1) {
            return PE_ERR_ARG;
        }
        dt = params[0];
        if (dt != PE_LOGIC_DT_INT8 && dt != PE_LOGIC_DT_INT16 && dt != PE_LOGIC_DT_INT32) {
            return PE_ERR_ARG;
        }
        in_dtypes[0] = PE_LOGIC_DT_BOOL;
        in_dtypes[1] = in_dtypes[2] = dt;
        *out_dtype = dt;
        return PE_OK;
    case PE_LOP_ARG_MAX:
    case PE_LOP_ARG_MIN:
        in_dtypes[0] = PE_LOGIC_DT_INT8;
        *out_dtype = PE_LOGIC_DT_INT32;
        return PE_OK;
    default: /* REDUCE_MAX, REDUCE_MIN */
        in_dtypes[0] = PE_LOGIC_DT_INT8;
        *out_dtype = PE_LOGIC_DT_INT8;
        return PE_OK;
    }
}

/* The shape block at params[at] for n inputs: out, then the inputs' shapes;
 * every count must equal the tensor's. */
static pe_status read_block(const int32_t *params, int32_t num_params, int32_t at, int32_t n,
                            const int32_t *counts, int32_t out_count, pe_shape_nd *out,
                            pe_shape_nd *ins)
{
    int32_t rank, k, j, c;
    if (num_params <= at) {
        return PE_ERR_ARG;
    }
    rank = params[at];
    if (rank < 1 || rank > PE_SHAPE_MAX_RANK || num_params != at + 1 + (n + 1) * rank) {
        return PE_ERR_ARG;
    }
    out->rank = rank;
    for (j = 0; j < rank; j++) {
        out->dims[j] = params[at + 1 + j];
    }
    if (pe_shape_count(out, &c) != PE_OK || c != out_count) {
        return PE_ERR_ARG;
    }
    for (k = 0; k < n; k++) {
        ins[k].rank = rank;
        for (j = 0; j < rank; j++) {
            ins[k].dims[j] = params[at + 1 + (k + 1) * rank + j];
        }
        if (pe_shape_count(&ins[k], &c) != PE_OK || c != counts[k]) {
            return PE_ERR_ARG;
        }
    }
    return PE_OK;
}

static pe_status run_compare(const pe_context *ctx, int32_t type, const int32_t *w, int32_t n,
                             const void *const *in, const int32_t *counts, void *out,
                             int32_t out_count)
{
    pe_shape_nd so, si[2];
    pe_compare_params p;
    const pe_compare_kind kind = (pe_compare_kind)(type - PE_LOP_EQUAL);
    const int32_t dt = w[0];
    if (n < CMP_WORDS || read_block(w, n, CMP_WORDS, 2, counts, out_count, &so, si) != PE_OK ||
        (w[1] != 0 && w[1] != 1)) {
        return PE_ERR_ARG;
    }
    p.input1_offset = w[2];
    p.input1_quant.multiplier = w[3];
    p.input1_quant.shift = w[4];
    p.input2_offset = w[5];
    p.input2_quant.multiplier = w[6];
    p.input2_quant.shift = w[7];
    p.left_shift = w[8];
    if (w[1] == 1 && dt == PE_LOGIC_DT_INT8) {
        return pe_compare_s8(ctx, kind, &p, &si[0], (const int8_t *)in[0], &si[1],
                             (const int8_t *)in[1], &so, (uint8_t *)out);
    }
    if (w[1] == 1 && dt == PE_LOGIC_DT_INT16) {
        return pe_compare_s16(ctx, kind, &p, &si[0], (const int16_t *)in[0], &si[1],
                              (const int16_t *)in[1], &so, (uint8_t *)out);
    }
    if (w[1] == 1 || w[2] != 0 || w[3] != 0 || w[4] != 0 || w[5] != 0 || w[6] != 0 || w[7] != 0 ||
        w[8] != 0) {
        return PE_ERR_ARG; /* scaling is for int8 / int16 only; unscaled words are 0 */
    }
    switch (dt) {
    case PE_LOGIC_DT_INT8:
        return pe_compare_s8(ctx, kind, NULL, &si[0], (const int8_t *)in[0], &si[1],
                             (const int8_t *)in[1], &so, (uint8_t *)out);
    case PE_LOGIC_DT_INT16:
        return pe_compare_s16(ctx, kind, NULL, &si[0], (const int16_t *)in[0], &si[1],
                              (const int16_t *)in[1], &so, (uint8_t *)out);
    case PE_LOGIC_DT_INT32:
        return pe_compare_s32(ctx, kind, &si[0], (const int32_t *)in[0], &si[1],
                              (const int32_t *)in[1], &so, (uint8_t *)out);
    case PE_LOGIC_DT_BOOL:
        return pe_compare_bool(ctx, kind, &si[0], (const uint8_t *)in[0], &si[1],
                               (const uint8_t *)in[1], &so, (uint8_t *)out);
    default:
        return PE_ERR_ARG;
    }
}

static pe_status run_reduce_minmax(const pe_context *ctx, int32_t type, const int32_t *w, int32_t n,
                                   const void *in, int32_t in_count, void *out, int32_t out_count)
{
    int32_t rank, d;
    int64_t count = 1;
    if (n < 2) {
        return PE_ERR_ARG;
    }
    rank = w[1];
    if (rank < 1 || rank > PE_REDUCE_MAX_RANK || n != 2 + rank || w[0] < 0) {
        return PE_ERR_ARG;
    }
    for (d = 0; d < rank; d++) {
        if (w[2 + d] <= 0) {
            return PE_ERR_ARG;
        }
        count *= w[2 + d];
        if (count > in_count) {
            return PE_ERR_ARG;
        }
    }
    if (count != in_count) {
        return PE_ERR_ARG;
    }
    return pe_reduce_minmax_s8(ctx, type == PE_LOP_REDUCE_MAX, w + 2, rank, (uint32_t)w[0],
                               (const int8_t *)in, out_count, (int8_t *)out);
}

pe_status pe_logic_invoke(const pe_context *ctx, int32_t type, const int32_t *params,
                          int32_t num_params, const void *const *inputs, const int32_t *counts,
                          int32_t num_inputs, void *out, int32_t out_count)
{
    int32_t k;
    pe_shape_nd so, si[3];
    if (!pe_logic_op_known(type) || (params == NULL && num_params != 0) || num_params < 0 ||
        inputs == NULL || counts == NULL || num_inputs != pe_logic_op_inputs(type) ||
        out == NULL || out_count < 0) {
        return PE_ERR_ARG;
    }
    for (k = 0; k < num_inputs; k++) {
        if (inputs[k] == NULL || counts[k] < 0) {
            return PE_ERR_ARG;
        }
    }
    if (is_compare(type)) {
        return run_compare(ctx, type, params, num_params, inputs, counts, out, out_count);
    }
    switch (type) {
    case PE_LOP_LOGICAL_AND:
    case PE_LOP_LOGICAL_OR:
        if (read_block(params, num_params, 0, 2, counts, out_count, &so, si) != PE_OK) {
            return PE_ERR_ARG;
        }
        return pe_logical_bool(ctx, type == PE_LOP_LOGICAL_OR, &si[0], (const uint8_t *)inputs[0],
                               &si[1], (const uint8_t *)inputs[1], &so, (uint8_t *)out);
    case PE_LOP_LOGICAL_NOT:
        if (num_params != 0 || counts[0] != out_count) {
            return PE_ERR_ARG;
        }
        return pe_logical_not_bool(ctx, out_count, (const uint8_t *)inputs[0], (uint8_t *)out);
    case PE_LOP_SELECT_V2: {
        int32_t bytes;
        if (num_params < 1 || read_block(params, num_params, 1, 3, counts, out_count, &so, si) != PE_OK) {
            return PE_ERR_ARG;
        }
        bytes = params[0] == PE_LOGIC_DT_INT8 ? 1
                : params[0] == PE_LOGIC_DT_INT16 ? 2
                : params[0] == PE_LOGIC_DT_INT32 ? 4 : 0;
        return pe_select_v2(ctx, bytes, &si[0], (const uint8_t *)inputs[0], &si[1], inputs[1],
                            &si[2], inputs[2], &so, out);
    }
    case PE_LOP_ARG_MAX:
    case PE_LOP_ARG_MIN:
        if (num_params != 3 || params[0] < 1 || params[1] < 1 || params[2] < 1 ||
            (int64_t)params[0] * params[2] != out_count ||
            (int64_t)params[0] * params[1] * params[2] != counts[0]) {
            return PE_ERR_ARG;
        }
        return pe_arg_minmax_s8(ctx, type == PE_LOP_ARG_MAX, params[0], params[1], params[2],
                                (const int8_t *)inputs[0], (int32_t *)out);
    default: /* REDUCE_MAX, REDUCE_MIN */
        return run_reduce_minmax(ctx, type, params, num_params, inputs[0], counts[0], out, out_count);
    }
}
