/*
 * pyembed.h - umbrella header: every public pyembed C API.
 *
 *   pe_types.h      status codes, dims, quantization, activation, scratch context, counters
 *   pe_fixed.h      fixed-point primitives (pe_fx_*)
 *   pe_softmax.h    int8 softmax
 *   pe_pool.h       reverse (output-centric) max / average / sum pooling, streaming
 *   pe_conv.h       reverse convolution and depthwise convolution, streaming
 *   pe_fused.h      convolution -> pooling fusion and the Table I strategies
 *   pe_fc.h         fully connected
 *   pe_eltwise.h    element-wise int8 operators (add, mul, requantize)
 *   pe_attention.h  norm-folded streaming attention
 *   pe_stripe.h     row-by-row stripe execution with line buffers
 *   pe_graph.h      the static graph runtime (operator table + one arena)
 *   pe_sched.h      the cooperative periodic dispatcher
 */
#ifndef PYEMBED_PYEMBED_H
#define PYEMBED_PYEMBED_H

#include "pe_types.h"
#include "pe_fixed.h"
#include "pe_softmax.h"
#include "pe_pool.h"
#include "pe_conv.h"
#include "pe_fused.h"
#include "pe_conv_fc.h"
#include "pe_fc.h"
#include "pe_eltwise.h"
#include "pe_attention.h"
#include "pe_stripe.h"
#include "pe_graph.h"
#include "pe_graph_runners.h"
#include "pe_sched.h"
#include "pe_segload.h"

#endif /* PYEMBED_PYEMBED_H */
