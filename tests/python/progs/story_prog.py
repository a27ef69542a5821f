# tests/python/progs/story_prog.py — crashed PyTorch runs as a new user writes them (the stand-in torch).
"""Child of tests/report/test_report_story.py: training loops that die of an out-of-memory error, from
the patterns of real OOM reports, on the stand-in torch over the simulated runtime (1 GiB device).
argv[1]:
  accumulate  every step's loss is appended to a list, and with it the graph that keeps the step's
              activations alive (`epoch_loss.append(loss)` instead of `loss.item()`): memory grows by
              one step's activations per step until the device is full.
  batch       20 steps of short sequences fit and free their activations; then a long one: its
              four layers' activations alone do not fit (a batch too big). A small tensor kept per step grows too,
              but it is not what filled the device.
The OOM ends the run (an uncaught torch.cuda.OutOfMemoryError: exit status 1)."""
import sys

import torch

MiB = 1 << 20


class Net:
    def __init__(self):
        self.weight = torch.empty(64 * MiB, device="cuda")  # LINE_WEIGHT

    def forward(self, x, width, layers=1):
        hidden = []
        for _ in range(layers):
            hidden.append(torch.empty(width, device="cuda"))  # LINE_ACTIVATION
        loss = torch.empty(512, device="cuda")
        loss.graph = hidden  # as autograd's graph does: the loss keeps the activations it came from
        return loss

    __call__ = forward


def accumulate(model):
    epoch_loss = []
    for step in range(1000):
        x = torch.empty(4 * MiB, device="cuda")
        loss = model(x, 8 * MiB)
        epoch_loss.append(loss)  # LINE_APPEND: should be loss.item()
        del x


def batch(model):
    log = []
    for step in range(21):
        width = 4 * MiB if step < 20 else 300 * MiB  # LINE_LONG: one long batch
        x = torch.empty(8 * MiB, device="cuda")
        loss = model(x, width, layers=4)
        log.append(torch.empty(512, device="cuda"))  # LINE_LOG: a little kept per step
        del x, loss


{"accumulate": accumulate, "batch": batch}[sys.argv[1]](Net())
