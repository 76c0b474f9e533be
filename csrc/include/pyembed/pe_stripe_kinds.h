/*
 * pe_stripe_kinds.h - the stripe executor's layer kinds, one entry point each
 * (pipeline room).
 *
 * The executor (pe_stripe.c) computes a layer's block of output columns by
 * calling pe_stripe_compute_kind, which calls the entry point of the layer's
 * kind. pe_stripe_compute_kind and pe_stripe_kind_linked are not defined next
 * to the executor: the full table, src/pipeline/pe_stripe_kinds.c, names
 * every kind (the Python extensions, the C tests and the fuzzers link it); a
 * generated firmware links its model's own table instead (model/model_ops.c,
 * pyembed.codegen.optable), which names only the kinds its stripe regions
 * use, so that --gc-sections leaves the other kinds' code (the depthwise row
 * loops in a model without depthwise layers, bilinear resizing...) out of
 * flash. A region holding a kind the table leaves out is refused before it
 * runs (PE_ERR_UNSUPPORTED).
 */
#ifndef PE_STRIPE_KINDS_H
#define PE_STRIPE_KINDS_H

#include <stdint.h>

#include "pyembed/pe_stripe.h"

/* the executor's state of one run (private to pe_stripe.c) */
struct pe_stripe_run_s;

/* columns [x0, x1) of output row o of layer L, one function per kind (or kinds) */
void pe_stripe_compute_conv(struct pe_stripe_run_s *R, int32_t L, int32_t o, int32_t x0, int32_t x1);      /* CONV, POINTWISE */
void pe_stripe_compute_depthwise(struct pe_stripe_run_s *R, int32_t L, int32_t o, int32_t x0, int32_t x1);
void pe_stripe_compute_pool(struct pe_stripe_run_s *R, int32_t L, int32_t o, int32_t x0, int32_t x1);
void pe_stripe_compute_space_to_depth(struct pe_stripe_run_s *R, int32_t L, int32_t o, int32_t x0, int32_t x1);
void pe_stripe_compute_add(struct pe_stripe_run_s *R, int32_t L, int32_t o, int32_t x0, int32_t x1);
void pe_stripe_compute_concat(struct pe_stripe_run_s *R, int32_t L, int32_t o, int32_t x0, int32_t x1);
/* UPSAMPLE2X, UPSAMPLE, DEPTH_TO_SPACE */
void pe_stripe_compute_expand(struct pe_stripe_run_s *R, int32_t L, int32_t o, int32_t x0, int32_t x1);
void pe_stripe_compute_table(struct pe_stripe_run_s *R, int32_t L, int32_t o, int32_t x0, int32_t x1);
void pe_stripe_compute_bilinear(struct pe_stripe_run_s *R, int32_t L, int32_t o, int32_t x0, int32_t x1);
void pe_stripe_compute_crop(struct pe_stripe_run_s *R, int32_t L, int32_t o, int32_t x0, int32_t x1);

/* 1 when this build's table runs kind (a pe_stripe_op), else 0 */
int pe_stripe_kind_linked(int32_t kind);

/* calls kind's entry point (nothing for a kind pe_stripe_kind_linked denies:
 * the executor checks every layer before it runs) */
void pe_stripe_compute_kind(struct pe_stripe_run_s *R, int32_t kind, int32_t L, int32_t o, int32_t x0, int32_t x1);

#endif /* PE_STRIPE_KINDS_H */
