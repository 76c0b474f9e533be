"""Table I strategies (csrc/src/pipeline/pe_fused.c): the counters the kernels measure
against closed-form counts computed here from the shapes alone, for the
seed's layer and for random layers; every strategy (and the streaming fused
kernel) gives the same bits as convolution then max pooling run separately."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyembed.kernels import conv
from pyembed.kernels import pooling
from pyembed.bench import table1
from pyembed.errors import ArgumentError

STRATS = ("none", "naive", "striped", "reverse")


# ---- closed forms, one axis at a time (every count below is separable) ------

def conv_taps(n_out, length, k, stride, dil, pad):
    """In-bounds kernel taps of each convolution output along one axis."""
    return [sum(0 <= o * stride - pad + t * dil < length for t in range(k)) for o in range(n_out)]


def window_positions(n_win, window, stride, pad):
    """Positions (may lie in padding) of every pooling window along one axis."""
    return [[i * stride - pad + t for t in range(window)] for i in range(n_win)]


def closed_form(shape):
    """Counters each strategy must measure, from the layer's shapes."""
    (h, w, _c), (oc, kh, kw, icg), (sh, sw), (dh, dw), (pt, pl), (ch, cw) = (
        shape["in"], shape["filter"], shape["stride"], shape["dilation"], shape["pad"],
        shape["conv_out"])
    (wh, ww), (psh, psw), (ppt, ppl), (ph, pw) = (shape["window"], shape["pool_stride"],
                                                   shape["pool_pad"], shape["pool_out"])
    per_tap = icg * oc
    taps_y, taps_x = conv_taps(ch, h, kh, sh, dh, pt), conv_taps(cw, w, kw, sw, dw, pl)
    win_y, win_x = window_positions(ph, wh, psh, ppt), window_positions(pw, ww, psw, ppl)
    valid_y = [y for win in win_y for y in win if 0 <= y < ch]  # (window, position) pairs
    valid_x = [x for win in win_x for x in win if 0 <= x < cw]
    covered_y = sorted(set(valid_y))  # convolution rows some window reads
    covered_x = sorted(set(valid_x))
    pool_elems = ph * pw * oc
    pool_nominal = ph * wh * pw * ww
    pool_ops = len(valid_y) * len(valid_x) * oc
    conv_nominal_pixel = kh * kw * per_tap

    def macs(ys, xs):
        return sum(taps_y[y] for y in ys) * sum(taps_x[x] for x in xs) * per_tap

    return {
        "none": dict(conv_macs_nominal=ch * cw * conv_nominal_pixel, pool_ops_nominal=pool_nominal,
                     conv_macs=macs(range(ch), range(cw)), pool_ops=pool_ops, conv_outputs=ch * cw,
                     peak_elems=ch * cw * oc + pool_elems),
        "naive": dict(conv_macs_nominal=pool_nominal * conv_nominal_pixel,
                      pool_ops_nominal=pool_nominal, conv_macs=macs(valid_y, valid_x),
                      pool_ops=pool_ops, conv_outputs=len(valid_y) * len(valid_x),
                      peak_elems=pool_elems),
        # the stripe computes whole rows, every column of each row a window reads
        "striped": dict(conv_macs_nominal=len(covered_y) * cw * conv_nominal_pixel,
                        pool_ops_nominal=pool_nominal, conv_macs=macs(covered_y, range(cw)),
                        pool_ops=pool_ops, conv_outputs=len(covered_y) * cw,
                        peak_elems=min(wh, ch) * cw * oc + pool_elems),
        "reverse": dict(conv_macs_nominal=len(covered_y) * len(covered_x) * conv_nominal_pixel,
                        pool_ops_nominal=pool_nominal, conv_macs=macs(covered_y, covered_x),
                        pool_ops=pool_ops, conv_outputs=len(covered_y) * len(covered_x),
                        peak_elems=pool_elems),
    }


def run_all(case, conv_kw, pool_kw):
    """Every strategy + the fused stream; checks identical outputs against
    conv2d followed by pooling.max_pool2d; returns the counters."""
    args = (case["x"], case["weights"], case["bias"], case["multiplier"], case["shift"])
    conv_out = conv.conv2d(*args, **conv_kw)
    want = pooling.max_pool2d(conv_out, pool_kw["window"], pool_kw["pool_stride"],
                              pool_kw["pool_padding"], rule=pool_kw["pool_rule"],
                              activation=pool_kw.get("pool_activation", (-128, 127)))
    counters = {}
    for strategy in STRATS + ("fused",):
        got, cnt = conv.conv_pool2d(*args, strategy=strategy, return_stats=True, **conv_kw, **pool_kw)
        bad = np.argwhere(got != want)
        assert bad.size == 0, f"{strategy}: {len(bad)} of {want.size} differ, first {bad[:5].tolist()}"
        counters[strategy] = cnt
    return conv_out.shape, want.shape, counters


def check_counters(shape, counters):
    expect = closed_form(shape)
    for strategy in STRATS:
        for key, value in expect[strategy].items():
            assert counters[strategy][key] == value, (strategy, key, counters[strategy][key], value)
        assert counters[strategy]["peak_bytes"] == counters[strategy]["peak_elems"]
    fused = counters["fused"]
    assert fused["macs"] == expect["none"]["conv_macs"]
    assert fused["combines"] == expect["none"]["pool_ops"]


@pytest.mark.parametrize("stride", table1.STRIDES)
def test_seed_layer_counters_match_closed_form_and_published_table(stride):
    case = table1.make_case(seed=3)
    pt, pb = table1.same_padding(table1.IN_HW, table1.WINDOW, stride)
    conv_kw = dict(padding=table1.CONV_PAD, input_offset=128, output_offset=-5)
    pool_kw = dict(window=table1.WINDOW, pool_stride=stride, pool_padding=(pt, pb, pt, pb),
                   pool_rule="ceil")
    cshape, pshape, counters = run_all(case, conv_kw, pool_kw)
    assert pshape[1:3] == (-(-table1.IN_HW // stride),) * 2  # ceil(25 / s) per axis
    shape = {"in": case["x"].shape[1:], "filter": case["weights"].shape, "stride": (1, 1),
             "dilation": (1, 1), "pad": (1, 1), "conv_out": cshape[1:3], "window": (5, 5),
             "pool_stride": (stride, stride), "pool_pad": (pt, pt), "pool_out": pshape[1:3]}
    check_counters(shape, counters)
    # the closed form of the seed's convention is the seed's published table
    expect = closed_form(shape)
    for strategy, (macc, memory) in table1.SEED_TABLE[stride].items():
        e = expect[strategy]
        assert (e["conv_macs_nominal"] + e["pool_ops_nominal"], e["peak_elems"]) == (macc, memory)


def test_bench_table1_reports_the_published_table():
    res = table1.measure(seed=1)
    for st_ in res["strides"]:
        assert st_["matches_seed"] and st_["outputs_identical"]
        for strategy, (macc, memory) in table1.SEED_TABLE[st_["stride"]].items():
            row = st_["rows"][strategy]
            assert (row["macc_seed"], row["peak_elems"]) == (macc, memory)


@st.composite
def layer(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    h, w = draw(st.integers(1, 12)), draw(st.integers(1, 12))
    groups, icg, ocg = draw(st.integers(1, 2)), draw(st.integers(1, 4)), draw(st.integers(1, 3))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    pads = tuple(draw(st.integers(0, 3)) for _ in range(4))
    wh, ww = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    psh, psw = draw(st.integers(1, 6)), draw(st.integers(1, 6))  # also stride > window (gaps)
    ppads = tuple(draw(st.integers(0, 4)) for _ in range(4))
    rule = draw(st.sampled_from(["floor", "ceil"]))
    c, oc = groups * icg, groups * ocg
    case = dict(x=rng.integers(-128, 128, (1, h, w, c), dtype=np.int8),
                weights=rng.integers(-128, 128, (oc, kh, kw, icg), dtype=np.int8),
                bias=rng.integers(-3000, 3000, oc).astype(np.int32),
                multiplier=rng.integers(2**30, 2**31, oc).astype(np.int32),
                shift=rng.integers(-11, 2, oc).astype(np.int32))
    conv_kw = dict(stride=(sh, sw), dilation=(dh, dw), padding=pads, groups=groups,
                   input_offset=int(rng.integers(-127, 129)), output_offset=int(rng.integers(-128, 128)))
    pool_kw = dict(window=(wh, ww), pool_stride=(psh, psw), pool_padding=ppads, pool_rule=rule,
                   pool_activation=(-100, 120))
    return case, conv_kw, pool_kw


@given(layer())
def test_random_layers_counters_and_bits(arg):
    case, conv_kw, pool_kw = arg
    try:
        cshape, pshape, counters = run_all(case, conv_kw, pool_kw)
    except ArgumentError as e:  # the shape rules leave no output: nothing to count
        assert "output" in str(e) or "no output" in str(e)
        return
    shape = {"in": case["x"].shape[1:], "filter": case["weights"].shape,
             "stride": conv_kw["stride"], "dilation": conv_kw["dilation"],
             "pad": (conv_kw["padding"][0], conv_kw["padding"][2]), "conv_out": cshape[1:3],
             "window": pool_kw["window"], "pool_stride": pool_kw["pool_stride"],
             "pool_pad": (pool_kw["pool_padding"][0], pool_kw["pool_padding"][2]),
             "pool_out": pshape[1:3]}
    check_counters(shape, counters)
    # the fused stream pools with every kind: avg and sum as well
    args = (case["x"], case["weights"], case["bias"], case["multiplier"], case["shift"])
    conv_out = conv.conv2d(*args, **conv_kw)
    pk = dict(stride=pool_kw["pool_stride"], padding=pool_kw["pool_padding"],
              rule=pool_kw["pool_rule"], activation=pool_kw["pool_activation"])
    got = conv.conv_pool2d(*args, pool="avg", **conv_kw, **pool_kw)
    assert np.array_equal(got, pooling.avg_pool2d(conv_out, pool_kw["window"], **pk))
    sq = dict(multiplier=1518500250, shift=-3, output_offset=7)
    got = conv.conv_pool2d(*args, pool="sum", **{f"pool_{k}": v for k, v in sq.items()},
                           **conv_kw, **pool_kw)
    assert np.array_equal(got, pooling.sum_pool2d(conv_out, pool_kw["window"], **pk, **sq))


def test_strategies_reject_other_pool_kinds_and_names():
    case = table1.make_case()
    args = (case["x"], case["weights"], case["bias"], case["multiplier"], case["shift"])
    with pytest.raises(ArgumentError, match="pool"):
        conv.conv_pool2d(*args, window=2, pool="avg", strategy="naive")
    with pytest.raises(ArgumentError, match="strategy"):
        conv.conv_pool2d(*args, window=2, strategy="tiled")
    # the fused stream takes every pooling kind: avg equals conv then avg pooling
    got = conv.conv_pool2d(*args, window=3, pool_stride=2, pool="avg", padding=1)
    want = pooling.avg_pool2d(conv.conv2d(*args, padding=1), 3, 2)
    assert np.array_equal(got, want)
