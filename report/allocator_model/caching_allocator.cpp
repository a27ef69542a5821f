// report/allocator_model/caching_allocator.cpp — the rules of DeviceCachingAllocator, ported one
// function at a time (function names are PyTorch's). [A] and [B] are the two sources of settings.h:
//   [A] c10/cuda/CUDACachingAllocator.cpp @ 001074d25084fdb87a799823e395a50f5ec044d3
//   [B] c10/core/CachingDeviceAllocator.h, CachingDeviceAllocatorImpl (newest read; no commit in the index)
// Differences are marked "[A] vs [B]" and listed in docs/what-if.md.
#include "report/allocator_model/caching_allocator.h"

#include <algorithm>

#include "trace/format.h"

namespace gpumemtrace::report::allocator_model {

namespace {
size_t floor_log2(uint64_t v) { return 63 - static_cast<size_t>(__builtin_clzll(v)); }
bool is_power_of_two(uint64_t v) { return v && !(v & (v - 1)); }

// [A] DeviceCachingAllocator::roundup_power2_next_division, [B] roundup_power2_next_division:
// the size rounded up to the next of `divisions` equal steps between two powers of two.
uint64_t roundup_power2_next_division(uint64_t size, uint64_t divisions) {
  if (is_power_of_two(size)) return size;
  const uint64_t power2_floor = uint64_t{1} << floor_log2(size);
  const uint64_t power2_division = power2_floor >> floor_log2(divisions);
  if (power2_division == 0) return power2_floor << 1;
  const uint64_t round_size_floor = size & ~(power2_division - 1);
  return round_size_floor == size ? size : round_size_floor + power2_division;
}

constexpr uint64_t kSyntheticTop = uint64_t{1} << 52;  // above any real device address (< 2^47)
constexpr uint64_t kUnknownDeviceTotal = uint64_t{1} << 46;
}  // namespace

// [A] round_size, [B] get_round_size: below 512 B -> 512 B; with roundup_power2_divisions N > 1 for
// the size's interval (CUDAAllocatorConfig::roundup_power2_divisions(size): intervals start at 1 MiB,
// index log2(size) - 20 clamped to 0..15) and size > 512 * N, the next power-of-two division;
// otherwise a multiple of 512 B.
uint64_t round_size(uint64_t size, const AllocatorSettings& settings) {
  if (size < kMinBlockSize) return kMinBlockSize;
  const size_t log_size = floor_log2(size);
  const size_t index = log_size < 20 ? 0 : std::min<size_t>(log_size - 20, kRoundUpIntervals - 1);
  const uint64_t divisions = settings.roundup_power2_divisions[index];
  if (divisions > 1 && size > kMinBlockSize * divisions) return roundup_power2_next_division(size, divisions);
  return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

// [A][B] get_allocation_size: the segment a new request gets: small (<= 1 MiB) -> 2 MiB; below
// 10 MiB -> 20 MiB (kLargeBuffer, split among later requests); else the size rounded up to 2 MiB.
uint64_t allocation_size(uint64_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge);
}

struct Block {
  uint64_t stream = 0;
  uint64_t size = 0;
  uint64_t ptr = 0;
  uint64_t base = 0;          // the segment's start (an expandable segment's reserved range)
  CachingAllocatorModel::Pool* pool = nullptr;
  Block* prev = nullptr;      // neighbours in the same segment ([A][B] Block::prev/next)
  Block* next = nullptr;
  CachingAllocatorModel::Expandable* es = nullptr;
  uint64_t gc_count_base = 0;
  uint32_t segment = 0;
  bool allocated = false;
  bool mapped = true;         // false: an expandable segment's unmapped address range
  bool pending = false;       // freed, but other streams' events not yet complete ([A][B] event_count > 0)
  bool dead = false;          // a recycled slot (delete_block)
  bool is_split() const { return prev != nullptr || next != nullptr; }
  // [A][B] Block::splice: [before, this, after].
  void splice(Block* before, Block* after) {
    if (before) before->next = this;
    prev = before;
    if (after) after->prev = this;
    next = after;
  }
};

struct CachingAllocatorModel::Expandable {
  uint32_t id = 0;
  uint64_t base = 0;
  uint64_t page = 0;       // [A][B] segment_size_: 2 MiB (small pool) or 20 MiB (large pool)
  uint64_t max_pages = 0;  // [A][B] max_handles_: enough pages for 1 1/8 of the device's memory
  uint64_t size() const { return page * max_pages; }
};

namespace {
// [A] BlockComparatorSize: stream, size, address. [B] BlockComparatorSize: size, stream, address.
struct SizeLess {
  BlockOrder order;
  bool operator()(const Block* a, const Block* b) const {
    if (order == BlockOrder::StreamFirst && a->stream != b->stream) return a->stream < b->stream;
    if (a->size != b->size) return a->size < b->size;
    if (a->stream != b->stream) return a->stream < b->stream;
    return a->ptr < b->ptr;
  }
};
// [A][B] BlockComparatorAddress: stream, then address (the unmapped ranges of expandable segments).
struct AddressLess {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) return a->stream < b->stream;
    return a->ptr < b->ptr;
  }
};
}  // namespace

struct CachingAllocatorModel::Pool {
  Pool(bool small_pool, BlockOrder order, std::pmr::memory_resource* nodes)
      : small(small_pool), blocks(SizeLess{order}, nodes), unmapped(AddressLess{}, nodes) {}
  bool small;
  std::pmr::set<Block*, SizeLess> blocks;
  std::pmr::set<Block*, AddressLess> unmapped;
  uint64_t get_free_blocks_call_count = 0;
  // [A][B] BlockPool::insert_into_blocks: a block entering the cache starts its GC age at 0.
  void insert_into_blocks(Block* b) {
    b->gc_count_base = get_free_blocks_call_count;
    blocks.insert(b);
  }
};

struct CachingAllocatorModel::Params {
  uint64_t stream = 0;
  uint64_t size = 0;        // rounded request ([A][B] AllocParams::size(), the search key's size)
  uint64_t alloc_size = 0;  // the segment to get for it ([A][B] AllocParams::alloc_size)
  Pool* pool = nullptr;
  Block* block = nullptr;
};

CachingAllocatorModel::CachingAllocatorModel(const AllocatorSettings& settings, uint64_t device_total)
    : settings_(settings), device_total_(device_total ? device_total : kUnknownDeviceTotal), next_address_(kSyntheticTop) {
  small_ = new Pool(true, settings_.order, &nodes_);
  large_ = new Pool(false, settings_.order, &nodes_);
  set_settings(settings);
}

void CachingAllocatorModel::set_settings(const AllocatorSettings& settings) {
  const BlockOrder order = settings_.order;
  settings_ = settings;
  settings_.order = order;
  // [A][B] setMemoryFraction: allowed_memory_maximum = fraction * device total; set_fraction = true.
  set_fraction_ = settings_.memory_fraction > 0;
  allowed_memory_maximum_ =
      set_fraction_ ? static_cast<uint64_t>(settings_.memory_fraction * static_cast<double>(device_total_)) : 0;
}

CachingAllocatorModel::~CachingAllocatorModel() {
  small_->blocks.clear();
  small_->unmapped.clear();
  large_->blocks.clear();
  large_->unmapped.clear();
  delete small_;
  delete large_;
}

Block* CachingAllocatorModel::new_block(uint64_t stream, uint64_t size, Pool* pool, uint64_t ptr, uint32_t segment) {
  Block* b;
  if (!free_slots_.empty()) {
    b = free_slots_.back();
    free_slots_.pop_back();
    *b = Block{};
  } else {
    b = &block_storage_.emplace_back();
  }
  b->stream = stream;
  b->size = size;
  b->pool = pool;
  b->ptr = ptr;
  b->segment = segment;
  return b;
}

Block* CachingAllocatorModel::split_front(Block* block, uint64_t size) {
  Block* front = new_block(block->stream, size, block->pool, block->ptr, block->segment);
  front->base = block->base;
  front->es = block->es;
  front->mapped = block->mapped;
  front->splice(block->prev, block);
  block->ptr += size;
  block->size -= size;
  return front;
}

Block* CachingAllocatorModel::split_back(Block* block, uint64_t keep) {
  Block* back = new_block(block->stream, block->size - keep, block->pool, block->ptr + keep, block->segment);
  back->base = block->base;
  back->es = block->es;
  back->mapped = block->mapped;
  back->splice(block, block->next);
  block->size = keep;
  return back;
}

void CachingAllocatorModel::delete_block(Block* b) {
  b->dead = true;
  free_slots_.push_back(b);
}

std::string CachingAllocatorModel::check_invariants() const {
  uint64_t reserved = 0, allocated = 0;
  for (const Block& b : block_storage_) {
    if (b.dead) continue;
    const std::string at = " (block at " + std::to_string(b.ptr) + ", " + std::to_string(b.size) + " B)";
    if (b.prev && (b.prev->next != &b || b.prev->ptr + b.prev->size != b.ptr || b.prev->segment != b.segment)) {
      return "prev link broken" + at;
    }
    if (b.next && (b.next->prev != &b || b.ptr + b.size != b.next->ptr)) return "next link broken" + at;
    const bool cached = !b.allocated && !b.pending;
    if (cached && b.mapped && !b.pool->blocks.count(const_cast<Block*>(&b))) return "free block not in its pool" + at;
    if (!b.mapped && !b.pool->unmapped.count(const_cast<Block*>(&b))) return "unmapped block not in the unmapped set" + at;
    if (!cached && b.pool->blocks.count(const_cast<Block*>(&b))) return "allocated block in the pool" + at;
    if (cached && b.next && !b.next->allocated && !b.next->pending && b.next->mapped == b.mapped) {
      return "two free neighbours not merged" + at;
    }
    if (b.mapped) reserved += b.size;
    if (b.allocated) allocated += b.size;
  }
  if (reserved != stats_.reserved) return "reserved " + std::to_string(stats_.reserved) + " but blocks add up to " + std::to_string(reserved);
  if (allocated != stats_.allocated) return "allocated " + std::to_string(stats_.allocated) + " but blocks add up to " + std::to_string(allocated);
  if (stats_.reserved > capacity_ && !settings_.expandable_segments) return "reserved above the capacity";
  return "";
}

uint64_t CachingAllocatorModel::take_address(uint64_t size) {
  uint64_t addr = offered_;
  offered_ = 0;
  bool free_there = addr != 0;
  if (free_there) {
    auto after = ranges_.lower_bound(addr);
    if (after != ranges_.end() && after->first < addr + size) free_there = false;
    if (free_there && after != ranges_.begin()) {
      auto before = std::prev(after);
      if (before->first + before->second > addr) free_there = false;
    }
  }
  if (!free_there) {
    next_address_ -= (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge + kRoundLarge;  // never adjacent
    addr = next_address_;
  }
  ranges_[addr] = size;
  return addr;
}

void CachingAllocatorModel::note_reserved_up() {
  if (stats_.reserved > stats_.peak_reserved) {
    stats_.peak_reserved = stats_.reserved;
    peak_pending_ = true;
  }
}

uint64_t CachingAllocatorModel::largest_free_block() const {
  uint64_t best = 0;
  for (const Pool* pool : {small_, large_}) {
    if (pool->blocks.empty()) continue;
    if (settings_.order == BlockOrder::SizeFirst) {
      best = std::max(best, (*pool->blocks.rbegin())->size);
      continue;
    }
    // Stream first: the last block of each stream's run is that stream's largest.
    auto it = pool->blocks.end();
    while (it != pool->blocks.begin()) {
      --it;
      best = std::max(best, (*it)->size);
      Block key;
      key.stream = (*it)->stream;
      it = pool->blocks.lower_bound(&key);
    }
  }
  return best;
}

// [A][B] malloc: search the cache; else (GC under a memory fraction, then) get a new segment, else free
// the oversize blocks that would make room and retry, else free the whole cache and retry.
Placement CachingAllocatorModel::malloc(uint64_t requested, uint64_t stream) {
  // A request beyond the trace format's sizes (a clamped value given back exactly, docs/trace-format.md
  // "Limits": 16 EiB) fits no device: out of memory, before its rounding could wrap to a few bytes.
  if (requested > format::kMaxInteger) {
    ++stats_.ooms;
    return Placement{};
  }
  seeded_free_.clear();  // the seeding is over
  Params p;
  p.stream = stream;
  p.size = round_size(requested, settings_);
  p.pool = p.size <= kSmallSize ? small_ : large_;  // [A][B] get_pool
  p.alloc_size = allocation_size(p.size);
  bool found = get_free_block(p);  // the free-memory callbacks (IPC collection) free nothing here
  if (!found) {
    if (set_fraction_ && settings_.garbage_collection_threshold > 0.0) garbage_collect_cached_blocks();
    found = alloc_block(p, false) || (release_available_cached_blocks(p) && alloc_block(p, false));
    if (!found) {
      release_cached_blocks();
      ++stats_.cache_flushes;
      found = alloc_block(p, true);
    }
  }
  Placement out;
  if (found) {
    Block* block = alloc_found_block(p, should_split(p.block, p.size));
    out.block = block;
    out.segment = block->segment;
    out.offset = block->ptr - block->base;
    out.size = block->size;
    out.expandable = block->es != nullptr;
  } else {
    ++stats_.ooms;
  }
  if (peak_pending_) {
    peak_pending_ = false;
    stats_.allocated_at_peak = stats_.allocated;
    stats_.largest_free_at_peak = largest_free_block();
  }
  return out;
}

// [A][B] get_free_block: best fit = the first cached block not smaller than the request, on the
// request's stream; expandable blocks are judged by the size they can grow to; an oversize block
// (>= max_split_size) only serves a request that is itself oversize and within
// max_non_split_rounding of it ([A]: within kLargeBuffer, 20 MiB).
bool CachingAllocatorModel::get_free_block(Params& p) {
  Pool& pool = *p.pool;
  if (set_fraction_ && settings_.garbage_collection_threshold > 0.0) ++pool.get_free_blocks_call_count;
  Block key;
  key.stream = p.stream;
  key.size = p.size;
  auto it = pool.blocks.lower_bound(&key);
  if (it == pool.blocks.end() || (*it)->stream != p.stream) return false;
  if ((*it)->es) {
    if (settings_.expandable_segments) {
      auto expandable_size = [](const Block* b) { return b->size + (b->next && !b->next->mapped ? b->next->size : 0); };
      auto next = std::next(it);
      while ((*it)->es && next != pool.blocks.end() && (*next)->stream == p.stream &&
             expandable_size(*next) < expandable_size(*it)) {
        it = next++;
      }
    } else {
      do {
        ++it;
      } while (it != pool.blocks.end() && (*it)->es && (*it)->stream == p.stream);
      if (it == pool.blocks.end() || (*it)->stream != p.stream) return false;
    }
  }
  const uint64_t max_split = settings_.max_split_size;
  if (p.size < max_split && (*it)->size >= max_split) return false;
  if (p.size >= max_split && (*it)->size >= p.size + settings_.max_non_split_rounding) return false;
  p.block = *it;
  pool.blocks.erase(it);
  return true;
}

// [A][B] alloc_block: over the memory fraction -> out of memory without asking CUDA; expandable
// segments -> map pages (try_allocate_expandable_block); else cudaMalloc(alloc_size), which fails
// here when the capacity the caller set would be exceeded.
bool CachingAllocatorModel::alloc_block(Params& p, bool is_retry) {
  const uint64_t size = p.alloc_size;
  if (is_retry) ++stats_.retries;
  if (set_fraction_ && stats_.reserved + size > allowed_memory_maximum_) return false;
  if (settings_.expandable_segments) {
    p.block = try_allocate_expandable_block(p.stream, *p.pool, p.size);
    return p.block != nullptr;
  }
  if (stats_.reserved + size > capacity_) return false;
  const uint32_t segment = next_segment_++;
  const uint64_t ptr = take_address(size);
  Block* block = new_block(p.stream, size, p.pool, ptr, segment);
  block->base = ptr;
  p.block = block;
  stats_.reserved += size;
  ++stats_.segment_allocs;
  ops_.push_back(SegmentOp{SegmentOp::Alloc, segment, 0, size});
  note_reserved_up();
  return true;
}

// [B] release_available_cached_blocks (with max_split_size set): free the smallest oversize cached
// block that covers max(request, max_split_size); if none, free oversize blocks from the largest down
// until that much is freed. Expandable blocks are never freed here ([A] had no such check).
bool CachingAllocatorModel::release_available_cached_blocks(const Params& p) {
  const uint64_t max_split = settings_.max_split_size;
  if (max_split == kNoMaxSplit) return false;
  Pool& pool = *p.pool;
  Block key;
  key.stream = p.stream;
  key.size = std::max(p.size, max_split);
  auto it = pool.blocks.lower_bound(&key);
  if (it == pool.blocks.end() || (*it)->stream != p.stream || (*it)->es) {
    if (it == pool.blocks.begin()) return false;
    uint64_t released = 0;
    --it;
    while (released < key.size && (*it)->size >= max_split && (*it)->stream == p.stream) {
      auto cur = it;
      const bool is_first = cur == pool.blocks.begin();
      if (!is_first) --it;
      if (!(*cur)->es) {
        released += (*cur)->size;
        release_block(*cur);
      }
      if (is_first) break;
    }
    if (released < key.size) return false;
  } else {
    release_block(*it);
  }
  ++stats_.partial_releases;
  return true;
}

// [A][B] release_cached_blocks: wait for every pending stream use (synchronize_and_free_events), then
// free every unsplit cached segment and unmap every whole free page of expandable segments
// (release_blocks), large pool first.
void CachingAllocatorModel::release_cached_blocks() {
  for (Block& b : block_storage_) {
    if (b.pending) complete_free(&b);
  }
  release_blocks(*large_);
  release_blocks(*small_);
}

void CachingAllocatorModel::empty_cache() { release_cached_blocks(); }

// [A][B] release_blocks.
void CachingAllocatorModel::release_blocks(Pool& pool) {
  std::vector<Block*> to_unmap;
  for (auto it = pool.blocks.begin(); it != pool.blocks.end();) {
    Block* block = *it;
    ++it;
    if (block->es) {
      to_unmap.push_back(block);
    } else if (!block->prev && !block->next) {
      release_block(block);
    }
  }
  for (Block* block : to_unmap) {
    unmap_block(block);
    if (!block->prev && !block->next) release_expandable_segment(block);
  }
}

// [A][B] release_block: cudaFree of a whole unsplit segment.
void CachingAllocatorModel::release_block(Block* block) {
  ops_.push_back(SegmentOp{SegmentOp::Free, block->segment, 0, block->size});
  ranges_.erase(block->ptr);
  stats_.reserved -= block->size;
  block->pool->blocks.erase(block);
  delete_block(block);
}

// [A][B] garbage_collect_cached_blocks (only with a memory fraction and garbage_collection_threshold):
// above threshold * allowed memory, free unsplit large cached segments whose age (get_free_block calls
// on their pool since they were cached) is at least the average, until enough is reclaimed.
// [B] skips expandable blocks ([A] did not check).
void CachingAllocatorModel::garbage_collect_cached_blocks() {
  const auto gc_threshold = static_cast<uint64_t>(settings_.garbage_collection_threshold *
                                                  static_cast<double>(allowed_memory_maximum_));
  if (stats_.reserved <= gc_threshold) return;
  const uint64_t target = stats_.reserved - gc_threshold;
  uint64_t reclaimed = 0;
  uint64_t total_age = 0;
  int64_t freeable = 0;
  auto age = [&](const Block* b) { return large_->get_free_blocks_call_count - b->gc_count_base; };
  for (const Block* b : large_->blocks) {
    if (!b->is_split()) {
      total_age += age(b);
      ++freeable;
    }
  }
  if (freeable == 0) return;
  bool freed = true;
  bool any = false;
  while (reclaimed < target && freed && freeable > 0) {
    const double threshold = static_cast<double>(total_age) / static_cast<double>(freeable);
    freed = false;
    for (auto it = large_->blocks.begin(); it != large_->blocks.end();) {
      Block* block = *it;
      ++it;
      if (!block->is_split() && !block->es && static_cast<double>(age(block)) >= threshold) {
        freed = any = true;
        reclaimed += block->size;
        total_age -= age(block);
        --freeable;
        release_block(block);
      }
    }
  }
  if (any) ++stats_.gc_runs;
}

// [A] vs [B] should_split: small pool (or expandable segments) -> split when at least 512 B remain;
// large pool -> only a request below max_split_size, and only when more than 1 MiB remains.
bool CachingAllocatorModel::should_split(const Block* block, uint64_t size) const {
  const uint64_t remaining = block->size - size;
  if (block->pool->small || settings_.expandable_segments) return remaining >= kMinBlockSize;
  return size < settings_.max_split_size && remaining > kSmallSize;
}

// [A][B] alloc_found_block: the request takes the front of the block; the remainder goes back to the
// cache as a block of its own.
Block* CachingAllocatorModel::alloc_found_block(Params& p, bool split) {
  Block* block = p.block;
  if (split) {
    Block* remaining = block;
    block = split_front(remaining, p.size);
    p.pool->insert_into_blocks(remaining);
  }
  block->allocated = true;
  stats_.allocated += block->size;
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
  return block;
}

void CachingAllocatorModel::free(Block* block) {
  if (block->pending) return complete_free(block);  // its bytes already dropped at request_free
  if (!block->allocated) return;
  stats_.allocated -= block->size;  // [A][B] free(): allocated_bytes drops at FREE_REQUESTED
  block->allocated = false;
  free_block(block);
}

void CachingAllocatorModel::request_free(Block* block) {
  if (!block->allocated) return;  // requested twice: once counts
  stats_.allocated -= block->size;
  block->allocated = false;
  block->pending = true;  // [A][B] insert_events: event_count > 0 until the other streams finish
}

void CachingAllocatorModel::complete_free(Block* block) {
  if (!block->pending) return;
  block->pending = false;
  free_block(block);
}

// [A][B] free_block: merge with free neighbours of the same segment, then back into the cache.
void CachingAllocatorModel::free_block(Block* block) {
  try_merge(block, block->prev);
  try_merge(block, block->next);
  block->pool->insert_into_blocks(block);
}

// [A] try_merge_blocks, [B] DeviceBlock::try_merge: only a free, settled neighbour with the same
// mapped state merges. `dst` must not be in a pool set (its key changes).
uint64_t CachingAllocatorModel::try_merge(Block* dst, Block* src) {
  if (!src || src->allocated || src->pending || dst->mapped != src->mapped) return 0;
  if (dst->prev == src) {
    dst->ptr = src->ptr;
    dst->prev = src->prev;
    if (dst->prev) dst->prev->next = dst;
  } else {
    dst->next = src->next;
    if (dst->next) dst->next->prev = dst;
  }
  const uint64_t subsumed = src->size;
  dst->size += subsumed;
  if (src->mapped) {
    src->pool->blocks.erase(src);
  } else {
    src->pool->unmapped.erase(src);
  }
  delete_block(src);
  return subsumed;
}

// [A][B] find_expandable_block: the lowest-addressed free + unmapped run of this stream's expandable
// segment of this pool with room for `size`; else a new expandable segment (its whole address range
// one unmapped block). Pages: 2 MiB in the small pool, 20 MiB in the large one.
Block* CachingAllocatorModel::find_expandable_block(uint64_t stream, Pool& pool, uint64_t size) {
  auto allocatable = [](const Block* b) { return b && !b->allocated && !b->pending; };
  auto has_room = [&](const Block* b) {
    uint64_t bytes = 0;
    while (bytes < size && allocatable(b)) {
      bytes += b->size;
      b = b->next;
    }
    return bytes >= size;
  };
  Block key;
  key.stream = stream;
  for (auto it = pool.unmapped.lower_bound(&key); it != pool.unmapped.end() && (*it)->stream == stream; ++it) {
    Block* c = *it;
    if (allocatable(c->prev)) c = c->prev;
    if (has_room(c)) return c;
  }
  return new_expandable(stream, pool, 0);
}

// A new expandable segment: its whole address range one unmapped block (returned), at `base` (0: an
// address of the model's own).
Block* CachingAllocatorModel::new_expandable(uint64_t stream, Pool& pool, uint64_t base) {
  Expandable& es = expandables_.emplace_back();
  es.id = next_segment_++;
  es.page = pool.small ? kSmallBuffer : kLargeBuffer;
  const uint64_t reserve = device_total_ + device_total_ / 8;
  es.max_pages = (reserve + es.page - 1) / es.page;
  if (base) {
    es.base = base;
    ranges_[base] = es.size();
  } else {
    es.base = take_address(es.size());
  }
  Block* candidate = new_block(stream, es.size(), &pool, es.base, es.id);
  candidate->base = es.base;
  candidate->mapped = false;
  candidate->es = &es;
  pool.unmapped.insert(candidate);
  return candidate;
}

// ---- the state a recording started from (seed_*) ----

uint32_t CachingAllocatorModel::seed_segment(uint64_t addr, uint64_t size, uint64_t stream) {
  Pool& pool = size <= kSmallBuffer ? *small_ : *large_;
  const uint32_t segment = next_segment_++;
  ranges_[addr] = size;
  Block* block = new_block(stream, size, &pool, addr, segment);
  block->base = addr;
  pool.insert_into_blocks(block);
  seeded_free_[addr] = block;
  stats_.reserved += size;
  note_reserved_up();
  return segment;
}

uint32_t CachingAllocatorModel::seed_mapped(uint64_t addr, uint64_t size, uint64_t stream, uint64_t* base) {
  Pool& pool = size % kLargeBuffer == 0 ? *large_ : *small_;
  const uint64_t page = pool.small ? kSmallBuffer : kLargeBuffer;
  // The unmapped range of a seeded expandable segment of this pool and stream that holds addr.
  Block* unmapped = nullptr;
  for (Block* b : pool.unmapped) {
    if (b->stream == stream && b->es->page == page && b->ptr <= addr && addr - b->ptr < b->size &&
        size <= b->size - (addr - b->ptr)) {
      unmapped = b;
      break;
    }
  }
  if (!unmapped) unmapped = new_expandable(stream, pool, addr);
  Expandable& es = *unmapped->es;
  if (unmapped->ptr < addr) {  // the part in front stays unmapped, a block of its own
    pool.unmapped.erase(unmapped);
    Block* before = split_front(unmapped, addr - unmapped->ptr);
    pool.unmapped.insert(unmapped);
    pool.unmapped.insert(before);
  }
  // map_block counts the pages as reserved; the recording mapped them before it started: no
  // SegmentOp, no cudaMalloc call of the replay.
  const uint64_t segment_allocs = stats_.segment_allocs;
  const size_t ops = ops_.size();
  if (map_block(unmapped, size)) seeded_free_[unmapped->ptr] = unmapped;
  ops_.resize(ops);
  stats_.segment_allocs = segment_allocs;
  *base = es.base;
  return es.id;
}

// The free block that holds addr (seeding only): seeded_free_, checked, else a search.
Block* CachingAllocatorModel::free_block_at(uint64_t addr) {
  auto holds = [&](const Block* b) {
    return !b->dead && b->mapped && !b->allocated && !b->pending && b->ptr <= addr && addr - b->ptr < b->size;
  };
  auto it = seeded_free_.upper_bound(addr);
  if (it != seeded_free_.begin() && holds(std::prev(it)->second)) return std::prev(it)->second;
  for (Block& b : block_storage_) {  // merged away since (map_block): rare
    if (holds(&b)) {
      seeded_free_[b.ptr] = &b;
      return &b;
    }
  }
  return nullptr;
}

Placement CachingAllocatorModel::seed_block(uint64_t addr, uint64_t requested) {
  Block* b = free_block_at(addr);
  if (!b) return Placement{};
  Pool& pool = *b->pool;
  pool.blocks.erase(b);
  seeded_free_.erase(b->ptr);
  if (b->ptr < addr) {  // the free space in front stays free
    Block* front = split_front(b, addr - b->ptr);
    pool.insert_into_blocks(front);
    seeded_free_[front->ptr] = front;
  }
  const uint64_t size = std::min(round_size(requested, settings_), b->size);
  if (size < b->size && should_split(b, size)) {  // [A][B] alloc_found_block's split
    Block* rest = split_back(b, size);
    pool.insert_into_blocks(rest);
    seeded_free_[rest->ptr] = rest;
  }
  b->allocated = true;
  stats_.allocated += b->size;
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
  return Placement{b, b->segment, b->ptr - b->base, b->size, b->es != nullptr};
}

// [A][B] try_allocate_expandable_block: map the candidate's pages, then the following unmapped range,
// until the free run covers `size`.
Block* CachingAllocatorModel::try_allocate_expandable_block(uint64_t stream, Pool& pool, uint64_t size) {
  Block* candidate = find_expandable_block(stream, pool, size);
  if (!candidate->mapped && !map_block(candidate, std::min(candidate->size, size))) return nullptr;
  while (candidate->size < size) {
    const uint64_t remaining = size - candidate->size;
    Block* next = candidate->next;
    if (!map_block(next, std::min(remaining, next->size))) return nullptr;
    candidate = next;
  }
  pool.blocks.erase(candidate);
  return candidate;
}

// [A][B] map_block + ExpandableSegment::map: map whole pages from the block's start (cuMemCreate per
// page; one failing releases the ones this call made and the map fails), split off the rest of the
// unmapped range, merge with free mapped neighbours.
bool CachingAllocatorModel::map_block(Block* to_map, uint64_t size) {
  Expandable& es = *to_map->es;
  const uint64_t begin = (to_map->ptr - es.base) / es.page;
  const uint64_t end = (to_map->ptr + size - es.base + es.page - 1) / es.page;
  if (begin == end) return false;
  const uint64_t mapped = (end - begin) * es.page;
  if (stats_.reserved + mapped > capacity_) return false;
  Pool& pool = *to_map->pool;
  pool.unmapped.erase(to_map);
  if (mapped < to_map->size) pool.unmapped.insert(split_back(to_map, mapped));  // the rest stays unmapped
  to_map->mapped = true;
  try_merge(to_map, to_map->prev);
  try_merge(to_map, to_map->next);
  pool.insert_into_blocks(to_map);
  stats_.reserved += mapped;
  ++stats_.segment_allocs;
  ops_.push_back(SegmentOp{SegmentOp::Map, es.id, begin * es.page, mapped});
  note_reserved_up();
  return true;
}

// [A][B] unmap_block + ExpandableSegment::unmap: give back the whole pages inside a free block; the
// partial pages at its ends stay mapped as free blocks of their own.
void CachingAllocatorModel::unmap_block(Block* block) {
  Expandable& es = *block->es;
  const uint64_t begin = (block->ptr - es.base + es.page - 1) / es.page;
  const uint64_t end = (block->ptr + block->size - es.base) / es.page;
  if (begin >= end) return;
  Pool& pool = *block->pool;
  pool.blocks.erase(block);
  const uint64_t unmapped_ptr = es.base + begin * es.page;
  const uint64_t unmapped_size = (end - begin) * es.page;
  // The partial pages in front and behind stay mapped and free: blocks of their own.
  if (block->ptr < unmapped_ptr) pool.insert_into_blocks(split_front(block, unmapped_ptr - block->ptr));
  if (block->size > unmapped_size) pool.insert_into_blocks(split_back(block, unmapped_size));
  block->mapped = false;
  try_merge(block, block->prev);
  try_merge(block, block->next);
  pool.unmapped.insert(block);
  stats_.reserved -= unmapped_size;
  ops_.push_back(SegmentOp{SegmentOp::Unmap, es.id, begin * es.page, unmapped_size});
}

// [A][B] release_expandable_segment: a segment wholly unmapped gives its address range back.
void CachingAllocatorModel::release_expandable_segment(Block* block) {
  ranges_.erase(block->es->base);
  block->pool->unmapped.erase(block);
  delete_block(block);
}

}  // namespace gpumemtrace::report::allocator_model
