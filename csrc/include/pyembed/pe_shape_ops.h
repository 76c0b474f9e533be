/*
 * pe_shape_ops.h - data movement operators: PAD / PADV2, MIRROR_PAD,
 * CONCATENATION, SPLIT / SPLIT_V, SLICE / STRIDED_SLICE, TRANSPOSE, GATHER,
 * DEPTH_TO_SPACE and SPACE_TO_DEPTH.
 *
 * None of them computes: each output element is a copy of one input element
 * (or the pad value), so the kernels are element-size generic (elem_size 1,
 * 2 or 4 bytes: int8, int16, int32) and bit-exact with TFLite Micro by
 * construction once the index mapping is the same. The one exception is the
 * requantizing concatenation, which rescales int8 inputs whose scale or zero
 * point differs from the output's with pe_requantize_s8 (TFLite's int8 ->
 * int8 QUANTIZE arithmetic; TFLM's own CONCATENATION refuses such inputs, so
 * the result equals TFLM's QUANTIZE of each input followed by CONCATENATION).
 *
 * Shapes are pe_shape_nd: rank 1..PE_SHAPE_MAX_RANK, dims outermost first,
 * every dim >= 1, element count <= INT32_MAX; tensors are C-contiguous
 * (row-major, last axis fastest). All index mappings are validated before
 * the first byte is written: a parameter that would read or write outside a
 * tensor is PE_ERR_ARG, never an out-of-bounds access, and a failed call
 * leaves the output untouched. Inputs and outputs must not overlap, and
 * every data pointer must be aligned to elem_size (PE_ERR_ARG otherwise).
 *
 * Scratch: none of these kernels needs any; pe_shape_ops_get_buffer_size()
 * answers 0 so a planner asks every family the same way. The kernels take no
 * pe_context; counters are not kept (no MACs, no combines).
 *
 * Index mappings (d = input dims, o = output dims, per axis k):
 *   slice      out[i] = in[begin_k + i_k * stride_k], stride_k != 0 (negative
 *              walks backwards); SLICE, STRIDED_SLICE (masks, negative indices
 *              and the offset flag are resolved by the caller into begin and
 *              stride), SPLIT and SPLIT_V (one call per output).
 *   pad        out[i] = in[i_k - before_k] inside, pad_value elsewhere;
 *              o_k = d_k + before_k + after_k, before/after >= 0.
 *   mirror pad outside the input the index reflects: REFLECT (edge not
 *              repeated, before/after <= d_k - 1) or SYMMETRIC (edge
 *              repeated, before/after <= d_k); TFLite's MIRROR_PAD.
 *   concat     inputs laid side by side along axis; all other dims equal.
 *   transpose  o_k = d_perm[k], out[i] = in[j] with j_perm[k] = i_k.
 *   gather     axis a, indices idx[0..m-1] in [0, d_a): out dims
 *              d_0..d_{a-1}, m, d_{a+1}..: out[.., q, ..] = in[.., idx[q], ..]
 *              (batch_dims = 0; the index tensor's own shape is flattened, the
 *              caller gives the output the index tensor's dims in place of a).
 *   depth_to_space  NHWC, block b: out[n, h*b + y, w*b + x, c] =
 *              in[n, h, w, (y*b + x) * C_o + c], C_i = b*b*C_o.
 *   space_to_depth  the inverse: out[n, h, w, (y*b + x) * C_i + c] =
 *              in[n, h*b + y, w*b + x, c].
 */
#ifndef PYEMBED_PE_SHAPE_OPS_H
#define PYEMBED_PE_SHAPE_OPS_H

#include "pe_types.h"
#include "pe_eltwise.h"

#ifdef __cplusplus
extern "C" {
#endif

/* pe_shape_nd, PE_SHAPE_MAX_RANK and pe_shape_count: pe_types.h */

/* Scratch bytes the kernels of this family need: always 0. */
int32_t pe_shape_ops_get_buffer_size(void);

/* ---- SLICE / STRIDED_SLICE / SPLIT / SPLIT_V ------------------------------ */

typedef struct {
    int32_t begin[PE_SHAPE_MAX_RANK];  /* first input index per axis, in [0, d_k) */
    int32_t stride[PE_SHAPE_MAX_RANK]; /* step per axis, != 0 */
} pe_slice_params;

/* out_shape->rank == in_shape->rank; out dims are the element counts per
 * axis: begin_k + (o_k - 1) * stride_k must stay in [0, d_k). */
pe_status pe_slice_x(const pe_slice_params *params, int32_t elem_size,
                     const pe_shape_nd *in_shape, const void *input,
                     const pe_shape_nd *out_shape, void *output);

/* ---- PAD / PADV2 ------------------------------------------------------------ */

typedef struct {
    int32_t before[PE_SHAPE_MAX_RANK]; /* >= 0 */
    int32_t after[PE_SHAPE_MAX_RANK];  /* >= 0 */
    int32_t pad_value;                 /* must fit the element type */
} pe_pad_params;

pe_status pe_pad_x(const pe_pad_params *params, int32_t elem_size, const pe_shape_nd *in_shape,
                   const void *input, const pe_shape_nd *out_shape, void *output);

/* ---- MIRROR_PAD -------------------------------------------------------------- */

typedef enum {
    PE_MIRROR_REFLECT = 0,  /* [a b c] padded by 2 each side: c b | a b c | b a */
    PE_MIRROR_SYMMETRIC = 1 /* the edge repeated:            b a | a b c | c b */
} pe_mirror_mode;

typedef struct {
    int32_t before[PE_SHAPE_MAX_RANK]; /* >= 0, <= d_k - 1 (REFLECT) or d_k (SYMMETRIC) */
    int32_t after[PE_SHAPE_MAX_RANK];
    pe_mirror_mode mode;
} pe_mirror_pad_params;

pe_status pe_mirror_pad_x(const pe_mirror_pad_params *params, int32_t elem_size,
                          const pe_shape_nd *in_shape, const void *input,
                          const pe_shape_nd *out_shape, void *output);

/* ---- CONCATENATION ------------------------------------------------------------ */

/* Plain concatenation of num_inputs (>= 1) tensors of one rank along axis
 * (0 <= axis < rank). */
pe_status pe_concat_x(int32_t axis, int32_t elem_size, int32_t num_inputs,
                      const pe_shape_nd *const *in_shapes, const void *const *inputs,
                      const pe_shape_nd *out_shape, void *output);

/* int8 concatenation that requantizes input i with requant[i] when
 * requantize[i] is non-zero (pe_requantize_s8's arithmetic), copies it
 * otherwise. */
pe_status pe_concat_requant_s8(int32_t axis, int32_t num_inputs,
                               const pe_shape_nd *const *in_shapes, const int8_t *const *inputs,
                               const int32_t *requantize, const pe_requant_params *requant,
                               const pe_shape_nd *out_shape, int8_t *output);

/* One input of a concatenation: input (in_shape) written into its slot of
 * output (out_shape), the slot starting at offset along axis (0 <= offset,
 * offset + in dims[axis] <= out dims[axis]; every other dim equal, one
 * rank). rq != NULL (elem_size 1 only): the elements are requantized with
 * pe_requantize_s8's arithmetic, else copied. The graph runtime concatenates
 * input by input with it, so no per-input table sits on its stack.
 * pe_concat_part_check makes the same checks and writes nothing (a caller
 * checks every input before writing any). */
pe_status pe_concat_part_x(int32_t axis, int32_t offset, int32_t elem_size, const pe_shape_nd *in_shape,
                           const void *input, const pe_requant_params *rq, const pe_shape_nd *out_shape,
                           void *output);
pe_status pe_concat_part_check(int32_t axis, int32_t offset, int32_t elem_size, const pe_shape_nd *in_shape,
                               const void *input, const pe_requant_params *rq, const pe_shape_nd *out_shape,
                               const void *output);

/* Inputs a concatenation takes at most in the graph runtime (TFLM allows
 * 10); the runner keeps no per-input state, it reads each input's words
 * twice (check all, then write). */
#define PE_CONCAT_MAX_INPUTS 16

/* ---- TRANSPOSE ------------------------------------------------------------------ */

/* perm[0 .. rank-1] a permutation of 0 .. rank-1. */
pe_status pe_transpose_x(const int32_t *perm, int32_t elem_size, const pe_shape_nd *in_shape,
                         const void *input, const pe_shape_nd *out_shape, void *output);

/* ---- GATHER -------------------------------------------------------------------- */

/* out_shape: in dims with axis replaced by the num_indices positions (the
 * caller may split them into several axes: only the element count of the
 * gathered block is checked, as outer * num_indices * inner). Every index
 * is checked before anything is written. */
pe_status pe_gather_x(int32_t axis, int32_t elem_size, const pe_shape_nd *in_shape,
                      const void *input, int32_t num_indices, const int32_t *indices,
                      int32_t out_count, void *output);

/* ---- DEPTH_TO_SPACE / SPACE_TO_DEPTH (NHWC) ------------------------------------ */

pe_status pe_depth_to_space_x(int32_t block, int32_t elem_size, const pe_dims *in_dims,
                              const void *input, const pe_dims *out_dims, void *output);

pe_status pe_space_to_depth_x(int32_t block, int32_t elem_size, const pe_dims *in_dims,
                              const void *input, const pe_dims *out_dims, void *output);

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_SHAPE_OPS_H */
