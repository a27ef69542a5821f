# tests/snapshot/snapshot_shapes.py — what a _snapshot()'s entries look like, per action: the shape the corpus manifest records and the stand-in is checked against.
"""Used by the child processes of tests/gpu/snapshot_corpus.py (the real PyTorch) and
tests/snapshot/test_snapshot_corpus.py (the stand-in), so that both describe a snapshot alike."""


def entry_shapes(snapshot):
    """{action: {"keys": {key: type name}, "frames_seen": bool}} over device 0's entries."""
    shapes = {}
    for e in snapshot["device_traces"][0]:
        s = shapes.setdefault(e["action"], {"keys": {}, "frames_seen": False})
        for k, v in e.items():
            s["keys"][k] = type(v).__name__
        s["frames_seen"] |= "frames" in e
    return shapes
