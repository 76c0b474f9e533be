"""Build the pyembed Cython extensions from csrc/.

Every pyembed/_ext/_<family>.pyx becomes the extension pyembed._ext._<family>.
It is linked with the C files its first lines name, as

    # pyembed-csrc: pe_pool_rev.c pe_conv_rev.c

(file names under csrc/src/, whatever room they are in: pyembed/_csrc.py),
plus the core every kernel uses (CORE below); a .pyx without that line gets
every file in csrc/src/ with the full operator table. Each extension carries its own
copy of the C it needs, which keeps the build a single step that an isolated
`pip install .` can run.

Set PYEMBED_ONLY=_fixed,_reverse to build only some extensions (handy while
developing one family); CFLAGS are the usual environment variable. The
extensions get EXT_CFLAGS (pyembed/_build_flags.py: -O3 -fno-wrapv) after
Python's own CFLAGS, so they run the code the kernel benchmark measures.
"""
import glob
import os
import runpy

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
_CSRC = runpy.run_path(os.path.join(HERE, "pyembed", "_csrc.py"))
_ROOT = os.path.join(HERE, "csrc")
C_SOURCES = [os.path.relpath(p, HERE) for p in _CSRC["all_sources"](_ROOT)]
C_HEADERS = sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, "csrc", "include", "pyembed", "*.h"))
                   + glob.glob(os.path.join(HERE, "csrc", "src", "**", "*.h"), recursive=True))
PYX = sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, "pyembed", "_ext", "_*.pyx")))

CORE = ["pe_fixed.c", "pe_exp2_table.c"]

# -O3 -fno-wrapv (+ a record of the switches): see pyembed/_build_flags.py
EXT_CFLAGS = runpy.run_path(os.path.join(HERE, "pyembed", "_build_flags.py"))["EXT_CFLAGS"]


def c_sources_for(pyx):
    with open(os.path.join(HERE, pyx)) as f:
        head = [next(f, "") for _ in range(10)]
    for line in head:
        if line.startswith("# pyembed-csrc:"):
            names = CORE + [n for n in line.split(":", 1)[1].split() if n not in CORE]
            return [os.path.relpath(p, HERE) for p in _CSRC["sources"](names, _ROOT)]
    return C_SOURCES


only = {x.strip() for x in os.environ.get("PYEMBED_ONLY", "").split(",") if x.strip()}

extensions = []
for pyx in PYX:
    stem = os.path.splitext(os.path.basename(pyx))[0]
    if only and stem not in only:
        continue
    extensions.append(
        Extension(
            f"pyembed._ext.{stem}",
            sources=[pyx] + c_sources_for(pyx),
            include_dirs=[os.path.join("csrc", "include"), numpy.get_include()],
            depends=C_HEADERS + [os.path.join("pyembed", "_ext", "pe_types.pxd")],
            define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
            extra_compile_args=list(EXT_CFLAGS),
        )
    )



class build_py_with_csrc(build_py):
    """Also copy the C runtime (csrc/include, csrc/src) into the package as
    pyembed/_csrc_tree, where pyembed._csrc.csrc_dir() finds it: an installed
    pyembed (a wheel, `pip install .`) builds firmware and runs the benchmarks
    without a source checkout. An editable install uses csrc/ itself."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        import shutil
        dst = os.path.join(self.build_lib, "pyembed", "_csrc_tree")
        if os.path.isdir(dst):
            shutil.rmtree(dst)
        for part in ("include", "src"):
            shutil.copytree(os.path.join(HERE, "csrc", part), os.path.join(dst, part),
                            ignore=shutil.ignore_patterns("*.o", "__pycache__"))


setup(
    cmdclass={"build_py": build_py_with_csrc},
    ext_modules=cythonize(
        extensions,
        compiler_directives={"language_level": "3", "boundscheck": False, "wraparound": False},
        include_path=[HERE],
    ),
)
