"""The built-in demonstration run by ``pyembed`` with no arguments.

On the keyword-spotting model bundled with the package (MLPerf Tiny DS-CNN,
int8), end to end, in a few seconds:

1. import the .tflite into a graph;
2. plan its static RAM for the target MCU (proven output-over-input
   overlaps allowed) and compare with the liveness lower bound;
3. write the C headers (memplan.h, model_data.c/.h, graph tables, plan.json);
4. simulate the firmware on the MCU profile: latency, RAM and flash use,
   outputs bit-exact with the host run; then the same plan on every bundled
   part (what fits where, and how fast);
5. check the fixed-point accuracy against a float64 reference, and
   bit-exactness against the TensorFlow Lite reference interpreter when
   ``ai_edge_litert`` is installed;
6. run the bundled CMSIS-NN bit-exact vectors;
7. run every other bundled model on its bundled real samples (photographs,
   synthesised speech, digits; pyembed/data/samples) and show the int8
   answers and whether the float64 reference gives the same.

Steps 4 and 5 use the model's bundled real samples (int8 vs float64
predictions per sample); a model without samples gets random inputs, said
to be synthetic.

Everything is written to ``./pyembed-demo/`` (or a temporary directory when
the current one is not writable), including an HTML report. Nothing here
needs a test-only package.
"""
import os
import tempfile
import time

import click
import numpy as np


def _kb(n):
    return f"{n / 1024:.1f} KB"


def _outdir(outdir):
    try:
        os.makedirs(outdir, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".pyembed-write-test-", dir=outdir)   # a new name: nobody's file
        os.close(fd)
        os.remove(probe)
        return outdir, ""
    except OSError as e:
        tmp = tempfile.mkdtemp(prefix="pyembed-demo-")
        return tmp, f" ({outdir} is not writable: {e.strerror or e})"


def _model_path(model):
    from pyembed.data import resolve_model
    path = resolve_model(model)
    if not os.path.exists(path):
        from pyembed.errors import ArgumentError
        raise ArgumentError(f"--model {model!r}: neither a file nor a bundled model (pyembed/data/models)")
    return path


def _parts_table(graph, x, shown=None):
    """The same planning on every bundled profile (pyembed.target.planning,
    the one path every command plans with): does it fit, how fast. shown:
    (profile name, TargetPlan) already planned for the demo's own part."""
    from firmware_sim.profiles import list_profiles
    from firmware_sim.sim import simulate
    from pyembed.errors import FitError
    from pyembed.target.planning import plan_for_target
    rows = []
    for name in list_profiles():
        try:
            tp = shown[1] if shown is not None and name == shown[0] else plan_for_target(graph, name, action="demo")
        except FitError as e:
            from firmware_sim.profiles import load_profile
            rows.append((load_profile(name), "does not fit", str(e).splitlines()[0][:60]))
            continue
        figures = tp.verdict().split(" — ", 1)[1]
        if not tp.fits():
            rows.append((tp.profile, "does not fit", figures))
            continue
        r = simulate(tp.graph, tp.plan, tp.profile, x)
        rows.append((tp.profile, f"{r.latency_ms:9.2f} ms", figures))
    return rows


def _other_models(shown_path, prof=None):
    """One line per other bundled model: its samples' int8 answers and the agreement with float64; for an
    image-to-image model also its plan on prof (stripe regions, arena) against TFLM's arena."""
    from pyembed.check.samples import available, bundled_samples, predictions
    from pyembed.data import bundled_models, model_path
    from pyembed.model.load import load_model
    short = {stem: name for name, stem in bundled_models()}
    lines = []
    for stem in available():
        path = model_path(stem)
        if os.path.abspath(path) == os.path.abspath(shown_path):
            continue
        g = load_model(path)
        name = short.get(stem) or stem
        if g.unsupported:
            lines.append(f"{name:<15} not run: pyembed cannot execute {', '.join(sorted({t for _, t in g.unsupported}))}"
                         [:110])
            continue
        s = bundled_samples(g)
        preds = predictions(g, s)
        def answer(p):
            a = p.int8.rsplit(" ", 1)[0] if s.kind == "classifier" else p.int8
            return a if p.agree else f"{a} (float64 {p.float})"
        answers = ", ".join(answer(p) for p in preds[:6])
        more = ", ..." if len(preds) > 6 else ""
        lines.append(f"{name:<15} int8 = float64 on {sum(p.agree for p in preds)} of {len(preds)}{_tflm_same(g, s)}: "
                     f"{answers}{more}")
        if s.kind == "image" and prof is not None:
            # the plan --optimize ram makes (its stripe regions), beside the default's
            from pyembed.target.planning import PlanOptions, plan_for_target
            tflm = _tflm_arena(path)
            seen = None
            for opt in ("ram", "balanced"):
                tp = plan_for_target(g, prof, PlanOptions(optimize=opt), action="demo")
                regions = sum(op.type == "PE_STRIPE_REGION" for op in tp.graph.operators)
                if (tp.strategy, tp.plan.arena_size) == seen:
                    lines.append(f"{'':<15} (the default, --optimize balanced, picks the same plan)")
                    continue
                seen = (tp.strategy, tp.plan.arena_size)
                vs = f" ({tflm / max(tp.plan.arena_size, 1):.1f}x below TFLite Micro's head, {tflm:,} B)" if tflm else ""
                lines.append(f"{'':<15} --optimize {opt} on {prof.name}: arena {tp.plan.arena_size:,} B{vs}, "
                             f"{regions} stripe region(s) (--strategy {tp.strategy})")
            lines.append(f"{'':<15} PSNR of the noisy inputs: "
                         + ", ".join(p.detail.split(";")[0].replace("noisy input ", "") for p in preds[:6]))
    return lines


def _tflm_same(graph, samples):
    """", == TFLM on N of M": the samples on which every output of pyembed's int8 run equals the
    tflite-micro interpreter's (a fresh interpreter per sample; "" without tflite-micro)."""
    import importlib.util
    if importlib.util.find_spec("tflite_micro") is None or len(graph.inputs) != 1:
        return ""
    from pyembed.model.tflite_writer import tflm_run
    with open(graph.source_path, "rb") as f:
        blob = f.read()
    shape = graph.tensors[graph.inputs[0]].shape
    same = 0
    for k in range(len(samples)):
        x = np.ascontiguousarray(samples.x[k]).reshape(shape)
        ours = graph.run(x)
        ours = list(ours) if isinstance(ours, (list, tuple)) else [ours]
        theirs = tflm_run(blob, [x], len(graph.outputs))
        same += all(np.array_equal(np.asarray(a).reshape(-1), np.asarray(b).reshape(-1))
                    for a, b in zip(ours, theirs))
    return f", == TFLM on {same} of {len(samples)}"


def _tflm_arena(path):
    """TFLM's non-persistent arena for the model file (None without tflite-micro or when it cannot
    allocate it)."""
    from pyembed.codegen.tflite_offline import tflm_head
    if not str(path).endswith(".tflite"):
        return None
    try:
        with open(path, "rb") as f:
            return tflm_head(f.read())
    except (OSError, RuntimeError):
        return None


def run_demo(outdir="pyembed-demo", profile="stm32f446", model="kws", echo=click.echo, force=False):
    """Run the demonstration; returns the exit code (0 when every check passed).
    Its files go to outdir through pyembed.codegen.outdir (files pyembed did not
    write there are refused unless force), all at the end."""
    from pyembed.codegen.outdir import OutputDir
    t_start = time.perf_counter()
    outdir, note = _outdir(outdir)
    out = OutputDir(outdir, force=force, what="-o/--outdir")
    try:
        return _run_demo(out, outdir, note, profile, model, echo, t_start)
    finally:
        out.abort()    # nothing staged stays behind when the demo stopped before its commit


def _run_demo(out, outdir, note, profile, model, echo, t_start):
    from firmware_sim.sim import simulate
    from pyembed.check import report as R
    from pyembed.check import vectors as V
    from pyembed.check.accuracy import check_accuracy, random_inputs
    from pyembed.data import PEER_VECTORS_DIR
    from pyembed.codegen.emit import write_plan_outputs
    from pyembed.model.load import load_model
    from pyembed.cli.plan import regions_for_mcu
    from pyembed.plan.report import used_overlaps

    failed = []
    prof, _ = regions_for_mcu(profile)
    path = _model_path(model)
    echo("pyembed demonstration")
    echo("=====================")
    shown = outdir if note or os.path.isabs(outdir) else os.path.join(".", outdir, "")
    echo(f"files go to {shown}{note}")
    echo("")

    # 1. import
    g = load_model(path)
    kinds = {}
    for op in g.operators:
        kinds[op.type] = kinds.get(op.type, 0) + 1
    echo(f"1. Import   {os.path.basename(path)}: {len(g.operators)} operators "
         f"({', '.join(f'{k} {v}' for k, v in kinds.items())}), {g.macs:,} MACs, {g.weights_bytes:,} B of weights")
    if g.unsupported:
        echo(f"   cannot run: {', '.join(f'#{i} {t}' for i, t in g.unsupported)}")
        return 1

    # 2. plan (the one planning path: pyembed plan / simulate / firmware plan the same way)
    from pyembed.target.planning import plan_for_target
    imported = g
    tp = plan_for_target(g, prof, action="demo")
    g, plan = tp.graph, tp.plan
    lb = plan.problem.lower_bound()
    shared = used_overlaps(plan)
    no_reuse = sum(b.aligned_size for b in plan.buffers)
    rewrite = (f"{sum(op.type == 'PE_STRIPE_REGION' for op in g.operators)} stripe region(s), "
               f"{sum(op.type == 'PE_CONV_POOL' for op in g.operators)} fused conv->pool")
    echo(f"2. Plan     for {prof.name} ({prof.part}): arena {plan.arena_size:,} B ({plan.algorithm}; --optimize "
         f"{tp.options.optimize}: --strategy {tp.strategy}, {rewrite}); liveness lower bound {lb:,} B; no reuse {no_reuse:,} B")
    if shared and plan.arena_size < lb:
        echo(f"           {len(shared)} output-over-input overlaps, proven by running the kernels, take the plan "
             f"{lb - plan.arena_size:,} B below the bound")
    tflm = _tflm_arena(path)
    if tflm:
        echo(f"           TFLite Micro's planner puts the same model's tensors in {tflm:,} B "
             f"({tflm / max(plan.arena_size, 1):.1f}x pyembed's; its arena head, measured now by the tflite-micro "
             f"package; its whole arena also holds its persistent allocations)")
    echo(f"           {tp.verdict()}")
    if not tp.fits():
        failed.append(f"the model does not fit {prof.name}")

    # 3. C headers
    paths = write_plan_outputs(g, plan, out)
    echo(f"3. Emit     {', '.join(os.path.basename(p) for p in paths.values())}")

    # 4. simulate (on the first bundled real sample when there is one)
    from pyembed.check.accuracy import load_inputs
    from pyembed.check.samples import bundled_samples, predictions
    samples = bundled_samples(imported)
    x = (load_inputs(imported, samples.x[:1]) if samples is not None else random_inputs(imported, 1, seed=0))[0][0]
    res = simulate(g, plan, prof, x)
    exact = all(np.array_equal(a, b) for a, b in zip(res.outputs, g.run(x, layout="internal")))
    if not exact:
        failed.append("simulated outputs differ from the host run")
    slowest = sorted(res.op_times, key=lambda o: -o.cycles)[:2]
    echo(f"4. Simulate on {prof.name} ({prof.core}, {prof.clock_hz / 1e6:g} MHz): {res.latency_ms:.2f} ms per "
         f"inference ({res.cycles:,} cycles); outputs {'bit-exact with' if exact else 'DIFFER from'} the host run")
    echo("           slowest: " + ", ".join(f"#{o.op} {o.type} {100 * o.cycles / max(1, res.compute_cycles()):.0f}%"
                                             for o in slowest))
    echo("           the same model on every bundled part:")
    for p, lat, fits in _parts_table(imported, x, shown=(prof.name, tp)):
        echo(f"             {p.name:<14} {p.core:<13} {p.clock_hz / 1e6:>4g} MHz {lat:>13}   {fits}")

    # 5. accuracy
    # the pipeline's operators compute what the imported ones do: accuracy on the imported graph
    acc = check_accuracy(imported, inputs=samples, n=4, seed=0)
    e2e = acc.layers["end_to_end"]
    per = acc.layers["per_layer"]
    worst = min(per, key=lambda r: r.snr_db)
    what = f"{acc.inputs} bundled real samples" if samples is not None else \
        f"{acc.inputs} SYNTHETIC random inputs (no bundled samples for this model)"
    echo(f"5. Accuracy int8 vs float64 reference on {what}:")
    echo(f"           final output SNR {e2e[-1].snr_db:.1f} dB end to end; worst layer on its own: "
         f"#{worst.op} {worst.type} {worst.snr_db:.1f} dB ({100 * worst.out_of_range:.1f}% saturated)")
    if samples is not None:
        preds = predictions(imported, samples)
        echo(f"           predictions, int8 vs float64 ({samples.note}):")
        for p in preds:
            echo("             " + p.line())
        echo(f"           int8 and float64 agree on {sum(p.agree for p in preds)} of {len(preds)} samples")
    else:
        for k, a in enumerate(acc.output_agreement):
            if a is not None:
                echo(f"           top class of int8 and float agree on {100 * a:.0f}% of the random inputs")
        echo("           (random inputs say little about real accuracy: 'pyembed check MODEL --inputs real.npy')")
    for o in acc.oracles:
        echo(f"           {o.line()}")
    if acc.bit_exact is False:
        failed.append("not bit-exact with a TFLite reference interpreter")
    for o in acc.oracle_errors:
        failed.append(f"{o.name} cannot run the model")

    # 6. CMSIS-NN vectors
    results = V.check_directory(PEER_VECTORS_DIR)
    by_op = {}
    for r in results:
        by_op.setdefault(r.op, []).append(r)
    parts = []
    for op, rs in sorted(by_op.items()):
        ok = sum(r.status == "pass" for r in rs)
        parts.append(f"{op} {ok}/{len(rs)}")
    echo(f"6. Vectors  CMSIS-NN bit-exact vectors: {V.summary_line(results)}")
    echo(f"           {', '.join(parts)}")
    if any(r.status in ("fail", "error") for r in results):
        failed.append("a CMSIS-NN vector mismatched")

    # 7. the other bundled models on their samples
    echo("7. Samples  the other bundled models on their bundled samples: int8 answers (float64's where it differs)")
    for line in _other_models(path, prof):
        echo("           " + line)

    # the report
    trace = out.path("trace.json")
    res.write_trace(out.stage_path("trace.json"))
    rep = R.write_report(out, g, res, plan=plan, accuracy=acc, bit_exact=exact, verdict=tp.verdict())
    out.commit()
    echo("")
    echo(f"report: {rep['html']}   trace: {trace} (open in https://ui.perfetto.dev)")
    for why in rep.get("missing", ()):
        echo(f"        charts left out of the report: {why}")
    echo(f"done in {time.perf_counter() - t_start:.1f} s: " + ("all checks passed" if not failed else
                                                             "FAILED: " + "; ".join(failed)))
    echo(tp.verdict())
    return 1 if failed else 0


import sys as _sys  # noqa: E402

import click  # noqa: E402

from pyembed.cli.options import force_option, profile_option  # noqa: E402


@click.command("demo", short_help="The built-in demonstration, with a choice of directory, MCU and model.")
@click.option("-o", "--outdir", default="pyembed-demo", show_default=True, type=click.Path(file_okay=False),
              help="Where the demo writes its C headers, plan, trace, plots and report.")
@profile_option()
@click.option("--model", default="kws", show_default=True,
              help="A bundled model name (see 'pyembed model list') or a .tflite/.onnx path.")
@force_option()
def demo_command(outdir, profile, model, force=False):
    """The built-in demonstration (what 'pyembed' alone runs), with a
    choice of output directory, MCU and model."""
    from pyembed.cli.demo import run_demo
    _sys.exit(run_demo(outdir=outdir, profile=profile, model=model, force=force))
