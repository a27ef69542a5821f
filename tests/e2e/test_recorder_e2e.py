# tests/e2e/test_recorder_e2e.py — the recorder end to end: traces of simulated-runtime programs.
"""End-to-end tests of the recorder: programs on the simulated CUDA runtime, run under LD_PRELOAD,
their traces checked event by event (count, sizes, order, stacks naming the functions)."""
import json
import os
import signal
import subprocess
import time
import collections
import unittest

from recorder_testlib import (BUILD, FORK_UNDER_SANITIZER, LIB, SIM, Trace, fork_deadlocks_under_sanitizer, program,
                              read_zst, recorder_preload, run_traced, tempdir, trace_files)


def only_trace(test, out_dir):
    files = trace_files(out_dir)
    test.assertEqual(len(files), 1, files)
    return Trace(files[0])


class TraceInvariants:
    def check_invariants(self, trace, complete=True):
        self.assertEqual(trace.header["format"], "gpumemtrace")
        self.assertEqual(trace.header["version"], 2)
        defined = set()
        for r in trace.records[1:]:
            if r["type"] == "frame":
                if "module" in r:
                    self.assertIn(r["module"], trace.modules)
                defined.add(("frame", r["id"]))
            elif r["type"] == "stack":
                for f in r["frames"]:
                    self.assertIn(("frame", f), defined, "frame used before it is defined")
                defined.add(("stack", r["id"]))
            elif r["type"] == "event" and r["stack"]:
                self.assertIn(("stack", r["stack"]), defined, "stack used before it is defined")
        seqs = [e["seq"] for e in trace.events]
        self.assertEqual(seqs, sorted(set(seqs)), "seq must strictly increase")
        if complete:
            self.assertIsNotNone(trace.footer, "a clean exit ends with a footer")
            self.assertEqual(trace.footer["events"], len(trace.events))


class RuntimeApis(unittest.TestCase, TraceInvariants):
    @classmethod
    def setUpClass(cls):
        cls.out = tempdir()
        cls.proc = run_traced([program("runtime_apis")], cls.out)
        cls.trace = Trace(trace_files(cls.out)[0])

    def test_program_output_unchanged(self):
        bare = run_traced([program("runtime_apis")], self.out, preload=False)
        self.assertEqual(self.proc.returncode, bare.returncode)
        self.assertEqual(self.proc.stdout, bare.stdout)
        self.assertEqual(self.proc.stdout, "done rc=2\n")

    def test_invariants(self):
        self.check_invariants(self.trace)
        self.assertEqual(self.trace.header["pid"] > 0, True)
        self.assertTrue(self.trace.header["exe"].endswith("runtime_apis"))
        self.assertEqual(self.trace.header["clock"], "monotonic")

    def test_every_api_with_its_size_kind_and_function(self):
        t = self.trace
        expected = [  # (api, op, kind, size, function that called it)
            ("cudaMalloc", "alloc", "device", 3 * 1024 * 1024 + 123, "allocate_weights()"),
            ("cudaMallocHost", "alloc", "host", 4097, "allocate_pinned()"),
            ("cudaHostAlloc", "alloc", "host", 4098, "allocate_host_alloc()"),
            ("cudaMallocManaged", "alloc", "managed", 8195, "allocate_managed()"),
            ("cudaMallocPitch", "alloc", "device", 1024 * 10, "allocate_pitch()"),
            ("cudaMalloc3D", "alloc", "device", 512 * 4 * 2, "allocate_3d()"),
            ("cudaMallocArray", "alloc", "array", 4 * 64 * 8, "allocate_array()"),
            ("cudaFreeArray", "free", "array", 0, "allocate_array()"),
            ("cudaMallocAsync", "alloc", "async", 65542, "allocate_async()"),
            ("cudaFreeAsync", "free", "async", 0, "allocate_async()"),
            ("cudaMallocFromPoolAsync", "alloc", "async", 65543, "allocate_async()"),
            ("cudaFreeAsync", "free", "async", 0, "allocate_async()"),
            ("cudaMemPoolTrimTo", "trim", "async", 0, "allocate_async()"),
            ("cudaMemGetInfo", "meminfo", "none", None, "ask_meminfo()"),
            ("gpumemtrace_mark", "mark", "none", None, "report_blocks()"),
            ("gpumemtrace_block_alloc", "block_alloc", "block", 1000, "report_blocks()"),
            ("gpumemtrace_block_free", "block_free", "block", 1000, "report_blocks()"),
            ("gpumemtrace_block_oom", "block_oom", "block", 12345, "report_blocks()"),
            ("cudaFreeHost", "free", "host", 0, "free_pinned()"),
            ("cudaFreeHost", "free", "host", 0, "free_pinned()"),
            ("cudaFree", "free", "device", 0, "free_weights()"),
            ("cudaMalloc", "alloc", "device", 5 * 1024 * 1024 + 8, "leak_on_purpose()"),
            ("cudaMalloc", "alloc", "device", 1 << 50, "allocate_too_much()"),
            ("cudaMemGetInfo", "meminfo", "none", None, "allocate_too_much()"),
        ]
        # The first allocation is followed by the start-of-run meminfo of its device.
        self.assertEqual(t.events[1]["op"], "meminfo")
        self.assertEqual(t.events[1]["total"], 16 << 30)
        self.assertEqual(t.events[1]["free"], (16 << 30) - (3 * 1024 * 1024 + 512))
        events = t.events[:1] + t.events[2:]
        self.assertEqual(len(events), len(expected), [e["api"] for e in events])
        for e, (api, op, kind, size, fn) in zip(events, expected):
            with self.subTest(api=api, fn=fn):
                self.assertEqual((e["api"], e["op"], e["kind"]), (api, op, kind))
                if size is not None:
                    self.assertEqual(e["size"], size)
                if op in ("free", "block_free"):  # releases carry no stack by default
                    self.assertEqual(e["stack"], 0)
                    continue
                funcs = t.functions(e)
                self.assertIn(fn, funcs)
                self.assertIn("main", funcs)
                self.assertFalse(any("gpumemtrace::" in f for f in funcs), "library frames must be skipped")

    def test_free_stacks_on_request(self):
        out = tempdir()
        run_traced([program("runtime_apis")], out, env={"GPUMEMTRACE_FREE_STACKS": "1"})
        t = only_trace(self, out)
        frees = [e for e in t.events if e["op"] in ("free", "block_free")]
        self.assertEqual(len(frees), 7)  # array, 2 async, block, 2 host, device
        for e in frees:
            self.assertNotEqual(e["stack"], 0)
        weights_free = [e for e in frees if e["api"] == "cudaFree"][0]
        self.assertEqual(t.functions(weights_free)[0], "free_weights()")

    def test_stack_frames_have_file_and_line(self):
        e = self.trace.allocs(api="cudaMalloc")[0]
        frame = self.trace.frames[self.trace.stacks[e["stack"]]["frames"][0]]
        self.assertEqual(frame["function"], "allocate_weights()")
        self.assertTrue(frame["file"].endswith("runtime_apis.cpp"))
        self.assertEqual(frame["line"], 15)
        module = self.trace.modules[frame["module"]]
        self.assertTrue(module["path"].endswith("runtime_apis"))
        self.assertEqual(len(module["build_id"]), 40)
        self.assertEqual(int(frame["ip"], 16) - int(module["base"], 16), int(frame["offset"], 16))

    def test_failed_allocation_is_recorded_with_error_and_meminfo(self):
        failed = [e for e in self.trace.events if e["op"] == "alloc" and e.get("result", 0) != 0]
        self.assertEqual(len(failed), 1)
        self.assertEqual(failed[0]["result"], 2)  # cudaErrorMemoryAllocation
        self.assertEqual(failed[0]["size"], 1 << 50)
        self.assertEqual(failed[0]["addr"], "0x0")
        after = self.trace.events[self.trace.events.index(failed[0]) + 1]
        self.assertEqual(after["op"], "meminfo")
        self.assertGreater(after["free"], 0)
        self.assertLessEqual(after["free"], after["total"])

    def test_free_matches_allocation_address(self):
        weights = self.trace.allocs(api="cudaMalloc")[0]
        frees = [e for e in self.trace.events if e["api"] == "cudaFree"]
        self.assertEqual([f["addr"] for f in frees], [weights["addr"]])
        self.assertGreater(frees[0]["seq"], weights["seq"])

    def test_block_events_carry_segment_and_pool(self):
        block = [e for e in self.trace.events if e["op"] == "block_alloc"][0]
        pitch = self.trace.allocs(api="cudaMallocPitch")[0]
        self.assertEqual(block["segment"], pitch["addr"])
        self.assertEqual(int(block["addr"], 16), int(pitch["addr"], 16) + 512)
        self.assertEqual(block["pool"], "my_pool")
        mark = [e for e in self.trace.events if e["op"] == "mark"][0]
        self.assertEqual(mark["label"], "phase one")

    def test_device_line(self):
        devices = [r for r in self.trace.records if r["type"] == "device"]
        self.assertEqual(len(devices), 1)
        self.assertEqual(devices[0]["name"], "gpumemtrace simulated GPU")
        self.assertEqual(devices[0]["total"], 16 << 30)


class Transparency(unittest.TestCase):
    def test_error_code_sticky_error_and_errno_unchanged(self):
        out = tempdir()
        traced = run_traced([program("runtime_apis"), "oom"], out)
        bare = run_traced([program("runtime_apis"), "oom"], out, preload=False)
        self.assertEqual(traced.stdout, bare.stdout)
        self.assertEqual(traced.stdout, "rc=2 last=2 errno=1234\n")

    def test_simulated_runtime_looks_like_the_real_one(self):
        lib = os.path.join(SIM, "libcudart.so.13")
        dynamic = subprocess.run(["readelf", "-d", lib], capture_output=True, text=True).stdout
        self.assertIn("Library soname: [libcudart.so.13]", dynamic)
        symbols = subprocess.run(["readelf", "--dyn-syms", "-W", lib], capture_output=True, text=True).stdout
        self.assertIn("cudaMalloc@@libcudart.so.13", symbols)

    def test_c_api_is_a_no_op_without_the_recorder(self):
        bare = run_traced([program("c_api_check")], "/tmp", preload=False)
        self.assertEqual((bare.returncode, bare.stdout), (0, "ok\n"))
        out = tempdir()
        traced = run_traced([program("c_api_check")], out)
        self.assertEqual((traced.returncode, traced.stdout), (0, "ok\n"))
        ops = [e["op"] for e in only_trace(self, out).events]
        self.assertEqual(ops, ["mark", "block_alloc", "block_free", "block_oom",
                               "scope_begin", "scope_end"])

    def test_library_links_no_cuda_library(self):
        needed = subprocess.run(["readelf", "-d", LIB], capture_output=True, text=True).stdout
        for lib in ("libcudart", "libcuda.so", "libcupti"):
            self.assertNotIn(lib, needed)


class Threads(unittest.TestCase, TraceInvariants):
    def test_many_threads_no_loss_total_order(self):
        out = tempdir()
        n, m = 8, 2000
        proc = run_traced([program("scenarios"), "threads", str(n), str(m)], out, env={"GPUMEMTRACE_RING_EVENTS": "256"})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        t = only_trace(self, out)
        self.check_invariants(t)
        allocs = [e for e in t.events if e["op"] == "alloc"]
        frees = [e for e in t.events if e["op"] == "free"]
        self.assertEqual(len(allocs), n * m)
        self.assertEqual(len(frees), n * m)
        self.assertEqual(t.footer["dropped_total"], 0)
        by_tid = {}
        for e in t.events:
            if e["op"] in ("alloc", "free"):
                by_tid.setdefault(e["tid"], []).append(e)
        self.assertEqual(len(by_tid), n)
        for evs in by_tid.values():
            sizes = [e["size"] for e in evs if e["op"] == "alloc"]
            base = sizes[0] - 0
            # Each thread: alternating alloc/free of its own sizes, in program order.
            self.assertEqual([e["op"] for e in evs], ["alloc", "free"] * m)
            self.assertEqual(sizes, [base + i % 7 for i in range(m)])
            for a, f in zip(evs[::2], evs[1::2]):
                self.assertEqual(a["addr"], f["addr"])
                self.assertIn("thread_worker(int, int)", t.functions(a))
        # An address is never allocated twice without a free in between (global order is causal).
        live = set()
        for e in t.events:
            if e["op"] == "alloc":
                self.assertNotIn(e["addr"], live)
                live.add(e["addr"])
            elif e["op"] == "free":
                live.discard(e["addr"])

    def test_drop_mode_counts_every_lost_event(self):
        out = tempdir()
        n, m = 4, 5000
        proc = run_traced([program("scenarios"), "threads", str(n), str(m)], out,
                          env={"GPUMEMTRACE_ON_FULL": "drop", "GPUMEMTRACE_RING_EVENTS": "256",
                               "GPUMEMTRACE_SYMBOLIZE": "0"})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        t = only_trace(self, out)
        self.check_invariants(t)
        self.assertEqual(t.header["on_full"], "drop")
        dropped = t.footer["dropped_total"]
        self.assertGreater(dropped, 0, "a 256-event ring must overflow in drop mode")
        # Every event the program caused is either in the trace or counted: n*m pairs + the
        # start-of-run meminfo.
        self.assertEqual(len(t.events) + dropped, 2 * n * m + 1)
        self.assertEqual(sum(d["count"] for d in t.dropped), dropped)


class Processes(unittest.TestCase, TraceInvariants):
    def test_header_records_the_launchers_rank(self):
        # torchrun's variables under srun: the worker's rank (RANK), not the srun task's.
        out = tempdir()
        proc = run_traced([program("runtime_apis")], out,
                          env={"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "SLURM_PROCID": "0"})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        header = only_trace(self, out).header
        self.assertEqual((header["rank"], header["local_rank"], header["world_size"], header["rank_from"]),
                         (3, 1, 8, "RANK"))
        out = tempdir()
        env = {name: "" for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_LOCALID",
                                     "SLURM_NTASKS", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")}
        proc = run_traced([program("runtime_apis")], out, env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertNotIn("rank", only_trace(self, out).header)  # empty: not set

    @unittest.skipIf(fork_deadlocks_under_sanitizer(), FORK_UNDER_SANITIZER)
    def test_fork_child_writes_its_own_file(self):
        out = tempdir()
        proc = run_traced([program("scenarios"), "fork"], out)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        child_pid = int(proc.stdout.split("child=")[1])
        traces = {Trace(p).header["pid"]: Trace(p) for p in trace_files(out)}
        self.assertEqual(len(traces), 2)
        child = traces[child_pid]
        parent = [t for pid, t in traces.items() if pid != child_pid][0]
        self.check_invariants(child)
        self.check_invariants(parent)
        self.assertEqual([e["size"] for e in parent.allocs()], [1001, 3003])
        self.assertEqual([e["size"] for e in child.allocs()], [2002])
        self.assertIn("allocate_in_child()", child.functions(child.allocs()[0]))
        self.assertEqual(child.header["ppid"], parent.header["pid"])
        self.assertEqual(child.events[0]["seq"], 1)
        # The child describes its device again in its own trace.
        for t in (parent, child):
            self.assertEqual(len([r for r in t.records if r["type"] == "device"]), 1)

    def test_exec_gets_its_own_file(self):
        for args in (["exec", program("scenarios"), "depth"], ["execl", program("scenarios")]):
            with self.subTest(via=args[0]):
                out = tempdir()
                proc = run_traced([program("scenarios")] + args, out)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                traces = [Trace(p) for p in trace_files(out)]
                self.assertEqual(len(traces), 2)
                sizes = sorted(e["size"] for t in traces for e in t.allocs())
                self.assertEqual(sizes, [4004, 5005])
                # exec finishes the old image's trace (footer included) before the image is replaced.
                for t in traces:
                    self.check_invariants(t)
                self.assertEqual(len({t.header["pid"] for t in traces}), 1)  # same pid, two files

    def test_exec_with_a_template_without_jsonl_keeps_the_zst_suffix(self):
        out = tempdir()
        proc = run_traced([program("scenarios"), "exec", program("scenarios"), "depth"], out,
                          env={"GPUMEMTRACE_OUTPUT": os.path.join(out, "x.%p.zst")})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        names = sorted(os.listdir(out))
        self.assertEqual(len(names), 2, names)
        self.assertTrue(all(n.endswith(".zst") for n in names), names)  # was x.PID.zst-1, uncompressed
        for name in names:
            with open(os.path.join(out, name), "rb") as f:
                self.assertEqual(f.read(4), b"\x28\xb5\x2f\xfd")  # zstd
        report = subprocess.run([os.path.join(BUILD, "gpumem-report"), "--format", "json", out], capture_output=True,
                                text=True, timeout=120)
        self.assertEqual(report.returncode, 0, report.stderr)
        self.assertEqual(len(json.loads(report.stdout)["processes"]), 2)

    def plugin_frame(self, mode):
        """The trace of `scenarios MODE libplugin_alloc.so`, and the innermost frame of its 8008-byte
        allocation (made in the plugin)."""
        out = tempdir()
        proc = run_traced([program("scenarios"), mode, program("libplugin_alloc.so")], out)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        t = only_trace(self, out)
        self.check_invariants(t)
        event = [e for e in t.allocs() if e["size"] == 8008][0]
        return t, t.frames[t.stacks[event["stack"]]["frames"][0]]

    def test_frames_of_a_library_closed_at_once_keep_their_module_and_names(self):
        # dlclose right after the allocation: the writer names the frames before the library goes
        # (issue 20: they became [unknown code], though their module and offset were known).
        t, frame = self.plugin_frame("dlclose")
        self.assertEqual(frame["function"], "plugin_allocate")
        self.assertEqual(t.modules[frame["module"]]["path"], program("libplugin_alloc.so"))

    def test_library_loaded_later_gets_a_module_line_and_symbols(self):
        t, frame = self.plugin_frame("dlopen")
        plugin = program("libplugin_alloc.so")
        self.assertEqual(frame["function"], "plugin_allocate")
        self.assertTrue(frame["file"].endswith("plugin_alloc.cpp"))
        module = t.modules[frame["module"]]
        self.assertEqual(module["path"], plugin)
        # Its module line comes after the trace started (it was not loaded then).
        first_event = t.records.index(t.events[0])
        self.assertGreater(t.records.index(module), first_event)

    def test_no_cuda_call_leaves_no_file(self):
        out = tempdir()
        proc = run_traced([program("scenarios"), "none"], out)
        self.assertEqual(proc.returncode, 0)
        proc = run_traced(["sh", "-c", "true; ls / >/dev/null"], out)
        self.assertEqual(proc.returncode, 0)
        self.assertEqual(trace_files(out), [])
        self.assertEqual(proc.stderr, "")

    def test_sigkill_leaves_everything_flushed_before(self):
        out = tempdir()
        env = dict(os.environ, LD_PRELOAD=recorder_preload(LIB), LD_LIBRARY_PATH=SIM, GPUMEMTRACE_OUTPUT=out + "/",
                   GPUMEMTRACE_QUIET="1")  # its stderr is the test run's: no "writing trace to" line there
        p = subprocess.Popen([program("scenarios"), "killed", "500"], env=env, stdout=subprocess.PIPE, text=True)
        self.assertEqual(p.stdout.readline(), "ready\n")
        time.sleep(0.4)  # > the 100 ms flush interval
        p.send_signal(signal.SIGKILL)
        p.wait()
        t = only_trace(self, out)
        self.check_invariants(t, complete=False)
        self.assertIsNone(t.footer)
        self.assertEqual([e["size"] for e in t.allocs()], [100000 + i for i in range(500)])

    def test_gpumemtrace_flush_makes_events_readable_at_once(self):
        out = tempdir()
        env = dict(os.environ, LD_PRELOAD=recorder_preload(LIB), LD_LIBRARY_PATH=SIM, GPUMEMTRACE_OUTPUT=out + "/",
                   GPUMEMTRACE_FLUSH_MS="100", GPUMEMTRACE_QUIET="1")
        p = subprocess.Popen([program("scenarios"), "flush"], env=env, stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(p.stdout.readline(), "flush=0\n")
            t = only_trace(self, out)  # read right away: no waiting for the periodic flush
            self.assertEqual([e["size"] for e in t.allocs()], [6006])
        finally:
            p.kill()
            p.wait()

    def test_exit_from_another_thread_flushes(self):
        out = tempdir()
        proc = run_traced([program("scenarios"), "exit_thread"], out)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        t = only_trace(self, out)
        self.check_invariants(t)
        self.assertIn(7007, [e["size"] for e in t.allocs()])


class Configuration(unittest.TestCase, TraceInvariants):
    def test_output_template_and_zstd(self):
        out = tempdir()
        proc = run_traced([program("scenarios"), "depth"], out,
                          env={"GPUMEMTRACE_OUTPUT": out + "/run-%e-%p.jsonl.zst"})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        files = trace_files(out) or [os.path.join(out, f) for f in os.listdir(out)]
        self.assertEqual(len(files), 1)
        self.assertRegex(os.path.basename(files[0]), r"^run-scenarios-\d+\.jsonl\.zst$")
        t = Trace(files[0], text=read_zst(files[0]))
        self.check_invariants(t)
        self.assertEqual([e["size"] for e in t.allocs()], [5005])
        with open(files[0], "rb") as f:
            frame_header = f.read(5)
        self.assertTrue(frame_header[4] & 0x04, "the zstd frame carries no content checksum")

    def test_stack_depth(self):
        for depth, want in (("3", 3), ("0", 0)):
            out = tempdir()
            run_traced([program("scenarios"), "depth"], out, env={"GPUMEMTRACE_STACK_DEPTH": depth})
            t = only_trace(self, out)
            e = t.allocs()[0]
            funcs = t.functions(e)
            self.assertEqual(len(funcs), want)
            if want:
                self.assertEqual(funcs[:3], ["nest_bottom()", "nest9()", "nest8()"])
        out = tempdir()
        run_traced([program("scenarios"), "depth"], out)
        funcs = only_trace(self, out).functions(only_trace(self, out).allocs()[0])
        self.assertEqual(funcs[:10], ["nest_bottom()"] + ["nest%d()" % i for i in range(9, 0, -1)])

    def test_bad_value_warns_once_and_uses_default(self):
        out = tempdir()
        proc = run_traced([program("scenarios"), "depth"], out, env={"GPUMEMTRACE_STACK_DEPTH": "lots"})
        warnings = [l for l in proc.stderr.splitlines() if "GPUMEMTRACE_STACK_DEPTH" in l]
        self.assertEqual(len(warnings), 1, proc.stderr)
        self.assertEqual(only_trace(self, out).header["stack_depth"], 64)

    def test_unwritable_output_runs_untraced(self):
        proc = run_traced([program("runtime_apis")], "/nonexistent", env={"GPUMEMTRACE_OUTPUT": "/nonexistent/dir/"})
        self.assertEqual(proc.returncode, 0)
        self.assertEqual(proc.stdout, "done rc=2\n")
        lines = [l for l in proc.stderr.splitlines() if l.startswith("gpumemtrace:")]
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertIn("running untraced", lines[0])

    def test_trace_that_cannot_be_written_stops_tracing_once(self):
        # /dev/full opens, but every write fails with ENOSPC.
        proc = run_traced([program("scenarios"), "threads", "2", "2000"], "/tmp",
                          env={"GPUMEMTRACE_OUTPUT": "/dev/full", "GPUMEMTRACE_QUIET": "1"})
        self.assertEqual(proc.returncode, 0)
        lines = [l for l in proc.stderr.splitlines() if l.startswith("gpumemtrace:")]
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertIn("cannot write the trace", lines[0])

    def test_disable(self):
        out = tempdir()
        proc = run_traced([program("runtime_apis")], out, env={"GPUMEMTRACE_DISABLE": "1"})
        self.assertEqual(proc.stdout, "done rc=2\n")
        self.assertEqual(trace_files(out), [])


def event_stacks(test, args, env):
    """(op, api, size, frames) of every event with a stack, frames as (module path, offset): the same
    code in any run. Releases carry stacks too (GPUMEMTRACE_FREE_STACKS=1)."""
    out = tempdir()
    proc = run_traced(args, out, env=dict(env, GPUMEMTRACE_FREE_STACKS="1"))
    test.assertEqual(proc.returncode, 0, proc.stderr)
    test.assertNotIn("ignoring", proc.stderr)
    t = only_trace(test, out)

    def where(fid):
        f = t.frames[fid]
        return (t.modules[f["module"]]["path"], f["offset"]) if "module" in f else ("?", f["ip"])

    stacks = [(e["op"], e["api"], e.get("size"), tuple(where(f) for f in t.stacks[e["stack"]]["frames"]))
              for e in t.events if e["stack"]]
    test.assertTrue(stacks)
    return stacks


class UnwindModes(unittest.TestCase):
    """GPUMEMTRACE_UNWIND=auto (the frame-pointer walk, checked against DWARF call site by call site)
    records the stacks GPUMEMTRACE_UNWIND=dwarf (libunwind alone) records, frame for frame."""

    def stacks(self, args, mode):
        return event_stacks(self, args, {"GPUMEMTRACE_UNWIND": mode})

    def test_same_stacks_in_both_modes(self):
        for args in ([program("runtime_apis")], [program("scenarios"), "depth"],
                     [program("scenarios"), "dlopen", program("libplugin_alloc.so")]):
            with self.subTest(program=args[1:] or args[0]):
                self.assertEqual(self.stacks(args, "auto"), self.stacks(args, "dwarf"))

    def test_same_stacks_from_many_threads(self):
        args = [program("scenarios"), "threads", "6", "300"]
        # Threads interleave differently in each run: compare the stacks as a multiset.
        auto, dwarf = (collections.Counter(self.stacks(args, m)) for m in ("auto", "dwarf"))
        self.assertEqual(auto, dwarf)
        self.assertEqual(sum(n for stack, n in auto.items() if stack[0] in ("alloc", "free")), 2 * 6 * 300)

    def test_bad_value_warns_and_uses_auto(self):
        out = tempdir()
        proc = run_traced([program("scenarios"), "depth"], out, env={"GPUMEMTRACE_UNWIND": "fast"})
        warnings = [l for l in proc.stderr.splitlines() if "GPUMEMTRACE_UNWIND" in l]
        self.assertEqual(len(warnings), 1, proc.stderr)
        funcs = only_trace(self, out).functions(only_trace(self, out).allocs()[0])
        self.assertEqual(funcs[:10], ["nest_bottom()"] + ["nest%d()" % i for i in range(9, 0, -1)])


class StackInterning(unittest.TestCase):
    """Stacks interned by the recording threads (GPUMEMTRACE_INTERN_STACKS=1, the default: the event
    carries a stack id, the writer reads the frames once) come out as the stacks sent inline. (After
    a trace's size cap, the live allocations' stacks arrive as ids too: test_trace_cap.py.)"""

    def test_same_stacks_either_way(self):
        for args in ([program("runtime_apis")], [program("scenarios"), "depth"],
                     [program("scenarios"), "dlopen", program("libplugin_alloc.so")]):
            with self.subTest(program=args[1:] or args[0]):
                self.assertEqual(event_stacks(self, args, {"GPUMEMTRACE_INTERN_STACKS": "1"}),
                                 event_stacks(self, args, {"GPUMEMTRACE_INTERN_STACKS": "0"}))
        args = [program("scenarios"), "threads", "6", "300"]
        interned, inline = (collections.Counter(event_stacks(self, args, {"GPUMEMTRACE_INTERN_STACKS": v}))
                            for v in ("1", "0"))
        self.assertEqual(interned, inline)


if __name__ == "__main__":
    unittest.main()
