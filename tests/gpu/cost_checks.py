#!/usr/bin/env python3
# tests/gpu/cost_checks.py — the cost targets of the PyTorch hook checked on a GPU with the benchmarks, side by side in one call (tests/gpu/run.sh).
"""The cost targets (docs/performance.md), measured by the benchmarks on the GPU machine, each
variant side by side in the same call, with the recorder where tests/gpu/gpuenv.py says:
  step/<model>     bench/torch_step_bench.py (mlp, and gpt2 when transformers is installed; 2 rounds):
                   the full recorder's ms per step at most PyTorch's own history's (median), and for
                   gpt2 at most +2% over plain
  process          bench/process_bench.py (5 runs each): a 2-line torch script's whole process under
                   the full recorder within 0.5 s of plain (median)
The benchmarks' tables and samples go to OUT/cost. SKIP without PyTorch and a GPU, or when the time
left (GPU_CHECKS_DEADLINE) is too short.
"""
import json
import os
import subprocess
import sys

import gpuenv
from gpuenv import ROOT, have_gpu_torch

R = gpuenv.Results("cost")


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else float("nan")


def bench(name, argv, seconds):
    d = gpuenv.out_dir("cost")
    out_json = os.path.join(d, name + ".json")
    cmd = [sys.executable, os.path.join(ROOT, "bench", argv[0]), "--build", gpuenv.LIB_DIR, "--json", out_json,
           *argv[1:]]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=max(60, min(seconds, gpuenv.time_left())))
    with open(os.path.join(d, name + ".txt"), "w") as f:
        f.write("%s\nexit %d\n%s\n--- stderr\n%s\n" % (cmd, p.returncode, p.stdout, p.stderr))
    if p.returncode != 0 or not os.path.exists(out_json):
        return None, p
    with open(out_json) as f:
        return json.load(f), p


def main():
    if not have_gpu_torch():
        R.say("cost checks", None, "needs PyTorch with a CUDA GPU")
        return 0
    try:
        import transformers  # noqa: F401
        models = "mlp,gpt2"
    except ImportError:
        models = "mlp"
        R.say("step/gpt2", None, "transformers is not installed")
    if R.budget("step", 200):
        data, p = bench("step", ["torch_step_bench.py", "--rounds", "2", "--models", models], 300)
        if data is None:
            R.say("step", False, "bench exited %d: %s" % (p.returncode, p.stdout.strip()[-300:]))
        else:
            for model, by_variant in data["samples"].items():
                plain, torch_, full = (median(by_variant[v]) for v in ("plain", "torch", "full"))
                ok = full <= torch_ and (model != "gpt2" or full <= plain * 1.02)
                R.say("step/" + model, ok, "ms per step: plain %.3f, PyTorch's history %.3f, full %.3f (%+.1f%%); "
                      "load %s" % (plain, torch_, full, (full / plain - 1) * 100, data.get("load_end")))
    if R.budget("process", 120):
        data, p = bench("process", ["process_bench.py", "--runs", "5"], 200)
        if data is None:
            R.say("process", False, "bench exited %d: %s" % (p.returncode, p.stdout.strip()[-300:]))
        else:
            plain, full = median(data["samples"]["plain"]), median(data["samples"]["full"])
            R.say("process", full - plain <= 0.5, "whole process: plain %.3f s, full %.3f s (+%.3f s); load %s"
                  % (plain, full, full - plain, data.get("load")))
    return R.exit_code()


if __name__ == "__main__":
    sys.exit(main())
