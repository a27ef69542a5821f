// report/analyses/time_to_oom.cpp — see time_to_oom.h.
#include "report/analyses/time_to_oom.h"

namespace gpumemtrace::report {

void collect_time_to_oom(const MemoryModel& model, ProcessReport& report) {
  for (const GrowthReport& g : report.growth) {
    // Nothing left to grow from (the site, or its device, holds nothing at the end), or the device
    // already ran out of memory in this run: no forecast.
    if (g.rises < 2 || g.peak_bytes <= g.first_bytes || g.final_bytes == 0) continue;
    bool had_oom = false;
    for (const OomReport& oom : report.ooms) had_oom = had_oom || oom.device == g.device;
    if (had_oom) continue;
    auto it = model.devices().find(g.device);
    if (it == model.devices().end()) continue;
    const MemoryModel::DeviceState& state = it->second;
    TimeToOomReport t;
    t.device = g.device;
    t.level = g.level;
    t.stack = g.stack;
    t.steps = g.rises - 1;
    t.bytes_per_step = (g.peak_bytes - g.first_bytes) / t.steps;
    if (!t.bytes_per_step) continue;
    const uint64_t reserved = state.reserved.live();
    if ((g.level == Level::Block ? state.allocated.live() : reserved) == 0) continue;
    if (state.has_meminfo) {
      const uint64_t since = reserved > state.meminfo_reserved ? reserved - state.meminfo_reserved : 0;
      t.free_bytes = state.meminfo_free > since ? state.meminfo_free - since : 0;
      t.free_known = true;
    } else if (state.summary.total) {
      t.free_bytes = state.summary.total > reserved ? state.summary.total - reserved : 0;
    } else {
      continue;  // neither a reading nor the device's size: no estimate
    }
    if (g.level == Level::Block && state.has_blocks && reserved > state.allocated.live()) {
      t.free_bytes += reserved - state.allocated.live();  // the allocator's cache serves blocks first
    }
    t.seconds_per_step = g.last_rise_time_ns > g.first_time_ns
                             ? static_cast<double>(g.last_rise_time_ns - g.first_time_ns) / 1e9 / static_cast<double>(t.steps)
                             : 0.0;
    t.bytes_per_second = t.seconds_per_step > 0 ? static_cast<double>(t.bytes_per_step) / t.seconds_per_step : 0.0;
    t.steps_left = static_cast<double>(t.free_bytes) / static_cast<double>(t.bytes_per_step);
    t.seconds_left = t.seconds_per_step > 0 ? t.steps_left * t.seconds_per_step : -1.0;
    report.time_to_oom.push_back(std::move(t));
  }
}

}  // namespace gpumemtrace::report
