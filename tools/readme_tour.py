#!/usr/bin/env python3
"""Re-run every command shown in README.md's "Five-minute tour" and paste its
real output back, so the figures in the README always come from the code.

Each fenced block in that section whose first line starts with "$ " is one
command; everything after that line is replaced by what the command prints
(stdout and stderr), run from the repository root.

    python tools/readme_tour.py           # rewrite README.md in place
    python tools/readme_tour.py --check   # exit 1 if any block's output differs
"""
import argparse
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(REPO, "README.md")
SECTION = "## Five-minute tour"


def run(cmd, cwd):
    r = subprocess.run(cmd, shell=True, cwd=cwd, capture_output=True, text=True,
                       env=dict(os.environ, COLUMNS="120"))
    return (r.stdout + r.stderr).rstrip("\n")


def refresh(text, check=False):
    start = text.index(SECTION)
    head, tour = text[:start], text[start:]
    diffs = []

    def repl(m):
        body = m.group(1)
        first, _, old = body.partition("\n")
        cmd = first[2:]
        new = run(cmd, REPO)
        if new.rstrip() != old.rstrip():
            diffs.append(cmd)
        return f"```\n{first}\n{new}\n```"

    tour = re.sub(r"```\n(\$ [^\n]*\n.*?)```", lambda m: repl(m), tour, flags=re.S)
    return head + tour, diffs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    with open(README) as f:
        text = f.read()
    new, diffs = refresh(text)
    if args.check:
        for d in diffs:
            print(f"stale output: $ {d}", file=sys.stderr)
        return 1 if diffs else 0
    with open(README, "w") as f:
        f.write(new)
    print(f"refreshed {README}: {len(diffs)} block(s) changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
