"""Converter-made CNN test models for pyembed (issues #30 and #31).

Run with the separate TensorFlow venv (never the project venv):

    /work/tfvenv/bin/python tools/converter_models/make_cnn.py [--out tests/data/converter] [--only NAME,...]

Small Keras models of the kinds users bring (a U-Net, a MobileNetV2-like
classifier, a float32 CNN, an int16x8 CNN, a mixed bag of common layers),
seeded random weights and seeded random representative data, converted with
the standard TFLite converter and written to <out>/<name>.tflite. Each model
uses a fixed batch of 1 (tf.keras.Input(..., batch_size=1)) so the converter
emits static shapes.
"""
import argparse
import os
import random
import zlib

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_DETERMINISTIC_OPS", "1")
import tensorflow as tf  # noqa: E402

L = tf.keras.layers
SEED = 1234


def _seed(k):
    random.seed(SEED + k)
    np.random.seed(SEED + k)
    tf.random.set_seed(SEED + k)
    tf.keras.utils.set_random_seed(SEED + k)


def _randomize_bn(model, rng):
    """Give BatchNormalization layers non-trivial statistics (fresh layers
    have mean 0 / var 1, which would hide folding errors)."""
    for layer in model.layers:
        if isinstance(layer, L.BatchNormalization):
            g, b, m, v = layer.get_weights()
            layer.set_weights([rng.uniform(0.5, 1.5, g.shape).astype(np.float32),
                               rng.uniform(-0.2, 0.2, b.shape).astype(np.float32),
                               rng.uniform(-0.2, 0.2, m.shape).astype(np.float32),
                               rng.uniform(0.5, 1.5, v.shape).astype(np.float32)])


def unet(input_shape=(64, 64, 3), classes=1, bilinear=True):
    def block(x, f):
        for _ in range(2):
            x = L.Conv2D(f, 3, padding="same", use_bias=False)(x)
            x = L.BatchNormalization()(x)
            x = L.ReLU()(x)
        return x
    inp = tf.keras.Input(input_shape, batch_size=1)
    e1 = block(inp, 8)
    d1 = L.MaxPool2D(2)(e1)
    e2 = block(d1, 16)
    d2 = L.MaxPool2D(2)(e2)
    b = block(d2, 24)
    u2 = L.Conv2DTranspose(16, 2, strides=2, padding="same")(b)
    u2 = L.Concatenate()([u2, e2])
    u2 = block(u2, 16)
    # TFLM's RESIZE_BILINEAR takes float32 / int8 only: the int16x8 U-Net goes up by nearest
    u1 = L.UpSampling2D(2, interpolation="bilinear")(u2) if bilinear else \
        L.Resizing(input_shape[0], input_shape[1], interpolation="nearest")(u2)
    u1 = L.Conv2D(8, 1)(u1)
    # UpSampling2D(interpolation="nearest") converts to RESHAPE + 5-D TILE,
    # which TFLM does not register: the nearest-neighbour path uses Resizing
    # (RESIZE_NEAREST_NEIGHBOR), as users targeting TFLM do
    u1n = L.Resizing(input_shape[0], input_shape[1], interpolation="nearest")(d1)
    u1 = L.Concatenate()([u1, u1n, e1])
    u1 = block(u1, 8)
    if classes == 1:
        out = L.Conv2D(1, 1, activation="sigmoid")(u1)
    else:
        out = L.Conv2D(classes, 1, activation="softmax")(u1)
    return tf.keras.Model(inp, out, name="unet")


def unet_lite(input_shape=(64, 64, 3), depth=2):
    """A U-Net of the layers pyembed's stripe executor chains (Conv2D + BN +
    ReLU, MaxPool2D, x2 nearest Resizing, two-input Concatenate skips,
    sigmoid): encoder and decoder nested, so the whole net can run in stripes."""
    def block(x, f):
        x = L.Conv2D(f, 3, padding="same", use_bias=False)(x)
        x = L.BatchNormalization()(x)
        return L.ReLU()(x)
    inp = tf.keras.Input(input_shape, batch_size=1)
    x, skips, f = inp, [], 8
    h, w = input_shape[0], input_shape[1]
    for _ in range(depth):
        x = block(block(x, f), f)
        skips.append((x, h, w))
        x = L.MaxPool2D(2)(x)
        h, w, f = h // 2, w // 2, f + 8
    x = block(block(x, f), f)
    for s, sh, sw in reversed(skips):
        f -= 8
        x = L.Resizing(sh, sw, interpolation="nearest")(x)
        x = block(x, f)
        x = L.Concatenate()([x, s])
        x = block(x, f)
    out = L.Conv2D(1, 1, activation="sigmoid")(x)
    return tf.keras.Model(inp, out, name="unet_lite")


def _inverted_residual(x, expand, out_ch, stride):
    in_ch = x.shape[-1]
    y = L.Conv2D(in_ch * expand, 1, use_bias=False)(x)
    y = L.BatchNormalization()(y)
    y = L.ReLU(6.0)(y)
    if stride == 2:
        y = L.ZeroPadding2D(((0, 1), (0, 1)))(y)
    y = L.DepthwiseConv2D(3, strides=stride, padding="same" if stride == 1 else "valid", use_bias=False)(y)
    y = L.BatchNormalization()(y)
    y = L.ReLU(6.0)(y)
    y = L.Conv2D(out_ch, 1, use_bias=False)(y)
    y = L.BatchNormalization()(y)
    if stride == 1 and in_ch == out_ch:
        y = L.Add()([x, y])
    return y


def mobilenet_like(input_shape=(96, 96, 3), classes=10):
    inp = tf.keras.Input(input_shape, batch_size=1)
    x = L.Conv2D(8, 3, strides=2, padding="same", use_bias=False)(inp)
    x = L.BatchNormalization()(x)
    x = L.ReLU(6.0)(x)
    x = L.DepthwiseConv2D(3, padding="same", use_bias=False)(x)
    x = L.BatchNormalization()(x)
    x = L.ReLU(6.0)(x)
    x = L.Conv2D(8, 1, use_bias=False)(x)
    x = L.BatchNormalization()(x)
    for expand, ch, stride in [(4, 12, 2), (4, 12, 1), (4, 16, 2), (4, 16, 1), (4, 24, 2), (4, 24, 1)]:
        x = _inverted_residual(x, expand, ch, stride)
    x = L.Conv2D(64, 1, use_bias=False)(x)
    x = L.BatchNormalization()(x)
    x = L.ReLU(6.0)(x)
    x = L.GlobalAveragePooling2D()(x)
    x = L.Dropout(0.2)(x)
    out = L.Dense(classes, activation="softmax")(x)
    return tf.keras.Model(inp, out, name="mobilenet_like")


def small_cnn(input_shape=(32, 32, 3), classes=10):
    """Conv / depthwise / pool / add / dense: the float32 and int16x8 model."""
    inp = tf.keras.Input(input_shape, batch_size=1)
    x = L.Conv2D(8, 3, padding="same", activation="relu")(inp)
    x = L.MaxPool2D(2)(x)
    y = L.DepthwiseConv2D(3, padding="same")(x)
    y = L.ReLU(6.0)(y)
    y = L.Conv2D(8, 1)(y)
    x = L.Add()([x, y])
    x = L.Conv2D(16, 3, strides=2, padding="same", activation="relu")(x)
    x = L.AveragePooling2D(2)(x)
    x = L.Flatten()(x)
    x = L.Dense(16, activation="relu")(x)
    out = L.Dense(classes, activation="softmax")(x)
    return tf.keras.Model(inp, out, name="small_cnn")


def mixed_cnn(input_shape=(40, 40, 3), classes=6):
    """Common converter output: Resizing, ZeroPadding2D, strided conv,
    SeparableConv2D, hard-swish, Dropout, Flatten + Dense."""
    inp = tf.keras.Input(input_shape, batch_size=1)
    x = L.Resizing(32, 32, interpolation="bilinear")(inp)
    x = L.ZeroPadding2D(1)(x)
    x = L.Conv2D(8, 3, strides=2, padding="valid")(x)
    x = L.BatchNormalization()(x)
    x = L.Activation("hard_swish")(x) if hasattr(tf.keras.activations, "hard_swish") else \
        L.Lambda(lambda t: t * tf.nn.relu6(t + 3.0) / 6.0)(x)
    x = L.SeparableConv2D(12, 3, padding="same", activation="relu")(x)
    x = L.Dropout(0.3)(x)
    x = L.Conv2D(16, 3, strides=2, padding="same", activation="relu")(x)
    x = L.MaxPool2D(2)(x)
    x = L.Flatten()(x)
    x = L.Dense(24, activation="tanh")(x)
    out = L.Dense(classes)(x)
    return tf.keras.Model(inp, out, name="mixed_cnn")


def se_cnn(input_shape=(24, 24, 4), classes=5):
    """Squeeze-and-excitation gating (global pool, Dense, sigmoid, Multiply),
    LeakyReLU, a 3x3 stride-2 Conv2DTranspose, GlobalMaxPool, Concatenate."""
    inp = tf.keras.Input(input_shape, batch_size=1)
    x = L.Conv2D(12, 3, padding="same")(inp)
    x = L.LeakyReLU(0.1)(x)
    s = L.GlobalAveragePooling2D()(x)
    s = L.Dense(4, activation="relu")(s)
    s = L.Dense(12, activation="sigmoid")(s)
    s = L.Reshape((1, 1, 12))(s)
    x = L.Multiply()([x, s])
    x = L.Conv2D(16, 3, strides=2, padding="same", activation="relu")(x)
    t = L.Conv2DTranspose(8, 3, strides=2, padding="same", activation="relu")(x)
    t = L.Conv2D(16, 3, strides=2, padding="same")(t)
    x = L.Concatenate()([x, t])
    a = L.GlobalMaxPooling2D()(x)
    b = L.GlobalAveragePooling2D()(x)
    x = L.Concatenate()([a, b])
    out = L.Dense(classes, activation="softmax")(x)
    return tf.keras.Model(inp, out, name="se_cnn")


def _rep(shape, k, n=24):
    rng = np.random.default_rng(SEED + 100 + k)
    def gen():
        for _ in range(n):
            yield [rng.uniform(-1.0, 1.0, (1,) + tuple(shape)).astype(np.float32)]
    return gen


def convert(model, kind, k):
    c = tf.lite.TFLiteConverter.from_keras_model(model)
    if kind == "float32":
        return c.convert()
    c.optimizations = [tf.lite.Optimize.DEFAULT]
    c.representative_dataset = _rep(model.input_shape[1:], k)
    if kind == "int8":
        c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        c.inference_input_type = tf.int8
        c.inference_output_type = tf.int8
    elif kind == "int16x8":
        c.target_spec.supported_ops = [tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
        c.inference_input_type = tf.int16
        c.inference_output_type = tf.int16
    else:
        raise ValueError(kind)
    return c.convert()


# name -> (builder, quantization kind)
MODELS = {
    "cnn_unet_int8": (lambda: unet(), "int8"),
    "cnn_unet_lite_int8": (unet_lite, "int8"),
    "cnn_unet3_int8": (lambda: unet(input_shape=(32, 32, 3), classes=3), "int8"),
    "cnn_mobilenet_int8": (mobilenet_like, "int8"),
    "cnn_small_f32": (small_cnn, "float32"),
    "cnn_small_int16x8": (small_cnn, "int16x8"),
    "cnn_mixed_int8": (mixed_cnn, "int8"),
    "cnn_unet_f32": (lambda: unet(input_shape=(32, 32, 3)), "float32"),
    "cnn_mixed_f32": (mixed_cnn, "float32"),
    "cnn_se_int8": (se_cnn, "int8"),
    "cnn_unet_int16x8": (lambda: unet(input_shape=(32, 32, 3), bilinear=False), "int16x8"),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data",
                                                  "converter"))
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    want = set(a.only.split(",")) if a.only else None
    for name, (build, kind) in MODELS.items():
        if want and name not in want:
            continue
        k = zlib.crc32(name.encode()) % 10000    # a seed per model, independent of the others
        _seed(k)
        m = build()
        _randomize_bn(m, np.random.default_rng(SEED + 200 + k))
        data = convert(m, kind, k)
        path = os.path.join(a.out, name + ".tflite")
        with open(path, "wb") as f:
            f.write(data)
        print(f"{name}: {kind}, {len(data)} bytes, TF {tf.__version__}")


if __name__ == "__main__":
    main()
