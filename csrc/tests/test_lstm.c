/* Plain C tests of pe_lstm.h and pe_gather.h: the int16 LOGISTIC / TANH on
 * hand-checked points and symmetry, their argument checks, the LSTM's
 * status codes and scratch query, a one-step LSTM against a direct
 * transcription of its formulas, and the batched gather. (Bit-exactness with
 * the TFLM interpreter is tested from Python: tests/test_lstm.py,
 * tests/test_gather_batched.py.) */
#include <stdint.h>
#include <string.h>
#include "pyembed/pyembed.h"
#include "pyembed/pe_lstm.h"
#include "pyembed/pe_gather.h"
#include "pe_test.h"

static void activation_points(void)
{
    int16_t x[5] = {0, 32767, -32768, 4096, -4096};
    int16_t y[5];
    int32_t i;
    PE_CHECK_EQ(pe_logistic_s16(NULL, 0, 0, 5, x, y), PE_OK);
    PE_CHECK_EQ(y[0], 16384);           /* sigmoid(0) = 1/2 in Q0.15 */
    PE_CHECK_EQ(y[1], 32757);           /* 32768 * sigmoid(8) = 32757.0 (Q3.12 input) */
    PE_CHECK_EQ(y[2], 11);              /* 32768 * sigmoid(-8) = 10.99 */
    PE_CHECK_EQ(y[3] + y[4], 32768);    /* sigmoid(x) + sigmoid(-x) = 1 exactly here */
    PE_CHECK_EQ(pe_tanh_s16(NULL, 0, 0, 5, x, y), PE_OK);
    PE_CHECK_EQ(y[0], 0);
    PE_CHECK_EQ(y[1], 32767);           /* tanh(8) rounds to 1 */
    PE_CHECK_EQ(y[2], -32767);
    PE_CHECK(y[3] > 24900 && y[3] < 25000); /* 32768 * tanh(1) = 24955.6 */
    PE_CHECK_EQ(y[3] + y[4], 0);        /* odd */
    for (i = 0; i + 1 < PE_SIGMOID_TABLE_NODES; i++) {
        PE_CHECK(pe_sigmoid_table_u16[i] <= pe_sigmoid_table_u16[i + 1]);
    }
    PE_CHECK_EQ(pe_logistic_s16(NULL, 0, 13, 5, x, y), PE_ERR_ARG);
    PE_CHECK_EQ(pe_logistic_s16(NULL, 40000, 3, 5, x, y), PE_ERR_ARG);
    PE_CHECK_EQ(pe_tanh_s16(NULL, 100, 32, 5, x, y), PE_ERR_ARG);
    PE_CHECK_EQ(pe_tanh_s16(NULL, 100, 3, -1, x, y), PE_ERR_ARG);
    PE_CHECK_EQ(pe_tanh_s16(NULL, 100, 3, 5, NULL, y), PE_ERR_ARG);
    PE_CHECK_EQ(pe_tanh_s16(NULL, 100, 3, 0, NULL, NULL), PE_OK);
}

static void set_params(pe_lstm_params *p)
{
    int32_t k;
    memset(p, 0, sizeof(*p));
    p->time_major = 0;
    p->batch = 2;
    p->time = 3;
    p->input_dim = 3;
    p->state_dim = 2;
    p->input_zp = -5;
    p->hidden_zp = 4;
    p->cell_tanh_mult = 0;
    p->cell_tanh_shift = 1; /* cell scale 2^-11 */
    for (k = 0; k < 4; k++) {
        p->in_mult[k] = 1 << 30;
        p->in_shift[k] = 2 + k;
        p->rec_mult[k] = 1200000000;
        p->rec_shift[k] = 3;
    }
    p->fc_mult = 1 << 30;
    p->fc_shift = -14;  /* 2^-15 */
    p->ig_mult = 1 << 30;
    p->ig_shift = -18;
    p->out_mult = 1 << 30;
    p->out_shift = -22;
}

static int32_t lstm_ref_gate(const pe_lstm_params *p, int32_t k, const int8_t *x, const int8_t *h,
                             const int8_t *w, const int8_t *r, const int32_t *b, int32_t j)
{
    int32_t acc = b[j], d, g1, g2;
    for (d = 0; d < p->input_dim; d++) {
        acc += w[j * p->input_dim + d] * (x[d] - p->input_zp);
    }
    g1 = pe_fx_sat_s16(pe_fx_requant(acc, p->in_mult[k], p->in_shift[k]));
    acc = 0;
    for (d = 0; d < p->state_dim; d++) {
        acc += r[j * p->state_dim + d] * (h[d] - p->hidden_zp);
    }
    g2 = pe_fx_sat_s16(pe_fx_requant(acc, p->rec_mult[k], p->rec_shift[k]));
    return pe_fx_sat_s16(g1 + g2);
}

static void lstm_cases(void)
{
    pe_lstm_params p;
    int8_t input[2 * 3 * 3], out[2 * 3 * 2], ref_out[2 * 3 * 2];
    int8_t w[4][6], r[4][4], hidden[4], ref_h[4];
    int32_t b[4][2];
    int16_t cell[4], ref_c[4], scratch[64];
    const int8_t *wp[4], *rp[4];
    const int32_t *bp[4];
    pe_context ctx = {scratch, (int32_t)sizeof(scratch), NULL};
    int32_t bytes = 0, i, k, bt, t, j;
    set_params(&p);
    for (i = 0; i < 18; i++) {
        input[i] = (int8_t)(i * 37 % 256 - 128);
    }
    for (k = 0; k < 4; k++) {
        for (i = 0; i < 6; i++) {
            w[k][i] = (int8_t)((k * 31 + i * 17) % 255 - 127);
        }
        for (i = 0; i < 4; i++) {
            r[k][i] = (int8_t)((k * 13 + i * 29) % 255 - 127);
        }
        b[k][0] = 1000 * k - 1500;
        b[k][1] = -700 * k + 300;
        wp[k] = w[k];
        rp[k] = r[k];
        bp[k] = b[k];
    }
    for (i = 0; i < 4; i++) {
        hidden[i] = ref_h[i] = (int8_t)p.hidden_zp;
        cell[i] = ref_c[i] = 0;
    }
    PE_CHECK_EQ(pe_lstm_s8s16_get_buffer_size(&p, &bytes), PE_OK);
    PE_CHECK_EQ(bytes, 3 * 1 * 2 * 2);
    PE_CHECK_EQ(pe_lstm_s8s16(&ctx, &p, input, wp, rp, bp, hidden, cell, out), PE_OK);
    /* the same steps written out directly */
    for (bt = 0; bt < 2; bt++) {
        for (t = 0; t < 3; t++) {
            const int8_t *x = input + (bt * 3 + t) * 3;
            int8_t *h = ref_h + bt * 2;
            int16_t *c = ref_c + bt * 2;
            int16_t gi[2], gf[2], gg[2], go[2], tc[2];
            for (j = 0; j < 2; j++) {
                gi[j] = (int16_t)lstm_ref_gate(&p, 0, x, h, w[0], r[0], b[0], j);
                gf[j] = (int16_t)lstm_ref_gate(&p, 1, x, h, w[1], r[1], b[1], j);
                gg[j] = (int16_t)lstm_ref_gate(&p, 2, x, h, w[2], r[2], b[2], j);
                go[j] = (int16_t)lstm_ref_gate(&p, 3, x, h, w[3], r[3], b[3], j);
            }
            (void)pe_logistic_s16(NULL, 0, 0, 2, gi, gi);
            (void)pe_logistic_s16(NULL, 0, 0, 2, gf, gf);
            (void)pe_tanh_s16(NULL, 0, 0, 2, gg, gg);
            (void)pe_logistic_s16(NULL, 0, 0, 2, go, go);
            for (j = 0; j < 2; j++) {
                c[j] = pe_fx_sat_s16(pe_fx_sat_s16(pe_fx_requant(gf[j] * c[j], p.fc_mult, p.fc_shift)) +
                                     pe_fx_sat_s16(pe_fx_requant(gi[j] * gg[j], p.ig_mult, p.ig_shift)));
            }
            (void)pe_tanh_s16(NULL, p.cell_tanh_mult, p.cell_tanh_shift, 2, c, tc);
            for (j = 0; j < 2; j++) {
                h[j] = pe_fx_sat_s8(pe_fx_requant(tc[j] * go[j], p.out_mult, p.out_shift) + p.hidden_zp);
                ref_out[(bt * 3 + t) * 2 + j] = h[j];
            }
        }
    }
    PE_CHECK(memcmp(out, ref_out, sizeof(out)) == 0);
    PE_CHECK(memcmp(hidden, ref_h, sizeof(hidden)) == 0);
    PE_CHECK(memcmp(cell, ref_c, sizeof(cell)) == 0);

    ctx.size = bytes - 1;
    PE_CHECK_EQ(pe_lstm_s8s16(&ctx, &p, input, wp, rp, bp, hidden, cell, out), PE_ERR_SCRATCH);
    ctx.size = (int32_t)sizeof(scratch);
    PE_CHECK_EQ(pe_lstm_s8s16(NULL, &p, input, wp, rp, bp, hidden, cell, out), PE_ERR_ARG);
    wp[1] = NULL;
    PE_CHECK_EQ(pe_lstm_s8s16(&ctx, &p, input, wp, rp, bp, hidden, cell, out), PE_ERR_ARG);
    wp[1] = w[1];
    p.cell_clip = -1;
    PE_CHECK_EQ(pe_lstm_s8s16_get_buffer_size(&p, &bytes), PE_ERR_ARG);
    p.cell_clip = 0;
    p.time_major = 2;
    PE_CHECK_EQ(pe_lstm_s8s16_get_buffer_size(&p, &bytes), PE_ERR_ARG);
    p.time_major = 1;
    PE_CHECK_EQ(pe_lstm_s8s16_get_buffer_size(&p, &bytes), PE_OK);
    PE_CHECK_EQ(bytes, 3 * 2 * 2 * 2);
    p.in_shift[2] = 31;
    PE_CHECK_EQ(pe_lstm_s8s16_get_buffer_size(&p, &bytes), PE_ERR_ARG);
}

/* pe_lstm_params_from_words: the layout of pe_lstm.h, both variants */
static void lstm_words_cases(void)
{
    int32_t w[PE_LSTM_WORDS], k;
    pe_lstm_params p, q;
    set_params(&p);
    {
        const int32_t head[10] = {1, p.batch, p.time, p.input_dim, p.state_dim, p.input_zp, p.hidden_zp,
                                  p.cell_tanh_mult, p.cell_tanh_shift, 12};
        const int32_t tail[6] = {p.fc_mult, p.fc_shift, p.ig_mult, p.ig_shift, p.out_mult, p.out_shift};
        memcpy(w, head, sizeof(head));
        memcpy(w + 26, tail, sizeof(tail));
    }
    for (k = 0; k < 4; k++) {
        w[10 + 4 * k] = p.in_mult[k];
        w[11 + 4 * k] = p.in_shift[k];
        w[12 + 4 * k] = p.rec_mult[k];
        w[13 + 4 * k] = p.rec_shift[k];
    }
    PE_CHECK_EQ(pe_lstm_params_from_words(w, PE_LSTM_WORDS, &q), PE_OK);
    PE_CHECK(q.time_major == 1 && q.litert == 0 && q.cell_clip == 12 && q.cell_tanh_shift == 1 &&
             q.rec_mult[3] == 1200000000 && q.ig_shift == -18 && q.out_shift == -22);
    PE_CHECK_EQ(pe_lstm_params_from_words(w, PE_LSTM_WORDS - 1, &q), PE_ERR_ARG);
    PE_CHECK_EQ(pe_lstm_params_from_words(NULL, PE_LSTM_WORDS, &q), PE_ERR_ARG);
    /* LiteRT: cell integer bits in word 7, words 8 and 26..29 zero */
    w[0] = 2;
    w[7] = 4;
    w[8] = 0;
    PE_CHECK_EQ(pe_lstm_params_from_words(w, PE_LSTM_WORDS, &q), PE_ERR_ARG);   /* fc / ig set */
    w[26] = w[27] = w[28] = w[29] = 0;
    PE_CHECK_EQ(pe_lstm_params_from_words(w, PE_LSTM_WORDS, &q), PE_OK);
    PE_CHECK(q.litert == 1 && q.time_major == 0 && q.cell_int_bits == 4);
    w[7] = 7;
    PE_CHECK_EQ(pe_lstm_params_from_words(w, PE_LSTM_WORDS, &q), PE_ERR_ARG);
    w[7] = 4;
    w[8] = 1;
    PE_CHECK_EQ(pe_lstm_params_from_words(w, PE_LSTM_WORDS, &q), PE_ERR_ARG);
    w[8] = 0;
    w[0] = 4;
    PE_CHECK_EQ(pe_lstm_params_from_words(w, PE_LSTM_WORDS, &q), PE_ERR_ARG);
}

/* The LiteRT variant: zero weights and biases give gates sigmoid(0) = 1/2,
 * tanh(0) = 0, so the cell stays 0 and h = requant(0) + zp; then with a
 * large positive cell and an open output gate, h follows the sign of c. */
static void lstm_litert_cases(void)
{
    pe_lstm_params p;
    int8_t input[2 * 3 * 3] = {0}, out[2 * 3 * 2], hidden[4];
    int8_t w[4][6] = {{0}}, r[4][4] = {{0}};
    int32_t b[4][2] = {{0}};
    int16_t cell[4] = {0}, scratch[64];
    const int8_t *wp[4], *rp[4];
    const int32_t *bp[4];
    pe_context ctx = {scratch, (int32_t)sizeof(scratch), NULL};
    int32_t i, k;
    set_params(&p);
    p.litert = 1;
    p.cell_int_bits = 4;
    p.cell_tanh_shift = 0;
    p.fc_mult = p.fc_shift = p.ig_mult = p.ig_shift = 0;
    for (k = 0; k < 4; k++) {
        wp[k] = w[k];
        rp[k] = r[k];
        bp[k] = b[k];
    }
    for (i = 0; i < 4; i++) {
        hidden[i] = (int8_t)p.hidden_zp;
    }
    PE_CHECK_EQ(pe_lstm_s8s16(&ctx, &p, input, wp, rp, bp, hidden, cell, out), PE_OK);
    for (i = 0; i < 12; i++) {
        PE_CHECK_EQ(out[i], p.hidden_zp);
    }
    for (i = 0; i < 4; i++) {
        PE_CHECK_EQ(cell[i], 0);
    }
    /* biases saturate every gate: i, f, o = 1, g = +1, so the cell grows */
    for (k = 0; k < 4; k++) {
        b[k][0] = b[k][1] = 1 << 20;
    }
    PE_CHECK_EQ(pe_lstm_s8s16(&ctx, &p, input, wp, rp, bp, hidden, cell, out), PE_OK);
    for (i = 0; i < 4; i++) {
        PE_CHECK(cell[i] > 0);
        PE_CHECK(hidden[i] > p.hidden_zp);
    }
    p.cell_int_bits = 7;
    PE_CHECK_EQ(pe_lstm_s8s16(&ctx, &p, input, wp, rp, bp, hidden, cell, out), PE_ERR_ARG);
}

static void gather_cases(void)
{
    /* input [2, 1, 3, 2]: batch 2, outer 1, axis 3, inner 2; positions [2, 2] */
    const int8_t in[12] = {0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15};
    int32_t pos[4] = {2, 0, 1, 1};
    int8_t out[8];
    const int8_t want[8] = {4, 5, 0, 1, 12, 13, 12, 13};
    PE_CHECK_EQ(pe_gather_batched(1, 2, 1, 3, 2, 2, in, pos, out), PE_OK);
    PE_CHECK(memcmp(out, want, sizeof(want)) == 0);
    pos[3] = 3;
    memset(out, 0x55, sizeof(out));
    PE_CHECK_EQ(pe_gather_batched(1, 2, 1, 3, 2, 2, in, pos, out), PE_ERR_ARG);
    PE_CHECK_EQ(out[0], 0x55); /* nothing written */
    PE_CHECK_EQ(pe_gather_batched(3, 2, 1, 3, 2, 2, in, pos, out), PE_ERR_ARG);
    PE_CHECK_EQ(pe_gather_batched(1, 0, 1, 3, 2, 2, in, pos, out), PE_ERR_ARG);
}

int main(void)
{
    activation_points();
    lstm_cases();
    lstm_words_cases();
    lstm_litert_cases();
    gather_cases();
    return PE_TEST_END("test_lstm");
}
