# tests/launcher/launcher_prog.py — child program for the launcher tests: clean, leaking or failing runs.
"""Child program for the launcher tests: allocates through the (simulated) CUDA runtime via ctypes,
from named functions. argv: MODE [libcudart path]. Modes:
  clean  allocate and free 8 MiB three times, exit 0
  leak   allocate 3 MiB in leak_buffer() and never free it, exit 0
  fail   clean, then exit 7
  multi  start two child processes (`leak` and `clean`), wait for them, exit 0
  wait   allocate, print "ready", sleep until a signal arrives (default action)
  hold   allocate and free 8 MiB 2000 times (enough trace for a flight recorder of 128K to cut), keep
         5 MiB from hold_buffer(), print "ready", sleep until a signal arrives (gpumemtrace dump's tests:
         tests/launcher/test_dump.py)
  grow   allocate 1 MiB more in grow_cache() every 0.1 s, keeping it all; "ready" after the first;
         until a signal arrives (gpumemtrace top's tests: tests/launcher/test_top.py)
"""
import ctypes
import os
import subprocess
import sys
import time

MiB = 1 << 20
CUDART = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("LAUNCHER_TEST_CUDART", "libcudart.so.13")
ctypes.CDLL(CUDART, mode=ctypes.RTLD_GLOBAL)
rt = ctypes.CDLL(None)  # global scope, so the preloaded hooks bind (see tests/python/progs)


def cuda_malloc(n):
    p = ctypes.c_void_p()
    rc = rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(n))
    assert rc == 0, rc
    return p


def step():
    p = cuda_malloc(8 * MiB)
    rt.cudaFree(p)


def leak_buffer():
    return cuda_malloc(3 * MiB)


def grow_cache():
    return cuda_malloc(1 * MiB)


def hold_buffer():
    return cuda_malloc(5 * MiB)


def main(mode):
    if mode in ("clean", "fail"):
        for _ in range(3):
            step()
        return 7 if mode == "fail" else 0
    if mode == "leak":
        step()
        leak_buffer()
        return 0
    if mode == "multi":
        step()
        for child in ("leak", "clean"):
            subprocess.run([sys.executable, __file__, child, CUDART], check=True)
        return 0
    if mode == "wait":
        step()
        print("ready", flush=True)
        while True:
            time.sleep(0.1)
    if mode == "hold":
        for _ in range(2000):
            step()
        held = hold_buffer()  # noqa: F841 (kept until the signal)
        print("ready", flush=True)
        while True:
            time.sleep(0.1)
    if mode == "grow":
        held = [grow_cache()]
        print("ready", flush=True)
        while True:
            time.sleep(0.1)
            held.append(grow_cache())
    raise SystemExit("unknown mode " + mode)


sys.exit(main(sys.argv[1]))
