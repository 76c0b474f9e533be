/*
 * pe_resvar.c - the byte copies behind the lowered resource variables (pe_resvar.h).
 */
#include "pyembed/pe_resvar.h"

int32_t pe_var_copy_scratch_size(void)
{
    return 0;
}

pe_status pe_var_copy(const void *src, void *dst, int32_t bytes)
{
    const uint8_t *s = (const uint8_t *)src;
    uint8_t *d = (uint8_t *)dst;
    int32_t i;
    if (bytes < 0 || (bytes > 0 && (src == NULL || dst == NULL))) {
        return PE_ERR_ARG;
    }
    if (s == d) {
        return PE_OK;
    }
    /* overlap, compared as addresses (pointers into different objects do not compare in C) */
    {
        const uintptr_t ps = (uintptr_t)src, pd = (uintptr_t)dst;
        if ((ps < pd && pd - ps < (uintptr_t)bytes) || (pd < ps && ps - pd < (uintptr_t)bytes)) {
            return PE_ERR_ARG;
        }
    }
    for (i = 0; i < bytes; ++i) {
        d[i] = s[i];
    }
    return PE_OK;
}
