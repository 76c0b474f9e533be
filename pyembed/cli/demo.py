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
6. run the bundled CMSIS-NN bit-exact vectors.

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


def _pct(a, b):
    return f"{100.0 * a / b:.0f}%" if b else "-"


def _outdir(outdir):
    try:
        os.makedirs(outdir, exist_ok=True)
        probe = os.path.join(outdir, ".pyembed-write-test")
        with open(probe, "w"):
            pass
        os.remove(probe)
        return outdir, ""
    except OSError as e:
        tmp = tempfile.mkdtemp(prefix="pyembed-demo-")
        return tmp, f" ({outdir} is not writable: {e.strerror or e})"


def _model_path(model):
    from pyembed.data import model_path
    if os.path.exists(model):
        return model
    path = model_path(model)
    if not os.path.exists(path):
        from pyembed.errors import ArgumentError
        raise ArgumentError(f"--model {model!r}: neither a file nor a bundled model (pyembed/data/models)")
    return path


def _parts_table(graph, x):
    """The same planning on every bundled profile: does it fit, how fast."""
    from firmware_sim.profiles import list_profiles
    from firmware_sim.sim import simulate
    from pyembed.errors import PlanError
    from pyembed.plan import plan_graph
    from pyembed.cli.plan import regions_for_mcu
    rows = []
    for name in list_profiles():
        prof, regions = regions_for_mcu(name)
        ram = sum(r.size for r in regions)
        flash = prof.regions[prof.defaults["weights"]].size
        try:
            plan = plan_graph(graph, regions, algorithm="greedy_size", overlaps=True)
            r = simulate(graph, plan, prof, x)
            fits = ", ".join(f"{reg} {b:,} of {prof.regions[reg].size:,} B" for reg, b in r.region_used.items())
            fits += ", " + ", ".join(f"{reg} {b:,} of {prof.regions[reg].size:,} B" for reg, b in r.flash_bytes.items())
            rows.append((prof, f"{r.latency_ms:9.2f} ms", fits, ram, flash))
        except PlanError as e:
            rows.append((prof, "does not fit", str(e).splitlines()[0][:60], ram, flash))
    return rows


def run_demo(outdir="pyembed-demo", profile="stm32f446", model="tiny_kws_dscnn_int8", echo=click.echo):
    """Run the demonstration; returns the exit code (0 when every check passed)."""
    from firmware_sim.sim import simulate
    from pyembed.check import report as R
    from pyembed.check import vectors as V
    from pyembed.check.accuracy import check_accuracy, random_inputs
    from pyembed.data import PEER_VECTORS_DIR
    from pyembed.codegen.emit import write_plan_outputs
    from pyembed.model.load import load_model
    from pyembed.plan import plan_graph
    from pyembed.cli.plan import regions_for_mcu
    from pyembed.plan.report import used_overlaps

    t_start = time.perf_counter()
    failed = []
    outdir, note = _outdir(outdir)
    prof, regions = regions_for_mcu(profile)
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

    # 2. plan
    plan = plan_graph(g, regions, algorithm="auto", overlaps=True, time_limit=2.0)
    lb = plan.problem.lower_bound()
    shared = used_overlaps(plan)
    no_reuse = sum(b.aligned_size for b in plan.buffers)
    echo(f"2. Plan     for {prof.name} ({prof.part}): arena {plan.arena_size:,} B ({plan.algorithm}); "
         f"liveness lower bound {lb:,} B; no reuse {no_reuse:,} B")
    if shared:
        echo(f"           {len(shared)} output-over-input overlaps, proven by running the kernels, take the plan "
             f"{lb - plan.arena_size:,} B below the bound")
    used = plan.region_used()
    for r in regions:
        if used.get(r.name):
            echo(f"           RAM   {r.name:<8} {used[r.name]:>8,} B of {r.size:>9,} B ({_pct(used[r.name], r.size)}) "
                 f"activations + scratch")
    wreg = prof.defaults["weights"]
    echo(f"           flash {wreg:<8} {plan.flash_size:>8,} B of {prof.regions[wreg].size:>9,} B "
         f"({_pct(plan.flash_size, prof.regions[wreg].size)}) weights and constants")

    # 3. C headers
    paths = write_plan_outputs(g, plan, outdir)
    echo(f"3. Emit     {', '.join(os.path.basename(p) for p in paths.values())}")

    # 4. simulate
    x = random_inputs(g, 1, seed=0)[0][0]
    res = simulate(g, plan, prof, x)
    exact = all(np.array_equal(a, b) for a, b in zip(res.outputs, g.run(x)))
    if not exact:
        failed.append("simulated outputs differ from the host run")
    slowest = sorted(res.op_times, key=lambda o: -o.cycles)[:2]
    echo(f"4. Simulate on {prof.name} ({prof.core}, {prof.clock_hz / 1e6:g} MHz): {res.latency_ms:.2f} ms per "
         f"inference ({res.cycles:,} cycles); outputs {'bit-exact with' if exact else 'DIFFER from'} the host run")
    echo("           slowest: " + ", ".join(f"#{o.op} {o.type} {100 * o.cycles / max(1, res.compute_cycles()):.0f}%"
                                             for o in slowest))
    echo("           the same model on every bundled part:")
    for p, lat, fits, ram, flash in _parts_table(g, x):
        echo(f"             {p.name:<14} {p.core:<13} {p.clock_hz / 1e6:>4g} MHz {lat:>13}   {fits}")

    # 5. accuracy
    acc = check_accuracy(g, n=4, seed=0)
    e2e = acc.layers["end_to_end"]
    per = acc.layers["per_layer"]
    worst = min(per, key=lambda r: r.snr_db)
    echo(f"5. Accuracy int8 vs float64 reference on {acc.inputs} random inputs:")
    echo(f"           final output SNR {e2e[-1].snr_db:.1f} dB end to end; worst layer on its own: "
         f"#{worst.op} {worst.type} {worst.snr_db:.1f} dB ({100 * worst.out_of_range:.1f}% saturated)")
    for k, a in enumerate(acc.output_agreement):
        if a is not None:
            echo(f"           top class of int8 and float agree on {100 * a:.0f}% of the inputs")
    for o in acc.oracles:
        echo(f"           {o.line()}")
    if acc.bit_exact is False:
        failed.append("not bit-exact with a TFLite reference interpreter")
    echo("           (uniform random inputs overdrive this model; 'pyembed check MODEL --inputs real.npy' for "
         "your data)")

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

    # the report
    trace = os.path.join(outdir, "trace.json")
    res.write_trace(trace)
    rep = R.write_report(outdir, g, res, plan=plan, accuracy=acc, bit_exact=exact)
    echo("")
    echo(f"report: {rep['html']}   trace: {trace} (open in https://ui.perfetto.dev)")
    echo(f"done in {time.perf_counter() - t_start:.1f} s: " + ("all checks passed" if not failed else
                                                             "FAILED: " + "; ".join(failed)))
    return 1 if failed else 0


import sys as _sys  # noqa: E402

import click  # noqa: E402


@click.command("demo", short_help="The built-in demonstration, with a choice of directory, MCU and model.")
@click.option("-o", "--outdir", default="pyembed-demo", show_default=True, type=click.Path(file_okay=False),
              help="Where the demo writes its C headers, plan, trace, plots and report.")
@click.option("-p", "--profile", default="stm32f446", show_default=True, help="MCU profile to simulate on.")
@click.option("--model", default="tiny_kws_dscnn_int8", show_default=True,
              help="A bundled model name (see pyembed/data/models) or a .tflite/.onnx path.")
def demo_command(outdir, profile, model):
    """The built-in demonstration (what 'pyembed' alone runs), with a
    choice of output directory, MCU and model."""
    from pyembed.cli.demo import run_demo
    _sys.exit(run_demo(outdir=outdir, profile=profile, model=model))
