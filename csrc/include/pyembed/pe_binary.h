/*
 * pe_binary.h - broadcasting int8 binary operators, bit-exact with the
 * integer reference kernels of TensorFlow Lite for Microcontrollers:
 *
 *   SUB                 ADD's arithmetic with the second scaled input
 *                       subtracted: both inputs shifted left by left_shift
 *                       (20), brought to a common scale with input1/2_quant
 *                       (multipliers below one), the difference requantized
 *                       by output_quant, plus the output zero point, clamped.
 *   SQUARED_DIFFERENCE  the same with left_shift 7; the scaled difference is
 *                       squared in int32 and requantized by output_quant
 *                       (any shift).
 *   MINIMUM, MAXIMUM    raw int8 comparison (input and output quantization
 *                       equal, checked on the Python side).
 *   PRELU               x - zp >= 0: requantize(x - zp, quant1); otherwise
 *                       requantize((x - zp) * (alpha - alpha_zp), quant2);
 *                       alpha broadcasts against the input.
 *
 * Shapes are pe_shape_nd (pe_types.h), rank 1..PE_SHAPE_MAX_RANK (a scalar
 * is rank 1 with one element). Both inputs are right-aligned to the
 * output's rank; each input dimension equals the output's or is 1 (numpy
 * broadcasting), otherwise PE_ERR_ARG. The output is written in row-major
 * order and must not overlap an input that broadcasts. No scratch; ctx may be
 * NULL; stats->combines and stats->input_reads receive the element counts.
 */
#ifndef PYEMBED_PE_BINARY_H
#define PYEMBED_PE_BINARY_H

#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* SUB and SQUARED_DIFFERENCE. */
typedef struct {
    int32_t input1_offset;  /* minus the zero point of input 1, [-127, 128] */
    int32_t input2_offset;
    int32_t output_offset;  /* the output zero point */
    int32_t left_shift;     /* 20 (SUB) or 7 (SQUARED_DIFFERENCE) */
    pe_per_tensor_quant input1_quant; /* shift <= 0 */
    pe_per_tensor_quant input2_quant; /* shift <= 0 */
    pe_per_tensor_quant output_quant; /* SUB: shift <= 0 */
    pe_activation activation;
} pe_sub_params;

/* PRELU. */
typedef struct {
    int32_t input_offset;  /* minus the input zero point */
    int32_t alpha_offset;  /* minus the alpha zero point */
    int32_t output_offset; /* output zero point */
    pe_per_tensor_quant quant_positive; /* input_scale / output_scale */
    pe_per_tensor_quant quant_negative; /* input_scale * alpha_scale / output_scale */
} pe_prelu_params;

typedef enum {
    PE_MINMAX_MIN = 0,
    PE_MINMAX_MAX = 1
} pe_minmax_kind;

pe_status pe_sub_s8(const pe_context *ctx, const pe_sub_params *params,
                    const pe_shape_nd *input1_shape, const int8_t *input1,
                    const pe_shape_nd *input2_shape, const int8_t *input2,
                    const pe_shape_nd *output_shape, int8_t *output);

/* int16 SUB (TFLite: zero points 0, left_shift 15, offsets 0). */
pe_status pe_sub_s16(const pe_context *ctx, const pe_sub_params *params,
                     const pe_shape_nd *input1_shape, const int16_t *input1,
                     const pe_shape_nd *input2_shape, const int16_t *input2,
                     const pe_shape_nd *output_shape, int16_t *output);

pe_status pe_squared_difference_s8(const pe_context *ctx, const pe_sub_params *params,
                                   const pe_shape_nd *input1_shape, const int8_t *input1,
                                   const pe_shape_nd *input2_shape, const int8_t *input2,
                                   const pe_shape_nd *output_shape, int8_t *output);

pe_status pe_minmax_s8(const pe_context *ctx, pe_minmax_kind kind,
                       const pe_shape_nd *input1_shape, const int8_t *input1,
                       const pe_shape_nd *input2_shape, const int8_t *input2,
                       const pe_shape_nd *output_shape, int8_t *output);

pe_status pe_minmax_s16(const pe_context *ctx, pe_minmax_kind kind,
                        const pe_shape_nd *input1_shape, const int16_t *input1,
                        const pe_shape_nd *input2_shape, const int16_t *input2,
                        const pe_shape_nd *output_shape, int16_t *output);

pe_status pe_prelu_s8(const pe_context *ctx, const pe_prelu_params *params,
                      const pe_shape_nd *input_shape, const int8_t *input,
                      const pe_shape_nd *alpha_shape, const int8_t *alpha,
                      const pe_shape_nd *output_shape, int8_t *output);


#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_BINARY_H */
