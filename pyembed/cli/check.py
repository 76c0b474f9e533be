"""`pyembed check`: fixed-point accuracy against float64 and bit-exactness."""
import dataclasses
import sys

import click

from pyembed.check.accuracy import DEFAULT_MIN_SNR_DB
from pyembed.cli.app import EXIT_CHECK_FAILED, EXIT_OK, _echo_json, _jsonable, progress_iter, run_with_progress  # noqa: F401
from pyembed.cli.options import (apply_attention, attention_option, check_inputs_file, force_option, inputs_option,
                                 model_argument, require_quantized)


@click.command("check", short_help="Accuracy: int8 vs float64 per layer (SNR, LSB error), bit-exactness with TFLite.",
               epilog="Exit codes: 0 checked, 1 not bit-exact with a TFLite reference interpreter or (only when "
                      "you set --min-snr) a layer below that SNR, 2 bad input.")
@model_argument()
@inputs_option("Inputs .npy (one sample, or a batch along a new first axis) or .npz (one array per model input). "
               "Integer arrays are used as they are; float arrays are real values, quantized with the input's "
               "scale and zero point. Default: the bundled real samples when pyembed knows the model, else "
               "--calibration random inputs drawn from each input's quantization range.")
@click.option("--calibration", "n", default=8, show_default=True, metavar="N",
              help="Number of random inputs when there are neither --inputs nor bundled samples.")
@click.option("--random", "force_random", is_flag=True,
              help="Use random inputs even when pyembed has bundled samples for the model.")
@click.option("--seed", default=0, show_default=True, help="Seed of the random inputs.")
@click.option("--min-snr", default=None, type=float, metavar="DB",
              help=f"Fail (exit 1) when a layer's SNR against float64 is below this many dB. Without it, layers "
                   f"below {DEFAULT_MIN_SNR_DB:g} dB are flagged in the table but do not fail the check.")
@click.option("--table", "mode", type=click.Choice(["end-to-end", "per-layer"]), default="end-to-end",
              show_default=True,
              help="end-to-end: the float reference runs from the same input (error accumulated up to each "
                   "layer); per-layer: each float layer is fed the int8 values of its inputs (the error that "
                   "layer adds).")
@click.option("-o", "--output-dir", type=click.Path(file_okay=False), default=None,
              help="Directory for the per-layer SNR plot (MODEL-snr.png). Without it (or --plot) no file is "
                   "written.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Write the per-layer SNR plot to this PNG path instead.")
@click.option("--no-plot", is_flag=True, help="Do not write the PNG even with --output-dir.")
@click.option("--oracle/--no-oracle", default=True, show_default=True,
              help="Compare the outputs bit for bit with LiteRT (BUILTIN_REF) and tflite-micro where installed.")
@attention_option()
@click.option("--task", type=click.Choice(["auto", "classify", "regress"]), default="auto", show_default=True,
              help="What the outputs are: classify = top-class agreement plus error statistics, regress = error "
                   "statistics (max / mean abs error in output units and LSB, SNR); auto = classify an output a "
                   "SOFTMAX writes (or a bundled classifier's), regress the others.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable report (both tables).")
@force_option()
def check_command(model, inputs_path, n, force_random, seed, min_snr, mode, output_dir, plot_path, no_plot, oracle,
                  as_json, attention="auto", task="auto", force=False):
    """Fixed-point accuracy of MODEL: its int8 layers against a float64
    reference of the same network, and bit-exactness against the TensorFlow
    Lite reference interpreters.

    MODEL is a .tflite / .onnx file or a bundled model name (see 'pyembed
    model list'). Per layer: SNR in dB, max and mean absolute error in
    output LSBs, cosine similarity, and the share of float values outside
    what the int8 output can represent (saturation). On a bundled model the
    bundled real samples are used and each one's int8 and float64
    predictions are listed; otherwise random inputs, which the report calls
    synthetic.

    Exit 1 when an installed TFLite interpreter (LiteRT, tflite-micro)
    differs from pyembed or cannot run the model (the line says why), or,
    with --min-snr, when a layer is below it."""
    from pyembed.check.accuracy import MODE_TITLES, check_accuracy
    from pyembed.check.samples import bundled_samples, predictions
    from pyembed.model.load import load_model

    graph = load_model(model)
    require_quantized(graph, "check")
    fused = apply_attention(graph, attention)
    if fused and not as_json:
        for line in fused:
            click.echo(line, err=True)
    graph.check_supported()
    if n < 1:
        raise click.BadParameter("expected at least 1", param_hint="--calibration")
    key = mode.replace("-", "_")
    known = None
    inputs = check_inputs_file(inputs_path)
    if inputs is None and not force_random:
        known = bundled_samples(graph)
        inputs = known
    if not no_plot and (plot_path or output_dir):
        from pyembed._extras import require
        require("matplotlib", "the per-layer SNR plot (--plot / -o)")   # before the work, not after
    threshold = DEFAULT_MIN_SNR_DB if min_snr is None else min_snr
    rep = check_accuracy(graph, inputs=inputs, n=n, seed=seed, min_snr_db=threshold, oracles=oracle,
                         progress=progress_iter, task=task)
    preds = predictions(graph, known) if known is not None else []
    png = None
    if not no_plot and (plot_path or output_dir):
        if plot_path:
            png = plot_path
            rep.plot_snr(png)
        else:
            from pyembed.codegen.outdir import OutputDir
            # the model's name as one file name (no separator or control character from the model)
            name = "".join("_" if c in "/\\" or ord(c) < 32 else c for c in graph.name) + "-snr.png"
            with OutputDir(output_dir, force=force, what="-o/--output-dir") as out:
                rep.plot_snr(out.stage_path(name))
            png = out.path(name)
    below = bool(rep.flagged(key))
    oracle_errors = rep.oracle_errors
    failed = rep.bit_exact is False or bool(oracle_errors) or (min_snr is not None and below)
    if as_json:
        d = rep.to_dict()
        d.update({"table": key, "plot": png, "ok": not failed, "min_snr_set": min_snr is not None,
                  "predictions": [dataclasses.asdict(p) for p in preds]})
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
            if rep.bit_exact is None and not oracle_errors:
                click.echo("bit-exactness: NOT CHECKED (no TFLite interpreter ran the model)")
        if preds:
            agree = sum(p.agree for p in preds)
            click.echo(f"bundled samples ({known.note}): int8 and float64 agree on {agree} of {len(preds)}")
            for p in preds:
                click.echo("  " + p.line())
        if below and min_snr is None:
            click.echo(f"note: layers below {threshold:g} dB are flagged, not failed; set --min-snr DB to make "
                       f"them fail the check")
        if png:
            click.echo(f"wrote per-layer SNR plot: {png}")
        elif not no_plot:
            click.echo("(add --output-dir DIR for the per-layer SNR plot)")
    if oracle_errors:
        # the reason on stderr too, as every failed check ends
        click.echo("pyembed: error: " + "; ".join(f"{o.name} cannot run the model: {o.detail}" for o in oracle_errors)
                   + " (pyembed's result is unconfirmed)", err=True)
    sys.exit(EXIT_CHECK_FAILED if failed else EXIT_OK)


# -- profiles ---------------------------------------------------------------------------------------
