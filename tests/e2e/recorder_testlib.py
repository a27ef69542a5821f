# tests/e2e/recorder_testlib.py — helpers for the recorder's end-to-end tests: run, read the trace.
"""Helpers for the recorder's end-to-end tests: run a program under LD_PRELOAD, read its trace."""
import glob
import io
import json
import os
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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
        e["LD_PRELOAD"] = LIB
        e.setdefault("GPUMEMTRACE_OUTPUT", out_dir.rstrip("/") + "/")
    if env:
        e.update(env)
    return subprocess.run(args, env=e, capture_output=True, text=True, timeout=120, **kwargs)


def trace_files(out_dir):
    return sorted(glob.glob(os.path.join(out_dir, "gpumemtrace.*")))


class Trace:
    """A parsed trace: header, modules, frames, stacks, events, dropped and footer records."""

    def __init__(self, path, text=None):
        self.path = path
        if text is None:
            with open(path, "rb") as f:
                text = f.read().decode("utf-8")
        self.lines = text.split("\n")
        self.truncated = bool(self.lines and self.lines[-1])
        if not self.truncated:
            self.lines.pop()
        self.records = []
        for i, line in enumerate(self.lines):
            try:
                self.records.append(json.loads(line))
            except ValueError:
                if i == len(self.lines) - 1:  # a killed process may cut its last line short
                    self.truncated = True
                    break
                raise
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
    out = subprocess.run(["zstd", "-dc", path], capture_output=True, check=True).stdout
    return out.decode("utf-8")


def tempdir():
    return tempfile.mkdtemp(prefix="gpumemtrace-test-")
