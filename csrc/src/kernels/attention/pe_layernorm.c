/*
 * pe_layernorm.c - PE_LAYERNORM: a row-wise int8 operator chain run one row
 * at a time (word layout and arithmetic in pe_layernorm.h). Each step calls
 * the kernel of the unfused operator (pe_add_s8, pe_mul_s8, pe_math_invoke)
 * on row shapes, so the result equals the unfused graph's bit for bit.
 */
#include "pyembed/pe_layernorm.h"
#include "pyembed/pe_eltwise.h"
#include "pyembed/pe_math_ops.h"

#define LN_HEADER 4
#define LN_STEP_HEADER 5
#define LN_ADD_WORDS 12
#define LN_MUL_WORDS 7

typedef struct {
    int32_t rows;
    int32_t depth;
    int32_t num_slots;
    int32_t num_steps;
    const int32_t *slot_len; /* num_slots */
    const int32_t *steps;    /* first step */
    int32_t steps_words;     /* words from steps to the end */
    int32_t scratch;         /* bytes */
} ln_prog;

static int ln_is_step_type(int32_t type)
{
    return type == PE_LN_STEP_ADD || type == PE_LN_STEP_MUL || type == PE_LN_STEP_LUT || pe_math_op_known(type);
}

/* Parse and check everything that does not depend on the tensors. */
static pe_status ln_parse(const int32_t *w, int32_t count, ln_prog *p)
{
    int32_t i, pos;
    int64_t scratch = 0;
    uint64_t written = 1u; /* slot 0 (the input row) is there from the start */
    if (w == NULL || count < LN_HEADER) {
        return PE_ERR_ARG;
    }
    p->rows = w[0];
    p->depth = w[1];
    p->num_slots = w[2];
    p->num_steps = w[3];
    if (p->rows < 1 || p->depth < 1 || p->num_slots < 2 || p->num_slots > PE_LN_MAX_SLOTS ||
        p->num_steps < 1 || p->num_steps > PE_LN_MAX_STEPS || count - LN_HEADER < p->num_slots ||
        (int64_t)p->rows * p->depth > (int64_t)0x7FFFFFFF) {
        return PE_ERR_ARG;
    }
    p->slot_len = w + LN_HEADER;
    for (i = 0; i < p->num_slots; i++) {
        const int32_t len = p->slot_len[i];
        if (len != 1 && len != p->depth) {
            return PE_ERR_ARG;
        }
        if (i < 2 && len != p->depth) {
            return PE_ERR_ARG;
        }
        if (i >= 2) {
            scratch += len;
        }
    }
    pos = LN_HEADER + p->num_slots;
    p->steps = w + pos;
    p->steps_words = count - pos;
    for (i = 0; i < p->num_steps; i++) {
        int32_t type, in0, in1, out, nw;
        if (count - pos < LN_STEP_HEADER) {
            return PE_ERR_ARG;
        }
        type = w[pos];
        in0 = w[pos + 1];
        in1 = w[pos + 2];
        out = w[pos + 3];
        nw = w[pos + 4];
        if (!ln_is_step_type(type) || nw < 0 || nw > count - pos - LN_STEP_HEADER) {
            return PE_ERR_ARG;
        }
        if (out < 1 || out >= p->num_slots || in0 >= p->num_slots || in0 == out || in1 == out ||
            (in1 != PE_LN_NONE && in1 >= p->num_slots) || in0 < -PE_LN_MAX_INPUTS ||
            (in1 != PE_LN_NONE && in1 < -PE_LN_MAX_INPUTS)) {
            return PE_ERR_ARG;
        }
        if (type == PE_LN_STEP_LUT) {
            /* the table is a constant operand, no words */
            if (in1 == PE_LN_NONE || in1 >= 0 || nw != 0) {
                return PE_ERR_ARG;
            }
        } else if (type == PE_LN_STEP_ADD || type == PE_LN_STEP_MUL ||
            pe_math_op_inputs(type) == 2) {
            if (in1 == PE_LN_NONE) {
                return PE_ERR_ARG;
            }
        } else if (in1 != PE_LN_NONE) {
            return PE_ERR_ARG;
        }
        if ((type == PE_LN_STEP_ADD && nw != LN_ADD_WORDS) ||
            (type == PE_LN_STEP_MUL && nw != LN_MUL_WORDS)) {
            return PE_ERR_ARG;
        }
        /* a slot is read only after a step wrote it; the last step writes the output row */
        if ((in0 >= 0 && !((written >> in0) & 1u)) ||
            (in1 != PE_LN_NONE && in1 >= 0 && !((written >> in1) & 1u)) ||
            (i == p->num_steps - 1 && out != 1)) {
            return PE_ERR_ARG;
        }
        written |= (uint64_t)1u << out;
        pos += LN_STEP_HEADER + nw;
    }
    if (pos != count) {
        return PE_ERR_ARG;
    }
    p->scratch = (int32_t)scratch; /* <= 62 * depth, depth bounded by rows * depth above */
    return PE_OK;
}

pe_status pe_layernorm_shape(const int32_t *words, int32_t count, int32_t *rows, int32_t *depth)
{
    ln_prog p;
    const pe_status st = ln_parse(words, count, &p);
    if (st != PE_OK || rows == NULL || depth == NULL) {
        return st != PE_OK ? st : PE_ERR_ARG;
    }
    *rows = p.rows;
    *depth = p.depth;
    return PE_OK;
}

pe_status pe_layernorm_get_buffer_size(const int32_t *words, int32_t count, int32_t *size)
{
    ln_prog p;
    pe_status st;
    if (size == NULL) {
        return PE_ERR_ARG;
    }
    st = ln_parse(words, count, &p);
    if (st != PE_OK) {
        return st;
    }
    *size = p.scratch;
    return PE_OK;
}

static int q_ok(int32_t m, int32_t s)
{
    return m >= 0 && s >= -31 && s <= 30;
}

/* [1, 1, 1, n] dims of a row operand of na, nb and nout values. */
static void row_dims(int32_t na, int32_t nb, int32_t nout, pe_dims *da, pe_dims *db, pe_dims *dout)
{
    da->n = da->h = da->w = 1;
    *db = *dout = *da;
    da->c = na;
    db->c = nb;
    dout->c = nout;
}

static pe_status ln_add(const pe_context *ctx, const int32_t *w, const int8_t *a, int32_t na,
                        const int8_t *b, int32_t nb, int8_t *out, int32_t nout)
{
    pe_add_params p;
    pe_dims da, db, dout;
    if (!q_ok(w[4], w[5]) || !q_ok(w[6], w[7]) || !q_ok(w[8], w[9])) {
        return PE_ERR_ARG;
    }
    PE_ADD_FROM_WORDS(p, w);
    p.rounding = PE_ROUND_DOUBLE;
    row_dims(na, nb, nout, &da, &db, &dout);
    return pe_add_s8(ctx, &p, &da, a, &db, b, &dout, out);
}

static pe_status ln_mul(const pe_context *ctx, const int32_t *w, const int8_t *a, int32_t na,
                        const int8_t *b, int32_t nb, int8_t *out, int32_t nout)
{
    pe_mul_params p;
    pe_dims da, db, dout;
    if (!q_ok(w[3], w[4])) {
        return PE_ERR_ARG;
    }
    PE_MUL_FROM_WORDS(p, w);
    p.rounding = PE_ROUND_DOUBLE;
    row_dims(na, nb, nout, &da, &db, &dout);
    return pe_mul_s8(ctx, &p, &da, a, &db, b, &dout, out);
}

pe_status pe_layernorm_s8(const pe_context *ctx, const int32_t *words, int32_t count, const int8_t *x,
                          const int8_t *const *constants, const int32_t *const_counts, int32_t num_consts,
                          int8_t *out)
{
    ln_prog p;
    pe_status st;
    const int8_t *rd[PE_LN_MAX_SLOTS]; /* every slot, for reading */
    int8_t *wr[PE_LN_MAX_SLOTS];       /* slots 1.., for writing */
    int8_t *scratch;
    int32_t r, i, k;
    st = ln_parse(words, count, &p);
    if (st != PE_OK) {
        return st;
    }
    if (x == NULL || out == NULL || num_consts < 0 || num_consts >= PE_LN_MAX_INPUTS ||
        (num_consts > 0 && (constants == NULL || const_counts == NULL))) {
        return PE_ERR_ARG;
    }
    for (k = 1; k <= num_consts; k++) {
        if (constants[k] == NULL ||
            (const_counts[k] != 1 && const_counts[k] != p.depth && const_counts[k] != PE_LN_LUT_ENTRIES)) {
            return PE_ERR_ARG;
        }
    }
    if (p.scratch > 0 && (ctx == NULL || ctx->buf == NULL || ctx->size < p.scratch)) {
        return PE_ERR_SCRATCH;
    }
    scratch = p.scratch > 0 ? (int8_t *)ctx->buf : NULL;
    /* every operand reference must name a constant that exists */
    {
        const int32_t *s = p.steps;
        for (i = 0; i < p.num_steps; i++) {
            if ((s[1] < 0 && -s[1] > num_consts) ||
                (s[2] != PE_LN_NONE && s[2] < 0 && -s[2] > num_consts)) {
                return PE_ERR_ARG;
            }
            s += LN_STEP_HEADER + s[4];
        }
    }
    wr[0] = NULL;
    for (i = 2, k = 0; i < p.num_slots; i++) {
        wr[i] = scratch + k;
        rd[i] = wr[i];
        k += p.slot_len[i];
    }
    for (r = 0; r < p.rows; r++) {
        const int32_t *s = p.steps;
        rd[0] = x + (int32_t)r * p.depth; /* no step writes slot 0 */
        wr[1] = out + (int32_t)r * p.depth;
        rd[1] = wr[1];
        for (i = 0; i < p.num_steps; i++) {
            const int32_t type = s[0], in0 = s[1], in1 = s[2], o = s[3], nw = s[4];
            const int32_t *sw = s + LN_STEP_HEADER;
            const int8_t *a = in0 >= 0 ? rd[in0] : constants[-in0];
            const int32_t na = in0 >= 0 ? p.slot_len[in0] : const_counts[-in0];
            const int8_t *b = NULL;
            int32_t nb = 0;
            const int32_t no = p.slot_len[o];
            if (in1 != PE_LN_NONE) {
                b = in1 >= 0 ? rd[in1] : constants[-in1];
                nb = in1 >= 0 ? p.slot_len[in1] : const_counts[-in1];
            }
            if (type == PE_LN_STEP_LUT) {
                int32_t j;
                if (nb != PE_LN_LUT_ENTRIES || na != no) {
                    return PE_ERR_ARG;
                }
                for (j = 0; j < no; j++) {
                    wr[o][j] = b[(int32_t)a[j] + 128];
                }
                st = PE_OK;
            } else if (type == PE_LN_STEP_ADD || type == PE_LN_STEP_MUL) {
                if ((na != no && na != 1) || (nb != no && nb != 1) || (na != no && nb != no)) {
                    return PE_ERR_ARG;
                }
                st = type == PE_LN_STEP_ADD ? ln_add(ctx, sw, a, na, b, nb, wr[o], no)
                                                 : ln_mul(ctx, sw, a, na, b, nb, wr[o], no);
            } else {
                st = pe_math_invoke(ctx, type, sw, nw, PE_MATH_DT_INT8, a, na, b, nb, wr[o], no);
            }
            if (st != PE_OK) {
                return st;
            }
            s += LN_STEP_HEADER + nw;
        }
    }
    return PE_OK;
}

/* floor(sqrt(v)) */
static uint32_t ln_isqrt64(uint64_t v)
{
    uint64_t res = 0u, bit = (uint64_t)1u << 62;
    while (bit > v) {
        bit >>= 2;
    }
    while (bit != 0u) {
        if (v >= res + bit) {
            v -= res + bit;
            res = (res >> 1) + bit;
        } else {
            res >>= 1;
        }
        bit >>= 2;
    }
    return (uint32_t)res;
}

/* round(v / 2^s), halves away from zero, 1 <= s <= 62 */
static int64_t ln_round_shift(int64_t v, int32_t s)
{
    const uint64_t mag = v < 0 ? (uint64_t)0u - (uint64_t)v : (uint64_t)v;
    const uint64_t q = (mag + ((uint64_t)1u << (s - 1))) >> s;
    return v < 0 ? -(int64_t)q : (int64_t)q;
}

#define LN_HP_MAX_DEPTH 4096
#define LN_HP_MAX_G ((int32_t)1 << 24)

pe_status pe_layernorm_hp_s8(int32_t rows, int32_t depth, int32_t x_zp, int32_t out_zp, int64_t eps_q,
                             const int8_t *x, const int32_t *gamma_q16, const int32_t *beta_q16, int8_t *out)
{
    int32_t r, i;
    if (x == NULL || gamma_q16 == NULL || beta_q16 == NULL || out == NULL || rows < 1 || depth < 2 ||
        depth > LN_HP_MAX_DEPTH || x_zp < -128 || x_zp > 127 || out_zp < -128 || out_zp > 127 || eps_q < 1 ||
        eps_q >= ((int64_t)1 << 60) || (int64_t)rows * depth > (int64_t)0x7FFFFFFF) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < depth; i++) {
        if (gamma_q16[i] <= -LN_HP_MAX_G || gamma_q16[i] >= LN_HP_MAX_G) {
            return PE_ERR_ARG;
        }
    }
    for (r = 0; r < rows; r++) {
        const int8_t *xr = x + (int32_t)r * depth;
        int8_t *yr = out + (int32_t)r * depth;
        int32_t sum = 0, j = 0;
        int64_t sumsq = 0, q;
        uint32_t sq;
        int64_t m;
        for (i = 0; i < depth; i++) {
            const int32_t v = (int32_t)xr[i] - x_zp;
            sum += v;
            sumsq += (int64_t)v * v;
        }
        /* D * SS - S^2 >= 0 (Cauchy-Schwarz), < 2^12 * 2^12 * 2^16 = 2^40 */
        q = (int64_t)depth * sumsq - (int64_t)sum * sum + eps_q;
        while (q < ((int64_t)1 << 60)) {
            q <<= 2;
            j++;
        }
        while (q >= ((int64_t)1 << 62)) { /* not reached with the bounds above; kept for safety */
            q >>= 2;
            j--;
        }
        sq = ln_isqrt64((uint64_t)q); /* [2^30, 2^31) */
        m = (int64_t)(((((uint64_t)1u << 62) / sq) + 1u) >> 1); /* round(2^61 / sq), (2^30, 2^31] */
        for (i = 0; i < depth; i++) {
            const int64_t c = (int64_t)depth * ((int32_t)xr[i] - x_zp) - sum; /* |c| < 2^22 */
            /* 1 / sqrt(Q) = m * 2^(j - 61): y in Q24 */
            const int32_t sh = 37 - j;
            const int64_t y = sh >= 1 ? ln_round_shift(c * m, sh) : (c * m) * ((int64_t)1 << (-sh));
            int64_t o = ln_round_shift(y * gamma_q16[i] + (int64_t)beta_q16[i] * ((int64_t)1 << 24), 40) + out_zp;
            yr[i] = (int8_t)(o < -128 ? -128 : (o > 127 ? 127 : o));
        }
    }
    return PE_OK;
}
