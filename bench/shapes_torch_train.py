# bench/shapes_torch_train.py — the PyTorch-shaped workload of make bench-report-shapes: a long training
# loop on the stand-in torch (tests/python/fake_torch), run under the recorder with its PyTorch hook, so
# that the trace holds what a real run's does: tensor-level events drained from the allocator's history
# (delayed, merged by the reader at each sync), each with its Python stack, and the segments' cudaMalloc
# calls on the simulated runtime.
"""A training loop of STEPS steps: per step a forward pass through 12 blocks of 2 layers (an activation
kept for the backward pass and a temporary freed at once, from 4 call sites 9-12 Python frames deep),
a backward pass (a gradient per block, the activations freed in reverse), an optimizer step (two state
buffers per 4 blocks, swapped) and the loss. About 80 tensor events per step.

    python3 bench/shapes_torch_train.py STEPS      (under gpumemtrace, with the stand-in torch on PYTHONPATH)
"""
import sys

import torch

MiB = 1 << 20
BLOCKS = 12


class Linear:
    def __init__(self, index):
        self.out = (index % 6 + 1) * MiB

    def forward(self, x):
        y = torch.empty(self.out)
        scratch = torch.empty(self.out // 8 + 4096)   # a temporary: freed on return
        del scratch
        return y


class Block:
    def __init__(self, index):
        self.a, self.b = Linear(index), Linear(index + 3)

    def forward(self, x, saved):
        h = self.a.forward(x)
        saved.append(h)
        return self.b.forward(h)

    def backward(self, grad, saved):
        g = torch.empty(len(saved) * 4096 + 512)
        saved.pop()
        return g


class Model:
    def __init__(self):
        self.blocks = [Block(i) for i in range(BLOCKS)]
        self.state = [torch.empty(2 * MiB) for _ in range(BLOCKS // 4)]

    def forward(self, saved):
        x = torch.empty(MiB)
        for block in self.blocks:
            x = block.forward(x, saved)
        return x

    def backward(self, saved):
        grads = []
        for block in reversed(self.blocks):
            grads.append(block.backward(None, saved))
        return grads

    def optimizer_step(self, grads):
        for i in range(len(self.state)):
            self.state[i] = torch.empty(2 * MiB)   # the old state buffer is freed
        grads.clear()


def train_step(model):
    saved = []
    out = model.forward(saved)
    loss = torch.empty(512)
    del out
    grads = model.backward(saved)
    model.optimizer_step(grads)
    del loss


def main():
    steps = int(sys.argv[1])
    model = Model()
    for _ in range(steps):
        train_step(model)


if __name__ == "__main__":
    main()
