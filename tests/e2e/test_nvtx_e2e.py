# tests/e2e/test_nvtx_e2e.py — NVTX ranges recorded as phases under a plain LD_PRELOAD run.
"""End-to-end tests of NVTX ranges as phases (tests/e2e/programs/nvtx_phases.c, NVTX v3 alone, no
gpumemtrace header): the scope and mark events a plain LD_PRELOAD run records, the phase the report
gives the peak, the Perfetto slices, and that another NVTX tool named by NVTX_INJECTION64_PATH keeps
the program's NVTX calls."""
import json
import os
import subprocess
import unittest

from recorder_testlib import BUILD, LIB, Trace, program, run_traced, tempdir, trace_files

REPORT = os.path.join(BUILD, "gpumem-report")
LAUNCHER = os.path.join(BUILD, "gpumemtrace")
OTHER_TOOL = os.path.join(BUILD, "tests", "programs", "libnvtx_other_tool.so")
SCOPE_OPS = ("scope_begin", "scope_end")
# nvtxRangePushA/Pop levels as a tool returns them: load 0/0, train 0, forward 1/1, train 0, io 0/0.
TOOL_LEVELS = "levels: 0 0 0 1 1 0 0 0"
NO_TOOL_LEVELS = "levels: -2 -2 -2 -2 -2 -2 -2 -2"  # NVTX with no tool attached


def run_nvtx_phases(env=None, preload=True, args=()):
    """(CompletedProcess, [trace paths]) of nvtx_phases; NVTX_INJECTION64_PATH unset unless `env` sets it."""
    out = tempdir()
    full_env = {"NVTX_INJECTION64_PATH": None, **(env or {})}
    e = {k: v for k, v in full_env.items() if v is not None}
    saved = os.environ.pop("NVTX_INJECTION64_PATH", None)
    try:
        proc = run_traced([program("nvtx_phases"), *args], out, env=e, preload=preload)
    finally:
        if saved is not None:
            os.environ["NVTX_INJECTION64_PATH"] = saved
    return proc, trace_files(out)


def nvtx_events(trace):
    return [e for e in trace.events if e["api"] == "nvtx"]


class NvtxUnderPreload(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.proc, files = run_nvtx_phases()
        if cls.proc.returncode != 0 or len(files) != 1:
            raise AssertionError("nvtx_phases: rc %d, traces %s\n%s" % (cls.proc.returncode, files, cls.proc.stderr))
        cls.trace = Trace(files[0])

    def test_nvtx_returns_a_tools_levels_and_a_range_id(self):
        self.assertIn(TOOL_LEVELS, self.proc.stdout)
        self.assertIn("prefetch id: 1", self.proc.stdout)

    def test_ranges_and_marks_in_program_order_around_the_allocations(self):
        seen = [(e["op"], e.get("label", e.get("size"))) for e in self.trace.events
                if e["api"] == "nvtx" or e["op"] == "alloc"]
        self.assertEqual(seen, [
            ("scope_begin", "load"), ("alloc", 1 << 20), ("scope_end", "load"),
            ("scope_begin", "train"), ("alloc", 2 << 20),
            ("scope_begin", "forward"), ("alloc", 8 << 20), ("scope_end", "forward"),
            ("scope_end", "train"),
            ("scope_begin", "prefetch"), ("alloc", 3 << 20), ("scope_end", "prefetch"),
            ("scope_begin", "io: read"), ("alloc", 512 << 10), ("scope_end", "io: read"),
            ("mark", "done")])

    def test_a_start_end_range_carries_its_id_across_threads(self):
        prefetch = [e for e in nvtx_events(self.trace) if e.get("label") == "prefetch"]
        self.assertEqual([e["op"] for e in prefetch], ["scope_begin", "scope_end"])
        self.assertEqual(prefetch[0]["range"], 1)
        self.assertEqual(prefetch[1]["range"], 1)
        self.assertNotEqual(prefetch[0]["tid"], prefetch[1]["tid"])
        self.assertIn("end_prefetch", self.trace.functions(prefetch[1]))
        # Push/pop ranges have no id: their end is the thread's innermost open range.
        self.assertFalse([e for e in nvtx_events(self.trace) if e.get("label") != "prefetch" and "range" in e])

    def test_fields_and_stacks_of_the_events(self):
        for e in nvtx_events(self.trace):
            self.assertEqual(e["kind"], "none", e)
            for absent in ("addr", "size", "result"):
                self.assertNotIn(absent, e)
            functions = self.trace.functions(e)
            self.assertTrue("main" in functions or "end_prefetch" in functions, functions)
            # The program's own NVTX header code stays; the library's frames are skipped.
            self.assertFalse([f for f in functions if "record_nvtx" in f or "::push" in f], functions)

    def test_the_report_puts_the_peak_in_the_nvtx_phase(self):
        out = subprocess.run([REPORT, "--format", "json", self.trace.path], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        report = json.loads(out.stdout)
        self.assertEqual([(p["bytes"], p["phase"]) for p in report["peaks"]], [(11 << 20, "train/forward")])
        self.assertEqual(report["scopes"], [])  # NVTX ranges are phases, not leak checks

    def test_perfetto_has_the_ranges_as_slices_per_thread(self):
        out = subprocess.run([REPORT, "--format", "perfetto", self.trace.path], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        events = json.loads(out.stdout)["traceEvents"]
        slices = {e["name"]: e for e in events if e.get("cat") == "nvtx"}
        self.assertEqual(sorted(slices), ["forward", "io: read", "load", "prefetch", "train"])
        train, forward = slices["train"], slices["forward"]
        self.assertEqual(train["tid"], forward["tid"])
        self.assertLessEqual(train["ts"], forward["ts"])
        self.assertLessEqual(forward["ts"] + forward["dur"], train["ts"] + train["dur"])
        self.assertNotEqual(slices["prefetch"]["tid"], train["tid"])  # its own track: it may overlap
        self.assertEqual(slices["prefetch"]["args"]["range"], 1)
        tracks = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
        self.assertTrue(tracks[train["tid"]].startswith("NVTX ranges, thread "), tracks)


class DeepNesting(unittest.TestCase):
    def test_ranges_beyond_32_deep_are_counted_not_recorded(self):
        proc, files = run_nvtx_phases(args=["deep"])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("innermost: 39\npops: " + " ".join(str(i) for i in range(39, -1, -1)), proc.stdout)
        self.assertIn("extra pop: -1", proc.stdout)
        trace = Trace(files[0])
        seen = [(e["op"], e["label"]) for e in nvtx_events(trace)]
        begins = [("scope_begin", "d%d" % i) for i in range(32)]
        ends = [("scope_end", "d%d" % i) for i in range(31, -1, -1)]
        self.assertEqual(seen, begins + ends)
        report = json.loads(subprocess.run([REPORT, "--format", "json", trace.path], capture_output=True,
                                           text=True).stdout)
        self.assertEqual(report["peaks"][0]["phase"], "/".join("d%d" % i for i in range(32)))


class NvtxWithAnotherTool(unittest.TestCase):
    def test_the_other_tool_keeps_nvtx_and_the_program_still_runs_traced(self):
        proc, files = run_nvtx_phases({"NVTX_INJECTION64_PATH": OTHER_TOOL})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("other NVTX tool: attached", proc.stderr)
        self.assertIn("other NVTX tool: 3 pushes", proc.stderr)
        self.assertIn("levels: 0 -2 1 2 -2 -2 -2 -2", proc.stdout)  # its RangePushA, no-op for the rest
        self.assertNotIn("NVTX", proc.stderr.replace("other NVTX tool", ""))  # silent unless asked
        trace = Trace(files[0])
        self.assertEqual(nvtx_events(trace), [])
        self.assertEqual(len(trace.allocs()), 5)

    def test_gpumemtrace_nvtx_1_says_why_in_one_line(self):
        proc, _ = run_nvtx_phases({"NVTX_INJECTION64_PATH": OTHER_TOOL, "GPUMEMTRACE_NVTX": "1"})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        lines = [line for line in proc.stderr.splitlines() if line.startswith("gpumemtrace: NVTX")]
        self.assertEqual(lines, ["gpumemtrace: NVTX_INJECTION64_PATH names another tool; "
                                 "NVTX ranges go to it and are not recorded"])


class NvtxFromACarelessProgram(unittest.TestCase):
    def test_bogus_handles_and_unterminated_messages_do_not_crash(self):
        proc, files = run_nvtx_phases(args=("bogus",))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("survived", proc.stdout)
        events = nvtx_events(Trace(files[0]))
        # A handle NVTX never handed out names nothing; the message ends where the readable bytes end.
        self.assertEqual([(e["op"], e.get("label")) for e in events],
                         [("mark", "io: "), ("mark", ""), ("scope_begin", "xxxxxx"), ("scope_end", "xxxxxx")])

    def test_an_invalid_setting_is_said_only_by_processes_that_trace(self):
        env = dict(os.environ, LD_PRELOAD=LIB, GPUMEMTRACE_NVTX="bogus")
        quiet = subprocess.run(["/bin/true"], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(quiet.stderr, "")  # no CUDA call: nothing said
        proc, _ = run_nvtx_phases({"GPUMEMTRACE_NVTX": "bogus"})
        self.assertEqual(proc.stderr.count("GPUMEMTRACE_NVTX=bogus"), 1, proc.stderr)


class NvtxLeftAlone(unittest.TestCase):
    def test_gpumemtrace_nvtx_0_leaves_nvtx_without_a_tool(self):
        proc, files = run_nvtx_phases({"GPUMEMTRACE_NVTX": "0"})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn(NO_TOOL_LEVELS, proc.stdout)
        self.assertEqual(nvtx_events(Trace(files[0])), [])

    def test_a_library_loaded_only_by_nvtx_does_not_attach_or_trace(self):
        # A child that dropped LD_PRELOAD but kept the variable: NVTX loads the library itself.
        proc, files = run_nvtx_phases({"NVTX_INJECTION64_PATH": LIB}, preload=False)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn(NO_TOOL_LEVELS, proc.stdout)
        self.assertEqual(files, [])

    def test_the_variable_already_naming_this_library_attaches(self):
        proc, files = run_nvtx_phases({"NVTX_INJECTION64_PATH": LIB})
        self.assertIn(TOOL_LEVELS, proc.stdout)
        self.assertEqual(len(nvtx_events(Trace(files[0]))), 11)


class NvtxThroughTheLauncher(unittest.TestCase):
    def test_the_launchers_report_names_the_phase(self):
        out = tempdir()
        env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "NVTX_INJECTION64_PATH")}
        env["LD_LIBRARY_PATH"] = os.path.join(BUILD, "sim")
        proc = subprocess.run([LAUNCHER, "run", "-o", out, "--", program("nvtx_phases")], env=env,
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn(TOOL_LEVELS, proc.stdout)
        self.assertIn('phase "train/forward"', proc.stdout)


if __name__ == "__main__":
    unittest.main()
