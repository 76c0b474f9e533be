/* Plain C tests of BATCH_MATMUL (pe_matmul.h) and TRANSPOSE_CONV
 * (pe_tconv.h): pseudo-random shapes (broadcast batch dims, adj_x / adj_y,
 * strides larger than the kernel, padding, offsets at the type limits)
 * against naive references written the way TFLM's reference kernels loop
 * (transpose conv scatters into a zeroed int32 copy of the output), compared
 * with ==; counters and status checks. Built with ASan + UBSan. */
#include <stdint.h>
#include <string.h>
#include "pyembed/pyembed.h"
#include "pyembed/pe_matmul.h"
#include "pyembed/pe_tconv.h"
#include "pe_test.h"

static uint64_t rng_state = 0xD1B54A32D192ED03ull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static int32_t rnd_in(int32_t lo, int32_t hi)
{
    return lo + (int32_t)(rnd() % (uint32_t)(hi - lo + 1));
}
static int32_t rnd_offset(void) /* zero points at the limits now and then */
{
    const uint32_t r = rnd() % 6u;
    return r == 0u ? -127 : (r == 1u ? 128 : rnd_in(-127, 128));
}

#define MAXE 8192
static int8_t A[MAXE], B[MAXE], got[MAXE], want[MAXE];
static int32_t acc32[MAXE];

static int8_t fin(int32_t acc, int32_t m, int32_t s, pe_rounding r, int32_t off, pe_activation a)
{
    long long v = (long long)pe_fx_requant_mode(acc, m, s, r) + off;
    v = v < a.min ? a.min : v;
    v = v > a.max ? a.max : v;
    return (int8_t)v;
}

static void matmul_cases(void)
{
    int iter, done = 0;
    for (iter = 0; iter < 500; iter++) {
        pe_batch_matmul_params p;
        pe_shape5 ls, rs, os, want_s;
        pe_stats st;
        pe_context ctx;
        int32_t d, R, K, C, b0, b1, b2, i, j, k, bad = 0, size = -1;
        long long nl = 1, nr = 1, no;
        memset(&p, 0, sizeof(p));
        p.lhs_offset = rnd_offset();
        p.rhs_offset = rnd_offset();
        p.output_offset = rnd_in(-128, 127);
        p.multiplier = rnd_in(1 << 30, PE_INT32_MAX);
        p.shift = rnd_in(-14, 2);
        p.activation.min = rnd_in(-128, 0);
        p.activation.max = rnd_in(p.activation.min, 127);
        p.rounding = (rnd() & 1u) ? PE_ROUND_SINGLE : PE_ROUND_DOUBLE;
        p.adj_x = (int32_t)(rnd() & 1u);
        p.adj_y = (int32_t)(rnd() & 1u);
        R = rnd_in(1, 7);
        K = rnd_in(1, 20);
        C = rnd_in(1, 9);
        for (d = 0; d < 3; d++) {
            const int32_t v = rnd_in(1, 3);
            const uint32_t mode = rnd() % 3u; /* equal, lhs broadcast, rhs broadcast */
            ls.dims[d] = mode == 1u ? 1 : v;
            rs.dims[d] = mode == 2u ? 1 : v;
        }
        ls.dims[3] = p.adj_x ? K : R;
        ls.dims[4] = p.adj_x ? R : K;
        rs.dims[3] = p.adj_y ? C : K;
        rs.dims[4] = p.adj_y ? K : C;
        for (d = 0; d < 5; d++) {
            nl *= ls.dims[d];
            nr *= rs.dims[d];
        }
        PE_CHECK_EQ(pe_batch_matmul_out_shape(&p, &ls, &rs, &os), PE_OK);
        no = (long long)os.dims[0] * os.dims[1] * os.dims[2] * R * C;
        if (nl > MAXE || nr > MAXE || no > MAXE) {
            continue;
        }
        for (i = 0; i < nl; i++) A[i] = (int8_t)rnd_in(-128, 127);
        for (i = 0; i < nr; i++) B[i] = (int8_t)rnd_in(-128, 127);
        /* reference: explicit broadcast indices */
        for (b0 = 0; b0 < os.dims[0]; b0++)
            for (b1 = 0; b1 < os.dims[1]; b1++)
                for (b2 = 0; b2 < os.dims[2]; b2++) {
                    const int32_t la = ((ls.dims[0] == 1 ? 0 : b0) * ls.dims[1] + (ls.dims[1] == 1 ? 0 : b1)) *
                                       ls.dims[2] + (ls.dims[2] == 1 ? 0 : b2);
                    const int32_t ra = ((rs.dims[0] == 1 ? 0 : b0) * rs.dims[1] + (rs.dims[1] == 1 ? 0 : b1)) *
                                       rs.dims[2] + (rs.dims[2] == 1 ? 0 : b2);
                    const int32_t oa = (b0 * os.dims[1] + b1) * os.dims[2] + b2;
                    for (i = 0; i < R; i++)
                        for (j = 0; j < C; j++) {
                            long long a = 0;
                            for (k = 0; k < K; k++) {
                                const int8_t x = p.adj_x ? A[la * R * K + k * R + i] : A[la * R * K + i * K + k];
                                const int8_t y = p.adj_y ? B[ra * K * C + j * K + k] : B[ra * K * C + k * C + j];
                                a += (long long)(x + p.lhs_offset) * (y + p.rhs_offset);
                            }
                            want[oa * R * C + i * C + j] =
                                fin((int32_t)a, p.multiplier, p.shift, p.rounding, p.output_offset, p.activation);
                        }
                }
        memset(&st, 0, sizeof(st));
        ctx.buf = NULL;
        ctx.size = 0;
        ctx.stats = &st;
        PE_CHECK_EQ(pe_batch_matmul_s8_get_buffer_size(&p, &ls, &rs, &os, &size), PE_OK);
        PE_CHECK_EQ(size, 0);
        PE_CHECK_EQ(pe_batch_matmul_s8(&ctx, &p, &ls, A, &rs, B, &os, got), PE_OK);
        for (i = 0; i < no; i++) bad += got[i] != want[i];
        PE_CHECK_EQ(bad, 0);
        PE_CHECK_EQ(st.macs, (uint64_t)no * (uint64_t)K);
        /* status checks on this case */
        want_s = os;
        want_s.dims[4] += 1;
        PE_CHECK_EQ(pe_batch_matmul_s8(NULL, &p, &ls, A, &rs, B, &want_s, got), PE_ERR_ARG);
        PE_CHECK_EQ(pe_batch_matmul_s8(NULL, &p, &ls, NULL, &rs, B, &os, got), PE_ERR_ARG);
        done++;
    }
    PE_CHECK(done > 300);
}

static void matmul_status(void)
{
    pe_batch_matmul_params p;
    pe_shape5 ls = {{1, 1, 2, 3, 4}}, rs = {{1, 1, 3, 4, 5}}, os;
    memset(&p, 0, sizeof(p));
    p.multiplier = 1 << 30;
    p.activation.min = -128;
    p.activation.max = 127;
    PE_CHECK_EQ(pe_batch_matmul_out_shape(&p, &ls, &rs, &os), PE_ERR_ARG); /* 2 vs 3 batches */
    rs.dims[2] = 1;
    PE_CHECK_EQ(pe_batch_matmul_out_shape(&p, &ls, &rs, &os), PE_OK);
    PE_CHECK_EQ(os.dims[2], 2);
    PE_CHECK_EQ(os.dims[3], 3);
    PE_CHECK_EQ(os.dims[4], 5);
    rs.dims[3] = 5; /* K mismatch */
    PE_CHECK_EQ(pe_batch_matmul_out_shape(&p, &ls, &rs, &os), PE_ERR_ARG);
    rs.dims[3] = 4;
    p.adj_x = 2;
    PE_CHECK_EQ(pe_batch_matmul_out_shape(&p, &ls, &rs, &os), PE_ERR_ARG);
    p.adj_x = 0;
    p.lhs_offset = 129;
    PE_CHECK_EQ(pe_batch_matmul_out_shape(&p, &ls, &rs, &os), PE_ERR_ARG);
    p.lhs_offset = 0;
    p.shift = 31;
    PE_CHECK_EQ(pe_batch_matmul_out_shape(&p, &ls, &rs, &os), PE_ERR_ARG);
    p.shift = 0;
    p.multiplier = -1;
    PE_CHECK_EQ(pe_batch_matmul_out_shape(&p, &ls, &rs, &os), PE_ERR_ARG);
    p.multiplier = 1 << 30;
    ls.dims[0] = 0;
    PE_CHECK_EQ(pe_batch_matmul_out_shape(&p, &ls, &rs, &os), PE_ERR_ARG);
    ls.dims[0] = 1;
    /* a depth whose int32 sum could overflow */
    {
        pe_shape5 l2 = {{1, 1, 1, 1, 40000}}, r2 = {{1, 1, 1, 40000, 1}}, o2 = {{1, 1, 1, 1, 1}};
        int32_t size;
        PE_CHECK_EQ(pe_batch_matmul_s8_get_buffer_size(&p, &l2, &r2, &o2, &size), PE_ERR_UNSUPPORTED);
    }
    /* an output count above int32 */
    {
        pe_shape5 l3 = {{1, 1, 1, 65536, 1}}, r3 = {{1, 1, 1, 1, 65536}}, o3;
        PE_CHECK_EQ(pe_batch_matmul_out_shape(&p, &l3, &r3, &o3), PE_ERR_OVERFLOW);
    }
    PE_CHECK_EQ(pe_batch_matmul_out_shape(NULL, &ls, &rs, &os), PE_ERR_ARG);
}

static void tconv_cases(void)
{
    int iter, done = 0;
    static int32_t mult[64], shift[64], bias[64];
    for (iter = 0; iter < 500; iter++) {
        pe_conv_params p;
        pe_dims in, f, out;
        pe_per_channel_quant q;
        pe_stats st;
        pe_context ctx;
        const int32_t *b;
        int32_t i, n, iy, ix, ic, ky, kx, oc, oy, ox, bad = 0, size = -1;
        long long ni, nf, no;
        memset(&p, 0, sizeof(p));
        in.n = rnd_in(1, 2);
        in.h = rnd_in(1, 6);
        in.w = rnd_in(1, 6);
        in.c = rnd_in(1, 6);
        f.n = rnd_in(1, 9);
        f.h = rnd_in(1, 5);
        f.w = rnd_in(1, 5);
        f.c = in.c;
        p.stride.h = rnd_in(1, 4);
        p.stride.w = rnd_in(1, 4);
        out.n = in.n;
        out.c = f.n;
        /* SAME-like or VALID-like output sizes, and odd ones in between */
        out.h = in.h * p.stride.h + rnd_in(-p.stride.h + 1, f.h);
        out.w = in.w * p.stride.w + rnd_in(-p.stride.w + 1, f.w);
        out.h = out.h < 1 ? 1 : out.h;
        out.w = out.w < 1 ? 1 : out.w;
        p.padding.top = rnd_in(0, f.h);
        p.padding.left = rnd_in(0, f.w);
        p.input_offset = rnd_offset();
        p.output_offset = rnd_in(-128, 127);
        p.activation.min = rnd_in(-128, 0);
        p.activation.max = rnd_in(p.activation.min, 127);
        p.rounding = (rnd() & 1u) ? PE_ROUND_SINGLE : PE_ROUND_DOUBLE;
        ni = (long long)in.n * in.h * in.w * in.c;
        nf = (long long)f.n * f.h * f.w * f.c;
        no = (long long)out.n * out.h * out.w * out.c;
        if (ni > MAXE || nf > MAXE || no > MAXE) continue;
        for (i = 0; i < ni; i++) A[i] = (int8_t)rnd_in(-128, 127);
        for (i = 0; i < nf; i++) B[i] = (int8_t)rnd_in(-128, 127);
        for (i = 0; i < out.c; i++) {
            mult[i] = rnd_in(1 << 30, PE_INT32_MAX);
            shift[i] = rnd_in(-16, 1);
            bias[i] = rnd_in(-50000, 50000);
        }
        b = (rnd() & 1u) ? bias : NULL;
        /* TFLM's loop: scatter into a zeroed int32 output copy */
        memset(acc32, 0, sizeof(acc32));
        for (n = 0; n < in.n; n++)
            for (iy = 0; iy < in.h; iy++)
                for (ix = 0; ix < in.w; ix++)
                    for (ic = 0; ic < in.c; ic++)
                        for (ky = 0; ky < f.h; ky++)
                            for (kx = 0; kx < f.w; kx++)
                                for (oc = 0; oc < out.c; oc++) {
                                    oy = iy * p.stride.h - p.padding.top + ky;
                                    ox = ix * p.stride.w - p.padding.left + kx;
                                    if (oy >= 0 && oy < out.h && ox >= 0 && ox < out.w) {
                                        acc32[((n * out.h + oy) * out.w + ox) * out.c + oc] +=
                                            (A[((n * in.h + iy) * in.w + ix) * in.c + ic] + p.input_offset) *
                                            B[((oc * f.h + ky) * f.w + kx) * f.c + ic];
                                    }
                                }
        for (i = 0; i < no; i++) {
            oc = i % out.c;
            want[i] = fin(acc32[i] + (b != NULL ? b[oc] : 0), mult[oc], shift[oc], p.rounding,
                          p.output_offset, p.activation);
        }
        q.multiplier = mult;
        q.shift = shift;
        memset(&st, 0, sizeof(st));
        ctx.buf = NULL;
        ctx.size = 0;
        ctx.stats = &st;
        PE_CHECK_EQ(pe_transpose_conv_s8_get_buffer_size(&p, &in, &f, &out, &size), PE_OK);
        PE_CHECK_EQ(size, 0);
        PE_CHECK_EQ(pe_transpose_conv_s8(&ctx, &p, &q, &in, A, &f, B, b, &out, got), PE_OK);
        for (i = 0; i < no; i++) bad += got[i] != want[i];
        PE_CHECK_EQ(bad, 0);
        done++;
    }
    PE_CHECK(done > 300);
}

static void tconv_status(void)
{
    static int32_t mult[4] = {1 << 30, 1 << 30, 1 << 30, 1 << 30}, shift[4] = {0, 0, 0, 0};
    pe_conv_params p;
    pe_dims in = {1, 2, 2, 3}, f = {4, 3, 3, 3}, out = {1, 4, 4, 4};
    pe_per_channel_quant q = {mult, shift};
    int32_t big[4] = {PE_INT32_MAX, 0, 0, 0}, size;
    memset(&p, 0, sizeof(p));
    p.stride.h = p.stride.w = 2;
    p.activation.min = -128;
    p.activation.max = 127;
    PE_CHECK_EQ(pe_transpose_conv_s8(NULL, &p, &q, &in, A, &f, B, NULL, &out, got), PE_OK);
    PE_CHECK_EQ(pe_transpose_conv_s8(NULL, &p, &q, &in, A, &f, B, big, &out, got), PE_ERR_UNSUPPORTED);
    PE_CHECK_EQ(pe_transpose_conv_s8(NULL, &p, &q, &in, NULL, &f, B, NULL, &out, got), PE_ERR_ARG);
    PE_CHECK_EQ(pe_transpose_conv_s8(NULL, &p, NULL, &in, A, &f, B, NULL, &out, got), PE_ERR_ARG);
    f.c = 2;
    PE_CHECK_EQ(pe_transpose_conv_s8_get_buffer_size(&p, &in, &f, &out, &size), PE_ERR_ARG);
    f.c = 3;
    out.c = 5;
    PE_CHECK_EQ(pe_transpose_conv_s8(NULL, &p, &q, &in, A, &f, B, NULL, &out, got), PE_ERR_ARG);
    out.c = 4;
    p.stride.w = 0;
    PE_CHECK_EQ(pe_transpose_conv_s8(NULL, &p, &q, &in, A, &f, B, NULL, &out, got), PE_ERR_ARG);
    p.stride.w = 2;
    p.padding.left = -1;
    PE_CHECK_EQ(pe_transpose_conv_s8(NULL, &p, &q, &in, A, &f, B, NULL, &out, got), PE_ERR_ARG);
    p.padding.left = 0;
    shift[2] = -32;
    PE_CHECK_EQ(pe_transpose_conv_s8(NULL, &p, &q, &in, A, &f, B, NULL, &out, got), PE_ERR_ARG);
    shift[2] = 0;
    p.rounding = (pe_rounding)7;
    PE_CHECK_EQ(pe_transpose_conv_s8(NULL, &p, &q, &in, A, &f, B, NULL, &out, got), PE_ERR_ARG);
}

int main(void)
{
    matmul_cases();
    matmul_status();
    tconv_cases();
    tconv_status();
    return PE_TEST_END("test_heavy_ops");
}
