# tests/e2e/test_secure_execution.py — a setgid program ignores every GPUMEMTRACE_* variable.
"""In secure-execution mode (AT_SECURE: a setuid or setgid program), the environment is whoever started
the program's, not the program's: the recorder ignores every GPUMEMTRACE_* variable, as glibc ignores
LD_LIBRARY_PATH and LD_PRELOAD's paths (issue 27, item 5; docs/security.md). Before, the trace was
created where GPUMEMTRACE_OUTPUT said, with the program's privileges.

The program is `scenarios depth` linked to the recorder itself (build/tests/programs/secure_scenarios:
in secure-execution mode the loader ignores LD_PRELOAD's paths), copied setgid to the group daemon and
run as nobody. Making such a file and changing user needs root: the tests skip without it."""
import grp
import os
import pwd
import shutil
import subprocess
import tempfile
import unittest

from recorder_testlib import PROGRAMS, Trace
from testenv import sanitizer_runtime

PROGRAM = os.path.join(PROGRAMS, "secure_scenarios")


def world_writable_dir():
    d = tempfile.mkdtemp(prefix="gpumemtrace-secure-")
    os.chmod(d, 0o777)
    return d


@unittest.skipUnless(os.geteuid() == 0, "making a setgid program and running it as another user needs root")
@unittest.skipIf(sanitizer_runtime(), "the sanitizer's runtime is preloaded by path, which secure-execution mode ignores")
class SetgidProgram(unittest.TestCase):
    def run_as_nobody(self, setgid):
        top = world_writable_dir()
        exe = os.path.join(top, "scenarios")
        shutil.copy(PROGRAM, exe)
        os.chown(exe, 0, grp.getgrnam("daemon").gr_gid)
        os.chmod(exe, 0o2755 if setgid else 0o755)
        cwd, named = world_writable_dir(), world_writable_dir()
        nobody = pwd.getpwnam("nobody")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GPUMEMTRACE_OUTPUT": named + "/",
               "GPUMEMTRACE_STACK_DEPTH": "3", "GPUMEMTRACE_DISABLE": "0"}

        def become_nobody():
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)

        proc = subprocess.run([exe, "depth"], cwd=cwd, env=env, preexec_fn=become_nobody, capture_output=True,
                              text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return cwd, named, proc

    def test_setgid_program_ignores_every_variable(self):
        cwd, named, proc = self.run_as_nobody(setgid=True)
        self.assertEqual(os.listdir(named), [], "GPUMEMTRACE_OUTPUT must not be followed")
        (name,) = os.listdir(cwd)  # the default name, in the working directory
        self.assertTrue(name.startswith("gpumemtrace.scenarios.") and name.endswith(".jsonl.zst"), name)
        t = Trace(os.path.join(cwd, name))
        self.assertEqual(t.header["stack_depth"], 64)  # GPUMEMTRACE_STACK_DEPTH=3 ignored too
        self.assertEqual([e["size"] for e in t.allocs()], [5005])
        self.assertEqual([l for l in proc.stderr.splitlines() if l.startswith("gpumemtrace:")],
                         ["gpumemtrace: secure-execution mode (a setuid or setgid program): every GPUMEMTRACE_ "
                          "variable is ignored"])

    def test_the_same_program_not_setgid_follows_them(self):
        cwd, named, proc = self.run_as_nobody(setgid=False)
        self.assertEqual(os.listdir(cwd), [])
        (name,) = os.listdir(named)
        self.assertEqual(Trace(os.path.join(named, name)).header["stack_depth"], 3)


if __name__ == "__main__":
    unittest.main()
