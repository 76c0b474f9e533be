/* test_pipeline.c - the pipeline operators decoded from int32 words
 * (pe_pipeline.h): a stripe region gives the same bytes as the stripe
 * executor on the equivalent hand-built table, the scratch query covers the
 * table, bad words / constants / scratch are refused. */
#include <stdint.h>
#include <string.h>

#include "pe_test.h"
#include "pyembed/pe_pipeline.h"
#include "pyembed/pe_stripe.h"
#include "pyembed/pe_fused.h"

#define H 12
#define W 10
#define NW (PE_STRIPE_REGION_HEADER_WORDS + 3 * PE_STRIPE_REGION_LAYER_WORDS)

static uint32_t rng_state = 12345u;
static int8_t rnd8(void)
{
    rng_state = rng_state * 1103515245u + 12345u;
    return (int8_t)((int32_t)((rng_state >> 16) % 255u) - 127);
}

static int8_t wc[4 * 3 * 3 * 3], wd[3 * 3 * 4];
static int32_t bc[4], bd[4], mc[4], sc[4], md[4], sd[4];
static int8_t input[H * W * 3];
static int8_t out_a[H * W * 4], out_b[H * W * 4];
static unsigned char scratch_a[1 << 15], scratch_b[1 << 15];
static int32_t words[NW];

/* slot -> constant */
typedef struct {
    const void *data[9];
    int32_t bytes[9];
} consts_t;
static consts_t consts;

static const void *lookup(const void *user, int32_t slot, int32_t elem_bytes, int32_t count)
{
    const consts_t *c = (const consts_t *)user;
    if (slot < 1 || slot > 8 || c->data[slot] == NULL || c->bytes[slot] != elem_bytes * count) {
        return NULL;
    }
    return c->data[slot];
}

static void set_const(int slot, const void *p, int32_t bytes)
{
    consts.data[slot] = p;
    consts.bytes[slot] = bytes;
}

static int32_t *layer_words(int i)
{
    return words + PE_STRIPE_REGION_HEADER_WORDS + i * PE_STRIPE_REGION_LAYER_WORDS;
}

static void build(pe_stripe_layer *t)
{
    int i;
    int32_t *w;
    for (i = 0; i < (int)sizeof(wc); i++) wc[i] = rnd8();
    for (i = 0; i < (int)sizeof(wd); i++) wd[i] = rnd8();
    for (i = 0; i < (int)sizeof(input); i++) input[i] = rnd8();
    for (i = 0; i < 4; i++) {
        bc[i] = 100 * i - 150;
        bd[i] = -40 * i;
        mc[i] = md[i] = 1518500250 + i * 1000;
        sc[i] = -9;
        sd[i] = -7;
    }
    memset(words, 0, sizeof(words));
    words[0] = PE_STRIPE_REGION_VERSION;
    words[1] = 3;
    words[2] = 4; /* stripe width */
    words[3] = 2; /* block width */
    /* layer 0: conv 3x3 3->4 same, slots 1..4 */
    w = layer_words(0);
    w[0] = PE_STRIPE_CONV; w[1] = 3; w[2] = 4; w[3] = 3; w[4] = 3; w[5] = 1; w[6] = 1;
    w[7] = 1; w[8] = 1; w[9] = 1; w[10] = 1; w[11] = 5; w[12] = -3; w[13] = -128; w[14] = 127;
    w[27] = 1; w[28] = 2; w[29] = 3; w[30] = 4;
    /* layer 1: depthwise 3x3 stride 2, slots 5..8 */
    w = layer_words(1);
    w[0] = PE_STRIPE_DEPTHWISE; w[1] = 4; w[2] = 4; w[3] = 3; w[4] = 3; w[5] = 2; w[6] = 2;
    w[7] = 0; w[8] = 1; w[9] = 0; w[10] = 1; w[11] = 3; w[12] = 2; w[13] = 2; w[14] = 127;
    w[27] = 5; w[28] = 6; w[29] = 7; w[30] = 8;
    /* layer 2: average pool 2x2 stride 1, no constants */
    w = layer_words(2);
    w[0] = PE_STRIPE_POOL; w[1] = 4; w[2] = 4; w[3] = 2; w[4] = 2; w[5] = 1; w[6] = 1;
    w[13] = -128; w[14] = 127; w[16] = PE_POOL_AVG;
    w[27] = w[28] = w[29] = w[30] = -1;
    set_const(1, wc, (int32_t)sizeof(wc));
    set_const(2, bc, (int32_t)sizeof(bc));
    set_const(3, mc, (int32_t)sizeof(mc));
    set_const(4, sc, (int32_t)sizeof(sc));
    set_const(5, wd, (int32_t)sizeof(wd));
    set_const(6, bd, (int32_t)sizeof(bd));
    set_const(7, md, (int32_t)sizeof(md));
    set_const(8, sd, (int32_t)sizeof(sd));
    /* the same network by hand */
    memset(t, 0, 3 * sizeof(*t));
    t[0].op = PE_STRIPE_CONV; t[0].in_c = 3; t[0].out_c = 4; t[0].kernel.h = t[0].kernel.w = 3;
    t[0].stride.h = t[0].stride.w = 1;
    t[0].padding.top = t[0].padding.bottom = t[0].padding.left = t[0].padding.right = 1;
    t[0].input_offset = 5; t[0].output_offset = -3; t[0].activation.min = -128; t[0].activation.max = 127;
    t[0].weights = wc; t[0].bias = bc; t[0].quant.multiplier = mc; t[0].quant.shift = sc;
    t[1].op = PE_STRIPE_DEPTHWISE; t[1].in_c = 4; t[1].out_c = 4; t[1].kernel.h = t[1].kernel.w = 3;
    t[1].stride.h = t[1].stride.w = 2; t[1].padding.bottom = 1; t[1].padding.right = 1;
    t[1].input_offset = 3; t[1].output_offset = 2; t[1].activation.min = 2; t[1].activation.max = 127;
    t[1].weights = wd; t[1].bias = bd; t[1].quant.multiplier = md; t[1].quant.shift = sd;
    t[2].op = PE_STRIPE_POOL; t[2].in_c = 4; t[2].out_c = 4; t[2].kernel.h = t[2].kernel.w = 2;
    t[2].stride.h = t[2].stride.w = 1; t[2].activation.min = -128; t[2].activation.max = 127;
    t[2].pool_kind = PE_POOL_AVG;
}

static void test_region(void)
{
    pe_stripe_layer table[3];
    pe_stripe_net net;
    pe_dims din = {1, H, W, 3}, dout;
    pe_context ca, cb;
    int32_t size = 0, ref_size = 0, i, n;
    build(table);
    net.layers = table;
    net.n_layers = 3;
    net.input = din;
    PE_CHECK_EQ(pe_stripe_output_dims(&net, &dout), PE_OK);
    n = dout.h * dout.w * dout.c;
    PE_CHECK_EQ(pe_stripe_get_buffer_size_s8(&net, 4, 2, &ref_size), PE_OK);
    PE_CHECK_EQ(pe_stripe_region_get_buffer_size(words, NW, lookup, &consts, &din, &size), PE_OK);
    PE_CHECK_EQ(size, ref_size + pe_stripe_region_table_bytes(3));
    cb.buf = scratch_b; cb.size = ref_size; cb.stats = NULL;
    PE_CHECK_EQ(pe_stripe_run_s8(&cb, &net, 4, 2, &din, input, &dout, out_b), PE_OK);
    ca.buf = scratch_a; ca.size = size; ca.stats = NULL;
    memset(out_a, 0x55, sizeof(out_a));
    PE_CHECK_EQ(pe_stripe_region_run(&ca, words, NW, lookup, &consts, &din, input, &dout, out_a), PE_OK);
    for (i = 0; i < n; i++) {
        PE_CHECK_EQ(out_a[i], out_b[i]);
    }
    /* too little scratch, wrong word count, bad enum, wrong constant size, bad slot */
    ca.size = size - 1;
    PE_CHECK_EQ(pe_stripe_region_run(&ca, words, NW, lookup, &consts, &din, input, &dout, out_a),
                PE_ERR_SCRATCH);
    ca.size = size;
    PE_CHECK_EQ(pe_stripe_region_run(&ca, words, NW - 1, lookup, &consts, &din, input, &dout, out_a),
                PE_ERR_ARG);
    layer_words(2)[0] = PE_STRIPE_CROP + 1; /* one past the last kind */
    PE_CHECK_EQ(pe_stripe_region_get_buffer_size(words, NW, lookup, &consts, &din, &size), PE_ERR_ARG);
    layer_words(2)[0] = PE_STRIPE_POOL;
    layer_words(2)[27] = 1; /* a pool with weights */
    PE_CHECK_EQ(pe_stripe_region_get_buffer_size(words, NW, lookup, &consts, &din, &size), PE_ERR_ARG);
    layer_words(2)[27] = -1;
    consts.bytes[5] -= 1;
    PE_CHECK_EQ(pe_stripe_region_run(&ca, words, NW, lookup, &consts, &din, input, &dout, out_a), PE_ERR_ARG);
    consts.bytes[5] += 1;
    layer_words(0)[29] = 40;
    PE_CHECK_EQ(pe_stripe_region_run(&ca, words, NW, lookup, &consts, &din, input, &dout, out_a), PE_ERR_ARG);
    layer_words(0)[29] = 3;
    words[0] = 7;
    PE_CHECK_EQ(pe_stripe_region_run(&ca, words, NW, lookup, &consts, &din, input, &dout, out_a), PE_ERR_ARG);
    words[0] = PE_STRIPE_REGION_VERSION;
    dout.w += 1;
    PE_CHECK(pe_stripe_region_run(&ca, words, NW, lookup, &consts, &din, input, &dout, out_a) != PE_OK);
}

/* A row source over the test image that logs every call. */
typedef struct {
    int32_t calls, next_row, bad, fail_at;
} row_log;

static pe_status read_rows(void *user, int32_t row, int32_t col, int32_t n_cols, int8_t *dst)
{
    row_log *lg = (row_log *)user;
    if (row == lg->fail_at) {
        return PE_ERR_STATE;
    }
    if (row < 0 || row >= H || col < 0 || n_cols < 1 || col + n_cols > W) {
        lg->bad++;
        return PE_ERR_ARG;
    }
    if (row != lg->next_row % H) {
        lg->bad++; /* rows must come in order, again from 0 for each stripe */
    }
    lg->next_row = row + 1;
    lg->calls++;
    memcpy(dst, input + ((size_t)row * W + (size_t)col) * 3, (size_t)n_cols * 3);
    return PE_OK;
}

/* The streamed input: the same bytes as from the image; one stripe asks for
 * each row once, in order; several stripes ask again per stripe; the row
 * buffer is in the flagged query; a source error stops the run. */
static void test_region_rows(void)
{
    pe_dims din = {1, H, W, 3}, dout = {1, 5, 4, 4};
    pe_context ca;
    pe_row_source src;
    row_log lg;
    int32_t size_plain = 0, size_rows = 0, i, n = 5 * 4 * 4;
    pe_stripe_layer table[3];
    build(table);
    words[2] = 2; /* two stripes of the 4 output columns */
    PE_CHECK_EQ(pe_stripe_region_get_buffer_size(words, NW, lookup, &consts, &din, &size_plain), PE_OK);
    ca.buf = scratch_b; ca.size = size_plain; ca.stats = NULL;
    PE_CHECK_EQ(pe_stripe_region_run(&ca, words, NW, lookup, &consts, &din, input, &dout, out_b), PE_OK);
    memset(&lg, 0, sizeof(lg));
    lg.fail_at = -1;
    src.read = read_rows;
    src.user = &lg;
    ca.buf = scratch_a;
    /* not flagged: refused */
    PE_CHECK_EQ(pe_stripe_region_run_rows(&ca, words, NW, lookup, &consts, &din, &src, &dout, out_a), PE_ERR_ARG);
    words[4] = PE_STRIPE_REGION_STREAMED;
    PE_CHECK_EQ(pe_stripe_region_get_buffer_size(words, NW, lookup, &consts, &din, &size_rows), PE_OK);
    PE_CHECK(size_rows > size_plain);
    ca.size = size_rows;
    memset(out_a, 0x55, sizeof(out_a));
    PE_CHECK_EQ(pe_stripe_region_run_rows(&ca, words, NW, lookup, &consts, &din, &src, &dout, out_a), PE_OK);
    for (i = 0; i < n; i++) {
        PE_CHECK_EQ(out_a[i], out_b[i]);
    }
    PE_CHECK_EQ(lg.bad, 0);
    PE_CHECK(lg.calls > H); /* one pass per stripe */
    /* one stripe: every row exactly once */
    words[2] = 1000;
    PE_CHECK_EQ(pe_stripe_region_get_buffer_size(words, NW, lookup, &consts, &din, &size_rows), PE_OK);
    ca.size = size_rows;
    memset(&lg, 0, sizeof(lg));
    lg.fail_at = -1;
    memset(out_a, 0x55, sizeof(out_a));
    PE_CHECK_EQ(pe_stripe_region_run_rows(&ca, words, NW, lookup, &consts, &din, &src, &dout, out_a), PE_OK);
    for (i = 0; i < n; i++) {
        PE_CHECK_EQ(out_a[i], out_b[i]);
    }
    PE_CHECK_EQ(lg.calls, H);
    PE_CHECK_EQ(lg.bad, 0);
    ca.size = size_rows - 8; /* the row buffer does not fit */
    PE_CHECK_EQ(pe_stripe_region_run_rows(&ca, words, NW, lookup, &consts, &din, &src, &dout, out_a),
                PE_ERR_SCRATCH);
    ca.size = size_rows;
    lg.fail_at = 3;
    lg.next_row = 0;
    PE_CHECK_EQ(pe_stripe_region_run_rows(&ca, words, NW, lookup, &consts, &din, &src, &dout, out_a),
                PE_ERR_STATE);
    src.read = NULL;
    PE_CHECK_EQ(pe_stripe_region_run_rows(&ca, words, NW, lookup, &consts, &din, &src, &dout, out_a), PE_ERR_ARG);
    words[4] = 8; /* unknown flag (1: streamed input, 2: streamed output, 4: split stores) */
    PE_CHECK_EQ(pe_stripe_region_get_buffer_size(words, NW, lookup, &consts, &din, &size_rows), PE_ERR_ARG);
    words[4] = 0;
    words[2] = 4;
}

static void test_conv_pool_words(void)
{
    int32_t w[PE_CONV_POOL_WORDS];
    pe_conv_params cp;
    pe_pool_params pp;
    int32_t ch = 0, cw = 0, size = 0;
    pe_dims din = {1, 8, 8, 3}, dfil = {4, 3, 3, 3}, dout = {1, 4, 4, 4};
    memset(w, 0, sizeof(w));
    w[0] = w[1] = 1; w[2] = w[3] = w[4] = w[5] = 1; w[6] = w[7] = 1;
    w[10] = -128; w[11] = 127; w[13] = 8; w[14] = 8;
    w[15] = PE_POOL_MAX; w[16] = w[17] = 2; w[18] = w[19] = 2; w[24] = -128; w[25] = 127;
    w[26] = 0; /* groups 0: refused */
    PE_CHECK_EQ(pe_conv_pool_decode(w, PE_CONV_POOL_WORDS, &cp, &pp, &ch, &cw), PE_ERR_ARG);
    w[26] = 3; /* depthwise: 3 groups of one input channel, 4 outputs is not a multiple of 3 */
    {
        pe_dims dw = {4, 3, 3, 1};
        PE_CHECK_EQ(pe_conv_pool_op_get_buffer_size(w, PE_CONV_POOL_WORDS, &din, &dw, &dout, &size), PE_ERR_ARG);
        dw.n = 3;
        dout.c = 3;
        PE_CHECK_EQ(pe_conv_pool_op_get_buffer_size(w, PE_CONV_POOL_WORDS, &din, &dw, &dout, &size), PE_OK);
        dout.c = 4;
    }
    w[26] = 1;
    PE_CHECK_EQ(pe_conv_pool_decode(w, PE_CONV_POOL_WORDS, &cp, &pp, &ch, &cw), PE_OK);
    PE_CHECK_EQ(ch, 8);
    PE_CHECK_EQ(pp.window.h, 2);
    PE_CHECK_EQ(pe_conv_pool_op_get_buffer_size(w, PE_CONV_POOL_WORDS, &din, &dfil, &dout, &size), PE_OK);
    PE_CHECK(size > 0);
    PE_CHECK_EQ(pe_conv_pool_decode(w, PE_CONV_POOL_WORDS - 1, &cp, &pp, &ch, &cw), PE_ERR_ARG);
    w[15] = 5;
    PE_CHECK_EQ(pe_conv_pool_decode(w, PE_CONV_POOL_WORDS, &cp, &pp, &ch, &cw), PE_ERR_ARG);
    w[15] = PE_POOL_MAX;
    dout.c = 3;
    PE_CHECK_EQ(pe_conv_pool_op_get_buffer_size(w, PE_CONV_POOL_WORDS, &din, &dfil, &dout, &size), PE_ERR_ARG);
}

/* Every word of the region set to odd values: a status, never an access
 * outside the buffers (ASan / UBSan watch). The output buffer is large
 * enough for any shape the dims allow. */
static void test_corrupted_words(void)
{
    static const int32_t vals[] = {0, -1, 1, 2, 7, 8, 16, 17, 100, -128, 127, 128, 1 << 20, -(1 << 30),
                                   0x7FFFFFFF, (int32_t)0x80000000u};
    pe_stripe_layer table[3];
    pe_dims din = {1, H, W, 3}, dout;
    pe_stripe_net net;
    pe_context ca;
    int32_t saved, i, k, size = 0, runs = 0;
    pe_status st;
    build(table);
    net.layers = table;
    net.n_layers = 3;
    net.input = din;
    PE_CHECK_EQ(pe_stripe_output_dims(&net, &dout), PE_OK);
    ca.buf = scratch_a;
    ca.size = (int32_t)sizeof(scratch_a);
    ca.stats = NULL;
    for (i = 0; i < NW; i++) {
        saved = words[i];
        for (k = 0; k < (int32_t)(sizeof(vals) / sizeof(vals[0])); k++) {
            words[i] = vals[k];
            (void)pe_stripe_region_get_buffer_size(words, NW, lookup, &consts, &din, &size);
            st = pe_stripe_region_run(&ca, words, NW, lookup, &consts, &din, input, &dout, out_a);
            runs += st == PE_OK;
        }
        words[i] = saved;
    }
    PE_CHECK_EQ(pe_stripe_region_run(&ca, words, NW, lookup, &consts, &din, input, &dout, out_a), PE_OK);
    PE_CHECK(runs > 0);
}

int main(void)
{
    test_region();
    test_region_rows();
    test_corrupted_words();
    test_conv_pool_words();
    return PE_TEST_END("test_pipeline");
}
