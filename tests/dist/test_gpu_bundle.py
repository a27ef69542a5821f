# tests/dist/test_gpu_bundle.py — `make gpu-bundle`: what the device tool carries to a lent GPU.
"""make gpu-bundle writes DIST/gpu/gpumemtrace (the unpacked release bundle, runnable as it is) and
DIST/gpu/programs (the files GPU_CHECK_PROGRAMS names; none when it is empty), and says what it
weighs with the working tree against the device tool's 64 MiB (docs/install.md)."""
import os
import re
import shutil
import tempfile
import unittest

from dist_testlib import BUILD, ROOT, TARBALL, VERSION, clean_env, run


class GpuBundle(unittest.TestCase):
    def setUp(self):
        if not os.path.isfile(TARBALL):
            self.skipTest("make dist-test builds the tarball")
        self.tmp = tempfile.mkdtemp(prefix="gpumem-gpu-bundle-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def gpu_bundle(self, programs):
        # DIST elsewhere: the tarball is packed again there from the same tree; dist/gpu is left alone.
        p = run(["make", "--no-print-directory", f"BUILD={BUILD}", f"DIST={self.tmp}",
                 f"GPU_CHECK_PROGRAMS={programs}", "gpu-bundle"], cwd=ROOT, timeout=600)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return p.stdout

    def test_with_programs(self):
        program = os.path.join(BUILD, "examples", "train_loop")  # any file: the GPU checks' own are nvcc-built
        if not os.path.isfile(program):
            self.skipTest(f"{program} not built")
        out = self.gpu_bundle(program)
        gpu = os.path.join(self.tmp, "gpu")
        self.assertEqual(os.listdir(os.path.join(gpu, "programs")), ["train_loop"])
        self.assertTrue(os.access(os.path.join(gpu, "programs", "train_loop"), os.X_OK))
        p = run([os.path.join(gpu, "gpumemtrace", "bin", "gpumemtrace"), "--version"], env=clean_env())
        self.assertEqual(p.stdout.strip(), f"gpumemtrace {VERSION}")
        m = re.search(r"= ([\d.]+) MiB to carry \(limit 64 MiB\)", out)
        self.assertTrue(m, out)
        print(f"\n  {m.group(0)}")
        self.assertLess(float(m.group(1)), 64)

    def test_without_programs(self):
        self.gpu_bundle("")
        gpu = os.path.join(self.tmp, "gpu")
        self.assertEqual(os.listdir(os.path.join(gpu, "programs")), [])
        self.assertTrue(os.path.isfile(os.path.join(gpu, "gpumemtrace", "lib", "libgpumemtrace.so")))


if __name__ == "__main__":
    unittest.main()
