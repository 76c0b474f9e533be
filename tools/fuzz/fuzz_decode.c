/*
 * fuzz_decode.c - libFuzzer harness for TFLM's DECODE (pe_decode.h), whose
 * encoded stream and ancillary data are untrusted bytes.
 *
 * The input gives the decoded tensor's shape of use (count, element size,
 * channels, layout, zero points), the encoded and ancillary lengths and
 * bytes; the DCM header is mostly well formed (LUT or prune, versions 1,
 * a width of 1..7, a 2^width stride) with a wild share of every field.
 * Each buffer is an exact-size allocation (AddressSanitizer catches a read
 * one byte out). The reference is written here: a header accepted by
 * pe_decode must be one the rules accept (known type, versions, width,
 * lengths, every LUT index inside the table, enough prune values) and the
 * output must equal an element-by-element decode; a refused one must break
 * one of the rules, and leave the output's bytes past count untouched.
 */
#include "fuzz_common.h"
#include "pyembed/pe_decode.h"

#define MAX_COUNT 600

static int bit_at(const uint8_t *p, int64_t b)
{
    return (p[b >> 3] >> (7 - (b & 7))) & 1;
}

/* Expected output and status, element by element. */
static pe_status reference(const uint8_t *enc, int32_t enc_bytes, const uint8_t *anc, int32_t anc_bytes,
                           const pe_decode_shape *s, uint8_t *want)
{
    int64_t entries, i, used = 0;
    int32_t es = s->elem_size, k;
    if (anc_bytes < 16 || s->count % s->channels != 0) {
        return PE_ERR_ARG;
    }
    if (anc[0] == 1 || anc[0] >= 127) {
        return PE_ERR_UNSUPPORTED;
    }
    if ((anc[0] != 0 && anc[0] != 2) || anc[1] != 1 || anc[4] != 1) {
        return PE_ERR_ARG;
    }
    if (anc[0] == 2 && s->zero_points != NULL) {
        /* every zero point must fit the element type, used or not */
        for (k = 0; k < s->channels; ++k) {
            const int32_t zp = s->zero_points[k];
            if ((es == 1 && (zp < -128 || zp > 127)) || (es == 2 && (zp < -32768 || zp > 32767))) {
                return PE_ERR_ARG;
            }
        }
    }
    entries = (anc_bytes - 16) / es;
    for (i = 0; i < s->count; ++i) {
        const int64_t ch = s->alt_axis ? i % s->channels : i / (s->count / s->channels);
        if (anc[0] == 0) {
            const int32_t width = anc[5] & 7;
            int64_t idx = 0;
            if (width == 0 || (s->count * (int64_t)width + 7) / 8 > enc_bytes) {
                return PE_ERR_ARG;
            }
            for (k = 0; k < width; ++k) {
                idx = (idx << 1) | bit_at(enc, i * width + k);
            }
            idx += ch * anc[6];
            if (idx >= entries) {
                return PE_ERR_ARG;
            }
            memcpy(want + i * es, anc + 16 + idx * es, (size_t)es);
        } else {
            if ((s->count + 7) / 8 > enc_bytes) {
                return PE_ERR_ARG;
            }
            if (bit_at(enc, i)) {
                if (used >= entries) {
                    return PE_ERR_ARG;
                }
                memcpy(want + i * es, anc + 16 + used * es, (size_t)es);
                used++;
            } else {
                const int64_t zp = s->zero_points ? s->zero_points[ch] : 0;
                for (k = 0; k < es; ++k) {   /* little-endian two's complement, as on the host */
                    want[i * es + k] = (uint8_t)((uint64_t)zp >> (8 * k));
                }
            }
        }
    }
    return PE_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size_in);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size_in)
{
    static const int32_t sizes[4] = {1, 2, 4, 8};
    fz_reader r = {data, size_in};
    pe_decode_shape s;
    int32_t zps[8], enc_bytes, anc_bytes, width, prune, entries, k;
    uint8_t *enc, *anc, *got, *want;
    pe_status st, ref;

    s.channels = fz_range(&r, 1, 8);
    s.count = s.channels * fz_range(&r, 1, MAX_COUNT / 8);
    if (fz_range(&r, 0, 15) == 0) {
        s.count = fz_range(&r, 1, MAX_COUNT); /* not always whole channels */
    }
    s.elem_size = sizes[fz_range(&r, 0, 3)];
    s.alt_axis = fz_bool(&r);
    prune = fz_bool(&r);
    for (k = 0; k < s.channels; ++k) {
        zps[k] = fz_wild(&r, -128, 127);
    }
    s.zero_points = fz_bool(&r) ? zps : NULL;
    width = fz_wild(&r, 1, 7);
    enc_bytes = fz_wild(&r, 0, prune ? (s.count + 7) / 8 : (s.count * (width & 7) + 7) / 8);
    entries = fz_wild(&r, 0, prune ? s.count : s.channels << (width & 7));
    if (enc_bytes < 0 || enc_bytes > 4096 || entries < 0 || entries > 4096) {
        return 0;
    }
    anc_bytes = fz_range(&r, 0, 15) == 0 ? fz_range(&r, 0, 20) : 16 + entries * s.elem_size;
    enc = (uint8_t *)fz_alloc((size_t)enc_bytes);
    anc = (uint8_t *)fz_alloc((size_t)anc_bytes);
    got = (uint8_t *)fz_alloc((size_t)s.count * (size_t)s.elem_size + 8);
    want = (uint8_t *)fz_alloc((size_t)s.count * (size_t)s.elem_size + 8);
    for (k = 0; k < enc_bytes; ++k) {
        enc[k] = (uint8_t)fz_u8(&r);
    }
    for (k = 0; k < anc_bytes; ++k) {
        anc[k] = (uint8_t)fz_u8(&r);
    }
    if (anc_bytes >= 16) {
        anc[0] = (uint8_t)fz_wild(&r, prune ? 2 : 0, prune ? 2 : 0);
        anc[1] = (uint8_t)fz_wild(&r, 1, 1);
        anc[4] = (uint8_t)fz_wild(&r, 1, 1);
        anc[5] = (uint8_t)width;
        anc[6] = (uint8_t)fz_wild(&r, 1 << (width & 7), 1 << (width & 7));
    }
    memset(got, 0xA5, (size_t)s.count * (size_t)s.elem_size + 8);
    memset(want, 0xA5, (size_t)s.count * (size_t)s.elem_size + 8);
    st = pe_decode(enc, enc_bytes, anc, anc_bytes, &s, got, s.count * s.elem_size);
    ref = reference(enc, enc_bytes, anc, anc_bytes, &s, want);
    FZ_CHECK(st == ref, "status %d, reference %d (type %d, count %d, es %d, channels %d)", (int)st, (int)ref,
             anc_bytes > 0 ? anc[0] : -1, (int)s.count, (int)s.elem_size, (int)s.channels);
    if (st == PE_OK) {
        FZ_CHECK(memcmp(got, want, (size_t)s.count * (size_t)s.elem_size) == 0, "decoded bytes differ");
    }
    for (k = 0; k < 8; ++k) {
        FZ_CHECK(got[(size_t)s.count * (size_t)s.elem_size + (size_t)k] == 0xA5, "wrote past the output");
    }
    free(enc);
    free(anc);
    free(got);
    free(want);
    return 0;
}
