"""Row-by-row stripe execution with line buffers (SPEC section 4).

A chain of int8 layers (pyembed.kernels.layers) runs over an image without ever
storing a whole feature map: the output is cut into vertical stripes, each
stripe's rows flow through the layers in order, every layer keeps a ring of
its last (k_h - 1) input rows, rows are cut into blocks processed depth-first,
and every byte comes from one arena sized by a query (csrc/src/pipeline/pe_stripe.c).

    run_stripes(layers, x, stripe_width, block_width=16, out=None)
    run_full_frame(layers, x)          the pure-numpy layer-by-layer reference
    arena_size(layers, input_shape, stripe_width, block_width)
    plan(layers, input_shape, ram_budget)   stripe and block widths for a budget
    patch_plan(layers, input_shape, ram_budget)  patch-based execution with
                                       recomputed halos (MCUNetV2), counted by a model
    random_network(rng, input_shape, ...), pixel_network(rng, ...)
    (pyembed.plan.stripes: executable_chain and chain_memory for a model's operators)

Images are HWC int8 arrays (one image). Peak bytes of the stripe executor
are what its arena query returns (or, after a run, the high-water marks it
measured); MACs are the executor's counters. The full-frame figures are
measured by the numpy reference (intermediate maps alive at once; the network
input and output are the caller's in both schemes and are not counted).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pyembed._ext import _stripe as _c
from pyembed._validate import int_in_range
from pyembed.errors import ArgumentError, PlanError, UnsupportedError
from pyembed.kernels.layer_resize import Crop, ResizeBilinear
from pyembed.kernels.layers import (BRANCH_TYPES, Add, Concat, Conv2D, DepthToSpace, DepthwiseConv2D, Pointwise, Pool2D,
                            SpaceToDepth,
                            Table, Upsample,
                            Upsample2x, backward_intervals, infer_shapes, macs_per_tap,
                            receptive_field, run_layers, valid_tap_count)
from pyembed.kernels.quant import quantize_multiplier_array

DEFAULT_BLOCK = 16
BLOCK_CANDIDATES = (1, 2, 4, 8, 16, 32, 64)


# ---------------------------------------------------------------------------
# Network description for the C executor

def _check_image(x, name="x"):
    if not isinstance(x, np.ndarray) or x.dtype != np.int8 or x.ndim != 3:
        raise ArgumentError(f"{name}: expected an int8 HWC array (height, width, channels), got "
                            f"{getattr(x, 'dtype', type(x).__name__)} {getattr(x, 'shape', '')}")
    return np.ascontiguousarray(x)


def check_network(layers, input_shape):
    """Validate the chain on this input shape; returns the per-layer shapes.
    Raises ArgumentError for channel counts that do not chain, mismatched
    residual shapes and a receptive field larger than the image."""
    shapes = infer_shapes(layers, input_shape)
    rf = receptive_field(layers, input_shape)
    if rf[0] > input_shape[0] or rf[1] > input_shape[1]:
        raise ArgumentError(f"layers: the network's receptive field is {rf[0]}x{rf[1]} pixels, larger than "
                            f"the {input_shape[0]}x{input_shape[1]} image")
    for i, layer in enumerate(layers):
        if max(layer.extent) > _c.MAX_KERNEL or layer.kernel[0] * layer.kernel[1] > _c.MAX_TAPS:
            raise ArgumentError(f"layers[{i}]: kernel {layer.kernel} (window {layer.extent}) is larger than the "
                                f"executor's {_c.MAX_KERNEL}x{_c.MAX_KERNEL} maximum or has more than "
                                f"{_c.MAX_TAPS} taps")
    if len(layers) > _c.MAX_LAYERS:
        raise ArgumentError(f"layers: at most {_c.MAX_LAYERS} layers, got {len(layers)}")
    _check_branches_causal(layers, shapes)
    return shapes


def _check_branches_causal(layers, shapes):
    """Rows and columns reach an Add in order, so its branch must already hold
    row (column) x when the main input's row (column) x is computed: some
    dependency of main index x on the branch tensor must be >= x."""
    for i, layer in enumerate(layers):
        if not isinstance(layer, BRANCH_TYPES):
            continue
        prefix = layers[:i]
        for axis in (0, 1):
            for x in range(shapes[i][0][axis]):
                lo, hi = backward_intervals(prefix, shapes[:i], axis, x, x + 1)[layer.from_layer + 1]
                if hi - 1 < x:
                    raise UnsupportedError(
                        f"layers[{i}] (Add): main input {'row' if axis == 0 else 'column'} {x} depends "
                        f"only on branch (layer {layer.from_layer}) positions < {x}; the stripe executor "
                        f"needs every residual branch to be produced no later than the main path")


def _spec(layer, in_shape):
    h, w, c = in_shape
    out_c = layer.output_shape(in_shape)[2]
    s = {"in_c": c, "out_c": out_c, "kernel": tuple(layer.kernel), "stride": tuple(layer.stride),
         "padding": tuple(layer.resolve_padding(h, w))}
    if isinstance(layer, (Conv2D, DepthwiseConv2D)):
        s.update(op="depthwise" if isinstance(layer, DepthwiseConv2D) else
                 ("pointwise" if isinstance(layer, Pointwise) else "conv"),
                 weights=layer.weights, bias=layer.bias, multiplier=layer.multiplier, shift=layer.shift,
                 input_offset=-layer.input_zero_point, output_offset=layer.output_zero_point,
                 act_min=layer.act_min, act_max=layer.act_max, rounding=layer.rounding)
        if tuple(layer.dilation) != (1, 1):
            s["dilation"] = tuple(layer.dilation)
        if getattr(layer, "groups", 1) != 1:
            s["groups"] = int(layer.groups)
        if isinstance(layer, Pointwise):
            s.update(kernel=(1, 1), stride=(1, 1), padding=(0, 0, 0, 0))
    elif isinstance(layer, Pool2D):
        s.update(op="pool", pool_kind=layer.kind, act_min=layer.act_min, act_max=layer.act_max)
    elif isinstance(layer, Add):
        s.update(op="add", from_layer=layer.from_layer, left_shift=layer.left_shift,
                 main_offset=-layer.main_zero_point, main_quant=(layer.main_multiplier, layer.main_shift),
                 branch_offset=-layer.branch_zero_point,
                 branch_quant=(layer.branch_multiplier, layer.branch_shift),
                 out_quant=(layer.output_multiplier, layer.output_shift),
                 output_offset=layer.output_zero_point, act_min=layer.act_min, act_max=layer.act_max,
                 rounding=layer.rounding)
    elif isinstance(layer, Upsample2x):
        s.update(op="upsample2x", kernel=(1, 1), stride=(1, 1), padding=(0, 0, 0, 0))
    elif isinstance(layer, Upsample):
        s.update(op="upsample", kernel=(1, 1), stride=tuple(layer.factor), padding=(0, 0, 0, 0))
    elif isinstance(layer, ResizeBilinear):
        s.update(op="resize_bilinear", kernel=(1, 1), stride=tuple(layer.factor), padding=(0, 0, 0, 0),
                 resize_flags=layer.flags)
    elif isinstance(layer, Crop):
        s.update(op="crop", kernel=(1, 1), stride=(1, 1), padding=(0, layer.crop[0], 0, layer.crop[1]))
    elif isinstance(layer, DepthToSpace):
        s.update(op="depth_to_space", kernel=(1, 1), stride=(layer.block, layer.block), padding=(0, 0, 0, 0))
    elif isinstance(layer, SpaceToDepth):
        s.update(op="space_to_depth", padding=(0, 0, 0, 0))
    elif isinstance(layer, Concat):
        s.update(op="concat", from_layer=layer.from_layer, branch_first=int(layer.branch_first))
    elif isinstance(layer, Table):
        s.update(op="table", table=layer.table, table_channels=layer.table_channels)
    return s


def compile_network(layers, input_shape):
    """The C network descriptor for this input shape (validated)."""
    shapes = check_network(layers, input_shape)
    specs = [_spec(layer, shapes[i][0]) for i, layer in enumerate(layers)]
    h, w, c = (int(v) for v in input_shape)
    return _c.Network(specs, h, w, c)


def _widths(stripe_width, block_width):
    return (int_in_range(stripe_width, "stripe_width", 1, 2 ** 31 - 1),
            int_in_range(block_width, "block_width", 1, 2 ** 31 - 1))


def output_shape(layers, input_shape):
    return tuple(infer_shapes(layers, input_shape)[-1][1])


def arena_size(layers, input_shape, stripe_width, block_width=DEFAULT_BLOCK, net=None):
    """Arena bytes the C executor needs (its get_buffer_size query)."""
    s, b = _widths(stripe_width, block_width)
    net = net or compile_network(layers, input_shape)
    return net.buffer_size(s, b)


def predict_macs(layers, input_shape, stripe_width, net=None):
    """Multiply-accumulates a stripe run will do, from the C stripe geometry."""
    s, _ = _widths(stripe_width, 1)
    net = net or compile_network(layers, input_shape)
    return net.predict_macs(s)


@dataclass
class StripeStats:
    macs: int             # measured multiply-accumulates
    combines: int         # pooling taps, add elements
    input_reads: int      # input elements read (halo columns once per stripe)
    peak_bytes: int       # arena bytes touched (high-water marks), measured
    activation_bytes: int  # of which line stores, temporaries and branch stores
    arena_bytes: int      # the arena query's answer (what was provided)


def run_stripes(layers, x, stripe_width, block_width=DEFAULT_BLOCK, out=None, arena_bytes=None,
                return_stats=False):
    """Run layers over image x (HWC int8) in vertical stripes of stripe_width
    output columns, blocks of block_width columns. out: optional C-contiguous
    int8 array of the output shape to write into. arena_bytes: give the arena
    a different size than the query (a smaller one is a ScratchError).
    Returns the output, or (output, StripeStats) with return_stats."""
    x = _check_image(x)
    s, b = _widths(stripe_width, block_width)
    net = compile_network(layers, x.shape)
    oshape = net.output_shape()
    if out is None:
        out = np.empty(oshape, dtype=np.int8)
    elif (not isinstance(out, np.ndarray) or out.dtype != np.int8 or out.shape != oshape
          or not out.flags.c_contiguous or not out.flags.writeable):
        raise ArgumentError(f"out: expected a writeable C-contiguous int8 array of shape {oshape}, got "
                            f"{getattr(out, 'dtype', type(out).__name__)} {getattr(out, 'shape', '')}")
    need = net.buffer_size(s, b)
    size = need if arena_bytes is None else int_in_range(arena_bytes, "arena_bytes", 0, 2 ** 31 - 1)
    arena = np.zeros(size, dtype=np.uint8)
    st = net.run(x, out, s, b, arena)
    if not return_stats:
        return out
    return out, StripeStats(macs=int(st["macs"]), combines=int(st["combines"]),
                            input_reads=int(st["input_reads"]), peak_bytes=int(st["peak_bytes"]),
                            activation_bytes=int(st["peak_elems"]), arena_bytes=need)


def run_full_frame(layers, x, keep_outputs=False):
    """Full-frame layer-by-layer execution in pure numpy (the reference, no C):
    returns pyembed.kernels.layers.FullFrameResult (output, macs, peak_bytes)."""
    x = _check_image(x)
    return run_layers(layers, x, keep_outputs=keep_outputs)


def full_frame_macs(layers, input_shape):
    """Multiply-accumulates of full-frame execution (the reference's count)."""
    shapes = infer_shapes(layers, input_shape)
    return sum(layer.macs(shapes[i][0]) for i, layer in enumerate(layers))


def full_frame_peak_bytes(layers, input_shape):
    """Peak bytes of intermediate maps in full-frame execution (the same
    liveness rule as run_layers, from shapes only)."""
    shapes = infer_shapes(layers, input_shape)
    sizes = [int(np.prod(out)) for _, out in shapes]
    return _peak_live(layers, sizes)


def _peak_live(layers, sizes):
    """Peak of the sum of live intermediate buffers (sizes[i] = layer i's output)
    when layer i's output lives until its last consumer."""
    n = len(layers)
    last_use = {i: i + 1 for i in range(n - 1)}
    for j, layer in enumerate(layers):
        if isinstance(layer, BRANCH_TYPES) and layer.from_layer >= 0:
            last_use[layer.from_layer] = max(last_use[layer.from_layer], j)
    peak = 0
    for i in range(n):
        live = sum(sizes[j] for j in range(min(i + 1, n - 1)) if last_use[j] >= i)
        peak = max(peak, live)
    return peak


# ---------------------------------------------------------------------------
# Planning

@dataclass
class Plan:
    scheme: str            # "stripe" or "patch"
    stripe_width: int      # stripe: output columns per stripe; patch: tile width
    block_width: int       # stripe: columns per block; patch: tile height
    peak_bytes: int
    macs: int
    full_frame_macs: int
    full_frame_peak_bytes: int

    @property
    def mac_overhead(self):
        """Extra MACs relative to full-frame execution (0.05 = 5 %)."""
        return self.macs / self.full_frame_macs - 1.0 if self.full_frame_macs else 0.0

    @property
    def memory_reduction(self):
        return self.full_frame_peak_bytes / self.peak_bytes if self.peak_bytes else math.inf


def plan(layers, input_shape, ram_budget, block_widths=BLOCK_CANDIDATES):
    """Stripe and block widths whose arena fits ram_budget bytes with the
    fewest MACs (ties: the smaller arena), the block the widest that still
    fits. Raises PlanError when not even one-column stripes fit."""
    budget = int_in_range(ram_budget, "ram_budget", 1)
    blocks = sorted({int_in_range(b, "block_widths", 1) for b in block_widths})
    if not blocks:
        raise ArgumentError("block_widths: expected at least one width")
    net = compile_network(layers, input_shape)
    out_w = net.output_shape()[1]
    best = None
    # not monotone in the stripe width (edge stripes have a one-sided halo):
    # every width is tried
    for s in range(1, out_w + 1):
        size = net.buffer_size(s, blocks[0])
        if size > budget:
            continue
        macs = net.predict_macs(s)
        if best is None or (macs, size) < (best[0], best[1]):
            best = (macs, size, s)
    if best is None:
        raise PlanError(f"no stripe fits {budget} bytes: one-column stripes with {blocks[0]}-column "
                        f"blocks need {net.buffer_size(1, blocks[0])} bytes")
    macs, size, s = best
    block = blocks[0]
    for b in blocks:
        sz = net.buffer_size(s, b)
        if sz <= budget:
            block, size = b, sz
    return Plan("stripe", s, block, size, macs, full_frame_macs(layers, input_shape),
                full_frame_peak_bytes(layers, input_shape))


def widest_stripe(layers, input_shape, ram_budget, block_width=DEFAULT_BLOCK):
    """The widest stripe whose arena fits ram_budget with this block width
    (None if none does), with its predicted MACs, as a Plan."""
    budget = int_in_range(ram_budget, "ram_budget", 1)
    _, b = _widths(1, block_width)
    net = compile_network(layers, input_shape)
    out_w = net.output_shape()[1]
    lo = next((s for s in range(out_w, 0, -1) if net.buffer_size(s, b) <= budget), 0)
    if lo == 0:
        return None
    return Plan("stripe", lo, b, net.buffer_size(lo, b), net.predict_macs(lo),
                full_frame_macs(layers, input_shape), full_frame_peak_bytes(layers, input_shape))


# ---------------------------------------------------------------------------
# Patch-based execution with recomputed halos (MCUNetV2), as a counting model

def _axis_tiles(layers, shapes, axis, tile):
    """Per-axis facts of tiling the output along axis by `tile`: the summed
    in-image taps of every layer over all tiles, and the distinct tuples of
    per-layer output interval lengths."""
    d = shapes[-1][1][axis]
    taps = [0] * len(layers)
    lengths = set()
    for a in range(0, d, tile):
        iv = backward_intervals(layers, shapes, axis, a, min(a + tile, d))
        lengths.add(tuple(hi - lo for lo, hi in iv[1:]))
        for i, layer in enumerate(layers):
            lo, hi = iv[i + 1]
            taps[i] += valid_tap_count(layer, shapes[i][0], axis, lo, hi)
    return taps, lengths


class PatchModel:
    """Patch-based inference (MCUNetV2): the output is cut into tiles of
    tile_h x tile_w; each tile runs the whole network layer by layer on the
    region its receptive field needs, recomputing the halo that neighbouring
    tiles share. This model counts, per tiling, the MACs (in-image taps of
    every computed pixel) and the peak bytes of the intermediate tiles alive
    at once (same liveness as full-frame execution, on tile regions). It does
    not run the arithmetic."""

    def __init__(self, layers, input_shape):
        self.layers = layers
        self.shapes = infer_shapes(layers, input_shape)
        self._axis = {}

    def _facts(self, axis, tile):
        key = (axis, tile)
        if key not in self._axis:
            self._axis[key] = _axis_tiles(self.layers, self.shapes, axis, tile)
        return self._axis[key]

    def macs(self, tile_h, tile_w):
        rt, _ = self._facts(0, tile_h)
        ct, _ = self._facts(1, tile_w)
        return sum(macs_per_tap(layer, self.shapes[i][0]) * rt[i] * ct[i]
                   for i, layer in enumerate(self.layers))

    def peak_bytes(self, tile_h, tile_w):
        _, rows = self._facts(0, tile_h)
        _, cols = self._facts(1, tile_w)
        chans = [out[2] for _, out in self.shapes]
        peak = 0
        for r in rows:
            for c in cols:
                peak = max(peak, _peak_live(self.layers, [r[i] * c[i] * chans[i] for i in range(len(chans))]))
        return peak


def _tile_sizes(d):
    """The tile sizes giving each distinct number of tiles along an axis of d."""
    return sorted({-(-d // k) for k in range(1, d + 1)}, reverse=True)


def patch_plan(layers, input_shape, ram_budget, model=None):
    """The tiling (tile_h, tile_w) whose peak fits ram_budget with the fewest
    MACs, from PatchModel. Plan.stripe_width is the tile width and
    Plan.block_width the tile height. Raises PlanError if no tiling fits."""
    budget = int_in_range(ram_budget, "ram_budget", 1)
    model = model or PatchModel(layers, input_shape)
    oh, ow, _ = model.shapes[-1][1]
    best = None
    for th in _tile_sizes(oh):
        for tw in _tile_sizes(ow):
            pk = model.peak_bytes(th, tw)
            if pk > budget:
                continue
            m = model.macs(th, tw)
            if best is None or (m, pk) < (best[0], best[1]):
                best = (m, pk, th, tw)
    if best is None:
        raise PlanError(f"no patch tiling fits {budget} bytes")
    m, pk, th, tw = best
    return Plan("patch", tw, th, pk, m, full_frame_macs(layers, input_shape),
                full_frame_peak_bytes(layers, input_shape))


# ---------------------------------------------------------------------------
# Random networks (tests and benchmarks)

def _rand_requant(rng, n, taps_times_cin, x_std=60.0, w_std=73.0, out_std=40.0):
    """Per-channel multipliers that keep outputs spread over the int8 range."""
    acc_std = math.sqrt(max(taps_times_cin, 1)) * w_std * x_std
    real = out_std / acc_std * rng.uniform(0.5, 1.5, size=n)
    return quantize_multiplier_array(real)


def _rand_act(rng, zp):
    if rng.random() < 0.3:
        return zp, 127  # ReLU
    return -128, 127


def random_conv(rng, in_c, out_c, kernel=3, stride=1, padding="same"):
    rng = np.random.default_rng(rng)
    kh, kw = (kernel, kernel) if np.isscalar(kernel) else kernel
    w = rng.integers(-127, 128, size=(out_c, kh, kw, in_c), dtype=np.int8)
    m, s = _rand_requant(rng, out_c, kh * kw * in_c)
    bias = rng.integers(-4000, 4000, size=out_c, dtype=np.int32)
    izp, ozp = (int(v) for v in rng.integers(-30, 30, size=2))
    lo, hi = _rand_act(rng, ozp)
    return Conv2D(w, bias, m, s, input_zero_point=izp, output_zero_point=ozp, stride=stride,
                  padding=padding, act_min=lo, act_max=hi)


def random_pointwise(rng, in_c, out_c):
    rng = np.random.default_rng(rng)
    w = rng.integers(-127, 128, size=(out_c, in_c), dtype=np.int8)
    m, s = _rand_requant(rng, out_c, in_c)
    bias = rng.integers(-4000, 4000, size=out_c, dtype=np.int32)
    izp, ozp = (int(v) for v in rng.integers(-30, 30, size=2))
    lo, hi = _rand_act(rng, ozp)
    return Pointwise(w, bias, m, s, input_zero_point=izp, output_zero_point=ozp, act_min=lo, act_max=hi)


def random_depthwise(rng, in_c, ch_mult=1, kernel=3, stride=1, padding="same"):
    rng = np.random.default_rng(rng)
    kh, kw = (kernel, kernel) if np.isscalar(kernel) else kernel
    out_c = in_c * ch_mult
    w = rng.integers(-127, 128, size=(kh, kw, out_c), dtype=np.int8)
    m, s = _rand_requant(rng, out_c, kh * kw)
    bias = rng.integers(-2000, 2000, size=out_c, dtype=np.int32)
    izp, ozp = (int(v) for v in rng.integers(-30, 30, size=2))
    lo, hi = _rand_act(rng, ozp)
    return DepthwiseConv2D(w, bias, m, s, input_zero_point=izp, output_zero_point=ozp, stride=stride,
                           padding=padding, act_min=lo, act_max=hi, ch_mult=ch_mult)


def random_add(rng, from_layer):
    rng = np.random.default_rng(rng)
    sc = rng.uniform(0.5, 2.0, size=3)
    zp = rng.integers(-20, 20, size=3)
    return Add.from_scales(from_layer, float(sc[0]), int(zp[0]), float(sc[1]), int(zp[1]),
                           float(sc[2]), int(zp[2]))


KINDS = ("conv", "depthwise", "pointwise", "pool", "add", "upsample")
# also accepted by random_network: "resize" (Upsample, factors 1..3 per axis), "bilinear" (ResizeBilinear,
# factors 1, 2, 4, any flags), "crop" (0 or 1 row, column), "depth_to_space" (block 1..3),
# "space_to_depth" (block 2..3 where it divides the shape)


def random_network(rng, input_shape, n_layers=4, channels=(4, 8), kinds=KINDS, kernels=(1, 3, 5),
                   strides=(1, 2), output_channels=None, dilations=(1,), groups=(1,)):
    """A random chain of n_layers int8 layers that fits input_shape (h, w, c):
    kinds drawn from `kinds` (an Add only where an earlier tensor has the same
    shape; strides and upsampling only while the receptive field stays inside
    the image). Quantization parameters keep outputs spread over int8.
    output_channels: force the last layer to be a conv with that many.
    dilations: each conv and depthwise layer's dilation per axis drawn from
    them (the default draws nothing). groups: each conv's groups drawn from
    them where they divide its input and output channels (a grouped
    convolution; the default draws nothing)."""
    rng = np.random.default_rng(rng)
    h, w, c = input_shape
    layers = []
    for i in range(n_layers):
        last = i == n_layers - 1
        shape = infer_shapes(layers, input_shape)[-1][1] if layers else (h, w, c)
        for _attempt in range(20):
            kind = "conv" if (last and output_channels) else str(rng.choice(kinds))
            k = int(rng.choice(kernels))
            s = int(rng.choice(strides))
            if kind == "conv":
                oc = output_channels if (last and output_channels) else int(rng.integers(channels[0], channels[1] + 1))
                cand = random_conv(rng, shape[2], oc, kernel=k, stride=s)
            elif kind == "depthwise":
                cand = random_depthwise(rng, shape[2], ch_mult=int(rng.integers(1, 3)), kernel=k, stride=s)
            elif kind == "pointwise":
                cand = random_pointwise(rng, shape[2], int(rng.integers(channels[0], channels[1] + 1)))
            elif kind == "pool":
                kp = max(k, 2)
                cand = Pool2D(str(rng.choice(["max", "avg"])), (kp, kp), (min(s, kp), min(s, kp)))
            elif kind == "upsample":
                cand = Upsample2x()
            elif kind == "resize":      # any integer factors per axis
                cand = Upsample((int(rng.integers(1, 4)), int(rng.integers(1, 4))))
            elif kind == "bilinear":    # factors 1, 2, 4 per axis, any flags
                fl = int(rng.integers(0, 3))
                cand = ResizeBilinear((int(rng.choice([1, 2, 4])), int(rng.choice([1, 2, 4]))),
                                      align_corners=fl == 1, half_pixel_centers=fl == 2)
            elif kind == "crop":
                cand = Crop((int(rng.integers(0, 2)), int(rng.integers(0, 2))))
            elif kind == "depth_to_space":
                b = int(rng.integers(1, 4))
                if shape[2] % (b * b):
                    cand = random_pointwise(rng, shape[2], b * b * int(rng.integers(1, 3)))
                else:
                    cand = DepthToSpace(b)
            elif kind == "space_to_depth":
                b = int(rng.integers(2, 4))
                if shape[0] % b or shape[1] % b:
                    continue
                cand = SpaceToDepth(b)
            else:
                outs = [tuple(input_shape)]
                if layers:
                    outs += [tuple(o) for _, o in infer_shapes(layers, input_shape)]
                ok = [j - 1 for j, o in enumerate(outs) if o == tuple(shape)]
                if not ok:
                    continue
                cand = random_add(rng, int(rng.choice(ok)))
            if tuple(dilations) != (1,) and kind in ("conv", "depthwise"):
                import dataclasses
                cand = dataclasses.replace(cand, dilation=(int(rng.choice(dilations)), int(rng.choice(dilations))))
            if tuple(groups) != (1,) and kind == "conv":
                ng = int(rng.choice(groups))
                oc = cand.weights.shape[0]
                if ng > 1 and shape[2] % ng == 0 and oc % ng == 0:
                    import dataclasses
                    cand = dataclasses.replace(cand, groups=ng,
                                               weights=np.ascontiguousarray(cand.weights[..., :shape[2] // ng]))
            trial = layers + [cand]
            try:
                check_network(trial, input_shape)
            except (ArgumentError, UnsupportedError):
                continue
            if max(output_shape(trial, input_shape)[:2]) > 4 * max(h, w):
                continue
            layers = trial
            break
        else:
            layers.append(random_pointwise(rng, shape[2], shape[2]))
    return layers


def pixel_network(rng, n_layers=8, channels=16, in_channels=3, out_channels=3, kernel=3):
    """A pixel-to-pixel network: n_layers k x k 'same' convolutions, stride 1,
    in_channels -> channels -> ... -> out_channels (the benchmark network)."""
    rng = np.random.default_rng(rng)
    layers = []
    c = in_channels
    for i in range(n_layers):
        oc = out_channels if i == n_layers - 1 else channels
        layers.append(random_conv(rng, c, oc, kernel=kernel))
        c = oc
    return layers
