"""Where a stripe region's scratch goes (pe_stripe_buffer_breakdown,
pyembed.passes.region_memory): the parts against what a run writes, the
delay line against a hand derivation, the recomputation MACs against the
graph's own count."""
import numpy as np
import pytest

from pyembed.bench._built import _Net
from pyembed.kernels import stripe as st
from pyembed.model.load import load_tflite_bytes
from pyembed.passes.pipeline import _RegionCache, apply_pipeline
from pyembed.passes.region_memory import breakdown_lines, region_breakdown


def _unet(concat=False, seed=0):
    """16x16x1 -> conv 4 (e1) -> max pool -> conv 4 -> upsample -> ADD/CONCAT e1 -> conv 1."""
    n = _Net(seed)
    x = n.input((1, 16, 16, 1))
    e1 = n.conv(x, 4, full_range=concat) if concat else n.conv(x, 4)
    p1 = n.pool(e1, "max", 2, 2)
    b = n.conv(p1, 4, full_range=concat) if concat else n.conv(p1, 4)
    u = n.concat(n.upsample(b), e1) if concat else n.add(n.upsample(b), e1)
    y = n.conv(u, 1, act=None)
    return n.to_bytes([x], [y])


def _region(concat=False, stripe_width=None, streamed=False):
    g = load_tflite_bytes(_unet(concat), name="unet")
    cache = _RegionCache(g)
    return g, cache.region(0, len(g.operators) - 1, stripe_width, streamed=streamed)


@pytest.mark.parametrize("concat", [False, True])
@pytest.mark.parametrize("stripe_width", [None, 6])
def test_parts_are_what_a_run_writes(concat, stripe_width):
    g, r = _region(concat, stripe_width)
    bd = region_breakdown(r)
    x = np.random.default_rng(1).integers(-128, 128, r.chain.input_shape, dtype=np.int8)
    _, stats = st.run_stripes(list(r.chain), x, r.stripe_width, r.block_width, return_stats=True)
    # the executor's high-water marks of its rings, row blocks and delay lines
    assert stats.activation_bytes == bd.rings + bd.temps + bd.delay_bytes
    assert bd.total == r.scratch_bytes == bd.rings + bd.temps + bd.delay_bytes + bd.fixed
    assert bd.fixed > 0


def test_delay_line_matches_hand_derivation():
    # add row o reads upsampled row o = conv row o // 2, which needs pooled
    # rows up to o // 2 + 1, i.e. e1 rows up to 2 (o // 2 + 1) + 1 = o + 3 for
    # even o: e1 rows o..o+3 wait, 4 rows x 16 columns x 4 channels
    g, r = _region()
    bd = region_breakdown(r)
    (d,) = bd.delays
    assert (d.kind, d.from_layer, d.rows, d.width, d.channels) == ("add", 0, 4, 16, 4)
    assert d.bytes == 4 * 16 * 4 and d.latency == 3 and d.min_latency == 3
    # ring of the first conv: 2 input rows x 16 columns x 1 channel
    assert bd.ring[0] == 2 * 16 * 1
    # the skip's producer is layer 0: the only earlier tensor is the input,
    # whose recomputation costs the first conv's MACs over in-image taps (the
    # executor's count): (16 * 3 - 2) valid taps per row, same per column
    (alt,) = d.alternatives
    assert alt["at"] == -1 and alt["channels"] == 1 and alt["extra_macs"] == (16 * 3 - 2) ** 2 * 4
    # input rows behind e1 rows o..o+3: o-1..o+4
    assert alt["rows"] == 6 and alt["bytes"] == 6 * 16


def test_streamed_region_counts_its_row_buffer():
    _, whole = _region()
    _, streamed = _region(streamed=True)
    assert region_breakdown(streamed).fixed > region_breakdown(whole).fixed


def test_report_prints_the_breakdown():
    g = load_tflite_bytes(_unet(True), name="unet")
    res = apply_pipeline(g, "stripes")
    text = "\n".join(res.report())
    assert "delay line of layer" in text and "decoder row latency 3 rows (receptive-field minimum 3)" in text
    assert "scratch " in text
    assert breakdown_lines(region_breakdown(res.regions[0]))[0].lstrip().startswith("scratch ")


# -- a region's output over its own input (one stripe) --------------------------------------------

def _overlapped_run(r, x, delta):
    """Run the region's chain with the output at input + delta in one buffer."""
    net = r.net
    oshape = net.output_shape()
    n_in, n_out = x.size, int(np.prod(oshape))
    base = max(0, -delta)
    buf = np.zeros(base + max(n_in, delta + n_out) + 8, dtype=np.int8)
    buf[base:base + n_in] = x.ravel()
    xin = buf[base:base + n_in].reshape(x.shape)
    out = buf[base + delta:base + delta + n_out].reshape(oshape)
    arena = np.zeros(net.buffer_size(r.stripe_width, r.block_width), dtype=np.uint8)
    net.run(xin, out, r.stripe_width, r.block_width, arena)
    return out.copy()


@pytest.mark.parametrize("concat", [False, True])
def test_output_over_input_as_far_as_the_c_check_allows(concat):
    from pyembed.errors import ArgumentError
    from pyembed.passes.pipeline import last_input_rows
    from pyembed.plan.overlap import max_delta_region
    g, r = _region(concat)
    most = r.net.max_overlap_delta(r.stripe_width)
    # the Python derivation (per-row receptive field, pyembed.plan.overlap) agrees with C's
    shapes = st.check_network(r.chain, r.chain.input_shape)
    h, w, c = r.chain.input_shape
    oh, ow, oc = shapes[-1][1]
    rows = last_input_rows(list(r.chain), shapes)
    assert most == min(rows[o] * w * c - (o + 1) * ow * oc for o in range(oh))
    from pyembed.passes.pipeline import rewrite
    g2 = rewrite(g, [r])
    op = g2.operators[0]
    assert max_delta_region(g2, op, op.inputs[0], op.outputs[0]) == most
    x = np.random.default_rng(2).integers(-128, 128, r.chain.input_shape, dtype=np.int8)
    want = st.run_stripes(list(r.chain), x, r.stripe_width, r.block_width)
    for delta in (most, most - 8, 0 if most >= 0 else most):
        np.testing.assert_array_equal(_overlapped_run(r, x, delta), want)
    with pytest.raises(ArgumentError):
        _overlapped_run(r, x, most + 1)
    # several stripes read the input again: no overlap at all
    _, narrow = _region(concat, stripe_width=6)
    assert narrow.net.max_overlap_delta(6) is None
    with pytest.raises(ArgumentError):
        _overlapped_run(narrow, x, 0)


def test_planned_region_output_over_input_runs_bit_exact():
    from pyembed.plan.pipeline import plan_with_strategy
    from pyembed.plan.report import used_overlaps
    g = load_tflite_bytes(_unet(True), name="unet")
    g2, plan, _ = plan_with_strategy(g, "auto", max_extra_macs=0.0)
    assert g2.operators[0].type == "PE_STRIPE_REGION" and g2.operators[0].params["stripe_width"] == 16
    assert any(g2.operators[ov.op].type == "PE_STRIPE_REGION" for ov, _ in used_overlaps(plan))
    src, dst = g2.operators[0].inputs[0], g2.operators[0].outputs[0]
    a, b = plan.offset_of(plan.tensor_buffer[src]), plan.offset_of(plan.tensor_buffer[dst])
    sa, sb = g2.tensors[src].nbytes, g2.tensors[dst].nbytes
    assert a < b + sb and b < a + sa   # the planned buffers do share bytes
    rt = g2.compile(plan=plan)
    for x in _inputs(g, 3):
        arena = rt.new_arena()
        rt.set_input(arena, 0, x)
        for step in range(len(rt.order)):
            rt.invoke_op(step, arena)
        np.testing.assert_array_equal(rt.tensor_value(arena, g2.outputs[0]), g.run(x)[0])


def _inputs(g, k, seed=0):
    t = g.tensors[g.inputs[0]]
    rng = np.random.default_rng(seed)
    return [rng.integers(-128, 128, t.shape, dtype=np.int8) for _ in range(k)]


def test_regions_fit_a_weight_block():
    from pyembed.data import model_path
    from pyembed.model.load import load_model
    from pyembed.passes.pipeline import region_weight_bytes
    g = load_model(model_path("tiny_kws_dscnn_int8"))
    free = apply_pipeline(g, "auto")
    assert free.regions and max(region_weight_bytes(g, r) for r in free.regions) > 8192
    capped = apply_pipeline(g, "auto", max_region_weights=8192)
    assert all(region_weight_bytes(g, r) <= 8192 for r in capped.regions)
    assert any("8192 B weight block" in n for n in capped.notes)
    # the region operator's own constants are what the count says (no more)
    for r in capped.regions:
        op = next(o for o in capped.graph.operators if o.options.get("ops") == r.ops)
        consts = {t for t in op.inputs if t >= 0 and capped.graph.tensors[t].data is not None}
        assert sum(-(-capped.graph.tensors[t].nbytes // 16) * 16 for t in consts) <= region_weight_bytes(g, r)
