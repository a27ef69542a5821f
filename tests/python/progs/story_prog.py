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
  deep        one forward pass through 200 identical blocks (a DiT, a ViT), each keeping its activations for
              a backward() that never comes: they pile up block after block until the device is full, in the
              first forward pass (a batch too big for the model, not a growth across iterations).
  eval        validation without torch.no_grad(): each batch is copied to the device and its output, with
              the graph of its four layers' activations, is kept in a list until the device is full.
  decode      an LLM's decode loop: each step appends the new token's keys and values to every layer's
              cache, then samples the next token outside the model, until the cache fills the device.
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


class Deep:
    """Identical blocks, each keeping what its backward() would need."""

    def __init__(self, blocks):
        self.blocks = blocks

    def forward(self, x):
        saved = []
        for _ in range(self.blocks):
            attention = torch.empty(6 * MiB, device="cuda")  # LINE_DEEP_ATTENTION
            hidden = torch.empty(2 * MiB, device="cuda")  # LINE_DEEP_HIDDEN
            scratch = torch.empty(2 * MiB, device="cuda")  # a temporary of the block
            saved.append((attention, hidden))
            del scratch
        loss = torch.empty(512, device="cuda")
        loss.graph = saved
        return loss

    __call__ = forward


class Decoder:
    """Four layers with a key/value cache each, in pages of one token (a paged cache; torch.cat into a
    tensor one token longer keeps as much)."""

    def __init__(self, layers=4):
        self.cache = [[] for _ in range(layers)]

    def forward(self, token):
        for pages in self.cache:
            pages.append(torch.empty(MiB, device="cuda"))  # LINE_KV: this token's keys and values
        return torch.empty(512, device="cuda")  # the logits

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


def deep(model):
    x = torch.empty(8 * MiB, device="cuda")  # the batch, copied to the device
    loss = Deep(200)(x)  # LINE_DEEP_CALL: out of memory inside this first forward pass
    loss.backward()


def evaluate(model):
    outputs = []
    for step in range(1000):
        x = torch.empty(4 * MiB, device="cuda")  # the batch, copied to the device
        outputs.append(model(x, 2 * MiB, layers=4))  # LINE_EVAL_KEEP: should run under torch.no_grad()


def decode(model):
    decoder = Decoder()
    token = torch.empty(512, device="cuda")  # the prompt
    for step in range(100000):
        logits = decoder(token)
        token = torch.empty(512, device="cuda")  # LINE_SAMPLE: the next token, sampled outside the model
        del logits


{"accumulate": accumulate, "batch": batch, "deep": deep, "eval": evaluate, "decode": decode}[sys.argv[1]](Net())
