// report/allocator_model/caching_allocator.h — a model of one device's PyTorch CUDA caching allocator
// (DeviceCachingAllocator): the same pools, rounding, best fit, splitting, merging, cache release,
// memory-fraction cap and expandable segments, on addresses of its own. It never touches memory: a
// segment is a number (its id) and a block an offset inside one.
//
// Each rule is ported from PyTorch's source and cited beside its code ([A]/[B]: settings.h). What the
// model does not replay: CUDA graph private pools and MemPools (use_on_oom pools included), IPC, the
// free-memory callbacks (IPC collection), peer access. The device's capacity is not known to the
// model: the caller says how many bytes cudaMalloc / cuMemCreate may still hand out (set_capacity);
// a request past it fails as cudaMalloc's out-of-memory does.
//
// Pure: no I/O, no globals. Memory: O(live and cached blocks + segments). Single-threaded.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <memory_resource>
#include <set>
#include <string>
#include <vector>

#include "report/allocator_model/settings.h"
#include "report/analyses/node_pool.h"

namespace gpumemtrace::report::allocator_model {

// [A][B] constants.
inline constexpr uint64_t kMinBlockSize = 512;          // every size is rounded to at least 512 B
inline constexpr uint64_t kSmallSize = 1 * kMiB;        // largest "small" request
inline constexpr uint64_t kSmallBuffer = 2 * kMiB;      // small requests are packed in 2 MiB segments
inline constexpr uint64_t kLargeBuffer = 20 * kMiB;     // 1-10 MiB requests may use a 20 MiB segment
inline constexpr uint64_t kMinLargeAlloc = 10 * kMiB;   // from 10 MiB on, segments are the request...
inline constexpr uint64_t kRoundLarge = 2 * kMiB;       // ...rounded up to 2 MiB

uint64_t round_size(uint64_t size, const AllocatorSettings& settings);
uint64_t allocation_size(uint64_t rounded);

// A segment-level operation, in the order the allocator made it (what PyTorch records as
// SEGMENT_ALLOC / SEGMENT_FREE / SEGMENT_MAP / SEGMENT_UNMAP).
struct SegmentOp {
  enum Kind : uint8_t { Alloc, Free, Map, Unmap };
  Kind kind = Alloc;
  uint32_t segment = 0;  // the model's segment id (an expandable segment's for Map/Unmap)
  uint64_t offset = 0;   // Map/Unmap: where in the expandable segment; 0 otherwise
  uint64_t size = 0;
};

struct Block;  // opaque to callers

struct Placement {
  Block* block = nullptr;  // nullptr: out of memory
  uint32_t segment = 0;    // the segment (or expandable segment) it lies in
  uint64_t offset = 0;     // its offset there
  uint64_t size = 0;       // its rounded size (what PyTorch counts as allocated)
  bool expandable = false; // in an expandable segment (whose reported segments are its mapped runs)
};

struct ModelStats {
  uint64_t reserved = 0;            // total_allocated_memory: segments + mapped pages
  uint64_t allocated = 0;           // rounded sizes of allocated blocks (allocated_bytes)
  uint64_t peak_reserved = 0;
  uint64_t peak_allocated = 0;
  // At the moment reserved reached peak_reserved: allocated bytes and the largest free mapped block.
  uint64_t allocated_at_peak = 0;
  uint64_t largest_free_at_peak = 0;
  uint64_t cache_flushes = 0;       // release_cached_blocks() inside malloc: the whole cache freed
  uint64_t partial_releases = 0;    // release_available_cached_blocks() that freed oversize blocks
  uint64_t retries = 0;             // num_alloc_retries: allocations retried after a cache flush
  uint64_t gc_runs = 0;             // garbage_collect_cached_blocks() that freed something
  uint64_t ooms = 0;                // mallocs that failed
  uint64_t segment_allocs = 0;      // cudaMalloc calls / map calls that succeeded
};

class CachingAllocatorModel {
 public:
  // `device_total`: the device's memory (sizes an expandable segment's address range; [A][B] 1 1/8 of it;
  // the memory fraction's base). 0 = unknown (taken as 2^46).
  CachingAllocatorModel(const AllocatorSettings& settings, uint64_t device_total);
  ~CachingAllocatorModel();
  CachingAllocatorModel(const CachingAllocatorModel&) = delete;
  CachingAllocatorModel& operator=(const CachingAllocatorModel&) = delete;

  // The settings change mid-run (the recorded program's _set_allocator_settings or
  // set_per_process_memory_fraction): PyTorch reads its options at each call (CUDAAllocatorConfig's
  // getters), so every later request sees the new ones; segments and blocks stay as they are. The
  // block order (ours, not PyTorch's) stays the one the model was made with.
  void set_settings(const AllocatorSettings& settings);
  // Bytes of reserved memory (segments, mapped pages) cudaMalloc / cuMemCreate can reach in all.
  void set_capacity(uint64_t bytes) { capacity_ = bytes; }
  // The address the next new segment (or expandable range) gets, when nothing of the model's own
  // overlaps it there: the recorded one, so that best fit breaks ties between equal blocks by address
  // as the recorded allocator did. 0 = none; used once. Without one, addresses are the model's own,
  // handed out downwards (cudaMalloc tends to return lower addresses as the device fills).
  void offer_address(uint64_t addr) { offered_ = addr; }
  // What the model may hold reserved in all: cudaMalloc's reach, or the memory fraction's cap
  // (allowed_memory_maximum) when that is lower. The figure a report shows as "could reserve".
  uint64_t limit() const { return std::min(capacity_, fraction_cap()); }
  // allowed_memory_maximum when a memory fraction is set; else no cap (all ones).
  uint64_t fraction_cap() const { return set_fraction_ ? allowed_memory_maximum_ : ~uint64_t{0}; }

  // DeviceCachingAllocator::malloc for `requested` bytes on `stream`; .block == nullptr when it
  // fails (after the cache release and retry PyTorch makes).
  Placement malloc(uint64_t requested, uint64_t stream);
  // free() of a block no other stream used: FREE_REQUESTED and FREE_COMPLETED at once.
  void free(Block* block);
  // free() of a block with stream uses: allocated bytes drop now; it stays out of the cache until
  // complete_free() (its events completed: FREE_COMPLETED).
  void request_free(Block* block);
  void complete_free(Block* block);
  // torch.cuda.empty_cache(): release_cached_blocks().
  void empty_cache();

  // The state a recording started from (a snapshot's history begins mid-run), given before the first
  // request, in this order: every segment, then every live block in address order. A seeded
  // segment counts as reserved and makes no SegmentOp (the recording made it before it started).
  // A regular segment of `size` bytes at `addr` on `stream`, free (its pool: small up to kSmallBuffer
  // bytes, the only size the small pool's cudaMalloc makes; a large pool's segment is larger). Returns
  // its id.
  uint32_t seed_segment(uint64_t addr, uint64_t size, uint64_t stream);
  // A mapped range [addr, addr + size) of an expandable segment on `stream`: it joins the seeded
  // expandable segment of the same pool and stream whose address range holds it, else starts one at
  // `addr` (its pool: large when the range is a whole number of 20 MiB pages, else small). Free.
  // Returns the expandable segment's id; *base: where its address range starts.
  uint32_t seed_mapped(uint64_t addr, uint64_t size, uint64_t stream, uint64_t* base);
  // A block live before the recording at `addr` (in a seeded segment or mapped range), of `requested`
  // bytes: it takes the front of the free space there, as alloc_found_block would have, with the rest
  // split off or not by should_split (so its extent is the rounded request, or up to the next block
  // when the rest was too small to split). .block == nullptr when no seeded free space holds it.
  Placement seed_block(uint64_t addr, uint64_t requested);

  // Segment operations made since the last take_ops(), in order.
  const std::vector<SegmentOp>& ops() const { return ops_; }
  void clear_ops() { ops_.clear(); }

  const ModelStats& stats() const { return stats_; }
  // The model's invariants (for tests): "" when they hold, else the first one broken. O(blocks).
  std::string check_invariants() const;
  const AllocatorSettings& settings() const { return settings_; }
  uint64_t largest_free_block() const;

  struct Pool;        // a block pool (small or large): defined in the .cpp
  struct Expandable;  // an expandable segment's address range

 private:
  struct Params;

  Block* new_block(uint64_t stream, uint64_t size, Pool* pool, uint64_t ptr, uint32_t segment);
  void delete_block(Block* b);
  bool less_by_size(const Block* a, const Block* b) const;

  bool get_free_block(Params& p);
  bool alloc_block(Params& p, bool is_retry);
  bool release_available_cached_blocks(const Params& p);
  void release_cached_blocks();
  void release_blocks(Pool& pool);
  void release_block(Block* block);
  void garbage_collect_cached_blocks();
  bool should_split(const Block* block, uint64_t size) const;
  Block* alloc_found_block(Params& p, bool split);
  void free_block(Block* block);
  uint64_t try_merge(Block* dst, Block* src);
  void insert_free(Block* block);

  Block* find_expandable_block(uint64_t stream, Pool& pool, uint64_t size);
  Block* new_expandable(uint64_t stream, Pool& pool, uint64_t base);
  Block* free_block_at(uint64_t addr);
  Block* try_allocate_expandable_block(uint64_t stream, Pool& pool, uint64_t size);
  bool map_block(Block* to_map, uint64_t size);
  void unmap_block(Block* block);
  void release_expandable_segment(Block* block);
  void note_reserved_up();
  uint64_t take_address(uint64_t size);

  AllocatorSettings settings_;
  uint64_t device_total_;
  uint64_t capacity_ = ~uint64_t{0};
  uint64_t allowed_memory_maximum_ = 0;  // memory_fraction * device_total
  bool set_fraction_ = false;
  uint64_t next_address_;          // the model's own addresses: downwards from 2^52, never overlapping
  uint64_t offered_ = 0;
  std::map<uint64_t, uint64_t> ranges_;  // live segments and expandable ranges: start -> size
  uint32_t next_segment_ = 1;
  bool peak_pending_ = false;

  std::map<uint64_t, Block*> seeded_free_;  // while seeding (until the first malloc): free blocks by address
  NodePool nodes_;  // the pools' set nodes: created and destroyed on nearly every request
  std::deque<Block> block_storage_;
  std::vector<Block*> free_slots_;
  std::deque<Expandable> expandables_;   // stable addresses; dead ones are marked, never erased
  Pool* small_ = nullptr;
  Pool* large_ = nullptr;
  std::vector<SegmentOp> ops_;
  ModelStats stats_;
};

}  // namespace gpumemtrace::report::allocator_model
