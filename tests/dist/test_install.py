# tests/dist/test_install.py — `make install PREFIX=...` and `make uninstall`, as a user without root.
"""`make install PREFIX=DIR` puts the build tree's launcher, analyzer, recorder, header and Python
helpers under DIR; the installed launcher finds the recorder in DIR/lib and the Python startup
folder in DIR/share/gpumemtrace/python, and traces the demo; `make uninstall` removes every file.
PREFIX=~/... is the home directory even where the shell leaves the ~ alone."""
import os
import shutil
import tempfile
import unittest

from dist_testlib import BUILD, DEMO, DEMO_LEAKS, ROOT, SIM_DIR, clean_env, run

INSTALLED = ("bin/gpumemtrace", "bin/gpumem-report", "lib/libgpumemtrace.so", "include/gpumemtrace.h",
             "share/gpumemtrace/python/sitecustomize.py", "share/gpumemtrace/python/gpumemtrace/__init__.py",
             "share/gpumemtrace/python/gpumemtrace_pytest.py", "share/doc/gpumemtrace/README.md")


class MakeInstall(unittest.TestCase):
    def setUp(self):
        for path in ("gpumemtrace", "gpumem-report", "libgpumemtrace.so"):
            if not os.path.isfile(os.path.join(BUILD, path)):
                self.skipTest(f"{path} not built")
        self.tmp = tempfile.mkdtemp(prefix="gpumem-install-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def make(self, *args, env=None):
        p = run(["make", "--no-print-directory", "-s", f"BUILD={BUILD}", *args], cwd=ROOT, env=env, timeout=600)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return p

    def installed_files(self, prefix):
        return sorted(os.path.relpath(os.path.join(b, f), prefix) for b, _, fs in os.walk(prefix) for f in fs)

    def test_install_run_uninstall(self):
        prefix = os.path.join(self.tmp, "prefix")
        self.make("install", f"PREFIX={prefix}")
        files = self.installed_files(prefix)
        for rel in INSTALLED:
            self.assertIn(rel, files)
        self.assertFalse([f for f in files if "__pycache__" in f], files)
        # The installed launcher, moved nowhere and given nothing: its own recorder and helpers.
        p = run([os.path.join(prefix, "bin", "gpumemtrace"), "ci", "--fail-on-leak", "-o", "t", "--", DEMO, "10"],
                env=clean_env(LD_LIBRARY_PATH=SIM_DIR), cwd=self.tmp)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        for name in DEMO_LEAKS:
            self.assertIn(name, p.stdout)
        p = run([os.path.join(prefix, "bin", "gpumemtrace"), "run", "-q", "-o", "t2", "--", "python3", "-c",
                 "import os; print(os.environ['PYTHONPATH']); print(os.environ['LD_PRELOAD'])"],
                env=clean_env(), cwd=self.tmp)
        self.assertEqual(p.stdout.splitlines()[:2], [os.path.join(prefix, "share", "gpumemtrace", "python"),
                                                     os.path.join(prefix, "lib", "libgpumemtrace.so")], p.stderr)
        self.make("uninstall", f"PREFIX={prefix}")
        self.assertEqual(self.installed_files(prefix), [])

    def test_tilde_prefix_is_home(self):
        home = os.path.join(self.tmp, "home")
        os.mkdir(home)
        self.make("install", "PREFIX=~/.local", env=dict(os.environ, HOME=home))
        self.assertTrue(os.access(os.path.join(home, ".local", "bin", "gpumemtrace"), os.X_OK))
        self.assertFalse(os.path.exists(os.path.join(ROOT, "~")))


if __name__ == "__main__":
    unittest.main()
