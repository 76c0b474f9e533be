/*
 * pe_fc_w16.h - the graph runner of PE_GOP_FULLY_CONNECTED_W16 (code 112):
 * an int8 FULLY_CONNECTED whose weights were packed offline into int16 by
 * pe_fc_w16_pack (pe_fc.h), run by pe_fully_connected_w16_s8. Bit-exact
 * with the int8 operator it replaces (pyembed.passes.fc_w16 writes it, an
 * opt-in trading about twice the weights' flash for fewer instructions on a
 * DSP target).
 *
 * Inputs: [0] input int8 (any rank; batches = count / K rows of K),
 *         [1] the packed weights, int16, round4(O) * round4(K) values
 *             (pe_fc_w16_pack's layout with the filter offset folded in;
 *             4-byte aligned, else PE_ERR_ARG),
 *         [2] bias int32 [O], -1 or left out.
 * Output: [0] int8, batches * O values.
 * Words (8 + 2 * quant_count):
 *   [0] K (accumulation depth) [1] O (features) [2] input_offset
 *   [3] output_offset [4] act.min [5] act.max [6] rounding (0 double,
 *   1 single: PE_ROUND_DOUBLE / PE_ROUND_SINGLE) [7] quant_count (1: per
 *   tensor, or O: per feature), then quant_count multipliers, then
 *   quant_count shifts.
 * Scratch: the operator's region of at least pe_fc_w16_get_buffer_sizes'
 * scratch_bytes for an [O, K] filter (PE_ERR_SCRATCH otherwise).
 * PE_ERR_ARG for wrong list lengths, a word out of range (the kernel's
 * checks of pe_fully_connected_s8) or tensor counts that disagree with K, O.
 */
#ifndef PYEMBED_PE_FC_W16_H
#define PYEMBED_PE_FC_W16_H

#include "pe_graph.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PE_FC_W16_WORDS 8 /* words before the multipliers and shifts */

pe_status pe_graph_run_fc_w16(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                              const pe_context *arena);

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_FC_W16_H */
