/*
 * pe_stripe_resize.h - the stripe executor's bilinear upsampling layer
 * (PE_STRIPE_RESIZE_BILINEAR, issue #31) and its crop layer
 * (PE_STRIPE_CROP: a split TRANSPOSE_CONV's trailing row and column),
 * private to pe_stripe.c, which
 * includes it after the functions it uses (stripe_run, in_pixel, out_slot,
 * publish; the executor's file is near its size limit).
 *
 * Output row o reads input rows y0 <= y1 (bilinear_taps, at most one
 * apart); the schedule emits o while its input row y1 arrives
 * (last_needed_row), so y0 is that row or the one before, both in the
 * layer's two-row line store (ring_rows 2, no row temporary: every input
 * column goes straight into its ring slot).
 */
#ifndef PE_STRIPE_RESIZE_H
#define PE_STRIPE_RESIZE_H

/* Output columns [x0, x1) of row o: TFLite's integer interpolation, each
 * value sum(tap * wy * wx) over the four taps with 10-fraction-bit weights,
 * rounded half away from zero at 20 bits and saturated to int8. Per axis the
 * two weights' magnitudes sum to at most 2048 (a half-pixel edge gives
 * 1536 and -512), so |sum| <= 128 * 2048 * 2048 = 2^29: int32 holds it. */
__attribute__((noinline)) static void compute_bilinear(stripe_run *R, int32_t L, int32_t o, int32_t x0, int32_t x1)
{
    const layer_geo *g = &R->G->g[L];
    const stripe_state *s = &R->st[L + 1];
    const int half = g->groups == -2;
    const int32_t c = g->out_c;
    int32_t vy, y0, y1, wy0, wy1, x, i;
    bilinear_taps(o, g->sh, half, g->in_h, &vy, &y0, &y1);
    wy1 = vy - y0 * 1024;
    wy0 = 1024 - wy1;
    for (x = x0; x < x1; x++) {
        int32_t vx, xa, xb, wx0, wx1;
        const int8_t *p00, *p01, *p10, *p11;
        int8_t *dst;
        bilinear_taps(x, g->sw, half, g->in_w, &vx, &xa, &xb);
        wx1 = vx - xa * 1024;
        wx0 = 1024 - wx1;
        p00 = in_pixel(s, g, y0, xa);
        p01 = in_pixel(s, g, y0, xb);
        p10 = in_pixel(s, g, y1, xa);
        p11 = in_pixel(s, g, y1, xb);
        dst = out_slot(R, L, o, x);
        {
            const int32_t w00 = wy0 * wx0, w01 = wy0 * wx1, w10 = wy1 * wx0, w11 = wy1 * wx1;
            for (i = 0; i < c; i++) {
                const int32_t acc = p00[i] * w00 + p01[i] * w01 + p10[i] * w10 + p11[i] * w11;
                const int32_t q = (acc + (acc > 0 ? (1 << 19) : -(1 << 19))) / (1 << 20);
                dst[i] = (int8_t)(q < -128 ? -128 : (q > 127 ? 127 : q));
            }
        }
        publish(R, L + 1, o, x, dst, c);
    }
    R->combines += (uint64_t)(x1 - x0) * (uint64_t)c;
}

/* Crop: columns [x0, x1) of row o copied from the input row of the same
 * number. The layer's output range never reaches a dropped column, and a
 * dropped row (o >= out_h) triggers no output: its columns arrive in the
 * row temporary and are let go (as a table layer's rows, no ring). */
__attribute__((noinline)) static void compute_crop(stripe_run *R, int32_t L, int32_t o, int32_t x0, int32_t x1)
{
    const layer_geo *g = &R->G->g[L];
    const stripe_state *s = &R->st[L + 1];
    const int32_t c = g->out_c;
    int32_t x;
    for (x = x0; x < x1; x++) {
        int8_t *dst = out_slot(R, L, o, x);
        memcpy(dst, in_pixel(s, g, o, x), (size_t)c);
        publish(R, L + 1, o, x, dst, c);
    }
}

/* First output column from `from` on whose upper column tap has not arrived
 * (columns [in_a, arrived) of the row have). */
__attribute__((noinline)) static int32_t bilinear_limit(const layer_geo *g, int32_t from, int32_t out_b,
                                                        int32_t arrived)
{
    int32_t x = from;
    while (x < out_b) {
        int32_t v, lo, hi;
        bilinear_taps(x, g->sw, g->groups == -2, g->in_w, &v, &lo, &hi);
        if (hi >= arrived) {
            break;
        }
        x++;
    }
    return x;
}

#endif /* PE_STRIPE_RESIZE_H */
