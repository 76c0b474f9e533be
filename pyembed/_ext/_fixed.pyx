# pyembed-csrc: pe_softmax.c
# cython: language_level=3, boundscheck=False, wraparound=False
"""Bindings for the fixed-point primitives (pe_fixed.h) and softmax (pe_softmax.h).

Every function here takes 1-D C-contiguous arrays already validated and
broadcast by pyembed.kernels.fixed; the Python layer is the public API.
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t
from pyembed._ext.pe_types cimport *

cnp.import_array()

cdef extern from "pyembed/pe_fixed.h":
    int32_t pe_fx_dhm(int32_t a, int32_t b) nogil
    int32_t pe_fx_rdiv_pot(int32_t x, int32_t e) nogil
    int32_t pe_fx_sat_shl(int32_t v, int32_t e) nogil
    int32_t pe_fx_requant(int32_t acc, int32_t m, int32_t s) nogil
    int32_t pe_fx_requant_single(int32_t acc, int32_t m, int32_t s) nogil
    int8_t pe_fx_sat_s8(int32_t v) nogil
    int16_t pe_fx_sat_s16(int32_t v) nogil
    int32_t pe_fx_exp_on_negative(int32_t a) nogil
    int32_t pe_fx_one_over_one_plus_x(int32_t x) nogil
    int32_t pe_fx_exp2_neg_q22(int32_t x) nogil
    const int32_t *pe_fx_exp2_table
    pe_status pe_fx_requant_array(const int32_t *acc, const int32_t *m, const int32_t *s,
                                  int32_t n, pe_rounding mode, int32_t *out) nogil

cdef extern from "pyembed/pe_softmax.h":
    ctypedef struct pe_softmax_params:
        int32_t mult
        int32_t shift
        int32_t diff_min
    pe_status pe_softmax_s8(const pe_softmax_params *p, int32_t rows, int32_t row_size,
                            const int8_t *inp, int8_t *out) nogil
    pe_status pe_softmax_s8_s16(const pe_softmax_params *p, int32_t rows, int32_t row_size,
                                const int8_t *inp, int16_t *out) nogil


def dhm(const int32_t[::1] a, const int32_t[::1] b):
    cdef Py_ssize_t i, n = a.shape[0]
    out = np.empty(n, dtype=np.int32)
    cdef int32_t[::1] o = out
    with nogil:
        for i in range(n):
            o[i] = pe_fx_dhm(a[i], b[i])
    return out


def rdiv_pot(const int32_t[::1] x, const int32_t[::1] e):
    cdef Py_ssize_t i, n = x.shape[0]
    out = np.empty(n, dtype=np.int32)
    cdef int32_t[::1] o = out
    with nogil:
        for i in range(n):
            o[i] = pe_fx_rdiv_pot(x[i], e[i])
    return out


def sat_shl(const int32_t[::1] v, const int32_t[::1] e):
    cdef Py_ssize_t i, n = v.shape[0]
    out = np.empty(n, dtype=np.int32)
    cdef int32_t[::1] o = out
    with nogil:
        for i in range(n):
            o[i] = pe_fx_sat_shl(v[i], e[i])
    return out


def requant(const int32_t[::1] acc, const int32_t[::1] m, const int32_t[::1] s, bint single):
    cdef Py_ssize_t n = acc.shape[0]
    out = np.empty(n, dtype=np.int32)
    cdef int32_t[::1] o = out
    cdef int st
    cdef pe_rounding mode = PE_ROUND_SINGLE if single else PE_ROUND_DOUBLE
    if n == 0:
        return out
    with nogil:
        st = pe_fx_requant_array(&acc[0], &m[0], &s[0], <int32_t>n, mode, &o[0])
    check(st, "pe_fx_requant_array", "multiplier must be >= 0 and shift in [-31, 30]")
    return out


def sat_s8(const int32_t[::1] v):
    cdef Py_ssize_t i, n = v.shape[0]
    out = np.empty(n, dtype=np.int8)
    cdef int8_t[::1] o = out
    with nogil:
        for i in range(n):
            o[i] = pe_fx_sat_s8(v[i])
    return out


def sat_s16(const int32_t[::1] v):
    cdef Py_ssize_t i, n = v.shape[0]
    out = np.empty(n, dtype=np.int16)
    cdef int16_t[::1] o = out
    with nogil:
        for i in range(n):
            o[i] = pe_fx_sat_s16(v[i])
    return out


def exp_on_negative(const int32_t[::1] a):
    cdef Py_ssize_t i, n = a.shape[0]
    out = np.empty(n, dtype=np.int32)
    cdef int32_t[::1] o = out
    with nogil:
        for i in range(n):
            o[i] = pe_fx_exp_on_negative(a[i])
    return out


def one_over_one_plus_x(const int32_t[::1] x):
    cdef Py_ssize_t i, n = x.shape[0]
    out = np.empty(n, dtype=np.int32)
    cdef int32_t[::1] o = out
    with nogil:
        for i in range(n):
            o[i] = pe_fx_one_over_one_plus_x(x[i])
    return out


def exp2_neg_q22(const int32_t[::1] x):
    cdef Py_ssize_t i, n = x.shape[0]
    out = np.empty(n, dtype=np.int32)
    cdef int32_t[::1] o = out
    with nogil:
        for i in range(n):
            o[i] = pe_fx_exp2_neg_q22(x[i])
    return out


def exp2_table():
    cdef Py_ssize_t i
    out = np.empty(1025, dtype=np.int32)
    for i in range(1025):
        out[i] = pe_fx_exp2_table[i]
    return out


def softmax_s8(const int8_t[:, ::1] x, int32_t mult, int32_t shift, int32_t diff_min, bint out16):
    cdef pe_softmax_params p
    cdef int st
    cdef int32_t rows = <int32_t>x.shape[0]
    cdef int32_t cols = <int32_t>x.shape[1]
    p.mult = mult
    p.shift = shift
    p.diff_min = diff_min
    if out16:
        out = np.empty((rows, cols), dtype=np.int16)
        return _softmax16(x, &p, out)
    out = np.empty((rows, cols), dtype=np.int8)
    cdef int8_t[:, ::1] o8 = out
    if rows == 0:
        return out
    with nogil:
        st = pe_softmax_s8(&p, rows, cols, &x[0, 0], &o8[0, 0])
    check(st, "pe_softmax_s8", "mult must be > 0, shift in [0, 31], row_size >= 1")
    return out


cdef object _softmax16(const int8_t[:, ::1] x, pe_softmax_params *p, object out):
    cdef int16_t[:, ::1] o = out
    cdef int st
    if x.shape[0] == 0:
        return out
    with nogil:
        st = pe_softmax_s8_s16(p, <int32_t>x.shape[0], <int32_t>x.shape[1], &x[0, 0], &o[0, 0])
    check(st, "pe_softmax_s8_s16", "mult must be > 0, shift in [0, 31], row_size >= 1")
    return out
