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
``run_serial`` runs a program without semihosting that prints on the board's
first UART (``pyembed firmware --io uart``): QEMU with ``-serial stdio``, read
until an end line, then stopped (such a program never exits by itself).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterable, Mapping, Sequence

__all__ = [
    "BOARDS", "Board", "CORE_FLAGS", "QemuError", "RunResult", "TEMPLATES", "INSTRUCTIONS_PER_TICK",
    "missing_tools", "linker_script", "compile_flags", "build", "run", "qemu_command",
    "serial_command", "run_serial",
]

TEMPLATES = Path(__file__).resolve().parent / "templates"
INSTRUCTIONS_PER_TICK = 40
CC = "arm-none-eabi-gcc"
QEMU = "qemu-system-arm"


class QemuError(RuntimeError):
    """A build or a QEMU run failed (the message carries the tool's output)."""


# the boards' table lives with the firmware generator (which names a board's flags and machine
# for every profile); re-exported here as this runner's API
from pyembed.codegen.firmware.boards import BOARDS, CORE_FLAGS, Board  # noqa: E402


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


def qemu_command(elf: str | os.PathLike, board: str = "mps2-an386",
                 machine_args: Sequence[str] = ()) -> list[str]:
    """The qemu-system-arm command line ``run`` uses (Debian's QEMU 7.2).
    machine_args: further options for the machine (e.g. ``-global nrf51-soc.sram-size=N``)."""
    b = _board(board)
    return [QEMU, "-M", b.name, *machine_args, "-nographic", "-monitor", "none", "-serial", "none",
            "-semihosting-config", "enable=on,target=native",
            "-icount", "shift=0", "-kernel", str(Path(elf).resolve())]


def run(elf: str | os.PathLike, board: str = "mps2-an386", input_bytes: bytes = b"",
        timeout: float = 120.0, workdir: str | os.PathLike | None = None,
        machine_args: Sequence[str] = ()) -> RunResult:
    """Run an ELF under QEMU; returns exit code, stdout, stderr and output bytes.
    machine_args: further QEMU options for the machine (``qemu_command``).

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
    cmd = qemu_command(elf, board, machine_args)
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


def serial_command(elf: str | os.PathLike, board: str = "mps2-an386") -> list[str]:
    """The qemu-system-arm command line ``run_serial`` uses: no semihosting, the
    board's first UART on stdout."""
    b = _board(board)
    return [QEMU, "-M", b.name, "-display", "none", "-monitor", "none", "-serial", "stdio",
            "-icount", "shift=0", "-kernel", str(Path(elf).resolve())]


def run_serial(elf: str | os.PathLike, board: str = "mps2-an386", end: bytes = b"pe_end\n",
               timeout: float = 120.0) -> RunResult:
    """Run an ELF that prints on the board's UART (no semihosting: it never
    exits by itself): reads QEMU's stdout (the UART) until the line ``end``
    arrives, then stops QEMU. RunResult.stdout holds what the UART sent
    (exit_code: QEMU's, after it was stopped). Raises QemuError when QEMU
    exits or ``timeout`` seconds pass before ``end``."""
    import selectors
    import time
    if shutil.which(QEMU) is None:
        raise QemuError(missing_tools() or f"{QEMU} not found")
    elf = Path(elf)
    if not elf.is_file():
        raise ValueError(f"elf: {elf} is not a file")
    cmd = serial_command(elf, board)
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    got = b""
    err = b""
    deadline = time.monotonic() + timeout
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    sel.register(proc.stderr, selectors.EVENT_READ)
    done = False
    try:
        while not done:
            left = deadline - time.monotonic()
            if left <= 0:
                raise QemuError(f"QEMU run of {elf}: no {end!r} from the UART within {timeout} s "
                                f"(received {got[-300:]!r})")
            events = sel.select(timeout=min(left, 1.0))
            for key, _ in events:
                chunk = os.read(key.fileobj.fileno(), 65536)
                if key.fileobj is proc.stderr:
                    err += chunk
                    if not chunk:
                        sel.unregister(proc.stderr)
                    continue
                if not chunk:
                    raise QemuError(f"QEMU exited ({proc.poll()}) before the UART sent {end!r}: "
                                    f"{got[-300:]!r} {err[-400:]!r}")
                got += chunk
                if end in got:
                    done = True
    finally:
        sel.close()
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    return RunResult(proc.returncode, got, err, b"", cmd)
