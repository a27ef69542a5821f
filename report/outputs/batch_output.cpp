// report/outputs/batch_output.cpp — see batch_output.h.
#include "report/outputs/batch_output.h"

#include <cmath>
#include <cstdio>

#include "report/outputs/json_output.h"
#include "report/outputs/units.h"
#include "report/outputs/what_if_output.h"
#include "util/terminal_text.h"

namespace gpumemtrace::report {
using nlohmann::json;
using util::printable;

namespace {

const char* kind_name(RequestFit::Kind kind) {
  switch (kind) {
    case RequestFit::Scales: return "scales";
    case RequestFit::Constant: return "constant";
    case RequestFit::BySite: return "by_site";
    case RequestFit::Unmatched: return "unmatched";
  }
  return "unmatched";
}

std::string plural(uint64_t n, const char* one, const char* many) {
  return format_count(static_cast<double>(n)) + " " + (n == 1 ? one : many);
}

std::string percent_change(uint64_t value, uint64_t reference) {
  if (!reference) return "";
  char text[32];
  std::snprintf(text, sizeof text, "%+.1f%%", 100.0 * (static_cast<double>(value) - static_cast<double>(reference)) /
                                                  static_cast<double>(reference));
  return text;
}

// "+2.0 MiB" per unit of batch (a slope may be a fraction of a byte, or negative).
std::string slope_text(double b) {
  const uint64_t magnitude = static_cast<uint64_t>(std::llround(std::fabs(b)));
  if (magnitude == 0 && b != 0) return b > 0 ? "+under 1 B" : "-under 1 B";
  return (b < 0 ? "-" : "+") + format_bytes(magnitude);
}

std::string bytes_at(double a, double b, uint64_t batch) {
  const double size = a + b * static_cast<double>(batch);
  return format_bytes(size > 0 ? static_cast<uint64_t>(std::llround(size)) : 0);
}

json refusal_json(const BatchRefusal& r) {
  return {{"device", r.device},     {"request", r.request},   {"seq", r.seq},
          {"time_ns", r.time_ns},   {"requested", r.requested}, {"reserved", r.reserved},
          {"capacity", r.capacity}, {"recorded", r.recorded}, {"stack", stack_to_json(r.stack)}};
}

json row_json(const BatchRow& row) {
  return {{"settings", row.settings},
          {"batch", row.batch},
          {"recorded_sizes", row.recorded_sizes},
          {"reserved_peak", row.reserved_peak},
          {"reserved_range", row.has_range ? json::array({row.reserved_low, row.reserved_high}) : json(nullptr)},
          {"allocated_peak", row.allocated_peak},
          {"at_peak", at_peak_json(row.at_peak)},
          {"cache_flushes", row.cache_flushes},
          {"retries", row.retries},
          {"capacity", row.capacity ? json(row.capacity) : json(nullptr)},
          {"refused", row.refused ? refusal_json(row.refusal) : json(nullptr)}};
}

std::string settings_name(const std::string& settings) { return settings.empty() ? "recorded settings" : settings; }

void write_refusal(std::ostream& out, const BatchRefusal& r, const std::string& indent, const TextOptions& options) {
  out << format_bytes(r.requested) << " requested";
  if (r.capacity) out << " with " << format_bytes(r.reserved) << " of " << format_bytes(r.capacity) << " reserved";
  out << " (request " << format_count(static_cast<double>(r.request + 1)) << ", event " << r.seq
      << (r.recorded ? ", refused in the recorded run too" : "") << "):\n";
  write_stack(out, r.stack, indent, options.stacks);
}

void write_runs(std::ostream& out, const BatchReport& b) {
  for (size_t i = 0; i < b.runs.size(); ++i) {
    const BatchRunInfo& run = b.runs[i];
    out << (i ? "; " : "") << "batch " << run.batch << ": " << printable(run.file);
    if (run.batch_from != "--batch-of") out << " (" << run.batch_from << ")";
  }
}

void write_fit(std::ostream& out, const BatchReport& b) {
  if (b.estimate) {
    out << "  requests: " << plural(b.scales, "scales", "scale")
        << " with the batch (activations, backward temporaries), " << format_count(static_cast<double>(b.constant))
        << " stay (parameters, gradients, optimizer state, other)\n";
    return;
  }
  out << "  requests matched by stack and order: " << plural(b.scales, "scales", "scale") << " with the batch, "
      << format_count(static_cast<double>(b.constant)) << (b.constant == 1 ? " does" : " do") << " not";
  if (b.by_site) out << ", " << format_count(static_cast<double>(b.by_site)) << " take the line of their stack (more of them in one run)";
  if (b.unmatched) out << ", " << format_count(static_cast<double>(b.unmatched)) << " not matched in another run (kept as recorded)";
  out << "\n";
  if (b.not_linear) {
    out << "  sizes: NOT LINEAR in the batch: " << plural(b.not_linear, "request is off its", "requests are off their")
        << " straight line by up to " << format_bytes(static_cast<uint64_t>(std::llround(b.max_residual))) << " ("
        << b.batches << " batch sizes): the reserved peak is a range, from the line (widened further from the "
        << "batches recorded) to the curve through the sizes\n";
  } else if (!b.linearity_checked) {
    out << "  sizes: a straight line through " << b.batches
        << " batch sizes for each request: whether they are linear is not checked (a run at a third batch size would)\n";
  } else {
    out << "  sizes: every matched request's size is a straight line in the batch (" << b.batches << " batch sizes)\n";
  }
}

void write_device(std::ostream& out, const BatchReport& b, const BatchDevice& d, bool with_settings,
                  const TextOptions& options) {
  out << "  device " << d.device;
  if (d.total || d.capacity) {
    out << " (";
    if (d.total) out << format_bytes(d.total);
    if (d.capacity) out << (d.total ? "; " : "") << "PyTorch could reserve " << format_bytes(d.capacity);
    out << ")";
  }
  if (d.faithful) {
    out << ": the model reproduces " << printable(b.template_file) << "'s recording\n";
  } else {
    out << ": the model's replay of " << printable(b.template_file) << " differs from its recording at event "
        << d.divergence_seq << " (" << d.divergence
        << "): the figures below are the model's, not checked against this run's allocator\n";
  }
  out << "    " << padded("batch", with_settings ? 40 : 18) << padded("reserved peak", 36) << padded("allocated peak", 16)
      << padded("fragmentation", 15) << "out of memory\n";
  for (const BatchRow& row : d.rows) {
    std::string name = std::to_string(row.batch) + (row.recorded_sizes ? " (recorded)" : "");
    if (with_settings) name += ", " + settings_name(row.settings);
    std::string reserved = format_bytes(row.reserved_peak);
    if (row.has_range && row.reserved_low != row.reserved_high) {
      reserved += " (" + format_bytes(row.reserved_low) + " to " + format_bytes(row.reserved_high) + ")";
    }
    out << "    " << padded(name, with_settings ? 40 : 18) << padded(reserved, 36)
        << padded(format_bytes(row.allocated_peak), 16) << padded(ratio_text(row.at_peak.ratio()), 15);
    if (!row.refused) {
      out << "no";
      if (row.capacity) out << ": " << format_bytes(row.capacity > row.reserved_peak ? row.capacity - row.reserved_peak : 0) << " to spare";
      out << "\n";
      continue;
    }
    out << "yes: ";
    write_refusal(out, row.refusal, "        ", options);
  }
}

void write_max(std::ostream& out, const BatchReport& b, const BatchMax& m, bool with_settings, const TextOptions& options) {
  out << "  largest batch that fits" << (with_settings ? " (" + settings_name(m.settings) + ")" : std::string()) << ": ";
  if (m.capacity_unknown) {
    out << "not known: the trace does not say how much memory a device had\n";
    return;
  }
  if (m.unbounded) {
    out << "any: no request grows with the batch\n";
    return;
  }
  if (m.largest) out << m.largest;
  else out << "none, not even batch 1";
  if (m.has_range) out << " (between " << m.largest_low << " and " << m.largest_high << ": the sizes are not linear)";
  if (b.estimate) out << " (an estimate)";
  out << ", with " << format_bytes(m.margin) << " kept free; at " << m.failing << " device " << m.refusal.device
      << " runs out of memory: ";
  write_refusal(out, m.refusal, "      ", options);
}

void write_sites(std::ostream& out, const BatchReport& b, const TextOptions& options) {
  size_t shown = 0;
  for (const BatchSite& s : b.sites) {
    if (s.b == 0) continue;
    if (shown == 0) out << "  what grows with the batch (per unit of batch, the largest first):\n";
    if (shown++ == options.max_items) break;
    out << "    " << slope_text(s.b) << (s.same_line ? "" : " (the first of its requests)") << " per unit, "
        << bytes_at(s.a, s.b, b.template_batch) << " at batch " << b.template_batch << ", "
        << plural(s.requests, "request", "requests") << (b.estimate ? ", " + std::string(role_name(s.role)) : "") << "\n";
    write_stack(out, s.stack, "        ", options.stacks);
  }
  shown = 0;
  for (const BatchSite& s : b.sites) {
    if (s.b != 0 || s.kind == RequestFit::Unmatched) continue;
    if (shown == 0) out << "  what does not grow (the largest):\n";
    if (shown++ == options.max_items) break;
    out << "    " << bytes_at(s.a, 0, 0) << ", " << plural(s.requests, "request", "requests") << ", "
        << role_name(s.role) << "\n";
    write_stack(out, s.stack, "        ", options.stacks);
  }
}

}  // namespace

json batch_to_json(const BatchReport& b) {
  json runs = json::array();
  for (const BatchRunInfo& run : b.runs) {
    runs.push_back({{"file", run.file},
                    {"batch", run.batch},
                    {"batch_from", run.batch_from},
                    {"requests", run.requests},
                    {"recorded_ooms", run.recorded_ooms},
                    {"complete", run.complete},
                    {"template", run.is_template}});
  }
  json sites = json::array();
  for (const BatchSite& s : b.sites) {
    sites.push_back({{"device", s.device},
                     {"requests", s.requests},
                     {"kind", kind_name(s.kind)},
                     {"a", s.a},
                     {"b", s.b},
                     {"same_line", s.same_line},
                     {"residual", s.residual},
                     {"role", role_name(s.role)},
                     {"stack", stack_to_json(s.stack)}});
  }
  json devices = json::array();
  for (const BatchDevice& d : b.devices) {
    json rows = json::array();
    for (const BatchRow& row : d.rows) rows.push_back(row_json(row));
    devices.push_back({{"device", d.device},
                       {"total", d.total ? json(d.total) : json(nullptr)},
                       {"capacity", d.capacity ? json(d.capacity) : json(nullptr)},
                       {"replay",
                        {{"faithful", d.faithful},
                         {"divergence", d.faithful ? json(nullptr) : json{{"seq", d.divergence_seq}, {"what", d.divergence}}}}},
                       {"recorded_reserved_peak", d.recorded_reserved_peak},
                       {"rows", rows}});
  }
  json max = json::array();
  for (const BatchMax& m : b.max) {
    const bool searched = !m.capacity_unknown && !m.unbounded;
    max.push_back({{"settings", m.settings},
                   {"capacity_known", !m.capacity_unknown},
                   {"unbounded", m.unbounded},
                   {"largest", searched ? json(m.largest) : json(nullptr)},
                   {"failing", searched ? json(m.failing) : json(nullptr)},
                   {"margin", m.margin},
                   {"range", m.has_range ? json::array({m.largest_low, m.largest_high}) : json(nullptr)},
                   {"refused", searched ? refusal_json(m.refusal) : json(nullptr)},
                   {"replays", m.replays}});
  }
  json checks = json::array();
  for (const BatchCheck& c : b.leave_one_out) {
    checks.push_back({{"file", c.file},
                      {"batch", c.batch},
                      {"template", c.template_file},
                      {"device", c.device},
                      {"predicted", c.predicted},
                      {"replayed", c.replayed},
                      {"recorded", c.recorded},
                      {"refused_predicted", c.refused_predicted},
                      {"refused_replayed", c.refused_replayed}});
  }
  return {{"estimate", b.estimate},
          {"runs", runs},
          {"template", b.template_file},
          {"template_batch", b.template_batch},
          {"requests",
           {{"total", b.requests}, {"scale", b.scales}, {"constant", b.constant}, {"by_site", b.by_site}, {"unmatched", b.unmatched}}},
          {"fit",
           {{"batches", b.batches},
            {"linearity_checked", b.linearity_checked},
            {"not_linear", b.not_linear},
            {"max_residual", b.max_residual}}},
          {"sites", sites},
          {"devices", devices},
          {"max_batch", max},
          {"leave_one_out", checks}};
}

void write_batch_text(std::ostream& out, const BatchReport& b, const TextOptions& options) {
  if (b.estimate) {
    out << "batch what-if (an estimate): from one run (";
    write_runs(out, b);
    out << "): its activations and backward temporaries taken to grow in proportion to the batch, the rest to stay; its "
        << plural(b.requests, "PyTorch request", "PyTorch requests")
        << " replayed at each size through PyTorch's allocator model\n";
  } else {
    out << "batch what-if: from " << b.runs.size() << " runs (";
    write_runs(out, b);
    out << "): the " << plural(b.requests, "PyTorch request", "PyTorch requests") << " of "
        << printable(b.template_file) << " replayed at each size through PyTorch's allocator model\n";
  }
  write_fit(out, b);
  bool with_settings = false;
  for (const BatchMax& m : b.max) with_settings = with_settings || !m.settings.empty();
  for (const BatchDevice& d : b.devices) {
    for (const BatchRow& row : d.rows) with_settings = with_settings || !row.settings.empty();
  }
  for (const BatchDevice& d : b.devices) write_device(out, b, d, with_settings, options);
  for (const BatchMax& m : b.max) write_max(out, b, m, with_settings, options);
  for (const BatchCheck& c : b.leave_one_out) {
    out << "  leave one out: batch " << c.batch << " (" << printable(c.file) << ", device " << c.device
        << ") predicted from the others: " << format_bytes(c.predicted) << " reserved"
        << (c.refused_predicted ? ", out of memory" : "") << "; the model's replay of its own requests "
        << format_bytes(c.replayed) << (c.refused_replayed ? ", out of memory" : "") << " ("
        << percent_change(c.predicted, c.replayed) << "); its allocator reserved " << format_bytes(c.recorded) << "\n";
  }
  write_sites(out, b, options);
  out << "\n";
}

}  // namespace gpumemtrace::report
