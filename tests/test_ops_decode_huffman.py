"""The Huffman decode type of TFLM's DECODE (pyembed.model.ops.decode_huffman, C
pe_decode_huffman.c): == the tflite-micro interpreter and == the values encoded,
on several value distributions, first-lookup / sub-table sizes, 16- and 32-bit
table entries and int8 / int16 outputs; malformed tables and streams refused at
import naming the field; one Cortex-M4 firmware run under QEMU.

The encoder here is written from the table format (a Huffman code from the
value counts, canonical codewords, lookup tables with sub-tables for the longer
codes), independently of both decoders."""
import heapq
import re

import numpy as np
import pytest

from pyembed.errors import ModelError
from pyembed.model import tflite_writer as W
from pyembed.model.float_ref import run_float
from pyembed.model.load import load_tflite_bytes


def code_lengths(values):
    """{value: code length} of a Huffman code for values' counts (a lone value gets 1 bit)."""
    uniq, counts = np.unique(np.asarray(values).ravel(), return_counts=True)
    syms = [u.item() for u in uniq]
    if len(syms) == 1:
        return {syms[0]: 1}
    heap = [(int(c), k, [s]) for k, (s, c) in enumerate(zip(syms, counts))]
    heapq.heapify(heap)
    depth, tie = dict.fromkeys(syms, 0), len(heap)
    while len(heap) > 1:
        c1, _, a = heapq.heappop(heap)
        c2, _, b = heapq.heappop(heap)
        for s in a + b:
            depth[s] += 1
        heapq.heappush(heap, (c1 + c2, tie, a + b))
        tie += 1
    return depth


def canonical_codes(lengths):
    """{value: codeword bit string}: canonical codewords, shorter first."""
    code, prev, out = 0, 0, {}
    for s, n in sorted(lengths.items(), key=lambda kv: (kv[1], kv[0])):
        code <<= n - prev
        out[s] = format(code, f"0{n}b")
        code += 1
        prev = n
    return out


def lookup_tables(codes, first_bits, sub_bits, wide, junk=0):
    """Entry words: a first table indexed by first_bits stream bits; a prefix shared by longer
    codes points to a sub-table indexed by the next min(longest rest, sub_bits) bits, and so on.
    junk is OR-ed into the symbol value field above the output's bits (decoders ignore it)."""
    found, shift, vmask = (1 << 31, 27, (1 << 27) - 1) if wide else (1 << 15, 11, (1 << 11) - 1)
    words = []

    def symbol(value, used):
        assert 0 <= used <= 15
        return found | (used << shift) | (((value & (0xFFFF if wide else 0xFF)) | junk) & vmask)

    def table(rest, width):
        base = len(words)
        words.extend([None] * (1 << width))
        deeper = []
        for idx in range(1 << width):
            p = format(idx, f"0{width}b")
            hit = [(s, r) for s, r in rest if len(r) <= width and p.startswith(r)]
            if hit:
                words[base + idx] = symbol(hit[0][0], len(hit[0][1]))
                continue
            longer = [(s, r[width:]) for s, r in rest if len(r) > width and r.startswith(p)]
            if longer:
                deeper.append((base + idx, longer))
            else:   # a prefix no code starts with (a one-value code): never reached
                words[base + idx] = symbol(rest[0][0], width)
        for at, longer in deeper:
            w = min(max(len(r) for _, r in longer), sub_bits)
            assert len(words) - at <= vmask
            words[at] = ((w - 1) << shift) | (len(words) - at)
            table(longer, w)

    table(list(codes.items()), first_bits)
    return words


def huffman_encode(values, first_bits=3, sub_bits=4, wide=False, junk=0, pad_to=32):
    """(encoded, ancillary, codes) of values (int8 / int16): the codeword stream most significant
    bit first, zero-padded to pad_to bits (TFLM reads it in 32-bit words), then the tables."""
    values = np.asarray(values).ravel()
    codes = canonical_codes(code_lengths(values))
    words = lookup_tables({int(k): v for k, v in codes.items()}, first_bits, sub_bits, wide, junk)
    bits = "".join(codes[v.item()] for v in values)
    bits += "0" * (-len(bits) % pad_to)
    enc = np.array([int(bits[i:i + 8], 2) for i in range(0, len(bits), 8)], np.uint8)
    head = np.zeros(16, np.uint8)
    head[0], head[1], head[4], head[5] = 1, 1, 1, ((first_bits - 1) << 4) | int(wide)
    return enc, np.concatenate([head, np.array(words, "<u4" if wide else "<u2").view(np.uint8)]), codes


def _decode_model(enc, anc, out):
    """DECODE(encoded, ancillary) -> graph output 0, with an int8 RESHAPE beside it (a graph needs an input)."""
    S = W.schema()
    t = [W.tensor((enc.size,), np.uint8, data=enc), W.tensor((anc.size,), np.uint8, data=anc), out,
         W.tensor((2, 2), np.int8, scale=0.1, zp=0), W.tensor((2,), np.int32, data=np.array([1, 4], np.int32)),
         W.tensor((1, 4), np.int8, scale=0.1, zp=0)]
    ops = [W.decode_op([0, 1], [2]), W.op(S.BuiltinOperator.RESHAPE, [3, 4], [5], "ReshapeOptions", newShape=[1, 4])]
    return W.build(t, ops, inputs=[3], outputs=[2, 5])


_X = np.array([[1, -2], [3, -4]], np.int8)


def _run_both(blob, name):
    g = load_tflite_bytes(blob, name=name)
    assert not g.unsupported, g.summary()
    got = g.run([_X])[0]
    want = np.asarray(W.tflm_run(blob, [_X], 2, arena_size=1 << 16)[0]).reshape(got.shape)
    return g, got, want


def _skewed(rng, dtype, shape, distinct, p=0.3):
    """Values of dtype from `distinct` random ones, geometrically skewed (long and short codes)."""
    info = np.iinfo(dtype)
    pal = rng.choice(np.arange(info.min, info.max + 1, dtype=np.int64), distinct, replace=False).astype(dtype)
    k = np.minimum(rng.geometric(p, int(np.prod(shape))) - 1, distinct - 1)
    return pal[k].reshape(shape)


CASES = [  # dtype, wide, first_bits, sub_bits, distinct, shape, p, junk
    (np.int8, False, 3, 4, 20, (300,), 0.3, 0),
    (np.int8, False, 1, 1, 12, (5, 40), 0.35, 0),          # one bit per lookup: long pointer chains
    (np.int8, False, 8, 8, 256, (2, 16, 32), 0.02, 0x700),  # every int8, junk in value bits 8..10
    (np.int8, False, 5, 2, 40, (77,), 0.2, 0),
    (np.int8, True, 2, 3, 30, (9, 11), 0.25, 0x7FFFF00),   # int8 from 32-bit entries: low byte taken
    (np.int16, True, 4, 3, 50, (3, 7, 13), 0.15, 0),
    (np.int16, True, 10, 6, 700, (1000,), 0.005, 0x7FF0000),
    (np.int16, True, 16, 15, 3, (64,), 0.5, 0),             # a 16-bit first lookup (byte 5 = 0xF1)
    (np.int8, False, 2, 2, 1, (33,), 0.5, 0),               # one value: a 1-bit code
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_huffman_bit_exact_with_tflm_and_the_original(case):
    dtype, wide, first, sub, distinct, shape, p, junk = CASES[case]
    rng = np.random.default_rng(100 + case)
    x = _skewed(rng, dtype, shape, distinct, p)
    enc, anc, codes = huffman_encode(x, first, sub, wide, junk)
    out = W.tensor(shape, dtype, scale=0.05, zp=0)
    g, got, want = _run_both(_decode_model(enc, anc, out), "huffman")
    assert got.dtype == want.dtype == np.dtype(dtype)
    assert np.array_equal(got.astype(np.int64), want.astype(np.int64)), (got, want)
    assert np.array_equal(got, x)   # the decoded tensor is the one encoded
    assert g.operators[0].type == "CUSTOM:TFLM_DECODE"
    # the code really is variable-length, with sub-tables where a code outgrows the first lookup
    lens = {len(c) for c in codes.values()}
    assert distinct == 1 or len(lens) > 1
    if max(lens) > first:
        assert len(anc) - 16 > (4 if wide else 2) << first


@pytest.mark.parametrize("pad_to", [8, 32, 64])
def test_stream_padding_and_lookahead_past_the_last_code(pad_to):
    """A stream cut to whole bytes makes the last lookups peek past its end (TFLM reads on into
    memory; the result cannot depend on those bits for a well-formed table): == TFLM."""
    rng = np.random.default_rng(pad_to)
    for n in (1, 2, 5, 31, 97):
        x = _skewed(rng, np.int8, (n,), 9, 0.4)
        enc, anc, _ = huffman_encode(x, 6, 4, False, pad_to=pad_to)
        g, got, want = _run_both(_decode_model(enc, anc, W.tensor((n,), np.int8, scale=0.1, zp=0)), "pad")
        assert np.array_equal(got, want) and np.array_equal(got, x)


def test_float_reference_is_the_dequantized_decoded_tensor():
    x = _skewed(np.random.default_rng(3), np.int16, (4, 6), 10)
    enc, anc, _ = huffman_encode(x, 3, 3, True)
    g = load_tflite_bytes(_decode_model(enc, anc, W.tensor((4, 6), np.int16, scale=0.25, zp=0)), name="ref")
    vals = run_float(g, [_X.astype(np.float64) * 0.1])
    assert np.array_equal(vals[g.operators[0].outputs[0]], x.astype(np.float64) * 0.25)


def test_huffman_beside_a_lut_pair_in_one_decode():
    from pyembed.model.tflm_compress import lut_pair
    rng = np.random.default_rng(8)
    a = _skewed(rng, np.int8, (40,), 15)
    b = rng.integers(-50, 50, (3, 8)).astype(np.int16) // 25
    ea, aa, _ = huffman_encode(a, 4, 3)
    eb, ab = lut_pair(b, 3)
    S = W.schema()
    t = [W.tensor((ea.size,), np.uint8, data=ea), W.tensor((aa.size,), np.uint8, data=aa),
         W.tensor((eb.size,), np.uint8, data=eb), W.tensor((ab.size,), np.uint8, data=ab),
         W.tensor((40,), np.int8, scale=0.1, zp=0), W.tensor((3, 8), np.int16, scale=0.2, zp=0),
         W.tensor((2, 2), np.int8, scale=0.1, zp=0), W.tensor((2,), np.int32, data=np.array([1, 4], np.int32)),
         W.tensor((1, 4), np.int8, scale=0.1, zp=0)]
    ops = [W.decode_op([0, 1, 2, 3], [4, 5]),
           W.op(S.BuiltinOperator.RESHAPE, [6, 7], [8], "ReshapeOptions", newShape=[1, 4])]
    blob = W.build(t, ops, inputs=[6], outputs=[4, 5, 8])
    g = load_tflite_bytes(blob, name="mixed")
    assert not g.unsupported, g.summary()
    got, want = g.run([_X]), W.tflm_run(blob, [_X], 3, arena_size=1 << 16)
    for k, orig in ((0, a), (1, b)):
        assert np.array_equal(got[k], np.asarray(want[k]).reshape(got[k].shape))
        assert np.array_equal(got[k], orig)


def test_fully_connected_on_huffman_weights_decoded_at_import():
    """FULLY_CONNECTED takes constant weights: the importer decodes the Huffman pair once."""
    rng = np.random.default_rng(12)
    n_in, n_out = 16, 6
    w = _skewed(rng, np.int8, (n_out, n_in), 24, 0.2)
    enc, anc, _ = huffman_encode(w, 3, 4)
    S = W.schema()
    t = [W.tensor((1, n_in), np.int8, scale=0.05, zp=-3),
         W.tensor((enc.size,), np.uint8, data=enc), W.tensor((anc.size,), np.uint8, data=anc),
         W.tensor((n_out, n_in), np.int8, scale=[0.01] * n_out, zp=[0] * n_out, axis=0),
         W.tensor((n_out,), np.int32, data=np.arange(n_out, dtype=np.int32) * 37 - 50),
         W.tensor((1, n_out), np.int8, scale=0.3, zp=4)]
    ops = [W.decode_op([1, 2], [3]), W.op(S.BuiltinOperator.FULLY_CONNECTED, [0, 3, 4], [5], "FullyConnectedOptions")]
    blob = W.build(t, ops, inputs=[0], outputs=[5])
    g = load_tflite_bytes(blob, name="fc_huffman")
    assert [op.type for op in g.operators] == ["FULLY_CONNECTED"] and g.decode_folded == [3]
    assert np.array_equal(g.tensors[3].data, w)
    for seed in range(3):
        x = np.random.default_rng(seed).integers(-128, 128, (1, n_in)).astype(np.int8)
        got = g.run([x])[0]
        want = np.asarray(W.tflm_run(blob, [x], 1, arena_size=1 << 16)[0]).reshape(got.shape)
        assert np.array_equal(got, want)


def test_library_encoder_writes_models_tflm_and_pyembed_decode_to_the_original():
    """pyembed.model.tflm_compress.huffman_pair + tflite_writer.decode_op (its tables are built
    another way than the encoder above: ranges of entries per codeword)."""
    from pyembed.errors import ArgumentError
    from pyembed.model.tflm_compress import huffman_pair
    rng = np.random.default_rng(33)
    for dtype, shape, distinct, kw in ((np.int8, (120,), 40, {}), (np.int8, (6, 50), 90, dict(first_bits=3, sub_bits=2)),
                                       (np.int16, (4, 33), 200, dict(first_bits=9)),
                                       (np.int8, (64,), 20, dict(wide=True, first_bits=1, sub_bits=1)),
                                       (np.int16, (5,), 1, {})):
        x = _skewed(rng, dtype, shape, distinct, 0.05)
        enc, anc = huffman_pair(x, **kw)
        g, got, want = _run_both(_decode_model(enc, anc, W.tensor(shape, dtype, scale=0.1, zp=0)), "lib")
        assert np.array_equal(got, want) and np.array_equal(got, x)
    for bad, match in (((np.zeros(4, np.int32),), "int8 / int16"), ((np.zeros(4, np.int16),), None),
                       ((np.arange(4, dtype=np.int8), 0), "first_bits"), ((np.arange(4, dtype=np.int8), 2, 16), "sub_bits")):
        if match is None:
            with pytest.raises(ArgumentError, match="wide"):
                huffman_pair(*bad, wide=False)
        else:
            with pytest.raises(ArgumentError, match=match):
                huffman_pair(*bad)


# -- refusals ------------------------------------------------------------------------------------

def _case():
    x = np.array([5, 5, 5, 5, -7, -7, 9, 100, 5, -7, 3, 5, 5, 9, 5, 5], np.int8)
    enc, anc, codes = huffman_encode(x, 2, 2)
    assert max(len(c) for c in codes.values()) > 2   # a second-level table exists
    return enc, anc


def _bad(anc=None, enc=None, out=None):
    e, a = _case()
    blob = _decode_model(e if enc is None else enc, a if anc is None else anc,
                         out or W.tensor((16,), np.int8, scale=0.1, zp=0))
    return lambda: load_tflite_bytes(blob, name="bad")


def _set(a, k, v):
    a = a.copy()
    a[k] = v
    return a


def test_malformed_huffman_data_is_refused_at_import_naming_the_field():
    e, a = _case()
    cases = [
        (_bad(anc=_set(a, 1, 3)), "DCM version 3"),
        (_bad(anc=_set(a, 4, 2)), "Huffman version 2"),
        (_bad(anc=_set(a, 5, 0x40)), r"first lookup of 5 bits \(byte 5 bits 4..7 = 4\) needs 32"),
        (_bad(anc=a[:16 + 2 * 3]), "needs 4 first-level entries, the tables hold 3"),
        (_bad(anc=a[:-1]), "are not whole 16-bit entries"),
        (_bad(anc=a[:-2]), r"element \d+: Huffman table entry \d+ leads to entry \d+, the tables hold"),
        (_bad(enc=e[:2]), r"element \d+: its code runs past the 2-byte encoded stream"),
        (_bad(out=W.tensor((16,), np.int16, scale=0.1, zp=0)), "int16: 16-bit entries .* decode to int8 only"),
        (_bad(anc=_set(a, 5, a[5] | 1), out=W.tensor((16,), np.int32, scale=0.1, zp=0)),
         "int32: 32-bit entries decode to int8 / int16 only"),
    ]
    for load, message in cases:
        with pytest.raises(ModelError, match=message):
            load()


def test_a_pointer_loop_is_refused_not_followed_forever():
    e, a = _case()
    words = a[16:].view("<u2").copy()
    k = int(np.nonzero((words & 0x8000) == 0)[0][0])   # the pointer to the second-level table
    words[k] = 0                                        # 1 bit, offset 0: back to itself
    bad = np.concatenate([a[:16], words.view(np.uint8)])
    with pytest.raises(ModelError, match="runs past the"):
        _bad(anc=bad)()


def test_tflm_refuses_the_output_types_pyembed_refuses():
    """int16 from 16-bit entries and int32 from 32-bit ones: TFLM's interpreter fails too."""
    e, a = _case()
    for anc, dtype in ((a, np.int16), (_set(a, 5, a[5] | 1), np.int32)):
        blob = _decode_model(e, anc, W.tensor((16,), dtype, scale=0.1, zp=0))
        with pytest.raises(Exception):
            W.tflm_run(blob, [_X], 2, arena_size=1 << 16)


def test_c_kernel_refuses_a_stream_cut_after_import():
    """The runtime checks again: bytes changed behind the importer's back give a status, not a read
    past the buffer (the graph's constant is cut to 1 byte after preparation)."""
    e, a = _case()
    g = load_tflite_bytes(_decode_model(e, a, W.tensor((16,), np.int8, scale=0.1, zp=0)), name="cut")
    t = g.tensors[g.operators[0].inputs[0]]
    t.data = np.asarray(t.data)[:1].copy()
    t.shape = (1,)
    with pytest.raises(Exception, match="(?i)arg|status|-1|fail"):
        g.run([_X])


# -- a run-time Huffman DECODE feeding ADD: TFLM on the host, then a Cortex-M4 firmware under QEMU ---

def _add_model():
    S = W.schema()
    w = _skewed(np.random.default_rng(6), np.int8, (1, 256), 30, 0.2)
    enc, anc, _ = huffman_encode(w, 4, 4)
    t = [W.tensor((1, 256), np.int8, scale=0.05, zp=2),
         W.tensor((enc.size,), np.uint8, data=enc), W.tensor((anc.size,), np.uint8, data=anc),
         W.tensor((1, 256), np.int8, scale=0.04, zp=-1), W.tensor((1, 256), np.int8, scale=0.1, zp=3)]
    ops = [W.decode_op([1, 2], [3]), W.op(S.BuiltinOperator.ADD, [0, 3], [4], "AddOptions")]
    return W.build(t, ops, inputs=[0], outputs=[4]), w, enc, anc


def test_runtime_huffman_decode_feeding_add_bit_exact_with_tflm():
    blob, w, enc, anc = _add_model()
    g = load_tflite_bytes(blob, name="huffman_add")
    assert [op.type for op in g.operators] == ["CUSTOM:TFLM_DECODE", "ADD"] and not g.unsupported
    assert g.operators[0].params["encoded_bytes"] == enc.size + anc.size < 256
    for seed in range(3):
        x = np.random.default_rng(seed).integers(-128, 128, (1, 256)).astype(np.int8)
        got = g.run([x])[0]
        want = np.asarray(W.tflm_run(blob, [x], 1, arena_size=1 << 16)[0]).reshape(got.shape)
        assert np.array_equal(got, want)


def _qemu_missing():
    from pyembed.target import qemu
    return qemu.missing_tools()


@pytest.mark.skipif(_qemu_missing() is not None, reason=str(_qemu_missing()))
def test_runtime_huffman_decode_firmware_under_qemu(tmp_path):
    """A Cortex-M4 (mps2-an386) firmware decoding the Huffman stream at run time gives the host run."""
    from pyembed.target.firmware import build_project, generate, run_project
    blob, _, enc, anc = _add_model()
    g = load_tflite_bytes(blob, name="huffman_add")
    proj = generate(g, "mps2-an386", tmp_path / "fw")
    build_project(proj.outdir)
    x = np.random.default_rng(9).integers(-128, 128, (1, 256)).astype(np.int8)
    want = g.run([x])[0]
    assert np.array_equal(want, np.asarray(W.tflm_run(blob, [x], 1, arena_size=1 << 16)[0]).reshape(want.shape))
    got = np.asarray(run_project(proj, [x]).outputs[0]).reshape(want.shape)
    assert np.array_equal(got.astype(np.int64), want.astype(np.int64))
    data_c = (proj.outdir / "model" / "model_data.c").read_text()
    m = re.search(r"pe_model_tensor_bytes\[5\] = \{\s*([^}]*)\}", data_c)
    assert m and [int(v.strip().rstrip("u")) for v in m.group(1).split(",") if v.strip()] == \
        [0, enc.size, anc.size, 0, 0]
    assert 3 in proj.layout.tensor_offsets
