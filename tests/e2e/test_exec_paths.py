# tests/e2e/test_exec_paths.py — every exec path hands the trace over whole; a failed exec goes on.
"""exec replaces the program image without exit handlers: the trace is checkpointed first, with a
footer saying "exec", and the new image writes its own (issue 27, item 4). Before, fexecve (Python's
os.execve(fd, ...)), execveat and a raw syscall(SYS_execve) left a trace cut short; execl with 4,100
arguments failed with E2BIG, and execl from a 16 KiB thread stack overflowed it (a 32 KiB array on
the stack); and each exec that failed (os.execvp tries every PATH entry) finished the trace and
started another: one process became several, each "replaced by exec"."""
import os
import unittest

from recorder_testlib import SIM, Trace, program, run_traced, tempdir, trace_files
from test_recorder_e2e import TraceInvariants

EXEC_PATHS = program("exec_paths")
SCENARIOS = program("scenarios")


def sizes(trace):
    return [e["size"] for e in trace.allocs()]


class ExecPaths(unittest.TestCase, TraceInvariants):
    def check_handover(self, how, before=(4004,), output=None):
        out = tempdir()
        env = {"GPUMEMTRACE_OUTPUT": output(out)} if output else None
        proc = run_traced([EXEC_PATHS, how, SCENARIOS], out, env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        traces = sorted((Trace(p) for p in trace_files(out) + [os.path.join(out, f) for f in os.listdir(out)
                                                                 if f.startswith("t.")]),
                        key=lambda t: t.header["clock_start_ns"])
        self.assertEqual(len(traces), 2, [t.path for t in traces])
        first, second = traces
        for t in traces:
            self.check_invariants(t)
        self.assertEqual(first.header["pid"], second.header["pid"])
        self.assertEqual((sizes(first), first.footer["end"]), (list(before), "exec"))
        self.assertEqual((sizes(second), second.footer["end"]), ([5005], "exit"))
        self.assertEqual([l for l in proc.stderr.splitlines() if l.startswith("gpumemtrace:")], [])

    def test_execve(self):
        self.check_handover("execve")

    def test_fexecve(self):
        self.check_handover("fexecve")

    def test_execveat(self):
        self.check_handover("execveat")

    def test_raw_execve_system_call(self):
        if os.uname().machine != "x86_64":
            self.skipTest("syscall() is interposed on x86-64 only")
        self.check_handover("raw_execve")

    def test_execl_with_4100_arguments(self):
        self.check_handover("execl_many")

    def test_execl_from_a_16_KiB_thread_stack(self):
        self.check_handover("execl_thread")

    def test_execl_from_a_handler_on_a_16_KiB_sigaltstack(self):
        self.check_handover("execl_altstack")

    def test_failed_execs_resume_the_same_trace(self):
        self.check_handover("failing", before=(4004, 4005, 4006, 4007))

    def test_failed_execs_resume_the_same_plain_text_trace(self):
        self.check_handover("failing", before=(4004, 4005, 4006, 4007), output=lambda out: out + "/t.%p.%e.jsonl")


class PythonExecvp(unittest.TestCase, TraceInvariants):
    def test_each_path_entry_tried_is_one_trace(self):
        # os.execvp calls execv for every PATH entry until one works: five that fail, then the real one.
        script = "\n".join([
            "import ctypes, os, sys",
            "ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)",
            "p = ctypes.c_void_p()",
            "ctypes.CDLL(None).cudaMalloc(ctypes.byref(p), ctypes.c_size_t(7007))",
            "os.execvp('scenarios', ['scenarios', 'depth'])",
        ])
        out = tempdir()
        path = ":".join([f"/nonexistent/{i}" for i in range(5)] + [os.path.dirname(SCENARIOS)])
        proc = run_traced(["python3", "-c", script, os.path.join(SIM, "libcudart.so.13")], out,
                          env={"PATH": path + ":" + os.environ["PATH"], "GPUMEMTRACE_PYTHON": "0"})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        traces = sorted((Trace(p) for p in trace_files(out)), key=lambda t: t.header["clock_start_ns"])
        self.assertEqual([(sizes(t), t.footer["end"]) for t in traces], [([7007], "exec"), ([5005], "exit")])


if __name__ == "__main__":
    unittest.main()
