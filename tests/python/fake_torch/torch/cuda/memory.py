# tests/python/fake_torch/torch/cuda/memory.py — the stand-in's torch.cuda.memory: history recording, _snapshot(), statistics, per release.
"""torch.cuda.memory as the releases of _release.py have it (torch/cuda/memory.py):
_record_memory_history(enabled="all", *args, **kwargs) dispatches to the legacy form for a bool and to
_record_memory_history_impl otherwise, whose signature it carries (`__signature__`); the impl takes the
release's arguments and calls torch._C._cuda_record_memory_history. _snapshot() is
torch._C._cuda_memorySnapshot(None) (looked up at call time, as PyTorch's `_C.` is), _dump_snapshot()
pickles it. memory_stats() is {} before Python's CUDA init. The settings calls (set_per_process_memory_fraction,
_set_allocator_settings, get_per_process_memory_fraction) take the shapes _release.py lists."""
import inspect
import pickle
import sys

from .. import _release


def _frames():
    """The caller's Python stack, innermost first, the stand-in's own frames left out: what
    traceback.extract_stack() gives, without its reading of each frame's source line (which made a
    long run of the stand-in spend most of its time in linecache)."""
    out = []
    f = sys._getframe(1)
    while f is not None:
        code = f.f_code
        if "/fake_torch/torch/" not in code.co_filename:
            out.append(_frame_dict(code.co_filename, f.f_lineno, code.co_name))
        f = f.f_back
    return out


# PyTorch's symbolizer makes one dict per frame and shares it between the tracebacks that pass there
# (torch/csrc/profiler/python/combined_traceback.cpp, py_symbolize): the same here.
_frame_dicts = {}


def _frame_dict(filename, line, name):
    key = (filename, line, name)
    d = _frame_dicts.get(key)
    if d is None:
        d = _frame_dicts[key] = {"filename": filename, "line": line, "name": name}
    return d


_CPP_FRAMES = [{"filename": "/pytorch/c10/cuda/CUDACachingAllocator.cpp", "line": 1200,
                "name": "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc"}]


def _context(level=3):
    """maybeGatherContext(level): a stack when recording asks for one at this level (STATE=1 at
    malloc, ALL=3 at free), else None. Python frames only unless stacks="all"."""
    alloc = _cuda._alloc
    if alloc is None or alloc.record_context < level:
        return None
    frames = _frames()
    if _stacks == "all":
        frames = _CPP_FRAMES + frames
    return frames


_stacks = "python"
_cuda = None   # the torch.cuda module (set by it): no import at interpreter exit, when tensors die


def _record_memory_history_legacy(enabled, record_context=True, trace_alloc_max_entries=1,
                                  trace_alloc_record_context=False, device=None, record_context_cpp=False,
                                  clear_history=False):
    from .. import _C
    _C._cuda_record_memory_history_legacy(enabled, record_context, trace_alloc_max_entries,
                                          trace_alloc_record_context, record_context_cpp, clear_history)


def _record_memory_history(enabled="all", *args, **kwargs):
    if isinstance(enabled, bool):
        return _record_memory_history_legacy(enabled, *args, **kwargs)
    return _record_memory_history_impl(enabled, *args, **kwargs)


if _release.HOST_AND_CUDA_PARAMS:
    def _record_memory_history_impl(enabled="all", context="all", stacks="all", max_entries=sys.maxsize,
                                    device=None, clear_history=False, compile_context=False,
                                    global_record_annotations=False, skip_actions=None,
                                    record_pinned_host_memory=False, record_cuda=True):
        from .. import _C
        _C._cuda_record_memory_history(enabled, context, stacks, max_entries, clear_history, compile_context,
                                       global_record_annotations, skip_actions if skip_actions is not None else [],
                                       record_pinned_host_memory, record_cuda)
elif _release.SKIP_ACTIONS_PARAM:
    def _record_memory_history_impl(enabled="all", context="all", stacks="all", max_entries=sys.maxsize,
                                    device=None, clear_history=False, compile_context=False,
                                    global_record_annotations=False, skip_actions=None):
        from .. import _C
        _C._cuda_record_memory_history(enabled, context, stacks, max_entries, clear_history, compile_context,
                                       global_record_annotations, skip_actions if skip_actions is not None else [])
elif _release.CLEAR_HISTORY:
    def _record_memory_history_impl(enabled="all", context="all", stacks="all", max_entries=sys.maxsize,
                                    device=None, clear_history=False, compile_context=False,
                                    global_record_annotations=False):
        from .. import _C
        _C._cuda_record_memory_history(enabled, context, stacks, max_entries, clear_history, compile_context,
                                       global_record_annotations)
else:
    def _record_memory_history_impl(enabled="all", context="all", stacks="all", max_entries=sys.maxsize,
                                    device=None):
        from .. import _C
        _C._cuda_record_memory_history(enabled, context, stacks, max_entries)

_record_memory_history.__signature__ = inspect.signature(_record_memory_history_impl)


def set_per_process_memory_fraction(fraction, device=None):
    """As torch/cuda/memory.py: CUDA initialised, the arguments checked, then
    torch._C._cuda_setMemoryFraction(fraction, device index), looked up at the call."""
    _cuda._lazy_init()
    if device is None:
        device = _cuda.current_device()
    device = _cuda._get_device_index(device)
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    from .. import _C
    _C._cuda_setMemoryFraction(fraction, device)


if _release.FRACTION_OPTION:
    def get_per_process_memory_fraction(device=None):
        _cuda._lazy_init()
        if device is None:
            device = _cuda.current_device()
        from .. import _C
        return _C._cuda_getMemoryFraction(_cuda._get_device_index(device))


if _release.SETTINGS_ALIAS:
    from .._C import _accelerator_setAllocatorSettings as _set_allocator_settings  # noqa: E402  (an alias)
elif _release.GENERIC_ALLOC_CONF:
    def _set_allocator_settings(env):
        import warnings
        warnings.warn("torch.cuda._set_allocator_settings is deprecated. Use "
                      "torch._C._accelerator_setAllocatorSettings instead.", FutureWarning, stacklevel=2)
        from .. import _C
        return _C._accelerator_setAllocatorSettings(env)
else:
    def _set_allocator_settings(env):
        from .. import _C
        return _C._cuda_cudaCachingAllocator_set_allocator_settings(env)


def _snapshot(device=None):
    from .. import _C
    return _C._cuda_memorySnapshot(None)


def _dump_snapshot(filename="dump_snapshot.pickle"):
    s = _snapshot()
    with open(filename, "wb") as f:
        pickle.dump(s, f)


def memory_snapshot():
    """torch.cuda.memory_snapshot(): the segments of a _snapshot() (its "snapshot" entry included)."""
    from .. import _C
    return _C._cuda_memorySnapshot(None)["segments"]


def memory_stats(device=None):
    if not _cuda.is_initialized():
        return {}
    return _cuda._alloc.stat_dict()


def reset_accumulated_memory_stats(device=None):
    from .. import _C
    _C._cuda_resetAccumulatedMemoryStats(0)


def reset_peak_memory_stats(device=None):
    from .. import _C
    _C._cuda_resetPeakMemoryStats(0)


def _stat(key):
    return memory_stats().get(key, 0)


def memory_allocated(device=None):
    return _stat("allocated_bytes.all.current")


def max_memory_allocated(device=None):
    return _stat("allocated_bytes.all.peak")


def memory_reserved(device=None):
    return _stat("reserved_bytes.all.current")


def max_memory_reserved(device=None):
    return _stat("reserved_bytes.all.peak")
