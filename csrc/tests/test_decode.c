/* test_decode.c - C unit tests of TFLM's DECODE (pe_decode.h): LUT streams of
 * known indices at widths 1, 3 and 7, per-channel tables on axis 0 and on the
 * last axis, prune masks with per-channel zero points, and every malformed
 * header / length refused with a status before anything is read out of
 * bounds. Bit-exactness with the TFLM interpreter is tested from Python
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
    anc[0] = PE_DECODE_TYPE_HUFFMAN;
    PE_CHECK_EQ(pe_decode(enc, 2, anc, 20, &s, out, 8), PE_ERR_UNSUPPORTED);
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

int main(void)
{
    test_lut_width3_int16();
    test_lut_channels();
    test_lut_width7_int32();
    test_prune();
    test_refusals();
    return PE_TEST_END("test_decode");
}
