/*
 * fuzz_fc_w4.c - libFuzzer harness for the int8 fully connected layer on
 * packed int4 weights (pe_fc_w4.h).
 *
 * The packed bytes are any bytes of the input (every nibble is a valid int4
 * value). The reference is written here: each weight read from its nibble
 * (element e in byte e / 2, low nibble for even e, sign-extended), an int64
 * dot product, the bias added with int32 saturation, requantized, offset and
 * clamped. pe_fully_connected_w4_s8 must equal it bit for bit from an
 * exact-size, poisoned, possibly misaligned scratch; a scratch one byte short
 * must be PE_ERR_SCRATCH and leave the output untouched; parameters the
 * int8 kernel refuses (a wild draw now and then) must be refused too, with
 * the same status.
 */
#include "fuzz_common.h"
#include "pyembed/pe_fc.h"
#include "pyembed/pe_fc_w4.h"

#define MAX_FEATURES 20
#define MAX_DEPTH 1100
#define MAX_BATCHES 3

static int32_t clamp32(int64_t v, int64_t lo, int64_t hi)
{
    return (int32_t)(v < lo ? lo : (v > hi ? hi : v));
}

static int32_t nibble_at(const uint8_t *packed, int64_t e)
{
    const int32_t v = (packed[e / 2] >> ((e & 1) ? 4 : 0)) & 15;
    return v >= 8 ? v - 16 : v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size_in);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size_in)
{
    fz_reader r = {data, size_in};
    int32_t m[MAX_FEATURES], s[MAX_FEATURES], bias[MAX_FEATURES];
    int32_t batches, depth, features, pbytes = 0, sbytes = 0, with_bias, misalign, b, o, k, qc;
    int8_t *x, *want, *got, *w8;
    uint8_t *packed, *scratch;
    pe_dims in, f, out;
    pe_fc_params p;
    pe_per_channel_quant q;
    pe_context ctx;
    pe_status st, st8;

    batches = fz_range(&r, 1, MAX_BATCHES);
    depth = fz_range(&r, 0, 3) == 3 ? fz_range(&r, 1, MAX_DEPTH) : fz_range(&r, 1, 40);
    features = fz_range(&r, 1, MAX_FEATURES);
    in.n = batches;
    in.h = 1;
    in.w = 1;
    in.c = depth;
    f.n = features;
    f.h = 1;
    f.w = 1;
    f.c = depth;
    out.n = batches;
    out.h = 1;
    out.w = 1;
    out.c = features;
    if (pe_fc_w4_get_buffer_sizes(&f, &pbytes, &sbytes) != PE_OK) {
        FZ_FAIL("size query refused [%d, %d]", (int)features, (int)depth);
    }
    p.input_offset = fz_wild(&r, -128, 127);
    p.filter_offset = 0;
    p.output_offset = fz_wild(&r, -128, 127);
    p.per_channel = fz_bool(&r);
    p.activation.min = fz_range(&r, -128, 0);
    p.activation.max = fz_range(&r, p.activation.min, 127);
    p.rounding = fz_bool(&r) ? PE_ROUND_SINGLE : PE_ROUND_DOUBLE;
    qc = p.per_channel ? features : 1;
    for (o = 0; o < features; o++) {
        m[o] = fz_wild(&r, 1 << 30, 0x7FFFFFFF);
        s[o] = fz_range(&r, -14, 1);
        bias[o] = fz_range(&r, -40000, 40000);
    }
    with_bias = fz_bool(&r);
    misalign = fz_range(&r, 0, 3);
    q.multiplier = m;
    q.shift = s;

    x = (int8_t *)fz_alloc((size_t)batches * (size_t)depth);
    packed = (uint8_t *)fz_alloc((size_t)pbytes);
    w8 = (int8_t *)fz_alloc((size_t)features * (size_t)depth);
    want = (int8_t *)fz_alloc((size_t)batches * (size_t)features);
    got = (int8_t *)fz_alloc((size_t)batches * (size_t)features);
    scratch = (uint8_t *)fz_alloc((size_t)sbytes + (size_t)misalign);
    fz_fill_s8(&r, x, (size_t)batches * (size_t)depth);
    fz_fill_s8(&r, (int8_t *)packed, (size_t)pbytes);
    for (k = 0; k < features * depth; k++) {
        w8[k] = (int8_t)nibble_at(packed, k);
    }
    if (fz_verbose()) {
        fprintf(stderr, "case: batches %d depth %d features %d per_channel %d bias %d rounding %d\n",
                (int)batches, (int)depth, (int)features, (int)p.per_channel, (int)with_bias, (int)p.rounding);
    }

    /* the int8 kernel's verdict on the parameters is the reference's */
    st8 = pe_fully_connected_s8(NULL, &p, &q, &in, x, &f, w8, with_bias ? bias : NULL, &out, want);
    fz_poison(scratch, (size_t)sbytes + (size_t)misalign);
    ctx.buf = scratch + misalign;
    ctx.size = sbytes;
    ctx.stats = NULL;
    memset(got, 0x3C, (size_t)batches * (size_t)features);
    st = pe_fully_connected_w4_s8(&ctx, &p, &q, &in, x, &f, packed, with_bias ? bias : NULL, &out, got);
    FZ_CHECK(st == st8, "status %d, the int8 kernel's %d", st, st8);
    if (st == PE_OK) {
        for (b = 0; b < batches; b++) {
            for (o = 0; o < features; o++) {
                const int32_t qi = p.per_channel ? o : 0;
                int64_t dot = 0;
                int32_t acc, v;
                for (k = 0; k < depth; k++) {
                    dot += (int64_t)(x[b * depth + k] + p.input_offset) *
                           nibble_at(packed, (int64_t)o * depth + k);
                }
                acc = clamp32(dot + (with_bias ? bias[o] : 0), INT32_MIN, INT32_MAX);
                v = fz_requant(acc, m[qi], s[qi], p.rounding == PE_ROUND_SINGLE);
                v = clamp32((int64_t)clamp32(v, INT32_MIN + 128, INT32_MAX - 128) + p.output_offset,
                            p.activation.min, p.activation.max);
                want[b * features + o] = (int8_t)v;
            }
        }
        FZ_CHECK(fz_compare_s8("fc_w4", got, want, (size_t)batches * (size_t)features), "output differs");
        /* one byte short: refused, output untouched */
        memset(got, 0x3C, (size_t)batches * (size_t)features);
        ctx.size = sbytes - 1;
        st = pe_fully_connected_w4_s8(&ctx, &p, &q, &in, x, &f, packed, with_bias ? bias : NULL, &out, got);
        FZ_CHECK(st == PE_ERR_SCRATCH, "scratch one byte short: status %d", st);
        for (k = 0; k < batches * features; k++) {
            FZ_CHECK(got[k] == 0x3C, "scratch one byte short: output %d written", (int)k);
        }
    }
    (void)qc;
    free(x);
    free(packed);
    free(w8);
    free(want);
    free(got);
    free(scratch);
    return 0;
}
