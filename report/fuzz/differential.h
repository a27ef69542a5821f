// report/fuzz/differential.h — the differential check of the trace reader against a strict JSON
// parser (report/fuzz/fuzz_differential.cpp is the libFuzzer target around it).
//
// The oracle: a trace M is either rejected by gpumem-report (exit 2), or read exactly as its canonical
// re-encoding C is: every line parsed by nlohmann/json (RFC 8259, strict: UTF-8, escapes, numbers,
// literals; a duplicated key keeps its last value) and written back compact, keys sorted, escapes
// resolved, blank lines kept blank, an unterminated last line kept unterminated. The report's JSON on
// M must be byte for byte the report's JSON on C. A finding is any of:
//   - M accepted, but a line of M (other than a cut-short last one) is not valid JSON;
//   - M accepted with an unterminated last line that is not valid JSON, yet not marked truncated;
//   - M accepted, C rejected;
//   - both accepted, different reports (a key, an escape, a duplicate, whitespace, key order or the
//     fast path of event lines read differently).
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace gpumemtrace::report::fuzz {

struct Canonical {
  std::string text;          // C
  size_t bad_line = 0;       // 1-based: a terminated line that is not valid JSON (0: none)
  bool last_invalid = false; // the unterminated last line is not valid JSON (kept as it was)
};

Canonical canonicalize(std::string_view trace);

struct Outcome {
  bool accepted = false;
  bool truncated = false;    // the report says the trace was cut short
  std::string json;          // the report (accepted), or the error (rejected)
};

// gpumem-report's reading of `trace` (plain JSON Lines): the report as --format json writes it.
Outcome analyze_text(std::string_view trace);

// Empty when M and its canonical form agree (or M is rejected); otherwise what differs.
std::string differential_finding(std::string_view trace);

}  // namespace gpumemtrace::report::fuzz
