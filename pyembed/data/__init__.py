"""Data shipped with pyembed (test vectors and example models), with provenance
and licence notes beside each set (see the README.md in each folder)."""
import os

DATA_DIR = os.path.dirname(os.path.abspath(__file__))
PEER_VECTORS_DIR = os.path.join(DATA_DIR, "peer_vectors", "cmsis_nn")
MODELS_DIR = os.path.join(DATA_DIR, "models")


def model_path(name):
    """Path of a bundled .tflite model by file name or stem."""
    if not name.endswith(".tflite"):
        name += ".tflite"
    return os.path.join(MODELS_DIR, name)
