# tests/python/test_pytest_entry.py — the pytest plugin reached as an installed wheel reaches it: once,
# and without a single warning, on a suite whose warnings are errors.
"""pytest marks every module of a distribution that has a pytest11 entry point for assertion
rewriting, and warns (PytestAssertRewriteWarning, "Module already imported so cannot be rewritten")
about each one that is already imported then; a suite with `filterwarnings = error` stops on that
warning before its first test. With the wheel installed, gpumemtrace's modules are such a
distribution. Here a dist-info folder like the wheel's (tools/python's modules, a pytest11 entry
point) stands beside tools/python on PYTHONPATH, under LD_PRELOAD=libgpumemtrace.so and the stand-in
torch, as `gpumemtrace run` sets up a process (PYTEST_PLUGINS too, which then finds the plugin
already loaded by its entry point): the suite runs under `python -W error` with `filterwarnings =
error`, prints no warning, and the plugin is registered once (one scope per test in the trace).
tests/dist/test_wheel.py does the same through the wheel itself, in a venv."""
import os
import subprocess
import tempfile
import unittest

from python_testlib import LIB, ROOT, SIM, python_with_pytest, read_trace, set_preload

TOOLS = os.path.join(ROOT, "tools", "python")
FAKE = os.path.join(ROOT, "tests", "python", "fake_torch")
PYTHON = python_with_pytest()

SUITE = '''
import torch

KEPT = []


def test_allocates():
    KEPT.append(torch.empty(1 << 20, device="cuda"))


def test_frees():
    t = torch.empty(1 << 20, device="cuda")
    del t
'''


def dist_info(site):
    """A dist-info folder for tools/python's modules as the wheel installs them (packaging/wheel.py)."""
    info = os.path.join(site, "gpumemtrace-0.0.0.dist-info")
    os.makedirs(info)
    files = {"METADATA": "Metadata-Version: 2.1\nName: gpumemtrace\nVersion: 0.0.0\n",
             "entry_points.txt": "[pytest11]\ngpumemtrace_pytest = gpumemtrace_pytest\n",
             "top_level.txt": "gpumemtrace\ngpumemtrace_pytest\ngpumemtrace_torch\n"}
    record = []
    for base, dirs, names in os.walk(TOOLS):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in names:
            rel = os.path.relpath(os.path.join(base, name), TOOLS)
            if name.endswith(".py") and rel != "sitecustomize.py":
                record.append(rel + ",,")
    files["RECORD"] = "\n".join(record + ["gpumemtrace-0.0.0.dist-info/RECORD,,"]) + "\n"
    for name, text in files.items():
        with open(os.path.join(info, name), "w") as f:
            f.write(text)


@unittest.skipUnless(os.path.exists(LIB) and os.path.exists(SIM), "needs build/libgpumemtrace.so and the sim")
@unittest.skipUnless(PYTHON, "needs pytest (make deps installs python3-pytest)")
class PytestEntryPointTest(unittest.TestCase):
    def run_suite(self, pytest_plugins):
        d = tempfile.mkdtemp(prefix="gpumemtrace-pytest-entry-")
        site = os.path.join(d, "site")
        dist_info(site)
        with open(os.path.join(d, "test_suite.py"), "w") as f:
            f.write(SUITE)
        with open(os.path.join(d, "pytest.ini"), "w") as f:
            f.write("[pytest]\nfilterwarnings =\n    error\n")
        out = os.path.join(d, "trace.jsonl")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMEMTRACE_", "PYTEST_"))}
        env.update(GPUMEMTRACE_OUTPUT=out, GPUMEMTRACE_QUIET="1", FAKE_TORCH_CUDART=SIM,
                   PYTHONPATH=os.pathsep.join([TOOLS, site, FAKE]))
        if pytest_plugins:
            env["PYTEST_PLUGINS"] = "gpumemtrace_pytest"
        set_preload(env)
        proc = subprocess.run([PYTHON, "-W", "error", "-m", "pytest", "-p", "no:cacheprovider", "-rA",
                               "test_suite.py"], cwd=d, capture_output=True, text=True, env=env, timeout=180)
        return proc, out

    def check(self, pytest_plugins):
        proc, trace = self.run_suite(pytest_plugins)
        out = proc.stdout + proc.stderr
        self.assertEqual(proc.returncode, 0, out)
        self.assertNotIn("Warning", out)
        self.assertNotIn("warning", out.lower().replace("gpu memory per test", ""))
        self.assertIn("2 passed", out)
        events, _ = read_trace(trace)
        scopes = [(e["op"], e["label"]) for e in events if e["op"].startswith("scope_") and e["api"] == "pytest"]
        self.assertEqual(scopes, [("scope_begin", "test_suite.py::test_allocates"), ("scope_end", "test_suite.py::test_allocates"),
                                  ("scope_begin", "test_suite.py::test_frees"), ("scope_end", "test_suite.py::test_frees")])

    def test_entry_point_alone(self):
        self.check(pytest_plugins=False)

    def test_entry_point_and_pytest_plugins_as_the_launcher_sets_it(self):
        self.check(pytest_plugins=True)


if __name__ == "__main__":
    unittest.main()
