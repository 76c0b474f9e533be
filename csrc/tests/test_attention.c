/* Plain C tests of the streaming attention and its baseline: argument and
 * scratch checks, exact cases (flat rows give the exact mean of V, a
 * dominant key gives its V row), agreement of the fold modes with the
 * materialising baseline, multi-head = per-head calls, and scratch that does
 * not grow with the number of keys. Scratch is malloc'ed at exactly the
 * queried size so that AddressSanitizer catches any overrun.
 * Bit-exactness against an integer model lives in tests/test_attention.py. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "pyembed/pe_attention.h"
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_transformer.h"
#include "pe_test.h"

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static int8_t rnd8(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (int8_t)(int32_t)((rng_state >> 24) & 0xFFu);
}

static void fill(int8_t *x, size_t count)
{
    size_t i;
    for (i = 0; i < count; i++) {
        x[i] = rnd8();
    }
}

static pe_attn_params default_params(void)
{
    pe_attn_params p;
    memset(&p, 0, sizeof p);
    /* real multiplier ~0.707 * 2^13: one octave of weight per ~740 of score */
    p.score_quant.multiplier = 1518500250; /* ~0.7071 in Q31 */
    p.score_quant.shift = 13;
    p.block = 8;
    p.fold = PE_ATTN_FOLD_LATE;
    return p;
}

/* Runs the streaming kernel with exactly the queried scratch. */
static pe_status run_nf(const pe_attn_params *p, const pe_attn_dims *dm, const int8_t *q,
                        const int8_t *k, const int8_t *v, int32_t *out, pe_stats *stats)
{
    pe_context ctx;
    int32_t need = 0;
    pe_status st = pe_attention_nf_get_buffer_size(p, dm, &need);
    if (st != PE_OK) {
        return st;
    }
    ctx.buf = malloc((size_t)need);
    ctx.size = need;
    ctx.stats = stats;
    st = pe_attention_nf_s8(&ctx, p, dm, q, k, v, out);
    free(ctx.buf);
    return st;
}

static pe_status run_conv(const pe_attn_params *p, pe_attn_baseline kind, const pe_attn_dims *dm,
                          const int8_t *q, const int8_t *k, const int8_t *v, int32_t *out,
                          pe_stats *stats)
{
    pe_context ctx;
    int32_t need = 0;
    pe_status st = pe_attention_conv_get_buffer_size(p, kind, dm, &need);
    if (st != PE_OK) {
        return st;
    }
    ctx.buf = malloc((size_t)need);
    ctx.size = need;
    ctx.stats = stats;
    st = pe_attention_conv_s8(&ctx, p, kind, dm, q, k, v, out);
    free(ctx.buf);
    return st;
}

static void bad_arguments(void)
{
    int8_t q[32], k[32], v[32];
    int32_t out[32];
    int32_t lo[2] = {0, 1}, hi[2] = {2, 1};
    int32_t need = 0;
    uint8_t small[16];
    pe_context ctx;
    pe_attn_dims dm = {2, 2, 4, 2, 1};
    pe_attn_params p = default_params();
    memset(q, 1, sizeof q);
    memset(k, 1, sizeof k);
    memset(v, 1, sizeof v);

    PE_CHECK_EQ(run_nf(&p, &dm, q, k, v, out, NULL), PE_OK);
    dm.d = 0;
    PE_CHECK_EQ(run_nf(&p, &dm, q, k, v, out, NULL), PE_ERR_ARG);
    dm.d = 4;
    dm.m = 0;
    PE_CHECK_EQ(run_nf(&p, &dm, q, k, v, out, NULL), PE_ERR_ARG);
    PE_CHECK_EQ(run_conv(&p, PE_ATTN_BASE_ROW, &dm, q, k, v, out, NULL), PE_ERR_ARG);
    dm.m = 2;
    dm.n = 0;
    PE_CHECK_EQ(run_nf(&p, &dm, q, k, v, out, NULL), PE_ERR_ARG);
    dm.n = 2;
    p.block = 0;
    PE_CHECK_EQ(run_nf(&p, &dm, q, k, v, out, NULL), PE_ERR_ARG);
    p.block = 8;
    p.score_quant.multiplier = -1;
    PE_CHECK_EQ(run_nf(&p, &dm, q, k, v, out, NULL), PE_ERR_ARG);
    p.score_quant.multiplier = 1 << 30;
    p.score_quant.shift = 31;
    PE_CHECK_EQ(run_nf(&p, &dm, q, k, v, out, NULL), PE_ERR_ARG);
    p.score_quant.shift = 0;
    p.q_offset = 129;
    PE_CHECK_EQ(run_nf(&p, &dm, q, k, v, out, NULL), PE_ERR_ARG);
    p.q_offset = 0;
    p.fold = (pe_attn_fold)7;
    PE_CHECK_EQ(run_nf(&p, &dm, q, k, v, out, NULL), PE_ERR_ARG);
    p.fold = PE_ATTN_FOLD_LATE;
    /* a row whose key range is empty */
    p.key_begin = lo;
    p.key_end = hi;
    PE_CHECK_EQ(run_nf(&p, &dm, q, k, v, out, NULL), PE_ERR_ARG);
    PE_CHECK_EQ(run_conv(&p, PE_ATTN_BASE_ROW, &dm, q, k, v, out, NULL), PE_ERR_ARG);
    hi[1] = 3; /* beyond m */
    PE_CHECK_EQ(run_nf(&p, &dm, q, k, v, out, NULL), PE_ERR_ARG);
    hi[1] = 2;
    PE_CHECK_EQ(run_nf(&p, &dm, q, k, v, out, NULL), PE_OK);
    p.key_end = NULL; /* only one of the pair */
    PE_CHECK_EQ(run_nf(&p, &dm, q, k, v, out, NULL), PE_ERR_ARG);
    p.key_begin = NULL;
    /* NULL data, scratch missing or too small */
    PE_CHECK_EQ(pe_attention_nf_get_buffer_size(&p, &dm, &need), PE_OK);
    ctx.buf = small;
    ctx.size = need - 1;
    ctx.stats = NULL;
    PE_CHECK_EQ(pe_attention_nf_s8(&ctx, &p, &dm, q, k, v, out), PE_ERR_SCRATCH);
    ctx.buf = NULL;
    ctx.size = 1 << 20;
    PE_CHECK_EQ(pe_attention_nf_s8(&ctx, &p, &dm, q, k, v, out), PE_ERR_SCRATCH);
    PE_CHECK_EQ(pe_attention_conv_s8(&ctx, &p, PE_ATTN_BASE_ROW, &dm, q, k, v, out),
                PE_ERR_SCRATCH);
    PE_CHECK_EQ(pe_attention_nf_s8(&ctx, &p, &dm, NULL, k, v, out), PE_ERR_ARG);
    PE_CHECK_EQ(pe_attention_nf_s8(NULL, &p, &dm, q, k, v, out), PE_ERR_ARG);
    PE_CHECK_EQ(pe_attention_conv_get_buffer_size(&p, (pe_attn_baseline)5, &dm, &need),
                PE_ERR_ARG);
    /* a score matrix beyond int32 bytes */
    dm.n = 1 << 20;
    dm.m = 1 << 20;
    PE_CHECK_EQ(pe_attention_conv_get_buffer_size(&p, PE_ATTN_BASE_MATRIX, &dm, &need),
                PE_ERR_OVERFLOW);
}

/* All keys equal: every weight is the same, the output is the exact mean of
 * V rounded to 16 fraction bits, for every fold and the baseline. */
static void flat_rows(void)
{
    enum { N = 3, M = 37, D = 8, DV = 3 };
    int8_t q[N * D], k[M * D], v[M * DV];
    int32_t out[N * DV];
    pe_attn_dims dm = {N, M, D, DV, 1};
    pe_attn_params p = default_params();
    int32_t i, c, j, f;
    fill(q, sizeof q);
    fill(v, sizeof v);
    for (j = 0; j < M; j++) {
        memset(k + j * D, 5, D);
    }
    p.v_offset = 3;
    for (f = 0; f < 4; f++) {
        pe_status st;
        if (f < 3) {
            p.fold = (pe_attn_fold)f;
            st = run_nf(&p, &dm, q, k, v, out, NULL);
        } else {
            st = run_conv(&p, PE_ATTN_BASE_ROW, &dm, q, k, v, out, NULL);
        }
        PE_CHECK_EQ(st, PE_OK);
        for (c = 0; c < DV; c++) {
            int64_t sum = 0;
            int64_t want;
            for (j = 0; j < M; j++) {
                sum += (int64_t)v[j * DV + c] + p.v_offset;
            }
            /* round(sum * 2^16 / M), halves away from zero */
            want = (sum * 65536 + (sum >= 0 ? M / 2 : -(M / 2))) / M;
            for (i = 0; i < N; i++) {
                PE_CHECK(out[i * DV + c] - want <= 1 && want - out[i * DV + c] <= 1);
            }
        }
    }
}

/* One key far above the rest: the output is that key's V row. */
static void dominant_key(void)
{
    enum { N = 2, M = 200, D = 4, DV = 2 };
    int8_t q[N * D], k[M * D], v[M * DV];
    int32_t out[N * DV];
    pe_attn_dims dm = {N, M, D, DV, 1};
    pe_attn_params p = default_params();
    const int32_t hot = 190; /* in the last block: the maximum arrives late */
    int32_t i, c;
    memset(q, 100, sizeof q);
    memset(k, 0, sizeof k);
    memset(k + hot * D, 120, D);
    fill(v, sizeof v);
    for (i = 0; i < 2; i++) {
        pe_stats st;
        memset(&st, 0, sizeof st);
        p.fold = (pe_attn_fold)i;
        PE_CHECK_EQ(run_nf(&p, &dm, q, k, v, out, &st), PE_OK);
        for (c = 0; c < N * DV; c++) {
            PE_CHECK_EQ(out[c], (int32_t)v[hot * DV + c % DV] * 65536);
        }
        PE_CHECK(st.rescales >= (uint64_t)N);
        PE_CHECK_EQ(st.exps, (uint64_t)(N * M * (i + 1)));
    }
}

static int32_t max_abs_diff(const int32_t *a, const int32_t *b, int32_t count)
{
    int32_t i, worst = 0;
    for (i = 0; i < count; i++) {
        const int32_t dlt = a[i] > b[i] ? a[i] - b[i] : b[i] - a[i];
        worst = dlt > worst ? dlt : worst;
    }
    return worst;
}

/* Random inputs with key ranges and two heads: folds and baselines agree
 * within a few output LSBs; a two-head call equals two one-head calls; the
 * matrix baseline equals the row baseline bit for bit. */
static void folds_heads_and_baselines(void)
{
    enum { N = 9, M = 150, D = 12, DV = 3, H = 2 };
    static int8_t q[N * D * H], k[M * D * H], v[M * DV * H];
    static int8_t q1[N * D], k1[M * D], v1[M * DV];
    static int32_t late[N * DV * H], early[N * DV * H], row[N * DV * H], mat[N * DV * H];
    static int32_t single[N * DV];
    int32_t lo[N], hi[N];
    pe_attn_dims dm = {N, M, D, DV, H};
    pe_attn_dims d1 = {N, M, D, DV, 1};
    pe_attn_params p = default_params();
    int32_t i, j, h, c;
    fill(q, sizeof q);
    fill(k, sizeof k);
    fill(v, sizeof v);
    for (i = 0; i < N; i++) {
        lo[i] = i * 11;
        hi[i] = lo[i] + 1 + i * 15 > M ? M : lo[i] + 1 + i * 15;
    }
    p.key_begin = lo;
    p.key_end = hi;
    p.q_offset = -3;
    p.k_offset = 7;
    p.v_offset = 128;
    p.block = 16;
    p.fold = PE_ATTN_FOLD_LATE;
    PE_CHECK_EQ(run_nf(&p, &dm, q, k, v, late, NULL), PE_OK);
    p.fold = PE_ATTN_FOLD_EARLY;
    PE_CHECK_EQ(run_nf(&p, &dm, q, k, v, early, NULL), PE_OK);
    PE_CHECK_EQ(run_conv(&p, PE_ATTN_BASE_ROW, &dm, q, k, v, row, NULL), PE_OK);
    PE_CHECK_EQ(run_conv(&p, PE_ATTN_BASE_MATRIX, &dm, q, k, v, mat, NULL), PE_OK);
    PE_CHECK_EQ(max_abs_diff(row, mat, N * DV * H), 0);
    /* 256 * 2^16 full scale: a few LSB of agreement is ~1e-7 relative */
    PE_CHECK(max_abs_diff(late, row, N * DV * H) <= 8);
    PE_CHECK(max_abs_diff(early, row, N * DV * H) <= 8);
    for (h = 0; h < H; h++) {
        for (i = 0; i < N; i++) {
            memcpy(q1 + i * D, q + (i * H + h) * D, D);
        }
        for (j = 0; j < M; j++) {
            memcpy(k1 + j * D, k + (j * H + h) * D, D);
            memcpy(v1 + j * DV, v + (j * H + h) * DV, DV);
        }
        p.fold = PE_ATTN_FOLD_LATE;
        PE_CHECK_EQ(run_nf(&p, &d1, q1, k1, v1, single, NULL), PE_OK);
        for (i = 0; i < N; i++) {
            for (c = 0; c < DV; c++) {
                PE_CHECK_EQ(single[i * DV + c], late[(i * H + h) * DV + c]);
            }
        }
    }
}

/* Peak scratch of the streaming kernel is the same for 50 and 5000 keys;
 * the row baseline's grows with them. */
static void scratch_independent_of_keys(void)
{
    enum { D = 16, DV = 2, MBIG = 5000 };
    static int8_t q[D], k[MBIG * D], v[MBIG * DV];
    int32_t out[DV];
    pe_attn_params p = default_params();
    pe_attn_dims small = {1, 50, D, DV, 1};
    pe_attn_dims big = {1, MBIG, D, DV, 1};
    pe_stats s1, s2, s3;
    memset(&s1, 0, sizeof s1);
    memset(&s2, 0, sizeof s2);
    memset(&s3, 0, sizeof s3);
    fill(q, sizeof q);
    fill(k, sizeof k);
    fill(v, sizeof v);
    p.block = 64;
    PE_CHECK_EQ(run_nf(&p, &small, q, k, v, out, &s1), PE_OK);
    PE_CHECK_EQ(run_nf(&p, &big, q, k, v, out, &s2), PE_OK);
    PE_CHECK_EQ(run_conv(&p, PE_ATTN_BASE_ROW, &big, q, k, v, out, &s3), PE_OK);
    PE_CHECK_EQ(s1.peak_bytes, s2.peak_bytes);
    PE_CHECK(s2.peak_bytes <= 8 * DV + 4 * 64 + 2 * D + 7);
    PE_CHECK(s3.peak_bytes >= 4 * MBIG);
    PE_CHECK_EQ(s2.macs, (uint64_t)MBIG * (D + DV));
    PE_CHECK_EQ(s2.exps, (uint64_t)MBIG);
}

/* ---------------------------------------------- structured masks (#32) */

#define RN 11
#define RM 13
#define RH 2
#define RD 4
#define RDV 3

static void range_params(pe_xattn_params *p, pe_xattn_mode mode)
{
    memset(p, 0, sizeof(*p));
    p->mode = mode;
    p->dims.n = RN;
    p->dims.m = RM;
    p->dims.d = RD;
    p->dims.dv = RDV;
    p->dims.heads = RH;
    p->strides.q_row = RH * RD;
    p->strides.k_row = RH * RD;
    p->strides.v_row = RH * RDV;
    p->strides.out_row = RH * RDV;
    p->strides.q_head = RD;
    p->strides.k_head = RD;
    p->strides.v_head = RDV;
    p->strides.out_head = RDV;
    p->q_offset = 3;
    p->k_offset = -5;
    p->v_offset = 7;
    p->out_zero_point = -2;
    p->out_quant.multiplier = 1402433700;
    p->out_quant.shift = -9;
    p->score_quant.multiplier = 1288490189;
    p->score_quant.shift = -7;
    p->score_zero_point = 4;
    /* ADD: out = (s + 0) / 4 + (mask - 127) / 2 + 30: allowed code 127 gives
     * [-2, 62], masked code -128 at most -66, below every allowed value by
     * more than |diff_min| = 60: masked keys weigh exactly 0 */
    p->mask_add.input1_offset = 0;
    p->mask_add.input2_offset = -127;
    p->mask_add.output_offset = 30;
    p->mask_add.left_shift = 20;
    p->mask_add.input1_quant.multiplier = 1073741824;
    p->mask_add.input1_quant.shift = -1;
    p->mask_add.input2_quant.multiplier = 1073741824;
    p->mask_add.input2_quant.shift = 0;
    p->mask_add.output_quant.multiplier = 1073741824;
    p->mask_add.output_quant.shift = -19;
    p->mask_add.activation.min = -128;
    p->mask_add.activation.max = 127;
    p->mask_add.rounding = PE_ROUND_DOUBLE;
    p->softmax.mult = 1539316278;
    p->softmax.shift = 25;
    p->softmax.diff_min = -60;
    p->p_offset = 128;
    p->logit_quant.multiplier = 1500000000;
    p->logit_quant.shift = 14;
    p->block = 4;
    p->fold = PE_ATTN_FOLD_LATE;
    p->range_len = RM;
}

/* The per-query key range of each structured kind: TFLM mode equals the
 * full-row path with the equivalent n x m mask tensor, stream mode equals
 * pe_attention_nf_s8 with explicit per-row key_begin / key_end, and only
 * keys in range are counted (macs). */
static void structured_key_ranges(void)
{
    /* kind, lo, hi, len, and the expected [lo, hi) of rows 0 and RN-1,
     * row width (ROWS only) */
    static const int32_t cases[][9] = {
        {PE_XATTN_RANGE_UPPER, 0, 0, RM, 0, 1, 0, RN},                /* causal j <= i */
        {PE_XATTN_RANGE_UPPER, 0, 2, RM, 0, 3, 0, RM},                /* causal, offset 2 */
        {PE_XATTN_RANGE_LOWER | PE_XATTN_RANGE_UPPER, -2, 1, RM, 0, 2, 8, 12}, /* band */
        {PE_XATTN_RANGE_PADDING, 0, 0, 9, 0, 9, 0, 9},                /* keys >= 9 masked */
        {PE_XATTN_RANGE_UPPER | PE_XATTN_RANGE_PADDING, 0, 0, 7, 0, 1, 0, 7},
        /* stereo: image rows of 4, disparity 0..2 (keys x_q - 2 .. x_q of the row) */
        {PE_XATTN_RANGE_ROWS | PE_XATTN_RANGE_LOWER | PE_XATTN_RANGE_UPPER, -2, 0, RM, 0, 1, 8, 11,
         4}};
    int8_t q[RN * RH * RD], k[RM * RH * RD], v[RM * RH * RDV], mask[RN * RM];
    int8_t got[RN * RH * RDV], want[RN * RH * RDV];
    int32_t acc[RN * RH * RDV], kb[RN], ke[RN];
    uint8_t scratch[512];
    pe_context ctx = {scratch, (int32_t)sizeof(scratch), NULL};
    pe_stats stats;
    size_t c;
    int32_t i, j, x, lo, hi, keys;
    fill(q, sizeof(q));
    fill(k, sizeof(k));
    fill(v, sizeof(v));
    for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        pe_xattn_params full, ranged;
        range_params(&ranged, PE_XATTN_TFLM);
        ranged.range_kind = cases[c][0];
        ranged.range_lo = cases[c][1];
        ranged.range_hi = cases[c][2];
        ranged.range_len = cases[c][3];
        ranged.range_code = 127;
        ranged.range_width = cases[c][8];
        pe_xattn_key_range(&ranged, 0, &lo, &hi);
        PE_CHECK_EQ(lo, cases[c][4]);
        PE_CHECK_EQ(hi, cases[c][5]);
        pe_xattn_key_range(&ranged, RN - 1, &lo, &hi);
        PE_CHECK_EQ(lo, cases[c][6]);
        PE_CHECK_EQ(hi, cases[c][7]);
        keys = 0;
        for (i = 0; i < RN; i++) {
            pe_xattn_key_range(&ranged, i, &lo, &hi);
            kb[i] = lo;
            ke[i] = hi;
            keys += hi - lo;
            for (j = 0; j < RM; j++) {
                mask[i * RM + j] = (int8_t)(j >= lo && j < hi ? 127 : -128);
            }
        }
        range_params(&full, PE_XATTN_TFLM);
        full.has_mask = 1;
        full.mask_row = RM;
        PE_CHECK_EQ(pe_xattn_s8(&ctx, &full, q, k, v, mask, NULL, want), PE_OK);
        memset(&stats, 0, sizeof(stats));
        ctx.stats = &stats;
        PE_CHECK_EQ(pe_xattn_s8(&ctx, &ranged, q, k, v, NULL, NULL, got), PE_OK);
        ctx.stats = NULL;
        PE_CHECK_EQ(memcmp(got, want, sizeof(got)), 0);
        PE_CHECK_EQ(stats.macs, (uint64_t)RH * (uint64_t)keys * (RD + RDV));
        PE_CHECK(keys < RN * RM);
        /* stream mode: the streaming kernel on explicit per-row ranges */
        ranged.mode = PE_XATTN_STREAM;
        PE_CHECK_EQ(pe_xattn_s8(&ctx, &ranged, q, k, v, NULL, NULL, got), PE_OK);
        {
            pe_attn_params ap;
            pe_attn_dims ad = {RN, RM, RD, RDV, RH};
            int32_t need;
            uint8_t *buf;
            memset(&ap, 0, sizeof(ap));
            ap.q_offset = ranged.q_offset;
            ap.k_offset = ranged.k_offset;
            ap.v_offset = ranged.v_offset;
            ap.score_quant = ranged.logit_quant;
            ap.block = ranged.block;
            ap.fold = ranged.fold;
            ap.key_begin = kb;
            ap.key_end = ke;
            PE_CHECK_EQ(pe_attention_nf_get_buffer_size(&ap, &ad, &need), PE_OK);
            buf = (uint8_t *)malloc((size_t)need);
            {
                pe_context nctx = {buf, need, NULL};
                PE_CHECK_EQ(pe_attention_nf_s8(&nctx, &ap, &ad, q, k, v, acc), PE_OK);
            }
            free(buf);
            for (x = 0; x < RN * RH * RDV; x++) {
                int32_t y = pe_fx_requant(acc[x], ranged.out_quant.multiplier,
                                          ranged.out_quant.shift) + ranged.out_zero_point;
                want[x] = (int8_t)pe_fx_clamp(y, -128, 127);
            }
            PE_CHECK_EQ(memcmp(got, want, sizeof(got)), 0);
        }
    }
    {
        /* malformed ranges: a row without keys, a length beyond m, a mask
         * tensor as well, an unknown kind */
        pe_xattn_params p;
        int32_t need;
        range_params(&p, PE_XATTN_TFLM);
        p.range_kind = PE_XATTN_RANGE_UPPER;
        p.range_hi = -1; /* row 0 would see no key */
        PE_CHECK_EQ(pe_xattn_get_buffer_size(&p, &need), PE_ERR_ARG);
        p.range_hi = 0;
        PE_CHECK_EQ(pe_xattn_get_buffer_size(&p, &need), PE_OK);
        p.range_len = RM + 1;
        PE_CHECK_EQ(pe_xattn_get_buffer_size(&p, &need), PE_ERR_ARG);
        p.range_len = RM;
        p.has_mask = 1;
        PE_CHECK_EQ(pe_xattn_get_buffer_size(&p, &need), PE_ERR_ARG);
        p.has_mask = 0;
        p.range_kind = 8;
        PE_CHECK_EQ(pe_xattn_get_buffer_size(&p, &need), PE_ERR_ARG);
        p.range_kind = PE_XATTN_RANGE_LOWER;
        p.range_lo = RM; /* row 0 starts past the last key */
        PE_CHECK_EQ(pe_xattn_get_buffer_size(&p, &need), PE_ERR_ARG);
        p.range_lo = -3;
        p.range_code = 128;
        PE_CHECK_EQ(pe_xattn_get_buffer_size(&p, &need), PE_ERR_ARG);
        p.range_code = 0;
        p.range_kind = PE_XATTN_RANGE_ROWS;
        p.range_width = 0; /* rows need a width in 1..m */
        PE_CHECK_EQ(pe_xattn_get_buffer_size(&p, &need), PE_ERR_ARG);
        p.range_width = RM + 1;
        PE_CHECK_EQ(pe_xattn_get_buffer_size(&p, &need), PE_ERR_ARG);
        p.range_width = 4;
        PE_CHECK_EQ(pe_xattn_get_buffer_size(&p, &need), PE_OK);
    }
}

int main(void)
{
    bad_arguments();
    flat_rows();
    dominant_key();
    folds_heads_and_baselines();
    scratch_independent_of_keys();
    structured_key_ranges();
    return PE_TEST_END("test_attention");
}
