# tests/gpu/gpuenv.py — where the GPU checks find gpumemtrace and the prebuilt programs, where they write, and how they report.
"""Shared by the GPU checks (tests/gpu/*_checks.py, snapshot_corpus.py), run by tests/gpu/run.sh.

Where things are (the contract with `make gpu-bundle`, nothing is built on the GPU machine):
  GPU_BUNDLE        an unpacked release bundle: bin/gpumemtrace, bin/gpumem-report,
                    lib/libgpumemtrace.so, python/ (tools/python); run.sh sets it from its
                    GPUMEMTRACE_HOME, which it keeps out of the checks' environment (a GPUMEMTRACE_*
                    name the recorder does not know would draw its warning in every traced child).
                    Unset: this checkout's build/ and tools/python (a machine with a build tree).
  GPU_PROGRAMS      the prebuilt GPU programs (GPU_CHECK_PROGRAMS, tests/gpu/module.mk). Unset:
                    build/tests/gpu.
  OUT               everything a check writes goes under it (traces, reports, logs, its results).
  GPU_CHECKS_DEADLINE  time.time() after which a check still to run reports SKIP ("time budget"), so
                    that run.sh ends within the device call's limit.
  GPU_CHECKS_NO_GPU   set by run.sh where nvidia-smi finds no GPU: every check SKIPs, even with a
                    stand-in torch on the path.
  GPU_CHECKS_ONLY   a comma-separated list of check names: the others are not run (the CPU test runs
                    the checks the stand-in torch can take, tests/python/test_gpu_run.py).
Results: every check calls Results.say(name, status, figure); the script's results go to
OUT/results/<script>.jsonl, which run.sh's summary reads (one line per check in summary.txt).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

_HOME = os.environ.get("GPU_BUNDLE")
if _HOME:
    LIB = os.path.join(_HOME, "lib", "libgpumemtrace.so")
    REPORT = os.path.join(_HOME, "bin", "gpumem-report")
    LAUNCHER = os.path.join(_HOME, "bin", "gpumemtrace")
    PYTHON_DIR = os.path.join(_HOME, "python")
    LIB_DIR = os.path.join(_HOME, "lib")
else:
    _BUILD = os.environ.get("GPUMEMTRACE_BUILD", os.path.join(ROOT, "build"))
    LIB = os.path.join(_BUILD, "libgpumemtrace.so")
    REPORT = os.path.join(_BUILD, "gpumem-report")
    LAUNCHER = os.path.join(_BUILD, "gpumemtrace")
    PYTHON_DIR = os.path.join(ROOT, "tools", "python")
    LIB_DIR = _BUILD
PROGRAMS = os.environ.get("GPU_PROGRAMS") or os.path.join(ROOT, "build", "tests", "gpu")
OUT = os.environ.get("OUT") or tempfile.mkdtemp(prefix="gpumemtrace-gpu-")


def out_dir(*parts):
    d = os.path.join(OUT, *parts)
    os.makedirs(d, exist_ok=True)
    return d


def time_left():
    deadline = os.environ.get("GPU_CHECKS_DEADLINE")
    return float(deadline) - time.time() if deadline else float("inf")


def have_gpu():
    if not shutil.which("nvidia-smi"):
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


def have_gpu_torch():
    if os.environ.get("GPU_CHECKS_NO_GPU"):
        return False
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


def traced_env(trace, extra=None):
    """The environment of a child traced by the recorder into `trace`, with the hook on PYTHONPATH."""
    env = dict(os.environ)
    env.update(LD_PRELOAD=LIB, GPUMEMTRACE_OUTPUT=trace, GPUMEMTRACE_QUIET="1",
               PYTHONPATH=os.pathsep.join(p for p in (PYTHON_DIR, env.get("PYTHONPATH", "")) if p))
    env.update(extra or {})
    return env


def read_trace(path):
    """(events, stack_of) of a trace file (tests/tracefile.py)."""
    import tracefile
    events, frames, stacks = [], {}, {}
    if os.path.exists(path):
        for r in tracefile.read_records(path)[0]:
            if r["type"] == "event":
                events.append(r)
            elif r["type"] == "frame":
                frames[r["id"]] = r
            elif r["type"] == "stack":
                stacks[r["id"]] = r["frames"]
    return events, (lambda e: [frames[i] for i in stacks.get(e.get("stack", 0), [])])


class Results:
    """PASS / FAIL / SKIP lines, printed as they come and kept for run.sh's summary."""

    def __init__(self, script):
        self.script = script
        self.rows = []

    def say(self, name, status, figure=""):
        status = {True: "PASS", False: "FAIL", None: "SKIP"}.get(status, status)
        self.rows.append({"check": "%s/%s" % (self.script, name), "status": status, "figure": str(figure)})
        print("%s %s/%s: %s" % (status, self.script, name, figure), flush=True)
        with open(os.path.join(out_dir("results"), self.script + ".jsonl"), "a") as f:
            f.write(json.dumps(self.rows[-1]) + "\n")

    def budget(self, name, seconds):
        """Whether to run check `name`: False when GPU_CHECKS_ONLY leaves it out, or (with a SKIP) when
        less than `seconds` are left before the deadline."""
        only = os.environ.get("GPU_CHECKS_ONLY")
        if only and name not in only.split(","):
            return False
        if time_left() >= seconds:
            return True
        self.say(name, None, "time budget: %.0f s left, needs about %d s" % (time_left(), seconds))
        return False

    def exit_code(self):
        return 1 if any(r["status"] == "FAIL" for r in self.rows) else 0
