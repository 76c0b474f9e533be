"""Traces: every kernel call, DMA transfer and scheduler decision as an event.

Times are cycles. ``to_chrome()`` converts to the Chrome / Perfetto trace-event
JSON format (``ph: "X"`` complete events in microseconds, one thread per track,
``ph: "C"`` counters for memory in use, ``ph: "i"`` instants for faults), which
https://ui.perfetto.dev and chrome://tracing open directly. ``plot_memory`` and
``plot_gantt`` draw PNGs with matplotlib's Agg backend.
"""
import dataclasses
import json


@dataclasses.dataclass
class Span:
    name: str
    track: str          # "cpu", "dma0", ...
    start: int          # cycles
    end: int
    cat: str = "kernel"  # kernel | dma | segment | sched | ...
    args: dict = dataclasses.field(default_factory=dict)

    @property
    def duration(self):
        return self.end - self.start


@dataclasses.dataclass
class Instant:
    name: str
    track: str
    time: int
    cat: str = "fault"
    args: dict = dataclasses.field(default_factory=dict)


class Trace:
    def __init__(self, clock_hz, name="firmware"):
        self.clock_hz = int(clock_hz)
        self.name = name
        self.spans = []
        self.instants = []
        self.counters = []    # (time, counter name, {series: value})

    # --- recording ------------------------------------------------------------
    def span(self, name, track, start, end, cat="kernel", **args):
        s = Span(name, track, int(start), int(end), cat, args)
        self.spans.append(s)
        return s

    def instant(self, name, track, time, cat="fault", **args):
        i = Instant(name, track, int(time), cat, args)
        self.instants.append(i)
        return i

    def counter(self, name, time, **values):
        self.counters.append((int(time), name, dict(values)))

    # --- queries ----------------------------------------------------------------
    def tracks(self):
        seen = []
        for s in self.spans:
            if s.track not in seen:
                seen.append(s.track)
        return seen

    def busy(self, track):
        return sum(s.duration for s in self.spans if s.track == track)

    def end(self):
        ends = [s.end for s in self.spans] + [i.time for i in self.instants] + [c[0] for c in self.counters]
        return max(ends, default=0)

    def us(self, cycles):
        return cycles * 1e6 / self.clock_hz

    # --- export ---------------------------------------------------------------
    def to_chrome(self):
        tids = {t: i + 1 for i, t in enumerate(self.tracks() + sorted({i.track for i in self.instants} -
                                                                     set(self.tracks())))}
        ev = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": self.name}}]
        for t, tid in tids.items():
            ev.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": t}})
            ev.append({"name": "thread_sort_index", "ph": "M", "pid": 1, "tid": tid, "args": {"sort_index": tid}})
        for s in sorted(self.spans, key=lambda s: (s.start, tids[s.track])):
            ev.append({"name": s.name, "cat": s.cat, "ph": "X", "pid": 1, "tid": tids[s.track],
                       "ts": self.us(s.start), "dur": self.us(s.duration),
                       "args": dict(s.args, start_cycle=s.start, cycles=s.duration)})
        for i in self.instants:
            ev.append({"name": i.name, "cat": i.cat, "ph": "i", "s": "g", "pid": 1, "tid": tids[i.track],
                       "ts": self.us(i.time), "args": dict(i.args, cycle=i.time)})
        for time, name, values in self.counters:
            ev.append({"name": name, "ph": "C", "pid": 1, "ts": self.us(time), "args": values})
        return {"traceEvents": ev, "displayTimeUnit": "ns",
                "otherData": {"clock_hz": self.clock_hz, "time_unit": "us"}}

    def write(self, path):
        with open(path, "w") as f:
            json.dump(self.to_chrome(), f, default=_jsonable)
        return path

    # --- plots ------------------------------------------------------------------
    def memory_series(self, name="ram"):
        """{series: ([t...], [bytes...])} of the counter ``name``, as step functions.

        Several samples at the same time (buffers released at the end of one
        step and allocated at the start of the next, in the same cycle) keep
        the last: the memory never was at the value in between, and drawing
        it gave a false dip at every step boundary."""
        series = {}
        for time, cname, values in sorted(self.counters, key=lambda c: c[0]):
            if cname != name:
                continue
            for k, v in values.items():
                xs, ys = series.setdefault(k, ([], []))
                if xs and xs[-1] == time:
                    ys[-1] = v
                else:
                    xs.append(time)
                    ys.append(v)
        return series

    def plot_memory(self, path, name="ram", title=None):
        plt = _pyplot()
        fig, ax = plt.subplots(figsize=(9, 3.5))
        end_ms = self.end() * 1e3 / self.clock_hz
        for k, (xs, ys) in self.memory_series(name).items():
            ms = [x * 1e3 / self.clock_hz for x in xs] + [end_ms]
            ax.step(ms, [y / 1024 for y in ys] + [ys[-1] / 1024], where="post", label=k)
        ax.set_xlabel("time (ms)")
        ax.set_ylabel("KiB in use")
        ax.set_title(title or f"{self.name}: memory over time")
        ax.legend(loc="upper right", fontsize="small")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path

    GANTT_KINDS = {"kernel": ("tab:blue", "kernel running on the CPU"),
                   "dma": ("tab:orange", "DMA loading weights"),
                   "segment": ("tab:green", "weight segment resident in the block"),
                   "sched": ("tab:purple", "scheduler"),
                   "stall": ("tab:red", "CPU stalled, waiting for DMA")}

    def plot_gantt(self, path, title=None, max_labels=40):
        """One row per track. A span is labelled only where its name fits
        inside its bar (so labels never overlap each other), at most
        max_labels labels; a legend says what each colour is."""
        plt = _pyplot()
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch
        tracks = self.tracks()
        fig, ax = plt.subplots(figsize=(10, 0.6 * len(tracks) + 1.9))
        end_ms = max(self.end() * 1e3 / self.clock_hz, 1e-6)
        ax.set_xlim(0, end_ms * 1.01)
        fig.tight_layout()
        # bar width -> pixels; each label is measured and kept only if it fits inside its bar
        px_per_ms = ax.get_window_extent().width / (end_ms * 1.01)
        renderer = fig.canvas.get_renderer()
        labelled = 0
        kinds = []
        for y, t in enumerate(tracks):
            for s in (s for s in self.spans if s.track == t):
                x0 = s.start * 1e3 / self.clock_hz
                w = max(s.duration * 1e3 / self.clock_hz, 1e-6)
                colour = self.GANTT_KINDS.get(s.cat, ("tab:gray", s.cat))[0]
                if s.cat not in kinds:
                    kinds.append(s.cat)
                ax.barh(y, w, left=x0, height=0.6, color=colour, edgecolor="black", linewidth=0.3)
                if labelled < max_labels and w * px_per_ms > 12:
                    text = ax.text(x0 + w / 2, y, s.name, ha="center", va="center", fontsize=6, clip_on=True)
                    if text.get_window_extent(renderer).width + 14 <= w * px_per_ms:
                        labelled += 1
                    else:
                        text.remove()
        for i in self.instants:
            ax.axvline(i.time * 1e3 / self.clock_hz, color="red", linestyle="--", linewidth=1)
        handles = [Patch(facecolor=self.GANTT_KINDS.get(k, ("tab:gray", k))[0], edgecolor="black",
                         label=self.GANTT_KINDS.get(k, ("tab:gray", k))[1]) for k in kinds]
        if self.instants:
            handles.append(Line2D([0], [0], color="red", linestyle="--", label="fault"))
        if handles:
            ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.28 if len(tracks) < 3 else -0.2),
                      ncol=min(len(handles), 3), fontsize="small", frameon=False)
        ax.set_yticks(range(len(tracks)))
        ax.set_yticklabels(tracks)
        ax.invert_yaxis()
        ax.set_xlabel("time (ms)")
        ax.set_title(title or f"{self.name}: compute and DMA")
        ax.grid(axis="x", alpha=0.3)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path


def _pyplot():
    from pyembed._extras import pyplot
    return pyplot("plots (PNG)")


def _jsonable(x):
    try:
        import numpy as np
        if isinstance(x, np.integer):
            return int(x)
        if isinstance(x, np.floating):
            return float(x)
        if isinstance(x, np.ndarray):
            return x.tolist()
    except ImportError:
        pass
    return str(x)
