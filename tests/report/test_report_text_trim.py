# tests/report/test_report_text_trim.py — which frames the text report trims, and how many it shows.
"""Text output trimming: profiler/CUDA frames, everything below the entry (main, Py_RunMain), and, in
stacks with Python frames, the interpreter's and ctypes/libffi's native frames are left out; the
user's Python frames lead, then the user's native frames; up to 12 lines by default, then
'... N more frames'. --native (--frames all) shows every frame; the JSON keeps every frame."""
import os
import tempfile

from reportlib import ReportTestCase, report_json, run_report
from tracegen import MiB, Trace


class TextTrim(ReportTestCase):
    def setUp(self):
        super().setUp()
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.path = os.path.join(self.tmp.name, "ctypes.jsonl")

    def write_ctypes_trace(self, deep=0):
        # An allocation made through ctypes from Python, as the recorder merges it.
        t = Trace(self.path)
        t.module(3, "/usr/lib/x86_64-linux-gnu/libffi.so.8")
        t.module(4, "/usr/lib/python3.11/lib-dynload/_ctypes.cpython-311-x86_64-linux-gnu.so")
        t.module(5, "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0")
        t.module(6, "/lib/x86_64-linux-gnu/libc.so.6")
        t.module(7, "/usr/include/gpumemtrace_user.so")
        frames = [t.cudart,
                  t._frame({"ip": "0x555500000200", "module": 1, "offset": "0x200",
                            "function": "gpumemtrace_block_alloc", "file": "include/gpumemtrace.h", "line": 60}),
                  t._frame({"ip": "0x555500000300", "module": 1, "offset": "0x300",
                            "function": "native_alloc", "file": "/src/ext.c", "line": 7}),
                  t.native(3, "ffi_call_unix64"), t.native(3, "ffi_call_int"),
                  t.native(4, "_call_function_pointer"), t.native(4, "PyCFuncPtr_call"),
                  t.native(5, "_PyObject_MakeTpCall"), t.native(5, "_PyEval_EvalFrameDefault"),
                  t.python("allocate_buffer", "train.py", 12)]
        for i in range(deep):
            frames += [t.native(5, "PyObject_Vectorcall"), t.python(f"layer{i}", "train.py", 100 + i)]
        frames += [t.native(5, "PyEval_EvalCode"), t.native(5, "Py_RunMain"),
                   t.native(5, "Py_BytesMain"), t.main, t.native(6, "__libc_start_call_main"),
                   t.native(6, "__libc_start_main@@GLIBC_2.34"), t.native(1, "_start")]
        t.alloc(0x7000, 3 * MiB, t.raw_stack(frames))
        t.close()
        return len(frames)

    def leak_stack_lines(self, *options):
        out = run_report(*options, self.path, check_rc=0).stdout
        stack = out.split("allocated here:\n")[1].split("peak")[0]
        return [l.strip() for l in stack.strip().splitlines()]

    def test_interpreter_frames_trimmed(self):
        total = self.write_ctypes_trace()
        # The user's Python line first, then their native frame; below Py_RunMain nothing (the
        # interpreter's main included).
        self.assertEqual(self.leak_stack_lines(), ["allocate_buffer (train.py:12)", "native_alloc (/src/ext.c:7)"])
        # JSON keeps every frame.
        self.assertEqual(len(report_json(self.path)["leaks"][0]["stack"]), total)

    def test_up_to_12_frames_then_count(self):
        total = self.write_ctypes_trace(deep=15)
        lines = self.leak_stack_lines()
        self.assertEqual(len(lines), 13)
        self.assertEqual(lines[:2], ["allocate_buffer (train.py:12)", "layer0 (train.py:100)"])
        self.assertEqual(lines[-1], "... 5 more frames")  # 17 user frames, 12 shown
        self.assertIn("... 14 more frames", self.leak_stack_lines("--frames", "3"))
        # --native and --frames all: every recorded frame, in order, nothing cut.
        for options in (["--native"], ["--frames", "all"], ["--frames=all"]):
            lines = self.leak_stack_lines(*options)
            self.assertEqual(len(lines), total, options)
            self.assertEqual(lines[0], "cudaMalloc (libcudart.so.13)")
            self.assertEqual(lines[-1], "_start (app)")
        self.assertEqual(len(self.leak_stack_lines("--native", "--frames", "4")), 5)

    def test_native_only_stacks_keep_python_named_functions(self):
        # Without Python frames the interpreter's frames are not dropped (an embedding program's own
        # frames may be the interesting ones) but folded after the user's; the C runtime below main()
        # is cut.
        t = Trace(self.path)
        t.module(5, "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0")
        t.module(6, "/lib/x86_64-linux-gnu/libc.so.6")
        frames = [t.cudart, t.native(5, "_PyEval_EvalFrameDefault"), t.main,
                  t.native(6, "__libc_start_main@@GLIBC_2.34")]
        t.alloc(0x7000, MiB, t.raw_stack(frames))
        t.close()
        out = run_report(self.path, check_rc=0).stdout
        self.assertIn("main (/src/app.cu:200)\n      [python interpreter: 1 frame]\npeak", out)
        self.assertNotIn("__libc_start_main", out)
        out = run_report("--native", self.path, check_rc=0).stdout
        self.assertIn("_PyEval_EvalFrameDefault (libpython3.11.so.1.0)\n      main (/src/app.cu:200)\n"
                      "      __libc_start_main@@GLIBC_2.34 (libc.so.6)\npeak", out)
