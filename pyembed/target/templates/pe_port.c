/* pe_port.c - the port layer's defaults (see pe_port.h): SysTick or DWT
 * CYCCNT as the clock, no log hook, no DMA hook. Registers by address (the
 * Armv6-M/v7-M/v8-M System Control Space), no vendor header. */
#include "pe_port.h"

#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)
#define SYST_RELOAD 0x00FFFFFFu

static volatile uint32_t pe_port_wraps;
static int pe_port_source;

void pe_port_systick_isr(void) { pe_port_wraps++; }

static void systick_start(void)
{
    SYST_CSR = 0u;
    SYST_RVR = SYST_RELOAD;
    SYST_CVR = 0u;
    pe_port_wraps = 0u;
    /* ENABLE | TICKINT | CLKSOURCE = processor clock */
    SYST_CSR = 0x7u;
}

static uint64_t systick_now(void)
{
    uint32_t hi;
    uint32_t cur;
    do {
        hi = pe_port_wraps;
        cur = SYST_CVR;
    } while (hi != pe_port_wraps);
    return ((uint64_t)hi << 24) + (uint64_t)(SYST_RELOAD - (cur & SYST_RELOAD));
}

#if PE_PORT_CLOCK == PE_PORT_CLOCK_DWT
#define DEMCR (*(volatile uint32_t *)0xE000EDFCu)
#define DWT_CTRL (*(volatile uint32_t *)0xE0001000u)
#define DWT_CYCCNT (*(volatile uint32_t *)0xE0001004u)
#define DWT_LAR (*(volatile uint32_t *)0xE0001FB0u)
#define DWT_LSR (*(volatile uint32_t *)0xE0001FB4u)
#define DEMCR_TRCENA (1u << 24)
#define DWT_CTRL_NOCYCCNT (1u << 25)

static uint32_t pe_port_dwt_last;
static uint64_t pe_port_dwt_high;

/* Enables CYCCNT; 0 when it counts, -1 when the core has none or it does not run. */
static int dwt_start(void)
{
    uint32_t a;
    uint32_t b;
    volatile uint32_t spin;
    DEMCR |= DEMCR_TRCENA;
    if ((DWT_LSR & 3u) == 3u) {
        DWT_LAR = 0xC5ACCE55u; /* a software lock implemented and set (the Cortex-M7's): unlock */
    }
    if ((DWT_CTRL & DWT_CTRL_NOCYCCNT) != 0u) {
        return -1;
    }
    DWT_CYCCNT = 0u;
    DWT_CTRL |= 1u; /* CYCCNTENA */
    a = DWT_CYCCNT;
    for (spin = 0u; spin < 16u; spin++) {
    }
    b = DWT_CYCCNT;
    if ((DWT_CTRL & 1u) == 0u || a == b) {
        return -1;
    }
    pe_port_dwt_last = b;
    pe_port_dwt_high = 0u;
    return 0;
}

static uint64_t dwt_now(void)
{
    uint32_t c = DWT_CYCCNT;
    if (c < pe_port_dwt_last) {
        pe_port_dwt_high += (uint64_t)1u << 32;
    }
    pe_port_dwt_last = c;
    return pe_port_dwt_high + c;
}
#endif

int pe_port_clock_init(void)
{
    /* SysTick always runs: it is the fallback, and its wrap interrupt costs nothing between wraps */
    systick_start();
    pe_port_source = PE_PORT_CLOCK_SYSTICK;
#if PE_PORT_CLOCK == PE_PORT_CLOCK_DWT
    if (dwt_start() == 0) {
        pe_port_source = PE_PORT_CLOCK_DWT;
    }
#endif
    return pe_port_source;
}

int pe_port_clock_source(void) { return pe_port_source; }

uint64_t pe_port_now(void)
{
#if PE_PORT_CLOCK == PE_PORT_CLOCK_DWT
    if (pe_port_source == PE_PORT_CLOCK_DWT) {
        return dwt_now();
    }
#endif
    return systick_now();
}

static pe_port_log_fn pe_port_log_hook;
static void *pe_port_log_user;

void pe_port_set_log(pe_port_log_fn fn, void *user)
{
    pe_port_log_hook = fn;
    pe_port_log_user = user;
}

void pe_port_log(const char *text)
{
    size_t n = 0u;
    if (pe_port_log_hook == NULL || text == NULL) {
        return;
    }
    while (text[n] != '\0') {
        n++;
    }
    pe_port_log_hook(pe_port_log_user, text, n);
}

static pe_segload_dma pe_port_dma_hook;
static int pe_port_dma_set;

void pe_port_set_dma(const pe_segload_dma *dma)
{
    if (dma != NULL) {
        pe_port_dma_hook = *dma;
    }
    pe_port_dma_set = dma != NULL;
}

const pe_segload_dma *pe_port_dma(void) { return pe_port_dma_set ? &pe_port_dma_hook : NULL; }
