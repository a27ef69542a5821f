// report/analyses/fragmentation.cpp — the memory model's fragmentation bookkeeping (MemoryModel::SegmentGaps):
// the caching allocators' cached memory and the free gaps inside it, kept up to date as blocks, segments and
// mappings change, so that a measurement at any moment (each new block-level peak, each OOM) is O(1).
//
// What counts as cached memory: every live segment of a caching allocator (PyTorch's segment_alloc, or a
// cudaMalloc'ed range a block landed in), whether or not it holds a block now, and the mapped pages of
// expandable segments (PyTorch's segment_map/unmap; touching runs are one range, as its snapshot reports
// them). Invariants, per device: reserved = the bytes of its ranges; allocated = the bytes of the blocks
// that start inside them; gaps = every non-empty gap of its ranges, each counted once.
#include <algorithm>

#include "report/analyses/memory_model.h"

namespace gpumemtrace::report {

namespace {

uint64_t gap(uint64_t from, uint64_t to) { return to > from ? to - from : 0; }
void add_gap(std::pmr::map<uint64_t, uint64_t>& gaps, uint64_t size) {
  if (size) ++gaps[size];
}
void remove_gap(std::pmr::map<uint64_t, uint64_t>& gaps, uint64_t size) {
  if (!size) return;
  auto it = gaps.find(size);
  if (it != gaps.end() && --it->second == 0) gaps.erase(it);
}

// Calls `visit(gap)` for each gap of the range [start, end): between its blocks, and at its ends.
template <typename Visit>
void for_each_gap(const MemoryModel::BlockMap& blocks, uint64_t start, uint64_t end, Visit visit) {
  uint64_t cursor = start;
  for (auto b = blocks.lower_bound(start); b != blocks.end() && b->first < end; ++b) {
    visit(gap(cursor, b->first));
    cursor = range_end(b->first, b->second.size);
  }
  visit(gap(cursor, end));
}

}  // namespace

MemoryModel::CachedMap::iterator MemoryModel::cached_at(uint64_t addr) {
  auto it = cached_.upper_bound(addr);
  if (it == cached_.begin()) return cached_.end();
  --it;
  return addr < it->second.end ? it : cached_.end();
}

// A range joins (leaves) its device's totals: O(blocks inside it), once per segment, and on the rare
// mapping that overlaps what is already cached.
void MemoryModel::add_cached(uint64_t start, uint64_t end, int32_t device, bool mapped) {
  if (start >= end) return;
  cached_[start] = CachedRange{end, device, mapped};
  SegmentGaps& totals = device_state(device).segments;
  totals.reserved += end - start;
  for (auto b = blocks_.lower_bound(start); b != blocks_.end() && b->first < end; ++b) totals.allocated += b->second.size;
  for_each_gap(blocks_, start, end, [&](uint64_t size) { add_gap(totals.gaps, size); });
}

void MemoryModel::remove_cached(CachedMap::iterator range) {
  const uint64_t start = range->first, end = range->second.end;
  SegmentGaps& totals = device_state(range->second.device).segments;
  totals.reserved -= std::min(totals.reserved, end - start);
  for (auto b = blocks_.lower_bound(start); b != blocks_.end() && b->first < end; ++b) {
    totals.allocated -= std::min(totals.allocated, b->second.size);
  }
  for_each_gap(blocks_, start, end, [&](uint64_t size) { remove_gap(totals.gaps, size); });
  cached_.erase(range);
}

void MemoryModel::cache_segment(AllocationIt segment) {
  Allocation& a = segment->second;
  const uint64_t start = segment->first, end = range_end(start, a.size);
  if (a.cached || a.kind != Kind::Device || cached_at(start) != cached_.end()) return;
  auto next = cached_.lower_bound(start);
  if (next != cached_.end() && next->first < end) return;  // overlaps a mapped range: counted there
  a.cached = true;
  add_cached(start, end, a.device, false);
}

void MemoryModel::uncache_segment(AllocationIt segment) {
  segment->second.cached = false;
  auto it = cached_.find(segment->first);
  if (it != cached_.end() && !it->second.mapped) remove_cached(it);
}

// A device reset: nothing of it is cached any more (its allocations and blocks are gone).
void MemoryModel::uncache_device(int32_t device) {
  for (auto it = cached_.begin(); it != cached_.end();) {
    it = it->second.device == device ? cached_.erase(it) : std::next(it);
  }
  device_state(device).segments = SegmentGaps();
}

// Pages mapped at [start, end): a range of their own, or joined to the mapped runs they touch (the gap at
// the junction merges). A mapping over memory already cached, or with blocks inside (a trace that does not
// hold together), recounts the union.
void MemoryModel::map_cached(uint64_t start, uint64_t end, int32_t device) {
  if (start >= end) return;
  auto next = cached_.lower_bound(start);
  auto prev = next == cached_.begin() ? cached_.end() : std::prev(next);
  auto first_block = blocks_.lower_bound(start);
  const bool overlaps = (prev != cached_.end() && prev->second.end > start) ||
                        (next != cached_.end() && next->first < end) ||
                        (first_block != blocks_.end() && first_block->first < end);
  if (overlaps) {
    uint64_t lo = start, hi = end;
    auto it = prev != cached_.end() ? prev : next;
    while (it != cached_.end() && it->first <= hi) {
      if (it->second.mapped && it->second.device == device && it->second.end >= lo) {
        lo = std::min(lo, it->first);
        hi = std::max(hi, it->second.end);
        auto after = std::next(it);
        remove_cached(it);
        it = after;
      } else {
        ++it;
      }
    }
    add_cached(lo, hi, device, true);
    return;
  }
  const bool join_left = prev != cached_.end() && prev->second.mapped && prev->second.device == device &&
                         prev->second.end == start;
  const bool join_right = next != cached_.end() && next->second.mapped && next->second.device == device &&
                          next->first == end;
  SegmentGaps& totals = device_state(device).segments;
  uint64_t before = start, after = end;  // where the free space around the new pages starts and ends
  if (join_left) {
    before = prev->first;
    if (first_block != blocks_.begin()) {
      auto last = std::prev(first_block);
      if (last->first >= prev->first) before = range_end(last->first, last->second.size);
    }
    remove_gap(totals.gaps, gap(before, start));
  }
  if (join_right) {
    after = next->second.end;
    auto b = blocks_.lower_bound(end);
    if (b != blocks_.end() && b->first < next->second.end) after = b->first;
    remove_gap(totals.gaps, gap(end, after));
  }
  add_gap(totals.gaps, gap(before, after));
  totals.reserved += end - start;
  const uint64_t lo = join_left ? prev->first : start, hi = join_right ? next->second.end : end;
  if (join_left) cached_.erase(prev);
  if (join_right) cached_.erase(next);
  cached_[lo] = CachedRange{hi, device, true};
}

// Pages unmapped at [start, end): the run that holds them splits (the gap there splits). Pages not inside
// one run, or with a block on them, recount what is left of the runs they touch.
void MemoryModel::unmap_cached(uint64_t start, uint64_t end, int32_t device) {
  if (start >= end) return;
  auto range = cached_at(start);
  auto first_block = blocks_.lower_bound(start);
  bool simple = range != cached_.end() && range->second.mapped && range->second.device == device &&
                end <= range->second.end && (first_block == blocks_.end() || first_block->first >= end);
  uint64_t before = simple ? range->first : 0;
  if (simple && first_block != blocks_.begin()) {
    auto last = std::prev(first_block);
    if (last->first >= range->first) before = range_end(last->first, last->second.size);
    simple = before <= start;  // a block reaching into the unmapped pages
  }
  if (!simple) {
    std::vector<std::pair<uint64_t, uint64_t>> keep;
    auto it = cached_.upper_bound(start);
    if (it != cached_.begin()) --it;
    while (it != cached_.end() && it->first < end) {
      if (it->second.end <= start || !it->second.mapped || it->second.device != device) {
        ++it;
        continue;
      }
      if (it->first < start) keep.emplace_back(it->first, start);
      if (it->second.end > end) keep.emplace_back(end, it->second.end);
      auto after = std::next(it);
      remove_cached(it);
      it = after;
    }
    for (const auto& [lo, hi] : keep) add_cached(lo, hi, device, true);
    return;
  }
  SegmentGaps& totals = device_state(device).segments;
  uint64_t after = range->second.end;
  auto next_block = blocks_.lower_bound(end);
  if (next_block != blocks_.end() && next_block->first < range->second.end) after = next_block->first;
  remove_gap(totals.gaps, gap(before, after));
  add_gap(totals.gaps, gap(before, start));
  add_gap(totals.gaps, gap(end, after));
  totals.reserved -= std::min(totals.reserved, end - start);
  const uint64_t lo = range->first, hi = range->second.end;
  cached_.erase(range);
  if (lo < start) cached_[lo] = CachedRange{start, device, true};
  if (end < hi) cached_[end] = CachedRange{hi, device, true};
}

// `block` was just inserted into blocks_ (or is about to be erased): the gap it sits in splits in two
// (or the two around it merge), and its bytes join (leave) the allocated total. O(log n).
void MemoryModel::gaps_around(BlockIt block, bool inserted) {
  auto range = cached_at(block->first);
  if (range == cached_.end()) return;
  const uint64_t start = range->first, end = range->second.end;
  uint64_t before = start;  // where the gap in front of `block` starts
  if (block != blocks_.begin()) {
    auto previous = std::prev(block);
    if (previous->first >= start) before = range_end(previous->first, previous->second.size);
  }
  uint64_t after = end;  // where the gap behind it ends
  auto next = std::next(block);
  if (next != blocks_.end() && next->first < end) after = next->first;
  SegmentGaps& totals = device_state(range->second.device).segments;
  const uint64_t whole = gap(before, after), left = gap(before, block->first),
                 right = gap(range_end(block->first, block->second.size), after);
  if (inserted) {
    remove_gap(totals.gaps, whole);
    add_gap(totals.gaps, left);
    add_gap(totals.gaps, right);
    totals.allocated += block->second.size;
  } else {
    remove_gap(totals.gaps, left);
    remove_gap(totals.gaps, right);
    add_gap(totals.gaps, whole);
    totals.allocated -= std::min(totals.allocated, block->second.size);
  }
}

FragmentationPoint MemoryModel::measure_fragmentation(int32_t device) const {
  FragmentationPoint point;
  const DeviceState* state = devices_.find(device);
  if (!state) return point;
  const SegmentGaps& totals = state->segments;
  point.reserved = totals.reserved;
  point.allocated = totals.allocated;
  point.largest_free_block = totals.gaps.empty() ? 0 : totals.gaps.rbegin()->first;
  point.free_in_reserved = point.reserved - std::min(point.reserved, point.allocated);
  return point;
}

}  // namespace gpumemtrace::report
