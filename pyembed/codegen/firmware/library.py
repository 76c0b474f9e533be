"""The model as a library for a firmware engineer's own project
(``pyembed firmware MODEL --profile P --layout library -o DIR``).

``generate_library(graph, profile, outdir, **kw)`` takes generate_project's
arguments (pyembed.codegen.firmware): it prepares the model exactly as for the
QEMU project, then ``write_library`` writes::

    DIR/model/          memplan.h, model_data.c/.h, model_graph.c/.h, model_ops.c,
                        pe_model.c/.h: the project's model sources (same API), except
                        that each planned RAM region is a C array in section
                        .pe_arena_<region> placed by the user's link, and
                        pe_model_init checks no address; over several regions
                        the graph tables are in RAM and pe_model_init relocates
                        their offsets (relocations(), reloc_source())
    DIR/port/           pe_port.c/.h: the port layer (clock, log hook, DMA hook), the
                        project's, with defaults that compile on every Cortex-M
    DIR/pyembed/        the C runtime files the model needs: the project build's selection
                        (the model's own operator table model_ops.c instead of the full
                        one) closed over the names the sources use (runtime_closure)
    DIR/CMakeLists.txt  STATIC library target pyembed_model (add_subdirectory + target_link_libraries)
    DIR/pyembed_model.mk  a Makefile fragment: PYEMBED_MODEL_SRCS / _INC / _CFLAGS / _LDFLAGS
    DIR/pyembed_sections.ld  a linker-script fragment (INCLUDE it inside SECTIONS): the weights'
                        section .pe_flash in region alias PE_FLASH, each .pe_arena_<region>
                        (NOLOAD) in region alias PE_RAM_<REGION>, ASSERTs on the sizes
    DIR/README.md       the three integration routes, line by line
    DIR/firmware.json   layout "library", the sections and their sizes, the relocation (its
                        RAM) when there are several regions

No semihosting, no main, no startup code, no fixed address: the application
(its vector table, reset handler, linker script and I/O) is the user's.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from pyembed.codegen.escape import c_comment, cmake_comment, make_comment
from pyembed.errors import UnsupportedError

__all__ = ["generate_library", "runtime_closure", "write_library", "section_names", "region_alias", "FLASH_ALIAS",
           "LINKER_FRAGMENT", "MAKE_FRAGMENT", "relocations", "reloc_source", "relocation_ram"]

FLASH_ALIAS = "PE_FLASH"
LINKER_FRAGMENT = "pyembed_sections.ld"
MAKE_FRAGMENT = "pyembed_model.mk"
PORT_FILES = ("pe_port.c", "pe_port.h")

_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')
# a definition at file scope: a line in column 0 that is not static, a directive or a brace, naming
# an identifier followed by "(" (a function) or "[" / "=" / ";" (an object)
_DEF = re.compile(r"^(?!static\b|extern\b|typedef\b|#|\{|\}|\s)[^\n;()=]*?\b([A-Za-z_]\w*)\s*(?:\(|\[|=|;)", re.M)
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def region_alias(region):
    """The REGION_ALIAS name the user gives the memory holding a planned region's section."""
    return f"PE_RAM_{region.upper()}"


def section_names(region):
    return f".pe_arena_{region}"


def _strip(text):
    return _STRING.sub('""', _COMMENT.sub(" ", text))


def runtime_closure(model_texts, root):
    """The runtime's .c files (paths relative to root/src, sorted), public
    headers (relative to root/include, sorted) and private headers (beside the
    sources, relative to root/src) that sources with the texts model_texts
    need: the project build's selection (every room, the model's operator table
    instead of the full ones, pyembed._csrc.FULL_TABLES) reduced to the files
    defining a name the model's sources use, then a name those use, until no new
    file joins; and the headers those files include. A name counts wherever it
    appears, in every #if branch (both the DSP and the portable path), so the
    selection over-approximates what a link keeps and never under-approximates it."""
    from pyembed import _csrc
    root = Path(root)
    src_root = root / "src"
    defs, uses, incs, local = {}, {}, {}, {}

    def local_headers(path):
        """The headers beside the sources (src/**.h) path includes, transitively, relative to src/."""
        found, todo = set(), [path]
        while todo:
            f = todo.pop()
            for h in _INCLUDE.findall(f.read_text()):
                q = (f.parent / h).resolve()
                if q.is_file() and q.is_relative_to(src_root.resolve()):
                    r = q.relative_to(src_root.resolve()).as_posix()
                    if r not in found:
                        found.add(r)
                        todo.append(q)
        return found

    for p in _csrc.all_sources(root, table=False):
        p = Path(p)
        rel = p.relative_to(src_root).as_posix()
        raw = p.read_text()
        text = _strip(raw)
        local[rel] = local_headers(p)
        # a private header's inline functions use names too: they count for the file including it
        raw_all = raw + "".join((src_root / h).read_text() for h in sorted(local[rel]))
        incs[rel] = _INCLUDE.findall(raw_all)
        uses[rel] = set(_IDENT.findall(_strip(raw_all)))
        for name in _DEF.findall(text):
            defs.setdefault(name, set()).add(rel)
    need = set()
    names = set()
    for t in model_texts:
        names |= set(_IDENT.findall(_strip(t)))
    seen = set()
    while names:
        name = names.pop()
        if name in seen:
            continue
        seen.add(name)
        for rel in defs.get(name, ()):
            if rel not in need:
                need.add(rel)
                names |= uses[rel] - seen
    # headers: what the chosen sources and the model's sources include, transitively
    inc_root = root / "include"
    headers, todo = set(), [h for rel in need for h in incs[rel]]
    for t in model_texts:
        todo += _INCLUDE.findall(t)
    while todo:
        h = todo.pop()
        if h in headers or not (inc_root / h).is_file():
            continue
        headers.add(h)
        todo += _INCLUDE.findall((inc_root / h).read_text())
    private = sorted({h for rel in need for h in local[rel]})
    return sorted(need), sorted(headers), private


def _linker_fragment(profile, graph, arenas, flash_bytes):
    secs, asserts = [], []
    for name, nbytes, _ in arenas:
        sec, alias = section_names(name), region_alias(name)
        secs.append(f"""/* the planned buffers of region {name}: one array of {nbytes} B (pe_model.c), the plan's
 * offsets inside it */
{sec} (NOLOAD) : ALIGN(16)
{{
    KEEP(*({sec}))
}} > {alias}""")
        asserts.append(
            f'ASSERT(SIZEOF({sec}) == 0 || SIZEOF({sec}) >= {nbytes}, "pyembed: section {sec} is smaller '
            f'than the {nbytes} B the plan of region {name} needs (pe_model.c and {LINKER_FRAGMENT} from '
            f'different runs of pyembed?)")')
        asserts.append(
            f'ASSERT(LENGTH({alias}) >= {nbytes}, "pyembed: memory region {alias} is smaller than the {nbytes} B '
            f'planned for region {name}")')
        asserts.append(
            f'ASSERT(ADDR({sec}) + SIZEOF({sec}) <= ORIGIN({alias}) + LENGTH({alias}), "pyembed: section {sec} '
            f'({nbytes} B) does not fit in what is left of memory region {alias}")')
    asserts.append(
        f'ASSERT(LENGTH({FLASH_ALIAS}) >= {flash_bytes}, "pyembed: memory region {FLASH_ALIAS} is smaller than '
        f'the model\'s {flash_bytes} B of weights and parameters")')
    aliases = "\n".join(f' *     REGION_ALIAS("{region_alias(n)}", <your RAM region>);' for n, _, _ in arenas)
    return f"""/* {LINKER_FRAGMENT} - the sections of model "{c_comment(graph.name)}" (generated by pyembed,
 * planned for profile {c_comment(profile.name)}). Addresses are the user's link's.
 *
 * Before SECTIONS in your linker script name the memory regions that hold them:
 *     REGION_ALIAS("{FLASH_ALIAS}", <your flash region>);
{aliases}
 * then, inside your SECTIONS {{ ... }}, where the sections should go:
 *     INCLUDE {LINKER_FRAGMENT}
 * (link with -L <this folder>; the CMake target adds it). The ASSERTs fail the link
 * when a region is too small for what the plan puts there.
 */
/* the model's weights and parameters (model_data.c, {flash_bytes} B) */
.pe_flash : ALIGN(16)
{{
    KEEP(*(.pe_flash))
    . = ALIGN(4);
}} > {FLASH_ALIAS}

{chr(10).join(secs)}

{chr(10).join(asserts)}
"""


def _cmake(profile, graph, srcs, tick_hz, core_flags):
    src_lines = "\n".join(f"    {s}" for s in srcs)
    return f"""# CMakeLists.txt - model "{cmake_comment(graph.name)}" as the static library pyembed_model
# (generated by pyembed, planned for profile {cmake_comment(profile.name)}, {profile.core}).
#
# In your application's CMakeLists.txt:
#   add_subdirectory(<this folder> pyembed_model)   # a binary dir is needed when the folder is not below yours
#   target_link_libraries(app PRIVATE pyembed_model)
# and in your linker script INCLUDE {LINKER_FRAGMENT} (README.md).
#
# The CPU flags are your toolchain's (CMAKE_C_FLAGS); the plan assumes
#   {core_flags}
# ({profile.core}{' with the DSP extension: the kernels take their DSP paths where the compiler defines __ARM_FEATURE_DSP' if _has_dsp(profile) else ''}).
cmake_minimum_required(VERSION 3.13)

set(PYEMBED_MODEL_TICK_HZ {int(tick_hz)} CACHE STRING "processor clock of the port layer's clock (pe_port.h PE_TICK_HZ)")
option(PYEMBED_MODEL_TRUST_CHECKED "skip the per-call checks pe_graph_check made in pe_model_init" ON)

add_library(pyembed_model STATIC
{src_lines}
)
target_include_directories(pyembed_model PUBLIC
    ${{CMAKE_CURRENT_SOURCE_DIR}}/model
    ${{CMAKE_CURRENT_SOURCE_DIR}}/port
    ${{CMAKE_CURRENT_SOURCE_DIR}}/pyembed/include)
target_compile_definitions(pyembed_model PUBLIC PE_TICK_HZ=${{PYEMBED_MODEL_TICK_HZ}}u)
if(PYEMBED_MODEL_TRUST_CHECKED)
  target_compile_definitions(pyembed_model PRIVATE PE_GRAPH_TRUST_CHECKED=1)
endif()
set_target_properties(pyembed_model PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
target_compile_options(pyembed_model PRIVATE -ffunction-sections -fdata-sections)
# the folder of {LINKER_FRAGMENT}, so that the application's linker script can INCLUDE it by name
target_link_options(pyembed_model INTERFACE -L${{CMAKE_CURRENT_SOURCE_DIR}})
target_link_libraries(pyembed_model PUBLIC m)
"""


def _has_dsp(profile):
    from pyembed.plan.widen import DSP_CORES
    return profile.core in DSP_CORES


def _makefile_fragment(profile, graph, srcs, incs, tick_hz, core_flags):
    src = " \\\n    ".join(f"$(PYEMBED_MODEL_DIR){s}" for s in srcs)
    inc = " ".join(f"-I$(PYEMBED_MODEL_DIR){d}" for d in incs)
    return f"""# {MAKE_FRAGMENT} - model "{make_comment(graph.name)}" for your Makefile (generated by pyembed,
# planned for profile {make_comment(profile.name)}, {profile.core}).
#
#   include <this folder>/{MAKE_FRAGMENT}
#   SRCS += $(PYEMBED_MODEL_SRCS)
#   CFLAGS += $(PYEMBED_MODEL_INC) $(PYEMBED_MODEL_CFLAGS)
#   LDFLAGS += $(PYEMBED_MODEL_LDFLAGS)      # -L for the linker script's INCLUDE {LINKER_FRAGMENT}
#
# The CPU flags are yours; the plan assumes {core_flags}
# PYEMBED_MODEL_CFLAGS: C99, one section per function and object (link with
# -Wl,--gc-sections), the port layer's clock (PE_TICK_HZ) and the graph checks made
# once in pe_model_init (PE_GRAPH_TRUST_CHECKED=1).

PYEMBED_MODEL_DIR := $(dir $(lastword $(MAKEFILE_LIST)))
PYEMBED_MODEL_SRCS := \\
    {src}
PYEMBED_MODEL_INC := {inc}
PYEMBED_MODEL_TICK_HZ ?= {int(tick_hz)}
PYEMBED_MODEL_CFLAGS := -std=c99 -ffunction-sections -fdata-sections -DPE_GRAPH_TRUST_CHECKED=1 \\
    -DPE_TICK_HZ=$(PYEMBED_MODEL_TICK_HZ)u
PYEMBED_MODEL_LDFLAGS := -L$(PYEMBED_MODEL_DIR)
PYEMBED_MODEL_LDSCRIPT := $(PYEMBED_MODEL_DIR){LINKER_FRAGMENT}
"""


def _readme(profile, graph, prefix, arenas, flash_bytes, core_flags, ram_bytes=None):
    P = prefix.upper()
    reloc_note = "" if ram_bytes is None else (
        f"\nThe plan uses {len(arenas)} regions, which your link may put anywhere: `pe_model_init`\n"
        f"relocates the graph tables' offsets to their addresses, so the tables are in RAM\n"
        f"(`.data`, {ram_bytes} B).")
    aliases = "\n".join(f'REGION_ALIAS("{region_alias(n)}", RAM);   /* region {n}: {b} B, section '
                        f'{section_names(n)} */' for n, b, _ in arenas)
    return f"""# {graph.name}: the model as a library (pyembed)

Generated by `pyembed firmware {graph.name} --profile {profile.name} --layout library`.
The memory plan was made for profile `{profile.name}` ({profile.core}); the code assumes the
CPU flags `{core_flags}`, which your toolchain or application sets.

What is here: `model/` (the weights, the graph tables, the memory plan and the API
`pe_model.h`), `port/` (`pe_port.h`: clock, log and DMA hooks with defaults that compile on
every Cortex-M), `pyembed/` (only the runtime files this model needs), `CMakeLists.txt`
(static library `pyembed_model`), `{MAKE_FRAGMENT}` and `{LINKER_FRAGMENT}`. There is no
`main`, no startup code, no semihosting and no fixed address: those are your application's.

## The API

```c
#include "pe_model.h"

pe_model_init();                                   /* once */
uint32_t n;
memcpy(pe_model_input(0, &n), frame, n);           /* {P}_INPUT0_BYTES */
pe_model_invoke();
const int8_t *out = pe_model_output(0, &n);         /* {P}_OUTPUT0_BYTES */
```

`pe_model.h` describes each input and output (dims, type, scale and zero point). The per-operator
hooks (`pe_model_set_hooks`) may time with the port layer: `pe_port_clock_init()` once, then
`pe_port_now()`; with the default SysTick clock your `SysTick_Handler` calls
`pe_port_systick_isr()`, and `pe_port_set_log` routes `pe_port_log` to your UART or console.

## 1. Memory: the linker-script fragment (every route needs it)

The weights ({flash_bytes} B) are in section `.pe_flash`; each planned RAM region is one
array (the plan's offsets inside it) in its own NOLOAD section.{reloc_note} In your linker
script, before `SECTIONS`, say which of your memory regions hold them:

```
REGION_ALIAS("{FLASH_ALIAS}", FLASH);
{aliases}
```

and inside `SECTIONS {{ ... }}` (where you want them):

```
    INCLUDE {LINKER_FRAGMENT}
```

The linker finds the file through `-L <this folder>` (the CMake target adds it; the Makefile
fragment gives `PYEMBED_MODEL_LDFLAGS`). Its `ASSERT`s fail the link with a message naming the
region when one is too small for what the plan puts there.

## 2. CMake

```cmake
add_subdirectory(<this folder> pyembed_model)
target_link_libraries(app PRIVATE pyembed_model)
```

The target gives its include directories (`model`, `port`, `pyembed/include`), `PE_TICK_HZ`
(cache variable `PYEMBED_MODEL_TICK_HZ`) and `-L` for the fragment; it compiles with
`-ffunction-sections -fdata-sections` (link your application with `-Wl,--gc-sections`).

## 3. A plain Makefile

```make
include <this folder>/{MAKE_FRAGMENT}
SRCS += $(PYEMBED_MODEL_SRCS)
CFLAGS += $(PYEMBED_MODEL_INC) $(PYEMBED_MODEL_CFLAGS)
LDFLAGS += $(PYEMBED_MODEL_LDFLAGS)
```

`firmware.json` records the plan: the sections, their sizes and the regions they stand for.
"""


def generate_library(graph, profile, outdir, **kw):
    """The model as a library in outdir (see the module's text); kw: generate_project's
    (not segments or run_input). Returns the FirmwareProject."""
    from pyembed.codegen.firmware import generate_project
    return generate_project(graph, profile, outdir, library_writer=_write, **kw)


def _write(outdir, force, graph, profile, plan, prefix, layout, regions, granted, fc_w16, streamed, core_flags,
           segments, run_input):
    """generate_project's last step for the library layout: its files written through an OutputDir
    (the whole library or nothing); returns the FirmwareProject."""
    from pyembed.codegen.firmware import FirmwareProject, qemu_machine
    from pyembed.codegen.outdir import OutputDir
    from pyembed.errors import ArgumentError
    if segments is not None:
        raise UnsupportedError("--layout library: segmented execution (--segments) is for the project layout")
    if run_input is not None:
        raise ArgumentError("run_input: the library layout has no harness to run (--layout project)")
    files = {}
    with OutputDir(outdir, force=force) as out:
        def w(rel, text):
            write = out.write_bytes if isinstance(text, bytes) else out.write_text
            files[rel] = write(rel, text)
        op_rows = write_library(w, graph, profile, plan, prefix, layout, regions, granted, fc_w16, streamed,
                                core_flags)
    io = [(t, int(graph.tensors[t].nbytes), graph.tensors[t].dtype) for t in graph.inputs]
    outputs = [(t, int(graph.tensors[t].nbytes), graph.tensors[t].dtype, tuple(graph.tensors[t].shape))
               for t in graph.outputs]
    return FirmwareProject(Path(out.root), profile, graph, plan, layout, op_rows, io, outputs,
                           qemu_machine(profile), files, granted, fc_w16)


def write_library(w, graph, profile, plan, prefix, layout, regions, granted, fc_w16, streamed, core_flags):
    """Stage the library's files through w(rel, text); returns the operator rows."""
    from pyembed.codegen import emit, optable
    from pyembed.codegen.firmware import (TARGET_TEMPLATES, _align, _api_header, _api_source, _gather_rows,
                                          csrc_dir, qemu_machine)
    live = [(n, u) for n, (_, u) in regions.items() if u > 0] or [(next(iter(regions)), 0)]
    arenas = [(n, max(_align(u, 16), 16), u) for n, u in live]
    reloc = None
    if len(arenas) > 1:
        layout, reloc = relocations(graph, plan, [(n, b) for n, b, _ in arenas])
    texts = {}

    def wm(rel, text):
        texts[rel] = text
        w(rel, text)

    memplan = emit.memplan_header(plan, num_tensors=len(graph.tensors))
    # the regions' bases are the user's link's: not in the library
    memplan = re.sub(r"^#define PE_PLAN_REGION_\w+_BASE .*\n", "", memplan, flags=re.M)
    memplan = memplan.replace(" * Offsets are in bytes", " * Region bases are the link's (pe_model.c's arrays).\n"
                              " * Offsets are in bytes", 1)
    wm("model/memplan.h", memplan)
    hdr, src = emit.model_data(graph, section=".pe_flash", prefix=prefix)
    wm("model/model_data.h", hdr)
    wm("model/model_data.c", src)
    tensors, ops = emit.runtime_tables(graph, layout)
    ghdr, gsrc = emit.graph_tables(graph, plan, prefix=prefix, layout=layout, writable=reloc is not None)
    if reloc is not None:
        # the offsets in model_graph.h are the stand-in layout's: pe_model_input / _output give the addresses
        ghdr = re.sub(r"^#define \w+_(?:IN|OUT)PUT\d+_OFFSET .*\n|^#define \w+_ARENA_BYTES .*\n", "", ghdr,
                      flags=re.M)
        ghdr = ghdr.replace("#define", "/* The arena offsets are relocated by pe_model_init (the library's regions\n"
                            " * are placed by the link): use pe_model_input / pe_model_output. */\n#define", 1)
    wm("model/model_graph.h", ghdr)
    wm("model/model_graph.c", gsrc)
    wm(f"model/{optable.GENERATED_NAME}",
       optable.op_table_source(optable.op_uses(gsrc, _gather_rows(graph, ops)),
                               rows=bool(streamed) or any(graph.tensors[t].streamed for t in graph.outputs),
                               model_name=graph.name, stripe_kinds=optable.stripe_kinds_in(gsrc)))
    # (pe_model_init checks no address here: the link places the arena)
    api_h = _api_header(graph, prefix, False).replace("once: checks the memory map and the tables,",
                                                      "once: checks the tables,", 1)
    if reloc is not None:   # the arena is known once pe_model_init has relocated the tables
        api_h = api_h.replace("(NULL: bad index).", "(NULL: bad index, or before pe_model_init).", 1).replace(
            "(NULL: bad index, or a\n", "(NULL: bad index, before pe_model_init, or a\n", 1)
    wm("model/pe_model.h", api_h)
    wm("model/pe_model.c", _api_source(graph, prefix, ops, regions, 0, "", None,
                                       library_arena=[(n, b) for n, b, _ in arenas],
                                       library_reloc=reloc and reloc_source(prefix, reloc)))
    for f in PORT_FILES:
        wm(f"port/{f}", (TARGET_TEMPLATES / f).read_text())
    cs = csrc_dir()
    rt_srcs, rt_hdrs, rt_private = runtime_closure(list(texts.values()), cs)
    for rel in rt_srcs + rt_private:
        w(f"pyembed/src/{rel}", (cs / "src" / rel).read_text())
    for rel in rt_hdrs:
        w(f"pyembed/include/{rel}", (cs / "include" / rel).read_text())
    srcs = ([f"model/{n}" for n in ("model_data.c", "model_graph.c", optable.GENERATED_NAME, "pe_model.c")]
            + ["port/pe_port.c"] + [f"pyembed/src/{r}" for r in rt_srcs])
    incs = ["model", "port", "pyembed/include"]
    flash_bytes = int(plan.flash_size)
    tick = int(profile.clock_hz)
    w(LINKER_FRAGMENT, _linker_fragment(profile, graph, arenas, flash_bytes))
    w("CMakeLists.txt", _cmake(profile, graph, srcs, tick, core_flags))
    w(MAKE_FRAGMENT, _makefile_fragment(profile, graph, srcs, incs, tick, core_flags))
    w("README.md", _readme(profile, graph, prefix, arenas, flash_bytes, core_flags,
                           None if reloc is None else sum(relocation_ram(reloc, len(tensors), len(ops)).values())))
    op_rows = [{"table_index": k, "op": o["op"], "type": graph.operators[o["op"]].type} for k, o in enumerate(ops)]
    manifest = {
        "layout": "library", "model": graph.name, "profile": profile.name, "core": profile.core,
        "cpu_flags_assumed": core_flags, "dsp_extension": _has_dsp(profile), "qemu_machine": qemu_machine(profile),
        "arena_bytes": int(plan.arena_size), "arena_span": layout.arena_size,
        "pipeline": plan.info.get("pipeline"), "streamed_inputs": streamed,
        "streamed_outputs": [k for k, t in enumerate(graph.outputs) if graph.tensors[t].streamed],
        "dsp_scratch": {str(k): {"old": o, "new": n, "region": r, "offset": f} for k, (o, n, r, f) in granted.items()},
        "regions": {k: {"used": u} for k, (_, u) in regions.items()},
        "sections": {section_names(n): {"region": n, "bytes": b, "used": u, "region_alias": region_alias(n),
                                        "noload": True} for n, b, u in arenas},
        "flash_section": {".pe_flash": {"bytes": flash_bytes, "region_alias": FLASH_ALIAS}},
        # several regions: pe_model_init relocates the tables' offsets, which puts the tables in RAM (.data)
        "relocation": None if reloc is None else {
            "regions": {n: {"stand_in_offset": o, "bytes": b} for n, o, b in reloc["regions"]},
            "tensor_offsets": len(reloc["tensors"]), "scratch_offsets": len(reloc["scratch"]),
            "ram_tables": (ram := relocation_ram(reloc, len(tensors), len(ops))), "ram_bytes": sum(ram.values())},
        "linker_fragment": LINKER_FRAGMENT, "make_fragment": MAKE_FRAGMENT, "cmake_target": "pyembed_model",
        "sources": srcs, "runtime_headers": [f"pyembed/include/{h}" for h in rt_hdrs],
        "operators": op_rows, "fc_w16": fc_w16,
        "inputs": [{"tensor": t, "bytes": int(graph.tensors[t].nbytes), "dtype": str(graph.tensors[t].dtype)}
                   for t in graph.inputs],
        "outputs": [{"tensor": t, "bytes": int(graph.tensors[t].nbytes), "dtype": str(graph.tensors[t].dtype),
                     "shape": [int(d) for d in graph.tensors[t].shape]} for t in graph.outputs],
    }
    w("firmware.json", json.dumps(manifest, indent=1))
    return op_rows


# How far relocations() moves one region's stand-in address to find the words that follow it: a
# multiple of every alignment the tables could depend on, and small enough for int32 offsets.
_PROBE_SHIFT = 1 << 24


def _differences(a, b, path=()):
    """(path, a, b) for each scalar that differs between two runtime_tables results."""
    if a is b:
        return
    if isinstance(a, dict):
        for k in a:
            yield from _differences(a[k], b[k], path + (k,))
    elif isinstance(a, (list, tuple)):
        if len(a) != len(b):
            yield path, len(a), len(b)
            return
        for k, (x, y) in enumerate(zip(a, b)):
            yield from _differences(x, y, path + (k,))
    elif hasattr(a, "shape") and hasattr(a, "ravel"):
        import numpy as np
        x, y = np.asarray(a).ravel(), np.asarray(b).ravel()
        if x.shape != y.shape:
            yield path, x.shape, y.shape
            return
        for k in np.flatnonzero(x != y):
            yield path + (int(k),), int(x[k]), int(y[k])
    elif a != b:
        yield path, a, b


def relocations(graph, plan, arenas):
    """The library's graph Layout over several regions and its relocations. arenas: [(region, bytes)]
    in the plan's order, each laid at a stand-in address (end to end from 0, the offsets counted
    from 0); the link puts the arrays elsewhere, so pe_model_init adds to each offset of region r
    (its link address - the lowest array's) - its stand-in address. Which words are offsets, and of
    which region, is not listed by hand: each region's stand-in address is moved by _PROBE_SHIFT and
    the tables runtime_tables makes (the one translation every layout goes through) compared; a
    word that moves is an offset of that region and must move by exactly the shift, in a tensor's
    offset or an operator's scratch_offset (UnsupportedError otherwise: nothing else is relocated).
    Returns (layout, {"regions": [(region, stand-in, bytes)], "tensors": [(table index, region index)],
    "scratch": [(table index, region index)]})."""
    from pyembed.codegen import emit
    from pyembed.codegen.firmware import firmware_layout
    bases, at = {}, 0
    for n, b in arenas:
        bases[n] = at
        at += int(b)
    layout = firmware_layout(graph, plan, bases=bases, origin=0)[0]
    tables = emit.runtime_tables(graph, layout)
    found = {}
    for ri, (n, _) in enumerate(arenas):
        moved = firmware_layout(graph, plan, bases=dict(bases, **{n: bases[n] + _PROBE_SHIFT}), origin=0)[0]
        for path, a, b in _differences(tables, emit.runtime_tables(graph, moved)):
            kind = {(0, "offset"): "tensors", (1, "scratch_offset"): "scratch"}.get((path[0], path[-1]))
            if kind is None or len(path) != 3 or b - a != _PROBE_SHIFT or (kind, path[1]) in found:
                raise UnsupportedError(
                    f"--layout library: the graph tables hold a value that depends on region {n}'s address "
                    f"at {'/'.join(map(str, path))} ({a} -> {b} when the region moves by {_PROBE_SHIFT}), which "
                    f"pe_model_init cannot relocate (only tensor offsets and operator scratch offsets are)")
            found[(kind, path[1])] = ri
    return layout, {"regions": [(n, bases[n], int(b)) for n, b in arenas],
                    "tensors": sorted((key[1], ri) for key, ri in found.items() if key[0] == "tensors"),
                    "scratch": sorted((key[1], ri) for key, ri in found.items() if key[0] == "scratch")}


# sizeof the tables relocation moves to RAM on every Cortex-M (ILP32, AAPCS: pe_graph.h's structs hold
# 4-byte members only); tests/test_firmware_library.py checks them against the linked application
TENSOR_ROW_BYTES, OP_ROW_BYTES, GRAPH_BYTES = 32, 108, 20


def relocation_ram(reloc, num_tensors, num_ops):
    """Bytes of RAM the relocatable tables take (.data: the tensor table, the operator table and the
    pe_graph), which the single-region library keeps in flash."""
    return {"tensor_table": TENSOR_ROW_BYTES * max(num_tensors, 1), "op_table": OP_ROW_BYTES * max(num_ops, 1),
            "graph": GRAPH_BYTES}


def reloc_source(prefix, reloc):
    """The C of pe_model_relocate (pe_model.c of a library over several regions)."""
    regs = reloc["regions"]
    nr = len(regs)

    def rows(pairs):
        return ", ".join(f"{{{k}, {r}}}" for k, r in pairs) or "{0, 0}"
    addrs = ", ".join(f"(uintptr_t)pe_arena_{n}" for n, _, _ in regs)
    return f"""/* The tables (model_graph.c, in RAM) were written with region k at stand-in offset
 * pe_model_planned[k] of an arena counted from 0; pe_model_relocate moves each offset of
 * region k by (its array's link address - the lowest array's) - pe_model_planned[k]. */
static const uint32_t pe_model_planned[{nr}] = {{ {', '.join(f'{b}u' for _, b, _ in regs)} }};
static const uint32_t pe_model_region_bytes[{nr}] = {{ {', '.join(f'{s}u' for _, _, s in regs)} }};
/* {{tensor table index, region}}: the activations' offsets */
static const int32_t pe_model_reloc_tensors[{max(len(reloc['tensors']), 1)}][2] = {{ {rows(reloc['tensors'])} }};
/* {{operator table index, region}}: the scratch offsets */
static const int32_t pe_model_reloc_scratch[{max(len(reloc['scratch']), 1)}][2] = {{ {rows(reloc['scratch'])} }};
static uint8_t *pe_model_base;   /* the arena: the lowest region array (NULL until relocated) */
static int32_t pe_model_span;    /* from it to the end of the highest */

static pe_status pe_model_relocate(void)
{{
    const uintptr_t at[{nr}] = {{ {addrs} }};
    uintptr_t lo = at[0], hi = at[0] + pe_model_region_bytes[0];
    int32_t delta[{nr}];
    int32_t k;
    if (pe_model_base != NULL) {{
        return PE_OK;   /* relocated once already: the link addresses do not move */
    }}
    for (k = 1; k < {nr}; k++) {{
        lo = at[k] < lo ? at[k] : lo;
        hi = at[k] + pe_model_region_bytes[k] > hi ? at[k] + pe_model_region_bytes[k] : hi;
    }}
    if (hi - lo > (uintptr_t)INT32_MAX) {{
        return PE_ERR_ARG;   /* the regions span more than the runtime's int32 offsets reach */
    }}
    for (k = 0; k < {nr}; k++) {{
        delta[k] = (int32_t)(at[k] - lo) - (int32_t)pe_model_planned[k];
    }}
    for (k = 0; k < {len(reloc['tensors'])}; k++) {{
        {prefix}_tensors[pe_model_reloc_tensors[k][0]].offset += delta[pe_model_reloc_tensors[k][1]];
    }}
    for (k = 0; k < {len(reloc['scratch'])}; k++) {{
        {prefix}_ops[pe_model_reloc_scratch[k][0]].scratch_offset += delta[pe_model_reloc_scratch[k][1]];
    }}
    {prefix}_graph.arena_size = (int32_t)(hi - lo);
    pe_model_span = (int32_t)(hi - lo);
    pe_model_base = (uint8_t *)lo;
    return PE_OK;
}}"""
