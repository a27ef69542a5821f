// report/outputs/text_output.cpp — the text report: one section per analysis, in the order of the
// run's story (story.h: a crashed run opens with its OOM), stacks trimmed.
#include "report/outputs/text_output.h"

#include "report/outputs/process_groups_output.h"
#include "report/outputs/what_if_output.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <string>

#include "report/analyses/story.h"
#include "report/outputs/top_sites_output.h"
#include "report/outputs/units.h"
#include "util/terminal_text.h"

namespace gpumemtrace::report {
namespace {

// Names from the trace are the traced program's: shown with control characters escaped
// (util/terminal_text.h), so a name cannot clear the screen, overwrite a line or start one.
using util::printable;

std::string percent(uint64_t part, uint64_t whole) {
  char text[16];
  std::snprintf(text, sizeof text, "%.0f%%", whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
  return text;
}

std::string device_name(int32_t device) {
  return device < 0 ? std::string("host/unknown device") : "device " + std::to_string(device);
}

// Times are shown from the first event of the process, which is what a person compares.
std::string at(uint64_t time_ns, const ProcessReport& r) {
  return format_seconds(time_ns >= r.first_time_ns ? time_ns - r.first_time_ns : 0);
}

std::string phase_note(const std::string& phase) {
  return phase.empty() ? std::string() : ", phase \"" + printable(phase) + "\"";
}

std::string plural(uint64_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

// Calls `write` for the first `limit` items of `items` that `keep` accepts: --top N shows exactly N
// entries of a section (none for 0).
template <typename Item, typename Keep, typename Write>
void for_top(const std::vector<Item>& items, size_t limit, Keep keep, Write write) {
  size_t shown = 0;
  for (const Item& item : items) {
    if (shown == limit) return;
    if (!keep(item)) continue;
    ++shown;
    write(item);
  }
}

template <typename Item, typename Write>
void for_top(const std::vector<Item>& items, size_t limit, Write write) {
  for_top(items, limit, [](const Item&) { return true; }, write);
}

void write_holders(std::ostream& out, const std::vector<StackBytes>& list, uint64_t total,
                   const TextOptions& options) {
  for_top(list, options.max_items, [&](const StackBytes& item) {
    out << "    " << format_bytes(item.bytes);
    if (total) out << " (" << percent(item.bytes, total) << ")";
    out << " in " << plural(item.count, "allocation") << ":\n";
    write_stack(out, item.stack, "        ", options.stacks);
  });
}

// How the process ended, as the footer says.
std::string ending(const ProcessReport& r) {
  if (!r.complete) return "no footer: the process was killed, ran out of disk or is still running";
  if (r.end == format::End::Dump) return "still running: a dump of its trace so far";
  const std::string ended = how_it_ended(r.end, r.exit_status, r.end_signal);
  return ended.empty() ? "clean exit" : ended;  // a footer that does not say how
}

// A PyTorch snapshot is a moment of a run, taken after the last event of its history.
std::string snapshot_moment(const ProcessReport& r) {
  const uint64_t history = r.events - r.initial_events;
  if (r.events == 0) return "PyTorch memory snapshot, empty: no segment, no block, no history";
  if (history == 0) return "PyTorch memory snapshot without a history: the memory at one moment";
  const std::string entries = plural(history, "event");
  if (!r.header.start_time_ns) return "PyTorch memory snapshot taken after its history of " + entries + " (no times recorded)";
  return "PyTorch memory snapshot taken after " + format_utc(r.header.start_time_ns + r.last_time_ns) + ", the end of its history of " +
         entries + " from " + format_utc(r.header.start_time_ns + r.first_time_ns) + " (" +
         format_seconds(r.last_time_ns - r.first_time_ns) + ")";
}

void write_header(std::ostream& out, const ProcessReport& r) {
  out << "== " << printable(r.file);
  if (r.snapshot) {
    out << ": " << snapshot_moment(r) << "\n";
    for (const std::string& warning : r.warnings) out << "warning: " << printable(warning) << "\n";
    return;
  }
  out << ": pid " << r.header.pid;
  if (r.header.rank >= 0) {
    out << ", rank " << r.header.rank;
    if (r.header.world_size > 0) out << " of " << r.header.world_size;
  }
  if (!r.header.cmdline.empty()) {
    out << " (";
    for (size_t i = 0; i < r.header.cmdline.size(); ++i) out << (i ? " " : "") << printable(r.header.cmdline[i]);
    out << ")";
  }
  const std::string duration = format_seconds(r.last_time_ns - r.first_time_ns);
  out << ", " << r.events << " events over " << duration << ", " << ending(r) << "\n";
  if (r.cut()) out << "INCOMPLETE: cut at " << duration << ": the analysis covers up to " << duration << "\n";
  for (const std::string& warning : r.warnings) out << "warning: " << printable(warning) << "\n";
  if (r.dropped_events) {
    out << "INCOMPLETE: the recorder dropped " << r.dropped_events
        << " events; every figure below may be off\n";
  }
}

void write_summary(std::ostream& out, const ProcessReport& r) {
  for (const DeviceSummary& d : r.devices) {
    out << "  " << device_name(d.device) << (d.name.empty() ? "" : " (" + printable(d.name) + ")") << ": "
        << plural(d.allocations, "allocation") << ", " << plural(d.frees, "free") << ", "
        << d.failed_allocations << " failed";
    if (d.block_allocations) out << ", " << plural(d.block_allocations, "block allocation");
    if (d.block_ooms) out << ", " << d.block_ooms << " allocator OOM";
    out << "; peak " << format_bytes(d.peak_reserved);
    if (d.peak_allocated) out << " reserved, " << format_bytes(d.peak_allocated) << " allocated";
    if (d.after_cap) out << " up to the cap; " << format_bytes(d.after_cap_live) << " live at the end (after the cap, time unknown)";
    if (d.unmatched_frees) out << "; " << d.unmatched_frees << " frees of unknown addresses";
    out << "\n";
    if (r.snapshot && (d.initial_segments || d.initial_blocks)) {
      out << "    " << (r.events == r.initial_events ? "at the snapshot" : "when its history began") << ": "
          << format_bytes(d.initial_reserved) << " reserved in " << plural(d.initial_segments, "segment") << ", "
          << format_bytes(d.initial_allocated) << " in " << plural(d.initial_blocks, "block")
          << " allocated before recording started\n";
    } else if (!r.snapshot && r.initial_events && (d.initial_reserved || d.initial_allocated)) {
      // A flight recorder's window (docs/long-runs.md): what its checkpoint held.
      out << "    when the window began (its checkpoint): " << format_bytes(d.initial_reserved) << " reserved, "
          << format_bytes(d.initial_allocated) << " in allocator blocks, held since before it (never leaks)\n";
    }
  }
  const PinnedHostSummary& host = r.pinned_host;
  if (host.allocations || host.live_bytes) {
    out << "  pinned host memory (host RAM, in no device's figures): " << plural(host.allocations, "allocation")
        << ", " << plural(host.frees, "free") << "; peak " << format_bytes(host.peak_bytes) << " at "
        << at(host.peak_time_ns, r) << "; " << format_bytes(host.live_bytes) << " live at the end\n";
  }
}

void write_leaks(std::ostream& out, const ProcessReport& r, const TextOptions& options) {
  uint64_t cached = 0, suppressed = 0;
  for (const DeviceSummary& d : r.devices) cached += d.cached_bytes;
  for (const LeakGroup& leak : r.leaks) suppressed += leak.suppressed ? leak.bytes : 0;
  // A cut trace ends before the program did, a killed program never got to free what it held: what was
  // live then is shown, never called a leak.
  uint64_t live_count = 0;
  for (const LeakGroup& leak : r.leaks) live_count += leak.suppressed ? 0 : leak.count;
  const std::string killed = r.killed_by_signal() ? "killed by " + signal_name(r.end_signal) : "";
  out << (r.cut() ? "live when the trace was cut (not leaks): "
          : !killed.empty() ? "live when " + killed + " (not leaks): "
          : r.ended_in_oom ? "live when it crashed (out of memory; not leaks): "
                           : std::string("leaks: "));
  if (r.live_when_cut_bytes() == 0) out << "none";
  else out << format_bytes(r.live_when_cut_bytes()) << " in " << plural(live_count, "allocation");
  if (cached) out << "; " << format_bytes(cached) << " cached by an allocator or pool (not leaked)";
  if (suppressed) out << "; " << format_bytes(suppressed) << " suppressed";
  out << "\n";
  auto shown = [](const LeakGroup& leak) { return !leak.suppressed; };
  for_top(r.leaks, options.max_items, shown, [&](const LeakGroup& leak) {
    out << "  " << format_bytes(leak.bytes) << " in " << plural(leak.count, "allocation") << " ("
        << (leak.level == Level::Host ? std::string("pinned host memory")
                                      : device_name(leak.device) + ", " +
                                            (leak.level == Level::Block ? std::string("allocator block") : leak.kind))
        << "), "
        << (r.cut() ? "live when cut, " : !killed.empty() ? "live when killed, " : r.ended_in_oom ? "live when it crashed, " : "")
        << "allocated here:\n";
    write_stack(out, leak.stack, "      ", options.stacks);
  });
}

// A snapshot's blocks are live at a moment of the run, not at its end: no leak verdict, no "exit".
void write_live_at_snapshot(std::ostream& out, const ProcessReport& r, const TextOptions& options) {
  uint64_t cached = 0, live = 0;
  for (const DeviceSummary& d : r.devices) cached += d.cached_bytes;
  for (const HeldAtExit& held : r.held_at_exit) live += held.bytes;
  out << "live when the snapshot was taken (a moment of the run, not its end: no leak verdict): " << format_bytes(live)
      << " in PyTorch blocks";
  if (cached) out << ", " << format_bytes(cached) << " cached by the allocator";
  out << "\n";
  for_top(r.held_at_exit, options.max_items, [&](const HeldAtExit& held) {
    out << "  " << format_bytes(held.bytes) << " in " << plural(held.count, "allocation") << " (" << device_name(held.device)
        << "), allocated here:\n";
    write_stack(out, held.stack, "      ", options.stacks);
  });
}

// Live at exit but not leaked: libraries' state and blocks the program still referenced.
void write_held_at_exit(std::ostream& out, const ProcessReport& r, const TextOptions& options) {
  if (r.held_at_exit.empty()) return;
  uint64_t library = 0, alive = 0, before = 0;
  std::vector<std::pair<std::string, uint64_t>> libraries;  // in order of first appearance (largest first)
  for (const HeldAtExit& held : r.held_at_exit) {
    if (held.reason != "library") {
      (held.reason == "before_recording" ? before : alive) += held.bytes;
      continue;
    }
    library += held.bytes;
    auto it = std::find_if(libraries.begin(), libraries.end(), [&](const auto& l) { return l.first == held.library; });
    if (it == libraries.end()) libraries.emplace_back(held.library, held.bytes);
    else it->second += held.bytes;
  }
  // A crashed run did not exit: what it held then was held when it crashed.
  const char* when = r.ended_in_oom ? "when it crashed" : "at exit";
  out << "held " << when << " (not leaks):";
  if (library) {
    out << " " << format_bytes(library) << " by libraries (";
    for (size_t i = 0; i < libraries.size(); ++i) {
      out << (i ? ", " : "") << printable(libraries[i].first) << " " << format_bytes(libraries[i].second);
    }
    out << ")" << (alive || before ? ";" : "");
  }
  if (alive) out << " " << format_bytes(alive) << " of PyTorch blocks still referenced " << when << " (alive " << when << ")" << (before ? ";" : "");
  if (before) out << " " << format_bytes(before) << " held since before the recording began (its checkpoint)";
  out << "\n";
  for_top(r.held_at_exit, options.max_items, [&](const HeldAtExit& held) {
    out << "  " << format_bytes(held.bytes) << " in " << plural(held.count, "allocation") << " ("
        << device_name(held.device) << ", "
        << (held.reason == "library"            ? "held by " + printable(held.library)
            : held.reason == "before_recording" ? std::string("held since before the recording")
                                                : std::string("alive ") + when)
        << "), allocated here:\n";
    write_stack(out, held.stack, "      ", options.stacks);
  });
}

// "activations 3.1 GiB, optimizer state 1.0 GiB, ...": largest first, empty roles left out.
void write_roles(std::ostream& out, const RoleSplit& split, const char* indent) {
  if (split.empty() || split.bytes[static_cast<size_t>(Role::Other)] == split.total()) return;
  std::vector<std::pair<uint64_t, size_t>> order;
  for (size_t i = 0; i < kRoles; ++i) {
    if (split.bytes[i]) order.emplace_back(split.bytes[i], i);
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  out << indent << "by role: ";
  for (size_t i = 0; i < order.size(); ++i) {
    out << (i ? ", " : "") << role_name(static_cast<Role>(order[i].second)) << " " << format_bytes(order[i].first);
  }
  out << "\n";
}

// `label` + `text`, wrapped at word boundaries to `width` columns (0: no limit); continuation lines
// are indented under the text.
void write_wrapped(std::ostream& out, const std::string& indent, const std::string& label, const std::string& text,
                   size_t width) {
  const std::string lead = indent + label;
  const std::string hang(lead.size(), ' ');
  std::string line = lead;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    const bool fresh = line.size() == lead.size() || line == hang;
    if (!fresh && width && line.size() + 1 + word.size() > width) {
      out << line << "\n";
      line = hang;
    }
    if (line.size() != lead.size() && line != hang) line += ' ';
    line += word;
    start = end + 1;
  }
  out << line << "\n";
}

void write_advice(std::ostream& out, const std::string& advice, const char* indent, const TextOptions& options) {
  if (!advice.empty()) write_wrapped(out, indent, "advice: ", advice, options.stacks.width);
}

void write_fragmentation_point(std::ostream& out, const FragmentationPoint& p) {
  char ratio[16];
  std::snprintf(ratio, sizeof ratio, "%.2f", p.ratio());
  out << "reserved " << format_bytes(p.reserved) << ", allocated " << format_bytes(p.allocated)
      << ", free inside segments " << format_bytes(p.free_in_reserved) << ", largest free block "
      << format_bytes(p.largest_free_block) << ", fragmentation " << ratio;
}

// A capped trace: the peak above is the recorded part's; what was live at the end is all that is
// known of the rest.
void write_after_cap(std::ostream& out, const ProcessReport& r, int32_t device) {
  for (const DeviceSummary& d : r.devices) {
    if (d.device != device || !d.after_cap) continue;
    out << "  up to the cap only; after the cap, time unknown: " << format_bytes(d.after_cap_live)
        << " live at the end";
    if (d.after_cap_allocated) out << " (" << format_bytes(d.after_cap_allocated) << " in blocks)";
    out << "; a higher peak after the cap would not show\n";
  }
}

void write_peaks(std::ostream& out, const ProcessReport& r, const TextOptions& options) {
  for (const PeakReport& peak : r.peaks) {
    const PeakLevel& main = peak.has_blocks ? peak.allocated : peak.reserved;
    out << "peak (" << device_name(peak.device) << "): " << format_bytes(peak.reserved.bytes)
        << " reserved at " << at(peak.reserved.time_ns, r) << phase_note(peak.reserved.phase);
    if (peak.has_blocks) {
      out << "; " << format_bytes(peak.allocated.bytes) << " allocated at " << at(peak.allocated.time_ns, r)
          << phase_note(peak.allocated.phase);
    }
    out << "\n";
    write_after_cap(out, r, peak.device);
    // A snapshot without a history peaks at its one moment: its holders are the live section's, said once.
    if (r.snapshot && r.events == r.initial_events) {
      out << "  the snapshot's one moment (no history): held by the allocations listed as live above\n";
    } else {
      write_holders(out, main.culprits, main.bytes, options);
    }
    if (peak.has_fragmentation) {
      out << "  at the allocated peak: ";
      write_fragmentation_point(out, peak.fragmentation);
      out << "\n";
    }
    if (peak.has_roles) write_roles(out, peak.roles, "  ");
    write_advice(out, peak.advice, "  ", options);
  }
}

// "this site grew by 944.0 MiB over 118 steps and held 952.0 MiB (93% of the device) at the crash",
// the site named by the first line its stack shows.
std::string cause_text(const ProcessReport& r, const OomReport& oom, const TextOptions& options) {
  const OomCause& c = oom.cause;
  const std::vector<std::string> lines = stack_lines(r.growth[c.growth].stack, options.stacks, 0);
  std::string text = (lines.empty() ? std::string("a growing site") : printable(lines.front())) + " grew by " +
                     format_bytes(c.grew_bytes) + " over " + plural(c.steps, "step") + " and held " +
                     format_bytes(c.held_bytes) + " (" + percent(c.held_bytes, c.of_bytes) +
                     (c.of_device ? " of the device" : " of the live memory") + ") at the " +
                     (r.is_crash(oom) ? "crash" : "OOM");
  return text;
}

// The OOM that ended the run first: the verdict, what filled the device, the one advice; then the
// evidence.
void write_ooms(std::ostream& out, const ProcessReport& r, const TextOptions& options) {
  const std::vector<const OomReport*> ooms = ooms_in_story_order(r);
  for_top(ooms, options.max_items, [&](const OomReport* incident) {
    const OomReport& oom = *incident;
    const bool crash = r.is_crash(oom);
    out << "OOM (" << device_name(oom.device) << "): " << format_bytes(oom.requested) << " requested at "
        << at(oom.time_ns, r) << " (" << printable(oom.api.empty() ? oom.op : oom.api) << phase_note(oom.phase)
        << "): " << verdict_name(oom.verdict)
        << (crash ? "; the run ended here" : r.is_story_oom(oom) ? "; the snapshot was taken at this OOM" : "") << "\n";
    if (!oom.explanation.empty()) write_wrapped(out, "  ", "why: ", oom.explanation, options.stacks.width);
    if (oom.has_cause) write_wrapped(out, "  ", "cause: ", cause_text(r, oom, options), options.stacks.width);
    write_advice(out, oom.advice, "  ", options);
    if (oom.attempts_total > 1) {
      out << "  one request, " << oom.attempts_total << " attempts:";
      for (size_t i = 0; i < oom.attempts.size(); ++i) {
        const OomAttempt& a = oom.attempts[i];
        out << (i ? ", " : " ") << printable(a.api) << " " << format_bytes(a.size) << " at " << at(a.time_ns, r);
      }
      if (oom.attempts_total > oom.attempts.size()) out << ", ...";
      out << "\n";
    }
    out << "  live " << format_bytes(oom.live_bytes);
    if (oom.has_blocks) out << " reserved, " << format_bytes(oom.allocated_bytes) << " allocated";
    if (oom.has_device_free) out << "; device free " << (oom.stale_reading ? "about " : "") << format_bytes(oom.device_free);
    if (oom.device_total) out << " of " << format_bytes(oom.device_total);
    if (oom.stale_reading) out << " (its last reading, " << format_bytes(oom.reading_free) << " free, is stale)";
    out << "\n";
    if (oom.has_blocks && oom.fragmentation.reserved) {
      out << "  ";
      write_fragmentation_point(out, oom.fragmentation);
      out << "\n";
    }
    if (oom.has_cause) {
      out << "  the growing site, allocated here:\n";
      write_stack(out, r.growth[oom.cause.growth].stack, "      ", options.stacks);
    }
    out << "  requested here:\n";
    write_stack(out, oom.stack, "      ", options.stacks);
    out << "  top holders:\n";
    write_holders(out, oom.top_holders, oom.has_blocks ? oom.allocated_bytes : oom.live_bytes, options);
    write_roles(out, oom.roles, "  ");
  });
}

void write_failed_calls(std::ostream& out, const ProcessReport& r, const TextOptions& options) {
  if (r.failed_calls.empty()) return;
  uint64_t total = 0;
  for (const FailedCall& call : r.failed_calls) total += call.count;
  out << "failed calls (not out-of-memory): " << total << "\n";
  for_top(r.failed_calls, options.max_items, [&](const FailedCall& call) {
    out << "  " << printable(call.api) << " " << format_bytes(call.size) << ": " << call.error << " (" << call.result << "), "
        << plural(call.count, "time") << ", " << device_name(call.device) << ", first at "
        << at(call.first_time_ns, r) << ":\n";
    write_stack(out, call.stack, "      ", options.stacks);
  });
}

void write_scopes(std::ostream& out, const ProcessReport& r, const TextOptions& options) {
  if (r.scopes_total == 0) return;
  // A scope still open when the trace was cut, the process killed or crashed has no verdict (gates.cpp).
  auto verdict = [&](const ScopeReport& scope) { return scope.closed || !r.ended_early(); };
  auto over_own_limit = [](const ScopeReport& scope) { return scope.over_memory_limit || scope.over_leak_limit; };
  size_t leaking = 0, unchecked = 0, holding = 0, over = 0;
  for (const ScopeReport& scope : r.scopes) {
    if (over_own_limit(scope)) ++over;
    else if (scope.failed || !verdict(scope)) ++unchecked;
    else if (scope.leaked_bytes) ++leaking;
    if (scope.held_until_gc_bytes) ++holding;
  }
  out << "scopes: " << r.scopes_total - unchecked - over << " checked, " << leaking << " leaked";
  if (over) out << ", " << over << " over " << (over == 1 ? "its" : "their") << " own limit";
  if (holding) out << ", " << holding << " held memory until garbage collection";
  if (unchecked) out << ", " << unchecked << " not checked";
  out << "\n";
  auto leaked = [](const ScopeReport& scope) { return scope.leaked_bytes != 0; };
  for_top(r.scopes, options.max_items, leaked, [&](const ScopeReport& scope) {
    out << (verdict(scope) ? "  LEAK " : "  LIVE ") << printable(scope.name) << ": " << format_bytes(scope.leaked_bytes)
        << " in " << plural(scope.leaked_count, "allocation") << " still live at its "
        << (scope.closed ? "end"
            : verdict(scope) ? "trace's end (the scope never closed)"
            : r.cut()          ? "trace's end (cut inside it: no verdict)"
            : r.ended_in_oom   ? "trace's end (the run crashed inside it: no verdict)"
                               : "trace's end (killed inside it: no verdict)")
        << (scope.own_leak_limit ? " (its own leak limit decided it, within pytest)" : "") << ", allocated here:\n";
    for_top(scope.leaks, options.max_items, [&](const StackBytes& leak) {
      out << "    " << format_bytes(leak.bytes) << " in " << plural(leak.count, "allocation") << ":\n";
      write_stack(out, leak.stack, "        ", options.stacks);
    });
    write_advice(out, scope.advice, "    ", options);
  });
  // Not leaks: only a reference cycle kept it, until a garbage collection after the scope's end.
  auto held = [](const ScopeReport& scope) { return scope.held_until_gc_bytes != 0; };
  for_top(r.scopes, options.max_items, held, [&](const ScopeReport& scope) {
    out << "  held until garbage collection: " << printable(scope.name) << ": "
        << format_bytes(scope.held_until_gc_bytes) << " in " << plural(scope.held_until_gc_count, "allocation")
        << " still live at its end, freed by a later collection (cyclic garbage, not a leak), allocated here:\n";
    for_top(scope.held_until_gc, options.max_items, [&](const StackBytes& site) {
      out << "    " << format_bytes(site.bytes) << " in " << plural(site.count, "allocation") << ":\n";
      write_stack(out, site.stack, "        ", options.stacks);
    });
  });
  // A test that went over its own limit failed for it (in pytest): named with the limit, not as
  // "not checked", and never as clean.
  for_top(r.scopes, options.max_items, over_own_limit, [&](const ScopeReport& scope) {
    const bool pytest = scope.api == "pytest";
    out << "  OVER ITS OWN LIMIT " << printable(scope.name) << ": "
        << (scope.over_memory_limit ? (pytest ? "gpu_memory_limit" : "its memory limit") : "")
        << (scope.over_memory_limit && scope.over_leak_limit ? " and " : "")
        << (scope.over_leak_limit ? (pytest ? "gpu_leak_limit" : "its leak limit") : "")
        << (pytest ? " (pytest's output has the figures)" : "") << "\n";
  });
  auto not_checked = [&](const ScopeReport& scope) { return scope.failed && !over_own_limit(scope); };
  for_top(r.scopes, options.max_items, not_checked, [&](const ScopeReport& scope) {
    out << "  not checked: " << (scope.api == "pytest" ? "the test failed: " : "the scope failed: ") << printable(scope.name)
        << "\n";
  });
}

void write_growth(std::ostream& out, const ProcessReport& r, const TextOptions& options) {
  for_top(r.growth, options.max_items, [&](const GrowthReport& g) {
    out << "growth ("
        << (g.level == Level::Host ? std::string("pinned host memory")
                                   : device_name(g.device) + (g.level == Level::Block ? ", blocks" : ""))
        << "): "
        << format_bytes(g.first_bytes) << " -> " << format_bytes(g.peak_bytes) << " in " << g.rises
        << " rises, rising in " << g.windows_rising << " of " << g.windows_total
        << " windows of the run; " << format_bytes(g.final_bytes) << " live at the end\n";
    write_stack(out, g.stack, "      ", options.stacks);
    write_advice(out, g.advice, "  ", options);
  });
}

}  // namespace

std::string pair_name(const ProcessPair& pair) {
  if (pair.by_rank) return process_name(pair.base);
  return "pid " + std::to_string(pair.base.pid) + " -> " + std::to_string(pair.next.pid);
}

void write_stack(std::ostream& out, const Stack& stack, const std::string& indent, const StackViewOptions& options) {
  for (const std::string& line : stack_lines(stack, options, indent.size())) out << indent << printable(line) << "\n";
}

void write_text(std::ostream& out, const std::vector<ProcessReport>& reports, const TextOptions& options) {
  const bool grouped = options.groups && options.groups->processes();
  if (grouped) write_process_groups_note(out, *options.groups, reports.size());
  for (const ProcessReport& r : reports) {
    write_header(out, r);
    if (r.snapshot && r.events == 0) {  // said in the header: nothing more to say
      out << "\n";
      continue;
    }
    write_summary(out, r);
    for (Section section : story_order(r)) {
      switch (section) {
        case Section::Ooms: write_ooms(out, r, options); break;
        case Section::Leaks:  // a snapshot's blocks are live at a moment of the run, never leaks
          if (r.snapshot) write_live_at_snapshot(out, r, options);
          else write_leaks(out, r, options);
          break;
        case Section::HeldAtExit:
          if (!r.snapshot) write_held_at_exit(out, r, options);
          break;
        case Section::Scopes: write_scopes(out, r, options); break;
        case Section::Peaks: write_peaks(out, r, options); break;
        case Section::FailedCalls: write_failed_calls(out, r, options); break;
        case Section::Growth:
          write_growth(out, r, options);
          // A snapshot that contradicts itself gets no growth verdict either way (its warning says why).
          if (r.growth.empty() && !r.inconsistent_input) out << "growth: none\n";
          break;
        case Section::TimeToOom: write_time_to_oom_text(out, r, options); break;
        case Section::WhatIf: write_what_if_text(out, r, options); break;
      }
    }
    if (options.top_sites) write_top_sites(out, r, options);
    out << "\n";
  }
  if (grouped) write_process_groups_text(out, *options.groups);
  // Over every process, those summed in groups too.
  ProcessTotals totals;
  if (grouped) totals = options.groups->all;
  else for (size_t i = 0; i < reports.size(); ++i) totals.add(reports[i], i);
  if (totals.processes > 1) {
    auto extremes = [&](const ProcessTotals::Extreme& lo, const ProcessTotals::Extreme& hi, const char* what) {
      out << "spread over " << totals.processes << " processes, " << what << ": min " << format_bytes(lo.value)
          << " (pid " << lo.pid << "), max " << format_bytes(hi.value) << " (pid " << hi.pid << ")\n";
    };
    extremes(totals.peak_min, totals.peak_max, "peak");
    extremes(totals.leaked_min, totals.leaked_max, "leaked");
  }
}

void write_diff_text(std::ostream& out, const DiffReport& diff, const TextOptions& options) {
  for (const std::string& warning : diff.warnings) out << "warning: " << printable(warning) << "\n";
  // Which process was compared with which, when there is a choice to show.
  if (diff.pairs.size() > 1 || !diff.only_base.empty() || !diff.only_new.empty()) {
    for (const ProcessPair& pair : diff.pairs) {
      out << "pair " << pair_name(pair) << ": " << printable(pair.base.file) << " (pid " << pair.base.pid << ") -> "
          << printable(pair.next.file) << " (pid " << pair.next.pid << ")\n";
    }
  }
  for (const PeakDelta& p : diff.peaks) {
    out << "peak (" << pair_name(diff.pairs[p.process]) << ", " << device_name(p.device) << "): " << format_bytes(p.base_bytes)
        << " -> " << format_bytes(p.new_bytes) << " (" << format_signed_bytes(p.delta()) << ")\n";
    for_top(p.culprits, options.max_items, [&](const StackDelta& d) {
      out << "    " << format_signed_bytes(d.delta()) << " (" << format_bytes(d.base_bytes) << " -> "
          << format_bytes(d.new_bytes) << "):\n";
      write_stack(out, d.stack, "        ", options.stacks);
    });
  }
  out << "leaks" << (diff.only_base.empty() && diff.only_new.empty() ? "" : " (of the pairs)") << ": "
      << format_bytes(diff.base_leaked) << " -> " << format_bytes(diff.new_leaked) << "\n";
  for_top(diff.leaks, options.max_items, [&](const StackDelta& d) {
    out << "    " << format_signed_bytes(d.delta()) << " (" << format_bytes(d.base_bytes) << " in " << d.base_count
        << " -> " << format_bytes(d.new_bytes) << " in " << d.new_count << "):\n";
    write_stack(out, d.stack, "        ", options.stacks);
  });
}

}  // namespace gpumemtrace::report
