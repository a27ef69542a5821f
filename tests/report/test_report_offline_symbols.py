# tests/report/test_report_offline_symbols.py — gpumem-report names frames of traces recorded without symbols.
"""gpumem-report names the frames of traces recorded with GPUMEMTRACE_SYMBOLIZE=0 from the module files.

tests/e2e/programs/offline_symbols.cpp leaks 5 MiB through a function inlined into its caller and
7 MiB from a plain frame. It runs on the simulated runtime under the recorder, with symbols and
without; the reports must name the same functions, files, lines and inlined frames. A module whose
build id differs, or whose file is gone, gets one warning and module+offset frames.
"""
import json
import os
import re
import shutil
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "e2e"))

from recorder_testlib import LIB, Trace, program, run_traced, tempdir, trace_files, tracefile  # noqa: E402
from reportlib import REPORT, run_report  # noqa: E402

MiB = 1 << 20
PROGRAM = program("offline_symbols")


def record(args, out_dir, symbolize):
    os.makedirs(out_dir)
    proc = run_traced(args, out_dir, env={"GPUMEMTRACE_SYMBOLIZE": symbolize, "GPUMEMTRACE_QUIET": "1"})
    files = trace_files(out_dir)
    if proc.returncode != 0 or len(files) != 1:
        raise AssertionError(f"{args}: exit {proc.returncode}, traces {files}\n{proc.stdout}{proc.stderr}")
    return files[0]


def report(trace):
    """(JSON report, warning lines on stderr)."""
    proc = run_report("--format", "json", trace, check_rc=0)
    return json.loads(proc.stdout), [line for line in proc.stderr.splitlines() if "warning:" in line]


def leak_stacks(r):
    return {leak["bytes"]: leak["stack"] for leak in r["leaks"]}


def rewrite_trace(src, dst, change):
    """Copies a trace (plain or zstd) into plain text, passing each record through change(record) -> record
    (event lines have no "type" in format version 2: they pass as they are)."""
    with open(dst, "w") as out:
        for line in tracefile.read_text(src).splitlines():
            out.write(json.dumps(change(json.loads(line))) + "\n")


class OfflineSymbols(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        missing = [p for p in (REPORT, LIB, PROGRAM) if not os.path.exists(p)]
        if missing:
            raise unittest.SkipTest(f"not built: {', '.join(missing)}")
        cls.root = tempdir()
        cls.with_symbols = record([PROGRAM], os.path.join(cls.root, "on"), "1")
        cls.without = record([PROGRAM], os.path.join(cls.root, "off"), "0")
        cls.module = next(m for m in Trace(cls.without).modules.values() if m["path"] == PROGRAM)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)

    def test_trace_has_no_symbols(self):
        # The premise: the recorder really left the names out.
        frames = Trace(self.without).frames.values()
        self.assertTrue(frames)
        self.assertFalse([f for f in frames if "function" in f or "file" in f or "inlined" in f])
        self.assertTrue(all("offset" in f for f in frames))

    def test_same_names_as_in_process(self):
        online, online_warnings = report(self.with_symbols)
        offline, offline_warnings = report(self.without)
        self.assertEqual(online_warnings, [])
        self.assertEqual(offline_warnings, [])
        self.assertEqual(leak_stacks(offline), leak_stacks(online))
        self.assertEqual(offline["peaks"][0]["culprits"], online["peaks"][0]["culprits"])
        inlined = leak_stacks(offline)[5 * MiB]
        self.assertEqual([(f["function"], f.get("inlined", False)) for f in inlined[:3]],
                         [("grab_inlined", True), ("plant_inlined()", False), ("main", False)])
        self.assertTrue(inlined[0]["file"].endswith("offline_symbols.cpp"))
        self.assertGreater(inlined[0]["line"], 0)
        self.assertNotEqual(inlined[0]["line"], inlined[1]["line"])  # the call inside grab_inlined
        plain = leak_stacks(offline)[7 * MiB]
        self.assertEqual([f["function"] for f in plain[:2]], ["plant_plain()", "main"])

    def assert_unnamed(self, trace, reason, path=PROGRAM):
        """The module at `path` was not used: one warning saying why, its frames unnamed."""
        r, warnings = report(trace)
        self.assertEqual(len(warnings), 1, warnings)
        self.assertIn(path, warnings[0])
        self.assertIn(reason, warnings[0])
        plain = leak_stacks(r)[7 * MiB]
        self.assertEqual((plain[0]["function"], plain[0]["module"]), ("", path))
        self.assertNotIn("file", plain[0])
        self.assertTrue(any(f["function"].startswith("__libc_start") for f in plain), plain)  # libc still named
        # The text report shows module+offset for them; the warning is printed once.
        text = run_report(trace, check_rc=0).stdout
        self.assertRegex(text, r"offline_symbols\+0x[0-9a-f]+")
        self.assertNotIn("plant_plain", text)
        self.assertEqual(len(re.findall(r"^warning: module ", text, re.M)), 1, text)

    def test_build_id_differs(self):
        edited = os.path.join(self.root, "other_build.jsonl")
        other = "0" * len(self.module["build_id"])

        def rebuilt(record):
            if record.get("type") == "module" and record["id"] == self.module["id"]:
                return dict(record, build_id=other)
            return record
        rewrite_trace(self.without, edited, rebuilt)
        self.assert_unnamed(edited, "build id differs")

    def test_file_gone(self):
        # A copy of the program that is deleted after the run (the module path is the copy's).
        folder = os.path.join(self.root, "gone")
        os.makedirs(folder)
        copy = os.path.join(folder, "offline_symbols")
        shutil.copy(PROGRAM, copy)
        trace = record([copy], os.path.join(folder, "trace"), "0")
        os.remove(copy)
        self.assert_unnamed(trace, "file is gone", path=copy)

    def test_named_frames_left_alone(self):
        # Frames with a "function" (even "": the recorder looked and found nothing) and Python frames
        # keep what the trace says, though their module file is here and matches.
        off = int(Trace(self.without).frames[1]["offset"], 16)
        m = self.module
        lines = [
            {"type": "header", "format": "gpumemtrace", "version": 1, "pid": 7},
            {"type": "module", "id": 1, "path": m["path"], "base": m["base"], "size": m["size"],
             "build_id": m["build_id"]},
            {"type": "frame", "id": 1, "ip": hex(off), "module": 1, "offset": hex(off)},
            {"type": "frame", "id": 2, "ip": hex(off), "module": 1, "offset": hex(off), "function": ""},
            {"type": "frame", "id": 3, "ip": hex(off), "module": 1, "offset": hex(off), "function": "kept"},
            {"type": "frame", "id": 4, "lang": "python", "function": "step", "file": "train.py", "line": 3},
        ]
        for i in range(1, 5):
            lines.append({"type": "stack", "id": i, "frames": [i]})
        for i in range(1, 5):
            lines.append({"type": "event", "seq": i, "t": i, "tid": 1, "api": "cudaMalloc", "op": "alloc",
                          "kind": "device", "addr": hex(i << 24), "size": i * MiB, "device": 0, "stack": i})
        trace = os.path.join(self.root, "mixed.jsonl")
        with open(trace, "w") as f:
            f.writelines(json.dumps(line) + "\n" for line in lines)
        r, warnings = report(trace)
        self.assertEqual(warnings, [])
        stacks = leak_stacks(r)
        self.assertEqual(stacks[1 * MiB][0]["function"], "grab_inlined")  # looked up
        self.assertEqual(stacks[1 * MiB][1]["function"], "plant_inlined()")
        self.assertEqual(stacks[2 * MiB], [{"function": "", "module": m["path"]}])
        self.assertEqual(stacks[3 * MiB], [{"function": "kept", "module": m["path"]}])
        self.assertEqual(stacks[4 * MiB], [{"function": "step", "file": "train.py", "line": 3, "lang": "python"}])


if __name__ == "__main__":
    unittest.main()
