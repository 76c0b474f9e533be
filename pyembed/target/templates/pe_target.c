/* pe_target.c - timing through the port layer (pe_port.c: SysTick, or the DWT
 * cycle counter) and semihosting file I/O (see pe_target.h; left out when
 * PE_TARGET_NO_FILES is defined: a firmware without semihosting). */
#include "pe_target.h"

#if !PE_TARGET_NO_FILES
#include <stdio.h>
#endif

void SysTick_Handler(void);
void SysTick_Handler(void) { pe_port_systick_isr(); }

void pe_timer_init(void) { (void)pe_port_clock_init(); }

uint64_t pe_ticks_now(void) { return pe_port_now(); }

uint64_t pe_cycles_start(void) { return pe_port_now(); }

uint64_t pe_instructions_since(uint64_t start)
{
    const uint64_t hz = (uint64_t)PE_TICK_HZ;
    const uint64_t ticks = pe_ticks_now() - start;
    /* ticks * 1e9 / hz without overflowing 64 bits */
    return (ticks / hz) * 1000000000u + ((ticks % hz) * 1000000000u + hz / 2u) / hz;
}

#if !PE_TARGET_NO_FILES
long pe_read_input(void *buf, size_t n)
{
    FILE *f = fopen("pe_input.bin", "rb");
    size_t got;
    if (f == NULL) {
        return -1;
    }
    got = fread(buf, 1, n, f);
    fclose(f);
    return (long)got;
}
#endif

extern uint32_t __stack_limit;
extern uint32_t __stack_top;

void pe_stack_paint(void)
{
    /* The loop is assembly that reads SP itself: in C, the stack pointer read
     * first and the prologue's push placed after it (gcc's shrink-wrapping,
     * seen for the Cortex-M55) would paint this function's saved return
     * address. Armv6-M instructions only; low registers for Thumb-1. */
    uint32_t *p = &__stack_limit;
    const uint32_t pattern = PE_STACK_PATTERN;
    __asm volatile(".syntax unified\n"
                   "    mov r2, sp\n"
                   "1:  cmp %0, r2\n"
                   "    bhs 2f\n"
                   "    str %1, [%0]\n"
                   "    adds %0, %0, #4\n"
                   "    b 1b\n"
                   "2:\n"
                   : "+l"(p)
                   : "l"(pattern)
                   : "r2", "cc", "memory");
}

uintptr_t pe_stack_lowest(void)
{
    const volatile uint32_t *p = &__stack_limit;
    while ((const uint32_t *)p < &__stack_top && *p == PE_STACK_PATTERN) {
        p++;
    }
    return (uintptr_t)p;
}

uintptr_t pe_stack_limit(void) { return (uintptr_t)&__stack_limit; }

uintptr_t pe_stack_top(void) { return (uintptr_t)&__stack_top; }

#if !PE_TARGET_NO_FILES
static int pe_output_started;

int pe_write_output(const void *buf, size_t n)
{
    FILE *f = fopen("pe_output.bin", pe_output_started ? "ab" : "wb");
    size_t put;
    if (f == NULL) {
        return -1;
    }
    pe_output_started = 1;
    put = fwrite(buf, 1, n, f);
    fclose(f);
    return put == n ? 0 : -1;
}
#endif
