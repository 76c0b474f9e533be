# Links every file in csrc/src (the runners in pe_transformer.c use the graph runtime): no pyembed-csrc line.
# cython: language_level=3, boundscheck=False, wraparound=False
"""Bindings for the fused transformer kernels (pe_transformer.h): the
PE_ATTENTION operator's kernel driven by its params words, and the LUT.

Arguments arrive as the graph gives them (flat int8 arrays and the words of
pyembed.model.ops.transformer.WORDS); the C code decodes and checks the
words and every addressed element against the array sizes, and every status
becomes an exception here."""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int8_t, int32_t, uint8_t
from pyembed._ext.pe_types cimport *

cnp.import_array()

cdef extern from "pyembed/pe_transformer.h":
    ctypedef struct pe_xattn_params:
        pass
    int PE_XATTN_NUM_WORDS
    pe_status pe_xattn_decode(const int32_t *words, int32_t count, pe_xattn_params *params) nogil
    pe_status pe_xattn_get_buffer_size(const pe_xattn_params *params, int32_t *size) nogil
    pe_status pe_xattn_check_extents(const pe_xattn_params *params, int32_t q_elems, int32_t k_elems,
                                     int32_t v_elems, int32_t mask_elems, int32_t out_elems) nogil
    pe_status pe_xattn_s8(const pe_context *ctx, const pe_xattn_params *params, const int8_t *q,
                          const int8_t *k, const int8_t *v, const int8_t *mask, const int32_t *mask_lut,
                          int8_t *out) nogil
    pe_status pe_lut_s8(const int8_t *table, int32_t size, const int8_t *input, int8_t *output) nogil

NUM_WORDS = PE_XATTN_NUM_WORDS
_DETAIL = "the PE_ATTENTION params words (pyembed.model.ops.transformer.WORDS) and tensor sizes"


cdef int _decode(words, pe_xattn_params *p) except -1:
    cdef cnp.ndarray[int32_t, ndim=1] w = np.ascontiguousarray(words, dtype=np.int32).reshape(-1)
    check(pe_xattn_decode(<const int32_t *>w.data, <int32_t>w.shape[0], p), "pe_xattn_decode", _DETAIL)
    return 0


def xattn_buffer_size(words):
    """Scratch bytes the fused attention asks for."""
    cdef pe_xattn_params p
    cdef int32_t size = 0
    _decode(words, &p)
    check(pe_xattn_get_buffer_size(&p, &size), "pe_xattn_get_buffer_size", _DETAIL)
    return size


def xattn(words, q, k, v, mask, int out_elems, scratch_extra=0, stats=False, mask_lut=None):
    """Run the fused attention on flat int8 arrays; returns the int8 output
    (out_elems values; elements the strides do not address stay 0), and the
    kernel counters when stats is true. mask_lut: 256 int32 (stream mode
    with a mask)."""
    cdef pe_xattn_params p
    cdef int32_t need = 0
    cdef pe_context ctx
    cdef pe_stats st
    _decode(words, &p)
    cdef cnp.ndarray[int8_t, ndim=1] qa = np.ascontiguousarray(q, dtype=np.int8).reshape(-1)
    cdef cnp.ndarray[int8_t, ndim=1] ka = np.ascontiguousarray(k, dtype=np.int8).reshape(-1)
    cdef cnp.ndarray[int8_t, ndim=1] va = np.ascontiguousarray(v, dtype=np.int8).reshape(-1)
    cdef cnp.ndarray[int8_t, ndim=1] ma = np.ascontiguousarray(
        mask if mask is not None else np.zeros(1, np.int8), dtype=np.int8).reshape(-1)
    cdef cnp.ndarray[int8_t, ndim=1] out = np.zeros(out_elems, dtype=np.int8)
    cdef cnp.ndarray[int32_t, ndim=1] lut = np.ascontiguousarray(
        mask_lut if mask_lut is not None else np.zeros(256, np.int32), dtype=np.int32).reshape(-1)
    if lut.shape[0] != 256:
        raise ValueError(f"mask_lut: expected 256 int32 entries, got {lut.shape[0]}")
    check(pe_xattn_check_extents(&p, <int32_t>qa.shape[0], <int32_t>ka.shape[0], <int32_t>va.shape[0],
                                 <int32_t>ma.shape[0] if mask is not None else 0, out_elems),
          "pe_xattn_check_extents", _DETAIL)
    check(pe_xattn_get_buffer_size(&p, &need), "pe_xattn_get_buffer_size", _DETAIL)
    cdef cnp.ndarray[uint8_t, ndim=1] scratch = np.zeros(max(need + int(scratch_extra), 1), dtype=np.uint8)
    ctx.buf = <void *>scratch.data
    ctx.size = need + int(scratch_extra)
    st.macs = 0
    st.combines = 0
    st.exps = 0
    st.rescales = 0
    st.input_reads = 0
    st.peak_bytes = 0
    st.peak_elems = 0
    ctx.stats = &st
    check(pe_xattn_s8(&ctx, &p, <const int8_t *>qa.data, <const int8_t *>ka.data, <const int8_t *>va.data,
                      <const int8_t *>ma.data if mask is not None else NULL,
                      <const int32_t *>lut.data if mask_lut is not None else NULL, <int8_t *>out.data),
          "pe_xattn_s8", _DETAIL)
    if stats:
        return out, {"macs": int(st.macs), "exps": int(st.exps), "rescales": int(st.rescales),
                     "peak_bytes": int(st.peak_bytes), "scratch_bytes": int(need)}
    return out


def lut(table, x):
    """table[x + 128] through pe_lut_s8."""
    cdef cnp.ndarray[int8_t, ndim=1] t = np.ascontiguousarray(table, dtype=np.int8).reshape(-1)
    cdef cnp.ndarray[int8_t, ndim=1] xa = np.ascontiguousarray(x, dtype=np.int8).reshape(-1)
    if t.shape[0] != 256:
        raise ValueError(f"table: expected 256 int8 entries, got {t.shape[0]}")
    cdef cnp.ndarray[int8_t, ndim=1] out = np.empty_like(xa)
    check(pe_lut_s8(<const int8_t *>t.data, <int32_t>xa.shape[0], <const int8_t *>xa.data,
                    <int8_t *>out.data), "pe_lut_s8", "")
    return out.reshape(np.shape(x))
