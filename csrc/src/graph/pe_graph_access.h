/*
 * pe_graph_access.h - private to csrc/src/graph/: the tensor lookups every
 * runner makes, inline so that the runtime core (pe_graph.c) and the runner
 * files resolve tensors with the same code and no call per lookup.
 * Not a public header: runners outside this room use pe_graph_internal.h.
 */
#ifndef PE_GRAPH_ACCESS_H
#define PE_GRAPH_ACCESS_H

#include <stdint.h>

#include "pyembed/pe_fixed.h"
#include "pyembed/pe_graph.h"
#include "pyembed/pe_graph_internal.h"


/* n * h * w * c, or -1 for a non-positive dim or a count above INT32_MAX
 * (no tensor that large fits an int32 byte size). Each partial product of
 * two factors below 2^31 is an unsigned 64-bit one (a single UMULL on a
 * Cortex-M) and is bounded before the next multiply, so corrupted dims
 * cannot overflow. */
static inline int64_t dims_count(const pe_dims *d)
{
    uint64_t count;
    if (d->n <= 0 || d->h <= 0 || d->w <= 0 || d->c <= 0) {
        return -1;
    }
    count = (uint64_t)(uint32_t)d->n * (uint32_t)d->h;
    if (count > (uint64_t)PE_INT32_MAX) {
        return -1;
    }
    count = (uint64_t)(uint32_t)count * (uint32_t)d->w;
    if (count > (uint64_t)PE_INT32_MAX) {
        return -1;
    }
    count = (uint64_t)(uint32_t)count * (uint32_t)d->c;
    return count > (uint64_t)PE_INT32_MAX ? -1 : (int64_t)count;
}

/* Is tensor t well formed and inside an arena of arena_size bytes? (inline
 * in the pointer lookups every runner makes, once per tensor and call) */
static inline int tensor_valid(const pe_graph *g, int32_t t, int32_t arena_size)
{
    const pe_graph_tensor *x;
    int64_t count;
    int32_t es;
    if (t < 0 || t >= g->num_tensors) {
        return 0;
    }
    x = &g->tensors[t];
    es = pe_graph_dtype_size(x->dtype);
    count = dims_count(&x->dims);
    /* count <= INT32_MAX and es <= 4: the product fits 64 bits unsigned */
    if (es == 0 || count < 0 || x->bytes < 0 ||
        (uint64_t)count * (uint32_t)es != (uint64_t)(uint32_t)x->bytes) {
        return 0;
    }
    if (x->data != NULL) {
        return x->offset == -1;
    }
    if (x->offset == PE_GRAPH_STREAMED) {
        return x->dtype == PE_DT_INT8; /* rows from a pe_row_source, no arena bytes */
    }
    /* es is 1, 2 or 4 */
    return x->offset >= 0 && (int64_t)x->offset + x->bytes <= (int64_t)arena_size &&
           (x->offset & (es - 1)) == 0;
}


/* PE_GRAPH_TRUST_CHECKED (default 0) is a build's promise that every graph
 * it invokes passed pe_graph_check and has not changed since: the firmware
 * project (pyembed.codegen.firmware) checks its constant graph once in
 * pe_model_init and refuses to invoke before. The structural checks
 * pe_graph_check made for the arena size the graph declares (each tensor's
 * dims against its bytes, its arena bounds and offset alignment, each
 * operator's tensor lists and scratch region) are then not repeated per call,
 * as TFLite Micro checks in Prepare and not in Eval. What a call can still
 * get wrong is checked every time: the operator index, the arena's address,
 * size and alignment, each tensor's type and kind, the operator's own
 * parameters (except FULLY_CONNECTED's, whose counts and parameters
 * pe_graph_check checks in such a build, pe_graph_check_fc: on a model of
 * small layers those per-call checks were a tenth of the invoke). Builds without the promise (the Python bindings, the C tests,
 * the fuzzers) check everything on every call. */
#ifndef PE_GRAPH_TRUST_CHECKED
#define PE_GRAPH_TRUST_CHECKED 0
#endif

#if !PE_GRAPH_TRUST_CHECKED
/* Multi-byte elements must sit at addresses that are multiples of their size. */
static inline int aligned(const void *p, pe_dtype t)
{
    const int32_t es = pe_graph_dtype_size(t);
    return es > 0 && ((uintptr_t)p % (uintptr_t)es) == 0u;
}
#endif

/* Pointer to tensor t's bytes for reading, or NULL if t is invalid or not
 * of type want. */
static inline const void *tensor_in(const pe_graph *g, int32_t t, const pe_context *arena, pe_dtype want)
{
    const pe_graph_tensor *x;
#if PE_GRAPH_TRUST_CHECKED
    if ((uint32_t)t >= (uint32_t)g->num_tensors) {
        return NULL;
    }
#else
    if (!tensor_valid(g, t, arena->size)) {
        return NULL;
    }
#endif
    x = &g->tensors[t];
    if (x->dtype != want) {
        return NULL;
    }
    if (x->data != NULL) {
        return x->data;
    }
    if (x->offset < 0) {
        return NULL; /* streamed: only a stripe region's row source has it */
    }
#if !PE_GRAPH_TRUST_CHECKED /* else: offsets checked at init, the arena in invoke_op */
    if (!aligned((const int8_t *)arena->buf + x->offset, x->dtype)) {
        return NULL;
    }
#endif
    return (const int8_t *)arena->buf + x->offset;
}

/* Pointer for writing: activations only. */
static inline void *tensor_out(const pe_graph *g, int32_t t, const pe_context *arena, pe_dtype want)
{
    const pe_graph_tensor *x;
#if PE_GRAPH_TRUST_CHECKED
    if ((uint32_t)t >= (uint32_t)g->num_tensors) {
        return NULL;
    }
#else
    if (!tensor_valid(g, t, arena->size)) {
        return NULL;
    }
#endif
    x = &g->tensors[t];
    if (x->dtype != want || x->data != NULL || x->offset < 0) {
        return NULL;
    }
#if !PE_GRAPH_TRUST_CHECKED
    if (!aligned((int8_t *)arena->buf + x->offset, x->dtype)) {
        return NULL;
    }
#endif
    return (int8_t *)arena->buf + x->offset;
}

/* Index of input k / output k of op, -1 when absent (the public
 * pe_graph_input_index / pe_graph_output_index, inline). */
static inline int32_t in_index(const pe_graph_op *op, int32_t k)
{
    if (op == NULL || k < 0 || k >= op->num_inputs || op->inputs == NULL) {
        return -1;
    }
    return op->inputs[k] < 0 ? -1 : op->inputs[k];
}

static inline int32_t out_index(const pe_graph_op *op, int32_t k)
{
    if (op == NULL || k < 0 || k >= op->num_outputs || op->outputs == NULL) {
        return -1;
    }
    return op->outputs[k] < 0 ? -1 : op->outputs[k];
}

static inline const pe_dims *dims_of(const pe_graph *g, int32_t t)
{
    return &g->tensors[t].dims;
}

static inline int32_t count_of(const pe_graph *g, int32_t t)
{
    return (int32_t)dims_count(&g->tensors[t].dims);
}

#define IN(k) in_index(op, (k))
#define OUT0 out_index(op, 0)

#endif /* PE_GRAPH_ACCESS_H */
