// bench/what_if_replay_bench.cpp — the allocator replay alone (report/allocator_model/replay.h): tensor
// events per second per setting, with the trace already parsed (what bench/what_if_bench.py's wall times
// cannot separate from reading on a loaded machine).
//
// Usage: what_if_replay_bench TRACE REPS [SETTINGS...]   ("" = the recorded run, checked)
// Prints one line per setting: "SETTINGS: median_s min_s max_s tensor_events events_per_s".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <set>
#include <string>
#include <vector>

#include "report/allocator_model/replay.h"
#include "report/reader/byte_source.h"
#include "report/reader/trace_reader.h"

using namespace gpumemtrace::report;

namespace {
// Keeps every event, with its strings copied (the reader's views die with each callback).
class Collect : public TraceHandler {
 public:
  void on_device(const DeviceInfo& info) override { devices.push_back(info); }
  void on_event(const Event& e) override {
    Event copy = e;
    copy.api = *strings.insert(std::string(e.api)).first;
    copy.label = std::string_view();
    copy.pool = std::string_view();
    if (e.op == Op::BlockAlloc || e.op == Op::BlockFree) ++tensor_events;
    events.push_back(copy);
  }
  std::vector<DeviceInfo> devices;
  std::vector<Event> events;
  std::set<std::string> strings;
  uint64_t tensor_events = 0;
};
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TRACE REPS [SETTINGS...]\n", argv[0]);
    return 2;
  }
  Collect collect;
  SymbolTable symbols;
  std::unique_ptr<ByteSource> source = open_byte_source(argv[1]);
  read_trace(*source, argv[1], symbols, collect);
  const int reps = std::max(1, std::atoi(argv[2]));
  std::vector<std::string> settings = {""};
  for (int i = 3; i < argc; ++i) settings.push_back(argv[i]);
  for (const std::string& setting : settings) {
    std::vector<double> seconds;
    bool faithful = true;
    for (int r = 0; r < reps; ++r) {
      allocator_model::AllocatorReplay replay(setting, "", setting.empty());
      const auto start = std::chrono::steady_clock::now();
      for (const DeviceInfo& d : collect.devices) replay.on_device(d);
      for (const Event& e : collect.events) replay.apply(e);
      std::vector<allocator_model::DeviceReplay> out = replay.finish();
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      for (const auto& d : out) faithful = faithful && !d.divergence;
    }
    std::sort(seconds.begin(), seconds.end());
    const double median = seconds[seconds.size() / 2];
    std::printf("%s: %.4f %.4f %.4f %llu %.0f%s\n", setting.empty() ? "recorded" : setting.c_str(), median,
                seconds.front(), seconds.back(), static_cast<unsigned long long>(collect.tensor_events),
                static_cast<double>(collect.tensor_events) / median,
                setting.empty() && !faithful ? " (diverged)" : "");
  }
  return 0;
}
