/* Plain C tests of the fully connected and element-wise kernels (against
 * wide-integer models written here from the header formulas) and of the
 * static graph runtime (a hand-built table run step by step and whole,
 * compared with direct kernel calls; malformed tables rejected).
 * Built with -fsanitize=address,undefined by tools/check_c.sh. */
#include <stdint.h>
#include <string.h>
#include "pyembed/pyembed.h"
#include "pyembed/pe_fc.h"
#include "pyembed/pe_eltwise.h"
#include "pyembed/pe_graph.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_conv.h"
#include "pyembed/pe_pool.h"
#include "pe_test.h"

static uint64_t rng_state = 0x243F6A8885A308D3ull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static int8_t rnd_s8(void)
{
    return (int8_t)((int32_t)(rnd() & 0xFFu) - 128);
}

/* ---- wide-integer models of the requantization ---------------------------- */

static long long floor_div_pow2(long long a, int k)
{
    long long d = 1ll << k;
    long long q = a / d;
    if ((a % d) != 0 && a < 0) {
        q -= 1;
    }
    return q;
}

static long long sat32(long long v)
{
    return v < -2147483648ll ? -2147483648ll : (v > 2147483647ll ? 2147483647ll : v);
}

static long long model_requant(long long acc, long long m, int s, int single)
{
    if (single) {
        int total = 31 - s;
        return sat32(floor_div_pow2(acc * m + (1ll << (total - 1)), total));
    } else {
        long long x = sat32(acc * (1ll << (s > 0 ? s : 0)));
        long long hi;
        int e = s > 0 ? 0 : -s;
        if (x == -2147483648ll && m == -2147483648ll) {
            hi = 2147483647ll;
        } else {
            hi = floor_div_pow2(x * m + (1ll << 30), 31);
        }
        if (e == 0) {
            return hi;
        }
        {
            long long ax = hi < 0 ? -hi : hi;
            long long r = (ax + (1ll << (e - 1))) >> e;
            return hi < 0 ? -r : r;
        }
    }
}

static long long clampll(long long v, long long lo, long long hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

/* ---- fully connected --------------------------------------------------------- */

static void test_fc_random(int per_channel, int single)
{
    enum { B = 3, K = 37, O = 11 };
    int8_t in[B * K], w[O * K], out[B * O];
    int32_t bias[O], mult[O], shift[O];
    pe_fc_params p;
    pe_per_channel_quant q;
    pe_dims di = {B, 1, 1, K}, dw = {O, 1, 1, K}, dout = {B, 1, 1, O};
    pe_stats stats;
    pe_context ctx;
    int32_t i, b, o, k, size = -1, bad = 0;
    for (i = 0; i < B * K; i++) {
        in[i] = rnd_s8();
    }
    for (i = 0; i < O * K; i++) {
        w[i] = rnd_s8();
    }
    for (o = 0; o < O; o++) {
        bias[o] = (int32_t)(rnd() % 20001u) - 10000;
        mult[o] = (int32_t)(0x40000000u + (rnd() & 0x3FFFFFFFu));
        shift[o] = -(int32_t)(rnd() % 12u) - 1;
    }
    p.input_offset = 17;
    p.filter_offset = 0;
    p.output_offset = -5;
    p.per_channel = per_channel;
    p.activation.min = -100;
    p.activation.max = 120;
    p.rounding = single ? PE_ROUND_SINGLE : PE_ROUND_DOUBLE;
    q.multiplier = mult;
    q.shift = shift;
    memset(&stats, 0, sizeof(stats));
    ctx.buf = NULL;
    ctx.size = 0;
    ctx.stats = &stats;
    PE_CHECK_EQ(pe_fully_connected_s8_get_buffer_size(&di, &dw, &size), PE_OK);
    PE_CHECK_EQ(size, 0);
    PE_CHECK_EQ(pe_fully_connected_s8(&ctx, &p, &q, &di, in, &dw, w, bias, &dout, out), PE_OK);
    for (b = 0; b < B; b++) {
        for (o = 0; o < O; o++) {
            const int qi = per_channel ? o : 0;
            long long acc = bias[o], v;
            for (k = 0; k < K; k++) {
                acc += (long long)(in[b * K + k] + p.input_offset) * w[o * K + k];
            }
            v = model_requant(acc, mult[qi], shift[qi], single) + p.output_offset;
            v = clampll(v, p.activation.min, p.activation.max);
            if (out[b * O + o] != v) {
                bad++;
            }
        }
    }
    PE_CHECK_EQ(bad, 0);
    PE_CHECK_EQ(stats.macs, (uint64_t)B * O * K);
}

static void test_fc_errors(void)
{
    int8_t in[4] = {0}, w[8] = {0}, out[2];
    int32_t m = 1 << 30, s = 0;
    pe_fc_params p;
    pe_per_channel_quant q;
    pe_dims di = {1, 1, 1, 4}, dw = {2, 1, 1, 4}, dout = {1, 1, 1, 2}, bad_out = {1, 1, 1, 3};
    memset(&p, 0, sizeof(p));
    p.activation.min = -128;
    p.activation.max = 127;
    q.multiplier = &m;
    q.shift = &s;
    PE_CHECK_EQ(pe_fully_connected_s8(NULL, &p, &q, &di, in, &dw, w, NULL, &dout, out), PE_OK);
    PE_CHECK_EQ(pe_fully_connected_s8(NULL, &p, &q, &di, in, &dw, w, NULL, &bad_out, out), PE_ERR_ARG);
    PE_CHECK_EQ(pe_fully_connected_s8(NULL, &p, &q, &di, NULL, &dw, w, NULL, &dout, out), PE_ERR_ARG);
    s = 31;
    PE_CHECK_EQ(pe_fully_connected_s8(NULL, &p, &q, &di, in, &dw, w, NULL, &dout, out), PE_ERR_ARG);
    s = 0;
    p.activation.min = 5;
    p.activation.max = 4;
    PE_CHECK_EQ(pe_fully_connected_s8(NULL, &p, &q, &di, in, &dw, w, NULL, &dout, out), PE_ERR_ARG);
}

/* ---- element-wise ---------------------------------------------------------- */

static long long model_add(const pe_add_params *p, int x1, int x2, int single)
{
    long long a = (long long)(x1 + p->input1_offset) * (1ll << p->left_shift);
    long long b = (long long)(x2 + p->input2_offset) * (1ll << p->left_shift);
    long long sa = model_requant(a, p->input1_quant.multiplier, p->input1_quant.shift, single);
    long long sb = model_requant(b, p->input2_quant.multiplier, p->input2_quant.shift, single);
    long long v = model_requant(sa + sb, p->output_quant.multiplier, p->output_quant.shift, single);
    return clampll(v + p->output_offset, p->activation.min, p->activation.max);
}

static void test_add_broadcast(int single)
{
    /* [2,3,4,5] + [1,3,1,5] */
    enum { N = 2, H = 3, W = 4, C = 5 };
    int8_t a[N * H * W * C], b[H * C], out[N * H * W * C];
    pe_dims da = {N, H, W, C}, db = {1, H, 1, C}, dout = {N, H, W, C};
    pe_add_params p;
    pe_stats stats;
    pe_context ctx;
    int32_t n, h, w, c, i, bad = 0;
    for (i = 0; i < N * H * W * C; i++) {
        a[i] = rnd_s8();
    }
    for (i = 0; i < H * C; i++) {
        b[i] = rnd_s8();
    }
    p.input1_offset = 3;
    p.input2_offset = -7;
    p.output_offset = 9;
    p.left_shift = 20;
    p.input1_quant.multiplier = 1518500250;
    p.input1_quant.shift = 0;
    p.input2_quant.multiplier = 1073741824;
    p.input2_quant.shift = -1;
    p.output_quant.multiplier = 1876499845;
    p.output_quant.shift = -19;
    p.activation.min = -128;
    p.activation.max = 127;
    p.rounding = single ? PE_ROUND_SINGLE : PE_ROUND_DOUBLE;
    memset(&stats, 0, sizeof(stats));
    ctx.buf = NULL;
    ctx.size = 0;
    ctx.stats = &stats;
    PE_CHECK_EQ(pe_add_s8(&ctx, &p, &da, a, &db, b, &dout, out), PE_OK);
    for (n = 0; n < N; n++) {
        for (h = 0; h < H; h++) {
            for (w = 0; w < W; w++) {
                for (c = 0; c < C; c++) {
                    const int32_t o = ((n * H + h) * W + w) * C + c;
                    if (out[o] != model_add(&p, a[o], b[h * C + c], single)) {
                        bad++;
                    }
                }
            }
        }
    }
    PE_CHECK_EQ(bad, 0);
    PE_CHECK_EQ(stats.combines, (uint64_t)N * H * W * C);
    /* an input that does not broadcast */
    db.w = 2;
    PE_CHECK_EQ(pe_add_s8(NULL, &p, &da, a, &db, b, &dout, out), PE_ERR_ARG);
    /* input multipliers above one are refused (the sum could overflow) */
    db.w = 1;
    p.input1_quant.shift = 1;
    PE_CHECK_EQ(pe_add_s8(NULL, &p, &da, a, &db, b, &dout, out), PE_ERR_ARG);
}

static void test_mul(void)
{
    int8_t a[6], b[6], out[6];
    pe_dims d = {1, 1, 2, 3};
    pe_mul_params p;
    int32_t i, bad = 0;
    for (i = 0; i < 6; i++) {
        a[i] = rnd_s8();
        b[i] = rnd_s8();
    }
    p.input1_offset = 10;
    p.input2_offset = -20;
    p.output_offset = 1;
    p.output_quant.multiplier = 1500000000;
    p.output_quant.shift = -6;
    p.activation.min = -128;
    p.activation.max = 127;
    p.rounding = PE_ROUND_DOUBLE;
    PE_CHECK_EQ(pe_mul_s8(NULL, &p, &d, a, &d, b, &d, out), PE_OK);
    for (i = 0; i < 6; i++) {
        long long v = model_requant((long long)(a[i] + 10) * (b[i] - 20), 1500000000, -6, 0) + 1;
        if (out[i] != clampll(v, -128, 127)) {
            bad++;
        }
    }
    PE_CHECK_EQ(bad, 0);
}

static void test_requant_and_float(void)
{
    int8_t in[256], out[256];
    float f[256];
    pe_requant_params rp;
    pe_float_quant_params fp;
    int32_t i, bad = 0;
    for (i = 0; i < 256; i++) {
        in[i] = (int8_t)(i - 128);
    }
    rp.input_offset = 5;
    rp.output_offset = -3;
    rp.quant.multiplier = 1431655765; /* 2/3 */
    rp.quant.shift = 1;
    rp.activation.min = -128;
    rp.activation.max = 127;
    rp.rounding = PE_ROUND_DOUBLE;
    PE_CHECK_EQ(pe_requantize_s8(NULL, &rp, 256, in, out), PE_OK);
    for (i = 0; i < 256; i++) {
        long long v = model_requant(in[i] + 5, 1431655765, 1, 0) - 3;
        if (out[i] != clampll(v, -128, 127)) {
            bad++;
        }
    }
    PE_CHECK_EQ(bad, 0);
    /* dequantize then quantize with the same parameters is the identity */
    fp.scale = 0.0625f;
    fp.zero_point = -4;
    fp.rounding = PE_FROUND_AWAY;
    PE_CHECK_EQ(pe_dequantize_s8_f32(NULL, &fp, 256, in, f), PE_OK);
    PE_CHECK(f[0] == (float)(-128 + 4) * 0.0625f);
    PE_CHECK_EQ(pe_quantize_f32_s8(NULL, &fp, 256, f, out), PE_OK);
    PE_CHECK_EQ(memcmp(in, out, 256), 0);
    /* halves: away from zero vs to even; saturation; NaN to the zero point */
    {
        const float x[6] = {0.5f, 1.5f, -0.5f, -2.5f, 1e9f, -1e9f};
        const int8_t away[6] = {1, 2, -1, -3, 127, -128};
        const int8_t even[6] = {0, 2, 0, -2, 127, -128};
        int8_t got[6];
        float nan_val;
        fp.scale = 1.0f;
        fp.zero_point = 0;
        PE_CHECK_EQ(pe_quantize_f32_s8(NULL, &fp, 6, x, got), PE_OK);
        PE_CHECK_EQ(memcmp(got, away, 6), 0);
        fp.rounding = PE_FROUND_EVEN;
        PE_CHECK_EQ(pe_quantize_f32_s8(NULL, &fp, 6, x, got), PE_OK);
        PE_CHECK_EQ(memcmp(got, even, 6), 0);
        nan_val = 0.0f;
        nan_val = nan_val / nan_val;
        fp.zero_point = 7;
        PE_CHECK_EQ(pe_quantize_f32_s8(NULL, &fp, 1, &nan_val, got), PE_OK);
        PE_CHECK_EQ(got[0], 7);
        fp.scale = 0.0f;
        PE_CHECK_EQ(pe_quantize_f32_s8(NULL, &fp, 1, x, got), PE_ERR_ARG);
    }
}

/* ---- the graph runtime --------------------------------------------------------
 * t0 input [1,6,6,2] -> CONV 3x3 pad 1 (t1 w, t2 bias) -> t3 [1,6,6,4]
 * -> MAX_POOL 2x2 s2 -> t4 [1,3,3,4] -> RESHAPE (aliased) t5 [1,36]
 * -> FC (t6 w [5,36], t7 bias) -> t8 [1,5] -> ADD with const t9 [1,5] -> t10
 * -> SOFTMAX -> t11 [1,5]
 */
enum { T_IN, T_CW, T_CB, T_CONV, T_POOL, T_FLAT, T_FW, T_FB, T_FC, T_K, T_ADD, T_OUT, T_COUNT };

static int8_t conv_w[4 * 3 * 3 * 2], fc_w[5 * 36], k_add[5];
static int32_t conv_b[4], fc_b[5];
static int32_t conv_m[4], conv_s[4], fc_m[1], fc_s[1];

static void dims_set(pe_dims *d, int32_t n, int32_t h, int32_t w, int32_t c)
{
    d->n = n;
    d->h = h;
    d->w = w;
    d->c = c;
}

/* Each test operator reads three inputs and writes one output, kept in
 * g_io[slot] = {in0, in1, in2, out} (the table's lists point into it). */
static int32_t g_io[16][4];

static void bind_io(pe_graph_op *op, int32_t slot)
{
    op->inputs = g_io[slot];
    op->num_inputs = 3;
    op->outputs = &g_io[slot][3];
    op->num_outputs = 1;
    op->params = NULL;
    op->num_params = 0;
}

static void build(pe_graph_tensor *t, pe_graph_op *ops, int32_t *arena_size)
{
    int32_t i, off = 0;
    const struct {
        int32_t n, h, w, c;
        pe_dtype dt;
        const void *data;
    } spec[T_COUNT] = {
        {1, 6, 6, 2, PE_DT_INT8, NULL},       {4, 3, 3, 2, PE_DT_INT8, conv_w},
        {1, 1, 1, 4, PE_DT_INT32, conv_b},    {1, 6, 6, 4, PE_DT_INT8, NULL},
        {1, 3, 3, 4, PE_DT_INT8, NULL},       {1, 1, 1, 36, PE_DT_INT8, NULL},
        {1, 1, 5, 36, PE_DT_INT8, fc_w},      {1, 1, 1, 5, PE_DT_INT32, fc_b},
        {1, 1, 1, 5, PE_DT_INT8, NULL},       {1, 1, 1, 5, PE_DT_INT8, k_add},
        {1, 1, 1, 5, PE_DT_INT8, NULL},       {1, 1, 1, 5, PE_DT_INT8, NULL},
    };
    for (i = 0; i < T_COUNT; i++) {
        dims_set(&t[i].dims, spec[i].n, spec[i].h, spec[i].w, spec[i].c);
        t[i].dtype = spec[i].dt;
        t[i].bytes = spec[i].n * spec[i].h * spec[i].w * spec[i].c * (spec[i].dt == PE_DT_INT32 ? 4 : 1);
        t[i].data = spec[i].data;
        t[i].offset = -1;
        if (spec[i].data == NULL && i != T_FLAT) {
            t[i].offset = off;
            off += (t[i].bytes + 15) / 16 * 16;
        }
    }
    t[T_FLAT].offset = t[T_POOL].offset; /* RESHAPE aliases its input */
    for (i = 0; i < 4 * 3 * 3 * 2; i++) {
        conv_w[i] = rnd_s8();
    }
    for (i = 0; i < 5 * 36; i++) {
        fc_w[i] = rnd_s8();
    }
    for (i = 0; i < 5; i++) {
        k_add[i] = rnd_s8();
        fc_b[i] = (int32_t)(rnd() % 2001u) - 1000;
    }
    for (i = 0; i < 4; i++) {
        conv_b[i] = (int32_t)(rnd() % 2001u) - 1000;
        conv_m[i] = 1200000000 + (int32_t)(rnd() % 800000000u);
        conv_s[i] = -7;
    }
    fc_m[0] = 1300000000;
    fc_s[0] = -9;
    memset(ops, 0, 6 * sizeof(pe_graph_op));
    for (i = 0; i < 6; i++) {
        bind_io(&ops[i], i);
    }
    /* 0: conv */
    ops[0].type = PE_GOP_CONV_2D;
    g_io[0][0] = T_IN;
    g_io[0][1] = T_CW;
    g_io[0][2] = T_CB;
    g_io[0][3] = T_CONV;
    ops[0].p.conv.params.input_offset = 3;
    ops[0].p.conv.params.output_offset = -2;
    ops[0].p.conv.params.stride.h = 1;
    ops[0].p.conv.params.stride.w = 1;
    ops[0].p.conv.params.padding.top = 1;
    ops[0].p.conv.params.padding.bottom = 1;
    ops[0].p.conv.params.padding.left = 1;
    ops[0].p.conv.params.padding.right = 1;
    ops[0].p.conv.params.dilation.h = 1;
    ops[0].p.conv.params.dilation.w = 1;
    ops[0].p.conv.params.groups = 1;
    ops[0].p.conv.params.ch_mult = 1;
    ops[0].p.conv.params.activation.min = -128;
    ops[0].p.conv.params.activation.max = 127;
    ops[0].p.conv.params.rounding = PE_ROUND_DOUBLE;
    ops[0].p.conv.quant.quant.multiplier = conv_m;
    ops[0].p.conv.quant.quant.shift = conv_s;
    ops[0].p.conv.quant.count = 4;
    /* 1: max pool */
    ops[1].type = PE_GOP_MAX_POOL_2D;
    g_io[1][0] = T_CONV;
    g_io[1][1] = -1;
    g_io[1][2] = -1;
    g_io[1][3] = T_POOL;
    ops[1].p.pool.kind = PE_POOL_MAX;
    ops[1].p.pool.window.h = 2;
    ops[1].p.pool.window.w = 2;
    ops[1].p.pool.stride.h = 2;
    ops[1].p.pool.stride.w = 2;
    ops[1].p.pool.activation.min = -128;
    ops[1].p.pool.activation.max = 127;
    /* 2: reshape */
    ops[2].type = PE_GOP_RESHAPE;
    g_io[2][0] = T_POOL;
    g_io[2][1] = -1;
    g_io[2][2] = -1;
    g_io[2][3] = T_FLAT;
    /* 3: fc */
    ops[3].type = PE_GOP_FULLY_CONNECTED;
    g_io[3][0] = T_FLAT;
    g_io[3][1] = T_FW;
    g_io[3][2] = T_FB;
    g_io[3][3] = T_FC;
    ops[3].p.fc.params.input_offset = 1;
    ops[3].p.fc.params.output_offset = 4;
    ops[3].p.fc.params.activation.min = -128;
    ops[3].p.fc.params.activation.max = 127;
    ops[3].p.fc.params.rounding = PE_ROUND_DOUBLE;
    ops[3].p.fc.quant.quant.multiplier = fc_m;
    ops[3].p.fc.quant.quant.shift = fc_s;
    ops[3].p.fc.quant.count = 1;
    /* 4: add */
    ops[4].type = PE_GOP_ADD;
    g_io[4][0] = T_FC;
    g_io[4][1] = T_K;
    g_io[4][2] = -1;
    g_io[4][3] = T_ADD;
    ops[4].p.add.left_shift = 20;
    ops[4].p.add.input1_quant.multiplier = 1073741824;
    ops[4].p.add.input1_quant.shift = 0;
    ops[4].p.add.input2_quant.multiplier = 1073741824;
    ops[4].p.add.input2_quant.shift = -1;
    ops[4].p.add.output_quant.multiplier = 1073741824;
    ops[4].p.add.output_quant.shift = -19;
    ops[4].p.add.activation.min = -128;
    ops[4].p.add.activation.max = 127;
    /* 5: softmax */
    ops[5].type = PE_GOP_SOFTMAX;
    g_io[5][0] = T_ADD;
    g_io[5][1] = -1;
    g_io[5][2] = -1;
    g_io[5][3] = T_OUT;
    ops[5].p.softmax.mult = 1717986918;
    ops[5].p.softmax.shift = 22;
    ops[5].p.softmax.diff_min = -248;
    *arena_size = off;
}

static int32_t align16(int32_t n)
{
    return (n + 15) / 16 * 16;
}

static void test_graph_runtime(void)
{
    static pe_graph_tensor t[T_COUNT];
    static pe_graph_op ops[6];
    static int32_t arena_words[1024];
    int8_t *arena = (int8_t *)arena_words;
    static int8_t scratch[2048];
    int8_t input[72], conv_out[144], pool_out[36], fc_out[5], add_out[5], sm_out[5];
    pe_graph g;
    pe_context a, kctx;
    pe_stats stats;
    int32_t i, bad_op, bad_tensor, base, conv_scratch = 0, pool_scratch = 0;
    build(t, ops, &base);
    /* scratch regions after the tensors */
    PE_CHECK_EQ(pe_conv2d_rev_s8_get_buffer_size(&ops[0].p.conv.params, &t[T_IN].dims, &t[T_CW].dims,
                                                 &t[T_CONV].dims, &conv_scratch),
                PE_OK);
    PE_CHECK_EQ(pe_pool_rev_get_buffer_size(&ops[1].p.pool, &t[T_CONV].dims, &t[T_POOL].dims,
                                            &pool_scratch),
                PE_OK);
    ops[0].scratch_offset = base;
    ops[0].scratch_size = conv_scratch;
    ops[1].scratch_offset = base + align16(conv_scratch);
    ops[1].scratch_size = pool_scratch;
    for (i = 2; i < 6; i++) {
        ops[i].scratch_offset = -1;
    }
    g.tensors = t;
    g.num_tensors = T_COUNT;
    g.ops = ops;
    g.num_ops = 6;
    g.arena_size = base + align16(conv_scratch) + align16(pool_scratch);
    PE_CHECK(g.arena_size <= (int32_t)sizeof(arena_words));
    PE_CHECK_EQ(pe_graph_check(&g, &bad_op, &bad_tensor), PE_OK);
    PE_CHECK_EQ(bad_op, -1);

    for (i = 0; i < 72; i++) {
        input[i] = rnd_s8();
    }
    memset(arena_words, 0x55, sizeof(arena_words));
    memcpy(arena + t[T_IN].offset, input, 72);
    memset(&stats, 0, sizeof(stats));
    a.buf = arena;
    a.size = (int32_t)sizeof(arena_words);
    a.stats = &stats;
    PE_CHECK_EQ(pe_graph_invoke(&g, &a), PE_OK);

    /* the same chain by direct kernel calls */
    kctx.buf = scratch;
    kctx.size = (int32_t)sizeof(scratch);
    kctx.stats = NULL;
    {
        pe_per_channel_quant cq;
        pe_dims fd = {1, 1, 1, 36}, wd = {5, 1, 1, 36}, od = {1, 1, 1, 5};
        pe_per_channel_quant fq;
        cq.multiplier = conv_m;
        cq.shift = conv_s;
        fq.multiplier = fc_m;
        fq.shift = fc_s;
        PE_CHECK_EQ(pe_conv2d_rev_s8(&kctx, &ops[0].p.conv.params, &cq, &t[T_IN].dims, input,
                                     &t[T_CW].dims, conv_w, conv_b, &t[T_CONV].dims, conv_out),
                    PE_OK);
        PE_CHECK_EQ(pe_pool_rev_s8(&kctx, &ops[1].p.pool, &t[T_CONV].dims, conv_out, &t[T_POOL].dims,
                                   pool_out),
                    PE_OK);
        PE_CHECK_EQ(pe_fully_connected_s8(NULL, &ops[3].p.fc.params, &fq, &fd, pool_out, &wd, fc_w,
                                          fc_b, &od, fc_out),
                    PE_OK);
        PE_CHECK_EQ(pe_add_s8(NULL, &ops[4].p.add, &od, fc_out, &od, k_add, &od, add_out), PE_OK);
        PE_CHECK_EQ(pe_softmax_s8(&ops[5].p.softmax, 1, 5, add_out, sm_out), PE_OK);
    }
    PE_CHECK_EQ(memcmp(arena + t[T_CONV].offset, conv_out, 144), 0);
    PE_CHECK_EQ(memcmp(arena + t[T_POOL].offset, pool_out, 36), 0);
    PE_CHECK_EQ(memcmp(arena + t[T_OUT].offset, sm_out, 5), 0);
    /* counters: conv MACs (padded taps skipped) plus FC MACs */
    PE_CHECK(stats.macs > 180u);
    PE_CHECK(stats.combines > 0u);

    /* step by step gives the same result */
    memset(arena + t[T_OUT].offset, 0, 5);
    for (i = 0; i < 6; i++) {
        PE_CHECK_EQ(pe_graph_invoke_op(&g, i, &a), PE_OK);
    }
    PE_CHECK_EQ(memcmp(arena + t[T_OUT].offset, sm_out, 5), 0);

    /* an arena smaller than the graph needs */
    a.size = g.arena_size - 1;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &a), PE_ERR_SCRATCH);
    a.size = (int32_t)sizeof(arena_words);
    a.buf = NULL;
    PE_CHECK_EQ(pe_graph_invoke(&g, &a), PE_ERR_SCRATCH);
    a.buf = arena;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 6, &a), PE_ERR_ARG);
    PE_CHECK_EQ(pe_graph_invoke_op(&g, -1, &a), PE_ERR_ARG);

    /* malformed tables are rejected, not run */
    t[T_FC].offset = g.arena_size - 2; /* runs past the arena */
    PE_CHECK_EQ(pe_graph_check(&g, &bad_op, &bad_tensor), PE_ERR_ARG);
    PE_CHECK_EQ(bad_tensor, T_FC);
    a.size = g.arena_size;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 3, &a), PE_ERR_ARG);
    a.size = (int32_t)sizeof(arena_words);
    t[T_FC].offset = 0;
    t[T_FC].bytes = 6; /* disagrees with its dims */
    PE_CHECK_EQ(pe_graph_check(&g, &bad_op, &bad_tensor), PE_ERR_ARG);
    PE_CHECK_EQ(bad_tensor, T_FC);
    t[T_FC].bytes = 5;
    g_io[3][3] = T_FW; /* writes a constant */
    PE_CHECK_EQ(pe_graph_check(&g, &bad_op, &bad_tensor), PE_ERR_ARG);
    PE_CHECK_EQ(bad_op, 3);
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 3, &a), PE_ERR_ARG);
    g_io[3][3] = T_FC;
    g_io[4][1] = T_CB; /* int32 where ADD needs int8 */
    PE_CHECK_EQ(pe_graph_check(&g, &bad_op, &bad_tensor), PE_ERR_ARG);
    PE_CHECK_EQ(bad_op, 4);
    g_io[4][1] = T_K;
    ops[0].scratch_offset = g.arena_size; /* scratch outside the arena */
    PE_CHECK_EQ(pe_graph_check(&g, &bad_op, &bad_tensor), PE_ERR_ARG);
    PE_CHECK_EQ(bad_op, 0);
    ops[0].scratch_offset = base;
    ops[0].p.conv.quant.count = 3; /* fewer multipliers than channels */
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &a), PE_ERR_ARG);
    ops[0].p.conv.quant.count = 4;
    PE_CHECK_EQ(pe_graph_check(&g, &bad_op, &bad_tensor), PE_OK);

    /* graph/scratch-overlaps-output: a scratch region sharing bytes with
     * the operator's own output or input is refused (the pooling kernel
     * wrote output rows over its stream state and ran on garbage) */
    {
        const int32_t keep = ops[1].scratch_offset;
        /* over the output; first scratch byte on the last output byte; over
         * the input; first scratch byte on the last input byte */
        const int32_t at[4] = {t[T_POOL].offset, t[T_POOL].offset + 35, t[T_CONV].offset,
                               t[T_CONV].offset + 143};
        for (i = 0; i < 4; i++) {
            ops[1].scratch_offset = at[i];
            PE_CHECK_EQ(pe_graph_check(&g, &bad_op, &bad_tensor), PE_ERR_ARG);
            PE_CHECK_EQ(bad_op, 1);
            PE_CHECK_EQ(pe_graph_invoke_op(&g, 1, &a), PE_ERR_ARG);
        }
        /* right after the output, sharing no byte with it: fine */
        ops[1].scratch_offset = t[T_POOL].offset + 36;
        PE_CHECK_EQ(pe_graph_check(&g, &bad_op, &bad_tensor), PE_OK);
        ops[1].scratch_offset = keep;
        ops[0].scratch_offset = t[T_IN].offset; /* conv scratch over its input */
        PE_CHECK_EQ(pe_graph_check(&g, &bad_op, &bad_tensor), PE_ERR_ARG);
        PE_CHECK_EQ(bad_op, 0);
        PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &a), PE_ERR_ARG);
        ops[0].scratch_offset = base;
        PE_CHECK_EQ(pe_graph_check(&g, &bad_op, &bad_tensor), PE_OK);
        PE_CHECK_EQ(pe_graph_invoke(&g, &a), PE_OK);
        PE_CHECK_EQ(memcmp(arena + t[T_OUT].offset, sm_out, 5), 0);
    }
}

/* RESHAPE between tensors that do not share bytes copies them. */
static void test_reshape_copy(void)
{
    pe_graph_tensor t[2];
    pe_graph_op op;
    pe_graph g;
    pe_context a;
    int8_t arena[64];
    int32_t i;
    memset(&op, 0, sizeof(op));
    bind_io(&op, 15);
    dims_set(&t[0].dims, 1, 2, 3, 4);
    dims_set(&t[1].dims, 1, 1, 1, 24);
    for (i = 0; i < 2; i++) {
        t[i].dtype = PE_DT_INT8;
        t[i].bytes = 24;
        t[i].data = NULL;
    }
    t[0].offset = 0;
    t[1].offset = 32;
    op.type = PE_GOP_RESHAPE;
    g_io[15][0] = 0;
    g_io[15][1] = -1;
    g_io[15][2] = -1;
    g_io[15][3] = 1;
    op.scratch_offset = -1;
    g.tensors = t;
    g.num_tensors = 2;
    g.ops = &op;
    g.num_ops = 1;
    g.arena_size = 64;
    for (i = 0; i < 64; i++) {
        arena[i] = (int8_t)i;
    }
    a.buf = arena;
    a.size = 64;
    a.stats = NULL;
    PE_CHECK_EQ(pe_graph_check(&g, NULL, NULL), PE_OK);
    PE_CHECK_EQ(pe_graph_invoke(&g, &a), PE_OK);
    for (i = 0; i < 24; i++) {
        PE_CHECK_EQ(arena[32 + i], i);
    }
    /* overlapping move */
    t[1].offset = 4;
    for (i = 0; i < 64; i++) {
        arena[i] = (int8_t)i;
    }
    PE_CHECK_EQ(pe_graph_invoke(&g, &a), PE_OK);
    for (i = 0; i < 24; i++) {
        PE_CHECK_EQ(arena[4 + i], i);
    }
}

/* Fuzzer findings (tests/data/regressions/graph/), run under ASan + UBSan:
 * corrupted tables are refused with PE_ERR_ARG and nothing is read or
 * written outside them. */
static void test_graph_regressions(void)
{
    pe_graph_tensor t[2];
    pe_graph_op op;
    pe_graph g;
    int32_t bad_op, bad_tensor;
    memset(t, 0, sizeof(t));
    memset(&op, 0, sizeof(op));
    bind_io(&op, 15);
    dims_set(&t[0].dims, 1, 2, 3, 4);
    dims_set(&t[1].dims, 1, 2, 3, 4);
    t[0].dtype = t[1].dtype = PE_DT_INT8;
    t[0].bytes = t[1].bytes = 24;
    t[0].offset = 0;
    t[1].offset = 32;
    op.type = PE_GOP_REQUANTIZE;
    g_io[15][0] = 0;
    g_io[15][1] = -1;
    g_io[15][2] = -1;
    g_io[15][3] = 1;
    op.scratch_offset = -1;
    op.p.requant.quant.multiplier = 1 << 30;
    op.p.requant.activation.min = -128;
    op.p.requant.activation.max = 127;
    g.tensors = t;
    g.num_tensors = 2;
    g.ops = &op;
    g.num_ops = 1;
    g.arena_size = 64;
    PE_CHECK_EQ(pe_graph_check(&g, &bad_op, &bad_tensor), PE_OK);

    /* graph/dims-count-overflow: n * h * w * c of corrupted dims overflowed
     * int64 before it was compared with bytes */
    dims_set(&t[1].dims, 2147483647, 2147483647, 757935405, 2147483647);
    PE_CHECK_EQ(pe_graph_check(&g, &bad_op, &bad_tensor), PE_ERR_ARG);
    PE_CHECK_EQ(bad_tensor, 1);
    dims_set(&t[1].dims, 1, 65536, 65536, 1); /* 2^32 elements */
    t[1].bytes = 0;
    PE_CHECK_EQ(pe_graph_check(&g, &bad_op, &bad_tensor), PE_ERR_ARG);
    PE_CHECK_EQ(bad_tensor, 1);
    dims_set(&t[1].dims, 1, 2, 3, 4);
    t[1].bytes = 24;
    PE_CHECK_EQ(pe_graph_check(&g, &bad_op, &bad_tensor), PE_OK);

    /* graph/unary-index-unchecked: REQUANTIZE / QUANTIZE / DEQUANTIZE read
     * the dims of inputs[0] before checking the index */
    {
        static int32_t arena_words[16];
        const pe_graph_op_type unary[3] = {PE_GOP_REQUANTIZE, PE_GOP_QUANTIZE,
                                           PE_GOP_DEQUANTIZE};
        const int32_t bad_index[4] = {2, 1000000, -2, 2147483647};
        pe_context a;
        int32_t i, k;
        a.buf = arena_words;
        a.size = (int32_t)sizeof(arena_words);
        a.stats = NULL;
        PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &a), PE_OK);
        for (i = 0; i < 3; i++) {
            op.type = unary[i];
            for (k = 0; k < 4; k++) {
                g_io[15][0] = bad_index[k];
                g_io[15][3] = 1;
                PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &a), PE_ERR_ARG);
                g_io[15][0] = 0;
                g_io[15][3] = bad_index[k];
                PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &a), PE_ERR_ARG);
            }
        }
        op.type = PE_GOP_REQUANTIZE;
        g_io[15][0] = 0;
        g_io[15][3] = 1;
    }
}

/* The convolution runners a generated operator table may name instead of
 * pe_graph_run_conv: each runs its own type and form bit-exactly as the full
 * runner does and refuses the others. */
static void test_conv_form_runners(void)
{
    static pe_graph_tensor t[T_COUNT];
    static pe_graph_op ops[6];
    static int32_t arena_words[1024];
    static int32_t ref_words[1024];
    int8_t *arena = (int8_t *)arena_words;
    pe_graph g;
    pe_context a, ra, sctx;
    int32_t i, base, conv_scratch = 0, form;
    build(t, ops, &base);
    PE_CHECK_EQ(pe_conv2d_rev_s8_get_buffer_size(&ops[0].p.conv.params, &t[T_IN].dims, &t[T_CW].dims,
                                                 &t[T_CONV].dims, &conv_scratch),
                PE_OK);
    g.tensors = t;
    g.num_tensors = T_COUNT;
    g.ops = ops;
    g.num_ops = 1;
    g.arena_size = base + align16(conv_scratch);
    PE_CHECK(g.arena_size <= (int32_t)sizeof(arena_words));
    for (form = 0; form < 2; form++) { /* 0: gather (no scratch), 1: reverse */
        ops[0].scratch_offset = form ? base : -1;
        ops[0].scratch_size = form ? conv_scratch : 0;
        memset(arena_words, 0, sizeof(arena_words));
        for (i = 0; i < 72; i++) {
            arena[t[T_IN].offset + i] = rnd_s8();
        }
        memcpy(ref_words, arena_words, sizeof(arena_words));
        a.buf = arena;
        a.size = (int32_t)sizeof(arena_words);
        a.stats = NULL;
        ra = a;
        ra.buf = ref_words;
        sctx.buf = form ? (int8_t *)ref_words + base : NULL;
        sctx.size = ops[0].scratch_size;
        sctx.stats = NULL;
        PE_CHECK_EQ(pe_graph_run_conv(&g, &ops[0], &sctx, &ra), PE_OK);
        sctx.buf = form ? arena + base : NULL;
        PE_CHECK_EQ((form ? pe_graph_run_conv2d_rev : pe_graph_run_conv2d_gather)(&g, &ops[0], &sctx, &a), PE_OK);
        PE_CHECK(memcmp(arena + t[T_CONV].offset, (int8_t *)ref_words + t[T_CONV].offset, 144) == 0);
        /* the other form, and the depthwise runners, refuse it */
        PE_CHECK_EQ((form ? pe_graph_run_conv2d_gather : pe_graph_run_conv2d_rev)(&g, &ops[0], &sctx, &a),
                    PE_ERR_ARG);
        PE_CHECK_EQ(pe_graph_run_dwconv_rev(&g, &ops[0], &sctx, &a), PE_ERR_ARG);
        PE_CHECK_EQ(pe_graph_run_dwconv_gather(&g, &ops[0], &sctx, &a), PE_ERR_ARG);
    }
}

int main(void)
{
    test_fc_random(0, 0);
    test_fc_random(1, 0);
    test_fc_random(0, 1);
    test_fc_random(1, 1);
    test_fc_errors();
    test_add_broadcast(0);
    test_add_broadcast(1);
    test_mul();
    test_requant_and_float();
    test_graph_runtime();
    test_conv_form_runners();
    test_reshape_copy();
    test_graph_regressions();
    return PE_TEST_END("test_graph");
}
