"""Sequence models (transformers, ViT, recurrent / Conv1D keyword models)
made by the standard TensorFlow Lite converter, for tests/test_converter_seq.py.

Runs with a Python that has TensorFlow (not the project's venv; the test suite
never needs TensorFlow):

    /path/to/tf/python tools/converter_models/make_seq.py [--out tests/data/converter] [--only NAME,...]

Every model is a small Keras model with seeded random weights, quantized by
``tf.lite.TFLiteConverter.from_keras_model`` with ``Optimize.DEFAULT``, a
seeded representative dataset and int8 input / output. All but the
``*_float_islands`` model also force int8-only builtins
(``TFLITE_BUILTINS_INT8``); that one lets the converter keep float operators
where it cannot quantize them. Deterministic: the same TensorFlow version
writes the same bytes. Each model is checked with the tflite-micro
interpreter (--tflm-python: a Python that has that package); one it does not
run is not written (tests/data/converter/README.md says which and why).
"""
import argparse
import hashlib
import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import tensorflow as tf  # noqa: E402

keras = tf.keras
L = keras.layers
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data", "converter")


class PositionAdd(L.Layer):
    """A learned position embedding added to every token (KWT, ViT)."""

    def build(self, shape):
        self.pos = self.add_weight(name="pos", shape=(1,) + tuple(shape[1:]),
                                   initializer=keras.initializers.RandomNormal(stddev=0.2, seed=7))

    def call(self, x):
        return x + self.pos


class ClassToken(L.Layer):
    """A learned class token put before the tokens (KWT)."""

    def build(self, shape):
        self.tok = self.add_weight(name="cls", shape=(1, 1, shape[-1]),
                                   initializer=keras.initializers.RandomNormal(stddev=0.2, seed=11))

    def call(self, x):
        return tf.concat([tf.tile(self.tok, [tf.shape(x)[0], 1, 1]), x], axis=1)


def gelu_tanh(t):
    """GELU in its tanh form, written out: the converter fuses Keras's own
    gelu (either form) into the GELU builtin, which TFLM does not register;
    written out it stays MUL / ADD / TANH, which TFLM runs."""
    return 0.5 * t * (1.0 + tf.tanh(0.7978845608 * (t + 0.044715 * t * t * t)))


def encoder(x, d, heads, mlp, name, act="gelu_tanh"):
    h = L.LayerNormalization(epsilon=1e-6, name=f"{name}_ln1")(x)
    h = L.MultiHeadAttention(heads, d // heads, name=f"{name}_mha")(h, h)
    x = L.Add(name=f"{name}_add1")([x, h])
    h = L.LayerNormalization(epsilon=1e-6, name=f"{name}_ln2")(x)
    h = L.Dense(mlp, name=f"{name}_mlp1")(h)
    h = L.Lambda(gelu_tanh, name=f"{name}_gelu")(h) if act == "gelu_tanh" else L.Activation(act)(h)
    h = L.Dense(d, name=f"{name}_mlp2")(h)
    return L.Add(name=f"{name}_add2")([x, h])


def kwt(cls_token=True, act="gelu_tanh"):
    """Keyword transformer: 16 frames x 10 features, patch Dense to 24, a
    learned class token and positions, 2 encoder blocks, 6 classes."""
    inp = keras.Input((16, 10), batch_size=1, name="mfcc")
    x = L.Dense(24, name="patch")(inp)
    if cls_token:
        x = ClassToken(name="cls")(x)
    x = PositionAdd(name="pos")(x)
    for b in range(2):
        x = encoder(x, 24, 2, 48, f"enc{b}", act)
    x = L.LayerNormalization(epsilon=1e-6, name="ln_out")(x)
    x = L.Lambda(lambda t: t[:, 0], name="take_cls")(x) if cls_token else L.GlobalAveragePooling1D()(x)
    out = L.Dense(6, activation="softmax", name="head")(x)
    return keras.Model(inp, out, name="kwt")


def vit():
    """Tiny ViT: a 16x16x1 image, 4x4 patches by a strided Conv2D to 16
    channels, reshaped to 16 tokens, positions, 2 encoder blocks, mean
    pooling, 5 classes."""
    inp = keras.Input((16, 16, 1), batch_size=1, name="image")
    x = L.Conv2D(16, 4, strides=4, name="patch")(inp)
    x = L.Reshape((16, 16), name="tokens")(x)
    x = PositionAdd(name="pos")(x)
    for b in range(2):
        x = encoder(x, 16, 2, 32, f"enc{b}")
    x = L.LayerNormalization(epsilon=1e-6, name="ln_out")(x)
    x = L.GlobalAveragePooling1D(name="pool")(x)
    out = L.Dense(5, activation="softmax", name="head")(x)
    return keras.Model(inp, out, name="vit")


def conv1d_kws():
    """Conv1D keyword model: 32 frames x 10 features, three Conv1D + BN +
    ReLU layers (one strided), a depthwise-separable Conv1D, max / mean
    pooling, 8 classes."""
    inp = keras.Input((32, 10), batch_size=1, name="mfcc")
    x = L.Conv1D(16, 3, padding="same", name="c1")(inp)
    x = L.BatchNormalization(name="bn1")(x)
    x = L.ReLU()(x)
    x = L.Conv1D(24, 3, strides=2, padding="same", name="c2")(x)
    x = L.BatchNormalization(name="bn2")(x)
    x = L.ReLU()(x)
    x = L.SeparableConv1D(24, 5, padding="same", activation="relu", name="sep")(x)
    x = L.MaxPooling1D(2, name="mp")(x)
    x = L.Conv1D(32, 3, padding="same", activation="relu", name="c3")(x)
    x = L.GlobalAveragePooling1D(name="pool")(x)
    out = L.Dense(8, activation="softmax", name="head")(x)
    return keras.Model(inp, out, name="conv1d_kws")


def lstm_kws():
    """LSTM keyword model: 12 frames x 8 features, one LSTM(16) returning the
    last state (unrolled: see the README for the fused LSTM), Dense, softmax."""
    inp = keras.Input((12, 8), batch_size=1, name="mfcc")
    x = L.LSTM(16, name="lstm", unroll=True)(inp)
    out = L.Dense(4, activation="softmax", name="head")(x)
    return keras.Model(inp, out, name="lstm_kws")


def gru_kws():
    """GRU keyword model: 12 frames x 8 features, GRU(16) (unrolled by the
    converter), Dense, softmax."""
    inp = keras.Input((12, 8), batch_size=1, name="mfcc")
    x = L.GRU(16, name="gru", unroll=True)(inp)
    out = L.Dense(4, activation="softmax", name="head")(x)
    return keras.Model(inp, out, name="gru_kws")


def tcn_kws():
    """Temporal convolution keyword model: 32 x 10, causal dilated Conv1D
    (dilation 1, 2, 4) with residual adds, global max pooling, 6 logits."""
    inp = keras.Input((32, 10), batch_size=1, name="mfcc")
    x = L.Conv1D(16, 1, name="stem")(inp)
    for d in (1, 2, 4):
        h = L.Conv1D(16, 3, padding="causal", dilation_rate=d, activation="relu", name=f"tc{d}")(x)
        x = L.Add(name=f"res{d}")([x, h])
    x = L.GlobalMaxPooling1D(name="pool")(x)
    out = L.Dense(6, name="head")(x)   # logits: with random weights a softmax saturates to one class
    return keras.Model(inp, out, name="tcn_kws")


def causal_transformer():
    """A decoder-style block: 12 tokens x 16, causal self-attention
    (use_causal_mask), LayerNorm, MLP (ReLU), next-token logits (8) per
    position."""
    inp = keras.Input((12, 16), batch_size=1, name="tokens")
    x = PositionAdd(name="pos")(inp)
    h = L.LayerNormalization(epsilon=1e-6, name="ln1")(x)
    h = L.MultiHeadAttention(2, 8, name="mha")(h, h, use_causal_mask=True)
    x = L.Add(name="add1")([x, h])
    h = L.LayerNormalization(epsilon=1e-6, name="ln2")(x)
    h = L.Dense(32, activation="relu", name="mlp1")(h)
    h = L.Dense(16, name="mlp2")(h)
    x = L.Add(name="add2")([x, h])
    out = L.Dense(8, name="logits")(x)
    return keras.Model(inp, out, name="causal_transformer")


def conv1d_avgpool():
    """Small Conv1D model of odd sizes: 25 x 7, strided "same" Conv1D +
    ReLU6, "valid" Conv1D + hard swish, AveragePooling1D(3) (a tail of 2
    dropped), Flatten, Dense logits (5)."""
    inp = keras.Input((25, 7), batch_size=1, name="mfcc")
    x = L.Conv1D(12, 5, strides=2, padding="same", activation="relu6", name="c1")(inp)
    x = L.Conv1D(12, 3, padding="valid", activation="hard_silu", name="c2")(x)
    x = L.AveragePooling1D(3, name="ap")(x)
    x = L.Flatten(name="flat")(x)
    out = L.Dense(5, name="head")(x)
    return keras.Model(inp, out, name="conv1d_avgpool")


# name: (builder, int8-only builtins)
MODELS = {
    "seq_kwt": (lambda: kwt(True), True),
    "seq_kwt_meanpool": (lambda: kwt(False), True),
    "seq_vit": (vit, True),
    "seq_conv1d_kws": (conv1d_kws, True),
    "seq_lstm_kws": (lstm_kws, True),
    "seq_gru_kws": (gru_kws, True),
    # the KWT with ELU in its MLPs, converted without int8-only builtins: the
    # converter keeps ELU in float32 (DEQUANTIZE -> ELU -> QUANTIZE)
    "seq_kwt_float_islands": (lambda: kwt(True, act="elu"), False),
    # (new models go last: a model's seeds are its position here)
    "seq_tcn_kws": (tcn_kws, True),
    "seq_causal_transformer": (causal_transformer, True),
    "seq_conv1d_avgpool": (conv1d_avgpool, True),
}


def convert(model, int8_only, seed):
    shape = tuple(model.inputs[0].shape)
    rng = np.random.RandomState(seed)
    reps = [rng.standard_normal(shape).astype(np.float32) for _ in range(32)]

    def rep():
        for r in reps:
            yield [r]

    c = tf.lite.TFLiteConverter.from_keras_model(model)
    c.optimizations = [tf.lite.Optimize.DEFAULT]
    c.representative_dataset = rep
    if int8_only:
        c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    c.inference_input_type = tf.int8
    c.inference_output_type = tf.int8
    return c.convert()


_TFLM_RUN = """
import sys, numpy as np
from tflite_micro.python.tflite_micro import runtime
it = runtime.Interpreter.from_bytes(open(sys.argv[1], "rb").read(), arena_size=1 << 22)
d = it.get_input_details(0)
it.set_input(np.zeros(d["shape"], d["dtype"]), 0)
it.invoke()
"""


def tflm_check(data, python):
    """None when the tflite-micro interpreter runs the model on one input,
    else the reason it does not. The interpreter runs in `python` (one with
    the tflite-micro package, e.g. the project's venv); "not checked" when
    there is none."""
    if not python:
        return None
    import subprocess
    import tempfile
    with tempfile.NamedTemporaryFile(suffix=".tflite") as f:
        f.write(data)
        f.flush()
        r = subprocess.run([python, "-c", _TFLM_RUN, f.name], capture_output=True, text=True)
    if r.returncode == 0:
        return None
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip() and not ln.startswith(" ")]
    return " / ".join(lines[:3]) or f"exit code {r.returncode}"


def ops_of(data):
    from tensorflow.lite.python import schema_py_generated as S
    m = S.ModelT.InitFromPackedBuf(bytearray(data), 0)
    names = {v: k for k, v in vars(S.BuiltinOperator).items() if not k.startswith("_")}
    seen = []
    for oc in (m.operatorCodes or []):
        code = max(oc.builtinCode, oc.deprecatedBuiltinCode)
        seen.append(names.get(code, str(code)) if code != 32 else f"CUSTOM:{oc.customCode.decode()}")
    return seen


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--only", default="")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--one-process", action="store_true",
                    help="convert all models in this process (see seq_gru_kws_split_f32 in the README)")
    ap.add_argument("--tflm-python", default="",
                    help="a Python with the tflite-micro package: models it does not run are not written")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    names = a.only.split(",") if a.only else list(MODELS)
    status = 0
    for i, name in enumerate(MODELS):
        if name not in names:
            continue
        build, int8_only = MODELS[name]
        if not a.child and not a.one_process:
            # each model in a process of its own (and a fixed hash seed): the
            # converter's output for a model depends on what the process
            # converted before (seen with the GRU)
            import subprocess
            env = dict(os.environ, PYTHONHASHSEED="0")
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--out", a.out, "--only", name,
                                "--tflm-python", a.tflm_python, "--child"], capture_output=True, text=True,
                               env=env)
            print("\n".join(ln for ln in r.stdout.splitlines() if ln.startswith(name)))
            status |= r.returncode
            continue
        keras.utils.set_random_seed(1000 + i)
        data = convert(build(), int8_only, seed=2000 + i)
        why = tflm_check(data, a.tflm_python)
        ops = ",".join(sorted(set(ops_of(data))))
        if why is not None:
            print(f"{name}: DROPPED, tflite-micro does not run it: {why} (ops {ops})")
            continue
        path = os.path.join(a.out, name + ".tflite")
        with open(path, "wb") as f:
            f.write(data)
        print(f"{name}: {len(data)} B sha256 {hashlib.sha256(data).hexdigest()[:16]} ops {ops}")
        if len(data) > 150_000:
            print(f"{name}: over 150 KB", file=sys.stderr)
            status = 1
    if not a.child:
        print(f"TensorFlow {tf.__version__}")
    return status


if __name__ == "__main__":
    sys.exit(main())
