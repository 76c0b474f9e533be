"""The low-level QEMU runner (pyembed.target.qemu): build for the MPS2 boards,
run under semihosting, and count instructions with SysTick under -icount."""

import math

import pytest

from pyembed.target import qemu

pytestmark = pytest.mark.skipif(qemu.missing_tools() is not None,
                                reason=str(qemu.missing_tools()))

LOOP_C = r"""
#include <stdio.h>
#include <stdint.h>
#include "pe_target.h"
/* Six instructions per iteration: 4 nop, subs, bne. */
static void spin(uint32_t n)
{
    __asm volatile(".syntax unified\n1:\n\tnop\n\tnop\n\tnop\n\tnop\n\tsubs %0, %0, #1\n\tbne 1b\n\t"
                   : "+r"(n) : : "cc");
}
int main(void)
{
    uint8_t in[64];
    uint32_t n1 = 0, n2 = 0;
    long got = pe_read_input(in, sizeof in);
    if (got != 8) {
        return 2;
    }
    for (int i = 0; i < 4; ++i) {
        n1 |= (uint32_t)in[i] << (8 * i);
        n2 |= (uint32_t)in[4 + i] << (8 * i);
    }
    uint64_t t0 = pe_cycles_start();
    spin(n1);
    uint64_t i1 = pe_instructions_since(t0);
    t0 = pe_cycles_start();
    spin(n2);
    uint64_t i2 = pe_instructions_since(t0);
    printf("%llu %llu\n", (unsigned long long)i1, (unsigned long long)i2);
    pe_write_output(in, 8);
    return EXIT_CODE;
}
"""


@pytest.fixture(scope="module")
def loop_src(tmp_path_factory):
    d = tmp_path_factory.mktemp("qemu_loop")
    p = d / "loop.c"
    p.write_text(LOOP_C)
    return p


@pytest.mark.parametrize("board", sorted(qemu.BOARDS))
def test_loop_instruction_count(loop_src, board, tmp_path):
    elf = qemu.build([loop_src], tmp_path / "loop.elf", board=board,
                     defines={"EXIT_CODE": 5})
    n1, n2 = 100_000, 2_000_000 + 7
    res = qemu.run(elf, board=board,
                   input_bytes=n1.to_bytes(4, "little") + n2.to_bytes(4, "little"),
                   timeout=60)
    assert res.exit_code == 5, res.stderr
    assert res.output == n1.to_bytes(4, "little") + n2.to_bytes(4, "little")
    i1, i2 = (int(v) for v in res.stdout.split())
    b = qemu.BOARDS[board]
    if b.systick_hz == 25_000_000:
        # 6 n instructions plus the few of the timer reads, at 40-instruction
        # resolution: the measurement is within one tick of 6 n.
        assert b.instructions_per_tick == qemu.INSTRUCTIONS_PER_TICK
        assert abs(i1 - 6 * n1) <= qemu.INSTRUCTIONS_PER_TICK
        assert abs(i2 - 6 * n2) <= qemu.INSTRUCTIONS_PER_TICK
        assert i1 % qemu.INSTRUCTIONS_PER_TICK == 0
    else:
        # another SysTick clock (1e9 / systick_hz instructions per tick): within one
        # tick plus the timer reads' own instructions (a tick of 6 ns at 168 MHz
        # no longer hides them)
        tol = math.ceil(b.instructions_per_tick) + 24
        assert abs(i1 - 6 * n1) <= tol, (i1, 6 * n1)
        assert abs(i2 - 6 * n2) <= tol, (i2, 6 * n2)


def test_systick_wrap_is_extended(loop_src, tmp_path):
    """Over 2^24 ticks (671 M instructions) the wrap count keeps time exact."""
    elf = qemu.build([loop_src], tmp_path / "loop.elf", defines={"EXIT_CODE": 0})
    n = 115_000_000   # 690 M instructions: one SysTick wrap
    res = qemu.run(elf, input_bytes=(1).to_bytes(4, "little") + n.to_bytes(4, "little"),
                   timeout=120)
    assert res.exit_code == 0
    i2 = int(res.stdout.split()[1])
    assert abs(i2 - 6 * n) <= 2 * qemu.INSTRUCTIONS_PER_TICK


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="board"):
        qemu.build([tmp_path / "x.c"], tmp_path / "x.elf", board="mps2-an999")
    with pytest.raises(ValueError, match="sources"):
        qemu.build([tmp_path / "missing.c"], tmp_path / "x.elf")
    with pytest.raises(qemu.QemuError, match="arm-none-eabi-gcc"):
        bad = tmp_path / "bad.c"
        bad.write_text("int main(void) { return undeclared; }\n")
        qemu.build([bad], tmp_path / "bad.elf")


PORT_C = r"""
#include <stdio.h>
#include <string.h>
#include "pe_port.h"
#include "pe_target.h"
static char logged[64];
static size_t logged_n;
static void hook(void *user, const char *text, size_t n)
{
    size_t *calls = (size_t *)user;
    (*calls)++;
    if (logged_n + n < sizeof logged) {
        memcpy(logged + logged_n, text, n);
        logged_n += n;
    }
}
int main(void)
{
    size_t calls = 0;
    uint64_t t0, t1;
    volatile uint32_t i;
    pe_port_log("dropped: no hook yet");
    pe_port_set_log(hook, &calls);
    pe_port_log("abc");
    pe_port_log("de");
    pe_port_set_log(NULL, NULL);
    pe_port_log("dropped again");
    t0 = pe_port_now();
    for (i = 0; i < 20000u; i++) {
    }
    t1 = pe_port_now();
    printf("%d %u %.*s %d %llu\n", pe_port_clock_source(), (unsigned)calls, (int)logged_n, logged,
           pe_port_dma() == NULL, (unsigned long long)(t1 - t0));
    return 0;
}
"""


@pytest.mark.parametrize("clock", ["PE_PORT_CLOCK_SYSTICK", "PE_PORT_CLOCK_DWT"])
def test_port_layer_clock_and_log_hook(tmp_path, clock):
    """pe_port.h: the log hook gets exactly the texts logged while it is set; the clock runs.
    QEMU reads the DWT as zero, so PE_PORT_CLOCK_DWT finds CYCCNT not counting and falls back
    to SysTick (source 1) instead of timing nothing."""
    src = tmp_path / "port.c"
    src.write_text(PORT_C)
    elf = qemu.build([src], tmp_path / "port.elf", board="mps2-an386", defines={"PE_PORT_CLOCK": clock})
    res = qemu.run(elf, board="mps2-an386", timeout=60)
    assert res.exit_code == 0, res.stderr
    source, calls, text, no_dma, ticks = res.stdout.split()
    assert int(source) == 1
    assert (int(calls), text, int(no_dma)) == (2, b"abcde", 1)
    assert int(ticks) > 20000 // qemu.INSTRUCTIONS_PER_TICK   # the loop runs over 20,000 instructions


def test_port_layer_dwt_refused_on_cortex_m0(tmp_path):
    """Armv6-M has no DWT cycle counter: choosing it is a compile error naming the fix."""
    src = tmp_path / "port.c"
    src.write_text(PORT_C)
    with pytest.raises(qemu.QemuError, match="no DWT cycle counter"):
        qemu.build([src], tmp_path / "port.elf", board="microbit",
                   defines={"PE_PORT_CLOCK": "PE_PORT_CLOCK_DWT"})
