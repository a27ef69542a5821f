// report/outputs/json_output.cpp — the report as one JSON object (keys in docs/report.md).
#include "report/outputs/json_output.h"
#include "report/outputs/what_if_output.h"

#include <algorithm>

#include "report/analyses/story.h"
#include "report/outputs/units.h"
#include "report/outputs/top_sites_output.h"

namespace gpumemtrace::report {
using nlohmann::json;

namespace {

json stack_bytes_list(const std::vector<StackBytes>& list, uint64_t total) {
  json out = json::array();
  for (const StackBytes& item : list) {
    json entry = {{"bytes", item.bytes}, {"count", item.count}, {"stack", stack_to_json(item.stack)}};
    if (total) entry["share"] = static_cast<double>(item.bytes) / static_cast<double>(total);
    out.push_back(std::move(entry));
  }
  return out;
}

json peak_level_json(const PeakLevel& level) {
  return {{"bytes", level.bytes},
          {"time_ns", level.time_ns},
          {"seq", level.seq},
          {"phase", level.phase},
          {"culprits", stack_bytes_list(level.culprits, level.bytes)},
          {"other_bytes", level.other_bytes}};
}

json roles_json(const RoleSplit& split) {
  json out = json::object();
  for (size_t i = 0; i < kRoles; ++i) out[role_name(static_cast<Role>(i))] = split.bytes[i];
  return out;
}

json advice_json(const std::string& advice) { return advice.empty() ? json(nullptr) : json(advice); }

json fragmentation_json(const FragmentationPoint& point) {
  return {{"reserved", point.reserved},
          {"allocated", point.allocated},
          {"free_in_reserved", point.free_in_reserved},
          {"largest_free_block", point.largest_free_block},
          {"ratio", point.ratio()}};
}

json timeline_json(const std::vector<TimelineSample>& samples) {
  json timeline = json::array();
  for (const TimelineSample& s : samples) {
    json sample = {{"time_ns", s.time_ns}, {"reserved", s.reserved}, {"allocated", s.allocated}};
    if (s.has_roles) sample["roles"] = roles_json(s.roles);
    timeline.push_back(std::move(sample));
  }
  return timeline;
}

json process_json(const ProcessReport& r) {
  json devices = json::array();
  for (const DeviceSummary& d : r.devices) {
    devices.push_back({{"device", d.device},
                       {"name", d.name},
                       {"total", d.total},
                       {"events", d.events},
                       {"allocations", d.allocations},
                       {"frees", d.frees},
                       {"failed_allocations", d.failed_allocations},
                       {"block_allocations", d.block_allocations},
                       {"block_frees", d.block_frees},
                       {"block_ooms", d.block_ooms},
                       {"unmatched_frees", d.unmatched_frees},
                       {"duration_ns", d.last_time_ns - d.first_time_ns},
                       {"peak_bytes", d.peak_reserved},
                       {"peak_allocated_bytes", d.peak_allocated},
                       {"leaked_bytes", d.leaked_bytes},
                       {"cached_bytes", d.cached_bytes},
                       {"library_bytes", d.library_bytes},
                       {"alive_at_exit_bytes", d.alive_at_exit_bytes},
                       {"ooms", d.ooms},
                       {"initial", r.snapshot || r.initial_events ? json{{"segments", d.initial_segments},
                                                     {"blocks", d.initial_blocks},
                                                     {"reserved_bytes", d.initial_reserved},
                                                     {"allocated_bytes", d.initial_allocated}}
                                              : json(nullptr)},
                       {"after_cap", d.after_cap ? json{{"live_bytes", d.after_cap_live},
                                                        {"allocated_bytes", d.after_cap_allocated}}
                                                  : json(nullptr)},
                       {"timeline", timeline_json(d.timeline)}});
  }
  const PinnedHostSummary& host = r.pinned_host;
  const json pinned_host = host.allocations || host.live_bytes
                               ? json{{"allocations", host.allocations}, {"frees", host.frees},
                                      {"peak_bytes", host.peak_bytes}, {"peak_time_ns", host.peak_time_ns},
                                      {"live_bytes", host.live_bytes}}
                               : json(nullptr);
  json marks = json::array();
  for (const Mark& m : r.marks) marks.push_back({{"seq", m.seq}, {"time_ns", m.time_ns}, {"label", m.label}});
  json story = json::array();
  for (Section section : story_order(r)) story.push_back(section_key(section));
  return {{"file", r.file},
          {"pid", r.header.pid},
          {"ppid", r.header.ppid},
          {"rank", r.header.rank >= 0 ? json(r.header.rank) : json(nullptr)},
          {"local_rank", r.header.local_rank >= 0 ? json(r.header.local_rank) : json(nullptr)},
          {"world_size", r.header.world_size >= 0 ? json(r.header.world_size) : json(nullptr)},
          {"exe", r.header.exe},
          {"cmdline", r.header.cmdline},
          {"host", r.header.host},
          {"complete", r.complete},
          {"killed", !r.complete || r.killed_by_signal()},
          {"end", r.end == format::End::Unknown ? json(nullptr) : json(format::end_name(r.end))},
          {"exit_status", r.exit_status >= 0 ? json(r.exit_status) : json(nullptr)},
          {"signal", r.killed_by_signal() ? json(signal_name(r.end_signal)) : json(nullptr)},
          {"truncated", r.truncated},
          {"incomplete", r.dropped_events > 0},
          {"cut", r.cut()},
          {"cut_at_ns", r.cut() ? r.last_time_ns - r.first_time_ns : 0},
          {"events", r.events},
          // A PyTorch snapshot: a moment of the run (taken after its history's last event), not its end.
          {"snapshot", r.snapshot ? json{{"history_events", r.events - r.initial_events},
                                         {"initial_events", r.initial_events},
                                         {"inconsistent", r.inconsistent_input},
                                         {"taken_at_oom", r.taken_at_oom}}
                                  : json(nullptr)},
          {"dropped_events", r.dropped_events},
          {"duration_ns", r.last_time_ns - r.first_time_ns},
          // The header's clocks: a time_ns of this process is start_time_ns + (time_ns - clock_start_ns)
          // in wall-clock time, comparable across hosts (gpumem-report merge: which rank OOMed first).
          {"start_time_ns", r.header.start_time_ns},
          {"clock_start_ns", r.header.clock_start_ns},
          {"leaked_bytes", r.leaked_bytes()},
          {"ended_in_oom", r.ended_in_oom},
          {"story", story},
          {"warnings", r.warnings},
          {"devices", devices},
          {"pinned_host", pinned_host},
          {"marks", marks},
          {"marks_total", r.marks_total}};
}


// min / max / mean over processes, with the pid of the extremes (e.g. which rank peaks highest).
json spread_of(const ProcessTotals::Extreme& lo, const ProcessTotals::Extreme& hi, uint64_t sum, uint64_t processes) {
  return {{"min", lo.value}, {"min_pid", lo.pid}, {"max", hi.value}, {"max_pid", hi.pid},
          {"mean", processes ? static_cast<double>(sum) / static_cast<double>(processes) : 0.0}};
}

json summary_json(const ProcessTotals& t) {
  return {{"processes", t.processes}, {"events", t.events}, {"allocations", t.allocations}, {"frees", t.frees},
          {"failed_allocations", t.failed_allocations}, {"block_ooms", t.block_ooms},
          {"dropped_events", t.dropped_events}, {"leaked_bytes", t.leaked_bytes}, {"leaked_count", t.leaked_count},
          {"cached_bytes", t.cached_bytes}, {"peak_bytes", t.peak_max.value}, {"library_bytes", t.library_bytes},
          {"alive_at_exit_bytes", t.alive_at_exit_bytes}, {"ooms", t.ooms}, {"failed_calls", t.failed_calls},
          {"scopes", t.scopes}, {"leaking_scopes", t.leaking_scopes}, {"complete", t.not_complete == 0},
          {"incomplete", t.incomplete > 0}, {"cut", t.cut > 0}, {"live_when_cut_bytes", t.live_when_cut_bytes},
          {"killed_by_signal", t.killed_by_signal}, {"live_when_killed_bytes", t.live_when_killed_bytes},
          {"ended_in_oom", t.ended_in_oom}, {"live_when_crashed_bytes", t.live_when_crashed_bytes}};
}

// A run of many processes: the groups of those not reported in full (docs/report.md, "Many processes").
json groups_json(const ProcessGroups& groups) {
  auto group_json = [](const ProcessGroup& g) {
    const ProcessTotals& t = g.totals;
    return json{{"exe", g.exe}, {"rank", g.rank >= 0 ? json(g.rank) : json(nullptr)}, {"processes", t.processes},
                {"first_pid", g.first.pid}, {"first_file", g.first.file}, {"events", t.events},
                {"peak_bytes", spread_of(t.peak_min, t.peak_max, t.peak_bytes_sum, t.processes)},
                {"leaked_bytes", t.leaked_bytes}, {"leaked_count", t.leaked_count}, {"ooms", t.ooms},
                {"failed_allocations", t.failed_allocations}, {"cut", t.cut}, {"killed_by_signal", t.killed_by_signal},
                {"incomplete", t.incomplete}};
  };
  json list = json::array();
  for (const ProcessGroup& g : groups.groups) list.push_back(group_json(g));
  json out = {{"processes", groups.processes()}, {"groups", std::move(list)}};
  if (groups.other_groups) {
    out["other"] = group_json(groups.other);
    out["other"]["groups"] = groups.other_groups;
  }
  return out;
}

}  // namespace

json stack_to_json(const Stack& stack) {
  json frames = json::array();
  for (const LogicalFrame& f : stack) {
    json frame = {{"function", f.function}};
    if (!f.file.empty()) frame["file"] = f.file;
    if (f.line) frame["line"] = f.line;
    if (!f.module.empty()) frame["module"] = f.module;
    if (f.inlined) frame["inlined"] = true;
    if (f.python) frame["lang"] = format::kLangPython;  // as in the trace
    frames.push_back(std::move(frame));
  }
  return frames;
}

Stack stack_from_json(const json& frames) {
  Stack stack;
  for (const json& f : frames) {
    if (!f.is_object()) continue;
    LogicalFrame frame;
    frame.function = f.value("function", "");
    frame.file = f.value("file", "");
    frame.line = f.value("line", 0u);
    frame.module = f.value("module", "");
    frame.inlined = f.value("inlined", false);
    frame.python = f.value("lang", "") == format::kLangPython;
    stack.push_back(std::move(frame));
  }
  return stack;
}

json reports_to_json(const std::vector<ProcessReport>& reports, const ProcessGroups* groups) {
  // Every process counts in the summary: those reported here and those summed in groups.
  ProcessTotals totals;
  if (groups && groups->processes()) totals = groups->all;
  else for (size_t i = 0; i < reports.size(); ++i) totals.add(reports[i], i);
  json processes = json::array(), leaks = json::array(), peaks = json::array(), ooms = json::array(),
       growth = json::array(), fragmentation = json::array(), held = json::array(),
       failed_calls = json::array(), scopes = json::array(), what_if = json::array(), time_to_oom = json::array(),
       top_sites = json::array();
  for (const ProcessReport& r : reports) {
    append_what_if_json(r, what_if, time_to_oom);
    const json who = {{"pid", r.header.pid}, {"file", r.file}};
    for (const HeldAtExit& h : r.held_at_exit) {
      json entry = who;
      entry.update({{"device", h.device}, {"level", level_name(h.level)}, {"kind", h.kind}, {"bytes", h.bytes},
                    {"count", h.count}, {"stack", stack_to_json(h.stack)}, {"reason", h.reason}});
      if (h.reason == "library") entry["library"] = h.library;
      if (r.ended_in_oom) entry["live_when_crashed"] = true;  // held when the run ended in an OOM
      held.push_back(std::move(entry));
    }
    for (const FailedCall& call : r.failed_calls) {
      json entry = who;
      entry.update({{"device", call.device}, {"api", call.api}, {"result", call.result}, {"error", call.error},
                    {"size", call.size}, {"count", call.count}, {"first_time_ns", call.first_time_ns},
                    {"stack", stack_to_json(call.stack)}});
      failed_calls.push_back(std::move(entry));
    }
    for (const ScopeReport& scope : r.scopes) {
      json entry = who;
      json over = json::array();
      if (scope.over_memory_limit) over.push_back("memory");
      if (scope.over_leak_limit) over.push_back("leak");
      entry.update({{"name", scope.name}, {"api", scope.api}, {"closed", scope.closed}, {"checked", !scope.failed},
                    {"own_leak_limit", scope.own_leak_limit}, {"over_own_limits", std::move(over)},
                    {"begin_time_ns", scope.begin_time_ns}, {"end_time_ns", scope.end_time_ns},
                    {"leaked_bytes", scope.leaked_bytes}, {"leaked_count", scope.leaked_count},
                    {"peak_bytes", scope.peak_bytes},
                    {"leaks", stack_bytes_list(scope.leaks, 0)},
                    {"held_until_gc_bytes", scope.held_until_gc_bytes},
                    {"held_until_gc_count", scope.held_until_gc_count},
                    {"held_until_gc", stack_bytes_list(scope.held_until_gc, 0)},
                    {"advice", advice_json(scope.advice)}});
      scopes.push_back(std::move(entry));
    }
    processes.push_back(process_json(r));
    append_top_sites_json(r, who, top_sites);
    for (const LeakGroup& leak : r.leaks) {
      json entry = who;
      entry.update({{"device", leak.device}, {"level", level_name(leak.level)}, {"kind", leak.kind},
                    {"bytes", leak.bytes}, {"count", leak.count}, {"stack", stack_to_json(leak.stack)},
                    {"suppressed", leak.suppressed}});
      if (leak.suppressed) entry["suppressed_by"] = leak.suppressed_by;
      if (r.cut()) entry["live_when_cut"] = true;  // not a leak: the trace ends before the program did
      if (r.killed_by_signal()) entry["live_when_killed"] = true;  // not a leak: it never got to free it
      if (r.ended_in_oom) entry["live_when_crashed"] = true;  // not a leak: the run ended in an OOM
      leaks.push_back(std::move(entry));
    }
    for (const PeakReport& peak : r.peaks) {
      json entry = who;
      entry["device"] = peak.device;
      entry.update(peak_level_json(peak.reserved));
      if (peak.has_blocks) entry["allocated"] = peak_level_json(peak.allocated);
      if (peak.has_fragmentation) entry["fragmentation"] = fragmentation_json(peak.fragmentation);
      if (peak.has_roles) {
        entry["roles"] = roles_json(peak.roles);
        entry["roles_time_ns"] = peak.roles_time_ns;
      }
      entry["advice"] = advice_json(peak.advice);
      peaks.push_back(std::move(entry));
    }
    const size_t growth_base = growth.size();  // this process's growth[] entries start here
    for (const OomReport& oom : r.ooms) {
      json entry = who;
      entry.update({{"device", oom.device}, {"seq", oom.seq}, {"time_ns", oom.time_ns}, {"op", oom.op},
                    {"api", oom.api}, {"result", oom.result}, {"requested", oom.requested},
                    {"stack", stack_to_json(oom.stack)}, {"live_bytes", oom.live_bytes},
                    {"allocated_bytes", oom.allocated_bytes},
                    {"top_holders", stack_bytes_list(oom.top_holders, 0)},
                    {"device_free", oom.has_device_free ? json(oom.device_free) : json(nullptr)},
                    {"device_total", oom.device_total ? json(oom.device_total) : json(nullptr)},
                    {"verdict", verdict_name(oom.verdict)}, {"explanation", oom.explanation},
                    {"phase", oom.phase}, {"attempts_total", oom.attempts_total},
                    {"roles", roles_json(oom.roles)}, {"advice", advice_json(oom.advice)}});
      json attempts = json::array();
      for (const OomAttempt& a : oom.attempts) {
        attempts.push_back({{"seq", a.seq}, {"time_ns", a.time_ns}, {"op", a.op}, {"api", a.api},
                            {"result", a.result}, {"size", a.size}});
      }
      entry["attempts"] = std::move(attempts);
      entry["cap"] = oom.cap_fraction > 0 ? json{{"fraction", oom.cap_fraction},
                                                 {"bytes", oom.cap_bytes ? json(oom.cap_bytes) : json(nullptr)},
                                                 {"source", oom.cap_source}}
                                          : json(nullptr);
      if (oom.has_blocks) entry["fragmentation"] = fragmentation_json(oom.fragmentation);
      entry["crash"] = r.is_crash(oom);
      entry["stale_reading"] = oom.stale_reading ? json{{"free", oom.reading_free}, {"reserved", oom.reading_reserved}}
                                                 : json(nullptr);
      entry["address_gaps"] = oom.has_address_gaps ? json{{"span", oom.address_gaps.span},
                                                          {"inside", oom.address_gaps.inside},
                                                          {"largest", oom.address_gaps.largest}}
                                                   : json(nullptr);
      json cause = nullptr;
      if (oom.has_cause) {
        const OomCause& c = oom.cause;
        cause = {{"growth", growth_base + c.growth}, {"stack", stack_to_json(r.growth[c.growth].stack)},
                 {"grew_bytes", c.grew_bytes}, {"steps", c.steps}, {"held_bytes", c.held_bytes},
                 {"share", c.of_bytes ? static_cast<double>(c.held_bytes) / static_cast<double>(c.of_bytes) : 0.0},
                 {"share_of", c.of_device ? "device" : "live"}};
      }
      entry["cause"] = std::move(cause);
      ooms.push_back(std::move(entry));
    }
    for (const GrowthReport& g : r.growth) {
      json entry = who;
      entry.update({{"device", g.device}, {"level", level_name(g.level)}, {"bytes", g.peak_bytes - g.first_bytes},
                    {"count", g.rises}, {"first_bytes", g.first_bytes}, {"peak_bytes", g.peak_bytes},
                    {"final_bytes", g.final_bytes}, {"rises", g.rises},
                    {"windows_rising", g.windows_rising}, {"windows_total", g.windows_total},
                    {"stack", stack_to_json(g.stack)}, {"advice", advice_json(g.advice)}});
      growth.push_back(std::move(entry));
    }
    for (const FragmentationReport& f : r.fragmentation) {
      json entry = who;
      json timeline = timeline_json(f.timeline);
      json at_ooms = json::array();
      for (const auto& at : f.at_ooms) {
        json point = fragmentation_json(at.point);
        point["seq"] = at.seq;
        point["time_ns"] = at.time_ns;
        at_ooms.push_back(std::move(point));
      }
      entry.update({{"device", f.device}, {"timeline", timeline}, {"at_peak", fragmentation_json(f.at_peak)},
                    {"peak_time_ns", f.peak_time_ns}, {"at_ooms", at_ooms}});
      fragmentation.push_back(std::move(entry));
    }
  }
  json out = {{"summary", summary_json(totals)}, {"processes", processes}, {"leaks", leaks}, {"held_at_exit", held},
              {"scopes", scopes}, {"peaks", peaks}, {"ooms", ooms}, {"failed_calls", failed_calls},
              {"growth", growth}, {"fragmentation", fragmentation}, {"what_if", what_if},
              {"time_to_oom", time_to_oom}, {"top_sites", top_sites}};
  if (totals.processes > 1) {
    out["spread"] = {{"peak_bytes", spread_of(totals.peak_min, totals.peak_max, totals.peak_bytes_sum, totals.processes)},
                     {"leaked_bytes", spread_of(totals.leaked_min, totals.leaked_max, totals.leaked_bytes, totals.processes)}};
  }
  if (groups && groups->processes()) out["process_groups"] = groups_json(*groups);
  return out;
}

json diff_to_json(const DiffReport& diff) {
  auto deltas = [](const std::vector<StackDelta>& list) {
    json out = json::array();
    for (const StackDelta& d : list) {
      out.push_back({{"stack", stack_to_json(d.stack)}, {"base_bytes", d.base_bytes}, {"new_bytes", d.new_bytes},
                     {"delta_bytes", d.delta()}, {"base_count", d.base_count}, {"new_count", d.new_count}});
    }
    return out;
  };
  auto process = [](const DiffProcess& p) {
    return json{{"file", p.file}, {"pid", p.pid}, {"rank", p.rank >= 0 ? json(p.rank) : json(nullptr)}};
  };
  auto processes = [&](const std::vector<DiffProcess>& list) {
    json out = json::array();
    for (const DiffProcess& p : list) out.push_back(process(p));
    return out;
  };
  json pairs = json::array();
  for (const ProcessPair& pair : diff.pairs) {
    pairs.push_back({{"base", process(pair.base)}, {"new", process(pair.next)},
                     {"by", pair.by_rank ? "rank" : "start order"}});
  }
  json peaks = json::array();
  for (const PeakDelta& p : diff.peaks) {
    peaks.push_back({{"process", p.process}, {"base_pid", p.base_pid}, {"new_pid", p.new_pid},
                     {"rank", p.rank >= 0 ? json(p.rank) : json(nullptr)},
                     {"device", p.device}, {"base_bytes", p.base_bytes}, {"new_bytes", p.new_bytes},
                     {"delta_bytes", p.delta()}, {"culprits", deltas(p.culprits)}});
  }
  return {{"base", diff.base_files}, {"new", diff.new_files}, {"pairs", pairs},
          {"only_base", processes(diff.only_base)}, {"only_new", processes(diff.only_new)},
          {"peaks", peaks}, {"leaks", deltas(diff.leaks)},
          {"summary", {{"base_leaked_bytes", diff.base_leaked}, {"new_leaked_bytes", diff.new_leaked},
                       {"delta_leaked_bytes", static_cast<int64_t>(diff.new_leaked) - static_cast<int64_t>(diff.base_leaked)}}},
          {"warnings", diff.warnings}};
}

}  // namespace gpumemtrace::report
