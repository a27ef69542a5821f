# tests/e2e/recorder_testlib.py — helpers for the recorder's end-to-end tests: run, read the trace.
"""Helpers for the recorder's end-to-end tests: run a program under LD_PRELOAD, read its trace."""
import glob
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import tracefile  # noqa: E402
from testenv import FORK_UNDER_SANITIZER, fork_deadlocks_under_sanitizer, recorder_preload  # noqa: E402,F401
BUILD = os.environ.get("GPUMEMTRACE_BUILD", os.path.join(ROOT, "build"))
LIB = os.path.join(BUILD, "libgpumemtrace.so")
SIM = os.path.join(BUILD, "sim")
PROGRAMS = os.path.join(BUILD, "tests", "programs")


def program(name):
    return os.path.join(PROGRAMS, name)


def run_traced(args, out_dir, env=None, preload=True, **kwargs):
    """Runs args with the recorder preloaded, traces into out_dir/. Returns CompletedProcess."""
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    e["LD_LIBRARY_PATH"] = SIM
    if preload:
        e["LD_PRELOAD"] = recorder_preload(LIB)
        e.setdefault("GPUMEMTRACE_OUTPUT", out_dir.rstrip("/") + "/")
    if env:
        e.update(env)
    return subprocess.run(args, env=e, capture_output=True, text=True, timeout=120, **kwargs)


def trace_files(out_dir):
    return sorted(glob.glob(os.path.join(out_dir, "gpumemtrace.*")))


class Trace:
    """A parsed trace (plain or .zst, format version 1 or 2): header, modules, frames, stacks, events
    (in their version 1 form, tests/tracefile.py), dropped and footer records."""

    def __init__(self, path, text=None):
        self.path = path
        raw, self.truncated = tracefile.parse_lines(tracefile.read_text(path) if text is None else text)
        self.records = tracefile.decode(raw)
        self.header = self.records[0]
        self.frames = {r["id"]: r for r in self.records if r["type"] == "frame"}
        self.stacks = {r["id"]: r for r in self.records if r["type"] == "stack"}
        self.modules = {r["id"]: r for r in self.records if r["type"] == "module"}
        self.events = [r for r in self.records if r["type"] == "event"]
        self.dropped = [r for r in self.records if r["type"] == "dropped"]
        footers = [r for r in self.records if r["type"] == "footer"]
        self.footer = footers[0] if footers else None

    def functions(self, event):
        """Function names of the event's stack, innermost first (inlined frames expanded)."""
        names = []
        for fid in self.stacks[event["stack"]]["frames"] if event["stack"] else []:
            frame = self.frames[fid]
            names.extend(i["function"] for i in frame.get("inlined", []))
            names.append(frame.get("function", ""))
        return names

    def allocs(self, **match):
        return [e for e in self.events if e["op"] == "alloc" and all(e.get(k) == v for k, v in match.items())]


def read_zst(path):
    return tracefile.read_text(path)


def tempdir():
    return tempfile.mkdtemp(prefix="gpumemtrace-test-")
