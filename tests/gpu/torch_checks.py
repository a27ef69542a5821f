#!/usr/bin/env python3
# tests/gpu/torch_checks.py — PyTorch support checked on a real NVIDIA GPU (not part of make test).
"""GPU checks of PyTorch support (2.4-2.11 on an NVIDIA GPU). Not part of `make test` (no GPU there):
run `python3 tests/gpu/torch_checks.py [--build build]` on a GPU machine. Prints SKIP and exits 0
where torch or a GPU is missing. Each check runs a child under LD_PRELOAD=libgpumemtrace.so with
PYTHONPATH=tools/python and inspects the trace:
  growth      planted validation accumulation outside torch.no_grad() (`val_total = val_total +
              model(x).mean()` keeps every iteration's activations alive): gpumem-report flags a
              block-level growth named by that line
  oom         planted OOM: block_oom event whose stack names the allocating line, with device free bytes
  expandable  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: map events, reserved agreement
  async       backend:cudaMallocAsync: one warning, driver-level events only, program unchanged
  agreement   reserved peak from events == torch.cuda.max_memory_reserved(); allocated peak vs
              max_memory_allocated() (printed; equal where rounding is reproducible)
  snapshot    the first torch.cuda.memory._snapshot() of a process recording with context="all",
              stacks="python", called plainly and through the hook's history.take_snapshot: the hook's
              must not import torch._inductor (docs/pytorch.md, "The cost of a drain"); both times
              are printed for information
What tracing costs is measured by benchmarks, not checked here: make bench-torch-step (ms per step)
and make bench-process (whole-process time), docs/performance.md.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import tracefile  # noqa: E402
from benchlib import traced_env  # noqa: E402

CHILD = r'''
import os, sys, time, torch
mode = sys.argv[1]
dev = "cuda"
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
def step():
    x = torch.randn(256, 1024, device=dev)
    loss = model(x).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    return loss
if mode == "growth":
    for i in range(10):
        step()
    val_total = 0
    for i in range(40):
        x = torch.randn(512, 1024, device=dev)
        val_total = val_total + model(x).mean()  # PLANTED_GROWTH
    torch.cuda.synchronize()
    print("%.3f" % val_total.item())
elif mode in ("expandable", "async", "agreement"):
    epoch_loss = 0
    for i in range(50):
        loss = step()
        epoch_loss += loss  # PLANTED_GROWTH
    torch.cuda.synchronize()
    print(json.dumps({"reserved": torch.cuda.max_memory_reserved(),
                      "allocated": torch.cuda.max_memory_allocated()}) if False else
          "%d %d" % (torch.cuda.max_memory_reserved(), torch.cuda.max_memory_allocated()))
elif mode == "oom":
    free, total = torch.cuda.mem_get_info()
    try:
        big = torch.empty(int(total * 2), dtype=torch.uint8, device=dev)  # PLANTED_OOM
    except torch.cuda.OutOfMemoryError:
        print("caught")
'''


# The `snapshot` check's child: argv[1] "plain" or "hook" (history.take_snapshot, tools/python on
# sys.path; no preload needed). Prints the first and second snapshot's seconds and whether
# torch._inductor got imported.
SNAPSHOT_CHILD = r'''
import sys, time, torch
sys.path.insert(0, sys.argv[2])
from gpumemtrace_torch.history import take_snapshot
torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python", max_entries=65536)
xs = [torch.ones(1 << 10, device="cuda") for _ in range(100)]
snap = (lambda: torch.cuda.memory._snapshot()) if sys.argv[1] == "plain" else (lambda: take_snapshot(torch))
before = "torch._inductor" in sys.modules
t = time.perf_counter(); s1 = snap(); first = time.perf_counter() - t
t = time.perf_counter(); snap(); second = time.perf_counter() - t
print("%.3f %.3f %d %d %d" % (first, second, before, "torch._inductor" in sys.modules, len(s1["device_traces"][0])))
'''


def have_gpu_torch():
    try:
        import torch  # noqa: F401
        return torch.cuda.is_available()
    except Exception:
        return False


def line_of(frame):
    try:
        return open(frame["file"]).read().splitlines()[frame["line"] - 1]
    except (OSError, KeyError, IndexError):
        return ""


def run(build, mode, env_extra=None, traced=True, with_report=False):
    d = tempfile.mkdtemp()
    out = os.path.join(d, "trace.jsonl")
    env = traced_env(build, out) if traced else dict(os.environ)
    env.update(env_extra or {})
    # The child runs from a file, so that its Python frames name a line gpumem-report can show.
    script = os.path.join(d, "child.py")
    with open(script, "w") as f:
        f.write("import json\n" + CHILD)
    p = subprocess.run([sys.executable, script, mode], capture_output=True, text=True, env=env,
                       timeout=600)
    events, frames, stacks = [], {}, {}
    if traced and os.path.exists(out):
        for r in tracefile.read_records(out)[0]:
            if r["type"] == "event":
                events.append(r)
            elif r["type"] == "frame":
                frames[r["id"]] = r
            elif r["type"] == "stack":
                stacks[r["id"]] = r["frames"]
    stack_of = lambda e: [frames[i] for i in stacks.get(e.get("stack", 0), [])]
    if not with_report:
        return p, events, stack_of
    rep = subprocess.run([os.path.join(build, "gpumem-report"), "--format", "json", out], capture_output=True, text=True)
    return p, events, stack_of, (json.loads(rep.stdout) if rep.returncode in (0, 1) and rep.stdout else None)


def reserved_peak(events):
    cur = peak = 0
    for e in sorted(events, key=lambda e: (e["t"], e["seq"])):
        if e.get("api") == "torch.segment_alloc" or e.get("api") == "torch.segment_map":
            cur += e["size"]
        elif e.get("api") in ("torch.segment_free", "torch.segment_unmap"):
            cur -= e["size"]
        peak = max(peak, cur)
    return peak


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = ap.parse_args()
    if not have_gpu_torch():
        print("SKIP: needs PyTorch with a CUDA GPU")
        return 0
    failures = 0

    def check(name, ok, detail):
        nonlocal failures
        failures += 0 if ok else 1
        print("%s %s: %s" % ("PASS" if ok else "FAIL", name, detail), flush=True)

    p, ev, stack_of, report = run(args.build, "growth", with_report=True)
    planted = [g for g in (report or {}).get("growth", [])
               if g["level"] == "block"
               and any(f.get("lang") == "python" and "PLANTED_GROWTH" in line_of(f) for f in g["stack"])]
    check("growth", p.returncode == 0 and len(planted) >= 1,
          "%d growth entries, %d at the planted line" % (len((report or {}).get("growth", [])), len(planted)))

    p, ev, stack_of = run(args.build, "oom")
    ooms = [e for e in ev if e["op"] == "block_oom"]
    check("oom", p.stdout.strip() == "caught" and ooms and "free" in ooms[0]
          and any(f.get("lang") == "python" for f in stack_of(ooms[0])),
          "%d block_oom events; stdout %r" % (len(ooms), p.stdout.strip()))

    for name, conf in (("agreement", None), ("expandable", "expandable_segments:True")):
        p, ev, _ = run(args.build, name, {"PYTORCH_CUDA_ALLOC_CONF": conf} if conf else None)
        try:
            reserved, allocated = map(int, p.stdout.split())
        except ValueError:
            check(name, False, p.stderr[-500:])
            continue
        got = reserved_peak(ev)
        check(name, got == reserved, "reserved peak from events %d vs max_memory_reserved %d "
              "(max_memory_allocated %d)" % (got, reserved, allocated))

    p, ev, _ = run(args.build, "async", {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"})
    check("async", p.returncode == 0 and p.stderr.count("gpumemtrace:") == 1
          and not [e for e in ev if e["op"].startswith("block_")],
          "driver-level events %d, stderr %r" % (len(ev), p.stderr.strip()[-200:]))

    figures = {}
    for how in ("plain", "hook"):
        d = tempfile.mkdtemp()
        script = os.path.join(d, "snapshot_child.py")
        with open(script, "w") as f:
            f.write(SNAPSHOT_CHILD)
        p = subprocess.run([sys.executable, script, how, os.path.join(ROOT, "tools", "python")],
                           capture_output=True, text=True, timeout=600)
        try:
            first, second, before, after, entries = p.stdout.split()
            figures[how] = (float(first), float(second), before == "1", after == "1", int(entries))
        except ValueError:
            figures[how] = None
            print("snapshot child (%s) failed: %s" % (how, p.stderr[-500:]))
    plain, hook = figures["plain"], figures["hook"]
    check("snapshot", hook is not None and not hook[2] and not hook[3],
          "first/second _snapshot() of %s entries: plain %s; through take_snapshot %s"
          % (plain[4] if plain else "?",
             "%.3f s / %.3f s, imported torch._inductor: %s" % (plain[0], plain[1], plain[3]) if plain else "failed",
             "%.3f s / %.3f s, imported torch._inductor: %s" % (hook[0], hook[1], hook[3]) if hook else "failed"))

    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
