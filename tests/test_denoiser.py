"""The bundled denoiser pyembed trains (tools/train_denoiser.py,
pyembed/data/models/pe_denoiser_int8.tflite): bit-exact (==) with the
tflite-micro interpreter on its held-back samples, as imported and as the
stripe regions run it; it denoises (PSNR against the clean image above the
noisy input's, computed here); the stripes plan it well below TFLM's arena;
`pyembed check` reports the PSNRs. The model is not retrained here."""
import numpy as np
import pytest
from click.testing import CliRunner

from pyembed.check.samples import bundled_samples, predictions, psnr
from pyembed.codegen.tflite_offline import tflm_head
from pyembed.data import model_path
from pyembed.model.load import load_model
from pyembed.model.tflite_writer import tflm_run


@pytest.fixture(scope="module")
def model():
    path = model_path("denoiser")
    with open(path, "rb") as f:
        blob = f.read()
    g = load_model(path)
    return g, blob, bundled_samples(g)


def _tflm(blob, x):
    return tflm_run(blob, [x], arena_size=1 << 20)[0]


def test_shape_and_samples(model):
    g, _, s = model
    t_in, t_out = g.tensors[g.inputs[0]], g.tensors[g.outputs[0]]
    assert tuple(t_in.shape) == (1, 120, 160, 1) and tuple(t_out.shape) == (1, 120, 160, 1)
    assert [op.type for op in g.operators] == ["CONV_2D"] * 3 and not g.unsupported
    assert s is not None and s.kind == "image" and len(s) == 4 and s.clean.shape == s.x.shape


def test_bit_exact_with_tflite_micro_on_every_sample(model):
    g, blob, s = model
    bad = []
    for k in range(len(s)):
        ours = g.run(s.x[k])[0]
        ref = _tflm(blob, s.x[k])
        n = int(np.count_nonzero(ours != ref))
        if n:
            bad.append(f"{s.names[k]}: {n} of {ref.size} pixels differ")
    assert not bad, bad


def test_it_denoises(model):
    """The int8 output is closer to the clean image than the noisy input is,
    by several dB, on every held-back image."""
    g, _, s = model
    gains = []
    for k in range(len(s)):
        out = g.run(s.x[k])[0].reshape(-1)
        noisy, clean = s.x[k].reshape(-1) + 128.0, s.clean[k].reshape(-1) + 128.0
        gains.append(psnr(out.astype(np.float64) + 128, clean, 255.0) - psnr(noisy, clean, 255.0))
    assert min(gains) > 3.0, gains


def test_int8_and_float64_agree(model):
    g, _, s = model
    preds = predictions(g, s)
    assert all(p.agree for p in preds), [p.line() for p in preds]
    assert all(p.int8.startswith("PSNR ") and "int8 against float64" in p.detail for p in preds)


def test_stripes_run_it_bit_exact_far_below_tflm(model):
    """The issue's goal for the shipped model: stripes at least 4x below TFLM's
    arena with at most 10 % extra MACs, bit-exact."""
    from pyembed.plan.pipeline import plan_with_strategy
    g, blob, s = model
    g2, plan, info = plan_with_strategy(g, "stripes", 0.10)
    regions = [op for op in g2.operators if op.type == "PE_STRIPE_REGION"]
    assert regions, info
    assert g2.macs <= 1.10 * g.macs
    head = tflm_head(blob)
    none = plan_with_strategy(g, "none", 0.10)[1].arena_size
    print(f"denoiser arena: stripes {plan.arena_size} B, layer by layer {none} B, TFLM {head} B")
    assert plan.arena_size < none
    assert 4 * plan.arena_size <= head
    ours = g2.run(s.x[0], layout="internal")[0]
    assert np.array_equal(ours.reshape(-1), _tflm(blob, s.x[0]).reshape(-1))


def test_check_command_reports_psnr():
    from pyembed.cli import main
    r = CliRunner().invoke(main, ["check", "denoiser", "--no-plot"])
    assert r.exit_code == 0, r.output
    assert "PSNR" in r.output and "int8 against float64" in r.output and "bit-exact" in r.output, r.output


def test_streamed_in_and_out_within_8_kb(model):
    """The issue's goal on the trained model: streamed input and output, at most
    8 KB of arena (the bench row's own figures: plan, host run, simulator)."""
    from pyembed.bench.pipeline import measure_model
    _, blob, _ = model
    (row,) = measure_model("pe_denoiser_int8", blob, n_inputs=1, strategies=("stripes+stream-io",))
    print(row["arena_bytes"], row["tflm_arena_bytes"])
    assert row["input"] == "streamed in and out" and row["bit_exact"] is True
    assert row["arena_bytes"] <= 8 * 1024 and row["mismatches_simulator"] == 0
