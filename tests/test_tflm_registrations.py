"""TFLite Micro's registered operators beside pyembed's
(pyembed.model.tflm_registry, pyembed/data/tflm_registrations.json).

* The checked-in table equals the one derived from the installed tflite-micro
  package (skipped without the package); when it differs, regenerate it with
  ``python -m pyembed.model.tflm_registry --write`` and review the change.
* Every TFLM operator is either run by pyembed or listed in DELIBERATE_GAPS
  with a reason; a listed gap pyembed now runs must leave the list.
* ``pyembed ops --tflm`` prints the comparison.
"""
import json

import pytest
from click.testing import CliRunner

from pyembed.model import tflm_registry as R


def test_checked_in_table_is_the_installed_packages():
    pytest.importorskip("tflite_micro")
    path = R.library_path()
    assert path is not None and path.is_file()
    derived = R.derive(path)
    kept = R.load_table()
    assert kept["regenerate"] == R.REGENERATE
    assert kept["operators"] == derived, (
        f"pyembed/data/tflm_registrations.json is stale for tflite-micro {R.package_version()}: "
        f"run {R.REGENERATE}; added {sorted({o['name'] for o in derived} - {o['name'] for o in kept['operators']})}, "
        f"removed {sorted({o['name'] for o in kept['operators']} - {o['name'] for o in derived})}")


def test_derivation_reads_names_custom_codes_and_typed_registrations():
    """The derivation itself, on the known shape of the library: builtin names
    as pyembed's importer names them, custom operators by their custom code,
    typed registrations folded into their operator's types."""
    names = {o["name"]: o for o in R.load_table()["operators"]}
    for builtin in ("CONV_2D", "FULLY_CONNECTED", "EQUAL", "SELECT_V2", "ARG_MAX", "REDUCE_MAX", "SVDF"):
        assert builtin in names
    assert "L2NORM_REF" not in names and "RFFT_INT16" not in names
    assert names["CUSTOM:SignalRfft"]["types"] == ["float32", "int16", "int32"]
    assert names["CUSTOM:SignalRfft"]["symbol"] == "tflm_signal::Register_RFFT"
    assert "CUSTOM:TFLite_Detection_PostProcess" in names
    assert len(names) >= 100


def test_every_tflm_operator_runs_or_is_a_listed_gap():
    rows = R.compare()
    missing = [r["name"] for r in rows if r["status"] == "missing"]
    assert not missing, f"TFLM operators pyembed neither runs nor lists in DELIBERATE_GAPS: {missing}"
    ours = R.pyembed_names()
    stale = sorted(n for n in R.DELIBERATE_GAPS if n in ours)
    assert not stale, f"pyembed now runs {stale}: remove them from DELIBERATE_GAPS"
    tflm = {r["name"] for r in rows}
    unknown = sorted(n for n in R.DELIBERATE_GAPS if n not in tflm)
    assert not unknown, f"DELIBERATE_GAPS lists operators TFLM does not register: {unknown}"
    assert all(isinstance(v, str) and len(v) > 8 for v in R.DELIBERATE_GAPS.values())
    # a type gap belongs to an operator pyembed runs (else it is a DELIBERATE_GAPS entry)
    assert all(n in ours and n in tflm for n in R.TYPE_GAPS), sorted(R.TYPE_GAPS)
    assert all(isinstance(v, str) and len(v) > 8 for t in R.TYPE_GAPS.values() for v in t.values())
    # this operators run
    runs = {r["name"] for r in rows if r["status"] == "runs"}
    assert {"EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL", "LOGICAL_AND", "LOGICAL_OR",
            "LOGICAL_NOT", "SELECT_V2", "ARG_MAX", "ARG_MIN", "REDUCE_MAX", "REDUCE_MIN"} <= runs


def test_ops_tflm_command():
    from pyembed.cli.app import main
    r = CliRunner().invoke(main, ["ops", "--tflm"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert any(line.startswith("SELECT_V2 ") and " runs " in line and "code 89" in line for line in lines)
    assert any(line.startswith("SVDF ") and " runs " in line and "code 232" in line for line in lines)
    assert any(line.startswith("WHILE ") and " runs " in line and "code 98" in line for line in lines)
    assert any(line.startswith("L2_POOL_2D ") and " runs " in line and "code 294" in line for line in lines)
    assert any(line.startswith("VAR_HANDLE ") and " gap " in line and "resvar_import" in line for line in lines)
    n = len(R.load_table()["operators"])
    assert lines[-1].startswith(f"{n} TFLM operators") and "0 unlisted" in lines[-1]
    j = json.loads(CliRunner().invoke(main, ["ops", "--tflm", "--json"]).output)
    assert len(j["operators"]) == n
    md = CliRunner().invoke(main, ["ops", "--tflm", "--markdown"]).output
    assert md.startswith("| TFLM operator | TFLM types | pyembed | detail |")
