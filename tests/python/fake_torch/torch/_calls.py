# tests/python/fake_torch/torch/_calls.py — the stand-in's log of calls the tests check (FAKE_TORCH_CALL_LOG).
"""The stand-in's record of calls the tests want to see (FAKE_TORCH_CALL_LOG=path): one line
"NAME T PID" per call, T the CLOCK_MONOTONIC ns of the call (the clock of the trace's "t"), PID the
calling process."""
import os
import time


def note(name):
    path = os.environ.get("FAKE_TORCH_CALL_LOG")
    if path:
        with open(path, "a") as f:
            f.write("%s %d %d\n" % (name, time.monotonic_ns(), os.getpid()))
