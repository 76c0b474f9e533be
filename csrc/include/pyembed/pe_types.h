/*
 * pe_types.h - the types every pyembed kernel shares.
 *
 * Conventions (read once, they hold for every public function):
 *  - Every public function returns a pe_status. Nothing aborts, nothing
 *    allocates, nothing prints.
 *  - A kernel that needs scratch memory takes a pe_context as its first
 *    argument. Its size comes from a sibling ..._get_buffer_size() query that
 *    takes only descriptors. Both ctx->buf and ctx->size are checked: a NULL
 *    buffer or a size smaller than the query's answer is PE_ERR_SCRATCH.
 *  - Argument order: context, parameter descriptors, then (dims, data)
 *    pairs for the inputs, the output last.
 *  - Tensors are NHWC, int8 activations are asymmetric (zero point carried
 *    as an offset), int8 weights are symmetric per output channel, biases
 *    are int32 with scale input_scale * weight_scale[c].
 *  - Dimensions are int32_t everywhere; nothing is narrowed to 16 bits.
 */
#ifndef PYEMBED_PE_TYPES_H
#define PYEMBED_PE_TYPES_H

#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes. Negative is an error; the Python layer maps each one to an
 * exception class in exactly one place (pyembed/errors.py). */
typedef enum {
    PE_OK = 0,
    PE_ERR_ARG = -1,         /* an argument is out of range or inconsistent */
    PE_ERR_SCRATCH = -2,     /* scratch buffer missing or smaller than queried */
    PE_ERR_UNSUPPORTED = -3, /* valid, but not implemented by this kernel */
    PE_ERR_STATE = -4,       /* call made in the wrong order (streaming APIs) */
    PE_ERR_OVERFLOW = -5     /* a size computation would overflow int32 */
} pe_status;

/* Optional work counters. Every kernel that takes a context adds what it did
 * to ctx->stats when that pointer is non-NULL; counts are measured by the
 * kernel while it runs, never derived from a formula after the fact. */
typedef struct {
    uint64_t macs;          /* multiply-accumulates actually executed */
    uint64_t combines;      /* pooling combine operations (max / add) */
    uint64_t exps;          /* exponent evaluations */
    uint64_t rescales;      /* accumulator rescales (online softmax) */
    uint64_t input_reads;   /* input elements read */
    int64_t peak_bytes;     /* peak bytes of scratch / intermediates in use */
    int64_t peak_elems;     /* peak elements of intermediate buffers in use */
} pe_stats;

/* Caller-provided scratch. size is in bytes. stats may be NULL. */
typedef struct {
    void *buf;
    int32_t size;
    pe_stats *stats;
} pe_context;

/* Tensor dimensions, NHWC. */
typedef struct {
    int32_t n;
    int32_t h;
    int32_t w;
    int32_t c;
} pe_dims;

/* A pair of sizes or steps along height and width. */
typedef struct {
    int32_t h;
    int32_t w;
} pe_tile;

/* Padding on each side separately (TFLite SAME puts the odd pixel at the
 * bottom / right; reverse pooling allows padding larger than the window). */
typedef struct {
    int32_t top;
    int32_t bottom;
    int32_t left;
    int32_t right;
} pe_padding;

/* Final clamp of an output, after the output offset has been added. */
typedef struct {
    int32_t min;
    int32_t max;
} pe_activation;

/* Per-channel requantization: real multiplier M[c] = multiplier[c] * 2^(shift[c] - 31),
 * multiplier in [2^30, 2^31) (or 0), shift positive = left. */
typedef struct {
    const int32_t *multiplier;
    const int32_t *shift;
} pe_per_channel_quant;

/* Per-tensor requantization, same encoding as one entry of the above. */
typedef struct {
    int32_t multiplier;
    int32_t shift;
} pe_per_tensor_quant;

/* Rounding of requantization. PE_ROUND_DOUBLE is the TFLite / CMSIS-NN
 * default (rounding doubling high multiply, then rounding divide by 2^-shift,
 * halves away from zero); PE_ROUND_SINGLE rounds the exact product once. */
typedef enum {
    PE_ROUND_DOUBLE = 0,
    PE_ROUND_SINGLE = 1
} pe_rounding;

/* Output-size rule for pooling / convolution (SPEC section 2). */
typedef enum {
    PE_SHAPE_FLOOR = 0,   /* floor((d + pl + pr - k_eff) / s) + 1 */
    PE_SHAPE_CEIL = 1,    /* ceil((d + pl + pr - k_eff) / s) + 1 */
    PE_SHAPE_NOPAD = 2,   /* floor((d - k_eff) / s) + 1, padding ignored */
    PE_SHAPE_EXPLICIT = 3 /* the caller gives the output size */
} pe_shape_rule;

/* Convolution parameters (standard, grouped and depthwise). */
typedef struct {
    int32_t input_offset;   /* added to each input: minus the input zero point */
    int32_t output_offset;  /* added after requantization: the output zero point */
    pe_tile stride;
    pe_padding padding;
    pe_tile dilation;
    int32_t groups;         /* standard / grouped conv: in_c / kernel_c */
    int32_t ch_mult;        /* depthwise: out_c = in_c * ch_mult */
    pe_activation activation;
    pe_rounding rounding;
} pe_conv_params;

/* Pooling parameters. */
typedef enum {
    PE_POOL_MAX = 0,
    PE_POOL_AVG = 1,
    PE_POOL_SUM = 2
} pe_pool_kind;

typedef struct {
    pe_pool_kind kind;
    pe_tile window;
    pe_tile stride;
    pe_padding padding;
    pe_activation activation;
    /* Sum pooling only: the int32 window sum is requantized with this
     * (multiplier 0 means "no requantization, clamp the sum"). */
    pe_per_tensor_quant sum_quant;
    int32_t output_offset; /* sum pooling only */
} pe_pool_params;

/* An N-D shape, outermost first: the math (broadcasting binary) and the
 * data-movement operators. */
#define PE_SHAPE_MAX_RANK 6

typedef struct {
    int32_t rank;                    /* 1 .. PE_SHAPE_MAX_RANK */
    int32_t dims[PE_SHAPE_MAX_RANK]; /* dims[0 .. rank-1] >= 1 */
} pe_shape_nd;

/* Number of elements of a valid shape into *count (PE_ERR_ARG for a rank or
 * dim out of range, PE_ERR_OVERFLOW above INT32_MAX). */
static inline pe_status pe_shape_count(const pe_shape_nd *shape, int32_t *count)
{
    int64_t n = 1;
    int32_t k;
    if (shape == NULL || count == NULL || shape->rank < 1 || shape->rank > PE_SHAPE_MAX_RANK) {
        return PE_ERR_ARG;
    }
    for (k = 0; k < shape->rank; k++) {
        if (shape->dims[k] < 1) {
            return PE_ERR_ARG;
        }
        n *= shape->dims[k];
        if (n > INT32_MAX) {
            return PE_ERR_OVERFLOW;
        }
    }
    *count = (int32_t)n;
    return PE_OK;
}

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_TYPES_H */
