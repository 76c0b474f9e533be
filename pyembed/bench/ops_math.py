"""Math operators (MEAN, SUM, LOGISTIC, ..., L2_NORMALIZATION): for one
representative single-operator model each, measured here:

* exact: every output element equal to the tflite-micro interpreter's
  (default rounding; LiteRT's reference kernels for the operators TFLM
  lacks: RELU_N1_TO_1, GELU, int8 NEG) on a few random inputs;
* arena: the bytes pyembed's planner gives the model (activations + kernel
  scratch) and the arena head TFLM allocates for the same model (its
  RecordingMicroAllocator report);
* instructions per element: valgrind callgrind's inclusive count of
  pe_math_invoke (the runner's kernel call) on the model's shape, divided by
  the elements the operator reads (host x86-64, gcc -O2; needs valgrind).

    python -m pyembed.bench ops_math [--json] [--no-callgrind]
"""
import argparse
import contextlib
import os
import re
import tempfile

import numpy as np

from pyembed.bench.common import emit, table

SHAPE = (1, 8, 8, 32)


def _models():
    """(name, model bytes, input shapes, reference) of each operator."""
    from pyembed.model import tflite_writer as W
    S = W.schema()
    B = S.BuiltinOperator

    def t(shape, scale=None, zp=0, data=None, dtype=np.int8):
        return W.tensor(shape, dtype, scale, zp if scale is not None else None, data)

    def unary(op, in_q, out_q, table_name=None, **fields):
        ops = [W.op(getattr(B, op), [0], [1], table_name, **fields)]
        return W.build([t(SHAPE, *in_q), t(SHAPE, *out_q)], ops, [0], [1])

    def binary(op, s1, q1, q2, qo, const=None, table_name=None, **fields):
        tensors = [t(SHAPE, *q1), t(s1, *q2, data=const), t(SHAPE, *qo)]
        ops = [W.op(getattr(B, op), [0, 1], [2], table_name, **fields)]
        return W.build(tensors, ops, [0] if const is not None else [0, 1], [2])

    def reduce(op, axes, keep):
        res = {a % 4 for a in axes}
        oshape = tuple(1 if d in res else s for d, s in enumerate(SHAPE)) if keep else \
            tuple(s for d, s in enumerate(SHAPE) if d not in res)
        tensors = [t(SHAPE, 0.1, 3), t((len(axes),), data=np.array(axes, np.int32), dtype=np.int32),
                   t(oshape, 0.05, -7)]
        return W.build(tensors, [W.op(getattr(B, op), [0, 1], [2], "ReducerOptions", keepDims=keep)], [0], [2])

    q, qo = (0.1, 3), (0.05, -7)
    rng = np.random.default_rng(0)
    yield "MEAN (H, W)", reduce("MEAN", [1, 2], False), [SHAPE], "tflm"
    yield "SUM (C)", reduce("SUM", [3], True), [SHAPE], "tflm"
    yield "LOGISTIC", unary("LOGISTIC", q, (1 / 256, -128)), [SHAPE], "tflm"
    yield "TANH", unary("TANH", q, (1 / 128, 0)), [SHAPE], "tflm"
    yield "HARD_SWISH", unary("HARD_SWISH", q, qo), [SHAPE], "tflm"
    yield "LEAKY_RELU", unary("LEAKY_RELU", q, qo, "LeakyReluOptions", alpha=0.2), [SHAPE], "tflm"
    yield "RELU", unary("RELU", q, qo), [SHAPE], "tflm"
    yield "RELU6", unary("RELU6", q, q), [SHAPE], "tflm"
    yield "RELU_N1_TO_1", unary("RELU_N1_TO_1", q, qo), [SHAPE], "litert"
    yield "ABS", unary("ABS", q, qo), [SHAPE], "tflm"
    yield "NEG", unary("NEG", q, (q[0], -q[1])), [SHAPE], "litert"
    yield "RSQRT", unary("RSQRT", (0.1, -128), qo), [SHAPE], "tflm"
    yield "GELU", unary("GELU", q, qo, "GeluOptions", approximate=False), [SHAPE], "litert"
    yield "L2_NORMALIZATION", unary("L2_NORMALIZATION", q, (1 / 128, 0)), [SHAPE], "tflm"
    yield "SUB (broadcast C)", binary("SUB", (SHAPE[-1],), q, (0.07, -1), qo, table_name="SubOptions"), \
        [SHAPE, (SHAPE[-1],)], "tflm"
    yield "SQUARED_DIFFERENCE", binary("SQUARED_DIFFERENCE", SHAPE, q, (0.07, -1), qo), [SHAPE, SHAPE], "tflm"
    yield "MAXIMUM", binary("MAXIMUM", SHAPE, q, q, q), [SHAPE, SHAPE], "tflm"
    yield "PRELU (alpha per C)", binary("PRELU", (SHAPE[-1],), q, (0.01, 0), qo,
                                        const=rng.integers(-128, 128, SHAPE[-1]).astype(np.int8)), [SHAPE], "tflm"


@contextlib.contextmanager
def _capture_fds():
    """Capture what C++ code writes to file descriptors 1 and 2."""
    import sys
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile(mode="w+b") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
        box = {}
        try:
            yield box
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            f.seek(0)
            box["text"] = f.read().decode(errors="replace")


def _tflm_head(model):
    """TFLM's arena head for the model, None when TFLM cannot load it."""
    from tflite_micro.python.tflite_micro import runtime
    try:
        with _capture_fds() as box:
            it = runtime.Interpreter.from_bytes(model, arena_size=1 << 20)
            it.print_allocations()
    except RuntimeError:
        return None
    m = re.search(r"allocation head (\d+) bytes", box["text"])
    return int(m.group(1)) if m else None


def _reference(model, xs, which):
    if which == "tflm":
        from tflite_micro.python.tflite_micro import runtime
        it = runtime.Interpreter.from_bytes(model, arena_size=1 << 20)
        for k, x in enumerate(xs):
            it.set_input(x, k)
        it.invoke()
        return it.get_output(0)
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    it = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), xs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


_DRIVER = r"""
#include <stdlib.h>
#include "pyembed/pe_math_ops.h"
%(tables)s
int main(int argc, char **argv)
{
    static int8_t in0[%(n)d], in1[%(n)d], out[%(n)d];
    int k = argc > 1 ? atoi(argv[1]) : 0;
    int i;
    for (i = 0; i < %(n)d; i++) {
        in0[i] = (int8_t)((i * 37 + 11) %% 256 - 128);
        in1[i] = (int8_t)((i * 53 + 7) %% 256 - 128);
    }
    switch (k) {
%(cases)s
    default:
        return 2;
    }
}
"""


def _instructions(graphs):
    """Inclusive callgrind instructions of pe_math_invoke for each operator."""
    from pyembed.bench.callgrind import build_program, count_instructions
    tables, cases = [], []
    n = int(np.prod(SHAPE))
    for k, (g, op) in enumerate(graphs):
        p = op.params
        words = p["words"]
        c_in = [op.inputs[i] for i in p.get("c_inputs", range(len(op.inputs)))]
        counts = [int(np.prod(g.tensors[t].shape)) for t in c_in]
        co = int(np.prod(g.tensors[op.outputs[0]].shape))
        tables.append(f"static const int32_t w{k}[] = {{{', '.join(str(int(w)) for w in words)}}};")
        c1 = counts[1] if len(counts) > 1 else 0
        cases.append(f"    case {k}: return (int)pe_math_invoke(NULL, {p['math_op']}, w{k}, {len(words)}, 0, "
                     f"in0, {counts[0]}, in1, {c1}, out, {co}) != 0;")
    src = _DRIVER % {"tables": "\n".join(tables), "cases": "\n".join(cases), "n": n}
    exe = build_program(src, "ops_math_bench", opt="-O2")
    res = []
    for k, (g, op) in enumerate(graphs):
        c_in = [op.inputs[i] for i in op.params.get("c_inputs", range(len(op.inputs)))]
        elems = sum(int(np.prod(g.tensors[t].shape)) for t in c_in if g.tensors[t].data is None) or n
        ir = count_instructions(exe, [k], functions=["pe_math_invoke"])["pe_math_invoke"]
        res.append(ir / elems)
    return res


def run(callgrind=True):
    from pyembed.model.load import load_tflite_bytes
    from pyembed.plan import plan_graph
    rng = np.random.default_rng(1)
    rows, graphs = [], []
    for name, model, shapes, ref in _models():
        g = load_tflite_bytes(model)
        if g.unsupported:
            rows.append({"operator": name, "supported": False})
            continue
        exact = True
        for _ in range(3):
            xs = [rng.integers(-128, 128, s).astype(np.int8) for s in shapes]
            got = g.run(xs if len(xs) > 1 else xs[0])[0]
            want = _reference(model, xs, ref)
            exact = exact and got.shape == want.shape and bool(np.array_equal(got, want))
        plan = plan_graph(g)
        rows.append({"operator": name, "supported": True, "reference": ref, "bit_exact": exact,
                     "arena_bytes": int(plan.arena_size), "scratch_bytes": int(g.operators[0].scratch_bytes),
                     "tflm_arena_head_bytes": _tflm_head(model)})
        graphs.append((g, g.operators[0]))
    if callgrind:
        for row, ipe in zip([r for r in rows if r["supported"]], _instructions(graphs)):
            row["instructions_per_element"] = round(ipe, 1)
    return {"shape": list(SHAPE), "operators": rows}


def _render(res):
    head = ["operator", "reference", "bit-exact", "arena B", "TFLM head B", "scratch B", "instr/elem"]
    rows = [[r["operator"], r.get("reference", "-"), "yes" if r.get("bit_exact") else "NO",
             r.get("arena_bytes", "-"), r.get("tflm_arena_head_bytes", "-"), r.get("scratch_bytes", "-"),
             r.get("instructions_per_element", "-")] for r in res["operators"]]
    return (f"math operators on {tuple(res['shape'])} int8 (arena: pyembed's plan; TFLM head: its arena "
            f"allocation head for the same model)\n" + table(head, rows))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench ops_math")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-callgrind", action="store_true", help="skip the instruction counts (no valgrind)")
    a = ap.parse_args(argv)
    emit(run(callgrind=not a.no_callgrind), a.json, _render)
    return 0
