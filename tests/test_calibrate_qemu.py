"""The QEMU calibration's fit (pyembed.bench.calibrate_qemu) recovers a known
instruction model from operator counts, leave-one-model-out predicts a model
from the others, and the mps2 profiles use the stored instruction model."""
import numpy as np

from pyembed.bench import calibrate_qemu as cq


def _rows(true, mix, n_models=3, seed=1):
    rng = np.random.default_rng(seed)
    rows = []
    for m in range(n_models):
        ops = []
        for i in range(10):
            f = {"call": 1.0, "macs": float(rng.integers(1000, 10**6)), "outputs": float(rng.integers(100, 10**4)),
                 "pixels": float(rng.integers(10, 1000)), "rows": float(rng.integers(1, 50)),
                 "dot_loops": float(rng.integers(100, 10**5)), "tail_macs": 0.0}
            n = sum(true[k] * f[k] for k in true)
            ops.append({"index": i, "type": "CONV_2D", "group_keys": ["CONV_2D/gather", "CONV_2D", "class:conv",
                                                                       "class:other"],
                        "features": f, "systick_instructions": int(n), "traced_instructions": int(round(n)),
                        "mix_counts": {k: int(v * n) for k, v in mix.items()}})
        rows.append({"model": f"m{m}", "core": "cortex-m4", "board": "mps2-an386", "build": "dsp",
                     "bit_exact": True, "systick_instructions": 0, "operators": ops})
    return rows


def test_fit_recovers_a_known_instruction_model():
    true = {"call": 300.0, "macs": 1.25, "outputs": 14.0, "pixels": 30.0, "dot_loops": 6.0}
    mix = {"alu": 0.5, "load": 0.3, "mul": 0.2}
    rows = _rows(true, mix)
    got = cq.fit(rows)["cortex-m4"]["dsp"]["CONV_2D/gather"]
    assert got["n"] == 30
    for k, v in true.items():
        assert abs(got["coef"][k] - v) <= 1e-3 * max(1.0, v) + 0.6 * (k == "call"), (k, got["coef"])
    assert abs(got["mix"]["alu"] - 0.5) < 1e-3 and abs(got["mix"]["load"] - 0.3) < 1e-3
    res = cq.compare(rows, cq.fit(rows), cq.leave_one_model_out(rows))
    assert all(abs(r["error_pct"]) < 0.1 and abs(r["error_loo_pct"]) < 0.1 for r in res)
    # cycles = instructions x the mix's CPI on the Cortex-M4 (ALU 1, load 2, MUL 1)
    assert res[0]["cpi"] == round(0.5 * 1 + 0.3 * 2 + 0.2 * 1, 3)


def test_mps2_profiles_use_the_instruction_model():
    from firmware_sim.profiles import load_profile
    for name, core in (("mps2-an386", "cortex-m4"), ("MPS2-AN500", "cortex-m7")):
        p = load_profile(name)
        assert p.core == core
        im = p.instruction_model
        assert im is not None and im["core"] == core and im["build"] == "dsp"
        # every group the bundled models need, with a fitted model and a measured mix
        for key in ("CONV_2D/gather", "CONV_2D/reverse", "DEPTHWISE_CONV_2D/gather", "FULLY_CONNECTED",
                    "ADD", "AVERAGE_POOL_2D", "SOFTMAX"):
            g = im["table"][key]
            assert g["n"] >= 2 and any(v > 0 for v in g["coef"].values())
            assert abs(sum(v for k, v in g["mix"].items() if k != "ldm_stm_regs") - 1.0) < 1e-3
    assert load_profile("stm32f446").instruction_model is None
