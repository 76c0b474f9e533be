# pyembed-csrc: pe_f32.c
# cython: language_level=3, boundscheck=False, wraparound=False
"""Bindings for the float32 element-wise kernels (csrc/include/pyembed/pe_f32.h).
Arrays arrive float32, C-contiguous and of the right shapes: pyembed.kernels.f32
checks them and is the public API."""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int32_t
from pyembed._ext.pe_types cimport *

cnp.import_array()

cdef extern from "pyembed/pe_f32.h":
    pe_status pe_f32_scratch_size(int32_t *size) nogil
    pe_status pe_f32_unary(int32_t op, const float *x, float *y, int32_t n) nogil
    pe_status pe_f32_binary(int32_t op, const float *a, const int32_t *a_shape,
                            const float *b, const int32_t *b_shape,
                            float *y, const int32_t *y_shape, int32_t rank,
                            float act_min, float act_max) nogil


def scratch_size():
    cdef int32_t size = -1
    cdef pe_status st = pe_f32_scratch_size(&size)
    return int(st), int(size)


def unary(int op, cnp.ndarray x, cnp.ndarray y):
    cdef pe_status st
    with nogil:
        st = pe_f32_unary(op, <const float *>x.data, <float *>y.data, <int32_t>x.size)
    return int(st)


def binary(int op, cnp.ndarray a, cnp.ndarray a_shape, cnp.ndarray b, cnp.ndarray b_shape,
           cnp.ndarray y, cnp.ndarray y_shape, float act_min, float act_max):
    cdef pe_status st
    cdef int32_t rank = <int32_t>y_shape.size
    with nogil:
        st = pe_f32_binary(op, <const float *>a.data, <const int32_t *>a_shape.data,
                           <const float *>b.data, <const int32_t *>b_shape.data,
                           <float *>y.data, <const int32_t *>y_shape.data, rank, act_min, act_max)
    return int(st)
