"""Builtin options of the data movement and shape arithmetic operators
(ops-data family: CONCATENATION, SPLIT, STRIDED_SLICE, GATHER, resizes,
MIRROR_PAD, SQUEEZE, PACK, SHAPE, ...) as plain dicts, for
:mod:`pyembed.model.tflite_import`."""


_ACTIVATION = {0: None, 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}
_MIRROR = {0: "REFLECT", 1: "SYMMETRIC"}


def data_options(op_type, otype, load, count):
    """The options dict of op_type, or None if it is not one of this family.

    load(cls) returns the bounds-checked options table as cls; count(n, what)
    checks a vector length."""
    import tflite  # a declared dependency; imported here like tflite_import does

    B = tflite.BuiltinOptions
    if op_type == "CONCATENATION" and otype == B.ConcatenationOptions:
        o = load(tflite.ConcatenationOptions)
        act = int(o.FusedActivationFunction())
        return {"axis": int(o.Axis()), "activation": _ACTIVATION.get(act, act)}
    if op_type == "SPLIT" and otype == B.SplitOptions:
        return {"num_splits": int(load(tflite.SplitOptions).NumSplits())}
    if op_type == "SPLIT_V" and otype == B.SplitVOptions:
        return {"num_splits": int(load(tflite.SplitVOptions).NumSplits())}
    if op_type == "STRIDED_SLICE" and otype == B.StridedSliceOptions:
        o = load(tflite.StridedSliceOptions)
        return {"begin_mask": int(o.BeginMask()), "end_mask": int(o.EndMask()),
                "ellipsis_mask": int(o.EllipsisMask()), "new_axis_mask": int(o.NewAxisMask()),
                "shrink_axis_mask": int(o.ShrinkAxisMask()), "offset": bool(o.Offset())}
    if op_type == "GATHER" and otype == B.GatherOptions:
        o = load(tflite.GatherOptions)
        return {"axis": int(o.Axis()), "batch_dims": int(o.BatchDims())}
    if op_type == "DEPTH_TO_SPACE" and otype == B.DepthToSpaceOptions:
        return {"block_size": int(load(tflite.DepthToSpaceOptions).BlockSize())}
    if op_type == "SPACE_TO_DEPTH" and otype == B.SpaceToDepthOptions:
        return {"block_size": int(load(tflite.SpaceToDepthOptions).BlockSize())}
    if op_type == "RESIZE_BILINEAR" and otype == B.ResizeBilinearOptions:
        o = load(tflite.ResizeBilinearOptions)
        return {"align_corners": bool(o.AlignCorners()), "half_pixel_centers": bool(o.HalfPixelCenters())}
    if op_type == "RESIZE_NEAREST_NEIGHBOR" and otype == B.ResizeNearestNeighborOptions:
        o = load(tflite.ResizeNearestNeighborOptions)
        return {"align_corners": bool(o.AlignCorners()), "half_pixel_centers": bool(o.HalfPixelCenters())}
    if op_type == "MIRROR_PAD" and otype == B.MirrorPadOptions:
        mode = int(load(tflite.MirrorPadOptions).Mode())
        return {"mode": _MIRROR.get(mode, mode)}
    if op_type == "SQUEEZE" and otype == B.SqueezeOptions:
        o = load(tflite.SqueezeOptions)
        n = count(o.SqueezeDimsLength(), "SQUEEZE squeeze_dims")
        return {"squeeze_dims": tuple(int(o.SqueezeDims(j)) for j in range(n))}
    if op_type == "PACK" and otype == B.PackOptions:
        o = load(tflite.PackOptions)
        return {"axis": int(o.Axis()), "values_count": int(o.ValuesCount())}
    if op_type == "UNPACK" and otype == B.UnpackOptions:
        o = load(tflite.UnpackOptions)
        return {"axis": int(o.Axis()), "num": int(o.Num())}
    if op_type == "SHAPE" and otype == B.ShapeOptions:
        return {"out_type": int(load(tflite.ShapeOptions).OutType())}
    if op_type == "REDUCE_PROD" and otype == B.ReducerOptions:
        return {"keep_dims": bool(load(tflite.ReducerOptions).KeepDims())}
    return None
