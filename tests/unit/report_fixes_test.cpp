// Unit tests of gpumem-report fixes: fragmentation bookkeeping, OOM device free from the event,
// PyTorch dedupe counts, reader limits. End-to-end behaviour is in tests/report/.
#include <gtest/gtest.h>

#include <string>

#include "report/analyses/analyze.h"
#include "report/reader/line_reader.h"

using namespace gpumemtrace::report;

namespace {
constexpr uint64_t MiB = 1 << 20;
const char* kHeader = R"({"type":"header","format":"gpumemtrace","version":1,"pid":7})";

class TraceText {
 public:
  TraceText() : text_(std::string(kHeader) + "\n") {}
  // One event line; `extra` is appended inside the object (",\"free\":5").
  TraceText& ev(const char* op, const char* kind, uint64_t addr, uint64_t size, const std::string& extra = "",
                const char* api = "") {
    ++seq_;
    text_ += "{\"type\":\"event\",\"seq\":" + std::to_string(seq_) + ",\"t\":" + std::to_string(seq_ * 10) +
             ",\"op\":\"" + op + "\",\"kind\":\"" + kind + "\",\"addr\":\"0x" + hex(addr) +
             "\",\"size\":" + std::to_string(size) + ",\"device\":0" + (*api ? ",\"api\":\"" + std::string(api) + "\"" : "") +
             extra + "}\n";
    return *this;
  }
  // With a footer: a complete trace, so what is live at the end is a leak (a cut trace has none).
  ProcessReport analyze() const {
    const std::string text = text_ + "{\"type\":\"footer\"}\n";
    auto source = memory_byte_source(text);
    return analyze_source(*source, "mem", Suppressions());
  }

 private:
  static std::string hex(uint64_t v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(v));
    return buf;
  }
  std::string text_;
  uint64_t seq_ = 0;
};

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

// A file without newlines is not read into memory whole: past the cap it is an error.
TEST(LineReaderLimit, ALineLongerThanTheCapIsAnError) {
  std::string text = "short\n" + std::string(100, 'x') + "\nafter";
  auto source = memory_byte_source(text);
  LineReader reader(*source, 8, 64);
  Line line;
  ASSERT_TRUE(reader.next(line));
  EXPECT_EQ(line.text, "short");
  EXPECT_THROW(reader.next(line), std::runtime_error);

  std::string fits = std::string(64, 'y') + "\n";
  auto ok_source = memory_byte_source(fits);
  LineReader ok_reader(*ok_source, 8, 64);
  ASSERT_TRUE(ok_reader.next(line));
  EXPECT_EQ(line.text.size(), 64u);
}
