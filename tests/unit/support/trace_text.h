// tests/unit/support/trace_text.h — builds a small trace in memory, event line by event line, and
// analyzes it: the report's unit tests state a case as the events that make it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "report/analyses/analyze.h"

namespace gpumemtrace::report::test_support {

inline constexpr const char* kTraceHeader = R"({"type":"header","format":"gpumemtrace","version":1,"pid":7})";

class TraceText {
 public:
  TraceText() : text_(std::string(kTraceHeader) + "\n") {}
  // One event line; `extra` is appended inside the object (",\"free\":5").
  TraceText& ev(const char* op, const char* kind, uint64_t addr, uint64_t size, const std::string& extra = "",
                const char* api = "") {
    ++seq_;
    text_ += "{\"type\":\"event\",\"seq\":" + std::to_string(seq_) + ",\"t\":" + std::to_string(seq_ * 10 + waited_) +
             ",\"op\":\"" + op + "\",\"kind\":\"" + kind + "\",\"addr\":\"0x" + hex(addr) +
             "\",\"size\":" + std::to_string(size) + ",\"device\":0" + (*api ? ",\"api\":\"" + std::string(api) + "\"" : "") +
             extra + "}\n";
    return *this;
  }
  // Time passes: later events are `ns` later than the 10 ns per event.
  TraceText& wait(uint64_t ns) {
    waited_ += ns;
    return *this;
  }
  // With a footer: a complete trace, so what is live at the end is a leak (a cut trace has none).
  // `allocation_timeline`: whether the HTML's allocation timeline is kept (AnalysisRequest).
  ProcessReport analyze(bool allocation_timeline = true) const {
    const std::string text = text_ + "{\"type\":\"footer\"}\n";
    auto source = memory_byte_source(text);
    return analyze_source(*source, "mem", Suppressions(), allocation_timeline);
  }

 private:
  static std::string hex(uint64_t v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(v));
    return buf;
  }
  std::string text_;
  uint64_t seq_ = 0;
  uint64_t waited_ = 0;
};

}  // namespace gpumemtrace::report::test_support
