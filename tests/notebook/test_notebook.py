# tests/notebook/test_notebook.py — notebooks: `gpumemtrace kernel install`, %%gpumemtrace and %gpumemtrace_report, executed by nbconvert.
"""The notebook tests/notebook/cells.ipynb executed by `jupyter nbconvert --to notebook --execute` in a
kernel that `gpumemtrace kernel install` registered (into a private prefix), on the simulated CUDA
runtime and the stand-in torch: each %%gpumemtrace cell shows its peak and what it left allocated,
the OOM cell its verdict (the one gpumem-report gives for the kernel's trace) and then raises its
OutOfMemoryError as usual, %gpumemtrace_report the whole session. The same cells in a shell without
the recorder say how to get one and use PyTorch's own counters and history. Skipped only when
Jupyter (nbconvert, ipykernel) is not installed: `make deps` installs Debian's.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
from python_testlib import BUILD, LIB, SIM  # noqa: E402
from testenv import sanitizer_runtime  # noqa: E402

TOOLS = os.path.join(ROOT, "tools", "python")
FAKE_TORCH = os.path.join(ROOT, "tests", "python", "fake_torch")
NOTEBOOK = os.path.join(HERE, "cells.ipynb")
LAUNCHER = os.path.join(BUILD, "gpumemtrace")
sys.path.insert(0, TOOLS)
import gpumemtrace  # noqa: E402


def jupyter_python():
    """(an interpreter with ipykernel and nbconvert, the jupyter command), or (None, why)."""
    jupyter = shutil.which("jupyter")
    for exe in (sys.executable, "/usr/bin/python3"):
        try:
            ok = subprocess.run([exe, "-c", "import ipykernel, nbconvert, nbclient"], capture_output=True,
                                timeout=60).returncode == 0
        except OSError:
            ok = False
        if ok and jupyter:
            return exe, jupyter
    return None, ("Jupyter is not installed (no `jupyter` command, or no Python with ipykernel, nbconvert "
                  "and nbclient): `make deps` installs Debian's jupyter-nbconvert and python3-ipykernel")


PYTHON, JUPYTER = jupyter_python()   # JUPYTER: why not, when PYTHON is None
BUILT = all(os.path.exists(p) for p in (LIB, SIM, LAUNCHER))


def needs_jupyter(cls):
    """Skips the class, saying why, without the build or without Jupyter (and only then)."""
    if not BUILT:
        return unittest.skip("needs build/libgpumemtrace.so, build/gpumemtrace and build/sim/libcudart.so.13")(cls)
    return unittest.skip(JUPYTER)(cls) if PYTHON is None else cls


def outputs(notebook):
    """Per code cell, in order: its outputs as (kind, text/plain or stream text or ename, text/html)."""
    out = []
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        items = []
        for o in cell["outputs"]:
            if o["output_type"] in ("display_data", "execute_result"):
                items.append((o["output_type"], "".join(o["data"].get("text/plain", "")),
                              "".join(o["data"].get("text/html", ""))))
            elif o["output_type"] == "stream":
                items.append(("stream", "".join(o["text"]), ""))
            else:
                items.append((o["output_type"], o.get("ename", ""), ""))
        out.append(items)
    return out


def env_for_torch():
    env = dict(os.environ, FAKE_TORCH_CUDART=SIM, PYDEVD_DISABLE_FILE_VALIDATION="1")
    env["PYTHONPATH"] = FAKE_TORCH + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("LD_PRELOAD", None)
    # Under `make asan`/`make tsan` the recorder is instrumented: the sanitizer's runtime must be loaded
    # from the start in every process (nbconvert, the kernel the shim puts the recorder in front of,
    # gpumem-report started by the magic), as the launcher's tests do.
    if sanitizer_runtime():
        env["LD_PRELOAD"] = sanitizer_runtime()
    return env


@needs_jupyter
class NotebookTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        d = cls.dir.name
        cls.traces = os.path.join(d, "traces")
        cls.install = subprocess.run([LAUNCHER, "kernel", "install", "--python", PYTHON, "--prefix", d,
                                      "--name", "gpumemtrace-test", "--output", cls.traces],
                                     capture_output=True, text=True, timeout=120)
        env = env_for_torch()
        env.update(JUPYTER_PATH=os.path.join(d, "share", "jupyter"), JUPYTER_DATA_DIR=os.path.join(d, "data"),
                   JUPYTER_RUNTIME_DIR=os.path.join(d, "runtime"), JUPYTER_CONFIG_DIR=os.path.join(d, "config"))
        cls.proc = subprocess.run([JUPYTER, "nbconvert", "--to", "notebook", "--execute",
                                  "--ExecutePreprocessor.kernel_name=gpumemtrace-test",
                                  "--ExecutePreprocessor.timeout=120", "--output-dir", d, NOTEBOOK],
                                 capture_output=True, text=True, timeout=300, env=env, cwd=d)
        executed = os.path.join(d, "cells.ipynb")
        cls.cells = []
        if os.path.exists(executed):
            with open(executed, encoding="utf-8") as f:
                cls.cells = outputs(json.load(f))
        cls.kernel_traces = sorted(os.listdir(cls.traces)) if os.path.isdir(cls.traces) else []

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def setUp(self):
        self.assertEqual(self.install.returncode, 0, self.install.stderr)
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr[-3000:])

    def test_the_kernel_runs_under_the_recorder(self):
        with open(os.path.join(self.dir.name, "share", "jupyter", "kernels", "gpumemtrace-test",
                               "kernel.json")) as f:
            spec = json.load(f)
        self.assertEqual(spec["argv"][0], PYTHON)
        self.assertIn(LIB, spec["argv"])
        self.assertEqual(len(self.kernel_traces), 1, self.kernel_traces)
        report = gpumemtrace.read(os.path.join(self.traces, self.kernel_traces[0]))
        self.assertIn("ipykernel_launcher", " ".join(report.processes[0].cmdline))

    def test_a_cell_before_any_cuda_call(self):
        (kind, text, _), (result, value, _) = self.cells[1]
        self.assertEqual(text, "gpumemtrace: no gpu (recorder): peak 0 B, left nothing allocated")
        self.assertEqual((result, value), ("execute_result", "45"))

    def test_a_cell_shows_its_peak_and_what_it_left(self):
        (kind, text, page), = self.cells[2]
        self.assertEqual(kind, "display_data")
        self.assertEqual(text.splitlines()[0],
                         "gpumemtrace: cell 3 (recorder): peak 24.0 MiB, left allocated 8.0 MiB in 1 allocation")
        self.assertIn("left 8.0 MiB, allocated at this cell, line 1", text)
        self.assertIn("<svg class='gpumemtrace-timeline'", page)
        self.assertIn("<th style='text-align:left;padding-right:1em'>left allocated</th><td style='text-align:left'>"
                      "8.0 MiB in 1 allocation</td>", page)

    def test_the_oom_cell_shows_the_verdict_then_raises(self):
        kinds = [k for k, _, _ in self.cells[3]]
        self.assertEqual(kinds, ["display_data", "error"])
        text = self.cells[3][0][1]
        self.assertEqual(self.cells[3][1][1], "OutOfMemoryError")
        report = gpumemtrace.read(os.path.join(self.traces, self.kernel_traces[0]))
        self.assertEqual(len(report.ooms), 1)
        oom = report.ooms[0]
        self.assertIn("OOM: 4.0 GiB requested, verdict %s: %s" % (oom.verdict, oom.explanation), text)
        self.assertIn("the cell raised OutOfMemoryError", text)
        self.assertTrue(text.startswith("gpumemtrace: too big (recorder): peak 0 B, left nothing allocated"), text)

    def test_a_cell_that_frees_leaves_nothing_and_keeps_its_value(self):
        (kind, text, _), (result, value, _) = self.cells[4]
        self.assertEqual(text, "gpumemtrace: release (recorder): peak 0 B, left nothing allocated")
        self.assertEqual((result, value), ("execute_result", "'released'"))

    def test_the_session_report(self):
        (kind, text, page), = self.cells[5]
        lines = text.splitlines()
        self.assertEqual(lines[0], "gpumemtrace: the session so far, 4 measured cells")
        self.assertEqual([l.split(" (")[0] for l in lines if l.startswith("gpumemtrace: ") and "(recorder)" in l],
                         ["gpumemtrace: no gpu", "gpumemtrace: cell 3", "gpumemtrace: too big", "gpumemtrace: release"])
        trace = os.path.join(self.traces, self.kernel_traces[0])
        self.assertIn("== %s: pid " % trace, text)  # gpumem-report's own report of the kernel's trace
        self.assertIn("<details><summary>gpumem-report</summary>", page)


@needs_jupyter
class WithoutRecorderTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        env = env_for_torch()
        env["PYTHONPATH"] = TOOLS + os.pathsep + env["PYTHONPATH"]
        cls.proc = subprocess.run([PYTHON, os.path.join(HERE, "plain_shell.py"), NOTEBOOK], capture_output=True,
                                 text=True, timeout=120, env=env)
        cls.lines = cls.proc.stdout.splitlines()

    def test_it_says_once_how_to_get_the_recorder(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr)
        said = [l for l in self.lines if "this kernel runs without the recorder" in l]
        self.assertEqual(len(said), 1, self.lines)
        self.assertIn("gpumemtrace kernel install --user", said[0])

    def test_pytorch_counters_give_the_figures(self):
        self.assertIn("gpumemtrace: no gpu (PyTorch's counters): peak 0 B, allocated +0 B since the cell began",
                      self.lines)
        self.assertIn("gpumemtrace: cell 3 (PyTorch's counters): peak 24.0 MiB, allocated +8.0 MiB since the "
                      "cell began", self.lines)
        self.assertIn("gpumemtrace: release (PyTorch's counters): peak 0 B, allocated -8.0 MiB since the cell "
                      "began", self.lines)

    def test_the_oom_verdict_comes_from_the_snapshot(self):
        verdicts = [l.split(" ", 1)[1] for l in self.lines if l.startswith("snapshot-verdict ")]
        self.assertEqual(len(verdicts), 1, self.lines)
        shown = [l for l in self.lines if l.startswith("  OOM: 4.0 GiB requested, verdict ")]
        self.assertTrue(shown and shown[0].startswith("  OOM: 4.0 GiB requested, verdict %s: " % verdicts[0]),
                        self.lines)
        self.assertIn("error OutOfMemoryError", self.lines)


@unittest.skipUnless(os.path.exists(LAUNCHER), "needs build/gpumemtrace")
class KernelInstallErrorsTest(unittest.TestCase):
    def launcher(self, *args):
        return subprocess.run([LAUNCHER] + list(args), capture_output=True, text=True, timeout=60)

    def test_bad_usage_is_one_line_and_exit_2(self):
        for args in (["kernel"], ["kernel", "instal"], ["kernel", "install", "--user", "--prefix", "/tmp"],
                     ["kernel", "install", "--usr"]):
            proc = self.launcher(*args)
            self.assertEqual(proc.returncode, 2, args)
            self.assertEqual(len(proc.stderr.splitlines()), 1, proc.stderr)
            self.assertIn("gpumemtrace kernel install", proc.stderr)

    def test_a_python_that_cannot_run_is_said(self):
        proc = self.launcher("kernel", "install", "--python", "/nonexistent/python3", "--prefix", "/tmp")
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(proc.stderr, "gpumemtrace: /nonexistent/python3: No such file or directory (name the "
                                      "Python the kernel is for with --python)\n")

    def test_a_python_without_ipykernel_is_said(self):
        with tempfile.TemporaryDirectory() as d:
            os.mkdir(os.path.join(d, "ipykernel"))
            with open(os.path.join(d, "ipykernel", "__init__.py"), "w") as f:  # an ipykernel that cannot load
                f.write("raise ImportError('not here', name='ipykernel')\n")
            env = dict(os.environ, PYTHONPATH=d)
            proc = subprocess.run([LAUNCHER, "kernel", "install", "--python", sys.executable, "--prefix", d],
                                  capture_output=True, text=True, timeout=60, env=env)
            self.assertFalse(os.path.exists(os.path.join(d, "share")))
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertEqual(proc.stderr, "gpumemtrace kernel install: %s has no ipykernel: install ipykernel for it "
                                      "(pip install ipykernel, or apt install python3-ipykernel), or name another "
                                      "with --python\n" % sys.executable)

if __name__ == "__main__":
    unittest.main()
