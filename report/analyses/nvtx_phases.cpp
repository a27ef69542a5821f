// report/analyses/nvtx_phases.cpp — per-thread NVTX phases (nvtx_phases.h).
#include "report/analyses/nvtx_phases.h"

#include <algorithm>

namespace gpumemtrace::report {

void NvtxPhases::on_scope(const Event& e) {
  seen_ = true;
  if (e.op == Op::ScopeBegin) {
    Thread& thread = threads_[e.tid];
    thread.open.push_back(OpenRange{std::string(e.label), e.range, e.t});
    if (!thread.phase.empty()) thread.phase += '/';
    thread.phase += e.label;
    if (e.range) range_threads_[e.range] = e.tid;
    return;
  }
  if (e.range) {  // a start/end range: ended on any thread
    auto owner = range_threads_.find(e.range);
    if (owner == range_threads_.end()) return;
    Thread& thread = threads_[owner->second];
    const uint64_t tid = owner->second;
    range_threads_.erase(owner);
    for (size_t i = 0; i < thread.open.size(); ++i)
      if (thread.open[i].range == e.range) return close(tid, thread, i, e.t, true);
    return;
  }
  auto found = threads_.find(e.tid);
  if (found == threads_.end()) return;
  Thread& thread = found->second;
  for (size_t i = thread.open.size(); i-- > 0;)
    if (thread.open[i].range == 0 && thread.open[i].label == e.label) return close(e.tid, thread, i, e.t, true);
}

const std::string& NvtxPhases::phase_of(uint64_t tid) const {
  static const std::string kNone;
  auto found = threads_.find(tid);
  return found == threads_.end() ? kNone : found->second.phase;
}

void NvtxPhases::close(uint64_t tid, Thread& thread, size_t index, uint64_t end_time, bool closed) {
  const OpenRange& open = thread.open[index];
  ++total_;
  if (closed_.size() < kMaxNvtxRanges) {
    closed_.push_back(NvtxRange{open.label, tid, open.range, open.begin_time, std::max(end_time, open.begin_time),
                                closed});
  }
  thread.open.erase(thread.open.begin() + static_cast<std::ptrdiff_t>(index));
  thread.phase.clear();
  for (const OpenRange& r : thread.open) thread.phase += (thread.phase.empty() ? "" : "/") + r.label;
}

void NvtxPhases::finish(uint64_t end_time, ProcessReport& out) {
  for (auto& [tid, thread] : threads_)
    while (!thread.open.empty()) close(tid, thread, thread.open.size() - 1, end_time, false);
  out.nvtx_ranges = std::move(closed_);
  out.nvtx_ranges_total = total_;
}

}  // namespace gpumemtrace::report
