// report/analyses/what_if.cpp — the what-if replays and what the report says of them (what_if.h).
#include "report/analyses/what_if.h"

#include <algorithm>
#include <map>

#include "report/outputs/units.h"
#include "trace/torch_actions.h"

namespace gpumemtrace::report {

namespace {

// Blocks of PyTorch's allocator on `device`: without them a replay has nothing to model (another
// allocator's blocks, through the custom allocator API, are not replayed), and a second pass over the
// trace would only be paid for.
bool has_torch_blocks(const ProcessReport& report, int32_t device) {
  for (const DeviceSummary& d : report.devices) {
    if (d.device == device && d.pytorch_blocks) return true;
  }
  return false;
}

bool is_torch_oom(const OomReport& oom) {
  for (const OomAttempt& a : oom.attempts) {
    if (a.op == "block_oom" && torch_actions::is_torch_api(a.api)) return true;
  }
  return false;
}

bool fragmented(const PeakReport& peak) {
  if (!peak.has_fragmentation) return false;
  const FragmentationPoint& f = peak.fragmentation;
  return f.free_in_reserved >= kFragmentedMin &&
         static_cast<double>(f.free_in_reserved) > kFragmentedShare * static_cast<double>(f.reserved);
}

// A row that helps: the OOM does not happen (when there is one) and nothing new fails, or the
// reserved peak drops clearly.
bool lower_peak(const WhatIfRow& row, const WhatIfRow& recorded) {
  if (row.new_ooms || row.reserved_peak >= recorded.reserved_peak) return false;
  const uint64_t drop = recorded.reserved_peak - row.reserved_peak;
  return drop >= kHelpsMin && static_cast<double>(drop) >= kHelpsShare * static_cast<double>(recorded.reserved_peak);
}

// f such that reserved + (f - 1) * activations * reserved / allocated fits the capacity.
double headroom(uint64_t capacity, uint64_t reserved, uint64_t allocated, uint64_t activations) {
  if (!activations || !allocated || capacity <= reserved) return capacity < reserved ? 0.0 : 1.0;
  const double overhead = static_cast<double>(reserved) / static_cast<double>(allocated);
  return 1.0 + static_cast<double>(capacity - reserved) / (static_cast<double>(activations) * overhead);
}

FragmentationPoint at_peak_of(const allocator_model::ModelStats& stats) {
  FragmentationPoint p;
  p.reserved = stats.peak_reserved;
  p.allocated = std::min(stats.allocated_at_peak, stats.peak_reserved);
  p.free_in_reserved = stats.peak_reserved - p.allocated;
  p.largest_free_block = std::min(stats.largest_free_at_peak, p.free_in_reserved);
  return p;
}

std::vector<TimelineSample> timeline_of(const std::vector<allocator_model::ReservedSample>& samples) {
  std::vector<TimelineSample> out;
  out.reserve(samples.size());
  for (const allocator_model::ReservedSample& s : samples) {
    TimelineSample sample;
    sample.time_ns = s.time_ns;
    sample.reserved = s.reserved;
    out.push_back(sample);
  }
  return out;
}

WhatIfRow make_row(const allocator_model::DeviceReplay& r) {
  WhatIfRow row;
  static_cast<ReplayFigures&>(row) = figures_of(r);
  row.settings = r.settings;
  row.new_ooms = r.new_ooms;
  row.first_new_oom_time_ns = r.first_new_oom_time_ns;
  for (const allocator_model::OomOutcome& o : r.ooms) row.ooms_still_happen.push_back(o.still_happens);
  return row;
}

}  // namespace

ReplayFigures figures_of(const allocator_model::DeviceReplay& replay) {
  ReplayFigures f;
  f.reserved_peak = replay.stats.peak_reserved;
  f.allocated_peak = replay.stats.peak_allocated;
  f.at_peak = at_peak_of(replay.stats);
  f.cache_flushes = replay.stats.cache_flushes;
  f.retries = replay.stats.retries;
  f.timeline = timeline_of(replay.timeline);
  return f;
}

std::vector<std::string> what_if_settings(const ProcessReport& report, const AnalysisRequest& request) {
  std::vector<std::string> out;
  if (report.inconsistent_input) return out;  // a snapshot that contradicts itself: nothing to replay
  if (!request.settings.empty()) {
    out.push_back("");
    out.insert(out.end(), request.settings.begin(), request.settings.end());
    return out;
  }
  bool wanted = false;
  for (const OomReport& oom : report.ooms) wanted = wanted || (has_torch_blocks(report, oom.device) && (oom.has_blocks || is_torch_oom(oom)));
  for (const PeakReport& peak : report.peaks) wanted = wanted || (has_torch_blocks(report, peak.device) && fragmented(peak));
  wanted = wanted && request.automatic;
  if (!wanted && !request.replay_recorded) return out;
  out.push_back("");
  if (!wanted) return out;
  for (const char* candidate : kCandidates) out.push_back(candidate);
  return out;
}

WhatIfPass::WhatIfPass(const std::vector<std::string>& settings, const std::string& recorded,
                       const ProcessReport& report)
    : settings_(settings) {
  replays_.reserve(settings.size());
  for (size_t i = 0; i < settings.size(); ++i) replays_.emplace_back(settings[i], recorded, i == 0);
  // A device whose size the trace does not give (a snapshot) held at most what was reserved at an OOM
  // plus what was free then: no replay may reserve more.
  std::map<int32_t, uint64_t> limits;
  for (const DeviceSummary& d : report.devices) {
    if (d.total) limits[d.device] = 0;  // known: the replay reads it from the trace itself
  }
  for (const OomReport& oom : report.ooms) {
    if (!oom.has_device_free || (limits.count(oom.device) && limits[oom.device] == 0)) continue;
    limits[oom.device] = std::max(limits[oom.device], oom.live_bytes + oom.device_free);
  }
  for (const auto& [device, bytes] : limits) {
    for (allocator_model::AllocatorReplay& r : replays_) {
      if (bytes) r.limit_device(device, bytes);
    }
  }
}

void WhatIfPass::on_device(const DeviceInfo& info) {
  for (allocator_model::AllocatorReplay& r : replays_) r.on_device(info);
}

void WhatIfPass::on_event(const Event& e) {
  for (allocator_model::AllocatorReplay& r : replays_) r.apply(e);
}

void WhatIfPass::on_allocator_settings(const Event& e) {
  for (allocator_model::AllocatorReplay& r : replays_) r.on_settings(e);
}

void WhatIfPass::finish(const AnalysisRequest& request, ProcessReport& report) {
  // results[setting][device]
  std::map<int32_t, std::vector<allocator_model::DeviceReplay>> by_device;
  for (allocator_model::AllocatorReplay& replay : replays_) {
    for (allocator_model::DeviceReplay& d : replay.finish()) by_device[d.device].push_back(std::move(d));
  }
  const bool automatic = request.settings.empty();
  for (auto& [device, replays] : by_device) {
    if (replays.size() != settings_.size()) continue;  // a device some replay never modeled
    const allocator_model::DeviceReplay& recorded = replays[0];
    if (recorded.requests == 0 && recorded.ooms.empty()) continue;  // nothing was asked of the allocator
    WhatIfReport w;
    w.device = device;
    w.recorded_settings = recorded.settings;
    w.settings_recorded = recorded.settings_recorded;
    w.settings_option = request.recorded;
    w.settings_changes = recorded.settings_changes;
    w.unmodeled = recorded.unmodeled;
    w.capacity = recorded.capacity;
    for (const allocator_model::OomOutcome& o : recorded.ooms) {
      w.oom_seqs.push_back(o.seq);
      w.oom_requested.push_back(o.requested);
    }
    w.faithful = !recorded.divergence;
    w.segment_ops_compared = recorded.segment_ops_compared;
    w.blocks_compared = recorded.blocks_compared;
    if (recorded.divergence) {
      w.has_divergence = true;
      w.divergence_seq = recorded.divergence->seq;
      w.divergence_time_ns = recorded.divergence->time_ns;
      w.divergence = recorded.divergence->what;
    }
    WhatIfRow first = make_row(recorded);
    first.recorded = true;
    first.reserved_peak = recorded.recorded_reserved_peak;  // what the trace shows, replayed or not
    first.ooms_still_happen.assign(w.oom_seqs.size(), true);
    w.rows.push_back(std::move(first));
    for (size_t i = 1; i < replays.size(); ++i) {
      // A candidate the recording already ran under (expandable segments, inferred) is no alternative.
      if (automatic && replays[i].settings == recorded.settings) continue;
      WhatIfRow row = make_row(replays[i]);
      row.settings = settings_[i];
      row.automatic = automatic;
      w.rows.push_back(std::move(row));
    }
    const WhatIfRow& base = w.rows[0];

    // The best row that helps: every recorded OOM avoided (when there were any), nothing new failing,
    // and the lowest reserved peak among those.
    // Only a replay that reproduced the recording is trusted to name a setting.
    const WhatIfRow* best = nullptr;
    for (size_t i = 1; i < w.rows.size() && w.faithful; ++i) {
      const WhatIfRow& row = w.rows[i];
      bool avoids = !w.oom_seqs.empty() && row.new_ooms == 0;
      for (bool happens : row.ooms_still_happen) avoids = avoids && !happens;
      if (!avoids && !lower_peak(row, base)) continue;
      if (!best || row.reserved_peak < best->reserved_peak) best = &row;
    }

    // Headroom at the allocated peak.
    const PeakReport* peak = nullptr;
    for (const PeakReport& p : report.peaks) peak = p.device == device ? &p : peak;
    const uint64_t capacity = w.capacity;
    if (peak && peak->has_roles && capacity) {
      w.activation_bytes = peak->roles.bytes[static_cast<size_t>(Role::Activations)] +
                           peak->roles.bytes[static_cast<size_t>(Role::BackwardTemporaries)];
      if (w.activation_bytes) {
        w.has_headroom = true;
        w.headroom_recorded = headroom(capacity, base.reserved_peak, base.allocated_peak, w.activation_bytes);
        const WhatIfRow& chosen = best ? *best : base;
        w.headroom_best = headroom(capacity, chosen.reserved_peak, chosen.allocated_peak, w.activation_bytes);
        w.best_settings = best ? best->settings : "";
      }
    }

    if (best) {
      std::string avoided;
      bool all_avoided = !w.oom_seqs.empty() && best->new_ooms == 0;
      for (bool happens : best->ooms_still_happen) all_avoided = all_avoided && !happens;
      if (all_avoided) avoided = w.oom_seqs.size() == 1 ? ": this OOM would not have happened" : ": these OOMs would not have happened";
      w.advice = "with `" + best->settings + "` this run peaks at " + format_bytes(best->reserved_peak) +
                 " reserved instead of " + format_bytes(base.reserved_peak) + avoided + " (replayed)";
      for (OomReport& oom : report.ooms) {
        if (oom.device == device && all_avoided) oom.advice = "PYTORCH_CUDA_ALLOC_CONF=" + best->settings + ": " + w.advice;
      }
      for (PeakReport& p : report.peaks) {
        if (p.device == device && fragmented(p) && lower_peak(*best, base)) {
          p.advice = w.advice + (p.advice.empty() ? "" : "; " + p.advice);
        }
      }
    } else if (!w.faithful) {
      w.advice = "";  // the model did not reproduce this run (replay.divergence): no setting is named
    } else if (w.rows.size() > 1) {
      std::string tried;
      for (size_t i = 1; i < w.rows.size(); ++i) tried += (i > 1 ? ", " : "") + w.rows[i].settings;
      w.advice = "no allocator setting replayed (" + tried + ") lowers the reserved peak" +
                 (w.oom_seqs.empty() ? "" : " or avoids the OOM");
    }
    if (!w.faithful) {
      // A replay that did not reproduce the recording predicts nothing: no row, no advice, no
      // headroom (the divergence is what is reported).
      w.rows.clear();
      w.advice.clear();
      w.has_headroom = false;
    }
    report.what_if.push_back(std::move(w));
  }
}

}  // namespace gpumemtrace::report
