# The graph runtime dispatches to every operator family, so this extension links every file in csrc/src (no pyembed-csrc line).
# cython: language_level=3, boundscheck=False, wraparound=False
"""Bindings for the C graph runtime (pe_graph.h) and the kernels it owns
(pe_fc.h, pe_eltwise.h).

CompiledGraph holds the C tensor and operator tables built from plain Python
descriptions (pyembed.model.ops builds them from a Graph and a Layout) and keeps
every array the tables point into alive. The arena is a caller-provided
uint8 array, so a simulator can pass a view into its simulated RAM.
"""
import numpy as np
cimport numpy as cnp
from cpython.mem cimport PyMem_Malloc, PyMem_Free
from libc.string cimport memset, memcpy
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uintptr_t
from pyembed._ext.pe_types cimport *

cnp.import_array()

cdef extern from "pyembed/pe_softmax.h":
    ctypedef struct pe_softmax_params:
        int32_t mult
        int32_t shift
        int32_t diff_min

cdef extern from "pyembed/pe_fc.h":
    ctypedef struct pe_fc_params:
        int32_t input_offset
        int32_t filter_offset
        int32_t output_offset
        int32_t per_channel
        pe_activation activation
        pe_rounding rounding
    pe_status pe_fully_connected_s8_get_buffer_size(const pe_dims *input_dims, const pe_dims *filter_dims,
                                                    int32_t *size) nogil
    pe_status pe_fully_connected_s8(const pe_context *ctx, const pe_fc_params *params,
                                    const pe_per_channel_quant *quant,
                                    const pe_dims *input_dims, const int8_t *input,
                                    const pe_dims *filter_dims, const int8_t *filter,
                                    const int32_t *bias, const pe_dims *output_dims, int8_t *output) nogil

    pe_status pe_fc_w16_get_buffer_sizes(const pe_dims *filter_dims, int32_t *packed_bytes,
                                         int32_t *scratch_bytes) nogil
    pe_status pe_fc_w16_pack(const pe_dims *filter_dims, const int8_t *filter, int32_t filter_offset,
                             int16_t *packed, int32_t packed_bytes) nogil

cdef extern from "pyembed/pe_fc_w4.h":
    pe_status pe_fc_w4_get_buffer_sizes(const pe_dims *filter_dims, int32_t *packed_bytes,
                                        int32_t *scratch_bytes) nogil
    pe_status pe_fc_w4_pack(const int8_t *values, int32_t count, uint8_t *packed, int32_t packed_bytes) nogil
    void pe_fc_w4_unpack(const uint8_t *packed, int32_t first, int32_t n, int8_t *dst) nogil

cdef extern from "pyembed/pe_conv_w4.h":
    pe_status pe_conv2d_w4_s8_get_buffer_size(const pe_conv_params *params, const pe_dims *input_dims,
                                              const pe_dims *filter_dims, const pe_dims *output_dims,
                                              int32_t *packed_bytes, int32_t *scratch_bytes) nogil
    pe_status pe_depthwise_conv2d_w4_s8_get_buffer_size(const pe_conv_params *params, const pe_dims *input_dims,
                                                        const pe_dims *filter_dims, const pe_dims *output_dims,
                                                        int32_t *packed_bytes, int32_t *scratch_bytes) nogil
    pe_status pe_conv2d_w4_s8_get_target_buffer_size(const pe_conv_params *params, const pe_dims *input_dims,
                                                     const pe_dims *filter_dims, const pe_dims *output_dims,
                                                     int32_t dsp, int32_t *size) nogil
    pe_status pe_depthwise_conv2d_w4_s8_get_target_buffer_size(const pe_conv_params *params,
                                                               const pe_dims *input_dims,
                                                               const pe_dims *filter_dims,
                                                               const pe_dims *output_dims, int32_t dsp,
                                                               int32_t *size) nogil

cdef extern from "pyembed/pe_eltwise.h":
    ctypedef struct pe_add_params:
        int32_t input1_offset
        int32_t input2_offset
        int32_t output_offset
        int32_t left_shift
        pe_per_tensor_quant input1_quant
        pe_per_tensor_quant input2_quant
        pe_per_tensor_quant output_quant
        pe_activation activation
        pe_rounding rounding
    ctypedef struct pe_mul_params:
        int32_t input1_offset
        int32_t input2_offset
        int32_t output_offset
        pe_per_tensor_quant output_quant
        pe_activation activation
        pe_rounding rounding
    ctypedef struct pe_requant_params:
        int32_t input_offset
        int32_t output_offset
        pe_per_tensor_quant quant
        pe_activation activation
        pe_rounding rounding
    ctypedef enum pe_float_rounding:
        PE_FROUND_AWAY
        PE_FROUND_EVEN
    ctypedef struct pe_float_quant_params:
        float scale
        int32_t zero_point
        pe_float_rounding rounding
    pe_status pe_eltwise_s8_get_buffer_size(const pe_dims *output_dims, int32_t *size) nogil
    pe_status pe_add_s8(const pe_context *ctx, const pe_add_params *params,
                        const pe_dims *d1, const int8_t *in1, const pe_dims *d2, const int8_t *in2,
                        const pe_dims *dout, int8_t *out) nogil
    pe_status pe_mul_s8(const pe_context *ctx, const pe_mul_params *params,
                        const pe_dims *d1, const int8_t *in1, const pe_dims *d2, const int8_t *in2,
                        const pe_dims *dout, int8_t *out) nogil
    pe_status pe_requantize_s8(const pe_context *ctx, const pe_requant_params *params, int32_t size,
                               const int8_t *inp, int8_t *out) nogil
    pe_status pe_quantize_f32_s8(const pe_context *ctx, const pe_float_quant_params *params, int32_t size,
                                 const float *inp, int8_t *out) nogil
    pe_status pe_dequantize_s8_f32(const pe_context *ctx, const pe_float_quant_params *params, int32_t size,
                                   const int8_t *inp, float *out) nogil

cdef extern from "pyembed/pe_conv.h":
    pe_status pe_conv2d_rev_s8_get_buffer_size(const pe_conv_params *params, const pe_dims *input_dims,
                                               const pe_dims *filter_dims, const pe_dims *output_dims,
                                               int32_t *size) nogil
    pe_status pe_conv2d_rev_s8_get_target_buffer_size(const pe_conv_params *params, const pe_dims *input_dims,
                                                      const pe_dims *filter_dims, const pe_dims *output_dims,
                                                      int32_t dsp, int32_t *size) nogil
    pe_status pe_depthwise_conv2d_rev_s8_get_buffer_size(const pe_conv_params *params,
                                                         const pe_dims *input_dims,
                                                         const pe_dims *filter_dims,
                                                         const pe_dims *output_dims, int32_t *size) nogil
    pe_status pe_depthwise_conv2d_rev_s8_get_target_buffer_size(const pe_conv_params *params,
                                                                const pe_dims *input_dims,
                                                                const pe_dims *filter_dims,
                                                                const pe_dims *output_dims,
                                                                int32_t dsp, int32_t *size) nogil

cdef extern from "pyembed/pe_conv_gather.h":
    pe_status pe_conv2d_gather_s8_get_target_buffer_size(const pe_conv_params *params, const pe_dims *input_dims,
                                                         const pe_dims *filter_dims, const pe_dims *output_dims,
                                                         int32_t dsp, int32_t *size) nogil
    pe_status pe_depthwise_conv2d_gather_s8_get_target_buffer_size(const pe_conv_params *params,
                                                                   const pe_dims *input_dims,
                                                                   const pe_dims *filter_dims,
                                                                   const pe_dims *output_dims,
                                                                   int32_t dsp, int32_t *size) nogil
    pe_status pe_conv2d_gather_s8_get_least_buffer_size(const pe_conv_params *params, const pe_dims *input_dims,
        const pe_dims *filter_dims, const pe_dims *output_dims, int32_t overlap, int32_t *size)
    pe_status pe_depthwise_conv2d_gather_s8_get_least_buffer_size(const pe_conv_params *params,
        const pe_dims *input_dims, const pe_dims *filter_dims, const pe_dims *output_dims, int32_t overlap,
        int32_t *size)

cdef extern from "pyembed/pe_pool.h":
    pe_status pe_pool_rev_get_buffer_size(const pe_pool_params *params, const pe_dims *in_dims,
                                          const pe_dims *out_dims, int32_t *size) nogil

cdef extern from "pyembed/pe_graph.h":
    ctypedef enum pe_dtype:
        PE_DT_INT8
        PE_DT_INT16
        PE_DT_INT32
        PE_DT_FLOAT32
        PE_DT_BOOL
        PE_DT_UINT32
        PE_DT_UINT64
        PE_DT_INT64
    ctypedef enum pe_graph_op_type:
        PE_GOP_CONV_2D
        PE_GOP_DEPTHWISE_CONV_2D
        PE_GOP_AVERAGE_POOL_2D
        PE_GOP_MAX_POOL_2D
        PE_GOP_FULLY_CONNECTED
        PE_GOP_SOFTMAX
        PE_GOP_RESHAPE
        PE_GOP_ADD
        PE_GOP_MUL
        PE_GOP_REQUANTIZE
        PE_GOP_QUANTIZE
        PE_GOP_DEQUANTIZE
    int PE_GRAPH_MAX_IO
    ctypedef struct pe_graph_tensor:
        const void *data
        int32_t offset
        int32_t bytes
        pe_dims dims
        pe_dtype dtype
    ctypedef struct pe_graph_quant:
        pe_per_channel_quant quant
        int32_t count
    ctypedef struct pe_graph_conv_op:
        pe_conv_params params
        pe_graph_quant quant
    ctypedef struct pe_graph_fc_op:
        pe_fc_params params
        pe_graph_quant quant
    ctypedef union pe_graph_op_params:
        pe_graph_conv_op conv
        pe_pool_params pool
        pe_graph_fc_op fc
        pe_softmax_params softmax
        pe_add_params add
        pe_mul_params mul
        pe_requant_params requant
        pe_float_quant_params fquant
    ctypedef struct pe_graph_op:
        pe_graph_op_type type
        const int32_t *inputs
        int32_t num_inputs
        const int32_t *outputs
        int32_t num_outputs
        int32_t scratch_offset
        int32_t scratch_size
        const int32_t *params
        int32_t num_params
        pe_graph_op_params p
    ctypedef struct pe_graph:
        const pe_graph_tensor *tensors
        int32_t num_tensors
        const pe_graph_op *ops
        int32_t num_ops
        int32_t arena_size
    pe_status pe_graph_check(const pe_graph *graph, int32_t *bad_op, int32_t *bad_tensor) nogil
    pe_status pe_graph_invoke_op(const pe_graph *graph, int32_t i, const pe_context *arena) nogil
    pe_status pe_graph_invoke(const pe_graph *graph, const pe_context *arena) nogil
    pe_status pe_graph_invoke_op_rows(const pe_graph *graph, int32_t i, const pe_context *arena,
                                      const pe_row_source *rows) nogil
    pe_status pe_graph_invoke_op_io(const pe_graph *graph, int32_t i, const pe_context *arena,
                                    const pe_row_source *rows, const pe_row_sink *sink) nogil
    int32_t PE_GRAPH_STREAMED


cdef extern from "pyembed/pe_stripe.h":
    ctypedef pe_status (*pe_row_read_fn)(void *user, int32_t row, int32_t col, int32_t n_cols,
                                         int8_t *dst) noexcept nogil
    ctypedef struct pe_row_source:
        pe_row_read_fn read
        void *user
    ctypedef pe_status (*pe_row_write_fn)(void *user, int32_t row, const int8_t *src, int32_t n) noexcept nogil
    ctypedef struct pe_row_sink:
        pe_row_write_fn write
        void *user


# A row source over an image held by Python (the host's stand-in for a
# camera): counts the calls and the rows that came out of order.
ctypedef struct _image_rows:
    const int8_t *data
    int32_t h, w, c
    int32_t calls, next_row, out_of_order


cdef pe_status _read_image_rows(void *user, int32_t row, int32_t col, int32_t n_cols, int8_t *dst) noexcept nogil:
    cdef _image_rows *im = <_image_rows *>user
    if row < 0 or row >= im.h or col < 0 or n_cols < 1 or col + n_cols > im.w:
        return PE_ERR_ARG
    if row != im.next_row % im.h:
        im.out_of_order += 1
    im.next_row = row + 1
    im.calls += 1
    memcpy(dst, im.data + (<size_t>row * im.w + col) * im.c, <size_t>n_cols * im.c)
    return PE_OK


# A row sink writing into an image held by Python (the host's stand-in for
# a display): counts the calls and the rows that came out of order.
ctypedef struct _image_sink:
    int8_t *data
    int32_t h, w, c
    int32_t calls, next_row, out_of_order


cdef pe_status _write_image_rows(void *user, int32_t row, const int8_t *src, int32_t n) noexcept nogil:
    cdef _image_sink *im = <_image_sink *>user
    if row < 0 or row >= im.h or n != im.w * im.c:
        return PE_ERR_ARG
    if row != im.next_row:
        im.out_of_order += 1
    im.next_row = row + 1
    im.calls += 1
    memcpy(im.data + <size_t>row * <size_t>n, src, <size_t>n)
    return PE_OK

STREAMED_OFFSET = PE_GRAPH_STREAMED


OP_CODES = {
    "CONV_2D": PE_GOP_CONV_2D,
    "DEPTHWISE_CONV_2D": PE_GOP_DEPTHWISE_CONV_2D,
    "AVERAGE_POOL_2D": PE_GOP_AVERAGE_POOL_2D,
    "MAX_POOL_2D": PE_GOP_MAX_POOL_2D,
    "FULLY_CONNECTED": PE_GOP_FULLY_CONNECTED,
    "SOFTMAX": PE_GOP_SOFTMAX,
    "RESHAPE": PE_GOP_RESHAPE,
    "ADD": PE_GOP_ADD,
    "MUL": PE_GOP_MUL,
    "REQUANTIZE": PE_GOP_REQUANTIZE,
    "QUANTIZE": PE_GOP_QUANTIZE,
    "DEQUANTIZE": PE_GOP_DEQUANTIZE,
}

DTYPE_CODES = {
    np.dtype(np.int8): PE_DT_INT8,
    np.dtype(np.int16): PE_DT_INT16,
    np.dtype(np.int32): PE_DT_INT32,
    np.dtype(np.float32): PE_DT_FLOAT32,
    np.dtype(np.bool_): PE_DT_BOOL,
    np.dtype(np.uint32): PE_DT_UINT32,   # the signal library (pe_signal.h)
    np.dtype(np.uint64): PE_DT_UINT64,
    np.dtype(np.int64): PE_DT_INT64,     # DECODE's int64 outputs (pe_decode.h)
}


cdef pe_dims _dims(object d):
    cdef pe_dims r
    r.n = <int32_t>d[0]
    r.h = <int32_t>d[1]
    r.w = <int32_t>d[2]
    r.c = <int32_t>d[3]
    return r


cdef pe_activation _act(dict p):
    cdef pe_activation a
    a.min = <int32_t>p["act_min"]
    a.max = <int32_t>p["act_max"]
    return a


cdef pe_padding _pad(object pad):
    cdef pe_padding r
    r.top = <int32_t>pad[0]
    r.bottom = <int32_t>pad[1]
    r.left = <int32_t>pad[2]
    r.right = <int32_t>pad[3]
    return r


cdef pe_per_tensor_quant _ptq(object m, object s):
    cdef pe_per_tensor_quant q
    q.multiplier = <int32_t>m
    q.shift = <int32_t>s
    return q


cdef class CompiledGraph:
    """The C tables of one graph on one arena layout.

    tensors: list of (data or None, offset, bytes, (n, h, w, c), numpy dtype)
    ops: list of dicts {kind or code, inputs, outputs, scratch_offset, scratch_size, params}; an
    operator beyond the first twelve gives its pe_graph_op_type as code and
    its parameter words as params["words"]
    """
    cdef pe_graph g
    cdef pe_graph_tensor *tensors
    cdef pe_graph_op *ops
    cdef list keep
    cdef readonly int32_t arena_size
    cdef readonly int32_t num_ops

    def __cinit__(self):
        self.tensors = NULL
        self.ops = NULL

    def __init__(self, list tensors, list ops, int32_t arena_size):
        cdef Py_ssize_t i, k
        cdef cnp.ndarray arr
        self.keep = []
        self.arena_size = arena_size
        self.tensors = <pe_graph_tensor *>PyMem_Malloc(max(1, len(tensors)) * sizeof(pe_graph_tensor))
        self.ops = <pe_graph_op *>PyMem_Malloc(max(1, len(ops)) * sizeof(pe_graph_op))
        if self.tensors == NULL or self.ops == NULL:
            raise MemoryError()
        memset(self.ops, 0, max(1, len(ops)) * sizeof(pe_graph_op))
        for i, (data, offset, nbytes, dims, dtype) in enumerate(tensors):
            self.tensors[i].dims = _dims(dims)
            self.tensors[i].dtype = DTYPE_CODES[np.dtype(dtype)]
            self.tensors[i].bytes = <int32_t>nbytes
            if data is not None:
                arr = np.ascontiguousarray(data, dtype=dtype)
                self.keep.append(arr)
                self.tensors[i].data = <const void *>cnp.PyArray_DATA(arr)
                self.tensors[i].offset = -1
            else:
                self.tensors[i].data = NULL
                self.tensors[i].offset = <int32_t>offset
        for i, spec in enumerate(ops):
            self._fill_op(&self.ops[i], spec)
        self.g.tensors = self.tensors
        self.g.num_tensors = <int32_t>len(tensors)
        self.g.ops = self.ops
        self.g.num_ops = <int32_t>len(ops)
        self.g.arena_size = arena_size
        self.num_ops = self.g.num_ops

    def __dealloc__(self):
        PyMem_Free(self.tensors)
        PyMem_Free(self.ops)

    cdef const int32_t *_ints(self, object values) except NULL:
        cdef cnp.ndarray arr = np.ascontiguousarray(np.asarray(values, dtype=np.int32).ravel())
        if arr.size == 0:
            arr = np.zeros(1, dtype=np.int32)
        self.keep.append(arr)
        return <const int32_t *>cnp.PyArray_DATA(arr)

    cdef int _fill_op(self, pe_graph_op *op, dict spec) except -1:
        cdef dict p = spec["params"]
        cdef int code = spec["code"] if "code" in spec else OP_CODES[spec["kind"]]
        cdef Py_ssize_t k
        cdef pe_rounding rnd = PE_ROUND_SINGLE if spec.get("rounding") == "single" else PE_ROUND_DOUBLE
        ins = list(spec["inputs"])
        outs = list(spec["outputs"])
        words = p.get("words", ()) if code > PE_GOP_DEQUANTIZE else ()
        op.type = <pe_graph_op_type>code
        op.inputs = self._ints(ins)
        op.num_inputs = <int32_t>len(ins)
        op.outputs = self._ints(outs)
        op.num_outputs = <int32_t>len(outs)
        op.params = self._ints(words)
        op.num_params = <int32_t>len(words)
        op.scratch_offset = <int32_t>spec["scratch_offset"]
        op.scratch_size = <int32_t>spec["scratch_size"]
        if code == PE_GOP_CONV_2D or code == PE_GOP_DEPTHWISE_CONV_2D:
            op.p.conv.params.input_offset = <int32_t>p["input_offset"]
            op.p.conv.params.output_offset = <int32_t>p["output_offset"]
            op.p.conv.params.stride.h = <int32_t>p["stride"][0]
            op.p.conv.params.stride.w = <int32_t>p["stride"][1]
            op.p.conv.params.padding = _pad(p["pad"])
            op.p.conv.params.dilation.h = <int32_t>p["dilation"][0]
            op.p.conv.params.dilation.w = <int32_t>p["dilation"][1]
            op.p.conv.params.groups = <int32_t>p.get("groups", 1)
            op.p.conv.params.ch_mult = <int32_t>p.get("depth_multiplier", 1)
            op.p.conv.params.activation = _act(p)
            op.p.conv.params.rounding = rnd
            op.p.conv.quant.quant.multiplier = self._ints(p["multiplier"])
            op.p.conv.quant.quant.shift = self._ints(p["shift"])
            op.p.conv.quant.count = <int32_t>len(p["multiplier"])
        elif code == PE_GOP_AVERAGE_POOL_2D or code == PE_GOP_MAX_POOL_2D:
            op.p.pool.kind = PE_POOL_AVG if code == PE_GOP_AVERAGE_POOL_2D else PE_POOL_MAX
            op.p.pool.window.h = <int32_t>p["filter"][0]
            op.p.pool.window.w = <int32_t>p["filter"][1]
            op.p.pool.stride.h = <int32_t>p["stride"][0]
            op.p.pool.stride.w = <int32_t>p["stride"][1]
            op.p.pool.padding = _pad(p["pad"])
            op.p.pool.activation = _act(p)
            op.p.pool.sum_quant.multiplier = 0
            op.p.pool.sum_quant.shift = 0
            op.p.pool.output_offset = 0
        elif code == PE_GOP_FULLY_CONNECTED:
            op.p.fc.params.input_offset = <int32_t>p["input_offset"]
            op.p.fc.params.filter_offset = <int32_t>p["filter_offset"]
            op.p.fc.params.output_offset = <int32_t>p["output_offset"]
            op.p.fc.params.per_channel = 1 if len(p["multiplier"]) > 1 else 0
            op.p.fc.params.activation = _act(p)
            op.p.fc.params.rounding = rnd
            op.p.fc.quant.quant.multiplier = self._ints(p["multiplier"])
            op.p.fc.quant.quant.shift = self._ints(p["shift"])
            op.p.fc.quant.count = <int32_t>len(p["multiplier"])
        elif code == PE_GOP_SOFTMAX:
            op.p.softmax.mult = <int32_t>p["input_multiplier"]
            op.p.softmax.shift = <int32_t>p["input_left_shift"]
            op.p.softmax.diff_min = <int32_t>p["diff_min"]
        elif code == PE_GOP_ADD:
            op.p.add.input1_offset = <int32_t>p["input1_offset"]
            op.p.add.input2_offset = <int32_t>p["input2_offset"]
            op.p.add.output_offset = <int32_t>p["output_offset"]
            op.p.add.left_shift = <int32_t>p["left_shift"]
            op.p.add.input1_quant = _ptq(p["input1_multiplier"], p["input1_shift"])
            op.p.add.input2_quant = _ptq(p["input2_multiplier"], p["input2_shift"])
            op.p.add.output_quant = _ptq(p["output_multiplier"], p["output_shift"])
            op.p.add.activation = _act(p)
            op.p.add.rounding = rnd
        elif code == PE_GOP_MUL:
            op.p.mul.input1_offset = <int32_t>p["input1_offset"]
            op.p.mul.input2_offset = <int32_t>p["input2_offset"]
            op.p.mul.output_offset = <int32_t>p["output_offset"]
            op.p.mul.output_quant = _ptq(p["output_multiplier"], p["output_shift"])
            op.p.mul.activation = _act(p)
            op.p.mul.rounding = rnd
        elif code == PE_GOP_REQUANTIZE:
            op.p.requant.input_offset = <int32_t>p["input_offset"]
            op.p.requant.output_offset = <int32_t>p["output_offset"]
            op.p.requant.quant = _ptq(p["multiplier"], p["shift"])
            op.p.requant.activation = _act(p)
            op.p.requant.rounding = rnd
        elif code == PE_GOP_QUANTIZE or code == PE_GOP_DEQUANTIZE:
            op.p.fquant.scale = <float>p["scale"]
            op.p.fquant.zero_point = <int32_t>p["zero_point"]
            op.p.fquant.rounding = PE_FROUND_EVEN if p.get("round_half_even") else PE_FROUND_AWAY
        return 0

    def check(self):
        """pe_graph_check: raises ArgumentError naming the first bad operator / tensor."""
        cdef int32_t bad_op = -1, bad_tensor = -1
        cdef int st
        with nogil:
            st = pe_graph_check(&self.g, &bad_op, &bad_tensor)
        check(st, "pe_graph_check", f"first bad operator {bad_op}, first bad tensor {bad_tensor}")

    def invoke_op(self, int32_t i, cnp.ndarray arena, bint stats=False, rows=None, sink=None):
        """Run table entry i on arena (uint8, C-contiguous). Returns the
        kernel counters as a dict when stats is true, else None.
        rows: the image a streamed graph input (PE_GRAPH_STREAMED) delivers
        row by row (int8 [h, w, c], C-contiguous), or None; with it the
        counters also hold row_calls (rows handed over) and
        rows_out_of_order (row requests that did not follow the previous
        one, restarting at 0 for every stripe).
        sink: an image (int8 [h, w, c], C-contiguous, writable) a streamed
        graph output is written into row by row through a pe_row_sink
        (pe_graph_invoke_op_io), or None; with it the counters also hold
        sink_calls (rows handed over) and sink_out_of_order."""
        cdef pe_context ctx
        cdef pe_stats s
        cdef int st
        cdef pe_row_source src
        cdef pe_row_sink snk
        cdef _image_rows im
        cdef _image_sink om
        cdef cnp.ndarray img, oimg
        cdef const pe_row_source *srcp = NULL
        _check_arena(arena, self.arena_size)
        memset(&s, 0, sizeof(s))
        ctx.buf = cnp.PyArray_DATA(arena)
        ctx.size = <int32_t>min(arena.shape[0], 2**31 - 1)
        ctx.stats = &s if stats else NULL
        if rows is None and sink is None:
            with nogil:
                st = pe_graph_invoke_op(&self.g, i, &ctx)
            check(st, "pe_graph_invoke_op", f"operator table entry {i}")
            return stats_to_dict(&s) if stats else None
        from pyembed.errors import ArgumentError
        memset(&im, 0, sizeof(im))
        memset(&om, 0, sizeof(om))
        if rows is not None:
            if not isinstance(rows, np.ndarray) or rows.dtype != np.int8 or rows.ndim != 3 \
                    or not rows.flags.c_contiguous:
                raise ArgumentError("rows: expected a C-contiguous int8 array [h, w, c]")
            img = rows
            im.data = <const int8_t *>cnp.PyArray_DATA(img)
            im.h, im.w, im.c = <int32_t>img.shape[0], <int32_t>img.shape[1], <int32_t>img.shape[2]
            src.read = _read_image_rows
            src.user = &im
            srcp = &src
        if sink is not None:
            if not isinstance(sink, np.ndarray) or sink.dtype != np.int8 or sink.ndim != 3 \
                    or not sink.flags.c_contiguous or not sink.flags.writeable:
                raise ArgumentError("sink: expected a writable C-contiguous int8 array [h, w, c]")
            oimg = sink
            om.data = <int8_t *>cnp.PyArray_DATA(oimg)
            om.h, om.w, om.c = <int32_t>oimg.shape[0], <int32_t>oimg.shape[1], <int32_t>oimg.shape[2]
            snk.write = _write_image_rows
            snk.user = &om
            with nogil:
                st = pe_graph_invoke_op_io(&self.g, i, &ctx, srcp, &snk)
            check(st, "pe_graph_invoke_op_io", f"operator table entry {i}")
        else:
            with nogil:
                st = pe_graph_invoke_op_rows(&self.g, i, &ctx, srcp)
            check(st, "pe_graph_invoke_op_rows", f"operator table entry {i}")
        out = stats_to_dict(&s) if stats else {}
        if rows is not None:
            out["row_calls"] = int(im.calls)
            out["rows_out_of_order"] = int(im.out_of_order)
        if sink is not None:
            out["sink_calls"] = int(om.calls)
            out["sink_out_of_order"] = int(om.out_of_order)
        return out

    def invoke(self, cnp.ndarray arena, bint stats=False):
        cdef pe_context ctx
        cdef pe_stats s
        cdef int st
        _check_arena(arena, self.arena_size)
        memset(&s, 0, sizeof(s))
        ctx.buf = cnp.PyArray_DATA(arena)
        ctx.size = <int32_t>min(arena.shape[0], 2**31 - 1)
        ctx.stats = &s if stats else NULL
        with nogil:
            st = pe_graph_invoke(&self.g, &ctx)
        check(st, "pe_graph_invoke", "")
        return stats_to_dict(&s) if stats else None


def _check_arena(object arena, int32_t size):
    from pyembed.errors import ArgumentError
    if arena.dtype != np.uint8 or arena.ndim != 1 or not arena.flags.c_contiguous:
        raise ArgumentError(f"arena: expected a 1-D C-contiguous uint8 array, got {arena.dtype} {arena.shape}")
    if not arena.flags.writeable:
        raise ArgumentError("arena: expected a writeable array")
    if arena.shape[0] < size:
        raise ArgumentError(f"arena: expected at least {size} bytes, got {arena.shape[0]}")
    if (<uintptr_t>cnp.PyArray_DATA(<cnp.ndarray>arena)) % 4 != 0:
        raise ArgumentError("arena: expected a buffer aligned to 4 bytes")


def fc_buffer_size(input_dims, filter_dims):
    cdef pe_dims a = _dims(input_dims), b = _dims(filter_dims)
    cdef int32_t size = 0
    check(pe_fully_connected_s8_get_buffer_size(&a, &b, &size), "pe_fully_connected_s8_get_buffer_size",
          f"input {tuple(input_dims)}, filter {tuple(filter_dims)}")
    return size


cdef pe_conv_params _conv_params(dict p, bint depthwise):
    cdef pe_conv_params c
    c.input_offset = <int32_t>p["input_offset"]
    c.output_offset = <int32_t>p["output_offset"]
    c.stride.h = <int32_t>p["stride"][0]
    c.stride.w = <int32_t>p["stride"][1]
    c.padding = _pad(p["pad"])
    c.dilation.h = <int32_t>p["dilation"][0]
    c.dilation.w = <int32_t>p["dilation"][1]
    c.groups = <int32_t>p.get("groups", 1)
    c.ch_mult = <int32_t>p.get("depth_multiplier", 1)
    c.activation = _act(p)
    c.rounding = PE_ROUND_DOUBLE
    return c


def conv_buffer_size(dict p, input_dims, filter_dims, output_dims, bint depthwise):
    """Scratch bytes of the reverse conv / depthwise kernel (pe_conv.h size query)."""
    cdef pe_conv_params c = _conv_params(p, depthwise)
    cdef pe_dims a = _dims(input_dims), f = _dims(filter_dims), o = _dims(output_dims)
    cdef int32_t size = 0
    if depthwise:
        check(pe_depthwise_conv2d_rev_s8_get_buffer_size(&c, &a, &f, &o, &size),
              "pe_depthwise_conv2d_rev_s8_get_buffer_size", f"{tuple(input_dims)} -> {tuple(output_dims)}")
    else:
        check(pe_conv2d_rev_s8_get_buffer_size(&c, &a, &f, &o, &size),
              "pe_conv2d_rev_s8_get_buffer_size", f"{tuple(input_dims)} -> {tuple(output_dims)}")
    return size


def conv_target_buffer_size(dict p, input_dims, filter_dims, output_dims, bint dsp,
                            bint depthwise=False):
    """Scratch bytes the reverse conv (or, depthwise True, depthwise) kernel
    of a DSP (dsp True) or a portable build runs fastest with
    (pe_conv2d_rev_s8_get_target_buffer_size /
    pe_depthwise_conv2d_rev_s8_get_target_buffer_size), on any host: what a
    firmware plan for that target gives it."""
    cdef pe_conv_params c = _conv_params(p, depthwise)
    cdef pe_dims a = _dims(input_dims), f = _dims(filter_dims), o = _dims(output_dims)
    cdef int32_t size = 0
    if depthwise:
        check(pe_depthwise_conv2d_rev_s8_get_target_buffer_size(&c, &a, &f, &o, 1 if dsp else 0, &size),
              "pe_depthwise_conv2d_rev_s8_get_target_buffer_size",
              f"{tuple(input_dims)} -> {tuple(output_dims)}")
    else:
        check(pe_conv2d_rev_s8_get_target_buffer_size(&c, &a, &f, &o, 1 if dsp else 0, &size),
              "pe_conv2d_rev_s8_get_target_buffer_size", f"{tuple(input_dims)} -> {tuple(output_dims)}")
    return size


def gather_target_buffer_size(dict p, input_dims, filter_dims, output_dims, bint dsp,
                              bint depthwise=False):
    """Work block bytes the gather conv (or, depthwise True, depthwise)
    kernel of a DSP (dsp True) or a portable build runs its loops with
    (pe_conv2d_gather_s8_get_target_buffer_size /
    pe_depthwise_conv2d_gather_s8_get_target_buffer_size), on any host: the
    scratch a firmware plan for that target gives a gather operator."""
    cdef pe_conv_params c = _conv_params(p, depthwise)
    cdef pe_dims a = _dims(input_dims), f = _dims(filter_dims), o = _dims(output_dims)
    cdef int32_t size = 0
    if depthwise:
        check(pe_depthwise_conv2d_gather_s8_get_target_buffer_size(&c, &a, &f, &o, 1 if dsp else 0, &size),
              "pe_depthwise_conv2d_gather_s8_get_target_buffer_size",
              f"{tuple(input_dims)} -> {tuple(output_dims)}")
    else:
        check(pe_conv2d_gather_s8_get_target_buffer_size(&c, &a, &f, &o, 1 if dsp else 0, &size),
              "pe_conv2d_gather_s8_get_target_buffer_size", f"{tuple(input_dims)} -> {tuple(output_dims)}")
    return size


def gather_least_buffer_size(dict p, input_dims, filter_dims, output_dims, bint overlap,
                             bint depthwise=False):
    """The least work block with which a DSP build's gather conv (or,
    depthwise True, depthwise) runs the loops it runs with the target size
    (pe_conv2d_gather_s8_get_least_buffer_size /
    pe_depthwise_conv2d_gather_s8_get_least_buffer_size; overlap True: the
    output placed over the input), on any host; 0 when none is needed or none
    up to the target helps."""
    cdef pe_conv_params c = _conv_params(p, depthwise)
    cdef pe_dims a = _dims(input_dims), f = _dims(filter_dims), o = _dims(output_dims)
    cdef int32_t size = 0
    if depthwise:
        check(pe_depthwise_conv2d_gather_s8_get_least_buffer_size(&c, &a, &f, &o, 1 if overlap else 0, &size),
              "pe_depthwise_conv2d_gather_s8_get_least_buffer_size", f"{tuple(input_dims)} -> {tuple(output_dims)}")
    else:
        check(pe_conv2d_gather_s8_get_least_buffer_size(&c, &a, &f, &o, 1 if overlap else 0, &size),
              "pe_conv2d_gather_s8_get_least_buffer_size", f"{tuple(input_dims)} -> {tuple(output_dims)}")
    return size


def pool_buffer_size(dict p, input_dims, output_dims):
    """Scratch bytes of the reverse pooling kernel (pe_pool.h size query)."""
    cdef pe_pool_params q
    cdef pe_dims a = _dims(input_dims), o = _dims(output_dims)
    cdef int32_t size = 0
    memset(&q, 0, sizeof(q))
    q.kind = PE_POOL_AVG if p["kind"] == "avg" else PE_POOL_MAX
    q.window.h = <int32_t>p["filter"][0]
    q.window.w = <int32_t>p["filter"][1]
    q.stride.h = <int32_t>p["stride"][0]
    q.stride.w = <int32_t>p["stride"][1]
    q.padding = _pad(p["pad"])
    q.activation = _act(p)
    check(pe_pool_rev_get_buffer_size(&q, &a, &o, &size), "pe_pool_rev_get_buffer_size",
          f"{tuple(input_dims)} -> {tuple(output_dims)}")
    return size


def eltwise_buffer_size(output_dims):
    cdef pe_dims a = _dims(output_dims)
    cdef int32_t size = 0
    check(pe_eltwise_s8_get_buffer_size(&a, &size), "pe_eltwise_s8_get_buffer_size", f"{tuple(output_dims)}")
    return size


def fc_w16_sizes(int32_t features, int32_t depth):
    """pe_fc_w16_get_buffer_sizes for an [features, depth] filter:
    (packed_bytes, scratch_bytes)."""
    cdef pe_dims d
    cdef int32_t pb = 0, sb = 0
    d.n = features
    d.h = 1
    d.w = 1
    d.c = depth
    check(pe_fc_w16_get_buffer_sizes(&d, &pb, &sb), "pe_fc_w16_get_buffer_sizes",
          f"filter [{features}, {depth}]")
    return pb, sb


def fc_w16_pack(const int8_t[:, ::1] w, int32_t filter_offset=0):
    """pe_fc_w16_pack: the int8 [O, K] filter plus filter_offset as the
    1-D int16 array (round4(O) * round4(K) values, 4-byte aligned) that
    pe_fully_connected_w16_s8 and the FULLY_CONNECTED@w16 operator read."""
    cdef pe_dims d
    cdef int32_t pb = 0, sb = 0
    cdef int st
    cdef cnp.ndarray buf
    cdef int16_t *dst
    cdef Py_ssize_t off
    d.n = <int32_t>w.shape[0]
    d.h = 1
    d.w = 1
    d.c = <int32_t>w.shape[1]
    check(pe_fc_w16_get_buffer_sizes(&d, &pb, &sb), "pe_fc_w16_get_buffer_sizes",
          f"filter {tuple(w.shape)}")
    # 4 spare bytes: the packed values start at a 4-byte boundary whatever numpy gives
    buf = np.zeros(pb + 4, dtype=np.uint8)
    off = <Py_ssize_t>((0 - <uintptr_t>cnp.PyArray_DATA(buf)) & 3)
    dst = <int16_t *>(<uint8_t *>cnp.PyArray_DATA(buf) + off)
    with nogil:
        st = pe_fc_w16_pack(&d, &w[0, 0], filter_offset, dst, pb)
    check(st, "pe_fc_w16_pack", f"filter {tuple(w.shape)}, filter_offset {filter_offset}")
    return buf[off:off + pb].view(np.int16)  # a view: keeps the 4-byte alignment


def fc_w4_sizes(int32_t features, int32_t depth):
    """pe_fc_w4_get_buffer_sizes for an [features, depth] filter:
    (packed_bytes, scratch_bytes)."""
    cdef pe_dims d
    cdef int32_t pb = 0, sb = 0
    d.n = features
    d.h = 1
    d.w = 1
    d.c = depth
    check(pe_fc_w4_get_buffer_sizes(&d, &pb, &sb), "pe_fc_w4_get_buffer_sizes",
          f"filter [{features}, {depth}]")
    return pb, sb


def conv_w4_sizes(words, input_shape, output_shape, bint depthwise=False, dsp=None):
    """pe_conv2d_w4_s8_get_buffer_size for a CONV_2D@w4 (its words, the NHWC
    input and output shapes), or pe_depthwise_conv2d_w4_s8_get_buffer_size
    for a DEPTHWISE_CONV_2D@w4 (depthwise=True): (packed_bytes, scratch_bytes).
    dsp 0 / 1 (or False / True): the scratch_bytes of
    pe_..._w4_s8_get_target_buffer_size for a build without / with the Arm DSP
    extension instead (any host answers for either)."""
    cdef pe_conv_params p
    cdef pe_dims i, f, o
    cdef int32_t pb = 0, sb = 0, ts = 0
    cdef pe_status st
    memset(&p, 0, sizeof(p))
    p.stride.h, p.stride.w, p.padding.top, p.padding.left = words[0], words[1], words[2], words[3]
    p.dilation.h, p.dilation.w = words[4], words[5]
    p.groups, p.ch_mult = (1, words[6]) if depthwise else (words[6], 1)
    p.input_offset, p.output_offset = words[7], words[8]
    p.activation.min, p.activation.max = words[9], words[10]
    p.rounding = PE_ROUND_SINGLE if words[11] else PE_ROUND_DOUBLE
    i.n, i.h, i.w, i.c = input_shape
    o.n, o.h, o.w, o.c = output_shape
    f.n, f.h, f.w, f.c = (1 if depthwise else o.c), words[12], words[13], words[14]
    if depthwise:
        st = pe_depthwise_conv2d_w4_s8_get_buffer_size(&p, &i, &f, &o, &pb, &sb)
    else:
        st = pe_conv2d_w4_s8_get_buffer_size(&p, &i, &f, &o, &pb, &sb)
    check(st, "pe_conv2d_w4_s8_get_buffer_size" if not depthwise else "pe_depthwise_conv2d_w4_s8_get_buffer_size",
          f"input {tuple(input_shape)}, output {tuple(output_shape)}, words {list(words[:15])}")
    if dsp is not None:
        if depthwise:
            st = pe_depthwise_conv2d_w4_s8_get_target_buffer_size(&p, &i, &f, &o, 1 if dsp else 0, &ts)
        else:
            st = pe_conv2d_w4_s8_get_target_buffer_size(&p, &i, &f, &o, 1 if dsp else 0, &ts)
        check(st, "pe_conv2d_w4_s8_get_target_buffer_size" if not depthwise else
              "pe_depthwise_conv2d_w4_s8_get_target_buffer_size",
              f"input {tuple(input_shape)}, output {tuple(output_shape)}, words {list(words[:15])}")
        sb = ts
    return pb, sb


def fc_w4_pack(const int8_t[::1] values):
    """pe_fc_w4_pack: int8 values in [-8, 7] as TFLite's packed INT4 bytes
    (element 2i in the low nibble of byte i), a uint8 array of
    ceil(n / 2) bytes."""
    cdef int32_t n = <int32_t>values.shape[0]
    cdef int st
    cdef cnp.ndarray out = np.zeros((n + 1) // 2, dtype=np.uint8)
    from pyembed.errors import ArgumentError
    if n < 1:
        raise ArgumentError("values: expected at least one int4 value")
    with nogil:
        st = pe_fc_w4_pack(&values[0], n, <uint8_t *>cnp.PyArray_DATA(out), (n + 1) // 2)
    check(st, "pe_fc_w4_pack", f"{n} values (each must be in [-8, 7])")
    return out


def fc_w4_unpack(const uint8_t[::1] packed, int32_t count):
    """pe_fc_w4_unpack: the first count int4 values of TFLite's packed
    INT4 bytes as an int8 array."""
    cdef cnp.ndarray out
    from pyembed.errors import ArgumentError
    if count < 0 or 2 * <int64_t>packed.shape[0] < count:
        raise ArgumentError(f"count: expected 0..{2 * packed.shape[0]} (two values per packed byte), got {count}")
    out = np.zeros(count, dtype=np.int8)
    if count:
        with nogil:
            pe_fc_w4_unpack(&packed[0], 0, count, <int8_t *>cnp.PyArray_DATA(out))
    return out


def fully_connected_s8(const int8_t[:, ::1] x, const int8_t[:, ::1] w, bias, multiplier, shift,
                       int32_t input_offset, int32_t filter_offset, int32_t output_offset,
                       int32_t act_min, int32_t act_max, bint single=False, bint stats=False):
    """x [batches, K], w [O, K], bias int32 [O] or None, multiplier/shift int32
    arrays of length 1 or O. Returns (out [batches, O], counters or None)."""
    cdef pe_fc_params p
    cdef pe_per_channel_quant q
    cdef pe_dims di, dw, do
    cdef pe_context ctx
    cdef pe_stats s
    cdef int st
    cdef const int32_t[::1] m = np.ascontiguousarray(multiplier, dtype=np.int32)
    cdef const int32_t[::1] sh = np.ascontiguousarray(shift, dtype=np.int32)
    cdef const int32_t[::1] b
    cdef const int32_t *bp = NULL
    if bias is not None:
        b = np.ascontiguousarray(bias, dtype=np.int32)
        bp = &b[0]
    out = np.empty((x.shape[0], w.shape[0]), dtype=np.int8)
    cdef int8_t[:, ::1] o = out
    p.input_offset = input_offset
    p.filter_offset = filter_offset
    p.output_offset = output_offset
    p.per_channel = 1 if m.shape[0] > 1 else 0
    p.activation.min = act_min
    p.activation.max = act_max
    p.rounding = PE_ROUND_SINGLE if single else PE_ROUND_DOUBLE
    q.multiplier = &m[0]
    q.shift = &sh[0]
    di.n = <int32_t>x.shape[0]; di.h = 1; di.w = 1; di.c = <int32_t>x.shape[1]
    dw.n = <int32_t>w.shape[0]; dw.h = 1; dw.w = 1; dw.c = <int32_t>w.shape[1]
    do.n = di.n; do.h = 1; do.w = 1; do.c = dw.n
    memset(&s, 0, sizeof(s))
    ctx.buf = NULL
    ctx.size = 0
    ctx.stats = &s
    with nogil:
        st = pe_fully_connected_s8(&ctx, &p, &q, &di, &x[0, 0], &dw, &w[0, 0], bp, &do, &o[0, 0])
    check(st, "pe_fully_connected_s8", "")
    return out, (stats_to_dict(&s) if stats else None)


def add_s8(const int8_t[::1] a, a_dims, const int8_t[::1] b, b_dims, out_dims, dict p, bint mul=False,
           bint single=False):
    """Element-wise ADD (or MUL) with broadcasting over 4-D NHWC dims."""
    cdef pe_add_params ap
    cdef pe_mul_params mp
    cdef pe_dims da = _dims(a_dims), db = _dims(b_dims), do = _dims(out_dims)
    cdef int st
    out = np.empty(int(np.prod(out_dims)), dtype=np.int8)
    cdef int8_t[::1] o = out
    if mul:
        mp.input1_offset = p["input1_offset"]; mp.input2_offset = p["input2_offset"]
        mp.output_offset = p["output_offset"]
        mp.output_quant = _ptq(p["output_multiplier"], p["output_shift"])
        mp.activation = _act(p)
        mp.rounding = PE_ROUND_SINGLE if single else PE_ROUND_DOUBLE
        with nogil:
            st = pe_mul_s8(NULL, &mp, &da, &a[0], &db, &b[0], &do, &o[0])
        check(st, "pe_mul_s8", "")
    else:
        ap.input1_offset = p["input1_offset"]; ap.input2_offset = p["input2_offset"]
        ap.output_offset = p["output_offset"]; ap.left_shift = p["left_shift"]
        ap.input1_quant = _ptq(p["input1_multiplier"], p["input1_shift"])
        ap.input2_quant = _ptq(p["input2_multiplier"], p["input2_shift"])
        ap.output_quant = _ptq(p["output_multiplier"], p["output_shift"])
        ap.activation = _act(p)
        ap.rounding = PE_ROUND_SINGLE if single else PE_ROUND_DOUBLE
        with nogil:
            st = pe_add_s8(NULL, &ap, &da, &a[0], &db, &b[0], &do, &o[0])
        check(st, "pe_add_s8", "")
    return out


cdef extern from "pyembed/pe_conv_fc.h":
    pe_status pe_conv_fc_get_buffer_size(const int32_t *words, int32_t num_words, const pe_dims *input_dims,
                                         const pe_dims *filter_dims, int32_t features, int32_t *size)


def conv_fc_buffer_size(const int32_t[::1] words, input_shape, filter_shape, int32_t features):
    """pe_conv_fc_get_buffer_size: the scratch of a PE_CONV_FC operator."""
    cdef pe_dims a = _dims(input_shape), f = _dims(filter_shape)
    cdef int32_t size = 0
    check(pe_conv_fc_get_buffer_size(&words[0], <int32_t>words.shape[0], &a, &f, features, &size),
          "pe_conv_fc_get_buffer_size", f"conv -> fc words, input {tuple(input_shape)}, {features} features")
    return size
