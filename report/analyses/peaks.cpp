// report/analyses/peaks.cpp — device summaries, peaks and fragmentation from the model. In a capped
// trace they are those of the recorded part (MemoryModel::end_history); what was live at the end
// is reported apart (DeviceSummary::after_cap).
#include "report/analyses/peaks.h"

namespace gpumemtrace::report {
namespace {

PeakLevel peak_level(const Ledger& ledger, const SymbolTable& symbols) {
  const Ledger::Snapshot& snapshot = ledger.peak_snapshot();
  PeakLevel level;
  level.bytes = snapshot.bytes;
  level.seq = snapshot.seq;
  level.time_ns = snapshot.time_ns;
  level.phase = snapshot.phase;
  for (const StackCount& c : snapshot.culprits) {
    level.culprits.push_back(StackBytes{c.bytes, c.count, resolve_site(symbols, c.site)});
  }
  level.other_bytes = snapshot.other_bytes;
  return level;
}

}  // namespace

void collect_peaks(MemoryModel& model, const Roles& roles, const SymbolTable& symbols, ProcessReport& out) {
  for (const auto& [device, const_state] : model.devices()) {
    MemoryModel::DeviceState& state = model.device_state(device);
    DeviceSummary summary = state.summary;
    summary.peak_reserved = state.reserved.peak();
    summary.peak_allocated = state.allocated.peak();
    // A capped trace's timeline ends at the cap: the live set applied after it has no time.
    const bool capped = model.history_ended();
    const TimelineSample last = capped ? state.history_end
                                       : TimelineSample{summary.last_time_ns, state.reserved.live(),
                                                        state.allocated.live(), false, RoleSplit()};
    summary.timeline = state.timeline.take(last);
    if (capped) {
      summary.after_cap = true;
      summary.after_cap_live = state.reserved.live();
      summary.after_cap_allocated = state.has_blocks ? state.allocated.live() : 0;
    }
    if (summary.peak_reserved || summary.peak_allocated) {
      PeakReport peak;
      peak.device = device;
      peak.reserved = peak_level(state.reserved, symbols);
      peak.has_blocks = state.has_blocks;
      if (state.has_blocks) peak.allocated = peak_level(state.allocated, symbols);
      // Expandable segments keep no segment ranges (their chunks are physical): nothing to measure.
      peak.has_fragmentation = state.has_fragmentation_at_peak && state.fragmentation_at_peak.reserved;
      peak.fragmentation = state.fragmentation_at_peak;
      // A split that is all "other" (a program without PyTorch) says nothing: left out.
      peak.has_roles = roles.peak(device, &peak.roles, &peak.roles_time_ns) &&
                       peak.roles.bytes[static_cast<size_t>(Role::Other)] != peak.roles.total();
      out.peaks.push_back(std::move(peak));
    }
    if (state.has_blocks) {
      FragmentationReport f;
      f.device = device;
      f.timeline = summary.timeline;
      f.at_peak = state.fragmentation_at_peak;
      f.peak_time_ns = state.allocated.peak_snapshot().time_ns;
      out.fragmentation.push_back(std::move(f));
    }
    out.devices.push_back(std::move(summary));
  }
  const MemoryModel::HostState& host = model.host();
  out.pinned_host.allocations = host.allocations;
  out.pinned_host.frees = host.frees;
  out.pinned_host.peak_bytes = host.ledger.peak();
  out.pinned_host.peak_time_ns = host.ledger.peak_snapshot().time_ns;
  out.pinned_host.live_bytes = host.ledger.live();
}

}  // namespace gpumemtrace::report
