# tests/launcher/test_launcher_layouts.py — the launcher finds its recorder and Python helpers in every layout.
"""build/gpumemtrace copied into the layouts it ships in (docs/install.md): the release bundle and the
wheel (bin/, lib/, python/), `make install` (bin/, lib/, share/gpumemtrace/python) and the build tree
(the library beside it, tools/python). In each, run directly and through a symbolic link from
elsewhere (the launcher reads /proc/self/exe), the command gets the right LD_PRELOAD and PYTHONPATH.
Also `python -m gpumemtrace` (tools/python/gpumemtrace/__main__.py) from each layout's python/."""
import os
import shutil
import subprocess

from launcher_testlib import LAUNCHER, LIB, PYTHON, REPORT, ROOT, LauncherTestCase, is_elf, sanitizer_runtime

PROBE = "import os; print(os.environ['LD_PRELOAD']); print(os.environ.get('PYTHONPATH', '-'))"
TOOLS_PYTHON = os.path.join(ROOT, "tools", "python")


class LauncherLayouts(LauncherTestCase):
    def setUp(self):
        super().setUp()
        for path in (LIB, REPORT):
            if not is_elf(path):
                self.skipTest(f"{path} not built")

    def lay_out(self, lib_dir, python_dir):
        """A tree under self.tmp/tree: bin/ with the launcher and analyzer, the library in lib_dir,
        tools/python copied to python_dir (both relative to the tree). Returns the tree."""
        tree = os.path.join(self.tmp, "tree")
        os.makedirs(os.path.join(tree, "bin"))
        shutil.copy(LAUNCHER, os.path.join(tree, "bin"))
        shutil.copy(REPORT, os.path.join(tree, "bin"))
        os.makedirs(os.path.join(tree, lib_dir), exist_ok=True)
        shutil.copy(LIB, os.path.join(tree, lib_dir))
        shutil.copytree(TOOLS_PYTHON, os.path.join(tree, python_dir),
                        ignore=shutil.ignore_patterns("__pycache__"))
        return tree

    def probe(self, launcher):
        env = {k: v for k, v in os.environ.items()
               if k not in ("LD_PRELOAD", "PYTHONPATH") and not k.startswith("GPUMEMTRACE_")}
        if sanitizer_runtime():  # the launcher puts the recorder in front of it
            env["LD_PRELOAD"] = sanitizer_runtime()
        p = subprocess.run([launcher, "run", "-q", "-o", "t", "--", PYTHON, "-c", PROBE], cwd=self.tmp,
                           capture_output=True, text=True, timeout=120, env=env)
        lines = p.stdout.splitlines()
        self.assertGreaterEqual(len(lines), 2, p.stdout + p.stderr)
        return lines[0].split(":")[0], lines[1].split(":")[0]

    def check(self, tree, lib_rel, python_rel):
        expected = (os.path.join(tree, lib_rel, "libgpumemtrace.so"), os.path.join(tree, python_rel))
        self.assertEqual(self.probe(os.path.join(tree, "bin", "gpumemtrace")), expected)
        link = os.path.join(self.tmp, "elsewhere", "gpumemtrace")
        os.makedirs(os.path.dirname(link))
        os.symlink(os.path.join(tree, "bin", "gpumemtrace"), link)
        self.assertEqual(self.probe(link), expected)

    def test_bundle_layout(self):
        self.check(self.lay_out("lib", "python"), "lib", "python")

    def test_install_layout(self):
        self.check(self.lay_out("lib", "share/gpumemtrace/python"), "lib", "share/gpumemtrace/python")

    def test_build_tree_layout(self):
        self.check(self.lay_out("bin", "tools/python"), "bin", "tools/python")

    def test_missing_library_named_with_where_it_was_looked_for(self):
        tree = self.lay_out("lib", "python")
        os.remove(os.path.join(tree, "lib", "libgpumemtrace.so"))
        p = subprocess.run([os.path.join(tree, "bin", "gpumemtrace"), "run", "--", "true"], cwd=self.tmp,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 2)
        self.assertIn(f"the recorder library {tree}/bin/libgpumemtrace.so does not exist", p.stderr)

    def test_python_m_gpumemtrace_finds_the_launcher(self):
        for python_rel in ("python", "share/gpumemtrace/python"):
            with self.subTest(python_rel):
                tree = self.lay_out("lib", python_rel)
                p = subprocess.run([PYTHON, "-m", "gpumemtrace", "--version"], capture_output=True, text=True,
                                   cwd=self.tmp, timeout=60,
                                   env=dict(os.environ, PYTHONPATH=os.path.join(tree, python_rel)))
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertRegex(p.stdout, r"^gpumemtrace \d")
                shutil.rmtree(tree)

    def test_python_m_gpumemtrace_without_a_launcher(self):
        tree = os.path.join(self.tmp, "alone")
        shutil.copytree(TOOLS_PYTHON, tree, ignore=shutil.ignore_patterns("__pycache__"))
        p = subprocess.run([PYTHON, "-m", "gpumemtrace", "run", "--", "true"], capture_output=True, text=True,
                           cwd=self.tmp, timeout=60, env=dict(os.environ, PYTHONPATH=tree))
        self.assertEqual(p.returncode, 2)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        self.assertIn("the native gpumemtrace was not found", p.stderr)
