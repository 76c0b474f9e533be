"""The firmware project's build files and QEMU test harness (main.c, Makefile,
CMakeLists.txt); see pyembed.codegen.firmware."""
from pyembed.codegen.escape import c_comment, cmake_comment, make_comment, make_shell_word

# the model sources pyembed generates in DIR/model/: the Makefile and the
# CMakeLists compile these by name, never whatever else is in model/
MODEL_SOURCES = ("model_data.c", "model_graph.c", "model_ops.c", "pe_model.c")

# the harness's input file (main.c reads it; a --run project keeps it)
INPUT_FILE = "pe_input.bin"



def op_timing_hooks(*store):
    """C text of main.c's per-operator timing hooks (before_op / after_op with
    pe_port_now, the op_start they share): after_op runs the statements in
    store with t, the operator's ticks, for table index k < NUM_OPS."""
    body = "\n".join(f"        {line}" for line in store)
    return f"""static uint64_t op_start;

static void before_op(int32_t k, int32_t op, void *user)
{{
    (void)k;
    (void)op;
    (void)user;
    op_start = pe_port_now();
}}

static void after_op(int32_t k, int32_t op, void *user)
{{
    uint64_t t = pe_port_now() - op_start;
    (void)op;
    (void)user;
    if (k >= 0 && k < NUM_OPS) {{
{body}
    }}
}}"""


def input_rows_callback(P):
    """C text of main.c's pe_row_source callback input_rows (and the
    rows_given counter it bumps): the rows of input 0 copied from
    input_frame, which the caller declares (model macros prefixed P)."""
    return f"""static uint32_t rows_given;

/* pe_row_source callback: columns [col, col + n_cols) of input row `row`. */
static pe_status input_rows(void *user, int32_t row, int32_t col, int32_t n_cols, int8_t *dst)
{{
    (void)user;
    if (row < 0 || row >= {P}_INPUT0_H || col < 0 || n_cols < 1 || col + n_cols > {P}_INPUT0_W) {{
        return PE_ERR_ARG;
    }}
    memcpy(dst, input_frame + ((size_t)row * {P}_INPUT0_W + (size_t)col) * {P}_INPUT0_C,
           (size_t)n_cols * {P}_INPUT0_C);
    rows_given++;
    return PE_OK;
}}
"""

def output_rows_callback(P):
    """C text of main.c's pe_row_sink callback output_rows (and the
    rows_taken counter it bumps): each row of output 0, checked to come once
    and in order with its W x C bytes, is copied into output_frame, which the
    caller declares (model macros prefixed P)."""
    return f"""static uint32_t rows_taken;

/* pe_row_sink callback: output row `row` (n int8 values) as soon as it is final. */
static pe_status output_rows(void *user, int32_t row, const int8_t *src, int32_t n)
{{
    (void)user;
    if (row != (int32_t)rows_taken || row >= {P}_OUTPUT0_H || n != {P}_OUTPUT0_W * {P}_OUTPUT0_C) {{
        return PE_ERR_ARG;
    }}
    memcpy(output_frame + (size_t)row * (size_t)n, src, (size_t)n);
    rows_taken++;
    return PE_OK;
}}
"""


def _streamed_out_decl(P):
    """main.c's frame of a streamed output 0 (section .pe_output_frame, see
    link.ld) and the row sink filling it."""
    return f"""
/* The streamed output's frame, outside the planned RAM (link.ld: section
 * .pe_output_frame), standing for a display or the next stage's buffer. The
 * model never stores the output: it hands each row to output_rows as soon as
 * the row is final, and no byte of it is in the arena. */
static int8_t output_frame[{P}_OUTPUT0_BYTES]
    __attribute__((section(".pe_output_frame"), aligned(4), used));
{output_rows_callback(P)}"""


def input_layout(graph):
    """What the harness's input file holds: one row per graph input, in order
    (its bytes follow the previous input's), {"index", "name", "shape",
    "dtype", "bytes"}; and the same as one line of text."""
    rows = []
    for k, t in enumerate(graph.inputs):
        tt = graph.tensors[t]
        rows.append({"index": k, "name": tt.name, "shape": [int(d) for d in tt.shape], "dtype": str(tt.dtype),
                     "bytes": int(tt.nbytes)})
    total = sum(r["bytes"] for r in rows)
    text = f"{total} B: " + ", then ".join(
        f"input {r['index']} '{r['name']}' {r['dtype']} {tuple(r['shape'])} ({r['bytes']} B)" for r in rows)
    return rows, text


def _streamed_parts(graph, prefix):
    """main.c pieces for a streamed input 0: the frame outside the planned RAM
    (section .pe_input_frame, see link.ld) and the row callback copying from it."""
    P = prefix.upper()
    decl = f"""
/* The streamed input's frame, outside the planned RAM: link.ld puts section
 * .pe_input_frame in the board's code memory (ssram1 on the MPS2 boards, RAM
 * under QEMU), standing for a camera's frame memory or a sample in flash. The
 * model never sees it: it asks input_rows for one row range at a time, as a
 * camera or DMA driver would deliver it, and no byte of it is in the arena. */
static int8_t input_frame[{P}_INPUT0_BYTES]
    __attribute__((section(".pe_input_frame"), aligned(4), used));
{input_rows_callback(P)}"""
    read = f"""        void *p = k == 0 ? (void *)input_frame : pe_model_input(k, &n);
        n = k == 0 ? (uint32_t){P}_INPUT0_BYTES : n;"""
    invoke = """    {
        pe_row_source src;
        src.read = input_rows;
        src.user = NULL;
        st = pe_model_invoke_rows(&src);
    }
    total = pe_port_now() - t0;
    stack_low = pe_stack_lowest();
    printf("pe_input_rows_given %lu\\n", (unsigned long)rows_given);"""
    return decl, read, invoke


def _main_source(graph, prefix, ops, harness=None):
    """main.c of the semihost harness. harness: None (a main of its own that
    opens pe_input.bin and pe_output.bin), or the name of a function
    ``int harness(FILE *in, FILE *out)`` doing the same on files its caller
    opened (a use case's main runs one per model: usecase.py)."""
    streamed = bool(graph.inputs) and graph.tensors[graph.inputs[0]].streamed
    decl, read, invoke = (_streamed_parts(graph, prefix) if streamed else
                          ("", "        void *p = pe_model_input(k, &n);",
                           "    st = pe_model_invoke();\n    total = pe_port_now() - t0;\n"
                           "    stack_low = pe_stack_lowest();"))
    P = prefix.upper()
    streamed_out = bool(graph.outputs) and graph.tensors[graph.outputs[0]].streamed
    get_out = "        const void *p = pe_model_output(k, &n);"
    if streamed_out:
        decl += _streamed_out_decl(P)
        src = ("        pe_row_source src;\n", "        src.read = input_rows;\n        src.user = NULL;\n") \
            if streamed else ("", "")
        invoke = ("    {\n" + src[0] + "        pe_row_sink sink;\n" + src[1] + "        sink.write = output_rows;\n"
                  "        sink.user = NULL;\n"
                  f"        st = pe_model_invoke_io({'&src' if streamed else 'NULL'}, &sink);\n    }}\n"
                  "    total = pe_port_now() - t0;\n    stack_low = pe_stack_lowest();")
        if streamed:
            invoke += '\n    printf("pe_input_rows_given %lu\\n", (unsigned long)rows_given);'
        invoke += '\n    printf("pe_output_rows_taken %lu\\n", (unsigned long)rows_taken);'
        get_out = (f"        const void *p = k == 0 ? (const void *)output_frame : pe_model_output(k, &n);\n"
                   f"        n = k == 0 ? (uint32_t){P}_OUTPUT0_BYTES : n;")
    own = harness is None
    head = "int main(void)" if own else f"int {harness}(FILE *in, FILE *out)"
    files = "    FILE *in;\n    FILE *out;\n" if own else ""
    open_in = ('    in = fopen("pe_input.bin", "rb");\n    if (in == NULL) {\n        return 2;\n    }\n'
               if own else "")
    open_out = ('    out = fopen("pe_output.bin", "wb");\n    if (out == NULL) {\n        return 4;\n    }\n'
                if own else "")
    close_in = "            fclose(in);\n" if own else ""
    close_in_end = "    fclose(in);\n" if own else ""
    close_out_e = "            fclose(out);\n" if own else ""
    close_out_f = "        fclose(out);\n" if own else ""
    close_out = "    fclose(out);\n" if own else ""
    return f"""/*
 * main.c - test harness for model "{c_comment(graph.name)}" under QEMU (semihosting):
 * reads the inputs from pe_input.bin (concatenated, in input order), runs the
 * model once with per-operator timing (the port layer's clock, pe_port_now:
 * SysTick by default), writes pe_output.bin:
 *   "PEFW", int32 status, uint32 number of table entries, uint32 ticks of the
 *   whole invoke (low, high), the outputs (concatenated), then per table
 *   entry: uint32 entry, uint32 model operator, uint32 ticks (low, high),
 *   then "PESK", uint32 peak stack of the invoke (painted just before it,
 *   scanned just after: pe_target.h), uint32 peak stack of main before the
 *   invoke (init and input reads; painted by the reset handler), uint32
 *   stack reserve (link.ld .stack). The lowest word of the reserve
 *   overwritten (the stack may have overflowed): the invoke's peak is
 *   0xFFFFFFFF, main's the whole reserve.
 * SysTick runs on the processor clock (PE_TICK_HZ): one tick = 1e9 / PE_TICK_HZ
 * instructions under qemu-system-arm -icount shift=0 (40 at 25 MHz).
 * Exit code 0, or 10 + |status| on a failure.
 * A streamed input ({prefix.upper()}_INPUT0_STREAMED) is read into a frame outside the
 * planned RAM and handed to the model row by row through a pe_row_source; a
 * streamed output ({prefix.upper()}_OUTPUT0_STREAMED) comes row by row to a pe_row_sink,
 * which copies each row into a frame outside the planned RAM for pe_output.bin.
 * Generated by pyembed; on a real board replace the semihosting I/O.
 */
#include <stdio.h>
#include <string.h>
#include "pe_model.h"
#include "model_data.h"
#include "pe_port.h"
#include "pe_target.h"

#define NUM_OPS {max(len(ops), 1)}

static uint32_t op_ticks[NUM_OPS][2];
{decl}
{op_timing_hooks("op_ticks[k][0] = (uint32_t)t;", "op_ticks[k][1] = (uint32_t)(t >> 32);")}

static int put(FILE *f, const void *p, size_t n)
{{
    return fwrite(p, 1, n, f) == n ? 0 : -1;
}}

{head}
{{
{files}    int32_t k;
    uint32_t n;
    uint32_t head[5];
    uint64_t t0;
    uint64_t total;
    uintptr_t sp0;
    uintptr_t stack_low;
    uint32_t stack_main;
    pe_status st;
#if PE_MODEL_SEGMENTED
    /* the port layer's DMA hook for the segment loader (pe_port.h; none: memcpy) */
    pe_model_set_segment_dma(pe_port_dma());
#endif
    st = pe_model_init();
    if (st != PE_OK) {{
        return 10 - (int)st;
    }}
{open_in}    for (k = 0; k < {prefix.upper()}_NUM_INPUTS; k++) {{
{read}
        if (p == NULL || fread(p, 1, n, in) != n) {{
{close_in}            return 3;
        }}
    }}
{close_in_end}    pe_model_set_hooks(before_op, after_op, NULL);
    stack_main = (uint32_t)(pe_stack_top() - pe_stack_lowest());
    sp0 = pe_stack_pointer();
    pe_stack_paint();
    t0 = pe_port_now();
{invoke}
{open_out}    memcpy(&head[0], "PEFW", 4);
    head[1] = (uint32_t)(int32_t)st;
    head[2] = (uint32_t)pe_model_num_ops();
    head[3] = (uint32_t)total;
    head[4] = (uint32_t)(total >> 32);
    if (put(out, head, sizeof head) != 0) {{
{close_out_f}        return 5;
    }}
    for (k = 0; k < {prefix.upper()}_NUM_OUTPUTS; k++) {{
{get_out}
        if (p == NULL || put(out, p, n) != 0) {{
{close_out_e}            return 5;
        }}
    }}
    for (k = 0; k < pe_model_num_ops(); k++) {{
        uint32_t rec[4];
        rec[0] = (uint32_t)k;
        rec[1] = (uint32_t)pe_model_op_index(k);
        rec[2] = op_ticks[k][0];
        rec[3] = op_ticks[k][1];
        if (put(out, rec, sizeof rec) != 0) {{
{close_out_e}            return 5;
        }}
    }}
    {{
        uint32_t rec[4];
        memcpy(&rec[0], "PESK", 4);
        rec[1] = stack_low > pe_stack_limit() ? (uint32_t)(sp0 - stack_low) : 0xFFFFFFFFu;
        rec[2] = stack_main;
        rec[3] = (uint32_t)(pe_stack_top() - pe_stack_limit());
        if (put(out, rec, sizeof rec) != 0) {{
{close_out_e}            return 5;
        }}
    }}
{close_out}    return st == PE_OK ? 0 : 10 - (int)st;
}}
"""


def _model_argument(graph):
    """How `pyembed firmware` names graph's model: a bundled model by its file's
    stem (its short name), another by the absolute path of the file it was read
    from."""
    import os
    from pyembed.data import MODELS_DIR
    src = getattr(graph, "source_path", None)
    if not src or not os.path.isfile(src):
        return graph.name
    src = os.path.abspath(src)
    bundled = os.path.dirname(src) == os.path.abspath(MODELS_DIR)
    return os.path.splitext(os.path.basename(src))[0] if bundled else src


def _run_rule(profile, machine, graph, io="semihost"):
    """The Makefile's run target: under QEMU when a machine emulates the
    profile, after checking that pe_input.bin is there and holds the bytes
    main.c reads (else one line saying what it must hold and how to make it,
    and the target fails before QEMU starts). io uart: QEMU with the UART on
    stdio (the input is in the image; stop QEMU with Ctrl-A X); none: QEMU
    waiting for gdb."""
    # machine is one of QEMU_MACHINES' names; the profile's and the model's names are the user's: one quoted
    # shell word each, printed by printf '%s' (echo would expand backslashes)
    if not machine:
        no_qemu = f"profile {profile.name}: no QEMU machine; flash firmware.elf with your tools"
        return f"run:\n\t@printf '%s\\n' {make_shell_word(no_qemu)}; false\n"
    if io == "uart":
        return (f"# the UART on stdio, no semihosting: firmware.elf prints its results and loops; end QEMU with "
                f"Ctrl-A X\n"
                f"run: firmware.elf\n"
                f"\tqemu-system-arm -M {machine} -nographic -icount shift=0 -kernel firmware.elf\n")
    if io == "none":
        return (f"# no output (--io none): QEMU stops before the first instruction and waits for gdb on port 1234\n"
                f"# (arm-none-eabi-gdb firmware.elf -ex 'target remote :1234'; the results: pe_result_*)\n"
                f"run: firmware.elf\n"
                f"\tqemu-system-arm -M {machine} -nographic -icount shift=0 -s -S -kernel firmware.elf\n")
    rows, layout = input_layout(graph)
    total = sum(r["bytes"] for r in rows)
    how = (f"main.c reads the model's input from it, {layout}; write those bytes there, or run: pyembed firmware "
           f"{_model_argument(graph)} --profile {profile.name} -o <this folder> --run --inputs x.npy (with this project's "
           f"options)")
    missing = make_shell_word(f"make run: no {INPUT_FILE} in this folder: {how}")
    size = make_shell_word(f"{how}")
    return (f"run: firmware.elf\n"
            f"\t@test -f {INPUT_FILE} || {{ printf '%s\\n' {missing}; exit 1; }}\n"
            f"\t@n=$$(wc -c < {INPUT_FILE}); test \"$$n\" -eq {total} || "
            f"{{ printf 'make run: {INPUT_FILE} holds %s B, not {total} B: %s\\n' \"$$n\" {size}; exit 1; }}\n"
            f"\tqemu-system-arm -M {machine} -nographic -monitor none -serial none "
            f"-semihosting-config enable=on,target=native -icount shift=0 -kernel firmware.elf\n")


# --io uart / none: the sources beside the semihost harness's, the newlib flavour and pe_target.c's define
_IO_SRCS = {"semihost": "", "uart": " pe_uart.c pe_input.c", "none": " pe_input.c"}


def _io_link(io):
    return "--specs=rdimon.specs" if io == "semihost" else "--specs=nosys.specs"


def _io_cflags(io):
    return "" if io == "semihost" else " -DPE_TARGET_NO_FILES=1"


def _makefile(profile, core_flags, machine, graph, io="semihost", boot2=False):
    run = _run_rule(profile, machine, graph, io)
    model_srcs = " ".join(f"model/{n}" for n in MODEL_SOURCES)
    return f"""# Makefile - firmware for profile {make_comment(profile.name)} ({profile.core}), generated by pyembed.
#
#   make          build firmware.elf (arm-none-eabi-gcc + newlib:
#                 apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi)
{_make_run_doc(io)}
#
# Variables:
#   PYEMBED_CSRC  directory holding pyembed's C runtime (include/pyembed/*.h and
#                 src/<room>/**.c); default: the copy in ./pyembed. Point it at a
#                 pyembed checkout's csrc/ to build against that instead (its full
#                 tables, src/graph/pe_graph_ops.c and src/pipeline/pe_stripe_kinds.c,
#                 are left out: this model's tables are model/model_ops.c)
#   RUNTIME_BUILD where the runtime's objects go (default build/pyembed); several
#                 projects for the same core may share one directory
#   CROSS         toolchain prefix (default arm-none-eabi-)
#   OPT           optimisation flags (default -O2)
#   GRAPH_FLAGS   default -DPE_GRAPH_TRUST_CHECKED=1: pe_model_init checks the
#                 constant graph once (pe_graph_check), so the runtime does not
#                 repeat those structural checks on every operator call (see
#                 pe_graph.c); set it empty to check everything on every call
#   TARGET_FLAGS  default -DPE_TICK_HZ=<the profile's clock_hz>u: SysTick's clock, for
#                 pe_target.c's instruction counts
#   STACK_FLAGS   default -fstack-usage -fcallgraph-info=su: GCC writes each object's
#                 frames (.su) and call graph (.ci) beside it, read by
#                 pyembed.target.stackbound for the static stack bound (stack.ld)

CROSS ?= arm-none-eabi-
CC := $(CROSS)gcc
SIZE := $(CROSS)size
PYEMBED_CSRC ?= pyembed
RUNTIME_BUILD ?= build/pyembed
OPT ?= -O2
GRAPH_FLAGS ?= -DPE_GRAPH_TRUST_CHECKED=1
STACK_FLAGS ?= -fstack-usage -fcallgraph-info=su
CPUFLAGS := {core_flags}
# SysTick's clock (pe_target.h): the profile's processor clock
TARGET_FLAGS ?= -DPE_TICK_HZ={int(profile.clock_hz)}u
CFLAGS := $(CPUFLAGS) $(OPT) $(GRAPH_FLAGS) $(STACK_FLAGS) $(TARGET_FLAGS){_io_cflags(io)} -g -std=c99 -Wall -Wextra -Werror -ffunction-sections -fdata-sections \\
          -I. -Imodel -I$(PYEMBED_CSRC)/include
{_make_link_doc(io)}
LDFLAGS := $(CPUFLAGS) {_io_link(io)} -nostartfiles -Wl,--gc-sections -Tlink.ld -Wl,-Map=firmware.map

# the generated sources by name: a .c file added to model/ is not built unless listed here
APP_SRCS := startup.c pe_port.c pe_target.c main.c{_IO_SRCS[io]}{" pe_boot2.c" if boot2 else ""} {model_srcs}
# every room of the runtime (core, kernels/<family>, pipeline, graph, sched, segload)
RT_SRCS := $(filter-out %/pe_graph_ops.c %/pe_stripe_kinds.c,$(wildcard $(PYEMBED_CSRC)/src/*/*.c $(PYEMBED_CSRC)/src/*/*/*.c))
APP_OBJS := $(patsubst %.c,build/%.o,$(notdir $(APP_SRCS)))
RT_OBJS := $(patsubst $(PYEMBED_CSRC)/src/%.c,$(RUNTIME_BUILD)/%.o,$(RT_SRCS))

all: firmware.elf

build/%.o: %.c model/model_graph.h | build
\t$(CC) $(CFLAGS) -c $< -o $@

build/%.o: model/%.c model/model_graph.h | build
\t$(CC) $(CFLAGS) -c $< -o $@

$(RUNTIME_BUILD)/%.o: $(PYEMBED_CSRC)/src/%.c | $(RUNTIME_BUILD)
\t@mkdir -p $(dir $@)
\t$(CC) $(CFLAGS) -c $< -o $@

build $(RUNTIME_BUILD):
\tmkdir -p $@

firmware.elf: $(APP_OBJS) $(RT_OBJS) link.ld stack.ld
\t$(CC) $(LDFLAGS) $(APP_OBJS) $(RT_OBJS) -lm -o $@
\t$(SIZE) $@

{run}
clean:
\trm -rf build firmware.elf firmware.map

.PHONY: all run clean
"""


def _make_run_doc(io):
    if io == "uart":
        return ("#   make run      run it under QEMU (apt-get install qemu-system-arm) with the UART on\n"
                "#                 stdio: the input is compiled in (pe_input.c), the results are printed")
    if io == "none":
        return ("#   make run      start it under QEMU halted, for gdb on port 1234 (no output: --io none)")
    return ("#   make run      run it under QEMU (apt-get install qemu-system-arm); main.c reads\n"
            "#                 pe_input.bin and writes pe_output.bin in the current directory\n"
            "#                 ('pyembed firmware --run' leaves the input it ran in pe_input.bin)")


def _make_link_doc(io):
    if io == "semihost":
        return "# newlib with semihosting (stdio and exit through the debugger / QEMU); startup.c is crt0"
    return (f"# newlib without semihosting (nosys: no host files, no exit); startup.c is crt0 (--io {io})")


def _cmakelists(profile, core_flags, io="semihost", boot2=False):
    model_srcs = " ".join(f"model/{n}" for n in MODEL_SOURCES)
    return f"""# CMakeLists.txt - firmware for profile {cmake_comment(profile.name)} ({profile.core}), generated by pyembed.
#   cmake -S . -B build-cmake && cmake --build build-cmake
# PYEMBED_CSRC: pyembed's C runtime (default: the copy in ./pyembed).
# PE_GRAPH_TRUST_CHECKED: ON (default) as the Makefile's GRAPH_FLAGS: pe_model_init
# checks the graph once, the runtime does not repeat those checks per operator call.
cmake_minimum_required(VERSION 3.13)
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
project(pyembed_firmware C)

set(PYEMBED_CSRC "${{CMAKE_CURRENT_SOURCE_DIR}}/pyembed" CACHE PATH "pyembed C runtime (include/ and src/)")
set(CPUFLAGS {core_flags})
separate_arguments(CPUFLAGS)
option(PE_GRAPH_TRUST_CHECKED "skip the per-call checks pe_graph_check made at init" ON)
# the generated model sources by name (not a glob: a user's file in model/ is not built unless added)
set(MODEL_SRCS {model_srcs})
file(GLOB_RECURSE PYEMBED_SRCS "${{PYEMBED_CSRC}}/src/*.c")
list(FILTER PYEMBED_SRCS EXCLUDE REGEX "/(pe_graph_ops|pe_stripe_kinds)\\.c$")
add_executable(firmware.elf startup.c pe_port.c pe_target.c main.c{_IO_SRCS[io]}{" pe_boot2.c" if boot2 else ""} ${{MODEL_SRCS}}
               ${{PYEMBED_SRCS}})
target_include_directories(firmware.elf PRIVATE . model ${{PYEMBED_CSRC}}/include)
if(PE_GRAPH_TRUST_CHECKED)
  target_compile_definitions(firmware.elf PRIVATE PE_GRAPH_TRUST_CHECKED=1)
endif()
# SysTick's clock (pe_target.h): the profile's processor clock
target_compile_definitions(firmware.elf PRIVATE PE_TICK_HZ={int(profile.clock_hz)}u{" PE_TARGET_NO_FILES=1" if io != "semihost" else ""})
target_compile_options(firmware.elf PRIVATE ${{CPUFLAGS}} -O2 -g -std=c99 -Wall -Wextra -Werror
                       -ffunction-sections -fdata-sections)
target_link_options(firmware.elf PRIVATE ${{CPUFLAGS}} {_io_link(io)} -nostartfiles -Wl,--gc-sections
                    -T${{CMAKE_CURRENT_SOURCE_DIR}}/link.ld
                    -L${{CMAKE_CURRENT_SOURCE_DIR}})
target_link_libraries(firmware.elf PRIVATE m)
"""


# the operator types whose entries make the invoke loop jump (BRANCH, JUMP: pe_graph_next)
JUMP_TYPES = ("IF", "WHILE")


def invoke_loop(graph, prefix):
    """pe_model_invoke's loop over the operator table: with an inlined IF / WHILE it follows
    pe_graph_next (k + 1, or a jump); without, k + 1 (pe_graph_next would give the same order
    at some 20 instructions per operator, and link the control-flow runners)."""
    if any(op.type in JUMP_TYPES for op in graph.operators):
        return f"""    for (k = 0; k < {prefix}_graph.num_ops;) {{  /* pe_graph_next: k + 1, or an IF / WHILE's jump */
        st = pe_model_run_op(k);
        if (st != PE_OK || (st = pe_graph_next(&{prefix}_graph, k, &pe_model_ctx, &k)) != PE_OK) {{
            return st;
        }}
    }}
    return PE_OK;"""
    return f"""    for (k = 0; k < {prefix}_graph.num_ops; k++) {{  /* (no IF / WHILE: the table in order) */
        st = pe_model_run_op(k);
        if (st != PE_OK) {{
            return st;
        }}
    }}
    return PE_OK;"""
