"""LayerNorm and GELU fusion (issue 17): PE_LAYERNORM (row-wise chain run
row by row) and element-wise GELU chains as PE_LUT, on in-process .tflite
models, compared with the TFLM interpreter (or LiteRT's reference kernels
where TFLM has no int8 kernel: NEG, GELU) with ==; the transformer passes
together on the bench models and behind the CLI's --attention switch."""
import os
import subprocess

import numpy as np
import pytest
from click.testing import CliRunner

from pyembed.bench import _transformer_models as tm
from pyembed.model.load import load_tflite_bytes
from pyembed.model.tflite_writer import tflm_frames
from pyembed.passes.layernorm import fuse_layernorm
from pyembed.passes.transformer import fuse_transformer
from pyembed import _csrc

runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")

LN_CHAINS = {
    "keras2": ["MEAN", "SQUARED_DIFFERENCE", "MEAN", "ADD", "RSQRT", "MUL", "MUL", "SUB", "MUL", "ADD"],
    "keras3": ["MEAN", "SQUARED_DIFFERENCE", "MEAN", "ADD", "RSQRT", "MUL", "NEG", "MUL", "ADD", "MUL", "ADD"],
    "manual": ["MEAN", "SUB", "MUL", "MEAN", "ADD", "RSQRT", "MUL", "MUL", "ADD"],
    "rms": ["MUL", "MEAN", "ADD", "RSQRT", "MUL", "MUL"],
}


def _tflm(data, xs):
    return tflm_frames(data, xs, arena_size=1 << 22)


def _litert(data, xs):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    it = Interpreter(model_content=data, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    out = []
    for x in xs:
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        out.append(np.array(it.get_tensor(it.get_output_details()[0]["index"])))
    return out


def _inputs(q, shape, n=3, seed=1):
    rng = np.random.default_rng(seed)
    s, z = q
    return [np.clip(np.round(rng.normal(0, 1, shape) / s) + z, -128, 127).astype(np.int8) for _ in range(n)]


def _mismatches(got, want):
    bad = 0
    for a, b in zip(got, want):
        bad += int(np.sum(np.asarray(a).reshape(-1).astype(np.int64) != np.asarray(b).reshape(-1).astype(np.int64)))
    return bad


@pytest.mark.parametrize("variant", ["keras2", "keras3", "manual", "rms"])
def test_layernorm_chain_fused_bit_exact(variant):
    data, q = tm.build_norm_block(tokens=8, dim=16, variant=variant, seed=2)
    plain = load_tflite_bytes(data)
    g = load_tflite_bytes(data)
    report = fuse_layernorm(g)
    assert [r["result"] for r in report] == ["fused"]
    assert report[0]["ops"] == LN_CHAINS[variant]
    assert [op.type for op in g.operators] == ["FULLY_CONNECTED", "PE_LAYERNORM", "FULLY_CONNECTED"]
    g.check_supported()
    xs = _inputs(q, (8, 8))
    got = [g.run(x)[0] for x in xs]
    assert _mismatches(got, [plain.run(x)[0] for x in xs]) == 0
    if variant == "keras3":
        # TFLM has no int8 NEG: LiteRT's reference kernels (FC rounded once)
        assert _mismatches([g.run(x, rounding="litert")[0] for x in xs], _litert(data, xs)) == 0
    else:
        assert _mismatches(got, _tflm(data, xs)) == 0


def test_layernorm_scratch_is_rows_of_depth_not_sequence():
    scratch = {}
    for tokens in (4, 64):
        data, _ = tm.build_norm_block(tokens=tokens, dim=16, seed=3)
        g = load_tflite_bytes(data)
        fuse_layernorm(g)
        op = next(o for o in g.operators if o.type == "PE_LAYERNORM")
        scratch[tokens] = op.scratch_bytes
        # 5 [T, 16] and 4 [T, 1] intermediates besides the output: one row of each
        assert op.scratch_bytes == 5 * 16 + 4 * 1
        assert op.params["words"][:2] == [tokens, 16]
    assert scratch[4] == scratch[64]


def test_layernorm_with_an_intermediate_read_outside_is_left_alone():
    data, _ = tm.build_norm_block(tokens=4, dim=8, seed=4)
    g = load_tflite_bytes(data)
    # make the variance a graph output: the chain no longer ends in one tensor
    var = [op for op in g.operators if op.type == "MEAN"][1].outputs[0]
    g.outputs.append(var)
    report = fuse_layernorm(g)
    assert "PE_LAYERNORM" not in [op.type for op in g.operators]
    assert report and report[0]["result"] != "fused"


def test_gelu_tanh_chain_after_layernorm_is_one_table_bit_exact_with_tflm():
    data, q = tm.build_norm_block(tokens=8, dim=16, act="gelu_tanh", seed=5)
    g = load_tflite_bytes(data)
    lines = fuse_transformer(g, "tflm")
    assert [op.type for op in g.operators] == ["FULLY_CONNECTED", "PE_LAYERNORM", "PE_LUT", "FULLY_CONNECTED"]
    assert any(line.startswith("element-wise") and "MUL MUL MUL ADD MUL TANH ADD MUL MUL" in line for line in lines)
    xs = _inputs(q, (8, 8))
    assert _mismatches([g.run(x)[0] for x in xs], _tflm(data, xs)) == 0


@pytest.mark.parametrize("approximate", [False, True])
def test_gelu_builtin_runs_as_its_table_bit_exact_with_litert(approximate):
    # TFLM has no GELU kernel; pyembed's GELU is already one 256-entry table
    data, q = tm.build_norm_block(tokens=8, dim=16, act="gelu_approx" if approximate else "gelu", seed=6)
    g = load_tflite_bytes(data)
    fuse_transformer(g, "tflm")
    assert [op.type for op in g.operators] == ["FULLY_CONNECTED", "PE_LAYERNORM", "GELU", "FULLY_CONNECTED"]
    assert g.operators[2].options.get("approximate", False) == approximate
    xs = _inputs(q, (8, 8))
    assert _mismatches([g.run(x, rounding="litert")[0] for x in xs], _litert(data, xs)) == 0


@pytest.mark.parametrize("name,tokens", [("kwt", 12), ("vit", 9)])
def test_whole_model_fused_in_tflm_mode_bit_exact(name, tokens):
    data, info = tm.build(name, tokens, seed=7)
    g = load_tflite_bytes(data)
    fuse_transformer(g, "tflm")
    types = [op.type for op in g.operators]
    assert types.count("PE_ATTENTION") == 2 and types.count("PE_LAYERNORM") == 5 and types.count("PE_LUT") == 2
    assert not {"MEAN", "RSQRT", "SOFTMAX", "BATCH_MATMUL", "TANH"} & set(types)
    assert ("CONCATENATION" in types) == (name == "vit")   # the class token
    xs = [tm.quantize_input(info, x) for x in tm.sample_inputs(name, tokens, 2, 11)]
    assert _mismatches([g.run(x)[0] for x in xs], _tflm(data, xs)) == 0


def test_float_reference_of_fused_layernorm_is_the_float_network():
    from pyembed.model.float_ref import run_float
    data, info = tm.build("vit", 6, seed=8)
    g = load_tflite_bytes(data)
    fuse_transformer(g, "stream")
    for x, want in zip(info["calib_inputs"], info["calib_outputs"]):
        np.testing.assert_allclose(run_float(g, [x])[g.outputs[0]], want, rtol=0, atol=1e-5)


def test_layernorm_through_emitted_c_and_simulator(tmp_path):
    from firmware_sim.sim import simulate
    from pyembed.codegen.emit import write_plan_outputs
    from pyembed.plan import plan_graph
    data, q = tm.build_norm_block(tokens=6, dim=16, variant="keras2", act="gelu_tanh", seed=9)
    g = load_tflite_bytes(data)
    fuse_transformer(g, "tflm")
    x = _inputs(q, (6, 8), n=1)[0]
    want = _tflm(data, [x])[0]
    r = simulate(g, None, "stm32f446", x)
    assert _mismatches([np.asarray(r.outputs[0])], [want]) == 0
    plan = plan_graph(g)
    write_plan_outputs(g, plan, tmp_path)
    csrc = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "csrc")
    srcs = _csrc.all_sources(csrc)
    res = subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O1", f"-I{csrc}/include",
                          "-I.", "model_main.c", "model_graph.c", "model_data.c", *srcs, "-o", "model_main", "-lm"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    out = subprocess.run([str(tmp_path / "model_main")], input=x.tobytes(), capture_output=True, check=True)
    got = np.array(out.stdout.decode().split(), dtype=np.int64)
    assert np.array_equal(got, want.reshape(-1).astype(np.int64))


def test_bad_layernorm_words_are_refused_by_the_runtime():
    from pyembed.errors import PyEmbedError
    data, q = tm.build_norm_block(tokens=4, dim=8, seed=10)
    g = load_tflite_bytes(data)
    fuse_layernorm(g)
    op = next(o for o in g.operators if o.type == "PE_LAYERNORM")
    x = _inputs(q, (4, 8), n=1)[0]
    good = list(op.params["words"])
    for bad in (good[:-1], [good[0] + 1] + good[1:], good[:4] + [3] + good[5:]):
        op.params["words"] = bad
        g._runtime_cache.clear()   # compile the tables again
        with pytest.raises(PyEmbedError):
            g.run(x)
    op.params["words"] = good
    g._runtime_cache.clear()
    g.run(x)


def test_cli_attention_switch(tmp_path):
    from pyembed.cli import main
    data, _ = tm.build("vit", 8, seed=12)
    path = tmp_path / "vit.tflite"
    path.write_bytes(data)
    r = CliRunner().invoke(main, ["model", "run", str(path), "--attention", "tflm", "--check"])
    assert r.exit_code == 0, r.output
    assert "attention" in r.output and "bit-exact with TFLM" in r.output
    r = CliRunner().invoke(main, ["plan", str(path), "--attention", "stream", "-o", str(tmp_path / "p"), "--json"])
    assert r.exit_code == 0, r.output
    import json
    s = json.loads(r.output)
    assert sum("fused" in line for line in s["attention"]) == 2 + 5 + 2
    r = CliRunner().invoke(main, ["plan", str(path), "--attention", "none", "-o", str(tmp_path / "q"), "--json"])
    assert r.exit_code == 0, r.output
    unfused = json.loads(r.output)
    assert unfused["arena"] > s["arena"] and not unfused["attention"]
    # the default (auto) is tflm: the same fused lines and arena as asking for it
    r = CliRunner().invoke(main, ["plan", str(path), "-o", str(tmp_path / "d"), "--json"])
    assert r.exit_code == 0, r.output
    default = json.loads(r.output)
    r = CliRunner().invoke(main, ["plan", str(path), "--attention", "tflm", "-o", str(tmp_path / "t"), "--json"])
    assert r.exit_code == 0, r.output
    tflm = json.loads(r.output)
    assert default["attention"] == tflm["attention"] and default["arena"] == tflm["arena"] < unfused["arena"]
    assert json.load(open(tmp_path / "d" / "plan.json"))["info"].get("attention") == "tflm"
    # simulate takes the plan of the fused graph and fuses the same way (recorded in plan.json)
    r = CliRunner().invoke(main, ["simulate", str(path), "--plan", str(tmp_path / "p" / "plan.json"), "--no-ops"])
    assert r.exit_code == 0, r.output
    assert "attention" in r.output and "bit-exact with the host run" in r.output
    r = CliRunner().invoke(main, ["model", "run", str(path), "--attention", "fast"])
    assert r.exit_code == 2


@pytest.mark.parametrize("n,m,bias", [(5, 7, False), (9, 40, True), (1, 3, False)])
def test_scores_as_fully_connected_with_constant_keys_bit_exact(n, m, bias):
    from pyembed.passes.transformer import fuse_attention
    data, _ = tm.build_attention_fc(n, m, bias=bias, seed=n)
    g = load_tflite_bytes(data)
    assert [op.type for op in g.operators] == ["FULLY_CONNECTED", "MUL", "SOFTMAX", "BATCH_MATMUL"]
    assert [r["result"] for r in fuse_attention(g, "tflm")] == ["fused"]
    assert [op.type for op in g.operators] == ["PE_ATTENTION"]
    rng = np.random.default_rng(n)
    for _ in range(3):
        xs = [rng.integers(-128, 128, g.tensors[t].shape).astype(np.int8) for t in g.inputs]
        it = runtime.Interpreter.from_bytes(data)
        for i, x in enumerate(xs):
            it.set_input(x, i)
        it.invoke()
        assert _mismatches([g.run(xs)[0]], [np.array(it.get_output(0))]) == 0


def test_scores_as_fully_connected_stream_mode_closer_to_float64():
    from pyembed.kernels.quant import quantize
    from pyembed.model.float_ref import dequantize, run_float
    from pyembed.passes.transformer import fuse_attention
    data, _ = tm.build_attention_fc(6, 96, seed=3)
    # SNR over the outputs inside the int8 output's range (the calibration
    # saw 4 random inputs; values past its range saturate in both modes)
    snr = {}
    for mode in ("tflm", "stream"):
        g = load_tflite_bytes(data)
        fuse_attention(g, mode)
        out_t = g.tensors[g.outputs[0]]
        rng = np.random.default_rng(0)
        ref, got = [], []
        for _ in range(3):
            xs = [quantize(rng.normal(0, 1, g.tensors[t].shape), *g.tensors[t].qparams()) for t in g.inputs]
            xr = [dequantize(g.tensors[t], x) for t, x in zip(g.inputs, xs)]
            ref.append(run_float(g, xr)[g.outputs[0]].reshape(-1))
            got.append(dequantize(out_t, g.run(xs)[0]).reshape(-1))
        r, q = np.concatenate(ref), np.concatenate(got)
        s, z = out_t.qparams()
        inside = (r > (-128 - z) * float(s)) & (r < (127 - z) * float(s))
        assert inside.mean() > 0.9
        r, q = r[inside], q[inside]
        snr[mode] = 10 * np.log10(np.sum(r * r) / np.sum((q - r) ** 2))
        if mode == "stream":   # the float value rounded to the output grid
            assert np.max(np.abs(q - r)) <= 0.5 * float(s) * 1.001
    assert snr["stream"] > snr["tflm"] + 3.0


def test_scores_as_fully_connected_with_a_bias_are_left_alone():
    from pyembed.passes.transformer import fuse_attention
    data, _ = tm.build_attention_fc(4, 6, bias=True, seed=2)
    g = load_tflite_bytes(data)
    fc = g.operators[0]
    g.tensors[fc.inputs[2]].data = np.arange(6, dtype=np.int32)
    report = fuse_attention(g, "tflm")
    assert report == [{"softmax": report[0]["softmax"], "result": "FULLY_CONNECTED scores with a bias"}]
    assert "PE_ATTENTION" not in [op.type for op in g.operators]


def _own_snr(g, op_type, q, shape, n=4):
    """SNR of the (single) op_type operator's output against float64 of the
    same operator on its own int8 input, and of that float value rounded to
    the output grid (the int8 floor)."""
    from pyembed.model.float_ref import dequantize, evaluate
    op = next(o for o in g.operators if o.type == op_type)
    refs, gots = [], []
    for x in _inputs(q, shape, n=n, seed=1):
        vals = g.run(x, keep_intermediates=True)
        ins = [dequantize(g.tensors[op.inputs[0]], vals[op.inputs[0]])] + \
              [dequantize(g.tensors[t]) for t in op.inputs[1:]]
        refs.append(np.asarray(evaluate(g, op, ins)).reshape(-1))
        gots.append(dequantize(g.tensors[op.outputs[0]], vals[op.outputs[0]]).reshape(-1))
    r, got = np.concatenate(refs), np.concatenate(gots)
    s, z = g.tensors[op.outputs[0]].qparams()
    floor = (np.clip(np.round(r / float(s)) + z, -128, 127) - z) * float(s)

    def snr(a):
        return 10 * np.log10(np.sum(r * r) / np.sum((a - r) ** 2))
    return snr(got), snr(floor), np.max(np.abs(got - floor)) / float(s)


@pytest.mark.parametrize("variant", ["keras2", "keras3", "manual"])
def test_precise_layernorm_reaches_the_int8_floor(variant):
    data, q = tm.build_norm_block(tokens=16, dim=32, variant=variant, seed=2)
    snr = {}
    for mode in ("chain", "precise"):
        g = load_tflite_bytes(data)
        report = fuse_layernorm(g, mode=mode)
        kind = "PE_LAYERNORM_HP" if mode == "precise" else "PE_LAYERNORM"
        assert [op.type for op in g.operators] == ["FULLY_CONNECTED", kind, "FULLY_CONNECTED"], report
        snr[mode] = _own_snr(g, kind, q, (16, 8))
    got, floor, worst = snr["precise"]
    # one rounding: the float64 LayerNorm on the int8 grid, off by at most one LSB on a tie
    assert worst <= 1.0 and got > floor - 0.1
    assert got > snr["chain"][0] + 3.0, snr


def test_precise_mode_keeps_the_chain_for_rmsnorm():
    data, q = tm.build_norm_block(tokens=4, dim=8, variant="rms", seed=3)
    g = load_tflite_bytes(data)
    report = fuse_layernorm(g, mode="precise")
    assert [op.type for op in g.operators] == ["FULLY_CONNECTED", "PE_LAYERNORM", "FULLY_CONNECTED"]
    assert "chain kept" in report[0]["result"]
    xs = _inputs(q, (4, 8))
    assert _mismatches([g.run(x)[0] for x in xs], _tflm(data, xs)) == 0
