#!/usr/bin/env python3
# tests/gpu/torch_history_checks.py — the PyTorch hook's history handling checked on a real GPU (issue 17; tests/gpu/run.sh).
"""What the stand-in torch cannot prove, checked against the real PyTorch on a GPU (run by
tests/gpu/run.sh; SKIP without PyTorch and a GPU). Traces and logs under OUT/history/<check>.
  reconvert     the same entries' time_us in two _snapshot() calls: recorded (min, max, mean shift),
                PASS when every shift is within the 10 ms slack the hook allows (anchor.TIME_SLACK_US)
  long          a long run with a small ring (GPUMEMTRACE_TORCH_ENTRIES=4096, POLL_MS=10): no
                "wrapped" mark, block_alloc / block_free events == PyTorch's allocation counters
  own_*         the program's own _record_memory_history (before CUDA init, later with another
                max_entries, enabled=None, the legacy form) and _dump_snapshot(): every block once,
                the program's dump holds free_completed
  reset         reset_accumulated_memory_stats() mid-run: every block once
  record_stream a block used on a second stream: every block once
  expandable    expandable segments: torch.segment_map / segment_unmap cover exactly the bytes of the
                driver-level cuMemMap / cuMemUnmap events (PyTorch maps page by page)
  oom_backward  an OOM inside backward(): one block_oom inside the backward() scope, drained before
                OutOfMemoryError
  compile       torch.compile'd function: runs unchanged, its blocks in the trace
  dataloader    a fork DataLoader with 2 workers: the run ends, the main trace has its blocks
  no_inductor   the exit drain of a traced 2-line script does not import torch._inductor
                (python -X importtime)
  gc_cycle      a tensor in a reference cycle left by a scope (api pytest) and freed by a later
                collection (gpumemtrace.gc_callback(), as the pytest plugin registers it): the scope
                holds it until garbage collection, not as a leak; the figure is how far PyTorch's
                time of the free lies from the collection's window (held_until_gc.h allows 100 us)
The programs of own_*, long, reset, record_stream, expandable are tests/python/progs/torch_sharing_prog.py,
the same the stand-in runs in make test.
"""
import json
import os
import subprocess
import sys

import gpuenv
from gpuenv import ROOT, have_gpu_torch, read_trace

PROG = os.path.join(ROOT, "tests", "python", "progs", "torch_sharing_prog.py")
R = gpuenv.Results("history")

RECONVERT = r'''
import json, time, torch
torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python", max_entries=100000)
xs = []
for i in range(2000):
    xs.append(torch.empty(1024 + (i % 7) * 512, device="cuda"))
    if i % 3 == 0:
        xs.pop(0)
a = torch.cuda.memory._snapshot()["device_traces"][0]
time.sleep(1.0)
b = torch.cuda.memory._snapshot()["device_traces"][0]
shifts = [y["time_us"] - x["time_us"] for x, y in zip(a, b[:len(a)])
          if (x["action"], x.get("addr"), x["size"]) == (y["action"], y.get("addr"), y["size"])]
print(json.dumps({"entries": len(a), "matched": len(shifts), "min": min(shifts), "max": max(shifts),
                  "mean": sum(shifts) / len(shifts), "moved": sum(1 for s in shifts if s)}))
'''

OOM_BACKWARD = r'''
import json, torch
free, total = torch.cuda.mem_get_info()
torch.cuda.set_per_process_memory_fraction(0.02)
w = torch.randn(4096, 4096, device="cuda", requires_grad=True)
out = {"caught": False}
try:
    y = (w @ w).relu()
    big = y.unsqueeze(0).expand(64, -1, -1) * 2.0     # the backward of this needs 64 x 64 MiB
    big.sum().backward()
except torch.cuda.OutOfMemoryError:
    out["caught"] = True
print(json.dumps(out))
'''

COMPILE = r'''
import json, torch
@torch.compile
def f(x):
    return (x.sin() + x.cos()).relu() * 2
x = torch.randn(1 << 20, device="cuda")
a = f(x); b = f(x)
torch.cuda.synchronize()
print(json.dumps({"ok": bool(torch.allclose(a, (x.sin() + x.cos()).relu() * 2))}))
'''

DATALOADER = r'''
import json, torch
from torch.utils.data import DataLoader, TensorDataset
data = TensorDataset(torch.randn(512, 64))
n = 0
for (batch,) in DataLoader(data, batch_size=32, num_workers=2, multiprocessing_context="fork"):
    n += int(batch.to("cuda").sum().abs() >= 0)
print(json.dumps({"batches": n}))
'''

TWO_LINES = 'import torch\nx = torch.ones(1, device="cuda")\n'

GC_CYCLE = r'''
import gc, json, torch, gpumemtrace, gpumemtrace_torch
gc.disable(); gc.collect()
gc.callbacks.append(gpumemtrace.gc_callback())
torch.empty(1, device="cuda")
class Holder:
    def __init__(self):
        self.tensor = torch.empty(1 << 20, device="cuda")
        self.me = self                       # only the collector frees it
gpumemtrace.scope_begin("test_gc_cycle", "pytest")
Holder()
gpumemtrace_torch.drain_now()
gpumemtrace.scope_end("test_gc_cycle", "pytest")
print(json.dumps({"collected": gc.collect()}))
gpumemtrace_torch.drain_now()
'''


def child(name, code=None, argv=(), env_extra=None, timeout=300, python_flags=()):
    """Runs a child (`code`, or torch_sharing_prog.py with argv) traced into OUT/history/<name>."""
    d = gpuenv.out_dir("history", name)
    trace = os.path.join(d, "trace.jsonl")
    if code is not None:
        script = os.path.join(d, "child.py")
        with open(script, "w") as f:
            f.write(code)
        cmd = [sys.executable, *python_flags, script, *argv]
    else:
        cmd = [sys.executable, *python_flags, PROG, *argv]
    p = subprocess.run(cmd, capture_output=True, text=True, env=gpuenv.traced_env(trace, env_extra),
                       timeout=max(30, min(timeout, gpuenv.time_left())), cwd=d)
    with open(os.path.join(d, "run.log"), "w") as f:
        f.write("%s\nexit %d\n--- stdout\n%s\n--- stderr\n%s\n" % (cmd, p.returncode, p.stdout, p.stderr))
    try:
        result = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        result = None
    events, stack_of = read_trace(trace)
    return p, result, events, d


def torch_blocks(events, op):
    return [e for e in events if e["op"] == op and e["api"].startswith("torch.")]


def lost_marks(events):
    return [e for e in events if e["op"] == "mark" and "history" in e.get("label", "")]


def every_block_once(name, p, result, events, extra=""):
    if p.returncode != 0 or result is None:
        R.say(name, False, "exit %d: %s" % (p.returncode, p.stderr.strip()[-300:]))
        return False
    allocs, frees = len(torch_blocks(events, "block_alloc")), len(torch_blocks(events, "block_free"))
    ok = allocs == result["allocs"] and frees == result["frees"] and not lost_marks(events)
    R.say(name, ok, "block_alloc %d / PyTorch %d, block_free %d / %d, %d lost marks%s"
          % (allocs, result["allocs"], frees, result["frees"], len(lost_marks(events)), extra))
    return ok


def main():
    if not have_gpu_torch():
        R.say("history checks", None, "needs PyTorch with a CUDA GPU")
        return 0
    import torch
    print("PyTorch %s, CUDA %s" % (torch.__version__, torch.version.cuda), flush=True)

    if R.budget("reconvert", 30):
        p, r, _, _ = child("reconvert", RECONVERT, env_extra={"GPUMEMTRACE_TORCH": "0"})
        R.say("reconvert", r is not None and r["matched"] > 0 and max(abs(r["min"]), abs(r["max"])) <= 10000,
              json.dumps(r) if r else p.stderr.strip()[-300:])

    small = {"GPUMEMTRACE_TORCH_ENTRIES": "4096", "GPUMEMTRACE_TORCH_POLL_MS": "10"}
    for name, argv, env in (("long", ["long"], small), ("reset", ["reset"], small),
                            ("record_stream", ["record_stream"], None)):
        if R.budget(name, 40):
            p, r, ev, _ = child(name, argv=argv, env_extra=env)
            every_block_once(name, p, r, ev, ", %d syncs" % len([e for e in ev if e["op"] == "sync"]))

    for mode in ("own_before_init", "own_after", "own_off", "own_legacy"):
        if R.budget(mode, 40):
            d = gpuenv.out_dir("history", mode)
            p, r, ev, _ = child(mode, argv=[mode, os.path.join(d, "dump.pickle")])
            dump = (r or {}).get("dump", {})
            every_block_once(mode + "/trace", p, r, ev)
            R.say(mode + "/dump", bool(dump.get("alloc")) and bool(dump.get("free_completed")),
                  "program's dump: %s; stderr: %s" % (dump, p.stderr.strip()[-300:]))

    if R.budget("expandable", 40):
        p, r, ev, _ = child("expandable", argv=["expandable"],
                            env_extra={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
        every_block_once("expandable/blocks", p, r, ev)
        covered = {api: sum(e["size"] for e in ev if e["api"] == api)
                   for api in ("torch.segment_map", "cuMemMap", "torch.segment_unmap", "cuMemUnmap")}
        torch_maps = [(int(t["addr"], 16), t["size"]) for t in ev if t["api"] == "torch.segment_map"]
        inside = all(any(a <= int(m["addr"], 16) < a + n for a, n in torch_maps)
                     for m in ev if m["api"] == "cuMemMap")
        R.say("expandable/maps", covered["torch.segment_map"] == covered["cuMemMap"] > 0
              and covered["torch.segment_unmap"] == covered["cuMemUnmap"] and inside,
              "bytes mapped: torch %d / cuMemMap %d; unmapped: torch %d / cuMemUnmap %d; every cuMemMap inside "
              "a segment_map: %s" % (covered["torch.segment_map"], covered["cuMemMap"],
                                     covered["torch.segment_unmap"], covered["cuMemUnmap"], inside))

    if R.budget("oom_backward", 40):
        p, r, ev, _ = child("oom_backward", OOM_BACKWARD)
        ooms = torch_blocks(ev, "block_oom")
        scopes = [e for e in ev if e["op"] in ("scope_begin", "scope_end") and e.get("label") == "backward"]
        inside = len(scopes) >= 2 and len(ooms) == 1 and scopes[0]["t"] <= ooms[0]["t"] <= scopes[-1]["t"]
        R.say("oom_backward", bool(r and r["caught"]) and inside,
              "caught %s, %d block_oom, %d backward scope events, inside: %s"
              % ((r or {}).get("caught"), len(ooms), len(scopes), inside))

    if R.budget("compile", 120):
        p, r, ev, _ = child("compile", COMPILE, timeout=300)
        R.say("compile", bool(r and r["ok"]) and len(torch_blocks(ev, "block_alloc")) > 0,
              "exit %d, result %s, %d block_alloc" % (p.returncode, r, len(torch_blocks(ev, "block_alloc"))))

    if R.budget("dataloader", 60):
        p, r, ev, d = child("dataloader", DATALOADER, timeout=120)
        R.say("dataloader", p.returncode == 0 and bool(r) and r["batches"] == 16 and len(torch_blocks(ev, "block_alloc")) > 0,
              "exit %d, %s, %d block_alloc in the main trace" % (p.returncode, r, len(torch_blocks(ev, "block_alloc"))))

    if R.budget("no_inductor", 60):
        p, r, ev, _ = child("no_inductor", TWO_LINES, python_flags=("-X", "importtime"))
        imported = [l for l in p.stderr.splitlines() if l.rstrip().endswith("torch._inductor")]
        R.say("no_inductor", p.returncode == 0 and not imported and len(torch_blocks(ev, "block_alloc")) >= 1,
              "exit %d, torch._inductor imported: %s, block_alloc %d"
              % (p.returncode, bool(imported), len(torch_blocks(ev, "block_alloc"))))
    if R.budget("gc_cycle", 40):
        check_gc_cycle()
    return R.exit_code()


def check_gc_cycle():
    import tracefile
    p, r, ev, d = child("gc_cycle", GC_CYCLE)
    records = tracefile.read_records(os.path.join(d, "trace.jsonl"))[0] if p.returncode == 0 else []
    windows = [x for x in records if x["type"] == "gc"]
    rep = subprocess.run([gpuenv.REPORT, "--format", "json", "--no-progress", os.path.join(d, "trace.jsonl")],
                         capture_output=True, text=True)
    scope = next((s for s in json.loads(rep.stdout or "{}").get("scopes", []) if s["name"] == "test_gc_cycle"), {})
    begin = next((e for e in ev if e["op"] == "scope_begin" and e.get("label") == "test_gc_cycle"), None)
    end = next((e for e in ev if e["op"] == "scope_end" and e.get("label") == "test_gc_cycle"), None)
    inside = [e for e in torch_blocks(ev, "block_alloc") if begin and end and begin["t"] < e["t"] < end["t"]]
    frees = [e for e in torch_blocks(ev, "block_free") if any(e["addr"] == a["addr"] for a in inside)]
    # How far each free's (PyTorch) time lies outside the nearest window: 0 inside it.
    outside = [min(max(w["t"] - f["t"], f["t"] - w["end_time"], 0) for w in windows) for f in frees] if windows else []
    held = sum(a["size"] for a in inside)
    R.say("gc_cycle", bool(r and r["collected"]) and held > 0 and scope.get("held_until_gc_bytes") == held
          and scope.get("leaked_bytes") == 0,
          "held until gc %s of %d B allocated in the scope, leaked %s; %d gc records; PyTorch's free %s ns "
          "outside the window" % (scope.get("held_until_gc_bytes"), held, scope.get("leaked_bytes"), len(windows),
                                  outside))


if __name__ == "__main__":
    sys.exit(main())
