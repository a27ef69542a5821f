# tests/driver/test_driver_backends.py — the CUPTI and driver-hook backends describe each call the same way.
"""Both recording backends on the simulated driver: the CUPTI callbacks and the driver hooks describe
each call the same way and enrich it in one place (docs/capture.md, "One description per call").

build/sim/libfakecupti.so (tests/sim/fake_libcupti.cpp) stands in for libcupti: the simulated driver
fires CUPTI driver-domain callbacks around its memory functions on every route, so
GPUMEMTRACE_BACKEND=cupti really records through the CUPTI callbacks here. The tests check that
  - a CUPTI trace has the device's `device` line and a meminfo right after an out-of-memory failure,
  - every route x scenario of test_driver_capture.py gives the same trace under both backends, field by
    field, ignoring only what must differ (the header's backend, tids, timestamps, stack ids).
"""
import os
import unittest

from test_driver_capture import GIB, PROGS, ROUTES, SIM, SIM_TOTAL, mask_host, run

FAKE_CUPTI = os.path.join(SIM, "libfakecupti.so")
CUPTI_ENV = {"GPUMEMTRACE_BACKEND": "cupti", "GPUMEMTRACE_CUPTI_PATH": FAKE_CUPTI}
SCENARIOS = [["basic"], ["oom"], ["vmm"], ["async"], ["async", "--ptsz"], ["ctx"], ["errors"], ["extreme"]]
MUST_DIFFER = {"t", "tid", "stack"}


def comparable(event):
    """The event without what must differ between two runs. Heap addresses (host memory, the
    simulated driver's pool handles) differ from run to run whatever the backend: masked as the
    program's output is."""
    return {k: mask_host(v) if isinstance(v, str) else v for k, v in event.items() if k not in MUST_DIFFER}


@unittest.skipUnless(os.path.exists(FAKE_CUPTI) and os.path.exists(os.path.join(PROGS, "drv_direct")),
                     "build/sim/libfakecupti.so or the driver test programs are not built (make test)")
class CuptiBackendOnSimulatedDriver(unittest.TestCase):
    def test_device_line_and_meminfo_after_out_of_memory(self):
        for route in ROUTES:
            with self.subTest(route=route):
                out, (events, _, devices, header), stderr = run("drv_" + route, ["oom"], env=CUPTI_ENV)
                self.assertEqual(header["backend"], "cupti", stderr)
                self.assertNotIn("using interposition", stderr)
                self.assertEqual(len(devices), 1, devices)
                self.assertEqual((devices[0]["device"], devices[0]["name"], devices[0]["total"]),
                                 (0, "gpumemtrace simulated GPU", SIM_TOTAL))
                failed = [e for e in events if e["op"] == "alloc" and e.get("result")]
                self.assertEqual([(e["api"], e["size"], e["result"]) for e in failed],
                                 [("cuMemAlloc_v2", 64 * GIB, 2)])
                after = events[events.index(failed[0]) + 1]
                self.assertEqual((after["op"], after["api"], after["device"]), ("meminfo", "cuMemGetInfo_v2", 0))
                self.assertEqual((after["free"], after["total"]), (SIM_TOTAL - 3146240, SIM_TOTAL))
                # The first successful allocation is followed by the device's start-of-run meminfo.
                self.assertEqual([e["op"] for e in events[:2]], ["alloc", "meminfo"])

    def test_every_scenario_gives_the_same_trace_under_both_backends(self):
        for route in ROUTES:
            for args in SCENARIOS:
                with self.subTest(route=route, scenario=" ".join(args)):
                    prog = "drv_" + route
                    out_i, (events_i, _, devices_i, header_i), _ = run(prog, args)
                    out_c, (events_c, _, devices_c, header_c), err_c = run(prog, args, env=CUPTI_ENV)
                    self.assertEqual((header_i["backend"], header_c["backend"]), ("interpose", "cupti"), err_c)
                    self.assertEqual(mask_host(out_i), mask_host(out_c))
                    self.assertGreater(len(events_i), 0)
                    self.assertEqual(len(events_i), len(events_c), [e["api"] for e in events_c])
                    for ev_i, ev_c in zip(events_i, events_c):
                        self.assertEqual(comparable(ev_i), comparable(ev_c))
                    self.assertEqual(devices_i, devices_c)


if __name__ == "__main__":
    unittest.main()
