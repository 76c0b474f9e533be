"""`pyembed firmware --layout library` (issue #35: the model as a library a
firmware engineer adds to their own project).

The library holds no main, startup, semihosting or fixed address. An
application written here (its own CMakeLists.txt with add_subdirectory +
target_link_libraries(app pyembed_model), main.c, startup.c and a linker
script that INCLUDEs the library's pyembed_sections.ld inside its own memory
regions) is built with CMake for a Cortex-M0 (microbit), M4 (mps2-an386) and
M55 (mps3-an547) and run under QEMU: its outputs equal the host runtime's,
integer for integer; on the M4 also a library over two regions (block RAM and
SSRAM2/3), whose pe_model_init relocates the tables: every buffer lies in its
region's section. A region smaller than the planned arena fails the link
with the fragment's ASSERT message."""
import json
import os
import re
import shutil
import subprocess

import numpy as np
import pytest
from click.testing import CliRunner

from firmware_sim.profiles import load_profile
from pyembed.data import MODELS_DIR
from pyembed.model.load import load_model
from pyembed.target import qemu

needs_tools = pytest.mark.skipif(qemu.missing_tools() is not None, reason=str(qemu.missing_tools()))
needs_cmake = pytest.mark.skipif(shutil.which("cmake") is None,
                                 reason="cmake is not installed (apt-get install cmake; CI installs it)")

# (board, model): one QEMU run each
RUNS = [("microbit", "tflm_hello_world_int8"), ("mps2-an386", "tflm_micro_speech_int8"),
        ("mps3-an547", "tflm_micro_speech_int8")]


def _graph(model):
    return load_model(os.path.join(MODELS_DIR, model + ".tflite"))


def _library(model, board, out):
    from pyembed.target.firmware import generate
    return generate(_graph(model), board, out, library=True)


# ---------------------------------------------------------------- the application (the user's code)

_STARTUP = r"""/* the application's startup: vector table, .data / .bss, FPU on, main, semihosting exit */
#include <stdint.h>
#include "pe_port.h"

extern uint32_t __stack_top, __data_load, __data_start, __data_end, __bss_start, __bss_end;
extern int main(void);
void Reset_Handler(void);
void Fault_Handler(void);
void SysTick_Handler(void);
void app_exit(int code);

void app_exit(int code)
{
    /* SYS_EXIT with ADP_Stopped_ApplicationExit (QEMU exit 0), else ADP_Stopped_RunTimeErrorUnknown */
    register uint32_t r0 __asm__("r0") = 0x18u;
    register uint32_t r1 __asm__("r1") = code == 0 ? 0x20026u : 0x20023u;
    __asm__ volatile("bkpt 0xab" : : "r"(r0), "r"(r1) : "memory");
    for (;;) {
    }
}

void Fault_Handler(void) { app_exit(0x7F); }
void SysTick_Handler(void) { pe_port_systick_isr(); }

typedef void (*vec)(void);
__attribute__((section(".vectors"), used)) const vec app_vectors[16] = {
    (vec)(uintptr_t)&__stack_top, Reset_Handler, Fault_Handler, Fault_Handler, Fault_Handler, Fault_Handler,
    Fault_Handler, 0, 0, 0, 0, Fault_Handler, Fault_Handler, 0, Fault_Handler, SysTick_Handler,
};

void Reset_Handler(void)
{
    uint32_t *s = &__data_load, *d = &__data_start;
    while (d < &__data_end) {
        *d++ = *s++;
    }
    for (d = &__bss_start; d < &__bss_end; d++) {
        *d = 0u;
    }
#if defined(__ARM_FP) || defined(__ARM_FEATURE_MVE)
    *(volatile uint32_t *)0xE000ED88u |= 0xFu << 20; /* CPACR: CP10, CP11 */
    __asm__ volatile("dsb\n isb" ::: "memory");
#endif
    app_exit(main());
}
"""


def _placement_check(sections):
    """C for the application's main after the invoke (the test of a library over several regions):
    every activation and scratch buffer the relocated tables address (from the arena, the lowest
    section, which the link script names __app_arena_lo) lies inside one of the sections (the link's
    __app_sec<k>_start / _end); prints PLACED and the count in each; exit 6 if one lies outside."""
    ext = "".join(f"extern uint8_t __app_sec{k}_start[], __app_sec{k}_end[];\n" for k in range(len(sections)))
    rng = ", ".join(f"{{(uintptr_t)__app_sec{k}_start, (uintptr_t)__app_sec{k}_end}}" for k in range(len(sections)))
    return ext + "extern uint8_t __app_arena_lo[];\n", f"""    {{
        static const uintptr_t secs[{len(sections)}][2] = {{ {rng} }};
        uint32_t count[{len(sections)}] = {{0}};
        int32_t i, s, nb = pe_model_graph.num_tensors + pe_model_graph.num_ops;
        for (i = 0; i < nb; i++) {{
            int32_t off, bytes;
            int in = 0;
            if (i < pe_model_graph.num_tensors) {{
                off = pe_model_graph.tensors[i].offset;
                bytes = pe_model_graph.tensors[i].bytes;
            }} else {{
                off = pe_model_graph.ops[i - pe_model_graph.num_tensors].scratch_offset;
                bytes = pe_model_graph.ops[i - pe_model_graph.num_tensors].scratch_size;
            }}
            if (off < 0 || bytes <= 0) {{
                continue;   /* a constant, a streamed tensor, no scratch */
            }}
            for (s = 0; s < {len(sections)}; s++) {{
                uintptr_t a = (uintptr_t)__app_arena_lo + (uint32_t)off;
                if (a >= secs[s][0] && a + (uint32_t)bytes <= secs[s][1]) {{
                    count[s]++;
                    in = 1;
                }}
            }}
            if (!in) {{
                return 6;
            }}
        }}
        pe_port_log("PLACED");
        for (s = 0; s < {len(sections)}; s++) {{
            line[0] = ' ';
            line[1] = hex[(count[s] >> 4) & 15u];
            line[2] = hex[count[s] & 15u];
            line[3] = 0;
            pe_port_log(line);
        }}
        pe_port_log("\\n");
    }}
"""


def _main_c(graph, data, check=("", "")):
    ins = ", ".join(str(int(b)) for b in np.frombuffer(data, dtype=np.uint8))
    return f"""/* the application: runs the model once on a fixed input, prints each output's bytes (semihosting) */
#include <stdint.h>
#include <string.h>
#include "pe_model.h"
#include "pe_port.h"

static const uint8_t app_input[{len(data)}] = {{ {ins} }};
{check[0]}
static void write0(const char *s)
{{
    register uint32_t r0 __asm__("r0") = 0x04u; /* SYS_WRITE0 */
    register const char *r1 __asm__("r1") = s;
    __asm__ volatile("bkpt 0xab" : : "r"(r0), "r"(r1) : "memory");
}}

static void log_to_host(void *user, const char *text, size_t n)
{{
    (void)user;
    (void)n;
    write0(text);
}}

int main(void)
{{
    static char line[8];
    static const char hex[] = "0123456789abcdef";
    uint32_t off = 0u, n = 0u;
    int32_t k;
    pe_port_set_log(log_to_host, NULL);
    pe_port_clock_init();
    if (pe_model_init() != PE_OK) {{
        pe_port_log("init failed\\n");
        return 2;
    }}
    for (k = 0; k < PE_MODEL_NUM_INPUTS; k++) {{
        void *p = pe_model_input(k, &n);
        if (p == NULL || off + n > sizeof app_input) {{
            return 3;
        }}
        memcpy(p, app_input + off, n);
        off += n;
    }}
    if (pe_model_invoke() != PE_OK) {{
        pe_port_log("invoke failed\\n");
        return 4;
    }}
{check[1]}    for (k = 0; k < PE_MODEL_NUM_OUTPUTS; k++) {{
        const uint8_t *p = (const uint8_t *)pe_model_output(k, &n);
        uint32_t i;
        pe_port_log("OUT");
        for (i = 0; i < n; i++) {{
            line[0] = ' ';
            line[1] = hex[p[i] >> 4];
            line[2] = hex[p[i] & 15u];
            line[3] = 0;
            pe_port_log(line);
        }}
        pe_port_log("\\n");
    }}
    return pe_port_now() > 0u ? 0 : 5;
}}
"""


def _app_ld(profile, sizes=None, sections=()):
    """The application's linker script on the profile's memory map (the user's MEMORY), naming
    the library's region aliases and INCLUDEing its fragment inside SECTIONS. sizes: {region:
    LENGTH} overrides."""
    from pyembed.codegen.firmware import system_region
    from pyembed.codegen.firmware.library import FLASH_ALIAS, region_alias
    sizes = sizes or {}
    sysr = system_region(profile).name
    mem, alias = [], [f'REGION_ALIAS("{FLASH_ALIAS}", FLASH);']
    for r in profile.regions.values():
        if r.is_flash and r.name != profile.flash_region:
            continue
        name = "FLASH" if r.is_flash else f"MEM_{r.name.upper()}"
        mem.append(f"    {name} ({'rx' if r.is_flash else 'rwx'}) : ORIGIN = {r.base}, LENGTH = "
                   f"{sizes.get(r.name, r.size)}")
        if not r.is_flash:
            alias.append(f'REGION_ALIAS("{region_alias(r.name)}", {name});')
    alias.append(f'REGION_ALIAS("RAM", MEM_{sysr.upper()});')
    marks = "".join(f"    __app_sec{k}_start = ADDR({s});\n    __app_sec{k}_end = ADDR({s}) + SIZEOF({s});\n"
                    for k, s in enumerate(sections))
    if sections:
        lo = f"ADDR({sections[0]})"
        for s in sections[1:]:
            lo = f"MIN({lo}, ADDR({s}))"
        marks += f"    __app_arena_lo = {lo};\n"
    return f"""ENTRY(Reset_Handler)
MEMORY
{{
{chr(10).join(mem)}
}}
{chr(10).join(alias)}
SECTIONS
{{
    .text : {{ KEEP(*(.vectors)) *(.text*) *(.rodata*) . = ALIGN(4); }} > FLASH
    .ARM.exidx : {{ *(.ARM.exidx* .gnu.linkonce.armexidx.*) }} > FLASH
    INCLUDE pyembed_sections.ld
{marks}    .data : {{ . = ALIGN(4); __data_start = .; *(.data*) . = ALIGN(4); __data_end = .; }} > RAM AT > FLASH
    __data_load = LOADADDR(.data);
    .bss (NOLOAD) : {{ . = ALIGN(4); __bss_start = .; *(.bss*) *(COMMON) . = ALIGN(4); __bss_end = .; }} > RAM
    __stack_top = ORIGIN(RAM) + LENGTH(RAM);
    ASSERT(__bss_end + 2048 <= __stack_top, "app: no room for the stack")
}}
"""


def _write_app(app, lib, board, graph, data, sizes=None, sections=()):
    from pyembed.codegen.firmware.boards import BOARDS
    profile = load_profile(board)
    app.mkdir(parents=True, exist_ok=True)
    flags = " ".join(BOARDS[board].cpu_flags)
    (app / "toolchain.cmake").write_text(f"""set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER {qemu.CC})
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
set(CMAKE_C_FLAGS_INIT "{flags} -O2")
set(CMAKE_EXE_LINKER_FLAGS_INIT "{flags}")
""")
    (app / "CMakeLists.txt").write_text(f"""cmake_minimum_required(VERSION 3.13)
project(app C)
add_subdirectory({lib} pyembed_model)
add_executable(app.elf main.c startup.c)
target_link_libraries(app.elf PRIVATE pyembed_model)
target_compile_options(app.elf PRIVATE -std=c99 -Wall -Wextra -Werror)
target_link_options(app.elf PRIVATE -nostartfiles --specs=nosys.specs -Wl,--gc-sections
                    -T${{CMAKE_CURRENT_SOURCE_DIR}}/app.ld)
set_target_properties(app.elf PROPERTIES LINK_DEPENDS ${{CMAKE_CURRENT_SOURCE_DIR}}/app.ld)
""")
    (app / "main.c").write_text(_main_c(graph, data, _placement_check(sections) if sections else ("", "")))
    (app / "startup.c").write_text(_STARTUP)
    (app / "app.ld").write_text(_app_ld(profile, sizes, sections))


def _cmake_build(app):
    build = app / "build"
    cfg = subprocess.run(["cmake", "-S", str(app), "-B", str(build), f"-DCMAKE_TOOLCHAIN_FILE={app}/toolchain.cmake"],
                         capture_output=True, text=True)
    assert cfg.returncode == 0, cfg.stdout + cfg.stderr
    return subprocess.run(["cmake", "--build", str(build), "-j", "2"], capture_output=True, text=True)


def _input(graph, seed):
    rng = np.random.default_rng(seed)
    xs = [rng.integers(-128, 128, size=graph.tensors[t].shape).astype(graph.tensors[t].dtype) for t in graph.inputs]
    return xs, b"".join(x.tobytes() for x in xs)


# ---------------------------------------------------------------- the library's contents

def _assert_no_harness_or_address(files):
    """No semihosting, main, startup or absolute address in the library's files."""
    for p in files:
        if p.suffix not in (".c", ".h", ".ld", ".txt", ".mk"):
            continue
        text = p.read_text()
        # the code, comments left out (pe_port.h's comment names semihosting as one log hook a board may give)
        code = (re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.DOTALL) if p.suffix in (".c", ".h", ".ld")
                else re.sub(r"#[^\n]*", " ", text))
        assert not re.search(r"semihost|SYS_WRITE0|bkpt\s+0xab|rdimon|0x18u|0x20026", code, re.IGNORECASE), p
        assert not re.search(r"\bmain\s*\(", code), p
        assert "Reset_Handler" not in code and ".vectors" not in code, p
        if p.suffix == ".ld":
            assert not re.search(r"0x[0-9A-Fa-f]+", text), p
            assert "MEMORY" not in code and "ORIGIN =" not in code, p
        else:
            # an address: an integer made a pointer; only the architecture's System Control Space
            # (SysTick, DWT, CPACR: 0xE000xxxx, the port layer's registers) may be one
            for m in re.findall(r"(?:\*\s*\)|uintptr_t\s*\))\s*\(?\s*0x([0-9A-Fa-f]+)", code):
                assert int(m, 16) >> 16 == 0xE000, f"{p}: address 0x{m}"
            if p.parent.name == "model" and p.name != "model_data.c":   # model_data.c: weight bytes in hex
                assert not re.search(r"0x[0-9A-Fa-f]{5,}", code), p


def test_library_holds_no_harness_and_no_address(tmp_path):
    """No main, startup, semihosting or absolute address in any generated file (the port layer's
    Cortex-M system registers, 0xE000xxxx, are the architecture's, not a memory plan's);
    the sections and sizes in firmware.json; only the runtime the model needs."""
    from pyembed import _csrc
    proj = _library("tflm_micro_speech_int8", "mps2-an386", tmp_path / "lib")
    d = proj.outdir
    files = [p for p in d.rglob("*") if p.is_file()]
    names = {p.relative_to(d).as_posix() for p in files}
    for n in ("CMakeLists.txt", "pyembed_model.mk", "pyembed_sections.ld", "README.md", "firmware.json",
              "model/pe_model.c", "model/pe_model.h", "model/model_ops.c", "port/pe_port.h", "port/pe_port.c"):
        assert n in names, n
    assert not any(n in names for n in ("main.c", "startup.c", "link.ld", "Makefile", "pe_target.c"))
    _assert_no_harness_or_address(files)
    j = json.loads((d / "firmware.json").read_text())
    assert j["layout"] == "library"
    used = j["regions"]["blockram"]["used"]
    assert j["sections"] == {".pe_arena_blockram": {"region": "blockram", "bytes": (used + 15) // 16 * 16,
                                                    "used": used, "region_alias": "PE_RAM_BLOCKRAM", "noload": True}}
    assert used == proj.plan.region_used()["blockram"] > 0
    assert j["flash_section"][".pe_flash"]["bytes"] == int(proj.plan.flash_size)
    pe_model = (d / "model/pe_model.c").read_text()
    assert "memory map" not in (d / "model/pe_model.h").read_text() and "ARENA_BASE" not in pe_model
    assert (f'static uint8_t pe_arena_blockram[{(used + 15) // 16 * 16}]\n    __attribute__((section('
            f'".pe_arena_blockram"), aligned(16), used));') in pe_model
    ld = (d / "pyembed_sections.ld").read_text()
    assert ".pe_arena_blockram (NOLOAD) : ALIGN(16)" in ld and "} > PE_RAM_BLOCKRAM" in ld and "} > PE_FLASH" in ld
    # the runtime: the project's selection without the full table, not the whole of it
    rt = sorted(p.relative_to(d / "pyembed" / "src").as_posix() for p in (d / "pyembed" / "src").rglob("*.c"))
    every = [os.path.relpath(p, _csrc.csrc_dir() / "src") for p in _csrc.all_sources()]
    assert _csrc.FULL_TABLE not in " ".join(rt)
    assert set(rt) < set(every) and "graph/pe_graph.c" in rt
    assert not {"kernels/attention/pe_transformer.c", "sched/pe_sched.c", "graph/pe_run_lstm.c"} & set(rt)
    # the three lists name the same sources
    srcs = j["sources"]
    cm = (d / "CMakeLists.txt").read_text()
    mk = (d / "pyembed_model.mk").read_text()
    assert sorted(f"pyembed/src/{r}" for r in rt) == sorted(s for s in srcs if s.startswith("pyembed/"))
    for s in srcs:
        assert f"    {s}\n" in cm and f"$(PYEMBED_MODEL_DIR){s}" in mk, s
    assert "add_library(pyembed_model STATIC" in cm
    assert j["cpu_flags_assumed"] == "-mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16"
    assert j["dsp_extension"] is True and "DSP extension" in cm


def test_cli_layout_library(tmp_path):
    """--layout library through the command; --run with it is refused."""
    from pyembed.cli import main
    out = tmp_path / "lib"
    r = CliRunner().invoke(main, ["firmware", "tflm_hello_world_int8", "--profile", "microbit", "--layout",
                                  "library", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "library" in r.output and "pyembed_sections.ld" in r.output
    assert json.loads((out / "firmware.json").read_text())["layout"] == "library"
    r = CliRunner().invoke(main, ["firmware", "tflm_hello_world_int8", "--profile", "microbit", "--layout",
                                  "library", "--run"])
    assert r.exit_code == 2 and "--layout library" in r.output, r.output


def test_plan_over_several_regions(tmp_path):
    """keyword spotting's plan on mps2-an386 spans block RAM and SSRAM2/3: the library keeps both
    regions (the API and the command alike), each its own array, section, region alias and
    ASSERTs; the tables pe_model_init relocates are in RAM and firmware.json counts them; no
    address in any file (the stand-in offsets are small numbers, not addresses)."""
    from pyembed.cli import main
    from pyembed.codegen.firmware.library import relocations
    from pyembed.target.firmware import generate
    g = _graph("tiny_kws_dscnn_int8")
    proj = generate(g, "mps2-an386", tmp_path / "api", library=True)
    used = proj.plan.region_used()
    assert used["blockram"] > 0 and used["ssram23"] > 0
    j = json.loads((tmp_path / "api" / "firmware.json").read_text())
    assert list(j["sections"]) == [".pe_arena_blockram", ".pe_arena_ssram23"]
    for n in ("blockram", "ssram23"):
        assert j["sections"][f".pe_arena_{n}"] == {"region": n, "bytes": (used[n] + 15) // 16 * 16, "used": used[n],
                                                    "region_alias": f"PE_RAM_{n.upper()}", "noload": True}
    rel = j["relocation"]
    assert rel["regions"] == {"blockram": {"stand_in_offset": 0, "bytes": j["sections"][".pe_arena_blockram"]["bytes"]},
                              "ssram23": {"stand_in_offset": j["sections"][".pe_arena_blockram"]["bytes"],
                                          "bytes": j["sections"][".pe_arena_ssram23"]["bytes"]}}
    # every activation of the table and every scratch buffer is relocated, none twice
    _, reloc = relocations(proj.graph, proj.plan, [(n, b["bytes"]) for n, b in rel["regions"].items()])
    from pyembed.codegen import emit
    tensors, ops = emit.runtime_tables(proj.graph, proj.layout)
    assert [k for k, _ in reloc["tensors"]] == [k for k, t in enumerate(tensors) if t["offset"] >= 0]
    assert [k for k, _ in reloc["scratch"]] == [k for k, o in enumerate(ops) if o["scratch_size"] > 0]
    assert {r for _, r in reloc["tensors"] + reloc["scratch"]} == {0, 1}
    assert rel["tensor_offsets"] == len(reloc["tensors"]) and rel["scratch_offsets"] == len(reloc["scratch"])
    assert rel["ram_bytes"] == sum(rel["ram_tables"].values()) > 0
    ld = (tmp_path / "api" / "pyembed_sections.ld").read_text()
    for n in ("blockram", "ssram23"):
        assert f".pe_arena_{n} (NOLOAD) : ALIGN(16)" in ld and f"}} > PE_RAM_{n.upper()}" in ld
        assert f'"pyembed: memory region PE_RAM_{n.upper()} is smaller than' in ld
    pe_model = (tmp_path / "api" / "model" / "pe_model.c").read_text()
    assert "pe_model_relocate" in pe_model and "static uint8_t pe_arena_ssram23[" in pe_model
    _assert_no_harness_or_address([p for p in (tmp_path / "api").rglob("*") if p.is_file()])
    r = CliRunner().invoke(main, ["firmware", "tiny_kws_dscnn_int8", "--profile", "mps2-an386", "--layout", "library",
                                  "-o", str(tmp_path / "lib"), "--strategy", "none", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert list(d["sections"]) == [".pe_arena_blockram", ".pe_arena_ssram23"] and d["fits"]
    assert d["relocation"]["ram_bytes"] > 0
    assert not any("alone" in ln for ln in d["pipeline"])


# ---------------------------------------------------------------- built into an application, run under QEMU

@needs_tools
@needs_cmake
@pytest.mark.parametrize("board,model", RUNS)
def test_application_bit_exact_under_qemu(board, model, tmp_path):
    graph = _graph(model)
    _library(model, board, tmp_path / "lib")
    xs, data = _input(graph, sum(map(ord, model + board)))
    _write_app(tmp_path / "app", tmp_path / "lib", board, graph, data)
    b = _cmake_build(tmp_path / "app")
    assert b.returncode == 0, b.stdout + b.stderr
    run = qemu.run(tmp_path / "app" / "build" / "app.elf", board, timeout=60)
    text = (run.stdout + run.stderr).decode(errors="replace")   # QEMU writes the semihosting console to stderr
    assert run.exit_code == 0, (run.exit_code, text)
    outs = [bytes(int(v, 16) for v in ln.split()[1:]) for ln in text.splitlines() if ln.startswith("OUT")]
    host = graph.run(xs if len(xs) > 1 else xs[0])
    host = list(host) if isinstance(host, (list, tuple)) else [host]
    assert len(outs) == len(host) == len(graph.outputs)
    for k, h in enumerate(host):
        h = np.asarray(h)
        fw = np.frombuffer(outs[k], dtype=h.dtype)
        assert fw.size == h.size, (k, fw.size, h.size)
        bad = np.flatnonzero(fw != h.ravel())
        assert bad.size == 0, f"{board} output {k}: {bad.size} elements differ from the host run"


@needs_tools
@needs_cmake
def test_two_regions_bit_exact_under_qemu(tmp_path):
    """keyword spotting's library over block RAM and SSRAM2/3 on mps2-an386: the application's link
    puts each section in its own memory, pe_model_init relocates the tables, the outputs equal
    the host runtime's; the tables in .data are the bytes firmware.json counts."""
    from pyembed.codegen.firmware.library import GRAPH_BYTES, OP_ROW_BYTES, TENSOR_ROW_BYTES
    board, model = "mps2-an386", "tiny_kws_dscnn_int8"
    graph = _graph(model)
    proj = _library(model, board, tmp_path / "lib")
    j = json.loads((proj.outdir / "firmware.json").read_text())
    xs, data = _input(graph, 35)
    sections = list(j["sections"])
    _write_app(tmp_path / "app", tmp_path / "lib", board, graph, data, sections=sections)
    b = _cmake_build(tmp_path / "app")
    assert b.returncode == 0, b.stdout + b.stderr
    elf = tmp_path / "app" / "build" / "app.elf"
    secs = subprocess.run([qemu.CC.replace("gcc", "readelf"), "-SW", str(elf)], capture_output=True, text=True,
                          check=True).stdout
    profile = load_profile(board)
    for n in ("blockram", "ssram23"):
        m = re.search(rf"\.pe_arena_{n}\s+NOBITS\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)", secs)
        assert m, secs
        addr, size = int(m.group(1), 16), int(m.group(2), 16)
        reg = profile.regions[n]
        assert size == j["sections"][f".pe_arena_{n}"]["bytes"] and reg.base <= addr < addr + size <= reg.base + reg.size
    syms = subprocess.run([qemu.CC.replace("gcc", "nm"), "-S", str(elf)], capture_output=True, text=True,
                          check=True).stdout
    sizes = {ln.split()[3]: (int(ln.split()[1], 16), ln.split()[2]) for ln in syms.splitlines() if len(ln.split()) == 4}
    ram = j["relocation"]["ram_tables"]
    assert sizes["pe_model_tensors"] == (ram["tensor_table"], "D") and ram["tensor_table"] % TENSOR_ROW_BYTES == 0
    assert sizes["pe_model_ops"] == (ram["op_table"], "D") and ram["op_table"] % OP_ROW_BYTES == 0
    assert sizes["pe_model_graph"] == (GRAPH_BYTES, "D") == (ram["graph"], "D")
    run = qemu.run(elf, board, timeout=60)
    text = (run.stdout + run.stderr).decode(errors="replace")
    assert run.exit_code == 0, (run.exit_code, text)
    # each buffer the relocated tables address lies in the section of the region the plan put it in
    from pyembed.codegen import emit
    plan = proj.plan
    tensors, ops = emit.runtime_tables(proj.graph, proj.layout)
    scratch_region = {int(buf.op): plan.regions[plan.placement[i][0]].name for i, buf in enumerate(plan.buffers)
                      if getattr(buf, "kind", "") == "scratch" and getattr(buf, "op", None) is not None}
    want = [plan.tensor_location(t["tensor"])[0] for t in tensors if t["offset"] >= 0 and t["bytes"] > 0]
    want += [scratch_region[o["op"]] for o in ops if o["scratch_offset"] >= 0 and o["scratch_size"] > 0]
    placed = [ln.split()[1:] for ln in text.splitlines() if ln.startswith("PLACED")]
    assert placed == [[f"{want.count(s[len('.pe_arena_'):]):02x}" for s in sections]], (placed, text)
    assert all(want.count(s[len(".pe_arena_"):]) > 0 for s in sections)
    outs = [bytes(int(v, 16) for v in ln.split()[1:]) for ln in text.splitlines() if ln.startswith("OUT")]
    host = np.asarray(graph.run(xs[0]))
    assert len(outs) == 1 == len(graph.outputs)
    fw = np.frombuffer(outs[0], dtype=host.dtype)
    assert fw.size == host.size and np.array_equal(fw, host.ravel()), (fw, host.ravel())


@needs_tools
@needs_cmake
@pytest.mark.parametrize("model", ["tflm_micro_speech_int8", "tiny_kws_dscnn_int8"])
def test_region_too_small_fails_the_link(model, tmp_path):
    """The user's memory region holding .pe_arena_blockram made 16 B smaller than the planned
    section: the link fails with the fragment's ASSERT message; for keyword spotting, a library
    over two regions (block RAM and SSRAM2/3), the other region being large enough."""
    graph = _graph(model)
    proj = _library(model, "mps2-an386", tmp_path / "lib")
    secs = json.loads((proj.outdir / "firmware.json").read_text())["sections"]
    assert len(secs) == (2 if model == "tiny_kws_dscnn_int8" else 1)
    arena = secs[".pe_arena_blockram"]["bytes"]
    _, data = _input(graph, 1)
    _write_app(tmp_path / "app", tmp_path / "lib", "mps2-an386", graph, data, sizes={"blockram": arena - 16})
    b = _cmake_build(tmp_path / "app")
    assert b.returncode != 0
    assert f"pyembed: memory region PE_RAM_BLOCKRAM is smaller than the {arena} B planned for region blockram" \
        in b.stdout + b.stderr, b.stdout + b.stderr


@needs_tools
def test_makefile_fragment_links(tmp_path):
    """The plain-Makefile route: a user's Makefile including pyembed_model.mk builds and links the
    same application (no QEMU run: the CMake tests run it); the arena section sits inside the
    user's region at an address the link chose, of the planned size."""
    if shutil.which("make") is None:
        pytest.skip("make not installed")
    from pyembed.codegen.firmware.boards import BOARDS
    graph = _graph("tflm_hello_world_int8")
    proj = _library("tflm_hello_world_int8", "microbit", tmp_path / "lib")
    _, data = _input(graph, 2)
    app = tmp_path / "app"
    _write_app(app, tmp_path / "lib", "microbit", graph, data)
    flags = " ".join(BOARDS["microbit"].cpu_flags)
    (app / "Makefile").write_text(f"""include {tmp_path / 'lib'}/pyembed_model.mk
CC := {qemu.CC}
CPU := {flags}
SRCS := main.c startup.c $(PYEMBED_MODEL_SRCS)
CFLAGS := $(CPU) -O2 $(PYEMBED_MODEL_INC) $(PYEMBED_MODEL_CFLAGS)
LDFLAGS := $(CPU) -nostartfiles --specs=nosys.specs -Wl,--gc-sections $(PYEMBED_MODEL_LDFLAGS) -Tapp.ld
app.elf: $(SRCS) app.ld
\t$(CC) $(CFLAGS) $(SRCS) $(LDFLAGS) -lm -o $@
""")
    b = subprocess.run(["make", "-s"], cwd=app, capture_output=True, text=True)
    assert b.returncode == 0, b.stdout + b.stderr
    secs = subprocess.run([qemu.CC.replace("gcc", "readelf"), "-SW", str(app / "app.elf")], capture_output=True,
                          text=True, check=True).stdout
    m = re.search(r"\.pe_arena_sram\s+NOBITS\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)", secs)
    assert m, secs
    addr, size = int(m.group(1), 16), int(m.group(2), 16)
    sram = load_profile("microbit").regions["sram"]
    want = json.loads((proj.outdir / "firmware.json").read_text())["sections"][".pe_arena_sram"]["bytes"]
    assert size == want and addr % 16 == 0 and sram.base <= addr and addr + size <= sram.base + sram.size
