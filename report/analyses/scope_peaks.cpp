// report/analyses/scope_peaks.cpp — see scope_peaks.h.
#include "report/analyses/scope_peaks.h"

#include <algorithm>
#include <map>

#include "report/analyses/scopes.h"

namespace gpumemtrace::report {

uint64_t ScopePeaks::key_of(const Holding& h) {
  return h.level == Level::Physical ? h.key ^ (1ull << 63) : (h.level == Level::Block ? h.key ^ (1ull << 62) : h.key);
}

void ScopePeaks::on_acquire(const Holding& h) {
  if (open_.empty()) return;
  if (h.level != Level::Block && roles_.role_of(h) != Role::Other) return;  // a segment, a library's
  inside_[key_of(h)] = Counted{h.position, h.size};
  for (Open& scope : open_) {
    scope.live += h.size;
    scope.peak = std::max(scope.peak, scope.live);
  }
}

void ScopePeaks::on_release(const Holding& h) {
  if (inside_.empty()) return;
  auto it = inside_.find(key_of(h));
  if (it == inside_.end()) return;
  for (Open& scope : open_) {
    if (scope.begin_position <= it->second.position) scope.live -= std::min(scope.live, it->second.size);
  }
  inside_.erase(it);
}

void ScopePeaks::on_scope(const Event& e, uint64_t position) {
  if (e.op == Op::ScopeBegin) {
    if (open_.size() >= kMaxOpenScopes) {
      ++untracked_open_;
      return;
    }
    open_.push_back(Open{std::string(e.label), position, e.t, 0, 0});
    return;
  }
  if (untracked_open_) {
    --untracked_open_;
    return;
  }
  for (size_t i = open_.size(); i-- > 0;) {
    if (open_[i].name != e.label) continue;
    if (ended_.size() < kMaxScopes) ended_.push_back(std::move(open_[i]));
    open_.erase(open_.begin() + static_cast<std::ptrdiff_t>(i));
    break;
  }
  if (open_.empty()) inside_.clear();
}

void ScopePeaks::finish(ProcessReport& out) {
  for (Open& scope : open_) ended_.push_back(std::move(scope));
  open_.clear();
  std::multimap<std::pair<std::string, uint64_t>, uint64_t> peaks;
  for (const Open& scope : ended_) peaks.emplace(std::make_pair(scope.name, scope.begin_time), scope.peak);
  for (ScopeReport& report : out.scopes) {
    auto found = peaks.find(std::make_pair(report.name, report.begin_time_ns));
    if (found == peaks.end()) continue;
    report.peak_bytes = found->second;
    peaks.erase(found);
  }
}

}  // namespace gpumemtrace::report
