"""`pyembed check`: fixed-point accuracy against float64 and bit-exactness."""
import sys

import click

from pyembed.cli.app import EXIT_CHECK_FAILED, EXIT_OK, _echo_json, _jsonable, progress_iter, run_with_progress  # noqa: F401


@click.command("check", short_help="Accuracy: int8 vs float64 per layer (SNR, LSB error), bit-exactness with TFLite.")
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
    from pyembed.check.accuracy import MODE_TITLES, check_accuracy
    from pyembed.model.load import load_model

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
