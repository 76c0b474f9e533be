"""The built-in demonstration run by ``pyembed`` with no arguments.

It exercises what is built, on data shipped in the package, and prints a
short report: bit-exactness against the bundled CMSIS-NN vectors and the
measured accuracy of the fixed-point exponent, reciprocal and base-2
exponent against float64.
"""
import math

import click
import numpy as np


def _fixed_point_report():
    from pyembed import fixed
    rng = np.random.default_rng(0)
    a = -rng.integers(0, 16 << 26, 20000, dtype=np.int64)  # [-16, 0] in Q5.26
    got = fixed.exp_on_negative(a) / 2.0**31
    err_exp = np.max(np.abs(got - np.exp(a / 2.0**26)))
    x = rng.integers(0, 2**31 - 1, 20000, dtype=np.int64)
    got = fixed.one_over_one_plus_x(x) / 2.0**31
    err_rec = np.max(np.abs(got - 1.0 / (1.0 + x / 2.0**31)))
    z = -rng.integers(0, 24 << 22, 20000, dtype=np.int64)
    got = fixed.exp2_neg(z) / 2.0**30
    err_e2 = np.max(np.abs(got - np.exp2(z / 2.0**22)))
    return [
        ("exp on [-16, 0], Q5.26 -> Q0.31", err_exp),
        ("1/(1+x) on [0, 1), Q0.31", err_rec),
        ("2^x on [-24, 0], Q9.22 -> Q1.30", err_e2),
    ]


def run_demo():
    from pyembed import vectors as V
    from pyembed.data import PEER_VECTORS_DIR

    click.echo("pyembed demonstration")
    click.echo("=====================")
    click.echo("")
    click.echo(f"1. Bit-exactness against the bundled CMSIS-NN int8 vectors ({PEER_VECTORS_DIR})")
    results = V.check_directory(PEER_VECTORS_DIR)
    by_op = {}
    for r in results:
        by_op.setdefault(r.op, []).append(r)
    for op, rs in sorted(by_op.items()):
        ok = sum(r.status == "pass" for r in rs)
        sk = sum(r.status == "skip" for r in rs)
        state = "not yet supported" if sk == len(rs) else f"{ok}/{len(rs)} bit-exact"
        click.echo(f"   {op:<20} {state}")
    click.echo(f"   {V.summary_line(results)}")
    click.echo("")
    click.echo("2. Fixed-point approximations, max abs error against float64 (20 000 random points)")
    for label, err in _fixed_point_report():
        click.echo(f"   {label:<36} {err:.3e}  (~{-math.log2(err):.1f} bits)")
    failed = any(r.status in ("fail", "error") for r in results)
    return 1 if failed else 0
