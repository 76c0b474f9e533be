/*
 * pe_decode.h - TFLM's DECODE operator (custom code "TFLM_DECODE"): an
 * encoded constant plus its ancillary data (a 16-byte DCM header and the
 * decode type's tables) expanded into an ordinary tensor at run time, so the
 * compressed form stays in flash and only the decoded tensor takes RAM.
 *
 * DCM header (bytes): 0 decode type (0 LUT, 1 Huffman, 2 prune), 1 DCM
 * version (1), 4 the type's version (1); for LUT byte 5's low three bits are
 * the index bit width (1..7) and byte 6 the value-table stride (entries per
 * channel). The tables start at byte 16, elements of the output's type.
 *
 * LUT: the encoded tensor is a big-endian bit stream of `width`-bit indices,
 * one per output element; element i of channel ch is table[ch * stride + idx].
 * Prune: the encoded tensor is a bit mask (most significant bit first); a set
 * bit takes the next table value in order, a clear bit the channel's zero
 * point.
 *
 * Huffman: byte 5 bit 0 selects 32-bit table entries (else 16-bit), bits
 * 4..7 hold the first lookup's bit count minus one (1..16 bits). The tables
 * from byte 16 are little-endian entries: bit 31 (16-bit: 15) set marks a
 * symbol, bits 27..30 (11..14) hold a count and the low 27 (11) bits a value.
 * Decoding one element reads first-lookup bits of the encoded stream (most
 * significant bit first) as an index into the first table; while the entry
 * is not a symbol, the next lookup takes count + 1 bits and lands at the
 * entry's position + value + those bits. A symbol entry's count is how many
 * of the last lookup's bits its code used (the rest are read again for the
 * next element); the output is the entry's low 8 (int8) or 16 (int16) bits.
 * 16-bit entries decode to int8, 32-bit ones to int8 or int16 (TFLM's set;
 * other output types are PE_ERR_ARG). Huffman ignores channels.
 *
 * Channels come from the output's quantization, as TFLM takes them: with
 * alt_axis (quantized on the last axis, more than one channel) element i
 * belongs to channel i % channels, otherwise to i / (count / channels).
 *
 * Every header field and every table / stream length is checked against the
 * buffer sizes before anything is read: a malformed header is PE_ERR_ARG
 * (PE_ERR_UNSUPPORTED for TFLM's custom decode types, 127..255), never a
 * read outside enc / anc. A LUT index past its table, a Huffman pointer past
 * the tables or a Huffman code running past the stream's end is found while
 * decoding (PE_ERR_ARG; the elements before it are written). No scratch is needed (pe_decode_scratch_size is 0).
 */
#ifndef PYEMBED_PE_DECODE_H
#define PYEMBED_PE_DECODE_H

#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PE_DECODE_DCM_BYTES 16
#define PE_DECODE_TYPE_LUT 0
#define PE_DECODE_TYPE_HUFFMAN 1
#define PE_DECODE_TYPE_PRUNE 2
#define PE_DECODE_MAX_CHANNELS 65536
#define PE_DECODE_HUF_SIZES_BYTE 5 /* Huffman: table entry size and first lookup bits */
#define PE_DECODE_HUF_WIDE 0x01    /* ... bit 0: 32-bit entries */

/* The decoded tensor's shape of use. */
typedef struct {
    int32_t count;      /* output elements, >= 1 */
    int32_t elem_size;  /* bytes of one element: 1, 2, 4 or 8 */
    int32_t channels;   /* >= 1; count % channels == 0 unless alt_axis */
    int32_t alt_axis;   /* 1: channel = i % channels (count % channels == 0) */
    /* prune: zero point per channel (channels entries) or NULL for 0;
     * written as elem_size-byte integers */
    const int32_t *zero_points;
} pe_decode_shape;

/* Scratch bytes pe_decode needs: always 0 (kept for the kernel convention). */
int32_t pe_decode_scratch_size(const pe_decode_shape *s);

/* The decode type byte of the ancillary data, or PE_ERR_ARG if it is too short. */
pe_status pe_decode_type(const uint8_t *anc, int32_t anc_bytes, int32_t *type);

/* Checks the header and lengths without decoding (PE_OK when pe_decode would run). */
pe_status pe_decode_check(const uint8_t *enc, int32_t enc_bytes, const uint8_t *anc, int32_t anc_bytes,
                          const pe_decode_shape *s);

/* Decodes into out (out_bytes >= count * elem_size). */
pe_status pe_decode(const uint8_t *enc, int32_t enc_bytes, const uint8_t *anc, int32_t anc_bytes,
                    const pe_decode_shape *s, void *out, int32_t out_bytes);

/* The Huffman decode type (pe_decode calls these after the common header checks): the header
 * and lengths, and the decode itself (out holds count elements of elem_size bytes). */
pe_status pe_decode_huffman_check(int32_t enc_bytes, const uint8_t *anc, int32_t anc_bytes,
                                  const pe_decode_shape *s);
pe_status pe_decode_huffman(const uint8_t *enc, int32_t enc_bytes, const uint8_t *anc, int32_t anc_bytes,
                            const pe_decode_shape *s, void *out);

#ifdef __cplusplus
}
#endif

#endif
