# pyembed-csrc: pe_pool_rev.c pe_pool_scatter.c
# cython: language_level=3, boundscheck=False, wraparound=False
"""Bindings for reverse pooling (csrc/include/pyembed/pe_pool.h).

Parameters travel as one tuple
    (kind, win_h, win_w, stride_h, stride_w, pad_top, pad_bottom, pad_left,
     pad_right, act_min, act_max, sum_multiplier, sum_shift, output_offset)
built and validated by pyembed.kernels.pooling, which is the public API; arrays
arrive C-contiguous with the right dtype and shape.
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int8_t, int32_t, int64_t
from libc.string cimport memset
from pyembed._ext.pe_types cimport *

cnp.import_array()

cdef extern from "pyembed/pe_pool.h":
    pe_status pe_out_size(int32_t d_in, int32_t k_eff, int32_t stride, int32_t pad_lo,
                          int32_t pad_hi, pe_shape_rule rule, int32_t *out) nogil
    pe_status pe_pool_output_dims(const pe_pool_params *params, pe_shape_rule rule,
                                  const pe_dims *in_dims, pe_dims *out_dims) nogil
    pe_status pe_pool_rev_get_buffer_size(const pe_pool_params *params, const pe_dims *in_dims,
                                          const pe_dims *out_dims, int32_t *size) nogil
    pe_status pe_pool_rev_s8(const pe_context *ctx, const pe_pool_params *params,
                             const pe_dims *in_dims, const int8_t *inp,
                             const pe_dims *out_dims, int8_t *out) nogil
    pe_status pe_pool_rev_stream_init(const pe_context *ctx, const pe_pool_params *params,
                                      const pe_dims *in_dims, const pe_dims *out_dims) nogil
    pe_status pe_pool_rev_stream_max_rows_out(const pe_pool_params *params, const pe_dims *in_dims,
                                              const pe_dims *out_dims, int32_t *rows) nogil
    pe_status pe_pool_rev_push_row_s8(const pe_context *ctx, const int8_t *row, int8_t *out_rows,
                                      int32_t out_capacity, int32_t *first_row,
                                      int32_t *n_rows) nogil
    pe_status pe_pool_rev_begin_row(const pe_context *ctx) nogil
    pe_status pe_pool_rev_scatter_s8(const pe_context *ctx, int32_t x, int32_t n_pixels,
                                     const int8_t *values) nogil
    pe_status pe_pool_rev_scatter_s32(const pe_context *ctx, int32_t x, int32_t n_pixels,
                                      const int32_t *values) nogil
    pe_status pe_pool_rev_end_row(const pe_context *ctx, int8_t *out_rows, int32_t out_capacity,
                                  int32_t *first_row, int32_t *n_rows) nogil
    pe_status pe_pool_rev_stream_progress(const pe_context *ctx, int32_t *rows_in,
                                          int32_t *rows_out) nogil

KIND_MAX = PE_POOL_MAX
KIND_AVG = PE_POOL_AVG
KIND_SUM = PE_POOL_SUM
RULE_FLOOR = PE_SHAPE_FLOOR
RULE_CEIL = PE_SHAPE_CEIL
RULE_NOPAD = PE_SHAPE_NOPAD
RULE_EXPLICIT = PE_SHAPE_EXPLICIT

_PARAM_DETAIL = ("window and stride >= 1, padding >= 0, -128 <= act_min <= act_max <= 127, "
                 "matching n and c, output dims >= 1")


cdef int _fill(pe_pool_params *p, tuple prm) except -1:
    (kind, wh, ww, sh, sw, pt, pb, pl, pr, amin, amax, mult, shift, ooff) = prm
    p.kind = <pe_pool_kind>kind
    p.window.h = wh
    p.window.w = ww
    p.stride.h = sh
    p.stride.w = sw
    p.padding.top = pt
    p.padding.bottom = pb
    p.padding.left = pl
    p.padding.right = pr
    p.activation.min = amin
    p.activation.max = amax
    p.sum_quant.multiplier = mult
    p.sum_quant.shift = shift
    p.output_offset = ooff
    return 0


cdef void _dims(pe_dims *d, tuple t):
    d.n = t[0]
    d.h = t[1]
    d.w = t[2]
    d.c = t[3]


def out_size(int32_t d_in, int32_t k_eff, int32_t stride, int32_t pad_lo, int32_t pad_hi,
             int rule, int32_t explicit=0):
    cdef int32_t out = explicit
    cdef int st = pe_out_size(d_in, k_eff, stride, pad_lo, pad_hi, <pe_shape_rule>rule, &out)
    check(st, "pe_out_size", "the shape rule leaves no output (or an argument is out of range)")
    return out


def output_dims(tuple prm, int rule, tuple in_dims, tuple explicit=(0, 0)):
    cdef pe_pool_params p
    cdef pe_dims di, do
    _fill(&p, prm)
    _dims(&di, in_dims)
    do.n = di.n
    do.c = di.c
    do.h = explicit[0]
    do.w = explicit[1]
    cdef int st = pe_pool_output_dims(&p, <pe_shape_rule>rule, &di, &do)
    check(st, "pe_pool_output_dims", "the shape rule leaves no output (or an argument is out of range)")
    return (do.n, do.h, do.w, do.c)


def buffer_size(tuple prm, tuple in_dims, tuple out_dims):
    cdef pe_pool_params p
    cdef pe_dims di, do
    cdef int32_t size = 0
    _fill(&p, prm)
    _dims(&di, in_dims)
    _dims(&do, out_dims)
    check(pe_pool_rev_get_buffer_size(&p, &di, &do, &size), "pe_pool_rev_get_buffer_size",
          _PARAM_DETAIL)
    return size


def max_rows_out(tuple prm, tuple in_dims, tuple out_dims):
    cdef pe_pool_params p
    cdef pe_dims di, do
    cdef int32_t rows = 0
    _fill(&p, prm)
    _dims(&di, in_dims)
    _dims(&do, out_dims)
    check(pe_pool_rev_stream_max_rows_out(&p, &di, &do, &rows), "pe_pool_rev_stream_max_rows_out",
          _PARAM_DETAIL)
    return rows


cdef object _scratch(int32_t size):
    # int64 elements keep the buffer 8-byte aligned
    return np.zeros((size + 7) // 8, dtype=np.int64)


def pool2d(tuple prm, const int8_t[:, :, :, ::1] x, int8_t[:, :, :, ::1] out, object scratch_bytes,
           bint want_stats):
    """Whole-tensor pooling of x into out. scratch_bytes: None (exactly the
    queried size) or a byte count (to exercise the scratch check)."""
    cdef pe_pool_params p
    cdef pe_dims di, do
    cdef pe_context ctx
    cdef pe_stats stats
    cdef int32_t size = 0
    cdef int st
    cdef int64_t[::1] buf
    _fill(&p, prm)
    _dims(&di, (x.shape[0], x.shape[1], x.shape[2], x.shape[3]))
    _dims(&do, (out.shape[0], out.shape[1], out.shape[2], out.shape[3]))
    check(pe_pool_rev_get_buffer_size(&p, &di, &do, &size), "pe_pool_rev_get_buffer_size",
          _PARAM_DETAIL)
    if scratch_bytes is not None:
        size = scratch_bytes
    scratch = _scratch(max(size, 8))
    buf = scratch
    ctx.buf = <void *>&buf[0]
    ctx.size = size
    memset(&stats, 0, sizeof(stats))
    ctx.stats = &stats if want_stats else NULL
    with nogil:
        st = pe_pool_rev_s8(&ctx, &p, &di, &x[0, 0, 0, 0], &do, &out[0, 0, 0, 0])
    check(st, "pe_pool_rev_s8", _PARAM_DETAIL)
    return stats_to_dict(&stats) if want_stats else None


cdef class Stream:
    """A row stream over one pe_pool_rev state held in a private scratch array."""
    cdef object _scratch
    cdef pe_context ctx
    cdef pe_stats stats
    cdef readonly int32_t max_rows
    cdef readonly int32_t out_w
    cdef readonly int32_t channels
    cdef readonly int32_t in_w
    cdef readonly int32_t scratch_bytes

    def __cinit__(self, tuple prm, tuple in_dims, tuple out_dims, object scratch_bytes=None):
        cdef pe_pool_params p
        cdef pe_dims di, do
        cdef int32_t size = 0, rows = 0
        cdef int64_t[::1] buf
        _fill(&p, prm)
        _dims(&di, in_dims)
        _dims(&do, out_dims)
        check(pe_pool_rev_get_buffer_size(&p, &di, &do, &size), "pe_pool_rev_get_buffer_size",
              _PARAM_DETAIL)
        check(pe_pool_rev_stream_max_rows_out(&p, &di, &do, &rows),
              "pe_pool_rev_stream_max_rows_out", _PARAM_DETAIL)
        if scratch_bytes is not None:
            size = scratch_bytes
        self._scratch = _scratch(max(size, 8))
        buf = self._scratch
        self.ctx.buf = <void *>&buf[0]
        self.ctx.size = size
        memset(&self.stats, 0, sizeof(self.stats))
        self.ctx.stats = &self.stats
        self.max_rows = rows
        self.out_w = do.w
        self.channels = do.c
        self.in_w = di.w
        self.scratch_bytes = size
        check(pe_pool_rev_stream_init(&self.ctx, &p, &di, &do), "pe_pool_rev_stream_init",
              _PARAM_DETAIL)

    def push(self, const int8_t[:, ::1] row):
        """Push one input row (w, c); returns (first_row, rows (k, w_o, c))."""
        out = np.empty((max(self.max_rows, 1), self.out_w, self.channels), dtype=np.int8)
        cdef int8_t[:, :, ::1] o = out
        cdef int32_t first = 0, n = 0
        cdef int st
        with nogil:
            st = pe_pool_rev_push_row_s8(&self.ctx, &row[0, 0], &o[0, 0, 0], self.max_rows,
                                         &first, &n)
        check(st, "pe_pool_rev_push_row_s8", "push only while input rows remain, one row at a time")
        return first, out[:n]

    def begin_row(self):
        check(pe_pool_rev_begin_row(&self.ctx), "pe_pool_rev_begin_row",
              "a row is already open, or every input row was consumed")

    def scatter_s8(self, int32_t x, const int8_t[:, ::1] values):
        cdef int st
        with nogil:
            st = pe_pool_rev_scatter_s8(&self.ctx, x, <int32_t>values.shape[0], &values[0, 0])
        check(st, "pe_pool_rev_scatter_s8", "open a row first; pixels must lie inside the row")

    def scatter_s32(self, int32_t x, const int32_t[:, ::1] values):
        cdef int st
        with nogil:
            st = pe_pool_rev_scatter_s32(&self.ctx, x, <int32_t>values.shape[0], &values[0, 0])
        check(st, "pe_pool_rev_scatter_s32", "open a row first; pixels must lie inside the row")

    def end_row(self):
        out = np.empty((max(self.max_rows, 1), self.out_w, self.channels), dtype=np.int8)
        cdef int8_t[:, :, ::1] o = out
        cdef int32_t first = 0, n = 0
        check(pe_pool_rev_end_row(&self.ctx, &o[0, 0, 0], self.max_rows, &first, &n),
              "pe_pool_rev_end_row", "no row is open")
        return first, out[:n]

    def progress(self):
        cdef int32_t rin = 0, rout = 0
        check(pe_pool_rev_stream_progress(&self.ctx, &rin, &rout), "pe_pool_rev_stream_progress")
        return rin, rout

    @property
    def stats(self):
        return stats_to_dict(&self.stats)
