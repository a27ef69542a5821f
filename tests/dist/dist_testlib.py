# tests/dist/dist_testlib.py — shared helpers of the release bundle's proofs (make dist-test).
"""Where `make dist` and `make wheel` put their files, the bundle unpacked once per test class, and
the traced side (the demo, the simulated CUDA runtime) from the build tree. The suite runs after
`make dist-test` built everything; run by hand without dist/, its tests skip, saying so.
"""
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("GPUMEMTRACE_BUILD", os.path.join(ROOT, "build"))
DIST = os.path.join(ROOT, "dist")
THIRD_PARTY = os.environ.get("THIRD_PARTY", os.path.join(ROOT, "build-deps"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "packaging"))
import elfcheck  # noqa: E402,F401  (packaging/elfcheck.py)
import tracefile  # noqa: E402,F401


def project_version():
    with open(os.path.join(ROOT, "interpose", "module.mk")) as f:
        return re.search(r"^GPUMEMTRACE_VERSION := (\S+)", f.read(), re.M).group(1)


VERSION = project_version()
BUNDLE_NAME = f"gpumemtrace-{VERSION}-linux-x86_64"
TARBALL = os.path.join(DIST, BUNDLE_NAME + ".tar.gz")
WHEEL = os.path.join(DIST, f"gpumemtrace-{VERSION}-py3-none-manylinux_2_34_x86_64.whl")
SIM_DIR = os.path.join(BUILD, "sim")
CUDART = os.path.join(SIM_DIR, "libcudart.so.13")
DEMO = os.path.join(BUILD, "examples", "train_loop")
# What the demo's report must name: its planted leak and accumulation (examples/train_loop.cpp).
DEMO_LEAKS = ("cache_embeddings", "compute_loss", "examples/train_loop.cpp:59")


def clean_env(**extra):
    """The environment minus everything that could point the tool at the build tree."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GPUMEMTRACE_") and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONPATH",
                                                               "PYTEST_PLUGINS")}
    env.update(extra)
    return env


def run(args, timeout=300, **kwargs):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kwargs)


class BundleTestCase(unittest.TestCase):
    """Unpacks dist/'s tarball into a fresh folder for the class: self.bundle is its top folder."""

    @classmethod
    def setUpClass(cls):
        if not os.path.isfile(TARBALL):
            raise unittest.SkipTest(f"{os.path.relpath(TARBALL, ROOT)} not built (make dist-test builds it)")
        cls.tmp = tempfile.mkdtemp(prefix="gpumem-dist-test-")
        with tarfile.open(TARBALL) as tar:
            tar.extractall(cls.tmp)
        cls.bundle = os.path.join(cls.tmp, BUNDLE_NAME)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def path(self, *parts):
        return os.path.join(self.bundle, *parts)

    def require(self, *paths):
        for p in paths:
            if not os.path.exists(p):
                self.skipTest(f"{os.path.relpath(p, ROOT)} not built (make dist-test builds it)")
