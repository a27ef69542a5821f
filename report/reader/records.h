// report/reader/records.h — what the reader hands to the analyses: one plain struct per record type
// of trace/format.h, already validated (ids resolved, addresses parsed, sizes in range).
//
// Lifetime: string_views inside Event point into the reader's parse buffer and are valid only
// during the TraceHandler callback that receives them; copy what must outlive it.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "report/reader/ids.h"
#include "trace/format.h"

namespace gpumemtrace::report {

using format::Kind;
using format::Op;

// A malformed trace: names the file and the 1-based line (0: the file as a whole, e.g. it cannot
// be opened). The CLI turns it into exit status 2.
class TraceError : public std::runtime_error {
 public:
  TraceError(const std::string& file, uint64_t line, const std::string& message)
      : std::runtime_error(file + (line ? ":" + std::to_string(line) : std::string()) + ": " + message),
        file_(file), line_(line), message_(message) {}
  const std::string& file() const { return file_; }
  uint64_t line() const { return line_; }
  const std::string& message() const { return message_; }

 private:
  std::string file_;
  uint64_t line_;
  std::string message_;
};

// A compressed trace that ends before its first line could be decompressed: the process was killed
// before the first block of its trace was written. Among several traces it is skipped with a warning
// (analyze_one_of_many), as an empty file is.
class TraceCutBeforeFirstLine : public TraceError {
 public:
  explicit TraceCutBeforeFirstLine(const std::string& file)
      : TraceError(file, 1, "compressed stream cut short before its first line: the process was killed before "
                            "its trace's first block was written") {}
};

struct Header {
  int64_t pid = -1;
  int64_t ppid = -1;
  int64_t rank = -1;          // in its job (RANK, SLURM_PROCID, ...); -1: not recorded
  int64_t local_rank = -1;
  int64_t world_size = -1;
  std::string rank_from;      // the variable the rank came from
  std::string exe;
  std::string host;
  std::string library;
  std::string backend;
  std::vector<std::string> cmdline;
  uint64_t start_time_ns = 0;
  uint64_t clock_start_ns = 0;
  // The allocator's variables in the environment the process started with (allocator options only;
  // "" when unset): PYTORCH_ALLOC_CONF, PYTORCH_CUDA_ALLOC_CONF, PYTORCH_HIP_ALLOC_CONF.
  std::string env_alloc_conf;
  std::string env_cuda_alloc_conf;
  std::string env_hip_alloc_conf;
};

struct DeviceInfo {
  int32_t device = -1;
  std::string name;
  uint64_t total = 0;  // 0 = unknown
  uint64_t free = 0;
  bool has_free = false;
};

// One event line. Optional fields carry a has_* flag where 0 is a meaningful value.
struct Event {
  uint64_t seq = 0;
  uint64_t t = 0;
  uint64_t tid = 0;
  Op op = Op::Mark;
  Kind kind = Kind::None;
  uint64_t addr = 0;
  uint64_t size = 0;
  int32_t device = -1;
  StackId stack;         // none: no stack
  int64_t result = 0;    // CUDA error code, 0 = success (also when absent)
  uint64_t segment = 0;  // valid when has_segment
  uint64_t handle = 0;   // valid when has_handle
  uint64_t stream = 0;   // "stream": the stream of a stream-ordered operation; 0 when absent (the default stream)
  uint64_t free = 0;     // meminfo, valid when has_meminfo
  uint64_t total = 0;
  bool has_segment = false;
  bool has_handle = false;
  bool has_meminfo = false;
  bool delayed = false;   // "delayed":true: reported after the fact, ordered by t (event_merger.h)
  bool initial = false;   // "initial":true: a PyTorch snapshot's state before its history (t 0)
  std::string_view pool;  // "" when absent; a "0x..." handle or an allocator pool name
  std::string_view label;
  std::string_view api;
  uint64_t range = 0;     // scope events of a cross-thread range: the id pairing begin and end; 0 = none
  // Op::AllocatorSettings (an "allocator_settings" record): `api` its source, `label` its conf, and
  // set_per_process_memory_fraction's fraction when has_fraction.
  double fraction = 0.0;
  bool has_fraction = false;
  // Op::Gc (a "gc" record): a garbage collection that freed objects on thread `tid`, from `t` to
  // `end_time` (CLOCK_MONOTONIC ns).
  uint64_t end_time = 0;
};

struct Footer {
  uint64_t events = 0;
  uint64_t dropped_total = 0;
  uint64_t end_time = 0;
  uint64_t not_written = 0;  // capped traces: events consumed after the cap
  format::End end = format::End::Unknown;  // how the process ended (Unknown: not said)
  int32_t exit_status = -1;  // End::Exit, End::QuickExit: 0-255; -1 when not known
  int32_t signal = 0;        // End::Signal: its number
};

// The "capped" record: the trace reached GPUMEMTRACE_MAX_BYTES at event `seq` (not written), time `t`.
struct Capped {
  uint64_t seq = 0;
  uint64_t t = 0;
  uint64_t bytes = 0;      // trace text written before it
  uint64_t max_bytes = 0;  // the cap
};

}  // namespace gpumemtrace::report
