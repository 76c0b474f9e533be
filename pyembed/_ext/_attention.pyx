# pyembed-csrc: pe_attention.c pe_attention_dsp.c
# cython: language_level=3, boundscheck=False, wraparound=False
"""Bindings for the streaming attention and its baseline (pe_attention.h).

Arguments arrive validated by pyembed.kernels.attention (dtypes, shapes, ranges);
the C kernels check them again and every status becomes an exception here.
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int8_t, int32_t, uint8_t
from libc.string cimport memset
from pyembed._ext.pe_types cimport *

cnp.import_array()

cdef extern from "pyembed/pe_attention.h":
    ctypedef enum pe_attn_fold:
        PE_ATTN_FOLD_LATE
        PE_ATTN_FOLD_EARLY
        PE_ATTN_FOLD_AUTO

    ctypedef enum pe_attn_baseline:
        PE_ATTN_BASE_ROW
        PE_ATTN_BASE_MATRIX

    ctypedef struct pe_attn_dims:
        int32_t n
        int32_t m
        int32_t d
        int32_t dv
        int32_t heads

    ctypedef struct pe_attn_params:
        int32_t q_offset
        int32_t k_offset
        int32_t v_offset
        pe_per_tensor_quant score_quant
        int32_t block
        pe_attn_fold fold
        const int32_t *key_begin
        const int32_t *key_end

    int PE_ATTN_OUT_FRAC_BITS
    int PE_ATTN_PROB_FRAC_BITS
    int PE_ATTN_LOG2_FRAC_BITS
    int PE_ATTN_MAX_KEYS
    int PE_ATTN_MAX_DEPTH
    int PE_ATTN_COST_MAC
    int PE_ATTN_COST_EXP
    int PE_ATTN_COST_DIV

    pe_status pe_attention_nf_get_buffer_size(const pe_attn_params *p, const pe_attn_dims *d,
                                              int32_t *size) nogil
    pe_status pe_attention_nf_choose_fold(const pe_attn_params *p, const pe_attn_dims *d,
                                          pe_attn_fold *chosen) nogil
    pe_status pe_attention_nf_s8(const pe_context *ctx, const pe_attn_params *p,
                                 const pe_attn_dims *d, const int8_t *q, const int8_t *k,
                                 const int8_t *v, int32_t *out) nogil
    pe_status pe_attention_conv_get_buffer_size(const pe_attn_params *p, pe_attn_baseline kind,
                                                const pe_attn_dims *d, int32_t *size) nogil
    pe_status pe_attention_conv_s8(const pe_context *ctx, const pe_attn_params *p,
                                   pe_attn_baseline kind, const pe_attn_dims *d,
                                   const int8_t *q, const int8_t *k, const int8_t *v,
                                   int32_t *out) nogil

OUT_FRAC_BITS = PE_ATTN_OUT_FRAC_BITS
PROB_FRAC_BITS = PE_ATTN_PROB_FRAC_BITS
LOG2_FRAC_BITS = PE_ATTN_LOG2_FRAC_BITS
MAX_KEYS = PE_ATTN_MAX_KEYS
MAX_DEPTH = PE_ATTN_MAX_DEPTH
COST_MAC = PE_ATTN_COST_MAC
COST_EXP = PE_ATTN_COST_EXP
COST_DIV = PE_ATTN_COST_DIV

_FOLDS = {"late": PE_ATTN_FOLD_LATE, "early": PE_ATTN_FOLD_EARLY, "auto": PE_ATTN_FOLD_AUTO}
_FOLD_NAMES = {PE_ATTN_FOLD_LATE: "late", PE_ATTN_FOLD_EARLY: "early"}
_BASELINES = {"row": PE_ATTN_BASE_ROW, "matrix": PE_ATTN_BASE_MATRIX}

_DETAIL = ("n, m, d, dv, heads, block >= 1; m <= 2^24; d <= 16384; offsets in [-127, 128]; "
           "0 <= key_begin < key_end <= m for every row")


cdef void _fill(pe_attn_params *p, pe_attn_dims *dm, int n, int m, int d, int dv, int heads,
                int q_offset, int k_offset, int v_offset, int mult, int shift, int block,
                int fold):
    memset(p, 0, sizeof(pe_attn_params))
    dm.n = n
    dm.m = m
    dm.d = d
    dm.dv = dv
    dm.heads = heads
    p.q_offset = q_offset
    p.k_offset = k_offset
    p.v_offset = v_offset
    p.score_quant.multiplier = mult
    p.score_quant.shift = shift
    p.block = block
    p.fold = <pe_attn_fold>fold


def nf_buffer_size(int d, int dv, int heads, int block):
    """Scratch bytes of the streaming kernel (independent of n and m)."""
    cdef pe_attn_params p
    cdef pe_attn_dims dm
    cdef int32_t size = 0
    _fill(&p, &dm, 1, 1, d, dv, heads, 0, 0, 0, 0, 0, block, PE_ATTN_FOLD_LATE)
    check(pe_attention_nf_get_buffer_size(&p, &dm, &size), "pe_attention_nf_get_buffer_size", _DETAIL)
    return size


def conv_buffer_size(str kind, int n, int m, int d, int dv, int heads):
    cdef pe_attn_params p
    cdef pe_attn_dims dm
    cdef int32_t size = 0
    _fill(&p, &dm, n, m, d, dv, heads, 0, 0, 0, 0, 0, 1, PE_ATTN_FOLD_LATE)
    check(pe_attention_conv_get_buffer_size(&p, _BASELINES[kind], &dm, &size),
          "pe_attention_conv_get_buffer_size", _DETAIL)
    return size


def run(const int8_t[:, ::1] q, const int8_t[:, ::1] k, const int8_t[:, ::1] v, int32_t[:, ::1] out,
        int heads, int q_offset, int k_offset, int v_offset, int mult, int shift, int block,
        str fold, str baseline, key_begin, key_end, user_scratch=None):
    """Run the streaming kernel (baseline None) or the baseline ("row" / "matrix").

    user_scratch: None (allocate what the size query asks for) or a uint8
    array the caller provides (the kernel checks its size). Returns the
    counters as a dict, with the fold actually used and the scratch bytes the
    size query asked for."""
    cdef pe_attn_params p
    cdef pe_attn_dims dm
    cdef pe_context ctx
    cdef pe_stats stats
    cdef pe_attn_fold chosen = PE_ATTN_FOLD_LATE
    cdef pe_attn_baseline kind = PE_ATTN_BASE_ROW
    cdef int32_t need = 0
    cdef int st
    cdef const int32_t[::1] kb
    cdef const int32_t[::1] ke
    cdef uint8_t[::1] scratch
    cdef int n = q.shape[0], m = k.shape[0]
    _fill(&p, &dm, n, m, q.shape[1] // heads, v.shape[1] // heads, heads, q_offset, k_offset,
          v_offset, mult, shift, block, _FOLDS[fold])
    if key_begin is not None:
        kb = key_begin
        ke = key_end
        p.key_begin = &kb[0]
        p.key_end = &ke[0]
    if baseline is None:
        check(pe_attention_nf_choose_fold(&p, &dm, &chosen), "pe_attention_nf_choose_fold", _DETAIL)
        check(pe_attention_nf_get_buffer_size(&p, &dm, &need), "pe_attention_nf_get_buffer_size", _DETAIL)
    else:
        kind = _BASELINES[baseline]
        check(pe_attention_conv_get_buffer_size(&p, kind, &dm, &need),
              "pe_attention_conv_get_buffer_size", _DETAIL)
    if user_scratch is None:
        scratch = np.empty(max(need, 1), dtype=np.uint8)
        ctx.size = need
    else:
        scratch = user_scratch
        ctx.size = <int32_t>min(scratch.shape[0], 2**31 - 1)
    memset(&stats, 0, sizeof(pe_stats))
    ctx.buf = &scratch[0] if scratch.shape[0] > 0 else NULL
    ctx.stats = &stats
    if baseline is None:
        with nogil:
            st = pe_attention_nf_s8(&ctx, &p, &dm, &q[0, 0], &k[0, 0], &v[0, 0], &out[0, 0])
        check(st, "pe_attention_nf_s8", _DETAIL)
    else:
        with nogil:
            st = pe_attention_conv_s8(&ctx, &p, kind, &dm, &q[0, 0], &k[0, 0], &v[0, 0], &out[0, 0])
        check(st, "pe_attention_conv_s8", _DETAIL)
    return {
        "macs": stats.macs,
        "exps": stats.exps,
        "rescales": stats.rescales,
        "peak_bytes": stats.peak_bytes,
        "scratch_bytes": need,
        "fold": _FOLD_NAMES[chosen] if baseline is None else None,
    }
