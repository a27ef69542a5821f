# tests/gpu/scenarios/expandable_growth_oom.py — GPU scenario: growth under expandable segments, then an OOM.
"""Planted growth under expandable segments, then an OOM: activations kept alive every step
(8 MiB per step), then one request larger than the device. Before raising, PyTorch maps 20 MiB chunks
until the device is full and gives them back. Growth must still be reported; the spike must not be."""
import os

assert "expandable_segments:True" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
import torch

lin = torch.nn.Linear(1024, 1024).cuda()
kept = []
for step in range(80):
    x = torch.randn(2048, 1024, device="cuda")
    kept.append(lin(x))  # the planted mistake: the output (and its graph) kept every step
    torch.cuda.synchronize()
try:
    torch.empty(200 << 30, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError as e:
    print("OOM:", str(e).splitlines()[0])
print("kept %d MiB" % (sum(t.numel() * t.element_size() for t in kept) >> 20))
