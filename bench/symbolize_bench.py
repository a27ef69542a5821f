#!/usr/bin/env python3
# bench/symbolize_bench.py — what GPUMEMTRACE_SYMBOLIZE=0 saves the program and costs gpumem-report.
"""What GPUMEMTRACE_SYMBOLIZE=0 saves the traced program, and what gpumem-report's offline pass costs
(make bench-symbolize). Prints a Markdown table for docs/performance.md.

The traced program: each workload runs under the recorder with SYMBOLIZE=1 and =0, interleaved, REPS
times; the medians of its wall time and of its CPU time (user + system, all threads: the writer's
symbolization is the only work that differs) are compared.
  - start-up: bench/alloc_loop with 1 allocate/free pair 20 frames deep (start, one stack, exit);
  - loop: the same with PAIRS pairs (400,000 events by default);
  - demo: examples/train_loop, the demo's training loop.
The analyzer: gpumem-report --format json on each workload's trace recorded with and without
symbols (the difference is the offline pass), and on a synthetic trace of FRAMES frames, one at
each exported function of libc and libstdc++, with and without names (the cost per frame).
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(cmd, env=None):
    """(wall seconds, CPU seconds of the child, stdout); exits on failure."""
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    e.update(env or {})
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=e, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stdout}\n{p.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, p.stdout


def ms(seconds):
    return f"{seconds * 1e3:.1f} ms"


def build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "Build ID:" in line:
            return line.split("Build ID:")[1].strip()
    return ""


def exported_functions(path, limit):
    """Offsets of up to `limit` exported functions of a shared library (nm -D)."""
    out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True).stdout
    offsets = sorted({int(f[0], 16) for f in (line.split() for line in out.splitlines())
                      if len(f) == 3 and f[1] in "Tt" and int(f[0], 16) > 0})
    return offsets[:limit]


def frames_trace(path, modules, named):
    """A version 1 trace of one frame and one leak per offset of each (module path, offsets) in
    `modules`; symbol-less unless `named` (then each frame says "function", and the analyzer looks
    nothing up). Returns the number of frames."""
    lines = [{"type": "header", "format": "gpumemtrace", "version": 1, "pid": 1}]
    fid = 0
    for mid, (lib, offsets) in enumerate(modules, 1):
        lines.append({"type": "module", "id": mid, "path": lib, "base": "0x0", "size": 0, "build_id": build_id(lib)})
        for offset in offsets:
            fid += 1
            frame = {"type": "frame", "id": fid, "ip": hex(offset), "module": mid, "offset": hex(offset)}
            lines.append(dict(frame, function=f"f{fid}") if named else frame)
            lines.append({"type": "stack", "id": fid, "frames": [fid]})
            lines.append({"type": "event", "seq": fid, "t": fid, "tid": 1, "api": "cudaMalloc", "op": "alloc",
                          "kind": "device", "addr": hex(fid << 20), "size": 4096, "device": 0, "stack": fid})
    with open(path, "w") as f:
        f.writelines(json.dumps(line) + "\n" for line in lines)
    return fid


def synthetic_trace(path, frames, named):
    """A trace of `frames` frames spread over libc and libstdc++ (a few bytes into each exported
    function), one leak per frame; see frames_trace."""
    libs = [p for p in ("/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libstdc++.so.6")
            if os.path.exists(p)]
    return frames_trace(path, [(lib, [o + 4 for o in exported_functions(lib, frames // len(libs))]) for lib in libs],
                        named)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--pairs", type=int, default=200_000)
    ap.add_argument("--frames", type=int, default=4000)
    args = ap.parse_args()
    b = args.build
    lib = os.path.join(b, "libgpumemtrace.so")
    report = os.path.join(b, "gpumem-report")
    loop = os.path.join(b, "bench", "alloc_loop")
    workloads = {
        "start-up (1 pair, 20 deep)": [loop, "cuda", "1", "20"],
        f"loop ({args.pairs:,} pairs, 20 deep)": [loop, "cuda", str(args.pairs), "20"],
        "demo (examples/train_loop)": [os.path.join(b, "examples", "train_loop")],
    }
    tmp = tempfile.mkdtemp(prefix="gpumemtrace-symbolize-bench-")
    load_before = os.getloadavg()[0]
    program = {}  # (workload, symbolize) -> [(wall, cpu)]
    analyzer = {}
    traces = {}
    for rep in range(args.reps):
        for name, cmd in workloads.items():
            for symbolize in ("1", "0"):
                out = os.path.join(tmp, f"{len(traces)}/")
                os.makedirs(out)
                env = {"LD_LIBRARY_PATH": os.path.join(b, "sim"), "LD_PRELOAD": lib, "GPUMEMTRACE_OUTPUT": out,
                       "GPUMEMTRACE_QUIET": "1", "GPUMEMTRACE_SYMBOLIZE": symbolize}
                wall, cpu, _ = timed(cmd, env)
                program.setdefault((name, symbolize), []).append((wall, cpu))
                trace = os.path.join(out, os.listdir(out)[0])
                traces[(name, symbolize, rep)] = trace
                wall, cpu, _ = timed([report, "--format", "json", trace])
                analyzer.setdefault((name, symbolize), []).append((wall, cpu))
    synthetic = {named: os.path.join(tmp, f"synthetic{int(named)}.jsonl") for named in (True, False)}
    frames = [synthetic_trace(path, args.frames, named) for named, path in synthetic.items()][0]
    synthetic_runs = {named: [] for named in synthetic}
    for _ in range(args.reps):
        for named, path in synthetic.items():
            synthetic_runs[named].append(timed([report, "--format", "json", path])[:2])
    load_after = os.getloadavg()[0]

    def median(samples, i):
        return statistics.median(s[i] for s in samples)

    def spread(samples, i):
        values = [s[i] for s in samples]
        return f"{ms(min(values))}-{ms(max(values))}"

    print(f"## GPUMEMTRACE_SYMBOLIZE=1 vs 0: medians of {args.reps} interleaved runs "
          f"(load average {load_before:.2f} before, {load_after:.2f} after)\n")
    print("| workload | program wall, symbols / none | program CPU, symbols / none | CPU spread (min-max), "
          "symbols / none | CPU saved | gpumem-report wall, trace with symbols / without |")
    print("|---|---|---|---|---|---|")
    for name in workloads:
        on, off = program[(name, "1")], program[(name, "0")]
        ron, roff = analyzer[(name, "1")], analyzer[(name, "0")]
        saved = median(on, 1) - median(off, 1)
        print(f"| {name} | {ms(median(on, 0))} / {ms(median(off, 0))} | {ms(median(on, 1))} / {ms(median(off, 1))} "
              f"| {spread(on, 1)} / {spread(off, 1)} | {ms(saved)} | {ms(median(ron, 0))} / {ms(median(roff, 0))} |")
    named, unnamed = synthetic_runs[True], synthetic_runs[False]
    extra = median(unnamed, 1) - median(named, 1)
    print(f"\ngpumem-report on {frames} frames in libc and libstdc++, one leak each (synthetic): "
          f"{ms(median(unnamed, 1))} CPU symbol-less ({spread(unnamed, 1)}), {ms(median(named, 1))} CPU with "
          f"names in the trace ({spread(named, 1)}); "
          f"the offline pass: {ms(extra)}, {extra / max(frames, 1) * 1e6:.0f} us per frame "
          f"including opening the two modules")
    subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
