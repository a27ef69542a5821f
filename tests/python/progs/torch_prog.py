# tests/python/progs/torch_prog.py — child of test_python_torch.py: the stand-in torch under the recorder.
"""Child program for test_python_torch.py, run with PYTHONPATH=tools/python:fake_torch under
LD_PRELOAD=libgpumemtrace.so. argv[1]: "train" | "oom" | "sigterm" | "emptycache" | "noimport" |
"nocuda" | "drained" | "drained_then_alloc" | "inductor" | "cudaonly" | "model" | "fork" | "settings" |
"capped".
Prints a fixed line and exits with code 7 so the test can check both are unchanged."""
import os
import signal
import sys

mode = sys.argv[1]
if mode == "noimport":
    print("no torch here")
    sys.exit(7)

import torch  # noqa: E402

if mode == "nocuda":
    print("torch imported, CUDA never used")
    sys.exit(7)


def make_activation(n):
    return torch.empty(n, device="cuda")  # LINE_ACT


def train(steps):
    kept = []
    for step in range(steps):
        x = make_activation(300000)
        loss = torch.empty(512, device="cuda")
        kept.append(loss)  # LINE_LEAK: epoch_loss += loss keeps every step's loss alive
        del x
    return kept


if mode == "train":
    kept = train(20)
    print("reserved", torch.cuda.max_memory_reserved(), "allocated", torch.cuda.max_memory_allocated())
    sys.exit(7)

if mode == "oom":
    hold = [make_activation(64 << 20)]
    try:
        hold.append(torch.empty(900 << 20, device="cuda"))  # LINE_OOM
    except torch.cuda.OutOfMemoryError:
        print("caught OOM")
    sys.exit(7)

if mode == "emptycache":
    # The live cudaFree of a segment (empty_cache) comes before the drain (at exit) that delivers the
    # events of the blocks that lived in it.
    small = torch.empty(1024, device="cuda")  # LINE_SMALL: 2 MiB segment, kept to the end
    big = torch.empty(3 << 20, device="cuda")  # LINE_BIG: a 4 MiB segment of its own
    del big
    torch.cuda.empty_cache()  # cudaFree of the 4 MiB segment
    again = torch.empty(512 << 10, device="cuda")  # LINE_AGAIN: fits in the 2 MiB segment
    del again
    print("reserved", torch.cuda.max_memory_reserved(), "allocated", torch.cuda.max_memory_allocated())
    sys.exit(7)

if mode == "sigterm":
    kept = train(3)
    sys.stdout.write("about to die\n")
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGTERM)
    print("not reached")

if mode in ("drained", "drained_then_alloc"):
    # As the pytest plugin does: a drain by hand after the work; then (maybe) one more block. The
    # stand-in's call log (FAKE_TORCH_CALL_LOG) gets "end" where the program ends.
    kept = train(3)
    hook = sys.modules.get("gpumemtrace_torch")
    if hook is not None:
        hook.drain_now()
    if mode == "drained_then_alloc":
        kept.append(torch.empty(2048, device="cuda"))  # LINE_LATE
    torch._calls.note("end")
    print("done")
    sys.exit(7)

if mode == "inductor":
    import torch._inductor  # noqa: F401  the program's own import: symbolization may use it
    kept = train(2)
    print("done")
    sys.exit(7)

if mode == "cudaonly":
    torch.cuda.init()  # CUDA initialised, the caching allocator never used
    torch._calls.note("end")
    print("done")
    sys.exit(7)

if mode == "model":
    # Methods and a nested function: PyTorch records co_name (__init__), live frames co_qualname.
    class Model:
        def __init__(self):
            self.weight = torch.empty(3 << 20, device="cuda")  # LINE_INIT: a segment of its own

        def forward(self):
            def inner():
                return torch.empty(2048, device="cuda")  # LINE_INNER
            return inner()

    m = Model()
    out = m.forward()
    print("done")
    sys.exit(7)

if mode == "fork":
    kept = train(2)
    pid = os.fork()
    if pid == 0:
        x = torch.empty(4096, device="cuda")
        sys.modules["gpumemtrace_torch"].drain_now()
        torch._calls.note("child_end")
        print("child done")
        sys.stdout.flush()
        sys.exit(0)   # atexit runs: the hook's exit drain too
    os.waitpid(pid, 0)
    print("parent done")
    sys.exit(7)

if mode in ("settings", "settings_churn"):
    # The allocator's settings changed at run time, each way a program can (the variables the test sets
    # are in force at start). settings_churn: then 4000 small tensors made and dropped, enough trace for
    # a flight recorder of 128K to cut several times after the changes.
    first = torch.empty(1 << 20, device="cuda")
    torch.cuda.memory._set_allocator_settings("max_split_size_mb:256,garbage_collection_threshold:0.5")
    second = torch.empty(1 << 20, device="cuda")
    torch.cuda.set_per_process_memory_fraction(0.5)
    third = torch.empty(1 << 20, device="cuda")
    torch.cuda.memory.set_per_process_memory_fraction(0.25, 0)
    try:
        torch.cuda.memory._set_allocator_settings("no_such_option:1")   # PyTorch refuses it: not recorded
    except RuntimeError:
        pass
    if mode == "settings_churn":
        for _ in range(4000):
            t = torch.empty(4096, device="cuda")
            del t
    print("done")
    sys.exit(7)

if mode == "capped":
    # tests/gpu/scenarios/oom_capped.py on the stand-in: a cap of a quarter of a 1 GiB device, 200 MiB
    # kept, then 100 MiB more: the allocator refuses what the device could give.
    torch.cuda.set_per_process_memory_fraction(0.25)
    keep = torch.empty(200 << 20, device="cuda")
    try:
        more = torch.empty(100 << 20, device="cuda")  # LINE_CAPPED
    except torch.cuda.OutOfMemoryError:
        print("capped OOM")
    sys.exit(7)
