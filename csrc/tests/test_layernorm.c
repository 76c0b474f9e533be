/* test_layernorm.c - PE_LAYERNORM's row program (pe_layernorm_s8) against
 * the same kernels run on whole tensors: MEAN over the last axis (pe_reduce
 * through pe_math_invoke), MUL broadcasting one value per row, ADD of a row
 * constant; malformed words, missing constants and short scratch refused;
 * a LUT step against its table; PE_LAYERNORM_HP against its formula in double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pe_test.h"
#include "pyembed/pe_layernorm.h"
#include "pyembed/pe_eltwise.h"
#include "pyembed/pe_math_ops.h"
#include "pyembed/pe_reduce.h"

#define ROWS 3
#define DEPTH 5

static uint32_t rng_state = 777u;

static int8_t rnd8(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return (int8_t)(int32_t)((rng_state >> 24) & 0xFF);
}

/* slots: 0 x, 1 out, 2 mean (1), 3 x * mean (D); steps:
 *   MEAN(x) -> 2; MUL(x, 2) -> 3; ADD(3, const 1 [D]) -> 1 */
static int32_t build(int32_t *w)
{
    int32_t n = 0;
    w[n++] = ROWS;
    w[n++] = DEPTH;
    w[n++] = 4;
    w[n++] = 3;
    w[n++] = DEPTH;
    w[n++] = DEPTH;
    w[n++] = 1;
    w[n++] = DEPTH;
    /* MEAN: mode, in_zp, out_zp, mult, shift, axis_mask, rank, dims */
    w[n++] = 60; w[n++] = 0; w[n++] = PE_LN_NONE; w[n++] = 2; w[n++] = 8;
    w[n++] = 1; w[n++] = 3; w[n++] = -2; w[n++] = 1 << 30; w[n++] = 1; w[n++] = 1; w[n++] = 1; w[n++] = DEPTH;
    /* MUL: in1_off, in2_off, out_off, m, s, act_min, act_max */
    w[n++] = 8; w[n++] = 0; w[n++] = 2; w[n++] = 3; w[n++] = 7;
    w[n++] = 4; w[n++] = 2; w[n++] = -1; w[n++] = 1288490189; w[n++] = -6; w[n++] = -128; w[n++] = 127;
    /* ADD: offsets, left_shift, m1, s1, m2, s2, m_out, s_out, act */
    w[n++] = 7; w[n++] = 3; w[n++] = -1; w[n++] = 1; w[n++] = 12;
    w[n++] = 1; w[n++] = -3; w[n++] = 5; w[n++] = 20; w[n++] = 1073741824; w[n++] = 0;
    w[n++] = 1431655765; w[n++] = -1; w[n++] = 1717986918; w[n++] = -19; w[n++] = -100; w[n++] = 127;
    return n;
}

static void matches_whole_tensor_kernels(void)
{
    int32_t w[64], n, size, k;
    int8_t x[ROWS * DEPTH], beta[DEPTH], got[ROWS * DEPTH], want[ROWS * DEPTH];
    int8_t mean[ROWS], prod[ROWS * DEPTH], scratch[DEPTH + 1];
    const int8_t *consts[2];
    int32_t counts[2];
    pe_context ctx;
    pe_mul_params mp;
    pe_add_params ap;
    pe_dims dx = {1, 1, ROWS, DEPTH}, dm = {1, 1, ROWS, 1}, db = {1, 1, 1, DEPTH};
    const int32_t dims[2] = {ROWS, DEPTH};
    n = build(w);
    for (k = 0; k < ROWS * DEPTH; k++) {
        x[k] = rnd8();
    }
    for (k = 0; k < DEPTH; k++) {
        beta[k] = rnd8();
    }
    PE_CHECK_EQ(pe_layernorm_get_buffer_size(w, n, &size), PE_OK);
    PE_CHECK_EQ(size, DEPTH + 1);
    consts[0] = NULL;
    consts[1] = beta;
    counts[0] = 0;
    counts[1] = DEPTH;
    ctx.buf = scratch;
    ctx.size = (int32_t)sizeof(scratch);
    ctx.stats = NULL;
    PE_CHECK_EQ(pe_layernorm_s8(&ctx, w, n, x, consts, counts, 1, got), PE_OK);
    /* the same three operators on the whole [ROWS, DEPTH] tensor */
    {
        pe_reduce_params rp;
        rp.mode = PE_REDUCE_MEAN;
        rp.input_zero_point = 3;
        rp.output_zero_point = -2;
        rp.multiplier = 1 << 30;
        rp.shift = 1;
        PE_CHECK_EQ(pe_reduce_s8(NULL, &rp, dims, 2, 2u, x, ROWS, mean), PE_OK);
    }
    mp.input1_offset = 4;
    mp.input2_offset = 2;
    mp.output_offset = -1;
    mp.output_quant.multiplier = 1288490189;
    mp.output_quant.shift = -6;
    mp.activation.min = -128;
    mp.activation.max = 127;
    mp.rounding = PE_ROUND_DOUBLE;
    PE_CHECK_EQ(pe_mul_s8(NULL, &mp, &dx, x, &dm, mean, &dx, prod), PE_OK);
    ap.input1_offset = 1;
    ap.input2_offset = -3;
    ap.output_offset = 5;
    ap.left_shift = 20;
    ap.input1_quant.multiplier = 1073741824;
    ap.input1_quant.shift = 0;
    ap.input2_quant.multiplier = 1431655765;
    ap.input2_quant.shift = -1;
    ap.output_quant.multiplier = 1717986918;
    ap.output_quant.shift = -19;
    ap.activation.min = -100;
    ap.activation.max = 127;
    ap.rounding = PE_ROUND_DOUBLE;
    PE_CHECK_EQ(pe_add_s8(NULL, &ap, &dx, prod, &db, beta, &dx, want), PE_OK);
    PE_CHECK_EQ(memcmp(got, want, sizeof(got)), 0);
    /* short scratch */
    ctx.size = DEPTH;
    PE_CHECK_EQ(pe_layernorm_s8(&ctx, w, n, x, consts, counts, 1, got), PE_ERR_SCRATCH);
    ctx.size = (int32_t)sizeof(scratch);
    /* a constant that is not there, or of the wrong length */
    PE_CHECK_EQ(pe_layernorm_s8(&ctx, w, n, x, consts, counts, 0, got), PE_ERR_ARG);
    counts[1] = DEPTH - 1;
    PE_CHECK_EQ(pe_layernorm_s8(&ctx, w, n, x, consts, counts, 1, got), PE_ERR_ARG);
    counts[1] = DEPTH;
}

static void malformed_words(void)
{
    int32_t w[64], bad[64], n, size;
    n = build(w);
    PE_CHECK_EQ(pe_layernorm_get_buffer_size(w, n - 1, &size), PE_ERR_ARG);     /* truncated */
    PE_CHECK_EQ(pe_layernorm_get_buffer_size(w, 3, &size), PE_ERR_ARG);
    PE_CHECK_EQ(pe_layernorm_get_buffer_size(NULL, n, &size), PE_ERR_ARG);
    PE_CHECK_EQ(pe_layernorm_get_buffer_size(w, n, NULL), PE_ERR_ARG);
    memcpy(bad, w, sizeof(w));
    bad[6] = 2; /* a slot of neither 1 nor DEPTH values */
    PE_CHECK_EQ(pe_layernorm_get_buffer_size(bad, n, &size), PE_ERR_ARG);
    memcpy(bad, w, sizeof(w));
    bad[11] = 0; /* MEAN writes slot 0 (the input) */
    PE_CHECK_EQ(pe_layernorm_get_buffer_size(bad, n, &size), PE_ERR_ARG);
    memcpy(bad, w, sizeof(w));
    bad[11] = 9; /* a slot that does not exist */
    PE_CHECK_EQ(pe_layernorm_get_buffer_size(bad, n, &size), PE_ERR_ARG);
    memcpy(bad, w, sizeof(w));
    bad[10] = 2; /* a one-input operator with a second operand */
    PE_CHECK_EQ(pe_layernorm_get_buffer_size(bad, n, &size), PE_ERR_ARG);
    memcpy(bad, w, sizeof(w));
    bad[8] = 9; /* not an operator a row program runs */
    PE_CHECK_EQ(pe_layernorm_get_buffer_size(bad, n, &size), PE_ERR_ARG);
    memcpy(bad, w, sizeof(w));
    bad[12] = 1000; /* a word count past the end */
    PE_CHECK_EQ(pe_layernorm_get_buffer_size(bad, n, &size), PE_ERR_ARG);
    memcpy(bad, w, sizeof(w));
    bad[2] = 65; /* too many slots */
    PE_CHECK_EQ(pe_layernorm_get_buffer_size(bad, n, &size), PE_ERR_ARG);
    memcpy(bad, w, sizeof(w));
    bad[0] = 0x40000000; /* rows * depth overflows int32 */
    PE_CHECK_EQ(pe_layernorm_get_buffer_size(bad, n, &size), PE_ERR_ARG);
}

/* PE_LAYERNORM_HP against the same formula in double: every output within
 * one LSB of round(out_zp + (g * y + b) / 2^16), y = c / sqrt(Q). */
static void hp_against_double(void)
{
    enum { R = 4, DD = 24 };
    int8_t x[R * DD], out[R * DD];
    int32_t g[DD], b[DD], r, i, trial;
    const int64_t eps = 37;
    for (trial = 0; trial < 20; trial++) {
        const int32_t xz = (int32_t)rnd8() / 2, oz = (int32_t)rnd8() / 4;
        for (i = 0; i < R * DD; i++) {
            x[i] = trial == 0 && i < DD ? (int8_t)5 : rnd8(); /* row 0 of trial 0 constant */
        }
        for (i = 0; i < DD; i++) {
            g[i] = (int32_t)rnd8() * 40000;
            b[i] = (int32_t)rnd8() * 20000;
        }
        PE_CHECK_EQ(pe_layernorm_hp_s8(R, DD, xz, oz, eps, x, g, b, out), PE_OK);
        for (r = 0; r < R; r++) {
            double s = 0.0, ss = 0.0, q;
            for (i = 0; i < DD; i++) {
                const double v = (double)(x[r * DD + i] - xz);
                s += v;
                ss += v * v;
            }
            q = DD * ss - s * s + (double)eps;
            for (i = 0; i < DD; i++) {
                const double c = DD * (double)(x[r * DD + i] - xz) - s;
                double want = oz + (c / sqrt(q) * g[i] + b[i]) / 65536.0;
                long w = lround(want);
                w = w < -128 ? -128 : (w > 127 ? 127 : w);
                PE_CHECK(labs((long)out[r * DD + i] - w) <= 1);
            }
        }
    }
    /* arguments */
    PE_CHECK_EQ(pe_layernorm_hp_s8(R, 1, 0, 0, eps, x, g, b, out), PE_ERR_ARG);
    PE_CHECK_EQ(pe_layernorm_hp_s8(R, DD, 0, 0, 0, x, g, b, out), PE_ERR_ARG);
    PE_CHECK_EQ(pe_layernorm_hp_s8(R, DD, 0, 128, eps, x, g, b, out), PE_ERR_ARG);
    PE_CHECK_EQ(pe_layernorm_hp_s8(0, DD, 0, 0, eps, x, g, b, out), PE_ERR_ARG);
    PE_CHECK_EQ(pe_layernorm_hp_s8(R, DD, 0, 0, eps, NULL, g, b, out), PE_ERR_ARG);
    g[3] = 1 << 24;
    PE_CHECK_EQ(pe_layernorm_hp_s8(R, DD, 0, 0, eps, x, g, b, out), PE_ERR_ARG);
}

/* A LUT step (a float island's table): rows x through a 256-entry table
 * given as constant 1; a slot as the table, words, or a short table refused. */
static void lut_step(void)
{
    int32_t w[16], k;
    int8_t x[ROWS * DEPTH], table[256], got[ROWS * DEPTH];
    const int8_t *consts[2];
    int32_t counts[2];
    pe_context ctx = {NULL, 0, NULL};
    const int32_t n = 4 + 2 + 5;
    w[0] = ROWS;
    w[1] = DEPTH;
    w[2] = 2;
    w[3] = 1;
    w[4] = DEPTH;
    w[5] = DEPTH;
    w[6] = PE_LN_STEP_LUT;
    w[7] = 0;
    w[8] = -1;
    w[9] = 1;
    w[10] = 0;
    for (k = 0; k < 256; k++) {
        table[k] = rnd8();
    }
    for (k = 0; k < ROWS * DEPTH; k++) {
        x[k] = rnd8();
    }
    x[0] = -128;
    x[1] = 127;
    consts[0] = NULL;
    consts[1] = table;
    counts[0] = 0;
    counts[1] = 256;
    PE_CHECK_EQ(pe_layernorm_s8(&ctx, w, n, x, consts, counts, 1, got), PE_OK);
    for (k = 0; k < ROWS * DEPTH; k++) {
        PE_CHECK_EQ(got[k], table[(int32_t)x[k] + 128]);
    }
    counts[1] = 255; /* not a table */
    PE_CHECK_EQ(pe_layernorm_s8(&ctx, w, n, x, consts, counts, 1, got), PE_ERR_ARG);
    counts[1] = DEPTH; /* a row, not a table */
    PE_CHECK_EQ(pe_layernorm_s8(&ctx, w, n, x, consts, counts, 1, got), PE_ERR_ARG);
    counts[1] = 256;
    w[8] = 0; /* the table must be a constant */
    PE_CHECK_EQ(pe_layernorm_s8(&ctx, w, n, x, consts, counts, 1, got), PE_ERR_ARG);
    w[8] = PE_LN_NONE;
    PE_CHECK_EQ(pe_layernorm_s8(&ctx, w, n, x, consts, counts, 1, got), PE_ERR_ARG);
    w[8] = -1;
    w[10] = 1; /* no words */
    w[11] = 0;
    PE_CHECK_EQ(pe_layernorm_s8(&ctx, w, n + 1, x, consts, counts, 1, got), PE_ERR_ARG);
}

int main(void)
{
    matches_whole_tensor_kernels();
    lut_step();
    malformed_words();
    hp_against_double();
    return PE_TEST_END("test_layernorm");
}
