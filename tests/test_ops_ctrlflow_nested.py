"""Nested IF / WHILE (an IF in a WHILE body, a WHILE in an IF branch, a
WHILE in a WHILE body) and resource variables read / assigned inside IF
branches and WHILE bodies (pyembed.model.ctrlflow_import inlining
recursively, pyembed.model.resvar_import on the flat list): models written
with tflite_writer == the tflite-micro interpreter (integers compared with
==), linear and planned, simulated, invoke by invoke with reset(), the
depth / recursion refusals, and one Cortex-M4 firmware under QEMU."""
import numpy as np
import pytest

from pyembed.errors import UnsupportedError
from pyembed.model import tflite_writer as W
from pyembed.model.load import load_tflite_bytes

pytest.importorskip("tflite_micro")
S = W.schema()
B = S.BuiltinOperator
Q = dict(scale=0.1, zp=3)


def i32(data=None):
    return W.tensor((1,), np.int32, data=None if data is None else np.array([data], np.int32))


def q4(data=None):
    return W.tensor((1, 4), data=None if data is None else np.asarray(data).reshape(1, 4), **Q)


def cond_less(a=0, b=1, n=2, extra=()):
    """A cond subgraph over n int32 [1] values (then extra tensors): values[a] < values[b]."""
    t = [i32() for _ in range(n)] + [W.tensor(s, **kw) for s, kw in extra] + [W.tensor((1,), np.bool_)]
    return (t, [W.op(B.LESS, [a, b], [len(t) - 1])], list(range(len(t) - 1)), [len(t) - 1])


# -- models ------------------------------------------------------------------------------------------

def if_in_while_model():
    """WHILE(i = 0, n, k, acc int8 [1, 4]): while i < n: acc = (i < k) ? acc + c : acc - d; i += 1.
    Outputs i, acc. Subgraphs: 1 cond, 2 body, 3 then, 4 else."""
    t0 = [i32(0), i32(), i32(), q4(), i32(), i32(), i32(), q4()]
    ops0 = [W.op(B.WHILE, [0, 1, 2, 3], [4, 5, 6, 7], "WhileOptions", condSubgraphIndex=1, bodySubgraphIndex=2)]
    cond = ([i32(), i32(), i32(), q4(), W.tensor((1,), np.bool_)], [W.op(B.LESS, [0, 1], [4])], [0, 1, 2, 3], [4])
    tb = [i32(), i32(), i32(), q4(), W.tensor((1,), np.bool_), q4(), i32(1), i32()]
    body = (tb, [W.op(B.LESS, [0, 2], [4]),
                 W.op(B.IF, [4, 3], [5], "IfOptions", thenSubgraphIndex=3, elseSubgraphIndex=4),
                 W.op(B.ADD, [0, 6], [7], "AddOptions")], [0, 1, 2, 3], [7, 1, 2, 5])
    then = ([q4(), q4([7, -3, 1, 20]), q4()], [W.op(B.ADD, [0, 1], [2], "AddOptions")], [0], [2])
    other = ([q4(), q4([2, 5, -9, 4]), q4()], [W.op(B.SUB, [0, 1], [2], "SubOptions")], [0], [2])
    return W.build(t0, ops0, [1, 2, 3], [4, 7], subgraphs=[cond, (tb, body[1], body[2], body[3]), then, other])


def while_in_if_model():
    """IF(c, x int8 [1, 4], n): then: WHILE(j = 0, n, x) x += e, output x; else: x - d.
    Subgraphs: 1 then, 2 else, 3 cond, 4 body."""
    t0 = [W.tensor((1,), np.bool_), q4(), i32(), q4()]
    ops0 = [W.op(B.IF, [0, 1, 2], [3], "IfOptions", thenSubgraphIndex=1, elseSubgraphIndex=2)]
    tt = [q4(), i32(), i32(0), i32(), i32(), q4()]
    then = (tt, [W.op(B.WHILE, [2, 1, 0], [3, 4, 5], "WhileOptions", condSubgraphIndex=3, bodySubgraphIndex=4)],
            [0, 1], [5])
    other = ([q4(), i32(), q4([2, 5, -9, 4]), q4()], [W.op(B.SUB, [0, 2], [3], "SubOptions")], [0, 1], [3])
    cond = cond_less(0, 1, 2, extra=[((1, 4), Q)])
    tb = [i32(), i32(), q4(), i32(1), i32(), q4([3, -6, 0, 11]), q4()]
    body = (tb, [W.op(B.ADD, [0, 3], [4], "AddOptions"), W.op(B.ADD, [2, 5], [6], "AddOptions")],
            [0, 1, 2], [4, 1, 6])
    return W.build(t0, ops0, [0, 1, 2], [3], subgraphs=[then, other, cond, body])


def while_in_while_model():
    """WHILE(i = 0, n, m, acc = 0) while i < n: i += 1; WHILE(j = 0, i + m, acc): acc += j, j += 1.
    Output i, acc (= sum over i = 1..n of (i + m)(i + m - 1) / 2). Subgraphs: 1 cond, 2 body,
    3 inner cond, 4 inner body."""
    t0 = [i32(0), i32(), i32(), i32(0)] + [i32() for _ in range(4)]
    ops0 = [W.op(B.WHILE, [0, 1, 2, 3], [4, 5, 6, 7], "WhileOptions", condSubgraphIndex=1, bodySubgraphIndex=2)]
    cond = cond_less(0, 1, 4)
    # body: i1 = i + 1; lim = i1 + m; (j, lim, acc) = WHILE(0, lim, acc)
    tb = [i32(), i32(), i32(), i32(), i32(1), i32(), i32(), i32(0), i32(), i32(), i32()]
    body = (tb, [W.op(B.ADD, [0, 4], [5], "AddOptions"), W.op(B.ADD, [5, 2], [6], "AddOptions"),
                 W.op(B.WHILE, [7, 6, 3], [8, 9, 10], "WhileOptions", condSubgraphIndex=3, bodySubgraphIndex=4)],
            [0, 1, 2, 3], [5, 1, 2, 10])
    icond = cond_less(0, 1, 3)
    ti = [i32(), i32(), i32(), i32(1), i32(), i32()]
    ibody = (ti, [W.op(B.ADD, [2, 0], [4], "AddOptions"), W.op(B.ADD, [0, 3], [5], "AddOptions")],
             [0, 1, 2], [5, 1, 4])
    return W.build(t0, ops0, [1, 2], [4, 7], subgraphs=[cond, body, icond, ibody])


def deep_if_model(depth, recursive=False):
    """y = IF(c, x): its then branch an IF on (c, x) whose then branch ... depth subgraphs
    deep down to the leaf x + 1 (every else branch is the leaf too). Subgraphs 1..depth-1
    hold the IFs, subgraph depth the leaf; recursive: subgraph 1's then branch is itself."""
    def iff(then, ins, out):
        return W.op(B.IF, ins, [out], "IfOptions", thenSubgraphIndex=then, elseSubgraphIndex=depth)

    t0 = [W.tensor((1,), np.bool_), i32(), i32()]
    ops0 = [iff(1, [0, 0, 1], 2)]
    subs = [([W.tensor((1,), np.bool_), i32(), i32()], [iff(1 if recursive else k + 1, [0, 0, 1], 2)], [0, 1], [2])
            for k in range(1, depth)]
    subs.append(([W.tensor((1,), np.bool_), i32(), i32(1), i32()], [W.op(B.ADD, [1, 2], [3], "AddOptions")],
                 [0, 1], [3]))
    return W.build(t0, ops0, [0, 1], [2], subgraphs=subs)
