# tests/dist/test_readme_install.py — the README's install lines, run as written.
"""README.md's "Install" section: its shell blocks are run as they are, in a fresh folder holding
only the release tarball (and a fresh venv for the wheel's line), with a `train.py` of our own that
allocates on the simulated CUDA runtime and keeps one buffer. The last block, `gpumemtrace run --
python train.py`, must trace it and report that buffer. The version in the lines is the project's."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from dist_testlib import BUILD, CUDART, ROOT, TARBALL, VERSION, WHEEL, clean_env, run
from test_wheel import venv_python

TRAIN_PY = """\
import ctypes, os
ctypes.CDLL(os.environ["SIM_CUDART"], mode=ctypes.RTLD_GLOBAL)
p = ctypes.c_void_p()
assert ctypes.CDLL(None).cudaMalloc(ctypes.byref(p), ctypes.c_size_t(12 << 20)) == 0
print("trained")
"""


def install_blocks():
    """The ```sh blocks of README.md's "## Install" section, in order."""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    section = re.search(r"^## Install\n(.*?)^## ", text, re.S | re.M).group(1)
    return re.findall(r"```sh\n(.*?)```", section, re.S)


class ReadmeInstall(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gpumem-readme-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        with open(os.path.join(self.tmp, "train.py"), "w") as f:
            f.write(TRAIN_PY)
        self.blocks = install_blocks()
        self.tarball_block, self.wheel_block, self.run_block = self.blocks[:3]

    def bash(self, script, env):
        return run(["bash", "-euo", "pipefail", "-c", script], cwd=self.tmp, env=env)

    def check_run(self, p):
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("trained", p.stdout)
        self.assertIn("leaks: 12.0 MiB in 1 allocation", p.stdout)

    def test_the_lines_name_this_version(self):
        for block in (self.tarball_block, self.wheel_block):
            self.assertIn(VERSION, block)
        self.assertEqual(self.run_block.split("#")[0].strip(), "gpumemtrace run -- python train.py")

    def test_tarball_lines(self):
        if not os.path.isfile(TARBALL):
            self.skipTest("make dist-test builds the tarball")
        shutil.copy(TARBALL, self.tmp)
        # The user's `python` (Debian itself names it python3 only), and nothing of ours on PATH.
        user_bin = os.path.join(self.tmp, "user-bin")
        os.mkdir(user_bin)
        os.symlink(sys.executable, os.path.join(user_bin, "python"))
        # Both blocks in one shell: the first's `export PATH` is what the second relies on.
        p = self.bash(self.tarball_block + "\n" + self.run_block,
                      clean_env(SIM_CUDART=CUDART, PATH=user_bin + ":/usr/bin:/bin"))
        self.check_run(p)

    def test_wheel_lines(self):
        if not os.path.isfile(WHEEL):
            self.skipTest("make dist-test builds the wheel")
        python = venv_python()
        if not python:
            self.skipTest("needs Debian's python3 with venv")
        shutil.copy(WHEEL, self.tmp)
        venv = os.path.join(self.tmp, "venv")
        subprocess.run([python, "-m", "venv", venv], check=True)
        # As in an activated venv: its bin/ first on PATH, where pip and python are.
        env = clean_env(SIM_CUDART=CUDART, PATH=os.path.join(venv, "bin") + ":/usr/bin:/bin", VIRTUAL_ENV=venv)
        p = self.bash(self.wheel_block, env)  # a wheel with no dependencies: pip asks no index
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.check_run(self.bash(self.run_block, env))

    def test_without_a_gpu_line(self):
        # The source tree's own line, after make: run where build/ is (a link to it here, so that the
        # traces land in the test's folder).
        (block,) = [b for b in self.blocks if "build/sim" in b]
        os.symlink(BUILD, os.path.join(self.tmp, "build"))
        p = run(["bash", "-euo", "pipefail", "-c", block], cwd=self.tmp, env=clean_env(PATH="/usr/bin:/bin"))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("leaks: 74.0 MiB in 51 allocations", p.stdout)


if __name__ == "__main__":
    unittest.main()
