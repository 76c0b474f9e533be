/* pe_port.h - the port layer of a pyembed firmware: what the board gives the
 * model's harness, each piece with a default that compiles on every Cortex-M
 * (Armv6-M to Armv8.1-M) and needs no vendor header.
 *
 * Clock (the per-operator timing hooks and the whole-invoke timing use it):
 *   PE_PORT_CLOCK_SYSTICK  SysTick on the processor clock, a 24-bit down
 *                          counter extended to 64 bits by its wrap interrupt
 *                          (every core; the default).
 *   PE_PORT_CLOCK_DWT      the DWT cycle counter CYCCNT (Armv7-M and Armv8-M
 *                          Mainline: Cortex-M3/M4/M7/M33/M55; not on the
 *                          Cortex-M0/M0+, where selecting it is a compile
 *                          error), a 32-bit up counter extended to 64 bits at
 *                          each read (read it at least once per 2^32 cycles).
 *                          pe_port_clock_init checks that CYCCNT counts (the
 *                          core may lack it, a debugger may own it, QEMU
 *                          reads it as zero) and falls back to SysTick.
 *   Build with -DPE_PORT_CLOCK=PE_PORT_CLOCK_DWT to choose the DWT; both count
 *   processor clock cycles at PE_TICK_HZ (under QEMU -icount shift=0 a tick of
 *   SysTick is 1e9 / PE_TICK_HZ instructions).
 *
 * Log hook: pe_port_log(text) hands text to the function given with
 *   pe_port_set_log (a UART, RTT, semihosting ...); without one it does
 *   nothing.
 *
 * DMA hook for the segment loader: pe_port_set_dma(&hook) records a
 *   pe_segload_dma (pyembed/pe_segload.h: start and wait a copy); a segmented
 *   model's harness passes pe_port_dma() to pe_model_set_segment_dma before
 *   pe_model_init. Without one it is NULL and the loader copies with memcpy.
 */
#ifndef PE_PORT_H
#define PE_PORT_H

#include <stddef.h>
#include <stdint.h>

#include "pyembed/pe_segload.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PE_PORT_CLOCK_SYSTICK 1
#define PE_PORT_CLOCK_DWT 2

#ifndef PE_PORT_CLOCK
#define PE_PORT_CLOCK PE_PORT_CLOCK_SYSTICK
#endif

/* 1 where the architecture has the DWT cycle counter (Armv7-M, Armv8-M Mainline). */
#if defined(__ARM_ARCH_7M__) || defined(__ARM_ARCH_7EM__) || defined(__ARM_ARCH_8M_MAIN__) || \
    defined(__ARM_ARCH_8_1M_MAIN__)
#define PE_PORT_HAS_DWT 1
#else
#define PE_PORT_HAS_DWT 0
#endif

#if PE_PORT_CLOCK == PE_PORT_CLOCK_DWT && !PE_PORT_HAS_DWT
#error "PE_PORT_CLOCK_DWT: this core has no DWT cycle counter (Armv6-M, Armv8-M Baseline); use PE_PORT_CLOCK_SYSTICK"
#endif
#if PE_PORT_CLOCK != PE_PORT_CLOCK_SYSTICK && PE_PORT_CLOCK != PE_PORT_CLOCK_DWT
#error "PE_PORT_CLOCK: expected PE_PORT_CLOCK_SYSTICK or PE_PORT_CLOCK_DWT"
#endif

/* The processor clock both sources count (Hz). */
#ifndef PE_TICK_HZ
#define PE_TICK_HZ 25000000u
#endif

/* Starts the clock chosen by PE_PORT_CLOCK; returns the source that runs
 * (PE_PORT_CLOCK_SYSTICK after a fallback from a DWT that does not count). */
int pe_port_clock_init(void);
/* The source pe_port_clock_init started (0 before it ran). */
int pe_port_clock_source(void);
/* Processor clock cycles since pe_port_clock_init, 64 bits. */
uint64_t pe_port_now(void);
/* SysTick's wrap interrupt (the vector table's SysTick_Handler calls it). */
void pe_port_systick_isr(void);

typedef void (*pe_port_log_fn)(void *user, const char *text, size_t n);
/* Sets (or with NULL clears) the log hook. */
void pe_port_set_log(pe_port_log_fn fn, void *user);
/* Hands a NUL-terminated text to the log hook; nothing without one. */
void pe_port_log(const char *text);

/* Records the segment loader's DMA hook (copied; NULL: none, memcpy). */
void pe_port_set_dma(const pe_segload_dma *dma);
/* The recorded hook, or NULL. */
const pe_segload_dma *pe_port_dma(void);

#ifdef __cplusplus
}
#endif

#endif /* PE_PORT_H */
