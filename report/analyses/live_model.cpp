// report/analyses/live_model.cpp — see live_model.h.
#include "report/analyses/live_model.h"

#include <algorithm>

#include "report/analyses/oom_incidents.h"

namespace gpumemtrace::report {

void LiveModel::on_header(const Header& header) {
  state_.started = true;
  state_.header = header;
}

void LiveModel::on_device(const DeviceInfo& info) { device_info_[info.device] = info; }

void LiveModel::on_footer(const Footer& footer) {
  state_.ended = true;
  state_.footer = footer;
}

void LiveModel::on_event(const Event& e) {
  ++state_.events;
  if (state_.events == 1) state_.first_time_ns = e.t;
  state_.last_time_ns = std::max(state_.last_time_ns, e.t);
  // Marks and scopes hold no memory (the model does not take them); the rest is replayed as the
  // report replays it, each allocation charged to its own stack.
  if (e.op == Op::Mark || e.op == Op::ScopeBegin || e.op == Op::ScopeEnd) return;
  const SiteId site = make_site(e.stack);
  model_.apply(e, state_.events, site);
  // One OOM per failed request, as the report's incidents count them (oom_incidents.h): on a device a
  // caching allocator serves, its block_oom is the request, and the cudaMalloc failures beneath it
  // (the first try and the retry after freeing the cache) belong to it.
  if (is_out_of_memory(e)) {
    const auto d = model_.devices().find(e.device);
    if (e.op == Op::BlockOom || d == model_.devices().end() || !d->second.has_blocks) ++device_ooms_[e.device];
  }
  const bool acquires = (e.op == Op::Alloc && e.result == 0) || e.op == Op::BlockAlloc;
  if (acquires && !stacks_.count(site)) stacks_.emplace(site, std::make_shared<const Stack>(resolve_site(symbols_, site)));
}

LiveState LiveModel::state() const {
  LiveState out = state_;
  static const std::shared_ptr<const Stack> kNone = std::make_shared<const Stack>();
  for (const auto& [device, d] : model_.devices()) {
    LiveDevice live;
    live.device = device;
    const auto info = device_info_.find(device);
    if (info != device_info_.end()) {
      live.name = info->second.name;
      live.total = info->second.total;
    }
    if (!live.total) live.total = d.summary.total;  // from the device's memory readings
    live.reserved = d.reserved.live();
    live.allocated = d.allocated.live();
    live.peak_reserved = d.reserved.peak();
    live.has_blocks = d.has_blocks;
    const auto ooms = device_ooms_.find(device);
    live.ooms = ooms == device_ooms_.end() ? 0 : ooms->second;
    out.ooms += live.ooms;
    out.devices.push_back(std::move(live));
    for (const auto& [level, ledger] : {std::pair{Level::Allocation, &d.reserved}, std::pair{Level::Block, &d.allocated}}) {
      for (const auto& [site, s] : ledger->sites()) {
        if (!s.bytes) continue;
        const auto stack = stacks_.find(site);
        out.sites.push_back(LiveSite{device, level, site, s.bytes, s.count, stack == stacks_.end() ? kNone : stack->second});
      }
    }
  }
  return out;
}

}  // namespace gpumemtrace::report
