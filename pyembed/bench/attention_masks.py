"""Structured attention masks (issue 32): flash, scratch and MACs of one
multi-head attention with no mask, a causal, a banded and a stereo mask,
planned with the attention fused in stream mode.

    python -m pyembed.bench attention_masks [--json] [--tokens 1024]
                                            [--heads 2] [--dh 8] [--band 16]
                                            [--width 32] [--disparity 8]

The model is pyembed.bench._transformer_models.build_attention (Q, K, V graph
inputs, [tokens, heads*dh]); the masks are constant int8 tensors (0 where
allowed, -60 elsewhere) added to the scores, as a converter writes them.
Rows: ``none`` (no mask), ``causal`` (j <= i), ``band`` (|i - j| <= band),
``stereo`` (tokens = pixels of width-wide images, key on the query's image
row with disparity 0..disparity),
each with the mask recognised as a key range (what ``pyembed plan
--attention stream`` does), and ``causal-tensor`` / ``band-tensor``: the same
masks kept as n x m tensors (fuse_attention(structured=False), the path an
arbitrary mask takes). Columns: ``flash`` (constants + parameter words, the
plan's flash size), ``arena`` (planned RAM: activations + scratch),
``scratch`` (the attention operator's), ``macs`` (the operator's: keys
computed per row times (d + dv), per head) and ``macs_ratio`` (against no
mask). Everything is computed from the plan and the graph; nothing is run.
"""
import argparse

from pyembed.bench import _transformer_models as tm
from pyembed.bench.common import emit, table


def _plan(data, structured):
    from pyembed.model.load import load_tflite_bytes
    from pyembed.passes.transformer import fuse_attention
    from pyembed.target.planning import PlanOptions, plan_for_target
    g = load_tflite_bytes(data)
    report = fuse_attention(g, attention="stream", structured=structured)
    tp = plan_for_target(g, None, PlanOptions(attention="none"), action="plan")
    op = next(o for o in tp.graph.operators if o.type == "PE_ATTENTION")
    return {"flash": int(tp.plan.flash_size), "arena": int(tp.plan.arena_size), "scratch": int(op.scratch_bytes),
            "macs": int(op.macs), "mask": report[0].get("mask", "-")}


def run(tokens, heads, dh, band, width=32, disparity=8):
    masks = {"none": None, "causal": tm.allowed_keys("causal", tokens, tokens),
             "band": tm.allowed_keys("band", tokens, tokens, below=band, above=band),
             "stereo": tm.allowed_keys("stereo", tokens, tokens, width=width, disparity=(0, disparity))}
    rows = []
    for name, allowed in masks.items():
        data, _ = tm.build_attention(tokens, heads=heads, dh=dh, seed=7, calib=1,
                                     mask=allowed if allowed is not None else False)
        variants = [(name, True)] + ([(f"{name}-tensor", False)] if allowed is not None else [])
        for label, structured in variants:
            r = _plan(data, structured)
            r["model"] = label
            rows.append(r)
    base = rows[0]["macs"]
    for r in rows:
        r["macs_ratio"] = r["macs"] / base
    return {"tokens": tokens, "heads": heads, "dh": dh, "band": band, "width": width, "disparity": disparity,
            "rows": rows}


def _render(res):
    head = (f"attention masks: {res['tokens']} tokens, {res['heads']} heads of {res['dh']}, "
            f"band |i - j| <= {res['band']}, stereo rows of {res['width']} with disparity 0..{res['disparity']}, "
            f"stream mode")
    rows = [(r["model"], r["flash"], r["arena"], r["scratch"], r["macs"], f"{r['macs_ratio']:.4f}", r["mask"])
            for r in res["rows"]]
    return head + "\n" + table(["model", "flash B", "arena B", "scratch B", "MACs", "MACs/none", "mask"], rows)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench attention_masks",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--dh", type=int, default=8)
    ap.add_argument("--band", type=int, default=16)
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--disparity", type=int, default=8)
    a = ap.parse_args(argv)
    if a.tokens < 2 or a.heads < 1 or a.dh < 1 or a.band < 0 or a.disparity < 0:
        ap.error("--tokens >= 2, --heads >= 1, --dh >= 1, --band >= 0, --disparity >= 0")
    if not 2 <= a.width < a.tokens or a.tokens % a.width:
        ap.error(f"--width: a divisor of --tokens ({a.tokens}) in [2, tokens)")
    emit(run(a.tokens, a.heads, a.dh, a.band, a.width, a.disparity), a.json, _render)
    return 0
