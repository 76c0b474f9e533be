/*
 * pe_stripe_kinds.c - the full table of the stripe executor's layer kinds
 * (pe_stripe_kinds.h): every kind runs. A generated firmware links its
 * model's own table (model/model_ops.c) instead of this file; pyembed's
 * generator reads the kind -> entry point pairs from here, so the two
 * cannot disagree.
 */
#include "pyembed/pe_stripe_kinds.h"

int pe_stripe_kind_linked(int32_t kind)
{
    return kind >= PE_STRIPE_CONV && kind <= PE_STRIPE_CROP;
}

void pe_stripe_compute_kind(struct pe_stripe_run_s *R, int32_t kind, int32_t L, int32_t o, int32_t x0, int32_t x1)
{
    switch (kind) {
    case PE_STRIPE_CONV:
    case PE_STRIPE_POINTWISE:
        pe_stripe_compute_conv(R, L, o, x0, x1);
        break;
    case PE_STRIPE_DEPTHWISE:
        pe_stripe_compute_depthwise(R, L, o, x0, x1);
        break;
    case PE_STRIPE_POOL:
        pe_stripe_compute_pool(R, L, o, x0, x1);
        break;
    case PE_STRIPE_SPACE_TO_DEPTH:
        pe_stripe_compute_space_to_depth(R, L, o, x0, x1);
        break;
    case PE_STRIPE_ADD:
        pe_stripe_compute_add(R, L, o, x0, x1);
        break;
    case PE_STRIPE_CONCAT:
        pe_stripe_compute_concat(R, L, o, x0, x1);
        break;
    case PE_STRIPE_UPSAMPLE2X:
    case PE_STRIPE_UPSAMPLE:
    case PE_STRIPE_DEPTH_TO_SPACE:
        pe_stripe_compute_expand(R, L, o, x0, x1);
        break;
    case PE_STRIPE_TABLE:
        pe_stripe_compute_table(R, L, o, x0, x1);
        break;
    case PE_STRIPE_RESIZE_BILINEAR:
        pe_stripe_compute_bilinear(R, L, o, x0, x1);
        break;
    case PE_STRIPE_CROP:
        pe_stripe_compute_crop(R, L, o, x0, x1);
        break;
    default:
        break;
    }
}
