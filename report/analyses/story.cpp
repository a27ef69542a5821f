// report/analyses/story.cpp — the story of a run (rules in story.h).
#include "report/analyses/story.h"

#include <algorithm>
#include <cstdio>

#include "report/analyses/diff.h"

namespace gpumemtrace::report {
namespace {

// Of the report's growing sites, those of `device` at `level`.
template <typename Visit>
void for_growth(const ProcessReport& r, int32_t device, Level level, Visit visit) {
  for (size_t i = 0; i < r.growth.size(); ++i) {
    if (r.growth[i].device == device && r.growth[i].level == level) visit(i, r.growth[i]);
  }
}

bool ended_badly(const ProcessReport& r) {
  if (r.cut() || r.killed_by_signal()) return true;
  return (r.end == format::End::Exit || r.end == format::End::QuickExit) && r.exit_status > 0;
}

// What the request lacked: its bytes less the room the verdict's figures show for it (0: it fit, and
// nothing that filled the device explains it).
uint64_t shortfall(const OomReport& oom) {
  const uint64_t inside = oom.has_blocks ? oom.fragmentation.free_in_reserved : 0;
  uint64_t room = inside;
  if (oom.verdict == Verdict::Capacity) {
    if (oom.device_total && oom.requested > oom.device_total) return 0;  // too large whatever filled the device
    room += oom.has_device_free ? oom.device_free : 0;
  } else if (oom.cap_bytes) {  // the allocator's limit: the room under its cap
    room += oom.cap_bytes - std::min(oom.cap_bytes, oom.live_bytes);
  }
  return oom.requested > room ? oom.requested - room : 0;
}

// The growing site that filled the device before `oom` (story.h), if any.
bool find_cause(const ProcessReport& r, const OomReport& oom, OomCause* cause) {
  if (oom.verdict != Verdict::Capacity && oom.verdict != Verdict::AllocatorLimit) return false;
  const uint64_t short_of = shortfall(oom);
  if (short_of == 0) return false;
  bool found = false;
  for_growth(r, oom.device, oom.has_blocks ? Level::Block : Level::Allocation, [&](size_t i, const GrowthReport& g) {
    if (g.first_time_ns > oom.time_ns) return;  // it started growing after this OOM
    const std::string signature = stack_signature(g.stack);
    for (const StackBytes& holder : oom.top_holders) {
      if (holder.bytes <= g.first_bytes || holder.bytes - g.first_bytes < short_of) continue;
      if (stack_signature(holder.stack) != signature || (found && holder.bytes <= cause->held_bytes)) continue;
      found = true;
      cause->growth = i;
      cause->grew_bytes = g.peak_bytes - g.first_bytes;
      cause->steps = g.rises ? g.rises - 1 : 0;
      cause->held_bytes = holder.bytes;
      cause->of_device = oom.device_total != 0;
      cause->of_bytes = oom.device_total ? oom.device_total : oom.has_blocks ? oom.allocated_bytes : oom.live_bytes;
    }
  });
  return found;
}

// The bytes of `peak` (at its main level) that growing sites held.
uint64_t grown_at_peak(const ProcessReport& r, const PeakReport& peak) {
  const PeakLevel& main = peak.has_blocks ? peak.allocated : peak.reserved;
  uint64_t grown = 0;
  for_growth(r, peak.device, peak.has_blocks ? Level::Block : Level::Allocation, [&](size_t, const GrowthReport& g) {
    const std::string signature = stack_signature(g.stack);
    for (const StackBytes& culprit : main.culprits) {
      if (stack_signature(culprit.stack) == signature) grown += culprit.bytes;
    }
  });
  return grown;
}

bool peak_made_of_growth(const ProcessReport& r, const PeakReport& peak) {
  const uint64_t bytes = (peak.has_blocks ? peak.allocated : peak.reserved).bytes;
  return bytes && grown_at_peak(r, peak) * 4 >= bytes;
}

// An OOM that growth caused takes the growth's advice, over whatever advice it had (advice.h, what_if.h).
void cause_advice_wins(ProcessReport& r) {
  for (OomReport& oom : r.ooms) {
    if (oom.has_cause) oom.advice = r.growth[oom.cause.growth].advice;
  }
}

std::string percent(uint64_t part, uint64_t whole) {
  char text[16];
  std::snprintf(text, sizeof text, "%.0f%%", whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
  return text;
}

}  // namespace

void find_oom_crash(ProcessReport& r, uint64_t last_acquire_ns) {
  r.ended_in_oom = r.taken_at_oom = false;
  // A snapshot has no end of its own to tell a failure: it is a moment, and its history ending in an
  // OOM says it was taken there.
  if (r.ooms.empty() || !(r.snapshot || ended_badly(r))) return;
  size_t last = 0;
  for (size_t i = 1; i < r.ooms.size(); ++i) {
    if (r.ooms[i].last_attempt_ns >= r.ooms[last].last_attempt_ns) last = i;
  }
  if (last_acquire_ns > r.ooms[last].last_attempt_ns) return;  // the program went on allocating: it recovered
  (r.snapshot ? r.taken_at_oom : r.ended_in_oom) = true;
  r.crash_oom = last;
}

void tell_story(ProcessReport& r) {
  for (OomReport& oom : r.ooms) oom.has_cause = find_cause(r, oom, &oom.cause);
  cause_advice_wins(r);
  // A peak made of growth: the growth, not its roles (a smaller batch would only postpone the OOM). An
  // allocator setting the what-if replay finds later is added to it (reserved bytes it would save).
  // In a run that ended in an OOM (or a snapshot taken at one), the crash's advice is its device's one
  // advice: that device's peak gives none of its own (it would repeat it, or point elsewhere).
  for (PeakReport& peak : r.peaks) {
    if (r.opens_with_oom() && r.ooms[r.crash_oom].device == peak.device) {
      peak.advice.clear();
      continue;
    }
    if (!peak_made_of_growth(r, peak)) continue;
    const uint64_t bytes = (peak.has_blocks ? peak.allocated : peak.reserved).bytes;
    peak.advice = percent(grown_at_peak(r, peak), bytes) +
                  " of this peak is memory that grows every iteration (see growth): fix that first";
  }
  // A forecast of the OOM that happened: the run ended in an OOM of its device, or the site caused one
  // after its last rise.
  auto forecast_done = [&](const TimeToOomReport& t) {
    if (r.opens_with_oom() && r.ooms[r.crash_oom].device == t.device) return true;
    for (const OomReport& oom : r.ooms) {
      if (!oom.has_cause || oom.device != t.device) continue;
      const GrowthReport& g = r.growth[oom.cause.growth];
      if (g.level == t.level && oom.last_attempt_ns >= g.last_rise_time_ns &&
          stack_signature(g.stack) == stack_signature(t.stack)) {
        return true;
      }
    }
    return false;
  };
  r.time_to_oom.erase(std::remove_if(r.time_to_oom.begin(), r.time_to_oom.end(), forecast_done), r.time_to_oom.end());
}

void reconcile_what_if(ProcessReport& r) {
  cause_advice_wins(r);  // the replays may have named a setting for an OOM that growth caused
  // A larger batch is not what this run can afford: its device ran out of memory (with the batch it
  // had), or growth is the problem.
  for (WhatIfReport& w : r.what_if) {
    bool no_room = false;
    for (const OomReport& oom : r.ooms) no_room = no_room || oom.device == w.device;
    for (const PeakReport& peak : r.peaks) no_room = no_room || (peak.device == w.device && peak_made_of_growth(r, peak));
    if (no_room) w.has_headroom = false;
  }
}

std::vector<Section> story_order(const ProcessReport& r) {
  if (r.opens_with_oom()) {
    return {Section::Ooms, Section::Leaks, Section::HeldAtExit, Section::Scopes, Section::Peaks,
            Section::FailedCalls, Section::Growth, Section::TimeToOom, Section::WhatIf};
  }
  return {Section::Leaks, Section::HeldAtExit, Section::Scopes, Section::Peaks, Section::Ooms,
          Section::FailedCalls, Section::Growth, Section::TimeToOom, Section::WhatIf};
}

const char* section_key(Section section) {
  switch (section) {
    case Section::Ooms: return "ooms";
    case Section::Leaks: return "leaks";
    case Section::HeldAtExit: return "held_at_exit";
    case Section::Scopes: return "scopes";
    case Section::Peaks: return "peaks";
    case Section::FailedCalls: return "failed_calls";
    case Section::Growth: return "growth";
    case Section::TimeToOom: return "time_to_oom";
    case Section::WhatIf: return "what_if";
  }
  return "";
}

std::vector<const OomReport*> ooms_in_story_order(const ProcessReport& r) {
  std::vector<const OomReport*> order;
  if (r.opens_with_oom()) order.push_back(&r.ooms[r.crash_oom]);
  for (size_t i = 0; i < r.ooms.size(); ++i) {
    if (!r.opens_with_oom() || i != r.crash_oom) order.push_back(&r.ooms[i]);
  }
  return order;
}

}  // namespace gpumemtrace::report
