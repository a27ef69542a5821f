// report/analyses/scopes.cpp — per-scope leak checks (rules in scopes.h).
#include "report/analyses/scopes.h"

#include <algorithm>
#include <map>

namespace gpumemtrace::report {
namespace {

// The largest first, at most kMaxCulprits, with their stacks.
std::vector<StackBytes> top_sites(const std::map<SiteId, StackCount>& by_site, const SymbolTable& symbols) {
  std::vector<StackCount> sites;
  for (const auto& [site, c] : by_site) {
    if (c.count) sites.push_back(c);
  }
  std::stable_sort(sites.begin(), sites.end(), [](const StackCount& a, const StackCount& b) { return a.bytes > b.bytes; });
  if (sites.size() > kMaxCulprits) sites.resize(kMaxCulprits);
  std::vector<StackBytes> out;
  for (const StackCount& c : sites) out.push_back(StackBytes{c.bytes, c.count, resolve_site(symbols, c.site)});
  return out;
}

}  // namespace

void Scopes::on_acquire(const Holding& h) {
  // What was held before the history began (a flight recorder's checkpoint re-opens the scopes open
  // then, ahead of it) was not allocated inside any scope the history shows: never a scope's leak.
  if (!open_.empty() && !h.initial) inside_[holding_id(h)] = h;
}

void Scopes::on_release(const Holding& h) {
  if (!inside_.empty()) inside_.erase(holding_id(h));
  gc_.on_release(h);
}

void Scopes::on_scope(const Event& e, uint64_t position) {
  if (e.op == Op::ScopeBegin) {
    open_.begin(OpenScope{std::string(e.label), std::string(e.api), position, e.t});
    return;
  }
  if (std::optional<OpenScope> scope = open_.end(e.label)) close(*scope, e.t, true, e.result);
  if (open_.empty()) inside_.clear();  // no scope can claim them any more
}

// A holding counts for a scope unless it is a caching allocator's segment or chunk (its cache),
// or memory a library keeps, or suppressed.
bool Scopes::counts(const Holding& h) {
  if (h.level == Level::Allocation && model_.is_segment(h.key)) return false;
  if (h.level == Level::Physical) {
    auto chunk = model_.physical().find(h.key);
    uint64_t block_bytes = 0;
    if (chunk != model_.physical().end() && model_.is_allocator_chunk(h.key, chunk->second, &block_bytes)) {
      return false;
    }
  }
  const StackId stack = site_stack(h.site);
  if (site_attribution(h.site) != Attribution::None || !stack) return true;
  auto cached = excluded_stacks_.find(stack);
  if (cached == excluded_stacks_.end()) {
    const Stack frames = symbols_.resolve(stack);
    const bool excluded = suppressions_.match_library(frames) || suppressions_.match_leak(frames);
    cached = excluded_stacks_.emplace(stack, excluded).first;
  }
  return !cached->second;
}

void Scopes::close(const OpenScope& scope, uint64_t end_time, bool closed, int64_t result) {
  // Any other nonzero result (an older plugin's 1, a newer one's unknown bit) is a failed test too.
  const bool failed = result != 0 && (result & ~format::kScopeOwnLeakLimit) != 0;
  ++total_;
  if (reports_.size() >= kMaxScopes) return;
  ScopeReport report;
  report.name = scope.name;
  report.api = scope.api;
  report.begin_time_ns = scope.begin_time;
  report.end_time_ns = end_time;
  report.closed = closed;
  report.failed = failed;
  report.own_leak_limit = (result & format::kScopeOwnLeakLimit) != 0;
  report.over_memory_limit = (result & format::kScopeOverMemoryLimit) != 0;
  report.over_leak_limit = (result & format::kScopeOverLeakLimit) != 0;
  // Its leaks by site; which of them a garbage collection frees later is known only at the end.
  const uint32_t index = static_cast<uint32_t>(reports_.size());
  std::map<SiteId, StackCount>& by_site = leak_sites_.emplace_back();
  // Not checked: what the failure keeps alive (a traceback's locals) is no leak. A test that failed only
  // for going over its own limit raised nothing: its leak is what it is.
  if (failed && !report.over_memory_limit && !report.over_leak_limit) {
    reports_.push_back(std::move(report));
    return;
  }
  for (const auto& [key, h] : inside_) {
    if (h.position < scope.begin_position || !counts(h)) continue;
    StackCount& c = by_site[h.site];
    c.site = h.site;
    c.bytes += h.size;
    c.count += 1;
    report.leaked_bytes += h.size;
    report.leaked_count += 1;
    if (closed) gc_.note_leak(h, index);  // an unclosed scope's leaks are what was live at the trace's end
  }
  reports_.push_back(std::move(report));
}

void Scopes::finish(ProcessReport& out) {
  // Scopes the trace ended inside: what was live at the end.
  while (!open_.empty()) {
    OpenScope scope = std::move(open_.open().back());
    open_.open().pop_back();
    close(scope, out.last_time_ns, false, 0);
  }
  if (open_.untracked_total()) {
    out.warnings.push_back(std::to_string(open_.untracked_total()) + " scopes opened while " + std::to_string(kMaxOpenScopes) +
                           " were open were not checked (limit)");
  }
  // What a garbage collection freed after its scope ended: moved from the scope's leaks to the
  // memory it held until garbage collection.
  std::vector<std::map<SiteId, StackCount>> gc_sites(reports_.size());
  gc_.finish(
      [&](uint32_t index, SiteId site, uint64_t size) {
        ScopeReport& report = reports_[index];
        StackCount& leak = leak_sites_[index][site];
        leak.bytes -= size;
        leak.count -= 1;
        report.leaked_bytes -= size;
        report.leaked_count -= 1;
        StackCount& held = gc_sites[index][site];
        held.site = site;
        held.bytes += size;
        held.count += 1;
        report.held_until_gc_bytes += size;
        report.held_until_gc_count += 1;
      },
      out.warnings);
  for (size_t i = 0; i < reports_.size(); ++i) {
    reports_[i].leaks = top_sites(leak_sites_[i], symbols_);
    reports_[i].held_until_gc = top_sites(gc_sites[i], symbols_);
  }
  out.scopes = std::move(reports_);
  out.scopes_total = total_;
  if (total_ > out.scopes.size()) {
    out.warnings.push_back(std::to_string(total_) + " scopes ended; the first " + std::to_string(out.scopes.size()) +
                           " are reported");
  }
}

}  // namespace gpumemtrace::report
