# tests/python/progs/python_cuda_prog.py — child of test_python_trace.py: CUDA calls from named functions.
"""Child program for test_python_trace.py: calls the (simulated) CUDA runtime through ctypes from
named functions, run under LD_PRELOAD=libgpumemtrace.so. argv: libcudart path, "cdll" | "pydll".

The runtime is loaded RTLD_GLOBAL and called through the global scope (CDLL(None)), as a program
linked against libcudart would bind: a handle-specific dlsym would bypass the preloaded hooks.
"""
import ctypes
import sys
import threading

ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
rt = (ctypes.PyDLL if sys.argv[2] == "pydll" else ctypes.CDLL)(None)


def allocate_activations(n):
    p = ctypes.c_void_p()
    rc = rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(n))  # LINE_MALLOC
    assert rc == 0, rc
    return p


def release(p):
    rt.cudaFree(p)  # LINE_FREE


class Net:
    def forward(self):
        return allocate_activations(1234567)


def worker():
    release(allocate_activations(7654321))


def main():
    p = Net().forward()
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    release(p)
    print("program output")


main()
sys.exit(3)
