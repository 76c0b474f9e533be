# pyembed-csrc: pe_stripe.c
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

    ctypedef enum pe_stripe_op:
        PE_STRIPE_CONV
        PE_STRIPE_DEPTHWISE
        PE_STRIPE_POINTWISE
        PE_STRIPE_POOL
        PE_STRIPE_ADD
        PE_STRIPE_UPSAMPLE2X

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

    ctypedef struct pe_stripe_net:
        const pe_stripe_layer *layers
        int32_t n_layers
        pe_dims input

    pe_status pe_stripe_output_dims(const pe_stripe_net *net, pe_dims *output) nogil
    pe_status pe_stripe_get_buffer_size_s8(const pe_stripe_net *net, int32_t stripe_w,
                                           int32_t block_w, int32_t *size) nogil
    pe_status pe_stripe_predict_macs(const pe_stripe_net *net, int32_t stripe_w,
                                     int64_t *macs) nogil
    pe_status pe_stripe_run_s8(const pe_context *ctx, const pe_stripe_net *net,
                               int32_t stripe_w, int32_t block_w, const pe_dims *input_dims,
                               const int8_t *input, const pe_dims *output_dims,
                               int8_t *output) nogil

MAX_LAYERS = PE_STRIPE_MAX_LAYERS
MAX_KERNEL = PE_STRIPE_MAX_KERNEL

OPS = {
    "conv": PE_STRIPE_CONV,
    "depthwise": PE_STRIPE_DEPTHWISE,
    "pointwise": PE_STRIPE_POINTWISE,
    "pool": PE_STRIPE_POOL,
    "add": PE_STRIPE_ADD,
    "upsample2x": PE_STRIPE_UPSAMPLE2X,
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

    def buffer_size(self, int32_t stripe_w, int32_t block_w):
        cdef int32_t size = 0
        cdef int st
        with nogil:
            st = pe_stripe_get_buffer_size_s8(&self.net, stripe_w, block_w, &size)
        check(st, "pe_stripe_get_buffer_size_s8",
              "stripe_w and block_w must be >= 1; " + _NET_DETAIL)
        return size

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
