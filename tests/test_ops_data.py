"""Data movement operators (PAD, PADV2, MIRROR_PAD, CONCATENATION, SPLIT,
SPLIT_V, STRIDED_SLICE, SLICE, SQUEEZE, EXPAND_DIMS, TRANSPOSE, GATHER,
DEPTH_TO_SPACE, SPACE_TO_DEPTH, RESIZE_NEAREST_NEIGHBOR, RESIZE_BILINEAR) and
constant folding of shape arithmetic: single-operator and small multi-operator
models built in-process, run by pyembed's C graph runtime and by the
tflite-micro interpreter, compared with ==. Where TFLM refuses a valid
model (STRIDED_SLICE with ellipsis / new_axis / offset; CONCATENATION of
differently quantized inputs) the oracle is LiteRT's reference kernel or
TFLM running the equivalent model, as each test says."""
import numpy as np
import pytest

from pyembed.errors import ModelError
from pyembed.kernels import shape_ref
from pyembed.model.load import load_tflite_bytes
from pyembed import _csrc

runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")

I8, I16, I32, I64 = np.int8, np.int16, np.int32, np.int64


# -- model building ---------------------------------------------------------------------

def T(shape, dtype=I8, scale=0.05, zp=0, data=None):
    """A tensor description; int32/int64 tensors carry no quantization."""
    if np.dtype(dtype) in (np.dtype(I32), np.dtype(I64)) and data is not None:
        scale = None
    return {"shape": tuple(int(d) for d in shape), "dtype": np.dtype(dtype), "scale": scale,
            "zp": zp, "data": None if data is None else np.asarray(data, dtype)}


def C(values, dtype=I32):
    values = np.asarray(values, dtype)
    return T(values.shape, dtype, data=values)


def build(tensors, ops, inputs, outputs):
    """A .tflite flatbuffer via pyembed.model.tflite_writer (ops by builtin name)."""
    from pyembed.bench.coverage import build_named
    return build_named(tensors, ops, inputs, outputs)


def tflm_run(model, xs):
    it = runtime.Interpreter.from_bytes(model, arena_size=1 << 20)
    for i, x in enumerate(xs):
        it.set_input(x, i)
    it.invoke()
    outs, k = [], 0
    while True:
        try:
            outs.append(it.get_output(k))
        except (IndexError, RuntimeError, ValueError):
            break
        k += 1
    return outs


def litert_run(model, xs):
    interp = pytest.importorskip("ai_edge_litert.interpreter")
    it = interp.Interpreter(model_content=model,
                            experimental_op_resolver_type=interp.OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), xs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def rand(rng, shape, dtype=I8):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape, dtype=np.int64).astype(dtype)


def compare(model, xs, oracle="tflm", name="model"):
    """Run pyembed and the oracle; every output bit-exact (==), same shape."""
    g = load_tflite_bytes(model, name=name)
    assert not g.unsupported, g.unsupported
    ours = g.run(xs if len(xs) > 1 else xs[0])
    theirs = tflm_run(model, xs) if oracle == "tflm" else litert_run(model, xs)
    assert len(ours) == len(theirs)
    for k, (a, b) in enumerate(zip(ours, theirs)):
        assert a.shape == b.shape, (k, a.shape, b.shape)
        bad = np.argwhere(a != b)
        assert bad.size == 0, f"output {k}: {len(bad)} of {a.size} elements differ, first at {bad[:5].tolist()}"
    return g, ours


def single(op, tensors, ins, outs, options=None, n_inputs=1):
    return build(tensors, [(op, ins, outs, options or {})], list(range(n_inputs)), outs)


# -- PAD / PADV2 / MIRROR_PAD ------------------------------------------------------------

@pytest.mark.parametrize("seed", range(6))
def test_pad_random_ranks_and_zero_points(seed):
    rng = np.random.default_rng(seed)
    rank = 1 + seed % 4
    dtype = I16 if seed == 5 else I8
    shape = tuple(rng.integers(1, 5, rank))
    pads = rng.integers(0, 3, (rank, 2))
    zp = 0 if dtype == I16 else [-128, 127, 5, -7, 0][seed % 5]   # zero points at the type limits
    out = tuple(int(d + a + b) for d, (a, b) in zip(shape, pads))
    m = single("PAD", [T(shape, dtype, zp=zp), C(pads), T(out, dtype, zp=zp)], [0, 1], [2])
    compare(m, [rand(rng, shape, dtype)])


@pytest.mark.parametrize("value,dtype", [(-128, I8), (127, I8), (33, I8), (-32768, I16), (1234, I16)])
def test_padv2_constant_value(value, dtype):
    rng = np.random.default_rng(abs(value))
    shape, pads = (1, 3, 4, 2), [[0, 0], [2, 1], [1, 3], [0, 0]]
    out = (1, 6, 8, 2)
    zp = 0 if dtype == I16 else 9
    m = single("PADV2", [T(shape, dtype, zp=zp), C(pads), T((), dtype, zp=zp, data=np.array(value, dtype)),
                         T(out, dtype, zp=zp)], [0, 1, 2], [3])
    _, (y,) = compare(m, [rand(rng, shape, dtype)])
    assert y[0, 0, 0, 0] == value


@pytest.mark.parametrize("mode", ["REFLECT", "SYMMETRIC"])
@pytest.mark.parametrize("seed", range(3))
def test_mirror_pad_both_modes(mode, seed):
    rng = np.random.default_rng(seed)
    shape = tuple(rng.integers(2, 5, 3))
    limit = [d - 1 if mode == "REFLECT" else d for d in shape]
    pads = np.array([[rng.integers(0, lim + 1), lim if seed == 0 else rng.integers(0, lim + 1)]
                     for lim in limit])   # seed 0: the largest legal padding
    out = tuple(int(d + a + b) for d, (a, b) in zip(shape, pads))
    m = single("MIRROR_PAD", [T(shape), C(pads), T(out)], [0, 1], [2], {"mode": mode})
    x = rand(rng, shape)
    _, (y,) = compare(m, [x])
    assert np.array_equal(y, shape_ref.mirror_pad(x, pads, mode))


def test_mirror_pad_too_wide_is_a_model_error():
    m = single("MIRROR_PAD", [T((3, 2)), C([[0, 0], [2, 0]]), T((3, 4))], [0, 1], [2], {"mode": "REFLECT"})
    with pytest.raises(ModelError, match="REFLECT padding"):
        load_tflite_bytes(m)


# -- CONCATENATION / SPLIT / SPLIT_V -------------------------------------------------------

@pytest.mark.parametrize("seed", range(6))
def test_concatenation_any_axis(seed):
    rng = np.random.default_rng(seed)
    rank = 1 + seed % 4
    dtype = [I8, I8, I16, I32, I8, I16][seed]
    base = list(rng.integers(1, 4, rank))
    axis = int(rng.integers(-rank, rank))
    n = int(rng.integers(2, 5))
    shapes = []
    for _ in range(n):
        s = list(base)
        s[axis] = int(rng.integers(1, 4))
        shapes.append(tuple(s))
    out = list(base)
    out[axis] = sum(s[axis] for s in shapes)
    q = {} if dtype != I8 else {"zp": -128 if seed == 0 else 127}
    if dtype == I32:
        tensors = [dict(T(s, dtype), scale=None) for s in shapes] + [dict(T(out, dtype), scale=None)]
    else:
        tensors = [T(s, dtype, zp=q.get("zp", 0)) for s in shapes] + [T(out, dtype, zp=q.get("zp", 0))]
    m = build(tensors, [("CONCATENATION", list(range(n)), [n], {"axis": axis})], list(range(n)), [n])
    compare(m, [rand(rng, s, dtype) for s in shapes])


def test_concatenation_requantizes_like_tflm_quantize():
    """Inputs with their own scale / zero point: TFLM's CONCATENATION refuses
    them, pyembed requantizes each with TFLite's int8 QUANTIZE arithmetic, so
    the oracle is TFLM running QUANTIZE on each input, then CONCATENATION."""
    rng = np.random.default_rng(7)
    a, b, c = (1, 4, 3), (1, 4, 5), (1, 4, 2)
    qa, qb, qc, qo = (0.02, -128), (0.11, 127), (0.05, 3), (0.05, 3)
    out = (1, 4, 10)
    direct = build([T(a, scale=qa[0], zp=qa[1]), T(b, scale=qb[0], zp=qb[1]), T(c, scale=qc[0], zp=qc[1]),
                    T(out, scale=qo[0], zp=qo[1])],
                   [("CONCATENATION", [0, 1, 2], [3], {"axis": -1})], [0, 1, 2], [3])
    via_quantize = build([T(a, scale=qa[0], zp=qa[1]), T(b, scale=qb[0], zp=qb[1]), T(c, scale=qc[0], zp=qc[1]),
                          T(a, scale=qo[0], zp=qo[1]), T(b, scale=qo[0], zp=qo[1]), T(out, scale=qo[0], zp=qo[1])],
                         [("QUANTIZE", [0], [3], {}), ("QUANTIZE", [1], [4], {}),
                          ("CONCATENATION", [3, 4, 2], [5], {"axis": -1})], [0, 1, 2], [5])
    g = load_tflite_bytes(direct)
    assert g.operators[0].params["requantized_inputs"] == 2
    for _ in range(3):
        xs = [rand(rng, s) for s in (a, b, c)]
        ours = g.run(xs)[0]
        theirs = tflm_run(via_quantize, xs)[0]
        assert np.array_equal(ours, theirs), np.argwhere(ours != theirs)[:5]


def test_concatenation_fused_activation_is_refused():
    m = build([T((2, 3)), T((2, 3)), T((2, 6))],
              [("CONCATENATION", [0, 1], [2], {"axis": 1, "activation": "RELU"})], [0, 1], [2])
    g = load_tflite_bytes(m)
    assert g.unsupported and "fused activation" in g.operators[0].reason


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_split_and_split_v(axis):
    rng = np.random.default_rng(axis + 5)
    shape = (4, 6, 6)
    ax = axis % 3
    n = 2
    part = list(shape)
    part[ax] //= n
    m = build([C([axis]), T(shape, zp=-128), T(part, zp=-128), T(part, zp=-128)],
              [("SPLIT", [0, 1], [2, 3], {"num_splits": n})], [1], [2, 3])
    compare(m, [rand(rng, shape)])
    sizes = [1, -1, 2]
    ext = [1, shape[ax] - 3, 2]
    outs = []
    for e in ext:
        s = list(shape)
        s[ax] = e
        outs.append(T(s, I16, scale=0.1))
    m = build([T(shape, I16, scale=0.1), C(sizes), C([axis])] + outs,
              [("SPLIT_V", [0, 1, 2], [3, 4, 5], {"num_splits": 3})], [0], [3, 4, 5])
    compare(m, [rand(rng, shape, I16)])


# -- STRIDED_SLICE / SLICE -------------------------------------------------------------------

def _strided_model(shape, b, e, s, dtype=I8, **masks):
    plan = shape_ref.strided_slice_plan(shape, b, e, s, masks.get("begin_mask", 0), masks.get("end_mask", 0),
                                        masks.get("ellipsis_mask", 0), masks.get("new_axis_mask", 0),
                                        masks.get("shrink_axis_mask", 0), masks.get("offset", False))
    return single("STRIDED_SLICE", [T(shape, dtype), C(b), C(e), C(s), T(plan[3], dtype)], [0, 1, 2, 3], [4],
                  masks), plan


@pytest.mark.parametrize("seed", range(12))
def test_strided_slice_random_against_tflm(seed):
    rng = np.random.default_rng(100 + seed)
    rank = 1 + seed % 4
    shape = tuple(int(d) for d in rng.integers(1, 7, rank))
    dtype = [I8, I16, I32][seed % 3]
    while True:
        b = [int(v) for v in rng.integers(-8, 8, rank)]
        e = [int(v) for v in rng.integers(-8, 8, rank)]
        s = [int(v) * int(rng.choice([-1, 1])) for v in rng.integers(1, 4, rank)]
        bm, em = int(rng.integers(0, 1 << rank)), int(rng.integers(0, 1 << rank))
        sh = int(rng.integers(0, 1 << rank)) if seed % 2 else 0
        # TFLM writes nothing for a shrunk axis with a negative stride (its loop
        # runs from start to start + 1 backwards): see the test below
        s = [abs(v) if (sh >> k) & 1 else v for k, v in enumerate(s)]
        try:
            m, plan = _strided_model(shape, b, e, s, dtype, begin_mask=bm, end_mask=em, shrink_axis_mask=sh)
        except Exception:  # noqa: BLE001 - an invalid random spec (shrunk index out of range): draw again
            continue
        if all(plan[2]):
            break
    x = rand(rng, shape, dtype)
    _, (y,) = compare(m, [x])
    # numpy's own slicing agrees where the spec is a plain slice
    if not (bm or em or sh):
        idx = tuple(slice(bb, ee, ss) for bb, ee, ss in zip(b, e, s))
        assert np.array_equal(y, x[idx])


def test_strided_slice_shrink_with_negative_stride_takes_the_element():
    """A shrunk axis with a negative stride: TFLM's reference loop (start to
    start + 1, stepping backwards) never runs and leaves its output unwritten;
    pyembed takes the element at begin, as tf.strided_slice and numpy do."""
    rng = np.random.default_rng(8)
    m, plan = _strided_model((3, 4), [1, 3], [0, 0], [1, -1], begin_mask=1, end_mask=1, shrink_axis_mask=2)
    x = rand(rng, (3, 4))
    y = load_tflite_bytes(m).run(x)[0]
    assert np.array_equal(y, x[:, 3])


@pytest.mark.parametrize("masks", [{"ellipsis_mask": 2}, {"new_axis_mask": 2}, {"offset": True},
                                   {"ellipsis_mask": 1, "shrink_axis_mask": 4}])
def test_strided_slice_ellipsis_new_axis_offset_against_litert(masks):
    """TFLM ignores ellipsis / new_axis (and refuses such models at prepare);
    LiteRT's reference kernel implements them: it is the oracle here."""
    rng = np.random.default_rng(3)
    shape = (4, 5, 6)
    b, e, s = ([1, 0, 2], [3, 0, 4], [1, 1, 1])
    if "offset" in masks:
        b, e = [1, 1, 2], [2, 3, 2]          # end relative to begin
    elif masks.get("ellipsis_mask") == 1:
        b, e, s = [0, 4, 2], [0, 0, 4], [1, -2, 1]   # [..., 4:0:-2, 2]
    m, _ = _strided_model(shape, b, e, s, **masks)
    compare(m, [rand(rng, shape)], oracle="litert")


def test_slice_with_minus_one_size():
    rng = np.random.default_rng(4)
    m = single("SLICE", [T((3, 5, 4), I16, scale=0.2), C([1, 0, 1]), C([2, -1, 2]), T((2, 5, 2), I16, scale=0.2)],
               [0, 1, 2], [3])
    compare(m, [rand(rng, (3, 5, 4), I16)])


# -- SQUEEZE / EXPAND_DIMS (aliases) ----------------------------------------------------------

def test_squeeze_and_expand_dims_alias_without_copy():
    rng = np.random.default_rng(5)
    m = build([T((1, 4, 1, 3)), T((4, 3)), C([1]), T((4, 1, 3))],
              [("SQUEEZE", [0], [1], {"squeeze_dims": (0, 2)}), ("EXPAND_DIMS", [1, 2], [3], {})], [0], [3])
    g, _ = compare(m, [rand(rng, (1, 4, 1, 3))])
    assert g.alias_root(3) == 0     # both outputs share the input's bytes


# -- TRANSPOSE / GATHER / DEPTH_TO_SPACE / SPACE_TO_DEPTH -----------------------------------------

@pytest.mark.parametrize("seed", range(6))
def test_transpose_up_to_5d(seed):
    rng = np.random.default_rng(seed)
    rank = 2 + seed % 4
    shape = tuple(int(d) for d in rng.integers(1, 5, rank))
    perm = [int(p) for p in rng.permutation(rank)]
    dtype = I16 if seed % 2 else I8
    m = single("TRANSPOSE", [T(shape, dtype), C(perm), T([shape[p] for p in perm], dtype)], [0, 1], [2])
    x = rand(rng, shape, dtype)
    _, (y,) = compare(m, [x])
    assert np.array_equal(y, x.transpose(perm))


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_gather_constant_and_activation_indices(axis):
    rng = np.random.default_rng(axis + 10)
    shape = (3, 4, 5)
    ax = axis % 3
    idx = rng.integers(0, shape[ax], (2, 3)).astype(I32)
    out = shape[:ax] + idx.shape + shape[ax + 1:]
    m = single("GATHER", [T(shape), C(idx), T(out)], [0, 1], [2], {"axis": axis})
    compare(m, [rand(rng, shape)])
    # positions as a second graph input (an activation)
    m = build([T(shape), T(idx.shape, I32, scale=None), T(out)], [("GATHER", [0, 1], [2], {"axis": axis})],
              [0, 1], [2])
    compare(m, [rand(rng, shape), idx])


@pytest.mark.parametrize("block", [1, 2, 3])
def test_depth_to_space_and_back(block):
    rng = np.random.default_rng(block)
    shape = (2, 3, 2, block * block * 2)
    space = (2, 3 * block, 2 * block, 2)
    m = build([T(shape, zp=-128), T(space, zp=-128), T(shape, zp=-128)],
              [("DEPTH_TO_SPACE", [0], [1], {"block_size": block}),
               ("SPACE_TO_DEPTH", [1], [2], {"block_size": block})], [0], [1, 2])
    x = rand(rng, shape)
    _, (y, back) = compare(m, [x])
    assert np.array_equal(y, shape_ref.depth_to_space(x, block)) and np.array_equal(back, x)


# -- RESIZE_NEAREST_NEIGHBOR / RESIZE_BILINEAR ---------------------------------------------

RESIZE_CASES = [((2, 2), (41, 41), False, True),     # float32 index differs from the exact quotient
                ((2, 82), (3, 82 * 2 - 1), False, False), ((3, 4), (6, 8), False, False),
                ((5, 3), (2, 7), True, False), ((4, 4), (9, 3), False, True), ((1, 1), (5, 4), False, False),
                ((6, 5), (6, 5), True, False), ((3, 7), (11, 2), True, False)]


@pytest.mark.parametrize("case", RESIZE_CASES)
@pytest.mark.parametrize("kind", ["RESIZE_NEAREST_NEIGHBOR", "RESIZE_BILINEAR"])
def test_resize(kind, case):
    (ih, iw), (oh, ow), align, half = case
    rng = np.random.default_rng(ih * 100 + oh)
    dtype = I16 if kind == "RESIZE_NEAREST_NEIGHBOR" and ih == 3 else I8
    m = single(kind, [T((2, ih, iw, 3), dtype, zp=0 if dtype == I16 else -5), C([oh, ow]),
                      T((2, oh, ow, 3), dtype, zp=0 if dtype == I16 else -5)], [0, 1], [2],
               {"align_corners": align, "half_pixel_centers": half})
    x = rand(rng, (2, ih, iw, 3), dtype)
    for extreme in (None, -128, 127):   # saturated inputs too
        if extreme is not None:
            if dtype != I8:
                continue
            x = np.full_like(x, extreme)
        _, (y,) = compare(m, [x])
        ref = (shape_ref.resize_nearest(x, (oh, ow), align, half) if kind == "RESIZE_NEAREST_NEIGHBOR"
               else shape_ref.resize_bilinear_s8(x, (oh, ow), align, half))
        assert np.array_equal(y, ref)


def test_resize_bilinear_out_of_reach_ratio_is_unsupported():
    m = single("RESIZE_BILINEAR", [T((1, 1, 1, 1)), C([1, 2000]), T((1, 1, 2000, 1))], [0, 1], [2])
    g = load_tflite_bytes(m)
    assert g.unsupported and "reads outside" in g.operators[0].reason


# -- small multi-operator models ----------------------------------------------------------

def test_chain_pad_concat_resize_slice_transpose():
    rng = np.random.default_rng(11)
    tensors = [T((1, 4, 4, 3), zp=-128), C([[0, 0], [1, 1], [1, 1], [0, 0]]), T((1, 6, 6, 3), zp=-128),
               T((1, 6, 6, 2), zp=-128), T((1, 6, 6, 5), zp=-128), C([9, 9]), T((1, 9, 9, 5), zp=-128),
               C([0, 1, 0, 0]), C([1, 9, 9, 5]), C([1, 2, 3, 2]), T((1, 4, 3, 3), zp=-128), C([0, 3, 1, 2]),
               T((1, 3, 4, 3), zp=-128)]
    ops = [("PAD", [0, 1], [2], {}), ("CONCATENATION", [2, 3], [4], {"axis": 3}),
           ("RESIZE_BILINEAR", [4, 5], [6], {"half_pixel_centers": True}),
           ("STRIDED_SLICE", [6, 7, 8, 9], [10], {}), ("TRANSPOSE", [10, 11], [12], {})]
    m = build(tensors, ops, [0, 3], [12])
    compare(m, [rand(rng, (1, 4, 4, 3)), rand(rng, (1, 6, 6, 2))])


# -- constant folding of shape arithmetic ------------------------------------------------------

def test_shape_arithmetic_is_folded_at_import():
    """SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE computes the reshape target;
    after import only the RESHAPE (an alias) is left to run."""
    rng = np.random.default_rng(12)
    tensors = [T((2, 3, 4)), T((3,), I32, scale=None), C([0]), C([1]), C([1]), T((), I32, scale=None),
               C(12), T((2,), I32, scale=None), T((2, 12))]
    ops = [("SHAPE", [0], [1], {"out_type": 2}),
           ("STRIDED_SLICE", [1, 2, 3, 4], [5], {"shrink_axis_mask": 1}),
           ("PACK", [5, 6], [7], {"axis": 0, "values_count": 2}),
           ("RESHAPE", [0, 7], [8], {})]
    m = build(tensors, ops, [0], [8])
    g, _ = compare(m, [rand(rng, (2, 3, 4))])
    assert [op.type for op in g.operators] == ["RESHAPE"]
    assert g.folded == ["SHAPE", "STRIDED_SLICE", "PACK"]
    assert list(g.tensors[7].data) == [2, 12]


# -- the CLI: refusing what the runtime cannot run, listing what it can ------------------------

def _cli(args):
    from click.testing import CliRunner

    from pyembed.cli import main
    return CliRunner().invoke(main, args)


def test_plan_and_simulate_refuse_unsupported_operators(tmp_path):
    # FLOOR_MOD: float32 only in TFLM, so pyembed runs no form of it (pyembed.model.ops.batch5)
    m = build([T((1, 8)), T((1, 8)), C([1])], [("FLOOR_MOD", [0, 2], [1], {})], [0], [1])
    path = tmp_path / "floor_mod.tflite"
    path.write_bytes(m)
    for args in (["plan", str(path), "-o", str(tmp_path / "out")], ["simulate", str(path)]):
        r = _cli(args)
        assert r.exit_code == 2, r.output
        assert "FLOOR_MOD" in r.output and "does not implement" in r.output


def test_plan_refuses_a_float_model(tmp_path):
    f32 = np.float32
    pads = C([[0, 0], [1, 1], [1, 1], [0, 0]])
    # all float: one line (pyembed.cli.options.require_quantized)
    m = build([dict(T((1, 4, 4, 2), f32), scale=None), pads, dict(T((1, 6, 6, 2), f32), scale=None)],
              [("MIRROR_PAD", [0, 1], [2], {"mode": "REFLECT"})], [0], [2])
    path = tmp_path / "float.tflite"
    path.write_bytes(m)
    r = _cli(["plan", str(path), "-o", str(tmp_path / "out")])
    assert r.exit_code == 2 and "float model" in r.output, r.output
    # int8 at the boundary, float MIRROR_PAD in between (not element-wise, so
    # not a table; PAD runs in float32): the operator is named with its types,
    # the model is not called float
    m = build([T((1, 4, 4, 2)), dict(T((1, 4, 4, 2), f32), scale=None), pads,
               dict(T((1, 6, 6, 2), f32), scale=None), T((1, 6, 6, 2))],
              [("DEQUANTIZE", [0], [1], {}), ("MIRROR_PAD", [1, 2], [3], {"mode": "REFLECT"}),
               ("QUANTIZE", [3], [4], {})], [0], [4])
    path.write_bytes(m)
    for args in (["plan", str(path), "-o", str(tmp_path / "out")], ["simulate", str(path)]):
        r = _cli(args)
        assert r.exit_code == 2, r.output
        assert "float model" not in r.output and "quantize it first" not in r.output, r.output
        assert "#1 MIRROR_PAD (float32 -> float32" in r.output and "float32 tensor(s) between operators" in r.output


def test_ops_command_lists_every_registered_operator():
    from pyembed.model.ops import SUPPORTED_OPS
    r = _cli(["ops"])
    assert r.exit_code == 0, r.output
    for name in SUPPORTED_OPS:
        assert name in r.output
    md = _cli(["ops", "--markdown"]).output
    assert md.startswith("| operator | code |") and "| STRIDED_SLICE | 26 | data |" in md


def test_readme_operator_table_is_the_generated_one():
    import pathlib
    import re

    from pyembed.cli.ops import markdown, operator_table
    text = (pathlib.Path(__file__).resolve().parent.parent / "README.md").read_text()
    m = re.search(r"<!-- ops-table -->\n(.*?)\n<!-- /ops-table -->", text, re.S)
    assert m, "README lacks the operator table"
    assert m.group(1) == markdown(operator_table()), "README's table is stale: run pyembed ops --markdown"


def test_emitted_c_program_runs_the_data_movement_chain(tmp_path):
    """The generic emitter writes the operators' words; the host program
    built from the generated files gives model.run's output."""
    import os
    import shutil
    import subprocess

    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    from pyembed.codegen.emit import write_plan_outputs
    from pyembed.plan import plan_graph
    csrc = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "csrc")
    tensors = [T((1, 5, 4, 3), zp=-128), C([[0, 0], [2, 1], [0, 3], [0, 0]]), T((1, 8, 7, 3), zp=-128),
               C([0, 7, 0, 0]), C([1, 0, 7, 3]), C([1, -2, 1, 1]), T((1, 4, 7, 3), zp=-128), C([8, 5]),
               T((1, 8, 5, 3), zp=-128)]
    ops = [("MIRROR_PAD", [0, 1], [2], {"mode": "SYMMETRIC"}), ("STRIDED_SLICE", [2, 3, 4, 5], [6], {}),
           ("RESIZE_NEAREST_NEIGHBOR", [6, 7], [8], {"half_pixel_centers": True})]
    g = load_tflite_bytes(build(tensors, ops, [0], [8]))
    write_plan_outputs(g, plan_graph(g), tmp_path)
    srcs = _csrc.all_sources(csrc)
    r = subprocess.run(["gcc", "-std=c99", "-O1", f"-I{csrc}/include", "-I.", "model_main.c", "model_graph.c",
                        "model_data.c", *srcs, "-o", "model_main", "-lm"], cwd=tmp_path, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    x = rand(np.random.default_rng(13), (1, 5, 4, 3))
    out = subprocess.run([str(tmp_path / "model_main")], input=x.tobytes(), capture_output=True, check=True)
    got = np.array(out.stdout.decode().split(), dtype=np.int64)
    assert np.array_equal(got, g.run(x)[0].ravel().astype(np.int64))


def test_litert_reference_kernels_agree_under_litert_rounding():
    """rounding="litert" changes nothing for these operators: LiteRT's
    reference kernels (BUILTIN_REF) give the same bytes as TFLM. (LiteRT's
    default optimized int8 RESIZE_BILINEAR differs in some elements; it is
    not reproduced.)"""
    rng = np.random.default_rng(21)
    tensors = [T((1, 5, 6, 3), zp=-3), C([[0, 0], [1, 2], [2, 1], [0, 0]]), T((1, 8, 9, 3), zp=-3), C([13, 11]),
               T((1, 13, 11, 3), zp=-3), C([0, 3, 1, 2]), T((1, 3, 13, 11), zp=-3)]
    ops = [("PAD", [0, 1], [2], {}), ("RESIZE_BILINEAR", [2, 3], [4], {"half_pixel_centers": True}),
           ("TRANSPOSE", [4, 5], [6], {})]
    m = build(tensors, ops, [0], [6])
    g = load_tflite_bytes(m)
    for _ in range(3):
        x = rand(rng, (1, 5, 6, 3))
        assert np.array_equal(g.run(x, rounding="litert")[0], litert_run(m, [x])[0])


def test_fill_and_cast_of_constants_are_folded():
    """FILL of constant dims / value feeding RESHAPE's shape runs at import
    (checked against TFLM); CAST of a constant is folded too."""
    rng = np.random.default_rng(22)
    tensors = [T((36,)), C([2]), C(6), T((2,), I32, scale=None), T((6, 6))]
    ops = [("FILL", [1, 2], [3], {}), ("RESHAPE", [0, 3], [4], {})]
    g, _ = compare(build(tensors, ops, [0], [4]), [rand(rng, (36,))])
    assert g.folded == ["FILL"] and [op.type for op in g.operators] == ["RESHAPE"]
    tensors = [T((36,)), C([6, 6], I64), T((2,), I32, scale=None), T((6, 6))]
    ops = [("CAST", [1], [2], {}), ("RESHAPE", [0, 2], [3], {})]
    g = load_tflite_bytes(build(tensors, ops, [0], [3]))
    assert g.folded == ["CAST"] and g.tensors[2].data.dtype == np.int32 and list(g.tensors[2].data) == [6, 6]
    x = rand(rng, (36,))
    assert np.array_equal(g.run(x)[0], x.reshape(6, 6))


def test_float_reference_follows_the_int8_chain_within_one_lsb():
    """pyembed.model.float_ref runs the data movement operators in float64
    (for pyembed check); on a chain fed the same dequantized input the int8
    output stays within one output step of it (bilinear rounds once)."""
    from pyembed.model.float_ref import dequantize, run_float
    rng = np.random.default_rng(23)
    tensors = [T((1, 4, 5, 2), scale=0.1, zp=3), C([[0, 0], [1, 0], [0, 2], [0, 0]]), T((1, 5, 7, 2), scale=0.1, zp=3),
               T((1, 5, 7, 1), scale=0.1, zp=3), T((1, 5, 7, 3), scale=0.1, zp=3), C([9, 13]),
               T((1, 9, 13, 3), scale=0.1, zp=3), C([[0, 0], [1, 1], [2, 2], [0, 0]]),
               T((1, 11, 17, 3), scale=0.1, zp=3), C([0, 3, 1, 2]), T((1, 3, 11, 17), scale=0.1, zp=3)]
    ops = [("PAD", [0, 1], [2], {}), ("CONCATENATION", [2, 3], [4], {"axis": -1}),
           ("RESIZE_BILINEAR", [4, 5], [6], {"align_corners": True}),
           ("MIRROR_PAD", [6, 7], [8], {"mode": "REFLECT"}), ("TRANSPOSE", [8, 9], [10], {})]
    g = load_tflite_bytes(build(tensors, ops, [0, 3], [10]))
    xs = [rand(rng, (1, 4, 5, 2)), rand(rng, (1, 5, 7, 1))]
    y = g.run(xs)[0]
    vals = run_float(g, [dequantize(g.tensors[0], xs[0]), dequantize(g.tensors[3], xs[1])])
    err = np.abs(dequantize(g.tensors[10], y) - vals[10])
    assert err.max() <= 0.1 + 1e-6
