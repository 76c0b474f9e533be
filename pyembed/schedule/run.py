"""Running a schedule on the C dispatcher (pe_sched.c): the same code and
table the firmware runs, driven from Python with simulated time.

* :func:`simulate` - the timing model: each item takes its estimated cycles
  with a deterministic run-to-run variation (+-jitter) plus any injected
  overruns; fast (no Python per item), for tens of thousands of windows.
* :func:`run_kernels` - the real kernels: each item runs its operators on
  the C graph runtime in a shared activation arena per unit, fetching and
  storing the intermediates that cross windows in a persistent region at the
  planned offsets; the clock advances by the cost model's cycles.

Both return a :class:`Run` with the events and the figures of merit:
priority deadline misses, jitter of priority completion, utilisation of the
remaining periods, latency of low-priority results, and a readable report of
every fault (which frame, which model, by how much).
"""
import dataclasses

import numpy as np

from pyembed.errors import ArgumentError
from pyembed.schedule.plan import FLAG_LAST, LOW, PRIORITY
from pyembed.schedule.table import EVENT_DTYPE, table_arrays

EV_RAN, EV_OVERRUN, EV_MISS, EV_LATE, EV_LAG, EV_DEFER, EV_NO_FIT, EV_FAULT, EV_DROP = (
    1, 2, 4, 8, 16, 32, 64, 128, 256)
EV_PREFETCH, EV_PREFETCH_LATE, EV_STALL = 0x200, 0x400, 0x800
PREFETCH_START, PREFETCH_CHECK = 0, 1


def dispatcher(schedule, work=None, timing=None, prefetch=None):
    """A pyembed._ext._sched.Dispatcher over the schedule's table. prefetch:
    the host's prefetch function (op, item_index, frame, now, ready_at) ->
    ready_at; None: copies take their planned cycles."""
    from pyembed._ext import _sched
    items, after = table_arrays(schedule)
    return _sched.Dispatcher(items, after, schedule.window_cycles, schedule.tick_cycles, schedule.guard_cycles,
                             schedule.hyper_windows, schedule.n_units, schedule.n_instances, work=work,
                             timing=timing, overrun_tolerance_q16=schedule.overrun_tolerance_q16,
                             max_lag_windows=schedule.max_lag, prefetch=prefetch)


@dataclasses.dataclass
class Overrun:
    """An injected overrun: the sub-model `sub` of `model` takes `fraction`
    more than its estimate in the instance that processes `frame`."""
    model: str
    sub: int
    frame: int
    fraction: float


def simulate(schedule, windows, jitter=0.01, seed=1, overruns=(), cycles=None):
    """Run the dispatcher over `windows` windows on the timing model.

    jitter: run-to-run variation of each item, a fraction (uniform in
    [-jitter, +jitter], deterministic from seed). overruns: Overrun
    records. cycles: per-item base cycles (default: the plan's estimates)."""
    if not isinstance(windows, int) or windows < 1:
        raise ArgumentError(f"windows: expected a positive number of windows, got {windows!r}")
    if not 0.0 <= float(jitter) < 1.0:
        raise ArgumentError(f"jitter: expected a fraction in [0, 1), got {jitter!r}")
    base = np.array([p.est for p in schedule.items] if cycles is None else cycles, dtype=np.uint32)
    ov_item, ov_frame, ov_extra = [], [], []
    for o in overruns:
        mi = schedule.model_index(o.model)
        found = False
        for k, p in enumerate(schedule.items):
            if p.model == mi and p.sub == o.sub:
                ov_item.append(k)
                ov_frame.append(int(o.frame))
                ov_extra.append(int(round(p.est * float(o.fraction))))
                found = True
        if not found:
            raise ArgumentError(f"overrun: model {o.model!r} has no sub-model {o.sub}")
    d = dispatcher(schedule, timing=(base, int(round(jitter * 1e6)), int(seed), ov_item, ov_frame, ov_extra))
    events = d.run(windows * schedule.window_cycles, EVENT_DTYPE)
    return Run(schedule, events, d.counters(), windows, d)


@dataclasses.dataclass
class Run:
    schedule: object
    events: np.ndarray
    counters: dict
    windows: int
    dispatcher: object = None
    results: dict = dataclasses.field(default_factory=dict)   # run_kernels: (model, frame) -> outputs
    checks: dict = dataclasses.field(default_factory=dict)

    # -- selections -------------------------------------------------------------
    def _kind(self):
        kinds = np.array([p.kind for p in self.schedule.items], dtype=np.int32)
        return kinds[self.events["item"].clip(0)]

    def ran(self, kind=None):
        e = self.events[(self.events["flags"] & EV_RAN) != 0]
        if kind is None:
            return e
        kinds = np.array([p.kind for p in self.schedule.items], dtype=np.int32)
        return e[kinds[e["item"]] == kind]

    # -- figures -----------------------------------------------------------------
    def priority_stats(self):
        """Per priority model: runs, misses, completion jitter (max - min of
        end - release), worst start delay."""
        s = self.schedule
        e = self.ran(PRIORITY)
        out = {}
        models = np.array([p.model for p in s.items], dtype=np.int32)[e["item"]]
        for mi in sorted(set(models.tolist())):
            x = e[models == mi]
            comp = (x["end"] - x["release"]).astype(np.int64)
            delay = (x["start"] - x["release"]).astype(np.int64)
            frames = x["frame"]
            out[s.models[mi].name] = {
                "runs": int(len(x)),
                "frames_missing": int(len(set(range(int(frames.max()) + 1)) - set(frames.tolist()))) if len(x) else 0,
                "deadline_misses": int(((x["flags"] & EV_MISS) != 0).sum()),
                "late_starts": int(((x["flags"] & EV_LATE) != 0).sum()),
                "completion_ms_min": s.ms(int(comp.min())) if len(x) else 0.0,
                "completion_ms_max": s.ms(int(comp.max())) if len(x) else 0.0,
                "jitter_ms": s.ms(int(comp.max() - comp.min())) if len(x) else 0.0,
                "jitter_pct_window": 100.0 * float(comp.max() - comp.min()) / s.window_cycles if len(x) else 0.0,
                "max_start_delay_ms": s.ms(int(delay.max())) if len(x) else 0.0,
            }
        return out

    def utilisation(self):
        """Low-priority busy time / remaining periods (window minus the priority
        work of that window, measured), per unit and overall, over the
        windows run (work is counted in the window where it happens)."""
        s = self.schedule
        W = s.window_cycles
        n = self.windows
        kinds = np.array([p.kind for p in s.items], dtype=np.int32)
        per_unit = []
        tot_low = tot_rem = 0
        for u in range(s.n_units):
            busy = {PRIORITY: np.zeros(n, dtype=np.int64), LOW: np.zeros(n, dtype=np.int64)}
            e = self.ran()
            e = e[e["unit"] == u]
            for kind in (PRIORITY, LOW):
                x = e[kinds[e["item"]] == kind]
                _spread(busy[kind], x["start"].astype(np.int64), x["end"].astype(np.int64), W)
            rem = W * n - int(busy[PRIORITY].sum())
            low = int(busy[LOW].sum())
            per_unit.append(low / rem if rem > 0 else 0.0)
            tot_low += low
            tot_rem += rem
        return {"overall": tot_low / tot_rem if tot_rem > 0 else 0.0, "per_unit": per_unit}

    def low_latency(self):
        """Per low model: results delivered, latency in windows from the start
        of the frame the result is for to its end (mean, max), and windows
        between results."""
        s = self.schedule
        e = self.ran(LOW)
        flags = np.array([p.flags for p in s.items], dtype=np.uint32)[e["item"]]
        models = np.array([p.model for p in s.items], dtype=np.int32)[e["item"]]
        out = {}
        for mi in sorted(set(models.tolist())):
            x = e[(models == mi) & ((flags & FLAG_LAST) != 0)]
            if not len(x):
                out[s.models[mi].name] = {"results": 0}
                continue
            lat = (x["end"].astype(np.int64) - x["frame"].astype(np.int64) * s.window_cycles) / s.window_cycles
            out[s.models[mi].name] = {
                "results": int(len(x)),
                "latency_windows_mean": float(lat.mean()),
                "latency_windows_max": float(lat.max()),
                "windows_per_result": self.windows / len(x),
            }
        return out

    def copy_share(self):
        """Share of the low-priority busy time spent storing and fetching
        intermediates (planned cycles of the runs made; a prefetched fetch
        runs on the DMA during the priority period and is not in it)."""
        e = self.ran(LOW)
        if not len(e):
            return 0.0
        copy = np.array([(0 if p.prefetch else p.fetch) + p.store for p in self.schedule.items],
                        dtype=np.int64)[e["item"]]
        est = np.array([p.est for p in self.schedule.items], dtype=np.int64)[e["item"]]
        return float(copy.sum()) / float(est.sum())

    def prefetch_stats(self):
        """Prefetches started during a priority period (overlapped), started
        when the item was due (the unit waited), late (faults), and the fetch
        cycles the low-priority runs did not spend (planned fetch of every
        prefetched run, minus what the unit waited for)."""
        s = self.schedule
        f = self.events["flags"]
        pre = self.events[(f & EV_PREFETCH) != 0]
        waited = int((pre["end"] - pre["start"]).astype(np.int64).sum())
        e = self.ran(LOW)
        fetch = np.array([p.fetch if p.prefetch else 0 for p in s.items], dtype=np.int64)[e["item"]]
        return {"overlapped": int((pre["end"] == pre["start"]).sum()), "waited": int((pre["end"] > pre["start"]).sum()),
                "late": int(((f & EV_PREFETCH_LATE) != 0).sum()), "waited_cycles": waited,
                "low_cycles_saved": int(fetch.sum()) - waited}

    def summary(self):
        pst = self.priority_stats()
        return {
            "windows": self.windows,
            "window_ms": self.schedule.window_ms,
            "priority": pst,
            "priority_deadline_misses": sum(v["deadline_misses"] for v in pst.values()),
            "priority_jitter_pct_window": max((v["jitter_pct_window"] for v in pst.values()), default=0.0),
            "utilisation": self.utilisation(),
            "low_copy_share": self.copy_share(),
            "prefetch": self.prefetch_stats(),
            "low": self.low_latency(),
            "counters": {k: int(v) for k, v in self.counters.items()},
        }

    def faults(self, limit=None):
        """Readable lines for every overrun, late or missed priority run,
        deferral and no-fit, in time order."""
        s = self.schedule
        lines = []
        for ev in self.events:
            f = int(ev["flags"])
            if ev["item"] < 0 or not f & (EV_OVERRUN | EV_MISS | EV_LATE | EV_DEFER | EV_NO_FIT | EV_FAULT | EV_DROP
                                          | EV_PREFETCH_LATE | EV_STALL):
                continue
            p = s.items[int(ev["item"])]
            name = s.models[p.model].name
            what = name if p.kind == PRIORITY else f"{name} sub-model {p.sub} (operators {p.first_op}..{p.last_op - 1})"
            window = int(ev["start"]) // s.window_cycles
            if f & EV_OVERRUN:
                took = int(ev["end"] - ev["start"])
                lines.append(f"window {window}, frame {int(ev['frame'])}: OVERRUN {what} took {took} cycles "
                             f"({s.ms(took):.2f} ms), planned {p.est} ({s.ms(p.est):.2f} ms): "
                             f"+{100.0 * (took - p.est) / p.est:.1f} % (+{s.ms(took - p.est):.2f} ms)")
            if f & EV_LATE:
                late = int(ev["start"] - ev["release"])
                lines.append(f"window {window}, frame {int(ev['frame'])}: LATE priority model {name} started "
                             f"{s.ms(late):.3f} ms after its release (low-priority work overran into its window)")
            if f & EV_MISS:
                over = int(ev["end"] - ev["release"]) - p.deadline
                lines.append(f"window {window}, frame {int(ev['frame'])}: DEADLINE MISS priority model {name} ended "
                             f"{s.ms(over):.3f} ms after its deadline ({s.ms(p.deadline):.1f} ms after release); "
                             f"the frame was processed, not dropped")
            if f & EV_DEFER:
                left = int(ev["wake"] - ev["start"])
                kind = "NO FIT" if f & EV_NO_FIT else "DEFERRED"
                lines.append(f"window {window}: {kind} {what} (planned window {int(ev['planned_window'])}) needs "
                             f"{int(ev['est_cycles'])} cycles by its current estimate, "
                             f"{s.ms(int(ev['est_cycles'])):.2f} ms; only {s.ms(left):.2f} ms before the next priority "
                             f"release" + ("; it no longer fits any remaining period: re-split needed"
                                           if f & EV_NO_FIT else ""))
            if f & EV_DROP:
                lines.append(f"window {window}: DROPPED {what} of the instance for frame {int(ev['frame'])} "
                             f"(planned window {int(ev['planned_window'])}): it could not start within "
                             f"{s.max_lag} window(s) of its plan, or its instance was dropped; the {name} result "
                             f"for frame {int(ev['frame'])} is skipped")
            if f & EV_FAULT:
                lines.append(f"window {window}: FAULT work function of {what} failed")
            if f & EV_STALL:
                lines.append(f"window {window}: STALL priority model {name} (planned window "
                             f"{int(ev['planned_window'])}) waits for low-priority work of its unit that cannot "
                             f"run now (not released, waiting for its own inputs, or dropped)")
            if f & EV_PREFETCH_LATE:
                lines.append(f"window {window}, frame {int(ev['frame'])}: PREFETCH LATE {what}: due at "
                             f"{s.ms(int(ev['start'])):.3f} ms but the DMA copy of its input (planned "
                             f"{int(ev['est_cycles'])} cycles) had not completed; held back until "
                             f"{s.ms(int(ev['wake'])):.3f} ms")
            if limit is not None and len(lines) >= limit:
                break
        return lines

    def estimates(self):
        """The dispatcher's current online estimate of every item."""
        return [self.dispatcher.estimate(k) for k in range(len(self.schedule.items))]

    # -- traces --------------------------------------------------------------------
    def trace(self, first_window=0, last_window=None):
        """A firmware_sim Trace (Chrome/Perfetto JSON export) of the windows
        [first_window, last_window)."""
        from firmware_sim.trace import Trace
        s = self.schedule
        W = s.window_cycles
        lo = first_window * W
        hi = (last_window if last_window is not None else self.windows) * W
        tr = Trace(s.platform.clock_hz, name=f"schedule on {s.platform.name}")
        for ev in self.events:
            if not (lo <= int(ev["start"]) < hi) or ev["item"] < 0:
                continue
            p = s.items[int(ev["item"])]
            name = s.models[p.model].name
            track = f"unit{int(ev['unit'])} {s.platform.units[int(ev['unit'])].name}"
            f = int(ev["flags"])
            if f & EV_RAN:
                label = f"{name} f{int(ev['frame'])}" + ("" if p.kind == PRIORITY else f" s{p.sub}")
                tr.span(label, track, int(ev["start"]), int(ev["end"]),
                        cat="priority" if p.kind == PRIORITY else "low", model=name, sub=p.sub,
                        frame=int(ev["frame"]), ops=f"{p.first_op}..{p.last_op - 1}", est=int(ev["est_cycles"]),
                        flags=f)
            if f & EV_PREFETCH:
                tr.span(f"prefetch {name} f{int(ev['frame'])} s{p.sub}", f"dma unit{int(ev['unit'])}",
                        int(ev["start"]), max(int(ev["wake"]), int(ev["start"]) + 1), cat="dma", model=name,
                        sub=p.sub, frame=int(ev["frame"]), planned=int(ev["est_cycles"]),
                        cpu_waits=bool(ev["end"] > ev["start"]))
            for bit, label in ((EV_OVERRUN, "overrun"), (EV_MISS, "deadline miss"), (EV_LATE, "late start"),
                               (EV_DEFER, "deferred"), (EV_NO_FIT, "no fit"), (EV_DROP, "dropped"),
                               (EV_PREFETCH_LATE, "prefetch late"), (EV_STALL, "stall")):
                if f & bit:
                    tr.instant(f"{label}: {name} s{p.sub}", track, int(ev["start"]), cat="sched", frame=int(ev["frame"]))
        for t in getattr(self, "dma", None) or ():   # run_on_mcu: the simulator's transfers themselves
            if t.start is not None and t.end is not None and lo <= t.start < hi:
                tr.span(t.name, f"dma channel {t.channel}", t.start, max(t.end, t.start + 1), cat="dma transfer",
                        bytes=t.nbytes, src=t.src, dst=t.dst, declared_cycles=t.declared_cycles, late_by=t.late_by)
        for w in range(first_window, last_window if last_window is not None else self.windows):
            tr.instant(f"window {w}", "windows", w * W, cat="window")
        return tr

    def plot_gantt(self, path, first_window=0, n_windows=4, title=None):
        """A Gantt chart of a few windows: one row per unit, priority work in
        one colour, each low model in its own, window boundaries dashed."""
        from firmware_sim.trace import _pyplot
        plt = _pyplot()
        s = self.schedule
        W = s.window_cycles
        lo, hi = first_window * W, (first_window + n_windows) * W
        fig, ax = plt.subplots(figsize=(12, 1.6 + 0.9 * s.n_units))
        palette = ["tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink", "tab:olive"]
        handles = {}
        ax.set_xlim(s.ms(lo), s.ms(hi))
        fig.tight_layout()
        # a label is drawn only where it fits inside its bar (7 pt, about 0.6 em a character), so labels
        # of many short runs never pile up on each other
        px_per_ms = ax.get_window_extent().width / max(s.ms(hi) - s.ms(lo), 1e-9)
        char_px = 7 * 0.6 * fig.dpi / 72
        for ev in self.ran():
            if int(ev["end"]) <= lo or int(ev["start"]) >= hi:
                continue
            p = s.items[int(ev["item"])]
            name = s.models[p.model].name
            colour = "tab:red" if p.kind == PRIORITY else palette[p.model % len(palette)]
            x0 = s.ms(int(ev["start"]))
            w = s.ms(int(ev["end"] - ev["start"]))
            # no outline on bars a few pixels wide: thousands of short runs would draw as a black block
            bar = ax.barh(int(ev["unit"]), w, left=x0, height=0.6, color=colour, edgecolor="black",
                          linewidth=0.4 if w * px_per_ms > 3 else 0,
                          hatch="//" if int(ev["flags"]) & EV_OVERRUN else None)
            handles.setdefault(("priority: " if p.kind == PRIORITY else "low: ") + name, bar)
            label = f"f{int(ev['frame'])}" + ("" if p.kind == PRIORITY else f".{p.sub}")
            if len(label) * char_px + 4 <= w * px_per_ms:
                ax.text(x0 + w / 2, int(ev["unit"]), label, ha="center", va="center", fontsize=7, clip_on=True)
        for w in range(first_window, first_window + n_windows + 1):
            ax.axvline(s.ms(w * W), color="black", linestyle="--", linewidth=0.8)
        ax.set_xlim(s.ms(lo), s.ms(hi))
        ax.set_yticks(range(s.n_units))
        ax.set_yticklabels([f"unit {u}\n{s.platform.units[u].name}" for u in range(s.n_units)])
        ax.invert_yaxis()
        ax.set_xlabel("time (ms); dashed lines: window starts (frame arrivals)")
        ax.set_title(title or f"cooperative schedule on {s.platform.name}, {s.window_ms:g} ms windows")
        ax.legend(list(handles.values()), list(handles.keys()), loc="center left", bbox_to_anchor=(1.01, 0.5),
                  fontsize="small")
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path


def _spread(acc, start, end, W):
    """Add the busy intervals [start, end) to acc[window], split at window
    boundaries, ignoring what falls beyond len(acc) windows."""
    n = len(acc)
    for a, b in zip(start.tolist(), end.tolist()):
        while a < b:
            w = a // W
            if w >= n:
                break
            e = min(b, (w + 1) * W)
            acc[w] += e - a
            a = e


# ---------------------------------------------------------------------------
# the real kernels

class KernelHost:
    """Runs the items of a schedule with the real kernels (the C graph runtime
    of pyembed.model.graph) as the dispatcher's work function.

    Each unit has one activation arena shared by every model it runs (they run
    one at a time, to completion), or two when its low items are prefetched
    (Schedule.arena_blocks: the priority models' and the low models'); after
    each item its arena is overwritten with a pattern (scramble=True), so
    nothing may survive in it from one item to the next. Intermediates
    crossing a cut live in the persistent region at the plan's offsets: the
    producing item stores them, the consuming item fetches them (or its
    prefetch copied them before: they must still be intact when it starts).
    Every store is recorded and every fetch compared with what was stored,
    and with the reference value of that tensor for that frame.

    inputs(model_name, frame) -> list of input arrays of that model.
    cost(item_index, piece) -> cycles the item is charged (default: the
    planned estimate); raise from it to inject a fault. hook(host,
    item_index, piece), if given, runs after the item's kernels (fault
    injection: it may scribble on memory)."""

    def __init__(self, schedule, inputs, cost=None, scramble=True, check_reference=True, planned=True, hook=None):
        self.s = schedule
        self.hook = hook
        self.inputs = inputs
        self.cost = cost
        self.scramble = scramble
        self.check_reference = check_reference
        self.rt = [_compile(m.graph, planned) for m in schedule.models]
        self.step_of = [{op: k for k, op in enumerate(rt.order)} for rt in self.rt]
        self.blocks = schedule.arena_blocks()
        self.block_of = [schedule.arena_block(p) for p in schedule.items]
        size = [0] * len(self.blocks)
        for k, p in enumerate(schedule.items):
            size[self.block_of[k]] = max(size[self.block_of[k]], self.rt[p.model].arena_size)
        self.arenas = [np.zeros(max(1, n), dtype=np.uint8) for n in size]
        self.prefetched = {}  # item -> (frame, {tensor: bytes copied})
        self.prefetches = 0
        self.persistent = np.zeros(max(1, schedule.persistent_bytes), dtype=np.uint8)
        self.buf_of = {(b.model, b.instance, b.cut): b for b in schedule.buffers}
        self.stored = {}      # buffer name -> bytes stored (and the frame)
        self.results = {}     # (model, frame) -> outputs
        self.ref_cache = {}
        self.fetches = 0
        self.mismatches = []  # (what, frame, detail)

    def reference(self, mi, frame):
        key = (mi, frame)
        if key not in self.ref_cache:
            g = self.s.models[mi].graph
            xs = self.inputs(self.s.models[mi].name, frame)
            self.ref_cache[key] = g.run(xs if len(xs) > 1 else xs[0], keep_intermediates=True)
            if len(self.ref_cache) > 64:
                self.ref_cache.pop(next(iter(self.ref_cache)))
        return self.ref_cache[key]

    def _tensor_bytes(self, mi, arena, t):
        rt = self.rt[mi]
        off = rt.layout.tensor_offsets[t]
        return arena[off: off + self.s.models[mi].graph.tensors[t].nbytes]

    def fetch_copies(self, idx, frame):
        """The copies that bring item idx's inputs from its persistent buffer
        into its arena: [(tensor, persistent offset, arena offset, bytes)],
        after checking the buffer still holds what its producer stored for
        this frame."""
        p = self.s.items[idx]
        mi = p.model
        g = self.s.models[mi].graph
        b = self.buf_of[(mi, p.instance, p.first_op)]
        stored = self.stored.get(b.name)
        region = self.persistent[b.offset: b.offset + b.size]
        self.fetches += 1
        if stored is None or stored[0] != frame or not np.array_equal(stored[1], region):
            self.mismatches.append(("persistent buffer changed or lost before it was read", frame, b.name))
        out, pos = [], 0
        for t in b.tensors:
            n = g.tensors[t].nbytes
            out.append((t, b.offset + pos, self.rt[mi].layout.tensor_offsets[t], n))
            pos += (n + 15) // 16 * 16
        return out

    def prefetch(self, op, idx, frame, now, ready):
        """The dispatcher's prefetch function: the copy happens at once (no DMA
        model here) and is ready after its planned cycles."""
        if op == PREFETCH_START:
            p = self.s.items[idx]
            arena = self.arenas[self.block_of[idx]]
            for t, src, dst, n in self.fetch_copies(idx, frame):
                arena[dst: dst + n] = self.persistent[src: src + n]
            self.prefetch_landed(idx, frame)
            return now + p.prefetch_cycles
        return ready

    def prefetch_landed(self, idx, frame):
        """Remember what a prefetch brought into the arena (checked when the item starts)."""
        p = self.s.items[idx]
        arena = self.arenas[self.block_of[idx]]
        b = self.buf_of[(p.model, p.instance, p.first_op)]
        self.prefetched[idx] = (frame, {t: self._tensor_bytes(p.model, arena, t).copy() for t in b.tensors})
        self.prefetches += 1

    def __call__(self, idx, frame, start):
        p = self.s.items[idx]
        mi = p.model
        g = self.s.models[mi].graph
        rt = self.rt[mi]
        arena = self.arenas[self.block_of[idx]]
        name = self.s.models[mi].name
        if p.first_op == 0:
            for k, x in enumerate(self.inputs(name, frame)):
                rt.set_input(arena, k, x)
        else:
            b = self.buf_of[(mi, p.instance, p.first_op)]
            if p.prefetch:
                got = self.prefetched.pop(idx, None)
                if got is None or got[0] != frame:
                    self.mismatches.append(("prefetched sub-model started without its prefetch", frame, b.name))
                else:
                    for t, data in got[1].items():
                        if not np.array_equal(self._tensor_bytes(mi, arena, t), data):
                            self.mismatches.append(("prefetched input changed in the arena before the sub-model "
                                                    "ran", frame, f"{b.name} tensor {t}"))
            else:
                for t, src, dst, n in self.fetch_copies(idx, frame):
                    arena[dst: dst + n] = self.persistent[src: src + n]
            if self.check_reference:
                ref = self.reference(mi, frame)
                for t in b.tensors:
                    if t in ref and not np.array_equal(rt.tensor_value(arena, t), ref[t]):
                        self.mismatches.append(("fetched intermediate differs from the reference", frame,
                                                f"{b.name} tensor {t}"))
        for op in range(p.first_op, p.last_op):
            rt.invoke_op(self.step_of[mi][op], arena)
        if p.last_op == len(g.operators):
            self.results[(name, frame)] = [rt.tensor_value(arena, t) for t in g.outputs]
        else:
            b = self.buf_of[(mi, p.instance, p.last_op)]
            region = self.persistent[b.offset: b.offset + b.size]
            pos = 0
            for t in b.tensors:
                n = g.tensors[t].nbytes
                region[pos: pos + n] = self._tensor_bytes(mi, arena, t)
                pos += (n + 15) // 16 * 16
            self.stored[b.name] = (frame, region.copy())
        if self.scramble:
            arena[...] = 0x5A
        if self.hook is not None:
            self.hook(self, idx, p)
        return int(self.cost(idx, p) if self.cost is not None else p.est)


def _compile(graph, planned):
    """The graph on its planned arena (pyembed.plan, the layout the firmware
    would use: tensors live across a cut keep their bytes, dead ones are
    reused), or on the no-reuse layout."""
    if planned:
        try:
            from pyembed.plan import plan_graph
            return graph.compile(plan_graph(graph, algorithm="greedy_size"))
        except ImportError:  # pragma: no cover - the planner ships with pyembed
            pass
    return graph.compile()


def run_kernels(schedule, windows, inputs=None, seed=0, cost=None, scramble=True, check_reference=True):
    """Run `windows` windows with the real kernels (see KernelHost); returns a
    Run whose results map (model name, frame) to the outputs, and whose
    checks count fetches and list every mismatch found."""
    if inputs is None:
        inputs = random_inputs(schedule, seed)
    host = KernelHost(schedule, inputs, cost, scramble, check_reference)
    d = dispatcher(schedule, work=host, prefetch=host.prefetch)
    events = d.run(windows * schedule.window_cycles, EVENT_DTYPE)
    run = Run(schedule, events, d.counters(), windows, d, host.results)
    run.checks = {"fetches": host.fetches, "prefetches": host.prefetches, "stores": len(host.stored),
                  "mismatches": host.mismatches, "host": host}
    return run


def random_inputs(schedule, seed=0):
    """inputs(model name, frame): deterministic random int8 (or the input
    dtype's range) inputs, one per frame."""
    graphs = {m.name: m.graph for m in schedule.models}

    def inputs(name, frame):
        g = graphs[name]
        rng = np.random.default_rng([seed, frame, sum(map(ord, name))])
        out = []
        for t in g.inputs:
            tensor = g.tensors[t]
            info = np.iinfo(tensor.dtype)
            out.append(rng.integers(info.min, info.max + 1, size=tensor.shape, dtype=tensor.dtype))
        return out

    return inputs


# ---------------------------------------------------------------------------
# re-estimation

def measured_scale(run):
    """{model name: [factor per operator]}: how much slower (or faster) each
    operator ran than planned, from the measured cycles of every item run
    (the mean ratio of its runs, spread over the operators it covers)."""
    s = run.schedule
    e = run.ran()
    took = (e["end"] - e["start"]).astype(np.float64)
    factors = {m.name: [1.0] * len(m.graph.operators) for m in s.models}
    for k, p in enumerate(s.items):
        sel = e["item"] == k
        if not sel.any() or p.est <= 0:
            continue
        ratio = float(took[sel].mean()) / p.est
        f = factors[s.models[p.model].name]
        for op in range(p.first_op, p.last_op):
            f[op] = max(f[op], ratio) if f[op] != 1.0 else ratio
    return factors


def replan(schedule, run, **changes):
    """Plan again with the per-layer estimates scaled by what `run` measured
    (measured_scale): the re-split the dispatcher's NO_FIT reports call for.
    changes override plan_schedule arguments."""
    from pyembed.schedule.plan import plan_schedule
    opts = dict(schedule.options)
    scale = measured_scale(run)
    if opts.get("layer_scale"):
        for name, f in opts["layer_scale"].items():
            scale[name] = [a * b for a, b in zip(scale[name], f)]
    opts["layer_scale"] = scale
    opts.update(changes)
    return plan_schedule(schedule.models, platform=schedule.platform, **opts)
