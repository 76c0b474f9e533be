"""Simulated memory: every region of a profile is a byte array at its address range.

* ``Memory.view(region, offset, nbytes, dtype, shape)`` hands the kernels a numpy
  view into the region's bytes (so the real C kernels write simulated RAM);
  a range outside the region is a fault.
* Flash is programmed before the firmware starts (``program``) and is read-only
  while it runs: the simulator's own accesses (``write``) fault at once, and the
  kernels' raw pointers are caught by ``WriteWatch``, which compares flash with
  its programmed image after every operator.
* ``WriteWatch`` also implements the guard bytes: before an operator it
  snapshots RAM, afterwards every changed byte must lie inside a buffer the
  operator may write (its outputs and its scratch). Every other byte — free
  memory filled with the guard pattern, the gaps between buffers, other live
  tensors — is a guard, so an overrun of any length is caught, and the fault
  names the address, the region, the operator and the buffers involved.
"""
import dataclasses

import numpy as np

from pyembed.errors import SimulationFault

GUARD_BYTE = 0xA5


def fault(message, **details):
    """A SimulationFault carrying machine-readable details (address, region, ...)."""
    exc = SimulationFault(message)
    exc.details = details
    exc.trace = None      # the simulator attaches the timeline up to the fault
    exc.cycle = details.get("cycle")
    return exc


@dataclasses.dataclass(frozen=True)
class Buffer:
    """A planned byte range: what it holds (name, tensor, role) and where."""
    name: str
    region: str
    offset: int
    nbytes: int
    role: str = "activation"      # activation | input | output | scratch | weights | segment | ...
    tensor: int | None = None

    @property
    def end(self):
        return self.offset + self.nbytes


class Region:
    """One region's bytes: ``data`` is a uint8 view of the machine's host array,
    starting ``host_offset`` bytes into it."""

    def __init__(self, spec, host, host_offset):
        self.spec = spec
        self.name = spec.name
        self.base = spec.base
        self.size = spec.size
        self.kind = spec.kind
        self.is_flash = spec.is_flash
        self.host_offset = host_offset
        self.data = host[host_offset:host_offset + spec.size]

    def address(self, offset):
        return self.base + offset

    def __repr__(self):
        return f"<Region {self.name} {self.kind} 0x{self.base:08X}+{self.size}>"


class Memory:
    def __init__(self, profile, guard_byte=GUARD_BYTE):
        self.profile = profile
        # all regions live in one host array (RAM regions first, in address order), so
        # that a kernel arena spanning several RAM regions is a single pointer
        specs = sorted(profile.regions.values(), key=lambda r: (r.is_flash, r.base))
        self.host = np.zeros(sum(r.size for r in specs), dtype=np.uint8)
        self.regions, off = {}, 0
        for spec in specs:
            self.regions[spec.name] = Region(spec, self.host, off)
            off += spec.size
        self._by_base = sorted(self.regions.values(), key=lambda r: r.base)
        self.guard_byte = guard_byte
        self.running = False          # flash is locked while the firmware runs
        self.flash_image = {}         # region -> copy of the programmed bytes (taken at lock())
        self.programmed = {}          # region -> end of the highest programmed byte
        for r in self.regions.values():
            if not r.is_flash:
                r.data[:] = guard_byte
        self.buffers = []             # every planned Buffer, for naming faults
        self.golden = []              # (region, offset, bytes) of every program() call: the image
                                      # the build produced, for the boot-time integrity check

    # --- lookups ------------------------------------------------------------
    def region(self, name):
        try:
            return self.regions[name]
        except KeyError:
            raise fault(f"no region named {name!r} on {self.profile.name} "
                        f"(regions: {', '.join(self.regions)})", region=name) from None

    def locate(self, address, nbytes=1):
        """(region, offset) of an absolute address range; a fault if it is not
        entirely inside one region."""
        for r in self._by_base:
            if r.base <= address < r.base + r.size:
                off = address - r.base
                if off + nbytes > r.size:
                    raise fault(f"access 0x{address:08X}+{nbytes} runs past the end of region {r.name} "
                                f"(0x{r.base:08X}..0x{r.base + r.size:08X})", address=address, region=r.name)
                return r, off
        raise fault(f"access 0x{address:08X}+{nbytes} is outside every memory region of {self.profile.name}",
                    address=address)

    def buffers_at(self, region, offset):
        return [b for b in self.buffers if b.region == region and b.offset <= offset < b.end]

    def describe_address(self, region, offset):
        owners = self.buffers_at(region, offset)
        where = ", ".join(f"{b.name} ({b.role}, +{offset - b.offset})" for b in owners)
        return where or "no planned buffer (guard bytes)"

    # --- access ---------------------------------------------------------------
    def check_range(self, region, offset, nbytes, who="access"):
        r = self.region(region)
        if offset < 0 or nbytes < 0 or offset + nbytes > r.size:
            raise fault(f"{who}: [{offset}, {offset + nbytes}) is outside region {r.name} "
                        f"({r.size} bytes at 0x{r.base:08X}); address 0x{r.base + max(offset, 0):08X}",
                        address=r.base + max(offset, 0), region=r.name, offset=offset, nbytes=nbytes)
        return r

    def view(self, region, offset, nbytes, dtype=np.uint8, shape=None, who="view"):
        """A numpy view of nbytes at region+offset, typed and shaped."""
        r = self.check_range(region, offset, nbytes, who)
        dtype = np.dtype(dtype)
        if nbytes % dtype.itemsize:
            raise fault(f"{who}: {nbytes} bytes is not a whole number of {dtype.name}", region=r.name)
        v = r.data[offset:offset + nbytes].view(dtype)
        if shape is not None:
            v = v.reshape(shape)
        return v

    def buffer_view(self, buf, dtype=np.uint8, shape=None, who=None):
        return self.view(buf.region, buf.offset, buf.nbytes, dtype, shape, who or buf.name)

    def program(self, region, offset, data):
        """Write initial contents (flash programming, or RAM initialised by the loader).
        Only before the firmware runs for flash."""
        r = self.region(region)
        payload = np.frombuffer(bytes(data), dtype=np.uint8) if not isinstance(data, np.ndarray) \
            else np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        self.check_range(region, offset, payload.size, "program")
        if r.is_flash and self.running:
            raise fault(f"program: flash region {r.name} is read-only while the firmware runs "
                        f"(address 0x{r.base + offset:08X})", address=r.base + offset, region=r.name)
        r.data[offset:offset + payload.size] = payload
        self.programmed[r.name] = max(self.programmed.get(r.name, 0), offset + payload.size)
        if r.is_flash:
            self.golden.append((r.name, offset, payload.copy()))

    def verify_programmed(self, cycle=0):
        """The firmware's boot-time image check (a CRC over flash on real parts):
        every programmed flash byte must still equal what program() wrote, and
        flash beyond the programmed image must still be erased. A flipped bit
        is a fault naming the address, the buffer and the cycle."""
        for name, offset, image in self.golden:
            r = self.regions[name]
            diff = np.flatnonzero(r.data[offset:offset + image.size] != image)
            if diff.size:
                off = offset + int(diff[0])
                addr = r.base + off
                raise fault(f"flash image check at cycle {cycle}: {diff.size} byte(s) differ from the programmed "
                            f"image, first at 0x{addr:08X} (region {name}, offset {off}: "
                            f"{self.describe_address(name, off)}): read 0x{int(r.data[off]):02X}, "
                            f"programmed 0x{int(image[diff[0]]):02X}",
                            address=addr, region=name, offset=off, bytes=int(diff.size), cycle=cycle)
        for r in self.regions.values():
            end = self.programmed.get(r.name, 0)
            if not r.is_flash or end >= r.size:
                continue
            stray = np.flatnonzero(r.data[end:])     # never programmed: must still be erased (zero)
            if stray.size:
                off = end + int(stray[0])
                raise fault(f"flash image check at cycle {cycle}: {stray.size} byte(s) beyond the programmed "
                            f"image are not erased, first at 0x{r.base + off:08X} (region {r.name}, offset {off}: "
                            f"{self.describe_address(r.name, off)}): read 0x{int(r.data[off]):02X}",
                            address=r.base + off, region=r.name, offset=off, bytes=int(stray.size), cycle=cycle)

    def write(self, address, data, who="write"):
        """A checked store by the simulated firmware itself (DMA, runtime)."""
        payload = np.frombuffer(bytes(data), dtype=np.uint8) if not isinstance(data, np.ndarray) \
            else np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        r, off = self.locate(address, payload.size)
        if r.is_flash and self.running:
            raise fault(f"{who}: write to flash at 0x{address:08X} (region {r.name}, "
                        f"{self.describe_address(r.name, off)}) while the firmware runs",
                        address=address, region=r.name)
        r.data[off:off + payload.size] = payload

    def read(self, address, nbytes):
        r, off = self.locate(address, nbytes)
        return r.data[off:off + nbytes].copy()

    def copy(self, src_region, src_offset, dst_region, dst_offset, nbytes, who="copy"):
        """Region-to-region copy (what a DMA transfer does when it completes)."""
        s = self.check_range(src_region, src_offset, nbytes, who)
        d = self.check_range(dst_region, dst_offset, nbytes, who)
        if d.is_flash and self.running:
            raise fault(f"{who}: DMA write to flash region {d.name} at 0x{d.base + dst_offset:08X}",
                        address=d.base + dst_offset, region=d.name)
        d.data[dst_offset:dst_offset + nbytes] = s.data[src_offset:src_offset + nbytes]

    # --- firmware lifecycle ---------------------------------------------------
    def lock(self):
        """The firmware starts: flash becomes read-only; remember its image."""
        self.flash_image = {r.name: r.data[:self.programmed.get(r.name, 0)].copy()
                            for r in self.regions.values() if r.is_flash}
        self.running = True

    def unlock(self):
        self.running = False


class WriteWatch:
    """Detects writes outside an operator's allowed buffers (and to flash).

        watch = WriteWatch(memory)
        watch.before()
        ... run the kernel on views ...
        watch.after(op_name, allowed=[out_buffer, scratch_buffer])   # raises on a stray write
    """

    def __init__(self, memory, regions=None):
        self.memory = memory
        names = regions if regions is not None else [r.name for r in memory.regions.values() if not r.is_flash]
        self.ram = [memory.regions[n] for n in names]
        self._snap = {}

    def before(self):
        self._snap = {r.name: r.data.copy() for r in self.ram}

    def after(self, op_name, allowed=(), cycle=None):
        mem = self.memory
        for r in self.ram:
            before = self._snap[r.name]
            changed = np.flatnonzero(before != r.data)
            if changed.size == 0:
                continue
            ok = np.zeros(changed.size, dtype=bool)
            for b in allowed:
                if b.region == r.name:
                    ok |= (changed >= b.offset) & (changed < b.end)
            bad = changed[~ok]
            if bad.size:
                off = int(bad[0])
                addr = r.base + off
                own = [b for b in allowed if b.region == r.name]
                near = min(own, key=lambda b: min(abs(off - b.offset), abs(off - b.end)), default=None)
                culprit = f"; its nearest own buffer is {near.name} [{near.offset}, {near.end})" if near else ""
                exc = fault(
                    f"operator {op_name} wrote outside its planned buffers: {bad.size} byte(s) changed, first at "
                    f"0x{addr:08X} (region {r.name}, offset {off}: {mem.describe_address(r.name, off)}){culprit}",
                    address=addr, region=r.name, offset=off, operator=op_name, bytes=int(bad.size),
                    buffer=near.name if near else None, cycle=cycle)
                # restore the victim bytes so a caller that catches the fault sees a sane memory
                r.data[bad] = before[bad]
                raise exc
        for name, image in mem.flash_image.items():
            r = mem.regions[name]
            diff = np.flatnonzero(image != r.data[:image.size])
            if diff.size == 0 and r.data[image.size:].any():   # never programmed: still erased (zero)
                diff = image.size + np.flatnonzero(r.data[image.size:])
                image = np.concatenate([image, np.zeros(r.size - image.size, np.uint8)])
            if diff.size:
                off = int(diff[0])
                addr = r.base + off
                exc = fault(f"operator {op_name} wrote to read-only flash: {diff.size} byte(s), first at "
                            f"0x{addr:08X} (region {name}, offset {off}: {mem.describe_address(name, off)})",
                            address=addr, region=name, offset=off, operator=op_name, bytes=int(diff.size),
                            cycle=cycle)
                r.data[diff] = image[diff]
                raise exc
