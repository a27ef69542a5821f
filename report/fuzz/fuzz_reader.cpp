// report/fuzz/fuzz_reader.cpp — libFuzzer target: any bytes as a trace, through the reader and every
// analysis (the what-if replays included) and output.
// The contract under test: a TraceError or a report, never a crash, a hang or a sanitizer error.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string_view>

#include "report/analyses/analyze.h"
#include "report/analyses/diff.h"
#include "report/outputs/json_output.h"
#include "report/outputs/text_output.h"

using namespace gpumemtrace::report;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto source = memory_byte_source(std::string_view(reinterpret_cast<const char*>(data), size));
  try {
    static const Suppressions suppressions = Suppressions::parse("leak:fuzz*\n", "fuzz");
    std::vector<ProcessReport> reports{analyze_source(*source, "fuzz", suppressions)};
    // The what-if replays (what_if.h) over the same bytes: the allocator model meets hostile events too.
    auto again = memory_byte_source(std::string_view(reinterpret_cast<const char*>(data), size));
    SymbolTable symbols;
    WhatIfPass pass({"", "expandable_segments:True", "max_split_size_mb:64,roundup_power2_divisions:4"}, "", reports[0]);
    read_trace(*again, "fuzz", symbols, pass);
    pass.finish(AnalysisRequest{}, reports[0]);
    std::ostringstream sink;
    write_text(sink, reports, TextOptions{});
    sink << reports_to_json(reports).dump();
    sink << diff_to_json(diff_reports(reports, reports)).dump();
  } catch (const TraceError&) {
    // Rejected with a message: the expected outcome for malformed input.
  }
  return 0;
}
