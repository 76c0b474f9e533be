/*
 * pe_dw3_dsp.c - depthwise 3x3, stride 1, dilation 1, channel multiplier 1,
 * output at least 4x4, on the Arm DSP extension from int16 channel planes
 * (internal to csrc, declared in pe_conv_gather.h; the reverse kernel's
 * whole-tensor depthwise call runs it when its scratch has room for the
 * planes, the gather kernel with its work block, pe_conv_gather.h).
 *
 * The input is widened once per band of output rows (and per column strip
 * of at most PE_DW3_MAX_COLS - 4 columns), four channels at a time, into
 * int16 planes, one per channel: plane row r, column j holds
 *   x[iy0 + r][ix0 + j][c] + input_offset   (0 where that pixel is padding)
 * with rows dw3_rowb(out_w) bytes apart (32, 64 or 128: a fixed stride, so
 * the loop below addresses its four input rows with immediate offsets from
 * one pointer). Two horizontally adjacent pixels of one channel are then one
 * 32-bit word (an unaligned LDR is legal on Armv7E-M), and a 3-tap kernel
 * row over two output columns x, x + 1 is
 *   out[x]   += SMLAD(W0, P) + SMLABB(W2, q)      W0 = (x, x+1)
 *   out[x+1] += SMLAD(W1, P) + SMLATB(W2, q)      W1 = (x+1, x+2), W2 = (x+2, x+3)
 * with P = (w0, w1) and q = w2 held in registers: 3 loads and 4 multiply
 * instructions for 6 MACs. The inline-assembly loop (dw3_asm*) computes 2 x 2
 * outputs per pass (output rows y, y + 1 share input rows y + 1, y + 2):
 * 12 LDR + 24 multiplies for 36 MACs, one LDM of the channel's record (4
 * start values, the 5 weight words), one LDMDB of its requantization
 * constants, per output SMMLAR-based requantization (ADD, SMMLAR, ASR, SSAT)
 * and STRB, two ADD for the output pointers and the loop (unrolled twice):
 * 61 instructions per 36 MACs. Odd column / row counts take a last pair
 * overlapping the one before (those outputs written twice, same bytes).
 * The widening (dw3_widen4_asm): 24 instructions per 4 pixels x 4 channels
 * (4 LDR, 4 PKH, 8 SXTAB16, 4 STRD to word-aligned plane columns), every
 * value then used by 9 MACs; after the first band of a channel group, a
 * band's first two plane rows are the last two of the band before, moved
 * by LDM/STM. Cortex-M4, 3x3 on 48x48x16 with the fast scratch: 1.96
 * instructions per MAC (the 2x2 loop 1.71 with its row-pair and call
 * overheads, the widening 0.19, set-up, records and zeroing 0.05); the
 * gather kernel's 3 KB work block (bands of 4 rows): 2.04.
 *
 * Arithmetic: weights are stored doubled (2w, within int16) and each start
 * value is 2 * bias, so the loop's sum is twice the int32 accumulator, the
 * value SMMLAR takes for the double-rounding requantization (the scheme of
 * dw_run_asm in pe_conv_gather.c); exact because |acc| < 2^30 (the bound of
 * pe_dw3_applies). Channels whose requantization or activation range the
 * assembly does not take (single rounding, a shift outside -23..-1, a
 * clamp narrower than int8), single rows / columns and unoptimised builds
 * (PE_DSP_ASM 0) run the same sums in C (dw3_one), requantized by
 * dw3_finish. Same bytes as every other path.
 */
#include <stddef.h>
#include <stdint.h>

#include "pyembed/pe_conv.h"
#include "pyembed/pe_conv_gather.h"
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_simd.h"

/* widest plane row, in int16 columns; a strip of output columns needs 4
 * more (two for the kernel, one read past by the 2-column word loads, one
 * to align the first input column for the widening's STRD) */
#define PE_DW3_MAX_COLS 64
/* output rows per band the fast scratch size allows for */
#define PE_DW3_FAST_ROWS 16

/* plane row bytes for output strips of out_w columns: 2 * (16, 32 or 64),
 * strips of at most PE_DW3_MAX_COLS - 4 columns */
static int32_t dw3_rowb(int32_t out_w)
{
    return out_w + 4 <= 16 ? 32 : out_w + 4 <= 32 ? 64 : 2 * PE_DW3_MAX_COLS;
}

/* the plane shape: kernel 3x3, stride 1, dilation 1, multiplier 1, an
 * output of at least 4 x 4 (on smaller ones the overlapping pairs and the
 * set-up cost more than the channel-group loops: Cortex-M4, 3x3x256, 12.7
 * against 10.9 instructions per MAC) */
static int32_t dw3_shape(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                         const pe_dims *out)
{
    return p->ch_mult == 1 && f->h == 3 && f->w == 3 && p->stride.h == 1 && p->stride.w == 1 &&
           p->dilation.h == 1 && p->dilation.w == 1 && in->c == out->c && out->c >= 1 &&
           out->w >= 4 && out->h >= 4;
}

int32_t pe_dw3_plane_bytes(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                           const pe_dims *out, int32_t *least)
{
    int32_t g, rows;
    if (!dw3_shape(p, in, f, out)) {
        *least = 0;
        return 0;
    }
    g = out->c < 4 ? out->c : 4;
    rows = out->h < PE_DW3_FAST_ROWS ? out->h : PE_DW3_FAST_ROWS;
    *least = g * 4 * dw3_rowb(out->w); /* bands of two output rows */
    return g * (rows + 2) * dw3_rowb(out->w);
}

#if PE_DSP
int32_t pe_dw3_applies(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                       const pe_dims *out, const int32_t *bias)
{
    int32_t o;
    int64_t mb = 0;
    if (!dw3_shape(p, in, f, out)) {
        return 0;
    }
    if (bias != NULL) {
        for (o = 0; o < out->c; o++) {
            const int64_t b = bias[o] < 0 ? -(int64_t)bias[o] : (int64_t)bias[o];
            mb = b > mb ? b : mb;
        }
    }
    /* |acc| < 2^30: nine products of at most 128 * 255 and the bias */
    return 9 * (int64_t)32640 + mb < ((int64_t)1 << 30);
}

/* one channel's constants: the record dw3_asm loads, with base b = rec + 8:
 *   b[-8..-6] plane pointer, output pointer, end of the first row pair
 *   b[-5..-1] m, k, r, out_c, output row bytes   (LDMDB)
 *   b[0..8]   2 * bias (four times), P0, P1, P2, Q01, Q2   (LDMIA)
 *   b[9..14]  output / plane / end steps per row pair, row pairs, 1 when
 *             a row pair has an odd number of column pairs, 1 when an odd
 *             last column takes one more pass, a column back
 * P_i = (2 w[i][0], 2 w[i][1]), Q01 = (2 w[0][2], 2 w[1][2]),
 * Q2 = (2 w[2][2], 0); k = 2^(r-1) + output_offset * 2^r. */
typedef struct {
    int32_t rec[22 + 2];
    int32_t fast; /* double rounding with a right shift 1..23 */
    int32_t m, sh;
} dw3_ch;

static uint32_t dw3_pack(int32_t lo, int32_t hi)
{
    return ((uint32_t)(2 * lo) & 0xFFFFu) | ((uint32_t)(2 * hi) << 16);
}

static void dw3_setup(dw3_ch *ch, const pe_conv_params *p, const pe_per_channel_quant *q,
                      const int8_t *filter, const int32_t *bias, int32_t c, int32_t c_n)
{
    int32_t w[9], t;
    int32_t *const b = ch->rec + 8;
    const int32_t sh = q->shift[c];
    for (t = 0; t < 9; t++) {
        w[t] = filter[(size_t)t * (size_t)c_n + (size_t)c];
    }
    ch->m = q->multiplier[c];
    ch->sh = sh;
    ch->fast = p->rounding == PE_ROUND_DOUBLE && sh <= -1 && sh >= -23;
    b[0] = b[1] = b[2] = b[3] = (int32_t)((uint32_t)(bias != NULL ? bias[c] : 0) << 1);
    b[4] = (int32_t)dw3_pack(w[0], w[1]);
    b[5] = (int32_t)dw3_pack(w[3], w[4]);
    b[6] = (int32_t)dw3_pack(w[6], w[7]);
    b[7] = (int32_t)dw3_pack(w[2], w[5]);
    b[8] = (int32_t)dw3_pack(w[8], 0);
    b[-5] = ch->m;
    if (ch->fast) {
        const int32_t r = -sh;
        b[-4] = (int32_t)(((uint32_t)1u << (r - 1)) + ((uint32_t)p->output_offset << r));
        b[-3] = r;
    }
}

/* one output from the planes, pp at its window's top-left value: the
 * doubled accumulator */
static inline int32_t dw3_one(const uint8_t *pp, size_t rowb, const int32_t *b)
{
    int32_t a = b[0];
    a = __smlad(pe_rd32(pp), (uint32_t)b[4], a);
    a = __smlabb((int32_t)pe_rd32(pp + 4), b[7], a);
    a = __smlad(pe_rd32(pp + rowb), (uint32_t)b[5], a);
    a = __smlabt((int32_t)pe_rd32(pp + rowb + 4), b[7], a);
    a = __smlad(pe_rd32(pp + 2 * rowb), (uint32_t)b[6], a);
    return __smlabb((int32_t)pe_rd32(pp + 2 * rowb + 4), b[8], a);
}

/* the int8 output of a doubled accumulator */
static inline int8_t dw3_finish(int32_t a2, const dw3_ch *ch, const pe_conv_params *p)
{
    const int32_t amin = p->activation.min, amax = p->activation.max, ooff = p->output_offset;
    int32_t v;
    if (ch->fast) { /* as dw_rq in pe_conv_gather.c */
        const int32_t *const b = ch->rec + 8;
        int32_t d;
        __asm__("smmulr %0, %1, %2" : "=r"(d) : "r"(a2), "r"(b[-5]));
        d = d + pe_fx_asr32(d, 31) + b[-4];
        v = pe_fx_asr32(d, b[-3]);
    } else {
        v = pe_fx_requant_mode(pe_fx_asr32(a2, 1), ch->m, ch->sh, p->rounding);
        v = (v < amin - ooff ? amin - ooff : (v > amax - ooff ? amax - ooff : v)) + ooff;
    }
    return (int8_t)(v < amin ? amin : (v > amax ? amax : v));
}

#if PE_DSP_ASM
/* Output rows y, y + 1 (b[12] row pairs), columns in pairs from the
 * pointers in the record (see dw3_ch) until the end pointer; the channel's
 * activation range is the whole int8 range and its requantization fast.
 * Registers: r0-r3 the four accumulators (rows y, y+1 x columns x, x+1),
 * r4-r8 the weight words (then m, k, r, out_c, row bytes), r9 the loaded
 * word, r10 the plane pointer, r11 the output pointer, r12 the record, lr
 * the end of the row pair. RQ is PE_DW_RQ of pe_conv_gather.c with r9 / r0
 * as the temporary (k + sign(a) added by SMMLAR: the same bytes). */
#define PE_DW3_RQ(a, t)                                                       \
    "add    " t ", r5, " a ", asr #31\n\t"                                    \
    "smmlar " a ", " a ", r4, " t "\n\t"                                      \
    "asr    " a ", " a ", r6\n\t"                                             \
    "ssat   " a ", #8, " a "\n\t"
/* one pass: output rows y, y + 1 x columns x, x + 1 (62 instructions) */
#define PE_DW3_BODY(R)                                                        \
    "ldmia  r12, {r0, r1, r2, r3, r4, r5, r6, r7, r8}\n\t"                    \
    "ldr    r9, [r10, #(3*" #R ")]\n\t"                                       \
    "smlad  r2, r9, r6, r2\n\t"                                               \
    "ldr    r9, [r10, #(3*" #R "+2)]\n\t"                                     \
    "smlad  r3, r9, r6, r3\n\t"                                               \
    "ldr    r9, [r10, #(3*" #R "+4)]\n\t"                                     \
    "smlabb r2, r9, r8, r2\n\t"                                               \
    "smlatb r3, r9, r8, r3\n\t"                                               \
    "ldr    r9, [r10, #(2*" #R ")]\n\t"                                       \
    "smlad  r0, r9, r6, r0\n\t"                                               \
    "smlad  r2, r9, r5, r2\n\t"                                               \
    "ldr    r9, [r10, #(2*" #R "+2)]\n\t"                                     \
    "smlad  r1, r9, r6, r1\n\t"                                               \
    "smlad  r3, r9, r5, r3\n\t"                                               \
    "ldr    r9, [r10, #(2*" #R "+4)]\n\t"                                     \
    "smlabb r0, r9, r8, r0\n\t"                                               \
    "smlatb r1, r9, r8, r1\n\t"                                               \
    "smlabt r2, r9, r7, r2\n\t"                                               \
    "smlatt r3, r9, r7, r3\n\t"                                               \
    "ldr    r9, [r10, #" #R "]\n\t"                                           \
    "smlad  r0, r9, r5, r0\n\t"                                               \
    "smlad  r2, r9, r4, r2\n\t"                                               \
    "ldr    r9, [r10, #(" #R "+2)]\n\t"                                       \
    "smlad  r1, r9, r5, r1\n\t"                                               \
    "smlad  r3, r9, r4, r3\n\t"                                               \
    "ldr    r9, [r10, #(" #R "+4)]\n\t"                                       \
    "smlabt r0, r9, r7, r0\n\t"                                               \
    "smlatt r1, r9, r7, r1\n\t"                                               \
    "smlabb r2, r9, r7, r2\n\t"                                               \
    "smlatb r3, r9, r7, r3\n\t"                                               \
    "ldr    r9, [r10]\n\t"                                                    \
    "smlad  r0, r9, r4, r0\n\t"                                               \
    "ldr    r9, [r10, #2]\n\t"                                                \
    "smlad  r1, r9, r4, r1\n\t"                                               \
    "ldr    r9, [r10, #4]!\n\t"                                               \
    "smlabb r0, r9, r7, r0\n\t"                                               \
    "smlatb r1, r9, r7, r1\n\t"                                               \
    "ldmdb  r12, {r4, r5, r6, r7, r8}\n\t"                                    \
    PE_DW3_RQ("r0", "r9")                                                     \
    "strb   r0, [r11]\n\t"                                                    \
    PE_DW3_RQ("r1", "r0")                                                     \
    "strb   r1, [r11, r7]\n\t"                                                \
    PE_DW3_RQ("r2", "r0")                                                     \
    "strb   r2, [r11, r8]\n\t"                                                \
    PE_DW3_RQ("r3", "r0")                                                     \
    "add    r0, r11, r8\n\t"                                                  \
    "strb   r3, [r0, r7]\n\t"                                                 \
    "add    r11, r11, r7, lsl #1\n\t"
#define PE_DW3_ASM(name, R)                                                   \
    __attribute__((noinline)) static void name(int32_t *b)                    \
    {                                                                         \
        __asm__ volatile(                                                     \
            "ldr    r12, %[b]\n\t"                                            \
            "ldr    r10, [r12, #-32]\n\t"                                     \
            "ldr    r11, [r12, #-28]\n\t"                                     \
            "ldr    lr, [r12, #-24]\n\t"                                      \
            "0:\n\t"                                                          \
            "ldr    r9, [r12, #52]\n\t"                                       \
            "cmp    r9, #0\n\t"                                               \
            "bne    2f\n\t"                                                   \
            "1:\n\t"                                                          \
            PE_DW3_BODY(R)                                                    \
            "2:\n\t"                                                          \
            PE_DW3_BODY(R)                                                    \
            "cmp    r11, lr\n\t"                                              \
            "bne    1b\n\t"                                                   \
            "ldr    r9, [r12, #56]\n\t"                                       \
            "cmp    r9, #0\n\t"                                               \
            "beq    3f\n\t"                                                   \
            "sub    r11, r11, r7\n\t"                                         \
            "sub    r10, r10, #2\n\t"                                         \
            PE_DW3_BODY(R)                                                    \
            "sub    r11, r11, r7\n\t"                                         \
            "sub    r10, r10, #2\n\t"                                         \
            "3:\n\t"                                                          \
            "add    r9, r12, #36\n\t"                                         \
            "ldmia  r9, {r0, r1, r2, r3}\n\t"                                 \
            "add    r11, r11, r0\n\t"                                         \
            "add    r10, r10, r1\n\t"                                         \
            "add    lr, lr, r2\n\t"                                           \
            "subs   r3, r3, #1\n\t"                                           \
            "str    r3, [r9, #12]\n\t"                                        \
            "bne    0b\n\t"                                                   \
            :                                                                 \
            : [b] "m"(b)                                                      \
            : "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9",     \
              "r10", "r11", "r12", "lr", "cc", "memory");                     \
    }
PE_DW3_ASM(dw3_asm32, 32)
PE_DW3_ASM(dw3_asm64, 64)
PE_DW3_ASM(dw3_asm128, 128)
#undef PE_DW3_ASM
#undef PE_DW3_BODY
#undef PE_DW3_RQ
#endif

#if PE_DSP_ASM
/* dw3_asm over rows pairs of rows from y0 x column pairs from x0 (pairs of
 * them per row, and with odd_col one more pair a column back from the
 * last) of the planes pl (rows rowb bytes apart) to the output ob (pixels
 * c_n, rows o_row bytes apart), with the record b */
static void dw3_run(int32_t *b, int32_t rowb, const uint8_t *pl, int8_t *ob, size_t o_row,
                    int32_t c_n, int32_t y0, int32_t rows, int32_t x0, int32_t pairs,
                    int32_t odd_col)
{
    int8_t *const o = ob + (size_t)y0 * o_row + (size_t)x0 * (size_t)c_n;
    b[-8] = (int32_t)(intptr_t)(pl + (size_t)y0 * (size_t)rowb + 2 * (size_t)x0);
    b[-7] = (int32_t)(intptr_t)o;
    b[-6] = (int32_t)(intptr_t)(o + (size_t)(2 * pairs) * (size_t)c_n);
    b[-2] = c_n;
    b[-1] = (int32_t)o_row;
    b[9] = (int32_t)(2 * o_row) - 2 * pairs * c_n;
    b[10] = 2 * rowb - 4 * pairs;
    b[11] = (int32_t)(2 * o_row);
    b[12] = rows;
    b[13] = pairs & 1; /* an odd pair count enters the unrolled loop half way */
    b[14] = odd_col;   /* one more pass per row pair, one column back */
    if (rowb == 32) {
        dw3_asm32(b);
    } else if (rowb == 64) {
        dw3_asm64(b);
    } else {
        dw3_asm128(b);
    }
}
#endif

/* two pixels x four channels to four planes (d, d + ps_h, d + 2 ps_h,
 * d + 3 ps_h halfwords): PKHBT / PKHTB pair the pixels' channel bytes,
 * SXTAB16 widens them with the offset; returns the next pixel pair */
static inline const int8_t *dw3_pair(int16_t *d, const int8_t *s, size_t c_n, size_t ps_h,
                                     uint32_t off2)
{
    const uint32_t p0 = pe_rd32(s), p1 = pe_rd32(s + c_n);
    const uint32_t lo = (p0 & 0xFFFFu) | (p1 << 16);
    const uint32_t hi = (p0 >> 16) | (p1 & 0xFFFF0000u);
    const uint32_t v0 = __sxtab16(off2, lo), v1 = pe_sxtab16_ror8(off2, lo);
    const uint32_t v2 = __sxtab16(off2, hi), v3 = pe_sxtab16_ror8(off2, hi);
    __builtin_memcpy(d, &v0, 4);
    __builtin_memcpy(d + ps_h, &v1, 4);
    __builtin_memcpy(d + 2 * ps_h, &v2, 4);
    __builtin_memcpy(d + 3 * ps_h, &v3, 4);
    return s + 2 * c_n;
}

#if PE_DSP_ASM
/* dw3_pair over rows of n4 x 4 pixels, four planes, word-aligned
 * destinations. The block w: { s, c_n, d0, d1, d2, d3, 2-channel offset
 * pair, bytes of n4 * 4 pixels, then per row: source step, plane step,
 * input row bytes, rows }. Per 4 pixels x 4 channels: 4 LDR, 2 ADD, 4 PKH,
 * 8 SXTAB16, 4 STRD and the loop, 24 instructions for 16 values (gcc -O2
 * makes 48 of the intrinsic form); 12 more per row. */
__attribute__((noinline)) static void dw3_widen4_asm(int32_t *w)
{
#define PE_DW3_WQUAD                                                          \
    "ldr     r8, [r0]\n\t"                                                    \
    "ldr     r9, [r0, r1]\n\t"                                                \
    "add     r0, r0, r1, lsl #1\n\t"                                          \
    "ldr     r10, [r0]\n\t"                                                   \
    "ldr     r11, [r0, r1]\n\t"                                               \
    "add     r0, r0, r1, lsl #1\n\t"                                          \
    "pkhbt   r12, r8, r9, lsl #16\n\t"                                        \
    "pkhtb   r9, r9, r8, asr #16\n\t"                                         \
    "pkhbt   r8, r10, r11, lsl #16\n\t"                                       \
    "pkhtb   r11, r11, r10, asr #16\n\t"                                      \
    "sxtab16 r10, r7, r12\n\t"                                                \
    "sxtab16 lr, r7, r8\n\t"                                                  \
    "strd    r10, lr, [r3], #8\n\t"                                           \
    "sxtab16 r10, r7, r12, ror #8\n\t"                                        \
    "sxtab16 lr, r7, r8, ror #8\n\t"                                          \
    "strd    r10, lr, [r4], #8\n\t"                                           \
    "sxtab16 r10, r7, r9\n\t"                                                 \
    "sxtab16 lr, r7, r11\n\t"                                                 \
    "strd    r10, lr, [r5], #8\n\t"                                           \
    "sxtab16 r10, r7, r9, ror #8\n\t"                                         \
    "sxtab16 lr, r7, r11, ror #8\n\t"                                         \
    "strd    r10, lr, [r6], #8\n\t"
    __asm__ volatile("ldr     r8, %[w]\n\t"
                     "ldmia   r8, {r0, r1, r2, r3, r4, r5, r6, r7}\n\t"
                     "add     r2, r2, r0\n\t"
                     "1:\n\t" PE_DW3_WQUAD
                     "cmp     r0, r2\n\t"
                     "bne     1b\n\t"
                     "ldr     r8, %[w]\n\t"
                     "add     r8, r8, #32\n\t"
                     "ldmia   r8, {r9, r10, r11, r12}\n\t"
                     "add     r0, r0, r9\n\t"
                     "add     r3, r3, r10\n\t"
                     "add     r4, r4, r10\n\t"
                     "add     r5, r5, r10\n\t"
                     "add     r6, r6, r10\n\t"
                     "add     r2, r2, r11\n\t"
                     "subs    r12, r12, #1\n\t"
                     "str     r12, [r8, #12]\n\t"
                     "bne     1b\n\t"
                     :
                     : [w] "m"(w)
                     : "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10",
                       "r11", "r12", "lr", "cc", "memory");
#undef PE_DW3_WQUAD
}
#endif

/* Input rows [iy0, iy0 + nrow) x columns [ix0, ix0 + ncol), channels c ..
 * c + g_n - 1, the input offset added, into g_n planes (ps bytes apart,
 * rows rowb bytes apart, column j at byte 2j): padding rows are written 0
 * here; padding columns (j < a or j >= e, see dw3_cols) are left as they
 * are: dw3_zero_cols wrote them once. */
static void dw3_cols(const pe_dims *in, int32_t ix0, int32_t ncol, int32_t *a, int32_t *e)
{
    int32_t col_a = ix0 < 0 ? -ix0 : 0, col_b = in->w - ix0;
    col_b = col_b < ncol ? col_b : ncol;
    col_a = col_a < ncol ? col_a : ncol;
    *a = col_a;
    *e = col_b > col_a ? col_b : col_a;
}

/* 0 into the padding columns of rows [0, nrow) of g_n planes */
static void dw3_zero_cols(int16_t *planes, size_t ps, size_t rowb, int32_t g_n, int32_t nrow,
                          int32_t a, int32_t e, int32_t ncol)
{
    int32_t r, g, j;
    for (g = 0; g < g_n; g++) {
        for (r = 0; r < nrow; r++) {
            int16_t *const d = planes + ((size_t)g * ps + (size_t)r * rowb) / 2;
            for (j = 0; j < a; j++) {
                d[j] = 0;
            }
            for (j = e; j < ncol; j++) {
                d[j] = 0;
            }
        }
    }
}

static void dw3_widen(int16_t *planes, size_t ps, size_t rowb, int32_t g_n, const pe_dims *in,
                      const int8_t *img, int32_t c, int32_t iy0, int32_t nrow, int32_t ix0,
                      int32_t ncol, int32_t off)
{
    const size_t c_n = (size_t)in->c, ps_h = ps / 2, row_h = rowb / 2;
    const uint32_t off2 = pe_dup16(off);
    int32_t r, j, g, a, e, r_a, r_b, done = 0;
    dw3_cols(in, ix0, ncol, &a, &e);
    /* rows [r_a, r_b) inside the input */
    r_a = iy0 < 0 ? (-iy0 < nrow ? -iy0 : nrow) : 0;
    r_b = in->h - iy0 < nrow ? in->h - iy0 : nrow;
    r_b = r_b > r_a ? r_b : r_a;
    for (r = 0; r < nrow; r++) {
        if (r < r_a || r >= r_b) {
            for (g = 0; g < g_n; g++) {
                int16_t *const dg = planes + (size_t)g * ps_h + (size_t)r * row_h;
                for (j = a; j < e; j++) {
                    dg[j] = 0;
                }
            }
        }
    }
    if (r_a == r_b || a == e) {
        return;
    }
#if PE_DSP_ASM
    if (g_n == 4 && e - a >= 4) {
        int32_t wb[12];
        const int32_t n4 = (e - a) / 4;
        int16_t *const d0 = planes + (size_t)r_a * row_h + (size_t)a;
        wb[0] = (int32_t)(intptr_t)(img + ((size_t)(iy0 + r_a) * (size_t)in->w +
                                           (size_t)(ix0 + a)) * c_n + (size_t)c);
        wb[1] = (int32_t)c_n;
        wb[2] = n4 * 4 * (int32_t)c_n;
        wb[3] = (int32_t)(intptr_t)d0;
        wb[4] = (int32_t)(intptr_t)(d0 + ps_h);
        wb[5] = (int32_t)(intptr_t)(d0 + 2 * ps_h);
        wb[6] = (int32_t)(intptr_t)(d0 + 3 * ps_h);
        wb[7] = (int32_t)off2;
        wb[8] = in->w * (int32_t)c_n - wb[2];
        wb[9] = (int32_t)rowb - 8 * n4;
        wb[10] = in->w * (int32_t)c_n;
        wb[11] = r_b - r_a;
        dw3_widen4_asm(wb);
        done = 4 * n4;
    }
#endif
    for (r = r_a; r < r_b && a + done < e; r++) {
        int16_t *const d = planes + (size_t)r * row_h;
        const int8_t *s = img + ((size_t)(iy0 + r) * (size_t)in->w + (size_t)(ix0 + a + done)) * c_n +
                          (size_t)c;
        j = a + done;
        if (g_n == 4) {
            for (; j + 2 <= e; j += 2) {
                s = dw3_pair(d + j, s, c_n, ps_h, off2);
            }
            if (j < e) { /* one pixel: channels (0, 2) and (1, 3) by SXTAB16 */
                const uint32_t px = pe_rd32(s);
                const uint32_t v02 = __sxtab16(off2, px), v13 = pe_sxtab16_ror8(off2, px);
                d[j] = (int16_t)(v02 & 0xFFFFu);
                d[ps_h + (size_t)j] = (int16_t)(v13 & 0xFFFFu);
                d[2 * ps_h + (size_t)j] = (int16_t)(v02 >> 16);
                d[3 * ps_h + (size_t)j] = (int16_t)(v13 >> 16);
                continue;
            }
        }
        for (; j < e; j++) {
            for (g = 0; g < g_n; g++) {
                d[(size_t)g * ps_h + (size_t)j] = (int16_t)(s[g] + off);
            }
            s += c_n;
        }
    }
}

/* plane rows nr, nr + 1 to rows 0, 1 (2 * rowb bytes, 16-byte multiples,
 * word aligned) in each of g_n planes */
static void dw3_keep_rows(int16_t *planes, size_t ps, size_t rowb, int32_t g_n, int32_t nr)
{
    int32_t g;
    for (g = 0; g < g_n; g++) {
        uint32_t *d = (uint32_t *)(void *)((uint8_t *)planes + (size_t)g * ps);
        const uint32_t *s = (const uint32_t *)(const void *)((const uint8_t *)d + (size_t)nr * rowb);
        const uint32_t *const e = s + rowb / 2;
#if PE_DSP_ASM
        __asm__ volatile("1:\n\t"
                         "ldmia   %[s]!, {r4, r5, r6, r7}\n\t"
                         "stmia   %[d]!, {r4, r5, r6, r7}\n\t"
                         "cmp     %[s], %[e]\n\t"
                         "bne     1b\n\t"
                         : [s] "+r"(s), [d] "+r"(d)
                         : [e] "r"(e)
                         : "r4", "r5", "r6", "r7", "cc", "memory");
#else
        for (; s != e; s++, d++) {
            *d = *s;
        }
#endif
    }
}

void pe_dw3_rows(const pe_conv_params *p, const pe_per_channel_quant *q, const pe_dims *in,
                 const int8_t *img, const pe_dims *f, const int8_t *filter, const int32_t *bias,
                 const pe_dims *out, int32_t oy0, int32_t oy1, int8_t *o, size_t o_row,
                 int16_t *planes, int32_t plane_bytes)
{
    const int32_t c_n = out->c, out_w = out->w;
    const int32_t rowb = dw3_rowb(out_w);
    int32_t max_cols;
#if PE_DSP_ASM
    const int32_t full = p->activation.min == -128 && p->activation.max == 127;
#endif
    int32_t ox0, c, g, g_n, yb, nr = 0, y, x, nrmax, nreven, zeroed;
    dw3_ch ch[4];
    (void)f;
    max_cols = rowb / 2 - 4;
    for (ox0 = 0; ox0 < out_w; ox0 += max_cols) {
        const int32_t nc = out_w - ox0 < max_cols ? out_w - ox0 : max_cols;
        const int32_t ix0 = ox0 - p->padding.left;
        int32_t a, e, lead;
        /* plane column 0 at byte lead of a row: the first input column (a)
         * word-aligned for the widening's STRD */
        dw3_cols(in, ix0, nc + 3, &a, &e);
        lead = (a & 1) * 2;
        zeroed = 0;
        for (c = 0; c < c_n; c += 4) {
            int16_t *const pz = planes + lead / 2;
            size_t ps;
            g_n = c_n - c < 4 ? c_n - c : 4;
            nrmax = plane_bytes / (g_n * rowb) - 2;
            if (nrmax < 1) {
                return; /* (excluded by the callers: plane_bytes >= *least) */
            }
            /* bands of an even row count, the last of up to nrmax rows (an
             * odd count there takes a last row pair overlapping the one
             * before: a band of 3 in 5 plane rows runs the assembly, not 2
             * rows then 1 row in C) */
            nreven = nrmax >= 2 ? nrmax & ~1 : nrmax;
            ps = (size_t)(nrmax + 2) * (size_t)rowb;
            if (zeroed != g_n) { /* the padding columns, once per plane layout */
                dw3_zero_cols(pz, ps, (size_t)rowb, g_n, nrmax + 2, a, e, nc + 3);
                zeroed = g_n;
            }
            for (g = 0; g < g_n; g++) {
                dw3_setup(&ch[g], p, q, filter, bias, c + g, c_n);
            }
            for (yb = oy0; yb < oy1; yb += nr) {
                /* after the first band, the last two plane rows of the band
                 * before are this band's first two: moved, not widened again */
                const int32_t kept = yb > oy0 ? 2 : 0;
                if (kept) {
                    dw3_keep_rows(planes, ps, (size_t)rowb, g_n, nr); /* (whole rows: lead too) */
                }
                nr = oy1 - yb <= nrmax ? oy1 - yb : nreven;
                dw3_widen(pz + (size_t)kept * (size_t)rowb / 2, ps, (size_t)rowb, g_n, in, img, c,
                          yb - p->padding.top + kept, nr + 2 - kept, ix0, nc + 3, p->input_offset);
                for (g = 0; g < g_n; g++) {
                    const uint8_t *const pl = (const uint8_t *)pz + (size_t)g * ps;
                    int8_t *const ob = o + (size_t)(yb - oy0) * o_row + (size_t)ox0 * (size_t)c_n +
                                       (size_t)(c + g);
                    int32_t y_c = 0, x_c = 0; /* rows / columns the assembly did */
#if PE_DSP_ASM
                    if (full && ch[g].fast && nr >= 2 && nc >= 2) {
                        /* odd column / row counts: the last column / row
                         * pair overlaps the one before it (its outputs are
                         * written twice, the same bytes) */
                        int32_t *const b = ch[g].rec + 8;
                        dw3_run(b, rowb, pl, ob, o_row, c_n, 0, nr / 2, 0, nc / 2, nc & 1);
                        if (nr & 1) {
                            dw3_run(b, rowb, pl, ob, o_row, c_n, nr - 2, 1, 0, nc / 2, nc & 1);
                        }
                        y_c = nr;
                        x_c = nc;
                    }
#endif
                    if (y_c == nr && x_c == nc) {
                        continue;
                    }
                    for (y = 0; y < nr; y++) {
                        for (x = y < y_c ? x_c : 0; x < nc; x++) {
                            ob[(size_t)y * o_row + (size_t)x * (size_t)c_n] = dw3_finish(
                                dw3_one(pl + (size_t)y * (size_t)rowb + 2 * (size_t)x, (size_t)rowb,
                                        ch[g].rec + 8),
                                &ch[g], p);
                        }
                    }
                }
            }
        }
    }
}
#endif /* PE_DSP */
