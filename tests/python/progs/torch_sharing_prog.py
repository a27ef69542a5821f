# tests/python/progs/torch_sharing_prog.py — child of test_python_torch_sharing.py: programs that use PyTorch's history themselves, or stress the drains.
"""Run with PYTHONPATH=tools/python:fake_torch under LD_PRELOAD=libgpumemtrace.so. argv[1] names the
program, argv[2] (when it takes one) a file for its own _dump_snapshot(). Each prints one JSON line
with what PyTorch's own counters say (allocations and frees seen by the caching allocator) and what
its own dumps held, then exits 0."""
import json
import os
import pickle
import sys
import time

import torch

mode = sys.argv[1]
out = {}


def counted():
    s = torch.cuda.memory_stats()
    return s.get("allocation.all.allocated", 0), s.get("allocation.all.freed", 0)


def step(i, keep):
    x = torch.empty(4096 + 512 * (i % 3), device="cuda")
    y = torch.empty(1 << 16, device="cuda")
    keep.append(torch.empty(512, device="cuda")) if i % 50 == 0 else None
    del x, y


def loop(n, sleep_every=2):
    keep = []
    for i in range(n):
        step(i, keep)
        if i % sleep_every == 0:
            time.sleep(0.001)  # the poller (10 ms) drains well before a small ring wraps
    return keep


def dumped(path):
    with open(path, "rb") as f:
        snap = pickle.load(f)
    actions = [e["action"] for e in snap["device_traces"][0]]
    return {a: actions.count(a) for a in set(actions)}


if mode == "long":
    # Many drains of a small ring (GPUMEMTRACE_TORCH_ENTRIES=1024, _POLL_MS=10) with time_us
    # re-converted at every copy: every allocation once, no loss.
    keep = loop(3000)
    out["allocs"], out["frees"] = counted()

elif mode == "reset":
    # reset_accumulated_memory_stats() half-way: PyTorch's counters start again from 0; the poller
    # keeps draining. The totals are summed by the program across the reset.
    keep = loop(1500)
    a1, f1 = counted()
    torch.cuda.reset_accumulated_memory_stats()
    keep += loop(1500)
    a2, f2 = counted()
    out["allocs"], out["frees"] = a1 + a2, f1 + f2

elif mode in ("own_before_init", "own_after", "own_off", "own_legacy"):
    dump = sys.argv[2]
    keep = []
    if mode == "own_before_init":
        # Before any CUDA use: PyTorch initialises CUDA in C++ only for it; the hook starts later.
        torch.cuda.memory._record_memory_history(max_entries=100000, context="all", stacks="python")
        keep += loop(200)
    elif mode == "own_after":
        keep += loop(200)
        torch.cuda.memory._record_memory_history(max_entries=5000)
        keep += loop(200)
    elif mode == "own_off":
        torch.cuda.memory._record_memory_history(max_entries=5000, context=None)
        keep += loop(200)
    else:
        keep += loop(100)
        torch.cuda.memory._record_memory_history(True, trace_alloc_max_entries=5000,
                                                 trace_alloc_record_context=True)
        keep += loop(200)
    torch.cuda.memory._dump_snapshot(dump)
    out["dump"] = dumped(dump)
    if mode == "own_off":
        torch.cuda.memory._record_memory_history(enabled=None)
        out["after_off"] = len(torch.cuda.memory._snapshot()["device_traces"][0])
        keep += loop(200)
    out["allocs"], out["frees"] = counted()

elif mode == "bad_args":
    keep = loop(10)
    try:
        torch.cuda.memory._record_memory_history(context="bogus")
        out["raised"] = None
    except RuntimeError as e:
        out["raised"] = str(e)
    keep += loop(10)
    out["allocs"], out["frees"] = counted()

elif mode == "record_stream":
    s = torch.cuda.Stream()
    for i in range(20):
        x = torch.empty(8192, device="cuda")
        x.record_stream(s)   # used on another stream: its free completes later
        del x
        y = torch.empty(1024, device="cuda")
        del y
    out["allocs"], out["frees"] = counted()

elif mode == "expandable":
    # PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: pages mapped and unmapped.
    keep = [torch.empty(3 << 20, device="cuda") for _ in range(3)]
    keep.append(torch.empty(1 << 20, device="cuda"))
    del keep[1:]
    torch.cuda.empty_cache()
    keep.append(torch.empty(5 << 20, device="cuda"))
    out["allocs"], out["frees"] = counted()
    out["reserved"] = torch.cuda.memory_reserved()

elif mode == "oom_backward":
    # An OOM inside backward(): the gradient the stand-in's backward allocates does not fit.
    big = torch.empty(300 << 20, device="cuda")
    try:
        big.backward()
        out["caught"] = False
    except torch.cuda.OutOfMemoryError:
        out["caught"] = True
    out["allocs"], out["frees"] = counted()

print(json.dumps(out))
sys.stdout.flush()
