/*
 * fuzz_attention.c - libFuzzer harness for the streaming attention
 * (pe_attention.h): norm-folded late / early / auto and the materialising
 * baselines (row and matrix).
 *
 * The reference below is written from the header's arithmetic with 128-bit
 * integers instead of the kernel's shift tricks: scores, the Q22 base-2
 * logits t_j = round(s_j * M * 2^(shift - 31)) (half up), the integer
 * running maximum in octaves with rounding rescales per block, the exp2
 * weights (pe_fx_exp2_neg_q22, the shared primitive tested on its own), the
 * late division and the early / baseline normalisation. Every output, and
 * the macs / exps / rescales counters, must match bit for bit; the row and
 * matrix baselines must agree; auto must equal the fold choose_fold names.
 * Inputs can be drawn at the extremes (every value -128 with offsets -127,
 * deep heads) to reach the int32 score limit the header allows.
 */
#include "fuzz_common.h"
#include "pyembed/pe_attention.h"

#define MAX_ELEMS (1 << 15)
/* n * m * heads * (d + dv) at most: the 128-bit reference and both baselines
 * under ASan + UBSan take ~0.4 us per unit, so 2^20 keeps a case under ~0.5 s
 * (2^22 let one take 1.2 s of CPU, a 10 s timeout on a loaded machine) */
#define MAX_WORK (1 << 20)

typedef __int128 i128;

static i128 floor_div128(i128 a, i128 b) /* b > 0 */
{
    i128 q = a / b;
    if (a % b != 0 && a < 0) {
        q -= 1;
    }
    return q;
}

static i128 pow2(int k)
{
    return (i128)1 << k;
}

/* round(s * mult * 2^(shift - 31)), halves up */
static int64_t ref_log2(int32_t s, int32_t mult, int32_t shift)
{
    const i128 prod = (i128)s * mult;
    if (shift >= 0) {
        return (int64_t)floor_div128(prod * pow2(shift) + pow2(30), pow2(31));
    }
    return (int64_t)floor_div128(prod + pow2(30 - shift), pow2(31 - shift));
}

/* round(x / 2^k), halves up */
static int64_t ref_shift_round(int64_t x, int64_t k)
{
    if (k > 100) {
        return 0; /* |x| < 2^63 */
    }
    return (int64_t)floor_div128((i128)x + pow2((int)k - 1), pow2((int)k));
}

/* round(num / den), halves away from zero, den > 0 */
static int64_t ref_div_away(i128 num, i128 den)
{
    const i128 mag = num < 0 ? -num : num;
    const i128 q = (2 * mag + den) / (2 * den);
    return (int64_t)(num < 0 ? -q : q);
}

static int32_t ref_exp2(int64_t x)
{
    return pe_fx_exp2_neg_q22(x < (int64_t)INT32_MIN ? INT32_MIN : (int32_t)x);
}

typedef struct {
    pe_attn_params p;
    pe_attn_dims dm;
    const int8_t *q, *k, *v;
} attn_case;

typedef struct {
    uint64_t macs, exps, rescales;
} counts;

static int32_t score(const attn_case *a, int32_t h, int32_t i, int32_t j)
{
    const size_t qk = (size_t)a->dm.heads * (size_t)a->dm.d;
    int64_t s = 0;
    int32_t c;
    for (c = 0; c < a->dm.d; c++) {
        s += (int64_t)(a->q[(size_t)i * qk + (size_t)h * a->dm.d + c] + a->p.q_offset) *
             (a->k[(size_t)j * qk + (size_t)h * a->dm.d + c] + a->p.k_offset);
    }
    FZ_CHECK(s >= INT32_MIN && s <= INT32_MAX, "score %lld leaves int32 on an accepted case",
             (long long)s);
    return (int32_t)s;
}

static int32_t vval(const attn_case *a, int32_t h, int32_t j, int32_t c)
{
    return a->v[(size_t)j * a->dm.heads * a->dm.dv + (size_t)h * a->dm.dv + c] + a->p.v_offset;
}

/* The streaming pass: alpha, final octave maximum, and (acc != NULL) the
 * late-fold accumulators. */
static void ref_stream(const attn_case *a, int32_t h, int32_t i, int32_t lo, int32_t hi,
                       int64_t *acc, int64_t *alpha_out, int64_t *top_out, counts *cnt)
{
    int64_t alpha = 0, top = 0;
    int started = 0;
    int32_t b0, j, c;
    for (b0 = lo; b0 < hi; b0 += a->p.block) {
        const int32_t b1 = hi - b0 > a->p.block ? b0 + a->p.block : hi;
        int64_t tmax = INT64_MIN, top_new;
        for (j = b0; j < b1; j++) {
            const int64_t t =
                ref_log2(score(a, h, i, j), a->p.score_quant.multiplier, a->p.score_quant.shift);
            tmax = t > tmax ? t : tmax;
        }
        cnt->macs += (uint64_t)(b1 - b0) * (uint64_t)a->dm.d;
        top_new = (int64_t)-floor_div128(-(i128)tmax, pow2(PE_ATTN_LOG2_FRAC_BITS));
        if (!started) {
            top = top_new;
            started = 1;
        } else if (top_new > top) {
            alpha = ref_shift_round(alpha, top_new - top);
            if (acc) {
                for (c = 0; c < a->dm.dv; c++) {
                    acc[c] = ref_shift_round(acc[c], top_new - top);
                }
            }
            top = top_new;
            cnt->rescales++;
        }
        for (j = b0; j < b1; j++) {
            const int64_t t =
                ref_log2(score(a, h, i, j), a->p.score_quant.multiplier, a->p.score_quant.shift);
            const int32_t e = ref_exp2(t - top * ((int64_t)1 << PE_ATTN_LOG2_FRAC_BITS));
            alpha += e;
            if (acc) {
                for (c = 0; c < a->dm.dv; c++) {
                    acc[c] += (int64_t)e * vval(a, h, j, c);
                }
            }
        }
        cnt->exps += (uint64_t)(b1 - b0);
        if (acc) {
            cnt->macs += (uint64_t)(b1 - b0) * (uint64_t)a->dm.dv;
        }
    }
    *alpha_out = alpha;
    *top_out = top;
}

/* p = round(e * r / 2^b) with b = bit length of alpha, r = round(2^(b+30) / alpha) */
static int bit_length(uint64_t x)
{
    int b = 0;
    while (x) {
        b++;
        x >>= 1;
    }
    return b;
}

static void normalised_out(const attn_case *a, int32_t h, int32_t lo, int32_t hi,
                           const int32_t *e, int64_t alpha, int32_t *orow)
{
    const int b = bit_length((uint64_t)alpha);
    const int64_t r = (int64_t)floor_div128(pow2(b + 30) * 2 + alpha, 2 * (i128)alpha);
    int32_t j, c;
    for (c = 0; c < a->dm.dv; c++) {
        i128 acc = 0;
        for (j = lo; j < hi; j++) {
            const i128 pj = floor_div128((i128)e[j - lo] * r + pow2(b - 1), pow2(b));
            acc += pj * vval(a, h, j, c);
        }
        orow[c] = (int32_t)ref_div_away(acc, pow2(PE_ATTN_PROB_FRAC_BITS - PE_ATTN_OUT_FRAC_BITS));
    }
}

static void ref_nf(const attn_case *a, pe_attn_fold fold, int32_t *out, counts *cnt)
{
    int64_t *acc = (int64_t *)fz_alloc(sizeof(int64_t) * (size_t)a->dm.dv);
    int32_t *e = (int32_t *)fz_alloc(sizeof(int32_t) * (size_t)a->dm.m);
    int32_t h, i, c, j;
    for (h = 0; h < a->dm.heads; h++) {
        for (i = 0; i < a->dm.n; i++) {
            int32_t *orow = out + (size_t)i * a->dm.heads * a->dm.dv + (size_t)h * a->dm.dv;
            const int32_t lo = a->p.key_begin ? a->p.key_begin[i] : 0;
            const int32_t hi = a->p.key_end ? a->p.key_end[i] : a->dm.m;
            int64_t alpha, top;
            for (c = 0; c < a->dm.dv; c++) {
                acc[c] = 0;
            }
            if (fold == PE_ATTN_FOLD_EARLY) {
                ref_stream(a, h, i, lo, hi, NULL, &alpha, &top, cnt);
                for (j = lo; j < hi; j++) {
                    const int64_t t = ref_log2(score(a, h, i, j), a->p.score_quant.multiplier,
                                               a->p.score_quant.shift);
                    e[j - lo] = ref_exp2(t - top * ((int64_t)1 << PE_ATTN_LOG2_FRAC_BITS));
                }
                cnt->macs += (uint64_t)(hi - lo) * (uint64_t)(a->dm.d + a->dm.dv);
                cnt->exps += (uint64_t)(hi - lo);
                normalised_out(a, h, lo, hi, e, alpha, orow);
            } else {
                ref_stream(a, h, i, lo, hi, acc, &alpha, &top, cnt);
                for (c = 0; c < a->dm.dv; c++) {
                    orow[c] = (int32_t)ref_div_away((i128)acc[c] * pow2(PE_ATTN_OUT_FRAC_BITS),
                                                    alpha);
                }
            }
        }
    }
    free(acc);
    free(e);
}

static void ref_baseline(const attn_case *a, int32_t *out)
{
    int32_t *e = (int32_t *)fz_alloc(sizeof(int32_t) * (size_t)a->dm.m);
    int32_t h, i, j;
    for (h = 0; h < a->dm.heads; h++) {
        for (i = 0; i < a->dm.n; i++) {
            const int32_t lo = a->p.key_begin ? a->p.key_begin[i] : 0;
            const int32_t hi = a->p.key_end ? a->p.key_end[i] : a->dm.m;
            int64_t tmax = INT64_MIN, alpha = 0;
            for (j = lo; j < hi; j++) {
                const int64_t t = ref_log2(score(a, h, i, j), a->p.score_quant.multiplier,
                                           a->p.score_quant.shift);
                tmax = t > tmax ? t : tmax;
            }
            for (j = lo; j < hi; j++) {
                const int64_t t = ref_log2(score(a, h, i, j), a->p.score_quant.multiplier,
                                           a->p.score_quant.shift);
                e[j - lo] = ref_exp2(t - tmax);
                alpha += e[j - lo];
            }
            normalised_out(a, h, lo, hi, e, alpha,
                           out + (size_t)i * a->dm.heads * a->dm.dv + (size_t)h * a->dm.dv);
        }
    }
    free(e);
}

static void fill(fz_reader *r, int mode, int8_t *a, size_t n)
{
    if (mode == 1) {
        memset(a, 0x80, n); /* every value -128 */
    } else if (mode == 2) {
        memset(a, 0x7F, n);
    } else {
        fz_fill_s8(r, a, n);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size_in);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size_in)
{
    fz_reader r = {data, size_in};
    attn_case a;
    pe_attn_fold fold, chosen;
    pe_status s, qs;
    int32_t size = -1, i, mode;
    int32_t *kb = NULL, *ke = NULL, *got, *want;
    int8_t *q, *k, *v;
    size_t nq, nk, nv, nout;
    uint8_t *block;
    pe_context ctx;
    pe_stats stats;
    counts cnt = {0, 0, 0};

    memset(&a, 0, sizeof(a));
    a.dm.n = fz_wild(&r, 1, 8);
    a.dm.m = fz_wild(&r, 1, 200);
    a.dm.d = fz_bool(&r) ? fz_wild(&r, 1, 40) : fz_wild(&r, 1, PE_ATTN_MAX_DEPTH);
    a.dm.dv = fz_wild(&r, 1, 6);
    a.dm.heads = fz_wild(&r, 1, 3);
    a.p.q_offset = fz_wild(&r, -127, 128);
    a.p.k_offset = fz_wild(&r, -127, 128);
    a.p.v_offset = fz_wild(&r, -127, 128);
    a.p.score_quant.multiplier = (fz_u8(&r) & 15u) == 0 ? 0 : fz_wild(&r, 1 << 30, 0x7FFFFFFF);
    a.p.score_quant.shift = fz_wild(&r, -31, 30);
    a.p.block = fz_wild(&r, 1, 80);
    fold = (pe_attn_fold)fz_wild(&r, 0, 2);
    a.p.fold = fold;
    mode = fz_range(&r, 0, 5); /* 0-3 data from the input, 4: all -128, 5: all 127 */
    if (fz_verbose()) {
        fprintf(stderr,
                "case: n %d m %d d %d dv %d heads %d offs %d/%d/%d quant %d/%d block %d fold %d "
                "mode %d\n",
                a.dm.n, a.dm.m, a.dm.d, a.dm.dv, a.dm.heads, a.p.q_offset, a.p.k_offset,
                a.p.v_offset, a.p.score_quant.multiplier, a.p.score_quant.shift, a.p.block, fold,
                mode);
    }
    qs = pe_attention_nf_get_buffer_size(&a.p, &a.dm, &size);
    if (qs != PE_OK) {
        int8_t one[4] = {0};
        int32_t res[4];
        uint64_t scratch[32];
        ctx.buf = scratch;
        ctx.size = (int32_t)sizeof(scratch);
        ctx.stats = NULL;
        s = pe_attention_nf_s8(&ctx, &a.p, &a.dm, one, one, one, res);
        FZ_CHECK(s != PE_OK, "query said %d, kernel said OK", qs);
        /* the baseline ignores block: only a case its own query refuses */
        if (pe_attention_conv_get_buffer_size(&a.p, PE_ATTN_BASE_ROW, &a.dm, &size) != PE_OK) {
            s = pe_attention_conv_s8(&ctx, &a.p, PE_ATTN_BASE_ROW, &a.dm, one, one, one, res);
            FZ_CHECK(s != PE_OK, "baseline query refused, baseline said OK");
        }
        return 0;
    }
    nq = (size_t)a.dm.n * a.dm.heads * a.dm.d;
    nk = (size_t)a.dm.m * a.dm.heads * a.dm.d;
    nv = (size_t)a.dm.m * a.dm.heads * a.dm.dv;
    nout = (size_t)a.dm.n * a.dm.heads * a.dm.dv;
    if (nq > MAX_ELEMS || nk > MAX_ELEMS || nv > MAX_ELEMS || size > (1 << 22) ||
        (uint64_t)a.dm.n * a.dm.m * a.dm.heads * (a.dm.d + a.dm.dv) > MAX_WORK) {
        return 0;
    }
    if (fz_bool(&r)) { /* per-row key ranges, sometimes invalid */
        kb = (int32_t *)fz_alloc(sizeof(int32_t) * (size_t)a.dm.n);
        ke = (int32_t *)fz_alloc(sizeof(int32_t) * (size_t)a.dm.n);
        for (i = 0; i < a.dm.n; i++) {
            kb[i] = fz_wild(&r, 0, a.dm.m - 1);
            ke[i] = fz_wild(&r, kb[i] < a.dm.m ? kb[i] + 1 : a.dm.m, a.dm.m);
        }
        a.p.key_begin = kb;
        a.p.key_end = ke;
    }
    q = (int8_t *)fz_alloc(nq);
    k = (int8_t *)fz_alloc(nk);
    v = (int8_t *)fz_alloc(nv);
    fill(&r, mode == 4 ? 1 : (mode == 5 ? 2 : 0), q, nq);
    fill(&r, mode == 4 ? 1 : (mode == 5 ? 2 : 0), k, nk);
    fz_fill_s8(&r, v, nv);
    a.q = q;
    a.k = k;
    a.v = v;
    got = (int32_t *)fz_alloc(nout * sizeof(int32_t));
    want = (int32_t *)fz_alloc(nout * sizeof(int32_t));

    /* streaming kernel: one byte short, then exactly the query */
    memset(&stats, 0, sizeof(stats));
    block = (uint8_t *)fz_alloc((size_t)size + 7);
    fz_poison(block, (size_t)size + 7);
    ctx.buf = block + fz_range(&r, 0, 7);
    ctx.size = size - 1;
    ctx.stats = &stats;
    s = pe_attention_nf_s8(&ctx, &a.p, &a.dm, q, k, v, got);
    if (s == PE_ERR_ARG) { /* the key ranges are checked by the kernel, not the query */
        FZ_CHECK(kb != NULL, "PE_ERR_ARG for a case the query accepted, without key ranges");
        s = pe_attention_nf_choose_fold(&a.p, &a.dm, &chosen);
        FZ_CHECK(s == PE_ERR_ARG, "choose_fold accepts the ranges the kernel refused");
        goto done;
    }
    FZ_CHECK(s == PE_ERR_SCRATCH, "one byte short of the query: status %d", s);
    ctx.size = size;
    s = pe_attention_nf_s8(&ctx, &a.p, &a.dm, q, k, v, got);
    FZ_CHECK(s == PE_OK, "valid case refused: status %d", s);
    FZ_CHECK(pe_attention_nf_choose_fold(&a.p, &a.dm, &chosen) == PE_OK, "choose_fold");
    FZ_CHECK(chosen == PE_ATTN_FOLD_LATE || chosen == PE_ATTN_FOLD_EARLY, "chosen %d", chosen);
    FZ_CHECK(fold == PE_ATTN_FOLD_AUTO || chosen == fold, "choose_fold changed a fixed fold");
    ref_nf(&a, chosen, want, &cnt);
    if (!fz_compare_s32(chosen == PE_ATTN_FOLD_EARLY ? "early fold" : "late fold", got, want,
                        nout)) {
        FZ_FAIL("pe_attention_nf_s8 differs from the reference");
    }
    FZ_CHECK(stats.macs == cnt.macs && stats.exps == cnt.exps && stats.rescales == cnt.rescales,
             "counters macs %llu exps %llu rescales %llu, reference %llu %llu %llu",
             (unsigned long long)stats.macs, (unsigned long long)stats.exps,
             (unsigned long long)stats.rescales, (unsigned long long)cnt.macs,
             (unsigned long long)cnt.exps, (unsigned long long)cnt.rescales);
    FZ_CHECK(stats.peak_bytes <= size, "peak_bytes %lld > %d", (long long)stats.peak_bytes,
             size);
    free(block);
    block = NULL;

    /* both baselines */
    ref_baseline(&a, want);
    for (i = 0; i < 2; i++) {
        const pe_attn_baseline kind = i == 0 ? PE_ATTN_BASE_ROW : PE_ATTN_BASE_MATRIX;
        int32_t bsize = -1;
        s = pe_attention_conv_get_buffer_size(&a.p, kind, &a.dm, &bsize);
        FZ_CHECK(s == PE_OK, "baseline query status %d", s);
        block = (uint8_t *)fz_alloc((size_t)bsize);
        fz_poison(block, (size_t)bsize);
        ctx.buf = block;
        ctx.size = bsize;
        ctx.stats = NULL;
        memset(got, 0x5A, nout * sizeof(int32_t));
        s = pe_attention_conv_s8(&ctx, &a.p, kind, &a.dm, q, k, v, got);
        FZ_CHECK(s == PE_OK, "baseline %d status %d", kind, s);
        if (!fz_compare_s32(i == 0 ? "baseline row" : "baseline matrix", got, want, nout)) {
            FZ_FAIL("pe_attention_conv_s8 differs from the reference");
        }
        free(block);
        block = NULL;
    }
done:
    free(block);
    free(kb);
    free(ke);
    free(q);
    free(k);
    free(v);
    free(got);
    free(want);
    return 0;
}
