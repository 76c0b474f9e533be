"""Firmware I/O (issue #35, `pyembed firmware --io uart|semihost|none`):
--io uart projects print their results on the board's own UART (no
semihosting) and, run under QEMU with the UART on stdout, give outputs `==`
the host runtime's on mps2-an386, microbit and netduinoplus2; --io none
builds an image with no semihosting and no output; --run refuses --io none;
a part without a UART driver refuses --io uart; rp2040 is refused (it needs
the Pico SDK's boot2) unless --boot2 gives one, which is then linked at the
flash's first 256 bytes; the boot2 CRC check. --io semihost is the default and
is covered by the other firmware tests. Four QEMU runs in all (three UART
runs, one silent run)."""
import json
import os
import re
import shutil
import struct
import subprocess

import numpy as np
import pytest
from click.testing import CliRunner

from pyembed.cli import main
from pyembed.codegen.firmware import io as fwio
from pyembed.data import MODELS_DIR
from pyembed.errors import ArgumentError
from pyembed.model.load import load_model
from pyembed.target import qemu

needs_tools = pytest.mark.skipif(qemu.missing_tools() is not None or shutil.which("make") is None,
                                 reason=str(qemu.missing_tools() or "make not installed"))

# the markers of semihosting in a built image: Thumb's semihosting call (BKPT 0xAB) and newlib rdimon's set-up
SEMIHOSTING_SYMBOLS = ("initialise_monitor_handles", "_swiwrite", "_swiread", "_swiopen")


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """One folder for the module's projects and the runtime objects per core (M4: an386 and netduinoplus2
    share them, their flags are the same; M0: microbit)."""
    return tmp_path_factory.mktemp("fw_io")


def _runtime(root, board):
    return str(root / f"runtime-{qemu.BOARDS[board].cpu}")


def _make_vars(root, board):
    """The runtime's objects shared by the projects of a core: one source tree for all (the checkout's csrc/,
    the Makefile's PYEMBED_CSRC), so that make does not rebuild them for each project's fresh copy."""
    from pyembed.codegen.firmware import csrc_dir
    return {"RUNTIME_BUILD": _runtime(root, board), "PYEMBED_CSRC": str(csrc_dir())}


def _semihosting_in_elf(elf):
    """What of semihosting the linked image holds: BKPT 0xAB instructions and rdimon symbols."""
    dis = subprocess.run([qemu.CC.replace("gcc", "objdump"), "-d", str(elf)], capture_output=True, text=True,
                         check=True).stdout
    syms = subprocess.run([qemu.CC.replace("gcc", "nm"), str(elf)], capture_output=True, text=True,
                          check=True).stdout
    found = [ln.strip() for ln in dis.splitlines() if re.search(r"\bbkpt\s+0x00ab\b", ln)]
    found += [s for s in SEMIHOSTING_SYMBOLS if re.search(rf"\b{s}\b", syms)]
    return found, syms


@needs_tools
@pytest.mark.parametrize("board", ["mps2-an386", "microbit", "netduinoplus2"])
def test_uart_output_equals_host(board, root):
    """micro_speech (convolution, depthwise, FC, softmax) with a random input compiled into the image; the
    outputs the board prints on its UART (QEMU -serial stdio, no semihosting) == the host runtime's."""
    from pyembed.target.firmware import build_project, generate, input_bytes, run_project
    g = load_model(os.path.join(MODELS_DIR, "tflm_micro_speech_int8.tflite"))
    rng = np.random.default_rng(sum(map(ord, board)))
    xs = [rng.integers(-128, 128, size=g.tensors[t].shape).astype(g.tensors[t].dtype) for t in g.inputs]
    proj = generate(g, board, root / f"uart-{board}", io="uart", copy_runtime=False,
                    run_input={"data": input_bytes(g, xs), "source": "test"})
    # the generated project: its own startup, the board's UART, the input compiled in; nothing of semihosting
    for name in ("main.c", "startup.c", "pe_uart.c", "Makefile", "CMakeLists.txt"):
        text = (proj.outdir / name).read_text()
        for word in ("rdimon", "initialise_monitor_handles", "fopen", "pe_read_input"):
            assert word not in text, (name, word)
    uart = fwio.UART_BOARDS[board]
    assert f"0x{uart.base:08X}" in (proj.outdir / "pe_uart.c").read_text()
    manifest = json.loads((proj.outdir / "firmware.json").read_text())
    assert manifest["io"] == "uart" and manifest["uart"]["base"] == uart.base
    build_project(proj.outdir, make_vars=_make_vars(root, board))
    found, _ = _semihosting_in_elf(proj.outdir / "firmware.elf")
    assert found == [], found
    run = run_project(proj, xs)
    host = g.run(xs[0])
    host = list(host) if isinstance(host, (list, tuple)) else [host]
    assert len(run.outputs) == len(host)
    for fw, h in zip(run.outputs, host):
        h = np.asarray(h).reshape(fw.shape)
        assert fw.dtype == h.dtype
        assert fw.tobytes() == h.tobytes(), f"{board}: {fw.ravel()[:16]} != {h.ravel()[:16]}"
    # the printed lines: the result in hex, the cycle counts, and instructions = ticks * 1e9 / the board's clock
    text = run.uart_text
    lines = text.splitlines()
    assert lines[0] == "pe_begin tflm_micro_speech_int8" and lines[-1] == "pe_end", text
    assert f"pe_output 0 {host[0].nbytes} {np.asarray(host[0]).tobytes().hex()}" in lines
    assert f"pe_tick_hz {qemu.BOARDS[board].systick_hz}" in lines
    assert abs(run.uart_instructions - run.invoke_instructions) <= 1
    assert [o["index"] for o in run.operators] == [o["op"] for o in proj.ops]
    assert 0 < run.total_instructions <= run.invoke_instructions
    assert run.total_instructions >= sum(op.macs for op in g.operators) // 2
    assert run.stack_bytes is not None and 0 < run.stack_bytes < run.stack_reserved
    # the image's input is compiled in: another input is refused, not silently run on the old one
    from pyembed.target.firmware import FirmwareError
    other = [np.asarray(x).copy() for x in xs]
    other[0].flat[0] = np.int8(-1 - int(other[0].flat[0]))
    with pytest.raises(FirmwareError, match="compiled into the image"):
        run_project(proj, other)


@needs_tools
def test_io_none_builds_without_semihosting_and_prints_nothing(root, tmp_path, monkeypatch):
    """`--io none --build`: an image without semihosting (no BKPT 0xAB, no rdimon) holding the results'
    globals; under QEMU with the UART on stdout it sends nothing and does not exit (it spins for a
    debugger)."""
    for k, v in _make_vars(root, "mps2-an386").items():
        monkeypatch.setenv(k, v)   # the Makefile's ?= takes them
    out = tmp_path / "none"
    res = CliRunner().invoke(main, ["firmware", "tflm_hello_world_int8", "--profile", "mps2-an386", "-o", str(out),
                                    "--io", "none", "--build"])
    assert res.exit_code == 0, res.output
    assert "io: none" in res.output
    for name in ("main.c", "startup.c", "Makefile"):
        text = (out / name).read_text()
        for word in ("rdimon", "initialise_monitor_handles", "fopen", "pe_read_input", "pe_uart"):
            assert word not in text, (name, word)
    assert not (out / "pe_uart.c").exists()
    assert json.loads((out / "firmware.json").read_text())["io"] == "none"
    found, syms = _semihosting_in_elf(out / "firmware.elf")
    assert found == [], found
    for sym in ("pe_result_status", "pe_result_done", "pe_result_ticks", "pe_input_data"):
        assert re.search(rf"\b{sym}\b", syms), sym
    proc = subprocess.Popen(qemu.serial_command(out / "firmware.elf", "mps2-an386"), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        stdout, _ = proc.communicate(timeout=3)
        exited = True
    except subprocess.TimeoutExpired:
        proc.terminate()
        stdout, _ = proc.communicate()
        exited = False
    assert not exited, "the --io none image exited by itself"
    assert stdout == b""


def test_run_refuses_io_none():
    res = CliRunner().invoke(main, ["firmware", "tflm_hello_world_int8", "--profile", "mps2-an386", "--io", "none",
                                    "--run"])
    assert res.exit_code == 2, res.output
    assert "--run with --io none" in res.output and "prints nothing" in res.output


def test_uart_needs_a_driver_for_the_part(tmp_path):
    out = tmp_path / "p"
    res = CliRunner().invoke(main, ["firmware", "tflm_hello_world_int8", "--profile", "stm32f746", "-o", str(out),
                                    "--io", "uart"])
    assert res.exit_code == 2, res.output
    assert "no UART driver for profile stm32f746" in res.output and "netduinoplus2" in res.output
    assert not out.exists()


def test_uart_batch_is_refused(tmp_path):
    x = tmp_path / "x.npy"
    np.save(x, np.array([[[1]], [[2]]], dtype=np.int8))
    res = CliRunner().invoke(main, ["firmware", "tflm_hello_world_int8", "--profile", "mps2-an386", "-o",
                                    str(tmp_path / "p"), "--io", "uart", "--inputs", str(x)])
    assert res.exit_code == 2, res.output
    assert "2 samples" in res.output and "one input into the image" in res.output


@pytest.mark.parametrize("io", ["semihost", "uart", "none"])
def test_rp2040_is_refused(io, tmp_path):
    """Without --boot2: exit 2, naming what is missing, whatever --io."""
    out = tmp_path / "p"
    res = CliRunner().invoke(main, ["firmware", "tflm_hello_world_int8", "--profile", "rp2040", "-o", str(out),
                                    "--io", io])
    assert res.exit_code == 2, res.output
    msg = res.output
    assert "RP2040 needs the Raspberry Pi Pico SDK's boot2 (boot_stage2) for its QSPI flash" in msg, msg
    assert "--layout library" in msg and "Pico SDK" in msg and "--boot2 FILE" in msg
    assert not out.exists()


def _boot2_blob(seed=7):
    """252 bytes (not a real boot2: only the boot ROM's check is tested here) and their CRC-32/MPEG-2,
    computed by the table form below, little-endian."""
    code = np.random.default_rng(seed).integers(0, 256, size=252, dtype=np.uint8).tobytes()
    return code + struct.pack("<I", _crc32_mpeg2_table(code))


@needs_tools
def test_rp2040_with_boot2_links_it_first(root, tmp_path, monkeypatch):
    """--boot2 FILE (CRC checked): the image's first 256 bytes at the flash base 0x10000000 are the file's,
    the vector table follows at 0x10000100 (where boot2 enters the program); Cortex-M0+ code. A file whose
    CRC word is wrong is exit 2. (No QEMU machine runs the RP2040.)"""
    blob = _boot2_blob()
    good = tmp_path / "boot2.bin"
    good.write_bytes(blob)
    bad = tmp_path / "bad.bin"
    bad.write_bytes(blob[:-1] + bytes([blob[-1] ^ 0x80]))
    res = CliRunner().invoke(main, ["firmware", "tflm_hello_world_int8", "--profile", "rp2040", "-o",
                                    str(tmp_path / "bad"), "--boot2", str(bad)])
    assert res.exit_code == 2 and "CRC-32/MPEG-2" in res.output, res.output
    res = CliRunner().invoke(main, ["firmware", "tflm_hello_world_int8", "--profile", "mps2-an386", "-o",
                                    str(tmp_path / "an386"), "--boot2", str(good)])
    assert res.exit_code == 2 and "boots without a second stage" in res.output, res.output
    from pyembed.codegen.firmware import csrc_dir
    monkeypatch.setenv("RUNTIME_BUILD", str(root / "runtime-cortex-m0plus"))
    monkeypatch.setenv("PYEMBED_CSRC", str(csrc_dir()))
    out = tmp_path / "rp"
    res = CliRunner().invoke(main, ["firmware", "tflm_hello_world_int8", "--profile", "rp2040", "-o", str(out),
                                    "--boot2", str(good), "--io", "none", "--build"])
    assert res.exit_code == 0, res.output
    elf = out / "firmware.elf"
    dumped = tmp_path / "boot2.out"
    subprocess.run([qemu.CC.replace("gcc", "objcopy"), "-O", "binary", "--only-section=.boot2", str(elf),
                    str(dumped)], check=True)
    assert dumped.read_bytes() == blob
    heads = subprocess.run([qemu.CC.replace("gcc", "objdump"), "-h", str(elf)], capture_output=True, text=True,
                           check=True).stdout
    assert re.search(r"\.boot2\s+00000100\s+10000000\s+10000000", heads), heads
    syms = subprocess.run([qemu.CC.replace("gcc", "nm"), str(elf)], capture_output=True, text=True,
                          check=True).stdout
    assert re.search(r"^10000100 [TR] pe_vector_table$", syms, re.M), syms
    attrs = subprocess.run([qemu.CC.replace("gcc", "readelf"), "-A", str(elf)], capture_output=True, text=True,
                           check=True).stdout
    assert "Tag_CPU_arch: v6S-M" in attrs
    m = json.loads((out / "firmware.json").read_text())
    assert m["boot2"]["bytes"] == 256 and m["boot2"]["crc32_mpeg2"] == struct.unpack("<I", blob[252:])[0]


def test_generate_project_needs_the_input_for_uart(tmp_path):
    from pyembed.target.firmware import generate
    g = load_model(os.path.join(MODELS_DIR, "tflm_hello_world_int8.tflite"))
    with pytest.raises(ArgumentError, match="compiled into the image"):
        generate(g, "mps2-an386", tmp_path / "p", io="uart")
    with pytest.raises(ArgumentError, match="io: expected one of"):
        generate(g, "mps2-an386", tmp_path / "p", io="swo", run_input={"data": b"\0"})


def _crc32_mpeg2_table(data):
    """CRC-32/MPEG-2 computed another way (a byte table) than fwio.boot2_crc (bit by bit)."""
    table = []
    for i in range(256):
        c = i << 24
        for _ in range(8):
            c = ((c << 1) ^ 0x04C11DB7) if c & 0x80000000 else (c << 1)
        table.append(c & 0xFFFFFFFF)
    crc = 0xFFFFFFFF
    for b in data:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ table[((crc >> 24) ^ b) & 0xFF]
    return crc


def test_boot2_crc():
    """The RP2040 boot ROM's boot2 check: CRC-32/MPEG-2 of the first 252 bytes, little-endian in the last 4."""
    # the standard check value of CRC-32/MPEG-2 ("123456789")
    assert fwio.boot2_crc(b"123456789") == 0x0376E6E7
    rng = np.random.default_rng(7)
    code = rng.integers(0, 256, size=252, dtype=np.uint8).tobytes()
    assert fwio.boot2_crc(code) == _crc32_mpeg2_table(code)
    blob = code + struct.pack("<I", _crc32_mpeg2_table(code))
    assert blob == _boot2_blob()
    assert fwio.check_boot2(blob) == blob
    bad = bytearray(blob)
    bad[100] ^= 0x01
    with pytest.raises(ArgumentError, match="CRC-32/MPEG-2"):
        fwio.check_boot2(bytes(bad))
    with pytest.raises(ArgumentError, match="expected 256 bytes"):
        fwio.check_boot2(blob[:255])


def test_parse_uart_output_refuses_a_cut_run():
    good = "pe_begin m\npe_status 0\npe_output 0 2 ab01\npe_invoke_ticks 5\npe_tick_hz 25000000\npe_end\n"
    r = fwio.parse_uart_output(good.encode())
    assert r["outputs"] == {0: b"\xab\x01"} and r["status"] == 0 and r["invoke_ticks"] == 5
    with pytest.raises(ArgumentError, match="no pe_end"):
        fwio.parse_uart_output(good.replace("pe_end\n", ""))
    with pytest.raises(ArgumentError, match="announces 3 B"):
        fwio.parse_uart_output(good.replace("pe_output 0 2", "pe_output 0 3"))
