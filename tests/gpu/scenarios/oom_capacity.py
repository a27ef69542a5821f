# tests/gpu/scenarios/oom_capacity.py — GPU scenario: an OOM because the device is full (verdict capacity).
"""Fill the device with 4 GiB tensors until one fails: PyTorch frees its cache and retries the
cudaMalloc, then raises. One OOM, verdict capacity."""
import torch

held = []
try:
    while True:
        held.append(torch.empty(4 << 30, dtype=torch.uint8, device="cuda"))
except torch.OutOfMemoryError as e:
    print("OOM after %d GiB: %s" % (4 * len(held), str(e).splitlines()[0]))
del held
