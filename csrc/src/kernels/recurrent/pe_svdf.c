/*
 * pe_svdf.c - the integer SVDF of pe_svdf.h.
 */
#include "pyembed/pe_svdf.h"

#include "pyembed/pe_fixed.h"

static int in_range(int32_t v, int32_t lo, int32_t hi)
{
    return v >= lo && v <= hi;
}

pe_status pe_svdf_params_from_words(const int32_t *w, int32_t n, pe_svdf_params *p)
{
    int64_t feat;
    if (w == NULL || p == NULL || n != PE_SVDF_WORDS) {
        return PE_ERR_ARG;
    }
    p->batch = w[0];
    p->input_size = w[1];
    p->filters = w[2];
    p->rank = w[3];
    p->memory = w[4];
    p->input_zero_point = w[5];
    p->state_zero_point = w[6];
    p->output_zero_point = w[7];
    p->m1 = w[8];
    p->s1 = w[9];
    p->m2 = w[10];
    p->s2 = w[11];
    p->state_bytes = w[12];
    if (!in_range(p->batch, 1, 1 << 16) || !in_range(p->input_size, 1, 1 << 20) ||
        !in_range(p->filters, 1, 1 << 20) || !in_range(p->rank, 1, p->filters) || p->filters % p->rank != 0 ||
        !in_range(p->memory, 1, 1 << 20) || !in_range(p->input_zero_point, -128, 127) ||
        !in_range(p->output_zero_point, -128, 127) || (p->state_bytes != 1 && p->state_bytes != 2) ||
        !in_range(p->state_zero_point, p->state_bytes == 1 ? -128 : -32768, p->state_bytes == 1 ? 127 : 32767) ||
        p->m1 < 0 || p->m2 < 0 || !in_range(p->s1, -31, 30) || !in_range(p->s2, -31, 30)) {
        return PE_ERR_ARG;
    }
    /* the feature sums stay in int32 (|w| * |x - zx| <= 128 * 255 a term);
     * the time and rank sums wrap as TFLM's int32 additions do (below) */
    feat = (int64_t)p->input_size * 128 * 255;
    if (feat > PE_INT32_MAX) {
        return PE_ERR_UNSUPPORTED;
    }
    if ((int64_t)p->batch * p->filters * p->memory > PE_INT32_MAX ||
        (int64_t)p->batch * p->filters * 4 > PE_INT32_MAX / 2) {
        return PE_ERR_UNSUPPORTED;
    }
    return PE_OK;
}

int32_t pe_svdf_s8_get_buffer_size(const pe_svdf_params *p)
{
    if (p == NULL || p->batch < 1 || p->filters < 1 || p->rank < 1 || p->filters % p->rank != 0) {
        return -1;
    }
    return (int32_t)((int64_t)p->batch * p->filters * 4);
}

static int32_t state_at(const void *s, int32_t bytes, int64_t i)
{
    return bytes == 2 ? (int32_t)((const int16_t *)s)[i] : (int32_t)((const int8_t *)s)[i];
}

static void state_put(void *s, int32_t bytes, int64_t i, int32_t v)
{
    if (bytes == 2) {
        ((int16_t *)s)[i] = (int16_t)v;
    } else {
        ((int8_t *)s)[i] = (int8_t)v;
    }
}

pe_status pe_svdf_s8(const pe_context *ctx, const pe_svdf_params *p, const int8_t *x, const int8_t *wf,
                     const void *wt, const int32_t *bias, void *state, int8_t *y)
{
    int32_t *tsum;
    int32_t b, f, u, r, i, size;
    int64_t n, k;
    const int32_t units = p != NULL && p->rank > 0 ? p->filters / p->rank : 0;
    const int32_t lo = p != NULL && p->state_bytes == 2 ? -32768 : -128;
    const int32_t hi = p != NULL && p->state_bytes == 2 ? 32767 : 127;
    if (ctx == NULL || p == NULL || x == NULL || wf == NULL || wt == NULL || state == NULL || y == NULL) {
        return PE_ERR_ARG;
    }
    size = pe_svdf_s8_get_buffer_size(p);
    if (size < 0 || ctx->buf == NULL || ctx->size < size || ((uintptr_t)ctx->buf & 3u) != 0) {
        return PE_ERR_ARG;
    }
    tsum = (int32_t *)ctx->buf;
    /* 1. the whole state buffer moves one element towards its start */
    n = (int64_t)p->batch * p->filters * p->memory;
    for (k = 0; k + 1 < n; k++) {
        state_put(state, p->state_bytes, k, state_at(state, p->state_bytes, k + 1));
    }
    /* 2. the newest column: the feature dot products, requantized */
    for (b = 0; b < p->batch; b++) {
        const int8_t *xb = x + (int64_t)b * p->input_size;
        for (f = 0; f < p->filters; f++) {
            const int8_t *wr = wf + (int64_t)f * p->input_size;
            int32_t acc = 0, v;
            for (i = 0; i < p->input_size; i++) {
                acc += (int32_t)wr[i] * ((int32_t)xb[i] - p->input_zero_point);
            }
            v = pe_fx_requant(acc, p->m1, p->s1) + p->state_zero_point;
            v = v < lo ? lo : (v > hi ? hi : v);
            state_put(state, p->state_bytes, ((int64_t)b * p->filters + f) * p->memory + p->memory - 1, v);
        }
    }
    /* 3. time sums */
    for (b = 0; b < p->batch; b++) {
        for (f = 0; f < p->filters; f++) {
            const int64_t s0 = ((int64_t)b * p->filters + f) * p->memory;
            const int64_t w0 = (int64_t)f * p->memory;
            uint32_t acc = 0; /* two's-complement int32 sum (wraps as TFLM's does) */
            for (i = 0; i < p->memory; i++) {
                acc += (uint32_t)((int64_t)state_at(wt, p->state_bytes, w0 + i) *
                                  (state_at(state, p->state_bytes, s0 + i) - p->state_zero_point));
            }
            tsum[(int64_t)b * p->filters + f] = (int32_t)acc;
        }
    }
    /* 4. bias, the rank sums, requantization to int8 */
    for (b = 0; b < p->batch; b++) {
        for (u = 0; u < units; u++) {
            uint32_t acc = bias != NULL ? (uint32_t)bias[u] : 0u;
            int32_t v;
            for (r = 0; r < p->rank; r++) {
                acc += (uint32_t)tsum[(int64_t)b * p->filters + (int64_t)u * p->rank + r];
            }
            v = pe_fx_requant((int32_t)acc, p->m2, p->s2) + p->output_zero_point;
            y[(int64_t)b * units + u] = (int8_t)(v < -128 ? -128 : (v > 127 ? 127 : v));
        }
    }
    return PE_OK;
}
