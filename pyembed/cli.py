"""The ``pyembed`` command.

``pyembed`` with no arguments runs the built-in demonstration. Subcommands
print plain text by default and JSON with --json.

Exit codes, the same for every command:

* 0  everything asked for was done and every check passed;
* 1  a check failed: the model does not fit, the simulated firmware
     faulted or missed its deadline, the results are not bit-exact, a layer
     is below the accuracy threshold, a vector mismatched;
* 2  bad input: a missing or unreadable file, not a model, an unknown
     profile, a malformed plan, an option out of range;
* 3  an internal error (a bug: please report it with the --debug output).

Errors are one line on stderr ("pyembed: error: ..."); ``pyembed --debug
COMMAND`` shows the Python traceback instead. Progress bars for anything
that runs longer than about a second go to stderr, so stdout stays clean
for --json.
"""
import io
import json
import os
import sys
import threading
from contextlib import redirect_stdout

import click

from pyembed.errors import FitError, PlanError, PyEmbedError, SimulationFault

EXIT_OK, EXIT_CHECK_FAILED, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3



def exit_code_for(exc):
    """(exit code, message) for an exception the CLI expects, or None for a bug."""
    if isinstance(exc, SimulationFault):
        return EXIT_CHECK_FAILED, f"the simulated firmware faulted: {exc}"
    if type(exc).__name__ == "FirmwareError":     # pyembed.target.firmware: the build or the QEMU run failed
        return EXIT_CHECK_FAILED, f"firmware: {exc}"
    if type(exc).__name__ == "ScheduleError":     # pyembed.scheduler: the windows cannot hold the work
        return EXIT_CHECK_FAILED, f"no schedule meets the windows: {exc}"
    if isinstance(exc, FitError):      # valid input that does not fit: a failed check, not bad input
        return EXIT_CHECK_FAILED, str(exc)
    if isinstance(exc, PyEmbedError):
        return EXIT_BAD_INPUT, str(exc)
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        return EXIT_BAD_INPUT, f"{where}{exc.strerror or exc}"
    if isinstance(exc, (UnicodeDecodeError, json.JSONDecodeError)):
        return EXIT_BAD_INPUT, f"cannot read the input: {exc}"
    if isinstance(exc, MemoryError):
        return EXIT_BAD_INPUT, "out of host memory (is the model or an option far too large?)"
    return None


class _Group(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except KeyboardInterrupt:
            click.echo("pyembed: interrupted", err=True)
            ctx.exit(130)
        except BrokenPipeError:
            # the reader went away (pyembed ... | head): stop quietly, as Unix tools do
            try:
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            except (OSError, ValueError, io.UnsupportedOperation):
                pass
            ctx.exit(EXIT_OK)
        except Exception as e:   # noqa: BLE001 - every failure ends in one clean line
            if _debug(ctx):
                raise
            known = exit_code_for(e)
            if known is None:
                click.echo(f"pyembed: internal error: {type(e).__name__}: {e}\n"
                           f"(this is a bug in pyembed; run again as 'pyembed --debug ...' for the traceback)",
                           err=True)
                ctx.exit(EXIT_INTERNAL)
            code, msg = known
            click.echo(f"pyembed: error: {msg}", err=True)
            ctx.exit(code)


def _debug(ctx):
    root = ctx.find_root()
    return bool((root.obj or {}).get("debug")) or os.environ.get("PYEMBED_DEBUG") == "1"


def _echo_json(data):
    click.echo(json.dumps(data, indent=1, default=_jsonable))


def _jsonable(x):
    import numpy as np
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (set, tuple)):
        return list(x)
    return str(x)


def _progress_visible():
    # a bar is for a person watching a terminal; logs and pipes get nothing
    return sys.stderr.isatty() or os.environ.get("PYEMBED_PROGRESS") == "1"


def progress_iter(iterable, length, label):
    """click.progressbar over an iterable, on stderr (when it is a terminal)."""
    if not _progress_visible():
        yield from iterable
        return
    with click.progressbar(iterable, length=length, label=label, file=sys.stderr, show_pos=True) as bar:
        yield from bar


def run_with_progress(label, fn, expected_seconds=5.0, quiet_below=1.0):
    """Run fn() in a worker thread; if it takes longer than quiet_below
    seconds, show a progress bar on stderr that advances with the elapsed
    time against expected_seconds (the work itself cannot report progress:
    a solver search, a simulation). What fn prints is held back and printed
    after the bar, so the two never share a line. Returns fn's result and
    re-raises its exception."""
    box = {}
    out = io.StringIO()

    def work():
        try:
            with redirect_stdout(out):
                box["value"] = fn()
        except BaseException as e:   # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = e

    th = threading.Thread(target=work, daemon=True)
    th.start()
    th.join(quiet_below)
    if th.is_alive() and not _progress_visible():
        th.join()
    if th.is_alive():
        steps = max(1, int(expected_seconds * 10))
        with click.progressbar(length=steps, label=label, file=sys.stderr, show_eta=False,
                               show_percent=False) as bar:
            done = 0
            while th.is_alive():
                th.join(0.1)
                if done < steps - 1:
                    bar.update(1)
                    done += 1
            bar.update(steps - done)
    sys.stdout.write(out.getvalue())
    if "error" in box:
        raise box["error"]
    return box.get("value")


# -- the group ---------------------------------------------------------------------------------

@click.group(cls=_Group, invoke_without_command=True,
             epilog="Exit codes: 0 ok, 1 a check failed (does not fit, fault, deadline missed, not bit-exact, "
                    "accuracy below threshold), 2 bad input, 3 internal error.")
@click.option("--debug", is_flag=True, help="Show Python tracebacks on errors.")
@click.version_option(package_name="pyembed")
@click.pass_context
def main(ctx, debug):
    """pyembed: plan, simulate and check int8 models for microcontrollers.

    Run without a command for the built-in demonstration (the bundled
    keyword-spotting model: import, plan, C headers, simulation on an
    STM32F446, accuracy check). The usual flow on your own model:

    \b
      pyembed profiles                      which MCUs can be simulated
      pyembed plan model.tflite -o out/     static RAM plan + C headers
      pyembed simulate model.tflite -p stm32f746 --plan out/plan.json
      pyembed check model.tflite            int8 vs float64, per layer
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    if ctx.invoked_subcommand is None:
        from pyembed.demo import run_demo
        ctx.exit(run_demo())


@main.command("demo", short_help="The built-in demonstration, with a choice of directory, MCU and model.")
@click.option("-o", "--outdir", default="pyembed-demo", show_default=True, type=click.Path(file_okay=False),
              help="Where the demo writes its C headers, plan, trace, plots and report.")
@click.option("-p", "--profile", default="stm32f446", show_default=True, help="MCU profile to simulate on.")
@click.option("--model", default="tiny_kws_dscnn_int8", show_default=True,
              help="A bundled model name (see pyembed/data/models) or a .tflite/.onnx path.")
def demo_command(outdir, profile, model):
    """The built-in demonstration (what 'pyembed' alone runs), with a
    choice of output directory, MCU and model."""
    from pyembed.demo import run_demo
    sys.exit(run_demo(outdir=outdir, profile=profile, model=model))


# -- plan (the planner engineer's command, run with a progress bar) ---------------------------------

def _plan_command():
    from pyembed.planner.cli import plan_command

    def callback(**kw):
        limit = float(kw.get("time_limit") or 10.0)
        return run_with_progress("planning", lambda: plan_command.callback(**kw), expected_seconds=limit)
    return click.Command(
        "plan", params=plan_command.params, callback=callback, help=plan_command.help,
        short_help="Plan a model's static RAM and write C headers (memplan.h, model_data.c, plan.json).",
        epilog="Exit codes: 0 planned, 1 the model does not fit the regions (the error says how many bytes are "
               "missing), 2 bad input.")


main.add_command(_plan_command())


# -- model info / run (the graph engineer's group) ------------------------------------------------------

def _model_group():
    try:
        from pyembed.model_cli import model
    except ImportError:
        return None
    model.short_help = "Inspect a model (operators, MACs, weights) or run it on random inputs."
    return model


if _model_group() is not None:
    main.add_command(_model_group())


# -- firmware (the firmware engineer's command) --------------------------------------------------------

def _firmware_command():
    from pyembed.firmware_cli import firmware_command
    firmware_command.short_help = "Write a Cortex-M firmware project; --run builds it and runs it under QEMU."
    firmware_command.epilog = ("Exit codes: 0 ok, 1 the firmware's outputs differ from the host run or its run "
                               "failed, 2 bad input.")
    return firmware_command


main.add_command(_firmware_command())


# -- schedule (the scheduler engineer's command: progress bar, exit 1 on missed deadlines) ---------------

def _schedule_command():
    try:
        from pyembed.scheduler.cli import schedule_command
    except ImportError:        # the scheduler is optional while it is being built
        return None

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


if _schedule_command() is not None:
    main.add_command(_schedule_command())


# -- simulate ------------------------------------------------------------------------------------------

def _parse_segments(text):
    if text is None:
        return None
    from pyembed.planner.cli import parse_size
    if os.path.isfile(text):
        return text
    try:
        return parse_size(text)
    except PlanError:
        raise click.BadParameter(f"{text!r} is neither a byte budget (e.g. 96000, 96K) nor an existing "
                                 f"segments.json file", param_hint="--segments") from None


def _first_sample(graph, path):
    from pyembed.accuracy import load_inputs
    samples = load_inputs(graph, path)
    xs = samples[0]
    return xs[0] if len(xs) == 1 else xs


@main.command("simulate", short_help="Run a model on a simulated MCU: latency, RAM and flash, bit-exactness, report.")
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("-p", "--profile", default="stm32f446", show_default=True,
              help="MCU profile: a bundled part name (see 'pyembed profiles') or a .json file.")
@click.option("--plan", "plan_path", type=click.Path(exists=True, dir_okay=False),
              help="plan.json from 'pyembed plan' (default: a greedy plan in the profile's activation RAM).")
@click.option("--segments", metavar="BYTES|FILE",
              help="Run from external flash: a RAM budget for weight segments (e.g. 96K), loaded by DMA, or a "
                   "segments.json. Default: weights resident in internal flash (or the segments stored in "
                   "plan.json).")
@click.option("--strategy", type=click.Choice(["overlap", "serial", "all"]), default="overlap", show_default=True,
              help="With --segments: load the next segment while this one runs (overlap), load then run each "
                   "(serial), or load everything first (all).")
@click.option("--split-bytes", metavar="BYTES", default=None,
              help="With --segments: cut conv / depthwise / FC weights larger than this into output-channel "
                   "groups, so a segment boundary may fall inside a large layer (e.g. 8K).")
@click.option("--contention/--no-contention", default=True, show_default=True,
              help="Slow the CPU while DMA shares the bus (the profile's dma.cpu_stall_per_word).")
@click.option("--input", "input_path", type=click.Path(exists=True, dir_okay=False),
              help="Input .npy (int8 as is, float quantized with the input's scale); default: seeded random.")
@click.option("--seed", default=0, show_default=True, help="Seed of the random input.")
@click.option("--deadline-ms", type=float, default=None,
              help="Frame deadline: exit 1 when the simulated latency exceeds it.")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False),
              help="Write a Chrome/Perfetto trace (open in https://ui.perfetto.dev).")
@click.option("--plot-memory", type=click.Path(dir_okay=False), help="PNG of RAM in use over time.")
@click.option("--plot-gantt", type=click.Path(dir_okay=False), help="PNG Gantt of compute and DMA.")
@click.option("--report", "report_dir", type=click.Path(file_okay=False),
              help="Write a self-contained HTML report (and report.md) into this directory.")
@click.option("--calibration", default=4, show_default=True,
              help="With --report: random inputs for the report's accuracy table.")
@click.option("--ops/--no-ops", "show_ops", default=True, show_default=True, help="Print the per-operator table.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable result (Result.to_dict()).")
def simulate_command(model, profile, plan_path, segments, strategy, split_bytes, contention, input_path, seed,
                     deadline_ms, trace_path, plot_memory, plot_gantt, report_dir, calibration, show_ops, as_json):
    """Run MODEL on a simulated microcontroller: the real C kernels on the
    profile's RAM and flash, with its cycle cost model and DMA.

    Prints the latency, RAM and flash use per region, whether the outputs
    are bit-exact with the host run, and the time of each operator. Exit 1
    if the plan does not fit the part, the firmware faults, the outputs
    differ from the host run or the deadline is missed."""
    from firmware_sim.profiles import load_profile
    from firmware_sim.sim import simulate_file
    from pyembed.graph import load_model

    prof = load_profile(profile)
    graph = load_model(model)
    plan = None
    if plan_path:
        from pyembed.planner import load_plan
        try:
            plan = load_plan(plan_path)
        except PlanError as e:
            raise PlanError(f"--plan {plan_path}: {e}") from None   # a malformed file: bad input (2)
        if plan.graph_name and plan.graph_name != graph.name:
            from pyembed.errors import ArgumentError
            raise ArgumentError(f"--plan {plan_path} was made for model {plan.graph_name!r}, not {graph.name!r}")
    seg = _parse_segments(segments)
    split = None
    if split_bytes is not None:
        from pyembed.planner.cli import parse_size
        try:
            split = parse_size(split_bytes)
        except PlanError:
            raise click.BadParameter(f"{split_bytes!r}: expected bytes such as 8192 or 8K",
                                     param_hint="--split-bytes") from None
    if split is not None and not isinstance(seg, int):
        from pyembed.errors import ArgumentError
        raise ArgumentError("--split-bytes: needs --segments BYTES (a RAM budget for the weight segments)")
    x = _first_sample(graph, input_path) if input_path else None
    result, _, exact = run_with_progress(
        "simulating", lambda: simulate_file(graph, prof, plan=plan, x=x, segments=seg, strategy=strategy, seed=seed,
                                            trace_path=trace_path, memory_png=plot_memory, gantt_png=plot_gantt,
                                            split_bytes=split, contention=contention),
        expected_seconds=max(2.0, graph.macs / 4e6))
    missed = deadline_ms is not None and result.latency_ms > deadline_ms
    report_paths = None
    if report_dir:
        from pyembed import report as R
        accuracy = None
        if calibration > 0:
            from pyembed.accuracy import check_accuracy
            accuracy = check_accuracy(graph, n=calibration, seed=seed, progress=progress_iter)
        if plan is None:
            from firmware_sim.sim import default_plan
            plan, _ = default_plan(graph, prof)
        report_paths = R.write_report(report_dir, graph, result, plan=plan, accuracy=accuracy, bit_exact=exact,
                                      deadline_ms=deadline_ms)
    if as_json:
        d = result.to_dict()
        d.update({"bit_exact_with_host": exact, "deadline_ms": deadline_ms,
                  "meets_deadline": None if deadline_ms is None else not missed,
                  "files": {k: v for k, v in (("trace", trace_path), ("memory_png", plot_memory),
                                              ("gantt_png", plot_gantt)) if v}})
        if report_paths:
            d["files"].update(report_paths)
        _echo_json(d)
    else:
        click.echo(result.summary())
        click.echo(f"  outputs {'bit-exact with' if exact else 'DIFFER from'} the host run of the same graph")
        if deadline_ms is not None:
            click.echo(f"  deadline {deadline_ms:g} ms: " + ("MISSED" if missed else
                                                            f"met with {deadline_ms - result.latency_ms:.3f} ms "
                                                            f"to spare"))
        if show_ops:
            click.echo("")
            click.echo(result.op_table())
        for what, p in (("trace", trace_path), ("memory plot", plot_memory), ("Gantt plot", plot_gantt)):
            if p:
                click.echo(f"wrote {what}: {p}")
        if report_paths:
            click.echo(f"wrote report: {report_paths['html']} (and {report_paths['markdown']})")
    sys.exit(EXIT_CHECK_FAILED if (missed or not exact) else EXIT_OK)


# -- check -------------------------------------------------------------------------------------------

@main.command("check", short_help="Accuracy: int8 vs float64 per layer (SNR, LSB error), bit-exactness with TFLite.")
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("--inputs", "inputs_path", type=click.Path(exists=True, dir_okay=False),
              help="Inputs .npy (one sample, or a batch along a new first axis) or .npz (one array per model "
                   "input). Integer arrays are used as they are; float arrays are real values, quantized with "
                   "the input's scale and zero point. Default: --calibration random inputs.")
@click.option("--calibration", "n", default=8, show_default=True, metavar="N",
              help="Number of random inputs (uniform over the input type's range) when --inputs is not given.")
@click.option("--seed", default=0, show_default=True, help="Seed of the random inputs.")
@click.option("--min-snr", default=20.0, show_default=True, metavar="DB",
              help="Flag layers whose SNR against float64 is below this many dB.")
@click.option("--table", "mode", type=click.Choice(["end-to-end", "per-layer"]), default="end-to-end",
              show_default=True,
              help="end-to-end: the float reference runs from the same input (error accumulated up to each "
                   "layer); per-layer: each float layer is fed the int8 values of its inputs (the error that "
                   "layer adds).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="PNG of the per-layer SNR (both tables). Default: MODEL-snr.png in the current directory.")
@click.option("--no-plot", is_flag=True, help="Do not write the PNG.")
@click.option("--oracle/--no-oracle", default=True, show_default=True,
              help="Compare the outputs bit for bit with LiteRT (BUILTIN_REF) and tflite-micro where installed.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable report (both tables).")
def check_command(model, inputs_path, n, seed, min_snr, mode, plot_path, no_plot, oracle, as_json):
    """Fixed-point accuracy of MODEL: its int8 layers against a float64
    reference of the same network, and bit-exactness against the TensorFlow
    Lite reference interpreters.

    Per layer: SNR in dB, max and mean absolute error in output LSBs, cosine
    similarity, and the share of float values outside what the int8 output
    can represent (saturation; random inputs cause a lot, so pass real data
    with --inputs when you have it). Exit 1 if an interpreter disagrees or a
    layer of the shown table is below --min-snr."""
    from pyembed.accuracy import MODE_TITLES, check_accuracy
    from pyembed.graph import load_model

    graph = load_model(model)
    if inputs_path is None and n < 1:
        raise click.BadParameter("expected at least 1", param_hint="--calibration")
    key = mode.replace("-", "_")
    rep = check_accuracy(graph, inputs=inputs_path, n=n, seed=seed, min_snr_db=min_snr, oracles=oracle,
                         progress=progress_iter)
    png = None
    if not no_plot:
        png = plot_path or f"{graph.name}-snr.png"
        rep.plot_snr(png)
    failed = rep.bit_exact is False or bool(rep.flagged(key))
    if as_json:
        d = rep.to_dict()
        d.update({"table": key, "plot": png, "ok": not failed})
        _echo_json(d)
    else:
        click.echo(f"table: {MODE_TITLES[key]}")
        click.echo(rep.table(key))
        click.echo("")
        for line in rep.summary_lines(key):
            click.echo(line)
        if oracle:
            for line in rep.oracle_lines():
                click.echo(line)
        if png:
            click.echo(f"wrote per-layer SNR plot: {png}")
    sys.exit(EXIT_CHECK_FAILED if failed else EXIT_OK)


# -- profiles ---------------------------------------------------------------------------------------

def _profile_dict(p):
    return {"name": p.name, "part": p.part, "core": p.core, "clock_hz": p.clock_hz,
            "regions": [{"name": r.name, "kind": r.kind, "base": r.base, "size": r.size, "bandwidth": r.bandwidth,
                         "read_wait": r.read_wait, "write_wait": r.write_wait} for r in p.regions.values()],
            "ram_bytes": sum(r.size for r in p.ram_regions()),
            "flash_bytes": p.regions[p.flash_region].size if p.flash_region in p.regions else 0,
            "dma": {"channels": p.dma.channels, "bandwidth": p.dma.bandwidth, "setup_cycles": p.dma.setup_cycles},
            "defaults": dict(p.defaults), "sources": list(p.sources), "path": p.path}


@main.command("profiles", short_help="List the MCU profiles (parts) the simulator knows, or describe some.")
@click.argument("names", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable list.")
def profiles_command(names, as_json):
    """List the MCU profiles the simulator knows (bundled, plus any JSON in
    $PYEMBED_PROFILE_PATH), or describe the NAMES given: clock, every memory
    region with its address, size and bandwidth, DMA."""
    from firmware_sim.profiles import list_profiles, load_profile
    profs = [load_profile(n) for n in (names or list_profiles())]
    if as_json:
        _echo_json([_profile_dict(p) for p in profs])
        return
    if names:
        for p in profs:
            click.echo(p.describe())
            if p.sources:
                click.echo("  sources: " + "; ".join(p.sources))
        return
    click.echo(f"{'profile':<14} {'part':<24} {'core':<13} {'MHz':>5} {'RAM KB':>7} {'flash KB':>9}  RAM regions")
    for p in profs:
        d = _profile_dict(p)
        rams = ", ".join(f"{r.name} {r.size // 1024}K" for r in p.ram_regions())
        part = p.part.split(" (")[0][:24]
        click.echo(f"{p.name:<14} {part:<24} {p.core:<13} {p.clock_hz / 1e6:>5g} {d['ram_bytes'] // 1024:>7} "
                   f"{d['flash_bytes'] // 1024:>9}  {rams}")
    click.echo("details: pyembed profiles NAME; add parts as JSON files on $PYEMBED_PROFILE_PATH")


# -- vectors -----------------------------------------------------------------------------------------

@main.group()
def vectors():
    """Bit-exact test vectors from other libraries."""


@vectors.command("check")
@click.argument("directory", required=False, type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--op", "ops", multiple=True, help="Only cases of this op (repeatable).")
@click.option("--max-listed", default=20, show_default=True,
              help="Mismatching elements listed per failed case (0 = all).")
def vectors_check(directory, as_json, ops, max_listed):
    """Run every case in DIRECTORY (index.json + one .npz per case) through
    pyembed's kernels and compare bit for bit.

    DIRECTORY defaults to the CMSIS-NN vectors bundled with pyembed. Prints a
    line per case and a final 'N passed, M failed[, K skipped]'; exits 1 if
    any case failed."""
    from pyembed import vectors as V
    from pyembed.data import PEER_VECTORS_DIR
    directory = directory or PEER_VECTORS_DIR
    results = V.check_directory(directory, ops=set(ops) or None)
    failed = any(r.status in ("fail", "error") for r in results)
    if as_json:
        click.echo(json.dumps({
            "directory": directory,
            "cases": [{"name": r.name, "op": r.op, "status": r.status, "elements": r.elements,
                       "message": r.message,
                       "mismatches": [{"index": list(i), "got": g, "expected": e} for i, g, e in r.mismatches]}
                      for r in results],
            "summary": V.summary_line(results),
        }, indent=1))
    else:
        for r in results:
            click.echo(r.line(max_listed or None))
        click.echo(V.summary_line(results))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
