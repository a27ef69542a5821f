# tests/gpu/scenarios/clean_train.py — GPU scenario: a clean training loop the CI gate must pass.
"""A clean training loop: no leak, no growth. The CI gate must pass on it."""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024)).cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(20):
    x = torch.randn(256, 1024, device="cuda")
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
torch.cuda.synchronize()
print("loss %.4f max_reserved %d max_allocated %d" % (loss.item(), torch.cuda.max_memory_reserved(),
                                                    torch.cuda.max_memory_allocated()))
