# tests/python/progs/control_prog.py — child of test_python_control.py: start, stop, mark and dump from Python.
"""Child program for test_python_control.py, run with PYTHONPATH=tools/python, under
LD_PRELOAD=libgpumemtrace.so or without it. argv: libcudart path, mode, folder for dumps:
  control   allocations with stacks, stop(), one without, start(), a mark, then a dump (default name)
            and a dump to a named file, each after printing what the program itself holds; a dump
            whose name disagrees with the trace's compression; allocations after the dumps
  early     dump() and stop() before the first CUDA call, then an allocation, then start()
  untraced  every control call, twice: their results and the warnings they gave
Prints "live N" (bytes this program holds) before each dump, then "dump PATH" or "error TEXT"."""
import ctypes
import os
import sys
import warnings

ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
rt = ctypes.CDLL(None)
mode, folder = sys.argv[2], sys.argv[3]

import gpumemtrace  # noqa: E402

held = {}


def allocate(n):
    p = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(n)) == 0
    held[p.value] = n
    return p.value


def release(addr):
    rt.cudaFree(ctypes.c_void_p(addr))
    del held[addr]


def with_stack(n):
    return allocate(n)


def while_stopped(n):
    return allocate(n)


def dump(path=None):
    print("live", sum(held.values()), flush=True)
    try:
        print("dump", gpumemtrace.dump(path), flush=True)
    except gpumemtrace.DumpError as e:
        print("error", e, flush=True)


if mode == "control":
    first = with_stack(1 << 20)
    print("stop", gpumemtrace.stop(), gpumemtrace.stop())
    while_stopped(2 << 20)
    print("start", gpumemtrace.start(), gpumemtrace.start())
    with_stack(3 << 20)
    gpumemtrace.mark("epoch 3")
    dump()
    release(first)
    with_stack(5 << 20)
    dump(os.path.join(folder, "named.jsonl.zst"))
    dump(os.path.join(folder, "plain.jsonl"))
    with_stack(7 << 20)
elif mode == "early":
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        print("early dump", gpumemtrace.dump(os.path.join(folder, "early.jsonl.zst")))
    print("warned", [str(w.message) for w in caught])
    gpumemtrace.stop()
    while_stopped(4 << 20)
    gpumemtrace.start()
    with_stack(6 << 20)
elif mode == "untraced":
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            print("results", gpumemtrace.mark("m"), gpumemtrace.stop(), gpumemtrace.start(),
                  gpumemtrace.dump(os.path.join(folder, "x.jsonl.zst")))
    print("warnings", len(caught), [w.category.__name__ for w in caught])
    print("first", caught[0].message if caught else None)
    print("files", sorted(os.listdir(folder)))
