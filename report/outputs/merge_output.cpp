// report/outputs/merge_output.cpp — the merged cross-rank view as text and JSON (merge_output.h).
#include "report/outputs/merge_output.h"

#include "report/outputs/units.h"

namespace gpumemtrace::report {

namespace {

using nlohmann::json;

// "rank 37 (node4, pid 20037)", or "pid 20037 (node4)" for a process without a rank.
std::string who(const RankRef& r) {
  const std::string where = r.host.empty() ? "" : r.host + ", ";
  return r.rank >= 0 ? "rank " + std::to_string(r.rank) + " (" + where + "pid " + std::to_string(r.pid) + ")"
                     : "pid " + std::to_string(r.pid) + (r.host.empty() ? "" : " (" + r.host + ")");
}

std::string plural(size_t n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : word.back() == 's' ? "es" : "s");
}

json who_json(const RankRef& r, const std::vector<RankSummary>& summaries) {
  return {{"rank", r.rank >= 0 ? json(r.rank) : json(nullptr)}, {"host", r.host}, {"pid", r.pid},
          {"file", summaries[r.index].file}, {"report", summaries[r.index].report}};
}

}  // namespace

void write_merge_text(std::ostream& out, const MergedRanks& m, const std::vector<RankSummary>& summaries,
                      const std::vector<std::string>& warnings, size_t top, const StackViewOptions& stacks) {
  out << "== " << plural(m.processes, "process") << " merged from their reports: " << plural(m.ranks, "rank") << " on "
      << plural(m.hosts, "host") << "\n";
  // How unevenly the ranks peak: the highest against the median says whether one rank is the outlier.
  out << "peaks: highest " << format_bytes(m.peak_max.bytes) << " on " << who(m.peak_max) << ", median "
      << format_bytes(m.peak_median) << ", mean " << format_bytes(static_cast<uint64_t>(m.peak_mean)) << ", lowest "
      << format_bytes(m.peak_min.bytes) << " on " << who(m.peak_min);
  if (m.peak_median && m.peak_max.bytes > m.peak_median) {
    out << "; the highest is " << ratio_text(static_cast<double>(m.peak_max.bytes) / static_cast<double>(m.peak_median))
        << "x the median";
  }
  out << "\n";
  for (size_t i = 0; i < std::min(top, m.highest.size()); ++i) {
    const RankRef& r = m.highest[i];
    out << "  " << padded(format_bytes(r.bytes), 12) << who(r) << ", device " << summaries[r.index].peak_device << "\n";
  }
  if (m.ooms.empty()) {
    out << "OOMs: none\n";
  } else {
    const MergedRanks::OomAt& first = m.ooms.front();
    out << "OOMs: " << plural(m.ooms.size(), "OOM") << " on " << plural(m.processes_with_ooms, "process")
        << "; the first on " << who(first.process) << " at " << format_utc(first.oom.wall_ns) << "\n";
    for (size_t i = 0; i < std::min(top, m.ooms.size()); ++i) {
      const MergedRanks::OomAt& o = m.ooms[i];
      out << "  " << (i == 0 ? std::string("first") : "+" + format_seconds(o.oom.wall_ns - first.oom.wall_ns)) << ": "
          << who(o.process) << ", device " << o.oom.device << ", " << format_bytes(o.oom.requested) << " requested"
          << (o.oom.explanation.empty() ? "" : ": " + o.oom.explanation) << ", here:\n";
      for (const std::string& line : stack_lines(o.oom.stack, stacks, 6)) out << "      " << line << "\n";
    }
  }
  size_t everywhere = 0;
  for (const MergedRanks::LeakSite& l : m.leaks) everywhere += l.processes == m.processes;
  out << "leaks: " << plural(m.leaks.size(), "site") << ", " << everywhere << " of them on every process\n";
  for (size_t i = 0; i < std::min(top, m.leaks.size()); ++i) {
    const MergedRanks::LeakSite& l = m.leaks[i];
    out << "  " << format_bytes(l.bytes) << " on "
        << (l.processes == m.processes ? "every process" : std::to_string(l.processes) + " of " + std::to_string(m.processes))
        << " (" << (l.min_bytes == l.max_bytes ? format_bytes(l.min_bytes) + " each"
                                               : format_bytes(l.min_bytes) + " to " + format_bytes(l.max_bytes))
        << "), allocated here:\n";
    for (const std::string& line : stack_lines(l.stack, stacks, 6)) out << "      " << line << "\n";
  }
  for (const std::string& w : warnings) out << "warning: " << w << "\n";
}

json merge_to_json(const MergedRanks& m, const std::vector<RankSummary>& summaries,
                   const std::vector<std::string>& warnings) {
  json highest = json::array();
  for (const RankRef& r : m.highest) {
    json entry = who_json(r, summaries);
    entry["peak_bytes"] = r.bytes;
    entry["device"] = summaries[r.index].peak_device;
    entry["leaked_bytes"] = summaries[r.index].leaked_bytes;
    highest.push_back(std::move(entry));
  }
  json ooms = json::array();
  for (const MergedRanks::OomAt& o : m.ooms) {
    json entry = who_json(o.process, summaries);
    entry.update({{"device", o.oom.device}, {"wall_time_ns", o.oom.wall_ns}, {"requested", o.oom.requested},
                  {"site", o.oom.site}, {"explanation", o.oom.explanation}});
    ooms.push_back(std::move(entry));
  }
  json leaks = json::array();
  for (const MergedRanks::LeakSite& l : m.leaks) {
    leaks.push_back({{"site", l.site}, {"processes", l.processes}, {"every_process", l.processes == m.processes},
                     {"bytes", l.bytes}, {"min_bytes", l.min_bytes}, {"max_bytes", l.max_bytes}});
  }
  auto extreme = [&](const RankRef& r) {
    json entry = who_json(r, summaries);
    entry["bytes"] = r.bytes;
    return entry;
  };
  return {{"processes", m.processes}, {"ranks", m.ranks}, {"hosts", m.hosts},
          {"peak", {{"max", extreme(m.peak_max)}, {"min", extreme(m.peak_min)}, {"median_bytes", m.peak_median},
                    {"mean_bytes", m.peak_mean}}},
          {"processes_by_peak", highest}, {"ooms", ooms}, {"processes_with_ooms", m.processes_with_ooms},
          {"leaks", leaks}, {"warnings", warnings}};
}

}  // namespace gpumemtrace::report
