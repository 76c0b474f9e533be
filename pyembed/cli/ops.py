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

from pyembed.model.ops.table import CORE, operator_table  # noqa: F401  (the table lives in the model layer)


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
