"""Text output trimming: profiler/CUDA frames, the C runtime below main(), and, in stacks with Python
frames, the interpreter's and ctypes/libffi's native frames; up to 12 frames by default, then
'... N more frames'. The JSON keeps every frame."""
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

    def test_interpreter_frames_trimmed(self):
        total = self.write_ctypes_trace()
        out = run_report(self.path, check_rc=0).stdout
        stack = out.split("allocated here:\n")[1].split("peak")[0]
        lines = [l.strip() for l in stack.strip().splitlines()]
        self.assertEqual(lines, ["native_alloc (/src/ext.c:7)", "allocate_buffer (train.py:12)",
                                 "main (/src/app.cu:200)"])
        # JSON keeps every frame.
        self.assertEqual(len(report_json(self.path)["leaks"][0]["stack"]), total)

    def test_up_to_12_frames_then_count(self):
        self.write_ctypes_trace(deep=15)
        out = run_report(self.path, check_rc=0).stdout
        stack = out.split("allocated here:\n")[1].split("peak")[0]
        lines = [l.strip() for l in stack.strip().splitlines()]
        self.assertEqual(len(lines), 13)
        self.assertEqual(lines[:2], ["native_alloc (/src/ext.c:7)", "allocate_buffer (train.py:12)"])
        self.assertEqual(lines[-1], "... 6 more frames")  # 18 frames after trimming, 12 shown
        out = run_report("--frames", "3", self.path, check_rc=0).stdout
        self.assertIn("... 15 more frames", out)

    def test_native_only_stacks_keep_python_named_functions(self):
        # Without Python frames nothing of the interpreter is trimmed (an embedding program's own
        # frames may be the interesting ones); the C runtime below main() still is.
        t = Trace(self.path)
        self.module(t, 5, "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0")
        self.module(t, 6, "/lib/x86_64-linux-gnu/libc.so.6")
        frames = [t.cudart, self.native(t, 5, "_PyEval_EvalFrameDefault"), t.main,
                  self.native(t, 6, "__libc_start_main@@GLIBC_2.34")]
        t._write({"type": "stack", "id": 1, "frames": frames})
        t.alloc(0x7000, MiB, 1)
        t.close()
        out = run_report(self.path, check_rc=0).stdout
        self.assertIn("_PyEval_EvalFrameDefault (libpython3.11.so.1.0)\n      main (/src/app.cu:200)\npeak", out)
        self.assertNotIn("__libc_start_main", out)
