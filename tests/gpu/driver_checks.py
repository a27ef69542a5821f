#!/usr/bin/env python3
# tests/gpu/driver_checks.py — driver-level capture checked on a real NVIDIA GPU (tests/gpu/run.sh).
"""GPU checks of driver-level capture. Run by tests/gpu/run.sh on a machine with an NVIDIA GPU, with
the recorder and the prebuilt programs where tests/gpu/gpuenv.py says (nothing is built here).

Workloads, each under both backends (GPUMEMTRACE_BACKEND=interpose and =cupti):
  static    the prebuilt nvcc program with the static runtime (tests/gpu/driver_static_cudart.cu,
            GPU_CHECK_PROGRAMS in tests/gpu/module.mk): runtime calls seen
            only at the driver layer, and VMM through cudaGetDriverEntryPointByVersion
  torch     PyTorch native caching allocator (cudaMalloc per segment)
  torch_exp PyTorch expandable_segments:True (cuMemAddressReserve/cuMemCreate/cuMemMap)
  torch_async PyTorch backend:cudaMallocAsync (one cudaMallocAsync per tensor)
  cupy      CuPy (static runtime copy; its memory pool calls cudaMalloc)
Checks: the program's output is unchanged by the preload; the expected APIs and sizes are in the
trace; both backends agree on the number and bytes of successful allocations (physical ones for VMM).
Prints one line per check (gpuenv.Results); exits 0 when everything passed or was skipped, 1
otherwise. Skips cleanly (exit 0) without a GPU, the prebuilt program, torch or cupy.
"""
import os
import subprocess
import sys
import tempfile

import gpuenv
from gpuenv import LIB, have_gpu
import tracefile  # noqa: E402  (tests/, on the path through gpuenv)

RESULTS = gpuenv.Results("driver")


def say(status, name, detail=""):
    RESULTS.say(name, {"pass": True, "fail": False, "skip": None}[status], detail)


def trace_of(cmd, backend, env=None, preload=True):
    with tempfile.TemporaryDirectory(dir=gpuenv.out_dir("driver")) as tmp:
        out = os.path.join(tmp, "t.jsonl")
        e = dict(os.environ, GPUMEMTRACE_OUTPUT=out, GPUMEMTRACE_BACKEND=backend, **(env or {}))
        if preload:
            e["LD_PRELOAD"] = LIB
        p = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=600)
        events, header = [], {}
        if os.path.exists(out):
            for r in tracefile.read_records(out)[0]:
                if r.get("type") == "event":
                    events.append(r)
                elif r.get("type") == "header":
                    header = r
        return p, events, header


def allocs(events, kinds=("device", "async", "managed", "host", "physical")):
    ok = [e for e in events if e["op"] == "alloc" and e.get("result", 0) == 0 and e["kind"] in kinds]
    return len(ok), sum(e["size"] for e in ok)


def run_workload(name, cmd, expect, env=None):
    """expect(events, backend) -> error string or None."""
    base, _, _ = trace_of(cmd, "interpose", env, preload=False)
    if base.returncode != 0:
        say("skip" if base.returncode == 77 else "fail", name, f"workload exited {base.returncode}: "
            f"{(base.stdout + base.stderr)[-400:]}")
        return
    per_backend = {}
    for backend in ("interpose", "cupti"):
        p, events, header = trace_of(cmd, backend, env)
        check = f"{name}/{backend}"
        if p.returncode != 0 or p.stdout != base.stdout:
            say("fail", check, f"output changed or exit {p.returncode}: {(p.stdout + p.stderr)[-400:]}")
            continue
        err = expect(events, backend)
        if err:
            say("fail", check, err)
            continue
        per_backend[backend] = (allocs(events), header.get("backend"))
        say("pass", check, f"backend={header.get('backend')} allocations={per_backend[backend][0]}")
    if len(per_backend) == 2:
        (a, _), (c, used) = per_backend["interpose"], per_backend["cupti"]
        if used != "cupti":
            say("skip", f"{name}/agree", "CUPTI backend not active (subscriber slot taken?)")
        elif a == c:
            say("pass", f"{name}/agree", f"{a[0]} allocations, {a[1]} bytes")
        else:
            say("fail", f"{name}/agree", f"interpose {a} vs cupti {c}")


def need(events, api=None, op="alloc", kind=None, size=None, at_least=1):
    n = sum(1 for e in events if (api is None or e["api"] == api or e.get("driver_api") == api)
            and e["op"] == op and (kind is None or e["kind"] == kind) and (size is None or e["size"] == size)
            and e.get("result", 0) == 0)
    return None if n >= at_least else f"expected {at_least}x {api} {op} {kind} {size}, found {n}"


def first_error(*errors):
    return next((e for e in errors if e), None)


TORCH = r"""
import sys
try:
    import torch
except ImportError:
    sys.exit(77)
if not torch.cuda.is_available():
    sys.exit(77)
xs = [torch.empty(n * 1024 * 1024, dtype=torch.uint8, device="cuda") for n in (1, 3, 7, 21)]
torch.cuda.synchronize()
print("sizes", [x.numel() for x in xs])
del xs
torch.cuda.empty_cache()
"""

CUPY = r"""
import sys
try:
    import cupy
except ImportError:
    sys.exit(77)
xs = [cupy.empty(n * 1024 * 1024, dtype=cupy.uint8) for n in (1, 3, 7)]
cupy.cuda.Device().synchronize()
print("sizes", [x.size for x in xs])
del xs
cupy.get_default_memory_pool().free_all_blocks()
"""


def main():
    if not have_gpu() or os.environ.get("GPU_CHECKS_NO_GPU"):
        say("skip", "driver GPU checks", "no NVIDIA GPU (nvidia-smi -L failed)")
        return 0
    if not os.path.exists(LIB):
        say("fail", "driver GPU checks", f"{LIB} missing (GPUMEMTRACE_HOME, tests/gpu/gpuenv.py)")
        return 1
    subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv"])
    exe = os.path.join(gpuenv.PROGRAMS, "driver_static_cudart")
    if os.access(exe, os.X_OK):
        # CUPTI sees the static runtime's calls too (runtime callbacks): runtime names are only
        # unexpected under interposition, which cannot hook a statically linked runtime.
        run_workload("static", [exe], lambda ev, backend: first_error(
            need(ev, "cuMemAlloc_v2", kind="device", size=3145735),
            need(ev, "cuMemAllocAsync", kind="async", size=1048579),
            need(ev, "cuMemHostAlloc", kind="host", size=65547),
            need(ev, "cuMemCreate", kind="physical", size=2 << 20),
            need(ev, "cuMemMap", op="map"), need(ev, "cuMemAddressReserve", op="reserve", kind="virtual"),
            None if backend == "cupti" or not any(e["api"].startswith("cuda") for e in ev)
            else "runtime names in a static build under interposition?"))
    else:
        say("skip", "static", f"{exe} not there (make gpu-programs; GPU_PROGRAMS)")
    py = sys.executable
    run_workload("torch", [py, "-c", TORCH], lambda ev, _: need(ev, "cudaMalloc", kind="device"))
    run_workload("torch_exp", [py, "-c", TORCH], lambda ev, _: first_error(
        need(ev, "cuMemCreate", kind="physical"), need(ev, "cuMemMap", op="map"),
        need(ev, "cuMemAddressReserve", op="reserve")),
        env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    run_workload("torch_async", [py, "-c", TORCH], lambda ev, _: need(ev, "cudaMallocAsync", kind="async", at_least=4),
                 env={"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"})
    run_workload("cupy", [py, "-c", CUPY], lambda ev, _: need(ev, "cuMemAlloc_v2", kind="device"))
    return RESULTS.exit_code()


if __name__ == "__main__":
    sys.exit(main())
