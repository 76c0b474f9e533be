/*
 * pe_batch7.h - issue #30's seventh batch of TFLite Micro operators.
 *
 * DIV (int8): TFLM's quantized division. Per element, with a = x1 + input1_offset
 *   and b = x2 + input2_offset (both signs flipped when b < 0): the reciprocal
 *   of b as a Q0.31 value and a power of two (three Newton-Raphson steps on
 *   b's mantissa), a shifted left by its redundant sign bits and multiplied by
 *   that reciprocal (saturating rounding doubling high multiply), then that
 *   quotient requantized by (output_multiplier, output_shift) less the two
 *   shifts (doubling high multiply, then a rounding right shift), plus the
 *   output zero point, clamped to [act_min, act_max]. b == 0 is not refused:
 *   TFLM computes on (its reciprocal of 0 is the Newton steps on -1.0) and so
 *   does this kernel. A right shift of 32 or more bits is taken modulo 32, as
 *   the host build of TFLM computes it (x86 shift counts), with the rounding
 *   mask of all ones: the result is then the same on every target.
 *   Broadcasting: pe_shape_nd shapes of one rank, each input dimension the
 *   output's or 1 (numpy rules). No scratch (the size query answers 0).
 *
 * CIRCULAR_BUFFER (int8): TFLM's custom operator for strided streaming
 *   models. The buffer (num_slots slots of depth values; TFLM's variable
 *   output tensor, here a variable input reset to the zero point): every
 *   call moves the slots one towards the start, dropping the oldest, writes
 *   the input into the last slot, and copies the buffer to the output. No
 *   scratch. (TFLM also ends the interpreter's invoke
 *   early on the calls between its period's runs; the graph preparation only
 *   accepts models where that does not change any output.)
 *
 * Inputs and outputs must not overlap.
 */
#ifndef PYEMBED_PE_BATCH7_H
#define PYEMBED_PE_BATCH7_H
#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int32_t input1_offset;     /* minus input 1's zero point, [-127, 128] */
    int32_t input2_offset;     /* minus input 2's zero point, [-127, 128] */
    int32_t output_offset;     /* the output zero point, [-128, 127] */
    int32_t output_multiplier; /* [0, 2^31 - 1] */
    int32_t output_shift;      /* [-31, 21] (larger ratios are refused) */
    int32_t act_min;           /* clamp, within [-128, 127] */
    int32_t act_max;
} pe_div_s8_params;

/* Scratch bytes pe_div_s8 needs: 0. */
pe_status pe_div_s8_scratch_size(int32_t *bytes);

/* One quotient (exposed for the tests): x1, x2 the raw int8 values. */
int32_t pe_div_s8_one(const pe_div_s8_params *p, int32_t x1, int32_t x2);

pe_status pe_div_s8(const pe_div_s8_params *p, const pe_shape_nd *in1_shape, const int8_t *in1,
                    const pe_shape_nd *in2_shape, const int8_t *in2, const pe_shape_nd *out_shape, int8_t *out);

/* Scratch bytes pe_circular_buffer_s8 needs: 0. */
pe_status pe_circular_buffer_s8_scratch_size(int32_t *bytes);

/* buffer: num_slots * depth values, updated in place, then copied to output
 * (num_slots * depth values, not overlapping it); input: depth values. */
pe_status pe_circular_buffer_s8(const int8_t *input, int32_t num_slots, int32_t depth, int8_t *buffer,
                                int8_t *output);

/*
 * PE_GOP_DIV (233): inputs 1, 2 and the output int8; words [0..7) the
 *   pe_div_s8_params fields in order, [7] rank, then rank output dims, rank
 *   input 1 dims, rank input 2 dims (right-aligned, leading 1s).
 * PE_GOP_CIRCULAR_BUFFER (234): input 0 int8 [1, 1, w, d], input 1 the buffer
 *   (a variable tensor, updated in place) and the output int8
 *   [1, num_slots, w, d]; words [num_slots, depth (= w * d), cycles_max].
 */
#define PE_DIV_WORDS 7
#define PE_CIRCULAR_BUFFER_WORDS 3

#ifdef __cplusplus
}
#endif
#endif /* PYEMBED_PE_BATCH7_H */
