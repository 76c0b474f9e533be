"""Instruction counts of the two convolution forms the graph runtime picks
between (pyembed.model.conv_form): the reverse kernels (pe_conv.h, int32
accumulator rows as scratch) and the scratch-free gather kernels
(pe_conv_gather.h), on layer geometries of the bundled models, measured
with valgrind's callgrind on a C harness built with gcc on the host.

    python -m pyembed.bench convforms [--json] [--opt -O2]

Each case calls one whole-tensor kernel once; the count is inclusive of
everything inside it (checks, accumulation, requantization). "per MAC" is
per multiply-accumulate the kernel executed (its own counter; padded taps
skipped). The ratio gather / reverse is what the memory saving costs; the
automatic choice keeps the reverse form wherever its scratch fits under the
activation liveness bound.
"""
import argparse
import subprocess

from pyembed.bench import callgrind
from pyembed.bench.common import emit, table

# name: (depthwise, in_h, in_w, in_c, out_c, kh, kw, stride, pad_top, pad_left, out_h, out_w)
CASES = {
    "KWS conv 10x4 s2, 49x10x1 -> 64": (0, 49, 10, 1, 64, 10, 4, 2, 4, 1, 25, 5),
    "KWS depthwise 3x3, 25x5x64": (1, 25, 5, 64, 64, 3, 3, 1, 1, 1, 25, 5),
    "KWS pointwise 1x1, 25x5x64 -> 64": (0, 25, 5, 64, 64, 1, 1, 1, 0, 0, 25, 5),
    "SWW 1-D depthwise k3, 30x1x40": (1, 30, 1, 40, 40, 3, 1, 1, 0, 0, 28, 1),
    "SWW 1-D pointwise, 28x1x40 -> 64": (0, 28, 1, 40, 64, 1, 1, 1, 0, 0, 28, 1),
    "MobileNet depthwise 3x3, 48x48x16": (1, 48, 48, 16, 16, 3, 3, 1, 1, 1, 48, 48),
    "MobileNet pointwise, 48x48x16 -> 32": (0, 48, 48, 16, 32, 1, 1, 1, 0, 0, 48, 48),
}

HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
#include "pyembed/pe_conv.h"
#include "pyembed/pe_conv_gather.h"

static int8_t input[48 * 48 * 64], output[48 * 48 * 64], weights[64 * 10 * 4 * 64];
static int32_t bias[64], mult[64], shift[64];
static int64_t scratch[16384];

int main(int argc, char **argv)
{
    int a[13], i;
    pe_conv_params p = {0};
    pe_dims in, f, out;
    pe_per_channel_quant q = {mult, shift};
    pe_stats stats = {0, 0, 0, 0, 0, 0, 0};
    pe_context ctx;
    pe_status s;
    for (i = 0; i < 13; i++) a[i] = atoi(argv[i + 1]);
    in.n = 1; in.h = a[1]; in.w = a[2]; in.c = a[3];
    out.n = 1; out.h = a[11]; out.w = a[12]; out.c = a[4];
    f.n = a[0] ? 1 : a[4]; f.h = a[5]; f.w = a[6]; f.c = a[0] ? a[4] : a[3];
    p.stride.h = p.stride.w = a[7];
    p.padding.top = a[8]; p.padding.left = a[9];
    p.dilation.h = p.dilation.w = 1; p.groups = 1; p.ch_mult = a[0] ? a[4] / a[3] : 1;
    p.input_offset = 3; p.output_offset = -2; p.activation.min = -128; p.activation.max = 127;
    for (i = 0; i < (int)sizeof(input); i++) input[i] = (int8_t)(i * 7 + 1);
    for (i = 0; i < (int)sizeof(weights); i++) weights[i] = (int8_t)(i * 13 + 5);
    for (i = 0; i < 64; i++) { bias[i] = i * 17 - 300; mult[i] = 1518500250 + i; shift[i] = -9; }
    ctx.buf = scratch; ctx.size = (int32_t)sizeof(scratch); ctx.stats = &stats;
    if (a[10]) {
        s = a[0] ? pe_depthwise_conv2d_gather_s8(&ctx, &p, &q, &in, input, &f, weights, bias, &out, output)
                 : pe_conv2d_gather_s8(&ctx, &p, &q, &in, input, &f, weights, bias, &out, output);
    } else {
        s = a[0] ? pe_depthwise_conv2d_rev_s8(&ctx, &p, &q, &in, input, &f, weights, bias, &out, output)
                 : pe_conv2d_rev_s8(&ctx, &p, &q, &in, input, &f, weights, bias, &out, output);
    }
    if (s != PE_OK) { fprintf(stderr, "status %d\n", (int)s); return 1; }
    printf("%llu\n", (unsigned long long)stats.macs);
    return 0;
}
"""

FUNCS = {(0, 0): "pe_conv2d_rev_s8", (1, 0): "pe_depthwise_conv2d_rev_s8",
         (0, 1): "pe_conv2d_gather_s8", (1, 1): "pe_depthwise_conv2d_gather_s8"}


def main(argv):
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench convforms", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--opt", default="-O2")
    a = ap.parse_args(argv)
    exe = callgrind.build_program(HARNESS, "convforms", opt=a.opt)
    rows = []
    for name, c in CASES.items():
        dw, h, w, ic, oc, kh, kw, s, pt, pl, oh, ow = c
        row = {"case": name}
        for gather in (0, 1):
            args = [dw, h, w, ic, oc, kh, kw, s, pt, pl, gather, oh, ow]
            macs = int(subprocess.run([exe, *map(str, args)], capture_output=True, text=True, check=True).stdout)
            fn = FUNCS[(dw, gather)]
            ir = callgrind.count_instructions(exe, args, functions=[fn])[fn]
            key = "gather" if gather else "reverse"
            row[key] = {"instructions": ir, "macs": macs, "per_mac": round(ir / macs, 2)}
        row["ratio"] = round(row["gather"]["instructions"] / row["reverse"]["instructions"], 2)
        rows.append(row)
    res = {"opt": a.opt, "cases": rows}

    def render(r):
        return ("Instructions per call (callgrind, gcc " + r["opt"] + ", host):\n" + table(
            ["case", "MACs", "reverse", "per MAC", "gather", "per MAC", "gather / reverse"],
            [[x["case"], x["reverse"]["macs"], x["reverse"]["instructions"], x["reverse"]["per_mac"],
              x["gather"]["instructions"], x["gather"]["per_mac"], x["ratio"]] for x in r["cases"]]))
    emit(res, a.json, render)
    return 0
