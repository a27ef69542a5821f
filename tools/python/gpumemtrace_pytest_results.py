# tools/python/gpumemtrace_pytest_results.py — each test's GPU memory where pytest users look: a
# section in pytest's terminal summary, limits per test as markers, and `gpumemtrace ci`'s gate.
"""Each test's GPU memory in pytest's own output, as pytest-memray gives its users (docs/launcher.md,
"pytest"): loaded with the gpumemtrace_pytest plugin (its `pytest_plugins`), it does nothing without
libgpumemtrace.so in the process or with GPUMEMTRACE_PYTEST=0.

- A section of pytest's terminal summary, "GPU memory per test (gpumemtrace)": every test's leak
  (allocated during the test and still live when it ended) and its own peak (the most it had
  allocated and live at once; memory held before it began does not count), as gpumem-report finds
  them: `scopes[].leaked_bytes` and `scopes[].peak_bytes` (docs/report.md). Tests that leaked first.
  A test whose memory only a reference cycle kept, until a later garbage collection freed it, is
  noted "held until garbage collection" (`scopes[].held_until_gc_bytes`), not LEAKED; a test over a
  limit of its own "OVER gpu_memory_limit" (never clean). pytest-memray's --most-allocations N lists
  the N highest peaks instead (0: all). GPUMEMTRACE_PYTEST_SUMMARY=0 leaves it out.
- Markers, as pytest-memray's limit_memory and limit_leaks:
      @pytest.mark.gpu_memory_limit("2 GiB")   # the test's own peak may not exceed 2 GiB
      @pytest.mark.gpu_leak_limit("1 MiB")     # it may not keep more than 1 MiB when its function returns
  measured over the test function, as pytest-memray measures its limits: when the call phase ends
  (before the fixtures' teardown), the plugin settles memory as before a scope's end (with PyTorch,
  synchronize and a drain of its history; for a test with gpu_leak_limit, a gc.collect() first, so
  that what only a reference cycle holds is not counted against the limit: the marker asks for that
  check, and the collect runs the finalizers of such cycles before the test's outcome, as
  GPUMEMTRACE_PYTEST_GC=1 does for every test), makes the trace readable
  (gpumemtrace.flush()) and reads the test's scope, still open; over a limit, the test fails with a
  message naming the limit, the figure and where the memory was allocated (--stacks N frames). A test
  that already failed is left as it is. Sizes as gpumem-report reads them: "2 GiB", "512MB", "1.5G",
  1048576 (powers of 1024). What came of a test's limits goes into its scope's end (scope_bits:
  gpumem-report then names the limit a test went over, and leaves a test with its own gpu_leak_limit
  to it rather than to --fail-on-leak).
- The session gate (SessionGate): under `gpumemtrace ci --fail-on-leak`, each test is checked against
  it inside pytest once its scope has ended, so that a test the gate fails is failed in pytest's own
  output and JUnit XML.

Every figure is gpumem-report's, from this process's own trace (gpumemtrace.trace_path()), so it is
what `gpumemtrace ci` gates on. Cost: gpumem-report reads the trace so far once per marked test (per
test under the session gate) and once for the summary. The analyzer is $GPUMEMTRACE_REPORT, else the gpumem-report beside the
preloaded libgpumemtrace.so (or in ../bin from it), else the one on PATH; it runs without the recorder.
Nothing here raises into pytest: when the analyzer cannot run, the summary says why in one line and the
markers fail their tests saying so (a limit that cannot be checked is not a pass, and neither is one
checked against nothing: when no GPU memory event of the process has reached the recorder, every
figure is 0 B because nothing was seen).
"""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

import gpumemtrace

_OFF = ("0", "off", "no", "false")
MARKERS = ("gpu_memory_limit", "gpu_leak_limit")
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text):
    """Bytes of "2 GiB", "512MB", "1.5g", "1048576" or an int (powers of 1024, as gpumem-report);
    ValueError otherwise."""
    if isinstance(text, int) and text >= 0:
        return text
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgtKMGT]?)(?:i?[bB])?\s*", str(text))
    if not m:
        raise ValueError(f"expected a size like '2 GiB', '512 MiB' or a number of bytes, got {text!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def format_size(n):
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor:
            return f"{n / factor:.1f} {unit}"
    return f"{n} B"


def _enabled():
    return os.environ.get("GPUMEMTRACE_PYTEST", "1").lower() not in _OFF and gpumemtrace.active()


def _report_binary():
    """The gpumem-report to run, or None."""
    given = os.environ.get("GPUMEMTRACE_REPORT")
    if given and os.access(given, os.X_OK):
        return given
    try:
        with open("/proc/self/maps") as maps:
            library = next((line.split(None, 5)[5].strip() for line in maps
                            if "libgpumemtrace.so" in line and len(line.split(None, 5)) == 6), None)
    except OSError:
        library = None
    if library:
        here = os.path.dirname(library)
        for candidate in (os.path.join(here, "gpumem-report"), os.path.join(here, "..", "bin", "gpumem-report")):
            if os.access(candidate, os.X_OK):
                return os.path.normpath(candidate)
    return shutil.which("gpumem-report")


def _analyzer_env():
    """The environment for gpumem-report: without the recorder (it would trace the analyzer)."""
    env = dict(os.environ)
    kept = [p for p in env.get("LD_PRELOAD", "").replace(":", " ").split() if "libgpumemtrace" not in p]
    env["LD_PRELOAD"] = " ".join(kept)
    if not kept:
        del env["LD_PRELOAD"]
    return env


class TraceSoFar:
    """This process's trace so far as gpumem-report reports it: `scopes` {node id: its last scope},
    and `memory_seen`, whether any GPU memory event at all reached the recorder (when none did, every
    figure is 0 B because nothing was seen, not because nothing was used: a CUDA binding the recorder
    cannot see, docs/troubleshooting.md)."""

    def __init__(self, data):
        self.scopes = {s["name"]: s for s in data.get("scopes", [])}
        self.memory_seen = any(d.get("allocations", 0) or d.get("block_allocations", 0) or d.get("failed_allocations", 0)
                               for p in data.get("processes", []) for d in p.get("devices", []))


def read_trace(extra_args=()):
    """TraceSoFar of this process's trace; raises RuntimeError saying why when it cannot be read.
    `extra_args`: gpumem-report options (the session gate's suppressions)."""
    trace = gpumemtrace.trace_path()
    if not trace:
        raise RuntimeError("this process writes no trace file")
    if not gpumemtrace.flush():
        raise RuntimeError("the recorder did not flush the trace in time")
    report = _report_binary()
    if not report:
        raise RuntimeError("gpumem-report not found (set GPUMEMTRACE_REPORT)")
    try:
        proc = subprocess.run([report, *extra_args, "--format", "json", "--no-progress", trace], capture_output=True,
                              text=True, env=_analyzer_env(), timeout=600)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise RuntimeError(f"{report}: {error}")
    if proc.returncode not in (0, 1, 3):
        raise RuntimeError(f"{report} exited {proc.returncode}: {proc.stderr.strip()[:300]}")
    try:
        return TraceSoFar(json.loads(proc.stdout))
    except ValueError:
        raise RuntimeError(f"{report} wrote no JSON report")


def read_scopes():
    """{node id: its last scope as gpumem-report reports it} for this process's trace so far."""
    return read_trace().scopes


# Python frames that are not the user's: installed packages, the standard library, PyTorch (a stand-in
# too), the profiler's own helpers (as the text report folds or hides them: docs/report.md, "Stacks").
_NOT_USER = ("/site-packages/", "/dist-packages/", "/lib/python3", "<frozen ", "/torch/", "/gpumemtrace/__init__.py",
             "/gpumemtrace_torch/", "/gpumemtrace_pytest")


DEFAULT_STACKS = 6
_stacks = DEFAULT_STACKS  # --stacks N: the frames a failure message shows of each stack


def _where(scope):
    """The user's frames of the stack of a scope's largest leak: where the memory was allocated
    (at most --stacks of them)."""
    leaks = scope.get("leaks") or []
    if not leaks or _stacks <= 0:
        return ""
    lines = []
    for frame in leaks[0]["stack"]:
        if frame.get("lang") != "python" or any(part in frame.get("file", "") for part in _NOT_USER):
            continue
        lines.append(f"    {frame['function']} ({frame.get('file', '?')}:{frame.get('line', 0)})")
        if len(lines) == _stacks:
            break
    return "\n" + "\n".join(lines) if lines else ""


def _limits(item):
    found = {}
    for name in MARKERS:
        marker = item.get_closest_marker(name)
        if marker is None:
            continue
        value = marker.args[0] if marker.args else marker.kwargs.get("limit")
        found[name] = value
    return found


# Result bits for a test's scope_end (trace/format.h, kScope*; gpumemtrace_pytest ends the scope with
# them): what gpumem-report needs to know of the test's own limits.
OWN_LEAK_LIMIT, OVER_MEMORY_LIMIT, OVER_LEAK_LIMIT = 2, 4, 8
_scope_bits = {}  # node id -> bits, from the call phase's check to the scope's end


def scope_bits(nodeid):
    """The result bits of the test's own limits, for its scope_end (taken: asked once per test)."""
    return _scope_bits.pop(nodeid, 0)


def _cannot_check(item, why):
    return f"gpumemtrace: the GPU memory limits of {item.nodeid} cannot be checked: {why}"


def _limit_failure(item, limits):
    """The failure text when the test's scope broke a limit or cannot be checked, else None; notes the
    scope's result bits (scope_bits)."""
    wanted = {}
    for name, value in limits.items():
        try:
            wanted[name] = parse_size(value)
        except ValueError as error:
            return f"gpumemtrace: {item.nodeid}: {name}: {error}"
    if "gpu_leak_limit" in wanted:
        _scope_bits[item.nodeid] = OWN_LEAK_LIMIT  # checked below, whatever comes of it
    gpumemtrace_pytest = sys.modules.get("gpumemtrace_pytest")
    if gpumemtrace_pytest is not None:
        try:
            gpumemtrace_pytest._settle_memory(collect="gpu_leak_limit" in wanted or None)
        except Exception:
            pass
    try:
        trace = read_trace()
    except RuntimeError as error:
        return _cannot_check(item, error)
    scope = trace.scopes.get(item.nodeid)
    if scope is None:
        return _cannot_check(item, "its scope is not in the trace")
    peak, leaked = scope.get("peak_bytes", 0), scope.get("leaked_bytes", 0)
    if not trace.memory_seen:
        # Every figure is 0 B: nothing was seen, which is not the same as nothing used.
        return _cannot_check(item, "no GPU memory event of this process has reached the recorder, so every figure "
                                   "is 0 B (a CUDA library the recorder cannot see, such as one called through a "
                                   "dlopen handle: docs/troubleshooting.md); if the test uses no GPU memory, it "
                                   "needs no GPU memory limit")
    problems = []
    if "gpu_memory_limit" in wanted and peak > wanted["gpu_memory_limit"]:
        _scope_bits[item.nodeid] = _scope_bits.get(item.nodeid, 0) | OVER_MEMORY_LIMIT
        problems.append(f"Test was limited to {format_size(wanted['gpu_memory_limit'])} of GPU memory "
                        f"(gpu_memory_limit) but its peak was {format_size(peak)}")
    if "gpu_leak_limit" in wanted and leaked > wanted["gpu_leak_limit"]:
        _scope_bits[item.nodeid] = _scope_bits.get(item.nodeid, 0) | OVER_LEAK_LIMIT
        problems.append(f"Test was limited to {format_size(wanted['gpu_leak_limit'])} of leaked GPU memory "
                        "(gpu_leak_limit) but leaked "
                        f"{format_size(leaked)} in {scope.get('leaked_count', 0)} allocation"
                        f"{'' if scope.get('leaked_count', 0) == 1 else 's'}, allocated here:{_where(scope)}")
    return "\n".join(problems) or None


class SessionGate:
    """`gpumemtrace ci --fail-on-leak[=SIZE]`'s gate, applied to each test inside pytest, so that a test
    it fails is a failed test in pytest's own output and in its JUnit XML (a <failure> with the stack,
    as pytest-memray's limits are), not only in the report after the run. The launcher passes it as
    GPUMEMTRACE_PYTEST_GATE: the gpumem-report options that decide a test's leak, one per line (its
    --fail-on-leak=BYTES first; --suppressions=FILE, --no-default-suppressions). A test is checked once
    its scope has ended (after its teardown, as gpumem-report checks it), with gpumem-report over the
    trace so far: a run of the analyzer per test. A test with a gpu_leak_limit marker is left to its
    own limit (which takes precedence), a test that failed or was not checked to its failure."""

    def __init__(self, text):
        self.args = [line for line in text.splitlines() if line.strip()]
        first = self.args[0] if self.args else ""
        if not first.startswith("--fail-on-leak="):
            raise ValueError(f"GPUMEMTRACE_PYTEST_GATE: expected --fail-on-leak=BYTES first, got {first!r}")
        self.limit = parse_size(first.split("=", 1)[1])

    @staticmethod
    def from_environment():
        text = os.environ.get("GPUMEMTRACE_PYTEST_GATE", "")
        return SessionGate(text) if text.strip() else None

    def failure(self, nodeid):
        """The failure text when the test's ended scope leaked more than the gate allows, else None."""
        try:
            scope = read_trace(self.args[1:]).scopes.get(nodeid)
        except RuntimeError as error:
            return f"gpumemtrace: the --fail-on-leak gate cannot check {nodeid}: {error}"
        if scope is None or scope.get("checked") is False or scope.get("own_leak_limit"):
            return None
        leaked = scope.get("leaked_bytes", 0)
        if leaked <= self.limit:
            return None
        count = scope.get("leaked_count", 0)
        return (f"Test leaked {format_size(leaked)} of GPU memory in {count} allocation{'' if count == 1 else 's'} "
                f"(still live when it ended, after its teardown), over the --fail-on-leak limit of "
                f"{format_size(self.limit)} (gpumemtrace ci), allocated here:{_where(scope)}")


_gate = None  # SessionGate while a session under `gpumemtrace ci --fail-on-leak` runs


def pytest_addoption(parser):
    group = parser.getgroup("gpumemtrace", "GPU memory per test (gpumemtrace)")
    # The names and meanings of pytest-memray's options for host memory; when pytest-memray is also
    # loaded it has defined them already, and both plugins read the same values.
    for flag, kwargs in (("--most-allocations", dict(dest="most_allocations", type=int, default=None, metavar="N",
                                                     help="the summary lists the N tests with the highest GPU memory "
                                                          "peak (0: all)")),
                         ("--stacks", dict(dest="stacks", type=int, default=None, metavar="N",
                                           help="frames of each stack in GPU memory failure messages "
                                                f"(default {DEFAULT_STACKS})"))):
        try:
            group.addoption(flag, **kwargs)
        except ValueError:
            pass  # defined by pytest-memray


def pytest_configure(config):
    global _stacks, _gate
    config.addinivalue_line("markers", "gpu_memory_limit(size): fail the test when its own GPU memory peak exceeds "
                                       "size (gpumemtrace, e.g. \"2 GiB\")")
    config.addinivalue_line("markers", "gpu_leak_limit(size): fail the test when it keeps more than size of GPU "
                                       "memory when its function returns (gpumemtrace, e.g. \"1 MiB\")")
    stacks = config.getoption("stacks", None)
    _stacks = DEFAULT_STACKS if stacks is None else max(0, int(stacks))
    try:
        _gate = SessionGate.from_environment() if _enabled() else None
    except ValueError as error:
        _gate = None
        sys.stderr.write(f"gpumemtrace: {error}; tests are gated after the run only\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when != "call":
        return
    try:
        report = outcome.get_result()
        limits = _limits(item)
        if not limits or not report.passed or not _enabled():
            return
        failure = _limit_failure(item, limits)
        if failure:
            report.outcome = "failed"
            report.longrepr = failure
    except Exception:
        pass


def _protocol_is_pytests_own(item):
    """True when no plugin but pytest's runner (and hook wrappers) runs tests: another one (pytest-
    rerunfailures, pytest-forked) has its own idea of the protocol, which this one must not replace."""
    impls = item.config.pluginmanager.hook.pytest_runtest_protocol.get_hookimpls()
    own = ("_pytest.", "gpumemtrace_pytest_results")
    return all(impl.hookwrapper or getattr(impl, "wrapper", False) or impl.plugin_name.startswith(own)
               or getattr(impl.plugin, "__name__", "").startswith(own) for impl in impls)


# With the session gate: pytest's own protocol (setup, call, teardown), but the reports are logged only
# once the test's scope has ended and the gate has checked it, so that a test the gate fails is failed
# in its call report: pytest's summary, -x, and the JUnit XML's <failure> say so. Without the gate, or
# where another plugin runs tests its own way, pytest's protocol runs untouched.
@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    if _gate is None:
        return None
    try:
        if not _protocol_is_pytests_own(item):
            return None
        from _pytest.runner import runtestprotocol
    except Exception:
        return None
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    reports = runtestprotocol(item, nextitem=nextitem, log=False)
    try:
        call = next((r for r in reports if r.when == "call" and r.passed), None)
        teardown_ok = all(not r.failed for r in reports)
        if call is not None and teardown_ok:
            failure = _gate.failure(item.nodeid)
            if failure:
                call.outcome = "failed"
                call.longrepr = failure
    except Exception:
        pass
    for report in reports:
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def _note(s):
    """What the summary says of a test beside its figures."""
    over = s.get("over_own_limits") or []
    if over:
        note = "  OVER " + " and ".join(f"gpu_{limit}_limit" for limit in over)
    elif s.get("checked") is False:
        note = "  not checked: the test failed"
    elif _gate is not None and not s.get("own_leak_limit") and s.get("leaked_bytes", 0) > _gate.limit:
        note = f"  LEAKED (over --fail-on-leak {format_size(_gate.limit)})"
    elif s.get("leaked_bytes"):
        note = "  LEAKED" + ("  (within its gpu_leak_limit)" if s.get("own_leak_limit") else "")
    else:
        note = ""
    if s.get("held_until_gc_bytes"):
        note += f"  held until garbage collection: {format_size(s['held_until_gc_bytes'])}"
    return note


def pytest_terminal_summary(terminalreporter, config):
    if not _enabled() or os.environ.get("GPUMEMTRACE_PYTEST_SUMMARY", "1").lower() in _OFF:
        return
    write = terminalreporter.write_line
    try:
        trace = read_trace()
    except RuntimeError as error:
        terminalreporter.write_sep("=", "GPU memory per test (gpumemtrace)")
        write(f"not available: {error}")
        return
    scopes = [s for s in trace.scopes.values() if s.get("api") == "pytest"]
    if not scopes:
        return
    terminalreporter.write_sep("=", "GPU memory per test (gpumemtrace)")
    most = config.getoption("most_allocations", None)
    if most is None:  # every test, up to 50: those that leaked first
        scopes.sort(key=lambda s: (-s.get("leaked_bytes", 0), -s.get("peak_bytes", 0), s["name"]))
        shown = scopes[:50]
    else:  # pytest-memray's --most-allocations: the N highest peaks (0: all)
        scopes.sort(key=lambda s: (-s.get("peak_bytes", 0), s["name"]))
        shown = scopes[:most] if most > 0 else scopes
    width = min(100, max(len(s["name"]) for s in shown)) if shown else 4
    write(f"{'test':<{width}}  {'leaked':>10}  {'peak':>10}")
    for s in shown:
        write(f"{s['name']:<{width}}  {format_size(s.get('leaked_bytes', 0)):>10}  {format_size(s.get('peak_bytes', 0)):>10}"
              f"{_note(s)}")
    if len(shown) < len(scopes):
        write(f"... and {len(scopes) - len(shown)} more (gpumem-report --format html shows them all)")
    leaking = [s for s in scopes if s.get("leaked_bytes")]
    top = max(scopes, key=lambda s: s.get("peak_bytes", 0))
    write(f"{len(scopes)} tests; {len(leaking)} leaked"
          + (f" {format_size(sum(s['leaked_bytes'] for s in leaking))}" if leaking else "")
          + f"; highest peak {format_size(top.get('peak_bytes', 0))} ({top['name']})")
    if not trace.memory_seen:
        write("no GPU memory event of this process reached the recorder: 0 B means nothing was seen, not nothing "
              "used (docs/troubleshooting.md)")
