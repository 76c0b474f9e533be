"""Comparisons, logical operators, SELECT_V2, ARG_MAX / ARG_MIN and
REDUCE_MAX / REDUCE_MIN (operator codes 80-93, pe_logic.h) on pyembed's C
graph runtime, bit-exact (``==``) with the tflite-micro interpreter.

Models are written in-process with pyembed.model.tflite_writer. The int8
comparisons are checked on every pair of int8 values (a [256, 1] operand
against a [256] one: 65,536 broadcast elements) for several quantization
pairs, among them different scales and zero points, where TFLM rescales both
sides by their own scales and the rounding decides near-equal values.
SELECT_V2 on int32 values, which TFLM does not accept, is compared with
LiteRT's reference kernels.
"""
import itertools

import numpy as np
import pytest

from pyembed.errors import ModelError
from pyembed.model import tflite_writer as W
from pyembed.model.load import load_tflite_bytes

pytest.importorskip("tflite_micro")

S = W.schema()
RNG = np.random.default_rng(30)
COMPARISONS = ["EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL"]


def _op(name):
    return getattr(S.BuiltinOperator, name)


def _t(shape, dtype=np.int8, q=None, data=None):
    return W.tensor(shape, dtype, None if q is None else q[0], None if q is None else q[1], data)


def _check(blob, xs, ref="tflm"):
    want = W.tflm_run(blob, xs, arena_size=1 << 20)[0] if ref == "tflm" else W.litert_run(blob, xs)[0]
    g = load_tflite_bytes(blob)
    assert g.unsupported == [], g.unsupported
    got = g.run(xs if len(xs) > 1 else xs[0])[0]
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    bad = np.argwhere(got.astype(np.int64) != want.astype(np.int64))
    assert bad.size == 0, f"{len(bad)} of {want.size} differ, first {[tuple(i) for i in bad[:8]]}"
    return got


def _binary(op, sa, sb, so, dtype, qa=None, qb=None, out_dtype=np.bool_, qo=None):
    t = [_t(sa, dtype, qa), _t(sb, dtype, qb), _t(so, out_dtype, qo)]
    return W.build(t, [W.op(_op(op), [0, 1], [2])], [0, 1], [2])


def _rand(shape, dtype):
    if np.dtype(dtype) == np.bool_:
        return RNG.integers(0, 2, shape).astype(np.bool_)
    info = np.iinfo(dtype)
    x = RNG.integers(info.min, info.max + 1, shape).astype(dtype)
    x.flat[:2] = [info.min, info.max][: x.size]
    return x


# -- comparisons ------------------------------------------------------------------

# (scale, zero point) pairs: equal quantization, different scales and zero
# points, zero points at the limits, scales near 1 and tiny ones
QPAIRS = [((0.1, 3), (0.1, 3)), ((0.1, 3), (0.2, -1)), ((0.05, -128), (0.0123, 127)),
          ((0.999, 0), (0.5, 10)), ((1e-7, 5), (3e-7, -7)), ((0.02, 0), (0.02, 1))]


@pytest.mark.parametrize("op", COMPARISONS)
def test_compare_int8_every_pair(op):
    a = np.arange(-128, 128, dtype=np.int8).reshape(256, 1)
    b = np.arange(-128, 128, dtype=np.int8)
    for k, (qa, qb) in enumerate(QPAIRS):
        blob = _binary(op, (256, 1), (256,), (256, 256), np.int8, qa, qb)
        _check(blob, [a, b])
        if k < 2:   # LiteRT's reference comparisons rescale the same way
            _check(blob, [a, b], ref="litert")


@pytest.mark.parametrize("op", COMPARISONS)
def test_compare_broadcast_ranks(op):
    shapes = [((5,), (1,)), ((2, 3), (3,)), ((2, 1, 4), (3, 1)), ((2, 3, 1, 5), (1, 3, 4, 1)), ((1,), (2, 2, 2))]
    for sa, sb in shapes:
        so = np.broadcast_shapes(sa, sb)
        for dtype in (np.int8, np.int32):
            q = (0.07, -2) if dtype == np.int8 else None
            blob = _binary(op, sa, sb, so, dtype, q, (0.03, 4) if q else None)
            _check(blob, [_rand(sa, dtype), _rand(sb, dtype)])


def test_compare_int32_extremes_and_bool():
    v = np.array([-2**31, -1, 0, 1, 2**31 - 1], dtype=np.int32)
    for op in COMPARISONS:
        _check(_binary(op, (5, 1), (5,), (5, 5), np.int32), [v.reshape(5, 1), v])
    b = np.array([False, True])
    for op in ("EQUAL", "NOT_EQUAL"):
        _check(_binary(op, (2, 1), (2,), (2, 2), np.bool_), [b.reshape(2, 1), b])


def test_greater_int16_is_a_gap():
    """TFLM's GREATER lists int16, but its Prepare sets rescaling parameters
    for int8 only: the interpreter's int16 answers come from parameters it
    never set (measured: all false in one process, all true in another, 5 > -5
    included). Nothing to be bit-exact with, so pyembed refuses int16 GREATER."""
    blob = _binary("GREATER", (3, 1), (3,), (3, 3), np.int16, (0.001, 0), (0.001, 0))
    g = load_tflite_bytes(blob)
    assert [t for _, t in g.unsupported] == ["GREATER"] and "int16" in g.operators[0].reason.lower()


def test_compare_with_constant_operand():
    """x > constant, the common form (a threshold)."""
    t = [_t((4, 6), np.int8, (0.05, -3)), _t((1,), np.int8, (0.02, 0), data=np.array([25], np.int8)),
         _t((4, 6), np.bool_)]
    blob = W.build(t, [W.op(_op("GREATER_EQUAL"), [0, 1], [2])], [0], [2])
    _check(blob, [_rand((4, 6), np.int8)])


def test_compare_refusals():
    # a scale of 1 or more: TFLM's Prepare cannot rescale it
    g = load_tflite_bytes(_binary("LESS", (4,), (4,), (4,), np.int8, (1.5, 0), (0.1, 0)))
    assert [t for _, t in g.unsupported] == ["LESS"]
    op = g.operators[0]
    assert "scale 1.5" in op.reason and "below 1" in op.reason
    # int16 is GREATER's only (TFLM's types)
    g = load_tflite_bytes(_binary("LESS", (4,), (4,), (4,), np.int16, (0.1, 0), (0.1, 0)))
    assert "int16" in g.operators[0].reason.lower()
    # the output must be bool
    g = load_tflite_bytes(_binary("EQUAL", (4,), (4,), (4,), np.int8, (0.1, 0), (0.1, 0), np.int8, (0.1, 0)))
    assert "bool" in g.operators[0].reason
    # mixed input types and shapes that do not broadcast are model errors
    t = [_t((4,), np.int8, (0.1, 0)), _t((4,), np.int32), _t((4,), np.bool_)]
    with pytest.raises(ModelError, match="input 1 is int8 but input 2 is int32"):
        load_tflite_bytes(W.build(t, [W.op(_op("EQUAL"), [0, 1], [2])], [0, 1], [2]))
    with pytest.raises(ModelError, match="do not broadcast"):
        load_tflite_bytes(_binary("EQUAL", (4,), (3,), (4,), np.int32))


# -- logical operators and SELECT_V2 ----------------------------------------------

@pytest.mark.parametrize("op", ["LOGICAL_AND", "LOGICAL_OR"])
def test_logical_binary(op):
    a = np.array([False, True]).reshape(2, 1)
    b = np.array([False, True])
    _check(_binary(op, (2, 1), (2,), (2, 2), np.bool_), [a, b])
    for sa, sb in (((3, 4), (3, 4)), ((2, 1, 5), (3, 1)), ((2, 3, 4, 5), (1,))):
        so = np.broadcast_shapes(sa, sb)
        _check(_binary(op, sa, sb, so, np.bool_), [_rand(sa, np.bool_), _rand(sb, np.bool_)])


def test_logical_not():
    t = [_t((3, 5), np.bool_), _t((3, 5), np.bool_)]
    blob = W.build(t, [W.op(_op("LOGICAL_NOT"), [0], [1])], [0], [1])
    _check(blob, [_rand((3, 5), np.bool_)])


def _select(sc, sx, sy, dtype, q=(0.1, 2)):
    so = np.broadcast_shapes(sc, sx, sy)
    qq = q if dtype != np.int32 else None
    t = [_t(sc, np.bool_), _t(sx, dtype, qq), _t(sy, dtype, qq), _t(so, dtype, qq)]
    return W.build(t, [W.op(_op("SELECT_V2"), [0, 1, 2], [3])], [0, 1, 2], [3]), so


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32])
def test_select_v2(dtype):
    q = (0.1, 2) if dtype == np.int8 else (0.001, 0)
    ref = "litert" if dtype == np.int32 else "tflm"   # TFLM's SELECT_V2 takes int8 / int16 / float32
    for sc, sx, sy in (((6,), (6,), (6,)), ((2, 3), (2, 3), (3,)), ((2, 1, 4), (3, 1), (1, 4)),
                       ((1,), (2, 3, 2, 2), (2, 2)), ((2, 3, 1, 1, 2), (1, 3, 4, 1, 1), (2, 1, 1, 5, 1))):
        blob, _ = _select(sc, sx, sy, dtype, q)
        _check(blob, [_rand(sc, np.bool_), _rand(sx, dtype), _rand(sy, dtype)], ref=ref)


def test_select_v2_copies_raw_values_across_quantizations():
    """TFLM's SELECT_V2 copies raw int8 values whatever the quantization of x,
    y and the output (it never requantizes); pyembed does the same."""
    t = [_t((2, 5), np.bool_), _t((2, 5), np.int8, (0.1, 2)), _t((2, 5), np.int8, (0.3, -7)),
         _t((2, 5), np.int8, (0.05, 0))]
    blob = W.build(t, [W.op(_op("SELECT_V2"), [0, 1, 2], [3])], [0, 1, 2], [3])
    _check(blob, [_rand((2, 5), np.bool_), _rand((2, 5), np.int8), _rand((2, 5), np.int8)])


def test_comparison_chain_with_bool_intermediates():
    """LESS -> LOGICAL_NOT -> SELECT_V2: bool tensors planned in the arena between operators."""
    t = [_t((4, 8), np.int8, (0.05, 1)), _t((4, 8), np.int8, (0.08, -5)), _t((4, 8), np.bool_),
         _t((4, 8), np.bool_), _t((4, 8), np.int8, (0.05, 1))]
    ops = [W.op(_op("LESS"), [0, 1], [2]), W.op(_op("LOGICAL_NOT"), [2], [3]),
           W.op(_op("SELECT_V2"), [3, 0, 1], [4])]
    blob = W.build(t, ops, [0, 1], [4])
    _check(blob, [_rand((4, 8), np.int8), _rand((4, 8), np.int8)])


# -- ARG_MAX / ARG_MIN -------------------------------------------------------------

def _arg(op, shape, axis):
    rank = len(shape)
    out = tuple(d for k, d in enumerate(shape) if k != axis % rank)
    t = [_t(shape, np.int8, (0.1, 0)), _t((1,), np.int32, data=np.array([axis], np.int32)), _t(out, np.int32)]
    return W.build(t, [W.op(_op(op), [0, 1], [2], "ArgMaxOptions" if op == "ARG_MAX" else "ArgMinOptions",
                            outputType=S.TensorType.INT32)], [0], [2])


@pytest.mark.parametrize("op", ["ARG_MAX", "ARG_MIN"])
def test_arg_minmax(op):
    for shape in ((7,), (3, 5), (2, 3, 4), (2, 3, 4, 5)):
        for axis in range(-len(shape), len(shape)):
            blob = _arg(op, shape, axis)
            _check(blob, [_rand(shape, np.int8)])
            # few distinct values: ties, where the first index wins
            _check(blob, [RNG.integers(-1, 2, shape).astype(np.int8)])


def test_arg_minmax_refusals():
    """TFLM's ARG_MAX / ARG_MIN take an int32 axis and write int32 only (an
    int64 output is refused by its Eval); a computed axis is not supported."""
    t = [_t((3, 4), np.int8, (0.1, 0)), _t((1,), np.int32, data=np.array([1], np.int32)), _t((3,), np.int64)]
    g = load_tflite_bytes(W.build(t, [W.op(_op("ARG_MAX"), [0, 1], [2], "ArgMaxOptions",
                                           outputType=S.TensorType.INT64)], [0], [2]))
    assert [t for _, t in g.unsupported] == ["ARG_MAX"] and "int64" in g.operators[0].reason.lower()
    t = [_t((3, 4), np.int8, (0.1, 0)), _t((1,), np.int32), _t((3,), np.int32)]
    g = load_tflite_bytes(W.build(t, [W.op(_op("ARG_MIN"), [0, 1], [2])], [0, 1], [2]))
    assert "non-constant axis" in g.operators[0].reason
    t = [_t((3, 4), np.int8, (0.1, 0)), _t((1,), np.int32, data=np.array([2], np.int32)), _t((3,), np.int32)]
    with pytest.raises(ModelError, match="axis 2 is out of range"):
        load_tflite_bytes(W.build(t, [W.op(_op("ARG_MIN"), [0, 1], [2])], [0], [2]))


# -- REDUCE_MAX / REDUCE_MIN -------------------------------------------------------

def _reduce(op, shape, axes, keep, q=(0.1, -3), qo=None):
    axes_r = {a % len(shape) for a in axes}
    out = tuple(1 if k in axes_r else d for k, d in enumerate(shape)) if keep else \
        tuple(d for k, d in enumerate(shape) if k not in axes_r)
    t = [_t(shape, np.int8, q), _t((len(axes),), np.int32, data=np.array(axes, np.int32)), _t(out, np.int8, qo or q)]
    return W.build(t, [W.op(_op(op), [0, 1], [2], "ReducerOptions", keepDims=keep)], [0], [2])


@pytest.mark.parametrize("op", ["REDUCE_MAX", "REDUCE_MIN"])
def test_reduce_minmax(op):
    for shape in ((6,), (3, 4), (2, 3, 4), (2, 3, 2, 3)):
        x = _rand(shape, np.int8)
        rank = len(shape)
        for n in range(1, rank + 1):
            for axes in itertools.combinations(range(rank), n):
                for keep in (False, True):
                    _check(_reduce(op, shape, list(axes), keep), [x])
    _check(_reduce(op, (2, 3, 4), [-1, 0], True), [_rand((2, 3, 4), np.int8)])


def test_reduce_minmax_needs_equal_quantization():
    with pytest.raises(ModelError, match="output quantized as the input"):
        load_tflite_bytes(_reduce("REDUCE_MAX", (2, 3), [1], False, qo=(0.2, -3)))


# -- float64 reference ---------------------------------------------------------------

def test_float_reference():
    """The float64 reference of each operator from real values (comparisons of
    the dequantized inputs; indices; real maxima)."""
    from pyembed.model.float_ref import dequantize, run_float
    blob = _binary("GREATER", (4, 1), (4,), (4, 4), np.int8, (0.1, 0), (0.2, 0))
    g = load_tflite_bytes(blob)
    a = np.array([-10, 0, 5, 20], np.int8).reshape(4, 1)
    b = np.array([-5, 0, 3, 10], np.int8)
    real = run_float(g, [dequantize(g.tensors[g.inputs[0]], a), dequantize(g.tensors[g.inputs[1]], b)])
    want = (a.astype(np.float64) * 0.1 > b.astype(np.float64) * 0.2).astype(np.float64)
    assert np.array_equal(real[g.outputs[0]], want)
    g = load_tflite_bytes(_arg("ARG_MAX", (2, 3, 4), 1))
    x = _rand((2, 3, 4), np.int8)
    real = run_float(g, dequantize(g.tensors[g.inputs[0]], x))
    assert np.array_equal(real[g.outputs[0]], np.argmax(x, axis=1).astype(np.float64))
    g = load_tflite_bytes(_reduce("REDUCE_MIN", (2, 3, 4), [0, 2], False))
    real = run_float(g, dequantize(g.tensors[g.inputs[0]], x))
    assert np.allclose(real[g.outputs[0]], (x.astype(np.float64) + 3).min(axis=(0, 2)) * 0.1)


# -- emitted C and firmware ---------------------------------------------------------

def _chain_model():
    """x [4, 8] int8 -> LESS(x, constant row) -> LOGICAL_NOT -> SELECT_V2(., x,
    constant column) -> REDUCE_MAX over axis 1 -> [4] int8, and ARG_MIN of x
    along axis 1 -> [4] int32; the bool tensors live in the arena."""
    q = (0.05, 1)
    t = [_t((4, 8), np.int8, q), _t((8,), np.int8, (0.08, -5), data=RNG.integers(-128, 128, 8)),
         _t((4, 8), np.bool_), _t((4, 8), np.bool_), _t((4, 1), np.int8, q, data=np.array([[-100], [0], [50], [127]])),
         _t((4, 8), np.int8, q), _t((1,), np.int32, data=np.array([1], np.int32)), _t((4,), np.int8, q),
         _t((4,), np.int32)]
    ops = [W.op(_op("LESS"), [0, 1], [2]), W.op(_op("LOGICAL_NOT"), [2], [3]),
           W.op(_op("SELECT_V2"), [3, 0, 4], [5]), W.op(_op("REDUCE_MAX"), [5, 6], [7], "ReducerOptions", keepDims=False),
           W.op(_op("ARG_MIN"), [0, 6], [8], "ArgMinOptions", outputType=S.TensorType.INT32)]
    return W.build(t, ops, [0], [7, 8])


def test_chain_two_outputs_equals_tflm():
    blob = _chain_model()
    g = load_tflite_bytes(blob)
    assert g.unsupported == []
    for seed in range(3):
        x = np.random.default_rng(seed).integers(-128, 128, (4, 8)).astype(np.int8)
        want = W.tflm_run(blob, [x], arena_size=1 << 20)
        got = g.run(x)
        for w, o in zip(want, got):
            assert w.dtype == o.dtype and np.array_equal(w, o)


def test_emitted_c_program_runs_the_chain(tmp_path):
    """The generated C tables (bool tensors as PE_DT_BOOL) built into the host
    program give Graph.run's first output."""
    import os
    import shutil
    import subprocess

    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    from pyembed import _csrc
    from pyembed.codegen.emit import write_plan_outputs
    from pyembed.plan import plan_graph
    csrc = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "csrc")
    g = load_tflite_bytes(_chain_model())
    write_plan_outputs(g, plan_graph(g), tmp_path)
    assert "PE_DT_BOOL" in (tmp_path / "model_graph.c").read_text()
    r = subprocess.run(["gcc", "-std=c99", "-O1", f"-I{csrc}/include", "-I.", "model_main.c", "model_graph.c",
                        "model_data.c", *_csrc.all_sources(csrc), "-o", "model_main", "-lm"], check=False, cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    x = np.random.default_rng(5).integers(-128, 128, (4, 8)).astype(np.int8)
    out = subprocess.run([str(tmp_path / "model_main")], input=x.tobytes(), capture_output=True, check=True)
    got = np.array(out.stdout.decode().split(), dtype=np.int64)
    assert np.array_equal(got, g.run(x)[0].ravel().astype(np.int64))


def _qemu_missing():
    from pyembed.target import qemu
    return qemu.missing_tools()


@pytest.mark.skipif(_qemu_missing() is not None, reason=str(_qemu_missing()))
def test_firmware_runs_the_chain_under_qemu(tmp_path):
    """One Cortex-M4 (mps2-an386) firmware of the chain: both outputs (int8
    maxima, int32 indices) equal the host run (== TFLM, above) on two inputs."""
    from pyembed.target.firmware import build_project, generate, run_project
    g = load_tflite_bytes(_chain_model(), name="logic_chain")
    proj = generate(g, "mps2-an386", tmp_path / "fw")
    build_project(proj.outdir)
    for seed in (7, 8):
        x = np.random.default_rng(seed).integers(-128, 128, (4, 8)).astype(np.int8)
        run = run_project(proj, [x])
        want = g.run(x)
        for k in range(2):
            got = np.asarray(run.outputs[k]).reshape(want[k].shape)
            assert np.array_equal(got.astype(np.int64), want[k].astype(np.int64)), (seed, k, got, want[k])
