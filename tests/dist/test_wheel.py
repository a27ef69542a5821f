# tests/dist/test_wheel.py — the wheel: well formed, installed offline into a fresh venv, used, removed.
"""dist/gpumemtrace-V-py3-none-manylinux_2_34_x86_64.whl (packaging/wheel.py):

- its RECORD lists every member with the right sha256 and size; its entry points are the two console
  scripts and the pytest plugin; sitecustomize.py is not at the top of site-packages;
- `pip install --no-index` into a fresh venv puts `gpumemtrace` and `gpumem-report` on the venv's PATH;
  the demo runs through `python -m gpumemtrace ci` and through the console script; a pytest suite run
  with `gpumemtrace ci --fail-on-leak` fails on the test that keeps its memory, naming it, in pytest's
  own output and JUnit XML as in the report; pytest
  loads the plugin through its entry point alone (no PYTEST_PLUGINS, no PYTHONPATH); a suite with
  `filterwarnings = error` run under `python -W error` through `gpumemtrace ci` prints no warning (no
  module of the wheel is imported before pytest marks them for assertion rewriting) and has one scope
  per test (the plugin registered once, though both its entry point and PYTEST_PLUGINS name it);
- `pip uninstall` leaves nothing of it behind.

The venv is made by Debian's python3 with --system-site-packages, for its pytest (python3-pytest);
nothing of gpumemtrace is installed there.
"""
import base64
import hashlib
import os
import shutil
import subprocess
import tempfile
import unittest
import zipfile

from dist_testlib import CUDART, DEMO, DEMO_LEAKS, SIM_DIR, VERSION, WHEEL, clean_env, run, tracefile

SUITE = """\
import ctypes, os

_kept = []


def _malloc(size):
    ctypes.CDLL(os.environ["SIM_CUDART"], mode=ctypes.RTLD_GLOBAL)
    p = ctypes.c_void_p()
    assert ctypes.CDLL(None).cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size)) == 0
    return p


def test_frees():
    ctypes.CDLL(None).cudaFree(_malloc(1 << 20))


def test_keeps():
    _kept.append(_malloc(16 << 20))
"""


def venv_python():
    for exe in ("/usr/bin/python3",):
        if os.path.exists(exe) and run([exe, "-c", "import venv, pytest, ensurepip"]).returncode == 0:
            return exe
    return None


class WheelFile(unittest.TestCase):
    def setUp(self):
        if not os.path.isfile(WHEEL):
            self.skipTest(f"{WHEEL} not built (make dist-test builds it)")
        self.whl = zipfile.ZipFile(WHEEL)
        self.addCleanup(self.whl.close)
        self.info = f"gpumemtrace-{VERSION}.dist-info"

    def test_record_matches_every_member(self):
        rows = [line.split(",") for line in self.whl.read(f"{self.info}/RECORD").decode().splitlines()]
        listed = {name: (digest, size) for name, digest, size in rows}
        self.assertEqual(set(listed), set(self.whl.namelist()))
        for name, (digest, size) in listed.items():
            if name.endswith("/RECORD"):
                self.assertEqual((digest, size), ("", ""))
                continue
            data = self.whl.read(name)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            self.assertEqual((digest, int(size)), (f"sha256={expected}", len(data)), name)

    def test_metadata_and_entry_points(self):
        wheel = self.whl.read(f"{self.info}/WHEEL").decode()
        self.assertIn("Tag: py3-none-manylinux_2_34_x86_64\n", wheel)
        self.assertIn("Root-Is-Purelib: false\n", wheel)
        entry = self.whl.read(f"{self.info}/entry_points.txt").decode()
        self.assertIn("gpumemtrace = gpumemtrace.__main__:main", entry)
        self.assertIn("gpumem-report = gpumemtrace.__main__:report_main", entry)
        self.assertIn("[pytest11]\ngpumemtrace_pytest = gpumemtrace_pytest", entry)
        names = self.whl.namelist()
        self.assertNotIn("sitecustomize.py", names)
        self.assertIn("gpumemtrace/_bundle/python/sitecustomize.py", names)
        for rel in ("bin/gpumemtrace", "bin/gpumem-report", "lib/libgpumemtrace.so"):
            member = self.whl.getinfo("gpumemtrace/_bundle/" + rel)
            self.assertTrue(member.external_attr >> 16 & 0o111 or rel.startswith("lib"), rel)
        print(f"\n  {os.path.basename(WHEEL)}: {os.path.getsize(WHEEL) / 1e6:.1f} MB")


class WheelInVenv(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.isfile(WHEEL):
            raise unittest.SkipTest(f"{WHEEL} not built (make dist-test builds it)")
        for path in (DEMO, CUDART):
            if not os.path.isfile(path):
                raise unittest.SkipTest(f"{path} not built")
        python = venv_python()
        if not python:
            raise unittest.SkipTest("needs Debian's python3 with venv and pytest (make deps: python3-pytest)")
        cls.tmp = tempfile.mkdtemp(prefix="gpumem-wheel-")
        cls.venv = os.path.join(cls.tmp, "venv")
        subprocess.run([python, "-m", "venv", "--system-site-packages", cls.venv], check=True)
        cls.bin = os.path.join(cls.venv, "bin")
        p = run([os.path.join(cls.bin, "python"), "-m", "pip", "install", "--no-index", "--no-deps", WHEEL])
        if p.returncode != 0:
            raise AssertionError(f"pip install failed:\n{p.stdout}\n{p.stderr}")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def env(self, **extra):
        return clean_env(PATH=self.bin + ":" + os.environ.get("PATH", "/usr/bin:/bin"), **extra)

    def work(self):
        d = tempfile.mkdtemp(dir=self.tmp)
        return d

    def test_console_scripts_on_path(self):
        for name, expected in (("gpumemtrace", f"gpumemtrace {VERSION}"), ("gpumem-report", VERSION)):
            self.assertEqual(shutil.which(name, path=self.bin), os.path.join(self.bin, name))
            p = run([name, "--version"], env=self.env())
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn(expected, p.stdout)

    def check_demo(self, p):
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)  # --fail-on-leak: the planted leak
        for name in DEMO_LEAKS:
            self.assertIn(name, p.stdout)

    def test_demo_through_python_m(self):
        # The demo's program finds the simulated runtime through LD_LIBRARY_PATH (docs/install.md,
        # "Without a GPU"); the tool needs none.
        p = run([os.path.join(self.bin, "python"), "-m", "gpumemtrace", "ci", "--fail-on-leak", "-o", "t", "--",
                 DEMO, "50"], env=self.env(LD_LIBRARY_PATH=SIM_DIR), cwd=self.work())
        self.check_demo(p)

    def test_demo_through_console_script(self):
        p = run(["gpumemtrace", "ci", "--fail-on-leak", "-o", "t", "--", DEMO, "20"],
                env=self.env(LD_LIBRARY_PATH=SIM_DIR), cwd=self.work())
        self.check_demo(p)

    def write_suite(self, cwd):
        with open(os.path.join(cwd, "test_suite.py"), "w") as f:
            f.write(SUITE)

    def test_pytest_gate_names_the_leaking_test(self):
        cwd = self.work()
        self.write_suite(cwd)
        p = run(["gpumemtrace", "ci", "--fail-on-leak", "-o", "t", "--", "python", "-m", "pytest", "-q",
                 "-p", "no:cacheprovider", "--junitxml=junit.xml", "test_suite.py"], env=self.env(SIM_CUDART=CUDART),
                cwd=cwd)
        out = p.stdout + p.stderr
        self.assertEqual(p.returncode, 1, out)
        self.assertIn("1 failed, 1 passed", out)  # the gate fails the test inside pytest too
        self.assertIn("FAILED test_suite.py::test_keeps", out)
        self.assertIn("test_suite.py::test_keeps leaked 16.0 MiB", out)  # and in the report after the run
        self.assertNotIn("test_suite.py::test_frees leaked", out)
        with open(os.path.join(cwd, "junit.xml")) as f:
            junit = f.read()
        self.assertRegex(junit, r'<testcase classname="test_suite" name="test_keeps"[^>]*><failure message="Test leaked '
                                r'16\.0 MiB of GPU memory')
        self.assertRegex(junit, r'<testcase classname="test_suite" name="test_frees"[^>]*/>')

    def test_pytest_plugin_through_its_entry_point(self):
        cwd = self.work()
        self.write_suite(cwd)
        site = run([os.path.join(self.bin, "python"), "-c", "import gpumemtrace, os; "
                    "print(os.path.dirname(gpumemtrace.__file__))"], env=self.env()).stdout.strip()
        lib = os.path.join(site, "_bundle", "lib", "libgpumemtrace.so")
        out = os.path.join(cwd, "t")
        os.mkdir(out)
        p = run([os.path.join(self.bin, "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_suite.py"],
                env=self.env(SIM_CUDART=CUDART, LD_PRELOAD=lib, GPUMEMTRACE_OUTPUT=out + "/", GPUMEMTRACE_QUIET="1"),
                cwd=cwd)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        (trace,) = os.listdir(out)
        events = [r for r in tracefile.read_records(os.path.join(out, trace))[0] if r["type"] == "event"]
        scopes = [(e["op"], e["label"]) for e in events if e["op"].startswith("scope_") and e["api"] == "pytest"]
        self.assertEqual(scopes, [("scope_begin", "test_suite.py::test_frees"), ("scope_end", "test_suite.py::test_frees"),
                                  ("scope_begin", "test_suite.py::test_keeps"), ("scope_end", "test_suite.py::test_keeps")])

    def test_pytest_warnings_as_errors(self):
        cwd = self.work()
        self.write_suite(cwd)
        with open(os.path.join(cwd, "pytest.ini"), "w") as f:
            f.write("[pytest]\nfilterwarnings =\n    error\n")
        p = run(["gpumemtrace", "ci", "-o", "t", "--", os.path.join(self.bin, "python"), "-W", "error", "-m", "pytest",
                 "-p", "no:cacheprovider", "test_suite.py"], env=self.env(SIM_CUDART=CUDART), cwd=cwd)
        out = p.stdout + p.stderr
        self.assertEqual(p.returncode, 0, out)
        self.assertIn("2 passed", out)
        self.assertNotIn("Warning", out)
        (trace,) = os.listdir(os.path.join(cwd, "t"))
        events = [r for r in tracefile.read_records(os.path.join(cwd, "t", trace))[0] if r["type"] == "event"]
        self.assertEqual(sum(1 for e in events if e["op"] == "scope_begin" and e["api"] == "pytest"), 2)

    def test_zz_uninstall_removes_everything(self):
        # Named to run last in the class: the other tests use the installed wheel.
        p = run([os.path.join(self.bin, "python"), "-m", "pip", "uninstall", "-y", "gpumemtrace"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        left = []
        for base, dirs, files in os.walk(self.venv):
            left.extend(os.path.join(base, n) for n in dirs + files if "gpumem" in n)
        self.assertEqual(left, [])


if __name__ == "__main__":
    unittest.main()
