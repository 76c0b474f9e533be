"""Firmware usability (issue #34): which profiles QEMU runs; a project
generated with its run's input keeps it (pe_input.bin, in the folder's
manifest) and `make run` without it says what to do; pe_model.h describes
each input and output (name, dims, type, quantization)."""
import os
import shutil
import subprocess

import numpy as np
import pytest

from pyembed.data import MODELS_DIR
from pyembed.model.load import load_model

MODEL = "tflm_hello_world_int8"
BOARD = "mps2-an386"


def _graph():
    return load_model(os.path.join(MODELS_DIR, MODEL + ".tflite"))


# -- 1. which profiles QEMU runs -----------------------------------------------------------------

def test_qemu_machine_of_a_profile():
    from firmware_sim.profiles import load_profile
    from pyembed.codegen.firmware import qemu_machine
    assert qemu_machine("MPS2-AN386") == "mps2-an386"
    assert qemu_machine(load_profile("mps2-an500")) == "mps2-an500"
    assert qemu_machine(load_profile("stm32f746")) is None


# -- 2. the input a --run project keeps ----------------------------------------------------------

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
