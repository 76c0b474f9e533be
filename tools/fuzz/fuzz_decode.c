/*
 * fuzz_decode.c - libFuzzer harness for TFLM's DECODE (pe_decode.h), whose
 * encoded stream and ancillary data are untrusted bytes.
 *
 * The input gives the decoded tensor's shape of use (count, element size,
 * channels, layout, zero points), the encoded and ancillary lengths and
 * bytes; the DCM header is mostly well formed (LUT or prune, versions 1,
 * a width of 1..7, a 2^width stride) with a wild share of every field.
 * One input in four is a Huffman case instead: a first lookup of 1..8 bits
 * (wild: up to 16), 16- or 32-bit entries drawn as symbols (a used-bit count,
 * a value) or pointers (a lookup width, a small forward offset, now and then
 * past the tables or back to themselves), a random stream, int8 / int16
 * outputs (wild: the other sizes), and the tables now and then cut short.
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

/* Bits [pos, pos + n) of the stream, most significant first, zeros past its end. */
static uint32_t bits_at(const uint8_t *p, int32_t bytes, int64_t pos, int32_t n)
{
    uint32_t v = 0;
    int32_t k;
    for (k = 0; k < n; ++k) {
        v = (v << 1) | (uint32_t)(pos + k < (int64_t)bytes * 8 ? bit_at(p, pos + k) : 0);
    }
    return v;
}

/* The Huffman rules, one bit at a time: the first lookup must fit the tables, a pointer step
 * may not start past the stream's end nor land past the tables, a code may not end past the
 * stream's end; the output is the symbol entry's low 8 / 16 bits. */
static pe_status huffman_reference(const uint8_t *enc, int32_t enc_bytes, const uint8_t *anc, int32_t anc_bytes,
                                   const pe_decode_shape *s, uint8_t *want)
{
    const int wide = anc[5] & 1, first = (anc[5] >> 4) + 1, esz = wide ? 4 : 2;
    const int64_t entries = (anc_bytes - 16) / esz, end = (int64_t)enc_bytes * 8;
    int64_t pos = 0, i;
    if (!(s->elem_size == 1 || (wide && s->elem_size == 2)) || entries < ((int64_t)1 << first)) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < s->count; ++i) {
        int64_t at = bits_at(enc, enc_bytes, pos, first);
        int32_t width = first, used, k;
        uint32_t e = 0;
        pos += first;
        for (;;) {
            e = 0;
            for (k = esz - 1; k >= 0; --k) {
                e = (e << 8) | anc[16 + at * esz + k];
            }
            if (!wide) {
                e <<= 16; /* the 32-bit layout */
            }
            if (e >> 31) {
                break;
            }
            if (pos > end) {
                return PE_ERR_ARG;
            }
            at += (wide ? (e & 0x07FFFFFFu) : ((e >> 16) & 0x7FFu));
            width = (int32_t)((e >> 27) & 15u) + 1;
            at += bits_at(enc, enc_bytes, pos, width);
            pos += width;
            if (at >= entries) {
                return PE_ERR_ARG;
            }
        }
        used = (int32_t)((e >> 27) & 15u);
        if (used < width) {
            pos -= width - used;
        }
        if (pos > end) {
            return PE_ERR_ARG;
        }
        if (!wide) {
            e >>= 16;
        }
        want[i * s->elem_size] = (uint8_t)e;   /* little-endian low bytes, as on the host */
        if (s->elem_size == 2) {
            want[i * 2 + 1] = (uint8_t)(e >> 8);
        }
    }
    return PE_OK;
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
    if (anc[0] >= 127) {
        return PE_ERR_UNSUPPORTED;
    }
    if ((anc[0] != 0 && anc[0] != 1 && anc[0] != 2) || anc[1] != 1 || anc[4] != 1) {
        return PE_ERR_ARG;
    }
    if (anc[0] == 1) {
        return huffman_reference(enc, enc_bytes, anc, anc_bytes, s, want);
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

/* Runs pe_decode and the reference on one case and compares them; frees the buffers. */
static void run_case(uint8_t *enc, int32_t enc_bytes, uint8_t *anc, int32_t anc_bytes, const pe_decode_shape *s)
{
    const size_t n = (size_t)s->count * (size_t)s->elem_size;
    uint8_t *got = (uint8_t *)fz_alloc(n + 8), *want = (uint8_t *)fz_alloc(n + 8);
    pe_status st, ref;
    int32_t k;
    memset(got, 0xA5, n + 8);
    memset(want, 0xA5, n + 8);
    st = pe_decode(enc, enc_bytes, anc, anc_bytes, s, got, s->count * s->elem_size);
    ref = reference(enc, enc_bytes, anc, anc_bytes, s, want);
    FZ_CHECK(st == ref, "status %d, reference %d (type %d, count %d, es %d, channels %d)", (int)st, (int)ref,
             anc_bytes > 0 ? anc[0] : -1, (int)s->count, (int)s->elem_size, (int)s->channels);
    if (st == PE_OK) {
        FZ_CHECK(memcmp(got, want, n) == 0, "decoded bytes differ");
    }
    for (k = 0; k < 8; ++k) {
        FZ_CHECK(got[n + (size_t)k] == 0xA5, "wrote past the output");
    }
    free(enc);
    free(anc);
    free(got);
    free(want);
}

/* A Huffman case: header, tables of symbol / pointer entries, a random stream. */
static void huffman_case(fz_reader *r)
{
    static const int32_t sizes[4] = {1, 2, 4, 8};
    pe_decode_shape s;
    const int wide = fz_bool(r);
    int32_t first = fz_wild(r, 1, 8), entries, anc_bytes, enc_bytes, k, esz;
    uint8_t *anc, *enc;
    s.count = fz_range(r, 1, MAX_COUNT);
    s.elem_size = fz_range(r, 0, 15) == 0 ? sizes[fz_range(r, 0, 3)] : (wide ? fz_range(r, 1, 2) : 1);
    s.channels = 1;
    s.alt_axis = 0;
    s.zero_points = NULL;
    if (first < 1 || first > 16) {
        first = 1 + (first & 15);
    }
    esz = wide ? 4 : 2;
    entries = (1 << first) + fz_range(r, 0, 48);
    anc_bytes = 16 + entries * esz;
    if (fz_range(r, 0, 7) == 0) {
        anc_bytes = fz_range(r, 16, anc_bytes); /* cut short, maybe mid-entry */
    }
    enc_bytes = fz_wild(r, 0, s.count * 2);
    if (enc_bytes < 0 || enc_bytes > 4096) {
        return;
    }
    anc = (uint8_t *)fz_alloc((size_t)anc_bytes);
    enc = (uint8_t *)fz_alloc((size_t)enc_bytes);
    memset(anc, 0, 16);
    anc[0] = 1;
    anc[1] = (uint8_t)fz_wild(r, 1, 1);
    anc[4] = (uint8_t)fz_wild(r, 1, 1);
    anc[5] = (uint8_t)(((first - 1) << 4) | wide | (fz_range(r, 0, 15) == 0 ? 0x0E & fz_u8(r) : 0));
    for (k = 0; 16 + (k + 1) * esz <= anc_bytes; ++k) {
        uint32_t e, c;
        if (fz_range(r, 0, 9) < 6) { /* a symbol: bits used 0..15, a value */
            c = (uint32_t)fz_range(r, 0, 15);
            e = 0x80000000u | (c << 27) | (fz_u32(r) & 0x07FFFFFFu);
        } else {                     /* a pointer: lookup width 1..16 (mostly 1..4), a forward step */
            c = (uint32_t)fz_wild(r, 0, 3) & 15u;
            e = (c << 27) | ((uint32_t)fz_wild(r, 0, 12) & (wide ? 0x07FFFFFFu : 0x7FFu));
        }
        if (!wide) {
            e >>= 16;
            anc[16 + 2 * k] = (uint8_t)e;
            anc[17 + 2 * k] = (uint8_t)(e >> 8);
        } else {
            anc[16 + 4 * k] = (uint8_t)e;
            anc[17 + 4 * k] = (uint8_t)(e >> 8);
            anc[18 + 4 * k] = (uint8_t)(e >> 16);
            anc[19 + 4 * k] = (uint8_t)(e >> 24);
        }
    }
    for (k = 16 + (anc_bytes - 16) / esz * esz; k < anc_bytes; ++k) {
        anc[k] = (uint8_t)fz_u8(r); /* a partial last entry */
    }
    for (k = 0; k < enc_bytes; ++k) {
        enc[k] = (uint8_t)fz_u8(r);
    }
    run_case(enc, enc_bytes, anc, anc_bytes, &s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size_in)
{
    static const int32_t sizes[4] = {1, 2, 4, 8};
    fz_reader r = {data, size_in};
    pe_decode_shape s;
    int32_t zps[8], enc_bytes, anc_bytes, width, prune, entries, k;
    uint8_t *enc, *anc;

    if (fz_range(&r, 0, 3) == 0) {
        huffman_case(&r);
        return 0;
    }
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
    run_case(enc, enc_bytes, anc, anc_bytes, &s);
    return 0;
}
