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
 * point. Huffman is refused (PE_ERR_UNSUPPORTED).
 *
 * Channels come from the output's quantization, as TFLM takes them: with
 * alt_axis (quantized on the last axis, more than one channel) element i
 * belongs to channel i % channels, otherwise to i / (count / channels).
 *
 * Every header field and every table / stream length is checked against the
 * buffer sizes before anything is read: a malformed header is PE_ERR_ARG
 * (PE_ERR_UNSUPPORTED for a valid but unimplemented decode type), never a
 * read outside enc / anc. No scratch is needed (pe_decode_scratch_size is 0).
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

#ifdef __cplusplus
}
#endif

#endif
