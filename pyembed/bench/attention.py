"""Memory and instruction counts of the streaming attention (issue 4).

    python -m pyembed.bench attention [--json] [--rows-callgrind 64] [--quick]

1. Memory at N = M = 4 800 tokens (VGA at 1/8), d = 128, dv = 2: what a cost
   volume / full score matrix would take (int8 and fp32), the measured peak
   scratch of the conventional baselines (one materialised score row, the
   whole score matrix) and of the streaming kernel (pe_stats.peak_bytes,
   counted by the kernels while they run).
2. Instructions per score (valgrind callgrind, gcc -O2 on this host) for the
   streaming kernel (late and early fold), the row baseline and a plain int8
   loop doing the same Q.K^T and P.V multiply-accumulates with no softmax, at
   a reduced number of query rows against all 4 800 keys.
3. The auto fold rule's constants (pe_attention.h) re-measured: instructions
   per Q.K MAC, per key of exponent bookkeeping, per output division.
4. Stereo on scikit-image's motorcycle pair (Middlebury 2014, ships offline)
   at 1/4 resolution with normalised 5x5 patches: end-point error of the int8
   pipeline and of the same pipeline in float64, and the two error sources
   (fixed-point arithmetic vs int8 feature quantization) apart.
"""
import argparse
import time

import numpy as np

from pyembed.bench.common import emit, table

N_TOKENS, DEPTH, DV = 4800, 128, 2

C_PROGRAM = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pyembed/pe_attention.h"

/* The same multiply-accumulates as the attention, nothing else: s = q.k in
 * int32, then acc += s * v in int64 for every value column. */
__attribute__((noinline)) void plain_qk_pv(const int8_t *q, const int8_t *k, const int8_t *v,
                                           int32_t n, int32_t m, int32_t d, int32_t dv,
                                           int64_t *acc)
{
    int32_t i, j, c;
    for (i = 0; i < n; i++) {
        int64_t *a = acc + (size_t)i * (size_t)dv;
        for (c = 0; c < dv; c++) a[c] = 0;
        for (j = 0; j < m; j++) {
            const int8_t *qr = q + (size_t)i * (size_t)d;
            const int8_t *kr = k + (size_t)j * (size_t)d;
            int32_t s = 0;
            for (c = 0; c < d; c++) s += (int32_t)qr[c] * (int32_t)kr[c];
            for (c = 0; c < dv; c++) a[c] += (int64_t)s * (int64_t)v[(size_t)j * (size_t)dv + c];
        }
    }
}

static uint32_t state = 12345u;
static int8_t rnd(void) { state = state * 1664525u + 1013904223u; return (int8_t)(state >> 24); }

int main(int argc, char **argv)
{
    const char *mode = argv[1];
    const int32_t n = atoi(argv[2]), m = atoi(argv[3]), d = atoi(argv[4]), dv = atoi(argv[5]);
    pe_attn_dims dims = {n, m, d, dv, 1};
    pe_attn_params p;
    pe_context ctx;
    pe_stats stats;
    int32_t need = 0, st = 0;
    size_t i;
    int8_t *q = malloc((size_t)n * d), *k = malloc((size_t)m * d), *v = malloc((size_t)m * dv);
    int32_t *out = malloc((size_t)n * dv * sizeof(int32_t));
    int64_t *acc = malloc((size_t)n * dv * sizeof(int64_t));
    (void)argc;
    for (i = 0; i < (size_t)n * d; i++) q[i] = (int8_t)(rnd() / 4);
    for (i = 0; i < (size_t)m * d; i++) k[i] = (int8_t)(rnd() / 4);
    for (i = 0; i < (size_t)m * dv; i++) v[i] = rnd();
    memset(&p, 0, sizeof p);
    memset(&stats, 0, sizeof stats);
    p.score_quant.multiplier = 1518500250; /* a softmax of moderate sharpness */
    p.score_quant.shift = 6;
    p.block = 64;
    p.fold = strcmp(mode, "early") == 0 ? PE_ATTN_FOLD_EARLY : PE_ATTN_FOLD_LATE;
    if (strcmp(mode, "plain") == 0) {
        plain_qk_pv(q, k, v, n, m, d, dv, acc);
        printf("%lld\n", (long long)acc[0]);
        return 0;
    }
    if (strcmp(mode, "row") == 0) {
        pe_attention_conv_get_buffer_size(&p, PE_ATTN_BASE_ROW, &dims, &need);
    } else {
        pe_attention_nf_get_buffer_size(&p, &dims, &need);
    }
    ctx.buf = malloc((size_t)need);
    ctx.size = need;
    ctx.stats = &stats;
    if (strcmp(mode, "row") == 0) {
        st = pe_attention_conv_s8(&ctx, &p, PE_ATTN_BASE_ROW, &dims, q, k, v, out);
    } else {
        st = pe_attention_nf_s8(&ctx, &p, &dims, q, k, v, out);
    }
    printf("%d %d %llu\n", st, out[0], (unsigned long long)stats.rescales);
    return st;
}
"""

FUNCTION = {"late": "pe_attention_nf_s8", "early": "pe_attention_nf_s8",
            "row": "pe_attention_conv_s8", "plain": "plain_qk_pv"}


def _instructions(exe, mode, n, m, d, dv):
    from pyembed.bench.callgrind import count_instructions
    fn = FUNCTION[mode]
    return count_instructions(exe, [mode, n, m, d, dv], functions=[fn])[fn]


def _memory(rows):
    from pyembed.kernels import attention as A
    rng = np.random.default_rng(0)
    f = rng.normal(size=(N_TOKENS, DEPTH))
    q = np.clip(np.rint(f * 30), -127, 127).astype(np.int8)
    k = np.clip(np.rint((f[::-1] + 0.3 * rng.normal(size=f.shape)) * 30), -127, 127).astype(np.int8)
    y, x = np.divmod(np.arange(N_TOKENS), 80)
    v = (np.stack([x, y], axis=1) - 128).astype(np.int8)
    kw = dict(q_scale=1 / 30, k_scale=1 / 30, v_scale=1.0, v_zero=-128)
    res = {}
    for name, call in (
            ("streaming", lambda qq: A.attention(qq, k, v, return_stats=True, **kw)),
            ("baseline_row", lambda qq: A.attention_baseline(qq, k, v, materialise="row",
                                                             return_stats=True, **kw)),
            ("baseline_matrix", lambda qq: A.attention_baseline(qq, k, v, materialise="matrix",
                                                                return_stats=True, **kw))):
        qq = q[:rows]
        t0 = time.perf_counter()
        _, stats = call(qq)
        res[name] = {"rows": rows, "peak_bytes": int(stats["peak_bytes"]),
                     "seconds": time.perf_counter() - t0, "macs": int(stats["macs"]),
                     "exps": int(stats["exps"]), "rescales": int(stats["rescales"])}
    return res


def _fit_costs(exe):
    """Instructions per Q.K MAC, per key of exponent work, per output division,
    from small late-fold runs (16 rows) that differ in one size at a time."""
    n = 16
    base = _instructions(exe, "late", n, 64, 64, 1)
    deeper = _instructions(exe, "late", n, 64, 128, 1)
    more_keys = _instructions(exe, "late", n, 128, 64, 1)
    wider = _instructions(exe, "late", n, 1, 64, 65)
    narrow = _instructions(exe, "late", n, 1, 64, 1)
    mac = (deeper - base) / (n * 64 * 64)
    per_key = (more_keys - base) / (n * 64)
    exp_cost = per_key - 64 * mac  # per key beyond its d MACs (score map, exponent, sums)
    div = (wider - narrow) / (n * 64)
    return {"mac": mac, "exp": exp_cost, "div": div}


def _rule_check(exe):
    from pyembed.kernels import attention as A
    rows = []
    for m, d, dv in ((2, 4, 64), (8, 8, 32), (4, 16, 16), (64, 16, 16), (16, 64, 8), (4800, 128, 2)):
        mm = min(m, 512)
        late = _instructions(exe, "late", 4, mm, d, dv)
        early = _instructions(exe, "early", 4, mm, d, dv)
        rows.append({"m": mm, "d": d, "dv": dv, "late_ir": late, "early_ir": early,
                     "cheaper": "early" if early < late else "late", "auto": A.choose_fold(mm, d, dv)})
    return rows


def _stereo(factor=4, radius=2, temperature=20.0):
    from pyembed.kernels.matching import match_disparity, quantize_symmetric, stereo_motorcycle
    fl, fr, gt, valid, dmax = stereo_motorcycle(factor, radius)
    kw = dict(max_disparity=dmax, temperature=temperature)
    d_fix, stats = match_disparity(fl, fr, return_stats=True, **kw)
    d_flt = match_disparity(fl, fr, precision="float64", **kw)
    (ql, sl), (qr, sr) = quantize_symmetric(fl), quantize_symmetric(fr)
    d_deq = match_disparity(ql * sl, qr * sr, precision="float64", **kw)
    epe = lambda d: float(np.abs(d - gt)[valid].mean())  # noqa: E731
    return {"size": list(fl.shape), "max_disparity": dmax, "temperature": temperature,
            "valid_fraction": float(valid.mean()), "epe_int8": epe(d_fix), "epe_float64": epe(d_flt),
            "arithmetic_error_mean": float(np.abs(d_fix - d_deq)[valid].mean()),
            "quantization_error_mean": float(np.abs(d_deq - d_flt)[valid].mean()),
            "peak_bytes": int(stats["peak_bytes"])}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench attention", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--rows-callgrind", type=int, default=64,
                    help="query rows in the callgrind runs (all 4800 keys), default 64")
    ap.add_argument("--quick", action="store_true",
                    help="memory runs on 256 query rows instead of 4800 (peaks do not depend on N "
                         "except the matrix baseline's)")
    args = ap.parse_args(argv)

    from pyembed.kernels import attention as A
    from pyembed._ext import _attention as ext
    from pyembed.bench.callgrind import build_program

    entries = N_TOKENS * N_TOKENS
    result = {
        "tokens": N_TOKENS, "depth": DEPTH, "dv": DV,
        "score_matrix_int8_bytes": entries,
        "score_matrix_fp32_bytes": 4 * entries,
        "raft_pyramid_int8_bytes": N_TOKENS * (N_TOKENS + N_TOKENS // 4 + N_TOKENS // 16 + 70),
        "streaming_scratch_query_bytes": A.scratch_bytes(DEPTH, DV),
    }
    rows = 256 if args.quick else N_TOKENS
    result["memory"] = _memory(rows)
    peak = result["memory"]["streaming"]["peak_bytes"]
    result["reduction_vs_int8_correlation"] = entries / peak

    exe = build_program(C_PROGRAM, "attention_bench", opt="-O2")
    n = args.rows_callgrind
    scores = n * N_TOKENS
    cg = {}
    for mode in ("plain", "late", "early", "row"):
        ir = _instructions(exe, mode, n, N_TOKENS, DEPTH, DV)
        cg[mode] = {"instructions": ir, "per_score": ir / scores}
    for mode in ("late", "early", "row"):
        cg[mode]["overhead_vs_plain"] = cg[mode]["instructions"] / cg["plain"]["instructions"] - 1.0
    # the early fold makes 2d + dv MACs per score: compare it with a plain loop
    # of the same MAC count (Q.K^T over 2d columns)
    ir2 = _instructions(exe, "plain", n, N_TOKENS, 2 * DEPTH, DV)
    cg["plain_2d"] = {"instructions": ir2, "per_score": ir2 / scores}
    cg["early"]["overhead_vs_same_macs"] = cg["early"]["instructions"] / ir2 - 1.0
    result["callgrind"] = {"rows": n, "keys": N_TOKENS, "scores": scores, "runs": cg}
    result["fold_costs_measured"] = _fit_costs(exe)
    result["fold_costs_header"] = {"mac": ext.COST_MAC, "exp": ext.COST_EXP, "div": ext.COST_DIV}
    result["auto_rule_check"] = _rule_check(exe)
    result["stereo_motorcycle"] = _stereo()
    emit(result, args.json, _render)
    return 0


def _mb(b):
    return f"{b / 1e6:.2f} MB"


def _render(r):
    m = r["memory"]
    lines = [f"Streaming attention, N = M = {r['tokens']} tokens (VGA at 1/8), d = {r['depth']}, "
             f"dv = {r['dv']}", "",
             "Memory (bytes besides Q, K, V and the output):"]
    lines.append(table(["what", "bytes", "", "how"], [
        ["score matrix / cost volume, int8", r["score_matrix_int8_bytes"], _mb(r["score_matrix_int8_bytes"]),
         "N*M entries (GMFlow correlation)"],
        ["score matrix, fp32", r["score_matrix_fp32_bytes"], _mb(r["score_matrix_fp32_bytes"]), "4*N*M"],
        ["RAFT 4-level pyramid, int8", r["raft_pyramid_int8_bytes"], _mb(r["raft_pyramid_int8_bytes"]),
         "N*(M + M/4 + M/16 + 70)"],
        ["baseline, score matrix materialised", m["baseline_matrix"]["peak_bytes"],
         _mb(m["baseline_matrix"]["peak_bytes"]), f"measured, {m['baseline_matrix']['rows']} rows"],
        ["baseline, score row materialised", m["baseline_row"]["peak_bytes"],
         _mb(m["baseline_row"]["peak_bytes"]), f"measured, {m['baseline_row']['rows']} rows"],
        ["streaming (norm folded)", m["streaming"]["peak_bytes"], _mb(m["streaming"]["peak_bytes"]),
         f"measured, {m['streaming']['rows']} rows (query: {r['streaming_scratch_query_bytes']})"],
    ]))
    lines.append(f"streaming peak vs int8 correlation: {r['reduction_vs_int8_correlation']:.0f}x smaller "
                 f"(goal > 350x, <= 65536 B)")
    lines.append("wall time (this host, one run): " + ", ".join(
        f"{k} {v['seconds']:.2f} s" for k, v in m.items()) + f"; rescales per row (streaming): "
        f"{m['streaming']['rescales'] / m['streaming']['rows']:.2f}")
    c = r["callgrind"]
    lines += ["", f"Instructions per score (callgrind, gcc -O2, x86-64; reduced N: {c['rows']} query rows x "
              f"{c['keys']} keys = {c['scores']} scores, d = {r['depth']}, dv = {r['dv']}):"]
    lines.append(table(["kernel", "instructions", "per score", "vs plain loop"], [
        [k, v["instructions"], f"{v['per_score']:.1f}",
         f"{100 * v['overhead_vs_plain']:+.1f} %" if "overhead_vs_plain" in v else "-"]
        for k, v in c["runs"].items()]))
    lines.append("plain = int8 Q.K^T dot products + P.V MACs only (no softmax); goal: streaming late "
                 "fold <= +50 %")
    lines.append(f"early fold (two score passes, 2d + dv MACs per score) vs plain_2d (a plain loop with "
                 f"the same MACs): {100 * c['runs']['early']['overhead_vs_same_macs']:+.1f} %")
    fm, fh = r["fold_costs_measured"], r["fold_costs_header"]
    lines += ["", "Auto fold rule: early when keys_per_row*(d*MAC + EXP) < dv*DIV",
              f"measured now: MAC {fm['mac']:.2f}, EXP {fm['exp']:.1f}, DIV {fm['div']:.1f} instructions; "
              f"pe_attention.h: MAC {fh['mac']}, EXP {fh['exp']}, DIV {fh['div']}"]
    lines.append(table(["keys", "d", "dv", "late Ir", "early Ir", "cheaper", "auto picks"], [
        [x["m"], x["d"], x["dv"], x["late_ir"], x["early_ir"], x["cheaper"], x["auto"]]
        for x in r["auto_rule_check"]]))
    s = r["stereo_motorcycle"]
    lines += ["", f"Stereo, scikit-image motorcycle at 1/4 ({s['size'][1]}x{s['size'][0]}, {s['size'][2]} "
              f"features, max disparity {s['max_disparity']}, {100 * s['valid_fraction']:.0f} % pixels "
              f"with ground truth):",
              f"EPE int8 pipeline {s['epe_int8']:.4f} px, same pipeline in float64 {s['epe_float64']:.4f} px "
              f"({100 * (s['epe_int8'] / s['epe_float64'] - 1):+.2f} %, goal within 2 %)",
              f"mean |int8 - float64 on dequantized features| {s['arithmetic_error_mean']:.6f} px "
              f"(arithmetic); mean |float64 dequantized - float64| {s['quantization_error_mean']:.4f} px "
              f"(feature quantization); peak scratch {s['peak_bytes']} B"]
    return "\n".join(lines)


if __name__ == "__main__":
    import sys
    sys.exit(main())
