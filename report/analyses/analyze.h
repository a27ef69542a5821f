// report/analyses/analyze.h — one call from "a path" to "a report": reads a trace with the
// reader and runs every analysis on it in the same pass.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "report/analyses/report_model.h"
#include "report/analyses/suppressions.h"
#include "report/analyses/what_if.h"
#include "report/reader/byte_source.h"

namespace gpumemtrace::report {

// Throws TraceError for a malformed trace or one that cannot be read.
// `allocation_timeline`: AnalysisRequest's (what_if.h).
ProcessReport analyze_source(ByteSource& source, const std::string& name,
                             const Suppressions& suppressions, bool allocation_timeline = true);
// A file that starts like a binary pickle is a PyTorch memory snapshot: converted with
// report/import/ and analyzed like a trace; a conversion error is a TraceError naming the file.
// `observer`, when given, sees a trace file's bytes as they are read (not a snapshot's).
// `what_if`: the allocator replays to run (what_if.h), as a second pass over the file when any is due,
// and whether the allocation timeline is kept.
ProcessReport analyze_file(const std::string& path, const Suppressions& suppressions,
                           ReadObserver* observer = nullptr, const AnalysisRequest& what_if = AnalysisRequest{});

// The trace at `path` to read again (a second pass): a PyTorch snapshot converted again into an
// anonymous temporary file, a trace file opened. Throws TraceError naming the file.
std::unique_ptr<ByteSource> open_trace_source(const std::string& path);

// Files for the command-line arguments: a file stays as is; a directory becomes its traces
// (*.jsonl, *.jsonl.zst, *.zst, PyTorch snapshots *.pickle/*.pkl; one per process), sorted by
// name. Throws std::runtime_error for a missing path or a directory without traces.
std::vector<std::string> expand_inputs(const std::vector<std::string>& args);

// analyze_file() for one of several traces (a directory's, or a run's files given together), where
// one may be empty: the trace of a process that ended (_exit, a crash) before its recorder wrote more
// than the header. Such a file (0 bytes, or a header with no event and no footer) gives no report but
// a warning in *warnings, so that it never fails the others. (A trace given alone is analyze_file()'s:
// a 0-byte one is an error.)
std::optional<ProcessReport> analyze_one_of_many(const std::string& path, const Suppressions& suppressions,
                                                 ReadObserver* observer, std::vector<std::string>* warnings,
                                                 const AnalysisRequest& what_if = AnalysisRequest{});

}  // namespace gpumemtrace::report
