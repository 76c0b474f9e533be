"""A complete Cortex-M firmware project for a model and an MCU profile.

``generate_project(graph, profile, outdir)`` writes (graph: as imported, or
rewritten by the compiler pipeline, ``plan_for_profile(..., strategy=...)``)::

    DIR/Makefile, DIR/CMakeLists.txt   arm-none-eabi-gcc build (-Werror), `make run` under QEMU
    DIR/link.ld                        linker script from the profile's memory regions: one
                                       MEMORY entry per region, one NOLOAD section per RAM
                                       region holding that region's planned buffers at its
                                       base, weights in .pe_flash in the flash region
    DIR/startup.c                      vector table and reset handler (FPU, .data/.bss, SysTick)
    DIR/pe_port.c, pe_port.h           the port layer: the clock (SysTick, or DWT CYCCNT where the
                                       core has it), a log hook, the segment loader's DMA hook
    DIR/pe_target.c, pe_target.h       instruction counting (through pe_port), semihosting file I/O
    DIR/model/memplan.h                the static memory plan (pyembed.emit.memplan_header)
    DIR/model/model_data.c/.h          weights and parameters (pyembed.emit.model_data)
    DIR/model/model_graph.c/.h         the graph runtime's tables (pyembed.emit.graph_tables)
                                       on the regions' real addresses
    DIR/model/pe_model.c/.h            the API: pe_model_init, pe_model_input, pe_model_invoke,
                                       pe_model_output, per-operator hooks; pe_model_invoke_rows
                                       for a streamed input (a pe_row_source delivers its rows)
    DIR/main.c                         (io "uart" / "none": pyembed.codegen.firmware.io, the input
                                       compiled in as pe_input.c, a generated startup.c, pe_uart.c;
                                       rp2040 with boot2: pe_boot2.c, the flash's first 256 bytes)
                                       a harness: input from the host file pe_input.bin (a
                                       streamed input: into a frame outside the planned RAM,
                                       section .pe_input_frame, handed over row by row),
                                       outputs and per-operator instruction counts to
                                       pe_output.bin (semihosting; replace it on a real board)
    DIR/pyembed/include, DIR/pyembed/src  a copy of pyembed's C runtime (the Makefile's
                                       PYEMBED_CSRC variable points elsewhere if you prefer)
    DIR/.pyembed-manifest.json         what pyembed wrote (pyembed.codegen.outdir): a rerun
                                       replaces these files only, a user's file is refused
                                       unless force; the Makefile builds model/'s generated
                                       sources by name, not model/*.c

Addressing: the C graph runtime addresses every activation as ``arena + offset``.
The project's arena base is the lowest planned RAM region's base address and each
tensor's offset is ``region base - arena base + offset in region``, so each region's
buffers live in that region's own section; ``pe_model_init`` checks that the linker
put every region section at its planned address.
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import numpy as np

from pyembed.codegen.escape import c_comment, check_identifier
from pyembed.errors import ArgumentError, PlanError, UnsupportedError

__all__ = ["CORE_FLAGS", "FirmwareProject", "generate_project", "firmware_layout", "plan_for_profile",
           "TIMING_RECORD_BYTES", "QEMU_MACHINES", "qemu_machine", "INPUT_FILE", "input_layout"]

_HERE = Path(__file__).resolve().parent
_PKG = _HERE.parents[1]                       # pyembed/
TARGET_TEMPLATES = _PKG / "target" / "templates"

# gcc flags per core (hard-float ABI where the core has an FPU; one table with pyembed.target.qemu)
from pyembed.codegen.firmware.boards import BOARDS as _QEMU_BOARDS, CORE_FLAGS as _CORE_FLAGS  # noqa: E402

CORE_FLAGS = {core: " ".join(flags) for core, flags in _CORE_FLAGS.items()}
# QEMU machine for a profile name (only these can `make run`): each board of pyembed.target.qemu has a
# bundled profile of the same name with its memory map
QEMU_MACHINES = {name: name for name in _QEMU_BOARDS}

# the harness's input file (main.c reads it from the directory QEMU runs in); a --run project keeps
# the input it ran so that `make run` repeats the run
from pyembed.codegen.firmware.files import INPUT_FILE, input_layout, invoke_loop  # noqa: E402 (INPUT_FILE, input_layout re-exported)
from pyembed.codegen.firmware.linker import linker_script as _linker_script  # noqa: E402


def qemu_machine(profile):
    """The QEMU machine emulating profile (a loaded profile or a profile name,
    case-insensitive), or None when no QEMU machine does."""
    name = getattr(profile, "name", profile)
    return QEMU_MACHINES.get(str(name).lower())

# main.c's timing record after the outputs: uint32 graph-table index, uint32
# model operator index, uint32 ticks (low), uint32 ticks (high)
TIMING_RECORD_BYTES = 16


def csrc_dir() -> Path:
    from pyembed import _csrc
    c = _csrc.csrc_dir(required=False)
    if c is None:
        raise UnsupportedError("pyembed's C sources (csrc/) were not found next to the package")
    return c


@dataclasses.dataclass
class FirmwareProject:
    outdir: Path
    profile: object
    graph: object
    plan: object
    layout: object
    ops: list            # [{"table_index", "op", "type"}] in execution order
    inputs: list         # [(tensor index, bytes, dtype)]
    outputs: list        # [(tensor index, bytes, dtype, shape)]
    qemu_machine: str | None
    files: dict
    # {op: (old, new, region, offset)}: convolutions given the DSP build's fast scratch
    dsp_scratch: dict = dataclasses.field(default_factory=dict)
    # fc_int16_weights: pyembed.passes.fc_w16's report (one row per FULLY_CONNECTED), else None
    fc_w16: list | None = None


def _require_profile(profile):
    if not all(hasattr(profile, a) for a in ("regions", "flash_region", "core", "name", "ram_regions")):
        raise ArgumentError(f"profile: expected a loaded firmware_sim profile (firmware_sim.profiles.load_profile; "
                            f"pyembed.target.firmware.generate takes a name), got {type(profile).__name__}")
    return profile


def plan_for_profile(graph, profile, algorithm="auto", time_limit=5.0, strategy=None, max_extra_macs=0.10,
                     stream_input=False):
    """Plan graph's RAM on the profile's RAM regions (fast region first).
    With a strategy (none / layers / stripes / auto, as ``pyembed plan
    --strategy``): the compiler pipeline first (pyembed.plan.pipeline), and
    (rewritten graph, plan, report lines) is returned."""
    from pyembed.plan import plan_graph
    from pyembed.plan.core import Region, region_speed
    prof = _require_profile(profile)
    # the profile's activation region (or a TCM) first, then the others in file order
    act = (prof.defaults or {}).get("activations")
    regions = [Region(r.name, int(r.size), int(r.base), r.kind, region_speed(r)) for r in prof.ram_regions()]
    regions.sort(key=lambda r: (r.name != act and r.kind != "tcm", r.kind != "tcm"))
    if strategy is not None:
        from pyembed.plan.pipeline import plan_with_strategy
        return plan_with_strategy(graph, strategy, max_extra_macs=max_extra_macs, overlaps=True,
                                  stream_input=stream_input, regions=regions, algorithm=algorithm,
                                  time_limit=time_limit)
    return plan_graph(graph, regions, algorithm=algorithm, overlaps=not graph.unsupported,
                      time_limit=time_limit)


def system_region(profile):
    """The RAM region of .data, .bss, heap, stack and the segment block: the
    largest RAM without wait states (a TCM or a slow external RAM only when
    there is nothing else)."""
    ram = [r for r in profile.regions.values() if not r.is_flash]
    return min(ram, key=lambda r: (r.kind == "tcm", getattr(r, "read_wait", 0) > 0, -r.size))


def _align(x, a):
    return (x + a - 1) // a * a


def firmware_layout(graph, plan, bases=None, origin=None):
    """The graph Layout with offsets relative to the lowest used region's base
    address (regions at their real addresses), and {region: (base, used)}.
    bases: {region: address} instead of the regions' own (the library layout's
    stand-in addresses, relocated by pe_model_init: pyembed.codegen.firmware.library);
    origin: the address the offsets count from instead of the lowest used region's."""
    from pyembed.model.graph import Layout
    used = plan.region_used()
    base = {r.name: int(r.base if bases is None else bases.get(r.name, r.base)) for r in plan.regions}
    live = [r for r in plan.regions if used.get(r.name, 0) > 0] or list(plan.regions[:1])
    arena_base = min(base[r.name] for r in live) if origin is None else int(origin)
    rel = {r.name: base[r.name] - arena_base for r in plan.regions}
    offsets, scratch = {}, {}
    for t in graph.activation_tensors():
        loc = plan.tensor_location(t)
        if loc is None:
            raise PlanError(f"plan does not place tensor {t} ({graph.tensors[t].name!r})")
        offsets[t] = rel[loc[0]] + int(loc[1])
    for i, buf in enumerate(plan.buffers):
        if getattr(buf, "kind", "") == "scratch" and getattr(buf, "op", None) is not None:
            r, off = plan.placement[i]
            scratch[int(buf.op)] = rel[plan.regions[r].name] + int(off)
    span = max(rel[r.name] + _align(used.get(r.name, 0), 16) for r in live)
    if span >= 2 ** 31:
        raise PlanError(f"the planned regions span {span} B of address space: over the graph runtime's "
                        f"int32 offsets")
    order = list(plan.order) if getattr(plan, "order", None) else list(range(len(graph.operators)))
    regions = {r.name: (base[r.name], int(used.get(r.name, 0))) for r in plan.regions}
    return Layout(max(span, 1), offsets, scratch, order, "firmware"), arena_base, regions


_GDT_BYTES = {np.dtype(np.int8): 1, np.dtype(np.int16): 2, np.dtype(np.int32): 4, np.dtype(np.float32): 4}


def segment_tables(graph, ops, seg_plan, block_base, prefix):
    """C tables of a firmware_sim SegmentPlan for pe_segload, and the block
    address of every constant tensor a segment loads: (C text, {tensor: C expr})."""
    table_of = {o["op"]: k for k, o in enumerate(ops)}
    if [o["op"] for o in ops] != list(range(len(graph.operators))):
        raise UnsupportedError("segmented firmware needs the model's operator order (plan without --search-order)")
    if any(getattr(la, "parts", 1) > 1 for la in seg_plan.layers):
        raise UnsupportedError("segmented firmware: operators split into channel groups are not supported on the "
                               "target yet (plan the segments without split_bytes)")
    seg_rows, copy_rows, where = [], [], {}
    # a constant that two segments read (a shared scalar such as the audio front end's
    # -128) has one address in the graph table: it stays in flash, read in place
    loads = {}
    for s in seg_plan.segments:
        for entry in s.tensors:
            loads[entry[0]] = loads.get(entry[0], 0) + 1
    shared = {t for t, n in loads.items() if n > 1}
    for s in seg_plan.segments:
        op_ids = sorted({i for la in seg_plan.layers[s.first:s.last + 1] for i in la.ops})
        if s.offset % 4:
            raise UnsupportedError(f"segment {s.index} at block offset {s.offset}: not 4-byte aligned")
        n0 = len(copy_rows)
        for entry in s.tensors:
            if len(entry) != 3:
                raise UnsupportedError("segmented firmware: channel slices are not supported on the target yet")
            t, off, nb = entry
            if t in shared:
                continue
            if t in where:
                raise UnsupportedError(f"constant tensor {t} is loaded by two segments; the graph table has one "
                                       f"address per tensor")
            addr = block_base + s.offset + off
            if addr % 4:
                raise UnsupportedError(f"tensor {t} at 0x{addr:08X}: not 4-byte aligned")
            where[t] = f"(const void *)(uintptr_t)0x{addr:08X}u"
            copy_rows.append(f"    {{ (const void *){prefix}_t{t}, {s.offset + off}u, {nb}u }}, /* segment {s.index} */")
        seg_rows.append((s, n0, len(copy_rows) - n0, op_ids))
    # operator ranges in table order, consecutive
    rows, nxt = [], 0
    for s, c0, nc, op_ids in seg_rows:
        end = nxt + len(op_ids)
        if op_ids and [table_of[i] for i in op_ids] != list(range(nxt, end)):
            raise UnsupportedError(f"segment {s.index}: its operators are not consecutive in the table")
        rows.append(f"    {{ {c0}, {nc}, {s.offset}u, {s.nbytes}u, {s.wait_for}, {nxt}, {end} }},")
        nxt = end
    if nxt != len(ops):
        raise UnsupportedError(f"the segments cover {nxt} of {len(ops)} operators")
    text = f"""/* segmented execution: {len(seg_plan.segments)} segments in a {seg_plan.block_bytes} B block at
 * 0x{block_base:08X} (placement {c_comment(seg_plan.placement)}); copies from the weights in flash */
static uint8_t pe_segment_block[{_align(seg_plan.block_bytes, 16)}]
    __attribute__((section(".pe_segment_block"), aligned(16), used));
static const pe_segload_copy pe_segment_copies[{max(len(copy_rows), 1)}] = {{
{chr(10).join(copy_rows) or '    { NULL, 0u, 0u },'}
}};
static const pe_segload_segment pe_segment_table[{len(rows)}] = {{
{chr(10).join(rows)}
}};
static const pe_segload_plan pe_segment_plan = {{ pe_segment_table, {len(rows)}, pe_segment_copies,
                                                  {len(copy_rows)}, {seg_plan.block_bytes}u }};
"""
    return text, where


def _io_defines(graph, kind, tensors):
    """pe_model.h's description of each input or output k (kind "INPUT" /
    "OUTPUT"): its tensor name, dims, element type and quantization, as
    PE_MODEL_<kind><k>_* macros."""
    from pyembed.codegen.emit import _GDT, _float_literal
    from pyembed.codegen.escape import c_string
    out = []
    for k, t in enumerate(tensors):
        tt = graph.tensors[t]
        m = f"PE_MODEL_{kind}{k}"
        dims = ",".join(str(int(d)) for d in tt.shape) or "1"
        out.append(f"/* {kind.lower()} {k}: tensor {t} {c_comment(tt.name)} */")
        out.append(f"#define {m}_NAME {c_string(tt.name)}")
        out.append(f"#define {m}_RANK {len(tt.shape)}")
        out.append(f"#define {m}_DIMS {{{dims}}}")
        out.append(f"#define {m}_DTYPE {_GDT[np.dtype(tt.dtype)]}")
        if not tt.is_quantized:
            out.append(f"#define {m}_QUANTIZED 0")
        else:
            scales = np.asarray(tt.scale, dtype=np.float32).ravel()
            zps = (np.zeros(scales.size, dtype=np.int64) if tt.zero_point is None or not np.size(tt.zero_point)
                   else np.asarray(tt.zero_point, dtype=np.int64).ravel())
            out.append(f"#define {m}_QUANTIZED 1")
            if scales.size == 1:
                out.append(f"#define {m}_SCALE {_float_literal(scales[0], 'float')}")
                out.append(f"#define {m}_ZERO_POINT {int(zps[0])}")
            else:
                # per channel along QUANT_AXIS: one scale and zero point per channel
                out.append(f"#define {m}_QUANT_AXIS {int(tt.quant_axis)}")
                out.append(f"#define {m}_NUM_SCALES {scales.size}")
                out.append(f"#define {m}_SCALES {{{','.join(_float_literal(v, 'float') for v in scales)}}}")
                out.append(f"#define {m}_ZERO_POINTS {{{','.join(str(int(v)) for v in zps)}}}")
    return "\n".join(out) + "\n"


def streamed_outputs(graph):
    """Indices of the graph outputs a stripe region hands row by row to a
    pe_row_sink (Tensor.streamed; 'firmware --stream-output')."""
    return [k for k, t in enumerate(graph.outputs) if graph.tensors[t].streamed]


def _api_header(graph, prefix, segmented=False):
    P = prefix.upper()
    io = _io_defines(graph, "INPUT", graph.inputs) + _io_defines(graph, "OUTPUT", graph.outputs)
    stream = "".join(f"#define PE_MODEL_INPUT{k}_STREAMED {int(bool(graph.tensors[t].streamed))}\n"
                     for k, t in enumerate(graph.inputs))
    stream += "".join(f"#define PE_MODEL_OUTPUT{k}_STREAMED {int(bool(graph.tensors[t].streamed))}\n"
                      for k, t in enumerate(graph.outputs))
    seg_api = ("""
/* Segmented execution: the weights are copied from flash into a RAM block
 * segment by segment while the model runs (pe_segload.h). By default the
 * copies use memcpy; give a DMA hook before pe_model_init to overlap them. */
#define PE_MODEL_SEGMENTED 1
#include "pyembed/pe_segload.h"
void pe_model_set_segment_dma(const pe_segload_dma *dma);
""" if segmented else "\n#define PE_MODEL_SEGMENTED 0\n")
    return f"""/*
 * pe_model.h - the firmware API of model "{c_comment(graph.name)}" (generated by pyembed).
 *
 *   pe_model_init();                               once: checks the memory map and the tables,
 *                                                  resets the recurrent states (variable tensors)
 *   memcpy(pe_model_input(0, &n), frame, n);       fill each input
 *   pe_model_invoke();                             run every operator
 *                                                  (a streamed input: pe_model_invoke_rows(&src);
 *                                                  a streamed output: pe_model_invoke_io(&src or
 *                                                  NULL, &sink))
 *   out = pe_model_output(0, &n);                  read each output
 *
 * Per-operator hooks (timing, tracing): pe_model_set_hooks(before, after, user)
 * calls before(k, op, user) / after(k, op, user) around table entry k, which
 * runs model operator op. Every function returns a pe_status (PE_OK = 0) or
 * NULL for a bad index; nothing allocates.
 */
#ifndef {P}_API_H
#define {P}_API_H

#include <stdint.h>
#include "pyembed/pe_types.h"
#include "model_graph.h"

#ifdef __cplusplus
extern "C" {{
#endif
{seg_api}
{stream}
/* Each input and output k: the model's tensor name, its dims (pyembed's layout of
 * the buffer pe_model_input / pe_model_output give, NHWC for an image), element type
 * (pe_dtype) and quantization, real = SCALE * (q - ZERO_POINT); per-channel tensors
 * give SCALES / ZERO_POINTS along QUANT_AXIS instead. Sizes in bytes are
 * {P}_INPUT<k>_BYTES / {P}_OUTPUT<k>_BYTES (model_graph.h). */
{io}
typedef void (*pe_model_hook)(int32_t table_index, int32_t op_index, void *user);

pe_status pe_model_init(void);
/* Pointer to input `index` in RAM and its size in bytes (NULL: bad index). */
void *pe_model_input(int32_t index, uint32_t *bytes);
/* Pointer to output `index` and its size in bytes (NULL: bad index, or a
 * streamed output, which is never in the arena). */
const void *pe_model_output(int32_t index, uint32_t *bytes);
pe_status pe_model_invoke(void);
/* pe_model_invoke for a model whose input is streamed (PE_MODEL_INPUT0_STREAMED
 * 1, 'pyembed firmware --stream-input'): the stripe region reading the input
 * pulls its rows from rows (pe_row_source, pe_stripe.h: a camera or DMA driver
 * writing columns [col, col + n_cols) of row `row`, NHWC int8, to dst). The
 * input takes no arena bytes and pe_model_input returns NULL for it.
 * rows NULL: as pe_model_invoke. */
pe_status pe_model_invoke_rows(const pe_row_source *rows);
/* pe_model_invoke_rows for a model whose output is streamed too
 * (PE_MODEL_OUTPUT0_STREAMED 1, 'pyembed firmware --stream-output'): the
 * stripe region writing the output hands each row, whole and in order, to
 * sink as soon as it is final (pe_row_sink, pe_stripe.h: a display or a DMA
 * to the next stage; write(user, row, src, n) with n = W * C int8 values,
 * src valid during the call only). The output takes no arena bytes and
 * pe_model_output returns NULL for it. rows / sink NULL: none. */
pe_status pe_model_invoke_io(const pe_row_source *rows, const pe_row_sink *sink);
void pe_model_set_hooks(pe_model_hook before, pe_model_hook after, void *user);
/* Number of graph-table entries and the model operator each one runs. */
int32_t pe_model_num_ops(void);
int32_t pe_model_op_index(int32_t table_index);

#ifdef __cplusplus
}}
#endif

#endif /* {P}_API_H */
"""


def region_reservations(regions, what="section .pe_region_{name}"):
    """([C declaration], [C check]) of the planned RAM regions {name: (base, bytes used)}: each used
    region an array in section .pe_region_<name> (link.ld places it at the region's base), and the
    check that it is there (a status PE_ERR_ARG from the enclosing function when not)."""
    decls, checks = [], []
    for name, (base, used) in regions.items():
        if used == 0:
            continue
        decls.append(f"/* region {name}: {used} B at 0x{base:08X} ({what.format(name=name)}) */\n"
                     f"static uint8_t pe_region_{name}[{_align(used, 16)}]\n"
                     f"    __attribute__((section(\".pe_region_{name}\"), aligned(16), used));")
        checks.append(f"    if ((uintptr_t)pe_region_{name} != (uintptr_t)0x{base:08X}u) {{\n"
                      f"        return PE_ERR_ARG; /* the linker script did not put region {name} at its base */\n"
                      f"    }}")
    return decls, checks


def _api_source(graph, prefix, ops, regions, arena_base, sys_name, seg_text=None, library_arena=None,
                library_reloc=None):
    """pe_model.c. library_arena: [(region, bytes)] for --layout library (pyembed.codegen.firmware.library):
    each planned region is an array in section .pe_arena_<region> the user's link places and nothing
    checks an address; one region: the arena is its array; several: library_reloc, the C text of
    pe_model_relocate (which pe_model_init calls first: it sets pe_model_base and pe_model_span, the
    arena, and relocates the graph tables' offsets), and the inputs and outputs are found through
    the (relocated) tensor table."""
    P = prefix.upper()
    decls = []
    if library_arena is not None:
        for lib_name, lib_bytes in library_arena:
            decls.append(f"/* region {lib_name}: the planned buffers, {lib_bytes} B, in section .pe_arena_{lib_name} "
                         f"(placed by your link: pyembed_sections.ld) */\n"
                         f"static uint8_t pe_arena_{lib_name}[{lib_bytes}]\n"
                         f"    __attribute__((section(\".pe_arena_{lib_name}\"), aligned(16), used));")
        regions = {}
    more, checks = region_reservations(regions)
    decls += more
    op_index = ", ".join(str(o["op"]) for o in ops) or "0"
    nin, nout = len(graph.inputs), len(graph.outputs)
    # a streamed input has no arena offset (PE_GRAPH_STREAMED): bytes 0 here, pe_model_input gives NULL
    at = "TENSOR" if library_reloc else "OFFSET"   # relocated: the offset is the tensor table's
    in_rows = ", ".join(f"{{{P}_INPUT{k}_{at}, {P}_INPUT{k}_BYTES}}" if not graph.tensors[t].streamed
                        else "{0, 0}" for k, t in enumerate(graph.inputs))
    # a streamed output likewise: bytes 0, pe_model_output gives NULL
    out_rows = ", ".join(f"{{{P}_OUTPUT{k}_{at}, {P}_OUTPUT{k}_BYTES}}" if not graph.tensors[t].streamed
                         else "{0, 0}" for k, t in enumerate(graph.outputs))
    io_off = (f"(uint32_t){prefix}_graph.tensors[pe_model_{{}}[index][0]].offset" if library_reloc
              else "pe_model_{}[index][0]")
    if library_arena is None:
        where = (f" * The graph runtime addresses activations as arena + offset with the arena at\n"
                 f" * 0x{arena_base:08X} (the lowest planned region); each region's planned buffers\n"
                 f" * are the array below placed by link.ld at the region's base.")
        base_define = f"#define {P}_ARENA_BASE 0x{arena_base:08X}u"
        arena_expr = f"(uint8_t *)(uintptr_t){P}_ARENA_BASE"
    else:
        where = (" * The graph runtime addresses activations as arena + offset, the arena being the\n"
                 " * array below (the plan's offsets inside it), wherever the link puts it.")
        base_define = ""
        arena_expr = f"pe_arena_{library_arena[0][0]}"
    size_expr, reloc_call, unplaced, unplaced_why = f"{P}_ARENA_BYTES", "", "", ""
    if library_reloc:
        where = (" * The graph runtime addresses activations as arena + offset: the arena starts at the\n"
                 " * lowest of the region arrays below, wherever the link puts them, and pe_model_init\n"
                 " * relocates the graph tables' offsets (in RAM) to the addresses the link chose.")
        arena_expr, size_expr = "pe_model_base", "pe_model_span"
        unplaced, unplaced_why = " || pe_model_base == NULL", ", or before pe_model_init"
        decls.append(library_reloc)
        reloc_call = ("    st = pe_model_relocate();   /* the regions' link addresses into the tables */\n"
                      "    if (st != PE_OK) {\n        return st;\n    }\n")
    return f"""/*
 * pe_model.c - the firmware API of model "{c_comment(graph.name)}" (see pe_model.h).
 * Generated by pyembed; do not edit, regenerate.
 *
{where}
 */
#include <stddef.h>
#include <stdint.h>
#include "pe_model.h"
#include "model_data.h"

{base_define}

{chr(10).join(decls)}

{seg_text or ''}
static const int32_t pe_model_op_table[{max(len(ops), 1)}] = {{ {op_index} }};
static const uint32_t pe_model_inputs[{max(nin, 1)}][2] = {{ {in_rows or '{0, 0}'} }};
static const uint32_t pe_model_outputs[{max(nout, 1)}][2] = {{ {out_rows or '{0, 0}'} }};

static pe_context pe_model_ctx;
static pe_model_hook pe_model_before;
static pe_model_hook pe_model_after;
static void *pe_model_user;
static const pe_row_source *pe_model_rows;
static const pe_row_sink *pe_model_sink;
static int pe_model_ready;

static uint8_t *pe_model_arena(void)
{{
    return {arena_expr};
}}

pe_status pe_model_init(void)
{{
    int32_t bad_op = -1;
    int32_t bad_tensor = -1;
    pe_status st;
{chr(10).join(checks)}
{reloc_call}    st = pe_graph_check(&{prefix}_graph, &bad_op, &bad_tensor);
    if (st != PE_OK) {{
        return st;
    }}
    pe_model_ctx.buf = pe_model_arena();
    pe_model_ctx.size = {size_expr};
    pe_model_ctx.stats = NULL;
    {prefix}_init_states(pe_model_arena());   /* states of a new interpreter (CALL_ONCE not run yet) */
    pe_model_ready = 1;
    return PE_OK;
}}

void *pe_model_input(int32_t index, uint32_t *bytes)
{{
    if (index < 0 || index >= {P}_NUM_INPUTS || pe_model_inputs[index][1] == 0u{unplaced}) {{
        return NULL;   /* a bad index, or a streamed input (not in the arena){unplaced_why} */
    }}
    if (bytes != NULL) {{
        *bytes = pe_model_inputs[index][1];
    }}
    return pe_model_arena() + {io_off.format("inputs")};
}}

const void *pe_model_output(int32_t index, uint32_t *bytes)
{{
    if (index < 0 || index >= {P}_NUM_OUTPUTS || pe_model_outputs[index][1] == 0u{unplaced}) {{
        return NULL;   /* a bad index, or a streamed output (not in the arena){unplaced_why} */
    }}
    if (bytes != NULL) {{
        *bytes = pe_model_outputs[index][1];
    }}
    return pe_model_arena() + {io_off.format("outputs")};
}}

void pe_model_set_hooks(pe_model_hook before, pe_model_hook after, void *user)
{{
    pe_model_before = before;
    pe_model_after = after;
    pe_model_user = user;
}}

int32_t pe_model_num_ops(void)
{{
    return {prefix}_graph.num_ops;
}}

int32_t pe_model_op_index(int32_t table_index)
{{
    if (table_index < 0 || table_index >= {prefix}_graph.num_ops) {{
        return -1;
    }}
    return pe_model_op_table[table_index];
}}

static pe_status pe_model_run_op(int32_t k)
{{
    pe_status st;
    if (pe_model_before != NULL) {{
        pe_model_before(k, pe_model_op_table[k], pe_model_user);
    }}
    st = pe_graph_invoke_op_io(&{prefix}_graph, k, &pe_model_ctx, pe_model_rows, pe_model_sink);
    if (pe_model_after != NULL) {{
        pe_model_after(k, pe_model_op_table[k], pe_model_user);
    }}
    return st;
}}

#if PE_MODEL_SEGMENTED
static pe_segload_state pe_model_segs;
static pe_segload_dma pe_model_dma;
static int pe_model_dma_set;

void pe_model_set_segment_dma(const pe_segload_dma *dma)
{{
    if (dma != NULL) {{
        pe_model_dma = *dma;
    }}
    pe_model_dma_set = dma != NULL;
}}
#endif

static pe_status pe_model_run(void);

pe_status pe_model_invoke(void)
{{
    return pe_model_invoke_rows(NULL);
}}

pe_status pe_model_invoke_rows(const pe_row_source *rows)
{{
    return pe_model_invoke_io(rows, NULL);
}}

pe_status pe_model_invoke_io(const pe_row_source *rows, const pe_row_sink *sink)
{{
    pe_status st;
    if (!pe_model_ready) {{
        return PE_ERR_STATE;
    }}
    if ((rows != NULL && rows->read == NULL) || (sink != NULL && sink->write == NULL)) {{
        return PE_ERR_ARG;
    }}
    pe_model_rows = rows;
    pe_model_sink = sink;
    st = pe_model_run();
    pe_model_rows = NULL;
    pe_model_sink = NULL;
    return st;
}}

static pe_status pe_model_run(void)
{{
    int32_t k;
    pe_status st;
#if PE_MODEL_SEGMENTED
    {{
        int32_t seg;
        st = pe_segload_init(&pe_model_segs, &pe_segment_plan, pe_segment_block, sizeof(pe_segment_block),
                             pe_model_dma_set ? &pe_model_dma : NULL);
        if (st == PE_OK) {{
            st = pe_segload_begin(&pe_model_segs);
        }}
        for (seg = 0; st == PE_OK && seg < pe_segment_plan.n_segments; seg++) {{
            const pe_segload_segment *sg = &pe_segment_plan.segments[seg];
            st = pe_segload_acquire(&pe_model_segs, seg);
            for (k = sg->first_op; st == PE_OK && k < sg->end_op; k++) {{
                st = pe_model_run_op(k);
            }}
            if (st == PE_OK) {{
                st = pe_segload_release(&pe_model_segs, seg);
            }}
        }}
        return st;
    }}
#else
{invoke_loop(graph, prefix)}
#endif
}}
"""


def _check_names(profile, prefix):
    """prefix and the profile's region names become C identifiers, section and
    MEMORY names of the project: refuse any that is not an identifier, and two
    that differ only in case (one MEMORY name each)."""
    check_identifier(prefix, "prefix")
    upper = {}
    for r in profile.regions.values():
        check_identifier(r.name, f"profile {profile.name!r}: region name")
        if r.name.upper() in upper:
            raise ArgumentError(f"profile {profile.name!r}: region names {upper[r.name.upper()]!r} and {r.name!r} "
                                f"differ only in case (one linker MEMORY name each)")
        upper[r.name.upper()] = r.name


def _gather_rows(graph, ops):
    """Operator table rows (in ops order) of convolutions whose scratch is a
    gather work block (pyembed.plan.widen.dsp_conv_scratch)."""
    rows = []
    for k, o in enumerate(ops):
        op = graph.operators[o["op"]]
        if op.type in ("CONV_2D", "DEPTHWISE_CONV_2D") and isinstance(op.params, dict) \
                and op.params.get("conv_form") == "gather" and op.scratch_bytes > 0:
            rows.append(k)
    return rows


def _write_project(out, graph, profile, plan, prefix, layout, arena_base, regions, sys_region, segments, granted,
                   fc_w16, streamed, core_flags, copy_runtime, run_input=None, io="semihost", boot2=None):
    """Stage every file of the project in out (a pyembed.codegen.outdir.OutputDir);
    returns ({key: final path}, operator rows). run_input, io: generate_project's."""
    from pyembed.codegen import emit
    from pyembed.codegen.firmware.files import MODEL_SOURCES, _cmakelists, _main_source, _makefile
    from pyembed.codegen.outdir import copy_tree
    files = {}

    def w(rel, text):
        write = out.write_bytes if isinstance(text, bytes) else out.write_text
        files[rel.rsplit("/", 1)[-1]] = write(rel, text)

    w("model/memplan.h", emit.memplan_header(plan, num_tensors=len(graph.tensors)))
    hdr, src = emit.model_data(graph, section=".pe_flash", prefix=prefix)
    w("model/model_data.h", hdr)
    w("model/model_data.c", src)
    tensors, ops = emit.runtime_tables(graph, layout)
    seg_text, const_data, seg_block = None, None, None
    if segments is not None:
        used_sys = regions.get(sys_region.name, (sys_region.base, 0))[1]
        block_base = int(sys_region.base) + _align(used_sys, 16)
        seg_text, const_data = segment_tables(graph, ops, segments, block_base, prefix)
        seg_block = (block_base, _align(segments.block_bytes, 16))
    ghdr, gsrc = emit.graph_tables(graph, plan, prefix=prefix, layout=layout, const_data=const_data)
    w("model/model_graph.h", ghdr)
    w("model/model_graph.c", gsrc)
    # the operator table: only the runners (hence kernels) this model's operators use
    from pyembed.codegen import optable
    w(f"model/{optable.GENERATED_NAME}",
      optable.op_table_source(optable.op_uses(gsrc, _gather_rows(graph, ops)),
                              rows=bool(streamed) or bool(streamed_outputs(graph)), model_name=graph.name,
                              stripe_kinds=optable.stripe_kinds_in(gsrc)))
    op_rows = [{"table_index": k, "op": o["op"], "type": graph.operators[o["op"]].type} for k, o in enumerate(ops)]
    w("model/pe_model.h", _api_header(graph, prefix, segments is not None))
    w("model/pe_model.c", _api_source(graph, prefix, ops, regions, arena_base, sys_region.name, seg_text))
    # the Makefile and CMakeLists compile exactly these model sources (no user file in model/)
    assert sorted(r for r in files if r.endswith(".c")) == sorted(MODEL_SOURCES)
    from pyembed.codegen.firmware import io as fwio
    if io == "semihost":
        w("main.c", _main_source(graph, prefix, ops))
    else:
        # no semihosting: the input compiled in, the board's own start-up (and UART)
        w("main.c", fwio.main_source(graph, prefix, ops, io, bool(streamed), board=profile.name.lower()))
        w("pe_input.c", fwio.input_source(run_input["data"]))
        w("startup.c", fwio.startup_source(profile.name.lower(), io))
        if io == "uart":
            w("pe_uart.c", fwio.uart_source(profile.name.lower()))
            w("pe_uart.h", fwio.uart_header())
    machine = qemu_machine(profile)
    # the harness's frame of a streamed input: in code memory where QEMU makes it RAM, else in .data's RAM
    # (io uart / none: the built-in input in flash is the frame, read in place)
    frame = None if not streamed or io != "semihost" else ("FLASH" if machine else "RAM")
    # the harness's frame of a streamed output (semihost: the sink copies the rows there for pe_output.bin)
    out_frame = None if not streamed_outputs(graph) or io != "semihost" else ("FLASH" if machine else "RAM")
    w("link.ld", _linker_script(profile, regions, profile.flash_region, sys_region.name, seg_block, frame,
                                boot2=boot2 is not None, out_frame_memory=out_frame))
    if boot2 is not None:
        w("pe_boot2.c", fwio.boot2_source(boot2))
    # the stack reserve the link keeps (build_project rewrites it from the static bound)
    from pyembed.codegen.firmware.stack import stack_script
    w("stack.ld", stack_script())
    for name in ("startup.c", "pe_port.c", "pe_port.h", "pe_target.c", "pe_target.h"):
        if name == "startup.c" and io != "semihost":
            continue
        w(name, (TARGET_TEMPLATES / name).read_text())
    w("Makefile", _makefile(profile, core_flags, machine, graph, io, boot2 is not None))
    w("CMakeLists.txt", _cmakelists(profile, core_flags, io, boot2 is not None))
    if copy_runtime:
        # file by file through the manifest: a file of the user's in pyembed/ stays (or is refused)
        cs = csrc_dir()
        copy_tree(out, "pyembed/include", cs / "include")
        # the whole runtime but the full operator table (model/model_ops.c is this model's)
        from pyembed import _csrc
        copy_tree(out, "pyembed/src", cs / "src", skip=_csrc.FULL_TABLES)
        files["pyembed"] = out.path("pyembed")
    inputs = [(t, int(graph.tensors[t].nbytes), graph.tensors[t].dtype) for t in graph.inputs]
    outputs = [(t, int(graph.tensors[t].nbytes), graph.tensors[t].dtype, tuple(graph.tensors[t].shape))
               for t in graph.outputs]
    input_file = None
    if run_input is not None:
        # the input of the run (one sample): kept in the project, in its manifest, for `make run`
        data = run_input["data"]
        w(INPUT_FILE, data)
        input_file = {"name": INPUT_FILE, "bytes": len(data),
                      **{k: v for k, v in run_input.items() if k != "data"}}
    uart = fwio.UART_BOARDS.get(profile.name.lower()) if io == "uart" else None
    manifest = {"model": graph.name, "profile": profile.name, "core": profile.core, "qemu_machine": machine,
                "io": io,
                "boot2": None if boot2 is None else {"file": "pe_boot2.c", "bytes": len(boot2),
                                                     "crc32_mpeg2": fwio.boot2_crc(boot2[:252])},
                "uart": None if uart is None else {"device": uart.device, "base": uart.base,
                                                   "baud": fwio.UART_BAUD},
                "arena_base": arena_base, "arena_span": layout.arena_size, "arena_bytes": int(plan.arena_size),
                "pipeline": plan.info.get("pipeline"),
                "streamed_inputs": streamed,
                "streamed_outputs": streamed_outputs(graph),
                "dsp_scratch": {str(k): {"old": o, "new": n, "region": r, "offset": f}
                                for k, (o, n, r, f) in granted.items()},
                "regions": {k: {"base": b, "used": u} for k, (b, u) in regions.items()},
                "operators": op_rows,
                "fc_w16": fc_w16,
                "segments": None if segments is None else {
                    "count": len(segments.segments), "block_bytes": segments.block_bytes,
                    "block_base": seg_block[0], "placement": segments.placement,
                    "ops": [[o for la in segments.layers[s.first:s.last + 1] for o in la.ops]
                            for s in segments.segments]},
                "inputs": [{"tensor": t, "bytes": b, "dtype": str(d)} for t, b, d in inputs],
                "outputs": [{"tensor": t, "bytes": b, "dtype": str(d), "shape": list(s)} for t, b, d, s in outputs],
                "input_file": input_file}
    w("firmware.json", json.dumps(manifest, indent=1))
    return files, op_rows


def generate_project(graph, profile, outdir, plan=None, prefix="pe_model", algorithm="auto",
                     time_limit=5.0, copy_runtime=True, segments=None, dsp_scratch=None, fc_int16_weights=False,
                     fc_w16_min_macs=None, force=False, run_input=None, library_writer=None, io="semihost",
                     boot2=None):
    """Write the firmware project of graph for profile (a loaded firmware_sim
    profile) into outdir; returns a FirmwareProject. plan: a pyembed.plan Plan
    on the profile's regions (default: planned here). segments: a
    firmware_sim.segments.SegmentPlan (one layer per operator): the weights are
    loaded from flash into a RAM block segment by segment (pe_segload) while
    the model runs, the block placed after the planned buffers of the largest
    zero-wait RAM region (where .data, .bss and the stack go too).
    dsp_scratch (default: the profile's core has the Arm DSP extension): every
    standard convolution whose DSP reverse kernel runs faster with more scratch
    gets it where the plan has those bytes free at its step (no region grows),
    and every convolution left in the gather form gets its DSP loops' work
    block (free bytes, else past a region's end: that region grows by it;
    pyembed.plan.widen.dsp_conv_scratch); ``project.dsp_scratch`` lists them and
    ``project.graph`` is the graph the tables describe.
    fc_int16_weights: an opt-in trading flash for speed: every int8
    FULLY_CONNECTED with constant weights runs from int16 weights packed here
    (pyembed.passes.fc_w16.widen_fc_weights: about twice the int8 weights'
    flash, bit-exact); ``project.fc_w16`` and firmware.json's "fc_w16" report
    each layer and the bytes. A given plan must be of the widened graph.
    fc_w16_min_macs: the pass's min_macs (None: its MIN_MACS, 2048 MACs per
    row; smaller layers are skipped and reported).
    outdir is written through pyembed.codegen.outdir: files pyembed wrote
    there before (its manifest) are replaced, anything else in the way is
    refused (ArgumentError) unless force; the whole project or nothing.
    run_input: None, or {"data": bytes, ...}: the harness's input file
    (INPUT_FILE, pe_input.bin: every input's bytes in input order, one sample)
    written into the project with it, so that `make run` there runs that
    input; the dict's other keys (e.g. "source", "sample") are recorded in
    firmware.json's "input_file".
    io: how the harness talks (pyembed.codegen.firmware.io): "semihost"
    (the default: pe_input.bin / pe_output.bin through semihosting), "uart"
    (the input compiled into the image from run_input, the results printed on
    the board's UART; the boards of io.UART_BOARDS) or "none" (the input
    compiled in, no output: the results in main.c's pe_result_* globals for a
    debugger); uart and none need run_input. A part whose boot needs a stage
    pyembed cannot generate (RP2040's boot2) is refused (UnsupportedError)
    unless boot2 (bytes: the user's 256-byte image, its CRC checked as the
    boot ROM does) is given: it is linked at the flash's first 256 bytes
    (pe_boot2.c, section .boot2) and the vector table follows it.
    library_writer: None (the QEMU project), or the library layout's writer
    (``--layout library``: pyembed.codegen.firmware.library.generate_library)."""
    from pyembed.model.graph import Graph

    if not isinstance(graph, Graph):
        raise ArgumentError(f"graph: expected a pyembed Graph, got {type(graph).__name__}")
    from pyembed.model.validate import validate_graph
    validate_graph(graph)
    if not isinstance(outdir, (str, os.PathLike)):
        raise ArgumentError(f"outdir: expected a directory path, got {type(outdir).__name__}")
    graph.check_supported()
    fc_w16 = None
    if fc_int16_weights:
        from pyembed.passes.fc_w16 import MIN_MACS, W16_TYPE, widen_fc_weights
        before = sum(op.type == W16_TYPE for op in graph.operators)
        graph, fc_w16 = widen_fc_weights(graph, MIN_MACS if fc_w16_min_macs is None else fc_w16_min_macs)
        changed = sum(op.type == W16_TYPE for op in graph.operators) != before
        if changed and (plan is not None or segments is not None):
            raise ArgumentError(f"{'plan' if plan is not None else 'segments'}: fc_int16_weights changes the "
                                f"graph's scratch and constants; plan / segment the graph "
                                f"pyembed.passes.fc_w16.widen_fc_weights returns (pyembed.target.firmware.generate "
                                f"does), or give none")
    streamed = [k for k, t in enumerate(graph.inputs) if graph.tensors[t].streamed]
    if streamed and streamed != [0]:
        raise UnsupportedError(f"graph: inputs {streamed} are streamed; the firmware harness streams input 0 only")
    if streamed_outputs(graph) not in ([], [0]):
        raise UnsupportedError(f"graph: outputs {streamed_outputs(graph)} are streamed; the firmware harness "
                               f"streams output 0 only")
    profile = _require_profile(profile)
    _check_names(profile, prefix)
    from pyembed.codegen.firmware import io as fwio
    boot2 = fwio.check_boot(profile.name, boot2)
    fwio.check_io(io, profile.name)
    if io != "semihost" and run_input is None:
        raise ArgumentError(f"io={io!r}: the input is compiled into the image (no host files without semihosting); "
                            f"give run_input (the CLI passes --inputs or a seeded random sample)")
    core_flags = CORE_FLAGS.get(profile.core)
    if core_flags is None:
        raise UnsupportedError(f"profile {profile.name}: no compiler flags for core {profile.core!r} "
                               f"(known: {', '.join(sorted(CORE_FLAGS))})")
    if plan is None:
        plan = plan_for_profile(graph, profile, algorithm=algorithm, time_limit=time_limit)
    if dsp_scratch is None:
        from pyembed.plan.widen import DSP_CORES
        dsp_scratch = profile.core in DSP_CORES
    granted = {}
    if "dsp_granted" in plan.info:
        # widened by the planning path already (pyembed.target.planning): graph is the widened one
        from pyembed.plan.widen import granted_from
        granted = granted_from(plan.info["dsp_granted"])
    elif dsp_scratch:
        from pyembed.plan.widen import dsp_conv_scratch
        graph, plan, granted = dsp_conv_scratch(graph, plan)
    layout, arena_base, regions = firmware_layout(graph, plan)
    sys_region = system_region(profile)
    for name, (_, used) in regions.items():
        if name not in profile.regions or profile.regions[name].is_flash:
            raise ArgumentError(f"plan: region {name!r} is not a RAM region of profile {profile.name} "
                                f"(plan on the profile's regions: plan_for_profile)")
        cap = profile.regions[name].size
        if used > cap:
            raise PlanError(f"region {name}: plan uses {used} B of {cap} B")
    if run_input is not None:
        if not isinstance(run_input, dict) or not isinstance(run_input.get("data"), (bytes, bytearray)):
            raise ArgumentError(f"run_input: expected a dict with the input bytes under 'data', got "
                                f"{type(run_input).__name__}")
        rows, text = input_layout(graph)
        if len(run_input["data"]) != sum(r["bytes"] for r in rows):
            raise ArgumentError(f"run_input: {len(run_input['data'])} B of input; the harness reads {text}")
        run_input = dict(run_input, data=bytes(run_input["data"]))
    from pyembed.codegen.outdir import OutputDir
    if library_writer is not None:
        return library_writer(outdir, force, graph, profile, plan, prefix, layout, regions, granted, fc_w16, streamed,
                              core_flags, segments, run_input)
    with OutputDir(outdir, force=force) as out:
        files, op_rows = _write_project(out, graph, profile, plan, prefix, layout, arena_base, regions, sys_region,
                                        segments, granted, fc_w16, streamed, core_flags, copy_runtime, run_input,
                                        io, boot2)
    machine = qemu_machine(profile)
    inputs = [(t, int(graph.tensors[t].nbytes), graph.tensors[t].dtype) for t in graph.inputs]
    outputs = [(t, int(graph.tensors[t].nbytes), graph.tensors[t].dtype, tuple(graph.tensors[t].shape))
               for t in graph.outputs]
    out = Path(out.root)
    return FirmwareProject(out, profile, graph, plan, layout, op_rows, inputs, outputs, machine, files, granted,
                           fc_w16)
