// tests/unit/recorder_format_limits_test.cpp — the writer never writes what its reader refuses
// (trace/format.h, "limits"; interpose/writer/format_limits.h): strings cut at 4 KiB with a mark,
// values past the format's range clamped with the exact value beside them, the header's command line
// bounded. Every line here is valid JSON within the line limit; tests/e2e/test_extreme_args.py reads
// whole traces written at the extremes back with gpumem-report.
#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "interpose/writer/serializer.h"
#include "trace/format.h"
#include "trace/json_line.h"

namespace gpumemtrace {
namespace {

using nlohmann::json;

std::vector<json> lines_of(const std::string& text) {
  std::vector<json> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    EXPECT_LE(line.size(), format::kMaxLineBytes);
    out.push_back(json::parse(line));  // throws on invalid JSON
  }
  return out;
}

// The one event line (not a site) of `text`.
json event_line(const std::string& text) {
  for (const json& l : lines_of(text))
    if (!l.contains("type")) return l;
  ADD_FAILURE() << "no event line in " << text;
  return json();
}

json site_line(const std::string& text) {
  for (const json& l : lines_of(text))
    if (l.contains("type") && l["type"] == "site") return l;
  ADD_FAILURE() << "no site line in " << text;
  return json();
}

EventRecord record(format::Op op, format::Kind kind, uint64_t addr, uint64_t size, int32_t device = 0) {
  EventRecord r{};
  r.seq = 1;
  r.time_ns = 1000;
  r.tid = 7;
  r.op = op;
  r.kind = kind;
  r.api = "cudaMalloc";
  r.addr = addr;
  r.size = size;
  r.device = device;
  return r;
}

std::string written(std::string text) {
  std::string out;
  JsonLine::append_string(&out, text.c_str());
  return json::parse(out).get<std::string>();
}

TEST(FormatLimits, LongStringsAreCutAndMarked) {
  EXPECT_EQ(written(std::string(format::kMaxStringBytes, 'a')), std::string(format::kMaxStringBytes, 'a'));
  const std::string cut = written(std::string(format::kMaxStringBytes + 1, 'a'));
  EXPECT_EQ(cut.size(), format::kMaxStringBytes);
  EXPECT_EQ(cut.substr(cut.size() - 8), format::kCutMark);
  // Never inside a character: "é" is 2 bytes, "€" 3.
  std::string multibyte;
  while (multibyte.size() < 3 * format::kMaxStringBytes) multibyte += "\xc3\xa9\xe2\x82\xac";
  const std::string cut_utf8 = written(multibyte);
  EXPECT_LE(cut_utf8.size(), format::kMaxStringBytes);
  EXPECT_EQ(cut_utf8.substr(cut_utf8.size() - 8), format::kCutMark);
  // Invalid bytes become U+FFFD (3 bytes each): counted as written, so the limit still holds.
  const std::string invalid = written(std::string(2000, '\xff'));
  EXPECT_LE(invalid.size(), format::kMaxStringBytes);
  EXPECT_EQ(invalid.substr(invalid.size() - 8), format::kCutMark);
}

TEST(FormatLimits, FailedRequestOfSizeMaxIsClampedAndKeptExactly) {
  std::string out;
  TraceSerializer s(&out, /*symbolize=*/false);
  EventRecord r = record(format::Op::Alloc, format::Kind::Device, 0, UINT64_MAX);
  r.flags = kHasResult;
  r.result = 2;
  s.event(r);
  const json e = event_line(out);
  EXPECT_EQ(e["s"], format::kMaxInteger);
  EXPECT_EQ(e["size_exact"], "18446744073709551615");
}

TEST(FormatLimits, RangePastTheEndOfMemoryIsClamped) {
  std::string out;
  TraceSerializer s(&out, false);
  s.event(record(format::Op::BlockAlloc, format::Kind::Block, UINT64_MAX - 4095, 1 << 20));
  const json e = event_line(out);
  EXPECT_EQ(e["s"], 4095);  // addr + size = 2^64 - 1
  EXPECT_EQ(e["size_exact"], "1048576");
}

TEST(FormatLimits, OverflowedProductIsOutOfRange) {
  std::string out;
  TraceSerializer s(&out, false);
  EventRecord r = record(format::Op::Alloc, format::Kind::Device, 0, UINT64_MAX);
  r.flags = kHasResult | kSizeOverflow;
  r.result = 2;
  s.event(r);
  EXPECT_EQ(event_line(out)["size_exact"], format::kOutOfRange);
}

TEST(FormatLimits, DeviceBelowMinusOneIsUnknownAndKept) {
  std::string out;
  TraceSerializer s(&out, false);
  s.event(record(format::Op::BlockOom, format::Kind::Block, 0, 4096, -7));
  EXPECT_EQ(site_line(out)["device"], -1);
  EXPECT_EQ(event_line(out)["device_exact"], "-7");
}

TEST(FormatLimits, MeminfoAndDeviceRecordsAreClamped) {
  std::string out;
  TraceSerializer s(&out, false);
  EventRecord m = record(format::Op::MemInfo, format::Kind::None, 0, 0);
  m.flags = kHasMemInfo;
  m.free_bytes = UINT64_MAX;
  m.total_bytes = 1 << 30;
  s.event(m);
  s.device(0, "gpu", UINT64_MAX, 5);
  const std::vector<json> lines = lines_of(out);
  const json& event = lines[1];
  EXPECT_EQ(event["free"], format::kMaxInteger);
  EXPECT_EQ(event["free_exact"], "18446744073709551615");
  EXPECT_EQ(event["total"], 1 << 30);
  EXPECT_FALSE(event.contains("total_exact"));
  EXPECT_EQ(lines[2]["total"], format::kMaxInteger);
  EXPECT_EQ(lines[2]["total_exact"], "18446744073709551615");
}

TEST(FormatLimits, CommandLineIsBounded) {
  std::string out;
  TraceSerializer s(&out, false);
  HeaderInfo h;
  for (int i = 0; i < 1000; ++i) h.cmdline.push_back(std::string(5000, 'x'));
  s.header(h);
  const json header = lines_of(out).front();
  ASSERT_EQ(header["cmdline"].size(), static_cast<size_t>(format::kMaxCmdlineArgs) + 1);
  EXPECT_EQ(header["cmdline"].back(), "...[936 more arguments cut]");
  EXPECT_EQ(header["cmdline"][0].get<std::string>().size(), format::kMaxStringBytes);
}

}  // namespace
}  // namespace gpumemtrace
