/*
 * pe_softmax.h - int8 softmax along the last axis, bit-exact with TFLite and
 * CMSIS-NN (arm_softmax_s8 / arm_softmax_s8_s16).
 *
 * Parameters come from the TFLite converter:
 *   mult, shift  encode beta * input_scale * 2^(31 - 5) as a Q31 multiplier
 *                and a left shift in [0, 31];
 *   diff_min     negative cut-off: an element whose difference to the row
 *                maximum is below it contributes 0 and outputs the minimum.
 * Output scale is 1/256 (int8, zero point -128) or 1/65536 (int16, zero point
 * -32768), as TFLite requires for quantized softmax.
 */
#ifndef PYEMBED_PE_SOFTMAX_H
#define PYEMBED_PE_SOFTMAX_H

#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int32_t mult;     /* Q31 input multiplier, > 0 */
    int32_t shift;    /* input left shift, 0..31 */
    int32_t diff_min; /* cut-off, <= 0 normally; > 0 makes every output the minimum */
} pe_softmax_params;

/* Scratch: none. Returns PE_ERR_ARG for NULL pointers, rows < 0,
 * row_size < 1, mult <= 0 or shift outside [0, 31]. */
pe_status pe_softmax_s8(const pe_softmax_params *params, int32_t rows, int32_t row_size,
                        const int8_t *input, int8_t *output);

pe_status pe_softmax_s8_s16(const pe_softmax_params *params, int32_t rows, int32_t row_size,
                            const int8_t *input, int16_t *output);

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_SOFTMAX_H */
