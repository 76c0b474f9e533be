/* test_transformer.c - fused attention (pe_xattn_s8): the TFLM mode against
 * the unfused sequence over whole score matrices (pe_mul_s8, pe_add_s8,
 * pe_softmax_s8 on n x m), the stream mode against pe_attention_nf_s8, head
 * strides of the [heads, rows, d] layout, argument errors. */
#include <string.h>

#include "pe_test.h"
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_transformer.h"
#include "pyembed/pe_graph_runners.h"

#define N 5
#define M 7
#define H 2
#define D 3
#define DV 4

static uint32_t rng_state = 12345u;

static int8_t rnd8(void)
{
    rng_state = rng_state * 1103515245u + 12345u;
    return (int8_t)((int32_t)((rng_state >> 16) & 0xffu) - 128);
}

static void base_params(pe_xattn_params *p, pe_xattn_mode mode)
{
    memset(p, 0, sizeof(*p));
    p->mode = mode;
    p->dims.n = N;
    p->dims.m = M;
    p->dims.d = D;
    p->dims.dv = DV;
    p->dims.heads = H;
    p->strides.q_row = H * D;
    p->strides.k_row = H * D;
    p->strides.v_row = H * DV;
    p->strides.out_row = H * DV;
    p->strides.q_head = D;
    p->strides.k_head = D;
    p->strides.v_head = DV;
    p->strides.out_head = DV;
    p->q_offset = 3;
    p->k_offset = -5;
    p->v_offset = 7;
    p->out_zero_point = -2;
    p->out_quant.multiplier = 1402433700;
    p->out_quant.shift = -9;
    p->score_quant.multiplier = 1288490189;
    p->score_quant.shift = -7;
    p->score_zero_point = 4;
    p->has_scale = 1;
    p->scale_value = 90;
    p->scale_mul.input1_offset = -4;
    p->scale_mul.input2_offset = 0;
    p->scale_mul.output_offset = -1;
    p->scale_mul.output_quant.multiplier = 1518500250;
    p->scale_mul.output_quant.shift = -7;
    p->scale_mul.activation.min = -128;
    p->scale_mul.activation.max = 127;
    p->has_mask = 1;
    p->mask_add.input1_offset = 1;
    p->mask_add.input2_offset = 128;
    p->mask_add.output_offset = 10;
    p->mask_add.left_shift = 20;
    p->mask_add.input1_quant.multiplier = 1073741824;
    p->mask_add.input1_quant.shift = 0;
    p->mask_add.input2_quant.multiplier = 1717986918;
    p->mask_add.input2_quant.shift = -2;
    p->mask_add.output_quant.multiplier = 1431655765;
    p->mask_add.output_quant.shift = -18;
    p->mask_add.activation.min = -128;
    p->mask_add.activation.max = 127;
    p->mask_row = M;
    p->mask_head = 0;
    p->softmax.mult = 1539316278;
    p->softmax.shift = 25;
    p->softmax.diff_min = -248;
    p->p_offset = 128;
    p->logit_quant.multiplier = 1500000000;
    p->logit_quant.shift = 14;
    p->block = 3;
    p->fold = PE_ATTN_FOLD_LATE;
}

/* The unfused sequence with whole N x M matrices per head. */
static void unfused(const pe_xattn_params *p, const int8_t *q, const int8_t *k, const int8_t *v,
                    const int8_t *mask, int8_t *out)
{
    int8_t s[N * M];
    pe_dims md = {1, 1, N, M};
    pe_dims one = {1, 1, 1, 1};
    pe_context none = {NULL, 0, NULL};
    int32_t h, i, j, c;
    for (h = 0; h < H; h++) {
        for (i = 0; i < N; i++) {
            for (j = 0; j < M; j++) {
                int32_t acc = 0;
                for (c = 0; c < D; c++) {
                    acc += (q[i * H * D + h * D + c] + p->q_offset) *
                           (k[j * H * D + h * D + c] + p->k_offset);
                }
                acc = pe_fx_requant(acc, p->score_quant.multiplier, p->score_quant.shift) +
                      p->score_zero_point;
                s[i * M + j] = (int8_t)pe_fx_clamp(acc, -128, 127);
            }
        }
        PE_CHECK_EQ(pe_mul_s8(&none, &p->scale_mul, &md, s, &one, &p->scale_value, &md, s), PE_OK);
        PE_CHECK_EQ(pe_add_s8(&none, &p->mask_add, &md, s, &md, mask, &md, s), PE_OK);
        PE_CHECK_EQ(pe_softmax_s8(&p->softmax, N, M, s, s), PE_OK);
        for (i = 0; i < N; i++) {
            for (c = 0; c < DV; c++) {
                int32_t acc = 0;
                for (j = 0; j < M; j++) {
                    acc += (s[i * M + j] + p->p_offset) * (v[j * H * DV + h * DV + c] + p->v_offset);
                }
                acc = pe_fx_requant(acc, p->out_quant.multiplier, p->out_quant.shift) +
                      p->out_zero_point;
                out[i * H * DV + h * DV + c] = (int8_t)pe_fx_clamp(acc, -128, 127);
            }
        }
    }
}

static void tflm_mode_matches_unfused(void)
{
    int8_t q[N * H * D], k[M * H * D], v[M * H * DV], mask[N * M];
    int8_t got[N * H * DV], want[N * H * DV];
    uint8_t scratch[64];
    pe_xattn_params p;
    pe_context ctx;
    int32_t need, x, trial;
    for (trial = 0; trial < 20; trial++) {
        for (x = 0; x < N * H * D; x++) q[x] = rnd8();
        for (x = 0; x < M * H * D; x++) k[x] = rnd8();
        for (x = 0; x < M * H * DV; x++) v[x] = rnd8();
        for (x = 0; x < N * M; x++) mask[x] = (int8_t)(rnd8() > 60 ? -128 : 127);
        base_params(&p, PE_XATTN_TFLM);
        PE_CHECK_EQ(pe_xattn_get_buffer_size(&p, &need), PE_OK);
        PE_CHECK_EQ(need, M);
        ctx.buf = scratch;
        ctx.size = need;
        ctx.stats = NULL;
        PE_CHECK_EQ(pe_xattn_s8(&ctx, &p, q, k, v, mask, NULL, got), PE_OK);
        unfused(&p, q, k, v, mask, want);
        PE_CHECK_EQ(memcmp(got, want, sizeof(got)), 0);
        ctx.size = need - 1;
        PE_CHECK_EQ(pe_xattn_s8(&ctx, &p, q, k, v, mask, NULL, got), PE_ERR_SCRATCH);
    }
}

static void stream_mode_matches_nf_kernel(void)
{
    int8_t q[N * H * D], k[M * H * D], v[M * H * DV];
    int8_t qh[H * N * D], kh[H * M * D], vh[H * M * DV];
    int8_t got[N * H * DV], got_h[H * N * DV];
    int32_t ref[N * H * DV];
    uint8_t scratch[256], nf_scratch[256];
    pe_xattn_params p;
    pe_attn_params ap;
    pe_attn_dims ad = {N, M, D, DV, H};
    pe_context ctx = {scratch, (int32_t)sizeof(scratch), NULL};
    pe_context nctx = {nf_scratch, (int32_t)sizeof(nf_scratch), NULL};
    int32_t x, h, r, c, need, fold;
    for (x = 0; x < N * H * D; x++) q[x] = rnd8();
    for (x = 0; x < M * H * D; x++) k[x] = rnd8();
    for (x = 0; x < M * H * DV; x++) v[x] = rnd8();
    for (fold = 0; fold < 3; fold++) {
        base_params(&p, PE_XATTN_STREAM);
        p.has_mask = 0;
        p.fold = (pe_attn_fold)fold;
        PE_CHECK_EQ(pe_xattn_get_buffer_size(&p, &need), PE_OK);
        PE_CHECK(need <= (int32_t)sizeof(scratch));
        ctx.size = need;
        PE_CHECK_EQ(pe_xattn_s8(&ctx, &p, q, k, v, NULL, NULL, got), PE_OK);
        memset(&ap, 0, sizeof(ap));
        ap.q_offset = p.q_offset;
        ap.k_offset = p.k_offset;
        ap.v_offset = p.v_offset;
        ap.score_quant = p.logit_quant;
        ap.block = p.block;
        ap.fold = p.fold;
        PE_CHECK_EQ(pe_attention_nf_s8(&nctx, &ap, &ad, q, k, v, ref), PE_OK);
        for (x = 0; x < N * H * DV; x++) {
            int32_t w = pe_fx_requant(ref[x], p.out_quant.multiplier, p.out_quant.shift) +
                        p.out_zero_point;
            PE_CHECK_EQ(got[x], pe_fx_clamp(w, -128, 127));
        }
        /* the same data in [heads, rows, d] layout through the head strides */
        for (h = 0; h < H; h++) {
            for (r = 0; r < N; r++) for (c = 0; c < D; c++) qh[(h * N + r) * D + c] = q[r * H * D + h * D + c];
            for (r = 0; r < M; r++) for (c = 0; c < D; c++) kh[(h * M + r) * D + c] = k[r * H * D + h * D + c];
            for (r = 0; r < M; r++) for (c = 0; c < DV; c++) vh[(h * M + r) * DV + c] = v[r * H * DV + h * DV + c];
        }
        p.strides.q_row = D;
        p.strides.k_row = D;
        p.strides.v_row = DV;
        p.strides.out_row = DV;
        p.strides.q_head = N * D;
        p.strides.k_head = M * D;
        p.strides.v_head = M * DV;
        p.strides.out_head = N * DV;
        PE_CHECK_EQ(pe_xattn_s8(&ctx, &p, qh, kh, vh, NULL, NULL, got_h), PE_OK);
        for (h = 0; h < H; h++) {
            for (r = 0; r < N; r++) {
                for (c = 0; c < DV; c++) {
                    PE_CHECK_EQ(got_h[(h * N + r) * DV + c], got[r * H * DV + h * DV + c]);
                }
            }
        }
        /* scratch: shifting the buffer by one byte must still work */
        ctx.buf = scratch + 1;
        PE_CHECK_EQ(pe_xattn_s8(&ctx, &p, qh, kh, vh, NULL, NULL, got_h), PE_OK);
        ctx.buf = scratch;
    }
}

static void bad_arguments(void)
{
    int8_t buf[64] = {0};
    int8_t out[N * H * DV];
    uint8_t scratch[256];
    pe_context ctx = {scratch, (int32_t)sizeof(scratch), NULL};
    pe_xattn_params p;
    int32_t need;
    base_params(&p, PE_XATTN_STREAM);
    PE_CHECK_EQ(pe_xattn_s8(&ctx, &p, buf, buf, buf, buf, NULL, out), PE_ERR_ARG); /* no LUT */
    base_params(&p, PE_XATTN_TFLM);
    p.mode = (pe_xattn_mode)7;
    PE_CHECK_EQ(pe_xattn_get_buffer_size(&p, &need), PE_ERR_ARG);
    base_params(&p, PE_XATTN_TFLM);
    p.strides.k_row = 0;
    PE_CHECK_EQ(pe_xattn_s8(&ctx, &p, buf, buf, buf, buf, NULL, out), PE_ERR_ARG);
    base_params(&p, PE_XATTN_TFLM);
    PE_CHECK_EQ(pe_xattn_s8(&ctx, &p, buf, buf, buf, NULL, NULL, out), PE_ERR_ARG);
    p.dims.m = 0;
    PE_CHECK_EQ(pe_xattn_s8(&ctx, &p, buf, buf, buf, buf, NULL, out), PE_ERR_ARG);
    base_params(&p, PE_XATTN_TFLM);
    p.q_offset = 200;
    PE_CHECK_EQ(pe_xattn_get_buffer_size(&p, &need), PE_ERR_ARG);
    PE_CHECK_EQ(pe_xattn_get_buffer_size(NULL, &need), PE_ERR_ARG);
}

/* Words in pyembed.model.ops.transformer.WORDS order, from base_params. */
static void encode(const pe_xattn_params *p, int32_t *w)
{
    int32_t i = 0;
    w[i++] = (int32_t)p->mode; w[i++] = p->dims.n; w[i++] = p->dims.m; w[i++] = p->dims.d;
    w[i++] = p->dims.dv; w[i++] = p->dims.heads;
    w[i++] = p->strides.q_row; w[i++] = p->strides.k_row; w[i++] = p->strides.v_row;
    w[i++] = p->strides.out_row; w[i++] = p->strides.q_head; w[i++] = p->strides.k_head;
    w[i++] = p->strides.v_head; w[i++] = p->strides.out_head;
    w[i++] = p->q_offset; w[i++] = p->k_offset; w[i++] = p->v_offset; w[i++] = p->out_zero_point;
    w[i++] = p->out_quant.multiplier; w[i++] = p->out_quant.shift;
    w[i++] = p->score_quant.multiplier; w[i++] = p->score_quant.shift; w[i++] = p->score_zero_point;
    w[i++] = p->has_scale; w[i++] = p->scale_value; w[i++] = p->scale_mul.input1_offset;
    w[i++] = p->scale_mul.input2_offset; w[i++] = p->scale_mul.output_offset;
    w[i++] = p->scale_mul.output_quant.multiplier; w[i++] = p->scale_mul.output_quant.shift;
    w[i++] = p->scale_mul.activation.min; w[i++] = p->scale_mul.activation.max;
    w[i++] = p->has_mask; w[i++] = p->mask_add.input1_offset; w[i++] = p->mask_add.input2_offset;
    w[i++] = p->mask_add.output_offset; w[i++] = p->mask_add.left_shift;
    w[i++] = p->mask_add.input1_quant.multiplier; w[i++] = p->mask_add.input1_quant.shift;
    w[i++] = p->mask_add.input2_quant.multiplier; w[i++] = p->mask_add.input2_quant.shift;
    w[i++] = p->mask_add.output_quant.multiplier; w[i++] = p->mask_add.output_quant.shift;
    w[i++] = p->mask_add.activation.min; w[i++] = p->mask_add.activation.max;
    w[i++] = p->mask_row; w[i++] = p->mask_head;
    w[i++] = p->softmax.mult; w[i++] = p->softmax.shift; w[i++] = p->softmax.diff_min;
    w[i++] = p->p_offset; w[i++] = p->logit_quant.multiplier; w[i++] = p->logit_quant.shift;
    w[i++] = p->block; w[i++] = (int32_t)p->fold;
    w[i++] = p->range_kind; w[i++] = p->range_lo; w[i++] = p->range_hi; w[i++] = p->range_len;
    w[i++] = p->range_code; w[i++] = p->range_width;
    w[i++] = p->v_kind; w[i++] = p->v_width; w[i++] = p->v_extent;
    PE_CHECK_EQ(i, PE_XATTN_NUM_WORDS);
}

static void words_and_lut(void)
{
    int32_t w[PE_XATTN_NUM_WORDS];
    int8_t q[N * H * D], k[M * H * D], v[M * H * DV], mask[N * M];
    int8_t a[N * H * DV], b[N * H * DV];
    int8_t table[256], in[300], out[300];
    uint8_t scratch[64];
    pe_context ctx = {scratch, (int32_t)sizeof(scratch), NULL};
    pe_xattn_params p, d;
    int32_t x;
    for (x = 0; x < N * H * D; x++) q[x] = rnd8();
    for (x = 0; x < M * H * D; x++) k[x] = rnd8();
    for (x = 0; x < M * H * DV; x++) v[x] = rnd8();
    for (x = 0; x < N * M; x++) mask[x] = rnd8();
    base_params(&p, PE_XATTN_TFLM);
    encode(&p, w);
    PE_CHECK_EQ(pe_xattn_decode(w, PE_XATTN_NUM_WORDS, &d), PE_OK);
    PE_CHECK_EQ(pe_xattn_s8(&ctx, &p, q, k, v, mask, NULL, a), PE_OK);
    PE_CHECK_EQ(pe_xattn_s8(&ctx, &d, q, k, v, mask, NULL, b), PE_OK);
    PE_CHECK_EQ(memcmp(a, b, sizeof(a)), 0);
    PE_CHECK_EQ(pe_xattn_check_extents(&p, N * H * D, M * H * D, M * H * DV, N * M, N * H * DV), PE_OK);
    PE_CHECK_EQ(pe_xattn_check_extents(&p, N * H * D - 1, M * H * D, M * H * DV, N * M, N * H * DV),
                PE_ERR_ARG);
    PE_CHECK_EQ(pe_xattn_check_extents(&p, N * H * D, M * H * D, M * H * DV, N * M - 1, N * H * DV),
                PE_ERR_ARG);
    PE_CHECK_EQ(pe_xattn_check_extents(&p, N * H * D, M * H * D, M * H * DV - 1, N * M, N * H * DV),
                PE_ERR_ARG);
    PE_CHECK_EQ(pe_xattn_check_extents(&p, N * H * D, M * H * D, M * H * DV, N * M, N * H * DV - 1),
                PE_ERR_ARG);
    PE_CHECK_EQ(pe_xattn_decode(w, PE_XATTN_NUM_WORDS - 1, &d), PE_ERR_ARG);
    w[24] = 300; /* scale_value outside int8 */
    PE_CHECK_EQ(pe_xattn_decode(w, PE_XATTN_NUM_WORDS, &d), PE_ERR_ARG);
    encode(&p, w);
    w[54] = 5; /* fold */
    PE_CHECK_EQ(pe_xattn_decode(w, PE_XATTN_NUM_WORDS, &d), PE_ERR_ARG);
    encode(&p, w);
    w[1] = 0; /* n */
    PE_CHECK_EQ(pe_xattn_decode(w, PE_XATTN_NUM_WORDS, &d), PE_ERR_ARG);
    for (x = 0; x < 256; x++) table[x] = (int8_t)(127 - x);
    for (x = 0; x < 300; x++) in[x] = rnd8();
    PE_CHECK_EQ(pe_lut_s8(table, 300, in, out), PE_OK);
    for (x = 0; x < 300; x++) PE_CHECK_EQ(out[x], 127 - (in[x] + 128));
    PE_CHECK_EQ(pe_lut_s8(NULL, 300, in, out), PE_ERR_ARG);
    PE_CHECK_EQ(pe_lut_s8(table, -1, in, out), PE_ERR_ARG);
}

/* The graph runner: Q, K, V constants, mask absent... then a mask; the
 * output in an arena; a corrupted table is an error, never an access. */
static void graph_runner(void)
{
    static int8_t q[N * H * D], k[M * H * D], v[M * H * DV], mask[N * M];
    int8_t want[N * H * DV];
    uint8_t arena[N * H * DV + 64 + 16];
    uint8_t scratch[64];
    int32_t w[PE_XATTN_NUM_WORDS];
    pe_graph_tensor t[5];
    int32_t ins[5] = {0, 1, 2, 3, -1};
    int32_t outs[1] = {4};
    pe_graph_op op;
    pe_graph g;
    pe_xattn_params p;
    pe_context actx, sctx;
    int32_t x;
    for (x = 0; x < N * H * D; x++) q[x] = rnd8();
    for (x = 0; x < M * H * D; x++) k[x] = rnd8();
    for (x = 0; x < M * H * DV; x++) v[x] = rnd8();
    for (x = 0; x < N * M; x++) mask[x] = rnd8();
    memset(t, 0, sizeof(t));
    t[0].data = q; t[0].offset = -1; t[0].bytes = N * H * D;
    t[0].dims.n = 1; t[0].dims.h = 1; t[0].dims.w = N; t[0].dims.c = H * D;
    t[1].data = k; t[1].offset = -1; t[1].bytes = M * H * D;
    t[1].dims.n = 1; t[1].dims.h = 1; t[1].dims.w = M; t[1].dims.c = H * D;
    t[2].data = v; t[2].offset = -1; t[2].bytes = M * H * DV;
    t[2].dims.n = 1; t[2].dims.h = 1; t[2].dims.w = M; t[2].dims.c = H * DV;
    t[3].data = mask; t[3].offset = -1; t[3].bytes = N * M;
    t[3].dims.n = 1; t[3].dims.h = 1; t[3].dims.w = N; t[3].dims.c = M;
    t[4].data = NULL; t[4].offset = 64; t[4].bytes = N * H * DV;
    t[4].dims.n = 1; t[4].dims.h = 1; t[4].dims.w = N; t[4].dims.c = H * DV;
    for (x = 0; x < 5; x++) t[x].dtype = PE_DT_INT8;
    base_params(&p, PE_XATTN_TFLM);
    encode(&p, w);
    memset(&op, 0, sizeof(op));
    op.type = PE_GOP_ATTENTION;
    op.inputs = ins; op.num_inputs = 5; op.outputs = outs; op.num_outputs = 1;
    op.scratch_offset = -1; op.scratch_size = 0;
    op.params = w; op.num_params = PE_XATTN_NUM_WORDS;
    g.tensors = t; g.num_tensors = 5; g.ops = &op; g.num_ops = 1; g.arena_size = (int32_t)sizeof(arena);
    actx.buf = arena; actx.size = (int32_t)sizeof(arena); actx.stats = NULL;
    sctx.buf = scratch; sctx.size = (int32_t)sizeof(scratch); sctx.stats = NULL;
    sctx.size = M;
    PE_CHECK_EQ(pe_graph_run_attention(&g, &op, &sctx, &actx), PE_OK);
    sctx.size = (int32_t)sizeof(scratch);
    PE_CHECK_EQ(pe_xattn_s8(&sctx, &p, q, k, v, mask, NULL, want), PE_OK);
    PE_CHECK_EQ(memcmp(arena + 64, want, sizeof(want)), 0);
    sctx.size = M - 1;
    PE_CHECK_EQ(pe_graph_run_attention(&g, &op, &sctx, &actx), PE_ERR_SCRATCH);
    sctx.size = (int32_t)sizeof(scratch);
    t[3].dims.c = M - 1; /* a mask shorter than the words address */
    t[3].bytes = N * (M - 1);
    PE_CHECK_EQ(pe_graph_run_attention(&g, &op, &sctx, &actx), PE_ERR_ARG);
    t[3].bytes = N * M; t[3].dims.c = M;
    ins[3] = -1; /* the words say there is a mask */
    PE_CHECK_EQ(pe_graph_run_attention(&g, &op, &sctx, &actx), PE_ERR_ARG);
    ins[3] = 3;
    t[0].bytes = N * H * D - 1; /* inconsistent tensor */
    PE_CHECK_EQ(pe_graph_run_attention(&g, &op, &sctx, &actx), PE_ERR_ARG);
    t[0].bytes = N * H * D;
    op.num_params = PE_XATTN_NUM_WORDS - 1;
    PE_CHECK_EQ(pe_graph_run_attention(&g, &op, &sctx, &actx), PE_ERR_ARG);
    op.num_params = PE_XATTN_NUM_WORDS;
    op.num_inputs = 4;
    PE_CHECK_EQ(pe_graph_run_attention(&g, &op, &sctx, &actx), PE_ERR_ARG);
    op.num_inputs = 5;
    t[4].dtype = PE_DT_INT16;
    PE_CHECK_EQ(pe_graph_run_attention(&g, &op, &sctx, &actx), PE_ERR_ARG);
    t[4].dtype = PE_DT_INT8;
    PE_CHECK_EQ(pe_graph_run_attention(&g, &op, &sctx, &actx), PE_OK);
}

/* A mask through the LUT: 0 for visible keys and -2^30 (256 octaves down)
 * for hidden ones gives exactly the key-range result of the streaming
 * kernel; an all-zero LUT gives the unmasked result. */
static void stream_mask_equals_key_ranges(void)
{
    int8_t q[N * H * D], k[M * H * D], v[M * H * DV], mask[N * M];
    int8_t got[N * H * DV], plain[N * H * DV];
    int32_t ref[N * H * DV], lut[256], zeros[256];
    int32_t kb[N], ke[N];
    uint8_t scratch[256], nf_scratch[256];
    pe_context ctx = {scratch, (int32_t)sizeof(scratch), NULL};
    pe_context nctx = {nf_scratch, (int32_t)sizeof(nf_scratch), NULL};
    pe_attn_dims ad = {N, M, D, DV, H};
    pe_attn_params ap;
    pe_xattn_params p;
    int32_t x, i, j, fold;
    for (x = 0; x < N * H * D; x++) q[x] = rnd8();
    for (x = 0; x < M * H * D; x++) k[x] = rnd8();
    for (x = 0; x < M * H * DV; x++) v[x] = rnd8();
    for (x = 0; x < 256; x++) {
        lut[x] = x == 128 ? 0 : -(1 << 30);
        zeros[x] = 0;
    }
    for (i = 0; i < N; i++) {
        kb[i] = 0;
        ke[i] = i + 3;
        for (j = 0; j < M; j++) mask[i * M + j] = (int8_t)(j < ke[i] ? 0 : 1);
    }
    for (fold = 0; fold < 3; fold++) {
        base_params(&p, PE_XATTN_STREAM);
        p.fold = (pe_attn_fold)fold;
        PE_CHECK_EQ(pe_xattn_s8(&ctx, &p, q, k, v, mask, lut, got), PE_OK);
        memset(&ap, 0, sizeof(ap));
        ap.q_offset = p.q_offset;
        ap.k_offset = p.k_offset;
        ap.v_offset = p.v_offset;
        ap.score_quant = p.logit_quant;
        ap.block = p.block;
        ap.fold = p.fold;
        ap.key_begin = kb;
        ap.key_end = ke;
        PE_CHECK_EQ(pe_attention_nf_s8(&nctx, &ap, &ad, q, k, v, ref), PE_OK);
        for (x = 0; x < N * H * DV; x++) {
            int32_t w = pe_fx_requant(ref[x], p.out_quant.multiplier, p.out_quant.shift) +
                        p.out_zero_point;
            PE_CHECK_EQ(got[x], pe_fx_clamp(w, -128, 127));
        }
        PE_CHECK_EQ(pe_xattn_s8(&ctx, &p, q, k, v, mask, zeros, got), PE_OK);
        p.has_mask = 0;
        PE_CHECK_EQ(pe_xattn_s8(&ctx, &p, q, k, v, NULL, NULL, plain), PE_OK);
        PE_CHECK_EQ(memcmp(got, plain, sizeof(got)), 0);
    }
}

/* Generated V (v_kind): the same outputs as a V tensor holding the grid's
 * int8 values (stored per head), in both modes, with and without a per-row
 * key range, every fold, for extents <= 256 and > 256 (rounded
 * coordinates); the scratch query includes one block of generated values;
 * bad v words are refused. */
#define GW 5  /* image width: keys of 2 rows of 5 = 10 = GM */
#define GM 10
static void generated_v_equals_stored(void)
{
    int8_t q[N * H * D], k[GM * H * D], v[GM * H * 2];
    int8_t got[N * H * 2], want[N * H * 2];
    uint8_t scratch[512];
    pe_context ctx = {scratch, (int32_t)sizeof(scratch), NULL};
    pe_xattn_params p, g;
    int32_t x, j, h, mode, kind, ranged, e, need, need_stored;
    const int32_t extents[2] = {6, 300};
    for (x = 0; x < N * H * D; x++) q[x] = rnd8();
    for (x = 0; x < GM * H * D; x++) k[x] = rnd8();
    /* the formula by hand: t * 255 / 299 rounded half up for E = 300 */
    PE_CHECK_EQ(pe_xattn_coord(0, 300), -128);
    PE_CHECK_EQ(pe_xattn_coord(3, 300), -128 + 3); /* 2.558 -> 3 */
    PE_CHECK_EQ(pe_xattn_coord(299, 300), 127);
    PE_CHECK_EQ(pe_xattn_coord(1, 511), -128 + 1); /* 0.5 -> 1 (half up) */
    PE_CHECK_EQ(pe_xattn_coord(4, 6), -124);
    PE_CHECK_EQ(pe_xattn_coord(400, 6), 127);      /* clamped */
    for (mode = 0; mode < 2; mode++) {
        for (kind = 1; kind <= 2; kind++) {
            for (ranged = 0; ranged < 2; ranged++) {
                for (e = 0; e < 2; e++) {
                    base_params(&p, (pe_xattn_mode)mode);
                    p.has_mask = 0;
                    p.dims.m = GM;
                    p.dims.dv = kind;
                    p.strides.v_row = H * kind;
                    p.strides.v_head = kind;
                    p.strides.out_row = H * kind;
                    p.strides.out_head = kind;
                    p.v_offset = 128;
                    p.fold = (pe_attn_fold)((kind + ranged + e) % 3); /* late, early, auto */
                    if (ranged) {
                        /* stereo: the query's image row of GW keys, disparity 0..2 */
                        p.range_kind = PE_XATTN_RANGE_ROWS | PE_XATTN_RANGE_LOWER | PE_XATTN_RANGE_UPPER;
                        p.range_lo = -2;
                        p.range_hi = 0;
                        p.range_len = GM;
                        p.range_width = GW;
                        p.range_code = 127;
                        p.mask_add.input2_offset = -127;
                    }
                    for (j = 0; j < GM; j++) {
                        for (h = 0; h < H; h++) {
                            v[j * H * kind + h * kind] = pe_xattn_coord(j % GW, extents[e]);
                            if (kind == 2) {
                                v[j * H * kind + h * kind + 1] = pe_xattn_coord(j / GW, extents[e]);
                            }
                        }
                    }
                    memset(want, 0x55, sizeof(want));
                    PE_CHECK_EQ(pe_xattn_get_buffer_size(&p, &need_stored), PE_OK);
                    PE_CHECK_EQ(pe_xattn_s8(&ctx, &p, q, k, v, NULL, NULL, want), PE_OK);
                    g = p;
                    g.v_kind = kind;
                    g.v_width = GW;
                    g.v_extent = extents[e];
                    PE_CHECK_EQ(pe_xattn_get_buffer_size(&g, &need), PE_OK);
                    /* stream mode: + one block of generated values */
                    PE_CHECK_EQ(need - need_stored, mode == 1 ? p.block * kind : 0);
                    memset(got, 0x33, sizeof(got));
                    PE_CHECK_EQ(pe_xattn_s8(&ctx, &g, q, k, NULL, NULL, NULL, got), PE_OK);
                    for (x = 0; x < N * H * kind; x++) {
                        PE_CHECK_EQ(got[x], want[x]);
                    }
                    /* the scratch the size query asked for is enough, one byte less is not */
                    ctx.size = need;
                    PE_CHECK_EQ(pe_xattn_s8(&ctx, &g, q, k, NULL, NULL, NULL, got), PE_OK);
                    ctx.size = need - 1;
                    PE_CHECK_EQ(pe_xattn_s8(&ctx, &g, q, k, NULL, NULL, NULL, got), PE_ERR_SCRATCH);
                    ctx.size = (int32_t)sizeof(scratch);
                }
            }
        }
    }
    /* refused: dv not matching the kind, no width, extent 0, unknown kind,
     * stream mode with a mask tensor, V NULL without generation */
    base_params(&p, PE_XATTN_TFLM);
    p.has_mask = 0;
    p.v_kind = PE_XATTN_V_INDEX; /* dv = DV = 4 */
    p.v_width = GW;
    p.v_extent = 6;
    PE_CHECK_EQ(pe_xattn_get_buffer_size(&p, &need), PE_ERR_ARG);
    p.dims.dv = 1;
    PE_CHECK_EQ(pe_xattn_get_buffer_size(&p, &need), PE_OK);
    p.v_width = 0;
    PE_CHECK_EQ(pe_xattn_get_buffer_size(&p, &need), PE_ERR_ARG);
    p.v_width = GW;
    p.v_extent = 0;
    PE_CHECK_EQ(pe_xattn_get_buffer_size(&p, &need), PE_ERR_ARG);
    p.v_extent = 6;
    p.v_kind = 3;
    PE_CHECK_EQ(pe_xattn_get_buffer_size(&p, &need), PE_ERR_ARG);
    base_params(&p, PE_XATTN_STREAM);
    p.dims.dv = 1;
    p.v_kind = PE_XATTN_V_INDEX;
    p.v_width = GW;
    p.v_extent = 6;
    PE_CHECK_EQ(pe_xattn_get_buffer_size(&p, &need), PE_ERR_ARG); /* has_mask */
    base_params(&p, PE_XATTN_TFLM);
    p.has_mask = 0;
    PE_CHECK_EQ(pe_xattn_s8(&ctx, &p, q, k, NULL, NULL, NULL, got), PE_ERR_ARG);
}

int main(void)
{
    generated_v_equals_stored();
    stream_mask_equals_key_ranges();
    graph_runner();
    words_and_lut();
    tflm_mode_matches_unfused();
    stream_mode_matches_nf_kernel();
    bad_arguments();
    return PE_TEST_END("test_transformer");
}
