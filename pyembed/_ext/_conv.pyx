# pyembed-csrc: pe_conv_rev.c pe_conv_rev_whole.c pe_conv_check.c pe_conv_dsp.c pe_conv_dsp_pw.c pe_conv_gather.c pe_dw3_dsp.c pe_fused.c pe_pool_rev.c pe_pool_scatter.c
# cython: language_level=3, boundscheck=False, wraparound=False
"""Bindings for reverse convolution (pe_conv.h).

Arrays arrive validated, C-contiguous and of the exact dtype from
pyembed.kernels.conv, which is the public API. Convolution parameters travel as a
dict (see _params below).
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int8_t, int32_t, int64_t, uint64_t
from libc.string cimport memset
from pyembed._ext.pe_types cimport *

cnp.import_array()

cdef extern from "pyembed/pe_conv.h":
    ctypedef struct pe_conv_rev_stream:
        pass
    pe_status pe_conv2d_rev_s8_get_buffer_size(const pe_conv_params *p, const pe_dims *i,
                                               const pe_dims *f, const pe_dims *o,
                                               int32_t *size) nogil
    pe_status pe_depthwise_conv2d_rev_s8_get_buffer_size(const pe_conv_params *p,
                                                         const pe_dims *i, const pe_dims *f,
                                                         const pe_dims *o, int32_t *size) nogil
    pe_status pe_conv2d_rev_s8(const pe_context *ctx, const pe_conv_params *p,
                               const pe_per_channel_quant *q, const pe_dims *i,
                               const int8_t *inp, const pe_dims *f, const int8_t *w,
                               const int32_t *bias, const pe_dims *o, int8_t *out) nogil
    pe_status pe_depthwise_conv2d_rev_s8(const pe_context *ctx, const pe_conv_params *p,
                                         const pe_per_channel_quant *q, const pe_dims *i,
                                         const int8_t *inp, const pe_dims *f, const int8_t *w,
                                         const int32_t *bias, const pe_dims *o,
                                         int8_t *out) nogil
    pe_status pe_conv2d_rev_stream_init_s8(pe_conv_rev_stream *st, const pe_context *ctx,
                                           const pe_conv_params *p,
                                           const pe_per_channel_quant *q, const pe_dims *i,
                                           const pe_dims *f, const int8_t *w,
                                           const int32_t *bias, const pe_dims *o) nogil
    pe_status pe_depthwise_conv2d_rev_stream_init_s8(pe_conv_rev_stream *st,
                                                     const pe_context *ctx,
                                                     const pe_conv_params *p,
                                                     const pe_per_channel_quant *q,
                                                     const pe_dims *i, const pe_dims *f,
                                                     const int8_t *w, const int32_t *bias,
                                                     const pe_dims *o) nogil
    pe_status pe_conv2d_rev_stream_push_s8(pe_conv_rev_stream *st, const int8_t *row) nogil
    pe_status pe_conv2d_rev_stream_pop_s8(pe_conv_rev_stream *st, int8_t *row,
                                          int32_t *index) nogil


cdef pe_conv_params _params(dict d):
    """dict -> pe_conv_params. Keys: input_offset, output_offset, stride (h, w),
    padding (top, bottom, left, right), dilation (h, w), groups, ch_mult,
    activation (min, max), single_rounding (bool)."""
    cdef pe_conv_params p
    p.input_offset = d["input_offset"]
    p.output_offset = d["output_offset"]
    p.stride.h, p.stride.w = d["stride"]
    p.padding.top, p.padding.bottom, p.padding.left, p.padding.right = d["padding"]
    p.dilation.h, p.dilation.w = d["dilation"]
    p.groups = d["groups"]
    p.ch_mult = d["ch_mult"]
    p.activation.min, p.activation.max = d["activation"]
    p.rounding = PE_ROUND_SINGLE if d["single_rounding"] else PE_ROUND_DOUBLE
    return p


cdef pe_dims _dims(shape):
    cdef pe_dims d
    d.n, d.h, d.w, d.c = shape
    return d


_DETAIL = ("shapes, channels, groups/ch_mult, kernel, stride, dilation, padding, offsets, "
           "activation or multiplier/shift out of range")


def buffer_size(bint depthwise, dict params, in_shape, f_shape, out_shape):
    """Scratch bytes the kernel needs (its get_buffer_size query)."""
    cdef pe_conv_params p = _params(params)
    cdef pe_dims di = _dims(in_shape), df = _dims(f_shape), do = _dims(out_shape)
    cdef int32_t size = 0
    cdef int st
    if depthwise:
        st = pe_depthwise_conv2d_rev_s8_get_buffer_size(&p, &di, &df, &do, &size)
        check(st, "pe_depthwise_conv2d_rev_s8_get_buffer_size", _DETAIL)
    else:
        st = pe_conv2d_rev_s8_get_buffer_size(&p, &di, &df, &do, &size)
        check(st, "pe_conv2d_rev_s8_get_buffer_size", _DETAIL)
    return size


cdef const int32_t *_bias_ptr(object bias):
    cdef const int32_t[::1] b
    if bias is None:
        return NULL
    b = bias
    return &b[0]


def conv_rev(bint depthwise, dict params, const int8_t[:, :, :, ::1] inp,
             const int8_t[:, :, :, ::1] weights, bias, const int32_t[::1] mult,
             const int32_t[::1] shift, int8_t[:, :, :, ::1] out, scratch, bint want_stats):
    """Run the whole-tensor kernel into out. scratch: None (allocated here) or a
    writable 1-D uint8 array (the C kernel checks its size and alignment).
    Returns the stats dict or None."""
    cdef pe_conv_params p = _params(params)
    cdef pe_dims di = _dims((inp.shape[0], inp.shape[1], inp.shape[2], inp.shape[3]))
    cdef pe_dims df = _dims((weights.shape[0], weights.shape[1], weights.shape[2], weights.shape[3]))
    cdef pe_dims do = _dims((out.shape[0], out.shape[1], out.shape[2], out.shape[3]))
    cdef pe_per_channel_quant q
    cdef pe_context ctx
    cdef pe_stats stats
    cdef unsigned char[::1] buf
    cdef const int32_t *bp = _bias_ptr(bias)
    cdef int st
    if scratch is None:
        size = buffer_size(depthwise, params, (di.n, di.h, di.w, di.c), (df.n, df.h, df.w, df.c),
                           (do.n, do.h, do.w, do.c))
        scratch = np.empty(max(1, size // 4), dtype=np.int32).view(np.uint8)
    buf = scratch
    memset(&stats, 0, sizeof(stats))
    q.multiplier = &mult[0]
    q.shift = &shift[0]
    ctx.buf = &buf[0] if buf.shape[0] > 0 else NULL
    ctx.size = <int32_t>min(buf.shape[0], 2**31 - 1)
    ctx.stats = &stats if want_stats else NULL
    with nogil:
        if depthwise:
            st = pe_depthwise_conv2d_rev_s8(&ctx, &p, &q, &di, &inp[0, 0, 0, 0], &df,
                                            &weights[0, 0, 0, 0], bp, &do, &out[0, 0, 0, 0])
        else:
            st = pe_conv2d_rev_s8(&ctx, &p, &q, &di, &inp[0, 0, 0, 0], &df,
                                  &weights[0, 0, 0, 0], bp, &do, &out[0, 0, 0, 0])
    check(st, "pe_depthwise_conv2d_rev_s8" if depthwise else "pe_conv2d_rev_s8", _DETAIL)
    return stats_to_dict(&stats) if want_stats else None


cdef class ConvRevStream:
    """The C row stream; pyembed.kernels.conv.Conv2dStream is the public face."""
    cdef pe_conv_rev_stream st
    cdef pe_context ctx
    cdef pe_stats stats
    cdef object keep      # arrays the C state points into
    cdef readonly int out_h, out_w, out_c, in_h, in_w, in_c

    def __init__(self, bint depthwise, dict params, in_shape, const int8_t[:, :, :, ::1] weights,
                 bias, const int32_t[::1] mult, const int32_t[::1] shift, out_shape):
        cdef pe_conv_params p = _params(params)
        cdef pe_dims di = _dims(in_shape), do = _dims(out_shape)
        cdef pe_dims df = _dims((weights.shape[0], weights.shape[1], weights.shape[2], weights.shape[3]))
        cdef pe_per_channel_quant q
        cdef int32_t[::1] buf
        cdef int st
        size = buffer_size(depthwise, params, in_shape, (df.n, df.h, df.w, df.c), out_shape)
        scratch = np.empty(max(1, size // 4), dtype=np.int32)
        buf = scratch
        self.keep = (weights, bias, mult, shift, scratch)
        memset(&self.stats, 0, sizeof(self.stats))
        q.multiplier = &mult[0]
        q.shift = &shift[0]
        self.ctx.buf = &buf[0]
        self.ctx.size = size
        self.ctx.stats = &self.stats
        if depthwise:
            st = pe_depthwise_conv2d_rev_stream_init_s8(&self.st, &self.ctx, &p, &q, &di, &df,
                                                        &weights[0, 0, 0, 0], _bias_ptr(bias), &do)
            check(st, "pe_depthwise_conv2d_rev_stream_init_s8", _DETAIL)
        else:
            st = pe_conv2d_rev_stream_init_s8(&self.st, &self.ctx, &p, &q, &di, &df,
                                              &weights[0, 0, 0, 0], _bias_ptr(bias), &do)
            check(st, "pe_conv2d_rev_stream_init_s8", _DETAIL)
        self.in_h, self.in_w, self.in_c = di.h, di.w, di.c
        self.out_h, self.out_w, self.out_c = do.h, do.w, do.c

    def push(self, const int8_t[:, ::1] row):
        cdef int st
        with nogil:
            st = pe_conv2d_rev_stream_push_s8(&self.st, &row[0, 0])
        check(st, "pe_conv2d_rev_stream_push_s8", "pop every ready row first; at most in_h rows")

    def pop(self):
        """(index, row) of the next final output row, or None."""
        cdef int32_t idx = -1
        cdef int st
        row = np.empty((self.out_w, self.out_c), dtype=np.int8)
        cdef int8_t[:, ::1] r = row
        with nogil:
            st = pe_conv2d_rev_stream_pop_s8(&self.st, &r[0, 0], &idx)
        check(st, "pe_conv2d_rev_stream_pop_s8")
        return None if idx < 0 else (idx, row)

    @property
    def stats(self):
        return stats_to_dict(&self.stats)

    @property
    def scratch_bytes(self):
        return self.ctx.size


# ---- convolution -> pooling (pe_fused.h) ------------------------------------

cdef extern from "pyembed/pe_fused.h":
    ctypedef enum pe_fuse_strategy:
        PE_FUSE_NONE
        PE_FUSE_NAIVE
        PE_FUSE_STRIPED
        PE_FUSE_REVERSE
    ctypedef struct pe_fused_counters:
        uint64_t conv_macs_nominal
        uint64_t pool_ops_nominal
        uint64_t conv_macs
        uint64_t pool_ops
        uint64_t conv_outputs
        int64_t peak_elems
        int64_t peak_bytes
    pe_status pe_conv_pool_rev_get_buffer_size(const pe_conv_params *cp, const pe_pool_params *pp,
                                               const pe_dims *i, const pe_dims *f,
                                               const pe_dims *co, const pe_dims *po,
                                               int32_t *size) nogil
    pe_status pe_conv_pool_rev_s8(const pe_context *ctx, const pe_conv_params *cp,
                                  const pe_per_channel_quant *q, const pe_pool_params *pp,
                                  const pe_dims *i, const int8_t *inp, const pe_dims *f,
                                  const int8_t *w, const int32_t *bias, const pe_dims *co,
                                  const pe_dims *po, int8_t *out) nogil
    pe_status pe_conv_pool_strategy_get_buffer_size(pe_fuse_strategy s, const pe_conv_params *cp,
                                                    const pe_pool_params *pp, const pe_dims *i,
                                                    const pe_dims *f, const pe_dims *co,
                                                    const pe_dims *po, int32_t *size) nogil
    pe_status pe_conv_pool_strategy_s8(const pe_context *ctx, pe_fuse_strategy s,
                                       const pe_conv_params *cp, const pe_per_channel_quant *q,
                                       const pe_pool_params *pp, const pe_dims *i,
                                       const int8_t *inp, const pe_dims *f, const int8_t *w,
                                       const int32_t *bias, const pe_dims *co, const pe_dims *po,
                                       int8_t *out, pe_fused_counters *cnt) nogil

STRATEGIES = {"none": PE_FUSE_NONE, "naive": PE_FUSE_NAIVE, "striped": PE_FUSE_STRIPED,
              "reverse": PE_FUSE_REVERSE}


cdef pe_pool_params _pool_params(tuple prm):
    """The tuple of pyembed.kernels.pooling.make_params -> pe_pool_params."""
    cdef pe_pool_params p
    (kind, p.window.h, p.window.w, p.stride.h, p.stride.w, p.padding.top, p.padding.bottom,
     p.padding.left, p.padding.right, p.activation.min, p.activation.max,
     p.sum_quant.multiplier, p.sum_quant.shift, p.output_offset) = prm
    p.kind = <pe_pool_kind>kind
    return p


_FUSED_DETAIL = _DETAIL + ", or pooling window/stride/padding/activation/output dims"


def conv_pool(strategy, dict params, tuple pool_prm, const int8_t[:, :, :, ::1] inp,
              const int8_t[:, :, :, ::1] weights, bias, const int32_t[::1] mult,
              const int32_t[::1] shift, conv_out_shape, int8_t[:, :, :, ::1] out):
    """strategy None: the fused reverse stream (pe_conv_pool_rev_s8), returns
    the ctx stats dict; else one of STRATEGIES, returns the counters dict."""
    cdef pe_conv_params p = _params(params)
    cdef pe_pool_params pp = _pool_params(pool_prm)
    cdef pe_dims di = _dims((inp.shape[0], inp.shape[1], inp.shape[2], inp.shape[3]))
    cdef pe_dims df = _dims((weights.shape[0], weights.shape[1], weights.shape[2], weights.shape[3]))
    cdef pe_dims dco = _dims(conv_out_shape)
    cdef pe_dims dpo = _dims((out.shape[0], out.shape[1], out.shape[2], out.shape[3]))
    cdef pe_per_channel_quant q
    cdef pe_context ctx
    cdef pe_stats stats
    cdef pe_fused_counters cnt
    cdef pe_fuse_strategy s = PE_FUSE_NONE
    cdef int32_t size = 0
    cdef int64_t[::1] buf
    cdef const int32_t *bp = _bias_ptr(bias)
    cdef int st
    if strategy is None:
        st = pe_conv_pool_rev_get_buffer_size(&p, &pp, &di, &df, &dco, &dpo, &size)
        check(st, "pe_conv_pool_rev_get_buffer_size", _FUSED_DETAIL)
    else:
        s = STRATEGIES[strategy]
        st = pe_conv_pool_strategy_get_buffer_size(s, &p, &pp, &di, &df, &dco, &dpo, &size)
        check(st, "pe_conv_pool_strategy_get_buffer_size", _FUSED_DETAIL)
    scratch = np.empty(max(1, (size + 7) // 8), dtype=np.int64)
    buf = scratch
    memset(&stats, 0, sizeof(stats))
    memset(&cnt, 0, sizeof(cnt))
    q.multiplier = &mult[0]
    q.shift = &shift[0]
    ctx.buf = &buf[0]
    ctx.size = size
    ctx.stats = &stats
    with nogil:
        if strategy is None:
            st = pe_conv_pool_rev_s8(&ctx, &p, &q, &pp, &di, &inp[0, 0, 0, 0], &df,
                                     &weights[0, 0, 0, 0], bp, &dco, &dpo, &out[0, 0, 0, 0])
        else:
            st = pe_conv_pool_strategy_s8(&ctx, s, &p, &q, &pp, &di, &inp[0, 0, 0, 0], &df,
                                          &weights[0, 0, 0, 0], bp, &dco, &dpo,
                                          &out[0, 0, 0, 0], &cnt)
    if strategy is None:
        check(st, "pe_conv_pool_rev_s8", _FUSED_DETAIL)
        d = stats_to_dict(&stats)
        d["scratch_bytes"] = size
        return d
    check(st, "pe_conv_pool_strategy_s8", _FUSED_DETAIL + " (strategies pool with max only)")
    return {"conv_macs_nominal": cnt.conv_macs_nominal, "pool_ops_nominal": cnt.pool_ops_nominal,
            "conv_macs": cnt.conv_macs, "pool_ops": cnt.pool_ops, "conv_outputs": cnt.conv_outputs,
            "peak_elems": cnt.peak_elems, "peak_bytes": cnt.peak_bytes,
            "input_reads": stats.input_reads, "scratch_bytes": size}
