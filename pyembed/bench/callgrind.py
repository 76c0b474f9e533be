"""Build small C programs against csrc/ and count their instructions with
valgrind's callgrind (deterministic, unlike wall-clock time on a shared machine).

    exe = build_program(c_source_text, "conv_bench", opt="-O2")
    counts = count_instructions(exe, ["arg"], functions=["pe_conv2d_rev_s8"])
    counts["pe_conv2d_rev_s8"]  -> instructions executed inside that function
                                   and everything it calls (inclusive)

Requires a source checkout (csrc/ beside the package) and valgrind.
"""
import glob
import hashlib
import os
import re
import shutil
import subprocess
import tempfile

from pyembed import _csrc

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CSRC = str(_csrc.csrc_dir(required=False) or os.path.join(REPO, "csrc"))
BUILD_DIR = str(_csrc.build_dir("bench"))


class BenchSetupError(RuntimeError):
    pass


def _require(tool):
    if shutil.which(tool) is None:
        raise BenchSetupError(f"{tool} not found; install it (apt-get install {tool})")


def build_program(source, name, opt="-O2", cc="gcc", extra_flags=()):
    """Compile source (C text with a main) with every csrc/src/*.c; returns the exe path.
    Cached by the hash of the source, flags and csrc contents."""
    if not os.path.isdir(CSRC):
        raise BenchSetupError(f"pyembed's C runtime (csrc/) not found at {CSRC}")
    _require(cc)
    srcs = _csrc.all_sources(CSRC)
    h = hashlib.sha256()
    h.update(source.encode())
    h.update(" ".join([cc, opt, *extra_flags]).encode())
    for p in srcs + sorted(glob.glob(os.path.join(CSRC, "include", "pyembed", "*.h"))) + sorted(
            glob.glob(os.path.join(CSRC, "src", "**", "*.h"), recursive=True)):
        with open(p, "rb") as f:
            h.update(f.read())
    os.makedirs(BUILD_DIR, exist_ok=True)
    exe = os.path.join(BUILD_DIR, f"{name}-{h.hexdigest()[:12]}")
    if os.path.exists(exe):
        return exe
    c_path = exe + ".c"
    with open(c_path, "w") as f:
        f.write(source)
    cmd = [cc, "-std=c99", *([opt] if opt else []), "-g", f"-I{os.path.join(CSRC, 'include')}",
           *extra_flags, c_path, *srcs, "-o", exe, "-lm"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise BenchSetupError(f"compile failed: {' '.join(cmd)}\n{r.stderr}")
    return exe


def count_instructions(exe, args=(), functions=()):
    """Run exe under callgrind. Returns {"total": Ir, fn: inclusive Ir of fn, ...}.

    Each function is measured in its own run with --toggle-collect=fn, so the
    count covers exactly the calls of that function (and what they call)."""
    _require("valgrind")
    out = {}
    targets = [None] + list(functions)
    for fn in targets:
        with tempfile.TemporaryDirectory() as td:
            cg = os.path.join(td, "cg.out")
            cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={cg}"]
            if fn is not None:
                cmd += ["--collect-atstart=no", f"--toggle-collect={fn}"]
            cmd += [exe, *map(str, args)]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise BenchSetupError(f"{' '.join(cmd)} failed:\n{r.stdout}\n{r.stderr}")
            ir = None
            with open(cg) as f:
                for line in f:
                    m = re.match(r"(?:summary|totals):\s+(\d+)", line)
                    if m:
                        ir = int(m.group(1))
            if ir is None:
                raise BenchSetupError(f"no instruction total in callgrind output of {exe}")
            out["total" if fn is None else fn] = ir
    return out
