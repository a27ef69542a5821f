// report/analyses/scope_peaks.cpp — see scope_peaks.h.
#include "report/analyses/scope_peaks.h"

#include <algorithm>
#include <map>

#include "report/analyses/report_model.h"

namespace gpumemtrace::report {

void ScopePeaks::on_acquire(const Holding& h) {
  if (open_.empty() || h.level == Level::Host) return;
  const bool block = h.level == Level::Block;
  if (!block && roles_.role_of(h) != Role::Other) return;  // a segment known as such, a library's
  inside_[holding_id(h)] = Counted{h.position, h.size, block};
  for (Open& scope : open_.open()) {
    scope.blocks |= block;
    scope.live[block ? 0 : 1] += h.size;
    scope.peak[block ? 0 : 1] = std::max(scope.peak[block ? 0 : 1], scope.live[block ? 0 : 1]);
  }
}

void ScopePeaks::on_release(const Holding& h) {
  if (inside_.empty()) return;
  auto it = inside_.find(holding_id(h));
  if (it == inside_.end()) return;
  const int level = it->second.block ? 0 : 1;
  for (Open& scope : open_.open()) {
    if (scope.begin_position <= it->second.position) scope.live[level] -= std::min(scope.live[level], it->second.size);
  }
  inside_.erase(it);
}

void ScopePeaks::on_scope(const Event& e, uint64_t position) {
  if (e.op == Op::ScopeBegin) {
    Open scope;
    scope.name = std::string(e.label);
    scope.begin_position = position;
    scope.begin_time = e.t;
    open_.begin(std::move(scope));
    return;
  }
  std::optional<Open> scope = open_.end(e.label);
  if (scope && ended_.size() < kMaxScopes) ended_.push_back(std::move(*scope));
  if (open_.empty()) inside_.clear();
}

void ScopePeaks::finish(ProcessReport& out) {
  for (Open& scope : open_.open()) ended_.push_back(std::move(scope));
  open_.open().clear();
  std::multimap<std::pair<std::string, uint64_t>, uint64_t> peaks;
  for (const Open& scope : ended_) peaks.emplace(std::make_pair(scope.name, scope.begin_time), scope.result());
  for (ScopeReport& report : out.scopes) {
    auto found = peaks.find(std::make_pair(report.name, report.begin_time_ns));
    if (found == peaks.end()) continue;
    report.peak_bytes = found->second;
    peaks.erase(found);
  }
}

}  // namespace gpumemtrace::report
