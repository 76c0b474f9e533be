"""Build a generated firmware project (pyembed.codegen.firmware) and run it
under QEMU: outputs and per-operator instruction counts.

    proj = generate_project(graph, "mps2-an386", "out/")
    elf = build_project(proj.outdir)                 # runs `make` in the project
    res = run_project(proj, [x])                     # FirmwareRun

build_project also bounds the stack statically (pyembed.target.stackbound:
the deepest call path from pe_model_invoke, from GCC's -fstack-usage /
-fcallgraph-info output), reserves it in the link (stack.ld: the bound with an
interrupt at its deepest point, plus a margin) and records the bound and the
flash per part (pyembed.target.linkmap) in firmware.json ("stack", "flash");
run_project measures the invoke's peak stack by paint and scan
(``FirmwareRun.stack_bytes``) and records it there too ("stack_bytes").

Instruction counts are SysTick ticks * 1e9 / the board's SysTick clock (QEMU
-icount shift=0: one instruction per ns; 40 per tick on the 25 MHz MPS2
boards, 62.5 on the 16 MHz micro:bit), so they have a one-tick resolution;
the count of an operator includes the few instructions of the timing hooks
and of the dispatch loop around it.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np

from pyembed.errors import ArgumentError, PyEmbedError
from pyembed.codegen.firmware.stack import STACK_RECORD_BYTES
from pyembed.target import qemu

__all__ = ["FirmwareRun", "FirmwareError", "generate", "build_project", "run_project", "load_manifest",
           "input_bytes"]


class FirmwareError(PyEmbedError):
    """The firmware did not build, or its run on QEMU failed."""


@dataclasses.dataclass
class FirmwareRun:
    outputs: list                 # numpy arrays, graph output order
    operators: list               # [{"index", "type", "instructions", "table_index"}]
    total_instructions: int       # sum of the per-operator counts
    invoke_instructions: int      # the whole pe_model_invoke, timed around it
    status: int
    board: str
    input_rows: int | None = None  # rows the harness's pe_row_source delivered (a streamed input), else None
    stack_bytes: int | None = None  # peak stack of pe_model_invoke, painted and scanned (None: overflowed)
    stack_main_bytes: int | None = None  # peak stack of main before the invoke (init, input reads)
    stack_reserved: int | None = None    # bytes link.ld reserved (.stack)
    stack_bound: dict | None = None      # firmware.json's "stack" (the static bound) when built here
    output_rows: int | None = None  # rows the harness's pe_row_sink took (a streamed output), else None

    def to_dict(self):
        return {"outputs": [np.asarray(o).reshape(-1).tolist() for o in self.outputs],
                "operators": [{k: o[k] for k in ("index", "type", "instructions")} for o in self.operators],
                "total_instructions": self.total_instructions,
                "invoke_instructions": self.invoke_instructions,
                "instruction_resolution": float(qemu.BOARDS[self.board].instructions_per_tick),
                "board": self.board, "input_rows_given": self.input_rows, "output_rows_taken": self.output_rows,
                "stack_bytes": self.stack_bytes, "stack_main_bytes": self.stack_main_bytes,
                "stack_reserved_bytes": self.stack_reserved,
                "stack_bound_bytes": (self.stack_bound or {}).get("bound_total_bytes")}


def generate(graph, profile, outdir, segments=None, strategy="none", max_extra_macs=0.10, stream_input=False,
             fc_int16_weights=False, fc_w16_min_macs=None, cut="latency", stream_output=False, **kw):
    """pyembed.codegen.firmware.generate_project with a profile name or path
    (case-insensitive bundled name, see firmware_sim.profiles.load_profile).

    strategy: the compiler pipeline before planning, as ``pyembed plan
    --strategy`` (without a plan in kw, the graph is planned by
    pyembed.target.planning.plan_for_target on the profile's RAM regions,
    as every command plans): "none" (the graph as imported, the default here), "layers",
    "stripes" or "auto" (within max_extra_macs, a fraction). The project runs
    the rewritten graph (``project.graph``; ``project.source_graph`` is the
    one given) on its plan, and ``project.pipeline_lines`` say what was chosen.
    stream_input: the graph input is delivered row by row through a
    pe_row_source (stripes / auto only); it takes no arena bytes.
    stream_output: the graph output leaves row by row through a pe_row_sink
    (stripes / auto only; pe_model_invoke_io); it takes no arena bytes.

    segments: None (weights resident in flash), a SegmentPlan, or a RAM budget
    in bytes for the weights (the execution block): the model is divided into
    segments by firmware_sim (segment_graph, one layer per operator) when its
    weights do not fit the budget; when they fit, no segments (say so with
    ``project.segment_note``). The division is
    pyembed.target.planning.segment_division's (the one plan and simulate
    make) with the cut rule ``cut`` (planning.CUTS: latency, boundaries,
    state, balanced); without a plan in kw, the plan caps the stripe regions'
    weights for the block as plan_for_target does.

    library=True (in kw): the model as a library for the user's own firmware
    (pyembed.codegen.firmware.library.generate_library) instead of the project.

    fc_int16_weights: int8 FULLY_CONNECTED layers on int16 weights packed
    offline (pyembed.passes.fc_w16, applied before the strategy and the plan;
    ``project.fc_w16`` reports the layers and bytes) for layers of at least
    fc_w16_min_macs MACs per row (None: the pass's MIN_MACS, 2048).

    wide_blocks=True (in kw): stripe regions as full-width stripes in wide
    blocks, where the C executor runs its convolution row loops
    (pyembed.passes.pipeline WIDE_BLOCK; python -m pyembed.bench
    firmware_pipeline --strategies wide measures it)."""
    wide_blocks = bool(kw.pop("wide_blocks", False))
    from firmware_sim.profiles import load_profile
    from pyembed.codegen.firmware import generate_project
    prof = load_profile(profile)
    if strategy not in ("none", "layers", "stripes", "auto"):
        raise ArgumentError(f"strategy: expected none, layers, stripes or auto, got {strategy!r}")
    source = graph
    lines = []
    from pyembed.model.ops.ctrlflow import refuse_segments
    refuse_segments(graph, segments)
    if fc_int16_weights and kw.get("plan") is None and not hasattr(segments, "segments"):
        # before planning (a given plan or segment plan is of the graph as given:
        # generate_project refuses it when the pass changes that graph)
        from pyembed.passes.fc_w16 import MIN_MACS, widen_fc_weights
        graph, _ = widen_fc_weights(graph, MIN_MACS if fc_w16_min_macs is None else fc_w16_min_macs)
        # generate_project reports it
    if (strategy != "none" or stream_input or stream_output) and kw.get("plan") is not None:
        raise ArgumentError("plan: give either a plan or a strategy (the strategy plans the rewritten graph)")
    if kw.get("plan") is None:
        # the one planning path (pyembed.target.planning), as pyembed plan / simulate / firmware plan
        from pyembed.target.planning import TIME_LIMIT, PlanOptions, plan_for_target
        block = None if segments is None or hasattr(segments, "segments") else int(segments)
        options = PlanOptions(strategy=strategy, max_extra_macs=float(max_extra_macs), stream_input=stream_input,
                              algorithm=kw.pop("algorithm", "auto"), time_limit=kw.pop("time_limit", TIME_LIMIT),
                              weight_block=block if block and block > 0 else None, segment_cut=cut,
                              stream_output=stream_output, wide_blocks=wide_blocks)
        tp = plan_for_target(graph, prof, options, action="build firmware for")
        graph, kw["plan"], lines = tp.graph, tp.plan, tp.pipeline_lines
    note = None
    if segments is not None and not hasattr(segments, "segments"):
        budget = int(segments)
        if budget <= 0:
            raise ArgumentError(f"segments: expected a positive byte budget, got {segments!r}")
        from firmware_sim.autoseg import segment_note
        from pyembed.codegen.firmware import system_region
        from pyembed.target.planning import segment_division
        # the one division plan and simulate make (pyembed.target.planning.segment_division); the
        # firmware puts the block after .data/.bss in the system RAM: cost its loads there
        segments = segment_division(graph, kw["plan"], prof, budget, block_region=system_region(prof).name,
                                    cut=cut)
        note = segment_note(graph, budget, segments)
    write = generate_project
    if kw.pop("library", False):
        # --layout library: the model for the user's own firmware (pyembed.codegen.firmware.library)
        from pyembed.codegen.firmware.library import generate_library
        write = generate_library
    proj = write(graph, prof, outdir, segments=segments, fc_int16_weights=fc_int16_weights,
                 fc_w16_min_macs=fc_w16_min_macs, **kw)
    layers = [int(op.params["layers"]) for op in proj.graph.operators
              if op.type == "PE_STRIPE_REGION" and "layers" in (op.params or {})]
    if layers:
        # the stripe executor's recursion is one level per layer (pyembed.target.stackbound.recursion_depths)
        _update_manifest(proj.outdir, {"stripe_layers_max": max(layers)})
    proj.source_graph = source
    proj.pipeline_lines = lines
    proj.segment_note = note
    proj.segment_plan = segments if hasattr(segments, "segments") else None
    return proj


def load_manifest(project_dir):
    with open(os.path.join(project_dir, "firmware.json")) as f:
        return json.load(f)


def build_project(project_dir, jobs=2, make_vars=None, stack=True):
    """`make` in the project directory; returns the ELF path. make_vars: extra
    variables for make (e.g. {"RUNTIME_BUILD": dir} to share the runtime's
    objects between projects for the same core). With a shared RUNTIME_BUILD
    (and no PYEMBED_CSRC given), a project whose pyembed/ copy is csrc/'s
    files byte for byte builds the runtime from csrc/ itself: make then
    compiles each runtime object once per RUNTIME_BUILD, not once per project
    (the copy's files are new, so their objects would look out of date).

    stack (default): link once with no stack reserve, bound the stack from the
    objects' call graph and frames (pyembed.target.stackbound), write stack.ld
    with the bound plus a margin (pyembed.codegen.firmware.stack) and link
    again, so a RAM too small for it fails the link; firmware.json then holds
    "stack" (the bound, its deepest path, the reserve) and "flash" (bytes per
    part from the link map). An unbounded stack (recursion, an unresolved
    indirect call) keeps the default reserve and says why."""
    if shutil.which("make") is None:
        raise FirmwareError("make is not installed")
    if shutil.which(qemu.CC) is None:
        raise FirmwareError(qemu.missing_tools() or f"{qemu.CC} not found")
    d = Path(project_dir)
    if not (d / "Makefile").is_file():
        raise ArgumentError(f"project_dir: {d} has no Makefile (generate the project first)")
    make_vars = dict(make_vars or {})
    if make_vars.get("RUNTIME_BUILD") and "PYEMBED_CSRC" not in make_vars:
        # a runtime build shared between projects: compile it from csrc/ itself when the project's copy
        # is that csrc/ byte for byte (the copy's fresh modification times would make make rebuild every
        # shared object for each project, ~15 s of CPU per project)
        same = _runtime_copy_is_csrc(d)
        if same is not None:
            make_vars["PYEMBED_CSRC"] = str(same)
    extra = [f"{k}={v}" for k, v in make_vars.items()]

    def make():
        proc = subprocess.run(["make", "-s", f"-j{int(jobs)}", *extra, "firmware.elf"], cwd=d, capture_output=True,
                              text=True)
        if proc.returncode != 0:
            why = _too_small(d / "firmware.map") if "is too small" in proc.stderr else None
            raise FirmwareError(f"building the firmware in {d} failed:{' ' + why if why else ''}\n"
                                f"{proc.stdout}{proc.stderr}")

    if not stack or not (d / "stack.ld").is_file():
        make()
        return d / "firmware.elf"
    from pyembed.codegen.firmware.stack import DEFAULT_RESERVE, HEAP_MIN, MARGIN, reserve_for, stack_script
    _replace_text(d / "stack.ld", stack_script(0, note="provisional, no reserve: the link the stack bound is read "
                                                     "from (pyembed.target.firmware.build_project)"))
    make()
    # the runtime's objects (and .ci files) where make put them: make_vars, else the environment make inherits
    try:
        info = stack_info(d, make_vars.get("RUNTIME_BUILD") or os.environ.get("RUNTIME_BUILD") or None)
    except (OSError, ValueError) as e:   # no .ci files (STACK_FLAGS emptied), binutils missing
        info = {"bound_bytes": None, "interrupt_bytes": None, "bound_total_bytes": None, "root": None, "path": [],
                "path_text": "", "unbounded": [str(e)], "indirect_calls": {}}
    if info["bound_total_bytes"] is not None:
        reserve = reserve_for(info["bound_total_bytes"])
        note = (f"the static bound of pe_model_invoke, {info['bound_bytes']} B, + {info['interrupt_bytes']} B for an "
                f"interrupt at its deepest point, rounded up to 8 B, + {MARGIN} B margin "
                f"(pyembed.target.stackbound; deepest path {info['path_text']})")
    else:
        reserve = DEFAULT_RESERVE
        note = f"the default: the stack is not bounded ({'; '.join(info['unbounded'][:3])})"
    info["reserved_bytes"] = reserve
    info["heap_min_bytes"] = HEAP_MIN
    _replace_text(d / "stack.ld", stack_script(reserve, note=note))
    (d / "firmware.elf").unlink()
    make()
    flash = flash_info(d / "firmware.map")
    _update_manifest(d, {"stack": info, "flash": flash})
    return d / "firmware.elf"


def _runtime_copy_is_csrc(project_dir):
    """pyembed's csrc/ directory when project_dir/pyembed (the runtime copy the project builds from)
    holds exactly csrc/'s include/ and src/ files (the full operator table aside), byte for byte;
    else None (no copy, a csrc/ not found, a file added, removed or edited)."""
    from pyembed import _csrc
    cs = _csrc.csrc_dir(required=False)
    copy = Path(project_dir) / "pyembed"
    if cs is None or not copy.is_dir():
        return None

    def files(root, skip):
        out = {}
        for sub in ("include", "src"):
            for p in (Path(root) / sub).rglob("*"):
                if p.is_file() and not p.name.startswith(".") and not p.name.endswith((".o", ".pyc")) \
                        and p.name not in skip:
                    out[p.relative_to(root).as_posix()] = p
        return out
    mine, theirs = files(copy, ()), files(cs, _csrc.FULL_TABLES)
    if set(mine) != set(theirs):
        return None
    for rel, p in mine.items():
        if p.stat().st_size != theirs[rel].stat().st_size or p.read_bytes() != theirs[rel].read_bytes():
            return None
    return Path(cs).resolve()


def _too_small(map_path):
    """The sizes behind link.ld's "too small" ASSERT, from the failed link's map: a sentence, or None."""
    try:
        text = Path(map_path).read_text(errors="replace")
    except OSError:
        return None
    v = {m.group(2): int(m.group(1), 16)
         for m in re.finditer(r"^\s+0x([0-9a-f]+)\s+(end|__stack_top|PE_STACK_RESERVE|PE_HEAP_MIN) = ", text, re.M)}
    if len(v) < 4:
        return None
    need = v["PE_STACK_RESERVE"] + v["PE_HEAP_MIN"]
    free = v["__stack_top"] - v["end"]
    return (f"the system RAM is too small: the planned buffers, .data and .bss end at 0x{v['end']:08X} and the "
            f"region at 0x{v['__stack_top']:08X}, {free} B free; the stack reserve ({v['PE_STACK_RESERVE']} B) "
            f"and the heap ({v['PE_HEAP_MIN']} B) need {need} B: {need - free} B short"
            + (" (the provisional link, which reserves no stack: the static bound is read from it)"
               if v["PE_STACK_RESERVE"] == 0 else ""))


def stack_info(project_dir, runtime_build=None):
    """firmware.json's "stack" record of a project built with STACK_FLAGS."""
    from pyembed.target import stackbound
    d = Path(project_dir)
    rt = None if runtime_build is None else Path(runtime_build)
    # a use case (pyembed.codegen.firmware.usecase) names each model's invoke: the deepest bounds the stack
    bounds = [stackbound.bound(d, runtime_build=rt, root=r) for r in load_manifest(d).get("stack_roots") or [None]]
    b = next((x for x in bounds if x.total is None), None) or max(bounds, key=lambda x: x.total)
    return {"bound_bytes": b.bytes, "interrupt_bytes": b.interrupt_bytes, "bound_total_bytes": b.total,
            "root": b.root, "path": [[f, n] for f, n in b.path], "path_text": b.path_text(),
            "unbounded": b.unbounded, "indirect_calls": b.indirect}


def flash_info(map_path):
    """Flash bytes per part of the linked firmware (pyembed.target.linkmap.breakdown):
    runtime code, model tables, weights, harness + libc, total."""
    from pyembed.target import linkmap
    parts = linkmap.breakdown(map_path)
    out = {"runtime_code": parts["runtime"]["flash"], "model_tables": parts["tables"]["flash"],
           "weights": parts["weights"]["flash"],
           "harness_libc": parts["harness"]["flash"] + parts["libc"]["flash"]}
    out["total"] = sum(out.values())
    out["parts"] = parts
    return out


def _replace_text(path, text):
    """Rewrite a project file pyembed generated, keeping the folder's manifest in step."""
    from pyembed.codegen.outdir import refresh
    path = Path(path)
    tmp = Path(str(path) + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    refresh(path.parent, path.name)


def _update_manifest(project_dir, fields):
    path = Path(project_dir) / "firmware.json"
    m = json.loads(path.read_text()) if path.is_file() else {}
    m.update(fields)
    _replace_text(path, json.dumps(m, indent=1))


def random_inputs(graph, seed):
    """The seeded random input of ``pyembed firmware --run`` without --inputs: one array per graph
    input, integers over the dtype's whole range (standard normal for a float input)."""
    rng = np.random.default_rng(seed)
    xs = []
    for t in graph.inputs:
        tt = graph.tensors[t]
        info = np.iinfo(tt.dtype) if np.issubdtype(tt.dtype, np.integer) else None
        xs.append(rng.integers(info.min, info.max + 1, size=tt.shape).astype(tt.dtype) if info is not None
                  else rng.standard_normal(tt.shape).astype(tt.dtype))
    return xs


def input_bytes(graph, inputs):
    """The bytes of the harness's input file (pe_input.bin) for one sample of
    graph: inputs (an array or a list, one per graph input, each of the input's
    dtype and size) concatenated in input order."""
    specs = [{"bytes": int(graph.tensors[t].nbytes), "dtype": str(graph.tensors[t].dtype)} for t in graph.inputs]
    return _input_bytes({"inputs": specs}, inputs)


def _input_bytes(manifest, inputs):
    specs = manifest["inputs"]
    if isinstance(inputs, np.ndarray) or not isinstance(inputs, (list, tuple)):
        inputs = [inputs]
    if len(inputs) != len(specs):
        raise ArgumentError(f"inputs: the model has {len(specs)} input(s), got {len(inputs)}")
    out = b""
    for k, (x, s) in enumerate(zip(inputs, specs)):
        a = np.asarray(x)
        if a.dtype != np.dtype(s["dtype"]):
            raise ArgumentError(f"inputs[{k}]: expected dtype {s['dtype']}, got {a.dtype}")
        if a.nbytes != s["bytes"]:
            raise ArgumentError(f"inputs[{k}]: expected {s['bytes']} bytes, got {a.nbytes} (shape {a.shape})")
        out += np.ascontiguousarray(a).tobytes()
    return out


def run_project(project, inputs, elf=None, timeout=600.0):
    """Run the project's firmware on its QEMU machine with inputs (an array or a
    list, one per graph input); returns a FirmwareRun. project: a
    FirmwareProject or the project directory."""
    d = Path(getattr(project, "outdir", project))
    manifest = load_manifest(d)
    board = manifest.get("qemu_machine")
    if not board:
        raise FirmwareError(f"profile {manifest['profile']}: no QEMU machine emulates it (run --run with "
                            f"one of {', '.join(qemu.BOARDS)})")
    data = _input_bytes(manifest, inputs)
    io = manifest.get("io", "semihost")
    if io == "none":
        raise FirmwareError("the project was generated with --io none: the firmware prints nothing, so a run has "
                            "no results to read (attach a debugger: make run; or generate it with --io uart or "
                            "semihost)")
    if io == "uart":
        built_in = d / "pe_input.bin"
        if not built_in.is_file() or built_in.read_bytes() != data:
            raise FirmwareError("--io uart: the input is compiled into the image (pe_input.c, from the project's "
                                "pe_input.bin) and this input is not it; generate the project with this input")
    elf = Path(elf) if elf is not None else d / "firmware.elf"
    if not elf.is_file():
        elf = build_project(d)
    if io == "uart":
        return _run_uart(d, manifest, elf, board, timeout)
    try:
        res = qemu.run(elf, board=board, input_bytes=data, timeout=timeout)
    except qemu.QemuError as e:
        raise FirmwareError(str(e)) from None
    blob = res.output
    status, outputs, ops, ticks, pos, stack = _parse_record(blob, 0, manifest, board, res)
    if status != 0 or res.exit_code != 0:
        raise FirmwareError(f"the firmware's pe_model_invoke returned status {status} (exit code "
                            f"{res.exit_code})")
    out = res.stdout.decode("latin-1") if isinstance(res.stdout, bytes) else (res.stdout or "")
    rows = re.search(r"^pe_input_rows_given (\d+)\r?$", out, re.M)
    taken = re.search(r"^pe_output_rows_taken (\d+)\r?$", out, re.M)
    run = FirmwareRun(outputs, ops, sum(o["instructions"] for o in ops), ticks, status, board,
                      int(rows.group(1)) if rows else None, output_rows=int(taken.group(1)) if taken else None)
    if stack is not None:
        _record_stack(d, manifest, run, *stack)
    return run


def run_use_case(project_dir, inputs, timeout=600.0):
    """Run a use-case project (pyembed.codegen.firmware.usecase: several models one after the other)
    on its QEMU machine; inputs: one entry per model (an array, or a list per graph input). Returns a
    FirmwareRun per model; the stack figures are the project's (the deepest of the models' invokes)."""
    d = Path(project_dir)
    manifest = load_manifest(d)
    models = manifest.get("models")
    if not manifest.get("use_case") or not models:
        raise ArgumentError(f"project_dir: {d} is not a use-case project (firmware.json has no models)")
    if len(inputs) != len(models):
        raise ArgumentError(f"inputs: {len(models)} models, got {len(inputs)} input sets")
    data = b"".join(_input_bytes(m, x) for m, x in zip(models, inputs))
    board = manifest.get("qemu_machine")
    if not board:
        raise FirmwareError(f"profile {manifest['profile']}: no QEMU machine emulates it")
    elf = d / "firmware.elf"
    if not elf.is_file():
        elf = build_project(d)
    try:
        res = qemu.run(elf, board=board, input_bytes=data, timeout=timeout)
    except qemu.QemuError as e:
        raise FirmwareError(str(e)) from None
    runs, pos, stacks = [], 0, []
    for m in models:
        status, outputs, ops, ticks, pos, stack = _parse_record(res.output, pos, m, board, res)
        if status != 0:
            raise FirmwareError(f"model {m['model']}: its invoke returned status {status} (exit code "
                                f"{res.exit_code})")
        runs.append(FirmwareRun(outputs, ops, sum(o["instructions"] for o in ops), ticks, status, board, None))
        if stack is not None:
            stacks.append((runs[-1], stack))
    if res.exit_code != 0:
        raise FirmwareError(f"the firmware exited with code {res.exit_code}")
    for run, stack in stacks:
        _record_stack(d, manifest, run, *stack)    # each model's own peak (raises on an overflow)
    if stacks:
        # the project's: the deepest of the models' invokes
        _update_manifest(d, {"stack_bytes": max(r.stack_bytes for r, _ in stacks),
                             "stack_main_bytes": max(r.stack_main_bytes for r, _ in stacks)})
    return runs


def _parse_record(blob, pos, spec, board, res):
    """One harness record of pe_output.bin at pos ("PEFW", status, table entries, invoke ticks, the
    outputs of spec["outputs"], per entry its ticks, then "PESK" and the stack words when present):
    (status, outputs, operator rows, invoke instructions, position after it, stack words or None)."""
    if len(blob) < pos + 20 or blob[pos:pos + 4] != b"PEFW":
        raise FirmwareError(f"the firmware exited with code {res.exit_code} without writing its results "
                            f"(stdout {res.stdout[-200:]!r}, stderr {res.stderr[-400:]!r})")
    status, nops, tlo, thi = struct.unpack_from("<iIII", blob, pos + 4)
    pos += 20
    outputs = []
    for s in spec["outputs"]:
        n = s["bytes"]
        outputs.append(np.frombuffer(blob[pos:pos + n], dtype=np.dtype(s["dtype"])).reshape(s["shape"]).copy())
        pos += n
    types = {o["table_index"]: o["type"] for o in spec["operators"]}
    ops = []
    for _ in range(nops):
        k, op, lo, hi = struct.unpack_from("<IIII", blob, pos)
        pos += 16
        ops.append({"table_index": k, "index": op, "type": types.get(k, "?"),
                    "instructions": qemu.BOARDS[board].instructions((hi << 32) | lo)})
    stack = None
    if blob[pos:pos + 4] == b"PESK" and len(blob) >= pos + STACK_RECORD_BYTES:
        stack = struct.unpack_from("<III", blob, pos + 4)
        pos += STACK_RECORD_BYTES
    return status, outputs, ops, qemu.BOARDS[board].instructions((thi << 32) | tlo), pos, stack


def _record_stack(d, manifest, run, peak, main_peak, reserved):
    """The harness's stack record (peak of the invoke, of main, the reserve) into run and
    firmware.json; FirmwareError when the stack reached the reserve's lowest word."""
    run.stack_bytes = None if peak == 0xFFFFFFFF else peak
    run.stack_main_bytes = main_peak
    run.stack_reserved = reserved
    if run.stack_bytes is None or main_peak >= reserved:
        raise FirmwareError(f"the firmware's stack reached the lowest word of its {reserved} B reserve (it may "
                            f"have overflowed; stack.ld)")
    run.stack_bound = manifest.get("stack")
    _update_manifest(d, {"stack_bytes": run.stack_bytes, "stack_main_bytes": main_peak})


def _run_uart(d, manifest, elf, board, timeout):
    """run_project for a --io uart project: QEMU with the UART on stdout, its
    text lines parsed (pyembed.codegen.firmware.io.parse_uart_output)."""
    from pyembed.codegen.firmware.io import parse_uart_output
    try:
        res = qemu.run_serial(elf, board=board, timeout=timeout)
        r = parse_uart_output(res.stdout)
    except (qemu.QemuError, ArgumentError) as e:
        raise FirmwareError(str(e)) from None
    if r["fault"]:
        raise FirmwareError(f"the firmware stopped on a {r['fault']} (UART: {res.stdout[-300:]!r})")
    b = qemu.BOARDS[board]
    if r["tick_hz"] != b.systick_hz:
        raise FirmwareError(f"the firmware counts SysTick at {r['tick_hz']} Hz, board {board} at {b.systick_hz} Hz")
    outputs = []
    for k, s in enumerate(manifest["outputs"]):
        if k not in r["outputs"] or len(r["outputs"][k]) != s["bytes"]:
            raise FirmwareError(f"the UART output lacks output {k} ({s['bytes']} B)")
        outputs.append(np.frombuffer(r["outputs"][k], dtype=np.dtype(s["dtype"])).reshape(s["shape"]).copy())
    types = {o["table_index"]: o["type"] for o in manifest["operators"]}
    ops = [{"table_index": k, "index": op, "type": types.get(k, "?"), "instructions": b.instructions(t)}
           for k, op, t in r["ops"]]
    if r["status"] != 0:
        raise FirmwareError(f"the firmware's pe_model_invoke returned status {r['status']}")
    run = FirmwareRun(outputs, ops, sum(o["instructions"] for o in ops), b.instructions(r["invoke_ticks"]),
                      r["status"], board, r["rows_given"], output_rows=r["rows_taken"])
    run.uart_text = res.stdout.decode("latin-1")
    run.uart_instructions = r["instructions"]
    run.uart_clock = r["clock"]   # (pe_clock_status, SYSCLK Hz) on the STM32F405, else None
    if r["stack"] is not None:
        _record_stack(d, manifest, run, *r["stack"])
    return run
