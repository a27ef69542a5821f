#!/usr/bin/env python3
# bench/dwarf_lookup_bench.py — what naming one native frame from DWARF costs (function, line, inlined levels).
"""The cost per frame of trace/dwarf_symbols.cpp, the lookup the recorder's writer does once per new
frame (GPUMEMTRACE_SYMBOLIZE=1) and gpumem-report's offline pass does for traces recorded without
symbols (make bench-dwarf-lookup). Prints a Markdown table for docs/performance.md.

The frames: FRAMES return addresses (the instruction after a call, as in a recorded stack) spread over
a module with debug information and much inlining, by default the build's own gpumem-report (C++ at
-O2 -g: simdjson, nlohmann/json, the standard library), one leak each, in two synthetic traces: one
whose frames say nothing but module and offset, and one whose frames are already named. gpumem-report
--format json reads each; the difference in CPU time is the lookups (plus opening the module once).
--report NAME=PATH (repeatable) times other gpumem-report builds on the same two traces, interleaved
with this one: e.g. --report main=/path/to/main/build/gpumem-report. --module pins the module, so that
builds are compared on the same file.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ROOT, Spread, interleaved_rounds, load_average  # noqa: E402
from symbolize_bench import frames_trace, timed  # noqa: E402


def return_addresses(module, limit):
    """Up to `limit` offsets in `module` just past a call instruction (objdump -d), evenly spread."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", module], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    after_call = []
    for line, following in zip(out, out[1:]):
        if "\tcall " in line or "\tcall\t" in line:
            address = following.split(":", 1)[0].strip()
            if address and all(c in "0123456789abcdef" for c in address):
                after_call.append(int(address, 16))
    step = max(1, len(after_call) // max(limit, 1))
    return sorted(set(after_call[::step]))[:limit]


def inlined_levels(report, trace):
    """(frames named, inlined levels among them) in the JSON report of a symbol-less trace."""
    doc = json.loads(timed([report, "--format", "json", trace])[2])
    stacks = [leak["stack"] for leak in doc["leaks"]]
    named = sum(1 for s in stacks for f in s if f.get("function") and not f.get("inlined"))
    return named, sum(1 for s in stacks for f in s if f.get("inlined"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--frames", type=int, default=4000)
    ap.add_argument("--module", help="the module the frames lie in (default: BUILD/gpumem-report)")
    ap.add_argument("--report", action="append", default=[], metavar="NAME=PATH",
                    help="another gpumem-report to time on the same traces")
    args = ap.parse_args()
    reports = {"this build": os.path.join(args.build, "gpumem-report")}
    for item in args.report:
        name, _, path = item.partition("=")
        if not path:
            sys.exit(f"--report {item}: expected NAME=PATH")
        reports[name] = path
    module = os.path.realpath(args.module or reports["this build"])
    offsets = return_addresses(module, args.frames)
    if not offsets:
        sys.exit(f"{module}: no call instruction found")
    tmp = tempfile.mkdtemp(prefix="gpumemtrace-dwarf-bench-")
    traces = {named: os.path.join(tmp, f"frames{int(named)}.jsonl") for named in (True, False)}
    for named, path in traces.items():
        frames_trace(path, [(module, offsets)], named)
    levels = {name: inlined_levels(report, traces[False]) for name, report in reports.items()}
    load_before = load_average()
    variants = [(name, named) for name in reports for named in (False, True)]
    samples = interleaved_rounds(variants, args.reps,
                                 lambda v, _: timed([reports[v[0]], "--format", "json", traces[v[1]]])[1])
    load_after = load_average()
    subprocess.run(["rm", "-rf", tmp])

    print(f"## Naming {len(offsets)} frames from DWARF: {module}\n")
    print(f"Medians of {args.reps} interleaved runs of gpumem-report --format json, CPU time (load average "
          f"{load_before} before, {load_after} after).\n")
    print("| gpumem-report | frames named / inlined levels found | CPU, symbol-less trace | CPU, named trace "
          "| per frame |")
    print("|---|---|---|---|---|")
    for name, report in reports.items():
        unnamed, named = Spread(samples[(name, False)]), Spread(samples[(name, True)])
        per_frame_us = (unnamed.median - named.median) / len(offsets) * 1e6
        print(f"| {name} ({report}) | {levels[name][0]} / {levels[name][1]} | {unnamed.text('%.3f')} s "
              f"| {named.text('%.3f')} s | {per_frame_us:.1f} us |")


if __name__ == "__main__":
    main()
