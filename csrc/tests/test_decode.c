/* test_decode.c - C unit tests of TFLM's DECODE (pe_decode.h): LUT streams of
 * known indices at widths 1, 3 and 7, per-channel tables on axis 0 and on the
 * last axis, prune masks with per-channel zero points, and every malformed
 * header / length refused with a status before anything is read out of
 * bounds; Huffman (16-bit entries -> int8, 32-bit -> int16 / int8) on a
 * hand-made five-symbol code with a second-level table, and its malformed
 * tables and streams. Bit-exactness with the TFLM interpreter is tested from Python
 * (tests/test_ops_decode.py). */
#include <string.h>

#include "pe_test.h"
#include "pyembed/pe_decode.h"

static void header(uint8_t *anc, int type, int width, int stride)
{
    memset(anc, 0, PE_DECODE_DCM_BYTES);
    anc[0] = (uint8_t)type;
    anc[1] = 1;
    anc[4] = 1;
    anc[5] = (uint8_t)width;
    anc[6] = (uint8_t)stride;
}

static pe_decode_shape shape(int32_t count, int32_t es, int32_t channels, int32_t alt, const int32_t *zps)
{
    pe_decode_shape s;
    s.count = count;
    s.elem_size = es;
    s.channels = channels;
    s.alt_axis = alt;
    s.zero_points = zps;
    return s;
}

static void test_lut_width3_int16(void)
{
    /* indices 5 2 7 0 1 6 3 4 -> 101 010 111 000 001 110 011 100 = 0xABE0 0x7338 ... */
    const uint8_t enc[3] = {0xAB, 0x83, 0x9C};
    uint8_t anc[16 + 16];
    int16_t table[8], out[8];
    const int idx[8] = {5, 2, 7, 0, 1, 6, 3, 4};
    pe_decode_shape s = shape(8, 2, 1, 0, NULL);
    int i;
    header(anc, PE_DECODE_TYPE_LUT, 3, 8);
    for (i = 0; i < 8; i++) {
        table[i] = (int16_t)(1000 * i - 3000);
    }
    memcpy(anc + 16, table, sizeof(table));
    PE_CHECK_EQ(pe_decode_scratch_size(&s), 0);
    PE_CHECK_EQ(pe_decode(enc, 3, anc, (int32_t)sizeof(anc), &s, out, (int32_t)sizeof(out)), PE_OK);
    for (i = 0; i < 8; i++) {
        PE_CHECK_EQ(out[i], table[idx[i]]);
    }
}

static void test_lut_channels(void)
{
    /* width 1, 2 channels of stride 2: axis 0 (4 elements each) and the last axis (interleaved) */
    const uint8_t enc[1] = {0xA5}; /* 1 0 1 0 0 1 0 1 */
    uint8_t anc[16 + 4];
    int8_t out[8];
    pe_decode_shape s0 = shape(8, 1, 2, 0, NULL), s1 = shape(8, 1, 2, 1, NULL);
    const int8_t want0[8] = {-2, -1, -2, -1, 30, 40, 30, 40};
    const int8_t want1[8] = {-2, 30, -2, 30, -1, 40, -1, 40};
    int i;
    header(anc, PE_DECODE_TYPE_LUT, 1, 2);
    anc[16] = (uint8_t)-1;
    anc[17] = (uint8_t)-2;
    anc[18] = 30;
    anc[19] = 40;
    PE_CHECK_EQ(pe_decode(enc, 1, anc, 20, &s0, out, 8), PE_OK);
    for (i = 0; i < 8; i++) {
        PE_CHECK_EQ(out[i], want0[i]);
    }
    PE_CHECK_EQ(pe_decode(enc, 1, anc, 20, &s1, out, 8), PE_OK);
    for (i = 0; i < 8; i++) {
        PE_CHECK_EQ(out[i], want1[i]);
    }
}

static void test_lut_width7_int32(void)
{
    /* 8 indices of 7 bits: 0..7 * 17 mod 128 */
    uint8_t enc[7];
    uint8_t anc[16 + 128 * 4];
    int32_t out[8];
    int32_t v;
    pe_decode_shape s = shape(8, 4, 1, 0, NULL);
    int i, b;
    memset(enc, 0, sizeof(enc));
    for (i = 0; i < 8; i++) {
        for (b = 0; b < 7; b++) {
            if (((17 * i) >> (6 - b)) & 1) {
                enc[(i * 7 + b) / 8] |= (uint8_t)(0x80 >> ((i * 7 + b) % 8));
            }
        }
    }
    header(anc, PE_DECODE_TYPE_LUT, 7, 128);
    for (i = 0; i < 128; i++) {
        v = -70000 * i;
        memcpy(anc + 16 + 4 * i, &v, 4);
    }
    PE_CHECK_EQ(pe_decode(enc, 7, anc, (int32_t)sizeof(anc), &s, out, (int32_t)sizeof(out)), PE_OK);
    for (i = 0; i < 8; i++) {
        PE_CHECK_EQ(out[i], -70000 * 17 * i);
    }
}

static void test_prune(void)
{
    const uint8_t enc[2] = {0x96, 0x40}; /* 1001 0110 01: keep 0 3 5 6 9 */
    const int32_t zps[2] = {-7, 12};
    uint8_t anc[16 + 5];
    int8_t out[10];
    pe_decode_shape s = shape(10, 1, 2, 0, zps), s1 = shape(10, 1, 2, 1, zps);
    const int8_t want[10] = {1, -7, -7, 2, -7, 3, 4, 12, 12, 5};
    const int8_t want1[10] = {1, 12, -7, 2, -7, 3, 4, 12, -7, 5};
    int i;
    header(anc, PE_DECODE_TYPE_PRUNE, 0, 0);
    for (i = 0; i < 5; i++) {
        anc[16 + i] = (uint8_t)(i + 1);
    }
    PE_CHECK_EQ(pe_decode(enc, 2, anc, 21, &s, out, 10), PE_OK);
    for (i = 0; i < 10; i++) {
        PE_CHECK_EQ(out[i], want[i]);
    }
    PE_CHECK_EQ(pe_decode(enc, 2, anc, 21, &s1, out, 10), PE_OK);
    for (i = 0; i < 10; i++) {
        PE_CHECK_EQ(out[i], want1[i]);
    }
    /* five kept values, four in the table */
    PE_CHECK_EQ(pe_decode(enc, 2, anc, 20, &s, out, 10), PE_ERR_ARG);
    /* mask shorter than the elements */
    PE_CHECK_EQ(pe_decode(enc, 1, anc, 21, &s, out, 10), PE_ERR_ARG);
}

static void test_refusals(void)
{
    const uint8_t enc[2] = {0xFF, 0xFF};
    uint8_t anc[16 + 4];
    int8_t out[8];
    pe_decode_shape s = shape(8, 1, 1, 0, NULL);
    int32_t type = -1;
    header(anc, PE_DECODE_TYPE_LUT, 2, 4);
    PE_CHECK_EQ(pe_decode(enc, 2, anc, 20, &s, out, 8), PE_OK);
    PE_CHECK_EQ(pe_decode_type(anc, 20, &type), PE_OK);
    PE_CHECK_EQ(type, 0);
    PE_CHECK_EQ(pe_decode_type(anc, 15, &type), PE_ERR_ARG);
    PE_CHECK_EQ(pe_decode(enc, 2, anc, 15, &s, out, 8), PE_ERR_ARG);     /* header cut */
    PE_CHECK_EQ(pe_decode(enc, 2, anc, 19, &s, out, 8), PE_ERR_ARG);     /* index 3 past a 3-entry table */
    PE_CHECK_EQ(pe_decode(enc, 1, anc, 20, &s, out, 8), PE_ERR_ARG);     /* 16 bits of indices in 1 byte */
    PE_CHECK_EQ(pe_decode(enc, 2, anc, 20, &s, out, 7), PE_ERR_ARG);     /* output too small */
    PE_CHECK_EQ(pe_decode(NULL, 2, anc, 20, &s, out, 8), PE_ERR_ARG);
    PE_CHECK_EQ(pe_decode(enc, 2, anc, 20, NULL, out, 8), PE_ERR_ARG);
    anc[1] = 2;
    PE_CHECK_EQ(pe_decode(enc, 2, anc, 20, &s, out, 8), PE_ERR_ARG);     /* DCM version */
    anc[1] = 1;
    anc[4] = 0;
    PE_CHECK_EQ(pe_decode(enc, 2, anc, 20, &s, out, 8), PE_ERR_ARG);     /* LUT version */
    anc[4] = 1;
    anc[5] = 8;                                                          /* width 8 & 7 = 0 */
    PE_CHECK_EQ(pe_decode(enc, 2, anc, 20, &s, out, 8), PE_ERR_ARG);
    anc[5] = 2;
    anc[0] = 200;
    PE_CHECK_EQ(pe_decode(enc, 2, anc, 20, &s, out, 8), PE_ERR_UNSUPPORTED);
    anc[0] = 3;
    PE_CHECK_EQ(pe_decode(enc, 2, anc, 20, &s, out, 8), PE_ERR_ARG);     /* reserved type */
    anc[0] = PE_DECODE_TYPE_LUT;
    s.channels = 3;                                                      /* 8 elements, 3 channels */
    PE_CHECK_EQ(pe_decode(enc, 2, anc, 20, &s, out, 8), PE_ERR_ARG);
    s.channels = 1;
    s.elem_size = 3;
    PE_CHECK_EQ(pe_decode(enc, 2, anc, 20, &s, out, 8), PE_ERR_ARG);
}


/* Huffman: a hand-made code of five symbols, first lookup 2 bits, one
 * second-level table of 2 bits behind the prefix 11:
 *   A '0'  B '10'  C '110'  D '1110'  E '1111'
 * first table: 00 A(1 bit used) 01 A(1) 10 B(2) 11 -> entry 3 + 1, 2 bits;
 * second table (entries 4..7): 0x C(1) 10 D(2) 11 E(2). */
static const int huf_used[8] = {1, 1, 2, -1, 1, 1, 2, 2};
static const int huf_sym[8] = {0, 0, 1, -1, 2, 2, 3, 4};

/* 16-bit (wide 0) or 32-bit entries of the code above for the five symbol values; junk goes
 * into the value field above the output's bits (decoders take the low bits). */
static int32_t huf_tables16(uint8_t *anc, const int32_t *vals, int wide, uint32_t junk)
{
    int k;
    memset(anc, 0, PE_DECODE_DCM_BYTES);
    anc[0] = PE_DECODE_TYPE_HUFFMAN;
    anc[1] = 1;
    anc[4] = 1;
    anc[5] = (uint8_t)((1 << 4) | wide); /* first lookup 2 bits */
    for (k = 0; k < 8; ++k) {
        uint32_t e;
        if (huf_used[k] < 0) {
            e = wide ? ((uint32_t)1 << 27) | 1u : ((uint32_t)1 << 11) | 1u; /* 2 bits, entry 3 + 1 */
        } else if (wide) {
            e = 0x80000000u | ((uint32_t)huf_used[k] << 27) | (((uint32_t)vals[huf_sym[k]] & 0xFFFFu) | junk);
        } else {
            e = 0x8000u | ((uint32_t)huf_used[k] << 11) | (((uint32_t)vals[huf_sym[k]] & 0xFFu) | junk);
        }
        anc[16 + k * (wide ? 4 : 2)] = (uint8_t)e;
        anc[17 + k * (wide ? 4 : 2)] = (uint8_t)(e >> 8);
        if (wide) {
            anc[18 + k * 4] = (uint8_t)(e >> 16);
            anc[19 + k * 4] = (uint8_t)(e >> 24);
        }
    }
    return 16 + 8 * (wide ? 4 : 2);
}

/* A B C D E A A E B: 0 10 110 1110 1111 0 0 1111 10 -> 01011011 10111100 111110(00) */
static const uint8_t huf_enc[3] = {0x5B, 0xBC, 0xF8};
static const int huf_msg[9] = {0, 1, 2, 3, 4, 0, 0, 4, 1};

static void test_huffman_int8(void)
{
    const int32_t vals[5] = {-5, 7, 100, -128, 127};
    uint8_t anc[16 + 16];
    int8_t out[10];
    pe_decode_shape s = shape(9, 1, 1, 0, NULL);
    const int32_t n = huf_tables16(anc, vals, 0, 0x700u); /* junk in value bits 8..10 */
    int k;
    memset(out, 0x55, sizeof out);
    PE_CHECK_EQ(pe_decode_check(huf_enc, 3, anc, n, &s), PE_OK);
    PE_CHECK_EQ(pe_decode(huf_enc, 3, anc, n, &s, out, 9), PE_OK);
    for (k = 0; k < 9; ++k) {
        PE_CHECK_EQ(out[k], vals[huf_msg[k]]);
    }
    PE_CHECK_EQ(out[9], 0x55); /* nothing past count */
}

static void test_huffman_int16_wide(void)
{
    const int32_t vals[5] = {-300, 1000, 32767, -32768, 0};
    uint8_t anc[16 + 32];
    int16_t o16[9];
    int8_t o8[9];
    pe_decode_shape s = shape(9, 2, 1, 0, NULL);
    const int32_t n = huf_tables16(anc, vals, 1, 0x5A50000u); /* junk in value bits 16..26 */
    int k;
    PE_CHECK_EQ(pe_decode(huf_enc, 3, anc, n, &s, o16, 18), PE_OK);
    for (k = 0; k < 9; ++k) {
        PE_CHECK_EQ(o16[k], vals[huf_msg[k]]);
    }
    /* int8 from 32-bit entries: the low byte of each value */
    s.elem_size = 1;
    PE_CHECK_EQ(pe_decode(huf_enc, 3, anc, n, &s, o8, 9), PE_OK);
    for (k = 0; k < 9; ++k) {
        const int low = vals[huf_msg[k]] & 0xFF;
        PE_CHECK_EQ(o8[k], low >= 128 ? low - 256 : low);
    }
}

static void test_huffman_lookahead_and_zero_bit_codes(void)
{
    const int32_t vals[5] = {1, 2, 3, 4, 5};
    uint8_t anc[16 + 16];
    int8_t out[24];
    pe_decode_shape s = shape(4, 1, 1, 0, NULL);
    /* E B A: 1111 10 0 plus one A in the last bit: the last lookup reads a bit past the stream */
    const uint8_t enc[1] = {0xF8};   /* 1111 1000: E B A A, the last A's 2-bit lookup reads bit 8 */
    const int32_t n = huf_tables16(anc, vals, 0, 0);
    PE_CHECK_EQ(pe_decode(enc, 1, anc, n, &s, out, 4), PE_OK);
    PE_CHECK_EQ(out[0], 5);
    PE_CHECK_EQ(out[1], 2);
    PE_CHECK_EQ(out[2], 1);
    PE_CHECK_EQ(out[3], 1);
    /* a fifth element needs bit 8: past the stream */
    s.count = 5;
    PE_CHECK_EQ(pe_decode(enc, 1, anc, n, &s, out, 5), PE_ERR_ARG);
    /* a code that uses no bits (every first-level entry a symbol of 0 bits) decodes from nothing */
    anc[16] = 0x07; anc[17] = 0x80;   /* symbol 7, 0 bits */
    anc[18] = 0x07; anc[19] = 0x80;
    anc[20] = 0x07; anc[21] = 0x80;
    anc[22] = 0x07; anc[23] = 0x80;
    s.count = 24;
    PE_CHECK_EQ(pe_decode(enc, 0, anc, n, &s, out, 24), PE_OK);
    PE_CHECK_EQ(out[0], 7);
    PE_CHECK_EQ(out[23], 7);
}

static void test_huffman_refusals(void)
{
    const int32_t vals[5] = {1, 2, 3, 4, 5};
    uint8_t anc[16 + 32];
    int8_t out[16];
    int16_t o16[9];
    int32_t o32[9];
    pe_decode_shape s = shape(9, 1, 1, 0, NULL);
    int32_t n = huf_tables16(anc, vals, 0, 0);
    /* 22 bits of codes and 2 zero bits of padding (two more A): 11 elements fit, 12 do not */
    s.count = 11;
    PE_CHECK_EQ(pe_decode(huf_enc, 3, anc, n, &s, out, 11), PE_OK);
    PE_CHECK_EQ(out[10], 1);
    s.count = 12;
    PE_CHECK_EQ(pe_decode(huf_enc, 3, anc, n, &s, out, 12), PE_ERR_ARG);
    PE_CHECK_EQ(pe_decode(huf_enc, 2, anc, n, &(pe_decode_shape){9, 1, 1, 0, NULL}, out, 9), PE_ERR_ARG);
    s.count = 9;
    /* the second-level table cut off: C (entries 4, 5) still decodes, D (entry 6) points past the end */
    PE_CHECK_EQ(pe_decode(huf_enc, 3, anc, 16 + 2 * 6, &s, out, 9), PE_ERR_ARG);
    PE_CHECK_EQ(out[2], 3);   /* elements before the bad code are written */
    s.count = 3;              /* A B C: within the six entries */
    PE_CHECK_EQ(pe_decode(huf_enc, 3, anc, 16 + 2 * 6, &s, out, 3), PE_OK);
    s.count = 9;
    /* the first-level table must fit: 2 bits need 4 entries, 3 bits 8, 4 bits 16 */
    PE_CHECK_EQ(pe_decode_check(huf_enc, 3, anc, 16 + 2 * 3, &s), PE_ERR_ARG);
    PE_CHECK_EQ(pe_decode_check(huf_enc, 3, anc, 16 + 2 * 4, &s), PE_OK);
    PE_CHECK_EQ(pe_decode_check(huf_enc, 3, anc, 16 + 2 * 4 + 1, &s), PE_OK); /* a stray byte */
    anc[5] = 0x30;
    PE_CHECK_EQ(pe_decode_check(huf_enc, 3, anc, n, &s), PE_ERR_ARG);
    anc[5] = 0x20;
    PE_CHECK_EQ(pe_decode_check(huf_enc, 3, anc, n, &s), PE_OK);
    anc[5] = 0x10;
    /* a pointer to itself (offset 0, 1 bit) loops while the stream gives zeros: refused at its end */
    anc[22] = 0x00; anc[23] = 0x00;   /* entry 3: 1 bit, offset 0 */
    PE_CHECK_EQ(pe_decode(huf_enc, 3, anc, n, &s, out, 9), PE_ERR_ARG);
    PE_CHECK_EQ(pe_decode((const uint8_t *)"\xC0", 1, anc, n, &(pe_decode_shape){1, 1, 1, 0, NULL}, out, 1),
                PE_ERR_ARG);
    anc[22] = 0x01; anc[23] = 0x08;
    /* output types: 16-bit entries decode int8 only, 32-bit ones int8 / int16 */
    s.elem_size = 2;
    PE_CHECK_EQ(pe_decode(huf_enc, 3, anc, n, &s, o16, 18), PE_ERR_ARG);
    n = huf_tables16(anc, vals, 1, 0);
    PE_CHECK_EQ(pe_decode(huf_enc, 3, anc, n, &s, o16, 18), PE_OK);
    s.elem_size = 4;
    PE_CHECK_EQ(pe_decode(huf_enc, 3, anc, n, &s, o32, 36), PE_ERR_ARG);
    s.elem_size = 8;
    PE_CHECK_EQ(pe_decode_check(huf_enc, 3, anc, n, &s), PE_ERR_ARG);
    s.elem_size = 2;
    /* versions */
    anc[4] = 2;
    PE_CHECK_EQ(pe_decode(huf_enc, 3, anc, n, &s, o16, 18), PE_ERR_ARG);
    anc[4] = 1;
    anc[1] = 0;
    PE_CHECK_EQ(pe_decode(huf_enc, 3, anc, n, &s, o16, 18), PE_ERR_ARG);
    anc[1] = 1;
    /* the output buffer */
    PE_CHECK_EQ(pe_decode(huf_enc, 3, anc, n, &s, o16, 17), PE_ERR_ARG);
    PE_CHECK_EQ(pe_decode(huf_enc, 3, anc, n, &s, NULL, 18), PE_ERR_ARG);
    PE_CHECK_EQ(pe_decode(NULL, 3, anc, n, &s, o16, 18), PE_ERR_ARG);
    PE_CHECK_EQ(pe_decode(huf_enc, -1, anc, n, &s, o16, 18), PE_ERR_ARG);
}

int main(void)
{
    test_lut_width3_int16();
    test_lut_channels();
    test_lut_width7_int32();
    test_prune();
    test_refusals();
    test_huffman_int8();
    test_huffman_int16_wide();
    test_huffman_lookahead_and_zero_bit_codes();
    test_huffman_refusals();
    return PE_TEST_END("test_decode");
}
