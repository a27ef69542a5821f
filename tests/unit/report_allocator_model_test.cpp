// tests/unit/report_allocator_model_test.cpp — the allocator model's rules one by one (each test names
// the PyTorch function it pins down, report/allocator_model/caching_allocator.cpp), the settings'
// grammar, and a randomized stress run under every setting that checks the model's invariants.
// Whole-trace replays (real PyTorch traces, faithfulness) are in tests/report/test_report_what_if.py.
#include <gtest/gtest.h>

#include "report/analyses/what_if.h"

#include <random>
#include <string>
#include <vector>

#include "report/allocator_model/caching_allocator.h"
#include "report/allocator_model/settings.h"

using namespace gpumemtrace::report::allocator_model;

namespace {
constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t GiB = 1ull << 30;

AllocatorSettings conf(const char* text) { return parse_alloc_conf(text); }

std::vector<SegmentOp> take(CachingAllocatorModel& m) {
  std::vector<SegmentOp> ops = m.ops();
  m.clear_ops();
  return ops;
}
}  // namespace

TEST(AllocatorSettings, ParsesLikePyTorch) {
  const AllocatorSettings s = conf("expandable_segments:True, max_split_size_mb:128,garbage_collection_threshold:0.6");
  EXPECT_TRUE(s.expandable_segments);
  EXPECT_EQ(s.max_split_size, 128 * MiB);
  EXPECT_DOUBLE_EQ(s.garbage_collection_threshold, 0.6);
  EXPECT_EQ(s.describe(), "expandable_segments:True,max_split_size_mb:128,garbage_collection_threshold:0.6");
  // A list: the first entry fills the intervals below it, `>` the ones after the last named.
  const AllocatorSettings r = conf("roundup_power2_divisions:[64:8,256:4,>:1]");
  EXPECT_EQ(r.roundup_power2_divisions[0], 8u);   // 1 MiB interval
  EXPECT_EQ(r.roundup_power2_divisions[6], 8u);   // 64 MiB
  EXPECT_EQ(r.roundup_power2_divisions[7], 0u);   // 128 MiB: not named
  EXPECT_EQ(r.roundup_power2_divisions[8], 4u);   // 256 MiB
  EXPECT_EQ(r.roundup_power2_divisions[9], 1u);   // after it: `>`
  EXPECT_EQ(conf("roundup_power2_divisions:4").roundup_power2_divisions[15], 4u);
  // Over a base: the base's other settings stay.
  EXPECT_TRUE(parse_alloc_conf("max_split_size_mb:64", conf("expandable_segments:True")).expandable_segments);
}

TEST(AllocatorSettings, RefusesWhatPyTorchRefuses) {
  for (const char* bad : {"max_split_size_mb:20", "expandable_segments:yes", "garbage_collection_threshold:1.5",
                          "roundup_power2_divisions:3", "no_such_option:1", "max_split_size_mb", "backend:cudaMallocAsync",
                          "roundup_power2_divisions:[3:2]", "per_process_memory_fraction:0"}) {
    EXPECT_THROW(conf(bad), SettingsError) << bad;
  }
  try {
    conf("max_split_size_mb:12");
  } catch (const SettingsError& e) {
    EXPECT_NE(std::string(e.what()).find("must be > 20"), std::string::npos) << e.what();
  }
}

// round_size: 512-byte steps, or power-of-two divisions when configured.
TEST(AllocatorModel, RoundSize) {
  const AllocatorSettings plain;
  EXPECT_EQ(round_size(1, plain), 512u);
  EXPECT_EQ(round_size(513, plain), 1024u);
  EXPECT_EQ(round_size(3 * MiB + 1, plain), 3 * MiB + 512);
  const AllocatorSettings four = conf("roundup_power2_divisions:4");
  EXPECT_EQ(round_size(1200, four), 1536u);                  // not > 512 * 4: 512-byte steps
  EXPECT_EQ(round_size(2600, conf("roundup_power2_divisions:2")), 3072u);  // 2048 .. 4096 in halves
  EXPECT_EQ(round_size(5 * MiB + 1, four), 6 * MiB);         // 4 MiB .. 8 MiB in steps of 1 MiB
  EXPECT_EQ(round_size(8 * MiB, four), 8 * MiB);             // a power of two stays
}

// get_allocation_size: 2 MiB for small, 20 MiB below 10 MiB, else rounded to 2 MiB.
TEST(AllocatorModel, SegmentSizes) {
  EXPECT_EQ(allocation_size(512), 2 * MiB);
  EXPECT_EQ(allocation_size(1 * MiB), 2 * MiB);
  EXPECT_EQ(allocation_size(1 * MiB + 512), 20 * MiB);
  EXPECT_EQ(allocation_size(10 * MiB - 512), 20 * MiB);
  EXPECT_EQ(allocation_size(10 * MiB), 10 * MiB);
  EXPECT_EQ(allocation_size(11 * MiB + 512), 12 * MiB);
}

// alloc_found_block / should_split: a 6 MiB request takes the front of a 20 MiB segment; the rest is
// reused best-fit; a remainder of 2 MiB (> 1 MiB) is split off, one of 1 MiB or less is not.
TEST(AllocatorModel, LargePoolSplitsAndReuses) {
  CachingAllocatorModel m(AllocatorSettings{}, 80 * GiB);
  const Placement a = m.malloc(6 * MiB, 0);
  ASSERT_TRUE(a.block);
  EXPECT_EQ(a.offset, 0u);
  std::vector<SegmentOp> ops = take(m);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].size, 20 * MiB);
  const Placement b = m.malloc(6 * MiB, 0);
  const Placement c = m.malloc(6 * MiB, 0);
  EXPECT_EQ(b.offset, 6 * MiB);
  EXPECT_EQ(c.offset, 12 * MiB);
  EXPECT_EQ(b.segment, a.segment);
  EXPECT_TRUE(take(m).empty());
  const Placement d = m.malloc(6 * MiB, 0);  // 2 MiB left: a new segment
  EXPECT_NE(d.segment, a.segment);
  // A 19.5 MiB request in a free 20 MiB segment: 0.5 MiB left, not split (large pool needs > 1 MiB).
  m.free(d.block);
  const Placement e = m.malloc(19 * MiB + 512 * 1024, 0);
  EXPECT_EQ(e.segment, d.segment);
  EXPECT_EQ(e.size, 20 * MiB);
  EXPECT_EQ(m.check_invariants(), "");
}

// free_block / try_merge: freed neighbours merge; a segment is never merged with another.
TEST(AllocatorModel, FreeMergesNeighbours) {
  CachingAllocatorModel m(AllocatorSettings{}, 80 * GiB);
  const Placement a = m.malloc(6 * MiB, 0), b = m.malloc(6 * MiB, 0), c = m.malloc(6 * MiB, 0);
  m.free(a.block);
  m.free(c.block);
  EXPECT_EQ(m.largest_free_block(), 8 * MiB);  // c's 6 MiB + the 2 MiB tail
  m.free(b.block);
  EXPECT_EQ(m.largest_free_block(), 20 * MiB);
  EXPECT_EQ(m.check_invariants(), "");
}

// get_free_block with max_split_size: an oversize cached block serves only an oversize request within
// max_non_split_rounding (20 MiB) of it; blocks that large are never split.
TEST(AllocatorModel, OversizeBlocks) {
  CachingAllocatorModel m(conf("max_split_size_mb:64"), 80 * GiB);
  const Placement big = m.malloc(100 * MiB, 0);
  m.free(big.block);
  take(m);
  const Placement small = m.malloc(30 * MiB, 0);  // below max_split: may not take the 100 MiB block
  EXPECT_NE(small.segment, big.segment);
  const Placement close = m.malloc(90 * MiB, 0);  // oversize, within 20 MiB: takes it whole
  EXPECT_EQ(close.segment, big.segment);
  EXPECT_EQ(close.size, 100 * MiB);
  EXPECT_EQ(m.check_invariants(), "");
}

// malloc's retry: cudaMalloc fails -> (oversize blocks freed) -> the whole cache freed -> retried.
TEST(AllocatorModel, CacheFlushAndRetry) {
  CachingAllocatorModel m(AllocatorSettings{}, 80 * GiB);
  m.set_capacity(100 * MiB);
  const Placement a = m.malloc(60 * MiB, 0);
  m.free(a.block);
  take(m);
  const Placement b = m.malloc(70 * MiB, 0);  // 60 cached + 70 > 100: flush the 60, retry
  ASSERT_TRUE(b.block);
  std::vector<SegmentOp> ops = take(m);
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].kind, SegmentOp::Free);
  EXPECT_EQ(ops[1].kind, SegmentOp::Alloc);
  EXPECT_EQ(m.stats().cache_flushes, 1u);
  EXPECT_EQ(m.stats().retries, 1u);
  EXPECT_FALSE(m.malloc(40 * MiB, 0).block);  // 70 live + 40 > 100: out of memory
  EXPECT_EQ(m.stats().ooms, 1u);
}

// The memory fraction refuses without asking CUDA; garbage collection frees old cached segments first.
TEST(AllocatorModel, MemoryFractionAndGarbageCollection) {
  CachingAllocatorModel capped(conf("per_process_memory_fraction:0.5"), 1 * GiB);
  EXPECT_TRUE(capped.malloc(400 * MiB, 0).block);
  EXPECT_FALSE(capped.malloc(200 * MiB, 0).block);

  // 550 MiB cached is above 0.5 of 1 GiB: a request the cache cannot serve first collects both
  // segments (equal age), then gets its own.
  CachingAllocatorModel gc(conf("per_process_memory_fraction:1,garbage_collection_threshold:0.5"), 1 * GiB);
  const Placement a = gc.malloc(300 * MiB, 0), b = gc.malloc(250 * MiB, 0);
  gc.free(a.block);
  gc.free(b.block);
  take(gc);
  ASSERT_TRUE(gc.malloc(400 * MiB, 0).block);
  EXPECT_EQ(gc.stats().gc_runs, 1u);
  EXPECT_EQ(gc.stats().cache_flushes, 0u);
  EXPECT_EQ(gc.stats().reserved, 400 * MiB);
  EXPECT_EQ(gc.check_invariants(), "");
}

// Expandable segments: one growing range per stream and pool, mapped in 20 MiB (large) / 2 MiB (small)
// pages; freeing and empty_cache() unmap whole free pages.
TEST(AllocatorModel, ExpandableSegments) {
  CachingAllocatorModel m(conf("expandable_segments:True"), 80 * GiB);
  const Placement a = m.malloc(4 * MiB, 0);
  const Placement b = m.malloc(8 * MiB, 0);
  const Placement c = m.malloc(8 * MiB, 0);
  const Placement d = m.malloc(32 * MiB, 0);
  EXPECT_EQ(a.segment, d.segment);
  EXPECT_EQ(b.offset, 4 * MiB);
  EXPECT_EQ(c.offset, 12 * MiB);
  EXPECT_EQ(d.offset, 20 * MiB);
  std::vector<SegmentOp> ops = take(m);
  ASSERT_EQ(ops.size(), 2u);  // the recorded H100 run did the same (tests/report/real/expandable)
  EXPECT_EQ(ops[0].kind, SegmentOp::Map);
  EXPECT_EQ(ops[0].size, 20 * MiB);
  EXPECT_EQ(ops[1].size, 40 * MiB);
  const Placement s = m.malloc(4096, 0);  // the small pool has its own range, 2 MiB pages
  EXPECT_NE(s.segment, a.segment);
  EXPECT_EQ(take(m)[0].size, 2 * MiB);
  m.free(d.block);
  m.empty_cache();
  ops = take(m);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, SegmentOp::Unmap);
  EXPECT_EQ(ops[0].offset, 20 * MiB);
  EXPECT_EQ(ops[0].size, 40 * MiB);
  EXPECT_EQ(m.stats().reserved, 20 * MiB + 2 * MiB);
  EXPECT_EQ(m.check_invariants(), "");
}

// Streams: a block freed on one stream is not reused by another; a block used on another stream
// (request_free) stays out of the cache until complete_free.
TEST(AllocatorModel, StreamsAndDeferredFrees) {
  CachingAllocatorModel m(AllocatorSettings{}, 80 * GiB);
  const Placement a = m.malloc(30 * MiB, 1);
  m.free(a.block);
  const Placement b = m.malloc(30 * MiB, 2);
  EXPECT_NE(b.segment, a.segment);
  const Placement c = m.malloc(30 * MiB, 2);
  m.request_free(c.block);
  EXPECT_NE(m.malloc(30 * MiB, 2).segment, c.segment);
  m.complete_free(c.block);
  EXPECT_EQ(m.malloc(30 * MiB, 2).segment, c.segment);
  EXPECT_EQ(m.check_invariants(), "");
}

// Random requests and frees on two streams under each setting: the invariants hold throughout.
TEST(AllocatorModel, StressKeepsInvariants) {
  const char* settings[] = {"", "expandable_segments:True", "max_split_size_mb:64", "roundup_power2_divisions:4",
                            "per_process_memory_fraction:0.9,garbage_collection_threshold:0.5",
                            "block_order:stream_first", "expandable_segments:True,block_order:stream_first"};
  for (const char* text : settings) {
    CachingAllocatorModel m(conf(text), 4 * GiB);
    m.set_capacity(3 * GiB);
    std::mt19937_64 rng(42);
    std::vector<Block*> live;
    for (int step = 0; step < 60000; ++step) {
      const uint64_t r = rng() % 100;
      if (r < 55 || live.empty()) {
        const uint64_t kind = rng() % 10;
        const uint64_t size = kind < 5 ? 1 + rng() % (1 << 20) : kind < 9 ? 1 + rng() % (12 * MiB) : 1 + rng() % (200 * MiB);
        const Placement p = m.malloc(size, rng() % 2);
        if (p.block) live.push_back(p.block);
      } else if (r < 98) {
        const size_t i = rng() % live.size();
        m.free(live[i]);
        live[i] = live.back();
        live.pop_back();
      } else {
        m.empty_cache();
      }
      m.clear_ops();
      if (step % 997 == 0) {
        ASSERT_EQ(m.check_invariants(), "") << text << " at step " << step;
      }
    }
    ASSERT_EQ(m.check_invariants(), "") << text;
    EXPECT_GT(m.stats().peak_reserved, 0u);
  }
}

// The state a snapshot's history started from: segments and blocks where they were, each block's
// extent by alloc_found_block's split (the rest of a large-pool block stays with it when 1 MiB or less),
// the reserved bytes counted and no segment operation made; then the model goes on from there.
TEST(AllocatorModel, SeededStateIsWhereTheRecordingLeftIt) {
  CachingAllocatorModel m(AllocatorSettings{}, 80 * GiB);
  const uint64_t large = 0x7f0000000000, small = 0x7f0100000000;
  const uint32_t segment = m.seed_segment(large, 20 * MiB, 0);
  m.seed_segment(small, 2 * MiB, 0);
  const Placement a = m.seed_block(large, 3 * MiB);                         // 17 MiB follow: split
  const Placement b = m.seed_block(large + 3 * MiB, 16 * MiB + 1);          // 1 MiB - 511 B follow: kept
  const Placement c = m.seed_block(small + 4096, 1000);                     // small pool: 1024 B
  ASSERT_TRUE(a.block && b.block && c.block);
  EXPECT_EQ(a.segment, segment);
  EXPECT_EQ(a.size, 3 * MiB);
  EXPECT_EQ(b.offset, 3 * MiB);
  EXPECT_EQ(b.size, 17 * MiB);
  EXPECT_EQ(c.offset, 4096u);
  EXPECT_EQ(c.size, 1024u);
  EXPECT_FALSE(m.seed_block(0x1000, 512).block);  // in no seeded segment
  EXPECT_EQ(m.stats().reserved, 22 * MiB);
  EXPECT_EQ(m.stats().allocated, 20 * MiB + 1024);
  EXPECT_TRUE(m.ops().empty());
  EXPECT_EQ(m.check_invariants(), "");
  // Freed, a seeded block merges with its free neighbours; the space is served without a new segment.
  m.free(a.block);
  const Placement d = m.malloc(3 * MiB, 0);
  EXPECT_EQ(d.segment, segment);
  EXPECT_EQ(d.offset, 0u);
  const Placement e = m.malloc(3000, 0);  // the small segment's free space in front of the seeded block
  EXPECT_EQ(e.offset, 0u);
  EXPECT_TRUE(m.ops().empty());
  EXPECT_EQ(m.check_invariants(), "");
}

// Expandable segments: a mapped range seeds an expandable segment at its address; a second range of
// the same segment joins it; blocks go in at their addresses and new pages map after them.
TEST(AllocatorModel, SeededExpandableSegment) {
  CachingAllocatorModel m(conf("expandable_segments:True"), 80 * GiB);
  const uint64_t base = 0x7f0000000000;
  uint64_t at = 0, again = 0;
  const uint32_t es = m.seed_mapped(base, 40 * MiB, 0, &at);
  EXPECT_EQ(m.seed_mapped(base + 60 * MiB, 20 * MiB, 0, &again), es);
  EXPECT_EQ(at, base);
  EXPECT_EQ(again, base);
  const Placement a = m.seed_block(base + 20 * MiB, 20 * MiB);
  ASSERT_TRUE(a.block);
  EXPECT_TRUE(a.expandable);
  EXPECT_EQ(a.segment, es);
  EXPECT_EQ(a.offset, 20 * MiB);
  EXPECT_EQ(m.stats().reserved, 60 * MiB);
  EXPECT_TRUE(m.ops().empty());
  const Placement b = m.malloc(30 * MiB, 0);  // the first free run with room: pages 40-60 MiB mapped
  EXPECT_EQ(b.segment, es);
  EXPECT_EQ(b.offset, 40 * MiB);
  std::vector<SegmentOp> ops = take(m);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, SegmentOp::Map);
  EXPECT_EQ(ops[0].offset, 40 * MiB);
  EXPECT_EQ(ops[0].size, 20 * MiB);
  EXPECT_EQ(m.check_invariants(), "");
}

// The automatic what-if replays run (a second pass over the trace) only where they have something to
// model: a fragmented peak of PyTorch's blocks, not of another allocator's (the custom allocator API).
TEST(WhatIfSettings, AutomaticOnlyForPyTorchsBlocks) {
  using namespace gpumemtrace::report;
  ProcessReport report;
  DeviceSummary device;
  device.device = 0;
  device.block_allocations = 100;
  report.devices.push_back(device);
  PeakReport peak;
  peak.device = 0;
  peak.has_fragmentation = true;
  peak.fragmentation.reserved = 4ull << 30;
  peak.fragmentation.allocated = 1ull << 30;
  peak.fragmentation.free_in_reserved = 3ull << 30;
  report.peaks.push_back(peak);
  const AnalysisRequest automatic;
  EXPECT_TRUE(what_if_settings(report, automatic).empty());  // another allocator's blocks
  report.devices[0].pytorch_blocks = true;
  const std::vector<std::string> settings = what_if_settings(report, automatic);
  ASSERT_GT(settings.size(), 1u);
  EXPECT_EQ(settings[0], "");  // the recorded run first, then the candidates
  // Settings the user names are replayed whatever the blocks.
  report.devices[0].pytorch_blocks = false;
  AnalysisRequest named;
  named.settings = {"expandable_segments:True"};
  EXPECT_EQ(what_if_settings(report, named), (std::vector<std::string>{"", "expandable_segments:True"}));
}
