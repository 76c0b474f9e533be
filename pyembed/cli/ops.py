"""``pyembed ops [--markdown | --json] [--tflm]``: every operator the graph
runtime executes, read from the operator registry (pyembed.model.ops: the
first twelve of core plus every registered family), with its constraints
(dtypes, ranks, options) and its pe_graph_op_type code. ``--tflm`` lists
TFLite Micro's registered operators instead, each with whether pyembed runs
it or why not (pyembed.model.tflm_registry).

A family documents its constraints in a module-level ``CONSTRAINTS`` dict
(operator name -> text); an operator without one shows the first line of its
prepare function's docstring."""
import json
import sys

import click

# the first twelve operators (pyembed/model/ops/core.py), by what their prepare functions accept
CORE = {
    "CONV_2D": (0, "int8 NHWC 4-D; per-channel int8 weights, int32 bias; SAME / VALID / explicit padding, "
                   "stride, dilation, groups; fused RELU / RELU6 / RELU_N1_TO_1"),
    "DEPTHWISE_CONV_2D": (1, "int8 NHWC 4-D; depth multiplier; per-channel weights; padding, stride, "
                             "dilation; fused activations"),
    "AVERAGE_POOL_2D": (2, "int8 NHWC 4-D; SAME / VALID; fused activations"),
    "MAX_POOL_2D": (3, "int8 NHWC 4-D; SAME / VALID; fused activations"),
    "FULLY_CONNECTED": (4, "int8; per-tensor or per-channel weights; keep_num_dims; fused activations"),
    "SOFTMAX": (5, "int8 in / int8 out; beta; over the last axis"),
    "RESHAPE": (6, "int8 / int16 / int32 / float32; aliased (no copy)"),
    "ADD": (7, "int8; numpy broadcasting up to 4-D; fused activations"),
    "MUL": (8, "int8; numpy broadcasting up to 4-D; fused activations"),
    "QUANTIZE": (10, "float32 -> int8, or int8 -> int8 requantization (pe_graph_op_type 9)"),
    "DEQUANTIZE": (11, "int8 -> float32"),
}


def operator_table():
    """[{name, code, family, constraints}] of every supported operator, by code."""
    import importlib

    from pyembed.model.ops import SUPPORTED_OPS
    from pyembed.model.ops.registry import REGISTRY
    rows = []
    for name in SUPPORTED_OPS:
        if name in CORE:
            code, text = CORE[name]
            rows.append({"name": name, "code": code, "family": "core", "constraints": text})
            continue
        d = REGISTRY.get(name)
        if d is None:
            rows.append({"name": name, "code": None, "family": "core", "constraints": ""})
            continue
        mod = importlib.import_module(d.family)
        text = getattr(mod, "CONSTRAINTS", {}).get(name)
        if text is None:
            doc = (d.prepare.__doc__ or "").strip().splitlines()
            text = doc[0] if doc else ""
        rows.append({"name": name, "code": d.code, "family": d.family.rsplit(".", 1)[-1], "constraints": text})
    for r in rows:
        # variants ("TYPE@int16", "GATHER@batched"): their own code and runner
        variants = sorted((v.code, v.name) for v in REGISTRY.values() if v.name.startswith(r["name"] + "@"))
        if variants:
            listed = ", ".join(f"{n.split('@', 1)[1]} (code {c})" for c, n in variants)
            r["constraints"] = (r["constraints"] + "; " if r["constraints"] else "") + f"variants: {listed}"
    rows.sort(key=lambda r: (r["code"] is None, r["code"] if r["code"] is not None else 0, r["name"]))
    return rows


def markdown(rows):
    lines = ["| operator | code | family | constraints |", "|---|---:|---|---|"]
    for r in rows:
        lines.append(f"| {r['name']} | {r['code'] if r['code'] is not None else ''} | {r['family']} | "
                     f"{r['constraints'].replace('|', '/')} |")
    return "\n".join(lines)


def tflm_markdown(rows):
    lines = ["| TFLM operator | TFLM types | pyembed | detail |", "|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['name']} | {' / '.join(r['tflm_types'])} | {r['status']} | "
                     f"{r['detail'].replace('|', '/')} |")
    return "\n".join(lines)


def _tflm(as_markdown, as_json):
    from pyembed.model import tflm_registry as R
    table = R.load_table()
    rows = R.compare(table)
    if as_json:
        json.dump({"source": table["source"], "operators": rows}, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return
    if as_markdown:
        click.echo(tflm_markdown(rows))
        return
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        types = " / ".join(r["tflm_types"])
        click.echo(f"{r['name']:<{width}}  {r['status']:<7}  {types + '  ' if types else ''}{r['detail']}")
    n = {s: sum(r["status"] == s for r in rows) for s in ("runs", "gap", "missing")}
    click.echo(f"{len(rows)} TFLM operators ({table['source']}): pyembed runs {n['runs']}, "
               f"{n['gap']} listed gaps, {n['missing']} unlisted")


@click.command("ops")
@click.option("--markdown", "as_markdown", is_flag=True, help="A Markdown table (the README's).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable list.")
@click.option("--tflm", "tflm", is_flag=True,
              help="TFLite Micro's registered operators (the table kept in pyembed/data/"
                   "tflm_registrations.json) beside pyembed's: runs, or the reason it does not.")
def ops_command(as_markdown, as_json, tflm):
    """List every operator the graph runtime executes, with its constraints."""
    if tflm:
        _tflm(as_markdown, as_json)
        return
    rows = operator_table()
    if as_json:
        json.dump(rows, sys.stdout, indent=1)
        sys.stdout.write("\n")
    elif as_markdown:
        click.echo(markdown(rows))
    else:
        width = max(len(r["name"]) for r in rows)
        for r in rows:
            code = "" if r["code"] is None else str(r["code"])
            click.echo(f"{r['name']:<{width}}  {code:>3}  {r['family']:<6}  {r['constraints']}")
        click.echo(f"{len(rows)} operators")
