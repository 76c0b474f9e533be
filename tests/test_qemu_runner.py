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
