/*
 * pe_resvar.h - resource variables of streaming models (TFLite's VAR_HANDLE,
 * READ_VARIABLE, ASSIGN_VARIABLE and CALL_ONCE), lowered at import to state
 * tensors of the arena (pyembed/model/ops/resvar.py).
 *
 * A variable is a variable tensor of the arena (int8, int16, int32 or
 * float32). READ_VARIABLE copies it into an activation, ASSIGN_VARIABLE copies
 * an activation or constant into it, CALL_ONCE copies each variable's initial
 * value into it on the first invoke of a fresh arena (an int32 flag, 0 in a
 * fresh arena, set to 1; the reset of the states leaves it alone, as TFLM's
 * reset leaves its CALL_ONCE done). Values are copied byte for byte: TFLM
 * does not requantize them either.
 */
#ifndef PE_RESVAR_H
#define PE_RESVAR_H

#include <stdint.h>
#include "pyembed/pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Scratch bytes of the copies: none. */
int32_t pe_var_copy_scratch_size(void);

/* Copy bytes (>= 0) from src to dst; the two must not overlap unless equal.
 * PE_ERR_ARG on a NULL pointer with bytes > 0 or a negative count. */
pe_status pe_var_copy(const void *src, void *dst, int32_t bytes);

#ifdef __cplusplus
}
#endif

#endif
