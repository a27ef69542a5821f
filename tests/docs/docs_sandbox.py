# tests/docs/docs_sandbox.py — where the docs' commands run: a folder shaped like the repository, with a user's files.
"""The sandbox the docs' commands run in (tests/docs/check_docs.py), and how their output is compared.

A sandbox is a fresh folder that looks like this repository to a command written in the docs
(`build/gpumem-report`, `tools/python`, `tests/report/real/...`: links to the real folders, `build`
to the build under test) and like a user's folder on a GPU machine: `train.py` (a Python program
that allocates on the CUDA runtime and keeps one buffer), `trace.jsonl` and `trace.jsonl.zst` (the
demo's trace), `traces/` (two of them), `base.jsonl` / `new.jsonl`, `snapshot.pickle` (a PyTorch
snapshot with a planted leak) and `known.supp`. The CUDA runtime is the simulated one
(LD_LIBRARY_PATH=build/sim), `gpumemtrace` and `gpumem-report` are on PATH, and so is `python`.

Output is compared after `normalize()`: what changes from run to run (addresses, times, pids, the
sandbox's own path, the launcher's dated directory) is replaced by a placeholder on both sides.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "tests", "snapshot"))
from testenv import sanitizer_runtime  # noqa: E402

TRAIN_PY = """\
# train.py (the docs' sandbox): allocates 12 MiB on the CUDA runtime, keeps it, frees a 4 MiB buffer.
import ctypes
ctypes.CDLL("libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
cuda = ctypes.CDLL(None)  # the global scope: the recorder's cudaMalloc when it is preloaded
kept, tmp = ctypes.c_void_p(), ctypes.c_void_p()
assert cuda.cudaMalloc(ctypes.byref(kept), ctypes.c_size_t(12 << 20)) == 0
assert cuda.cudaMalloc(ctypes.byref(tmp), ctypes.c_size_t(4 << 20)) == 0
assert cuda.cudaFree(tmp) == 0
print("trained")
"""

KNOWN_SUPP = "# known.supp (the docs' sandbox)\nleak:cache_embeddings\n"

# The repository's folders a documented command may name; `build` is the build under test.
REPO_ENTRIES = ("bench", "cupti", "docs", "examples", "include", "interpose", "packaging", "report",
                "tests", "tools", "trace", "util", "vendor", "Makefile", "README.md")


def build_dir():
    return os.path.abspath(os.environ.get("GPUMEMTRACE_BUILD", os.path.join(ROOT, "build")))


def python_with_pytest():
    """Debian's python3 (it has pytest), else this one: the sandbox's `python`."""
    return "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


def commands_can_run(build):
    """Why the docs' commands cannot run here, or None. They preload the recorder alone, as a user
    does: a sanitized build (make asan, make tsan) needs its runtime first."""
    if sanitizer_runtime():
        return "the docs' commands preload the recorder alone; a sanitized build needs its runtime first"
    for name in ("gpumem-report", "gpumemtrace", "libgpumemtrace.so", "sim/libcudart.so.13", "examples/train_loop"):
        if not os.path.exists(os.path.join(build, name)):
            return f"{build}/{name} is not built (make test builds it)"
    return None


class Sandbox:
    """A template folder made once (the traces take a second to record); `fresh()` copies it for each
    command block, so that no block sees another's files."""

    def __init__(self, build=None):
        self.build = build or build_dir()
        self.top = tempfile.mkdtemp(prefix="gpumem-docs-")
        self.template = os.path.join(self.top, "template")
        self.count = 0
        os.mkdir(self.template)
        bin_dir = os.path.join(self.template, ".bin")
        os.mkdir(bin_dir)
        os.symlink(python_with_pytest(), os.path.join(bin_dir, "python"))
        for name in REPO_ENTRIES:
            if os.path.exists(os.path.join(ROOT, name)):
                os.symlink(os.path.join(ROOT, name), os.path.join(self.template, name))
        os.symlink(self.build, os.path.join(self.template, "build"))
        self._write("train.py", TRAIN_PY)
        self._write("known.supp", KNOWN_SUPP)
        self._record_traces()
        self._write_snapshot()

    def close(self):
        shutil.rmtree(self.top, ignore_errors=True)

    def env(self, sandbox):
        e = {k: v for k, v in os.environ.items()
             if not k.startswith(("GPUMEMTRACE_", "LD_PRELOAD", "PYTEST_", "NVTX_INJECTION"))}
        e["PATH"] = os.pathsep.join([os.path.join(sandbox, ".bin"), self.build, e.get("PATH", "/usr/bin:/bin")])
        e["LD_LIBRARY_PATH"] = os.path.join(self.build, "sim")
        e["COLUMNS"] = "160"
        e.pop("PYTHONPATH", None)
        return e

    def fresh(self):
        """A copy of the template for one block."""
        self.count += 1
        path = os.path.join(self.top, f"run{self.count}")
        shutil.copytree(self.template, path, symlinks=True)
        return path

    def run(self, script, sandbox=None, timeout=120, strict=False):
        """Runs `script` with bash in a sandbox (a fresh one unless given); returns (status, output:
        stdout and stderr as they interleave). `strict`: set -e -o pipefail."""
        sandbox = sandbox or self.fresh()
        args = ["bash", "-eo", "pipefail", "-c", script] if strict else ["bash", "-c", script]
        try:
            p = subprocess.run(args, cwd=sandbox, env=self.env(sandbox), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
            return p.returncode, p.stdout.replace(sandbox, "SANDBOX")
        except subprocess.TimeoutExpired:
            return 124, f"(timed out after {timeout} s)"

    # --- fixtures ---

    def _write(self, name, text):
        with open(os.path.join(self.template, name), "w") as f:
            f.write(text)

    def _trace(self, output, *args):
        env = self.env(self.template)
        env["LD_PRELOAD"] = os.path.join(self.build, "libgpumemtrace.so")
        env["GPUMEMTRACE_OUTPUT"] = output
        env["GPUMEMTRACE_QUIET"] = "1"
        subprocess.run(list(args), cwd=self.template, env=env, check=True, capture_output=True, timeout=120)

    def _record_traces(self):
        demo = os.path.join(self.build, "examples", "train_loop")
        t = self.template
        self._trace(os.path.join(t, "trace.jsonl"), demo, "50")
        self._trace(os.path.join(t, "trace.jsonl.zst"), demo, "50")
        self._trace(os.path.join(t, "base.jsonl"), demo, "20")
        self._trace(os.path.join(t, "new.jsonl"), demo, "40")
        os.mkdir(os.path.join(t, "traces"))
        self._trace(os.path.join(t, "traces") + "/", demo, "10")
        self._trace(os.path.join(t, "traces") + "/", demo, "30")

    def _write_snapshot(self):
        import snapshot_samples
        snapshot_samples.dump(snapshot_samples.planted_leak(), os.path.join(self.template, "snapshot.pickle"))


# --- comparing output ---

_NORMALIZERS = [
    (re.compile(r"0x[0-9a-f]+"), "0xADDR"),
    # 790.9 us, 1.2 ms, 25 s, 3.40 M events/s stays: only durations
    (re.compile(r"\b\d+(?:\.\d+)? (?:ns|us|µs|ms|s)\b"), "TIME"),
    (re.compile(r"\bunder a second\b"), "TIME"),
    (re.compile(r"\b(pid|pids?) \d+"), r"\1 PID"),
    (re.compile(r"(gpumemtrace\.[\w.+-]+?)\.\d+((?:-\d+)?\.jsonl)"), r"\1.PID\2"),
    (re.compile(r"gpumemtrace-\d{8}-\d{6}-\d+"), "gpumemtrace-DATE-PID"),
    (re.compile(r"[ \t]+$", re.M), ""),
]


def normalize(text):
    for pattern, repl in _NORMALIZERS:
        text = pattern.sub(repl, text)
    return text


def shown_in(doc_block, output):
    """True when the documented block appears in the output, both normalized: its lines in order and
    contiguous, except that a line `...` stands for any number of lines."""
    parts = []
    for line in normalize(doc_block).rstrip("\n").split("\n"):
        parts.append(r"(?:.*\n)*?" if line.strip() == "..." else re.escape(line) + r"\n")
    return re.search("".join(parts), normalize(output).rstrip("\n") + "\n") is not None
