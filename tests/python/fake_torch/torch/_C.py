# tests/python/fake_torch/torch/_C.py — the stand-in's torch._C: history recording and snapshots as the C++ side does them, OOM observers.
"""What torch._C does for the calls the hook and the tests make (torch/csrc/cuda/Module.cpp and
memory_snapshot.cpp): _cuda_record_memory_history validates its strings (RuntimeError), initialises
CUDA in C++ only, forces max_entries to 1 unless enabled == "all", and takes as many arguments as the
release has (a pybind function refuses others: TypeError); _cuda_memorySnapshot converts every
entry's time with a new converter, copies the ring, then appends the "snapshot" entry
(NativeCachingAllocator::snapshot: trace() then snapshot() per device), gives an entry "frames"
only when it has a stack, and adds "allocator_settings" (cuda/_config.py). The settings calls:
_cuda_setMemoryFraction, and the release's settings parser (_release.py)."""
import os

from . import _calls, _release

_oom_observers = []
_CONTEXT = {None: 0, "state": 1, "alloc": 2, "all": 3}


def _cuda_attach_out_of_memory_observer(fn):
    _oom_observers.append(fn)


def _cuda_clearCublasWorkspaces():
    _calls.note("clearCublasWorkspaces")


def _cuda_resetAccumulatedMemoryStats(device):
    from . import cuda
    cuda._cpp_init().reset_accumulated()


def _cuda_resetPeakMemoryStats(device):
    from . import cuda
    cuda._cpp_init().reset_peaks()


def _cuda_setMemoryFraction(fraction, device):
    """THCPModule_setMemoryFraction -> the device's DeviceCachingAllocator::setMemoryFraction."""
    from . import cuda
    alloc = cuda._cpp_init()
    if device != 0:
        raise RuntimeError("Allocator not initialized for device %d: did you call init?" % device)
    alloc.set_memory_fraction(float(fraction))


def _settings_parser(text):
    """setAllocatorSettings: the process's config parses `text` (the allocator reads it at each call)."""
    from .cuda import _config
    _config.instance().parse(str(text))


if _release.GENERIC_ALLOC_CONF:
    def _accelerator_setAllocatorSettings(env):
        _settings_parser(env)
else:
    def _cuda_cudaCachingAllocator_set_allocator_settings(env):
        _settings_parser(env)


if _release.FRACTION_OPTION:
    def _cuda_getMemoryFraction(device):
        from . import cuda
        return cuda._cpp_init().memory_fraction()


def _cuda_record_memory_history(enabled, context, stacks, max_entries, *rest):
    allowed = (3 if _release.CLEAR_HISTORY else 0) + (1 if _release.SKIP_ACTIONS_PARAM else 0) + \
        (2 if _release.HOST_AND_CUDA_PARAMS else 0)
    if len(rest) != allowed:
        raise TypeError("_cuda_record_memory_history(): incompatible function arguments")
    clear = bool(rest[0]) if _release.CLEAR_HISTORY else False
    skip = list(rest[3]) if _release.SKIP_ACTIONS_PARAM else []
    if skip and os.environ.get("FAKE_TORCH_NO_SKIP_ACTIONS"):
        raise TypeError("_cuda_record_memory_history(): incompatible function arguments")
    if enabled not in (None, "state", "all"):
        raise RuntimeError("expected state to be 'state', 'all', or None")
    if context not in _CONTEXT:
        raise RuntimeError("expected context to be 'state', 'alloc', 'all', or None")
    if stacks not in ("python", "all"):
        raise RuntimeError("expected stacks to be 'python', or 'all'")
    _calls.note("record_memory_history/context=%s" % context)
    if skip:
        _calls.note("record_memory_history/skip=%s" % ",".join(skip))
    _record(enabled is not None, _CONTEXT[context] if enabled is not None else 0,
            max_entries if enabled == "all" else 1, clear, skip, stacks)


def _cuda_record_memory_history_legacy(enabled, record_context, trace_alloc_max_entries,
                                       trace_alloc_record_context, record_context_cpp, clear_history):
    when = 2 if trace_alloc_record_context else (1 if record_context else 0)
    _record(bool(enabled), when, trace_alloc_max_entries, clear_history, [], "all" if record_context_cpp else "python")


def _record(enabled, when, max_entries, clear, skip, stacks):
    from . import cuda
    from .cuda import memory
    alloc = cuda._cpp_init()          # at::globalContext().lazyInitCUDA(): not Python's _lazy_init
    memory._stacks = stacks
    alloc.record_history(enabled, when, max_entries, clear, skip)


def _cuda_memorySnapshot(mempool_id):
    from . import cuda
    _calls.note("snapshot")
    alloc = cuda._cpp_init()
    convert = cuda._converter.make_converter()
    raw = alloc.trace()
    segs = alloc.snapshot_segments()   # after the copy: appends the "snapshot" entry
    trace = []
    for e in raw:
        d = {"action": e["action"]}
        d["device_free" if e["action"] == "oom" else "addr"] = e["addr"]
        d["size"] = e["size"]
        d["stream"] = e["stream"]
        d["time_us"] = convert(e["t"])
        if _release.COMPILE_CONTEXT_KEY:
            d["compile_context"] = "N/A"
        if _release.USER_METADATA_KEY:
            d["user_metadata"] = ""
        if _release.POOL_ID_KEY:
            d["pool_id"] = (0, 0)
        if e["context"] is not None:
            d["frames"] = e["context"]
        trace.append(d)
    segments = [{"device": 0, "address": a, "total_size": n, "stream": 0, "segment_type": "large",
                 "allocated_size": 0, "active_size": 0, "requested_size": 0, "is_expandable": x, "blocks": []}
                for a, n, x in segs]
    if any("frames" in d for d in trace):
        _symbolize(trace)
    from .cuda import _config
    return {"segments": segments, "device_traces": [trace], "allocator_settings": _config.instance().snapshot_dict()}


def _symbolize(trace):
    """What PyTorch's symbolizer does besides naming frames (appendSymbolized in
    torch/csrc/profiler/python/combined_traceback.cpp): it asks hasattr(torch, "_inductor"), which
    imports torch._inductor through torch's module __getattr__ when nothing imported it before, and
    maps frames of inductor-generated code through PyCodeCache.stack_frames_for_code."""
    import sys
    torch = sys.modules["torch"]
    if not hasattr(torch, "_inductor"):
        return
    lookup = torch._inductor.codecache.PyCodeCache.stack_frames_for_code
    for e in trace:
        for f in e.get("frames", ()):
            lookup(f["filename"], f["line"])
