#!/usr/bin/env python3
# tests/gpu/torch_checks.py — PyTorch support checked on a real NVIDIA GPU (not part of make test).
"""GPU checks of PyTorch support on an NVIDIA GPU. Not part of `make test` (no GPU there): run by
tests/gpu/run.sh, with the recorder where tests/gpu/gpuenv.py says; traces kept under OUT/torch.
Prints SKIP and exits 0 where torch or a GPU is missing. Each check runs a child under
LD_PRELOAD=libgpumemtrace.so with the hook on PYTHONPATH and inspects the trace:
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
The history checks of issue 17 (exact drains, the program's own history calls, ...) are in
torch_history_checks.py; what tracing costs, in cost_checks.py (the benchmarks, side by side).
"""
import json
import os
import subprocess
import sys

import gpuenv
from gpuenv import ROOT, have_gpu_torch, read_trace

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


def line_of(frame):
    try:
        return open(frame["file"]).read().splitlines()[frame["line"] - 1]
    except (OSError, KeyError, IndexError):
        return ""


def run(mode, env_extra=None, traced=True, with_report=False):
    d = gpuenv.out_dir("torch", mode)
    out = os.path.join(d, "trace.jsonl")
    env = gpuenv.traced_env(out) if traced else dict(os.environ)
    env.update(env_extra or {})
    # The child runs from a file, so that its Python frames name a line gpumem-report can show.
    script = os.path.join(d, "child.py")
    with open(script, "w") as f:
        f.write("import json\n" + CHILD)
    p = subprocess.run([sys.executable, script, mode], capture_output=True, text=True, env=env,
                       timeout=max(30, min(600, gpuenv.time_left())))
    events, stack_of = read_trace(out) if traced else ([], None)
    if not with_report:
        return p, events, stack_of
    rep = subprocess.run([gpuenv.REPORT, "--format", "json", "-o", os.path.join(d, "report.json"), out],
                         capture_output=True, text=True)
    report = None
    if rep.returncode in (0, 1) and os.path.exists(os.path.join(d, "report.json")):
        with open(os.path.join(d, "report.json")) as f:
            report = json.load(f)
    return p, events, stack_of, report


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
    results = gpuenv.Results("torch")
    if not have_gpu_torch():
        results.say("torch checks", None, "needs PyTorch with a CUDA GPU")
        return 0

    def check(name, ok, detail):
        results.say(name, bool(ok), detail)

    p, ev, stack_of, report = run("growth", with_report=True)
    planted = [g for g in (report or {}).get("growth", [])
               if g["level"] == "block"
               and any(f.get("lang") == "python" and "PLANTED_GROWTH" in line_of(f) for f in g["stack"])]
    check("growth", p.returncode == 0 and len(planted) >= 1,
          "%d growth entries, %d at the planted line" % (len((report or {}).get("growth", [])), len(planted)))

    p, ev, stack_of = run("oom")
    ooms = [e for e in ev if e["op"] == "block_oom"]
    check("oom", p.stdout.strip() == "caught" and ooms and "free" in ooms[0]
          and any(f.get("lang") == "python" for f in stack_of(ooms[0])),
          "%d block_oom events; stdout %r" % (len(ooms), p.stdout.strip()))

    for name, conf in (("agreement", None), ("expandable", "expandable_segments:True")):
        p, ev, _ = run(name, {"PYTORCH_CUDA_ALLOC_CONF": conf} if conf else None)
        try:
            reserved, allocated = map(int, p.stdout.split())
        except ValueError:
            check(name, False, p.stderr[-500:])
            continue
        got = reserved_peak(ev)
        check(name, got == reserved, "reserved peak from events %d vs max_memory_reserved %d "
              "(max_memory_allocated %d)" % (got, reserved, allocated))

    p, ev, _ = run("async", {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"})
    check("async", p.returncode == 0 and p.stderr.count("gpumemtrace:") == 1
          and not [e for e in ev if e["op"].startswith("block_")],
          "driver-level events %d, stderr %r" % (len(ev), p.stderr.strip()[-200:]))

    figures = {}
    for how in ("plain", "hook"):
        d = gpuenv.out_dir("torch", "snapshot")
        script = os.path.join(d, "snapshot_child.py")
        with open(script, "w") as f:
            f.write(SNAPSHOT_CHILD)
        p = subprocess.run([sys.executable, script, how, gpuenv.PYTHON_DIR], capture_output=True, text=True,
                           timeout=600)
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
    return results.exit_code()


if __name__ == "__main__":
    sys.exit(main())
