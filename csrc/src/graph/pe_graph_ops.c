/*
 * pe_graph_ops.c - the full operator table: every runner the runtime has.
 * The host build, the Python bindings, the C tests and the fuzzers link this
 * file; a generated firmware links its model's own table instead
 * (model/model_ops.c, written by pyembed.codegen.firmware), so that the
 * linker drops every runner and kernel its model does not call.
 */
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_fc_w16.h"

/* The runner of each operator type; NULL for a type the runtime does not
 * know. Operator families added later list theirs here (one line each). */
pe_graph_runner pe_graph_runner_for(pe_graph_op_type type)
{
    switch (type) {
    case PE_GOP_FULLY_CONNECTED:
        return pe_graph_run_fc;
    case PE_GOP_SOFTMAX:
        return pe_graph_run_softmax;
    case PE_GOP_RESHAPE:
        return pe_graph_run_reshape;
    case PE_GOP_ADD:
    case PE_GOP_MUL:
        return pe_graph_run_binary;
    case PE_GOP_REQUANTIZE:
    case PE_GOP_QUANTIZE:
    case PE_GOP_DEQUANTIZE:
        return pe_graph_run_unary;
    case PE_GOP_CONV_2D:
    case PE_GOP_DEPTHWISE_CONV_2D:
        return pe_graph_run_conv;
    case PE_GOP_AVERAGE_POOL_2D:
    case PE_GOP_MAX_POOL_2D:
        return pe_graph_run_pool;
    case PE_GOP_MEAN: case PE_GOP_SUM: case PE_GOP_LOGISTIC: case PE_GOP_TANH: /* pe_math_ops.c */
    case PE_GOP_HARD_SWISH: case PE_GOP_LEAKY_RELU: case PE_GOP_PRELU: case PE_GOP_RELU:
    case PE_GOP_RELU6: case PE_GOP_RELU_N1_TO_1: case PE_GOP_MINIMUM: case PE_GOP_MAXIMUM:
    case PE_GOP_SUB: case PE_GOP_NEG: case PE_GOP_ABS: case PE_GOP_SQUARED_DIFFERENCE:
    case PE_GOP_RSQRT: case PE_GOP_GELU: case PE_GOP_L2_NORMALIZATION:
        return pe_graph_run_math;
    case PE_GOP_EQUAL: case PE_GOP_NOT_EQUAL: case PE_GOP_GREATER: /* pe_logic.c */
    case PE_GOP_GREATER_EQUAL: case PE_GOP_LESS: case PE_GOP_LESS_EQUAL: case PE_GOP_LOGICAL_AND:
    case PE_GOP_LOGICAL_OR: case PE_GOP_LOGICAL_NOT: case PE_GOP_SELECT_V2: case PE_GOP_ARG_MAX:
    case PE_GOP_ARG_MIN: case PE_GOP_REDUCE_MAX: case PE_GOP_REDUCE_MIN:
        return pe_graph_run_logic;
    case PE_GOP_SIGNAL_WINDOW: case PE_GOP_SIGNAL_FFT_AUTO_SCALE: case PE_GOP_SIGNAL_RFFT: /* pe_signal.c */
    case PE_GOP_SIGNAL_ENERGY: case PE_GOP_SIGNAL_FILTER_BANK: case PE_GOP_SIGNAL_FILTER_BANK_SQRT:
    case PE_GOP_SIGNAL_SPECTRAL_SUBTRACTION: case PE_GOP_SIGNAL_PCAN: case PE_GOP_SIGNAL_FILTER_BANK_LOG:
    case PE_GOP_CAST: case PE_GOP_ADD_S32: case PE_GOP_MUL_S32: case PE_GOP_DIV_S32: case PE_GOP_MINIMUM_S32:
    case PE_GOP_MAXIMUM_S32: case PE_GOP_SIGNAL_DELAY:
        return pe_graph_run_signal;
    case PE_GOP_SIGNAL_FRAMER: case PE_GOP_SIGNAL_STACKER: case PE_GOP_SIGNAL_OVERLAP_ADD:
        return pe_graph_run_signal_stream;
    case PE_GOP_SIGNAL_IRFFT:
        return pe_graph_run_signal_irfft;
    case PE_GOP_SIGNAL_RFFT_S32: case PE_GOP_SIGNAL_RFFT_F32: case PE_GOP_SIGNAL_IRFFT_F32: /* pe_run_signal_fft.c */
        return pe_graph_run_signal_fft_wide;
    case PE_GOP_CONV_POOL:
        return pe_graph_run_conv_pool;
    case PE_GOP_STRIPE_REGION:
        return pe_graph_run_stripe_region;
    case PE_GOP_CONV_FC:
        return pe_graph_run_conv_fc;
    case PE_GOP_PAD:
    case PE_GOP_PADV2:
    case PE_GOP_MIRROR_PAD:
    case PE_GOP_CONCATENATION:
    case PE_GOP_SPLIT:
    case PE_GOP_SPLIT_V:
    case PE_GOP_STRIDED_SLICE:
    case PE_GOP_SLICE:
    case PE_GOP_TRANSPOSE:
    case PE_GOP_GATHER:
    case PE_GOP_DEPTH_TO_SPACE:
    case PE_GOP_SPACE_TO_DEPTH:
    case PE_GOP_SQUEEZE:
    case PE_GOP_EXPAND_DIMS:
        return pe_graph_run_shape_ops;
    case PE_GOP_RESIZE_NEAREST_NEIGHBOR:
    case PE_GOP_RESIZE_BILINEAR:
        return pe_graph_run_resize;
    case PE_GOP_BATCH_MATMUL:
        return pe_graph_run_batch_matmul;
    case PE_GOP_TRANSPOSE_CONV:
        return pe_graph_run_transpose_conv;
    case PE_GOP_DEPTHWISE_CONV_2D_S16X8: /* pe_run_s16.c */
        return pe_graph_run_depthwise_s16x8;
    case PE_GOP_AVERAGE_POOL_2D_S16: case PE_GOP_MAX_POOL_2D_S16:
        return pe_graph_run_pool_s16;
    case PE_GOP_TRANSPOSE_CONV_S16X8:
        return pe_graph_run_tconv_s16x8;
    case PE_GOP_REQUANTIZE_S16:
        return pe_graph_run_requantize_s16;
    case PE_GOP_CONV_2D_S16X8:
        return pe_graph_run_conv_s16x8;
    case PE_GOP_FULLY_CONNECTED_S16X8:
        return pe_graph_run_fc_s16x8;
    case PE_GOP_ADD_S16:
        return pe_graph_run_add_s16;
    case PE_GOP_SOFTMAX_S16:
        return pe_graph_run_softmax_s16;
    case PE_GOP_LOGISTIC_S16:
        return pe_graph_run_logistic_s16;
    case PE_GOP_TANH_S16:
        return pe_graph_run_tanh_s16;
    case PE_GOP_UNIDIRECTIONAL_SEQUENCE_LSTM:
        return pe_graph_run_lstm;
    case PE_GOP_SQUARED_DIFFERENCE_S16:
        return pe_graph_run_squared_difference_s16;
    case PE_GOP_PRELU_S16:
        return pe_graph_run_prelu_s16;
    case PE_GOP_GATHER_BATCHED:
        return pe_graph_run_gather_batched;
    case PE_GOP_REVERSE_V2:
        return pe_graph_run_reverse_v2;
    case PE_GOP_PACK:
    case PE_GOP_UNPACK:
        return pe_graph_run_pack;
    case PE_GOP_BROADCAST_TO:
        return pe_graph_run_broadcast_to;
    case PE_GOP_FILL:
    case PE_GOP_ZEROS_LIKE:
        return pe_graph_run_fill;
    case PE_GOP_SHAPE:
        return pe_graph_run_shape;
    case PE_GOP_BROADCAST_ARGS:
        return pe_graph_run_broadcast_args;
    case PE_GOP_SPACE_TO_BATCH_ND:
    case PE_GOP_BATCH_TO_SPACE_ND:
        return pe_graph_run_space_to_batch_nd;
    case PE_GOP_GATHER_ND:
        return pe_graph_run_gather_nd;
    case PE_GOP_DYNAMIC_UPDATE_SLICE:
        return pe_graph_run_dynamic_update_slice;
    case PE_GOP_SVDF:
        return pe_graph_run_svdf;
    case PE_GOP_DETECTION_POSTPROCESS:
        return pe_graph_run_detection_postprocess;
    case PE_GOP_ADD_N:
        return pe_graph_run_add_n;
    case PE_GOP_CUMSUM:
        return pe_graph_run_cumsum;
    case PE_GOP_ELU:
        return pe_graph_run_elu;
    case PE_GOP_LOG_SOFTMAX:
        return pe_graph_run_log_softmax;
    case PE_GOP_EMBEDDING_LOOKUP:
        return pe_graph_run_embedding_lookup;
    case PE_GOP_REDUCE_ALL:
        return pe_graph_run_reduce_all;
    case PE_GOP_DIV:
        return pe_graph_run_div_s8;
    case PE_GOP_CIRCULAR_BUFFER:
        return pe_graph_run_circular_buffer;
    case PE_GOP_ABS_F32: case PE_GOP_NEG_F32: case PE_GOP_CEIL: case PE_GOP_FLOOR: /* pe_run_f32.c */
    case PE_GOP_ROUND: case PE_GOP_SQRT: case PE_GOP_RSQRT_F32: case PE_GOP_SQUARE: case PE_GOP_EXP:
    case PE_GOP_LOG: case PE_GOP_SIN: case PE_GOP_COS: case PE_GOP_LOGISTIC_F32: case PE_GOP_TANH_F32:
    case PE_GOP_HARD_SWISH_F32:
        return pe_graph_run_f32_unary;
    case PE_GOP_ADD_F32: case PE_GOP_SUB_F32: case PE_GOP_MUL_F32: case PE_GOP_DIV_F32:
    case PE_GOP_MAXIMUM_F32: case PE_GOP_MINIMUM_F32: case PE_GOP_SQUARED_DIFFERENCE_F32:
    case PE_GOP_FLOOR_DIV: case PE_GOP_FLOOR_MOD:
        return pe_graph_run_f32_binary;
    case PE_GOP_CONV_2D_F32: case PE_GOP_DEPTHWISE_CONV_2D_F32: /* pe_run_f32_conv.c */
        return pe_graph_run_f32_conv;
    case PE_GOP_FULLY_CONNECTED_F32:
        return pe_graph_run_f32_fully_connected;
    case PE_GOP_AVERAGE_POOL_2D_F32: case PE_GOP_MAX_POOL_2D_F32: case PE_GOP_L2_POOL_2D:
        return pe_graph_run_f32_pool;
    case PE_GOP_SOFTMAX_F32:
        return pe_graph_run_f32_softmax;
    case PE_GOP_RESIZE_BILINEAR_F32: /* pe_run_f32_cnn.c */
        return pe_graph_run_f32_resize_bilinear;
    case PE_GOP_TRANSPOSE_CONV_F32:
        return pe_graph_run_f32_transpose_conv;
    case PE_GOP_READ_VARIABLE:
        return pe_graph_run_read_variable;
    case PE_GOP_ASSIGN_VARIABLE:
        return pe_graph_run_assign_variable;
    case PE_GOP_CALL_ONCE:
        return pe_graph_run_call_once;
    case PE_GOP_BRANCH:
        return pe_graph_run_branch;
    case PE_GOP_JUMP:
        return pe_graph_run_jump;
    case PE_GOP_CTRL_COPY:
        return pe_graph_run_ctrl_copy;
    case PE_GOP_FULLY_CONNECTED_W16:
        return pe_graph_run_fc_w16;
    case PE_GOP_DECODE:
        return pe_graph_run_decode;
    case PE_GOP_FULLY_CONNECTED_W4:
        return pe_graph_run_fc_w4;
    case PE_GOP_CONV_2D_W4:
    case PE_GOP_DEPTHWISE_CONV_2D_W4:
        return pe_graph_run_conv_w4;
    case PE_GOP_ATTENTION:
        return pe_graph_run_attention;
    case PE_GOP_LUT:
        return pe_graph_run_lut;
    case PE_GOP_LAYERNORM:
        return pe_graph_run_layernorm;
    case PE_GOP_LAYERNORM_HP:
        return pe_graph_run_layernorm_hp;
    default:
        return NULL;
    }
}


pe_graph_rows_runner pe_graph_rows_runner_for(pe_graph_op_type type)
{
    return type == PE_GOP_STRIPE_REGION ? pe_graph_run_stripe_region_rows : NULL;
}
