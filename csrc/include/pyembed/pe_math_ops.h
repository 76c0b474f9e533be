/*
 * pe_math_ops.h - the math operators of the graph runtime (enum range 60-99)
 * and the decoding of their int32 parameter words.
 *
 * pe_math_invoke() is the whole operator: it validates the parameter words,
 * the element counts and data types against the tensors it is given, then
 * calls the kernel (pe_activations.h, pe_binary.h, pe_reduce.h). The graph
 * runner only resolves tensor pointers; a simulator or a test can call this
 * function directly.
 *
 * Parameter words per operator (shift: positive = left; every multiplier a
 * TFLite QuantizeMultiplier pair; zp = zero point; "shape block" is
 * rank, then rank output dims, then rank dims of input 0 and rank dims of
 * input 1, both right-aligned and padded with leading 1s):
 *
 *   MEAN, SUM            mode, in_zp, out_zp, mult, shift, axis_mask, rank,
 *                        rank input dims            (int8 or int16)
 *   LOGISTIC, TANH       in_zp, radius, mult, left_shift
 *   HARD_SWISH           in_zp, out_zp, reluish_m16, reluish_exp, out_m16, out_exp
 *   LEAKY_RELU           in_zp, out_zp, m_identity, s_identity, m_alpha, s_alpha
 *                        (int8 or int16)
 *   RELU, RELU6,         in_zp, out_zp, mult, shift, requantize, act_min, act_max
 *   RELU_N1_TO_1         (int8 or int16)
 *   ABS                  in_zp, out_zp, mult, shift, rescale (int8 or int16)
 *   RSQRT                in_zp, out_zp, mult, shift, 0
 *   NEG                  in_zp, out_zp, mult, shift, requantize, act_min, act_max:
 *                        clamp(out_zp + mbqm(in_zp - x, mult, shift)), or with
 *                        requantize 0 LiteRT's raw int8 negation
 *   GELU                 64 words: the 256-entry int8 table, byte j of word k
 *                        (bits 8j..8j+7) is the output for input 4k + j - 128
 *   L2_NORMALIZATION     in_zp, depth
 *   SUB,                 in1_off, in2_off, out_off, left_shift, m1, s1, m2, s2,
 *   SQUARED_DIFFERENCE   m_out, s_out, act_min, act_max, shape block (SUB: int8 or
 *                        int16 with offsets 0 and left_shift 15)
 *   PRELU                in_off, alpha_off, out_off, m_pos, s_pos, m_neg, s_neg,
 *                        shape block (input 1 is alpha)
 *   MINIMUM, MAXIMUM     shape block (int8 or int16)
 *
 * A wrong word count or value, a count that does not match the tensors, a
 * data type the operator does not take: PE_ERR_ARG. No scratch.
 *
 * The enumerators equal the graph runtime's pe_graph_op_type values
 * (PE_GOP_MEAN = PE_MOP_MEAN = 60, ...).
 */
#ifndef PYEMBED_PE_MATH_OPS_H
#define PYEMBED_PE_MATH_OPS_H

#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PE_MOP_MEAN = 60,
    PE_MOP_SUM = 61,
    PE_MOP_LOGISTIC = 62,
    PE_MOP_TANH = 63,
    PE_MOP_HARD_SWISH = 64,
    PE_MOP_LEAKY_RELU = 65,
    PE_MOP_PRELU = 66,
    PE_MOP_RELU = 67,
    PE_MOP_RELU6 = 68,
    PE_MOP_RELU_N1_TO_1 = 69,
    PE_MOP_MINIMUM = 70,
    PE_MOP_MAXIMUM = 71,
    PE_MOP_SUB = 72,
    PE_MOP_NEG = 73,
    PE_MOP_ABS = 74,
    PE_MOP_SQUARED_DIFFERENCE = 75,
    PE_MOP_RSQRT = 76,
    PE_MOP_GELU = 77,
    PE_MOP_L2_NORMALIZATION = 78
} pe_math_op;

/* Element types, the same values as pe_graph.h's pe_dtype. */
#define PE_MATH_DT_INT8 0
#define PE_MATH_DT_INT16 1

/* Is `type` one of the operators above? */
int pe_math_op_known(int32_t type);

/* Number of data inputs the operator reads (1 or 2). */
int32_t pe_math_op_inputs(int32_t type);

/* Run operator `type`. in1 / in1_count are ignored by one-input operators.
 * dtype is the element type of every tensor (PRELU's alpha is int8). */
pe_status pe_math_invoke(const pe_context *ctx, int32_t type, const int32_t *params,
                         int32_t num_params, int32_t dtype, const void *in0, int32_t in0_count,
                         const void *in1, int32_t in1_count, void *out, int32_t out_count);

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_MATH_OPS_H */
