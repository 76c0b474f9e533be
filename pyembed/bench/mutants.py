"""Mutation campaign over the bundled models: every mutant through
load_model and the ``pyembed`` commands, counted by exit code.

    python -m pyembed.bench mutants [--count 2000] [--seed 0] [--commands plan,check,simulate,firmware]
                                    [--models hello_world,kws] [--every 4] [--json] [--show 20]

Each mutant is one bundled .tflite with one mutation, chosen by a fixed seed
(mutant k of seed s is always the same bytes):

* byte mutations (pyembed.bench.reliability.mutate): truncation, flipped
  bytes, random chunks, corrupted uoffsets, buffer / tensor / opcode indices,
  shapes and tensor types at their positions in the flatbuffer;
* structural mutations, made on the schema's object form and written back:
  a shape or a dimension changed (also to one too large for int32 byte
  counts), a tensor index out of range or pointing elsewhere, an operator
  code swapped, quantization removed or changed, a constant buffer cut,
  the graph inputs or outputs removed, a constant made a graph input, an
  operator reading its own output, a longer cycle, a subgraph without
  operators.

Every mutant goes through ``pyembed.load_model`` and ``pyembed plan``; one
in --every also through ``check``, ``simulate`` and ``firmware`` (generate
only), all run in-process through the click entry point. A command may
succeed (0), find a failed check (1) or refuse the input (2); exit 3 (an
internal error), an exception escaping the command or a simulation whose
outputs differ from the host run of the same graph is a bug, listed with
its mutant's seed so it can be replayed (``--seed S --count 1`` with
``--first K``).
"""
import argparse
import copy
import os
import random
import tempfile
import time

from pyembed.bench.common import emit

COMMANDS = ("plan", "check", "simulate", "firmware")
STRUCTURAL = ("shape", "dim_huge", "tensor_index", "tensor_index_far", "opcode", "quant_drop", "quant_change",
              "buffer_cut", "no_inputs", "no_outputs", "drop_input", "drop_output", "const_input", "self_cycle",
              "long_cycle", "empty_subgraph", "huge_tensor", "extra_output", "unused_input", "output_is_input",
              "dup_output", "swap_ops", "variable")
# the small models keep the campaign quick; the big ones come in now and then
SMALL = ("tflm_hello_world_int8", "tflm_micro_speech_int8", "tiny_kws_dscnn_int8", "tflm_mnist_lstm_int8",
         "tflm_audio_preprocessor_int8", "tiny_ic_resnet8_int8", "tiny_sww_int8")


def model_paths(names=None):
    from pyembed.bench.reliability import model_paths as paths
    out = paths()
    if names:
        out = [p for p in out if any(n in os.path.basename(p) for n in names)]
    return out


def _schema():
    from pyembed.model import tflite_writer as W
    return W.schema()


def _pack(m):
    import flatbuffers
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def structural(data, kind, rng):
    """data with one structural mutation: (bytes, description)."""
    import numpy as np
    S = _schema()
    m = S.ModelT.InitFromObj(S.Model.GetRootAs(data, 0))
    sg = m.subgraphs[0]
    ops, tensors = sg.operators or [], sg.tensors or []
    nt = len(tensors)
    act = [i for i, t in enumerate(tensors)
           if t.buffer == 0 or m.buffers[t.buffer].data is None or len(m.buffers[t.buffer].data) == 0]
    const = [i for i in range(nt) if i not in set(act)]
    what = kind
    if kind == "shape" and nt:
        i = rng.randrange(nt)
        shape = list(tensors[i].shape if tensors[i].shape is not None else [])
        if shape and rng.random() < 0.7:
            d = rng.randrange(len(shape))
            shape[d] = rng.choice((0, 1, 2, 3, shape[d] + 1, max(shape[d] - 1, 0), shape[d] * 2, 7, 64))
        else:
            shape = [rng.randint(1, 9) for _ in range(rng.randint(0, 5))]
        what = f"tensor {i} shape {list(tensors[i].shape if tensors[i].shape is not None else [])} -> {shape}"
        tensors[i].shape = shape
    elif kind == "dim_huge" and act:
        i = rng.choice(act)
        shape = list(tensors[i].shape if tensors[i].shape is not None else [1])
        shape[rng.randrange(len(shape))] = rng.choice((4096, 65536, 2**31 - 1, 2**30))
        what = f"tensor {i} shape -> {shape}"
        tensors[i].shape = shape
    elif kind == "huge_tensor" and act:
        i = rng.choice(act)
        shape = rng.choice(([1, 4096, 4096, 64], [1, 2048, 2048, 8], [1, 65536, 65536, 1], [1, 1024, 1024, 3]))
        what = f"tensor {i} shape -> {shape}"
        tensors[i].shape = list(shape)
    elif kind in ("tensor_index", "tensor_index_far") and ops:
        o = ops[rng.randrange(len(ops))]
        side = "inputs" if rng.random() < 0.6 or not len(o.outputs) else "outputs"
        lst = list(getattr(o, side) if getattr(o, side) is not None else [])
        if not lst:
            lst = [0]
        k = rng.randrange(len(lst))
        new = rng.choice((nt, nt + 5, 2**31 - 1, -2, -1000)) if kind == "tensor_index_far" else rng.randrange(nt)
        what = f"operator {ops.index(o)} {side}[{k}] {lst[k]} -> {new}"
        lst[k] = new
        setattr(o, side, lst)
    elif kind == "opcode" and ops:
        o = ops[rng.randrange(len(ops))]
        codes = m.operatorCodes
        if rng.random() < 0.5 and len(codes) > 1:
            new = rng.randrange(len(codes))
            what = f"operator {ops.index(o)} opcode index {o.opcodeIndex} -> {new}"
            o.opcodeIndex = new
        else:
            c = copy.deepcopy(codes[o.opcodeIndex]) if 0 <= o.opcodeIndex < len(codes) else S.OperatorCodeT()
            c.builtinCode = rng.choice((0, 1, 2, 3, 4, 9, 17, 18, 22, 25, 28, 34, 40, 49, 55, 83, 97, 114, 150, 200))
            c.deprecatedBuiltinCode = min(c.builtinCode, 127)
            codes.append(c)
            what = f"operator {ops.index(o)} builtin code -> {c.builtinCode}"
            o.opcodeIndex = len(codes) - 1
    elif kind in ("quant_drop", "quant_change") and nt:
        i = rng.randrange(nt)
        q = tensors[i].quantization
        if kind == "quant_drop" or q is None:
            tensors[i].quantization = None
            what = f"tensor {i} quantization removed"
        else:
            if q.scale is not None and len(q.scale):
                sc = list(q.scale)
                sc[rng.randrange(len(sc))] = rng.choice((0.0, -1.0, 1e-30, 1e30, float("inf"), float("nan"), 3.0))
                q.scale = sc
            if rng.random() < 0.5:
                zp = list(q.zeroPoint if q.zeroPoint is not None else [0])
                zp[rng.randrange(len(zp))] = rng.choice((-129, 128, 255, -128, 127, 0, 1000))
                q.zeroPoint = zp
            if rng.random() < 0.3:
                q.quantizedDimension = rng.choice((-1, 0, 3, 7))
            what = f"tensor {i} quantization -> scale {list(q.scale) if q.scale is not None else None}"[:120]
    elif kind == "buffer_cut" and const:
        i = rng.choice(const)
        b = m.buffers[tensors[i].buffer]
        n = len(b.data)
        keep = rng.choice((0, 1, n // 2, n - 1, n + 1))
        b.data = np.resize(np.asarray(b.data, np.uint8), keep) if keep else np.zeros(0, np.uint8)
        what = f"tensor {i} buffer {tensors[i].buffer} {n} -> {keep} bytes"
    elif kind == "no_inputs":
        sg.inputs = []
    elif kind == "no_outputs":
        sg.outputs = []
    elif kind == "drop_input" and sg.inputs is not None and len(sg.inputs):
        k = rng.randrange(len(sg.inputs))
        what = f"graph input {k} removed"
        sg.inputs = [t for j, t in enumerate(sg.inputs) if j != k]
    elif kind == "drop_output" and sg.outputs is not None and len(sg.outputs):
        k = rng.randrange(len(sg.outputs))
        what = f"graph output {k} removed"
        sg.outputs = [t for j, t in enumerate(sg.outputs) if j != k]
    elif kind == "const_input" and const:
        i = rng.choice(const)
        ins = list(sg.inputs if sg.inputs is not None else [])
        if ins and rng.random() < 0.5:
            ins[rng.randrange(len(ins))] = i
        else:
            ins.append(i)
        what = f"constant tensor {i} as a graph input"
        sg.inputs = ins
    elif kind == "self_cycle" and ops:
        k = rng.randrange(len(ops))
        o = ops[k]
        ins = list(o.inputs if o.inputs is not None else [])
        if len(o.outputs):
            j = rng.randrange(len(ins)) if ins else 0
            ins[j:j + 1] = [int(o.outputs[0])]
            what = f"operator {k} reads its own output {int(o.outputs[0])}"
            o.inputs = ins
    elif kind == "long_cycle" and len(ops) >= 2:
        a = rng.randrange(len(ops) - 1)
        b = rng.randrange(a + 1, len(ops))
        if len(ops[b].outputs) and ops[a].inputs is not None and len(ops[a].inputs):
            ins = list(ops[a].inputs)
            ins[0] = int(ops[b].outputs[0])
            ops[a].inputs = ins
            what = f"operator {a} reads the output of operator {b} (a cycle through {b - a + 1} operators)"
    elif kind == "empty_subgraph":
        sg.operators = []
    elif kind == "extra_output" and ops:
        o = ops[rng.randrange(len(ops))]
        if o.outputs is not None and len(o.outputs):
            t = int(o.outputs[0])
            sg.outputs = list(sg.outputs if sg.outputs is not None else []) + [t]
            what = f"tensor {t} (operator {ops.index(o)}'s output) also a graph output"
    elif kind == "unused_input":
        tensors.append(copy.deepcopy(tensors[act[0]]) if act else S.TensorT())
        tensors[-1].buffer, tensors[-1].name = 0, b"unused_input"
        sg.inputs = list(sg.inputs if sg.inputs is not None else []) + [len(tensors) - 1]
        what = f"a graph input no operator reads (tensor {len(tensors) - 1})"
    elif kind == "output_is_input" and sg.inputs is not None and len(sg.inputs):
        t = int(sg.inputs[rng.randrange(len(sg.inputs))])
        outs = list(sg.outputs if sg.outputs is not None else [])
        if outs and rng.random() < 0.5:
            outs[rng.randrange(len(outs))] = t
        else:
            outs.append(t)
        sg.outputs = outs
        what = f"graph input tensor {t} also a graph output"
    elif kind == "dup_output" and sg.outputs is not None and len(sg.outputs):
        sg.outputs = list(sg.outputs) + [int(sg.outputs[0])]
    elif kind == "swap_ops" and len(ops) >= 2:
        a = rng.randrange(len(ops) - 1)
        b = a + 1 if rng.random() < 0.7 else rng.randrange(a + 1, len(ops))
        ops[a], ops[b] = ops[b], ops[a]
        what = f"operators {a} and {b} swapped"
    elif kind == "variable" and act:
        i = rng.choice(act)
        tensors[i].isVariable = not tensors[i].isVariable
        what = f"tensor {i} isVariable -> {tensors[i].isVariable}"
    else:
        what = f"{kind}: nothing to mutate"
    return _pack(m), what


def make_mutant(index, seed=0, paths=None, data_cache=None):
    """Mutant `index` of campaign `seed`: (model name, bytes, description)."""
    from pyembed.bench.reliability import field_positions, mutate
    rng = random.Random(seed * 1_000_003 + index)
    paths = paths or model_paths()
    small = [p for p in paths if os.path.basename(p)[:-7] in SMALL] or paths
    path = rng.choice(small if rng.random() < 0.85 else paths)
    cache = data_cache if data_cache is not None else {}
    if path not in cache:
        with open(path, "rb") as f:
            data = f.read()
        cache[path] = (data, field_positions(data))
    data, positions = cache[path]
    name = os.path.basename(path)[:-7]
    if rng.random() < 0.4:
        blob, what = mutate(data, positions, rng)
        return name, blob, what
    kind = rng.choice(STRUCTURAL)
    try:
        blob, what = structural(data, kind, rng)
    except Exception as e:  # noqa: BLE001 - the writer refused the mutation: fall back to bytes
        blob, what = mutate(data, positions, rng)
        what = f"{kind} not writable ({type(e).__name__}); {what}"
    return name, blob, f"{kind}: {what}"


def _args(command, path, outdir):
    if command == "plan":
        return ["plan", path, "-o", outdir]
    if command == "check":
        return ["check", path, "--random", "--calibration", "2", "--no-oracle", "--no-plot"]
    if command == "simulate":
        return ["simulate", path, "--no-ops"]
    if command == "firmware":
        return ["firmware", path, "--profile", "mps2-an386", "-o", os.path.join(outdir, "fw")]
    raise ValueError(command)


def run_command(command, path, outdir):
    """(exit code, the last line of the output, or the escaped exception)."""
    from click.testing import CliRunner
    from pyembed.cli import main
    r = CliRunner().invoke(main, _args(command, path, outdir), catch_exceptions=True)
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        return "exception", f"{type(r.exception).__name__}: {r.exception}"
    out = (r.output or "").strip().splitlines()
    return r.exit_code, (out[-1] if out else "")[:300]


def load_outcome(blob):
    """load_model on the bytes: "ok", "refused" (a PyEmbedError) or "exception"."""
    from pyembed.errors import PyEmbedError
    from pyembed.model.load import load_tflite_bytes
    try:
        load_tflite_bytes(blob, "mutant")
        return "ok", ""
    except PyEmbedError as e:
        return "refused", str(e)[:200]
    except Exception as e:  # noqa: BLE001 - counted, that is the point
        return "exception", f"{type(e).__name__}: {e}"[:300]


def campaign(count, seed=0, commands=COMMANDS, every=4, models=None, first=0, progress=None):
    """Run mutants first..first+count-1: a dict of counts per (stage, outcome)
    and the list of failures (exit 3 or an escaped exception)."""
    paths = model_paths(models)
    cache = {}
    counts, failures = {}, []
    with tempfile.TemporaryDirectory(prefix="pyembed_mutants_") as tmp:
        for k in range(first, first + count):
            name, blob, what = make_mutant(k, seed, paths, cache)
            path = os.path.join(tmp, f"m{k}.tflite")
            with open(path, "wb") as f:
                f.write(blob)
            outcome, msg = load_outcome(blob)
            counts.setdefault("load_model", {}).setdefault(outcome, 0)
            counts["load_model"][outcome] += 1
            if outcome == "exception":
                failures.append({"mutant": k, "model": name, "what": what, "stage": "load_model", "error": msg})
            cmds = [c for c in commands if c == "plan" or (every and k % every == 0)]
            for c in cmds:
                outdir = os.path.join(tmp, f"out{k}_{c}")
                code, msg = run_command(c, path, outdir)
                counts.setdefault(c, {}).setdefault(str(code), 0)
                counts[c][str(code)] += 1
                # exit 3 is a bug; so is a simulated run that differs from the host run of the
                # same graph (a graph both accept but lay out differently)
                if code in (3, "exception") or (code == 1 and "DIFFER" in msg):
                    failures.append({"mutant": k, "model": name, "what": what, "stage": c, "error": msg})
            os.remove(path)
            if progress:
                progress(k - first + 1, count)
    return counts, failures


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench mutants")
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--first", type=int, default=0, help="index of the first mutant (replay one with --count 1)")
    ap.add_argument("--commands", default=",".join(COMMANDS))
    ap.add_argument("--every", type=int, default=4, help="one mutant in N also through check, simulate, firmware")
    ap.add_argument("--models", default=None, help="comma-separated substrings of bundled model names")
    ap.add_argument("--show", type=int, default=20, help="failures to print")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    commands = tuple(c for c in a.commands.split(",") if c)
    bad = [c for c in commands if c not in COMMANDS]
    if bad:
        ap.error(f"--commands: unknown {bad}; choose from {', '.join(COMMANDS)}")
    t0 = time.perf_counter()
    last = [t0]

    def progress(done, total):
        if time.perf_counter() - last[0] > 30:
            last[0] = time.perf_counter()
            print(f"  {done}/{total} mutants, {last[0] - t0:.0f} s", flush=True)

    counts, failures = campaign(a.count, a.seed, commands, a.every,
                                a.models.split(",") if a.models else None, a.first,
                                None if a.json else progress)
    res = {"count": a.count, "seed": a.seed, "first": a.first, "seconds": round(time.perf_counter() - t0, 1),
           "counts": counts, "failures": len(failures), "failure_list": failures}
    emit(res, a.json, lambda r: render(r, a.show))
    return 1 if failures else 0


def render(res, show=20):
    lines = [f"mutants {res['first']}..{res['first'] + res['count'] - 1} (seed {res['seed']}) in {res['seconds']} s"]
    for stage, c in res["counts"].items():
        what = "outcomes" if stage == "load_model" else "exit codes"
        lines.append(f"  {stage:<11} {what}: " + ", ".join(f"{k}: {v}" for k, v in sorted(c.items())))
    lines.append(f"  failures (exit 3, an escaped exception, simulate's outputs DIFFER): {res['failures']}")
    for f in res["failure_list"][:show]:
        lines.append(f"    #{f['mutant']} {f['model']} {f['stage']}: {f['what'][:120]} -> {f['error'][:200]}")
    return "\n".join(lines)
