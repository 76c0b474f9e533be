"""Shared by the table generators in tools/ (gen_exp2_table.py,
gen_sigmoid_lut.py): render a generated C file that defines one constant
array, and the command line that rewrites it or checks it is current.
"""
import argparse
import sys


def render_c_array(preamble, declaration, values, per_line):
    """The C text: the preamble lines (comment, includes, blank), then
    `declaration = {`, the values per_line to a line, and `};`."""
    lines = list(preamble) + [f"{declaration} = {{"]
    for k in range(0, len(values), per_line):
        lines.append("    " + ", ".join(f"{v}" for v in values[k:k + per_line]) + ",")
    lines.append("};")
    return "\n".join(lines) + "\n"


def generator_main(doc, out, tool, make_text, argv=None, wrote_note=None):
    """Write make_text() to out, or with --check exit 1 (saying so) when out
    differs from it. tool is the script's path as a user would run it;
    wrote_note(), if given, adds a remark to the 'wrote' line."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only check the C file is current")
    args = ap.parse_args(argv)
    text = make_text()
    if args.check:
        if not out.exists() or out.read_text() != text:
            print(f"{out} is stale; run {tool}", file=sys.stderr)
            return 1
        return 0
    out.write_text(text)
    print(f"wrote {out}" + (f" ({wrote_note()})" if wrote_note else ""))
    return 0
