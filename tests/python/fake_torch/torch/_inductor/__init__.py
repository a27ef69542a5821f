# tests/python/fake_torch/torch/_inductor/__init__.py — the stand-in's torch._inductor, with its import noted.
"""Stand-in for torch._inductor: only what PyTorch's frame symbolizer touches
(codecache.PyCodeCache.stack_frames_for_code). Importing it is noted in the call log: the real one
takes seconds to import, and the gpumemtrace hook must not cause that (docs/pytorch.md)."""
from .. import _calls
from . import codecache  # noqa: F401

_calls.note("import_inductor")
