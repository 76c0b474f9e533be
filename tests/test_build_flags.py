"""The Python extensions really are built with the flags the kernel benchmark
measures (pyembed/_build_flags.py: -O3 -fno-wrapv after Python's CFLAGS, which
carry -fwrapv): read back from the switches gcc records in each extension."""
import glob
import os
import shutil

import pytest

import pyembed._ext
from pyembed import _build_flags


def test_effective_flags_take_the_last_switch():
    lines = ["GNU C17 -g -fwrapv -O3 -Wall -O3 -fno-wrapv -fPIC",
             "GNU C17 -O2 -fwrapv", "GNU C17 -fno-wrapv -fwrapv -O"]
    assert _build_flags.effective_flags(lines) == [("-O1", True), ("-O2", True), ("-O3", False)]


@pytest.mark.skipif(shutil.which("readelf") is None, reason="readelf not installed")
def test_built_extensions_use_the_bench_flags():
    exts = sorted(glob.glob(os.path.join(os.path.dirname(pyembed._ext.__file__), "_*.so")))
    assert exts, "no built extension found"
    for path in exts:
        lines = _build_flags.recorded_switches(path)
        assert lines, f"{os.path.basename(path)}: no .GCC.command.line (built without {_build_flags.EXT_CFLAGS})"
        assert _build_flags.effective_flags(lines) == [("-O3", False)], (os.path.basename(path), lines)
