// report/analyses/report_model.h — the results of the analyses for one process, as plain data.
// The analyses fill it; report/outputs/ renders it (text, JSON); diff compares two of them.
// Nothing here refers back to the trace: stacks are already resolved to frames.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "report/analyses/timeline_model.h"
#include "report/reader/records.h"
#include "report/reader/symbols.h"

namespace gpumemtrace::report {

// Memory held by one call stack (a leak group, a peak culprit, an OOM holder).
struct StackBytes {
  uint64_t bytes = 0;
  uint64_t count = 0;
  Stack stack;
};

struct FragmentationPoint {
  uint64_t reserved = 0;            // live segment bytes that carry block data
  uint64_t allocated = 0;           // live block bytes inside them
  uint64_t free_in_reserved = 0;    // reserved - allocated
  uint64_t largest_free_block = 0;  // the largest gap between live blocks of one segment
  double ratio() const {
    return free_in_reserved == 0 ? 0.0
                                 : 1.0 - static_cast<double>(largest_free_block) / free_in_reserved;
  }
};

// Why an out-of-memory incident happened (oom_incidents.h states each rule).
enum class Verdict { Capacity, Fragmentation, AllocatorLimit, OtherProcesses, NotEnoughInformation };
const char* verdict_name(Verdict verdict);

// What live memory is for (roles.h says how each is decided). The split of one moment sums to
// the device's reserved bytes then.
enum class Role : uint8_t {
  Parameters,
  Gradients,
  OptimizerState,
  Activations,          // forward outputs and temporaries
  BackwardTemporaries,  // allocated by backward() and freed before it returned
  LibraryWorkspaces,    // cuBLAS/cuDNN/... handles and workspaces
  AllocatorCache,       // reserved by a caching allocator, not handed out
  Other,
};
inline constexpr size_t kRoles = 8;
const char* role_name(Role role);

struct RoleSplit {
  uint64_t bytes[kRoles] = {};
  uint64_t total() const;
  bool empty() const { return total() == 0; }
};

// One attempt of a failed request: a CUDA call that returned out-of-memory, or the allocator's own
// OOM record.
struct OomAttempt {
  uint64_t seq = 0;
  uint64_t time_ns = 0;
  std::string op;
  std::string api;
  int64_t result = 0;
  uint64_t size = 0;
};

struct PeakLevel {
  uint64_t bytes = 0;
  uint64_t seq = 0;
  uint64_t time_ns = 0;
  std::string phase;                // the NVTX ranges open on the peak's thread ("train/forward"),
                                    // else the label of the last mark before it; "" when none
  std::vector<StackBytes> culprits; // largest first, at most kMaxCulprits
  uint64_t other_bytes = 0;         // held by stacks beyond the listed culprits
};

struct PeakReport {
  int32_t device = -1;
  PeakLevel reserved;               // CUDA-level memory (what the device gave out)
  bool has_blocks = false;
  PeakLevel allocated;              // block-level memory, when the trace has block data
  bool has_fragmentation = false;
  FragmentationPoint fragmentation; // at the allocated peak
  bool has_roles = false;
  RoleSplit roles;                  // reserved bytes by role at the allocated peak (the reserved
  uint64_t roles_time_ns = 0;       // peak without block data)
  std::string advice;
};

// Free address ranges between a device's live CUDA allocations, on a device without block data
// (oom_incidents.h): what a first-fit heap of the device's size could still hand out in one piece.
struct AddressGaps {
  uint64_t span = 0;                // from the lowest live allocation to the end of the highest
  uint64_t inside = 0;              // free bytes between them
  uint64_t largest = 0;             // the largest free range between two of them
};

// What filled the device before an OOM (story.h): a growing site (growth[growth]) that held, at the
// OOM, more than the request was short of.
struct OomCause {
  size_t growth = 0;                // index into ProcessReport::growth
  uint64_t grew_bytes = 0;          // its highest less its first live bytes
  uint64_t steps = 0;               // its new highs after the first
  uint64_t held_bytes = 0;          // its live bytes at the OOM
  uint64_t of_bytes = 0;            // what held_bytes is a share of: the device's total, else the live bytes
  bool of_device = false;           // of_bytes is the device's total
};

// One out-of-memory incident: the failed request, with every CUDA failure and allocator retry that
// belonged to it (oom_incidents.h). The figures describe the moment of its last attempt.
struct OomReport {
  int32_t device = -1;
  uint64_t seq = 0;
  uint64_t time_ns = 0;
  std::string op;                   // "alloc" (CUDA refused) or "block_oom" (caching allocator)
  std::string api;
  int64_t result = 0;
  uint64_t requested = 0;
  Stack stack;
  uint64_t live_bytes = 0;          // CUDA-level live bytes on the device at that moment
  uint64_t allocated_bytes = 0;     // block-level live bytes (0 without block data)
  std::vector<StackBytes> top_holders;
  bool has_device_free = false;
  uint64_t device_free = 0;         // the figure the verdict used: the reading, corrected when stale
  uint64_t device_total = 0;        // 0 = unknown
  // The device's last reading of its free bytes, when it was older than the attempt and this
  // process's reserved bytes had changed since (or it left no room for them): the raw figure, and
  // what the process held when it was taken. device_free is then the reading corrected by the change.
  bool stale_reading = false;
  uint64_t reading_free = 0;
  uint64_t reading_reserved = 0;
  bool has_blocks = false;
  FragmentationPoint fragmentation;
  bool has_address_gaps = false;    // no block data: the free ranges between live allocations
  AddressGaps address_gaps;
  Verdict verdict = Verdict::NotEnoughInformation;
  std::string explanation;          // the evidence behind the verdict, one sentence
  std::string phase;
  std::vector<OomAttempt> attempts; // in time order; the first kMaxAttempts
  uint64_t attempts_total = 0;
  uint64_t last_attempt_ns = 0;     // when its last attempt failed
  RoleSplit roles;                  // live memory by role at the last attempt
  std::string advice;               // the one advice: the cause's when there is one (story.h), else
                                    // the verdict's (advice.h); "" when no rule applies
  bool has_cause = false;
  OomCause cause;
  // The allocator's memory-fraction cap in force on the device at the OOM, when the trace records it
  // (allocator_settings records): fraction x the device's total bytes.
  double cap_fraction = 0.0;        // 0: none recorded
  uint64_t cap_bytes = 0;           // 0: the device's total is unknown
  std::string cap_source;           // "set_per_process_memory_fraction" or "per_process_memory_fraction"
};

// A failed allocation that is not out-of-memory (invalid value, not permitted, ...), grouped by
// (device, api, result, stack).
struct FailedCall {
  int32_t device = -1;
  std::string api;
  int64_t result = 0;
  std::string error;                // the CUDA error's name
  uint64_t size = 0;                // of the first one
  uint64_t count = 0;
  uint64_t first_time_ns = 0;
  Stack stack;
};

// Where memory is counted: a CUDA allocation, a physical handle (cuMemCreate), a caching
// allocator's block, pinned host memory (cudaHostAlloc, cudaMallocHost, cuMemHostAlloc: host RAM,
// never the device's). level_name() is the word the outputs use ("allocation", "physical", "block",
// "host").
enum class Level : uint8_t { Allocation, Physical, Block, Host };
const char* level_name(Level level);

struct GrowthReport {
  int32_t device = -1;
  Level level = Level::Allocation;  // Allocation (CUDA level) or Block
  Stack stack;
  uint64_t first_bytes = 0;         // the site's live bytes at its first high-water mark
  uint64_t peak_bytes = 0;          // its highest live bytes
  uint64_t final_bytes = 0;         // live at the end
  uint64_t rises = 0;               // how many times it set a new high
  uint32_t windows_rising = 0;      // run windows in which it set a new high...
  uint32_t windows_total = 0;       // ...out of this many
  uint64_t first_time_ns = 0;       // when the site first held memory
  uint64_t last_rise_time_ns = 0;   // when it last set a new high
  std::string advice;
};

// Pinned host memory of the process: its own line, never in a device's peak, timeline or OOM
// figures (it is host RAM the device can reach, not device memory).
struct PinnedHostSummary {
  uint64_t allocations = 0;
  uint64_t frees = 0;
  uint64_t peak_bytes = 0;
  uint64_t peak_time_ns = 0;
  uint64_t live_bytes = 0;          // at the end
};

struct TimelineSample {
  uint64_t time_ns = 0;
  uint64_t reserved = 0;
  uint64_t allocated = 0;
  bool has_roles = false;  // the split says more than "other" (PyTorch blocks)
  RoleSplit roles;         // reserved bytes by role then
};

struct FragmentationReport {
  int32_t device = -1;
  std::vector<TimelineSample> timeline;  // bounded, evenly thinned
  FragmentationPoint at_peak;
  uint64_t peak_time_ns = 0;
  struct AtOom {
    uint64_t seq = 0;
    uint64_t time_ns = 0;
    FragmentationPoint point;
  };
  std::vector<AtOom> at_ooms;
};

struct LeakGroup {
  int32_t device = -1;
  Level level = Level::Allocation;
  std::string kind;                 // memory kind of the group's first allocation
  uint64_t bytes = 0;
  uint64_t count = 0;
  Stack stack;
  bool suppressed = false;
  std::string suppressed_by;        // the matching suppression pattern
};

// Memory live at exit that is not a leak of the program (leaks.h): held by a CUDA library's state,
// or a caching allocator's block the program still referenced when it ended.
struct HeldAtExit {
  int32_t device = -1;
  Level level = Level::Allocation;
  std::string kind;
  std::string reason;               // "library" | "alive_at_exit" | "before_recording"
  std::string library;              // reason "library": the library's name
  uint64_t bytes = 0;
  uint64_t count = 0;
  Stack stack;
};

// A scoped leak check (gpumemtrace_scope_begin/end, gpumemtrace.scope, one pytest test): memory
// allocated inside the scope and still live when it ended (scopes.h).
struct ScopeReport {
  std::string name;
  std::string api;                  // who opened it: "pytest", "gpumemtrace.scope", ...
  uint64_t begin_time_ns = 0;
  uint64_t end_time_ns = 0;
  bool closed = true;               // false: the trace ended inside it
  // Its scope_end said the work inside failed (result bit kScopeFailed: a pytest test that failed or
  // errored, whose traceback still holds the test's locals): not checked, leaked_bytes 0, no leaks listed.
  bool failed = false;
  // The pytest plugin's limits (result bits, trace/format.h): a leak limit of its own
  // (gpu_leak_limit) decides its leak, not --fail-on-leak; and which of its own limits it went over
  // (the test failed for it: `failed` too, but raised nothing, so its leak is counted as usual).
  bool own_leak_limit = false;
  bool over_memory_limit = false;
  bool over_leak_limit = false;
  uint64_t leaked_bytes = 0;
  uint64_t leaked_count = 0;
  std::vector<StackBytes> leaks;    // largest first, at most kMaxCulprits
  // Live at its end and freed later by a garbage collection (held_until_gc.h): cyclic garbage, not
  // counted in leaked_*.
  uint64_t held_until_gc_bytes = 0;
  uint64_t held_until_gc_count = 0;
  std::vector<StackBytes> held_until_gc;  // largest first, at most kMaxCulprits
  std::string advice;
  uint64_t peak_bytes = 0;          // its own high-water mark (scope_peaks.h)
};

struct DeviceSummary {
  int32_t device = -1;
  std::string name;
  uint64_t total = 0;
  uint64_t events = 0;
  uint64_t allocations = 0;
  uint64_t frees = 0;
  uint64_t failed_allocations = 0;
  uint64_t block_allocations = 0;
  // Some of them are PyTorch's (its bridge's or a snapshot's): the what-if replays model its caching
  // allocator only (what_if.h), so a device without any has nothing for them to replay.
  bool pytorch_blocks = false;
  uint64_t block_frees = 0;
  uint64_t block_ooms = 0;
  uint64_t unmatched_frees = 0;     // frees of addresses never seen allocated (before tracing?)
  uint64_t first_time_ns = 0;
  uint64_t last_time_ns = 0;
  uint64_t peak_reserved = 0;
  uint64_t peak_allocated = 0;
  uint64_t leaked_bytes = 0;        // unsuppressed
  uint64_t cached_bytes = 0;        // held by a caching allocator or an async pool at the end
  uint64_t library_bytes = 0;       // held by a CUDA library at the end
  uint64_t alive_at_exit_bytes = 0; // caching-allocator blocks still referenced at the end
  uint64_t ooms = 0;                // out-of-memory incidents
  // A PyTorch snapshot: the state its history started from (its "initial" events, which the counts
  // above leave out): segments (and expandable segments' mapped ranges), blocks, and their bytes.
  uint64_t initial_segments = 0;
  uint64_t initial_blocks = 0;
  uint64_t initial_reserved = 0;
  uint64_t initial_allocated = 0;
  std::vector<TimelineSample> timeline;  // reserved/allocated over the run, bounded, evenly thinned
  // A capped trace (GPUMEMTRACE_MAX_BYTES): every figure above covers the events up to the cap.
  // What was live at the end (its `live` records) is known; when, and any peak after the cap, not.
  bool after_cap = false;
  uint64_t after_cap_live = 0;       // reserved bytes live at the end
  uint64_t after_cap_allocated = 0;  // block bytes live at the end (0 without block data)
};

// An NVTX range (nvtx_phases.h): a slice of its thread's timeline in the Perfetto export.
struct NvtxRange {
  std::string name;
  uint64_t tid = 0;                 // the thread that opened it
  uint64_t range = 0;               // start/end ranges: their id; 0 for push/pop
  uint64_t begin_time_ns = 0;
  uint64_t end_time_ns = 0;
  bool closed = true;               // false: the trace ended inside it
};

// What one replay of the allocator model shows: the figures of a what-if row (WhatIfRow) and of a
// batch what-if's row (BatchRow, batch_what_if.h), made by what_if.h's figures_of.
struct ReplayFigures {
  uint64_t reserved_peak = 0;
  uint64_t allocated_peak = 0;      // rounded block sizes, as PyTorch counts allocated bytes
  FragmentationPoint at_peak;       // at the reserved peak
  uint64_t cache_flushes = 0;       // whole-cache releases inside a failing malloc
  uint64_t retries = 0;             // allocations retried after one
  std::vector<TimelineSample> timeline; // predicted reserved bytes (allocated unused), bounded
};

// One setting's replay of a device's PyTorch requests (what_if.h). The recorded run is the first row.
struct WhatIfRow : ReplayFigures {
  std::string settings;             // PYTORCH_CUDA_ALLOC_CONF text over the recorded settings
  bool recorded = false;            // the recorded run: reserved peak from the trace, the rest replayed
  bool automatic = false;           // a candidate the report tried by itself (no --what-if)
  uint64_t new_ooms = 0;            // requests the recording served and this setting refused
  uint64_t first_new_oom_time_ns = 0;
  std::vector<bool> ooms_still_happen;  // per recorded OOM (WhatIfReport::oom_seqs)
  // A batch what-if's row (batch_what_if.h): the batch replayed (0: a setting's row), from one run's
  // roles (an estimate), and the range of the reserved peak when the sizes are not linear.
  uint64_t batch = 0;
  bool estimate = false;
  bool has_range = false;
  uint64_t reserved_low = 0, reserved_high = 0;
};

struct WhatIfReport {
  int32_t device = -1;
  std::string recorded_settings;    // what the recording is replayed under (at its start)
  bool settings_recorded = false;   // the trace's allocator_settings records say so (else inferred)
  std::string settings_option;      // --recorded-settings, applied over them ("" when not given)
  uint64_t settings_changes = 0;    // recorded changes replayed mid-run
  std::vector<std::string> unmodeled;  // recorded options the model does not replay
  uint64_t capacity = 0;            // bytes the allocator could reserve (device free + its own), 0 = unknown
  std::vector<uint64_t> oom_seqs;   // the recorded OOMs (torch.oom events)
  std::vector<uint64_t> oom_requested;
  std::vector<WhatIfRow> rows;
  // The recorded settings' replay against the recording (replay.h).
  bool faithful = false;
  uint64_t segment_ops_compared = 0;
  uint64_t blocks_compared = 0;
  bool has_divergence = false;
  uint64_t divergence_seq = 0;
  uint64_t divergence_time_ns = 0;
  std::string divergence;
  // Headroom at the allocated peak (an estimate: what_if.h says what it assumes).
  bool has_headroom = false;
  uint64_t activation_bytes = 0;    // activations + backward temporaries at the allocated peak
  double headroom_recorded = 0;     // the factor those could grow by and still fit, recorded settings
  double headroom_best = 0;         // ... under the best row
  std::string best_settings;
  std::string advice;               // names a setting only when its replay shows it helps
};

// Growth turned into time: when the device fills at the growth's rate (time_to_oom.h).
struct TimeToOomReport {
  int32_t device = -1;
  Level level = Level::Allocation;
  Stack stack;                      // the growing site
  uint64_t bytes_per_step = 0;      // per new high of the site (one per iteration in a loop)
  uint64_t steps = 0;               // new highs measured
  double bytes_per_second = 0;
  double seconds_per_step = 0;      // the run's pace
  uint64_t free_bytes = 0;          // device memory left at the end of the trace
  bool free_known = false;          // false: the device's total, less what the process held
  double steps_left = 0;
  double seconds_left = 0;          // < 0: unknown
};

struct Mark {
  uint64_t seq = 0;
  uint64_t time_ns = 0;
  std::string label;
};

struct ProcessReport {
  std::string file;
  Header header;
  bool complete = false;            // a footer was seen (the trace was finished)
  bool truncated = false;
  // How the process ended, as its footer says (End::Unknown: no footer, or one that does not say).
  format::End end = format::End::Unknown;
  int32_t exit_status = -1;         // End::Exit, End::QuickExit: 0-255; -1 when not known
  int32_t end_signal = 0;           // End::Signal: the signal's number
  // Cut: no footer (killed, disk full, still running), a cut-short last line, or a dump (a running
  // process's trace sealed by gpumemtrace.dump(): footer "end": "dump"). The analysis covers up to
  // last_time_ns only; what was live then is "live when the trace was cut", never a leak.
  bool cut() const { return !complete || truncated || end == format::End::Dump; }
  // Killed by a signal's default action (SIGTERM, SIGINT, SIGHUP), the trace finished up to it: what
  // was live then is "live when killed", never a leak (the program did not get to free it).
  bool killed_by_signal() const { return complete && !truncated && end == format::End::Signal; }
  // The run ended in an out-of-memory error (story.h): an OOM incident after which nothing was
  // allocated, and an end that says it failed (a non-zero exit status, a signal, a cut trace). What
  // was live then is "live when it crashed", never a leak; crash_oom is the incident (an index into ooms).
  bool ended_in_oom = false;
  // A PyTorch snapshot whose history ends in an OOM incident (nothing allocated after it): taken at
  // that OOM, as an OOM observer or an except handler takes one. Its story opens with that OOM as a
  // crashed run's does (story.h), but nothing says the run ended there. crash_oom is that incident too.
  bool taken_at_oom = false;
  size_t crash_oom = 0;
  bool is_crash(const OomReport& oom) const { return ended_in_oom && &oom == &ooms[crash_oom]; }
  // The story opens with an OOM (crash_oom): the run ended in it, or the snapshot was taken at it.
  bool opens_with_oom() const { return ended_in_oom || taken_at_oom; }
  bool is_story_oom(const OomReport& oom) const { return opens_with_oom() && &oom == &ooms[crash_oom]; }
  // Cut, killed or crashed: the program did not end on its own terms, so nothing live at the end is a
  // leak and a scope still open then gets no verdict.
  bool ended_early() const { return cut() || killed_by_signal() || ended_in_oom; }
  // A PyTorch memory snapshot (header backend "pytorch_snapshot"): a moment of a run, not its end.
  bool snapshot = false;
  // The snapshot contradicts itself (its first warning says how): no figure is given that depends on it.
  bool inconsistent_input = false;
  uint64_t initial_events = 0;      // of `events`: the state the snapshot's history started from
  uint64_t events = 0;
  uint64_t dropped_events = 0;      // > 0: the analysis is incomplete
  uint64_t first_time_ns = 0;
  uint64_t last_time_ns = 0;       // of its last event: its duration is first to last event
  std::vector<std::string> warnings;
  std::vector<DeviceSummary> devices;
  PinnedHostSummary pinned_host;
  std::vector<LeakGroup> leaks;     // largest first, suppressed ones included (flagged)
  std::vector<HeldAtExit> held_at_exit;  // largest first
  std::vector<FailedCall> failed_calls;  // not out-of-memory; largest count first
  std::vector<ScopeReport> scopes;  // in the order they ended; the first kMaxScopes
  uint64_t scopes_total = 0;
  std::vector<PeakReport> peaks;
  std::vector<OomReport> ooms;
  std::vector<GrowthReport> growth;
  std::vector<FragmentationReport> fragmentation;
  std::vector<Mark> marks;          // the first kMaxMarks
  uint64_t marks_total = 0;
  std::vector<NvtxRange> nvtx_ranges;  // in the order they closed; the first kMaxNvtxRanges
  uint64_t nvtx_ranges_total = 0;
  std::vector<WhatIfReport> what_if;   // per device with PyTorch events, when a replay ran
  std::vector<TimeToOomReport> time_to_oom;
  std::vector<TopSitesReport> top_sites;  // per device and level (top_sites.h)
  AllocationTimeline allocation_timeline;  // for the HTML report (allocation_timeline.h)

  uint64_t leaked_bytes() const;    // unsuppressed; 0 when ended_early()
  uint64_t leaked_count() const;
  uint64_t live_when_cut_bytes() const;  // unsuppressed bytes live at the end, cut or not
  uint64_t peak_bytes() const;      // the highest reserved peak over its devices
  uint64_t alive_at_exit_bytes() const;
  uint64_t scope_leaked_bytes() const;  // the largest leak of one scope
};

inline constexpr size_t kMaxCulprits = 10;
inline constexpr size_t kMaxMarks = 256;
inline constexpr size_t kMaxAttempts = 16;
inline constexpr size_t kMaxScopes = 1000;
inline constexpr size_t kMaxNvtxRanges = 10000;
inline constexpr size_t kMaxIncidents = 100;

}  // namespace gpumemtrace::report
