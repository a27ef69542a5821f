#!/usr/bin/env python3
# tests/transparency/transparency.py — real test suites nobody here wrote, run plain and traced: any
# test whose outcome differs is a way the recorder changed the program (issue 27, `make test-transparency`).
"""Runs test suites written by others, once plain and once under `gpumemtrace run` (as a user runs a
program: the launcher's notes, the preloaded recorder, the Python start-up hook and the pytest plugin),
and compares their outcomes test by test. Any difference fails. In both runs every Python process
makes one CUDA call on the simulated runtime at start-up (cuda_at_start/usercustomize.py), so that
traced, each has a started recorder, as a real CUDA program does.

Suites:
  cpython   CPython's own tests of what a preloaded library can disturb: threads, signals, subprocesses,
            os, fork, multiprocessing, mmap, EINTR (`python3 -m test`; Debian: libpython3.11-testsuite).
  pyflakes  pyflakes' pytest suite as Debian installs it (python3-pyflakes ships pyflakes/test), run from
            a copy laid out as its source tree; its integration tests run pyflakes in child processes
            and compare their stderr.

A test that differs is run again alone, plain and traced, RECHECKS times each: a difference that
comes back every time is counted; one whose plain runs disagree among themselves is flaky on this
machine (load, timing), named, and not counted. Prints each difference with the traced run's message,
then one closing line `transparency: N passed, N failed` (a test with the same outcome both ways
passes). Exit status 0 when nothing differs, 1 otherwise, 2 when a suite could not run at all.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# CPython's test modules (Lib/test) that exercise what the recorder interposes on: threads, signal
# handlers, fork/exec/spawn, descriptors, mmap, interrupted system calls.
CPYTHON_MODULES = ["test_threading", "test_signal", "test_subprocess", "test_os", "test_fork1",
                   "test_multiprocessing_fork", "test_mmap", "test_eintr"]
RECHECKS = 2
CUDA_AT_START = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cuda_at_start")
PASSED, SKIPPED, FAILED, ERROR, MISSING = "passed", "skipped", "failed", "error", "not run"


def python_with_tests(candidates):
    """The first interpreter of `candidates` that has CPython's test package, else None."""
    for python in candidates:
        path = shutil.which(python)
        if path and subprocess.run([path, "-c", "import test.support, test.libregrtest"],
                                   capture_output=True).returncode == 0:
            return path
    return None


def outcomes_from_junit(path):
    """{test id: (outcome, message)} from a JUnit XML file (CPython's --junit-xml, pytest's --junitxml)."""
    out = {}
    if not os.path.exists(path):
        return out
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        name = case.get("name", "")
        cls = case.get("classname")
        test = f"{cls}::{name}" if cls else name
        outcome, message = PASSED, ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": FAILED, "error": ERROR, "skipped": SKIPPED}[child.tag]
                message = (child.get("message") or child.text or "").strip()
                break
        out[test] = (outcome, message)
    return out


def compare(plain, traced):
    """(same, differences): tests with the same outcome, and [(test, plain outcome, traced outcome,
    traced message)] for the others, a test run one way only included."""
    same, differences = 0, []
    for test in sorted(set(plain) | set(traced)):
        p = plain.get(test, (MISSING, ""))
        t = traced.get(test, (MISSING, ""))
        if p[0] == t[0]:
            same += 1
        else:
            differences.append((test, p[0], t[0], t[1] or p[1]))
    return same, differences


class Suite:
    """One suite: how to run it (all of it, or some of its tests) and read its outcomes."""

    def __init__(self, name, python):
        self.name = name
        self.python = python
        self.pythonpath = None  # a folder the suite's own modules are imported from

    def argv(self, junit, tests=None):
        raise NotImplementedError


class CPythonSuite(Suite):
    def argv(self, junit, tests=None):
        # -j2: each test module in a child process, two at a time (CI's two cores); a module that hangs
        # is stopped by --timeout and reported, not waited for.
        argv = [self.python, "-m", "test", "--timeout", "900", "--junit-xml", junit]
        if tests:
            modules = sorted({t.split(".")[1] for t in tests})
            for t in tests:
                argv += ["-m", t]
            return argv + modules
        return argv + ["-j2"] + CPYTHON_MODULES


class PyflakesSuite(Suite):
    """pyflakes' tests, run from a copy of the installed package laid out as its source tree: its
    integration tests run `<package>/../bin/pyflakes` in a child process (and compare its stderr),
    a script Debian does not install beside the package."""

    def __init__(self, name, python, work):
        super().__init__(name, python)
        found = subprocess.run([python, "-c", "import os, pyflakes; print(os.path.dirname(pyflakes.__file__))"],
                               capture_output=True, text=True)
        if found.returncode != 0:
            raise RuntimeError("pyflakes is not installed (Debian: python3-pyflakes; make deps installs it)")
        self.source = os.path.join(work, "pyflakes-source")
        shutil.copytree(found.stdout.strip(), os.path.join(self.source, "pyflakes"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        os.makedirs(os.path.join(self.source, "bin"))
        with open(os.path.join(self.source, "bin", "pyflakes"), "w") as script:  # as in pyflakes' repository
            script.write("#!/usr/bin/env python\nfrom pyflakes.scripts.pyflakes import main\nmain()\n")
        self.pythonpath = self.source

    def argv(self, junit, tests=None):
        argv = [self.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "junit_family=xunit1",
                "--rootdir", self.source, "--junitxml", junit]
        if not tests:
            return argv + [os.path.join(self.source, "pyflakes", "test")]
        # classname "pyflakes.test.test_api.CheckTests", name "test_x" -> a node of the copy.
        for t in tests:
            cls, name = t.split("::")
            module, _, klass = cls.rpartition(".")
            argv.append(os.path.join(self.source, *module.split(".")) + f".py::{klass}::{name}")
        return argv


def default_signals():
    """SIGINT and SIGQUIT with their default action, as in a terminal: started in the background (CI,
    `make ... &`), they are ignored, and Python then never raises KeyboardInterrupt, which seven
    CPython tests expect."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


class Runner:
    def __init__(self, build, work, verbose):
        build = os.path.abspath(build)  # the suites run in folders of their own
        self.launcher = os.path.join(build, "gpumemtrace")
        self.cudart = os.path.join(build, "sim", "libcudart.so.13")
        self.work = work
        self.verbose = verbose
        self.runs = 0

    def run(self, suite, traced, tests=None):
        """Runs `suite` (or only `tests` of it), plain or traced; returns its outcomes."""
        self.runs += 1
        where = os.path.join(self.work, f"{suite.name}-{'traced' if traced else 'plain'}-{self.runs}")
        os.makedirs(where)
        junit = os.path.join(where, "junit.xml")
        argv = suite.argv(junit, tests)
        if traced:
            argv = [self.launcher, "run", "-o", os.path.join(where, "traces"), "--report",
                    os.path.join(where, "report.txt"), "--", *argv]
        # The environment of a user's shell: nothing of ours set beforehand. Every Python process makes
        # one CUDA call at start-up, in both runs (cuda_at_start/usercustomize.py): traced, its recorder
        # is started, as in a real CUDA program.
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEMTRACE_") and k != "LD_PRELOAD"}
        env["TMPDIR"] = where
        env["PYTHONPATH"] = os.pathsep.join(p for p in (CUDA_AT_START, suite.pythonpath, env.get("PYTHONPATH")) if p)
        env["TRANSPARENCY_CUDART"] = self.cudart
        start = time.time()
        with open(os.path.join(where, "output.txt"), "wb") as log:
            proc = subprocess.run(argv, cwd=where, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                  stderr=subprocess.STDOUT, preexec_fn=default_signals)
        outcomes = outcomes_from_junit(junit)
        if self.verbose or not outcomes:
            print(f"  {suite.name} {'traced' if traced else 'plain'}{' (' + str(len(tests)) + ' tests)' if tests else ''}: "
                  f"exit {proc.returncode}, {len(outcomes)} tests, {time.time() - start:.0f} s ({where}/output.txt)",
                  flush=True)
        return outcomes

    def differences(self, suite):
        """The tests whose outcome differs plain and traced, each confirmed by RECHECKS more runs alone;
        returns (same, confirmed, flaky, ran)."""
        plain = self.run(suite, traced=False)
        traced = self.run(suite, traced=True)
        if not plain:
            return None
        same, differences = compare(plain, traced)
        if not differences:
            return same, [], [], len(plain)
        tests = [d[0] for d in differences]
        plains, traceds = [plain], [traced]
        for _ in range(RECHECKS):
            plains.append(self.run(suite, traced=False, tests=tests))
            traceds.append(self.run(suite, traced=True, tests=tests))
        confirmed, flaky = [], []
        for test, _, _, _ in differences:
            p = {run.get(test, (MISSING, ""))[0] for run in plains}
            t = {run.get(test, (MISSING, ""))[0] for run in traceds}
            message = next((run[test][1] for run in traceds if test in run and run[test][1]), "")
            if len(p) > 1:
                flaky.append((test, sorted(p), sorted(t)))
            elif p != t:
                confirmed.append((test, sorted(p), sorted(t), message))
            else:
                same += 1  # a difference of the first run that no recheck repeats: counted as the same
        return same, confirmed, flaky, len(plain)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--python", action="append",
                        help="interpreter to run the suites with (default: /usr/bin/python3, then python3)")
    parser.add_argument("--suite", action="append", choices=["cpython", "pyflakes"])
    parser.add_argument("--keep", help="keep the runs' output in this folder")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    python = python_with_tests(args.python or ["/usr/bin/python3", "python3"])
    work = args.keep or tempfile.mkdtemp(prefix="gpumemtrace-transparency-")
    os.makedirs(work, exist_ok=True)
    suites = []
    for name in args.suite or ["cpython", "pyflakes"]:
        if name == "cpython":
            if not python:
                print("transparency: no python3 with CPython's test package (Debian: libpython3.11-testsuite; "
                      "make deps installs it)", flush=True)
                return 2
            suites.append(CPythonSuite(name, python))
        else:
            try:
                suites.append(PyflakesSuite(name, python or shutil.which("python3"), work))
            except RuntimeError as error:
                print(f"transparency: {error}", flush=True)
                return 2
    runner = Runner(args.build, work, args.verbose)
    passed = failed = 0
    unusable = False
    for suite in suites:
        start = time.time()
        result = runner.differences(suite)
        if result is None:
            print(f"transparency: {suite.name}: the plain run reported no test", flush=True)
            unusable = True
            continue
        same, confirmed, flaky, ran = result
        passed += same
        failed += len(confirmed)
        print(f"{suite.name}: {ran} tests, {same} the same plain and traced, {len(confirmed)} different, "
              f"{len(flaky)} flaky ({time.time() - start:.0f} s)", flush=True)
        for test, p, t, message in confirmed:
            first = message.splitlines()[0][:300] if message else ""
            print(f"  DIFFERENT {test}: plain {'/'.join(p)}, traced {'/'.join(t)}{': ' + first if first else ''}",
                  flush=True)
        for test, p, t in flaky:
            print(f"  flaky {test}: plain {'/'.join(p)}, traced {'/'.join(t)} (not counted)", flush=True)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    print(f"transparency: {passed} passed, {failed} failed", flush=True)
    return 2 if unusable else (1 if failed else 0)


if __name__ == "__main__":
    sys.exit(main())
