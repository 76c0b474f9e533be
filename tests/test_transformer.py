"""Fused transformer attention (issue 17): recognition of the converter's
attention chain, the PE_ATTENTION operator in tflm mode (bit-exact with the
TFLM interpreter, compared with ==) and stream mode (against float64)."""
import numpy as np
import pytest

from pyembed.bench import _transformer_models as tm
from pyembed.errors import ArgumentError
from pyembed.model.float_ref import dequantize, run_float
from pyembed.model.load import load_tflite_bytes
from pyembed.passes.transformer import fuse_attention
from pyembed import _csrc

runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")


def _tflm(data, xs):
    it = runtime.Interpreter.from_bytes(data, arena_size=1 << 23)
    for i, x in enumerate(xs):
        it.set_input(x, i)
    it.invoke()
    return np.array(it.get_output(0))


def _inputs(g, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(-128, 128, g.tensors[t].shape).astype(np.int8) for t in g.inputs]


def _fused(data, mode, **kw):
    g = load_tflite_bytes(data)
    report = fuse_attention(g, attention=mode, **kw)
    return g, report


def _mismatches(got, want):
    got, want = np.asarray(got).reshape(-1), np.asarray(want).reshape(-1)
    bad = np.flatnonzero(got != want)
    return [(int(i), int(got[i]), int(want[i])) for i in bad]


@pytest.mark.parametrize("n,m,heads,dh,mask,scale,adj_y,batch", [
    (5, 5, 2, 8, False, True, False, False), (7, 12, 3, 4, True, True, True, False),
    (16, 9, 1, 16, True, False, False, True), (1, 33, 2, 8, False, True, True, True),
    (6, 10, 2, 4, True, True, True, True)])
def test_tflm_mode_attention_bit_exact(n, m, heads, dh, mask, scale, adj_y, batch):
    data, _ = tm.build_attention(n, heads=heads, dh=dh, seed=n + m, mask=mask, scale=scale, kv_tokens=m,
                                 adj_y=adj_y, batch=batch)
    g, report = _fused(data, "tflm")
    assert [r["result"] for r in report] == ["fused"]
    assert [op.type for op in g.operators] == ["PE_ATTENTION"]
    assert g.operators[0].scratch_bytes == m  # one int8 score row
    for seed in range(3):
        xs = _inputs(g, seed)
        assert _mismatches(g.run(xs)[0], _tflm(data, xs)) == []


def test_tflm_mode_kwt_bit_exact():
    data, info = tm.build("kwt", 12, seed=3)
    g, report = _fused(data, "tflm")
    assert [r["result"] for r in report] == ["fused", "fused"]
    assert not any(op.type in ("BATCH_MATMUL", "TRANSPOSE", "SOFTMAX") for op in g.operators)
    g.check_supported()
    for x in tm.sample_inputs("kwt", 12, 2, 7):
        xq = tm.quantize_input(info, x)
        assert _mismatches(g.run(xq)[0], _tflm(data, [xq])) == []


def test_tflm_mode_vit_masked_bit_exact():
    data, info = tm.build("vit", 10, seed=4, mask=True)
    g, report = _fused(data, "tflm")
    assert [r["result"] for r in report] == ["fused", "fused"]
    xq = tm.quantize_input(info, tm.sample_inputs("vit", 10, 1, 8)[0])
    assert _mismatches(g.run(xq)[0], _tflm(data, [xq])) == []


def _snr(ref, x):
    err = x - ref
    return 10 * np.log10(np.sum(ref * ref) / np.sum(err * err))


def _normal_inputs(g, seed):
    from pyembed.kernels.quant import quantize
    rng = np.random.default_rng(seed)
    return [quantize(rng.normal(0, 1, g.tensors[t].shape), *g.tensors[t].qparams()) for t in g.inputs]


def _stream_vs_tflm(run_stream):
    # 96 keys: TFLM's int8 probabilities (1/256 steps) lose much of the
    # weight spread, the stream mode's 30-bit ones do not
    data, _ = tm.build_attention(8, heads=2, dh=8, seed=1, kv_tokens=96)
    gs, report = _fused(data, "stream")
    assert [r["result"] for r in report] == ["fused"]
    out_t = gs.tensors[gs.outputs[0]]
    s, z = out_t.qparams()
    ref, st, tf = [], [], []
    for seed in range(3):
        xs = _normal_inputs(gs, seed)
        xr = [dequantize(gs.tensors[t], x) for t, x in zip(gs.inputs, xs)]
        ref.append(run_float(gs, xr)[gs.outputs[0]].reshape(-1))
        st.append(dequantize(out_t, run_stream(gs, xs)).reshape(-1))
        tf.append(dequantize(out_t, _tflm(data, xs)).reshape(-1))
    ref, st, tf = (np.concatenate(a) for a in (ref, st, tf))
    assert _snr(ref, st) > _snr(ref, tf) + 6.0
    # inside the output's range the stream result is the rounded float value
    inside = (ref > (-128 - z) * float(s)) & (ref < (127 - z) * float(s))
    assert inside.mean() > 0.95
    assert np.max(np.abs(st - ref)[inside]) <= 0.5 * float(s) * 1.001


def test_stream_mode_closer_to_float64_than_tflm():
    _stream_vs_tflm(lambda g, xs: g.run(xs)[0])


def test_stream_kernel_binding_closer_to_float64_than_tflm():
    from pyembed._ext import _transformer

    def run(g, xs):
        op = g.operators[0]
        return _transformer.xattn(op.params["words"], xs[0], xs[1], xs[2], None, g.tensors[op.outputs[0]].size)
    _stream_vs_tflm(run)


def test_tflm_mode_kernel_binding_bit_exact():
    from pyembed._ext import _transformer
    for seed, (n, m, mask) in enumerate([(3, 7, True), (9, 4, False), (16, 16, True)]):
        data, _ = tm.build_attention(n, heads=2, dh=4, seed=seed, mask=mask, kv_tokens=m)
        g, _ = _fused(data, "tflm")
        op = g.operators[0]
        xs = _inputs(g, seed)
        mk = g.tensors[op.inputs[3]].data if op.inputs[3] >= 0 else None
        got, stats = _transformer.xattn(op.params["words"], xs[0], xs[1], xs[2], mk,
                                        g.tensors[op.outputs[0]].size, stats=True)
        assert _mismatches(got, _tflm(data, xs)) == []
        assert stats["scratch_bytes"] == op.scratch_bytes == m
        assert stats["macs"] == op.macs


def test_kernel_binding_rejects_bad_words_and_short_tensors():
    from pyembed._ext import _transformer
    data, _ = tm.build_attention(4, heads=1, dh=4, seed=0)
    g, _ = _fused(data, "tflm")
    w = list(g.operators[0].params["words"])
    xs = _inputs(g, 0)
    with pytest.raises(ArgumentError):
        _transformer.xattn(w[:-1], xs[0], xs[1], xs[2], None, 16)
    with pytest.raises(ArgumentError):
        _transformer.xattn(w, xs[0][:-1], xs[1], xs[2], None, 16)
    with pytest.raises(ArgumentError):
        _transformer.xattn(w, xs[0], xs[1], xs[2], None, 15)


def test_scratch_does_not_grow_with_tokens():
    sizes = {}
    for t in (8, 40):
        data, _ = tm.build("kwt", t, seed=0)
        for mode in ("tflm", "stream"):
            g, _ = _fused(data, mode)
            sizes[mode, t] = {op.scratch_bytes for op in g.operators if op.type == "PE_ATTENTION"}
    assert sizes["stream", 8] == sizes["stream", 40]
    assert sizes["tflm", 8] == {8} and sizes["tflm", 40] == {40}


def test_not_fused_when_scores_have_a_second_reader():
    data, _ = tm.build_attention(4, heads=1, dh=4, seed=0)
    g = load_tflite_bytes(data)
    sm = next(op for op in g.operators if op.type == "SOFTMAX")
    g.outputs.append(sm.inputs[0])  # the scores become a graph output
    report = fuse_attention(g, "tflm")
    assert len(report) == 1 and report[0]["result"] != "fused"
    assert any(op.type == "BATCH_MATMUL" for op in g.operators)


def test_stream_mode_with_a_mask_against_float64():
    # the mask is a bias on the stream kernel's base-2 logits (a 256-entry
    # table): the result stays at the output rounding floor of the float64
    # attention, and beats TFLM's int8 probabilities
    data, _ = tm.build_attention(8, heads=2, dh=8, seed=3, kv_tokens=80, mask=True)
    gs, report = _fused(data, "stream")
    assert [r["result"] for r in report] == ["fused"]
    op = gs.operators[0]
    assert gs.tensors[op.inputs[4]].dtype == np.int32 and gs.tensors[op.inputs[4]].size == 256
    out_t = gs.tensors[gs.outputs[0]]
    s, z = out_t.qparams()
    ref, st, tf = [], [], []
    for seed in range(3):
        xs = _normal_inputs(gs, seed)
        xr = [dequantize(gs.tensors[t], x) for t, x in zip(gs.inputs, xs)]
        ref.append(run_float(gs, xr)[gs.outputs[0]].reshape(-1))
        st.append(dequantize(out_t, gs.run(xs)[0]).reshape(-1))
        tf.append(dequantize(out_t, _tflm(data, xs)).reshape(-1))
    ref, st, tf = (np.concatenate(a) for a in (ref, st, tf))
    assert _snr(ref, st) > _snr(ref, tf) + 6.0
    inside = (ref > (-128 - z) * float(s)) & (ref < (127 - z) * float(s))
    assert inside.mean() > 0.95
    assert np.max(np.abs(st - ref)[inside]) <= 0.5 * float(s) * 1.001


def test_bad_arguments():
    data, _ = tm.build_attention(4, heads=1, dh=4, seed=0)
    g = load_tflite_bytes(data)
    with pytest.raises(ArgumentError, match="attention"):
        fuse_attention(g, attention="int8")
    with pytest.raises(ArgumentError, match="fold"):
        fuse_attention(g, fold="sideways")
    with pytest.raises(ArgumentError, match="block"):
        fuse_attention(g, block=0)


def test_elementwise_chain_becomes_a_table_bit_exact_with_tflm():
    from pyembed.passes.elementwise import fuse_elementwise
    data, (s, z) = tm.build_elementwise(tokens=6, dim=8, seed=2)
    g = load_tflite_bytes(data)
    report = fuse_elementwise(g)
    assert [r["result"] for r in report] == ["fused"]
    assert report[0]["ops"] == ["MUL", "ADD", "MUL", "MUL", "ADD"]
    assert [op.type for op in g.operators] == ["FULLY_CONNECTED", "PE_LUT", "FULLY_CONNECTED"]
    for seed in range(3):
        xs = _inputs(g, seed)
        assert _mismatches(g.run(xs)[0], _tflm(data, xs)) == []
    # the float64 reference still evaluates the chain it replaced
    xs = _normal_inputs(g, 0)
    xr = dequantize(g.tensors[g.inputs[0]], xs[0])
    ref = run_float(g, [xr])[g.outputs[0]]
    out = dequantize(g.tensors[g.outputs[0]], g.run(xs)[0])
    assert _snr(ref.reshape(-1), out.reshape(-1)) > 20


def test_elementwise_chain_with_an_outside_reader_is_left_alone():
    from pyembed.passes.elementwise import fuse_elementwise
    data, _ = tm.build_elementwise(tokens=4, dim=4, seed=0)
    g = load_tflite_bytes(data)
    mid = next(op for op in g.operators if op.type == "ADD").outputs[0]
    g.outputs.append(mid)  # an intermediate of the chain is read outside it
    fuse_elementwise(g)
    assert not any(op.type == "PE_LUT" for op in g.operators)
    assert any(mid in op.outputs for op in g.operators)


@pytest.mark.parametrize("name,mask", [("kwt", False), ("vit", True)])
def test_float_reference_of_the_fused_graph_is_the_unfused_float_network(name, mask):
    # the builder computed the unfused network in float64 (BATCH_MATMUL,
    # TRANSPOSE, MUL, ADD mask, SOFTMAX in numpy) on its calibration inputs
    data, info = tm.build(name, 12, seed=5, mask=mask)
    g, report = _fused(data, "tflm")
    assert [r["result"] for r in report] == ["fused", "fused"]
    for x, want in zip(info["calib_inputs"], info["calib_outputs"]):
        got = run_float(g, [x])[g.outputs[0]]
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)


def test_emitted_c_program_runs_the_fused_graph(tmp_path):
    # the generic ABI tables (model_graph.c) of a fused keyword transformer,
    # compiled with the C sources and run on the host, give Graph.run's bytes
    import os
    import subprocess

    from pyembed.codegen.emit import write_plan_outputs
    from pyembed.plan import plan_graph
    csrc = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "csrc")
    data, info = tm.build("kwt", 10, seed=6)
    g, _ = _fused(data, "stream")
    from pyembed.passes.elementwise import fuse_elementwise
    fuse_elementwise(g)
    plan = plan_graph(g)
    write_plan_outputs(g, plan, tmp_path)
    srcs = _csrc.all_sources(csrc)
    r = subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O1",
                        f"-I{csrc}/include", "-I.", "model_main.c", "model_graph.c", "model_data.c", *srcs,
                        "-o", "model_main", "-lm"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    x = tm.quantize_input(info, tm.sample_inputs("kwt", 10, 1, 3)[0])
    r = subprocess.run([str(tmp_path / "model_main")], input=x.tobytes(), capture_output=True, check=True)
    got = np.array(r.stdout.decode().split(), dtype=np.int64)
    assert np.array_equal(got, g.run(x)[0].ravel().astype(np.int64))


def test_simulator_cost_of_fused_attention_grows_with_the_scores():
    from firmware_sim.cost import CostModel
    from firmware_sim.profiles import load_profile
    prof = load_profile("stm32f746")
    costs = {}
    for t in (8, 32):
        data, _ = tm.build("kwt", t, seed=0)
        g, _ = _fused(data, "stream")
        op = next(o for o in g.operators if o.type == "PE_ATTENTION")
        costs[t] = CostModel(prof).op_cost(g, op)
        assert costs[t].macs == op.macs == 2 * t * t * (32 + 32)
    # 16x the scores: more than 10x the compute
    assert costs[32].compute_cycles > 10 * costs[8].compute_cycles


def test_accuracy_check_shows_both_modes_against_float64(tmp_path):
    from pyembed.check.accuracy import check_attention_modes
    data, _ = tm.build_attention(8, heads=2, dh=8, seed=1, kv_tokens=96)
    path = tmp_path / "attn.tflite"
    path.write_bytes(data)
    reps = check_attention_modes(str(path), n=3, seed=0)
    assert set(reps) == {"tflm", "stream"}
    last = {m: r.layers["end_to_end"][-1] for m, r in reps.items()}
    assert last["tflm"].type == last["stream"].type == "PE_ATTENTION"
    assert last["stream"].snr_db > last["tflm"].snr_db
    tflm_oracle = {m: [o for o in r.oracles if "micro" in o.name][0] for m, r in reps.items()}
    assert tflm_oracle["tflm"].status == "bit-exact"
    assert tflm_oracle["stream"].status == "mismatch"
