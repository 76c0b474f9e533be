"""Segmented execution from flash (SPEC section 6, seed 002).

When a graph's weights do not fit the RAM set aside for them (the *block*), the
layers (operators, in execution order) are divided into consecutive
*segments* so that every two neighbouring segments fit the block together.
Segment 1 is loaded from (external) flash; then segment k runs while the DMA
loads segment k+1 into the space segment k-1 used — a sliding window, with
more than two segments in flight whenever the block has room for them.

A layer is one operator, or -- when its weights are large -- one output-channel
group of a CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED operator
(``graph_layers(split_bytes=...)``, firmware_sim.split), so a cut may fall
inside an operator. The groups of one operator that land in one segment run as
one kernel call (a *piece*); a piece missing some groups pays its copies
(``piece_cycles``), and the per-call cycles are paid once per piece.

Division (``divide``) is a dynamic programme over cut positions whose state is
the last segment (first layer, last layer); a segment's cycles and bytes come
in O(1) from prefix sums (``_Compute``, ``_Sizes``). Its objective combines,
with weights, any of these criteria:

* ``latency`` — the analytic pipeline time T = L1 + sum_k max(C_k, L_k+1) + C_n
  (L: load cycles, C: compute cycles), which decomposes over neighbouring pairs
  of segments, so the DP minimises it exactly;
* ``carry`` — activation bytes carried across each cut (what a cut forces the
  runtime to keep between segments);
* ``balance`` — total deviation of segment sizes from the mean (solved for each
  segment count, keeping the best);
* ``models`` — a hard rule: cut at every transition between chained models and
  never let a segment span two models.

Placement (``place``) puts each segment at an offset of the block and records
the segment whose compute must finish before its load may start (``wait_for``):
"compact" alternates neighbours between the two ends of a block of the largest
neighbouring pair (any pair that fits together overlaps; RAM is at most the two
largest segments); "ring" uses the whole budget as a FIFO ring so the DMA runs
as many segments ahead as fit -- which pays off when the weights come late and
the compute early, as in MobileNets. ``plan_segments`` searches a few segment
size caps and both placements for the fastest pipeline. One block is allocated
up front; nothing is allocated while running.

``SegmentRunner`` executes a plan on the event core with three strategies:
``all`` (load every segment, then run), ``serial`` (load a segment, run it,
load the next) and ``overlap`` (the pipeline above). Kernels that run while a
transfer writes RAM are slowed by bus contention (firmware_sim.dma), which the
analytic bound leaves out; ``contention=False`` reproduces the bound's model. The plan serialises to
JSON so it can be computed ahead of time and stored with the memory plan.
"""
import dataclasses
import json
import math

import numpy as np

from pyembed.errors import FitError, PlanError

ALIGN = 16
CRITERIA = ("latency", "carry", "balance", "models")
STRATEGIES = ("all", "serial", "overlap")


def _align(n, a=ALIGN):
    return (n + a - 1) // a * a


@dataclasses.dataclass
class Layer:
    """One unit of division: one operator with its constant tensors, or one
    output-channel group of an operator whose weights are split (part k of
    ``parts``; the groups of one operator are consecutive layers)."""
    name: str
    weight_bytes: int              # bytes this layer needs resident (aligned tensors)
    compute_cycles: int            # cycles to run it with its weights in RAM (a group: its share)
    model: str = ""                # which model of a chained use case it belongs to
    carry_bytes: int = 0           # activation bytes live across the boundary after it
    ops: tuple = ()                # graph operator indices (of the step order)
    tensors: tuple = ()            # (tensor, nbytes) of the constants it reads, or for a channel
                                   # group (tensor, nbytes, c0, c1, axis): a slice of one
    part: int = 0                  # channel group index within its operator
    parts: int = 1                 # channel groups of the operator (1: not split)
    channels: tuple = ()           # (c0, c1): this group's output channels
    call_cycles: int = 0           # split operator: cycles per kernel call (once per piece)
    split_cycles: int = 0          # extra cycles of this group when its piece is partial (copies)
    split_call_cycles: int = 0     # extra cycles per partial piece (copy calls)
    work_bytes: int = 0            # temporary bytes of this group when its piece is partial


@dataclasses.dataclass
class Segment:
    index: int
    first: int                     # first layer (inclusive)
    last: int                      # last layer (inclusive)
    nbytes: int                    # bytes loaded (aligned tensors, shared ones once per segment)
    compute_cycles: int
    load_cycles: int               # declared DMA time from the source region
    carry_bytes: int               # activations live across the cut after this segment
    models: tuple = ()
    offset: int = 0                # in the block (overlap strategy)
    wait_for: int = -1             # segment whose compute must end before this one loads
    source_offset: int = 0         # in the source (flash) image
    tensors: tuple = ()            # (tensor index, offset inside the segment, nbytes)


@dataclasses.dataclass
class SegmentPlan:
    block_bytes: int               # the block the runtime allocates up front (overlap strategy)
    budget_bytes: int              # what the caller allowed
    segments: list
    layers: list
    criteria: dict                 # criterion -> weight
    source_region: str = ""
    block_region: str = ""
    clock_hz: int = 0
    placement: str = "compact"     # compact (two in flight) | ring (as many as fit)

    # --- figures ----------------------------------------------------------------
    @property
    def loads(self):
        return [s.load_cycles for s in self.segments]

    @property
    def computes(self):
        return [s.compute_cycles for s in self.segments]

    def bound(self):
        """Analytic pipeline time T = L1 + sum max(C_k, L_k+1) + C_n (cycles)."""
        return pipeline_bound(self.loads, self.computes)

    def serial_cycles(self):
        return sum(self.loads) + sum(self.computes)

    @property
    def total_bytes(self):
        return sum(s.nbytes for s in self.segments)

    def two_largest(self):
        sizes = sorted((s.nbytes for s in self.segments), reverse=True)
        return sum(sizes[:2])

    def work_bytes(self):
        """Temporary bytes the partial pieces of split operators need (the largest)."""
        return max((piece_work_bytes(self.layers, f, z) for s in self.segments
                    for f, z in pieces(self.layers, s.first, s.last)), default=0)

    @property
    def split_layers(self):
        return sum(1 for la in self.layers if la.parts > 1 and la.part == 0)

    def max_pair(self):
        sizes = [s.nbytes for s in self.segments]
        return max((a + b for a, b in zip(sizes, sizes[1:])), default=sum(sizes))

    def block_for(self, strategy):
        if strategy == "all":
            return self.total_bytes
        if strategy == "serial":
            return max(s.nbytes for s in self.segments)
        return self.block_bytes

    def summary(self):
        rows = [f"{len(self.segments)} segments in a {self.block_bytes} B block (budget {self.budget_bytes} B); "
                f"criteria {self.criteria}"]
        for s in self.segments:
            rows.append(f"  seg {s.index}: layers {s.first}..{s.last} {s.nbytes:>7} B at +{s.offset:<7} "
                        f"L={s.load_cycles} C={s.compute_cycles} carry={s.carry_bytes} wait_for={s.wait_for}")
        return "\n".join(rows)

    # --- storage ------------------------------------------------------------------
    def to_dict(self):
        return {"version": 1, "block_bytes": self.block_bytes, "budget_bytes": self.budget_bytes,
                "criteria": self.criteria, "source_region": self.source_region,
                "block_region": self.block_region, "clock_hz": self.clock_hz, "placement": self.placement,
                "layers": [dataclasses.asdict(la) for la in self.layers],
                "segments": [dataclasses.asdict(s) for s in self.segments]}

    def to_json(self, path=None):
        text = json.dumps(self.to_dict(), indent=1)
        if path is not None:
            with open(path, "w") as f:
                f.write(text)
        return text

    @classmethod
    def from_dict(cls, d):
        if d.get("version") != 1:
            raise PlanError(f"segment plan: unsupported version {d.get('version')!r}")
        try:
            layers = [Layer(**{**la, "ops": tuple(la.get("ops", ())), "channels": tuple(la.get("channels", ())),
                               "tensors": tuple(tuple(t) for t in la.get("tensors", ()))}) for la in d["layers"]]
            segs = [Segment(**{**s, "models": tuple(s.get("models", ())),
                               "tensors": tuple(tuple(t) for t in s.get("tensors", ()))}) for s in d["segments"]]
            plan = cls(block_bytes=d["block_bytes"], budget_bytes=d["budget_bytes"], segments=segs, layers=layers,
                       criteria=d["criteria"], source_region=d.get("source_region", ""),
                       block_region=d.get("block_region", ""), clock_hz=d.get("clock_hz", 0),
                       placement=d.get("placement", "compact"))
        except (KeyError, TypeError) as e:
            raise PlanError(f"segment plan: malformed ({e})") from None
        plan.validate()
        return plan

    @classmethod
    def from_json(cls, text_or_path):
        text = text_or_path
        if not text_or_path.lstrip().startswith("{"):
            with open(text_or_path) as f:
                text = f.read()
        return cls.from_dict(json.loads(text))

    def validate(self):
        """Every layer in exactly one segment, in order; every segment inside the block;
        no segment loads over bytes a segment that may still run is using."""
        nxt = 0
        for k, s in enumerate(self.segments):
            if s.index != k or s.first != nxt or s.last < s.first:
                raise PlanError(f"segment plan: segment {k} covers layers {s.first}..{s.last}, expected to start at {nxt}")
            nxt = s.last + 1
            if s.nbytes > self.block_bytes or s.offset < 0 or s.offset + s.nbytes > self.block_bytes:
                raise PlanError(f"segment plan: segment {k} ({s.nbytes} B at +{s.offset}) does not fit the "
                                f"{self.block_bytes} B block")
            if not -1 <= s.wait_for < k:
                raise PlanError(f"segment plan: segment {k} waits for segment {s.wait_for}")
            for j in range(max(s.wait_for + 1, 0), k):
                o = self.segments[j]
                if o.offset < s.offset + s.nbytes and s.offset < o.offset + o.nbytes and o.nbytes and s.nbytes:
                    raise PlanError(f"segment plan: segment {k} [{s.offset}, {s.offset + s.nbytes}) would load over "
                                    f"segment {j} [{o.offset}, {o.offset + o.nbytes}) before it has run "
                                    f"(wait_for={s.wait_for})")
        if nxt != len(self.layers):
            raise PlanError(f"segment plan: segments cover {nxt} of {len(self.layers)} layers")
        return self


def pieces(layers, a, b):
    """The kernel calls of layers a..b: maximal runs (first, last) of layers of one
    operator. A run of a split operator that misses some of its groups is *partial*."""
    out = []
    i = a
    while i <= b:
        la = layers[i]
        end = min(b, i + (la.parts - 1 - la.part))
        out.append((i, end))
        i = end + 1
    return out


def is_partial(layers, first, last):
    la, lz = layers[first], layers[last]
    return la.parts > 1 and (la.part > 0 or lz.part < lz.parts - 1)


def piece_cycles(layers, first, last):
    """Cycles of one kernel call over layers first..last (one operator): its groups'
    shares, the per-call cycles, and the copies when the piece is partial."""
    c = sum(la.compute_cycles for la in layers[first:last + 1]) + layers[first].call_cycles
    if is_partial(layers, first, last):
        c += layers[first].split_call_cycles + sum(la.split_cycles for la in layers[first:last + 1])
    return c


def span_cycles(layers, a, b):
    """Compute cycles of a segment over layers a..b (the sum of its pieces)."""
    return sum(piece_cycles(layers, f, z) for f, z in pieces(layers, a, b))


def piece_work_bytes(layers, first, last):
    """Temporary bytes a partial piece needs (0 for a whole operator)."""
    if not is_partial(layers, first, last):
        return 0
    return sum(la.work_bytes for la in layers[first:last + 1])


class _Compute:
    """span_cycles(a, b) in O(1) from prefix sums: only the first and the last
    operator of a span can be partial."""

    def __init__(self, layers):
        self.layers = layers
        n = len(layers)
        self.lin = [0] * (n + 1)
        self.split = [0] * (n + 1)
        self.calls = [0] * (n + 1)      # call cycles of the operators starting at each layer
        for i, la in enumerate(layers):
            self.lin[i + 1] = self.lin[i] + int(la.compute_cycles)
            self.split[i + 1] = self.split[i] + int(la.split_cycles)
            self.calls[i + 1] = self.calls[i] + (int(la.call_cycles) if la.part == 0 else 0)

    def __call__(self, a, b):
        L = self.layers
        la, lz = L[a], L[b]
        start_a, end_a = a - la.part, a - la.part + la.parts - 1
        start_b, end_b = b - lz.part, b - lz.part + lz.parts - 1
        c = self.lin[b + 1] - self.lin[a]
        c += self.calls[b + 1] - self.calls[a + 1] + la.call_cycles
        if start_a == start_b:                       # one operator
            if la.parts > 1 and (start_a < a or end_a > b):
                c += la.split_call_cycles + self.split[b + 1] - self.split[a]
            return c
        if start_a < a:                               # first operator cut at its start
            c += la.split_call_cycles + self.split[end_a + 1] - self.split[a]
        if end_b > b:                                 # last operator cut at its end
            c += lz.split_call_cycles + self.split[b + 1] - self.split[start_b]
        return c


def pipeline_bound(loads, computes):
    """T = L1 + sum_{k<n} max(C_k, L_{k+1}) + C_n."""
    if not loads:
        return 0
    t = loads[0]
    for k in range(len(loads) - 1):
        t += max(computes[k], loads[k + 1])
    return t + computes[-1]


# --- division -------------------------------------------------------------------

def _criteria_weights(criteria):
    if isinstance(criteria, str):
        criteria = [c.strip() for c in criteria.split(",") if c.strip()]
    if isinstance(criteria, dict):
        weights = {k: float(v) for k, v in criteria.items()}
    else:
        weights = {c: 1.0 for c in criteria}
    for c, w in weights.items():
        if c not in CRITERIA:
            raise PlanError(f"unknown segmentation criterion {c!r}; choose from {', '.join(CRITERIA)}")
        if not (w >= 0 and math.isfinite(w)):
            raise PlanError(f"criterion {c}: weight must be a finite number >= 0, got {w!r}")
    if not any(w > 0 for c, w in weights.items() if c != "models"):
        weights["latency"] = weights.get("latency", 0.0) or 1.0
    return weights


class _Sizes:
    """Bytes of the union of constant tensors of layers a..b (a tensor read by several
    layers of one segment is loaded once; consecutive channel slices of one tensor
    are one packed run). Rows are extended incrementally: size(a, b) for b = a, a+1, ...
    costs O(1) each."""

    def __init__(self, layers):
        self.layers = layers
        self._rows = {}      # a -> [sizes for b = a..], running {tensor: bytes}, running total

    def __call__(self, a, b):
        row = self._rows.get(a)
        if row is None:
            row = self._rows[a] = [[], {}, 0]
        sizes = row[0]
        while len(sizes) <= b - a:
            la = self.layers[a + len(sizes)]
            cur, total = row[1], row[2]
            if not la.tensors:
                total += la.weight_bytes
            for entry in la.tensors:
                t, nb = entry[0], entry[1]
                if len(entry) > 2:                 # a channel slice: runs of one tensor merge
                    old = cur.get(t, 0)
                    total += _align(old + nb) - _align(old)
                    cur[t] = old + nb
                elif t not in cur:
                    cur[t] = nb
                    total += _align(nb)
            row[2] = total
            sizes.append(total)
        return sizes[b - a]


def divide(layers, budget_bytes, load_cycles, criteria=("latency",), min_segments=1, max_segments=None):
    """Cut ``layers`` into segments whose neighbouring pairs fit ``budget_bytes``.

    load_cycles(nbytes) -> declared DMA cycles for one segment of that size.
    Returns a placed SegmentPlan (see ``place``). Raises PlanError when no division
    exists (a single layer, or two neighbours that cannot be split, exceed the block).
    """
    weights = _criteria_weights(criteria)
    n = len(layers)
    if n == 0:
        raise PlanError("divide: no layers")
    _lc = load_cycles

    def load_cycles(nbytes):   # a segment without weights needs no transfer at all
        return _lc(nbytes) if nbytes > 0 else 0
    budget = int(budget_bytes)
    size = _Sizes(layers)
    for i, la in enumerate(layers):
        if size(i, i) > budget:
            raise FitError(f"segment larger than the block: layer {i} ({la.name}) alone needs "
                            f"{size(i, i)} B of weights, the block is {budget} B")
    models = [la.model for la in layers]
    align_models = weights.get("models", 0) > 0
    C = _Compute(layers)
    total_cycles = sum(load_cycles(size(i, i)) for i in range(n)) + C(0, n - 1)
    carry_ref = max((la.carry_bytes for la in layers[:-1]), default=0) or 1
    total_bytes = size(0, n - 1)

    # candidate segments: [a, b] within the budget and (with models) inside one model
    spans = {}
    for a in range(n):
        for b in range(a, n):
            if size(a, b) > budget:
                break
            if align_models and models[b] != models[a]:
                break
            spans.setdefault(b, []).append(a)

    w_lat = weights.get("latency", 0)
    lc_cache = {}

    def lc(nbytes):
        v = lc_cache.get(nbytes)
        if v is None:
            v = lc_cache[nbytes] = load_cycles(nbytes)
        return v

    def solve(target):
        """DP over (a, b) = last segment; value = (cost, count, parent). The predecessors
        of a segment starting at a are the segments ending at a - 1, held as arrays."""
        best = {}
        ends = {}        # e -> (starts, costs, sizes, computes) of the solved segments ending at e
        for b in range(n):
            starts, costs, sizes, comps = [], [], [], []
            for a in spans.get(b, []):
                s = size(a, b)
                # a tiny tie-breaker: among equally good divisions prefer smaller segments (less RAM)
                seg_cost = 1e-6 * (s / budget) ** 2
                if target:
                    seg_cost += weights.get("balance", 0) * abs(s - target) / total_bytes
                if b + 1 < n:
                    seg_cost += weights.get("carry", 0) * layers[b].carry_bytes / carry_ref
                if a == 0:
                    best[(a, b)] = (w_lat * lc(s) / total_cycles + seg_cost, 1, None)
                else:
                    prev = ends.get(a - 1)
                    if prev is None:
                        continue
                    p_start, p_cost, p_size, p_comp = prev
                    ok = p_size + s <= budget
                    if not ok.any():
                        continue
                    vals = p_cost + w_lat * np.maximum(p_comp, lc(s)) / total_cycles + seg_cost
                    vals = np.where(ok, vals, np.inf)
                    j = int(np.argmin(vals))
                    p = int(p_start[j])
                    best[(a, b)] = (float(vals[j]), best[(p, a - 1)][1] + 1, (p, a - 1))
                starts.append(a)
                costs.append(best[(a, b)][0])
                sizes.append(s)
                comps.append(C(a, b))
            if starts:
                ends[b] = (np.array(starts), np.array(costs), np.array(sizes), np.array(comps, dtype=float))
        finals = []
        for a in spans.get(n - 1, []):
            v = best.get((a, n - 1))
            if v is None:
                continue
            if not (min_segments <= v[1] <= (max_segments or n)):
                continue
            lat = weights.get("latency", 0) * C(a, n - 1) / total_cycles
            finals.append((v[0] + lat, v[1], a))
        if not finals:
            return None
        cost, count, a = min(finals)
        cuts = []
        key = (a, n - 1)
        while key is not None:
            cuts.append(key)
            key = best[key][2]
        cuts.reverse()
        return cost, cuts

    # with a balance criterion the mean depends on the count: solve per count
    results = []
    if weights.get("balance", 0) > 0:
        lo = max(min_segments, math.ceil(total_bytes / budget))
        hi = min(n, max_segments or n, lo + 12)
        for count in range(lo, hi + 1):
            r = solve(total_bytes / count)
            if r is not None:
                results.append(r)
    else:
        r = solve(0)
        if r is not None:
            results.append(r)
    if not results:
        raise FitError(f"cannot divide {n} layers ({total_bytes} B of weights) so that neighbouring "
                        f"segments fit a {budget} B block"
                        + (" with cuts aligned to model boundaries" if align_models else ""))
    _cost, cuts = min(results, key=lambda r: r[0])
    # spans never cross a model boundary, so with "models" every transition is a cut

    segments = []
    src = 0
    for k, (a, b) in enumerate(cuts):
        tens = segment_tensors(layers, a, b)
        nbytes = size(a, b)
        segments.append(Segment(index=k, first=a, last=b, nbytes=nbytes, compute_cycles=C(a, b),
                                load_cycles=load_cycles(nbytes), carry_bytes=layers[b].carry_bytes if b + 1 < n else 0,
                                models=tuple(dict.fromkeys(models[a:b + 1])), source_offset=src, tensors=tuple(tens)))
        src += _align(nbytes)
    plan = SegmentPlan(block_bytes=budget, budget_bytes=budget, segments=segments, layers=list(layers),
                       criteria=weights)
    place(plan)
    return plan


def segment_tensors(layers, a, b):
    """The packed image of layers a..b: (tensor, offset, nbytes) for a whole constant,
    (tensor, offset, nbytes, c0, c1, axis) for the channel slice a partial piece reads
    (its groups merged into one run). Each entry starts 16-byte aligned."""
    tens, off, seen = [], 0, set()
    for f, z in pieces(layers, a, b):
        partial = is_partial(layers, f, z)
        runs = {}
        for la in layers[f:z + 1]:
            for entry in la.tensors:
                t, nb = entry[0], entry[1]
                if len(entry) > 2:
                    r = runs.get(t)
                    if r is None:
                        runs[t] = [nb, entry[2], entry[3], entry[4]]
                    else:
                        r[0] += nb
                        r[2] = entry[3]
                elif t not in seen:
                    seen.add(t)
                    tens.append((t, off, nb))
                    off += _align(nb)
        for t, (nb, c0, c1, axis) in runs.items():
            tens.append((t, off, nb, c0, c1, axis) if partial else (t, off, nb))
            off += _align(nb)
    return tuple(tens)


def place(plan, block_bytes=None, mode="compact"):
    """Give every segment an offset in the block and the segment it must wait for.

    mode "compact": the block is shrunk to the largest neighbouring pair and
    neighbours alternate between its two ends (RAM = at most the two largest
    segments; exactly two in flight). mode "ring": the whole ``block_bytes``
    (default: the budget) is a FIFO ring -- segments are laid one after the
    other, wrapping to the start when the tail is too short -- so the DMA can
    run as many segments ahead as fit.
    """
    segs = plan.segments
    if mode == "compact":
        block = plan.max_pair() if len(segs) > 1 else segs[0].nbytes
        block = max(block, min(_align(block), plan.budget_bytes))   # aligned, unless that breaks the budget
    elif mode == "ring":
        block = int(block_bytes if block_bytes is not None else plan.budget_bytes)
    else:
        raise PlanError(f"place: mode must be 'compact' or 'ring', got {mode!r}")
    placed = []   # (offset, nbytes, index)
    head = 0
    for k, s in enumerate(segs):
        if s.nbytes > block:
            raise FitError(f"segment larger than the block: segment {k} needs {s.nbytes} B, the block is {block} B")
        if mode == "compact":
            s.offset = 0 if k % 2 == 0 else block - s.nbytes
        else:
            if head + s.nbytes > block:
                head = 0
            s.offset = head
            head = min(_align(head + s.nbytes), block)
        s.wait_for = max((jj for off, nb, jj in placed
                          if off < s.offset + s.nbytes and s.offset < off + nb and nb and s.nbytes), default=-1)
        placed.append((s.offset, s.nbytes, k))
    plan.block_bytes = block
    plan.placement = mode
    plan.validate()
    return plan


def pipeline_cycles(plan, strategy="overlap"):
    """What the runtime will take, by recurrence (no event queue): loads run one after
    another, load k waits for the compute of segment wait_for[k]; compute k waits for
    load k and compute k-1. Used to choose among candidate plans; the event-driven
    SegmentRunner is the authority (the tests check both agree)."""
    segs = plan.segments
    n = len(segs)
    load_end, comp_end = [0] * n, [0] * n
    loader = 0
    for k, s in enumerate(segs):
        if strategy == "overlap":
            dep = comp_end[s.wait_for] if s.wait_for >= 0 else 0
        elif strategy == "serial":
            dep = comp_end[k - 1] if k else 0
        else:
            dep = 0
        load_end[k] = loader = max(loader, dep) + s.load_cycles
        if strategy != "all":
            comp_end[k] = max(load_end[k], comp_end[k - 1] if k else 0) + s.compute_cycles
    if strategy == "all":
        return load_end[-1] + sum(s.compute_cycles for s in segs)
    return comp_end[-1]


def plan_segments(layers, budget_bytes, load_cycles, criteria=("latency",), prefetch=True):
    """divide() plus a small search for the fastest pipeline in the budget.

    Without prefetch: the DP's division with the compact placement (RAM at most the
    two largest segments). With prefetch: also divisions whose segments are capped at
    1/2, 1/3, 1/4, 1/6 and 1/8 of the budget, each placed compact and as a ring in the
    whole budget; the fastest by ``pipeline_cycles`` wins (ties: the least RAM)."""
    budget = int(budget_bytes)
    best = divide(layers, budget, load_cycles, criteria)
    if not prefetch:
        return best
    key = (pipeline_cycles(best), best.block_bytes)
    import copy
    for div in (1, 2, 3, 4, 6, 8):
        cap = budget // div
        try:
            cand = divide(layers, cap, load_cycles, criteria) if div > 1 else copy.deepcopy(best)
        except PlanError:
            break
        for mode in ("compact", "ring"):
            place(cand, budget, mode)
            k = (pipeline_cycles(cand), cand.block_bytes)
            if k < key:
                best, key = copy.deepcopy(cand), k
    best.budget_bytes = budget
    return best


# --- layers from a graph -----------------------------------------------------------

def graph_layers(graph, cost_of, model=None, split_bytes=None, cost_model=None, locate=None):
    """One Layer per operator of a graph (pyembed.model.graph API): its constant tensors,
    its compute cycles (cost_of(op) -> cycles) and the activation bytes live across
    the boundary after it.

    With split_bytes (and the cost_model the cycles come from, and its locate), a
    CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED operator whose weights exceed
    split_bytes becomes one Layer per output-channel group of at most that many
    bytes (firmware_sim.split), so the division may cut inside it."""
    from firmware_sim import split as _split
    n = len(graph.operators)
    first_use, last_use = {}, {}
    for t in graph.inputs:
        first_use[t] = -1
    readers = {}
    for i, op in enumerate(graph.operators):
        for t in op.outputs:
            if t >= 0:
                first_use.setdefault(t, i)
        for t in op.inputs:
            if t >= 0 and graph.tensors[t].data is None:
                last_use[t] = max(last_use.get(t, -1), i)
            if t >= 0:
                readers.setdefault(t, set()).add(i)
    for t in graph.outputs:
        last_use[t] = n
    aliases = getattr(graph, "aliases", {}) or {}

    def live(i, inclusive):
        """Activation bytes live after operator i (inclusive: also those i reads)."""
        total = 0
        for t, f in first_use.items():
            if t in aliases:
                continue
            if f <= i < last_use.get(t, f) or (inclusive and f < i <= last_use.get(t, f)):
                total += _align(int(graph.tensors[t].nbytes))
        return total

    layers = []
    for i, op in enumerate(graph.operators):
        consts = []
        for t in op.inputs:
            if t >= 0 and graph.tensors[t].data is not None and t not in [c[0] for c in consts]:
                consts.append((t, int(graph.tensors[t].nbytes)))
        carry = live(i, False)
        groups = None
        if split_bytes is not None and cost_model is not None:
            groups = _split.channel_groups(graph, op, split_bytes)
            if groups and any(readers.get(t, set()) != {i} for t, _ax in _split.constants(graph, op)):
                groups = None        # a constant shared with another operator: keep it whole
        name = f"{i}:{op.type}"
        if not groups:
            layers.append(Layer(name=name, weight_bytes=sum(_align(nb) for _t, nb in consts),
                                compute_cycles=int(cost_of(op)), model=model or graph.name, carry_bytes=carry,
                                ops=(i,), tensors=tuple(consts)))
            continue
        costs = _split.part_costs(cost_model, graph, op, groups, locate)
        sliced = dict(_split.constants(graph, op))
        during = live(i, True)
        for k, (c0, c1) in enumerate(groups):
            tens = []
            for t, nb in consts:
                if t in sliced:
                    tens.append((t, _split.slice_bytes(graph, t, c0, c1, sliced[t]), c0, c1, sliced[t]))
                elif k == 0:
                    tens.append((t, nb))
            layers.append(Layer(name=f"{name}[{c0}:{c1}]", weight_bytes=sum(_align(e[1]) for e in tens),
                                compute_cycles=costs["lin"][k], model=model or graph.name,
                                carry_bytes=carry if k == len(groups) - 1 else during, ops=(i,),
                                tensors=tuple(tens), part=k, parts=len(groups), channels=(c0, c1),
                                call_cycles=costs["call"], split_cycles=costs["split"][k],
                                split_call_cycles=costs["split_call"], work_bytes=costs["work"][k]))
    return layers


def chain(*layer_lists):
    """Concatenate the layers of several models into one use-case graph (tensor ids
    are made unique per model so shared ids do not merge)."""
    out = []
    for m, layers in enumerate(layer_lists):
        for la in layers:
            out.append(dataclasses.replace(la, tensors=tuple((m * 1_000_000 + e[0],) + tuple(e[1:])
                                                             for e in la.tensors)))
    return out


# --- the runtime ---------------------------------------------------------------------

class SegmentRunner:
    """Runs a SegmentPlan on the event core.

    dma: a firmware_sim.dma.DmaEngine; source: (region, offset) of the packed segment
    image in flash; block: (region, offset) of the block in RAM; compute(segment,
    strategy) -> generator that runs the segment's layers (yielding core events).
    The run is the returned process; ``events`` records load/compute times.
    """

    def __init__(self, env, dma, plan, source, block, compute, strategy="overlap", trace=None, counter=None):
        if strategy not in STRATEGIES:
            raise PlanError(f"strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
        self.env, self.dma, self.plan = env, dma, plan
        self.source, self.block = source, block
        self.compute = compute
        self.strategy = strategy
        self.trace = trace
        self.counter = counter          # callable(time, block bytes in use) for RAM traces
        n = len(plan.segments)
        self.offsets, self.wait_for = self._layout()
        self.loaded = [env.event(f"loaded:{k}") for k in range(n)]
        self.done = [env.event(f"computed:{k}") for k in range(n)]
        self.load_times = [None] * n
        self.compute_times = [None] * n
        self.in_use = 0
        self.peak_in_use = 0

    def _layout(self):
        segs = self.plan.segments
        if self.strategy == "all":
            offs, o = [], 0
            for s in segs:
                offs.append(o)
                o += _align(s.nbytes)
            return offs, [-1] * len(segs)
        if self.strategy == "serial":
            return [0] * len(segs), [k - 1 for k in range(len(segs))]
        return [s.offset for s in segs], [s.wait_for for s in segs]

    def block_bytes(self):
        segs = self.plan.segments
        return max(o + s.nbytes for o, s in zip(self.offsets, segs))

    def run(self):
        loader = self.env.process(self._loader(), "segment-loader")
        runner = self.env.process(self._runner(), "segment-runner")
        return self.env.all_of([loader, runner], "segments")

    def _use(self, delta):
        self.in_use += delta
        self.peak_in_use = max(self.peak_in_use, self.in_use)
        if self.counter is not None:
            self.counter(self.env.now, self.in_use)

    def _loader(self):
        src_region, src_base = self.source
        blk_region, blk_base = self.block
        for k, s in enumerate(self.plan.segments):
            w = self.wait_for[k]
            if w >= 0 and not self.done[w].processed:
                yield self.done[w]
            if self.strategy == "serial" and k > 0 and not self.done[k - 1].processed:
                yield self.done[k - 1]
            self._use(s.nbytes)
            t0 = self.env.now
            if s.nbytes == 0:
                self.load_times[k] = (t0, t0)
                self.loaded[k].succeed()
                continue
            yield self.dma.transfer(f"load seg {k}", src_region, src_base + s.source_offset,
                                    blk_region, blk_base + self.offsets[k], s.nbytes)
            self.load_times[k] = (t0, self.env.now)
            self.loaded[k].succeed()

    def _runner(self):
        segs = self.plan.segments
        if self.strategy == "all":
            for ev in self.loaded:
                if not ev.processed:
                    yield ev
        for k, s in enumerate(segs):
            if not self.loaded[k].processed:
                t_wait = self.env.now
                yield self.loaded[k]
                if self.trace is not None and self.env.now > t_wait:
                    self.trace.span(f"wait seg {k}", "cpu", t_wait, self.env.now, cat="stall")
            t0 = self.env.now
            yield from self.compute(s, self)
            self.compute_times[k] = (t0, self.env.now)
            if self.trace is not None:
                self.trace.span(f"segment {k}", "segments", t0, self.env.now, cat="segment",
                                layers=f"{s.first}..{s.last}", bytes=s.nbytes)
            if self.strategy != "all":
                self._use(-s.nbytes)
            self.done[k].succeed()
        if self.strategy == "all":
            self._use(-self.in_use)

    def tensor_location(self, segment, tensor):
        """(region, absolute offset) of a constant tensor of ``segment`` in the block."""
        for t, off, _nb in segment.tensors:
            if t == tensor:
                return self.block[0], self.block[1] + self.offsets[segment.index] + off
        raise PlanError(f"tensor {tensor} is not part of segment {segment.index}")


def abstract_compute(env, trace=None):
    """compute callback that charges each kernel call's cycles (no real kernels),
    stretched by DMA bus contention when the runner's DMA engine models it."""
    def compute(segment, runner):
        layers = runner.plan.layers
        for f, z in pieces(layers, segment.first, segment.last):
            t0 = env.now
            yield from runner.dma.compute(int(piece_cycles(layers, f, z)))
            if trace is not None:
                name = layers[f].name if f == z else f"{layers[f].name}..{layers[z].name}"
                trace.span(name, "cpu", t0, env.now, cat="kernel", segment=segment.index)
    return compute


def run_abstract(plan, profile, strategy="overlap", bandwidth_scale=1.0, late="fault", trace=None, contention=True):
    """Simulate a plan with layer costs only (no bytes moved): returns
    (cycles, runner). The source is the plan's source region (default: the
    profile's segment source), the block its block region (default: activations).
    contention: compute slows while transfers run (profile dma.cpu_stall_per_word);
    False reproduces the uncontended recurrence (pipeline_cycles) exactly."""
    from firmware_sim.core import Environment
    from firmware_sim.dma import DmaEngine
    env = Environment()
    src = plan.source_region or profile.defaults.get("segment_source") or profile.flash_region
    blk = plan.block_region or profile.defaults["activations"]
    dma = DmaEngine(env, profile, memory=None, trace=trace, bandwidth_scale=bandwidth_scale, late=late,
                    contention=contention)
    counter = None
    if trace is not None:
        def counter(t, used):
            trace.counter("ram", t, segment_block=used)
    runner = SegmentRunner(env, dma, plan, (src, 0), (blk, 0), abstract_compute(env, trace), strategy, trace, counter)
    env.run(runner.run())
    return env.now, runner
