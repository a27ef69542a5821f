# tests/launcher/test_top.py — `gpumemtrace top`: the live view, in tmux and in batch mode.
"""`gpumemtrace top PID | TRACE` on a program that grows (launcher_prog.py grow) under the real
recorder and the simulated runtime: in a tmux pane (send-keys, capture-pane), as a person sees it,
and with --batch; and its one-line errors on bad input."""
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from launcher_testlib import (CUDART, LAUNCHER, LIB, PROG, PYTHON, LauncherTestCase, is_elf,  # noqa: E402
                              sanitizer_runtime)

TMUX = shutil.which("tmux")
# A row of the sites table whose site is grow_cache() and whose GREW column is positive.
GROWING_ROW = re.compile(r"^\s+[\d.]+ [KMG]?i?B\s+\d+\s+\+[\d.]+ [KMG]?i?B\s.*grow_cache", re.M)
REFRESH = re.compile(r"^refresh (\d+) ", re.M)


class Top(LauncherTestCase):
    def setUp(self):
        super().setUp()
        for path in (LIB, CUDART):
            if not is_elf(path):
                self.skipTest(f"{path} not built")

    def start_growing(self):
        """`gpumemtrace run` on a program that allocates 1 MiB more every 0.1 s; the launcher's process,
        once the program has begun."""
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        if sanitizer_runtime():  # the launcher adds the recorder in front of it (launcher_testlib.launch)
            env["LD_PRELOAD"] = sanitizer_runtime()
        proc = subprocess.Popen([LAUNCHER, "run", "-q", "-o", "t", "--", PYTHON, PROG, "grow", CUDART], cwd=self.tmp,
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                start_new_session=True)

        def stop():
            # The whole group: under ThreadSanitizer the launcher does not pass SIGTERM on
            # (testenv.SIGNALS_UNDER_TSAN), so the program would go on growing.
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10)
            proc.stdout.close()
        self.addCleanup(stop)
        self.assertEqual(proc.stdout.readline().strip(), "ready")
        return proc

    def top(self, args, timeout=60):
        return self.launch(["top", *args], timeout=timeout)

    # --- in a terminal ---------------------------------------------------------------------------

    def tmux(self, *args):
        return subprocess.run([TMUX, "-L", self.socket, *args], check=True, capture_output=True, text=True).stdout

    def screen(self):
        return self.tmux("capture-pane", "-p", "-t", "top")

    def wait_for(self, what, timeout=15):
        """The pane's text once `what(text)` holds; fails with the last screen after `timeout` s."""
        deadline = time.time() + timeout
        while True:
            text = self.screen()
            if what(text):
                return text
            if time.time() > deadline:
                self.fail("not seen on the screen:\n" + text)
            time.sleep(0.05)

    @unittest.skipUnless(TMUX, "tmux is not installed (make deps)")
    def test_tmux_shows_the_growing_site_within_two_refreshes(self):
        launcher = self.start_growing()
        self.socket = f"gpumemtrace-top-test-{os.getpid()}"
        exit_file = os.path.join(self.tmp, "exit")
        # The launcher's pid: top finds the trace its child writes. The status is kept in a file.
        command = f"{LAUNCHER} top {launcher.pid}; echo $? > {exit_file}"
        self.tmux("-f", "/dev/null", "new-session", "-d", "-s", "top", "-x", "150", "-y", "30", command)
        self.addCleanup(lambda: subprocess.run([TMUX, "-L", self.socket, "kill-server"], capture_output=True))

        text = self.wait_for(lambda t: REFRESH.search(t) is not None and GROWING_ROW.search(t) is not None)
        self.assertLessEqual(int(REFRESH.search(text).group(1)), 2, text)
        self.assertIn("device 0 (gpumemtrace simulated GPU)", text)
        (trace,) = glob.glob(os.path.join(self.tmp, "t", "*.jsonl*"))
        child = re.search(r"\.(\d+)\.jsonl", trace).group(1)
        self.assertIn(f"pid {child}", text)  # the program's, found under the launcher's pid
        self.assertIn("running", text)

        # Keys: 2 sorts by what grew; / types a filter that hides every site; Esc cancels a typed one.
        self.tmux("send-keys", "-t", "top", "2")
        self.wait_for(lambda t: "sorted by grew" in t)
        self.tmux("send-keys", "-t", "top", "/", "no_such_site", "Enter")
        text = self.wait_for(lambda t: 'filter "no_such_site"' in t)
        self.assertIn("0 sites", text)
        self.assertNotIn("grow_cache", text)
        self.tmux("send-keys", "-t", "top", "/", "BSpace", "BSpace", "BSpace", "BSpace", "BSpace", "BSpace", "BSpace",
                  "BSpace", "BSpace", "BSpace", "BSpace", "BSpace", "grow_c", "Enter")
        self.wait_for(lambda t: 'filter "grow_c"' in t and "grow_cache" in t)
        self.tmux("send-keys", "-t", "top", "?")
        self.wait_for(lambda t: "keys:" in t)
        self.tmux("send-keys", "-t", "top", "Space")  # any key leaves the help
        self.wait_for(lambda t: "keys:" not in t and "grow_cache" in t)

        self.tmux("send-keys", "-t", "top", "q")
        deadline = time.time() + 15
        while not os.path.exists(exit_file) or not open(exit_file).read().strip():
            self.assertLess(time.time(), deadline, "top did not quit on q")
            time.sleep(0.05)
        self.assertEqual(open(exit_file).read().strip(), "0")
        self.assertIsNone(launcher.poll())  # top only reads: the program runs on

    # --- batch mode ------------------------------------------------------------------------------

    def test_batch_on_a_trace_being_written(self):
        self.start_growing()
        (trace,) = glob.glob(os.path.join(self.tmp, "t", "*.jsonl*"))
        p = self.top(["--batch", "--iterations", "2", "--sort", "grew", trace])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "")
        screens = p.stdout.split("gpumemtrace top: ")[1:]
        self.assertEqual(len(screens), 2, p.stdout)
        self.assertIsNone(GROWING_ROW.search(screens[0]), screens[0])  # nothing to compare with yet
        self.assertRegex(screens[1], GROWING_ROW)
        self.assertIn("sorted by grew", screens[1])
        # The device's live bytes grew between the two refreshes, and the header says so.
        self.assertRegex(screens[1], r"device 0 .*reserved \(\+[\d.]+ [KMG]?i?B\)")

    def test_batch_ends_with_a_finished_trace(self):
        p = self.launch(["run", "-q", "-o", "t", "--", PYTHON, PROG, "leak", CUDART])
        self.assertEqual(p.returncode, 0, p.stderr)
        (trace,) = glob.glob(os.path.join(self.tmp, "t", "*.jsonl*"))
        p = self.top(["--batch", trace], timeout=30)  # no --iterations: it ends with the trace's footer
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("ended: exited with status 0", p.stdout)
        self.assertRegex(p.stdout, r"\s3\.0 MiB\s+1\s.*leak_buffer")  # what the program left allocated
        self.assertIn("1 site, 3.0 MiB live", p.stdout)

    # --- bad input: one line on stderr, status 2, no screen ---------------------------------------

    def assert_one_line_error(self, args, expected):
        p = self.top(args, timeout=30)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertEqual(p.stdout, "")
        self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
        self.assertRegex(p.stderr, "^gpumemtrace top: .*" + expected)

    def test_not_a_trace(self):
        path = os.path.join(self.tmp, "notes.jsonl")
        with open(path, "w") as f:
            f.write("hello\n")
        self.assert_one_line_error(["--batch", path], "not a gpumemtrace trace")
        self.assert_one_line_error([path], "not a gpumemtrace trace")  # the same on a terminal-less screen

    def test_no_trace(self):
        self.assert_one_line_error(["--batch", os.path.join(self.tmp, "missing.jsonl")], "No such file")
        self.assert_one_line_error(["--batch", self.tmp], "not a regular file")
        self.assert_one_line_error([], "target is required")

    def test_pid_not_traced(self):
        sleeper = subprocess.Popen(["sleep", "60"])
        self.addCleanup(lambda: (sleeper.kill(), sleeper.wait()))
        self.assert_one_line_error([str(sleeper.pid)], f"process {sleeper.pid} is not traced")
        pid_max = int(open("/proc/sys/kernel/pid_max").read())
        self.assert_one_line_error([str(pid_max + 1)], f"no process {pid_max + 1}")


if __name__ == "__main__":
    unittest.main()
