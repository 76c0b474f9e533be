/*
 * pe_stripe.h - row-by-row stripe execution of a chain of int8 layers with
 * line buffers (SPEC section 4). No whole feature map is ever stored.
 *
 * The network's output is cut into vertical stripes of stripe_w columns. For
 * each stripe, a backward pass over the layers computes the column range every
 * layer must produce (the stripe plus the halo its consumers' windows need,
 * clipped to the image); then the input image is fed row by row. Inside a
 * stripe:
 *  - every layer keeps a line store: a ring of the last (k_h - 1) rows of its
 *    own input (an upsampling layer keeps its one input row);
 *  - a layer's newest input row arrives in blocks of at most block_w columns
 *    into a small temporary (k_w - 1 + block_w columns); as soon as enough
 *    columns are there, the layer computes its output columns, at most block_w
 *    at a time, and hands each block to the next layer before computing more
 *    (depth-first through the layers); input columns no longer needed by the
 *    row's remaining outputs are then moved from the temporary into the ring,
 *    over the oldest row's columns, which nothing needs any more;
 *  - a residual Add keeps its own ring of the earlier layer's output rows, as
 *    many as the row schedule keeps alive at once (found by a dry run of the
 *    schedule over the image height);
 *  - the last layer writes straight into the caller's output image, only the
 *    stripe's own columns, so stripes never overlap in the output.
 * The result is bit-exact with full-frame layer-by-layer execution: every
 * value a layer computes inside its column range has its whole window present
 * (image padding is the only padding; halo columns are real values). The
 * only extra arithmetic is the halo columns of narrow stripes; one stripe as
 * wide as the output has none.
 *
 * Arithmetic (TFLite / CMSIS-NN int8, see pe_fixed.h):
 *  conv, pointwise, depthwise:
 *      acc = bias[o] + sum over in-image taps of w * (x + input_offset)
 *      out = clamp(requant(acc, multiplier[o], shift[o]) + output_offset, act)
 *    taps outside the image are skipped (the same as padding with the input
 *    zero point). Conv weights OHWI [out_c][k_h][k_w][in_c]; pointwise
 *    [out_c][in_c]; depthwise [k_h][k_w][out_c] with out_c = in_c * ch_mult and
 *    output channel o reading input channel o / ch_mult.
 *  pool: max of the in-image taps, or their sum S divided by their count n
 *    rounded to nearest with halves away from zero (padding excluded from the
 *    divisor, as CMSIS-NN arm_avgpool_s8); then clamped to act. Input and
 *    output share scale and zero point.
 *  add (TFLite ADD): a = requant((x_main + main_offset) * 2^left_shift, main_quant)
 *                    b = requant((x_branch + branch_offset) * 2^left_shift, branch_quant)
 *                    out = clamp(requant(a + b, out_quant) + output_offset, act)
 *    (a + b saturates to int32.)
 *  upsample2x: nearest neighbour, out[y][x] = in[y / 2][x / 2].
 *  resize_bilinear (factors fh = stride.h, fw = stride.w, out = in * f;
 *    add.left_shift holds its flags, as a concat's holds its order: bit 0
 *    align_corners, bit 1 half_pixel_centers, not both):
 *    TFLite's int8 RESIZE_BILINEAR, 10-fraction-bit source positions
 *    (pe_resize.h); output row y reads the two input rows y0 <= y1 <= y0 + 1
 *    around its source position, so the layer keeps a line store of two
 *    input rows and emits the output rows whose lower row just arrived.
 *  upsample (factors fh = stride.h, fw = stride.w, each >= 1): nearest
 *    neighbour, out[y][x] = in[y / fh][x / fw] (TFLite RESIZE_NEAREST_NEIGHBOR
 *    with align_corners false at an integer scale, with or without
 *    half_pixel_centers: both source index rules give y / fh there).
 *    upsample2x is upsample with fh = fw = 2.
 *  crop (out_h = in_h - padding.bottom, out_w = in_w - padding.right, each
 *    dropped count in [0, the input size - 1], the other two paddings 0):
 *    out[y][x] = in[y][x], a copy (the trailing row and column of a split
 *    TRANSPOSE_CONV whose output is not whole blocks: kernel 3, stride 2,
 *    VALID gives 2h + 1 rows of the 2h + 2 its sub-pixel phases make).
 *  depth_to_space (block b = stride.h = stride.w, in_c = b * b * out_c):
 *    out[y][x][c] = in[y / b][x / b][((y % b) * b + x % b) * out_c + c]
 *    (TFLite DEPTH_TO_SPACE). Like an upsampling it stores its one input row
 *    and emits b output rows from it; a copy, no arithmetic.
 *  table (an element-wise operator whose output depends only on the input
 *    value and its channel: an activation, a multiply or add by a constant
 *    scalar or per-channel tensor): out = table[c * 256 + x + 128], c the
 *    channel (0 for a per-tensor table). 1x1, stride 1, out_c == in_c; it
 *    runs on each block of columns as soon as its producer wrote it.
 *  concat (TFLite CONCATENATION on channels, int8, one scale and zero point):
 *    out = the previous layer's channels then layer add.from_layer's (-1: the
 *    network input), or the branch's first when add.left_shift is 1; a copy.
 *    Like an add, it keeps a ring of the branch's rows (a row-delay line).
 * Every requantization uses the layer's rounding (PE_ROUND_DOUBLE is the
 * peers' default).
 *
 * Geometry per layer (rows and columns alike), k = kernel, s = stride,
 * p_before / p_after = padding:
 *      out = floor((in + p_before + p_after - k) / s) + 1
 * with 0 <= p_before, p_after < k, so every window holds at least one image
 * pixel. Upsampling doubles both sizes. Pointwise and add have k = 1, s = 1,
 * no padding (so do table layers); upsample and depth_to_space multiply the
 * height by fh (b) and the width by fw (b). An add's two inputs must have identical
 * shapes.
 *
 * Memory: every byte (layer states, line stores, temporaries, branch stores)
 * comes from ctx->buf, whose size pe_stripe_get_buffer_size_s8 gives for the
 * network, the stripe width and the block width. The input and output images
 * are the caller's and are not counted.
 */
#ifndef PYEMBED_PE_STRIPE_H
#define PYEMBED_PE_STRIPE_H

#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Limits: a network has at most PE_STRIPE_MAX_LAYERS layers; kernels are at
 * most PE_STRIPE_MAX_KERNEL in each direction and PE_STRIPE_MAX_TAPS taps
 * (k_h * k_w; 1-D kernels of keyword-spotting models such as 10x1 or 15x1,
 * and micro_speech's 10x8, fit). Stack: the query and the run keep the
 * network's geometry on the stack, and the run recurses a few small frames
 * per layer (depth bounded by the layer count, never by the image); the
 * kernel leaf keeps three PE_STRIPE_MAX_TAPS tables (9 bytes a tap on a
 * Cortex-M) and a PE_STRIPE_MAX_KERNEL row table: a frame of about 1.2 KB;
 * arm-none-eabi-gcc -O2 -fstack-usage gives about 2.5 KB for the entry
 * points and under 0.2 KB per layer of depth. */
#define PE_STRIPE_MAX_LAYERS 32
#define PE_STRIPE_MAX_KERNEL 16
#define PE_STRIPE_MAX_TAPS 100
/* A block width above this is taken as this (a block never needs to be
 * wider than a row; the bound keeps column arithmetic inside int32). */
#define PE_STRIPE_MAX_BLOCK 65536

typedef enum {
    PE_STRIPE_CONV = 0,       /* k_h x k_w convolution, any stride */
    PE_STRIPE_DEPTHWISE = 1,  /* depthwise k_h x k_w, any stride */
    PE_STRIPE_POINTWISE = 2,  /* 1 x 1 convolution, stride 1 */
    PE_STRIPE_POOL = 3,       /* max or average pooling */
    PE_STRIPE_ADD = 4,        /* residual add of an earlier layer's output */
    PE_STRIPE_UPSAMPLE2X = 5, /* nearest-neighbour x2 upsampling */
    PE_STRIPE_CONCAT = 6,     /* channel concatenation with an earlier layer's output */
    PE_STRIPE_TABLE = 7,      /* element-wise int8 -> int8 table, per tensor or per channel */
    PE_STRIPE_UPSAMPLE = 8,   /* nearest-neighbour upsampling by integer factors (stride.h, stride.w) */
    PE_STRIPE_DEPTH_TO_SPACE = 9, /* pixel shuffle, block stride.h == stride.w */
    PE_STRIPE_SPACE_TO_DEPTH = 10, /* inverse pixel shuffle: a b x b window at stride b
                                    (kernel == stride == b, no padding), out_c = b * b * in_c */
    PE_STRIPE_RESIZE_BILINEAR = 11, /* bilinear upsampling by integer factors (stride.h, stride.w),
                                      flags in add.left_shift */
    PE_STRIPE_CROP = 12 /* the first rows and columns: padding.bottom rows and padding.right
                           columns dropped at the end */
} pe_stripe_op;

/* Largest factor of an UPSAMPLE layer and block of a DEPTH_TO_SPACE layer
 * (PE_ERR_UNSUPPORTED above). */
#define PE_STRIPE_MAX_FACTOR 64

/* Residual add parameters (TFLite ADD), also the branch of a concat
 * (from_layer; left_shift 1 = branch channels first). The main input is the previous
 * layer's output; the branch input is layer from_layer's output (-1: the
 * network input). Offsets are minus the inputs' zero points; left_shift is
 * 0..20 (TFLite uses 20 for int8). */
typedef struct {
    int32_t from_layer;
    int32_t left_shift;
    int32_t main_offset;
    pe_per_tensor_quant main_quant;
    int32_t branch_offset;
    pe_per_tensor_quant branch_quant;
    pe_per_tensor_quant out_quant;
} pe_stripe_add_params;

/* One layer. Fields a kind does not use are ignored.
 *  in_c, out_c     channels; in_c must equal the previous layer's out_c (the
 *                  network input's c for layer 0). Pool, add and upsample
 *                  have out_c == in_c; depthwise has out_c = in_c * ch_mult;
 *                  depth_to_space in_c = block * block * out_c.
 *  kernel, stride, padding   conv, depthwise, pool (ignored for pointwise,
 *                  add and upsample2x, which are 1x1, stride 1, unpadded).
 *                  upsample: stride.h, stride.w are the factors fh, fw;
 *                  depth_to_space: stride.h = stride.w is the block (both
 *                  in [1, PE_STRIPE_MAX_FACTOR], kernel and padding ignored).
 *  input_offset    -input zero point, in [-127, 128] (conv family)
 *  output_offset   output zero point, in [-128, 127] (conv family, add)
 *  activation      final clamp, -128 <= min <= max <= 127 (all but the
 *                  upsamplings and depth_to_space, plain copies)
 *  weights, bias, quant   conv family; bias may be NULL (zero); multipliers
 *                  >= 0, shifts in [-31, 30]. Pointers stay owned by the
 *                  caller (typically const data in flash).
 *  pool_kind       PE_POOL_MAX or PE_POOL_AVG
 *  add             add only
 *  dilation        conv and depthwise: taps every dilation.h rows and
 *                  dilation.w columns (TFLite's dilation factors), so the
 *                  window spans (k - 1) * d + 1 pixels, which the padding,
 *                  the line stores and PE_STRIPE_MAX_KERNEL count; 0 or 1
 *                  (a zeroed field) is no dilation; other kinds need 0 or 1.
 *  groups          conv only: a grouped convolution (TFLite's CONV_2D whose
 *                  filter has in_c / groups input channels): in_c and out_c
 *                  are multiples of groups, output channel oc reads the
 *                  input channels of its group oc / (out_c / groups), and
 *                  weights are OHWI with I = in_c / groups. 0 or 1 (a zeroed
 *                  field) is one group; other kinds need 0 or 1.
 *  table, table_channels   table only: table_channels is 1 (one table for
 *                  every channel) or in_c (one per channel); table holds
 *                  256 * table_channels int8 values, channel c's output for
 *                  input x being table[c * 256 + x + 128] (c = 0 when
 *                  table_channels is 1). */
typedef struct {
    pe_stripe_op op;
    int32_t in_c;
    int32_t out_c;
    pe_tile kernel;
    pe_tile stride;
    pe_padding padding;
    int32_t input_offset;
    int32_t output_offset;
    pe_activation activation;
    pe_rounding rounding;
    const int8_t *weights;
    const int32_t *bias;
    pe_per_channel_quant quant;
    pe_pool_kind pool_kind;
    pe_stripe_add_params add;
    const int8_t *table;
    int32_t table_channels;
    pe_tile dilation;
    int32_t groups;
} pe_stripe_layer;

/* A network: n_layers layers run in order on an input of dims input
 * (n must be 1). Static: nothing here is allocated. */
typedef struct {
    const pe_stripe_layer *layers;
    int32_t n_layers;
    pe_dims input;
} pe_stripe_net;

/* Checks the network and returns its output dims (n = 1).
 * PE_ERR_ARG: NULL pointers, n_layers outside [1, PE_STRIPE_MAX_LAYERS],
 *   input dims < 1 or n != 1, channel counts that do not chain, a layer
 *   output smaller than 1 pixel, padding outside [0, k), an add whose inputs'
 *   shapes differ or whose from_layer is not an earlier layer, parameters out
 *   of range, or a receptive field wider or taller than the input image.
 * PE_ERR_UNSUPPORTED: a kernel larger than PE_STRIPE_MAX_KERNEL or with more
 *   than PE_STRIPE_MAX_TAPS taps, a residual
 *   branch whose rows are not produced before the add needs them, or a
 *   conv-family layer whose int32 accumulator could overflow: taps * 128 * 255
 *   + |bias[o]| > 2^31 - 1 for some o, with taps = k_h * k_w * in_c (conv),
 *   k_h * k_w (depthwise), in_c (pointwise). */
pe_status pe_stripe_output_dims(const pe_stripe_net *net, pe_dims *output);

/* Arena bytes pe_stripe_run_s8 needs for this network, stripe width (output
 * columns per stripe, >= 1; wider than the output means one stripe) and block
 * width (columns a layer computes per step, >= 1). Includes up to 7 bytes of
 * alignment slack, so any ctx->buf works. PE_ERR_OVERFLOW if it exceeds
 * INT32_MAX; otherwise the statuses of pe_stripe_output_dims. */
pe_status pe_stripe_get_buffer_size_s8(const pe_stripe_net *net, int32_t stripe_w,
                                       int32_t block_w, int32_t *size);

/* Where the bytes of pe_stripe_get_buffer_size_s8 go, per layer L (arrays
 * of net->n_layers entries): ring[L] its line store (k_h - 1 input rows, one
 * row for an upsampling), temp[L] its current-row block, branch[L] the row
 * delay line of a residual add / concatenation (0 for other layers) and
 * branch_rows[L] the rows that delay line holds: 1 + the most rows the
 * branch's producer is ahead of the row the add / concatenation consumes in
 * the depth-first row schedule (the decoder's row latency + 1). *fixed gets
 * the rest (decoded per-layer states, alignment, the row buffers of the
 * streamed ends: streamed is a PE_STRIPE_STREAM_IN / PE_STRIPE_STREAM_OUT
 * mask, 1 = a streamed input), so the parts add up to the size query's total. */
pe_status pe_stripe_buffer_breakdown(const pe_stripe_net *net, int32_t stripe_w, int32_t block_w,
                                     int streamed, int32_t *ring, int32_t *temp, int32_t *branch,
                                     int32_t *branch_rows, int32_t *fixed);

/* The output of pe_stripe_run_s8 may share bytes with its input when it
 * starts at input + delta with delta <= *max_delta (bytes; negative: before
 * the input): one stripe only (stripe_w at least the output width; several
 * stripes read the input again, PE_ERR_UNSUPPORTED). Rows arrive in order,
 * each read once into the executor's own stores, and output row o is written
 * while input row last(o) -- the last row its receptive field reaches -- or
 * a later one is read; *max_delta = min over o of last(o) * input row bytes
 * - (o + 1) * output row bytes. pe_stripe_run_s8 refuses (PE_ERR_ARG) any
 * other overlap. */
pe_status pe_stripe_max_overlap_delta(const pe_stripe_net *net, int32_t stripe_w, int64_t *max_delta);

/* Multiply-accumulates a stripe run will execute (conv family taps inside the
 * image, halo columns included), predicted from the stripe geometry without
 * running anything; pe_stripe_run_s8 measures the same count in ctx->stats.
 * For planning: compare stripe widths without running them. */
pe_status pe_stripe_predict_macs(const pe_stripe_net *net, int32_t stripe_w, int64_t *macs);

/* Streamed input (a camera or sensor delivering rows): read(user, row, col,
 * n_cols, dst) writes columns [col, col + n_cols) of input row `row`
 * (n_cols * c int8 values, NHWC order) to dst and returns PE_OK; any other
 * status stops the run and is returned. With one stripe (stripe_w at least
 * the output width) the executor asks for every row exactly once, whole and
 * in order 0..h-1, so a sensor can hand rows over as it reads them out; with
 * several stripes it asks again for each stripe (that stripe's columns and
 * halo, rows in order), so the source must be able to re-read them (a frame
 * in external memory, a sensor window re-read). The image is never held in
 * ctx->buf: only one row's column range is (pe_stripe_get_buffer_size_rows_s8). */
typedef pe_status (*pe_row_read_fn)(void *user, int32_t row, int32_t col, int32_t n_cols, int8_t *dst);
typedef struct {
    pe_row_read_fn read;
    void *user;
} pe_row_source;

/* pe_stripe_get_buffer_size_s8 plus the row buffer of a streamed input. */
pe_status pe_stripe_get_buffer_size_rows_s8(const pe_stripe_net *net, int32_t stripe_w,
                                            int32_t block_w, int32_t *size);

/* pe_stripe_run_s8 with the input rows pulled from rows (see pe_row_source)
 * instead of read from an image; ctx->buf must hold
 * pe_stripe_get_buffer_size_rows_s8 bytes. Bit-exact with pe_stripe_run_s8
 * on the image the source delivers. */
pe_status pe_stripe_run_rows_s8(const pe_context *ctx, const pe_stripe_net *net, int32_t stripe_w,
                                int32_t block_w, const pe_row_source *rows, const pe_dims *output_dims,
                                int8_t *output);

/* Streamed output (a display, a DMA to the next stage): write(user, row, src,
 * n) receives output row `row` whole (n = out_w * out_c int8 values, NHWC
 * order) as soon as it is final, rows in order 0..out_h-1, each once; any
 * status other than PE_OK stops the run and is returned. src is the
 * executor's one-row buffer in ctx->buf, valid during the call only. Output
 * rows are final only when one stripe covers the output: a sink needs
 * stripe_w at least the output width (PE_ERR_UNSUPPORTED otherwise). The
 * output image is then never stored anywhere. */
typedef pe_status (*pe_row_write_fn)(void *user, int32_t row, const int8_t *src, int32_t n);
typedef struct {
    pe_row_write_fn write;
    void *user;
} pe_row_sink;

/* Which ends of a run are streamed (a bit mask): the input from a
 * pe_row_source, the output to a pe_row_sink. */
#define PE_STRIPE_STREAM_IN 1
#define PE_STRIPE_STREAM_OUT 2

/* pe_stripe_get_buffer_size_s8 plus the row buffers of the streamed ends
 * (streams: PE_STRIPE_STREAM_IN and / or PE_STRIPE_STREAM_OUT; 0 is
 * pe_stripe_get_buffer_size_s8, PE_STRIPE_STREAM_IN
 * pe_stripe_get_buffer_size_rows_s8). PE_ERR_ARG for other bits. */
pe_status pe_stripe_get_buffer_size_io_s8(const pe_stripe_net *net, int32_t stripe_w, int32_t block_w,
                                          int32_t streams, int32_t *size);

/* The general run: the input from the image input (rows NULL) or from the
 * row source rows (input NULL), the output to the image output (sink NULL)
 * or to the row sink (output NULL; stripe_w at least the output width).
 * ctx->buf must hold pe_stripe_get_buffer_size_io_s8 bytes for the streamed
 * ends. Bit-exact with pe_stripe_run_s8 on the same image. */
pe_status pe_stripe_run_io_s8(const pe_context *ctx, const pe_stripe_net *net, int32_t stripe_w,
                              int32_t block_w, const pe_dims *input_dims, const int8_t *input,
                              const pe_row_source *rows, const pe_dims *output_dims, int8_t *output,
                              const pe_row_sink *sink);

/* Memories per part: the same run with its bytes in two blocks, so a planner
 * may put them in different memories (line stores in a DTCM, temporaries in
 * SRAM, or the other way round). *lines gets the bytes of every line store
 * and delay line (the rings and branch stores of pe_stripe_buffer_breakdown,
 * + 7 bytes of alignment slack), *scratch the rest (layer states, row
 * temporaries, the row buffers of the streamed ends, + slack). */
pe_status pe_stripe_get_buffer_sizes_split_s8(const pe_stripe_net *net, int32_t stripe_w, int32_t block_w,
                                              int32_t streams, int32_t *scratch, int32_t *lines);

/* pe_stripe_run_io_s8 with the line stores in lines->buf (lines->size at
 * least the *lines of pe_stripe_get_buffer_sizes_split_s8) and the rest in
 * ctx->buf (at least its *scratch); the two blocks must not overlap
 * (PE_ERR_ARG). Bit-exact with pe_stripe_run_io_s8. */
pe_status pe_stripe_run_split_s8(const pe_context *ctx, const pe_context *lines, const pe_stripe_net *net,
                                 int32_t stripe_w, int32_t block_w, const pe_dims *input_dims, const int8_t *input,
                                 const pe_row_source *rows, const pe_dims *output_dims, int8_t *output,
                                 const pe_row_sink *sink);

/* Runs the network over input (NHWC, dims equal to net->input) in stripes and
 * writes output (NHWC, dims equal to pe_stripe_output_dims). ctx->buf must hold
 * pe_stripe_get_buffer_size_s8(net, stripe_w, block_w) bytes (PE_ERR_SCRATCH
 * otherwise). input and output must not overlap except as
 * pe_stripe_max_overlap_delta allows (PE_ERR_ARG). On any error the output
 * content is unspecified.
 * ctx->stats (optional) receives: macs (conv family multiply-accumulates),
 * combines (pool taps combined, add output elements), input_reads
 * (input elements read, once per stripe that needs them), peak_bytes (the
 * arena bytes actually touched: high-water marks of every buffer plus the
 * layer states, at most the queried size) and peak_elems (the int8
 * activation elements held in line stores, temporaries and branch stores at
 * their high-water marks). */
pe_status pe_stripe_run_s8(const pe_context *ctx, const pe_stripe_net *net, int32_t stripe_w,
                           int32_t block_w, const pe_dims *input_dims, const int8_t *input,
                           const pe_dims *output_dims, int8_t *output);

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_STRIPE_H */
