#!/usr/bin/env python3
"""Make the small real input samples bundled in pyembed/data/samples/.

One ``<model stem>.npz`` per bundled model (pyembed/data/models/*.tflite),
made only from sources an installed package provides, so that anyone can
re-run this script and get the same bytes:

* photographs: scikit-image's sample images (``skimage.data``), people and no
  people, centre-cropped and resized (VWW, person detection, ResNet-8);
* spoken words: synthesised with Debian's ``espeak-ng`` (apt package), resampled
  to 16 kHz, and turned into the features each audio model was trained on:
  MLPerf Tiny KWS MFCCs (49x10), TFLM micro_speech features computed by running
  the bundled ``tflm_audio_preprocessor_int8.tflite`` feature generator frame
  by frame in the tflite-micro interpreter, as TFLM's ``evaluate.py`` does
  (49x40 int8), MLPerf Tiny streaming-wake-word log filterbank energies (30x40),
  DTLN magnitude spectra (257 bins) and raw 30 ms int16 frames for the audio
  preprocessor;
* handwritten digits: scikit-learn's ``load_digits`` (8x8, upsampled to MNIST's
  28x28 layout) for the MNIST LSTM;
* hello_world: x values and sin(x);
* anomaly detection: SYNTHETIC machine sounds (stationary motor noise with a
  weak hum, and the same with an added whine and clicks), turned into MLPerf Tiny's
  5-frame x 128-bin log-mel vectors. They are synthetic, not recordings.

Each .npz holds: ``x`` (a batch of inputs in the model's own input type and
shape, quantized with the input's scale and zero point), ``names`` (what each
sample is), ``expected`` (its true label, "" when it has none among the
model's classes), ``labels`` (the model's class names, empty when the output
is not a class), ``kind`` and ``note``. See pyembed/data/samples/README.md.

    python tools/make_samples.py            # writes pyembed/data/samples/*.npz
    python tools/make_samples.py --check    # regenerates in memory, compares with the files

Needs: numpy, scipy, scikit-image, scikit-learn, tflite-micro, tflite and the
``espeak-ng`` program.
"""
import argparse
import io
import os
import subprocess
import sys
import tempfile
import wave

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

MODELS = os.path.join(ROOT, "pyembed", "data", "models")
OUT = os.path.join(ROOT, "pyembed", "data", "samples")
SR = 16000

KWS_LABELS = ["down", "go", "left", "no", "off", "on", "right", "stop", "up", "yes", "silence", "unknown"]
MICRO_SPEECH_LABELS = ["silence", "unknown", "yes", "no"]
SWW_LABELS = ["marvin", "silence", "unknown"]
VWW_LABELS = ["no person", "person"]
CIFAR10 = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
DIGITS = [str(d) for d in range(10)]


# -- model input quantization ------------------------------------------------------------

def _input_q(stem):
    """(shape, dtype, scale, zero point) of a bundled model's first input."""
    import tflite
    with open(os.path.join(MODELS, stem + ".tflite"), "rb") as f:
        m = tflite.Model.GetRootAsModel(f.read(), 0)
    sg = m.Subgraphs(0)
    t = sg.Tensors(sg.Inputs(0))
    dtype = {tflite.TensorType.INT8: np.int8, tflite.TensorType.INT16: np.int16,
             tflite.TensorType.UINT8: np.uint8, tflite.TensorType.FLOAT32: np.float32}[t.Type()]
    q = t.Quantization()
    scale = float(q.Scale(0)) if q is not None and q.ScaleLength() else None
    zp = int(q.ZeroPoint(0)) if q is not None and q.ZeroPointLength() else 0
    return tuple(int(d) for d in t.ShapeAsNumpy()), dtype, scale, zp


def quantize(stem, real):
    """Real values -> the model's input integers (round half away from zero, saturate)."""
    shape, dtype, scale, zp = _input_q(stem)
    real = np.asarray(real, dtype=np.float64)
    q = real / scale
    q = np.where(q >= 0, np.floor(q + 0.5), np.ceil(q - 0.5)) + zp
    info = np.iinfo(dtype)
    return np.clip(q, info.min, info.max).astype(dtype).reshape((real.shape[0],) + shape)


# -- images ------------------------------------------------------------------------------

def _square(img):
    h, w = img.shape[:2]
    s = min(h, w)
    top, left = (h - s) // 2, (w - s) // 2
    return img[top:top + s, left:left + s]


def _resized(img, size, gray):
    """float image in [0, 1], centre-cropped square, size x size, RGB or gray."""
    from skimage import color, transform
    from skimage.util import img_as_float
    img = img_as_float(img)
    if img.ndim == 3 and img.shape[2] == 4:
        img = img[..., :3]
    if gray and img.ndim == 3:
        img = color.rgb2gray(img)
    if not gray and img.ndim == 2:
        img = np.stack([img] * 3, axis=-1)
    img = transform.resize(_square(img), (size, size), anti_aliasing=True, mode="reflect")
    return np.clip(img, 0.0, 1.0)


def _photos():
    """(name, image, has a person, CIFAR-10 class or "") of skimage sample photographs that
    ship inside the package (no download)."""
    from skimage import data
    out = [("astronaut", data.astronaut(), True, ""),
           ("camera (cameraman)", data.camera(), True, ""),
           ("chelsea (cat)", data.chelsea(), False, "cat"),
           ("coffee (cup)", data.coffee(), False, ""),
           ("rocket", data.rocket(), False, ""),
           ("coins", data.coins(), False, "")]
    return out


def make_vww():
    names, xs, expected = [], [], []
    for name, img, person, _ in _photos():
        names.append(f"skimage.data {name}")
        xs.append(_resized(img, 96, gray=False))
        expected.append("person" if person else "no person")
    # MLPerf Tiny VWW trains on images rescaled by 1/255 (real values in [0, 1])
    return dict(x=quantize("tiny_vww_mobilenetv1_96_int8", np.stack(xs)), names=names, expected=expected,
                labels=VWW_LABELS, kind="classifier",
                note="skimage.data photographs, centre-cropped, resized to 96x96 RGB, real values in [0, 1]")


def make_person_detect():
    names, xs, expected = [], [], []
    for name, img, person, _ in _photos():
        names.append(f"skimage.data {name}")
        g = _resized(img, 96, gray=True)
        # TFLM's person_detection feeds camera bytes as int8 = uint8 pixel - 128
        xs.append(np.round(g * 255.0).astype(np.int16) - 128)
        expected.append("person" if person else "no person")
    shape, dtype, _, _ = _input_q("tflm_person_detect_int8")
    x = np.stack(xs).astype(dtype).reshape((len(xs),) + shape)
    return dict(x=x, names=names, expected=expected, labels=VWW_LABELS, kind="classifier",
                note="skimage.data photographs, centre-cropped, resized to 96x96 gray; int8 = pixel - 128 as "
                     "TFLM's person_detection image provider does")


def make_resnet8():
    from skimage import data
    photos = [("chelsea (cat)", data.chelsea(), "cat"),
              ("astronaut (no CIFAR-10 class)", data.astronaut(), ""),
              ("coffee (no CIFAR-10 class)", data.coffee(), ""),
              ("rocket (no CIFAR-10 class)", data.rocket(), "")]
    # the cat's head only, closer to CIFAR's framing
    cat = data.chelsea()[20:280, 90:350]
    photos.insert(1, ("chelsea, head crop (cat)", cat, "cat"))
    names, xs, expected = [], [], []
    for name, img, cls in photos:
        names.append(f"skimage.data {name}")
        xs.append(_resized(img, 32, gray=False))
        expected.append(cls)
    # the MLPerf Tiny ResNet-8 takes pixel values 0..255 (its input scale is 1.0, zero point -128)
    return dict(x=quantize("tiny_ic_resnet8_int8", np.round(np.stack(xs) * 255.0)), names=names, expected=expected,
                labels=CIFAR10, kind="classifier",
                note="skimage.data photographs, centre-cropped, resized to 32x32 RGB, pixel values 0..255; only "
                     "the cat belongs to a CIFAR-10 class")


# -- speech ------------------------------------------------------------------------------

def speak(word, voice="en-us", speed=140, pitch=50):
    """One second of 16 kHz float audio in [-1, 1] with the word centred, from espeak-ng."""
    from scipy.signal import resample_poly
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "w.wav")
        subprocess.run(["espeak-ng", "-v", voice, "-s", str(speed), "-p", str(pitch), "-w", path, word],
                       check=True, capture_output=True)
        with wave.open(path, "rb") as w:
            rate = w.getframerate()
            raw = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float64) / 32768.0
    y = resample_poly(raw, SR, rate) if rate != SR else raw
    # trim the silence espeak puts around the word, centre it in one second
    env = np.abs(y) > 0.02 * np.max(np.abs(y))
    idx = np.nonzero(env)[0]
    y = y[idx[0]:idx[-1] + 1][:SR]
    out = np.zeros(SR)
    start = (SR - len(y)) // 2
    out[start:start + len(y)] = y
    # a recording's noise floor (seeded by the word): digital silence would give log(0)-like features
    seed = sum(map(ord, word + voice)) + pitch
    return out + np.random.default_rng(seed).normal(0.0, 1e-3, SR)


def _silence(seed, level=0.003):
    return np.random.default_rng(seed).normal(0.0, level, SR)


def _hz_to_mel_htk(f):
    return 1127.0 * np.log1p(np.asarray(f, dtype=np.float64) / 700.0)


def tf_mel_matrix(num_mel, num_bins, sr, lo, hi):
    """tf.signal.linear_to_mel_weight_matrix, written out in numpy (HTK mel scale,
    triangles in mel space, the DC bin zeroed)."""
    freqs = np.linspace(0.0, sr / 2.0, num_bins)[1:]
    mel = _hz_to_mel_htk(freqs)[:, None]
    edges = np.linspace(_hz_to_mel_htk(lo), _hz_to_mel_htk(hi), num_mel + 2)
    lower, center, upper = edges[:-2][None], edges[1:-1][None], edges[2:][None]
    w = np.maximum(0.0, np.minimum((mel - lower) / (center - lower), (upper - mel) / (upper - center)))
    return np.vstack([np.zeros((1, num_mel)), w])


def _frames(y, length, step):
    n = 1 + (len(y) - length) // step
    return np.stack([y[i * step:i * step + length] for i in range(n)])


def kws_mfcc(y):
    """MLPerf Tiny KWS features (keyword_spotting/get_dataset.py, feature_type 'mfcc'):
    peak-normalised audio, 30 ms Hann frames every 20 ms, |STFT| (512-point FFT),
    40 mel bins 20..4000 Hz, log(mel + 1e-6), orthonormal DCT-II, first 10 -> 49x10."""
    y = y / np.max(y) if np.max(y) > 0 else y
    n = np.arange(480)
    hann = 0.5 - 0.5 * np.cos(2 * np.pi * n / 480)       # tf.signal.hann_window (periodic)
    spec = np.abs(np.fft.rfft(_frames(y, 480, 320) * hann, 512))
    mel = spec @ tf_mel_matrix(40, 257, SR, 20.0, 4000.0)
    logmel = np.log(mel + 1e-6)
    k = np.arange(40)
    # tf.signal.mfccs_from_log_mel_spectrograms: DCT-II (unnormalised, factor 2) * rsqrt(2 N)
    dct = 2.0 * np.cos(np.pi * np.outer(2 * k + 1, k) / 80.0) / np.sqrt(80.0)
    return (logmel @ dct)[:, :10]


def make_kws():
    words = ["down", "go", "left", "no", "off", "on", "right", "stop", "up", "yes"]
    names, feats, expected = [], [], []
    for w in words:
        names.append(f"espeak-ng en-us '{w}'")
        feats.append(kws_mfcc(speak(w)))
        expected.append(w)
    names.append("low white noise (silence)")
    feats.append(kws_mfcc(_silence(1)))
    expected.append("silence")
    names.append("espeak-ng en-us 'house' (not a keyword)")
    feats.append(kws_mfcc(speak("house")))
    expected.append("unknown")
    return dict(x=quantize("tiny_kws_dscnn_int8", np.stack(feats)[..., None]), names=names, expected=expected,
                labels=KWS_LABELS, kind="classifier",
                note="espeak-ng speech, 16 kHz, MLPerf Tiny KWS MFCCs (49 frames x 10 coefficients)")


def _to_int16(y):
    return np.clip(np.round(y * 32767.0), -32768, 32767).astype(np.int16)


def micro_speech_features(y):
    """TFLM micro_speech features: the bundled audio preprocessor model run frame by frame
    (30 ms windows every 20 ms) in the tflite-micro interpreter, reset per clip, as TFLM's
    micro_speech/evaluate.py generate_features does. -> 49x40 int8."""
    from tflite_micro.python.tflite_micro import runtime
    it = runtime.Interpreter.from_file(os.path.join(MODELS, "tflm_audio_preprocessor_int8.tflite"))
    s = _to_int16(y * 0.5)
    out = np.zeros((49, 40), dtype=np.int8)
    for i in range(49):
        it.set_input(s[i * 320:i * 320 + 480].reshape(1, -1), 0)
        it.invoke()
        out[i] = np.asarray(it.get_output(0)).reshape(-1)
    return out


def make_micro_speech():
    clips = [("espeak-ng en-us 'yes'", speak("yes"), "yes"),
             ("espeak-ng en-us 'no'", speak("no"), "no"),
             ("espeak-ng en 'yes' (other voice)", speak("yes", voice="en", pitch=30), "yes"),
             ("espeak-ng en-us 'left' (not yes/no)", speak("left"), "unknown"),
             ("low white noise (silence)", _silence(2), "silence")]
    shape, dtype, _, _ = _input_q("tflm_micro_speech_int8")
    x = np.stack([micro_speech_features(y).reshape(shape) for _, y, _ in clips]).astype(dtype)
    return dict(x=x, names=[c[0] for c in clips], expected=[c[2] for c in clips], labels=MICRO_SPEECH_LABELS,
                kind="classifier",
                note="espeak-ng speech at half scale, int16, features from the bundled TFLM audio preprocessor "
                     "(49 frames x 40 channels, int8)")


def sww_lfbe(y):
    """MLPerf Tiny streaming wake word log filterbank energies (get_dataset.py, 'lfbe'):
    peak-normalised, pre-emphasis 1 - 2^-5, 64 ms Hamming (symmetric) frames every 32 ms,
    power spectrum / 1024, 40 mel bins 0..8000 Hz, 10 log10, (x + 52) / 64 clipped to [0, 1]."""
    y = y / np.max(y) if np.max(y) > 0 else y
    y = np.concatenate([[0.0], y])
    y = y[1:] - (1 - 2 ** -5) * y[:-1]
    ham = np.hamming(1024)
    mag = np.abs(np.fft.rfft(_frames(y, 1024, 512) * ham, 1024))
    pow_ = mag ** 2 / 1024.0
    pow_ = np.clip(pow_, 1e-30, pow_.max())
    mel = pow_ @ tf_mel_matrix(40, 513, SR, 0.0, SR / 2.0)
    lmel = 10 * np.log10(np.maximum(mel, 1e-30))
    return np.clip((lmel + 52.0) / 64.0, 0.0, 1.0)


def make_sww():
    clips = [("espeak-ng en-us 'marvin'", speak("marvin"), "marvin"),
             ("espeak-ng en 'marvin' (other voice)", speak("marvin", voice="en", pitch=30), "marvin"),
             ("low white noise (silence)", _silence(3), "silence"),
             ("espeak-ng en-us 'house' (other word)", speak("house"), "unknown")]
    shape, _, _, _ = _input_q("tiny_sww_int8")
    feats = np.stack([sww_lfbe(y).reshape(shape[1:]) for _, y, _ in clips])
    return dict(x=quantize("tiny_sww_int8", feats), names=[c[0] for c in clips], expected=[c[2] for c in clips],
                labels=SWW_LABELS, kind="classifier",
                note="espeak-ng speech, MLPerf Tiny streaming-wake-word log filterbank energies (30 frames x 40)")


def make_audio_preprocessor():
    y = speak("yes")
    s = _to_int16(y * 0.5)
    # four 30 ms windows across the word (20 ms apart) and one of the silence before it
    e = np.convolve(np.abs(y), np.ones(480), "valid")
    mid = int(np.argmax(e))
    starts = [max(0, mid - 640), mid - 320, mid, mid + 320, 0]
    x = np.stack([s[a:a + 480].reshape(1, 480) for a in starts])
    names = [f"espeak-ng 'yes', 30 ms from sample {a}" for a in starts]
    return dict(x=x, names=names, expected=[""] * len(names), labels=[], kind="features",
                note="raw int16 16 kHz audio windows (480 samples) of espeak-ng 'yes' at half scale")


def make_dtln():
    from scipy.signal import resample_poly  # noqa: F401  (imported by speak)
    y = speak("yes") * 0.1 + np.random.default_rng(4).normal(0.0, 0.005, SR)
    e = np.convolve(np.abs(y), np.ones(512), "valid")
    mid = int(np.argmax(e))
    starts = [mid - 256, mid - 128, mid, mid + 128, 0]
    # DTLN's first stage takes |rfft| of a 512-sample block (32 ms, 8 ms shift)
    mags = np.stack([np.abs(np.fft.rfft(y[a:a + 512])) for a in starts])
    shape, _, _, _ = _input_q("tflm_dtln_noise_suppression")
    return dict(x=quantize("tflm_dtln_noise_suppression", mags.reshape((len(starts),) + shape[1:])),
                names=[f"espeak-ng 'yes' + white noise, 512-sample block at {a}" for a in starts],
                expected=[""] * len(starts), labels=[], kind="mask",
                note="magnitude spectra (257 bins) of 512-sample blocks of noisy espeak-ng speech; the output "
                     "is a suppression mask in [0, 1]")


# -- digits, sine, machine sounds -----------------------------------------------------------

def make_mnist_lstm():
    from scipy.ndimage import zoom
    from sklearn.datasets import load_digits
    d = load_digits()
    picks = [int(np.nonzero(d.target == k)[0][0]) for k in range(10)]
    xs = []
    for i in picks:
        img = d.images[i] / 16.0                          # 8x8, 0..16 -> [0, 1]
        big = np.clip(zoom(img, 2.5, order=1), 0, 1)      # 20x20, MNIST's digit box
        canvas = np.zeros((28, 28))
        canvas[4:24, 4:24] = big
        xs.append(canvas)
    return dict(x=quantize("tflm_mnist_lstm_int8", np.stack(xs)), names=[f"sklearn digits #{i}" for i in picks],
                expected=[str(d.target[i]) for i in picks], labels=DIGITS, kind="classifier",
                note="scikit-learn load_digits (UCI 8x8 handwritten digits) upsampled to 20x20 in a 28x28 "
                     "canvas, real values in [0, 1]")


def make_hello_world():
    xs = np.array([0.0, 0.5, 1.0, 1.5707963, 3.0, 4.5, 6.0])
    return dict(x=quantize("tflm_hello_world_int8", xs.reshape(-1, 1)), names=[f"x = {v:g}" for v in xs],
                expected=[f"{np.sin(v):.3f}" for v in xs], labels=[], kind="regression",
                note="x values in [0, 2 pi]; the expected output is sin(x)")


def _slaney_mel(sr, n_fft, n_mels):
    """librosa.filters.mel defaults (Slaney mel scale, Slaney area normalisation) in numpy."""
    def hz_to_mel(f):
        f = np.asarray(f, dtype=np.float64)
        lin = f / (200.0 / 3)
        return np.where(f >= 1000.0, 15.0 + np.log(np.maximum(f, 1e-9) / 1000.0) / (np.log(6.4) / 27.0), lin)

    def mel_to_hz(m):
        m = np.asarray(m, dtype=np.float64)
        return np.where(m >= 15.0, 1000.0 * np.exp((np.log(6.4) / 27.0) * (m - 15.0)), m * 200.0 / 3)
    fft_f = np.linspace(0, sr / 2, 1 + n_fft // 2)
    mel_f = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(sr / 2), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = mel_f[:, None] - fft_f[None, :]
    w = np.maximum(0, np.minimum(-ramps[:-2] / fdiff[:-1, None], ramps[2:] / fdiff[1:, None]))
    return w * (2.0 / (mel_f[2:n_mels + 2] - mel_f[:n_mels]))[:, None]


def ad_vectors(y):
    """MLPerf Tiny anomaly detection features (DCASE 2020 baseline): power mel spectrogram
    (n_fft 1024, hop 512, 128 mels, centred frames), 10 log10(mel + eps), 5 consecutive
    frames concatenated into a 640-vector. Returns all vectors of the clip."""
    pad = np.pad(y, 512, mode="reflect")
    n = np.arange(1024)
    hann = 0.5 - 0.5 * np.cos(2 * np.pi * n / 1024)
    spec = np.abs(np.fft.rfft(_frames(pad, 1024, 512) * hann, 1024)) ** 2
    mel = spec @ _slaney_mel(SR, 1024, 128).T
    lm = 10.0 * np.log10(mel + np.finfo(np.float32).eps)
    return np.stack([lm[t:t + 5].reshape(-1) for t in range(len(lm) - 4)])


def _tilted_noise(seed, tilt=0.5):
    """Broadband noise whose amplitude falls as f^-tilt (tilt 0.5: pink), peak-normalised."""
    w = np.random.default_rng(seed).normal(0.0, 1.0, SR)
    f = np.fft.rfft(w) / np.maximum(np.fft.rfftfreq(SR, 1.0 / SR), 20.0) ** tilt
    y = np.fft.irfft(f, SR)
    return y / np.max(np.abs(y))


def _machine(seed, anomalous):
    """A running motor: pink-ish broadband noise and a weak hum (95 or 100 Hz, seven harmonics);
    anomalous: the same plus a 3.15 kHz bearing whine and rattling clicks every 100 ms."""
    rng = np.random.default_rng(seed)
    t = np.arange(SR) / SR
    f0 = 95.0 + 5.0 * seed
    y = 0.2 * _tilted_noise(seed)
    y = y + sum(0.02 / k * np.sin(2 * np.pi * k * f0 * t + rng.uniform(0, 6.3)) for k in range(1, 8))
    if anomalous:
        y = y + 0.1 * np.sin(2 * np.pi * 3150.0 * t)
        clicks = np.zeros(SR)
        clicks[::1600] = 0.5
        y = y + np.convolve(clicks, np.exp(-np.arange(64) / 8.0), "same")
    return y


def make_ad():
    items = [("synthetic motor noise, normal", _machine(0, False), "normal"),
             ("synthetic motor noise, normal (other seed)", _machine(1, False), "normal"),
             ("synthetic motor noise + whine + clicks", _machine(0, True), "anomalous"),
             ("synthetic motor noise + whine + clicks (other)", _machine(1, True), "anomalous")]
    xs = np.stack([ad_vectors(y)[10] for _, y, _ in items])
    return dict(x=quantize("tiny_ad_autoencoder_int8", xs), names=[i[0] for i in items],
                expected=[i[2] for i in items], labels=[], kind="autoencoder",
                note="SYNTHETIC machine sounds (not recordings): pink-ish motor noise with a weak hum, and the "
                     "same with a whine and clicks added; MLPerf Tiny 5x128 log-mel vectors. The anomaly score is "
                     "the mean squared reconstruction error")


MAKERS = {
    "tiny_vww_mobilenetv1_96_int8": make_vww,
    "tflm_person_detect_int8": make_person_detect,
    "tiny_ic_resnet8_int8": make_resnet8,
    "tiny_kws_dscnn_int8": make_kws,
    "tflm_micro_speech_int8": make_micro_speech,
    "tiny_sww_int8": make_sww,
    "tflm_audio_preprocessor_int8": make_audio_preprocessor,
    "tflm_dtln_noise_suppression": make_dtln,
    "tflm_mnist_lstm_int8": make_mnist_lstm,
    "tflm_hello_world_int8": make_hello_world,
    "tiny_ad_autoencoder_int8": make_ad,
}


def _npz_bytes(d):
    buf = io.BytesIO()
    np.savez_compressed(buf, x=d["x"], names=np.array(d["names"], dtype=str),
                        expected=np.array(d["expected"], dtype=str), labels=np.array(d["labels"], dtype=str),
                        kind=np.array(d["kind"]), note=np.array(d["note"]))
    return buf.getvalue()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the stored files instead of writing")
    ap.add_argument("--only", nargs="*", help="model stems to make (default: all)")
    args = ap.parse_args(argv)
    os.makedirs(OUT, exist_ok=True)
    bad = 0
    for stem, make in MAKERS.items():
        if args.only and stem not in args.only:
            continue
        d = make()
        path = os.path.join(OUT, stem + ".npz")
        if args.check:
            with np.load(path) as old:
                same = np.array_equal(old["x"], d["x"]) and list(old["expected"]) == list(d["expected"])
            print(f"{stem}: {'same' if same else 'DIFFERENT'}")
            bad += not same
            continue
        data = _npz_bytes(d)
        with open(path, "wb") as f:
            f.write(data)
        print(f"{stem}: {d['x'].shape[0]} samples {d['x'].dtype} {list(d['x'].shape[1:])}, {len(data):,} B")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
