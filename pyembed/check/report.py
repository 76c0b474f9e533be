"""A report of one simulated run: a single self-contained HTML file (plots
embedded as base64 PNG, no scripts, no external files) and the same content
as Markdown next to PNG files.

    from pyembed.check.report import write_report
    paths = write_report("out/", graph, result, plan=plan, accuracy=acc, bit_exact=True)
    paths["html"], paths["markdown"]

Sections (each an HTML anchor): summary, memory-map (which buffer sits
where in each RAM region at each step, and RAM in use over simulated time),
plan (the plan against its liveness lower bound, live bytes per step),
latency (time per operator), gantt (compute and DMA tracks), segments (when
weights stream from external flash), accuracy (the per-layer table and SNR
plot, and the bit-exactness checks).

``pyembed simulate MODEL --report DIR`` and the demo write it.
"""
import base64
import datetime
import html
import math

SECTIONS = ("summary", "memory-map", "plan", "latency", "gantt", "segments", "accuracy")

_KIND_COLOURS = {"input": "#4c9be8", "output": "#e8744c", "activation": "#8fbf5a", "scratch": "#b0b0b0",
                 "line_store": "#c58fd6", "persistent": "#e8c84c", "variable": "#d6a38f"}

_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0 auto; max-width: 1120px;
       padding: 12px 28px 48px; color: #1d2430; line-height: 1.45; }
h1 { font-size: 26px; margin-bottom: 2px; }
h2 { font-size: 20px; border-bottom: 2px solid #dde3ea; padding-bottom: 3px; margin-top: 34px; }
.sub { color: #5a6675; margin-top: 0; }
table { border-collapse: collapse; margin: 8px 0 14px; font-size: 13px; }
th, td { border: 1px solid #d5dbe2; padding: 3px 8px; text-align: right; }
th { background: #eef2f6; }
td.l, th.l { text-align: left; }
tr.flag td { background: #fff1ef; }
img { max-width: 100%; border: 1px solid #e3e7ec; margin: 6px 0; }
.ok { color: #16803c; font-weight: 600; }
.bad { color: #c0262d; font-weight: 600; }
.warn { color: #a35f00; font-weight: 600; }
.kpi { display: inline-block; margin: 6px 18px 6px 0; padding: 8px 14px; background: #f4f7fa; border-radius: 6px; }
.kpi b { display: block; font-size: 20px; }
nav a { margin-right: 12px; }
details { margin: 6px 0 12px; }
code { background: #f1f3f5; padding: 0 3px; }
"""


def _plt():
    from pyembed._extras import pyplot
    return pyplot("the report's charts")


# -- plots -------------------------------------------------------------------------------------

def plot_memory_map(plan, path, title=None):
    """Each RAM region of the plan as offset (y) over execution step (x):
    one rectangle per buffer for the steps it is live, coloured by kind."""
    plt = _plt()
    from matplotlib.patches import Patch, Rectangle
    used = plan.region_used()
    regions = [(k, r) for k, r in enumerate(plan.regions) if used.get(r.name)]
    if not regions:
        regions = [(0, plan.regions[0])]
    steps = max(1, plan.problem.num_steps)
    fig, axes = plt.subplots(len(regions), 1, figsize=(10, 3.2 * len(regions) + 0.6), squeeze=False)
    from pyembed.plan.report import used_overlaps
    shades = ("#8fbf5a", "#5e9c3a", "#b5d98f")      # neighbouring activations in different greens
    for ax, (k, reg) in zip(axes[:, 0], regions):
        top = max(1, used.get(reg.name, 0))
        n_act = 0
        for i, b in enumerate(plan.buffers):
            rk, off = plan.placement[i]
            if rk != k or b.size == 0:
                continue
            colour = _KIND_COLOURS.get(b.kind, "#999999")
            if b.kind == "activation":
                colour = shades[n_act % len(shades)]
                n_act += 1
            ax.add_patch(Rectangle((b.first - 0.45, off / 1024), b.last - b.first + 0.9, b.size / 1024,
                                   facecolor=colour, edgecolor="black", linewidth=0.6, alpha=0.9))
            if b.size / top > 0.06 and (b.last - b.first + 1) / steps > 0.05:
                ax.text((b.first + b.last) / 2, (off + b.size / 2) / 1024, _short(b), ha="center",
                        va="center", fontsize=6, clip_on=True)
        for ov, shared in used_overlaps(plan):
            if plan.placement[ov.src][0] != k:
                continue
            lo = max(plan.placement[ov.src][1], plan.placement[ov.dst][1])
            ax.add_patch(Rectangle((ov.step - 0.45, lo / 1024), 0.9, shared / 1024, facecolor="none",
                                   edgecolor="#c0262d", hatch="////", linewidth=0.8))
        ax.set_xlim(-0.6, steps - 0.4)
        ax.set_ylim(0, top / 1024 * 1.04)
        cap = f" of {reg.size / 1024:.0f} KiB" if reg.size else ""
        ax.set_title(f"region {reg.name}: {used.get(reg.name, 0) / 1024:.1f} KiB planned{cap}", fontsize=10)
        ax.set_ylabel("offset (KiB)")
        ax.grid(alpha=0.25)
    axes[-1, 0].set_xlabel("execution step (operator)")
    kinds = sorted({b.kind for b in plan.buffers})
    handles = [Patch(facecolor=_KIND_COLOURS.get(kd, "#999999"), edgecolor="black", label=kd) for kd in kinds]
    if used_overlaps(plan):
        handles.append(Patch(facecolor="none", edgecolor="#c0262d", hatch="////",
                             label="output over its input (proven)"))
    fig.legend(handles=handles, loc="upper right", fontsize="small", ncol=len(handles))
    fig.suptitle(title or f"{plan.graph_name}: where each buffer lives", x=0.01, ha="left", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _short(buf):
    """A label that fits a rectangle: 't22' for tensor 22, 'scratch #3' for operator 3's scratch."""
    if buf.kind == "scratch" and getattr(buf, "op", None) is not None:
        return f"scratch #{buf.op}"
    if buf.tensors:
        return "t" + "+".join(str(t) for t in list(buf.tensors)[:2])
    return buf.name[:12]


def plot_plan_bound(plan, path, title=None):
    """Bytes live at each step (bars) against the arena and the lower bounds."""
    plt = _plt()
    rows = plan.step_table()
    steps = [r[0] for r in rows]
    live = [r[4] / 1024 for r in rows]
    fig, ax = plt.subplots(figsize=(10, 3.4))
    ax.bar(steps, live, color="#8fbf5a", edgecolor="black", linewidth=0.4, label="live buffers at the step")
    ax.axhline(plan.arena_size / 1024, color="tab:blue", linewidth=1.6, label=f"plan: {plan.arena_size:,} B")
    lb = plan.problem.lower_bound()
    ax.axhline(lb / 1024, color="tab:red", linestyle="--", linewidth=1.2, label=f"liveness lower bound: {lb:,} B")
    lbo = plan.problem.lower_bound(with_overlaps=True)
    if lbo != lb:
        ax.axhline(lbo / 1024, color="tab:purple", linestyle=":", linewidth=1.4,
                   label=f"bound with proven overlaps: {lbo:,} B")
    types = plan.info.get("op_types", {})
    # every step labelled up to 40 steps; beyond, every k-th, so the labels never overlap
    every = max(1, -(-len(steps) // 40))
    ax.set_xticks(steps[::every])
    ax.set_xticklabels([f"{s}:{types.get(r[1], '')[:10]}" for s, r in list(zip(steps, rows))[::every]],
                       rotation=60, ha="right", fontsize=7)
    if every > 1:
        ax.set_xlabel(f"execution step (every {every}th labelled; the report's step table has them all)")
    ax.set_ylabel("KiB")
    ax.set_title(title or f"{plan.graph_name}: plan against its lower bound", fontsize=11)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.005, 1.0))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


LATENCY_BARS = 60   # bars of the per-operator latency chart (the longest operators, the rest as one)


def plot_op_latency(result, path, title=None):
    """Simulated time of each operator in execution order; above LATENCY_BARS
    operators, the longest LATENCY_BARS - 1 and one bar for all the others."""
    plt = _plt()
    ms = result.profile.cycles_to_ms
    ops = list(result.op_times)
    rest = []
    if len(ops) > LATENCY_BARS:
        # the longest operators by name, the others as one bar: readable at 300 operators
        keep = set(sorted(range(len(ops)), key=lambda i: -ops[i].cycles)[:LATENCY_BARS - 1])
        rest = [o for i, o in enumerate(ops) if i not in keep]
        ops = [ops[i] for i in sorted(keep)]
    from pyembed.model.graph import origin_label
    # the imported operator numbers (the accuracy table's), not the fused graph's
    labels = [f"#{origin_label(result.origin, o.op)} {o.type}" for o in ops]
    cycles = [o.cycles for o in ops]
    colours = {"conv": "tab:blue", "depthwise": "tab:cyan", "fc": "tab:orange", "pool": "tab:green",
               "softmax": "tab:purple", "eltwise": "tab:olive"}
    cols = [colours.get(o.kernel_class, "tab:gray") for o in ops]
    if rest:
        labels.append(f"the other {len(rest)} operators")
        cycles.append(sum(o.cycles for o in rest))
        cols.append("white")
    fig, ax = plt.subplots(figsize=(10, 0.26 * len(labels) + 1.4))
    ax.barh(range(len(labels)), [ms(c) for c in cycles], color=cols, edgecolor="black", linewidth=0.3)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("ms")
    p = result.profile
    ax.set_title(title or f"{result.trace.name} on {p.name}: time per operator ({result.latency_ms:.2f} ms in all)",
                 fontsize=11)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# -- the document ---------------------------------------------------------------------------

class _Doc:
    """Builds the HTML and the Markdown side by side."""

    def __init__(self, outdir, embed=True):
        self.outdir = outdir
        self.html, self.md = [], []
        self.images = {}
        self.missing = []     # charts not drawn for want of an optional dependency

    def h2(self, anchor, text):
        self.html.append(f'<h2 id="{anchor}">{html.escape(text)}</h2>')
        self.md.append(f"\n## {text}\n")

    def p(self, text, cls=None):
        c = f' class="{cls}"' if cls else ""
        self.html.append(f"<p{c}>{html.escape(text)}</p>")
        self.md.append(f"{text}\n")

    def table(self, head, rows, left=(0,), flags=None):
        th = "".join(f'<th class="l">{html.escape(str(h))}</th>' if i in left else f"<th>{html.escape(str(h))}</th>"
                     for i, h in enumerate(head))
        body = []
        for k, row in enumerate(rows):
            tds = "".join(f'<td class="l">{html.escape(str(v))}</td>' if i in left
                          else f"<td>{html.escape(str(v))}</td>" for i, v in enumerate(row))
            cls = ' class="flag"' if flags and flags[k] else ""
            body.append(f"<tr{cls}>{tds}</tr>")
        self.html.append(f"<table><tr>{th}</tr>{''.join(body)}</table>")
        self.md.append("| " + " | ".join(str(h) for h in head) + " |")
        self.md.append("|" + "|".join("---" if i in left else "---:" for i in range(len(head))) + "|")
        for row in rows:
            self.md.append("| " + " | ".join(str(v) for v in row) + " |")
        self.md.append("")

    def image(self, name, make, alt):
        from pyembed._extras import have, install_hint
        if not have("matplotlib"):
            # every chart is matplotlib's: the report stays complete in its tables, and the
            # chart's place says what is missing
            why = f"charts need matplotlib, which is not installed: {install_hint('matplotlib')}"
            self.missing.append(why)
            self.html.append(f'<p class="warn">{html.escape(alt)}: not drawn ({html.escape(why)})</p>')
            self.md.append(f"*{alt}: not drawn ({why})*\n")
            return
        path = self.outdir.stage_path(name)     # a temporary name, moved into place when the report is complete
        make(path)
        with open(path, "rb") as f:
            data = base64.b64encode(f.read()).decode("ascii")
        self.images[name] = self.outdir.path(name)
        self.html.append(f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">')
        self.md.append(f"![{alt}]({name})\n")

    def raw(self, html_text, md_text=""):
        self.html.append(html_text)
        if md_text:
            self.md.append(md_text)


def _accuracy_checks(acc):
    """Summary lines for the accuracy section, so the summary never looks
    all green above a shaded (below-threshold) accuracy table."""
    out = []
    rows = acc.layers["end_to_end"]
    flagged = acc.flagged("end_to_end")
    if rows:
        last = rows[-1]
        text = f"output SNR {_fmt_snr(last.snr_db)} dB"
        if flagged:
            text += (f"; {len(flagged)} of {len(rows)} layers below {acc.min_snr_db:g} dB "
                     f"(" + ", ".join(f"#{r.op} {r.type}" for r in flagged[:4]) + (", ..." if len(flagged) > 4 else "")
                     + ")")
        else:
            text += f"; every layer at or above {acc.min_snr_db:g} dB"
        out.append(("int8 vs float64 (end to end)", text, "warn" if flagged else True))
    for k, agree in enumerate(acc.output_agreement):
        if agree is not None:
            out.append((f"top class, int8 vs float64 (output {k})", f"same on {100 * agree:.0f}% of the inputs",
                        True if agree == 1.0 else "warn"))
    out.append(("inputs", acc.input_source + (" (synthetic, not real data)" if acc.synthetic else ""),
                "warn" if acc.synthetic else True))
    return out


def _fmt_snr(v):
    return "exact" if v == math.inf else ("-inf" if v == -math.inf else f"{v:.1f}")


def write_report(outdir, graph, result, plan=None, accuracy=None, bit_exact=None, deadline_ms=None,
                 title=None, verdict=None, force=False):
    """Write report.html (self-contained) and report.md (+ PNGs) into outdir
    (a folder path, written through pyembed.codegen.outdir: files pyembed did
    not write there are refused unless force, all files or none; or an
    OutputDir the caller commits).

    graph: the pyembed Graph; result: firmware_sim Result; plan: the
    pyembed.plan Plan it ran with (memory map and bound sections);
    accuracy: a pyembed.check.accuracy AccuracyReport (accuracy section);
    bit_exact: whether the simulated outputs equal the host run;
    verdict: the fit line of pyembed.target.planning.verdict_line (None:
    made here from plan and the result's profile, when there is a plan).
    Returns {"html": path, "markdown": path, <png name>: path, ...}; without
    matplotlib (``pyembed[report]``) the charts are left out, each place says
    so, and "missing" lists why."""
    from pyembed.codegen.outdir import staged
    with staged(outdir, force=force) as out:
        return _write_report(out, graph, result, plan, accuracy, bit_exact, deadline_ms, title, verdict)


def _write_report(outdir, graph, result, plan, accuracy, bit_exact, deadline_ms, title, verdict):
    d = _Doc(outdir)
    p = result.profile
    name = graph.name
    title = title or f"pyembed report: {name} on {p.name}"

    # -- summary
    d.h2("summary", "Summary")
    if verdict is None and plan is not None:
        from pyembed.target.planning import verdict_line
        verdict = verdict_line(plan, p)
    if verdict is not None:
        d.p(verdict)
    kpis = [("latency", f"{result.latency_ms:.3f} ms"), ("cycles", f"{result.cycles:,}"),
            ("part", f"{p.part}, {p.core} {p.clock_hz / 1e6:g} MHz"),
            ("RAM planned", ", ".join(f"{r} {b:,} B" for r, b in result.region_used.items())),
            ("flash", ", ".join(f"{r} {b:,} B" for r, b in result.flash_bytes.items()) or "-")]
    d.raw("".join(f'<span class="kpi">{html.escape(k)}<b>{html.escape(v)}</b></span>' for k, v in kpis),
          "\n".join(f"* **{k}**: {v}" for k, v in kpis) + "\n")
    checks = []
    if bit_exact is not None:
        checks.append(("simulated outputs vs host run", "bit-exact" if bit_exact else "DIFFER", bool(bit_exact)))
    if deadline_ms is not None:
        ok = result.latency_ms <= deadline_ms
        checks.append((f"deadline {deadline_ms:g} ms", "met" if ok else "MISSED", ok))
    if accuracy is not None:
        for o in accuracy.oracles:
            # green only for a comparison that ran and agreed; an oracle that is not
            # installed or not applicable compared nothing (amber); a mismatch or an
            # oracle that could not run the model is a failure (red)
            ok = {"bit-exact": True, "mismatch": False, "error": False}.get(o.status, "warn")
            checks.append((o.name, o.status + (f" ({o.mismatches} of {o.elements} differ)" if o.mismatches else "")
                           + (f" ({o.detail})" if o.status == "error" and o.detail else ""), ok))
        checks.extend(_accuracy_checks(accuracy))
    if checks:
        # ok: True (green), False (red), "warn" (amber: worth a look, not a failure)
        cls = {True: "ok", False: "bad", "warn": "warn"}
        items = "".join(f'<li>{html.escape(a)}: <span class="{cls[ok]}">{html.escape(b)}</span></li>'
                        for a, b, ok in checks)
        d.raw(f"<ul>{items}</ul>",
              "\n".join(f"* {a}: **{b}**" for a, b, _ in checks) + "\n")
    rows = []
    for r, spec in p.regions.items():
        planned = result.region_used.get(r)
        flash = result.flash_bytes.get(r)
        if planned is None and flash is None:
            continue
        what = "activations + scratch" if planned is not None else "weights and constants"
        n = planned if planned is not None else flash
        peak = result.peak_bytes.get(r)
        rows.append((r, spec.kind, what, f"{n:,}", f"{peak:,}" if peak is not None else "-", f"{spec.size:,}",
                     f"{100 * n / spec.size:.1f}%"))
    d.table(["region", "kind", "holds", "bytes", "peak in use", "size", "used"], rows, left=(0, 1, 2))
    d.p("'peak in use' is the most bytes covered by live buffers at once while the simulated firmware ran "
        "(bytes shared by a proven output-over-input overlap count once); 'bytes' is the planned footprint.")
    d.p(f"Model {name}: {len(graph.operators)} operators, {graph.macs:,} MACs, {graph.weights_bytes:,} B of weights; "
        f"execution strategy: {result.strategy}.")

    # -- memory map
    d.h2("memory-map", "Memory map")
    if plan is not None:
        d.p("Each rectangle is one buffer: its offset in the region (vertical) for the steps it is live "
            "(horizontal). Buffers share bytes only when their lifetimes do not overlap, or where a row-streaming "
            "kernel was proven to write its output over input rows it has finished with.")
        d.image("memory_map.png", lambda path: plot_memory_map(plan, path), "memory map per region")
        buf_rows = []
        for i, b in enumerate(plan.buffers):
            rk, off = plan.placement[i]
            buf_rows.append((b.name, b.kind, plan.regions[rk].name, f"{off:,}", f"{b.size:,}", f"{b.first}..{b.last}"))
        d.raw("<details><summary>every buffer</summary>")
        d.table(["buffer", "kind", "region", "offset", "bytes", "steps"], buf_rows, left=(0, 1, 2))
        d.raw("</details>")
    d.p("RAM in use over simulated time (a buffer counts from the start of the step that first uses it to the end "
        "of the step that last uses it):")
    d.image("memory_time.png", lambda path: result.plot_memory(path), "RAM in use over time")

    # -- plan vs bound
    d.h2("plan", "Plan against its lower bound")
    if plan is not None:
        from pyembed.plan.report import used_overlaps
        lb = plan.problem.lower_bound()
        lbo = plan.problem.lower_bound(with_overlaps=True)
        shared = used_overlaps(plan)
        rows = [("plan (" + plan.algorithm + ")", f"{plan.arena_size:,}", f"{100 * plan.arena_size / max(1, lb):.1f}%"),
                ("liveness lower bound (largest sum of live buffers at one step)", f"{lb:,}", "100.0%"),
                ("lower bound with the proven overlaps", f"{lbo:,}", f"{100 * lbo / max(1, lb):.1f}%"),
                ("no reuse (every buffer its own bytes)", f"{sum(b.aligned_size for b in plan.buffers):,}",
                 f"{100 * sum(b.aligned_size for b in plan.buffers) / max(1, lb):.1f}%")]
        d.table(["", "bytes", "of the bound"], rows)
        if shared:
            d.p(f"{len(shared)} output-over-input overlaps are used, sharing {sum(s for _, s in shared):,} B; each "
                f"was proven by running the kernel on the overlapped layout and comparing bit for bit.")
        d.image("plan_bound.png", lambda path: plot_plan_bound(plan, path), "live bytes per step against the plan")
    else:
        d.p("No plan was given.")

    # -- latency
    d.h2("latency", "Latency per operator")
    d.image("op_latency.png", lambda path: plot_op_latency(result, path), "time per operator")
    ms = p.cycles_to_ms
    total = max(1, result.compute_cycles())
    from pyembed.model.graph import origin_label
    if result.origin is not None:
        d.p("op: the operator as it runs (after fusion and stripe regions); imported: the model's operator "
            "number(s) it runs, as the accuracy table and `pyembed model info` number them.")
    d.table(["step", "op", "imported", "type", "kernel class", "start ms", "cycles", "ms", "MACs", "share"],
            [(o.step, o.op, origin_label(result.origin, o.op), o.type, o.kernel_class, f"{ms(o.start):.3f}",
              f"{o.cycles:,}", f"{ms(o.cycles):.3f}", f"{o.macs:,}", f"{100 * o.cycles / total:.1f}%")
             for o in result.op_times], left=(3, 4))

    # -- Gantt
    d.h2("gantt", "Compute and DMA")
    d.p("One track per engine: the CPU running kernels and, when weights stream from external flash, the DMA "
        "channels loading segments.")
    d.image("gantt.png", lambda path: result.plot_gantt(path), "Gantt of compute and DMA")
    if result.segments is not None:
        d.h2("segments", "Weight segments")
        seg = result.segments.to_dict()
        d.p(f"{len(result.segments.segments)} segments in a {result.segments.block_bytes:,} B block, "
            f"{result.dma_bytes:,} B moved by DMA, strategy {result.strategy}.")
        rows = []
        for s in seg["segments"]:
            rows.append((s.get("index", ""), s.get("first", ""), s.get("last", ""), f"{int(s.get('nbytes', 0)):,}"))
        d.table(["segment", "first step", "last step", "bytes"], rows)

    # -- accuracy
    d.h2("accuracy", "Fixed-point accuracy")
    if accuracy is None:
        d.p("No accuracy check was run (pyembed check MODEL).")
    else:
        from pyembed.check.accuracy import MODE_TITLES
        for line in accuracy.summary_lines():
            if not line.startswith("the inputs are SYNTHETIC"):     # said at more length just below
                d.p(line)
        if accuracy.synthetic:
            d.p("The inputs are synthetic: random values over each input's quantization range. They can drive "
                "activations beyond the ranges the model was calibrated for (column 'out of range'), so the errors "
                "may be larger than on real data. Pass real inputs with 'pyembed check MODEL --inputs x.npy'.")
        d.p("Table: " + MODE_TITLES["end_to_end"] + ". Rows below the threshold are shaded.")
        head = ["op", "type", "output shape", "SNR dB", "max LSB", "mean LSB", "cosine", "out of range"]

        def rows_of(mode):
            rs = accuracy.layers[mode]
            return ([(r.op, r.type, "x".join(map(str, r.shape)), _fmt_snr(r.snr_db), f"{r.max_abs_lsb:.2f}",
                      f"{r.mean_abs_lsb:.3f}", f"{r.cosine:.5f}", f"{100 * r.out_of_range:.1f}%") for r in rs],
                    [r.flagged for r in rs])
        rows, flags = rows_of("end_to_end")
        d.table(head, rows, left=(1, 2), flags=flags)
        d.raw("<details><summary>per layer: " + html.escape(MODE_TITLES["per_layer"]) + "</summary>",
              "\nPer layer (" + MODE_TITLES["per_layer"] + "):\n")
        rows, flags = rows_of("per_layer")
        d.table(head, rows, left=(1, 2), flags=flags)
        d.raw("</details>")
        d.image("accuracy_snr.png", lambda path: accuracy.plot_snr(path), "per-layer SNR")
        for line in accuracy.oracle_lines():
            d.p(line)

    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    nav = " ".join(f'<a href="#{s}">{s.replace("-", " ")}</a>' for s in SECTIONS
                   if s != "segments" or result.segments is not None)
    head = (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{_CSS}</style></head><body>\n<h1>{html.escape(title)}</h1>\n"
            f"<p class=\"sub\">{html.escape(p.part)} &middot; written by pyembed on {stamp} &middot; "
            f"model {html.escape(str(graph.source_path or name))}</p>\n<nav>{nav}</nav>\n")
    html_path = outdir.write_text("report.html", head + "\n".join(d.html) + "\n</body></html>\n")
    md_path = outdir.write_text("report.md", f"# {title}\n\n{p.part}, written by pyembed on {stamp}\n"
                                + "\n".join(d.md) + "\n")
    out = {"html": html_path, "markdown": md_path}
    out.update(d.images)
    if d.missing:
        out["missing"] = sorted(set(d.missing))    # why charts were left out (an extra not installed)
    return out
