# tools/python/gpumemtrace_torch/segments.py — PyTorch's segments as its history moves them, for the "segment" of block events.
"""PyTorch's segments per device, kept up to date from the history entries, so that each block event
can name the segment it lies in.

A segment is what PyTorch's own snapshot calls one (DeviceCachingAllocator::snapshot): a cudaMalloc'd
range (segment_alloc / segment_free), or, with expandable segments, one contiguous mapped range of a
reserved address space: segment_map maps pages (at the end of a range, or filling a hole, which joins
two ranges), segment_unmap unmaps pages (trimming a range, or cutting it in two). Ranges never
overlap. Not thread-safe: used by one drain at a time (the hook's lock).
"""
import bisect


class SegmentTable:
    def __init__(self):
        self.ranges = {}   # device -> sorted list of [start, size]
        self.last = {}     # device -> the [start, size] of the last lookup's hit (blocks cluster)

    def seed(self, snapshot):
        """The segments of a _snapshot() (its "segments" list)."""
        for seg in snapshot.get("segments", []) or []:
            self.add(seg.get("device", 0), int(seg.get("address", 0) or 0), int(seg.get("total_size", 0) or 0))

    def add(self, dev, addr, size):
        """segment_alloc: a range of its own (or the seeded one again)."""
        lst = self.ranges.setdefault(dev, [])
        i = bisect.bisect_left(lst, [addr, 0])
        if i < len(lst) and lst[i][0] == addr:
            lst[i][1] = max(lst[i][1], size)
        else:
            lst.insert(i, [addr, size])

    def map(self, dev, addr, size):
        """segment_map: pages [addr, addr + size) mapped; joined with the ranges they touch."""
        lst = self.ranges.setdefault(dev, [])
        i = bisect.bisect_right(lst, [addr, float("inf")]) - 1
        if i >= 0 and lst[i][0] + lst[i][1] >= addr:      # touches (or overlaps) the range before
            lst[i][1] = max(lst[i][1], addr + size - lst[i][0])
        else:
            i += 1
            lst.insert(i, [addr, size])
        end = lst[i][0] + lst[i][1]
        while i + 1 < len(lst) and lst[i + 1][0] <= end:   # swallowed the start of the next one
            nxt = lst.pop(i + 1)
            lst[i][1] = max(end, nxt[0] + nxt[1]) - lst[i][0]
            end = lst[i][0] + lst[i][1]
        self.last.pop(dev, None)

    def unmap(self, dev, addr, size):
        """segment_unmap: pages [addr, addr + size) unmapped from the range holding them."""
        lst = self.ranges.get(dev)
        if not lst:
            return
        i = bisect.bisect_right(lst, [addr, float("inf")]) - 1
        if i < 0 or not lst[i][0] <= addr < lst[i][0] + lst[i][1]:
            return
        start, length = lst.pop(i)
        end, cut = start + length, addr + size
        if cut < end:
            lst.insert(i, [cut, end - cut])
        if start < addr:
            lst.insert(i, [start, addr - start])
        self.last.pop(dev, None)

    def remove(self, dev, addr):
        """segment_free."""
        lst = self.ranges.get(dev, [])
        i = bisect.bisect_left(lst, [addr, 0])
        if i < len(lst) and lst[i][0] == addr:
            del lst[i]
            self.last.pop(dev, None)

    def of(self, dev, addr):
        """Start of the range holding addr, or 0."""
        last = self.last.get(dev)
        if last is not None and last[0] <= addr < last[0] + last[1]:
            return last[0]
        lst = self.ranges.get(dev)
        if not lst:
            return 0
        i = bisect.bisect_right(lst, [addr, float("inf")]) - 1
        if i >= 0 and lst[i][0] <= addr < lst[i][0] + lst[i][1]:
            self.last[dev] = lst[i]
            return lst[i][0]
        return 0
