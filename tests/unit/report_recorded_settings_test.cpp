// tests/unit/report_recorded_settings_test.cpp — the settings a trace records, as the replay and the OOM
// verdict take them (report/allocator_model/recorded_settings.h): PyTorch's parse of a text (three
// options back to their defaults), the per-device cap, options the model does not replay, and a
// model whose settings change mid-run.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "report/allocator_model/caching_allocator.h"
#include "report/allocator_model/recorded_settings.h"
#include "report/analyses/oom_incidents.h"
#include "trace/format.h"

using namespace gpumemtrace::report;
using namespace gpumemtrace::report::allocator_model;
namespace f = gpumemtrace::format;

namespace {
constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t GiB = 1ull << 30;

Event text(const char* source, const char* conf) {
  Event e;
  e.op = f::Op::AllocatorSettings;
  e.api = source;
  e.label = conf;
  e.device = -1;
  return e;
}

Event fraction(int32_t device, double value) {
  Event e;
  e.op = f::Op::AllocatorSettings;
  e.api = f::kSettingsSourceMemoryFraction;
  e.device = device;
  e.fraction = value;
  e.has_fraction = true;
  return e;
}
}  // namespace

TEST(RecordedSettings, ParsedAsPyTorchParsesATextAtRunTime) {
  std::vector<std::string> applied, skipped;
  AllocatorSettings s = apply_recorded_conf(
      "expandable_segments:True,max_split_size_mb:128,garbage_collection_threshold:0.5,max_non_split_rounding_mb:40",
      {}, &applied, &skipped);
  EXPECT_TRUE(s.expandable_segments);
  EXPECT_EQ(s.max_split_size, 128 * MiB);
  // A later text: the three reset to their defaults, the rest (expandable segments, non-split
  // rounding) kept unless named.
  s = apply_recorded_conf("roundup_power2_divisions:4", s, nullptr, nullptr);
  EXPECT_TRUE(s.expandable_segments);
  EXPECT_EQ(s.max_non_split_rounding, 40 * MiB);
  EXPECT_EQ(s.max_split_size, kNoMaxSplit);
  EXPECT_EQ(s.garbage_collection_threshold, 0.0);
  EXPECT_EQ(s.roundup_power2_divisions[3], 4u);
  EXPECT_TRUE(skipped.empty());
  EXPECT_EQ(applied.size(), 4u);
}

TEST(RecordedSettings, OptionsTheModelDoesNotReplayAreSkippedAndNamed) {
  std::vector<std::string> applied, skipped;
  const AllocatorSettings s = apply_recorded_conf(
      "large_segment_size_mb:40,roundup_power2_divisions:[64:8,256:3],expandable_segments:True,throw_on_cudamalloc_oom:True",
      {}, &applied, &skipped);
  EXPECT_TRUE(s.expandable_segments);  // the items after a skipped one still apply
  EXPECT_EQ(skipped, (std::vector<std::string>{"large_segment_size_mb", "roundup_power2_divisions", "throw_on_cudamalloc_oom"}));
  EXPECT_EQ(applied, std::vector<std::string>{"expandable_segments"});
}

TEST(RecordedSettings, ACapPerDeviceAndTheOptionForEvery) {
  RecordedSettings r;
  EXPECT_FALSE(r.recorded());
  AllocatorSettings inferred;
  inferred.expandable_segments = true;
  EXPECT_TRUE(r.for_device(0, inferred).expandable_segments);  // nothing recorded: the caller's
  EXPECT_TRUE(r.apply(text(f::kSettingsSourceInForce, "")));
  EXPECT_FALSE(r.for_device(0, inferred).expandable_segments);  // recorded: the defaults, not inferred
  EXPECT_TRUE(r.apply(fraction(1, 0.02)));
  EXPECT_EQ(r.for_device(1).memory_fraction, 0.02);
  EXPECT_EQ(r.for_device(0).memory_fraction, 0.0);
  EXPECT_EQ(r.cap(1).source, f::kSettingsSourceMemoryFraction);
  EXPECT_EQ(r.cap(0).fraction, 0.0);
  // A text without the option keeps the device's cap; one with it replaces every device's.
  r.apply(text(f::kSettingsSourceSetAllocatorSettings, "expandable_segments:True"));
  EXPECT_EQ(r.for_device(1).memory_fraction, 0.02);
  EXPECT_TRUE(r.for_device(1).expandable_segments);
  r.apply(text(f::kSettingsSourceSetAllocatorSettings, "per_process_memory_fraction:0.5"));
  EXPECT_EQ(r.for_device(1).memory_fraction, 0.5);
  EXPECT_EQ(r.cap(0).fraction, 0.5);
  EXPECT_EQ(r.cap(0).source, "per_process_memory_fraction");
  EXPECT_FALSE(r.apply(text("elsewhere", "expandable_segments:False")));  // an unknown source
  EXPECT_EQ(r.records(), 4u);
}

TEST(RecordedSettings, TheModelTakesNewSettingsMidRun) {
  CachingAllocatorModel m(AllocatorSettings{}, 80 * GiB);
  ASSERT_TRUE(m.malloc(30 * MiB, 0).block);
  EXPECT_EQ(m.ops().back().kind, SegmentOp::Alloc);
  m.clear_ops();
  AllocatorSettings expandable;
  expandable.expandable_segments = true;
  m.set_settings(expandable);
  ASSERT_TRUE(m.malloc(30 * MiB, 0).block);
  ASSERT_FALSE(m.ops().empty());
  EXPECT_EQ(m.ops().back().kind, SegmentOp::Map);  // the next request gets a mapped range
  m.clear_ops();
  AllocatorSettings capped = expandable;
  capped.memory_fraction = 0.001;  // about 82 MiB: 70 reserved, no room for another 20 MiB page
  m.set_settings(capped);
  EXPECT_FALSE(m.malloc(30 * MiB, 0).block);
  EXPECT_EQ(m.check_invariants(), "");
}

TEST(RecordedSettings, TheOomVerdictNamesTheCap) {
  OomFigures figures;
  figures.requested = 2 * GiB;
  figures.allocator_only = true;
  figures.has_device_free = true;
  figures.device_free = 70 * GiB;
  figures.device_total = 80 * GiB;
  figures.ours = 256 * MiB;
  figures.cap_fraction = 0.02;
  figures.cap_bytes = static_cast<uint64_t>(0.02 * static_cast<double>(80 * GiB));
  figures.cap_source = f::kSettingsSourceMemoryFraction;
  std::string why;
  EXPECT_EQ(oom_verdict(figures, &why), Verdict::AllocatorLimit);
  EXPECT_NE(why.find("its cap, set_per_process_memory_fraction(0.02), 1.6 GiB of this device, which the request would pass"),
            std::string::npos) << why;
  // Without a reading of the device's free bytes, the cap alone explains a request past it.
  figures.has_device_free = false;
  EXPECT_EQ(oom_verdict(figures, &why), Verdict::AllocatorLimit);
  figures.cap_fraction = 0;
  figures.cap_bytes = 0;
  EXPECT_NE(oom_verdict(figures, &why), Verdict::AllocatorLimit);
  EXPECT_EQ(cap_text(0.5, 40 * GiB, "per_process_memory_fraction"),
            "the option per_process_memory_fraction:0.5, 40.0 GiB of this device");
}
