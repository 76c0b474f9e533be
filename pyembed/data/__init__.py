"""Data shipped with pyembed (test vectors, example models and real input
samples for them), with provenance and licence notes beside each set (see the
README.md in each folder)."""
import os

DATA_DIR = os.path.dirname(os.path.abspath(__file__))
PEER_VECTORS_DIR = os.path.join(DATA_DIR, "peer_vectors", "cmsis_nn")
MODELS_DIR = os.path.join(DATA_DIR, "models")
SAMPLES_DIR = os.path.join(DATA_DIR, "samples")

# short names every command accepts for the bundled models (case-insensitive)
MODEL_ALIASES = {
    "kws": "tiny_kws_dscnn_int8",
    "vww": "tiny_vww_mobilenetv1_96_int8",
    "resnet8": "tiny_ic_resnet8_int8",
    "ic": "tiny_ic_resnet8_int8",
    "ad": "tiny_ad_autoencoder_int8",
    "sww": "tiny_sww_int8",
    "hello_world": "tflm_hello_world_int8",
    "micro_speech": "tflm_micro_speech_int8",
    "person_detect": "tflm_person_detect_int8",
    "audio_preprocessor": "tflm_audio_preprocessor_int8",
    "mnist_lstm": "tflm_mnist_lstm_int8",
    "dtln": "tflm_dtln_noise_suppression",
    "denoiser": "pe_denoiser_int8",
}


def model_path(name):
    """Path of a bundled .tflite model by short name (see MODEL_ALIASES), file name or stem."""
    name = MODEL_ALIASES.get(name.lower(), name)
    if not name.endswith(".tflite"):
        name += ".tflite"
    return os.path.join(MODELS_DIR, name)


def bundled_models():
    """[(short name or "", stem)] of every bundled model."""
    short = {}
    for k, v in MODEL_ALIASES.items():
        short.setdefault(v, k)
    stems = sorted(n[:-len(".tflite")] for n in os.listdir(MODELS_DIR) if n.endswith(".tflite"))
    return [(short.get(s, ""), s) for s in stems]


def resolve_model(model):
    """A path for MODEL: an existing file as it is, else a bundled model's path
    (short name, stem or file name), else MODEL unchanged (the loader then
    reports the missing file)."""
    model = os.fspath(model)
    if os.path.exists(model):
        return model
    p = model_path(model)
    return p if os.path.exists(p) else model
