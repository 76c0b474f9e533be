"""PE_ATTENTION (tflm mode) and PE_LAYERNORM in the instruction model (issues #29 / #30), against the QEMU
counts stored by `python -m pyembed.bench calibrate_transformer --write`
(pyembed/bench/data/icount_transformer.json): the converter-made transformers (never fitted) are generated
again, their features recomputed and every operator predicted from the committed pyembed_icount.json."""
import json

import pytest

from firmware_sim import icount
from firmware_sim.cost import kernel_class
from pyembed.bench import calibrate_transformer as CT
from pyembed.bench.calibrate_f32 import stored_table
from pyembed.model.load import load_tflite_bytes

# reached (calibrate_transformer --write, 2026-11-29): attention -2.1 / -2.0 %, LayerNorm -0.3 .. +0.8 %, PE_LUT
# -0.4 / -0.1 % on the KWT (Cortex-M4 / M7), LayerNorm -0.3 / +0.6 % on the causal transformer
GROUP_TOLERANCE = {"PE_ATTENTION/tflm": 0.05, "PE_LAYERNORM": 0.05, "PE_LUT": 0.05}   # each group's operators
# the whole model: KWT -13.9 / -14.3 %, causal transformer -4.3 / -4.5 %; the rest of the KWT's error is its
# FULLY_CONNECTED layers (17 rows each, measured 805,000 against 433,000 predicted by the FULLY_CONNECTED group,
# which this bench does not refit)
MODEL_TOLERANCE = 0.15


def _data():
    with open(CT.DATA_FILE) as f:
        return json.load(f)


def _validation_rows():
    return [r for r in _data()["rows"] if r["set"] == "validation"]


def test_transformer_data_file_records_its_command():
    d = _data()
    assert d["command"] == "python -m pyembed.bench calibrate_transformer --write"
    assert {r["core"] for r in d["rows"]} == {"cortex-m4", "cortex-m7"}
    assert all(r["bit_exact"] for r in d["rows"])
    assert {r["model"] for r in _validation_rows()} == set(CT.VALIDATION)
    # the validation models are not in the fit
    assert not set(CT.VALIDATION) & set(CT.CALIBRATION)


def test_groups_are_in_the_committed_table():
    for core in ("cortex-m4", "cortex-m7"):
        t = stored_table(core)
        for grp in CT.GROUPS:
            assert grp in t, (core, grp)
            assert set(t[grp]["coef"]) <= set(icount.feature_names(None, grp))


@pytest.mark.parametrize("row", _validation_rows(), ids=lambda r: f"{r['model']}-{r['core']}")
def test_converter_transformer_within_tolerance(row, tmp_path):
    """The converter's KWT and causal transformer as measured on QEMU: the firmware's graph generated again,
    each operator's features equal to the stored ones, the attention and LayerNorm operators and the whole
    model predicted by the committed table within the bounds above (before the groups: -74 % / -47 %)."""
    from pyembed.target.firmware import generate
    with open(CT._validation_path(row["model"]), "rb") as f:
        g = load_tflite_bytes(f.read(), name=row["model"])
    pg = generate(g, row["board"], tmp_path / "fw").graph
    table = stored_table(row["core"])
    pred = meas = 0.0
    per = {}
    for o in row["operators"]:
        op = pg.operators[o["index"]]
        assert op.type == o["type"]
        f = icount.features(pg, op)
        for k, v in o["features"].items():
            assert f.get(k) == pytest.approx(v), (o["index"], k)
        n, key = icount.instructions(table, pg, op, kernel_class(op.type), kernel_class)
        assert key is not None, o["type"]
        pred, meas = pred + n, meas + o["systick_instructions"]
        if key in CT.GROUPS:
            e = per.setdefault(key, [0.0, 0.0])
            e[0], e[1] = e[0] + n, e[1] + o["systick_instructions"]
    # the KWT runs fused tflm attention, LayerNorm chains and GELU tables; the causal transformer's attention
    # stays unfused (its mask is a SELECT_V2), its LayerNorms are chains
    assert set(per) == (set(CT.GROUPS) if row["model"] == "seq_kwt" else {"PE_LAYERNORM"})
    for key, (p, m) in per.items():
        assert abs(p - m) <= GROUP_TOLERANCE[key] * m, f"{key}: predicted {p:,.0f}, measured {m:,.0f}"
    assert abs(pred - meas) <= MODEL_TOLERANCE * meas, f"model: predicted {pred:,.0f}, measured {meas:,.0f}"


def test_calibration_rows_predicted_again():
    """The fitted groups reproduce their own calibration graphs (stored features) within 6 % (reached: 4.3 %)."""
    for r in _data()["rows"]:
        if r["set"] != "calibration":
            continue
        table = stored_table(r["core"])
        for o in r["operators"]:
            if o["group_keys"][0] in CT.GROUPS:
                n, key = CT.predict_op(table, o)
                assert key == o["group_keys"][0]
                m = o["systick_instructions"]
                assert abs(n - m) <= 0.06 * m, f"{r['model']} {r['core']}: predicted {n:,.0f}, measured {m:,}"


def test_simulator_prices_tflm_attention_and_layernorm_with_their_groups(tmp_path):
    """firmware_sim.cost: on a profile with the instruction model a tflm-mode PE_ATTENTION and a PE_LAYERNORM
    are priced by their groups (instructions x the group's mix CPI), not by the fc / softmax rates and the
    element-wise class they had."""
    from firmware_sim.cost import CostModel
    from firmware_sim.profiles import load_profile
    from pyembed.target.firmware import generate
    prof = load_profile("mps2-an386")
    im = prof.instruction_model
    with open(CT._validation_path("seq_kwt"), "rb") as f:
        pg = generate(load_tflite_bytes(f.read(), name="seq_kwt"), "mps2-an386", tmp_path / "fw").graph
    seen = set()
    for op in pg.operators:
        if op.type not in ("PE_ATTENTION", "PE_LAYERNORM"):
            continue
        cyc, n, key, _cpi = icount.cycles(im["table"], im["core"], pg, op, kernel_class(op.type), kernel_class)
        assert key == ("PE_ATTENTION/tflm" if op.type == "PE_ATTENTION" else "PE_LAYERNORM")
        assert CostModel(prof).op_cost(pg, op).compute_cycles == pytest.approx(cyc)
        assert n > 100_000     # measured ~233,000 (LayerNorm) and ~403,000 (attention) per call
        seen.add(op.type)
    assert seen == {"PE_ATTENTION", "PE_LAYERNORM"}
