"""1-D max pooling as a maximum over a reshaped view (issue #30).

A Keras ``MaxPooling1D`` converts to MAX_POOL_2D on a ``[N, 1, W, C]`` tensor
with a ``1 x k`` window. When the windows tile the row exactly (stride k, no
padding, W a multiple of k) and the fused activation clamps nothing, each
output is the maximum of k consecutive positions, which is REDUCE_MAX over
axis 2 of the same bytes viewed as ``[N, W / k, k, C]``:

    MAX_POOL_2D(x)  ==  RESHAPE(REDUCE_MAX(RESHAPE(x, [N, W/k, k, C]), axis 2, keep_dims), [N, 1, W/k, C])

The two RESHAPEs alias (no copy, no arena) and REDUCE_MAX needs no scratch,
where the reverse pooling kernel (pe_pool.h) keeps a ring of int32
accumulators: 992 B for a ``[1, 1, 16, 24]`` pool whose output is 192 B,
which put a converter-made Conv1D keyword model's arena above TFLM's. Max is
exact, so the result is bit-exact with the pooling (tests/test_pool1d.py).
2-D pools are left as they are (the stripe executors chain them with their
convolutions).
"""
import numpy as np


def _candidate(graph, op):
    if op.type != "MAX_POOL_2D" or not op.supported or op.scratch_bytes <= 0:
        return None
    x, y = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    p = op.params
    if x.dtype != np.int8 or len(x.shape) != 4 or x.shape[1] != 1 or y.shape[1] != 1:
        return None
    fh, fw = p["filter"]
    sh, sw = p["stride"]
    n, _, w, ch = (int(d) for d in x.shape)
    if fh != 1 or sw != fw or any(p["pad"]) or w % fw or int(y.shape[2]) * fw != w:
        return None
    if p["act_min"] > -128 or p["act_max"] < 127:
        return None
    if op.outputs[0] in graph.inputs:
        return None
    return n, w, ch, fw


def pool1d_as_reduce_max(graph, label="model"):
    """Rewrite every eligible 1-D MAX_POOL_2D of graph (in place, see the
    module). Returns the number rewritten."""
    from pyembed.model.graph import Operator, Tensor
    from pyembed.model.ops import prepare_operator
    done = 0
    new_ops = []
    for op in graph.operators:
        shape = _candidate(graph, op)
        if shape is None:
            new_ops.append(op)
            continue
        n, w, ch, k = shape
        x, y = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]

        def add(shape, dtype=np.int8, data=None, like=None, name=""):
            t = Tensor(index=len(graph.tensors), name=f"{y.name}/pool1d_{name}", shape=tuple(shape),
                       dtype=np.dtype(dtype), data=data,
                       scale=None if like is None else np.array(like.scale),
                       zero_point=None if like is None else np.array(like.zero_point),
                       type_name="INT8" if dtype == np.int8 else "INT32")
            graph.tensors.append(t)
            return t.index

        def const(values, name):
            v = np.asarray(values, np.int32)
            v.setflags(write=False)
            return add(v.shape, np.int32, data=v, name=name)

        windows = add((n, w // k, k, ch), like=x, name="windows")
        maxed = add((n, w // k, 1, ch), like=y, name="max")
        ops = [Operator(index=-1, type="RESHAPE", inputs=[op.inputs[0], const([n, w // k, k, ch], "shape")],
                        outputs=[windows]),
               Operator(index=-1, type="REDUCE_MAX", inputs=[windows, const([2], "axis")], outputs=[maxed],
                        options={"keep_dims": True}),
               Operator(index=-1, type="RESHAPE", inputs=[maxed, const(list(y.shape), "out_shape")],
                        outputs=[op.outputs[0]])]
        for new in ops:
            prepare_operator(graph, new, label)
        if not all(new.supported for new in ops):
            new_ops.append(op)
            continue
        new_ops.extend(ops)
        done += 1
    if done:
        graph.operators = new_ops
        for i, op in enumerate(graph.operators):
            op.index = i
    return done
