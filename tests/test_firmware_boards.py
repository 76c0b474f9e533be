"""Every Cortex-M class under QEMU (issue #35): the boards of pyembed.target.qemu
beyond the MPS2 M4/M7 (Cortex-M0 microbit, M3 mps2-an385, M4 netduinoplus2 with
the STM32F405 map, M33 mps2-an505, M55 mps3-an547) each run a small bundled
model's generated firmware bit-exact with the host. The full sweep (every
bundled model on every board) is ``python -m pyembed.bench boards``."""
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
# the ELF's architecture attribute (arm-none-eabi-readelf -A): the core each board's flags build for
ARCH = {"microbit": "v6S-M", "mps2-an385": "v7", "netduinoplus2": "v7E-M", "mps2-an505": "v8-M.mainline",
        "mps3-an547": "v8.1-M.mainline"}

needs_tools = pytest.mark.skipif(qemu.missing_tools() is not None or shutil.which("make") is None,
                                 reason=str(qemu.missing_tools() or "make not installed"))


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


@pytest.fixture(scope="module")
def runtime_dirs(tmp_path_factory):
    """One folder for the module's projects and each board's runtime objects (shared by its projects)."""
    return tmp_path_factory.mktemp("boards")


def _run_bit_exact(model, board, root):
    from pyembed.target.firmware import build_project, generate, run_project
    g = load_model(os.path.join(MODELS_DIR, model + ".tflite"))
    proj = generate(g, board, root / f"{model}-{board}")
    build_project(proj.outdir, make_vars={"RUNTIME_BUILD": str(root / f"runtime-{board}")})
    rng = np.random.default_rng(sum(map(ord, model + board)))
    xs = [rng.integers(-128, 128, size=g.tensors[t].shape).astype(g.tensors[t].dtype) for t in g.inputs]
    run = run_project(proj, xs)
    host = g.run(xs if len(xs) > 1 else xs[0])
    host = list(host) if isinstance(host, (list, tuple)) else [host]
    for k, (fw, h) in enumerate(zip(run.outputs, host)):
        h = np.asarray(h).reshape(fw.shape)
        bad = np.flatnonzero(fw.ravel() != h.ravel())
        assert bad.size == 0, f"{board} output {k}: {bad.size} elements differ from the host run, first at {bad[:10]}"
    assert run.board == board
    assert [o["index"] for o in run.operators] == [o["op"] for o in proj.ops]
    assert run.total_instructions == sum(o["instructions"] for o in run.operators)
    # every MAC costs at least one instruction on these cores (no more than two MACs per SMLAD)
    assert run.total_instructions >= sum(op.macs for op in g.operators) // 2 > 0
    assert 0 < run.total_instructions <= run.invoke_instructions
    attrs = subprocess.run([qemu.CC.replace("gcc", "readelf"), "-A", str(proj.outdir / "firmware.elf")],
                           capture_output=True, text=True).stdout
    assert f"Tag_CPU_arch: {ARCH[board]}\n" in attrs, attrs
    return run


@needs_tools
@pytest.mark.parametrize("board", NEW_BOARDS)
def test_hello_world_bit_exact_on_board(board, runtime_dirs):
    _run_bit_exact("tflm_hello_world_int8", board, runtime_dirs)


@needs_tools
def test_micro_speech_bit_exact_on_cortex_m0(runtime_dirs):
    """Convolutions, depthwise and softmax on Armv6-M (no unaligned access, no DSP): the runtime's
    objects of the hello_world test are reused."""
    _run_bit_exact("tflm_micro_speech_int8", "microbit", runtime_dirs)


@needs_tools
def test_link_refusal_names_the_region_and_sizes(runtime_dirs):
    """keyword spotting plans into the micro:bit's 16 KB but leaves too little for the heap and the
    stack: the link refuses, and the error gives the addresses and the bytes missing."""
    from pyembed.target.firmware import FirmwareError, build_project, generate
    g = load_model(os.path.join(MODELS_DIR, "tiny_kws_dscnn_int8.tflite"))
    proj = generate(g, "microbit", runtime_dirs / "kws-microbit")
    with pytest.raises(FirmwareError) as e:
        build_project(proj.outdir, make_vars={"RUNTIME_BUILD": str(runtime_dirs / "runtime-microbit")})
    msg = str(e.value)
    assert "sram is too small" in msg and re.search(r"need \d+ B: \d+ B short", msg), msg
