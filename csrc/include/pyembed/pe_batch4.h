/*
 * pe_batch4.h - issue #30's fourth batch of TFLite Micro operators (data
 * movement): FILL, ZEROS_LIKE, SHAPE and BROADCAST_ARGS at run time,
 * SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND, GATHER_ND, DYNAMIC_UPDATE_SLICE.
 *
 * Every kernel moves raw elements of elem_size bytes (1, 2 or 4: int8,
 * int16, int32, float32 or bool are copied, never converted); none needs
 * scratch. Input and output must not overlap (the planner never places them
 * so); if they do, the copies stay memory-safe (memmove) but the result is
 * unspecified. Every argument is checked before anything is written, except
 * GATHER_ND's indices, which are data: an index outside the params is
 * PE_ERR_ARG when it is met (earlier slices are written, as TFLM does).
 */
#ifndef PYEMBED_PE_BATCH4_H
#define PYEMBED_PE_BATCH4_H
#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PE_BATCH4_MAX_RANK 6

/* FILL: out[i] = *value for i < count (count >= 1). */
pe_status pe_fill(int32_t elem_size, int32_t count, const void *value, void *output);

/* ZEROS_LIKE: every byte of count elements set to 0 (0 and 0.0f alike). */
pe_status pe_zeros(int32_t elem_size, int32_t count, void *output);

/* SHAPE: out[k] = dims[k] for k < rank (0 <= rank <= PE_BATCH4_MAX_RANK). */
pe_status pe_shape_of(int32_t rank, const int32_t *dims, int32_t *output);

/*
 * BROADCAST_ARGS: the broadcast shape of shapes a[0..na) and b[0..nb),
 * aligned at their ends, into out[0..max(na, nb)): where both have an entry,
 * equal entries stay, a 1 takes the other's entry, anything else is
 * PE_ERR_ARG (nothing written). na, nb >= 0 and n_out == max(na, nb) >= 1.
 */
pe_status pe_broadcast_args(int32_t na, const int32_t *a, int32_t nb, const int32_t *b, int32_t n_out,
                            int32_t *output);

/*
 * SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND on 4-D [batch, height, width, depth]
 * tensors (TFLM's 3-D form is [batch, height, 1, depth] with block width 1).
 * geom[PE_S2B_GEOM]: the space tensor's batch, height, width, depth; block
 * height, block width; pad (or crop) top, left; the batch tensor's batch,
 * height, width. Then
 *   batch[b, h, w, :] = space[b % B, h * bh + (b / B) / bw - top,
 *                              w * bw + (b / B) % bw - left, :]
 * (B the space tensor's batch); SPACE_TO_BATCH_ND writes pad_byte into every
 * byte of an element whose source is outside the space tensor (the output
 * zero point, real 0), BATCH_TO_SPACE_ND skips the batch elements whose
 * target is cropped away. Dims, blocks >= 1, top, left >= 0, element counts
 * <= INT32_MAX, batch tensor's batch == B * bh * bw.
 */
#define PE_S2B_GEOM 11
pe_status pe_space_to_batch_nd(int32_t elem_size, const int32_t *geom, int32_t pad_byte, const void *space,
                               void *batch);
pe_status pe_batch_to_space_nd(int32_t elem_size, const int32_t *geom, const void *batch, void *space);

/*
 * PE_GOP_SPACE_TO_BATCH_ND: input 0 the space tensor, output the batch
 * tensor; PE_GOP_BATCH_TO_SPACE_ND: the reverse (int8 / float32).
 *   words [0..11) geom as above, [11] pad byte (0 for BATCH_TO_SPACE_ND).
 */
#define PE_S2B_WORDS (PE_S2B_GEOM + 1)

/*
 * GATHER_ND: n_slices slices of slice_size elements; slice i starts at the
 * flat position sum_j indices[i * nd + j] * stride[j] of the params
 * (params_count elements), as TFLM computes it: a position < 0 or a slice
 * running past the params' end is PE_ERR_ARG (TFLM's "gather_nd index out of
 * bounds"), and so is a term index * stride outside int32 (where TFLM's int
 * arithmetic overflows). 1 <= nd <= PE_BATCH4_MAX_RANK.
 */
pe_status pe_gather_nd(int32_t elem_size, int32_t n_slices, int32_t nd, int32_t slice_size, int32_t params_count,
                       const int32_t *stride, const int32_t *indices, const void *params, void *output);

/*
 * PE_GOP_GATHER_ND: input 0 params (int8 / float32), input 1 int32 indices;
 *   words [0] n_slices, [1] nd, [2] slice_size, [3] params_count,
 *   [4..4+nd) strides (elements per unit of index j).
 */
#define PE_GATHER_ND_WORDS(nd) (4 + (nd))

/*
 * DYNAMIC_UPDATE_SLICE: output = operand (dims[rank]) with update
 * (udims[rank], udims[k] <= dims[k]) written at start[k] clamped to
 * [0, dims[k] - udims[k]], as TFLM clamps. 1 <= rank <= PE_BATCH4_MAX_RANK.
 */
pe_status pe_dynamic_update_slice(int32_t elem_size, int32_t rank, const int32_t *dims, const int32_t *udims,
                                  const int32_t *start, const void *operand, const void *update, void *output);

/*
 * PE_GOP_DYNAMIC_UPDATE_SLICE: inputs operand, update (int8 / int16 / int32 /
 *   float32), int32 start indices [rank]; output of the operand's type.
 *   words [0] rank, [1..1+rank) operand dims, [1+rank..1+2*rank) update dims.
 *
 * PE_GOP_FILL: input the scalar value; words [0] count.
 * PE_GOP_ZEROS_LIKE: input the model's input (not read); words [0] count.
 * PE_GOP_SHAPE: input the model's input (not read), int32 output;
 *   words [0] rank, [1..1+rank) its dims.
 * PE_GOP_BROADCAST_ARGS: two int32 shape vectors, int32 output;
 *   words [0] na, [1] nb, [2] n_out.
 */
#define PE_DUS_WORDS(rank) (1 + 2 * (rank))

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_BATCH4_H */
