// report/reader/fields.h — one trace line's fields, as the reader's parsers fill them (line_parser.h: any
// line, through simdjson; compact_event.h: a version 2 event line in the recorder's shape) and the
// dispatcher reads them (dispatcher.h). Internal to report/reader/.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "report/reader/json_checks.h"
#include "report/reader/symbols.h"
#include "trace/format.h"

namespace gpumemtrace::report::reader {

namespace fmt = gpumemtrace::format;

// The largest values accepted (inclusive, as get_u64's `max`).
// Sizes and counters are written as integers below 2^53 (format.h); anything larger is corrupt.
inline constexpr uint64_t kMaxSize = fmt::kMaxInteger;
// Ids are "small positive integers" held as uint32_t; this bound keeps a corrupt id from looking
// valid (or from wrapping to another id).
inline constexpr uint64_t kMaxId = UINT32_MAX;

using LineError = JsonLineError;  // thrown inside one line's parse; read_trace adds file and line

[[noreturn]] inline void fail(std::string message) { throw LineError{std::move(message)}; }

// Every field of every record type, gathered in one pass over the object (simdjson's on-demand
// API is fastest when each value is visited once, in document order).
struct Fields {
  enum Bit : uint32_t {
    kType = 1u << 0, kVersion = 1u << 1, kId = 1u << 2, kSeq = 1u << 3, kOp = 1u << 4,
    kSize = 1u << 5, kDevice = 1u << 6, kFree = 1u << 7, kTotal = 1u << 8, kFrames = 1u << 9,
    kSegment = 1u << 10, kHandle = 1u << 11, kCount = 1u << 12, kModule = 1u << 13,
    kFormat = 1u << 14, kFunction = 1u << 15, kSite = 1u << 16, kSeqJump = 1u << 17,
    kSizeExact = 1u << 18, kDeviceExact = 1u << 19, kFreeExact = 1u << 20, kTotalExact = 1u << 21,
  };
  uint32_t present = 0;
  bool has(Bit bit) const { return (present & bit) != 0; }

  std::string_view type, format, op, kind, pool, label, api, function, file, path, exe, host,
      library, backend, name, lang, build_id, rank_from, end, source, conf, env_alloc_conf, env_cuda_alloc_conf,
      env_hip_alloc_conf;
  double fraction = 0.0;
  bool has_fraction = false;
  uint64_t version = 0, id = 0, seq = 0, t = 0, tid = 0, size = 0, stack = 0, module = 0, line = 0,
           free = 0, total = 0, count = 0, dropped_total = 0, events = 0, end_time = 0,
           start_time = 0, clock_start = 0, addr = 0, segment = 0, handle = 0, stream = 0, ip = 0, offset = 0, range = 0,
           max_bytes = 0, not_written = 0;
  int64_t device = -1, result = 0, pid = -1, ppid = -1, rank = -1, local_rank = -1, world_size = -1,
          exit_status = -1, signal = 0;
  bool delayed = false;
  bool initial = false;
  // "t" read as a signed number (version 2, where an event line's "t" is a delta): t holds its
  // two's complement.
  bool t_negative = false;
  // Version 2 event lines: the site, and the short-keyed fields (kept apart from the long-named ones,
  // which an event line does not use).
  uint64_t site = 0, seq_jump = 0, short_addr = 0, short_size = 0;
  int64_t short_result = 0;
  // Values the recorder clamped (format.h, kFieldSizeExact...): what the program passed.
  uint64_t size_exact = 0, free_exact = 0, total_exact = 0;
  int64_t device_exact = 0;
  bool size_out_of_range = false;  // size_exact is kOutOfRange: above 2^64 - 1
  std::vector<uint32_t> frames;
  std::vector<SymbolTable::InlinedCall> inlined;
  std::vector<std::string> cmdline;
  // Strings of this line and of the whole trace cut at kMaxStringBytes (json_checks.h).
  StringLimit strings;

  void clear() {
    // The vectors keep their capacity: no allocation per line in the steady state.
    frames.clear();
    inlined.clear();
    cmdline.clear();
    strings.next_line();
    std::vector<uint32_t> f = std::move(frames);
    std::vector<SymbolTable::InlinedCall> i = std::move(inlined);
    std::vector<std::string> c = std::move(cmdline);
    StringLimit s = std::move(strings);
    *this = Fields{};
    frames = std::move(f);
    inlined = std::move(i);
    cmdline = std::move(c);
    strings = std::move(s);
  }
  // clear() for a version 2 event line read by CompactEventScanner: only what such a line sets and
  // the dispatcher then reads (the presence bits, the short-keyed and the optional event fields).
  void clear_event_fields() {
    present = 0;
    site = seq_jump = short_addr = short_size = t = segment = handle = stream = free = total = range = 0;
    short_result = 0;
    t_negative = initial = false;
    pool = label = std::string_view();
    strings.next_line();
  }
};

}  // namespace gpumemtrace::report::reader
