# tests/python/fake_torch/torch/cuda/__init__.py — the stand-in torch.cuda: lazy init (Python and C++), streams, the allocator's public calls.
"""torch.cuda as the hook meets it. Two initialisations, as in PyTorch:
- C++ (at::globalContext().lazyInitCUDA()): creates the allocator; _record_memory_history runs
  only this (torch/csrc/cuda/memory_snapshot.cpp), so it neither sets is_initialized() nor runs the
  calls queued with _lazy_call;
- Python (_lazy_init, which torch.empty(..., device="cuda") runs through device_lazy_init): C++
  init if not done, then is_initialized() is True and the queued calls run.
memory_stats() and the other statistics return {} / 0 until Python init (torch/cuda/memory.py,
memory_stats_as_nested_dict: `if not is_initialized(): return {}`). set_per_process_memory_fraction is
torch.cuda.memory's, re-exported (PyTorch's `from .memory import *`): the same function."""
import os
import sys
import threading
import traceback

from . import _clock, _config
from .. import _release as _release_module
from ._allocator import Allocator

_initialized = False
_queued_calls = []
_initialization_lock = threading.Lock()
_alloc = None
_converter = None


class OutOfMemoryError(RuntimeError):
    pass


class Stream:
    """torch.cuda.Stream: a handle; only its identity matters to the allocator."""
    _next = 0x1000

    def __init__(self, device=None, priority=0):
        Stream._next += 0x10
        self.cuda_stream = Stream._next

    def synchronize(self):
        pass


_default_stream = Stream()
_default_stream.cuda_stream = 0


_current = [_default_stream]


def current_stream(device=None):
    return _current[-1]


class stream:
    """torch.cuda.stream(s): allocations inside use stream s."""

    def __init__(self, s):
        self.s = s

    def __enter__(self):
        _current.append(self.s)

    def __exit__(self, *exc):
        _current.pop()


def current_device():
    return 0


def _get_device_index(device, optional=False):
    """An int, "cuda", "cuda:N" or None (the current device) -> the index; the stand-in has device 0."""
    if device is None or device == "cuda":
        return current_device()
    if isinstance(device, str) and device.startswith("cuda:"):
        device = int(device[5:])
    if not isinstance(device, int) or isinstance(device, bool):
        raise ValueError("Expected a cuda device, but got: %r" % (device,))
    return device


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


def _cpp_init():
    """at::globalContext().lazyInitCUDA(): the allocator (and its clock converter) exist from here."""
    global _alloc, _converter
    if _alloc is None:
        _converter = _clock.Converter()
        _alloc = Allocator(_clock.approximate_time, _config.instance())
    return _alloc


def _lazy_init():
    global _initialized
    if _initialized:
        return
    with _initialization_lock:
        if _initialized:
            return
        _cpp_init()
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


def empty_cache():
    """Releases the segments (and, with expandable segments, the pages) with no live block."""
    if _initialized:
        from .memory import _context
        _alloc.empty_cache(_context())


from . import memory  # noqa: E402
memory._cuda = sys.modules[__name__]
from .memory import (memory_stats, memory_allocated, memory_reserved, max_memory_allocated,  # noqa: E402,F401
                     max_memory_reserved, reset_accumulated_memory_stats, reset_peak_memory_stats, memory_snapshot,
                     set_per_process_memory_fraction)
if _release_module.FRACTION_OPTION:
    from .memory import get_per_process_memory_fraction  # noqa: E402,F401
