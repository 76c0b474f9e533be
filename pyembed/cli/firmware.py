"""``pyembed firmware MODEL --profile PROFILE -o DIR [--strategy auto|layers|stripes|none]
[--stream-input] [--fc-int16-weights [--fc-int16-min-macs N]] [--io semihost|uart|none]
[--run --inputs X.npy] [--json] [--layout project|library]``.

``pyembed firmware A B ... --profile PROFILE --segments BYTES [-o DIR] [--build | --run]``
writes several models as one segmented use case, run one after the other
(pyembed.cli.firmware_usecase).

--layout library writes the model as a library for the user's own firmware
instead (pyembed.codegen.firmware.library): no harness, startup or fixed
address, the activations planned on the profile's RAM regions as for the
project, each region its own section the user's link places (pe_model_init
relocates the tables' offsets when there are several); --run, --build and
--segments are refused with it.

Writes a complete Cortex-M project (pyembed.codegen.firmware) of the graph the
compiler pipeline leaves (--strategy, as ``pyembed plan``: stripe regions and
fused conv->pool pairs in the model tables, the arena planned for that graph on
the profile's RAM; --stream-input: the input reaches the model row by row
through a pe_row_source and is not in the arena); with --run builds
it (make) and runs it under QEMU (the profiles named after a QEMU machine:
microbit, mps2-an385, mps2-an386, netduinoplus2, mps2-an500, mps2-an505,
mps3-an547), printing
the outputs, whether they equal the host run (Graph.run of the imported model)
element for element,
and the instructions of each operator (SysTick ticks * 1e9 / the SysTick
clock under -icount shift=0: 40-instruction resolution at 25 MHz), the peak stack of pe_model_invoke
measured by paint and scan beside its static bound (pyembed.target.stackbound)
and the flash per part from the link map; --build builds without running and
prints the bound and the flash. --run --inputs with a batch (one more leading
axis than the model's input) runs every sample and reports each (--json:
"samples"); the first sample stays in the project as pe_input.bin, so `make
run` there runs it again. --run on a profile no QEMU machine emulates is exit
2 before the model is loaded.

--io (pyembed.codegen.firmware.io): semihost (default) as above; uart: the
input (--inputs' one sample, else the seeded random one) is compiled into the
image and main.c prints the outputs and the SysTick counts on the board's UART
(--run reads them from QEMU's serial port); none: the same image without any
output, for a debugger (--run refuses it). A part that cannot boot the image
pyembed links (rp2040: it needs the Pico SDK's boot2) is refused, exit 2,
unless --boot2 FILE gives that 256-byte stage (its CRC-32/MPEG-2 checked).
"""
import json
import os
import tempfile

import click
import numpy as np

from pyembed.target.planning import brief
from pyembed.cli.options import (verbose_option, attention_option, fc_int16_weights_option, force_option, max_extra_macs_option,
                                 optimize_option, optimize_summary, stream_input_option, strategy_option, cut_option,
                                 stream_output_option, split_line_stores_option, wide_blocks_option)


@click.command("firmware")
@click.argument("model", nargs=-1, required=True)
@click.option("-p", "--profile", required=True, help="MCU profile (e.g. mps2-an386, microbit, mps3-an547; case-insensitive).")
@click.option("-o", "--outdir", type=click.Path(file_okay=False), default=None,
              help="Project directory (default with --run: a temporary directory).")
@click.option("--algorithm", default="auto", show_default=True,
              type=click.Choice(["auto", "linear", "greedy_size", "greedy_conflicts", "order_search", "cpsat"]),
              help="Memory planner algorithm.")
@click.option("--segments", "segments", metavar="BYTES", default=None,
              help="RAM budget for the weights (the execution block, e.g. 8K): when the weights do not fit, the "
                   "model is divided into segments loaded from flash while it runs (pe_segload).")
@cut_option()
@click.option("--layout", "layout", type=click.Choice(["project", "library"]), default="project", show_default=True,
              help="project: a complete QEMU project (main.c harness, startup, link.ld, Makefile); library: the "
                   "model for your own firmware (CMake target pyembed_model, Makefile fragment pyembed_model.mk, "
                   "linker fragment pyembed_sections.ld; no main, startup or fixed address; DIR/README.md).")
@click.option("--run", "do_run", is_flag=True, help="Build with make and run under QEMU.")
@click.option("--build", "do_build", is_flag=True,
              help="Build with make (no run): the static stack bound, the stack reserved and the flash per part.")
@click.option("--inputs", "inputs_path", type=click.Path(exists=True, dir_okay=False),
              help="With --run: input .npy/.npz, one sample or a batch (one more leading axis: every sample is "
                   "run); the first is kept as the project's pe_input.bin for `make run`; default: seeded "
                   "random int8.")
@click.option("--seed", default=0, show_default=True, help="Seed of the random input.")
@click.option("--io", "io", type=click.Choice(["semihost", "uart", "none"]), default="semihost", show_default=True,
              help="How the firmware talks: semihost (reads pe_input.bin, writes pe_output.bin through "
                   "semihosting: QEMU or a debugger), uart (the input compiled into the image, the results and "
                   "SysTick cycle counts printed on the board's UART: microbit, mps2-an385/386/500/505, mps3-an547, "
                   "netduinoplus2) or none (the input compiled in, no output: the results stay in pe_result_* "
                   "globals for a debugger; not with --run).")
@click.option("--boot2", "boot2_path", type=click.Path(exists=True, dir_okay=False), default=None,
              help="rp2040: your flash chip's 256-byte second-stage bootloader (boot2, e.g. the Pico SDK's "
                   "boot_stage2 image), its CRC-32/MPEG-2 checked as the boot ROM does; linked at the flash's first "
                   "256 bytes. Without it rp2040 is refused (exit 2).")
@attention_option()
@strategy_option()
@optimize_option()
@max_extra_macs_option()
@stream_input_option("The model input is delivered row by row into the stripe region reading it (a camera or DMA "
                     "driver: pe_model_invoke_rows with a pe_row_source; the harness reads the rows from a frame "
                     "outside the planned RAM), so the arena holds no input bytes (stripes / auto only).")
@stream_output_option("The model output leaves row by row from the stripe region writing it (a display or DMA "
                      "driver: pe_model_invoke_io with a pe_row_sink; the harness's sink copies each row, checked "
                      "in order, into a frame outside the planned RAM for the bit-exactness check), so the arena "
                      "holds no output bytes (stripes / auto only).")
@split_line_stores_option()
@wide_blocks_option()
@fc_int16_weights_option()
@force_option()
@verbose_option()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable result.")
def firmware_command(model, profile, outdir, algorithm, segments, do_run, inputs_path, seed, as_json, do_build=False,
                     attention="auto", pipeline=None, optimize="balanced", max_extra_macs="10%", stream_input=False,
                     fc_int16_weights=False, fc_w16_min_macs=None, force=False, verbose=False, segment_cut="latency",
                     layout="project", io="semihost", boot2_path=None, stream_output=False, split_stores=False,
                     wide_blocks=None):
    """Generate a Cortex-M firmware project for MODEL (.tflite/.onnx or a
    bundled model name) on PROFILE; with --run, build it and run it on QEMU.
    Several models (MODEL MODEL ... --segments BYTES) make one project that
    runs them one after the other as one segmented use case, the one
    'pyembed plan|simulate A B --segments BYTES' make (pyembed.cli.firmware_usecase).

    The graph and its plan are the ones 'pyembed plan' makes with the same
    options; the output ends with the same verdict line.

    DIR keeps a manifest of the files pyembed wrote (.pyembed-manifest.json):
    a rerun replaces those, anything else in the way is refused (exit 2)
    unless --force, and a failed run leaves DIR as it was.

    Exit 1 when the model does not fit or the firmware's outputs differ from
    the host run."""
    from pyembed.cli.model import _resolve
    from pyembed.target.firmware import generate
    from pyembed.cli.plan import parse_fraction
    from pyembed.errors import ArgumentError
    from pyembed.model.load import load_model

    if len(model) > 1:
        # several models, one after the other, as one segmented use case (pyembed.cli.firmware_usecase)
        from pyembed.cli.firmware_usecase import firmware_use_case
        single = [opt for opt, on in (("--inputs", inputs_path), ("--layout library", layout == "library"),
                                      ("--io " + io, io != "semihost"), ("--boot2", boot2_path),
                                      ("--stream-input", stream_input), ("--stream-output", stream_output),
                                      ("--split-line-stores", split_stores), ("--wide-blocks", wide_blocks),
                                      ("--fc-int16-weights", fc_int16_weights)) if on]
        firmware_use_case(model, profile, outdir, segments, segment_cut, pipeline, optimize, max_extra_macs,
                          attention, do_run, do_build, seed, as_json, force, ", ".join(single))
        return
    model = model[0]
    if stream_input and pipeline not in ("stripes", "auto", None):
        raise ArgumentError(f"--stream-input with --strategy {pipeline}: the input is streamed into a stripe region; "
                            f"use --strategy stripes or auto")
    if stream_output and pipeline not in ("stripes", "auto", None):
        raise ArgumentError(f"--stream-output with --strategy {pipeline}: the output is streamed from a stripe "
                            f"region; use --strategy stripes or auto")
    from pyembed.errors import FitError
    from pyembed.target.planning import PlanOptions, failure_verdict, plan_for_target
    library = layout == "library"
    if library and (do_run or do_build or segments is not None):
        what = "--run" if do_run else ("--build" if do_build else "--segments")
        raise ArgumentError(f"{what} with --layout library: the library has no harness or segment loader; build it "
                            f"into your firmware (DIR/README.md), or use --layout project")
    if library and (io != "semihost" or boot2_path is not None):
        raise ArgumentError(f"{'--io ' + io if io != 'semihost' else '--boot2'} with --layout library: the library "
                            f"has no main, startup or I/O (your firmware has them); use --layout project for a board "
                            f"example")
    # --io (pyembed.codegen.firmware.io): what the part and the run need, before loading the model
    from firmware_sim.profiles import load_profile as _load_profile
    from pyembed.codegen.firmware import io as fwio
    _prof = _load_profile(profile)
    boot2 = None
    if boot2_path is not None:
        with open(boot2_path, "rb") as f:
            boot2 = f.read()
    boot2 = fwio.check_boot(_prof.name, boot2)
    fwio.check_io(io, _prof.name)
    if do_run and io == "none":
        raise ArgumentError("--run with --io none: the firmware prints nothing, so there is no result to read; use "
                            "--io uart or semihost to run it, or --build and attach a debugger (results in "
                            "pe_result_*)")
    if do_run:
        # before loading, planning or generating anything: can this profile run at all?
        from firmware_sim.profiles import load_profile
        from pyembed.codegen.firmware import QEMU_MACHINES, qemu_machine
        prof = load_profile(profile)
        if qemu_machine(prof) is None:
            raise ArgumentError(f"--run: no QEMU machine emulates profile {prof.name} (QEMU runs "
                                f"{', '.join(sorted(QEMU_MACHINES))}); leave out --run to generate the project "
                                f"(--build to compile it) and flash firmware.elf with your tools")
    extra = parse_fraction(max_extra_macs)
    g = load_model(_resolve(model))
    if outdir is None:
        if not do_run:
            raise click.UsageError("-o/--outdir is required without --run")
    samples, run_input = None, None
    if do_run or io != "semihost":
        # the samples to run, checked before planning; the first is kept in the project (pe_input.bin;
        # --io uart / none: compiled into the image)
        from pyembed.cli.firmware_usecase import samples as _samples
        samples = _samples(g, inputs_path, seed)
        if io != "semihost" and len(samples) > 1:
            raise ArgumentError(f"--inputs: {len(samples)} samples; --io {io} compiles one input into the image "
                                f"(give one sample, or --io semihost to run a batch)")
        from pyembed.target.firmware import input_bytes
        run_input = {"data": input_bytes(g, samples[0]),
                     "source": os.path.abspath(inputs_path) if inputs_path else f"random int8, --seed {seed}",
                     "sample": 0, "samples": len(samples)}
    if outdir is None:
        outdir = tempfile.mkdtemp(prefix="pyembed_fw_")
    budget = None
    if segments is not None:
        from pyembed.cli.plan import parse_size
        budget = parse_size(segments)
    # the one planning path (pyembed.target.planning): the graph and plan pyembed plan / simulate make
    options = PlanOptions(strategy=pipeline, optimize=optimize, max_extra_macs=extra, algorithm=algorithm,
                          stream_input=stream_input, stream_output=stream_output, split_stores=split_stores,
                          wide_blocks=wide_blocks, attention=attention, fc_int16_weights=fc_int16_weights, fc_w16_min_macs=fc_w16_min_macs,
                          weight_block=budget, segment_cut=segment_cut)
    try:
        tp = plan_for_target(g, profile, options, action="build firmware for")
    except FitError as e:
        if not as_json:
            click.echo(failure_verdict(e))
        raise
    fused = tp.attention_lines
    pipeline = tp.strategy     # the strategy planned (chosen by --optimize when --strategy was not given)
    g = tp.imported    # the host reference of --run: the model as loaded (after the attention passes)
    proj = generate(tp.graph, tp.profile, outdir, plan=tp.plan, segments=budget, strategy="none", cut=segment_cut,
                    fc_int16_weights=fc_int16_weights, fc_w16_min_macs=fc_w16_min_macs, force=force,
                    run_input=run_input, library=library, io=io, boot2=boot2)
    proj.pipeline_lines = tp.pipeline_lines
    verdict = tp.verdict()
    with open(os.path.join(outdir, "firmware.json")) as f:
        manifest = json.load(f)
    streamed = bool(manifest["streamed_inputs"])
    if stream_input and not streamed:
        lines = [ln.strip() for ln in proj.pipeline_lines if "not streamed" in ln] or ["no stripe region reads it"]
        raise ArgumentError(f"--stream-input: {g.name}'s input cannot be streamed ({lines[0]})")
    streamed_out = bool(manifest.get("streamed_outputs"))
    if stream_output and not streamed_out:
        lines = [ln.strip() for ln in proj.pipeline_lines if "output not streamed" in ln] or \
            ["no stripe region writes it"]
        raise ArgumentError(f"--stream-output: {g.name}'s output cannot be streamed ({lines[0]})")
    if library:
        _library_report(g, proj, tp, manifest, outdir, as_json, verbose)
        return
    result = {"project": os.path.abspath(outdir), "profile": proj.profile.name, "regions": manifest["regions"],
              "segments": manifest["segments"], "segment_note": proj.segment_note, "attention": fused,
              "strategy": pipeline, "stream_input": streamed, "stream_output": streamed_out,
              "arena_bytes": manifest["arena_bytes"],
              "pipeline": proj.pipeline_lines, "dsp_scratch": manifest["dsp_scratch"],
              "fc_w16": _fc_w16(proj), "flash": int(tp.plan.flash_size), "verdict": verdict, "fits": tp.fits(),
              "optimize": optimize_summary(tp), "io": io}
    if not tp.fits():
        if not as_json:
            click.echo(verdict)
        raise FitError(f"{g.name} does not fit {tp.profile.name}: {verdict[len('verdict: '):]}")
    if do_build and not do_run:
        from pyembed.target.firmware import build_project
        build_project(outdir)
        with open(os.path.join(outdir, "firmware.json")) as f:
            manifest = json.load(f)
        result.update(_stack_flash(manifest, tp.plan.info.get("code_figures")))
        result["verdict"] = _with_stack(verdict, manifest)
    if not do_run:
        if as_json:
            click.echo(json.dumps(result, indent=1))
        else:
            click.echo(f"{g.name}: firmware project for {proj.profile.name} ({proj.profile.core}) in {outdir}")
            click.echo(f"  arena {manifest['arena_bytes']} B (--strategy {pipeline}"
                       f"{', input streamed row by row' if streamed else ''}"
                       f"{', output streamed row by row' if streamed_out else ''})")
            for line in (proj.pipeline_lines if verbose else brief(proj.pipeline_lines)):
                click.echo(f"  {line}")
            if proj.dsp_scratch:
                click.echo(f"  {_dsp_scratch_line(proj.dsp_scratch)}")
            for line in _fc_w16_lines(proj):
                click.echo(f"  {line}")
            if proj.segment_note:
                click.echo(f"  segments: {proj.segment_note}")
            if getattr(proj, "segment_plan", None) is not None:
                from firmware_sim.autoseg import describe
                for line in describe(proj.graph, proj.segment_plan):
                    click.echo(f"    {line}")
            for name, r in result["regions"].items():
                if r["used"]:
                    click.echo(f"  region {name}: {r['used']} B at 0x{r['base']:08X}")
            for line in _stack_flash_lines(manifest, tp.plan.info.get("code_figures")) or [
                    "stack bound and flash per part: after a build (--build, --run)"]:
                click.echo(f"  {line}")
            click.echo(f"  io: {_io_line(io, manifest)}")
            click.echo(f"  build: make -C {outdir}" + (f"; run under QEMU: make -C {outdir} run"
                                                         if proj.qemu_machine else ""))
            click.echo(_with_stack(verdict, manifest))
        return
    from pyembed.target.firmware import build_project, run_project
    build_project(outdir)
    per_sample = []
    for i, xs in enumerate(samples):
        run = run_project(proj, xs)
        host = g.run(xs if len(xs) > 1 else xs[0])
        host = list(host) if isinstance(host, (list, tuple)) else [host]
        mismatches = []
        for k, (a, b) in enumerate(zip(run.outputs, host)):
            b = np.asarray(b).reshape(a.shape)
            bad = np.flatnonzero(a.ravel() != b.ravel())
            mismatches += [{"output": k, "element": int(e), "firmware": a.ravel()[e].item(),
                            "host": b.ravel()[e].item()} for e in bad]
        r = run.to_dict()
        for o in r["operators"]:
            # the model's operator numbers this one runs (pyembed.model.graph.imported_ops)
            o["imported"] = list((tp.graph.origin or {}).get(o["index"], (o["index"],)))
        r["sample"] = i
        r["bit_exact_with_host"] = not mismatches
        r["mismatches"] = mismatches
        per_sample.append((run, r))
    with open(os.path.join(outdir, "firmware.json")) as f:
        manifest = json.load(f)
    run, d = per_sample[0]
    d = dict(d)    # sample 0 at the top level, as for one sample; every sample under "samples"
    mismatches = [dict(m, sample=r["sample"]) for _, r in per_sample for m in r["mismatches"]]
    d["bit_exact_with_host"] = not mismatches
    d["mismatches"] = mismatches
    d["samples"] = [{k: r[k] for k in ("sample", "outputs", "bit_exact_with_host", "mismatches",
                                       "total_instructions", "invoke_instructions", "operators", "stack_bytes")}
                    for _, r in per_sample]
    d["input_file"] = manifest.get("input_file")
    d["segments"] = manifest["segments"]
    d["segment_note"] = proj.segment_note
    d["strategy"] = pipeline
    d["stream_input"] = streamed
    d["stream_output"] = streamed_out
    d["arena_bytes"] = manifest["arena_bytes"]
    d["pipeline"] = proj.pipeline_lines
    d["dsp_scratch"] = manifest["dsp_scratch"]
    d["fc_w16"] = _fc_w16(proj)
    d["regions"] = manifest["regions"]
    d["flash"] = int(tp.plan.flash_size)
    verdict = _with_stack(verdict, manifest)
    d["verdict"] = verdict
    d["fits"] = tp.fits()
    d["optimize"] = optimize_summary(tp)
    d["io"] = io
    d.update(_stack_flash(manifest, tp.plan.info.get("code_figures")))
    if as_json:
        click.echo(json.dumps(d, indent=1))
    else:
        n_bad = sum(not r["bit_exact_with_host"] for _, r in per_sample)
        what = ("bit-exact with the host run" if not mismatches else f"{len(mismatches)} MISMATCHES")
        if len(per_sample) > 1:
            what = (f"{len(per_sample)} samples, " + ("each bit-exact with the host run" if not n_bad else
                                                      f"{n_bad} with MISMATCHES ({len(mismatches)} elements)"))
        click.echo(f"{g.name} on {run.board} (QEMU, -icount shift=0{', --io ' + io if io != 'semihost' else ''}): {what}")
        click.echo(f"  arena {manifest['arena_bytes']} B (--strategy {pipeline}"
                   f"{', input streamed row by row' if streamed else ''}"
                   f"{', output streamed row by row' if streamed_out else ''})")
        for line in (proj.pipeline_lines if verbose else brief(proj.pipeline_lines)):
            click.echo(f"  {line}")
        if proj.dsp_scratch:
            click.echo(f"  {_dsp_scratch_line(proj.dsp_scratch)}")
        for line in _fc_w16_lines(proj):
            click.echo(f"  {line}")
        if d.get("input_rows_given") is not None:
            click.echo(f"  input rows delivered by the pe_row_source callback: {d['input_rows_given']}")
        if d.get("output_rows_taken") is not None:
            click.echo(f"  output rows taken by the pe_row_sink callback: {d['output_rows_taken']}")
        if proj.segment_note:
            click.echo(f"  segments: {proj.segment_note}")
        if len(per_sample) > 1:
            for _, r in per_sample:
                click.echo(f"  sample {r['sample']}: {'bit-exact' if r['bit_exact_with_host'] else 'MISMATCH'}, "
                           f"{r['total_instructions']:,} instructions (whole invoke {r['invoke_instructions']:,})")
                for k, o in enumerate(r["outputs"]):
                    click.echo(f"    output {k}: {' '.join(str(v) for v in o[:64])}{' ...' if len(o) > 64 else ''}")
            click.echo("  per operator, sample 0:")
        else:
            for k, o in enumerate(d["outputs"]):
                click.echo(f"  output {k}: {' '.join(str(v) for v in o[:64])}{' ...' if len(o) > 64 else ''}")
        from pyembed.model.graph import origin_label
        click.echo(f"  {'op':>4} {'imported':>8} {'type':<22} {'instructions':>14}")
        for o in d["operators"]:
            click.echo(f"  {o['index']:>4} {origin_label(tp.graph.origin, o['index']):>8} {o['type']:<22} "
                       f"{o['instructions']:>14,}")
        click.echo(f"  total {d['total_instructions']:,} instructions (whole invoke {d['invoke_instructions']:,}); "
                   f"resolution {d['instruction_resolution']:g} instructions per operator (SysTick "
                   f"{proj.profile.clock_hz / 1e6:g} MHz)")
        click.echo(f"  {_predicted_line(tp, d['total_instructions'])}")
        for line in _stack_flash_lines(manifest, tp.plan.info.get("code_figures")):
            click.echo(f"  {line}")
        for m in mismatches[:20]:
            click.echo(f"  mismatch {'sample ' + str(m['sample']) + ' ' if len(per_sample) > 1 else ''}"
                       f"output {m['output']}[{m['element']}]: firmware {m['firmware']} host {m['host']}")
        inp = manifest.get("input_file")
        if inp:
            kept = (f"kept in the project ({inp['bytes']} B)" if io == "semihost" else
                    f"compiled into the image (pe_input.c, {inp['bytes']} B)")
            click.echo(f"  {inp['name']}: sample 0 {kept}; make -C {outdir} run runs it again")
        click.echo(verdict)
    if mismatches:
        raise SystemExit(1)


def _library_report(g, proj, tp, manifest, outdir, as_json, verbose):
    """--layout library: what was written, the sections and the verdict (exit 1 when it does not fit)."""
    from pyembed.errors import FitError
    verdict = tp.verdict()
    if as_json:
        click.echo(json.dumps({"library": os.path.abspath(outdir), "layout": "library", "profile": proj.profile.name,
                               "sections": manifest["sections"], "flash_section": manifest["flash_section"],
                               "sources": manifest["sources"], "cpu_flags_assumed": manifest["cpu_flags_assumed"],
                               "arena_bytes": manifest["arena_bytes"], "strategy": tp.strategy,
                               "relocation": manifest.get("relocation"),
                               "pipeline": tp.pipeline_lines, "verdict": verdict, "fits": tp.fits()}, indent=1))
    else:
        click.echo(f"{g.name}: library for {proj.profile.name} ({proj.profile.core}) in {outdir} (CMake target "
                   f"pyembed_model, {manifest['make_fragment']}, {manifest['linker_fragment']}; see README.md there)")
        click.echo(f"  arena {manifest['arena_bytes']} B (--strategy {tp.strategy}); CPU flags assumed: "
                   f"{manifest['cpu_flags_assumed']}")
        for line in (tp.pipeline_lines if verbose else brief(tp.pipeline_lines)):
            click.echo(f"  {line}")
        for name, sec in manifest["sections"].items():
            click.echo(f"  section {name} (NOLOAD): {sec['bytes']} B in region alias {sec['region_alias']} "
                       f"(planned region {sec['region']})")
        if manifest.get("relocation"):
            click.echo(f"  {len(manifest['sections'])} regions: pe_model_init relocates the graph tables' offsets, "
                       f"which are in RAM (.data: {manifest['relocation']['ram_bytes']} B)")
        for name, sec in manifest["flash_section"].items():
            click.echo(f"  section {name}: {sec['bytes']} B of weights in region alias {sec['region_alias']}")
        click.echo(f"  runtime: {sum(s.startswith('pyembed/') for s in manifest['sources'])} C files of pyembed's "
                   f"runtime the model needs")
        click.echo(verdict)
    if not tp.fits():
        raise FitError(f"{g.name} does not fit {tp.profile.name}: {verdict[len('verdict: '):]}")


def _io_line(io, manifest):
    if io == "uart":
        u = manifest.get("uart") or {}
        return (f"uart: the input compiled in (pe_input.c), results printed on {u.get('device')} at "
                f"0x{u.get('base', 0):08X}, {u.get('baud')} baud")
    if io == "none":
        return "none: the input compiled in (pe_input.c), no output: results in pe_result_* (a debugger)"
    return "semihost: pe_input.bin in, pe_output.bin out (QEMU or a debugger)"


def _predicted_line(tp, measured):
    """The plan's predicted cost beside the measured instructions of the run."""
    if tp.predicted is None:
        return "predicted: no cost model for this profile"
    cost, metric, source = tp.predicted
    if metric != "instructions":
        return f"predicted {cost:,.0f} {metric} ({source}); measured {measured:,} instructions"
    err = 100.0 * (cost - measured) / measured if measured else 0.0
    return f"predicted {cost:,.0f} instructions ({source}), measured {measured:,}: {err:+.1f} %"


def _dsp_scratch_line(granted):
    extra = sum(new - old for old, new, _, _ in granted.values())
    ops = ", ".join(f"#{k}" for k in sorted(granted))
    return (f"DSP fast scratch: {len(granted)} convolution(s) ({ops}) get the int16 column blocks or planes, or "
            f"the gather form's work block (instead of stack), in bytes free at their step, a gather work block "
            f"past a region's end where none are (+{extra:,} B of scratch)")


def _fc_w16(proj):
    """--fc-int16-weights: {"layers": the pass's report, "flash": its byte
    totals}, else None."""
    if proj.fc_w16 is None:
        return None
    from pyembed.passes.fc_w16 import flash_delta
    return {"layers": proj.fc_w16, "flash": flash_delta(proj.fc_w16)}


def _fc_w16_lines(proj):
    if proj.fc_w16 is None:
        return []
    from pyembed.passes.fc_w16 import describe
    return describe(proj.fc_w16)


def _stack_flash(manifest, predicted=None):
    """The stack and flash fields of a built project's firmware.json for the
    command's result: stack_bytes (measured, after a run), stack_bound_bytes
    (static, with an interrupt at the deepest point), the reserve, the deepest
    path, and the flash per part; predicted_code: the plan's prediction of
    them (pyembed.target.codefig, plan.info["code_figures"])."""
    st = manifest.get("stack") or {}
    return {"predicted_code": predicted,"stack_bytes": manifest.get("stack_bytes"), "stack_main_bytes": manifest.get("stack_main_bytes"),
            "stack_bound_bytes": st.get("bound_total_bytes"), "stack_bound_path_bytes": st.get("bound_bytes"),
            "stack_interrupt_bytes": st.get("interrupt_bytes"), "stack_reserved_bytes": st.get("reserved_bytes"),
            "stack_deepest_path": st.get("path_text"), "stack_unbounded": st.get("unbounded"),
            "flash_linked": {k: v for k, v in (manifest.get("flash") or {}).items() if k != "parts"} or None}


def _with_stack(verdict, manifest):
    """The verdict line with the built firmware's stack: measured (after a run),
    the static bound and the reserve stack.ld makes (the plan's RAM excludes it)."""
    st = manifest.get("stack") or {}
    if not st or not verdict.startswith("verdict: fits"):
        return verdict
    measured = manifest.get("stack_bytes")
    bound = st.get("bound_total_bytes")
    parts = ([f"{measured:,} B measured"] if measured is not None else []) + \
        ([f"{bound:,} B bound"] if bound is not None else ["unbounded"])
    return f"{verdict}, stack {' / '.join(parts)} of {st.get('reserved_bytes', 0):,} B reserved"


def _stack_flash_lines(manifest, predicted=None):
    """The built firmware's stack and flash lines, then the plan's prediction of them
    (predicted: plan.info["code_figures"], pyembed.target.codefig) with the gaps."""
    st, fl = manifest.get("stack"), manifest.get("flash")
    lines = []
    if st:
        measured = manifest.get("stack_bytes")
        if st.get("bound_total_bytes") is not None:
            bound = (f"static bound {st['bound_total_bytes']:,} B ({st['bound_bytes']:,} B deepest path + "
                     f"{st['interrupt_bytes']} B interrupt)")
        else:
            bound = f"static bound: unbounded ({'; '.join(st.get('unbounded', [])[:3])})"
        lines.append("stack of pe_model_invoke: " + (f"measured {measured:,} B, " if measured is not None else "")
                     + f"{bound}; reserved {st.get('reserved_bytes', 0):,} B (stack.ld)")
        if st.get("path_text"):
            lines.append(f"  deepest path: {st['path_text']}")
    if fl:
        lines.append(f"flash {fl['total']:,} B: runtime code {fl['runtime_code']:,}, model tables "
                     f"{fl['model_tables']:,}, weights {fl['weights']:,}, harness + libc {fl['harness_libc']:,}")
    if predicted:
        if not st and not fl:
            lines.append("stack bound and flash per part: measured after a build (--build, --run)")
        lines += _predicted_code_lines(st, fl, predicted)
    return lines


def _predicted_code_lines(st, fl, p):
    """'  predicted at plan time (...): stack bound 796 B (+0 B), runtime code 6,132 B (+0.0 %), ...'."""
    def gap(pred, meas, pct=False):
        if pred is None or meas is None:
            return ""
        if pct:
            return f" ({100.0 * (pred - meas) / meas:+.1f} %)" if meas else ""
        return f" ({pred - meas:+,} B)"
    bound = p.get("stack_bound_bytes")
    parts = [f"stack bound {bound:,} B{gap(bound, (st or {}).get('bound_total_bytes'))}" if bound is not None
             else "stack unbounded"]
    for key, name, meas in (("runtime_code_bytes", "runtime code", "runtime_code"),
                            ("tables_bytes", "model tables", "model_tables"), ("weights_bytes", "weights", "weights")):
        parts.append(f"{name} {p[key]:,} B{gap(p[key], (fl or {}).get(meas), pct=True)}")
    return [f"  predicted at plan time ({p.get('source', 'runtime table')}): " + ", ".join(parts)]
