# tests/python/progs/python_stack_prog.py — child of test_python_stacks.py: stacks captured by the probe.
"""Child program for test_python_stacks.py: runs under one CPython, captures stacks through the probe
library (build/tests/python/libpython_stack_probe.so) from named functions in several situations, and
prints one JSON object: {scenario: [[kind, function, file, line], ...]} (merged stacks, innermost first).
"""
import ctypes
import gc
import json
import os
import sys
import threading

LIB = sys.argv[1]
cdll = ctypes.CDLL(LIB)      # releases the GIL around calls, like PyTorch
pydll = ctypes.PyDLL(LIB)    # keeps the GIL
BUF = 1 << 16


def parse(text):
    out = []
    for line in text.splitlines():
        parts = line.split(" ")
        if parts[0] == "P" and len(parts) >= 5:
            out.append(["P", " ".join(parts[1:-3]), parts[-3], int(parts[-2])])
        elif parts[0] == "P":
            out.append(["P", "?", "?", 0])
        else:
            out.append(["N", " ".join(parts[1:])])
    return out


def probe(lib):
    buf = ctypes.create_string_buffer(BUF)
    lib.gpumemtrace_probe_stack(buf, BUF)
    return parse(buf.value.decode("utf-8", "replace"))


results = {}


def alloc_cdll():
    return probe(cdll)  # LINE_CDLL


def alloc_pydll():
    return probe(pydll)  # LINE_PYDLL


class Model:
    def forward(self):
        return alloc_cdll()


def train_step():
    return Model().forward()


results["cdll"] = train_step()
results["pydll"] = alloc_pydll()


def thread_body():
    results["thread"] = alloc_cdll()


t = threading.Thread(target=thread_body, name="worker")
t.start()
t.join()


# Python -> C (qsort) -> Python callback -> C: two separate eval loops on 3.11+.
CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))
captured = []


def compare(a, b):
    if not captured:
        captured.append(alloc_cdll())
    return a[0] - b[0]


def sort_with_callback():
    arr = (ctypes.c_int * 4)(4, 3, 2, 1)
    libc = ctypes.CDLL(None)
    libc.qsort(arr, 4, ctypes.sizeof(ctypes.c_int), CMP(compare))


sort_with_callback()
results["callback"] = captured[0]


def gen():
    yield alloc_cdll()


def use_generator():
    return next(gen())


results["generator"] = use_generator()


# A function compiled at run time, captured, then deleted: resolution happens after its code object
# was freed (and its memory likely reused).
def store_from_exec():
    ns = {"lib": cdll}
    src = "def ephemeral_fn():\n    x = 1\n    return lib.gpumemtrace_probe_store(0)\n"
    exec(compile(src, "<ephemeral>", "exec"), ns)
    n = ns["ephemeral_fn"]()
    del ns
    return n


store_from_exec()
gc.collect()
junk = []
for i in range(2000):  # churn: new code objects, likely at the freed addresses
    d = {}
    exec(compile("def f%d():\n    return %d\n" % (i, i), "<junk>", "exec"), d)
    junk.append(d["f%d" % i])
del junk
gc.collect()
buf = ctypes.create_string_buffer(BUF)
cdll.gpumemtrace_probe_resolve(0, buf, BUF)
results["freed"] = parse(buf.value.decode())


def recurse(n):
    if n == 0:
        b = ctypes.create_string_buffer(BUF)
        depth = cdll.gpumemtrace_probe_depth(32, b, BUF)
        return depth, b.value.decode().splitlines()
    return recurse(n - 1)


results["deep"] = recurse(60)


def größe_berechnen():
    return alloc_cdll()


results["unicode"] = größe_berechnen()
results["version"] = sys.version.split()[0]
results["code_entries"] = cdll.gpumemtrace_probe_code_entries()
print(json.dumps(results))
