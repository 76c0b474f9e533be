"""Fault injection into the firmware simulator (issue 10): flipped bits in
flash (resident and segmented weights), a kernel writing flash while running,
a DMA that stops or crawls, an operator that overruns its buffer, overruns of
the schedule. Each must be detected and reported with where (address,
region, buffer, operator / item) and when (cycle / frame); priority frames
are never dropped. The injection engine is pyembed/bench/reliability.py
(`python -m pyembed.bench reliability --sim N` runs more).
"""
import numpy as np
import pytest

from firmware_sim import simulate
from pyembed.bench import reliability as rel
from pyembed.data import model_path
from pyembed.errors import SimulationFault
from pyembed.model.load import load_model


@pytest.fixture(scope="module")
def autoencoder():
    g = load_model(model_path("tiny_ad_autoencoder_int8"))
    x = np.random.default_rng(0).integers(-128, 128, g.tensors[g.inputs[0]].shape).astype(np.int8)
    return g, x


def test_a_flipped_flash_bit_is_caught_at_boot_naming_address_buffer_and_cycle(autoencoder):
    g, x = autoencoder
    seen = {}

    def flip(mem, pl):
        b = pl.flash[2]
        mem.regions[b.region].data[b.offset + 3] ^= 0x04
        seen["addr"], seen["name"] = mem.regions[b.region].base + b.offset + 3, b.name

    clean = simulate(g, None, "stm32f446", x, verify_flash=True)
    with pytest.raises(SimulationFault) as ei:
        simulate(g, None, "stm32f446", x, verify_flash=True, on_programmed=flip)
    e = ei.value
    assert "flash image check at cycle 0: 1 byte(s) differ" in str(e)
    assert f"0x{seen['addr']:08X}" in str(e) and seen["name"] in str(e)
    assert e.details["address"] == seen["addr"] and e.details["cycle"] == 0 and e.trace is not None
    # without the check the flip corrupts silently (what the check is for)
    r = simulate(g, None, "stm32f446", x, on_programmed=flip)
    assert r.cycles == clean.cycles


def test_a_stray_byte_in_erased_flash_is_caught_at_boot(autoencoder):
    g, x = autoencoder

    def stray(mem, pl):
        r = next(r for r in mem.regions.values() if r.is_flash)
        r.data[mem.programmed[r.name] + 100] = 0x3C

    with pytest.raises(SimulationFault, match="beyond the programmed image are not erased"):
        simulate(g, None, "stm32f446", x, verify_flash=True, on_programmed=stray)


def test_fault_injection_campaign():
    res = rel.sim_campaign(36, seed=7)
    assert res["cases"] == 36
    assert all(res["detected"][k] >= 1 for k in rel.SIM_FAULTS), res["detected"]
    assert not res["failures"], res["failures"][:3]


def test_the_campaign_can_fail():
    """Detection is really checked: with the boot check off, a flash flip
    goes unnoticed and the campaign reports it."""
    import random
    from firmware_sim import sim as sim_mod
    original = sim_mod.simulate

    def no_check(*a, **kw):
        kw["verify_flash"] = False
        return original(*a, **kw)

    sim_mod.simulate = no_check
    try:
        import firmware_sim
        firmware_sim.simulate = no_check
        desc, err = rel.sim_case("flash_flip", random.Random(1), rel._SimContext())
    finally:
        sim_mod.simulate = original
        firmware_sim.simulate = original
    assert err is not None and "not detected" in err, (desc, err)
