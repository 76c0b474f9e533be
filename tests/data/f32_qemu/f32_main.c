/* Cortex-M4 (mps2-an386) driver of the float32 kernels for tests/test_ops_f32_qemu.py:
 * reads n floats, runs every unary op of pe_f32.h on them and ADD/SUB/MUL/DIV/MAXIMUM/
 * MINIMUM/SQUARED_DIFFERENCE of the first half against the second half, and writes
 * the results (float32) back, one op after the other. */
#include <stdint.h>
#include "pe_target.h"
#include "pyembed/pe_f32.h"

#define N 512
static float x[N], y[N];

int main(void)
{
    int32_t op, half = N / 2, shape = N / 2;
    if (pe_read_input(x, sizeof x) != (long)sizeof x) {
        return 2;
    }
    for (op = 0; op < PE_F32_UNARY_COUNT; op++) {
        if (pe_f32_unary(op, x, y, N) != PE_OK) return 3;
        pe_write_output(y, sizeof y);
    }
    for (op = 0; op < PE_F32_BINARY_COUNT; op++) {
        if (pe_f32_binary(op, x, &shape, x + half, &shape, y, &shape, 1, -3.0e38f, 3.0e38f) != PE_OK) return 4;
        pe_write_output(y, (size_t)half * sizeof(float));
    }
    return 0;
}
