# pyembed-csrc: pe_stripe.c pe_stripe_kinds.c pe_stripe_plan.c pe_pipeline.c pe_fused.c pe_conv_rev.c pe_conv_rev_whole.c pe_conv_check.c pe_conv_dsp.c pe_conv_dsp_pw.c pe_conv_gather.c pe_dw3_dsp.c pe_pool_rev.c pe_pool_scatter.c pe_eltwise.c
# cython: language_level=3, boundscheck=False, wraparound=False
"""Bindings for the stripe executor (pe_stripe.h).

``Network(specs, h, w, c)`` builds the static C network descriptor from a list
of plain dicts (one per layer, produced and validated by pyembed.kernels.stripe) and
keeps the weight arrays it points into alive. The Python layer is the public
API.
"""
import numpy as np
cimport numpy as cnp
from cpython.mem cimport PyMem_Malloc, PyMem_Free
from libc.string cimport memset
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t
from pyembed._ext.pe_types cimport *

cnp.import_array()

cdef extern from "pyembed/pe_stripe.h":
    int PE_STRIPE_MAX_LAYERS
    int PE_STRIPE_MAX_KERNEL
    int PE_STRIPE_MAX_TAPS

    ctypedef enum pe_stripe_op:
        PE_STRIPE_CONV
        PE_STRIPE_DEPTHWISE
        PE_STRIPE_POINTWISE
        PE_STRIPE_POOL
        PE_STRIPE_ADD
        PE_STRIPE_UPSAMPLE2X
        PE_STRIPE_CONCAT
        PE_STRIPE_TABLE
        PE_STRIPE_UPSAMPLE
        PE_STRIPE_DEPTH_TO_SPACE
        PE_STRIPE_SPACE_TO_DEPTH
        PE_STRIPE_RESIZE_BILINEAR
        PE_STRIPE_CROP

    ctypedef struct pe_stripe_add_params:
        int32_t from_layer
        int32_t left_shift
        int32_t main_offset
        pe_per_tensor_quant main_quant
        int32_t branch_offset
        pe_per_tensor_quant branch_quant
        pe_per_tensor_quant out_quant

    ctypedef struct pe_stripe_layer:
        pe_stripe_op op
        int32_t in_c
        int32_t out_c
        pe_tile kernel
        pe_tile stride
        pe_padding padding
        int32_t input_offset
        int32_t output_offset
        pe_activation activation
        pe_rounding rounding
        const int8_t *weights
        const int32_t *bias
        pe_per_channel_quant quant
        pe_pool_kind pool_kind
        pe_stripe_add_params add
        const int8_t *table
        int32_t table_channels
        pe_tile dilation
        int32_t groups

    ctypedef struct pe_stripe_net:
        const pe_stripe_layer *layers
        int32_t n_layers
        pe_dims input

    pe_status pe_stripe_output_dims(const pe_stripe_net *net, pe_dims *output) nogil
    pe_status pe_stripe_get_buffer_size_rows_s8(const pe_stripe_net *net, int32_t stripe_w,
                                                int32_t block_w, int32_t *size) nogil
    pe_status pe_stripe_get_buffer_size_io_s8(const pe_stripe_net *net, int32_t stripe_w, int32_t block_w,
                                              int32_t streams, int32_t *size) nogil
    pe_status pe_stripe_get_buffer_sizes_split_s8(const pe_stripe_net *net, int32_t stripe_w, int32_t block_w,
                                                  int32_t streams, int32_t *scratch, int32_t *lines) nogil
    pe_status pe_stripe_get_buffer_size_s8(const pe_stripe_net *net, int32_t stripe_w,
                                           int32_t block_w, int32_t *size) nogil
    pe_status pe_stripe_buffer_breakdown(const pe_stripe_net *net, int32_t stripe_w, int32_t block_w,
                                         int streamed, int32_t *ring, int32_t *temp, int32_t *branch,
                                         int32_t *branch_rows, int32_t *fixed) nogil
    pe_status pe_stripe_max_overlap_delta(const pe_stripe_net *net, int32_t stripe_w,
                                          int64_t *max_delta) nogil
    pe_status pe_stripe_predict_macs(const pe_stripe_net *net, int32_t stripe_w,
                                     int64_t *macs) nogil
    pe_status pe_stripe_run_s8(const pe_context *ctx, const pe_stripe_net *net,
                               int32_t stripe_w, int32_t block_w, const pe_dims *input_dims,
                               const int8_t *input, const pe_dims *output_dims,
                               int8_t *output) nogil

MAX_LAYERS = PE_STRIPE_MAX_LAYERS
MAX_KERNEL = PE_STRIPE_MAX_KERNEL
MAX_TAPS = PE_STRIPE_MAX_TAPS
# bytes of one decoded layer in a stripe region's scratch table (pe_pipeline.h;
# host pointers are at least as wide as a Cortex-M's, so the host figure is safe)
LAYER_BYTES = sizeof(pe_stripe_layer)

OPS = {
    "conv": PE_STRIPE_CONV,
    "depthwise": PE_STRIPE_DEPTHWISE,
    "pointwise": PE_STRIPE_POINTWISE,
    "pool": PE_STRIPE_POOL,
    "add": PE_STRIPE_ADD,
    "upsample2x": PE_STRIPE_UPSAMPLE2X,
    "concat": PE_STRIPE_CONCAT,
    "table": PE_STRIPE_TABLE,
    "upsample": PE_STRIPE_UPSAMPLE,
    "depth_to_space": PE_STRIPE_DEPTH_TO_SPACE,
    "space_to_depth": PE_STRIPE_SPACE_TO_DEPTH,
    "resize_bilinear": PE_STRIPE_RESIZE_BILINEAR,
    "crop": PE_STRIPE_CROP,
}

_NET_DETAIL = ("network rejected: channels must chain, padding in [0, kernel), add inputs of "
               "equal shape from an earlier layer, receptive field within the image, "
               "parameters in range")


cdef const int8_t *_i8(list keep, object a) except? NULL:
    cdef const int8_t[::1] v = np.ascontiguousarray(a, dtype=np.int8).ravel()
    keep.append(v)
    return &v[0]


cdef const int32_t *_i32(list keep, object a) except? NULL:
    cdef const int32_t[::1] v = np.ascontiguousarray(a, dtype=np.int32).ravel()
    keep.append(v)
    return &v[0]


cdef class Network:
    cdef pe_stripe_layer *layers
    cdef pe_stripe_net net
    cdef list keep

    def __cinit__(self):
        self.layers = NULL

    def __init__(self, list specs, int32_t h, int32_t w, int32_t c):
        cdef Py_ssize_t i, n = len(specs)
        cdef pe_stripe_layer *l
        if n < 1 or n > PE_STRIPE_MAX_LAYERS:
            raise ValueError(f"expected 1..{PE_STRIPE_MAX_LAYERS} layers, got {n}")
        self.keep = []
        self.layers = <pe_stripe_layer *>PyMem_Malloc(n * sizeof(pe_stripe_layer))
        if self.layers == NULL:
            raise MemoryError()
        memset(self.layers, 0, n * sizeof(pe_stripe_layer))
        for i in range(n):
            s = specs[i]
            l = &self.layers[i]
            l.op = OPS[s["op"]]
            l.in_c = s["in_c"]
            l.out_c = s["out_c"]
            l.kernel.h, l.kernel.w = s.get("kernel", (1, 1))
            l.stride.h, l.stride.w = s.get("stride", (1, 1))
            l.dilation.h, l.dilation.w = s.get("dilation", (1, 1))
            l.groups = s.get("groups", 1)
            l.padding.top, l.padding.bottom, l.padding.left, l.padding.right = s.get("padding", (0, 0, 0, 0))
            l.input_offset = s.get("input_offset", 0)
            l.output_offset = s.get("output_offset", 0)
            l.activation.min = s.get("act_min", -128)
            l.activation.max = s.get("act_max", 127)
            l.rounding = PE_ROUND_SINGLE if s.get("rounding", "double") == "single" else PE_ROUND_DOUBLE
            if "weights" in s:
                l.weights = _i8(self.keep, s["weights"])
                l.bias = _i32(self.keep, s["bias"])
                l.quant.multiplier = _i32(self.keep, s["multiplier"])
                l.quant.shift = _i32(self.keep, s["shift"])
            l.pool_kind = PE_POOL_AVG if s.get("pool_kind") == "avg" else PE_POOL_MAX
            if s["op"] == "add":
                l.add.from_layer = s["from_layer"]
                l.add.left_shift = s["left_shift"]
                l.add.main_offset = s["main_offset"]
                l.add.main_quant.multiplier, l.add.main_quant.shift = s["main_quant"]
                l.add.branch_offset = s["branch_offset"]
                l.add.branch_quant.multiplier, l.add.branch_quant.shift = s["branch_quant"]
                l.add.out_quant.multiplier, l.add.out_quant.shift = s["out_quant"]
            elif s["op"] == "concat":
                l.add.from_layer = s["from_layer"]
                l.add.left_shift = s["branch_first"]
            elif s["op"] == "resize_bilinear":   # pe_stripe.h: its flags in add.left_shift
                l.add.left_shift = s["resize_flags"]
            elif s["op"] == "table":
                l.table = _i8(self.keep, s["table"])
                l.table_channels = s["table_channels"]
        self.net.layers = self.layers
        self.net.n_layers = <int32_t>n
        self.net.input.n = 1
        self.net.input.h = h
        self.net.input.w = w
        self.net.input.c = c

    def __dealloc__(self):
        if self.layers != NULL:
            PyMem_Free(self.layers)

    def output_shape(self):
        cdef pe_dims d
        cdef int st
        with nogil:
            st = pe_stripe_output_dims(&self.net, &d)
        check(st, "pe_stripe_output_dims", _NET_DETAIL)
        return (d.h, d.w, d.c)

    def buffer_size(self, int32_t stripe_w, int32_t block_w, bint streamed=False, bint streamed_out=False):
        """Arena bytes of a run (streamed: with the row buffer of an input
        pulled from a row source, pe_stripe_get_buffer_size_rows_s8;
        streamed_out: with the one-row buffer of an output handed to a row
        sink, pe_stripe_get_buffer_size_io_s8)."""
        cdef int32_t size = 0
        cdef int st
        cdef int32_t streams = (1 if streamed else 0) | (2 if streamed_out else 0)
        with nogil:
            if streamed_out:
                st = pe_stripe_get_buffer_size_io_s8(&self.net, stripe_w, block_w, streams, &size)
            elif streamed:
                st = pe_stripe_get_buffer_size_rows_s8(&self.net, stripe_w, block_w, &size)
            else:
                st = pe_stripe_get_buffer_size_s8(&self.net, stripe_w, block_w, &size)
        check(st, "pe_stripe_get_buffer_size_s8",
              "stripe_w and block_w must be >= 1; " + _NET_DETAIL)
        return size

    def buffer_sizes_split(self, int32_t stripe_w, int32_t block_w, bint streamed=False, bint streamed_out=False):
        """(scratch, lines): the bytes of a run with its line stores and delay
        lines in a block of their own (pe_stripe_get_buffer_sizes_split_s8),
        lines that block, scratch the rest."""
        cdef int32_t scratch = 0, lines = 0
        cdef int st
        cdef int32_t streams = (1 if streamed else 0) | (2 if streamed_out else 0)
        with nogil:
            st = pe_stripe_get_buffer_sizes_split_s8(&self.net, stripe_w, block_w, streams, &scratch, &lines)
        check(st, "pe_stripe_get_buffer_sizes_split_s8", "stripe_w and block_w must be >= 1; " + _NET_DETAIL)
        return int(scratch), int(lines)

    def buffer_breakdown(self, int32_t stripe_w, int32_t block_w, bint streamed=False, bint streamed_out=False):
        """Where buffer_size's bytes go (pe_stripe_buffer_breakdown): a dict
        of per-layer lists ring, temp, branch, branch_rows and the int fixed
        (which holds the row buffers of the streamed ends)."""
        cdef int mask = (1 if streamed else 0) | (2 if streamed_out else 0)
        cdef int32_t[::1] ring = np.zeros(self.net.n_layers, dtype=np.int32)
        cdef int32_t[::1] temp = np.zeros(self.net.n_layers, dtype=np.int32)
        cdef int32_t[::1] branch = np.zeros(self.net.n_layers, dtype=np.int32)
        cdef int32_t[::1] rows = np.zeros(self.net.n_layers, dtype=np.int32)
        cdef int32_t fixed = 0
        cdef int st
        with nogil:
            st = pe_stripe_buffer_breakdown(&self.net, stripe_w, block_w, mask, &ring[0], &temp[0],
                                            &branch[0], &rows[0], &fixed)
        check(st, "pe_stripe_buffer_breakdown", "stripe_w and block_w must be >= 1; " + _NET_DETAIL)
        return {"ring": list(np.asarray(ring).tolist()), "temp": list(np.asarray(temp).tolist()),
                "branch": list(np.asarray(branch).tolist()), "branch_rows": list(np.asarray(rows).tolist()),
                "fixed": int(fixed)}

    def max_overlap_delta(self, int32_t stripe_w):
        """How far (bytes) the output may start after the input in one
        buffer (pe_stripe_max_overlap_delta); None with several stripes."""
        cdef int64_t delta = 0
        cdef int st
        with nogil:
            st = pe_stripe_max_overlap_delta(&self.net, stripe_w, &delta)
        if st == PE_ERR_UNSUPPORTED:
            return None
        check(st, "pe_stripe_max_overlap_delta", "stripe_w must be >= 1; " + _NET_DETAIL)
        return int(delta)

    def predict_macs(self, int32_t stripe_w):
        cdef int64_t macs = 0
        cdef int st
        with nogil:
            st = pe_stripe_predict_macs(&self.net, stripe_w, &macs)
        check(st, "pe_stripe_predict_macs", "stripe_w must be >= 1; " + _NET_DETAIL)
        return macs

    def run(self, const int8_t[:, :, ::1] x, int8_t[:, :, ::1] out, int32_t stripe_w,
            int32_t block_w, uint8_t[::1] arena):
        """Run over x into out with the given arena; returns the counters."""
        cdef pe_stats stats
        cdef pe_context ctx
        cdef pe_dims din, dout
        cdef int st
        memset(&stats, 0, sizeof(stats))
        ctx.buf = &arena[0] if arena.shape[0] > 0 else NULL
        ctx.size = <int32_t>arena.shape[0]
        ctx.stats = &stats
        din.n = 1
        din.h = <int32_t>x.shape[0]
        din.w = <int32_t>x.shape[1]
        din.c = <int32_t>x.shape[2]
        dout.n = 1
        dout.h = <int32_t>out.shape[0]
        dout.w = <int32_t>out.shape[1]
        dout.c = <int32_t>out.shape[2]
        with nogil:
            st = pe_stripe_run_s8(&ctx, &self.net, stripe_w, block_w, &din, &x[0, 0, 0], &dout,
                                  &out[0, 0, 0])
        check(st, "pe_stripe_run_s8",
              f"arena of {arena.shape[0]} bytes, stripe_w {stripe_w}, block_w {block_w}")
        return stats_to_dict(&stats)


# ---------------------------------------------------------------------------
# The compiler pipeline's operators (pe_pipeline.h), run from their int32
# parameter words outside the graph runtime (size queries for the planner,
# and direct checks of the C decoding).

cdef extern from "pyembed/pe_pipeline.h":
    int PE_STRIPE_REGION_HEADER_WORDS
    int PE_STRIPE_REGION_LAYER_WORDS
    int PE_CONV_POOL_WORDS
    ctypedef const void *(*pe_const_lookup)(const void *user, int32_t slot, int32_t elem_bytes,
                                            int32_t count) noexcept nogil
    int32_t pe_stripe_region_table_bytes(int32_t n_layers) nogil
    pe_status pe_stripe_region_get_buffer_size(const int32_t *params, int32_t num_params,
                                               pe_const_lookup lookup, const void *user,
                                               const pe_dims *input_dims, int32_t *size) nogil
    pe_status pe_stripe_region_run(const pe_context *ctx, const int32_t *params, int32_t num_params,
                                   pe_const_lookup lookup, const void *user,
                                   const pe_dims *input_dims, const int8_t *input,
                                   const pe_dims *output_dims, int8_t *output) nogil
    pe_status pe_conv_pool_op_get_buffer_size(const int32_t *params, int32_t num_params,
                                              const pe_dims *input_dims, const pe_dims *filter_dims,
                                              const pe_dims *output_dims, int32_t *size) nogil
    pe_status pe_conv_pool_op_run(const pe_context *ctx, const int32_t *params, int32_t num_params,
                                  const pe_dims *input_dims, const int8_t *input,
                                  const pe_dims *filter_dims, const int8_t *filter,
                                  const int32_t *bias, const int32_t *multiplier,
                                  const int32_t *shift, const int8_t *table, int32_t table_channels,
                                  const pe_dims *output_dims, int8_t *output) nogil

REGION_HEADER_WORDS = PE_STRIPE_REGION_HEADER_WORDS
REGION_LAYER_WORDS = PE_STRIPE_REGION_LAYER_WORDS
CONV_POOL_WORDS = PE_CONV_POOL_WORDS


ctypedef struct _const_table:
    int32_t n
    const void **data
    const int64_t *nbytes


cdef const void *_lookup(const void *user, int32_t slot, int32_t elem_bytes, int32_t count) noexcept nogil:
    cdef const _const_table *t = <const _const_table *>user
    if slot < 1 or slot >= t.n or t.data[slot] == NULL:
        return NULL
    if t.nbytes[slot] != <int64_t>elem_bytes * count:
        return NULL
    return t.data[slot]


cdef pe_dims _dims4(shape):
    cdef pe_dims d
    s = [int(v) for v in shape]
    s = [1] * (4 - len(s)) + s
    d.n, d.h, d.w, d.c = s[0], s[1], s[2], s[3]
    return d


cdef class _Consts:
    """The operator's inputs as the C lookup sees them: slot k -> bytes of
    consts[k] (None: not a constant)."""
    cdef _const_table table
    cdef const void **data
    cdef int64_t *nbytes
    cdef list keep

    def __cinit__(self, list consts):
        cdef Py_ssize_t i, n = len(consts)
        cdef const uint8_t[::1] view
        self.keep = []
        self.data = <const void **>PyMem_Malloc(max(n, 1) * sizeof(void *))
        self.nbytes = <int64_t *>PyMem_Malloc(max(n, 1) * sizeof(int64_t))
        if self.data == NULL or self.nbytes == NULL:
            raise MemoryError()
        for i in range(n):
            self.data[i] = NULL
            self.nbytes[i] = 0
            a = consts[i]
            if a is None:
                continue
            a = np.ascontiguousarray(a)
            self.keep.append(a)
            if a.nbytes == 0:
                continue
            view = a.reshape(-1).view(np.uint8)
            self.data[i] = &view[0]
            self.nbytes[i] = a.nbytes
        self.table.n = <int32_t>n
        self.table.data = self.data
        self.table.nbytes = self.nbytes

    def __dealloc__(self):
        PyMem_Free(self.data)
        PyMem_Free(self.nbytes)


def region_buffer_size(const int32_t[::1] words, list consts, input_shape):
    """pe_stripe_region_get_buffer_size: consts[k] is the constant at input
    slot k (None for slot 0, the activation input)."""
    cdef _Consts c = _Consts(consts)
    cdef pe_dims d = _dims4(input_shape)
    cdef int32_t size = 0
    cdef int st
    with nogil:
        st = pe_stripe_region_get_buffer_size(&words[0], <int32_t>words.shape[0], _lookup, &c.table, &d, &size)
    check(st, "pe_stripe_region_get_buffer_size", "region words, constants or input shape")
    return size


def region_run(const int32_t[::1] words, list consts, const int8_t[::1] x, input_shape,
               int8_t[::1] out, output_shape, uint8_t[::1] scratch):
    """pe_stripe_region_run over flat int8 buffers; returns the counters."""
    cdef _Consts c = _Consts(consts)
    cdef pe_dims din = _dims4(input_shape)
    cdef pe_dims dout = _dims4(output_shape)
    cdef pe_stats stats
    cdef pe_context ctx
    cdef int st
    if x.shape[0] != <Py_ssize_t>din.n * din.h * din.w * din.c or \
            out.shape[0] != <Py_ssize_t>dout.n * dout.h * dout.w * dout.c:
        raise ValueError("x / out: sizes do not match their shapes")
    memset(&stats, 0, sizeof(stats))
    ctx.buf = &scratch[0] if scratch.shape[0] > 0 else NULL
    ctx.size = <int32_t>scratch.shape[0]
    ctx.stats = &stats
    with nogil:
        st = pe_stripe_region_run(&ctx, &words[0], <int32_t>words.shape[0], _lookup, &c.table, &din, &x[0],
                                  &dout, &out[0])
    check(st, "pe_stripe_region_run", f"scratch of {scratch.shape[0]} bytes")
    return stats_to_dict(&stats)


def conv_pool_buffer_size(const int32_t[::1] words, input_shape, filter_shape, output_shape):
    """pe_conv_pool_op_get_buffer_size."""
    cdef pe_dims di = _dims4(input_shape)
    cdef pe_dims df = _dims4(filter_shape)
    cdef pe_dims do = _dims4(output_shape)
    cdef int32_t size = 0
    cdef int st
    with nogil:
        st = pe_conv_pool_op_get_buffer_size(&words[0], <int32_t>words.shape[0], &di, &df, &do, &size)
    check(st, "pe_conv_pool_op_get_buffer_size", "conv -> pool words or shapes")
    return size
