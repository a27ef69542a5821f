// report/analyses/process_analyzer.h — the analyses of one process in one streaming pass.
//
// The reader hands it events in timeline order. It replays them into the shared memory model
// (memory_model.h) and hands each to the analyses that need it, each in its own file:
//   autograd_attribution  frameless PyTorch blocks -> the backward() call that allocated them
//   roles                 live memory by role, at each peak and each OOM
//   passes                the forward/backward pass or optimizer step each block falls in (growth)
//   scopes                per-scope (per-test) leak checks, apart from what a garbage collection
//                         freed later (held_until_gc)
//   scope_peaks           each scope's own high-water mark (a test's peak)
//   nvtx_phases           NVTX ranges: the phase of each event's thread (marks name it otherwise)
//   oom_incidents         one incident per failed request, with a verdict; other failed calls
//   growth                call sites that keep growing (its clock ticks here)
//   allocation_timeline   every allocation that matters as a band, the rest aggregated (HTML)
//   top_sites             call sites by bytes, count and temporary allocations (a model listener)
// and, from the model at the end: peaks, fragmentation, leaks (leaks.h), then advice and the story
// of the run (story.h: how it ended, what caused its OOMs, which advice stands).
//
// Memory: the model's and each analysis's own bounds; nothing per event. Single-threaded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "report/allocator_model/recorded_settings.h"
#include "report/analyses/allocation_timeline.h"
#include "report/analyses/autograd_attribution.h"
#include "report/analyses/growth.h"
#include "report/analyses/memory_model.h"
#include "report/analyses/nvtx_phases.h"
#include "report/analyses/oom_incidents.h"
#include "report/analyses/passes.h"
#include "report/analyses/report_model.h"
#include "report/analyses/roles.h"
#include "report/analyses/scope_peaks.h"
#include "report/analyses/scopes.h"
#include "report/analyses/suppressions.h"
#include "report/analyses/top_sites.h"
#include "report/reader/trace_reader.h"

namespace gpumemtrace::report {

class ProcessAnalyzer : public TraceHandler {
 public:
  // `symbols` is filled by the reader as it goes (a stack is defined before its first use);
  // `suppressions` holds the user's rules and the library rules in force; `allocation_timeline`:
  // whether the HTML's allocation timeline is kept (AnalysisRequest, what_if.h).
  ProcessAnalyzer(const SymbolTable& symbols, const Suppressions& suppressions, bool allocation_timeline = true);

  void on_header(const Header& header) override { header_ = header; }
  void on_device(const DeviceInfo& info) override;
  void on_event(const Event& event) override;
  void on_dropped(uint64_t count) override { dropped_ += count; }
  void on_footer(const Footer& footer) override;
  // A capped trace (GPUMEMTRACE_MAX_BYTES): the analyses cover the events up to the cap; the live
  // records then replace the model's live set, so that leaks are what was live at the end.
  void on_capped(const Capped& capped) override { capped_ = capped; }
  void on_live(const Event& live) override;
  // The allocator's settings (the memory-fraction cap an OOM verdict names).
  void on_allocator_settings(const Event& e) override { settings_.apply(e); }
  // A garbage collection that freed objects (what a test left live and it freed was no leak).
  void on_gc(const Event& e) override { scopes_.on_gc(e); }
  // Stacks paused by the program (gpumemtrace.stop()): counted, for the warning that says why events
  // have no stack.
  void on_pause(const Event& e) override;

  ProcessReport finish(const std::string& file, const ReadResult& read);

  // For an export of every event (report/outputs/export_events.h): a listener that sees each holding
  // the model acquires and releases, after the analyses (so role_of() knows an acquired one); the
  // role of a live holding; the phase (NVTX range or mark) of the last event applied.
  void add_model_listener(ModelListener* listener) { model_.add_listener(listener); }
  Role role_of(const Holding& h) const { return roles_.role_of(h); }
  const std::string& phase() const { return model_.phase(); }

 private:
  void on_scope(const Event& e);
  void sample(const Event& e);
  void end_live_set_at_cap();

  const SymbolTable& symbols_;
  const Suppressions& suppressions_;
  Header header_;
  uint64_t dropped_ = 0;
  std::optional<Capped> capped_;
  uint64_t not_written_ = 0;
  bool live_set_replaced_ = false;
  uint64_t live_records_ = 0;  // model positions after the events: one per live record and reset
  Footer footer_;  // the footer's account of how the process ended (end, exit_status, signal)
  uint64_t first_time_ = 0;
  uint64_t last_time_ = 0;
  uint64_t last_acquire_ = 0;  // of the last allocation or block that succeeded (story.h: a crash)
  uint64_t events_ = 0;
  uint64_t initial_events_ = 0;  // a snapshot's state before its history
  uint64_t pauses_ = 0;          // "pause" records that paused stacks
  uint64_t paused_ns_ = 0;       // their time, up to their "resume" (closed pauses only)
  uint64_t paused_since_ = 0;    // the pause under way; 0: none
  std::vector<Mark> marks_;
  uint64_t marks_total_ = 0;
  std::string mark_phase_;  // the last mark's label: the phase of threads with no NVTX range open

  MemoryModel model_;
  GrowthClock clock_;
  AutogradAttribution autograd_;
  Roles roles_;
  Passes passes_;
  Scopes scopes_;
  NvtxPhases nvtx_;
  OomIncidents incidents_;
  allocator_model::RecordedSettings settings_;
  ScopePeaks scope_peaks_;
  TopSites top_sites_;
  AllocationTimelineAnalysis timeline_;  // after roles_ and top_sites_, which it reads
  bool allocation_timeline_;              // timeline_ is fed and finished (the HTML page asked for)
};

}  // namespace gpumemtrace::report
