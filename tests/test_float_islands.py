"""Float islands of int8 models (issue 30): DEQUANTIZE -> float32 element-wise
operators -> QUANTIZE, folded at load into PE_LUT int8 tables
(pyembed.model.float_islands), bit-exact with the tflite-micro interpreter.

Models are written in-process with pyembed.model.tflite_writer. Every test
feeds the island all 256 int8 values and compares pyembed's output with the
interpreter's with ``==``, listing every mismatch. The float32 arithmetic of
the pass is also compared bit for bit with the interpreter's float32 outputs
(DEQUANTIZE -> operator, the float tensor as the graph output).
"""
import os
import subprocess

import numpy as np
import pytest

from pyembed.model import tflite_writer as W
from pyembed.model.load import load_tflite_bytes
from pyembed.model import float_islands as FI

pytest.importorskip("tflite_micro")

S = W.schema()
B = S.BuiltinOperator
OPTIONS = {"ADD": "AddOptions", "SUB": "SubOptions", "MUL": "MulOptions", "DIV": "DivOptions"}
ACT = {None: 0, "RELU": 1, "RELU6": 3}
EVERY = np.arange(-128, 128, dtype=np.int8).reshape(1, 256)


def _float_op(t, k, cur, const=None, const_first=False, act=None):
    """Append float32 operator k reading tensor cur (and a scalar constant)."""
    if const is None:
        t.append(W.tensor(t[cur]["shape"], np.float32))
        return W.op(getattr(B, k), [cur], [len(t) - 1])
    t.append(W.tensor((), np.float32, data=np.array(const, np.float32)))
    c = len(t) - 1
    t.append(W.tensor(t[cur]["shape"], np.float32))
    ins = [c, cur] if const_first else [cur, c]
    if k in OPTIONS:
        return W.op(getattr(B, k), ins, [len(t) - 1], OPTIONS[k], fusedActivationFunction=ACT[act])
    return W.op(getattr(B, k), ins, [len(t) - 1])


def island_model(chain, s_in=0.05, z_in=3, s_out=0.04, z_out=-5, shape=(1, 256)):
    """int8 -> DEQUANTIZE -> chain -> QUANTIZE -> int8; chain: operator names
    or (name, constant, const_first, activation)."""
    t = [W.tensor(shape, scale=s_in, zp=z_in), W.tensor(shape, np.float32)]
    ops = [W.op(B.DEQUANTIZE, [0], [1])]
    for k in chain:
        k, const, first, act = (k, None, False, None) if isinstance(k, str) else k
        ops.append(_float_op(t, k, len(t) - 1, const, first, act))
    t.append(W.tensor(shape, scale=s_out, zp=z_out))
    ops.append(W.op(B.QUANTIZE, [len(t) - 2], [len(t) - 1]))
    return W.build(t, ops, [0], [len(t) - 1])


def tflm(model, *xs):
    from tflite_micro.python.tflite_micro import runtime
    it = runtime.Interpreter.from_bytes(model, arena_size=1 << 18)
    outs = []
    for x in xs:
        it.reset()
        it.set_input(x, 0)
        it.invoke()
        outs.append(it.get_output(0).copy())
    return outs


def mismatches(got, want, x):
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    bad = np.argwhere(got.astype(np.int64) != want.astype(np.int64))
    return [(int(x[tuple(i)]) if x.shape == got.shape else tuple(int(v) for v in i), int(got[tuple(i)]),
             int(want[tuple(i)])) for i in bad]


def check_bit_exact(model, xs, table_ops=None):
    g = load_tflite_bytes(model)
    assert g.unsupported == [], (g.unsupported, g.float_islands)
    if table_ops is not None:
        assert [op.type for op in g.operators] == table_ops, [op.type for op in g.operators]
    failures = []
    for x, want in zip(xs, tflm(model, *xs)):
        got = g.run(x)[0]
        bad = mismatches(got, want, x)
        if bad:
            failures.append(f"{len(bad)} of {want.size} differ (input, pyembed, tflm): {bad}")
    assert not failures, "\n".join(failures)
    return g


# -- one operator per island, every int8 value -----------------------------------------------------

UNARY_SCALES = {"EXP": dict(s_out=1.0), "SQUARE": dict(s_out=0.2), "SIN": dict(s_out=0.01),
                "COS": dict(s_out=0.01), "ROUND": dict(s_in=0.25), "FLOOR": dict(s_in=0.0625),
                "CEIL": dict(s_in=0.0625), "LOGISTIC": dict(s_in=0.1, s_out=1 / 256, z_out=-128),
                "TANH": dict(s_in=0.03, s_out=1 / 128, z_out=0)}


@pytest.mark.parametrize("op", FI.UNARY)
def test_unary_island_is_one_table_bit_exact_with_tflm(op):
    for kw in (UNARY_SCALES.get(op, {}), dict(s_in=0.37, z_in=-128, s_out=0.011, z_out=127),
               dict(s_in=1.0, z_in=0, s_out=50.0, z_out=-100)):
        check_bit_exact(island_model([op], **kw), [EVERY], table_ops=["PE_LUT"])


@pytest.mark.parametrize("op", FI.BINARY)
def test_binary_island_with_a_constant_scalar_is_bit_exact_with_tflm(op):
    acts = (None, "RELU", "RELU6") if op in OPTIONS else (None,)
    for const in (0.3, -1.7, 3e38):
        for first in (False, True):
            for act in acts:
                check_bit_exact(island_model([(op, const, first, act)], s_in=0.05 if const != 3e38 else 1.0),
                                [EVERY], table_ops=["PE_LUT"])


def test_chains_of_two_and_three_operators_are_one_table():
    for chain, kw in ((["NEG", "EXP"], dict(s_out=0.5, z_out=-128)),
                      (["SQUARE", ("ADD", 1e-3, False, None), "RSQRT"], dict(s_out=0.1)),
                      ([("MUL", 1.702, True, None), "LOGISTIC", ("SUB", 1.0, True, "RELU")], dict(s_out=1 / 256)),
                      (["ABS", "SQRT", "LOG"], dict(s_in=0.5, s_out=0.03)),
                      (["EXP", ("ADD", 1.0, False, None), "LOG"], dict(s_in=1.0, s_out=0.5))):   # softplus
        check_bit_exact(island_model(chain, **kw), [EVERY], table_ops=["PE_LUT"])


def test_reshape_inside_an_island_keeps_the_values():
    t = [W.tensor((1, 256), scale=0.05, zp=3), W.tensor((1, 256), np.float32),
         W.tensor((2,), np.int32, data=np.array([16, 16], np.int32)), W.tensor((16, 16), np.float32),
         W.tensor((16, 16), np.float32), W.tensor((16, 16), scale=0.04, zp=0)]
    ops = [W.op(B.DEQUANTIZE, [0], [1]), W.op(B.RESHAPE, [1, 2], [3], "ReshapeOptions", newShape=[16, 16]),
           W.op(B.NEG, [3], [4]), W.op(B.QUANTIZE, [4], [5])]
    check_bit_exact(W.build(t, ops, [0], [5]), [EVERY], table_ops=["PE_LUT"])


def test_layernorm_like_island_inside_an_int8_graph():
    """x - mean(x) as the converter writes it: MEAN (int8) -> DEQUANTIZE ->
    NEG (float32) -> QUANTIZE -> ADD (int8) with x. Rows of constant values
    feed the island every int8 value; random rows follow."""
    rows, dim = 256, 8
    t = [W.tensor((1, rows, dim), scale=0.05, zp=2),                      # 0 x
         W.tensor((1,), np.int32, data=np.array([2], np.int32)),           # 1 axis
         W.tensor((1, rows, 1), scale=0.05, zp=2),                         # 2 mean
         W.tensor((1, rows, 1), np.float32),                               # 3 dequantized
         W.tensor((1, rows, 1), np.float32),                               # 4 -mean
         W.tensor((1, rows, 1), scale=0.05, zp=-2),                        # 5 -mean, int8
         W.tensor((1, rows, dim), scale=0.1, zp=0)]                        # 6 x - mean
    ops = [W.op(B.MEAN, [0, 1], [2], "ReducerOptions", keepDims=True),
           W.op(B.DEQUANTIZE, [2], [3]), W.op(B.NEG, [3], [4]), W.op(B.QUANTIZE, [4], [5]),
           W.op(B.ADD, [0, 5], [6], "AddOptions")]
    model = W.build(t, ops, [0], [6])
    const_rows = np.repeat(np.arange(-128, 128, dtype=np.int8).reshape(1, rows, 1), dim, axis=2)
    rng = np.random.default_rng(30)
    xs = [const_rows] + [rng.integers(-128, 128, (1, rows, dim)).astype(np.int8) for _ in range(3)]
    g = check_bit_exact(model, xs, table_ops=["MEAN", "PE_LUT", "ADD"])
    assert [r["result"] for r in g.float_islands] == ["fused"]


def test_island_with_branches_and_two_quantize_ends():
    """One DEQUANTIZE read by two branches that meet (x * x through MUL of
    two inside tensors), and a second QUANTIZE on an intermediate: one
    table per QUANTIZE, both bit-exact."""
    n = 256
    t = [W.tensor((1, n), scale=0.04, zp=-7), W.tensor((1, n), np.float32),   # 0 x, 1 f
         W.tensor((1, n), np.float32), W.tensor((1, n), np.float32),           # 2 tanh f, 3 neg f
         W.tensor((1, n), np.float32),                                        # 4 tanh * neg
         W.tensor((1, n), scale=0.02, zp=1), W.tensor((1, n), scale=1 / 128, zp=0),   # 5, 6 int8 ends
         W.tensor((1, n), scale=0.05, zp=0)]                                  # 7 int8 ADD of both
    ops = [W.op(B.DEQUANTIZE, [0], [1]), W.op(B.TANH, [1], [2]), W.op(B.NEG, [1], [3]),
           W.op(B.MUL, [2, 3], [4], "MulOptions"), W.op(B.QUANTIZE, [4], [5]), W.op(B.QUANTIZE, [2], [6]),
           W.op(B.ADD, [5, 6], [7], "AddOptions")]
    model = W.build(t, ops, [0], [7])
    g = check_bit_exact(model, [EVERY], table_ops=["PE_LUT", "PE_LUT", "ADD"])
    # each table on its own: the two QUANTIZE ends against the interpreter
    for end in (5, 6):
        sub = W.build(t, ops[:6], [0], [end])
        check_bit_exact(sub, [EVERY])
    assert len(g.operators) == 3


# -- the float32 arithmetic itself, bit for bit ---------------------------------------------------

def _float_out_model(k, s, z, const=None, first=False, act=None):
    t = [W.tensor((1, 256), scale=s, zp=z), W.tensor((1, 256), np.float32)]
    ops = [W.op(B.DEQUANTIZE, [0], [1]), _float_op(t, k, 1, const, first, act)]
    return W.build(t, ops, [0], [len(t) - 1])


def _same_bits(a, b):
    return (np.isnan(a) & np.isnan(b)) | (a.view(np.int32) == b.view(np.int32))


def test_float32_arithmetic_is_the_interpreters_bit_for_bit():
    failures = []
    for k in FI.UNARY:
        for s, z in ((0.003, -128), (0.0371, 0), (0.1234, 7), (1.0, 0), (3.7, 100)):
            want = tflm(_float_out_model(k, s, z), EVERY)[0].reshape(-1)
            got = FI.unary_f32(k, FI.dequantize_f32(EVERY.reshape(-1), s, z))
            bad = np.flatnonzero(~_same_bits(got, want))
            if bad.size:
                failures.append(f"{k} scale {s} zp {z}: inputs {(bad - 128).tolist()} give {got[bad].tolist()}, "
                                f"tflm {want[bad].tolist()}")
    for k in FI.BINARY:
        for const in (0.3, -1.7, 3e38):
            for first in (False, True):
                for act in ((None, "RELU", "RELU6") if k in OPTIONS else (None,)):
                    want = tflm(_float_out_model(k, 1.0, 3, const, first, act), EVERY)[0].reshape(-1)
                    d, c = FI.dequantize_f32(EVERY.reshape(-1), 1.0, 3), np.array([const], np.float32)
                    got = FI.binary_f32(k, *((c, d) if first else (d, c)), act)
                    bad = np.flatnonzero(~_same_bits(got, want))
                    if bad.size:
                        failures.append(f"{k} {const} first={first} {act}: inputs {(bad - 128).tolist()}")
    assert not failures, "\n".join(failures)


def test_quantize_rounds_half_away_from_zero_and_saturates_like_tflm():
    """Float values exactly between two steps, huge values and infinities
    through QUANTIZE (float32 input model), against the interpreter."""
    vals = np.array([0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 126.5, -127.5, 1e10, -1e10, np.inf, -np.inf, 0.49999997,
                     -0.49999997, 3e38, 0.0, -0.0], np.float32)
    for scale, zp in ((1.0, 0), (1.0, 50), (0.5, -50), (1.0, -128), (1.0, 127)):
        t = [W.tensor((1, vals.size), np.float32), W.tensor((1, vals.size), scale=scale, zp=zp)]
        model = W.build(t, [W.op(B.QUANTIZE, [0], [1])], [0], [1])
        want = tflm(model, vals.reshape(1, -1))[0].reshape(-1)
        got = FI.quantize_f32(vals, scale, zp)
        bad = np.flatnonzero(got != want)
        assert not bad.size, [(float(vals[i]), int(got[i]), int(want[i])) for i in bad]


# -- the float64 reference, the refusal, the emitted C ---------------------------------------------

def test_float_reference_of_an_island_table_is_within_half_a_step():
    from pyembed.model.float_ref import dequantize, run_float
    model = island_model(["NEG", "EXP", ("ADD", 1.0, False, None), "LOG"], s_in=0.05, s_out=0.03, z_out=-128)
    g = load_tflite_bytes(model)
    x_t, y_t = g.tensors[g.inputs[0]], g.tensors[g.outputs[0]]
    ref = run_float(g, dequantize(x_t, EVERY))[g.outputs[0]].reshape(-1)
    got = dequantize(y_t, g.run(EVERY)[0]).reshape(-1)
    # softplus(-x) in float64 against the table's int8 values: within half an
    # output step plus float32 rounding (no saturation in this range)
    err = np.abs(ref - got)
    assert err.max() <= 0.5 * float(y_t.scale[0]) + 1e-5, (err.max(), int(err.argmax()) - 128)


def test_a_float_island_that_is_not_element_wise_is_refused_by_its_operators(tmp_path):
    from pyembed.errors import UnsupportedError
    from pyembed.model.support import require_executable
    t = [W.tensor((1, 4, 4, 2), scale=0.1, zp=0), W.tensor((1, 4, 4, 2), np.float32),
         W.tensor((4, 2), np.int32, data=np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32)),
         W.tensor((1, 6, 6, 2), np.float32), W.tensor((1, 6, 6, 2), np.float32),
         W.tensor((1, 6, 6, 2), scale=0.1, zp=0)]
    ops = [W.op(B.DEQUANTIZE, [0], [1]), W.op(B.PAD, [1, 2], [3]), W.op(B.NEG, [3], [4]),
           W.op(B.QUANTIZE, [4], [5])]
    g = load_tflite_bytes(W.build(t, ops, [0], [5]))
    with pytest.raises(UnsupportedError) as e:
        require_executable(g, "plan")
    msg = str(e.value)
    assert "float model" not in msg and "quantize it first" not in msg, msg
    for part in ("#1 PAD (float32 -> float32", "#2 NEG (float32 -> float32", "#0 DEQUANTIZE (int8 -> float32)",
                 "read by operator 1 (PAD)"):
        assert part in msg, (part, msg)


def test_emitted_c_program_runs_an_island_bit_exact_with_tflm(tmp_path):
    """The island's table through the emitted C (model_graph.c, model_data.c,
    model_main.c) compiled for the host, against the interpreter."""
    from pyembed import _csrc
    from pyembed.codegen.emit import write_plan_outputs
    from pyembed.plan import plan_graph
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    csrc = os.path.join(root, "csrc")
    model = island_model(["SQUARE", ("ADD", 1e-3, False, None), "RSQRT"], s_out=0.1)
    g = load_tflite_bytes(model)
    write_plan_outputs(g, plan_graph(g, overlaps=True), tmp_path)
    r = subprocess.run(["gcc", "-std=c99", "-O1", f"-I{csrc}/include", "-I.", "model_main.c", "model_graph.c",
                        "model_data.c", *_csrc.all_sources(csrc), "-o", "model_main", "-lm"], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    out = subprocess.run([str(tmp_path / "model_main")], input=EVERY.tobytes(), capture_output=True, check=True)
    got = np.array(out.stdout.decode().split(), dtype=np.int64).reshape(EVERY.shape)
    want = tflm(model, EVERY)[0].astype(np.int64)
    bad = mismatches(got, want, EVERY)
    assert not bad, bad


def test_converter_layernorm_with_a_float_neg_island_fuses_into_one_row_operator(tmp_path):
    """Keras 3's LayerNorm as an int8 converter writes it (NEG of the mean as
    DEQUANTIZE -> NEG -> QUANTIZE): the island loads as a table, the
    transformer passes take the table into PE_LAYERNORM (a LUT step), bit-exact
    with the interpreter, through Graph.run and the emitted C on the host,
    with a smaller arena than layer by layer."""
    from pyembed import _csrc
    from pyembed.bench import _transformer_models as tm
    from pyembed.codegen.emit import write_plan_outputs
    from pyembed.passes.transformer import fuse_transformer
    from pyembed.plan import plan_graph
    model, _ = tm.build_norm_block(tokens=8, dim=16, variant="keras3_island", seed=5)
    g = load_tflite_bytes(model)
    assert "PE_LUT" in [op.type for op in g.operators] and g.unsupported == []
    layers = plan_graph(g).arena_size
    fuse_transformer(g, attention="tflm")
    assert [op.type for op in g.operators] == ["FULLY_CONNECTED", "PE_LAYERNORM", "FULLY_CONNECTED"]
    assert "PE_LUT" in g.operators[1].options["ops"]
    plan = plan_graph(g, overlaps=True)
    assert plan.arena_size < layers, (plan.arena_size, layers)
    rng = np.random.default_rng(31)
    shape = g.tensors[g.inputs[0]].shape
    xs = [rng.integers(-128, 128, shape).astype(np.int8) for _ in range(4)]
    wants = tflm(model, *xs)
    failures = [f"input {k}: {mismatches(g.run(x)[0], w, x)}" for k, (x, w) in enumerate(zip(xs, wants))
                if mismatches(g.run(x)[0], w, x)]
    assert not failures, failures
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    csrc = os.path.join(root, "csrc")
    write_plan_outputs(g, plan, tmp_path)
    r = subprocess.run(["gcc", "-std=c99", "-O1", f"-I{csrc}/include", "-I.", "model_main.c", "model_graph.c",
                        "model_data.c", *_csrc.all_sources(csrc), "-o", "model_main", "-lm"], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    for x, want in zip(xs, wants):
        out = subprocess.run([str(tmp_path / "model_main")], input=x.tobytes(), capture_output=True, check=True)
        got = np.array(out.stdout.decode().split(), dtype=np.int64).reshape(want.shape)
        assert not mismatches(got, want.astype(np.int64), x)


def test_random_islands_are_bit_exact_with_tflm():
    """Seeded fuzz: 60 islands of 1 to 4 operators drawn from every folded
    operator, random scales, zero points, constants (either side) and fused
    activations, every int8 value, against the interpreter."""
    rng = np.random.default_rng(300)
    failures = []
    for k in range(60):
        chain = []
        for _ in range(int(rng.integers(1, 5))):
            if rng.random() < 0.4:
                op = str(rng.choice(FI.BINARY))
                const = float(np.float32(rng.choice([rng.normal(0, 2), rng.uniform(-0.1, 0.1), 0.0])))
                act = rng.choice([None, "RELU", "RELU6"]) if op in OPTIONS else None
                chain.append((op, const, bool(rng.random() < 0.5), act))
            else:
                chain.append(str(rng.choice(FI.UNARY)))
        kw = dict(s_in=float(np.float32(10 ** rng.uniform(-3, 0.5))), z_in=int(rng.integers(-128, 128)),
                  s_out=float(np.float32(10 ** rng.uniform(-3, 1))), z_out=int(rng.integers(-128, 128)))
        model = island_model(chain, **kw)
        g = load_tflite_bytes(model)
        if [op.type for op in g.operators] != ["PE_LUT"]:
            failures.append(f"{chain} {kw}: not one table: {[op.type for op in g.operators]}")
            continue
        bad = mismatches(g.run(EVERY)[0], tflm(model, EVERY)[0], EVERY)
        if bad:
            failures.append(f"{chain} {kw}: {len(bad)} differ (input, pyembed, tflm): {bad}")
    assert not failures, "\n".join(failures)
