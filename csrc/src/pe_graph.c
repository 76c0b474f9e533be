/*
 * pe_graph.c - the static graph runtime: resolve each operator's tensors to
 * pointers (constant data or arena offset), check them, call the kernel.
 */
#include "pyembed/pe_graph.h"
#include "pyembed/pe_math_ops.h"
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_conv.h"
#include "pyembed/pe_conv_gather.h"
#include "pyembed/pe_matmul.h"
#include "pyembed/pe_tconv.h"
#include "pyembed/pe_s16.h"
#include "pyembed/pe_lstm.h"
#include "pyembed/pe_gather.h"
#include "pyembed/pe_fc_w16.h"
#include "pyembed/pe_pool.h"
#include "pyembed/pe_pipeline.h"
#include "pyembed/pe_pipeline.h"
#include "pyembed/pe_shape_ops.h"
#include "pyembed/pe_resize.h"
#include "pyembed/pe_transformer.h"
#include "pyembed/pe_layernorm.h"

int32_t pe_graph_dtype_size(pe_dtype t)
{
    switch (t) {
    case PE_DT_INT8:
        return 1;
    case PE_DT_INT16:
        return 2;
    case PE_DT_INT32:
    case PE_DT_FLOAT32:
        return 4;
    default:
        return 0;
    }
}

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

int pe_graph_tensor_valid(const pe_graph *g, int32_t t, int32_t arena_size)
{
    return tensor_valid(g, t, arena_size);
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
 * parameters. Builds without the promise (the Python bindings, the C tests,
 * the fuzzers) check everything on every call. */
#ifndef PE_GRAPH_TRUST_CHECKED
#define PE_GRAPH_TRUST_CHECKED 0
#endif

#if !PE_GRAPH_TRUST_CHECKED
/* Multi-byte elements must sit at addresses that are multiples of their size. */
static int aligned(const void *p, pe_dtype t)
{
    const int32_t es = pe_graph_dtype_size(t);
    return es > 0 && ((uintptr_t)p % (uintptr_t)es) == 0u;
}
#endif

/* Pointer to tensor t's bytes for reading, or NULL if t is invalid or not
 * of type want. */
static const void *tensor_in(const pe_graph *g, int32_t t, const pe_context *arena, pe_dtype want)
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
static void *tensor_out(const pe_graph *g, int32_t t, const pe_context *arena, pe_dtype want)
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

#define IN(k) pe_graph_input_index(op, (k))
#define OUT0 pe_graph_output_index(op, 0)
#define dims_of pe_graph_dims
#define count_of pe_graph_count

/* Does the region [lo, hi) share a byte with activation tensor t? */
static int region_hits(const pe_graph *g, int32_t t, int64_t lo, int64_t hi)
{
    const pe_graph_tensor *x;
    if (t < 0 || t >= g->num_tensors) {
        return 0;
    }
    x = &g->tensors[t];
    return x->data == NULL && x->offset >= 0 && x->bytes > 0 && (int64_t)x->offset < hi &&
           lo < (int64_t)x->offset + x->bytes;
}

/* Does operator op's scratch region share a byte with one of its arena
 * tensors (inputs or outputs)? A kernel writes its scratch while it reads
 * its inputs and writes its outputs, so a plan must keep them apart.
 * Indices out of range are left to the other checks. */
static int scratch_overlaps(const pe_graph *g, const pe_graph_op *op)
{
    const int64_t lo = op->scratch_offset;
    const int64_t hi = lo + op->scratch_size;
    int32_t k;
    if (op->scratch_size <= 0) {
        return 0;
    }
    for (k = 0; k < op->num_inputs; k++) {
        if (region_hits(g, op->inputs[k], lo, hi)) {
            return 1;
        }
    }
    for (k = 0; k < op->num_outputs; k++) {
        if (region_hits(g, op->outputs[k], lo, hi)) {
            return 1;
        }
    }
    return 0;
}

/* Are op's lists well formed: counts within PE_GRAPH_MAX_IO, pointers
 * present, every input -1 or a tensor index, every output an activation
 * tensor, parameter words present when counted? */
static int io_lists_ok(const pe_graph *g, const pe_graph_op *op)
{
    int32_t k;
    if (op->num_inputs < 0 || op->num_inputs > PE_GRAPH_MAX_IO || op->num_outputs < 1 ||
        op->num_outputs > PE_GRAPH_MAX_IO || (op->num_inputs > 0 && op->inputs == NULL) ||
        op->outputs == NULL || op->num_params < 0 || (op->num_params > 0 && op->params == NULL)) {
        return 0;
    }
    for (k = 0; k < op->num_inputs; k++) {
        if (op->inputs[k] < -1 || op->inputs[k] >= g->num_tensors) {
            return 0;
        }
    }
    for (k = 0; k < op->num_outputs; k++) {
        const int32_t t = op->outputs[k];
        if (t < 0 || t >= g->num_tensors || g->tensors[t].data != NULL ||
            g->tensors[t].offset == PE_GRAPH_STREAMED) {
            return 0;
        }
    }
    return 1;
}

#define LEGACY_MAX_INPUTS 3

/* dtypes the first twelve operators' inputs (0..2) and output must have;
 * -1 = unused */
static void op_signature(pe_graph_op_type type, int32_t in[LEGACY_MAX_INPUTS], int32_t *out)
{
    in[0] = PE_DT_INT8;
    in[1] = -1;
    in[2] = -1;
    *out = PE_DT_INT8;
    switch (type) {
    case PE_GOP_CONV_2D:
    case PE_GOP_DEPTHWISE_CONV_2D:
    case PE_GOP_FULLY_CONNECTED:
        in[1] = PE_DT_INT8;
        in[2] = PE_DT_INT32;
        break;
    case PE_GOP_ADD:
    case PE_GOP_MUL:
        in[1] = PE_DT_INT8;
        break;
    case PE_GOP_QUANTIZE:
        in[0] = PE_DT_FLOAT32;
        break;
    case PE_GOP_DEQUANTIZE:
        *out = PE_DT_FLOAT32;
        break;
    default:
        break;
    }
}

static int is_legacy(pe_graph_op_type t)
{
    switch (t) {
    case PE_GOP_CONV_2D:
    case PE_GOP_DEPTHWISE_CONV_2D:
    case PE_GOP_AVERAGE_POOL_2D:
    case PE_GOP_MAX_POOL_2D:
    case PE_GOP_FULLY_CONNECTED:
    case PE_GOP_SOFTMAX:
    case PE_GOP_RESHAPE:
    case PE_GOP_ADD:
    case PE_GOP_MUL:
    case PE_GOP_REQUANTIZE:
    case PE_GOP_QUANTIZE:
    case PE_GOP_DEQUANTIZE:
        return 1;
    default:
        return 0;
    }
}

/* The typed signature of one of the first twelve operators. */
static int legacy_ok(const pe_graph *g, const pe_graph_op *op)
{
    int32_t in_t[LEGACY_MAX_INPUTS];
    int32_t out_t, k, t;
    int ok = op->num_inputs <= LEGACY_MAX_INPUTS && op->num_outputs == 1;
    op_signature(op->type, in_t, &out_t);
    for (k = 0; k < LEGACY_MAX_INPUTS && ok; k++) {
        t = IN(k);
        if (t == -1) {
            /* only the bias is optional */
            ok = in_t[k] == -1 || k == 2;
        } else {
            ok = in_t[k] != -1 && (int32_t)g->tensors[t].dtype == in_t[k];
        }
    }
    ok = ok && (int32_t)g->tensors[OUT0].dtype == out_t;
    if (ok && op->type == PE_GOP_RESHAPE) {
        ok = g->tensors[IN(0)].bytes == g->tensors[OUT0].bytes;
    }
    return ok;
}

static pe_graph_runner runner_for(pe_graph_op_type type);

static pe_status run_fc(const pe_graph *g, const pe_graph_op *op, const pe_context *ctx,
                        const pe_context *arena)
{
    const int32_t ti = IN(0), tw = IN(1), tb = IN(2), to = OUT0;
    const int8_t *in = (const int8_t *)tensor_in(g, ti, arena, PE_DT_INT8);
    const int8_t *w = (const int8_t *)tensor_in(g, tw, arena, PE_DT_INT8);
    const int32_t *bias = NULL;
    int8_t *out = (int8_t *)tensor_out(g, to, arena, PE_DT_INT8);
    int32_t depth, features, count, batches;
    if (in == NULL || w == NULL || out == NULL) {
        return PE_ERR_ARG;
    }
    /* filter [O][K] whatever its declared rank: K = its last dim, O = the
     * rest. Counts from the byte sizes of the checked tensors (count *
     * element size == bytes): one load each. */
    depth = g->tensors[tw].dims.c;
    features = g->tensors[tw].bytes / depth;
    count = g->tensors[ti].bytes;
    if (tb != -1) {
        bias = (const int32_t *)tensor_in(g, tb, arena, PE_DT_INT32);
        if (bias == NULL || g->tensors[tb].bytes != 4 * (int64_t)features) {
            return PE_ERR_ARG;
        }
    }
    batches = count / depth;
    if (batches * depth != count ||
        (op->p.fc.quant.count != 1 && op->p.fc.quant.count != features) ||
        op->p.fc.params.per_channel != (op->p.fc.quant.count != 1 ? 1 : 0) ||
        (int64_t)batches * features != (int64_t)g->tensors[to].bytes) {
        return PE_ERR_ARG;
    }
    return pe_fully_connected_s8_flat(ctx, &op->p.fc.params, &op->p.fc.quant.quant, batches,
                                      depth, features, in, w, bias, out);
}

static pe_status run_conv(const pe_graph *g, const pe_graph_op *op, const pe_context *ctx,
                          const pe_context *arena)
{
    const int8_t *in = (const int8_t *)tensor_in(g, IN(0), arena, PE_DT_INT8);
    const int8_t *w = (const int8_t *)tensor_in(g, IN(1), arena, PE_DT_INT8);
    const int32_t *bias = NULL;
    int8_t *out = (int8_t *)tensor_out(g, OUT0, arena, PE_DT_INT8);
    const pe_dims *od;
    if (in == NULL || w == NULL || out == NULL) {
        return PE_ERR_ARG;
    }
    od = dims_of(g, OUT0);
    if (IN(2) != -1) {
        bias = (const int32_t *)tensor_in(g, IN(2), arena, PE_DT_INT32);
        if (bias == NULL || count_of(g, IN(2)) != od->c) {
            return PE_ERR_ARG;
        }
    }
    /* the kernels read quant[0 .. out_c - 1] */
    if (op->p.conv.quant.count != od->c) {
        return PE_ERR_ARG;
    }
    /* no scratch region planned: the gather form, which needs none
     * (pe_conv_gather.h); else the reverse kernel in the planned scratch */
    if (op->scratch_size == 0) {
        if (op->type == PE_GOP_CONV_2D) {
            return pe_conv2d_gather_s8(ctx, &op->p.conv.params, &op->p.conv.quant.quant,
                                       dims_of(g, op->inputs[0]), in, dims_of(g, op->inputs[1]),
                                       w, bias, od, out);
        }
        return pe_depthwise_conv2d_gather_s8(ctx, &op->p.conv.params, &op->p.conv.quant.quant,
                                             dims_of(g, op->inputs[0]), in,
                                             dims_of(g, op->inputs[1]), w, bias, od, out);
    }
    if (op->type == PE_GOP_CONV_2D) {
        return pe_conv2d_rev_s8(ctx, &op->p.conv.params, &op->p.conv.quant.quant,
                                dims_of(g, IN(0)), in, dims_of(g, IN(1)), w, bias, od,
                                out);
    }
    return pe_depthwise_conv2d_rev_s8(ctx, &op->p.conv.params, &op->p.conv.quant.quant,
                                      dims_of(g, IN(0)), in, dims_of(g, IN(1)), w,
                                      bias, od, out);
}

static pe_status run_pool(const pe_graph *g, const pe_graph_op *op, const pe_context *ctx,
                          const pe_context *arena)
{
    const int8_t *in = (const int8_t *)tensor_in(g, IN(0), arena, PE_DT_INT8);
    int8_t *out = (int8_t *)tensor_out(g, OUT0, arena, PE_DT_INT8);
    pe_pool_params params;
    if (in == NULL || out == NULL) {
        return PE_ERR_ARG;
    }
    params = op->p.pool;
    params.kind = op->type == PE_GOP_MAX_POOL_2D ? PE_POOL_MAX : PE_POOL_AVG;
    return pe_pool_rev_s8(ctx, &params, dims_of(g, IN(0)), in, dims_of(g, OUT0), out);
}

static pe_status run_softmax(const pe_graph *g, const pe_graph_op *op, const pe_context *ctx,
                             const pe_context *arena)
{
    const int8_t *in = (const int8_t *)tensor_in(g, IN(0), arena, PE_DT_INT8);
    int8_t *out = (int8_t *)tensor_out(g, OUT0, arena, PE_DT_INT8);
    const pe_dims *d;
    (void)ctx;
    if (in == NULL || out == NULL || count_of(g, IN(0)) != count_of(g, OUT0)) {
        return PE_ERR_ARG;
    }
    d = dims_of(g, IN(0));
    return pe_softmax_s8(&op->p.softmax, d->n * d->h * d->w, d->c, in, out);
}

static pe_status run_reshape(const pe_graph *g, const pe_graph_op *op, const pe_context *ctx,
                             const pe_context *arena)
{
    const pe_graph_tensor *src_t;
    const uint8_t *src;
    uint8_t *dst;
    int32_t i, n;
    (void)ctx;
    if (!pe_graph_tensor_valid(g, IN(0), arena->size) || !pe_graph_tensor_valid(g, OUT0, arena->size)) {
        return PE_ERR_ARG;
    }
    src_t = &g->tensors[IN(0)];
    src = (const uint8_t *)tensor_in(g, IN(0), arena, src_t->dtype);
    dst = (uint8_t *)tensor_out(g, OUT0, arena, src_t->dtype);
    n = src_t->bytes;
    if (src == NULL || dst == NULL || g->tensors[OUT0].bytes != n) {
        return PE_ERR_ARG;
    }
    if (src == dst) {
        return PE_OK; /* aliased: nothing to do */
    }
    /* a plan that did not alias: move the bytes, overlap-safe */
    if (dst < src) {
        for (i = 0; i < n; i++) {
            dst[i] = src[i];
        }
    } else {
        for (i = n; i > 0; i--) {
            dst[i - 1] = src[i - 1];
        }
    }
    return PE_OK;
}

static pe_status run_binary(const pe_graph *g, const pe_graph_op *op, const pe_context *ctx,
                            const pe_context *arena)
{
    const int8_t *a = (const int8_t *)tensor_in(g, IN(0), arena, PE_DT_INT8);
    const int8_t *b = (const int8_t *)tensor_in(g, IN(1), arena, PE_DT_INT8);
    int8_t *out = (int8_t *)tensor_out(g, OUT0, arena, PE_DT_INT8);
    if (a == NULL || b == NULL || out == NULL) {
        return PE_ERR_ARG;
    }
    if (op->type == PE_GOP_ADD) {
        return pe_add_s8(ctx, &op->p.add, dims_of(g, IN(0)), a, dims_of(g, IN(1)), b,
                         dims_of(g, OUT0), out);
    }
    return pe_mul_s8(ctx, &op->p.mul, dims_of(g, IN(0)), a, dims_of(g, IN(1)), b,
                     dims_of(g, OUT0), out);
}

static pe_status run_unary(const pe_graph *g, const pe_graph_op *op, const pe_context *ctx,
                           const pe_context *arena)
{
    int32_t n;
    /* indices checked before their dims are read */
    if (!pe_graph_tensor_valid(g, IN(0), arena->size) || !pe_graph_tensor_valid(g, OUT0, arena->size)) {
        return PE_ERR_ARG;
    }
    n = count_of(g, IN(0));
    if (n != count_of(g, OUT0)) {
        return PE_ERR_ARG;
    }
    if (op->type == PE_GOP_REQUANTIZE) {
        const int8_t *in = (const int8_t *)tensor_in(g, IN(0), arena, PE_DT_INT8);
        int8_t *out = (int8_t *)tensor_out(g, OUT0, arena, PE_DT_INT8);
        if (in == NULL || out == NULL) {
            return PE_ERR_ARG;
        }
        return pe_requantize_s8(ctx, &op->p.requant, n, in, out);
    }
    if (op->type == PE_GOP_QUANTIZE) {
        const float *in = (const float *)tensor_in(g, IN(0), arena, PE_DT_FLOAT32);
        int8_t *out = (int8_t *)tensor_out(g, OUT0, arena, PE_DT_INT8);
        if (in == NULL || out == NULL) {
            return PE_ERR_ARG;
        }
        return pe_quantize_f32_s8(ctx, &op->p.fquant, n, in, out);
    } else {
        const int8_t *in = (const int8_t *)tensor_in(g, IN(0), arena, PE_DT_INT8);
        float *out = (float *)tensor_out(g, OUT0, arena, PE_DT_FLOAT32);
        if (in == NULL || out == NULL) {
            return PE_ERR_ARG;
        }
        return pe_dequantize_s8_f32(ctx, &op->p.fquant, n, in, out);
    }
}

/* The runner of each operator type; NULL for a type the runtime does not
 * know. Operator families added later list theirs here (one line each). */
static pe_graph_runner runner_for(pe_graph_op_type type)
{
    switch (type) {
    case PE_GOP_FULLY_CONNECTED:
        return run_fc;
    case PE_GOP_SOFTMAX:
        return run_softmax;
    case PE_GOP_RESHAPE:
        return run_reshape;
    case PE_GOP_ADD:
    case PE_GOP_MUL:
        return run_binary;
    case PE_GOP_REQUANTIZE:
    case PE_GOP_QUANTIZE:
    case PE_GOP_DEQUANTIZE:
        return run_unary;
    case PE_GOP_CONV_2D:
    case PE_GOP_DEPTHWISE_CONV_2D:
        return run_conv;
    case PE_GOP_AVERAGE_POOL_2D:
    case PE_GOP_MAX_POOL_2D:
        return run_pool;
    case PE_GOP_MEAN: case PE_GOP_SUM: case PE_GOP_LOGISTIC: case PE_GOP_TANH: /* pe_math_ops.c */
    case PE_GOP_HARD_SWISH: case PE_GOP_LEAKY_RELU: case PE_GOP_PRELU: case PE_GOP_RELU:
    case PE_GOP_RELU6: case PE_GOP_RELU_N1_TO_1: case PE_GOP_MINIMUM: case PE_GOP_MAXIMUM:
    case PE_GOP_SUB: case PE_GOP_NEG: case PE_GOP_ABS: case PE_GOP_SQUARED_DIFFERENCE:
    case PE_GOP_RSQRT: case PE_GOP_GELU: case PE_GOP_L2_NORMALIZATION:
        return pe_graph_run_math;
    case PE_GOP_CONV_POOL:
        return pe_graph_run_conv_pool;
    case PE_GOP_STRIPE_REGION:
        return pe_graph_run_stripe_region;
    case PE_GOP_PAD:
    case PE_GOP_PADV2:
    case PE_GOP_MIRROR_PAD:
    case PE_GOP_CONCATENATION:
    case PE_GOP_SPLIT:
    case PE_GOP_SPLIT_V:
    case PE_GOP_STRIDED_SLICE:
    case PE_GOP_SLICE:
    case PE_GOP_TRANSPOSE:
    case PE_GOP_GATHER:
    case PE_GOP_DEPTH_TO_SPACE:
    case PE_GOP_SPACE_TO_DEPTH:
    case PE_GOP_SQUEEZE:
    case PE_GOP_EXPAND_DIMS:
        return pe_graph_run_shape_ops;
    case PE_GOP_RESIZE_NEAREST_NEIGHBOR:
    case PE_GOP_RESIZE_BILINEAR:
        return pe_graph_run_resize;
    case PE_GOP_BATCH_MATMUL:
        return pe_graph_run_batch_matmul;
    case PE_GOP_TRANSPOSE_CONV:
        return pe_graph_run_transpose_conv;
    case PE_GOP_CONV_2D_S16X8:
        return pe_graph_run_conv_s16x8;
    case PE_GOP_FULLY_CONNECTED_S16X8:
        return pe_graph_run_fc_s16x8;
    case PE_GOP_ADD_S16:
        return pe_graph_run_add_s16;
    case PE_GOP_SOFTMAX_S16:
        return pe_graph_run_softmax_s16;
    case PE_GOP_LOGISTIC_S16:
        return pe_graph_run_logistic_s16;
    case PE_GOP_TANH_S16:
        return pe_graph_run_tanh_s16;
    case PE_GOP_UNIDIRECTIONAL_SEQUENCE_LSTM:
        return pe_graph_run_lstm;
    case PE_GOP_SQUARED_DIFFERENCE_S16:
        return pe_graph_run_squared_difference_s16;
    case PE_GOP_PRELU_S16:
        return pe_graph_run_prelu_s16;
    case PE_GOP_GATHER_BATCHED:
        return pe_graph_run_gather_batched;
    case PE_GOP_FULLY_CONNECTED_W16:
        return pe_graph_run_fc_w16;
    case PE_GOP_ATTENTION:
        return pe_graph_run_attention;
    case PE_GOP_LUT:
        return pe_graph_run_lut;
    case PE_GOP_LAYERNORM:
        return pe_graph_run_layernorm;
    case PE_GOP_LAYERNORM_HP:
        return pe_graph_run_layernorm_hp;
    default:
        return NULL;
    }
}

/* Scratch inside the arena and clear of the operator's own tensors. */
static int scratch_ok(const pe_graph *g, const pe_graph_op *op, int32_t arena_size)
{
    if (op->scratch_size < 0) {
        return 0;
    }
    if (op->scratch_size > 0 &&
        (op->scratch_offset < 0 || (int64_t)op->scratch_offset + op->scratch_size > (int64_t)arena_size)) {
        return 0;
    }
    return !scratch_overlaps(g, op);
}

pe_status pe_graph_check(const pe_graph *g, int32_t *bad_op, int32_t *bad_tensor)
{
    int32_t i;
    if (bad_op != NULL) {
        *bad_op = -1;
    }
    if (bad_tensor != NULL) {
        *bad_tensor = -1;
    }
    if (g == NULL || g->num_tensors < 0 || g->num_ops < 0 || g->arena_size < 0 ||
        (g->num_tensors > 0 && g->tensors == NULL) || (g->num_ops > 0 && g->ops == NULL)) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < g->num_tensors; i++) {
        if (!pe_graph_tensor_valid(g, i, g->arena_size)) {
            if (bad_tensor != NULL) {
                *bad_tensor = i;
            }
            return PE_ERR_ARG;
        }
    }
    for (i = 0; i < g->num_ops; i++) {
        const pe_graph_op *op = &g->ops[i];
        int ok = runner_for(op->type) != NULL && io_lists_ok(g, op) &&
                 scratch_ok(g, op, g->arena_size);
        if (ok && is_legacy(op->type)) {
            ok = legacy_ok(g, op);
        }
        if (!ok) {
            if (bad_op != NULL) {
                *bad_op = i;
            }
            return PE_ERR_ARG;
        }
    }
    return PE_OK;
}

static pe_status invoke_op(const pe_graph *g, int32_t i, const pe_context *arena, const pe_row_source *rows)
{
    const pe_graph_op *op;
    pe_graph_runner run;
    pe_context ctx;
    if (g == NULL || arena == NULL || i < 0 || i >= g->num_ops || g->ops == NULL ||
        g->tensors == NULL) {
        return PE_ERR_ARG;
    }
    if (arena->buf == NULL || arena->size < g->arena_size || arena->size < 0) {
        return PE_ERR_SCRATCH;
    }
    op = &g->ops[i];
    run = runner_for(op->type);
#if PE_GRAPH_TRUST_CHECKED
    /* lists and scratch checked at init; every tensor offset is a multiple
     * of its element size (at most 4), so a 4-aligned arena aligns them all */
    if (run == NULL || ((uintptr_t)arena->buf & 3u) != 0u) {
        return PE_ERR_ARG;
    }
    ctx.buf = op->scratch_size > 0 ? (int8_t *)arena->buf + op->scratch_offset : NULL;
    ctx.size = op->scratch_size;
    ctx.stats = arena->stats;
#else
    if (run == NULL || !io_lists_ok(g, op)) {
        return PE_ERR_ARG;
    }
    if (is_legacy(op->type) && (op->num_inputs > LEGACY_MAX_INPUTS || op->num_outputs != 1)) {
        return PE_ERR_ARG;
    }
    ctx.buf = NULL;
    ctx.size = 0;
    ctx.stats = arena->stats;
    if (op->scratch_size > 0) {
        if (!scratch_ok(g, op, arena->size)) {
            return PE_ERR_ARG;
        }
        ctx.buf = (int8_t *)arena->buf + op->scratch_offset;
        ctx.size = op->scratch_size;
    } else if (op->scratch_size < 0) {
        return PE_ERR_ARG;
    }
#endif
    if (rows != NULL && op->type == PE_GOP_STRIPE_REGION) {
        return pe_graph_run_stripe_region_rows(g, op, &ctx, arena, rows);
    }
    return run(g, op, &ctx, arena);
}

pe_status pe_graph_invoke_op(const pe_graph *g, int32_t i, const pe_context *arena)
{
    return invoke_op(g, i, arena, NULL);
}

pe_status pe_graph_invoke_op_rows(const pe_graph *g, int32_t i, const pe_context *arena,
                                  const pe_row_source *rows)
{
    if (rows != NULL && rows->read == NULL) {
        return PE_ERR_ARG;
    }
    return invoke_op(g, i, arena, rows);
}

pe_status pe_graph_invoke_rows(const pe_graph *g, const pe_context *arena, const pe_row_source *rows)
{
    int32_t i;
    if (g == NULL) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < g->num_ops; i++) {
        const pe_status st = pe_graph_invoke_op_rows(g, i, arena, rows);
        if (st != PE_OK) {
            return st;
        }
    }
    return PE_OK;
}

pe_status pe_graph_invoke(const pe_graph *g, const pe_context *arena)
{
    return pe_graph_invoke_rows(g, arena, NULL);
}
