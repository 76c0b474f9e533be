/*
 * pe_fc_w4.c - int8 fully connected from packed int4 weights (pe_fc_w4.h):
 * tiles of the filter unpacked into the scratch, then the int8 dot products
 * and requantization of pe_fc.c on them.
 */
#include "pyembed/pe_fc_w4.h"
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_simd.h"

static int32_t w4_min(int32_t a, int32_t b)
{
    return a < b ? a : b;
}

/* a two's complement nibble (the low four bits of v) as -8..7 */
static int8_t w4_nibble(uint32_t v)
{
    return (int8_t)((int32_t)((v & 15u) ^ 8u) - 8);
}

pe_status pe_fc_w4_get_buffer_sizes(const pe_dims *filter_dims, int32_t *packed_bytes,
                                    int32_t *scratch_bytes)
{
    int64_t count;
    int32_t rows, slice;
    if (filter_dims == NULL || packed_bytes == NULL || scratch_bytes == NULL ||
        filter_dims->n <= 0 || filter_dims->c <= 0 || filter_dims->h != 1 || filter_dims->w != 1) {
        return PE_ERR_ARG;
    }
    if (filter_dims->c > PE_FC_MAX_DEPTH) {
        return PE_ERR_UNSUPPORTED;
    }
    count = (int64_t)filter_dims->n * filter_dims->c;
    if (count > INT32_MAX) {
        return PE_ERR_OVERFLOW;
    }
    rows = w4_min(filter_dims->n, PE_FC_W4_ROWS);
    slice = w4_min(filter_dims->c, PE_FC_W4_SLICE);
    *packed_bytes = (int32_t)((count + 1) / 2);
    *scratch_bytes = 4 * rows + rows * slice + 3;
    return PE_OK;
}

pe_status pe_fc_w4_pack(const int8_t *values, int32_t count, uint8_t *packed, int32_t packed_bytes)
{
    int32_t i;
    if (values == NULL || packed == NULL || count <= 0) {
        return PE_ERR_ARG;
    }
    if (packed_bytes < count / 2 + (count & 1)) {
        return PE_ERR_SCRATCH;
    }
    for (i = 0; i < count; i++) {
        if (values[i] < -8 || values[i] > 7) {
            return PE_ERR_ARG;
        }
    }
    for (i = 0; i + 1 < count; i += 2) {
        packed[i / 2] = (uint8_t)(((uint32_t)values[i] & 15u) | (((uint32_t)values[i + 1] & 15u) << 4));
    }
    if (count & 1) {
        packed[count / 2] = (uint8_t)((uint32_t)values[count - 1] & 15u);
    }
    return PE_OK;
}

void pe_fc_w4_unpack(const uint8_t *restrict packed, int32_t first, int32_t n, int8_t *restrict dst)
{
    const uint8_t *p = packed + first / 2;
    int32_t i = 0;
    if (n <= 0) {
        return;
    }
    if (first & 1) { /* starts on a high nibble */
        dst[i++] = w4_nibble((uint32_t)*p++ >> 4);
    }
    /* four values from two bytes in word operations: the bytes spread to
     * bits 0-7 and 16-23, each nibble moved to its own byte, then every byte
     * v (0..15) sign-extended at once as ((v ^ 8) - 8) mod 256 (the 0x80 bits
     * keep the per-byte subtractions from borrowing across bytes) */
    for (; i + 4 <= n; i += 4, p += 2) {
        uint32_t x = (uint32_t)p[0] | ((uint32_t)p[1] << 16);
        x = (x | (x << 4)) & 0x0F0F0F0Fu;
        x = (((x ^ 0x08080808u) | 0x80808080u) - 0x08080808u) ^ 0x80808080u;
        dst[i] = (int8_t)(uint8_t)x;
        dst[i + 1] = (int8_t)(uint8_t)(x >> 8);
        dst[i + 2] = (int8_t)(uint8_t)(x >> 16);
        dst[i + 3] = (int8_t)(uint8_t)(x >> 24);
    }
    for (; i + 2 <= n; i += 2) {
        const uint32_t b = *p++;
        dst[i] = w4_nibble(b);
        dst[i + 1] = w4_nibble(b >> 4);
    }
    if (i < n) {
        dst[i] = w4_nibble(*p);
    }
}

/* rows o0 .. o0 + n - 1, depth elements k0 .. k0 + s - 1, into tile[j * s + k] */
static void w4_tile(const uint8_t *packed, int32_t depth, int32_t o0, int32_t n, int32_t k0,
                    int32_t s, int8_t *tile)
{
    int32_t j;
    for (j = 0; j < n; j++) {
        pe_fc_w4_unpack(packed, (o0 + j) * depth + k0, s, tile + (size_t)j * (size_t)s);
    }
}

#if PE_DSP
/* The DSP path, reading the packed bytes directly (filter offset 0). A word
 * of packed weights holds eight nibbles n0..n7 (n0 the low nibble of byte
 * 0); masking it with 0xF0F0F0F0, as it is and shifted left by four, puts
 * every nibble in the high half of a byte, where SXTB16 (and SXTB16 ROR 8)
 * sign-extends it as 16 * w: (w0, w4), (w2, w6), (w1, w5), (w3, w7) in 2 +
 * 4 instructions for eight weights. The input row is widened once (offset
 * added, int16) in the matching order, [x0 x4 x2 x6 x1 x5 x3 x7] per group
 * of eight, so four SMLAD do the eight MACs. The sums are 16 times the dot
 * product, exactly: |16 * w * (x + offset)| <= 128 * 383 and depth <=
 * PE_FC_MAX_DEPTH keep them in int32, and the shift back by four is exact.
 * A row starting mid-byte (odd row of an odd depth) takes its first value
 * alone and the groups from element 1 (the second widened set); the last
 * depth % 8 values go one by one. */
/* bytes of the DSP path's widened input rows: groups of eight int16 from
 * element 0, and with an odd depth a second set from element 1 */
static int32_t w4_perm_bytes(int32_t depth)
{
    return 16 * (depth / 8) + ((depth & 1) ? 16 * ((depth - 1) / 8) : 0);
}

static void w4_widen(const int8_t *x, int32_t start, int32_t groups, int32_t xo, int16_t *xp)
{
    int32_t g;
    for (g = 0; g < groups; g++, x += 8, xp += 8) {
        const int8_t *v = x + start;
        xp[0] = (int16_t)(v[0] + xo);
        xp[1] = (int16_t)(v[4] + xo);
        xp[2] = (int16_t)(v[2] + xo);
        xp[3] = (int16_t)(v[6] + xo);
        xp[4] = (int16_t)(v[1] + xo);
        xp[5] = (int16_t)(v[5] + xo);
        xp[6] = (int16_t)(v[3] + xo);
        xp[7] = (int16_t)(v[7] + xo);
    }
}

static int32_t w4_row_dsp(const uint8_t *restrict wp, const uint32_t *restrict xp, int32_t groups)
{
    int32_t a = 0, g;
    for (g = 0; g < groups; g++, wp += 4, xp += 4) {
        const uint32_t b = pe_rd32(wp);
        const uint32_t hi = b & 0xF0F0F0F0u, lo = (b << 4) & 0xF0F0F0F0u;
        a = __smlad(__sxtb16(lo), xp[0], a);
        a = __smlad(pe_sxtb16_ror8(lo), xp[1], a);
        a = __smlad(__sxtb16(hi), xp[2], a);
        a = __smlad(pe_sxtb16_ror8(hi), xp[3], a);
    }
    return pe_fx_asr32(a, 4);
}

#define W4_CHUNK 32 /* features per requantization call (int32 dots on the stack) */

static void w4_run_dsp(const pe_fc_params *params, const pe_per_channel_quant *quant, int32_t batches,
                       int32_t depth, int32_t features, const int8_t *input, const uint8_t *packed,
                       const int32_t *bias, int8_t *output, void *buf)
{
    const int32_t xo = params->input_offset, g0 = depth / 8, g1 = (depth & 1) ? (depth - 1) / 8 : 0;
    int16_t *xp0 = (int16_t *)(void *)(((uintptr_t)buf + 3u) & ~(uintptr_t)3u);
    int16_t *xp1 = xp0 + 8 * g0;
    int32_t acc[W4_CHUNK], b, o0, j, k;
    for (b = 0; b < batches; b++) {
        const int8_t *x = input + (size_t)b * (size_t)depth;
        w4_widen(x, 0, g0, xo, xp0);
        w4_widen(x, 1, g1, xo, xp1);
        for (o0 = 0; o0 < features; o0 += W4_CHUNK) {
            const int32_t n = w4_min(W4_CHUNK, features - o0);
            pe_per_channel_quant q;
            for (j = 0; j < n; j++) {
                const int32_t e0 = (o0 + j) * depth, s = e0 & 1, groups = s ? g1 : g0;
                const int16_t *xp = s ? xp1 : xp0;
                int32_t a = w4_row_dsp(packed + (e0 + s) / 2, (const uint32_t *)(const void *)xp, groups);
                if (s) {
                    a += ((int32_t)x[0] + xo) * w4_nibble((uint32_t)packed[e0 / 2] >> 4);
                }
                for (k = s + 8 * groups; k < depth; k++) {
                    const int32_t e = e0 + k;
                    a += ((int32_t)x[k] + xo) * w4_nibble((uint32_t)packed[e / 2] >> ((e & 1) ? 4 : 0));
                }
                acc[j] = a;
            }
            q.multiplier = quant->multiplier + (params->per_channel ? o0 : 0);
            q.shift = quant->shift + (params->per_channel ? o0 : 0);
            pe_fc_s8_finish(params, &q, n, acc, bias != NULL ? bias + o0 : NULL,
                            output + (size_t)b * (size_t)features + (size_t)o0);
        }
    }
}
#endif

pe_status pe_fully_connected_w4_s8(const pe_context *ctx, const pe_fc_params *params,
                                   const pe_per_channel_quant *quant,
                                   const pe_dims *input_dims, const int8_t *input,
                                   const pe_dims *filter_dims, const uint8_t *packed,
                                   const int32_t *bias,
                                   const pe_dims *output_dims, int8_t *output)
{
    int32_t pbytes, sbytes, batches, depth, features, rows, slice, o0, b, k0;
    int64_t in_per_batch;
    int32_t *acc;
    int8_t *tile;
    pe_status st;
    if (ctx == NULL || params == NULL || input_dims == NULL || input == NULL || packed == NULL ||
        output_dims == NULL || output == NULL) {
        return PE_ERR_ARG;
    }
    st = pe_fc_w4_get_buffer_sizes(filter_dims, &pbytes, &sbytes);
    if (st != PE_OK) {
        return st;
    }
    batches = input_dims->n;
    depth = filter_dims->c;
    features = filter_dims->n;
    in_per_batch = (int64_t)input_dims->h * input_dims->w * input_dims->c;
    if (input_dims->n <= 0 || input_dims->h <= 0 || input_dims->w <= 0 || input_dims->c <= 0 ||
        in_per_batch != depth || output_dims->n != batches || output_dims->h != 1 ||
        output_dims->w != 1 || output_dims->c != features) {
        return PE_ERR_ARG;
    }
    st = pe_fully_connected_s8_flat_check(params, quant, batches, depth, features);
    if (st != PE_OK) {
        return st;
    }
    if (ctx->buf == NULL || ctx->size < sbytes) {
        return PE_ERR_SCRATCH;
    }
#if PE_DSP
    if (params->filter_offset == 0 && w4_perm_bytes(depth) + 3 <= sbytes) {
        w4_run_dsp(params, quant, batches, depth, features, input, packed, bias, output, ctx->buf);
        if (ctx->stats != NULL) {
            const uint64_t macs = (uint64_t)batches * (uint64_t)depth * (uint64_t)features;
            ctx->stats->macs += macs;
            ctx->stats->input_reads += macs;
        }
        return PE_OK;
    }
#endif
    rows = w4_min(features, PE_FC_W4_ROWS);
    slice = w4_min(depth, PE_FC_W4_SLICE);
    acc = (int32_t *)(void *)(((uintptr_t)ctx->buf + 3u) & ~(uintptr_t)3u);
    tile = (int8_t *)(acc + rows);
    for (o0 = 0; o0 < features; o0 += rows) {
        const int32_t n = w4_min(rows, features - o0);
        pe_per_channel_quant q;
        const int32_t *bo = bias != NULL ? bias + o0 : NULL;
        q.multiplier = quant->multiplier + (params->per_channel ? o0 : 0);
        q.shift = quant->shift + (params->per_channel ? o0 : 0);
        if (depth == slice) {
            /* the whole depth in one tile: unpacked once, the int8 layer per batch row */
            w4_tile(packed, depth, o0, n, 0, depth, tile);
            for (b = 0; b < batches; b++) {
                pe_fully_connected_s8_flat_run(NULL, params, &q, 1, depth, n,
                                               input + (size_t)b * (size_t)depth, tile, bo,
                                               output + (size_t)b * (size_t)features + (size_t)o0);
            }
            continue;
        }
        for (b = 0; b < batches; b++) {
            const int8_t *x = input + (size_t)b * (size_t)depth;
            int32_t j;
            for (j = 0; j < n; j++) {
                acc[j] = 0;
            }
            for (k0 = 0; k0 < depth; k0 += slice) {
                const int32_t s = w4_min(slice, depth - k0);
                w4_tile(packed, depth, o0, n, k0, s, tile);
                pe_fc_s8_accumulate(params, n, s, s, x + k0, tile, acc);
            }
            pe_fc_s8_finish(params, &q, n, acc, bo,
                            output + (size_t)b * (size_t)features + (size_t)o0);
        }
    }
    if (ctx->stats != NULL) {
        const uint64_t macs = (uint64_t)batches * (uint64_t)depth * (uint64_t)features;
        ctx->stats->macs += macs;
        ctx->stats->input_reads += macs;
    }
    return PE_OK;
}
