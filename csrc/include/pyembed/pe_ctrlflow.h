/*
 * pe_ctrlflow.h - control flow in the flat operator table: TFLite's IF and
 * WHILE, whose subgraphs pyembed's importer inlines into the operator list
 * (pyembed/model/ctrlflow_import.py, pyembed/model/ops/ctrlflow.py).
 *
 * Three operators, each with an int8 [1] token output (every operator has an
 * output; the token also keeps the operator alive through graph passes):
 *
 *  PE_GOP_BRANCH (97): input 0 a bool condition (its first byte is read);
 *    words [target]. When the condition is false the executor continues at
 *    table entry target, else at the next entry. The token receives the
 *    condition (0 / 1).
 *  PE_GOP_JUMP (98): no input; words [target]. The executor continues at
 *    table entry target (a WHILE's back edge, the end of an IF's then branch).
 *  PE_GOP_CTRL_COPY (99): byte copies of tensors of any type; words [mode, n]:
 *    mode 0 (select, an IF's join): inputs cond, a_1..a_n, b_1..b_n; outputs
 *      y_1..y_n: y_k = a_k when cond's first byte is non-zero, else b_k;
 *    mode 1 (into states, a WHILE's loop-carried values): inputs src_1..src_n,
 *      state_1..state_n (written in place), then any number of inputs that
 *      only order the operator; output 0 the token (set to 1);
 *    mode 2 (plain, a WHILE's outputs): inputs x_1..x_n, outputs y_1..y_n.
 *    Each source and destination must have one byte count; a source equal to
 *    its destination is left alone, partly overlapping ones are PE_ERR_ARG.
 *
 * pe_graph_next (pe_graph.h) gives the table entry that follows entry i:
 * target for a JUMP or a BRANCH whose condition is false, i + 1 otherwise; a
 * target is in [0, num_ops] (num_ops ends the invoke). No iteration cap: a
 * WHILE runs as long as its condition holds, as in TFLM.
 */
#ifndef PE_CTRLFLOW_H
#define PE_CTRLFLOW_H

#include <stdint.h>
#include "pyembed/pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Scratch bytes of the control flow operators: none. */
int32_t pe_ctrl_scratch_size(void);

/* The entry after entry i of a table of num_ops entries: jump (non-zero) or
 * a false cond (0) -> target, else i + 1. PE_ERR_ARG for a target outside
 * [0, num_ops] or i outside [0, num_ops). */
pe_status pe_ctrl_next(int32_t i, int32_t num_ops, int jump, int cond, int32_t target, int32_t *next);

#ifdef __cplusplus
}
#endif

#endif
