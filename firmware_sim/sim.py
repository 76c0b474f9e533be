"""Running a planned graph on a simulated MCU.

    from firmware_sim import simulate
    r = simulate(graph, plan, "stm32f446", x)
    r.outputs, r.cycles, r.latency_ms, r.peak_bytes, r.op_times
    r.write_trace("run.json"); r.plot_memory("ram.png"); r.plot_gantt("gantt.png")

What happens, in order:

1. The plan (pyembed.plan) is mapped onto the profile's regions: each RAM
   buffer gets (region, offset); a plan that does not fit a region, or weights
   that do not fit flash, is a PlanError before anything runs.
2. Flash is programmed with the constant tensors at the plan's flash offsets
   (with segmented execution: the external flash holds one packed image per
   segment, and RAM holds one block allocated up front after the arena).
3. The graph is compiled for the C graph runtime (pe_graph_invoke_op) with
   its constant tensors pointing into simulated flash (or the block) and its
   arena being the simulated RAM, so the real kernels read and write the
   simulated bytes.
4. The firmware runs as a process on the event core: each operator's kernel
   runs on the memory, the write watch checks it stayed inside its outputs and
   scratch (and left flash alone), and the clock advances by the cost model's
   cycles; DMA loads run concurrently when segmented.
5. Outputs are read back from their planned RAM buffers.

A fault (bad access, stray write, late DMA, kernel error) stops the run with a
SimulationFault carrying ``.trace`` (the timeline up to the fault) and
``.cycle``.
"""
import copy
import dataclasses
import math

import numpy as np

from firmware_sim.core import Environment
from firmware_sim.cost import CostModel
from firmware_sim.dma import DmaEngine
from firmware_sim.memory import Buffer, Memory, WriteWatch, fault
from firmware_sim.profiles import load_profile
from firmware_sim.segments import (SegmentPlan, SegmentRunner, chain, graph_layers, is_partial, piece_cycles,
                                   pieces, plan_segments)
from firmware_sim.trace import Trace
from pyembed.errors import FitError, PlanError, PyEmbedError, SimulationFault

ALIGN = 16


def _align(n, a=ALIGN):
    return (int(n) + a - 1) // a * a


@dataclasses.dataclass
class OpTime:
    step: int
    op: int
    type: str
    start: int            # cycle
    cycles: int
    kernel_class: str
    macs: int
    segment: int | None = None


@dataclasses.dataclass
class Result:
    outputs: list
    cycles: int
    latency_ms: float
    peak_bytes: dict              # region -> most bytes in use at once (measured while running)
    region_used: dict             # region -> highest planned byte (static footprint)
    flash_bytes: dict             # region -> bytes of constants programmed
    op_times: list
    trace: Trace
    profile: object
    strategy: str = "resident"    # resident | all | serial | overlap
    segments: SegmentPlan | None = None
    dma_bytes: int = 0
    split_work_bytes: int = 0     # temporaries of split operators' partial pieces (after the block)
    contention_cycles: int = 0    # CPU cycles lost to DMA bus contention (included in cycles)
    origin: dict | None = None    # the graph's imported operator numbers per operator (Graph.origin)

    def write_trace(self, path):
        """Chrome / Perfetto trace-event JSON of the run."""
        return self.trace.write(path)

    def plot_memory(self, path, title=None):
        return self.trace.plot_memory(path, "ram", title)

    def plot_gantt(self, path, title=None):
        return self.trace.plot_gantt(path, title)

    def compute_cycles(self):
        return sum(o.cycles for o in self.op_times)

    def to_dict(self):
        """JSON-ready figures of the run (what ``pyembed simulate --json`` prints)."""
        p = self.profile
        d = {"model": self.trace.name, "profile": p.name, "part": p.part, "core": p.core, "clock_hz": p.clock_hz,
             "strategy": self.strategy, "cycles": self.cycles, "latency_ms": self.latency_ms,
             "peak_bytes": dict(self.peak_bytes), "region_used": dict(self.region_used),
             "flash_bytes": dict(self.flash_bytes), "dma_bytes": self.dma_bytes,
             "split_work_bytes": self.split_work_bytes, "contention_cycles": self.contention_cycles,
             "outputs": [o.tolist() for o in self.outputs],
             "ops": [dict(dataclasses.asdict(o), imported=list((self.origin or {}).get(o.op, (o.op,))))
                     for o in self.op_times]}
        if self.segments is not None:
            d["segments"] = self.segments.to_dict()["segments"]
            d["segment_block_bytes"] = self.segments.block_bytes
        return d

    def op_table(self):
        """Per-operator start, cycles and share of the run, as text."""
        ms = self.profile.cycles_to_ms
        from pyembed.model.graph import origin_label
        lines = [f"{'step':>4} {'op':>4} {'imported':>8} {'type':<20} {'class':<9} {'start ms':>9} {'cycles':>10} "
                 f"{'ms':>8} {'MACs':>10} {'share':>6}"]
        total = max(1, self.compute_cycles())
        for o in self.op_times:
            lines.append(f"{o.step:>4} {o.op:>4} {origin_label(self.origin, o.op):>8} {o.type:<20} "
                         f"{o.kernel_class:<9} {ms(o.start):>9.3f} {o.cycles:>10} {ms(o.cycles):>8.3f} {o.macs:>10} "
                         f"{100 * o.cycles / total:>5.1f}%")
        return "\n".join(lines)

    def summary(self):
        p = self.profile
        lines = [f"{self.trace.name} on {p.name} ({p.core} {p.clock_hz / 1e6:g} MHz), {self.strategy}: "
                 f"{self.cycles} cycles = {self.latency_ms:.3f} ms"]
        for r, b in self.peak_bytes.items():
            lines.append(f"  {r:<10} peak {b:>8} B in use, {self.region_used.get(r, 0):>8} B planned "
                         f"of {p.regions[r].size}")
        for r, b in self.flash_bytes.items():
            lines.append(f"  {r:<10} {b:>8} B of constants")
        if self.segments is not None:
            lines.append(f"  {len(self.segments.segments)} segments ({self.segments.split_layers} layers split by "
                         f"output channels, {self.split_work_bytes} B work buffer), {self.dma_bytes} B moved by DMA, "
                         f"{self.contention_cycles} cycles lost to bus contention")
        return "\n".join(lines)


# --- the plan on the profile -----------------------------------------------------------

class Placement:
    """Where every tensor and scratch buffer of one graph lives on one profile."""

    def __init__(self, profile):
        self.profile = profile
        self.tensor = {}          # tensor index -> Buffer (RAM or flash)
        self.scratch = {}         # op index -> Buffer
        self.buffers = []         # every RAM Buffer (with first/last steps in .life)
        self.life = {}            # Buffer name -> (first step, last step)
        self.order = []
        self.flash = []           # flash Buffers
        self.flash_extent = (None, 0)   # (weights region, bytes of the constants image, parameter words included)

    def region_used(self):
        used = {}
        for b in self.buffers:
            used[b.region] = max(used.get(b.region, 0), _align(b.end))
        return used


def _region_map(plan, profile, region_map):
    names = [r.name for r in plan.regions]
    mapping = dict(region_map or {})
    for n in names:
        if n in mapping:
            continue
        if n in profile.regions and not profile.regions[n].is_flash:
            mapping[n] = n
        elif len(names) == 1:
            mapping[n] = profile.defaults["activations"]
        else:
            raise PlanError(f"plan region {n!r} is not a RAM region of profile {profile.name} "
                            f"(RAM regions: {', '.join(r.name for r in profile.ram_regions())}); "
                            f"pass region_map={{'{n}': '<region>'}}")
    return mapping


def block_region_for(plan, profile, region_map, budget_bytes):
    """The RAM region for a segment block of up to budget_bytes: the profile's
    activation region when the block fits there after the arena, else the
    fastest RAM region (fewest wait cycles) with room for it, else the one with
    the most room left after the plan."""
    used = {}
    mapping = _region_map(plan, profile, region_map)
    for name, nbytes in plan.region_used().items():
        used[mapping.get(name, name)] = used.get(mapping.get(name, name), 0) + int(nbytes)
    free = {r.name: r.size - _align(used.get(r.name, 0)) for r in profile.ram_regions()}
    act = profile.defaults["activations"]
    if free.get(act, 0) >= budget_bytes:
        return act
    room = [n for n in free if free[n] >= budget_bytes]
    if room:
        return min(room, key=lambda n: (profile.regions[n].read_wait + profile.regions[n].write_wait, -free[n]))
    return max(free, key=lambda n: (free[n], n == act))


def place_plan(graph, plan, profile, region_map=None, weights_region=None):
    """Map a pyembed.plan Plan onto the profile: a Placement, or a PlanError
    naming what does not fit."""
    pl = Placement(profile)
    mapping = _region_map(plan, profile, region_map)
    problems = []
    for i, b in enumerate(plan.buffers):
        r_idx, off = plan.placement[i]
        rname = mapping[plan.regions[r_idx].name]
        if rname not in profile.regions:
            problems.append(f"buffer {b.name}: region {rname!r} does not exist on {profile.name}")
            continue
        spec = profile.regions[rname]
        if spec.is_flash:
            problems.append(f"buffer {b.name}: region {rname} is flash, activations need RAM")
            continue
        buf = Buffer(b.name, rname, int(off), int(b.size), b.kind, b.tensors[0] if b.tensors else None)
        if buf.end > spec.size:
            problems.append(f"buffer {b.name} [{off}, {buf.end}) does not fit region {rname} ({spec.size} B)")
        pl.buffers.append(buf)
        pl.life[buf.name] = (int(b.first), int(b.last))
        for t in b.tensors:
            pl.tensor[t] = buf
        if b.kind == "scratch" and b.op is not None:
            pl.scratch[int(b.op)] = buf
    for rname, used in pl.region_used().items():
        size = profile.regions[rname].size
        if used > size:
            problems.append(f"region {rname}: the plan needs {used} B, {profile.name} has {size} B")
    if problems:
        region_lines = [q for q in problems if q.startswith("region ")]
        buffer_lines = [q for q in problems if not q.startswith("region ")]
        shown = region_lines + buffer_lines[:8]
        more = len(buffer_lines) - 8
        raise FitError(f"the plan does not fit {profile.name}:\n  " + "\n  ".join(shown)
                        + (f"\n  ... and {more} more buffer(s)" if more > 0 else ""))
    pl.order = list(plan.order) if plan.order else list(range(len(graph.operators)))
    # constants: at the plan's flash offsets, in the weights region
    wreg = weights_region or profile.defaults["weights"]
    spec = profile.region(wreg)
    items = list(getattr(plan, "flash", []) or [])
    if not items:
        off = 0
        for t, tensor in enumerate(graph.tensors):
            if tensor.data is not None:
                items.append(type("Item", (), {"tensor": t, "offset": off, "size": tensor.nbytes,
                                               "name": f"t{t}"})())
                off += _align(tensor.nbytes)
    end = 0
    for it in items:
        if int(it.tensor) < 0:
            # an operator's parameter words (pyembed.plan): flash space, no tensor
            end = max(end, int(it.offset) + int(it.size))
            continue
        buf = Buffer(f"const {it.name}", wreg, int(it.offset), int(graph.tensors[it.tensor].nbytes), "weights",
                     int(it.tensor))
        pl.tensor[int(it.tensor)] = buf
        pl.flash.append(buf)
        end = max(end, buf.end)
    # the constants' extent: the plan's flash image (parameter words included) when it has one
    pl.flash_extent = (wreg, max(_align(end), int(plan.flash_size) if getattr(plan, "flash", None) else 0))
    if end > spec.size:
        raise FitError(f"the model does not fit flash: its constants need {end} B, region {wreg} of "
                        f"{profile.name} has {spec.size} B")
    for t, tensor in enumerate(graph.tensors):
        if tensor.data is not None and t not in pl.tensor:
            raise PlanError(f"the plan has no flash location for constant tensor {t} ({tensor.name!r})")
    return pl


def default_plan(graph, profile, algorithm="greedy_size"):
    """A plan for the profile's activations region (the planner's fast greedy
    algorithm unless told otherwise), and the region map it needs."""
    from pyembed.plan import Region, plan_graph
    name = profile.defaults["activations"]
    ident = name if name.isidentifier() else "ram"
    plan = plan_graph(graph, [Region(ident, profile.regions[name].size)], algorithm=algorithm)
    return plan, ({ident: name} if ident != name else None)


# --- segments of a graph ----------------------------------------------------------------------

def model_layers(graph, profile, block_region=None, order=None, split_bytes=None, model=None):
    """The segmentation layers of a graph (firmware_sim.segments.graph_layers):
    one per operator (or per output-channel group with split_bytes), in
    ``order``, costed by the profile's cost model with the weights in
    block_region (default: the activation region). model: the name the
    "models" cut rule knows the layers by (default: the graph's name)."""
    block_region = block_region or profile.defaults["activations"]
    cm = CostModel(profile)
    ops = [graph.operators[i] for i in (order or range(len(graph.operators)))]

    def locate(t):
        return block_region if graph.tensors[t].data is not None else None
    g = graph
    if order is not None and list(order) != list(range(len(graph.operators))):
        g = copy.copy(graph)
        g.operators = ops
    return graph_layers(g, lambda op: cm.op_cost(graph, op, locate).cycles, model=model, split_bytes=split_bytes,
                        cost_model=cm, locate=locate)


def divide_layers(layers, profile, budget_bytes, criteria=("latency",), block_region=None, source_region=None,
                  prefetch=True):
    """firmware_sim.segments.plan_segments over layers (one model's, or several
    chained with segments.chain), the loads costed from source_region into
    block_region; the plan records both regions and the clock."""
    block_region = block_region or profile.defaults["activations"]
    source_region = source_region or profile.defaults.get("segment_source") or profile.flash_region
    plan = plan_segments(layers, budget_bytes, lambda nb: profile.transfer_cycles(nb, source_region, block_region),
                         criteria, prefetch)
    plan.source_region, plan.block_region, plan.clock_hz = source_region, block_region, profile.clock_hz
    return plan


def segment_graph(graph, profile, budget_bytes, criteria=("latency",), block_region=None, source_region=None,
                  prefetch=True, order=None, split_bytes=None):
    """Divide a graph's operators into segments for ``budget_bytes`` of RAM (the block).
    Layer costs are the cost model's, with the weights in the block region. With
    prefetch the whole budget may hold more than two segments in flight (see
    firmware_sim.segments.plan_segments); without, the block is at most the two
    largest neighbouring segments. With split_bytes, convolution / depthwise / FC
    weights larger than that are cut into output-channel groups the division may
    separate (firmware_sim.split)."""
    layers = model_layers(graph, profile, block_region, order, split_bytes)
    return divide_layers(layers, profile, budget_bytes, criteria, block_region, source_region, prefetch)


def segment_chain(graphs, profile, budget_bytes, criteria=("latency",), block_region=None, source_region=None,
                  prefetch=True, orders=None, split_bytes=None):
    """Several models run one after the other as one use case, their weights
    through one block: the layers of each (model_layers, in orders[k]) chained
    (segments.chain, tensor ids kept apart) and divided with the "models" hard
    rule added to criteria (a cut at every model boundary, no segment spans two
    models). A model's layers are named by its graph name (with its position
    when a name repeats). Returns the SegmentPlan."""
    layers = chained_layers(graphs, profile, block_region, orders, split_bytes)
    return divide_layers(layers, profile, budget_bytes, use_case_criteria(criteria), block_region, source_region,
                         prefetch)


def chained_layers(graphs, profile, block_region=None, orders=None, split_bytes=None):
    """The layers of several models run one after the other, as one list
    (model_layers of each, in orders[k], chained by segments.chain); a model's
    layers carry its graph name (with its position when a name repeats), which
    the "models" cut rule separates."""
    names = [g.name for g in graphs]
    lists = []
    for k, g in enumerate(graphs):
        name = g.name if names.count(g.name) == 1 else f"{g.name}#{k}"
        lists.append(model_layers(g, profile, block_region, (orders or [None] * len(graphs))[k], split_bytes,
                                  model=name))
    return chain(*lists)


def use_case_criteria(criteria):
    """criteria (a tuple of names or a {name: weight} dict) with the "models"
    hard rule added: a cut at every model boundary of chained layers."""
    if isinstance(criteria, dict):
        return dict(criteria, models=1.0)
    return tuple(dict.fromkeys(tuple(criteria) + ("models",)))


# --- the simulation ------------------------------------------------------------------------------

def simulate(graph, plan=None, profile="stm32f446", x=None, *, segments=None, strategy="overlap",
             region_map=None, bandwidth_scale=1.0, late="fault", check_writes=True, cost_scale=1.0,
             on_programmed=None, contention=True, verify_flash=False):
    """Run ``graph`` planned by ``plan`` on ``profile`` with input ``x``.

    x: an array (a list per graph input) in the graph's tensor shapes -- NHWC
      for an ONNX model, as pyembed.model.graph.random_inputs and
      pyembed.check.accuracy.load_inputs make them; outputs likewise.

    plan: a pyembed.plan Plan (None: planned here for the profile's activation
      region). Its region names must be profile RAM regions, or a single region
      (mapped to the activation region), or mapped with region_map.
    segments: None (all weights resident in flash, read in place), or a
      SegmentPlan / a byte budget: weights are loaded from external flash into a
      block of that many bytes with ``strategy`` "overlap", "serial" or "all".
    bandwidth_scale < 1 injects a DMA slower than the profile declares; late
      ("fault" or "stall") says what the watchdog does about it.
    on_programmed(memory, placement): called once flash is programmed, before the
      firmware starts (fault injection, inspection).
    contention: kernels run slower while DMA transfers share the bus (the profile's
      dma.cpu_stall_per_word; see firmware_sim.dma); False for the uncontended model.
    verify_flash: the firmware checks its flash image at boot (cycle 0), after
      on_programmed: a byte that differs from what was programmed (a flipped
      bit) is a SimulationFault naming the address and the buffer. Off by
      default so on_programmed may deliberately reprogram weights.
    """
    profile = load_profile(profile)
    graph.check_supported()
    if plan is None:
        plan, auto_map = default_plan(graph, profile)
        region_map = region_map or auto_map
    pl = place_plan(graph, plan, profile, region_map)
    xs = graph._inputs_list(x, "internal")   # x as random_inputs / load_inputs make it (graph tensor shapes)
    mem = Memory(profile)
    mem.buffers = list(pl.buffers) + list(pl.flash)
    trace = Trace(profile.clock_hz, graph.name)
    env = Environment()
    cm = CostModel(profile, cost_scale)

    seg_plan, block, work = None, None, None
    split_pieces, extra_tensors, extra_ops = {}, [], []
    if segments is not None:
        seg_plan, block, seg_offsets = _setup_segments(graph, pl, profile, mem, segments, strategy)
        split_pieces, extra_tensors, extra_ops, work = _setup_pieces(graph, pl, mem, seg_plan, block, seg_offsets)
    else:
        for buf in pl.flash:
            mem.program(buf.region, buf.offset, np.ascontiguousarray(graph.tensors[buf.tensor].data))

    # the arena: one pointer from the first RAM region used to the end of the last
    ram_bufs = list(pl.buffers) + [b for b in (block, work) if b is not None]
    regions_used = sorted({b.region for b in ram_bufs}, key=lambda n: mem.regions[n].host_offset)
    start = mem.regions[regions_used[0]].host_offset
    stop = max(mem.regions[b.region].host_offset + b.end for b in ram_bufs)
    arena = mem.host[start:stop]

    def arena_offset(buf):
        return mem.regions[buf.region].host_offset + buf.offset - start

    rt = _compile(graph, pl, mem, arena_offset, len(arena), seg_plan, block, extra_tensors, extra_ops)
    for j, piece in enumerate(split_pieces.values()):
        piece.run_step = len(pl.order) + j

    if on_programmed is not None:
        on_programmed(mem, pl)
    if verify_flash:
        try:
            mem.verify_programmed(cycle=env.now)
        except SimulationFault as e:
            e.trace = trace
            trace.instant("fault", "cpu", env.now, message=str(e)[:200])
            raise
    mem.lock()
    for k, (t, v) in enumerate(zip(graph.inputs, xs)):
        if graph.tensors[t].streamed:
            # a camera-style input: not in RAM; the stripe region reading it
            # pulls its rows (pe_row_source) into a one-row buffer in its scratch
            rt.set_input(None, k, v)
            continue
        mem.buffer_view(pl.tensor[t])[:v.nbytes] = np.ascontiguousarray(v).reshape(-1).view(np.uint8)
    for t, tensor in enumerate(graph.tensors):
        # variable tensors (recurrent states) start as TFLM resets them: an
        # int8 one at its zero point, others at 0 (GraphRuntime.reset_variables)
        if tensor.is_variable and tensor.data is None and t in pl.tensor:
            zp = int(tensor.zero_point[0]) if (tensor.dtype == np.int8 and tensor.zero_point is not None
                                                and len(tensor.zero_point)) else 0
            mem.buffer_view(pl.tensor[t])[:tensor.nbytes] = \
                np.full(tensor.size, zp, dtype=tensor.dtype).view(np.uint8)
    watch = WriteWatch(mem, regions_used) if check_writes else None
    op_times = []
    usage = _Usage(trace, pl, block)

    def locate(t):
        if block is not None and graph.tensors[t].data is not None:
            return block.region
        b = pl.tensor.get(t)
        return b.region if b is not None else None

    def run_step(step, segment=None):
        op = graph.operators[pl.order[step]]
        cost = cm.op_cost(graph, op, locate)
        usage.begin(step, env.now)
        allowed = [pl.tensor[t] for t in op.outputs if t >= 0 and t in pl.tensor]
        allowed += [pl.tensor[t] for t in op.inputs if t >= 0 and graph.tensors[t].is_variable and t in pl.tensor]
        if op.index in pl.scratch:
            allowed.append(pl.scratch[op.index])
        if watch is not None:
            watch.before()
        name = f"#{op.index} {op.type}"
        try:
            rt.invoke_op(step, arena)
        except SimulationFault:
            raise
        except PyEmbedError as e:
            raise fault(f"operator {name} failed at cycle {env.now}: {e}", operator=name, cycle=env.now) from e
        if watch is not None:
            watch.after(name, allowed, env.now)
        t0 = env.now
        yield from dma.compute(cost.cycles)          # stretched while DMA transfers contend for the bus
        trace.span(name, "cpu", t0, env.now, cat="kernel", op=op.index, macs=cost.macs,
                   kernel_class=cost.kernel_class, segment=segment)
        op_times.append(OpTime(step, op.index, op.type, t0, env.now - t0, cost.kernel_class, cost.macs, segment))
        usage.end(step, env.now)

    def tensor_view(t, tensors):
        buf = pl.tensor.get(t) or pl.tensor[graph.alias_root(t)]
        tensor = tensors[t]
        return mem.view(buf.region, buf.offset, tensor.nbytes, tensor.dtype, tensor.shape)

    every_tensor = list(graph.tensors) + list(extra_tensors)

    def run_piece(piece):
        """A partial piece of a split operator: gather (depthwise), the kernel over the
        channel slice, copy of the slice into the strided output channels."""
        op, sub, info = piece.op, piece.sub, piece.info
        layers = seg_plan.layers
        if layers[piece.first].part == 0:
            usage.begin(piece.step, env.now)
        out = op.outputs[0]
        allowed = [pl.tensor.get(out) or pl.tensor[graph.alias_root(out)]]
        allowed += [b for b in (work, pl.scratch.get(sub.index), pl.scratch.get(op.index)) if b is not None]
        name = f"#{op.index} {op.type}[{piece.c0}:{piece.c1}]"
        if watch is not None:
            watch.before()
        if info["gathered_in"] is not None:
            m = int(op.params.get("depth_multiplier", 1))
            src = tensor_view(op.inputs[0], every_tensor)
            tensor_view(info["gathered_in"], every_tensor)[...] = src[..., piece.c0 // m:piece.c1 // m]
        try:
            rt.invoke_op(piece.run_step, arena)
        except SimulationFault:
            raise
        except PyEmbedError as e:
            raise fault(f"operator {name} failed at cycle {env.now}: {e}", operator=name, cycle=env.now) from e
        if not info["contiguous"]:
            tensor_view(out, every_tensor)[..., piece.c0:piece.c1] = tensor_view(info["out"], every_tensor)
        if watch is not None:
            watch.after(name, allowed, env.now)
        cycles = int(math.ceil(piece.cycles * cm.scale))
        t0 = env.now
        yield from dma.compute(cycles)
        kclass = cm.op_cost(graph, op, locate).kernel_class
        trace.span(name, "cpu", t0, env.now, cat="kernel", op=op.index, macs=sub.macs, kernel_class=kclass,
                   segment=piece.segment, channels=f"{piece.c0}:{piece.c1}")
        op_times.append(OpTime(piece.step, op.index, op.type, t0, env.now - t0, kclass, sub.macs, piece.segment))
        if layers[piece.last].part == layers[piece.last].parts - 1:
            usage.end(piece.step, env.now)

    dma = DmaEngine(env, profile, mem, trace, bandwidth_scale, late, contention=contention)
    if seg_plan is None:
        def firmware():
            step = 0      # inlined IF / WHILE: the steps the run takes (pe_graph_next), each charged
            while step < len(pl.order):
                yield from run_step(step)
                step = rt.next_step(step, arena)
        done = env.process(firmware(), "firmware")
        runner = None
    else:
        def compute(segment, _runner):
            layers = seg_plan.layers
            for f, z in pieces(layers, segment.first, segment.last):
                piece = split_pieces.get((segment.index, f))
                if piece is not None:
                    yield from run_piece(piece)
                else:
                    yield from run_step(layers[f].ops[0] if layers[f].ops else f, segment.index)
        runner = SegmentRunner(env, dma, seg_plan, (seg_plan.source_region, 0), (block.region, block.offset),
                               compute, strategy, trace, usage.block)
        done = runner.run()
    try:
        env.run(until=done)
    except SimulationFault as e:
        e.trace = trace
        e.cycle = env.now
        trace.instant("fault", "cpu", env.now, message=str(e)[:200])
        raise
    finally:
        mem.unlock()
    outputs = []
    for t in graph.outputs:
        tensor = graph.tensors[t]
        if tensor.streamed:
            # a display-style output: not in RAM; the stripe region writing it
            # handed its rows (pe_row_sink) out of a one-row buffer in its scratch
            outputs.append(rt.tensor_value(None, t))
            continue
        v = mem.view(pl.tensor[t].region, pl.tensor[t].offset, tensor.nbytes, tensor.dtype, tensor.shape)
        outputs.append(v.copy())
    flash_bytes = {}
    for b in pl.flash if seg_plan is None else []:
        flash_bytes[b.region] = max(flash_bytes.get(b.region, 0), _align(b.end))
    if seg_plan is None and pl.flash:
        wreg, extent = pl.flash_extent
        flash_bytes[wreg] = max(flash_bytes.get(wreg, 0), extent)
    if seg_plan is not None:
        flash_bytes[seg_plan.source_region] = sum(_align(s.nbytes) for s in seg_plan.segments)
    used = pl.region_used()
    for b in (block, work):
        if b is not None:
            used[b.region] = max(used.get(b.region, 0), _align(b.end))
    return Result(outputs=outputs, cycles=env.now, latency_ms=profile.cycles_to_ms(env.now),
                  peak_bytes=usage.peak, region_used=used, flash_bytes=flash_bytes, op_times=op_times,
                  trace=trace, profile=profile, strategy=strategy if seg_plan is not None else "resident",
                  segments=seg_plan, dma_bytes=dma.bytes_moved, split_work_bytes=work.nbytes if work else 0,
                  contention_cycles=dma.stolen_cycles, origin=getattr(graph, "origin", None))


class _Usage:
    """Bytes in use per RAM region over time: a buffer is allocated when the step that
    first uses it starts and freed when the step that last uses it ends."""

    def __init__(self, trace, pl, block):
        self.trace = trace
        self.pl = pl
        self.block_buf = block
        self.live = {}          # region -> {buffer name: (offset, end)}
        self.now = {}
        self.peak = {}
        self.block_in_use = 0
        for b in pl.buffers:
            self.live.setdefault(b.region, {})
            self.now.setdefault(b.region, 0)
            self.peak.setdefault(b.region, 0)
        if block is not None:
            self.live.setdefault(block.region, {})
            self.now.setdefault(block.region, 0)
            self.peak.setdefault(block.region, 0)

    @staticmethod
    def _union(intervals):
        # bytes covered by the live buffers: a proven output-over-input overlap
        # shares bytes, and those bytes count once
        total, reach = 0, None
        for lo, hi in sorted(intervals):
            if reach is None or lo >= reach:
                total += hi - lo
                reach = hi
            elif hi > reach:
                total += hi - reach
                reach = hi
        return total

    def _emit(self, time):
        for r, bufs in self.live.items():
            self.now[r] = self._union(bufs.values())
        series = dict(self.now)
        if self.block_buf is not None:
            r = self.block_buf.region
            series[r] -= self.block_in_use
            series[f"{r} (segment block)"] = self.block_in_use
        for r, v in self.now.items():
            self.peak[r] = max(self.peak[r], v)
        self.trace.counter("ram", time, **series)

    def begin(self, step, time):
        for b in self.pl.buffers:
            if self.pl.life[b.name][0] == step:
                self.live[b.region][b.name] = (b.offset, b.offset + b.nbytes)
        self._emit(time)

    def end(self, step, time):
        for b in self.pl.buffers:
            if self.pl.life[b.name][1] == step:
                self.live[b.region].pop(b.name, None)
        self._emit(time)

    def block(self, time, in_use):
        blk = self.block_buf
        self.block_in_use = in_use
        if in_use:
            self.live[blk.region]["\0segment block"] = (blk.offset, blk.offset + in_use)
        else:
            self.live[blk.region].pop("\0segment block", None)
        self._emit(time)


def _setup_segments(graph, pl, profile, mem, segments, strategy):
    from firmware_sim import split
    from pyembed.model.ops.ctrlflow import refuse_segments
    refuse_segments(graph, segments)
    if isinstance(segments, SegmentPlan):
        seg_plan = segments
        if not seg_plan.source_region:
            seg_plan.source_region = profile.defaults.get("segment_source") or profile.flash_region
        if not seg_plan.block_region:
            seg_plan.block_region = profile.defaults["activations"]
    else:
        seg_plan = segment_graph(graph, profile, int(segments), order=pl.order)
    n_ops = sum(1 for la in seg_plan.layers if la.part == 0)
    if n_ops != len(pl.order):
        raise PlanError(f"segment plan has {n_ops} layers, the graph has {len(pl.order)} operators")
    src = seg_plan.source_region
    if src not in profile.regions or not profile.regions[src].is_flash:
        raise PlanError(f"segment source {src!r} is not a flash region of {profile.name}")
    # one packed image per segment in the source flash; a channel slice is packed contiguously
    owner, slices = {}, {}
    for s in seg_plan.segments:
        for entry in s.tensors:
            t, off, nb = entry[:3]
            if not 0 <= t < len(graph.tensors) or graph.tensors[t].data is None:
                raise PlanError(f"segment {s.index} lists tensor {t}, which is not a constant of {graph.name}")
            if len(entry) > 3:
                c0, c1, axis = entry[3:6]
                data = split.slice_data(graph.tensors[t].data, c0, c1, axis)
                slices.setdefault(t, []).append((c0, c1, s.index))
            else:
                if t in owner:
                    raise PlanError(f"constant tensor {t} is used by segments {owner[t]} and {s.index}: "
                                    f"shared constants across segments are not supported")
                owner[t] = s.index
                data = np.ascontiguousarray(graph.tensors[t].data)
            if data.nbytes != nb:
                raise PlanError(f"segment {s.index}: tensor {t} entry says {nb} B, the data is {data.nbytes} B")
            mem.program(src, s.source_offset + off, data)
    for t, runs in slices.items():
        runs.sort()
        axis_len = None
        for e in (e for s in seg_plan.segments for e in s.tensors if e[0] == t and len(e) > 3):
            axis_len = int(graph.tensors[t].shape[e[5]])
        ends = [0] + [c1 for _c0, c1, _k in runs]
        if t in owner or [c0 for c0, _c1, _k in runs] != ends[:-1] or ends[-1] != axis_len:
            raise PlanError(f"constant tensor {t}: its channel slices {[(a, b) for a, b, _ in runs]} do not "
                            f"cover its {axis_len} channels exactly once")
    missing = [t for t, tensor in enumerate(graph.tensors) if tensor.data is not None and t not in owner
               and t not in slices and any(t in graph.operators[i].inputs for i in pl.order)]
    if missing:
        raise PlanError(f"segment plan does not load constant tensor(s) {missing}")
    image_end = max((s.source_offset + s.nbytes for s in seg_plan.segments), default=0)
    if image_end > profile.regions[src].size:
        raise PlanError(f"the segment image needs {image_end} B of {src}, which has {profile.regions[src].size} B")
    # the block: allocated once, after the arena in its region
    runner_probe = SegmentRunner.__new__(SegmentRunner)
    runner_probe.plan, runner_probe.strategy = seg_plan, strategy
    offsets, _ = SegmentRunner._layout(runner_probe)
    size = _align(max(o + s.nbytes for o, s in zip(offsets, seg_plan.segments)))
    region = seg_plan.block_region
    if region not in profile.regions or profile.regions[region].is_flash:
        raise PlanError(f"segment block region {region!r} is not a RAM region of {profile.name}")
    base = _align(pl.region_used().get(region, 0))
    if base + size > profile.regions[region].size:
        raise FitError(f"the segment block ({size} B for strategy {strategy!r}) does not fit region {region} "
                        f"after the {base} B arena: {profile.regions[region].size} B available")
    block = Buffer("segment block", region, base, size, "segment")
    mem.buffers.append(block)
    # where each constant is while its segment runs
    for s in seg_plan.segments:
        for entry in s.tensors:
            t, off, nb = entry[:3]
            if len(entry) == 3:
                pl.tensor[t] = Buffer(f"const t{t} (segment {s.index})", region, base + offsets[s.index] + off,
                                      nb, "weights", t)
    return seg_plan, block, offsets


class _Piece:
    """One kernel call over a channel slice of a split operator (a partial piece)."""

    def __init__(self, segment, first, last, step, op, sub, info, cycles):
        self.segment, self.first, self.last, self.step = segment, first, last, step
        self.op, self.sub, self.info, self.cycles = op, sub, info, cycles
        self.c0, self.c1 = info["c0"], info["c1"]
        self.run_step = None          # step of the sub-operator in the compiled table


def _setup_pieces(graph, pl, mem, seg_plan, block, offsets):
    """Sub-operators for the partial pieces of split operators, their constants in the
    block, and one work buffer (after the block) for the slice temporaries and any
    scratch a sub-operator needs beyond its operator's planned scratch.
    Returns (pieces by (segment, first layer), extra tensors, extra operators, work Buffer)."""
    from firmware_sim import split
    layers = seg_plan.layers
    extra_t, extra_ops, found = [], [], {}
    layout = []        # (piece, [(tensor or ("scratch", op), nbytes)]) placed in the work buffer
    for s in seg_plan.segments:
        for f, z in pieces(layers, s.first, s.last):
            if not is_partial(layers, f, z):
                continue
            step = layers[f].ops[0] if layers[f].ops else f
            op = graph.operators[pl.order[step]]
            c0, c1 = layers[f].channels[0], layers[z].channels[1]
            tens, sub, info = split.sub_operator(graph, op, c0, c1, len(graph.operators) + len(extra_ops),
                                                 len(graph.tensors) + len(extra_t))
            info.update(c0=c0, c1=c1)
            extra_t.extend(tens)
            extra_ops.append(sub)
            piece = _Piece(s.index, f, z, step, op, sub, info, piece_cycles(layers, f, z))
            found[(s.index, f)] = piece
            # constants: the slice entries of this segment's image
            for t_orig, t_new in ((op.inputs[1], info["weights"]), (op.inputs[2] if len(op.inputs) > 2 else -1,
                                                                    info["bias"])):
                if t_new is None:
                    continue
                entry = next((e for e in s.tensors if e[0] == t_orig and len(e) > 3 and e[3] == c0), None)
                if entry is None:
                    raise PlanError(f"segment {s.index} does not load channels [{c0}, {c1}) of tensor {t_orig}")
                pl.tensor[t_new] = Buffer(f"const t{t_orig}[{c0}:{c1}] (segment {s.index})", block.region,
                                          block.offset + offsets[s.index] + entry[1], entry[2], "weights", t_new)
            need = []
            if not info["contiguous"]:
                need.append((info["out"], extra_t[info["out"] - len(graph.tensors)].nbytes))
            if info["gathered_in"] is not None:
                need.append((info["gathered_in"], extra_t[info["gathered_in"] - len(graph.tensors)].nbytes))
            if sub.scratch_bytes > 0 and not (op.index in pl.scratch and sub.scratch_bytes <= op.scratch_bytes):
                need.append((("scratch", sub.index), sub.scratch_bytes))
            elif sub.scratch_bytes > 0:
                pl.scratch[sub.index] = pl.scratch[op.index]
            layout.append((piece, need))
    work_size = max((sum(_align(nb) for _k, nb in need) for _p, need in layout), default=0)
    work = None
    if work_size:
        region = block.region
        base = _align(block.end)
        if base + work_size > mem.regions[region].size:
            raise FitError(f"the split-layer work buffer ({work_size} B) does not fit region {region} after "
                            f"the segment block (ends at {block.end} B of {mem.regions[region].size})")
        work = Buffer("split work", region, base, work_size, "scratch")
        mem.buffers.append(work)
    for piece, need in layout:
        off = 0
        for key, nb in need:
            buf = Buffer(f"split work {key}", work.region, work.offset + off, nb, "scratch")
            if isinstance(key, tuple):
                pl.scratch[key[1]] = buf
            else:
                pl.tensor[key] = buf
            off += _align(nb)
        info = piece.info
        if info["contiguous"]:
            y = pl.tensor.get(piece.op.outputs[0]) or pl.tensor[graph.alias_root(piece.op.outputs[0])]
            item = graph.tensors[piece.op.outputs[0]].dtype.itemsize
            pl.tensor[info["out"]] = Buffer(f"{y.name}[{piece.c0}:{piece.c1}]", y.region, y.offset + piece.c0 * item,
                                            (piece.c1 - piece.c0) * item, y.role)
    return found, extra_t, extra_ops, work


def _compile(graph, pl, mem, arena_offset, arena_size, seg_plan, block, extra_tensors=(), extra_ops=()):
    """The C runtime's tables with constants pointing into simulated memory and
    activations at their planned arena offsets. Sub-operators of split layers
    (extra_ops, over extra_tensors) follow the graph's operators in the table."""
    from pyembed.model.graph import Layout
    g = copy.copy(graph)
    g.tensors = list(graph.tensors) + list(extra_tensors)
    g.operators = list(graph.operators) + list(extra_ops)
    graph = g
    g._runtime_cache = {}
    for t, tensor in enumerate(graph.tensors):
        if tensor.data is None or t not in pl.tensor:
            continue
        buf = pl.tensor[t]
        view = mem.view(buf.region, buf.offset, tensor.nbytes, tensor.data.dtype, tensor.data.shape,
                        f"constant {t}")
        g.tensors[t] = dataclasses.replace(tensor, data=view)
    offsets = {}
    for t in graph.activation_tensors():
        root = graph.alias_root(t)
        buf = pl.tensor.get(t) or pl.tensor.get(root)
        if buf is None:
            raise PlanError(f"the plan does not place tensor {t} ({graph.tensors[t].name!r})")
        offsets[t] = arena_offset(buf)
    scratch = {i: arena_offset(b) for i, b in pl.scratch.items()}
    for op in graph.operators:
        if op.scratch_bytes > 0 and op.index not in scratch:
            raise PlanError(f"the plan has no scratch buffer for operator {op.index} ({op.type}, "
                            f"{op.scratch_bytes} B)")
    layout = Layout(arena_size, offsets, scratch, list(pl.order) + [op.index for op in extra_ops], "firmware_sim")
    return g.compile(layout=layout)


def simulate_file(model, profile="stm32f446", plan=None, x=None, *, segments=None, strategy="overlap",
                  criteria=("latency",), seed=0, trace_path=None, memory_png=None, gantt_png=None, split_bytes=None,
                  **kw):
    """What the CLI runs: load a model file, plan it (or load plan.json), make an input
    (seeded random int8 unless given), simulate, write the requested trace and plots.

    model: path to .tflite/.onnx (or a Graph); plan: None, a Plan, or a plan.json path;
    segments: None, a byte budget, a SegmentPlan or a segments.json path; with None, a
      SegmentPlan dict stored in plan.info["segments"] is used.
    split_bytes: with a byte budget, cut conv / depthwise / FC weights larger than this
      into output-channel groups the division may separate (firmware_sim.split).
    Returns (Result, reference outputs from graph.run, bit_exact: bool)."""
    from pyembed.model.load import load_model
    profile = load_profile(profile)
    graph = model if hasattr(model, "operators") else load_model(model)
    if isinstance(plan, str):
        from pyembed.plan import load_plan
        plan = load_plan(plan)
    region_map = kw.pop("region_map", None)
    if plan is None:
        plan, region_map = default_plan(graph, profile)
    stored = getattr(plan, "info", {}).get("segments") if segments is None else None
    if isinstance(stored, dict):          # segment metadata precomputed and stored with the plan
        segments = SegmentPlan.from_dict(stored)
    if isinstance(segments, str):
        segments = SegmentPlan.from_json(segments)
    elif segments is not None and not isinstance(segments, SegmentPlan):
        segments = segment_graph(graph, profile, int(segments), criteria, order=list(plan.order) or None,
                                 split_bytes=split_bytes,
                                 block_region=block_region_for(plan, profile, region_map, int(segments)))
    if x is None:
        from pyembed.model.graph import random_inputs
        xs = random_inputs(graph, 1, seed)[0]
        x = xs[0] if len(xs) == 1 else xs
    result = simulate(graph, plan, profile, x, segments=segments, strategy=strategy, region_map=region_map, **kw)
    ref = graph.run(x, plan=None, layout="internal")
    exact = all(np.array_equal(a, b) for a, b in zip(result.outputs, ref))
    if trace_path:
        result.write_trace(trace_path)
    if memory_png:
        result.plot_memory(memory_png)
    if gantt_png:
        result.plot_gantt(gantt_png)
    return result, ref, exact
