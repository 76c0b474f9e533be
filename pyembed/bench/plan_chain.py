"""Planning time of long element-wise chains (issue 33): a generated model of
N int8 ADD operators in a row (x -> ADD(., c1) -> ADD(., c2) -> ...), written
with pyembed.model.tflite_writer, planned with proven overlaps.

    python -m pyembed.bench plan_chain [--ops 1000,5000] [--shape 1,8,8,4] [--old-prover-up-to 300]
                                       [--json]

For each N: seconds to load, seconds of plan_graph(overlaps=True) (and of its
overlap proofs alone), the arena, proven overlaps, and, up to
--old-prover-up-to operators, the same plan with the prover of before
(OverlapProver(whole_graph=True): the whole graph compiled per proof) and
whether both plans are identical. Each element-wise output may be proven to
overlap its input, so the arena is two tensors however long the chain.
"""
import argparse
import time

import numpy as np

from pyembed.bench.common import emit, table


def chain_model(n_ops, shape=(1, 8, 8, 4), seed=0):
    """.tflite bytes of n_ops int8 ADDs in a row, each adding its own constant."""
    from pyembed.model import tflite_writer as W
    S = W.schema()
    rng = np.random.default_rng(seed)
    tensors = [W.tensor(shape, scale=0.05, zp=-3, name="x")]
    ops = []
    cur = 0
    for k in range(n_ops):
        tensors.append(W.tensor(shape, scale=0.02, zp=1, data=rng.integers(-128, 128, shape), name=f"c{k}"))
        tensors.append(W.tensor(shape, scale=0.05 + 0.001 * (k % 7), zp=-3 + (k % 5), name=f"y{k}"))
        ops.append(W.op(S.BuiltinOperator.ADD, [cur, len(tensors) - 2], [len(tensors) - 1], "AddOptions"))
        cur = len(tensors) - 1
    return W.build(tensors, ops, inputs=[0], outputs=[cur], name=f"add_chain_{n_ops}")


def plan_chain(graph, whole_graph=False):
    """plan_graph(graph, overlaps=True) with the one-operator prover (default)
    or the whole-graph one; returns (plan, seconds, proof seconds)."""
    from pyembed.plan import overlap, plan_graph
    orig = overlap.OverlapProver.__init__
    spent = [0.0]

    def init(self, *a, **k):
        k.setdefault("whole_graph", whole_graph)
        orig(self, *a, **k)

    prove = overlap.OverlapProver.prove

    def timed(self, *a):
        t = time.perf_counter()
        try:
            return prove(self, *a)
        finally:
            spent[0] += time.perf_counter() - t

    overlap.OverlapProver.__init__, overlap.OverlapProver.prove = init, timed
    try:
        t0 = time.perf_counter()
        plan = plan_graph(graph, overlaps=True)
        return plan, time.perf_counter() - t0, spent[0]
    finally:
        overlap.OverlapProver.__init__, overlap.OverlapProver.prove = orig, prove


def same_plan(a, b):
    from pyembed.plan.planjson import plan_to_dict
    return plan_to_dict(a) == plan_to_dict(b)


def run(ops, shape, old_up_to):
    from pyembed.model.load import load_tflite_bytes
    rows = []
    for n in ops:
        blob = chain_model(n, shape)
        t0 = time.perf_counter()
        g = load_tflite_bytes(blob, f"add_chain_{n}")
        load_s = time.perf_counter() - t0
        plan, plan_s, proof_s = plan_chain(g)
        proven = sum(1 for ov in plan.problem.overlaps if ov.proven)
        row = {"ops": n, "load_s": round(load_s, 2), "plan_s": round(plan_s, 2), "proofs_s": round(proof_s, 2),
               "arena": plan.arena_size, "proven_overlaps": proven, "algorithm": plan.algorithm,
               "old_plan_s": None, "same_as_old": None}
        if n <= old_up_to:
            old, old_s, _ = plan_chain(g, whole_graph=True)
            row.update(old_plan_s=round(old_s, 2), same_as_old=same_plan(plan, old))
        rows.append(row)
    return {"shape": list(shape), "rows": rows}


def render(res):
    rows = [(r["ops"], r["load_s"], r["plan_s"], r["proofs_s"], r["arena"], r["proven_overlaps"], r["algorithm"],
             "-" if r["old_plan_s"] is None else r["old_plan_s"],
             "-" if r["same_as_old"] is None else ("yes" if r["same_as_old"] else "NO"))
            for r in res["rows"]]
    return (f"int8 ADD chains, tensors {res['shape']}, plan_graph(overlaps=True), seconds on this machine\n"
            + table(["ops", "load s", "plan s", "proofs s", "arena B", "overlaps", "algorithm",
                     "old prover plan s", "same plan"], rows))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench plan_chain")
    ap.add_argument("--ops", default="100,300,1000,5000")
    ap.add_argument("--shape", default="1,8,8,4")
    ap.add_argument("--old-prover-up-to", type=int, default=300)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    ops = [int(x) for x in a.ops.split(",") if x]
    shape = tuple(int(x) for x in a.shape.split(","))
    emit(run(ops, shape, a.old_prover_up_to), a.json, render)
