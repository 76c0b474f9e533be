"""`pyembed vectors check`: external bit-exact test vectors."""
import json
import os
import sys

import click

from pyembed.cli.app import EXIT_CHECK_FAILED, EXIT_OK, _echo_json, _jsonable, progress_iter, run_with_progress  # noqa: F401


@click.group()
def vectors():
    """Bit-exact test vectors from other libraries."""


@vectors.command("check")
@click.argument("directory", required=False, type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--op", "ops", multiple=True, help="Only cases of this op (repeatable).")
@click.option("--max-listed", default=20, show_default=True,
              help="Mismatching elements listed per failed case (0 = all).")
def vectors_check(directory, as_json, ops, max_listed):
    """Run every case in DIRECTORY (index.json + one .npz per case) through
    pyembed's kernels and compare bit for bit.

    DIRECTORY defaults to the CMSIS-NN vectors bundled with pyembed. Prints a
    line per case and a final 'N passed, M failed[, K skipped]'; exits 1 if
    any case failed."""
    from pyembed.check import vectors as V
    from pyembed.data import PEER_VECTORS_DIR
    if directory is not None and not os.path.isdir(directory):
        from pyembed.errors import ArgumentError
        raise ArgumentError(f"DIRECTORY {directory}: no such directory (a folder with index.json and one .npz "
                            f"per case)")
    directory = directory or PEER_VECTORS_DIR
    results = V.check_directory(directory, ops=set(ops) or None)
    failed = any(r.status in ("fail", "error") for r in results)
    if as_json:
        click.echo(json.dumps({
            "directory": directory,
            "cases": [{"name": r.name, "op": r.op, "status": r.status, "elements": r.elements,
                       "message": r.message,
                       "mismatches": [{"index": list(i), "got": g, "expected": e} for i, g, e in r.mismatches]}
                      for r in results],
            "summary": V.summary_line(results),
        }, indent=1))
    else:
        for r in results:
            click.echo(r.line(max_listed or None))
        click.echo(V.summary_line(results))
    sys.exit(1 if failed else 0)

