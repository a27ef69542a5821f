#!/usr/bin/env python3
# bench/trace_size_bench.py — trace size per event and read speed (make bench-trace-size), side by side
# with heaptrack in the same invocation. Prints Markdown for docs/performance.md ("Trace size").
#
# Records the 20-deep allocate/free loop (bench/alloc_loop.cpp) under gpumemtrace (default .jsonl.zst,
# and plain .jsonl) and under heaptrack (malloc/free), the demo workload (examples/train_loop, `make
# demo`) and, for PyTorch-shaped traces, re-writes the real H100 traces of tests/report/real (format
# version 1) as version 2 with tests/tracefile.py, the way the recorder writes them. Bytes per event of
# each form, the zstd levels on the loop's trace, and how fast gpumem-report reads the loop's trace
# (version 2 zst and plain, version 1) next to heaptrack_print reading heaptrack's file.
import argparse
import glob
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


def run(cmd, env=None, **kw):
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    e.update(env or {})
    p = subprocess.run(cmd, env=e, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout}\n{p.stderr}")
    return p


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))


def zstd_size(path, level):
    """Bytes of `path` compressed by the zstd tool at `level` (one frame, no flushes: a little smaller
    than the recorder's stream, which ends a block at every flush)."""
    return len(subprocess.run(["zstd", "-q", "-c", f"-{level}", path], capture_output=True, check=True).stdout)


def events_in(path):
    records, _ = tracefile.read_records(path)
    return sum(r["type"] == "event" for r in records), records


class Recorder:
    def __init__(self, build, work):
        self.build, self.work = build, work
        self.env = {"LD_LIBRARY_PATH": os.path.join(build, "sim"), "LD_PRELOAD": os.path.join(build, "libgpumemtrace.so"),
                    "GPUMEMTRACE_QUIET": "1"}

    def record(self, name, argv, output=None):
        """Runs argv under the recorder into work/name/ (default file name) or work/name/output."""
        out = os.path.join(self.work, name)
        os.makedirs(out)
        run(argv, dict(self.env, GPUMEMTRACE_OUTPUT=os.path.join(out, output) if output else out + "/"))
        (path,) = glob.glob(os.path.join(out, "*"))
        return path


def size_rows(label, events, files):
    """Table rows: (what, bytes, bytes/event) for each (form, path or byte count)."""
    rows = []
    for form, what in files:
        size = what if isinstance(what, int) else os.path.getsize(what)
        rows.append((f"{label}: {form}", size, size / events))
    return rows


def timed(argv, reps):
    times = []
    for _ in range(reps):
        t0 = time.monotonic()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.monotonic() - t0)
    return times


def zstd_levels(path, levels):
    """(level, ratio, compression MB/s) from the zstd tool's benchmark mode on `path`."""
    out = []
    for level in levels:
        p = subprocess.run(["zstd", f"-b{level}", "-i2", path], capture_output=True, text=True)
        text = (p.stdout + p.stderr).replace("\r", "\n")
        m = re.findall(r"(\d+) ->\s+(\d+) \(x?([\d.]+)\),\s+([\d.]+) MB/s", text)
        if m:
            src, dst, _, speed = m[-1]
            out.append((level, int(src), int(dst), float(speed)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--pairs", type=int, default=200_000, help="allocate/free pairs of the loop (events = 2x)")
    ap.add_argument("--depth", type=int, default=20)
    ap.add_argument("--reps", type=int, default=5, help="runs of each reader, interleaved")
    args = ap.parse_args()
    b = args.build
    loop = os.path.join(b, "bench", "alloc_loop")
    work = tempfile.mkdtemp(prefix="gpumemtrace-size-")
    rec = Recorder(b, work)
    print(f"load average at start: {load_average()}\n")

    # The loop: v2 as the recorder writes it (default name: zstd level 1; a .jsonl name: plain).
    loop_argv = [loop, "cuda", str(args.pairs), str(args.depth)]
    v2_zst = rec.record("loop", loop_argv)
    v2_plain = rec.record("loop_plain", loop_argv, "trace.jsonl")
    events, records = events_in(v2_zst)
    v1_plain = os.path.join(work, "loop.v1.jsonl")
    write_lines(v1_plain, tracefile.encode(records, version=1))
    rows = size_rows(f"alloc loop ({events:,} events)", events,
                     [("gpumemtrace v2, .jsonl.zst (default)", v2_zst), ("gpumemtrace v2, .jsonl", v2_plain),
                      ("gpumemtrace v1, .jsonl (the same events as version 1)", v1_plain),
                      ("gpumemtrace v1, zstd -1", zstd_size(v1_plain, 1))])

    heaptrack_file, h_events = None, 0
    if shutil.which("heaptrack"):
        hdir = os.path.join(work, "heaptrack")
        os.makedirs(hdir)
        run(["heaptrack", "-o", os.path.join(hdir, "h"), loop, "malloc", str(args.pairs), str(args.depth)])
        (heaptrack_file,) = glob.glob(os.path.join(hdir, "h.*"))
        text = tracefile.read_bytes(heaptrack_file) if heaptrack_file.endswith(".zst") else None
        h_events = sum(1 for line in text.split(b"\n") if line[:2] in (b"+ ", b"- ")) if text else 2 * args.pairs
        rows += size_rows(f"heaptrack, same loop on malloc/free ({h_events:,} events)", h_events,
                          [(f"its file ({os.path.basename(heaptrack_file)})", heaptrack_file)] +
                          ([("its file decompressed", len(text))] if text else []))

    demo = os.path.join(b, "examples", "train_loop")
    if os.path.exists(demo):
        d_zst = rec.record("demo", [demo, "50"])
        d_plain = rec.record("demo_plain", [demo, "50"], "trace.jsonl")
        d_events, d_records = events_in(d_zst)
        d_v1 = os.path.join(work, "demo.v1.jsonl")
        write_lines(d_v1, tracefile.encode(d_records, version=1))
        rows += size_rows(f"demo, examples/train_loop 50 ({d_events:,} events)", d_events,
                          [("v2 .jsonl.zst (default)", d_zst), ("v2 .jsonl", d_plain), ("v1 .jsonl", d_v1)])

    # PyTorch-shaped: the real H100 traces (v1), re-written as v2; zstd -1 of each text.
    real = sorted(glob.glob(os.path.join(ROOT, "tests", "report", "real", "*.jsonl.zst")))
    totals = {"events": 0, "v1": 0, "v1_zst": 0, "v2": 0, "v2_zst": 0}
    for path in real:
        r_events, r_records = events_in(path)
        name = os.path.basename(path).split(".")[0]
        v1 = os.path.join(work, name + ".v1.jsonl")
        v2 = os.path.join(work, name + ".v2.jsonl")
        write_lines(v1, tracefile.encode(r_records, version=1))
        write_lines(v2, tracefile.encode(r_records, version=2))
        sizes = {"events": r_events, "v1": os.path.getsize(v1), "v1_zst": zstd_size(v1, 1),
                 "v2": os.path.getsize(v2), "v2_zst": zstd_size(v2, 1)}
        for k in totals:
            totals[k] += sizes[k]
        if name == "roles":  # the largest training run: shown on its own, and its event lines alone
            event_lines = os.path.join(work, name + ".v2-events.jsonl")
            write_lines(event_lines, [line for line in tracefile.encode(r_records, version=2) if line.startswith('{"e":')])
            rows += size_rows(f"PyTorch training (real/roles, {r_events:,} events)", r_events,
                              [("v2 zstd -1", sizes["v2_zst"]), ("v2 .jsonl", sizes["v2"]),
                               ("v1 .jsonl", sizes["v1"]), ("v1 zstd -1", sizes["v1_zst"]),
                               ("v2 zstd -1, its event lines alone (no module, frame, stack, site lines)",
                                zstd_size(event_lines, 1))])
    if real:
        rows += size_rows(f"all {len(real)} real PyTorch/JAX traces ({totals['events']:,} events)", totals["events"],
                          [("v2 zstd -1", totals["v2_zst"]), ("v2 .jsonl", totals["v2"]),
                           ("v1 .jsonl", totals["v1"]), ("v1 zstd -1", totals["v1_zst"])])

    print("## Bytes per event\n")
    print("| trace | bytes | bytes/event |")
    print("|---|---:|---:|")
    for what, size, per_event in rows:
        print(f"| {what} | {size:,} | {per_event:.2f} |")

    print("\n## zstd levels on the loop's version 2 text (zstd -b, single thread)\n")
    print("| level | bytes/event | compression MB/s | ns/event |")
    print("|---|---:|---:|---:|")
    for level, src, dst, speed in zstd_levels(v2_plain, (1, 2, 3, 5)):
        print(f"| {level} | {dst / events:.2f} | {speed:.0f} | {src / events / speed * 1e3:.1f} |")

    print(f"\n## Reading the loop's trace: {args.reps} interleaved runs each, median (min-max)\n")
    report = os.path.join(b, "gpumem-report")
    readers = [("gpumem-report, v2 .jsonl.zst", [report, v2_zst], events),
               ("gpumem-report, v2 .jsonl", [report, v2_plain], events),
               ("gpumem-report, v1 .jsonl", [report, v1_plain], events)]
    if heaptrack_file and shutil.which("heaptrack_print"):
        readers.append(("heaptrack_print, heaptrack's file", ["heaptrack_print", heaptrack_file], h_events))
    samples = {name: [] for name, _, _ in readers}
    for _ in range(args.reps):
        for name, argv, _ in readers:
            samples[name] += timed(argv, 1)
    print("| reader | seconds | M events/s |")
    print("|---|---|---:|")
    for name, _, n in readers:
        t = samples[name]
        print(f"| {name} | {statistics.median(t):.3f} ({min(t):.3f}-{max(t):.3f}) | "
              f"{n / statistics.median(t) / 1e6:.1f} |")
    print(f"\nload average at the end: {load_average()}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
