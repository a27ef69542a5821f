# tests/python/fake_torch/torch/cuda/_config.py — the stand-in's allocator settings: the variables, the parser, the snapshot's account, per release.
"""The caching allocator's settings as the releases of _release.py have them (pytorch/pytorch, read at
the commits docs/pytorch.md, "Allocator settings", cites):

- Which variable: 2.4 and 2.8 read PYTORCH_CUDA_ALLOC_CONF only (CUDAAllocatorConfig::instance();
  PYTORCH_HIP_ALLOC_CONF only on ROCm builds, which the stand-in is not); 2.11 and 2.15 read
  PYTORCH_ALLOC_CONF, else PYTORCH_CUDA_ALLOC_CONF (with a deprecation warning), else
  PYTORCH_HIP_ALLOC_CONF (AcceleratorAllocatorConfig::instance() in c10/core/AllocatorConfig.cpp).
- The parser (parseArgs): max_split_size_mb, roundup_power2_divisions and garbage_collection_threshold
  back to their defaults at every parse, then the items in order; an unknown option or a bad value
  raises (TORCH_CHECK: RuntimeError), after the items before it were applied. The stand-in checks
  what it models (expandable_segments, max_split_size_mb >= 20, max_non_split_rounding_mb,
  garbage_collection_threshold in (0, 1), roundup_power2_divisions as one power of two or a list,
  backend) and takes the other options of the releases without checking their values.
  per_process_memory_fraction is an option only in the 2.15 shape (_release.FRACTION_OPTION).
- The snapshot's account, _snapshot()["allocator_settings"] (torch/csrc/cuda/Module.cpp): the text
  last parsed under "PYTORCH_CUDA_ALLOC_CONF", max_split_size (-1: unlimited), garbage_collection_threshold,
  expandable_segments, roundup_power2_divisions by interval, and the pinned/lock options.
"""
import os
import sys

from .. import _release

MiB = 1 << 20
_OTHER_KEYS = {"release_lock_on_cudamalloc", "pinned_use_cuda_host_register", "pinned_num_register_threads",
               "pinned_use_background_threads", "expandable_segments_handle_type",
               "pinned_reserve_segment_size_mb", "graph_capture_record_stream_reuse"}


def from_environment():
    """The text the allocator parses at start, by the release's rule; None when no variable is set."""
    if not _release.GENERIC_ALLOC_CONF:
        return os.environ.get("PYTORCH_CUDA_ALLOC_CONF")
    for name in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF"):
        if name in os.environ:
            if name != "PYTORCH_ALLOC_CONF":  # TORCH_WARN_ONCE, as c10 prints it
                sys.stderr.write("[W AllocatorConfig.cpp:28] Warning: %s is deprecated, use PYTORCH_ALLOC_CONF "
                                 "instead (function operator())\n" % name)
            return os.environ[name]
    return None


def _items(text):
    out, depth, item = [], 0, ""
    for c in text:
        if c.isspace():
            continue
        depth += (c == "[") - (c == "]")
        if c == "," and depth <= 0:
            out.append(item)
            item = ""
            continue
        item += c
    if item:
        out.append(item)
    return out


class Config:
    def __init__(self):
        self.last = ""
        self.expandable = False
        self.max_split_size = None           # bytes; None: unlimited
        self.max_non_split_rounding = 20 * MiB
        self.gc_threshold = 0.0
        self.roundup = [0] * 16
        self.fraction = None                 # the per_process_memory_fraction option (2.15 shape)
        text = from_environment()
        if text is not None:
            self.parse(text)

    def parse(self, text):
        self.max_split_size = None
        self.roundup = [0] * 16
        self.gc_threshold = 0.0
        self.last = text
        for item in _items(text):
            key, _, value = item.partition(":")
            if not value:
                raise RuntimeError("Error parsing CachingAllocator settings, expected :")
            if key == "expandable_segments":
                if value not in ("True", "False"):
                    raise RuntimeError("Expected a single True/False argument for expandable_segments")
                self.expandable = value == "True"
            elif key == "max_split_size_mb":
                if int(value) < 20:
                    raise RuntimeError("CachingAllocator option max_split_size_mb too small, must be >= 20")
                self.max_split_size = int(value) * MiB
            elif key == "max_non_split_rounding_mb":
                self.max_non_split_rounding = int(value) * MiB
            elif key == "garbage_collection_threshold":
                if not 0 < float(value) < 1:
                    raise RuntimeError("garbage_collect_threshold is invalid, set it in (0.0, 1.0)")
                self.gc_threshold = float(value)
            elif key == "roundup_power2_divisions":
                self._roundup(value)
            elif key == "backend":
                if value != "native":
                    raise RuntimeError("the stand-in has the native allocator only")
            elif key == "per_process_memory_fraction" and _release.FRACTION_OPTION:
                if not 0 <= float(value) <= 1:
                    raise RuntimeError("invalid fraction")
                self.fraction = float(value)
            elif key not in _OTHER_KEYS:
                raise RuntimeError("Unrecognized CachingAllocator option: %s" % key)

    def _roundup(self, value):
        if not value.startswith("["):
            n = int(value)
            if n & (n - 1):
                raise RuntimeError("For roundups, the divisions has to be power of 2")
            self.roundup = [n] * 16
            return
        first = True
        last = 0
        for pair in value.strip("[]").split(","):
            mb, _, n = pair.partition(":")
            n = int(n)
            if mb == ">":
                for i in range(last + 1, 16):
                    self.roundup[i] = n
                continue
            index = min(int(mb).bit_length() - 1, 15)
            if first:
                for i in range(index):
                    self.roundup[i] = n
                first = False
            self.roundup[index] = n
            last = index

    def snapshot_dict(self):
        return {"PYTORCH_CUDA_ALLOC_CONF": self.last,
                "max_split_size": -1 if self.max_split_size is None else self.max_split_size,
                "garbage_collection_threshold": self.gc_threshold,
                "expandable_segments": self.expandable,
                "pinned_num_register_threads": 1,
                "release_lock_on_cudamalloc": False,
                "pinned_use_cuda_host_register": False,
                "roundup_power2_divisions": {str(1 << i): n for i, n in enumerate(self.roundup)}}


_instance = None


def instance():
    """The process's one config (CUDAAllocatorConfig::instance()): made, from the variable, on first use."""
    global _instance
    if _instance is None:
        _instance = Config()
    return _instance
