# tools/python/gpumemtrace_pytest.py — pytest plugin: every test is a gpumemtrace scope.
"""pytest plugin: every test is a gpumemtrace scope, so gpumem-report can name the test that leaked
(docs/launcher.md, "pytest"). `gpumemtrace run|ci` loads it through PYTEST_PLUGINS; by hand:
`pytest -p gpumemtrace_pytest` with tools/python on PYTHONPATH. GPUMEMTRACE_PYTEST=0 turns it off.

The scope is named by the test's node id (api "pytest"). It opens when the test's call phase starts,
so what fixtures allocate during setup is outside it, and closes after the test's teardown (once its
report is made), so what a fixture frees at teardown is not a leak. Just before it closes, the plugin
settles memory: only when the program already imported torch and initialised CUDA,
torch.cuda.synchronize() and torch._C._cuda_clearCublasWorkspaces(); then it has the PyTorch hook
(gpumemtrace_torch) drain PyTorch's allocation history, so the test's frees are in the trace before
the process might die. None of these runs Python code of the program: synchronize waits for the
device, clearing the workspaces frees cuBLAS's own buffers, the drain reads PyTorch's history.

Garbage collection is left as the suite has it. The plugin does not call gc.collect() between
tests: that would run the finalizers of cyclic garbage earlier than the suite would (a conftest that
calls gc.disable(), a test that relies on an object an earlier test left in a reference cycle, a
finalizer with side effects a later test checks), so a suite that passes plainly could fail under
gpumemtrace. GPU memory held only by such a cycle is then still live when its test ends; so that it
is not called that test's leak, the plugin reports every garbage collection that freed objects (a
gc.callbacks entry, from configure to unconfigure: its start and end times, a "gc" record in the
trace, docs/trace-format.md), and gpumem-report lists what a test left live that a collection freed
later as "held until garbage collection", not as a leak (docs/report.md). At session end, when every
test's outcome is decided, the plugin runs one gc.collect() (recorded like the others) and drains
the PyTorch hook, so that such memory is freed while the trace is still written.
GPUMEMTRACE_PYTEST_GC=1 brings back a gc.collect() before each test's scope ends, as PyTorch's own
CudaMemoryLeakCheck does (torch/testing/_internal/common_utils.py): what only a cycle held is then
freed inside the test's scope, at the cost of running finalizers then. A test with a gpu_leak_limit
marker is measured after such a collect too (gpumemtrace_pytest_results.py).

A test that failed or errored (its call raised, xfail included, or its teardown failed) is not
checked: its scope ends marked failed and the report lists it as "not checked: the test failed",
as CudaMemoryLeakCheck does not check a test that raised (torch/testing/_internal/common_utils.py,
`__exit__`: "Don't check for leaks if an exception was thrown"). Why: pytest keeps the failing test's
traceback for post-mortem debugging (_pytest/runner.py, pytest_runtest_call: sys.last_traceback, until
the next test's call), and with it the test's locals, so what they hold is alive at the end without
being a leak. GPUMEMTRACE_PYTEST_CHECK_FAILED=1 checks such
tests anyway. A test skipped from its body is checked.

Never fails or alters a test run: everything the plugin does is guarded, its hooks only wrap the
default implementation, and without libgpumemtrace.so in the process it does nothing at all.
"""
import gc
import os
import sys

import pytest

import gpumemtrace

API = "pytest"
_OFF = ("0", "off", "no", "false")

# Each test's leak and peak in pytest's terminal summary, and the gpu_memory_limit / gpu_leak_limit
# markers: a plugin of its own, loaded with this one.
pytest_plugins = ["gpumemtrace_pytest_results"]

# Node ids of the tests whose scope is open (call phase started, teardown not reported), and of those
# among them that failed. pytest runs the phases of one item on one thread; the sets are only guards
# against ending what never began.
_open = set()
_failed = set()


def _enabled():
    return os.environ.get("GPUMEMTRACE_PYTEST", "1").lower() not in _OFF and gpumemtrace.active()


def _collect_per_test():
    """GPUMEMTRACE_PYTEST_GC=1: a gc.collect() before each test's scope ends (off by default)."""
    return os.environ.get("GPUMEMTRACE_PYTEST_GC", "0").lower() not in _OFF


_on_gc = None  # the registered gc callback (gpumemtrace.gc_callback()), while the session runs


def _start_gc_windows():
    global _on_gc
    if _on_gc is not None:
        return
    # None: an older library, or not the trace's clock; no gc records then (the report counts what
    # only a cycle held as the test's leak, as before).
    _on_gc = gpumemtrace.gc_callback()
    if _on_gc is not None:
        gc.callbacks.append(_on_gc)


def _stop_gc_windows():
    global _on_gc
    if _on_gc is not None and _on_gc in gc.callbacks:
        gc.callbacks.remove(_on_gc)
    _on_gc = None


def _settle_memory(collect=None):
    """Gets what the test freed into the trace: with PyTorch, the device's pending work done,
    cuBLAS's workspaces freed and PyTorch's history drained. collect (default: GPUMEMTRACE_PYTEST_GC)
    also frees what only a reference cycle holds first, as PyTorch's CudaMemoryLeakCheck does before
    it compares; without it, no finalizer of the program runs here."""
    if _collect_per_test() if collect is None else collect:
        gc.collect()
    torch = sys.modules.get("torch")
    if torch is None:
        return  # never imported here: the program did not use it
    try:
        if not torch.cuda.is_initialized():
            return  # initialising CUDA now would change the program
        torch.cuda.synchronize()
        clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
        if clear is not None:
            clear()
    except Exception:
        pass
    _drain_torch_hook()


def _drain_torch_hook():
    hook = sys.modules.get("gpumemtrace_torch")
    if hook is not None:
        hook.drain_now()


def pytest_configure(config):
    try:
        if _enabled():
            _start_gc_windows()
    except Exception:
        pass


# Once every test's outcome is decided (pytest calls this hook after the last test, with the session's
# exit status already set; trylast: after the other plugins' own session-end work), free what only
# reference cycles still hold, inside a recorded collection, and get PyTorch's record of it into the
# trace: gpumem-report then shows it as held until garbage collection, and the terminal summary, which
# pytest's terminal reporter writes after this hook (a hook wrapper around it), does too.
# Without this the interpreter would free it at exit, after the trace's last drain: Python's
# finalization collects, gc.disable() or not (Python/pylifecycle.c, finalize_modules:
# _PyGC_CollectNoFail), and pytest >= 8.4 collects at unconfigure itself (src/_pytest/
# unraisableexception.py: gc_collect_harder in `cleanup` at 8.4.0, 315b3ae798fe; in
# pytest_unconfigure at df87db7b0462); Debian's pytest 7.2 does not (7.2.0, 3af3f569d539). So this
# runs the same finalizers a little earlier, never before a test's outcome.
@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    if _on_gc is None:
        return
    try:
        gc.collect()
        _drain_torch_hook()
    except Exception:
        pass


def pytest_unconfigure(config):
    try:
        _stop_gc_windows()
    except Exception:
        pass


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_call(item):
    try:
        if _enabled():
            gpumemtrace.scope_begin(item.nodeid, API)
            _open.add(item.nodeid)
    except Exception:
        pass
    yield


def _raised(call, report):
    """True when this phase failed: the call raised (a skip from the test's body aside; an xfail
    included) or went over a limit of its own (gpumemtrace_pytest_results), or teardown failed."""
    if call.when == "call":
        return report.failed or (call.excinfo is not None and not call.excinfo.errisinstance(pytest.skip.Exception))
    return call.when == "teardown" and report.failed


def _check_failed():
    return os.environ.get("GPUMEMTRACE_PYTEST_CHECK_FAILED", "0").lower() not in _OFF


# The scope ends once the teardown's report is made: after the fixtures' teardown (what they free is
# not the test's), and when the teardown's outcome is known.
@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if item.nodeid not in _open:
        return  # setup failed or was skipped: the call phase never ran
    try:
        if _raised(call, outcome.get_result()):
            _failed.add(item.nodeid)
    except Exception:
        pass
    if call.when != "teardown":
        return
    _open.discard(item.nodeid)
    failed = item.nodeid in _failed and not _check_failed()
    _failed.discard(item.nodeid)
    try:
        _settle_memory()
    except Exception:
        pass
    try:
        results = sys.modules.get("gpumemtrace_pytest_results")
        bits = results.scope_bits(item.nodeid) if results is not None else 0
        gpumemtrace.scope_end(item.nodeid, API, failed=failed, result=bits)
    except Exception:
        pass
