# tests/python/fake_torch/torch/_release.py — which PyTorch release the stand-in behaves as (FAKE_TORCH_VERSION), and what differs between them.
"""The release the stand-in behaves as: FAKE_TORCH_VERSION (default 2.11.0+cu130; 2.4, 2.8, 2.11 and
2.15 are the shapes the tests run, any other version takes the shape of the nearest one below).

What differs, as read in pytorch/pytorch (docs/pytorch.md, "Releases and probes", has the table
with the commits; a feature is placed in a release by its merge date, checked against the branch
cut, not by tag):
  2.4   _record_memory_history_impl(enabled, context, stacks, max_entries, device)
        (torch/cuda/memory.py; the C++ side is torch/csrc/cuda/memory_snapshot.cpp).
        Entries: action, addr (device_free for oom), size, stream, time_us, frames when the entry has
        a stack (torch/csrc/cuda/Module.cpp, THCPModule_memorySnapshot: `if (te.context_)`).
  2.8   + clear_history (pytorch#149352, merged 2025-03), compile_context, global_record_annotations;
        entries carry "compile_context" ("N/A" unless set; record_trace in
        c10/cuda/CUDACachingAllocator.cpp).
  2.11  + skip_actions (pytorch#168183): names alloc, free_requested, free_completed, segment_alloc,
        segment_free, oom, snapshot; others are ignored, segment_map/unmap cannot be skipped
        (DeviceCachingAllocator::recordHistory at the commit docs/pytorch.md cites); entries carry
        "user_metadata"; memory_stats has num_device_alloc / num_device_free (map_block, alloc_block,
        release_block, unmap_block count them; not checked which release added them: the stand-in
        gives 2.4 and 2.8 none, so the hook's path without them is tested too).
  2.15  + record_pinned_host_memory, record_cuda (torch/cuda/memory.py at 00b65a04a2d3); entries
        carry "pool_id".
Allocator settings (cuda/_config.py; docs/pytorch.md, "Allocator settings", has the commits):
  2.4, 2.8  PYTORCH_CUDA_ALLOC_CONF; torch.cuda.memory._set_allocator_settings is a function calling
        torch._C._cuda_cudaCachingAllocator_set_allocator_settings; setMemoryFraction takes the device's
        total from cudaMemGetInfo and keeps a cap even at 1.0.
  2.11  PYTORCH_ALLOC_CONF first, then PYTORCH_CUDA_ALLOC_CONF (deprecated), then PYTORCH_HIP_ALLOC_CONF
        (c10/core/AllocatorConfig.cpp); torch._C._accelerator_setAllocatorSettings, which
        torch.cuda.memory._set_allocator_settings is bound to directly (the alias shape; in which
        release it was replaced by the function below is not checked: the two shapes are given to 2.11
        and 2.15 so that both are tested).
  2.15  _set_allocator_settings a deprecated function (FutureWarning) calling
        torch._C._accelerator_setAllocatorSettings (torch/cuda/memory.py at 00b65a04a2d3);
        get_per_process_memory_fraction; the per_process_memory_fraction option (pytorch#161035),
        applied to each device's allocator when it is made; setMemoryFraction takes totalGlobalMem, and
        1.0 means no cap (DeviceCachingAllocator in the newest CUDACachingAllocator.cpp read).
Unchanged in all of them (checked in the newest source read, CUDACachingAllocator.cpp,
ApproximateClock.cpp): the ring (RingBuffer), the "snapshot" entry appended after each copy with the
active bytes as its size, time_us converted at every _snapshot() by a freshly fitted converter,
memory_stats() == {} before CUDA is initialised, _record_memory_history initialising CUDA in C++ only.
"""
import os

VERSION = os.environ.get("FAKE_TORCH_VERSION", "2.11.0+cu130")


def _minor(text):
    try:
        major, minor = text.split("+")[0].split(".")[:2]
        return int(major), int("".join(c for c in minor if c.isdigit()))
    except ValueError:
        return (2, 11)


MINOR = _minor(VERSION)
CLEAR_HISTORY = MINOR >= (2, 8)          # clear_history, compile_context, global_record_annotations
COMPILE_CONTEXT_KEY = MINOR >= (2, 8)
SKIP_ACTIONS = MINOR >= (2, 11) and not os.environ.get("FAKE_TORCH_NO_SKIP_ACTIONS")
SKIP_ACTIONS_PARAM = MINOR >= (2, 11)   # FAKE_TORCH_NO_SKIP_ACTIONS: a build whose C++ side refuses it
USER_METADATA_KEY = MINOR >= (2, 11)
DEVICE_ALLOC_COUNTS = MINOR >= (2, 11)
HOST_AND_CUDA_PARAMS = MINOR >= (2, 15)  # record_pinned_host_memory, record_cuda
POOL_ID_KEY = MINOR >= (2, 15)
GENERIC_ALLOC_CONF = MINOR >= (2, 11)   # PYTORCH_ALLOC_CONF; torch._C._accelerator_setAllocatorSettings
SETTINGS_ALIAS = (2, 11) <= MINOR < (2, 15)  # memory._set_allocator_settings IS the torch._C function
FRACTION_OPTION = MINOR >= (2, 15)      # per_process_memory_fraction option, get_per_process_memory_fraction
