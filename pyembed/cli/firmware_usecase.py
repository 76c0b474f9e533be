"""``pyembed firmware A B ... --profile P --segments BYTES [-o DIR] [--build | --run]``:
several models in one firmware, run one after the other as one segmented use
case (pyembed.target.usecase.plan_use_case, the one ``plan`` and ``simulate``
make, with the segment block in the system RAM where the firmware puts it;
the project: pyembed.codegen.firmware.usecase)."""
import json
import sys
import tempfile

import click
import numpy as np

EXIT_OK, EXIT_CHECK_FAILED = 0, 1


def samples(g, inputs_path, seed):
    """The samples --run runs: every sample of --inputs (a batch: one more
    leading axis than the model's input), else one seeded random sample; each
    a list with one array per graph input."""
    if inputs_path:
        from pyembed.check.accuracy import load_inputs
        return [list(s) for s in load_inputs(g, inputs_path)]
    from pyembed.target.firmware import random_inputs
    return [random_inputs(g, seed)]


def firmware_use_case(models, profile, outdir, segments, segment_cut, pipeline, optimize, max_extra_macs, attention,
                      do_run, do_build, seed, as_json, force, single_only):
    from firmware_sim.profiles import load_profile
    from pyembed.cli.plan import parse_fraction, use_case_budget
    from pyembed.codegen.firmware import qemu_machine, system_region
    from pyembed.errors import ArgumentError, FitError
    from pyembed.target.firmware import build_project, input_bytes, load_manifest, run_use_case
    from pyembed.target.planning import PlanOptions
    from pyembed.target.usecase import plan_use_case, write_firmware
    if single_only:
        raise ArgumentError(f"several models: {single_only} takes one MODEL (a use case's firmware is a semihost "
                            f"project of whole tensors, run with seeded random inputs)")
    if segments is None:
        raise ArgumentError(f"MODEL: {len(models)} models in one firmware run as one segmented use case: give "
                            f"--segments BYTES (the RAM block their weights are loaded into)")
    prof = load_profile(profile)
    if do_run and qemu_machine(prof) is None:
        raise ArgumentError(f"--run: no QEMU machine emulates profile {prof.name}; leave out --run")
    budget = use_case_budget(prof, segments)
    options = PlanOptions(strategy=pipeline, optimize=optimize,
                          max_extra_macs=parse_fraction(max_extra_macs, "--max-extra-macs"), attention=attention,
                          weight_block=budget, segment_cut=segment_cut)
    uc = plan_use_case(list(models), prof, options, block_region=system_region(prof).name)
    if not uc.fits():
        free, need = uc.block_room()
        why = [f"{n}: {tp.verdict()[len('verdict: '):]}" for n, tp in zip(uc.names, uc.plans) if not tp.fits()]
        if need > free:
            why.append(f"the {need:,} B block does not fit {uc.segments.block_region} beside the arenas "
                       f"({free:,} B free)")
        raise FitError("the use case does not fit: " + "; ".join(why))
    if outdir is None:
        if not do_run:
            raise click.UsageError("-o/--outdir is required without --run")
        outdir = tempfile.mkdtemp(prefix="pyembed_fw_")
    # one seeded random sample per model (model k: seed + k), the first input file of the run
    inputs = [samples(tp.imported, None, seed + k)[0] for k, tp in enumerate(uc.plans)]
    data = b"".join(input_bytes(tp.graph, xs) for tp, xs in zip(uc.plans, inputs)) if do_run else None
    write_firmware(uc, outdir, run_input=data, force=force)
    result = {"project": outdir, "profile": uc.profile.name, "use_case": uc.to_dict()}
    runs = None
    if do_run or do_build:
        build_project(outdir)
    if do_run:
        runs = run_use_case(outdir, [xs if len(xs) > 1 else xs[0] for xs in inputs])
    manifest = load_manifest(outdir)
    exact = True
    rows = []
    for k, tp in enumerate(uc.plans):
        row = {"model": uc.names[k], "strategy": tp.strategy, "arena_bytes": int(tp.plan.arena_size),
               "verdict": tp.verdict()}
        if runs is not None:
            xs = inputs[k]
            host = tp.imported.run(xs if len(xs) > 1 else xs[0])
            host = list(host) if isinstance(host, (list, tuple)) else [host]
            bad = []
            for j, (a, b) in enumerate(zip(runs[k].outputs, host)):
                b = np.asarray(b).reshape(a.shape)
                bad += [{"output": j, "element": int(e), "firmware": a.ravel()[e].item(), "host": b.ravel()[e].item()}
                        for e in np.flatnonzero(a.ravel() != b.ravel())]
            exact = exact and not bad
            row.update({"invoke_instructions": runs[k].invoke_instructions, "stack_bytes": runs[k].stack_bytes,
                        "bit_exact_with_host": not bad, "mismatches": bad,
                        "input": f"random, seed {seed + k}"})
        rows.append(row)
    result["models"] = rows
    for key in ("stack", "flash", "stack_bytes"):
        if key in manifest:
            result[key] = manifest[key]
    if as_json:
        click.echo(json.dumps(result, indent=1))
    else:
        click.echo(f"{' + '.join(uc.names)}: one firmware project for {uc.profile.name} ({uc.profile.core}) in "
                   f"{outdir}")
        for line in uc.lines():
            click.echo(f"  {line}")
        for r in rows:
            line = f"  {r['model']}: arena {r['arena_bytes']:,} B (--strategy {r['strategy']})"
            if runs is not None:
                line += (f", {r['invoke_instructions']:,} instructions on {runs[0].board} ({r['input']}), peak stack "
                         f"{r['stack_bytes']} B, outputs "
                         + ("bit-exact with the host" if r["bit_exact_with_host"] else
                            f"DIFFER from the host ({len(r['mismatches'])} elements)"))
            click.echo(line)
        if "stack" in manifest and manifest["stack"].get("bound_total_bytes") is not None:
            st = manifest["stack"]
            click.echo(f"  stack: static bound {st['bound_total_bytes']:,} B (the deepest invoke, {st['root']}), "
                       f"{st['reserved_bytes']:,} B reserved")
        if "flash" in manifest:
            f = manifest["flash"]
            click.echo(f"  flash {f['total']:,} B: runtime code {f['runtime_code']:,}, model tables "
                       f"{f['model_tables']:,}, weights {f['weights']:,}, harness + libc {f['harness_libc']:,}")
        click.echo(f"  build: make -C {outdir}" + ("; run under QEMU: make -C " + outdir + " run"
                                                   if manifest.get("qemu_machine") else ""))
    sys.exit(EXIT_OK if exact else EXIT_CHECK_FAILED)
