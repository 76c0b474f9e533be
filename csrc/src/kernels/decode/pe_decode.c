/*
 * pe_decode.c - TFLM's DECODE (LUT and prune; Huffman in pe_decode_huffman.c), see pe_decode.h.
 *
 * The ancillary data and the encoded stream are untrusted bytes: every
 * length is compared with the buffer size first (in int64, so no product can
 * wrap), every LUT index is checked against the table it selects from, and
 * the prune mask's set bits are counted against the table length before the
 * first byte is written.
 */
#include "pyembed/pe_decode.h"

static int shape_ok(const pe_decode_shape *s)
{
    if (s == NULL || s->count < 1 || s->channels < 1 || s->channels > PE_DECODE_MAX_CHANNELS) {
        return 0;
    }
    if (s->elem_size != 1 && s->elem_size != 2 && s->elem_size != 4 && s->elem_size != 8) {
        return 0;
    }
    if (s->alt_axis != 0 && s->alt_axis != 1) {
        return 0;
    }
    /* both layouts need whole channels: count / channels elements each, or
     * rows of `channels` elements */
    return s->count % s->channels == 0;
}

int32_t pe_decode_scratch_size(const pe_decode_shape *s)
{
    (void)s;
    return 0;
}

pe_status pe_decode_type(const uint8_t *anc, int32_t anc_bytes, int32_t *type)
{
    if (anc == NULL || type == NULL || anc_bytes < PE_DECODE_DCM_BYTES) {
        return PE_ERR_ARG;
    }
    *type = anc[0];
    return PE_OK;
}

/* Bits [bit, bit + width) of a most-significant-bit-first stream. */
static uint32_t read_bits(const uint8_t *p, int64_t bit, int32_t width)
{
    uint32_t v = 0;
    int32_t k;
    for (k = 0; k < width; ++k, ++bit) {
        v = (v << 1) | (uint32_t)((p[bit >> 3] >> (7 - (int32_t)(bit & 7))) & 1u);
    }
    return v;
}

static void copy_elem(uint8_t *dst, const uint8_t *src, int32_t n)
{
    int32_t k;
    for (k = 0; k < n; ++k) {
        dst[k] = src[k];
    }
}

static void store_int(void *out, int32_t i, int32_t elem_size, int32_t v)
{
    switch (elem_size) {
    case 1:
        ((int8_t *)out)[i] = (int8_t)v;
        break;
    case 2:
        ((int16_t *)out)[i] = (int16_t)v;
        break;
    case 4:
        ((int32_t *)out)[i] = v;
        break;
    default:
        ((int64_t *)out)[i] = (int64_t)v;
        break;
    }
}

static int32_t channel_of(const pe_decode_shape *s, int32_t i)
{
    return s->alt_axis ? i % s->channels : i / (s->count / s->channels);
}

/* Common checks; on success *entries is the number of table elements after the header. */
static pe_status check_common(const uint8_t *enc, int32_t enc_bytes, const uint8_t *anc, int32_t anc_bytes,
                              const pe_decode_shape *s, int64_t *entries)
{
    if (enc == NULL || anc == NULL || enc_bytes < 0 || anc_bytes < PE_DECODE_DCM_BYTES || !shape_ok(s)) {
        return PE_ERR_ARG;
    }
    if (anc[0] >= 127) {
        return PE_ERR_UNSUPPORTED; /* TFLM's custom decode types */
    }
    if (anc[0] != PE_DECODE_TYPE_LUT && anc[0] != PE_DECODE_TYPE_PRUNE && anc[0] != PE_DECODE_TYPE_HUFFMAN) {
        return PE_ERR_ARG; /* reserved types */
    }
    if (anc[1] != 1 || anc[4] != 1) {
        return PE_ERR_ARG; /* DCM version, the type's version */
    }
    *entries = (int64_t)(anc_bytes - PE_DECODE_DCM_BYTES) / s->elem_size;
    return PE_OK;
}

static pe_status check_lut(int32_t enc_bytes, const uint8_t *anc, const pe_decode_shape *s)
{
    const int32_t width = anc[5] & 7;
    if (width < 1) {
        return PE_ERR_ARG;
    }
    if (((int64_t)s->count * width + 7) / 8 > (int64_t)enc_bytes) {
        return PE_ERR_ARG;
    }
    return PE_OK;
}

/* Set bits among the first count bits of the mask. */
static int64_t mask_ones(const uint8_t *enc, int32_t count)
{
    int64_t n = 0;
    int32_t i;
    for (i = 0; i < count; ++i) {
        n += (enc[i >> 3] >> (7 - (i & 7))) & 1;
    }
    return n;
}

static pe_status check_prune(const uint8_t *enc, int32_t enc_bytes, const pe_decode_shape *s, int64_t entries)
{
    int32_t ch;
    if (((int64_t)s->count + 7) / 8 > (int64_t)enc_bytes) {
        return PE_ERR_ARG;
    }
    if (mask_ones(enc, s->count) > entries) {
        return PE_ERR_ARG;
    }
    if (s->zero_points != NULL) {
        for (ch = 0; ch < s->channels; ++ch) {
            const int32_t zp = s->zero_points[ch];
            if ((s->elem_size == 1 && (zp < -128 || zp > 127)) ||
                (s->elem_size == 2 && (zp < -32768 || zp > 32767))) {
                return PE_ERR_ARG;
            }
        }
    }
    return PE_OK;
}

pe_status pe_decode_check(const uint8_t *enc, int32_t enc_bytes, const uint8_t *anc, int32_t anc_bytes,
                          const pe_decode_shape *s)
{
    int64_t entries = 0;
    const pe_status st = check_common(enc, enc_bytes, anc, anc_bytes, s, &entries);
    if (st != PE_OK) {
        return st;
    }
    if (anc[0] == PE_DECODE_TYPE_HUFFMAN) {
        return pe_decode_huffman_check(enc_bytes, anc, anc_bytes, s);
    }
    return anc[0] == PE_DECODE_TYPE_LUT ? check_lut(enc_bytes, anc, s) : check_prune(enc, enc_bytes, s, entries);
}

static pe_status decode_lut(const uint8_t *enc, const uint8_t *anc, int64_t entries, const pe_decode_shape *s,
                            uint8_t *out)
{
    const int32_t width = anc[5] & 7, stride = anc[6], es = s->elem_size;
    const uint8_t *table = anc + PE_DECODE_DCM_BYTES;
    int32_t i;
    for (i = 0; i < s->count; ++i) {
        const int64_t at = (int64_t)channel_of(s, i) * stride + (int64_t)read_bits(enc, (int64_t)i * width, width);
        if (at >= entries) {
            return PE_ERR_ARG; /* an index past the value table */
        }
        copy_elem(out + (int64_t)i * es, table + at * es, es);
    }
    return PE_OK;
}

static void decode_prune(const uint8_t *enc, const uint8_t *anc, const pe_decode_shape *s, uint8_t *out)
{
    const int32_t es = s->elem_size;
    const uint8_t *next = anc + PE_DECODE_DCM_BYTES;
    int32_t i;
    for (i = 0; i < s->count; ++i) {
        if ((enc[i >> 3] >> (7 - (i & 7))) & 1) {
            copy_elem(out + (int64_t)i * es, next, es);
            next += es;
        } else {
            store_int(out, i, es, s->zero_points != NULL ? s->zero_points[channel_of(s, i)] : 0);
        }
    }
}

pe_status pe_decode(const uint8_t *enc, int32_t enc_bytes, const uint8_t *anc, int32_t anc_bytes,
                    const pe_decode_shape *s, void *out, int32_t out_bytes)
{
    int64_t entries = 0;
    pe_status st = pe_decode_check(enc, enc_bytes, anc, anc_bytes, s);
    if (st != PE_OK) {
        return st;
    }
    if (out == NULL || (int64_t)s->count * s->elem_size > (int64_t)out_bytes) {
        return PE_ERR_ARG;
    }
    if (anc[0] == PE_DECODE_TYPE_HUFFMAN) {
        return pe_decode_huffman(enc, enc_bytes, anc, anc_bytes, s, out);
    }
    entries = (int64_t)(anc_bytes - PE_DECODE_DCM_BYTES) / s->elem_size;
    if (anc[0] == PE_DECODE_TYPE_LUT) {
        return decode_lut(enc, anc, entries, s, (uint8_t *)out);
    }
    decode_prune(enc, anc, s, (uint8_t *)out);
    return PE_OK;
}
