"""Float32 data movement inside int8 models (issue #30): DEQUANTIZE -> SPLIT /
STRIDED_SLICE / TRANSPOSE in float32 -> QUANTIZE, as the TFLite converter
writes an unrolled GRU's first gate SPLIT (tests/data/converter/
seq_gru_kws_split_f32.tflite). pyembed.model.float_moves moves the operator
back to int8; every output is compared with the tflite-micro interpreter's
with == (models written with pyembed.model.tflite_writer).
"""
import numpy as np
import pytest

from pyembed.model import tflite_writer as W
from pyembed.model.load import load_tflite_bytes

pytest.importorskip("tflite_micro")

S = W.schema()
B = S.BuiltinOperator


def tflm(model, x, n_out):
    from tflite_micro.python.tflite_micro import runtime
    it = runtime.Interpreter.from_bytes(model, arena_size=1 << 18)
    it.set_input(x, 0)
    it.invoke()
    return [np.array(it.get_output(k)) for k in range(n_out)]


def compare(model, x):
    g = load_tflite_bytes(model, name="moves")
    assert not g.unsupported, g.unsupported
    ours = g.run(x)
    theirs = tflm(model, x, len(g.outputs))
    assert len(ours) == len(theirs)
    bad = []
    for k, (a, b) in enumerate(zip(ours, theirs)):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape, (k, a.shape, b.shape)
        if a.dtype == np.float32:
            same = a.view(np.int32) == b.view(np.int32)
        else:
            same = a == b
        bad += [f"output {k}{list(map(int, i))}: pyembed {a[i]} TFLM {b[i]}" for i in zip(*np.nonzero(~same))]
    assert not bad, f"{len(bad)} mismatch(es):\n" + "\n".join(bad)
    return g


EVERY = np.arange(-128, 128, dtype=np.int8)


def split_model(s_out=(0.05, None, 0.05), z_out=(3, None, 3), s_in=0.05, z_in=3):
    """x[4, 192] int8 -> DEQUANTIZE -> SPLIT (3 parts, float32) -> QUANTIZE of
    the parts with an out scale (None: the part is read by nobody)."""
    t = [W.tensor((4, 192), scale=s_in, zp=z_in), W.tensor((4, 192), np.float32),
         W.tensor((), np.int32, data=np.array(-1, np.int32))]
    parts = []
    for _ in range(3):
        t.append(W.tensor((4, 64), np.float32))
        parts.append(len(t) - 1)
    ops = [W.op(B.DEQUANTIZE, [0], [1]), W.op(B.SPLIT, [2, 1], parts, "SplitOptions", numSplits=3)]
    outs = []
    for p, s, z in zip(parts, s_out, z_out):
        if s is None:
            continue
        t.append(W.tensor((4, 64), scale=s, zp=z))
        ops.append(W.op(B.QUANTIZE, [p], [len(t) - 1]))
        outs.append(len(t) - 1)
    return W.build(t, ops, [0], outs)


def _x():
    rng = np.random.default_rng(5)
    x = rng.integers(-128, 128, size=(4, 192), dtype=np.int8)
    x[0, :] = np.resize(EVERY, 192)
    x[1, :64] = EVERY[192:]
    return x


def test_float_split_back_to_the_same_quantization_is_an_int8_split():
    g = compare(split_model(), _x())
    assert g.float_moves == 1
    # the round trips went: an int8 SPLIT writes the graph outputs, no table, no float tensor
    assert [op.type for op in g.operators] == ["SPLIT"]
    assert all(g.tensors[t].dtype == np.int8 for op in g.operators for t in op.outputs)


def test_float_split_to_another_quantization_becomes_split_and_tables():
    g = compare(split_model(s_out=(0.02, 0.11, 0.05), z_out=(-7, 40, 3)), _x())
    assert g.float_moves == 1
    types = [op.type for op in g.operators]
    assert types[0] == "SPLIT" and types.count("PE_LUT") == 2, types


def test_float_strided_slice_then_logistic_is_slice_and_one_table():
    t = [W.tensor((1, 16, 16), scale=0.07, zp=-9), W.tensor((1, 16, 16), np.float32),
         W.tensor((3,), np.int32, data=np.array([0, 1, 0], np.int32)),
         W.tensor((3,), np.int32, data=np.array([1, 15, 16], np.int32)),
         W.tensor((3,), np.int32, data=np.array([1, 2, 1], np.int32)),
         W.tensor((1, 7, 16), np.float32), W.tensor((1, 7, 16), np.float32),
         W.tensor((1, 7, 16), scale=1 / 256, zp=-128)]
    ops = [W.op(B.DEQUANTIZE, [0], [1]), W.op(B.STRIDED_SLICE, [1, 2, 3, 4], [5], "StridedSliceOptions"),
           W.op(B.LOGISTIC, [5], [6]), W.op(B.QUANTIZE, [6], [7])]
    x = np.resize(EVERY, (1, 16, 16)).astype(np.int8)
    g = compare(W.build(t, ops, [0], [7]), x)
    assert [op.type for op in g.operators] == ["STRIDED_SLICE", "PE_LUT"]


def test_float_transpose_read_as_a_float_output_keeps_its_dequantize():
    t = [W.tensor((1, 8, 32), scale=0.3, zp=11), W.tensor((1, 8, 32), np.float32),
         W.tensor((3,), np.int32, data=np.array([0, 2, 1], np.int32)), W.tensor((1, 32, 8), np.float32)]
    ops = [W.op(B.DEQUANTIZE, [0], [1]), W.op(B.TRANSPOSE, [1, 2], [3])]
    x = np.resize(EVERY, (1, 8, 32)).astype(np.int8)
    g = compare(W.build(t, ops, [0], [3]), x)
    assert [op.type for op in g.operators] == ["TRANSPOSE", "DEQUANTIZE"]


def test_converter_gru_with_a_float_split_runs_in_int8():
    import os
    path = os.path.join(os.path.dirname(__file__), "data", "converter", "seq_gru_kws_split_f32.tflite")
    with open(path, "rb") as f:
        model = f.read()
    g = load_tflite_bytes(model, name="gru")
    assert g.float_moves == 1 and not g.unsupported
    assert not any(g.tensors[t].dtype == np.float32 for op in g.operators for t in op.outputs)
