/*
 * pe_math_ops.c - decode the int32 parameter words of the math operators and
 * call their kernels (layouts in pe_math_ops.h). Nothing is trusted: word
 * counts, values, element counts and types are all checked here or in the
 * kernel before any element is read.
 */
#include "pyembed/pe_math_ops.h"
#include "pyembed/pe_activations.h"
#include "pyembed/pe_binary.h"
#include "pyembed/pe_reduce.h"
#include "pyembed/pe_eltwise.h"

int pe_math_op_known(int32_t type)
{
    return type >= PE_MOP_MEAN && type <= PE_MOP_L2_NORMALIZATION;
}

int32_t pe_math_op_inputs(int32_t type)
{
    switch (type) {
    case PE_MOP_PRELU:
    case PE_MOP_MINIMUM:
    case PE_MOP_MAXIMUM:
    case PE_MOP_SUB:
    case PE_MOP_SQUARED_DIFFERENCE:
        return 2;
    default:
        return 1;
    }
}

/* The shape block at params[at]: rank, out dims, in0 dims, in1 dims. */
typedef struct {
    int32_t rank;
    pe_shape_nd out, in0, in1;
} shape_block;

static pe_status read_shapes(const int32_t *params, int32_t num_params, int32_t at,
                             int32_t in0_count, int32_t in1_count, int32_t out_count,
                             shape_block *b)
{
    int32_t rank, k, n_out = -1, n_in0 = -1, n_in1 = -1;
    if (num_params <= at) {
        return PE_ERR_ARG;
    }
    rank = params[at];
    if (rank < 1 || rank > PE_SHAPE_MAX_RANK || num_params != at + 1 + 3 * rank) {
        return PE_ERR_ARG;
    }
    b->rank = rank;
    for (k = 0; k < rank; k++) {
        b->out.dims[k] = params[at + 1 + k];
        b->in0.dims[k] = params[at + 1 + rank + k];
        b->in1.dims[k] = params[at + 1 + 2 * rank + k];
    }
    b->out.rank = b->in0.rank = b->in1.rank = rank;
    if (pe_shape_count(&b->out, &n_out) != PE_OK || n_out != out_count ||
        pe_shape_count(&b->in0, &n_in0) != PE_OK || n_in0 != in0_count ||
        pe_shape_count(&b->in1, &n_in1) != PE_OK || n_in1 != in1_count) {
        return PE_ERR_ARG;
    }
    return PE_OK;
}

static pe_status run_reduce(const pe_context *ctx, const int32_t *w, int32_t n, int32_t dtype,
                            const void *in, int32_t in_count, void *out, int32_t out_count)
{
    pe_reduce_params p;
    int32_t rank, d;
    int64_t count = 1;
    if (n < 7) {
        return PE_ERR_ARG;
    }
    rank = w[6];
    if (rank < 1 || rank > PE_REDUCE_MAX_RANK || n != 7 + rank || w[5] < 0) {
        return PE_ERR_ARG;
    }
    for (d = 0; d < rank; d++) {
        if (w[7 + d] <= 0) {
            return PE_ERR_ARG;
        }
        count *= w[7 + d];
        if (count > in_count) {
            return PE_ERR_ARG;
        }
    }
    if (count != in_count) {
        return PE_ERR_ARG;
    }
    switch (w[0]) {
    case 0:
        p.mode = PE_REDUCE_SUM;
        break;
    case 1:
        p.mode = PE_REDUCE_MEAN;
        break;
    case 2:
        p.mode = PE_REDUCE_MEAN_DIV;
        break;
    case 3:
        p.mode = PE_REDUCE_MEAN_SPATIAL;
        break;
    default:
        return PE_ERR_ARG;
    }
    p.input_zero_point = w[1];
    p.output_zero_point = w[2];
    p.multiplier = w[3];
    p.shift = w[4];
    if (dtype == PE_MATH_DT_INT8) {
        return pe_reduce_s8(ctx, &p, w + 7, rank, (uint32_t)w[5], (const int8_t *)in, out_count,
                            (int8_t *)out);
    }
    if (dtype == PE_MATH_DT_INT16) {
        return pe_reduce_s16(ctx, &p, w + 7, rank, (uint32_t)w[5], (const int16_t *)in, out_count,
                             (int16_t *)out);
    }
    return PE_ERR_ARG;
}

static pe_status run_binary(const pe_context *ctx, int32_t type, const int32_t *w, int32_t n,
                            int32_t dtype, const void *in0, int32_t c0, const void *in1,
                            int32_t c1, void *out, int32_t co)
{
    shape_block b;
    if (type == PE_MOP_MINIMUM || type == PE_MOP_MAXIMUM) {
        const pe_minmax_kind k = type == PE_MOP_MAXIMUM ? PE_MINMAX_MAX : PE_MINMAX_MIN;
        if (read_shapes(w, n, 0, c0, c1, co, &b) != PE_OK) {
            return PE_ERR_ARG;
        }
        if (dtype == PE_MATH_DT_INT8) {
            return pe_minmax_s8(ctx, k, &b.in0, (const int8_t *)in0, &b.in1, (const int8_t *)in1,
                                &b.out, (int8_t *)out);
        }
        if (dtype == PE_MATH_DT_INT16) {
            return pe_minmax_s16(ctx, k, &b.in0, (const int16_t *)in0, &b.in1,
                                 (const int16_t *)in1, &b.out, (int16_t *)out);
        }
        return PE_ERR_ARG;
    }
    if (dtype != PE_MATH_DT_INT8 && type != PE_MOP_SUB) {
        return PE_ERR_ARG;
    }
    if (type == PE_MOP_PRELU) {
        pe_prelu_params p;
        if (read_shapes(w, n, 7, c0, c1, co, &b) != PE_OK) {
            return PE_ERR_ARG;
        }
        p.input_offset = w[0];
        p.alpha_offset = w[1];
        p.output_offset = w[2];
        p.quant_positive.multiplier = w[3];
        p.quant_positive.shift = w[4];
        p.quant_negative.multiplier = w[5];
        p.quant_negative.shift = w[6];
        return pe_prelu_s8(ctx, &p, &b.in0, (const int8_t *)in0, &b.in1, (const int8_t *)in1,
                           &b.out, (int8_t *)out);
    }
    {
        pe_sub_params p;
        if (read_shapes(w, n, 12, c0, c1, co, &b) != PE_OK) {
            return PE_ERR_ARG;
        }
        PE_ADD_FROM_WORDS(p, w);
        if (type == PE_MOP_SUB && dtype == PE_MATH_DT_INT16) {
            return pe_sub_s16(ctx, &p, &b.in0, (const int16_t *)in0, &b.in1, (const int16_t *)in1,
                              &b.out, (int16_t *)out);
        }
        if (dtype != PE_MATH_DT_INT8) {
            return PE_ERR_ARG;
        }
        if (type == PE_MOP_SUB) {
            return pe_sub_s8(ctx, &p, &b.in0, (const int8_t *)in0, &b.in1, (const int8_t *)in1,
                             &b.out, (int8_t *)out);
        }
        return pe_squared_difference_s8(ctx, &p, &b.in0, (const int8_t *)in0, &b.in1,
                                        (const int8_t *)in1, &b.out, (int8_t *)out);
    }
}

static pe_status run_unary(const pe_context *ctx, int32_t type, const int32_t *w, int32_t n,
                           int32_t dtype, const void *in, int32_t count, void *out)
{
    const int s8 = dtype == PE_MATH_DT_INT8;
    const int s16 = dtype == PE_MATH_DT_INT16;
    switch (type) {
    case PE_MOP_LOGISTIC:
    case PE_MOP_TANH: {
        pe_sigmoid_params p;
        if (n != 4 || !s8) {
            return PE_ERR_ARG;
        }
        p.input_zero_point = w[0];
        p.input_range_radius = w[1];
        p.input_multiplier = w[2];
        p.input_left_shift = w[3];
        return type == PE_MOP_LOGISTIC
                   ? pe_logistic_s8(ctx, &p, count, (const int8_t *)in, (int8_t *)out)
                   : pe_tanh_s8(ctx, &p, count, (const int8_t *)in, (int8_t *)out);
    }
    case PE_MOP_HARD_SWISH: {
        pe_hard_swish_params p;
        if (n != 6 || !s8) {
            return PE_ERR_ARG;
        }
        p.input_zero_point = w[0];
        p.output_zero_point = w[1];
        p.reluish_multiplier_fixedpoint_int16 = w[2];
        p.reluish_multiplier_exponent = w[3];
        p.output_multiplier_fixedpoint_int16 = w[4];
        p.output_multiplier_exponent = w[5];
        return pe_hard_swish_s8(ctx, &p, count, (const int8_t *)in, (int8_t *)out);
    }
    case PE_MOP_LEAKY_RELU: {
        pe_leaky_relu_params p;
        if (n != 6) {
            return PE_ERR_ARG;
        }
        p.input_zero_point = w[0];
        p.output_zero_point = w[1];
        p.multiplier_identity = w[2];
        p.shift_identity = w[3];
        p.multiplier_alpha = w[4];
        p.shift_alpha = w[5];
        if (s8) {
            return pe_leaky_relu_s8(ctx, &p, count, (const int8_t *)in, (int8_t *)out);
        }
        return s16 ? pe_leaky_relu_s16(ctx, &p, count, (const int16_t *)in, (int16_t *)out)
                   : PE_ERR_ARG;
    }
    case PE_MOP_RELU:
    case PE_MOP_RELU6:
    case PE_MOP_RELU_N1_TO_1:
    case PE_MOP_NEG: {
        pe_relu_params p;
        if (n != 7) {
            return PE_ERR_ARG;
        }
        p.input_zero_point = w[0];
        p.output_zero_point = w[1];
        p.multiplier = w[2];
        p.shift = w[3];
        p.requantize = w[4];
        p.activation.min = w[5];
        p.activation.max = w[6];
        if (type == PE_MOP_NEG) {
            return s8 ? pe_neg_s8(ctx, &p, count, (const int8_t *)in, (int8_t *)out) : PE_ERR_ARG;
        }
        if (s8) {
            return pe_relu_s8(ctx, &p, count, (const int8_t *)in, (int8_t *)out);
        }
        return s16 ? pe_relu_s16(ctx, &p, count, (const int16_t *)in, (int16_t *)out)
                   : PE_ERR_ARG;
    }
    case PE_MOP_ABS:
    case PE_MOP_RSQRT: {
        pe_unary_quant_params p;
        if (n != 5) {
            return PE_ERR_ARG;
        }
        p.input_zero_point = w[0];
        p.output_zero_point = w[1];
        p.multiplier = w[2];
        p.shift = w[3];
        p.rescale = w[4];
        if (type == PE_MOP_RSQRT) {
            return s8 && p.rescale == 0
                       ? pe_rsqrt_s8(ctx, &p, count, (const int8_t *)in, (int8_t *)out)
                       : PE_ERR_ARG;
        }
        if (s8) {
            return pe_abs_s8(ctx, &p, count, (const int8_t *)in, (int8_t *)out);
        }
        return s16 ? pe_abs_s16(ctx, &p, count, (const int16_t *)in, (int16_t *)out) : PE_ERR_ARG;
    }
    case PE_MOP_GELU: {
        int8_t table[256];
        int32_t k;
        if (n != 64 || !s8) {
            return PE_ERR_ARG;
        }
        for (k = 0; k < 256; k++) {
            const uint32_t byte = ((uint32_t)w[k / 4] >> (8 * (k % 4))) & 0xFFu;
            table[k] = (int8_t)(byte < 128u ? (int32_t)byte : (int32_t)byte - 256);
        }
        return pe_act_lut_s8(ctx, table, count, (const int8_t *)in, (int8_t *)out);
    }
    case PE_MOP_L2_NORMALIZATION:
        if (n != 2 || !s8 || w[1] < 1 || count % w[1] != 0) {
            return PE_ERR_ARG;
        }
        return pe_l2norm_s8(ctx, w[0], count / w[1], w[1], (const int8_t *)in, (int8_t *)out);
    default:
        return PE_ERR_ARG;
    }
}

pe_status pe_math_invoke(const pe_context *ctx, int32_t type, const int32_t *params,
                         int32_t num_params, int32_t dtype, const void *in0, int32_t in0_count,
                         const void *in1, int32_t in1_count, void *out, int32_t out_count)
{
    if (!pe_math_op_known(type) || (params == NULL && num_params != 0) || num_params < 0 ||
        in0 == NULL || out == NULL || in0_count < 0 || out_count < 0) {
        return PE_ERR_ARG;
    }
    if (type == PE_MOP_MEAN || type == PE_MOP_SUM) {
        return run_reduce(ctx, params, num_params, dtype, in0, in0_count, out, out_count);
    }
    if (pe_math_op_inputs(type) == 2) {
        if (in1 == NULL || in1_count < 0) {
            return PE_ERR_ARG;
        }
        return run_binary(ctx, type, params, num_params, dtype, in0, in0_count, in1, in1_count,
                          out, out_count);
    }
    if (in0_count != out_count) {
        return PE_ERR_ARG;
    }
    return run_unary(ctx, type, params, num_params, dtype, in0, in0_count, out);
}
