"""TFLite_Detection_PostProcess (the SSD post-processing custom operator), float32,
on the kernel of csrc/include/pyembed/pe_detpost.h (runner csrc/src/graph/pe_run_detpost.c).

==============================================  ================================================
CUSTOM:TFLite_Detection_PostProcess (114)       num_boxes, box_stride, classes with background,
                                                num_classes, max_detections,
                                                max_classes_per_detection, detections_per_class,
                                                use_regular_nms, score / IoU thresholds,
                                                y / x / h / w scales (float32 bit patterns),
                                                output rows
==============================================  ================================================

Inputs: box encodings [1, N, >=4], class predictions [1, N, C or C + 1], anchors [N, 4]
(y, x, h, w); outputs boxes [1, D, 4], classes [1, D], scores [1, D], num detections [1].
TFLM's kernel (tflite-micro's detection_postprocess.cc) decodes float32 only: with int8 or
uint8 box encodings or class predictions its invocation fails (tested with the tflite-micro
interpreter), so pyembed runs float32 and refuses the quantized forms too.

Options (the flexbuffer map TFLM's Init reads): max_detections, max_classes_per_detection,
num_classes, nms_score_threshold, nms_iou_threshold, y_scale, x_scale, h_scale, w_scale
(required here), detections_per_class (default 100) and use_regular_nms (default false).

Fast NMS with K = min(max_classes_per_detection, num_classes) > 1: TFLM writes the K rows of
the e-th kept anchor at K * e' + col (e' its running row count, not e * K + col), rows up
to K * K * min(N, max_detections) - 1; a model whose outputs are shorter (the converter's
D = max_detections * K) would be written out of bounds by TFLM, and is refused here.
"""


import numpy as np

from pyembed.model.ops.base import Unsupported
from pyembed.model.ops.registry import register
from pyembed.model.ops.signal import custom_options

NAME = "CUSTOM:TFLite_Detection_PostProcess"
CODE = 114
MAX_COUNT = 65536          # PE_DETPOST_MAX_COUNT
DEFAULT_PER_CLASS = 100    # TFLM's kNumDetectionsPerClass

CONSTRAINTS = {
    NAME: "float32 only (TFLM's kernel fails on int8 / uint8 inputs); fast and regular NMS; "
          "boxes [1, N, >=4], scores [1, N, C(+1)], anchors [N, 4]; outputs at least the rows TFLM writes",
}


def _f32_bits(v):
    return int(np.array([v], np.float32).view(np.int32)[0])


def _opt(c, opts, key, kind, default=None):
    if key not in opts or opts[key] is None:
        if default is not None:
            return default
        raise c.error(f"custom option {key!r} is missing (TFLM's Init reads it)")
    v = opts[key]
    if kind is bool:
        if not isinstance(v, (bool, int)) or int(v) not in (0, 1):
            raise c.error(f"custom option {key!r} must be a boolean, got {v!r}")
        return bool(v)
    if kind is int:
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_COUNT:
            raise c.error(f"custom option {key!r} must be an integer in [1, {MAX_COUNT}], got {v!r}")
        return int(v)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise c.error(f"custom option {key!r} must be a number, got {v!r}")
    f = np.float32(v)   # TFLM's AsFloat: the stored value rounded to float32
    if not np.isfinite(f):
        raise c.error(f"custom option {key!r} must be finite, got {v!r}")
    return f


def options(c):
    """The operator's options, checked: a dict with float32 thresholds / scales."""
    o = custom_options(c)
    p = {k: _opt(c, o, k, int) for k in ("max_detections", "max_classes_per_detection", "num_classes")}
    p["detections_per_class"] = _opt(c, o, "detections_per_class", int, DEFAULT_PER_CLASS)
    p["use_regular_nms"] = _opt(c, o, "use_regular_nms", bool, False)
    for k in ("nms_score_threshold", "nms_iou_threshold", "y_scale", "x_scale", "h_scale", "w_scale"):
        p[k] = _opt(c, o, k, float)
    iou = p["nms_iou_threshold"]
    if not 0.0 < iou <= 1.0:
        raise c.error(f"custom option 'nms_iou_threshold' must be in (0, 1] (TFLM checks it), got {float(iou)!r}")
    for k in ("y_scale", "x_scale", "h_scale", "w_scale"):
        if not p[k] > 0:
            raise c.error(f"custom option {k!r} must be > 0 (the box codes are divided by it), got {float(p[k])!r}")
    return p


def rows_needed(p, n):
    """Output rows the run writes (pe_detpost.h)."""
    if p["use_regular_nms"]:
        return p["max_detections"]
    k = min(p["max_classes_per_detection"], p["num_classes"])
    return k * k * min(n, p["max_detections"])


def scratch_bytes(p, n):
    """pe_detpost_scratch_size."""
    words = 4 * n + 7 * n
    if p["use_regular_nms"]:
        words += 4 * (p["max_detections"] + min(p["detections_per_class"], n))
    else:
        words += n * min(p["max_classes_per_detection"], p["num_classes"])
    return 4 * words


@register(NAME, code=CODE, c_name="PE_GOP_DETECTION_POSTPROCESS")
def prepare_detection_postprocess(c):
    """TFLite_Detection_PostProcess in float32 (pe_detpost_f32)."""
    op = c.op
    if len(op.inputs) != 3 or len(op.outputs) != 4:
        raise c.error(f"{len(op.inputs)} inputs and {len(op.outputs)} outputs, expected 3 (box encodings, "
                      f"class predictions, anchors) and 4 (boxes, classes, scores, num detections)")
    box, cls, anc = c.tensor(0, "box encodings"), c.tensor(1, "class predictions"), c.tensor(2, "anchors")
    outs = [c.output(k) for k in range(4)]
    for t, what in ((box, "box encodings"), (cls, "class predictions"), (anc, "anchors")):
        if t.dtype is None or t.dtype != np.dtype(np.float32):
            raise Unsupported(f"{what} (tensor {t.index}) is {t.type_name or t.dtype}: only float32 is supported "
                              f"(TFLM's kernel decodes float32 only and fails on int8 / uint8)")
    for t, what in zip(outs, ("boxes", "classes", "scores", "num detections")):
        if t.dtype is None or t.dtype != np.dtype(np.float32):
            raise c.error(f"output {what} (tensor {t.index}) is {t.type_name or t.dtype}, expected float32")
    c.rank(box, "box encodings", 3)
    c.rank(cls, "class predictions", 3)
    c.rank(anc, "anchors", 2)
    n, stride = int(box.shape[1]), int(box.shape[2])
    if int(box.shape[0]) != 1 or int(cls.shape[0]) != 1:
        raise c.error(f"batch {int(box.shape[0])} / {int(cls.shape[0])}: TFLM's kernel takes batch 1")
    if not 1 <= n <= MAX_COUNT or not 4 <= stride <= MAX_COUNT:
        raise c.error(f"box encodings {list(box.shape)}: expected [1, N, >= 4] with 1 <= N <= {MAX_COUNT}")
    if int(cls.shape[1]) != n:
        raise c.error(f"class predictions {list(cls.shape)} have {int(cls.shape[1])} boxes, box encodings {n}")
    if [int(d) for d in anc.shape] != [n, 4]:
        raise c.error(f"anchors {list(anc.shape)}: expected [{n}, 4] (y, x, h, w per box)")
    p = options(c)
    c1 = int(cls.shape[2])
    if c1 - p["num_classes"] not in (0, 1):
        raise c.error(f"class predictions have {c1} columns, num_classes is {p['num_classes']}: TFLM needs "
                      f"num_classes or num_classes + 1 (a background column)")
    d = int(outs[1].shape[-1]) if len(outs[1].shape) else 0
    want = [[1, d, 4], [1, d], [1, d], [1]]
    got = [[int(x) for x in t.shape] for t in outs]
    if got != want:
        raise c.error(f"output shapes {got}: expected [[1, D, 4], [1, D], [1, D], [1]]")
    need = rows_needed(p, n)
    if d < need:
        k = min(p["max_classes_per_detection"], p["num_classes"])
        why = (f"fast NMS with {k} classes per detection writes row {k} * e + col of the e-th row "
               f"(TFLM's offsets), up to row {need - 1}; TFLM itself would write past these outputs"
               if not p["use_regular_nms"] and k > 1 else "max_detections rows")
        raise c.error(f"outputs have {d} rows, the operator writes {need}: {why}")
    words = [n, stride, c1, p["num_classes"], p["max_detections"], p["max_classes_per_detection"],
             p["detections_per_class"], int(p["use_regular_nms"]),
             _f32_bits(p["nms_score_threshold"]), _f32_bits(p["nms_iou_threshold"]),
             _f32_bits(p["y_scale"]), _f32_bits(p["x_scale"]), _f32_bits(p["h_scale"]), _f32_bits(p["w_scale"]), d]
    op.params = {"words": words, "detpost": p}
    # work: the decoding, each anchor's class scores, and the NMS's pairwise IoUs of the kept boxes
    per = p["num_classes"] if p["use_regular_nms"] else 1
    op.macs = int(n * (8 + c1) + per * n * min(n, p["detections_per_class"] if p["use_regular_nms"]
                                                  else p["max_detections"]))
    op.scratch_bytes = scratch_bytes(p, n)


# -- float64 reference ------------------------------------------------------------------------
# The same selection in float64: decoding with math.exp, the threshold, the order by score
# (ties lower anchor / class first), float64 IoUs. It can legitimately differ from the float32
# kernel (and TFLM) where float32 rounding decides: two scores or IoUs equal in float32 but
# not in float64 (or the reverse), an IoU within float32 rounding of the threshold, and the
# boxes' last bits.

def _decode64(p, box, anc):
    e = np.asarray(box, np.float64).reshape(-1, box.shape[-1])[:, :4]
    a = np.asarray(anc, np.float64).reshape(-1, 4)
    yc = e[:, 0] / float(p["y_scale"]) * a[:, 2] + a[:, 0]
    xc = e[:, 1] / float(p["x_scale"]) * a[:, 3] + a[:, 1]
    hh = 0.5 * np.exp(e[:, 2] / float(p["h_scale"])) * a[:, 2]
    hw = 0.5 * np.exp(e[:, 3] / float(p["w_scale"])) * a[:, 3]
    return np.stack([yc - hh, xc - hw, yc + hh, xc + hw], axis=1)


def _iou64(b, i, j):
    ai = (b[i, 2] - b[i, 0]) * (b[i, 3] - b[i, 1])
    aj = (b[j, 2] - b[j, 0]) * (b[j, 3] - b[j, 1])
    if ai <= 0 or aj <= 0:
        return 0.0
    inter = max(min(b[i, 2], b[j, 2]) - max(b[i, 0], b[j, 0]), 0.0) * max(min(b[i, 3], b[j, 3]) - max(b[i, 1], b[j, 1]), 0.0)
    return inter / (ai + aj - inter)


def _nms64(p, boxes, scores, max_out):
    kept = [i for i in range(len(scores)) if scores[i] >= float(p["nms_score_threshold"])]
    kept.sort(key=lambda i: (-scores[i], i))
    sel, alive = [], [True] * len(kept)
    for a in range(len(kept)):
        if len(sel) >= min(len(kept), max_out):
            break
        if not alive[a]:
            continue
        sel.append(kept[a])
        for b in range(a + 1, len(kept)):
            if alive[b] and _iou64(boxes, kept[a], kept[b]) > float(p["nms_iou_threshold"]):
                alive[b] = False
    return sel


def reference(graph, op, inputs):
    """(boxes, classes, scores, num) in float64, rows TFLM leaves unwritten as 0."""
    p = op.params["detpost"]
    box, cls, anc = (np.asarray(v, np.float64) for v in inputs)
    n, c1, c = box.shape[1], cls.shape[2], p["num_classes"]
    off = c1 - c
    s = cls.reshape(n, c1)[:, off:]
    boxes = _decode64(p, box, anc)
    if np.any((boxes[:, 0] >= boxes[:, 2]) | (boxes[:, 1] >= boxes[:, 3])):   # TFLM's test (NaN passes)
        from pyembed.errors import ModelError
        raise ModelError(f"operator {op.index} ({op.type}): a decoded box is empty (ymin >= ymax or xmin >= xmax); "
                         f"TFLM fails the invocation")
    d = op.params["words"][14]
    ob, oc, os_ = np.zeros((d, 4)), np.zeros(d), np.zeros(d)
    rows = []
    if not p["use_regular_nms"]:
        k = min(p["max_classes_per_detection"], c)
        best = [sorted(range(c), key=lambda j, r=r: (-s[r, j], j))[:k] for r in range(n)]
        sel = _nms64(p, boxes, [s[r, best[r][0]] for r in range(n)], p["max_detections"])
        e = 0
        for a in sel:
            for col in range(k):
                rows.append((k * e + col, a, best[a][col], s[a, best[a][col]]))
                e += 1
        num = e
    else:
        merged = []
        for col in range(c):
            merged += [(s[a, col], a, col) for a in _nms64(p, boxes, s[:, col], p["detections_per_class"])]
            order = sorted(range(len(merged)), key=lambda i: (-merged[i][0], i))
            merged = [merged[i] for i in order[:p["max_detections"]]]
        rows = [(i, a, col, v) for i, (v, a, col) in enumerate(merged)]
        num = len(merged)
    for r, a, col, v in rows:
        ob[r], oc[r], os_[r] = boxes[a], col, v
    return ob.reshape(1, d, 4), oc.reshape(1, d), os_.reshape(1, d), np.array([float(num)])


def float_reference(graph, op, inputs):
    """The boxes output (float64)."""
    return reference(graph, op, inputs)[0]


def float_reference_extra(graph, op, inputs):
    """The classes, scores and num detections outputs (float64)."""
    return reference(graph, op, inputs)[1:]



