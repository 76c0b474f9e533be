"""The operator table a firmware links: only the runners its model uses.

The C graph runtime's core (csrc/src/graph/pe_graph.c) asks
pe_graph_runner_for(type) for each operator's runner and does not define it.
The full table (csrc/src/graph/pe_graph_ops.c) names every runner; a
generated firmware links model/model_ops.c instead, written here from the
operator types its graph table uses, so that the linker's --gc-sections drops
every runner and kernel the model never calls.

The type -> runner pairs are read from the full table itself, so the two
tables cannot disagree: a type the full table does not run cannot be asked for.
"""
import re
from functools import lru_cache
from pathlib import Path

from pyembed import _csrc
from pyembed.codegen.escape import c_comment
from pyembed.errors import UnsupportedError

GENERATED_NAME = "model_ops.c"


@lru_cache(maxsize=4)
def _full_table(root):
    """({enum name: runner}, {enum name: rows runner}) parsed from pe_graph_ops.c."""
    text = (Path(root) / "src" / "graph" / _csrc.FULL_TABLE).read_text()
    runners, rows = {}, {}

    def parse(body, out):
        pending = []
        for tok in re.finditer(r"case\s+(PE_GOP_\w+)\s*:|return\s+(pe_graph_run_\w+)\s*;", body):
            if tok.group(1):
                pending.append(tok.group(1))
            else:
                for name in pending:
                    out[name] = tok.group(2)
                pending = []

    a = text.index("pe_graph_runner pe_graph_runner_for(")
    b = text.index("pe_graph_rows_runner pe_graph_rows_runner_for(")
    parse(text[a:b], runners)
    m = re.search(r"type\s*==\s*(PE_GOP_\w+)\s*\?\s*(pe_graph_run_\w+)", text[b:])
    if m:
        rows[m.group(1)] = m.group(2)
    if not runners:
        raise RuntimeError(f"no runner found in {_csrc.FULL_TABLE}")
    return runners, rows


# Convolutions run in one of two kernel forms, chosen per operator by its plan
# (a scratch region: the reverse kernels; none: the gather kernels). A table
# names the runner of the one form its model's operators of that type use, so
# the other form's kernels are not linked (pe_graph_runners.h).
NARROW = {
    "PE_GOP_CONV_2D": {"rev": "pe_graph_run_conv2d_rev", "gather": "pe_graph_run_conv2d_gather",
                       "both": "pe_graph_run_conv2d_both"},
    "PE_GOP_DEPTHWISE_CONV_2D": {"rev": "pe_graph_run_dwconv_rev", "gather": "pe_graph_run_dwconv_gather",
                                 "both": "pe_graph_run_dwconv_both"},
}
# Depthwise operators that all read a one-channel input (micro_speech's) in the gather form run on
# the kernel made for that shape (pe_depthwise_conv2d_c1_s8, which the full runner calls for them in
# that form): neither conv form's kernels are linked.
C1_RUNNER = "pe_graph_run_dwconv_c1"
# ... and beside depthwise operators of more channels, all gathered: the gather runner that also
# calls that kernel (the plain gather runner leaves it out: no flash for models without such ops).
C1_GATHER_RUNNER = "pe_graph_run_dwconv_gather_c1"


@lru_cache(maxsize=4)
def _stripe_table(root):
    """({kind value: entry point}, {kind value: enum name}) of the stripe executor's full kind
    table (src/pipeline/pe_stripe_kinds.c, the values from pe_stripe.h's pe_stripe_op)."""
    root = Path(root)
    text = (root / "src" / "pipeline" / _csrc.STRIPE_TABLE).read_text()
    enum = (root / "include" / "pyembed" / "pe_stripe.h").read_text()
    values = {m.group(1): int(m.group(2)) for m in re.finditer(r"\b(PE_STRIPE_[A-Z0-9_]+)\s*=\s*(\d+)", enum)}
    body = text[text.index("void pe_stripe_compute_kind("):]
    entry, pending = {}, []
    for tok in re.finditer(r"case\s+(PE_STRIPE_\w+)\s*:|(pe_stripe_compute_\w+)\s*\(", body):
        if tok.group(1):
            pending.append(tok.group(1))
        elif pending:
            for name in pending:
                entry[values[name]] = tok.group(2)
            pending = []
    if not entry:
        raise RuntimeError(f"no stripe kind found in {_csrc.STRIPE_TABLE}")
    return entry, {v: k for k, v in values.items() if v in entry}


# the words of a region's header and of each layer (pe_pipeline.h; pyembed.passes.pipeline,
# pyembed.passes.region_words): a layer's first word is its kind
_REGION_HEADER_WORDS, _REGION_LAYER_WORDS = 5, 32


def stripe_kinds_in(graph_source):
    """The stripe layer kinds (pe_stripe_op values) of every PE_STRIPE_REGION operator of a
    generated model_graph.c, read from the regions' parameter words, sorted."""
    arrays = {m.group(1): [int(v) for v in re.findall(r"-?\d+", m.group(2))]
              for m in re.finditer(r"static const int32_t (\w+)\[\d+\] = \{([^}]*)\}", graph_source)}
    kinds = set()
    for m in re.finditer(r"\{ \.type = PE_GOP_STRIPE_REGION,[^\n]*?\.params = (\w+)", graph_source):
        words = arrays.get(m.group(1))
        if not words or len(words) < _REGION_HEADER_WORDS:
            raise RuntimeError(f"stripe region parameters {m.group(1)} not found in the graph source")
        for layer in range(words[1]):
            k = _REGION_HEADER_WORDS + layer * _REGION_LAYER_WORDS
            if k >= len(words):
                raise RuntimeError(f"stripe region parameters {m.group(1)} end before layer {layer}")
            kinds.add(words[k])
    return sorted(kinds)


def stripe_table_source(kinds, root=None):
    """C source of pe_stripe_kind_linked / pe_stripe_compute_kind (pe_stripe_kinds.h) naming only
    the entry points of kinds (pe_stripe_op values; none: a model without stripe regions)."""
    entry, names = _stripe_table(str(root or _csrc.csrc_dir()))
    unknown = sorted(set(kinds) - set(entry))
    if unknown:
        raise UnsupportedError(f"stripe layer kind(s) {unknown} have no entry point in the C runtime")
    by_fn = {}
    for k in sorted(set(kinds)):
        by_fn.setdefault(entry[k], []).append(names[k])
    cases = "".join("".join(f"    case {n}:\n" for n in ns) + f"        {fn}(R, L, o, x0, x1);\n        break;\n"
                    for fn, ns in sorted(by_fn.items()))
    linked = "".join(f"    case {names[k]}:\n" for k in sorted(set(kinds)))
    linked_body = (f"    switch (kind) {{\n{linked}        return 1;\n    default:\n        return 0;\n    }}\n"
                   if kinds else "    (void)kind;\n    return 0;\n")
    compute_body = (f"    switch (kind) {{\n{cases}    default:\n        break;\n    }}\n" if kinds else
                    "    (void)R;\n    (void)kind;\n    (void)L;\n    (void)o;\n    (void)x0;\n    (void)x1;\n")
    return f"""/* the stripe executor's layer kinds this model's regions use, and no other (pe_stripe_kinds.h) */
int pe_stripe_kind_linked(int32_t kind)
{{
{linked_body}}}

void pe_stripe_compute_kind(struct pe_stripe_run_s *R, int32_t kind, int32_t L, int32_t o, int32_t x0, int32_t x1)
{{
{compute_body}}}

"""


def op_types_in(graph_source):
    """The operator type names (PE_GOP_...) a generated model_graph.c uses, sorted."""
    return sorted(set(re.findall(r"\.type = (PE_GOP_\w+)", graph_source)))


def _input_channels(graph_source):
    """{op array name: channels of its first input} from a generated model_graph.c (the
    tensor table's rows in order, each operator's input array by name); operators whose
    first input cannot be read are left out."""
    rows = re.findall(r"^\s*\{ [^\n]*?\{(-?\d+), (-?\d+), (-?\d+), (-?\d+)\}, PE_DT_\w+ \}, /\* tensor",
                      graph_source, re.M)
    chans = {}
    for m in re.finditer(r"static const int32_t (\w+_in)\[\d+\] = \{\s*(-?\d+)", graph_source):
        k = int(m.group(2))
        if 0 <= k < len(rows):
            chans[m.group(1)] = int(rows[k][3])
    return chans


def op_uses(graph_source, gather_rows=()):
    """{type name: set of kernel forms} of a generated model_graph.c: "rev" / "gather" for the
    convolution types (by each operator's scratch size: none runs the gather form; and the
    operator table rows in gather_rows, whose scratch is a gather work block below the reverse
    kernel's minimum, pe_graph.h), and for DEPTHWISE_CONV_2D also "c1" (in the gather form)
    (its input has one channel: pe_graph_run_dwconv_c1 runs it) or "any" (it has more, or
    they cannot be read); an empty set for the other types."""
    uses = {}
    gather_rows = set(gather_rows)
    chans = _input_channels(graph_source)
    for k, m in enumerate(re.finditer(r"\{ \.type = (PE_GOP_\w+),[^\n]*?\.inputs = (\w+),[^\n]*?"
                                      r"\.scratch_size = (-?\d+)", graph_source)):
        forms = uses.setdefault(m.group(1), set())
        gather = int(m.group(3)) == 0 or k in gather_rows
        if m.group(1) in NARROW:
            forms.add("gather" if gather else "rev")
        if m.group(1) == "PE_GOP_DEPTHWISE_CONV_2D":
            # the one-channel kernel runs the one-channel operators with no scratch (the runtime's
            # rule, is_c1 in pe_run_builtin.c); one in the reverse form, or given a gather work
            # block, runs the conv kernels, and needs no c1 kernel linked
            forms.add("c1" if int(m.group(3)) == 0 and chans.get(m.group(2)) == 1 else "any")
    for t in op_types_in(graph_source):
        uses.setdefault(t, set())
    return uses


def op_table_source(type_names, rows=False, model_name="model", root=None, stripe_kinds=()):
    """C source of pe_graph_runner_for / pe_graph_rows_runner_for naming only the runners of
    type_names (a list of type names, or op_uses' {type: forms}: a convolution type whose
    operators all use one kernel form gets that form's runner; rows: also the row-source runner
    where one exists, for a streamed input), and of the stripe executor's kind table naming
    only stripe_kinds (stripe_kinds_in)."""
    runners, row_runners = _full_table(str(root or _csrc.csrc_dir()))
    uses = type_names if isinstance(type_names, dict) else {t: set() for t in type_names}
    type_names = sorted(uses)
    unknown = [t for t in type_names if t not in runners]
    if unknown:
        raise UnsupportedError(f"operator type(s) {', '.join(unknown)} have no runner in the C runtime")
    by_runner = {}
    for t in type_names:
        forms = uses[t]
        kernel_forms = forms & {"rev", "gather"}
        if t == "PE_GOP_DEPTHWISE_CONV_2D" and forms == {"c1", "gather"}:
            fn = C1_RUNNER
        elif t == "PE_GOP_DEPTHWISE_CONV_2D" and forms == {"c1", "any", "gather"}:
            fn = C1_GATHER_RUNNER
        elif t in NARROW and len(kernel_forms) == 1:
            fn = NARROW[t][next(iter(kernel_forms))]
        elif t in NARROW and len(kernel_forms) == 2 and "c1" not in forms:
            fn = NARROW[t]["both"]   # both forms of this type's kernels, not the other type's
        else:
            fn = runners[t]
        if fn == "pe_graph_run_conv" and "c1" not in uses.get("PE_GOP_DEPTHWISE_CONV_2D", set()):
            fn = "pe_graph_run_conv_no_c1"   # (no one-channel depthwise: its kernel left out)
        by_runner.setdefault(fn, []).append(t)
    cases = []
    for fn, types in sorted(by_runner.items()):
        cases.append("".join(f"    case {t}:\n" for t in types) + f"        return {fn};\n")
    row_cases = [(t, row_runners[t]) for t in sorted(type_names) if rows and t in row_runners]
    if row_cases:
        rows_body = "".join(f"    if (type == {t}) {{\n        return {fn};\n    }}\n" for t, fn in row_cases)
        rows_body += "    return NULL;\n"
    else:
        rows_body = "    (void)type;\n    return NULL;\n"
    return f"""/*
 * {GENERATED_NAME} - the operator table of model "{c_comment(model_name)}": the runners of
 * the {len(type_names)} operator type(s) its graph uses, and no other (pe_graph_runners.h).
 * Generated by pyembed; do not edit. Linked instead of the runtime's full tables
 * (pe_graph_ops.c, pe_stripe_kinds.c), so --gc-sections leaves out every kernel the
 * model does not call.
 */
#include <stddef.h>

#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_fc_w16.h"
#include "pyembed/pe_stripe_kinds.h"

{stripe_table_source(stripe_kinds, root)}pe_graph_runner pe_graph_runner_for(pe_graph_op_type type)
{{
    switch (type) {{
{"".join(cases)}    default:
        return NULL;
    }}
}}

pe_graph_rows_runner pe_graph_rows_runner_for(pe_graph_op_type type)
{{
{rows_body}}}
"""

