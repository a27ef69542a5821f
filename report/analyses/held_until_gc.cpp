// report/analyses/held_until_gc.cpp — see held_until_gc.h.
#include "report/analyses/held_until_gc.h"

#include <algorithm>

namespace gpumemtrace::report {

void HeldUntilGc::on_window(const Event& gc) {
  if (windows_.size() >= max_windows_) {
    ++dropped_windows_;
    return;
  }
  windows_.push_back(Window{gc.t, gc.end_time, gc.tid});
}

void HeldUntilGc::note_leak(const Holding& h, uint32_t report) {
  if (live_.size() + released_.size() >= max_candidates_) {
    ++unchecked_leaks_;
    return;
  }
  live_.emplace(holding_id(h), Candidate{report, h.site, h.size});
}

void HeldUntilGc::on_release(const Holding& h) {
  if (live_.empty()) return;
  auto [first, last] = live_.equal_range(holding_id(h));
  for (auto it = first; it != last; ++it) released_.push_back(Released{it->second, now_, tid_, delayed_, timed_});
  live_.erase(first, last);
}

bool HeldUntilGc::in_a_window(const Released& r) const {
  if (!r.timed) return false;
  const uint64_t slack = r.delayed ? kTorchSlackNs : 0;
  // The windows that begin at or before t + slack, latest first; they end in the same order, so the
  // walk stops at the first that ends before t - slack.
  auto it = std::upper_bound(windows_.begin(), windows_.end(), r.t + slack,
                             [](uint64_t t, const Window& w) { return t < w.begin; });
  while (it != windows_.begin()) {
    const Window& w = *--it;
    if (w.end + slack < r.t) return false;
    if (r.delayed || w.tid == r.tid) return true;
  }
  return false;
}

void HeldUntilGc::finish(const std::function<void(uint32_t, SiteId, uint64_t)>& held,
                         std::vector<std::string>& warnings) {
  if (!windows_.empty()) {
    // Recorded in the order they ended, which is the order they began (they never overlap); sorted
    // anyway, so that a trace that says otherwise is read the same way whatever its order.
    std::stable_sort(windows_.begin(), windows_.end(), [](const Window& a, const Window& b) { return a.begin < b.begin; });
    for (const Released& r : released_) {
      if (in_a_window(r)) held(r.leak.report, r.leak.site, r.leak.size);
    }
  }
  if (unchecked_leaks_) {
    warnings.push_back(std::to_string(unchecked_leaks_) + " leaks of scopes past the first " +
                       std::to_string(max_candidates_) + " were not checked against garbage collections (limit)");
  }
  if (dropped_windows_) {
    warnings.push_back(std::to_string(dropped_windows_) + " garbage collections past the first " +
                       std::to_string(max_windows_) + " were not read (limit): what they freed counts as leaked");
  }
}

}  // namespace gpumemtrace::report
