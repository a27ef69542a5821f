# tests/python/python_testlib.py — shared by the tests/python suites: paths, and reading a trace.
"""Shared by the tests/python suites: paths, and reading a trace into events + stacks."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import tracefile  # noqa: E402
from testenv import recorder_preload, sanitizer_runtime  # noqa: E402
BUILD = os.environ.get("GPUMEMTRACE_BUILD", os.path.join(ROOT, "build"))
LIB = os.path.join(BUILD, "libgpumemtrace.so")
SIM = os.path.join(BUILD, "sim", "libcudart.so.13")
PROGS = os.path.join(ROOT, "tests", "python", "progs")
# LD_PRELOAD of a traced program: the recorder, behind the sanitizer runtime under make asan / make tsan.
PRELOAD = recorder_preload(LIB)


def set_preload(env, recorder=True):
    """Sets LD_PRELOAD in `env` (and returns it): PRELOAD; with recorder=False the sanitizer runtime
    alone, since a Python program loads the instrumented libraries (the simulated CUDA runtime, the
    probe) with ctypes, and ThreadSanitizer's runtime cannot be loaded once a program runs (its TLS is
    static). Without a sanitizer and the recorder: no LD_PRELOAD."""
    env.pop("LD_PRELOAD", None)
    value = PRELOAD if recorder else sanitizer_runtime()
    if value:
        env["LD_PRELOAD"] = value
    return env


def prog_line(prog, marker):
    """The 1-based line of `prog` that contains `marker` (programs tag their planted lines)."""
    with open(prog, encoding="utf-8") as f:
        return next(i for i, l in enumerate(f.read().splitlines(), 1) if marker in l)


def read_trace(path):
    """(events, stack_of): the trace's events, and a function giving an event's frames, innermost
    first. A line cut short by a killed process is skipped."""
    frames, stacks, events = {}, {}, []
    for r in tracefile.read_records(path)[0]:
        if r["type"] == "frame":
            frames[r["id"]] = r
        elif r["type"] == "stack":
            stacks[r["id"]] = r["frames"]
        elif r["type"] == "event":
            events.append(r)
    return events, lambda ev: [frames[i] for i in stacks.get(ev.get("stack", 0), [])]


def python_with_pytest():
    """An interpreter that can import pytest (this one, or Debian's, where `make deps` installs
    python3-pytest), or None."""
    for exe in (sys.executable, "/usr/bin/python3"):
        try:
            if subprocess.run([exe, "-c", "import pytest"], capture_output=True, timeout=60).returncode == 0:
                return exe
        except OSError:
            pass
    return None
