# tools/python/gpumemtrace_pytest.py — pytest plugin: every test is a gpumemtrace scope.
"""pytest plugin: every test is a gpumemtrace scope, so gpumem-report can name the test that leaked
(docs/launcher.md, "pytest"). `gpumemtrace run|ci` loads it through PYTEST_PLUGINS; by hand:
`pytest -p gpumemtrace_pytest` with tools/python on PYTHONPATH. GPUMEMTRACE_PYTEST=0 turns it off.

The scope is named by the test's node id (api "pytest"). It opens when the test's call phase starts,
so what fixtures allocate during setup is outside it, and closes after the test's teardown (once its
report is made), so what a fixture frees at teardown is not a leak. Just before it closes, the plugin does what PyTorch's own
CudaMemoryLeakCheck does, so that only memory the test really kept is left inside the scope:
gc.collect(); then, only when the program already imported torch and initialised CUDA,
torch.cuda.synchronize() and torch._C._cuda_clearCublasWorkspaces(); then it has the PyTorch hook
(gpumemtrace_torch) drain PyTorch's allocation history, so the test's frees are in the trace before
the process might die.

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


def _settle_memory():
    """Frees what is only waiting to be freed, as PyTorch's CudaMemoryLeakCheck does before it
    compares, and gets PyTorch's record of it into the trace."""
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
    hook = sys.modules.get("gpumemtrace_torch")
    if hook is not None:
        hook.drain_now()


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
    """True when this phase failed: the call raised (a skip from the test's body aside), or teardown
    failed."""
    if call.when == "call":
        return call.excinfo is not None and not call.excinfo.errisinstance(pytest.skip.Exception)
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
        gpumemtrace.scope_end(item.nodeid, API, failed=failed)
    except Exception:
        pass
