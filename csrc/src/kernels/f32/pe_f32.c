/* float32 element-wise kernels: see pe_f32.h. Each expression below is
 * written so that the compiler rounds to float32 after each operation
 * (float operands, float literals, no contraction). */
#include <math.h>
#include "pyembed/pe_f32.h"

pe_status pe_f32_scratch_size(int32_t *size)
{
    if (size == 0) {
        return PE_ERR_ARG;
    }
    *size = 0;
    return PE_OK;
}

/* Nearest integer, ties to the even one: floor, then decide on the fraction. */
static float round_half_even(float v)
{
    float lo = floorf(v);
    float frac = v - lo;
    if (frac < 0.5f) {
        return lo;
    }
    if (frac == 0.5f && fmodf(lo, 2.0f) == 0.0f) {
        return lo;
    }
    return lo + 1.0f;
}

/* logf, except that a negative argument gives the NaN of an invalid
 * operation (0 / 0: on x86 the sign-set default NaN, as TFLM's LOG gives)
 * rather than the C library's choice of NaN. */
static float log_f32(float v)
{
    if (v < 0.0f) {
        float z = v - v;   /* 0, or NaN for -inf */
        return z / z;
    }
    return logf(v);
}

static float logistic_f32(float v)
{
    if (v > 16.619047164916992188f) {
        return 1.0f;
    }
    if (v < -9.0f) {
        return expf(v);
    }
    return 1.0f / (1.0f + expf(-v));
}

static float hard_swish_f32(float v)
{
    const float t = v + 3.0f;
    const float lo = (0.0f < t) ? t : 0.0f;     /* std::max(0, t) */
    const float m = (lo < 6.0f) ? lo : 6.0f;    /* std::min(6, lo) */
    return v * m / 6.0f;
}

static float unary_one(int32_t op, float v)
{
    switch (op) {
    case PE_F32_ABS: return fabsf(v);
    case PE_F32_NEG: return -v;
    case PE_F32_CEIL: return ceilf(v);
    case PE_F32_FLOOR: return floorf(v);
    case PE_F32_ROUND: return round_half_even(v);
    case PE_F32_SQRT: return sqrtf(v);
    case PE_F32_RSQRT: return 1.0f / sqrtf(v);
    case PE_F32_SQUARE: return v * v;
    case PE_F32_EXP: return expf(v);
    case PE_F32_LOG: return log_f32(v);
    case PE_F32_SIN: return sinf(v);
    case PE_F32_LOGISTIC: return logistic_f32(v);
    case PE_F32_TANH: return tanhf(v);
    case PE_F32_HARD_SWISH: return hard_swish_f32(v);
    default: return cosf(v);   /* PE_F32_COS: op checked by the caller */
    }
}

pe_status pe_f32_unary(int32_t op, const float *x, float *y, int32_t n)
{
    int32_t i;
    if (op < 0 || op >= PE_F32_UNARY_COUNT || n < 0) {
        return PE_ERR_ARG;
    }
    if (n > 0 && (x == 0 || y == 0)) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < n; i++) {
        y[i] = unary_one(op, x[i]);
    }
    return PE_OK;
}

static float binary_one(int32_t op, float a, float b, float lo, float hi)
{
    float r;
    switch (op) {
    case PE_F32_ADD: r = a + b; break;
    case PE_F32_SUB: r = a - b; break;
    case PE_F32_MUL: r = a * b; break;
    case PE_F32_DIV: r = a / b; break;
    case PE_F32_MAXIMUM: return a > b ? a : b;
    case PE_F32_MINIMUM: return a < b ? a : b;
    case PE_F32_FLOOR_DIV: return (float)floor((double)a / (double)b);
    case PE_F32_FLOOR_MOD: {
        /* the truncated remainder moved into the divisor's sign */
        float t = fmodf(a, b);
        return (t != 0.0f && ((b < 0.0f) != (t < 0.0f))) ? t + b : t;
    }
    default: { float d = a - b; return d * d; }   /* SQUARED_DIFFERENCE */
    }
    r = (r < lo) ? lo : r;    /* max(r, lo), NaN kept */
    return (hi < r) ? hi : r; /* min(r, hi), NaN kept */
}

pe_status pe_f32_binary(int32_t op, const float *a, const int32_t *a_shape,
                        const float *b, const int32_t *b_shape,
                        float *y, const int32_t *y_shape, int32_t rank,
                        float act_min, float act_max)
{
    int32_t sa[PE_F32_MAX_RANK], sb[PE_F32_MAX_RANK], idx[PE_F32_MAX_RANK];
    int32_t d, total = 1, i, oa = 0, ob = 0, stride_a = 1, stride_b = 1;
    if (op < 0 || op >= PE_F32_BINARY_COUNT || rank < 1 || rank > PE_F32_MAX_RANK
        || a_shape == 0 || b_shape == 0 || y_shape == 0) {
        return PE_ERR_ARG;
    }
    for (d = rank - 1; d >= 0; d--) {
        int32_t n = y_shape[d];
        if (n < 0 || (a_shape[d] != n && a_shape[d] != 1) || (b_shape[d] != n && b_shape[d] != 1)) {
            return PE_ERR_ARG;
        }
        /* a dim of 1 against a longer output does not advance that input */
        sa[d] = (a_shape[d] == 1) ? 0 : stride_a;
        sb[d] = (b_shape[d] == 1) ? 0 : stride_b;
        if (n > 0 && total > INT32_MAX / n) {
            return PE_ERR_OVERFLOW;
        }
        total *= n;
        stride_a *= a_shape[d];
        stride_b *= b_shape[d];
        idx[d] = 0;
    }
    if (total == 0) {
        return PE_OK;
    }
    if (a == 0 || b == 0 || y == 0) {
        return PE_ERR_ARG;
    }
    if (op == PE_F32_FLOOR_DIV) {
        /* a zero divisor (either sign) is an error before anything is written, as TFLM refuses it */
        for (i = 0; i < stride_b; i++) {
            if (b[i] == 0.0f) {
                return PE_ERR_ARG;
            }
        }
    }
    for (i = 0; i < total; i++) {
        y[i] = binary_one(op, a[oa], b[ob], act_min, act_max);
        /* step the output index like an odometer, moving both input offsets */
        for (d = rank - 1; d >= 0; d--) {
            idx[d]++;
            oa += sa[d];
            ob += sb[d];
            if (idx[d] < y_shape[d]) {
                break;
            }
            oa -= sa[d] * y_shape[d];
            ob -= sb[d] * y_shape[d];
            idx[d] = 0;
        }
    }
    return PE_OK;
}
