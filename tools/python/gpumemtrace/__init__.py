# tools/python/gpumemtrace/__init__.py — gpumemtrace from Python: scopes, marks, start/stop, dump, read.
"""gpumemtrace from Python (docs/python-api.md).

    import gpumemtrace

    with gpumemtrace.scope("eval"):       # a named scope: a context manager ...
        evaluate(model)

    @gpumemtrace.scope("train_step")      # ... or a decorator
    def train_step(batch): ...

    gpumemtrace.mark("epoch 3")           # a phase marker
    gpumemtrace.stop(); warm_up(); gpumemtrace.start()   # no stacks in between (every event kept)
    path = gpumemtrace.dump()             # the trace so far, sealed into a trace of its own
    report = gpumemtrace.read(path)       # its report, as typed Python objects (gpumemtrace.report)

Each scope puts a scope_begin and a scope_end event, with the caller's stack, into the trace of
libgpumemtrace.so, so that gpumem-report can check the part of the run inside for leaks on its own.
Scopes nest and may be used from any thread; an end closes the innermost open scope of the same name.
Without the library (the program runs untraced) scopes do nothing and never raise; mark(), start(),
stop() and dump() do nothing either, and the first of them says so once (NotTracedWarning).

scope_begin()/scope_end() are the plain calls; `api` says who opened the scope ("pytest" for the
pytest plugin, "torch.backward" for the PyTorch hook; docs/trace-format.md lists them).
gc_callback() gives a gc.callbacks entry that records each garbage collection that freed objects (the
pytest plugin registers it).
Thread-safety: every function may be called from any thread.
"""
import contextlib
import time

__all__ = ["scope", "scope_begin", "scope_end", "active", "flush", "trace_path", "gc_callback", "mark", "start",
           "stop", "dump", "read", "NotTracedWarning", "DumpError"]

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


def scope_live_bytes(name):
    """Bytes allocated inside the scope `name`, which ended last, and still live when it ended (any
    thread, any layer), as the recorder's writer has drained them: call flush() first. A bound of what
    gpumem-report can call the scope's leak (interpose/writer/scope_bound.h). None when not known (no
    library, an older one, another scope ended since)."""
    fn = _symbol("gpumemtrace_scope_live_bytes", lambda c: [c.c_char_p], lambda c: c.c_longlong)
    if fn is None:
        return None
    n = fn(_encode(name))
    return n if n >= 0 else None


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


class NotTracedWarning(RuntimeWarning):
    """mark(), start(), stop() or dump() was called in a process that runs without the recorder."""


class DumpError(RuntimeError):
    """dump() could not write its trace (the message says why)."""


_warned_untraced = False


def _untraced(what, why=None):
    """Says once per process that `what` does nothing here (warnings.warn, NotTracedWarning)."""
    global _warned_untraced
    if _warned_untraced:
        return
    _warned_untraced = True
    import warnings
    warnings.warn("gpumemtrace.%s() does nothing: %s" % (
        what, why or "this process runs without the recorder (start it with `gpumemtrace run -- python ...`, "
                     "or LD_PRELOAD=libgpumemtrace.so)"), NotTracedWarning, stacklevel=3)


def mark(label):
    """Puts a phase marker `label` into the trace ("epoch 3"): peaks, OOMs and growth name the phase
    they fell in (the C API's gpumemtrace_mark). Kept up to 47 bytes."""
    fn = _symbol("gpumemtrace_report_mark", lambda c: [c.c_char_p])
    if fn is None:
        return _untraced("mark")
    fn(_encode(label))


def _control(what, symbol):
    fn = _symbol(symbol, lambda c: [], lambda c: c.c_int)
    if fn is None:
        _untraced(what)
        return False
    if fn() < 0:
        _untraced(what, "the recorder is off (GPUMEMTRACE_DISABLE, or it stopped: its warning says why)")
        return False
    return True


def stop():
    """Stops taking stacks, from now until start(): every CUDA memory event is still recorded (what is
    live, the peaks and the OOM verdicts stay exact, as PyTorch's snapshot keeps the blocks allocated
    while its history was off), without its stack, which saves most of each event's cost. The report
    shows what was allocated meanwhile as "(no stack recorded)", and says for how long stacks were
    stopped. True when the recorder is there (stopped now, or already), False when not."""
    return _control("stop", "gpumemtrace_report_pause")


def start():
    """Takes stacks again after stop() (recording itself never stopped). True when the recorder is
    there, False when not."""
    return _control("start", "gpumemtrace_report_resume")


def dump(path=None, timeout=60.0):
    """Seals what was recorded so far into a new, self-contained trace and returns its absolute path;
    the trace itself goes on. gpumem-report reads the dump as the trace of a process still running:
    what is live in it is "live when the trace was cut", not a leak.

    `path`: where (None: beside the trace, its name with "-dump": gpumemtrace.python3.11.42-dump.jsonl.zst);
    a name that is taken gets a number (-dump-2), as traces do. The dump is compressed as the trace is:
    name it *.jsonl.zst (the default) or, when GPUMEMTRACE_OUTPUT names a .jsonl, *.jsonl. Waits at
    most `timeout` seconds (the copy reads the whole trace file). Raises DumpError when it cannot be
    written; returns None (with a NotTracedWarning) without the recorder, or before anything was
    recorded (the recorder starts at the first CUDA memory call)."""
    fn = _symbol("gpumemtrace_report_dump", lambda c: [c.c_char_p, c.c_int, c.c_char_p, c.c_size_t],
                 lambda c: c.c_int)
    if fn is None:
        return _untraced("dump")
    import ctypes
    import os
    message = ctypes.create_string_buffer(8192)
    where = None if path is None else os.fsencode(os.path.abspath(os.fspath(path)))
    rc = fn(where, max(1, min(int(timeout * 1000), 2 ** 31 - 1)), message, len(message))
    text = message.value.decode("utf-8", "surrogateescape")
    if rc == 0:
        return os.path.abspath(text)
    if rc == 2 or rc < 0:
        import warnings
        warnings.warn("gpumemtrace.dump() wrote nothing: " + text, NotTracedWarning, stacklevel=2)
        return None
    raise DumpError("gpumemtrace.dump(): " + text)


def read(*traces, what_if=(), suppressions=None, report=None):
    """The report of `traces` (trace files, PyTorch snapshots, folders: what gpumem-report takes) as
    typed Python objects: a gpumemtrace.report.Report, whose fields are the keys of `gpumem-report
    --format json` (docs/report.md), each object a dataclass. Runs the native analyzer (found beside
    this package, or `report`: its path); raises gpumemtrace.report.ReportError with its message when
    it cannot read them. `what_if`: allocator settings to replay (--what-if); `suppressions`: a
    suppressions file (--suppressions)."""
    from gpumemtrace import report as _report
    return _report.read(*traces, what_if=what_if, suppressions=suppressions, report=report)


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
