/*
 * pe_eltwise.h - element-wise int8 operators: ADD (with broadcasting),
 * MUL, int8 -> int8 requantization, and the float <-> int8 conversions a
 * graph needs at its boundary (QUANTIZE / DEQUANTIZE).
 *
 * ADD is TFLite's int8 arithmetic (reference add, "general" path): both
 * inputs are brought to a common scale with 20 extra fraction bits,
 *
 *   a  = (in1 + input1_offset) * 2^left_shift
 *   b  = (in2 + input2_offset) * 2^left_shift
 *   s  = requant(a, input1_quant) + requant(b, input2_quant)
 *   out = clamp(requant(s, output_quant) + output_offset, act.min, act.max)
 *
 * where requant is pe_fx_requant (pe_fx_requant_single with PE_ROUND_SINGLE,
 * as TFLite builds with TFLITE_SINGLE_ROUNDING compute). The converter-side parameters (see
 * pyembed/kernels/params.py) are: left_shift = 20, twice_max = 2 * max(scale1, scale2),
 * input{1,2}_quant = QuantizeMultiplier(scale{1,2} / twice_max),
 * output_quant = QuantizeMultiplier(twice_max / (2^20 * out_scale)).
 *
 * MUL is TFLite's int8 MUL:
 *   out = clamp(requant((in1 + off1) * (in2 + off2), output_quant) + output_offset, act)
 * with output_quant = QuantizeMultiplier(scale1 * scale2 / out_scale).
 *
 * Broadcasting (ADD, MUL): every dimension of each input equals the output's
 * or is 1 (numpy / TFLite rules after both shapes are right-aligned to 4-D
 * NHWC by the caller).
 *
 * Ranges: input offsets in [-255, 255], output_offset in [-128, 127],
 * left_shift in [0, 20], multipliers in [0, 2^31), shifts in [-31, 30]
 * (ADD's two input shifts <= 0: the input multipliers are below one),
 * -128 <= act.min <= act.max <= 127.
 *
 * Scratch: none. ctx may be NULL; when ctx->stats is non-NULL the element
 * count processed is added to stats->combines and the elements read to
 * stats->input_reads.
 */
#ifndef PYEMBED_PE_ELTWISE_H
#define PYEMBED_PE_ELTWISE_H

#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int32_t input1_offset; /* minus the zero point of input 1 */
    int32_t input2_offset; /* minus the zero point of input 2 */
    int32_t output_offset; /* the output zero point */
    int32_t left_shift;    /* 20 for TFLite int8 */
    pe_per_tensor_quant input1_quant;
    pe_per_tensor_quant input2_quant;
    pe_per_tensor_quant output_quant;
    pe_activation activation;
    pe_rounding rounding; /* of all three requantizations */
} pe_add_params;

typedef struct {
    int32_t input1_offset;
    int32_t input2_offset;
    int32_t output_offset;
    pe_per_tensor_quant output_quant;
    pe_activation activation;
    pe_rounding rounding;
} pe_mul_params;

/* int8 -> int8 requantization (TFLite QUANTIZE with int8 input and output,
 * ONNX DequantizeLinear followed by QuantizeLinear):
 *   out = clamp(requant(in + input_offset, quant) + output_offset, act.min, act.max) */
typedef struct {
    int32_t input_offset;
    int32_t output_offset;
    pe_per_tensor_quant quant;
    pe_activation activation;
    pe_rounding rounding;
} pe_requant_params;

/* Rounding of float -> int conversions. */
typedef enum {
    PE_FROUND_AWAY = 0, /* half away from zero (TFLite: std::round) */
    PE_FROUND_EVEN = 1  /* half to even (ONNX QuantizeLinear) */
} pe_float_rounding;

/* float <-> int8. QUANTIZE: out = clamp(round(x / scale) + zero_point, -128, 127),
 * the division done in double (TFLite) or in float (ONNX, PE_FROUND_EVEN),
 * NaN becomes zero_point. DEQUANTIZE: out = (float)(in - zero_point) * scale. */
typedef struct {
    float scale; /* > 0 */
    int32_t zero_point; /* [-128, 127] */
    pe_float_rounding rounding;
} pe_float_quant_params;

/* Scratch bytes for the element-wise kernels: always 0 (PE_ERR_ARG for a NULL
 * pointer or non-positive dimensions). */
pe_status pe_eltwise_s8_get_buffer_size(const pe_dims *output_dims, int32_t *size);

pe_status pe_add_s8(const pe_context *ctx, const pe_add_params *params,
                    const pe_dims *input1_dims, const int8_t *input1,
                    const pe_dims *input2_dims, const int8_t *input2,
                    const pe_dims *output_dims, int8_t *output);

pe_status pe_mul_s8(const pe_context *ctx, const pe_mul_params *params,
                    const pe_dims *input1_dims, const int8_t *input1,
                    const pe_dims *input2_dims, const int8_t *input2,
                    const pe_dims *output_dims, int8_t *output);

/* size elements; input and output may be the same buffer. */
pe_status pe_requantize_s8(const pe_context *ctx, const pe_requant_params *params,
                           int32_t size, const int8_t *input, int8_t *output);

pe_status pe_quantize_f32_s8(const pe_context *ctx, const pe_float_quant_params *params,
                             int32_t size, const float *input, int8_t *output);

pe_status pe_dequantize_s8_f32(const pe_context *ctx, const pe_float_quant_params *params,
                               int32_t size, const int8_t *input, float *output);

/* Parameter words shared by the operators that take a requantized element-wise
 * operator's parameters as int32 words (nothing is validated here: the
 * kernel or the runner checks the values).
 * PE_ADD_FROM_WORDS: 12 words, ADD / SUB / SQUARED_DIFFERENCE order: input1,
 *   input2 and output offsets, left shift, input1, input2 and output
 *   quantization (multiplier, shift each), activation min and max. P is a
 *   pe_add_params or a pe_sub_params (the same field names).
 * PE_MUL_FROM_WORDS: 7 words, MUL order: input1, input2 and output
 *   offsets, output quantization (multiplier, shift), activation min, max.
 *   P is a pe_mul_params.
 * Neither sets rounding (SUB has none; the caller says which). */
#define PE_ADD_FROM_WORDS(P, W)                  \
    do {                                          \
        (P).input1_offset = (W)[0];               \
        (P).input2_offset = (W)[1];               \
        (P).output_offset = (W)[2];               \
        (P).left_shift = (W)[3];                  \
        (P).input1_quant.multiplier = (W)[4];     \
        (P).input1_quant.shift = (W)[5];          \
        (P).input2_quant.multiplier = (W)[6];     \
        (P).input2_quant.shift = (W)[7];          \
        (P).output_quant.multiplier = (W)[8];     \
        (P).output_quant.shift = (W)[9];          \
        (P).activation.min = (W)[10];             \
        (P).activation.max = (W)[11];             \
    } while (0)
#define PE_ADD_NUM_WORDS 12

#define PE_MUL_FROM_WORDS(P, W)                  \
    do {                                          \
        (P).input1_offset = (W)[0];               \
        (P).input2_offset = (W)[1];               \
        (P).output_offset = (W)[2];               \
        (P).output_quant.multiplier = (W)[3];     \
        (P).output_quant.shift = (W)[4];          \
        (P).activation.min = (W)[5];              \
        (P).activation.max = (W)[6];              \
    } while (0)
#define PE_MUL_NUM_WORDS 7

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_ELTWISE_H */
