/*
 * pe_activations.h - element-wise int8 (and some int16) activations, bit-exact
 * with the integer reference kernels of TensorFlow Lite for Microcontrollers:
 *
 *   LOGISTIC, TANH   gemmlowp fixed point: the input is rescaled into Q4.27
 *                    with (input_multiplier, input_left_shift), inputs beyond
 *                    +-input_range_radius saturate; LOGISTIC outputs
 *                    round(logistic * 2^8) - 128, TANH round(tanh * 2^7).
 *   HARD_SWISH       TFLite's int16 fixed-point formula (hires input << 7,
 *                    "reluish" multiplier, truncating doubling high multiply).
 *   LEAKY_RELU       two requantizations: identity for x >= 0, alpha for
 *                    x < 0 (alpha's multiplier may be negative).
 *   RELU family      RELU / RELU_N1_TO_1 / LiteRT's RELU6: requantize then
 *                    clamp; TFLM's RELU6: clamp only (requantize = 0).
 *   ABS              |x - zp_in| requantized (or only offset when the scales
 *                    are equal).
 *   RSQRT            TFLite's integer inverse square root (Newton-Raphson
 *                    multiplier, then two requantizations); an input below
 *                    its zero point is PE_ERR_ARG, as TFLM refuses it.
 *   LUT              out[i] = table[in[i] + 128]: GELU and any other int8 ->
 *                    int8 function whose table the converter side computes.
 *
 * Every multiplier is a TFLite QuantizeMultiplier pair (multiplier in
 * [2^30, 2^31) or 0, shift positive = left) computed on the Python side
 * (pyembed/model/ops/math_act.py) with the same float / double arithmetic as
 * the TFLM kernel's Prepare. Kernels take a flat element count: the shape does
 * not matter to an element-wise operator. Input and output may be the same
 * buffer. An int8 tensor of 512 or more elements is mapped through a 256-entry
 * table of the same per-element arithmetic, built on the stack (256 bytes;
 * results identical, the fixed-point functions evaluated 256 times instead of
 * once per element); LOGISTIC, TANH and RSQRT fill that table on demand for
 * smaller tensors (each distinct input value evaluated once). ctx may be NULL; when ctx->stats is non-NULL the elements processed
 * are added to stats->combines and stats->input_reads. No scratch.
 */
#ifndef PYEMBED_PE_ACTIVATIONS_H
#define PYEMBED_PE_ACTIVATIONS_H

#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* LOGISTIC and TANH (int8). */
typedef struct {
    int32_t input_zero_point;  /* [-128, 127] */
    int32_t input_range_radius; /* >= 0 */
    int32_t input_multiplier;  /* [0, 2^31) */
    int32_t input_left_shift;  /* [-31, 30] */
} pe_sigmoid_params;

/* HARD_SWISH (int8). */
typedef struct {
    int32_t input_zero_point;
    int32_t output_zero_point;
    int32_t reluish_multiplier_fixedpoint_int16; /* [0, 32767] */
    int32_t reluish_multiplier_exponent;         /* [-31, 15] */
    int32_t output_multiplier_fixedpoint_int16;  /* [0, 32767] */
    int32_t output_multiplier_exponent;          /* [-31, 0] */
} pe_hard_swish_params;

/* LEAKY_RELU (int8, int16). */
typedef struct {
    int32_t input_zero_point;
    int32_t output_zero_point;
    int32_t multiplier_identity; /* [0, 2^31) */
    int32_t shift_identity;
    int32_t multiplier_alpha;    /* (-2^31, 2^31): negative for a negative alpha */
    int32_t shift_alpha;
} pe_leaky_relu_params;

/* RELU, RELU6, RELU_N1_TO_1 (int8, int16). */
typedef struct {
    int32_t input_zero_point;
    int32_t output_zero_point;
    int32_t multiplier;
    int32_t shift;
    int32_t requantize;   /* 0: out = clamp(in, act) (TFLM RELU6) */
    pe_activation activation;
} pe_relu_params;

/* ABS (int8, int16) and RSQRT (int8). */
typedef struct {
    int32_t input_zero_point;
    int32_t output_zero_point;
    int32_t multiplier;
    int32_t shift;
    int32_t rescale; /* ABS only: 0 when input and output scales are equal */
} pe_unary_quant_params;

pe_status pe_logistic_s8(const pe_context *ctx, const pe_sigmoid_params *params, int32_t size,
                         const int8_t *input, int8_t *output);
pe_status pe_tanh_s8(const pe_context *ctx, const pe_sigmoid_params *params, int32_t size,
                     const int8_t *input, int8_t *output);
pe_status pe_hard_swish_s8(const pe_context *ctx, const pe_hard_swish_params *params,
                           int32_t size, const int8_t *input, int8_t *output);
pe_status pe_leaky_relu_s8(const pe_context *ctx, const pe_leaky_relu_params *params,
                           int32_t size, const int8_t *input, int8_t *output);
pe_status pe_leaky_relu_s16(const pe_context *ctx, const pe_leaky_relu_params *params,
                            int32_t size, const int16_t *input, int16_t *output);
pe_status pe_relu_s8(const pe_context *ctx, const pe_relu_params *params, int32_t size,
                     const int8_t *input, int8_t *output);
pe_status pe_relu_s16(const pe_context *ctx, const pe_relu_params *params, int32_t size,
                      const int16_t *input, int16_t *output);
pe_status pe_abs_s8(const pe_context *ctx, const pe_unary_quant_params *params, int32_t size,
                    const int8_t *input, int8_t *output);
pe_status pe_abs_s16(const pe_context *ctx, const pe_unary_quant_params *params, int32_t size,
                     const int16_t *input, int16_t *output);
pe_status pe_rsqrt_s8(const pe_context *ctx, const pe_unary_quant_params *params, int32_t size,
                      const int8_t *input, int8_t *output);
/* NEG: requantize = 1: out = clamp(output_zero_point + mbqm(input_zero_point
 * - x, multiplier, shift), activation); requantize = 0: LiteRT's int8 NEG,
 * the raw value negated with -(-128) wrapping to -128 (TFLM has no int8 NEG). */
pe_status pe_neg_s8(const pe_context *ctx, const pe_relu_params *params, int32_t size,
                    const int8_t *input, int8_t *output);
/* table: 256 entries, table[v + 128] is the output for input v. */
pe_status pe_act_lut_s8(const pe_context *ctx, const int8_t *table, int32_t size,
                    const int8_t *input, int8_t *output);

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_ACTIVATIONS_H */
