// report/analyses/analyze.cpp — see analyze.h.
#include "report/analyses/analyze.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <ostream>
#include <streambuf>
#include <stdexcept>

#include "report/analyses/process_analyzer.h"
#include "report/analyses/story.h"
#include "report/import/snapshot_to_trace.h"
#include "report/reader/trace_reader.h"
#include "util/ends_with.h"

namespace gpumemtrace::report {

namespace {
// An ostream target that writes to a stdio file (the converted snapshot's temporary file).
class StdioSink : public std::streambuf {
 public:
  explicit StdioSink(std::FILE* file) : file_(file) {}

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    return std::fputc(traits_type::to_char_type(c), file_) == EOF ? traits_type::eof() : c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    return static_cast<std::streamsize>(std::fwrite(s, 1, static_cast<size_t>(n), file_));
  }

 private:
  std::FILE* file_;
};

// An anonymous temporary file in $TMPDIR (else /tmp), already unlinked: it disappears with the
// process, however the process ends. Throws TraceError naming `path` (the input it is for).
std::FILE* anonymous_temp_file(const std::string& path) {
  const char* dir = std::getenv("TMPDIR");
  std::string name = std::string(dir && *dir ? dir : "/tmp") + "/gpumem-report-snapshot.XXXXXX";
  const int fd = mkstemp(name.data());
  if (fd < 0) throw TraceError(path, 0, "PyTorch snapshot: cannot create a temporary file " + name + ": " + std::strerror(errno));
  unlink(name.c_str());
  std::FILE* file = fdopen(fd, "w+b");
  if (!file) {
    close(fd);
    throw TraceError(path, 0, std::string("PyTorch snapshot: cannot open a temporary file: ") + std::strerror(errno));
  }
  return file;
}

// Converts the snapshot at `path` into an anonymous temporary file and returns a source that reads
// it from the start: the converted trace is streamed through the disk, never held in memory.
std::unique_ptr<ByteSource> convert_snapshot(const std::string& path, snapshot::ConvertStats* stats) {
  std::FILE* file = anonymous_temp_file(path);
  StdioSink sink(file);
  std::ostream converted(&sink);
  try {
    snapshot::snapshot_to_trace(path, converted, stats);
  } catch (const snapshot::SnapshotError& error) {
    std::fclose(file);
    throw TraceError(path, 0, "PyTorch snapshot: " + error.message());
  }
  if (std::fflush(file) != 0 || std::ferror(file)) {
    const int saved = errno;
    std::fclose(file);
    throw TraceError(path, 0, std::string("PyTorch snapshot: cannot write the converted trace to a temporary file: ") +
                                  std::strerror(saved));
  }
  std::rewind(file);
  return file_byte_source(file);
}
}  // namespace

ProcessReport analyze_source(ByteSource& source, const std::string& name,
                             const Suppressions& suppressions, bool allocation_timeline) {
  SymbolTable symbols;
  ProcessAnalyzer analyzer(symbols, suppressions, allocation_timeline);
  ReadResult read = read_trace(source, name, symbols, analyzer);
  return analyzer.finish(name, read);
}

namespace {
// A snapshot that contradicts itself (blocks outside its segments, a history its final state denies):
// what it says of its segments cannot be trusted, so nothing built on them is given, as PyTorch's own
// segsum refuses such a snapshot. The what-if replay is not run either (what_if_settings).
void without_inconsistent_figures(ProcessReport& report) {
  report.inconsistent_input = true;
  report.growth.clear();
  report.time_to_oom.clear();
  report.fragmentation.clear();
  for (PeakReport& peak : report.peaks) {
    peak.has_fragmentation = false;
    peak.fragmentation = FragmentationPoint();
  }
  for (OomReport& oom : report.ooms) oom.fragmentation = FragmentationPoint();
}

// analyze_file() without the what-if replays: the report's own pass.
ProcessReport analyze_file_once(const std::string& path, const Suppressions& suppressions, ReadObserver* observer,
                                bool allocation_timeline);

// The what-if replays (what_if.h): a second pass over the same file, when the report asks for one. The
// model is fed by its own handler, so the first pass pays nothing for it.
void replay_what_if(const std::string& path, const AnalysisRequest& request, ProcessReport& report) {
  const std::vector<std::string> settings = what_if_settings(report, request);
  if (settings.empty()) return;
  std::unique_ptr<ByteSource> source = open_trace_source(path);
  SymbolTable symbols;
  WhatIfPass pass(settings, request.recorded, report);
  read_trace(*source, path, symbols, pass);
  pass.finish(request, report);
}
}  // namespace

std::unique_ptr<ByteSource> open_trace_source(const std::string& path) {
  if (snapshot::looks_like_pickle(path)) {
    snapshot::ConvertStats stats;
    return convert_snapshot(path, &stats);
  }
  try {
    return open_byte_source(path);
  } catch (const std::runtime_error& error) {
    throw TraceError(path, 0, error.what());
  }
}

ProcessReport analyze_file(const std::string& path, const Suppressions& suppressions, ReadObserver* observer,
                           const AnalysisRequest& what_if) {
  ProcessReport report = analyze_file_once(path, suppressions, observer, what_if.allocation_timeline);
  replay_what_if(path, what_if, report);
  reconcile_what_if(report);  // story.h: its estimates against the run's story
  return report;
}

namespace {
ProcessReport analyze_file_once(const std::string& path, const Suppressions& suppressions, ReadObserver* observer,
                                bool allocation_timeline) {
  if (snapshot::looks_like_pickle(path)) {
    // A PyTorch memory snapshot: converted to an ordinary trace in a temporary file, then read
    // exactly like a trace file.
    snapshot::ConvertStats stats;
    std::unique_ptr<ByteSource> source = convert_snapshot(path, &stats);
    ProcessReport report;
    try {
      report = analyze_source(*source, path, suppressions, allocation_timeline);
    } catch (const TraceError& e) {  // a converter bug: name the pickle, not a line of a trace it never saw
      throw TraceError(path, 0, "PyTorch snapshot: converted trace is invalid: " + e.message());
    }
    // The converter's warnings (the one line naming what is inconsistent, ...) first.
    std::vector<std::string> warnings;
    for (const std::string& warning : stats.warnings) warnings.push_back("PyTorch snapshot: " + warning);
    report.warnings.insert(report.warnings.begin(), warnings.begin(), warnings.end());
    if (stats.inconsistencies) without_inconsistent_figures(report);
    return report;
  }
  std::unique_ptr<ByteSource> source;
  try {
    source = open_byte_source(path);
  } catch (const std::runtime_error& error) {
    throw TraceError(path, 0, error.what());
  }
  if (observer) source = observed_byte_source(std::move(source), *observer);
  return analyze_source(*source, path, suppressions, allocation_timeline);
}
}  // namespace

namespace {
// A name that is only the suffix (a hidden file such as ".zst") is not a trace.
bool is_trace_name(std::string_view name) {
  auto ends = [&](std::string_view suffix) { return name.size() > suffix.size() && util::ends_with(name, suffix); };
  return ends(".jsonl") || ends(".zst") || ends(".pickle") || ends(".pkl");
}
}  // namespace

std::optional<ProcessReport> analyze_one_of_many(const std::string& path, const Suppressions& suppressions,
                                                 ReadObserver* observer, std::vector<std::string>* warnings,
                                                 const AnalysisRequest& what_if) {
  std::error_code error;
  if (std::filesystem::file_size(path, error) == 0 && !error) {
    warnings->push_back(path + ": empty (0 bytes): the process ended before its trace was written; skipped");
    return std::nullopt;
  }
  ProcessReport report;
  try {
    report = analyze_file(path, suppressions, observer, what_if);
  } catch (const TraceCutBeforeFirstLine& cut) {
    warnings->push_back(cut.what() + std::string("; skipped"));
    return std::nullopt;
  }
  if (report.events == 0 && !report.complete) {
    warnings->push_back(path + ": a header only (no event, no footer): the process ended before it recorded "
                        "anything; skipped");
    return std::nullopt;
  }
  return report;
}

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
