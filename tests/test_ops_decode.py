"""TFLM's DECODE custom operator (pyembed.model.ops.decode, C pe_decode.h): LUT and
prune compressed constants decoded at run time, == the tflite-micro interpreter, with
the decoded tensor also checked against the uncompressed values the test encoded
(the encoders here are written from the format, independently of the decoders)."""
import numpy as np
import pytest

from pyembed.errors import ModelError
from pyembed.model import tflite_writer as W
from pyembed.model.float_ref import run_float
from pyembed.model.load import load_tflite_bytes


def _pack_bits(fields, width):
    """Most-significant-bit-first stream of width-bit fields, zero-padded to a byte."""
    bits = "".join(format(int(f), f"0{width}b") for f in fields)
    bits += "0" * (-len(bits) % 8)
    return np.array([int(bits[i:i + 8], 2) for i in range(0, len(bits), 8)], np.uint8)


def _dcm(kind, extra=b""):
    h = np.zeros(16, np.uint8)
    h[0], h[1], h[4] = kind, 1, 1
    h[5:5 + len(extra)] = np.frombuffer(bytes(extra), np.uint8)
    return h


def lut_encode(values, width, channels=1, alt_axis=False):
    """(encoded, ancillary) of values (1-D, dtype kept): a per-channel table of the distinct
    values (stride 2^width), one width-bit index per element."""
    values = np.asarray(values).ravel()
    n, stride = values.size, 1 << width
    ch = np.arange(n) % channels if alt_axis else np.arange(n) // (n // channels)
    tables = np.zeros((channels, stride), values.dtype)
    idx = np.zeros(n, np.int64)
    for c in range(channels):
        distinct = list(dict.fromkeys(values[ch == c].tolist()))
        assert len(distinct) <= stride
        tables[c, :len(distinct)] = distinct
        for i in np.nonzero(ch == c)[0]:
            idx[i] = distinct.index(values[i].item())
    anc = np.concatenate([_dcm(0, bytes([width, stride & 0xFF])), tables.ravel().view(np.uint8)])
    return _pack_bits(idx, width), anc


def prune_encode(values, zero_points, channels=1, alt_axis=False):
    """(encoded, ancillary): a mask bit per element (1 = kept), the kept values in order."""
    values = np.asarray(values).ravel()
    n = values.size
    ch = np.arange(n) % channels if alt_axis else np.arange(n) // (n // channels)
    keep = values != np.asarray(zero_points)[ch].astype(values.dtype)
    anc = np.concatenate([_dcm(2), values[keep].view(np.uint8)])
    return _pack_bits(keep.astype(int), 1), anc


def _decode_model(enc, anc, out):
    """DECODE(encoded, ancillary) -> graph output 0 (tensor description out); a graph needs an input,
    so an int8 input x is reshaped to output 1 beside it."""
    S = W.schema()
    t = [W.tensor((enc.size,), np.uint8, data=enc), W.tensor((anc.size,), np.uint8, data=anc), out,
         W.tensor((2, 2), np.int8, scale=0.1, zp=0), W.tensor((2,), np.int32, data=np.array([1, 4], np.int32)),
         W.tensor((1, 4), np.int8, scale=0.1, zp=0)]
    ops = [W.custom_op("TFLM_DECODE", [0, 1], [2]),
           W.op(S.BuiltinOperator.RESHAPE, [3, 4], [5], "ReshapeOptions", newShape=[1, 4])]
    return W.build(t, ops, inputs=[3], outputs=[2, 5])


_X = np.array([[1, -2], [3, -4]], np.int8)


def _run_both(blob, name):
    g = load_tflite_bytes(blob, name=name)
    assert not g.unsupported, g.summary()
    got = g.run([_X])[0]
    want = np.asarray(W.tflm_run(blob, [_X], 2, arena_size=1 << 16)[0]).reshape(got.shape)
    return g, got, want


def _same_bits(got, want):
    assert got.dtype == want.dtype
    if got.dtype == np.float32:
        got, want = got.view(np.int32), want.view(np.int32)
    assert np.array_equal(got.astype(np.int64), want.astype(np.int64)), (got, want)


def _palette_values(rng, dtype, shape, width, channels, alt_axis):
    """Random values of dtype with at most 2^width distinct ones per channel."""
    n = int(np.prod(shape))
    ch = np.arange(n) % channels if alt_axis else np.arange(n) // (n // channels)
    k = 1 << width
    if dtype == np.bool_:
        pal = rng.integers(0, 2, (channels, k)).astype(np.bool_)
    elif dtype == np.float32:
        pal = rng.standard_normal((channels, k)).astype(np.float32) * np.float32(3.5)
    else:
        info = np.iinfo(dtype)
        pal = rng.integers(info.min, info.max, (channels, k), endpoint=True, dtype=np.int64).astype(dtype)
    return pal[ch, rng.integers(0, k, n)].reshape(shape)


def _out_tensor(shape, dtype, channels, axis):
    if channels == 1 and dtype in (np.float32, np.bool_):
        return W.tensor(shape, dtype)
    return W.tensor(shape, dtype, scale=[0.02 * (c + 1) for c in range(channels)], zp=[0] * channels, axis=axis)


@pytest.mark.parametrize("width", [1, 2, 3, 4, 5, 6, 7])
@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.float32, np.bool_])
def test_lut_bit_exact_with_tflm_and_the_original(width, dtype):
    rng = np.random.default_rng(width * 10 + np.dtype(dtype).itemsize)
    for shape, channels, axis in (((37,), 1, 0), ((3, 2, 20), 3, 0), ((5, 4), 4, 1)):
        if dtype in (np.float32, np.bool_) and channels > 1:
            continue
        alt = channels > 1 and axis == len(shape) - 1
        x = _palette_values(rng, dtype, shape, width, channels, alt)
        enc, anc = lut_encode(x, width, channels, alt)
        g, got, want = _run_both(_decode_model(enc, anc, _out_tensor(shape, dtype, channels, axis)), "lut")
        _same_bits(got, want)
        _same_bits(got, x)   # the decoded tensor is the one encoded
        assert g.operators[0].type == "CUSTOM:TFLM_DECODE"


def _sparse(rng, dtype, shape, zps, channels, alt_axis, keep=0.4):
    """Random values of dtype where about 1 - keep of them are their channel's zero point."""
    n = int(np.prod(shape))
    ch = np.arange(n) % channels if alt_axis else np.arange(n) // (n // channels)
    x = _palette_values(rng, dtype, (n,), 7, 1, False)
    drop = rng.random(n) >= keep
    zp = np.asarray(zps, np.int64)[ch]
    x[drop] = zp[drop].astype(dtype) if dtype != np.bool_ else zp[drop].astype(bool)
    return x.reshape(shape)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.float32, np.bool_])
def test_prune_bit_exact_with_tflm_and_the_original(dtype):
    rng = np.random.default_rng(np.dtype(dtype).itemsize + 100)
    cases = [((45,), 1, 0, [0]), ((4, 3, 5), 4, 0, [0] * 4), ((6, 3), 3, 1, [0] * 3)]
    if dtype == np.int8:   # TFLM's per-channel int8 zero points (other types must have zero ones)
        cases += [((4, 3, 5), 4, 0, [-3, 0, 7, -128]), ((6, 3), 3, 1, [5, -1, 127]), ((33,), 1, 0, [-9])]
    for shape, channels, axis, zps in cases:
        if dtype in (np.float32, np.bool_) and channels > 1:
            continue
        alt = channels > 1 and axis == len(shape) - 1
        x = _sparse(rng, dtype, shape, zps, channels, alt)
        enc, anc = prune_encode(x, zps, channels, alt)
        if channels == 1 and dtype in (np.float32, np.bool_):
            out = W.tensor(shape, dtype)
        else:
            out = W.tensor(shape, dtype, scale=[0.05] * channels, zp=zps, axis=axis)
        g, got, want = _run_both(_decode_model(enc, anc, out), "prune")
        _same_bits(got, want)
        _same_bits(got, x)


def _fc_model(enc, anc, wq_scales, n_in, n_out):
    """FULLY_CONNECTED(x, DECODE(encoded weights), bias): TFLM's compressed-weights layout."""
    S = W.schema()
    t = [W.tensor((1, n_in), np.int8, scale=0.05, zp=-3),
         W.tensor((enc.size,), np.uint8, data=enc), W.tensor((anc.size,), np.uint8, data=anc),
         W.tensor((n_out, n_in), np.int8, scale=wq_scales, zp=[0] * len(wq_scales), axis=0),
         W.tensor((n_out,), np.int32, data=np.arange(n_out, dtype=np.int32) * 37 - 50),
         W.tensor((1, n_out), np.int8, scale=0.3, zp=4)]
    ops = [W.custom_op("TFLM_DECODE", [1, 2], [3]),
           W.op(S.BuiltinOperator.FULLY_CONNECTED, [0, 3, 4], [5], "FullyConnectedOptions")]
    return W.build(t, ops, inputs=[0], outputs=[5])


@pytest.mark.parametrize("width,channels", [(2, 1), (4, 8), (3, 8)])
def test_fully_connected_on_decoded_weights_bit_exact_with_tflm(width, channels):
    rng = np.random.default_rng(width)
    n_in, n_out = 24, 8
    w = _palette_values(rng, np.int8, (n_out, n_in), width, channels, False)
    enc, anc = lut_encode(w, width, channels, False)
    scales = [0.01 * (c + 1) for c in range(channels)] if channels > 1 else [0.02]
    blob = _fc_model(enc, anc, scales, n_in, n_out)
    g = load_tflite_bytes(blob, name="fc_decode")
    assert not g.unsupported, g.summary()
    # FULLY_CONNECTED takes constant weights only: the importer decodes them once (decode_fold)
    assert [op.type for op in g.operators] == ["FULLY_CONNECTED"] and g.decode_folded == [3]
    assert np.array_equal(g.tensors[3].data, w)
    for seed in range(3):
        x = np.random.default_rng(seed).integers(-128, 128, (1, n_in)).astype(np.int8)
        got = g.run([x])[0]
        want = np.asarray(W.tflm_run(blob, [x], 1, arena_size=1 << 16)[0]).reshape(got.shape)
        assert np.array_equal(got, want), (got, want)


def test_float_reference_is_the_dequantized_decoded_tensor():
    rng = np.random.default_rng(11)
    x = _palette_values(rng, np.int8, (3, 6), 3, 3, False)
    enc, anc = lut_encode(x, 3, 3, False)
    scales = [0.5, 0.25, 0.125]
    g = load_tflite_bytes(_decode_model(enc, anc, W.tensor((3, 6), np.int8, scale=scales, zp=[0, 0, 0], axis=0)),
                          name="ref")
    vals = run_float(g, [_X.astype(np.float64) * 0.1])
    assert np.array_equal(vals[g.operators[0].outputs[0]], x.astype(np.float64) * np.array(scales)[:, None])


def test_two_pairs_in_one_decode_bit_exact_with_tflm():
    rng = np.random.default_rng(7)
    a = _palette_values(rng, np.int16, (10,), 3, 1, False)
    b = _sparse(rng, np.int8, (2, 9), [4, -6], 2, False)
    ea, aa = lut_encode(a, 3)
    eb, ab = prune_encode(b, [4, -6], 2, False)
    S = W.schema()
    t = [W.tensor((ea.size,), np.uint8, data=ea), W.tensor((aa.size,), np.uint8, data=aa),
         W.tensor((eb.size,), np.uint8, data=eb), W.tensor((ab.size,), np.uint8, data=ab),
         W.tensor((10,), np.int16, scale=0.1, zp=0), W.tensor((2, 9), np.int8, scale=[0.1, 0.2], zp=[4, -6], axis=0),
         W.tensor((2, 2), np.int8, scale=0.1, zp=0), W.tensor((2,), np.int32, data=np.array([1, 4], np.int32)),
         W.tensor((1, 4), np.int8, scale=0.1, zp=0)]
    ops = [W.custom_op("TFLM_DECODE", [0, 1, 2, 3], [4, 5]),
           W.op(S.BuiltinOperator.RESHAPE, [6, 7], [8], "ReshapeOptions", newShape=[1, 4])]
    blob = W.build(t, ops, inputs=[6], outputs=[4, 5, 8])
    g = load_tflite_bytes(blob, name="two_pairs")
    assert not g.unsupported, g.summary()
    got = g.run([_X])
    want = W.tflm_run(blob, [_X], 3, arena_size=1 << 16)
    for k, orig in ((0, a), (1, b)):
        assert np.array_equal(got[k], np.asarray(want[k]).reshape(got[k].shape))
        assert np.array_equal(got[k], orig)


# -- refusals ------------------------------------------------------------------------------------

def _lut_case():
    x = np.arange(16, dtype=np.int8) % 4 - 2
    return lut_encode(x, 2)


def _mutated(field, value):
    enc, anc = _lut_case()
    anc = anc.copy()
    if field == "truncate":
        anc = anc[:value]
    elif field == "enc_truncate":
        enc = enc[:value]
    else:
        anc[field] = value
    return enc, anc


@pytest.mark.parametrize("field,value,message", [
    (1, 2, "DCM version 2"), (4, 0, "LUT version 0"), (0, 5, "decode type 5 is reserved"),
    (5, 0, "index width 0"), ("truncate", 12, "shorter than the 16-byte DCM header"),
    ("truncate", 18, "selects value-table entry"), ("enc_truncate", 3, "need 4"),
    (5, 7, "need 14")])
def test_malformed_ancillary_data_is_refused_at_import(field, value, message):
    enc, anc = _mutated(field, value)
    blob = _decode_model(enc, anc, W.tensor((16,), np.int8, scale=0.1, zp=0))
    with pytest.raises(ModelError, match=message):
        load_tflite_bytes(blob, name="bad")


def test_prune_mask_keeping_more_values_than_the_table_holds_is_refused():
    x = np.array([1, 0, 2, 0, 3, 0, 0, 4], np.int8)
    enc, anc = prune_encode(x, [0])
    blob = _decode_model(enc, anc[:-1], W.tensor((8,), np.int8, scale=0.1, zp=0))
    with pytest.raises(ModelError, match="keeps 4 values, the value table holds 3"):
        load_tflite_bytes(blob, name="bad_prune")


def test_int64_full_range_values_bit_exact_with_tflm():
    """int64 outputs (PE_DT_INT64): values past int32 in both halves of each 8-byte entry, so a
    kernel copying 4 of the 8 bytes, or reading int64 as two swapped words, would differ."""
    edge = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, -1, 1 << 32, -(1 << 40) + 7,
                     0x0123456789ABCDEF, 2 ** 31, -2 ** 31 - 1], np.int64)
    x = edge[np.random.default_rng(64).integers(0, 8, 21)]
    g, got, want = _run_both(_decode_model(*lut_encode(x, 3), W.tensor((21,), np.int64)), "i64_lut")
    assert g.operators[0].params["words"][1] == 7   # PE_DT_INT64
    _same_bits(got, want)
    _same_bits(got, x)
    y = np.where(np.arange(30) % 3 == 0, edge[np.arange(30) % 8], 0).astype(np.int64)
    g, got, want = _run_both(_decode_model(*prune_encode(y, [0]), W.tensor((30,), np.int64)), "i64_prune")
    _same_bits(got, want)
    _same_bits(got, y)
    # the float64 reference is the decoded tensor (exact for these small values; int64 -> float64 rounds
    # the large ones as any float64 does)
    z = np.arange(16, dtype=np.int64) % 4 - 2
    g = load_tflite_bytes(_decode_model(*lut_encode(z, 2), W.tensor((16,), np.int64)), name="i64_ref")
    vals = run_float(g, [_X.astype(np.float64) * 0.1])
    assert np.array_equal(vals[g.operators[0].outputs[0]], z.astype(np.float64))


# -- a run-time DECODE feeding ADD: TFLM on the host, then a Cortex-M4 firmware under QEMU ------------

def _add_model():
    """ADD(x, DECODE(2-bit LUT of 256 int8 values)): the decoded tensor is an arena activation."""
    S = W.schema()
    rng = np.random.default_rng(5)
    w = _palette_values(rng, np.int8, (1, 256), 2, 1, False)
    enc, anc = lut_encode(w, 2)
    t = [W.tensor((1, 256), np.int8, scale=0.05, zp=2),
         W.tensor((enc.size,), np.uint8, data=enc), W.tensor((anc.size,), np.uint8, data=anc),
         W.tensor((1, 256), np.int8, scale=0.04, zp=-1), W.tensor((1, 256), np.int8, scale=0.1, zp=3)]
    ops = [W.custom_op("TFLM_DECODE", [1, 2], [3]), W.op(S.BuiltinOperator.ADD, [0, 3], [4], "AddOptions")]
    return W.build(t, ops, inputs=[0], outputs=[4]), w, enc, anc


def test_runtime_decode_feeding_add_bit_exact_with_tflm():
    blob, w, enc, anc = _add_model()
    g = load_tflite_bytes(blob, name="decode_add")
    assert [op.type for op in g.operators] == ["CUSTOM:TFLM_DECODE", "ADD"] and not g.unsupported
    # flash keeps the encoded pair (64 + 20 bytes), the arena the 256 decoded bytes
    assert g.operators[0].params["encoded_bytes"] == enc.size + anc.size == 84
    for seed in range(3):
        x = np.random.default_rng(seed).integers(-128, 128, (1, 256)).astype(np.int8)
        got = g.run([x])[0]
        want = np.asarray(W.tflm_run(blob, [x], 1, arena_size=1 << 16)[0]).reshape(got.shape)
        assert np.array_equal(got, want)


def _qemu_missing():
    from pyembed.target import qemu
    return qemu.missing_tools()


@pytest.mark.skipif(_qemu_missing() is not None, reason=str(_qemu_missing()))
def test_runtime_decode_firmware_under_qemu(tmp_path):
    """A Cortex-M4 (mps2-an386) firmware decoding at run time gives the host run (== TFLM, above)."""
    from pyembed.target.firmware import build_project, generate, run_project
    blob, _, _, _ = _add_model()
    g = load_tflite_bytes(blob, name="decode_add")
    proj = generate(g, "mps2-an386", tmp_path / "fw")
    build_project(proj.outdir)
    x = np.random.default_rng(9).integers(-128, 128, (1, 256)).astype(np.int8)
    want = g.run([x])[0]
    assert np.array_equal(want, np.asarray(W.tflm_run(blob, [x], 1, arena_size=1 << 16)[0]).reshape(want.shape))
    got = np.asarray(run_project(proj, [x]).outputs[0]).reshape(want.shape)
    assert np.array_equal(got.astype(np.int64), want.astype(np.int64))
    # flash holds the encoded pair (64 + 20 bytes of constant data, not the 256 decoded ones);
    # the decoded tensor (3) is planned in the arena
    import re
    data_c = (proj.outdir / "model" / "model_data.c").read_text()
    m = re.search(r"pe_model_tensor_bytes\[5\] = \{\s*([^}]*)\}", data_c)
    assert m and [int(v.strip().rstrip("u")) for v in m.group(1).split(",") if v.strip()] == [0, 64, 20, 0, 0]
    assert 3 in proj.layout.tensor_offsets


def test_library_encoders_write_models_tflm_and_pyembed_decode_to_the_original():
    """pyembed.model.tflm_compress (lut_pair / prune_pair) + tflite_writer.decode_op."""
    from pyembed.model.tflm_compress import lut_pair, prune_pair
    rng = np.random.default_rng(21)
    x = _palette_values(rng, np.int16, (4, 10), 5, 4, False)
    y = _sparse(rng, np.int8, (5, 4), [3, -2, 0, 9], 4, True)
    for (enc, anc), v, out in ((lut_pair(x, 5, 4), x, W.tensor((4, 10), np.int16, scale=[0.1] * 4, zp=[0] * 4)),
                               (prune_pair(y, [3, -2, 0, 9], 4, True), y,
                                W.tensor((5, 4), np.int8, scale=[0.1] * 4, zp=[3, -2, 0, 9], axis=1))):
        S = W.schema()
        t = [W.tensor((enc.size,), np.uint8, data=enc), W.tensor((anc.size,), np.uint8, data=anc), out,
             W.tensor((2, 2), np.int8, scale=0.1, zp=0), W.tensor((2,), np.int32, data=np.array([1, 4], np.int32)),
             W.tensor((1, 4), np.int8, scale=0.1, zp=0)]
        blob = W.build(t, [W.decode_op([0, 1], [2]),
                           W.op(S.BuiltinOperator.RESHAPE, [3, 4], [5], "ReshapeOptions", newShape=[1, 4])],
                       inputs=[3], outputs=[2, 5])
        g, got, want = _run_both(blob, "lib")
        _same_bits(got, want)
        _same_bits(got, v)


@pytest.mark.skipif(_qemu_missing() is not None, reason=str(_qemu_missing()))
def test_int64_decode_firmware_under_qemu(tmp_path):
    """A Cortex-M4 (mps2-an386) firmware decoding an int64 LUT (PE_DT_INT64 in the emitted tables)
    gives TFLM's output."""
    from pyembed.target.firmware import build_project, generate, run_project
    edge = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, -1, 1 << 32, 0x0123456789ABCDEF], np.int64)
    x = edge[np.random.default_rng(65).integers(0, 5, 13)]
    blob = _decode_model(*lut_encode(x, 3), W.tensor((13,), np.int64))
    g = load_tflite_bytes(blob, name="decode_i64")
    proj = generate(g, "mps2-an386", tmp_path / "fw")
    build_project(proj.outdir)
    want = np.asarray(W.tflm_run(blob, [_X], 2, arena_size=1 << 16)[0]).ravel()
    got = np.asarray(run_project(proj, [_X]).outputs[0])
    assert got.dtype == np.int64, got.dtype     # the firmware's output read back in its type
    got = got.ravel()
    assert np.array_equal(want, x) and np.array_equal(got, want), (got, want)
