// tests/unit/report_memory_model_test.cpp — unit tests of the memory model's bookkeeping through
// whole (small) traces: fragmentation gaps per segment, and one segment seen by both the runtime hooks
// and PyTorch counted once. End-to-end behaviour is in tests/report/.
#include <gtest/gtest.h>

#include <string>

#include "report/analyses/analyze.h"
#include "tests/unit/support/trace_text.h"

using namespace gpumemtrace::report;
using gpumemtrace::report::test_support::TraceText;

namespace {
constexpr uint64_t MiB = 1 << 20;

void expect_point(const FragmentationPoint& p, uint64_t reserved, uint64_t allocated, uint64_t largest) {
  EXPECT_EQ(p.reserved, reserved);
  EXPECT_EQ(p.allocated, allocated);
  EXPECT_EQ(p.free_in_reserved, reserved - allocated);
  EXPECT_EQ(p.largest_free_block, largest);
}
}  // namespace

// The per-segment gap bookkeeping (updated on each block and segment change) gives the numbers a
// walk over every segment and block gives: gaps split and merge, a freed segment leaves, a reset
// starts over.
TEST(Fragmentation, GapsFollowBlocksAndSegments) {
  const uint64_t A = 0x10000000, B = 0x20000000, C = 0x30000000;
  TraceText t;
  t.ev("alloc", "device", A, 10 * MiB)
      .ev("alloc", "device", B, 8 * MiB)
      .ev("block_alloc", "block", A, 2 * MiB)
      .ev("block_alloc", "block", A + 2 * MiB, 2 * MiB)
      .ev("block_alloc", "block", A + 6 * MiB, 1 * MiB)
      .ev("block_alloc", "block", B + 1 * MiB, 3 * MiB)  // allocated peak: 8 MiB
      .ev("block_free", "block", A + 2 * MiB, 0)          // A's gaps [2,6) and [7,10) become one of 4
      .ev("block_oom", "block", 0, 5 * MiB)               // F 12, L 4, D unknown: fragmentation
      .ev("free", "device", B, 0)                         // B leaves with its live block
      .ev("block_alloc", "block", A + 2 * MiB, 4 * MiB)   // fills [2,6): only [7,10) is left
      .ev("block_oom", "block", 0, 4 * MiB)               // F 3: capacity
      .ev("reset", "none", 0, 0)
      .ev("alloc", "device", C, 4 * MiB)
      .ev("block_alloc", "block", C + 1 * MiB, 1 * MiB)
      .ev("block_oom", "block", 0, 4 * MiB);
  ProcessReport r = t.analyze();
  ASSERT_EQ(r.peaks.size(), 1u);
  ASSERT_TRUE(r.peaks[0].has_fragmentation);
  expect_point(r.peaks[0].fragmentation, 18 * MiB, 8 * MiB, 4 * MiB);
  ASSERT_EQ(r.fragmentation.size(), 1u);
  expect_point(r.fragmentation[0].at_peak, 18 * MiB, 8 * MiB, 4 * MiB);
  EXPECT_EQ(r.fragmentation[0].peak_time_ns, 60u);
  ASSERT_EQ(r.fragmentation[0].at_ooms.size(), 3u);
  expect_point(r.fragmentation[0].at_ooms[0].point, 18 * MiB, 6 * MiB, 4 * MiB);
  expect_point(r.fragmentation[0].at_ooms[1].point, 10 * MiB, 7 * MiB, 3 * MiB);
  expect_point(r.fragmentation[0].at_ooms[2].point, 4 * MiB, 1 * MiB, 2 * MiB);
  ASSERT_EQ(r.ooms.size(), 3u);
  EXPECT_EQ(r.ooms[0].verdict, Verdict::Fragmentation);
  // F 3 < 4 and the device's free memory is unknown: no verdict the trace can back.
  EXPECT_EQ(r.ooms[1].verdict, Verdict::NotEnoughInformation);
  EXPECT_EQ(r.ooms[2].verdict, Verdict::NotEnoughInformation);
}

// One segment seen by the runtime hooks and by PyTorch is one allocation and one free, in either
// order of the pairs.
TEST(Summary, PytorchSegmentEventsAreCountedOnce) {
  const uint64_t A = 0x10000000;
  for (bool torch_first : {false, true}) {
    TraceText t;
    if (torch_first) {
      t.ev("alloc", "device", A, 2 * MiB, "", "torch.segment_alloc").ev("alloc", "device", A, 2 * MiB, "", "cudaMalloc");
      t.ev("free", "device", A, 0, "", "cudaFree").ev("free", "device", A, 0, "", "torch.segment_free");
    } else {
      t.ev("alloc", "device", A, 2 * MiB, "", "cudaMalloc").ev("alloc", "device", A, 2 * MiB, "", "torch.segment_alloc");
      t.ev("free", "device", A, 0, "", "torch.segment_free").ev("free", "device", A, 0, "", "cudaFree");
    }
    ProcessReport r = t.analyze();
    ASSERT_EQ(r.devices.size(), 1u);
    EXPECT_EQ(r.devices[0].allocations, 1u) << torch_first;
    EXPECT_EQ(r.devices[0].frees, 1u) << torch_first;
    EXPECT_EQ(r.devices[0].unmatched_frees, 0u) << torch_first;
    EXPECT_EQ(r.leaked_bytes(), 0u) << torch_first;
  }
}
