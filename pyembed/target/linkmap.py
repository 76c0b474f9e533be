"""Flash and RAM bytes per part of a firmware, read from the GNU ld link map.

The generated Makefile links with -Wl,-Map=firmware.map. Each input section
the linker kept is listed under "Linker script and memory map" with its
address, size and object file; this module adds the sizes up per part:

    runtime   pyembed's C runtime (objects of the runtime build, build/pyembed/...)
    tables    the model's generated tables and API (model_graph, model_ops, pe_model)
    weights   the model's constants (model_data)
    harness   startup, pe_target, main
    libc      the C library and compiler runtime (everything else)

Sections are counted as code (.text*), read-only data (.rodata*), initialised
data (.data*: in flash and RAM) and zero-initialised data (.bss*, COMMON: RAM).
"""
import re
from pathlib import Path

PARTS = ("runtime", "tables", "weights", "harness", "libc")
_TABLES = {"model_graph.o", "model_ops.o", "pe_model.o"}
_HARNESS = {"startup.o", "pe_target.o", "main.o"}


def _runtime_objects():
    from pyembed import _csrc
    root = _csrc.csrc_dir(required=False)
    return {n[:-2] + ".o" for n in _csrc.source_map(root)} if root else set()


def _part(obj, runtime):
    o = obj.replace("\\", "/")
    name = o.rsplit("/", 1)[-1]
    if "(" in name or o.endswith(".a") or "/lib/" in o or "/arm-none-eabi/" in o:
        return "libc"
    if name == "pe_usecase.o":
        return "tables"     # a use case's shared reservations (pyembed.codegen.firmware.usecase)
    # model k of a use case: m<k>_model_data.o, m<k>_model_graph.o, m<k>_pe_model.o, m<k>_main.o
    name = re.sub(r"^m\d+_(?=(model_data|model_graph|pe_model|main)\.o$)", "", name)
    if name in _TABLES:
        return "tables"
    if name in runtime:
        return "runtime"
    if name == "model_data.o":
        return "weights"
    if name in _TABLES:
        return "tables"
    if name in _HARNESS:
        return "harness"
    return "libc"


def _kind(section):
    s = section.lstrip(".")
    if s.startswith("text") or s.startswith("glue") or s.startswith("vfp11") or s.startswith("ARM.ex"):
        return "text"
    if s.startswith("rodata") or s.startswith("pe_flash") or s.startswith("isr_vector") or s.startswith("vectors"):
        return "rodata"
    if s.startswith("data"):
        return "data"
    if s.startswith("bss") or s == "COMMON" or s.startswith("noinit"):
        return "bss"
    return None


def sections(map_path):
    """[(section, size, object)] of every kept input section with a size."""
    text = Path(map_path).read_text(errors="replace")
    start = text.find("Linker script and memory map")
    if start < 0:
        raise ValueError(f"{map_path}: not a GNU ld map (no 'Linker script and memory map')")
    out = []
    pending = None
    for line in text[start:].splitlines():
        m = re.match(r"^ (\.?[\w.$]+|COMMON)\s+0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+)\s+(\S.*)$", line)
        if m:
            out.append((m.group(1), int(m.group(3), 16), m.group(4).strip()))
            pending = None
            continue
        m = re.match(r"^ (\.?[\w.$]+|COMMON)\s*$", line)
        if m:
            pending = m.group(1)
            continue
        m = re.match(r"^\s+0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+)\s+(\S.*)$", line)
        if m and pending is not None:
            out.append((pending, int(m.group(2), 16), m.group(3).strip()))
        pending = None
    return out


def breakdown(map_path):
    """{part: {"text", "rodata", "data", "bss", "flash"}} in bytes; flash = text + rodata + data."""
    res = {p: {"text": 0, "rodata": 0, "data": 0, "bss": 0} for p in PARTS}
    runtime = _runtime_objects()
    for sec, size, obj in sections(map_path):
        k = _kind(sec)
        if k is None or size == 0:
            continue
        res[_part(obj, runtime)][k] += size
    for v in res.values():
        v["flash"] = v["text"] + v["rodata"] + v["data"]
    return res


def objects(map_path, part="runtime"):
    """{object file: code + read-only bytes} of one part, largest first."""
    sizes = {}
    runtime = _runtime_objects()
    for sec, size, obj in sections(map_path):
        if _kind(sec) in ("text", "rodata", "data") and _part(obj, runtime) == part and size:
            sizes[obj] = sizes.get(obj, 0) + size
    return dict(sorted(sizes.items(), key=lambda kv: -kv[1]))
