# tests/report/test_report_scenarios.py — leaks, peaks, OOMs, gates and diff on recorder-shaped traces.
"""End-to-end cases of the report on traces shaped like the recorder's (tracegen.py): a planted leak,
peak culprit, OOMs (capacity, fragmentation), accumulation, a clean program, the gates and diff.

The same cases on real recorder traces (programs on the simulated runtime under LD_PRELOAD):
test_report_recorder_e2e.py.
"""
import json
import os
import subprocess
import tempfile

from reportlib import ReportTestCase, functions, report_json, run_report
from tracegen import KiB, MiB, Trace


class Scenarios(ReportTestCase):
    def setUp(self):
        super().setUp()
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def training_loop(self, name, retain=False, iterations=50, footer=True):
        """Each iteration allocates and frees activations; with retain, also keeps 1 MiB."""
        t = Trace(self.path(name))
        weights = t.stack("load_weights", 30)
        act = t.stack("forward_activations", 40)
        keep = t.stack("accumulate_loss", 50, python="train_step")
        t.mark("init")
        t.alloc(0x10000000, 8 * MiB, weights)
        for i in range(iterations):
            t.mark("step")
            t.alloc(0x20000000, 4 * MiB, act)
            if retain:
                t.alloc(0x40000000 + i * MiB, MiB, keep)
            t.free(0x20000000)
        t.free(0x10000000)
        if retain:
            for i in range(iterations):
                t.free(0x40000000 + i * MiB)
        t.close(footer)
        return t.f.name

    def test_planted_leak_exact_bytes_and_stack(self):
        t = Trace(self.path("leak.jsonl"))
        leak = t.stack("plant_leak", 12)
        ok = t.stack("balanced", 20)
        for i in range(3):
            t.alloc(0x1000000 + i * 0x100000, 1000 + i, leak)
        t.alloc(0x9000000, 5 * MiB, ok)
        t.free(0x9000000)
        t.close()
        report = report_json(t.f.name)
        self.assertEqual(report["summary"]["leaked_bytes"], 3003)
        self.assertEqual(report["summary"]["allocations"], 4)
        self.assertEqual(report["summary"]["frees"], 1)
        self.assertEqual(len(report["leaks"]), 1)
        self.assertEqual(report["leaks"][0]["bytes"], 3003)
        self.assertEqual(report["leaks"][0]["count"], 3)
        self.assertIn("plant_leak", functions(report["leaks"][0]["stack"]))
        # The gate: exit 1, with the pytest-memray style message and the trimmed stack.
        proc = run_report("--fail-on-leak", t.f.name, check_rc=1)
        self.assertIn("leaked 2.9 KiB in 3 allocations, allocated here:", proc.stderr)
        self.assertIn("plant_leak (/src/app.cu:12)", proc.stderr)
        self.assertNotIn("cudaMalloc", proc.stderr.split("allocated here:")[1])  # libcudart frame trimmed
        run_report("--fail-on-leak=4K", t.f.name, check_rc=0)
        run_report("--fail-on-leak=2KiB", t.f.name, check_rc=1)
        # Suppressed by function name: the gate passes.
        sup = self.path("sup.txt")
        with open(sup, "w") as f:
            f.write("# known\nleak:plant_*\n")
        proc = run_report("--suppressions", sup, "--fail-on-leak", t.f.name, check_rc=0)
        report = report_json("--suppressions", sup, t.f.name)
        self.assertEqual(report["summary"]["leaked_bytes"], 0)
        self.assertTrue(report["leaks"][0]["suppressed"])

    def test_planted_peak_culprit(self):
        t = Trace(self.path("peak.jsonl"))
        big = t.stack("plant_peak", 7)
        small = t.stack("small_buffers", 8)
        t.alloc(0x1000000, 2 * MiB, small)
        t.alloc(0x2000000, 2 * MiB, small)
        t.mark("forward")
        t.alloc(0x10000000, 60 * MiB, big)
        peak_t = t.t
        t.free(0x10000000)
        t.alloc(0x10000000, 10 * MiB, big)  # a later, lower high
        t.free(0x10000000)
        t.free(0x1000000)
        t.free(0x2000000)
        t.close()
        peaks = report_json(t.f.name)["peaks"]
        self.assertEqual(len(peaks), 1)
        peak = peaks[0]
        self.assertEqual(peak["device"], 0)
        self.assertEqual(peak["bytes"], 64 * MiB)
        self.assertEqual(peak["time_ns"], peak_t)
        self.assertEqual(peak["phase"], "forward")
        self.assertEqual(peak["culprits"][0]["bytes"], 60 * MiB)
        self.assertEqual(peak["culprits"][0]["count"], 1)
        self.assertIn("plant_peak", functions(peak["culprits"][0]["stack"]))
        self.assertEqual(peak["culprits"][1]["bytes"], 4 * MiB)
        self.assertEqual(peak["culprits"][1]["count"], 2)

    def test_oom_capacity(self):
        t = Trace(self.path("cap.jsonl"), devices=((0, "Sim", 100 * MiB),))
        hold = t.stack("hold_memory", 5)
        want = t.stack("plant_oom", 6)
        t.alloc(0x1000000, 90 * MiB, hold)
        t.failed_alloc(20 * MiB, want)
        t.meminfo(5 * MiB, 100 * MiB)
        t.close()
        report = report_json(t.f.name)
        self.assertEqual(report["summary"]["failed_allocations"], 1)
        oom = report["ooms"][0]
        self.assertEqual(oom["requested"], 20 * MiB)
        self.assertEqual(oom["live_bytes"], 90 * MiB)
        self.assertEqual(oom["device_free"], 5 * MiB)
        self.assertEqual(oom["device_total"], 100 * MiB)
        self.assertEqual(oom["verdict"], "capacity")
        self.assertIn("plant_oom", functions(oom["stack"]))
        self.assertIn("hold_memory", functions(oom["top_holders"][0]["stack"]))

    def fragmented_trace(self, name):
        """Fragmentation: 100 MiB of segments, live blocks leave 40 MiB free in 10 MiB gaps,
        20 MiB requested, device free 5 MiB."""
        t = Trace(self.path(name), devices=((0, "Sim", 105 * MiB),))
        seg = t.stack("CachingAllocator::malloc", 3)
        user = t.stack("plant_blocks", 4)
        want = t.stack("plant_frag_oom", 5)
        t.alloc(0x100000000, 100 * MiB, seg, api="cudaMalloc")
        base = 0x100000000
        # 10 slots of 10 MiB: blocks in the 6 even-ish slots, gaps of 10 MiB in 4 slots.
        used = [0, 1, 3, 5, 7, 8]
        for slot in used:
            t.block_alloc(base + slot * 10 * MiB, 10 * MiB, user, segment=base)
        t.block_oom(20 * MiB, want)
        t.meminfo(5 * MiB, 105 * MiB)
        t.close()
        return t.f.name

    def test_oom_fragmentation_through_blocks(self):
        report = report_json(self.fragmented_trace("frag.jsonl"))
        oom = report["ooms"][0]
        self.assertEqual(oom["op"], "block_oom")
        self.assertEqual(oom["requested"], 20 * MiB)
        self.assertEqual(oom["verdict"], "fragmentation")
        self.assertEqual(oom["fragmentation"]["free_in_reserved"], 40 * MiB)
        self.assertEqual(oom["fragmentation"]["largest_free_block"], 10 * MiB)
        self.assertAlmostEqual(oom["fragmentation"]["ratio"], 0.75)
        self.assertIn("plant_frag_oom", functions(oom["stack"]))
        self.assertIn("plant_blocks", functions(oom["top_holders"][0]["stack"]))
        # Peaks have both levels; the live blocks leak, the free part of the segment is cached.
        peak = report["peaks"][0]
        self.assertEqual(peak["bytes"], 100 * MiB)
        self.assertEqual(peak["allocated"]["bytes"], 60 * MiB)
        self.assertEqual(report["summary"]["leaked_bytes"], 60 * MiB)
        self.assertEqual(report["summary"]["cached_bytes"], 40 * MiB)
        self.assertEqual([l["level"] for l in report["leaks"]], ["block"])
        frag = report["fragmentation"][0]
        self.assertEqual(frag["at_ooms"][0]["largest_free_block"], 10 * MiB)
        self.assertTrue(frag["timeline"])

    def test_planted_accumulation_flagged(self):
        path = self.training_loop("grow.jsonl", retain=True)
        report = report_json(path)
        self.assertEqual(report["summary"]["leaked_bytes"], 0)  # freed at the end, still growth
        self.assertEqual(len(report["growth"]), 1, report["growth"])
        growth = report["growth"][0]
        self.assertIn("accumulate_loss", functions(growth["stack"]))
        self.assertIn("train_step", functions(growth["stack"]))  # the Python frame
        self.assertEqual(growth["peak_bytes"], 50 * MiB)
        self.assertEqual(growth["bytes"], 49 * MiB)
        self.assertEqual(growth["rises"], 50)
        proc = run_report("--fail-on-growth", path, check_rc=1)
        self.assertIn("accumulate_loss (/src/app.cu:50)", proc.stderr)

    def test_clean_program_no_leak_no_growth(self):
        path = self.training_loop("clean.jsonl", retain=False)
        report = report_json(path)
        self.assertEqual(report["leaks"], [])
        self.assertEqual(report["growth"], [])
        self.assertEqual(report["summary"]["leaked_bytes"], 0)
        self.assertTrue(report["summary"]["complete"])
        run_report("--fail-on-leak", "--fail-on-growth", path, check_rc=0)
        text = run_report(path, check_rc=0).stdout
        self.assertIn("leaks: none", text)
        self.assertIn("growth: none", text)

    def test_one_off_and_warmup_not_growth(self):
        t = Trace(self.path("warm.jsonl"))
        params = t.stack("init_params", 9)
        act = t.stack("step_activations", 10)
        for i in range(40):  # a warm-up loop keeping memory: highs packed at the start
            t.alloc(0x10000000 + i * MiB, MiB, params)
        for i in range(200):
            t.alloc(0x90000000, 2 * MiB + (i % 7) * KiB, act)
            t.free(0x90000000)
        t.close()
        self.assertEqual(report_json(t.f.name)["growth"], [])

    def cache_loop(self, name, fill_iterations, iterations=200):
        """A training loop whose cache keeps 1 MiB per iteration for `fill_iterations`, then evicts
        its oldest entry for each new one (bounded), beside a per-step buffer freed each step."""
        t = Trace(self.path(name))
        cache, step = t.stack("cache_insert", 20), t.stack("step_buffer", 21)
        for i in range(iterations):
            if i >= fill_iterations:
                t.free(0x10000000 + (i - fill_iterations) * MiB)
            t.alloc(0x10000000 + i * MiB, MiB, cache)
            t.alloc(0x90000000, 4 * MiB, step)
            t.free(0x90000000)
        t.close()
        return t.f.name

    def test_bounded_cache_is_not_growth(self):
        # Issue 19: a cache filled during the first half of the run, flat after, failed
        # --fail-on-growth with "memory allocated here is kept every iteration".
        path = self.cache_loop("bounded.jsonl", fill_iterations=100)
        self.assertEqual(report_json(path)["growth"], [])
        run_report("--fail-on-growth", path, check_rc=0)
        # Filled over three quarters of the run: still not rising in its last part.
        self.assertEqual(report_json(self.cache_loop("late.jsonl", fill_iterations=140))["growth"], [])

    def test_cache_growing_to_the_end_is_growth(self):
        path = self.cache_loop("unbounded.jsonl", fill_iterations=200)
        (growth,) = report_json(path)["growth"]
        self.assertIn("cache_insert", functions(growth["stack"]))
        self.assertEqual(growth["rises"], 200)
        run_report("--fail-on-growth", path, check_rc=1)

    def test_buffer_a_little_larger_each_time_and_freed_is_not_growth(self):
        # A new high every iteration, but nothing kept: it is not "kept every iteration".
        t = Trace(self.path("larger.jsonl"))
        s = t.stack("make_scratch", 22)
        for i in range(200):
            t.alloc(0x90000000, MiB + i, s)
            t.free(0x90000000)
        t.close()
        self.assertEqual(report_json(t.f.name)["growth"], [])
        run_report("--fail-on-growth", t.f.name, check_rc=0)

    def test_buffer_regrown_while_kept_is_growth(self):
        # torch.cat(cache, new): the larger copy is made before the old one is freed; the memory
        # held grows every iteration.
        t = Trace(self.path("regrown.jsonl"))
        s = t.stack("grow_cache", 23)
        for i in range(1, 101):
            t.alloc(0x10000000 * (1 + i % 2), i * MiB, s)
            if i > 1:
                t.free(0x10000000 * (1 + (i - 1) % 2))
        t.close()
        (growth,) = report_json(t.f.name)["growth"]
        self.assertIn("grow_cache", functions(growth["stack"]))

    def test_killed_truncated_dropped(self):
        path = self.training_loop("killed.jsonl", footer=False)
        with open(path, "a") as f:
            f.write('{"type":"event","seq":99999,"t":1,"op":"al')
        t = Trace(self.path("dropped.jsonl"))
        t.dropped(120)
        t.close()
        proc = run_report(path, check_rc=0)
        self.assertIn("no footer", proc.stdout)
        self.assertIn("truncated last line", proc.stdout)
        report = report_json(path)
        self.assertFalse(report["summary"]["complete"])
        self.assertTrue(report["processes"][0]["truncated"])
        dropped = report_json(t.f.name)
        self.assertTrue(dropped["summary"]["incomplete"])
        self.assertEqual(dropped["summary"]["dropped_events"], 120)
        self.assertIn("INCOMPLETE", run_report(t.f.name).stdout)

    def test_zstd_and_directory_spread(self):
        os.mkdir(self.path("ranks"))
        for rank, size in enumerate((10, 30)):
            t = Trace(self.path(f"ranks/rank{rank}.jsonl"), pid=100 + rank)
            s = t.stack("rank_work", 3)
            t.alloc(0x1000, size * MiB, s)
            t.free(0x1000)
            t.close()
        subprocess.run(["zstd", "-q", "--rm", self.path("ranks/rank1.jsonl")], check=True)
        report = report_json(self.path("ranks"))
        self.assertEqual(report["summary"]["processes"], 2)
        self.assertEqual(report["spread"]["peak_bytes"]["min"], 10 * MiB)
        self.assertEqual(report["spread"]["peak_bytes"]["max"], 30 * MiB)
        self.assertEqual(report["spread"]["peak_bytes"]["max_pid"], 101)
        self.assertIn("spread over 2 processes", run_report(self.path("ranks")).stdout)

    def test_physical_virtual_async_reset(self):
        t = Trace(self.path("kinds.jsonl"))
        create = t.stack("plant_cumemcreate", 3)
        pool_alloc = t.stack("plant_async", 4)
        t.event("reserve", "virtual", 0x7000000000, 1 << 30, create, api="cuMemAddressReserve", result=0)
        t.alloc(0xabc, 64 * MiB, create, kind="physical", api="cuMemCreate")
        t.event("map", "physical", 0x7000000000, 64 * MiB, create, api="cuMemMap", handle="0xabc", result=0)
        t.alloc(0x5000000, 8 * MiB, pool_alloc, kind="async", api="cudaMallocAsync", pool="0x99")
        t.free(0x5000000, kind="async", api="cudaFreeAsync", pool="0x99")
        t.event("trim", "async", 0, 2 * MiB, 0, api="cudaMemPoolTrimTo", pool="0x99")
        t.close()
        report = report_json(t.f.name)
        self.assertEqual(report["peaks"][0]["bytes"], 72 * MiB)
        self.assertEqual(report["summary"]["leaked_bytes"], 64 * MiB)  # virtual never counts
        self.assertEqual(report["leaks"][0]["level"], "physical")
        self.assertIn("plant_cumemcreate", functions(report["leaks"][0]["stack"]))
        self.assertEqual(report["summary"]["cached_bytes"], 2 * MiB)
        # A reset ends everything on the device.
        t2 = Trace(self.path("reset.jsonl"))
        s = t2.stack("before_reset", 1)
        t2.alloc(0x1000, MiB, s)
        t2.event("reset", "none", 0, 0, 0, api="cudaDeviceReset", result=0)
        t2.close()
        self.assertEqual(report_json(t2.f.name)["leaks"], [])

    def test_diff_peak_increase_gate(self):
        base = self.training_loop("base.jsonl")
        t = Trace(self.path("new.jsonl"))
        weights = t.stack("load_weights", 30)
        extra = t.stack("plant_regression", 60)
        t.alloc(0x10000000, 8 * MiB, weights)
        t.alloc(0x30000000, 8 * MiB, extra)
        t.free(0x30000000)
        t.free(0x10000000)
        t.close()
        diff = report_json("diff", base, t.f.name)
        self.assertEqual(diff["peaks"][0]["base_bytes"], 12 * MiB)
        self.assertEqual(diff["peaks"][0]["new_bytes"], 16 * MiB)
        self.assertIn("plant_regression", functions(diff["peaks"][0]["culprits"][0]["stack"]))
        proc = run_report("diff", "--fail-on-peak-increase=10%", base, t.f.name, check_rc=1)
        self.assertIn("plant_regression (/src/app.cu:60)", proc.stderr)
        run_report("diff", "--fail-on-peak-increase=5M", base, t.f.name, check_rc=0)
        run_report("diff", "--fail-on-peak-increase=2M", base, t.f.name, check_rc=1)

    def run_dir(self, name, processes):
        """A directory of traces: (file, pid, start offset in s, header fields, peak MiB, leaked MiB) each."""
        os.mkdir(self.path(name))
        for file, pid, start, header, peak, leaked in processes:
            t = Trace(self.path(f"{name}/{file}"), pid=pid, start_time_ns=1763791200000000000 + start * 10**9,
                      **header)
            t.alloc(0x1000, peak * MiB, t.stack("work", 3))
            t.free(0x1000)
            if leaked:
                t.alloc(0x2000000, leaked * MiB, t.stack("leak_here", 4))
            t.close()
        return self.path(name)

    def test_diff_pairs_processes_by_rank(self):
        # Issue 19: processes were paired by file names sorted as strings, pid 10000 before 9999.
        base = self.run_dir("base_ranks", [("app.10000.jsonl", 10000, 1, {"rank": 1}, 10, 0),
                                           ("app.9999.jsonl", 9999, 0, {"rank": 0}, 100, 0)])
        new = self.run_dir("new_ranks", [("app.20000.jsonl", 20000, 1, {"rank": 0}, 100, 0),
                                         ("app.3.jsonl", 3, 0, {"rank": 1}, 10, 0)])
        d = report_json("diff", base, new)
        self.assertEqual([(p["by"], p["base"]["rank"], p["base"]["pid"], p["new"]["pid"]) for p in d["pairs"]],
                         [("rank", 0, 9999, 20000), ("rank", 1, 10000, 3)])
        self.assertEqual([(p["rank"], p["delta_bytes"]) for p in d["peaks"]], [(0, 0), (1, 0)])
        run_report("diff", "--fail-on-peak-increase=0", base, new, check_rc=0)
        text = run_report("diff", base, new).stdout
        self.assertIn("peak (rank 0, device 0): 100.0 MiB -> 100.0 MiB (+0 B)", text)

    def test_diff_pairs_processes_without_rank_by_start_order(self):
        base = self.run_dir("base_start", [("app.10000.jsonl", 10000, 0, {}, 100, 0),
                                           ("app.9999.jsonl", 9999, 1, {}, 10, 0)])
        new = self.run_dir("new_start", [("app.10001.jsonl", 10001, 0, {}, 100, 0),
                                         ("app.9998.jsonl", 9998, 1, {}, 10, 0)])
        d = report_json("diff", base, new)
        self.assertEqual([(p["by"], p["base"]["pid"], p["new"]["pid"]) for p in d["pairs"]],
                         [("start order", 10000, 10001), ("start order", 9999, 9998)])
        self.assertEqual([p["delta_bytes"] for p in d["peaks"]], [0, 0])
        self.assertIn("peak (pid 10000 -> 10001, device 0)", run_report("diff", base, new).stdout)

    def test_diff_with_unequal_process_counts_compares_the_pairs_only(self):
        base = self.run_dir("base_two", [("app.1.jsonl", 1, 0, {"rank": 0}, 10, 5),
                                         ("app.2.jsonl", 2, 0, {"rank": 1}, 10, 50)])
        new = self.run_dir("new_one", [("app.7.jsonl", 7, 0, {"rank": 0}, 10, 5)])
        d = report_json("diff", base, new)
        self.assertEqual([(p["base"]["rank"], p["new"]["rank"]) for p in d["pairs"]], [(0, 0)])
        self.assertEqual([(p["rank"], p["pid"]) for p in d["only_base"]], [(1, 2)])
        self.assertEqual(d["only_new"], [])
        self.assertEqual(len(d["peaks"]), 1)
        # The leak line compares rank 0 with rank 0: rank 1's 50 MiB is in no figure.
        self.assertEqual((d["summary"]["base_leaked_bytes"], d["summary"]["new_leaked_bytes"]), (5 * MiB, 5 * MiB))
        self.assertEqual(d["leaks"], [])
        self.assertTrue(any("only in BASE: " in w and "app.2.jsonl (rank 1)" in w for w in d["warnings"]), d["warnings"])
        text = run_report("diff", base, new).stdout
        self.assertIn("leaks (of the pairs): 5.0 MiB -> 5.0 MiB", text)

    def test_duration_is_first_to_last_event(self):
        # Issue 19: "45.4 ms" for events spanning 760 us: the footer's end_time counts the recorder's
        # own work at exit.
        t = Trace(self.path("duration.jsonl"))
        s = t.stack("work", 3)
        t.alloc(0x1000, MiB, s)
        t.free(0x1000, dt=760_000)
        t.close(end_time=t.t + 45_400_000)
        self.assertEqual(report_json(t.f.name)["processes"][0]["duration_ns"], 760_000)
        self.assertIn("2 events over 760.0 us, clean exit", run_report(t.f.name).stdout)

    def test_usage_errors_exit_2(self):
        run_report(check_rc=2)
        run_report("--bogus", "x", check_rc=2)
        run_report("--fail-on-leak=lots", "x", check_rc=2)
        run_report(self.path("missing.jsonl"), check_rc=2)
        run_report("diff", "only-one", check_rc=2)
        self.assertIn("usage", run_report("--help", check_rc=0).stdout)
