#!/usr/bin/env python3
# bench/pytest_gc_bench.py — what the pytest plugin's gc callback costs each garbage collection.
"""The pytest plugin (tools/python/gpumemtrace_pytest.py) registers a gc.callbacks entry that records
every collection that freed objects ("gc" records). CPython calls it at the start and the end of
every collection, generation 0 included, so its cost is paid per collection. Side by side, in one
interpreter under the recorder (LD_PRELOAD=libgpumemtrace.so, the same in both variants):

  none     no callback (the plugin before the gc records, or GPUMEMTRACE_PYTEST=0)
  noop     a callback that does nothing: what CPython itself spends on any gc callback (it builds
           the info dict and makes the call, twice per collection)
  plugin   the plugin's callback, reporting to the library (gpumemtrace.gc_callback())

and two kinds of collection, gc.collect(0) in a loop:

  empty       nothing to collect (most of a program's collections): a clock read at the start, a
              dict lookup at the end
  collecting  one reference cycle to free each time: the same, and one foreign call that writes a
              "gc" record (the cycle is made in both variants, so its cost cancels out)

Each cell is ns per collection, the median (min-max) of --rounds children, variants interleaved;
`plugin - none` is the callback's cost, `plugin - noop` the part of it that is the plugin's own. The load average is printed before and after: figures from a
loaded machine are not headlines (docs/performance.md).

Usage: pytest_gc_bench.py --build BUILD [--rounds 7] [--collections 200000] [--python PYTHON]
"""
import argparse
import os
import sys
import tempfile

from benchlib import Spread, interleaved_rounds, load_average, run_child, traced_env

CHILD = r'''
import ctypes, gc, sys, time
n, variant = int(sys.argv[1]), sys.argv[2]
# The recorder starts on its first event (its writer thread): here, in both variants, not in a loop.
ctypes.CDLL(None).gpumemtrace_report_mark(b"bench start")
if variant == "noop":
    gc.callbacks.append(lambda phase, info: None)
if variant == "plugin":
    import gpumemtrace
    callback = gpumemtrace.gc_callback()
    if callback is None:
        sys.exit("no gpumemtrace_report_gc in this process (is libgpumemtrace.so preloaded?)")
    gc.callbacks.append(callback)
gc.disable()       # only the loop's own collections
gc.collect()
collect = gc.collect

def empty():
    t = time.perf_counter_ns()
    for _ in range(n):
        collect(0)
    return (time.perf_counter_ns() - t) / n

def collecting():
    t = time.perf_counter_ns()
    for _ in range(n):
        a = []
        a.append(a)  # a cycle for this collection to free
        del a
        collect(0)
    return (time.perf_counter_ns() - t) / n

print("%.1f %.1f" % (empty(), collecting()))
'''

VARIANTS = ("none", "noop", "plugin")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build"))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--collections", type=int, default=200000)
    ap.add_argument("--python", default=sys.executable, help="the interpreter to measure")
    args = ap.parse_args()
    print("load average before: %s" % load_average())
    records = {}
    with tempfile.TemporaryDirectory(prefix="pytest-gc-bench-") as tmp:
        def measure(variant, r):
            out = os.path.join(tmp, "%s-%d.jsonl" % (variant, r))
            p = run_child([args.python, "-c", CHILD, str(args.collections), variant], traced_env(args.build, out))
            if p.returncode != 0:
                print("%s failed (exit %d): %s" % (variant, p.returncode, p.stderr.strip()[-300:]))
                return None
            with open(out) as f:
                records[variant] = sum(1 for line in f if line.startswith('{"type":"gc"'))
            return tuple(float(x) for x in p.stdout.split())

        samples = interleaved_rounds(VARIANTS, args.rounds, measure)
    if samples is None:
        return 1
    spreads = {v: (Spread([s[0] for s in samples[v]]), Spread([s[1] for s in samples[v]])) for v in VARIANTS}
    print("ns per gc.collect(0), %d collections x %d rounds (median (min-max)); %s" %
          (args.collections, args.rounds, args.python))
    print("| variant | empty | collecting | gc records in the last round's trace |")
    print("|---|---|---|---|")
    for v in VARIANTS:
        print("| %s | %s | %s | %d |" % (v, spreads[v][0].text("%.0f"), spreads[v][1].text("%.0f"), records[v]))
    print("| plugin - none (medians) | %.0f | %.0f | |" % (spreads["plugin"][0].median - spreads["none"][0].median,
                                                           spreads["plugin"][1].median - spreads["none"][1].median))
    print("| plugin - noop (medians) | %.0f | %.0f | |" % (spreads["plugin"][0].median - spreads["noop"][0].median,
                                                           spreads["plugin"][1].median - spreads["noop"][1].median))
    print("load average after: %s" % load_average())
    return 0


if __name__ == "__main__":
    sys.exit(main())
