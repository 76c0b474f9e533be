"""The house rules of the package layout (README "Layout").

Every import of a pyembed / firmware_sim module, at module level or inside a
function, is read from the source with ast. The rules:

* every imported pyembed / firmware_sim module exists;
* layers import only downward (a module may import its own layer, every lower
  layer, and nothing above), with firmware_sim using only kernels, model and
  plan (and the foundation);
* there is no import cycle between modules, counting function-level imports;
* no module is longer than MAX_LINES.
"""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
MAX_LINES = 900

# layer rank of each top-level room; a module may import ranks <= its own
RANK = {
    "pyembed": 0,            # pyembed/__init__.py: lazy public names only (imports by name at run time)
    "pyembed.errors": 0,
    "pyembed._validate": 0,
    "pyembed._csrc": 0,
    "pyembed.data": 0,
    "pyembed._ext": 1,
    "pyembed.kernels": 2,
    "pyembed.model": 3,
    "pyembed.passes": 4,
    "pyembed.plan": 5,
    "pyembed.codegen": 6,
    "firmware_sim": 6,
    "pyembed.target": 7,
    "pyembed.schedule": 8,
    "pyembed.check": 9,
    "pyembed.cli": 10,
    "pyembed.bench": 11,
    "pyembed.__main__": 11,
}
# rooms that may not import each other although ranks would allow it
FORBIDDEN = {("firmware_sim", "pyembed.codegen")}


def _modules():
    mods = {}
    for top in ("pyembed", "firmware_sim"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = path
    for path in sorted((ROOT / "pyembed" / "_ext").glob("*.pyx")):
        mods["pyembed._ext." + path.stem] = None
    return mods


MODULES = _modules()


def _room(mod):
    best = None
    for room in RANK:
        if mod == room or mod.startswith(room + "."):
            if best is None or len(room) > len(best):
                best = room
    return best


def _imports(mod, path):
    """(imported module, line) for every pyembed / firmware_sim import in the file."""
    tree = ast.parse(path.read_text(), str(path))
    pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out.append((a.name, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")
                up = up[:len(up) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                # "from pkg import submodule" imports the submodule
                out.append((sub if sub in MODULES else base, node.lineno))
    return [(m, line) for m, line in out if m.split(".")[0] in ("pyembed", "firmware_sim")]


EDGES = {mod: _imports(mod, path) for mod, path in MODULES.items() if path is not None}


def test_every_imported_module_exists():
    missing = [f"{mod}:{line} imports {target}" for mod, edges in EDGES.items() for target, line in edges
               if target not in MODULES]
    assert missing == []


def test_layers_import_only_downward():
    bad = []
    for mod, edges in EDGES.items():
        if mod == "pyembed":
            continue
        room = _room(mod)
        assert room is not None, f"{mod} is in no room of RANK: add it to the layout"
        for target, line in edges:
            troom = _room(target)
            if troom is None:
                bad.append(f"{mod}:{line} imports {target}, which is in no room")
            elif RANK[troom] > RANK[room] or (room, troom) in FORBIDDEN or (troom, room) in FORBIDDEN:
                bad.append(f"{mod}:{line} ({room}) imports {target} ({troom})")
    assert bad == []


def test_no_import_cycle():
    graph = {m: sorted({t for t, _ in e if t in MODULES and t != m}) for m, e in EDGES.items()}
    state, stack, cycles = {}, [], []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for t in graph.get(m, ()):
            if state.get(t) == 1:
                cycles.append(stack[stack.index(t):] + [t])
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert cycles == [], "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


@pytest.mark.parametrize("mod", sorted(m for m, p in MODULES.items() if p is not None))
def test_module_size(mod):
    n = len(MODULES[mod].read_text().splitlines())
    assert n <= MAX_LINES, f"{MODULES[mod]} has {n} lines (at most {MAX_LINES}): split it"


def test_the_checker_sees_a_cycle_and_an_upward_import(tmp_path):
    """The rules are live: a planted upward import and cycle are found."""
    a = tmp_path / "a.py"
    a.write_text("def f():\n    from pyembed.cli import main\n")
    edges = _imports("pyembed.kernels.fake", a)
    assert ("pyembed.cli", 2) in edges
    assert RANK[_room("pyembed.cli")] > RANK[_room("pyembed.kernels.fake")]
