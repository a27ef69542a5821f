# tests/gpu/scenarios/transformer_step.py — GPU scenario: transformer training steps (roles at the peak).
"""Three training steps of a small transformer with AdamW: the role split at the peak."""
import torch
import torch.nn as nn

torch.manual_seed(0)
layer = nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048, batch_first=True)
model = nn.Sequential(nn.TransformerEncoder(layer, num_layers=6), nn.Linear(512, 1000)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(3):
    x = torch.randn(32, 256, 512, device="cuda")
    target = torch.randint(0, 1000, (32, 256), device="cuda")
    logits = model(x)
    loss = nn.functional.cross_entropy(logits.reshape(-1, 1000), target.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
torch.cuda.synchronize()
print("max_allocated %d MiB max_reserved %d MiB" % (torch.cuda.max_memory_allocated() >> 20,
                                                     torch.cuda.max_memory_reserved() >> 20))
