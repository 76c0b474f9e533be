"""The mutation campaign as a test (issue 33): fixed-seed mutants of the
bundled models (pyembed.bench.mutants: flatbuffer bytes and structural
fields) through load_model and the ``pyembed`` commands, in-process. A
command may succeed, fail a check or refuse the input (exit 0 / 1 / 2); an
internal error (exit 3), an exception escaping the command or a simulation
whose outputs differ from the host run is a bug.
``python -m pyembed.bench mutants --count 2000`` runs the full campaign."""
from pyembed.bench import mutants as M


def test_mutants_are_the_same_bytes_for_the_same_seed():
    a = [M.make_mutant(k, seed=3) for k in range(12)]
    b = [M.make_mutant(k, seed=3) for k in range(12)]
    assert a == b
    assert len({blob for _, blob, _ in a}) == 12


def test_the_structural_mutations_all_happen():
    kinds = {M.make_mutant(k, seed=0)[2].split(":")[0] for k in range(150)}
    assert set(M.STRUCTURAL) <= kinds


def test_no_mutant_makes_an_internal_error():
    # 150 mutants of the small bundled models through load_model and plan; one in ten also through
    # check, simulate and firmware (the full campaign takes the big models too)
    counts, failures = M.campaign(150, seed=0, every=10, models=M.SMALL)
    assert failures == [], "\n".join(f"#{f['mutant']} {f['model']} {f['stage']}: {f['what']} -> {f['error']}"
                                     for f in failures)
    assert sum(counts["plan"].values()) == 150
    assert all(sum(counts[c].values()) == 15 for c in ("check", "simulate", "firmware"))
    # the campaign is not vacuous: mutants are refused and accepted at load, planned and refused by plan
    assert counts["load_model"].get("refused", 0) >= 50 and counts["load_model"].get("ok", 0) >= 20
    assert counts["plan"].get("0", 0) >= 10 and counts["plan"].get("2", 0) >= 50
    assert set(counts["plan"]) <= {"0", "1", "2"}
