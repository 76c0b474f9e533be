"""``pyembed model`` commands (for the lead to attach to pyembed.cli (pyembed.cli.app.main)):

    pyembed model info MODEL [--json]        operators, tensors, weights, MACs, scratch, unsupported ops
    pyembed model run MODEL [--seed N] [--runs N] [--check] [--json]
                                             run random inputs on the C graph runtime; with --check
                                             compare every output element with the TFLM interpreter

MODEL is a path or the name of a bundled model (pyembed/data/models).
Errors are PyEmbedErrors, which pyembed.cli.app turns into one line and exit 2.
"""
import json
import os

import click
import numpy as np

from pyembed.cli.options import apply_attention, attention_option, check_inputs_file, inputs_option, model_argument


def _resolve(model):
    from pyembed.data import resolve_model
    return resolve_model(model)


def _info(g):
    return {
        "name": g.name, "source": g.source_path, "format": g.source_format,
        "inputs": [{"tensor": t, "shape": list(g.tensors[t].shape), "dtype": str(g.tensors[t].dtype)}
                   for t in g.inputs],
        "outputs": [{"tensor": t, "shape": list(g.tensors[t].shape), "dtype": str(g.tensors[t].dtype)}
                    for t in g.outputs],
        "operators": [{"index": op.index, "type": op.type, "inputs": op.inputs, "outputs": op.outputs,
                       "macs": op.macs, "scratch_bytes": op.scratch_bytes, "supported": op.supported,
                       "reason": op.reason} for op in g.operators],
        "tensors": len(g.tensors), "weights_bytes": g.weights_bytes, "macs": g.macs,
        "activation_bytes_no_reuse": g.linear_layout().arena_size,
        "aliases": {str(k): v for k, v in g.aliases.items()},
        "unsupported": [{"index": i, "type": t} for i, t in g.unsupported],
    }


@click.group()
def model():
    """Inspect and run a .tflite / .onnx model on pyembed's graph runtime."""


@model.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def list_models(as_json):
    """The bundled models, with the short names every command accepts."""
    from pyembed.check.samples import available
    from pyembed.data import bundled_models, model_path
    have = set(available())
    rows = [{"name": short or stem, "file": os.path.basename(model_path(stem)), "bytes": os.path.getsize(model_path(stem)),
             "samples": stem in have} for short, stem in bundled_models()]
    if as_json:
        click.echo(json.dumps(rows, indent=1))
        return
    click.echo(f"{'name':<20} {'file':<40} {'bytes':>9}  real samples")
    for r in rows:
        click.echo(f"{r['name']:<20} {r['file']:<40} {r['bytes']:>9,}  {'yes' if r['samples'] else '-'}")
    click.echo("any command takes these names (any case) where it takes a model path, e.g. 'pyembed check kws'")


@model.command("info")
@model_argument("path")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def info(path, as_json):
    """Print MODEL's operators, weights, MACs, scratch and unsupported operators."""
    from pyembed.model.load import load_model
    g = load_model(_resolve(path))
    if as_json:
        click.echo(json.dumps(_info(g), indent=1))
        return
    click.echo(g.summary())
    click.echo(f"inputs: {[(t, list(g.tensors[t].shape), str(g.tensors[t].dtype)) for t in g.inputs]}")
    click.echo(f"outputs: {[(t, list(g.tensors[t].shape), str(g.tensors[t].dtype)) for t in g.outputs]}")
    click.echo(f"activations without reuse: {g.linear_layout().arena_size} B")
    if g.unsupported:
        click.echo("unsupported: " + ", ".join(f"#{i} {t}" for i, t in g.unsupported))


@model.command("run")
@model_argument("path")
@inputs_option("Run these inputs (.npy one sample or a batch, .npz one array per input) instead of random ones.")
@click.option("--seed", default=0, show_default=True, help="Seed of the random inputs.")
@click.option("--runs", default=1, show_default=True, help="Number of random inputs.")
@click.option("--check", is_flag=True, help="Compare every output element with the TFLM interpreter (.tflite).")
@attention_option()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def run(ctx, path, inputs_path, seed, runs, check, as_json, attention="auto"):
    """Run MODEL on random int8 inputs; print the outputs (and mismatches with --check)."""
    from pyembed.model.load import load_model
    path = _resolve(path)
    g = load_model(path)
    fused = apply_attention(g, attention)
    g.check_supported()
    rng = np.random.default_rng(seed)
    results, failed = [], False
    given = None
    if inputs_path:
        from pyembed.check.accuracy import load_inputs
        given = load_inputs(g, check_inputs_file(inputs_path))      # internal layout
        runs = len(given)
    for k in range(runs):
        xs = []
        for t in g.inputs if given is None else ():
            tensor = g.tensors[t]
            if tensor.dtype == np.float32:
                xs.append(rng.normal(0, 1, tensor.shape).astype(np.float32))
            else:
                info_ = np.iinfo(tensor.dtype)
                xs.append(rng.integers(info_.min, info_.max + 1, tensor.shape, dtype=tensor.dtype))
        if given is not None:
            xs = list(given[k])
        # ONNX graphs take NCHW arrays (their tensors are NHWC inside)
        xs = [x.transpose(tuple(np.argsort(p))) if p is not None else x for x, p in zip(xs, g.input_perms)]
        outs = g.run(xs if len(xs) > 1 else xs[0])
        entry = {"run": k, "outputs": [o.tolist() for o in outs]}
        if check:
            if g.source_format != "tflite":
                raise click.UsageError("--check compares with the TFLM interpreter: .tflite models only")
            from tflite_micro.python.tflite_micro import runtime
            it = runtime.Interpreter.from_file(path)
            for j, x in enumerate(xs):
                it.set_input(x, j)
            it.invoke()
            mism = []
            for j, o in enumerate(outs):
                want = it.get_output(j)
                bad = np.argwhere(o.astype(np.int64) != want.astype(np.int64))
                mism += [{"output": j, "index": [int(v) for v in idx], "got": int(o[tuple(idx)]),
                          "expected": int(want[tuple(idx)])} for idx in bad]
            entry["mismatches"] = mism
            failed |= bool(mism)
        results.append(entry)
    if as_json:
        click.echo(json.dumps({"model": g.name, "attention": fused, "results": results}, indent=1))
    else:
        for line in fused:
            click.echo(line)
        for r in results:
            line = f"run {r['run']}: " + "; ".join(str(np.asarray(o).ravel().tolist()) for o in r["outputs"])
            if check:
                n = sum(np.asarray(o).size for o in r["outputs"])
                line += (f"  -- bit-exact with TFLM ({n} elements)" if not r["mismatches"]
                         else f"  -- {len(r['mismatches'])} of {n} elements differ from TFLM: {r['mismatches']}")
            click.echo(line)
    ctx.exit(1 if failed else 0)
