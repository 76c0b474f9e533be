/*
 * pe_lstm.c - int16 LOGISTIC / TANH on the interpolated sigmoid table and
 * the int8 / int16-cell UNIDIRECTIONAL_SEQUENCE_LSTM (see pe_lstm.h).
 */
#include "pyembed/pe_lstm.h"

#include "pyembed/pe_fixed.h"
#include "pyembed/pe_simd.h"

/* The rescale of the int16 activations: (x * m + round) >> s in int32
 * (|x * m| < 2^30 + 2^15 and round <= 2^30, so no overflow). */
static int act_args_ok(int32_t multiplier, int32_t left_shift)
{
    if (multiplier == 0) {
        return left_shift >= 0 && left_shift <= 12;
    }
    return multiplier > 0 && multiplier <= 32767 && left_shift >= 0 && left_shift <= 31;
}

static void act_rescale_args(int32_t *multiplier, int32_t *left_shift, int32_t *round)
{
    if (*multiplier == 0) {
        *multiplier = 3 * (1 << *left_shift);
        *left_shift = 0;
    }
    *round = *left_shift > 0 ? (int32_t)(1u << (*left_shift - 1)) : 0;
}

static int16_t logistic_one(int32_t x, int32_t m, int32_t s, int32_t round)
{
    const int32_t v = pe_fx_asr32(x * m + round, s);
    const uint32_t a = (uint32_t)(v < 0 ? -v : v);
    const uint32_t h = a >> 9;
    uint32_t r;
    if (h >= 255u) {
        r = 0x7FFFu << 10;
    } else {
        const uint32_t ua = pe_sigmoid_table_u16[h];
        const uint32_t ub = pe_sigmoid_table_u16[h + 1];
        /* ub >= ua: the table increases */
        r = (ua << 9) + (a & 0x1FFu) * (ub - ua);
    }
    r = v >= 0 ? r + (1u << 9) : (1u << 25) - r + (1u << 9) - 1u;
    return (int16_t)(r >> 10);
}

static int16_t tanh_one(int32_t x, int32_t m, int32_t s, int32_t round)
{
    const int32_t v = pe_fx_asr32(x * m + round, s);
    const uint32_t a = (uint32_t)(v < 0 ? -v : v);
    const uint32_t h = a >> 8;
    int32_t r;
    if (h >= 255u) {
        r = (int32_t)(0xFFFFu << 8);
    } else {
        const int32_t ua = pe_sigmoid_table_u16[h];
        const int32_t ub = pe_sigmoid_table_u16[h + 1];
        r = ua * 256 + (int32_t)(a & 0xFFu) * (ub - ua);
    }
    r = v >= 0 ? r - (1 << 23) + (1 << 7) : -r + (1 << 23) + (1 << 7) - 1;
    return (int16_t)pe_fx_asr32(r, 8);
}

pe_status pe_logistic_s16(const pe_context *ctx, int32_t multiplier, int32_t left_shift, int32_t count,
                          const int16_t *input, int16_t *output)
{
    int32_t i, round;
    (void)ctx;
    if (count < 0 || (count > 0 && (input == NULL || output == NULL)) ||
        !act_args_ok(multiplier, left_shift)) {
        return PE_ERR_ARG;
    }
    act_rescale_args(&multiplier, &left_shift, &round);
    for (i = 0; i < count; i++) {
        output[i] = logistic_one(input[i], multiplier, left_shift, round);
    }
    return PE_OK;
}

pe_status pe_tanh_s16(const pe_context *ctx, int32_t multiplier, int32_t left_shift, int32_t count,
                      const int16_t *input, int16_t *output)
{
    int32_t i, round;
    (void)ctx;
    if (count < 0 || (count > 0 && (input == NULL || output == NULL)) ||
        !act_args_ok(multiplier, left_shift)) {
        return PE_ERR_ARG;
    }
    act_rescale_args(&multiplier, &left_shift, &round);
    for (i = 0; i < count; i++) {
        output[i] = tanh_one(input[i], multiplier, left_shift, round);
    }
    return PE_OK;
}

/* -- LSTM ------------------------------------------------------------------- */

static int mult_ok(int32_t m, int32_t s)
{
    return m >= 0 && s >= -31 && s <= 30;
}

static int params_ok(const pe_lstm_params *p)
{
    int32_t k;
    if (p == NULL || p->batch < 1 || p->time < 1 || p->input_dim < 1 || p->state_dim < 1 ||
        (p->time_major != 0 && p->time_major != 1) || (p->litert != 0 && p->litert != 1) ||
        p->input_zp < -128 || p->input_zp > 127 || p->hidden_zp < -128 || p->hidden_zp > 127 ||
        p->cell_clip < 0 || p->cell_clip > 32767) {
        return 0;
    }
    if (p->litert) {
        /* LiteRT: the cell state's integer bits; no element-wise multipliers */
        if (p->cell_int_bits < 0 || p->cell_int_bits > 6 || p->fc_mult != 0 || p->fc_shift != 0 ||
            p->ig_mult != 0 || p->ig_shift != 0) {
            return 0;
        }
    } else if (!act_args_ok(p->cell_tanh_mult, p->cell_tanh_shift) || !mult_ok(p->fc_mult, p->fc_shift) ||
               !mult_ok(p->ig_mult, p->ig_shift)) {
        return 0;
    }
    /* int32 sums: |w * (x - zp)| <= 128 * 255 per term */
    if (p->input_dim > (PE_INT32_MAX / 2) / (128 * 255) || p->state_dim > (PE_INT32_MAX / 2) / (128 * 255)) {
        return 0;
    }
    {
        /* batch * time * max(input_dim, state_dim) must fit int32 (stepwise: no int64 overflow) */
        const int64_t bt = (int64_t)p->batch * p->time;
        if (bt > PE_INT32_MAX ||
            bt * (p->input_dim > p->state_dim ? p->input_dim : p->state_dim) > (int64_t)PE_INT32_MAX) {
            return 0;
        }
    }
    for (k = 0; k < 4; k++) {
        if (!mult_ok(p->in_mult[k], p->in_shift[k]) || !mult_ok(p->rec_mult[k], p->rec_shift[k])) {
            return 0;
        }
    }
    return mult_ok(p->out_mult, p->out_shift);
}

pe_status pe_lstm_params_from_words(const int32_t *w, int32_t num_words, pe_lstm_params *p)
{
    int32_t k;
    if (w == NULL || p == NULL || num_words != PE_LSTM_WORDS) {
        return PE_ERR_ARG;
    }
    if (w[0] < 0 || w[0] > 3) {
        return PE_ERR_ARG;
    }
    {
        /* words 1..6 and 26..31 in order */
        int32_t *const head[6] = {&p->batch, &p->time, &p->input_dim, &p->state_dim, &p->input_zp,
                                  &p->hidden_zp};
        int32_t *const tail[6] = {&p->fc_mult, &p->fc_shift, &p->ig_mult, &p->ig_shift, &p->out_mult,
                                  &p->out_shift};
        for (k = 0; k < 6; k++) {
            *head[k] = w[1 + k];
            *tail[k] = w[26 + k];
        }
    }
    p->time_major = w[0] & 1;
    p->litert = (w[0] >> 1) & 1;
    if (p->litert && w[8] != 0) {
        return PE_ERR_ARG;
    }
    /* word 7: the cell state's integer bits (LiteRT) or its TANH16 rescale */
    p->cell_int_bits = p->litert ? w[7] : 0;
    p->cell_tanh_mult = p->litert ? 0 : w[7];
    p->cell_tanh_shift = p->litert ? 0 : w[8];
    p->cell_clip = w[9];
    for (k = 0; k < 4; k++) {
        p->in_mult[k] = w[10 + 4 * k];
        p->in_shift[k] = w[11 + 4 * k];
        p->rec_mult[k] = w[12 + 4 * k];
        p->rec_shift[k] = w[13 + 4 * k];
    }
    return params_ok(p) ? PE_OK : PE_ERR_ARG;
}

static int32_t step_rows(const pe_lstm_params *p)
{
    return p->time_major ? p->batch : 1;
}

pe_status pe_lstm_s8s16_get_buffer_size(const pe_lstm_params *p, int32_t *bytes)
{
    int64_t n;
    if (bytes == NULL || !params_ok(p)) {
        return PE_ERR_ARG;
    }
    n = 3 * (int64_t)step_rows(p) * p->state_dim * (int64_t)sizeof(int16_t);
    if (n > PE_INT32_MAX) {
        return PE_ERR_OVERFLOW;
    }
    *bytes = (int32_t)n;
    return PE_OK;
}

#if !PE_DSP
/* int64 -> int32 keeping the low 32 bits (TFLite's int32 wrap), portably */
static int32_t wrap32(int64_t v)
{
    const uint32_t u = (uint32_t)((uint64_t)v & 0xFFFFFFFFu);
    return u <= (uint32_t)PE_INT32_MAX ? (int32_t)u : -(int32_t)(~u) - 1;
}

/* out[r, j] = sat16(requant(sum_d w[j, d] * (x[r, d] + offset) (+ bias[j])));
 * with accumulate: out[r, j] = sat16(out[r, j] + v) where v is that
 * requantized sum, itself saturated to int16 first when sat_each (TFLM) or
 * not (LiteRT). */
static void gate_fc(int32_t rows, int32_t depth, int32_t n_out, const int8_t *x, int32_t offset,
                    const int8_t *w, const int32_t *bias, int32_t m, int32_t s, int accumulate, int sat_each,
                    int16_t *out)
{
    int32_t r, j, d;
    for (r = 0; r < rows; r++) {
        const int8_t *xr = x + (int64_t)r * depth;
        for (j = 0; j < n_out; j++) {
            const int8_t *wj = w + (int64_t)j * depth;
            int16_t *o = out + (int64_t)r * n_out + j;
            int32_t acc = 0, v;
            for (d = 0; d < depth; d++) {
                acc += (int32_t)wj[d] * ((int32_t)xr[d] + offset);   /* bounded by params_ok */
            }
            if (bias != NULL) {
                acc = wrap32((int64_t)acc + bias[j]);   /* TFLite adds in int32 */
            }
            v = pe_fx_requant(acc, m, s);
            if (!accumulate || sat_each) {
                v = pe_fx_sat_s16(v);
            }
            if (accumulate) {
                v = pe_fx_sat_s16((int32_t)pe_fx_sat_s32_from_s64((int64_t)*o + v));
            }
            *o = (int16_t)v;
        }
    }
}

#endif

/* -- LiteRT's int16 fixed-point sigmoid / tanh -------------------------------
 * LiteRT's integer LSTM evaluates its gate activations and tanh(cell) with
 * gemmlowp's fixed-point functions on int16 (not TFLM's interpolated table):
 * exp of a negative argument as exp(-1/8)-centred Taylor polynomial on the
 * argument's fraction within [-1/4, 0) times exp(-2^k) for each set bit of
 * the rest, then 1 / (1 + e) (sigmoid) or (1 - e) / (1 + e) (tanh, with
 * e = exp(-2|x|)) by three Newton-Raphson steps. Every operation below is
 * an int16 fixed-point one: q15_mul is the saturating rounding doubling high
 * multiply, additions wrap to 16 bits as int16 stores do (none of them
 * overflows on the paths used here), shl_sat16 saturates. */

#define Q15_EXP_M1_8 28918      /* round(2^15 exp(-1/8)) */
#define Q15_ONE_THIRD 10923     /* round(2^15 / 3) */
#define Q13_48_17 23130         /* round(2^13 * 48 / 17) */
#define Q13_M32_17 (-15420)     /* round(-2^13 * 32 / 17) */

/* round(2^15 exp(-2^k)) for k = -2 .. 4 */
static const int16_t q15_exp_pow2[7] = {25520, 19875, 12055, 4435, 600, 11, 0};

#if PE_DSP
/* The same three functions in one to four instructions: SXTH; MUL, ADD,
 * ASR and SSAT (every operand is an int16, so a * b + 2^14 fits int32 and
 * only -32768 * -32768 gives 32768, which SSAT makes 32767: the one
 * saturating case); LSL and SSAT. */
static inline int32_t w16(int32_t v)
{
    return (int16_t)v;   /* modulo 2^16 on the DSP compilers (gcc, clang, armclang) */
}

static inline int32_t q15_mul(int32_t a, int32_t b)
{
    return __ssat(pe_fx_asr32(a * b + (1 << 14), 15), 16);
}

static inline int32_t shl_sat16(int32_t v, int32_t e)
{
    return __ssat(v * (1 << e), 16);   /* |v| < 2^15, e <= 6 */
}
#else
static int32_t w16(int32_t v)
{
    const uint32_t u = (uint32_t)v & 0xFFFFu;
    return u < 0x8000u ? (int32_t)u : (int32_t)u - 65536;
}

static int32_t q15_mul(int32_t a, int32_t b)
{
    if (a == -32768 && b == -32768) {
        return 32767;
    }
    return pe_fx_asr32(a * b + (1 << 14), 15);
}

static int32_t shl_sat16(int32_t v, int32_t e)
{
    return pe_fx_sat_s16(v * (1 << e));   /* |v| < 2^15, e <= 6 */
}
#endif

/* exp(a) for a in [-1/4, 0), Q0.15 in and out */
static int32_t exp_quarter(int32_t a)
{
    const int32_t x = a + (1 << 12);   /* a + 1/8 */
    const int32_t x2 = q15_mul(x, x);
    const int32_t x3 = q15_mul(x2, x);
    const int32_t x4 = q15_mul(x2, x2);
    const int32_t t = pe_fx_rdiv_pot(w16(q15_mul(w16(pe_fx_rdiv_pot(x4, 2) + x3), Q15_ONE_THIRD) + x2), 1);
    return pe_fx_sat_s16(Q15_EXP_M1_8 + q15_mul(Q15_EXP_M1_8, w16(x + t)));
}

/* exp(a) for a <= 0 with int_bits integer bits (int16 raw), Q0.15 out */
static int32_t exp_negative(int32_t a, int32_t int_bits)
{
    const int32_t frac = 15 - int_bits;
    const int32_t quarter = 1 << (frac - 2);
    const int32_t head = (int32_t)((uint32_t)a & (uint32_t)(quarter - 1)) - quarter;
    const int32_t rest = w16(head - a);
    int32_t r = exp_quarter(shl_sat16(head, int_bits));
    int32_t k;
    if (a == 0) {
        return 32767;
    }
    for (k = -2; k <= 4; k++) {
        if (int_bits > k && (rest & (1 << (frac + k))) != 0) {
            r = q15_mul(r, q15_exp_pow2[k + 2]);
        }
    }
    if (int_bits > 5 && a < -(32 << frac)) {
        r = 0;
    }
    return r;
}

/* 2 / (1 + e) for e in [0, 1] (Q0.15), Q2.13 out: Newton-Raphson on the
 * half denominator (1 + e) / 2 */
static int32_t two_over_one_plus(int32_t e)
{
    const int32_t half = (e + 32767 + 1) >> 1;
    int32_t x = w16(Q13_48_17 + q15_mul(half, Q13_M32_17));
    int32_t i;
    for (i = 0; i < 3; i++) {
        const int32_t err = w16((1 << 13) - q15_mul(half, x));
        x = w16(x + shl_sat16(q15_mul(x, err), 2));
    }
    return x;
}

/* sigmoid of a Q3.12 int16, Q0.15 out */
static int16_t litert_sigmoid(int32_t a)
{
    int32_t pos;
    if (a == 0) {
        return 16384;
    }
    pos = shl_sat16(two_over_one_plus(exp_negative(w16(-(a > 0 ? a : w16(-a))), 3)), 1);
    return (int16_t)(a > 0 ? pos : w16(32767 - pos));
}

/* tanh of an int16 with int_bits integer bits, Q0.15 out */
static int16_t litert_tanh(int32_t a, int32_t int_bits)
{
    int32_t t;
    if (a == 0) {
        return 0;
    }
    t = shl_sat16(w16(two_over_one_plus(exp_negative(a < 0 ? a : w16(-a), int_bits + 1)) - (1 << 13)), 2);
    return (int16_t)(a < 0 ? w16(-t) : t);
}

#if !PE_DSP
/* One gate: input FC (with bias) + recurrent FC, then its activation. */
static void lstm_gate(const pe_lstm_params *p, int32_t k, int32_t rows, const int8_t *x, const int8_t *h,
                      const int8_t *const weights[4], const int8_t *const rec[4],
                      const int32_t *const bias[4], int16_t *out)
{
    const int32_t n = rows * p->state_dim;
    int32_t i;
    gate_fc(rows, p->input_dim, p->state_dim, x, -p->input_zp, weights[k], bias[k], p->in_mult[k],
            p->in_shift[k], 0, 1, out);
    gate_fc(rows, p->state_dim, p->state_dim, h, -p->hidden_zp, rec[k], NULL, p->rec_mult[k],
            p->rec_shift[k], 1, !p->litert, out);
    if (p->litert) {
        for (i = 0; i < n; i++) {
            out[i] = k == PE_LSTM_GATE_G ? litert_tanh(out[i], 3) : litert_sigmoid(out[i]);
        }
    } else if (k == PE_LSTM_GATE_G) {
        (void)pe_tanh_s16(NULL, 0, 0, n, out, out);
    } else {
        (void)pe_logistic_s16(NULL, 0, 0, n, out, out);
    }
}

static void lstm_step(const pe_lstm_params *p, int32_t rows, const int8_t *x, int8_t *h, int16_t *c,
                      int8_t *y, const int8_t *const weights[4], const int8_t *const rec[4],
                      const int32_t *const bias[4], int16_t *buf)
{
    const int32_t n = rows * p->state_dim;
    int16_t *b0 = buf, *b1 = buf + n, *b2 = buf + 2 * n;
    int32_t i;
    lstm_gate(p, PE_LSTM_GATE_F, rows, x, h, weights, rec, bias, b0);
    lstm_gate(p, PE_LSTM_GATE_I, rows, x, h, weights, rec, bias, b1);
    lstm_gate(p, PE_LSTM_GATE_G, rows, x, h, weights, rec, bias, b2);
    for (i = 0; i < n; i++) {
        int32_t fc, ig, v;
        if (p->litert) {
            /* LiteRT: one rounding shift each, 15 and 30 + log2(cell scale) */
            fc = w16(pe_fx_rdiv_pot((int32_t)b0[i] * (int32_t)c[i], 15));
            ig = w16(pe_fx_rdiv_pot((int32_t)b1[i] * (int32_t)b2[i], 15 + p->cell_int_bits));
        } else {
            fc = pe_fx_sat_s16(pe_fx_requant((int32_t)b0[i] * (int32_t)c[i], p->fc_mult, p->fc_shift));
            ig = pe_fx_sat_s16(pe_fx_requant((int32_t)b1[i] * (int32_t)b2[i], p->ig_mult, p->ig_shift));
        }
        v = pe_fx_sat_s16(fc + ig);
        if (p->cell_clip > 0) {
            v = pe_fx_clamp(v, -p->cell_clip, p->cell_clip);
        }
        c[i] = (int16_t)v;
    }
    /* the output gate reads the hidden state of the previous step */
    lstm_gate(p, PE_LSTM_GATE_O, rows, x, h, weights, rec, bias, b1);
    if (p->litert) {
        for (i = 0; i < n; i++) {
            b0[i] = litert_tanh(c[i], p->cell_int_bits);
        }
    } else {
        (void)pe_tanh_s16(NULL, p->cell_tanh_mult, p->cell_tanh_shift, n, c, b0);
    }
    for (i = 0; i < n; i++) {
        const int64_t v = (int64_t)pe_fx_requant((int32_t)b0[i] * (int32_t)b1[i], p->out_mult, p->out_shift) +
                          p->hidden_zp;
        h[i] = (int8_t)(v < -128 ? -128 : (v > 127 ? 127 : v));
        y[i] = h[i];
    }
}

#endif

#if PE_DSP
/* -- DSP path (Cortex-M4 ...: pe_simd.h) --------------------------------------
 * One pass per hidden unit j instead of one per gate: the four gates' input
 * rows j (and then their recurrent rows j) are the four rows of one
 * 1-column x 4-row SMLAD block (pe_dsp_dot_1x4_off: the zero point is added
 * while widening the input, so the int32 sums are the portable ones term for
 * term), and unit j's gate requantization, activations, cell update and
 * hidden output follow at once on the eight sums in registers. The new hidden
 * row goes to scratch until every unit has read the old one. Same integers
 * as lstm_step: each value below is the portable expression, only computed
 * with fewer instructions. */

/* the requantization of one gate / product: pe_fx_requant(acc, m, s),
 * m >= 0, prepared once per call */
typedef struct {
    int32_t m, s;        /* the portable arguments (fallback) */
    int32_t lsh;         /* left + 1: SMMULR takes 2 * (acc << left) */
    uint32_t lim;        /* fast when |acc| < lim = 2^(30 - left) */
    int32_t right, rnd;  /* the rounding divide's exponent and 2^(right-1) */
    int32_t neg;         /* -1 when right >= 1 (subtract 1 from negatives), else 0 */
} dsp_rq;

static void dsp_rq_init(dsp_rq *q, int32_t m, int32_t s)
{
    const int32_t left = s > 0 ? s : 0;
    q->m = m;
    q->s = s;
    q->lsh = left + 1;
    q->lim = (uint32_t)1 << (30 - left);
    q->right = s > 0 ? 0 : -s;
    q->rnd = q->right > 0 ? (int32_t)1 << (q->right - 1) : 0;
    q->neg = q->right > 0 ? -1 : 0;
}

/* pe_fx_requant(acc, q->m, q->s). When |acc| < 2^(30 - left), a = acc << left
 * has |a| < 2^30, so 2a fits int32 and SaturatingRoundingDoublingHighMul(a, m)
 * = (2am + 2^31) >> 32 is one SMMULR (m >= 0: no saturating case); its result
 * d has |d| <= |a| < 2^30, so the rounding divide (d + 2^(right-1) - [d < 0])
 * >> right cannot overflow. Other accumulators take the portable function;
 * checked = 0 when the caller has proven |acc| < 2^(30 - left) for every
 * accumulator (dsp_lstm_q.unchecked). */
static inline int32_t dsp_requant(const dsp_rq *q, int32_t acc, int checked)
{
    int32_t d;
    if (checked && (uint32_t)acc + q->lim >= 2u * q->lim) {
        return pe_fx_requant(acc, q->m, q->s);
    }
    __asm__("smmulr %0, %1, %2" : "=r"(d) : "r"((int32_t)((uint32_t)acc << q->lsh)), "r"(q->m));
    return pe_fx_asr32(d + q->rnd + (pe_fx_asr32(d, 31) & q->neg), q->right);
}

/* the rounding divide by 2^e (1 <= e <= 30) of |v| <= 2^30: pe_fx_rdiv_pot */
static inline int32_t dsp_rdiv(int32_t v, int32_t e)
{
    return pe_fx_asr32(v + ((int32_t)1 << (e - 1)) + pe_fx_asr32(v, 31), e);
}

/* a[k] += sum_d w[k][d] * (x[d] + off) for the four rows w[k], n >= 1 bytes,
 * modulo 2^32 (SMLAD's sum: the caller's initial a[k] may be any int32)
 * (inlined: two calls per unit, each cheap at MNIST-LSTM's depths 20 / 28) */
__attribute__((always_inline)) static inline void dsp_dot4(int32_t *a, const int8_t *w0, const int8_t *w1, const int8_t *w2,
                     const int8_t *w3, const int8_t *x, int32_t n, int32_t off)
{
    int32_t i = n & ~7;
    if (i > 0) {
        pe_dsp_dot_1x4_off(a, w0, w1, w2, w3, x, i >> 3, off);
    }
    if (n - i >= 4) {
        const uint32_t r = pe_rd32(x + i), off2 = pe_dup16(off);
        const uint32_t xe = __sxtab16(off2, r), xo = pe_sxtab16_ror8(off2, r);
        uint32_t v = pe_rd32(w0 + i);
        a[0] = __smlad(__sxtb16(v), xe, __smlad(pe_sxtb16_ror8(v), xo, a[0]));
        v = pe_rd32(w1 + i);
        a[1] = __smlad(__sxtb16(v), xe, __smlad(pe_sxtb16_ror8(v), xo, a[1]));
        v = pe_rd32(w2 + i);
        a[2] = __smlad(__sxtb16(v), xe, __smlad(pe_sxtb16_ror8(v), xo, a[2]));
        v = pe_rd32(w3 + i);
        a[3] = __smlad(__sxtb16(v), xe, __smlad(pe_sxtb16_ror8(v), xo, a[3]));
        i += 4;
    }
    for (; i < n; i++) {
        /* modulo 2^32 like SMLAD: the sums may start from a bias */
        const int32_t xv = (int32_t)x[i] + off;
        a[0] = (int32_t)((uint32_t)a[0] + (uint32_t)(w0[i] * xv));
        a[1] = (int32_t)((uint32_t)a[1] + (uint32_t)(w1[i] * xv));
        a[2] = (int32_t)((uint32_t)a[2] + (uint32_t)(w2[i] * xv));
        a[3] = (int32_t)((uint32_t)a[3] + (uint32_t)(w3[i] * xv));
    }
}

typedef struct {
    dsp_rq in[4], rec[4];
    dsp_rq fc, ig, out;
    int32_t tanh_m, tanh_s, tanh_round;   /* TFLM: TANH16 rescale of the cell */
    int unchecked;                        /* every requantization fast (below) */
} dsp_lstm_q;

/* Whether every accumulator of this call is inside its requantization's fast
 * range, so that the unit loop needs no range checks:
 *   input sums |dot + bias| <= input_dim * 128 * 255 + max |bias|
 *   recurrent sums          <= state_dim * 128 * 255
 *   f * c, i * g, o * tanh(c): one factor a sigmoid in [0, 32767], the other
 *       an int16, so |product| <= 32767 * 32768 < 2^30: fast without a left
 *       shift (LiteRT's f * c and i * g take dsp_rdiv instead). */
static int dsp_lstm_unchecked(const pe_lstm_params *p, const dsp_lstm_q *q, const int32_t *const bias[4])
{
    int32_t k, j;
    for (k = 0; k < 4; k++) {
        uint32_t bmax = 0;
        for (j = 0; j < p->state_dim; j++) {
            const int32_t b = bias[k][j];
            const uint32_t a = b < 0 ? 0u - (uint32_t)b : (uint32_t)b;
            bmax = a > bmax ? a : bmax;
        }
        if ((uint64_t)p->input_dim * 32640u + bmax >= q->in[k].lim ||
            (uint64_t)p->state_dim * 32640u >= q->rec[k].lim) {
            return 0;
        }
    }
    return q->out.lsh == 1 && (p->litert || (q->fc.lsh == 1 && q->ig.lsh == 1));
}

static void dsp_lstm_q_init(const pe_lstm_params *p, const int32_t *const bias[4], dsp_lstm_q *q)
{
    int32_t k;
    for (k = 0; k < 4; k++) {
        dsp_rq_init(&q->in[k], p->in_mult[k], p->in_shift[k]);
        dsp_rq_init(&q->rec[k], p->rec_mult[k], p->rec_shift[k]);
    }
    dsp_rq_init(&q->fc, p->fc_mult, p->fc_shift);
    dsp_rq_init(&q->ig, p->ig_mult, p->ig_shift);
    dsp_rq_init(&q->out, p->out_mult, p->out_shift);
    q->tanh_m = p->cell_tanh_mult;
    q->tanh_s = p->cell_tanh_shift;
    act_rescale_args(&q->tanh_m, &q->tanh_s, &q->tanh_round);
    q->unchecked = dsp_lstm_unchecked(p, q, bias);
}

/* gate k's pre-activation (lstm_gate's two gate_fc calls on one unit): the
 * input term saturated to int16, plus the recurrent term (saturated to int16
 * first: TFLM; not: LiteRT), saturated to int16 */
static inline int32_t dsp_gate(const dsp_lstm_q *q, int32_t k, int32_t ain, int32_t arec, int litert,
                               int checked)
{
    const int32_t vi = __ssat(dsp_requant(&q->in[k], ain, checked), 16);
    const int32_t vr = dsp_requant(&q->rec[k], arec, checked);
    return litert ? __ssat(__qadd(vi, vr), 16) : __ssat(vi + __ssat(vr, 16), 16);
}

__attribute__((always_inline)) static inline void lstm_step_dsp_body(
    const pe_lstm_params *p, const dsp_lstm_q *q, int32_t rows, const int8_t *x, int8_t *h, int16_t *c,
    int8_t *y, const int8_t *const weights[4], const int8_t *const rec[4], const int32_t *const bias[4],
    int16_t *buf, int checked)
{
    const int32_t nd = p->input_dim, ns = p->state_dim, litert = p->litert;
    const int32_t xoff = -p->input_zp, hoff = -p->hidden_zp, clip = p->cell_clip;
    int8_t *const hn = (int8_t *)(void *)buf;   /* rows * ns bytes <= the 3 int16 buffers */
    int32_t r, j;
    for (r = 0; r < rows; r++) {
        const int8_t *xr = x + (size_t)r * (size_t)nd;
        const int8_t *hr = h + (size_t)r * (size_t)ns;
        int16_t *cr = c + (size_t)r * (size_t)ns;
        int8_t *hnr = hn + (size_t)r * (size_t)ns;
        for (j = 0; j < ns; j++) {
            const size_t wo = (size_t)j * (size_t)nd, ro = (size_t)j * (size_t)ns;
            /* the input sums start from the bias: wrap32(dot + bias) as
             * TFLite adds them in int32, the dot being exact in int32 */
            int32_t ai[4], ar[4] = {0, 0, 0, 0};
            int32_t gi, gf, gg, go, fc, ig, v, tc;
            ai[0] = bias[0][j];
            ai[1] = bias[1][j];
            ai[2] = bias[2][j];
            ai[3] = bias[3][j];
            dsp_dot4(ai, weights[0] + wo, weights[1] + wo, weights[2] + wo, weights[3] + wo, xr, nd, xoff);
            dsp_dot4(ar, rec[0] + ro, rec[1] + ro, rec[2] + ro, rec[3] + ro, hr, ns, hoff);
            gi = dsp_gate(q, PE_LSTM_GATE_I, ai[0], ar[0], litert, checked);
            gf = dsp_gate(q, PE_LSTM_GATE_F, ai[1], ar[1], litert, checked);
            gg = dsp_gate(q, PE_LSTM_GATE_G, ai[2], ar[2], litert, checked);
            go = dsp_gate(q, PE_LSTM_GATE_O, ai[3], ar[3], litert, checked);
            if (litert) {
                gi = litert_sigmoid(gi);
                gf = litert_sigmoid(gf);
                gg = litert_tanh(gg, 3);
                go = litert_sigmoid(go);
                /* |f * c|, |i * g| <= 2^30 */
                fc = w16(dsp_rdiv(gf * cr[j], 15));
                ig = w16(dsp_rdiv(gi * gg, 15 + p->cell_int_bits));
            } else {
                gi = logistic_one(gi, 3, 0, 0);
                gf = logistic_one(gf, 3, 0, 0);
                gg = tanh_one(gg, 3, 0, 0);
                go = logistic_one(go, 3, 0, 0);
                fc = __ssat(dsp_requant(&q->fc, gf * cr[j], checked), 16);
                ig = __ssat(dsp_requant(&q->ig, gi * gg, checked), 16);
            }
            v = __ssat(fc + ig, 16);
            if (clip > 0) {
                v = pe_fx_clamp(v, -clip, clip);
            }
            cr[j] = (int16_t)v;
            tc = litert ? litert_tanh(v, p->cell_int_bits) : tanh_one(v, q->tanh_m, q->tanh_s, q->tanh_round);
            hnr[j] = (int8_t)__ssat(__qadd(dsp_requant(&q->out, tc * go, checked), p->hidden_zp), 8);
        }
    }
    for (j = 0; j < rows * ns; j++) {
        h[j] = hn[j];
        y[j] = hn[j];
    }
}

/* the unit loop twice: with the range checks, and without (q->unchecked) */
static void lstm_step_dsp_checked(const pe_lstm_params *p, const dsp_lstm_q *q, int32_t rows, const int8_t *x,
                                  int8_t *h, int16_t *c, int8_t *y, const int8_t *const weights[4],
                                  const int8_t *const rec[4], const int32_t *const bias[4], int16_t *buf)
{
    lstm_step_dsp_body(p, q, rows, x, h, c, y, weights, rec, bias, buf, 1);
}

static void lstm_step_dsp_unchecked(const pe_lstm_params *p, const dsp_lstm_q *q, int32_t rows,
                                    const int8_t *x, int8_t *h, int16_t *c, int8_t *y,
                                    const int8_t *const weights[4], const int8_t *const rec[4],
                                    const int32_t *const bias[4], int16_t *buf)
{
    lstm_step_dsp_body(p, q, rows, x, h, c, y, weights, rec, bias, buf, 0);
}

static void lstm_step_dsp(const pe_lstm_params *p, const dsp_lstm_q *q, int32_t rows, const int8_t *x,
                          int8_t *h, int16_t *c, int8_t *y, const int8_t *const weights[4],
                          const int8_t *const rec[4], const int32_t *const bias[4], int16_t *buf)
{
    (q->unchecked ? lstm_step_dsp_unchecked : lstm_step_dsp_checked)(p, q, rows, x, h, c, y, weights, rec,
                                                                     bias, buf);
}
#endif

pe_status pe_lstm_s8s16(const pe_context *ctx, const pe_lstm_params *p, const int8_t *input,
                        const int8_t *const weights[4], const int8_t *const rec[4],
                        const int32_t *const bias[4], int8_t *hidden, int16_t *cell, int8_t *output)
{
    int32_t need, k, b, t;
    pe_status st;
    int16_t *buf;
#if PE_DSP
    dsp_lstm_q q;
#endif
    if (ctx == NULL || input == NULL || weights == NULL || rec == NULL || bias == NULL || hidden == NULL ||
        cell == NULL || output == NULL) {
        return PE_ERR_ARG;
    }
    st = pe_lstm_s8s16_get_buffer_size(p, &need);
    if (st != PE_OK) {
        return st;
    }
    for (k = 0; k < 4; k++) {
        if (weights[k] == NULL || rec[k] == NULL || bias[k] == NULL) {
            return PE_ERR_ARG;
        }
    }
    if (ctx->buf == NULL || ctx->size < need || ((uintptr_t)ctx->buf & 1u) != 0) {
        return PE_ERR_SCRATCH;
    }
    buf = (int16_t *)ctx->buf;
#if PE_DSP
    dsp_lstm_q_init(p, bias, &q);
#endif
    if (p->time_major) {
        const int64_t in_step = (int64_t)p->batch * p->input_dim;
        const int64_t out_step = (int64_t)p->batch * p->state_dim;
        for (t = 0; t < p->time; t++) {
#if PE_DSP
            lstm_step_dsp(p, &q, p->batch, input + t * in_step, hidden, cell, output + t * out_step, weights,
                          rec, bias, buf);
#else
            lstm_step(p, p->batch, input + t * in_step, hidden, cell, output + t * out_step, weights, rec, bias,
                      buf);
#endif
        }
    } else {
        for (b = 0; b < p->batch; b++) {
            for (t = 0; t < p->time; t++) {
                const int64_t row = (int64_t)b * p->time + t;
#if PE_DSP
                lstm_step_dsp(p, &q, 1, input + row * p->input_dim, hidden + (int64_t)b * p->state_dim,
                              cell + (int64_t)b * p->state_dim, output + row * p->state_dim, weights, rec, bias,
                              buf);
#else
                lstm_step(p, 1, input + row * p->input_dim, hidden + (int64_t)b * p->state_dim,
                          cell + (int64_t)b * p->state_dim, output + row * p->state_dim, weights, rec, bias, buf);
#endif
            }
        }
    }
    if (ctx->stats != NULL) {
        ctx->stats->macs += (uint64_t)p->batch * (uint64_t)p->time * 4u * (uint64_t)p->state_dim *
                            (uint64_t)(p->input_dim + p->state_dim);
    }
    return PE_OK;
}
