# tests/python/test_python_startup.py — what a Python program sees of gpumemtrace at start-up: nothing.
"""tools/python/sitecustomize.py under the recorder, as `gpumemtrace run` sets it up (LD_PRELOAD and
PYTHONPATH): a program that does not import torch has the same modules, the same sys.meta_path[0] and
the same gc.callbacks as it has untraced (sitecustomize itself aside); the one finder that waits
for torch sits behind sys.meta_path[0] and is gone once torch is imported, when the hook is on; a
program that asks importlib whether torch is installed before importing it still gets the hook;
GPUMEMTRACE_TORCH=0 adds no finder at all. The time this costs is bench/python_startup_bench.py's
(docs/performance.md): a benchmark, not a timed test."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from python_testlib import LIB, ROOT, SIM, set_preload

TOOLS = os.path.join(ROOT, "tools", "python")
FAKE = os.path.join(ROOT, "tests", "python", "fake_torch")

# What the program sees, as JSON on its stdout.
SEEN = """
import gc, json, sys
print(json.dumps({"modules": sorted(sys.modules), "meta_path": [type(f).__name__ for f in sys.meta_path],
                  "first": repr(sys.meta_path[0]).split(" at ")[0], "gc_callbacks": len(gc.callbacks),
                  "hook": getattr(getattr(sys.modules.get("gpumemtrace_torch"), "HOOK", None), "sharing", None) is not None}))
"""


@unittest.skipUnless(os.path.exists(LIB), "needs build/libgpumemtrace.so")
class PythonStartupTest(unittest.TestCase):
    def seen(self, code="", traced=True, **extra):
        """What a program that runs `code` first sees: untraced, or as under gpumemtrace run."""
        d = tempfile.mkdtemp(prefix="gpumemtrace-startup-")
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "PYTHONSTARTUP") and not k.startswith("GPUMEMTRACE_")}
        set_preload(env, recorder=traced)
        env.update(GPUMEMTRACE_OUTPUT=d + "/", GPUMEMTRACE_QUIET="1", FAKE_TORCH_CUDART=SIM)
        paths = ([TOOLS] if traced else []) + [FAKE]
        env["PYTHONPATH"] = os.pathsep.join(paths)
        env.update(extra)
        proc = subprocess.run([sys.executable, "-c", code + "\n" + SEEN], capture_output=True, text=True,
                              env=env, timeout=60, cwd=d)
        self.assertEqual((proc.returncode, proc.stderr), (0, ""))
        return json.loads(proc.stdout)

    def test_a_program_without_torch_imports_nothing_more(self):
        plain, traced = self.seen(traced=False), self.seen()
        self.assertEqual(sorted(set(traced["modules"]) - set(plain["modules"]) - {"sitecustomize"}), [])
        self.assertEqual(traced["first"], plain["first"])
        self.assertEqual(traced["gc_callbacks"], plain["gc_callbacks"])
        # The one finder: behind sys.meta_path[0], before the path finder.
        self.assertEqual(len(traced["meta_path"]), len(plain["meta_path"]) + 1)
        self.assertEqual(traced["meta_path"][traced["meta_path"].index("_TorchWatch") + 1], "type")

    def test_no_finder_once_torch_is_imported_and_the_hook_is_on(self):
        seen = self.seen("import torch")
        self.assertNotIn("_TorchWatch", seen["meta_path"])
        self.assertTrue(seen["hook"])

    def test_looking_torch_up_first_still_hooks_its_import(self):
        # transformers and others ask importlib.util.find_spec("torch") before importing it.
        seen = self.seen("import importlib.util\nassert importlib.util.find_spec('torch')\nimport torch")
        self.assertNotIn("_TorchWatch", seen["meta_path"])
        self.assertTrue(seen["hook"])

    def test_torch_off_adds_no_finder(self):
        plain, off = self.seen(traced=False), self.seen(GPUMEMTRACE_TORCH="0")
        self.assertEqual(off["meta_path"], plain["meta_path"])
        self.assertFalse(self.seen("import torch", GPUMEMTRACE_TORCH="0")["hook"])

    def test_untraced_the_hook_stays_off(self):
        # tools/python on PYTHONPATH without the library (a shell that kept the launcher's variables).
        d = tempfile.mkdtemp(prefix="gpumemtrace-startup-")
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("GPUMEMTRACE_")}
        env["PYTHONPATH"] = os.pathsep.join([TOOLS, FAKE])
        proc = subprocess.run([sys.executable, "-c", "import torch\n" + SEEN], capture_output=True, text=True,
                              env=set_preload(env, recorder=False), timeout=60, cwd=d)
        self.assertEqual((proc.returncode, proc.stderr), (0, ""))
        self.assertFalse(json.loads(proc.stdout)["hook"])


if __name__ == "__main__":
    unittest.main()
