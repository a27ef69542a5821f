// report/cli/merge_inputs.cpp — the JSON reports `merge` reads (merge_inputs.h).
#include "report/cli/merge_inputs.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "report/outputs/site_line.h"
#include "util/ends_with.h"

namespace gpumemtrace::report {

namespace {

using nlohmann::json;

// A report's JSON stack as the frames it was written from (json_output.cpp, stack_to_json).
Stack stack_of(const json& frames) {
  Stack stack;
  for (const json& f : frames) {
    LogicalFrame frame;
    frame.function = f.value("function", "");
    frame.file = f.value("file", "");
    frame.line = f.value("line", 0u);
    frame.module = f.value("module", "");
    frame.inlined = f.value("inlined", false);
    frame.python = f.value("lang", "") == "python";
    stack.push_back(std::move(frame));
  }
  return stack;
}

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

// The processes of one report. Throws json errors (the caller names the file).
void read_report(const std::string& path, const json& doc, MergeInputs& out) {
  if (!doc.is_object() || !doc.contains("processes") || !doc.contains("summary") || !doc["processes"].is_array()) {
    throw std::runtime_error("not a gpumem-report JSON report (no \"processes\" and \"summary\"; merge reads "
                             "--format json reports of traces, not diffs or traces)");
  }
  std::map<std::pair<std::string, int64_t>, size_t> by_trace;  // (file, pid) -> its summary
  std::vector<std::pair<uint64_t, uint64_t>> clocks;           // by summary: start_time_ns, clock_start_ns
  for (const json& p : doc.at("processes")) {
    RankSummary s;
    s.report = path;
    s.file = p.at("file").get<std::string>();
    s.host = p.value("host", "");
    s.rank = p.at("rank").is_null() ? -1 : p.at("rank").get<int64_t>();
    s.pid = p.at("pid").get<int64_t>();
    s.leaked_bytes = p.at("leaked_bytes").get<uint64_t>();
    s.ended_in_oom = p.value("ended_in_oom", false);
    for (const json& d : p.at("devices")) {
      const uint64_t peak = d.at("peak_bytes").get<uint64_t>();
      if (s.peak_device < 0 || peak > s.peak_bytes) {
        s.peak_bytes = peak;
        s.peak_device = d.at("device").get<int32_t>();
      }
    }
    by_trace[{s.file, s.pid}] = out.processes.size();
    out.processes.push_back(std::move(s));
    clocks.resize(out.processes.size());
    clocks.back() = {p.value("start_time_ns", uint64_t{0}), p.value("clock_start_ns", uint64_t{0})};
  }
  auto owner = [&](const json& entry) -> size_t {
    auto it = by_trace.find({entry.at("file").get<std::string>(), entry.at("pid").get<int64_t>()});
    if (it == by_trace.end()) throw std::runtime_error("an entry names a process the report does not list");
    return it->second;
  };
  for (const json& o : doc.at("ooms")) {
    const size_t i = owner(o);
    const auto [start, clock] = clocks[i];
    const uint64_t t = o.at("time_ns").get<uint64_t>();
    RankSummary::Oom oom;
    oom.device = o.at("device").get<int32_t>();
    oom.wall_ns = start + (t >= clock ? t - clock : 0);
    oom.requested = o.at("requested").get<uint64_t>();
    oom.stack = stack_of(o.at("stack"));
    oom.site = site_line(oom.stack);
    oom.explanation = o.value("explanation", "");
    out.processes[i].ooms.push_back(std::move(oom));
  }
  for (const json& l : doc.at("leaks")) {
    // Not leaks: suppressed ones, and what a cut, killed or crashed process still held.
    if (l.value("suppressed", false) || l.value("live_when_cut", false) || l.value("live_when_killed", false) ||
        l.value("live_when_crashed", false)) {
      continue;
    }
    RankSummary& s = out.processes[owner(l)];
    Stack stack = stack_of(l.at("stack"));
    const std::string site = site_line(stack);
    auto same = std::find_if(s.leaks.begin(), s.leaks.end(), [&](const RankSummary::Leak& k) { return k.site == site; });
    if (same == s.leaks.end()) same = s.leaks.insert(s.leaks.end(), RankSummary::Leak{site, std::move(stack), 0, 0});
    same->bytes += l.at("bytes").get<uint64_t>();
    same->count += l.at("count").get<uint64_t>();
  }
  if (doc.contains("process_groups")) {
    const uint64_t summed = doc["process_groups"].at("processes").get<uint64_t>();
    out.warnings.push_back(path + ": " + std::to_string(summed) +
                           " processes were summed in groups by that report (a run of many processes): they "
                           "are in no figure here; report each process on its own (--report-per-process)");
  }
}

}  // namespace

MergeInputs read_merge_inputs(const std::vector<std::string>& args) {
  MergeInputs out;
  for (const std::string& arg : args) {
    for (const std::string& path : expand(arg)) {
      std::ifstream in(path, std::ios::binary);
      if (!in) throw std::runtime_error(path + ": cannot read");
      try {
        read_report(path, json::parse(in), out);
      } catch (const json::exception& error) {
        // nlohmann's messages begin "[json.exception.parse_error.101] ": the part after it is the news.
        std::string what = error.what();
        const size_t bracket = what.find("] ");
        throw std::runtime_error(path + ": not a gpumem-report JSON report: " +
                                 (bracket == std::string::npos ? what : what.substr(bracket + 2)));
      } catch (const std::runtime_error& error) {
        throw std::runtime_error(path + ": " + error.what());
      }
    }
  }
  if (out.processes.empty()) throw std::runtime_error("no process in the reports given");
  return out;
}

}  // namespace gpumemtrace::report
