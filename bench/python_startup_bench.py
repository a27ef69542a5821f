#!/usr/bin/env python3
# bench/python_startup_bench.py — what tracing adds to a Python process's start-up, plain beside traced.
"""Every Python process under `gpumemtrace run` starts with libgpumemtrace.so preloaded and
tools/python on PYTHONPATH (its sitecustomize.py watches for torch). This times a whole short
process, `python -c "pass"` by default, side by side:

  plain        no preload, no PYTHONPATH
  preload      LD_PRELOAD=libgpumemtrace.so only: the native library's own start-up
  traced:NAME  the preload and a tools/python folder on PYTHONPATH, as the launcher sets them; one
               variant per --tools NAME=DIR (default: this checkout's tools/python), e.g. an older
               checkout's (`git worktree add /tmp/old <rev>`, then --tools old=/tmp/old/tools/python
               --tools new=tools/python)

Each sample is one child: its CPU time (user + system, from the kernel's accounting of the waited
child) and its wall time. Variants are interleaved round by round; each cell is the median (min-max)
in ms over --rounds children. `traced - preload` is the Python side's own cost. The modules each
variant's child has loaded (len(sys.modules) at the end of the -c code) are printed beside it: the
Python side imports nothing the program did not. The load average (uptime) is printed before and
after: figures from a loaded machine are not headlines (docs/performance.md).

Usage: python_startup_bench.py --build BUILD [--rounds 21] [--python PYTHON] [--tools NAME=DIR ...]
                               [--code 'pass']
"""
import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

from benchlib import ROOT, Spread, interleaved_rounds, load_average, traced_env


def child_run(cmd, env):
    """(cpu_ms, wall_ms, stdout) of one child, or None when it failed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        print("%s failed (exit %d): %s" % (" ".join(cmd), p.returncode, p.stderr.strip()[-300:]))
        return None
    cpu = ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1000
    return cpu, wall, p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--python", default=sys.executable, help="the interpreter to measure")
    ap.add_argument("--code", default="pass", help="the -c program (default: pass)")
    ap.add_argument("--tools", action="append", default=[], metavar="NAME=DIR",
                    help="a tools/python folder to time (repeatable); default: this checkout's")
    args = ap.parse_args()
    tools = dict(t.split("=", 1) for t in args.tools if "=" in t) or {"this checkout": os.path.join(ROOT, "tools", "python")}
    code = args.code + "\nimport sys; print(len(sys.modules))"
    base = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "PYTHONPATH") and not k.startswith("GPUMEMTRACE_")}
    modules = {}
    print("load average before: %s" % load_average())
    with tempfile.TemporaryDirectory(prefix="python-startup-bench-") as tmp:
        envs = {"plain": base}
        preload = traced_env(args.build, tmp + "/", base=base)
        preload.pop("PYTHONPATH")
        envs["preload"] = preload
        for name, folder in tools.items():
            env = traced_env(args.build, tmp + "/", base=base)
            env["PYTHONPATH"] = os.path.abspath(folder)
            envs["traced:" + name] = env
        variants = list(envs)

        def measure(variant, r):
            got = child_run([args.python, "-c", code], envs[variant])
            if got is None:
                return None
            modules[variant] = int(got[2].split()[-1])
            return got[:2]

        samples = interleaved_rounds(variants, args.rounds, measure)
    if samples is None:
        return 1
    cpu = {v: Spread([s[0] for s in samples[v]]) for v in variants}
    wall = {v: Spread([s[1] for s in samples[v]]) for v in variants}
    print("start-up of `%s -c %r`, %d rounds, ms, median (min-max)" % (args.python, args.code, args.rounds))
    print("| variant | CPU (user + system) | wall | modules loaded |")
    print("|---|---|---|---|")
    for v in variants:
        print("| %s | %s | %s | %d |" % (v, cpu[v].text("%.1f"), wall[v].text("%.1f"), modules[v]))
    for v in variants:
        if v.startswith("traced:"):
            print("| %s - preload (medians) | %+.1f | %+.1f | %+d |" % (
                v, cpu[v].median - cpu["preload"].median, wall[v].median - wall["preload"].median,
                modules[v] - modules["preload"]))
    print("load average after: %s" % load_average())
    return 0


if __name__ == "__main__":
    sys.exit(main())
