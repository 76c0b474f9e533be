"""The QEMU boards pyembed builds for: each one's gcc flags, memory map and
SysTick clock (``Board``), and the gcc flags per Cortex-M core
(``CORE_FLAGS``). Data only; ``pyembed.target.qemu`` builds and runs programs
on them, and ``pyembed.codegen.firmware`` names a profile's flags and QEMU
machine from them."""
import dataclasses
from fractions import Fraction


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
