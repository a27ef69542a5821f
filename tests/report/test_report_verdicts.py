# tests/report/test_report_verdicts.py — the verdicts on traces built from real PyTorch patterns.
"""The verdicts that must hold on real PyTorch programs, on traces built from the real
patterns (tracegen): held-at-exit classes, scoped leak checks (nested, several threads), one OOM
incident per request, failed calls that are not OOMs, allocator limits, growth past a burst of
chunked allocations, roles and the attribution of frameless autograd blocks. The same patterns
recorded on an H100 are checked in test_report_real_traces.py; a real recorder run with a fake
cuBLAS is in RecorderLibraryWorkspace below."""
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "e2e"))

from recorder_testlib import LIB, PROGRAMS, program, run_traced, trace_files  # noqa: E402
from reportlib import REPORT, ReportTestCase, functions, report_json, run_report  # noqa: E402
from tracegen import MiB, Trace  # noqa: E402

GiB = 1 << 30
TORCH = "/opt/venv/lib/python3.12/site-packages/torch"


class Verdicts(ReportTestCase):
    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def trace(self, name="t.jsonl", **kw):
        return Trace(os.path.join(self.dir, name), **kw)

    def pystack(self, t, *frames):
        """A stack of Python frames (function, file, line), innermost first."""
        return t.raw_stack([t.python(*f) for f in frames])

    # --- scopes ----------------------------------------------------------------------------------

    def scope(self, t, op, name, api="pytest", tid=4243, stack=0):
        t.event(op, "none", 0, 0, stack, device=-1, api=api, label=name, tid=tid)

    def test_nested_scopes_on_two_threads(self):
        t = self.trace()
        keep_a, temp_b, kept, handle = (t.stack("keep_a", 11), t.stack("temp_b", 12), t.stack("keep_suite", 13),
                                        t.stack("cublasCreate_v2", 14))
        self.scope(t, "scope_begin", "suite", api="gpumemtrace_scope")
        self.scope(t, "scope_begin", "test_a", tid=1)
        self.scope(t, "scope_begin", "test_b", tid=2)          # runs alongside test_a
        t.alloc(0x1000000, MiB, keep_a, tid=1)                   # outlives test_a (freed after it)
        t.alloc(0x2000000, 2 * MiB, temp_b, tid=2)
        t.alloc(0x3000000, 4 * MiB, handle, tid=2)              # a library's workspace: never a scope leak
        t.free(0x2000000, tid=2)
        self.scope(t, "scope_end", "test_b", tid=2)
        self.scope(t, "scope_end", "test_a", tid=1)
        t.free(0x1000000)                                        # too late for test_a
        t.alloc(0x4000000, 3 * MiB, kept)
        self.scope(t, "scope_end", "suite", api="gpumemtrace_scope")
        t.close()
        r = report_json(t.f.name)
        scopes = {s["name"]: s for s in r["scopes"]}
        self.assertEqual([s["name"] for s in r["scopes"]], ["test_b", "test_a", "suite"])  # in the order they end
        # A scope sees every thread's allocations while it is open (the autograd engine allocates a test's
        # gradients on its own threads): keep_a, made while test_b ran and live at its end, is test_b's too.
        self.assertEqual(scopes["test_b"]["leaked_bytes"], MiB)
        self.assertEqual(scopes["test_a"]["leaked_bytes"], MiB)
        self.assertIn("keep_a", functions(scopes["test_a"]["leaks"][0]["stack"]))
        self.assertEqual(scopes["suite"]["leaked_bytes"], 3 * MiB)  # keep_a was freed before the suite ended
        self.assertEqual(r["summary"]["leaking_scopes"], 3)
        failed = run_report("--fail-on-leak=2MiB", t.f.name, check_rc=1)
        self.assertIn("suite leaked 3.0 MiB", failed.stderr)
        self.assertNotIn("test_a leaked", failed.stderr)  # 1 MiB: under the limit
        # No scope and not the process (3 MiB: the 4 MiB workspace is cuBLAS's) exceed 4 MiB.
        run_report("--fail-on-leak=4MiB", t.f.name, check_rc=0)

    def test_scope_ignores_the_caching_allocators_cache_and_counts_blocks(self):
        t = self.trace()
        seg, use = t.stack("CUDACachingAllocator::malloc", 3), t.stack("use", 4)
        self.scope(t, "scope_begin", "test_cache")
        t.alloc(0x100000000, 20 * MiB, seg)                     # the allocator's segment: its cache
        t.block_alloc(0x100000000, 2 * MiB, use, segment=0x100000000)
        t.block_alloc(0x100200000, 1 * MiB, use, segment=0x100000000)
        t.block_free(0x100000000)
        self.scope(t, "scope_end", "test_cache")
        t.close()
        (scope,) = report_json(t.f.name)["scopes"]
        self.assertEqual((scope["leaked_bytes"], scope["leaked_count"]), (MiB, 1))  # the block, not the segment

    def test_unclosed_scope_reports_what_was_live_at_the_end(self):
        t = self.trace()
        s = t.stack("work", 5)
        self.scope(t, "scope_begin", "test_killed")
        t.alloc(0x1000, 5 * MiB, s)
        t.close(footer=False)
        (scope,) = report_json(t.f.name)["scopes"]
        self.assertFalse(scope["closed"])
        self.assertEqual(scope["leaked_bytes"], 5 * MiB)

    # --- held at exit ------------------------------------------------------------------------------

    def test_library_workspace_and_alive_blocks_are_not_leaks(self):
        t = self.trace()
        handle, seg = t.stack("cublasCreate_v2", 20), t.stack("CUDACachingAllocator::malloc", 21)
        weights = self.pystack(t, ("_apply", TORCH + "/nn/modules/module.py", 965), ("main", "train.py", 5))
        t.alloc(0x1000000, 64 * MiB, handle)
        t.alloc(0x100000000, 20 * MiB, seg)
        t.event("block_alloc", "block", 0x100000000, 8 * MiB, weights, api="torch.alloc", segment="0x100000000")
        t.close()
        r = report_json(t.f.name, "--fail-on-leak")
        self.assertEqual(r["leaks"], [])
        held = {(h["reason"], h.get("library"), h["bytes"]) for h in r["held_at_exit"]}
        self.assertEqual(held, {("library", "cuBLAS", 64 * MiB), ("alive_at_exit", None, 8 * MiB)})
        self.assertEqual(r["summary"]["library_bytes"], 64 * MiB)
        self.assertEqual(r["summary"]["alive_at_exit_bytes"], 8 * MiB)
        run_report("--fail-on-leak", "--no-default-suppressions", t.f.name, check_rc=1)
        run_report("--fail-on-leak=1MiB", "--count-alive-at-exit", t.f.name, check_rc=1)
        text = run_report(t.f.name).stdout
        self.assertIn("held at exit (not leaks): 64.0 MiB by libraries (cuBLAS 64.0 MiB)", text)

    def test_user_held_rule_names_its_library(self):
        t = self.trace()
        t.alloc(0x1000, 2 * MiB, t.stack("mylib_init", 3))
        t.close()
        supp = os.path.join(self.dir, "s.supp")
        with open(supp, "w") as f:
            f.write("held:MyLib:^mylib_\n")
        r = report_json("--suppressions", supp, t.f.name)
        self.assertEqual(r["leaks"], [])
        self.assertEqual(r["held_at_exit"][0]["library"], "MyLib")

    # --- OOM incidents -----------------------------------------------------------------------------

    def test_retried_oom_is_one_incident_and_a_later_one_is_another(self):
        t = self.trace()
        seg, user = t.stack("CUDACachingAllocator::malloc", 3), t.stack("forward", 4)
        t.alloc(0x100000000, 70 * GiB, seg)
        t.failed_alloc(8 * GiB, seg)                      # the allocator's cudaMalloc
        t.meminfo(2 * GiB, 80 * GiB)
        t.free(0x100000000)                               # it frees its cache ...
        t.failed_alloc(8 * GiB, seg)                      # ... and retries
        t.meminfo(2 * GiB, 80 * GiB)
        t.event("block_oom", "block", 0, 8 * GiB, user, api="torch.oom", free=2 * GiB)
        t.event("meminfo", "none", 0, 0, 0, api="cudaMemGetInfo", free=2 * GiB, total=80 * GiB, dt=5 * 10**9)
        t.failed_alloc(16 * GiB, seg)                     # five seconds later: another request
        t.close()
        r = report_json(t.f.name)
        self.assertEqual(len(r["ooms"]), 2)
        first, second = r["ooms"]
        self.assertEqual([a["api"] for a in first["attempts"]], ["cudaMalloc", "cudaMalloc", "torch.oom"])
        self.assertEqual((first["api"], first["requested"]), ("torch.oom", 8 * GiB))
        self.assertIn("forward", functions(first["stack"]))
        self.assertEqual(first["attempts_total"], 3)
        self.assertEqual(second["attempts_total"], 1)
        self.assertEqual(r["summary"]["ooms"], 2)
        self.assertEqual(r["summary"]["failed_allocations"], 3)
        # Others hold 78 GiB of the device after the cache was freed: not this process's capacity.
        self.assertEqual(first["verdict"], "other processes")
        self.assertIn("nvidia-smi", first["advice"])
        text = run_report(t.f.name).stdout
        self.assertEqual(text.count("\nOOM ("), 2)
        self.assertIn("one request, 3 attempts: cudaMalloc 8.0 GiB", text)

    def test_two_requests_on_one_thread_are_two_incidents(self):
        # Issue 19: 100 MiB, then 300 MiB, on one thread, a moment apart: two requests, each with its
        # own size, evidence and verdict (they were one incident with the first size and the last
        # evidence).
        t = self.trace()
        s = t.stack("load_batch", 5)
        t.alloc(0x100000000, 79 * GiB, t.stack("load_model", 4))
        t.failed_alloc(100 * MiB, s)
        t.meminfo(50 * MiB, 80 * GiB)
        t.failed_alloc(300 * MiB, s)
        t.meminfo(280 * MiB, 80 * GiB)
        t.close()
        r = report_json(t.f.name)
        self.assertEqual([(o["requested"], o["attempts_total"], o["device_free"]) for o in r["ooms"]],
                         [(100 * MiB, 1, 50 * MiB), (300 * MiB, 1, 280 * MiB)])
        self.assertEqual([o["verdict"] for o in r["ooms"]], ["capacity", "capacity"])
        self.assertIn("50.0 MiB free", r["ooms"][0]["explanation"])
        self.assertIn("280.0 MiB free", r["ooms"][1]["explanation"])
        self.assertEqual(r["summary"]["ooms"], 2)
        text = run_report(t.f.name).stdout
        self.assertEqual(text.count("\nOOM ("), 2)
        self.assertNotIn("one request", text)

    def test_same_size_again_is_one_request_unless_memory_was_kept_between(self):
        t = self.trace()
        s, other = t.stack("make_buffer", 5), t.stack("keep_result", 6)
        t.alloc(0x100000000, 79 * GiB, t.stack("load_model", 4))
        t.failed_alloc(512 * MiB, s)       # a request ...
        t.alloc(0x200000000, MiB, other)   # ... a scratch buffer, freed again: nothing kept
        t.free(0x200000000)
        t.failed_alloc(512 * MiB, s)       # ... and its retry: one incident
        t.alloc(0x300000000, 8 * MiB, other)  # kept
        t.failed_alloc(512 * MiB, s)       # the same size, after memory was kept: another request
        t.close()
        r = report_json(t.f.name)
        self.assertEqual([o["attempts_total"] for o in r["ooms"]], [2, 1])

    def test_another_threads_allocation_does_not_split_a_request(self):
        t = self.trace()
        s = t.stack("CUDACachingAllocator::malloc", 3)
        t.alloc(0x100000000, 79 * GiB, t.stack("load_model", 4))
        t.failed_alloc(512 * MiB, s)
        t.alloc(0x200000000, 8 * MiB, t.stack("loader_thread", 9), tid=777)  # another thread keeps it
        t.failed_alloc(512 * MiB, s)
        t.close()
        (oom,) = report_json(t.f.name)["ooms"]
        self.assertEqual(oom["attempts_total"], 2)

    def test_allocator_record_joins_only_its_own_request(self):
        t = self.trace()
        seg, user = t.stack("CUDACachingAllocator::malloc", 3), t.stack("forward", 4)
        t.alloc(0x100000000, 79 * GiB, t.stack("load_model", 5))
        # A 3 MiB tensor: PyTorch asks cudaMalloc for a 20 MiB segment (get_allocation_size), retries
        # after freeing its cache, and records the OOM with the request.
        t.failed_alloc(20 * MiB, seg)
        t.failed_alloc(20 * MiB, seg)
        t.event("block_oom", "block", 0, 3 * MiB, user, api="torch.oom")
        # A driver failure of 100 MiB, then an allocator record of 300 MiB: two requests.
        t.failed_alloc(100 * MiB, seg)
        t.event("block_oom", "block", 0, 300 * MiB, user, api="torch.oom")
        t.close()
        r = report_json(t.f.name)
        self.assertEqual([[a["api"] for a in o["attempts"]] for o in r["ooms"]],
                         [["cudaMalloc", "cudaMalloc", "torch.oom"], ["cudaMalloc"], ["torch.oom"]])
        self.assertEqual([o["requested"] for o in r["ooms"]], [3 * MiB, 100 * MiB, 300 * MiB])

    def test_pinned_host_memory_is_its_own_line(self):
        # Issue 19: cudaHostAlloc / cudaMallocHost counted in the device's reserved peak. It is host
        # RAM: its own line, in no device's peak, timeline or OOM figures; never freed, it is a leak.
        t = self.trace()
        staging, model = t.stack("stage_batch", 5), t.stack("load_model", 9)
        t.alloc(0x7f0000000000, 512 * MiB, staging, kind="host", api="cudaHostAlloc")
        t.alloc(0x100000000, 79 * GiB, model)
        t.alloc(0x7f1000000000, 256 * MiB, staging, kind="host", api="cudaMallocHost")
        t.free(0x7f0000000000, kind="host", api="cudaFreeHost")
        t.failed_alloc(2 * GiB, model)
        t.meminfo(GiB - 64 * MiB, 80 * GiB)
        t.free(0x100000000)
        t.close()
        r = report_json(t.f.name)
        (peak,) = r["peaks"]
        self.assertEqual(peak["bytes"], 79 * GiB)
        self.assertNotIn("stage_batch", json.dumps(peak["culprits"]))
        (device,) = r["processes"][0]["devices"]
        self.assertEqual((device["allocations"], device["frees"], device["peak_bytes"]), (1, 1, 79 * GiB))
        self.assertEqual(max(s["reserved"] for s in device["timeline"]), 79 * GiB)
        self.assertEqual(device["leaked_bytes"], 0)
        self.assertEqual(r["processes"][0]["pinned_host"],
                         {"allocations": 2, "frees": 1, "peak_bytes": 768 * MiB,
                          "peak_time_ns": peak["time_ns"] + 1000, "live_bytes": 256 * MiB})
        (oom,) = r["ooms"]
        self.assertEqual(oom["live_bytes"], 79 * GiB)
        self.assertEqual([h["bytes"] for h in oom["top_holders"]], [79 * GiB])
        self.assertEqual(oom["verdict"], "capacity")
        (leak,) = r["leaks"]
        self.assertEqual((leak["level"], leak["kind"], leak["bytes"]), ("host", "host", 256 * MiB))
        self.assertEqual(r["summary"]["leaked_bytes"], 256 * MiB)
        text = run_report(t.f.name).stdout
        self.assertIn("pinned host memory (host RAM, in no device's figures): 2 allocations, 1 free; "
                      "peak 768.0 MiB at 2.0 us; 256.0 MiB live at the end", text)
        self.assertIn("256.0 MiB in 1 allocation (pinned host memory), allocated here:", text)
        # Pinned buffers kept every iteration are growth of their own, not of a device.
        t = self.trace("grow.jsonl")
        pin, step = t.stack("pin_batch", 5), t.stack("step", 9)
        for i in range(100):
            t.alloc(0x7f0000000000 + i * MiB, MiB, pin, kind="host", api="cudaHostAlloc")
            t.alloc(0x1000, 10 * MiB, step)
            t.free(0x1000)
        t.close()
        r = report_json(t.f.name)
        self.assertEqual([(g["device"], g["level"], g["peak_bytes"]) for g in r["growth"]], [(-1, "host", 100 * MiB)])
        self.assertEqual(r["peaks"][0]["bytes"], 10 * MiB)
        self.assertIn("growth (pinned host memory): 1.0 MiB -> 100.0 MiB", run_report(t.f.name).stdout)

    def test_device_figures_that_contradict_each_other_are_flagged_not_used(self):
        # Issue 19: a stand-in's free bytes larger than the device's total were used without a check.
        t = self.trace(devices=((0, "Stand-in GPU", 80 * GiB),))
        s = t.stack("load_batch", 5)
        t.alloc(0x100000000, 10 * GiB, t.stack("load_model", 4))
        t.meminfo(70 * GiB, 80 * GiB)                 # consistent
        t.failed_alloc(100 * GiB, s)
        t.meminfo(120 * GiB, 80 * GiB)                # 120 GiB free of 80: not used
        t.event("block_oom", "block", 0, 100 * GiB, s, api="torch.oom", free=90 * GiB)  # above the known total
        t.close()
        r = report_json(t.f.name)
        (oom,) = r["ooms"]
        self.assertEqual(oom["device_free"], 70 * GiB)  # the latest usable reading, not 120 or 90 GiB
        self.assertNotIn("120.0 GiB", oom["explanation"])
        warnings = r["processes"][0]["warnings"]
        self.assertIn("device 0: 2 readings of its memory with more free bytes than its total "
                      "(120.0 GiB free of 80.0 GiB): figures that contradict each other, not used", warnings)
        # A device record that contradicts itself: its total is not used either.
        t = self.trace("record.jsonl", devices=())
        t._write({"type": "device", "device": 0, "name": "Stand-in GPU", "total": 80 * GiB, "free": 96 * GiB})
        s = t.stack("load_batch", 5)
        t.alloc(0x1000, MiB, s)
        t.failed_alloc(100 * GiB, s)
        t.close()
        r = report_json(t.f.name)
        self.assertEqual(r["processes"][0]["devices"][0]["total"], 0)
        self.assertIsNone(r["ooms"][0]["device_total"])
        self.assertIn("not used", " ".join(r["processes"][0]["warnings"]))

    def test_failures_that_are_not_out_of_memory(self):
        t = self.trace()
        s = t.stack("probe_fabric", 7)
        t.event("alloc", "physical", 0, 20 * MiB, s, api="cuMemCreate", result=800)
        t.event("alloc", "physical", 0, 20 * MiB, s, api="cuMemCreate", result=800)
        t.failed_alloc(0, t.stack("bad_size", 8), result=1)
        t.close()
        r = report_json(t.f.name)
        self.assertEqual(r["ooms"], [])
        calls = [(c["api"], c["error"], c["count"]) for c in r["failed_calls"]]
        self.assertEqual(calls, [("cuMemCreate", "CUDA_ERROR_NOT_PERMITTED", 2),
                                 ("cudaMalloc", "cudaErrorInvalidValue", 1)])
        self.assertEqual(r["summary"]["failed_allocations"], 3)
        self.assertEqual(r["summary"]["failed_calls"], 3)
        text = run_report(t.f.name).stdout
        self.assertNotIn("OOM", text)
        self.assertIn("failed calls (not out-of-memory): 3", text)

    def test_allocator_cap_is_an_allocator_limit(self):
        t = self.trace()
        seg, user = t.stack("CUDACachingAllocator::malloc", 3), t.stack("big_alloc", 4)
        t.alloc(0x100000000, 256 * MiB, seg)
        t.event("block_oom", "block", 0, 2 * GiB, user, api="torch.oom", free=76 * GiB)
        t.close()
        (oom,) = report_json(t.f.name)["ooms"]
        self.assertEqual(oom["verdict"], "allocator limit")
        self.assertIn("76.0 GiB free", oom["explanation"])

    # --- growth ------------------------------------------------------------------------------------

    def test_growth_survives_a_burst_of_chunks_and_the_burst_is_not_growth(self):
        t = self.trace()
        keep, churn, chunk, release = (t.stack("keep_activation", 30), t.stack("churn", 31),
                                       t.stack("ExpandableSegment::map", 32), t.stack("ExpandableSegment::unmap", 33))
        for i in range(50):
            t.alloc(0x10000000 + i * MiB, MiB, keep)
            t.alloc(0x90000000, 2 * MiB, churn)
            t.free(0x90000000)
        # The OOM path of expandable segments: chunks created until the device is full, then released.
        for i in range(4000):
            t.event("alloc", "physical", 0x100000 + i, 20 * MiB, chunk, api="cuMemCreate", result=0)
        for i in range(4000):
            t.event("free", "physical", 0x100000 + i, 0, release, api="cuMemRelease", result=0)
        t.close()
        r = report_json(t.f.name)
        self.assertEqual([functions(g["stack"])[1] for g in r["growth"]], ["keep_activation"])
        self.assertEqual(r["growth"][0]["rises"], 50)

    # --- roles and autograd attribution -----------------------------------------------------------

    def test_roles_at_the_peak_and_gradients_charged_to_backward(self):
        t = self.trace()
        seg = t.stack("CUDACachingAllocator::malloc", 3)
        params = self.pystack(t, ("_apply", TORCH + "/nn/modules/module.py", 965), ("<module>", "train.py", 5))
        acts = self.pystack(t, ("forward", TORCH + "/nn/modules/linear.py", 134), ("<module>", "train.py", 9))
        optim = self.pystack(t, ("_init_group", TORCH + "/optim/adam.py", 182), ("<module>", "train.py", 12))
        backward = self.pystack(t, ("<module>", "train.py", 11))
        t.alloc(0x100000000, 64 * MiB, seg)

        def block(addr, size, stack):
            t.event("block_alloc", "block", 0x100000000 + addr * MiB, size * MiB, stack, api="torch.alloc",
                    segment="0x100000000")

        def free(addr):
            t.event("block_free", "block", 0x100000000 + addr * MiB, 0, 0, api="torch.free_requested")

        block(0, 4, params)
        block(4, 16, acts)
        self.scope(t, "scope_begin", "backward", api="torch.backward", stack=backward)
        block(20, 4, 0)        # a gradient: outlives backward()
        block(24, 8, 0)        # a backward temporary
        block(32, 2, 0)        # a backward temporary: the peak is here, inside backward()
        free(24)
        free(32)
        free(4)                # activations freed during backward
        self.scope(t, "scope_end", "backward", api="torch.backward", stack=backward)
        block(24, 8, optim)    # optimizer state, below the peak
        t.close()
        r = report_json(t.f.name)
        (peak,) = r["peaks"]
        roles = {k: v // MiB for k, v in peak["roles"].items() if v}
        self.assertEqual(roles, {"parameters": 4, "activations": 16, "gradients": 4, "backward temporaries": 10,
                                 "allocator cache": 30})
        self.assertEqual(peak["allocated"]["bytes"], 34 * MiB)
        # The gradient, alive at exit, is charged to the backward() line, marked as such.
        grads = [h for h in r["held_at_exit"] if h["bytes"] == 4 * MiB and h["stack"][0]["function"].startswith("[")]
        self.assertEqual(len(grads), 1)
        self.assertEqual(grads[0]["stack"][0]["function"], "[autograd engine thread, under backward()]")
        self.assertEqual((grads[0]["stack"][1]["file"], grads[0]["stack"][1]["line"]), ("train.py", 11))
        text = run_report(t.f.name).stdout
        self.assertIn("by role: allocator cache 30.0 MiB, activations 16.0 MiB, backward temporaries 10.0 MiB", text)
        self.assertNotIn("(no stack recorded)", text)

    def test_frameless_blocks_outside_backward_are_labelled(self):
        t = self.trace()
        seg = t.stack("CUDACachingAllocator::malloc", 3)
        t.alloc(0x100000000, 8 * MiB, seg)
        t.event("block_alloc", "block", 0x100000000, 2 * MiB, 0, api="torch.alloc", segment="0x100000000")
        t.close()
        (held,) = report_json(t.f.name)["held_at_exit"]
        self.assertEqual(functions(held["stack"]), ["[PyTorch thread without Python frames (autograd engine)]"])


class RecorderLibraryWorkspace(unittest.TestCase):
    """A real recorder run on the simulated runtime with a fake CUDA library that keeps a workspace
    from its handle-creation function (tests/e2e/plugin/fake_cublas.cpp)."""

    def run_program(self, *args):
        lib = os.path.join(PROGRAMS, "libfake_cublas.so")
        for need in (REPORT, LIB, lib, program("library_workspace")):
            if not os.path.exists(need):
                self.skipTest(f"{need} not built")
        out = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, out, True)
        proc = run_traced([program("library_workspace"), lib, *args], out)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        (path,) = trace_files(out)
        return path

    def test_the_workspace_is_held_by_cublas(self):
        path = self.run_program()
        r = report_json("--fail-on-leak", path)
        self.assertEqual(r["leaks"], [])
        (held,) = r["held_at_exit"]
        self.assertEqual((held["reason"], held["library"], held["bytes"]), ("library", "cuBLAS", 8 * MiB))
        self.assertIn("cublasCreate_v2", functions(held["stack"]))

    def test_a_real_leak_beside_it_still_fails(self):
        path = self.run_program("leak")
        failed = run_report("--fail-on-leak", path, check_rc=1)
        self.assertIn("leaked 3.0 MiB in 1 allocation", failed.stderr)
        self.assertIn("plant_leak", failed.stderr)


if __name__ == "__main__":
    unittest.main()
