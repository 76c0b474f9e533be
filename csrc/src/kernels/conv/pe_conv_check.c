/*
 * pe_conv_check.c - the argument checks of the convolution kernels
 * (pe_conv.h): pe_conv_check_geometry (dimensions, strides, padding,
 * offsets, activation range, rounding, the channel relation of conv groups
 * or of a depthwise multiplier, every coordinate the kernels form inside
 * int32) and pe_conv_check_quant (per-channel multipliers and shifts, and
 * the int32 accumulator bound taps * PE_CONV_MAX_PRODUCT + |bias|), which
 * every form and the kernels built on them (fused, stripe, transpose conv)
 * call before they run.
 */
#include <stdint.h>

#include "pyembed/pe_conv.h"
#include "pyembed/pe_fixed.h"

/* |w * (x + input_offset)| <= 128 * 255 */
#define PE_CONV_MAX_PRODUCT ((int64_t)128 * 255)

pe_status pe_conv_check_geometry(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                                 const pe_dims *out, int32_t depthwise)
{
    if (p == NULL || in == NULL || f == NULL || out == NULL) {
        return PE_ERR_ARG;
    }
    if (in->n < 1 || in->h < 1 || in->w < 1 || in->c < 1 || out->n != in->n || out->h < 1 ||
        out->w < 1 || out->c < 1 || f->h < 1 || f->w < 1 || f->n < 1 || f->c < 1) {
        return PE_ERR_ARG;
    }
    if (p->stride.h < 1 || p->stride.w < 1 || p->dilation.h < 1 || p->dilation.w < 1 ||
        p->padding.top < 0 || p->padding.left < 0) {
        return PE_ERR_ARG;
    }
    if (p->input_offset < -127 || p->input_offset > 128 || p->output_offset < -128 ||
        p->output_offset > 127 || p->activation.min < -128 || p->activation.max > 127 ||
        p->activation.min > p->activation.max) {
        return PE_ERR_ARG;
    }
    if (p->rounding != PE_ROUND_DOUBLE && p->rounding != PE_ROUND_SINGLE) {
        return PE_ERR_ARG;
    }
    /* every coordinate the kernels form stays inside int32 */
    if ((int64_t)(out->h - 1) * p->stride.h + (int64_t)(f->h - 1) * p->dilation.h + 1 >
            PE_INT32_MAX ||
        (int64_t)(out->w - 1) * p->stride.w + (int64_t)(f->w - 1) * p->dilation.w + 1 >
            PE_INT32_MAX ||
        (int64_t)in->h + p->padding.top > PE_INT32_MAX ||
        (int64_t)in->w + p->padding.left > PE_INT32_MAX) {
        return PE_ERR_OVERFLOW;
    }
    if (depthwise) {
        if (p->ch_mult < 1 || (int64_t)in->c * p->ch_mult != out->c || f->n != 1 ||
            f->c != out->c) {
            return PE_ERR_ARG;
        }
    } else {
        if (p->groups < 1 || (int64_t)f->c * p->groups != in->c || out->c % p->groups != 0 ||
            f->n != out->c) {
            return PE_ERR_ARG;
        }
    }
    return PE_OK;
}

pe_status pe_conv_check_quant(const pe_per_channel_quant *q, const int32_t *bias,
                              int32_t out_c, int64_t taps)
{
    int64_t max_bias = 0;
    int32_t oc;
    if (q == NULL || q->multiplier == NULL || q->shift == NULL || out_c < 1 || taps < 1) {
        return PE_ERR_ARG;
    }
    for (oc = 0; oc < out_c; oc++) {
        const int64_t b = bias != NULL ? (int64_t)bias[oc] : 0;
        const int64_t ab = b < 0 ? -b : b;
        if (q->multiplier[oc] < 0 || q->shift[oc] < -31 || q->shift[oc] > 30) {
            return PE_ERR_ARG;
        }
        if (ab > max_bias) {
            max_bias = ab;
        }
    }
    if (taps > PE_INT32_MAX || taps * PE_CONV_MAX_PRODUCT + max_bias > (int64_t)PE_INT32_MAX) {
        return PE_ERR_UNSUPPORTED;
    }
    return PE_OK;
}
