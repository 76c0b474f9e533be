"""The operator table (pyembed ops, pyembed.model.tflm_registry): every
operator the graph runtime executes, read from the operator registry, with
its pe_graph_op_type code and constraints."""

# the first twelve operators (pyembed/model/ops/core.py), by what their prepare functions accept
CORE = {
    "CONV_2D": (0, "int8 NHWC 4-D; per-channel int8 weights (or TFLite INT4 packed: w4), int32 bias; SAME / VALID / explicit padding, "
                   "stride, dilation, groups; fused RELU / RELU6 / RELU_N1_TO_1"),
    "DEPTHWISE_CONV_2D": (1, "int8 NHWC 4-D; depth multiplier; per-channel weights (int8, or TFLite INT4 packed: w4); padding, stride, "
                             "dilation; fused activations"),
    "AVERAGE_POOL_2D": (2, "int8 NHWC 4-D; SAME / VALID; fused activations"),
    "MAX_POOL_2D": (3, "int8 NHWC 4-D; SAME / VALID; fused activations"),
    "FULLY_CONNECTED": (4, "int8; per-tensor or per-channel weights (int8, or TFLite INT4 packed: w4); "
                               "keep_num_dims; fused activations"),
    "SOFTMAX": (5, "int8 in / int8 out; beta; over the last axis"),
    "RESHAPE": (6, "int8 / int16 / int32 / float32; aliased (no copy)"),
    "ADD": (7, "int8; numpy broadcasting up to 4-D; fused activations"),
    "MUL": (8, "int8; numpy broadcasting up to 4-D; fused activations"),
    "QUANTIZE": (10, "float32 -> int8, or int8 -> int8 requantization (pe_graph_op_type 9)"),
    "DEQUANTIZE": (11, "int8 -> float32"),
}


def operator_table():
    """[{name, code, family, constraints}] of every supported operator, by code."""
    import importlib

    from pyembed.model.ops import SUPPORTED_OPS
    from pyembed.model.ops.registry import REGISTRY
    rows = []
    for name in SUPPORTED_OPS:
        if name in CORE:
            code, text = CORE[name]
            rows.append({"name": name, "code": code, "family": "core", "constraints": text})
            continue
        d = REGISTRY.get(name)
        if d is None:
            rows.append({"name": name, "code": None, "family": "core", "constraints": ""})
            continue
        mod = importlib.import_module(d.family)
        text = getattr(mod, "CONSTRAINTS", {}).get(name)
        if text is None:
            doc = (d.prepare.__doc__ or "").strip().splitlines()
            text = doc[0] if doc else ""
        rows.append({"name": name, "code": d.code, "family": d.family.rsplit(".", 1)[-1], "constraints": text})
    for r in rows:
        # variants ("TYPE@int16", "GATHER@batched"): their own code and runner
        variants = sorted((v.code, v.name) for v in REGISTRY.values() if v.name.startswith(r["name"] + "@"))
        if variants:
            listed = ", ".join(f"{n.split('@', 1)[1]} (code {c})" for c, n in variants)
            r["constraints"] = (r["constraints"] + "; " if r["constraints"] else "") + f"variants: {listed}"
    rows.sort(key=lambda r: (r["code"] is None, r["code"] if r["code"] is not None else 0, r["name"]))
    return rows
