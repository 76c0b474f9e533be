/*
 * pe_pipeline.c - the compiler pipeline's operators (see pe_pipeline.h): a
 * stripe region decoded from int32 words into a pe_stripe_layer table held
 * in the operator's scratch, and a fused conv -> pool pair.
 */
#include <stddef.h>
#include <stdint.h>

#include "pyembed/pe_pipeline.h"
#include "pyembed/pe_fused.h"
#include "pyembed/pe_fixed.h"

#define PIPE_ALIGN 8

static int32_t align8(int32_t v)
{
    return (v + PIPE_ALIGN - 1) / PIPE_ALIGN * PIPE_ALIGN;
}

int32_t pe_stripe_region_table_bytes(int32_t n_layers)
{
    if (n_layers < 0 || n_layers > PE_STRIPE_MAX_LAYERS) {
        return 0;
    }
    return align8(n_layers * (int32_t)sizeof(pe_stripe_layer));
}

static int in_range(int32_t v, int32_t lo, int32_t hi)
{
    return v >= lo && v <= hi;
}

/* Weight element count of a conv-family layer (0 if the layer has none). */
static int64_t weight_count(const pe_stripe_layer *l)
{
    switch (l->op) {
    case PE_STRIPE_CONV:
        return (int64_t)l->out_c * l->kernel.h * l->kernel.w * (l->in_c / l->groups);
    case PE_STRIPE_DEPTHWISE:
        return (int64_t)l->kernel.h * l->kernel.w * l->out_c;
    case PE_STRIPE_POINTWISE:
        return (int64_t)l->out_c * l->in_c;
    default:
        return 0;
    }
}

/* A table layer: word 17 its table count (1 or in_c), word 27 the slot of
 * its 256 * count int8 values, words 28..30 -1. */
static pe_status decode_table(const int32_t *w, pe_const_lookup lookup, const void *user,
                              pe_stripe_layer *l)
{
    if ((w[17] != 1 && w[17] != l->in_c) || w[28] != -1 || w[29] != -1 || w[30] != -1 ||
        lookup == NULL || l->in_c > (1 << 20)) {
        return PE_ERR_ARG;
    }
    l->table_channels = w[17];
    l->add.from_layer = 0;
    l->table = (const int8_t *)lookup(user, w[27], 1, 256 * l->table_channels);
    return l->table != NULL ? PE_OK : PE_ERR_ARG;
}

static pe_status decode_layer(const int32_t *w, pe_const_lookup lookup, const void *user,
                              pe_stripe_layer *l)
{
    int64_t nw;
    int is_conv;
    if (!in_range(w[0], PE_STRIPE_CONV, PE_STRIPE_CROP) || !in_range(w[15], 0, 1) ||
        !in_range(w[16], PE_POOL_MAX, PE_POOL_AVG)) {
        return PE_ERR_ARG;
    }
    if (!in_range(w[1], 1, 1 << 20) || !in_range(w[2], 1, 1 << 20)) {
        return PE_ERR_ARG;
    }
    l->op = (pe_stripe_op)w[0];
    l->in_c = w[1];
    l->out_c = w[2];
    l->kernel.h = w[3];
    l->kernel.w = w[4];
    l->stride.h = w[5];
    l->stride.w = w[6];
    l->padding.top = w[7];
    l->padding.bottom = w[8];
    l->padding.left = w[9];
    l->padding.right = w[10];
    l->input_offset = w[11];
    l->output_offset = w[12];
    l->activation.min = w[13];
    l->activation.max = w[14];
    l->rounding = (pe_rounding)w[15];
    l->pool_kind = (pe_pool_kind)w[16];
    l->add.from_layer = w[17];
    l->add.left_shift = w[18];
    l->add.main_offset = w[19];
    l->add.main_quant.multiplier = w[20];
    l->add.main_quant.shift = w[21];
    l->add.branch_offset = w[22];
    l->add.branch_quant.multiplier = w[23];
    l->add.branch_quant.shift = w[24];
    l->add.out_quant.multiplier = w[25];
    l->add.out_quant.shift = w[26];
    l->dilation.h = 0;
    l->dilation.w = 0;
    if (w[31] != 0) {
        /* dilation.h * 256 + dilation.w, each 1..255, conv and depthwise only */
        if ((l->op != PE_STRIPE_CONV && l->op != PE_STRIPE_DEPTHWISE) || !in_range(w[31], 257, 65535) ||
            w[31] % 256 == 0) {
            return PE_ERR_ARG;
        }
        l->dilation.h = w[31] / 256;
        l->dilation.w = w[31] % 256;
    }
    l->groups = 1;
    if (l->op == PE_STRIPE_CONV) {
        /* word 17: the groups (0 or 1: one), dividing both channel counts */
        if (w[17] > 1) {
            if (w[17] > l->in_c || l->in_c % w[17] != 0 || l->out_c % w[17] != 0) {
                return PE_ERR_ARG;
            }
            l->groups = w[17];
        } else if (w[17] < 0) {
            return PE_ERR_ARG;
        }
        l->add.from_layer = 0;
    }
    l->weights = NULL;
    l->bias = NULL;
    l->quant.multiplier = NULL;
    l->quant.shift = NULL;
    l->table = NULL;
    l->table_channels = 0;
    if (l->op == PE_STRIPE_RESIZE_BILINEAR && !in_range(w[18], 0, 2)) {
        return PE_ERR_ARG; /* word 18: bit 0 align_corners, bit 1 half_pixel_centers */
    }
    if (l->op == PE_STRIPE_TABLE) {
        return decode_table(w, lookup, user, l);
    }
    is_conv = l->op == PE_STRIPE_CONV || l->op == PE_STRIPE_DEPTHWISE || l->op == PE_STRIPE_POINTWISE;
    if (!is_conv) {
        return (w[27] == -1 && w[28] == -1 && w[29] == -1 && w[30] == -1) ? PE_OK : PE_ERR_ARG;
    }
    if (l->kernel.h < 1 || l->kernel.w < 1 || l->kernel.h > PE_STRIPE_MAX_KERNEL ||
        l->kernel.w > PE_STRIPE_MAX_KERNEL) {
        return PE_ERR_ARG;
    }
    if (l->op == PE_STRIPE_POINTWISE) {
        l->kernel.h = 1;
        l->kernel.w = 1;
    }
    nw = weight_count(l);
    if (nw < 1 || nw > PE_INT32_MAX || lookup == NULL) {
        return PE_ERR_ARG;
    }
    l->weights = (const int8_t *)lookup(user, w[27], 1, (int32_t)nw);
    l->quant.multiplier = (const int32_t *)lookup(user, w[29], 4, l->out_c);
    l->quant.shift = (const int32_t *)lookup(user, w[30], 4, l->out_c);
    if (l->weights == NULL || l->quant.multiplier == NULL || l->quant.shift == NULL) {
        return PE_ERR_ARG;
    }
    if (w[28] != -1) {
        l->bias = (const int32_t *)lookup(user, w[28], 4, l->out_c);
        if (l->bias == NULL) {
            return PE_ERR_ARG;
        }
    }
    return PE_OK;
}

pe_status pe_stripe_region_decode(const int32_t *params, int32_t num_params, pe_const_lookup lookup,
                                  const void *user, pe_stripe_layer *layers, int32_t max_layers,
                                  int32_t *n_layers, int32_t *stripe_w, int32_t *block_w,
                                  int32_t *flags)
{
    int32_t n, i;
    pe_status s;
    if (params == NULL || layers == NULL || n_layers == NULL || stripe_w == NULL ||
        block_w == NULL || flags == NULL || num_params < PE_STRIPE_REGION_HEADER_WORDS) {
        return PE_ERR_ARG;
    }
    n = params[1];
    if (params[0] != PE_STRIPE_REGION_VERSION || n < 1 || n > PE_STRIPE_MAX_LAYERS || n > max_layers ||
        params[2] < 1 || params[3] < 1 || (params[4] & ~(PE_STRIPE_REGION_STREAMED | PE_STRIPE_REGION_STREAMED_OUT | PE_STRIPE_REGION_SPLIT)) != 0) {
        return PE_ERR_ARG;
    }
    if (num_params != PE_STRIPE_REGION_HEADER_WORDS + n * PE_STRIPE_REGION_LAYER_WORDS) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < n; i++) {
        s = decode_layer(params + PE_STRIPE_REGION_HEADER_WORDS + i * PE_STRIPE_REGION_LAYER_WORDS,
                         lookup, user, &layers[i]);
        if (s != PE_OK) {
            return s;
        }
    }
    *n_layers = n;
    *stripe_w = params[2];
    *block_w = params[3];
    *flags = params[4];
    return PE_OK;
}

pe_status pe_stripe_region_get_buffer_size(const int32_t *params, int32_t num_params,
                                           pe_const_lookup lookup, const void *user,
                                           const pe_dims *input_dims, int32_t *size)
{
    pe_stripe_layer layers[PE_STRIPE_MAX_LAYERS];
    pe_stripe_net net;
    int32_t n, sw, bw, flags, arena, table;
    pe_status s;
    if (input_dims == NULL || size == NULL) {
        return PE_ERR_ARG;
    }
    s = pe_stripe_region_decode(params, num_params, lookup, user, layers, PE_STRIPE_MAX_LAYERS, &n,
                                &sw, &bw, &flags);
    if (s != PE_OK) {
        return s;
    }
    net.layers = layers;
    net.n_layers = n;
    net.input = *input_dims;
    /* the flag bits are the executor's PE_STRIPE_STREAM_IN / _OUT */
    if (flags & PE_STRIPE_REGION_SPLIT) {
        int32_t lines;
        s = pe_stripe_get_buffer_sizes_split_s8(&net, sw, bw, flags & ~PE_STRIPE_REGION_SPLIT, &arena, &lines);
    } else {
        s = pe_stripe_get_buffer_size_io_s8(&net, sw, bw, flags, &arena);
    }
    if (s != PE_OK) {
        return s;
    }
    table = pe_stripe_region_table_bytes(n);
    if (arena > PE_INT32_MAX - table - PIPE_ALIGN) {
        return PE_ERR_OVERFLOW;
    }
    *size = table + arena;
    return PE_OK;
}

static pe_status region_run(const pe_context *ctx, const int32_t *params, int32_t num_params,
                            pe_const_lookup lookup, const void *user, const pe_dims *input_dims,
                            const int8_t *input, const pe_row_source *rows, const pe_dims *output_dims,
                            int8_t *output, const pe_row_sink *sink, const pe_context *lines)
{
    pe_stripe_layer *layers;
    pe_stripe_net net;
    pe_context sub;
    int32_t n, sw, bw, flags, table;
    pe_status s;
    if (ctx == NULL || params == NULL || num_params < PE_STRIPE_REGION_HEADER_WORDS ||
        input_dims == NULL || output_dims == NULL || (input == NULL && rows == NULL) ||
        (output == NULL && sink == NULL)) {
        return PE_ERR_ARG;
    }
    n = params[1];
    if (n < 1 || n > PE_STRIPE_MAX_LAYERS) {
        return PE_ERR_ARG;
    }
    table = pe_stripe_region_table_bytes(n);
    if (ctx->buf == NULL || ctx->size < table || ((uintptr_t)ctx->buf & (PIPE_ALIGN - 1)) != 0u) {
        return PE_ERR_SCRATCH;
    }
    layers = (pe_stripe_layer *)ctx->buf;
    s = pe_stripe_region_decode(params, num_params, lookup, user, layers, n, &n, &sw, &bw, &flags);
    if (s != PE_OK) {
        return s;
    }
    if ((rows != NULL && (flags & PE_STRIPE_REGION_STREAMED) == 0) ||
        (sink != NULL && (flags & PE_STRIPE_REGION_STREAMED_OUT) == 0)) {
        return PE_ERR_ARG; /* its scratch has no row buffer */
    }
    if ((lines != NULL) != ((flags & PE_STRIPE_REGION_SPLIT) != 0)) {
        return PE_ERR_ARG; /* the line stores are where the flag says */
    }
    net.layers = layers;
    net.n_layers = n;
    net.input = *input_dims;
    sub.buf = (unsigned char *)ctx->buf + table;
    sub.size = ctx->size - table;
    sub.stats = ctx->stats;
    if (lines != NULL) {
        return pe_stripe_run_split_s8(&sub, lines, &net, sw, bw, input_dims, rows != NULL ? NULL : input, rows,
                                      output_dims, sink != NULL ? NULL : output, sink);
    }
    if (sink != NULL) {
        return pe_stripe_run_io_s8(&sub, &net, sw, bw, input_dims, rows != NULL ? NULL : input, rows, output_dims,
                                   NULL, sink);
    }
    if (rows != NULL) {
        return pe_stripe_run_rows_s8(&sub, &net, sw, bw, rows, output_dims, output);
    }
    return pe_stripe_run_s8(&sub, &net, sw, bw, input_dims, input, output_dims, output);
}

pe_status pe_stripe_region_run(const pe_context *ctx, const int32_t *params, int32_t num_params,
                               pe_const_lookup lookup, const void *user, const pe_dims *input_dims,
                               const int8_t *input, const pe_dims *output_dims, int8_t *output)
{
    if (input == NULL) {
        return PE_ERR_ARG;
    }
    return region_run(ctx, params, num_params, lookup, user, input_dims, input, NULL, output_dims, output, NULL, NULL);
}

pe_status pe_stripe_region_run_rows(const pe_context *ctx, const int32_t *params, int32_t num_params,
                                    pe_const_lookup lookup, const void *user, const pe_dims *input_dims,
                                    const pe_row_source *rows, const pe_dims *output_dims, int8_t *output)
{
    if (rows == NULL || rows->read == NULL) {
        return PE_ERR_ARG;
    }
    return region_run(ctx, params, num_params, lookup, user, input_dims, NULL, rows, output_dims, output, NULL, NULL);
}

pe_status pe_stripe_region_run_io(const pe_context *ctx, const int32_t *params, int32_t num_params,
                                  pe_const_lookup lookup, const void *user, const pe_dims *input_dims,
                                  const int8_t *input, const pe_row_source *rows, const pe_dims *output_dims,
                                  int8_t *output, const pe_row_sink *sink)
{
    if ((input == NULL) == (rows == NULL) || (output == NULL) == (sink == NULL) ||
        (rows != NULL && rows->read == NULL) || (sink != NULL && sink->write == NULL)) {
        return PE_ERR_ARG;
    }
    return region_run(ctx, params, num_params, lookup, user, input_dims, input, rows, output_dims, output, sink, NULL);
}

pe_status pe_stripe_region_run_split(const pe_context *ctx, const pe_context *lines, const int32_t *params,
                                     int32_t num_params, pe_const_lookup lookup, const void *user,
                                     const pe_dims *input_dims, const int8_t *input, const pe_row_source *rows,
                                     const pe_dims *output_dims, int8_t *output, const pe_row_sink *sink)
{
    if ((input == NULL) == (rows == NULL) || (output == NULL) == (sink == NULL) ||
        (rows != NULL && rows->read == NULL) || (sink != NULL && sink->write == NULL)) {
        return PE_ERR_ARG;
    }
    return region_run(ctx, params, num_params, lookup, user, input_dims, input, rows, output_dims, output, sink,
                      lines);
}

pe_status pe_stripe_region_get_buffer_sizes_split(const int32_t *params, int32_t num_params,
                                                  pe_const_lookup lookup, const void *user,
                                                  const pe_dims *input_dims, int32_t *scratch, int32_t *lines)
{
    pe_stripe_layer layers[PE_STRIPE_MAX_LAYERS];
    pe_stripe_net net;
    int32_t n, sw, bw, flags, arena, table;
    pe_status s;
    if (input_dims == NULL || scratch == NULL || lines == NULL) {
        return PE_ERR_ARG;
    }
    s = pe_stripe_region_decode(params, num_params, lookup, user, layers, PE_STRIPE_MAX_LAYERS, &n, &sw, &bw,
                                &flags);
    if (s != PE_OK) {
        return s;
    }
    if ((flags & PE_STRIPE_REGION_SPLIT) == 0) {
        return PE_ERR_ARG;
    }
    net.layers = layers;
    net.n_layers = n;
    net.input = *input_dims;
    s = pe_stripe_get_buffer_sizes_split_s8(&net, sw, bw, flags & ~PE_STRIPE_REGION_SPLIT, &arena, lines);
    if (s != PE_OK) {
        return s;
    }
    table = pe_stripe_region_table_bytes(n);
    if (arena > PE_INT32_MAX - table - PIPE_ALIGN) {
        return PE_ERR_OVERFLOW;
    }
    *scratch = table + arena;
    return PE_OK;
}

/* ---- fused conv -> pool ---------------------------------------------------------- */

pe_status pe_conv_pool_decode(const int32_t *params, int32_t num_params, pe_conv_params *conv,
                              pe_pool_params *pool, int32_t *conv_out_h, int32_t *conv_out_w)
{
    const int32_t *w = params;
    if (params == NULL || conv == NULL || pool == NULL || conv_out_h == NULL || conv_out_w == NULL ||
        num_params != PE_CONV_POOL_WORDS) {
        return PE_ERR_ARG;
    }
    if (!in_range(w[12], 0, 1) || !in_range(w[15], PE_POOL_MAX, PE_POOL_AVG) || w[13] < 1 ||
        w[14] < 1 || w[26] < 1) {
        return PE_ERR_ARG;
    }
    conv->stride.h = w[0];
    conv->stride.w = w[1];
    conv->padding.top = w[2];
    conv->padding.bottom = w[3];
    conv->padding.left = w[4];
    conv->padding.right = w[5];
    conv->dilation.h = w[6];
    conv->dilation.w = w[7];
    conv->input_offset = w[8];
    conv->output_offset = w[9];
    conv->activation.min = w[10];
    conv->activation.max = w[11];
    conv->rounding = (pe_rounding)w[12];
    conv->groups = w[26];
    conv->ch_mult = 1;
    *conv_out_h = w[13];
    *conv_out_w = w[14];
    pool->kind = (pe_pool_kind)w[15];
    pool->window.h = w[16];
    pool->window.w = w[17];
    pool->stride.h = w[18];
    pool->stride.w = w[19];
    pool->padding.top = w[20];
    pool->padding.bottom = w[21];
    pool->padding.left = w[22];
    pool->padding.right = w[23];
    pool->activation.min = w[24];
    pool->activation.max = w[25];
    pool->sum_quant.multiplier = 0;
    pool->sum_quant.shift = 0;
    pool->output_offset = 0;
    return PE_OK;
}

static pe_status conv_pool_setup(const int32_t *params, int32_t num_params, const pe_dims *input_dims,
                                 const pe_dims *filter_dims, const pe_dims *output_dims,
                                 pe_conv_params *conv, pe_pool_params *pool, pe_dims *conv_out)
{
    int32_t ch, cw;
    pe_status s;
    if (input_dims == NULL || filter_dims == NULL || output_dims == NULL) {
        return PE_ERR_ARG;
    }
    s = pe_conv_pool_decode(params, num_params, conv, pool, &ch, &cw);
    if (s != PE_OK) {
        return s;
    }
    if ((int64_t)filter_dims->c * conv->groups != input_dims->c || filter_dims->n % conv->groups != 0 ||
        output_dims->c != filter_dims->n || output_dims->n != input_dims->n) {
        return PE_ERR_ARG;
    }
    conv_out->n = input_dims->n;
    conv_out->h = ch;
    conv_out->w = cw;
    conv_out->c = filter_dims->n;
    return PE_OK;
}

pe_status pe_conv_pool_op_get_buffer_size(const int32_t *params, int32_t num_params,
                                          const pe_dims *input_dims, const pe_dims *filter_dims,
                                          const pe_dims *output_dims, int32_t *size)
{
    pe_conv_params conv;
    pe_pool_params pool;
    pe_dims co;
    pe_status s = conv_pool_setup(params, num_params, input_dims, filter_dims, output_dims, &conv, &pool,
                                  &co);
    if (s != PE_OK) {
        return s;
    }
    return pe_conv_pool_rev_get_buffer_size(&conv, &pool, input_dims, filter_dims, &co, output_dims, size);
}

pe_status pe_conv_pool_op_run(const pe_context *ctx, const int32_t *params, int32_t num_params,
                              const pe_dims *input_dims, const int8_t *input,
                              const pe_dims *filter_dims, const int8_t *filter, const int32_t *bias,
                              const int32_t *multiplier, const int32_t *shift, const int8_t *table,
                              int32_t table_channels, const pe_dims *output_dims, int8_t *output)
{
    pe_conv_params conv;
    pe_pool_params pool;
    pe_per_channel_quant q;
    pe_dims co;
    pe_status s = conv_pool_setup(params, num_params, input_dims, filter_dims, output_dims, &conv, &pool,
                                  &co);
    if (s != PE_OK) {
        return s;
    }
    if (multiplier == NULL || shift == NULL || filter == NULL) {
        return PE_ERR_ARG;
    }
    q.multiplier = multiplier;
    q.shift = shift;
    return pe_conv_pool_rev_table_s8(ctx, &conv, &q, &pool, input_dims, input, filter_dims, filter, bias,
                                     table, table_channels, &co, output_dims, output);
}
