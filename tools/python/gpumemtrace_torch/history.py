"""PyTorch allocator history -> gpumemtrace events.

torch.cuda.memory._snapshot() returns the whole history ring ({"segments": [...], "device_traces":
[[entry, ...] per device]}), with no way to consume it. We keep, per device, the last few entries we
already forwarded (the anchor) and forward only what follows it in the next copy. When the anchor is
gone, the ring wrapped between two drains: the entries in between are lost; we count that, say so in
the trace (a mark) and at exit (one warning).

Entry shape (PyTorch 2.4-2.11, torch/csrc/cuda/memory_snapshot.cpp): action, addr, size, stream,
time_us (microseconds since the Unix epoch), frames [{filename, line, name}] innermost first; for
"oom", addr holds the device's free bytes (also "device_free" in some releases).
"""
import bisect
import time

ANCHOR = 4
# How far PyTorch's clock (TSC fitted to CLOCK_REALTIME) may be from time.time_ns(): the sync
# boundary never relies on the two agreeing more closely than this.
CLOCK_SLACK_US = 10000

# action -> (gpumemtrace op, api); apis are "torch.<action>" as in the snapshot importer
# (docs/trace-format.md). free_completed is left out: the block's bytes stop counting at
# free_requested (that is when PyTorch's allocated_bytes drops); completion only matters for reuse.
ACTIONS = {
    "alloc": ("block_alloc", "torch.alloc"),
    "free_requested": ("block_free", "torch.free_requested"),
    "segment_alloc": ("alloc", "torch.segment_alloc"),
    "segment_free": ("free", "torch.segment_free"),
    "segment_map": ("map", "torch.segment_map"),
    "segment_unmap": ("unmap", "torch.segment_unmap"),
    "oom": ("block_oom", "torch.oom"),
}


def _key(e):
    return (e.get("action"), e.get("addr"), e.get("size"), e.get("time_us"), e.get("stream"))


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
        self.anchors = {}          # device -> list of keys of the last forwarded entries
        self.segments = {}         # device -> sorted list of [addr, size]
        self.forwarded = 0
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
            del lst[i]

    def segment_of(self, dev, addr):
        lst = self.segments.get(dev)
        if not lst:
            return 0
        i = bisect.bisect_right(lst, [addr, float("inf")]) - 1
        if i >= 0 and lst[i][0] <= addr < lst[i][0] + lst[i][1]:
            return lst[i][0]
        return 0

    # -- draining --
    def new_entries(self, dev, trace):
        anchor = self.anchors.get(dev)
        start = 0
        if anchor:
            n = len(anchor)
            found = -1
            for i in range(len(trace) - n, -1, -1):
                if [_key(e) for e in trace[i:i + n]] == anchor:
                    found = i + n
                    break
            if found < 0:
                self.lost_drains += 1
                self.bridge.mark("gpumemtrace: PyTorch allocation history wrapped; events lost "
                                 "(raise GPUMEMTRACE_TORCH_ENTRIES)")
            else:
                start = found
        if trace:
            self.anchors[dev] = [_key(e) for e in trace[-ANCHOR:]]
        return trace[start:]

    def drain(self, snapshot, called_us=None):
        """Forwards the entries new since the last drain, then a sync (see boundary_ns). called_us:
        time.time_ns() // 1000 taken just before the _snapshot() call that produced `snapshot`."""
        traces = snapshot.get("device_traces", []) or []
        batch = []
        for dev, trace in enumerate(traces):
            for e in self.new_entries(dev, trace or []):
                batch.append((e.get("time_us", 0), dev, e))
        batch.sort(key=lambda t: (t[0], t[1]))  # stable: keeps each device's ring order
        for _, dev, e in batch:
            self.forward(dev, e)
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

    def forward(self, dev, e):
        action = e.get("action")
        m = ACTIONS.get(action)
        if m is None:
            return  # snapshot markers, free_completed, actions of newer releases
        op, api = m
        addr = int(e.get("addr", 0) or 0)
        size = int(e.get("size", 0) or 0)
        t_us = e.get("time_us", 0) or 0
        time_ns = int(t_us) * 1000 + self.offset_ns if t_us else 0
        if time_ns < 0:
            time_ns = 0
        frames = [(f.get("filename", "?"), f.get("name", "?"), int(f.get("line", 0) or 0))
                  for f in (e.get("frames") or [])[:self.max_frames]]
        segment = 0
        free_bytes = 0
        if action == "segment_alloc":
            self._seg_add(dev, addr, size)
        elif action == "segment_map":
            self._seg_grow(dev, addr, size)
        elif action in ("alloc", "free_requested"):
            segment = self.segment_of(dev, addr)
        elif action == "oom":
            free_bytes = int(e.get("device_free", addr) or 0)
            addr = 0
        self.bridge.record(op, api, addr=addr, size=size, device=dev, stream=int(e.get("stream", 0) or 0),
                           segment=segment, time_ns=time_ns, free_bytes=free_bytes, frames=frames)
        self.forwarded += 1
        if action == "segment_free":
            self._seg_remove(dev, addr)
