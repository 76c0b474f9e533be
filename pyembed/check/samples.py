"""Real input samples bundled for the bundled models (pyembed/data/samples).

    from pyembed.check.samples import bundled_samples, predictions
    s = bundled_samples(graph)          # None when pyembed has no samples for this model
    s.x, s.names, s.expected, s.labels, s.kind, s.note
    for p in predictions(graph, s): print(p.line())

A model is "known" when its file has the same bytes as a bundled model (so a
renamed copy is recognised, and an edited model with the same name is not)
and its first input has the shape and type of the stored samples. The
samples are made by tools/make_samples.py from sources installed packages
provide; pyembed/data/samples/README.md says where each comes from.

``predictions`` runs each sample through the int8 network (pyembed's C
runtime) and the float64 reference (pyembed.float_ref, from the same
dequantized input) and reads the outputs the way the model is used: the top
class for classifiers, the value for hello_world's sine, the reconstruction
error (anomaly score) for the autoencoder, the mean mask for DTLN, and for an
image-to-image model (kind "image", samples with their ``clean`` images) the
PSNR of each output against the clean image, and of the int8 output against
the float64 one.
"""
import dataclasses
import hashlib
import os

import numpy as np

from pyembed.data import MODELS_DIR, SAMPLES_DIR

KINDS = ("classifier", "regression", "autoencoder", "mask", "features", "image")


@dataclasses.dataclass
class Samples:
    model: str              # bundled model stem
    x: np.ndarray           # batch of inputs in the model's input type and shape
    names: list             # what each sample is
    expected: list          # true label / value per sample ("" when none)
    labels: list            # class names of the output (empty when not a classifier)
    kind: str
    note: str
    path: str
    clean: np.ndarray = None   # kind "image": the images the noisy inputs x were made from (x's type and shape)

    def __len__(self):
        return int(self.x.shape[0])

    @property
    def source(self):
        """One phrase for reports: where the inputs come from."""
        return f"bundled real samples, {os.path.basename(self.path)}"


_MD5 = {}


def _md5(path):
    st = os.stat(path)
    key = (os.path.abspath(path), st.st_size, st.st_mtime_ns)
    if key not in _MD5:
        with open(path, "rb") as f:
            _MD5[key] = hashlib.md5(f.read()).hexdigest()
    return _MD5[key]


def _bundled_stem(path):
    """The stem of the bundled model with the same bytes as ``path``, or None."""
    if not path or not os.path.isfile(path):
        return None
    digest = _md5(path)
    size = os.path.getsize(path)
    for name in sorted(os.listdir(MODELS_DIR)):
        if not name.endswith(".tflite"):
            continue
        p = os.path.join(MODELS_DIR, name)
        if os.path.getsize(p) == size and _md5(p) == digest:
            return name[:-len(".tflite")]
    return None


def load_samples_file(path, stem=None):
    with np.load(path, allow_pickle=False) as z:
        return Samples(model=stem or os.path.basename(path)[:-4], x=z["x"], names=[str(s) for s in z["names"]],
                       expected=[str(s) for s in z["expected"]], labels=[str(s) for s in z["labels"]],
                       kind=str(z["kind"]), note=str(z["note"]), path=path,
                       clean=z["clean"] if "clean" in z.files else None)


def bundled_samples(model):
    """The bundled samples for a model (a Graph or a model path), or None."""
    path = getattr(model, "source_path", None) if hasattr(model, "operators") else os.fspath(model)
    stem = _bundled_stem(path)
    if stem is None:
        return None
    spath = os.path.join(SAMPLES_DIR, stem + ".npz")
    if not os.path.exists(spath):
        return None
    s = load_samples_file(spath, stem)
    if hasattr(model, "operators") and model.inputs:
        t = model.tensors[model.inputs[0]]
        if s.x.dtype != t.dtype or int(np.prod(s.x.shape[1:])) != t.size:
            return None
    return s


def available():
    """Bundled model stems that have samples."""
    return sorted(n[:-4] for n in os.listdir(SAMPLES_DIR) if n.endswith(".npz"))


# -- reading the outputs -------------------------------------------------------------------

@dataclasses.dataclass
class Prediction:
    name: str
    expected: str
    int8: str               # the int8 network's answer
    float: str              # the float64 reference's answer
    agree: bool             # same top class (classifiers) / within tolerance
    detail: str = ""

    def line(self, width=44):
        mark = "same" if self.agree else "DIFFERENT"
        exp = f"  (true: {self.expected})" if self.expected else ""
        det = f"  {self.detail}" if self.detail else ""
        return f"{self.name[:width]:<{width}} int8 {self.int8:<14} float64 {self.float:<14} {mark}{exp}{det}"


def _real(tensor, v):
    from pyembed.model.float_ref import dequantize
    return dequantize(tensor, v)


def psnr(a, b, peak=1.0):
    """Peak signal-to-noise ratio in dB of two real images with values in [0, peak]."""
    mse = float(np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2))
    return float("inf") if mse == 0 else 10.0 * np.log10(peak * peak / mse)


def _image_prediction(graph, samples, k, name, expected, x_real, q, r):
    """An image-to-image model's sample k: PSNR of the int8 and float64 outputs
    against the clean image (real values clipped to the input's range, [0, 1] for
    the bundled denoiser) and of the int8 output against the float64 one."""
    t_in = graph.tensors[graph.inputs[0]]
    lo, hi = (_real(t_in, np.array([-128, 127], t_in.dtype)) if t_in.dtype == np.int8 else (0.0, 1.0))
    peak = float(hi - lo)
    clip = lambda v: np.clip(v, lo, hi)  # noqa: E731
    if samples.clean is None:
        return Prediction(name, expected, f"{q.size} values", f"{r.size} values", False, "no clean images")
    clean = _real(t_in, samples.clean[k]).reshape(-1)
    pq, pr = psnr(clip(q), clean, peak), psnr(clip(r), clean, peak)
    pn = psnr(x_real[0].reshape(-1), clean, peak)
    pqr = psnr(clip(q), clip(r), peak)
    # the int8 network does what the float64 one does: within 1 dB of its PSNR against the clean image
    return Prediction(name, expected, f"PSNR {pq:.2f} dB", f"PSNR {pr:.2f} dB", pq >= pr - 1.0,
                      f"noisy input {pn:.2f} dB; int8 against float64 {pqr:.2f} dB")


def predictions(graph, samples):
    """Prediction per sample: int8 network vs float64 reference."""
    from pyembed.check.accuracy import load_inputs
    from pyembed.model.float_ref import run_float
    batch = load_inputs(graph, samples.x)
    rt = graph.compile()
    order = list(rt.order)
    out_t = graph.outputs[0]
    out_tensor = graph.tensors[out_t]
    preds = []
    for k, xs in enumerate(batch):
        arena = rt.new_arena()
        for i, v in enumerate(xs):
            rt.set_input(arena, i, v)
        for step in range(len(order)):
            rt.invoke_op(step, arena)
        q = _real(out_tensor, rt.tensor_value(arena, out_t)).reshape(-1)
        x_real = [_real(graph.tensors[t], v) for t, v in zip(graph.inputs, xs)]
        r = np.asarray(run_float(graph, x_real, "float", order=order)[out_t], dtype=np.float64).reshape(-1)
        name, expected = samples.names[k], samples.expected[k]
        if samples.kind == "classifier":
            qi, ri = int(np.argmax(q)), int(np.argmax(r))
            lab = samples.labels if len(samples.labels) == q.size else [str(i) for i in range(q.size)]
            preds.append(Prediction(name, expected, f"{lab[qi]} {q[qi]:.2f}", f"{lab[ri]} {r[ri]:.2f}", qi == ri))
        elif samples.kind == "regression":
            tol = float(out_tensor.scale[0]) * 2 if out_tensor.is_quantized else 1e-3
            preds.append(Prediction(name, expected, f"{q[0]:.3f}", f"{r[0]:.3f}", abs(q[0] - r[0]) <= tol,
                                    f"|diff| {abs(q[0] - r[0]):.3f}"))
        elif samples.kind == "autoencoder":
            xin = x_real[0].reshape(-1)
            sq, sr = float(np.mean((xin - q) ** 2)), float(np.mean((xin - r) ** 2))
            preds.append(Prediction(name, expected, f"score {sq:.1f}", f"score {sr:.1f}",
                                    abs(sq - sr) <= 0.1 * max(sr, 1e-9), "anomaly score = mean squared "
                                    "reconstruction error"))
        elif samples.kind == "image":
            preds.append(_image_prediction(graph, samples, k, name, expected, x_real, q, r))
        else:
            lsb = float(out_tensor.scale[0]) if out_tensor.is_quantized else 1.0
            err = float(np.max(np.abs(q - r))) / lsb
            what = f"mean {q.mean():.3f}" if samples.kind == "mask" else f"{q.size} values"
            preds.append(Prediction(name, expected, what, f"mean {r.mean():.3f}" if samples.kind == "mask" else
                                    f"{r.size} values", err <= 2.0, f"max |diff| {err:.1f} LSB"))
    return preds


def agreement(preds):
    """(agreeing, total)."""
    return sum(p.agree for p in preds), len(preds)


def main():
    """Print int8 vs float64 answers on every bundled model's samples."""
    from pyembed.data import model_path
    from pyembed.model.load import load_model
    for stem in available():
        g = load_model(model_path(stem))
        s = bundled_samples(g)
        print(f"{stem}: {len(s)} samples ({s.kind})")
        if g.unsupported:
            print("  not runnable yet: " + ", ".join(sorted({t for _, t in g.unsupported})))
            continue
        for p in predictions(g, s):
            print("  " + p.line())


if __name__ == "__main__":
    main()
