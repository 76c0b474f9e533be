"""`pyembed firmware kws --segments BYTES --run` under QEMU with the default
objective (8K) and with --strategy stripes (20K: the smallest block at which
KWS keeps stripe regions, so regions are loaded as segments): the segmented
firmware's outputs equal the host run of the same input, integer for integer
(2 QEMU runs)."""
import json
import re

import numpy as np
import pytest
from click.testing import CliRunner

from pyembed.cli import main
from pyembed.data import model_path
from pyembed.model.load import load_model
from pyembed.target import qemu

pytestmark = pytest.mark.skipif(qemu.missing_tools() is not None, reason=str(qemu.missing_tools()))


@pytest.mark.parametrize("strategy, block", [(None, 8 * 1024), ("stripes", 20 * 1024)])
def test_kws_segmented_firmware_equals_host(strategy, block, tmp_path):
    g = load_model(model_path("tiny_kws_dscnn_int8"))
    t = g.tensors[g.inputs[0]]
    x = np.random.default_rng(11).integers(-128, 128, size=t.shape).astype(t.dtype)
    np.save(tmp_path / "x.npy", x)
    args = ["firmware", "kws", "--profile", "mps2-an386", "--segments", str(block), "--run", "--inputs",
            str(tmp_path / "x.npy"), "-o", str(tmp_path / "fw"), "--json"]
    if strategy:
        args += ["--strategy", strategy]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    seg = d["segments"]
    assert seg is not None and seg["count"] >= 3 and seg["block_bytes"] <= block
    assert "divided automatically" in d["segment_note"]
    if strategy:
        assert d["strategy"] == strategy
        # stripe regions are operators of the firmware graph, each loaded whole as (part of) a segment
        m = re.search(r"strategy stripes: (\d+) stripe region\(s\)", "\n".join(d["pipeline"]))
        assert m and int(m.group(1)) >= 1, d["pipeline"]
    host = np.asarray(g.run(x)).reshape(-1)
    fw = np.asarray(d["outputs"][0]).reshape(-1)
    assert fw.size == host.size and [int(v) for v in fw] == [int(v) for v in host]
