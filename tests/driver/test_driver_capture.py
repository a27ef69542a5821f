# tests/driver/test_driver_capture.py — driver-level capture end to end, every route to the simulated driver.
"""End-to-end tests of driver-level capture, on the simulated driver (no GPU needed).

Each route a program takes to the CUDA driver (linked cu* symbols; dlopen + dlsym; dlopen +
cuGetProcAddress, with and without per-thread-stream variants) runs each scenario (basic, oom, vmm,
async, ctx, errors) twice: without the preload and with it. The program prints every call's result,
so the tests check that
  - the program's output (return codes, addresses) is the same with and without gpumemtrace,
  - the trace holds exactly the expected events (api, op, kind, addr, size, result, handle, pool),
  - each event's stack starts in the program's named step (alloc_weights, create_chunk, ...).
Also: a runtime call that reaches the driver is one event with both API names, and the real
libcudart.so.13 (shared and static) against the fake driver: its cuGetProcAddress traffic goes through
the hooks and the error codes it returns are unchanged.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import tracefile  # noqa: E402
from testenv import recorder_preload  # noqa: E402

BUILD = os.environ.get("GPUMEMTRACE_BUILD", os.path.join(ROOT, "build"))
LIB = os.path.join(BUILD, "libgpumemtrace.so")
SIM = os.path.join(BUILD, "sim")
PROGS = os.path.join(BUILD, "tests", "driver")
ROUTES = ["direct", "dlsym", "procaddr"]
GIB = 1 << 30
SIM_TOTAL = 16 * GIB  # tests/sim/sim_settings.h default


def load_trace(path):
    """Returns (events, stacks {id: [function names, innermost first]}, devices, header)."""
    events, frames, stacks, devices, header = [], {}, {}, [], None
    for rec in tracefile.read_records(path)[0]:
        t = rec["type"]
        if t == "header":
            header = rec
        elif t == "frame":
            frames[rec["id"]] = rec.get("function", "")
        elif t == "stack":
            stacks[rec["id"]] = [frames.get(i, "?") for i in rec["frames"]]
        elif t == "event":
            events.append(rec)
        elif t == "device":
            devices.append(rec)
    return events, stacks, devices, header


def run(prog, args=(), preload=True, env=None, timeout=60):
    """Runs build/tests/driver/PROG against the fake driver. Returns (stdout, trace or None, stderr)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "trace.jsonl")
        e = dict(os.environ)
        e.pop("LD_PRELOAD", None)
        e["LD_LIBRARY_PATH"] = SIM
        e["GPUMEMTRACE_OUTPUT"] = out
        e["GPUMEMTRACE_FREE_STACKS"] = "1"  # these tests check the stack of every event, frees included
        if preload:
            e["LD_PRELOAD"] = recorder_preload(LIB)
        e.update(env or {})
        p = subprocess.run([os.path.join(PROGS, prog), *args], env=e, capture_output=True, text=True,
                           timeout=timeout)
        if p.returncode != 0:
            raise AssertionError(f"{prog} {args} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
        trace = load_trace(out) if os.path.exists(out) else None
        return p.stdout, trace, p.stderr


def program_lines(stdout):
    """{step: (rc, addr, size)} from the program's 'step rc=N addr=0x.. size=N' lines (last wins)."""
    steps = {}
    for m in re.finditer(r"^(\w+) rc=(-?\d+) addr=(0x[0-9a-f]+) size=(\d+)$", stdout, re.M):
        steps.setdefault(m.group(1), []).append((int(m.group(2)), m.group(3), int(m.group(4))))
    return steps


def mask_host(stdout):
    """Host (heap) pointers differ from run to run; device addresses (0x7f00...) and handles of the fake
    do not. The heap is at 0x5... in a plain build, 0x6... under AddressSanitizer and 0x7b.../0x7c...
    under ThreadSanitizer (make asan, make tsan)."""
    return re.sub(r"0x(?:[56][0-9a-f]|7[bc])[0-9a-f]{10}\b", "0xHOST", stdout)


def memory_events(events):
    return [e for e in events if e["op"] != "meminfo"]


@unittest.skipUnless(os.path.exists(LIB) and os.path.exists(os.path.join(PROGS, "drv_direct")),
                     "build/libgpumemtrace.so or the driver test programs are not built (make test)")
class DriverRoutes(unittest.TestCase):
    def scenario(self, route, scenario, *extra):
        prog = "drv_" + route
        plain, _, _ = run(prog, [scenario, *extra], preload=False)
        traced, trace, stderr = run(prog, [scenario, *extra])
        self.assertEqual(mask_host(plain), mask_host(traced), f"{route}/{scenario}: output changed under preload")
        self.assertIsNotNone(trace, f"{route}/{scenario}: no trace\n{stderr}")
        return program_lines(traced), trace

    def check_event(self, ev, stacks, api, op, kind, addr=None, size=None, result=None, step=None, **fields):
        where = json.dumps(ev)
        self.assertEqual((ev["api"], ev["op"], ev["kind"]), (api, op, kind), where)
        if addr is not None:
            self.assertEqual(ev.get("addr", "0x0"), addr, where)
        if size is not None:
            self.assertEqual(ev["size"], size, where)
        # Format version 2 leaves a result of 0 out: "no result" (None) and 0 read alike.
        self.assertEqual(ev.get("result", 0), result or 0, where)
        for k, v in fields.items():
            self.assertEqual(ev.get(k), v, f"{k}: {where}")
        if step is not None:
            funcs = stacks.get(ev["stack"], [])
            self.assertTrue(funcs and step in funcs[0], f"stack of {where} starts {funcs[:3]}, not {step}")
            self.assertTrue(any(f == "main" for f in funcs), f"no main in {funcs}")

    def test_basic_every_route(self):
        for route in ROUTES:
            with self.subTest(route=route):
                steps, (events, stacks, devices, header) = self.scenario(route, "basic")
                self.assertEqual(header["backend"], "interpose")
                mem = memory_events(events)
                (rc, w, _), = steps["alloc_weights"]
                (_, img, img_size), = steps["alloc_image"]
                (_, uni, _), = steps["alloc_unified"]
                (_, pin, _), = steps["alloc_pinned"]
                (_, stg, _), = steps["alloc_staging"]
                expected = [
                    ("cuMemAlloc_v2", "alloc", "device", w, 3145735, 0, "alloc_weights"),
                    ("cuMemAllocPitch_v2", "alloc", "device", img, img_size, 0, "alloc_image"),
                    ("cuMemAllocManaged", "alloc", "managed", uni, 777777, 0, "alloc_unified"),
                    ("cuMemHostAlloc", "alloc", "host", pin, 65547, 0, "alloc_pinned"),
                    ("cuMemAllocHost_v2", "alloc", "host", stg, 4099, 0, "alloc_staging"),
                    ("cuMemFree_v2", "free", "device", w, None, None, "free_all"),
                    ("cuMemFree_v2", "free", "device", img, None, None, "free_all"),
                    ("cuMemFree_v2", "free", "device", uni, None, None, "free_all"),
                    ("cuMemFreeHost", "free", "host", pin, None, None, "free_all"),
                    ("cuMemFreeHost", "free", "host", stg, None, None, "free_all"),
                ]
                self.assertEqual(len(mem), len(expected), [e["api"] for e in mem])
                for ev, (api, op, kind, addr, size, result, step) in zip(mem, expected):
                    self.check_event(ev, stacks, api, op, kind, addr, size, result, step, device=0)
                # The program's own cuMemGetInfo is an event; so is the device's first sighting.
                infos = [e for e in events if e["op"] == "meminfo"]
                self.assertGreaterEqual(len(infos), 2)
                self.assertTrue(all(e["total"] == SIM_TOTAL for e in infos))
                seqs = [e["seq"] for e in events]
                self.assertEqual(seqs, sorted(seqs))

    def test_oom_records_failure_and_free_memory(self):
        for route in ROUTES:
            with self.subTest(route=route):
                steps, (events, stacks, devices, _) = self.scenario(route, "oom")
                self.assertEqual(steps["alloc_too_much"][0][0], 2)  # CUDA_ERROR_OUT_OF_MEMORY
                failed = [e for e in events if e["op"] == "alloc" and e.get("result")]
                self.assertEqual(len(failed), 1)
                self.check_event(failed[0], stacks, "cuMemAlloc_v2", "alloc", "device", "0x0", 64 * GIB, 2,
                                 "alloc_too_much")
                after = events[events.index(failed[0]) + 1]
                self.assertEqual(after["op"], "meminfo")
                self.assertEqual((after["free"], after["total"]), (SIM_TOTAL - 3146240, SIM_TOTAL))  # 3145735 rounded up to 512

    def test_vmm_expandable_segments_pattern(self):
        for route in ROUTES:
            with self.subTest(route=route):
                steps, (events, stacks, _, _) = self.scenario(route, "vmm")
                (_, base, reserve), = steps["reserve_segment"]
                (_, h1, s1), (_, h2, s2) = steps["create_chunk"]
                (_, m1, _), (_, m2, _) = steps["map_chunk"]
                mem = memory_events(events)
                expected = [
                    ("cuMemAddressReserve", "reserve", "virtual", base, reserve, 0, "scenario_vmm", {}),
                    ("cuMemCreate", "alloc", "physical", h1, s1, 0, "create_chunk", {"handle": h1}),
                    ("cuMemMap", "map", "physical", m1, s1, 0, "grow_segment", {"handle": h1}),
                    ("cuMemCreate", "alloc", "physical", h2, s2, 0, "create_chunk", {"handle": h2}),
                    ("cuMemMap", "map", "physical", m2, s2, 0, "grow_segment", {"handle": h2}),
                    ("cuMemUnmap", "unmap", "physical", m2, s2, None, "shrink_segment", {}),
                    ("cuMemRelease", "free", "physical", h2, None, None, "shrink_segment", {"handle": h2}),
                    ("cuMemUnmap", "unmap", "physical", m1, s1, None, "shrink_segment", {}),
                    ("cuMemRelease", "free", "physical", h1, None, None, "shrink_segment", {"handle": h1}),
                    ("cuMemAddressFree", "unreserve", "virtual", base, reserve, None, "scenario_vmm", {}),
                ]
                self.assertEqual([e["api"] for e in mem], [x[0] for x in expected])
                for ev, (api, op, kind, addr, size, result, step, extra) in zip(mem, expected):
                    self.check_event(ev, stacks, api, op, kind, addr, size, result, step, device=0, **extra)

    def check_async(self, route, ptsz):
        suffix = "_ptsz" if ptsz else ""
        steps, (events, stacks, _, _) = self.scenario(route, "async", *(["--ptsz"] if ptsz else []))
        (_, stream, _), = steps["stream"]
        (_, pool, _), = steps["pool"]
        (_, a, _), = steps["alloc_async_default"]
        (_, b, _), = steps["alloc_async_pool"]
        mem = memory_events(events)
        expected = [
            ("cuMemAllocAsync" + suffix, "alloc", "async", a, 1048579, 0, "alloc_async_default", {}),
            ("cuMemAllocFromPoolAsync" + suffix, "alloc", "async", b, 2097157, 0, "alloc_async_pool",
             {"pool": pool}),
            ("cuMemFreeAsync" + suffix, "free", "async", a, None, None, "scenario_async", {}),
            ("cuMemFreeAsync" + suffix, "free", "async", b, None, None, "scenario_async", {}),
            ("cuMemPoolTrimTo", "trim", "async", None, 0, 0, "trim_pool", {"pool": pool}),
        ]
        self.assertEqual([e["api"] for e in mem], [x[0] for x in expected])
        for ev, (api, op, kind, addr, size, result, step, extra) in zip(mem, expected):
            if op != "trim":
                extra = dict(extra, stream=stream)
            self.check_event(ev, stacks, api, op, kind, addr, size, result, step, **extra)

    def test_async_pools_and_trim(self):
        for route in ROUTES:
            with self.subTest(route=route):
                self.check_async(route, ptsz=False)

    def test_async_per_thread_stream_variants(self):
        for route in ROUTES:  # direct/dlsym: the _ptsz symbols; procaddr: the PER_THREAD flag
            with self.subTest(route=route):
                self.check_async(route, ptsz=True)

    def test_context_destroy_and_primary_reset(self):
        for route in ROUTES:
            with self.subTest(route=route):
                _, (events, stacks, _, _) = self.scenario(route, "ctx")
                resets = [e for e in events if e["op"] == "reset"]
                self.assertEqual(len(resets), 2)
                self.check_event(resets[0], stacks, "cuCtxDestroy_v2", "reset", "none", step="own_context",
                                 device=0)
                self.check_event(resets[1], stacks, "cuDevicePrimaryCtxReset_v2", "reset", "none",
                                 step="reset_primary", device=0)
                allocs = [e["seq"] for e in events if e["op"] == "alloc"]
                self.assertTrue(allocs[0] < resets[0]["seq"] < allocs[1] < resets[1]["seq"])

    def test_error_codes_unchanged_and_recorded(self):
        for route in ROUTES:
            with self.subTest(route=route):
                steps, (events, stacks, _, _) = self.scenario(route, "errors")
                self.assertEqual(steps["alloc_before_init"][0][0], 3)
                self.assertEqual(steps["free_bogus"][0][0], 1)
                first = events[0]
                self.check_event(first, stacks, "cuMemAlloc_v2", "alloc", "device", "0x0", 4096, 3,
                                 "scenario_errors", device=-1)
                failed = [e for e in events if e["op"] == "alloc"]
                self.assertEqual([e["result"] for e in failed], [3, 1])

    def test_no_preload_leaves_no_trace(self):
        _, trace, _ = run("drv_direct", ["basic"], preload=False)
        self.assertIsNone(trace)


@unittest.skipUnless(os.path.exists(os.path.join(PROGS, "drv_layered")), "drv_layered not built")
class OneEventPerAllocation(unittest.TestCase):
    def test_runtime_over_driver_is_one_event_with_both_names(self):
        out, (events, stacks, _, _), _ = run("drv_layered")
        allocs = [e for e in events if e["op"] == "alloc"]
        self.assertEqual([(e["api"], e.get("driver_api")) for e in allocs],
                         [("cudaMalloc", "cuMemAlloc_v2"), ("cudaMallocAsync", "cuMemAllocAsync")])
        self.assertEqual([e["size"] for e in allocs], [1234567, 7654321])
        frees = [e for e in events if e["op"] == "free"]
        self.assertEqual([e["api"] for e in frees], ["cudaFreeAsync", "cudaFree"])
        self.assertIn("layered_alloc", stacks[allocs[0]["stack"]][0])


@unittest.skipUnless(os.path.exists(os.path.join(PROGS, "drv_cudart")), "drv_cudart not built")
class RealRuntimeOnFakeDriver(unittest.TestCase):
    """libcudart.so.13 / libcudart_static.a from the toolkit: its ~440 cuGetProcAddress lookups go
    through our hooks; it then fails (the fake has no private export tables) with the same codes."""

    def check(self, prog):
        plain, _, _ = run(prog, preload=False)
        traced, _, stderr = run(prog, env={"GPUMEMTRACE_DRIVER_STATS": "1"})
        self.assertEqual(plain, traced)
        self.assertIn("cudaDriverGetVersion rc=0", traced)
        self.assertIn("driver_version 13000", traced)
        m = re.search(r"driver stats: dlsym_driver=(\d+) procaddr_calls=(\d+) wrapped=(\d+) slots_full=(\d+)",
                      stderr)
        self.assertIsNotNone(m, stderr)
        dlsym_driver, procaddr, wrapped, full = map(int, m.groups())
        self.assertGreaterEqual(dlsym_driver, 1)   # dlsym(libcuda, "cuGetProcAddress_v2")
        self.assertGreaterEqual(procaddr, 100)     # the runtime's table of driver entry points
        self.assertGreaterEqual(wrapped, 15)       # every memory function of our table it asked for
        self.assertEqual(full, 0)

    def test_shared_runtime(self):
        self.check("drv_cudart")

    def test_static_runtime(self):
        self.check("drv_cudart_static")


@unittest.skipUnless(os.path.exists(os.path.join(PROGS, "drv_procaddr")), "drv_procaddr not built")
class BackendChoice(unittest.TestCase):
    """Without a GPU CUPTI cannot subscribe: the cupti/auto backends must fall back to interposition
    with ONE warning line, and the program must not notice."""

    def test_cupti_falls_back_to_interposition(self):
        plain, _, _ = run("drv_procaddr", ["basic"], preload=False)
        for backend in ("cupti", "auto"):
            with self.subTest(backend=backend):
                out, (events, _, _, header), stderr = run("drv_procaddr", ["basic"],
                                                          env={"GPUMEMTRACE_BACKEND": backend})
                self.assertEqual(mask_host(plain), mask_host(out))
                self.assertEqual(len(memory_events(events)), 10)
                self.assertEqual(header["backend"], "interpose")
                warnings = [l for l in stderr.splitlines() if "backend cupti" in l]
                self.assertEqual(len(warnings), 1, stderr)
                self.assertIn("using interposition", warnings[0])

    def test_bad_value_warns_once_and_interposes(self):
        _, (events, _, _, _), stderr = run("drv_direct", ["basic"], env={"GPUMEMTRACE_BACKEND": "nvtx"})
        self.assertEqual(len(memory_events(events)), 10)
        self.assertEqual(stderr.count("GPUMEMTRACE_BACKEND must be"), 1)

    def test_library_links_no_cuda_library(self):
        needed = subprocess.run(["readelf", "-d", LIB], capture_output=True, text=True).stdout
        self.assertNotRegex(needed, r"NEEDED.*\[lib(cuda|cudart|cupti)")
        syms = subprocess.run(["nm", "-D", "--defined-only", LIB], capture_output=True, text=True).stdout
        for sym in ("InitializeInjection", "dlsym", "cuGetProcAddress_v2", "cuMemAlloc_v2",
                    "cudaGetDriverEntryPointByVersion"):
            self.assertRegex(syms, rf"\b[TW] {sym}\b")


if __name__ == "__main__":
    unittest.main()
