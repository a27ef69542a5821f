// report/analyses/what_if.h — "would another allocator setting have avoided this?": the trace's PyTorch
// requests replayed through the allocator model (report/allocator_model/) under the recorded settings and
// under others, as a second pass over the trace after the report's own.
//
// When: always with --what-if SETTING (the settings given, each over the recorded ones); without it,
// automatically on a device with PyTorch blocks that had an OOM incident or a peak where reserved
// exceeded allocated by more than kFragmentedShare of reserved and kFragmentedMin bytes: then the
// standard candidates (kCandidates) are tried. A setting is named in advice only when its replay shows
// it helps: the OOM does not happen and no request the recording served fails, or the reserved peak
// drops by kHelpsShare and kHelpsMin.
// A replay of the recorded settings that did not reproduce the recording gives no row, advice or
// headroom (only where it parted); a snapshot that contradicts itself is not replayed, nor a device
// that asked nothing of the allocator.
//
// Headroom (an estimate, and it says so): the activations and backward temporaries held at the
// allocated peak, times a factor f, still fit the capacity when
//   reserved_peak + (f - 1) * activations * reserved_peak / allocated_peak <= capacity
// i.e. the setting's reserve overhead scales with what is added, and the rest stays as it was.
//
// Memory: the replays' (one model per device and setting); nothing per event.
#pragma once

#include <string>
#include <vector>

#include "report/allocator_model/replay.h"
#include "report/analyses/report_model.h"
#include "report/reader/trace_reader.h"

namespace gpumemtrace::report {

// What the report asks of the analyses beyond the plain pass: the what-if replays, and whether the
// HTML's allocation timeline is drawn (its bands cost every event a heap step; no other output uses it).
struct AnalysisRequest {
  std::vector<std::string> settings;  // --what-if, PYTORCH_CUDA_ALLOC_CONF text (checked when parsed)
  std::string recorded;               // --recorded-settings: what the trace cannot tell
  bool automatic = true;              // try kCandidates on OOMs and fragmented peaks
  bool replay_recorded = false;       // replay the recorded settings even with nothing to compare (the
                                      // batch what-if's rows join that table: batch_what_if.h)
  bool allocation_timeline = true;    // keep the bands and buckets of allocation_timeline.h
};

inline constexpr const char* kCandidates[] = {"expandable_segments:True", "max_split_size_mb:128",
                                              "max_split_size_mb:512", "roundup_power2_divisions:4"};
inline constexpr double kFragmentedShare = 0.25;
inline constexpr uint64_t kFragmentedMin = 64ull << 20;
inline constexpr double kHelpsShare = 0.05;
inline constexpr uint64_t kHelpsMin = 32ull << 20;

// A replay's fragmentation at its reserved peak, and its reserved bytes over time: the pieces of a row
// of the what-if table, the batch what-if's rows too (batch_what_if.h). The allocated bytes and the
// largest free block never exceed what they are part of.
FragmentationPoint at_peak_of(const allocator_model::ModelStats& stats);
std::vector<TimelineSample> timeline_of(const std::vector<allocator_model::ReservedSample>& samples);

// The settings to replay for this report (the recorded run first, as ""), or none.
std::vector<std::string> what_if_settings(const ProcessReport& report, const AnalysisRequest& request);

// The second pass: hands each event to one replay per setting. settings[0] must be "" (the recorded
// run, checked against the recording).
class WhatIfPass : public TraceHandler {
 public:
  // `report`: the first pass's, for what it learnt of each device's capacity (its OOMs' readings).
  WhatIfPass(const std::vector<std::string>& settings, const std::string& recorded, const ProcessReport& report);
  void on_device(const DeviceInfo& info) override;
  void on_event(const Event& e) override;
  void on_allocator_settings(const Event& e) override;
  // Fills report.what_if, and the advice of its OOMs and peaks.
  void finish(const AnalysisRequest& request, ProcessReport& report);

 private:
  std::vector<std::string> settings_;
  std::vector<allocator_model::AllocatorReplay> replays_;
};

}  // namespace gpumemtrace::report
