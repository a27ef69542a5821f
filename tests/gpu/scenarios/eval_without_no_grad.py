# tests/gpu/scenarios/eval_without_no_grad.py — GPU scenario: growth from a loss kept with its graph.
"""The classic growth: validation loss accumulated as a tensor that requires grad, outside no_grad,
so every iteration keeps its activations alive."""
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 1)).cuda()
total = 0
for step in range(60):
    x = torch.randn(512, 1024, device="cuda")
    total = total + model(x).mean()   # the mistake: should be .item() or under torch.no_grad()
torch.cuda.synchronize()
print("total %.3f allocated %d MiB" % (total.item(), torch.cuda.memory_allocated() >> 20))
