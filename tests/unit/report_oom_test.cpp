// tests/unit/report_oom_test.cpp — unit tests of where an OOM incident takes the device's free
// memory from: the block_oom event's own "free", or the next meminfo. End-to-end behaviour is in
// tests/report/.
#include <gtest/gtest.h>

#include <string>

#include "report/analyses/analyze.h"
#include "tests/unit/support/trace_text.h"

using namespace gpumemtrace::report;
using gpumemtrace::report::test_support::TraceText;

namespace {
constexpr uint64_t MiB = 1 << 20;
}  // namespace

// A live PyTorch block_oom carries "free" (docs/trace-format.md): the verdict uses it at once, and a
// later meminfo (taken after PyTorch freed its cache, say) does not replace it.
TEST(Oom, BlockOomUsesItsOwnDeviceFree) {
  const uint64_t A = 0x10000000;
  TraceText t;
  t.ev("alloc", "device", A, 10 * MiB)
      .ev("block_alloc", "block", A, 6 * MiB)
      .ev("block_oom", "block", 0, 8 * MiB, ",\"free\":" + std::to_string(20 * MiB), "torch.oom")
      .ev("meminfo", "none", 0, 0, ",\"free\":0,\"total\":" + std::to_string(80 * MiB));
  ProcessReport r = t.analyze();
  ASSERT_EQ(r.ooms.size(), 1u);
  EXPECT_TRUE(r.ooms[0].has_device_free);
  EXPECT_EQ(r.ooms[0].device_free, 20 * MiB);
  // 8 <= D 20 and no CUDA call failed: the allocator's own limit refused it (without the event's
  // free it read as capacity).
  EXPECT_EQ(r.ooms[0].verdict, Verdict::AllocatorLimit);
}

TEST(Oom, FailedAllocationStillWaitsForTheNextMeminfo) {
  TraceText t;
  t.ev("alloc", "device", 0, 8 * MiB, ",\"result\":2")
      .ev("meminfo", "none", 0, 0, ",\"free\":" + std::to_string(3 * MiB) + ",\"total\":" + std::to_string(80 * MiB));
  ProcessReport r = t.analyze();
  ASSERT_EQ(r.ooms.size(), 1u);
  EXPECT_TRUE(r.ooms[0].has_device_free);
  EXPECT_EQ(r.ooms[0].device_free, 3 * MiB);
  EXPECT_EQ(r.ooms[0].device_total, 80 * MiB);
}
