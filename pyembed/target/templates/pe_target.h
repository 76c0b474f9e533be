/* pe_target.h - tiny target support for pyembed programs run under QEMU
 * (MPS2 boards) with newlib semihosting.
 *
 * Timing: SysTick runs from the 25 MHz processor clock of the MPS2 FPGA
 * images. Under `qemu-system-arm -icount shift=0` every instruction advances
 * the virtual clock by 1 ns, so one SysTick tick is exactly 40 instructions.
 * The 24-bit counter is extended to 64 bits by counting wraps in the SysTick
 * interrupt. Resolution: 40 instructions.
 *
 * I/O: pe_read_input / pe_write_output move raw bytes through semihosting
 * files ("pe_input.bin", "pe_output.bin" in QEMU's working directory);
 * printf goes to semihosting stdout.
 */
#ifndef PE_TARGET_H
#define PE_TARGET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* SysTick ticks per second and instructions per tick under -icount shift=0. */
#define PE_TICK_HZ 25000000u
#define PE_INSTRUCTIONS_PER_TICK 40u

/* Starts SysTick (called by the startup code before main). */
void pe_timer_init(void);
/* 64-bit tick count since pe_timer_init. */
uint64_t pe_ticks_now(void);
/* Start a measurement: returns the current tick count. */
uint64_t pe_cycles_start(void);
/* Instructions executed since `start` (a pe_cycles_start value), as
 * ticks * 40: exact to 40 instructions under -icount shift=0. */
uint64_t pe_instructions_since(uint64_t start);

/* Reads up to `n` bytes of the input file into `buf`; returns the number of
 * bytes read, or -1 if there is no input file. */
long pe_read_input(void *buf, size_t n);
/* Appends `n` bytes to the output file (created empty at the first call);
 * returns 0 or -1. */
int pe_write_output(const void *buf, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* PE_TARGET_H */
