/*
 * pe_stripe_copy.h - the stripe executor's copying layers: channel
 * concatenation (PE_STRIPE_CONCAT), nearest-neighbour upsampling and depth to
 * space (PE_STRIPE_UPSAMPLE2X / UPSAMPLE / DEPTH_TO_SPACE) and the
 * element-wise table (PE_STRIPE_TABLE). Private to pe_stripe.c, which
 * includes it after the functions it uses (stripe_run, in_pixel, out_slot,
 * publish; the executor's file is near its size limit).
 */
#ifndef PE_STRIPE_COPY_H
#define PE_STRIPE_COPY_H

/* Concatenation (TFLite CONCATENATION on channels, int8 with one scale and
 * zero point for inputs and output): a copy, the previous layer's channels
 * then the branch's (branch first when add.left_shift is 1). */
static void compute_concat(stripe_run *R, int32_t L, int32_t o, int32_t x0, int32_t x1)
{
    const pe_stripe_layer *l = &R->net->layers[L];
    const layer_geo *g = &R->G->g[L];
    const stripe_state *s = &R->st[L + 1];
    const int32_t cm = g->in_c;
    const int32_t cb = g->out_c - g->in_c;
    const int32_t slot = o % g->branch_rows;
    const int32_t first = l->add.left_shift ? cb : 0;   /* where the main channels go */
    const int32_t bfirst = l->add.left_shift ? 0 : cm;  /* where the branch channels go */
    int32_t x, i;
    for (x = x0; x < x1; x++) {
        const int8_t *a = in_pixel(s, g, o, x);
        const int8_t *b = s->branch + (slot * (s->out_b - s->out_a) + (x - s->out_a)) * cb;
        int8_t *dst = out_slot(R, L, o, x);
        for (i = 0; i < cm; i++) {
            dst[first + i] = a[i];
        }
        for (i = 0; i < cb; i++) {
            dst[bfirst + i] = b[i];
        }
        R->combines += (uint64_t)g->out_c;
        publish(R, L + 1, o, x, dst, g->out_c);
    }
}

/* Nearest-neighbour upsampling (fh x fw) and depth to space (block fh = fw):
 * output pixel (o, x) copies input pixel (o / fh, x / fw) of the stored row,
 * for depth to space its channels from ((o % fh) * fw + x % fw) * out_c. */
static void compute_expand(stripe_run *R, int32_t L, int32_t o, int32_t x0, int32_t x1)
{
    const layer_geo *g = &R->G->g[L];
    const stripe_state *s = &R->st[L + 1];
    const int32_t c = g->out_c;
    const int d2s = R->net->layers[L].op == PE_STRIPE_DEPTH_TO_SPACE;
    const int32_t sub_row = d2s ? (o % g->fh) * g->fw : 0;
    int32_t x, i;
    for (x = x0; x < x1; x++) {
        const int8_t *src = in_pixel(s, g, o / g->fh, x / g->fw);
        int8_t *dst = out_slot(R, L, o, x);
        if (d2s) {
            src += (sub_row + x % g->fw) * c;
        }
        for (i = 0; i < c; i++) {
            dst[i] = src[i];
        }
        publish(R, L + 1, o, x, dst, c);
    }
}

/* Element-wise table: each value of the block its producer just wrote
 * (still in this layer's temporary) looked up once into the consumer's
 * slot; no row of it is stored. */
static void compute_table(stripe_run *R, int32_t L, int32_t o, int32_t x0, int32_t x1)
{
    const pe_stripe_layer *l = &R->net->layers[L];
    const layer_geo *g = &R->G->g[L];
    const stripe_state *s = &R->st[L + 1];
    const int32_t c = g->out_c;
    const int8_t *base = l->table + 128; /* base[x] = table[x + 128] */
    int32_t x, i;
    for (x = x0; x < x1; x++) {
        const int8_t *src = in_pixel(s, g, o, x);
        int8_t *dst = out_slot(R, L, o, x);
        if (l->table_channels == 1) {
            for (i = 0; i < c; i++) {
                dst[i] = base[src[i]];
            }
        } else {
            const int8_t *t = base;
            for (i = 0; i < c; i++, t += 256) {
                dst[i] = t[src[i]];
            }
        }
        publish(R, L + 1, o, x, dst, c);
    }
    R->combines += (uint64_t)(x1 - x0) * (uint64_t)c;
}

#endif /* PE_STRIPE_COPY_H */
