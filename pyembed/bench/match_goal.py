"""Issue 32's goal for matching on the device: stereo at 640x480 features with
a 64-pixel disparity range in at most 8 KB of scratch on the Cortex-M4 board,
bit-exact with the host.

    python -m pyembed.bench match_goal [--json] [--rows R] [--profile P] [--full-frame]

The pair: scikit-image's Middlebury motorcycle pair (741x500) cropped to
640x480 when scikit-image is installed (with its ground truth), else the
bundled copy (370x250) upsampled by 2 (pixel repeat) and cropped, without
ground truth. Features: pyembed.kernels.matching.patch_features (radius 2:
25 per pixel) at full resolution. The matcher is the one PE_ATTENTION
operator of pyembed.model.match_graph (stream mode, per-row range, V
generated in the kernel).

Printed: the operator's scratch from the planner (the graph planned in one
unbounded region: Q and K of 640x480x25 are 7,680,000 B each, more than the
board's RAM) and from the C size query, and the board plan of a stripe of
rows (its scratch is the same: independent of the rows); the host run of the
whole frame on the C runtime (time, end-point error against the float64
pipeline and the ground truth); then a stripe of R rows (the middle of the
frame) built as firmware for the board and run under QEMU: instructions,
== with the host's rows of the whole frame. The whole frame's inputs do not
fit the board's RAM at once; without --full-frame its instruction count is
the stripe's scaled by rows, said to be an extrapolation. --full-frame runs
the whole frame on the board stripe by stripe, as a camera delivers it: the
same firmware (built once) is run under QEMU once per stripe of R rows (R
must divide the 480 rows), each with that stripe's features, and every row of
the assembled field is compared == with the host's whole-frame run; the
instructions are the sum of the measured runs.
"""
import argparse
import json
import os
import tempfile
import time

import numpy as np

W, H, DMAX, RADIUS, TEMPERATURE = 640, 480, 64, 2, 20.0
GOAL_SCRATCH = 8 * 1024


def _pair():
    try:
        from skimage import data
        left, right, disp = data.stereo_motorcycle()
        return (left[:H, :W].astype(np.float64), right[:H, :W].astype(np.float64), disp[:H, :W],
                "scikit-image motorcycle pair (741x500) cropped to 640x480")
    except ImportError:
        from pyembed.kernels.matching import motorcycle_pair
        a, b, _ = motorcycle_pair()
        up = [np.repeat(np.repeat(x, 2, axis=0), 2, axis=1)[:H, :W].astype(np.float64) for x in (a, b)]
        return up[0], up[1], None, "bundled motorcycle pair upsampled by 2 and cropped to 640x480 (no ground truth)"


def run(rows=8, profile="mps2-an386", board=True, full_frame=False):
    from pyembed._ext import _transformer
    from pyembed.model.match_graph import field_from_output, matching_graph
    from pyembed.kernels.matching import match_disparity, patch_features, quantize_symmetric
    from pyembed.plan import Region
    from pyembed.target.planning import PlanOptions, plan_for_target
    left, right, disp, source = _pair()
    f1, f2 = patch_features(left, RADIUS, 1), patch_features(right, RADIUS, 1)
    h, w, c = f1.shape
    q, qs = quantize_symmetric(f1.reshape(h * w, c))
    k, ks = quantize_symmetric(f2.reshape(h * w, c))
    g = matching_graph("stereo", h, w, c, qs, ks, max_disparity=DMAX, temperature=TEMPERATURE)
    op = g.operators[0]
    opts = PlanOptions(attention="none", strategy="none")
    full = plan_for_target(g, None, opts, regions=[Region("ram", None)], action="plan")
    r = {"source": source, "features": [w, h, c], "max_disparity": DMAX, "macs": int(op.macs),
         "keys": int(op.params["keys"]),
         "scratch_planned": int(sum(b.size for b in full.plan.buffers if b.kind == "scratch")),
         "scratch_c_query": int(_transformer.xattn_buffer_size(op.params["words"])),
         "arena_full_frame": int(full.plan.arena_size), "goal_scratch": GOAL_SCRATCH}
    t0 = time.perf_counter()
    out = np.asarray(g.run([q, k])[0]).reshape(h * w, 1)
    r["host_seconds"] = time.perf_counter() - t0
    field = field_from_output("stereo", out, h, w, g)
    t0 = time.perf_counter()
    ref = match_disparity(f1, f2, max_disparity=DMAX, temperature=TEMPERATURE, precision="float64")
    r["float64_seconds"] = time.perf_counter() - t0
    r["epe_vs_float64"] = float(np.abs(field - ref).mean())
    if disp is not None:
        valid = np.isfinite(disp)
        r["known_pixels"] = int(valid.sum())
        r["epe_vs_truth"] = float(np.abs(field - disp)[valid].mean())
        r["epe_float64_vs_truth"] = float(np.abs(ref - disp)[valid].mean())
    rows = max(1, min(int(rows), h))
    r0 = (h - rows) // 2
    sl = slice(r0 * w, (r0 + rows) * w)
    gs = matching_graph("stereo", rows, w, c, qs, ks, max_disparity=DMAX, temperature=TEMPERATURE)
    tp = plan_for_target(gs, profile, opts, action="build firmware for")
    r["stripe"] = {"rows": [r0, r0 + rows - 1], "profile": tp.profile.name, "arena": int(tp.plan.arena_size),
                   "scratch_planned": int(sum(b.size for b in tp.plan.buffers if b.kind == "scratch")),
                   "macs": int(gs.operators[0].macs)}
    xs = [q[sl], k[sl]]
    host = np.asarray(gs.run(xs)[0]).reshape(rows * w, 1)
    r["stripe"]["host_equals_full_frame"] = bool(np.array_equal(host, out[sl]))
    if board:
        from pyembed.target.firmware import build_project, generate, run_project
        with tempfile.TemporaryDirectory(prefix="pyembed-match-goal-") as d:
            proj = generate(gs, tp.profile, os.path.join(d, "fw"), plan=tp.plan)
            build_project(proj.outdir)
            fw = run_project(proj, xs)
            if full_frame:
                r["full_frame"] = _full_frame(proj, run_project, q, k, out, h, w, rows)
        got = np.asarray(fw.outputs[0]).reshape(rows * w, 1)
        r["stripe"]["board_equals_host"] = bool(np.array_equal(got, host))
        r["stripe"]["instructions"] = int(fw.total_instructions)
        r["stripe"]["instructions_per_mac"] = fw.total_instructions / max(1, r["stripe"]["macs"])
        r["full_frame_instructions_extrapolated"] = int(round(fw.total_instructions * h / rows))
        clock = float(tp.profile.clock_hz)
        r["full_frame_seconds_at_1_ipc_extrapolated"] = r["full_frame_instructions_extrapolated"] / clock
    r["scratch_goal_met"] = r["scratch_planned"] <= GOAL_SCRATCH and r["stripe"]["scratch_planned"] <= GOAL_SCRATCH
    return r


def _full_frame(proj, run_project, q, k, out, h, w, rows):
    """Every stripe of rows rows run on the board (one QEMU run each, the same firmware): the
    assembled output == the host's whole frame, the measured instructions summed."""
    if h % rows:
        raise SystemExit(f"--full-frame: --rows {rows} does not divide the frame's {h} rows")
    got, total, t0 = np.empty_like(out), 0, time.perf_counter()
    for r0 in range(0, h, rows):
        sl = slice(r0 * w, (r0 + rows) * w)
        fw = run_project(proj, [q[sl], k[sl]])
        got[sl] = np.asarray(fw.outputs[0]).reshape(rows * w, 1)
        total += int(fw.total_instructions)
    bad = np.flatnonzero(got.ravel() != out.ravel())
    return {"stripes": h // rows, "instructions": total, "board_equals_host": bad.size == 0,
            "mismatches": int(bad.size), "first_mismatches": [int(i) for i in bad[:10]],
            "wall_seconds": time.perf_counter() - t0}


def _render(r):
    s = r["stripe"]
    lines = [f"stereo matching goal (issue 32): {r['source']}",
             f"  features {r['features'][0]}x{r['features'][1]}, {r['features'][2]} per pixel, disparity range "
             f"0..{r['max_disparity']} ({r['keys']:,} keys, {r['macs']:,} MACs)",
             f"  scratch: {r['scratch_planned']} B from the planner (whole frame), {r['scratch_c_query']} B from the "
             f"C size query; goal <= {r['goal_scratch']} B: {'met' if r['scratch_goal_met'] else 'NOT met'}",
             f"  whole-frame arena {r['arena_full_frame']:,} B (Q, K, output: more than the board's RAM)",
             f"  host, C runtime: {r['host_seconds']:.2f} s (float64 pipeline {r['float64_seconds']:.2f} s); "
             f"end-point error vs float64 {r['epe_vs_float64']:.4f} px"
             + (f", vs ground truth {r['epe_vs_truth']:.4f} px (float64 {r['epe_float64_vs_truth']:.4f} px, "
                f"{r['known_pixels']:,} known pixels)" if "epe_vs_truth" in r else ""),
             f"  stripe rows {s['rows'][0]}..{s['rows'][1]} on {s['profile']}: arena {s['arena']:,} B, scratch "
             f"{s['scratch_planned']} B (planner), {s['macs']:,} MACs; host stripe == whole frame's rows: "
             f"{'yes' if s['host_equals_full_frame'] else 'NO'}"]
    if "instructions" in s:
        lines.append(f"  QEMU: {s['instructions']:,} instructions ({s['instructions_per_mac']:.1f} per MAC); board == "
                     f"host: {'yes' if s['board_equals_host'] else 'NO'}")
        lines.append(f"  whole frame extrapolated from the stripe (not run): {r['full_frame_instructions_extrapolated']:,}"
                     f" instructions, {r['full_frame_seconds_at_1_ipc_extrapolated']:.1f} s at one instruction "
                     f"per cycle")
    if "full_frame" in r:
        f = r["full_frame"]
        lines.append(f"  whole frame on the board, {f['stripes']} stripes of {s['rows'][1] - s['rows'][0] + 1} rows "
                     f"(one QEMU run each, {f['wall_seconds']:.0f} s): {f['instructions']:,} instructions measured; "
                     f"board == host for every row: "
                     + ("yes" if f["board_equals_host"] else f"NO ({f['mismatches']} mismatches, first at "
                                                            f"{f['first_mismatches']})"))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench match_goal", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--rows", type=int, default=8, help="rows of the stripe run on the board")
    ap.add_argument("--profile", default="mps2-an386")
    ap.add_argument("--no-board", action="store_true", help="skip the QEMU run")
    ap.add_argument("--full-frame", action="store_true",
                    help="also run the whole frame on the board, one QEMU run per stripe of --rows rows")
    a = ap.parse_args(argv)
    if a.rows < 1:
        ap.error("--rows >= 1")
    if a.full_frame and a.no_board:
        ap.error("--full-frame runs on the board: not with --no-board")
    r = run(a.rows, a.profile, board=not a.no_board, full_frame=a.full_frame)
    print(json.dumps(r, indent=1) if a.json else _render(r))
    return 0
