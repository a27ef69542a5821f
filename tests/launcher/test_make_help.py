# tests/launcher/test_make_help.py — `make help` lists the targets as they are, variables expanded.
"""`make help` prints the `## ` comments of the Makefiles with make's variables expanded: the sanitizer
targets name their build folders (build-asan), never a literal `$(BUILD)-asan`."""
import os
import shutil
import subprocess
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@unittest.skipUnless(shutil.which("make"), "needs make")
class MakeHelp(unittest.TestCase):
    def test_targets_listed_with_variables_expanded(self):
        p = subprocess.run(["make", "-s", "--no-print-directory", "help", "BUILD=out/b"], cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("$(", p.stdout)
        self.assertIn("(out/b-asan)", p.stdout)
        self.assertIn("(out/b-tsan)", p.stdout)
        for target in ("all:", "test:", "demo:", "asan:", "help:"):
            self.assertIn("  " + target, p.stdout)


if __name__ == "__main__":
    unittest.main()
