# tests/report/test_report_stack_view.py — stacks in the text report on recorded-looking traces.
"""Stacks in the text report (report/outputs/stack_view.h) on recorded-looking traces: a PyTorch
training loop (torch/nn in site-packages, libtorch_cuda/libc10_cuda, stripped cuBLAS, an autograd
thread), a program calling a stripped library, and a C++ program with long template names.
Each text report is golden (NAME.expected.txt, make_golden.py --update); beside that the rules
themselves: the first frame shown is the user's, no line is wider than the width, no bare `??`,
--native shows every frame, the patterns override the judgement."""
import fcntl
import os
import pty
import re
import struct
import subprocess
import termios

from make_golden import GOLDEN, TEXT_GOLDENS, normalized_text
from reportlib import REPORT, SNAPSHOT_CORPUS, ReportTestCase, report_json, run_report, snapshot_corpus

# What marks a user frame's line in each golden trace.
USER_LINE = {
    "pytorch_stacks.jsonl": ("/home/me/proj/",),
    "stripped_library.jsonl": ("/src/", "libplugin.so+0x"),
    "cpp_templates.jsonl": ("/src/", "/usr/include/c++/"),
}
MODES = ([], ["--native"], ["--full-names"], ["--native", "--full-names"])


# CPython's own C frames, as PyTorch's snapshots name them: PyTorch's viewer hides them, and so does
# the view (they repeat what the Python frames say).
CPYTHON_FRAME = re.compile(r"^(_?Py[A-Z_]\w*|do_call_core|builtin_\w+|pythread_wrapper|thread_run|method_vectorcall"
                           r"|slot_(tp|nb)_\w+|cfunction_\w+|run_mod|pyrun_\w+|pymain_\w+)\b")


def trace(name):
    return os.path.join(GOLDEN, name)


def stack_blocks(text):
    """The stacks of a text report: runs of lines indented 6 or more (headers use 0 to 4)."""
    blocks, block = [], []
    for line in text.splitlines():
        if line.startswith("      "):
            block.append(line.strip())
        elif block:
            blocks.append(block)
            block = []
    if block:
        blocks.append(block)
    return blocks


class StackView(ReportTestCase):
    def test_golden_text(self):
        self.assertEqual(set(TEXT_GOLDENS), set(USER_LINE))
        for name in TEXT_GOLDENS:
            with self.subTest(trace=name):
                with open(trace(name) + ".expected.txt") as f:
                    expected = f.read()
                self.maxDiff = None
                self.assertEqual(normalized_text(REPORT, trace(name)), expected)

    def test_first_frame_shown_is_the_users(self):
        for name, markers in USER_LINE.items():
            blocks = stack_blocks(run_report(trace(name), check_rc=0).stdout)
            self.assertGreater(len(blocks), 2, name)
            for block in blocks:
                is_user = [any(m in line for m in markers) for line in block]
                if any(is_user):  # a stack with user code leads with it
                    self.assertTrue(is_user[0], (name, block))
        leaks = stack_blocks(run_report(trace("pytorch_stacks.jsonl"), check_rc=0).stdout)
        self.assertEqual(leaks[0][0], "Net.forward (/home/me/proj/model.py:31)")
        self.assertEqual(leaks[1][0], "train_step (/home/me/proj/train.py:27)")

    def test_real_snapshots_fold_windows_paths_and_cpythons_frames(self):
        files = snapshot_corpus()
        if not files:
            self.skipTest(f"no real PyTorch snapshots at {SNAPSHOT_CORPUS}")
        shown = 0
        for path in files:
            with self.subTest(snapshot=os.path.basename(path)):
                for block in stack_blocks(run_report(path).stdout):
                    for line in block:
                        shown += 1
                        self.assertFalse(CPYTHON_FRAME.match(line), line)
                        # A library's file on Windows is folded like one on Linux.
                        self.assertNotRegex(line, r"\\(site|dist)-packages\\", line)
        self.assertGreater(shown, 100)

    def test_no_line_wider_than_the_width(self):
        for name in TEXT_GOLDENS:
            for mode in MODES:
                with self.subTest(trace=name, mode=mode):
                    out = run_report(*mode, trace(name), check_rc=0).stdout
                    for line in out.splitlines():
                        if line.startswith("      "):  # frame lines; headers are not stacks
                            self.assertLessEqual(len(line), 160, line)
                    out = run_report(*mode, "--width", "72", trace(name), check_rc=0).stdout
                    for block in stack_blocks(out):
                        for line in block:
                            self.assertLessEqual(len(line) + 6, 72, line)
        # Without a limit, full names come back whole: the dispatcher's 600-character signature.
        out = run_report("--native", "--full-names", "--width", "0", trace("pytorch_stacks.jsonl"), check_rc=0).stdout
        self.assertGreater(max(len(line) for line in out.splitlines()), 600)

    def test_a_terminal_sets_the_width(self):
        # Written to a terminal 70 columns wide, stack lines fit in 70; --width overrides it.
        def on_terminal(*args):
            leader, follower = pty.openpty()
            fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 70, 0, 0))
            try:
                proc = subprocess.run([REPORT, *args, trace("cpp_templates.jsonl")], stdout=follower,
                                      stderr=subprocess.PIPE, timeout=60)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                os.close(follower)
                follower = -1
                chunks = []
                while True:
                    try:
                        chunk = os.read(leader, 65536)
                    except OSError:  # EIO: the terminal has no writer left
                        break
                    if not chunk:
                        break
                    chunks.append(chunk)
                return b"".join(chunks).decode().replace("\r\n", "\n")
            finally:
                os.close(leader)
                if follower >= 0:
                    os.close(follower)
        blocks = stack_blocks(on_terminal("--full-names"))
        self.assertTrue(blocks)
        self.assertLessEqual(max(len(line) + 6 for block in blocks for line in block), 70)
        self.assertTrue(any("..." in line for block in blocks for line in block))  # names were cut
        blocks = stack_blocks(on_terminal("--full-names", "--width", "0"))
        self.assertGreater(max(len(line) for block in blocks for line in block), 150)

    def test_no_bare_question_marks(self):
        for name in TEXT_GOLDENS:
            for mode in MODES:
                with self.subTest(trace=name, mode=mode):
                    out = run_report(*mode, trace(name), check_rc=0).stdout
                    self.assertNotIn("??", out)
        out = run_report("--native", trace("pytorch_stacks.jsonl"), check_rc=0).stdout
        self.assertIn("libcublas.so.13+0x", out)  # the stripped frames by module and offset

    def test_native_shows_every_frame(self):
        for name in TEXT_GOLDENS:
            with self.subTest(trace=name):
                leaks = report_json(trace(name))["leaks"]
                for options in (["--native"], ["--frames", "all"]):
                    blocks = stack_blocks(run_report(*options, trace(name), check_rc=0).stdout)
                    for leak, block in zip(leaks, blocks):  # the leaks come first, in the same order
                        self.assertEqual(len(block), len(leak["stack"]), block)
        blocks = stack_blocks(run_report("--native", trace("pytorch_stacks.jsonl"), check_rc=0).stdout)
        self.assertEqual(blocks[0][0], "cudaMalloc (libcudart.so.13)")
        self.assertEqual(blocks[0][-1], "_start (python3.11)")

    def test_patterns_override_the_judgement(self):
        path = trace("pytorch_stacks.jsonl")
        first = stack_blocks(run_report("--user-code", "torch/nn/modules/linear", path, check_rc=0).stdout)[0]
        self.assertEqual(first[0], "Linear.forward (" + os.path.join(
            "/opt/conda/lib/python3.11/site-packages", "torch/nn/modules/linear.py") + ":116)")
        first = stack_blocks(run_report("--library", "model.py,nothing", path, check_rc=0).stdout)[0]
        self.assertEqual(first[:2], ["train_step (/home/me/proj/train.py:23)", "<module> (/home/me/proj/train.py:40)"])
        self.assertIn("[model.py: 1 frame]", first)
        # Repeated options add up; the longer pattern wins where both lists match.
        first = stack_blocks(run_report("--library", "/home/me/proj/", "--library", "x",
                                        "--user-code", "/home/me/proj/train", path, check_rc=0).stdout)[0]
        self.assertEqual(first[0], "train_step (/home/me/proj/train.py:23)")
        self.assertIn("[/home/me/proj/: 1 frame]", first)

    def test_bad_options_exit_2_with_one_line(self):
        path = trace("cpp_templates.jsonl")
        for args in (["--user-code", "a,,b"], ["--library="], ["--width", "wide"], ["--frames", "most"]):
            with self.subTest(args=args):
                proc = run_report(*args, path)
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertTrue(proc.stderr.startswith("gpumem-report: --"), proc.stderr)
