#!/usr/bin/env python3
# bench/torch_step_bench.py — ms per training step on a GPU: plain, PyTorch's own allocation history,
# gpumemtrace at driver level and at full level, side by side (make bench-torch-step).
"""Training-step time under the recorder, beside PyTorch's own allocation history (needs a CUDA GPU).

Usage: bench/torch_step_bench.py [--build build] [--rounds 3] [--models alloc,mlp,gpt2]
                                 [--window-steps N] [--json FILE]

Three models, each timed in four variants, one child process per (variant, round), the variants
interleaved within each round:
  alloc 20 tensors of 4 KiB allocated and dropped per step, nothing computed: the worst case, where
        the step is nothing but allocator events (tens of microseconds per step);
  mlp   a 3-layer MLP (1024-4096-1024, batch 256, SGD): about 1 ms per step, where any per-event cost
        shows;
  gpt2  GPT-2 small (transformers' GPT2LMHeadModel from its default config, 124M parameters, AdamW,
        batch 4 x 512 tokens): tens of ms per step, a real training step.
Variants:
  plain   no preload;
  torch   no preload; torch.cuda.memory._record_memory_history(enabled="all", context="all",
          stacks="python", max_entries=GPUMEMTRACE_TORCH_ENTRIES or 65536) before the model is built:
          the peer, PyTorch's own recorder as a user turns it on (context="all", its default; the hook
          asks for context="alloc" unless GPUMEMTRACE_FREE_STACKS=1, docs/pytorch.md);
  driver  LD_PRELOAD=libgpumemtrace.so with GPUMEMTRACE_TORCH=0 GPUMEMTRACE_PYTHON=0 (CUDA calls only);
  full    LD_PRELOAD=libgpumemtrace.so, the defaults: CUDA calls with native and Python stacks, and the
          PyTorch hook (the history above, drained into the trace by its poller thread).
A child warms up, then times WINDOWS windows of steps (synchronised at both ends) and reports its
mean ms per step over all of them (not a median window: the hook's drains come every second or so, and
a median would leave the windows that hold one out); the table gives the median and min-max of that
over the rounds, and each variant's ratio to plain. The full variant's trace must hold tensor-level
events (block_alloc), or the bench fails: a hook that silently did not start would make the figure a
lie.
Targets (docs/performance.md): full at most the torch variant's cost, and at most +2% on gpt2.
Without PyTorch and a CUDA GPU it prints SKIP and exits 0. Exit 1 if a child failed.
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

VARIANTS = ("plain", "torch", "driver", "full")
# The peer records into a ring of the size the hook uses (GPUMEMTRACE_TORCH_ENTRIES, default 65536).
HISTORY_ENTRIES = int(os.environ.get("GPUMEMTRACE_TORCH_ENTRIES", "65536"))
WINDOWS = 5
# model: (warm-up steps, steps per window). About a second per window, so that the timed steps span
# several of the hook's drains (one per GPUMEMTRACE_TORCH_ENTRIES/2 allocator events: every thousand
# or so MLP steps, every few dozen GPT-2 steps): a window too short to hold one would leave out the
# drains' cost, which is most of what the full level adds.
STEPS = {"alloc": (100, 10000), "mlp": (50, 1000), "gpt2": (5, 20)}

CHILD = r'''
import json, sys, time
import torch
model_name, variant, warmup, per_window, windows, entries = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
dev = "cuda"
if variant == "torch":
    torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python",
                                             max_entries=entries)
if model_name == "alloc":
    desc = "allocate and drop 20 tensors"
    def step():
        held = [torch.empty(1024, device=dev) for _ in range(20)]
        del held
elif model_name == "mlp":
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 1024)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    desc = "3-layer MLP, batch 256"
    def step():
        x = torch.randn(256, 1024, device=dev)
        loss = model(x).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
else:
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).to(dev).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, 50257, (4, 512), device=dev)
    desc = "GPT-2 small (%dM parameters), batch 4 x 512" % (sum(p.numel() for p in model.parameters()) // 10**6)
    def step():
        loss = model(ids, labels=ids).loss
        opt.zero_grad(); loss.backward(); opt.step()
for _ in range(warmup):
    step()
torch.cuda.synchronize()
ms = []
for _ in range(windows):
    t = time.perf_counter()
    for _ in range(per_window):
        step()
    torch.cuda.synchronize()
    ms.append((time.perf_counter() - t) / per_window * 1000)
print(json.dumps({"model": desc, "ms": ms, "mean_ms": sum(ms) / len(ms)}))
'''


def drains_and_block_events(trace):
    """(drains, block_alloc events) of a full-level trace: the hook writes one sync event when the
    history starts and one after every drain (docs/pytorch.md)."""
    syncs = blocks = 0
    for r in tracefile.iter_records(trace):  # millions of events for the alloc loop: never all at once
        if r.get("type") == "event":
            syncs += r.get("op") == "sync"
            blocks += r.get("op") == "block_alloc"
    return max(0, syncs - 1), blocks


def variant_env(build, variant, trace):
    if variant in ("plain", "torch"):
        return dict(os.environ)
    return benchlib.traced_env(build, trace, benchlib.DRIVER_LEVEL if variant == "driver" else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(benchlib.ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--models", default="alloc,mlp,gpt2", help="comma-separated: alloc, mlp, gpt2")
    ap.add_argument("--window-steps", type=int, help="steps per timed window (default: about a second's)")
    ap.add_argument("--python", default=sys.executable, help="the interpreter with PyTorch")
    ap.add_argument("--json", help="also write every sample here")
    args = ap.parse_args()
    models = [m for m in args.models.split(",") if m]
    unknown = [m for m in models if m not in STEPS]
    if unknown:
        ap.error("unknown model %s (known: %s)" % (unknown, ", ".join(STEPS)))
    if args.rounds < 1 or (args.window_steps is not None and args.window_steps < 1):
        ap.error("--rounds and --window-steps must be at least 1")
    if not benchlib.have_gpu_torch(args.python):
        print("SKIP: needs PyTorch with a CUDA GPU (%s)" % args.python)
        return 0

    work = tempfile.mkdtemp(prefix="torch_step_bench.")
    script = os.path.join(work, "step_child.py")
    with open(script, "w") as f:
        f.write(CHILD)
    print("load average at start: %s" % benchlib.load_average(), flush=True)
    results, described, drains = {}, {}, {}
    for model in models:
        warmup, per_window = STEPS[model]
        per_window = args.window_steps or per_window

        def measure(variant, rnd):
            trace = os.path.join(work, "%s-%s-%d.jsonl.zst" % (model, variant, rnd))
            p = benchlib.run_child([args.python, script, model, variant, str(warmup), str(per_window),
                                    str(WINDOWS), str(HISTORY_ENTRIES)], variant_env(args.build, variant, trace))
            if p.returncode != 0:
                print("FAIL: %s %s round %d exited %d: %s" % (model, variant, rnd, p.returncode, p.stderr[-600:]))
                return None
            out = json.loads(p.stdout.strip().splitlines()[-1])
            described[model] = out["model"]
            if variant == "full":
                drains[model], blocks = drains_and_block_events(trace)
                if blocks == 0:
                    print("FAIL: %s full round %d: the trace has no block_alloc event (the PyTorch hook did "
                          "not record)" % (model, rnd))
                    return None
            return out["mean_ms"]

        samples = benchlib.interleaved_rounds(VARIANTS, args.rounds, measure)
        if samples is None:
            return 1
        results[model] = {v: benchlib.Spread(s) for v, s in samples.items()}
    load_end = benchlib.load_average()

    print("\n| model | variant | ms per step, median (min-max) of %d runs | vs plain |" % args.rounds)
    print("|---|---|---|---|")
    for model, by_variant in results.items():
        for v in VARIANTS:
            print("| %s | %s | %s | %.3f |" % (described.get(model, model), v, by_variant[v].text(),
                                                by_variant[v].ratio_to(by_variant["plain"])))
    print()
    for model, r in results.items():
        print("%s: full / PyTorch's own history %.3f (target <= 1); full adds %+.1f%% to plain, "
              "driver level %+.1f%%; %d drains in the last full run (exit drain included)"
              % (model, r["full"].ratio_to(r["torch"]), (r["full"].ratio_to(r["plain"]) - 1) * 100,
                 (r["driver"].ratio_to(r["plain"]) - 1) * 100, drains.get(model, 0)))
    print("load average at the end: %s" % load_end)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"models": described, "load_end": load_end, "drains_last_full_run": drains,
                       "samples": {m: {v: s.samples for v, s in r.items()} for m, r in results.items()}}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
