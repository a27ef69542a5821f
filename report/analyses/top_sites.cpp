// report/analyses/top_sites.cpp — per call site totals, and the rankings (see top_sites.h).
#include "report/analyses/top_sites.h"

#include <algorithm>

namespace gpumemtrace::report {

void TopSites::on_release(const Holding& h) {
  if (h.level == Level::Host) return;  // pinned host memory: not the device's (memory_model.h)
  on_lifetime(h, std::max(h.time_ns, model_.time_ns()) - h.time_ns, false);
}

void TopSites::on_lifetime(const Holding& h, uint64_t lifetime_ns, bool live) {
  const int32_t device = h.device;
  const SiteId site = h.site;
  const uint64_t size = h.size;
  const bool blocks = h.level == Level::Block;
  if (!last_ || last_site_ != site || last_device_ != device || last_blocks_ != blocks) {
    DeviceSites& d = devices_.get(device);
    last_ = &(blocks ? d.blocks : d.memory)[site];  // unordered_map elements never move
    last_site_ = site;
    last_device_ = device;
    last_blocks_ = blocks;
  }
  last_->bytes += size;
  last_->count += 1;
  if (!live && lifetime_ns < kTemporaryNs) {
    last_->temporary_bytes += size;
    last_->temporary_count += 1;
  }
}

void TopSites::collect(int32_t device, Level level, const Sites& sites, const Ledger& ledger,
                       const SymbolTable& symbols, ProcessReport& out) const {
  if (sites.empty()) return;
  TopSitesReport report;
  report.device = device;
  report.level = level;
  report.sites = sites.size();
  report.temporary_ns = kTemporaryNs;
  // Live bytes at the peak, per site: the peak snapshot's culprits (the largest kMaxCulprits).
  std::unordered_map<SiteId, uint64_t> at_peak;
  for (const StackCount& c : ledger.peak_snapshot().culprits) at_peak[c.site] = c.bytes;
  auto totals_of = [&](SiteId site) {
    SiteTotals t;
    t.stack = resolve_site(symbols, site);
    auto found = sites.find(site);
    if (found != sites.end()) {
      t.bytes = found->second.bytes;
      t.count = found->second.count;
      t.temporary_bytes = found->second.temporary_bytes;
      t.temporary_count = found->second.temporary_count;
    }
    auto peak = at_peak.find(site);
    t.peak_bytes = peak == at_peak.end() ? 0 : peak->second;
    return t;
  };
  for (const StackCount& c : ledger.peak_snapshot().culprits) {
    if (report.by_peak.size() < kMaxTopSites) report.by_peak.push_back(totals_of(c.site));
  }
  // The n largest by `key`, ties by site id (a stable order for the golden files).
  auto top = [&](auto key, std::vector<SiteTotals>& into) {
    std::vector<std::pair<uint64_t, SiteId>> all;
    for (const auto& [site, t] : sites) {
      if (key(t)) all.emplace_back(key(t), site);
    }
    const size_t n = std::min(all.size(), kMaxTopSites);
    std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n), all.end(),
                      [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
    for (size_t i = 0; i < n; ++i) into.push_back(totals_of(all[i].second));
  };
  top([](const Totals& t) { return t.bytes; }, report.by_bytes);
  top([](const Totals& t) { return t.count; }, report.by_count);
  top([](const Totals& t) { return t.temporary_count; }, report.by_temporary);
  out.top_sites.push_back(std::move(report));
}

void TopSites::finish(const SymbolTable& symbols, ProcessReport& out) {
  model_.for_each_live([&](const Holding& h) { on_lifetime(h, 0, true); });
  for (const auto& [device, d] : devices_.all()) {
    const MemoryModel::DeviceState* state = nullptr;
    auto found = model_.devices().find(device);
    if (found != model_.devices().end()) state = &found->second;
    if (!state) continue;
    collect(device, Level::Block, d.blocks, state->allocated, symbols, out);
    collect(device, Level::Allocation, d.memory, state->reserved, symbols, out);
  }
}

}  // namespace gpumemtrace::report
