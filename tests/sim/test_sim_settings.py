# tests/sim/test_sim_settings.py — the simulated runtime's and driver's settings: a bad one stops the
# program with one line, never a silently different machine.
"""GPUMEMTRACE_SIM_CAPACITY and GPUMEMTRACE_SIM_DEVICES (tests/sim/sim_settings.h), read by both
build/sim/libcudart.so.13 and build/sim/libcuda.so.1 when they are loaded: a size that is not one
("1 GiB" with its space, "lots"), too small for one allocation ("100", "0") or a device count out of
1-8 is refused with one line on stderr and exit status 2 before the program goes on; a good one
gives the device it names; unset or empty gives the defaults (16 GiB, one device)."""
import os
import subprocess
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("GPUMEMTRACE_BUILD", os.path.join(ROOT, "build"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from testenv import sanitizer_runtime  # noqa: E402

RUNTIME = os.path.join(BUILD, "sim", "libcudart.so.13")
DRIVER = os.path.join(BUILD, "sim", "libcuda.so.1")

# Loads a simulated library and prints what it says the device is.
PROG = r'''
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
if sys.argv[1].endswith("libcudart.so.13"):
    count, free, total = ctypes.c_int(), ctypes.c_size_t(), ctypes.c_size_t()
    assert lib.cudaGetDeviceCount(ctypes.byref(count)) == 0
    assert lib.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total)) == 0
else:
    count, total = ctypes.c_int(), ctypes.c_size_t()
    assert lib.cuInit(0) == 0
    assert lib.cuDeviceGetCount(ctypes.byref(count)) == 0
    assert lib.cuDeviceTotalMem_v2(ctypes.byref(total), 0) == 0
print(count.value, total.value)
'''


@unittest.skipUnless(os.path.exists(RUNTIME) and os.path.exists(DRIVER), "needs build/sim (make)")
class SimSettings(unittest.TestCase):
    def run_with(self, library, **env):
        e = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEMTRACE_") and k != "LD_PRELOAD"}
        if sanitizer_runtime():  # the instrumented library is loaded by ctypes: its sanitizer goes first
            e["LD_PRELOAD"] = sanitizer_runtime()
        e.update(env)
        return subprocess.run([sys.executable, "-c", PROG, library], capture_output=True, text=True, env=e, timeout=60)

    def test_bad_values_stop_the_program_with_one_line(self):
        size = "expected a size of at least 2M, such as 64M or 16G"
        count = "expected a number of devices from 1 to 8"
        for name, value, said in (("GPUMEMTRACE_SIM_CAPACITY", "1 GiB", size), ("GPUMEMTRACE_SIM_CAPACITY", "lots", size),
                                  ("GPUMEMTRACE_SIM_CAPACITY", "100", size), ("GPUMEMTRACE_SIM_CAPACITY", "0", size),
                                  ("GPUMEMTRACE_SIM_CAPACITY", "-1G", size), ("GPUMEMTRACE_SIM_DEVICES", "0", count),
                                  ("GPUMEMTRACE_SIM_DEVICES", "9", count), ("GPUMEMTRACE_SIM_DEVICES", "two", count),
                                  ("GPUMEMTRACE_SIM_DEVICES", "2G", count)):
            for library in (RUNTIME, DRIVER):
                with self.subTest(name=name, value=value, library=os.path.basename(library)):
                    proc = self.run_with(library, **{name: value})
                    self.assertEqual((proc.returncode, proc.stdout), (2, ""))
                    self.assertEqual(proc.stderr, f"gpumemtrace sim: {name}={value}: {said}\n")

    def test_good_values_and_defaults(self):
        for env, expected in (({}, "1 %d" % (16 << 30)), ({"GPUMEMTRACE_SIM_CAPACITY": ""}, "1 %d" % (16 << 30)),
                              ({"GPUMEMTRACE_SIM_CAPACITY": "64M", "GPUMEMTRACE_SIM_DEVICES": "3"}, "3 %d" % (64 << 20)),
                              ({"GPUMEMTRACE_SIM_CAPACITY": "2M"}, "1 %d" % (2 << 20))):
            for library in (RUNTIME, DRIVER):
                with self.subTest(env=env, library=os.path.basename(library)):
                    proc = self.run_with(library, **env)
                    self.assertEqual((proc.returncode, proc.stderr), (0, ""))
                    self.assertEqual(proc.stdout.strip(), expected)


if __name__ == "__main__":
    unittest.main()
