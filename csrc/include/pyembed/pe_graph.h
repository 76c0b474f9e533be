/*
 * pe_graph.h - a small static graph runtime: a constant table of tensors and
 * operators, executed in table order on one caller-provided arena.
 *
 * Everything is decided ahead of time (by pyembed's importer and planner, or
 * by an emitted C header): where each tensor lives, each operator's kernel
 * parameters and where its scratch buffer lives. The runtime only looks up
 * pointers and calls the kernels; it never allocates.
 *
 *  - A constant tensor (weights, biases, requantization tables) has data !=
 *    NULL and offset == -1: it is read in place (flash on a target).
 *  - An activation tensor has data == NULL and a byte offset into the arena.
 *    Two tensors may share bytes (RESHAPE output and input; buffers whose
 *    lifetimes do not overlap under the plan).
 *  - An operator lists its input and output tensors (any number of each;
 *    -1 for an absent optional input) and may own a scratch region [scratch_offset, +scratch_size)
 *    in the same arena (its kernel's ..._get_buffer_size() answer); -1 / 0
 *    when it needs none. It must not share a byte with any of the operator's
 *    own input or output tensors (the kernel writes it while reading the inputs
 *    and writing the output): pe_graph_check and pe_graph_invoke_op refuse
 *    such an operator with PE_ERR_ARG.
 *    CONV_2D / DEPTHWISE_CONV_2D with scratch_size 0, or a region smaller
 *    than the reverse kernel's size query answers, run the gather kernels
 *    (pe_conv_gather.h, no scratch needed, same results; a region is their
 *    work block: pe_..._gather_s8_get_target_buffer_size); with a region of
 *    at least that size they run the faster reverse kernels.
 *
 * pe_graph_check() validates the whole table once against an arena size
 * (every region inside the arena, tensor byte sizes consistent with their
 * dims and type, operator inputs and outputs of the right kind); the invoke
 * functions repeat the cheap per-operator checks so a corrupted table is an
 * error status, never an out-of-bounds access.
 *
 * The arena is a pe_context: buf and size are the arena, stats (optional)
 * receives the kernels' counters. pe_graph_invoke_op() runs one operator so a
 * simulator can charge time per operator; pe_graph_invoke() runs them all.
 */
#ifndef PYEMBED_PE_GRAPH_H
#define PYEMBED_PE_GRAPH_H

#include "pe_types.h"
#include "pe_softmax.h"
#include "pe_fc.h"
#include "pe_eltwise.h"
#include "pe_stripe.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element types a tensor may have. */
typedef enum {
    PE_DT_INT8 = 0,
    PE_DT_INT16 = 1,
    PE_DT_INT32 = 2,
    PE_DT_FLOAT32 = 3,
    PE_DT_BOOL = 4, /* one byte per element, 0 or 1 (pe_logic.h) */
    PE_DT_UINT32 = 5, /* the signal library's spectra and filter-bank channels (pe_signal.h) */
    PE_DT_UINT64 = 6,
    PE_DT_INT64 = 7 /* TFLM DECODE's int64 outputs (pe_decode.h) */
} pe_dtype;

/* Operator kinds the runtime executes. */
typedef enum {
    PE_GOP_CONV_2D = 0,
    PE_GOP_DEPTHWISE_CONV_2D = 1,
    PE_GOP_AVERAGE_POOL_2D = 2,
    PE_GOP_MAX_POOL_2D = 3,
    PE_GOP_FULLY_CONNECTED = 4,
    PE_GOP_SOFTMAX = 5,
    PE_GOP_RESHAPE = 6,
    PE_GOP_ADD = 7,
    PE_GOP_MUL = 8,
    PE_GOP_REQUANTIZE = 9, /* int8 -> int8 QUANTIZE */
    PE_GOP_QUANTIZE = 10,  /* float32 -> int8 */
    PE_GOP_DEQUANTIZE = 11, /* int8 -> float32 */
    /* data movement (pe_shape_ops.h, pe_resize.h): parameter words there */
    PE_GOP_PAD = 20,
    PE_GOP_PADV2 = 21,
    PE_GOP_MIRROR_PAD = 22,
    PE_GOP_CONCATENATION = 23,
    PE_GOP_SPLIT = 24,
    PE_GOP_SPLIT_V = 25,
    PE_GOP_STRIDED_SLICE = 26,
    PE_GOP_SLICE = 27,
    PE_GOP_TRANSPOSE = 28,
    PE_GOP_GATHER = 29,
    PE_GOP_DEPTH_TO_SPACE = 30,
    PE_GOP_SPACE_TO_DEPTH = 31,
    PE_GOP_RESIZE_NEAREST_NEIGHBOR = 32,
    PE_GOP_RESIZE_BILINEAR = 33,
    PE_GOP_SQUEEZE = 34,
    PE_GOP_EXPAND_DIMS = 35,
    /* 60-78: math operators, words and kernels in pe_math_ops.h */
    PE_GOP_MEAN = 60,
    PE_GOP_SUM = 61,
    PE_GOP_LOGISTIC = 62,
    PE_GOP_TANH = 63,
    PE_GOP_HARD_SWISH = 64,
    PE_GOP_LEAKY_RELU = 65,
    PE_GOP_PRELU = 66,
    PE_GOP_RELU = 67,
    PE_GOP_RELU6 = 68,
    PE_GOP_RELU_N1_TO_1 = 69,
    PE_GOP_MINIMUM = 70,
    PE_GOP_MAXIMUM = 71,
    PE_GOP_SUB = 72,
    PE_GOP_NEG = 73,
    PE_GOP_ABS = 74,
    PE_GOP_SQUARED_DIFFERENCE = 75,
    PE_GOP_RSQRT = 76,
    PE_GOP_GELU = 77,
    PE_GOP_L2_NORMALIZATION = 78,
    /* 80-93: comparisons, logical, select, arg / reduce max-min (pe_logic.h) */
    PE_GOP_EQUAL = 80,
    PE_GOP_NOT_EQUAL = 81,
    PE_GOP_GREATER = 82,
    PE_GOP_GREATER_EQUAL = 83,
    PE_GOP_LESS = 84,
    PE_GOP_LESS_EQUAL = 85,
    PE_GOP_LOGICAL_AND = 86,
    PE_GOP_LOGICAL_OR = 87,
    PE_GOP_LOGICAL_NOT = 88,
    PE_GOP_SELECT_V2 = 89,
    PE_GOP_ARG_MAX = 90,
    PE_GOP_ARG_MIN = 91,
    PE_GOP_REDUCE_MAX = 92,
    PE_GOP_REDUCE_MIN = 93,
    /* 94-96: resource variables and CALL_ONCE, lowered to state copies (pe_resvar.h) */
    PE_GOP_READ_VARIABLE = 94,
    PE_GOP_ASSIGN_VARIABLE = 95,
    PE_GOP_CALL_ONCE = 96,
    /* 97-99: inlined control flow, TFLite's IF and WHILE (pe_ctrlflow.h) */
    PE_GOP_BRANCH = 97,
    PE_GOP_JUMP = 98,
    PE_GOP_CTRL_COPY = 99,
    /* Operators added after the first twelve take int32 parameter words (pe_graph_op
     * .params), documented in their family's header. The values are stable
     * (emitted tables hold them) and reserved by range: 20-59 data movement,
     * 60-99 activations, element-wise and reductions, 100-139 matrix products,
     * transposed convolution, recurrent and int16 variants, 140-159 fused
     * regions (conv -> pool, stripes), 160-179 transformer blocks. */
    PE_GOP_BATCH_MATMUL = 100,     /* pe_matmul.h */
    PE_GOP_TRANSPOSE_CONV = 101,   /* pe_tconv.h */
    PE_GOP_CONV_2D_S16X8 = 102,    /* pe_s16.h */
    PE_GOP_FULLY_CONNECTED_S16X8 = 103,
    PE_GOP_ADD_S16 = 104,
    PE_GOP_SOFTMAX_S16 = 105,
    PE_GOP_LOGISTIC_S16 = 106,     /* pe_lstm.h */
    PE_GOP_TANH_S16 = 107,
    PE_GOP_UNIDIRECTIONAL_SEQUENCE_LSTM = 108,
    PE_GOP_SQUARED_DIFFERENCE_S16 = 109, /* pe_s16.h */
    PE_GOP_PRELU_S16 = 110,
    PE_GOP_GATHER_BATCHED = 111,   /* pe_gather.h */
    PE_GOP_FULLY_CONNECTED_W16 = 112, /* int16 packed weights (pe_fc_w16.h) */
    PE_GOP_FULLY_CONNECTED_W4 = 113,  /* packed int4 weights (pe_fc_w4.h, pe_graph_runners.h) */
    PE_GOP_DETECTION_POSTPROCESS = 114, /* TFLite_Detection_PostProcess, float32 (pe_detpost.h) */
    PE_GOP_DEPTHWISE_CONV_2D_S16X8 = 115, /* int16 activations (pe_s16.h) */
    PE_GOP_AVERAGE_POOL_2D_S16 = 116,
    PE_GOP_MAX_POOL_2D_S16 = 117,
    PE_GOP_CONV_2D_W4 = 118,          /* packed int4 filter (pe_conv_w4.h, pe_graph_runners.h) */
    PE_GOP_DEPTHWISE_CONV_2D_W4 = 119, /* packed int4 depthwise filter (pe_conv_w4.h) */
    PE_GOP_TRANSPOSE_CONV_S16X8 = 120, /* int16 activations (pe_s16.h) */
    PE_GOP_REQUANTIZE_S16 = 121,       /* QUANTIZE int16 -> int16 (pe_s16.h) */
    PE_GOP_DECODE = 126,        /* TFLM's DECODE: LUT / prune tensors (pe_decode.h, pe_run_decode.c) */
    PE_GOP_CONV_POOL = 140,     /* fused conv -> pool (pe_pipeline.h) */
    PE_GOP_STRIPE_REGION = 141, /* layers run in stripes with line stores (pe_pipeline.h) */
    PE_GOP_CONV_FC = 142,       /* a conv streamed into a fully connected layer (pe_conv_fc.h) */
    PE_GOP_ATTENTION = 160, /* fused multi-head attention (pe_transformer.h) */
    PE_GOP_LUT = 161,       /* int8 -> int8 through a 256-entry table (pe_transformer.h) */
    PE_GOP_LAYERNORM = 162, /* a row-wise chain (LayerNorm) run row by row (pe_layernorm.h) */
    PE_GOP_LAYERNORM_HP = 163, /* LayerNorm in integers, one rounding (pe_layernorm.h) */
    /* 180-219: the signal library (audio front end) and its integer glue (pe_signal.h) */
    PE_GOP_SIGNAL_WINDOW = 180,
    PE_GOP_SIGNAL_FFT_AUTO_SCALE = 181,
    PE_GOP_SIGNAL_RFFT = 182,
    PE_GOP_SIGNAL_ENERGY = 183,
    PE_GOP_SIGNAL_FILTER_BANK = 184,
    PE_GOP_SIGNAL_FILTER_BANK_SQRT = 185,
    PE_GOP_SIGNAL_SPECTRAL_SUBTRACTION = 186,
    PE_GOP_SIGNAL_PCAN = 187,
    PE_GOP_SIGNAL_FILTER_BANK_LOG = 188,
    PE_GOP_CAST = 189,
    PE_GOP_ADD_S32 = 190,
    PE_GOP_MUL_S32 = 191,
    PE_GOP_DIV_S32 = 192,
    PE_GOP_MINIMUM_S32 = 193,
    PE_GOP_MAXIMUM_S32 = 194,
    PE_GOP_SIGNAL_DELAY = 195,
    PE_GOP_SIGNAL_FRAMER = 196,
    PE_GOP_SIGNAL_STACKER = 197,
    PE_GOP_SIGNAL_OVERLAP_ADD = 198,
    PE_GOP_SIGNAL_IRFFT = 199,
    PE_GOP_SIGNAL_RFFT_S32 = 200,
    PE_GOP_SIGNAL_RFFT_F32 = 201,
    PE_GOP_SIGNAL_IRFFT_F32 = 202,
    /* 220-223: issue #30's third batch of TFLM operators (pe_batch3.h) */
    PE_GOP_REVERSE_V2 = 220,
    PE_GOP_PACK = 221,
    PE_GOP_UNPACK = 222,
    PE_GOP_BROADCAST_TO = 223,
    /* 224-239: issue #30's fourth batch, data movement (pe_batch4.h) */
    PE_GOP_FILL = 224,
    PE_GOP_ZEROS_LIKE = 225,
    PE_GOP_SHAPE = 226,
    PE_GOP_BROADCAST_ARGS = 227,
    PE_GOP_SPACE_TO_BATCH_ND = 228,
    PE_GOP_BATCH_TO_SPACE_ND = 229,
    PE_GOP_GATHER_ND = 230,
    PE_GOP_DYNAMIC_UPDATE_SLICE = 231,
    /* 232: SVDF, the integer form (pe_svdf.h) */
    PE_GOP_SVDF = 232,
    /* 233-234: issue #30's seventh batch (pe_batch7.h) */
    PE_GOP_DIV = 233,
    PE_GOP_CIRCULAR_BUFFER = 234,
    /* 240-259: issue #30's fifth batch, int8 arithmetic (pe_batch5.h) */
    PE_GOP_ADD_N = 240,
    PE_GOP_CUMSUM = 241,
    PE_GOP_ELU = 242,
    PE_GOP_LOG_SOFTMAX = 243,
    PE_GOP_EMBEDDING_LOOKUP = 244,
    /* 245-255: issue #30's sixth batch (pe_batch6.h) */
    PE_GOP_REDUCE_ALL = 247,
    /* 260-279: float32 element-wise operators (pe_f32.h), code 260 + pe_f32_unary_op
     * or 280 + pe_f32_binary_op; words in pe_run_f32.c */
    PE_GOP_ABS_F32 = 260,
    PE_GOP_NEG_F32 = 261,
    PE_GOP_CEIL = 262,
    PE_GOP_FLOOR = 263,
    PE_GOP_ROUND = 264,
    PE_GOP_SQRT = 265,
    PE_GOP_RSQRT_F32 = 266,
    PE_GOP_SQUARE = 267,
    PE_GOP_EXP = 268,
    PE_GOP_LOG = 269,
    PE_GOP_SIN = 270,
    PE_GOP_COS = 271,
    PE_GOP_LOGISTIC_F32 = 272,
    PE_GOP_TANH_F32 = 273,
    PE_GOP_HARD_SWISH_F32 = 274,
    PE_GOP_ADD_F32 = 280,
    PE_GOP_SUB_F32 = 281,
    PE_GOP_MUL_F32 = 282,
    PE_GOP_DIV_F32 = 283,
    PE_GOP_MAXIMUM_F32 = 284,
    PE_GOP_MINIMUM_F32 = 285,
    PE_GOP_SQUARED_DIFFERENCE_F32 = 286,
    PE_GOP_FLOOR_DIV = 287,
    PE_GOP_FLOOR_MOD = 288,
    /* 289-295: float32 convolution, pooling, fully connected, softmax
     * (pe_f32_conv.h); words in pe_run_f32_conv.c */
    PE_GOP_CONV_2D_F32 = 289,
    PE_GOP_DEPTHWISE_CONV_2D_F32 = 290,
    PE_GOP_FULLY_CONNECTED_F32 = 291,
    PE_GOP_AVERAGE_POOL_2D_F32 = 292,
    PE_GOP_MAX_POOL_2D_F32 = 293,
    PE_GOP_L2_POOL_2D = 294,
    PE_GOP_SOFTMAX_F32 = 295,
    /* 296-297: float32 RESIZE_BILINEAR and TRANSPOSE_CONV (pe_f32_cnn.h); words in
     * pe_run_f32_cnn.c */
    PE_GOP_RESIZE_BILINEAR_F32 = 296,
    PE_GOP_TRANSPOSE_CONV_F32 = 297
} pe_graph_op_type;

/* Bound on an operator's inputs or outputs (a sanity limit for the checks). */
#define PE_GRAPH_MAX_IO 64

/* Offset of a streamed graph input: an int8 tensor that is never in the
 * arena. Only a stripe region (PE_GOP_STRIPE_REGION, flagged for it) reads it,
 * pulling its rows from the pe_row_source (pe_stripe.h) given to
 * pe_graph_invoke_rows / pe_graph_invoke_op_rows; any other reader, or a
 * run without a source, is PE_ERR_ARG. The same offset marks a streamed graph
 * output: only a stripe region writes it, handing its rows to the pe_row_sink
 * given to pe_graph_invoke_io / pe_graph_invoke_op_io (any other writer, or a
 * run without a sink, is PE_ERR_ARG). */
#define PE_GRAPH_STREAMED (-2)

typedef struct {
    const void *data; /* constant: its bytes; NULL for an activation */
    int32_t offset;   /* activation: byte offset in the arena; -1 for a constant */
    int32_t bytes;    /* n * h * w * c * element size */
    pe_dims dims;     /* NHWC view; lower ranks padded with leading 1s */
    pe_dtype dtype;
} pe_graph_tensor;

/* Per-channel (conv, depthwise, per-channel FC) or per-tensor requantization:
 * count entries (1 = per tensor). */
typedef struct {
    pe_per_channel_quant quant;
    int32_t count;
} pe_graph_quant;

/* Kernel parameters of CONV_2D / DEPTHWISE_CONV_2D. */
typedef struct {
    pe_conv_params params;
    pe_graph_quant quant;
} pe_graph_conv_op;

/* Kernel parameters of FULLY_CONNECTED. */
typedef struct {
    pe_fc_params params;
    pe_graph_quant quant;
} pe_graph_fc_op;

/* Typed parameters of the first twelve operators. */
typedef union {
    pe_graph_conv_op conv;         /* CONV_2D, DEPTHWISE_CONV_2D */
    pe_pool_params pool;           /* AVERAGE_POOL_2D, MAX_POOL_2D */
    pe_graph_fc_op fc;             /* FULLY_CONNECTED */
    pe_softmax_params softmax;     /* SOFTMAX */
    pe_add_params add;             /* ADD */
    pe_mul_params mul;             /* MUL */
    pe_requant_params requant;     /* REQUANTIZE */
    pe_float_quant_params fquant;  /* QUANTIZE, DEQUANTIZE */
} pe_graph_op_params;

/* One operator. Its tensors are lists of indices into the tensor table
 * (inputs: -1 marks an absent optional input), so an operator may have any
 * number of inputs and outputs (CONCATENATION, SPLIT, LSTM).
 *
 * The first twelve operator types take typed parameters in p. Every other
 * operator takes num_params int32 words in params, laid out as its family's
 * header documents; its runner decodes and validates them (a wrong count or
 * an out-of-range value is PE_ERR_ARG), so one generic table format (and one
 * emitter) serves every operator. */
typedef struct {
    pe_graph_op_type type;
    const int32_t *inputs;  /* num_inputs tensor indices, -1 = absent */
    int32_t num_inputs;
    const int32_t *outputs; /* num_outputs tensor indices */
    int32_t num_outputs;
    int32_t scratch_offset; /* -1 = none */
    int32_t scratch_size;   /* bytes */
    const int32_t *params;  /* operator-specific words (may be NULL when num_params == 0) */
    int32_t num_params;
    pe_graph_op_params p;   /* typed parameters of the first twelve operators */
} pe_graph_op;

typedef struct {
    const pe_graph_tensor *tensors;
    int32_t num_tensors;
    const pe_graph_op *ops;
    int32_t num_ops;
    int32_t arena_size; /* bytes the arena must hold */
} pe_graph;

/* Validate the tables against arena_size. PE_ERR_ARG names nothing, so the
 * optional bad_op / bad_tensor (may be NULL) receive the first offending
 * operator / tensor index (-1 if none). */
pe_status pe_graph_check(const pe_graph *graph, int32_t *bad_op, int32_t *bad_tensor);

/* Run operator i. arena->buf must be non-NULL and arena->size >= arena_size
 * (PE_ERR_SCRATCH otherwise). Kernel statuses pass through unchanged. */
pe_status pe_graph_invoke_op(const pe_graph *graph, int32_t i, const pe_context *arena);

/* A runner: executes one operator whose tensors and scratch region were
 * checked by pe_graph_invoke_op. scratch is the operator's own region
 * (buf NULL, size 0 when it has none; stats passed through); arena is the
 * whole arena, for the tensor helpers of pe_graph_internal.h. Each operator
 * family defines pe_graph_run_<family> in its own source file. */
typedef pe_status (*pe_graph_runner)(const pe_graph *graph, const pe_graph_op *op,
                                     const pe_context *scratch, const pe_context *arena);

/* The table entry to run after entry i (which has just run): i + 1, except
 * after a control flow operator (pe_ctrlflow.h): a JUMP's target, a BRANCH's
 * target when its condition is false. *next == num_ops ends the invoke.
 * Every loop that steps through a table with pe_graph_invoke_op must follow
 * it (a table without control flow always gets i + 1). */
pe_status pe_graph_next(const pe_graph *graph, int32_t i, const pe_context *arena, int32_t *next);

/* Run every operator in order (following pe_graph_next); stops at the first
 * error and returns it (step with pe_graph_invoke_op to learn which operator
 * failed). */
pe_status pe_graph_invoke(const pe_graph *graph, const pe_context *arena);

/* pe_graph_invoke_op / pe_graph_invoke for a graph whose input is streamed
 * (PE_GRAPH_STREAMED): the stripe region reading it pulls its rows from rows
 * (NULL: as pe_graph_invoke_op). The other operators run as usual. */
pe_status pe_graph_invoke_op_rows(const pe_graph *graph, int32_t i, const pe_context *arena,
                                  const pe_row_source *rows);
pe_status pe_graph_invoke_rows(const pe_graph *graph, const pe_context *arena, const pe_row_source *rows);

/* The same for a graph whose input and / or output is streamed: a streamed
 * output (offset PE_GRAPH_STREAMED, written by a stripe region flagged for
 * it) is never in the arena; the region hands each output row, whole and in
 * order, to sink as soon as it is final (pe_row_sink, pe_stripe.h). rows or
 * sink may be NULL when the graph has no such end. */
pe_status pe_graph_invoke_op_io(const pe_graph *graph, int32_t i, const pe_context *arena,
                                const pe_row_source *rows, const pe_row_sink *sink);
pe_status pe_graph_invoke_io(const pe_graph *graph, const pe_context *arena, const pe_row_source *rows,
                             const pe_row_sink *sink);

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_GRAPH_H */
