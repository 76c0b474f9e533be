"""The 32 int32 words of one stripe-region layer (csrc/include/pyembed/pe_pipeline.h
documents each word) from a pyembed.kernels.stripe layer spec; pyembed.passes.pipeline
puts them after the region's header words."""

LAYER_WORDS = 32
_OPS = {"conv": 0, "depthwise": 1, "pointwise": 2, "pool": 3, "add": 4, "upsample2x": 5, "concat": 6, "table": 7,
        "upsample": 8, "depth_to_space": 9, "space_to_depth": 10, "resize_bilinear": 11, "crop": 12}


def layer_words(spec, slots):
    """The 32 words of one layer (pe_pipeline.h) from a pyembed.stripe spec."""
    pad = spec.get("padding", (0, 0, 0, 0))
    kern = spec.get("kernel", (1, 1))
    strd = spec.get("stride", (1, 1))
    w = [0] * LAYER_WORDS
    w[0] = _OPS[spec["op"]]
    w[1], w[2] = int(spec["in_c"]), int(spec["out_c"])
    w[3], w[4] = int(kern[0]), int(kern[1])
    w[5], w[6] = int(strd[0]), int(strd[1])
    w[7:11] = [int(v) for v in pad]
    w[11] = int(spec.get("input_offset", 0))
    w[12] = int(spec.get("output_offset", 0))
    w[13] = int(spec.get("act_min", -128))
    w[14] = int(spec.get("act_max", 127))
    w[15] = 1 if spec.get("rounding", "double") == "single" else 0
    w[16] = 1 if spec.get("pool_kind") == "avg" else 0
    if spec["op"] == "add":
        w[17] = int(spec["from_layer"])
        w[18] = int(spec["left_shift"])
        w[19] = int(spec["main_offset"])
        w[20], w[21] = (int(v) for v in spec["main_quant"])
        w[22] = int(spec["branch_offset"])
        w[23], w[24] = (int(v) for v in spec["branch_quant"])
        w[25], w[26] = (int(v) for v in spec["out_quant"])
    elif spec["op"] == "concat":
        w[17] = int(spec["from_layer"])
        w[18] = int(spec["branch_first"])
    elif spec["op"] == "table":
        w[17] = int(spec["table_channels"])
    elif spec["op"] == "resize_bilinear":
        w[18] = int(spec["resize_flags"])   # pe_pipeline.h: 1 align_corners, 2 half_pixel_centers
    elif spec["op"] == "conv" and int(spec.get("groups", 1)) != 1:
        w[17] = int(spec["groups"])   # pe_pipeline.h: a grouped convolution
    w[27:31] = list(slots) if slots else [-1, -1, -1, -1]
    dil = tuple(int(v) for v in spec.get("dilation", (1, 1)))
    if dil != (1, 1):
        w[31] = dil[0] * 256 + dil[1]   # pe_pipeline.h: conv / depthwise dilation
    return w
