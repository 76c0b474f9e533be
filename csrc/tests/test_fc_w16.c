/* test_fc_w16.c - the int16-weight fully connected kernel (pe_fc_w16_*)
 * and the counts-based entry pe_fully_connected_s8_flat: the bytes of
 * pe_fully_connected_s8 on pseudo-random layers (buffers of exactly the
 * queried sizes, so the sanitizers see any overrun), and their status
 * codes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pe_test.h"
#include "pyembed/pe_fc.h"

static uint32_t rng_state = 12345u;

static int32_t rnd(int32_t lo, int32_t hi) /* [lo, hi] */
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return lo + (int32_t)((rng_state >> 8) % (uint32_t)(hi - lo + 1));
}

static void one_layer(int32_t batches, int32_t depth, int32_t features, int32_t fo,
                      int32_t per_channel, int32_t rounding)
{
    pe_dims in = {batches, 1, 1, depth}, f = {features, 1, 1, depth};
    pe_dims out = {batches, 1, 1, features};
    pe_fc_params p;
    pe_per_channel_quant q;
    pe_stats stats;
    pe_context ctx;
    int8_t *x = malloc((size_t)(batches * depth)), *w = malloc((size_t)(features * depth));
    int8_t *o8 = malloc((size_t)(batches * features)), *o16 = malloc((size_t)(batches * features));
    int32_t *bias = malloc((size_t)features * 4u), *mult = malloc((size_t)features * 4u);
    int32_t *shift = malloc((size_t)features * 4u);
    int32_t pbytes = 0, sbytes = 0, i;
    int16_t *packed;
    uint8_t *scratch;
    for (i = 0; i < batches * depth; i++) {
        x[i] = (int8_t)rnd(-128, 127);
    }
    for (i = 0; i < features * depth; i++) {
        w[i] = (int8_t)rnd(-128, 127);
    }
    for (i = 0; i < features; i++) {
        bias[i] = rnd(-20000, 20000);
        mult[i] = rnd(1 << 30, 0x7FFFFFFF);
        shift[i] = rnd(-14, 3);
    }
    if (features > 1) {
        bias[1] = (1 << 30) - 5; /* beyond the SMMULR requantization's bound */
    }
    memset(&p, 0, sizeof(p));
    p.input_offset = rnd(-255, 255);
    p.filter_offset = fo;
    p.output_offset = rnd(-128, 127);
    p.per_channel = per_channel;
    p.activation.min = -100;
    p.activation.max = 120;
    p.rounding = (pe_rounding)rounding;
    q.multiplier = mult;
    q.shift = shift;
    PE_CHECK_EQ(pe_fully_connected_s8(NULL, &p, &q, &in, x, &f, w, bias, &out, o8), PE_OK);
    memset(o16, 0, (size_t)(batches * features));
    memset(&stats, 0, sizeof(stats));
    ctx.buf = NULL;
    ctx.size = 0;
    ctx.stats = &stats;
    PE_CHECK_EQ(pe_fully_connected_s8_flat(&ctx, &p, &q, batches, depth, features, x, w, bias, o16),
                PE_OK);
    PE_CHECK(memcmp(o8, o16, (size_t)(batches * features)) == 0);
    PE_CHECK_EQ(stats.macs, (uint64_t)batches * (uint64_t)depth * (uint64_t)features);
    PE_CHECK_EQ(pe_fc_w16_get_buffer_sizes(&f, &pbytes, &sbytes), PE_OK);
    PE_CHECK_EQ(pbytes, ((features + 3) / 4) * 4 * ((depth + 3) / 4) * 4 * 2);
    packed = malloc((size_t)pbytes);
    scratch = malloc((size_t)sbytes);
    PE_CHECK_EQ(pe_fc_w16_pack(&f, w, fo, packed, pbytes), PE_OK);
    memset(&stats, 0, sizeof(stats));
    ctx.buf = scratch;
    ctx.size = sbytes;
    ctx.stats = &stats;
    PE_CHECK_EQ(pe_fully_connected_w16_s8(&ctx, &p, &q, &in, x, &f, packed, bias, &out, o16),
                PE_OK);
    PE_CHECK(memcmp(o8, o16, (size_t)(batches * features)) == 0);
    PE_CHECK_EQ(stats.macs, (uint64_t)batches * (uint64_t)depth * (uint64_t)features);
    /* the scratch one byte short (at an odd address) */
    ctx.buf = scratch + 1;
    ctx.size = sbytes - 1;
    PE_CHECK_EQ(pe_fully_connected_w16_s8(&ctx, &p, &q, &in, x, &f, packed, bias, &out, o16),
                PE_ERR_SCRATCH); /* one byte short of the query */
    {
        uint8_t *wide = malloc((size_t)sbytes + 1u);
        ctx.buf = wide + 1; /* an odd address: aligned inside the queried size */
        ctx.size = sbytes;
        memset(o16, 0, (size_t)(batches * features));
        PE_CHECK_EQ(pe_fully_connected_w16_s8(&ctx, &p, &q, &in, x, &f, packed, bias, &out, o16),
                    PE_OK);
        PE_CHECK(memcmp(o8, o16, (size_t)(batches * features)) == 0);
        free(wide);
    }
    free(x);
    free(w);
    free(o8);
    free(o16);
    free(bias);
    free(mult);
    free(shift);
    free(packed);
    free(scratch);
}

static void statuses(void)
{
    pe_dims in = {1, 1, 1, 6}, f = {5, 1, 1, 6}, out = {1, 1, 1, 5}, big = {2, 1, 1, 40000};
    pe_fc_params p;
    pe_per_channel_quant q;
    int32_t mult[5] = {1 << 30, 1 << 30, 1 << 30, 1 << 30, 1 << 30}, shift[5] = {-3, -3, -3, -3, -3};
    int8_t x[6] = {1, 2, 3, 4, 5, 6}, w[30] = {0}, o[5];
    int32_t packed_words[33], sbuf[32], pbytes = 0, sbytes = 0;
    int16_t *packed = (int16_t *)(void *)packed_words;
    pe_context ctx;
    memset(&p, 0, sizeof(p));
    p.per_channel = 1;
    p.activation.min = -128;
    p.activation.max = 127;
    q.multiplier = mult;
    q.shift = shift;
    PE_CHECK_EQ(pe_fc_w16_get_buffer_sizes(&f, &pbytes, &sbytes), PE_OK);
    PE_CHECK_EQ(pbytes, 8 * 8 * 2); /* round4(5) * round4(6) * 2 */
    PE_CHECK_EQ(sbytes, 8 * 2 + 8 * 4 + 3);
    PE_CHECK_EQ(pe_fc_w16_get_buffer_sizes(NULL, &pbytes, &sbytes), PE_ERR_ARG);
    PE_CHECK_EQ(pe_fc_w16_get_buffer_sizes(&big, &pbytes, &sbytes), PE_ERR_UNSUPPORTED);
    PE_CHECK_EQ(pe_fc_w16_pack(&f, w, 0, packed, 127), PE_ERR_SCRATCH);
    PE_CHECK_EQ(pe_fc_w16_pack(&f, w, 256, packed, 128), PE_ERR_ARG);
    PE_CHECK_EQ(pe_fc_w16_pack(&f, w, 0, packed + 1, 128), PE_ERR_ARG); /* not 4-byte aligned */
    PE_CHECK_EQ(pe_fc_w16_pack(&f, NULL, 0, packed, 128), PE_ERR_ARG);
    PE_CHECK_EQ(pe_fc_w16_pack(&f, w, 0, packed, 128), PE_OK);
    ctx.buf = sbuf;
    ctx.size = sbytes;
    ctx.stats = NULL;
    PE_CHECK_EQ(pe_fully_connected_w16_s8(&ctx, &p, &q, &in, x, &f, packed, NULL, &out, o), PE_OK);
    PE_CHECK_EQ(pe_fully_connected_w16_s8(NULL, &p, &q, &in, x, &f, packed, NULL, &out, o),
                PE_ERR_SCRATCH);
    ctx.size = sbytes - 1;
    PE_CHECK_EQ(pe_fully_connected_w16_s8(&ctx, &p, &q, &in, x, &f, packed, NULL, &out, o),
                PE_ERR_SCRATCH);
    ctx.size = sbytes;
    PE_CHECK_EQ(pe_fully_connected_w16_s8(&ctx, &p, &q, &in, x, &f, packed + 1, NULL, &out, o),
                PE_ERR_ARG);
    out.c = 4;
    PE_CHECK_EQ(pe_fully_connected_w16_s8(&ctx, &p, &q, &in, x, &f, packed, NULL, &out, o),
                PE_ERR_ARG);
    /* the counts-based entry: 1 x 6 -> 5 */
    PE_CHECK_EQ(pe_fully_connected_s8_flat(NULL, &p, &q, 1, 6, 5, x, w, NULL, o), PE_OK);
    PE_CHECK_EQ(pe_fully_connected_s8_flat(NULL, NULL, &q, 1, 6, 5, x, w, NULL, o), PE_ERR_ARG);
    PE_CHECK_EQ(pe_fully_connected_s8_flat(NULL, &p, NULL, 1, 6, 5, x, w, NULL, o), PE_ERR_ARG);
    PE_CHECK_EQ(pe_fully_connected_s8_flat(NULL, &p, &q, 1, 6, 5, NULL, w, NULL, o), PE_ERR_ARG);
    PE_CHECK_EQ(pe_fully_connected_s8_flat(NULL, &p, &q, 1, 6, 5, x, NULL, NULL, o), PE_ERR_ARG);
    PE_CHECK_EQ(pe_fully_connected_s8_flat(NULL, &p, &q, 1, 6, 5, x, w, NULL, NULL), PE_ERR_ARG);
    PE_CHECK_EQ(pe_fully_connected_s8_flat(NULL, &p, &q, 0, 6, 5, x, w, NULL, o), PE_ERR_ARG);
    PE_CHECK_EQ(pe_fully_connected_s8_flat(NULL, &p, &q, 1, 0, 5, x, w, NULL, o), PE_ERR_ARG);
    PE_CHECK_EQ(pe_fully_connected_s8_flat(NULL, &p, &q, 1, 6, -1, x, w, NULL, o), PE_ERR_ARG);
    PE_CHECK_EQ(pe_fully_connected_s8_flat(NULL, &p, &q, 1, PE_FC_MAX_DEPTH + 1, 5, x, w, NULL, o),
                PE_ERR_UNSUPPORTED);
    p.input_offset = 256;
    PE_CHECK_EQ(pe_fully_connected_s8_flat(NULL, &p, &q, 1, 6, 5, x, w, NULL, o), PE_ERR_ARG);
    p.input_offset = 0;
    shift[4] = 31; /* a quant entry out of range (per channel: all five read) */
    PE_CHECK_EQ(pe_fully_connected_s8_flat(NULL, &p, &q, 1, 6, 5, x, w, NULL, o), PE_ERR_ARG);
}

int main(void)
{
    one_layer(1, 64, 16, 0, 1, 0);
    one_layer(2, 37, 11, 0, 1, 0);
    one_layer(3, 129, 9, 7, 0, 1);
    one_layer(1, 1, 1, -255, 1, 0);
    one_layer(2, 3, 6, 255, 1, 0);
    one_layer(1, 7400, 5, 0, 1, 0);
    statuses();
    return PE_TEST_END("test_fc_w16");
}
