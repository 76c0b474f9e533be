"""Every Cortex-M class under QEMU (issue #35): the boards of pyembed.target.qemu
beyond the MPS2 M4/M7 (Cortex-M0 microbit, M3 mps2-an385, M4 netduinoplus2 with
the STM32F405 map, M33 mps2-an505, M55 mps3-an547) have a profile and
build for their core. Running every bundled model that fits on every board,
bit-exact, and the refusals of those that do not fit (the planner's, the
link's) are tests/test_firmware_boards_all.py; the benchmark of the same sweep
is ``python -m pyembed.bench boards``."""
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from firmware_sim.profiles import list_profiles, load_profile
from pyembed.data import MODELS_DIR
from pyembed.model.load import load_model
from pyembed.target import qemu

NEW_BOARDS = ["microbit", "mps2-an385", "netduinoplus2", "mps2-an505", "mps3-an547"]


def test_every_board_has_its_profile():
    """A bundled profile named after each QEMU machine, on the machine's core,
    SysTick clock and memory map (the planned flash and system RAM inside the
    blocks QEMU maps), listed by `pyembed profiles`."""
    from pyembed.codegen.firmware import CORE_FLAGS, qemu_machine, system_region
    assert set(NEW_BOARDS) <= set(qemu.BOARDS)
    names = set(list_profiles())
    for name, b in qemu.BOARDS.items():
        assert name in names
        p = load_profile(name)
        assert qemu_machine(p) == name
        assert p.core == b.cpu
        assert CORE_FLAGS[p.core].split() == list(b.cpu_flags)
        assert p.clock_hz == b.systick_hz
        fl = p.regions[p.flash_region]
        assert b.flash_base <= fl.base and fl.base + fl.size <= b.flash_base + b.flash_size, name
        sysr = system_region(p)
        assert b.ram_base <= sysr.base and sysr.base + sysr.size <= b.ram_base + b.ram_size, name


def test_portable_path_where_the_core_has_no_dsp():
    """-mcpu for the M0 and M3 leaves __ARM_FEATURE_DSP undefined (the kernels' portable C path);
    the M33 and M55 flags define it."""
    if shutil.which(qemu.CC) is None:
        pytest.skip(str(qemu.missing_tools()))
    for name, dsp in (("microbit", False), ("mps2-an385", False), ("mps2-an505", True), ("mps3-an547", True)):
        out = subprocess.run([qemu.CC, *qemu.BOARDS[name].cpu_flags, "-dM", "-E", "-"], input="",
                             capture_output=True, text=True, check=True).stdout
        assert ("__ARM_FEATURE_DSP 1" in out) == dsp, name


def test_model_too_big_for_the_board_is_refused():
    """person detection's largest activation does not fit the micro:bit's 16 KB: the refusal names
    the region and the sizes (strategy none: the default first tries the stripe strategies, which
    fail too, in half a minute)."""
    from pyembed.errors import FitError
    from pyembed.target.planning import PlanOptions, plan_for_target
    g = load_model(os.path.join(MODELS_DIR, "tflm_person_detect_int8.tflite"))
    with pytest.raises(FitError) as e:
        plan_for_target(g, "microbit", PlanOptions(strategy="none"), action="build firmware for")
    msg = str(e.value)
    assert "sram" in msg and "16384 B" in msg, msg


def test_kernel_bench_runs_on_the_cortex_m0():
    """``bench kernels --target cortex-m0``: the case runner built for the micro:bit's Cortex-M0
    (Armv6-M ELF) needs more RAM than the board's 16 KB (its .bss alone is larger), so it runs on the
    nRF51 map with the SRAM enlarged (pyembed.target.kernels.RUNNER_SRAM); outputs == the host build's
    and every count is a positive number of instructions, larger per MAC than the Cortex-M4 DSP build's."""
    from pyembed.bench._kernels_cortex_m import TARGETS
    from pyembed.target import kernels as K
    if K.missing("portable") is not None:
        pytest.skip(str(K.missing("portable")))
    assert TARGETS["cortex-m0"] == "microbit"
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (1, 10, 10, 8))
    wt = rng.integers(-128, 128, (8, 3, 3, 8))
    m, s = rng.integers(1 << 30, (1 << 31) - 1, 8), np.full(8, -9)
    cases = [K.conv_case(x, wt, rng.integers(-700, 800, 8), m, s, padding=(1, 1, 1, 1), input_offset=128,
                         output_offset=-3, gather=g, name="conv") for g in (False, True)]
    xf, wf = rng.integers(-128, 128, (1, 256)), rng.integers(-128, 128, (16, 256))
    cases.append(K.fc_case(xf, wf, rng.integers(-700, 800, 16), rng.integers(1 << 30, (1 << 31) - 1, 16),
                           np.full(16, -9), input_offset=7, output_offset=-2, name="fc"))
    host = K.run(cases, "host")
    m0 = K.run(cases, "portable", board="microbit")
    m4 = K.run(cases, "dsp", board="mps2-an386")
    for c, h, a, b in zip(cases, host, m0, m4):
        assert h.status == 0 and a.status == 0 and a.output == h.output and b.output == h.output
        assert a.instructions > b.instructions > 0, (a.instructions, b.instructions)
    elf = K.build("portable", board="microbit")
    attrs = subprocess.run([qemu.CC.replace("gcc", "readelf"), "-A", elf], capture_output=True, text=True).stdout
    assert "Tag_CPU_arch: v6S-M\n" in attrs
    size = subprocess.run([qemu.CC.replace("gcc", "size"), "-A", elf], capture_output=True, text=True).stdout
    bss = int(re.search(r"^\.bss\s+(\d+)", size, re.M).group(1))
    assert qemu.BOARDS["microbit"].ram_size < bss <= K.RUNNER_SRAM["microbit"]


# the STM32F405 registers the clock set-up touches, in the order of _clock_program's regs[]
_CLOCK_REGS = {"RCC_CR": 0x40023800, "RCC_PLLCFGR": 0x40023804, "RCC_CFGR": 0x40023808, "RCC_APB1ENR": 0x40023840,
               "PWR_CR": 0x40007000, "FLASH_ACR": 0x40023C00}


def _clock_program(tmp_path):
    """netduinoplus2's generated clock set-up (pyembed.codegen.firmware.io, startup.c) compiled for the host,
    each register an ordinary word (its address replaced): given the registers' start values, it prints
    pe_clock_status and the registers after clock_init."""
    from pyembed.codegen.firmware import io as fwio
    src = fwio.board_clock_source("netduinoplus2")
    for k, (name, addr) in enumerate(_CLOCK_REGS.items()):
        old = f"#define {name} (*(volatile uint32_t *)0x{addr:08X}u)"
        assert old in src, name
        src = src.replace(old, f"#define {name} (regs[{k}])")
    prog = tmp_path / "clock.c"
    prog.write_text("#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\nstatic volatile uint32_t regs[6];\n"
                    + src + "\nint main(int argc, char **argv)\n{\n    int k;\n    uint32_t st;\n"
                    "    for (k = 1; k < argc && k <= 6; k++) regs[k - 1] = (uint32_t)strtoul(argv[k], NULL, 0);\n"
                    "    st = clock_init();\n    printf(\"%u\", (unsigned)st);\n"
                    "    for (k = 0; k < 6; k++) printf(\" %u\", (unsigned)regs[k]);\n    printf(\"\\n\");\n"
                    "    return 0;\n}\n")
    exe = tmp_path / "clock"
    subprocess.run(["gcc", "-std=c99", "-O1", "-Wall", "-Werror", "-DPE_CLOCK_WAIT=1000u", str(prog), "-o", str(exe)],
                   check=True, capture_output=True, text=True)

    def run(**start):
        args = [str(start.get(n, 0)) for n in _CLOCK_REGS]
        out = subprocess.run([str(exe), *args], check=True, capture_output=True, text=True).stdout.split()
        return int(out[0]), dict(zip(_CLOCK_REGS, map(int, out[1:])))
    return run


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
def test_stm32f405_clock_setup_steps(tmp_path):
    """The STM32F405's clock set-up (HSE 25 MHz -> PLL 168 MHz, flash 5 wait states) with its registers as
    plain memory: ready bits preset make every step succeed, and the registers end as RM0090 asks (PLLM 25,
    PLLN 336, PLLP /2, PLLQ 7, source HSE; AHB /1, APB1 /4, APB2 /2, SYSCLK from the PLL; flash latency 5
    with prefetch and caches); a ready bit that never comes ends the bounded wait with the step's status
    and the step undone (the part stays on its HSI)."""
    run = _clock_program(tmp_path)
    hserdy, pllrdy, sws_pll = 1 << 17, 1 << 25, 2 << 2
    st, r = run(RCC_CR=hserdy | pllrdy, RCC_PLLCFGR=0x24003010, RCC_CFGR=sws_pll)
    assert st == 0
    p = r["RCC_PLLCFGR"]
    assert (p & 0x3F, (p >> 6) & 0x1FF, (p >> 16) & 3, (p >> 22) & 1, (p >> 24) & 0xF) == (25, 336, 0, 1, 7)
    assert p & 0xF0BC8000 == 0x24003010 & 0xF0BC8000          # the reserved bits as at reset
    assert 25_000_000 // 25 * 336 // 2 == 168_000_000 and 25_000_000 // 25 * 336 // 7 == 48_000_000
    c = r["RCC_CFGR"]
    assert (c & 3, (c >> 4) & 0xF, (c >> 10) & 7, (c >> 13) & 7) == (2, 0, 5, 4)
    assert r["FLASH_ACR"] == (1 << 10) | (1 << 9) | (1 << 8) | 5
    assert r["RCC_CR"] & (1 << 16) and r["RCC_CR"] & (1 << 24)  # HSE and PLL on
    assert r["PWR_CR"] & (1 << 14) and r["RCC_APB1ENR"] & (1 << 28)
    # no HSE (QEMU 7.2: the RCC reads 0): status 1, HSE switched off again, nothing else touched
    st, r = run()
    assert st == 1 and r["RCC_CR"] == 0 and r["RCC_CFGR"] == 0 and r["FLASH_ACR"] == 0 and r["RCC_PLLCFGR"] == 0
    # HSE but no PLL lock: status 2, PLL and HSE off, SYSCLK still the HSI
    st, r = run(RCC_CR=hserdy)
    assert st == 2 and r["RCC_CR"] & ((1 << 16) | (1 << 24)) == 0 and r["RCC_CFGR"] & 3 == 0
    # the switch never confirmed (SWS stays HSI): status 4, SW and the APB prescalers back to reset
    st, r = run(RCC_CR=hserdy | pllrdy)
    assert st == 4 and r["RCC_CFGR"] & (3 | (7 << 10) | (7 << 13)) == 0 and r["RCC_CR"] & (1 << 24) == 0


@pytest.mark.skipif(qemu.missing_tools() is not None or shutil.which("make") is None,
                    reason=str(qemu.missing_tools() or "make not installed"))
def test_stm32f405_clock_setup_under_qemu(tmp_path):
    """--io uart on netduinoplus2: the generated startup sets up the clock before the UART; QEMU 7.2 does not
    model the STM32F405's RCC (its reads are 0), so the HSE never gets ready: the bounded wait ends, the
    firmware records status 1 and keeps the 16 MHz HSI (pe_clock 1 16000000), and the model still runs
    bit-exact with the host."""
    from pyembed.codegen.firmware import io as fwio
    from pyembed.target.firmware import build_project, generate, input_bytes, run_project
    g = load_model(os.path.join(MODELS_DIR, "tflm_hello_world_int8.tflite"))
    x = np.random.default_rng(5).integers(-128, 128, size=g.tensors[g.inputs[0]].shape).astype(np.int8)
    proj = generate(g, "netduinoplus2", tmp_path / "fw", io="uart", copy_runtime=False,
                    run_input={"data": input_bytes(g, [x]), "source": "test"})
    startup = (proj.outdir / "startup.c").read_text()
    assert "clock_init()" in startup and "PE_CLOCK_WAIT" in startup
    assert "pe_apb2_hz" in (proj.outdir / "pe_uart.c").read_text()
    from pyembed import _csrc
    build_project(proj.outdir, make_vars={"PYEMBED_CSRC": str(_csrc.csrc_dir()), "RUNTIME_BUILD": str(tmp_path / "rt")})
    run = run_project(proj, [x])
    assert run.uart_clock == (1, 16_000_000), run.uart_text
    assert fwio.STM32_CLOCK_STATUS[run.uart_clock[0]].startswith("HSE not ready")
    host = np.asarray(g.run(x)).reshape(run.outputs[0].shape)
    assert run.outputs[0].tobytes() == host.tobytes()


def test_m33_m55_profiles_use_their_own_instruction_tables():
    """mps2-an505 (Cortex-M33) and mps3-an547 (Cortex-M55) price pyembed's kernels with instruction tables
    fitted on their own QEMU counts (pyembed.bench.calibrate_qemu --cores cortex-m33,cortex-m55), not the
    Cortex-M4's: the stored tables differ from the M4's, and their mixes say they are borrowed."""
    for board, core in (("mps2-an505", "cortex-m33"), ("mps3-an547", "cortex-m55")):
        im = load_profile(board).instruction_model
        assert im is not None and (im["core"], im["build"]) == (core, "dsp"), board
        m4 = load_profile("mps2-an386").instruction_model["table"]
        own = im["table"]
        assert own["CONV_2D"]["n"] > 0 and own["CONV_2D"]["coef"] != m4["CONV_2D"]["coef"]
        # every group's instruction mix is borrowed: from the M4's traced table, or from a group of this table
        # whose mix is (the pipeline and transformer groups, fitted on counts only, take their class's mix)
        def borrowed(k, seen=()):
            src = own[k].get("mix_from")
            if src == "cortex-m4 dsp":
                return True
            return (src in own and src not in seen + (k,) and own[src]["mix"] == own[k]["mix"]
                    and borrowed(src, seen + (k,)))
        assert [k for k in own if not borrowed(k)] == [], board
