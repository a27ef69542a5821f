// tests/unit/report_fragmentation_test.cpp — the memory model's fragmentation bookkeeping
// (report/analyses/fragmentation.cpp) against a walk over every cached range and block, after every
// event of a random run: segments with and without blocks, expandable segments' pages mapped and
// unmapped (touching runs merge, an unmap splits), blocks coming and going.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "report/analyses/memory_model.h"

using namespace gpumemtrace::report;

namespace {
constexpr uint64_t MiB = 1 << 20;

Event event(Op op, Kind kind, uint64_t addr, uint64_t size, const char* api) {
  static uint64_t seq = 0;
  Event e;
  e.seq = ++seq;
  e.t = seq * 10;
  e.op = op;
  e.kind = kind;
  e.addr = addr;
  e.size = size;
  e.device = 0;
  e.api = api;
  return e;
}

// What the bookkeeping must say: reserved = the cached ranges, allocated = the blocks inside them,
// largest = the largest stretch of a range no block covers.
FragmentationPoint walk(const std::map<uint64_t, uint64_t>& ranges, const std::map<uint64_t, uint64_t>& blocks) {
  FragmentationPoint p;
  for (const auto& [start, end] : ranges) {
    p.reserved += end - start;
    uint64_t cursor = start;
    for (auto b = blocks.lower_bound(start); b != blocks.end() && b->first < end; ++b) {
      p.allocated += b->second;
      p.largest_free_block = std::max(p.largest_free_block, b->first - cursor);
      cursor = b->first + b->second;
    }
    p.largest_free_block = std::max(p.largest_free_block, end > cursor ? end - cursor : 0);
  }
  p.free_in_reserved = p.reserved - std::min(p.reserved, p.allocated);
  return p;
}

// Mapped pages as the importer reports them: touching runs are one range.
void add_range(std::map<uint64_t, uint64_t>& r, uint64_t start, uint64_t end) {
  auto it = r.lower_bound(start);
  if (it != r.begin() && std::prev(it)->second == start) {
    start = std::prev(it)->first;
    r.erase(std::prev(it));
  }
  it = r.find(end);
  if (it != r.end()) {
    end = it->second;
    r.erase(it);
  }
  r[start] = end;
}
}  // namespace

TEST(Fragmentation, FollowsSegmentsMappingsAndBlocksLikeAWalk) {
  MemoryModel model;
  std::mt19937_64 rng(7);
  // Regular segments at 0x10_0000_0000 + i * 64 MiB (32 MiB each); an expandable range of 64 pages
  // of 2 MiB at 0x20_0000_0000.
  const uint64_t seg_base = 0x1000000000, es = 0x2000000000, page = 2 * MiB;
  std::map<uint64_t, uint64_t> segments, mapped, blocks;  // start -> end; block start -> size
  std::vector<bool> page_mapped(64);
  uint64_t position = 0;
  auto apply = [&](const Event& e) { model.apply(e, ++position, make_site(StackId())); };
  for (int step = 0; step < 4000; ++step) {
    const uint64_t r = rng() % 100;
    if (r < 10) {  // a segment comes or goes (going: its live blocks end with it)
      const uint64_t i = rng() % 8, addr = seg_base + i * 64 * MiB;
      if (segments.count(addr)) {
        for (auto b = blocks.lower_bound(addr); b != blocks.end() && b->first < addr + 32 * MiB;) b = blocks.erase(b);
        segments.erase(addr);
        apply(event(Op::Free, Kind::Device, addr, 32 * MiB, "torch.segment_free"));
      } else {
        segments[addr] = addr + 32 * MiB;
        apply(event(Op::Alloc, Kind::Device, addr, 32 * MiB, "torch.segment_alloc"));
      }
    } else if (r < 25) {  // pages mapped or unmapped (only where no block lies)
      const uint64_t first = rng() % 64, n = 1 + rng() % 4;
      const uint64_t last = std::min<uint64_t>(64, first + n);
      const bool map = !page_mapped[first];
      bool uniform = true, blocked = false;
      for (uint64_t p = first; p < last; ++p) uniform = uniform && page_mapped[p] != map;
      auto b = blocks.lower_bound(es + first * page);
      if (b != blocks.begin() && std::prev(b)->first + std::prev(b)->second > es + first * page) blocked = true;
      if (b != blocks.end() && b->first < es + last * page) blocked = true;
      if (!uniform || (!map && blocked)) continue;
      for (uint64_t p = first; p < last; ++p) page_mapped[p] = map;
      if (map) {
        add_range(mapped, es + first * page, es + last * page);
        apply(event(Op::Map, Kind::Physical, es + first * page, (last - first) * page, "torch.segment_map"));
      } else {
        std::map<uint64_t, uint64_t> left;
        for (const auto& [s, e] : mapped) {
          if (e <= es + first * page || s >= es + last * page) { left[s] = e; continue; }
          if (s < es + first * page) left[s] = es + first * page;
          if (e > es + last * page) left[es + last * page] = e;
        }
        mapped = left;
        apply(event(Op::Unmap, Kind::Physical, es + first * page, (last - first) * page, "torch.segment_unmap"));
      }
    } else if (r < 65 || blocks.empty()) {  // a block in a segment or in mapped pages, where nothing lies
      std::map<uint64_t, uint64_t> all = segments;
      for (const auto& [s, e] : mapped) all[s] = e;
      if (all.empty()) continue;
      auto range = all.begin();
      std::advance(range, rng() % all.size());
      const uint64_t size = (1 + rng() % 64) * 64 * 1024;
      const uint64_t span = range->second - range->first;
      if (size > span) continue;
      const uint64_t addr = range->first + (rng() % ((span - size) / 512 + 1)) * 512;
      auto next = blocks.lower_bound(addr);
      if (next != blocks.end() && next->first < addr + size) continue;
      if (next != blocks.begin() && std::prev(next)->first + std::prev(next)->second > addr) continue;
      blocks[addr] = size;
      apply(event(Op::BlockAlloc, Kind::Block, addr, size, "torch.alloc"));
    } else {
      auto b = blocks.begin();
      std::advance(b, rng() % blocks.size());
      apply(event(Op::BlockFree, Kind::Block, b->first, 0, "torch.free_completed"));
      blocks.erase(b);
    }
    std::map<uint64_t, uint64_t> all = segments;
    for (const auto& [s, e] : mapped) all[s] = e;
    const FragmentationPoint want = walk(all, blocks), got = model.measure_fragmentation(0);
    ASSERT_EQ(got.reserved, want.reserved) << "step " << step;
    ASSERT_EQ(got.allocated, want.allocated) << "step " << step;
    ASSERT_EQ(got.largest_free_block, want.largest_free_block) << "step " << step;
  }
}

// A segment that holds no block now is cached memory all the same: at a peak, at an OOM.
TEST(Fragmentation, AnEmptyCachedSegmentCounts) {
  MemoryModel model;
  uint64_t position = 0;
  auto apply = [&](const Event& e) { model.apply(e, ++position, make_site(StackId())); };
  apply(event(Op::Alloc, Kind::Device, 0x1000000000, 20 * MiB, "torch.segment_alloc"));
  apply(event(Op::Alloc, Kind::Device, 0x1100000000, 100 * MiB, "torch.segment_alloc"));
  apply(event(Op::BlockAlloc, Kind::Block, 0x1000000000, 4 * MiB, "torch.alloc"));
  const FragmentationPoint p = model.measure_fragmentation(0);
  EXPECT_EQ(p.reserved, 120 * MiB);
  EXPECT_EQ(p.allocated, 4 * MiB);
  EXPECT_EQ(p.largest_free_block, 100 * MiB);
}
