# tests/python/fake_torch/torch/cuda/_allocator.py — the stand-in's caching allocator: blocks, segments, statistics and the history ring, shaped like c10's.
"""A small model of c10/cuda/CUDACachingAllocator.cpp (DeviceCachingAllocator; pytorch/pytorch read at
the commit docs/pytorch.md cites), with what the hook sees of it exact and the rest simple:

- History: RingBuffer (appends at the end, overwrites the oldest once full, copies oldest first);
  record_trace only while recording, an entry's stack only with context "alloc" or "all"
  (record_context_ >= ALLOC), skip_actions as recordHistory parses them (unknown names ignored,
  segment_map/unmap not skippable), every recordHistory call resetting skip list and max_entries, and
  clearing the ring when disabled or asked to. snapshot() appends a "snapshot" entry whose size is
  the active bytes, after the ring was copied.
- Statistics: allocation / active / segment / reserved_bytes / allocated_bytes / active_bytes /
  requested_bytes with current, peak, allocated, freed; num_ooms; num_device_alloc / num_device_free
  where the release has them (_release.py); resetAccumulatedStats zeroing the accumulated ones only.
- Blocks: rounded to 512 bytes, first fit. Segments (native): 2 MiB for requests up to 1 MiB, the
  request rounded up to 2 MiB otherwise (simpler than c10's 20 MiB large segments; the sizes do not
  matter to the hook). Expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True): one
  reserved range mapped in 2 MiB pages at its end (segment_map of the mapped range, num_device_alloc),
  pages wholly free unmapped by empty_cache (segment_unmap per contiguous run, num_device_free).
- record_stream: a block used on another stream is freed in two steps: free_requested at free(),
  free_completed when its event is seen complete, at the next malloc (process_events) or at
  empty_cache (synchronize_and_free_events), as c10 does.
- OOM: an "oom" entry with device_free (no addr) and the rounded size, num_ooms, then the observers
  called after the lock is released with (device, alloc_size, allowed-or-total, device_free). With
  FAKE_TORCH_RETRY set, first the segments with no block in them are released (segment_free each) and
  the segment asked for once more, as c10's malloc does (release_cached_blocks, alloc_block).
- The memory-fraction cap (set_memory_fraction, _release.py): past it a segment or a page is refused
  without asking CUDA (alloc_block); device_free stays the device's. Expandable segments are read
  from the config at each call (cuda/_config.py), so _set_allocator_settings changes what comes next.
Memory comes from FAKE_TORCH_CUDART's cudaMalloc (and, for expandable segments, the simulated
driver's cuMemAddressReserve / cuMemCreate / cuMemMap next to it) when set, so that
libgpumemtrace.so sees the driver-level calls; made-up addresses otherwise.
"""
import ctypes
import os
import threading

from .. import _release

SMALL, PAGE = 1 << 20, 2 << 20
_NEVER, _STATE, _ALLOC, _ALL = 0, 1, 2, 3
_SKIPPABLE = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom", "snapshot")
_FAMILIES = ("allocation", "active", "segment", "reserved_bytes", "allocated_bytes", "active_bytes",
             "requested_bytes")


class Stat:
    __slots__ = ("current", "peak", "allocated", "freed")

    def __init__(self):
        self.current = self.peak = self.allocated = self.freed = 0

    def increase(self, n):
        self.current += n
        self.allocated += n
        self.peak = max(self.peak, self.current)

    def decrease(self, n):
        self.current -= n
        self.freed += n


class Block:
    __slots__ = ("addr", "size", "requested", "segment", "frames", "stream", "stream_uses", "context")


class Segment:
    __slots__ = ("addr", "size", "free", "expandable")

    def __init__(self, addr, size, expandable=False):
        self.addr, self.size, self.expandable = addr, size, expandable
        self.free = [(0, size)]   # (offset, size), not coalesced


class Allocator:
    def __init__(self, clock, config):
        self.lock = threading.RLock()
        self.clock = clock
        self.config = config                    # cuda/_config.py: read at each call, as c10 reads its config
        self.total = self.limit = int(os.environ.get("FAKE_TORCH_LIMIT", str(1 << 30)))
        self.retry = bool(os.environ.get("FAKE_TORCH_RETRY"))  # release the cache and retry, as c10 does
        self.allowed = None                     # the memory-fraction cap (allowed_memory_maximum), bytes
        self.stats = {f: Stat() for f in _FAMILIES}
        self.num_ooms = self.num_device_alloc = self.num_device_free = 0
        self.segments = []
        self.pending = []                       # freed blocks waiting for their stream events
        self.vm = None                          # the expandable segment: [base, mapped bytes]
        self.next_addr = 0x7f0000000000
        # history (recordHistory / RingBuffer)
        self.recording = False
        self.record_context = _NEVER
        self.skip = frozenset()
        self.max_entries = 1
        self.ring, self.ring_next = [], 0
        self.rt = self.drv = None
        path = os.environ.get("FAKE_TORCH_CUDART")
        if path:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            self.rt = ctypes.CDLL(None)
            self.driver_path = os.path.join(os.path.dirname(path), "libcuda.so.1")
            if self.expandable:
                self._load_driver()
        if _release.FRACTION_OPTION and config.fraction is not None:
            self.set_memory_fraction(config.fraction)   # the DeviceCachingAllocator constructor's

    @property
    def expandable(self):
        return self.config.expandable

    def _load_driver(self):
        if self.drv is None and self.rt is not None and os.path.exists(self.driver_path):
            ctypes.CDLL(self.driver_path, mode=ctypes.RTLD_GLOBAL)
            self.drv = ctypes.CDLL(None)
            self.drv.cuInit(0)

    # -- the memory-fraction cap --
    def _device_total(self):
        """cudaMemGetInfo's total (2.4-2.11; the newest source takes totalGlobalMem, the same figure on
        the simulated runtime); FAKE_TORCH_LIMIT without a runtime."""
        if self.rt is None:
            return self.total
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        self.rt.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total))
        return total.value

    def set_memory_fraction(self, fraction):
        """DeviceCachingAllocator::setMemoryFraction: 2.4-2.11 a cap at any fraction; newer releases
        check the range and take 1.0 as no cap."""
        with self.lock:
            if _release.FRACTION_OPTION:
                if not 0 <= fraction <= 1:
                    raise RuntimeError("invalid fraction:%r. Please set within [0, 1]." % fraction)
                self.allowed = None if fraction >= 1.0 else int(fraction * self._device_total())
            else:
                self.allowed = int(fraction * self._device_total())

    def memory_fraction(self):
        with self.lock:
            return 1.0 if self.allowed is None else self.allowed / self._device_total()

    # -- history --
    def record_history(self, enabled, when, max_entries, clear, skip_actions):
        with self.lock:
            self.recording = enabled
            self.skip = frozenset(a for a in skip_actions if a in _SKIPPABLE)
            self.max_entries = max(1, int(max_entries))
            self.record_context = when if enabled else _NEVER
            if not enabled or clear:
                self.ring, self.ring_next = [], 0

    def record(self, action, addr, size, stream=0, context=None):
        if not self.recording or action in self.skip:
            return
        e = {"action": action, "addr": addr, "size": size, "stream": stream, "t": self.clock(),
             "context": context if self.record_context >= _ALLOC else None}
        if len(self.ring) < self.max_entries:
            self.ring.append(e)
        else:
            self.ring[self.ring_next] = e
            self.ring_next = (self.ring_next + 1) % self.max_entries

    def trace(self):
        """getEntries: the ring, oldest first."""
        with self.lock:
            return self.ring[self.ring_next:] + self.ring[:self.ring_next]

    def snapshot_segments(self):
        """snapshot(): the segments, then the "snapshot" entry (size: the active bytes)."""
        with self.lock:
            segs = [(s.addr, s.size, s.expandable) for s in self.segments if s.size]
            self.record("snapshot", 0, self.stats["active_bytes"].current)
            return segs

    # -- statistics --
    def stat_dict(self):
        with self.lock:
            out = {}
            for f, st in self.stats.items():
                for k in Stat.__slots__:
                    out["%s.all.%s" % (f, k)] = getattr(st, k)
            out["num_ooms"] = self.num_ooms
            out["num_alloc_retries"] = 0
            if _release.DEVICE_ALLOC_COUNTS:
                out["num_device_alloc"] = self.num_device_alloc
                out["num_device_free"] = self.num_device_free
            return out

    def reset_accumulated(self):
        with self.lock:
            for st in self.stats.values():
                st.allocated = st.freed = 0
            self.num_ooms = self.num_device_alloc = self.num_device_free = 0

    def reset_peaks(self):
        """resetPeakStats: each peak becomes the current value."""
        with self.lock:
            for st in self.stats.values():
                st.peak = st.current

    # -- memory --
    def _new_range(self, size):
        if self.rt is not None:
            p = ctypes.c_void_p()
            if self.rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size)) != 0:
                return None
            return p.value
        addr = self.next_addr
        self.next_addr += size
        return addr

    def _over_cap(self, size):
        """alloc_block: past the memory-fraction cap the allocator refuses without asking CUDA."""
        return self.allowed is not None and self.stats["reserved_bytes"].current + size > self.allowed

    def _segment(self, size, context):
        if self._over_cap(size) or self.stats["reserved_bytes"].current + size > self.limit:
            return None
        addr = self._new_range(size)
        if addr is None:
            return None
        seg = Segment(addr, size)
        self.segments.append(seg)
        self.stats["segment"].increase(1)
        self.stats["reserved_bytes"].increase(size)
        self.num_device_alloc += 1
        self.record("segment_alloc", addr, size, context=context)
        return seg

    def _map_more(self, size, context):
        """Expandable segments: map whole pages at the end of the one reserved range (map_block)."""
        pages = (size + PAGE - 1) // PAGE * PAGE
        if self._over_cap(pages) or self.stats["reserved_bytes"].current + pages > self.limit:
            return None
        self._load_driver()
        if self.vm is None:
            base = self._reserve(self.limit * 2)
            self.vm = [base, 0]
            self.segments.append(Segment(base, 0, expandable=True))
        seg = self.segments[[s.expandable for s in self.segments].index(True)]
        addr = self.vm[0] + self.vm[1]
        if self.drv is not None and not self._driver_map(addr, pages):
            return None
        self.vm[1] += pages
        old = seg.size
        seg.size += pages
        seg.free.append((old, pages))
        self.stats["reserved_bytes"].increase(pages)
        self.num_device_alloc += 1
        self.record("segment_map", addr, pages, context=context)
        return seg

    def _reserve(self, size):
        if self.drv is None:
            addr = self.next_addr
            self.next_addr += size
            return addr
        p = ctypes.c_uint64()
        self.drv.cuMemAddressReserve(ctypes.byref(p), ctypes.c_size_t(size), ctypes.c_size_t(0),
                                     ctypes.c_uint64(0), ctypes.c_ulonglong(0))
        return p.value

    def _driver_map(self, addr, size):
        class Prop(ctypes.Structure):  # CUmemAllocationProp: type, handle types, location {type, id}, ...
            _fields_ = [("type", ctypes.c_int), ("handle_types", ctypes.c_int), ("loc_type", ctypes.c_int),
                        ("loc_id", ctypes.c_int), ("win32", ctypes.c_void_p), ("flags", ctypes.c_ubyte * 8)]
        prop = Prop(1, 0, 1, 0)
        h = ctypes.c_uint64()
        if self.drv.cuMemCreate(ctypes.byref(h), ctypes.c_size_t(size), ctypes.byref(prop), ctypes.c_ulonglong(0)):
            return False
        return self.drv.cuMemMap(ctypes.c_uint64(addr), ctypes.c_size_t(size), ctypes.c_size_t(0), h,
                                 ctypes.c_ulonglong(0)) == 0

    def malloc(self, requested, stream, context, observers):
        size = max(512, (requested + 511) // 512 * 512)
        with self.lock:
            self._process_events(context)
            found = self._fit(size)
            if found is None:
                seg = self._grow(size, context)
                if seg is None and self.retry and not self.expandable and self._release_free_segments(context):
                    seg = self._grow(size, context)  # c10's malloc: release_cached_blocks(), alloc_block again
                found = self._fit(size) if seg is not None else None
            if found is None:
                # The device's free bytes (cudaMemGetInfo in c10; FAKE_TORCH_LIMIT plays the device),
                # whatever the cap.
                free = max(0, self.total - self.stats["reserved_bytes"].current)
                self.record("oom", free, size, stream, context)
                self.num_ooms += 1
                allowed = self.total if self.allowed is None else self.allowed
        if found is None:
            for fn in list(observers):  # after the lock, as c10 calls them
                fn(0, size, allowed, free)
            return None
        seg, off = found
        return self._hand_out(seg, off, size, requested, stream, context)

    def _grow(self, size, context):
        if self.expandable:
            return self._map_more(size, context)
        return self._segment(PAGE if size <= SMALL else (size + PAGE - 1) // PAGE * PAGE, context)

    def _release_if_free(self, seg, context):
        """A segment with no block in it goes back to CUDA (segment_free); True if it did."""
        if seg.expandable or sum(n for _, n in seg.free) != seg.size:
            return False
        self.record("segment_free", seg.addr, seg.size, context=context)
        if self.rt is not None:
            self.rt.cudaFree(ctypes.c_void_p(seg.addr))
        self.segments.remove(seg)
        self.stats["segment"].decrease(1)
        self.stats["reserved_bytes"].decrease(seg.size)
        self.num_device_free += 1
        return True

    def _release_free_segments(self, context):
        released = False
        for seg in list(self.segments):
            released = self._release_if_free(seg, context) or released
        return released

    def _fit(self, size):
        for seg in self.segments:
            for i, (off, n) in enumerate(seg.free):
                if n >= size:
                    # An exhausted entry goes (it could never fit again): a long run's free lists
                    # stay as long as its holes, not its allocations.
                    if n == size:
                        del seg.free[i]
                    else:
                        seg.free[i] = (off + size, n - size)
                    return seg, off
        return None

    def _hand_out(self, seg, off, size, requested, stream, context):
        b = Block()
        b.addr, b.size, b.requested, b.segment = seg.addr + off, size, requested, seg
        b.stream, b.stream_uses, b.context = stream, set(), context
        with self.lock:
            for f, n in (("allocation", 1), ("active", 1), ("allocated_bytes", size), ("active_bytes", size),
                         ("requested_bytes", requested)):
                self.stats[f].increase(n)
            self.record("alloc", b.addr, requested, stream, context)
        return b

    def free(self, b, context):
        with self.lock:
            self.stats["allocation"].decrease(1)
            self.stats["allocated_bytes"].decrease(b.size)
            self.record("free_requested", b.addr, b.requested, b.stream, context or b.context)
            if b.stream_uses:
                self.pending.append(b)   # insert_events: completed later
            else:
                self._free_block(b, context)

    def _free_block(self, b, context):
        self.record("free_completed", b.addr, b.requested, b.stream, context or b.context)
        for f, n in (("active", 1), ("active_bytes", b.size), ("requested_bytes", b.requested)):
            self.stats[f].decrease(n)
        b.segment.free.append((b.addr - b.segment.addr, b.size))

    def _process_events(self, context):
        pending, self.pending = self.pending, []
        for b in pending:
            self._free_block(b, context)

    def empty_cache(self, context):
        with self.lock:
            self._process_events(context)   # synchronize_and_free_events
            for seg in list(self.segments):
                if seg.expandable:
                    self._unmap_free_pages(seg, context)
                else:
                    self._release_if_free(seg, context)

    def _unmap_free_pages(self, seg, context):
        """Whole free pages at the end of the mapped range are unmapped (one segment_unmap)."""
        free = sorted(seg.free)
        merged = []
        for off, n in free:
            if merged and merged[-1][0] + merged[-1][1] == off:
                merged[-1] = (merged[-1][0], merged[-1][1] + n)
            elif n:
                merged.append((off, n))
        if not merged or merged[-1][0] + merged[-1][1] != seg.size:
            return
        off, n = merged[-1]
        start = (off + PAGE - 1) // PAGE * PAGE
        if start >= seg.size:
            return
        cut = seg.size - start
        if self.drv is not None:
            self.drv.cuMemUnmap(ctypes.c_uint64(seg.addr + start), ctypes.c_size_t(cut))
        seg.free = [(o, k) for o, k in merged[:-1]] + ([(off, start - off)] if start > off else [])
        seg.size = start
        self.vm[1] = start
        self.stats["reserved_bytes"].decrease(cut)
        self.num_device_free += 1
        self.record("segment_unmap", seg.addr + start, cut, context=context)
