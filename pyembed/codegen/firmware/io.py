"""How a generated firmware talks to the outside (``pyembed firmware --io``),
and the boards' start-up code when it does not use semihosting.

    semihost  (default) main.c reads pe_input.bin and writes pe_output.bin
              through semihosting (newlib rdimon): QEMU or a debugger must
              serve it; on a board without one it stops at the first call.
    uart      the input is compiled into the image (pe_input.c: the bytes of
              pe_input.bin as a const array in flash) and main.c prints the
              outputs, the status, the SysTick ticks (processor clock cycles)
              of the invoke and of every operator and the peak stack as text
              lines through a polled UART driver for the board (pe_uart.c);
              newlib without semihosting (nosys). Boards: UART_BOARDS.
    none      as uart without any output: the results stay in main.c's
              globals (pe_result_*), and the program then spins in a loop
              without a breakpoint, for a debugger to attach and read them.

For uart and none the project's startup.c is generated here per board: a
vector table with every interrupt of the part, the FPU enabled, .data and
.bss set up, the clocks the UART needs (the STM32F405's RCC enables; the MPS2
and nRF51 UARTs need none), then main, then an endless loop.

The UART lines (``parse_uart_output`` reads them)::

    pe_begin <model>
    pe_status <pe_status of the invoke>
    pe_output <k> <bytes> <hex of the output's bytes>
    pe_op <table index> <model operator> <ticks>
    pe_invoke_ticks <ticks of the whole invoke>
    pe_tick_hz <PE_TICK_HZ>
    pe_instructions <ticks * 1e9 / PE_TICK_HZ: instructions under QEMU -icount shift=0>
    pe_stack <peak of the invoke> <peak of main before it> <reserve>
    pe_clock <status> <SYSCLK Hz>   (STM32F405 only: STM32_CLOCK_STATUS)
    pe_end
"""
from __future__ import annotations

import dataclasses
import re
import struct

from pyembed.codegen.firmware.files import input_rows_callback, op_timing_hooks, output_rows_callback
from pyembed.errors import ArgumentError, UnsupportedError

IO_MODES = ("semihost", "uart", "none")
DEFAULT_IO = "semihost"

UART_BAUD = 115200


@dataclasses.dataclass(frozen=True)
class BoardIO:
    """A board's UART (polled, transmit only) and start-up needs."""

    device: str          # what the UART is, for the comments and firmware.json
    base: int            # the UART's registers
    irqs: int            # external interrupts of the part (vector table entries after the 16 system ones)
    kind: str            # "cmsdk", "nrf51" or "stm32"
    uart_clock_hz: int   # the clock the baud rate divider divides
    note: str            # where the address comes from


# QEMU 7.2's board sources, each checked by running a generated --io uart project on the machine:
# hw/arm/mps2.c: UART0 of the CMSDK APB UARTs at 0x40004000 is serial_hd(0) (AN385/AN386/AN500).
# hw/arm/mps2-tz.c: AN505 UART0 at 0x40200000 (Non-secure alias), 0x50200000 Secure; AN547 UART0 at 0x49303000,
#   0x59303000 Secure. The firmware runs Secure (the SAU off), so it uses the Secure aliases.
# hw/arm/nrf51_soc.c + hw/char/nrf51_uart.c: the micro:bit's UART at 0x40002000, serial_hd(0).
# hw/arm/stm32f405_soc.c + hw/char/stm32f2xx_usart.c: USART1 at 0x40011000 is serial_hd(0).
UART_BOARDS: dict[str, BoardIO] = {
    "mps2-an385": BoardIO("CMSDK APB UART0", 0x40004000, 32, "cmsdk", 25_000_000, "hw/arm/mps2.c"),
    "mps2-an386": BoardIO("CMSDK APB UART0", 0x40004000, 32, "cmsdk", 25_000_000, "hw/arm/mps2.c"),
    "mps2-an500": BoardIO("CMSDK APB UART0", 0x40004000, 32, "cmsdk", 25_000_000, "hw/arm/mps2.c"),
    "mps2-an505": BoardIO("CMSDK APB UART0 (Secure alias)", 0x50200000, 92, "cmsdk", 20_000_000,
                          "hw/arm/mps2-tz.c (0x40200000 Non-secure)"),
    "mps3-an547": BoardIO("CMSDK APB UART0 (Secure alias)", 0x59303000, 96, "cmsdk", 25_000_000,
                          "hw/arm/mps2-tz.c (0x49303000 Non-secure)"),
    "microbit": BoardIO("nRF51 UART0 (TX on P0.24)", 0x40002000, 32, "nrf51", 16_000_000, "hw/arm/nrf51_soc.c"),
    "netduinoplus2": BoardIO("STM32F405 USART1 (TX on PA9, AF7)", 0x40011000, 82, "stm32", 16_000_000,
                             "hw/arm/stm32f405_soc.c"),
}

# external interrupts of a part pyembed has no UART driver for (--io none): the Armv6-M maximum, a
# table every Cortex-M accepts
GENERIC_IRQS = 32

# external interrupts of parts without a UART driver here, for --io none's vector table
PART_IRQS = {"rp2040": 26}

# parts that cannot boot from the image pyembed links: what is missing
BOOT_STAGE_MISSING = {
    "rp2040": ("RP2040 needs the Raspberry Pi Pico SDK's boot2 (boot_stage2) for its QSPI flash; pyembed does not "
               "ship one: use --layout library or link with the Pico SDK"),
}
# the second stage a part's boot ROM loads (RP2040: 256 bytes at the start of the flash, checked by CRC-32/MPEG-2;
# it sets up the QSPI flash for execute-in-place, then enters the vector table at flash + 256)
BOOT2_BYTES = 256


def check_io(io, profile_name, streamed=False):
    """io as given (one of IO_MODES) checked against the profile: uart needs a
    UART driver for the board. Returns io."""
    if io not in IO_MODES:
        raise ArgumentError(f"io: expected one of {', '.join(IO_MODES)}, got {io!r}")
    name = str(profile_name).lower()
    if io == "uart" and name not in UART_BOARDS:
        raise UnsupportedError(f"--io uart: pyembed has no UART driver for profile {profile_name} (it has one for "
                               f"{', '.join(sorted(UART_BOARDS))}); use --io none or --io semihost, or add your "
                               f"UART to the generated project")
    return io


def check_boot(profile_name, boot2=None):
    """Refuses a part whose boot needs a stage pyembed cannot generate (RP2040's
    boot2) unless boot2 (the user's image, bytes) is given and passes the
    boot ROM's check (check_boot2); refuses boot2 for a part that takes none.
    Returns boot2."""
    missing = BOOT_STAGE_MISSING.get(str(profile_name).lower())
    if missing and boot2 is None:
        raise UnsupportedError(f"{missing} (or give your flash chip's 256-byte boot2 image with --boot2 FILE)")
    if boot2 is not None and not missing:
        raise ArgumentError(f"--boot2: profile {profile_name} boots without a second stage; leave --boot2 out")
    return None if boot2 is None else check_boot2(boot2)


def boot2_source(data):
    """pe_boot2.c: the user's boot2 image in section .boot2 (link.ld puts it at the flash's first 256 bytes)."""
    data = check_boot2(data)
    rows = ",\n".join("    " + ", ".join(f"0x{b:02X}" for b in data[i:i + 16]) for i in range(0, len(data), 16))
    crc = struct.unpack_from("<I", data, 252)[0]
    return f"""/* pe_boot2.c - generated by pyembed: the boot2 image given with --boot2 (256 bytes, its
 * CRC-32/MPEG-2 0x{crc:08X} checked), in section .boot2 at the start of the flash, where the boot ROM
 * loads it from; it enters this image's vector table at the flash's base + 256. */
#include <stdint.h>

__attribute__((section(".boot2"), used))
const uint8_t pe_boot2[{BOOT2_BYTES}] = {{
{rows}
}};
"""


def boot2_crc(data: bytes) -> int:
    """CRC-32/MPEG-2 (polynomial 0x04C11DB7, initial 0xFFFFFFFF, no reflection, no final xor) of data:
    the RP2040 boot ROM's check of boot2's first 252 bytes."""
    crc = 0xFFFFFFFF
    for b in bytes(data):
        crc ^= b << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7) & 0xFFFFFFFF if crc & 0x80000000 else (crc << 1) & 0xFFFFFFFF
    return crc


def check_boot2(data: bytes) -> bytes:
    """A boot2 image as the RP2040 boot ROM accepts it: 256 bytes whose last 4
    hold (little-endian) the CRC-32/MPEG-2 of the first 252. Returns data."""
    if not isinstance(data, (bytes, bytearray)):
        raise ArgumentError(f"boot2: expected bytes, got {type(data).__name__}")
    if len(data) != BOOT2_BYTES:
        raise ArgumentError(f"boot2: expected {BOOT2_BYTES} bytes (252 of code and a CRC-32), got {len(data)}")
    want = boot2_crc(data[:252])
    got = struct.unpack_from("<I", data, 252)[0]
    if want != got:
        raise ArgumentError(f"boot2: its CRC-32/MPEG-2 word is 0x{got:08X}, the first 252 bytes give 0x{want:08X} "
                            f"(the boot ROM would refuse it)")
    return bytes(data)


def _bare_name(name):
    return re.sub(r"[^A-Za-z0-9_.-]", "_", str(name))[:64] or "model"


# ---------------------------------------------------------------- C texts

def uart_header():
    return """/* pe_uart.h - polled, transmit-only UART of the board (pe_uart.c, generated by pyembed):
 * pe_uart_init once, then pe_uart_putc / pe_uart_puts / pe_uart_hex / pe_uart_dec. */
#ifndef PE_UART_H
#define PE_UART_H

#include <stdint.h>

void pe_uart_init(void);
void pe_uart_putc(char c);
/* waits until the last character has left the transmitter */
void pe_uart_flush(void);
void pe_uart_puts(const char *s);
/* n bytes as 2n lowercase hex digits */
void pe_uart_hex(const void *p, uint32_t n);
/* an unsigned / signed decimal */
void pe_uart_dec(uint64_t v);
void pe_uart_sdec(int64_t v);

#endif /* PE_UART_H */
"""


def _uart_driver(board):
    b = UART_BOARDS[board]
    if b.kind == "cmsdk":
        div = b.uart_clock_hz // UART_BAUD
        return f"""/* {b.device} at 0x{b.base:08X} ({b.note}): DATA 0x00, STATE 0x04 (bit 0: transmit
 * buffer full), CTRL 0x08 (bit 0: transmit enable), BAUDDIV 0x10 (the APB clock / the baud rate,
 * at least 16). No clock to enable. */
#define UART_DATA (*(volatile uint32_t *)0x{b.base:08X}u)
#define UART_STATE (*(volatile uint32_t *)0x{b.base + 4:08X}u)
#define UART_CTRL (*(volatile uint32_t *)0x{b.base + 8:08X}u)
#define UART_BAUDDIV (*(volatile uint32_t *)0x{b.base + 0x10:08X}u)

void pe_uart_init(void)
{{
    UART_BAUDDIV = {div}u; /* {b.uart_clock_hz} Hz / {UART_BAUD} baud */
    UART_CTRL = 1u;
}}

void pe_uart_putc(char c)
{{
    while ((UART_STATE & 1u) != 0u) {{
    }}
    UART_DATA = (uint32_t)(uint8_t)c;
}}

void pe_uart_flush(void)
{{
    while ((UART_STATE & 1u) != 0u) {{
    }}
}}
"""
    if b.kind == "nrf51":
        return f"""/* {b.device} at 0x{b.base:08X} ({b.note}): TASKS_STARTTX 0x008, EVENTS_TXDRDY
 * 0x11C, ENABLE 0x500 (4: on), PSELTXD 0x50C, TXD 0x51C, BAUDRATE 0x524. It runs from the
 * 16 MHz clock the part starts on; no clock set-up. */
#define UART_STARTTX (*(volatile uint32_t *)0x{b.base + 0x008:08X}u)
#define UART_TXDRDY (*(volatile uint32_t *)0x{b.base + 0x11C:08X}u)
#define UART_ENABLE (*(volatile uint32_t *)0x{b.base + 0x500:08X}u)
#define UART_PSELTXD (*(volatile uint32_t *)0x{b.base + 0x50C:08X}u)
#define UART_TXD (*(volatile uint32_t *)0x{b.base + 0x51C:08X}u)
#define UART_BAUDRATE (*(volatile uint32_t *)0x{b.base + 0x524:08X}u)

void pe_uart_init(void)
{{
    UART_PSELTXD = 24u;          /* the micro:bit's USB serial TX pin */
    UART_BAUDRATE = 0x01D7E000u; /* 115200 baud */
    UART_ENABLE = 4u;
    UART_STARTTX = 1u;
}}

void pe_uart_putc(char c)
{{
    UART_TXDRDY = 0u;
    UART_TXD = (uint32_t)(uint8_t)c;
    while (UART_TXDRDY == 0u) {{
    }}
}}

void pe_uart_flush(void)
{{
}}
"""
    # STM32F4 USART
    return f"""/* {b.device} at 0x{b.base:08X} ({b.note}): SR 0x00 (bit 7 TXE, bit 6 TC), DR 0x04,
 * BRR 0x08, CR1 0x0C (bit 13 UE, bit 3 TE). Its clock and the GPIO port's are enabled in RCC
 * by pe_board_init (startup.c); BRR divides APB2's clock, pe_apb2_hz: 84 MHz after startup.c's
 * clock set-up, the {b.uart_clock_hz // 1_000_000} MHz HSI when it fell back (pe_clock_status). */
#define USART_SR (*(volatile uint32_t *)0x{b.base:08X}u)
#define USART_DR (*(volatile uint32_t *)0x{b.base + 4:08X}u)
#define USART_BRR (*(volatile uint32_t *)0x{b.base + 8:08X}u)
#define USART_CR1 (*(volatile uint32_t *)0x{b.base + 0xC:08X}u)

extern volatile uint32_t pe_apb2_hz;

void pe_uart_init(void)
{{
    /* oversampling by 16: BRR = f / baud, rounded (mantissa [15:4], fraction [3:0]) */
    USART_BRR = (pe_apb2_hz + {UART_BAUD // 2}u) / {UART_BAUD}u;
    USART_CR1 = (1u << 13) | (1u << 3);
}}

void pe_uart_putc(char c)
{{
    while ((USART_SR & (1u << 7)) == 0u) {{
    }}
    USART_DR = (uint32_t)(uint8_t)c;
}}

void pe_uart_flush(void)
{{
    while ((USART_SR & (1u << 6)) == 0u) {{
    }}
}}
"""


def uart_source(board):
    """pe_uart.c for board (one of UART_BOARDS)."""
    return f"""/* pe_uart.c - generated by pyembed for board {board}: a polled, transmit-only UART
 * ({UART_BAUD} baud, 8N1) and the number formatting main.c prints with (no stdio). */
#include "pe_uart.h"

{_uart_driver(board)}
void pe_uart_puts(const char *s)
{{
    while (*s != '\\0') {{
        pe_uart_putc(*s++);
    }}
}}

void pe_uart_hex(const void *p, uint32_t n)
{{
    static const char digits[] = "0123456789abcdef";
    const uint8_t *b = (const uint8_t *)p;
    uint32_t i;
    for (i = 0u; i < n; i++) {{
        pe_uart_putc(digits[b[i] >> 4]);
        pe_uart_putc(digits[b[i] & 15u]);
    }}
}}

void pe_uart_dec(uint64_t v)
{{
    char buf[21];
    int k = 0;
    do {{
        buf[k++] = (char)('0' + (int)(v % 10u));
        v /= 10u;
    }} while (v != 0u);
    while (k > 0) {{
        pe_uart_putc(buf[--k]);
    }}
}}

void pe_uart_sdec(int64_t v)
{{
    if (v < 0) {{
        pe_uart_putc('-');
        pe_uart_dec((uint64_t)0 - (uint64_t)v);
    }} else {{
        pe_uart_dec((uint64_t)v);
    }}
}}
"""


# pe_clock_status of the STM32F405's clock set-up (startup.c, pe_board_init): 0 the PLL runs SYSCLK at 168 MHz,
# else the step whose ready bit or read-back never came within PE_CLOCK_WAIT polls (the part then stays
# on its 16 MHz HSI, as at reset). Under QEMU 7.2 the RCC is an unimplemented device (reads 0): status 1.
STM32_CLOCK_STATUS = {0: "PLL: SYSCLK 168 MHz", 1: "HSE not ready (HSI 16 MHz kept)",
                      2: "PLL not locked (HSI 16 MHz kept)", 3: "flash wait states not taken (HSI 16 MHz kept)",
                      4: "switch to the PLL not confirmed (HSI 16 MHz kept)"}

# the clock set-up for the STM32F405 (RM0090 rev 19, section 6 "Reset and clock control" and 3.5.1
# "Relation between CPU clock frequency and Flash memory read time", table 10)
_STM32_CLOCK = r"""
/* The STM32F405's clock tree (RM0090): the Netduino Plus 2's 25 MHz crystal (HSE; PE_HSE_HZ, any whole
 * number of MHz from 4 to 26) through the main PLL: M = PE_HSE_HZ / 1 MHz (1 MHz into the VCO),
 * N 336 (VCO 336 MHz), P 2 (SYSCLK 168 MHz), Q 7 (48 MHz for USB / SDIO); AHB 168 MHz, APB1 / 4
 * (42 MHz), APB2 / 2 (84 MHz: USART1); the flash at 5 wait states (168 MHz at 2.7-3.6 V) with
 * prefetch and the instruction and data caches, set and read back before SYSCLK switches. Every wait
 * polls at most PE_CLOCK_WAIT times: a ready bit that never comes undoes the step and leaves the part
 * on its 16 MHz HSI, with pe_clock_status naming the step (1 HSE not ready, 2 PLL not locked, 3 flash
 * latency not taken, 4 switch not confirmed; 0: 168 MHz). QEMU 7.2 does not model this RCC (its reads
 * return 0): there the status is 1 and the part's model clocks SysTick at 168 MHz regardless. */
#ifndef PE_HSE_HZ
#define PE_HSE_HZ 25000000u
#endif
#ifndef PE_CLOCK_WAIT
#define PE_CLOCK_WAIT 200000u
#endif
#if (PE_HSE_HZ % 1000000u) != 0u || PE_HSE_HZ < 4000000u || PE_HSE_HZ > 26000000u
#error "PE_HSE_HZ: a whole number of MHz from 4 to 26 MHz (the PLL divides it to 1 MHz)"
#endif
#define RCC_CR (*(volatile uint32_t *)0x40023800u)
#define RCC_PLLCFGR (*(volatile uint32_t *)0x40023804u)
#define RCC_CFGR (*(volatile uint32_t *)0x40023808u)
#define RCC_APB1ENR (*(volatile uint32_t *)0x40023840u)
#define PWR_CR (*(volatile uint32_t *)0x40007000u)
#define FLASH_ACR (*(volatile uint32_t *)0x40023C00u)

volatile uint32_t pe_clock_status;
volatile uint32_t pe_sysclk_hz;
volatile uint32_t pe_apb2_hz;

/* 1 when (*reg & mask) == value within PE_CLOCK_WAIT reads, else 0 */
static int wait_for(volatile uint32_t *reg, uint32_t mask, uint32_t value)
{
    uint32_t n;
    for (n = 0u; n < PE_CLOCK_WAIT; n++) {
        if ((*reg & mask) == value) {
            return 1;
        }
    }
    return 0;
}

static uint32_t clock_init(void)
{
    RCC_CR |= 1u << 16; /* HSEON */
    if (!wait_for(&RCC_CR, 1u << 17, 1u << 17)) { /* HSERDY */
        RCC_CR &= ~(1u << 16);
        return 1u;
    }
    RCC_APB1ENR |= 1u << 28; /* PWREN */
    (void)RCC_APB1ENR;
    PWR_CR |= 1u << 14; /* VOS: regulator scale 1, for 168 MHz */
    /* PLLM [5:0], PLLN [14:6], PLLP [17:16] (0: / 2), PLLSRC [22] (1: HSE), PLLQ [27:24]; the rest kept */
    RCC_PLLCFGR = (RCC_PLLCFGR & 0xF0BC8000u) | (7u << 24) | (1u << 22) | (336u << 6) | (PE_HSE_HZ / 1000000u);
    RCC_CR |= 1u << 24; /* PLLON */
    if (!wait_for(&RCC_CR, 1u << 25, 1u << 25)) { /* PLLRDY */
        RCC_CR &= ~((1u << 24) | (1u << 16));
        return 2u;
    }
    FLASH_ACR = (1u << 10) | (1u << 9) | (1u << 8) | 5u; /* DCEN, ICEN, PRFTEN, LATENCY 5 */
    if (!wait_for(&FLASH_ACR, 7u, 5u)) {                 /* RM0090: read back before raising the clock */
        FLASH_ACR = 0u;
        RCC_CR &= ~((1u << 24) | (1u << 16));
        return 3u;
    }
    /* HPRE [7:4] 0: AHB / 1; PPRE1 [12:10] 5: APB1 / 4; PPRE2 [15:13] 4: APB2 / 2 */
    RCC_CFGR = (RCC_CFGR & ~((0xFu << 4) | (7u << 10) | (7u << 13))) | (5u << 10) | (4u << 13);
    RCC_CFGR = (RCC_CFGR & ~3u) | 2u; /* SW: the PLL */
    if (!wait_for(&RCC_CFGR, 3u << 2, 2u << 2)) { /* SWS */
        RCC_CFGR &= ~(3u | (7u << 10) | (7u << 13)); /* back to the HSI, APB prescalers / 1 */
        RCC_CR &= ~((1u << 24) | (1u << 16));
        return 4u;
    }
    return 0u;
}
"""


def board_clock_source(board):
    """C definitions the board's pe_board_init calls before its statements (the STM32F405's clock
    set-up, _STM32_CLOCK), or ""."""
    b = UART_BOARDS.get(board)
    return _STM32_CLOCK if b is not None and b.kind == "stm32" else ""


def _board_init(board):
    """C statements of pe_board_init: what the board needs before the UART works."""
    b = UART_BOARDS.get(board)
    if b is not None and b.kind == "stm32":
        return """    pe_clock_status = clock_init();
    pe_sysclk_hz = pe_clock_status == 0u ? 168000000u : 16000000u;
    pe_apb2_hz = pe_clock_status == 0u ? 84000000u : 16000000u; /* USART1's clock (pe_uart.c's BRR) */
    /* RCC (0x40023800): AHB1ENR bit 0 GPIOA, APB2ENR bit 4 USART1; then PA9 as alternate
     * function 7 (USART1_TX): GPIOA MODER bits 19:18 = 2, AFRH bits 7:4 = 7. SysTick counts the
     * SYSCLK: pe_sysclk_hz on the part (QEMU's model clocks it at 168 MHz whatever the RCC says). */
    *(volatile uint32_t *)0x40023830u |= 1u;
    *(volatile uint32_t *)0x40023844u |= 1u << 4;
    (void)*(volatile uint32_t *)0x40023844u; /* the enable takes effect before the first access */
    *(volatile uint32_t *)0x40020000u = (*(volatile uint32_t *)0x40020000u & ~(3u << 18)) | (2u << 18);
    *(volatile uint32_t *)0x40020024u = (*(volatile uint32_t *)0x40020024u & ~(15u << 4)) | (7u << 4);
"""
    if b is not None:
        return f"    /* {b.device}: no clock or pin set-up needed before it runs */\n"
    return "    /* no UART: nothing to set up */\n"


def _irq_rows(irqs):
    rows = []
    for i in range(0, irqs, 4):
        rows.append("    " + " ".join("Default_Handler," for _ in range(min(4, irqs - i))) + f" /* IRQ {i}.. */")
    return "\n".join(rows)


def startup_source(board, io):
    """startup.c for io uart / none on board (a profile name; a part without
    a UART driver gets the generic table, for --io none)."""
    b = UART_BOARDS.get(board)
    irqs = b.irqs if b is not None else PART_IRQS.get(board, GENERIC_IRQS)
    uart = io == "uart"
    fault = ("""    pe_uart_puts("\\npe_fault ");
    pe_uart_puts(what);
    pe_uart_puts("\\npe_end\\n");
    pe_uart_flush();
""" if uart else "    (void)what;\n")
    return f"""/* startup.c - generated by pyembed for {board} (--io {io}): the vector table (16 system
 * exceptions and the part's {irqs} interrupts), the reset handler (FPU, .data, .bss, the
 * board's set-up, SysTick), main, then an endless loop (no semihosting, no breakpoint: a
 * debugger may attach at any time). A fault {'prints "pe_fault" on the UART and ' if uart else ''}stops in
 * pe_halt with pe_fault_code set (1 HardFault, 2 another exception). */
#include <stdint.h>

#include "pe_target.h"
{'#include "pe_uart.h"' if uart else ''}

extern uint32_t __stack_top;
extern uint32_t __data_load, __data_start, __data_end;
extern uint32_t __bss_start, __bss_end;

extern int main(void);

void Reset_Handler(void);
void Default_Handler(void);
void HardFault_Handler(void);
void SysTick_Handler(void);
void pe_board_init(void);
void pe_halt(void);

volatile uint32_t pe_fault_code;
volatile int32_t pe_main_returned;

void pe_halt(void)
{{
    for (;;) {{
        __asm volatile("" ::: "memory");
    }}
}}

static void fault(uint32_t code, const char *what)
{{
    pe_fault_code = code;
{fault}    pe_halt();
}}

void Default_Handler(void)
{{
    fault(2u, "exception");
}}

void HardFault_Handler(void)
{{
    fault(1u, "hardfault");
}}

{board_clock_source(board)}
void pe_board_init(void)
{{
{_board_init(board)}}}

typedef void (*pe_vector)(void);

/* Armv6-M has no MemManage, BusFault or UsageFault: those entries are reserved there. */
__attribute__((section(".vectors"), used))
const pe_vector pe_vector_table[16 + {irqs}] = {{
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
{_irq_rows(irqs)}
}};

void Reset_Handler(void)
{{
    uint32_t *src = &__data_load;
    uint32_t *dst = &__data_start;
#if defined(__ARM_FP)
    /* CPACR: full access to CP10/CP11 (the FPU) before any FP instruction. */
    *(volatile uint32_t *)0xE000ED88u |= (0xFu << 20);
    __asm volatile("dsb\\n\\tisb" ::: "memory");
#endif
    while (dst < &__data_end) {{
        *dst++ = *src++;
    }}
    for (dst = &__bss_start; dst < &__bss_end; ++dst) {{
        *dst = 0u;
    }}
    /* the stack reserve below this frame holds PE_STACK_PATTERN: main's peak stack can be read */
    pe_stack_paint();
    pe_board_init();
    pe_timer_init();
    pe_main_returned = main();
    pe_halt();
}}
"""


def input_source(data):
    """pe_input.c: the input bytes (pe_input.bin's) as a const array in flash."""
    data = bytes(data)
    rows = [", ".join(f"0x{b:02X}" for b in data[i:i + 16]) for i in range(0, len(data), 16)]
    body = ",\n".join(f"    {r}" for r in rows) if rows else "    0"
    return f"""/* pe_input.c - generated by pyembed: the model's input compiled into the image (the bytes of
 * pe_input.bin: every input in input order, {len(data)} B), since without semihosting there
 * is no host file to read. main.c copies it into the model's input buffers. */
#include <stdint.h>

const uint32_t pe_input_bytes = {len(data)}u;
const uint8_t pe_input_data[{max(len(data), 1)}] __attribute__((aligned(4))) = {{
{body}
}};
"""


_INSTRUCTIONS_FN = """/* ticks as instructions under -icount shift=0: ticks * 1e9 / PE_TICK_HZ, rounded */
static uint64_t instructions(uint64_t ticks)
{
    const uint64_t hz = (uint64_t)PE_TICK_HZ;
    return (ticks / hz) * 1000000000u + ((ticks % hz) * 1000000000u + hz / 2u) / hz;
}
"""


def _streamed_decl(P):
    """A streamed input 0 read in place from the built-in input (in flash, as a
    sample in flash or a camera's frame memory), row by row."""
    return f"""
/* The streamed input's frame: the built-in input itself (input 0 is its first
 * {P}_INPUT0_BYTES bytes), read in place from flash. The model never sees it
 * whole: it asks input_rows for one row range at a time, as a camera or DMA
 * driver would deliver it, and no byte of it is in the arena. */
#define input_frame ((const int8_t *)pe_input_data)
{input_rows_callback(P)}"""


def main_source(graph, prefix, ops, io, streamed=False, board=None):
    """main.c for io uart / none: the built-in input, one timed invoke, the
    results in globals and (uart) printed. streamed: input 0 is streamed
    (read in place from the built-in input, row by row). board: a board with
    a clock set-up (the STM32F405) also prints its pe_clock line."""
    from pyembed.codegen.escape import c_comment
    P = prefix.upper()
    uart = io == "uart"
    clock = uart and bool(board_clock_source(board))
    streamed_decl = _streamed_decl(P) if streamed else ""
    copy_in = (f"""        if (k == 0) {{
            /* the streamed input is read in place: input_frame is pe_input_data itself */
            at += (uint32_t){P}_INPUT0_BYTES;
            continue;
        }}
        p = pe_model_input(k, &n);""" if streamed else "        p = pe_model_input(k, &n);")
    invoke = ("""    {
        pe_row_source src;
        src.read = input_rows;
        src.user = NULL;
        st = pe_model_invoke_rows(&src);
    }""" if streamed else "    st = pe_model_invoke();")
    streamed_out = bool(graph.outputs) and graph.tensors[graph.outputs[0]].streamed
    get_out = "        const void *q = pe_model_output(k, &n);"
    if streamed_out:
        # a streamed output 0: the row sink copies each row into output_frame (in .bss, outside the
        # planned RAM), which is printed (uart) or left for a debugger (none) as output 0
        streamed_decl += f"""
/* The streamed output's frame, outside the planned RAM (.bss), standing for a display or the
 * next stage's buffer: the model hands each row to output_rows as soon as it is final and
 * never stores the output in its arena. */
static int8_t output_frame[{P}_OUTPUT0_BYTES] __attribute__((aligned(4)));
{output_rows_callback(P)}"""
        src = ("        pe_row_source src;\n", "        src.read = input_rows;\n        src.user = NULL;\n") \
            if streamed else ("", "")
        invoke = ("    {\n" + src[0] + "        pe_row_sink sink;\n" + src[1] + "        sink.write = output_rows;\n"
                  f"        sink.user = NULL;\n        st = pe_model_invoke_io({'&src' if streamed else 'NULL'}, "
                  "&sink);\n    }")
        get_out = (f"        const void *q = k == 0 ? (const void *)output_frame : pe_model_output(k, &n);\n"
                   f"        n = k == 0 ? (uint32_t){P}_OUTPUT0_BYTES : n;")
    prints = ""
    rows_line = ("    pe_uart_puts(\"pe_input_rows_given \");\n    pe_uart_dec(rows_given);\n"
                 "    pe_uart_puts(\"\\n\");\n") if streamed else ""
    if streamed_out:
        rows_line += ("    pe_uart_puts(\"pe_output_rows_taken \");\n    pe_uart_dec(rows_taken);\n"
                      "    pe_uart_puts(\"\\n\");\n")
    clock_line = ('    pe_uart_puts("\\npe_clock ");\n    pe_uart_dec(pe_clock_status);\n    pe_uart_puts(" ");\n'
                  '    pe_uart_dec(pe_sysclk_hz);\n') if clock else ""
    if uart:
        prints = f"""
    pe_uart_puts("pe_begin {_bare_name(graph.name)}\\n");
    pe_uart_puts("pe_status ");
    pe_uart_sdec(st);
    pe_uart_puts("\\n");
    for (k = 0; k < {P}_NUM_OUTPUTS; k++) {{
{get_out}
        pe_uart_puts("pe_output ");
        pe_uart_dec((uint64_t)k);
        pe_uart_puts(" ");
        pe_uart_dec(q != NULL ? n : 0u);
        pe_uart_puts(" ");
        if (q != NULL) {{
            pe_uart_hex(q, n);
        }}
        pe_uart_puts("\\n");
    }}
    for (k = 0; k < pe_model_num_ops() && k < NUM_OPS; k++) {{
        pe_uart_puts("pe_op ");
        pe_uart_dec((uint64_t)k);
        pe_uart_puts(" ");
        pe_uart_dec((uint64_t)pe_model_op_index(k));
        pe_uart_puts(" ");
        pe_uart_dec(op_ticks[k]);
        pe_uart_puts("\\n");
    }}
{rows_line}    pe_uart_puts("pe_invoke_ticks ");
    pe_uart_dec(pe_result_ticks);
    pe_uart_puts("\\npe_tick_hz ");
    pe_uart_dec((uint64_t)PE_TICK_HZ);
    pe_uart_puts("\\npe_instructions ");
    pe_uart_dec(instructions(pe_result_ticks));
    pe_uart_puts("\\npe_stack ");
    pe_uart_dec(pe_result_stack[0]);
    pe_uart_puts(" ");
    pe_uart_dec(pe_result_stack[1]);
    pe_uart_puts(" ");
    pe_uart_dec(pe_result_stack[2]);
{clock_line}    pe_uart_puts("\\npe_end\\n");
    pe_uart_flush();"""
    how = ("prints the results as text lines on the board's UART (pe_uart.c; the format: "
           "pyembed.codegen.firmware.io)" if uart else
           "prints nothing: the results stay in the pe_result_* globals for a debugger (pe_result_done "
           "becomes 1), the outputs in the model's output buffers (pe_model_output)")
    return f"""/*
 * main.c - harness for model "{c_comment(graph.name)}" on a board (--io {io}), generated by
 * pyembed: no semihosting. The input is the array pe_input.c compiles into the image (the bytes
 * of pe_input.bin); the model runs once with per-operator timing (pe_port_now: SysTick ticks =
 * processor clock cycles at PE_TICK_HZ; under qemu-system-arm -icount shift=0 one tick is
 * 1e9 / PE_TICK_HZ instructions); main then {how}.
 * Returns 0, or 10 + |status| on a failure (startup.c keeps it in pe_main_returned).
 */
#include <string.h>
#include "pe_model.h"
#include "model_data.h"
#include "pe_port.h"
#include "pe_target.h"
{'#include "pe_uart.h"' if uart else ''}
{'extern volatile uint32_t pe_clock_status, pe_sysclk_hz; /* startup.c: the clock set-up */' if clock else ''}
#define NUM_OPS {max(len(ops), 1)}

extern const uint32_t pe_input_bytes;
extern const uint8_t pe_input_data[];

/* the results (read them with a debugger: --io none) */
volatile int32_t pe_result_status = -1000;
volatile uint64_t pe_result_ticks;
volatile uint32_t pe_result_stack[3]; /* peak of the invoke (0xFFFFFFFF: overflowed), of main, reserve */
volatile uint32_t pe_result_done;

static uint64_t op_ticks[NUM_OPS];
{streamed_decl}
{op_timing_hooks("op_ticks[k] = t;")}

{_INSTRUCTIONS_FN if uart else ""}
int main(void)
{{
    int32_t k;
    uint32_t n;
    uint32_t at = 0u;
    uint64_t t0;
    uintptr_t sp0;
    uintptr_t stack_low;
    uint32_t stack_main;
    pe_status st;
{'    pe_uart_init();' if uart else ''}
#if PE_MODEL_SEGMENTED
    pe_model_set_segment_dma(pe_port_dma());
#endif
    st = pe_model_init();
    for (k = 0; st == PE_OK && k < {P}_NUM_INPUTS; k++) {{
        void *p;
        n = 0u;
{copy_in}
        if (p == NULL || at + n > pe_input_bytes) {{
            st = PE_ERR_ARG;
            break;
        }}
        memcpy(p, pe_input_data + at, n);
        at += n;
    }}
    if (st == PE_OK && at != pe_input_bytes) {{
        st = PE_ERR_ARG;
    }}
    pe_model_set_hooks(before_op, after_op, NULL);
    stack_main = (uint32_t)(pe_stack_top() - pe_stack_lowest());
    sp0 = pe_stack_pointer();
    pe_stack_paint();
    t0 = pe_port_now();
    if (st == PE_OK) {{
{chr(10).join('    ' + ln for ln in invoke.splitlines())}
    }}
    pe_result_ticks = pe_port_now() - t0;
    stack_low = pe_stack_lowest();
    pe_result_status = (int32_t)st;
    pe_result_stack[0] = stack_low > pe_stack_limit() ? (uint32_t)(sp0 - stack_low) : 0xFFFFFFFFu;
    pe_result_stack[1] = stack_main;
    pe_result_stack[2] = (uint32_t)(pe_stack_top() - pe_stack_limit());
    pe_result_done = 1u;{prints}
    return st == PE_OK ? 0 : 10 - (int)st;
}}
"""


# ---------------------------------------------------------------- the host side

def parse_uart_output(text):
    """The UART lines of a --io uart run as a dict: status, outputs {k: bytes},
    ops [(table index, op, ticks)], invoke_ticks, tick_hz, instructions,
    stack (peak, main, reserve), rows_given (a streamed input, else None),
    rows_taken (a streamed output, else None), clock ((pe_clock_status,
    SYSCLK Hz) on a board with a clock set-up, else None),
    fault (None, or what faulted). Raises ArgumentError when pe_begin or
    pe_end is missing."""
    if isinstance(text, bytes):
        text = text.decode("latin-1")
    lines = [ln.strip() for ln in text.replace("\r", "").split("\n")]
    if not any(ln.startswith("pe_begin ") for ln in lines) and not any(ln.startswith("pe_fault") for ln in lines):
        raise ArgumentError(f"UART output: no pe_begin line in {text[-300:]!r}")
    if "pe_end" not in lines:
        raise ArgumentError(f"UART output: no pe_end line (the run stopped early?) in {text[-300:]!r}")
    r = {"status": None, "outputs": {}, "ops": [], "invoke_ticks": None, "tick_hz": None, "instructions": None,
         "stack": None, "rows_given": None, "rows_taken": None, "fault": None, "clock": None}
    for ln in lines:
        f = ln.split(" ")
        key = f[0]
        if key == "pe_status":
            r["status"] = int(f[1])
        elif key == "pe_output":
            k, n = int(f[1]), int(f[2])
            data = bytes.fromhex(f[3]) if len(f) > 3 else b""
            if len(data) != n:
                raise ArgumentError(f"UART output: pe_output {k} announces {n} B, carries {len(data)}")
            r["outputs"][k] = data
        elif key == "pe_op":
            r["ops"].append((int(f[1]), int(f[2]), int(f[3])))
        elif key == "pe_invoke_ticks":
            r["invoke_ticks"] = int(f[1])
        elif key == "pe_tick_hz":
            r["tick_hz"] = int(f[1])
        elif key == "pe_instructions":
            r["instructions"] = int(f[1])
        elif key == "pe_stack":
            r["stack"] = tuple(int(x) for x in f[1:4])
        elif key == "pe_input_rows_given":
            r["rows_given"] = int(f[1])
        elif key == "pe_output_rows_taken":
            r["rows_taken"] = int(f[1])
        elif key == "pe_fault":
            r["fault"] = " ".join(f[1:]) or "fault"
        elif key == "pe_clock":
            r["clock"] = (int(f[1]), int(f[2]))
    return r
