"""``pyembed plan MODEL [--profile PART] -o DIR``: plan a model's memory and
write memplan.h, model_data.c/.h and plan.json (and, with --tflite-out, the
model with the plan as TFLite Micro OfflineMemoryAllocation metadata).

The lead attaches ``plan_command`` to the ``pyembed`` group in cli.py."""
import json
import re

import click

from pyembed.cli.options import (verbose_option, attention_option, cut_option, fc_int16_weights_option,
                                 force_option, max_extra_macs_option, models_argument, profile_option, require_quantized,
                                 single_model,
                                 optimize_option, optimize_summary, stream_input_option, strategy_option,
                                 stream_output_option, split_line_stores_option,
                                 wide_blocks_option)
from pyembed.errors import PlanError

_SIZE = re.compile(r"^\s*(\d+)\s*([kKmM]?)(i?[bB])?\s*$")


def parse_size(text):
    m = _SIZE.match(str(text))
    if not m:
        raise PlanError(f"region size {text!r}: expected bytes such as 65536, 64K or 1M")
    mult = {"": 1, "k": 1024, "m": 1024 * 1024}[m.group(2).lower()]
    return int(m.group(1)) * mult


def parse_region(text):
    """NAME=SIZE -> Region."""
    from pyembed.plan.core import Region
    if "=" not in text:
        raise PlanError(f"--region {text!r}: expected NAME=SIZE, e.g. dtcm=64K")
    name, size = text.split("=", 1)
    return Region(name.strip(), parse_size(size))


def regions_for_mcu(part):
    """RAM regions (TCM / SRAM, in the profile's order) of a firmware_sim
    profile: pyembed.target.planning.profile_regions, the regions of the one
    planning path."""
    from pyembed.target.planning import profile_regions
    return profile_regions(part)


def summary(plan):
    from pyembed.plan.report import used_overlaps
    used = plan.region_used()
    return {
        "model": plan.graph_name,
        "algorithm": plan.algorithm,
        "regions": [{"name": r.name, "size": r.size, "used": used[r.name]} for r in plan.regions],
        "arena": plan.arena_size,
        "lower_bound": plan.problem.lower_bound(),
        "no_reuse": sum(b.aligned_size for b in plan.buffers),
        "buffers": len(plan.buffers),
        "overlaps_used": len(used_overlaps(plan)),
        "overlap_bytes_shared": sum(s for _, s in used_overlaps(plan)),
        "flash": plan.flash_size,
        "seconds": plan.info.get("seconds"),
    }


@click.command("plan")
@models_argument()
@profile_option(default=None, dest="part", help_extra="Its RAM regions become the plan's regions.")
@click.option("--region", "region_specs", multiple=True, metavar="NAME=SIZE",
              help="A RAM region, e.g. dtcm=64K (repeatable, filled in order; overrides --profile's).")
@click.option("-o", "--outdir", required=True, type=click.Path(file_okay=False),
              help="Directory for memplan.h, model_data.c/.h and plan.json.")
@click.option("--algorithm", default="auto", show_default=True,
              type=click.Choice(["auto", "linear", "greedy_size", "greedy_conflicts", "order_search", "cpsat"]))
@click.option("--overlaps/--no-overlaps", default=True, show_default=True,
              help="Let row-streaming kernels write their output over finished input rows where running the "
                   "kernel proves it.")
@click.option("--search-order", is_flag=True, help="Search for an execution order with a lower peak.")
@click.option("--time-limit", default=10.0, show_default=True,
              help="Work budget of the CP-SAT search in its deterministic seconds (a count of work, not the "
                   "clock: the same plan on any machine).")
@click.option("--section", default=".pe_flash", show_default=True,
              help="Linker section of the constant arrays in model_data.c (letters, digits, '_' and '.').")
@click.option("--tflite-out", default=None, type=click.Path(dir_okay=False),
              help="Also write the .tflite model with the plan as OfflineMemoryAllocation metadata.")
@click.option("--timeline", "show_timeline", is_flag=True, help="Print the plan's timeline.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable summary.")
@attention_option()
@strategy_option()
@optimize_option()
@max_extra_macs_option()
@click.option("--segments", "segment_budget", metavar="BYTES", default=None,
              help="The RAM block for the weights (e.g. 32K; needs --profile): when the weights do not fit it, the "
                   "model is divided into segments loaded from flash while it runs, and the division is printed. "
                   "Required with several models.")
@cut_option()
@stream_input_option("The model input is delivered row by row (a camera) into the stripe region reading it, "
                     "so it takes no arena bytes; the emitted C then takes a row callback (pe_row_source) and "
                     "plan.json records it (stripes / auto only).")
@stream_output_option("The model output leaves row by row (a display, a DMA to the next stage): the stripe region "
                      "writing it hands each row to a row callback (pe_row_sink) as soon as it is final, so it "
                      "takes no arena bytes; with --stream-input such a region holds neither frame. plan.json "
                      "records it (stripes / auto only).")
@split_line_stores_option()
@wide_blocks_option()
@fc_int16_weights_option()
@force_option()
@verbose_option()
def plan_command(model, part, region_specs, outdir, algorithm, overlaps, search_order, time_limit, section,
                 tflite_out, show_timeline, as_json, attention="auto", pipeline=None, optimize="balanced",
                 max_extra_macs="10%", segment_budget=None, stream_input=False, fc_int16_weights=False,
                 fc_w16_min_macs=None, force=False, verbose=False, segment_cut="latency", stream_output=False,
                 split_stores=False, wide_blocks=None):
    """Plan the static memory of MODEL (.tflite / .onnx) and emit C headers.

    Several models (MODEL MODEL ...) with --segments are one use case run one
    after the other, their weights through one block: each is planned into
    DIR/<model>/, the chained division (a cut at every model boundary) is
    printed segment by segment and written to DIR/segments.json.

    Prints the arena per region against the liveness lower bound and ends
    with the verdict line (fits / does not fit, each RAM region and the
    flash used of capacity); fails (exit 1) with the number of missing bytes
    when the plan does not fit. simulate, firmware and demo plan the same way."""
    from pyembed.codegen.emit import write_plan_outputs
    from pyembed.errors import ArgumentError, FitError
    from pyembed.codegen.escape import check_section
    from pyembed.codegen.outdir import OutputDir
    from pyembed.model.load import load_model
    from pyembed.plan import plan_graph
    from pyembed.target.planning import PlanOptions, failure_verdict, plan_for_target

    check_section(section, "--section")
    models = model
    model = single_model(models, segment_budget, "plan")
    if model is None:
        return _plan_use_case(models, part, outdir, segment_budget, segment_cut, algorithm, pipeline, optimize,
                              max_extra_macs, attention, section, as_json, force, region_specs, tflite_out,
                              stream_input or stream_output or split_stores or wide_blocks)
    g = load_model(model)
    require_quantized(g, "plan")
    if attention in ("tflm", "stream") and tflite_out:
        raise click.UsageError("--tflite-out plans the .tflite as it is for TFLM: it cannot follow --attention")
    if tflite_out:
        attention = "none"   # the default (auto) gives way: the .tflite is planned as it is
    budget = None if segment_budget is None else use_case_budget(part, segment_budget)
    if stream_input and pipeline not in ("stripes", "auto", None):
        raise ArgumentError("--stream-input: needs --strategy stripes or auto (a stripe region reads the rows)")
    if stream_output and pipeline not in ("stripes", "auto", None):
        raise ArgumentError("--stream-output: needs --strategy stripes or auto (a stripe region writes the rows)")
    regions = [parse_region(r) for r in region_specs] if region_specs else None
    options = PlanOptions(strategy=pipeline, optimize=optimize, max_extra_macs=parse_fraction(max_extra_macs),
                          overlaps=overlaps,
                          algorithm=algorithm, search_order=search_order, time_limit=float(time_limit),
                          stream_input=stream_input, attention=attention, fc_int16_weights=fc_int16_weights,
                          fc_w16_min_macs=fc_w16_min_macs, weight_block=budget, segment_cut=segment_cut,
                          stream_output=stream_output, split_stores=split_stores, wide_blocks=wide_blocks)
    try:
        tp = plan_for_target(g, part, options, regions=regions, action="plan")
    except FitError as e:
        if not as_json:
            click.echo(failure_verdict(e))
        raise
    g, plan, imported = tp.graph, tp.plan, tp.imported
    attention_lines, pipeline_lines, fc_w16 = tp.attention_lines, tp.pipeline_lines, tp.fc_w16
    notes = []
    if plan.info.get("note"):
        notes.append(plan.info["note"])
    if overlaps and g.unsupported:
        notes.append("overlaps not attempted: the graph has operators pyembed cannot run, so none can be proven")
    if tflite_out:
        if g is not imported:
            # TFLM runs the .tflite as it is, not the rewritten graph: plan the imported one for it
            tplan, note = plan_for_tflm(imported, plan_graph(imported, plan.regions, algorithm=algorithm,
                                                             overlaps=False, time_limit=time_limit), time_limit)
        else:
            tplan, note = plan_for_tflm(g, plan, time_limit)
        if note:
            notes.append(note)
        from pyembed.codegen.tflite_offline import add_offline_plan, tune_for_tflm
        with open(model, "rb") as f:
            data = f.read()
        tplan, head = tune_for_tflm(data, tplan)
        if head is not None:
            notes.append(f"TFLM's arena head with this plan: {head} B (measured with tflite-micro)")
        tflite_bytes = add_offline_plan(data, tplan)
    s = summary(plan)
    s["notes"] = notes
    s["pipeline"] = pipeline_lines
    s["optimize"] = optimize_summary(tp)
    seg_lines = []
    if budget is not None:
        from firmware_sim import autoseg
        # the one division (pyembed.target.planning.segment_division): the block goes where the plan
        # leaves room for it (the activation RAM first)
        seg_plan = tp.segment_plan()
        s["segments"] = autoseg.to_dict(g, budget, seg_plan)
        seg_lines = [s["segments"]["note"]] + (autoseg.describe(g, seg_plan) if seg_plan is not None else [])
    # every file of the folder at the end, all or none (pyembed.codegen.outdir)
    with OutputDir(outdir, force=force, what="-o/--outdir") as out:
        paths = write_plan_outputs(g, plan, out, section=section)
        if budget is not None and seg_plan is not None:
            # pyembed simulate --segments FILE runs this division
            paths["segments"] = out.write_text("segments.json", seg_plan.to_json())
    if tflite_out:
        _write_file(tflite_out, tflite_bytes)
        paths["tflite"] = tflite_out
    s["files"] = paths
    s["attention"] = attention_lines
    s["fc_w16"] = fc_w16
    s["verdict"] = tp.verdict()
    s["fits"] = tp.fits()
    if as_json:
        click.echo(json.dumps(s, indent=1))
    else:
        click.echo(f"{s['model']}: arena {s['arena']} B ({s['algorithm']}), liveness lower bound {s['lower_bound']} B, "
                   f"no reuse {s['no_reuse']} B, {s['buffers']} buffers")
        for line in tp.brief_lines(verbose):
            click.echo(f"  {line}")
        for r in s["regions"]:
            cap = f" of {r['size']} B" if r["size"] is not None else ""
            click.echo(f"  region {r['name']}: {r['used']} B used{cap}")
        if s["overlaps_used"]:
            click.echo(f"  {s['overlaps_used']} proven output-over-input overlaps share {s['overlap_bytes_shared']} B")
        click.echo(f"  flash: {s['flash']} B of constants")
        for i, line in enumerate(seg_lines):
            click.echo(f"  {'segments: ' if i == 0 else '  '}{line}")
        for n in notes:
            click.echo(f"  note: {n}")
        for what, p in paths.items():
            click.echo(f"  wrote {p}")
        if show_timeline:
            click.echo(plan.timeline())
        click.echo(s["verdict"])
    if not s["fits"]:
        raise FitError(f"{s['model']} does not fit: {s['verdict'][len('verdict: '):]}")


def use_case_budget(part, segment_budget):
    """--segments BYTES (needs --profile), in bytes; ArgumentError naming the option otherwise."""
    from pyembed.errors import ArgumentError
    if not part:
        raise ArgumentError("--segments: needs --profile (the part whose flash and DMA load the segments)")
    try:
        budget = parse_size(segment_budget)
    except PlanError:
        raise ArgumentError(f"--segments {segment_budget!r}: expected bytes such as 32768 or 32K") from None
    if budget <= 0:
        raise ArgumentError(f"--segments {segment_budget!r}: expected a positive byte budget")
    return budget


def _plan_use_case(models, part, outdir, segment_budget, segment_cut, algorithm, pipeline, optimize, max_extra_macs,
                   attention, section, as_json, force, region_specs, tflite_out, stream_input):
    """plan MODEL MODEL ... --segments BYTES: pyembed.target.usecase."""
    import os
    from pyembed.codegen.emit import write_plan_outputs
    from pyembed.codegen.escape import check_section
    from pyembed.codegen.outdir import OutputDir
    from pyembed.errors import ArgumentError, FitError
    from pyembed.target.planning import PlanOptions
    from pyembed.target.usecase import plan_use_case
    check_section(section, "--section")
    if region_specs or tflite_out or stream_input:
        raise ArgumentError("several models: --region, --tflite-out, --stream-input, --stream-output, --wide-blocks and "
                            "--split-line-stores plan one model; "
                            "give one MODEL for them")
    budget = use_case_budget(part, segment_budget)
    options = PlanOptions(strategy=pipeline, optimize=optimize, max_extra_macs=parse_fraction(max_extra_macs),
                          algorithm=algorithm, attention=attention, weight_block=budget, segment_cut=segment_cut)
    uc = plan_use_case(list(models), part, options)
    names = [n if uc.names.count(n) == 1 else f"{n}_{k}" for k, n in enumerate(uc.names)]
    paths = {}
    with OutputDir(outdir, force=force, what="-o/--outdir") as out:
        paths["segments"] = out.write_text("segments.json", uc.segments.to_json())
    for name, tp in zip(names, uc.plans):
        for what, p in write_plan_outputs(tp.graph, tp.plan, os.path.join(outdir, name), section=section,
                                          force=force).items():
            paths[f"{name}/{what}"] = p
    fits = uc.fits()
    if as_json:
        d = uc.to_dict()
        d.update({"files": paths, "fits": fits,
                  "plans": {n: {"strategy": tp.strategy, "arena": int(tp.plan.arena_size), "verdict": tp.verdict()}
                            for n, tp in zip(names, uc.plans)}})
        click.echo(json.dumps(d, indent=1))
    else:
        for n, tp in zip(names, uc.plans):
            click.echo(f"{n}: arena {int(tp.plan.arena_size):,} B (--strategy {tp.strategy}), "
                       f"{sum(int(t.nbytes) for t in tp.graph.tensors if t.is_constant):,} B of weights; "
                       f"{tp.verdict()}")
        click.echo(f"segments ({segment_cut} cuts):")
        for line in uc.lines():
            click.echo(f"  {line}")
        for p in paths.values():
            click.echo(f"  wrote {p}")
    if not fits:
        free, need = uc.block_room()
        why = [f"{n}: {tp.verdict()[len('verdict: '):]}" for n, tp in zip(names, uc.plans) if not tp.fits()]
        if need > free:
            why.append(f"the {need:,} B block does not fit {uc.segments.block_region} beside the arenas "
                       f"({free:,} B free)")
        raise FitError("the use case does not fit: " + "; ".join(why))


def _write_file(path, data):
    """One file the user named (--tflite-out): written to a temporary name
    beside it and moved into place, so a failure leaves no half file."""
    import os
    import tempfile
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".pyembed-tmp-", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def parse_fraction(text, name="--max-extra-macs"):
    """'10%' or '0.1' -> 0.1."""
    t = str(text).strip()
    try:
        v = float(t[:-1]) / 100.0 if t.endswith("%") else float(t)
    except ValueError:
        v = float("nan")
    if not v >= 0:
        from pyembed.errors import ArgumentError
        raise ArgumentError(f"{name} {text!r}: expected a fraction >= 0 such as 10% or 0.1")
    return v


def apply_strategy(graph, strategy, max_extra_macs="10%", stream_input=False, max_region_weights=None,
                   stream_output=False, split_stores=False, wide_blocks=False, drop_regions=()):
    """The compiler pipeline (pyembed.passes.pipeline) on graph: returns the
    rewritten graph and the lines saying what was chosen per region and why
    (max_region_weights: a weight segment block, see apply_pipeline)."""
    from pyembed.passes.pipeline import apply_pipeline
    res = apply_pipeline(graph, strategy, max_extra_macs=parse_fraction(max_extra_macs), stream_input=stream_input,
                         max_region_weights=max_region_weights, stream_output=stream_output,
                         split_stores=split_stores, wide_blocks=wide_blocks, drop_regions=drop_regions)
    changed = res.regions or res.fused or res.streamed_tensor >= 0 or stream_input or stream_output or any(
        n.startswith(("gather", "PAD")) for n in res.notes)
    from pyembed.model.graph import imported_ops
    res.graph.origin = imported_ops(res.graph, graph)
    # the rewritten graph always (a plan.json of it must match); its report only when it changed anything
    return res.graph, res.report() if changed else []


def plan_for_tflm(graph, plan, time_limit=10.0):
    """A plan TFLite Micro can use: one region, tensors only (TFLM plans its
    own kernels' scratch), and no output-over-input overlaps unless they were
    proven for TFLM's kernels, whose read/write order differs from pyembed's.
    Returns (plan, note or None)."""
    from pyembed.plan import plan_graph
    from pyembed.plan.report import used_overlaps
    scratch = any(b.kind == "scratch" for b in plan.buffers)
    in_model_order = list(plan.order) == list(range(len(graph.operators)))
    if len(plan.regions) == 1 and not scratch and not used_overlaps(plan) and in_model_order:
        return plan, None
    # TFLM runs the operators in the order of the flatbuffer
    tplan = plan_graph(graph, None, algorithm="auto", order=None, include_scratch=False,
                       overlaps=False, time_limit=time_limit)
    return tplan, (f"the .tflite carries a TFLM-specific plan ({tplan.arena_size} B: one region, tensors only, "
                   f"no overlaps)")


# -- plan (the planner engineer's command, run with a progress bar) ---------------------------------

def command():
    """plan_command run with a progress bar (what `pyembed plan` is)."""
    from pyembed.cli.app import run_with_progress

    def callback(**kw):
        limit = float(kw.get("time_limit") or 10.0)
        return run_with_progress("planning", lambda: plan_command.callback(**kw), expected_seconds=limit)
    return click.Command(
        "plan", params=plan_command.params, callback=callback, help=plan_command.help,
        short_help="Plan a model's static RAM and write C headers (memplan.h, model_data.c, plan.json).",
        epilog="Exit codes: 0 planned, 1 the model does not fit the regions (the error says how many bytes are "
               "missing), 2 bad input.")
