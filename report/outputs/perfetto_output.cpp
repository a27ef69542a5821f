// report/outputs/perfetto_output.cpp — builds the Trace Event Format document from the report model.
#include "report/outputs/perfetto_output.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

namespace gpumemtrace::report {
using nlohmann::json;

namespace {

// Thread ids inside each process's track group: marks and phases on one, scopes on one, each device
// on its own, and two per thread with NVTX ranges (push/pop ranges nest; start/end ranges may not).
constexpr int64_t kPhaseTid = 0;
constexpr int64_t kScopeTid = 1000000;  // above any device ordinal
constexpr int64_t kNvtxTid = 2000000;   // + 2 * (the thread's rank of first appearance) [+ 1]
int64_t device_tid(int32_t device) { return 1 + static_cast<int64_t>(device < 0 ? 0 : device); }

// The trace's clock is in nanoseconds; the format wants microseconds (fractions allowed).
double micros(uint64_t time_ns) { return static_cast<double>(time_ns) / 1000.0; }

std::string device_label(int32_t device) { return "GPU " + std::to_string(device); }

json metadata(const char* name, int64_t pid, int64_t tid, const std::string& value) {
  return {{"name", name}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", value}}}};
}

void add_nvtx_ranges(const ProcessReport& r, int64_t pid, json& meta, std::vector<json>& events) {
  std::map<uint64_t, int64_t> track_of;  // OS thread id -> its push/pop track
  std::set<int64_t> named;
  for (const NvtxRange& range : r.nvtx_ranges) {
    const int64_t first = track_of.emplace(range.tid, kNvtxTid + 2 * static_cast<int64_t>(track_of.size()))
                              .first->second;
    const int64_t track = first + (range.range ? 1 : 0);
    if (named.insert(track).second) {
      meta.push_back(metadata("thread_name", pid, track,
                              std::string(range.range ? "NVTX start/end ranges" : "NVTX ranges") + ", thread " +
                                  std::to_string(range.tid)));
    }
    json args = {{"thread", range.tid}, {"closed", range.closed}};
    if (range.range) args["range"] = range.range;
    events.push_back({{"name", range.name}, {"ph", "X"}, {"ts", micros(range.begin_time_ns)},
                      {"dur", micros(range.end_time_ns - range.begin_time_ns)}, {"pid", pid},
                      {"tid", track}, {"cat", "nvtx"}, {"args", std::move(args)}});
  }
}

void add_process(const ProcessReport& r, int64_t pid, json& meta, std::vector<json>& events) {
  std::string exe = r.header.exe.empty() ? r.file : r.header.exe;
  meta.push_back(metadata("process_name", pid, kPhaseTid, exe.substr(exe.rfind('/') + 1) + " (pid " +
                                                          std::to_string(r.header.pid) + ")"));
  meta.push_back(metadata("thread_name", pid, kPhaseTid, "phases and marks"));
  for (const DeviceSummary& d : r.devices) {
    const int64_t tid = device_tid(d.device);
    meta.push_back(metadata("thread_name", pid, tid, device_label(d.device) + (d.name.empty() ? "" : " " + d.name)));
    const std::string counter = device_label(d.device) + " memory";
    for (const TimelineSample& s : d.timeline) {
      events.push_back({{"name", counter}, {"ph", "C"}, {"ts", micros(s.time_ns)}, {"pid", pid}, {"tid", tid},
                        {"args", {{"reserved", s.reserved}, {"allocated", s.allocated}}}});
      if (!s.has_roles) continue;
      json roles = json::object();  // one counter track per device: reserved bytes by role
      for (size_t i = 0; i < kRoles; ++i) roles[role_name(static_cast<Role>(i))] = s.roles.bytes[i];
      events.push_back({{"name", counter + " by role"}, {"ph", "C"}, {"ts", micros(s.time_ns)}, {"pid", pid},
                        {"tid", tid}, {"args", std::move(roles)}});
    }
  }
  for (const OomReport& oom : r.ooms) {
    std::string name = "OOM: " + std::string(verdict_name(oom.verdict)) + " (" + oom.api + ")";
    events.push_back({{"name", name}, {"ph", "i"}, {"s", "t"}, {"ts", micros(oom.time_ns)}, {"pid", pid},
                      {"tid", device_tid(oom.device)},
                      {"args", {{"requested", oom.requested}, {"live_bytes", oom.live_bytes},
                                {"allocated_bytes", oom.allocated_bytes}, {"verdict", verdict_name(oom.verdict)},
                                {"phase", oom.phase}, {"seq", oom.seq}}}});
  }
  for (const FailedCall& call : r.failed_calls) {
    events.push_back({{"name", "failed " + call.api + " (" + call.error + ")"}, {"ph", "i"}, {"s", "t"},
                      {"ts", micros(call.first_time_ns)}, {"pid", pid}, {"tid", device_tid(call.device)},
                      {"args", {{"size", call.size}, {"count", call.count}, {"result", call.result}}}});
  }
  if (!r.scopes.empty()) meta.push_back(metadata("thread_name", pid, kScopeTid, "scopes"));
  for (const ScopeReport& scope : r.scopes) {
    events.push_back({{"name", scope.name}, {"ph", "X"}, {"ts", micros(scope.begin_time_ns)},
                      {"dur", micros(scope.end_time_ns - std::min(scope.end_time_ns, scope.begin_time_ns))},
                      {"pid", pid}, {"tid", kScopeTid}, {"cat", "scope"},
                      {"args", {{"leaked_bytes", scope.leaked_bytes}, {"api", scope.api}}}});
  }
  add_nvtx_ranges(r, pid, meta, events);
  for (size_t i = 0; i < r.marks.size(); ++i) {
    const Mark& mark = r.marks[i];
    events.push_back({{"name", mark.label}, {"ph", "i"}, {"s", "p"}, {"ts", micros(mark.time_ns)}, {"pid", pid},
                      {"tid", kPhaseTid}, {"args", {{"seq", mark.seq}}}});
    // A phase runs from its mark to the next one (or to the end of the trace), as the analyses
    // attribute peaks and OOMs to "the last mark before".
    const uint64_t end = i + 1 < r.marks.size() ? r.marks[i + 1].time_ns : std::max(r.last_time_ns, mark.time_ns);
    events.push_back({{"name", mark.label}, {"ph", "X"}, {"ts", micros(mark.time_ns)},
                      {"dur", micros(end - mark.time_ns)}, {"pid", pid}, {"tid", kPhaseTid}, {"cat", "phase"}});
  }
}

}  // namespace

json perfetto_trace(const std::vector<ProcessReport>& reports) {
  json meta = json::array();
  std::vector<json> events;
  for (size_t i = 0; i < reports.size(); ++i) {
    // Two traces of one pid (reruns, other hosts) must not share a track group.
    int64_t pid = reports[i].header.pid;
    for (size_t j = 0; j < i; ++j) {
      if (reports[j].header.pid == reports[i].header.pid) pid = 1000000000 + static_cast<int64_t>(i);
    }
    add_process(reports[i], pid, meta, events);
  }
  std::stable_sort(events.begin(), events.end(), [](const json& a, const json& b) {
    return a["ts"].get<double>() < b["ts"].get<double>();
  });
  for (json& e : events) meta.push_back(std::move(e));
  return {{"traceEvents", std::move(meta)},
          {"displayTimeUnit", "ms"},
          {"otherData", {{"generator", "gpumem-report"},
                         {"clock", "the traced process's monotonic clock, in microseconds"},
                         {"counters", "downsampled: the report keeps a bounded timeline per device"}}}};
}

}  // namespace gpumemtrace::report
