// report/outputs/top_sites_output.cpp — see top_sites_output.h.
#include "report/outputs/top_sites_output.h"

#include "report/outputs/json_output.h"
#include "report/outputs/units.h"

namespace gpumemtrace::report {
namespace {

nlohmann::json site_list(const std::vector<SiteTotals>& sites) {
  nlohmann::json out = nlohmann::json::array();
  for (const SiteTotals& s : sites) {
    out.push_back({{"bytes", s.bytes}, {"count", s.count}, {"temporary_bytes", s.temporary_bytes},
                   {"temporary_count", s.temporary_count}, {"peak_bytes", s.peak_bytes},
                   {"stack", stack_to_json(s.stack)}});
  }
  return out;
}

std::string count_of(uint64_t n, const char* word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); }

const char* level_words(Level level) { return level == Level::Block ? "blocks" : "CUDA level"; }

}  // namespace

void append_top_sites_json(const ProcessReport& r, const nlohmann::json& who, nlohmann::json& out) {
  for (const TopSitesReport& t : r.top_sites) {
    nlohmann::json entry = who;
    entry.update({{"device", t.device}, {"level", level_name(t.level)}, {"sites", t.sites},
                  {"temporary_ns", t.temporary_ns}, {"at_peak", site_list(t.by_peak)},
                  {"by_bytes", site_list(t.by_bytes)}, {"by_count", site_list(t.by_count)},
                  {"temporary", site_list(t.by_temporary)}});
    out.push_back(std::move(entry));
  }
}

void write_top_sites(std::ostream& out, const ProcessReport& r, const TextOptions& options) {
  for (const TopSitesReport& t : r.top_sites) {
    out << "top sites (device " << t.device << ", " << level_words(t.level) << "): " << count_of(t.sites, "call site")
        << "; temporary = freed within " << format_seconds(t.temporary_ns) << "\n";
    auto ranking = [&](const char* title, const std::vector<SiteTotals>& sites, auto line) {
      out << "  " << title << ":" << (sites.empty() || options.max_items == 0 ? " none" : "") << "\n";
      for (size_t i = 0; i < sites.size() && i < options.max_items; ++i) {
        out << "    " << line(sites[i]) << ":\n";
        write_stack(out, sites[i].stack, "        ", options.stacks);
      }
    };
    auto totals = [](const SiteTotals& s) {
      return format_bytes(s.bytes) + " allocated in " + count_of(s.count, "allocation");
    };
    ranking("by bytes at the peak", t.by_peak,
            [&](const SiteTotals& s) { return format_bytes(s.peak_bytes) + " at the peak; " + totals(s); });
    ranking("by total bytes allocated", t.by_bytes, totals);
    ranking("by number of allocations", t.by_count, [&](const SiteTotals& s) {
      return count_of(s.count, "allocation") + " (" + format_bytes(s.bytes) + ")";
    });
    ranking("temporary allocations", t.by_temporary, [&](const SiteTotals& s) {
      return std::to_string(s.temporary_count) + " of " + count_of(s.count, "allocation") + " temporary (" +
             format_bytes(s.temporary_bytes) + ")";
    });
  }
}

}  // namespace gpumemtrace::report
