/* startup.c - vector table and reset handler for the Cortex-M boards of
 * pyembed.target.qemu (Cortex-M0 micro:bit; MPS2 AN385 M3, AN386 M4, AN500
 * M7, AN505 M33; MPS3 AN547 M55; Netduino Plus 2 M4) with newlib
 * semihosting (--specs=rdimon.specs, linked with -nostartfiles: this file is
 * crt0). The table sits at the start of the code memory, where each machine
 * reads its reset vector (VTOR 0, the AN505's Secure VTOR 0x10000000, the
 * STM32F405's flash aliased at 0); the code is Armv6-M clean (Cortex-M0). */
#include <stdint.h>
#include <stdlib.h>

#include "pe_target.h"

extern uint32_t __stack_top;
extern uint32_t __data_load, __data_start, __data_end;
extern uint32_t __bss_start, __bss_end;

extern int main(void);
extern void initialise_monitor_handles(void);

void Reset_Handler(void);
void Default_Handler(void);
void HardFault_Handler(void);
void SysTick_Handler(void);

void Default_Handler(void)
{
    exit(0x7E);
}

void HardFault_Handler(void)
{
    exit(0x7F);
}

typedef void (*pe_vector)(void);

/* 16 system exceptions + 32 external interrupts (Armv6-M has no MemManage,
 * BusFault or UsageFault: those entries are reserved there and never taken). */
__attribute__((section(".vectors"), used))
const pe_vector pe_vector_table[48] = {
    (pe_vector)(uintptr_t)&__stack_top,
    Reset_Handler,
    Default_Handler,   /* NMI */
    HardFault_Handler,
    HardFault_Handler, /* MemManage */
    HardFault_Handler, /* BusFault */
    HardFault_Handler, /* UsageFault */
    0, 0, 0, 0,
    Default_Handler,   /* SVCall */
    Default_Handler,   /* DebugMon */
    0,
    Default_Handler,   /* PendSV */
    SysTick_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler,
};

void Reset_Handler(void)
{
    uint32_t *src = &__data_load;
    uint32_t *dst = &__data_start;
#if defined(__ARM_FP)
    /* CPACR: full access to CP10/CP11 (the FPU) before any FP instruction. */
    *(volatile uint32_t *)0xE000ED88u |= (0xFu << 20);
    __asm volatile("dsb\n\tisb" ::: "memory");
#endif
#if defined(PE_TRAP_UNALIGNED) && __ARM_ARCH >= 7
    /* CCR.UNALIGN_TRP: an unaligned word or halfword access faults (HardFault, exit code
     * 0x7F) as it always does on Armv6-M. With -mno-unaligned-access (gcc then makes none
     * itself) a Cortex-M3+ build finds the C that would fault on a Cortex-M0. */
    *(volatile uint32_t *)0xE000ED14u |= (1u << 3);
    __asm volatile("dsb\n\tisb" ::: "memory");
#endif
    while (dst < &__data_end) {
        *dst++ = *src++;
    }
    for (dst = &__bss_start; dst < &__bss_end; ++dst) {
        *dst = 0u;
    }
    /* the stack reserve below this frame holds PE_STACK_PATTERN: main's peak stack can be read */
    pe_stack_paint();
    initialise_monitor_handles();
    pe_timer_init();
    exit(main());
}
