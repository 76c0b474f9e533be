"""MCU profiles: one JSON file per part, validated into plain dataclasses.

    from firmware_sim.profiles import list_profiles, load_profile
    list_profiles()                 -> ["nrf52840", "nucleo_h7a3zi", ...]
    p = load_profile("stm32f446")   # a bundled name, a path to a .json file,
                                    # or a name found in $PYEMBED_PROFILE_PATH
    p.clock_hz, p.regions["sram"].size, p.kernel_cost("conv").cycles_per_mac

A profile gives the clock, the memory regions (name, base address, size, kind,
CPU wait cycles per 32-bit word, bulk bandwidth), the internal and external
flash, the DMA engine and a cycle-cost table per kernel class. Cost tables are
shared per CPU core in ``cores.json`` (a profile names one, and may override
single entries); every figure carries a note saying where it comes from.

Users add parts by writing a JSON file like the bundled ones and either
passing its path or putting its directory on ``PYEMBED_PROFILE_PATH``
(os.pathsep-separated). Anything missing, negative or inconsistent raises
:class:`ProfileError` naming the file and the field.
"""
import dataclasses
import json
import math
import os

from pyembed.errors import PyEmbedError

BUNDLED_DIR = os.path.dirname(os.path.abspath(__file__))
CORES_FILE = os.path.join(BUNDLED_DIR, "cores.json")
# data files beside the profiles: the cost tables and the QEMU-calibrated instruction model
NOT_PROFILES = ("cores.json", "pyembed_icount.json")
ENV_PATH = "PYEMBED_PROFILE_PATH"

REGION_KINDS = ("ram", "tcm", "flash", "ext_flash")
FLASH_KINDS = ("flash", "ext_flash")
KERNEL_CLASSES = ("conv", "depthwise", "fc", "pool", "eltwise", "softmax", "copy", "alias", "other")
MB = 1_000_000  # bandwidths are in MB/s = 10^6 bytes per second


class ProfileError(PyEmbedError, ValueError):
    """A profile file is missing, malformed, or has missing / negative / inconsistent fields."""


@dataclasses.dataclass(frozen=True)
class RegionSpec:
    name: str
    base: int
    size: int
    kind: str              # ram | tcm | flash | ext_flash
    read_wait: float       # extra CPU cycles per 32-bit word read (sequential)
    write_wait: float      # extra CPU cycles per 32-bit word written
    bandwidth: int         # bulk transfer rate, bytes per second (DMA)
    source: str = ""

    @property
    def end(self):
        return self.base + self.size

    @property
    def is_flash(self):
        return self.kind in FLASH_KINDS


@dataclasses.dataclass(frozen=True)
class KernelCost:
    call_cycles: float
    cycles_per_mac: float
    cycles_per_element: float
    cycles_per_patch: float = 0.0    # per im2col element (conv with a kernel larger than 1x1), per call


@dataclasses.dataclass(frozen=True)
class DmaSpec:
    channels: int
    setup_cycles: int
    bandwidth: int          # bytes per second the engine itself moves
    memory_to_memory: bool
    source: str = ""
    cpu_stall_per_word: float = 0.0   # expected CPU stall cycles per 32-bit word a transfer writes to RAM
    contention_source: str = ""

    def cpu_slowdown(self, bytes_per_s, clock_hz):
        """Fraction by which a transfer moving bytes_per_s slows a CPU clocked at clock_hz."""
        return self.cpu_stall_per_word * bytes_per_s / 4.0 / clock_hz


@dataclasses.dataclass(frozen=True)
class Profile:
    name: str
    part: str
    core: str
    clock_hz: int
    regions: dict           # name -> RegionSpec, in file order
    flash_region: str
    flash_wait_states: int
    external_flash_region: str | None
    dma: DmaSpec
    kernel_costs: dict      # class -> KernelCost
    defaults: dict          # role -> region name (activations, weights, segment_source)
    cost_source: str
    sources: tuple
    path: str
    # pyembed's own kernels per instruction class (firmware_sim.icount), or None:
    # {"core", "build", "table", "source"} from the core's 'instruction_model' in cores.json
    instruction_model: dict | None = None

    def region(self, name):
        try:
            return self.regions[name]
        except KeyError:
            raise ProfileError(f"profile {self.name}: no region named {name!r} "
                               f"(regions: {', '.join(self.regions)})") from None

    def kernel_cost(self, kernel_class):
        return self.kernel_costs.get(kernel_class, self.kernel_costs["other"])

    @property
    def flash_read_bandwidth(self):
        return self.regions[self.flash_region].bandwidth

    @property
    def external_flash_bandwidth(self):
        if self.external_flash_region is None:
            return None
        return self.regions[self.external_flash_region].bandwidth

    def ram_regions(self):
        return [r for r in self.regions.values() if not r.is_flash]

    def cycles_to_ms(self, cycles):
        return cycles * 1000.0 / self.clock_hz

    def transfer_cycles(self, nbytes, src, dst, bandwidth_scale=1.0):
        """Cycles a DMA copy of nbytes from region src to region dst takes: setup plus
        the bytes at the slowest of source, destination and engine bandwidths."""
        bw = min(self.region(src).bandwidth, self.region(dst).bandwidth, self.dma.bandwidth)
        bw = bw * bandwidth_scale
        return int(self.dma.setup_cycles) + int(math.ceil(nbytes * self.clock_hz / bw))

    def describe(self):
        lines = [f"{self.name}: {self.part}, {self.core} at {self.clock_hz / 1e6:g} MHz"]
        for r in self.regions.values():
            lines.append(f"  {r.name:<10} {r.kind:<9} 0x{r.base:08X} {r.size // 1024:>6} KB  "
                         f"{r.bandwidth / MB:g} MB/s  wait {r.read_wait:g}/{r.write_wait:g}")
        lines.append(f"  DMA: {self.dma.channels} channel(s), {self.dma.bandwidth / MB:g} MB/s, "
                     f"setup {self.dma.setup_cycles} cycles")
        return "\n".join(lines)


def search_dirs():
    """Directories searched for profiles by name: $PYEMBED_PROFILE_PATH, then the bundled ones."""
    extra = [d for d in os.environ.get(ENV_PATH, "").split(os.pathsep) if d]
    return extra + [BUNDLED_DIR]


def list_profiles(extra_dirs=()):
    """Names of every profile found (user directories first, bundled last; a user file
    shadows a bundled one of the same name)."""
    names = []
    for d in list(extra_dirs) + search_dirs():
        if not os.path.isdir(d):
            continue
        for fn in sorted(os.listdir(d)):
            if fn.endswith(".json") and fn not in NOT_PROFILES and not fn.startswith("."):
                stem = fn[:-5]
                if stem not in names:
                    names.append(stem)
    return sorted(names)


def load_profile(name_or_path, extra_dirs=()):
    """Load and validate a profile by bundled/user name or by path to a JSON file.
    A Profile passes through unchanged."""
    if isinstance(name_or_path, Profile):
        return name_or_path
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise ProfileError(f"profile: expected a name or a path, got {name_or_path!r}")
    s = os.fspath(name_or_path)
    if os.path.sep in s or s.endswith(".json") or os.path.isfile(s):
        path = s
        if not os.path.isfile(path):
            raise ProfileError(f"profile file {path!r} does not exist")
    else:
        path = None
        for d in list(extra_dirs) + search_dirs():
            # names are case-insensitive: MPS2-AN386 finds mps2-an386.json
            for cand in (os.path.join(d, s + ".json"), os.path.join(d, s.lower() + ".json")):
                if os.path.isfile(cand):
                    path = cand
                    break
            if path is not None:
                break
        if path is None:
            # profile names are case-insensitive: STM32F446 is stm32f446
            for d in list(extra_dirs) + search_dirs():
                if not os.path.isdir(d):
                    continue
                hits = [f for f in sorted(os.listdir(d)) if f.lower() == s.lower() + ".json"]
                if hits:
                    path = os.path.join(d, hits[0])
                    break
        if path is None:
            raise ProfileError(f"unknown profile {s!r}; available: {', '.join(list_profiles(extra_dirs))} "
                               f"(or give a path to a .json file, or add a directory to ${ENV_PATH})")
    try:
        with open(path) as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise ProfileError(f"{path}: not valid JSON: {e}") from None
    return profile_from_dict(data, path)


# --- validation --------------------------------------------------------------

class _Fields:
    """Reads fields out of one JSON object, naming file and field path in errors."""

    def __init__(self, data, where):
        if not isinstance(data, dict):
            raise ProfileError(f"{where}: expected an object, got {type(data).__name__}")
        self.data = data
        self.where = where

    def _get(self, key, required):
        if key not in self.data or self.data[key] is None:
            if required:
                raise ProfileError(f"{self.where}: missing field {key!r}")
            return None
        return self.data[key]

    def str(self, key, required=True, default=None):
        v = self._get(key, required)
        if v is None:
            return default
        if not isinstance(v, str) or not v:
            raise ProfileError(f"{self.where}.{key}: expected a non-empty string, got {v!r}")
        return v

    def number(self, key, required=True, default=None, positive=False, integer=False):
        v = self._get(key, required)
        if v is None:
            return default
        if isinstance(v, str) and integer:
            try:
                v = int(v, 0)
            except ValueError:
                raise ProfileError(f"{self.where}.{key}: expected an integer, got {v!r}") from None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ProfileError(f"{self.where}.{key}: expected a number, got {v!r}")
        if integer and v != int(v):
            raise ProfileError(f"{self.where}.{key}: expected an integer, got {v!r}")
        if v < 0:
            raise ProfileError(f"{self.where}.{key}: must not be negative, got {v!r}")
        if positive and v == 0:
            raise ProfileError(f"{self.where}.{key}: must be positive, got {v!r}")
        return int(v) if integer else float(v)

    def obj(self, key, required=True):
        v = self._get(key, required)
        if v is None:
            return None
        return _Fields(v, f"{self.where}.{key}")


def _load_cores():
    with open(CORES_FILE) as f:
        return json.load(f)


def _cost_table(spec, where, cores):
    """Resolve a cost table: a core name from cores.json, or an object with optional
    'base' (core name) and per-class overrides."""
    overrides = {}
    if isinstance(spec, str):
        base_name = spec
    elif isinstance(spec, dict):
        base_name = spec.get("base")
        overrides = {k: v for k, v in spec.items() if k not in ("base", "source")}
    else:
        raise ProfileError(f"{where}: expected a core name or an object, got {spec!r}")
    table, source = {}, ""
    if base_name is not None:
        if base_name not in cores or base_name.startswith("_"):
            raise ProfileError(f"{where}: unknown core cost table {base_name!r}; "
                               f"known: {', '.join(k for k in cores if not k.startswith('_'))}")
        table, source = _core_table(base_name, cores)
    for cls, entry in overrides.items():
        if cls not in KERNEL_CLASSES:
            raise ProfileError(f"{where}: unknown kernel class {cls!r}; classes: {', '.join(KERNEL_CLASSES)}")
        table[cls] = _kernel_cost(entry, f"{where}.{cls}")
    missing = [c for c in KERNEL_CLASSES if c not in table]
    if missing:
        raise ProfileError(f"{where}: missing cost for kernel class(es) {', '.join(missing)}")
    return table, source


def _core_table(name, cores, depth=0):
    entry = cores[name]
    where = f"{CORES_FILE}:{name}"
    if depth > 4:
        raise ProfileError(f"{where}: derive_from chain too long")
    if "derive_from" in entry:
        base, _ = _core_table(entry["derive_from"], cores, depth + 1)
        f = _Fields(entry, where)
        sm = f.number("scale_mac", positive=True)
        so = f.number("scale_other", positive=True)
        table = {c: KernelCost(k.call_cycles * so, k.cycles_per_mac * sm, k.cycles_per_element * so,
                               k.cycles_per_patch * sm)
                 for c, k in base.items()}
        return table, entry.get("source", "")
    table = {}
    for cls in KERNEL_CLASSES:
        if cls not in entry:
            raise ProfileError(f"{where}: missing kernel class {cls!r}")
        table[cls] = _kernel_cost(entry[cls], f"{where}.{cls}")
    return table, entry.get("source", "")


ICOUNT_FILE = os.path.join(BUNDLED_DIR, "pyembed_icount.json")


def _instruction_model(spec, cores):
    """The calibrated instruction model a core table names ('instruction_model':
    {"core", "build"}), read from pyembed_icount.json (written by
    python -m pyembed.bench calibrate --qemu-write); None when the core has none
    or the file does not exist."""
    name = spec if isinstance(spec, str) else (spec.get("base") if isinstance(spec, dict) else None)
    entry = cores.get(name) if name else None
    im = entry.get("instruction_model") if isinstance(entry, dict) else None
    if not im or not os.path.isfile(ICOUNT_FILE):
        return None
    with open(ICOUNT_FILE) as f:
        doc = json.load(f)
    try:
        table = doc["tables"][im["core"]][im["build"]]
    except KeyError:
        raise ProfileError(f"{CORES_FILE}:{name}.instruction_model: {ICOUNT_FILE} has no table for "
                           f"{im.get('core')!r} / {im.get('build')!r}") from None
    return {"core": im["core"], "build": im["build"], "table": table,
            "source": (f"pyembed's kernels ({im['build']} build) measured under QEMU: instructions per operator "
                       f"predicted from its shape, x the CPI of the measured instruction mix "
                       f"({doc['cpi_source'][im['core']]}); {os.path.basename(ICOUNT_FILE)}")}


def _kernel_cost(entry, where):
    f = _Fields(entry, where)
    return KernelCost(f.number("call_cycles"), f.number("cycles_per_mac"), f.number("cycles_per_element"),
                      f.number("cycles_per_patch", required=False, default=0.0))


def profile_from_dict(data, path="<dict>", cores=None):
    top = _Fields(data, path)
    name = top.str("name")
    clock = top.number("clock_hz", positive=True, integer=True)
    regions = {}
    raw_regions = top._get("regions", True)
    if not isinstance(raw_regions, list) or not raw_regions:
        raise ProfileError(f"{path}.regions: expected a non-empty list of regions")
    for i, raw in enumerate(raw_regions):
        f = _Fields(raw, f"{path}.regions[{i}]")
        rname = f.str("name")
        f.where = f"{path}.regions[{rname}]"
        kind = f.str("kind")
        if kind not in REGION_KINDS:
            raise ProfileError(f"{f.where}.kind: expected one of {', '.join(REGION_KINDS)}, got {kind!r}")
        if rname in regions:
            raise ProfileError(f"{path}: two regions named {rname!r}")
        r = RegionSpec(
            name=rname, base=f.number("base", integer=True), size=f.number("size", positive=True, integer=True),
            kind=kind, read_wait=f.number("read_wait"), write_wait=f.number("write_wait"),
            bandwidth=int(f.number("bandwidth_mb_s", positive=True) * MB), source=f.str("source", required=False, default=""))
        if r.end > 1 << 32:
            raise ProfileError(f"{f.where}: 0x{r.base:X} + {r.size} runs past the 32-bit address space")
        regions[rname] = r
    ordered = sorted(regions.values(), key=lambda r: r.base)
    for a, b in zip(ordered, ordered[1:]):
        if b.base < a.end:
            raise ProfileError(f"{path}: regions {a.name} [0x{a.base:08X}, 0x{a.end:08X}) and "
                               f"{b.name} [0x{b.base:08X}, 0x{b.end:08X}) overlap")
    if not any(not r.is_flash for r in regions.values()):
        raise ProfileError(f"{path}: no RAM region (kind ram or tcm)")

    fl = top.obj("flash")
    flash_region = fl.str("region")
    if flash_region not in regions or not regions[flash_region].is_flash:
        raise ProfileError(f"{fl.where}.region: {flash_region!r} is not a flash region of this profile")
    wait_states = fl.number("wait_states", integer=True)

    ext = top.obj("external_flash", required=False)
    ext_region = None
    if ext is not None:
        ext_region = ext.str("region")
        if ext_region not in regions or regions[ext_region].kind != "ext_flash":
            raise ProfileError(f"{ext.where}.region: {ext_region!r} is not an ext_flash region of this profile")

    d = top.obj("dma")
    m2m = d._get("memory_to_memory", True)
    if not isinstance(m2m, bool):
        raise ProfileError(f"{d.where}.memory_to_memory: expected true or false, got {m2m!r}")
    dma = DmaSpec(channels=d.number("channels", positive=True, integer=True),
                  setup_cycles=d.number("setup_cycles", integer=True),
                  bandwidth=int(d.number("bandwidth_mb_s", positive=True) * MB),
                  memory_to_memory=m2m, source=d.str("source", required=False, default=""),
                  cpu_stall_per_word=d.number("cpu_stall_per_word", required=False, default=0.0),
                  contention_source=d.str("contention_source", required=False, default=""))

    if "kernel_costs" not in data:
        raise ProfileError(f"{path}: missing field 'kernel_costs' (a core name from cores.json or a table)")
    cores = cores if cores is not None else _load_cores()
    costs, cost_source = _cost_table(data["kernel_costs"], f"{path}.kernel_costs", cores)
    imodel = _instruction_model(data["kernel_costs"], cores)

    defaults = {}
    dd = top.obj("defaults", required=False)
    if dd is not None:
        for role, rname in dd.data.items():
            if rname not in regions:
                raise ProfileError(f"{dd.where}.{role}: no region named {rname!r}")
            defaults[role] = rname
    defaults.setdefault("activations", max((r for r in regions.values() if not r.is_flash),
                                           key=lambda r: r.size).name)
    defaults.setdefault("weights", flash_region)
    if ext_region is not None:
        defaults.setdefault("segment_source", ext_region)
    sources = data.get("sources", [])
    return Profile(name=name, part=top.str("part", required=False, default=name), core=top.str("core"),
                   clock_hz=clock, regions=regions, flash_region=flash_region, flash_wait_states=wait_states,
                   external_flash_region=ext_region, dma=dma, kernel_costs=costs, defaults=defaults,
                   cost_source=cost_source, sources=tuple(sources), path=path, instruction_model=imodel)
