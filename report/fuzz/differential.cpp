// report/fuzz/differential.cpp — see differential.h. Only for the fuzzer and its unit test (report/module.mk:
// report/fuzz is not part of the analyzer's library).
#include "report/fuzz/differential.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <new>
#include <vector>

#include "report/analyses/analyze.h"
#include "report/outputs/json_output.h"
#include "report/reader/byte_source.h"

namespace gpumemtrace::report::fuzz {

namespace {

bool blank(std::string_view line) {
  return std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

}  // namespace

Canonical canonicalize(std::string_view trace) {
  Canonical out;
  size_t start = 0, number = 0;
  while (start < trace.size()) {
    const size_t end = trace.find('\n', start);
    const bool terminated = end != std::string_view::npos;
    const std::string_view line = trace.substr(start, (terminated ? end : trace.size()) - start);
    ++number;
    start = terminated ? end + 1 : trace.size();
    if (blank(line)) {
      if (terminated) out.text += '\n';
      continue;
    }
    nlohmann::json value = nlohmann::json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded()) {
      if (!terminated) {
        out.last_invalid = true;
        out.text.append(line);
        continue;
      }
      if (!out.bad_line) out.bad_line = number;
      out.text.append(line);
      out.text += '\n';
      continue;
    }
    out.text += value.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
    if (terminated) out.text += '\n';
  }
  return out;
}

Outcome analyze_text(std::string_view trace) {
  static const Suppressions suppressions = Suppressions::parse("leak:fuzz*\n", "fuzz");
  Outcome outcome;
  auto source = memory_byte_source(trace);
  try {
    std::vector<ProcessReport> reports{analyze_source(*source, "fuzz", suppressions)};
    outcome.truncated = reports.front().truncated;
    outcome.json = reports_to_json(reports).dump(1, ' ', false, nlohmann::json::error_handler_t::replace);
    outcome.accepted = true;
  } catch (const std::bad_alloc&) {
    throw;  // a memory bound failed: a finding, never "rejected"
  } catch (const std::exception& error) {  // what gpumem-report turns into exit status 2
    outcome.json = error.what();
  }
  return outcome;
}

std::string differential_finding(std::string_view trace) {
  const Outcome original = analyze_text(trace);
  if (!original.accepted) return "";
  const Canonical canonical = canonicalize(trace);
  if (canonical.bad_line) {
    return "accepted, but line " + std::to_string(canonical.bad_line) + " is not valid JSON";
  }
  if (canonical.last_invalid && !original.truncated) {
    return "accepted an unterminated last line that is not valid JSON without calling the trace truncated";
  }
  const Outcome again = analyze_text(canonical.text);
  if (!again.accepted) return "accepted, but its canonical form is rejected: " + again.json;
  if (again.json != original.json) {
    // The first difference, with some context on each side.
    size_t at = 0;
    while (at < original.json.size() && at < again.json.size() && original.json[at] == again.json[at]) ++at;
    const size_t from = at > 300 ? at - 300 : 0;
    return "the report differs from the canonical form's at byte " + std::to_string(at) + ":\n--- original\n" +
           original.json.substr(from, 600) + "\n--- canonical\n" + again.json.substr(from, 600);
  }
  return "";
}

}  // namespace gpumemtrace::report::fuzz
