// tests/unit/report_oom_test.cpp — unit tests of OOM incidents: which attempts are one request, and
// where an incident takes the device's free memory from (the block_oom event's own "free", or the
// next meminfo). End-to-end behaviour is in tests/report/.
#include <gtest/gtest.h>

#include <string>

#include "report/analyses/analyze.h"
#include "report/analyses/oom_incidents.h"
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

// What PyTorch's malloc asks the driver for, given the request its OOM record names
// (get_allocation_size in c10/cuda/CUDACachingAllocator.cpp), and expandable segments' chunks.
TEST(Oom, SameRequestSizeFollowsPyTorchsRounding) {
  EXPECT_TRUE(same_request_size(100 * MiB, 100 * MiB, false));
  EXPECT_TRUE(same_request_size(512, 2 * MiB, false));            // small pool: a 2 MiB segment
  EXPECT_TRUE(same_request_size(3 * MiB, 20 * MiB, false));       // 1-10 MiB: a 20 MiB segment
  EXPECT_TRUE(same_request_size(11 * MiB, 12 * MiB, false));      // large: rounded up to 2 MiB
  EXPECT_FALSE(same_request_size(300 * MiB, 100 * MiB, false));   // another request
  EXPECT_FALSE(same_request_size(100 * MiB, 300 * MiB, false));
  EXPECT_TRUE(same_request_size(200ull * 1024 * MiB, 20 * MiB, true));  // one chunk of its mapping
  EXPECT_FALSE(same_request_size(200ull * 1024 * MiB, 20 * MiB, false));
}

// Failed calls are named as CUDA names them, by the API's layer; the runtime's error on a machine
// without a driver too (docs/troubleshooting.md), and a code we do not know is said to be unknown.
TEST(Oom, ErrorNamesFollowTheApisLayer) {
  EXPECT_STREQ(cuda_error_name("cudaMalloc", 2), "cudaErrorMemoryAllocation");
  EXPECT_STREQ(cuda_error_name("cuMemAlloc_v2", 2), "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_STREQ(cuda_error_name("cudaMalloc", 35), "cudaErrorInsufficientDriver");
  EXPECT_STREQ(cuda_error_name("cuMemAlloc_v2", 34), "CUDA_ERROR_STUB_LIBRARY");
  EXPECT_STREQ(cuda_error_name("cudaMalloc", 12345), "unknown error");
}

// A CUDA failure joins the open incident only as the same request: same size, and nothing its
// thread allocated since the last attempt still held.
TEST(Oom, AFailureOfAnotherSizeIsAnotherIncident) {
  const uint64_t A = 0x10000000;
  TraceText t;
  t.ev("alloc", "device", A, 70 * MiB)
      .ev("alloc", "device", 0, 100 * MiB, ",\"result\":2")
      .ev("alloc", "device", 0, 300 * MiB, ",\"result\":2");
  ProcessReport r = t.analyze();
  ASSERT_EQ(r.ooms.size(), 2u);
  EXPECT_EQ(r.ooms[0].requested, 100 * MiB);
  EXPECT_EQ(r.ooms[1].requested, 300 * MiB);
}

TEST(Oom, ChunksReleasedAndMappedAgainAreTheSameRequest) {
  TraceText t;
  for (int attempt = 0; attempt < 2; ++attempt) {  // expandable segments: map until full, roll back
    for (uint64_t h = 1; h <= 3; ++h) t.ev("alloc", "physical", h, 20 * MiB, "", "cuMemCreate");
    t.ev("alloc", "physical", 0, 20 * MiB, ",\"result\":2", "cuMemCreate");
    for (uint64_t h = 1; h <= 3; ++h) t.ev("free", "physical", h, 0, "", "cuMemRelease");
  }
  t.ev("block_oom", "block", 0, 1024 * MiB, "", "torch.oom");
  ProcessReport r = t.analyze();
  ASSERT_EQ(r.ooms.size(), 1u);
  EXPECT_EQ(r.ooms[0].attempts_total, 3u);
  EXPECT_EQ(r.ooms[0].requested, 1024 * MiB);
}

TEST(Oom, AChunkKeptBetweenAttemptsStartsAnotherIncident) {
  TraceText t;
  t.ev("alloc", "physical", 0, 20 * MiB, ",\"result\":2", "cuMemCreate")
      .ev("alloc", "physical", 1, 20 * MiB, "", "cuMemCreate")
      .ev("alloc", "physical", 0, 20 * MiB, ",\"result\":2", "cuMemCreate");
  ProcessReport r = t.analyze();
  EXPECT_EQ(r.ooms.size(), 2u);
}

// A custom pool's refusal (gpumemtrace_block_oom) after the CUDA call it made for a larger chunk is
// that one request, from the pool's thread; from another thread it is a request of its own.
TEST(Oom, APoolsBlockOomJoinsTheChunkItsThreadAskedFor) {
  for (const char* tid : {"", ",\"tid\":99"}) {
    TraceText t;
    t.ev("alloc", "device", 0, 64 * MiB, ",\"result\":2", "cudaMalloc")
        .ev("block_oom", "block", 0, 48 * MiB, tid, "gpumemtrace_block_oom");
    ProcessReport r = t.analyze();
    ASSERT_EQ(r.ooms.size(), *tid ? 2u : 1u) << tid;
    if (*tid) continue;
    EXPECT_EQ(r.ooms[0].attempts_total, 2u);
    EXPECT_EQ(r.ooms[0].requested, 48 * MiB);
    EXPECT_EQ(r.ooms[0].api, "gpumemtrace_block_oom");
  }
  TraceText smaller;  // a chunk smaller than the block could not have served it
  smaller.ev("alloc", "device", 0, 16 * MiB, ",\"result\":2", "cudaMalloc")
      .ev("block_oom", "block", 0, 48 * MiB, "", "gpumemtrace_block_oom");
  EXPECT_EQ(smaller.analyze().ooms.size(), 2u);
}

// An incident without a reading at its attempt takes the device's last one, corrected by what the
// process reserved since: filling the device after a reading leaves none of the room it showed.
TEST(Oom, AReadingTakenBeforeTheDeviceFilledIsCorrected) {
  const uint64_t A = 0x10000000, B = 0x20000000;
  TraceText t;
  t.ev("alloc", "device", A, 96 * MiB)
      .ev("meminfo", "none", 0, 0, ",\"free\":" + std::to_string(928 * MiB) + ",\"total\":" + std::to_string(1024 * MiB))
      .ev("alloc", "device", B, 926 * MiB)
      .ev("block_oom", "block", 0, 8 * MiB, "", "gpumemtrace_block_oom");
  ProcessReport r = t.analyze();
  ASSERT_EQ(r.ooms.size(), 1u);
  const OomReport& oom = r.ooms[0];
  EXPECT_TRUE(oom.stale_reading);
  EXPECT_EQ(oom.reading_free, 928 * MiB);
  EXPECT_EQ(oom.reading_reserved, 96 * MiB);
  EXPECT_EQ(oom.device_free, 2 * MiB);
  EXPECT_EQ(oom.verdict, Verdict::Capacity) << oom.explanation;
}

// Plain cudaMalloc leaves holes: their addresses are measured at the last attempt.
TEST(Oom, HolesBetweenPlainAllocationsAreMeasured) {
  TraceText t;
  const uint64_t base = 0x700000000000;
  for (uint64_t i = 0; i < 8; ++i) t.ev("alloc", "device", base + i * 16 * MiB, 16 * MiB);
  for (uint64_t i = 1; i < 8; i += 2) t.ev("free", "device", base + i * 16 * MiB, 0);
  t.ev("alloc", "device", 0, 32 * MiB, ",\"result\":2")
      .ev("meminfo", "none", 0, 0, ",\"free\":" + std::to_string(64 * MiB) + ",\"total\":" + std::to_string(128 * MiB));
  ProcessReport r = t.analyze();
  ASSERT_EQ(r.ooms.size(), 1u);
  const OomReport& oom = r.ooms[0];
  ASSERT_TRUE(oom.has_address_gaps);
  // Tiles 0, 2, 4, 6 live: a span of 7 tiles with 3 holes; the freed tile 7 lies beyond it.
  EXPECT_EQ(oom.address_gaps.span, 7 * 16 * MiB);
  EXPECT_EQ(oom.address_gaps.inside, 3 * 16 * MiB);
  EXPECT_EQ(oom.address_gaps.largest, 16 * MiB);
  EXPECT_EQ(oom.verdict, Verdict::Fragmentation) << oom.explanation;
}
