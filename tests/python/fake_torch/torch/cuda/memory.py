# tests/python/fake_torch/torch/cuda/memory.py — the stand-in's allocation history ring and _snapshot().
import collections
import os
import threading
import time
import traceback

_lock = threading.Lock()
_history = None  # deque(maxlen=max_entries) when enabled
_stacks = "python"
_context = "all"
_skip = frozenset()


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=1 << 62, device=None,
                           clear_history=False, compile_context=False, global_record_annotations=False,
                           skip_actions=None):
    global _history, _stacks, _context, _skip
    from . import _lazy_init
    from .. import _calls
    if skip_actions is not None and os.environ.get("FAKE_TORCH_NO_SKIP_ACTIONS"):
        raise TypeError("_record_memory_history() got an unexpected keyword argument 'skip_actions'")
    _calls.note("record_memory_history/context=%s" % context)
    if skip_actions:
        _calls.note("record_memory_history/skip=%s" % ",".join(skip_actions))
    _lazy_init()  # like PyTorch: recording needs the allocator
    with _lock:
        if enabled is None:
            _history = None
            return
        if _history is None or clear_history or _history.maxlen != max_entries:
            old = list(_history or [])
            _history = collections.deque([] if clear_history else old, maxlen=max_entries)
        _stacks = stacks
        _context = context
        _skip = frozenset(skip_actions or ())


def _frames():
    out = []
    for fs in reversed(traceback.extract_stack()[:-3]):  # innermost first, without the allocator
        if "/fake_torch/torch/" in fs.filename:
            continue
        out.append({"filename": fs.filename, "line": fs.lineno, "name": fs.name})
    return out


def _record(action, addr, size, alloc_frames=None):
    """Appends one entry and returns its frames. As PyTorch's allocator: a free gathers a stack of its
    own only with context="all"; otherwise its entry carries the block's allocation stack
    (`alloc_frames`, the frames _record returned for the alloc)."""
    frames = _frames() if alloc_frames is None or _context == "all" else alloc_frames
    with _lock:
        if _history is None or action in _skip:
            return []
        _history.append({"action": action, "addr": addr, "size": size, "stream": 0,
                         "time_us": time.time_ns() // 1000, "frames": frames,
                         **({"device_free": addr} if action == "oom" else {})})
    return frames


def _snapshot(device=None):
    from . import _allocator
    from .. import _calls
    _calls.note("snapshot")
    a = _allocator()
    with _lock:
        trace = [dict(e) for e in (_history or [])]
        if _history is not None:
            _history.append({"action": "snapshot", "addr": 0, "size": 0, "stream": 0,
                             "time_us": time.time_ns() // 1000, "frames": []})
    segs = [{"device": 0, "address": s[0], "total_size": s[1], "stream": 0, "segment_type": "large",
             "allocated_size": 0, "active_size": 0, "blocks": []} for s in a.segments]
    if any(e["frames"] for e in trace):
        _symbolize(trace)
    return {"segments": segs, "device_traces": [trace]}


def _dump_snapshot(filename="dump_snapshot.pickle"):
    import pickle
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)


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
        for f in e["frames"]:
            lookup(f["filename"], f["line"])
