// report/outputs/export_events.h — `gpumem-report --export events DIR TRACE...`: every event of every
// trace as a flat, rank-qualified row, for SQL engines (DuckDB on one machine, Spark or Trino on a
// cluster; docs/scale.md has the columns and the queries).
//
// Per trace, three zstd-compressed JSON Lines files in DIR, named after the trace so that a glob over
// many traces' exports reads them all (DIR/*.events.jsonl.zst):
//   STEM.events.jsonl.zst  one row per event, in the reader's timeline order
//   STEM.stacks.jsonl.zst  one row per stack the events name (its site: the frames as one line)
//   STEM.frames.jsonl.zst  one row per logical frame of those stacks
// STEM is the trace's file name without .zst, .jsonl, .pickle or .pkl. Each row carries the job (the
// name of the folder the trace lies in), host, rank and pid, so that rows of many traces need no
// file name to tell them apart.
//
// Each event goes through the same analysis pass as the report (ProcessAnalyzer): its role, phase
// and the memory it moved are the report's own. `reserved_delta` and `allocated_delta` are the signed
// bytes the event moved on its device at CUDA level and at block level, so a running sum is the
// report's reserved and allocated memory (its peaks: their maxima). A capped trace's live records,
// after its cap, are not rows: the export says so on stderr.
//
// Memory: the analyses' own bounds, one entry per live holding, and the stack ids the rows name
// (kMaxStacks at most); nothing per event. Rows are compressed as they are made.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "report/analyses/suppressions.h"

namespace gpumemtrace::report {

struct ExportInput {
  std::string path;  // where its bytes are
  std::string name;  // what messages call it (and its STEM comes from)
};

struct ExportResult {
  uint64_t traces = 0;
  uint64_t events = 0;  // rows written to the events tables
  uint64_t stacks = 0;
  uint64_t frames = 0;
  std::vector<std::string> warnings;  // one line each, without the program's prefix
};

// The STEM of a trace's export files (see above).
std::string export_stem(const std::string& name);

// Exports `inputs` into `dir` (created if missing), up to `jobs` traces at once. Throws TraceError for
// a malformed trace, std::runtime_error when two inputs share a STEM or a file cannot be written.
ExportResult export_events(const std::vector<ExportInput>& inputs, const std::string& dir,
                           const Suppressions& suppressions, size_t jobs);

}  // namespace gpumemtrace::report
