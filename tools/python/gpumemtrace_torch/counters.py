# tools/python/gpumemtrace_torch/counters.py — PyTorch's cumulative allocator counters: whether and how many history entries were appended.
"""PyTorch's cumulative allocator counters (torch.cuda.memory_stats): a few dict reads, no snapshot.

Which counter moves with which history entry (c10/cuda/CUDACachingAllocator.cpp, read at the commits
docs/pytorch.md cites):
  alloc           allocation.all.allocated + 1           alloc_found_block
  free_requested  allocation.all.freed + 1               free
  free_completed  active.all.freed + 1                   free_block (late for a record_stream block)
  segment_alloc   segment.all.allocated + 1, num_device_alloc + 1      alloc_block
  segment_free    segment.all.freed + 1, num_device_free + 1           release_block
  segment_map     num_device_alloc + 1, reserved bytes   map_block (expandable segments)
  segment_unmap   num_device_free + 1, reserved bytes    unmap_block
  oom             num_ooms + 1                           malloc
  snapshot        none: the hook counts the _snapshot() calls itself (sharing.py)
num_device_alloc / num_device_free are missing from older releases; without them map and unmap
entries are not counted, and an estimate that may have missed some says so (`exact` False).

reset_accumulated_memory_stats() zeroes every accumulated counter (allocated, freed, num_*) but not
the `current` values (DeviceCachingAllocator::resetAccumulatedStats). Before any reset,
allocated - freed == current for each family; a reset shifts that difference by the family's
`current` at that moment. A drop of any accumulated counter, or a change of that shift, between two
reads means a reset happened in between: the entries appended since then are not known (None), and
the caller drains at once and counts from the new values.
"""

MiB = 1 << 20
_FAMILIES = ("allocation", "active", "segment", "reserved_bytes")
_SCALARS = ("num_device_alloc", "num_device_free", "num_ooms")


def read(torch):
    """One dict per device: the accumulated counters and each family's shift, or None for a device
    whose statistics are empty (PyTorch returns {} before CUDA is initialised)."""
    out = []
    for dev in range(torch.cuda.device_count()):
        s = torch.cuda.memory_stats(dev)
        if not s:
            out.append(None)
            continue
        c = {}
        for f in _FAMILIES:
            a, fr = s.get(f + ".all.allocated", 0), s.get(f + ".all.freed", 0)
            c[f + ".allocated"], c[f + ".freed"] = a, fr
            c[f + ".shift"] = s.get(f + ".all.current", 0) - (a - fr)
        for k in _SCALARS:
            c[k] = s.get(k)  # None: this release does not have it
        out.append(c)
    return tuple(out)


def _reset_between(prev, now):
    for k, v in now.items():
        p = prev.get(k)
        if v is None or p is None:
            continue
        if k.endswith(".shift"):
            if v != p:
                return True
        elif v < p:
            return True
    return False


def appended(prev, now, free_completed=True):
    """(entries appended to this device's ring between the two reads, exact). The estimate is None
    when unknown (a device not initialised at either read, or a reset in between). `free_completed`:
    whether the ring records free_completed entries (the hook may skip them)."""
    if prev is None or now is None:
        return None, False
    if _reset_between(prev, now):
        return None, False

    def delta(k):
        return (now.get(k) or 0) - (prev.get(k) or 0)

    n = delta("allocation.allocated") + delta("allocation.freed") + delta("num_ooms")
    if free_completed:
        n += delta("active.freed")
    reserved = delta("reserved_bytes.allocated") + delta("reserved_bytes.freed")
    if now.get("num_device_alloc") is not None and now.get("num_device_free") is not None:
        return n + delta("num_device_alloc") + delta("num_device_free"), True
    # An older release: segments are counted; maps and unmaps move only the reserved bytes. At most one
    # per 2 MiB page moved (the poller needs an upper bound, never a guess below the truth).
    n += delta("segment.allocated") + delta("segment.freed")
    return n + reserved // (2 * MiB), reserved == 0
