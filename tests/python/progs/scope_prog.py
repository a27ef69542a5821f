# tests/python/progs/scope_prog.py — child of test_python_scopes.py: Python and backward() scopes.
"""Child program for test_python_scopes.py, run with PYTHONPATH=tools/python (and fake_torch for
"backward") under LD_PRELOAD=libgpumemtrace.so, or without it. argv: libcudart path, mode:
  scopes    gpumemtrace.scope as context manager and decorator: nesting, exceptions, threads, a long name
  backward  torch.autograd.backward / Tensor.backward through the PyTorch hook: plain, re-entrant,
            raising, from a thread
Prints what the program saw (return values, exceptions), the same with and without the library."""
import ctypes
import sys
import threading

ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
rt = ctypes.CDLL(None)
mode = sys.argv[2]

import gpumemtrace  # noqa: E402


def allocate(n):
    p = ctypes.c_void_p()
    rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(n))
    rt.cudaFree(p)


@gpumemtrace.scope("step")
def train_step(n):
    allocate(n)
    return n * 2


@gpumemtrace.scope("failing")
def failing_step():
    allocate(4004)
    raise KeyError("inside")


def run_eval():
    with gpumemtrace.scope("eval") as s:  # LINE_EVAL
        allocate(1001)
    return s


def worker(i, out):
    out[i] = (threading.get_native_id(), train_step(5000 + i))


if mode == "scopes":
    print("active", gpumemtrace.active())
    print("enter returns", run_eval())
    with gpumemtrace.scope("epoch"):
        print("returns", train_step(2002), train_step(3003))
    try:
        with gpumemtrace.scope("boom"):
            raise ValueError("body")
    except ValueError as e:
        print("caught", repr(e))
    try:
        failing_step()
    except KeyError as e:
        print("caught", repr(e))
    results = {}
    threads = [threading.Thread(target=worker, args=(i, results)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(3):
        print("thread", i, results[i][0], results[i][1])
    long_name = ("tests/test_long.py::TestClass::test_parametrized[" + "x" * 250)[:249] + "]"
    with gpumemtrace.scope(long_name):
        allocate(6006)
    print("long", long_name)

if mode == "backward":
    import torch

    loss = torch.empty(1000, device="cuda")
    print("returns", loss.backward())  # LINE_BACKWARD
    print("wrapped name", torch.autograd.backward.__name__)

    def reenter(roots):
        torch.autograd.hook = None
        torch.autograd.backward(torch.empty(2000, device="cuda"))  # LINE_REENTER

    torch.autograd.hook = reenter
    torch.autograd.backward([loss])

    def fail(roots):
        raise RuntimeError("grad failed")

    torch.autograd.hook = fail
    try:
        loss.backward()
    except RuntimeError as e:
        print("caught", repr(e))
    torch.autograd.hook = None
    tids = []

    def backward_in_thread():
        tids.append(threading.get_native_id())
        torch.empty(3000, device="cuda").backward()

    t = threading.Thread(target=backward_in_thread)
    t.start()
    t.join()
    print("thread", tids[0])
