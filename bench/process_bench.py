#!/usr/bin/env python3
# bench/process_bench.py — the whole-process wall time of a 2-line torch script: plain, PyTorch's own
# allocation history dumped at exit, gpumemtrace at driver level and at full level (make bench-process).
"""What tracing adds to every Python process that touches the GPU: start-up and exit (needs a CUDA GPU).

Usage: bench/process_bench.py [--build build] [--runs 5] [--json FILE]

The script is two lines, `import torch` and one tensor on the GPU, so a process is almost only start-up
and exit: what a pytest run of many processes, or a launcher with workers, pays each time. Variants,
RUNS processes each, interleaved:
  plain      python3 two_lines.py;
  torch      the peer: PyTorch's own memory history of the same script, as a user gets it without
             gpumemtrace: a wrapper turns on _record_memory_history(enabled="all", context="all",
             stacks="python"), runs the script (runpy) and calls torch.cuda.memory._dump_snapshot() at
             exit;
  driver     LD_PRELOAD=libgpumemtrace.so, GPUMEMTRACE_TORCH=0 GPUMEMTRACE_PYTHON=0;
  full       LD_PRELOAD=libgpumemtrace.so, the defaults (the PyTorch hook, its start and exit drains);
  full-nosym full with GPUMEMTRACE_SYMBOLIZE=0 (symbols left to gpumem-report).
The table gives each variant's median and min-max wall time and what its median adds to plain's.
Target (docs/performance.md): full adds less than 0.5 s. Every traced run's trace must end with its
footer (the exit path completed) and the full runs must hold a tensor-level event, or the bench fails.
Without PyTorch and a CUDA GPU it prints SKIP and exits 0. Exit 1 if a run failed.
"""
import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
import benchlib  # noqa: E402
import tracefile  # noqa: E402

VARIANTS = ("plain", "torch", "driver", "full", "full-nosym")
TWO_LINES = 'import torch\nx = torch.ones(1, device="cuda")\n'
PEER = r'''
import atexit, runpy, sys, torch
torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python")
atexit.register(torch.cuda.memory._dump_snapshot, sys.argv[2])
runpy.run_path(sys.argv[1], run_name="__main__")
'''
TRACED = {"driver": benchlib.DRIVER_LEVEL, "full": {},
          "full-nosym": {"GPUMEMTRACE_SYMBOLIZE": "0"}}


def check_trace(variant, trace):
    """None if the run's trace is whole (and, at full level, holds tensor-level events), else why not."""
    if not os.path.exists(trace):
        return "no trace was written"
    records, truncated = tracefile.read_records(trace)
    if truncated or not any(r.get("type") == "footer" for r in records):
        return "the trace has no footer (the exit path did not complete)"
    if variant != "driver" and not any(r.get("type") == "event" and r.get("op") == "block_alloc"
                                       for r in records):
        return "the trace has no block_alloc event (the PyTorch hook did not record)"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(benchlib.ROOT, "build"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--python", default=sys.executable, help="the interpreter with PyTorch")
    ap.add_argument("--json", help="also write every sample here")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs < 1")
    if not benchlib.have_gpu_torch(args.python):
        print("SKIP: needs PyTorch with a CUDA GPU (%s)" % args.python)
        return 0

    work = tempfile.mkdtemp(prefix="process_bench.")
    script, peer = os.path.join(work, "two_lines.py"), os.path.join(work, "peer.py")
    with open(script, "w") as f:
        f.write(TWO_LINES)
    with open(peer, "w") as f:
        f.write(PEER)

    def measure(variant, rnd):
        out = os.path.join(work, "%s-%d" % (variant, rnd))
        cmd, env = [args.python, script], dict(os.environ)
        if variant == "torch":
            cmd = [args.python, peer, script, out + ".pickle"]
        elif variant in TRACED:
            out += ".jsonl.zst"
            env = benchlib.traced_env(args.build, out, TRACED[variant])
        start = time.perf_counter()
        p = benchlib.run_child(cmd, env)
        seconds = time.perf_counter() - start
        if p.returncode != 0:
            why = "exited %d: %s" % (p.returncode, p.stderr[-600:])
        elif variant in TRACED:
            why = check_trace(variant, out)
        elif variant == "torch" and not os.path.exists(out + ".pickle"):
            why = "no snapshot was dumped"
        else:
            why = None
        if why:
            print("FAIL: %s run %d: %s" % (variant, rnd, why))
            return None
        return seconds

    load_start = benchlib.load_average()
    samples = benchlib.interleaved_rounds(VARIANTS, args.runs, measure)
    load_end = benchlib.load_average()
    if samples is None:
        return 1
    spreads = {v: benchlib.Spread(s) for v, s in samples.items()}
    plain = spreads["plain"]
    print("2-line torch script (import torch; one tensor on the GPU), whole process, %d runs each, "
          "interleaved. Load average %s at start, %s at the end.\n" % (args.runs, load_start, load_end))
    print("| variant | wall s, median (min-max) | adds to plain (medians) |")
    print("|---|---|---|")
    for v in VARIANTS:
        print("| %s | %s | %+.2f s |" % (v, spreads[v].text("%.2f"), spreads[v].median - plain.median))
    print("\nfull adds %+.2f s per process (target < 0.5 s); PyTorch's own history with a dump at exit "
          "adds %+.2f s" % (spreads["full"].median - plain.median, spreads["torch"].median - plain.median))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load": [load_start, load_end], "samples": samples}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
