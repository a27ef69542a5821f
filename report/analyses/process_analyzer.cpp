// report/analyses/process_analyzer.cpp — dispatch of each event to the model and the analyses, and
// the assembly of the ProcessReport at the end.
#include "report/analyses/process_analyzer.h"

#include <algorithm>

#include "report/analyses/advice.h"
#include "report/analyses/leaks.h"
#include "report/analyses/peaks.h"
#include "report/analyses/story.h"
#include "report/analyses/time_to_oom.h"
#include "report/outputs/units.h"

namespace gpumemtrace::report {

ProcessAnalyzer::ProcessAnalyzer(const SymbolTable& symbols, const Suppressions& suppressions,
                                 bool allocation_timeline)
    : symbols_(symbols),
      suppressions_(suppressions),
      roles_(symbols, suppressions),
      scopes_(model_, symbols, suppressions),
      scope_peaks_(roles_),
      top_sites_(model_),
      timeline_(model_, roles_, symbols, &top_sites_),
      allocation_timeline_(allocation_timeline) {
  // Only the HTML page draws the allocation timeline, and it costs every release a step of its
  // budgets: kept only when asked for.
  if (allocation_timeline_) model_.add_listener(&timeline_);  // before roles_: it asks a released block's role
  model_.add_listener(&roles_);
  model_.add_listener(&top_sites_);
  model_.add_listener(&scopes_);
  model_.add_listener(&scope_peaks_);  // after roles_: it asks an acquired holding's class
  model_.add_listener(&incidents_);
}

// What the events showed live at the cap is stale (frees after it were not written): it ends here,
// once, before the first live record or, with none, at the footer.
void ProcessAnalyzer::end_live_set_at_cap() {
  if (live_set_replaced_) return;
  live_set_replaced_ = true;
  model_.end_history();
  roles_.end_history();
  scopes_.at_no_event();  // what the cap's resets release was not freed by anything seen
  incidents_.close_all(model_);
  std::vector<int32_t> devices;
  for (const auto& [device, state] : model_.devices()) devices.push_back(device);
  for (int32_t device : devices) {
    Event reset;
    reset.op = Op::Reset;
    reset.device = device;
    reset.t = std::max(capped_->t, last_time_);
    reset.seq = capped_->seq;
    model_.apply(reset, events_ + ++live_records_, 0);
  }
}

void ProcessAnalyzer::on_live(const Event& live) {
  end_live_set_at_cap();  // the reader hands live records only after the capped record
  Event e = live;
  e.t = std::max(capped_->t, last_time_);  // the model's clock does not go back
  model_.apply(e, events_ + ++live_records_, autograd_.site_for(e));
}

void ProcessAnalyzer::on_footer(const Footer& footer) {
  not_written_ = footer.not_written;
  footer_ = footer;
  if (capped_) end_live_set_at_cap();  // a clean end with nothing live: nothing leaked
}

void ProcessAnalyzer::on_device(const DeviceInfo& info) {
  MemoryModel::DeviceState& state = model_.device_state(info.device);
  state.summary.name = info.name;
  if (info.has_free && info.total && info.free > info.total) {
    return model_.note_inconsistent_reading(info.device, info.free, info.total);  // its total is not used
  }
  if (info.total) state.summary.total = info.total;
}

void ProcessAnalyzer::on_event(const Event& e) {
  ++events_;
  initial_events_ += e.initial;
  if (events_ == 1) first_time_ = e.t;
  last_time_ = std::max(last_time_, e.t);
  bool widened = false;
  // Growth windows count the (time-ordered) stream, not seq: merged delayed events carry the seq
  // of their drain (docs/trace-format.md).
  const uint32_t window = clock_.tick(e, &widened);
  model_.set_window(window, widened);

  switch (e.op) {
    case Op::Mark:
      mark_phase_ = std::string(e.label);
      model_.set_phase(mark_phase_);
      ++marks_total_;
      if (marks_.size() < kMaxMarks) marks_.push_back(Mark{e.seq, e.t, model_.phase()});
      return;
    case Op::ScopeBegin:
    case Op::ScopeEnd:
      return on_scope(e);
    default:
      break;
  }
  if (nvtx_.seen()) {
    const std::string& ranges = nvtx_.phase_of(e.tid);
    const std::string& phase = ranges.empty() ? mark_phase_ : ranges;
    if (phase != model_.phase()) model_.set_phase(phase);
  }
  roles_.set_time(e.t);
  scopes_.at(e);
  if (incidents_.tracking()) incidents_.before_event(e, model_);
  const SiteId site = autograd_.site_for(e);
  // The pass a block falls in follows from its role, known before the block is applied (passes.h).
  model_.set_pass(e.op == Op::BlockAlloc ? passes_.on_block(roles_.role_of_new_block(site)) : 0);
  model_.apply(e, events_, site);
  if ((e.op == Op::Alloc && e.result == 0 && e.kind != Kind::Virtual) || e.op == Op::BlockAlloc) last_acquire_ = e.t;
  sample(e);
  if (e.op == Op::BlockOom || (e.op == Op::Alloc && e.result != 0)) {
    incidents_.on_failure(e, model_, roles_, settings_.cap(e.device));
  }
  if (allocation_timeline_ && is_out_of_memory(e)) timeline_.on_oom(e.device);
  if (e.op == Op::MemInfo && model_.reading_used()) incidents_.on_meminfo(e, model_);
}

// The device's timeline, with the role split of each kept sample.
void ProcessAnalyzer::sample(const Event& e) {
  if (e.op == Op::Trim) return;  // a pool's event: no device state
  MemoryModel::DeviceState& state = model_.device_state(e.device);
  if (!state.timeline.due()) return;
  TimelineSample s;
  s.time_ns = e.t;
  s.reserved = state.reserved.live();
  s.allocated = state.allocated.live();
  s.roles = roles_.split(e.device);
  s.has_roles = s.roles.bytes[static_cast<size_t>(Role::Other)] != s.roles.total();
  state.timeline.store(s);
}

void ProcessAnalyzer::on_scope(const Event& e) {
  if (e.api == format::kApiNvtx) return nvtx_.on_scope(e);  // phases, not leak checks
  if (e.api == kBackwardScopeApi) {
    if (e.op == Op::ScopeBegin) {
      roles_.on_backward_begin();
      passes_.on_backward_begin();
    }
    if (autograd_.on_backward_scope(e)) roles_.on_backward_end();
    return;
  }
  scopes_.on_scope(e, events_);
  scope_peaks_.on_scope(e, events_);
}

void ProcessAnalyzer::on_pause(const Event& e) {
  if (e.op == Op::Pause && !paused_since_) {
    ++pauses_;
    paused_since_ = std::max<uint64_t>(e.t, 1);
  } else if (e.op == Op::Resume && paused_since_) {
    paused_ns_ += e.t > paused_since_ ? e.t - paused_since_ : 0;
    paused_since_ = 0;
  }
}

ProcessReport ProcessAnalyzer::finish(const std::string& file, const ReadResult& read) {
  model_.settle_all();
  ProcessReport out;
  out.file = file;
  out.header = header_;
  out.complete = read.footer_seen;
  out.truncated = read.truncated;
  out.end = footer_.end;
  out.exit_status = footer_.exit_status;
  out.end_signal = footer_.signal;
  out.events = events_;
  out.initial_events = initial_events_;
  out.dropped_events = dropped_;
  out.first_time_ns = first_time_;
  // The process's time is that of its events: the footer's end_time also counts the recorder's own
  // work at exit (flushing, symbolizing), which is no part of the program's run.
  out.last_time_ns = last_time_;
  out.warnings = read.warnings;
  out.snapshot = header_.backend == format::kBackendPytorchSnapshot;
  if (model_.replaced_live()) {
    out.warnings.push_back(std::to_string(model_.replaced_live()) +
                           " allocations at an address that was still live (a free was not recorded)");
  }
  if (model_.orphan_blocks()) {
    out.warnings.push_back(std::to_string(model_.orphan_blocks()) + " blocks (" +
                           std::to_string(model_.orphan_bytes()) +
                           " bytes) were still live when their segment was freed: ended with it, not leaks");
  }
  if (pauses_) {
    const uint64_t open = paused_since_ && last_time_ > paused_since_ ? last_time_ - paused_since_ : 0;
    out.warnings.push_back("stacks were paused " + std::string(pauses_ == 1 ? "once" : std::to_string(pauses_) + " times") +
                           ", " + format_seconds(paused_ns_ + open) +
                           " in all (gpumemtrace.stop() to start()): what was allocated then is counted, "
                           "shown as \"(no stack recorded)\"");
  }
  if (capped_) {
    const std::string at = format_seconds(events_ && capped_->t > first_time_ ? capped_->t - first_time_ : 0);
    out.warnings.push_back(
        "detail stopped at " + at + " (event " + std::to_string(capped_->seq) +
        ", GPUMEMTRACE_MAX_BYTES=" + std::to_string(capped_->max_bytes) + "): the analysis covers up to " + at +
        "; leaks are what was live at the end" +
        (not_written_ ? " (" + std::to_string(not_written_) + " events after it not written)" : ""));
  }
  for (const auto& [device, state] : model_.devices()) {
    if (!state.inconsistent_readings) continue;
    out.warnings.push_back("device " + std::to_string(device) + ": " + std::to_string(state.inconsistent_readings) +
                           (state.inconsistent_readings == 1 ? " reading" : " readings") +
                           " of its memory with more free bytes than its total (" +
                           format_bytes(state.inconsistent_free) + " free of " +
                           format_bytes(state.inconsistent_total) + "): figures that contradict each other, not used");
  }
  out.marks = marks_;
  out.marks_total = marks_total_;

  collect_peaks(model_, roles_, symbols_, out);
  collect_exit_state(model_, symbols_, suppressions_, out);
  incidents_.finish(out, symbols_, model_);
  find_oom_crash(out, last_acquire_);
  if (out.ended_early()) {  // what was live when the trace was cut, the process killed or crashed is not a leak
    for (DeviceSummary& d : out.devices) d.leaked_bytes = 0;
  }
  collect_growth(model_, clock_.windows_used(), symbols_, out.growth);
  top_sites_.finish(symbols_, out);              // first: the timeline ranks its stacks by the sites
  if (allocation_timeline_) timeline_.finish(out);
  collect_time_to_oom(model_, out);  // after the OOMs: none is forecast on a device that had one
  for (DeviceSummary& d : out.devices) {
    for (const OomReport& oom : out.ooms) d.ooms += oom.device == d.device ? 1 : 0;
  }
  for (FragmentationReport& f : out.fragmentation) {
    for (const OomReport& oom : out.ooms) {
      if (oom.device == f.device && oom.has_blocks) {
        f.at_ooms.push_back(FragmentationReport::AtOom{oom.seq, oom.time_ns, oom.fragmentation});
      }
    }
  }
  scopes_.finish(out);
  scope_peaks_.finish(out);
  nvtx_.finish(out.last_time_ns, out);
  add_advice(out);
  tell_story(out);  // after the advice it chooses among
  return out;
}

}  // namespace gpumemtrace::report
