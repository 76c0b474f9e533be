/*
 * pe_fc.c - int8 fully connected: one int32 dot product per (batch, feature),
 * then the per-feature requantization, output offset and activation clamp.
 */
#include "pyembed/pe_fc.h"
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_simd.h"

static int dims_positive(const pe_dims *d)
{
    return d->n > 0 && d->h > 0 && d->w > 0 && d->c > 0;
}

pe_status pe_fully_connected_s8_get_buffer_size(const pe_dims *input_dims,
                                                const pe_dims *filter_dims,
                                                int32_t *size)
{
    if (input_dims == NULL || filter_dims == NULL || size == NULL) {
        return PE_ERR_ARG;
    }
    if (!dims_positive(input_dims) || !dims_positive(filter_dims)) {
        return PE_ERR_ARG;
    }
    *size = 0;
    return PE_OK;
}

static pe_status check_quant(const pe_per_channel_quant *q, int32_t count)
{
    int32_t i;
    if (q == NULL || q->multiplier == NULL || q->shift == NULL) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < count; i++) {
        if (q->multiplier[i] < 0 || q->shift[i] < -31 || q->shift[i] > 30) {
            return PE_ERR_ARG;
        }
    }
    return PE_OK;
}

#if PE_DSP
/* Four features' dot products on the DSP extension: each word of four
 * inputs is widened once with the input offset (SXTAB16, SXTAB16 ROR #8) and
 * shared by the four weight rows, each widened with the filter offset; two
 * SMLAD per row and word. |x + offset|, |w + offset| <= 383 fit a halfword
 * and the sums are the portable path's exact int32 sums, re-associated. */
static void dot4_dsp(const int8_t *restrict x, const int8_t *restrict w, int32_t depth,
                     int32_t stride, int32_t x_off, int32_t w_off, int32_t *dots)
{
    const uint32_t xo2 = pe_dup16(x_off), wo2 = pe_dup16(w_off);
    const int8_t *restrict w1 = w + stride;
    const int8_t *restrict w2 = w1 + stride;
    const int8_t *restrict w3 = w2 + stride;
    int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, k;
    for (k = 0; k + 4 <= depth; k += 4) {
        const uint32_t raw = pe_rd32(x + k);
        const uint32_t xe = __sxtab16(xo2, raw), xd = pe_sxtab16_ror8(xo2, raw);
        uint32_t v;
        v = pe_rd32(w + k);
        a0 = __smlad(__sxtab16(wo2, v), xe, a0);
        a0 = __smlad(pe_sxtab16_ror8(wo2, v), xd, a0);
        v = pe_rd32(w1 + k);
        a1 = __smlad(__sxtab16(wo2, v), xe, a1);
        a1 = __smlad(pe_sxtab16_ror8(wo2, v), xd, a1);
        v = pe_rd32(w2 + k);
        a2 = __smlad(__sxtab16(wo2, v), xe, a2);
        a2 = __smlad(pe_sxtab16_ror8(wo2, v), xd, a2);
        v = pe_rd32(w3 + k);
        a3 = __smlad(__sxtab16(wo2, v), xe, a3);
        a3 = __smlad(pe_sxtab16_ror8(wo2, v), xd, a3);
    }
    for (; k < depth; k++) {
        const int32_t xv = (int32_t)x[k] + x_off;
        a0 += xv * ((int32_t)w[k] + w_off);
        a1 += xv * ((int32_t)w1[k] + w_off);
        a2 += xv * ((int32_t)w2[k] + w_off);
        a3 += xv * ((int32_t)w3[k] + w_off);
    }
    dots[0] = a0;
    dots[1] = a1;
    dots[2] = a2;
    dots[3] = a3;
}

static int32_t dot1_dsp(const int8_t *restrict x, const int8_t *restrict w, int32_t depth,
                        int32_t x_off, int32_t w_off)
{
    const uint32_t xo2 = pe_dup16(x_off), wo2 = pe_dup16(w_off);
    int32_t a = 0, k;
    for (k = 0; k + 4 <= depth; k += 4) {
        const uint32_t raw = pe_rd32(x + k), v = pe_rd32(w + k);
        a = __smlad(__sxtab16(wo2, v), __sxtab16(xo2, raw), a);
        a = __smlad(pe_sxtab16_ror8(wo2, v), pe_sxtab16_ror8(xo2, raw), a);
    }
    for (; k < depth; k++) {
        a += ((int32_t)x[k] + x_off) * ((int32_t)w[k] + w_off);
    }
    return a;
}

/* the portable requantization of one feature (saturating add, any shift,
 * either rounding) */
__attribute__((noinline)) static int8_t fc_finish_slow(const pe_fc_params *params,
                                                       const pe_per_channel_quant *quant,
                                                       int32_t qi, int32_t dot, int32_t b)
{
    const int32_t acc = pe_fx_sat_s32_from_s64((int64_t)dot + b);
    int32_t v = pe_fx_requant_mode(acc, quant->multiplier[qi], quant->shift[qi], params->rounding);
    v = pe_fx_clamp(v, PE_INT32_MIN + 128, PE_INT32_MAX - 128) + params->output_offset;
    return (int8_t)pe_fx_clamp(v, params->activation.min, params->activation.max);
}

/* The per-tensor requantization loop of fc_requant_run (one multiplier, a
 * right shift 1..23, double rounding): the multiplier, shift and rounding
 * constant stay in registers; full = the activation range is all of int8,
 * so one SSAT is the clamp. Runs up to the first bias at or beyond its
 * bound (returns the outputs done). bstep is 1 with a bias, 0 on a zero. */
static inline __attribute__((always_inline)) int32_t fc_requant_tensor(
    const int32_t *restrict acc, const int32_t *restrict b, int32_t bstep, int32_t n,
    int32_t mult, int32_t right, int32_t lim1, uint32_t span, int32_t amin, int32_t amax,
    int32_t ooff, int full, int8_t *restrict out)
{
    const int32_t rnd = (int32_t)1 << (right - 1);
    int32_t i;
    for (i = 0; i < n; i++, b += bstep) {
        const int32_t bo = *b;
        int32_t d, v;
        if ((uint32_t)(bo + lim1) >= span) {
            break;
        }
        __asm__("smmulr %0, %1, %2" : "=r"(d) : "r"((int32_t)((uint32_t)(acc[i] + bo) << 1)),
                "r"(mult));
        v = pe_fx_asr32(__qadd(d + pe_fx_asr32(d, 31), rnd), right) + ooff;
        if (full) {
            v = __ssat(v, 8);
        } else {
            v = v > amin ? v : amin;
            v = v < amax ? v : amax;
        }
        out[i] = (int8_t)v;
    }
    return i;
}

/* The requantization of features o0 .. o0 + n - 1 from their int32 dot
 * products (acc[0 .. n-1]): pe_dsp_requant where it applies (double
 * rounding, right shift 1..23, |dot + bias| < 2^30 guaranteed by -lim <
 * bias < lim with lim = 2^30 - depth * 383^2 computed once per row, 0 when
 * no feature qualifies), else fc_finish_slow; same bytes either way.
 * Constants in locals: the int8 stores may alias anything. */
__attribute__((noinline)) static void fc_requant_general(const pe_fc_params *params,
                                                         const pe_per_channel_quant *quant,
                                                         const int32_t *acc, const int32_t *bias,
                                                         int32_t o0, int32_t n, int32_t lim,
                                                         int8_t *out)
{
    const int32_t amin = params->activation.min, amax = params->activation.max;
    const int32_t ooff = params->output_offset, step = params->per_channel ? 1 : 0;
    const int32_t *m = quant->multiplier + (step ? o0 : 0), *sp = quant->shift + (step ? o0 : 0);
    const int32_t lim1 = lim > 0 ? lim - 1 : 0;
    const uint32_t span = lim > 0 ? 2u * (uint32_t)lim - 1u : 0u;
    const int32_t *const end = acc + n;
    const int32_t *b = bias != NULL ? bias + o0 : NULL;
    int32_t o = o0;
    while (acc != end) {
        const int32_t sh = *sp, bo = b != NULL ? *b++ : 0;
        int8_t r;
        /* right shift 1..23 and -lim < bo < lim (lim = 0: never) */
        if ((uint32_t)(-sh - 1) < 23u && (uint32_t)(bo + lim1) < span) {
            r = pe_dsp_requant(*acc + bo, *m, -sh, amin, amax, ooff);
        } else {
            r = fc_finish_slow(params, quant, o & -step, *acc, bo);
        }
        *out++ = r;
        acc++;
        o++;
        m += step;
        sp += step;
    }
}

/* fc_requant_general's bytes: per-tensor quantization with a right shift
 * 1..23 and double rounding through fc_requant_tensor's register loop, the
 * rest (per channel, other shifts, single rounding, from the first bias
 * beyond its bound) through fc_requant_general. */
static void fc_requant_run(const pe_fc_params *params, const pe_per_channel_quant *quant,
                           const int32_t *acc, const int32_t *bias, int32_t o0, int32_t n,
                           int32_t lim, int8_t *out)
{
    int32_t done = 0;
    if (!params->per_channel && lim > 0 && (uint32_t)(-quant->shift[0] - 1) < 23u) {
        /* per tensor: the register loop, then the general one from the first
         * bias beyond its bound (if any) */
        static const int32_t zero = 0;
        const int32_t amin = params->activation.min, amax = params->activation.max;
        const int32_t *bp = bias != NULL ? bias + o0 : &zero, bstep = bias != NULL ? 1 : 0;
        const int32_t lim1 = lim - 1;
        const uint32_t span = 2u * (uint32_t)lim - 1u;
        done = amin == -128 && amax == 127
                   ? fc_requant_tensor(acc, bp, bstep, n, quant->multiplier[0], -quant->shift[0],
                                       lim1, span, amin, amax, params->output_offset, 1, out)
                   : fc_requant_tensor(acc, bp, bstep, n, quant->multiplier[0], -quant->shift[0],
                                       lim1, span, amin, amax, params->output_offset, 0, out);
        if (done == n) {
            return;
        }
    }
    fc_requant_general(params, quant, acc + done, bias, o0 + done, n - done, lim, out + done);
}

#if PE_DSP_ASM
/* Blocks of four int8 weight rows against one int8 input run, the input
 * offset applied while widening: for block i (rows w + 4i*depth ...) and
 * the first d16 (multiple of 16) depth elements,
 *   acc[4i + j] = sum_k (x[k] + off) * w_j[k],   j < 4   (stored)
 * Per four depth elements 1 LDR, 2 SXTAB16 and per row 1 LDR, 2 SXTB16, 2
 * SMLAD: 23 instructions for 16 MACs; the loop does 16 elements and ends on
 * three instructions, a block on about 20. Fixed registers: r0-r3
 * accumulators, r4-r7 row pointers, r8 x, r9 the offset pair, r10/r11 the
 * widened input, r12/lr operands; the job's first five words on the stack. */
typedef struct {
    int32_t *acc;       /* [sp + 0] */
    int32_t nblk;       /* [sp + 4] >= 1 */
    const int8_t *x;    /* [sp + 8] */
    const int8_t *xend; /* [sp + 12] x + d16, d16 >= 16 */
    int32_t step;       /* [sp + 16] 4 * depth - d16 */
    const int8_t *w;    /* row 0 of block 0 */
    int32_t depth;
    uint32_t off2;
} fc8_job;

#define FC8_ROW(acc, wp)                                                      \
    "ldr    lr, [" wp "], #4\n\t"                                             \
    "sxtb16 r12, lr\n\t"                                                      \
    "sxtb16 lr, lr, ror #8\n\t"                                               \
    "smlad  " acc ", r12, r10, " acc "\n\t"                                     \
    "smlad  " acc ", lr, r11, " acc "\n\t"
#define FC8_STEP                                                              \
    "ldr    r11, [r8], #4\n\t"                                                \
    "sxtab16 r10, r9, r11\n\t"                                                \
    "sxtab16 r11, r9, r11, ror #8\n\t"                                        \
    FC8_ROW("r0", "r4") FC8_ROW("r1", "r5") FC8_ROW("r2", "r6") FC8_ROW("r3", "r7")

__attribute__((noinline)) static void fc8_blocks(const fc8_job *job)
{
    register const fc8_job *r0_job __asm__("r0") = job;
    __asm__ volatile("mov    lr, r0\n\t"
                     "ldm    lr, {r0-r3, r8}\n\t"
                     "push   {r0-r3, r8}\n\t"
                     "ldr    r4, [lr, #20]\n\t"
                     "ldr    r12, [lr, #24]\n\t"
                     "ldr    r9, [lr, #28]\n\t"
                     "add    r5, r4, r12\n\t"
                     "add    r6, r5, r12\n\t"
                     "add    r7, r6, r12\n\t"
                     "1:\n\t"
                     "ldr    r8, [sp, #8]\n\t"
                     "movs   r0, #0\n\t"
                     "movs   r1, #0\n\t"
                     "movs   r2, #0\n\t"
                     "movs   r3, #0\n\t"
                     "2:\n\t" FC8_STEP FC8_STEP FC8_STEP FC8_STEP
                     "ldr    r12, [sp, #12]\n\t"
                     "cmp    r8, r12\n\t"
                     "bne    2b\n\t"
                     "ldr    r12, [sp, #0]\n\t"
                     "stmia  r12!, {r0-r3}\n\t"
                     "str    r12, [sp, #0]\n\t"
                     "ldr    r12, [sp, #16]\n\t"
                     "add    r4, r4, r12\n\t"
                     "add    r5, r5, r12\n\t"
                     "add    r6, r6, r12\n\t"
                     "add    r7, r7, r12\n\t"
                     "ldr    r12, [sp, #4]\n\t"
                     "subs   r12, r12, #1\n\t"
                     "str    r12, [sp, #4]\n\t"
                     "bne    1b\n\t"
                     "add    sp, sp, #20\n\t"
                     : "+r"(r0_job)
                     :
                     : "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11",
                       "r12", "lr", "cc", "memory");
}
#undef FC8_STEP
#undef FC8_ROW

/* features per fc8_blocks call: the int32 dot products live on the stack */
#define FC8_CHUNK 32

/* One batch row, symmetric weights (filter_offset 0) and depth >= 16:
 * fc8_blocks over up to FC8_CHUNK features at a time, the depth % 16 tail
 * by bytes, then fc_requant_run; the features % 4 last ones by dot1_dsp. */
static void fc_row_blocks(const pe_fc_params *params, const pe_per_channel_quant *quant,
                          const int8_t *restrict x, const int8_t *restrict filter,
                          const int32_t *bias, int32_t depth, int32_t features, int32_t lim,
                          int8_t *restrict out)
{
    const int32_t xo = params->input_offset, d16 = depth & ~15, f4 = features & ~3;
    int32_t acc[FC8_CHUNK], o, n, j, k;
    fc8_job job;
    job.x = x;
    job.xend = x + d16;
    job.step = 4 * depth - d16;
    job.depth = depth;
    job.off2 = pe_dup16(xo);
    for (o = 0; o < f4; o += n) {
        n = f4 - o < FC8_CHUNK ? f4 - o : FC8_CHUNK;
        job.acc = acc;
        job.nblk = n >> 2;
        job.w = filter + (size_t)o * (size_t)depth;
        fc8_blocks(&job);
        if (d16 < depth) {
            for (j = 0; j < n; j++) {
                const int8_t *w = filter + (size_t)(o + j) * (size_t)depth;
                int32_t a = acc[j];
                for (k = d16; k < depth; k++) {
                    a += w[k] * ((int32_t)x[k] + xo);
                }
                acc[j] = a;
            }
        }
        fc_requant_run(params, quant, acc, bias, o, n, lim, out + o);
    }
    for (; o < features; o++) {
        acc[0] = dot1_dsp(x, filter + (size_t)o * (size_t)depth, depth, xo, 0);
        fc_requant_run(params, quant, acc, bias, o, 1, lim, out + o);
    }
}
#endif

/* The dot products of features o0 .. o0 + n - 1 (n <= FC_CHUNK) into
 * acc[0 .. n-1]: in fours through pe_simd.h's four-row block (symmetric
 * weights, depth >= 8) or dot4_dsp, the rest singly (dot1_dsp); a depth
 * below four by a plain loop per feature (at most three multiplies, no SIMD
 * set-up; depth 1, a Dense layer on a scalar, one multiply per feature).
 * |x + offset|, |w + offset| <= 383 and depth <= PE_FC_MAX_DEPTH keep every
 * partial sum in int32. */
__attribute__((noinline)) static void fc_dots_dsp(const int8_t *restrict x,
                                                 const int8_t *restrict filter, int32_t depth,
                                                 int32_t o0, int32_t n, int32_t xo, int32_t fo,
                                                 int32_t *restrict acc)
{
    const int32_t d8 = depth & ~7;
    const int8_t *w = filter + (size_t)o0 * (size_t)depth;
    int32_t j, k, q;
    if (depth == 1) {
        const int32_t xv = (int32_t)x[0] + xo;
        for (j = 0; j < n; j++) {
            acc[j] = xv * ((int32_t)w[j] + fo);
        }
        return;
    }
    if (depth < 4) {
        for (j = 0; j < n; j++, w += depth) {
            int32_t a = 0;
            for (k = 0; k < depth; k++) {
                a += ((int32_t)x[k] + xo) * ((int32_t)w[k] + fo);
            }
            acc[j] = a;
        }
        return;
    }
    for (j = 0; j + 4 <= n; j += 4, w += 4 * (size_t)depth) {
        if (fo == 0 && d8 > 0) {
            acc[j] = acc[j + 1] = acc[j + 2] = acc[j + 3] = 0;
            pe_dsp_dot_1x4_off(acc + j, w, w + depth, w + 2 * (size_t)depth,
                               w + 3 * (size_t)depth, x, d8 >> 3, xo);
            for (k = d8; k < depth; k++) {
                const int32_t xv = (int32_t)x[k] + xo;
                for (q = 0; q < 4; q++) {
                    acc[j + q] += w[(size_t)q * (size_t)depth + (size_t)k] * xv;
                }
            }
        } else {
            dot4_dsp(x, w, depth, depth, xo, fo, acc + j);
        }
    }
    for (; j < n; j++, w += depth) {
        acc[j] = dot1_dsp(x, w, depth, xo, fo);
    }
}

/* features per fc_dots_dsp + fc_requant_run round (int32 dots on the stack) */
#define FC_CHUNK 32

/* One batch row on the DSP extension: symmetric weights with depth >= 16 and
 * at least eight features through fc_row_blocks, else fc_dots_dsp per chunk
 * of features; each chunk then requantized by fc_requant_run. */
__attribute__((noinline)) static void fc_row_dsp(const pe_fc_params *params,
                                                 const pe_per_channel_quant *quant,
                                                 const int8_t *restrict x,
                                                 const int8_t *restrict filter,
                                                 const int32_t *bias, int32_t depth,
                                                 int32_t features, int8_t *restrict out)
{
    const int32_t xo = params->input_offset, fo = params->filter_offset;
    const int64_t room = ((int64_t)1 << 30) - (int64_t)depth * 146689; /* 146689 = 383^2 */
    const int32_t lim = params->rounding == PE_ROUND_DOUBLE && room > 0 ? (int32_t)room : 0;
    int32_t acc[FC_CHUNK], o, n;
#if PE_DSP_ASM
    if (fo == 0 && depth >= 16 && features >= 8) { /* fewer features: below, less set-up */
        fc_row_blocks(params, quant, x, filter, bias, depth, features, lim, out);
        return;
    }
#endif
    for (o = 0; o < features; o += n) {
        n = features - o < FC_CHUNK ? features - o : FC_CHUNK;
        fc_dots_dsp(x, filter, depth, o, n, xo, fo, acc);
        fc_requant_run(params, quant, acc, bias, o, n, lim, out + o);
    }
}
#endif

/* the parameter checks every FC entry makes: offsets, activation range,
 * rounding, depth and the quantization entries for batches x depth ->
 * features (all positive) */
static pe_status check_fc_params(const pe_fc_params *params, const pe_per_channel_quant *quant,
                                 int32_t depth, int32_t features)
{
    if (params->input_offset < -255 || params->input_offset > 255 ||
        params->filter_offset < -255 || params->filter_offset > 255 ||
        params->output_offset < -128 || params->output_offset > 127 ||
        params->activation.min < -128 || params->activation.max > 127 ||
        params->activation.min > params->activation.max ||
        (params->per_channel != 0 && params->per_channel != 1) ||
        (params->rounding != PE_ROUND_DOUBLE && params->rounding != PE_ROUND_SINGLE)) {
        return PE_ERR_ARG;
    }
    if (depth > PE_FC_MAX_DEPTH) {
        return PE_ERR_UNSUPPORTED;
    }
    return check_quant(quant, params->per_channel ? features : 1);
}

/* the argument checks shared by both dims-based FC kernels: batches, depth
 * and features on PE_OK */
static pe_status check_fc(const pe_fc_params *params, const pe_per_channel_quant *quant,
                          const pe_dims *input_dims, const void *input,
                          const pe_dims *filter_dims, const void *filter,
                          const pe_dims *output_dims, const void *output, int32_t *batches,
                          int32_t *depth, int32_t *features)
{
    int64_t in_per_batch;
    if (params == NULL || input_dims == NULL || input == NULL || filter_dims == NULL ||
        filter == NULL || output_dims == NULL || output == NULL) {
        return PE_ERR_ARG;
    }
    if (!dims_positive(input_dims) || !dims_positive(filter_dims) || !dims_positive(output_dims)) {
        return PE_ERR_ARG;
    }
    *batches = input_dims->n;
    *depth = filter_dims->c;
    *features = filter_dims->n;
    in_per_batch = (int64_t)input_dims->h * input_dims->w * input_dims->c;
    if (filter_dims->h != 1 || filter_dims->w != 1 || in_per_batch != *depth ||
        output_dims->n != *batches || output_dims->h != 1 || output_dims->w != 1 ||
        output_dims->c != *features) {
        return PE_ERR_ARG;
    }
    return check_fc_params(params, quant, *depth, *features);
}

/* batches x depth -> features, arguments checked */
static void fc_s8_run(const pe_context *ctx, const pe_fc_params *params,
                      const pe_per_channel_quant *quant, int32_t batches, int32_t depth,
                      int32_t features, const int8_t *input, const int8_t *filter,
                      const int32_t *bias, int8_t *output)
{
    int32_t b;
#if !PE_DSP
    int32_t o, k;
#endif
    uint64_t macs = 0;
    for (b = 0; b < batches; b++) {
        const int8_t *in_row = input + (size_t)b * (size_t)depth;
        int8_t *out_row = output + (size_t)b * (size_t)features;
#if PE_DSP
        fc_row_dsp(params, quant, in_row, filter, bias, depth, features, out_row);
        macs += (uint64_t)depth * (uint64_t)features;
#else
        const int16_t io16 = (int16_t)params->input_offset;
        const int16_t fo16 = (int16_t)params->filter_offset;
        for (o = 0; o < features; o++) {
            const int8_t *w_row = filter + (size_t)o * (size_t)depth;
            const int32_t qi = params->per_channel ? o : 0;
            int32_t dot = 0; /* |dot| <= depth * 255 * 255 < 2^31 */
            int32_t acc, v;
            /* both offset operands fit int16 (|v + offset| <= 383): the
             * int16 x int16 -> int32 form gcc -O3 vectorises (PMADDWD) */
            for (k = 0; k < depth; k++) {
                const int16_t xv = (int16_t)(in_row[k] + io16);
                const int16_t wv = (int16_t)(w_row[k] + fo16);
                dot += (int32_t)xv * (int32_t)wv;
            }
            macs += (uint64_t)k;
            acc = pe_fx_sat_s32_from_s64((int64_t)dot + (bias != NULL ? bias[o] : 0));
            v = pe_fx_requant_mode(acc, quant->multiplier[qi], quant->shift[qi], params->rounding);
            v = pe_fx_clamp(v, PE_INT32_MIN + 128, PE_INT32_MAX - 128) + params->output_offset;
            out_row[o] = (int8_t)pe_fx_clamp(v, params->activation.min, params->activation.max);
        }
#endif
    }
    if (ctx != NULL && ctx->stats != NULL) {
        ctx->stats->macs += macs;
        ctx->stats->input_reads += macs; /* one input element read per MAC */
    }
}

pe_status pe_fully_connected_s8(const pe_context *ctx, const pe_fc_params *params,
                                const pe_per_channel_quant *quant,
                                const pe_dims *input_dims, const int8_t *input,
                                const pe_dims *filter_dims, const int8_t *filter,
                                const int32_t *bias,
                                const pe_dims *output_dims, int8_t *output)
{
    int32_t batches, depth, features;
    const pe_status st = check_fc(params, quant, input_dims, input, filter_dims, filter,
                                  output_dims, output, &batches, &depth, &features);
    if (st == PE_OK) {
        fc_s8_run(ctx, params, quant, batches, depth, features, input, filter, bias, output);
    }
    return st;
}

pe_status pe_fully_connected_s8_flat_check(const pe_fc_params *params,
                                           const pe_per_channel_quant *quant, int32_t batches,
                                           int32_t depth, int32_t features)
{
    if (params == NULL || batches <= 0 || depth <= 0 || features <= 0) {
        return PE_ERR_ARG;
    }
    return check_fc_params(params, quant, depth, features);
}

void pe_fully_connected_s8_flat_run(const pe_context *ctx, const pe_fc_params *params,
                                    const pe_per_channel_quant *quant, int32_t batches,
                                    int32_t depth, int32_t features, const int8_t *input,
                                    const int8_t *filter, const int32_t *bias, int8_t *output)
{
    fc_s8_run(ctx, params, quant, batches, depth, features, input, filter, bias, output);
}

pe_status pe_fully_connected_s8_flat(const pe_context *ctx, const pe_fc_params *params,
                                     const pe_per_channel_quant *quant, int32_t batches,
                                     int32_t depth, int32_t features, const int8_t *input,
                                     const int8_t *filter, const int32_t *bias, int8_t *output)
{
    pe_status st;
    if (input == NULL || filter == NULL || output == NULL) {
        return PE_ERR_ARG;
    }
    st = pe_fully_connected_s8_flat_check(params, quant, batches, depth, features);
    if (st == PE_OK) {
        fc_s8_run(ctx, params, quant, batches, depth, features, input, filter, bias, output);
    }
    return st;
}

void pe_fc_s8_accumulate(const pe_fc_params *params, int32_t features, int32_t n, int32_t stride,
                         const int8_t *x, const int8_t *filter, int32_t *acc)
{
    const int32_t xo = params->input_offset, fo = params->filter_offset;
    int32_t o = 0;
#if PE_DSP
    const int32_t n8 = n & ~7;
    for (; o + 4 <= features; o += 4) {
        const int8_t *w = filter + (size_t)o * (size_t)stride;
        if (fo == 0 && n8 > 0) {
            /* the four-row block of pe_simd.h (adds to acc), then the tail */
            int32_t k, q;
            pe_dsp_dot_1x4_off(acc + o, w, w + stride, w + 2 * (size_t)stride, w + 3 * (size_t)stride, x,
                               n8 >> 3, xo);
            for (k = n8; k < n; k++) {
                const int32_t xv = (int32_t)x[k] + xo;
                for (q = 0; q < 4; q++) {
                    acc[o + q] += w[(size_t)q * (size_t)stride + (size_t)k] * xv;
                }
            }
        } else {
            int32_t d[4];
            dot4_dsp(x, w, n, stride, xo, fo, d);
            acc[o] += d[0];
            acc[o + 1] += d[1];
            acc[o + 2] += d[2];
            acc[o + 3] += d[3];
        }
    }
#endif
    for (; o < features; o++) {
        const int8_t *w = filter + (size_t)o * (size_t)stride;
#if PE_DSP
        acc[o] += dot1_dsp(x, w, n, xo, fo);
#else
        const int16_t io16 = (int16_t)xo, fo16 = (int16_t)fo;
        int32_t dot = 0, k;
        for (k = 0; k < n; k++) {
            dot += (int32_t)(int16_t)(x[k] + io16) * (int32_t)(int16_t)(w[k] + fo16);
        }
        acc[o] += dot;
#endif
    }
}

void pe_fc_s8_finish(const pe_fc_params *params, const pe_per_channel_quant *quant,
                     int32_t features, const int32_t *acc, const int32_t *bias, int8_t *out)
{
    int32_t o;
    for (o = 0; o < features; o++) {
        const int32_t qi = params->per_channel ? o : 0;
        const int32_t a = pe_fx_sat_s32_from_s64((int64_t)acc[o] + (bias != NULL ? bias[o] : 0));
        int32_t v = pe_fx_requant_mode(a, quant->multiplier[qi], quant->shift[qi], params->rounding);
        v = pe_fx_clamp(v, PE_INT32_MIN + 128, PE_INT32_MAX - 128) + params->output_offset;
        out[o] = (int8_t)pe_fx_clamp(v, params->activation.min, params->activation.max);
    }
}

/* ---- int16-weight fully connected (pe_fc_w16_*) ---- */

/* padded depth and feature counts of the packed layout */
static int32_t fc_w16_round4(int32_t v)
{
    return (int32_t)(((int64_t)v + 3) & ~(int64_t)3);
}

pe_status pe_fc_w16_get_buffer_sizes(const pe_dims *filter_dims, int32_t *packed_bytes,
                                     int32_t *scratch_bytes)
{
    int64_t pb;
    if (filter_dims == NULL || packed_bytes == NULL || scratch_bytes == NULL ||
        !dims_positive(filter_dims) || filter_dims->h != 1 || filter_dims->w != 1) {
        return PE_ERR_ARG;
    }
    if (filter_dims->c > PE_FC_MAX_DEPTH) {
        return PE_ERR_UNSUPPORTED;
    }
    pb = (int64_t)fc_w16_round4(filter_dims->n) * fc_w16_round4(filter_dims->c) * 2;
    if (pb > PE_INT32_MAX) {
        return PE_ERR_OVERFLOW;
    }
    *packed_bytes = (int32_t)pb;
    /* the widened input, the row's int32 dot products, + 3: aligned to 4 inside */
    *scratch_bytes = fc_w16_round4(filter_dims->c) * 2 + fc_w16_round4(filter_dims->n) * 4 + 3;
    return PE_OK;
}

pe_status pe_fc_w16_pack(const pe_dims *filter_dims, const int8_t *filter, int32_t filter_offset,
                         int16_t *packed, int32_t packed_bytes)
{
    int32_t need, scratch, features, depth, kp, b, g, j, t;
    pe_status st = pe_fc_w16_get_buffer_sizes(filter_dims, &need, &scratch);
    static const int8_t order[4] = {0, 2, 1, 3};
    if (st != PE_OK) {
        return st;
    }
    if (filter == NULL || packed == NULL || filter_offset < -255 || filter_offset > 255) {
        return PE_ERR_ARG;
    }
    if (((uintptr_t)(const void *)packed & 3u) != 0) {
        return PE_ERR_ARG;
    }
    if (packed_bytes < need) {
        return PE_ERR_SCRATCH;
    }
    features = filter_dims->n;
    depth = filter_dims->c;
    kp = fc_w16_round4(depth);
    for (b = 0; b < fc_w16_round4(features); b += 4) {
        for (g = 0; g < kp; g += 4) {
            int16_t *dst = packed + ((size_t)b * (size_t)kp + (size_t)g * 4u);
            for (j = 0; j < 4; j++) {
                for (t = 0; t < 4; t++) {
                    const int32_t o = b + j, k = g + order[t];
                    dst[4 * j + t] = (int16_t)(o < features && k < depth
                                                   ? filter[(size_t)o * (size_t)depth + (size_t)k] +
                                                         filter_offset
                                                   : 0);
                }
            }
        }
    }
    return PE_OK;
}

/* x[k] + offset into the packed order (per four depth elements k, k+2, k+1,
 * k+3; zeros past depth): what SXTAB16 / SXTAB16 ROR #8 give per word */
static void fc_w16_widen(int16_t *restrict dst, const int8_t *restrict x, int32_t depth,
                         int32_t off)
{
    const int32_t d4 = depth & ~3;
    int32_t g, t;
#if PE_DSP
    pe_dsp_widen_row((uint32_t *)(void *)dst, x, d4 >> 2, off);
    g = d4;
#else
    for (g = 0; g < d4; g += 4) {
        dst[g] = (int16_t)(x[g] + off);
        dst[g + 1] = (int16_t)(x[g + 2] + off);
        dst[g + 2] = (int16_t)(x[g + 1] + off);
        dst[g + 3] = (int16_t)(x[g + 3] + off);
    }
#endif
    if (g < depth) {
        static const int8_t order[4] = {0, 2, 1, 3};
        for (t = 0; t < 4; t++) {
            const int32_t k = g + order[t];
            dst[g + t] = (int16_t)(k < depth ? x[k] + off : 0);
        }
    }
}

pe_status pe_fully_connected_w16_s8(const pe_context *ctx, const pe_fc_params *params,
                                    const pe_per_channel_quant *quant,
                                    const pe_dims *input_dims, const int8_t *input,
                                    const pe_dims *filter_dims, const int16_t *packed,
                                    const int32_t *bias,
                                    const pe_dims *output_dims, int8_t *output)
{
    int32_t batches, depth, features, pbytes, sbytes, kp, ng, b;
#if !PE_DSP
    int32_t o, j;
#endif
    int16_t *x16;
    uint64_t macs = 0;
    pe_status st;
#if PE_DSP
    int32_t lim, fp4, *acc;
    int64_t room;
#endif

    st = check_fc(params, quant, input_dims, input, filter_dims, packed, output_dims, output,
                  &batches, &depth, &features);
    if (st != PE_OK) {
        return st;
    }
    if (((uintptr_t)(const void *)packed & 3u) != 0) {
        return PE_ERR_ARG;
    }
    st = pe_fc_w16_get_buffer_sizes(filter_dims, &pbytes, &sbytes);
    if (st != PE_OK) {
        return st;
    }
    if (ctx == NULL || ctx->buf == NULL || ctx->size < sbytes) {
        return PE_ERR_SCRATCH;
    }
    x16 = (int16_t *)(void *)((uint8_t *)ctx->buf + ((0u - (uintptr_t)ctx->buf) & 3u));
    kp = fc_w16_round4(depth);
    ng = kp >> 2;
#if PE_DSP
    room = ((int64_t)1 << 30) - (int64_t)depth * 146689; /* 146689 = 383^2 */
    lim = params->rounding == PE_ROUND_DOUBLE && room > 0 ? (int32_t)room : 0;
    fp4 = fc_w16_round4(features);
    acc = (int32_t *)(void *)(x16 + kp);
#endif
    for (b = 0; b < batches; b++) {
        const int8_t *in_row = input + (size_t)b * (size_t)depth;
        int8_t *out_row = output + (size_t)b * (size_t)features;
#if PE_DSP
        /* every block's four dot products into acc (the int16 row block:
         * per four depth elements and four features 1 LDRD, 2 LDM and 8
         * SMLAD), then the requantization of the row */
        pe_dsp_r4_job job;
        fc_w16_widen(x16, in_row, depth, params->input_offset);
        job.acc = acc;
        job.nblk = fp4 >> 2;
        job.x = (const uint32_t *)(const void *)x16;
        job.w = (const uint32_t *)(const void *)packed;
        pe_dsp_r4_run(&job, ng);
        macs += (uint64_t)depth * (uint64_t)features;
        fc_requant_run(params, quant, acc, bias, 0, features, lim, out_row);
#else
        fc_w16_widen(x16, in_row, depth, params->input_offset);
        for (o = 0; o < features; o += 4) {
            const int16_t *w = packed + (size_t)o * (size_t)kp;
            const int32_t n = features - o < 4 ? features - o : 4;
            int32_t a[4] = {0, 0, 0, 0}, g;
            macs += (uint64_t)depth * (uint64_t)n;
            for (g = 0; g < ng; g++) {
                const int16_t *xs = x16 + 4 * (size_t)g, *wg = w + 16 * (size_t)g;
                for (j = 0; j < 4; j++) {
                    a[j] += wg[4 * j] * xs[0] + wg[4 * j + 1] * xs[1] + wg[4 * j + 2] * xs[2] +
                            wg[4 * j + 3] * xs[3];
                }
            }
            for (j = 0; j < n; j++) {
                const int32_t qi = params->per_channel ? o + j : 0;
                const int32_t acc32 = pe_fx_sat_s32_from_s64(
                    (int64_t)a[j] + (bias != NULL ? bias[o + j] : 0));
                int32_t v = pe_fx_requant_mode(acc32, quant->multiplier[qi], quant->shift[qi],
                                               params->rounding);
                v = pe_fx_clamp(v, PE_INT32_MIN + 128, PE_INT32_MAX - 128) + params->output_offset;
                out_row[o + j] = (int8_t)pe_fx_clamp(v, params->activation.min,
                                                     params->activation.max);
            }
        }
#endif
    }
    if (ctx->stats != NULL) {
        ctx->stats->macs += macs;
        ctx->stats->input_reads += (uint64_t)batches * (uint64_t)depth; /* widened once */
    }
    return PE_OK;
}
