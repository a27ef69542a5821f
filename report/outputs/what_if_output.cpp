// report/outputs/what_if_output.cpp — see what_if_output.h. Formats only: every figure comes from the
// report model.
#include "report/outputs/what_if_output.h"

#include <cmath>
#include <cstdio>

#include "report/outputs/json_output.h"
#include "report/outputs/units.h"

namespace gpumemtrace::report {
using nlohmann::json;

namespace {

std::string factor_text(double factor) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1fx", std::floor(factor * 10) / 10);
  return text;
}

json row_json(const WhatIfRow& row) {
  json timeline = json::array();
  for (const TimelineSample& s : row.timeline) timeline.push_back({{"time_ns", s.time_ns}, {"reserved", s.reserved}});
  json ooms = json::array();
  for (bool happens : row.ooms_still_happen) ooms.push_back(happens);
  return {{"settings", row.settings},
          {"recorded", row.recorded},
          {"automatic", row.automatic},
          {"reserved_peak", row.reserved_peak},
          {"allocated_peak", row.allocated_peak},
          {"at_peak", at_peak_json(row.at_peak)},
          {"cache_flushes", row.cache_flushes},
          {"retries", row.retries},
          {"new_ooms", row.new_ooms},
          {"ooms_still_happen", ooms},
          {"timeline", timeline},
          {"batch", row.batch ? json(row.batch) : json(nullptr)},
          {"estimate", row.estimate},
          {"reserved_range", row.has_range ? json::array({row.reserved_low, row.reserved_high}) : json(nullptr)}};
}

}  // namespace

json at_peak_json(const FragmentationPoint& p) {
  return {{"reserved", p.reserved},
          {"allocated", p.allocated},
          {"free_in_reserved", p.free_in_reserved},
          {"largest_free_block", p.largest_free_block},
          {"ratio", p.ratio()}};
}

std::string format_duration(double seconds) {
  if (seconds < 1) return "under a second";
  const auto total = static_cast<uint64_t>(seconds);
  const uint64_t days = total / 86400, hours = total / 3600 % 24, minutes = total / 60 % 60, secs = total % 60;
  char text[64];
  if (days) {
    std::snprintf(text, sizeof text, "about %llu d %llu h", static_cast<unsigned long long>(days),
                  static_cast<unsigned long long>(hours));
  } else if (hours) {
    std::snprintf(text, sizeof text, "about %llu h %llu min", static_cast<unsigned long long>(hours),
                  static_cast<unsigned long long>(minutes));
  } else if (minutes) {
    std::snprintf(text, sizeof text, "about %llu min %llu s", static_cast<unsigned long long>(minutes),
                  static_cast<unsigned long long>(secs));
  } else {
    std::snprintf(text, sizeof text, "about %llu s", static_cast<unsigned long long>(secs));
  }
  return text;
}

void append_what_if_json(const ProcessReport& r, json& what_if, json& time_to_oom) {
  const json who = {{"pid", r.header.pid}, {"file", r.file}};
  for (const WhatIfReport& w : r.what_if) {
    json entry = who;
    json rows = json::array();
    for (const WhatIfRow& row : w.rows) rows.push_back(row_json(row));
    json ooms = json::array();
    for (size_t i = 0; i < w.oom_seqs.size(); ++i) ooms.push_back({{"seq", w.oom_seqs[i]}, {"requested", w.oom_requested[i]}});
    json replay = {{"faithful", w.faithful},
                   {"segment_ops_compared", w.segment_ops_compared},
                   {"blocks_compared", w.blocks_compared},
                   {"divergence", nullptr}};
    if (w.has_divergence) {
      replay["divergence"] = {{"seq", w.divergence_seq}, {"time_ns", w.divergence_time_ns}, {"what", w.divergence}};
    }
    json headroom = nullptr;
    if (w.has_headroom) {
      headroom = {{"estimate", true},
                  {"activation_bytes", w.activation_bytes},
                  {"factor_recorded", w.headroom_recorded},
                  {"factor_best", w.headroom_best},
                  {"best_settings", w.best_settings}};
    }
    entry.update({{"device", w.device},
                  {"recorded_settings", w.recorded_settings},
                  {"settings_from", w.settings_recorded ? "trace" : "inferred"},
                  {"settings_option", w.settings_option.empty() ? json(nullptr) : json(w.settings_option)},
                  {"settings_changes", w.settings_changes},
                  {"unmodeled_options", w.unmodeled},
                  {"capacity", w.capacity},
                  {"ooms", ooms},
                  {"rows", rows},
                  {"replay", replay},
                  {"headroom", headroom},
                  {"advice", w.advice.empty() ? json(nullptr) : json(w.advice)}});
    what_if.push_back(std::move(entry));
  }
  for (const TimeToOomReport& t : r.time_to_oom) {
    json entry = who;
    entry.update({{"device", t.device},
                  {"level", level_name(t.level)},
                  {"estimate", true},
                  {"bytes_per_step", t.bytes_per_step},
                  {"steps", t.steps},
                  {"bytes_per_second", t.bytes_per_second},
                  {"seconds_per_step", t.seconds_per_step},
                  {"free_bytes", t.free_bytes},
                  {"free_known", t.free_known},
                  {"steps_left", t.steps_left},
                  {"seconds_left", t.seconds_left < 0 ? json(nullptr) : json(t.seconds_left)},
                  {"stack", stack_to_json(t.stack)}});
    time_to_oom.push_back(std::move(entry));
  }
}

void write_what_if_text(std::ostream& out, const ProcessReport& r, const TextOptions& options) {
  (void)options;
  for (const WhatIfReport& w : r.what_if) {
    out << "what-if (device " << w.device << "): PyTorch's allocator replayed under "
        << (w.recorded_settings.empty() ? std::string("the default settings") : "`" + w.recorded_settings + "`")
        << " (the recorded run, ";
    const std::string option = "--recorded-settings `" + w.settings_option + "`";
    if (w.settings_recorded) {
      out << "settings from the trace" << (w.settings_option.empty() ? "" : ", with " + option + " over them");
    } else {
      out << "settings not in the trace: " << (w.settings_option.empty() ? "inferred" : option + ", the rest inferred");
    }
    if (w.settings_changes) {
      out << "; " << w.settings_changes << " change" << (w.settings_changes == 1 ? "" : "s") << " during the run";
    }
    out << ")";
    if (w.faithful) {
      out << ": matches the recording (" << w.segment_ops_compared << " segment operations, " << w.blocks_compared
          << " blocks at the same offsets)\n";
    } else {
      out << ": differs from the recording at event " << w.divergence_seq << ": " << w.divergence
          << "; no what-if figures: a replay that does not reproduce the run predicts nothing of it\n";
      continue;
    }
    const size_t width = 30;
    out << "  " << padded("settings", width) << padded("reserved peak", 15) << padded("allocated peak", 16)
        << padded("fragmentation", 15) << padded("flushes", 9) << padded("retries", 9);
    for (size_t i = 0; i < w.oom_seqs.size(); ++i) out << "OOM " << (i + 1) << " (" << format_bytes(w.oom_requested[i]) << ")  ";
    out << "\n";
    for (const WhatIfRow& row : w.rows) {
      std::string name = row.recorded ? "recorded run" : row.settings;
      if (name.size() >= width) name = name.substr(0, width - 4) + "...";
      out << "  " << padded(name, width) << padded(format_bytes(row.reserved_peak), 15)
          << padded(format_bytes(row.allocated_peak), 16) << padded(ratio_text(row.at_peak.ratio()), 15)
          << padded(std::to_string(row.cache_flushes), 9) << padded(std::to_string(row.retries), 9);
      for (bool happens : row.ooms_still_happen) out << padded(happens ? "happens" : "avoided", 8 + 6);
      if (row.new_ooms) out << row.new_ooms << " new OOM" << (row.new_ooms == 1 ? "" : "s");
      out << "\n";
    }
    if (!w.unmodeled.empty()) {
      out << "  note: the recorded settings name options the model does not replay:";
      for (size_t i = 0; i < w.unmodeled.size(); ++i) out << (i ? ", " : " ") << w.unmodeled[i];
      out << "\n";
    }
    if (!w.advice.empty()) out << "  advice: " << w.advice << "\n";
    if (w.has_headroom) {
      out << "  headroom (an estimate): about " << factor_text(w.headroom_recorded)
          << " the activations at the peak (" << format_bytes(w.activation_bytes) << ") would fit";
      if (!w.best_settings.empty()) out << ", " << factor_text(w.headroom_best) << " with `" << w.best_settings << "`";
      out << ": a batch that much larger, if activations scale with the batch and the rest stays as it was\n";
    }
  }
}

void write_time_to_oom_text(std::ostream& out, const ProcessReport& r, const TextOptions& options) {
  size_t shown = 0;
  for (const TimeToOomReport& t : r.time_to_oom) {
    if (shown++ == options.max_items) break;
    out << "time to OOM (device " << t.device << (t.level == Level::Block ? ", blocks" : "") << ", an estimate): grows "
        << format_bytes(t.bytes_per_step) << " per step (" << t.steps << " steps";
    if (t.seconds_per_step > 0) out << ", one every " << format_seconds(static_cast<uint64_t>(t.seconds_per_step * 1e9));
    out << "); " << format_bytes(t.free_bytes) << (t.free_known ? " free" : " free if nothing else uses the device")
        << " at the end: at this rate the device is full after about " << format_count(t.steps_left) << " more steps";
    if (t.seconds_left >= 0) out << " (" << format_duration(t.seconds_left) << ")";
    out << "\n";
    write_stack(out, t.stack, "      ", options.stacks);
  }
}

}  // namespace gpumemtrace::report
