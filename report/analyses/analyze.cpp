#include "report/analyses/analyze.h"

#include <algorithm>
#include <filesystem>
#include <ostream>
#include <streambuf>
#include <stdexcept>

#include "report/analyses/process_analyzer.h"
#include "report/import/snapshot_to_trace.h"
#include "report/reader/trace_reader.h"

namespace gpumemtrace::report {

namespace {
// An ostream target that appends to a string the caller owns (an ostringstream would copy its
// whole buffer out in C++17's str()).
class StringSink : public std::streambuf {
 public:
  explicit StringSink(std::string* out) : out_(out) {}

 protected:
  int_type overflow(int_type c) override {
    if (!traits_type::eq_int_type(c, traits_type::eof())) out_->push_back(traits_type::to_char_type(c));
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    out_->append(s, static_cast<size_t>(n));
    return n;
  }

 private:
  std::string* out_;
};
}  // namespace

ProcessReport analyze_source(ByteSource& source, const std::string& name,
                             const Suppressions& suppressions) {
  SymbolTable symbols;
  ProcessAnalyzer analyzer(symbols, suppressions);
  ReadResult read = read_trace(source, name, symbols, analyzer);
  return analyzer.finish(name, read);
}

ProcessReport analyze_file(const std::string& path, const Suppressions& suppressions, ReadObserver* observer) {
  if (snapshot::looks_like_pickle(path)) {
    // A PyTorch memory snapshot: converted in memory to an ordinary trace (its size is bounded by
    // the allocator's history ring), then read exactly like a trace file.
    std::string trace;
    StringSink sink(&trace);
    std::ostream converted(&sink);
    std::string error;
    snapshot::ConvertStats stats;
    if (!snapshot::snapshot_to_trace(path, converted, &error, &stats)) {
      throw TraceError(path, 0, "PyTorch snapshot: " + (error.empty() ? std::string("cannot convert") : error));
    }
    std::unique_ptr<ByteSource> source = memory_byte_source(trace);
    ProcessReport report;
    try {
      report = analyze_source(*source, path, suppressions);
    } catch (const TraceError& e) {  // a converter bug: name the pickle, not a line of a trace it never saw
      throw TraceError(path, 0, "PyTorch snapshot: converted trace is invalid: " + e.message());
    }
    // The converter's warnings (history entries that contradict the final state, ...) first.
    std::vector<std::string> warnings;
    for (const std::string& warning : stats.warnings) warnings.push_back("PyTorch snapshot: " + warning);
    if (stats.inconsistencies > stats.warnings.size()) {
      warnings.push_back("PyTorch snapshot: " + std::to_string(stats.inconsistencies) +
                         " history entries contradict the final state in all");
    }
    report.warnings.insert(report.warnings.begin(), warnings.begin(), warnings.end());
    return report;
  }
  std::unique_ptr<ByteSource> source;
  try {
    source = open_byte_source(path);
  } catch (const std::runtime_error& error) {
    throw TraceError(path, 0, error.what());
  }
  if (observer) source = observed_byte_source(std::move(source), *observer);
  return analyze_source(*source, path, suppressions);
}

namespace {
bool is_trace_name(const std::string& name) {
  auto ends = [&](const char* suffix) {
    std::string s(suffix);
    return name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  return ends(".jsonl") || ends(".zst") || ends(".pickle") || ends(".pkl");
}
}  // namespace

std::vector<std::string> expand_inputs(const std::vector<std::string>& args) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const std::string& arg : args) {
    std::error_code error;
    if (fs::is_directory(arg, error)) {
      std::vector<std::string> found;
      for (const auto& entry : fs::directory_iterator(arg, error)) {
        if (entry.is_regular_file(error) && is_trace_name(entry.path().filename().string())) {
          found.push_back(entry.path().string());
        }
      }
      if (found.empty()) throw std::runtime_error(arg + ": directory holds no traces (*.jsonl, *.zst, *.pickle)");
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::exists(arg, error)) {
      files.push_back(arg);
    } else {
      throw std::runtime_error(arg + ": no such file or directory");
    }
  }
  return files;
}

}  // namespace gpumemtrace::report
