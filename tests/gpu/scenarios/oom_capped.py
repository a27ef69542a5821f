# tests/gpu/scenarios/oom_capped.py — GPU scenario: an OOM from the allocator's own limit.
"""An allocator cap: set_per_process_memory_fraction(0.02), then a 2 GiB request. The device has room;
the allocator's own limit refuses it. Verdict: allocator limit."""
import torch

torch.cuda.set_per_process_memory_fraction(0.02)
keep = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
try:
    big = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError as e:
    print("capped OOM:", str(e).splitlines()[0])
