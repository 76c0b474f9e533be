/*
 * fuzz_layernorm.c - libFuzzer harness for PE_LAYERNORM's row program
 * (pe_layernorm.h): random programs of ADD / MUL / math steps (MEAN, SUB,
 * SQUARED_DIFFERENCE, RSQRT, NEG, ...) over random slots, operands and
 * constants, with parameter words drawn in range or wild.
 *
 * Checked: no access outside x, out, the constants or the scratch the size
 * query names (every buffer an exact malloc); a program the query accepts
 * and that runs OK gives the same output whatever garbage the scratch and
 * output held before (every output byte is defined); one scratch byte less
 * gives PE_ERR_SCRATCH. One input in eight fuzzes PE_LAYERNORM_HP instead:
 * exact buffers, every output within one LSB of its formula in double.
 */
#include <math.h>

#include "fuzz_common.h"
#include "pyembed/pe_layernorm.h"

#define MAX_WORDS 512

static const int32_t math_types[] = {60, 61, 62, 63, 67, 70, 71, 72, 73, 74, 75, 76};

/* PE_LAYERNORM_HP on exact buffers: any accepted argument set stays inside
 * them, and every output is within one LSB of the row's formula in double. */
static void fuzz_hp(fz_reader *r)
{
    const int32_t rows = fz_range(r, 1, 4), depth = fz_wild(r, 2, 40);
    const int32_t xz = fz_wild(r, -128, 127), oz = fz_wild(r, -128, 127);
    const int64_t eps = (int64_t)fz_wild(r, 1, 1 << 20) * (int64_t)fz_range(r, 1, 1 << 10);
    int8_t *x, *out;
    int32_t *g, *b, i, k;
    if (depth < 1 || depth > 4096) {
        (void)pe_layernorm_hp_s8(rows, depth, xz, oz, eps, NULL, NULL, NULL, NULL);
        return;
    }
    x = (int8_t *)fz_alloc((size_t)(rows * depth));
    out = (int8_t *)fz_alloc((size_t)(rows * depth));
    g = (int32_t *)fz_alloc(sizeof(int32_t) * (size_t)depth);
    b = (int32_t *)fz_alloc(sizeof(int32_t) * (size_t)depth);
    for (i = 0; i < rows * depth; i++) {
        x[i] = (int8_t)fz_u8(r);
    }
    for (i = 0; i < depth; i++) {
        g[i] = fz_wild(r, -(1 << 24) + 1, (1 << 24) - 1);
        b[i] = fz_wild(r, -(1 << 30), 1 << 30);
    }
    if (pe_layernorm_hp_s8(rows, depth, xz, oz, eps, x, g, b, out) == PE_OK) {
        for (k = 0; k < rows; k++) {
            double s = 0.0, ss = 0.0, q;
            for (i = 0; i < depth; i++) {
                const double v = (double)(x[k * depth + i] - xz);
                s += v;
                ss += v * v;
            }
            q = depth * ss - s * s + (double)eps;
            for (i = 0; i < depth; i++) {
                const double c = depth * (double)(x[k * depth + i] - xz) - s;
                double want = oz + (c / sqrt(q) * g[i] + b[i]) / 65536.0;
                want = want < -128.0 ? -128.0 : (want > 127.0 ? 127.0 : want);
                if (fabs((double)out[k * depth + i] - want) > 1.0) {
                    FZ_FAIL("LAYERNORM_HP row %d element %d: %d, formula %.3f", (int)k, (int)i,
                            (int)out[k * depth + i], want);
                }
            }
        }
    }
    free(b);
    free(g);
    free(out);
    free(x);
}

static int32_t draw_ref(fz_reader *r, int32_t slots, int32_t consts)
{
    if (consts > 0 && (fz_u8(r) & 3u) == 0u) {
        return -fz_range(r, 1, consts);
    }
    return fz_wild(r, 0, slots - 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_reader rd = {data, size};
    fz_reader *r = &rd;
    int32_t w[MAX_WORDS];
    int32_t n = 0, k, i, rows, depth, slots, steps, consts, need = 0;
    int32_t lens[PE_LN_MAX_SLOTS];
    int32_t counts[4] = {0, 0, 0, 0};
    int8_t *cst[4] = {NULL, NULL, NULL, NULL};
    const int8_t *cc[4];
    int8_t *x, *out, *out2, *scr;
    pe_context ctx;
    pe_status st, st2;
    if ((fz_u8(r) & 7u) == 0u) {
        fuzz_hp(r);
        return 0;
    }
    rows = fz_range(r, 1, 6);
    depth = fz_range(r, 1, 12);
    slots = fz_range(r, 2, 7);
    steps = fz_range(r, 1, 6);
    consts = fz_range(r, 0, 3);
    w[n++] = fz_wild(r, rows, rows);
    w[n++] = fz_wild(r, depth, depth);
    w[n++] = fz_wild(r, slots, slots);
    w[n++] = fz_wild(r, steps, steps);
    for (i = 0; i < slots; i++) {
        lens[i] = i < 2 || (fz_u8(r) & 1u) ? depth : 1;
        w[n++] = fz_wild(r, lens[i], lens[i]);
    }
    for (i = 0; i < steps && n < MAX_WORDS - 32; i++) {
        const uint32_t kind = fz_u8(r) % 3u;
        const int32_t type = kind == 0 ? 7 : kind == 1 ? 8 : math_types[fz_u8(r) % 12u];
        const int two = type == 7 || type == 8 || (type >= 70 && type <= 72) || type == 75;
        int32_t nw, j;
        w[n++] = type;
        w[n++] = draw_ref(r, slots, consts);
        w[n++] = two ? draw_ref(r, slots, consts) : PE_LN_NONE;
        w[n++] = i == steps - 1 ? fz_wild(r, 1, 1) : fz_wild(r, 1, slots - 1);
        nw = type == 7 ? 12 : type == 8 ? 7 : fz_range(r, 0, 16);
        w[n++] = fz_wild(r, nw, nw);
        for (j = 0; j < nw; j++) {
            /* offsets / zero points small, multipliers and shifts plausible */
            const uint32_t sel = fz_u8(r) & 3u;
            w[n++] = sel == 0 ? fz_range(r, -128, 127)
                   : sel == 1 ? fz_range(r, 1 << 30, 0x7FFFFFFF)
                   : sel == 2 ? fz_range(r, -31, 30) : fz_wild(r, 0, depth);
        }
    }
    if (fz_verbose()) {
        fprintf(stderr, "rows %d depth %d slots %d steps %d consts %d words %d\n", (int)rows, (int)depth,
                (int)slots, (int)steps, (int)consts, (int)n);
    }
    if (pe_layernorm_get_buffer_size(w, n, &need) != PE_OK) {
        return 0;
    }
    /* the kernel addresses w[0] rows of w[1] values: size the buffers so */
    rows = w[0];
    depth = w[1];
    if ((int64_t)rows * depth > 65536) {
        return 0;
    }
    x = (int8_t *)fz_alloc((size_t)(rows * depth));
    out = (int8_t *)fz_alloc((size_t)(rows * depth));
    out2 = (int8_t *)fz_alloc((size_t)(rows * depth));
    for (k = 0; k < rows * depth; k++) {
        x[k] = (int8_t)fz_u8(r);
        out[k] = (int8_t)0x5A;
        out2[k] = (int8_t)0xA5;
    }
    cc[0] = NULL;
    for (k = 1; k <= consts; k++) {
        counts[k] = (fz_u8(r) & 1u) ? depth : 1;
        cst[k] = (int8_t *)fz_alloc((size_t)counts[k]);
        for (i = 0; i < counts[k]; i++) {
            cst[k][i] = (int8_t)fz_u8(r);
        }
        cc[k] = cst[k];
    }
    scr = (int8_t *)fz_alloc((size_t)(need > 0 ? need : 1));
    memset(scr, 0x33, (size_t)(need > 0 ? need : 1));
    ctx.buf = scr;
    ctx.size = need;
    ctx.stats = NULL;
    st = pe_layernorm_s8(&ctx, w, n, x, cc, counts, consts, out);
    memset(scr, 0xCC, (size_t)(need > 0 ? need : 1));
    st2 = pe_layernorm_s8(&ctx, w, n, x, cc, counts, consts, out2);
    if (st != st2) {
        FZ_FAIL("status %d then %d on the same program", (int)st, (int)st2);
    }
    if (st == PE_OK) {
        if (memcmp(out, out2, (size_t)(rows * depth)) != 0) {
            FZ_FAIL("output depends on the scratch / output garbage");
        }
        if (need > 0) {
            ctx.size = need - 1;
            if (pe_layernorm_s8(&ctx, w, n, x, cc, counts, consts, out) != PE_ERR_SCRATCH) {
                FZ_FAIL("scratch of %d bytes (one less than the query) accepted", (int)(need - 1));
            }
        }
    }
    free(scr);
    for (k = 1; k <= consts; k++) {
        free(cst[k]);
    }
    free(out2);
    free(out);
    free(x);
    return 0;
}
