// report/reader/trace_reader.h — reads one trace (JSON Lines, trace/format.h), validates every line
// and hands typed records to a TraceHandler, streaming: nothing is kept per event — except, in a
// trace with `sync` events, the events of one drain interval while delayed (PyTorch) events are merged
// into the timeline by time (event_merger.h). Events reach the handler in time order; `sync` events
// themselves are consumed by the reader.
//
// Errors: any malformed line except a cut-short last one throws TraceError (file and line); so does a
// line that is not valid JSON anywhere, even in a field the reader does not use. Keys are unescaped.
// A last line without '\n' that does not parse is the mark of a killed writer: it becomes a
// warning and reading ends normally.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "report/reader/byte_source.h"
#include "report/reader/records.h"
#include "report/reader/symbols.h"

namespace gpumemtrace::report {

class TraceHandler {
 public:
  virtual ~TraceHandler() = default;
  virtual void on_header(const Header&) {}
  virtual void on_device(const DeviceInfo&) {}
  virtual void on_event(const Event&) {}
  virtual void on_dropped(uint64_t /*count*/) {}
  virtual void on_footer(const Footer&) {}
  // The trace reached its size cap: no event follows. Then, at the end, on_live once per allocation
  // still live (an alloc or block_alloc Event with its own seq, t and stack).
  virtual void on_capped(const Capped&) {}
  virtual void on_live(const Event&) {}
  // An "allocator_settings" record, in its place in the timeline (Op::AllocatorSettings; `api` its
  // source, `label` its conf, `fraction`): not an event, and not counted as one.
  virtual void on_allocator_settings(const Event&) {}
  // A "gc" record, in its place in the timeline among the live events (Op::Gc; `t` when the
  // collection began, `end_time` when it ended, `tid` its thread): not an event, not counted as one.
  virtual void on_gc(const Event&) {}
  // A "pause" or "resume" record (Op::Pause, Op::Resume; `t`, `seq`, `tid`), as it is read: events
  // recorded from a pause to the next resume carry no stack. Not an event, not counted as one.
  virtual void on_pause(const Event&) {}
};

// Limits of the reader (docs/security.md): a line longer than kMaxLineBytes (line_reader.h) and a
// stream that yields no record the reader uses for kMaxBytesWithoutRecord bytes (blank lines, records
// of unknown types) are errors; a string longer than format::kMaxStringBytes is cut (json_checks.h).
inline constexpr uint64_t kMaxBytesWithoutRecord = uint64_t{16} << 20;

// What one trace may define, so that a few KB of zstd cannot make the reader or the analyses hold
// gigabytes (each is an error naming the line, exit 2). Memory grows with the definitions a trace
// makes; these bound it. A stack's frame references are bounded by format::kMaxStackFrames and a
// frame's inlined calls by format::kMaxInlinedLevels (as the lines are parsed). The recorder's traces
// stay far below each: 64 native and 32 Python frames a stack, names of a few KB a stack, hundreds of
// modules, thousands to tens of thousands of frames, stacks and sites.
inline constexpr uint64_t kMaxModules = uint64_t{1} << 16;
inline constexpr uint64_t kMaxFrames = uint64_t{1} << 20;
inline constexpr uint64_t kMaxStacks = uint64_t{1} << 20;
inline constexpr uint64_t kMaxSites = uint64_t{1} << 20;
// Names held for the whole trace: module paths, frames' function and file names (inlined calls'
// too), the sites' API names.
inline constexpr uint64_t kMaxSymbolTextBytes = uint64_t{256} << 20;
// Frame references of all stacks together (4 bytes each).
inline constexpr uint64_t kMaxStackFrameRefs = uint64_t{1} << 25;
// One stack resolved (SymbolTable::resolve copies each logical frame's names, and the analyses keep
// the stacks they report): its logical frames, inlined calls expanded, and the bytes of their names.
inline constexpr uint64_t kMaxLogicalFrames = 8192;
inline constexpr uint64_t kMaxStackTextBytes = uint64_t{1} << 20;

struct ReadResult {
  uint64_t lines = 0;
  uint64_t events = 0;
  bool footer_seen = false;      // false: the process was killed or is still running
  bool truncated = false;        // the last line or the compressed stream was cut short
  bool capped = false;           // a "capped" record: detail stopped at GPUMEMTRACE_MAX_BYTES
  std::vector<std::string> warnings;
};

// Reads `source` to the end. `name` is the file name used in messages. Symbols (modules, frames,
// stacks) go to `symbols`, everything else to `handler`. Native frames recorded without symbols
// (GPUMEMTRACE_SYMBOLIZE=0) are named from their module files as they are read
// (offline_symbolizer.h); a module that cannot be used becomes a warning. Throws TraceError.
ReadResult read_trace(ByteSource& source, const std::string& name, SymbolTable& symbols,
                      TraceHandler& handler);

}  // namespace gpumemtrace::report
