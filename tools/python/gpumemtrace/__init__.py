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
import time

__all__ = ["scope", "scope_begin", "scope_end", "active", "flush", "trace_path", "gc_callback"]

API = "gpumemtrace.scope"

# ctypes is imported only once libgpumemtrace.so is known to be in the process: importing this package
# (the pytest plugin does, in every pytest run of an environment where the wheel is installed) costs
# an untraced program no module it did not import itself.
_functions = {}     # symbol name -> ctypes function (or None: not exported by the library)
_present = None     # whether libgpumemtrace.so is mapped into this process (the answer never changes)


def _library_present():
    """Whether libgpumemtrace.so is in this process, from /proc/self/maps (no ctypes needed); True
    when that cannot be read, so that the symbol lookup decides."""
    global _present
    if _present is None:
        try:
            with open("/proc/self/maps", "rb") as maps:
                _present = any(b"libgpumemtrace" in line for line in maps)
        except OSError:
            _present = True
    return _present


def _symbol(name, argtypes=None, restype=None):
    """The library's function `name` from the global scope (the library is LD_PRELOADed, never
    loaded here), or None. Thread-safety: two threads may both look it up; they find the same."""
    if name in _functions:
        return _functions[name]
    fn = None
    if _library_present():
        import ctypes
        try:
            fn = getattr(ctypes.CDLL(None), name)
            if argtypes is not None:
                fn.argtypes = argtypes(ctypes)
            fn.restype = restype(ctypes) if restype is not None else None
        except (OSError, AttributeError):
            fn = None
    _functions[name] = fn
    return fn


def _function():
    """gpumemtrace_report_scope(int end, char* name, char* api), or None."""
    return _symbol("gpumemtrace_report_scope", lambda c: [c.c_int, c.c_char_p, c.c_char_p])


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


def scope_end(name, api=API, failed=False, result=0):
    """Closes the innermost open scope `name` (opened by scope_begin or scope). failed=True says that
    the work inside failed (the pytest plugin's failed tests): gpumem-report then lists the scope as
    not checked instead of checking it for leaks. `result`: more bits of its scope_end's result
    (docs/trace-format.md, "Scopes": the pytest plugin's limits)."""
    fn = _function()
    if fn is not None:
        fn(1 + (result | (1 if failed else 0)), _encode(name), _encode(api))


def flush():
    """Makes everything recorded so far readable in the trace file now (gpumemtrace_flush(): waits at
    most 2 s for the writer). True when done; False without the library or when it timed out."""
    fn = _symbol("gpumemtrace_flush", restype=lambda c: c.c_int)
    return fn is not None and fn() == 0


def trace_path():
    """The absolute path of this process's trace, or None (no library, or it writes no file)."""
    fn = _symbol("gpumemtrace_trace_path", restype=lambda c: c.c_char_p)
    path = fn() if fn is not None else None
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
    report = _symbol("gpumemtrace_report_gc", lambda c: [c.c_uint64], lambda c: c.c_int)
    if report is None:
        return None
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
