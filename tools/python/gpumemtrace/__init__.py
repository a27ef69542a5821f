# tools/python/gpumemtrace/__init__.py — named scopes for gpumemtrace from Python.
"""Named scopes for gpumemtrace from Python (docs/capture.md, "Scopes").

    import gpumemtrace

    with gpumemtrace.scope("eval"):       # a context manager ...
        evaluate(model)

    @gpumemtrace.scope("train_step")      # ... or a decorator
    def train_step(batch): ...

Each scope puts a scope_begin and a scope_end event, with the caller's stack, into the trace of
libgpumemtrace.so, so that gpumem-report can check the part of the run inside for leaks on its own.
Scopes nest and may be used from any thread; an end closes the innermost open scope of the same name.
Without the library (the program runs untraced) everything here does nothing and never raises.

scope_begin()/scope_end() are the plain calls; `api` says who opened the scope ("pytest" for the
pytest plugin, "torch.backward" for the PyTorch hook; docs/trace-format.md lists them).
gc_callback() gives a gc.callbacks entry that records each garbage collection that freed objects (the
pytest plugin registers it).
Thread-safety: every function may be called from any thread.
"""
import contextlib
import ctypes
import threading
import time

__all__ = ["scope", "scope_begin", "scope_end", "active", "flush", "trace_path", "gc_callback"]

API = "gpumemtrace.scope"

_lookup_lock = threading.Lock()
_report = None      # ctypes function gpumemtrace_report_scope(int end, char* name, char* api)
_looked_up = False  # the library was looked for (found or not: the answer never changes)


def _function():
    """gpumemtrace_report_scope from the global scope (the library is LD_PRELOADed, never loaded
    here), or None."""
    global _report, _looked_up
    if _looked_up:
        return _report
    with _lookup_lock:
        if not _looked_up:
            try:
                fn = ctypes.CDLL(None).gpumemtrace_report_scope
                fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p]
                fn.restype = None
                _report = fn
            except (OSError, AttributeError):
                _report = None
            _looked_up = True
    return _report


def _encode(text):
    return str(text).encode("utf-8", "replace")


def active():
    """True when scopes reach a trace (libgpumemtrace.so is in this process)."""
    return _function() is not None


def scope_begin(name, api=API):
    """Opens the scope `name` on this thread."""
    fn = _function()
    if fn is not None:
        fn(0, _encode(name), _encode(api))


def scope_end(name, api=API, failed=False):
    """Closes the innermost open scope `name` (opened by scope_begin or scope). failed=True says that
    the work inside failed (the pytest plugin's failed tests): gpumem-report then lists the scope as
    not checked instead of checking it for leaks."""
    fn = _function()
    if fn is not None:
        fn(2 if failed else 1, _encode(name), _encode(api))


def flush():
    """Makes everything recorded so far readable in the trace file now (gpumemtrace_flush(): waits at
    most 2 s for the writer). True when done; False without the library or when it timed out."""
    try:
        fn = ctypes.CDLL(None).gpumemtrace_flush
    except (OSError, AttributeError):
        return False
    fn.restype = ctypes.c_int
    return fn() == 0


def trace_path():
    """The absolute path of this process's trace, or None (no library, or it writes no file)."""
    try:
        fn = ctypes.CDLL(None).gpumemtrace_trace_path
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_char_p
    path = fn()
    return path.decode("utf-8", "surrogateescape") if path else None


def gc_callback():
    """A gc.callbacks entry that writes a "gc" record (docs/trace-format.md) for each garbage
    collection that freed objects, or None: no library, an older one without
    gpumemtrace_report_gc(), or a time.monotonic_ns() that is not the trace's clock. The pytest plugin
    registers it (docs/launcher.md): gpumem-report then tells memory a test kept from memory only a
    reference cycle held until the collector ran.

    The clock: time.monotonic_ns() is clock_gettime(CLOCK_MONOTONIC) on Linux (CPython,
    Python/pytime.c, py_get_monotonic_clock; time.get_clock_info says so, and is asked), the clock
    of every time in the trace (util/monotonic_clock.h), so a free the recorder stamps during the
    collection lies between the two. Cost: CPython calls it at the "start" and the "stop" of every
    collection, generation 0 included; a start reads the clock, a stop reads info["collected"] and
    only when it is nonzero (most collections free nothing) makes one foreign call,
    gpumemtrace_report_gc(began_ns), which takes the end itself (`make bench-pytest-gc`,
    bench/pytest_gc_bench.py, measures it). A collection that collected nothing freed no object (a
    finalizer that resurrected its object may have run: what it freed is not recorded as the
    collection's). It never raises: an exception in a gc callback would be printed as unraisable.
    Thread-safety: CPython runs callbacks on the collecting thread with the GIL held, and collections
    never nest (gcmodule.c, gcstate->collecting), so one `began` serves them all."""
    if time.get_clock_info("monotonic").implementation != "clock_gettime(CLOCK_MONOTONIC)":
        return None  # not the trace's clock: the times would not compare
    try:
        report = ctypes.CDLL(None).gpumemtrace_report_gc
    except (OSError, AttributeError):
        return None
    report.argtypes = [ctypes.c_uint64]
    report.restype = ctypes.c_int
    clock = time.monotonic_ns
    began = 0

    def on_gc(phase, info):
        nonlocal began
        if phase == "start":
            began = clock()
        elif began and info.get("collected"):
            try:
                report(began)
            except Exception:
                pass
            began = 0

    return on_gc


class scope(contextlib.ContextDecorator):
    """`with scope(name):` / `@scope(name)`: scope_begin on entry, scope_end on exit, also when the
    body raises (the exception passes through unchanged). The object holds no per-use state, so one
    decorated function may run on many threads at once, and recursively."""

    def __init__(self, name, api=API):
        self.name = str(name)
        self.api = api

    def __enter__(self):
        scope_begin(self.name, self.api)
        return self

    def __exit__(self, exc_type, exc, tb):
        scope_end(self.name, self.api)
        return False

    def __repr__(self):
        return "gpumemtrace.scope(%r)" % (self.name,)
