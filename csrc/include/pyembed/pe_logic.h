/*
 * pe_logic.h - comparisons, logical operators, SELECT_V2, ARG_MAX / ARG_MIN
 * and REDUCE_MAX / REDUCE_MIN (graph operator codes 80-93), bit-exact with
 * the reference kernels of TensorFlow Lite for Microcontrollers.
 *
 * bool tensors are one byte per element, 0 (false) or 1 (true); a nonzero
 * input byte reads as true, every output byte written is 0 or 1.
 *
 *   EQUAL, NOT_EQUAL,     int8 / int16: both sides rescaled as TFLM's
 *   GREATER,              comparisons do (x + offset) * 2^left_shift then
 *   GREATER_EQUAL,        MultiplyByQuantizedMultiplier by the input's own
 *   LESS, LESS_EQUAL      scale (multiplier, shift <= 0), compared as int32;
 *                         int32 (and bool for EQUAL / NOT_EQUAL): raw values.
 *   LOGICAL_AND, _OR      bool, broadcasting; LOGICAL_NOT bool element-wise.
 *   SELECT_V2             out = cond ? x : y with cond bool, x, y and out of
 *                         one element type (int8, int16, int32, raw copies:
 *                         TFLM does not requantize), all three broadcasting.
 *   ARG_MAX, ARG_MIN      int8 input viewed as [outer, axis, inner]; int32
 *                         index of the first largest / smallest value.
 *   REDUCE_MAX, _MIN      int8 over any set of axes (pe_reduce.h), raw
 *                         values (TFLM requires equal input and output
 *                         quantization).
 *
 * Shapes of the broadcasting kernels are pe_shape_nd of one rank (the
 * Python side right-aligns them with leading 1s); each input dimension equals
 * the output's or is 1, otherwise PE_ERR_ARG. No scratch; ctx may be NULL;
 * stats->combines / input_reads receive element counts.
 *
 * Parameter words (pe_logic_invoke; "shape block" as in pe_math_ops.h:
 * rank, then rank dims of the output and of each input in order):
 *
 *   comparisons (80-85)   in_dtype, scaled, in1_offset, in1_mult, in1_shift,
 *                         in2_offset, in2_mult, in2_shift, left_shift, shape
 *                         block (2 inputs); scaled 0 for int32 / bool (the
 *                         seven quantization words then 0)
 *   LOGICAL_AND, _OR      shape block (2 inputs)
 *   LOGICAL_NOT           none
 *   SELECT_V2             elem_dtype, shape block (3 inputs: cond, x, y)
 *   ARG_MAX, ARG_MIN      outer, axis_size, inner
 *   REDUCE_MAX, _MIN      axis_mask, rank, rank input dims
 *
 * in_dtype / elem_dtype are pe_dtype values (pe_graph.h): 0 int8, 1 int16,
 * 2 int32, 4 bool.
 */
#ifndef PYEMBED_PE_LOGIC_H
#define PYEMBED_PE_LOGIC_H

#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Operator codes; equal to pe_graph.h's PE_GOP_EQUAL ... values. */
typedef enum {
    PE_LOP_EQUAL = 80,
    PE_LOP_NOT_EQUAL = 81,
    PE_LOP_GREATER = 82,
    PE_LOP_GREATER_EQUAL = 83,
    PE_LOP_LESS = 84,
    PE_LOP_LESS_EQUAL = 85,
    PE_LOP_LOGICAL_AND = 86,
    PE_LOP_LOGICAL_OR = 87,
    PE_LOP_LOGICAL_NOT = 88,
    PE_LOP_SELECT_V2 = 89,
    PE_LOP_ARG_MAX = 90,
    PE_LOP_ARG_MIN = 91,
    PE_LOP_REDUCE_MAX = 92,
    PE_LOP_REDUCE_MIN = 93
} pe_logic_op;

/* Element types (pe_dtype values). */
#define PE_LOGIC_DT_INT8 0
#define PE_LOGIC_DT_INT16 1
#define PE_LOGIC_DT_INT32 2
#define PE_LOGIC_DT_BOOL 4

typedef enum {
    PE_CMP_EQUAL = 0,
    PE_CMP_NOT_EQUAL = 1,
    PE_CMP_GREATER = 2,
    PE_CMP_GREATER_EQUAL = 3,
    PE_CMP_LESS = 4,
    PE_CMP_LESS_EQUAL = 5
} pe_compare_kind;

/* The rescaling of int8 / int16 comparisons (TFLM ComparisonParams). */
typedef struct {
    int32_t input1_offset;            /* minus the zero point, [-32768, 32768] */
    int32_t input2_offset;
    int32_t left_shift;               /* 0 .. 8 (TFLM: 8) */
    pe_per_tensor_quant input1_quant; /* multiplier >= 0, shift -31 .. 0 */
    pe_per_tensor_quant input2_quant;
} pe_compare_params;

/* Comparisons; params NULL compares the raw values. out: 0 / 1 bytes. */
pe_status pe_compare_s8(const pe_context *ctx, pe_compare_kind kind, const pe_compare_params *params,
                        const pe_shape_nd *shape1, const int8_t *in1, const pe_shape_nd *shape2,
                        const int8_t *in2, const pe_shape_nd *out_shape, uint8_t *out);
pe_status pe_compare_s16(const pe_context *ctx, pe_compare_kind kind, const pe_compare_params *params,
                         const pe_shape_nd *shape1, const int16_t *in1, const pe_shape_nd *shape2,
                         const int16_t *in2, const pe_shape_nd *out_shape, uint8_t *out);
pe_status pe_compare_s32(const pe_context *ctx, pe_compare_kind kind, const pe_shape_nd *shape1,
                         const int32_t *in1, const pe_shape_nd *shape2, const int32_t *in2,
                         const pe_shape_nd *out_shape, uint8_t *out);
/* bool: EQUAL and NOT_EQUAL only (TFLM's types), by truth value. */
pe_status pe_compare_bool(const pe_context *ctx, pe_compare_kind kind, const pe_shape_nd *shape1,
                          const uint8_t *in1, const pe_shape_nd *shape2, const uint8_t *in2,
                          const pe_shape_nd *out_shape, uint8_t *out);

/* LOGICAL_AND (or_ = 0) / LOGICAL_OR (or_ = 1), broadcasting. */
pe_status pe_logical_bool(const pe_context *ctx, int32_t or_, const pe_shape_nd *shape1,
                          const uint8_t *in1, const pe_shape_nd *shape2, const uint8_t *in2,
                          const pe_shape_nd *out_shape, uint8_t *out);
pe_status pe_logical_not_bool(const pe_context *ctx, int32_t count, const uint8_t *in,
                              uint8_t *out);

/* SELECT_V2 with elements of elem_bytes (1, 2 or 4) bytes. */
pe_status pe_select_v2(const pe_context *ctx, int32_t elem_bytes, const pe_shape_nd *cond_shape,
                       const uint8_t *cond, const pe_shape_nd *x_shape, const void *x,
                       const pe_shape_nd *y_shape, const void *y, const pe_shape_nd *out_shape,
                       void *out);

/* ARG_MAX (is_max 1) / ARG_MIN (0) of int8 [outer, axis_size, inner] along
 * the middle axis; out holds outer * inner int32 indices. */
pe_status pe_arg_minmax_s8(const pe_context *ctx, int32_t is_max, int32_t outer, int32_t axis_size,
                           int32_t inner, const int8_t *in, int32_t *out);

/* Is `type` one of the operators above? Number of data inputs (1..3). */
int pe_logic_op_known(int32_t type);
int32_t pe_logic_op_inputs(int32_t type);

/* The element types operator `type` with these words reads (in_dtypes[k]
 * for k < pe_logic_op_inputs(type)) and writes (*out_dtype), from the words
 * alone; PE_ERR_ARG for an unknown type or a bad type word. */
pe_status pe_logic_op_types(int32_t type, const int32_t *params, int32_t num_params,
                            int32_t *in_dtypes, int32_t *out_dtype);

/* Run operator `type`: inputs[k] (counts[k] elements) of the types
 * pe_logic_op_types gives, out (out_count elements). Every word and count is
 * checked against the others before any element is read. */
pe_status pe_logic_invoke(const pe_context *ctx, int32_t type, const int32_t *params,
                          int32_t num_params, const void *const *inputs, const int32_t *counts,
                          int32_t num_inputs, void *out, int32_t out_count);

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_LOGIC_H */
