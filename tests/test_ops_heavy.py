"""ops-heavy: convolution forms (reverse / scratch-free gather) and the
heavier operators, bit-exact with the tflite-micro interpreter (compared
with ==, every mismatch reported)."""
import numpy as np
import pytest

from pyembed.data import model_path
from pyembed.errors import ArgumentError
from pyembed.model.conv_form import choose_conv_forms, scratch_table, step_live_bytes
from pyembed.model.graph import random_inputs
from pyembed.model.load import load_model


def _tflm(path, xs):
    from tflite_micro.python.tflite_micro import runtime
    with open(path, "rb") as f:
        it = runtime.Interpreter.from_bytes(f.read())
    for i, x in enumerate(xs):
        it.set_input(x, i)
    it.invoke()
    return it.get_output(0)


def _mismatches(got, want):
    got, want = np.asarray(got), np.asarray(want).reshape(np.shape(got))
    bad = np.argwhere(got != want)
    return [(tuple(i), int(got[tuple(i)]), int(want[tuple(i)])) for i in bad]


# -- convolution forms ------------------------------------------------------------

@pytest.mark.parametrize("name", ["tiny_kws_dscnn_int8", "tiny_sww_int8", "tflm_micro_speech_int8"])
def test_every_conv_form_is_bit_exact_with_tflm(name):
    path = model_path(name)
    g = load_model(path)
    xs = random_inputs(g, 2, seed=7)
    for form in ("reverse", "gather", "auto"):
        choose_conv_forms(g, form)
        convs = [op for op in g.operators if op.type in ("CONV_2D", "DEPTHWISE_CONV_2D")]
        assert convs and all(op.params["conv_form"] in ("reverse", "gather") for op in convs)
        if form != "auto":
            assert all(op.params["conv_form"] == form for op in convs)
        for x in xs:
            got = g.run(x)[0]
            assert _mismatches(got, _tflm(path, x)) == [], (name, form)


def test_auto_form_keeps_reverse_rows_only_under_the_liveness_bound():
    g = load_model(model_path("tiny_sww_int8"))
    live = step_live_bytes(g)
    rows = scratch_table(g)
    assert {r["form"] for r in rows} == {"reverse", "gather"}  # this model needs both
    for r in rows:
        fits = live[r["op"]] + (r["reverse_scratch"] + 15) // 16 * 16 <= max(live)
        assert r["form"] == ("reverse" if fits else "gather")
        assert r["scratch"] == (r["reverse_scratch"] if fits else 0)


@pytest.mark.parametrize("name", ["tiny_kws_dscnn_int8", "tiny_sww_int8", "tflm_micro_speech_int8"])
def test_planned_arena_is_not_above_tflm_head(name):
    """The full plan (activations + scratch) against TFLM's measured head; with
    every convolution in the reverse form these models need more than TFLM."""
    from pyembed.codegen.tflite_offline import tflm_head
    from pyembed.plan import plan_graph
    path = model_path(name)
    with open(path, "rb") as f:
        head = tflm_head(f.read())
    g = load_model(path)
    assert plan_graph(g, time_limit=1.0).arena_size <= head
    choose_conv_forms(g, "reverse")
    assert plan_graph(g, time_limit=1.0).arena_size > head


def test_conv_form_rejects_an_unknown_form():
    g = load_model(model_path("tiny_sww_int8"))
    with pytest.raises(ArgumentError, match="form"):
        choose_conv_forms(g, "fast")
