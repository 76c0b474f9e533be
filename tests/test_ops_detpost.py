"""TFLite_Detection_PostProcess (pyembed.model.ops.detpost, csrc pe_detpost.h) against the
tflite-micro interpreter, bit for bit (float32 bit patterns), on random SSD-like models with ties
in the scores; the options and inputs it refuses; one Cortex-M4 firmware under QEMU.

TFLM writes only some output rows (fast NMS: num detections rows, at its offsets K * e + col;
regular NMS: max_detections rows) and leaves the others as the arena had them, so the comparison
is on the rows it writes plus num detections; pyembed writes zeros in the others (checked)."""
import numpy as np
import pytest

from pyembed.errors import ModelError, PyEmbedError
from pyembed.model import tflite_writer as W
from pyembed.model.float_ref import run_float
from pyembed.model.load import load_tflite_bytes

NAME = "TFLite_Detection_PostProcess"


def _opts(num_classes, **kw):
    o = dict(max_detections=10, max_classes_per_detection=1, detections_per_class=100, use_regular_nms=False,
             nms_score_threshold=0.3, nms_iou_threshold=0.5, num_classes=num_classes,
             y_scale=10.0, x_scale=10.0, h_scale=5.0, w_scale=5.0)
    o.update(kw)
    return o


def _rows(o):
    """Output rows of a well-formed model: TFLM's fast NMS writes up to K * K * max_detections."""
    k = min(o["max_classes_per_detection"], o["num_classes"])
    return o["max_detections"] if o["use_regular_nms"] else k * k * o["max_detections"]


def _anchors(rng, n):
    return np.concatenate([rng.uniform(0.1, 0.9, (n, 2)), rng.uniform(0.05, 0.5, (n, 2))], 1).astype(np.float32)


def _model(n, o, background=1, rows=None, anchors=None, stride=4, dtype=np.float32, anchor_dtype=np.float32,
           columns=None):
    c1 = o["num_classes"] + background if columns is None else columns
    d = _rows(o) if rows is None else rows
    q = {"scale": 0.05, "zp": 3} if dtype != np.float32 else {}
    anc = anchors if anchor_dtype == np.float32 else np.zeros((n, 4), anchor_dtype)
    aq = {} if anchor_dtype == np.float32 else {"scale": 0.01, "zp": 0}
    t = [W.tensor((1, n, stride), dtype, **q), W.tensor((1, n, c1), dtype, **q),
         W.tensor((n, 4), anchor_dtype, data=anc, **aq),
         W.tensor((1, d, 4), np.float32), W.tensor((1, d), np.float32), W.tensor((1, d), np.float32),
         W.tensor((1,), np.float32)]
    return W.build(t, [W.custom_op(NAME, [0, 1, 2], [3, 4, 5, 6], o)], inputs=[0, 1], outputs=[3, 4, 5, 6])


def _tflm(blob, xs):
    return W.tflm_run(blob, xs, 4, arena_size=1 << 20)


def _bits(a):
    return np.ascontiguousarray(np.asarray(a, np.float32)).view(np.int32)


def _written_rows(o, num):
    if o["use_regular_nms"]:
        return list(range(o["max_detections"]))
    k = min(o["max_classes_per_detection"], o["num_classes"])
    return [k * e + e % k for e in range(num)]


def _check(blob, xs, o):
    g = load_tflite_bytes(blob, name="detpost")
    assert not g.unsupported, g.summary()
    assert [op.type for op in g.operators] == ["CUSTOM:" + NAME]
    got = g.run(xs)
    want = _tflm(blob, xs)
    assert _bits(got[3]).tolist() == _bits(want[3]).tolist()
    num = int(np.asarray(got[3])[0])
    rows = _written_rows(o, num)
    for a, b in zip(got[:3], want[:3]):
        a = np.asarray(a, np.float32).reshape(a.shape[1], -1)
        b = np.asarray(b, np.float32).reshape(a.shape)
        assert np.array_equal(_bits(a[rows]), _bits(b[rows])), (a[rows], b[rows])
        rest = np.ones(a.shape[0], bool)
        rest[rows] = False
        assert not np.any(_bits(a[rest])), "rows TFLM leaves unwritten are zero in pyembed"
    return g, got


def _random_case(seed):
    rng = np.random.default_rng(seed)
    n, c = int(rng.integers(10, 201)), int(rng.integers(1, 11))
    o = _opts(c, max_detections=int(rng.integers(1, 20)), max_classes_per_detection=int(rng.integers(1, 4)),
              detections_per_class=int(rng.integers(1, 30)), use_regular_nms=bool(seed % 2),
              nms_score_threshold=float(rng.choice([0.0, 0.25, 0.5])),
              nms_iou_threshold=float(rng.choice([0.3, 0.5, 0.6, 1.0])))
    bg = int(rng.integers(0, 2))
    blob = _model(n, o, background=bg, anchors=_anchors(rng, n))
    boxes = rng.normal(0, 1, (1, n, 4)).astype(np.float32)
    # scores on steps of 1/8: many equal scores between anchors and between classes
    scores = (rng.integers(0, 9, (1, n, c + bg)) / 8).astype(np.float32)
    return blob, [boxes, scores], o


@pytest.mark.parametrize("seed", range(16))
def test_random_models_bit_exact_with_tflm(seed):
    blob, xs, o = _random_case(seed)
    g, got = _check(blob, xs, o)
    # a second input on the same interpreter state: pyembed keeps nothing between runs
    rng = np.random.default_rng(1000 + seed)
    xs2 = [rng.normal(0, 1, xs[0].shape).astype(np.float32), rng.uniform(0, 1, xs[1].shape).astype(np.float32)]
    _check(blob, xs2, o)


@pytest.mark.parametrize("regular", [False, True])
def test_all_scores_equal_keep_anchor_order(regular):
    """Every score equal: TFLM's order is the anchor order (the lower index first)."""
    n, o = 40, _opts(3, max_detections=8, use_regular_nms=regular, detections_per_class=5, nms_iou_threshold=1.0)
    rng = np.random.default_rng(5)
    blob = _model(n, o, anchors=_anchors(rng, n))
    xs = [rng.normal(0, 0.5, (1, n, 4)).astype(np.float32), np.full((1, n, 4), 0.75, np.float32)]
    g, got = _check(blob, xs, o)
    if not regular:   # IoU threshold 1: nothing suppressed, the first 8 anchors in order, class 0
        assert np.asarray(got[1]).ravel().tolist() == [0.0] * 8
        assert int(got[3][0]) == 8


def test_box_codes_wider_than_four_and_no_background():
    """Box encodings [1, N, 6] (TFLM reads the first four of each row); num_classes == columns."""
    n, o = 30, _opts(4, max_detections=6, max_classes_per_detection=2)
    rng = np.random.default_rng(8)
    blob = _model(n, o, background=0, anchors=_anchors(rng, n), stride=6)
    xs = [rng.normal(0, 1, (1, n, 6)).astype(np.float32), rng.uniform(0, 1, (1, n, 4)).astype(np.float32)]
    _check(blob, xs, o)


def test_float_reference_close_to_the_float32_run():
    """The float64 reference (pyembed.model.ops.detpost) agrees where float32 rounding decides nothing:
    distinct scores, IoUs away from the threshold; boxes to float32 precision."""
    n, o = 50, _opts(3, max_detections=5, nms_iou_threshold=0.5)
    rng = np.random.default_rng(21)
    anc = _anchors(rng, n)
    blob = _model(n, o, anchors=anc)
    xs = [rng.normal(0, 1, (1, n, 4)).astype(np.float32), rng.permutation(n * 4).reshape(1, n, 4).astype(np.float32) / (n * 4)]
    g, got = _check(blob, xs, o)
    ref = run_float(g, [x.astype(np.float64) for x in xs])
    outs = g.operators[0].outputs
    num = int(got[3][0])
    assert ref[outs[3]].ravel().tolist() == [float(num)]
    assert np.array_equal(ref[outs[1]].ravel()[:num], np.asarray(got[1]).ravel()[:num])
    assert np.allclose(ref[outs[2]].ravel()[:num], np.asarray(got[2]).ravel()[:num], rtol=0, atol=1e-6)
    assert np.allclose(ref[outs[0]].reshape(-1, 4)[:num], np.asarray(got[0]).reshape(-1, 4)[:num], rtol=1e-5, atol=1e-6)


def test_empty_decoded_box_fails_as_in_tflm():
    """A zero-height anchor decodes to ymin == ymax: TFLM fails the invocation, pyembed's run too."""
    n, o = 12, _opts(2)
    rng = np.random.default_rng(3)
    anc = _anchors(rng, n)
    anc[5, 2] = 0.0
    blob = _model(n, o, anchors=anc)
    xs = [rng.normal(0, 1, (1, n, 4)).astype(np.float32), rng.uniform(0, 1, (1, n, 3)).astype(np.float32)]
    with pytest.raises(RuntimeError):
        _tflm(blob, xs)
    g = load_tflite_bytes(blob, name="detpost")
    with pytest.raises(PyEmbedError):
        g.run(xs)


# -- what is refused ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_quantized_inputs_refused_as_tflm_fails_them(dtype):
    """TFLM's kernel decodes float32 only: int8 / uint8 models fail to invoke; pyembed says so."""
    n, o = 10, _opts(2)
    blob = _model(n, o, anchors=_anchors(np.random.default_rng(0), n), dtype=dtype)
    x = [np.zeros((1, n, 4), dtype), np.zeros((1, n, 3), dtype)]
    with pytest.raises(RuntimeError):
        _tflm(blob, x)
    g = load_tflite_bytes(blob, name="detpost_q")
    assert g.unsupported
    assert "only float32" in g.operators[0].reason and "TFLM" in g.operators[0].reason


@pytest.mark.parametrize("change, match", [
    ({"nms_iou_threshold": 0.0}, "nms_iou_threshold"),
    ({"nms_iou_threshold": 1.5}, "nms_iou_threshold"),
    ({"y_scale": 0.0}, "y_scale"),
    ({"max_detections": 0}, "max_detections"),
    ({"num_classes": None}, "num_classes"),
    ({"max_classes_per_detection": 2.5}, "max_classes_per_detection"),
    ({"nms_score_threshold": "high"}, "nms_score_threshold"),
])
def test_bad_options_refused(change, match):
    o = _opts(3)
    rows = _rows(o)
    o.update(change)
    o = {k: v for k, v in o.items() if v is not None}
    blob = _model(10, o, rows=rows, anchors=_anchors(np.random.default_rng(0), 10), columns=4)
    with pytest.raises(ModelError, match=match):
        load_tflite_bytes(blob, name="bad")


def test_class_columns_inconsistent_with_num_classes():
    o = _opts(3)
    blob = _model(10, o, background=2, anchors=_anchors(np.random.default_rng(0), 10))
    with pytest.raises(ModelError, match="num_classes or num_classes \\+ 1"):
        load_tflite_bytes(blob, name="bad")


def test_outputs_shorter_than_tflm_writes_refused():
    """Fast NMS, 2 classes per detection, the converter's D = max_detections * 2: TFLM's offsets
    K * e + col would run past the outputs; refused (naming the row it would reach)."""
    o = _opts(3, max_detections=5, max_classes_per_detection=2)
    blob = _model(10, o, rows=10, anchors=_anchors(np.random.default_rng(0), 10))
    with pytest.raises(ModelError, match="writes 20"):
        load_tflite_bytes(blob, name="bad")


# -- one Cortex-M4 firmware under QEMU --------------------------------------------------------------

def _qemu_missing():
    from pyembed.target import qemu
    return qemu.missing_tools()


@pytest.mark.skipif(_qemu_missing() is not None, reason=str(_qemu_missing()))
@pytest.mark.parametrize("regular", [False, True])
def test_firmware_under_qemu(tmp_path, regular):
    """A Cortex-M4F (mps2-an386) firmware gives the host's bits (== TFLM, checked first): the decoding's
    double exp is newlib's on the board, glibc's on the host."""
    from pyembed.target.firmware import build_project, generate, run_project
    n, o = 120, _opts(5, max_detections=10, use_regular_nms=regular, detections_per_class=6)
    rng = np.random.default_rng(40 + regular)
    blob = _model(n, o, anchors=_anchors(rng, n))
    g = load_tflite_bytes(blob, name="detpost_fw")
    proj = generate(g, "mps2-an386", tmp_path / "fw")
    build_project(proj.outdir)
    for k in range(2):
        xs = [rng.normal(0, 1.5, (1, n, 4)).astype(np.float32), (rng.integers(0, 17, (1, n, 6)) / 16).astype(np.float32)]
        _, want = _check(blob, xs, o)
        got = run_project(proj, xs).outputs
        for a, b in zip(got, want):
            assert np.array_equal(_bits(np.asarray(a, np.float32).reshape(b.shape)), _bits(b))
