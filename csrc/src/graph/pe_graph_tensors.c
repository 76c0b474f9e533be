/*
 * pe_graph_tensors.c - the tensor lookups of the graph runtime that runners
 * outside this file call (pe_graph_internal.h): element sizes, tensor
 * validity, input/output indices, pointers, dims and counts. The runtime core
 * (pe_graph.c) and pe_run_builtin.c use the inline forms of
 * pe_graph_access.h; this file is their out-of-line face, below the runners
 * and the core.
 */
#include "pyembed/pe_graph.h"
#include "pyembed/pe_graph_internal.h"
#include "pe_graph_access.h"

int32_t pe_graph_dtype_size(pe_dtype t)
{
    switch (t) {
    case PE_DT_INT8:
    case PE_DT_BOOL:
        return 1;
    case PE_DT_INT16:
        return 2;
    case PE_DT_INT32:
    case PE_DT_FLOAT32:
    case PE_DT_UINT32:
        return 4;
    case PE_DT_UINT64:
        return 8;
    default:
        return 0;
    }
}

int pe_graph_tensor_valid(const pe_graph *g, int32_t t, int32_t arena_size)
{
    return tensor_valid(g, t, arena_size);
}

int32_t pe_graph_input_index(const pe_graph_op *op, int32_t k)
{
    if (op == NULL || k < 0 || k >= op->num_inputs || op->inputs == NULL) {
        return -1;
    }
    return op->inputs[k] < 0 ? -1 : op->inputs[k];
}

int32_t pe_graph_output_index(const pe_graph_op *op, int32_t k)
{
    if (op == NULL || k < 0 || k >= op->num_outputs || op->outputs == NULL) {
        return -1;
    }
    return op->outputs[k] < 0 ? -1 : op->outputs[k];
}

const void *pe_graph_input(const pe_graph *g, const pe_graph_op *op, int32_t k,
                           const pe_context *arena, pe_dtype want)
{
    return tensor_in(g, pe_graph_input_index(op, k), arena, want);
}

void *pe_graph_output(const pe_graph *g, const pe_graph_op *op, int32_t k, const pe_context *arena,
                      pe_dtype want)
{
    return tensor_out(g, pe_graph_output_index(op, k), arena, want);
}

void *pe_graph_state(const pe_graph *g, const pe_graph_op *op, int32_t k, const pe_context *arena,
                     pe_dtype want)
{
    return tensor_out(g, pe_graph_input_index(op, k), arena, want);
}

const pe_dims *pe_graph_dims(const pe_graph *g, int32_t t)
{
    return &g->tensors[t].dims;
}

int32_t pe_graph_count(const pe_graph *g, int32_t t)
{
    return (int32_t)dims_count(&g->tensors[t].dims);
}

float pe_graph_word_float(int32_t w)
{
    union {
        int32_t i;
        float f;
    } u;
    u.i = w;
    return u.f;
}

int pe_graph_f32_overlap(const float *a, int64_t na, const float *b, int64_t nb)
{
    return a < b + nb && b < a + na;
}
