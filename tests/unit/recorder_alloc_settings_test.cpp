// tests/unit/recorder_alloc_settings_test.cpp — what an allocator settings text may carry into a trace
// (trace/alloc_conf.h: the allocator's own options only), the header's variables, and the
// "allocator_settings" record the serializer writes (standalone: the event lines' deltas go on).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "interpose/writer/serializer.h"
#include "trace/alloc_conf.h"
#include "trace/format.h"

namespace gpumemtrace {
namespace {

using nlohmann::json;

std::string kept(const std::string& text, size_t size = 1024) {
  std::vector<char> out(size);
  alloc_conf::sanitize(text, out.data(), out.size());
  return out.data();
}

TEST(AllocConf, KeepsTheAllocatorsOptionsOnly) {
  EXPECT_EQ(kept("expandable_segments:True"), "expandable_segments:True");
  // Spaces dropped as PyTorch's tokenizer drops them; lists kept whole.
  EXPECT_EQ(kept(" max_split_size_mb : 128 , roundup_power2_divisions:[64:8, 256:4,>:1]"),
            "max_split_size_mb:128,roundup_power2_divisions:[64:8,256:4,>:1]");
  // Another key, a value that is not a plain word, a malformed item: left out, the rest kept.
  EXPECT_EQ(kept("api_key:s3cr3t,expandable_segments:True,max_split_size_mb:12 8,backend"),
            "expandable_segments:True");
  EXPECT_EQ(kept("garbage_collection_threshold:0.6,per_process_memory_fraction:\"0.5\""),
            "garbage_collection_threshold:0.6");
  EXPECT_EQ(kept("roundup_power2_divisions:[64:8,$HOME:4]"), "");
  EXPECT_EQ(kept("expandable_segments:True:False,pinned_num_register_threads:8"), "pinned_num_register_threads:8");
  EXPECT_EQ(kept(""), "");
  EXPECT_EQ(kept(",,,"), "");
  // A value longer than any setting's.
  EXPECT_EQ(kept("backend:" + std::string(100, 'a')), "");
}

TEST(AllocConf, AnItemThatDoesNotFitIsLeftOutWhole) {
  EXPECT_EQ(kept("expandable_segments:True,max_split_size_mb:128", 30), "expandable_segments:True");
  EXPECT_EQ(kept("expandable_segments:True", 5), "");
}

TEST(AllocConf, HeaderTakesTheVariablesOfTheEnvironmentBlock) {
  using namespace std::string_literals;
  const std::string block = "PATH=/bin\0PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,token:x\0"
                            "MY_PYTORCH_ALLOC_CONF=max_split_size_mb:64\0"s;
  EXPECT_EQ(alloc_conf_from_environment(block, "PYTORCH_CUDA_ALLOC_CONF"), "expandable_segments:True");
  EXPECT_EQ(alloc_conf_from_environment(block, "PYTORCH_ALLOC_CONF"), "");  // a name that only ends like it
  EXPECT_EQ(alloc_conf_from_environment(block, "PYTORCH_HIP_ALLOC_CONF"), "");

  std::string out;
  TraceSerializer s(&out, /*symbolize=*/false);
  HeaderInfo info = current_process_header(64, false);
  info.pytorch_alloc_conf = "max_split_size_mb:64";
  info.pytorch_cuda_alloc_conf = "";
  s.header(info);
  const json header = json::parse(out.substr(0, out.find('\n')));
  EXPECT_EQ(header[format::kFieldEnvAllocConf], "max_split_size_mb:64");
  EXPECT_FALSE(header.contains(format::kFieldEnvCudaAllocConf));
}

EventRecord settings_record(uint64_t seq, uint64_t t, const char* source, const char* conf, int32_t device,
                            bool fraction, double value) {
  EventRecord r{};
  r.seq = seq;
  r.time_ns = t;
  r.tid = 9;
  r.op = format::Op::AllocatorSettings;
  r.kind = format::Kind::None;
  r.api = source;
  r.device = device;
  if (conf) {
    r.flags |= kHasLabel;
    snprintf(r.label, sizeof r.label, "%s", conf);
  }
  if (fraction) {
    r.flags |= kHasFraction;
    r.fraction = value;
  }
  return r;
}

TEST(AllocConf, SerializerWritesAStandaloneRecord) {
  std::string out;
  TraceSerializer s(&out, /*symbolize=*/false);
  EventRecord a{};
  a.seq = 1;
  a.time_ns = 1000;
  a.api = "cudaMalloc";
  a.op = format::Op::Alloc;
  a.addr = 0x7000;
  a.size = 64;
  s.event(a);
  s.allocator_settings(settings_record(2, 5000, format::kSettingsSourceInForce, "expandable_segments:True", -1, false, 0));
  s.allocator_settings(settings_record(3, 6000, format::kSettingsSourceMemoryFraction, nullptr, 0, true, 0.1));
  EventRecord b = a;
  b.seq = 4;
  b.time_ns = 1010;
  s.event(b);
  std::vector<json> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  ASSERT_EQ(lines.size(), 5u);  // site, event, two records, event
  EXPECT_EQ(lines[2], json::parse(R"({"type":"allocator_settings","seq":2,"t":5000,"tid":9,"source":"in_force",
                                       "device":-1,"conf":"expandable_segments:True"})"));
  EXPECT_EQ(lines[3]["fraction"].get<double>(), 0.1);  // the same double back
  EXPECT_EQ(lines[3]["device"], 0);
  EXPECT_FALSE(lines[3].contains("conf"));
  // The next event line: its delta and seq from the previous event line, as if the records were not there.
  EXPECT_EQ(lines[4]["t"], 10);
  EXPECT_EQ(lines[4]["q"], 4);
  EXPECT_EQ(s.events_written(), 2u);
}

}  // namespace
}  // namespace gpumemtrace
