// interpose/writer/scope_bound.cpp — see scope_bound.h.
#include "interpose/writer/scope_bound.h"

namespace gpumemtrace {

void ScopeBound::on_event(const EventRecord& r, const LiveSet& live) {
  if (!bounds(r)) return;
  if (r.op == format::Op::ScopeBegin) {
    tracking_ = true;
    if (open_.size() == kMaxOpenScopes) open_.erase(open_.begin());
    open_.push_back({r.label_text(), r.seq});
    return;
  }
  const char* name = r.label_text();
  for (size_t i = open_.size(); i-- > 0;) {
    if (open_[i].name != name) continue;
    const uint64_t bytes = live.bytes_since(open_[i].begin_seq);
    open_.erase(open_.begin() + static_cast<std::ptrdiff_t>(i));
    std::lock_guard<std::mutex> lock(mutex_);
    last_name_ = name;
    last_bytes_ = static_cast<int64_t>(bytes);
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);  // an end without its begin (forgotten): nothing known
  last_name_.clear();
  last_bytes_ = -1;
}

int64_t ScopeBound::last_ended(const char* name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return name && last_bytes_ >= 0 && last_name_ == name ? last_bytes_ : -1;
}

}  // namespace gpumemtrace
