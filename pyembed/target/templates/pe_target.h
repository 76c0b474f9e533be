/* pe_target.h - tiny target support for pyembed programs run under QEMU
 * (the Cortex-M boards of pyembed.target.qemu) with newlib semihosting.
 *
 * Timing: through the port layer (pe_port.h): SysTick by default, the DWT
 * cycle counter with -DPE_PORT_CLOCK=PE_PORT_CLOCK_DWT where it counts (QEMU
 * reads it as zero: SysTick then). SysTick runs from the processor clock, PE_TICK_HZ (the build
 * defines it per board: 25 MHz on the MPS2 AN385/AN386/AN500 images, 20 MHz
 * on AN505, 32 MHz on AN547, 16 MHz on the micro:bit, 168 MHz on the
 * Netduino Plus 2). Under `qemu-system-arm -icount shift=0` every
 * instruction advances the virtual clock by 1 ns, so one SysTick tick is
 * 1e9 / PE_TICK_HZ instructions (exactly 40 at 25 MHz). The 24-bit counter
 * is extended to 64 bits by counting wraps in the SysTick interrupt.
 * Resolution: one tick.
 *
 * I/O: pe_read_input / pe_write_output move raw bytes through semihosting
 * files ("pe_input.bin", "pe_output.bin" in QEMU's working directory);
 * printf goes to semihosting stdout. Built with -DPE_TARGET_NO_FILES=1 (a
 * firmware without semihosting: pyembed firmware --io uart / none) pe_target.c
 * leaves both out.
 *
 * Stack (paint and scan): the linker script defines __stack_limit, the lowest
 * address of the stack reserve below __stack_top (pyembed.target.qemu's
 * script reserves none: __stack_limit == __stack_top and these report 0).
 * The reset handler paints the reserve below its own frame with
 * PE_STACK_PATTERN before main; pe_stack_paint() paints it again below the
 * caller's frame; pe_stack_lowest() is the lowest word no longer holding the
 * pattern, so (stack pointer when painted) - pe_stack_lowest() is the peak
 * stack of what ran in between (exception frames of interrupts taken there
 * included). A word the code wrote with the pattern itself would hide usage
 * below it: with a 32-bit pattern that is not a small integer nor an
 * address of this map, not expected.
 */
#ifndef PE_TARGET_H
#define PE_TARGET_H

#include <stddef.h>
#include <stdint.h>

#include "pe_port.h"

#ifdef __cplusplus
extern "C" {
#endif

/* PE_TICK_HZ (pe_port.h): ticks per second, the board's processor clock in QEMU. */

/* Starts the port layer's clock (pe_port_clock_init; called by the startup
 * code before main). */
void pe_timer_init(void);
/* 64-bit tick count since pe_timer_init (pe_port_now). */
uint64_t pe_ticks_now(void);
/* Start a measurement: returns the current tick count. */
uint64_t pe_cycles_start(void);
/* Instructions executed since `start` (a pe_cycles_start value), as
 * ticks * 1e9 / PE_TICK_HZ rounded to the nearest: exact to one tick under
 * -icount shift=0. */
uint64_t pe_instructions_since(uint64_t start);

#if !PE_TARGET_NO_FILES
/* Reads up to `n` bytes of the input file into `buf`; returns the number of
 * bytes read, or -1 if there is no input file. */
long pe_read_input(void *buf, size_t n);
/* Appends `n` bytes to the output file (created empty at the first call);
 * returns 0 or -1. */
int pe_write_output(const void *buf, size_t n);
#endif

#define PE_STACK_PATTERN 0xC5A7E6D1u

/* The current stack pointer (inlined: the caller's). */
static inline uintptr_t pe_stack_pointer(void)
{
    uintptr_t sp;
    __asm volatile("mov %0, sp" : "=r"(sp));
    return sp;
}

/* Paints [__stack_limit, this function's stack pointer) with PE_STACK_PATTERN. */
void pe_stack_paint(void);
/* The lowest address in [__stack_limit, __stack_top) not holding the pattern. */
uintptr_t pe_stack_lowest(void);
/* __stack_limit and __stack_top. */
uintptr_t pe_stack_limit(void);
uintptr_t pe_stack_top(void);

#ifdef __cplusplus
}
#endif

#endif /* PE_TARGET_H */
