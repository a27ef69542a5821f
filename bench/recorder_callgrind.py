#!/usr/bin/env python3
# bench/recorder_callgrind.py — the recorder's cost per event in instructions (callgrind), piece by piece.
"""Instructions per event on the hook thread, and where they go (docs/performance.md, "Where the hook
thread's instructions and nanoseconds go"). Instruction counts repeat to the instruction from run to
run, on a loaded machine too, where wall times do not: they are for before/after comparisons.

The loop of bench/recorder_bench.py (bench/alloc_loop.cpp: PAIRS cudaMalloc/cudaFree pairs of the
simulated runtime, DEPTH frames deep) runs under callgrind, collecting only inside run_pairs() on the
thread that runs it (--toggle-collect): once untraced, once under each library. Per event = (traced -
untraced) / events. The ring holds every event (GPUMEMTRACE_RING_EVENTS), so that the hook thread
never waits for the writer, which under valgrind runs only when the hook thread yields.

    python3 bench/recorder_callgrind.py --build build [--library NAME=PATH ...] [--writer]

--library adds another build of libgpumemtrace.so (before/after in one invocation). The pieces are the
inclusive counts of the first library's functions; the clock is not among them: under valgrind
clock_gettime is a system call, not the vDSO's code, so its instructions say nothing (BM_Clock of
bench/recorder_microbench.cpp gives its nanoseconds). --writer also gives the writer thread's
instructions per event: its whole-run count at PAIRS and at 2 x PAIRS (--separate-threads), the
difference over the events added, which leaves out its one-time costs (the first symbolization).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

from recorder_bench import ROOT, parse_named  # bench/, this script's folder, is on sys.path

# (label, callgrind function-name pattern, what the count is divided by: "alloc", "event", "hook")
PIECES = [
    ("native stack walk (frame pointers checked against DWARF)", r"gpumemtrace::capture_native_stack\(", "alloc"),
    ("stack id: compare with the thread's last stack", r"gpumemtrace::StackTable::holds\(", "alloc"),
    ("Python frame reader (no Python in the loop)", r"gpumemtrace::python::capture_python_stack\(", "alloc"),
    ("slot filled in place (fill_record)", r"fill_record\(", "event"),
    ("device query (cudaGetDevice of the simulated runtime)", r"runtime_current_device\(", "event"),
    ("re-entry guard (HookScope, both ends)", r"gpumemtrace::HookScope::~?HookScope\(", "hook"),
    ("the active check (ensure_active)", r"gpumemtrace::ensure_active\(", "hook"),
    ("record_call, all of it", r"gpumemtrace::record_call\(", "event"),
]


def callgrind(cmd, env, out, extra):
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    e.update(env)
    p = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *extra, *cmd],
                       env=e, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stdout}\n{p.stderr}")


def totals(path):
    with open(path) as f:
        return int(re.search(r"^totals: (\d+)", f.read(), re.M).group(1))


def call_costs(path):
    """{callee: instructions} summed over every call of it: the call arcs of callgrind_annotate's
    annotated sources (`N => FILE:FUNCTION (Mx)`). Its list of functions would do, but it splits a
    function into one entry per file its code was inlined from."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", path],
                         capture_output=True, text=True, check=True).stdout
    costs = {}
    for line in out.split("\n"):
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+=> (.*) \([\d,]+x\)$", line)
        if m:
            costs[m.group(2)] = costs.get(m.group(2), 0) + int(m.group(1).replace(",", ""))
    return costs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--pairs", type=int, default=100_000)
    ap.add_argument("--depth", type=int, default=20)
    ap.add_argument("--library", action="append", default=[], help="NAME=PATH of another libgpumemtrace.so")
    ap.add_argument("--writer", action="store_true", help="also the writer thread's instructions per event")
    args = ap.parse_args()
    if not shutil.which("valgrind"):
        sys.exit("needs valgrind (callgrind)")
    b = args.build
    loop = os.path.abspath(os.path.join(b, "bench", "alloc_loop"))
    libs = [("this build", os.path.abspath(os.path.join(b, "libgpumemtrace.so")))]
    libs += [(name, os.path.abspath(path)) for name, path in parse_named(args.library, "library")]
    events = 2 * args.pairs
    tmp = tempfile.mkdtemp(prefix="gpumemtrace-callgrind-")
    base_env = {"LD_LIBRARY_PATH": os.path.join(b, "sim"), "GPUMEMTRACE_QUIET": "1",
                "GPUMEMTRACE_RING_EVENTS": "4194304"}
    loop_only = ["--collect-atstart=no", "--toggle-collect=run_pairs*"]

    def run_loop(name, lib, pairs, extra):
        out = os.path.join(tmp, f"{name.replace(' ', '_')}-{pairs}.out")
        env = dict(base_env)
        if lib:
            trace_dir = os.path.join(tmp, f"trace-{len(os.listdir(tmp))}") + "/"
            os.makedirs(trace_dir)
            env.update(LD_PRELOAD=lib, GPUMEMTRACE_OUTPUT=trace_dir)
        callgrind([loop, "cuda", str(pairs), str(args.depth)], env, out, extra)
        return out

    untraced = totals(run_loop("untraced", None, args.pairs, loop_only))
    print(f"alloc_loop cuda {args.pairs} {args.depth} under callgrind, instructions inside run_pairs() "
          f"on its thread; untraced: {untraced / events:.1f} per event (the simulated runtime's own)\n")
    print("| library | instructions per event over the untraced loop |")
    print("|---|---|")
    first = None
    for name, lib in libs:
        out = run_loop(name, lib, args.pairs, loop_only)
        first = first or out
        print(f"| {name} | {(totals(out) - untraced) / events:.1f} |")

    costs = call_costs(first)
    per = {"alloc": args.pairs, "event": events, "hook": events}
    unit = {"alloc": "per allocation", "event": "per event", "hook": "per hook call"}
    print(f"\nPieces of {libs[0][0]} (inclusive; an allocation has a stack, a free none):\n")
    print("| piece | instructions |")
    print("|---|---|")
    for label, pattern, by in PIECES:
        # A cold clone runs inside its function's calls, whose costs hold it already.
        total = sum(c for fn, c in costs.items() if re.search(pattern, fn) and "[clone .cold]" not in fn)
        print(f"| {label} | {total / per[by]:.1f} {unit[by]} |")
    in_record_call = sum(c for fn, c in costs.items() if re.search(PIECES[-1][1], fn))
    print(f"| the hook around record_call (HookScope, the facts built in place, the real function) | "
          f"{(totals(first) - untraced - in_record_call) / events:.1f} per event |")

    if args.writer:
        counts = []
        for pairs in (args.pairs, 2 * args.pairs):
            out = run_loop(f"writer-{libs[0][0]}", libs[0][1], pairs, ["--separate-threads=yes"])
            # Thread 1 runs the program, thread 2 is the recorder's writer (its first thread).
            counts.append(totals(out + "-02"))
        print(f"\nWriter thread: {(counts[1] - counts[0]) / events:.1f} instructions per event "
              f"(whole runs of {args.pairs} and {2 * args.pairs} pairs, the difference over the events added)")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
