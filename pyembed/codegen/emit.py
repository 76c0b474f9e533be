"""C emitters: the static memory plan as a header, the model's constants as
flash arrays, and plan.json, written side by side by write_plan_outputs.

* memplan.h     region sizes, arena size, the region / offset / size of every
                buffer (one macro each and a table), tensor -> buffer and
                tensor -> offset tables, and the per-step allocate / free table
                (compressed rows: step k allocates alloc[alloc_index[k] ..
                alloc_index[k + 1]]).
* model_data.h  extern declarations of the constant arrays, with the flash
  model_data.c  placement attribute (section configurable), weights, biases,
                quantization parameters (scale, zero point per tensor) and the
                integer kernel parameters of every operator (per-channel
                multipliers and shifts, ...) as const arrays.
* plan.json     pyembed.plan.planjson.

Everything is C99 that compiles warning-free with -std=c99 -Wall -Wextra
-Werror -pedantic on gcc and arm-none-eabi-gcc. Arrays of length zero do not
exist in C, so an empty table gets one dummy element and its count says 0.
"""
import math
import os
import re

import numpy as np

from pyembed.codegen.escape import c_comment, c_string, check_identifier, check_section
from pyembed.errors import ArgumentError, UnsupportedError

GENERATOR = "pyembed"

_C_TYPES = {
    np.dtype(np.int8): "int8_t", np.dtype(np.uint8): "uint8_t", np.dtype(np.int16): "int16_t",
    np.dtype(np.uint16): "uint16_t", np.dtype(np.int32): "int32_t", np.dtype(np.uint32): "uint32_t",
    np.dtype(np.int64): "int64_t", np.dtype(np.uint64): "uint64_t", np.dtype(np.float32): "float",
    np.dtype(np.float64): "double", np.dtype(np.bool_): "uint8_t",
}

# dtype codes in the tensor table (model_data.h documents them)
_DTYPE_CODES = {"int8_t": 1, "uint8_t": 2, "int16_t": 3, "uint16_t": 4, "int32_t": 5, "uint32_t": 6,
                "int64_t": 7, "uint64_t": 8, "float": 9, "double": 10}


def _version():
    try:
        from pyembed import __version__
        return __version__
    except ImportError:  # pragma: no cover
        return "?"


def c_identifier(name, prefix=""):
    s = re.sub(r"[^0-9A-Za-z_]", "_", str(name))
    s = re.sub(r"_+", "_", s).strip("_")
    if not s or s[0].isdigit():
        s = "x" + s
    return prefix + s


def _guard(name):
    return c_identifier(name).upper()


def _unique_guards(names, what):
    """_guard of each name, made unique by the index where two names map to the
    same identifier (a-b and a_b), so no macro is defined twice."""
    guards = [_guard(n) for n in names]
    seen = {}
    for g in guards:
        seen[g] = seen.get(g, 0) + 1
    return [f"{g}_{what.upper()}{i}" if seen[g] > 1 else g for i, g in enumerate(guards)]


def _rows(values, per_line=16, fmt=str):
    vals = [fmt(v) for v in values]
    if not vals:
        vals = ["0"]
    lines = []
    for i in range(0, len(vals), per_line):
        lines.append("    " + ", ".join(vals[i:i + per_line]) + ",")
    return "\n".join(lines)


def _int_literal(v, ctype):
    v = int(v)
    if ctype == "int64_t":
        return "(INT64_C(-9223372036854775807) - 1)" if v == -2**63 else f"INT64_C({v})"
    if ctype == "uint64_t":
        return f"UINT64_C({v})"
    if ctype == "int32_t" and v == -2**31:
        return "(-2147483647 - 1)"
    if ctype == "uint32_t":
        return f"{v}u"
    return str(v)


def _float_literal(v, ctype):
    v = float(v)
    if not math.isfinite(v):
        raise UnsupportedError(f"cannot emit the non-finite constant {v!r} as C")
    s = repr(v) if ctype == "double" else "%.9g" % float(np.float32(v))  # 9 digits round-trip a float
    if "e" not in s and "." not in s:
        s += ".0"
    return s + ("f" if ctype == "float" else "")


def c_array(ctype, name, values, attr="", static=False):
    """`[static] const ctype name[n] attr = {...};` for a flat sequence."""
    values = np.asarray(values).ravel()
    if ctype in ("float", "double"):
        fmt = (lambda v: _float_literal(v, ctype))
    else:
        fmt = (lambda v: _int_literal(v, ctype))
    n = max(len(values), 1)
    head = f"{'static ' if static else ''}const {ctype} {name}[{n}]{(' ' + attr) if attr else ''}"
    return f"{head} = {{\n{_rows(values.tolist(), 12 if ctype in ('float', 'double') else 16, fmt)}\n}};\n"


# -- memplan.h -----------------------------------------------------------------

def _require_plan(plan):
    from pyembed.plan import Plan
    if not isinstance(plan, Plan):
        raise ArgumentError(f"plan: expected a pyembed.plan.Plan, got {type(plan).__name__}")


def memplan_header(plan, num_tensors=None, guard="PE_MEMPLAN_H"):
    """The plan as a C99 header (text)."""
    _require_plan(plan)
    B = plan.buffers
    used = plan.region_used()
    nt = num_tensors if num_tensors is not None else (max(plan.tensor_buffer, default=-1) + 1)
    steps = plan.step_table()
    lb = plan.problem.lower_bound()
    out = []
    out.append(f"""/*
 * memplan.h - static memory plan for model "{c_comment(plan.graph_name)}".
 * Generated by {GENERATOR} {_version()} (placement: {c_comment(plan.algorithm)}); do not edit, regenerate.
 *
 * {len(B)} RAM buffers over {plan.problem.num_steps} steps in {len(plan.regions)} region(s);
 * arena {plan.arena_size} B, liveness lower bound {lb} B, no reuse {sum(b.aligned_size for b in B)} B.
 * Offsets are in bytes from the start of the buffer's region (regions are
 * {B[0].alignment if B else 16}-byte aligned by the linker script / arena declaration).
 * Step k runs operator pe_plan_step_op[k]; buffers alloc[alloc_index[k] ..
 * alloc_index[k + 1]) become live at step k, free[free_index[k] ..
 * free_index[k + 1]) are dead after it. A proven overlap lets an operator's
 * output start inside its input (see plan.json "overlaps").
 */
#ifndef {guard}
#define {guard}

#include <stdint.h>

#define PE_PLAN_MODEL {c_string(plan.graph_name)}
#define PE_PLAN_ALIGNMENT {B[0].alignment if B else 16}
#define PE_PLAN_NUM_REGIONS {len(plan.regions)}
#define PE_PLAN_NUM_BUFFERS {len(B)}
#define PE_PLAN_NUM_STEPS {plan.problem.num_steps}
#define PE_PLAN_NUM_TENSORS {nt}
#define PE_PLAN_ARENA_SIZE {plan.arena_size}u
#define PE_PLAN_LOWER_BOUND {lb}u
#define PE_PLAN_FLASH_SIZE {plan.flash_size}u
""")
    out.append("/* regions: index, size (capacity; bytes used when unbounded), bytes used */")
    region_guards = _unique_guards([r.name for r in plan.regions], "region")
    for k, r in enumerate(plan.regions):
        R = region_guards[k]
        cap = r.size if r.size is not None else used[r.name]
        out.append(f"#define PE_PLAN_REGION_{R} {k}")
        out.append(f"#define PE_PLAN_REGION_{R}_SIZE {cap}u")
        out.append(f"#define PE_PLAN_REGION_{R}_USED {used[r.name]}u")
        out.append(f"#define PE_PLAN_REGION_{R}_BASE 0x{r.base:08x}u")
    out.append("")
    out.append("/* buffers: region index, offset in it, size in bytes */")
    buffer_guards = _unique_guards([b.name for b in B], "buffer")
    for i, b in enumerate(B):
        r, off = plan.placement[i]
        N = buffer_guards[i]
        out.append(f"#define PE_BUF_{N}_REGION {r}")
        out.append(f"#define PE_BUF_{N}_OFFSET {off}u")
        out.append(f"#define PE_BUF_{N}_SIZE {b.size}u")
    out.append("""
#ifndef PE_PLAN_TYPES_DEFINED
#define PE_PLAN_TYPES_DEFINED
typedef struct {
    uint8_t region;   /* index into the regions above */
    uint8_t kind;     /* PE_PLAN_KIND_* */
    uint32_t offset;  /* bytes from the start of the region */
    uint32_t size;    /* bytes */
    int32_t first;    /* first step the buffer is live */
    int32_t last;     /* last step (inclusive) */
} pe_plan_buffer;
#endif
""")
    from pyembed.plan.core import KINDS
    for k, kind in enumerate(KINDS):
        out.append(f"#define PE_PLAN_KIND_{kind.upper()} {k}")
    out.append("")
    rows = []
    for i, b in enumerate(B):
        r, off = plan.placement[i]
        rows.append(f"    {{{r}, {KINDS.index(b.kind)}, {off}u, {b.size}u, {b.first}, {b.last}}}, /* {c_comment(b.name)} */")
    if not rows:
        rows.append("    {0, 0, 0u, 0u, 0, 0},")
    out.append(f"static const pe_plan_buffer pe_plan_buffers[{max(len(B), 1)}] = {{\n" + "\n".join(rows) + "\n};\n")
    tb = [plan.tensor_buffer.get(t, -1) for t in range(nt)]
    toff = [plan.placement[b][1] if b >= 0 else -1 for b in tb]
    treg = [plan.placement[b][0] if b >= 0 else -1 for b in tb]
    out.append("/* per graph tensor: its buffer, region and offset; -1 for constants (flash) */")
    out.append(c_array("int32_t", "pe_plan_tensor_buffer", tb, static=True))
    out.append(c_array("int32_t", "pe_plan_tensor_region", treg, static=True))
    out.append(c_array("int32_t", "pe_plan_tensor_offset", toff, static=True))
    order = [op if op is not None else -1 for _, op, _, _, _ in steps]
    alloc_index, alloc, free_index, free = [0], [], [0], []
    for _, _, a, f, _ in steps:
        alloc += a
        free += f
        alloc_index.append(len(alloc))
        free_index.append(len(free))
    out.append("/* the per-step table */")
    out.append(c_array("int32_t", "pe_plan_step_op", order, static=True))
    out.append(c_array("uint32_t", "pe_plan_step_live_bytes", [s[4] for s in steps], static=True))
    out.append(c_array("uint16_t", "pe_plan_alloc_index", alloc_index, static=True))
    out.append(c_array("uint16_t", "pe_plan_alloc", alloc, static=True))
    out.append(c_array("uint16_t", "pe_plan_free_index", free_index, static=True))
    out.append(c_array("uint16_t", "pe_plan_free", free, static=True))
    out.append(f"#endif /* {guard} */\n")
    return "\n".join(out)


# -- model_data.c / .h -----------------------------------------------------------

def _c_type(dtype, what):
    ct = _C_TYPES.get(np.dtype(dtype))
    if ct is None:
        raise UnsupportedError(f"{what}: dtype {np.dtype(dtype)} has no C type in model_data.c")
    return ct


def _is_param_array(v):
    return isinstance(v, np.ndarray) and v.size > 0 and np.issubdtype(v.dtype, np.integer) and v.dtype.itemsize <= 8


def _op_arrays(op):
    """Integer array parameters of an operator (requantization multipliers,
    shifts, ...) as (name, ctype, values)."""
    out = []
    for key in sorted(op.params or {}):
        v = op.params[key]
        if _is_param_array(v):
            out.append((key, _c_type(v.dtype, f"operator {op.index} parameter {key}"), v))
    return out


def model_data(graph, section=".pe_flash", prefix="pe_model"):
    """(header text, source text) for the graph's constants."""
    check_identifier(prefix, "prefix")
    check_section(section, "section")
    P = prefix.upper()
    attr_macro = f"{P}_FLASH_ATTR"
    h, c = [], []
    h.append(f"""/*
 * model_data.h - constants of model "{c_comment(graph.name)}" for flash: weights, biases,
 * quantization parameters and the integer kernel parameters of each operator.
 * Generated by {GENERATOR} {_version()}; do not edit, regenerate.
 *
 * Every array is const and carries {attr_macro}, which places it in the
 * linker section "{section}" and aligns it to 16 bytes under GCC / Clang
 * (define {attr_macro} before including this header to override).
 * {P}_tensor_data[t] points to tensor t's constant data (NULL for activations),
 * {P}_tensor_bytes[t] gives its size and {P}_tensor_dtype[t] its element type:
 * 1 int8, 2 uint8, 3 int16, 4 uint16, 5 int32, 6 uint32, 7 int64, 8 uint64,
 * 9 float, 10 double (0: not a constant).
 */
#ifndef {P}_DATA_H
#define {P}_DATA_H

#include <stddef.h>
#include <stdint.h>

#ifndef {attr_macro}
#if defined(__GNUC__) || defined(__clang__)
#define {attr_macro} __attribute__((section("{section}"), aligned(16)))
#else
#define {attr_macro}
#endif
#endif

#define {P}_NAME {c_string(graph.name)}
#define {P}_NUM_TENSORS {len(graph.tensors)}
#define {P}_NUM_OPERATORS {len(graph.operators)}
#define {P}_WEIGHTS_BYTES {sum(int(t.nbytes) for t in graph.tensors if t.is_constant)}u
""")
    c.append(f"""/*
 * model_data.c - constants of model "{c_comment(graph.name)}" (see model_data.h).
 * Generated by {GENERATOR} {_version()}; do not edit, regenerate.
 */
#include "model_data.h"
""")
    data_names = []
    for t in graph.tensors:
        tname = c_identifier(f"t{t.index}", f"{prefix}_")
        if t.is_constant:
            arr = np.asarray(t.data)
            ct = _c_type(arr.dtype, f"tensor {t.index} ({t.name})")
            n = max(arr.size, 1)
            h.append(f"/* tensor {t.index} '{c_comment(t.name)}': {arr.dtype} {tuple(t.shape)} */")
            h.append(f"extern const {ct} {tname}[{n}];")
            vals = arr.astype(np.uint8) if arr.dtype == np.bool_ else arr
            c.append(c_array(ct, tname, vals, attr=attr_macro))
            data_names.append((tname, int(arr.nbytes), _DTYPE_CODES[ct]))
        else:
            data_names.append((None, 0, 0))
        if t.scale is not None and np.size(t.scale):
            sc = np.asarray(t.scale, dtype=np.float32).ravel()
            zp = np.asarray(t.zero_point if t.zero_point is not None else np.zeros(sc.size), dtype=np.int64).ravel()
            h.append(f"/* tensor {t.index} quantization: real = scale * (q - zero_point), "
                     f"{sc.size} value(s) along axis {t.quant_axis} */")
            h.append(f"#define {P.upper()}_T{t.index}_QUANT_COUNT {sc.size}")
            h.append(f"extern const float {tname}_scale[{sc.size}];")
            h.append(f"extern const int32_t {tname}_zero_point[{max(zp.size, 1)}];")
            c.append(c_array("float", f"{tname}_scale", sc, attr=attr_macro))
            c.append(c_array("int32_t", f"{tname}_zero_point", zp, attr=attr_macro))
    for op in graph.operators:
        for key, ct, v in _op_arrays(op):
            name = c_identifier(f"op{op.index}_{key}", f"{prefix}_")
            h.append(f"/* operator {op.index} ({c_comment(op.type)}) parameter {c_comment(repr(key))}: {v.dtype} {v.shape} */")
            h.append(f"extern const {ct} {name}[{max(v.size, 1)}];")
            c.append(c_array(ct, name, v, attr=attr_macro))
    n = max(len(data_names), 1)
    h.append(f"extern const void *const {prefix}_tensor_data[{n}];")
    h.append(f"extern const uint32_t {prefix}_tensor_bytes[{n}];")
    h.append(f"extern const uint8_t {prefix}_tensor_dtype[{n}];")
    ptrs = [f"(const void *){nm}" if nm else "NULL" for nm, _, _ in data_names] or ["NULL"]
    c.append(f"const void *const {prefix}_tensor_data[{n}] = {{\n" +
             "\n".join(f"    {p}," for p in ptrs) + "\n};\n")
    c.append(c_array("uint32_t", f"{prefix}_tensor_bytes", [b for _, b, _ in data_names]))
    c.append(c_array("uint8_t", f"{prefix}_tensor_dtype", [d for _, _, d in data_names]))
    h.append(f"\n#endif /* {P}_DATA_H */\n")
    return "\n".join(h), "\n".join(c)


# -- model_graph.c / .h: the C graph runtime's tables -------------------------------

_GOP = {"CONV_2D": "PE_GOP_CONV_2D", "DEPTHWISE_CONV_2D": "PE_GOP_DEPTHWISE_CONV_2D",
        "AVERAGE_POOL_2D": "PE_GOP_AVERAGE_POOL_2D", "MAX_POOL_2D": "PE_GOP_MAX_POOL_2D",
        "FULLY_CONNECTED": "PE_GOP_FULLY_CONNECTED", "SOFTMAX": "PE_GOP_SOFTMAX", "RESHAPE": "PE_GOP_RESHAPE",
        "ADD": "PE_GOP_ADD", "MUL": "PE_GOP_MUL", "REQUANTIZE": "PE_GOP_REQUANTIZE",
        "QUANTIZE": "PE_GOP_QUANTIZE", "DEQUANTIZE": "PE_GOP_DEQUANTIZE"}
_GDT = {np.dtype(np.int8): "PE_DT_INT8", np.dtype(np.int16): "PE_DT_INT16", np.dtype(np.int32): "PE_DT_INT32",
        np.dtype(np.float32): "PE_DT_FLOAT32", np.dtype(np.bool_): "PE_DT_BOOL",
        np.dtype(np.uint32): "PE_DT_UINT32", np.dtype(np.uint64): "PE_DT_UINT64",
        np.dtype(np.int64): "PE_DT_INT64"}


def runtime_tables(graph, layout):
    """(tensors, ops) as the C graph runtime takes them: the tables
    pyembed.model.ops.build_runtime hands to the Cython binding, so the emitted C
    and the host run cannot disagree."""
    from pyembed.model import runtime as O
    return O.runtime_tables(graph, layout)


def _op_initializer(spec, prefix, arrays):
    """C99 designated initializer of one pe_graph_op."""
    p = spec["params"]
    kind = spec["kind"]

    def io(name, values):
        cname = f"{prefix}_graph_op{spec['op']}_{name}"
        arrays.append(c_array("int32_t", cname, np.asarray(values, dtype=np.int64).ravel(), static=True))
        return cname

    words = list(p.get("words", ())) if spec.get("c_name") else []
    head = (f"{{ .type = {spec.get('c_name') or _GOP[kind]}, "
            f".inputs = {io('in', spec['inputs']) if spec['inputs'] else 'NULL'}, "
            f".num_inputs = {len(spec['inputs'])}, .outputs = {io('out', spec['outputs'])}, "
            f".num_outputs = {len(spec['outputs'])}, "
            f".scratch_offset = {spec['scratch_offset']}, .scratch_size = {spec['scratch_size']}, "
            f".params = {io('words', words) if words else 'NULL'}, .num_params = {len(words)}")
    if spec.get("c_name"):
        return head + " }"
    act = lambda: f"{{{int(p['act_min'])}, {int(p['act_max'])}}}"  # noqa: E731
    rnd = "PE_ROUND_DOUBLE"

    def ptq(m, s):
        return f"{{{int(m)}, {int(s)}}}"

    def ints(name, values):
        if _is_param_array(values) and np.asarray(values).dtype == np.int32:
            return c_identifier(f"op{spec['op']}_{name}", f"{prefix}_")  # in model_data.c
        cname = f"{prefix}_graph_op{spec['op']}_{name}"
        arrays.append(c_array("int32_t", cname, np.asarray(values, dtype=np.int64).ravel(), static=True))
        return cname

    if kind in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        pad = p["pad"]
        m = ints("multiplier", p["multiplier"])
        sh = ints("shift", p["shift"])
        body = (f".p.conv = {{ .params = {{ .input_offset = {int(p['input_offset'])}, "
                f".output_offset = {int(p['output_offset'])}, .stride = {{{p['stride'][0]}, {p['stride'][1]}}}, "
                f".padding = {{{pad[0]}, {pad[1]}, {pad[2]}, {pad[3]}}}, "
                f".dilation = {{{p['dilation'][0]}, {p['dilation'][1]}}}, .groups = {int(p.get('groups', 1))}, "
                f".ch_mult = {int(p.get('depth_multiplier', 1))}, .activation = {act()}, .rounding = {rnd} }}, "
                f".quant = {{ .quant = {{ {m}, {sh} }}, .count = {len(p['multiplier'])} }} }}")
    elif kind in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        pad = p["pad"]
        body = (f".p.pool = {{ .kind = {'PE_POOL_AVG' if kind == 'AVERAGE_POOL_2D' else 'PE_POOL_MAX'}, "
                f".window = {{{p['filter'][0]}, {p['filter'][1]}}}, .stride = {{{p['stride'][0]}, {p['stride'][1]}}}, "
                f".padding = {{{pad[0]}, {pad[1]}, {pad[2]}, {pad[3]}}}, .activation = {act()}, "
                f".sum_quant = {{0, 0}}, .output_offset = 0 }}")
    elif kind == "FULLY_CONNECTED":
        m = ints("multiplier", p["multiplier"])
        sh = ints("shift", p["shift"])
        body = (f".p.fc = {{ .params = {{ .input_offset = {int(p['input_offset'])}, "
                f".filter_offset = {int(p['filter_offset'])}, .output_offset = {int(p['output_offset'])}, "
                f".per_channel = {1 if len(p['multiplier']) > 1 else 0}, .activation = {act()}, .rounding = {rnd} }}, "
                f".quant = {{ .quant = {{ {m}, {sh} }}, .count = {len(p['multiplier'])} }} }}")
    elif kind == "SOFTMAX":
        body = (f".p.softmax = {{ .mult = {int(p['input_multiplier'])}, .shift = {int(p['input_left_shift'])}, "
                f".diff_min = {int(p['diff_min'])} }}")
    elif kind == "ADD":
        body = (f".p.add = {{ .input1_offset = {int(p['input1_offset'])}, .input2_offset = {int(p['input2_offset'])}, "
                f".output_offset = {int(p['output_offset'])}, .left_shift = {int(p['left_shift'])}, "
                f".input1_quant = {ptq(p['input1_multiplier'], p['input1_shift'])}, "
                f".input2_quant = {ptq(p['input2_multiplier'], p['input2_shift'])}, "
                f".output_quant = {ptq(p['output_multiplier'], p['output_shift'])}, "
                f".activation = {act()}, .rounding = {rnd} }}")
    elif kind == "MUL":
        body = (f".p.mul = {{ .input1_offset = {int(p['input1_offset'])}, .input2_offset = {int(p['input2_offset'])}, "
                f".output_offset = {int(p['output_offset'])}, "
                f".output_quant = {ptq(p['output_multiplier'], p['output_shift'])}, "
                f".activation = {act()}, .rounding = {rnd} }}")
    elif kind == "REQUANTIZE":
        body = (f".p.requant = {{ .input_offset = {int(p['input_offset'])}, "
                f".output_offset = {int(p['output_offset'])}, "
                f".quant = {ptq(p['multiplier'], p['shift'])}, .activation = {act()}, .rounding = {rnd} }}")
    elif kind in ("QUANTIZE", "DEQUANTIZE"):
        body = (f".p.fquant = {{ .scale = {_float_literal(p['scale'], 'float')}, .zero_point = {int(p['zero_point'])}, "
                f".rounding = {'PE_FROUND_EVEN' if p.get('round_half_even') else 'PE_FROUND_AWAY'} }}")
    elif kind == "RESHAPE":
        body = ""
    else:
        raise UnsupportedError(f"operator kind {kind} has no C graph table entry")
    return head + (", " + body if body else "") + " }"


def graph_tables(graph, plan, prefix="pe_model", layout=None, const_data=None, writable=False):
    """(model_graph.h, model_graph.c): the pe_graph tables of graph on the
    plan's arena (regions laid end to end, as Graph.layout_from_plan does,
    unless a Layout is given: the firmware project passes one with the
    regions at their real addresses), constants pointing into model_data.c
    (or, for a tensor in const_data {tensor: C expression}, at that address:
    the firmware's segment block). writable: the tensor table, the operator
    table and the graph in RAM (not const), the first two as {prefix}_tensors /
    {prefix}_ops, and reset_states reading the offsets from the tensor table:
    for the library over several regions, whose pe_model_init relocates the
    offsets once the link has placed the regions (pyembed.codegen.firmware.library)."""
    check_identifier(prefix, "prefix")
    from pyembed.model.validate import validate_graph
    validate_graph(graph)
    graph.check_supported()
    if layout is None:
        layout = graph.layout_from_plan(plan)
    tensors, ops = runtime_tables(graph, layout)
    P = prefix.upper()
    t_index = {tt["tensor"]: k for k, tt in enumerate(tensors)}
    h = f"""/*
 * model_graph.h - model "{c_comment(graph.name)}" as a table for the pyembed C graph runtime
 * (pe_graph.h) on the static arena of memplan.h.
 * Generated by {GENERATOR} {_version()}; do not edit, regenerate.
 *
 *   static uint8_t arena[{P}_ARENA_BYTES] (4-byte aligned at least);
 *   pe_context ctx = {{arena, {P}_ARENA_BYTES, NULL}};
 *   {prefix}_init_states(arena) once (recurrent states, if the model has any),
 *   copy the input to arena + {P}_INPUT0_OFFSET, pe_graph_invoke(&{prefix}_graph, &ctx),
 *   read the output at arena + {P}_OUTPUT0_OFFSET.
 * A streamed input ({P}_INPUT0_STREAMED 1, offset PE_GRAPH_STREAMED) is not in the
 * arena: give its rows through a pe_row_source (pe_stripe.h), e.g. from a camera:
 *   pe_status {prefix}_input_rows(void *user, int32_t row, int32_t col, int32_t n_cols,
 *                                 int8_t *dst)   (write columns [col, col + n_cols) of row `row`,
 *                                                  {P}_INPUT0_W x {P}_INPUT0_C int8 per row, NHWC)
 *   pe_row_source src = {{{prefix}_input_rows, user}};
 *   pe_graph_invoke_rows(&{prefix}_graph, &ctx, &src);
 * The region reading it runs as one stripe: every row is asked for once, in order.
 * A streamed output ({P}_OUTPUT0_STREAMED 1, offset PE_GRAPH_STREAMED) is not in the
 * arena either: the region writing it hands each row, whole and in order, to a pe_row_sink:
 *   pe_status {prefix}_output_rows(void *user, int32_t row, const int8_t *src, int32_t n)
 *                                  (n = {P}_OUTPUT0_W x {P}_OUTPUT0_C int8, NHWC)
 *   pe_row_sink sink = {{{prefix}_output_rows, user}};
 *   pe_graph_invoke_io(&{prefix}_graph, &ctx, &src or NULL, &sink);
 */
#ifndef {P}_GRAPH_H
#define {P}_GRAPH_H

#include "pyembed/pe_graph.h"

#define {P}_ARENA_BYTES {layout.arena_size}
#define {P}_NUM_INPUTS {len(graph.inputs)}
#define {P}_NUM_OUTPUTS {len(graph.outputs)}
"""
    for k, t in enumerate(graph.inputs):
        tt = graph.tensors[t]
        off = "PE_GRAPH_STREAMED" if tt.streamed else layout.tensor_offsets[t]
        h += (f"#define {P}_INPUT{k}_TENSOR {t_index[t]}\n#define {P}_INPUT{k}_OFFSET {off}\n"
              f"#define {P}_INPUT{k}_BYTES {tt.nbytes}\n#define {P}_INPUT{k}_STREAMED {1 if tt.streamed else 0}\n")
        if tt.streamed:
            from pyembed.model.ops.base import dims4
            d = dims4(tt.shape)
            h += f"#define {P}_INPUT{k}_H {d[1]}\n#define {P}_INPUT{k}_W {d[2]}\n#define {P}_INPUT{k}_C {d[3]}\n"
    for k, t in enumerate(graph.outputs):
        tt = graph.tensors[t]
        off = "PE_GRAPH_STREAMED" if tt.streamed else layout.tensor_offsets[t]
        h += (f"#define {P}_OUTPUT{k}_TENSOR {t_index[t]}\n#define {P}_OUTPUT{k}_OFFSET {off}\n"
              f"#define {P}_OUTPUT{k}_BYTES {tt.nbytes}\n#define {P}_OUTPUT{k}_DTYPE {_GDT[tt.dtype]}\n")
        if tt.streamed:
            from pyembed.model.ops.base import dims4
            d = dims4(tt.shape)
            h += (f"#define {P}_OUTPUT{k}_STREAMED 1\n#define {P}_OUTPUT{k}_H {d[1]}\n#define {P}_OUTPUT{k}_W {d[2]}\n"
                  f"#define {P}_OUTPUT{k}_C {d[3]}\n")
    cq = "" if writable else "const "
    if writable:
        h += (f"\n/* In RAM: pe_model_init relocates the arena offsets in them (the library's regions). */\n"
              f"extern pe_graph_tensor {prefix}_tensors[{max(len(tensors), 1)}];\n"
              f"extern pe_graph_op {prefix}_ops[{max(len(ops), 1)}];\n")
    h += (f"\nextern {cq}pe_graph {prefix}_graph;\n"
          f"/* Set the variable tensors (recurrent states) of arena as TFLM resets them: an\n"
          f" * int8 one to its zero point, others to 0 (a CALL_ONCE's done flag is left alone). */\n"
          f"void {prefix}_reset_states(uint8_t *arena);\n"
          f"/* The states of a fresh arena: CALL_ONCE's done flags cleared (its initial values\n"
          f" * are copied on the next invoke), then {prefix}_reset_states. Call before the first invoke. */\n"
          f"void {prefix}_init_states(uint8_t *arena);\n\n#endif /* {P}_GRAPH_H */\n")
    resets = []
    for t, tensor in enumerate(graph.tensors):
        if tensor.is_variable and not tensor.is_constant and not tensor.keep_on_reset and \
                t in layout.tensor_offsets and \
                (not writable or t in t_index):   # writable: only a tensor of the table is relocated
            where = (f"(uint32_t){prefix}_tensors[{t_index[t]}].offset" if writable and t in t_index
                     else f"{layout.tensor_offsets[t]}u")
            zp = int(tensor.zero_point[0]) if (tensor.dtype == np.int8 and tensor.zero_point is not None
                                                and len(tensor.zero_point)) else 0
            resets.append(f"    for (i = 0; i < {tensor.nbytes}u; i++) {{\n"
                          f"        arena[{where} + i] = (uint8_t){zp & 0xFF}u; /* tensor {t} */\n"
                          f"    }}\n")
    flags = []
    for t, tensor in enumerate(graph.tensors):
        if tensor.is_variable and tensor.keep_on_reset and t in layout.tensor_offsets and \
                (not writable or t in t_index):
            where = (f"(uint32_t){prefix}_tensors[{t_index[t]}].offset" if writable and t in t_index
                     else f"{layout.tensor_offsets[t]}u")
            flags.append(f"    for (i = 0; i < {tensor.nbytes}u; i++) {{\n"
                         f"        arena[{where} + i] = 0u; /* tensor {t}: a CALL_ONCE's done flag */\n"
                         f"    }}\n")
    reset_fn = (f"void {prefix}_reset_states(uint8_t *arena)\n{{\n"
                + (f"    uint32_t i;\n{''.join(resets)}" if resets else "    (void)arena;\n") + "}\n"
                + f"\nvoid {prefix}_init_states(uint8_t *arena)\n{{\n"
                + (f"    uint32_t i;\n{''.join(flags)}" if flags else "")
                + f"    {prefix}_reset_states(arena);\n}}\n")
    arrays = []
    trows = []
    for tt in tensors:
        data = f"(const void *){prefix}_t{tt['tensor']}" if tt["data"] is not None else "NULL"
        if const_data and tt["tensor"] in const_data:
            data = const_data[tt["tensor"]]
        d = tt["dims"]
        trows.append(f"    {{ {data}, {tt['offset']}, {tt['bytes']}, {{{d[0]}, {d[1]}, {d[2]}, {d[3]}}}, "
                     f"{_GDT[np.dtype(tt['dtype'])]} }}, /* tensor {tt['tensor']} */")
    orows = [f"    {_op_initializer(o, prefix, arrays)}, /* operator {o['op']} */" for o in ops]
    c = f"""/*
 * model_graph.c - the pe_graph tables of model "{c_comment(graph.name)}" (see model_graph.h).
 * Generated by {GENERATOR} {_version()}; do not edit, regenerate.
 */
#include <stddef.h>
#include "model_data.h"
#include "model_graph.h"

{''.join(arrays)}
{'' if writable else 'static const '}pe_graph_tensor {prefix}_tensors[{max(len(tensors), 1)}] = {{
{chr(10).join(trows)}
}};

{'' if writable else 'static const '}pe_graph_op {prefix}_ops[{max(len(ops), 1)}] = {{
{chr(10).join(orows)}
}};

{cq}pe_graph {prefix}_graph = {{ {prefix}_tensors, {len(tensors)}, {prefix}_ops, {len(ops)}, {layout.arena_size} }};

{reset_fn}"""
    return h, c


def host_main_source(graph, prefix="pe_model"):
    """A host program: reads the input tensor's bytes from stdin, runs the
    graph on a static arena, prints the output's values (one line, spaces)."""
    check_identifier(prefix, "prefix")
    P = prefix.upper()
    out_t = graph.tensors[graph.outputs[0]]
    ctype = _C_TYPES[np.dtype(out_t.dtype)]
    fmt, cast = ('"%g"', "(double)") if ctype in ("float", "double") else ('"%ld"', "(long)")
    if graph.tensors[graph.outputs[0]].streamed:
        return _streamed_out_main_source(graph, prefix)
    if graph.tensors[graph.inputs[0]].streamed:
        return _streamed_main_source(graph, prefix, ctype, fmt, cast)
    return f"""/* model_main.c - run model "{c_comment(graph.name)}" on the host: input bytes on stdin,
 * output values on stdout. Generated by {GENERATOR} {_version()}. */
#include <stdio.h>
#include <string.h>
#include "model_graph.h"

static uint8_t arena[{P}_ARENA_BYTES] __attribute__((aligned(16)));

int main(void)
{{
    pe_context ctx;
    pe_status st;
    size_t got, i;
    int32_t k;
    const {ctype} *out;
    {prefix}_init_states(arena);
    got = fread(arena + {P}_INPUT0_OFFSET, 1, {P}_INPUT0_BYTES, stdin);
    if (got != {P}_INPUT0_BYTES) {{
        fprintf(stderr, "expected %d input bytes, got %lu\\n", {P}_INPUT0_BYTES, (unsigned long)got);
        return 2;
    }}
    ctx.buf = arena;
    ctx.size = {P}_ARENA_BYTES;
    ctx.stats = NULL;
    k = 0;
    while (k < {prefix}_graph.num_ops) {{  /* pe_graph_next: k + 1, or an inlined IF / WHILE's jump */
        st = pe_graph_invoke_op(&{prefix}_graph, k, &ctx);
        if (st == PE_OK) {{
            st = pe_graph_next(&{prefix}_graph, k, &ctx, &k);
        }}
        if (st != PE_OK) {{
            fprintf(stderr, "operator table entry %ld failed with status %d\\n", (long)k, (int)st);
            return 1;
        }}
    }}
    out = (const {ctype} *)(const void *)(arena + {P}_OUTPUT0_OFFSET);
    for (i = 0; i < {P}_OUTPUT0_BYTES / sizeof(*out); i++) {{
        printf(i ? " " {fmt} : {fmt}, {cast}out[i]);
    }}
    printf("\\n");
    return 0;
}}
"""


def _input_rows_source(prefix):
    """The host programs' streamed-input frame and its pe_row_source callback
    (stdin's frame handed over row by row)."""
    P = prefix.upper()
    return f"""static int8_t frame[{P}_INPUT0_BYTES];
static long rows_given;

/* pe_row_source callback: columns [col, col + n_cols) of input row `row`. */
static pe_status {prefix}_input_rows(void *user, int32_t row, int32_t col, int32_t n_cols, int8_t *dst)
{{
    (void)user;
    if (row < 0 || row >= {P}_INPUT0_H || col < 0 || n_cols < 1 || col + n_cols > {P}_INPUT0_W) {{
        return PE_ERR_ARG;
    }}
    memcpy(dst, frame + ((size_t)row * {P}_INPUT0_W + (size_t)col) * {P}_INPUT0_C, (size_t)n_cols * {P}_INPUT0_C);
    rows_given++;
    return PE_OK;
}}
"""


def _streamed_main_source(graph, prefix, ctype, fmt, cast):
    """host_main_source for a streamed input: stdin stands in for the camera;
    its frame is read outside the arena and handed over row by row."""
    P = prefix.upper()
    return f"""/* model_main.c - run model "{c_comment(graph.name)}" on the host: input bytes on stdin,
 * output values on stdout. The input is streamed ({P}_INPUT0_STREAMED): the
 * frame read from stdin stands in for a camera and is handed to the graph row by
 * row through {prefix}_input_rows; it is not part of the arena.
 * Generated by {GENERATOR} {_version()}. */
#include <stdio.h>
#include <string.h>
#include "model_graph.h"

static uint8_t arena[{P}_ARENA_BYTES] __attribute__((aligned(16)));
{_input_rows_source(prefix)}
int main(void)
{{
    pe_context ctx;
    pe_row_source src;
    pe_status st;
    size_t got, i;
    int32_t k;
    const {ctype} *out;
    got = fread(frame, 1, {P}_INPUT0_BYTES, stdin);
    if (got != {P}_INPUT0_BYTES) {{
        fprintf(stderr, "expected %d input bytes, got %lu\\n", {P}_INPUT0_BYTES, (unsigned long)got);
        return 2;
    }}
    ctx.buf = arena;
    ctx.size = {P}_ARENA_BYTES;
    ctx.stats = NULL;
    src.read = {prefix}_input_rows;
    src.user = NULL;
    k = 0;
    while (k < {prefix}_graph.num_ops) {{  /* pe_graph_next: k + 1, or an inlined IF / WHILE's jump */
        st = pe_graph_invoke_op_rows(&{prefix}_graph, k, &ctx, &src);
        if (st == PE_OK) {{
            st = pe_graph_next(&{prefix}_graph, k, &ctx, &k);
        }}
        if (st != PE_OK) {{
            fprintf(stderr, "operator table entry %ld failed with status %d\\n", (long)k, (int)st);
            return 1;
        }}
    }}
    out = (const {ctype} *)(const void *)(arena + {P}_OUTPUT0_OFFSET);
    for (i = 0; i < {P}_OUTPUT0_BYTES / sizeof(*out); i++) {{
        printf(i ? " " {fmt} : {fmt}, {cast}out[i]);
    }}
    printf("\\n");
    fprintf(stderr, "input rows given: %ld\\n", rows_given);
    return 0;
}}
"""


def _streamed_out_main_source(graph, prefix):
    """host_main_source for a streamed output (and maybe a streamed input):
    stdout stands in for the display; each row the sink receives is printed
    as it comes, so the output is never stored whole."""
    P = prefix.upper()
    streamed_in = graph.tensors[graph.inputs[0]].streamed
    if streamed_in:
        frame_decl = _input_rows_source(prefix)
        read_in, src_decl = "frame", "    pe_row_source src;\n"
        src_set, src_arg = f"    src.read = {prefix}_input_rows;\n    src.user = NULL;\n", "&src"
        tail = '    fprintf(stderr, "input rows given: %ld\\n", rows_given);\n'
    else:
        frame_decl, read_in, src_decl, src_set, src_arg, tail = "", f"arena + {P}_INPUT0_OFFSET", "", "", "NULL", ""
    reset = f"    {prefix}_init_states(arena);\n"
    return f"""/* model_main.c - run model "{c_comment(graph.name)}" on the host: input bytes on stdin,
 * output values on stdout. The output is streamed ({P}_OUTPUT0_STREAMED): each row is
 * printed as the graph hands it over through {prefix}_output_rows (stdout stands in for
 * a display); it is not part of the arena.{" The input is streamed too." if streamed_in else ""}
 * Generated by {GENERATOR} {_version()}. */
#include <stdio.h>
#include <string.h>
#include "model_graph.h"

static uint8_t arena[{P}_ARENA_BYTES] __attribute__((aligned(16)));
{frame_decl}static long rows_taken;

/* pe_row_sink callback: output row `row`, n int8 values. */
static pe_status {prefix}_output_rows(void *user, int32_t row, const int8_t *src, int32_t n)
{{
    int32_t i;
    (void)user;
    if (row != rows_taken || n != {P}_OUTPUT0_W * {P}_OUTPUT0_C) {{
        return PE_ERR_ARG;
    }}
    for (i = 0; i < n; i++) {{
        printf(row == 0 && i == 0 ? "%ld" : " %ld", (long)src[i]);
    }}
    rows_taken++;
    return PE_OK;
}}

int main(void)
{{
    pe_context ctx;
{src_decl}    pe_row_sink sink;
    pe_status st;
    size_t got;
    int32_t k;
{reset}    got = fread({read_in}, 1, {P}_INPUT0_BYTES, stdin);
    if (got != {P}_INPUT0_BYTES) {{
        fprintf(stderr, "expected %d input bytes, got %lu\\n", {P}_INPUT0_BYTES, (unsigned long)got);
        return 2;
    }}
    ctx.buf = arena;
    ctx.size = {P}_ARENA_BYTES;
    ctx.stats = NULL;
{src_set}    sink.write = {prefix}_output_rows;
    sink.user = NULL;
    k = 0;
    while (k < {prefix}_graph.num_ops) {{  /* pe_graph_next: k + 1, or an inlined IF / WHILE's jump */
        st = pe_graph_invoke_op_io(&{prefix}_graph, k, &ctx, {src_arg}, &sink);
        if (st == PE_OK) {{
            st = pe_graph_next(&{prefix}_graph, k, &ctx, &k);
        }}
        if (st != PE_OK) {{
            fprintf(stderr, "operator table entry %ld failed with status %d\\n", (long)k, (int)st);
            return 1;
        }}
    }}
    printf("\\n");
{tail}    fprintf(stderr, "output rows taken: %ld\\n", rows_taken);
    return 0;
}}
"""


# -- everything at once ------------------------------------------------------------

def write_plan_outputs(graph, plan, outdir, section=".pe_flash", tflite_out=None, source_model=None,
                       with_model_data=True, force=False):
    """Write memplan.h, model_data.c/.h and plan.json into outdir (and the
    .tflite with OfflineMemoryAllocation metadata when tflite_out is given).
    outdir: a folder path, written through pyembed.codegen.outdir (a file
    pyembed did not write there is refused unless force; all files or none),
    or an OutputDir of a larger output the caller commits.
    Returns {what: path}."""
    from pyembed.codegen.outdir import staged
    from pyembed.model.validate import validate_graph
    from pyembed.plan.planjson import plan_json_text
    _require_plan(plan)
    validate_graph(graph)
    if not hasattr(outdir, "write_text") and not isinstance(outdir, (str, os.PathLike)):
        raise ArgumentError(f"outdir: expected a directory path, got {type(outdir).__name__}")
    check_section(section, "section")
    paths = {}
    with staged(outdir, force=force) as out:
        paths["memplan.h"] = out.write_text("memplan.h", memplan_header(plan, num_tensors=len(graph.tensors)))
        if with_model_data:
            hdr, src = model_data(graph, section=section)
            for name, text in (("model_data.h", hdr), ("model_data.c", src)):
                paths[name] = out.write_text(name, text)
        if with_model_data and not getattr(graph, "unsupported", None):
            hdr, src = graph_tables(graph, plan)
            for name, text in (("model_graph.h", hdr), ("model_graph.c", src),
                               ("model_main.c", host_main_source(graph))):
                paths[name] = out.write_text(name, text)
        paths["plan.json"] = out.write_text("plan.json", plan_json_text(plan))
        if tflite_out is not None:
            from pyembed.codegen.tflite_offline import write_offline_plan
            src_model = source_model or getattr(graph, "source_path", None)
            if not src_model:
                raise ArgumentError("tflite_out: needs the source .tflite model (graph.source_path is not set)")
            write_offline_plan(src_model, plan, tflite_out)
            paths["tflite"] = tflite_out
    return paths
