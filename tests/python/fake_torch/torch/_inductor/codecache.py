# tests/python/fake_torch/torch/_inductor/codecache.py — the stand-in's torch._inductor.codecache (no generated code).
"""Stand-in for torch._inductor.codecache: no inductor-generated code is ever loaded here."""


class PyCodeCache:
    @classmethod
    def stack_frames_for_code(cls, path, lineno):
        return None
