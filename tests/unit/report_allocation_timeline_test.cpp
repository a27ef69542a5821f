// tests/unit/report_allocation_timeline_test.cpp — the allocation timeline's level of detail
// (report/analyses/allocation_timeline.h) and the top sites beside it (top_sites.h), through small
// traces: what is kept individually, what gives way, and that the aggregate holds the bytes and time
// of what gave way.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "report/analyses/allocation_timeline.h"
#include "tests/unit/support/trace_text.h"

using namespace gpumemtrace::report;
using gpumemtrace::report::test_support::TraceText;

namespace {
constexpr uint64_t MiB = 1 << 20;
constexpr uint64_t kSegment = 0x700000000000;
using Analysis = AllocationTimelineAnalysis;

const TimelineLevel& blocks_of(const ProcessReport& r) {
  EXPECT_EQ(r.allocation_timeline.devices.size(), 1u);
  return r.allocation_timeline.devices.at(0).blocks;
}

// Blocks inside one big segment, so the model has block data.
TraceText with_segment() {
  TraceText t;
  t.ev("alloc", "device", kSegment, 1ull << 40);
  return t;
}
}  // namespace

TEST(AllocationTimeline, EveryAllocationOfASmallRunIsABand) {
  TraceText t = with_segment();
  t.ev("block_alloc", "block", kSegment, 4 * MiB)              // seq 2, t 20
      .ev("block_alloc", "block", kSegment + 4 * MiB, 2 * MiB)  // t 30: the peak (6 MiB)
      .ev("block_free", "block", kSegment, 0)                   // t 40
      .ev("block_alloc", "block", kSegment + 8 * MiB, 1 * MiB);  // t 50, live at the end
  ProcessReport r = t.analyze();
  const TimelineLevel& blocks = blocks_of(r);
  EXPECT_EQ(blocks.allocations, 3u);
  EXPECT_EQ(blocks.aggregated, 0u);
  ASSERT_EQ(blocks.bands.size(), 3u);
  EXPECT_EQ(blocks.bands[0].start_ns, 20u);
  EXPECT_EQ(blocks.bands[0].end_ns, 40u);
  EXPECT_EQ(blocks.bands[0].addr, kSegment);
  EXPECT_TRUE(blocks.bands[0].why & TimelineBand::kAtPeak);
  EXPECT_FALSE(blocks.bands[0].live_at_end);
  EXPECT_TRUE(blocks.bands[2].live_at_end);
  EXPECT_FALSE(blocks.bands[2].why & TimelineBand::kAtPeak);
  EXPECT_EQ(blocks.peak.bytes, 6 * MiB);
  EXPECT_EQ(blocks.peak.time_ns, 30u);
  EXPECT_EQ(blocks.peak.shown_bytes, blocks.peak.bytes);
  EXPECT_EQ(blocks.peak.count, 2u);
  // The segment, at the CUDA level, carries its blocks.
  ASSERT_EQ(r.allocation_timeline.devices[0].memory.bands.size(), 1u);
  EXPECT_TRUE(r.allocation_timeline.devices[0].memory.bands[0].segment);
}

// More allocations than the budget: the smallest give way, what was live at the peak stays, and the
// aggregate holds every byte-nanosecond of what gave way.
TEST(AllocationTimeline, TheSmallestGiveWayAndThePeakStays) {
  TraceText t = with_segment();
  const size_t n = Analysis::kMaxOrdinary + 5000;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t size = 4096 * (1 + i % 64);
    t.ev("block_alloc", "block", kSegment + 64 * MiB, size).ev("block_free", "block", kSegment + 64 * MiB, 0);
  }
  // The peak (400 KiB, above any one allocation of the churn): 100 blocks smaller than most of it.
  for (int i = 0; i < 100; ++i) t.ev("block_alloc", "block", kSegment + i * MiB, 4096);
  for (int i = 0; i < 100; ++i) t.ev("block_free", "block", kSegment + i * MiB, 0);
  ProcessReport r = t.analyze();
  const TimelineLevel& blocks = blocks_of(r);
  EXPECT_EQ(blocks.allocations, n + 100);
  EXPECT_EQ(blocks.shown + blocks.aggregated, blocks.allocations);
  EXPECT_EQ(blocks.peak.bytes, 100u * 4096);
  EXPECT_EQ(blocks.peak.shown_bytes, blocks.peak.bytes);
  EXPECT_EQ(blocks.peak.shown_count, 100u);
  uint64_t smallest_ordinary = UINT64_MAX, at_peak = 0;
  for (const TimelineBand& b : blocks.bands) {
    if (b.why & TimelineBand::kAtPeak) ++at_peak;
    else smallest_ordinary = std::min(smallest_ordinary, b.size);
  }
  EXPECT_EQ(at_peak, 100u);
  EXPECT_EQ(blocks.bands.size() - at_peak, Analysis::kMaxOrdinary);
  // 5000 gave way, and they were the smallest: sizes 4096.. in a cycle of 64, so the budget keeps only
  // sizes at or above the ones given away.
  EXPECT_EQ(blocks.aggregated, 5000u);
  EXPECT_GE(smallest_ordinary, 4096u);
  // Each allocation lived 10 ns: the aggregate's area is the bytes given away x 10 ns.
  double area = 0;
  for (const TimelineGroup& g : blocks.groups) {
    for (uint64_t average : g.average) area += static_cast<double>(average) * static_cast<double>(blocks.bucket_ns);
  }
  EXPECT_NEAR(area, static_cast<double>(blocks.aggregated_bytes) * 10, static_cast<double>(blocks.bucket_ns) * blocks.groups.size() * blocks.live_max.size());
  EXPECT_LE(blocks.live_max.size(), Analysis::kBuckets);
}

// What was live at an OOM stays, however small, though a later, higher peak came and the budget was
// spent on larger allocations.
TEST(AllocationTimeline, WhatWasLiveAtAnOomStays) {
  TraceText t = with_segment();
  t.ev("block_alloc", "block", kSegment, 512).ev("block_oom", "block", 0, 1ull << 39).ev("block_free", "block", kSegment, 0);
  for (size_t i = 0; i < Analysis::kMaxOrdinary + 10; ++i) {
    t.ev("block_alloc", "block", kSegment + 64 * MiB, MiB).ev("block_free", "block", kSegment + 64 * MiB, 0);
  }
  ProcessReport r = t.analyze();
  const TimelineLevel& blocks = blocks_of(r);
  ASSERT_EQ(blocks.ooms.size(), 1u);
  EXPECT_EQ(blocks.ooms[0].bytes, 512u);
  EXPECT_EQ(blocks.ooms[0].shown_bytes, 512u);
  const auto small = std::find_if(blocks.bands.begin(), blocks.bands.end(), [](const TimelineBand& b) { return b.size == 512; });
  ASSERT_NE(small, blocks.bands.end());
  EXPECT_TRUE(small->why & TimelineBand::kAtOom);
  EXPECT_GT(blocks.aggregated, 0u);
}

namespace {
TraceText top_sites_trace() {
  TraceText t = with_segment();
  t.ev("block_alloc", "block", kSegment, MiB).ev("block_free", "block", kSegment, 0)  // temporary: 10 ns
      .ev("block_alloc", "block", kSegment, 2 * MiB)
      .wait(2'000'000)                                                                   // lives 2 ms
      .ev("block_free", "block", kSegment, 0)
      .ev("block_alloc", "block", kSegment, 3 * MiB);                                    // live at the end
  return t;
}
}  // namespace

// The event clock: a short burst, five idle seconds, then a long run. Its knots stay within the
// bound, time and events only grow, every knot names the event that happened then, and the idle
// seconds lie between two consecutive events.
TEST(AllocationTimeline, TheEventClockKnowsWhichEventHappenedWhen) {
  TraceText t = with_segment();  // event 0: the segment, at 10 ns
  for (int i = 0; i < 5; ++i) t.ev("block_alloc", "block", kSegment + i * MiB, 4096);  // events 1-5
  t.wait(5'000'000'000);
  const size_t n = 3 * EventClock::kMaxKnots;
  for (size_t i = 0; i < n; ++i) {
    t.ev("block_alloc", "block", kSegment + 64 * MiB, 4096).ev("block_free", "block", kSegment + 64 * MiB, 0);
  }
  const ProcessReport report = t.analyze();  // the clock below refers into it: it must outlive them
  const EventClock& clock = report.allocation_timeline.devices.at(0).clock;
  EXPECT_EQ(clock.events, 6 + 2 * n);
  ASSERT_LE(clock.knots.size(), EventClock::kMaxKnots);
  ASSERT_GE(clock.knots.size(), EventClock::kMaxKnots / 4);
  EXPECT_EQ(clock.knots.front().event, 0u);
  EXPECT_EQ(clock.knots.back().event, clock.events - 1);
  for (size_t i = 0; i < clock.knots.size(); ++i) {
    const EventClock::Knot& k = clock.knots[i];
    // TraceText: the event with seq s happens at 10 s ns (plus the wait after the sixth).
    EXPECT_EQ(k.time_ns, 10 * (k.event + 1) + (k.event >= 6 ? 5'000'000'000 : 0)) << i;
    if (i) {
      EXPECT_GT(k.event, clock.knots[i - 1].event);
    }
  }
  // The wait is inside one interval of knots, which spans a few events, not a fifth of the run.
  for (size_t i = 1; i < clock.knots.size(); ++i) {
    if (clock.knots[i].time_ns - clock.knots[i - 1].time_ns > 1'000'000'000) {
      EXPECT_LE(clock.knots[i].event - clock.knots[i - 1].event, clock.events / (EventClock::kMaxKnots / 4));
    }
  }
}

TEST(TopSites, CountsBytesAllocationsAndTemporaries) {
  ProcessReport r = top_sites_trace().analyze();
  const auto blocks = std::find_if(r.top_sites.begin(), r.top_sites.end(), [](const TopSitesReport& s) {
    return s.level == Level::Block;
  });
  ASSERT_NE(blocks, r.top_sites.end());
  EXPECT_EQ(blocks->sites, 1u);
  EXPECT_EQ(blocks->temporary_ns, kTemporaryNs);
  ASSERT_EQ(blocks->by_bytes.size(), 1u);
  EXPECT_EQ(blocks->by_bytes[0].bytes, 6 * MiB);
  EXPECT_EQ(blocks->by_bytes[0].count, 3u);
  EXPECT_EQ(blocks->by_bytes[0].temporary_count, 1u);
  EXPECT_EQ(blocks->by_bytes[0].temporary_bytes, MiB);
  ASSERT_EQ(blocks->by_peak.size(), 1u);
  EXPECT_EQ(blocks->by_peak[0].peak_bytes, 3 * MiB);
  ASSERT_EQ(blocks->by_temporary.size(), 1u);
}

// Without the HTML page nothing of the timeline is kept, and the top sites (every format's) are the same.
TEST(TopSites, TheSameWhenTheTimelineIsNotDrawn) {
  const ProcessReport drawn = top_sites_trace().analyze(true);
  const ProcessReport not_drawn = top_sites_trace().analyze(false);
  EXPECT_FALSE(drawn.allocation_timeline.devices.empty());
  EXPECT_TRUE(not_drawn.allocation_timeline.devices.empty());
  ASSERT_EQ(drawn.top_sites.size(), not_drawn.top_sites.size());
  for (size_t i = 0; i < drawn.top_sites.size(); ++i) {
    const TopSitesReport& a = drawn.top_sites[i];
    const TopSitesReport& b = not_drawn.top_sites[i];
    EXPECT_EQ(a.level, b.level);
    EXPECT_EQ(a.sites, b.sites);
    ASSERT_EQ(a.by_bytes.size(), b.by_bytes.size());
    for (size_t j = 0; j < a.by_bytes.size(); ++j) {
      EXPECT_EQ(a.by_bytes[j].bytes, b.by_bytes[j].bytes);
      EXPECT_EQ(a.by_bytes[j].count, b.by_bytes[j].count);
      EXPECT_EQ(a.by_bytes[j].temporary_count, b.by_bytes[j].temporary_count);
      EXPECT_EQ(a.by_bytes[j].peak_bytes, b.by_bytes[j].peak_bytes);
    }
    EXPECT_EQ(a.by_temporary.size(), b.by_temporary.size());
    EXPECT_EQ(a.by_peak.size(), b.by_peak.size());
  }
}
