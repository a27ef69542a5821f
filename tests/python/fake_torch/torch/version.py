# tests/python/fake_torch/torch/version.py — the stand-in's torch.version (a CUDA build).
cuda = "13.0"
hip = None
