/*
 * pe_ctrlflow.c - the next-entry rule of the control flow operators (pe_ctrlflow.h).
 */
#include "pyembed/pe_ctrlflow.h"

int32_t pe_ctrl_scratch_size(void)
{
    return 0;
}

pe_status pe_ctrl_next(int32_t i, int32_t num_ops, int jump, int cond, int32_t target, int32_t *next)
{
    if (next == NULL || num_ops < 1 || i < 0 || i >= num_ops || target < 0 || target > num_ops) {
        return PE_ERR_ARG;
    }
    *next = (jump || !cond) ? target : i + 1;
    return PE_OK;
}
