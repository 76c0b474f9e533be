"""Issue #30's fifth batch of TFLM operators (pyembed.model.ops.batch5: ADD_N,
CUMSUM, ELU, LOG_SOFTMAX, EMBEDDING_LOOKUP, int8) against the tflite-micro interpreter (==),
with their float64 references, the types TFLM refuses, and refused models."""
import numpy as np
import pytest

from pyembed.errors import ModelError, PyEmbedError
from pyembed.model import tflite_writer as W
from pyembed.model.float_ref import run_float
from pyembed.model.load import load_tflite_bytes


def _tflm(blob, xs, n=1):
    return W.tflm_run(blob, xs, n, arena_size=1 << 18)


def _check(blob, xs, name):
    g = load_tflite_bytes(blob, name=name)
    assert not g.unsupported, g.summary()
    got = g.run(xs)[0]
    want = np.asarray(_tflm(blob, xs)[0]).reshape(got.shape)
    assert got.dtype == want.dtype == np.int8
    assert np.array_equal(got, want), (got, want)
    return g, got


def _rand(rng, shape):
    return rng.integers(-128, 128, shape, dtype=np.int64).astype(np.int8)


# -- ADD_N ------------------------------------------------------------------------------------

def _add_n_model(shape, n, xq, yq):
    S = W.schema()
    t = [W.tensor(shape, np.int8, scale=xq[0], zp=xq[1]) for _ in range(n)]
    t.append(W.tensor(shape, np.int8, scale=yq[0], zp=yq[1]))
    return W.build(t, [W.op(S.BuiltinOperator.ADD_N, list(range(n)), [n], "AddNOptions")],
                   inputs=list(range(n)), outputs=[n])


@pytest.mark.parametrize("case", [((7,), 2, (0.05, 3), (0.05, 3)), ((2, 3), 2, (0.05, 3), (0.1, -5)),
                                  ((3, 4), 3, (0.02, -128), (0.07, 127)), ((2, 2, 5), 4, (0.1, 127), (0.2, 0)),
                                  ((1, 3, 3, 2), 3, (0.003, 10), (0.001, -20)), ((40,), 20, (0.01, 127), (0.5, 0))])
def test_add_n_bit_exact_with_tflm(case):
    shape, n, xq, yq = case
    rng = np.random.default_rng(n * 31 + len(shape))
    blob = _add_n_model(shape, n, xq, yq)
    xs = [_rand(rng, shape) for _ in range(n)]
    if n == 20:   # 21 terms of -255 * 2^19 pass INT32_MIN: the int32 sum wraps, as in TFLM
        xs = [np.full(shape, -128, np.int8) for _ in range(n)]
    g, got = _check(blob, xs, "add_n")
    assert [op.type for op in g.operators] == ["ADD_N"]
    real = sum((x.astype(np.float64) - xq[1]) * xq[0] for x in xs)
    f = run_float(g, [(x.astype(np.float64) - xq[1]) * xq[0] for x in xs])[g.operators[0].outputs[0]]
    assert np.allclose(f, real)
    if n < 20:
        # away from saturation the int8 result is, within a step, the real sum plus TFLM's extra
        # term: its accumulator starts from the scaled input offset (-zp * scale), not from 0
        tflm_real = real - xq[1] * xq[0]
        deq = (got.astype(np.float64) - yq[1]) * yq[0]
        inside = (tflm_real > (-128 - yq[1]) * yq[0]) & (tflm_real < (127 - yq[1]) * yq[0])
        assert np.all(np.abs(deq - tflm_real)[inside] <= yq[0])


def test_add_n_refuses_one_input():
    with pytest.raises(ModelError, match="at least 2 inputs"):   # TFLM's Prepare: num_inputs >= 2
        load_tflite_bytes(_add_n_model((4,), 1, (0.05, 0), (0.05, 0)), name="bad")


def test_add_n_refuses_mixed_quantization():
    S = W.schema()
    t = [W.tensor((4,), np.int8, scale=0.05, zp=0), W.tensor((4,), np.int8, scale=0.06, zp=0),
         W.tensor((4,), np.int8, scale=0.05, zp=0)]
    blob = W.build(t, [W.op(S.BuiltinOperator.ADD_N, [0, 1], [2], "AddNOptions")], inputs=[0, 1], outputs=[2])
    with pytest.raises(ModelError, match="input 1 is quantized"):
        load_tflite_bytes(blob, name="bad")
    with pytest.raises(RuntimeError):   # TFLM's Prepare refuses it too
        _tflm(blob, [np.zeros(4, np.int8)] * 2)


# -- CUMSUM -----------------------------------------------------------------------------------

def _cumsum_model(shape, axis, exclusive, reverse, xq, yq):
    S = W.schema()
    t = [W.tensor(shape, np.int8, scale=xq[0], zp=xq[1]), W.tensor([], np.int32, data=np.array(axis, np.int32)),
         W.tensor(shape, np.int8, scale=yq[0], zp=yq[1])]
    ops = [W.op(S.BuiltinOperator.CUMSUM, [0, 1], [2], "CumsumOptions", exclusive=exclusive, reverse=reverse)]
    return W.build(t, ops, inputs=[0], outputs=[2])


CUMSUM_CASES = [((9,), 0), ((3, 5), 1), ((3, 5), 0), ((2, 3, 4), -1), ((2, 3, 4), 1), ((2, 1, 3, 4), 2)]


@pytest.mark.parametrize("flags", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("case", CUMSUM_CASES)
def test_cumsum_bit_exact_with_tflm(case, flags):
    shape, axis = case
    excl, rev = flags
    xq, yq = (0.05, -7), (0.2, 4)
    rng = np.random.default_rng(len(shape) * 13 + axis + 2 * excl + rev)
    x = _rand(rng, shape)
    blob = _cumsum_model(shape, axis, excl, rev, xq, yq)
    g, _ = _check(blob, [x], "cumsum")
    real = (x.astype(np.float64) - xq[1]) * xq[0]
    ax = axis % len(shape)
    r = np.flip(real, ax) if rev else real
    want = np.cumsum(r, axis=ax) - (r if excl else 0)
    want = np.flip(want, ax) if rev else want
    f = run_float(g, real)[g.operators[0].outputs[0]]
    assert np.allclose(f, want)


def test_cumsum_wraps_as_tflm_over_long_axes():
    # 40 terms of -255 * 2^19 pass INT32_MIN: TFLM's int32 accumulator wraps, so does the kernel
    blob = _cumsum_model((2, 40), 1, False, False, (0.01, 127), (0.5, 0))
    x = np.full((2, 40), -128, np.int8)
    x[1, ::3] = 127
    _check(blob, [x], "cumsum")


def test_cumsum_refuses_bad_axis():
    with pytest.raises(ModelError, match="axis 2 outside a 2-D input"):
        load_tflite_bytes(_cumsum_model((3, 5), 2, False, False, (0.05, 0), (0.05, 0)), name="bad")


# -- ELU --------------------------------------------------------------------------------------

def _elu_model(shape, xq, yq):
    S = W.schema()
    t = [W.tensor(shape, np.int8, scale=xq[0], zp=xq[1]), W.tensor(shape, np.int8, scale=yq[0], zp=yq[1])]
    return W.build(t, [W.op(S.BuiltinOperator.ELU, [0], [1])], inputs=[0], outputs=[1])


@pytest.mark.parametrize("q", [((0.05, 3), (0.05, 3)), ((0.1, 0), (0.03, -100)), ((0.02, -128), (0.01, -128)),
                               ((0.25, 127), (0.08, 90)), ((1 / 64, 5), (1 / 128, -1))])
def test_elu_bit_exact_with_tflm_on_every_input(q):
    xq, yq = q
    x = np.arange(-128, 128, dtype=np.int16).astype(np.int8).reshape(4, 64)
    g, got = _check(_elu_model((4, 64), xq, yq), [x], "elu")
    assert [op.type for op in g.operators] == ["ELU"]
    real = (x.astype(np.float64) - xq[1]) * xq[0]
    ref = np.where(real < 0, np.expm1(np.minimum(real, 0)), real)
    assert np.allclose(run_float(g, real)[g.operators[0].outputs[0]], ref)
    deq = (got.astype(np.float64) - yq[1]) * yq[0]
    inside = (ref > (-128 - yq[1]) * yq[0]) & (ref < (127 - yq[1]) * yq[0])
    assert np.all(np.abs(deq - ref)[inside] <= 0.5 * yq[0] + 1e-6)


# -- LOG_SOFTMAX ------------------------------------------------------------------------------

def _log_softmax_model(shape, xq, yq=(16.0 / 256, 127)):
    S = W.schema()
    t = [W.tensor(shape, np.int8, scale=xq[0], zp=xq[1]), W.tensor(shape, np.int8, scale=yq[0], zp=yq[1])]
    return W.build(t, [W.op(S.BuiltinOperator.LOG_SOFTMAX, [0], [1], "LogSoftmaxOptions")], inputs=[0], outputs=[1])


@pytest.mark.parametrize("case", [((1, 10), (0.05, 3)), ((4, 7), (0.1, -20)), ((2, 3, 16), (0.02, 0)),
                                  ((3, 1), (0.3, 5)), ((2, 300), (0.0625, -128)), ((5, 33), (1.5, 10)),
                                  ((1, 5000), (0.01, 0))])
def test_log_softmax_bit_exact_with_tflm(case):
    shape, xq = case
    rng = np.random.default_rng(int(np.prod(shape)))
    x = _rand(rng, shape)
    if shape[-1] >= 3:   # ties at the maximum, the far end of diff_min
        x.reshape(-1, shape[-1])[0, :3] = [127, 127, -128]
    g, got = _check(_log_softmax_model(shape, xq), [x], "log_softmax")
    assert [op.type for op in g.operators] == ["LOG_SOFTMAX"]
    real = (x.astype(np.float64) - xq[1]) * xq[0]
    ref = real - real.max(-1, keepdims=True)
    ref = ref - np.log(np.exp(ref).sum(-1, keepdims=True))
    assert np.allclose(run_float(g, real)[g.operators[0].outputs[0]], ref)
    deq = (got.astype(np.float64) - 127) / 16
    inside = ref > -15.9
    assert np.all(np.abs(deq - ref)[inside] <= 2 / 16)


def test_log_softmax_every_row_pattern_of_a_small_depth():
    # all 256 values against a row of constants: each lands at every distance from the maximum
    x = np.stack([np.array([v, 0, -60, 90], np.int8) for v in range(-128, 128)])
    _check(_log_softmax_model(x.shape, (0.07, -3)), [x], "log_softmax")


def test_log_softmax_refuses_other_output_quantization():
    with pytest.raises(ModelError, match="16/256"):
        load_tflite_bytes(_log_softmax_model((2, 5), (0.05, 0), (0.1, 127)), name="bad")


# -- EMBEDDING_LOOKUP -------------------------------------------------------------------------

def _lookup_model(rows, row_shape, n, out_dtype=np.int8):
    S = W.schema()
    rng = np.random.default_rng(rows + n)
    value = _rand(rng, (rows, *row_shape))
    t = [W.tensor((n,), np.int32), W.tensor(value.shape, np.int8, scale=0.1, zp=0, data=value),
         W.tensor((n, *row_shape), out_dtype, **({"scale": 0.1, "zp": 0} if out_dtype == np.int8 else {}))]
    return W.build(t, [W.op(S.BuiltinOperator.EMBEDDING_LOOKUP, [0, 1], [2])], inputs=[0], outputs=[2]), value


@pytest.mark.parametrize("case", [(5, (3,), 2), (7, (4,), 7), (3, (2, 3), 5), (10, (2, 2, 2), 1)])
def test_embedding_lookup_bit_exact_with_tflm(case):
    rows, row_shape, n = case
    blob, value = _lookup_model(rows, row_shape, n)
    ids = np.random.default_rng(n).integers(0, rows, n).astype(np.int32)
    g, got = _check(blob, [ids], "lookup")
    assert np.array_equal(got, value[ids])
    f = run_float(g, ids.astype(np.float64))[g.operators[0].outputs[0]]
    assert np.array_equal(f, value[ids].astype(np.float64) * float(np.float32(0.1)))


def test_embedding_lookup_index_out_of_range_is_an_error():
    blob, _ = _lookup_model(5, (3,), 2)
    g = load_tflite_bytes(blob, name="lookup")
    with pytest.raises(RuntimeError):          # TFLM: "index out of bounds"
        _tflm(blob, [np.array([1, 5], np.int32)])
    with pytest.raises(PyEmbedError):          # pyembed: the kernel's PE_ERR_ARG
        g.run([np.array([1, 5], np.int32)])
    with pytest.raises(PyEmbedError):
        g.run([np.array([-1, 0], np.int32)])


def test_embedding_lookup_float_output_is_unsupported():
    blob, _ = _lookup_model(5, (3,), 2, out_dtype=np.float32)
    g = load_tflite_bytes(blob, name="hybrid")
    assert g.unsupported


# -- what TFLM itself refuses ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.int16, np.int32])
@pytest.mark.parametrize("kind", ["ADD_N", "CUMSUM", "ELU", "LOG_SOFTMAX", "FLOOR_DIV"])
def test_tflm_runs_only_int8_and_float32(kind, dtype):
    """The types left out here are refused by TFLM itself (so there is nothing to be bit-exact with)."""
    S = W.schema()
    B = S.BuiltinOperator
    t = [W.tensor((2, 3), dtype) for _ in range(3)]
    if kind == "CUMSUM":
        t[1] = W.tensor([], np.int32, data=np.array(0, np.int32))
        ops, ins = [W.op(B.CUMSUM, [0, 1], [2], "CumsumOptions")], [0]
    elif kind in ("ELU", "LOG_SOFTMAX"):
        ops, ins = [W.op(getattr(B, kind), [0], [2])], [0]
    else:
        ops, ins = [W.op(getattr(B, kind), [0, 1], [2], "AddNOptions" if kind == "ADD_N" else None)], [0, 1]
    blob = W.build(t, ops, inputs=ins, outputs=[2])
    with pytest.raises(RuntimeError):
        _tflm(blob, [np.ones((2, 3), dtype)] * len(ins))


# -- a chain of them: TFLM on the host, then a Cortex-M4 firmware under QEMU ---------------------

def _chain_model():
    """ELU -> CUMSUM (reverse) -> ADD_N (the sum twice and the ELU output: one quantization) -> LOG_SOFTMAX."""
    S = W.schema()
    B = S.BuiltinOperator
    t = [W.tensor((4, 8), np.int8, scale=0.05, zp=3), W.tensor((4, 8), np.int8, scale=0.1, zp=-20),
         W.tensor((4, 8), np.int8, scale=0.1, zp=-20), W.tensor([], np.int32, data=np.array(1, np.int32)),
         W.tensor((4, 8), np.int8, scale=0.2, zp=5), W.tensor((4, 8), np.int8, scale=1 / 16, zp=127)]
    ops = [W.op(B.ELU, [0], [1]), W.op(B.CUMSUM, [1, 3], [2], "CumsumOptions", exclusive=False, reverse=True),
           W.op(B.ADD_N, [2, 2, 1], [4], "AddNOptions"), W.op(B.LOG_SOFTMAX, [4], [5], "LogSoftmaxOptions")]
    return W.build(t, ops, inputs=[0], outputs=[5])


def test_chain_bit_exact_with_tflm():
    for seed in (1, 2):
        x = np.random.default_rng(seed).integers(-128, 128, (4, 8)).astype(np.int8)
        g, _ = _check(_chain_model(), [x], "chain")
    assert [op.type for op in g.operators] == ["ELU", "CUMSUM", "ADD_N", "LOG_SOFTMAX"]


def _qemu_missing():
    from pyembed.target import qemu
    return qemu.missing_tools()


@pytest.mark.skipif(_qemu_missing() is not None, reason=str(_qemu_missing()))
def test_chain_firmware_under_qemu(tmp_path):
    """A Cortex-M4 (mps2-an386) firmware of the chain gives the host run (== TFLM, above)."""
    from pyembed.target.firmware import build_project, generate, run_project
    g = load_tflite_bytes(_chain_model(), name="batch5_chain")
    proj = generate(g, "mps2-an386", tmp_path / "fw")
    build_project(proj.outdir)
    x = np.random.default_rng(3).integers(-128, 128, (4, 8)).astype(np.int8)
    want = g.run(x)[0]
    assert np.array_equal(want, np.asarray(_tflm(_chain_model(), [x])[0]).reshape(want.shape))
    got = np.asarray(run_project(proj, [x]).outputs[0]).reshape(want.shape)
    assert np.array_equal(got.astype(np.int64), want.astype(np.int64))
