/*
 * pe_graph_internal.h - what an operator family's runner needs from the
 * graph runtime: its tensors as checked pointers, their dims and counts.
 *
 * A runner (pe_graph_runner in pe_graph.h) lives in its family's source
 * file and is listed once in pe_graph.c's runner table. It must:
 *  - fetch every tensor through pe_graph_input / pe_graph_output, which
 *    return NULL for an absent, out-of-range, misplaced, misaligned or
 *    wrongly typed tensor (the runner then returns PE_ERR_ARG);
 *  - check num_inputs, num_outputs and num_params, and every parameter word,
 *    before using them (a corrupted table is an error status, never an
 *    out-of-bounds access);
 *  - write nothing but its output tensors and its scratch region.
 */
#ifndef PYEMBED_PE_GRAPH_INTERNAL_H
#define PYEMBED_PE_GRAPH_INTERNAL_H

#include "pe_graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of one element of type t; 0 for an unknown type. */
int32_t pe_graph_dtype_size(pe_dtype t);

/* Tensor index of input k / output k of op; -1 when k is out of range or the
 * input is absent. */
int32_t pe_graph_input_index(const pe_graph_op *op, int32_t k);
int32_t pe_graph_output_index(const pe_graph_op *op, int32_t k);

/* Is tensor t a well-formed entry of g placed inside an arena of
 * arena_size bytes? */
int pe_graph_tensor_valid(const pe_graph *g, int32_t t, int32_t arena_size);

/* Input k of op for reading, as type want: constant data or arena bytes.
 * NULL if absent, invalid, of another type or misaligned. */
const void *pe_graph_input(const pe_graph *g, const pe_graph_op *op, int32_t k,
                           const pe_context *arena, pe_dtype want);

/* Output k of op for writing (an activation in the arena), as type want.
 * NULL if invalid, constant, of another type or misaligned. */
void *pe_graph_output(const pe_graph *g, const pe_graph_op *op, int32_t k, const pe_context *arena,
                      pe_dtype want);

/* Input k of op for reading and writing in place (a recurrent state, e.g.
 * the LSTM's hidden and cell states): an arena tensor as for
 * pe_graph_output, NULL if absent, constant, of another type or misaligned. */
void *pe_graph_state(const pe_graph *g, const pe_graph_op *op, int32_t k, const pe_context *arena,
                     pe_dtype want);

/* Dims and element count of tensor t (t must have passed
 * pe_graph_tensor_valid, e.g. through pe_graph_input / pe_graph_output). */
const pe_dims *pe_graph_dims(const pe_graph *g, int32_t t);
int32_t pe_graph_count(const pe_graph *g, int32_t t);

/* The float32 whose bit pattern is parameter word w (float options of the
 * float32 operators travel in the int32 parameter words as their bits). */
float pe_graph_word_float(int32_t w);

/* Do the float32 spans [a, a + na) and [b, b + nb) share an element? */
int pe_graph_f32_overlap(const float *a, int64_t na, const float *b, int64_t nb);


#ifdef __cplusplus
}
#endif

#endif
