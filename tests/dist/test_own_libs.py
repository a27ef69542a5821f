# tests/dist/test_own_libs.py — a program with its own libzstd and libunwind, under the bundle's recorder.
"""own_libs (tests/dist/programs) links a libzstd.so.1 of its own and dlopens a plugin linked to a
libunwind.so.8 of its own; both are fakes of another version that cannot compress or unwind. Under
the bundled recorder, whose zstd and libunwind are linked in with local symbols, each side keeps its
own: the program sees its versions (zstd 99999, unwind 4242), and the recorder still writes a
compressed trace whose stacks reach the program's function (the report names own_libs_allocate).

The same run under a recorder that shares these libraries with the program fails it: with the build
tree's library, which needs libzstd.so.1 and libunwind.so.8 by soname, the plugin is handed the
recorder's libunwind (test_build_tree_library_would_share_them: the test can tell)."""
import os
import shutil
import tempfile

from dist_testlib import BUILD, BundleTestCase, clean_env, run

OWN = os.path.join(BUILD, "tests", "dist")
PROGRAM = os.path.join(OWN, "own_libs")
PLUGIN = os.path.join(OWN, "libunwind_plugin.so")


class OwnLibraries(BundleTestCase):
    def setUp(self):
        self.require(PROGRAM, PLUGIN)
        self.out = tempfile.mkdtemp(prefix="gpumem-own-libs-")
        self.addCleanup(shutil.rmtree, self.out, True)

    def launch(self, *extra_env):
        return run([self.path("bin", "gpumemtrace"), "run", "-o", os.path.join(self.out, "t"), "--", PROGRAM, PLUGIN],
                   env=clean_env(**dict(extra_env)), cwd=self.out)

    def test_each_keeps_its_own(self):
        p = self.launch()
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual([line for line in p.stdout.splitlines() if line.startswith(("zstd", "unwind"))],
                         ["zstd 99999", "unwind 4242", "zstd 99999"])
        # The report (the bundle's analyzer, on the bundle's zstd-compressed trace): the leak, with the
        # program's own frame from the recorder's unwinder and symbolizer.
        self.assertIn("leaks: 3.0 MiB in 1 allocation", p.stdout)
        self.assertIn("own_libs_allocate (tests/dist/programs/own_libs.c:", p.stdout)
        (trace,) = os.listdir(os.path.join(self.out, "t"))
        self.assertTrue(trace.endswith(".jsonl.zst"), trace)

    def test_build_tree_library_would_share_them(self):
        lib = os.path.join(BUILD, "libgpumemtrace.so")
        self.require(lib)
        p = self.launch(("GPUMEMTRACE_LIBRARY", lib))
        # The build tree's library needs libunwind.so.8 by soname: the plugin gets that copy instead of
        # its own (and, handed a null cursor the fake would refuse, dies of it), so the run that
        # test_each_keeps_its_own expects does not happen.
        self.assertNotEqual((p.returncode, [line for line in p.stdout.splitlines() if line.startswith("unwind")]),
                            (0, ["unwind 4242"]), p.stdout + p.stderr)
