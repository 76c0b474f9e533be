"""The C flags the Python extensions are built with (read by setup.py) and
that the kernel benchmark measures beside its own (pyembed.bench.kernels).

Python's own CFLAGS (sysconfig, e.g. ``-g -fwrapv -O3 -Wall``) come first on
the compiler line and these last, so these win: ``-fno-wrapv`` undoes the
``-fwrapv`` Python is built with (it made the kernels run 24-34 % more
instructions than the bench harness), ``-O3`` turns on the loop vectoriser
the kernels' inner loops are shaped for. ``-frecord-gcc-switches`` stores the
compiler line in each extension (section .GCC.command.line), so the
benchmark and the tests read back what a built extension was really
compiled with (see ``effective_flags``).
"""
import re
import subprocess

EXT_CFLAGS = ["-O3", "-fno-wrapv", "-frecord-gcc-switches", "-ffp-contract=off"]   # fp-contract: float32 kernels (pe_f32.h) round each operation as TFLM


def recorded_switches(path):
    """The compiler lines recorded in a built extension (list of str), or
    None when the file has no .GCC.command.line section or readelf is missing."""
    try:
        r = subprocess.run(["readelf", "-p", ".GCC.command.line", str(path)],
                           capture_output=True, text=True)
    except OSError:
        return None
    lines = [m.group(1).strip() for m in re.finditer(r"\]\s+(.*)", r.stdout)]
    return lines or None


def effective_flags(switch_lines):
    """From recorded compiler lines, the flags that decide the code: the last
    -O level and whether signed overflow wraps (the last of -fwrapv /
    -fno-wrapv) of each line. Returns a sorted list of distinct
    (opt, wrapv) pairs."""
    out = set()
    for line in switch_lines:
        opt, wrapv = "-O0", False
        for tok in line.split():
            if re.fullmatch(r"-O[0-3sgz]?|-Ofast", tok):
                opt = tok if tok != "-O" else "-O1"
            elif tok == "-fwrapv":
                wrapv = True
            elif tok == "-fno-wrapv":
                wrapv = False
        out.add((opt, wrapv))
    return sorted(out)
