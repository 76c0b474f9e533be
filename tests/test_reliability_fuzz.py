"""Replays the fuzzers' findings and seed corpora under AddressSanitizer + UBSan.

Every libFuzzer harness tools/fuzz/fuzz_<family>.c is also built with a plain
main() (tools/fuzz/replay_main.c) by gcc, so the inputs kept in
tests/data/regressions/<family>/ (crashes the fuzzers found) and
tools/fuzz/corpus/<family>/ (a small merged corpus covering the harness) run
on every CI machine, with or without clang. A regression whose bug is still
open is xfail(strict): it must keep failing until the fix lands and its
entry in tests/data/regressions/index.json says "fixed".
"""
import concurrent.futures
import json
import os
import pathlib
import shutil
import subprocess

import pytest
from pyembed import _csrc

ROOT = pathlib.Path(__file__).resolve().parent.parent
FUZZ = ROOT / "tools" / "fuzz"
REGRESSIONS = ROOT / "tests" / "data" / "regressions"
CORPUS = FUZZ / "corpus"
INDEX = json.loads((REGRESSIONS / "index.json").read_text())
HANG_SECONDS = 3

CC = os.environ.get("CC", "gcc")
SAN = ["-std=c99", "-g", "-O1", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
       "-fno-sanitize-recover=all", f"-I{ROOT / 'csrc' / 'include'}", f"-I{FUZZ}"]
ENV = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0",
           UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")

pytestmark = pytest.mark.skipif(shutil.which(CC) is None, reason=f"{CC} not installed")


def families():
    return sorted(p.stem[len("fuzz_"):] for p in FUZZ.glob("fuzz_*.c"))


def regression_cases():
    cases = []
    for f in sorted(REGRESSIONS.glob("*/*")):
        key = f"{f.parent.name}/{f.name}"
        if f.parent.name == "models":
            continue  # model patches: tests/test_reliability_models.py
        entry = INDEX.get(key, {})
        marks = []
        if entry.get("status") == "open":
            marks.append(pytest.mark.xfail(
                strict=True, reason=f"open bug in {entry.get('where')}: {entry.get('what')}"))
        cases.append(pytest.param(key, marks=marks, id=key))
    return cases


@pytest.fixture(scope="module")
def replay_bins(tmp_path_factory):
    """family -> replay binary, from objects of csrc/src built once with sanitizers."""
    out = tmp_path_factory.mktemp("fuzz_replay")
    srcs = [pathlib.Path(p) for p in _csrc.all_sources(ROOT / "csrc")]

    def compile_one(src):
        obj = out / (src.stem + ".o")
        subprocess.run([CC, *SAN, "-c", str(src), "-o", str(obj)], check=True,
                       capture_output=True, text=True)
        return obj

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        objs = list(pool.map(compile_one, srcs))
    bins = {}
    for fam in families():
        exe = out / f"replay_{fam}"
        r = subprocess.run([CC, *SAN, str(FUZZ / f"fuzz_{fam}.c"), str(FUZZ / "replay_main.c"),
                            *map(str, objs), "-o", str(exe), "-lm"], capture_output=True, text=True)
        assert r.returncode == 0, f"building fuzz_{fam}.c failed:\n{r.stderr}"
        bins[fam] = exe
    return bins


def replay(exe, files, skip_known=True):
    """Run the harness on files; the harnesses skip the known open bugs
    unless skip_known is False (FUZZ_NO_SKIP_KNOWN, fuzz_common.h)."""
    env = dict(ENV, FUZZ_NO_SKIP_KNOWN="0" if skip_known else "1")
    try:
        r = subprocess.run([str(exe), *map(str, files)], capture_output=True, text=True,
                           timeout=HANG_SECONDS * max(1, len(files) // 200 + 1), env=env)
    except subprocess.TimeoutExpired:
        return False, f"no answer within {HANG_SECONDS} s (hang)"
    return r.returncode == 0, r.stderr[-3000:]


def test_every_regression_file_is_indexed():
    files = {f"{f.parent.name}/{f.name}" for f in REGRESSIONS.glob("*/*")}
    entries = {k for k in INDEX if not k.startswith("_")}
    assert files == entries, f"unindexed: {sorted(files - entries)}, missing: {sorted(entries - files)}"
    for k in entries:
        assert INDEX[k]["status"] in ("open", "fixed"), k
        assert k.split("/")[0] in families() + ["models"], f"{k}: no harness tools/fuzz/fuzz_{k.split('/')[0]}.c"


@pytest.mark.parametrize("key", regression_cases())
def test_regression_input(replay_bins, key):
    ok, log = replay(replay_bins[key.split("/")[0]], [REGRESSIONS / key], skip_known=False)
    assert ok, f"{key} still fails:\n{log}"


@pytest.mark.parametrize("family", families())
def test_seed_corpus(replay_bins, family):
    files = sorted((CORPUS / family).glob("*"))
    if not files:
        pytest.skip(f"no seed corpus for {family}")
    ok, log = replay(replay_bins[family], files)
    assert ok, f"fuzz_{family} corpus:\n{log}"
