"""Fixed-point accuracy check: the int8 network against a float64 reference,
layer by layer, and against the TensorFlow Lite reference interpreters.

    from pyembed.check.accuracy import check_accuracy
    rep = check_accuracy("model.tflite", n=8)          # or inputs=array / "x.npy"
    print(rep.table())                                 # end to end (default)
    print(rep.table("per_layer"))                      # each layer's own error
    rep.plot_snr("snr.png"); rep.to_dict(); rep.ok

What is compared. The int8 network runs on pyembed's C graph runtime with
its default arithmetic (TFLite / TFLM / CMSIS-NN double-rounding
requantization), keeping every intermediate tensor. The float reference
(:mod:`pyembed.model.float_ref`) starts from the dequantized int8 input and runs
every operator in float64 with dequantized weights. For each operator output
the int8 tensor is dequantized and compared with the float tensor of the same
index, over all inputs together:

* SNR (dB)       10 log10(sum ref^2 / sum (int8 - ref)^2); inf when identical
* max / mean |int8 - ref| in output LSBs (units of the output scale)
* cosine         similarity of the two tensors as flat vectors
* out of range   share of float values beyond what the int8 output can
                 represent (saturation: random inputs cause a lot of it)

Two tables: "end_to_end" feeds each float layer the float outputs before it
(the error accumulated up to that layer); "per_layer" feeds each float layer
the dequantized int8 values of its inputs (the error that layer adds on its
own). Layers with SNR below ``min_snr_db`` are flagged.

Oracles (where installed, .tflite models): the outputs are compared bit for
bit with LiteRT's interpreter using its reference kernels (BUILTIN_REF;
pyembed runs with rounding="litert": LiteRT's single-rounding
FULLY_CONNECTED, its integer LSTM and the other kernels where they differ)
and with the tflite-micro interpreter (pyembed's default
rounding). A missing oracle is reported, not an error.
"""
import dataclasses
import math
import os

import numpy as np

from pyembed.errors import ArgumentError
from pyembed.model.float_ref import dequantize, run_float
from pyembed.model.graph import random_inputs  # noqa: F401  (part of this module's API)

MODES = ("end_to_end", "per_layer")
MODE_TITLES = {
    "end_to_end": "end to end: float reference run from the same input, each layer fed the float outputs before it "
                  "(error accumulated up to the layer)",
    "per_layer": "per layer: each float layer fed the dequantized int8 values of its inputs (the error the layer "
                 "adds on its own)",
}
DEFAULT_MIN_SNR_DB = 20.0


@dataclasses.dataclass
class LayerError:
    op: int
    type: str
    tensor: int
    name: str
    shape: tuple
    snr_db: float
    max_abs_lsb: float
    mean_abs_lsb: float
    cosine: float
    out_of_range: float     # share of float values the int8 output cannot represent
    flagged: bool = False

    def to_dict(self):
        d = dataclasses.asdict(self)
        d["shape"] = list(self.shape)
        for k in ("snr_db", "max_abs_lsb", "mean_abs_lsb", "cosine", "out_of_range"):
            d[k] = _json_float(d[k])
        return d


@dataclasses.dataclass
class OracleResult:
    name: str               # "LiteRT (BUILTIN_REF)" / "tflite-micro"
    status: str             # bit-exact | mismatch | not installed | error | not applicable
    detail: str = ""
    inputs: int = 0
    elements: int = 0
    mismatches: int = 0

    def line(self):
        if self.status == "bit-exact":
            return (f"{self.name}: bit-exact on {self.inputs} input(s), all {self.elements} output elements equal "
                    f"({self.detail})")
        if self.status == "mismatch":
            return (f"{self.name}: MISMATCH, {self.mismatches} of {self.elements} output elements differ on "
                    f"{self.inputs} input(s) ({self.detail})")
        if self.status == "error":
            return f"{self.name}: FAILED, it cannot run the model" + (f" ({self.detail})" if self.detail else "")
        # not installed / not applicable: nothing was compared, and the line says so
        return f"{self.name}: not compared, {self.status}" + (f" ({self.detail})" if self.detail else "")


TASKS = ("auto", "classify", "regress")
CLASSIFIER_OPS = ("SOFTMAX", "LOG_SOFTMAX")


def output_tasks(graph, task="auto", samples=None):
    """"classify" or "regress" per graph output. task "classify" / "regress"
    applies to every output; "auto": classify an output a SOFTMAX or
    LOG_SOFTMAX writes (through a trailing QUANTIZE / DEQUANTIZE / RESHAPE),
    or any output of a model whose bundled samples are a classifier's; the
    others are regression outputs."""
    if task not in TASKS:
        raise ArgumentError(f"task: expected one of {', '.join(TASKS)}, got {task!r}")
    if task != "auto":
        return [task] * len(graph.outputs)
    if getattr(samples, "kind", None) == "classifier":
        return ["classify"] * len(graph.outputs)
    writer = {o: op for op in graph.operators for o in op.outputs if o >= 0}
    out = []
    for t in graph.outputs:
        op = writer.get(t)
        while op is not None and op.type in ("QUANTIZE", "DEQUANTIZE", "RESHAPE") and op.inputs:
            op = writer.get(op.inputs[0])
        out.append("classify" if op is not None and op.type in CLASSIFIER_OPS else "regress")
    return out


@dataclasses.dataclass
class OutputError:
    """One graph output, int8 against the float64 model end to end."""
    output: int
    task: str                 # classify | regress
    scale: float              # real units per LSB
    snr_db: float
    max_abs: float            # real units
    mean_abs: float
    max_abs_lsb: float
    mean_abs_lsb: float
    top_class_agree: float | None = None   # classifiers: share of inputs whose argmax agrees

    def line(self):
        snr = "exact" if self.snr_db == math.inf else f"{self.snr_db:.1f} dB"
        err = (f"max abs error {self.max_abs:.4g} ({self.max_abs_lsb:.2f} LSB), mean abs error {self.mean_abs:.4g} "
               f"({self.mean_abs_lsb:.3f} LSB), SNR {snr}")
        if self.task == "classify":
            agree = ("top class not comparable (one value)" if self.top_class_agree is None else
                     f"the int8 and float top class agree on {100 * self.top_class_agree:.0f}% of inputs")
            return f"output {self.output} (classifier): {agree}; {err}"
        return f"output {self.output} (regression): {err}"

    def to_dict(self):
        d = dataclasses.asdict(self)
        for k in ("snr_db", "max_abs", "mean_abs", "max_abs_lsb", "mean_abs_lsb"):
            d[k] = _json_float(d[k])
        return d


@dataclasses.dataclass
class AccuracyReport:
    model: str
    inputs: int
    input_source: str
    rounding: str
    min_snr_db: float
    layers: dict                    # mode -> [LayerError]
    oracles: list
    output_agreement: list          # per graph output: share of inputs whose argmax agrees (classifiers)
    synthetic: bool = False         # random inputs, not real data
    outputs: list = dataclasses.field(default_factory=list)   # OutputError per graph output

    @property
    def oracle_errors(self):
        """The installed oracles that could not run the model."""
        return [o for o in self.oracles if o.status == "error"]

    def flagged(self, mode="end_to_end"):
        return [r for r in self.layers[mode] if r.flagged]

    @property
    def bit_exact(self):
        """True / False when an oracle ran, None when none could."""
        ran = [o for o in self.oracles if o.status in ("bit-exact", "mismatch")]
        if not ran:
            return None
        return all(o.status == "bit-exact" for o in ran)

    @property
    def ok(self):
        """No oracle disagrees or fails to run the model, and no layer is below
        the threshold (end to end)."""
        return self.bit_exact is not False and not self.oracle_errors and not self.flagged("end_to_end")

    def table(self, mode="end_to_end"):
        if mode not in MODES:
            raise ArgumentError(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")
        rows = self.layers[mode]
        lines = [f"{'op':>3}  {'type':<18} {'output shape':<16} {'SNR dB':>7} {'max LSB':>8} {'mean LSB':>8} "
                 f"{'cosine':>8} {'out of range':>12}"]
        for r in rows:
            snr = "exact" if r.snr_db == math.inf else f"{r.snr_db:.1f}"
            flag = f"  < {self.min_snr_db:g} dB" if r.flagged else ""
            lines.append(f"{r.op:>3}  {r.type:<18} {'x'.join(map(str, r.shape)):<16} {snr:>7} {r.max_abs_lsb:>8.2f} "
                         f"{r.mean_abs_lsb:>8.3f} {r.cosine:>8.5f} {100 * r.out_of_range:>11.1f}%{flag}")
        return "\n".join(lines)

    def oracle_lines(self):
        return [o.line() for o in self.oracles]

    def summary_lines(self, mode="end_to_end"):
        rows = self.layers["end_to_end"]      # the model's output against the float model's, whatever the table
        last = rows[-1] if rows else None
        out = [f"{self.model}: {self.inputs} input(s) ({self.input_source}), int8 arithmetic: {self.rounding}"]
        if self.synthetic:
            out.append("the inputs are SYNTHETIC (random, not real data): the figures show how the arithmetic "
                       "behaves on noise; give real samples with --inputs")
        if last is not None:
            snr = "exact" if last.snr_db == math.inf else f"{last.snr_db:.1f} dB"
            out.append(f"model output vs the float64 model run end to end: SNR {snr}, max error "
                       f"{last.max_abs_lsb:.2f} LSB, cosine {last.cosine:.5f}")
        if self.outputs:
            out.extend(o.line() for o in self.outputs)
        else:
            for k, agree in enumerate(self.output_agreement):
                if agree is not None:
                    out.append(f"output {k}: the int8 and float top class agree on {100 * agree:.0f}% of inputs")
        flagged = self.flagged(mode)
        out.append(f"layers below {self.min_snr_db:g} dB SNR ({mode.replace('_', ' ')}): "
                   + (", ".join(f"#{r.op} {r.type}" for r in flagged) if flagged else "none"))
        return out

    def to_dict(self):
        return {
            "model": self.model, "inputs": self.inputs, "input_source": self.input_source,
            "rounding": self.rounding, "min_snr_db": self.min_snr_db, "synthetic": self.synthetic,
            "modes": {m: MODE_TITLES[m] for m in MODES},
            "layers": {m: [r.to_dict() for r in rows] for m, rows in self.layers.items()},
            "flagged": {m: [r.op for r in self.flagged(m)] for m in MODES},
            "oracles": [dataclasses.asdict(o) for o in self.oracles],
            "bit_exact": self.bit_exact,
            "output_agreement": self.output_agreement,
            "outputs": [o.to_dict() for o in self.outputs],
            "oracle_errors": [o.name for o in self.oracle_errors],
            "ok": self.ok,
        }

    def plot_snr(self, path, title=None):
        """Per-layer SNR of both tables as a PNG (matplotlib Agg); identical
        tensors are drawn at the top of the axis and marked 'exact'."""
        from pyembed._extras import pyplot
        plt = pyplot("the per-layer SNR plot")
        finite = [r.snr_db for rows in self.layers.values() for r in rows if math.isfinite(r.snr_db)]
        top = max([self.min_snr_db] + finite) + 10
        bottom = min([0.0] + finite) - 2
        labels = [f"#{r.op} {r.type}" for r in self.layers["end_to_end"]]
        # at most PANEL layers per row of the figure, rows stacked: the width stays that of a page
        # however many layers the model has (a 300-layer model is six rows, not a 12,000-pixel strip)
        panels = [(lo, min(lo + SNR_PANEL, len(labels))) for lo in range(0, max(1, len(labels)), SNR_PANEL)]
        width_in = max(7, 0.2 * min(len(labels), SNR_PANEL) + 3) if len(panels) == 1 else 13
        fig, axes = plt.subplots(len(panels), 1, figsize=(width_in, 3.6 * len(panels) + 0.6), squeeze=False)
        width = 0.4
        for (lo, hi), ax in zip(panels, axes[:, 0]):
            x = np.arange(lo, hi)
            for k, (mode, colour) in enumerate((("end_to_end", "tab:blue"), ("per_layer", "tab:orange"))):
                rows = self.layers[mode][lo:hi]
                vals = [min(r.snr_db, top) if r.snr_db != -math.inf else bottom for r in rows]
                bars = ax.bar(x[:len(rows)] + (k - 0.5) * width, [v - bottom for v in vals], width, bottom=bottom,
                              color=colour, label=mode.replace("_", " "))
                for b, r in zip(bars, rows):
                    if r.snr_db == math.inf:
                        # inside the bar, from its top down: above it the label ran out of the axes
                        ax.text(b.get_x() + b.get_width() / 2, top - 0.5, "exact", ha="center", va="top",
                                fontsize=6, rotation=90, color="white", fontweight="bold")
            ax.axhline(self.min_snr_db, color="red", linestyle="--", linewidth=1,
                       label=f"threshold {self.min_snr_db:g} dB")
            ax.set_xticks(x)
            ax.set_xticklabels(labels[lo:hi], rotation=60, ha="right", fontsize=7 if hi - lo <= 40 else 6)
            ax.set_xlim(lo - 0.7, lo + max(hi - lo, min(len(labels), SNR_PANEL)) - 0.3)
            ax.set_ylabel("SNR (dB) vs float64")
            ax.set_ylim(bottom, top + 6)
            ax.grid(axis="y", alpha=0.3)
        rows_note = f", layers {len(labels)} in rows of {SNR_PANEL}" if len(panels) > 1 else ""
        axes[0, 0].set_title(title or f"{self.model}: int8 vs float64 reference per layer "
                                      f"({self.inputs} inputs{rows_note})")
        axes[0, 0].legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.005, 1.0))
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path


SNR_PANEL = 50    # layers per row of the per-layer SNR figure


def _json_float(v):
    v = float(v)
    if math.isnan(v):
        return None
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


# -- inputs ------------------------------------------------------------------------



def _model_to_internal(graph, k, v):
    perm = graph.input_perms[k] if k < len(graph.input_perms) else None
    return v.transpose(perm) if perm is not None else v


def _to_input_type(tensor, v, name):
    """An array for an input tensor: kept when it has its dtype, quantized
    (round half away from zero, saturated) when it is real-valued."""
    if v.dtype == tensor.dtype:
        return v
    if v.dtype.kind == "f" and np.issubdtype(tensor.dtype, np.integer):
        if not tensor.is_quantized:
            raise ArgumentError(f"{name}: real values for an unquantized {tensor.dtype.name} input")
        scale, zp = float(tensor.scale[0]), int(tensor.zero_point[0]) if tensor.zero_point is not None else 0
        q = v.astype(np.float64) / scale
        q = np.where(q >= 0, np.floor(q + 0.5), np.ceil(q - 0.5)) + zp
        info = np.iinfo(tensor.dtype)
        return np.clip(q, info.min, info.max).astype(tensor.dtype)
    if v.dtype.kind in "iu" and np.issubdtype(tensor.dtype, np.integer):
        info = np.iinfo(tensor.dtype)
        if v.size and (v.min() < info.min or v.max() > info.max):
            raise ArgumentError(f"{name}: values in [{v.min()}, {v.max()}] do not fit {tensor.dtype.name}")
        return v.astype(tensor.dtype)
    if tensor.dtype.kind == "f":
        return v.astype(tensor.dtype)
    raise ArgumentError(f"{name}: dtype {v.dtype} cannot feed a {tensor.dtype.name} input")


def load_inputs(graph, source):
    """Samples from an array, a list of arrays, or a .npy / .npz file.

    An array shaped like the (first) input is one sample; with one more
    leading axis it is a batch of samples. Integer arrays are used as they
    are; float arrays are real values and are quantized with the input's
    scale and zero point. A .npz holds one array per graph input, in order."""
    name = "inputs"
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        name = path
        if not os.path.exists(path):
            raise ArgumentError(f"inputs: {path}: no such file")
        try:
            loaded = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError):
            raise ArgumentError(f"inputs: {path}: not a .npy/.npz numpy file (write one with numpy.save)") from None
        if isinstance(loaded, np.lib.npyio.NpzFile):
            arrays = [loaded[k] for k in loaded.files]
            loaded.close()
        else:
            arrays = [loaded]
    elif isinstance(source, np.ndarray):
        arrays = [source]
    elif isinstance(source, (list, tuple)) and all(isinstance(a, np.ndarray) for a in source):
        arrays = list(source)
    else:
        raise ArgumentError(f"inputs: expected an array, a list of arrays or a .npy/.npz path, got "
                            f"{type(source).__name__}")
    if len(arrays) != len(graph.inputs):
        raise ArgumentError(f"{name}: the model has {len(graph.inputs)} input(s), got {len(arrays)} array(s)")
    per_input = []
    for k, (a, t) in enumerate(zip(arrays, graph.inputs)):
        tensor = graph.tensors[t]
        perm = graph.input_perms[k] if k < len(graph.input_perms) else None
        model_shape = tuple(tensor.shape) if perm is None else \
            tuple(tensor.shape[perm.index(i)] for i in range(len(perm)))
        shape = tuple(a.shape)
        if shape == model_shape or (model_shape[:1] == (1,) and shape == model_shape[1:]):
            batch = [a.reshape(model_shape)]
        elif shape[1:] == model_shape or (model_shape[:1] == (1,) and shape[1:] == model_shape[1:]):
            batch = [s.reshape(model_shape) for s in a]
        else:
            raise ArgumentError(f"{name}: input {k} has shape {model_shape}; got an array of shape {shape} "
                                f"(one sample, or a batch with one more leading axis)")
        per_input.append([_to_input_type(tensor, _model_to_internal(graph, k, s), name) for s in batch])
    counts = {len(b) for b in per_input}
    if len(counts) != 1:
        raise ArgumentError(f"{name}: the inputs hold different numbers of samples {sorted(counts)}")
    if counts == {0}:
        raise ArgumentError(f"{name}: no samples")
    return [list(s) for s in zip(*per_input)]


# -- the check -----------------------------------------------------------------------

def _run_int8(rt, graph, xs):
    arena = rt.new_arena()
    for k, v in enumerate(xs):
        rt.set_input(arena, k, v)
    values = {t: rt.tensor_value(arena, t) for t in graph.inputs}
    for step, opi in enumerate(rt.order):
        rt.invoke_op(step, arena)
        for t in graph.operators[opi].outputs:
            if t >= 0:
                values[t] = rt.tensor_value(arena, t)
    return values


class _Stats:
    """Sums over all samples for one tensor."""

    def __init__(self):
        self.sig = self.noise = self.dot = self.qq = self.abs_sum = 0.0
        self.abs_max = 0.0
        self.count = self.out = 0

    def add(self, q, r, scale, lo, hi):
        e = q - r
        self.sig += float(np.sum(r * r))
        self.noise += float(np.sum(e * e))
        self.dot += float(np.sum(q * r))
        self.qq += float(np.sum(q * q))
        a = np.abs(e) / scale
        self.abs_sum += float(a.sum())
        self.abs_max = max(self.abs_max, float(a.max()) if a.size else 0.0)
        self.count += q.size
        self.out += int(np.count_nonzero((r < lo) | (r > hi)))

    def result(self):
        if self.noise == 0.0:
            snr = math.inf
        elif self.sig == 0.0:
            snr = -math.inf
        else:
            snr = 10.0 * math.log10(self.sig / self.noise)
        denom = math.sqrt(self.sig * self.qq)
        cos = self.dot / denom if denom > 0 else (1.0 if self.sig == self.qq == 0 else 0.0)
        return snr, self.abs_max, self.abs_sum / max(1, self.count), cos, self.out / max(1, self.count)


def _output_range(tensor):
    """Real values the tensor's integer type can represent, widened by half an LSB."""
    if not tensor.is_quantized or not np.issubdtype(tensor.dtype, np.integer):
        return 1.0, -math.inf, math.inf
    scale = float(tensor.scale[0])
    zp = int(tensor.zero_point[0]) if tensor.zero_point is not None and len(tensor.zero_point) else 0
    info = np.iinfo(tensor.dtype)
    return scale, (info.min - zp - 0.5) * scale, (info.max - zp + 0.5) * scale


def calibrated_random_inputs(graph, n, seed=0):
    """n random samples (internal tensor shapes) drawn from each input's
    calibrated range, and a phrase saying what they are.

    An integer input: uniform over its type (its quantization covers the
    calibrated real range exactly). A float input that a QUANTIZE reads:
    uniform over the real range that quantization represents. A float input
    with no quantization anywhere: standard normal (said so)."""
    rng = np.random.default_rng(seed)
    consumers = {}
    for op in graph.operators:
        for t in op.inputs:
            consumers.setdefault(t, []).append(op)
    how = []
    ranges = []
    for t in graph.inputs:
        tensor = graph.tensors[t]
        if np.issubdtype(tensor.dtype, np.integer):
            info = np.iinfo(tensor.dtype)
            ranges.append(("int", info.min, info.max))
            how.append(f"uniform over {tensor.dtype.name}")
            continue
        q = next((graph.tensors[op.outputs[0]] for op in consumers.get(t, []) if op.type == "QUANTIZE"
                  and graph.tensors[op.outputs[0]].is_quantized), None)
        if q is not None:
            scale, zp = float(q.scale[0]), int(q.zero_point[0]) if q.zero_point is not None else 0
            info = np.iinfo(q.dtype)
            lo, hi = (info.min - zp) * scale, (info.max - zp) * scale
            ranges.append(("float", lo, hi))
            how.append(f"uniform over its quantized range [{lo:.3g}, {hi:.3g}]")
        else:
            ranges.append(("normal", 0.0, 1.0))
            how.append("standard normal (no quantization range known)")
    samples = []
    for _ in range(int(n)):
        xs = []
        for t, (kind, lo, hi) in zip(graph.inputs, ranges):
            tensor = graph.tensors[t]
            if kind == "int":
                xs.append(rng.integers(lo, hi + 1, size=tensor.shape, dtype=tensor.dtype))
            elif kind == "float":
                xs.append(rng.uniform(lo, hi, size=tensor.shape).astype(tensor.dtype))
            else:
                xs.append(rng.standard_normal(tensor.shape).astype(tensor.dtype))
        samples.append(xs)
    return samples, f"synthetic: random, seed {seed}, " + "; ".join(sorted(set(how)))


def check_accuracy(model, inputs=None, n=8, seed=0, min_snr_db=DEFAULT_MIN_SNR_DB, oracles=True,
                   progress=None, task="auto"):
    """Compare the int8 network with the float64 reference (both tables) and
    with the TFLite reference interpreters. Returns an AccuracyReport.

    model: a Graph or a model path. inputs: None (n random samples, seeded,
    drawn from each input's calibrated range: see calibrated_random_inputs),
    a pyembed.check.samples.Samples (bundled real samples), an array / list
    of arrays, or a .npy / .npz path (see load_inputs).
    progress: optional callable(iterable, length, label) -> iterable, used to
    show progress over the samples. task: "auto", "classify" or "regress"
    (output_tasks): top-class agreement only for classifier outputs; every
    output gets its error statistics (report.outputs)."""
    from pyembed.model.load import load_model
    from pyembed.model.validate import validate_graph
    graph = model if hasattr(model, "operators") else load_model(model)
    validate_graph(graph)
    graph.check_supported()
    # the int8 run uses the no-reuse layout: refuse sizes past the int32 ABI before making inputs
    graph.linear_layout()
    synthetic = False
    if inputs is None:
        if int(n) < 1:
            raise ArgumentError(f"n: expected at least 1 random input, got {n}")
        samples, source = calibrated_random_inputs(graph, n, seed)
        synthetic = True
    elif hasattr(inputs, "x") and hasattr(inputs, "names"):       # bundled Samples
        samples = load_inputs(graph, inputs.x)
        source = inputs.source
    else:
        samples = load_inputs(graph, inputs)
        source = os.path.basename(os.fspath(inputs)) if isinstance(inputs, (str, os.PathLike)) else "given"
    tasks = output_tasks(graph, task, inputs)
    rt = graph.compile()
    stats = {m: {} for m in MODES}
    out_stats = [_Stats() for _ in graph.outputs]
    order = list(rt.order)
    agree = [[] for _ in graph.outputs]
    it = range(len(samples))
    if progress is not None:
        it = progress(it, len(samples), "int8 vs float64")
    for i in it:
        xs = samples[i]
        q = _run_int8(rt, graph, xs)
        x_real = [dequantize(graph.tensors[t], v) for t, v in zip(graph.inputs, xs)]
        ref = {"end_to_end": run_float(graph, x_real, "float", order=order),
               "per_layer": run_float(graph, x_real, "int8", int8_values=q, order=order)}
        for mode in MODES:
            for opi in order:
                t = graph.operators[opi].outputs[0]
                tensor = graph.tensors[t]
                scale, lo, hi = _output_range(tensor)
                stats[mode].setdefault(t, _Stats()).add(dequantize(tensor, q[t]), ref[mode][t], scale, lo, hi)
        for k, t in enumerate(graph.outputs):
            qa, ra = q[t], ref["end_to_end"][t]
            scale, lo, hi = _output_range(graph.tensors[t])
            out_stats[k].add(dequantize(graph.tensors[t], qa), ra, scale, lo, hi)
            if tasks[k] == "classify" and qa.size > 1 and qa.shape[-1] > 1:
                agree[k].append(float(np.mean(np.argmax(qa.reshape(-1, qa.shape[-1]), -1)
                                              == np.argmax(ra.reshape(-1, ra.shape[-1]), -1))))
    layers = {}
    for mode in MODES:
        rows = []
        for opi in order:
            op = graph.operators[opi]
            t = op.outputs[0]
            snr, mx, mean, cos, out = stats[mode][t].result()
            rows.append(LayerError(op.index, op.type, t, graph.tensors[t].name, tuple(graph.tensors[t].shape), snr,
                                   mx, mean, cos, out, flagged=snr < min_snr_db))
        layers[mode] = rows
    report = AccuracyReport(model=graph.name, inputs=len(samples), input_source=source,
                            rounding="double (TFLite reference / TFLM / CMSIS-NN)", min_snr_db=float(min_snr_db),
                            layers=layers, oracles=[], output_agreement=[float(np.mean(a)) if a else None
                                                                         for a in agree], synthetic=synthetic)
    if getattr(inputs, "kind", "classifier") != "classifier" and task == "auto":   # bundled non-classifier samples
        report.output_agreement = [None] * len(graph.outputs)
    for k, t in enumerate(graph.outputs):
        snr, mx, mean, _, _ = out_stats[k].result()
        scale = _output_range(graph.tensors[t])[0]
        report.outputs.append(OutputError(k, tasks[k], scale, snr, mx * scale, mean * scale, mx, mean,
                                          report.output_agreement[k] if tasks[k] == "classify" else None))
    if oracles:
        report.oracles = check_oracles(graph, samples)
    return report


def check_attention_modes(model, inputs=None, n=4, seed=0, min_snr_db=DEFAULT_MIN_SNR_DB, oracles=True,
                          modes=("tflm", "stream")):
    """check_accuracy of a transformer model with its blocks fused
    (pyembed.passes.transformer.fuse_transformer: LayerNorm, attention in
    each numeric mode, element-wise chains), both against the same float64
    model: {mode: AccuracyReport}. In "tflm" mode the tflite-micro oracle
    should report bit-exact; "stream" mode trades that for accuracy.
    model: a .tflite path (loaded once per mode)."""
    from pyembed.model.load import load_model
    from pyembed.passes.transformer import fuse_transformer
    out = {}
    for mode in modes:
        g = load_model(model)
        fuse_transformer(g, attention=mode)
        out[mode] = check_accuracy(g, inputs=inputs, n=n, seed=seed, min_snr_db=min_snr_db, oracles=oracles)
    return out


# -- oracles -----------------------------------------------------------------------------

def _tflite_source(graph):
    path = getattr(graph, "source_path", None)
    if getattr(graph, "source_format", "") != "tflite" or not path or not os.path.exists(path):
        return None
    return path


def check_oracles(graph, samples):
    """Bit-exactness of the outputs against LiteRT (BUILTIN_REF) and
    tflite-micro, each when installed. samples: lists of input arrays."""
    path = _tflite_source(graph)
    if path is None:
        why = "bit-exact oracles are TFLite interpreters; this model is not a .tflite file"
        if getattr(graph, "source_format", "") == "onnx":
            why = ("ONNX Runtime multiplies by float scales and rounds half to even, pyembed uses TFLite's "
                   "fixed-point requantization, so they are not compared bit for bit")
        return [OracleResult("TFLite reference interpreter", "not applicable", why)]
    return [_litert_oracle(graph, path, samples), _tflm_oracle(graph, path, samples)]


def _compare(name, graph, samples, rounding, run_oracle, detail):
    res = OracleResult(name, "bit-exact", detail)
    for xs in samples:
        ours = graph.run(xs if len(xs) > 1 else xs[0], rounding=rounding, layout="internal")
        theirs = run_oracle(xs)
        for a, b in zip(ours, theirs):
            b = np.asarray(b).reshape(a.shape)
            res.elements += a.size
            res.mismatches += int(np.count_nonzero(a.astype(np.int64) != b.astype(np.int64)))
        res.inputs += 1
    if res.mismatches:
        res.status = "mismatch"
    return res


def _first_line(e, limit=140):
    text = " ".join(str(e).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _litert_oracle(graph, path, samples):
    name = "LiteRT (TFLite reference kernels, BUILTIN_REF)"
    signal = sorted({op.type for op in graph.operators if op.type.startswith("CUSTOM:Signal")})
    if signal:
        # TFLM's signal library (pyembed.model.ops.signal) has no LiteRT kernels
        return OracleResult(name, "not applicable", f"{', '.join(signal)} are TFLite Micro's signal-library "
                                                    f"custom operators, which LiteRT does not have")
    if any(op.type == "CUSTOM:CIRCULAR_BUFFER" for op in graph.operators):
        # TFLM's streaming custom operator (pyembed.model.ops.batch7) has no LiteRT kernel either
        return OracleResult(name, "not applicable", "CUSTOM:CIRCULAR_BUFFER is TFLite Micro's streaming custom "
                                                    "operator, which LiteRT does not have")
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
    except ImportError:
        return OracleResult(name, "not installed", "pip install ai-edge-litert to compare bit for bit")
    try:
        it = Interpreter(model_path=path, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        it.allocate_tensors()
    except Exception as e:   # noqa: BLE001 - the oracle's own refusal is reported, not raised
        return OracleResult(name, "error", f"LiteRT cannot load the model: {_first_line(e)}")
    ins, outs = it.get_input_details(), it.get_output_details()

    stateful = any(t.is_variable for t in graph.tensors)

    def run(xs):
        if stateful:   # recurrent states start fresh per sample, as pyembed's run does
            it.reset_all_variables()
        for d, v in zip(ins, xs):
            it.set_tensor(d["index"], v.reshape(d["shape"]))
        it.invoke()
        return [it.get_tensor(d["index"]) for d in outs]
    try:
        return _compare(name, graph, samples, "litert", run, "pyembed rounding='litert': LiteRT's arithmetic "
                        "(single-rounding FULLY_CONNECTED, its integer LSTM)")
    except Exception as e:   # noqa: BLE001
        return OracleResult(name, "error", f"LiteRT failed: {_first_line(e)}")


class _CapturedStderr:
    """The C library's own messages (fd 2) while the interpreter runs, kept to
    say why it failed: tflite-micro prints the reason ("Type INT8 (9) not
    supported.", "Failed to allocate ...") and raises a bare "failed"."""

    def __enter__(self):
        import sys
        import tempfile
        self.text = ""
        try:
            sys.stderr.flush()
            self._file = tempfile.TemporaryFile()
            self._saved = os.dup(2)
            os.dup2(self._file.fileno(), 2)
        except (OSError, ValueError):
            self._file = None
        return self

    def __exit__(self, *exc):
        if self._file is None:
            return False
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._file.seek(0)
        self.text = self._file.read().decode("utf-8", "replace")
        self._file.close()
        return False

    def reason(self):
        lines = [ln.strip() for ln in self.text.splitlines() if ln.strip()]
        return "; ".join(lines[-3:])


def _tflm_oracle(graph, path, samples):
    from pyembed.model.tflite_writer import default_arena_size
    name = "tflite-micro interpreter (reference kernels)"
    try:
        from tflite_micro.python.tflite_micro import runtime
    except ImportError:
        return OracleResult(name, "not installed", "pip install tflite-micro to compare bit for bit")
    cap = _CapturedStderr()
    try:
        with cap:
            with open(path, "rb") as f:
                it = runtime.Interpreter.from_file(path, arena_size=default_arena_size(f.read()))
    except Exception as e:   # noqa: BLE001
        why = f": {_first_line(cap.reason())}" if cap.reason() else ""
        return OracleResult(name, "error", f"tflite-micro cannot load the model: {_first_line(e)}{why}")

    stateful = any(t.is_variable for t in graph.tensors)

    def run(xs):
        if stateful:   # recurrent states start fresh per sample, as pyembed's run does
            it.reset()
        for k, v in enumerate(xs):
            it.set_input(v, k)
        it.invoke()
        return [it.get_output(k) for k in range(len(graph.outputs))]
    cap = _CapturedStderr()
    try:
        with cap:
            return _compare(name, graph, samples, "double", run, "pyembed's default double rounding")
    except Exception as e:   # noqa: BLE001
        why = f": {_first_line(cap.reason())}" if cap.reason() else ""
        return OracleResult(name, "error", f"tflite-micro failed: {_first_line(e)}{why}")


def layer_errors_from_dict(d):
    """LayerError rows back from to_dict() output (for reports)."""
    out = []
    for r in d:
        r = dict(r)
        for k in ("snr_db", "max_abs_lsb", "mean_abs_lsb", "cosine", "out_of_range"):
            if r[k] in ("inf", "-inf"):
                r[k] = math.inf if r[k] == "inf" else -math.inf
            elif r[k] is None:
                r[k] = math.nan
        r["shape"] = tuple(r["shape"])
        out.append(LayerError(**r))
    return out


__all__ = ["check_accuracy", "output_tasks", "OutputError", "TASKS", "calibrated_random_inputs", "load_inputs", "random_inputs", "check_oracles", "AccuracyReport", "LayerError",
           "OracleResult", "MODES", "MODE_TITLES", "DEFAULT_MIN_SNR_DB"]
