/*
 * kernel_cases.c - run a list of kernel calls given as one binary blob and
 * write each call's status, instruction count and output bytes.
 *
 * The same program is built for the host (gcc, the reference run) and for a
 * Cortex-M under QEMU (pyembed/target/kernels.py builds it with and without
 * the DSP extension's inner loops), so the outputs can be compared with ==.
 *
 * Blob (little-endian int32 words): "PEKC", case count, then per case
 *   op, n_params, params[n_params], n_arrays, then per array its byte count
 *   and bytes padded to a multiple of 4.
 * Output per case: status, instructions (low, high word; 0 on the host),
 *   output byte count, output bytes padded to 4.
 * Ops and their params / arrays: see pyembed/target/kernels.py.
 */
#include <stdint.h>
#include <string.h>

#include "pyembed/pe_attention.h"
#include "pyembed/pe_conv.h"
#include "pyembed/pe_conv_gather.h"
#include "pyembed/pe_eltwise.h"
#include "pyembed/pe_fc.h"
#include "pyembed/pe_lstm.h"
#include "pyembed/pe_pool.h"

#ifdef PE_ON_TARGET
#include "pe_target.h"
#define BLOB_BYTES (2u * 1024u * 1024u)
#define OUT_BYTES (512u * 1024u)
#define SCRATCH_WORDS (64u * 1024u)
#else
#include <stdio.h>
#define BLOB_BYTES (16u * 1024u * 1024u)
#define OUT_BYTES (8u * 1024u * 1024u)
#define SCRATCH_WORDS (1024u * 1024u)
#endif

enum {
    OP_CONV = 1, OP_FC = 2, OP_POOL = 3, OP_ADD = 4, OP_MUL = 5, OP_ATTN = 6, OP_LSTM = 7,
    OP_FC16 = 8
};

static uint32_t blob_words[BLOB_BYTES / 4u];
static uint32_t out_words[OUT_BYTES / 4u];
static int64_t scratch[SCRATCH_WORDS];
static size_t out_pos; /* bytes */
static int32_t out_payload[OUT_BYTES / 16u]; /* one case's output (int8 or int32) */

#define MAX_ARRAYS 8
typedef struct {
    const int32_t *p;
    int32_t np;
    const void *a[MAX_ARRAYS];
    int32_t nbytes[MAX_ARRAYS];
    int32_t na;
} case_t;

static uint64_t now(void)
{
#ifdef PE_ON_TARGET
    return pe_cycles_start();
#else
    return 0;
#endif
}

static uint64_t since(uint64_t t0)
{
#ifdef PE_ON_TARGET
    return pe_instructions_since(t0);
#else
    (void)t0;
    return 0;
#endif
}

static void put_word(uint32_t w)
{
    if (out_pos <= OUT_BYTES - 4u) {
        memcpy((uint8_t *)out_words + out_pos, &w, 4u);
    }
    out_pos += 4u;
}

static void put_result(int32_t status, uint64_t instr, const void *data, int32_t nbytes)
{
    const size_t padded = ((size_t)nbytes + 3u) & ~(size_t)3u;
    put_word((uint32_t)status);
    put_word((uint32_t)(instr & 0xFFFFFFFFu));
    put_word((uint32_t)(instr >> 32));
    put_word((uint32_t)nbytes);
    if (out_pos + padded <= OUT_BYTES) {
        memset((uint8_t *)out_words + out_pos, 0, padded);
        memcpy((uint8_t *)out_words + out_pos, data, (size_t)nbytes);
    }
    out_pos += padded;
}

static pe_dims dims_at(const int32_t *p)
{
    pe_dims d;
    d.n = p[0];
    d.h = p[1];
    d.w = p[2];
    d.c = p[3];
    return d;
}

static int32_t elems(pe_dims d)
{
    return d.n * d.h * d.w * d.c;
}

static pe_context make_ctx(int32_t size, pe_stats *stats)
{
    pe_context ctx;
    ctx.buf = scratch;
    ctx.size = size;
    ctx.stats = stats;
    return ctx;
}

#define NEED(cond)                  \
    do {                            \
        if (!(cond)) {              \
            put_result(-100, 0, 0, 0); \
            return;                 \
        }                           \
    } while (0)

/* params: depthwise, in[4], f[4], out[4], stride h w, dil h w, pad t b l r,
 * in_off, out_off, act min max, groups, ch_mult, rounding, has_bias, form
 * (0 reverse, 1 gather: pe_conv_gather.h, 2 gather with the
 * output p[30] bytes after the input in one buffer, 3 reverse with the
 * output p[30] bytes after the input in one buffer, 5 the one-channel
 * depthwise kernel, its output p[30] bytes after the input where p[30] != 0);
 * p[31] the reverse scratch (0 minimum, 1 fast) or the gather work block
 * (0 none, 1 the target size, 8 or more: that many bytes, as a lean plan
 * gives less than the target);
 * arrays: input, filter, bias, mult, shift */
static void run_conv(const case_t *c)
{
    const int32_t *p = c->p;
    pe_conv_params cp;
    pe_dims in, f, out;
    pe_per_channel_quant q;
    pe_stats stats;
    pe_context ctx;
    int32_t size = 0, dw;
    pe_status st;
    uint64_t t0, ins;
    NEED(c->np == 32 && c->na == 5);
    dw = p[0];
    in = dims_at(p + 1);
    f = dims_at(p + 5);
    out = dims_at(p + 9);
    cp.stride.h = p[13];
    cp.stride.w = p[14];
    cp.dilation.h = p[15];
    cp.dilation.w = p[16];
    cp.padding.top = p[17];
    cp.padding.bottom = p[18];
    cp.padding.left = p[19];
    cp.padding.right = p[20];
    cp.input_offset = p[21];
    cp.output_offset = p[22];
    cp.activation.min = p[23];
    cp.activation.max = p[24];
    cp.groups = p[25];
    cp.ch_mult = p[26];
    cp.rounding = (pe_rounding)p[27];
    NEED(elems(out) <= (int32_t)sizeof(out_payload));
    q.multiplier = (const int32_t *)c->a[3];
    q.shift = (const int32_t *)c->a[4];
    memset(&stats, 0, sizeof(stats));
    /* p[31]: the reverse conv's scratch, 0 the minimum (get_buffer_size), 1
     * the fast size (get_fast_buffer_size: the DSP build's int16 blocks, or
     * the depthwise int16 planes) */
    st = dw ? (p[31] == 1 ? pe_depthwise_conv2d_rev_s8_get_fast_buffer_size(&cp, &in, &f, &out, &size)
                          : pe_depthwise_conv2d_rev_s8_get_buffer_size(&cp, &in, &f, &out, &size))
         : p[31] == 1 ? pe_conv2d_rev_s8_get_fast_buffer_size(&cp, &in, &f, &out, &size)
                      : pe_conv2d_rev_s8_get_buffer_size(&cp, &in, &f, &out, &size);
    if (st != PE_OK || size > (int32_t)sizeof(scratch)) {
        put_result(st != PE_OK ? st : -101, 0, 0, 0);
        return;
    }
    ctx = make_ctx(size, &stats);
    if (p[29] == 1 || p[29] == 2) {
        /* form 2: the output placed p[30] bytes after the start of a copy of
         * the input in one buffer (the planner's output-over-input layout);
         * p[31] 1: the gather kernel's DSP work block
         * (get_target_buffer_size for this build) at the end of scratch, as
         * a firmware plan gives it; 0: none */
        const int8_t *x = (const int8_t *)c->a[0];
        int8_t *y = (int8_t *)out_payload;
        int32_t work = 0;
#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP && !defined(PE_FORCE_PORTABLE)
        const int32_t dsp = 1;
#else
        const int32_t dsp = 0;
#endif
        if (p[31] == 1) {
            st = dw ? pe_depthwise_conv2d_gather_s8_get_target_buffer_size(&cp, &in, &f, &out, dsp, &work)
                    : pe_conv2d_gather_s8_get_target_buffer_size(&cp, &in, &f, &out, dsp, &work);
            NEED(st == PE_OK && work >= 0 && work <= (int32_t)(sizeof(scratch) / 2u));
            work = work / 8 * 8;
        } else if (p[31] >= 8) {
            work = p[31] / 8 * 8;
            NEED(work <= (int32_t)(sizeof(scratch) / 2u));
        }
        if (p[29] == 2) {
            const int32_t delta = p[30];
            const int32_t base = delta < 0 ? -delta : 0;
            int8_t *arena = (int8_t *)scratch;
            NEED((int64_t)base + elems(in) <= (int64_t)sizeof(scratch) - work &&
                 (int64_t)base + delta + elems(out) <= (int64_t)sizeof(scratch) - work);
            memcpy(arena + base, x, (size_t)elems(in));
            x = arena + base;
            y = arena + base + delta;
        }
        ctx = make_ctx(0, &stats);
        if (work > 0) {
            ctx.buf = (int8_t *)scratch + sizeof(scratch) - (size_t)work;
            ctx.size = work;
        }
        t0 = now();
        st = dw ? pe_depthwise_conv2d_gather_s8(&ctx, &cp, &q, &in, x, &f,
                                                (const int8_t *)c->a[1],
                                                p[28] ? (const int32_t *)c->a[2] : NULL, &out, y)
                : pe_conv2d_gather_s8(&ctx, &cp, &q, &in, x, &f, (const int8_t *)c->a[1],
                                      p[28] ? (const int32_t *)c->a[2] : NULL, &out, y);
        ins = since(t0);
        put_result(st, ins, y, st == PE_OK ? elems(out) : 0);
        return;
    }
    if (p[29] == 5) {
        /* the one-channel depthwise kernel (pe_depthwise_conv2d_c1_s8), its
         * output p[30] bytes after the start of a copy of the input in one
         * buffer where p[30] != 0 (an output-over-input plan) */
        const int8_t *x = (const int8_t *)c->a[0];
        int8_t *y = (int8_t *)out_payload;
        if (p[30] != 0) {
            const int32_t delta = p[30];
            const int32_t base = delta < 0 ? -delta : 0;
            int8_t *arena = (int8_t *)scratch;
            NEED((int64_t)base + elems(in) <= (int64_t)sizeof(scratch) &&
                 (int64_t)base + delta + elems(out) <= (int64_t)sizeof(scratch));
            memcpy(arena + base, x, (size_t)elems(in));
            x = arena + base;
            y = arena + base + delta;
        }
        ctx = make_ctx(0, &stats);
        t0 = now();
        st = pe_depthwise_conv2d_c1_s8(&ctx, &cp, &q, &in, x, &f, (const int8_t *)c->a[1],
                                       p[28] ? (const int32_t *)c->a[2] : NULL, &out, y);
        ins = since(t0);
        put_result(st, ins, y, st == PE_OK ? elems(out) : 0);
        return;
    }
    if (p[29] == 3) {
        /* the output placed p[30] bytes after the start of a copy of the
         * input in one buffer (a planner's row-model layout) */
        const int32_t delta = p[30];
        const int32_t base = delta < 0 ? -delta : 0;
        int8_t *arena = (int8_t *)out_payload;
        int8_t *y;
        NEED((int64_t)base + elems(in) <= (int64_t)sizeof(out_payload) &&
             (int64_t)base + delta + elems(out) <= (int64_t)sizeof(out_payload));
        memcpy(arena + base, c->a[0], (size_t)elems(in));
        y = arena + base + delta;
        t0 = now();
        st = dw ? pe_depthwise_conv2d_rev_s8(&ctx, &cp, &q, &in, arena + base, &f,
                                             (const int8_t *)c->a[1],
                                             p[28] ? (const int32_t *)c->a[2] : NULL, &out, y)
                : pe_conv2d_rev_s8(&ctx, &cp, &q, &in, arena + base, &f, (const int8_t *)c->a[1],
                                   p[28] ? (const int32_t *)c->a[2] : NULL, &out, y);
        ins = since(t0);
        put_result(st, ins, y, st == PE_OK ? elems(out) : 0);
        return;
    }
    if (p[29] == 4) {
        /* the row stream (pe_conv2d_rev_stream_*, one image): each input
         * row pushed, every ready output row popped */
        pe_conv_rev_stream rs;
        const size_t in_row = (size_t)in.w * (size_t)in.c;
        const size_t out_row = (size_t)out.w * (size_t)out.c;
        int32_t y, idx = -1, next = 0;
        NEED(in.n == 1);
        t0 = now();
        st = dw ? pe_depthwise_conv2d_rev_stream_init_s8(&rs, &ctx, &cp, &q, &in, &f,
                                                         (const int8_t *)c->a[1],
                                                         p[28] ? (const int32_t *)c->a[2] : NULL,
                                                         &out)
                : pe_conv2d_rev_stream_init_s8(&rs, &ctx, &cp, &q, &in, &f,
                                               (const int8_t *)c->a[1],
                                               p[28] ? (const int32_t *)c->a[2] : NULL, &out);
        for (y = 0; st == PE_OK && y <= in.h; y++) {
            do {
                st = pe_conv2d_rev_stream_pop_s8(&rs, (int8_t *)out_payload + (size_t)next * out_row,
                                                 &idx);
                if (st == PE_OK && idx >= 0) {
                    next++;
                }
            } while (st == PE_OK && idx >= 0);
            if (st == PE_OK && y < in.h) {
                st = pe_conv2d_rev_stream_push_s8(&rs, (const int8_t *)c->a[0] + (size_t)y * in_row);
            }
        }
        ins = since(t0);
        put_result(st, ins, out_payload, st == PE_OK ? elems(out) : 0);
        return;
    }
    t0 = now();
    st = dw ? pe_depthwise_conv2d_rev_s8(&ctx, &cp, &q, &in, (const int8_t *)c->a[0], &f,
                                         (const int8_t *)c->a[1],
                                         p[28] ? (const int32_t *)c->a[2] : NULL, &out,
                                         (int8_t *)out_payload)
            : pe_conv2d_rev_s8(&ctx, &cp, &q, &in, (const int8_t *)c->a[0], &f,
                               (const int8_t *)c->a[1], p[28] ? (const int32_t *)c->a[2] : NULL,
                               &out, (int8_t *)out_payload);
    ins = since(t0);
    put_result(st, ins, out_payload, st == PE_OK ? elems(out) : 0);
}

/* params: in[4], f[4], out[4], in_off, f_off, out_off, per_channel, act min max,
 * rounding, has_bias; arrays: input, filter, bias, mult, shift. OP_FC16: the
 * same layer through pe_fc_w16_pack (untimed: done once offline) and
 * pe_fully_connected_w16_s8 (timed) */
static void run_fc(const case_t *c, int w16)
{
    const int32_t *p = c->p;
    pe_fc_params fp;
    pe_dims in, f, out;
    pe_per_channel_quant q;
    pe_context ctx;
    pe_status st;
    uint64_t t0, ins;
    NEED(c->np == 20 && c->na == 5);
    in = dims_at(p);
    f = dims_at(p + 4);
    out = dims_at(p + 8);
    fp.input_offset = p[12];
    fp.filter_offset = p[13];
    fp.output_offset = p[14];
    fp.per_channel = p[15];
    fp.activation.min = p[16];
    fp.activation.max = p[17];
    fp.rounding = (pe_rounding)p[18];
    NEED(elems(out) <= (int32_t)sizeof(out_payload));
    q.multiplier = (const int32_t *)c->a[3];
    q.shift = (const int32_t *)c->a[4];
    if (w16) {
        int32_t pbytes = 0, sbytes = 0;
        int16_t *packed = (int16_t *)(void *)scratch;
        st = pe_fc_w16_get_buffer_sizes(&f, &pbytes, &sbytes);
        if (st == PE_OK) {
            NEED((int64_t)pbytes + sbytes + 8 <= (int64_t)sizeof(scratch));
            st = pe_fc_w16_pack(&f, (const int8_t *)c->a[1], fp.filter_offset, packed, pbytes);
        }
        ctx = make_ctx(sbytes, NULL);
        ctx.buf = (uint8_t *)(void *)scratch + ((size_t)pbytes + 7u) / 8u * 8u + 1u; /* odd */
        t0 = now();
        if (st == PE_OK) {
            st = pe_fully_connected_w16_s8(&ctx, &fp, &q, &in, (const int8_t *)c->a[0], &f, packed,
                                           p[19] ? (const int32_t *)c->a[2] : NULL, &out,
                                           (int8_t *)out_payload);
        }
        ins = since(t0);
        put_result(st, ins, out_payload, st == PE_OK ? elems(out) : 0);
        return;
    }
    ctx = make_ctx(0, NULL);
    t0 = now();
    st = pe_fully_connected_s8(&ctx, &fp, &q, &in, (const int8_t *)c->a[0], &f,
                               (const int8_t *)c->a[1], p[19] ? (const int32_t *)c->a[2] : NULL,
                               &out, (int8_t *)out_payload);
    ins = since(t0);
    put_result(st, ins, out_payload, st == PE_OK ? elems(out) : 0);
}

/* params: kind, in[4], out[4], window h w, stride h w, pad t b l r, act min max,
 * sum mult, sum shift, out_off[, chunk]; arrays: input. chunk 0 (or absent):
 * the whole-tensor pe_pool_rev_s8; chunk > 0: a stream opened with
 * pe_pool_rev_stream_init_s8, each row scattered chunk pixels at a time,
 * last chunk first (the fusion API's partial rows). */
static void run_pool(const case_t *c)
{
    const int32_t *p = c->p;
    pe_pool_params pp;
    pe_dims in, out;
    pe_context ctx;
    int32_t size = 0, chunk;
    pe_status st;
    uint64_t t0, ins;
    NEED((c->np == 22 || c->np == 23) && c->na == 1);
    chunk = c->np == 23 ? p[22] : 0;
    memset(&pp, 0, sizeof(pp));
    pp.kind = (pe_pool_kind)p[0];
    in = dims_at(p + 1);
    out = dims_at(p + 5);
    pp.window.h = p[9];
    pp.window.w = p[10];
    pp.stride.h = p[11];
    pp.stride.w = p[12];
    pp.padding.top = p[13];
    pp.padding.bottom = p[14];
    pp.padding.left = p[15];
    pp.padding.right = p[16];
    pp.activation.min = p[17];
    pp.activation.max = p[18];
    pp.sum_quant.multiplier = p[19];
    pp.sum_quant.shift = p[20];
    pp.output_offset = p[21];
    NEED(elems(out) <= (int32_t)sizeof(out_payload));
    NEED(chunk >= 0);
    st = pe_pool_rev_get_buffer_size(&pp, &in, &out, &size);
    if (st != PE_OK || size > (int32_t)sizeof(scratch)) {
        put_result(st != PE_OK ? st : -101, 0, 0, 0);
        return;
    }
    ctx = make_ctx(size, NULL);
    t0 = now();
    if (chunk == 0) {
        st = pe_pool_rev_s8(&ctx, &pp, &in, (const int8_t *)c->a[0], &out, (int8_t *)out_payload);
    } else {
        const int8_t *x = (const int8_t *)c->a[0];
        int8_t *o = (int8_t *)out_payload;
        const size_t row = (size_t)in.w * (size_t)in.c, orow = (size_t)out.w * (size_t)out.c;
        int32_t y, done = 0, first, n;
        st = pe_pool_rev_stream_init_s8(&ctx, &pp, &in, &out);
        for (y = 0; st == PE_OK && y < in.n * in.h; y++) {
            int32_t x0 = (in.w - 1) / chunk * chunk;
            st = pe_pool_rev_begin_row(&ctx);
            if (st == PE_OK && y == 0) {
                /* the stream refuses int32 values: it was opened for int8 only */
                const int32_t none = 0;
                st = pe_pool_rev_scatter_s32(&ctx, 0, 0, &none) == PE_ERR_STATE ? PE_OK : -103;
            }
            for (; st == PE_OK && x0 >= 0; x0 -= chunk) {
                const int32_t np = in.w - x0 < chunk ? in.w - x0 : chunk;
                st = pe_pool_rev_scatter_s8(&ctx, x0, np, x + (size_t)y * row + (size_t)x0 * in.c);
            }
            if (st == PE_OK) {
                st = pe_pool_rev_end_row(&ctx, o + (size_t)done * orow, out.n * out.h - done,
                                         &first, &n);
                done += n;
            }
        }
    }
    ins = since(t0);
    put_result(st, ins, out_payload, st == PE_OK ? elems(out) : 0);
}

/* ADD params: d1[4], d2[4], out[4], in1_off, in2_off, out_off, left_shift,
 *   m1, s1, m2, s2, mo, so, act min max, rounding  (25 words)
 * MUL params: d1[4], d2[4], out[4], in1_off, in2_off, out_off, mo, so,
 *   act min max, rounding  (20 words); arrays: input1, input2 */
static void run_eltwise(const case_t *c, int op)
{
    const int32_t *p = c->p;
    pe_dims d1, d2, out;
    pe_context ctx;
    pe_status st;
    uint64_t t0, ins;
    NEED(c->np == (op == OP_ADD ? 25 : 20) && c->na == 2);
    d1 = dims_at(p);
    d2 = dims_at(p + 4);
    out = dims_at(p + 8);
    NEED(elems(out) <= (int32_t)sizeof(out_payload));
    ctx = make_ctx(0, NULL);
    if (op == OP_ADD) {
        pe_add_params ap;
        ap.input1_offset = p[12];
        ap.input2_offset = p[13];
        ap.output_offset = p[14];
        ap.left_shift = p[15];
        ap.input1_quant.multiplier = p[16];
        ap.input1_quant.shift = p[17];
        ap.input2_quant.multiplier = p[18];
        ap.input2_quant.shift = p[19];
        ap.output_quant.multiplier = p[20];
        ap.output_quant.shift = p[21];
        ap.activation.min = p[22];
        ap.activation.max = p[23];
        ap.rounding = (pe_rounding)p[24];
        t0 = now();
        st = pe_add_s8(&ctx, &ap, &d1, (const int8_t *)c->a[0], &d2, (const int8_t *)c->a[1], &out,
                       (int8_t *)out_payload);
        ins = since(t0);
    } else {
        pe_mul_params mp;
        mp.input1_offset = p[12];
        mp.input2_offset = p[13];
        mp.output_offset = p[14];
        mp.output_quant.multiplier = p[15];
        mp.output_quant.shift = p[16];
        mp.activation.min = p[17];
        mp.activation.max = p[18];
        mp.rounding = (pe_rounding)p[19];
        t0 = now();
        st = pe_mul_s8(&ctx, &mp, &d1, (const int8_t *)c->a[0], &d2, (const int8_t *)c->a[1], &out,
                       (int8_t *)out_payload);
        ins = since(t0);
    }
    put_result(st, ins, out_payload, st == PE_OK ? elems(out) : 0);
}

/* params: n, m, d, dv, heads, q_off, k_off, v_off, score mult, score shift,
 * block, fold [, extra]; arrays: q, k, v, then with extra 1 the key ranges
 * (int32 key_begin [n], key_end [n]), with extra 2 a bias (int8 index
 * [n, heads, m], int32 lut [256]) run by pe_attention_nf_strided_s8 with
 * the default strides. Output int32 [n, heads*dv]. */
static void run_attn(const case_t *c)
{
    const int32_t *p = c->p;
    pe_attn_params ap;
    pe_attn_dims dm;
    pe_context ctx;
    int32_t size = 0;
    pe_status st;
    uint64_t t0, ins;
    int32_t extra;
    NEED((c->np == 12 && c->na == 3) || (c->np == 13 && c->na == 5));
    extra = c->np == 13 ? p[12] : 0;
    NEED(extra == 0 || extra == 1 || extra == 2);
    dm.n = p[0];
    dm.m = p[1];
    dm.d = p[2];
    dm.dv = p[3];
    dm.heads = p[4];
    ap.q_offset = p[5];
    ap.k_offset = p[6];
    ap.v_offset = p[7];
    ap.score_quant.multiplier = p[8];
    ap.score_quant.shift = p[9];
    ap.block = p[10];
    ap.fold = (pe_attn_fold)p[11];
    ap.key_begin = NULL;
    ap.key_end = NULL;
    if (extra == 1) {
        NEED(c->nbytes[3] == 4 * dm.n && c->nbytes[4] == 4 * dm.n);
        ap.key_begin = (const int32_t *)c->a[3];
        ap.key_end = (const int32_t *)c->a[4];
    } else if (extra == 2) {
        NEED((int64_t)c->nbytes[3] == (int64_t)dm.n * dm.heads * dm.m && c->nbytes[4] == 4 * 256);
    }
    NEED((int64_t)dm.n * dm.heads * dm.dv * 4 <= (int64_t)sizeof(out_payload));
    st = pe_attention_nf_get_buffer_size(&ap, &dm, &size);
    if (st != PE_OK || size > (int32_t)sizeof(scratch)) {
        put_result(st != PE_OK ? st : -101, 0, 0, 0);
        return;
    }
    ctx = make_ctx(size, NULL);
    t0 = now();
    if (extra == 2) {
        pe_attn_strides sd;
        pe_attn_bias bias;
        sd.q_row = sd.k_row = dm.heads * dm.d;
        sd.v_row = sd.out_row = dm.heads * dm.dv;
        sd.q_head = sd.k_head = dm.d;
        sd.v_head = sd.out_head = dm.dv;
        bias.index = (const int8_t *)c->a[3];
        bias.row = dm.heads * dm.m;
        bias.head = dm.m;
        bias.lut = (const int32_t *)c->a[4];
        st = pe_attention_nf_strided_s8(&ctx, &ap, &dm, &sd, &bias, (const int8_t *)c->a[0],
                                        (const int8_t *)c->a[1], (const int8_t *)c->a[2],
                                        out_payload);
    } else {
        st = pe_attention_nf_s8(&ctx, &ap, &dm, (const int8_t *)c->a[0],
                                (const int8_t *)c->a[1], (const int8_t *)c->a[2], out_payload);
    }
    ins = since(t0);
    put_result(st, ins, out_payload, st == PE_OK ? dm.n * dm.heads * dm.dv * 4 : 0);
}

/* params: the 32 words of PE_GOP_UNIDIRECTIONAL_SEQUENCE_LSTM (pe_lstm.h);
 * arrays: input, the 4 input weights, the 4 recurrent weights, the 4 biases
 * (each group concatenated in gate order i, f, g, o), hidden, cell. Output:
 * the output, then the hidden and cell states after the call. */
static void run_lstm(const case_t *c)
{
    pe_lstm_params lp;
    const int8_t *w[4], *r[4];
    const int32_t *b[4];
    int8_t *out = (int8_t *)out_payload;
    int8_t *hidden;
    int16_t *cell;
    pe_context ctx;
    int32_t size = 0, k, ny, nh;
    pe_status st;
    uint64_t t0, ins;
    NEED(c->na == 6 && pe_lstm_params_from_words(c->p, c->np, &lp) == PE_OK);
    ny = lp.batch * lp.time * lp.state_dim;
    nh = lp.batch * lp.state_dim;
    NEED(c->nbytes[0] == lp.batch * lp.time * lp.input_dim &&
         c->nbytes[1] == 4 * lp.state_dim * lp.input_dim && c->nbytes[2] == 4 * lp.state_dim * lp.state_dim &&
         c->nbytes[3] == 16 * lp.state_dim && c->nbytes[4] == nh && c->nbytes[5] == 2 * nh);
    NEED((int64_t)ny + 3 * (int64_t)nh + 2 <= (int64_t)sizeof(out_payload));
    for (k = 0; k < 4; k++) {
        w[k] = (const int8_t *)c->a[1] + (size_t)k * (size_t)(lp.state_dim * lp.input_dim);
        r[k] = (const int8_t *)c->a[2] + (size_t)k * (size_t)(lp.state_dim * lp.state_dim);
        b[k] = (const int32_t *)c->a[3] + (size_t)k * (size_t)lp.state_dim;
    }
    /* the states are updated in place: copies behind the output (cell 2-aligned) */
    hidden = out + ny;
    cell = (int16_t *)(void *)(out + ((ny + nh + 1) & ~1));
    memcpy(hidden, c->a[4], (size_t)nh);
    memcpy(cell, c->a[5], (size_t)nh * 2u);
    st = pe_lstm_s8s16_get_buffer_size(&lp, &size);
    if (st != PE_OK || size > (int32_t)sizeof(scratch)) {
        put_result(st != PE_OK ? st : -101, 0, 0, 0);
        return;
    }
    ctx = make_ctx(size, NULL);
    t0 = now();
    st = pe_lstm_s8s16(&ctx, &lp, (const int8_t *)c->a[0], w, r, b, hidden, cell, out);
    ins = since(t0);
    put_result(st, ins, out_payload, st == PE_OK ? (int32_t)((int8_t *)(cell + nh) - out) : 0);
}

static int run_blob(size_t nbytes)
{
    const uint32_t *w = blob_words;
    const size_t nw = nbytes / 4u;
    size_t i = 2;
    uint32_t k, ncases;
    if (nw < 2 || memcmp(w, "PEKC", 4) != 0) {
        return 3;
    }
    ncases = w[1];
    for (k = 0; k < ncases; k++) {
        case_t c;
        int32_t op, j;
        if (i + 2 > nw) {
            return 4;
        }
        op = (int32_t)w[i++];
        c.np = (int32_t)w[i++];
        if (c.np < 0 || i + (size_t)c.np + 1 > nw) {
            return 4;
        }
        c.p = (const int32_t *)(w + i);
        i += (size_t)c.np;
        c.na = (int32_t)w[i++];
        if (c.na < 0 || c.na > MAX_ARRAYS) {
            return 4;
        }
        for (j = 0; j < c.na; j++) {
            size_t padded;
            if (i + 1 > nw) {
                return 4;
            }
            c.nbytes[j] = (int32_t)w[i++];
            padded = ((size_t)c.nbytes[j] + 3u) / 4u;
            if (c.nbytes[j] < 0 || i + padded > nw) {
                return 4;
            }
            c.a[j] = w + i;
            i += padded;
        }
        switch (op) {
        case OP_CONV: run_conv(&c); break;
        case OP_FC: run_fc(&c, 0); break;
        case OP_FC16: run_fc(&c, 1); break;
        case OP_POOL: run_pool(&c); break;
        case OP_ADD: run_eltwise(&c, OP_ADD); break;
        case OP_MUL: run_eltwise(&c, OP_MUL); break;
        case OP_ATTN: run_attn(&c); break;
        case OP_LSTM: run_lstm(&c); break;
        default: put_result(-102, 0, 0, 0); break;
        }
    }
    return out_pos <= OUT_BYTES ? 0 : 5;
}

int main(int argc, char **argv)
{
    long n;
    int rc;
#ifdef PE_ON_TARGET
    (void)argc;
    (void)argv;
    n = pe_read_input(blob_words, sizeof(blob_words));
#else
    FILE *f;
    if (argc != 3) {
        return 2;
    }
    f = fopen(argv[1], "rb");
    if (f == NULL) {
        return 2;
    }
    n = (long)fread(blob_words, 1, sizeof(blob_words), f);
    fclose(f);
#endif
    if (n <= 0) {
        return 2;
    }
    rc = run_blob((size_t)n);
    if (rc != 0) {
        return rc;
    }
#ifdef PE_ON_TARGET
    return pe_write_output(out_words, out_pos) == 0 ? 0 : 6;
#else
    f = fopen(argv[2], "wb");
    if (f == NULL) {
        return 6;
    }
    rc = fwrite(out_words, 1, out_pos, f) == out_pos ? 0 : 6;
    fclose(f);
    return rc;
#endif
}
