"""bench firmware_pipeline's per-region comparison (issue #29's 1.15x bound): which operators of the
layers run stand for a stripe region, found by the tensor names of the region's input and output."""
from pyembed.bench.firmware_pipeline import _between, _region_ratios


def _op(kind, ins, outs, n):
    return {"type": kind, "in": ins, "out": outs, "instructions": n}


# x -> conv1 -> a -> conv2 -> b -> pool -> c -> fc -> y, plus a side branch a -> side -> s (not on the path to c)
LAYERS = [_op("CONV_2D", ["x"], ["a"], 100), _op("CONV_2D", ["a"], ["b"], 200), _op("ADD", ["a"], ["s"], 7),
          _op("MAX_POOL_2D", ["b"], ["c"], 30), _op("FULLY_CONNECTED", ["c", "s"], ["y"], 50)]


def test_between_keeps_only_the_operators_on_a_path():
    assert _between(LAYERS, "x", "c") == [0, 1, 3]
    assert _between(LAYERS, "a", "c") == [1, 3]
    # a residual join: both branches from a reach y
    assert _between(LAYERS, "a", "y") == [1, 2, 3, 4]
    assert _between(LAYERS, "b", "b") == []
    assert _between(LAYERS, "x", "nowhere") is None


def test_region_ratio_against_the_layers_run():
    rows = [{"model": "m", "strategy": "layers", "_ops": LAYERS},
            {"model": "m", "strategy": "wide",
             "_ops": [_op("PE_STRIPE_REGION", ["x"], ["c"], 396), _op("ADD", ["a"], ["s"], 7),
                      _op("FULLY_CONNECTED", ["c", "s"], ["y"], 50)]},
            {"model": "other", "strategy": "auto", "_ops": [_op("PE_STRIPE_REGION", ["x"], ["c"], 10)]}]
    _region_ratios(rows)
    assert all("_ops" not in r for r in rows)
    assert "regions" not in rows[0]
    assert rows[1]["regions"] == [{"operator": 0, "instructions": 396, "layers_operators": 3,
                                   "layers_instructions": 330, "ratio": 1.2}]
    # no layers run of that model: the region is listed without a ratio
    assert rows[2]["regions"] == [{"operator": 0, "instructions": 10, "layers_operators": 0,
                                   "layers_instructions": None, "ratio": None}]
