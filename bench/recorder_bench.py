#!/usr/bin/env python3
# bench/recorder_bench.py — recorder benchmarks: per-event cost and ring throughput, beside heaptrack.
"""Recorder benchmarks (make bench-recorder): per-event cost, ring throughput, and the side-by-side
with heaptrack run in the same invocation. Prints a Markdown table for docs/performance.md.

Side-by-side: the same loop of allocate/free pairs issued 20 frames deep (bench/alloc_loop.cpp, built
with frame pointers); heaptrack traces malloc/free, gpumemtrace traces cudaMalloc/cudaFree of the
simulated runtime. Each tool's per-event overhead = (traced loop time - untraced loop time of the same
API) / events. REPS rounds, each running every configuration once (interleaved, so that all see the
same machine conditions); the table gives the median and the min-max of each. The load average is
printed before and after: on a loaded machine the wall times mean little.

Besides wall time, alloc_loop reports its thread's CPU time: what the traced thread itself spent,
without the time it waited for a core (nor the time gpumemtrace's writer thread or heaptrack's
interpreter process spent elsewhere). It is steadier on a loaded machine, but it is not what the
program feels: the ratio quoted is the wall-time one.

--variant NAME=VAR=VALUE[,VAR=VALUE...] adds gpumemtrace runs with those settings (e.g.
dwarf=GPUMEMTRACE_UNWIND=dwarf,GPUMEMTRACE_INTERN_STACKS=0); --library NAME=PATH adds runs of another
build of libgpumemtrace.so (e.g. the main branch's, for a before/after on the same machine).
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import tracefile  # noqa: E402
from benchlib import load_average  # noqa: E402


def run(cmd, env=None):
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    if env:
        e.update(env)
    p = subprocess.run(cmd, env=e, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stdout}\n{p.stderr}")
    return p


def loop_times(output):
    """(wall ns, thread CPU ns) of the loop, as alloc_loop prints them."""
    m = re.search(r"loop_ns=(\d+) loop_cpu_ns=(\d+)", output)
    return int(m.group(1)), int(m.group(2))


def parse_named(values, what):
    out = []
    for v in values:
        name, sep, rest = v.partition("=")
        if not sep or not name or not rest:
            sys.exit(f"--{what} expects NAME=..., got {v!r}")
        out.append((name, rest))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--pairs", type=int, default=1_000_000)
    ap.add_argument("--depth", type=int, default=20)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--variant", action="append", default=[], help="NAME=VAR=VALUE[,VAR=VALUE...]")
    ap.add_argument("--library", action="append", default=[], help="NAME=PATH of another libgpumemtrace.so")
    ap.add_argument("--skip-micro", action="store_true", help="only the side-by-side")
    args = ap.parse_args()
    if args.reps < 5:
        sys.exit("--reps must be at least 5 (a median and a spread)")
    b = args.build
    lib = os.path.join(b, "libgpumemtrace.so")
    sim = os.path.join(b, "sim")
    loop = os.path.join(b, "bench", "alloc_loop")
    events = 2 * args.pairs
    tmp = tempfile.mkdtemp(prefix="gpumemtrace-bench-")
    simenv = {"LD_LIBRARY_PATH": sim}
    load_start = load_average()

    if not args.skip_micro:
        print(f"## Recorder micro-benchmarks (Google Benchmark), load average {load_start}\n")
        micro = run([os.path.join(b, "bench", "recorder_microbench"), "--benchmark_format=json",
                     "--benchmark_min_time=0.3"]).stdout
        for bm in json.loads(micro)["benchmarks"]:
            rate = bm.get("items_per_second")
            extra = f", {rate / 1e6:.2f} M events/s" if rate else ""
            print(f"- `{bm['name']}`: {bm['real_time']:.1f} {bm['time_unit']} per event "
                  f"(CPU {bm['cpu_time']:.1f}){extra}")

    # gpumemtrace configurations: (name, library, extra environment).
    tracers = [("gpumemtrace", lib, {})]
    for name, settings in parse_named(args.variant, "variant"):
        env = dict(kv.split("=", 1) for kv in settings.split(","))
        tracers.append((f"gpumemtrace {name}", lib, env))
    for name, path in parse_named(args.library, "library"):
        tracers.append((f"gpumemtrace {name}", os.path.abspath(path), {}))
    have_heaptrack = shutil.which("heaptrack") is not None

    print(f"\n## Side by side with heaptrack: {args.pairs:,} allocate/free pairs, {args.depth} frames deep, "
          f"{args.reps} interleaved rounds\n")
    print(f"Load average (1, 5, 15 min) at the start: {load_start}")
    samples = {}  # name -> list of (wall ns, cpu ns)
    walls = {}    # name -> whole-command wall seconds
    trace_bytes = 0
    loop_args = [str(args.pairs), str(args.depth)]
    for rep in range(args.reps):
        samples.setdefault("malloc", []).append(loop_times(run([loop, "malloc"] + loop_args).stdout))
        samples.setdefault("cuda", []).append(loop_times(run([loop, "cuda"] + loop_args, simenv).stdout))
        for i, (name, path, env) in enumerate(tracers):
            out = os.path.join(tmp, f"g{rep}-{i}/")
            os.makedirs(out)
            t0 = time.time()
            p = run([loop, "cuda"] + loop_args,
                    dict(simenv, LD_PRELOAD=path, GPUMEMTRACE_OUTPUT=out, GPUMEMTRACE_QUIET="1", **env))
            walls.setdefault(name, []).append(time.time() - t0)
            samples.setdefault(name, []).append(loop_times(p.stdout))
            trace = os.path.join(out, os.listdir(out)[0])
            footer = tracefile.read_records(trace)[0][-1]
            assert footer["type"] == "footer", footer
            assert footer["dropped_total"] == 0, footer
            # With the flight recorder (GPUMEMTRACE_KEEP) the trace is the run's last window only.
            assert footer["events"] >= events or "GPUMEMTRACE_KEEP" in env, footer
            if i == 0:
                trace_bytes = os.path.getsize(trace)
            shutil.rmtree(out)
        if have_heaptrack:
            t0 = time.time()
            p = run(["heaptrack", "-o", os.path.join(tmp, f"h{rep}"), loop, "malloc"] + loop_args)
            walls.setdefault("heaptrack", []).append(time.time() - t0)
            samples.setdefault("heaptrack", []).append(loop_times(p.stdout))
    load_end = load_average()

    def med(name, k):
        return statistics.median(s[k] for s in samples[name])

    def spread(name, k, base=None):
        """min-max of the per-event figure (overhead when `base` is given), ns."""
        values = [(s[k] - (med(base, k) if base else 0)) / events for s in samples[name]]
        return f"{min(values):.1f}-{max(values):.1f}"

    def overhead(name, base, k):
        return (med(name, k) - med(base, k)) / events

    print(f"Load average at the end: {load_end}\n")
    print("| run | loop time, median | per event, median (min-max) | overhead per event, median (min-max) "
          "| thread CPU overhead per event, median (min-max) |")
    print("|---|---|---|---|---|")
    rows = [("malloc/free, untraced", "malloc", None), ("cudaMalloc/cudaFree (simulated), untraced", "cuda", None)]
    rows += [(f"{name} on cudaMalloc/cudaFree", name, "cuda") for name, _, _ in tracers]
    if have_heaptrack:
        rows.append(("heaptrack on malloc/free", "heaptrack", "malloc"))
    for label, name, base in rows:
        cells = [f"{med(name, 0) / 1e6:.1f} ms", f"{med(name, 0) / events:.1f} ns ({spread(name, 0)})"]
        if base:
            cells += [f"**{overhead(name, base, 0):.1f} ns** ({spread(name, 0, base)})",
                      f"{overhead(name, base, 1):.1f} ns ({spread(name, 1, base)})"]
        else:
            cells += ["", ""]
        print(f"| {label} | " + " | ".join(cells) + " |")
    if have_heaptrack:
        h_over = overhead("heaptrack", "malloc", 0)
        print()
        for name, _, _ in tracers:
            g_over = overhead(name, "cuda", 0)
            cpu = overhead(name, "cuda", 1) / overhead("heaptrack", "malloc", 1)
            print(f"- **Per-event overhead ratio {name} / heaptrack: {g_over / h_over:.2f}** (wall-time medians; "
                  f"target < 0.8); thread CPU ratio {cpu:.2f}. Whole-command wall time: "
                  f"{statistics.median(walls[name]):.2f} s vs heaptrack {statistics.median(walls['heaptrack']):.2f} s.")
    else:
        print("\nheaptrack is not installed: no comparison.")
    rate = events / (med("gpumemtrace", 0) / 1e9)
    print(f"\nSustained recording rate: **{rate / 1e6:.2f} M events/s** with 0 dropped events "
          f"(default wait mode, every event in the trace: {trace_bytes / events:.1f} bytes/event on disk, "
          f"{os.path.basename(trace)}).")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
