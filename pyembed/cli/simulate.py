"""`pyembed simulate`: run a model on a simulated MCU."""
import os
import sys

import click

from pyembed.errors import PlanError

from pyembed.cli.app import EXIT_CHECK_FAILED, EXIT_OK, _echo_json, _jsonable, progress_iter, run_with_progress  # noqa: F401
from pyembed.target.planning import CUTS, brief
from pyembed.cli.options import (verbose_option, apply_attention, attention_option, check_deadline, force_option, inputs_option,
                                 models_argument, cut_option, single_model, one_sample, profile_option, max_extra_macs_option, require_quantized, stream_input_option, stream_output_option, strategy_option, split_line_stores_option,
                                 wide_blocks_option,
                                 optimize_option, optimize_summary)


# -- simulate ------------------------------------------------------------------------------------------

def _parse_segments(text):
    if text is None:
        return None
    from pyembed.cli.plan import parse_size
    if os.path.isfile(text):
        return text
    try:
        return parse_size(text)
    except PlanError:
        raise click.BadParameter(f"{text!r} is neither a byte budget (e.g. 96000, 96K) nor an existing "
                                 f"segments.json file", param_hint="--segments") from None


def _weight_block(seg):
    """The weight block a stripe region must fit (it is loaded whole): the
    --segments budget, or the budget a segments.json was divided for (its
    plan's rewrite respected it; the same rewrite must be redone here)."""
    if isinstance(seg, int):
        return seg
    if isinstance(seg, str):
        import json
        try:
            with open(seg) as f:
                return int(json.load(f)["budget_bytes"])
        except (OSError, ValueError, KeyError, TypeError):
            return None   # a malformed file is reported where it is loaded
    return None


@click.command("simulate", short_help="Run a model on a simulated MCU: latency, RAM and flash, bit-exactness, report.")
@models_argument()
@profile_option()
@click.option("--plan", "plan_path", type=click.Path(exists=True, dir_okay=False),
              help="plan.json from 'pyembed plan' (default: planned here as 'pyembed plan' plans it, on every RAM region of the profile).")
@click.option("--segments", metavar="BYTES|FILE",
              help="Run from external flash: a RAM budget for weight segments (e.g. 96K), loaded by DMA, or a "
                   "segments.json. Default: weights resident in internal flash (or the segments stored in "
                   "plan.json). Required with several models.")
@cut_option()
@click.option("--strategy", type=click.Choice(["overlap", "serial", "all"]), default="overlap", show_default=True,
              help="With --segments: load the next segment while this one runs (overlap), load then run each "
                   "(serial), or load everything first (all).")
@click.option("--split-bytes", metavar="BYTES", default=None,
              help="With --segments: cut conv / depthwise / FC weights larger than this into output-channel "
                   "groups, so a segment boundary may fall inside a large layer (e.g. 8K).")
@click.option("--contention/--no-contention", default=True, show_default=True,
              help="Slow the CPU while DMA shares the bus (the profile's dma.cpu_stall_per_word).")
@inputs_option("One input sample, .npy (or .npz with one array per model input); integers as they are, floats "
               "quantized with the input's scale. Default: seeded random.")
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
              help="With --report: random inputs for the report's accuracy table when pyembed has no bundled "
                   "samples for the model.")
@click.option("--ops/--no-ops", "show_ops", default=True, show_default=True, help="Print the per-operator table.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable result (Result.to_dict()).")
@attention_option()
@strategy_option("--pipeline", help_extra="With --plan, the one the plan.json records (none for a plan that "
                 "records none).")
@optimize_option()
@max_extra_macs_option("--pipeline")
@stream_input_option("The input arrives row by row into the stripe region reading it (as 'pyembed plan "
                     "--stream-input'; a plan.json made with it implies it).")
@stream_output_option("The output leaves row by row through a row sink from the stripe region writing it (as "
                      "'pyembed plan --stream-output'; a plan.json made with it implies it).")
@split_line_stores_option()
@wide_blocks_option()
@force_option()
@verbose_option()
def simulate_command(model, profile, plan_path, segments, strategy, split_bytes, contention, inputs_path, seed,
                     deadline_ms, trace_path, plot_memory, plot_gantt, report_dir, calibration, show_ops, as_json,
                     attention="auto", pipeline=None, max_extra_macs="10%", stream_input=False, force=False,
                     optimize="balanced", verbose=False, segment_cut="latency", stream_output=False,
                     split_stores=False, wide_blocks=None):
    """Run MODEL on a simulated microcontroller: the real C kernels on the
    profile's RAM and flash, with its cycle cost model and DMA.

    Several models (MODEL MODEL ... --segments BYTES) are one use case run one
    after the other through one weight block: planned as 'pyembed plan'
    plans them, the chained division is run on the simulator's event core
    with the layers' modelled cycles (DMA loads and compute), serial and
    overlapped; then each model's part of that division runs with the real
    kernels on the simulated MCU (from a cold start, a seeded random input):
    its cycles and whether its outputs equal the host run (exit 1 if not).

    Prints the latency, RAM and flash use per region, whether the outputs
    are bit-exact with the host run, and the time of each operator. Exit 1
    if the plan does not fit the part, the firmware faults, the outputs
    differ from the host run or the deadline is missed. Without --plan the
    model is planned as 'pyembed plan' plans it (same options, same
    arena); the output ends with the same verdict line."""
    from firmware_sim.profiles import load_profile
    from firmware_sim.sim import simulate_file
    from pyembed.model.load import load_model

    from pyembed.model.support import require_executable

    check_deadline(deadline_ms)
    models = model
    model = single_model(models, segments, "simulate")
    if model is None:
        return _simulate_use_case(models, profile, segments, segment_cut, pipeline, optimize, max_extra_macs,
                                  attention, contention, as_json,
                                  plan_path or split_bytes or inputs_path or trace_path or report_dir or stream_input
                                  or stream_output or split_stores or wide_blocks)
    prof = load_profile(profile)
    graph = load_model(model)
    require_quantized(graph, "simulate")
    seg = _parse_segments(segments)
    seg_run = seg if not isinstance(seg, int) else None   # what the simulation runs: a division, a file, or None
    plan_lines = []     # what the planning path chose, printed once the inputs are checked
    optimize_info = None
    if plan_path:
        require_executable(graph, "simulate")   # unsupported operators or float activations: exit 2 with the list
        from pyembed.plan import load_plan
        try:
            plan = load_plan(plan_path)
        except PlanError as e:
            raise PlanError(f"--plan {plan_path}: {e}") from None   # a malformed file: bad input (2)
        recorded = plan.info.get("pipeline")
        rec_att = plan.info.get("attention")
        if rec_att in ("tflm", "stream"):
            attention = rec_att   # the plan was made for the fused graph: the same passes
        if isinstance(recorded, dict) and recorded.get("strategy") in ("layers", "stripes", "auto"):
            # the plan was made for the rewritten graph: the same rewrite
            pipeline, max_extra_macs = recorded["strategy"], str(recorded.get("max_extra_macs", 0.1))
            stream_input = bool(recorded.get("stream_input", False))
            stream_output = bool(recorded.get("stream_output", False))
            split_stores = bool(recorded.get("split_stores", False))
            wide_blocks = bool(recorded.get("wide_blocks", False))
            drop_regions = tuple(int(d) for d in recorded.get("drop_regions", ()))
        else:
            pipeline, stream_input, stream_output = "none", False, False   # a plan of the graph as imported
            split_stores = wide_blocks = False
            drop_regions = ()
        for line in apply_attention(graph, attention):
            if not as_json:
                click.echo(line)
        from pyembed.plan.widen import replay_forms
        graph = replay_forms(graph, plan.info)   # a lean plan: the forms it started from
        if pipeline != "none":
            from pyembed.cli.plan import apply_strategy
            graph, pipeline_lines = apply_strategy(graph, pipeline, max_extra_macs, stream_input=stream_input,
                                                   max_region_weights=_weight_block(seg), stream_output=stream_output,
                                                   split_stores=split_stores, wide_blocks=wide_blocks,
                                                   drop_regions=drop_regions)
            if not as_json:
                for line in (pipeline_lines if verbose else brief(pipeline_lines)):
                    click.echo(line)
        if plan.info.get("dsp_granted"):
            from pyembed.plan.widen import replay
            graph = replay(graph, plan.info["dsp_granted"])   # the DSP scratch the plan was made with
        if plan.graph_name and plan.graph_name != graph.name:
            from pyembed.errors import ArgumentError
            raise ArgumentError(f"--plan {plan_path} was made for model {plan.graph_name!r}, not {graph.name!r}")
    else:
        # the one planning path (pyembed.target.planning), as pyembed plan / firmware / demo plan it
        from pyembed.cli.plan import parse_fraction
        from pyembed.errors import FitError
        from pyembed.target.planning import PlanOptions, failure_verdict, plan_for_target
        if stream_input and pipeline not in ("stripes", "auto", None):
            from pyembed.errors import ArgumentError
            raise ArgumentError("--stream-input: needs --pipeline stripes or auto (a stripe region reads the rows)")
        if stream_output and pipeline not in ("stripes", "auto", None):
            from pyembed.errors import ArgumentError
            raise ArgumentError("--stream-output: needs --pipeline stripes or auto (a stripe region writes the rows)")
        options = PlanOptions(strategy=pipeline, optimize=optimize,
                              max_extra_macs=parse_fraction(max_extra_macs, "--max-extra-macs"),
                              stream_input=stream_input, attention=attention, weight_block=_weight_block(seg),
                              segment_cut=segment_cut, stream_output=stream_output, split_stores=split_stores,
                              wide_blocks=wide_blocks)
        try:
            tp = plan_for_target(graph, prof, options, action="simulate")
        except FitError as e:
            if not as_json:
                click.echo(failure_verdict(e))
            raise
        graph, plan = tp.graph, tp.plan
        plan_lines = tp.brief_lines(verbose)
        if isinstance(seg, int) and split_bytes is None:
            # the one division plan and firmware make (pyembed.target.planning.segment_division)
            seg_run = tp.segment_plan()
        optimize_info = optimize_summary(tp)
    split = None
    if split_bytes is not None:
        from pyembed.cli.plan import parse_size
        try:
            split = parse_size(split_bytes)
        except PlanError:
            raise click.BadParameter(f"{split_bytes!r}: expected bytes such as 8192 or 8K",
                                     param_hint="--split-bytes") from None
    if split is not None and not isinstance(seg, int):
        from pyembed.errors import ArgumentError
        raise ArgumentError("--split-bytes: needs --segments BYTES (a RAM budget for the weight segments)")
    if seg_run is None and isinstance(seg, int) and (plan_path or split is not None):
        seg_run = seg   # divided by simulate_file (with --split-bytes, or for a plan.json given)
    x = None
    if inputs_path:
        xs = one_sample(graph, inputs_path)
        x = xs[0] if len(xs) == 1 else xs
    if not as_json:
        for line in plan_lines:
            click.echo(line)
    result, _, exact = run_with_progress(
        "simulating", lambda: simulate_file(graph, prof, plan=plan, x=x, segments=seg_run, strategy=strategy, seed=seed,
                                            trace_path=trace_path, memory_png=plot_memory, gantt_png=plot_gantt,
                                            split_bytes=split, contention=contention, criteria=CUTS[segment_cut]),
        expected_seconds=max(2.0, graph.macs / 4e6))
    missed = deadline_ms is not None and result.latency_ms > deadline_ms
    from pyembed.target.planning import fits, verdict_line
    # a segment block or streamed weights are part of the run: the verdict counts what the run placed
    seg_used = (result.region_used, result.flash_bytes) if result.segments is not None else (None, None)
    verdict, fit = verdict_line(plan, prof, *seg_used), fits(plan, prof, *seg_used)
    seg_note, seg_lines, seg_dict = None, [], None
    if isinstance(seg, int):   # a block the user named: say whether and how the model was divided
        from firmware_sim.autoseg import describe, segment_note, to_dict
        seg_note = segment_note(graph, seg, result.segments)
        seg_dict = to_dict(graph, seg, result.segments)
        if result.segments is not None:
            seg_lines = describe(graph, result.segments)
    im = getattr(prof, "instruction_model", None)
    cost_line = (f"cycle model: {im['source']}" if im is not None else
                 f"cycle model: {prof.core} class table ({prof.cost_source or 'cores.json'})")
    report_paths = None
    if report_dir:
        from pyembed.check import report as R
        accuracy = None
        if calibration > 0:
            from pyembed.check.accuracy import check_accuracy
            from pyembed.check.samples import bundled_samples
            # the pipeline's operators compute what the imported ones do: accuracy on the imported graph
            source = getattr(graph, "pipeline_source", graph)
            known = bundled_samples(source)
            accuracy = check_accuracy(source, inputs=known, n=calibration, seed=seed, progress=progress_iter)
        report_paths = R.write_report(report_dir, graph, result, plan=plan, accuracy=accuracy, bit_exact=exact,
                                      deadline_ms=deadline_ms, verdict=verdict, force=force)
    if as_json:
        d = result.to_dict()
        d.update({"bit_exact_with_host": exact, "deadline_ms": deadline_ms, "segment_note": seg_note,
                  "segmentation": seg_dict, "cycle_model": cost_line,
                  "meets_deadline": None if deadline_ms is None else not missed,
                  "arena": int(plan.arena_size), "plan_regions": plan.region_used(), "flash": int(plan.flash_size),
                  "verdict": verdict, "fits": fit, "optimize": optimize_info,
                  "files": {k: v for k, v in (("trace", trace_path), ("memory_png", plot_memory),
                                              ("gantt_png", plot_gantt)) if v}})
        if report_paths:
            d["files"].update(report_paths)
        _echo_json(d)
    else:
        click.echo(result.summary())
        click.echo(f"  {cost_line}")
        if seg_note:
            click.echo(f"  segments: {seg_note}")
            for line in seg_lines:
                click.echo(f"    {line}")
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
            for why in report_paths.get("missing", ()):
                click.echo(f"  charts left out of the report: {why}")
        click.echo(verdict)
    sys.exit(EXIT_CHECK_FAILED if (missed or not exact or not fit) else EXIT_OK)


def _simulate_use_case(models, profile, segments, segment_cut, pipeline, optimize, max_extra_macs, attention,
                       contention, as_json, single_only):
    """simulate MODEL MODEL ... --segments BYTES (pyembed.target.usecase)."""
    from pyembed.cli.plan import parse_fraction, use_case_budget
    from pyembed.errors import ArgumentError
    from pyembed.target.planning import PlanOptions
    from pyembed.target.usecase import plan_use_case, simulate_use_case
    if single_only:
        raise ArgumentError("several models: --plan, --split-bytes, --inputs, --trace, --report, --stream-input, --stream-output, --split-line-stores and "
                            "--wide-blocks take one MODEL")
    if os.path.isfile(str(segments)):
        raise ArgumentError("--segments: several models take a byte budget (e.g. 96K), not a segments.json")
    budget = use_case_budget(profile, segments)
    options = PlanOptions(strategy=pipeline, optimize=optimize,
                          max_extra_macs=parse_fraction(max_extra_macs, "--max-extra-macs"), attention=attention,
                          weight_block=budget, segment_cut=segment_cut)
    uc = plan_use_case(list(models), profile, options)
    t = simulate_use_case(uc, contention=contention)
    from pyembed.target.usecase import run_models
    runs = run_models(uc, contention=contention)
    exact = all(r["bit_exact"] for r in runs)
    ms = uc.profile.cycles_to_ms
    fit = uc.fits()
    if as_json:
        d = uc.to_dict()
        d.update({"simulated_cycles": t, "simulated_ms": {k: ms(v) for k, v in t.items()}, "fits": fit,
                  "measured_by": "firmware_sim event core with the layers' modelled cycles",
                  "kernel_runs": runs, "bit_exact_with_host": exact,
                  "verdicts": {n: tp.verdict() for n, tp in zip(uc.names, uc.plans)}})
        _echo_json(d)
    else:
        for n, tp in zip(uc.names, uc.plans):
            click.echo(f"{n}: arena {int(tp.plan.arena_size):,} B (--pipeline {tp.strategy}); {tp.verdict()}")
        click.echo(f"segments ({segment_cut} cuts):")
        for line in uc.lines():
            click.echo(f"  {line}")
        click.echo(f"simulated on {uc.profile.name} ({uc.profile.clock_hz / 1e6:g} MHz), the event core with the "
                   f"layers' modelled cycles{' and bus contention' if contention else ''}:")
        click.echo(f"  overlap (segment k+1 loads while k runs): {t['overlap']:,} cycles = {ms(t['overlap']):.3f} ms")
        click.echo(f"  serial (load a segment, then run it):     {t['serial']:,} cycles = {ms(t['serial']):.3f} ms")
        click.echo(f"  analytic bound L1 + sum max(C_k, L_k+1) + C_n: {t['bound']:,} cycles = {ms(t['bound']):.3f} ms")
        click.echo("each model's segments with the real kernels on the simulated MCU (from a cold start, seeded "
                   "random input):")
        for r in runs:
            click.echo(f"  {r['model']}: {r['segments']} segments, {r['cycles']:,} cycles = {ms(r['cycles']):.3f} ms, "
                       f"{r['dma_bytes']:,} B by DMA, outputs "
                       f"{'bit-exact with' if r['bit_exact'] else 'DIFFER from'} the host run")
    sys.exit(EXIT_OK if fit and exact else EXIT_CHECK_FAILED)


# -- check -------------------------------------------------------------------------------------------
