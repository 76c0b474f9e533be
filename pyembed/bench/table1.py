"""Table I of the reverse-pooling seed, reproduced by measurement.

    python -m pyembed.bench table1 [--json] [--seed N]

A 3x3 convolution (8 -> 8 channels, padding 1) on a 25x25 input, followed by
a 5x5 max pooling with stride 5 or 2 and ceil(25 / s) outputs per axis (the
ceil rule with TFLite-SAME padding: 0 at stride 5, 2 on each side at stride
2), run four ways by the C kernels in csrc/src/pipeline/pe_fused.c: no fusion, naive
fused, striped fused and reverse fused. Every figure printed comes from the
counters the kernels increment while they run (pe_fused.h):

  MACC (seed)   conv MACs counted over every tap (padded taps included) of
                every convolution output evaluated, plus pooling window
                positions visited for one channel, padding included: the
                seed's convention.
  memory        elements of intermediate buffers held at once: convolution
                output, stripe, pooled output (its own max-accumulator).
  actual        conv MACs executed and max operations executed (all
                channels), padded positions skipped; conv outputs computed.

The seed's published figures are printed beside the measured ones for
comparison (they are the target, not an input). A fifth row shows the
streaming fused kernel (pe_conv_pool_rev_s8: reverse convolution scattered
into reverse pooling), whose live memory is two rings of rows instead of the
pooled output.
"""
import argparse

import numpy as np

from pyembed.bench.common import emit, table

IN_HW = 25
CHANNELS = 8
KERNEL = 3
CONV_PAD = 1
WINDOW = 5
STRIDES = (5, 2)
LABELS = {"none": "no fusion", "naive": "naive fused", "striped": "striped fused",
          "reverse": "reverse fused", "fused": "fused stream"}
# Published in the seed (004, Table I): {stride: {strategy: (MACC, memory)}}.
SEED_TABLE = {
    5: {"none": (360625, 5200), "naive": (360625, 200), "striped": (360625, 1200),
        "reverse": (360625, 200)},
    2: {"none": (364225, 6352), "naive": (2437825, 1352), "striped": (364225, 2352),
        "reverse": (364225, 1352)},
}


def same_padding(d, window, stride):
    """(before, after) giving ceil(d / stride) outputs (TFLite SAME)."""
    total = max((-(-d // stride) - 1) * stride + window - d, 0)
    return total // 2, total - total // 2


def make_case(seed=0, hw=IN_HW, channels=CHANNELS):
    """Deterministic int8 input, weights and per-channel quantization."""
    from pyembed.kernels.quant import quantize_multiplier_array
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, size=(1, hw, hw, channels), dtype=np.int8)
    w = rng.integers(-127, 128, size=(channels, KERNEL, KERNEL, channels), dtype=np.int8)
    bias = rng.integers(-2000, 2000, size=channels).astype(np.int32)
    mult, shift = quantize_multiplier_array(rng.uniform(0.0005, 0.002, size=channels))
    return dict(x=x, weights=w, bias=bias, multiplier=mult, shift=shift)


def run(case, stride, strategy):
    """(pooled output, counters) of one strategy on the Table I layer."""
    from pyembed.kernels.conv import conv_pool2d
    pt, pb = same_padding(IN_HW, WINDOW, stride)
    return conv_pool2d(case["x"], case["weights"], case["bias"], case["multiplier"],
                       case["shift"], padding=CONV_PAD, input_offset=128, output_offset=-5,
                       window=WINDOW, pool_stride=stride, pool_padding=(pt, pb, pt, pb),
                       pool_rule="ceil", strategy=strategy, return_stats=True)


def measure(seed=0):
    case = make_case(seed)
    result = {"layer": f"conv {KERNEL}x{KERNEL} {CHANNELS}->{CHANNELS} pad {CONV_PAD} on "
                       f"{IN_HW}x{IN_HW}, max pool {WINDOW}x{WINDOW} ceil rule", "strides": []}
    for stride in STRIDES:
        rows = {}
        outputs = {}
        for strategy in ("none", "naive", "striped", "reverse", "fused"):
            out, c = run(case, stride, strategy)
            outputs[strategy] = out
            if strategy == "fused":
                rows[strategy] = {"conv_macs": c["macs"], "pool_ops": c["combines"],
                                  "peak_elems": c["peak_elems"], "peak_bytes": c["peak_bytes"],
                                  "scratch_bytes": c["scratch_bytes"]}
                continue
            rows[strategy] = dict(c, macc_seed=c["conv_macs_nominal"] + c["pool_ops_nominal"],
                                  macc_actual=c["conv_macs"] + c["pool_ops"],
                                  published=dict(zip(("macc", "memory"), SEED_TABLE[stride][strategy])))
        identical = all(np.array_equal(outputs["none"], o) for o in outputs.values())
        r, n, s = rows["reverse"], rows["naive"], rows["striped"]
        result["strides"].append({
            "stride": stride, "pool_padding": same_padding(IN_HW, WINDOW, stride),
            "pool_output": list(outputs["none"].shape[1:3]), "rows": rows,
            "outputs_identical": identical,
            "reverse_vs_naive_macc": 1 - r["macc_seed"] / n["macc_seed"],
            "reverse_vs_striped_memory": 1 - r["peak_elems"] / s["peak_elems"],
            "matches_seed": all(rows[k]["macc_seed"] == v[0] and rows[k]["peak_elems"] == v[1]
                                for k, v in SEED_TABLE[stride].items()),
        })
    return result


def render(res):
    lines = [f"Table I ({res['layer']}); measured by the kernels' counters", ""]
    for st in res["strides"]:
        lines.append(f"stride {st['stride']}: pooling padding {st['pool_padding'][0]}/"
                     f"{st['pool_padding'][1]}, output {st['pool_output'][0]}x{st['pool_output'][1]}")
        hdr = ["strategy", "MACC (seed conv.)", "published", "memory (elems)", "published",
               "conv MACs done", "max ops done", "conv outputs", "peak bytes"]
        body = []
        for k in ("none", "naive", "striped", "reverse"):
            r = st["rows"][k]
            body.append([LABELS[k], r["macc_seed"], r["published"]["macc"], r["peak_elems"],
                         r["published"]["memory"], r["conv_macs"], r["pool_ops"], r["conv_outputs"],
                         r["peak_bytes"]])
        f = st["rows"]["fused"]
        body.append([LABELS["fused"], "-", "-", f["peak_elems"], "-", f["conv_macs"], f["pool_ops"],
                     "-", f["peak_bytes"]])
        lines.append(table(hdr, body))
        lines.append(f"reverse vs naive MACC: -{100 * st['reverse_vs_naive_macc']:.0f}%   "
                     f"reverse vs striped memory: -{100 * st['reverse_vs_striped_memory']:.0f}%   "
                     f"matches the published table: {'yes' if st['matches_seed'] else 'NO'}   "
                     f"outputs bit-identical: {'yes' if st['outputs_identical'] else 'NO'}")
        lines.append("")
    lines.append("fused stream = pe_conv_pool_rev_s8: memory is the conv ring + one conv row + "
                 "the pooling ring (int32 accumulators), not the pooled output.")
    return "\n".join(lines)


def main(argv):
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench table1", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random input and weights")
    args = ap.parse_args(argv)
    res = measure(args.seed)
    emit(res, args.json, render)
    ok = all(s["matches_seed"] and s["outputs_identical"] for s in res["strides"])
    return 0 if ok else 1
