# bench/benchlib.py — what every side-by-side benchmark shares: the load average, interleaved rounds,
# medians with their spread, and the environment of a traced child.
"""Helpers shared by the scripts in bench/.

A figure means something only next to the machine's load and the spread of the runs behind it, so every
benchmark prints `load_average()` before and after, runs its variants in interleaved rounds (a burst of
load then hits every variant, not one) and reports `Spread` (median, min, max) rather than a best run.
"""
import os
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_average():
    """The 1, 5 and 15 minute load averages as `uptime` prints them ("0.12 0.30 0.25")."""
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


class Spread:
    """The median and range of one variant's samples (at least one)."""

    def __init__(self, samples):
        if not samples:
            raise ValueError("no samples")
        self.samples = list(samples)
        self.median = statistics.median(self.samples)
        self.low = min(self.samples)
        self.high = max(self.samples)

    def text(self, fmt="%.3f"):
        return (fmt + " (" + fmt + "-" + fmt + ")") % (self.median, self.low, self.high)

    def ratio_to(self, base):
        """This median over `base`'s median: the headline of a side-by-side figure."""
        return self.median / base.median if base.median else float("nan")


def interleaved_rounds(variants, rounds, measure):
    """Calls measure(variant, round) for every variant in each of `rounds` rounds, variants in the given
    order within a round, and returns {variant: [samples]}. A measure that returns None (the run failed)
    stops everything: the error is the caller's to print, and a partial table would mislead."""
    samples = {v: [] for v in variants}
    for r in range(rounds):
        for v in variants:
            value = measure(v, r)
            if value is None:
                return None
            samples[v].append(value)
    return samples


# gpumemtrace at driver level: CUDA calls only, no PyTorch hook, no Python frames.
DRIVER_LEVEL = {"GPUMEMTRACE_TORCH": "0", "GPUMEMTRACE_PYTHON": "0"}


def have_gpu_torch(python):
    """True when `python` imports torch and sees a CUDA GPU (asked in a child: the benchmark itself
    never imports torch)."""
    probe = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)"
    return subprocess.run([python, "-c", probe], capture_output=True).returncode == 0


def run_child(cmd, env, timeout=600):
    """subprocess.run of a benchmark's child, its output captured as text; a child past `timeout`
    seconds is killed and comes back as a failed run (returncode -9, the reason in stderr)."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(cmd, -9, "", "killed after %d s" % timeout)


def traced_env(build, output, extra=None, base=None):
    """The environment of a child under the recorder: the preload, its trace file, the PyTorch hook
    (tools/python on PYTHONPATH), quiet; `extra` on top (e.g. GPUMEMTRACE_TORCH=0)."""
    env = dict(os.environ if base is None else base)
    env.update(LD_PRELOAD=os.path.join(build, "libgpumemtrace.so"), GPUMEMTRACE_OUTPUT=output,
               GPUMEMTRACE_QUIET="1",
               PYTHONPATH=os.pathsep.join(p for p in (os.path.join(ROOT, "tools", "python"),
                                                      env.get("PYTHONPATH", "")) if p))
    env.update(extra or {})
    return env
