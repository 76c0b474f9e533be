"""Cooperative periodic scheduling with sub-model splitting (SPEC section 7).

    python -m pyembed.bench scheduler [--json] [--windows N] [--profile P] [--out DIR]

On an MCU profile (default STM32F746, 216 MHz) with a 50 ms window: the
keyword-spotting DS-CNN is the priority model (every frame), the ResNet-8
image classifier and the visual-wake-words MobileNet are the low-priority
models (bundled MLPerf Tiny models). Prints, over N windows (default 10 000)
of the C dispatcher on the timing model (per-layer cost model, an assumed
+-1 % run-to-run variation): priority deadline misses, jitter of priority
completion, utilisation of the remaining periods, low-priority result
latency; side by side with first-come-first-served without splitting and an
ideal pre-emptive rate-monotonic schedule on the same jobs. Then: the
prefetch of intermediates by DMA during the priority period against
synchronous fetches (low-priority time saved, misses), injected
overruns (10-100 %) and what the dispatcher reported, a dual-unit variant
(one model pipelined over two cores), a CPU plus an accelerator, and a few
windows with the real
kernels on the simulated MCU (firmware_sim's event core, simulated RAM and
write watch; outputs compared with the whole-model run; the jitter of the
priority model measured there, with the DMA's bus contention). Writes a Gantt
chart (PNG), the trace (Chrome/Perfetto JSON), the C header of the table and
the generated C program (glue/) to DIR.
"""
import argparse
import os
import time

import numpy as np

from pyembed.bench.common import emit, table

PRIORITY_MODEL = "tiny_kws_dscnn_int8"
LOW_MODELS = ("tiny_ic_resnet8_int8", "tiny_vww_mobilenetv1_96_int8")


def _models(names_rates):
    from pyembed.data import model_path
    from pyembed.model.load import load_model
    from pyembed.schedule import Model
    out = []
    for name, kw in names_rates:
        out.append(Model(load_model(model_path(name)), name=name.split("_")[1], **kw))
    return out


def _row(label, f, run=None):
    low = f["low"]
    lat = ", ".join(f"{k} {v['latency_windows_mean']:.2f}/{v['latency_windows_max']:.2f}"
                    for k, v in sorted(low.items()) if v.get("results"))
    return [label, f["priority_deadline_misses"], f"{f['priority_jitter_pct_window']:.2f}",
            f"{100 * f['utilisation']['overall']:.1f}", lat]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench scheduler", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--windows", type=int, default=10_000)
    ap.add_argument("--profile", default="stm32f746")
    ap.add_argument("--window-ms", type=float, default=50.0)
    ap.add_argument("--jitter", type=float, default=0.01)
    ap.add_argument("--faults", type=int, default=40, help="overruns to inject in the fault run")
    ap.add_argument("--kernel-windows", type=int, default=8, help="windows run with the real kernels")
    ap.add_argument("--out", default=os.path.join("out", "scheduler"))
    args = ap.parse_args(argv)

    from pyembed.schedule import Overrun, Platform, emit_header, plan_schedule, simulate
    from pyembed.schedule.baselines import compare

    res = {"profile": args.profile, "window_ms": args.window_ms, "windows": args.windows, "jitter": args.jitter}
    os.makedirs(args.out, exist_ok=True)
    models = _models([(PRIORITY_MODEL, {"latency_sensitive": True}), (LOW_MODELS[0], {}),
                      (LOW_MODELS[1], {"rate": "max"})])
    t0 = time.perf_counter()
    sched = plan_schedule(models, platform=args.profile, window_ms=args.window_ms)
    res["plan_seconds"] = time.perf_counter() - t0
    res["plan"] = sched.describe()
    res["memory"] = sched.memory
    t0 = time.perf_counter()
    run = simulate(sched, args.windows, jitter=args.jitter, seed=1)
    res["simulate_seconds"] = time.perf_counter() - t0
    res["split"] = run.summary()
    res["baselines"] = compare(sched, run, jitter=args.jitter, seed=1)

    # prefetch by DMA during the priority period against synchronous fetches (same models, same split)
    sync = plan_schedule(models, platform=args.profile, window_ms=args.window_ms, prefetch=False)
    srun = simulate(sync, args.windows, jitter=args.jitter, seed=1)
    pst = run.prefetch_stats()
    res["prefetch"] = {
        "prefetched_items": sum(1 for p in sched.items if p.prefetch), "items": len(sched.items),
        "stats": pst, "with": _low_figures(run), "sync": _low_figures(srun),
        "saved_ms": sched.ms(pst["low_cycles_saved"]),
        "prefetch_dma_ms": sched.ms(run.counters["prefetch_cycles"]),
        "sync_fetch_ms": sched.ms(_fetch_cycles(srun)),
        "arena_per_unit": sched.memory["arena_per_unit"], "sync_arena_per_unit": sync.memory["arena_per_unit"],
    }

    # Gantt, trace, header
    res["gantt_png"] = run.plot_gantt(os.path.join(args.out, "gantt.png"), 0, 6)
    res["trace_json"] = run.trace(0, 12).write(os.path.join(args.out, "trace.json"))
    res["header"] = os.path.join(args.out, "schedule.h")
    emit_header(sched, res["header"])
    from pyembed.schedule.glue import emit_glue
    res["glue"] = emit_glue(sched, os.path.join(args.out, "glue"))["glue"]

    # faults: overruns of 10-100 % on random low-priority sub-models
    rng = np.random.default_rng(7)
    low_runs = run.ran(1)
    pick = rng.choice(len(low_runs), size=min(args.faults, len(low_runs)), replace=False)
    overruns = []
    for k in sorted(pick.tolist()):
        ev = low_runs[k]
        p = sched.items[int(ev["item"])]
        overruns.append(Overrun(sched.models[p.model].name, p.sub, int(ev["frame"]),
                                float(rng.uniform(0.10, 1.00))))
    frun = simulate(sched, args.windows, jitter=args.jitter, seed=1, overruns=overruns)
    fsum = frun.summary()
    lines = frun.faults()
    res["faults"] = {"injected": len(overruns), "summary": fsum,
                     "reported": {k: sum(1 for ln in lines if f" {k} " in ln)
                                  for k in ("OVERRUN", "LATE", "DEADLINE", "DROPPED", "DEFERRED", "NO")},
                     "first_reports": lines[:8]}
    frun.plot_gantt(os.path.join(args.out, "gantt_fault.png"),
                    max(0, int(frun.events[(frun.events["flags"] & 2) != 0]["start"][0]) // sched.window_cycles - 1)
                    if ((frun.events["flags"] & 2) != 0).any() else 0, 6,
                    title="first injected overrun (hatched) and the recovery")

    # two units: the ResNet-8 pipelined over both cores, the MobileNet back to back on core 1
    plat2 = Platform.from_profile(args.profile, units=2)
    models2 = _models([(PRIORITY_MODEL, {"latency_sensitive": True}), (LOW_MODELS[0], {"units": (0, 1)}),
                       (LOW_MODELS[1], {"rate": "max", "units": (1,)})])
    s2 = plan_schedule(models2, platform=plat2, window_ms=args.window_ms)
    r2 = simulate(s2, args.windows, jitter=args.jitter, seed=1)
    res["two_units"] = {"plan": s2.describe(), "summary": r2.summary(), "memory": s2.memory,
                        "handover_cycles": sorted({a.handover for a in s2.after if a.handover})}
    r2.plot_gantt(os.path.join(args.out, "gantt_two_units.png"), 0, 6)

    # a CPU plus an accelerator four times faster on every layer
    plat3 = Platform.from_profile(args.profile, units=2, cost_scales=[1.0, 0.25])
    models3 = _models([(PRIORITY_MODEL, {"latency_sensitive": True}), (LOW_MODELS[0], {"units": (0, 1)}),
                       (LOW_MODELS[1], {"rate": "max", "units": (1,)})])
    s3 = plan_schedule(models3, platform=plat3, window_ms=args.window_ms)
    r3 = simulate(s3, args.windows, jitter=args.jitter, seed=1)
    res["cpu_accelerator"] = {"plan": s3.describe(), "summary": r3.summary()}

    # real kernels for a few windows, on the simulated MCU (event core, simulated RAM, write watch)
    from pyembed.schedule.mcu import run_on_mcu
    t0 = time.perf_counter()
    krun = run_on_mcu(sched, args.kernel_windows)
    bad = 0
    host = krun.checks["host"]
    for (name, frame), outs in krun.results.items():
        g = sched.models[sched.model_index(name)].graph
        ref = g.run(host.inputs(name, frame)[0])
        bad += sum(int(not np.array_equal(a, b)) for a, b in zip(outs, ref))
    ref = simulate(sched, args.kernel_windows, jitter=0.0)
    key = ["item", "unit", "flags", "start", "end"]
    same = bool(np.array_equal(np.sort(krun.events[key], order=["start", "unit"]),
                               np.sort(ref.events[key], order=["start", "unit"])))
    res["kernels"] = {"windows": args.kernel_windows, "results": len(krun.results), "outputs_differing": bad,
                      "layout": krun.layout, "same_events_as_timing_run": same,
                      "fetches_checked": krun.checks["fetches"], "mismatches": len(krun.checks["mismatches"]),
                      "seconds": time.perf_counter() - t0,
                      "priority_deadline_misses": krun.summary()["priority_deadline_misses"],
                      "prefetches": krun.checks["prefetches"], "dma_transfers": len(krun.dma)}
    # jitter measured on the simulator: the same windows with the DMA's bus contention stretching
    # whatever runs while a prefetch moves data (the priority model)
    crun = run_on_mcu(sched, args.kernel_windows, contention=True)
    cp = crun.priority_stats()
    res["kernels"]["measured"] = {"priority": cp, "contention_cycles": crun.checks["contention_cycles"],
                                  "jitter_pct_window": max(v["jitter_pct_window"] for v in cp.values()),
                                  "misses": crun.summary()["priority_deadline_misses"]}
    emit(res, args.json, _render)
    return 0


def _low_figures(run):
    f = run.summary()
    return {"misses": f["priority_deadline_misses"], "low_busy_ms": run.schedule.ms(int(run.counters["low_cycles"])),
            "results": {k: v.get("results", 0) for k, v in f["low"].items()},
            "latency": {k: v.get("latency_windows_mean", 0.0) for k, v in f["low"].items()},
            "utilisation": f["utilisation"]["overall"], "copy_share": f["low_copy_share"]}


def _fetch_cycles(run):
    """Planned fetch cycles of the low runs made (all synchronous without prefetch)."""
    e = run.ran(1)
    fetch = np.array([0 if p.prefetch else p.fetch for p in run.schedule.items], dtype=np.int64)
    return int(fetch[e["item"]].sum())


def _render(r):
    out = [r["plan"], "",
           f"{r['windows']} windows of {r['window_ms']:g} ms on {r['profile']} (timing model: cost-model cycles with an "
           f"ASSUMED +-{100 * r['jitter']:g} % run-to-run variation; dispatcher run took {r['simulate_seconds']:.2f} s)",
           ""]
    rows = [_row("cooperative split (pe_sched)", r["split"]),
            _row("FCFS run-to-completion, no split", r["baselines"]["fcfs"]),
            _row("rate-monotonic, ideal pre-emption", r["baselines"]["rm_preemptive"])]
    out.append(table(["schedule", "prio misses", "prio jitter % of window (assumed variation)",
                      "utilisation of remaining %",
                      "low latency windows mean/max"], rows))
    c = r["split"]["counters"]
    out.append("(goals: 0 misses, jitter <= 1 %, utilisation >= 90 %; low releases for the baselines every "
               + ", ".join(f"{k} {v:.2f}" for k, v in r["baselines"]["release_periods_windows"].items())
               + " windows, the rate the split schedule delivered)")
    out.append(f"of the low-priority busy time, {100 * r['split']['low_copy_share']:.2f} % is storing/fetching "
               f"intermediates in persistent buffers (the baselines need none)")
    out.append(f"dispatcher counters: {c['priority_runs']} priority runs, {c['low_runs']} low runs, "
               f"{c['deferrals']} deferrals, {c['dropped']} dropped, {c['overruns']} overruns")
    pf = r["prefetch"]
    st = pf["stats"]
    w, sy = pf["with"], pf["sync"]
    out += ["", f"prefetch: {pf['prefetched_items']} of {pf['items']} items get their intermediate copied by DMA "
            f"during the priority period before them ({st['overlapped']} prefetches overlapped, {st['waited']} "
            f"synchronous fall-backs, {st['late']} late)",
            table(["fetch", "prio misses", "low busy ms", "low results", "low latency windows", "copy share %"],
                  [[name, f["misses"], f"{f['low_busy_ms']:.1f}",
                    ", ".join(f"{k} {v}" for k, v in sorted(f["results"].items())),
                    ", ".join(f"{k} {v:.2f}" for k, v in sorted(f["latency"].items())),
                    f"{100 * f['copy_share']:.3f}"] for name, f in (("synchronous", sy), ("DMA prefetch", w))]),
            f"low-priority time saved: {pf['saved_ms']:.2f} ms over {r['windows']} windows "
            f"({100 * pf['saved_ms'] / max(1e-9, w['low_busy_ms']):.3f} % of the low busy time; the synchronous run "
            f"spent {pf['sync_fetch_ms']:.2f} ms fetching); the DMA moved {pf['prefetch_dma_ms']:.2f} ms of copies "
            f"under the priority periods",
            f"RAM price: the priority and low models of a prefetching unit get disjoint arenas: {pf['arena_per_unit']} B "
            f"per unit against {pf['sync_arena_per_unit']} B with synchronous fetches"]
    m = r["memory"]
    out.append(f"RAM: arena {m['arena_per_unit']} B per unit, persistent buffers {m['persistent']} B "
               f"({m['persistent_unshared']} B unshared), dispatcher state {m['dispatcher_state']} B")
    f = r["faults"]
    fs = f["summary"]
    out += ["", f"fault run: {f['injected']} overruns of 10-100 % injected on random low-priority sub-models",
            f"  reported: {f['reported']['OVERRUN']} overruns, {f['reported']['LATE']} late priority starts, "
            f"{f['reported']['DEADLINE']} deadline misses, {f['reported']['DROPPED']} dropped low items, "
            f"{f['reported']['DEFERRED']} deferrals, {f['reported']['NO']} no-fit",
            f"  priority: {fs['priority_deadline_misses']} misses, every frame run: "
            + ", ".join(f"{k} {v['runs']} runs, {v['frames_missing']} frames missing, worst start delay "
                        f"{v['max_start_delay_ms']:.2f} ms" for k, v in fs["priority"].items()),
            "  first reports:"] + ["    " + ln for ln in f["first_reports"]]
    t = r["two_units"]
    ts = t["summary"]
    out += ["", "two units:", t["plan"],
            f"  {ts['priority_deadline_misses']} priority misses, jitter {ts['priority_jitter_pct_window']:.2f} % of the "
            f"window, utilisation per unit {[round(100 * u, 1) for u in ts['utilisation']['per_unit']]} %, "
            f"hand-over DMA cycles {t['handover_cycles']}",
            "  low: " + ", ".join(f"{k}: {v['results']} results, latency {v['latency_windows_mean']:.2f} windows"
                                  for k, v in ts["low"].items() if v.get("results"))]
    t = r["cpu_accelerator"]
    ts = t["summary"]
    out += ["", "CPU + accelerator (4x faster per layer):", t["plan"],
            f"  {ts['priority_deadline_misses']} priority misses, utilisation per unit "
            f"{[round(100 * u, 1) for u in ts['utilisation']['per_unit']]} %",
            "  low: " + ", ".join(f"{k}: {v['results']} results, latency {v['latency_windows_mean']:.2f} windows"
                                  for k, v in ts["low"].items() if v.get("results"))]
    k = r["kernels"]
    lay = k["layout"]
    out += ["", f"real kernels on the simulated {r['profile']} (event core, timer tick, RAM {lay['used']} B, write "
            f"watch), {k['windows']} windows: {k['results']} results, {k['outputs_differing']} outputs "
            f"differing from the whole-model run, {k['fetches_checked']} persistent-buffer fetches checked, "
            f"{k['mismatches']} mismatches, {k['priority_deadline_misses']} priority misses, events identical to "
            f"the timing run: {k['same_events_as_timing_run']} ({k['seconds']:.1f} s); {k['prefetches']} prefetches "
            f"by {k['dma_transfers']} DMA transfers",
            f"priority jitter MEASURED on the simulator (real kernels, start/completion of the priority model over "
            f"{k['windows']} windows, DMA bus contention on): {k['measured']['jitter_pct_window']:.4f} % of the window "
            + ", ".join(f"({n}: completion {v['completion_ms_min']:.4f}..{v['completion_ms_max']:.4f} ms after release, "
                        f"start delay <= {v['max_start_delay_ms']:.3f} ms)" for n, v in k["measured"]["priority"].items())
            + f", {k['measured']['contention_cycles']} cycles lost to contention, {k['measured']['misses']} misses; "
            f"the timing-model figure above comes from the assumed +-{100 * r['jitter']:g} % variation",
            "", f"wrote {r['gantt_png']}, {r['trace_json']}, {r['header']}, {r['glue']}"]
    return "\n".join(out)
