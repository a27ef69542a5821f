# tests/gpu/scenarios/leaky_suite.py — GPU scenario: a pytest suite with one leaking test.
"""A pytest suite of three tests; test_keeps_tensor leaves 16 MiB in a module-level cache."""
import torch

_CACHE = []


def test_linear_backward():
    lin = torch.nn.Linear(512, 512).cuda()
    y = lin(torch.randn(64, 512, device="cuda"))
    y.sum().backward()


def test_keeps_tensor():
    _CACHE.append(torch.empty(16 * 1024 * 1024, dtype=torch.uint8, device="cuda"))


def test_matmul():
    x = torch.randn(1024, 1024, device="cuda")
    assert (x @ x).shape == (1024, 1024)
