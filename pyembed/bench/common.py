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


def write_fitted_groups(path, fitted, mix_from, portable_note, doc_key, doc_text, data_file, data_doc, command, rows,
                        dsp_only=()):
    """Merge groups a calibration bench fitted into the instruction table at path (firmware_sim/
    profiles/pyembed_icount.json: calibrate_f32._table_path()) and keep its measurements beside the command that made them.

    fitted: {core: {group: {"coef": ..., "n": ...}}}; mix_from: {group: the class whose
    instruction mix the group takes (its runs are not traced)}; every build of a core gets the
    coefficients, the non-dsp ones marked with portable_note, except the groups in dsp_only (another kernel
    in the portable build: left out of it). Returns the two paths written."""
    import os

    with open(path) as f:
        doc = json.load(f)
    for core, groups in fitted.items():
        for build, t in doc["tables"].get(core, {}).items():
            for grp, g in groups.items():
                if build != "dsp" and grp in dsp_only:
                    continue
                src = mix_from[grp] if mix_from[grp] in t else "class:other"   # (a class this table lacks)
                t[grp] = {"coef": g["coef"], "n": g["n"], "mix": dict(t[src]["mix"]), "mix_from": src}
                if build != "dsp":
                    t[grp]["from"] = portable_note
    doc[doc_key] = doc_text
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    data = {}
    if os.path.exists(data_file):     # other sections of the file (calibrate_bilinear's "regions") stay
        with open(data_file) as f:
            data = json.load(f)
    data.update({"_doc": data_doc, "command": command, "rows": rows})
    with open(data_file, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    return [os.path.relpath(path), os.path.relpath(data_file)]
