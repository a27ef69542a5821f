# tests/launcher/launcher_testlib.py — shared helpers for the launcher tests.
"""Shared helpers for the launcher tests (build/gpumemtrace)."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("GPUMEMTRACE_BUILD", os.path.join(ROOT, "build"))
LAUNCHER = os.path.join(BUILD, "gpumemtrace")
LIB = os.path.join(BUILD, "libgpumemtrace.so")
REPORT = os.path.join(BUILD, "gpumem-report")
CUDART = os.path.join(BUILD, "sim", "libcudart.so.13")
PROG = os.path.join(HERE, "launcher_prog.py")
PYTHON = os.path.realpath(sys.executable)  # the interpreter itself, not a pyenv shim script
sys.path.insert(0, os.path.join(ROOT, "tests"))
from testenv import (SIGNALS_UNDER_TSAN, recorder_preload, sanitizer_runtime,  # noqa: E402,F401
                     signal_handlers_wait_for_waitpid)
sys.path.insert(0, os.path.join(ROOT, "packaging"))
from elfcheck import is_elf  # noqa: E402,F401  (packaging/elfcheck.py: the bundle's ELF checks)


class LauncherTestCase(unittest.TestCase):
    def setUp(self):
        if not os.access(LAUNCHER, os.X_OK):
            self.skipTest(f"{LAUNCHER} not built")
        self.tmp = tempfile.mkdtemp(prefix="gpumem-launcher-test-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def launch(self, args, env=None, cwd=None, timeout=120, **run_args):
        e = dict(os.environ)
        e.pop("LD_PRELOAD", None)
        if sanitizer_runtime():  # the launcher adds the recorder in front of it
            e["LD_PRELOAD"] = sanitizer_runtime()
        for k in ("GPUMEMTRACE_LIBRARY", "GPUMEMTRACE_REPORT", "GPUMEMTRACE_OUTPUT"):
            e.pop(k, None)
        if env:
            e.update(env)
        if "stdout" not in run_args:
            run_args["stdout"] = subprocess.PIPE
        return subprocess.run([LAUNCHER, *args], env=e, cwd=cwd or self.tmp, stderr=subprocess.PIPE, text=True,
                              timeout=timeout, **run_args)
