# tools/python/gpumemtrace_torch/backward_scope.py — brackets each torch.autograd.backward() call with a scope.
"""Brackets every torch.autograd.backward() call with a gpumemtrace scope (api "torch.backward",
name "backward"; docs/pytorch.md).

PyTorch records the blocks that the autograd engine's own threads allocate with no Python frames;
the analyzer attributes those to the stack of the backward() call whose interval holds them, and
this scope is that interval, with that stack. Tensor.backward() calls torch.autograd.backward
through the module attribute, so replacing the attribute covers both.

Transparent: same arguments, same return value, exceptions pass through (the scope still closes);
re-entrant calls and calls from several threads each get their own begin/end pair.
"""
import functools

import gpumemtrace

API = "torch.backward"
NAME = "backward"


def install(torch):
    """Wraps torch.autograd.backward once (a second call does nothing). Returns True when the
    wrapper is in place."""
    autograd = torch.autograd
    original = autograd.backward
    if getattr(original, "__gpumemtrace_scope__", False):
        return True

    @functools.wraps(original)
    def backward(*args, **kwargs):
        gpumemtrace.scope_begin(NAME, API)
        try:
            return original(*args, **kwargs)
        finally:
            gpumemtrace.scope_end(NAME, API)

    backward.__gpumemtrace_scope__ = True
    autograd.backward = backward
    return True
