// report/analyses/rank_merge.cpp — the cross-rank view of per-process summaries (rank_merge.h).
#include "report/analyses/rank_merge.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

namespace gpumemtrace::report {

namespace {

RankRef ref_of(const std::vector<RankSummary>& summaries, size_t i, uint64_t bytes) {
  const RankSummary& s = summaries[i];
  return RankRef{i, s.rank, s.pid, s.host, bytes};
}

}  // namespace

MergedRanks merge_ranks(const std::vector<RankSummary>& summaries) {
  MergedRanks out;
  out.processes = summaries.size();
  if (summaries.empty()) return out;
  std::set<int64_t> ranks;
  std::set<std::string> hosts;
  uint64_t sum = 0;
  for (size_t i = 0; i < summaries.size(); ++i) {
    const RankSummary& s = summaries[i];
    if (s.rank >= 0) ranks.insert(s.rank);
    hosts.insert(s.host);
    sum += s.peak_bytes;
    out.highest.push_back(ref_of(summaries, i, s.peak_bytes));
  }
  out.ranks = ranks.size();
  out.hosts = hosts.size();
  out.peak_mean = static_cast<double>(sum) / static_cast<double>(summaries.size());
  // Highest first; among equals, input order (deterministic whatever order the files were given in
  // is the caller's: it sorts them).
  std::stable_sort(out.highest.begin(), out.highest.end(),
                   [](const RankRef& a, const RankRef& b) { return a.bytes > b.bytes; });
  out.peak_max = out.highest.front();
  // The lowest: the last of the sorted list, the first in input order among equals.
  out.peak_min = out.highest.back();
  for (const RankRef& r : out.highest)
    if (r.bytes == out.peak_min.bytes && r.index < out.peak_min.index) out.peak_min = r;
  // The median of an even count: the lower of the middle two (a figure some process had).
  out.peak_median = out.highest[summaries.size() / 2].bytes;

  for (size_t i = 0; i < summaries.size(); ++i) {
    const RankSummary& s = summaries[i];
    if (!s.ooms.empty()) ++out.processes_with_ooms;
    for (const RankSummary::Oom& oom : s.ooms) out.ooms.push_back({ref_of(summaries, i, oom.requested), oom});
  }
  std::stable_sort(out.ooms.begin(), out.ooms.end(), [](const MergedRanks::OomAt& a, const MergedRanks::OomAt& b) {
    return a.oom.wall_ns < b.oom.wall_ns;
  });

  std::unordered_map<std::string, size_t> at;  // site -> index in out.leaks
  for (const RankSummary& s : summaries) {
    for (const RankSummary::Leak& leak : s.leaks) {
      auto [it, added] = at.emplace(leak.site, out.leaks.size());
      if (added) out.leaks.push_back({leak.site, leak.stack, 0, 0, leak.bytes, leak.bytes});
      MergedRanks::LeakSite& site = out.leaks[it->second];
      ++site.processes;
      site.bytes += leak.bytes;
      site.min_bytes = std::min(site.min_bytes, leak.bytes);
      site.max_bytes = std::max(site.max_bytes, leak.bytes);
    }
  }
  std::stable_sort(out.leaks.begin(), out.leaks.end(), [](const MergedRanks::LeakSite& a, const MergedRanks::LeakSite& b) {
    return a.processes != b.processes ? a.processes > b.processes : a.bytes > b.bytes;
  });
  return out;
}

}  // namespace gpumemtrace::report
