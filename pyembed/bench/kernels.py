"""Instruction counts of the reverse convolution kernels (and the reverse
pooling rows of pyembed/bench/_kernels_pool.py), measured with valgrind's
callgrind on C harnesses built with gcc on the host, or (--target cortex-m4)
Thumb-2 instruction counts under QEMU, portable C beside the DSP-extension path
(pyembed/bench/_kernels_cortex_m.py).

    python -m pyembed.bench kernels [--json] [--opt=-O2]
    python -m pyembed.bench kernels --target cortex-m4 [--json] [--no-models]
    (--target cortex-m0 / m3 / m4 / m7 / m33 / m55: that core's QEMU board; the Cortex-M0's
    micro:bit with its nRF51 SRAM enlarged to 4 MiB for the case runner,
    pyembed.target.kernels.RUNNER_SRAM)

Host builds: every case is measured twice, built
  * "bench":     gcc -std=c99 <--opt> (default -O2), the harness flags;
  * "extension": gcc with Python's own CFLAGS (sysconfig; they carry -fwrapv)
                 followed by pyembed/_build_flags.EXT_CFLAGS (-O3 -fno-wrapv),
                 i.e. what the Python extensions execute (setup.py uses the same
                 flags; the flags recorded in the installed _conv extension are
                 printed when readelf can read them).

Cases (int8, per-channel requantization, padding 1, stride 1):
  conv 3x3, 8 -> 8,   25x25   (the Table I layer)
  conv 3x3, 16 -> 16, 48x48
  depthwise 3x3 on 48x48x16
The harness calls the whole-tensor kernel once; callgrind counts every
instruction inside it (set-up, scatter, requantization). Per-MAC figures are
given two ways: per layer MAC (out_h*out_w*out_c*k*k*in_c/groups, padded
taps included: what a gather kernel with a padded im2col executes, and the
usual basis of published per-MAC figures) and per MAC actually executed
(padded taps skipped; the kernel's own counter).

CMSIS-NN figures: external measurements of CMSIS-NN's portable C built with
gcc -O2 on x86-64 (callgrind), given with the task: NOT measured here. A ratio
against them is printed only for the bench build at -O2, the flags they were
measured with. Scratch: ours is the kernel's size query; CMSIS-NN's is the
given figure for conv 16->16 (576 B) and, for conv 8->8, the same
arm_convolve_s8 buffer formula (2 columns x in_c x kh x kw int16 = 288 B);
blank where no figure was given.
"""
import argparse
import shlex
import subprocess
import sysconfig

from pyembed import _build_flags
from pyembed.bench import callgrind
from pyembed.bench.common import emit, table

# instructions per MAC, CMSIS-NN portable C, gcc -O2, x86-64 (external measurement, not measured here)
CMSIS_REFERENCE = {"conv 3x3 8->8 25x25": 6.9, "conv 3x3 16->16 48x48": 5.6,
                   "depthwise 3x3 48x48x16": 12.8}
CMSIS_REFERENCE_FLAGS = "-O2"
# CMSIS-NN scratch bytes (given for 16->16; arm_convolve_s8's formula for 8->8; None: not given)
CMSIS_SCRATCH = {"conv 3x3 8->8 25x25": 288, "conv 3x3 16->16 48x48": 576,
                 "depthwise 3x3 48x48x16": None}

# name: (depthwise, h, w, in_c, out_c, k)
CASES = {
    "conv 3x3 8->8 25x25": (0, 25, 25, 8, 8, 3),
    "conv 3x3 16->16 48x48": (0, 48, 48, 16, 16, 3),
    "depthwise 3x3 48x48x16": (1, 48, 48, 16, 16, 3),
}

HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
#include "pyembed/pe_conv.h"

static int8_t input[48 * 48 * 16];
static int8_t output[48 * 48 * 16];
static int8_t weights[16 * 3 * 3 * 16];
static int32_t bias[16], mult[16], shift[16];
static int64_t scratch[8192];

int main(int argc, char **argv)
{
    const int depthwise = atoi(argv[1]);
    const int h = atoi(argv[2]), w = atoi(argv[3]), in_c = atoi(argv[4]), out_c = atoi(argv[5]);
    const int k = atoi(argv[6]);
    pe_conv_params p = {0};
    pe_dims in = {1, h, w, in_c}, out = {1, h, w, out_c};
    pe_dims f = {depthwise ? 1 : out_c, k, k, depthwise ? out_c : in_c};
    pe_per_channel_quant q = {mult, shift};
    pe_stats stats = {0, 0, 0, 0, 0, 0, 0};
    pe_context ctx;
    unsigned int seed = 12345u;
    int32_t size = 0;
    int i, st;
    for (i = 0; i < h * w * in_c; i++) {
        seed = seed * 1103515245u + 12345u;
        input[i] = (int8_t)((seed >> 16) & 0xFF);
    }
    for (i = 0; i < f.n * f.h * f.w * f.c; i++) {
        seed = seed * 1103515245u + 12345u;
        weights[i] = (int8_t)((seed >> 16) & 0xFF);
    }
    for (i = 0; i < out_c; i++) {
        bias[i] = 100 * i - 700;
        mult[i] = 1300000000 + 1000 * i;
        shift[i] = -9;
    }
    p.input_offset = 128;
    p.output_offset = -3;
    p.stride.h = p.stride.w = 1;
    p.dilation.h = p.dilation.w = 1;
    p.padding.top = p.padding.bottom = p.padding.left = p.padding.right = k / 2;
    p.groups = 1;
    p.ch_mult = 1;
    p.activation.min = -128;
    p.activation.max = 127;
    st = depthwise ? pe_depthwise_conv2d_rev_s8_get_buffer_size(&p, &in, &f, &out, &size)
                   : pe_conv2d_rev_s8_get_buffer_size(&p, &in, &f, &out, &size);
    if (st != 0 || size > (int32_t)sizeof(scratch)) {
        return 2;
    }
    ctx.buf = scratch;
    ctx.size = size;
    ctx.stats = &stats;
    st = depthwise ? pe_depthwise_conv2d_rev_s8(&ctx, &p, &q, &in, input, &f, weights, bias, &out, output)
                   : pe_conv2d_rev_s8(&ctx, &p, &q, &in, input, &f, weights, bias, &out, output);
    printf("%d %llu %llu %lld %d\n", st, (unsigned long long)stats.macs,
           (unsigned long long)stats.input_reads, (long long)stats.peak_bytes, size);
    return st == 0 ? 0 : 1;
}
"""


def extension_flags():
    """The flags the Python extensions are compiled with: Python's CFLAGS, then
    EXT_CFLAGS (setup.py)."""
    return shlex.split(sysconfig.get_config_var("CFLAGS") or "") + list(_build_flags.EXT_CFLAGS)


def installed_extension_flags():
    """(opt, wrapv) pairs recorded in the installed _conv extension, or None."""
    try:
        import pyembed._ext._conv as ext
    except ImportError:
        return None
    lines = _build_flags.recorded_switches(ext.__file__)
    return _build_flags.effective_flags(lines) if lines else None


def _builds(opt):
    """(label, opt, extra flags) of the two host builds."""
    return [("bench", opt, ()), ("extension", "", tuple(extension_flags()))]


def measure_conv(opt="-O2", build="bench", extra=()):
    exe = callgrind.build_program(HARNESS, f"conv_bench_{build}", opt=opt, extra_flags=extra)
    rows = []
    for name, (dw, h, w, in_c, out_c, k) in CASES.items():
        args = [dw, h, w, in_c, out_c, k]
        run = subprocess.run([exe, *map(str, args)], capture_output=True, text=True)
        if run.returncode != 0:
            raise callgrind.BenchSetupError(f"conv harness failed ({name}): {run.stdout}{run.stderr}")
        status, macs, reads, peak_bytes, scratch = map(int, run.stdout.split())
        fn = "pe_depthwise_conv2d_rev_s8" if dw else "pe_conv2d_rev_s8"
        ir = callgrind.count_instructions(exe, args, functions=[fn])[fn]
        outputs = h * w * out_c
        layer_macs = outputs * k * k * (1 if dw else in_c)
        ref = CMSIS_REFERENCE[name]
        comparable = build == "bench" and opt == CMSIS_REFERENCE_FLAGS
        rows.append({
            "case": name, "function": fn, "build": build,
            "flags": " ".join([opt, *extra]).strip(), "instructions": ir, "outputs": outputs,
            "layer_macs": layer_macs, "macs_executed": macs, "input_reads": reads,
            "per_output": ir / outputs, "per_layer_mac": ir / layer_macs,
            "per_executed_mac": ir / macs,
            "cmsis_nn_per_mac_O2_external": ref,
            "ratio_to_cmsis_nn": (ir / layer_macs) / ref if comparable else None,
            "peak_accumulator_bytes": peak_bytes, "scratch_bytes": scratch,
            "cmsis_nn_scratch_bytes": CMSIS_SCRATCH[name],
            "output_bytes": outputs, "input_bytes": h * w * in_c,
        })
    return rows


def measure(opt="-O2"):
    res = {"conv": [], "pool": [], "pool_error": None,
           "cmsis_nn_reference": f"external measurement: CMSIS-NN portable C, gcc "
                                 f"{CMSIS_REFERENCE_FLAGS}, x86-64 callgrind (not measured here)",
           "extension_flags": " ".join(extension_flags()),
           "installed_extension_flags": installed_extension_flags()}
    for build, o, extra in _builds(opt):
        res["conv"] += measure_conv(o, build, extra)
    try:
        from pyembed.bench import _kernels_pool
        for build, o, extra in _builds(opt):
            res["pool"] += _kernels_pool.measure(o, build, extra)
    except ImportError as e:  # the pooling benchmark is optional
        res["pool_error"] = f"pooling rows unavailable: {e}"
    return res


def render(res):
    conv = res["conv"]
    head = ["case", "build", "instr", "instr/output", "instr/layer MAC", "instr/executed MAC",
            "CMSIS-NN instr/MAC (-O2, external)", "ratio", "scratch B", "CMSIS-NN scratch B",
            "output B"]
    body = [[r["case"], r["build"], r["instructions"], f"{r['per_output']:.1f}",
             f"{r['per_layer_mac']:.2f}", f"{r['per_executed_mac']:.2f}",
             r["cmsis_nn_per_mac_O2_external"],
             "-" if r["ratio_to_cmsis_nn"] is None else f"{r['ratio_to_cmsis_nn']:.2f}",
             r["scratch_bytes"],
             "-" if r["cmsis_nn_scratch_bytes"] is None else r["cmsis_nn_scratch_bytes"],
             r["output_bytes"]] for r in conv]
    flags = {r["build"]: r["flags"] for r in conv}
    text = ["reverse convolution, callgrind instructions (gcc, x86-64)",
            *[f"  {b} build: {f}" for b, f in flags.items()],
            f"  installed extension (recorded switches): {res['installed_extension_flags']}",
            table(head, body),
            f"CMSIS-NN: {res['cmsis_nn_reference']}; ratio = our instr/layer MAC / that figure, "
            "printed only for the bench build at -O2 (< 1: fewer instructions). scratch = the "
            "kernel's size query (int32 accumulator ring + per-row lists); CMSIS-NN scratch: "
            "given (16->16) or arm_convolve_s8's formula (8->8), '-' = not given.", ""]
    if res["pool"]:
        from pyembed.bench import _kernels_pool
        text.append(_kernels_pool.render(res["pool"]))
    elif res["pool_error"]:
        text.append(res["pool_error"])
    return "\n".join(text)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench kernels", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--opt", default="-O2", help="bench build optimisation flag (write --opt=-O3)")
    ap.add_argument("--target", default="host",
                    choices=["host", "cortex-m0", "cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55"],
                    help="host (callgrind) or a Cortex-M core under QEMU (portable vs DSP path; the portable "
                         "path only on the M0 and M3; the bundled models end to end on the DSP cores)")
    ap.add_argument("--no-models", action="store_true",
                    help="cortex-m4: skip the bundled models (kernels only)")
    ap.add_argument("--models", default=None, metavar="NAME,...",
                    help="cortex-m4: only these bundled models (file names without .tflite)")
    args = ap.parse_args(argv)
    if args.target != "host":
        from pyembed.bench import _kernels_cortex_m
        names = [n.strip() for n in args.models.split(",") if n.strip()] if args.models else None
        emit(_kernels_cortex_m.measure(models=not args.no_models, model_names=names, target=args.target), args.json,
             _kernels_cortex_m.render)
        return 0
    emit(measure(args.opt), args.json, render)
    return 0
