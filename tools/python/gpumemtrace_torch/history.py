# tools/python/gpumemtrace_torch/history.py — PyTorch allocator history -> gpumemtrace events.
"""PyTorch allocator history -> gpumemtrace events.

torch.cuda.memory._snapshot() returns the whole history ring ({"segments": [...], "device_traces":
[[entry, ...] per device]}), with no way to consume it. Per device we keep where the last copy ended
(anchor.RingEnd) and forward only what follows it in the next copy; anchor.py finds that place
exactly, by the fields of the entries that never change between copies (time_us does: PyTorch
converts every entry's clock reading again at each _snapshot()), by the "snapshot" entries our own
drains leave in the ring and by PyTorch's counters. A drain reads the entries new since the last one,
not the ring. When the place is gone, the ring wrapped between two drains: the entries in between are
lost; we count that, say so in the trace (a mark) and at exit (one warning).

PyTorch's action names go to the library as they are: which become which events is the library's
table (trace/torch_actions.h). Here only the actions that move segments matter (the "segment" of a
block event), and which ones the library records at all (bridge.live_actions), to skip the others.

Entry shape (torch/csrc/cuda/Module.cpp, THCPModule_memorySnapshot; docs/pytorch.md per release):
action, addr, size, stream, time_us (microseconds since the Unix epoch), frames [{filename, line,
name}] innermost first and only when the entry has a stack; "oom" entries carry device_free instead
of addr; newer releases add compile_context, user_metadata and pool_id, which are not used here.
"""
import sys
import threading
import time

from .anchor import TIME_SLACK_US, NO_HINTS, locate, ring_end
from .segments import SegmentTable

# How far PyTorch's clock (TSC fitted to CLOCK_REALTIME, and fitted again at every _snapshot()) may be
# from time.time_ns() or from its own earlier conversion: the sync boundary never relies on them
# agreeing more closely than this (the same slack anchor.py allows an entry's time between copies).
CLOCK_SLACK_US = TIME_SLACK_US
# Entries handed to the library per call: bounds the packed arrays of one call (a ring holds up to
# GPUMEMTRACE_TORCH_ENTRIES).
BATCH = 4096


# The actions that change the segment table, whether or not the library records them.
SEGMENT_ACTIONS = frozenset(("segment_alloc", "segment_map", "segment_unmap", "segment_free"))


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


def _python_frame(f):
    """A Python frame of PyTorch's record (a .py file, or generated code such as "<eval_with_key>.3"),
    not a C++ one (a .cpp/.h file, "??", or none)."""
    name = str(f.get("filename") or "")
    return name.endswith(".py") or (name.startswith("<") and name != "<unknown>")


class HistoryDrain:
    """Forwards each device's new history entries to the library, drain after drain.

    Not thread-safe: the hook serializes drains (TorchHook.lock)."""

    def __init__(self, bridge, max_frames=32, offset=realtime_to_monotonic_offset_ns, qualify=None):
        self.bridge = bridge
        self.max_frames = max_frames
        # False (the library keeps no release stacks): PyTorch records with context="alloc", and a free
        # entry carries its block's allocation stack, which is not forwarded.
        self.free_stacks = getattr(bridge, "free_stacks", True)
        self.ends = {}             # device -> anchor.RingEnd of the last copy drained
        self.segments = SegmentTable()
        self.lost_drains = 0       # drains that found entries lost (the ring wrapped past the last copy)
        # monotonic - realtime, measured again at every drain: PyTorch's times are realtime, and a
        # wall-clock step moves realtime, not the trace's clock.
        self.measure_offset = offset
        self.offset_ns = offset()
        self.last_sync_ns = 0      # syncs only go forward; no forwarded event is placed at or before one
        # PyTorch records C++ frames too (stacks="all", when the program asks for them): the trace's
        # stacks of these events hold the Python ones only (lang "python").
        self.python_only_frames = False

    def seed_segments(self, snapshot):
        self.segments.seed(snapshot)

    def segment_of(self, dev, addr):
        return self.segments.of(dev, addr)

    def forget(self):
        """The history was cleared on purpose (the program asked, through sharing.py): the next copy
        starts a new sequence, and nothing of it was forwarded."""
        self.ends = {}

    # -- draining --
    def new_entries(self, dev, trace, hints=NO_HINTS):
        """The entries of `trace` (one device's copy of the ring) not forwarded yet (anchor.locate)."""
        prev = self.ends.get(dev)
        start, complete, marks = locate(trace, prev, hints)
        if not complete:
            self.lost_drains += 1
            self.bridge.mark("gpumemtrace: PyTorch allocation history wrapped; events lost "
                             "(raise GPUMEMTRACE_TORCH_ENTRIES)")
        self.ends[dev] = ring_end(trace, start, prev, marks)
        return trace[start:]

    def drain(self, snapshot, called_us=None, hints=None):
        """Forwards the entries new since the last drain, then a sync (see boundary_ns). called_us:
        time.time_ns() // 1000 taken just before the _snapshot() call that produced `snapshot`.
        hints: {device: anchor.Hints} (missing devices: none)."""
        traces = snapshot.get("device_traces", []) or []
        hints = hints or {}
        if called_us is not None:
            self.offset_ns = self.measure_offset()
        new = [(dev, entries) for dev, entries in
               ((dev, self.new_entries(dev, trace or [], hints.get(dev, NO_HINTS)))
                for dev, trace in enumerate(traces)) if entries]
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
        copy of device d came after the copy: its time is >= the newest entry of d in the copy, and >=
        the moment the copy started, i.e. >= called_us (time.time_ns), as PyTorch converts it. Since
        PyTorch converts every entry again at each _snapshot(), a later copy may give it a time up to
        CLOCK_SLACK_US lower than this copy's clock would (anchor.TIME_SLACK_US); time.time_ns may
        disagree with PyTorch's fit by as much. Hence: the smallest per-device bound (an idle device
        must not let another device's newer entries through), less the slack, less 1 us (a later
        entry may share the newest one's microsecond)."""
        bound = None
        for trace in traces or [[]]:
            newest = 0
            for e in reversed(trace or []):
                newest = int(e.get("time_us", 0) or 0)
                if newest:
                    break
            b = max(newest, called_us)
            bound = b if bound is None else min(bound, b)
        return (bound - CLOCK_SLACK_US - 1) * 1000 + self.offset_ns

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
            self.segments.add(dev, addr, size)
        elif action == "segment_map":
            self.segments.map(dev, addr, size)
        elif action == "segment_unmap":
            self.segments.unmap(dev, addr, size)
        elif action == "segment_free":
            self.segments.remove(dev, addr)  # only block events look segments up: none of this entry's
        if action not in live:
            return None
        segment = 0
        free_bytes = 0
        if action in ("alloc", "free_requested"):
            segment = self.segments.of(dev, addr)
        elif action == "oom":
            free_bytes = int(e.get("device_free", addr) or 0)  # PyTorch puts it there, not in "addr"
            addr = 0
        t_us = e.get("time_us", 0) or 0
        time_ns = max(0, int(t_us) * 1000 + self.offset_ns) if t_us else 0
        if time_ns and time_ns <= self.last_sync_ns:
            # Only when PyTorch's clock stepped by more than the slack since the last drain: the event
            # goes right after that sync, keeping its promise (docs/trace-format.md).
            time_ns = self.last_sync_ns + 1
        frames = e.get("frames") or ()
        if action == "free_requested" and not self.free_stacks:
            frames = ()
        elif frames and self.python_only_frames:
            frames = [f for f in frames if _python_frame(f)]
        if len(frames) > self.max_frames:
            frames = frames[:self.max_frames]
        return (action, addr, size, dev, int(e.get("stream", 0) or 0), segment, time_ns, free_bytes, frames)
