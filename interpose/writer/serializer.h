// interpose/writer/serializer.h — turns EventRecords into trace lines (trace/format.h, version 2):
// interns frames, stacks and event sites (each written once, referred to by id), symbolizes each
// unique address once, and keeps the module map current. Event lines are delta-coded against the
// previous event line (time, seq), so the lines must reach the trace in the order they are made.
// Independent of threads and rings so that it can be unit-tested.
// Not thread-safe: used by the writer thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "interpose/python/python_stack.h"
#include "interpose/recorder/event_record.h"
#include "interpose/writer/live_set.h"
#include "interpose/writer/modules.h"
#include "interpose/writer/symbolizer.h"

namespace gpumemtrace {

// A process's place in a distributed job, as its launcher's environment variables say (-1: not
// set). Each figure comes from the first variable of its list that holds a number:
//   rank        RANK (torchrun, torch.distributed), OMPI_COMM_WORLD_RANK (Open MPI), PMI_RANK (MPICH,
//               Intel MPI), PMIX_RANK, MV2_COMM_WORLD_RANK (MVAPICH2), SLURM_PROCID (srun)
//   local_rank  LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, MV2_COMM_WORLD_LOCAL_RANK,
//               SLURM_LOCALID
//   world_size  WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE, MV2_COMM_WORLD_SIZE, SLURM_NTASKS
struct ProcessRank {
  long rank = -1;
  long local_rank = -1;
  long world_size = -1;
  std::string rank_from;  // the variable `rank` came from
};
// From an environment block as /proc/self/environ holds it ("NAME=value" entries, each ended by NUL).
ProcessRank rank_from_environment(const std::string& block);

struct HeaderInfo {
  long pid = 0;
  long ppid = 0;
  ProcessRank rank;
  std::string exe;
  std::vector<std::string> cmdline;
  std::string host;
  uint64_t start_realtime_ns = 0;
  uint64_t start_monotonic_ns = 0;
  int stack_depth = 0;
  bool drop_when_full = false;
  // The allocator's variables from the same environment, only the allocator's own options
  // (trace/alloc_conf.h); "" when unset.
  std::string pytorch_alloc_conf, pytorch_cuda_alloc_conf, pytorch_hip_alloc_conf;
};

// The variable `name` of an environment block, its allocator options only; "" when unset.
std::string alloc_conf_from_environment(const std::string& block, const char* name);

// Reads pid, exe, command line, host, clocks and rank (from /proc/self/environ: the environment the
// launcher gave the process, whatever it set since) of the calling process.
HeaderInfo current_process_header(int stack_depth, bool drop_when_full);

class TraceSerializer {
 public:
  // `symbolize`: false writes frames with ip/module/offset only (GPUMEMTRACE_SYMBOLIZE=0).
  explicit TraceSerializer(std::string* out, bool symbolize);

  void header(const HeaderInfo& info);
  // Writes module lines for objects loaded since the last call.
  void refresh_modules();
  // Writes the event (and the stack it first uses); returns its stack id (0: none).
  uint32_t event(const EventRecord& r) { return event(r, stack_id(r)); }
  // Writes the event with `stack`, a stack id this serializer gave (define_stack); returns it.
  // `initial`: marked as state that existed before the trace's history (a flight recorder's
  // checkpoint: trace/format.h, kFieldInitial).
  uint32_t event(const EventRecord& r, uint32_t stack, bool initial = false);
  // Writes the definitions of r's stack if new (no event line); returns its id.
  uint32_t define_stack(const EventRecord& r) { return stack_id(r); }
  // An "allocator_settings" record (r.op == Op::AllocatorSettings): standalone, with absolute seq and
  // t, so the event lines' deltas go on from the previous event line.
  void allocator_settings(const EventRecord& r);
  // A "gc" record (r.op == Op::Gc): standalone like allocator_settings; t is when the collection began
  // (r.began_ns), end_time when it ended (r.time_ns, the moment it was reported).
  void gc(const EventRecord& r);
  // A "pause" or "resume" record (r.op == Op::Pause / Op::Resume): standalone like gc.
  void pause(const EventRecord& r);
  void device(int32_t device, const char* name, uint64_t total, uint64_t free_bytes);
  void dropped(uint64_t count, uint64_t total);
  // The trace reached its size cap at `r` (not written); `bytes` written so far.
  void capped(const EventRecord& r, uint64_t bytes, uint64_t max_bytes);
  // One allocation still live at the end of a capped trace (live_set.h).
  void live(const LiveAllocation& a);
  // `not_written`: events consumed after the cap (written only when the trace was capped); `end`: how
  // the process ended (left out when unknown).
  void footer(uint64_t events, uint64_t dropped_total, uint64_t end_time_ns, uint64_t not_written = 0,
              const ProcessEnd& end = {});

  uint64_t events_written() const { return events_; }

  // The flight recorder (interpose/writer/flight.cpp): a new segment reads alone, so it repeats every
  // definition. Once asked, every module, frame, stack, site and device line is also kept, in the
  // order written (each before what refers to it); rewrite_definitions() writes them all again, ids
  // unchanged. Memory: the size of those lines, which grows with the program's distinct stacks, not
  // with its events.
  void keep_definitions() { keep_definitions_ = true; }
  void rewrite_definitions();
  // The seq and t of the last event line (what the next one is delta-coded against), and a restart
  // from 0, as at the start of a trace.
  uint64_t last_seq() const { return last_seq_; }
  uint64_t last_time_ns() const { return last_time_ns_; }
  void restart_deltas();

 private:
  uint32_t native_frame_id(uintptr_t ip);
  // Names `ip` (false: symbolization is off, or has just been turned off for lack of memory).
  bool symbolize(uintptr_t ip, Symbolized* out);
  uint32_t python_frame_id(const python::PythonFrameRef& ref);
  uint32_t stack_id(const EventRecord& r);
  uint32_t site_id(const EventRecord& r, uint32_t stack);
  // Keeps the line written from `from` of out_ on (keep_definitions).
  void keep_definition(size_t from);

  // What a "site" record holds: the fields an event shares with every other event of the same
  // call, thread and stack. The api strings are static (event_record.h): compared by address.
  struct SiteKey {
    const char* api;
    const char* driver_api;
    uint32_t tid;
    uint32_t stack;
    int32_t device;
    format::Op op;
    format::Kind kind;
    bool delayed;
    bool operator==(const SiteKey& o) const {
      return api == o.api && driver_api == o.driver_api && tid == o.tid && stack == o.stack && device == o.device &&
             op == o.op && kind == o.kind && delayed == o.delayed;
    }
  };
  struct SiteKeyHash {
    size_t operator()(const SiteKey& k) const {
      uint64_t h = reinterpret_cast<uintptr_t>(k.api) * 0x9E3779B97F4A7C15ull;
      h ^= reinterpret_cast<uintptr_t>(k.driver_api) + (h << 6) + (h >> 2);
      h ^= ((static_cast<uint64_t>(k.tid) << 32) | k.stack) * 0xC2B2AE3D27D4EB4Full;
      h ^= (static_cast<uint64_t>(static_cast<uint32_t>(k.device)) << 24 | static_cast<uint64_t>(k.op) << 16 |
            static_cast<uint64_t>(k.kind) << 8 | static_cast<uint64_t>(k.delayed)) *
           0x165667B19E3779F9ull;
      return static_cast<size_t>(h ^ (h >> 29));
    }
  };

  struct KeyHash {
    size_t operator()(const std::vector<uint64_t>& v) const {
      uint64_t h = 1469598103934665603ull;
      for (uint64_t x : v) h = (h ^ x) * 1099511628211ull;
      return static_cast<size_t>(h);
    }
  };

  std::string* out_;
  bool symbolize_;
  std::unique_ptr<Symbolizer> symbolizer_;
  ModuleMap modules_;
  std::vector<uint32_t> new_modules_;
  std::unordered_map<uintptr_t, uint32_t> native_frames_;
  std::unordered_map<uint64_t, uint32_t> python_frames_;
  // Stacks by merged, line-level key (native ips and Python (code, line) keys): what a stack line is.
  std::unordered_map<std::vector<uint64_t>, uint32_t, KeyHash> stacks_;
  // Stacks with Python frames by their raw capture (native ips, then the refs as captured, with
  // instruction offsets): an event whose capture was seen before skips the merge and the line decode.
  // Several raw keys may map to one id (offsets on the same line).
  std::unordered_map<std::vector<uint64_t>, uint32_t, KeyHash> raw_stacks_;
  std::vector<python::MergedFrame> merged_;  // reused per event
  std::vector<uint64_t> key_;                 // reused per event
  std::vector<uint64_t> raw_key_;             // reused per event
  std::vector<uint32_t> frame_ids_;           // reused per event
  std::unordered_map<SiteKey, uint32_t, SiteKeyHash> sites_;
  uint32_t next_frame_id_ = 1;
  uint32_t next_stack_id_ = 1;
  uint32_t next_site_id_ = 1;
  uint64_t events_ = 0;
  uint64_t last_seq_ = 0;      // of the previous event line (0 before the first)
  uint64_t last_time_ns_ = 0;  // of the previous event line (0 before the first)
  bool keep_definitions_ = false;
  std::string definitions_;  // keep_definitions: every definition line so far
};

}  // namespace gpumemtrace
