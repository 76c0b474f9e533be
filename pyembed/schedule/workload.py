"""What the scheduler schedules: models with per-layer cost estimates, and the
platform's processing units.

A :class:`Model` wraps a graph (pyembed.model.graph) with the facts the scheduler
needs: its layers in execution order with an estimated cost on every unit,
and for every cut between two layers the tensors that would cross it (the
intermediate outputs a later sub-model needs) and their bytes.

Costs come from one swappable function, :func:`layer_cycles`: it uses the
firmware simulator's cost model (firmware_sim.cost.CostModel, cycles per MAC
and per element per kernel class from the MCU profile) when it is importable
and falls back to overhead + MACs x cycles/MAC from a plain dict otherwise.
"""
import dataclasses
import math

from pyembed.errors import ArgumentError

ALIGNMENT = 16

# Fallback cost model (cycles per MAC and per call per op type) for when
# firmware_sim is not importable; roughly a Cortex-M7 with CMSIS-NN-class kernels.
FALLBACK_COSTS = {
    "default": {"call": 500, "per_mac": 1.5, "per_element": 6},
    "CONV_2D": {"call": 1500, "per_mac": 1.2, "per_element": 5},
    "DEPTHWISE_CONV_2D": {"call": 1500, "per_mac": 2.0, "per_element": 5},
    "FULLY_CONNECTED": {"call": 600, "per_mac": 1.5, "per_element": 5},
    "RESHAPE": {"call": 15, "per_mac": 0.0, "per_element": 0.0},
}


def align(n, a=ALIGNMENT):
    return (int(n) + a - 1) // a * a


@dataclasses.dataclass
class Unit:
    """A processing unit: a CPU core or an accelerator, sharing one clock.

    profile: a firmware_sim profile (or its name) whose cost model prices
    the layers; cost_scale multiplies those cycles (0.25: an accelerator four
    times faster than the profile's core)."""
    name: str
    profile: object = None
    cost_scale: float = 1.0


@dataclasses.dataclass
class Platform:
    """Processing units on one clock, and the memory costs of moving
    intermediates: store/fetch of persistent buffers and hand-over between
    units (DMA between the profile's activation region and itself unless
    regions are given)."""
    name: str
    clock_hz: int
    units: list
    profile: object = None          # the firmware_sim Profile, when there is one
    copy_region: str | None = None  # where persistent buffers live (default: activations region)

    @classmethod
    def from_profile(cls, profile="stm32f746", units=1, cost_scales=None):
        """A platform of `units` identical cores of a firmware_sim profile
        (cost_scales: one factor per unit, e.g. [1.0, 0.25] for a CPU plus an
        accelerator)."""
        from firmware_sim.profiles import load_profile
        prof = load_profile(profile)
        if not isinstance(units, int) or units < 1:
            raise ArgumentError(f"units: expected a positive integer, got {units!r}")
        scales = list(cost_scales) if cost_scales is not None else [1.0] * units
        if len(scales) != units:
            raise ArgumentError(f"cost_scales: expected {units} factors (one per unit), got {len(scales)}")
        us = []
        for k, sc in enumerate(scales):
            if not float(sc) > 0:
                raise ArgumentError(f"cost_scales[{k}]: expected a positive factor, got {sc!r}")
            name = f"{prof.core}#{k}" if units > 1 else prof.core
            if float(sc) != 1.0:
                name = f"accelerator#{k} (x{1 / float(sc):g})"
            us.append(Unit(name, prof, float(sc)))
        return cls(prof.name, int(prof.clock_hz), us, prof)

    def copy_cycles(self, nbytes):
        """Cycles to copy nbytes between the arena and a persistent buffer
        (a DMA transfer the CPU waits for), 0 for nothing."""
        if nbytes <= 0:
            return 0
        if self.profile is not None:
            r = self.copy_region or self.profile.defaults.get("activations")
            return int(self.profile.transfer_cycles(nbytes, r, r))
        return 40 + math.ceil(nbytes / 2)

    def prefetch_cycles(self, tensor_bytes):
        """Planned time of a prefetch: one DMA transfer per tensor of the
        intermediate (persistent buffer -> its place in the working arena),
        one after the other on one channel."""
        return sum(self.copy_cycles(int(n)) for n in tensor_bytes)

    def handover_cycles(self, nbytes, src_unit, dst_unit):
        """Time for an intermediate to move from one unit to another (runs on
        the DMA, after the producer ends and before the consumer may start)."""
        if src_unit == dst_unit or nbytes <= 0:
            return 0
        return self.copy_cycles(nbytes)


def _cost_model(profile):
    try:
        from firmware_sim.cost import CostModel
    except ImportError:  # pragma: no cover - firmware_sim ships with pyembed
        return None
    return CostModel(profile)


def layer_cycles(graph, unit):
    """Estimated cycles of every operator of graph on unit, in execution order.

    The one place the scheduler gets costs from: swap this to change the cost
    model. Uses firmware_sim's cost model with the unit's profile; without a
    profile, FALLBACK_COSTS."""
    prof = unit.profile
    if prof is not None and not hasattr(prof, "kernel_cost"):
        from firmware_sim.profiles import load_profile
        prof = unit.profile = load_profile(prof)
    cm = _cost_model(prof) if prof is not None else None
    out = []
    for op in graph.operators:
        if cm is not None:
            c = cm.op_cost(graph, op).cycles
        else:
            k = FALLBACK_COSTS.get(op.type, FALLBACK_COSTS["default"])
            elements = sum(graph.tensors[t].size for t in op.outputs if t >= 0)
            c = k["call"] + k["per_mac"] * int(op.macs or 0) + k["per_element"] * elements
        out.append(max(1, int(math.ceil(c * unit.cost_scale))))
    return out


@dataclasses.dataclass
class Model:
    """A model to schedule.

    graph: a pyembed.model.graph.Graph (or a path to a model file).
    latency_sensitive: its output is needed every frame (viewfinder, face
        detection, audio): ranks high, gets a priority period.
    feeds: names of models that consume this model's output (a declared
        output dependency: a producer ranks above its consumers, and a
        producer of a priority model is a priority model too).
    priority: "priority" or "low" to force the class; rank: an int to force
        the order (lower first). Both override what is derived.
    rate: low models only: "auto" (the smallest period in windows that its
        sub-models fit), an int period, or "max" (instances back to back,
        soaking up whatever the models before it left).
    units: processing units it may run on (low models: more than one makes
        a pipeline, one stage per unit); default unit 0.
    """
    graph: object
    name: str | None = None
    latency_sensitive: bool = False
    feeds: tuple = ()
    priority: str | None = None
    rank: int | None = None
    rate: object = "auto"
    units: tuple | None = None

    def __post_init__(self):
        if isinstance(self.graph, str):
            from pyembed.model.load import load_model
            self.graph = load_model(self.graph)
        if self.name is None:
            self.name = getattr(self.graph, "name", None) or "model"
        if self.priority not in (None, "priority", "low"):
            raise ArgumentError(f"priority: expected 'priority', 'low' or None, got {self.priority!r}")
        if not (self.rate in ("auto", "max") or (isinstance(self.rate, int) and not isinstance(self.rate, bool)
                                                  and self.rate >= 1)):
            raise ArgumentError(f"rate of model {self.name!r}: expected 'auto', 'max' or a period >= 1 "
                                f"(windows), got {self.rate!r}")
        self.feeds = tuple(self.feeds)
        if self.units is not None:
            self.units = tuple(int(u) for u in self.units)
            if not self.units:
                raise ArgumentError(f"units of model {self.name!r}: expected at least one unit")


class ModelCosts:
    """Per-layer costs and cut facts of one model on a platform."""

    def __init__(self, model, platform):
        g = model.graph
        self.model = model
        self.graph = g
        self.n_ops = len(g.operators)
        if self.n_ops == 0:
            raise ArgumentError(f"model {model.name!r} has no operators")
        self.cycles = [layer_cycles(g, u) for u in platform.units]   # [unit][op]
        self._prefix = [[0] + list(_accumulate(c)) for c in self.cycles]
        self.cut_tensors, self.cut_bytes = _cuts(g)
        self.macs = [int(op.macs or 0) for op in g.operators]
        self.output_bytes = sum(align(g.tensors[t].nbytes) for t in g.outputs)

    def scale(self, factors):
        """Multiply every unit's estimate of operator k by factors[k]."""
        self.cycles = [[max(1, int(math.ceil(c * f))) for c, f in zip(cs, factors)] for cs in self.cycles]
        self._prefix = [[0] + list(_accumulate(c)) for c in self.cycles]

    def range_cycles(self, unit, first, last):
        """Estimated cycles of operators [first, last) on unit."""
        p = self._prefix[unit]
        return p[last] - p[first]

    def total(self, unit):
        return self._prefix[unit][-1]


def _accumulate(xs):
    s = 0
    for x in xs:
        s += x
        yield s


def _cuts(g):
    """For every cut k (before operator k, 0 < k < n): the activation tensors
    written before k (or model inputs) that an operator at or after k reads,
    or that are model outputs, as alias roots (the bytes to keep)."""
    n = len(g.operators)
    produced_at = {t: -1 for t in g.inputs}
    for op in g.operators:
        for t in op.outputs:
            if t >= 0:
                produced_at[t] = op.index
    last_use = {}
    for op in g.operators:
        for t in op.inputs:
            if t >= 0 and not g.tensors[t].is_constant:
                last_use[t] = max(last_use.get(t, -1), op.index)
    for t in g.outputs:
        last_use[t] = n  # read after the last operator
    root = getattr(g, "alias_root", lambda t: t)
    tensors, nbytes = [[] for _ in range(n + 1)], [0] * (n + 1)
    for k in range(1, n):
        roots = {}
        for t, p in produced_at.items():
            if p < k and last_use.get(t, -1) >= k and not g.tensors[t].is_constant:
                r = root(t)
                roots.setdefault(r, []).append(t)
        tensors[k] = sorted(roots)
        nbytes[k] = sum(align(g.tensors[r].nbytes) for r in roots)
    return tensors, nbytes
