"""float32 element-wise operators in the graph (pyembed.model.ops.f32, csrc
pe_run_f32.c) against the tflite-micro interpreter: whole float32 models and
int8 models whose float island is not folded, compared as float32 BIT
PATTERNS (NaN, inf, -0 and ties included); the refusals; the planner's
float32 sizes; one Cortex-M4 firmware under QEMU."""
import numpy as np
import pytest

from pyembed.errors import ModelError, PyEmbedError, UnsupportedError
from pyembed.kernels import f32
from pyembed.model import tflite_writer as W
from pyembed.model.float_ref import run_float
from pyembed.model.load import load_tflite_bytes
from pyembed.model.support import executable_problems, require_executable

_TABLES = {"ADD": "AddOptions", "SUB": "SubOptions", "MUL": "MulOptions", "DIV": "DivOptions",
           "SQUARED_DIFFERENCE": "SquaredDifferenceOptions", "MAXIMUM": "MaximumMinimumOptions",
           "MINIMUM": "MaximumMinimumOptions", "FLOOR_DIV": "FloorDivOptions", "FLOOR_MOD": "FloorModOptions"}


def _bits(x):
    return np.ascontiguousarray(x, np.float32).view(np.int32)


def _tflm(blob, xs, arena_size=1 << 18):
    return [np.asarray(v) for v in W.tflm_run(blob, xs, arena_size=arena_size)]


def _both_nan(a, b, shape):
    """Positions where both operands of a binary operator are NaN: IEEE 754 leaves open which
    input NaN comes out, and TFLM's x86 build itself answers differently by path (same-shape ADD
    gives the first operand's NaN, broadcast ADD the second's; its FLOOR_MOD's fmod another rule).
    There only NaN-ness is compared (README: float32 element-wise operators)."""
    return np.broadcast_to(np.isnan(a), shape) & np.broadcast_to(np.isnan(b), shape)


def _same_bits(got, want, xs, loose=None):
    assert got.dtype == np.float32 and want.dtype == np.float32
    g, w = _bits(got).reshape(-1), _bits(want).reshape(-1)
    differ = g != w
    if loose is not None:
        loose = np.asarray(loose).reshape(-1)
        assert np.isnan(got.reshape(-1)[loose]).all() and np.isnan(want.reshape(-1)[loose]).all()
        differ &= ~loose
    bad = np.nonzero(differ)[0]
    assert bad.size == 0, (f"{bad.size} of {g.size} differ", [(i, got.reshape(-1)[i], want.reshape(-1)[i])
                                                               for i in bad[:8]])


def _unary_model(name, shape):
    S = W.schema()
    t = [W.tensor(shape, np.float32), W.tensor(shape, np.float32)]
    return W.build(t, [W.op(getattr(S.BuiltinOperator, name), [0], [1])], inputs=[0], outputs=[1])


def _binary_model(name, a_shape, b_shape, out_shape, activation="NONE", b_const=None):
    S = W.schema()
    b = W.tensor(b_shape, np.float32) if b_const is None else W.tensor(b_shape, np.float32, data=b_const)
    t = [W.tensor(a_shape, np.float32), b, W.tensor(out_shape, np.float32)]
    code = getattr(S.BuiltinOperator, name)
    kw = {"fusedActivationFunction": getattr(S.ActivationFunctionType, activation)} if name in f32.CLAMPED else {}
    o = W.op(code, [0, 1], [2], _TABLES.get(name), **kw)
    return W.build(t, [o], inputs=[0] if b_const is not None else [0, 1], outputs=[2])


_SPECIAL = np.array([0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.5, np.inf, -np.inf, np.nan, 1e-40, -1e-40,
                     3.4e38, -3.4e38, 1e10, -88.7, 89.0, 1e-7, 7.0, -7.0], np.float32)


def _inputs(rng, shape, special=True):
    x = (rng.standard_normal(shape) * rng.choice([0.01, 1.0, 7.0, 300.0], shape)).astype(np.float32)
    if special and x.size >= 8:   # small operands stay ordinary so that the reference check has values
        flat = x.reshape(-1)
        sp = _SPECIAL if special is True else _SPECIAL[np.isfinite(_SPECIAL)]   # "finite": no inf / NaN
        k = min(len(sp), flat.size)
        flat[:k] = rng.permutation(sp)[:k]
    return x


def _run(blob, xs, name):
    g = load_tflite_bytes(blob, name=name)
    assert not g.unsupported, g.summary()
    assert executable_problems(g) == []
    return g, g.run(xs)[0]


@pytest.mark.parametrize("name", f32.UNARY)
def test_unary_graph_bit_exact_with_tflm(name):
    rng = np.random.default_rng(sum(map(ord, name)))
    x = _inputs(rng, (4, 5, 13))
    if name in ("SQRT", "RSQRT", "LOG"):
        x[1::2] = np.abs(x[1::2])   # half of them where the function is real
    blob = _unary_model(name, x.shape)
    g, got = _run(blob, [x], name.lower())
    assert len(g.operators) == 1 and (g.operators[0].type, g.operators[0].params.get("f32")) == (name, name)
    want = _tflm(blob, [x])[0].reshape(got.shape)
    _same_bits(got, want, [x])
    # the float64 reference agrees within float32 rounding where the value is finite and moderate
    ref = run_float(g, x.astype(np.float64))[g.operators[0].outputs[0]]
    ok = np.isfinite(ref) & (np.abs(ref) < 1e30) & (np.abs(x.astype(np.float64)) < 1e4)
    if name == "LOGISTIC":   # TFLM's expf(x) below -9 is off by a factor 1 + e^x there
        ok &= x > -9
    assert ok.sum() > 100
    assert np.allclose(got[ok], ref[ok], rtol=2e-6, atol=1e-30)


_SHAPES = [((4, 5), (4, 5), (4, 5)), ((2, 3, 4), (4,), (2, 3, 4)), ((2, 1, 4), (3, 1), (2, 3, 4)),
           ((1, 2, 3, 4), (2, 1, 1, 4), (2, 2, 3, 4)), ((1,), (3, 2), (3, 2)), ((2, 3, 1, 2, 5), (2, 3, 1, 2, 5),
                                                                             (2, 3, 1, 2, 5))]


@pytest.mark.parametrize("shapes", _SHAPES, ids=lambda s: "x".join(map(str, s[2])))
@pytest.mark.parametrize("name", f32.BINARY)
def test_binary_graph_bit_exact_with_tflm(name, shapes):
    sa, sb, sy = shapes
    rng = np.random.default_rng(sum(map(ord, name)) + len(sa) * 10 + len(sb))
    a, b = _inputs(rng, sa), _inputs(rng, sb)
    if name == "FLOOR_DIV":
        b[b == 0] = 0.25   # TFLM fails on a zero divisor (test below)
    for act in (("NONE", "RELU", "RELU6", "RELU_N1_TO_1") if name in f32.CLAMPED else ("NONE",)):
        blob = _binary_model(name, sa, sb, sy, act)
        g, got = _run(blob, [a, b], name.lower())
        op = g.operators[0]
        assert op.params.get("f32") == name and op.params.get("activation") == act
        assert op.params.get("variant") in (None, f"{name}@float32")
        want = _tflm(blob, [a, b])[0].reshape(got.shape)
        _same_bits(got, want, [a, b], _both_nan(a, b, sy))
        ref = run_float(g, [a.astype(np.float64), b.astype(np.float64)])[op.outputs[0]]
        ok = np.isfinite(ref) & (np.abs(ref) < 1e30)
        ok &= np.broadcast_to((np.abs(a) < 1e4), sy) & np.broadcast_to((np.abs(b) > 1e-3) & (np.abs(b) < 1e4), sy)
        if name in ("FLOOR_DIV", "FLOOR_MOD"):
            # floor and mod jump at integer quotients: compare where the quotient is not close to one
            q = np.broadcast_to(a, sy).astype(np.float64) / np.broadcast_to(b, sy)
            ok &= np.abs(q - np.round(q)) > 1e-3
        assert ok.sum() > 0
        assert np.allclose(got[ok], ref[ok], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["FLOOR_DIV", "FLOOR_MOD"])
def test_floor_div_mod_signs_and_specials(name):
    """Every sign combination, exact and inexact quotients, the specials on either side."""
    grid = np.array([7.0, -7.0, 6.0, -6.0, 0.5, -0.5, 0.0, -0.0, 1e30, -1e30, 1e-30, np.inf, -np.inf, np.nan,
                     3.0, -3.0, 2.5, -2.5], np.float32)
    a = np.repeat(grid, grid.size)
    b = np.tile(grid, grid.size)
    if name == "FLOOR_DIV":
        keep = b != 0
        a, b = a[keep], b[keep]
    blob = _binary_model(name, a.shape, b.shape, a.shape)
    _, got = _run(blob, [a, b], name.lower())
    both = _both_nan(a, b, a.shape)
    assert both.sum() == 1   # NaN against NaN: NaN-ness only; every other pair to the bit
    _same_bits(got, _tflm(blob, [a, b])[0], [a, b], both)


def test_floor_div_by_zero_is_an_error_as_in_tflm():
    a = np.array([1.0, 2.0, 3.0], np.float32)
    for zero in (0.0, -0.0):
        b = np.array([1.0, zero, 2.0], np.float32)
        blob = _binary_model("FLOOR_DIV", (3,), (3,), (3,))
        with pytest.raises(RuntimeError):          # TFLM: "Division by 0"
            _tflm(blob, [a, b])
        g = load_tflite_bytes(blob, name="floordiv0")
        with pytest.raises(PyEmbedError):          # pyembed: the kernel's PE_ERR_ARG
            g.run([a, b])
    # a constant zero divisor is refused at load
    with pytest.raises(ModelError, match="constant zero"):
        load_tflite_bytes(_binary_model("FLOOR_DIV", (3,), (3,), (3,), b_const=np.array([1, 0, 2], np.float32)),
                          name="floordiv0c")
    # FLOOR_MOD by zero is fmodf's NaN in both
    blob = _binary_model("FLOOR_MOD", (3,), (3,), (3,))
    b = np.array([1.0, 0.0, 2.0], np.float32)
    _, got = _run(blob, [a, b], "floormod0")
    _same_bits(got, _tflm(blob, [a, b])[0], [a, b])
    assert np.isnan(got[1])


def test_constant_operand_and_a_long_float32_chain():
    """x -> SIN -> MUL(const) -> ADD(x) -> FLOOR_MOD(const) -> SQRT -> EXP -> MAXIMUM(COS(x)) -> ROUND:
    one float32 model, every intermediate a planned float32 tensor."""
    S = W.schema()
    B = S.BuiltinOperator
    shape = (3, 16)
    c1 = np.linspace(-2, 3, 16, dtype=np.float32)
    t = [W.tensor(shape, np.float32) for _ in range(9)] + [W.tensor((16,), np.float32, data=c1),
                                                           W.tensor((1,), np.float32, data=np.array([2.5], np.float32))]
    t += [W.tensor(shape, np.float32)]
    ops = [W.op(B.SIN, [0], [1]), W.op(B.MUL, [1, 9], [2], "MulOptions"), W.op(B.ADD, [2, 0], [3], "AddOptions"),
           W.op(B.FLOOR_MOD, [3, 10], [4]), W.op(B.SQRT, [4], [5]), W.op(B.EXP, [5], [6]), W.op(B.COS, [0], [7]),
           W.op(B.MAXIMUM, [6, 7], [8], "MaximumMinimumOptions"), W.op(B.ROUND, [8], [11])]
    blob = W.build(t, ops, inputs=[0], outputs=[11])
    g = load_tflite_bytes(blob, name="f32chain")
    assert executable_problems(g) == []
    for seed in range(3):
        x = _inputs(np.random.default_rng(seed), shape, special=seed == 0)
        _same_bits(g.run([x])[0], _tflm(blob, [x])[0].reshape(shape), [x])
    assert [op.type for op in g.operators] == ["SIN", "MUL", "ADD", "FLOOR_MOD", "SQRT", "EXP", "COS", "MAXIMUM",
                                               "ROUND"]


def test_planner_sizes_float32_tensors():
    """Every float32 buffer is 4 bytes per element; the planned arena runs the graph (== TFLM)."""
    from pyembed.plan import plan_graph
    S = W.schema()
    B = S.BuiltinOperator
    t = [W.tensor((2, 3, 5), np.float32) for _ in range(4)]
    blob = W.build(t, [W.op(B.SIN, [0], [1]), W.op(B.COS, [1], [2]), W.op(B.DIV, [2, 1], [3], "DivOptions")],
                   inputs=[0], outputs=[3])
    g = load_tflite_bytes(blob, name="plan")
    p = plan_graph(g)
    sizes = {tuple(b.tensors): b.size for b in p.buffers}
    assert sizes == {(0,): 120, (1,): 120, (2,): 120, (3,): 120}
    assert p.arena_size >= 3 * 120   # SIN's output lives while COS and DIV run: three at once
    x = _inputs(np.random.default_rng(2), (2, 3, 5))
    _same_bits(g.run([x])[0], _tflm(blob, [x])[0].reshape(2, 3, 5), [x])


def test_cli_accepts_a_float32_model_it_can_run():
    """pyembed plan / simulate / check take a float32 model of these operators; a float model with
    an operator the runtime cannot run in float32 keeps the one-line refusal."""
    from pyembed.cli.options import require_quantized
    from pyembed.errors import ArgumentError
    require_quantized(load_tflite_bytes(_unary_model("SIN", (8,)), name="sin"), "plan")
    S = W.schema()
    t = [W.tensor((2, 4), np.float32), W.tensor((1,), np.int32, data=np.array([1], np.int32)),
         W.tensor((2,), np.float32)]
    g = load_tflite_bytes(W.build(t, [W.op(S.BuiltinOperator.MEAN, [0, 1], [2], "ReducerOptions")], inputs=[0],
                                  outputs=[2]), name="mean")
    with pytest.raises(ArgumentError, match="a float model"):
        require_quantized(g, "plan")


# -- int8 models: islands that are not folded ----------------------------------------------------

def _two_input_island(shape=(2, 3, 8)):
    """int8 a, int8 b -> DEQUANTIZE each -> ADD -> SIN -> MUL(a) -> QUANTIZE -> int8: two int8
    inputs, so float_islands leaves it to the float32 operators."""
    S = W.schema()
    B = S.BuiltinOperator
    t = [W.tensor(shape, np.int8, scale=0.05, zp=3), W.tensor(shape, np.int8, scale=0.1, zp=-7)]
    t += [W.tensor(shape, np.float32) for _ in range(5)]
    t += [W.tensor(shape, np.int8, scale=1 / 64, zp=-2)]
    ops = [W.op(B.DEQUANTIZE, [0], [2]), W.op(B.DEQUANTIZE, [1], [3]), W.op(B.ADD, [2, 3], [4], "AddOptions"),
           W.op(B.SIN, [4], [5]), W.op(B.MUL, [5, 2], [6], "MulOptions"), W.op(B.QUANTIZE, [6], [7])]
    return W.build(t, ops, inputs=[0, 1], outputs=[7])


def test_two_input_island_runs_in_float32_bit_exact():
    blob = _two_input_island()
    g = load_tflite_bytes(blob, name="island2")
    assert not g.unsupported and executable_problems(g) == []
    assert [op.type for op in g.operators] == ["DEQUANTIZE", "DEQUANTIZE", "ADD", "SIN", "MUL", "QUANTIZE"]
    assert [op.params.get("variant") for op in g.operators[2:5:2]] == ["ADD@float32", "MUL@float32"]
    rng = np.random.default_rng(5)
    for _ in range(3):
        xs = [rng.integers(-128, 128, (2, 3, 8)).astype(np.int8) for _ in range(2)]
        got = g.run(xs)[0]
        want = _tflm(blob, xs)[0].reshape(got.shape)
        assert got.dtype == np.int8 and np.array_equal(got, want)
    # every int8 pair, against TFLM: a and b over their whole ranges
    a = np.repeat(np.arange(-128, 128, dtype=np.int64), 256).astype(np.int8).reshape(8, 8, 1024)
    b = np.tile(np.arange(-128, 128, dtype=np.int64), 256).astype(np.int8).reshape(8, 8, 1024)
    blob = _two_input_island((8, 8, 1024))
    g = load_tflite_bytes(blob, name="island2_all")
    assert np.array_equal(g.run([a, b])[0], _tflm(blob, [a, b], 1 << 23)[0].reshape(8, 8, 1024))


def test_one_input_island_still_folds_into_a_table():
    """DEQUANTIZE -> SIN -> FLOOR -> QUANTIZE with one int8 input stays one PE_LUT (a lookup per element)."""
    S = W.schema()
    B = S.BuiltinOperator
    t = [W.tensor((8, 32), np.int8, scale=0.1, zp=0), W.tensor((8, 32), np.float32),
         W.tensor((8, 32), np.float32), W.tensor((8, 32), np.float32), W.tensor((8, 32), np.int8, scale=1 / 100, zp=0)]
    ops = [W.op(B.DEQUANTIZE, [0], [1]), W.op(B.SIN, [1], [2]), W.op(B.SQUARE, [2], [3]), W.op(B.QUANTIZE, [3], [4])]
    blob = W.build(t, ops, inputs=[0], outputs=[4])
    g = load_tflite_bytes(blob, name="island1")
    assert [op.type for op in g.operators] == ["PE_LUT"]
    x = np.arange(-128, 128, dtype=np.int64).astype(np.int8).reshape(8, 32)   # every int8 value
    assert np.array_equal(g.run([x])[0], _tflm(blob, [x])[0].reshape(8, 32))


def test_float32_graph_output_of_an_int8_model():
    """int8 -> DEQUANTIZE -> EXP -> float32 output: not an island (no QUANTIZE), run in float32."""
    S = W.schema()
    B = S.BuiltinOperator
    t = [W.tensor((16,), np.int8, scale=0.07, zp=-4), W.tensor((16,), np.float32), W.tensor((16,), np.float32)]
    blob = W.build(t, [W.op(B.DEQUANTIZE, [0], [1]), W.op(B.EXP, [1], [2])], inputs=[0], outputs=[2])
    g = load_tflite_bytes(blob, name="exp_out")
    assert executable_problems(g) == []
    x = np.arange(-128, 128, 16, dtype=np.int64).astype(np.int8)
    _same_bits(g.run([x])[0], _tflm(blob, [x])[0], [x])


# -- refusals and bad input ----------------------------------------------------------------------

def test_int8_floor_is_refused_with_its_name():
    S = W.schema()
    t = [W.tensor((4,), np.int8, scale=0.1, zp=0), W.tensor((4,), np.int8, scale=0.1, zp=0)]
    g = load_tflite_bytes(W.build(t, [W.op(S.BuiltinOperator.FLOOR, [0], [1])], inputs=[0], outputs=[1]),
                          name="floor8")
    assert [k for _, k in g.unsupported] == ["FLOOR"]
    with pytest.raises(UnsupportedError, match=r"FLOOR \(int8 -> int8: input is INT8, only float32"):
        require_executable(g)


def test_float_tensor_into_an_operator_without_float32_is_still_refused():
    """DEQUANTIZE -> float32 MEAN: MEAN has no float32 form, the message names it and the tensor."""
    S = W.schema()
    B = S.BuiltinOperator
    t = [W.tensor((2, 4), np.int8, scale=0.1, zp=0), W.tensor((2, 4), np.float32),
         W.tensor((1,), np.int32, data=np.array([1], np.int32)), W.tensor((2,), np.float32),
         W.tensor((2,), np.float32)]
    ops = [W.op(B.DEQUANTIZE, [0], [1]), W.op(B.MEAN, [1, 2], [3], "ReducerOptions"), W.op(B.EXP, [3], [4])]
    g = load_tflite_bytes(W.build(t, ops, inputs=[0], outputs=[4]), name="mean_f32")
    problems = " ".join(executable_problems(g))
    assert "MEAN" in problems and "float32" in problems
    with pytest.raises(UnsupportedError):
        require_executable(g)


def test_inconsistent_models_are_model_errors():
    S = W.schema()
    t = [W.tensor((4,), np.float32), W.tensor((5,), np.float32)]
    with pytest.raises(ModelError, match=r"output shape \[5\] differs from the input shape \[4\]"):
        load_tflite_bytes(W.build(t, [W.op(S.BuiltinOperator.SIN, [0], [1])], inputs=[0], outputs=[1]), name="bad")
    with pytest.raises(ModelError, match=r"do not broadcast"):
        load_tflite_bytes(_binary_model("FLOOR_MOD", (4,), (3,), (4,)), name="bad2")
    with pytest.raises(ModelError, match=r"broadcast input shape \[2, 4\]"):
        load_tflite_bytes(_binary_model("SUB", (2, 4), (4,), (4,)), name="bad3")


def test_broadcast_beyond_4d_is_unsupported():
    g = load_tflite_bytes(_binary_model("ADD", (2, 1, 2, 1, 3), (1, 2, 1, 2, 1), (2, 2, 2, 2, 3)), name="5d")
    assert [k for _, k in g.unsupported] == ["ADD"]
    assert "at most 4-D" in g.operators[0].reason


def test_wrong_input_dtype_at_run_time_names_the_argument():
    g = load_tflite_bytes(_unary_model("COS", (4,)), name="cos")
    with pytest.raises(PyEmbedError, match="float32"):
        g.run([np.zeros(4, np.int8)])


# -- a firmware under QEMU ------------------------------------------------------------------------

# the exactly-rounded operators: IEEE float32 operations (and floor / fmod / the double division of
# FLOOR_DIV) whose result does not depend on the C library; EXP, LOG, SIN, COS call newlib's libm on
# the board, which may differ from the host's glibc by an ulp (README: float32 element-wise operators)
_EXACT_UNARY = ("ABS", "NEG", "CEIL", "FLOOR", "ROUND", "SQRT", "RSQRT", "SQUARE")


def _exact_model(n=64):
    """x, y -> every exactly-rounded float32 operator, summed in a chain; 2 outputs."""
    S = W.schema()
    B = S.BuiltinOperator
    t = [W.tensor((n,), np.float32) for _ in range(2)]
    ops = []

    def new():
        t.append(W.tensor((n,), np.float32))
        return len(t) - 1

    cur = 0
    for name in _EXACT_UNARY:
        k = new()
        ops.append(W.op(getattr(B, name), [cur if name not in ("SQRT", "RSQRT") else 1], [k]))
        j = new()
        ops.append(W.op(B.ADD, [k, cur], [j], "AddOptions"))
        cur = j
    outs = []
    for name in f32.BINARY:
        k = new()
        o = W.op(getattr(B, name), [cur, 1], [k], _TABLES[name],
                 **({"fusedActivationFunction": 0} if name in f32.CLAMPED else {}))
        ops.append(o)
        outs.append(k)
    acc = outs[0]
    for k in outs[1:]:
        j = new()
        ops.append(W.op(B.SUB, [acc, k], [j], "SubOptions"))
        acc = j
    return W.build(t, ops, inputs=[0, 1], outputs=[acc, outs[-1]])


def _qemu_missing():
    from pyembed.target import qemu
    return qemu.missing_tools()


def test_exact_model_host_bit_exact_with_tflm():
    blob = _exact_model()
    g = load_tflite_bytes(blob, name="f32_exact")
    assert executable_problems(g) == []
    rng = np.random.default_rng(11)
    x = _inputs(rng, (64,), special="finite")   # a chain would meet NaN with NaN (see _both_nan)
    y = np.abs(_inputs(rng, (64,), special=False)) + np.float32(0.5)   # positive: SQRT, RSQRT, FLOOR_DIV real
    got = g.run([x, y])
    want = _tflm(blob, [x, y])
    for a, b in zip(got, want):
        _same_bits(a, b.reshape(a.shape), [x, y])


@pytest.mark.skipif(_qemu_missing() is not None, reason=str(_qemu_missing()))
def test_exact_model_firmware_under_qemu(tmp_path):
    """A Cortex-M4F (mps2-an386, hard float) firmware gives the host's float32 bits (== TFLM, above)."""
    from pyembed.target.firmware import build_project, generate, run_project
    blob = _exact_model()
    g = load_tflite_bytes(blob, name="f32_exact")
    proj = generate(g, "mps2-an386", tmp_path / "fw")
    build_project(proj.outdir)
    rng = np.random.default_rng(12)
    x = _inputs(rng, (64,), special="finite")   # a chain would meet NaN with NaN (see _both_nan)
    y = np.abs(_inputs(rng, (64,), special=False)) + np.float32(0.5)
    want = g.run([x, y])
    got = run_project(proj, [x, y]).outputs
    for a, b in zip(got, want):
        _same_bits(np.asarray(a, np.float32).reshape(b.shape), b, [x, y])
