#!/usr/bin/env python3
"""Re-run every command shown in README.md and paste its real output back,
so the figures in the README always come from the code.

Each fenced block of README.md whose first line starts with "$ " is one
command; everything after that line is replaced by what the command prints
(stdout and stderr). The commands run in order, in one fresh temporary
folder (so `out/` of one block is there for the next, and the checkout is
not written to), after writing the `x.npy` the README describes (int8
[[37], [-100], [5]]). Elapsed times ("done in 61.2 s") are not compared, nor the
name of the placement algorithm that reached the arena first (time-budgeted
searches: on a tie it depends on the machine's load); every figure is.

    python tools/readme_tour.py           # rewrite README.md in place
    python tools/readme_tour.py --check   # exit 1 if any block's output differs
                                          # (tests/test_readme_tour.py runs it)
"""
import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(REPO, "README.md")


def run(cmd, cwd):
    r = subprocess.run(cmd, shell=True, cwd=cwd, capture_output=True, text=True,
                       env=dict(os.environ, COLUMNS="120"))
    return (r.stdout + r.stderr).rstrip("\n")


# what changes from run to run on its own: the wall-clock time of a run, and
# which placement algorithm reached the smallest arena first (the searches run
# on a time budget, so on a tie the winner's name depends on the machine's
# load; the arena itself is compared)
_VOLATILE = [(re.compile(r"done in \d+(\.\d+)? s"), "done in N s"),
             (re.compile(r"\b(linear|greedy_size|greedy_conflicts|order_search|cpsat)\b"), "ALGORITHM")]


def normalised(text):
    for rx, sub in _VOLATILE:
        text = rx.sub(sub, text)
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines())


def _prepare(cwd):
    import numpy as np
    np.save(os.path.join(cwd, "x.npy"), np.array([[37], [-100], [5]], dtype=np.int8))


def refresh(text, check=False, cwd=None, log=None):
    """(new README text, [(command, unified diff)] of the blocks whose output
    changed beyond the volatile figures)."""
    diffs = []
    own = cwd is None
    tmp = tempfile.TemporaryDirectory(prefix="readme-tour-") if own else None
    cwd = tmp.name if own else cwd
    _prepare(cwd)

    def repl(m):
        body = m.group(1)
        first, _, old = body.partition("\n")
        cmd = first[2:]
        if log:
            log(f"$ {cmd}")
        new = run(cmd, cwd)
        if normalised(new) != normalised(old):
            diff = "\n".join(difflib.unified_diff(normalised(old).splitlines(), normalised(new).splitlines(),
                                                  "README.md", "real output", lineterm="", n=1))
            diffs.append((cmd, diff))
        return f"```\n{first}\n{new}\n```"

    try:
        text = re.sub(r"```\n(\$ [^\n]*\n.*?)```", lambda m: repl(m), text, flags=re.S)
    finally:
        if own:
            tmp.cleanup()
    return text, diffs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    with open(README) as f:
        text = f.read()
    new, diffs = refresh(text, log=lambda m: print(m, file=sys.stderr, flush=True))
    if args.check:
        for cmd, diff in diffs:
            print(f"stale output: $ {cmd}\n{diff}", file=sys.stderr)
        return 1 if diffs else 0
    with open(README, "w") as f:
        f.write(new)
    print(f"refreshed {README}: {len(diffs)} block(s) changed: " + ", ".join(c for c, _ in diffs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
