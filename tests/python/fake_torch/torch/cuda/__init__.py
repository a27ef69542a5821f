# tests/python/fake_torch/torch/cuda/__init__.py — the stand-in torch.cuda: lazy init, an allocator.
import ctypes
import os
import threading
import time
import traceback

from . import memory  # noqa: F401

_initialized = False
_queued_calls = []
_initialization_lock = threading.Lock()
_alloc = None


class OutOfMemoryError(RuntimeError):
    pass


def is_initialized():
    return _initialized


def device_count():
    return 1


def is_available():
    return True


def get_allocator_backend():
    return os.environ.get("FAKE_TORCH_BACKEND", "native")


def _lazy_call(callable, **kwargs):
    with _initialization_lock:
        if _initialized:
            callable()
        else:
            _queued_calls.append((callable, traceback.format_stack()))


def _lazy_init():
    global _initialized, _alloc
    if _initialized:
        return
    with _initialization_lock:
        if _initialized:
            return
        _alloc = _Allocator()
        _initialized = True
        for fn, _ in _queued_calls:
            fn()  # real PyTorch wraps failures in DeferredCudaCallError
        _queued_calls.clear()


def init():
    _lazy_init()


def synchronize(device=None):
    _lazy_init()
    from .. import _calls
    _calls.note("synchronize")


def _allocator():
    _lazy_init()
    return _alloc


def memory_stats(device=0):
    return _allocator().stats()


def max_memory_reserved(device=0):
    return _allocator().peak_reserved


def max_memory_allocated(device=0):
    return _allocator().peak_allocated


def memory_reserved(device=0):
    return _allocator().reserved


def memory_allocated(device=0):
    return _allocator().allocated


class _Block:
    __slots__ = ("addr", "size", "requested", "segment", "frames")


class _Allocator:
    """Segments of 2 MiB (requests up to 1 MiB) or the request rounded up to 2 MiB; blocks rounded to
    512 bytes, first fit inside segments; freed blocks return to their segment (no coalescing needed for
    the tests). Segment memory comes from FAKE_TORCH_CUDART's cudaMalloc when set."""

    def __init__(self):
        self.limit = int(os.environ.get("FAKE_TORCH_LIMIT", str(1 << 30)))
        self.segments = []  # [addr, size, free list [(off, size)]]
        self.reserved = self.allocated = self.peak_reserved = self.peak_allocated = 0
        # PyTorch's cumulative counters (memory_stats): they only ever grow
        self.n_alloc = self.n_free = self.n_seg = self.n_seg_free = self.n_oom = 0
        self.reserved_in = self.reserved_out = 0
        self.next_addr = 0x7f0000000000
        self.rt = None
        path = os.environ.get("FAKE_TORCH_CUDART")
        if path:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            self.rt = ctypes.CDLL(None)

    def stats(self):
        return {"allocation.all.allocated": self.n_alloc, "allocation.all.freed": self.n_free,
                "segment.all.allocated": self.n_seg, "segment.all.freed": self.n_seg_free,
                "num_ooms": self.n_oom, "reserved_bytes.all.current": self.reserved,
                "reserved_bytes.all.allocated": self.reserved_in, "reserved_bytes.all.freed": self.reserved_out,
                "reserved_bytes.all.peak": self.peak_reserved,
                "allocated_bytes.all.current": self.allocated, "allocated_bytes.all.peak": self.peak_allocated}

    def _segment(self, size):
        if self.reserved + size > self.limit:
            return None
        if self.rt is not None:
            p = ctypes.c_void_p()
            if self.rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size)) != 0:
                return None
            addr = p.value
        else:
            addr = self.next_addr
            self.next_addr += size
        seg = [addr, size, [(0, size)]]
        self.segments.append(seg)
        self.reserved += size
        self.reserved_in += size
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        self.n_seg += 1
        memory._record("segment_alloc", addr, size)
        return seg

    def malloc(self, requested):
        size = max(512, (requested + 511) // 512 * 512)
        for seg in self.segments:
            for i, (off, n) in enumerate(seg[2]):
                if n >= size:
                    seg[2][i] = (off + size, n - size)
                    return self._hand_out(seg, off, size, requested)
        seg_size = 2 << 20 if size <= (1 << 20) else (size + (2 << 20) - 1) // (2 << 20) * (2 << 20)
        seg = self._segment(seg_size)
        if seg is None:
            self.n_oom += 1
            free = self.limit - self.reserved
            memory._record("oom", free, seg_size)
            from .. import _C
            for fn in list(_C._oom_observers):
                fn(0, seg_size, self.reserved, free)
            raise OutOfMemoryError("CUDA out of memory. Tried to allocate %d bytes" % requested)
        seg[2][0] = (size, seg_size - size)
        return self._hand_out(seg, 0, size, requested)

    def _hand_out(self, seg, off, size, requested):
        b = _Block()
        b.addr, b.size, b.requested, b.segment = seg[0] + off, size, requested, seg
        self.allocated += size
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        self.n_alloc += 1
        b.frames = memory._record("alloc", b.addr, requested)
        return b

    def empty_cache(self):
        for seg in list(self.segments):
            if sum(n for _, n in seg[2]) != seg[1]:
                continue  # a live block inside
            memory._record("segment_free", seg[0], seg[1])
            if self.rt is not None:
                self.rt.cudaFree(ctypes.c_void_p(seg[0]))
            self.segments.remove(seg)
            self.reserved -= seg[1]
            self.reserved_out += seg[1]
            self.n_seg_free += 1

    def free(self, b):
        memory._record("free_requested", b.addr, b.requested, b.frames)
        memory._record("free_completed", b.addr, b.requested, b.frames)
        self.allocated -= b.size
        self.n_free += 1
        b.segment[2].append((b.addr - b.segment[0], b.size))


def empty_cache():
    """Releases the segments with no live block (segment_free in the history, then cudaFree)."""
    if _initialized:
        _alloc.empty_cache()


def _now_us():
    return time.time_ns() // 1000
