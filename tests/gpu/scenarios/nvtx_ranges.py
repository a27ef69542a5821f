# tests/gpu/scenarios/nvtx_ranges.py — GPU scenario: torch.cuda.nvtx ranges name the peak's phase.
"""NVTX ranges from torch.cuda.nvtx name the phases, with no gpumemtrace call in the program: the
peak (a 512 MiB activation) lands in the "train/forward" range."""
import torch

torch.cuda.nvtx.range_push("load")
model = torch.nn.Linear(4096, 4096).cuda()
torch.cuda.nvtx.range_pop()
torch.cuda.nvtx.range_push("train")
for step in range(3):
    torch.cuda.nvtx.range_push("forward")
    x = torch.randn(32768, 4096, device="cuda")  # 512 MiB: the peak
    y = model(x)
    torch.cuda.nvtx.range_pop()
    del x, y
torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
