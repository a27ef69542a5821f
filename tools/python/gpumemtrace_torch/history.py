# tools/python/gpumemtrace_torch/history.py — PyTorch allocator history -> gpumemtrace events.
"""PyTorch allocator history -> gpumemtrace events.

torch.cuda.memory._snapshot() returns the whole history ring ({"segments": [...], "device_traces":
[[entry, ...] per device]}), with no way to consume it. We keep, per device, the last few entries we
already forwarded (the anchor) and forward only what follows it in the next copy: walking the copy
back from its end, each entry is compared with the anchor's newest entry once (the rest of the anchor
only where that matches), so a drain costs the entries new since the last one, not the ring. When the
anchor is gone, the ring wrapped between two drains: the entries in between are lost; we count that,
say so in the trace (a mark) and at exit (one warning).

PyTorch's action names go to the library as they are: which become which events is the library's
table (trace/torch_actions.h). Here only the actions that move segments matter (the "segment" of a
block event), and which ones the library records at all (bridge.live_actions), to skip the others.

Entry shape (PyTorch 2.4-2.11, torch/csrc/cuda/memory_snapshot.cpp): action, addr, size, stream,
time_us (microseconds since the Unix epoch), frames [{filename, line, name}] innermost first; for
"oom", addr holds the device's free bytes (also "device_free" in some releases).
"""
import bisect
import sys
import threading
import time

ANCHOR = 4
# How far PyTorch's clock (TSC fitted to CLOCK_REALTIME) may be from time.time_ns(): the sync
# boundary never relies on the two agreeing more closely than this.
CLOCK_SLACK_US = 10000
# Entries handed to the library per call: bounds the packed arrays of one call (a ring holds up to
# GPUMEMTRACE_TORCH_ENTRIES).
BATCH = 4096


# The actions that change the segment table, whether or not the library records them.
SEGMENT_ACTIONS = frozenset(("segment_alloc", "segment_map", "segment_free"))


def _key(e):
    return (e.get("action"), e.get("addr"), e.get("size"), e.get("time_us"), e.get("stream"))


# PyTorch's cumulative counters (torch.cuda.memory_stats) that move with every entry the trace
# records: alloc, free_requested, segment_alloc / segment_free, the bytes of segment_map /
# segment_unmap (expandable segments), oom. A snapshot entry moves none of them (we skip it anyway).
_COUNTERS = (("allocations", "allocation.all.allocated"), ("frees", "allocation.all.freed"),
             ("segments", "segment.all.allocated"), ("segment_frees", "segment.all.freed"),
             ("reserved_in", "reserved_bytes.all.allocated"), ("reserved_out", "reserved_bytes.all.freed"),
             ("ooms", "num_ooms"))


def allocator_counters(torch):
    """PyTorch's cumulative allocator counters, one dict per device (a few dict reads; no snapshot).
    Two reads are equal only if no entry the trace records was appended in between."""
    out = []
    for dev in range(torch.cuda.device_count()):
        s = torch.cuda.memory_stats(dev)
        out.append({name: s.get(key, 0) for name, key in _COUNTERS})
    return tuple(out)


def take_snapshot(torch):
    """torch.cuda.memory._snapshot(), without letting it import torch._inductor.

    PyTorch's symbolizer (torch/csrc/profiler/python/combined_traceback.cpp, appendSymbolized) asks
    `hasattr(torch, "_inductor")` whenever it names Python frames, to map frames of inductor-generated
    code back to the model's source; torch/__init__.py's module __getattr__ answers that by importing
    torch._inductor (with dynamo, sympy, triton...), which takes seconds. When torch._inductor is not
    imported yet, no inductor-generated code has run and that mapping finds nothing, so during our
    call, on our thread only, `torch._inductor` is reported missing instead of imported. Other threads
    keep torch's own __getattr__ (ours passes every other lookup through). docs/pytorch.md has the
    source lines."""
    snapshot = torch.cuda.memory._snapshot
    if "torch._inductor" in sys.modules:
        return snapshot()
    namespace = vars(torch)
    original = namespace.get("__getattr__")
    if not callable(original):
        return snapshot()
    caller = threading.get_ident()

    def __getattr__(name):
        if name == "_inductor" and threading.get_ident() == caller:
            raise AttributeError("module 'torch' has no attribute '_inductor'")
        return original(name)

    namespace["__getattr__"] = __getattr__
    try:
        return snapshot()
    finally:
        if namespace.get("__getattr__") is __getattr__:
            namespace["__getattr__"] = original


def realtime_to_monotonic_offset_ns():
    """monotonic - realtime, in ns (history times are realtime, the trace's are monotonic)."""
    best = None
    for _ in range(3):
        a = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        r = time.time_ns()
        b = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        if best is None or b - a < best[0]:
            best = (b - a, (a + b) // 2 - r)
    return best[1]


class HistoryDrain:
    def __init__(self, bridge, max_frames=32):
        self.bridge = bridge
        self.max_frames = max_frames
        # False (the library keeps no release stacks): PyTorch records with context="alloc", and a free
        # entry carries its block's allocation stack, which is not forwarded.
        self.free_stacks = getattr(bridge, "free_stacks", True)
        self.anchors = {}          # device -> list of keys of the last forwarded entries
        self.segments = {}         # device -> sorted list of [addr, size]
        self.last_segment = {}     # device -> the [addr, size] of segment_of's last hit (blocks cluster)
        self.lost_drains = 0       # drains that found the ring had wrapped past the anchor
        self.offset_ns = realtime_to_monotonic_offset_ns()
        self.last_sync_ns = 0      # syncs only go forward

    # -- segments, for the "segment" field of block events --
    def seed_segments(self, snapshot):
        for seg in snapshot.get("segments", []) or []:
            dev = seg.get("device", 0)
            self._seg_add(dev, seg.get("address", 0), seg.get("total_size", 0))

    def _seg_add(self, dev, addr, size):
        lst = self.segments.setdefault(dev, [])
        i = bisect.bisect_left(lst, [addr, 0])
        if i < len(lst) and lst[i][0] == addr:
            lst[i][1] = max(lst[i][1], size)
        else:
            lst.insert(i, [addr, size])

    def _seg_grow(self, dev, addr, size):
        """segment_map: expandable segments grow by mapping pages; merge into the containing one."""
        seg = self.segment_of(dev, addr - 1) if addr else 0
        if seg:
            lst = self.segments[dev]
            i = bisect.bisect_left(lst, [seg, 0])
            lst[i][1] = max(lst[i][1], addr + size - seg)
        else:
            self._seg_add(dev, addr, size)

    def _seg_remove(self, dev, addr):
        lst = self.segments.get(dev, [])
        i = bisect.bisect_left(lst, [addr, 0])
        if i < len(lst) and lst[i][0] == addr:
            if self.last_segment.get(dev) is lst[i]:
                del self.last_segment[dev]
            del lst[i]

    def segment_of(self, dev, addr):
        # Segments never overlap, so the last hit is still right while it holds addr (a segment that
        # grows is the same list; one that goes is forgotten in _seg_remove).
        last = self.last_segment.get(dev)
        if last is not None and last[0] <= addr < last[0] + last[1]:
            return last[0]
        lst = self.segments.get(dev)
        if not lst:
            return 0
        i = bisect.bisect_right(lst, [addr, float("inf")]) - 1
        if i >= 0 and lst[i][0] <= addr < lst[i][0] + lst[i][1]:
            self.last_segment[dev] = lst[i]
            return lst[i][0]
        return 0

    # -- draining --
    def new_entries(self, dev, trace):
        """The entries of `trace` (one device's copy of the ring) after those already forwarded."""
        anchor = self.anchors.get(dev)
        start = 0
        if anchor:
            start = self._after_anchor(trace, anchor)
            if start < 0:
                start = 0
                self.lost_drains += 1
                self.bridge.mark("gpumemtrace: PyTorch allocation history wrapped; events lost "
                                 "(raise GPUMEMTRACE_TORCH_ENTRIES)")
        if trace:
            self.anchors[dev] = [_key(e) for e in trace[-ANCHOR:]]
        return trace[start:]

    @staticmethod
    def _after_anchor(trace, anchor):
        """Index just past the anchor in `trace`, or -1 when it is gone. Walks back from the end (new
        entries are appended there), comparing each entry's time with the anchor's newest entry's once;
        only where that matches are the whole keys compared."""
        newest = anchor[-1]
        newest_time = newest[3]
        n = len(anchor)
        for i in range(len(trace) - 1, n - 2, -1):
            if trace[i].get("time_us") != newest_time or _key(trace[i]) != newest:
                continue
            if all(_key(trace[i - n + 1 + k]) == anchor[k] for k in range(n - 1)):
                return i + 1
        return -1

    def drain(self, snapshot, called_us=None):
        """Forwards the entries new since the last drain, then a sync (see boundary_ns). called_us:
        time.time_ns() // 1000 taken just before the _snapshot() call that produced `snapshot`."""
        traces = snapshot.get("device_traces", []) or []
        new = [(dev, entries) for dev, entries in
               ((dev, self.new_entries(dev, trace or [])) for dev, trace in enumerate(traces)) if entries]
        if len(new) == 1:
            dev, entries = new[0]
            ordered = ((dev, e) for e in entries)  # one ring: already in time order
        else:
            batch = [(e.get("time_us", 0) or 0, dev, e) for dev, entries in new for e in entries]
            batch.sort(key=lambda t: (t[0], t[1]))  # stable: keeps each device's ring order
            ordered = ((dev, e) for _, dev, e in batch)
        # Packed and handed over a batch at a time: the packed tuples of one batch live at once, not a
        # drain's worth (up to a whole ring).
        live = self.bridge.live_actions
        pack = self.pack
        chunk = []
        for dev, e in ordered:
            packed = pack(dev, e, live)
            if packed is not None:
                chunk.append(packed)
                if len(chunk) == BATCH:
                    self.bridge.record(chunk)
                    chunk = []
        if chunk:
            self.bridge.record(chunk)
        if called_us is not None:
            self.sync_at(self.boundary_ns(traces, called_us))

    def boundary_ns(self, traces, called_us):
        """The sync time after a drain: a time below that of every entry a LATER drain can deliver.
        Each device's history is its own ring, appended in time order under that device's allocator
        lock, and _snapshot() copies the rings one after the other. So an entry missing from this
        copy of device d came after the copy: its time is >= the newest entry of d in the copy
        (PyTorch's own clock), and >= the moment the copy started, i.e. >= called_us (time.time_ns,
        allowed CLOCK_SLACK_US of disagreement). The boundary is the smallest per-device bound (an idle
        device must not let another device's newer entries through), minus 1 us: a later entry may
        share the microsecond of the newest one."""
        floor_us = called_us - CLOCK_SLACK_US
        bound = None
        for trace in traces or [[]]:
            newest = 0
            for e in reversed(trace or []):
                newest = int(e.get("time_us", 0) or 0)
                if newest:
                    break
            b = max(newest, floor_us)
            bound = b if bound is None else min(bound, b)
        return (bound - 1) * 1000 + self.offset_ns

    def sync_at(self, time_ns):
        if time_ns > self.last_sync_ns:
            self.last_sync_ns = time_ns
            self.bridge.sync(time_ns)

    def pack(self, dev, e, live):
        """The bridge's tuple for one entry (bridge.Bridge.record), or None when the library does not
        record its action. Keeps the segment table up to date either way."""
        action = e.get("action")
        if action not in live and action not in SEGMENT_ACTIONS:
            return None
        addr = int(e.get("addr", 0) or 0)
        size = int(e.get("size", 0) or 0)
        if action == "segment_alloc":
            self._seg_add(dev, addr, size)
        elif action == "segment_map":
            self._seg_grow(dev, addr, size)
        elif action == "segment_free":
            self._seg_remove(dev, addr)  # only block events look segments up: none of this entry's
        if action not in live:
            return None
        segment = 0
        free_bytes = 0
        if action in ("alloc", "free_requested"):
            segment = self.segment_of(dev, addr)
        elif action == "oom":
            free_bytes = int(e.get("device_free", addr) or 0)  # PyTorch puts it there, not in "addr"
            addr = 0
        t_us = e.get("time_us", 0) or 0
        time_ns = max(0, int(t_us) * 1000 + self.offset_ns) if t_us else 0
        frames = e.get("frames") or ()
        if action == "free_requested" and not self.free_stacks:
            frames = ()
        if len(frames) > self.max_frames:
            frames = frames[:self.max_frames]
        return (action, addr, size, dev, int(e.get("stream", 0) or 0), segment, time_ns, free_bytes, frames)
