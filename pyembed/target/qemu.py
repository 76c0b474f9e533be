"""Build C programs for QEMU's MPS2 Cortex-M boards and run them there.

A low-level runner with a small API::

    from pyembed.target import qemu
    reason = qemu.missing_tools()          # None when the cross tools and QEMU exist
    elf = qemu.build(["main.c"], "out/prog.elf", board="mps2-an386",
                     include_dirs=["inc"], defines={"N": 10})
    res = qemu.run(elf, board="mps2-an386", input_bytes=b"...", timeout=60)
    res.exit_code, res.stdout, res.output   # output: bytes the program wrote
                                            # with pe_write_output()

Boards (``BOARDS``, one per Cortex-M class; each has a bundled profile of the
same name): ``microbit`` (Cortex-M0, nRF51), ``mps2-an385`` (Cortex-M3),
``mps2-an386`` (Cortex-M4 with DSP and single-precision FPU), ``netduinoplus2``
(Cortex-M4, STM32F405), ``mps2-an500`` (Cortex-M7, double-precision FPU),
``mps2-an505`` (Cortex-M33, run Secure), ``mps3-an547`` (Cortex-M55). Programs are compiled with
``arm-none-eabi-gcc -O2 -Werror`` and newlib's ``--specs=rdimon.specs`` (semihosting:
``printf`` goes to the host's stdout, files open on the host, ``exit(code)`` ends
QEMU with that code). ``build`` adds the target support from ``templates/``:
``startup.c`` (vector table, reset handler: FPU on, ``.data``/``.bss``, semihosting,
SysTick, ``exit(main())``), ``pe_port.c``/``pe_port.h`` (the port layer: the clock,
SysTick or the DWT cycle counter, a log hook, the segment loader's DMA hook),
``pe_target.c``/``pe_target.h`` (timing and I/O, see below) and a linker script for the board's memory map (``linker_script()``; pass
your own with ``linker_script=``).

Timing (``pe_target.h``): ``pe_cycles_start()`` / ``pe_instructions_since(t0)``.
SysTick counts the board's processor clock (``Board.systick_hz``: 25 MHz on the
MPS2 images, 20 MHz AN505, 32 MHz AN547, 16 MHz micro:bit, 168 MHz STM32F405;
``build`` defines ``PE_TICK_HZ``); ``run`` starts QEMU with ``-icount shift=0``
(one instruction = 1 ns of virtual time), so a tick is 1e9 / systick_hz
instructions (``Board.instructions_per_tick``: exactly 40 at 25 MHz) and
``pe_instructions_since`` returns ticks converted so: instruction counts with a
one-tick resolution (not cycles: QEMU does not model pipeline or memory timing).
``INSTRUCTIONS_PER_TICK`` (40) is the 25 MHz boards' figure.

Input/output: ``run(input_bytes=...)`` writes them to ``pe_input.bin`` in QEMU's
working directory, where ``pe_read_input(buf, n)`` reads them; bytes written with
``pe_write_output(buf, n)`` come back as ``RunResult.output``.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import tempfile
from fractions import Fraction
from pathlib import Path
from typing import Iterable, Mapping, Sequence

__all__ = [
    "BOARDS", "Board", "QemuError", "RunResult", "TEMPLATES", "INSTRUCTIONS_PER_TICK",
    "missing_tools", "linker_script", "compile_flags", "build", "run", "qemu_command",
]

TEMPLATES = Path(__file__).resolve().parent / "templates"
INSTRUCTIONS_PER_TICK = 40
CC = "arm-none-eabi-gcc"
QEMU = "qemu-system-arm"


class QemuError(RuntimeError):
    """A build or a QEMU run failed (the message carries the tool's output)."""


@dataclasses.dataclass(frozen=True)
class Board:
    """A QEMU machine: CPU flags, the memory blocks QEMU maps for it (code
    memory, data RAM and a large extra RAM) and the SysTick clock."""

    name: str
    cpu: str
    cpu_flags: tuple[str, ...]
    flash_base: int   # code and read-only data (the board's flash, or the RAM it boots from)
    flash_size: int
    ram_base: int     # .data, .bss, heap and stack
    ram_size: int
    psram_base: int   # a large extra RAM (0 size: none)
    psram_size: int
    systick_hz: int = 25_000_000   # SysTick's processor clock in QEMU (the machine's SYSCLK)
    description: str = ""

    @property
    def instructions_per_tick(self) -> Fraction:
        """Instructions per SysTick tick under -icount shift=0 (1 instruction = 1 ns):
        1e9 / systick_hz, exact (62.5 on the 16 MHz micro:bit)."""
        return Fraction(1_000_000_000, self.systick_hz)

    def instructions(self, ticks: int) -> int:
        """A tick count as instructions, rounded to the nearest (resolution: one tick)."""
        return int(round(ticks * self.instructions_per_tick))


_M4 = ("-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16")
_M7 = ("-mcpu=cortex-m7", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv5-d16")
# gcc flags per core (hard-float ABI where the core has an FPU; the C kernels take their
# DSP-extension paths where gcc defines __ARM_FEATURE_DSP: M4, M7, M33, M55)
CORE_FLAGS: dict[str, tuple[str, ...]] = {
    "cortex-m0": ("-mcpu=cortex-m0", "-mthumb", "-mfloat-abi=soft"),
    "cortex-m0plus": ("-mcpu=cortex-m0plus", "-mthumb", "-mfloat-abi=soft"),
    "cortex-m3": ("-mcpu=cortex-m3", "-mthumb", "-mfloat-abi=soft"),
    "cortex-m4": _M4,
    "cortex-m7": _M7,
    "cortex-m33": ("-mcpu=cortex-m33", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv5-sp-d16"),
    "cortex-m55": ("-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard"),
}

# Memory maps from QEMU 7.2's board sources (checked by running a program on each):
# hw/arm/mps2.c (AN385/AN386/AN500): SSRAM1 4 MiB at 0x0, SSRAM2/3 4 MiB at 0x20000000, PSRAM 16 MiB at
#   0x21000000 (AN385/AN386) or 0x60000000 (AN500); SYSCLK 25 MHz.
# hw/arm/mps2-tz.c AN505 (IoTKit, Cortex-M33, boots Secure with init-svtor 0x10000000): SSRAM1 4 MiB at
#   0x0 (Secure alias 0x10000000), SSRAM2/3 2+2 MiB at 0x28000000 (Secure alias 0x38000000), 16 MiB RAM at
#   0x80000000; SYSCLK 20 MHz. The program is linked at the Secure aliases (it runs Secure, SAU off).
# hw/arm/mps2-tz.c AN547 (SSE-300, Cortex-M55, init-svtor 0): ITCM 512 KiB at 0x0 (boots from it), DTCM
#   512 KiB at 0x20000000, SRAM 2 MiB at 0x01000000, SRAM 4 MiB at 0x21000000, DDR at 0x60000000; SYSCLK 32 MHz.
# hw/arm/nrf51_soc.c (microbit, Cortex-M0): flash 256 KiB at 0x0, SRAM 16 KiB at 0x20000000; HCLK 16 MHz.
# hw/arm/stm32f405_soc.c (netduinoplus2, Cortex-M4): flash 1 MiB at 0x08000000 (aliased at 0x0 for
#   the boot), SRAM 128 KiB at 0x20000000, CCM 64 KiB at 0x10000000; SYSCLK 168 MHz.
BOARDS: dict[str, Board] = {
    "microbit": Board(
        "microbit", "cortex-m0", CORE_FLAGS["cortex-m0"],
        0x00000000, 0x40000, 0x20000000, 0x4000, 0, 0, 16_000_000,
        "BBC micro:bit, nRF51822 (Cortex-M0)"),
    "mps2-an385": Board(
        "mps2-an385", "cortex-m3", CORE_FLAGS["cortex-m3"],
        0x00000000, 0x400000, 0x20000000, 0x400000, 0x21000000, 0x1000000, 25_000_000,
        "Arm MPS2 AN385 (Cortex-M3)"),
    "mps2-an386": Board(
        "mps2-an386", "cortex-m4", _M4,
        0x00000000, 0x400000, 0x20000000, 0x400000, 0x21000000, 0x1000000, 25_000_000,
        "Arm MPS2 AN386 (Cortex-M4)"),
    "netduinoplus2": Board(
        "netduinoplus2", "cortex-m4", _M4,
        0x08000000, 0x100000, 0x20000000, 0x20000, 0x10000000, 0x10000, 168_000_000,
        "Netduino Plus 2, STM32F405RG (Cortex-M4)"),
    "mps2-an500": Board(
        "mps2-an500", "cortex-m7", _M7,
        0x00000000, 0x400000, 0x20000000, 0x400000, 0x60000000, 0x1000000, 25_000_000,
        "Arm MPS2 AN500 (Cortex-M7)"),
    "mps2-an505": Board(
        "mps2-an505", "cortex-m33", CORE_FLAGS["cortex-m33"],
        0x10000000, 0x400000, 0x38000000, 0x400000, 0x80000000, 0x1000000, 20_000_000,
        "Arm MPS2 AN505 (Cortex-M33, Secure)"),
    "mps3-an547": Board(
        "mps3-an547", "cortex-m55", CORE_FLAGS["cortex-m55"],
        0x00000000, 0x80000, 0x21000000, 0x400000, 0x60000000, 0x1000000, 32_000_000,
        "Arm MPS3 AN547 (Cortex-M55)"),
}


def _board(board: str) -> Board:
    if not isinstance(board, str) or board.lower() not in BOARDS:
        raise ValueError(f"board: expected one of {sorted(BOARDS)}, got {board!r}")
    return BOARDS[board.lower()]


def missing_tools() -> str | None:
    """None when arm-none-eabi-gcc (with newlib) and qemu-system-arm are on PATH,
    else a sentence naming what is missing."""
    missing = [t for t in (CC, QEMU) if shutil.which(t) is None]
    if missing:
        return f"{' and '.join(missing)} not installed (apt: gcc-arm-none-eabi " \
               f"libnewlib-arm-none-eabi qemu-system-arm)"
    return None


def compile_flags(board: str) -> list[str]:
    """The C flags ``build`` uses for a board (without -I/-D)."""
    b = _board(board)
    return [*b.cpu_flags, f"-DPE_TICK_HZ={b.systick_hz}u", "-O2", "-g", "-std=c99", "-Wall", "-Wextra", "-Werror",
            "-ffunction-sections", "-fdata-sections", "--specs=rdimon.specs"]


def linker_script(board: str, memory: str | None = None, extra_flash: str = "",
                  extra_ram: str = "") -> str:
    """Linker script text for a board. ``memory`` replaces the MEMORY block body
    (it must define FLASH and RAM); ``extra_flash``/``extra_ram`` are section
    statements placed after the read-only and the zero-initialised sections."""
    b = _board(board)
    if memory is None:
        memory = (f"    FLASH (rx)  : ORIGIN = 0x{b.flash_base:08X}, LENGTH = 0x{b.flash_size:X}\n"
                  f"    RAM   (rwx) : ORIGIN = 0x{b.ram_base:08X}, LENGTH = 0x{b.ram_size:X}")
    text = (TEMPLATES / "link.ld.in").read_text()
    return (text.replace("@BOARD@", b.name).replace("@MEMORY@", memory)
            .replace("@EXTRA_FLASH@", extra_flash).replace("@EXTRA_RAM@", extra_ram))


def _run_tool(cmd: Sequence[str], what: str, cwd: str | None = None) -> None:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, cwd=cwd)
    if proc.returncode != 0:
        raise QemuError(f"{what} failed ({proc.returncode}):\n{' '.join(cmd)}\n"
                        f"{proc.stdout}{proc.stderr}")


def build(sources: Iterable[str | os.PathLike], out_elf: str | os.PathLike,
          board: str = "mps2-an386", include_dirs: Iterable[str | os.PathLike] = (),
          defines: Mapping[str, object] | Iterable[str] = (),
          extra_cflags: Iterable[str] = (), linker_script_path: str | os.PathLike | None = None,
          with_runtime: bool = True) -> Path:
    """Compile and link C sources into an ELF for ``board``; returns its path.

    ``defines``: a mapping NAME -> value (None for a bare define) or strings
    ``"NAME[=value]"``. ``with_runtime`` adds startup.c, pe_target.c and their
    include dir. ``linker_script_path`` defaults to ``linker_script(board)``
    written next to the ELF. Raises QemuError with the compiler output on failure.
    """
    _board(board)
    if shutil.which(CC) is None:
        raise QemuError(missing_tools() or f"{CC} not found")
    out_elf = Path(out_elf)
    out_elf.parent.mkdir(parents=True, exist_ok=True)
    srcs = [Path(s) for s in sources]
    if not srcs:
        raise ValueError("sources: expected at least one C file")
    for s in srcs:
        if not s.is_file():
            raise ValueError(f"sources: {s} is not a file")
    incs = [Path(i) for i in include_dirs]
    if with_runtime:
        srcs = [TEMPLATES / "startup.c", TEMPLATES / "pe_port.c", TEMPLATES / "pe_target.c", *srcs]
        # pe_port.h names the segment loader's DMA hook type (pyembed/pe_segload.h)
        from pyembed import _csrc
        csrc = _csrc.csrc_dir(required=False)
        incs = [TEMPLATES, *incs, *([csrc / "include"] if csrc is not None else [])]
    if isinstance(defines, Mapping):
        dflags = [f"-D{k}" if v is None else f"-D{k}={v}" for k, v in defines.items()]
    else:
        dflags = [f"-D{d}" for d in defines]
    if linker_script_path is None:
        linker_script_path = out_elf.with_suffix(".ld")
        Path(linker_script_path).write_text(linker_script(board))
    cmd = [CC, *compile_flags(board), *dflags, *[f"-I{i}" for i in incs], *extra_cflags,
           *[str(s) for s in srcs], "-nostartfiles", "-Wl,--gc-sections",
           f"-T{linker_script_path}", f"-Wl,-Map={out_elf.with_suffix('.map')}",
           "-o", str(out_elf), "-lm"]
    _run_tool(cmd, f"arm-none-eabi-gcc ({_board(board).name})")
    return out_elf


@dataclasses.dataclass
class RunResult:
    exit_code: int
    stdout: bytes
    stderr: bytes
    output: bytes   # bytes written with pe_write_output (b"" if none)
    command: list[str]


def qemu_command(elf: str | os.PathLike, board: str = "mps2-an386") -> list[str]:
    """The qemu-system-arm command line ``run`` uses (Debian's QEMU 7.2)."""
    b = _board(board)
    return [QEMU, "-M", b.name, "-nographic", "-monitor", "none", "-serial", "none",
            "-semihosting-config", "enable=on,target=native",
            "-icount", "shift=0", "-kernel", str(Path(elf).resolve())]


def run(elf: str | os.PathLike, board: str = "mps2-an386", input_bytes: bytes = b"",
        timeout: float = 120.0, workdir: str | os.PathLike | None = None) -> RunResult:
    """Run an ELF under QEMU; returns exit code, stdout, stderr and output bytes.

    ``input_bytes`` become ``pe_input.bin`` in the working directory (a fresh
    temporary one unless ``workdir`` is given). Raises QemuError when QEMU is
    missing or the run exceeds ``timeout`` seconds (QEMU is killed).
    """
    if shutil.which(QEMU) is None:
        raise QemuError(missing_tools() or f"{QEMU} not found")
    if not isinstance(input_bytes, (bytes, bytearray, memoryview)):
        raise TypeError(f"input_bytes: expected bytes, got {type(input_bytes).__name__}")
    elf = Path(elf)
    if not elf.is_file():
        raise ValueError(f"elf: {elf} is not a file")
    cmd = qemu_command(elf, board)
    tmp = None
    if workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="pe_qemu_")
        workdir = tmp.name
    try:
        wd = Path(workdir)
        wd.mkdir(parents=True, exist_ok=True)
        (wd / "pe_input.bin").write_bytes(bytes(input_bytes))
        out_file = wd / "pe_output.bin"
        if out_file.exists():
            out_file.unlink()
        try:
            proc = subprocess.run(cmd, capture_output=True, cwd=wd, timeout=timeout,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            raise QemuError(f"QEMU run of {elf} exceeded {timeout} s") from e
        output = out_file.read_bytes() if out_file.exists() else b""
        return RunResult(proc.returncode, proc.stdout, proc.stderr, output, cmd)
    finally:
        if tmp is not None:
            tmp.cleanup()
