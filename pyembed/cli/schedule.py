"""The ``pyembed schedule`` command (attach with ``main.add_command(schedule_command)``).

    pyembed schedule --priority tiny_kws_dscnn_int8 --low tiny_ic_resnet8_int8 \\
        --low tiny_vww_mobilenetv1_96_int8:max --profile stm32f746 --window-ms 50 -o out/sched

Plans the schedule, runs it on the timing model, and writes DIR/schedule.h
(the static table), DIR/schedule.json (items, constraints, persistent
buffers, memory, figures), DIR/gantt.png and DIR/trace.json (through
pyembed.codegen.outdir: files pyembed did not write there are refused unless
--force).
"""
import json
import os

import click

from pyembed.cli.options import force_option
from pyembed.errors import ArgumentError


def _model(spec, **kw):
    """NAME_OR_PATH[:RATE][@UNITS] -> Model; RATE is max, auto or a period in
    windows; UNITS the units it runs on, 0 or 0+1 (a pipeline over both);
    without it, plan_schedule gives it the least loaded unit."""
    from pyembed.data import model_path
    from pyembed.model.load import load_model
    from pyembed.schedule.workload import Model
    spec_units = None
    if "@" in spec:
        spec, _, u = spec.rpartition("@")
        try:
            spec_units = tuple(int(x) for x in u.split("+"))
        except ValueError:
            raise ArgumentError(f"{spec}@{u}: the units after '@' must be unit numbers such as 0 or 0+1") from None
        kw["units"] = spec_units
    path, _, rate = spec.partition(":")
    if rate:
        if rate not in ("max", "auto"):
            try:
                rate = int(rate)
            except ValueError:
                raise ArgumentError(f"{spec}: the rate after ':' must be max, auto or a number of windows") from None
        kw["rate"] = rate
    if not os.path.exists(path):
        cand = model_path(path)
        if os.path.exists(cand):
            path = cand
    g = load_model(path)
    return Model(g, name=os.path.splitext(os.path.basename(path))[0], **kw)


def schedule_to_dict(s, run=None):
    """The schedule (and a run's figures) as plain JSON-able data."""
    d = {
        "platform": s.platform.name, "clock_hz": s.platform.clock_hz,
        "units": [u.name for u in s.platform.units],
        "window_cycles": s.window_cycles, "tick_cycles": s.tick_cycles, "guard_cycles": s.guard_cycles,
        "hyper_windows": s.hyper_windows, "n_instances": s.n_instances,
        "priority_cycles": s.priority_cycles, "remaining_cycles": s.remaining_cycles,
        "models": [{"name": mp.name, "class": "priority" if mp.kind == 0 else "low", "rank": mp.rank,
                    "units": list(mp.units), "estimate_cycles": {str(u): c for u, c in mp.estimate.items()},
                    "period_windows": mp.period, "rate": mp.rate, "instances_per_table": mp.instances,
                    "groups": mp.groups} for mp in s.model_plans],
        "items": [{"model": s.models[p.model].name, "kind": "priority" if p.kind == 0 else "low", "unit": p.unit,
                   "phase": p.phase, "instance": p.instance, "sub": p.sub, "ops": [p.first_op, p.last_op],
                   "compute": p.compute, "fetch": p.fetch, "store": p.store, "est": p.est, "flags": p.flags,
                   "prefetch": p.prefetch, "prefetch_cycles": p.prefetch_cycles}
                  for p in s.items],
        "after": [{"item": a.item, "on": a.on, "offset": a.offset, "handover": a.handover, "why": a.why}
                  for a in s.after],
        "persistent_buffers": [{"name": b.name, "offset": b.offset, "size": b.size, "tensors": b.tensors,
                                "producer": b.producer, "consumer": b.consumer, "steps": [b.first_step, b.last_step],
                                "wraps": b.wraps} for b in s.buffers],
        "memory": s.memory, "planned_utilisation": s.planned_utilisation(), "problems": s.problems,
    }
    if run is not None:
        d["run"] = run.summary()
    return d


@click.command("schedule")
@click.option("--priority", "priority", multiple=True, required=True,
              help="A priority model (bundled name or path), run every frame. Repeatable.")
@click.option("--low", "low", multiple=True,
              help="A low-priority model, NAME[:max|auto|PERIOD][@UNIT[+UNIT]] (@0+1: a pipeline over units 0 and 1). "
                   "Repeatable.")
@click.option("--profile", default="stm32f746", show_default=True, help="firmware_sim MCU profile.")
@click.option("--units", default=1, show_default=True,
              help="Processing units (identical cores); a model given no @UNIT goes to the least loaded one.")
@click.option("--window-ms", type=float, default=None, help="Window per frame (default 50 ms).")
@click.option("--fps", type=float, default=None, help="Frame rate instead of --window-ms.")
@click.option("--split", type=click.Choice(["fit", "balanced"]), default="fit", show_default=True)
@click.option("--windows", default=1000, show_default=True, help="Windows to simulate on the timing model.")
@click.option("-o", "--out", "outdir", required=True, type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--no-prefetch", is_flag=True, help="Fetch intermediates synchronously (no DMA prefetch).")
@click.option("--c-glue", is_flag=True,
              help="Also write the C program of the schedule (graph tables, work functions, host main) to OUT/glue.")
@click.option("--run", "run_windows", type=click.IntRange(min=1), default=None, metavar="WINDOWS",
              help="Also execute the real kernels (the host C runtime, each item's operators on its planned arena) "
                   "for this many windows: per model the inferences executed, their outputs against Graph.run of "
                   "the same inputs, the cycles the timing model predicted against what the dispatcher counted on "
                   "that run, and one inference per model on the simulated MCU (firmware_sim: its cycle count "
                   "and bit-exactness; a simulator's count, not a hardware measurement).")
@force_option()
def schedule_command(priority, low, profile, units, window_ms, fps, split, windows, outdir, as_json, no_prefetch,
                     c_glue, force=False, run_windows=None):
    """Plan a cooperative periodic schedule with sub-model splitting, check it
    on the timing model and write the C table, a JSON description, a Gantt
    chart and a Perfetto trace to OUT."""
    from pyembed.codegen.outdir import OutputDir
    from pyembed.schedule.plan import plan_schedule
    from pyembed.schedule.run import simulate
    from pyembed.schedule.table import emit_header
    from pyembed.schedule.workload import Platform
    models = [_model(p, latency_sensitive=True, priority="priority") for p in priority]
    models += [_model(m, priority="low") for m in low]
    plat = Platform.from_profile(profile, units=units)
    s = plan_schedule(models, platform=plat, window_ms=window_ms, frame_rate=fps, split=split,
                      prefetch=not no_prefetch)
    run = simulate(s, windows)
    d = schedule_to_dict(s, run)
    # every file at the end, all or none (pyembed.codegen.outdir)
    with OutputDir(outdir, force=force, what="-o/--out") as out:
        out.write_text("schedule.h", emit_header(s))
        out.write_text("schedule.json", json.dumps(d, indent=1, default=str))
        from pyembed._extras import have, install_hint
        wrote = ["schedule.h", "schedule.json", "trace.json"]
        if have("matplotlib"):
            run.plot_gantt(out.stage_path("gantt.png"), 0, min(6, windows))
            wrote.insert(2, "gantt.png")
        run.trace(0, min(20, windows)).write(out.stage_path("trace.json"))
        if c_glue:
            from pyembed.schedule.glue import emit_glue
            emit_glue(s, out.sub("glue"))
    kernel = _run_kernels(s, run_windows) if run_windows else None
    if as_json:
        click.echo(json.dumps(dict(d["run"], kernels=kernel) if kernel else d["run"], indent=1, default=str))
        return
    f = d["run"]
    click.echo(s.describe())
    click.echo(f"{windows} windows: {f['priority_deadline_misses']} priority deadline misses, jitter "
               f"{f['priority_jitter_pct_window']:.2f} % of the window (timing model with an assumed +-1 % "
               f"run-to-run variation), utilisation of the remaining periods "
               f"{100 * f['utilisation']['overall']:.1f} %"
               + (" (" + ", ".join(f"unit {u} {100 * x:.1f} %" for u, x in enumerate(f["utilisation"]["per_unit"]))
                  + ")" if len(f["utilisation"].get("per_unit") or ()) > 1 else ""))
    for name, v in f["low"].items():
        if v.get("results"):
            click.echo(f"  {name}: {v['results']} results, latency {v['latency_windows_mean']:.2f} windows "
                       f"(max {v['latency_windows_max']:.2f})")
    if kernel:
        click.echo(f"--run {run_windows} window(s) with the real kernels (host C runtime); cycles: predicted = the "
                   f"plan's estimates, counted = the dispatcher's item times on this run (simulator, not hardware):")
        for name, k in kernel["models"].items():
            click.echo(f"  {name}: {k['inferences']} inference(s) executed, outputs {k['outputs_equal']}/"
                       f"{k['inferences']} equal to Graph.run; {k['items_run']} item run(s), predicted "
                       f"{k['predicted_cycles']:,} cycles, counted {k['counted_cycles']:,}")
            dev = 100.0 * (k["simulator_cycles_per_inference"] - k["model_cycles_per_inference"]) / \
                max(1, k["model_cycles_per_inference"])
            click.echo(f"    one inference: timing model {k['model_cycles_per_inference']:,} cycles, simulator "
                       f"(firmware_sim, real kernels on simulated memory) {k['simulator_cycles_per_inference']:,} "
                       f"({dev:+.1f} %), outputs {'bit-exact' if k['simulator_bit_exact'] else 'DIFFER'}")
        click.echo(f"  intermediates: {kernel['fetches']} fetched, {kernel['stores']} stored, "
                   f"{len(kernel['mismatches'])} mismatch(es)")
        for m in kernel["mismatches"][:5]:
            click.echo(f"    {m}")
    click.echo(f"wrote {', '.join(wrote)}{', glue/' if c_glue else ''} to {outdir}")
    if "gantt.png" not in wrote:
        click.echo(f"  gantt.png left out: plots need matplotlib ({install_hint('matplotlib')})")


def _run_kernels(s, windows):
    """schedule --run: pyembed.schedule.run.run_kernels for `windows` windows;
    per model the inferences that completed, how many outputs equal Graph.run
    of the same inputs (integers, ==), and predicted (the items' estimates)
    against counted (the dispatcher's end - start of each item run) cycles,
    and one inference of each model on firmware_sim's simulated MCU (real
    kernels, simulated memory): its cycles against the timing model's
    (layer_cycles) and whether its outputs equal Graph.run."""
    import numpy as np

    from pyembed.schedule.run import random_inputs, run_kernels
    inputs = random_inputs(s, 0)
    run = run_kernels(s, windows, inputs=inputs)
    e = run.ran()
    out = {"windows": windows, "models": {}, "fetches": run.checks["fetches"], "stores": run.checks["stores"],
           "mismatches": [" ".join(str(x) for x in m) for m in run.checks["mismatches"]]}
    for mi, m in enumerate(s.models):
        done = [(fr, outs) for (name, fr), outs in run.results.items() if name == m.name]
        equal = 0
        for fr, outs in done:
            xs = inputs(m.name, fr)
            ref = m.graph.run(xs if len(xs) > 1 else xs[0])
            ref = list(ref) if isinstance(ref, (list, tuple)) else [ref]
            equal += all(np.array_equal(np.asarray(a).reshape(-1), np.asarray(b).reshape(-1))
                         for a, b in zip(outs, ref))
        items = [k for k, p in enumerate(s.items) if p.model == mi]
        sel = np.isin(e["item"], items)
        predicted = int(sum(int(s.items[k].est) for k in e["item"][sel]))
        counted = int((e["end"][sel] - e["start"][sel]).sum())
        # one inference of frame 0's input on the simulated MCU: the real kernels on simulated memory, cycles
        # from firmware_sim's cost model with the tensors where the simulator placed them
        from firmware_sim.sim import simulate
        from pyembed.schedule.workload import layer_cycles
        unit = s.platform.units[s.items[items[0]].unit if items else 0]
        xs = inputs(m.name, 0)
        sim = simulate(m.graph, None, unit.profile, xs if len(xs) > 1 else xs[0])
        ref = m.graph.run(xs if len(xs) > 1 else xs[0])
        ref = list(ref) if isinstance(ref, (list, tuple)) else [ref]
        out["models"][m.name] = {
            "inferences": len(done), "outputs_equal": int(equal), "items_run": int(sel.sum()),
            "predicted_cycles": predicted, "counted_cycles": counted,
            "model_cycles_per_inference": int(sum(layer_cycles(m.graph, unit))),
            "simulator_cycles_per_inference": int(sim.cycles),
            "simulator_bit_exact": all(np.array_equal(np.asarray(a).reshape(-1), np.asarray(b).reshape(-1))
                                       for a, b in zip(sim.outputs, ref))}
    return out


# -- schedule (the scheduler engineer's command: progress bar, exit 1 on missed deadlines) ---------------

def command():
    """schedule_command with a progress bar and exit 1 on a missed priority deadline (what `pyembed schedule` is)."""
    import json
    import os
    import sys

    from pyembed.cli.app import EXIT_CHECK_FAILED, run_with_progress

    def callback(**kw):
        windows = int(kw.get("windows") or 1000)
        run_with_progress("scheduling", lambda: schedule_command.callback(**kw),
                          expected_seconds=max(2.0, windows / 2000))
        with open(os.path.join(kw["outdir"], "schedule.json")) as f:
            figures = json.load(f).get("run", {})
        misses = figures.get("priority_deadline_misses", 0)
        if misses:
            click.echo(f"pyembed: {misses} priority deadline miss(es)", err=True)
            sys.exit(EXIT_CHECK_FAILED)
    return click.Command(
        "schedule", params=schedule_command.params, callback=callback, help=schedule_command.help,
        short_help="Schedule several models in periodic frame windows (priority reservation, sub-model "
                   "splitting).",
        epilog="Exit codes: 0 every priority deadline met on the timing model, 1 a priority deadline missed or the "
               "models cannot be placed in the windows (the error says which and by how much), 2 bad input.")
