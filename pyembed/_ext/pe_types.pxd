# Declarations shared by every pyembed Cython module: the C types header and
# the single status -> exception bridge (pyembed.errors.raise_for_status).
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint64_t

cdef extern from "pyembed/pe_types.h":
    ctypedef enum pe_status:
        PE_OK
        PE_ERR_ARG
        PE_ERR_SCRATCH
        PE_ERR_UNSUPPORTED
        PE_ERR_STATE
        PE_ERR_OVERFLOW

    ctypedef struct pe_stats:
        uint64_t macs
        uint64_t combines
        uint64_t exps
        uint64_t rescales
        uint64_t input_reads
        int64_t peak_bytes
        int64_t peak_elems

    ctypedef struct pe_context:
        void *buf
        int32_t size
        pe_stats *stats

    ctypedef struct pe_dims:
        int32_t n
        int32_t h
        int32_t w
        int32_t c

    ctypedef struct pe_tile:
        int32_t h
        int32_t w

    ctypedef struct pe_padding:
        int32_t top
        int32_t bottom
        int32_t left
        int32_t right

    ctypedef struct pe_activation:
        int32_t min
        int32_t max

    ctypedef struct pe_per_channel_quant:
        const int32_t *multiplier
        const int32_t *shift

    ctypedef struct pe_per_tensor_quant:
        int32_t multiplier
        int32_t shift

    ctypedef enum pe_rounding:
        PE_ROUND_DOUBLE
        PE_ROUND_SINGLE

    ctypedef enum pe_shape_rule:
        PE_SHAPE_FLOOR
        PE_SHAPE_CEIL
        PE_SHAPE_NOPAD
        PE_SHAPE_EXPLICIT

    ctypedef struct pe_conv_params:
        int32_t input_offset
        int32_t output_offset
        pe_tile stride
        pe_padding padding
        pe_tile dilation
        int32_t groups
        int32_t ch_mult
        pe_activation activation
        pe_rounding rounding

    ctypedef enum pe_pool_kind:
        PE_POOL_MAX
        PE_POOL_AVG
        PE_POOL_SUM

    ctypedef struct pe_pool_params:
        pe_pool_kind kind
        pe_tile window
        pe_tile stride
        pe_padding padding
        pe_activation activation
        pe_per_tensor_quant sum_quant
        int32_t output_offset


cdef inline str status_name(int status):
    if status == PE_OK:
        return "PE_OK"
    if status == PE_ERR_ARG:
        return "PE_ERR_ARG"
    if status == PE_ERR_SCRATCH:
        return "PE_ERR_SCRATCH"
    if status == PE_ERR_UNSUPPORTED:
        return "PE_ERR_UNSUPPORTED"
    if status == PE_ERR_STATE:
        return "PE_ERR_STATE"
    if status == PE_ERR_OVERFLOW:
        return "PE_ERR_OVERFLOW"
    return "PE_STATUS_%d" % status


cdef inline int check(int status, str where, str detail="") except -1:
    """Raise the pyembed exception for a non-OK status (see pyembed.errors)."""
    if status != PE_OK:
        from pyembed.errors import raise_for_status
        raise_for_status(status_name(status), where, detail)
    return 0


cdef inline dict stats_to_dict(pe_stats *s):
    return {
        "macs": s.macs,
        "combines": s.combines,
        "exps": s.exps,
        "rescales": s.rescales,
        "input_reads": s.input_reads,
        "peak_bytes": s.peak_bytes,
        "peak_elems": s.peak_elems,
    }
