"""The house rules of csrc/src/ (tools/check_c_layout.py, rooms in pyembed/_csrc.py):
calls and includes flow only downward (graph -> pipeline / kernels -> core), no
circle between files or kernel families, no .c file over 1,200 lines. Each rule
is shown to fire on a tree with a planted violation."""
import pathlib
import re
import runpy
import shutil

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHECK = runpy.run_path(str(ROOT / "tools" / "check_c_layout.py"))
CACHE = ROOT / "tools" / "build" / "c_layout"

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")


def _check(csrc, toolchains=("host",)):
    return CHECK["check"](csrc, toolchains=toolchains, cache=CACHE)


def test_rooms_calls_includes_and_sizes_hold():
    tcs = ("host", "cortex-m4") if shutil.which("arm-none-eabi-gcc") else ("host",)
    bad = _check(ROOT / "csrc", tcs)
    assert bad == [], "\n".join(bad)


@pytest.fixture
def tree(tmp_path):
    dst = tmp_path / "csrc"
    shutil.copytree(ROOT / "csrc", dst, ignore=shutil.ignore_patterns("tests"))
    return dst


def test_a_kernel_calling_the_graph_runtime_is_refused(tree):
    f = tree / "src" / "kernels" / "eltwise" / "pe_softmax.c"
    f.write_text(f.read_text() + '\n#include "pyembed/pe_graph.h"\n'
                 "pe_status pe_planted_upward(const pe_graph *g);\n"
                 "pe_status pe_planted_upward(const pe_graph *g)\n{\n    return pe_graph_check(g, NULL, NULL);\n}\n")
    h = tree / "include" / "pyembed" / "pe_gather.h"
    h.write_text(h.read_text().replace('#include "pe_types.h"', '#include "pe_types.h"\n#include "pe_graph.h"', 1))
    bad = _check(tree)
    assert any("pe_softmax.c" in b and "includes pyembed/pe_graph.h (room graph) from room kernels" in b
               for b in bad), bad
    assert any("include/pyembed/pe_gather.h" in b and "includes pe_graph.h (room graph) from room kernels" in b
               for b in bad), bad
    assert any("pe_softmax.c (room kernels) calls pe_graph_check" in b for b in bad), bad


def test_a_circle_between_files_is_refused(tree):
    # pe_graph.c already calls into pe_graph_tensors.c; a call back closes a circle
    f = tree / "src" / "graph" / "pe_graph_tensors.c"
    f.write_text(f.read_text() + "\npe_status pe_planted_back(const pe_graph *g, const pe_context *a);\n"
                 "pe_status pe_planted_back(const pe_graph *g, const pe_context *a)\n{\n"
                 "    return pe_graph_invoke(g, a);\n}\n")
    bad = _check(tree)
    assert any("circle" in b and "pe_graph.c" in b and "pe_graph_tensors.c" in b for b in bad), bad


def test_a_long_file_and_a_file_outside_the_rooms_are_refused(tree):
    f = tree / "src" / "kernels" / "eltwise" / "pe_softmax.c"
    f.write_text(f.read_text() + "/* filler */\n" * 1200)
    (tree / "src" / "pe_stray.c").write_text("int pe_stray(void);\nint pe_stray(void) { return 0; }\n")
    bad = _check(tree)
    assert any("pe_softmax.c" in b and "lines (at most 1200)" in b for b in bad), bad
    assert any("pe_stray.c: not in a room" in b for b in bad), bad


def test_a_model_operator_table_names_only_the_model_runners(tmp_path):
    """pyembed.codegen.optable: the generated table references exactly the runners of
    the types asked for (so the linker can drop the rest), read from the full table."""
    import subprocess

    from pyembed.codegen import optable
    from pyembed.errors import UnsupportedError
    src = tmp_path / "model_ops.c"
    src.write_text(optable.op_table_source(["PE_GOP_FULLY_CONNECTED", "PE_GOP_SOFTMAX"], model_name="m */ x"))
    obj = tmp_path / "model_ops.o"
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", f"-I{ROOT / 'csrc' / 'include'}",
                    "-c", str(src), "-o", str(obj)], check=True)
    nm = subprocess.run(["nm", str(obj)], check=True, capture_output=True, text=True).stdout
    undefined = sorted(line.split()[-1] for line in nm.splitlines()
                       if line.split()[0] == "U" and line.split()[-1].startswith("pe_"))
    assert undefined == ["pe_graph_run_fc", "pe_graph_run_softmax"]
    # every runner the full table names is declared for applications
    runners, rows = optable._full_table(str(ROOT / "csrc"))
    declared = (ROOT / "csrc" / "include" / "pyembed" / "pe_graph_runners.h").read_text() + \
        (ROOT / "csrc" / "include" / "pyembed" / "pe_fc_w16.h").read_text()
    assert all(f" {fn}(" in declared for fn in set(runners.values()) | set(rows.values()))
    assert len(runners) > 60
    with pytest.raises(UnsupportedError, match="PE_GOP_NOT_A_TYPE"):
        optable.op_table_source(["PE_GOP_NOT_A_TYPE"])


def test_a_model_stripe_kind_table_names_only_the_kinds_its_regions_use(tmp_path):
    """optable.stripe_kinds_in reads the kinds from the regions' parameter words of a generated
    model_graph.c; the generated kind table references only those kinds' entry points (read
    from the full table, csrc/src/pipeline/pe_stripe_kinds.c), and a kind it leaves out is
    denied to the executor (pe_stripe_kind_linked)."""
    import subprocess

    from pyembed.codegen import optable
    from pyembed.errors import UnsupportedError
    # two regions: conv (0) + add (4), and pool (3); header words: version, layers, stripe, block, flags
    layer = lambda kind: [kind] + [0] * 31   # noqa: E731
    r0 = [2, 2, 8, 8, 0] + layer(0) + layer(4)
    r1 = [2, 1, 8, 8, 0] + layer(3)
    graph = "".join(f"static const int32_t m_op{k}_words[{len(w)}] = {{\n    {', '.join(map(str, w))},\n}};\n"
                    for k, w in enumerate((r0, r1)))
    graph += "".join(f"    {{ .type = PE_GOP_STRIPE_REGION, .inputs = m_op{k}_in, .num_inputs = 1, .outputs = NULL, "
                     f".num_outputs = 1, .scratch_offset = 0, .scratch_size = 64, .params = m_op{k}_words, "
                     f".num_params = {len(w)} }}, /* operator {k} */\n" for k, w in enumerate((r0, r1)))
    assert optable.stripe_kinds_in(graph) == [0, 3, 4]
    src = tmp_path / "model_ops.c"
    src.write_text(optable.op_table_source(["PE_GOP_STRIPE_REGION"], stripe_kinds=optable.stripe_kinds_in(graph)))
    obj = tmp_path / "model_ops.o"
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", f"-I{ROOT / 'csrc' / 'include'}",
                    "-c", str(src), "-o", str(obj)], check=True)
    nm = subprocess.run(["nm", str(obj)], check=True, capture_output=True, text=True).stdout
    undefined = sorted(line.split()[-1] for line in nm.splitlines()
                       if line.split()[0] == "U" and line.split()[-1].startswith("pe_stripe"))
    assert undefined == ["pe_stripe_compute_add", "pe_stripe_compute_conv", "pe_stripe_compute_pool"]
    text = src.read_text()
    linked = text[text.index("int pe_stripe_kind_linked("):text.index("void pe_stripe_compute_kind(")]
    assert "case PE_STRIPE_CONV:" in linked and "case PE_STRIPE_DEPTHWISE:" not in linked
    # every kind of pe_stripe.h's enum has an entry point in the full table
    entry, names = optable._stripe_table(str(ROOT / "csrc"))
    enum = (ROOT / "csrc" / "include" / "pyembed" / "pe_stripe.h").read_text()
    assert sorted(names.values()) == sorted(set(re.findall(r"\b(PE_STRIPE_[A-Z0-9_]+) = \d+", enum)))
    with pytest.raises(UnsupportedError, match="99"):
        optable.stripe_table_source([99])


def test_a_one_channel_depthwise_model_links_only_the_c1_kernel():
    """A graph whose depthwise operators all read one channel in the gather form
    (micro_speech) gets pe_graph_run_dwconv_c1 in its table; one more gathered
    depthwise with more channels the gather runner that also calls that kernel;
    one in the reverse form the full runner; none the plain gather runner."""
    from pyembed.codegen import optable

    def graph_src(ops):
        tensors = "\n".join(f"    {{ NULL, 0, 16, {{1, 4, 4, {c}}}, PE_DT_INT8 }}, /* tensor {k} */"
                            for k, c in enumerate([1, 8, 2, 4]))
        arrays = "".join(f"static const int32_t m_op{k}_in[1] = {{\n    {t},\n}};\n" for k, (t, _) in enumerate(ops))
        lines = "\n".join(f"    {{ .type = PE_GOP_DEPTHWISE_CONV_2D, .inputs = m_op{k}_in, .num_inputs = 1, "
                          f".outputs = NULL, .num_outputs = 1, .scratch_offset = -1, .scratch_size = {s}, }},"
                          for k, (_, s) in enumerate(ops))
        return f"{arrays}\nstatic const pe_graph_tensor t[4] = {{\n{tensors}\n}};\n{lines}\n"

    def runner(ops):
        src = optable.op_table_source(optable.op_uses(graph_src(ops)))
        return src.split("case PE_GOP_DEPTHWISE_CONV_2D:\n        return ")[1].split(";")[0]

    assert optable.op_uses(graph_src([(0, 0)])) == {"PE_GOP_DEPTHWISE_CONV_2D": {"c1", "gather"}}
    assert runner([(0, 0)]) == "pe_graph_run_dwconv_c1"
    assert runner([(0, 0), (2, 0)]) == "pe_graph_run_dwconv_gather_c1"   # tensor 2 has 2 channels
    assert runner([(0, 0), (0, 64)]) == "pe_graph_run_conv"            # one in the reverse form
    assert runner([(2, 0)]) == "pe_graph_run_dwconv_gather"
    assert runner([(2, 0), (2, 64)]) == "pe_graph_run_dwconv_both"   # both forms, depthwise kernels only
    # a one-channel depthwise in the reverse form runs the reverse kernel: no c1 kernel linked
    assert optable.op_uses(graph_src([(0, 64)])) == {"PE_GOP_DEPTHWISE_CONV_2D": {"any", "rev"}}
    assert runner([(0, 64), (2, 0)]) == "pe_graph_run_dwconv_both"
    # ... nor in a gather-form row whose scratch is a work block (gather_rows)
    assert runner([(0, 64), (0, 0)]) == "pe_graph_run_conv"
