# tests/snapshot/snapshot_oracle.py — what a PyTorch memory snapshot says, derived from the snapshot alone.
"""An oracle for the snapshot import, independent of gpumem-report: it reads a `_dump_snapshot()` pickle with
a restricted unpickler (plain data only: any global is refused) and derives, per device,

- the state at the start of the history: the final segments and blocks (`segments`) unwound through the
  history (`device_traces`) from its last entry to its first;
- the reserved and allocated timelines (one point per history entry, after the starting state), their
  peaks and when they were first reached;
- the state at any point of the timeline: the cached segments (every one, also those holding no block),
  the mapped ranges of expandable segments, the live blocks, and the fragmentation figures;
- the OOMs, with the request and the device's free bytes PyTorch recorded;
- what is inconsistent (a block outside every segment, a history entry the final state contradicts).

Definitions (docs/trace-format.md, "PyTorch snapshot import", states them for the report):
- a block is live from its `alloc` to its `free_completed` (to its `free_requested` in a history recorded
  without `free_completed`); its bytes are the requested size (`requested_size` in `segments`, `size` in
  the history), as memory_viz draws them;
- reserved = the bytes of live regular segments + the mapped bytes of expandable segments;
- the starting state is written at time 0; an entry at time_us T is at T - T0 (T0: the smallest time_us
  over every device), in ns;
- fragmentation at a moment: reserved = every cached segment, allocated = the live blocks' bytes, free =
  reserved - allocated, largest free block = the largest range of one segment (or one contiguous mapped
  range) that no live block covers, ratio = 1 - largest / free (0 when nothing is free).
"""
import bisect
import pickle

ACTIVE = ("active_allocated", "active_awaiting_free", "active_pending_free")


class RestrictedUnpickler(pickle.Unpickler):
    """Plain data only: dicts, lists, tuples, strings, numbers. A snapshot holds nothing else."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refused: the pickle names a global ({module}.{name})")


def load(path):
    with open(path, "rb") as f:
        return RestrictedUnpickler(f).load()


class Ranges:
    """Disjoint half-open ranges, merged where they touch (the importer's view of mapped memory)."""

    def __init__(self):
        self.starts, self.ends = [], []

    def add(self, start, end):
        if start >= end:
            return
        i = bisect.bisect_left(self.ends, start)  # first range ending at or after start
        j = i
        while j < len(self.starts) and self.starts[j] <= end:
            start, end = min(start, self.starts[j]), max(end, self.ends[j])
            j += 1
        self.starts[i:j], self.ends[i:j] = [start], [end]

    def remove(self, start, end):
        out_s, out_e = [], []
        for s, e in zip(self.starts, self.ends):
            if e <= start or s >= end:
                out_s.append(s), out_e.append(e)
                continue
            if s < start:
                out_s.append(s), out_e.append(start)
            if e > end:
                out_s.append(end), out_e.append(e)
        self.starts, self.ends = out_s, out_e

    def total(self):
        return sum(e - s for s, e in zip(self.starts, self.ends))

    def items(self):
        return list(zip(self.starts, self.ends))

    def copy(self):
        r = Ranges()
        r.starts, r.ends = list(self.starts), list(self.ends)
        return r


class State:
    """One device's memory at one moment."""

    def __init__(self):
        self.segments = {}     # regular segments: address -> size
        self.mapped = Ranges()  # expandable segments' mapped memory
        self.blocks = {}       # live blocks: address -> bytes

    def copy(self):
        s = State()
        s.segments, s.mapped, s.blocks = dict(self.segments), self.mapped.copy(), dict(self.blocks)
        return s

    def reserved(self):
        return sum(self.segments.values()) + self.mapped.total()

    def allocated(self):
        return sum(self.blocks.values())

    def containers(self):
        """Every cached range a block may lie in: regular segments and contiguous mapped ranges."""
        return sorted([(a, a + n) for a, n in self.segments.items()] + self.mapped.items())

    def container_of(self, addr, size=1):
        for s, e in self.containers():
            if s <= addr and addr + max(size, 1) <= e:
                return s
        return None

    def fragmentation(self):
        reserved, allocated = self.reserved(), self.allocated()
        blocks = sorted(self.blocks.items())
        largest = 0
        for start, end in self.containers():
            cursor = start
            i = bisect.bisect_left(blocks, (start, -1))
            while i < len(blocks) and blocks[i][0] < end:
                largest = max(largest, blocks[i][0] - cursor)
                cursor = max(cursor, blocks[i][0] + blocks[i][1])
                i += 1
            largest = max(largest, end - cursor)
        free = max(reserved - allocated, 0)
        ratio = 0.0 if free == 0 else 1.0 - largest / free
        return {"reserved": reserved, "allocated": allocated, "free_in_reserved": free,
                "largest_free_block": largest, "ratio": ratio}


class Device:
    def __init__(self, device):
        self.device = device
        self.final = State()
        self.expandable = {}   # final expandable segments: address -> size
        self.entries = []      # the history, oldest first
        self.start = None      # State at the first entry
        self.points = []       # (time_ns, reserved, allocated) after the starting state, then per entry
        self.ooms = []         # {"requested", "device_free", "time_ns"}
        self.issues = []       # what is inconsistent, one line each


class Snapshot:
    def __init__(self, path):
        self.path = path
        self.data = load(path)
        self.bare_list = isinstance(self.data, list)
        root = {"segments": self.data} if self.bare_list else self.data
        self.settings = root.get("allocator_settings")
        self.devices = {}
        self.issues = []
        segments = root.get("segments") or []
        traces = root.get("device_traces") or []
        for seg in segments:
            self._read_segment(seg)
        actions = set()
        for i, trace in enumerate(traces):
            d = self._device(i)
            d.entries = [e for e in trace if isinstance(e, dict)]
            actions |= {e.get("action") for e in d.entries}
        # The action that ends a block: free_completed, else (histories recorded without it) free_requested.
        self.free_action = "free_completed" if "free_completed" in actions or "free_requested" not in actions \
            else "free_requested"
        times = [e["time_us"] for d in self.devices.values() for e in d.entries
                 if isinstance(e.get("time_us"), int) and e["time_us"] > 0]
        self.t0_us = min(times) if times else 0
        self.t_last_us = max(times) if times else 0
        for d in self.devices.values():
            self._unwind(d)
            self._forward(d)

    def _device(self, i):
        if i not in self.devices:
            self.devices[i] = Device(i)
        return self.devices[i]

    def _read_segment(self, seg):
        d = self._device(seg.get("device", 0))
        base, total = seg["address"], seg["total_size"]
        if seg.get("is_expandable"):
            d.final.mapped.add(base, base + total)
            d.expandable[base] = total
        else:
            d.final.segments[base] = total
        cursor = base
        for b in seg.get("blocks", []):
            addr = b.get("address", cursor)
            cursor = addr + b["size"]
            if addr < base or addr + b["size"] > base + total:
                d.issues.append(f"block at {addr:#x} ({b['size']} B) outside its segment at {base:#x} "
                                f"({total} B)")
            if b.get("state") in ACTIVE:
                d.final.blocks[addr] = b.get("requested_size") or b["size"]

    def _unwind(self, d):
        s = d.final.copy()
        for e in reversed(d.entries):
            a, addr, size = e.get("action"), e.get("addr", 0), e.get("size", 0)
            if a == "alloc":
                if s.blocks.pop(addr, None) is None:
                    d.issues.append(f"alloc at {addr:#x} of a block that is not live later")
            elif a == self.free_action:
                if addr in s.blocks:
                    d.issues.append(f"free at {addr:#x} of a block live after it")
                s.blocks[addr] = size
            elif a == "segment_alloc":
                if s.segments.pop(addr, None) is None:
                    d.issues.append(f"segment_alloc at {addr:#x} of a segment that is not live later")
            elif a == "segment_free":
                if addr in s.segments:
                    d.issues.append(f"segment_free at {addr:#x} of a segment live after it")
                s.segments[addr] = size
            elif a == "segment_map":
                s.mapped.remove(addr, addr + size)
            elif a == "segment_unmap":
                s.mapped.add(addr, addr + size)
        d.start = s

    def time_ns(self, e):
        t = e.get("time_us")
        return (t - self.t0_us) * 1000 if isinstance(t, int) and t > self.t0_us else 0

    def _forward(self, d):
        s = d.start.copy()
        d.points = [(0, s.reserved(), s.allocated())]
        for addr, size in s.blocks.items():
            if s.container_of(addr, size) is None:
                d.issues.append(f"block at {addr:#x} ({size} B) live at the start outside every segment")
        for e in d.entries:
            self._step(d, s, e)
            d.points.append((self.time_ns(e), s.reserved(), s.allocated()))

    def _step(self, d, s, e):
        a, addr, size = e.get("action"), e.get("addr", 0), e.get("size", 0)
        if a == "alloc":
            if s.container_of(addr, size) is None:
                d.issues.append(f"alloc at {addr:#x} ({size} B) outside every segment")
            s.blocks[addr] = size
        elif a == self.free_action:
            s.blocks.pop(addr, None)
        elif a == "segment_alloc":
            s.segments[addr] = size
        elif a == "segment_free":
            s.segments.pop(addr, None)
        elif a == "segment_map":
            s.mapped.add(addr, addr + size)
        elif a == "segment_unmap":
            s.mapped.remove(addr, addr + size)
        elif a == "oom":
            d.ooms.append({"requested": size, "device_free": e.get("device_free", addr), "time_ns": self.time_ns(e)})

    # ---- questions ----

    def state_at(self, device, index):
        """The state after `index` entries of the device's history (0: the starting state)."""
        d = self.devices[device]
        s = d.start.copy()
        for e in d.entries[:index]:
            self._step(Device(device), s, e)
        return s

    def peak(self, device, which):
        """(bytes, time_ns, index) where reserved (which=1) or allocated (which=2) first reached its
        highest; index: entries applied (0 = the starting state)."""
        points = self.devices[device].points
        best = max(p[which] for p in points)
        for i, p in enumerate(points):
            if p[which] == best:
                return best, p[0], i
        return 0, 0, 0

    def used_devices(self):
        """Devices with a segment or a history entry."""
        return sorted(n for n, d in self.devices.items()
                      if d.entries or d.final.segments or d.final.mapped.items() or d.start.segments)

    def inconsistent(self):
        return any(d.issues for d in self.devices.values())
