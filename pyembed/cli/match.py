"""``pyembed match LEFT RIGHT --mode stereo|flow [--max-disparity D] [--factor F]
[--profile P] [--run] [-o OUT]``: stereo disparity or optical flow between two
images without a cost volume, run as one PE_ATTENTION graph operator on the C
runtime (pyembed.model.match_graph: per-row key range, coordinates generated
in the kernel).

LEFT / RIGHT are image files (.png, or .npy arrays [H, W] / [H, W, C]) or the
word ``motorcycle`` (both) for the bundled Middlebury 2014 motorcycle pair
(370x250, with ground truth; pyembed/data/stereo/PROVENANCE.md). Features are
pyembed.kernels.matching.patch_features (a fixed normalised-patch extractor:
grayscale, block-averaged by --factor, (2 radius + 1)^2 values per pixel). The
field is written as OUT/field.npy (float64 pixels: disparity [H, W] or flow
[H, W, 2]) and OUT/field.png; printed: the end-point error against the same
pipeline in float64 (and against the ground truth where there is one), the
operator's scratch bytes (the plan's scratch buffer on --profile and the C
size query), its MACs.

--run builds the matching graph as firmware for --profile (a QEMU board) and
runs it under QEMU: a stripe of --run-rows image rows for stereo (rows are
independent: the same operator on fewer rows), the whole image for flow;
prints the instruction counts and checks the board's output == the host's.
"""
import os
import time

import click
import numpy as np

from pyembed.errors import ArgumentError, PyEmbedError

MOTORCYCLE = "motorcycle"
DEFAULT_FACTOR = {"stereo": 2, "flow": 8}


def _read_image(path, what):
    if path.lower().endswith(".npy"):
        try:
            a = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise ArgumentError(f"{what}: cannot read {path}: {e}") from None
    elif path.lower().endswith(".png"):
        try:
            from PIL import Image
            with Image.open(path) as im:
                a = np.asarray(im.convert("RGB") if im.mode not in ("L", "RGB", "I;16") else im)
        except ImportError:
            from pyembed._png import read_png
            a = read_png(path)
        except OSError as e:
            raise ArgumentError(f"{what}: cannot read {path}: {e}") from None
    else:
        raise ArgumentError(f"{what}: expected a .png or .npy file or the word {MOTORCYCLE!r}, got {path!r}")
    a = np.asarray(a)
    if a.ndim == 3 and a.shape[2] in (2, 4):
        a = a[..., :-1]   # drop alpha
    if a.ndim not in (2, 3) or min(a.shape[:2]) == 0:
        raise ArgumentError(f"{what}: expected an image [H, W] or [H, W, C], got shape {a.shape}")
    if not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
        raise ArgumentError(f"{what}: expected numbers, got dtype {a.dtype}")
    return a.astype(np.float64)


def _images(left, right):
    """(left, right, ground-truth disparity in image pixels or None)."""
    if (left == MOTORCYCLE) != (right == MOTORCYCLE):
        raise ArgumentError(f"LEFT, RIGHT: {MOTORCYCLE!r} names the bundled pair: give it for both")
    if left == MOTORCYCLE:
        from pyembed.kernels.matching import motorcycle_pair
        a, b, disp = motorcycle_pair()
        return a.astype(np.float64), b.astype(np.float64), disp
    a, b = _read_image(left, "LEFT"), _read_image(right, "RIGHT")
    if a.shape[:2] != b.shape[:2]:
        raise ArgumentError(f"LEFT, RIGHT: image sizes differ ({a.shape[1]}x{a.shape[0]} vs "
                            f"{b.shape[1]}x{b.shape[0]})")
    return a, b, None


def _reduce_truth(disp, factor, h, w):
    """The ground truth at the feature resolution: block means / factor, valid
    where every pixel of the block is known."""
    blocks = disp[:h * factor, :w * factor].reshape(h, factor, w, factor)
    valid = np.isfinite(blocks).all(axis=(1, 3))
    gt = np.where(valid, np.nan_to_num(blocks, posinf=0.0, neginf=0.0).mean(axis=(1, 3)) / factor, 0.0)
    return gt, valid


def _field_png(path, field, mode):
    from pyembed._png import write_png
    if mode == "stereo":
        f = np.nan_to_num(field)
        top = max(float(f.max()), 1e-9)
        write_png(path, np.clip(np.rint(255.0 * np.clip(f, 0, None) / top), 0, 255).astype(np.uint8))
    else:
        f = np.nan_to_num(field)
        peak = max(float(np.abs(f).max()), 1e-9)
        rgb = np.empty(f.shape[:2] + (3,), np.uint8)
        rgb[..., 0] = np.clip(np.rint(128 + 127 * f[..., 0] / peak), 0, 255)
        rgb[..., 1] = np.clip(np.rint(128 + 127 * f[..., 1] / peak), 0, 255)
        rgb[..., 2] = 128
        write_png(path, rgb)


def _epe(a, b, mode, valid=None):
    d = np.abs(a - b) if mode == "stereo" else np.sqrt(((a - b) ** 2).sum(axis=-1))
    return float(d[valid].mean() if valid is not None else d.mean())


def _scratch(g, profile):
    """(the plan's scratch bytes for the operator, the C size query, the arena) on profile."""
    from pyembed._ext import _transformer
    from pyembed.target.planning import PlanOptions, plan_for_target
    tp = plan_for_target(g, profile, PlanOptions(attention="none", strategy="none"), action="match on")
    planned = sum(b.size for b in tp.plan.buffers if b.kind == "scratch")
    return planned, int(_transformer.xattn_buffer_size(g.operators[0].params["words"])), int(tp.plan.arena_size)


def _run_rows(rows, h, w, c):
    if rows is not None:
        return min(int(rows), h)
    # Q and K of the stripe in at most 64 KB of the board's RAM
    return max(1, min(h, (64 * 1024) // (2 * w * c)))


@click.command("match")
@click.argument("left")
@click.argument("right")
@click.option("--mode", type=click.Choice(["stereo", "flow"]), default="stereo", show_default=True,
              help="stereo: disparity along the rows (each pixel sees its row, x - D .. x); flow: (dx, dy) "
                   "against every pixel of RIGHT.")
@click.option("--max-disparity", "max_disparity", type=int, default=None,
              help="Stereo: the largest disparity searched, in feature pixels (default: the ground truth's "
                   "largest + 2 for motorcycle, else min(64, width - 1)).")
@click.option("--factor", type=int, default=None,
              help="Block-average the images by F before the features (default 2 for stereo, 8 for flow).")
@click.option("--radius", type=int, default=2, show_default=True,
              help="Patch radius of the features: (2 radius + 1)^2 values per pixel.")
@click.option("--temperature", type=float, default=20.0, show_default=True,
              help="Softmax scale of the correlation (larger: sharper matches).")
@click.option("-p", "--profile", default="mps2-an386", show_default=True,
              help="MCU profile the scratch is planned on and --run builds for.")
@click.option("--run", "do_run", is_flag=True, help="Build the firmware for --profile and run it under QEMU: "
              "instruction counts and == with the host.")
@click.option("--run-rows", "run_rows", type=int, default=None,
              help="Stereo --run: image rows in the firmware's stripe (default: Q and K within 64 KB).")
@click.option("-o", "--out", "outdir", default="pyembed-match", show_default=True,
              help="Directory for field.npy, field.png (and the firmware project with --run).")
def match_command(left, right, mode, max_disparity, factor, radius, temperature, profile, do_run, run_rows,
                  outdir):
    """Stereo disparity or optical flow between LEFT and RIGHT (.png / .npy, or
    `motorcycle` twice for the bundled pair) as one attention operator on the C
    runtime: no cost volume, coordinates generated in the kernel."""
    from pyembed._validate import int_in_range, positive_finite
    from pyembed.model.match_graph import field_from_output, matching_graph
    from pyembed.kernels.matching import match_disparity, match_flow, patch_features, quantize_symmetric
    factor = int_in_range(DEFAULT_FACTOR[mode] if factor is None else factor, "--factor", 1)
    radius = int_in_range(radius, "--radius", 0)
    temperature = positive_finite(temperature, "--temperature")
    if run_rows is not None:
        run_rows = int_in_range(run_rows, "--run-rows", 1)
    a, b, disp = _images(left, right)
    f1, f2 = patch_features(a, radius, factor), patch_features(b, radius, factor)
    h, w, c = f1.shape
    gt = valid = None
    if disp is not None:
        gt, valid = _reduce_truth(disp, factor, h, w)
    if mode == "stereo":
        if max_disparity is None:
            max_disparity = int(np.ceil(gt[valid].max())) + 2 if gt is not None and valid.any() else min(64, w - 1)
        max_disparity = int_in_range(max_disparity, "--max-disparity", 0)
    elif max_disparity is not None:
        raise ArgumentError("--max-disparity: only with --mode stereo")
    q, qs = quantize_symmetric(f1.reshape(h * w, c))
    k, ks = quantize_symmetric(f2.reshape(h * w, c))
    g = matching_graph(mode, h, w, c, qs, ks, max_disparity=max_disparity, temperature=temperature)
    op = g.operators[0]
    t0 = time.perf_counter()
    out = np.asarray(g.run([q, k])[0])
    host_s = time.perf_counter() - t0
    field = field_from_output(mode, out, h, w, g)
    if mode == "stereo":
        ref = match_disparity(f1, f2, max_disparity=max_disparity, temperature=temperature, precision="float64")
    else:
        ref = match_flow(f1, f2, temperature=temperature, precision="float64")
    os.makedirs(outdir, exist_ok=True)
    np.save(os.path.join(outdir, "field.npy"), field)
    _field_png(os.path.join(outdir, "field.png"), field, mode)
    planned, queried, arena = _scratch(g, profile)
    src = "bundled Middlebury motorcycle pair" if left == MOTORCYCLE else f"{left} / {right}"
    click.echo(f"{mode} matching of the {src}: features {w}x{h}, {c} per pixel (factor {factor}, radius {radius})"
               + (f", max disparity {max_disparity}" if mode == "stereo" else ", every pixel against every pixel"))
    rng = op.options.get("range")
    click.echo(f"operator: PE_ATTENTION, stream mode, {op.params['keys']} keys in all"
               + (f" (each pixel: its row, x - {max_disparity} .. x)" if rng else "")
               + f"; V generated in the kernel ({op.options['v_gen']['name']}): no V tensor, no mask tensor")
    click.echo(f"scratch: {planned} B (the plan on {profile}; C size query {queried} B), arena {arena} B "
               f"(Q, K, output)")
    click.echo(f"MACs: {op.macs:,}; host run on the C runtime {host_s:.2f} s")
    line = f"end-point error vs the float64 pipeline: {_epe(field, ref, mode):.4f} px"
    if gt is not None:
        truth = gt if mode == "stereo" else np.stack([-gt, np.zeros_like(gt)], axis=-1)
        line += (f"; vs ground truth ({int(valid.sum())} of {valid.size} pixels known): "
                 f"{_epe(field, truth, mode, valid):.4f} px (float64 pipeline {_epe(ref, truth, mode, valid):.4f} px)")
    click.echo(line)
    click.echo(f"wrote {os.path.join(outdir, 'field.npy')} and {os.path.join(outdir, 'field.png')}")
    if do_run:
        _firmware_run(mode, q, k, qs, ks, h, w, c, max_disparity, temperature, profile, run_rows, out, outdir)


def _firmware_run(mode, q, k, qs, ks, h, w, c, max_disparity, temperature, profile, run_rows, host_out, outdir):
    from firmware_sim.profiles import load_profile
    from pyembed.model.match_graph import matching_graph
    from pyembed.target import qemu
    from pyembed.target.firmware import build_project, generate, run_project
    prof = load_profile(profile)
    if prof.name not in qemu.BOARDS:
        raise ArgumentError(f"--run: no QEMU machine emulates profile {prof.name} (QEMU boards: "
                            f"{', '.join(sorted(qemu.BOARDS))})")
    if mode == "stereo":
        rows = _run_rows(run_rows, h, w, c)
        r0 = (h - rows) // 2
        sl = slice(r0 * w, (r0 + rows) * w)
        xs = [q[sl], k[sl]]
        g = matching_graph(mode, rows, w, c, qs, ks, max_disparity=max_disparity, temperature=temperature)
        want = host_out.reshape(h * w, -1)[sl]
        what = f"rows {r0}..{r0 + rows - 1} ({w}x{rows})"
    else:
        if run_rows is not None:
            raise ArgumentError("--run-rows: only with --mode stereo (flow matches against the whole image)")
        xs, g, want, what = [q, k], matching_graph(mode, h, w, c, qs, ks, temperature=temperature), \
            host_out.reshape(h * w, -1), f"the whole {w}x{h} image"
    host = np.asarray(g.run(xs)[0]).reshape(want.shape)
    if not np.array_equal(host, want):
        raise PyEmbedError("the stripe's host run differs from the whole image's (rows are not independent)")
    proj = generate(g, prof, os.path.join(outdir, "firmware"))
    build_project(proj.outdir)
    run = run_project(proj, xs)
    fw = np.asarray(run.outputs[0]).reshape(want.shape)
    same = np.array_equal(fw, host)
    op = g.operators[0]
    click.echo(f"firmware on {prof.name} ({prof.core}) under QEMU, {what}: {run.total_instructions:,} instructions "
               f"for {op.macs:,} MACs ({run.total_instructions / max(op.macs, 1):.1f} per MAC), "
               f"Q + K {2 * xs[0].nbytes:,} B; outputs == host: {'yes' if same else 'NO'}")
    if not same:
        bad = np.flatnonzero(fw.ravel() != host.ravel())
        raise PyEmbedError(f"the board's output differs from the host in {bad.size} elements (first at {bad[:5]})")
