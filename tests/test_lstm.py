"""int16 LOGISTIC / TANH and UNIDIRECTIONAL_SEQUENCE_LSTM (int8, int16 cell
state): bit-exact with the tflite-micro interpreter, compared with ==.
Models are written in-process with pyembed.model.tflite_writer."""
import importlib.util
import pathlib

import numpy as np
import pytest

from pyembed.data import model_path
from pyembed.errors import ModelError
from pyembed.model import tflite_writer as W
from pyembed.model.tflite_writer import lstm_model
from pyembed.model.graph import random_inputs
from pyembed.model.load import load_model, load_tflite_bytes
from pyembed import _csrc

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _gen_module():
    spec = importlib.util.spec_from_file_location("gen_sigmoid_lut", ROOT / "tools" / "gen_sigmoid_lut.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _mismatches(got, want):
    got, want = np.asarray(got), np.asarray(want).reshape(np.shape(got))
    bad = np.argwhere(got != want)
    return [(tuple(i), int(got[tuple(i)]), int(want[tuple(i)])) for i in bad[:20]] + \
        ([("...", len(bad))] if len(bad) > 20 else [])


def _tflm_run(blob, xs):
    from tflite_micro.python.tflite_micro import runtime
    it = runtime.Interpreter.from_bytes(blob, arena_size=1 << 22)
    for k, x in enumerate(xs):
        it.set_input(np.ascontiguousarray(x), k)
    it.invoke()
    return [np.array(it.get_output(0))]


def test_sigmoid_table_c_file_is_what_the_generator_writes():
    gen = _gen_module()
    values = gen.sigmoid_table()
    assert len(values) == 256 and values[0] == 32768 and values[-1] == 65535
    assert all(b >= a for a, b in zip(values, values[1:]))
    assert gen.margin() > 1e-3       # no node sits near a rounding boundary
    assert (ROOT / "csrc" / "src" / "kernels" / "recurrent" / "pe_sigmoid_table.c").read_text() == gen.render(values)


# -- int16 LOGISTIC / TANH over every input value ------------------------------------

def _act_model(code, in_scale):
    t = [W.tensor((256, 256), np.int16, scale=in_scale, zp=0), W.tensor((256, 256), np.int16, scale=2.0 ** -15, zp=0)]
    return W.build(t, [W.op(code, [0], [1])], inputs=[0], outputs=[1])


@pytest.mark.parametrize("kind", ["LOGISTIC", "TANH"])
@pytest.mark.parametrize("in_scale", [2.0 ** -12, 2.0 ** -11, 2.0 ** -15, 3.1e-4, 1.7e-3, 1e-5])
def test_int16_logistic_tanh_every_input_bit_exact(kind, in_scale):
    S = W.schema()
    blob = _act_model(getattr(S.BuiltinOperator, kind), in_scale)
    g = load_tflite_bytes(blob, name=f"{kind.lower()}16")
    assert not g.unsupported, g.summary()
    assert g.operators[0].params["variant"] == f"{kind}@int16"
    x = np.arange(-32768, 32768, dtype=np.int64).astype(np.int16).reshape(256, 256)
    got = g.run(x)[0]
    want = _tflm_run(blob, [x])[0]
    assert _mismatches(got, want) == []
    # LiteRT's int16 LOGISTIC / TANH compute the same (its LSTM does not: below)
    assert _mismatches(g.run(x, rounding="litert")[0], W.litert_run(blob, [x])[0]) == []


# -- UNIDIRECTIONAL_SEQUENCE_LSTM ------------------------------------------------------

LSTM_CASES = [
    dict(seed=1),
    dict(seed=2, time_major=True),
    dict(seed=3, batch=1, time=6, in_dim=7, state=6, hidden_zp=0, in_zp=-128),
    dict(seed=4, cell_scale=2.0 ** -15, hidden_zp=-20),
    dict(seed=5, cell_scale=2.0 ** -8, cell_clip=3.0, time_major=True, batch=3),
    dict(seed=6, cell_clip=0.5, in_zp=127, hidden_zp=-128),
    dict(seed=7, w_amp=3, time=4),
    dict(seed=8, n_ops=2, state=8, time=2),
    dict(seed=9, cell_scale=2.0 ** -12, batch=1, time=1, in_dim=33, state=16),
]


@pytest.mark.parametrize("case", LSTM_CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_lstm_bit_exact_with_tflm(case):
    blob = lstm_model(**case)
    g = load_tflite_bytes(blob, name="lstm")
    assert not g.unsupported, g.summary()
    for xs in random_inputs(g, 3, seed=case["seed"]):
        got = g.run(xs)[0]
        want = _tflm_run(blob, xs)[0]
        assert _mismatches(got, want) == [], case


def test_lstm_state_carries_over_invocations_like_tflm():
    """TFLM keeps the variable tensors between invokes; so does one arena."""
    from tflite_micro.python.tflite_micro import runtime
    blob = lstm_model(11, hidden_zp=-9)
    g = load_tflite_bytes(blob, name="lstm")
    rt = g.compile()
    arena = rt.new_arena()
    it = runtime.Interpreter.from_bytes(blob, arena_size=1 << 22)
    outs = []
    for xs in random_inputs(g, 4, seed=5):
        rt.set_input(arena, 0, xs[0])
        for step in range(len(rt.order)):
            rt.invoke_op(step, arena)
        it.set_input(xs[0], 0)
        it.invoke()
        got = rt.get_output(arena, 0)
        assert _mismatches(got, it.get_output(0)) == []
        outs.append(got)
    # the state mattered: a fresh run of the last input differs
    assert not np.array_equal(g.run(xs)[0], outs[-1])
    rt.reset_variables(arena)
    h = [t for t in g.operators[0].inputs if t >= 0 and g.tensors[t].is_variable]
    assert np.all(rt.tensor_value(arena, h[0]) == -9) and np.all(rt.tensor_value(arena, h[1]) == 0)


def test_lstm_refusals_and_errors():
    g = load_tflite_bytes(lstm_model(1, per_channel=True), name="lstm_pc")
    assert g.unsupported and "per channel" in g.operators[0].reason
    S = W.schema()
    blob = lstm_model(1)
    m = S.ModelT.InitFromObj(S.Model.GetRootAs(blob, 0))
    m.subgraphs[0].tensors[m.subgraphs[0].outputs[0]].shape = [2, 3, 5]
    import flatbuffers
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    with pytest.raises(ModelError, match="output shape"):
        load_tflite_bytes(bytes(b.Output()), name="lstm_bad")


@pytest.mark.parametrize("name", ["tflm_mnist_lstm_int8", "tflm_dtln_noise_suppression"])
def test_bundled_lstm_models_bit_exact_with_tflm(name):
    from tflite_micro.python.tflite_micro import runtime
    path = model_path(name)
    g = load_model(path)
    assert not g.unsupported, g.summary()
    it = runtime.Interpreter.from_file(path)
    rng = np.random.default_rng(3)
    xs_list = random_inputs(g, 3, seed=2)
    # inputs over a narrower range too (uniform int8 noise saturates the MNIST softmax)
    xs_list += [[rng.integers(-128, -40, size=g.tensors[g.inputs[0]].shape, dtype=np.int8)] for _ in range(3)]
    for xs in xs_list:
        it.reset()
        it.set_input(xs[0], 0)
        it.invoke()
        assert _mismatches(g.run(xs)[0], it.get_output(0)) == [], name


def test_plan_flash_counts_operator_parameter_words():
    """Parameter words (multipliers, LUTs) are flash tables like the weights."""
    from pyembed.plan import plan_graph
    g = load_model(model_path("tflm_dtln_noise_suppression"))
    plan = plan_graph(g)
    word_items = [f for f in plan.flash if f.tensor == -1]
    with_words = [op for op in g.operators if op.params.get("words")]
    assert len(word_items) == len(with_words) >= 2
    assert sorted(f.size for f in word_items) == sorted(4 * len(op.params["words"]) for op in with_words)
    consts = sum(t.nbytes for t in g.tensors if t.is_constant)
    assert plan.flash_size >= consts + sum(f.size for f in word_items)


def test_simulator_runs_the_lstm_models_with_states_reset():
    """The MCU simulator resets the recurrent states as TFLM does and gets the
    host's outputs (it compares them itself)."""
    from click.testing import CliRunner

    from pyembed.cli import main
    for name in ("tflm_mnist_lstm_int8", "tflm_dtln_noise_suppression"):
        r = CliRunner().invoke(main, ["simulate", model_path(name)], catch_exceptions=True)
        assert r.exit_code == 0, r.output
        assert "outputs bit-exact with the host run of the same graph" in r.output, r.output


def test_emitted_host_program_runs_the_dtln_lstms(tmp_path):
    """The generated C tables (model_graph.c with its reset of the recurrent
    states: DTLN's second hidden state has zero point -4) built into the host
    program give model.run's output."""
    import shutil
    import subprocess

    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    from pyembed.codegen.emit import write_plan_outputs
    from pyembed.plan import plan_graph
    g = load_model(model_path("tflm_dtln_noise_suppression"))
    assert any(t.is_variable and t.zero_point is not None and int(t.zero_point[0]) != 0 for t in g.tensors)
    write_plan_outputs(g, plan_graph(g), tmp_path)
    csrc = ROOT / "csrc"
    srcs = _csrc.all_sources(csrc)
    r = subprocess.run(["gcc", "-std=c99", "-O1", f"-I{csrc}/include", "-I.", "model_main.c", "model_graph.c",
                        "model_data.c", *srcs, "-o", "model_main", "-lm"], cwd=tmp_path, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    for xs in random_inputs(g, 2, seed=4):
        out = subprocess.run([str(tmp_path / "model_main")], input=xs[0].tobytes(), capture_output=True, check=True)
        got = np.array(out.stdout.decode().split(), dtype=np.int64)
        assert np.array_equal(got, g.run(xs)[0].ravel().astype(np.int64))
    assert "reset_states" in (tmp_path / "model_graph.c").read_text()


# -- rounding="litert": LiteRT's integer LSTM ------------------------------------------

def _litert_run(blob, xs):
    return W.litert_run(blob, xs)[0]


def _litert_cases():
    from pyembed.bench.lstm_litert import random_cases
    edge = [dict(seed=21, bias_amp=300000, in_zp=-128, hidden_zp=127, w_amp=127, state=12),   # saturated gates
            dict(seed=22, cell_scale=2.0 ** -9, cell_clip=7.9, time=8, h_scale=0.0123),         # 6 integer bits
            dict(seed=23, cell_scale=2.0 ** -15, in_zp=127, hidden_zp=-128, in_scale=0.0031),   # 0 integer bits
            dict(seed=24, inter_hidden=(0.0113, 3), h_scale=1.0 / 128)]   # hidden intermediate's own scale
    return [c for c in LSTM_CASES if c.get("cell_scale", 2.0 ** -11) <= 2.0 ** -9] + edge + random_cases(12, seed=7)


@pytest.mark.parametrize("case", _litert_cases(), ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_lstm_litert_bit_exact_with_litert(case):
    """Graph.run(rounding="litert") == LiteRT's interpreter, element by element;
    the cases are chosen so that TFLM's arithmetic differs from LiteRT's on
    several of them (counted below), i.e. the variant is exercised."""
    blob = lstm_model(**case)
    g = load_tflite_bytes(blob, name="lstm")
    assert not g.unsupported, g.summary()
    for xs in random_inputs(g, 3, seed=case["seed"]):
        want = _litert_run(blob, xs)
        assert _mismatches(g.run(xs, rounding="litert")[0], want) == [], case


def test_lstm_litert_variant_is_not_tflm_arithmetic():
    """On the same random models, TFLM's LSTM arithmetic differs from LiteRT's
    (so the test above can fail) while rounding="litert" does not."""
    from pyembed.bench.lstm_litert import _count, random_cases
    before = after = 0
    for case in random_cases(12, seed=7):
        blob = lstm_model(**case)
        g = load_tflite_bytes(blob, name="lstm")
        _, b, a = _count(g, blob, random_inputs(g, 3, seed=case["seed"]))
        before, after = before + b, after + a
    assert after == 0 and before > 0, (before, after)


@pytest.mark.parametrize("name", ["tflm_mnist_lstm_int8", "tflm_dtln_noise_suppression"])
def test_bundled_lstm_models_bit_exact_with_litert(name):
    path = model_path(name)
    g = load_model(path)
    blob = pathlib.Path(path).read_bytes()
    rng = np.random.default_rng(3)
    xs_list = random_inputs(g, 6, seed=2)
    xs_list += [[rng.integers(-128, -40, size=g.tensors[g.inputs[0]].shape, dtype=np.int8)] for _ in range(6)]
    for xs in xs_list:
        assert _mismatches(g.run(xs, rounding="litert")[0], _litert_run(blob, xs)) == [], name


def test_lstm_litert_refusals():
    """Where LiteRT's kernel computes something pyembed cannot reproduce,
    rounding="litert" says so (TFLM's arithmetic still runs)."""
    from pyembed.errors import ArgumentError
    g = load_tflite_bytes(lstm_model(5, cell_scale=2.0 ** -8), name="lstm_big_cell")
    xs = random_inputs(g, 1, seed=1)[0]
    g.run(xs)
    with pytest.raises(ArgumentError, match="0..6 integer bits"):
        g.run(xs, rounding="litert")
    g = load_tflite_bytes(lstm_model(5, inter_hidden=(1.0 / 128, 9)), name="lstm_inter_zp")
    g.run(xs)
    with pytest.raises(ArgumentError, match="zero point 9 differs"):
        g.run(xs, rounding="litert")


def test_lstm_words_decoder_rejects_bad_words():
    """pe_lstm_params_from_words (shared by the runner and the fuzzer): the
    graph runner refuses words out of range for either variant."""
    from pyembed.errors import PyEmbedError
    g = load_tflite_bytes(lstm_model(1), name="lstm")
    op = g.operators[0]
    xs = random_inputs(g, 1, seed=1)[0]
    good = list(op.params["words_litert"])
    for k, v in ((0, 4), (7, 7), (7, -1), (8, 1), (26, 5)):
        bad = list(good)
        bad[k] = v
        op.params["words_litert"] = bad
        g._runtime_cache.clear()
        with pytest.raises(PyEmbedError):
            g.run(xs, rounding="litert")
    op.params["words_litert"] = good
    g._runtime_cache.clear()
    g.run(xs, rounding="litert")
