# tests/report/test_report_recorder_e2e.py — gpumem-report on traces the recorder wrote, byte for byte.
"""End-to-end tests of gpumem-report on REAL recorder traces.

Programs tests/e2e/programs/report_*.cpp run on the simulated CUDA runtime under LD_PRELOAD of the
recorder; their traces go through build/gpumem-report. Each test asserts the exact bytes the
program planted and that the stack names the planting function, in the JSON and in the text
output, and the exit codes of the CI gates.
"""
import os
import shutil
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "e2e"))

from recorder_testlib import LIB, program, run_traced, tempdir, trace_files  # noqa: E402
from reportlib import REPORT, functions, report_json, run_report  # noqa: E402

MiB = 1 << 20
PROGRAMS = ["report_leak", "report_peak", "report_oom", "report_growth", "report_clean"]


def names(stack):
    """Function names without their parameter lists: 'plant_leak(int)' -> 'plant_leak'."""
    return [f.split("(")[0] for f in functions(stack)]


class RecorderTraces(unittest.TestCase):
    """Runs every program once under the recorder; the tests share the traces."""

    @classmethod
    def setUpClass(cls):
        missing = [p for p in [REPORT, LIB] + [program(n) for n in PROGRAMS] if not os.path.exists(p)]
        if missing:
            raise unittest.SkipTest(f"not built: {', '.join(missing)}")
        cls.root = tempdir()
        cls.traces = {}

        def trace(key, args, env=None):
            out = os.path.join(cls.root, key)
            os.makedirs(out)
            proc = run_traced(args, out, env=env)
            files = trace_files(out)
            if proc.returncode != 0 or len(files) != 1:
                raise AssertionError(f"{args}: exit {proc.returncode}, traces {files}\n{proc.stdout}{proc.stderr}")
            cls.traces[key] = files[0]

        trace("leak", [program("report_leak")])
        trace("leak3", [program("report_leak"), "3"])
        trace("peak", [program("report_peak"), "64"])
        trace("peak_bigger", [program("report_peak"), "96"])
        trace("oom_capacity", [program("report_oom"), "capacity"], env={"GPUMEMTRACE_SIM_CAPACITY": "64M"})
        trace("oom_fragmentation", [program("report_oom"), "fragmentation"],
              env={"GPUMEMTRACE_SIM_CAPACITY": "110M"})
        trace("growth", [program("report_growth"), "50"])
        trace("clean", [program("report_clean")])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)

    def json(self, key, *options, rc=0):
        return report_json(*options, self.traces[key], rc=rc)

    def text(self, key, *options, rc=0):
        return run_report(*options, self.traces[key], check_rc=rc)

    # --- leaks ---------------------------------------------------------------------------------

    def test_leak_json(self):
        r = self.json("leak")
        self.assertEqual(r["summary"]["leaked_bytes"], 3 * MiB)
        self.assertEqual(r["summary"]["leaked_count"], 1)
        self.assertEqual(len(r["leaks"]), 1, r["leaks"])
        leak = r["leaks"][0]
        self.assertEqual((leak["bytes"], leak["count"], leak["level"], leak["kind"]), (3 * MiB, 1, "allocation", "device"))
        self.assertEqual(names(leak["stack"])[:2], ["plant_leak", "main"])
        self.assertTrue(leak["stack"][0]["file"].endswith("report_leak.cpp"))
        self.assertGreater(leak["stack"][0]["line"], 0)
        # Everything else (weights, scratch loop, pinned memory) was freed.
        s = r["summary"]
        self.assertEqual((s["allocations"], s["frees"], s["failed_allocations"], s["dropped_events"]), (13, 12, 0, 0))
        self.assertTrue(s["complete"])

    def test_leak_grouped_by_stack(self):
        leak = self.json("leak3")["leaks"]
        self.assertEqual([(l["bytes"], l["count"]) for l in leak], [(9 * MiB, 3)])
        self.assertIn("plant_leak", names(leak[0]["stack"]))

    def test_leak_text_and_gate(self):
        out = self.text("leak").stdout
        self.assertIn("leaks: 3.0 MiB in 1 allocation", out)
        self.assertRegex(out, r"plant_leak \(.*report_leak\.cpp:\d+\)")  # C++ names shortened
        self.assertRegex(self.text("leak", "--full-names").stdout, r"plant_leak\(int\) \(.*report_leak\.cpp:\d+\)")
        failed = self.text("leak", "--fail-on-leak", rc=1)
        self.assertIn("leaked 3.0 MiB in 1 allocation, allocated here:", failed.stderr)
        self.assertIn("plant_leak", failed.stderr)
        self.text("leak", "--fail-on-leak=4MiB", rc=0)
        self.text("leak", "--fail-on-leak=2M", rc=1)
        self.text("leak3", "--fail-on-leak=8MiB", rc=1)

    def test_leak_suppressed(self):
        supp = os.path.join(self.root, "leak.supp")
        with open(supp, "w") as f:
            f.write("# the planted leak is known\nleak:plant_leak\n")
        r = self.json("leak", "--suppressions", supp, "--fail-on-leak")
        self.assertTrue(r["leaks"][0]["suppressed"])

    # --- peaks ---------------------------------------------------------------------------------

    def test_peak_culprit(self):
        r = self.json("peak")
        self.assertEqual(r["leaks"], [])
        (peak,) = r["peaks"]
        self.assertEqual(peak["device"], 0)
        self.assertEqual(peak["bytes"], 68 * MiB)
        top = peak["culprits"][0]
        self.assertEqual((top["bytes"], top["count"]), (64 * MiB, 1))
        self.assertEqual(names(top["stack"])[:2], ["plant_peak_culprit", "main"])
        self.assertEqual(peak["culprits"][1]["bytes"], 4 * MiB)
        self.assertIn("load_weights", names(peak["culprits"][1]["stack"]))
        self.assertEqual(sum(c["bytes"] for c in peak["culprits"]) + peak["other_bytes"], 68 * MiB)
        out = self.text("peak").stdout
        self.assertIn("peak (device 0): 68.0 MiB reserved", out)
        self.assertRegex(out, r"64\.0 MiB \(94%\) in 1 allocation:\n\s+plant_peak_culprit \(")

    def test_diff_peak_increase_gate(self):
        base, new = self.traces["peak"], self.traces["peak_bigger"]
        d = report_json("diff", base, new)
        (p,) = d["peaks"]
        self.assertEqual((p["base_bytes"], p["new_bytes"], p["delta_bytes"]), (68 * MiB, 100 * MiB, 32 * MiB))
        top = p["culprits"][0]
        self.assertEqual((top["base_bytes"], top["new_bytes"], top["delta_bytes"]), (64 * MiB, 96 * MiB, 32 * MiB))
        self.assertIn("plant_peak_culprit", names(top["stack"]))
        failed = run_report("diff", "--fail-on-peak-increase=10%", base, new, check_rc=1)
        self.assertIn("plant_peak_culprit", failed.stderr + failed.stdout)
        run_report("diff", "--fail-on-peak-increase=50%", base, new, check_rc=0)
        run_report("diff", "--fail-on-peak-increase=32MiB", base, new, check_rc=0)
        run_report("diff", "--fail-on-peak-increase=16MiB", base, new, check_rc=1)
        run_report("diff", "--fail-on-peak-increase=0", new, base, check_rc=0)  # a decrease passes
        out = run_report("diff", base, new, check_rc=0).stdout
        self.assertIn("68.0 MiB -> 100.0 MiB (+32.0 MiB)", out)

    # --- OOMs ----------------------------------------------------------------------------------

    def test_oom_capacity(self):
        r = self.json("oom_capacity")
        self.assertEqual(r["summary"]["failed_allocations"], 1)
        (oom,) = r["ooms"]
        self.assertEqual(oom["verdict"], "capacity")
        self.assertEqual((oom["requested"], oom["live_bytes"]), (32 * MiB, 48 * MiB))
        self.assertEqual((oom["device_free"], oom["device_total"]), (16 * MiB, 64 * MiB))
        self.assertEqual(oom["api"], "cudaMalloc")
        self.assertEqual(names(oom["stack"])[:2], ["plant_capacity_oom", "run_capacity"])
        self.assertEqual(oom["top_holders"][0]["bytes"], 48 * MiB)
        self.assertIn("run_capacity", names(oom["top_holders"][0]["stack"]))
        self.assertEqual(r["leaks"], [])
        out = self.text("oom_capacity").stdout
        self.assertIn("OOM (device 0): 32.0 MiB requested", out)
        self.assertIn("(cudaMalloc): capacity", out)
        self.assertIn("device free 16.0 MiB of 64.0 MiB", out)
        self.assertIn("plant_capacity_oom (", out)

    def test_oom_fragmentation(self):
        r = self.json("oom_fragmentation")
        ooms = r["ooms"]
        # The allocator first asks CUDA for a new segment (fails: 10 MiB free on the device), then
        # reports its own OOM: one request, so one incident with both attempts. Fragmentation: 60 MiB
        # free in all, no hole of 20 MiB.
        self.assertEqual([o["api"] for o in ooms], ["gpumemtrace_block_oom"])
        self.assertEqual([a["api"] for a in ooms[0]["attempts"]], ["cudaMalloc", "gpumemtrace_block_oom"])
        self.assertEqual(ooms[0]["attempts_total"], 2)
        self.assertIn("free memory is split", ooms[0]["advice"])
        for oom in ooms:
            self.assertEqual(oom["verdict"], "fragmentation", oom)
            self.assertEqual(oom["requested"], 20 * MiB)
            self.assertEqual((oom["live_bytes"], oom["allocated_bytes"]), (100 * MiB, 50 * MiB))
            self.assertEqual(oom["device_free"], 10 * MiB)
            self.assertEqual(oom["fragmentation"], {"reserved": 100 * MiB, "allocated": 50 * MiB,
                                                    "free_in_reserved": 50 * MiB,
                                                    "largest_free_block": 10 * MiB, "ratio": 0.8})
            self.assertIn("plant_fragmentation_oom", names(oom["stack"]))
            holder = oom["top_holders"][0]
            self.assertEqual((holder["bytes"], holder["count"]), (50 * MiB, 5))
            self.assertIn("run_fragmentation", names(holder["stack"]))
        self.assertEqual(r["summary"]["block_ooms"], 1)
        (frag,) = r["fragmentation"]
        self.assertEqual(len(frag["at_ooms"]), 1)
        self.assertEqual(frag["at_peak"]["allocated"], 100 * MiB)
        (peak,) = r["peaks"]
        self.assertEqual((peak["bytes"], peak["allocated"]["bytes"]), (100 * MiB, 100 * MiB))
        self.assertEqual(r["leaks"], [])  # the allocator emptied its cache at the end
        out = self.text("oom_fragmentation").stdout
        self.assertIn("OOM (device 0): 20.0 MiB requested", out)
        self.assertIn("(gpumemtrace_block_oom): fragmentation", out)
        self.assertIn("free inside segments 50.0 MiB, largest free block 10.0 MiB, fragmentation 0.80", out)
        self.assertIn("plant_fragmentation_oom (", out)

    # --- growth --------------------------------------------------------------------------------

    def test_growth_flags_only_the_accumulation(self):
        r = self.json("growth")
        self.assertEqual(r["leaks"], [])  # everything is freed at the end
        self.assertEqual(len(r["growth"]), 1, [names(g["stack"]) for g in r["growth"]])
        g = r["growth"][0]
        self.assertEqual(names(g["stack"])[:2], ["plant_accumulation", "main"])
        self.assertEqual((g["first_bytes"], g["peak_bytes"], g["final_bytes"]), (MiB, 50 * MiB, 0))
        self.assertEqual((g["bytes"], g["count"], g["rises"]), (49 * MiB, 50, 50))
        self.assertEqual(g["level"], "allocation")
        # The peak shows who held what: the accumulation, the one-off table, one churn buffer.
        culprits = {names(c["stack"])[0]: c["bytes"] for c in r["peaks"][0]["culprits"]}
        self.assertEqual(culprits, {"plant_accumulation": 49 * MiB, "one_off": 16 * MiB, "churn": MiB})
        out = self.text("growth").stdout
        self.assertIn("growth (device 0): 1.0 MiB -> 50.0 MiB in 50 rises", out)
        self.assertIn("plant_accumulation (", out.split("growth (device 0)")[1])
        self.assertNotIn("churn (", out.split("growth (device 0)")[1])
        failed = self.text("growth", "--fail-on-growth", rc=1)
        self.assertIn("plant_accumulation", failed.stderr)
        self.text("growth", "--fail-on-leak", rc=0)

    # --- clean ---------------------------------------------------------------------------------

    def test_clean_program(self):
        r = self.json("clean", "--fail-on-leak", "--fail-on-growth")
        self.assertEqual(r["leaks"], [])
        self.assertEqual(r["growth"], [])
        self.assertEqual(r["ooms"], [])
        s = r["summary"]
        self.assertEqual((s["leaked_bytes"], s["failed_allocations"], s["dropped_events"]), (0, 0, 0))
        self.assertEqual(s["allocations"], s["frees"])
        self.assertEqual(s["allocations"], 2 + 3 * 20 * 2)  # weights, staging, 2 per step
        # The pinned staging buffer (cudaMallocHost) is host RAM: its own line, not in the device's peak.
        (peak,) = r["peaks"]
        self.assertEqual(peak["bytes"], 32 * MiB + 6 * MiB + MiB)
        pinned = r["processes"][0]["pinned_host"]
        self.assertEqual((pinned["allocations"], pinned["frees"], pinned["peak_bytes"], pinned["live_bytes"]),
                         (1, 1, 64 * 1024, 0))
        self.assertEqual(peak["phase"], "epoch 0")
        out = self.text("clean", "--fail-on-leak", "--fail-on-growth").stdout
        self.assertIn("leaks: none", out)
        self.assertIn("growth: none", out)

    def test_directory_of_traces(self):
        # Every program's trace in one directory: one report per process, gates over all of them.
        everything = os.path.join(self.root, "all")
        os.makedirs(everything, exist_ok=True)
        for key in ("leak", "clean"):
            shutil.copy(self.traces[key], everything)
        r = report_json(everything)
        self.assertEqual(r["summary"]["processes"], 2)
        self.assertEqual(r["summary"]["leaked_bytes"], 3 * MiB)
        run_report("--fail-on-leak", everything, check_rc=1)


if __name__ == "__main__":
    unittest.main()
