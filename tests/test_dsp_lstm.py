"""The DSP-extension path of UNIDIRECTIONAL_SEQUENCE_LSTM (pe_lstm.c,
__ARM_FEATURE_DSP) and its portable path, both run on QEMU's Cortex-M4
(pyembed.target.kernels), against the host build (the portable C that
tests/test_lstm.py checks against TFLM and LiteRT). Outputs, the hidden state
and the cell state after the call are compared byte for byte (==); every
mismatch is reported."""
import numpy as np
import pytest

from pyembed.target import kernels as K

pytestmark = pytest.mark.skipif(K.missing("dsp") is not None, reason=str(K.missing("dsp")))

FLAG_TIME_MAJOR, FLAG_LITERT = 1, 2


def words(flags, batch, time, nd, ns, *, input_zp=-128, hidden_zp=0, tanh=(0, 0), cell_int_bits=3,
          clip=0, gate=None, fc=(1 << 30, -14), ig=(1 << 30, -18), out=(1095936456, -22)):
    """The 32 parameter words (pe_lstm.h); gate: 4 x (in_mult, in_shift,
    rec_mult, rec_shift), gate order i, f, g, o."""
    gate = gate or [(1829343232, 3, 1444730112, 0)] * 4
    litert = bool(flags & FLAG_LITERT)
    w = [flags, batch, time, nd, ns, input_zp, hidden_zp,
         cell_int_bits if litert else tanh[0], 0 if litert else tanh[1], clip]
    for g in gate:
        w += list(g)
    w += [0, 0, 0, 0] if litert else [*fc, *ig]
    return w + list(out)


def random_case(rng, w, wscale=128, bscale=3000, name=""):
    b, t, nd, ns = w[1:5]
    return K.lstm_case(w, rng.integers(-128, 128, b * t * nd), rng.integers(-wscale, wscale, (4, ns, nd)),
                       rng.integers(-wscale, wscale, (4, ns, ns)), rng.integers(-bscale, bscale, (4, ns)),
                       rng.integers(-128, 128, b * ns), rng.integers(-32768, 32768, b * ns), name=name)


def model_cases(rng):
    """The bundled models' LSTM layers: their weights and parameter words
    (TFLM and LiteRT arithmetic), random input and states."""
    from pyembed.data import model_path
    from pyembed.model.load import load_model
    out = []
    for name in ("tflm_mnist_lstm_int8", "tflm_dtln_noise_suppression"):
        g = load_model(model_path(name))
        for n, op in enumerate(o for o in g.operators if o.type == "UNIDIRECTIONAL_SEQUENCE_LSTM"):
            t = [g.tensors[op.inputs[k]] for k in op.params["c_inputs"]]
            for key in ("words", "words_litert"):
                w = op.params[key]
                b, tt, nd, ns = w[1:5]
                out.append(K.lstm_case(
                    w, rng.integers(-128, 128, b * tt * nd), np.stack([x.data for x in t[1:5]]),
                    np.stack([x.data for x in t[5:9]]), np.stack([x.data for x in t[9:13]]),
                    rng.integers(-128, 128, b * ns), rng.integers(-20000, 20000, b * ns),
                    name=f"{name} lstm {n} {key}"))
    return out


def cases():
    """Depths that reach each part of the DSP dot product (the 8-byte SMLAD
    loop, the 4-byte step, single bytes, and each alone), batch and time
    major, zero points at their limits, cell clip on and off, gate shifts
    from left shifts to 31-bit right shifts, and biases large enough to take
    the requantization's portable fallback (|acc| >= 2^(30 - left shift)),
    each in TFLM's and LiteRT's arithmetic."""
    rng = np.random.default_rng(19)
    out = []

    def gates(lo, hi):
        return [(int(rng.integers(1 << 30, (1 << 31) - 1)), int(rng.integers(lo, hi)),
                 int(rng.integers(1 << 30, (1 << 31) - 1)), int(rng.integers(lo, hi))) for _ in range(4)]

    for flags in (0, FLAG_LITERT):
        tag = " litert" if flags else ""
        for (fl, b, t, nd, ns, izp, hzp, clip) in [
                (0, 1, 3, 13, 7, -128, 0, 0), (FLAG_TIME_MAJOR, 3, 2, 28, 20, 127, -5, 12000),
                (0, 2, 3, 3, 9, 0, 127, 0), (FLAG_TIME_MAJOR, 2, 2, 8, 4, -1, -128, 32767),
                (0, 1, 2, 37, 12, 5, 3, 20480)]:
            w = words(flags | fl, b, t, nd, ns, input_zp=izp, hidden_zp=hzp, clip=clip, tanh=(0, 1),
                      gate=gates(-3, 4))
            out.append(random_case(rng, w, name=f"{b}x{t} {nd}->{ns}{tag}"))
        # shift 0 (no rounding divide), wide right shifts, TANH16 of the cell
        # with a multiplier
        w = words(flags, 1, 4, 16, 8, gate=gates(-31, 1), tanh=(24576, 5), out=(1 << 30, 0),
                  fc=(1 << 30, 0), ig=(1 << 30, -31))
        out.append(random_case(rng, w, 20, name=f"wide shifts 16->8{tag}"))
        # int32 sums beyond 2^(30 - left): the portable requantization
        w = words(flags, 1, 2, 12, 8, gate=gates(5, 11), out=(2146304392, 1))
        out.append(random_case(rng, w, bscale=1 << 31, name=f"saturating shifts 12->8{tag}"))
    return out + model_cases(rng)


def state_bytes(c):
    """Bytes of the output, the hidden and the cell state in a case's result."""
    b, t, ns = c.params[1], c.params[2], c.params[4]
    ny, nh = b * t * ns, b * ns
    return ny, nh


@pytest.fixture(scope="module")
def res():
    cs = cases()
    return cs, {v: K.run(cs, v) for v in K.VARIANTS}


@pytest.mark.parametrize("variant", ["dsp", "portable"])
def test_lstm_target_builds_equal_host(res, variant):
    cs, r = res
    bad = []
    for c, got, want in zip(cs, r[variant], r["host"]):
        if got.status != 0 or want.status != 0:
            bad.append(f"{c.name}: status {got.status} (host {want.status})")
            continue
        ny, nh = state_bytes(c)
        a, b = np.frombuffer(got.output, np.uint8), np.frombuffer(want.output, np.uint8)
        if a.shape != b.shape:
            bad.append(f"{c.name}: {a.size} bytes, host {b.size}")
            continue
        for what, sl in (("output", slice(0, ny)), ("hidden", slice(ny, ny + nh)),
                         ("cell", slice((ny + nh + 1) & ~1, None))):
            n = int(np.count_nonzero(a[sl] != b[sl]))
            if n:
                bad.append(f"{c.name}: {variant} {what} differs in {n} bytes")
    assert bad == []
    assert len(cs) == 20


def test_lstm_cases_change_the_states(res):
    """The cases are not degenerate: every output and cell state has more than
    one value (the comparison above compares real work)."""
    cs, r = res
    for c, h in zip(cs, r["host"]):
        ny, nh = state_bytes(c)
        a = np.frombuffer(h.output, np.uint8)
        assert len(np.unique(a[:ny])) > 1, c.name
        assert len(np.unique(a[(ny + nh + 1) & ~1:].view(np.int16))) > 1, c.name


def test_lstm_dsp_build_takes_the_dsp_path(res):
    """The DSP build really runs its own loops: fewer instructions than the
    portable build on every case, fewer than half on the bundled models'
    layers in TFLM's arithmetic (what the models run)."""
    cs, r = res
    for i, c in enumerate(cs):
        assert r["dsp"][i].instructions < r["portable"][i].instructions, c.name
        if c.name.startswith("tflm_") and c.name.endswith(" words"):
            assert 2 * r["dsp"][i].instructions < r["portable"][i].instructions, c.name
