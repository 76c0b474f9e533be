"""Firmware usability (issue #34): --run on a profile no QEMU machine emulates
is refused before any work; a --run project keeps its input (pe_input.bin, in
the folder's manifest) so that `make run` repeats the run, and `make run`
without it says what to do; --run --inputs runs every sample of a batch;
pe_model.h describes each input and output (name, dims, type, quantization).
Only the small tflm_hello_world_int8 is built and run."""
import json
import os
import shutil
import struct
import subprocess

import numpy as np
import pytest
from click.testing import CliRunner

from pyembed.cli import main
from pyembed.codegen.outdir import MANIFEST
from pyembed.data import MODELS_DIR
from pyembed.model.load import load_model
from pyembed.target import qemu

MODEL = "tflm_hello_world_int8"
BOARD = "mps2-an386"
needs_qemu = pytest.mark.skipif(qemu.missing_tools() is not None, reason=str(qemu.missing_tools()))


def _graph():
    return load_model(os.path.join(MODELS_DIR, MODEL + ".tflite"))


def _host(g, x):
    return np.asarray(g.run(x)).ravel().tolist()


# -- 1. --run on a profile no QEMU machine emulates ----------------------------------------------

def test_run_without_qemu_machine_is_refused_before_any_work(tmp_path, monkeypatch):
    import pyembed.model.load
    import pyembed.target.planning

    def never(*a, **k):
        raise AssertionError("loaded or planned before refusing --run")
    monkeypatch.setattr(pyembed.model.load, "load_model", never)
    monkeypatch.setattr(pyembed.target.planning, "plan_for_target", never)
    out = tmp_path / "p"
    res = CliRunner().invoke(main, ["firmware", MODEL, "--profile", "stm32f746", "-o", str(out), "--run"])
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1, res.output
    assert "--run" in lines[0] and "stm32f746" in lines[0] and "mps2-an386" in lines[0]
    assert not out.exists()


def test_qemu_machine_of_a_profile():
    from firmware_sim.profiles import load_profile
    from pyembed.codegen.firmware import qemu_machine
    assert qemu_machine("MPS2-AN386") == "mps2-an386"
    assert qemu_machine(load_profile("mps2-an500")) == "mps2-an500"
    assert qemu_machine(load_profile("stm32f746")) is None


# -- 2. and 3.: one --run of a batch, kept in the project -----------------------------------------

@pytest.fixture(scope="module")
def batch_run(tmp_path_factory):
    """`pyembed firmware hello_world --run --inputs x.npy --json` with three samples."""
    if qemu.missing_tools() is not None:
        pytest.skip(str(qemu.missing_tools()))
    root = tmp_path_factory.mktemp("fwu")
    g = _graph()
    shape = g.tensors[g.inputs[0]].shape
    x = np.array([37, -100, 5], dtype=np.int8).reshape((3,) + tuple(shape[1:]))
    np.save(root / "x.npy", x)
    proj = root / "proj"
    res = CliRunner().invoke(main, ["firmware", MODEL, "--profile", BOARD, "-o", str(proj), "--run",
                                    "--inputs", str(root / "x.npy"), "--json"])
    assert res.exit_code == 0, res.output
    return g, x, proj, json.loads(res.output)


@needs_qemu
def test_batch_runs_every_sample(batch_run):
    g, x, _, d = batch_run
    assert [s["sample"] for s in d["samples"]] == [0, 1, 2]
    hosts = [_host(g, x[i:i + 1]) for i in range(3)]
    assert len({tuple(h) for h in hosts}) == 3          # the samples are told apart
    for s, h in zip(d["samples"], hosts):
        assert s["outputs"] == [h]
        assert s["bit_exact_with_host"] is True and s["mismatches"] == []
        assert s["total_instructions"] == sum(o["instructions"] for o in s["operators"]) > 0
        assert s["invoke_instructions"] >= s["total_instructions"]
    assert d["outputs"] == d["samples"][0]["outputs"]   # sample 0 at the top level, as for one sample
    assert d["bit_exact_with_host"] is True


@needs_qemu
def test_batch_text_output_reports_each_sample(tmp_path):
    """The batch's text report: one line per sample and the outputs of each."""
    g = _graph()
    x = np.array([[12], [-60]], dtype=np.int8)
    np.save(tmp_path / "x.npy", x)
    res = CliRunner().invoke(main, ["firmware", MODEL, "--profile", BOARD, "-o", str(tmp_path / "p"), "--run",
                                    "--inputs", str(tmp_path / "x.npy")])
    assert res.exit_code == 0, res.output
    assert "2 samples, each bit-exact with the host run" in res.output
    for i in range(2):
        assert f"sample {i}: bit-exact" in res.output
        assert f"output 0: {' '.join(map(str, _host(g, x[i:i + 1])))}" in res.output


@needs_qemu
def test_run_keeps_its_input_in_the_manifest(batch_run):
    _, x, proj, d = batch_run
    data = (proj / "pe_input.bin").read_bytes()
    assert data == x[0].tobytes()
    import hashlib
    files = json.loads((proj / MANIFEST).read_text())["files"]
    assert files["pe_input.bin"] == hashlib.sha256(data).hexdigest()
    info = json.loads((proj / "firmware.json").read_text())["input_file"]
    assert info["name"] == "pe_input.bin" and info["bytes"] == len(data)
    assert info["sample"] == 0 and info["samples"] == 3
    assert d["input_file"] == info


@needs_qemu
def test_make_run_repeats_the_run(batch_run):
    g, x, proj, d = batch_run
    out = proj / "pe_output.bin"
    if out.exists():
        out.unlink()
    p = subprocess.run(["make", "-s", "run"], cwd=proj, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    blob = out.read_bytes()
    assert blob[:4] == b"PEFW"
    status, = struct.unpack_from("<i", blob, 4)
    assert status == 0
    n = g.tensors[g.outputs[0]].nbytes
    assert np.frombuffer(blob[20:20 + n], dtype=np.int8).tolist() == _host(g, x[0:1]) == d["samples"][0]["outputs"][0]


@needs_qemu
def test_make_run_without_input_says_what_to_do(batch_run):
    _, _, proj, _ = batch_run
    keep = proj.parent / "pe_input.keep"
    shutil.move(proj / "pe_input.bin", keep)
    try:
        p = subprocess.run(["make", "-s", "run"], cwd=proj, capture_output=True, text=True, timeout=300)
        assert p.returncode != 0
        text = p.stdout + p.stderr
        line = [ln for ln in text.splitlines() if ln.startswith("make run:")]
        assert len(line) == 1, text
        assert "no pe_input.bin" in line[0]
        assert f"pyembed firmware {MODEL} --profile {BOARD}" in line[0] and "--run --inputs" in line[0]
        assert "1 B: input 0 'serving_default_dense_input:0' int8 (1, 1)" in line[0]
        assert "qemu-system-arm" not in text
        # a file of the wrong size: its size and the expected one
        (proj / "pe_input.bin").write_bytes(b"abc")
        p = subprocess.run(["make", "-s", "run"], cwd=proj, capture_output=True, text=True, timeout=300)
        assert p.returncode != 0
        assert "make run: pe_input.bin holds 3 B, not 1 B" in p.stdout + p.stderr
        assert "qemu-system-arm" not in p.stdout + p.stderr
    finally:
        shutil.move(keep, proj / "pe_input.bin")


def test_rerun_replaces_the_kept_input_and_refuses_a_users(tmp_path):
    """pe_input.bin is pyembed's file: a rerun replaces it (and drops it when it
    runs nothing); one the user wrote is refused, as any file in the way."""
    from pyembed.errors import ArgumentError
    from pyembed.target.firmware import generate
    g = _graph()
    out = tmp_path / "p"
    generate(g, BOARD, out, run_input={"data": b"\x05", "source": "test"})
    assert (out / "pe_input.bin").read_bytes() == b"\x05"
    generate(g, BOARD, out, run_input={"data": b"\x07", "source": "test"})
    assert (out / "pe_input.bin").read_bytes() == b"\x07"
    (out / "pe_input.bin").write_bytes(b"\x09")
    with pytest.raises(ArgumentError, match="pe_input.bin"):
        generate(g, BOARD, out, run_input={"data": b"\x05"})
    assert (out / "pe_input.bin").read_bytes() == b"\x09"
    generate(g, BOARD, out, run_input={"data": b"\x05"}, force=True)
    assert (out / "pe_input.bin").read_bytes() == b"\x05"
    generate(g, BOARD, out)
    assert not (out / "pe_input.bin").exists()
    with pytest.raises(ArgumentError, match="run_input: 2 B of input"):
        generate(g, BOARD, tmp_path / "q", run_input={"data": b"\x05\x06"})


def test_cli_bad_inputs_refused_before_planning(tmp_path, monkeypatch):
    import pyembed.target.planning

    def never(*a, **k):
        raise AssertionError("planned before checking --inputs")
    monkeypatch.setattr(pyembed.target.planning, "plan_for_target", never)
    np.save(tmp_path / "x.npy", np.zeros((2, 3), dtype=np.int8))
    res = CliRunner().invoke(main, ["firmware", MODEL, "--profile", BOARD, "-o", str(tmp_path / "p"), "--run",
                                    "--inputs", str(tmp_path / "x.npy")])
    assert res.exit_code == 2, res.output
    assert "x.npy" in res.output and "shape" in res.output


# -- 4. pe_model.h describes each input and output -----------------------------------------------

def _defines(header):
    out = {}
    for ln in header.splitlines():
        parts = ln.split(" ", 2)
        if ln.startswith("#define PE_MODEL_") and len(parts) == 3:
            out[parts[1]] = parts[2]
    return out


def test_api_header_describes_inputs_and_outputs(tmp_path):
    from pyembed.codegen.escape import c_string
    from pyembed.target.firmware import generate
    g = _graph()
    generate(g, BOARD, tmp_path / "p")
    d = _defines((tmp_path / "p" / "model" / "pe_model.h").read_text())
    for kind, tensors in (("INPUT", g.inputs), ("OUTPUT", g.outputs)):
        for k, t in enumerate(tensors):
            tt = g.tensors[t]
            m = f"PE_MODEL_{kind}{k}"
            assert d[f"{m}_NAME"] == c_string(tt.name)
            assert d[f"{m}_DIMS"] == "{" + ",".join(map(str, tt.shape)) + "}"
            assert int(d[f"{m}_RANK"]) == len(tt.shape)
            assert d[f"{m}_DTYPE"] == "PE_DT_INT8"
            assert d[f"{m}_QUANTIZED"] == "1"
            assert np.float32(d[f"{m}_SCALE"].rstrip("f")) == np.float32(tt.scale[0])
            assert int(d[f"{m}_ZERO_POINT"]) == int(tt.zero_point[0])
    # not the same numbers by accident: input and output differ
    assert d["PE_MODEL_INPUT0_SCALE"] != d["PE_MODEL_OUTPUT0_SCALE"]


@pytest.mark.skipif(shutil.which("cc") is None, reason="no host C compiler")
def test_api_header_names_escaped_and_compiled(tmp_path):
    """Tensor names with quotes, comment ends, backslashes, trigraphs and
    newlines reach pe_model.h escaped: a C program including the header (with
    -Werror) prints them back byte for byte, and the numbers with them."""
    from pyembed import _csrc
    from pyembed.target.firmware import generate
    g = _graph()
    weird_in = 'in"put */ /* \\ ??= \n\u00e9'
    weird_out = "out*/put"
    g.tensors[g.inputs[0]].name = weird_in
    g.tensors[g.outputs[0]].name = weird_out
    proj = tmp_path / "p"
    generate(g, BOARD, proj)
    header = (proj / "model" / "pe_model.h").read_text()
    comment = [ln for ln in header.splitlines() if ln.startswith("/* input 0:")]
    assert len(comment) == 1 and comment[0].count("*/") == 1 and comment[0].endswith("*/")
    assert comment[0].count("/*") == 1
    prog = tmp_path / "show.c"
    prog.write_text("""#include <stdio.h>
#include "pe_model.h"
int main(void)
{
    static const int in_dims[] = PE_MODEL_INPUT0_DIMS;
    static const int out_dims[] = PE_MODEL_OUTPUT0_DIMS;
    fputs(PE_MODEL_INPUT0_NAME, stdout);
    putchar(0);
    fputs(PE_MODEL_OUTPUT0_NAME, stdout);
    putchar(0);
    printf("%d %d %d %.9g %d %d %.9g %d %d\\n", PE_MODEL_INPUT0_RANK, in_dims[0], in_dims[1],
           (double)PE_MODEL_INPUT0_SCALE, PE_MODEL_INPUT0_ZERO_POINT, out_dims[1],
           (double)PE_MODEL_OUTPUT0_SCALE, PE_MODEL_OUTPUT0_ZERO_POINT, (int)PE_MODEL_INPUT0_DTYPE);
    return 0;
}
""")
    exe = tmp_path / "show"
    cc = subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-I", str(proj / "model"),
                         "-I", str(proj), "-I", str(_csrc.csrc_dir() / "include"), str(prog), "-o", str(exe)],
                        capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr
    out = subprocess.run([str(exe)], capture_output=True).stdout
    name_in, name_out, nums = out.split(b"\0")
    assert name_in == weird_in.encode("utf-8") and name_out == weird_out.encode("utf-8")
    ti, to = g.tensors[g.inputs[0]], g.tensors[g.outputs[0]]
    f = nums.split()
    assert [int(f[0]), int(f[1]), int(f[2])] == [len(ti.shape), *ti.shape]
    assert np.float32(float(f[3])) == np.float32(ti.scale[0]) and int(f[4]) == int(ti.zero_point[0])
    assert int(f[5]) == to.shape[1]
    assert np.float32(float(f[6])) == np.float32(to.scale[0]) and int(f[7]) == int(to.zero_point[0])
    assert int(f[8]) == 0     # PE_DT_INT8


@pytest.mark.skipif(shutil.which("make") is None, reason="make not installed")
def test_make_run_message_keeps_hostile_names_as_data(tmp_path):
    """The model's file name and its input's tensor name reach `make run`'s
    message literally: nothing in them runs (the build is skipped: make -o)."""
    from pyembed.target.firmware import generate
    src = tmp_path / "m'; touch PWNED; '$(touch PWNED2).tflite"
    shutil.copy(os.path.join(MODELS_DIR, MODEL + ".tflite"), src)
    g = load_model(str(src))
    g.tensors[g.inputs[0]].name = "in\\put$(touch PWNED3)'\""
    proj = tmp_path / "p"
    generate(g, BOARD, proj)
    p = subprocess.run(["make", "-o", "firmware.elf", "run"], cwd=proj, capture_output=True, text=True)
    assert p.returncode != 0
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("make run:")]
    assert len(line) == 1, p.stdout + p.stderr
    assert f"pyembed firmware {src} --profile {BOARD}" in line[0]
    assert "input 0 'in\\\\put$(touch PWNED3)'\"' int8 (1, 1)" in line[0]
    for d in (proj, tmp_path):
        assert not any((d / n).exists() for n in ("PWNED", "PWNED2", "PWNED3"))
