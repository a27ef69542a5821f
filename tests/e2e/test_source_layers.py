# tests/e2e/test_source_layers.py — the folders' include arrows point down the pipeline, never back up.
"""The pipeline is visible in the folders (README, "How it works"): util/ and trace/ at the bottom, the
recorder (interpose/) above them, the CUPTI backend (cupti/) above the recorder, whose interface it
implements (interpose/recorder/capture_backend.h), and gpumem-report (report/) beside the recorder,
sharing only trace/ and util/ with it. Each folder may include only the folders listed for it here;
a new arrow is a decision to write down in this table, not an accident."""
import os
import re
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/', re.M)

# folder -> the project folders its sources may include (itself always).
ALLOWED = {
    "util": set(),
    "trace": {"util"},
    "interpose": {"trace", "util"},
    "cupti": {"interpose", "trace", "util"},
    "report": {"trace", "util"},
}


def includes(folder):
    """(path, included folder) for every project include of the C and C++ sources under `folder`."""
    for dirpath, _, names in os.walk(os.path.join(ROOT, folder)):
        for name in names:
            if name.endswith((".h", ".cpp", ".cc", ".c", ".def")):
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for target in INCLUDE.findall(f.read()):
                        yield os.path.relpath(path, ROOT), target


class SourceLayers(unittest.TestCase):
    def test_includes_point_down(self):
        for folder, allowed in ALLOWED.items():
            with self.subTest(folder=folder):
                wrong = [f"{path} includes {target}/" for path, target in includes(folder)
                         if target != folder and target in ALLOWED and target not in allowed]
                self.assertEqual(wrong, [])

    def test_the_check_sees_an_include(self):
        # The pattern finds the includes it is meant to find (a check that sees nothing passes anything).
        self.assertIn(("interpose/hooks/driver.cpp", "interpose"), set(includes("interpose")))
        self.assertIn(("cupti/backend.cpp", "interpose"), set(includes("cupti")))


if __name__ == "__main__":
    unittest.main()
