#!/usr/bin/env python3
# tests/gpu/verdict_checks.py — the analyzer's verdicts on real PyTorch and JAX programs (GPU only).
"""The analyzer's verdicts on real PyTorch and JAX programs (GPU only).

Runs each program of tests/gpu/scenarios/ under `gpumemtrace ci` and checks what a user would check:
  clean        a clean training loop passes `ci --fail-on-leak=1MiB --fail-on-growth` (cuBLAS
               workspaces held by a library, parameters and gradients alive at exit: not leaks)
  jax          a clean JAX program passes the leak gate (cuBLAS/cuDNN handles held by libraries)
  pytest       a suite with one leaking test fails the gate, naming that test's node id only
  capacity     filling the device: one OOM incident (the retried cudaMalloc and torch.oom), capacity
  capped       set_per_process_memory_fraction: one incident, verdict "allocator limit", the cap (0.02)
               named from the trace's allocator_settings record, and the what-if replay of the recorded
               run faithful without --recorded-settings
  expandable   expandable segments, planted growth then an OOM: growth still reported at the planted
               lines, one incident, the "not permitted" probe a failed call and not an OOM
  eval         validation accumulated outside no_grad: growth at the line, with the no_grad advice
  roles        a transformer training step: the peak split into parameters, gradients, optimizer state
               and activations
  text         the text report of a real run leads with the user's Python line and fits 160 columns
  html         --format html and --format perfetto of a real run are written and well formed
  nvtx         torch.cuda.nvtx ranges name the phase of the peak
Prints PASS/FAIL/SKIP per check (gpuenv.Results); exits 0 without a GPU. Run by tests/gpu/run.sh with
the launcher and analyzer where tests/gpu/gpuenv.py says; traces and reports kept under OUT/verdicts.
"""
import json
import os
import subprocess
import sys

import gpuenv
from gpuenv import ROOT, have_gpu_torch

SCEN = os.path.join(ROOT, "tests", "gpu", "scenarios")
RESULTS = gpuenv.Results("verdict")


def say(ok, name, detail):
    RESULTS.say(name, ok, detail)


class Runner:
    def __init__(self, out):
        self.out = out

    def ci(self, name, argv, gates=("--fail-on-leak=1MiB", "--fail-on-growth"), env=None):
        d = os.path.join(self.out, name)
        os.makedirs(d, exist_ok=True)
        e = dict(os.environ, **(env or {}))
        p = subprocess.run([gpuenv.LAUNCHER, "ci", *gates, "-o", os.path.join(d, "traces"),
                            "--", *argv], capture_output=True, text=True, env=e, timeout=600, cwd=ROOT)
        with open(os.path.join(d, "run.log"), "w") as f:
            f.write(p.stdout + "\n--- stderr\n" + p.stderr + "\nexit %d\n" % p.returncode)
        return p, os.path.join(d, "traces")

    def report(self, traces, *args):
        p = subprocess.run([gpuenv.REPORT, *args, traces], capture_output=True,
                           text=True, timeout=600)
        return p

    def json(self, traces, *args):
        p = self.report(traces, "--format", "json", *args)
        return json.loads(p.stdout) if p.stdout else {}


def python_frames(stack):
    return [f for f in stack if f.get("lang") == "python"]


def first_user_line(stack, script):
    return any(f.get("file", "").endswith(script) for f in python_frames(stack))


def main():
    if not have_gpu_torch():
        say(None, "verdict checks", "needs PyTorch with a CUDA GPU")
        return 0
    r = Runner(gpuenv.out_dir("verdicts"))
    py = sys.executable

    p, t = r.ci("clean", [py, os.path.join(SCEN, "clean_train.py")])
    rep = r.json(t)
    held = {h.get("library") or h["reason"] for h in rep.get("held_at_exit", [])}
    say(p.returncode == 0, "clean", "exit %d; leaked %d B; held at exit: %s; growth %d" % (
        p.returncode, rep.get("summary", {}).get("leaked_bytes", -1), sorted(held), len(rep.get("growth", []))))

    try:
        import jax  # noqa: F401
        p, t = r.ci("jax", [py, os.path.join(SCEN, "jax_clean.py")], gates=("--fail-on-leak=1MiB",),
                    env={"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.3"})
        rep = r.json(t)
        say(p.returncode == 0, "jax", "exit %d; held: %s" % (
            p.returncode, sorted({h.get("library") or h["reason"] for h in rep.get("held_at_exit", [])})))
    except ImportError:
        say(None, "jax", "jax not installed")

    p, t = r.ci("pytest", [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", os.path.join(SCEN, "leaky_suite.py")],
                gates=("--fail-on-leak=1MiB",))
    rep = r.json(t)
    leaking = [s["name"] for s in rep.get("scopes", []) if s["leaked_bytes"] > 1 << 20]
    named = "test_keeps_tensor" in p.stderr + p.stdout
    others = any(n in (p.stderr + p.stdout).split("FAILED", 1)[-1] for n in ("test_linear_backward leaked", "test_matmul leaked"))
    ok = p.returncode == 1 and len(leaking) == 1 and leaking[0].endswith("::test_keeps_tensor") and named and not others
    say(ok, "pytest", "exit %d; %d scopes, leaking: %s" % (p.returncode, len(rep.get("scopes", [])), leaking))

    def one_incident(name, script, verdict, env=None, extra=None):
        p, t = r.ci(name, [py, os.path.join(SCEN, script)], gates=(), env=env)
        rep = r.json(t)
        ooms = rep.get("ooms", [])
        ok = len(ooms) == 1 and ooms[0]["verdict"] == verdict and (extra is None or extra(rep))
        say(ok, name, "%d incidents %s; attempts %s; why: %s" % (
            len(ooms), [o["verdict"] for o in ooms], [a["api"] for a in ooms[0]["attempts"]] if ooms else [],
            ooms[0].get("explanation") if ooms else ""))
        return rep

    one_incident("capacity", "oom_capacity.py", "capacity", extra=lambda rep: rep["ooms"][0]["attempts_total"] >= 2)
    one_incident("capped", "oom_capped.py", "allocator limit",
                 extra=lambda rep: (rep["ooms"][0].get("cap") or {}).get("fraction") == 0.02 and rep.get("what_if")
                 and all(w["settings_from"] == "trace" and w["replay"]["faithful"] for w in rep["what_if"]))
    rep = one_incident("expandable", "expandable_growth_oom.py", "capacity",
                       env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    growth_lines = sorted({f["line"] for g in rep.get("growth", []) if g["level"] == "block"
                           for f in python_frames(g["stack"]) if f.get("file", "").endswith("expandable_growth_oom.py")})
    not_oom = [c["error"] for c in rep.get("failed_calls", [])]
    say(bool(growth_lines), "expandable/growth", "block-level growth at lines %s; failed calls %s" % (growth_lines, not_oom))

    p, t = r.ci("eval", [py, os.path.join(SCEN, "eval_without_no_grad.py")], gates=("--fail-on-growth",))
    rep = r.json(t)
    planted = [g for g in rep.get("growth", []) if g["level"] == "block" and first_user_line(g["stack"], "eval_without_no_grad.py")]
    say(p.returncode == 1 and planted and "no_grad" in (planted[0].get("advice") or ""), "eval",
        "exit %d; %d growth at the user's line; advice: %s" % (p.returncode, len(planted),
                                                               planted[0].get("advice") if planted else None))
    text = r.report(t).stdout
    with open(os.path.join(r.out, "eval", "report.txt"), "w") as f:
        f.write(text)
    wide = [l for l in text.splitlines() if l.startswith(" ") and len(l) > 160]  # frame and advice lines
    # The first frame shown under each growth / culprit entry is a Python line of the user's script.
    firsts, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("growth (") or (line.startswith("    ") and " in " in line and line.rstrip().endswith(":")
                                           and "allocation" in line):
            if i + 1 < len(lines):
                firsts.append(lines[i + 1].strip())
    user_first = [s for s in firsts if "eval_without_no_grad.py" in s]
    say(not wide and firsts and len(user_first) == len(firsts), "text",
        "%d lines > 160; first frames: %s" % (len(wide), firsts[:6]))

    p, t = r.ci("roles", [py, os.path.join(SCEN, "transformer_step.py")], gates=())
    rep = r.json(t)
    roles = (rep.get("peaks") or [{}])[0].get("roles", {})
    need = ("parameters", "gradients", "optimizer state", "activations")
    say(all(roles.get(k, 0) > 0 for k in need), "roles",
        "; ".join("%s %.1f MiB" % (k, v / 2**20) for k, v in sorted(roles.items(), key=lambda kv: -kv[1]) if v))
    html = os.path.join(r.out, "roles", "report.html")
    perf = os.path.join(r.out, "roles", "memory.perfetto.json")
    ph = r.report(t, "--format", "html", "-o", html)
    pp = r.report(t, "--format", "perfetto", "-o", perf)
    try:
        doc = json.load(open(perf))
        counters = sum(1 for e in doc["traceEvents"] if e.get("ph") == "C")
    except (OSError, ValueError, KeyError):
        counters = 0
    say(ph.returncode == 0 and os.path.getsize(html) > 10000 and pp.returncode == 0 and counters > 0, "html",
        "html %d bytes, perfetto %d counter events" % (os.path.getsize(html) if os.path.exists(html) else 0, counters))

    p, t = r.ci("nvtx", [py, os.path.join(SCEN, "nvtx_ranges.py")], gates=())
    rep = r.json(t)
    phase = ((rep.get("peaks") or [{}])[0].get("allocated") or {}).get("phase", "")
    say("forward" in phase, "nvtx", "phase of the allocated peak: %r" % phase)

    return RESULTS.exit_code()


if __name__ == "__main__":
    sys.exit(main())
