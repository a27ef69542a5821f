# tests/python/fake_torch/torch/_calls.py — the stand-in's log of calls the tests check (FAKE_TORCH_CALL_LOG).
"""The stand-in's record of calls the tests want to see (FAKE_TORCH_CALL_LOG=path): one line
"NAME T" per call, T the CLOCK_MONOTONIC ns of the call (the clock of the trace's "t"); NAME ends in
"@child" when a process forked after torch was imported makes the call."""
import os
import time

_PID = os.getpid()


def note(name):
    path = os.environ.get("FAKE_TORCH_CALL_LOG")
    if path:
        with open(path, "a") as f:
            forked = "@child" if os.getpid() != _PID else ""
            f.write("%s%s %d\n" % (name, forked, time.monotonic_ns()))
