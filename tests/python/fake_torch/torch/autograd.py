# tests/python/fake_torch/torch/autograd.py — the stand-in's torch.autograd.backward.
"""torch.autograd.backward, shaped like PyTorch's: Tensor.backward calls it through this module's
attribute. The stand-in "computes" gradients by allocating one gradient tensor per root (kept in
`grads`, like .grad) and calling `hook` (tests: raise, re-enter, ...) when set."""
grads = []
hook = None


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    from . import empty
    roots = tensors if isinstance(tensors, (list, tuple)) else [tensors]
    for t in roots:
        grads.append(empty(t._block.requested))
    if hook is not None:
        hook(roots)
    return None
