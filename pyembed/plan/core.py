"""The planning problem, the plan, and the independent checker.

A *problem* is a list of buffers, each with a size, an alignment and a
lifetime [first, last] in execution steps (inclusive), plus a list of
*overlap allowances*: an operator's output (dst) may start at most
``max_delta`` bytes after its input (src) although both are live at that
operator's step, because the kernel reads each input byte before it writes
output bytes over it. Allowances come from pyembed.plan.overlap, which
derives max_delta from the kernel's read/write order and then proves it by
running the kernel on the overlapped layout.

A *plan* places every buffer at (region, offset). Regions are the target's
RAM areas (e.g. DTCM then SRAM), each with a size; weights and constants go
to flash and are listed separately. ``check_plan`` re-verifies a plan from
scratch (it shares no code with the algorithms): buffers inside their
regions, aligned, and no two buffers with overlapping lifetimes sharing a
byte unless a *proven* allowance covers exactly that pair and offset.
"""
from dataclasses import dataclass, field

from pyembed.errors import PlanError

DEFAULT_ALIGNMENT = 16

# Buffer kinds. Everything but "weights" lives in RAM.
KINDS = ("input", "output", "activation", "scratch", "line_store", "persistent", "variable")


def align_up(n, alignment):
    return (n + alignment - 1) // alignment * alignment


def align_down(n, alignment):
    return n // alignment * alignment


@dataclass
class Region:
    """A RAM area of the target. ``size`` None means unbounded (used
    internally to measure how much a plan is short of). ``speed``: a hashable
    description of the region's access speed (a profile's (read_wait,
    write_wait, bandwidth)); regions with the same speed form one speed class,
    whose bytes the planner minimises in total rather than region by region
    (pyembed.plan.algorithms.placement_key). None: a class of its own."""
    name: str
    size: int | None
    base: int = 0
    kind: str = "ram"
    speed: tuple | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise PlanError(f"region name {self.name!r}: expected a C identifier")
        if self.size is not None and (not isinstance(self.size, int) or self.size < 0):
            raise PlanError(f"region {self.name}: size must be a non-negative integer, got {self.size!r}")
        if self.speed is not None:
            if isinstance(self.speed, list):
                self.speed = tuple(self.speed)
            if not isinstance(self.speed, tuple) or not all(isinstance(v, (int, float)) for v in self.speed):
                raise PlanError(f"region {self.name}: speed must be a tuple of numbers (e.g. read wait, write wait, "
                                f"bandwidth) or None, got {self.speed!r}")


def region_speed(spec):
    """The speed of a firmware_sim profile's region spec as Region.speed:
    (read wait states, write wait states, bandwidth in B/s)."""
    return (spec.read_wait, spec.write_wait, spec.bandwidth)


@dataclass
class Buffer:
    """One RAM buffer to place. ``tensors`` are the graph tensors stored in
    it (an aliased RESHAPE output shares its input's buffer); ``op`` is the
    operator a scratch buffer belongs to."""
    name: str
    size: int
    first: int
    last: int
    kind: str = "activation"
    alignment: int = DEFAULT_ALIGNMENT
    tensors: tuple = ()
    region: str | None = None  # pinned to this region; None: the planner chooses
    op: int | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise PlanError(f"buffer {self.name}: unknown kind {self.kind!r} (expected one of {', '.join(KINDS)})")
        if self.size < 0:
            raise PlanError(f"buffer {self.name}: negative size {self.size}")
        if self.first > self.last:
            raise PlanError(f"buffer {self.name}: first step {self.first} after last step {self.last}")
        if self.alignment <= 0 or self.alignment & (self.alignment - 1):
            raise PlanError(f"buffer {self.name}: alignment {self.alignment} is not a power of two")

    @property
    def aligned_size(self):
        return align_up(self.size, self.alignment)

    def lives_at(self, step):
        return self.first <= step <= self.last


@dataclass(frozen=True)
class Overlap:
    """Allowance: buffer dst may be placed at offset(dst) <= offset(src) +
    max_delta in the same region while both are live, because operator
    ``op`` (at step ``step``) reads src before overwriting it with dst.
    Only a proven allowance is accepted by the checker."""
    src: int
    dst: int
    max_delta: int
    step: int
    op: int | None = None
    proven: bool = False
    evidence: str = ""


class Problem:
    """Buffers with lifetimes and allowed overlaps: the planner's input.

    The small interface of every algorithm::

        p = Problem(num_steps)
        i = p.add_buffer(size, first, last)
        placement = ALGORITHMS["greedy_size"](p, regions)
    """

    def __init__(self, num_steps=None):
        self.buffers: list[Buffer] = []
        self.overlaps: list[Overlap] = []
        self._num_steps = num_steps

    @property
    def num_steps(self):
        if self._num_steps is not None:
            return self._num_steps
        return 1 + max((b.last for b in self.buffers), default=-1)

    def add_buffer(self, size, first, last, name=None, kind="activation", alignment=DEFAULT_ALIGNMENT, **kw):
        if not isinstance(size, int) or not isinstance(first, int) or not isinstance(last, int):
            raise PlanError(f"add_buffer: size, first and last must be integers, got {size!r}, {first!r}, {last!r}")
        if first < 0:
            raise PlanError(f"add_buffer: first step must be >= 0, got {first}")
        name = name or f"buf{len(self.buffers)}"
        self.buffers.append(Buffer(name, size, first, last, kind, alignment, **kw))
        return len(self.buffers) - 1

    def allow_overlap(self, src, dst, max_delta, step, **kw):
        for i in (src, dst):
            if not 0 <= i < len(self.buffers):
                raise PlanError(f"allow_overlap: no buffer {i}")
        self.overlaps.append(Overlap(src, dst, int(max_delta), step, **kw))
        return len(self.overlaps) - 1

    def conflicts(self):
        """Pairs (i, j), i < j, whose lifetimes overlap."""
        order = sorted(range(len(self.buffers)), key=lambda i: self.buffers[i].first)
        out = []
        active = []
        for i in order:
            b = self.buffers[i]
            active = [j for j in active if self.buffers[j].last >= b.first]
            for j in active:
                out.append((min(i, j), max(i, j)))
            active.append(i)
        return sorted(out)

    def neighbours(self):
        nb = [[] for _ in self.buffers]
        for i, j in self.conflicts():
            nb[i].append(j)
            nb[j].append(i)
        return nb

    def allowance(self, proven_only=False):
        """{(src, dst): Overlap} keeping the most permissive per pair."""
        out = {}
        for ov in self.overlaps:
            if proven_only and not ov.proven:
                continue
            key = (ov.src, ov.dst)
            if key not in out or ov.max_delta > out[key].max_delta:
                out[key] = ov
        return out

    def live_bytes(self):
        """Aligned bytes live at each step (the sum, ignoring overlaps)."""
        live = [0] * self.num_steps
        for b in self.buffers:
            for s in range(b.first, b.last + 1):
                live[s] += b.aligned_size
        return live

    def lower_bound(self, with_overlaps=False):
        """Largest sum of simultaneously live buffer sizes over all steps.

        With with_overlaps, each allowed pair live at a step may share up to
        its maximum overlap, and |union| >= sum - sum of pairwise overlaps
        still bounds the arena from below."""
        live = self.live_bytes()
        if with_overlaps:
            for ov in self.allowance(proven_only=True).values():
                a, b = self.buffers[ov.src], self.buffers[ov.dst]
                shared = max_overlap(a.aligned_size, b.aligned_size, ov.max_delta, b.alignment)
                for s in range(max(a.first, b.first), min(a.last, b.last) + 1):
                    live[s] -= shared
        return max(live, default=0)

    def copy(self):
        p = Problem(self._num_steps)
        p.buffers = list(self.buffers)
        p.overlaps = list(self.overlaps)
        return p


def max_overlap(size_src, size_dst, max_delta, alignment=1):
    """Most bytes [delta, delta + size_dst) can share with [0, size_src) for an
    aligned delta <= max_delta."""
    best = 0
    d = align_down(max_delta, alignment)
    if d >= 0:
        # delta = 0 is allowed and maximises sharing
        best = min(size_src, size_dst)
    else:
        best = max(0, min(size_src, size_dst + d))
    return best


@dataclass
class FlashItem:
    """A constant placed in flash: a constant tensor (weights, biases, quantization
    data), or an operator's parameter words (tensor -1)."""
    name: str
    tensor: int
    size: int
    offset: int
    alignment: int = DEFAULT_ALIGNMENT


@dataclass
class Plan:
    """A placed problem: where every buffer lives, plus the execution order
    and the graph it came from (when it came from one)."""
    problem: Problem
    regions: list[Region]
    placement: list[tuple[int, int]]  # per buffer: (region index, offset in region)
    algorithm: str = ""
    order: list[int] = field(default_factory=list)  # operator indices, in execution order
    graph_name: str = ""
    tensor_buffer: dict = field(default_factory=dict)  # tensor index -> buffer index
    flash: list[FlashItem] = field(default_factory=list)
    flash_region: str = "flash"
    info: dict = field(default_factory=dict)  # solve time, algorithm results...

    # -- lookups -----------------------------------------------------------
    @property
    def buffers(self):
        return self.problem.buffers

    def region_of(self, i):
        return self.regions[self.placement[i][0]]

    def offset_of(self, i):
        return self.placement[i][1]

    def tensor_location(self, t):
        """(region name, offset) of graph tensor t, or None for a constant."""
        b = self.tensor_buffer.get(t)
        if b is None:
            return None
        return self.region_of(b).name, self.offset_of(b)

    def tensor_offset(self, t):
        """Arena offset of tensor t (single-region plans; the offset is within
        its region otherwise)."""
        loc = self.tensor_location(t)
        return None if loc is None else loc[1]

    def region_used(self):
        """{region name: bytes used (highest end of a buffer placed in it)}."""
        used = {r.name: 0 for r in self.regions}
        for i, b in enumerate(self.buffers):
            r, off = self.placement[i]
            used[self.regions[r].name] = max(used[self.regions[r].name], off + b.aligned_size)
        return used

    @property
    def arena_size(self):
        """Total RAM bytes over all regions."""
        return sum(self.region_used().values())

    @property
    def lower_bound(self):
        return self.problem.lower_bound()

    @property
    def flash_size(self):
        return max((f.offset + align_up(f.size, f.alignment) for f in self.flash), default=0)

    # -- tables ------------------------------------------------------------
    def step_table(self):
        """For each step: (step, operator, buffers allocated, buffers freed after it, live bytes)."""
        n = self.problem.num_steps
        live = self.problem.live_bytes()
        rows = []
        for s in range(n):
            alloc = [i for i, b in enumerate(self.buffers) if b.first == s]
            freed = [i for i, b in enumerate(self.buffers) if b.last == s]
            op = self.order[s] if s < len(self.order) else None
            rows.append((s, op, alloc, freed, live[s]))
        return rows

    def check(self):
        check_plan(self)
        return self

    def timeline(self, width=64):
        from pyembed.plan.report import timeline
        return timeline(self, width)


def check_plan(plan):
    """Independent checker. Raises PlanError listing every violation:
    buffers outside their region or misaligned, and any two buffers with
    overlapping lifetimes that share a byte without a proven allowance."""
    errors = []
    bufs = plan.problem.buffers
    if len(plan.placement) != len(bufs):
        raise PlanError(f"plan places {len(plan.placement)} buffers but the problem has {len(bufs)}")
    if not plan.regions:
        raise PlanError("plan has no RAM region")
    for i, b in enumerate(bufs):
        r, off = plan.placement[i]
        if not 0 <= r < len(plan.regions):
            errors.append(f"{b.name}: region index {r} does not exist")
            continue
        reg = plan.regions[r]
        if b.region is not None and b.region != reg.name:
            errors.append(f"{b.name}: pinned to region {b.region} but placed in {reg.name}")
        if off < 0 or off % b.alignment:
            errors.append(f"{b.name}: offset {off} is negative or not a multiple of {b.alignment}")
        if reg.size is not None and off + b.size > reg.size:
            errors.append(f"{b.name}: [{off}, {off + b.size}) ends past region {reg.name} ({reg.size} B)")
    # an allowance only covers the one step where src is read for the last
    # time and dst is written for the first time
    allowed = {}
    for ov in plan.problem.overlaps:
        if not (ov.proven and 0 <= ov.src < len(bufs) and 0 <= ov.dst < len(bufs)):
            continue
        if bufs[ov.src].last == ov.step == bufs[ov.dst].first:
            allowed[(ov.src, ov.dst)] = ov
    # every pair live at once, found by a sweep of this checker's own (buffers
    # by first step; not the algorithms' Problem.conflicts), reported in pair order
    by_first = sorted(range(len(bufs)), key=lambda k: (bufs[k].first, k))
    clashes = []
    for pos, k in enumerate(by_first):
        for m in by_first[pos + 1:]:
            if bufs[m].first > bufs[k].last:
                break
            clashes.append((min(k, m), max(k, m)))
    for i, j in sorted(clashes):
        a, b = bufs[i], bufs[j]
        ra, oa = plan.placement[i]
        rb, ob = plan.placement[j]
        if ra != rb or a.last < b.first or b.last < a.first:
            continue
        if oa < ob + b.size and ob < oa + a.size and a.size and b.size:
            ok = False
            for src, dst, osrc, odst in ((i, j, oa, ob), (j, i, ob, oa)):
                ov = allowed.get((src, dst))
                if ov is not None and odst - osrc <= ov.max_delta:
                    ok = True
            if not ok:
                lo, hi = max(oa, ob), min(oa + a.size, ob + b.size)
                both = f"steps {max(a.first, b.first)}..{min(a.last, b.last)}"
                errors.append(f"{a.name} [{oa}, {oa + a.size}) and {b.name} [{ob}, {ob + b.size}) share "
                              f"bytes [{lo}, {hi}) of region {plan.regions[ra].name} while both are live ({both})")
    if errors:
        shown = errors[:20]
        more = f"\n  ... and {len(errors) - 20} more" if len(errors) > 20 else ""
        raise PlanError("invalid memory plan:\n  " + "\n  ".join(shown) + more)
