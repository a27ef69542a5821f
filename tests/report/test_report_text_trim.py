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

    def module(self, t, mid, path):
        t._write({"type": "module", "id": mid, "path": path, "base": "0x7e%010x" % (mid << 24),
                  "size": 1 << 20, "build_id": "ee%02d" % mid})

    def native(self, t, mid, function):
        return t._frame({"ip": "0x7e%010x" % ((mid << 24) + t.next_frame), "module": mid,
                         "offset": "0x%x" % t.next_frame, "function": function})

    def python(self, t, function, line):
        return t._frame({"lang": "python", "function": function, "file": "train.py", "line": line})

    def write_ctypes_trace(self, deep=0):
        # An allocation made through ctypes from Python, as the recorder merges it.
        t = Trace(self.path)
        self.module(t, 3, "/usr/lib/x86_64-linux-gnu/libffi.so.8")
        self.module(t, 4, "/usr/lib/python3.11/lib-dynload/_ctypes.cpython-311-x86_64-linux-gnu.so")
        self.module(t, 5, "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0")
        self.module(t, 6, "/lib/x86_64-linux-gnu/libc.so.6")
        self.module(t, 7, "/usr/include/gpumemtrace_user.so")
        frames = [t.cudart,
                  t._frame({"ip": "0x555500000200", "module": 1, "offset": "0x200",
                            "function": "gpumemtrace_block_alloc", "file": "include/gpumemtrace.h", "line": 60}),
                  t._frame({"ip": "0x555500000300", "module": 1, "offset": "0x300",
                            "function": "native_alloc", "file": "/src/ext.c", "line": 7}),
                  self.native(t, 3, "ffi_call_unix64"), self.native(t, 3, "ffi_call_int"),
                  self.native(t, 4, "_call_function_pointer"), self.native(t, 4, "PyCFuncPtr_call"),
                  self.native(t, 5, "_PyObject_MakeTpCall"), self.native(t, 5, "_PyEval_EvalFrameDefault"),
                  self.python(t, "allocate_buffer", 12)]
        for i in range(deep):
            frames += [self.native(t, 5, "PyObject_Vectorcall"), self.python(t, f"layer{i}", 100 + i)]
        frames += [self.native(t, 5, "PyEval_EvalCode"), self.native(t, 5, "Py_RunMain"),
                   self.native(t, 5, "Py_BytesMain"), t.main, self.native(t, 6, "__libc_start_call_main"),
                   self.native(t, 6, "__libc_start_main@@GLIBC_2.34"), self.native(t, 1, "_start")]
        t._write({"type": "stack", "id": 1, "frames": frames})
        t.alloc(0x7000, 3 * MiB, 1)
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
        self.module(t, 5, "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0")
        self.module(t, 6, "/lib/x86_64-linux-gnu/libc.so.6")
        frames = [t.cudart, self.native(t, 5, "_PyEval_EvalFrameDefault"), t.main,
                  self.native(t, 6, "__libc_start_main@@GLIBC_2.34")]
        t._write({"type": "stack", "id": 1, "frames": frames})
        t.alloc(0x7000, MiB, 1)
        t.close()
        out = run_report(self.path, check_rc=0).stdout
        self.assertIn("main (/src/app.cu:200)\n      [python interpreter: 1 frame]\npeak", out)
        self.assertNotIn("__libc_start_main", out)
        out = run_report("--native", self.path, check_rc=0).stdout
        self.assertIn("_PyEval_EvalFrameDefault (libpython3.11.so.1.0)\n      main (/src/app.cu:200)\n"
                      "      __libc_start_main@@GLIBC_2.34 (libc.so.6)\npeak", out)
