"""UNIDIRECTIONAL_SEQUENCE_LSTM against LiteRT: every output element of
pyembed's Graph.run(rounding="litert") compared with == to what the LiteRT
interpreter (ai_edge_litert, BUILTIN_REF resolver) computes, on

* the bundled LSTM models (MNIST LSTM, DTLN noise suppression), whole
  models, on random int8 inputs and on inputs over a narrower range;
* random single-LSTM models built by pyembed.model.tflite_writer.lstm_model
  (batch, time, sizes, zero points, input / hidden scales, cell scales
  2^-15..2^-9, bias ranges, time / batch major drawn from a seeded RNG).

Two columns: "tflm arithmetic" keeps TFLM's LSTM arithmetic under the
litert preset (what rounding="litert" computed before the LSTM had a LiteRT
variant), "litert" is the current rounding="litert".

    python -m pyembed.bench lstm_litert [--json] [--cases N] [--inputs K]
"""
import argparse

import numpy as np

from pyembed.bench.common import emit, table

BUNDLED = ("tflm_mnist_lstm_int8", "tflm_dtln_noise_suppression")


def random_cases(n, seed=0):
    """n keyword sets for lstm_model (cell scales LiteRT accepts)."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        out.append(dict(seed=1000 + k, batch=int(rng.integers(1, 4)), time=int(rng.integers(1, 12)),
                        in_dim=int(rng.integers(1, 24)), state=int(rng.integers(1, 40)),
                        cell_scale=2.0 ** -int(rng.integers(9, 16)), hidden_zp=int(rng.integers(-128, 128)),
                        in_zp=int(rng.integers(-128, 128)), in_scale=float(rng.uniform(0.002, 0.1)),
                        h_scale=float(rng.uniform(0.003, 0.02)), time_major=bool(rng.integers(2)),
                        bias_amp=int(rng.choice([3000, 30000, 300000]))))
    return out


def _run_all(g, xs_list, litert_lstm):
    """Graph.run(rounding="litert") on every input; without litert_lstm the
    LSTM keeps TFLM's words (its LiteRT words are set aside meanwhile)."""
    saved = {}
    if not litert_lstm:
        saved = {k: op.params.pop("words_litert") for k, op in enumerate(g.operators)
                 if "words_litert" in op.params and op.type == "UNIDIRECTIONAL_SEQUENCE_LSTM"}
    g._runtime_cache.clear()
    try:
        return [g.run(xs, rounding="litert")[0] for xs in xs_list]
    finally:
        for k, w in saved.items():
            g.operators[k].params["words_litert"] = w
        g._runtime_cache.clear()


def _count(g, blob, xs_list):
    """(elements, mismatches with TFLM's LSTM arithmetic, mismatches now)."""
    from pyembed.model.tflite_writer import litert_run
    old = _run_all(g, xs_list, False)
    now = _run_all(g, xs_list, True)
    n = before = after = 0
    for xs, o, y in zip(xs_list, old, now):
        want = np.asarray(litert_run(blob, xs)[0]).reshape(y.shape)
        n += y.size
        before += int(np.count_nonzero(o != want))
        after += int(np.count_nonzero(y != want))
    return n, before, after


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench lstm_litert")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--cases", type=int, default=60, help="random test-built models")
    ap.add_argument("--inputs", type=int, default=3, help="random inputs per model")
    a = ap.parse_args(argv)
    from pyembed.data import model_path
    from pyembed.model.graph import random_inputs
    from pyembed.model.load import load_model, load_tflite_bytes
    from pyembed.model.tflite_writer import lstm_model
    rows = []
    for name in BUNDLED:
        path = model_path(name)
        g = load_model(path)
        with open(path, "rb") as f:
            blob = f.read()
        rng = np.random.default_rng(3)
        shape = g.tensors[g.inputs[0]].shape
        xs_list = random_inputs(g, a.inputs, seed=2)
        xs_list += [[rng.integers(-128, -40, size=shape, dtype=np.int8)] for _ in range(a.inputs)]
        n, before, after = _count(g, blob, xs_list)
        rows.append({"model": name, "elements": n, "tflm_arithmetic": before, "litert": after})
    tot = {"model": f"{a.cases} random LSTMs", "elements": 0, "tflm_arithmetic": 0, "litert": 0}
    for case in random_cases(a.cases):
        blob = lstm_model(**case)
        g = load_tflite_bytes(blob, name="lstm")
        n, before, after = _count(g, blob, random_inputs(g, a.inputs, seed=case["seed"]))
        tot["elements"] += n
        tot["tflm_arithmetic"] += before
        tot["litert"] += after
    rows.append(tot)
    cols = ["model", "elements", "tflm_arithmetic", "litert"]
    emit({"rows": rows}, a.json, lambda r: "output elements differing from LiteRT's (==):\n" +
         table(cols, [[row[c] for c in cols] for row in r["rows"]]))
    return 0
