// report/analyses/process_groups.cpp — see process_groups.h.
#include "report/analyses/process_groups.h"

#include <algorithm>
#include <tuple>

namespace gpumemtrace::report {

void ProcessTotals::Extreme::take(const Extreme& other, bool higher) {
  if (other.index == SIZE_MAX) return;
  const bool more = higher ? other.value > value : other.value < value;
  if (index == SIZE_MAX || more || (other.value == value && other.index < index)) *this = other;
}

void ProcessTotals::add(const ProcessReport& r, size_t index) {
  ++processes;
  events += r.events;
  dropped_events += r.dropped_events;
  leaked_bytes += r.leaked_bytes();
  leaked_count += r.leaked_count();
  if (!r.complete) ++not_complete;
  if (r.cut()) {
    ++cut;
    live_when_cut_bytes += r.live_when_cut_bytes();
  }
  if (r.killed_by_signal()) {
    ++killed_by_signal;
    live_when_killed_bytes += r.live_when_cut_bytes();
  }
  if (r.ended_in_oom) {
    ++ended_in_oom;
    live_when_crashed_bytes += r.live_when_cut_bytes();
  }
  if (r.dropped_events) ++incomplete;
  allocations += r.pinned_host.allocations;  // every allocation call of the process
  frees += r.pinned_host.frees;
  for (const DeviceSummary& d : r.devices) {
    allocations += d.allocations;
    frees += d.frees;
    failed_allocations += d.failed_allocations;
    block_ooms += d.block_ooms;
    cached_bytes += d.cached_bytes;
    library_bytes += d.library_bytes;
    alive_at_exit_bytes += d.alive_at_exit_bytes;
  }
  ooms += r.ooms.size();
  scopes += r.scopes_total;
  for (const ScopeReport& scope : r.scopes) leaking_scopes += scope.leaked_bytes && (scope.closed || !r.ended_early()) ? 1 : 0;
  for (const FailedCall& call : r.failed_calls) failed_calls += call.count;
  peak_bytes_sum += r.peak_bytes();
  const Extreme peak{r.peak_bytes(), r.header.pid, r.file, index};
  const Extreme leaked{r.leaked_bytes(), r.header.pid, r.file, index};
  peak_min.take(peak, false);
  peak_max.take(peak, true);
  leaked_min.take(leaked, false);
  leaked_max.take(leaked, true);
}

void ProcessTotals::add(const ProcessTotals& o) {
  processes += o.processes;
  events += o.events;
  allocations += o.allocations;
  frees += o.frees;
  failed_allocations += o.failed_allocations;
  block_ooms += o.block_ooms;
  dropped_events += o.dropped_events;
  leaked_bytes += o.leaked_bytes;
  leaked_count += o.leaked_count;
  cached_bytes += o.cached_bytes;
  library_bytes += o.library_bytes;
  alive_at_exit_bytes += o.alive_at_exit_bytes;
  ooms += o.ooms;
  failed_calls += o.failed_calls;
  scopes += o.scopes;
  leaking_scopes += o.leaking_scopes;
  not_complete += o.not_complete;
  cut += o.cut;
  live_when_cut_bytes += o.live_when_cut_bytes;
  killed_by_signal += o.killed_by_signal;
  live_when_killed_bytes += o.live_when_killed_bytes;
  ended_in_oom += o.ended_in_oom;
  live_when_crashed_bytes += o.live_when_crashed_bytes;
  incomplete += o.incomplete;
  peak_bytes_sum += o.peak_bytes_sum;
  peak_min.take(o.peak_min, false);
  peak_max.take(o.peak_max, true);
  leaked_min.take(o.leaked_min, false);
  leaked_max.take(o.leaked_max, true);
}

namespace {
// How much a process has to tell, larger first: an OOM, then anything a gate or a reader looks for
// (a leak, growth, a scope that leaked, a trace cut short or incomplete), then its peak; on a tie the
// first in input order.
auto telling(const ProcessReport& r, size_t index) {
  const bool trouble = r.leaked_bytes() > 0 || !r.growth.empty() || r.scope_leaked_bytes() > 0 || r.cut() ||
                       r.dropped_events > 0;
  return std::make_tuple(!r.ooms.empty(), trouble, r.peak_bytes(), SIZE_MAX - index);
}
}  // namespace

void ProcessFolder::fold(size_t index, const ProcessReport& report) {
  ProcessGroup& group = groups_[{report.header.exe, report.header.rank}];
  group.exe = report.header.exe;
  group.rank = report.header.rank;
  group.totals.add(report, index);
  group.first.take(ProcessTotals::Extreme{0, report.header.pid, report.file, index}, false);
}

void ProcessFolder::add(size_t index, ProcessReport report) {
  all_.add(report, index);
  if (kept_.size() < max_full_) {
    kept_.push_back(Kept{index, std::move(report)});
    return;
  }
  // The least telling of those kept: replaced when the new one tells more, else the new one is summed.
  auto least = std::min_element(kept_.begin(), kept_.end(), [](const Kept& a, const Kept& b) {
    return telling(a.report, a.index) < telling(b.report, b.index);
  });
  if (least == kept_.end() || telling(report, index) < telling(least->report, least->index)) {
    fold(index, report);
    return;
  }
  fold(least->index, least->report);
  *least = Kept{index, std::move(report)};
}

std::pair<std::vector<ProcessReport>, ProcessGroups> ProcessFolder::finish() {
  std::sort(kept_.begin(), kept_.end(), [](const Kept& a, const Kept& b) { return a.index < b.index; });
  std::vector<ProcessReport> reports;
  reports.reserve(kept_.size());
  for (Kept& k : kept_) reports.push_back(std::move(k.report));
  kept_.clear();
  ProcessGroups out;
  out.all = std::move(all_);
  std::vector<ProcessGroup> groups;
  for (auto& [key, group] : groups_) {
    out.totals.add(group.totals);
    groups.push_back(std::move(group));
  }
  groups_.clear();
  // The largest groups are listed (most processes; by executable and rank on a tie), in that order.
  std::sort(groups.begin(), groups.end(), [](const ProcessGroup& a, const ProcessGroup& b) {
    return std::make_tuple(b.totals.processes, a.exe, a.rank) < std::make_tuple(a.totals.processes, b.exe, b.rank);
  });
  for (size_t i = 0; i < groups.size(); ++i) {
    if (i < kMaxProcessGroupsListed) {
      out.groups.push_back(std::move(groups[i]));
      continue;
    }
    out.other.totals.add(groups[i].totals);
    out.other.first.take(groups[i].first, false);
    ++out.other_groups;
  }
  return {std::move(reports), std::move(out)};
}

}  // namespace gpumemtrace::report
