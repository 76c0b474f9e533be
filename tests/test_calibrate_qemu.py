"""The QEMU calibration's fit (pyembed.bench.calibrate_qemu) recovers a cost
table from operator counts, and the mps2 profiles use the stored tables."""
import numpy as np

from pyembed.bench import calibrate_qemu as cq


def test_fit_recovers_a_known_table():
    rng = np.random.default_rng(1)
    true = {"call": 500.0, "mac": 1.5, "el": 12.0, "patch": 3.0}
    rows = []
    for m in range(3):
        ops = []
        for i in range(12):
            macs, el, patches = int(rng.integers(1000, 10**6)), int(rng.integers(100, 10**4)), \
                int(rng.integers(0, 10**5))
            cycles = true["call"] + true["mac"] * macs + true["el"] * el + true["patch"] * patches
            ops.append({"index": i, "type": "CONV_2D", "class": "conv", "macs": macs, "elements": el,
                        "patches": patches, "instructions": cycles / cq.CPI["cortex-m4"]["conv"]})
        rows.append({"model": f"m{m}", "core": "cortex-m4", "operators": ops})
    got = cq.fit(rows)["cortex-m4"]["conv"]
    assert abs(got["cycles_per_mac"] - 1.5) < 1e-3
    assert abs(got["cycles_per_element"] - 12.0) < 1e-2
    assert abs(got["cycles_per_patch"] - 3.0) < 1e-3
    assert got["n"] == 36
    loo = cq.leave_one_model_out(rows)
    assert all(abs(e) < 1e-3 for e in loo.values())


def test_mps2_profiles_use_the_qemu_tables():
    from firmware_sim.profiles import load_profile
    for name, core in (("mps2-an386", "cortex-m4"), ("MPS2-AN500", "cortex-m7")):
        p = load_profile(name)
        assert p.core == core
        base = load_profile("nucleo_l4r5zi" if core == "cortex-m4" else "nucleo_h7a3zi")
        assert p.kernel_cost("conv") != base.kernel_cost("conv")
