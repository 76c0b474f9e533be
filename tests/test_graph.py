"""The graph model (pyembed.model.graph): the API other engineers code against,
the facts it carries (weights, aliases, scratch, MACs), running on plain and
planned arenas, the per-operator runtime API, and bad input of every kind
(truncated, corrupted, inconsistent files) turning into ModelError."""
import struct

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pyembed
from pyembed.data import model_path
from pyembed.errors import ArgumentError, ModelError, PyEmbedError, UnsupportedError
from pyembed.model.graph import Graph, Operator, Tensor
from pyembed.model.load import load_model, load_tflite_bytes

KWS = model_path("tiny_kws_dscnn_int8")
RESNET = model_path("tiny_ic_resnet8_int8")
SPEECH = model_path("tflm_micro_speech_int8")


@pytest.fixture(scope="module")
def kws():
    return load_model(KWS)


@pytest.fixture(scope="module")
def resnet():
    return load_model(RESNET)


def _raw_model(path):
    import tflite
    buf = open(path, "rb").read()
    return buf, tflite.Model.GetRootAs(buf, 0)


# -- the contract -----------------------------------------------------------------

def test_contract_attributes(kws):
    g = kws
    assert isinstance(g, Graph)
    assert g.name == "tiny_kws_dscnn_int8"
    assert g.source_path == KWS
    assert all(isinstance(t, Tensor) and t.index == i for i, t in enumerate(g.tensors))
    assert all(isinstance(op, Operator) and op.index == i for i, op in enumerate(g.operators))
    assert [op.type for op in g.operators] == ["CONV_2D"] + ["DEPTHWISE_CONV_2D", "CONV_2D"] * 4 + [
        "AVERAGE_POOL_2D", "RESHAPE", "FULLY_CONNECTED", "SOFTMAX"]
    assert g.inputs == [0] and len(g.outputs) == 1
    assert g.unsupported == []
    t0 = g.tensors[0]
    assert t0.shape == (1, 49, 10, 1) and t0.dtype == np.int8 and not t0.is_constant
    assert isinstance(t0.scale, np.ndarray) and isinstance(t0.zero_point, np.ndarray)
    assert t0.nbytes == 490
    w = g.tensors[g.operators[0].inputs[1]]
    assert w.is_constant and w.data.shape == w.shape and len(w.scale) == 64 and w.quant_axis == 0
    for op in g.operators:
        assert isinstance(op.params, dict) and isinstance(op.scratch_bytes, int) and isinstance(op.macs, int)
        assert op.supported
    conv = g.operators[0]
    assert conv.params["stride"] == (2, 2) and conv.params["padding"] == "SAME"
    assert conv.params["activation"] == "RELU"
    assert len(conv.params["multiplier"]) == 64 and len(conv.params["shift"]) == 64
    # pyembed.load_model is the same function
    assert pyembed.load_model is load_model


def test_weights_bytes_counts_every_constant_buffer(kws):
    """Independent count: the bytes of every non-empty buffer a tensor of
    subgraph 0 points to, read with the tflite package directly."""
    _, m = _raw_model(KWS)
    sg = m.Subgraphs(0)
    total = 0
    for i in range(sg.TensorsLength()):
        b = sg.Tensors(i).Buffer()
        if b > 0:
            total += m.Buffers(b).DataLength()
    assert kws.weights_bytes == total > 0


def test_tensors_match_the_flatbuffer(resnet):
    _, m = _raw_model(RESNET)
    sg = m.Subgraphs(0)
    assert len(resnet.tensors) == sg.TensorsLength()
    for i in range(sg.TensorsLength()):
        t = sg.Tensors(i)
        g = resnet.tensors[i]
        assert g.shape == tuple(t.ShapeAsNumpy().tolist())
        assert g.name == t.Name().decode()
        q = t.Quantization()
        if q is not None and q.ScaleLength():
            assert np.array_equal(g.scale, q.ScaleAsNumpy())
            assert np.array_equal(g.zero_point, q.ZeroPointAsNumpy())
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        assert resnet.operators[i].inputs == op.InputsAsNumpy().tolist()
        assert resnet.operators[i].outputs == op.OutputsAsNumpy().tolist()


def test_reshape_output_aliases_its_input(kws):
    reshape = next(op for op in kws.operators if op.type == "RESHAPE")
    assert kws.aliases == {reshape.outputs[0]: reshape.inputs[0]}
    lay = kws.linear_layout()
    assert lay.tensor_offsets[reshape.outputs[0]] == lay.tensor_offsets[reshape.inputs[0]]
    # no bytes of the arena are given to the alias itself
    roots = [t for t in kws.activation_tensors() if t not in kws.aliases]
    assert lay.arena_size >= sum(kws.tensors[t].nbytes for t in roots)


def test_macs_follow_the_shapes(kws):
    for op in kws.operators:
        if op.type == "CONV_2D":
            n, oh, ow, oc = kws.tensors[op.outputs[0]].shape
            _, kh, kw, ic = kws.tensors[op.inputs[1]].shape
            assert op.macs == n * oh * ow * oc * kh * kw * ic
        elif op.type == "FULLY_CONNECTED":
            o, k = kws.tensors[op.inputs[1]].shape
            assert op.macs == o * k
        elif op.type == "RESHAPE":
            assert op.macs == 0


def test_scratch_bytes_come_from_the_kernel_size_queries(kws):
    """Compare with the conv family's own Python size query (another binding
    of the same C function, reached through a different path)."""
    from pyembed.kernels import conv
    for op in kws.operators:
        if op.type in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            x = kws.tensors[op.inputs[0]].shape
            w = kws.tensors[op.inputs[1]].shape
            p = op.params
            want = conv.buffer_size(x, w, depthwise=op.type == "DEPTHWISE_CONV_2D",
                                    ch_mult=p["depth_multiplier"], stride=p["stride"],
                                    padding="same" if p["padding"] == "SAME" else "valid",
                                    dilation=p["dilation"])
            assert p["pad"] == (0, 0, 0, 0) or p["padding"] == "SAME"
            # the reverse kernel's query; the operator keeps it or runs the
            # scratch-free gather form (pyembed.model.conv_form)
            assert p["reverse_scratch"] == want > 0
            assert op.scratch_bytes == (want if p["conv_form"] == "reverse" else 0)
    assert [op.scratch_bytes for op in kws.operators if op.type in ("RESHAPE", "SOFTMAX", "FULLY_CONNECTED")] \
        == [0, 0, 0]
    pool = next(op for op in kws.operators if op.type == "AVERAGE_POOL_2D")
    assert pool.scratch_bytes > 0


def test_summary_lists_every_operator(kws):
    text = kws.summary()
    assert text.count("\n") == len(kws.operators)
    assert "FULLY_CONNECTED" in text


# -- running -----------------------------------------------------------------------

def test_keep_intermediates_returns_every_computed_tensor(kws):
    x = np.random.default_rng(3).integers(-128, 128, (1, 49, 10, 1), dtype=np.int8)
    values = kws.run(x, keep_intermediates=True)
    produced = {t for op in kws.operators for t in op.outputs}
    assert set(values) == produced | set(kws.inputs)
    assert np.array_equal(values[kws.outputs[0]], kws.run(x)[0])
    assert np.array_equal(values[kws.inputs[0]], x)
    for t, v in values.items():
        assert v.shape == kws.tensors[t].shape and v.dtype == kws.tensors[t].dtype


@pytest.mark.parametrize("search_order", [False, True])
def test_planned_arena_gives_the_same_outputs(resnet, search_order):
    from pyembed.plan import plan_graph
    plan = plan_graph(resnet, search_order=search_order)
    assert plan.arena_size < resnet.linear_layout().arena_size
    rng = np.random.default_rng(4)
    for _ in range(2):
        x = rng.integers(-128, 128, (1, 32, 32, 3), dtype=np.int8)
        plain = resnet.run(x, keep_intermediates=True)
        planned = resnet.run(x, keep_intermediates=True, plan=plan)
        assert plain.keys() == planned.keys()
        for t in plain:
            assert np.array_equal(plain[t], planned[t]), f"tensor {t} differs on the planned arena"


def test_step_by_step_runtime_with_counters(kws):
    rt = kws.compile()
    arena = rt.new_arena()
    x = np.random.default_rng(5).integers(-128, 128, (1, 49, 10, 1), dtype=np.int8)
    rt.set_input(arena, 0, x)
    for step, opi in enumerate(rt.order):
        stats = rt.invoke_op(step, arena, stats=True)
        op = kws.operators[opi]
        if op.type == "FULLY_CONNECTED":
            assert stats["macs"] == op.macs
        elif op.type in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            # the kernels skip taps that fall on padding
            assert 0 < stats["macs"] <= op.macs
            if op.params["pad"] == (0, 0, 0, 0):
                assert stats["macs"] == op.macs
    assert np.array_equal(rt.get_output(arena, 0), kws.run(x)[0])


def test_runtime_rejects_a_small_or_misaligned_arena(kws):
    rt = kws.compile()
    with pytest.raises(ArgumentError, match="at least"):
        rt.invoke_op(0, np.zeros(rt.arena_size - 1, np.uint8))
    with pytest.raises(ArgumentError, match="uint8"):
        rt.invoke_op(0, np.zeros(rt.arena_size, np.int16))
    big = np.zeros(rt.arena_size + 8, np.uint8)
    with pytest.raises(ArgumentError, match="aligned"):
        rt.invoke_op(0, big[1:1 + rt.arena_size])


def test_run_checks_its_input(kws):
    with pytest.raises(ArgumentError, match="dtype int8"):
        kws.run(np.zeros((1, 49, 10, 1), np.float32))
    with pytest.raises(ArgumentError, match="shape"):
        kws.run(np.zeros((1, 49, 11, 1), np.int8))
    with pytest.raises(ArgumentError, match="1 input"):
        kws.run([np.zeros((1, 49, 10, 1), np.int8)] * 2)
    with pytest.raises(ArgumentError, match="numpy array"):
        kws.run([[1, 2, 3]])
    # a missing batch dimension of 1 is accepted
    x = np.random.default_rng(6).integers(-128, 128, (49, 10, 1), dtype=np.int8)
    assert np.array_equal(kws.run(x)[0], kws.run(x[None])[0])


def test_rounding_argument_is_checked(kws):
    with pytest.raises(ArgumentError, match="rounding"):
        kws.run(np.zeros((1, 49, 10, 1), np.int8), rounding="nearest")


# -- bad files ----------------------------------------------------------------------

def _write(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def test_missing_file_directory_and_non_model(tmp_path):
    with pytest.raises(ModelError, match="no such file"):
        load_model(tmp_path / "absent.tflite")
    with pytest.raises(ModelError, match="directory"):
        load_model(tmp_path)
    p = _write(tmp_path, "notes.txt", b"hello, this is not a model at all\n")
    with pytest.raises(ModelError, match="notes.txt"):
        load_model(p)
    p = _write(tmp_path, "fake.tflite", b"\x00" * 64)
    with pytest.raises(ModelError, match="fake.tflite.*TFL3"):
        load_model(p)
    p = _write(tmp_path, "empty.tflite", b"")
    with pytest.raises(ModelError, match="empty.tflite"):
        load_model(p)


@pytest.mark.parametrize("keep", [8, 12, 100, 1000, 20000, 53000])
def test_truncated_file_is_a_model_error(tmp_path, keep):
    data = open(KWS, "rb").read()[:keep]
    p = _write(tmp_path, "cut.tflite", data)
    with pytest.raises(ModelError, match="cut.tflite"):
        load_model(p)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(8, 4095), st.integers(0, 255)), min_size=1, max_size=12))
def test_corrupted_bytes_never_crash(flips):
    """Byte flips in the tables part of the file: the result is a Graph
    (the damage hit data) that runs or refuses with a pyembed error, or a
    ModelError -- never another exception, never a hang."""
    data = bytearray(open(SPEECH, "rb").read())
    for pos, val in flips:
        data[pos % len(data)] = val
    try:
        g = load_tflite_bytes(bytes(data), name="corrupt")
    except ModelError as e:
        assert "corrupt" in str(e)
        return
    if not g.unsupported and g.inputs:
        t = g.tensors[g.inputs[0]]
        try:
            g.run(np.zeros(t.shape, t.dtype if t.dtype is not None else np.int8))
        except PyEmbedError:
            pass


def _patched(path, patch):
    """Copy of a model with bytes changed by patch(buf, model) -> [(offset, bytes)]."""
    import tflite
    buf = bytearray(open(path, "rb").read())
    m = tflite.Model.GetRootAs(bytes(buf), 0)
    for off, b in patch(bytes(buf), m):
        buf[off:off + len(b)] = b
    return bytes(buf)


def _vector_start(table, slot):
    o = table._tab.Offset(slot)
    assert o, "field absent"
    return table._tab.Vector(o)


def test_shape_disagreeing_with_operator_is_a_model_error(tmp_path):
    # make the first CONV_2D output 1x25x6x64 instead of 1x25x5x64
    def patch(buf, m):
        sg = m.Subgraphs(0)
        out = sg.Operators(0).Outputs(0)
        start = _vector_start(sg.Tensors(out), 4)  # Tensor.shape
        return [(start + 8, struct.pack("<i", 6))]
    p = _write(tmp_path, "badshape.tflite", _patched(KWS, patch))
    with pytest.raises(ModelError, match=r"badshape.tflite: operator 0 \(CONV_2D\).*output shape \[1, 25, 6, 64\]"):
        load_model(p)


def test_fc_weights_depth_mismatch_is_a_model_error(tmp_path):
    def patch(buf, m):
        sg = m.Subgraphs(0)
        op = sg.Operators(11)  # FULLY_CONNECTED 1x64 x [12, 64]
        start = _vector_start(sg.Tensors(op.Outputs(0)), 4)
        return [(start + 4, struct.pack("<i", 13))]
    p = _write(tmp_path, "badfc.tflite", _patched(KWS, patch))
    with pytest.raises(ModelError, match=r"operator 11 \(FULLY_CONNECTED\).*output shape"):
        load_model(p)


def test_missing_quantization_is_a_model_error(tmp_path):
    # zero the length of the input tensor's scale vector
    def patch(buf, m):
        sg = m.Subgraphs(0)
        q = sg.Tensors(0).Quantization()
        start = _vector_start(q, 8)  # QuantizationParameters.scale
        return [(start - 4, struct.pack("<I", 0))]
    p = _write(tmp_path, "noquant.tflite", _patched(KWS, patch))
    with pytest.raises(ModelError, match=r"noquant.tflite: operator 0 \(CONV_2D\): input .* no quantization"):
        load_model(p)


def test_tensor_index_out_of_range_is_a_model_error(tmp_path):
    def patch(buf, m):
        sg = m.Subgraphs(0)
        start = _vector_start(sg.Operators(3), 6)  # Operator.inputs
        return [(start, struct.pack("<i", 999))]
    p = _write(tmp_path, "badindex.tflite", _patched(KWS, patch))
    with pytest.raises(ModelError, match="refers to tensor 999"):
        load_model(p)


def test_buffer_size_disagreeing_with_shape_is_a_model_error(tmp_path):
    def patch(buf, m):
        sg = m.Subgraphs(0)
        w = sg.Tensors(sg.Operators(0).Inputs(1))
        start = _vector_start(w, 4)
        return [(start, struct.pack("<i", 32))]  # 64 -> 32 output channels
    p = _write(tmp_path, "badbuf.tflite", _patched(KWS, patch))
    with pytest.raises(ModelError, match="buffer"):
        load_model(p)


def test_unknown_operator_is_reported_not_raised(tmp_path):
    """Rename the SOFTMAX operator code to a builtin pyembed lacks (SIN):
    the load succeeds and lists it; run refuses with its name and position."""
    def patch(buf, m):
        for i in range(m.OperatorCodesLength()):
            c = m.OperatorCodes(i)
            if max(c.BuiltinCode(), c.DeprecatedBuiltinCode()) == 25:  # SOFTMAX
                out = []
                for slot, fmt in ((4, "<b"), (10, "<i")):  # deprecated_builtin_code, builtin_code
                    o = c._tab.Offset(slot)
                    if o:
                        out.append((c._tab.Pos + o, struct.pack(fmt, 66)))  # SIN
                return out
        raise AssertionError("no SOFTMAX")
    g = load_tflite_bytes(_patched(KWS, patch), name="sin")
    assert g.unsupported == [(12, "SIN")]
    with pytest.raises(UnsupportedError, match=r"#12 SIN"):
        g.run(np.zeros((1, 49, 10, 1), np.int8))


# -- the `pyembed model` commands ---------------------------------------------------

def test_model_commands(tmp_path):
    import json

    from click.testing import CliRunner

    from pyembed.cli.model import model
    r = CliRunner()
    res = r.invoke(model, ["run", "tflm_micro_speech_int8", "--runs", "2", "--check"])
    assert res.exit_code == 0, res.output
    assert res.output.count("bit-exact with TFLM (4 elements)") == 2
    res = r.invoke(model, ["info", KWS, "--json"])
    info = json.loads(res.output)
    assert info["weights_bytes"] == load_model(KWS).weights_bytes and len(info["operators"]) == 13
    from pyembed.model.tflite_writer import build, custom_op, tensor
    unsupported = tmp_path / "unsupported.tflite"   # the signal library's OverlapAdd: not implemented
    unsupported.write_bytes(build([tensor((8,), np.int16), tensor((4,), np.int16)],
                                  [custom_op("AcmeVendorFilter", [0], [1], {"frame_step": 4})], [0], [1]))
    res = r.invoke(model, ["info", str(unsupported)])
    assert res.exit_code == 0 and "unsupported: #0 CUSTOM:AcmeVendorFilter" in res.output
    res = r.invoke(model, ["run", str(unsupported)])
    assert isinstance(res.exception, UnsupportedError)
    res = r.invoke(model, ["info", "tflm_audio_preprocessor_int8"])   # the signal operators run
    assert res.exit_code == 0 and "unsupported" not in res.output


# -- the FC and element-wise kernels against a big-integer model ---------------------

def _model_requant(acc, m, s, rounding):
    import intmodel
    f = intmodel.requant if rounding == "double" else intmodel.requant_single
    return f(int(acc), int(m), int(s))


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4), st.integers(1, 40), st.integers(1, 9), st.booleans(),
       st.sampled_from(["double", "single"]), st.integers(0, 2**31 - 1), st.integers(-128, 127),
       st.integers(-128, 127))
def test_fully_connected_matches_big_int_model(batches, depth, features, per_channel, rounding, seed, zp_in, zp_out):
    from pyembed.model import runtime as ops
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (batches, depth), dtype=np.int8)
    w = rng.integers(-127, 128, (features, depth), dtype=np.int8)
    bias = rng.integers(-50000, 50000, features).astype(np.int32)
    n = features if per_channel else 1
    mult = rng.integers(1 << 30, 1 << 31, n).astype(np.int32)
    shift = rng.integers(-14, 2, n).astype(np.int32)
    lo, hi = sorted(rng.integers(-128, 128, 2).tolist())
    out = np.empty((batches, features), np.int8)
    got, counters = ops.fully_connected(x, w, bias, mult, shift, input_offset=-zp_in, output_offset=zp_out,
                                        act_min=lo, act_max=hi, rounding=rounding, out=out, stats=True)
    assert got is out
    assert counters["macs"] == batches * features * depth
    bad = []
    for b in range(batches):
        for o in range(features):
            acc = int(bias[o]) + sum((int(x[b, k]) - zp_in) * int(w[o, k]) for k in range(depth))
            q = o if per_channel else 0
            want = min(hi, max(lo, _model_requant(acc, mult[q], shift[q], rounding) + zp_out))
            if got[b, o] != want:
                bad.append(((b, o), int(got[b, o]), want))
    assert not bad, bad


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([((2, 3, 4), (3, 1)), ((1, 5), (1, 5)), ((2, 1, 3, 2), (1, 4, 1, 1)), ((6,), ())]),
       st.integers(0, 2**31 - 1), st.booleans(), st.sampled_from(["double", "single"]))
def test_add_and_mul_broadcast_match_big_int_model(shapes, seed, mul, rounding):
    from pyembed.model import runtime as ops
    from pyembed.kernels.quant import quantize_multiplier
    rng = np.random.default_rng(seed)
    sa, sb = shapes
    a = rng.integers(-128, 128, sa, dtype=np.int8)
    b = rng.integers(-128, 128, sb if sb else (1,), dtype=np.int8).reshape(sb)
    s1, s2, so = rng.uniform(0.01, 0.2, 3)
    z1, z2, zo = (int(v) for v in rng.integers(-128, 128, 3))
    p = {"input1_offset": -z1, "input2_offset": -z2, "output_offset": zo, "act_min": -128, "act_max": 127}
    if mul:
        p["output_multiplier"], p["output_shift"] = quantize_multiplier(s1 * s2 / so)
    else:
        twice = 2 * max(s1, s2)
        p["left_shift"] = 20
        p["input1_multiplier"], p["input1_shift"] = quantize_multiplier(s1 / twice)
        p["input2_multiplier"], p["input2_shift"] = quantize_multiplier(s2 / twice)
        p["output_multiplier"], p["output_shift"] = quantize_multiplier(twice / ((1 << 20) * so))
    got = ops.add(a, b, p, mul=mul, rounding=rounding)
    ab, bb = np.broadcast_arrays(a, b)
    want = np.empty(ab.shape, np.int64)
    for idx in np.ndindex(ab.shape):
        x1, x2 = int(ab[idx]) - z1, int(bb[idx]) - z2
        if mul:
            v = _model_requant(x1 * x2, p["output_multiplier"], p["output_shift"], rounding)
        else:
            r1 = _model_requant(x1 << 20, p["input1_multiplier"], p["input1_shift"], rounding)
            r2 = _model_requant(x2 << 20, p["input2_multiplier"], p["input2_shift"], rounding)
            v = _model_requant(r1 + r2, p["output_multiplier"], p["output_shift"], rounding)
        want[idx] = min(127, max(-128, v + zo))
    bad = np.argwhere(got.astype(np.int64) != want)
    assert bad.size == 0, [(tuple(i), int(got[tuple(i)]), int(want[tuple(i)])) for i in bad]


def test_kernel_wrappers_validate_arguments():
    from pyembed.model import runtime as ops
    x = np.zeros((2, 4), np.int8)
    w = np.zeros((3, 4), np.int8)
    with pytest.raises(ArgumentError, match="weights"):
        ops.fully_connected(x, w.astype(np.int16), None, [1 << 30], [0], input_offset=0, output_offset=0)
    with pytest.raises(ArgumentError, match="rows of 4"):
        ops.fully_connected(np.zeros(5, np.int8), w, None, [1 << 30], [0], input_offset=0, output_offset=0)
    with pytest.raises(ArgumentError, match="multiplier/shift"):
        ops.fully_connected(x, w, None, [1 << 30] * 2, [0] * 2, input_offset=0, output_offset=0)
    with pytest.raises(ArgumentError, match="out"):
        ops.fully_connected(x, w, None, [1 << 30], [0], input_offset=0, output_offset=0,
                            out=np.zeros((3, 3), np.int8))
    with pytest.raises(ArgumentError, match="do not broadcast"):
        ops.add(x, np.zeros(3, np.int8), {})
    with pytest.raises(ArgumentError, match="missing"):
        ops.add(x, x, {"input1_offset": 0})
