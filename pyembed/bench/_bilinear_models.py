"""Small int8 models whose stripe regions hold a RESIZE_BILINEAR layer (kind 11) that is much of the work:
measured by ``python -m pyembed.bench calibrate_bilinear --regions`` (and nameable in
``calibrate_pipeline --models``), built with pyembed.bench._built._Net (random weights)."""


def _region_graph(shape, ch, k, align, half):
    """conv k x k (ch channels) -> RESIZE_BILINEAR x2 -> conv 1x1 (4 channels): stripe regions whose
    bilinear layer is a large part of the work (for PE_STRIPE_REGION's bilinear_outputs)."""
    from pyembed.bench._built import _Net
    net = _Net(0)
    x = net.input(shape)
    y = net.resize_bilinear(net.conv(x, ch, k=k), 2, 2, align, half)
    return net.to_bytes([x], [net.conv(y, 4, k=1)])


# built networks calibrate_pipeline measures by name (as pyembed.bench._built's)
REGION_MODELS = {
    "bilinear_region_32x32x8": lambda: _region_graph((1, 32, 32, 4), 8, 1, False, True),
    "bilinear_region_24x24x12": lambda: _region_graph((1, 24, 24, 3), 12, 3, True, False),
}
