# tools/python/gpumemtrace_pytest_results.py — each test's GPU memory where pytest users look: a
# section in pytest's terminal summary, and limits per test as markers.
"""Each test's GPU memory in pytest's own output, as pytest-memray gives its users (docs/launcher.md,
"pytest"): loaded with the gpumemtrace_pytest plugin (its `pytest_plugins`), it does nothing without
libgpumemtrace.so in the process or with GPUMEMTRACE_PYTEST=0.

- A section of pytest's terminal summary, "GPU memory per test (gpumemtrace)": every test's leak
  (allocated during the test and still live when it ended) and its own peak (the most it had
  allocated and live at once; memory held before it began does not count), as gpumem-report finds
  them: `scopes[].leaked_bytes` and `scopes[].peak_bytes` (docs/report.md). Tests that leaked first.
  A test whose memory only a reference cycle kept, until a later garbage collection freed it, is
  noted "held until garbage collection" (`scopes[].held_until_gc_bytes`), not LEAKED.
  GPUMEMTRACE_PYTEST_SUMMARY=0 leaves it out.
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
  message naming the limit, the figure and where the memory was allocated. A test that already
  failed is left as it is. Sizes as gpumem-report reads them: "2 GiB", "512MB", "1.5G", 1048576
  (powers of 1024).

Every figure is gpumem-report's, from this process's own trace (gpumemtrace.trace_path()), so it is
what `gpumemtrace ci` gates on. Cost: gpumem-report reads the trace so far once per marked test and
once for the summary. The analyzer is $GPUMEMTRACE_REPORT, else the gpumem-report beside the
preloaded libgpumemtrace.so (or in ../bin from it), else the one on PATH; it runs without the recorder.
Nothing here raises into pytest: when the analyzer cannot run, the summary says why in one line and the
markers fail their tests saying so (a limit that cannot be checked is not a pass).
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


def read_scopes():
    """{node id: its last scope as gpumem-report reports it} for this process's trace so far; raises
    RuntimeError saying why when it cannot be read."""
    trace = gpumemtrace.trace_path()
    if not trace:
        raise RuntimeError("this process writes no trace file")
    if not gpumemtrace.flush():
        raise RuntimeError("the recorder did not flush the trace in time")
    report = _report_binary()
    if not report:
        raise RuntimeError("gpumem-report not found (set GPUMEMTRACE_REPORT)")
    try:
        proc = subprocess.run([report, "--format", "json", "--no-progress", trace], capture_output=True, text=True,
                              env=_analyzer_env(), timeout=600)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise RuntimeError(f"{report}: {error}")
    if proc.returncode not in (0, 1, 3):
        raise RuntimeError(f"{report} exited {proc.returncode}: {proc.stderr.strip()[:300]}")
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        raise RuntimeError(f"{report} wrote no JSON report")
    return {s["name"]: s for s in data.get("scopes", [])}


# Python frames that are not the user's: installed packages, the standard library, PyTorch (a stand-in
# too), the profiler's own helpers (as the text report folds or hides them: docs/report.md, "Stacks").
_NOT_USER = ("/site-packages/", "/dist-packages/", "/lib/python3", "<frozen ", "/torch/", "/gpumemtrace/__init__.py",
             "/gpumemtrace_torch/", "/gpumemtrace_pytest")


def _where(scope):
    """The user's frames of the stack of a scope's largest leak: where the memory was allocated."""
    leaks = scope.get("leaks") or []
    if not leaks:
        return ""
    lines = []
    for frame in leaks[0]["stack"]:
        if frame.get("lang") != "python" or any(part in frame.get("file", "") for part in _NOT_USER):
            continue
        lines.append(f"    {frame['function']} ({frame.get('file', '?')}:{frame.get('line', 0)})")
        if len(lines) == 6:
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


def _limit_failure(item, limits):
    """The failure text when the test's scope broke a limit, else None."""
    wanted = {}
    for name, value in limits.items():
        try:
            wanted[name] = parse_size(value)
        except ValueError as error:
            return f"gpumemtrace: {item.nodeid}: {name}: {error}"
    gpumemtrace_pytest = sys.modules.get("gpumemtrace_pytest")
    if gpumemtrace_pytest is not None:
        try:
            gpumemtrace_pytest._settle_memory(collect="gpu_leak_limit" in wanted or None)
        except Exception:
            pass
    try:
        scope = read_scopes().get(item.nodeid)
    except RuntimeError as error:
        return f"gpumemtrace: the GPU memory limits of {item.nodeid} cannot be checked: {error}"
    if scope is None:
        return f"gpumemtrace: the GPU memory limits of {item.nodeid} cannot be checked: its scope is not in the trace"
    problems = []
    peak, leaked = scope.get("peak_bytes", 0), scope.get("leaked_bytes", 0)
    if "gpu_memory_limit" in wanted and peak > wanted["gpu_memory_limit"]:
        problems.append(f"Test was limited to {format_size(wanted['gpu_memory_limit'])} of GPU memory "
                        f"(gpu_memory_limit) but its peak was {format_size(peak)}")
    if "gpu_leak_limit" in wanted and leaked > wanted["gpu_leak_limit"]:
        problems.append(f"Test was limited to {format_size(wanted['gpu_leak_limit'])} of leaked GPU memory "
                        "(gpu_leak_limit) but leaked "
                        f"{format_size(leaked)} in {scope.get('leaked_count', 0)} allocation"
                        f"{'' if scope.get('leaked_count', 0) == 1 else 's'}, allocated here:{_where(scope)}")
    return "\n".join(problems) or None


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu_memory_limit(size): fail the test when its own GPU memory peak exceeds "
                                       "size (gpumemtrace, e.g. \"2 GiB\")")
    config.addinivalue_line("markers", "gpu_leak_limit(size): fail the test when it keeps more than size of GPU "
                                       "memory when its function returns (gpumemtrace, e.g. \"1 MiB\")")


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


def pytest_terminal_summary(terminalreporter):
    if not _enabled() or os.environ.get("GPUMEMTRACE_PYTEST_SUMMARY", "1").lower() in _OFF:
        return
    write = terminalreporter.write_line
    try:
        scopes = [s for s in read_scopes().values() if s.get("api") == "pytest"]
    except RuntimeError as error:
        terminalreporter.write_sep("=", "GPU memory per test (gpumemtrace)")
        write(f"not available: {error}")
        return
    if not scopes:
        return
    terminalreporter.write_sep("=", "GPU memory per test (gpumemtrace)")
    scopes.sort(key=lambda s: (-s.get("leaked_bytes", 0), -s.get("peak_bytes", 0), s["name"]))
    width = min(100, max(len(s["name"]) for s in scopes))
    write(f"{'test':<{width}}  {'leaked':>10}  {'peak':>10}")
    for s in scopes[:50]:
        note = ("  not checked: the test failed" if s.get("checked") is False
                else "  LEAKED" if s.get("leaked_bytes") else "")
        if s.get("held_until_gc_bytes"):
            note += f"  held until garbage collection: {format_size(s['held_until_gc_bytes'])}"
        write(f"{s['name']:<{width}}  {format_size(s.get('leaked_bytes', 0)):>10}  {format_size(s.get('peak_bytes', 0)):>10}{note}")
    if len(scopes) > 50:
        write(f"... and {len(scopes) - 50} more (gpumem-report --format html shows them all)")
    leaking = [s for s in scopes if s.get("leaked_bytes")]
    top = max(scopes, key=lambda s: s.get("peak_bytes", 0))
    write(f"{len(scopes)} tests; {len(leaking)} leaked"
          + (f" {format_size(sum(s['leaked_bytes'] for s in leaking))}" if leaking else "")
          + f"; highest peak {format_size(top.get('peak_bytes', 0))} ({top['name']})")
