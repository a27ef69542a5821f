// report/cli/merge_inputs.cpp — the JSON reports `merge` reads (merge_inputs.h).
#include "report/cli/merge_inputs.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include "report/outputs/json_output.h"
#include "report/outputs/site_line.h"
#include "util/ends_with.h"

namespace gpumemtrace::report {

namespace {

namespace dom = simdjson::dom;

// The reports a path names: itself, or a directory's *.report.json files.
std::vector<std::string> expand(const std::string& arg) {
  std::error_code error;
  if (!std::filesystem::is_directory(arg, error)) return {arg};
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(arg, error)) {
    const std::string name = entry.path().filename().string();
    if (util::ends_with(name, ".report.json") && entry.is_regular_file(error)) files.push_back(entry.path().string());
  }
  if (error) throw std::runtime_error(arg + ": cannot list the folder: " + error.message());
  if (files.empty()) throw std::runtime_error(arg + ": no *.report.json file in this folder");
  std::sort(files.begin(), files.end());
  return files;
}

// Fields of a report's JSON (simdjson's DOM: a report of a few hundred KB is parsed at over 1 GB/s,
// the speed that makes thousands of them a matter of seconds). Each throws simdjson_error for a
// missing key or a value of another type; the caller names the file.
std::string text_of(dom::element e) { return e.is_null() ? std::string() : std::string(std::string_view(e)); }
bool flag_of(dom::object o, const char* key) {
  bool value = false;
  return o[key].get(value) == simdjson::SUCCESS && value;
}
uint64_t number_or_0(dom::object o, const char* key) {
  uint64_t value = 0;
  return o[key].get(value) == simdjson::SUCCESS ? value : 0;
}
// A stack: small, and read by stack_from_json (json_output.h) as the report's other readers do.
Stack stack_of(dom::element frames) { return stack_from_json(nlohmann::json::parse(simdjson::to_string(frames))); }

// The processes of one report. Throws std::runtime_error and simdjson_error (the caller names the file).
void read_report(const std::string& path, dom::element doc, MergeInputs& out) {
  dom::object root;
  dom::array processes;
  if (doc.get(root) != simdjson::SUCCESS || root["processes"].get(processes) != simdjson::SUCCESS ||
      root["summary"].error() != simdjson::SUCCESS) {
    throw std::runtime_error("not a gpumem-report JSON report (no \"processes\" and \"summary\"; merge reads "
                             "--format json reports of traces, not diffs or traces)");
  }
  std::map<std::pair<std::string, int64_t>, size_t> by_trace;  // (file, pid) -> its summary
  std::vector<std::pair<uint64_t, uint64_t>> clocks;           // by summary: start_time_ns, clock_start_ns
  for (dom::object p : processes) {
    RankSummary s;
    s.report = path;
    s.file = text_of(p["file"]);
    s.host = text_of(p["host"]);
    s.rank = p["rank"].is_null() ? -1 : int64_t(p["rank"]);
    s.pid = int64_t(p["pid"]);
    s.leaked_bytes = uint64_t(p["leaked_bytes"]);
    s.ended_in_oom = flag_of(p, "ended_in_oom");
    for (dom::object d : dom::array(p["devices"])) {
      const uint64_t peak = uint64_t(d["peak_bytes"]);
      if (s.peak_device < 0 || peak > s.peak_bytes) {
        s.peak_bytes = peak;
        s.peak_device = static_cast<int32_t>(int64_t(d["device"]));
      }
    }
    by_trace[{s.file, s.pid}] = out.processes.size();
    out.processes.push_back(std::move(s));
    clocks.resize(out.processes.size());
    clocks.back() = {number_or_0(p, "start_time_ns"), number_or_0(p, "clock_start_ns")};
  }
  auto owner = [&](dom::object entry) -> size_t {
    auto it = by_trace.find({text_of(entry["file"]), int64_t(entry["pid"])});
    if (it == by_trace.end()) throw std::runtime_error("an entry names a process the report does not list");
    return it->second;
  };
  for (dom::object o : dom::array(root["ooms"])) {
    const size_t i = owner(o);
    const auto [start, clock] = clocks[i];
    const uint64_t t = uint64_t(o["time_ns"]);
    RankSummary::Oom oom;
    oom.device = static_cast<int32_t>(int64_t(o["device"]));
    oom.wall_ns = start + (t >= clock ? t - clock : 0);
    oom.requested = uint64_t(o["requested"]);
    oom.stack = stack_of(o["stack"]);
    oom.site = site_line(oom.stack);
    oom.explanation = text_of(o["explanation"]);
    out.processes[i].ooms.push_back(std::move(oom));
  }
  for (dom::object l : dom::array(root["leaks"])) {
    // Not leaks: suppressed ones, and what a cut, killed or crashed process still held.
    if (flag_of(l, "suppressed") || flag_of(l, "live_when_cut") || flag_of(l, "live_when_killed") ||
        flag_of(l, "live_when_crashed")) {
      continue;
    }
    RankSummary& s = out.processes[owner(l)];
    Stack stack = stack_of(l["stack"]);
    const std::string site = site_line(stack);
    auto same = std::find_if(s.leaks.begin(), s.leaks.end(), [&](const RankSummary::Leak& k) { return k.site == site; });
    if (same == s.leaks.end()) same = s.leaks.insert(s.leaks.end(), RankSummary::Leak{site, std::move(stack), 0, 0});
    same->bytes += uint64_t(l["bytes"]);
    same->count += uint64_t(l["count"]);
  }
  dom::object groups;
  if (root["process_groups"].get(groups) == simdjson::SUCCESS) {
    out.warnings.push_back(path + ": " + std::to_string(uint64_t(groups["processes"])) +
                           " processes were summed in groups by that report (a run of many processes): they "
                           "are in no figure here; report each process on its own (--report-per-process)");
  }
}

}  // namespace

MergeInputs read_merge_inputs(const std::vector<std::string>& args) {
  MergeInputs out;
  dom::parser parser;  // reused: its buffers grow to the largest report, once
  for (const std::string& arg : args) {
    for (const std::string& path : expand(arg)) {
      dom::element doc;
      const simdjson::error_code loaded = parser.load(path).get(doc);
      if (loaded == simdjson::IO_ERROR) throw std::runtime_error(path + ": cannot read");
      try {
        if (loaded != simdjson::SUCCESS) throw simdjson::simdjson_error(loaded);
        read_report(path, doc, out);
      } catch (const simdjson::simdjson_error& error) {
        throw std::runtime_error(path + ": not a gpumem-report JSON report: " + error.what());
      } catch (const nlohmann::json::exception& error) {
        throw std::runtime_error(path + ": not a gpumem-report JSON report: a stack: " + error.what());
      } catch (const std::runtime_error& error) {
        throw std::runtime_error(path + ": " + error.what());
      }
    }
  }
  if (out.processes.empty()) throw std::runtime_error("no process in the reports given");
  return out;
}

}  // namespace gpumemtrace::report
