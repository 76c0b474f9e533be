"""The result types of schedule planning: the pieces of each model, the
ordering constraints, persistent buffers, and the Schedule (the static
table for the C dispatcher, pe_sched.h, with its memory plan and figures).
pyembed.schedule.plan builds them."""
import dataclasses

from pyembed.errors import ArgumentError, PlanError
from pyembed.schedule.workload import Platform

PRIORITY, LOW = 0, 1
FLAG_FIRST, FLAG_LAST, FLAG_CARRY, FLAG_PREFETCH = 1, 2, 4, 8


class ScheduleError(PlanError):
    """The models cannot be scheduled as asked (the message says which model,
    on which unit, and by how much)."""


@dataclasses.dataclass
class Piece:
    """One entry of the table: a priority model's run, or one sub-model
    (operators [first_op, last_op)) of one instance of a low model."""
    model: int
    kind: int
    unit: int
    phase: int          # planned window of the table (0 .. hyper-1)
    instance: int       # instance slot, -1 for priority
    sub: int
    first_op: int
    last_op: int
    compute: int        # cycles of its layers
    fetch: int = 0      # cycles to fetch its inputs from persistent buffers
    store: int = 0      # cycles to store its outputs for the next group
    flags: int = 0
    seq: int = 0        # placement order (orders pieces within a window)
    deadline: int = 0
    prefetch_cycles: int = 0   # FLAG_PREFETCH: the DMA copy of its inputs, off the CPU

    @property
    def prefetch(self):
        return bool(self.flags & FLAG_PREFETCH)

    @property
    def est(self):
        """Cycles on its unit: a prefetched group does not wait for its fetch."""
        return self.compute + (0 if self.prefetch else self.fetch) + self.store

    @property
    def carry(self):
        """1 when it works on the instance started in the previous table period."""
        return 1 if self.flags & FLAG_CARRY else 0


@dataclasses.dataclass
class After:
    item: int           # constrained item (index in table order)
    on: int             # item it waits for
    offset: int         # 1: same instance, 0: previous one
    handover: int = 0
    why: str = ""


@dataclasses.dataclass
class PersistentBuffer:
    name: str
    model: int
    instance: int
    cut: int            # operator index the consumer starts with
    tensors: list
    size: int
    producer: int       # item index
    consumer: int
    first_step: int
    last_step: int
    wraps: bool
    offset: int = 0


@dataclasses.dataclass
class ModelPlan:
    name: str
    kind: int
    rank: int
    units: tuple
    estimate: dict              # unit -> whole-model cycles
    period: int | None = None   # windows between instance starts (low, not "max")
    rate: object = None
    instances: int = 0          # per table period
    groups: list = dataclasses.field(default_factory=list)  # (first_op, last_op) of instance 0
    # a background model whose unit was chosen for it: {other unit: its whole instances there, per table},
    # run in what the other models leave on that unit (plan_schedule's fill step)
    fills: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Schedule:
    platform: Platform
    models: list            # Model
    costs: list             # ModelCosts
    model_plans: list       # ModelPlan
    window_cycles: int
    tick_cycles: int
    guard_cycles: int
    fill: float
    hyper_windows: int
    n_instances: int
    items: list             # Piece, in table order
    after: list             # After
    buffers: list           # PersistentBuffer
    persistent_bytes: int
    persistent_bytes_unshared: int
    priority_cycles: list   # per unit: reserved priority period
    remaining_cycles: list  # per unit: window - priority - guard
    problems: list          # faults found while planning (strict=False)
    split: str = "fit"
    memory: dict = dataclasses.field(default_factory=dict)
    overrun_tolerance: float = 0.02   # share over the estimate that is not yet an overrun
    max_lag: int = 0                  # windows a low item may slip before its instance is dropped
    options: dict = dataclasses.field(default_factory=dict)   # plan_schedule's arguments (for replan)
    notes: list = dataclasses.field(default_factory=list)      # warnings that are not faults (an idle unit)

    @property
    def prefetch_units(self):
        """Units with prefetched items (their priority and low models get disjoint arenas)."""
        return sorted({p.unit for p in self.items if p.prefetch})

    def arena_blocks(self):
        """The working arenas the schedule needs: [(unit, kinds)] where kinds
        is (PRIORITY, LOW) for one arena shared by every model of the unit, or
        (PRIORITY,) and (LOW,) for the two disjoint arenas of a unit whose low
        items are prefetched while its priority work runs."""
        out = []
        split = set(self.prefetch_units)
        for u in range(self.n_units):
            kinds = sorted({p.kind for p in self.items if p.unit == u})
            if not kinds:
                continue
            if u in split:
                out += [(u, (k,)) for k in kinds]
            else:
                out.append((u, tuple(kinds)))
        return out

    def arena_block(self, item):
        """Index in arena_blocks() of the arena item (a Piece) works in."""
        for k, (u, kinds) in enumerate(self.arena_blocks()):
            if u == item.unit and item.kind in kinds:
                return k
        raise ArgumentError(f"no arena for an item on unit {item.unit}")

    @property
    def overrun_tolerance_q16(self):
        return int(round(self.overrun_tolerance * 65536))

    @property
    def n_units(self):
        return len(self.platform.units)

    @property
    def window_ms(self):
        return self.window_cycles * 1e3 / self.platform.clock_hz

    def ms(self, cycles):
        return cycles * 1e3 / self.platform.clock_hz

    def model_index(self, name):
        for i, m in enumerate(self.models):
            if m.name == name:
                return i
        raise ArgumentError(f"no model named {name!r}; models: {', '.join(m.name for m in self.models)}")

    def planned_utilisation(self):
        """Planned low-priority work / remaining periods, over the table."""
        low = sum(p.est for p in self.items if p.kind == LOW)
        rem = sum(max(0, r) for r in self.remaining_cycles) * self.hyper_windows
        return low / rem if rem else 0.0

    def describe(self):
        lines = [f"schedule on {self.platform.name} ({self.n_units} unit(s), {self.platform.clock_hz / 1e6:g} MHz): "
                 f"window {self.window_ms:g} ms = {self.window_cycles} cycles, tick {self.tick_cycles}, "
                 f"table of {self.hyper_windows} window(s), {len(self.items)} items"]
        for u in range(self.n_units):
            lines.append(f"  unit {u} ({self.platform.units[u].name}): priority period "
                         f"{self.ms(self.priority_cycles[u]):.2f} ms, remaining {self.ms(self.remaining_cycles[u]):.2f} ms")
        for mp in self.model_plans:
            cls = "priority" if mp.kind == PRIORITY else "low"
            est = ", ".join(f"unit {u}: {self.ms(c):.2f} ms" for u, c in mp.estimate.items())
            line = f"  #{mp.rank} {mp.name:<28} {cls:<8} unit {'+'.join(str(u) for u in mp.units)}, est {est}"
            if mp.kind == LOW:
                per = "back to back" if mp.rate == "max" else f"every {mp.period} window(s)"
                line += f"; {len(mp.groups)} sub-model(s), {mp.instances} run(s) per table ({per})"
                if mp.fills:
                    line += "; " + ", ".join(f"{n} of them on unit {u}, in its leftover"
                                             for u, n in sorted(mp.fills.items()))
            lines.append(line)
        lines.append(f"  persistent buffers: {len(self.buffers)}, {self.persistent_bytes} B planned "
                     f"({self.persistent_bytes_unshared} B without sharing)")
        lines.append(f"  planned utilisation of the remaining periods: {100 * self.planned_utilisation():.1f} %")
        for p in self.problems:
            lines.append(f"  PROBLEM: {p}")
        for n in self.notes:
            lines.append(f"  note: {n}")
        return "\n".join(lines)
