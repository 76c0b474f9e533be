"""Issue #33: an output folder never loses what pyembed did not write there
(pyembed.codegen.outdir), and names from a model, a file, a profile or an
option stay data in the generated C, linker script, Makefile and CMakeLists
(pyembed.codegen.escape): the projects are generated from hostile names,
compiled (host gcc, arm-none-eabi-gcc through the generated Makefile) and run."""
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from pyembed.codegen import escape, outdir
from pyembed.data import MODELS_DIR
from pyembed.errors import ArgumentError
from pyembed import _csrc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CSRC = os.path.join(ROOT, "csrc")
PROFILES = os.path.join(ROOT, "firmware_sim", "profiles")
STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]
HAVE_GCC = shutil.which("gcc") is not None
HAVE_ARM = shutil.which("arm-none-eabi-gcc") is not None and shutil.which("make") is not None

HELLO = os.path.join(MODELS_DIR, "tflm_hello_world_int8.tflite")
# a constant tensor's name in hello_world, replaced in the flatbuffer by a hostile one of the same length
PLAIN_TENSOR = b"sequential/dense/MatMul"
HOSTILE_TENSOR = '*/ #error boom /*"\n??/\\'
# the model's file name (the graph's name is its stem; a file name has no '/')
HOSTILE_MODEL = 'evil\n"model??'
HOSTILE_PROFILE = "board\n'; touch PWNED; '$(touch PWNED2)"


def _run_cli(args, cwd=None):
    from pyembed.cli import main
    old = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        r = CliRunner().invoke(main, args, catch_exceptions=False)
    finally:
        os.chdir(old)
    err = getattr(r, "stderr", "") or ""
    return r.exit_code, r.output if err in r.output else r.output + err   # click >= 8.2: output holds both


def _hostile_model(tmp_path):
    """hello_world with a constant tensor named HOSTILE_TENSOR, in a file named HOSTILE_MODEL.tflite."""
    data = open(HELLO, "rb").read()
    bad = HOSTILE_TENSOR.encode()
    assert len(bad) == len(PLAIN_TENSOR)
    old = struct.pack("<I", len(PLAIN_TENSOR)) + PLAIN_TENSOR + b"\0"
    assert data.count(old) == 1
    path = tmp_path / (HOSTILE_MODEL + ".tflite")
    path.write_bytes(data.replace(old, struct.pack("<I", len(bad)) + bad + b"\0"))
    from pyembed.model.load import load_model
    g = load_model(str(path))
    assert g.name == HOSTILE_MODEL and any(t.name == HOSTILE_TENSOR for t in g.tensors)
    return path, g


def _snapshot(d):
    """{relative path: bytes or '->link' or '/'} of everything below d."""
    out = {}
    for base, dirs, files in os.walk(d):
        for n in dirs + files:
            p = os.path.join(base, n)
            rel = os.path.relpath(p, d)
            if os.path.islink(p):
                out[rel] = "->" + os.readlink(p)
            elif os.path.isdir(p):
                out[rel] = "/"
            else:
                out[rel] = open(p, "rb").read()
    return out


# -- escaping helpers -------------------------------------------------------------------------

def test_c_comment_and_make_comment_keep_text_on_one_line_without_terminators():
    s = escape.c_comment("a */ b /* c\nd\r??/ e*/")
    assert "*/" not in s and "/*" not in s and "??" not in s and "\n" not in s and "\r" not in s
    assert "\\n" in s
    m = escape.make_comment("x\ny\\")
    assert m == "x\\ny\\\\"          # one line; the trailing backslash doubled: no continuation


@pytest.mark.skipif(not HAVE_GCC, reason="gcc not installed")
def test_c_string_holds_every_byte(tmp_path):
    text = "".join(chr(i) for i in range(1, 256)) + "??/ ??= \"' \\ é"
    lit = escape.c_string(text)
    (tmp_path / "s.c").write_text('#include <stdio.h>\n#include <string.h>\n'
                                  f"static const char s[] = {lit};\n"
                                  "int main(void) { fwrite(s, 1, sizeof s - 1, stdout); return 0; }\n")
    subprocess.run(["gcc", *STRICT, "-trigraphs", "s.c", "-o", "s"], cwd=tmp_path, check=True)
    got = subprocess.run([str(tmp_path / "s")], capture_output=True, check=True).stdout
    assert got == text.encode("utf-8")


def test_identifiers_and_sections_are_validated_naming_the_argument():
    assert escape.check_section(".pe_flash", "--section") == ".pe_flash"
    for bad in ['")))', ".x y", "", "a\n", "x" * 200]:
        with pytest.raises(ArgumentError, match="--section"):
            escape.check_section(bad, "--section")
    with pytest.raises(ArgumentError, match="prefix"):
        escape.check_identifier("pe model", "prefix")


# -- hostile names through plan -o: host program ------------------------------------------------

@pytest.mark.skipif(not HAVE_GCC, reason="gcc not installed")
def test_hostile_model_and_tensor_names_stay_data_in_the_host_program(tmp_path):
    path, g = _hostile_model(tmp_path)
    code, out = _run_cli(["plan", str(path), "-o", str(tmp_path / "out")])
    assert code == 0, out
    d = tmp_path / "out"
    hdr = (d / "model_data.h").read_text()
    assert "'* / #error boom / *\"\\n? ?/\\\\'" in hdr       # the tensor name, escaped in its comment
    assert '#define PE_MODEL_NAME "evil\\012\\"model\\?\\?"' in hdr   # the model name as a C string
    assert '#define PE_PLAN_MODEL "evil\\012\\"model\\?\\?"' in (d / "memplan.h").read_text()
    srcs = _csrc.all_sources(CSRC)
    r = subprocess.run(["gcc", *STRICT, "-trigraphs", "-O1", f"-I{CSRC}/include", "-I.", "model_main.c",
                        "model_graph.c", "model_data.c", *srcs, "-o", "model_main", "-lm"],
                       cwd=d, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    x = np.random.default_rng(0).integers(-128, 128, size=g.tensors[g.inputs[0]].shape).astype(np.int8)
    run = subprocess.run([str(d / "model_main")], input=x.tobytes(), capture_output=True, check=True)
    assert np.array_equal(np.array(run.stdout.split(), dtype=np.int64), g.run(x)[0].ravel().astype(np.int64))
    # and the name string reaches C intact
    (d / "probe.c").write_text('#include <stdio.h>\n#include "model_data.h"\n#include "memplan.h"\n'
                               'int main(void) { fputs(PE_MODEL_NAME, stdout); fputs(PE_PLAN_MODEL, stdout); '
                               'return 0; }\n')
    subprocess.run(["gcc", *STRICT, "-trigraphs", "-I.", "probe.c", "model_data.c", "-o", "probe"], cwd=d, check=True)
    assert subprocess.run([str(d / "probe")], capture_output=True, check=True).stdout == \
        (HOSTILE_MODEL * 2).encode()


def test_plan_section_option_is_validated(tmp_path):
    code, out = _run_cli(["plan", HELLO, "-o", str(tmp_path / "o"), "--section", '.x")))'])
    assert code == 2 and "--section" in out, out
    assert not (tmp_path / "o").exists()
    from pyembed.codegen.emit import model_data
    from pyembed.model.load import load_model
    with pytest.raises(ArgumentError, match="section"):
        model_data(load_model(HELLO), section='")));\n#error x')


# -- hostile names through firmware -o: the Makefile project with arm-none-eabi-gcc -----------------

def _hostile_profile(tmp_path, name=HOSTILE_PROFILE, region=None):
    with open(os.path.join(PROFILES, "mps2-an386.json")) as f:
        prof = json.load(f)
    prof["name"] = name
    if region is not None:
        prof["regions"][1]["name"] = region
        prof.get("defaults", {}).update({k: region for k, v in prof.get("defaults", {}).items() if v == "blockram"})
    p = tmp_path / "hostile_profile.json"
    p.write_text(json.dumps(prof))
    return p


@pytest.mark.skipif(not HAVE_ARM, reason="arm-none-eabi-gcc / make not installed")
def test_hostile_names_in_the_firmware_project_build_and_stay_data(tmp_path):
    path, g = _hostile_model(tmp_path)
    prof = _hostile_profile(tmp_path)
    fw = tmp_path / "fw"
    code, out = _run_cli(["firmware", str(path), "--profile", str(prof), "-o", str(fw)], cwd=tmp_path)
    assert code == 0, out
    mk = (fw / "Makefile").read_text()
    assert mk.splitlines()[0] == ("# Makefile - firmware for profile board\\n'; touch PWNED; '$(touch PWNED2) "
                                  "(cortex-m4), generated by pyembed.")
    assert "$$(touch PWNED2)" in mk                      # the recipe's copy: '$' doubled, inside single quotes
    cm = (fw / "CMakeLists.txt").read_text()
    assert cm.splitlines()[0].startswith("# CMakeLists.txt - firmware for profile board\\n'; touch PWNED;")
    assert "* / #error boom / *" in (fw / "model" / "model_data.h").read_text()
    assert "profile board\\n'; touch PWNED;" in (fw / "link.ld").read_text()
    # a user's C file in model/ survives a regeneration and is not built
    (fw / "model" / "extra.c").write_text("#error a user file was compiled into the firmware\n")
    code, out = _run_cli(["firmware", str(path), "--profile", str(prof), "-o", str(fw)], cwd=tmp_path)
    assert code == 0, out
    assert (fw / "model" / "extra.c").exists()
    r = subprocess.run(["make", "-s", "-j2", "firmware.elf"], cwd=fw, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    # `make run` on a profile without a QEMU machine: prints the name literally and fails, runs nothing else
    r = subprocess.run(["make", "run"], cwd=fw, capture_output=True, text=True)
    assert r.returncode != 0
    assert "profile board\\n'; touch PWNED; '$(touch PWNED2): no QEMU machine" in r.stdout
    if shutil.which("cmake"):
        r = subprocess.run(["cmake", "-S", ".", "-B", "build-cmake"], cwd=fw, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    for d in (fw, tmp_path, fw / "build"):
        assert not (d / "PWNED").exists() and not (d / "PWNED2").exists()


def test_firmware_refuses_a_profile_region_name_that_is_not_an_identifier(tmp_path):
    prof = _hostile_profile(tmp_path, name="ok", region='blockram"))) /*')
    code, out = _run_cli(["firmware", HELLO, "--profile", str(prof), "-o", str(tmp_path / "fw")])
    assert code == 2 and "region name" in out, out
    assert not (tmp_path / "fw").exists()


# -- output folders ----------------------------------------------------------------------------

def test_plan_refuses_a_user_file_without_force_and_replaces_it_with(tmp_path):
    d = tmp_path / "out"
    d.mkdir()
    (d / "memplan.h").write_text("my own header\n")
    (d / "notes.txt").write_text("mine\n")
    before = _snapshot(d)
    code, out = _run_cli(["plan", HELLO, "-o", str(d)])
    assert code == 2, out
    assert "memplan.h (not written by pyembed)" in out and "--force" in out and len(out.strip().splitlines()) == 1
    assert _snapshot(d) == before                      # nothing written, nothing left behind
    code, out = _run_cli(["plan", HELLO, "-o", str(d), "--force"])
    assert code == 0, out
    assert (d / "memplan.h").read_text() != "my own header\n" and (d / "notes.txt").read_text() == "mine\n"
    man = json.loads((d / outdir.MANIFEST).read_text())
    assert "memplan.h" in man["files"] and "notes.txt" not in man["files"]


def test_rerunning_over_its_own_output_works_and_an_edited_file_is_refused(tmp_path):
    d = tmp_path / "out"
    assert _run_cli(["plan", HELLO, "-o", str(d)])[0] == 0
    assert _run_cli(["plan", HELLO, "-o", str(d)])[0] == 0
    with open(d / "model_data.c", "a") as f:
        f.write("/* my edit */\n")
    code, out = _run_cli(["plan", HELLO, "-o", str(d)])
    assert code == 2 and "model_data.c (changed since pyembed wrote it)" in out, out
    assert (d / "model_data.c").read_text().endswith("/* my edit */\n")


def test_a_stale_generated_file_is_removed_only_when_unchanged(tmp_path):
    d = tmp_path / "out"
    with outdir.OutputDir(d) as out:
        out.write_text("a.txt", "a")
        out.write_text("sub/b.txt", "b")
        out.write_text("sub/c.txt", "c")
    (d / "sub" / "c.txt").write_text("edited")
    (d / "sub" / "mine.txt").write_text("mine")
    with outdir.OutputDir(d) as out:
        out.write_text("a.txt", "a2")
    assert not (d / "sub" / "b.txt").exists()          # ours, unchanged: gone
    assert (d / "sub" / "c.txt").read_text() == "edited" and (d / "sub" / "mine.txt").read_text() == "mine"
    assert (d / "a.txt").read_text() == "a2"


def test_a_symlinked_folder_pointing_outside_is_refused_even_with_force(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    d = tmp_path / "fw"
    d.mkdir()
    os.symlink(outside, d / "model")
    for extra in ([], ["--force"]):
        code, out = _run_cli(["firmware", HELLO, "--profile", "mps2-an386", "-o", str(d), *extra])
        assert code == 2 and "model is a symbolic link" in out, out
        assert os.listdir(outside) == [] and sorted(os.listdir(d)) == ["model"]


def test_a_symlinked_file_is_refused_and_with_force_replaced_not_followed(tmp_path):
    target = tmp_path / "precious.h"
    target.write_text("precious\n")
    d = tmp_path / "out"
    d.mkdir()
    os.symlink(target, d / "memplan.h")
    code, out = _run_cli(["plan", HELLO, "-o", str(d)])
    assert code == 2 and "memplan.h (a symbolic link)" in out, out
    assert _run_cli(["plan", HELLO, "-o", str(d), "--force"])[0] == 0
    assert target.read_text() == "precious\n" and not os.path.islink(d / "memplan.h")


def test_firmware_replaces_its_runtime_copy_file_by_file(tmp_path):
    d = tmp_path / "fw"
    assert _run_cli(["firmware", HELLO, "--profile", "mps2-an386", "-o", str(d)])[0] == 0
    (d / "pyembed" / "src" / "MY_NOTES.txt").write_text("keep me\n")
    (d / "pyembed" / "mine").mkdir()
    (d / "pyembed" / "mine" / "x.c").write_text("int x;\n")
    code, out = _run_cli(["firmware", HELLO, "--profile", "mps2-an386", "-o", str(d)])
    assert code == 0, out
    assert (d / "pyembed" / "src" / "MY_NOTES.txt").read_text() == "keep me\n"
    assert (d / "pyembed" / "mine" / "x.c").exists()
    assert (d / "pyembed" / "src" / "graph" / "pe_graph.c").read_bytes() == open(os.path.join(CSRC, "src", "graph", "pe_graph.c"),
                                                                       "rb").read()


def test_firmware_into_a_folder_with_the_users_build_files_is_refused(tmp_path):
    d = tmp_path / "fw"
    (d / "pyembed" / "src" / "graph").mkdir(parents=True)
    (d / "Makefile").write_text("all:\n\techo mine\n")
    (d / "pyembed" / "src" / "graph" / "pe_graph.c").write_text("/* my patched copy */\n")
    before = _snapshot(d)
    code, out = _run_cli(["firmware", HELLO, "--profile", "mps2-an386", "-o", str(d)])
    assert code == 2 and "Makefile (not written by pyembed)" in out and "pyembed/src/graph/pe_graph.c" in out, out
    assert _snapshot(d) == before
    code, out = _run_cli(["firmware", HELLO, "--profile", "mps2-an386", "-o", str(d), "--force"])
    assert code == 0, out
    assert "model/model_data.c" in (d / "Makefile").read_text()
    assert (d / "pyembed" / "src" / "graph" / "pe_graph.c").read_bytes() == open(os.path.join(CSRC, "src", "graph", "pe_graph.c"),
                                                                       "rb").read()


def _plan_outputs(name):
    from pyembed.model.load import load_model
    from pyembed.plan import plan_graph
    g = load_model(os.path.join(MODELS_DIR, name + ".tflite"))
    return g, plan_graph(g)


def test_a_failure_while_moving_files_into_place_leaves_the_folder_as_it_was(tmp_path, monkeypatch):
    from pyembed.codegen.emit import write_plan_outputs
    d = tmp_path / "out"
    write_plan_outputs(*_plan_outputs("tflm_hello_world_int8"), d)
    (d / "notes.txt").write_text("mine\n")
    before = _snapshot(d)
    real, calls = os.replace, []

    def failing(src, dst):
        calls.append(dst)
        if len(calls) == 4:
            raise OSError(28, "No space left on device (simulated)")
        return real(src, dst)
    monkeypatch.setattr(outdir.os, "replace", failing)
    with pytest.raises(OSError, match="simulated"):
        write_plan_outputs(*_plan_outputs("tiny_kws_dscnn_int8"), d)     # other contents in every file
    monkeypatch.setattr(outdir.os, "replace", real)
    assert len(calls) >= 4
    assert _snapshot(d) == before


def test_a_failure_while_generating_leaves_the_folder_as_it_was(tmp_path, monkeypatch):
    from pyembed.codegen import emit
    g, plan = _plan_outputs("tflm_hello_world_int8")
    d = tmp_path / "out"
    emit.write_plan_outputs(g, plan, d)
    before = _snapshot(d)

    def broken(*a, **k):
        raise RuntimeError("generator failed (simulated)")
    monkeypatch.setattr(emit, "graph_tables", broken)
    with pytest.raises(RuntimeError, match="simulated"):
        emit.write_plan_outputs(g, plan, d)
    assert _snapshot(d) == before
    with pytest.raises(RuntimeError, match="simulated"):
        emit.write_plan_outputs(g, plan, tmp_path / "new" / "deep")
    assert not (tmp_path / "new").exists()          # the folders it created are gone too


@pytest.mark.skipif(not HAVE_GCC, reason="gcc not installed")
def test_region_names_that_differ_in_case_get_distinct_macros(tmp_path):
    from pyembed.codegen.emit import memplan_header
    from pyembed.model.load import load_model
    from pyembed.plan import Region, plan_graph
    g = load_model(HELLO)
    text = memplan_header(plan_graph(g, [Region("ram_a", 64), Region("RAM_A", 1 << 16)]))
    assert "#define PE_PLAN_REGION_RAM_A_REGION0 0" in text and "#define PE_PLAN_REGION_RAM_A_REGION1 1" in text
    (tmp_path / "m.c").write_text('#include "memplan.h"\nint f(void);\nint f(void) { return PE_PLAN_NUM_REGIONS; }\n')
    (tmp_path / "memplan.h").write_text(text)
    subprocess.run(["gcc", *STRICT, "-c", "m.c"], cwd=tmp_path, check=True)


# -- kill tests: a process killed at any step of writing leaves no user file lost, no file torn ---

_KILL_AT = r"""
import os, signal, sys
k = int(sys.argv[1])
real = os.replace
calls = [0]
def replace(src, dst, *a, **kw):
    calls[0] += 1
    if calls[0] == k:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(src, dst, *a, **kw)
os.replace = replace
from pyembed.cli import main
sys.argv = ["pyembed"] + sys.argv[2:]
main()
"""


def test_a_killed_write_loses_no_user_file_and_tears_no_file(tmp_path):
    """SIGKILL at the k-th file moved into place, for every k: the user's file is
    intact and every file is whole, either the previous run's or the new run's."""
    new_args = ["plan", HELLO, "--section", ".pe_weights"]
    ref = tmp_path / "ref"
    code, out = _run_cli(new_args + ["-o", str(ref)])
    assert code == 0, out
    new = _snapshot(ref)
    d = tmp_path / "out"
    killed = 0
    for k in range(1, 40):
        if d.exists():
            shutil.rmtree(d)
        code, out = _run_cli(["plan", HELLO, "-o", str(d)])       # the previous run's output
        assert code == 0, out
        (d / "notes.txt").write_text("the user's own notes\n")
        old = _snapshot(d)
        assert {r for r in old if not r.startswith(".")} != {r for r in new if not r.startswith(".")} or \
            any(old[r] != new.get(r) for r in old if r in new and not r.startswith(".")), "the two runs must differ"
        r = subprocess.run([sys.executable, "-c", _KILL_AT, str(k), *new_args, "-o", str(d)],
                           capture_output=True, text=True, timeout=300)
        if r.returncode == 0:
            break                                                   # k past the last move: the run completed
        assert r.returncode == -9, r.stderr[-2000:]
        killed += 1
        now = _snapshot(d)
        assert now["notes.txt"] == b"the user's own notes\n"
        for rel, data in now.items():
            name = os.path.basename(rel)
            if data == "/" or name.startswith((".pyembed-tmp-", ".pyembed-old-")) or name == outdir.MANIFEST:
                continue
            assert data in (old.get(rel), new.get(rel)), f"kill at move {k}: {rel} is neither the old nor the new file"
        # a rerun completes (with --force: files of a half-moved run no longer match the old manifest)
        code, out = _run_cli(new_args + ["-o", str(d), "--force"])
        assert code == 0, out
        after = _snapshot(d)
        assert after["notes.txt"] == b"the user's own notes\n"
        assert all(after[rel] == data for rel, data in new.items() if not os.path.basename(rel).startswith("."))
    assert killed >= 5, f"only {killed} kill points were reached"
