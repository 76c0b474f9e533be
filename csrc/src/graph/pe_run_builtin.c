/*
 * pe_run_builtin.c - runners of the first twelve operator types, whose
 * parameters are typed (pe_graph_op.p): FULLY_CONNECTED, CONV_2D,
 * DEPTHWISE_CONV_2D, the two pools, SOFTMAX, RESHAPE, ADD, MUL,
 * REQUANTIZE, QUANTIZE, DEQUANTIZE.
 */
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_fc.h"
#include "pyembed/pe_conv.h"
#include "pyembed/pe_conv_gather.h"
#include "pyembed/pe_pool.h"
#include "pyembed/pe_softmax.h"
#include "pyembed/pe_eltwise.h"
#include "pe_graph_access.h"

/* The FULLY_CONNECTED operator's counts from its tensors (filter [O][K]
 * whatever its declared rank: K = its last dim, O = the rest; from the byte
 * sizes of the checked tensors, count * element size == bytes) and the
 * kernel's argument checks on them and on the parameters. */
static pe_status fc_counts(const pe_graph *g, const pe_graph_op *op, int32_t *batches,
                           int32_t *depth, int32_t *features)
{
    const int32_t ti = IN(0), tw = IN(1), tb = IN(2), to = OUT0;
    *depth = g->tensors[tw].dims.c;
    if (*depth <= 0) {
        return PE_ERR_ARG;
    }
    *features = g->tensors[tw].bytes / *depth;
    *batches = g->tensors[ti].bytes / *depth;
    if ((int64_t)*batches * *depth != g->tensors[ti].bytes ||
        (tb != -1 && g->tensors[tb].bytes != 4 * (int64_t)*features) ||
        (op->p.fc.quant.count != 1 && op->p.fc.quant.count != *features) ||
        op->p.fc.params.per_channel != (op->p.fc.quant.count != 1 ? 1 : 0) ||
        (int64_t)*batches * *features != (int64_t)g->tensors[to].bytes) {
        return PE_ERR_ARG;
    }
    return pe_fully_connected_s8_flat_check(&op->p.fc.params, &op->p.fc.quant.quant, *batches,
                                            *depth, *features);
}

pe_status pe_graph_check_fc(const pe_graph *g, const pe_graph_op *op)
{
    int32_t batches, depth, features;
    return fc_counts(g, op, &batches, &depth, &features);
}

pe_status pe_graph_run_fc(const pe_graph *g, const pe_graph_op *op, const pe_context *ctx,
                        const pe_context *arena)
{
    const int32_t tb = IN(2);
    const int8_t *in = (const int8_t *)tensor_in(g, IN(0), arena, PE_DT_INT8);
    const int8_t *w = (const int8_t *)tensor_in(g, IN(1), arena, PE_DT_INT8);
    const int32_t *bias = NULL;
    int8_t *out = (int8_t *)tensor_out(g, OUT0, arena, PE_DT_INT8);
    int32_t depth, features, batches;
    if (in == NULL || w == NULL || out == NULL) {
        return PE_ERR_ARG;
    }
    if (tb != -1) {
        bias = (const int32_t *)tensor_in(g, tb, arena, PE_DT_INT32);
        if (bias == NULL) {
            return PE_ERR_ARG;
        }
    }
#if PE_GRAPH_TRUST_CHECKED
    /* counts and parameters checked once, by pe_graph_check (pe_graph_check_fc):
     * the graph is the build's constant */
    depth = g->tensors[IN(1)].dims.c;
    features = g->tensors[IN(1)].bytes / depth;
    batches = g->tensors[IN(0)].bytes / depth;
#else
    {
        const pe_status st = fc_counts(g, op, &batches, &depth, &features);
        if (st != PE_OK) {
            return st;
        }
    }
#endif
    pe_fully_connected_s8_flat_run(ctx, &op->p.fc.params, &op->p.fc.quant.quant, batches, depth,
                                   features, in, w, bias, out);
    return PE_OK;
}

/* Forms a convolution runner links: the reverse kernels (a scratch region
 * planned) and / or the gather kernels (none planned, pe_conv_gather.h); and
 * the operator types it takes. */
#define CONV_REV 1
#define CONV_GATHER 2
#define CONV_ONLY_2D 4
#define CONV_ONLY_DW 8

/* whether op's scratch region is smaller than its reverse kernel's minimum
 * (a gather work block); a shape the size query refuses counts as not, so
 * the reverse kernel reports it */
static int gather_sized(const pe_graph *g, const pe_graph_op *op)
{
    int32_t need = 0;
    const pe_dims *in = dims_of(g, IN(0)), *f = dims_of(g, IN(1)), *od = dims_of(g, OUT0);
    const pe_status s = op->type == PE_GOP_CONV_2D
                            ? pe_conv2d_rev_s8_get_buffer_size(&op->p.conv.params, in, f, od, &need)
                            : pe_depthwise_conv2d_rev_s8_get_buffer_size(&op->p.conv.params, in, f,
                                                                         od, &need);
    return s == PE_OK && op->scratch_size < need;
}

/* The CONV_2D / DEPTHWISE_CONV_2D runner restricted to the forms in `forms`
 * (and to CONV_2D or DEPTHWISE_CONV_2D alone with CONV_ONLY_2D / CONV_ONLY_DW):
 * an operator of a form or type this build left out is PE_ERR_ARG. A generated operator table picks
 * the narrowest runner its model's operators need, so the linker leaves the
 * other kernels out; the full table uses pe_graph_run_conv (every form). */
static inline __attribute__((always_inline)) pe_status run_conv_forms(const pe_graph *g, const pe_graph_op *op,
                                                                      const pe_context *ctx,
                                                                      const pe_context *arena, const int forms)
{
    const int8_t *in = (const int8_t *)tensor_in(g, IN(0), arena, PE_DT_INT8);
    const int8_t *w = (const int8_t *)tensor_in(g, IN(1), arena, PE_DT_INT8);
    const int32_t *bias = NULL;
    int8_t *out = (int8_t *)tensor_out(g, OUT0, arena, PE_DT_INT8);
    const pe_dims *od;
    /* the type, a constant where forms names one (so the other type's kernels are not called) */
    const int conv2d = (forms & CONV_ONLY_2D) != 0 ? 1 : (forms & CONV_ONLY_DW) != 0 ? 0 : op->type == PE_GOP_CONV_2D;
    if (in == NULL || w == NULL || out == NULL || ((forms & CONV_ONLY_2D) != 0 && op->type != PE_GOP_CONV_2D) ||
        ((forms & CONV_ONLY_DW) != 0 && op->type != PE_GOP_DEPTHWISE_CONV_2D)) {
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
    /* a scratch region below the reverse kernel's minimum (none, or a
     * gather work block): the gather form, which needs none and takes the
     * region as its work block (pe_conv_gather.h); else the reverse kernel
     * in the planned scratch */
    if (op->scratch_size == 0 || gather_sized(g, op)) {
        if ((forms & CONV_GATHER) == 0) {
            return PE_ERR_ARG;
        }
        if (conv2d) {
            return pe_conv2d_gather_s8(ctx, &op->p.conv.params, &op->p.conv.quant.quant,
                                       dims_of(g, op->inputs[0]), in, dims_of(g, op->inputs[1]),
                                       w, bias, od, out);
        }
        return pe_depthwise_conv2d_gather_s8(ctx, &op->p.conv.params, &op->p.conv.quant.quant,
                                             dims_of(g, op->inputs[0]), in,
                                             dims_of(g, op->inputs[1]), w, bias, od, out);
    }
    if ((forms & CONV_REV) == 0) {
        return PE_ERR_ARG;
    }
    if (conv2d) {
        return pe_conv2d_rev_s8(ctx, &op->p.conv.params, &op->p.conv.quant.quant,
                                dims_of(g, IN(0)), in, dims_of(g, IN(1)), w, bias, od,
                                out);
    }
    return pe_depthwise_conv2d_rev_s8(ctx, &op->p.conv.params, &op->p.conv.quant.quant,
                                      dims_of(g, IN(0)), in, dims_of(g, IN(1)), w,
                                      bias, od, out);
}

/* a DEPTHWISE_CONV_2D of a one-channel input in the gather form (no scratch) */
static int is_c1(const pe_graph *g, const pe_graph_op *op)
{
    return op->type == PE_GOP_DEPTHWISE_CONV_2D && op->scratch_size == 0 && op->num_inputs > 0 &&
           (uint32_t)IN(0) < (uint32_t)g->num_tensors && dims_of(g, IN(0))->c == 1;
}

pe_status pe_graph_run_conv(const pe_graph *g, const pe_graph_op *op, const pe_context *ctx,
                            const pe_context *arena)
{
    /* one input channel, gathered: the kernel made for it (same bytes, same
     * raster pixel order, fewer instructions on the DSP build) */
    if (is_c1(g, op)) {
        return pe_graph_run_dwconv_c1(g, op, ctx, arena);
    }
    return run_conv_forms(g, op, ctx, arena, CONV_REV | CONV_GATHER);
}

pe_status pe_graph_run_conv_no_c1(const pe_graph *g, const pe_graph_op *op, const pe_context *ctx,
                                  const pe_context *arena)
{
    return run_conv_forms(g, op, ctx, arena, CONV_REV | CONV_GATHER);
}

pe_status pe_graph_run_conv2d_both(const pe_graph *g, const pe_graph_op *op, const pe_context *ctx,
                                   const pe_context *arena)
{
    return run_conv_forms(g, op, ctx, arena, CONV_REV | CONV_GATHER | CONV_ONLY_2D);
}

pe_status pe_graph_run_dwconv_both(const pe_graph *g, const pe_graph_op *op, const pe_context *ctx,
                                   const pe_context *arena)
{
    return run_conv_forms(g, op, ctx, arena, CONV_REV | CONV_GATHER | CONV_ONLY_DW);
}

pe_status pe_graph_run_conv2d_rev(const pe_graph *g, const pe_graph_op *op, const pe_context *ctx,
                                  const pe_context *arena)
{
    return run_conv_forms(g, op, ctx, arena, CONV_REV | CONV_ONLY_2D);
}

pe_status pe_graph_run_conv2d_gather(const pe_graph *g, const pe_graph_op *op, const pe_context *ctx,
                                     const pe_context *arena)
{
    return run_conv_forms(g, op, ctx, arena, CONV_GATHER | CONV_ONLY_2D);
}

pe_status pe_graph_run_dwconv_rev(const pe_graph *g, const pe_graph_op *op, const pe_context *ctx,
                                  const pe_context *arena)
{
    return run_conv_forms(g, op, ctx, arena, CONV_REV | CONV_ONLY_DW);
}

pe_status pe_graph_run_dwconv_gather(const pe_graph *g, const pe_graph_op *op, const pe_context *ctx,
                                     const pe_context *arena)
{
    return run_conv_forms(g, op, ctx, arena, CONV_GATHER | CONV_ONLY_DW);
}

pe_status pe_graph_run_dwconv_gather_c1(const pe_graph *g, const pe_graph_op *op, const pe_context *ctx,
                                        const pe_context *arena)
{
    if (is_c1(g, op)) {
        return pe_graph_run_dwconv_c1(g, op, ctx, arena);
    }
    return run_conv_forms(g, op, ctx, arena, CONV_GATHER | CONV_ONLY_DW);
}

pe_status pe_graph_run_dwconv_c1(const pe_graph *g, const pe_graph_op *op, const pe_context *ctx,
                                 const pe_context *arena)
{
    const int8_t *in = (const int8_t *)tensor_in(g, IN(0), arena, PE_DT_INT8);
    const int8_t *w = (const int8_t *)tensor_in(g, IN(1), arena, PE_DT_INT8);
    const int32_t *bias = NULL;
    int8_t *out = (int8_t *)tensor_out(g, OUT0, arena, PE_DT_INT8);
    const pe_dims *od;
    /* the gather form only (no scratch region): the reverse form's plans may
     * place the output over input rows the raster order still reads */
    if (in == NULL || w == NULL || out == NULL || op->type != PE_GOP_DEPTHWISE_CONV_2D ||
        op->scratch_size != 0) {
        return PE_ERR_ARG;
    }
    od = dims_of(g, OUT0);
    if (IN(2) != -1) {
        bias = (const int32_t *)tensor_in(g, IN(2), arena, PE_DT_INT32);
        if (bias == NULL || count_of(g, IN(2)) != od->c) {
            return PE_ERR_ARG;
        }
    }
    if (op->p.conv.quant.count != od->c) {
        return PE_ERR_ARG;
    }
    return pe_depthwise_conv2d_c1_s8(ctx, &op->p.conv.params, &op->p.conv.quant.quant,
                                     dims_of(g, IN(0)), in, dims_of(g, IN(1)), w, bias, od, out);
}

pe_status pe_graph_run_pool(const pe_graph *g, const pe_graph_op *op, const pe_context *ctx,
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
    /* planned without a scratch region: the gather form (same bytes, no ring;
     * pyembed.model.conv_form picks it when the ring would raise the arena) */
    if (op->scratch_size == 0) {
        return pe_pool_gather_s8(ctx, &params, dims_of(g, IN(0)), in, dims_of(g, OUT0), out);
    }
    return pe_pool_rev_s8(ctx, &params, dims_of(g, IN(0)), in, dims_of(g, OUT0), out);
}

pe_status pe_graph_run_softmax(const pe_graph *g, const pe_graph_op *op, const pe_context *ctx,
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

pe_status pe_graph_run_reshape(const pe_graph *g, const pe_graph_op *op, const pe_context *ctx,
                             const pe_context *arena)
{
    const pe_graph_tensor *src_t;
    const uint8_t *src;
    uint8_t *dst;
    int32_t i, n;
    (void)ctx;
    if (!tensor_valid(g, IN(0), arena->size) || !tensor_valid(g, OUT0, arena->size)) {
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

pe_status pe_graph_run_binary(const pe_graph *g, const pe_graph_op *op, const pe_context *ctx,
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

pe_status pe_graph_run_unary(const pe_graph *g, const pe_graph_op *op, const pe_context *ctx,
                           const pe_context *arena)
{
    int32_t n;
    /* indices checked before their dims are read */
    if (!tensor_valid(g, IN(0), arena->size) || !tensor_valid(g, OUT0, arena->size)) {
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