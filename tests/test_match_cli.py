"""`pyembed match` (issue 32): stereo / flow matching as one PE_ATTENTION
operator on the C runtime. The CLI's field is the graph operator's int8 output,
which equals (==) pyembed.kernels.attention's fixed-point streaming kernel on
the same key ranges and stored coordinates; the printed errors and scratch are
recomputed here; one QEMU run checks the board == the host."""
import os
import re
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from pyembed._png import read_png, write_png
from pyembed.cli import main
from pyembed.kernels.attention import attention_fixed
from pyembed.kernels.fixed import requantize
from pyembed.model.match_graph import field_from_output, matching_graph
from pyembed.kernels.matching import (_coordinates, _stereo_ranges, match_disparity, match_flow, motorcycle_pair,
                                      patch_features, quantize_symmetric)
from pyembed.model.ops.transformer import key_ranges


def _cli(*args):
    r = CliRunner().invoke(main, ["match", *map(str, args)])
    return r.exit_code, r.output


def _reference(g, q, k, coords, v_scale, ranges):
    """The operator's arithmetic from the Python fixed-point kernel: stored
    coordinates as V, the same key ranges, requantized with the op's words."""
    op = g.operators[0]
    p, o = op.params, op.options
    (qs, _), (ks, _) = (g.tensors[t].qparams() for t in op.inputs[:2])
    acc = attention_fixed(q, k, coords, q_scale=qs, k_scale=ks, v_scale=v_scale, q_zero=0, k_zero=0, v_zero=-128,
                          heads=1, fold=o["fold"], block=o["block"], key_range=ranges, softmax_scale=o["beta"])
    y = requantize(acc, p["out_multiplier"], p["out_shift"]).astype(np.int64) + p["out_zero_point"]
    return np.clip(y, -128, 127).astype(np.int8)


def test_stereo_operator_equals_the_fixed_point_kernel():
    left, right, _ = motorcycle_pair()
    f1, f2 = patch_features(left, 2, 6), patch_features(right, 2, 6)
    h, w, c = f1.shape
    q, qs = quantize_symmetric(f1.reshape(h * w, c))
    k, ks = quantize_symmetric(f2.reshape(h * w, c))
    dmax = 9
    g = matching_graph("stereo", h, w, c, qs, ks, max_disparity=dmax, temperature=20.0)
    op = g.operators[0]
    assert op.inputs[2] == -1 and op.inputs[3] == -1 and op.params["v_kind"] == 1
    lo, hi = key_ranges(h * w, h * w, op.options["range"])
    ranges = _stereo_ranges(h, w, dmax)
    assert np.array_equal(lo, ranges[0]) and np.array_equal(hi, ranges[1])
    coords, vs = _coordinates(np.tile(np.arange(w, dtype=np.float64), h)[:, None], w)
    got = np.asarray(g.run([q, k])[0]).reshape(h * w, 1)
    assert np.array_equal(got, _reference(g, q, k, coords, vs, ranges))
    # and the field is the int8 matcher's to the output's rounding (scale 1: half a pixel)
    d = field_from_output("stereo", got, h, w, g)
    d_py = match_disparity(f1, f2, max_disparity=dmax, temperature=20.0)
    assert np.abs(d - d_py).max() <= 0.5 + 1e-9
    assert op.macs == int((hi - lo).sum()) * (c + 1)


def test_flow_operator_equals_the_fixed_point_kernel_above_256_pixels():
    # one row of 300 columns: the coordinates' scale is 299/255 (rounded in the kernel)
    rng = np.random.default_rng(1)
    f1 = rng.normal(size=(1, 300, 4))
    f2 = np.roll(f1, 3, axis=1)
    q, qs = quantize_symmetric(f1.reshape(300, 4))
    k, ks = quantize_symmetric(f2.reshape(300, 4))
    g = matching_graph("flow", 1, 300, 4, qs, ks, temperature=8.0)
    assert g.operators[0].params["v_extent"] == 300
    y, x = np.divmod(np.arange(300, dtype=np.float64), 300)
    coords, vs = _coordinates(np.stack([x, y], axis=1), 300)
    got = np.asarray(g.run([q, k])[0]).reshape(300, 2)
    assert np.array_equal(got, _reference(g, q, k, coords, vs, None))


def test_match_stereo_motorcycle_cli(tmp_path):
    out = tmp_path / "m"
    code, text = _cli("motorcycle", "motorcycle", "--factor", 6, "-o", out)
    assert code == 0, text
    field = np.load(out / "field.npy")
    assert field.shape == (41, 61)
    png = read_png(str(out / "field.png"))
    assert png.shape == (41, 61) and png.dtype == np.uint8
    # the printed figures, recomputed
    left, right, disp = motorcycle_pair()
    f1, f2 = patch_features(left, 2, 6), patch_features(right, 2, 6)
    dmax = int(re.search(r"max disparity (\d+)", text).group(1))
    ref = match_disparity(f1, f2, max_disparity=dmax, temperature=20.0, precision="float64")
    epe = float(re.search(r"float64 pipeline: ([\d.]+) px", text).group(1))
    assert abs(epe - np.abs(field - ref).mean()) < 5e-5
    blocks = disp[:41 * 6, :61 * 6].reshape(41, 6, 61, 6)
    valid = np.isfinite(blocks).all(axis=(1, 3))
    gt = np.where(valid, np.nan_to_num(blocks, posinf=0).mean(axis=(1, 3)) / 6, 0)
    assert dmax == int(np.ceil(gt[valid].max())) + 2
    truth = float(re.search(r"vs ground truth .*?: ([\d.]+) px", text).group(1))
    assert abs(truth - np.abs(field - gt)[valid].mean()) < 5e-5
    # matching works: well below the best constant disparity, and the int8
    # operator (output step: 1 px) within 0.1 px of the float64 pipeline
    ref_truth = float(re.search(r"float64 pipeline ([\d.]+) px\)", text).group(1))
    assert abs(ref_truth - np.abs(ref - gt)[valid].mean()) < 5e-5
    assert truth < 0.6 * np.abs(gt[valid] - np.median(gt[valid])).mean()
    assert truth - ref_truth < 0.1
    planned, queried = map(int, re.search(r"scratch: (\d+) B .*C size query (\d+) B", text).groups())
    assert planned == queried
    # streaming state + one block of scores + the generated row range (dmax + 1 columns)
    assert planned <= 1024
    assert "no V tensor, no mask tensor" in text


def test_match_flow_on_png_files_recovers_a_shift(tmp_path):
    left, _, _ = motorcycle_pair()
    img = left[40:40 + 96, 60:60 + 128]
    dx, dy = 8, -4                     # image 2 = image 1 moved by (dx, dy) pixels
    moved = np.roll(np.roll(img, dy, axis=0), dx, axis=1)
    write_png(str(tmp_path / "a.png"), img)
    np.save(tmp_path / "b.npy", moved)
    code, text = _cli(tmp_path / "a.png", tmp_path / "b.npy", "--mode", "flow", "--factor", 4,
                      "-o", tmp_path / "f")
    assert code == 0, text
    flow = np.load(tmp_path / "f" / "field.npy")
    assert flow.shape == (24, 32, 2)
    inner = flow[3:-3, 4:-4]           # away from the wrapped border
    assert abs(np.median(inner[..., 0]) - dx / 4) < 0.5 and abs(np.median(inner[..., 1]) - dy / 4) < 0.5
    f1, f2 = patch_features(img, 2, 4), patch_features(moved, 2, 4)
    ref = match_flow(f1, f2, temperature=20.0, precision="float64")
    epe = float(re.search(r"float64 pipeline: ([\d.]+) px", text).group(1))
    assert abs(epe - np.sqrt(((flow - ref) ** 2).sum(-1)).mean()) < 5e-5


def test_bad_arguments_are_named(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros((8, 8)))
    np.save(tmp_path / "b.npy", np.zeros((8, 9)))
    for args, words in [(("motorcycle", tmp_path / "a.npy"), "LEFT, RIGHT"),
                        ((tmp_path / "a.npy", tmp_path / "b.npy"), "sizes differ"),
                        ((tmp_path / "a.txt", tmp_path / "b.npy"), "LEFT: expected a .png or .npy"),
                        (("motorcycle", "motorcycle", "--mode", "flow", "--max-disparity", 4), "--max-disparity"),
                        (("motorcycle", "motorcycle", "--mode", "flow", "--factor", 1), "65536 pixels"),
                        (("motorcycle", "motorcycle", "--factor", 0), "--factor"),
                        (("motorcycle", "motorcycle", "--temperature", -1), "--temperature"),
                        (("motorcycle", "motorcycle", "--run-rows", 0), "--run-rows")]:
        code, text = _cli(*args, "-o", tmp_path / "o")
        assert code != 0 and words in text, (args, text)


def test_png_reader_reads_filtered_files(tmp_path):
    # a file written by Pillow uses the adaptive row filters (Sub, Up, Average, Paeth)
    Image = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(0)
    a = np.cumsum(rng.integers(0, 6, (20, 30, 3)), axis=1).astype(np.uint8)
    Image.fromarray(a).save(tmp_path / "x.png", optimize=True)
    assert np.array_equal(read_png(str(tmp_path / "x.png")), a)
    write_png(str(tmp_path / "y.png"), a[..., 0])
    assert np.array_equal(np.asarray(Image.open(tmp_path / "y.png")), a[..., 0])


@pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None or shutil.which("qemu-system-arm") is None,
                    reason="needs arm-none-eabi-gcc and qemu-system-arm")
def test_match_run_on_the_m4_board_equals_the_host(tmp_path):
    code, text = _cli("motorcycle", "motorcycle", "--factor", 6, "--run", "--run-rows", 2, "-o", tmp_path / "r")
    assert code == 0, text
    m = re.search(r"under QEMU, rows (\d+)\.\.(\d+) \(61x2\): ([\d,]+) instructions for ([\d,]+) MACs.*"
                  r"outputs == host: yes", text)
    assert m, text
    instructions, macs = (int(x.replace(",", "")) for x in m.groups()[2:])
    assert instructions >= macs > 0
    assert os.path.isdir(tmp_path / "r" / "firmware")
