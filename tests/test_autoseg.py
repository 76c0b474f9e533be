"""`pyembed simulate --segments BYTES` says when it divided the model itself."""
import json
import os

from click.testing import CliRunner

from pyembed.cli import main
from pyembed.data import MODELS_DIR

KWS = os.path.join(MODELS_DIR, "tiny_kws_dscnn_int8.tflite")


def test_simulate_says_it_divided_the_model():
    res = CliRunner().invoke(main, ["simulate", KWS, "-p", "stm32f446", "--segments", "8K", "--no-ops"])
    assert res.exit_code == 0, res.output
    assert "do not fit the 8192 B block: divided automatically into" in res.output
    res = CliRunner().invoke(main, ["simulate", KWS, "-p", "stm32f446", "--segments", "8K", "--json"])
    d = json.loads(res.output)
    assert d["segment_note"].startswith("weights (") and f"{len(d['segments'])} segments" in d["segment_note"]


def test_note_when_weights_fit():
    from firmware_sim.autoseg import needs_segments, segment_note
    from pyembed.model.load import load_model
    g = load_model(KWS)
    assert needs_segments(g, 1000) and not needs_segments(g, 10**6)
    assert segment_note(g, 10**6) == f"weights ({g.weights_bytes} B) fit the 1000000 B block: not segmented, " \
                                     f"resident in flash"
