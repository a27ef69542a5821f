// tests/unit/snapshot_convert_test.cpp — the snapshot -> trace converter on pickles built here with a
// tiny protocol-2 writer: initial state rebuilt from the end state, free_requested handling, OOM.
#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "report/import/snapshot_to_trace.h"

namespace {

// Minimal pickle writer (protocol 2) for plain values.
struct P {
  std::string b;
  static P str(const std::string& s) {
    P p;
    p.b = "X";
    uint32_t n = static_cast<uint32_t>(s.size());
    for (int i = 0; i < 4; ++i) p.b.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
    p.b += s;
    return p;
  }
  static P num(uint64_t v) {  // LONG1, 8 bytes + sign byte
    P p;
    p.b = "\x8a";
    p.b.push_back(9);
    for (int i = 0; i < 8; ++i) p.b.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    p.b.push_back(0);
    return p;
  }
  static P list(const std::vector<P>& items) {
    P p;
    p.b = "](";
    for (const auto& i : items) p.b += i.b;
    p.b += "e";
    return p;
  }
  static P dict(const std::vector<std::pair<std::string, P>>& items) {
    P p;
    p.b = "}(";
    for (const auto& [k, v] : items) p.b += str(k).b + v.b;
    p.b += "u";
    return p;
  }
  std::string pickle() const { return std::string("\x80\x02", 2) + b + "."; }
};

P frames(const std::string& fn, uint64_t line) {
  return P::list({P::dict({{"name", P::str(fn)}, {"filename", P::str("train.py")}, {"line", P::num(line)}})});
}

P entry(const std::string& action, uint64_t addr, uint64_t size, uint64_t t, const std::string& fn = "") {
  std::vector<std::pair<std::string, P>> kv = {{"action", P::str(action)}, {action == "oom" ? "device_free" : "addr", P::num(addr)},
                                               {"size", P::num(size)}, {"stream", P::num(0)}, {"time_us", P::num(t)}};
  if (!fn.empty()) kv.push_back({"frames", frames(fn, 7)});
  return P::dict(kv);
}

P block(uint64_t addr, uint64_t size, const std::string& state, const std::string& fn) {
  return P::dict({{"address", P::num(addr)}, {"size", P::num(size)}, {"requested_size", P::num(size)},
                  {"state", P::str(state)}, {"frames", fn.empty() ? P::list({}) : frames(fn, 3)}});
}

// The trace, or with expect_ok false the message of the SnapshotError the conversion throws.
std::string convert(const std::string& pickle, gpumemtrace::snapshot::ConvertStats* stats, bool expect_ok = true) {
  std::ostringstream out;
  try {
    gpumemtrace::snapshot::snapshot_bytes_to_trace(pickle, "test", out, stats);
  } catch (const gpumemtrace::snapshot::SnapshotError& e) {
    EXPECT_FALSE(expect_ok) << e.what();
    EXPECT_EQ(e.file(), "test");
    EXPECT_EQ(std::string(e.what()), "test: " + e.message());
    return e.message();
  }
  EXPECT_TRUE(expect_ok) << "no SnapshotError";
  return out.str();
}

std::vector<std::string> event_lines(const std::string& trace) {
  std::vector<std::string> out;
  std::istringstream in(trace);
  std::string line;
  while (std::getline(in, line))
    if (line.find("\"type\":\"event\"") != std::string::npos) out.push_back(line);
  return out;
}

constexpr uint64_t kSeg = 0x7f0000000000ull;

}  // namespace

TEST(SnapshotConvert, InitialStateRebuiltFromTheEnd) {
  // End state: segment with block A (alloc'ed before the history, live) and block B (alloc'ed in the
  // history, live). Block C was allocated before the history and freed in it.
  P snap = P::dict({
      {"segments", P::list({P::dict({{"device", P::num(0)}, {"address", P::num(kSeg)}, {"total_size", P::num(4096)},
                                     {"stream", P::num(0)}, {"blocks", P::list({block(kSeg, 1024, "active_allocated", "early"),
                                                                                block(kSeg + 1024, 1024, "active_allocated", "late"),
                                                                                block(kSeg + 2048, 2048, "inactive", "")})}})})},
      {"device_traces", P::list({P::list({entry("alloc", kSeg + 1024, 1024, 100, "late"),
                                          entry("free_requested", kSeg + 2048, 512, 200, "drop"),
                                          entry("free_completed", kSeg + 2048, 512, 201, "drop")})})},
  });
  gpumemtrace::snapshot::ConvertStats stats;
  std::string trace = convert(snap.pickle(), &stats);
  auto ev = event_lines(trace);
  ASSERT_EQ(ev.size(), 5u) << trace;
  EXPECT_NE(ev[0].find("\"op\":\"alloc\",\"kind\":\"device\""), std::string::npos) << ev[0];
  EXPECT_NE(ev[1].find("\"op\":\"block_alloc\""), std::string::npos);
  EXPECT_NE(ev[1].find("\"addr\":\"0x7f0000000000\""), std::string::npos) << ev[1];
  EXPECT_NE(ev[2].find("\"addr\":\"0x7f0000000800\",\"size\":512"), std::string::npos) << ev[2];
  EXPECT_NE(ev[2].find("\"stack\":0"), std::string::npos) << ev[2];  // allocation stack unknown
  EXPECT_NE(ev[3].find("\"t\":0"), std::string::npos);
  EXPECT_NE(ev[3].find("\"addr\":\"0x7f0000000400\""), std::string::npos) << ev[3];
  EXPECT_NE(ev[4].find("\"api\":\"torch.free_completed\",\"op\":\"block_free\""), std::string::npos) << ev[4];
  EXPECT_NE(ev[4].find("\"t\":101000"), std::string::npos) << ev[4];
  EXPECT_NE(ev[4].find("\"segment\":\"0x7f0000000000\""), std::string::npos) << ev[4];
  EXPECT_EQ(stats.initial_segments, 1u);
  EXPECT_EQ(stats.initial_blocks, 2u);
  EXPECT_EQ(stats.inconsistencies, 0u);
  EXPECT_EQ(trace.rfind("{\"type\":\"header\"", 0), 0u);
  EXPECT_NE(trace.find("{\"type\":\"footer\",\"events\":5,"), std::string::npos);
}

TEST(SnapshotConvert, FreeRequestedUsedWhenFreeCompletedWasSkipped) {
  P snap = P::dict({{"segments", P::list({})},
                    {"device_traces", P::list({P::list({entry("segment_alloc", kSeg, 2 << 20, 1), entry("alloc", kSeg, 64, 2, "f"),
                                                        entry("free_requested", kSeg, 64, 3)})})}});
  gpumemtrace::snapshot::ConvertStats stats;
  auto ev = event_lines(convert(snap.pickle(), &stats));
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_NE(ev[2].find("\"api\":\"torch.free_requested\",\"op\":\"block_free\""), std::string::npos) << ev[2];
}

TEST(SnapshotConvert, OomCarriesTheDevicesFreeBytes) {
  P snap = P::dict({{"segments", P::list({})},
                    {"device_traces", P::list({P::list({entry("oom", 12345, 1 << 20, 5, "big")})})}});
  gpumemtrace::snapshot::ConvertStats stats;
  auto ev = event_lines(convert(snap.pickle(), &stats));
  ASSERT_EQ(ev.size(), 1u);  // one event: whoever reads the OOM knows what the device had left
  EXPECT_NE(ev[0].find("\"op\":\"block_oom\",\"kind\":\"block\",\"addr\":\"0x0\",\"size\":1048576"), std::string::npos) << ev[0];
  EXPECT_NE(ev[0].find("\"free\":12345"), std::string::npos) << ev[0];
}

TEST(SnapshotConvert, TheStartingStateIsMarkedInitial) {
  P snap = P::dict({
      {"segments", P::list({P::dict({{"device", P::num(0)}, {"address", P::num(kSeg)}, {"total_size", P::num(4096)},
                                     {"stream", P::num(0)}, {"blocks", P::list({block(kSeg, 1024, "active_allocated", "early"),
                                                                                block(kSeg + 1024, 3072, "inactive", "")})}})})},
      {"device_traces", P::list({P::list({entry("alloc", kSeg + 1024, 512, 100, "late"),
                                          entry("free_completed", kSeg + 1024, 512, 101)})})},
  });
  gpumemtrace::snapshot::ConvertStats stats;
  auto ev = event_lines(convert(snap.pickle(), &stats));
  ASSERT_EQ(ev.size(), 4u);
  for (size_t i = 0; i < ev.size(); ++i) {  // the segment and the block live before the history; then the history
    EXPECT_EQ(ev[i].find("\"initial\":true") != std::string::npos, i < 2) << ev[i];
  }
}

TEST(SnapshotConvert, BlocksOutsideEverySegmentAreLeftOutWithOneLine) {
  // A synthetic snapshot (as facebookresearch/mosaic's generator writes them): blocks, live at the end
  // and in the history, at addresses no segment holds.
  P snap = P::dict({
      {"segments", P::list({P::dict({{"device", P::num(0)}, {"address", P::num(kSeg)}, {"total_size", P::num(4096)},
                                     {"stream", P::num(0)}, {"blocks", P::list({block(kSeg, 1024, "active_allocated", "in"),
                                                                                block(0x1000, 1024, "active_allocated", "out")})}})})},
      {"device_traces", P::list({P::list({entry("alloc", 0x9000, 512, 100, "out"), entry("alloc", 0xa000, 512, 101, "out"),
                                          entry("free_completed", 0x9000, 512, 102)})})},
  });
  gpumemtrace::snapshot::ConvertStats stats;
  std::string trace = convert(snap.pickle(), &stats);
  auto ev = event_lines(trace);
  ASSERT_EQ(ev.size(), 2u) << trace;  // the segment and its one block
  EXPECT_EQ(stats.inconsistencies, 4u);
  ASSERT_FALSE(stats.warnings.empty());
  // 0x1000 and 0x9000 (live at the start, freed) and 0xa000 lie outside; 0xa000 is also allocated and never
  // freed, yet not live at the end: the history contradicts the final state.
  EXPECT_EQ(stats.warnings[0].rfind("inconsistent snapshot: 3 blocks lie outside every segment (left out); 1 history "
                                    "entry contradicts the final state", 0), 0u)
      << stats.warnings[0];
  size_t lines = 0;
  for (const std::string& w : stats.warnings) lines += w.find("inconsistent") != std::string::npos;
  EXPECT_EQ(lines, 1u);
}

TEST(SnapshotConvert, AllocatorSettingsBecomeTheRecordInForce) {
  P divisions = P::dict({{"1", P::num(0)}, {"2", P::num(4)}, {"4", P::num(0)}});
  P settings = P::dict({{"PYTORCH_CUDA_ALLOC_CONF", P::str("expandable_segments:True,max_split_size_mb:64,secret:x")},
                        {"max_split_size", P::num(512ull << 20)},
                        {"expandable_segments", P::str("ignored: not a bool")},
                        {"roundup_power2_divisions", divisions}});
  P snap = P::dict({{"segments", P::list({})}, {"device_traces", P::list({})}, {"allocator_settings", settings}});
  gpumemtrace::snapshot::ConvertStats stats;
  std::string trace = convert(snap.pickle(), &stats);
  // The text it parsed, with the values it reports taking their place; keys not the allocator's left out.
  EXPECT_NE(trace.find("{\"type\":\"allocator_settings\",\"seq\":1,\"t\":0,\"tid\":0,\"source\":\"in_force\",\"device\":-1,"
                       "\"conf\":\"expandable_segments:True,max_split_size_mb:512,roundup_power2_divisions:[1:0,2:4,4:0]\"}"),
            std::string::npos)
      << trace;
}

TEST(SnapshotConvert, AnUnmapReleasesWholeChunks) {
  // Expandable segments: 60 MiB mapped, then the middle 20 MiB unmapped. The chunks are cut where the
  // history maps or unmaps, so the unmap releases exactly 20 MiB: reserved never dips or bumps.
  constexpr uint64_t kMiB = 1 << 20;
  P snap = P::dict({{"segments", P::list({})},
                    {"device_traces", P::list({P::list({entry("segment_map", kSeg, 60 * kMiB, 1),
                                                        entry("segment_unmap", kSeg + 20 * kMiB, 20 * kMiB, 2)})})}});
  gpumemtrace::snapshot::ConvertStats stats;
  auto ev = event_lines(convert(snap.pickle(), &stats));
  int64_t reserved = 0, highest = 0;
  std::vector<int64_t> after;
  for (const std::string& e : ev) {
    if (e.find("\"kind\":\"physical\"") == std::string::npos) continue;
    const size_t at = e.find("\"size\":") + 7;
    const int64_t size = std::stoll(e.substr(at));
    if (e.find("\"op\":\"alloc\"") != std::string::npos) reserved += size;
    if (e.find("\"op\":\"free\"") != std::string::npos) reserved -= size;
    highest = std::max(highest, reserved);
    after.push_back(reserved);
  }
  EXPECT_EQ(highest, static_cast<int64_t>(60 * kMiB));
  EXPECT_EQ(after.back(), static_cast<int64_t>(40 * kMiB));
  for (int64_t r : after) EXPECT_TRUE(r == 20 * int64_t(kMiB) || r == 40 * int64_t(kMiB) || r == 60 * int64_t(kMiB)) << r;
}

TEST(SnapshotConvert, WrongShapesAreErrors) {
  gpumemtrace::snapshot::ConvertStats stats;
  EXPECT_NE(convert(P::num(3).pickle(), &stats, false).find("not a PyTorch memory snapshot"), std::string::npos);
  EXPECT_NE(convert(P::dict({{"x", P::num(1)}}).pickle(), &stats, false).find("without 'segments'"), std::string::npos);
  EXPECT_NE(convert(P::dict({{"segments", P::num(1)}}).pickle(), &stats, false).find("must be lists"), std::string::npos);
  EXPECT_NE(convert(P::dict({{"device_traces", P::list({P::num(1)})}}).pickle(), &stats, false).find("list of lists"),
            std::string::npos);
  EXPECT_NE(convert(P::dict({{"segments", P::list({P::num(1)})}}).pickle(), &stats, false).find("not a dict"), std::string::npos);
}

TEST(SnapshotConvert, StringsAreEscapedAndInvalidUtf8Replaced) {
  std::string bad_name = "f\"\\\n\xff\xc3\xa9";
  P fr = P::list({P::dict({{"name", P::str(bad_name)}, {"filename", P::str("x.py")}, {"line", P::num(1)}})});
  P snap = P::dict({{"segments", P::list({})},
                    {"device_traces", P::list({P::list({entry("segment_alloc", 0, 2 << 20, 1),
                                                        P::dict({{"action", P::str("alloc")}, {"addr", P::num(16)},
                                                                 {"size", P::num(8)}, {"frames", fr}})})})}});
  gpumemtrace::snapshot::ConvertStats stats;
  std::string trace = convert(snap.pickle(), &stats);
  // trace/json_line.h (the writer's builder) writes U+FFFD as its UTF-8 bytes, not as \ufffd.
  EXPECT_NE(trace.find("\"function\":\"f\\\"\\\\\\u000a\xef\xbf\xbd\xc3\xa9\""), std::string::npos) << trace;
}
