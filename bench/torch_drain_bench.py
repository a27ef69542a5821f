#!/usr/bin/env python3
# bench/torch_drain_bench.py — our side of a PyTorch history drain (new entries found, packed, handed to
# the library), per entry, beside pickling the same snapshot as torch.cuda.memory._dump_snapshot does
# (make bench-torch-drain). Runs on the CPU: the snapshots are synthetic, shaped like PyTorch's.
"""The hook's cost per forwarded PyTorch history entry, beside PyTorch's own way out (pickle).

Usage: bench/torch_drain_bench.py [--build build] [--runs 5] [--ring 65536] [--drains 6] [--depth 24]
                                  [--tools NAME=DIR ...]
--tools compares hook versions (a tools/python folder each, e.g. of an older checkout: `git worktree
add /tmp/old <rev>`, then --tools old=/tmp/old/tools/python --tools new=tools/python), run
interleaved against the same library; the default is this checkout's tools/python.

A drain has two halves: PyTorch's `_snapshot()` copies and symbolizes the whole ring (its cost, about
7 us per entry on an H100 by our notes, needs a GPU and is in `make bench-torch-step`), then the hook
finds the entries new since the last drain, packs them and hands them to libgpumemtrace.so, which
records them (gpumemtrace_torch/history.py, bridge.py). This measures the second half on the CPU, in
a child under LD_PRELOAD=libgpumemtrace.so, with snapshots shaped like PyTorch's: a ring of RING
entries (alloc, free_requested, free_completed per block; Python frames DEPTH deep, one of 64 call
sites, frame dicts shared between entries as PyTorch's symbolizer shares them; a free entry holds its
allocation's frames, as with context="alloc"). Each drain sees the ring moved on by half (the hook
drains when half a ring is new), as the hook's poller would, DRAINS times after a first one.

The peer, timed on the same snapshots in the same process: `pickle.dumps(snapshot)`, what
torch.cuda.memory._dump_snapshot() does with the snapshot it takes (PyTorch's own route for getting the
history out), per entry of the ring it pickles. Both are the calling thread's time, which a Python
program's other threads wait out (the GIL). The trace must hold every forwarded event (its footer's
count, nothing dropped) or the bench fails. Each figure: median and min-max over RUNS processes, with
the load average.
"""
import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
import benchlib  # noqa: E402
import tracefile  # noqa: E402

CHILD = r'''
import json, pickle, sys, time
ring, drains, depth, tools = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
sys.path.insert(0, tools)
from gpumemtrace_torch import bridge as bridge_module
from gpumemtrace_torch.history import HistoryDrain

SITES = 64
# One dict per (file, line), shared by every stack that passes there, as PyTorch's py_symbolize builds them.
frame = {}
def f(file, name, line):
    return frame.setdefault((file, line), {"filename": file, "name": name, "line": line})
stacks = [[f("/train/model.py", "layer_%d" % s, 100 + s)] +
          [f("/train/lib_%d.py" % k, "call_%d" % k, 10 + k) for k in range(depth - 2)] +
          [f("/train/train.py", "main", 7)] for s in range(SITES)]

def block_frames(block):
    """An allocation's frames: a list of its own (PyTorch symbolizes each captured traceback into its own
    list) of the shared frame dicts of its call site."""
    return list(stacks[block % SITES])

SEG, SEG_SIZE = 0x7f0000000000, 1 << 30
def entry(i):
    """The i-th entry of the history: block i // 3 allocated, then freed (requested, completed)."""
    block, kind = divmod(i, 3)
    frames = block_frames(block) if kind == 0 else timeline[i - kind]["frames"]
    return {"action": ("alloc", "free_requested", "free_completed")[kind],
            "addr": SEG + (block % 4096) * 4096, "size": 4096, "stream": 0,
            "time_us": 1_700_000_000_000_000 + i, "frames": frames}
timeline = []
for i in range(ring + drains * (ring // 2)):
    timeline.append(entry(i))
def snapshot(end):
    return {"segments": [{"device": 0, "address": SEG, "total_size": SEG_SIZE, "stream": 0,
                          "segment_type": "large", "allocated_size": 0, "active_size": 0, "blocks": []}],
            "device_traces": [timeline[max(0, end - ring):end]]}

bridge = bridge_module.load()
if bridge is None:
    sys.exit("libgpumemtrace.so is not preloaded")
drain = HistoryDrain(bridge)  # a hook older than free_stacks forwards the frames of free entries too
first = snapshot(ring)
drain.seed_segments(first)
drain.drain(first)
ours, peer = [], []
for k in range(1, drains + 1):
    snap = snapshot(ring + k * (ring // 2))
    t = time.perf_counter(); drain.drain(snap); ours.append((time.perf_counter() - t) / (ring // 2) * 1e6)
    t = time.perf_counter(); pickle.dumps(snap); peer.append((time.perf_counter() - t) / ring * 1e6)
forwarded = sum(1 for e in timeline if e["action"] != "free_completed")
print(json.dumps({"ours_us": ours, "peer_us": peer, "forwarded": forwarded}))
'''


def trace_counts(trace):
    """(block events, footer's dropped_total or None when there is no footer)."""
    blocks, dropped = 0, None
    for r in tracefile.iter_records(trace):
        if r.get("type") == "event" and r.get("op") in ("block_alloc", "block_free"):
            blocks += 1
        elif r.get("type") == "footer":
            dropped = r.get("dropped_total", 0)
    return blocks, dropped


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(benchlib.ROOT, "build"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--ring", type=int, default=65536)
    ap.add_argument("--drains", type=int, default=6)
    ap.add_argument("--depth", type=int, default=24)
    ap.add_argument("--tools", action="append", default=[], metavar="NAME=DIR",
                    help="a hook version to time (repeatable); default: this checkout's tools/python")
    args = ap.parse_args()
    tools = dict(t.split("=", 1) for t in args.tools if "=" in t) or \
        {"this checkout": os.path.join(benchlib.ROOT, "tools", "python")}
    if len(tools) != len(args.tools or [1]) or not all(os.path.isdir(d) for d in tools.values()):
        ap.error("--tools takes NAME=DIR, DIR a tools/python folder, each NAME once")
    if min(args.runs, args.drains) < 1 or args.ring < 1024 or args.depth < 2:
        ap.error("--runs and --drains at least 1, --ring at least 1024, --depth at least 2")
    work = tempfile.mkdtemp(prefix="torch_drain_bench.")
    script = os.path.join(work, "drain_child.py")
    with open(script, "w") as f:
        f.write(CHILD)

    def measure(variant, rnd):
        trace = os.path.join(work, "trace-%d-%d.jsonl.zst" % (list(tools).index(variant), rnd))
        # GPUMEMTRACE_ON_FULL=wait: a full ring makes the drain wait, as it would in a real run with that
        # setting, rather than dropping events and looking cheaper.
        env = benchlib.traced_env(args.build, trace, {"GPUMEMTRACE_ON_FULL": "wait"})
        # Not tools/python's sitecustomize: it would import this checkout's hook before the child puts
        # the version under test first on sys.path.
        env["PYTHONPATH"] = ""
        p = benchlib.run_child([sys.executable, script, str(args.ring), str(args.drains), str(args.depth),
                                os.path.abspath(tools[variant])], env)
        if p.returncode != 0:
            print("FAIL: %s run %d exited %d: %s" % (variant, rnd, p.returncode, p.stderr[-600:]))
            return None
        out = json.loads(p.stdout.strip().splitlines()[-1])
        blocks, dropped = trace_counts(trace)
        if dropped is None or dropped or blocks != out["forwarded"]:
            print("FAIL: %s run %d: the trace holds %d block events of %d forwarded (dropped: %s)"
                  % (variant, rnd, blocks, out["forwarded"], dropped))
            return None
        return out

    load_start = benchlib.load_average()
    runs = benchlib.interleaved_rounds(tuple(tools), args.runs, measure)
    load_end = benchlib.load_average()
    if runs is None:
        return 1
    print("Ring %d entries, %d drains of %d new entries each per process, frames %d deep, %d processes each. "
          "Load average %s at start, %s at the end.\n" % (args.ring, args.drains, args.ring // 2, args.depth,
                                                          args.runs, load_start, load_end))
    print("| hook | us per new entry: the hook's drain, median (min-max) | us per ring entry: pickle.dumps "
          "of the same snapshots, as _dump_snapshot | ratio hook / pickle |")
    print("|---|---|---|---|")
    for name, samples in runs.items():
        # One sample per process: its median drain.
        ours = benchlib.Spread([benchlib.Spread(r["ours_us"]).median for r in samples])
        peer = benchlib.Spread([benchlib.Spread(r["peer_us"]).median for r in samples])
        print("| %s | %s | %s | %.2f |" % (name, ours.text(), peer.text(), ours.ratio_to(peer)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
