/*
 * pe_decode_huffman.c - the Huffman decode type of TFLM's DECODE (see
 * pe_decode.h for the layout).
 *
 * Nothing here trusts the ancillary data or the stream: the header is
 * checked against the buffer sizes first (the first-level table must fit),
 * every table position a pointer entry leads to is compared with the table
 * length before it is read, and the stream is read through a window that
 * gives zero bits past its end, so a lookup may look ahead of the last code
 * (as TFLM's word-wise reader does) but a code that needs a bit past the end
 * is a status. Each pointer step consumes at least one bit, and a step that
 * would start past the end of the stream is refused, so the walk ends.
 */
#include "pyembed/pe_decode.h"

/* 32-bit entry fields: bit 31 "symbol", bits 27..30 a bit count, bits 0..26 the value. A 16-bit
 * entry has the same fields 16 bits down (value bits 0..10); it is read widened to 32 bits. */
#define HUF_FOUND_32 0x80000000u
#define HUF_BITS_SHIFT_32 27
#define HUF_VALUE_32 0x07FFFFFFu
#define HUF_VALUE_16 0x07FFu
#define HUF_BITS_FIELD 0xFu

typedef struct {
    const uint8_t *table; /* first entry (ancillary byte 16) */
    int64_t entries;      /* whole entries in the ancillary data */
    int32_t wide;         /* 1: 32-bit entries, 0: 16-bit */
    int32_t first_bits;   /* bits of the first lookup, 1..16 */
} huf_tables;

/* Reads the header; PE_OK when the tables and the output type are usable. */
static pe_status huf_setup(const uint8_t *anc, int32_t anc_bytes, const pe_decode_shape *s, huf_tables *t)
{
    const uint8_t sizes = anc[PE_DECODE_HUF_SIZES_BYTE];
    t->wide = (sizes & PE_DECODE_HUF_WIDE) != 0;
    t->first_bits = (sizes >> 4) + 1;
    t->table = anc + PE_DECODE_DCM_BYTES;
    t->entries = (int64_t)(anc_bytes - PE_DECODE_DCM_BYTES) / (t->wide ? 4 : 2);
    /* 16-bit entries carry int8 symbols; 32-bit ones int8 or int16 (TFLM's set) */
    if (s->elem_size != 1 && !(t->wide && s->elem_size == 2)) {
        return PE_ERR_ARG;
    }
    if (t->entries < ((int64_t)1 << t->first_bits)) {
        return PE_ERR_ARG; /* the first-level table does not fit */
    }
    return PE_OK;
}

pe_status pe_decode_huffman_check(int32_t enc_bytes, const uint8_t *anc, int32_t anc_bytes,
                                  const pe_decode_shape *s)
{
    huf_tables t;
    if (anc == NULL || anc_bytes < PE_DECODE_DCM_BYTES || enc_bytes < 0 || s == NULL) {
        return PE_ERR_ARG;
    }
    return huf_setup(anc, anc_bytes, s, &t);
}

static uint32_t huf_entry(const huf_tables *t, int64_t at)
{
    const uint8_t *p = t->table + (t->wide ? 4 : 2) * at;
    if (t->wide) {
        return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
    }
    /* widen a 16-bit entry to the 32-bit layout: same fields, 16 bits up */
    return ((uint32_t)p[0] | ((uint32_t)p[1] << 8)) << 16;
}

/* n (1..16) bits at bit pos of a most-significant-bit-first stream, zeros past its end. */
static uint32_t huf_peek(const uint8_t *enc, int32_t enc_bytes, int64_t pos, int32_t n)
{
    const int64_t byte = pos >> 3;
    uint32_t w = 0;
    int32_t k;
    for (k = 0; k < 3; ++k) {
        w = (w << 8) | (byte + k < (int64_t)enc_bytes ? (uint32_t)enc[byte + k] : 0u);
    }
    return (w >> (24 - (int32_t)(pos & 7) - n)) & ((1u << n) - 1u);
}

pe_status pe_decode_huffman(const uint8_t *enc, int32_t enc_bytes, const uint8_t *anc, int32_t anc_bytes,
                            const pe_decode_shape *s, void *out)
{
    huf_tables t;
    const int64_t end = (int64_t)enc_bytes * 8;
    int64_t pos = 0;
    int32_t i;
    pe_status st = pe_decode_huffman_check(enc_bytes, anc, anc_bytes, s);
    if (st != PE_OK) {
        return st;
    }
    if (enc == NULL || out == NULL) {
        return PE_ERR_ARG;
    }
    (void)huf_setup(anc, anc_bytes, s, &t);
    /* 16-bit entries are widened to the 32-bit layout, where the value field is the low 27 bits of
     * the 32-bit entry or bits 16..26 of a widened 16-bit one */
    for (i = 0; i < s->count; ++i) {
        int32_t width = t.first_bits, used;
        int64_t at = (int64_t)huf_peek(enc, enc_bytes, pos, width);
        uint32_t e, v;
        pos += width;
        e = huf_entry(&t, at); /* at < 2^first_bits <= entries (huf_setup) */
        while ((e & HUF_FOUND_32) == 0) {
            const int64_t step = t.wide ? (int64_t)(e & HUF_VALUE_32) : (int64_t)((e >> 16) & HUF_VALUE_16);
            if (pos > end) {
                return PE_ERR_ARG; /* the code runs past the end of the stream */
            }
            width = (int32_t)((e >> HUF_BITS_SHIFT_32) & HUF_BITS_FIELD) + 1;
            at += step + (int64_t)huf_peek(enc, enc_bytes, pos, width);
            pos += width;
            if (at >= t.entries) {
                return PE_ERR_ARG; /* a pointer past the tables */
            }
            e = huf_entry(&t, at);
        }
        used = (int32_t)((e >> HUF_BITS_SHIFT_32) & HUF_BITS_FIELD);
        if (width > used) {
            pos -= width - used; /* the lookup's bits past this code belong to the next one */
        }
        if (pos > end) {
            return PE_ERR_ARG;
        }
        /* the output takes the entry's low bits as two's complement (a widened entry's are bits 16..) */
        v = t.wide ? e : e >> 16;
        if (s->elem_size == 1) {
            ((int8_t *)out)[i] = (int8_t)((int32_t)(v & 0xFFu) - ((v & 0x80u) ? 0x100 : 0));
        } else {
            ((int16_t *)out)[i] = (int16_t)((int32_t)(v & 0xFFFFu) - ((v & 0x8000u) ? 0x10000 : 0));
        }
    }
    return PE_OK;
}
