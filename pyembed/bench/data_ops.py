"""Instructions per output element of the data movement kernels, counted
with valgrind's callgrind (host x86-64, gcc -O2), beside the simulator's
cost model (firmware_sim cost classes, Cortex-M4 cycles per element).

    python -m pyembed.bench data_ops [--json]

Each kernel runs once on an int8 1x32x32x16 tensor (16 384 elements; the
resizes double height and width). The instruction count is inclusive of
everything the kernel calls, divided by the output elements. A host
instruction is not an M4 cycle; the column says whether the simulator's
per-element charge is in the same range; the last row, an element-wise
requantization the simulator charges as "eltwise", is the yardstick.
"""
import argparse

from pyembed.bench.common import emit, table

KERNELS = {
    # name: (C call, output elements, firmware_sim cost class, graph op)
    "pe_pad_x": ("pe_pad_x(&pad, 1, &s4, in, &pad_s, out)", 1 * 34 * 34 * 16, "copy", "PAD"),
    "pe_mirror_pad_x": ("pe_mirror_pad_x(&mp, 1, &s4, in, &pad_s, out)", 1 * 34 * 34 * 16, "copy", "MIRROR_PAD"),
    "pe_slice_x": ("pe_slice_x(&sl, 1, &s4, in, &half_s, out)", 16 * 16 * 16, "copy", "STRIDED_SLICE"),
    "pe_transpose_x": ("pe_transpose_x(perm, 1, &s4, in, &t_s, out)", 32 * 32 * 16, "copy", "TRANSPOSE"),
    "pe_concat_x": ("pe_concat_x(3, 1, 2, shapes, ins, &cat_s, out)", 32 * 32 * 32, "copy", "CONCATENATION"),
    "pe_gather_x": ("pe_gather_x(3, 1, &s4, in, 8, idx, 32 * 32 * 8, out)", 32 * 32 * 8, "copy", "GATHER"),
    "pe_depth_to_space_x": ("pe_depth_to_space_x(2, 1, &d4, in, &d2s, out)", 32 * 32 * 16, "copy",
                            "DEPTH_TO_SPACE"),
    "pe_resize_nearest_x": ("pe_resize_nearest_x(1, ys, xs, &d4, in, &up, out)", 64 * 64 * 16, "copy",
                            "RESIZE_NEAREST_NEIGHBOR"),
    "pe_resize_bilinear_s8": ("pe_resize_bilinear_s8(&rp, &d4, in, &up, out)", 64 * 64 * 16, "eltwise",
                              "RESIZE_BILINEAR"),
    # yardstick: an element-wise kernel the simulator charges as "eltwise"
    "pe_requantize_s8": ("pe_requantize_s8(NULL, &rq, 32 * 32 * 16, in, out)", 32 * 32 * 16, "eltwise",
                         "QUANTIZE (int8)"),
}

SOURCE = r"""
#include <string.h>
#include <stdlib.h>
#include "pyembed/pe_shape_ops.h"
#include "pyembed/pe_resize.h"
static int8_t in[2 * 32 * 32 * 16], out[64 * 64 * 16 * 2];
int main(int argc, char **argv)
{
    pe_shape_nd s4 = {4, {1, 32, 32, 16}}, pad_s = {4, {1, 34, 34, 16}}, half_s = {4, {1, 16, 16, 16}};
    pe_shape_nd t_s = {4, {1, 16, 32, 32}}, cat_s = {4, {1, 32, 32, 32}};
    const pe_shape_nd *shapes[2] = {&s4, &s4};
    const void *ins[2] = {in, in + 32 * 32 * 16};
    pe_pad_params pad = {{0, 1, 1, 0}, {0, 1, 1, 0}, -3};
    pe_mirror_pad_params mp = {{0, 1, 1, 0}, {0, 1, 1, 0}, PE_MIRROR_REFLECT};
    pe_slice_params sl = {{0, 0, 0, 0}, {1, 2, 2, 1}};
    int32_t perm[4] = {0, 3, 1, 2}, idx[8] = {15, 0, 3, 3, 7, 1, 9, 2}, ys[64], xs[64], i;
    pe_dims d4 = {1, 32, 32, 16}, d2s = {1, 64, 64, 4}, up = {1, 64, 64, 16};
    pe_resize_params rp = {0, 1};
    pe_requant_params rq = {3, -5, {1518500250, -1}, {-128, 127}, PE_ROUND_DOUBLE};
    pe_status st = PE_OK;
    for (i = 0; i < (int32_t)sizeof(in); i++) in[i] = (int8_t)(i * 7);
    for (i = 0; i < 64; i++) { ys[i] = i / 2; xs[i] = i / 2; }
    (void)shapes; (void)ins; (void)pad; (void)mp; (void)sl; (void)perm; (void)idx; (void)d2s; (void)rp; (void)rq;
    if (argc < 2) return 2;
    CASES
    return st == PE_OK ? 0 : 1;
}
"""


def main(argv):
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench data_ops", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    from firmware_sim.profiles import load_profile
    from pyembed.bench.callgrind import build_program, count_instructions

    cases = "\n    ".join(f'if (!strcmp(argv[1], "{k}")) st = {call};' for k, (call, _, _, _) in KERNELS.items())
    exe = build_program(SOURCE.replace("CASES", cases), "data_ops_bench", opt="-O2")
    prof = load_profile("nrf52840")
    rows = []
    for name, (_, n_out, kclass, op) in KERNELS.items():
        counts = count_instructions(exe, [name], functions=[name])
        k = prof.kernel_cost(kclass)
        per_mac = 4 if op == "RESIZE_BILINEAR" else 0
        rows.append({"kernel": name, "op": op, "elements": n_out, "instructions": counts[name],
                     "per_element": round(counts[name] / n_out, 2), "cost_class": kclass,
                     "m4_cycles_per_element": k.cycles_per_element + k.cycles_per_mac * per_mac})
    res = {"host": "x86-64 gcc -O2 (callgrind)", "kernels": rows}

    def render(r):
        return table(["kernel", "operator", "out elements", "instructions", "per element", "sim class",
                      "sim M4 cycles/element"],
                     [[x["kernel"], x["op"], x["elements"], x["instructions"], x["per_element"], x["cost_class"],
                       x["m4_cycles_per_element"]] for x in r["kernels"]])
    emit(res, a.json, render)
    return 0
