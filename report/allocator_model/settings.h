// report/allocator_model/settings.h — the settings of PyTorch's CUDA caching allocator that the model
// replays under, read from PYTORCH_CUDA_ALLOC_CONF syntax ("expandable_segments:True,max_split_size_mb:128").
//
// Sources (cited beside each rule in caching_allocator.cpp as [A] / [B]):
//   [A] pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp at 001074d25084fdb87a799823e395a50f5ec044d3
//       (DeviceCachingAllocator in the CUDA file itself);
//   [B] pytorch/pytorch c10/core/CachingDeviceAllocator.h, the generic CachingDeviceAllocatorImpl the
//       CUDA allocator became (the newest version the search index holds; it does not name its commit).
// Where they differ the model follows [B] unless `order` says otherwise (docs/what-if.md, "Releases").
// The option grammar is CUDAAllocatorConfig's / AcceleratorAllocatorConfig's (c10/core/AllocatorConfig.h).
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>

namespace gpumemtrace::report::allocator_model {

inline constexpr uint64_t kMiB = 1024 * 1024;
inline constexpr uint64_t kNoMaxSplit = std::numeric_limits<uint64_t>::max();
// [A][B] roundup_power2_divisions: 16 intervals, one per power of two from 1 MiB up to 64 GiB.
inline constexpr size_t kRoundUpIntervals = 16;

// How a pool's free blocks are ordered for best fit. [A] BlockComparatorSize: stream, then size, then
// address. [B] BlockComparatorSize: size, then stream id, then address. With one stream they agree.
enum class BlockOrder : uint8_t { StreamFirst, SizeFirst };

struct AllocatorSettings {
  bool expandable_segments = false;
  uint64_t max_split_size = kNoMaxSplit;          // bytes; kNoMaxSplit = unlimited (the default)
  uint64_t max_non_split_rounding = 20 * kMiB;    // [B] max_non_split_rounding_mb; [A] always kLargeBuffer
  double garbage_collection_threshold = 0.0;      // 0 = off; only acts under a memory fraction ([A][B] malloc)
  std::array<uint64_t, kRoundUpIntervals> roundup_power2_divisions{};  // 0 or 1 = plain 512-byte rounding
  double memory_fraction = 0.0;                   // torch.cuda.set_per_process_memory_fraction; 0 = none
  BlockOrder order = BlockOrder::SizeFirst;

  // The settings as PYTORCH_CUDA_ALLOC_CONF would write them ("" for the defaults).
  std::string describe() const;
};

// A value PYTORCH_CUDA_ALLOC_CONF would refuse, or a key the model does not know: one line naming it.
class SettingsError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// `conf` applied over `base`, in PYTORCH_CUDA_ALLOC_CONF syntax: comma-separated key:value pairs, as
// PyTorch parses them (values checked as it checks them). Keys: expandable_segments (True/False),
// max_split_size_mb (> 20), max_non_split_rounding_mb, roundup_power2_divisions (N, or
// [MB:N,...,>:N]), garbage_collection_threshold (0 < t < 1), per_process_memory_fraction (0 < f <= 1;
// what torch.cuda.set_per_process_memory_fraction sets), block_order (stream_first | size_first; ours:
// the release difference above). backend:native, release_lock_on_cudamalloc and the pinned_* keys
// change nothing the model replays and are accepted. Throws SettingsError.
AllocatorSettings parse_alloc_conf(std::string_view conf, AllocatorSettings base = {});

}  // namespace gpumemtrace::report::allocator_model
