"""Structured attention masks (issue 32): a constant causal / banded /
key-padding mask becomes a per-query key range in the fused PE_ATTENTION
operator instead of an n x m bias tensor. tflm mode is compared with == to
the TFLM interpreter on the unfused model (with its bias tensor), stream mode
with == to pyembed.kernels.attention's fixed-point kernel on the same key
ranges; flash, scratch and MACs of a 1,024-token model come from the plan."""
import json

import numpy as np
import pytest
from click.testing import CliRunner

from pyembed.bench import _transformer_models as tm
from pyembed.kernels.attention import attention_fixed
from pyembed.kernels.fixed import requantize
from pyembed.model.load import load_tflite_bytes
from pyembed.model.ops.transformer import key_ranges
from pyembed.passes.transformer import fuse_attention, mask_structure

runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")

N = 64
HEADS, DH = 2, 8
KINDS = {"causal": {}, "band": {"below": 3, "above": 5}, "padding": {"length": 41},
         "stereo": {"width": 8, "disparity": (0, 5)}}
NAMES = {"causal": "causal", "band": "band", "padding": "padding", "stereo": "rows+band"}


def _tflm(data, xs):
    it = runtime.Interpreter.from_bytes(data, arena_size=1 << 23)
    for i, x in enumerate(xs):
        it.set_input(x, i)
    it.invoke()
    return np.array(it.get_output(0))


def _inputs(g, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(-128, 128, g.tensors[t].shape).astype(np.int8) for t in g.inputs]


def _model(kind, n=N, m=None, **kw):
    m = n if m is None else m
    allowed = tm.allowed_keys(kind, n, m, **KINDS.get(kind, {}), **kw)
    data, _ = tm.build_attention(n, heads=HEADS, dh=DH, seed=7, mask=allowed, kv_tokens=m)
    return data, allowed


def test_mask_structure_recognises_the_kinds_and_refuses_the_rest():
    n = 10
    cases = [("causal", {"offset": 0}, 2), ("causal", {"offset": 3}, 2), ("band", {"below": 2, "above": 1}, 3),
             ("padding", {"length": 6}, 4), ("causal+padding", {"offset": 1, "length": 7}, 6),
             ("stereo", {"width": 5, "disparity": (0, 3)}, 11)]   # image rows: n == m keys
    for kind, kw, bits in cases:
        m = n if kind == "stereo" else 13
        allowed = tm.allowed_keys(kind, n, m, **kw)
        codes = np.where(allowed, 127, -128).astype(np.int8)
        r = mask_structure(codes)
        assert isinstance(r, dict) and r["kind"] == bits, (kind, r)
        assert (r["allowed_code"], r["masked_code"]) == (127, -128)
        # the four integers give back exactly the allowed matrix
        lo, hi = key_ranges(n, m, r)
        j = np.arange(m)
        assert np.array_equal((j >= lo[:, None]) & (j < hi[:, None]), allowed)
    m = 13
    holes = tm.allowed_keys("causal", n, m)
    holes = holes.copy()
    holes[5, 2] = False
    assert "contiguous" in mask_structure(np.where(holes, 0, -128))
    assert "distinct" in mask_structure(np.random.default_rng(0).integers(-128, 128, (n, m)))
    strided = np.zeros((n, m), bool)
    strided[np.arange(n), (np.arange(n) * 3) % m] = True   # one key per row, not i + const
    assert isinstance(mask_structure(np.where(strided, 0, -128)), str)


@pytest.mark.parametrize("kind", list(KINDS))
def test_tflm_mode_structured_mask_bit_exact_and_cheaper(kind):
    data, allowed = _model(kind)
    g = load_tflite_bytes(data)
    report = fuse_attention(g, attention="tflm")
    assert [r["result"] for r in report] == ["fused"]
    assert report[0]["mask"].startswith(NAMES[kind]), report
    op = g.operators[0]
    assert op.inputs[3] == -1 and op.options["range"]["name"] == NAMES[kind]
    # the tensor path on the same model, for the same inputs
    gt = load_tflite_bytes(data)
    assert fuse_attention(gt, attention="tflm", structured=False)[0]["mask"].startswith("kept")
    keys = int(allowed.sum())
    assert op.macs == HEADS * keys * 2 * DH < gt.operators[0].macs == HEADS * N * N * 2 * DH
    assert op.scratch_bytes == gt.operators[0].scratch_bytes
    for seed in range(2):
        xs = _inputs(g, seed)
        want = _tflm(data, xs)
        got = g.run(xs)[0]
        assert np.array_equal(got, want)
        assert np.array_equal(gt.run(xs)[0], want)


def _stream_reference(g, xs, fold):
    """pyembed.kernels.attention's kernel on the graph's Q, K, V with the
    operator's key ranges, requantized with the operator's output words."""
    op = g.operators[0]
    o, p = op.options, op.params
    qp = [g.tensors[t].qparams() for t in op.inputs[:3]]
    lo, hi = key_ranges(o["n"], o["m"], o.get("range"))
    acc, stats = attention_fixed(xs[0].reshape(o["n"], -1), xs[1].reshape(o["m"], -1), xs[2].reshape(o["m"], -1),
                                 q_scale=qp[0][0], k_scale=qp[1][0], v_scale=qp[2][0], q_zero=qp[0][1],
                                 k_zero=qp[1][1], v_zero=qp[2][1], heads=o["heads"], fold=fold,
                                 block=o["block"], key_range=(lo, hi), softmax_scale=o["scale_real"] * o["beta"],
                                 return_stats=True)
    # the same Q22 logit multiplier as the operator's words
    assert tuple(stats["score_multiplier"]) == (p["logit_multiplier"], p["logit_shift"])
    y = requantize(acc, p["out_multiplier"], p["out_shift"]).astype(np.int64) + p["out_zero_point"]
    return np.clip(y, -128, 127).astype(np.int8), stats


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("fold", ["late", "early"])
def test_stream_mode_structured_mask_equals_the_reference_on_the_ranges(kind, fold):
    data, allowed = _model(kind)
    g = load_tflite_bytes(data)
    report = fuse_attention(g, attention="stream", fold=fold)
    assert report[0]["result"] == "fused" and report[0]["mask"].startswith(NAMES[kind]), report
    op = g.operators[0]
    assert op.inputs[3] == -1 and op.inputs[4] == -1   # no mask tensor, no logit table
    for seed in range(2):
        xs = _inputs(g, seed)
        want, _ = _stream_reference(g, xs, fold)
        assert np.array_equal(g.run(xs)[0].reshape(want.shape), want)
    assert op.macs == HEADS * int(allowed.sum()) * 2 * DH


def test_a_mask_that_is_not_structured_keeps_the_tensor():
    data, _ = tm.build_attention(16, heads=2, dh=4, seed=3, mask=True)
    for mode in ("tflm", "stream"):
        g = load_tflite_bytes(data)
        r = fuse_attention(g, attention=mode)
        assert r[0]["result"] == "fused" and r[0]["mask"].startswith("kept as a tensor")
        assert g.operators[0].inputs[3] >= 0 and "range" not in g.operators[0].options


def test_a_weak_mask_stays_a_tensor_where_skipping_is_not_exact():
    # a -2 mask is no mask for the softmax: TFLM gives the "masked" keys
    # weight, so tflm mode must keep the tensor; stream mode refuses it too
    allowed = tm.allowed_keys("causal", 16, 16)
    data, _ = tm.build_attention(16, heads=2, dh=4, seed=3, mask=allowed, mask_value=-2.0)
    g = load_tflite_bytes(data)
    r = fuse_attention(g, attention="tflm")
    assert "not provably exact" in r[0]["mask"]
    xs = _inputs(g, 0)
    assert np.array_equal(g.run(xs)[0], _tflm(data, xs))
    g = load_tflite_bytes(data)
    assert "octaves" in fuse_attention(g, attention="stream")[0]["mask"]


def _plan(tmp_path, data, name):
    from pyembed.cli import main
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(data)
    r = CliRunner().invoke(main, ["plan", str(path), "--attention", "stream", "-o", str(tmp_path / name), "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def test_1024_token_causal_plan_costs_no_more_than_unmasked(tmp_path):
    n = 1024
    allowed = tm.allowed_keys("causal", n, n)
    plain, _ = tm.build_attention(n, heads=HEADS, dh=DH, seed=7, calib=1)
    causal, _ = tm.build_attention(n, heads=HEADS, dh=DH, seed=7, calib=1, mask=allowed)
    a, b = _plan(tmp_path, plain, "plain"), _plan(tmp_path, causal, "causal")
    assert any("causal" in line for line in b["attention"]), b["attention"]
    assert b["flash"] == a["flash"] and b["arena"] == a["arena"]
    macs = {}
    for name, data in (("plain", plain), ("causal", causal)):
        g = load_tflite_bytes(data)
        fuse_attention(g, attention="stream")
        op = g.operators[0]
        macs[name] = sum(o.macs for o in g.operators)
        lo, hi = key_ranges(n, n, op.options.get("range"))
        assert op.macs == HEADS * int((hi - lo).sum()) * 2 * DH
    # keys j <= i: n (n + 1) / 2 of n^2
    assert macs["causal"] * 2 * n == macs["plain"] * (n + 1)
