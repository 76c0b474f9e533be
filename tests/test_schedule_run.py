"""`pyembed schedule ... --run WINDOWS`: the real kernels on the bundled mix."""
import re

from click.testing import CliRunner

from pyembed.cli import main


def test_schedule_run_executes_kernels(tmp_path):
    r = CliRunner().invoke(main, ["schedule", "--priority", "tiny_kws_dscnn_int8", "--low", "tiny_ic_resnet8_int8",
                                  "--low", "tiny_vww_mobilenetv1_96_int8:max", "--profile", "stm32f746",
                                  "--window-ms", "50", "--windows", "5", "--run", "2", "-o", str(tmp_path / "s")])
    assert r.exit_code == 0, r.output
    # the priority model runs every window: 2 inferences, both equal to Graph.run of the same input
    m = re.search(r"tiny_kws_dscnn_int8: (\d+) inference\(s\) executed, outputs (\d+)/(\d+) equal to Graph.run; "
                  r"(\d+) item run\(s\), predicted ([\d,]+) cycles, counted ([\d,]+)", r.output)
    assert m, r.output
    assert int(m.group(1)) == 2 and int(m.group(2)) == 2
    assert int(m.group(5).replace(",", "")) > 0 and int(m.group(6).replace(",", "")) > 0
    assert re.search(r"intermediates: \d+ fetched, \d+ stored, 0 mismatch\(es\)", r.output)
    assert "simulator, not hardware" in r.output
    # one inference per model on firmware_sim: a cycle count and outputs bit-exact with Graph.run
    sims = re.findall(r"one inference: timing model ([\d,]+) cycles, simulator \(firmware_sim, real kernels on "
                      r"simulated memory\) ([\d,]+) \(([+-][\d.]+) %\), outputs (bit-exact|DIFFER)", r.output)
    assert len(sims) == 3 and all(x[3] == "bit-exact" and int(x[1].replace(",", "")) > 0 for x in sims)
