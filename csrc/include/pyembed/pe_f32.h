#ifndef PYEMBED_PE_F32_H
#define PYEMBED_PE_F32_H
/* float32 element-wise kernels (issue #30): the one family of pyembed that
 * computes in float at run time. Each result is the float32 value TFLM's
 * reference kernel gives: the same operations in the same order, one float32
 * rounding per operation (the files of this room are compiled with
 * -ffp-contract=off so that no multiply-add is fused), and the C library's
 * sinf/cosf/expf/logf/sqrtf for the transcendental ones. On a board those
 * come from the firmware's libm (newlib), which may differ by ulps.
 *
 * The kernels need no scratch: pe_f32_scratch_size answers 0 so that a
 * caller can treat them like every other family. */
#include <stdint.h>
#include "pyembed/pe_types.h"

typedef enum {
    PE_F32_ABS = 0,
    PE_F32_NEG = 1,
    PE_F32_CEIL = 2,
    PE_F32_FLOOR = 3,
    PE_F32_ROUND = 4,   /* half to even, as TFLM's ROUND */
    PE_F32_SQRT = 5,
    PE_F32_RSQRT = 6,   /* 1 / sqrt(x): two roundings */
    PE_F32_SQUARE = 7,
    PE_F32_EXP = 8,
    PE_F32_LOG = 9,
    PE_F32_SIN = 10,
    PE_F32_COS = 11,
    /* TFLM's float LOGISTIC: 1 for x > 16.619047164916992188, expf(x) for
     * x < -9, else 1 / (1 + expf(-x)) */
    PE_F32_LOGISTIC = 12,
    PE_F32_TANH = 13,   /* tanhf */
    /* x * min(6, max(0, x + 3)) / 6, the float operations in that order
     * (max / min as std::max / std::min: a NaN x + 3 gives 0) */
    PE_F32_HARD_SWISH = 14,
    PE_F32_UNARY_COUNT = 15
} pe_f32_unary_op;

typedef enum {
    PE_F32_ADD = 0,     /* the first four clamp to [act_min, act_max] */
    PE_F32_SUB = 1,
    PE_F32_MUL = 2,
    PE_F32_DIV = 3,
    PE_F32_MAXIMUM = 4, /* a > b ? a : b (no clamp) */
    PE_F32_MINIMUM = 5, /* a < b ? a : b (no clamp) */
    PE_F32_SQUARED_DIFFERENCE = 6, /* (a - b) * (a - b) (no clamp) */
    PE_F32_FLOOR_DIV = 7, /* floor(double(a) / double(b)) rounded to float (no clamp) */
    PE_F32_FLOOR_MOD = 8, /* r = fmodf(a, b); r + b when r != 0 and r, b differ in sign (no clamp) */
    PE_F32_BINARY_COUNT = 9
} pe_f32_binary_op;

/* Most dimensions a broadcast binary operator takes. */
#define PE_F32_MAX_RANK 6

/* Scratch bytes either kernel needs (always 0) into *size. */
pe_status pe_f32_scratch_size(int32_t *size);

/* y[i] = op(x[i]) for n elements (n >= 0); x and y may be the same buffer.
 * PE_ERR_ARG for a NULL buffer with n > 0, a negative n or an unknown op. */
pe_status pe_f32_unary(int32_t op, const float *x, float *y, int32_t n);

/* y = op(a, b) with numpy broadcasting over rank (1..PE_F32_MAX_RANK)
 * dimensions: a_shape and b_shape are each of rank dims (pad with leading
 * 1s), every a/b dim equals y's or is 1, y_shape gives the output. ADD, SUB,
 * MUL and DIV clamp the result as min(max(r, act_min), act_max) (a NaN
 * passes unchanged, as in TFLM). y must not overlap a or b unless the shapes
 * are equal. FLOOR_DIV with a zero (or -0) in b is PE_ERR_ARG before y is
 * written (TFLM fails the same invocation). PE_ERR_ARG for a bad shape, op or
 * NULL buffer, PE_ERR_OVERFLOW
 * for more than INT32_MAX elements. */
pe_status pe_f32_binary(int32_t op, const float *a, const int32_t *a_shape,
                        const float *b, const int32_t *b_shape,
                        float *y, const int32_t *y_shape, int32_t rank,
                        float act_min, float act_max);

/* SignalOverlapAdd on float32 (kernels/f32/pe_f32_signal.c): rows of n_frames
 * frames of frame_size samples, each added onto the pending sums (one float32
 * rounding per addition, TFLM's order), frame_step of them out per frame.
 * pending: float [rows * (frame_size - frame_step)], zeros after a reset. */
pe_status pe_f32_overlap_add(const float *input, int32_t rows, int32_t n_frames, int32_t frame_size,
                             int32_t frame_step, float *pending, float *output);

#endif
