"""Every Cortex-M class under QEMU (issue #35): the boards of pyembed.target.qemu
beyond the MPS2 M4/M7 (Cortex-M0 microbit, M3 mps2-an385, M4 netduinoplus2 with
the STM32F405 map, M33 mps2-an505, M55 mps3-an547) have a profile and
build for their core. Running every bundled model that fits on every board,
bit-exact, and the refusals of those that do not fit (the planner's, the
link's) are tests/test_firmware_boards_all.py; the benchmark of the same sweep
is ``python -m pyembed.bench boards``."""
import os
import shutil
import subprocess

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
