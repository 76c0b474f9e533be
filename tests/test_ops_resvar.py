"""Resource variables and CALL_ONCE (pyembed.model.resvar_import,
pyembed.model.ops.resvar): streaming models that keep state between invokes,
== the tflite-micro interpreter invoke by invoke (first invoke runs the init
subgraph; reset() puts the variables at their reset value and does not run
it again), and refused models."""
import numpy as np
import pytest

from pyembed.errors import ModelError, UnsupportedError
from pyembed.model import tflite_writer as W
from pyembed.model.load import load_tflite_bytes

pytest.importorskip("tflite_micro")
S = W.schema()
B = S.BuiltinOperator


def _q(dtype, zp):
    return dict(scale=0.5, zp=zp) if dtype in (np.int8, np.int16) else {}


def _init_sg(vars_, init_extra_op=False):
    """The init subgraph: VAR_HANDLE + ASSIGN_VARIABLE(constant) per (name, dtype, shape, init, zp)."""
    t, ops = [], []
    for name, dtype, shape, init, zp in vars_:
        h = len(t)
        t += [W.tensor((), W.RESOURCE), W.tensor(shape, dtype, data=np.asarray(init).reshape(shape), **_q(dtype, zp))]
        ops += [W.op(B.VAR_HANDLE, [], [h], "VarHandleOptions", container=b"", sharedName=name.encode()),
                W.op(B.ASSIGN_VARIABLE, [h, h + 1], [])]
    if init_extra_op:
        d = vars_[0]
        t += [W.tensor(d[2], d[1], **_q(d[1], d[4]))]
        ops.insert(1, W.op(B.ADD, [1, 1], [len(t) - 1], "AddOptions"))
        ops[2] = W.op(B.ASSIGN_VARIABLE, [0, len(t) - 1], [])
    return (t, ops, [], [])


def acc_model(dtype, n=6, zp=0, init=None, call_once=True, read_after_assign=False, delay=False, **kw):
    """state += x; output = the new state (read back after the assign when
    read_after_assign). delay: no arithmetic (float32 ADD is not pyembed's yet):
    output = the state read, then state = x (a one-frame delay line)."""
    init = np.arange(n) - 2 if init is None else init
    q = _q(dtype, zp)
    t = [W.tensor((n,), dtype, **q), W.tensor((), W.RESOURCE), W.tensor((n,), dtype, **q),
         W.tensor((n,), dtype, **q), W.tensor((n,), dtype, **q)]
    ops = [W.op(B.CALL_ONCE, [], [], "CallOnceOptions", initSubgraphIndex=1)] if call_once else []
    ops += [W.op(B.VAR_HANDLE, [], [1], "VarHandleOptions", container=b"", sharedName=b"acc"),
            W.op(B.READ_VARIABLE, [1], [2]),
            W.op(B.ADD, [2, 0], [3], "AddOptions"),
            W.op(B.ASSIGN_VARIABLE, [1, 3], [])]
    out = 3
    if delay:
        ops = ops[:-2] + [W.op(B.ASSIGN_VARIABLE, [1, 0], [])]
        out = 2
    if read_after_assign:
        ops.append(W.op(B.READ_VARIABLE, [1], [4]))
        out = 4
    return W.build(t, ops, [0], [out], subgraphs=[_init_sg([("acc", dtype, (n,), init, zp)], **kw)])


def two_var_model(dtype=np.int32):
    """Two variables: a (+= x) and b (= the old a): outputs a + b after the writes, and b read before its write."""
    n = 4
    t = [W.tensor((n,), dtype), W.tensor((), W.RESOURCE), W.tensor((), W.RESOURCE)] + \
        [W.tensor((n,), dtype) for _ in range(5)]
    ops = [W.op(B.CALL_ONCE, [], [], "CallOnceOptions", initSubgraphIndex=1),
           W.op(B.VAR_HANDLE, [], [1], "VarHandleOptions", container=b"", sharedName=b"a"),
           W.op(B.VAR_HANDLE, [], [2], "VarHandleOptions", container=b"", sharedName=b"b"),
           W.op(B.READ_VARIABLE, [1], [3]),          # old a
           W.op(B.READ_VARIABLE, [2], [4]),          # old b
           W.op(B.ADD, [3, 0], [5], "AddOptions"),   # new a
           W.op(B.ASSIGN_VARIABLE, [1, 5], []),
           W.op(B.ASSIGN_VARIABLE, [2, 3], []),      # b = old a
           W.op(B.READ_VARIABLE, [2], [6]),          # new b (== old a): read after its write
           W.op(B.ADD, [5, 6], [7], "AddOptions")]
    sg = _init_sg([("a", dtype, (n,), [1, 2, 3, 4], 0), ("b", dtype, (n,), [100, 200, 300, 400], 0)])
    return W.build(t, ops, [0], [7, 4], subgraphs=[sg])


def _tflm(blob, frames, reset_at, n_out=1):
    from tflite_micro.python.tflite_micro import runtime
    it = runtime.Interpreter.from_bytes(bytes(blob), arena_size=1 << 18)
    outs = []
    for k, x in enumerate(frames):
        if k in reset_at:
            it.reset()
        it.set_input(x, 0)
        it.invoke()
        outs.append([np.array(it.get_output(j)) for j in range(n_out)])
    return outs


def _ours(g, frames, reset_at, n_out=1):
    rt = g.compile()
    arena = rt.new_arena()
    outs = []
    for k, x in enumerate(frames):
        if k in reset_at:
            rt.reset_variables(arena)
        rt.set_input(arena, 0, x)
        step = 0
        while step < len(rt.order):      # following the jumps of inlined IF / WHILE
            rt.invoke_op(step, arena)
            step = rt.next_step(step, arena)
        outs.append([rt.get_output(arena, j) for j in range(n_out)])
    return outs


def _same(blob, frames, reset_at=(), n_out=1):
    g = load_tflite_bytes(blob, name="resvar")
    assert not g.unsupported, g.summary()
    want, got = _tflm(blob, frames, reset_at, n_out), _ours(g, frames, reset_at, n_out)
    for k, (a, b) in enumerate(zip(want, got)):
        for j, (x, y) in enumerate(zip(a, b)):
            assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), (k, j, x, y)
    return g, want


def _frames(dtype, n, count, seed):
    rng = np.random.default_rng(seed)
    if dtype == np.float32:
        return [rng.standard_normal(n).astype(np.float32) for _ in range(count)]
    hi = 40 if dtype == np.int8 else 1000
    return [rng.integers(-hi, hi, n).astype(dtype) for _ in range(count)]


@pytest.mark.parametrize("dtype,zp", [(np.int8, 0), (np.int8, -5), (np.int16, 0), (np.int32, 0)])
@pytest.mark.parametrize("read_after_assign", [False, True])
def test_accumulator_invokes_and_reset_bit_exact(dtype, zp, read_after_assign):
    """Eight invokes without reset, a reset before the sixth: == TFLM invoke by invoke."""
    frames = _frames(dtype, 6, 8, seed=int(zp) + 7)
    g, want = _same(acc_model(dtype, zp=zp, read_after_assign=read_after_assign), frames, reset_at=(5,))
    if dtype == np.int32:
        # the first output holds the init value plus the first input; after the reset the state was 0
        assert np.array_equal(want[0][0], np.arange(6) - 2 + frames[0])
        assert np.array_equal(want[5][0], frames[5])


@pytest.mark.parametrize("dtype", [np.float32, np.int16, np.int8])
@pytest.mark.parametrize("read_after_assign", [False, True])
def test_delay_line_invokes_and_reset_bit_exact(dtype, read_after_assign):
    """output = the previous input (the initial value first), a reset before the fifth: == TFLM."""
    frames = _frames(dtype, 6, 7, seed=5)
    g, want = _same(acc_model(dtype, zp=-3 if dtype == np.int8 else 0, delay=True,
                              read_after_assign=read_after_assign), frames, reset_at=(4,))
    if not read_after_assign:
        assert np.array_equal(want[3][0], frames[2]) and not np.array_equal(want[0][0], frames[0])


def test_accumulator_without_call_once_starts_at_reset_value():
    frames = _frames(np.int32, 6, 4, seed=3)
    _same(acc_model(np.int32, call_once=False), frames, reset_at=(2,))


def test_two_variables_bit_exact():
    frames = _frames(np.int32, 4, 6, seed=11)
    g, want = _same(two_var_model(), frames, reset_at=(4,), n_out=2)
    assert np.array_equal(want[0][1], [100, 200, 300, 400])


def test_lowered_graph():
    g = load_tflite_bytes(acc_model(np.int8, zp=3))
    types = [op.type for op in g.operators]
    assert types == ["CALL_ONCE", "READ_VARIABLE", "ADD", "ASSIGN_VARIABLE"]
    state = [t for t in g.tensors if t.is_variable and not t.keep_on_reset]
    flag = [t for t in g.tensors if t.keep_on_reset]
    assert len(state) == 1 and state[0].dtype == np.int8 and int(state[0].zero_point[0]) == 3
    assert len(flag) == 1 and flag[0].dtype == np.int32


def test_refusals():
    with pytest.raises(UnsupportedError, match="init subgraph 1 runs operator 1 \\(ADD\\)"):
        load_tflite_bytes(acc_model(np.int32, init_extra_op=True))
    # the initial value of another shape than the variable's reads and writes
    sg = _init_sg([("acc", np.int32, (4,), np.arange(4), 0)])
    n = 6
    t = [W.tensor((n,), np.int32), W.tensor((), W.RESOURCE), W.tensor((n,), np.int32), W.tensor((n,), np.int32)]
    ops = [W.op(B.CALL_ONCE, [], [], "CallOnceOptions", initSubgraphIndex=1),
           W.op(B.VAR_HANDLE, [], [1], "VarHandleOptions", container=b"", sharedName=b"acc"),
           W.op(B.READ_VARIABLE, [1], [2]), W.op(B.ADD, [2, 0], [3], "AddOptions"),
           W.op(B.ASSIGN_VARIABLE, [1, 3], [])]
    blob = W.build(t, ops, [0], [3], subgraphs=[sg])
    with pytest.raises(UnsupportedError, match="variable 'acc' .* must keep one shape"):
        load_tflite_bytes(blob)
    # CALL_ONCE naming a subgraph the model does not have
    ops[0] = W.op(B.CALL_ONCE, [], [], "CallOnceOptions", initSubgraphIndex=5)
    with pytest.raises(ModelError, match="CALL_ONCE names init subgraph 5"):
        load_tflite_bytes(W.build(t, ops, [0], [3], subgraphs=[sg]))
    # an int64 variable
    t64 = [W.tensor((n,), np.int64), W.tensor((), W.RESOURCE), W.tensor((n,), np.int64), W.tensor((n,), np.int64)]
    with pytest.raises(UnsupportedError, match="only int8, int16, int32 and float32 variables"):
        load_tflite_bytes(W.build(t64, ops[1:], [0], [3]))
    # the resource tensor read by another operator
    ops2 = [ops[1], W.op(B.ADD, [1, 0], [3], "AddOptions")]
    with pytest.raises(UnsupportedError, match="reads the resource tensor 1"):
        load_tflite_bytes(W.build(t, ops2, [0], [3]))
    # a handle that is not a VAR_HANDLE's output
    ops3 = [W.op(B.READ_VARIABLE, [1], [2]), W.op(B.ADD, [2, 0], [3], "AddOptions")]
    with pytest.raises(UnsupportedError, match="not the output of a VAR_HANDLE"):
        load_tflite_bytes(W.build(t, ops3, [0], [3]))


def test_control_flow_beside_variables_bit_exact():
    """An IF (both branches pass the read value through) between a variable's read and its write:
    output = the previous input (0 first and after a reset), == TFLM invoke by invoke; variables
    inside the branches and loops: tests/test_ops_ctrlflow_nested.py."""
    n = 4
    t = [W.tensor((n,), np.int32), W.tensor((), W.RESOURCE), W.tensor((n,), np.int32), W.tensor((n,), np.int32),
         W.tensor((1,), np.bool_, data=[True])]
    if_op = W.op(B.IF, [4, 2], [3], "IfOptions", thenSubgraphIndex=1, elseSubgraphIndex=1)
    ops = [W.op(B.VAR_HANDLE, [], [1], "VarHandleOptions", container=b"", sharedName=b"v"),
           W.op(B.READ_VARIABLE, [1], [2]), if_op, W.op(B.ASSIGN_VARIABLE, [1, 0], [])]
    sg = ([W.tensor((n,), np.int32), W.tensor((n,), np.int32)], [], [0], [0])
    frames = _frames(np.int32, n, 5, seed=4)
    g, want = _same(W.build(t, ops, [0], [3], subgraphs=[sg]), frames, reset_at=(3,))
    assert [op.type for op in g.operators] == ["READ_VARIABLE", "IF", "WHILE", "IF@copy", "ASSIGN_VARIABLE"]
    assert np.array_equal(want[2][0], frames[1]) and not want[3][0].any()


def test_writer_refuses_resource_data():
    with pytest.raises(ValueError, match="RESOURCE tensor holds a handle"):
        W.tensor((), W.RESOURCE, data=np.zeros(1))


def test_values_copied_without_requantization():
    """Initial value (scale 1.0), read (0.5) and assigned value (0.25) of one
    int8 variable with different scales: TFLM copies the bytes, so does pyembed."""
    n = 4
    sg1 = ([W.tensor((), W.RESOURCE), W.tensor((n,), np.int8, data=[10, 20, 30, 40], scale=1.0, zp=0)],
           [W.op(B.VAR_HANDLE, [], [0], "VarHandleOptions", container=b"", sharedName=b"v"),
            W.op(B.ASSIGN_VARIABLE, [0, 1], [])], [], [])
    t0 = [W.tensor((n,), np.int8, scale=0.25, zp=0), W.tensor((), W.RESOURCE),
          W.tensor((n,), np.int8, scale=0.5, zp=0)]
    ops0 = [W.op(B.CALL_ONCE, [], [], "CallOnceOptions", initSubgraphIndex=1),
            W.op(B.VAR_HANDLE, [], [1], "VarHandleOptions", container=b"", sharedName=b"v"),
            W.op(B.READ_VARIABLE, [1], [2]), W.op(B.ASSIGN_VARIABLE, [1, 0], [])]
    frames = _frames(np.int8, n, 3, seed=2)
    g, want = _same(W.build(t0, ops0, [0], [2], subgraphs=[sg1]), frames)
    assert np.array_equal(want[0][0], [10, 20, 30, 40]) and np.array_equal(want[1][0], frames[0])


def _qemu_missing():
    from pyembed.target import qemu
    return qemu.missing_tools()


@pytest.mark.skipif(_qemu_missing() is not None, reason=str(_qemu_missing()))
def test_firmware_under_qemu(tmp_path):
    """A Cortex-M4 (mps2-an386) firmware of the int8 two-read accumulator: its invoke (the first of
    a new arena: CALL_ONCE copies the initial value, READ, ADD, ASSIGN, READ after the ASSIGN) gives
    the host run and the tflite-micro interpreter's first invoke; then four invokes in one boot
    (the harness patched) give the interpreter's fourth."""
    from pyembed.target.firmware import build_project, generate, run_project
    blob = acc_model(np.int8, zp=-5, read_after_assign=True)
    g = load_tflite_bytes(blob, name="resvar_acc")
    proj = generate(g, "mps2-an386", tmp_path / "fw")
    build_project(proj.outdir)
    x = np.array([-40, -3, 0, 7, 39, 12], np.int8)
    want = _tflm(blob, [x], ())[0][0]
    assert np.array_equal(g.run([x])[0], want)
    got = np.asarray(run_project(proj, [x]).outputs[0]).reshape(want.shape)
    assert np.array_equal(got.astype(np.int64), want.astype(np.int64))
    # not the state's reset value: the initial value was copied
    assert not np.array_equal(want, x)
    # several invokes: the harness's main.c patched so that three invokes on the same input precede
    # the measured one (the input copied back before each: the plan may reuse its bytes); the
    # output is the fourth invoke's, == TFLM's fourth invoke (the state carried over)
    main = next(proj.outdir.rglob("main.c"))
    text = main.read_text()
    assert text.count("st = pe_model_invoke();") == 1
    main.write_text(text.replace("st = pe_model_invoke();", """{
        static uint8_t saved[64];
        uint32_t nin = 0u;
        uint8_t *in0 = (uint8_t *)pe_model_input(0, &nin);
        int rep;
        st = (in0 != NULL && nin <= 64u) ? PE_OK : PE_ERR_ARG;
        if (st == PE_OK) {
            memcpy(saved, in0, nin);
        }
        for (rep = 0; rep < 3 && st == PE_OK; rep++) {
            st = pe_model_invoke();
            memcpy(in0, saved, nin);
        }
    }
    st = st == PE_OK ? pe_model_invoke() : st;"""))
    build_project(proj.outdir)
    want4 = _tflm(blob, [x] * 4, ())[3][0]
    got4 = np.asarray(run_project(proj, [x]).outputs[0]).reshape(want.shape)
    assert np.array_equal(got4.astype(np.int64), want4.astype(np.int64))
    assert not np.array_equal(want4, want)


def test_simulator_first_invoke():
    """firmware_sim runs the lowered operators (cost class copy): its outputs are the interpreter's first invoke."""
    from firmware_sim.profiles import load_profile
    from firmware_sim.sim import simulate
    for blob in (acc_model(np.int8, zp=-5, read_after_assign=True), two_var_model()):
        g = load_tflite_bytes(blob)
        x = _frames(g.tensors[g.inputs[0]].dtype.type, g.tensors[g.inputs[0]].size, 1, seed=9)[0]
        r = simulate(g, None, load_profile("stm32f446"), [x])
        want = _tflm(blob, [x], (), len(g.outputs))[0]
        for a, b in zip(r.outputs, want):
            assert a.dtype == b.dtype and np.array_equal(a, b)
