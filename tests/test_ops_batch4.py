"""Issue #30's fourth batch of TFLM operators (pyembed.model.ops.batch4): FILL,
ZEROS_LIKE, SHAPE and BROADCAST_ARGS at run time, SPACE_TO_BATCH_ND,
BATCH_TO_SPACE_ND, GATHER_ND and DYNAMIC_UPDATE_SLICE against the
tflite-micro interpreter (==, one interpreter per model, reset() between
inputs), with their float64 references and refused models."""
import subprocess
import sys

import numpy as np
import pytest

from pyembed.errors import ArgumentError, ModelError
from pyembed.model import tflite_writer as W
from pyembed.model.float_ref import run_float
from pyembed.model.load import load_tflite_bytes
from pyembed.model.ops.batch4 import batch_to_space_ref, dynamic_update_slice_ref, gather_nd_ref, space_to_batch_ref

_INFO = {np.int8: (-128, 128), np.int16: (-32768, 32768), np.int32: (-(1 << 31), 1 << 31)}
S = W.schema()
B = S.BuiltinOperator


def _q(dtype, zp=3):
    return {"scale": 0.05, "zp": zp} if dtype == np.int8 else {"scale": 0.01, "zp": 0} if dtype == np.int16 else {}


def _rand(rng, shape, dtype):
    if dtype == np.float32:
        return rng.normal(0, 3, shape).astype(np.float32)
    lo, hi = _INFO[dtype]
    return rng.integers(lo, hi, shape, dtype=np.int64).astype(dtype)


class _Tflm:
    """One tflite-micro interpreter for a model, reset() between inputs; scalar inputs allowed."""

    def __init__(self, blob):
        from tflite_micro.python.tflite_micro import runtime
        self.it = runtime.Interpreter.from_bytes(blob, arena_size=1 << 18)
        self.n_out = len(S.ModelT.InitFromObj(S.Model.GetRootAs(blob, 0)).subgraphs[0].outputs)

    def __call__(self, xs):
        self.it.reset()
        for k, x in enumerate(xs):
            self.it.set_input(np.asarray(x), k)
        self.it.invoke()
        return [np.array(self.it.get_output(k)) for k in range(self.n_out)]


def _load(blob, types):
    g = load_tflite_bytes(blob, name="batch4")
    assert not g.unsupported, g.summary()
    assert [op.type for op in g.operators] == types
    return g


def _same(got, want):
    assert got.dtype == want.dtype
    assert got.shape == want.shape or got.size == want.size
    assert np.array_equal(got.reshape(want.shape), want)


# -- FILL, ZEROS_LIKE, SHAPE, BROADCAST_ARGS at run time --------------------------------------

def _fill_model(dims, dtype):
    t = [W.tensor([len(dims)], np.int32, data=np.array(dims, np.int32)), W.tensor([], dtype, **_q(dtype)),
         W.tensor(dims, dtype, **_q(dtype))]
    return W.build(t, [W.op(B.FILL, [0, 1], [2], "FillOptions")], inputs=[1], outputs=[2])


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.float32])
def test_fill_of_a_model_input_bit_exact_with_tflm(dtype):
    blob = _fill_model([2, 3, 4], dtype)
    g = _load(blob, ["FILL"])
    tflm = _Tflm(blob)
    rng = np.random.default_rng(1)
    for v in _rand(rng, (4,), dtype):
        x = np.array(v, dtype)
        got = g.run([x])[0]
        _same(got, tflm([x])[0])
        assert np.array_equal(got, np.full((2, 3, 4), v, dtype))
    f = run_float(g, [np.array(1.25)])[g.operators[0].outputs[0]]
    assert np.array_equal(f, np.full((2, 3, 4), 1.25))


def test_fill_feeding_an_operator_runs_at_run_time():
    # FILL of an input value, added to another input: the FILL cannot be folded
    t = [W.tensor([2], np.int32, data=np.array([3, 5], np.int32)), W.tensor([], np.int8, scale=0.05, zp=3),
         W.tensor([3, 5], np.int8, scale=0.05, zp=3), W.tensor([3, 5], np.int8, scale=0.05, zp=3),
         W.tensor([3, 5], np.int8, scale=0.1, zp=-2)]
    ops = [W.op(B.FILL, [0, 1], [2], "FillOptions"), W.op(B.ADD, [2, 3], [4], "AddOptions")]
    blob = W.build(t, ops, inputs=[1, 3], outputs=[4])
    g = _load(blob, ["FILL", "ADD"])
    tflm = _Tflm(blob)
    rng = np.random.default_rng(2)
    for _ in range(3):
        v, y = np.array(rng.integers(-128, 128), np.int8), _rand(rng, (3, 5), np.int8)
        _same(g.run([v, y])[0], tflm([v, y])[0])


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.float32])
def test_zeros_like_bit_exact_with_tflm(dtype):
    t = [W.tensor([2, 3, 5], dtype, **_q(dtype)), W.tensor([2, 3, 5], dtype, **_q(dtype))]
    blob = W.build(t, [W.op(B.ZEROS_LIKE, [0], [1], "ZerosLikeOptions")], inputs=[0], outputs=[1])
    g = _load(blob, ["ZEROS_LIKE"])
    x = _rand(np.random.default_rng(3), (2, 3, 5), dtype)
    got = g.run([x])[0]
    _same(got, _Tflm(blob)([x])[0])
    assert not got.any()   # raw zeros, not the zero point
    assert not run_float(g, x.astype(np.float64))[1].any()


@pytest.mark.parametrize("in_shape,in_type", [((2, 3, 4), np.int8), ((5,), np.float32), ((1, 2, 3, 4, 5, 6), np.int16)])
def test_shape_as_a_graph_output_runs_bit_exact_with_tflm(in_shape, in_type):
    t = [W.tensor(in_shape, in_type, **_q(in_type)), W.tensor([len(in_shape)], np.int32)]
    blob = W.build(t, [W.op(B.SHAPE, [0], [1], "ShapeOptions", outType=S.TensorType.INT32)], inputs=[0], outputs=[1])
    g = _load(blob, ["SHAPE"])
    x = np.zeros(in_shape, in_type)
    got = g.run([x])[0]
    _same(got, _Tflm(blob)([x])[0])
    assert list(got) == list(in_shape)
    assert list(run_float(g, x.astype(np.float64))[1]) == list(in_shape)


def test_shape_feeding_a_reshape_is_still_folded():
    t = [W.tensor([2, 6], np.int8, scale=0.1, zp=0), W.tensor([2], np.int32), W.tensor([2, 6], np.int8, scale=0.1, zp=0)]
    ops = [W.op(B.SHAPE, [0], [1], "ShapeOptions", outType=S.TensorType.INT32),
           W.op(B.RESHAPE, [0, 1], [2], "ReshapeOptions", newShape=[2, 6])]
    g = load_tflite_bytes(W.build(t, ops, inputs=[0], outputs=[2]), name="fold")
    assert [op.type for op in g.operators] == ["RESHAPE"] and "SHAPE" in g.folded


def _bargs_model(na, nb):
    t = [W.tensor([na], np.int32), W.tensor([nb], np.int32), W.tensor([max(na, nb)], np.int32)]
    return W.build(t, [W.op(B.BROADCAST_ARGS, [0, 1], [2])], inputs=[0, 1], outputs=[2])


def test_broadcast_args_at_run_time_bit_exact_with_tflm():
    cases = [([2, 1], [4, 1, 3]), ([5], [1]), ([1, 7, 1], [3, 1, 2]), ([3, 4], [3, 4]), ([0, 3], [1, 3]),
             ([1, 1, 1, 1], [6])]
    tflms = {}
    for a, b in cases:
        blob = _bargs_model(len(a), len(b))
        g = _load(blob, ["BROADCAST_ARGS"])
        tflm = tflms.setdefault((len(a), len(b)), _Tflm(blob))
        xa, xb = np.array(a, np.int32), np.array(b, np.int32)
        got = g.run([xa, xb])[0]
        _same(got, tflm([xa, xb])[0])
        assert list(got) == list(np.broadcast_shapes(tuple(a), tuple(b)))
        assert list(run_float(g, [xa.astype(float), xb.astype(float)])[2]) == list(got)


def test_broadcast_args_incompatible_is_an_error_status(tmp_path):
    blob = _bargs_model(2, 2)
    g = _load(blob, ["BROADCAST_ARGS"])
    xa, xb = np.array([2, 3], np.int32), np.array([4, 3], np.int32)
    with pytest.raises(ArgumentError, match="PE_ERR_ARG"):
        g.run([xa, xb])
    # TFLM's kernel aborts the process on these shapes (a failed TFLITE_CHECK): run it in a child
    (tmp_path / "m.tflite").write_bytes(blob)
    code = ("import sys, numpy as np; from tflite_micro.python.tflite_micro import runtime; "
            f"it = runtime.Interpreter.from_bytes(open({str(tmp_path / 'm.tflite')!r}, 'rb').read(), "
            "arena_size=1 << 16); it.set_input(np.array([2, 3], np.int32), 0); "
            "it.set_input(np.array([4, 3], np.int32), 1); it.invoke(); print('ran')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode != 0 and "ran" not in r.stdout


# -- SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND ----------------------------------------------------

def _s2b_model(in_shape, block, pads, dtype, zp=3):
    rank = len(in_shape)
    s = list(in_shape) if rank == 4 else [in_shape[0], in_shape[1], 1, in_shape[2]]
    b4, p4 = (list(block) + [1])[:2], (list(pads) + [0, 0])[:4]
    out = [s[0] * b4[0] * b4[1], (s[1] + p4[0] + p4[1]) // b4[0], (s[2] + p4[2] + p4[3]) // b4[1], s[3]]
    out = out if rank == 4 else [out[0], out[1], out[3]]
    t = [W.tensor(in_shape, dtype, **_q(dtype, zp)), W.tensor([len(block)], np.int32, data=np.array(block, np.int32)),
         W.tensor([len(block), 2], np.int32, data=np.array(pads, np.int32).reshape(-1, 2)),
         W.tensor(out, dtype, **_q(dtype, zp))]
    return W.build(t, [W.op(B.SPACE_TO_BATCH_ND, [0, 1, 2], [3], "SpaceToBatchNDOptions")], inputs=[0], outputs=[3])


def _b2s_model(in_shape, block, crops, dtype):
    rank = len(in_shape)
    s = list(in_shape) if rank == 4 else [in_shape[0], in_shape[1], 1, in_shape[2]]
    b4, c4 = (list(block) + [1])[:2], (list(crops) + [0, 0])[:4]
    out = [s[0] // (b4[0] * b4[1]), s[1] * b4[0] - c4[0] - c4[1], s[2] * b4[1] - c4[2] - c4[3], s[3]]
    out = out if rank == 4 else [out[0], out[1], out[3]]
    t = [W.tensor(in_shape, dtype, **_q(dtype)), W.tensor([len(block)], np.int32, data=np.array(block, np.int32)),
         W.tensor([len(block), 2], np.int32, data=np.array(crops, np.int32).reshape(-1, 2)),
         W.tensor(out, dtype, **_q(dtype))]
    return W.build(t, [W.op(B.BATCH_TO_SPACE_ND, [0, 1, 2], [3], "BatchToSpaceNDOptions")], inputs=[0], outputs=[3])


def _to4(a):
    return a.reshape(a.shape[0], a.shape[1], 1, a.shape[2]) if a.ndim == 3 else a


S2B_CASES = [((1, 4, 4, 1), [2, 2], [0, 0, 0, 0]), ((2, 6, 4, 3), [3, 2], [0, 0, 0, 0]),
             ((1, 3, 5, 2), [2, 2], [1, 0, 2, 1]), ((2, 5, 3, 1), [2, 3], [0, 1, 1, 2]), ((2, 4, 3), [2], [0, 0]),
             ((1, 5, 2), [3], [1, 0])]


@pytest.mark.parametrize("dtype", [np.int8, np.float32])
@pytest.mark.parametrize("case", S2B_CASES)
def test_space_to_batch_nd_bit_exact_with_tflm(case, dtype):
    in_shape, block, pads = case
    blob = _s2b_model(in_shape, block, pads, dtype)
    g = _load(blob, ["SPACE_TO_BATCH_ND"])
    x = _rand(np.random.default_rng(len(in_shape) + sum(pads)), in_shape, dtype)
    got = g.run([x])[0]
    want = _Tflm(blob)([x])[0]
    # TFLM pads with an uninitialised value (its SpaceToBatchParams.output_offset is never set): the
    # padded elements are compared with the numpy reference padded with the zero point (real 0, as
    # LiteRT pads), every element TFLM copies with TFLM.
    zp = 3 if dtype == np.int8 else 0
    b4, p4 = (list(block) + [1])[:2], (list(pads) + [0, 0])[:4]
    ref = space_to_batch_ref(_to4(x), b4, p4, zp).reshape(got.shape)
    marker = space_to_batch_ref(np.zeros(_to4(x).shape, bool), b4, p4, True).reshape(got.shape)
    assert got.dtype == want.dtype == dtype and got.shape == want.shape
    assert np.array_equal(got[~marker], want[~marker])
    assert np.array_equal(got, ref)
    if not any(pads):
        assert np.array_equal(got, want)
    f = run_float(g, x.astype(np.float64))[3]
    assert np.array_equal(f, space_to_batch_ref(_to4(x).astype(np.float64), b4, p4, 0.0).reshape(got.shape))


def test_space_to_batch_nd_pads_as_litert():
    pytest.importorskip("ai_edge_litert")
    blob = _s2b_model((1, 3, 5, 2), [2, 2], [1, 0, 2, 1], np.int8, zp=-7)
    x = _rand(np.random.default_rng(5), (1, 3, 5, 2), np.int8)
    got = load_tflite_bytes(blob, name="s2b").run([x])[0]
    assert np.array_equal(got, W.litert_run(blob, [x])[0])
    assert (got == -7).sum() >= 2 * 6   # the padded elements hold the zero point


B2S_CASES = [((4, 2, 2, 1), [2, 2], [0, 0, 0, 0]), ((12, 2, 2, 3), [3, 2], [0, 0, 0, 0]),
             ((8, 2, 3, 2), [2, 2], [1, 0, 2, 1]), ((6, 3, 2, 1), [1, 3], [0, 0, 1, 2]), ((4, 3, 2), [2], [1, 1]),
             ((3, 2, 2), [3], [0, 2])]


@pytest.mark.parametrize("dtype", [np.int8, np.float32])
@pytest.mark.parametrize("case", B2S_CASES)
def test_batch_to_space_nd_bit_exact_with_tflm(case, dtype):
    in_shape, block, crops = case
    blob = _b2s_model(in_shape, block, crops, dtype)
    g = _load(blob, ["BATCH_TO_SPACE_ND"])
    x = _rand(np.random.default_rng(len(in_shape) * 3 + sum(crops)), in_shape, dtype)
    got = g.run([x])[0]
    _same(got, _Tflm(blob)([x])[0])
    b4, c4 = (list(block) + [1])[:2], (list(crops) + [0, 0])[:4]
    assert np.array_equal(got, batch_to_space_ref(_to4(x), b4, c4).reshape(got.shape))
    f = run_float(g, x.astype(np.float64))[3]
    assert np.array_equal(f, batch_to_space_ref(_to4(x).astype(np.float64), b4, c4).reshape(got.shape))


def test_space_batch_refuse_bad_shapes():
    with pytest.raises(ModelError, match="not multiples of the block"):
        t = [W.tensor([1, 5, 4, 1], np.int8, scale=0.1, zp=0), W.tensor([2], np.int32, data=np.array([2, 2], np.int32)),
             W.tensor([2, 2], np.int32, data=np.zeros((2, 2), np.int32)), W.tensor([4, 2, 2, 1], np.int8, scale=0.1, zp=0)]
        load_tflite_bytes(W.build(t, [W.op(B.SPACE_TO_BATCH_ND, [0, 1, 2], [3], "SpaceToBatchNDOptions")],
                                  inputs=[0], outputs=[3]), name="bad")
    g = load_tflite_bytes(_s2b_model((1, 4, 4, 1), [2, 2], [0, 0, 0, 0], np.int16), name="i16")
    assert g.unsupported and "int8/float32" in g.operators[0].reason   # TFLM refuses int16 too


# -- GATHER_ND --------------------------------------------------------------------------------

def _gather_nd_model(p_shape, i_shape, dtype):
    nd = i_shape[-1]
    out = list(i_shape[:-1]) + list(p_shape[nd:])
    t = [W.tensor(p_shape, dtype, **_q(dtype)), W.tensor(i_shape, np.int32), W.tensor(out, dtype, **_q(dtype))]
    return W.build(t, [W.op(B.GATHER_ND, [0, 1], [2], "GatherNdOptions")], inputs=[0, 1], outputs=[2])


@pytest.mark.parametrize("dtype", [np.int8, np.float32])
@pytest.mark.parametrize("p_shape,i_shape", [((5, 4), (3, 1)), ((5, 4), (2, 2)), ((3, 4, 2), (2, 3, 2)),
                                             ((2, 3, 4, 5), (4, 3)), ((6,), (2, 2, 1))])
def test_gather_nd_bit_exact_with_tflm(p_shape, i_shape, dtype):
    rng = np.random.default_rng(len(p_shape) * 10 + len(i_shape))
    blob = _gather_nd_model(p_shape, i_shape, dtype)
    g = _load(blob, ["GATHER_ND"])
    tflm = _Tflm(blob)
    nd = i_shape[-1]
    for _ in range(3):
        x = _rand(rng, p_shape, dtype)
        idx = np.stack([rng.integers(0, p_shape[j], i_shape[:-1]) for j in range(nd)], axis=-1).astype(np.int32)
        got = g.run([x, idx])[0]
        _same(got, tflm([x, idx])[0])
        assert np.array_equal(got.reshape(-1), x[tuple(np.moveaxis(idx, -1, 0))].reshape(-1))
        f = run_float(g, [x.astype(np.float64), idx.astype(np.float64)])[2]
        assert np.array_equal(f.reshape(-1), x.astype(np.float64)[tuple(np.moveaxis(idx, -1, 0))].reshape(-1))


def test_gather_nd_index_checks_as_tflm():
    blob = _gather_nd_model((3, 4), (1, 2), np.int8)
    g = _load(blob, ["GATHER_ND"])
    tflm = _Tflm(blob)
    x = np.arange(12, dtype=np.int8).reshape(3, 4)
    # TFLM checks the flat position, not each index: [0, 5] and [1, -1] are inside the params
    for ix in ([[0, 5]], [[1, -1]], [[2, 3]]):
        idx = np.array(ix, np.int32)
        got = g.run([x, idx])[0]
        _same(got, tflm([x, idx])[0])
        assert np.array_equal(got, gather_nd_ref(x, idx))
    for ix in ([[2, 4]], [[-1, 3]], [[3, 0]]):
        idx = np.array(ix, np.int32)
        with pytest.raises(RuntimeError):
            tflm([x, idx])
        with pytest.raises(ArgumentError, match="PE_ERR_ARG"):
            g.run([x, idx])


def test_gather_nd_types_as_tflm():
    for dtype in (np.int16, np.int32):   # TFLM's GATHER_ND refuses these params
        g = load_tflite_bytes(_gather_nd_model((3, 4), (2, 1), dtype), name="g")
        assert g.unsupported and "int8/float32" in g.operators[0].reason
    with pytest.raises(ModelError, match="last dim 3"):
        load_tflite_bytes(_gather_nd_model((3, 4), (2, 3), np.int8), name="bad")


# -- DYNAMIC_UPDATE_SLICE ---------------------------------------------------------------------

def _dus_model(shape, u_shape, dtype):
    t = [W.tensor(shape, dtype, **_q(dtype)), W.tensor(u_shape, dtype, **_q(dtype)), W.tensor([len(shape)], np.int32),
         W.tensor(shape, dtype, **_q(dtype))]
    return W.build(t, [W.op(B.DYNAMIC_UPDATE_SLICE, [0, 1, 2], [3], "DynamicUpdateSliceOptions")],
                   inputs=[0, 1, 2], outputs=[3])


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.float32])
@pytest.mark.parametrize("shape,u_shape", [((7,), (3,)), ((3, 4), (1, 2)), ((2, 3, 4), (2, 2, 3)),
                                           ((2, 2, 3, 4), (1, 2, 1, 4)), ((1, 2, 1, 3, 2, 2), (1, 1, 1, 2, 2, 1))])
def test_dynamic_update_slice_bit_exact_with_tflm(shape, u_shape, dtype):
    rng = np.random.default_rng(len(shape))
    blob = _dus_model(shape, u_shape, dtype)
    g = _load(blob, ["DYNAMIC_UPDATE_SLICE"])
    tflm = _Tflm(blob)
    for trial in range(3):
        x, u = _rand(rng, shape, dtype), _rand(rng, u_shape, dtype)
        # in range, then negative and past the end: clamped as TFLM clamps
        start = rng.integers(-3, 6, len(shape)).astype(np.int32) if trial else np.zeros(len(shape), np.int32)
        got = g.run([x, u, start])[0]
        _same(got, tflm([x, u, start])[0])
        assert np.array_equal(got, dynamic_update_slice_ref(x, u, start))
    f = run_float(g, [x.astype(np.float64), u.astype(np.float64), start.astype(np.float64)])[3]
    assert np.array_equal(f, dynamic_update_slice_ref(x.astype(np.float64), u.astype(np.float64), start))


def test_dynamic_update_slice_refuses_an_oversized_update():
    with pytest.raises(ModelError, match="must be non-empty and fit"):
        load_tflite_bytes(_dus_model((3, 4), (4, 1), np.int8), name="bad")


# -- one Cortex-M4 firmware under QEMU ----------------------------------------------------------

def _qemu_missing():
    from pyembed.target import qemu
    return qemu.missing_tools()


def _chain_model():
    """x -> SPACE_TO_BATCH_ND (padded) -> BATCH_TO_SPACE_ND (cropping the padding away) -> GATHER_ND
    (constant indices, one of them [0, 5] read through TFLM's flat position) -> DYNAMIC_UPDATE_SLICE
    (constant update, start indices clamped on two axes)."""
    q = {"scale": 0.05, "zp": 3}

    def i32(v):
        a = np.array(v, np.int32)
        return W.tensor(list(a.shape), np.int32, data=a)
    t = [W.tensor([1, 6, 6, 4], np.int8, **q), i32([2, 2]), i32([[1, 1], [1, 1]]),
         W.tensor([4, 4, 4, 4], np.int8, **q), W.tensor([1, 6, 6, 4], np.int8, **q),
         i32([[0, 1], [0, 5], [0, 3]]), W.tensor([3, 6, 4], np.int8, **q),
         W.tensor([1, 2, 4], np.int8, data=np.arange(8, dtype=np.int8).reshape(1, 2, 4) * 9, **q),
         i32([1, 5, -3]), W.tensor([3, 6, 4], np.int8, **q)]
    ops = [W.op(B.SPACE_TO_BATCH_ND, [0, 1, 2], [3], "SpaceToBatchNDOptions"),
           W.op(B.BATCH_TO_SPACE_ND, [3, 1, 2], [4], "BatchToSpaceNDOptions"),
           W.op(B.GATHER_ND, [4, 5], [6], "GatherNdOptions"),
           W.op(B.DYNAMIC_UPDATE_SLICE, [6, 7, 8], [9], "DynamicUpdateSliceOptions")]
    return W.build(t, ops, inputs=[0], outputs=[9])


@pytest.mark.skipif(_qemu_missing() is not None, reason=str(_qemu_missing()))
def test_firmware_of_the_batch4_chain_equals_host_and_tflm(tmp_path):
    from pyembed.target.firmware import build_project, generate, run_project
    blob = _chain_model()
    g = _load(blob, ["SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND", "GATHER_ND", "DYNAMIC_UPDATE_SLICE"])
    proj = generate(g, "mps2-an386", tmp_path / "fw")
    build_project(proj.outdir)
    tflm = _Tflm(blob)
    rng = np.random.default_rng(9)
    for _ in range(2):
        x = _rand(rng, (1, 6, 6, 4), np.int8)
        want = tflm([x])[0]
        _same(g.run([x])[0], want)
        run = run_project(proj, [x])
        _same(np.asarray(run.outputs[0]).reshape(want.shape), want)
