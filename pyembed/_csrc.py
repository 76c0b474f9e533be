"""Where pyembed's C runtime is, and the rooms of csrc/src/.

Foundation module: standard library only, so that setup.py can run it
(runpy) before the package is built.

csrc/src/ is split into rooms; calls and includes flow only downward
(tests/test_c_layout.py reads every object's undefined symbols and every
file's includes to keep it so):

    core      fixed-point arithmetic, tables, shared helpers
    kernels   pure kernels with their size queries, one folder per family;
              no graph types, no runner
    pipeline  the stripe executor, fused conv -> pool, stripe regions
    graph     the runtime core (pe_graph.c), one runner file per operator
              family (pe_run_<family>.c) and the full operator table
              (pe_graph_ops.c)
    sched     the cooperative dispatcher
    segload   the segment loader

A firmware links its model's own operator table (model/model_ops.c) instead
of FULL_TABLES (the operator table and the stripe executor's kind table), so
that only the runners and kernels its model calls are linked; every other
build (the Python extensions, the C tests, the fuzzers) links FULL_TABLES.
"""
import os
from pathlib import Path

ROOMS = ("core", "kernels", "pipeline", "graph", "sched", "segload")   # lowest first
# the rooms each room may call into or include from (besides its own)
ALLOWED = {
    "core": (),
    "kernels": ("core",),
    "pipeline": ("kernels", "core"),
    "graph": ("pipeline", "kernels", "core"),
    "sched": ("core",),
    "segload": ("core",),
}
# public headers (csrc/include/pyembed/) that belong to a room other than kernels
HEADER_ROOMS = {
    "pe_types.h": "core",
    "pe_fixed.h": "core",
    "pe_simd.h": "core",
    "pe_stripe.h": "pipeline",
    "pe_fused.h": "pipeline",
    "pe_conv_fc.h": "pipeline",
    "pe_pipeline.h": "pipeline",
    "pe_stripe_kinds.h": "pipeline",
    "pe_graph.h": "graph",
    "pe_graph_internal.h": "graph",
    "pe_graph_runners.h": "graph",
    "pe_fc_w16.h": "graph",
    "pe_sched.h": "sched",
    "pe_segload.h": "segload",
    "pyembed.h": None,  # the umbrella header: for applications, no room may include it
}
FULL_TABLE = "pe_graph_ops.c"
# the full table of the stripe executor's layer kinds (src/pipeline/, pe_stripe_kinds.h): a
# firmware's model_ops.c defines the model's own instead, as it does the operator table
STRIPE_TABLE = "pe_stripe_kinds.c"
FULL_TABLES = (FULL_TABLE, STRIPE_TABLE)

_HERE = Path(__file__).resolve().parent
# a source checkout (csrc/ beside the package), or the copy a wheel carries
_CANDIDATES = (_HERE.parent / "csrc", _HERE / "_csrc_tree")


def csrc_dir(required=True):
    """The csrc/ directory (include/ and src/), or None when absent and not required."""
    env = os.environ.get("PYEMBED_CSRC")
    for c in ([Path(env)] if env else []) + list(_CANDIDATES):
        if (c / "src" / "graph" / "pe_graph.c").is_file():
            return c
    if required:
        raise FileNotFoundError("pyembed's C runtime (csrc/) was not found next to the package "
                                f"(looked in {', '.join(str(c) for c in _CANDIDATES)})")
    return None


def all_sources(root=None, table=True):
    """Every .c file of csrc/src/ (sorted paths); table=False leaves out the full tables (FULL_TABLES)."""
    src = Path(root or csrc_dir()) / "src"
    return sorted(str(p) for p in src.rglob("*.c") if table or p.name not in FULL_TABLES)


def source_map(root=None):
    """{basename: path} of every .c file; basenames are unique across rooms."""
    out = {}
    for p in all_sources(root):
        name = os.path.basename(p)
        if name in out:
            raise RuntimeError(f"two C files named {name}: {out[name]} and {p}")
        out[name] = p
    return out


def sources(names, root=None):
    """Paths of the named .c files (basenames, in the given order)."""
    m = source_map(root)
    missing = [n for n in names if n not in m]
    if missing:
        raise FileNotFoundError(f"no C file named {', '.join(missing)} under csrc/src")
    return [m[n] for n in names]



def build_dir(name):
    """Where a tool keeps its build products: tools/build/NAME in a source checkout,
    else $XDG_CACHE_HOME/pyembed/NAME (~/.cache/pyembed/NAME) for an installed package."""
    repo = _HERE.parent
    # pytest-xdist workers each get their own folder: the tools build into a
    # cache path when it does not exist yet, and two processes doing that for
    # the same path at once would write (or run) a half-written program
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        name = f"{name}-{worker}"
    if (repo / "csrc").is_dir() and (repo / "tools").is_dir():
        return repo / "tools" / "build" / name
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pyembed" / name
