"""One operator numbering across tables: every operator of a rewritten graph
(stripe regions, conv -> pool, fusion) names the imported operators it runs
(pyembed.model.graph.imported_ops), and together they cover the imported
graph exactly once, so the latency table's rows point at the accuracy
table's."""
import json

import pytest
from click.testing import CliRunner

from pyembed.cli import main
from pyembed.data import model_path
from pyembed.model.graph import origin_label
from pyembed.target.planning import PlanOptions, plan_for_target


@pytest.mark.parametrize("name,strategy", [("tiny_kws_dscnn_int8", "auto"), ("tiny_vww_mobilenetv1_96_int8", "auto"),
                                           ("tiny_ic_resnet8_int8", "stripes"), ("tiny_kws_dscnn_int8", "none")])
def test_each_imported_operator_is_run_by_exactly_one_operator(name, strategy):
    tp = plan_for_target(model_path(name), "stm32f746", PlanOptions(strategy=strategy))
    origin = tp.graph.origin
    assert set(origin) == {op.index for op in tp.graph.operators}
    covered = [i for op in tp.graph.operators for i in origin[op.index]]
    assert sorted(covered) == [op.index for op in tp.imported.operators], origin
    for op in tp.graph.operators:
        ids = origin[op.index]
        if op.type == "PE_CONV_POOL":
            assert len(ids) in (2, 3), (op, ids)   # conv (element-wise) pool
        elif op.type == "PE_STRIPE_REGION":      # one layer or more run row by row
            assert len(ids) >= 1, (op, ids)
        else:        # an operator the passes left alone runs the imported operator of its own type
            assert len(ids) == 1 and tp.imported.operators[ids[0]].type == op.type, (op, ids)
    if strategy == "none":
        assert all(origin[i] == (i,) for i in origin)


def test_labels():
    assert origin_label({3: (1, 2, 3, 4)}, 3) == "1-4"
    assert origin_label({0: (1, 3)}, 0) == "1,3"
    assert origin_label({0: ()}, 0) == "-"
    assert origin_label(None, 7) == "7"


def test_simulate_prints_and_reports_the_imported_numbers(tmp_path):
    r = CliRunner().invoke(main, ["simulate", "tiny_kws_dscnn_int8", "--profile", "stm32f746", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output[r.output.index("{"):])
    rows = {o["op"]: o["imported"] for o in d["ops"]}
    tp = plan_for_target(model_path("tiny_kws_dscnn_int8"), "stm32f746", PlanOptions())
    assert rows == {k: list(v) for k, v in tp.graph.origin.items()}
    r = CliRunner().invoke(main, ["simulate", "tiny_kws_dscnn_int8", "--profile", "stm32f746"])
    header = next(line for line in r.output.splitlines() if line.lstrip().startswith("step"))
    assert "imported" in header
    region = next(line for line in r.output.splitlines() if "PE_STRIPE_REGION" in line and "%" in line)
    k = region.split()[1]
    assert region.split()[2] == origin_label(tp.graph.origin, int(k))
