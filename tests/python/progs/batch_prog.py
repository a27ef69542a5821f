# tests/python/progs/batch_prog.py — a training loop whose memory follows its batch size, on the stand-in torch.
"""Child of tests/report/test_report_batch.py, run under the recorder on the simulated runtime.
argv[1]: the batch size. argv[2]: "linear" (default: every request's size is a + b * batch), "curved"
(attention-like scores of batch * batch elements: not a straight line in the batch) or "capped" (linear,
under torch.cuda.set_per_process_memory_fraction(0.5), set before the first request).

Each of three steps: an input batch, two layers' activations, a temporary freed before the second layer
asks for more than its segment holds (the freed segment stays cached: fragmentation), a small buffer per
sample, and a fixed 8 MiB workspace; weights of 48 MiB made once do not scale. Everything a step made
is freed at its end, so each step asks for the same sizes in the same order."""
import sys

import torch

MiB = 1 << 20
batch = int(sys.argv[1])
curved = len(sys.argv) > 2 and sys.argv[2] == "curved"
if len(sys.argv) > 2 and sys.argv[2] == "capped":
    torch.cuda.set_per_process_memory_fraction(0.5)


class Net:
    def __init__(self):
        self.weight = torch.empty(48 * MiB, device="cuda")  # LINE_WEIGHT: parameters, made once

    def forward(self, x):
        h1 = torch.empty(2 * MiB * batch, device="cuda")  # LINE_H1
        tmp = torch.empty(MiB * batch + 4 * MiB, device="cuda")  # LINE_TMP: freed before h2
        del tmp
        h2 = torch.empty(2 * MiB * batch + 6 * MiB, device="cuda")  # LINE_H2: does not fit tmp's segment
        per_sample = torch.empty(1024 * batch, device="cuda")  # LINE_PER_SAMPLE
        kept = [h1, h2, per_sample]
        if curved:
            kept.append(torch.empty(64 * 1024 * batch * batch, device="cuda"))  # LINE_SCORES
        workspace = torch.empty(8 * MiB, device="cuda")  # LINE_WORKSPACE: a fixed size
        del workspace
        return kept


net = Net()
for step in range(3):
    x = torch.empty(MiB * batch, device="cuda")  # LINE_INPUT
    out = net.forward(x)
    del out, x
print("done")
