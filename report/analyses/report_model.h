// report/analyses/report_model.h — the results of the analyses for one process, as plain data.
// The analyses fill it; report/outputs/ renders it (text, JSON); diff compares two of them.
// Nothing here refers back to the trace: stacks are already resolved to frames.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

struct PeakLevel {
  uint64_t bytes = 0;
  uint64_t seq = 0;
  uint64_t time_ns = 0;
  std::string phase;                // label of the last mark before the peak, "" when none
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
};

enum class Verdict { Capacity, Fragmentation, Unknown };
const char* verdict_name(Verdict verdict);

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
  uint64_t device_free = 0;
  uint64_t device_total = 0;        // 0 = unknown
  bool has_blocks = false;
  FragmentationPoint fragmentation;
  Verdict verdict = Verdict::Unknown;
  std::string phase;
};

// Where memory is counted: a CUDA allocation, a physical handle (cuMemCreate), a caching
// allocator's block. level_name() is the word the outputs use ("allocation", "physical", "block").
enum class Level : uint8_t { Allocation, Physical, Block };
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
};

struct TimelineSample {
  uint64_t time_ns = 0;
  uint64_t reserved = 0;
  uint64_t allocated = 0;
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

struct DeviceSummary {
  int32_t device = -1;
  std::string name;
  uint64_t total = 0;
  uint64_t events = 0;
  uint64_t allocations = 0;
  uint64_t frees = 0;
  uint64_t failed_allocations = 0;
  uint64_t block_allocations = 0;
  uint64_t block_frees = 0;
  uint64_t block_ooms = 0;
  uint64_t unmatched_frees = 0;     // frees of addresses never seen allocated (before tracing?)
  uint64_t first_time_ns = 0;
  uint64_t last_time_ns = 0;
  uint64_t peak_reserved = 0;
  uint64_t peak_allocated = 0;
  uint64_t leaked_bytes = 0;        // unsuppressed
  uint64_t cached_bytes = 0;        // held by a caching allocator or an async pool at the end
};

struct Mark {
  uint64_t seq = 0;
  uint64_t time_ns = 0;
  std::string label;
};

struct ProcessReport {
  std::string file;
  Header header;
  bool complete = false;            // a footer was seen (clean exit)
  bool truncated = false;
  uint64_t events = 0;
  uint64_t dropped_events = 0;      // > 0: the analysis is incomplete
  uint64_t first_time_ns = 0;
  uint64_t last_time_ns = 0;
  std::vector<std::string> warnings;
  std::vector<DeviceSummary> devices;
  std::vector<LeakGroup> leaks;     // largest first, suppressed ones included (flagged)
  std::vector<PeakReport> peaks;
  std::vector<OomReport> ooms;
  std::vector<GrowthReport> growth;
  std::vector<FragmentationReport> fragmentation;
  std::vector<Mark> marks;          // the first kMaxMarks
  uint64_t marks_total = 0;

  uint64_t leaked_bytes() const;    // unsuppressed
  uint64_t leaked_count() const;
  uint64_t peak_bytes() const;      // the highest reserved peak over its devices
};

inline constexpr size_t kMaxCulprits = 10;
inline constexpr size_t kMaxMarks = 256;

}  // namespace gpumemtrace::report
