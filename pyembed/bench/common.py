"""Output helpers shared by the benchmark scripts."""
import json
import sys


def emit(result, as_json, render):
    """Print result as JSON (as_json) or through render(result) -> str."""
    if as_json:
        json.dump(result, sys.stdout, indent=1, default=float)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render(result).rstrip() + "\n")


def table(headers, rows):
    """Plain-text table with right-aligned columns."""
    cells = [list(map(str, headers))] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for k, r in enumerate(cells):
        lines.append("  ".join(c.rjust(w) for c, w in zip(r, widths)))
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def measured_rows(measure, load=None, save=None):
    """A calibration bench's measurement rows: read from load (a file a run saved: a list of rows,
    or {"rows": [...]}) instead of measuring, else measure() and, with save, kept in that file."""
    if load:
        with open(load) as f:
            rows = json.load(f)
        return rows["rows"] if isinstance(rows, dict) else rows
    rows = measure()
    if save:
        with open(save, "w") as f:
            json.dump(rows, f)
    return rows
