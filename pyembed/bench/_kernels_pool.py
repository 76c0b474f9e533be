"""Instruction counts of the reverse pooling kernels (callgrind), for the
kernel benchmark (pyembed/bench/kernels.py imports measure()).

Case: 25x25x8 int8 input, 5x5 window, stride 5 and stride 2, padded so the
output is ceil(25 / s) per axis (5x5, or 13x13 with 2 pixels of padding on
each side), average and max pooling. A small C harness calls
pe_pool_rev_s8 once; callgrind counts the instructions inside it (stream
set-up, combines, finalisation, everything). A plain gather-per-output loop
in the same harness, built with the same compiler and flags, is measured
beside it as a local baseline.

Per-tap figures divide by taps = in-bounds window positions x channels summed
over the outputs, i.e. the combines the kernel reports (measured); the
"padded" figure divides by outputs x window area (the seed's convention,
padded positions included).

    python -m pyembed.bench._kernels_pool [--json] [--opt -O2]
"""
import argparse
import subprocess

from pyembed.bench import callgrind
from pyembed.bench.common import emit, table

# instructions per tap, CMSIS-NN portable C, gcc -O2, x86-64: external measurements given with
# the task (not measured here); stride-2 average pooling measures 19.87, not the 18.3 of stride 5
CMSIS_REFERENCE = {("avg", 5): 18.3, ("avg", 2): 19.87, ("max", 5): 12.4, ("max", 2): 12.4}
CMSIS_REFERENCE_FLAGS = "-O2"

HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
#include "pyembed/pe_pool.h"

#define H 25
#define W 25
#define C 8
#define K 5

static int8_t input[H * W * C];
static int8_t output[13 * 13 * C];
static int64_t scratch[2048];

/* the conventional loop: gather each output's in-bounds window */
__attribute__((noinline)) void naive_gather_s8(int kind, int s, int pad, int ho, int wo)
{
    int oy, ox, c, ky, kx;
    for (oy = 0; oy < ho; oy++) {
        for (ox = 0; ox < wo; ox++) {
            const int y0 = oy * s - pad, x0 = ox * s - pad;
            const int ya = y0 < 0 ? 0 : y0, yb = y0 + K > H ? H : y0 + K;
            const int xa = x0 < 0 ? 0 : x0, xb = x0 + K > W ? W : x0 + K;
            const int cnt = (yb - ya) * (xb - xa);
            for (c = 0; c < C; c++) {
                int acc = kind == 0 ? -128 : 0;
                for (ky = ya; ky < yb; ky++) {
                    for (kx = xa; kx < xb; kx++) {
                        const int v = input[(ky * W + kx) * C + c];
                        if (kind == 0) {
                            acc = v > acc ? v : acc;
                        } else {
                            acc += v;
                        }
                    }
                }
                if (kind != 0) {
                    acc = acc > 0 ? (acc + cnt / 2) / cnt : (acc - cnt / 2) / cnt;
                }
                output[(oy * wo + ox) * C + c] = (int8_t)acc;
            }
        }
    }
}

int main(int argc, char **argv)
{
    const int kind = argc > 1 ? atoi(argv[1]) : 1;    /* 0 max, 1 avg */
    const int s = argc > 2 ? atoi(argv[2]) : 2;
    const int naive = argc > 3 ? atoi(argv[3]) : 0;
    const int pad = s == 2 ? 2 : 0;                    /* output ceil(25 / s) */
    unsigned int seed = 12345u;
    pe_pool_params p = {0};
    pe_dims in = {1, H, W, C}, out = {0, 0, 0, 0};
    pe_stats stats = {0, 0, 0, 0, 0, 0, 0};
    pe_context ctx;
    int32_t size = 0;
    int i, st;
    for (i = 0; i < H * W * C; i++) {
        seed = seed * 1103515245u + 12345u;
        input[i] = (int8_t)(int)((seed >> 16) & 0xFF) - 0;
    }
    p.kind = kind == 0 ? PE_POOL_MAX : PE_POOL_AVG;
    p.window.h = p.window.w = K;
    p.stride.h = p.stride.w = s;
    p.padding.top = p.padding.bottom = p.padding.left = p.padding.right = pad;
    p.activation.min = -128;
    p.activation.max = 127;
    st = pe_pool_output_dims(&p, PE_SHAPE_FLOOR, &in, &out);
    st |= pe_pool_rev_get_buffer_size(&p, &in, &out, &size);
    if (st != 0 || size > (int32_t)sizeof(scratch)) {
        return 2;
    }
    ctx.buf = scratch;
    ctx.size = size;
    ctx.stats = &stats;
    if (naive) {
        naive_gather_s8(kind, s, pad, out.h, out.w);
    } else {
        st = pe_pool_rev_s8(&ctx, &p, &in, input, &out, output);
    }
    printf("%d %d %d %llu %llu %lld %d\n", st, out.h, out.w, (unsigned long long)stats.combines,
           (unsigned long long)stats.input_reads, (long long)stats.peak_elems, (int)output[0]);
    return st == 0 ? 0 : 1;
}
"""

KINDS = {"max": 0, "avg": 1}


def measure(opt="-O2", build="bench", extra=()):
    """Callgrind instruction counts of pe_pool_rev_s8 (and the naive gather
    baseline) on 25x25x8, window 5, strides 5 and 2. Returns one dict per
    (kernel, kind, stride). build/extra: a label and flags after opt (see
    pyembed.bench.kernels: the "extension" build)."""
    exe = callgrind.build_program(HARNESS, f"pool_bench_{build}", opt=opt, extra_flags=extra)
    comparable = build == "bench" and opt == CMSIS_REFERENCE_FLAGS
    rows = []
    for kind, kind_id in KINDS.items():
        for stride in (5, 2):
            run = subprocess.run([exe, str(kind_id), str(stride), "0"], capture_output=True, text=True)
            if run.returncode != 0:
                raise callgrind.BenchSetupError(f"pool harness failed: {run.stdout}{run.stderr}")
            status, ho, wo, combines, reads, peak_elems, _ = map(int, run.stdout.split())
            outputs = ho * wo * 8
            padded_taps = outputs * 25
            for kernel, naive, fn in (("reverse", "0", "pe_pool_rev_s8"),
                                      ("naive gather", "1", "naive_gather_s8")):
                ir = callgrind.count_instructions(exe, [kind_id, stride, naive], functions=[fn])[fn]
                rows.append({
                    "kernel": kernel, "function": fn, "kind": kind, "stride": stride,
                    "input": [25, 25, 8], "window": 5, "output": [ho, wo, 8], "build": build,
                    "flags": " ".join([opt, *extra]).strip(),
                    "instructions": ir, "outputs": outputs, "taps": combines,
                    "padded_taps": padded_taps,
                    "per_output": ir / outputs, "per_tap": ir / combines,
                    "per_padded_tap": ir / padded_taps,
                    "input_reads": reads, "peak_acc_elems": peak_elems,
                    "cmsis_nn_per_tap_O2_external": CMSIS_REFERENCE[(kind, stride)],
                    "ratio_to_cmsis_nn": (ir / combines) / CMSIS_REFERENCE[(kind, stride)]
                    if comparable and kernel == "reverse" else None,
                })
    return rows


def render(rows):
    head = ["kernel", "build", "kind", "stride", "output", "instr", "instr/output", "instr/tap",
            "instr/padded tap", "taps", "CMSIS-NN instr/tap (-O2, external)", "ratio"]
    body = [[r["kernel"], r["build"], r["kind"], r["stride"], "x".join(map(str, r["output"])),
             r["instructions"], f"{r['per_output']:.1f}", f"{r['per_tap']:.2f}",
             f"{r['per_padded_tap']:.2f}", r["taps"], r["cmsis_nn_per_tap_O2_external"],
             "-" if r["ratio_to_cmsis_nn"] is None else f"{r['ratio_to_cmsis_nn']:.2f}"]
            for r in rows]
    flags = {r["build"]: r["flags"] for r in rows}
    return ("reverse pooling, 25x25x8 int8, window 5, callgrind instructions (gcc, x86-64)\n" +
            "".join(f"  {b} build: {f}\n" for b, f in flags.items()) + table(head, body) +
            "\nCMSIS-NN: external measurements at gcc -O2 (not measured here); ratio only for "
            "the bench build at -O2.")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench._kernels_pool")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--opt", default="-O2")
    args = ap.parse_args(argv)
    emit(measure(args.opt), args.json, render)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
