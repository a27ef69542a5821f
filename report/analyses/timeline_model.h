// report/analyses/timeline_model.h — the allocation timeline as plain data: every allocation that
// matters as a band (start, end, size, stack), the rest aggregated over time, per device and level
// (allocation_timeline.h fills it; the HTML report draws it). Also the top call sites (top_sites.h).
//
// Stacks are resolved once into AllocationTimeline::stacks and referred to by index, so tens of
// thousands of bands do not copy their frames.
#pragma once

#include <cstdint>
#include <vector>

#include "report/reader/symbols.h"

namespace gpumemtrace::report {

enum class Level : uint8_t;
enum class Role : uint8_t;

// One allocation, drawn individually: its lifetime and where it was made.
struct TimelineBand {
  // Why it is drawn individually (any of them).
  static constexpr uint8_t kAtPeak = 1;  // live at its level's peak
  static constexpr uint8_t kAtOom = 2;   // live at an out-of-memory failure of its device
  static constexpr uint8_t kAtEnd = 4;   // live when the trace ends (a leak, held, cached)
  static constexpr uint8_t kLarge = 8;   // among the largest of the rest (the budget below)

  uint64_t start_ns = 0;
  uint64_t end_ns = 0;       // when it was freed; the trace's end when live_at_end
  uint64_t addr = 0;         // its address (a physical handle's mapped address; 0: never mapped)
  uint64_t size = 0;
  uint32_t stack = 0;        // index into AllocationTimeline::stacks
  Level level{};
  Role role{};
  uint8_t why = 0;
  bool live_at_end = false;
  bool segment = false;      // a caching allocator's segment (blocks were inside it)
};

// Live bytes and allocations of one level at one moment, and how much of it has bands.
struct TimelineMoment {
  uint64_t time_ns = 0;
  uint64_t bytes = 0;
  uint64_t count = 0;
  uint64_t shown_bytes = 0;  // in bands live then
  uint64_t shown_count = 0;
};

// Memory not drawn individually, for one call site (or every other site): average live bytes per
// time bucket.
struct TimelineGroup {
  static constexpr uint32_t kOtherStacks = UINT32_MAX;
  uint32_t stack = kOtherStacks;  // index into AllocationTimeline::stacks, or kOtherStacks
  Role role{};                    // of its first aggregated allocation
  uint64_t bytes = 0;             // its aggregated allocations' bytes
  uint64_t count = 0;             // ... and their number
  std::vector<uint64_t> average;  // per bucket
};

// A call site's totals over the run (top_sites.h), for the flame graphs of bytes allocated, of
// allocations and of temporary allocations.
struct TimelineSite {
  uint32_t stack = 0;  // index into AllocationTimeline::stacks
  uint64_t bytes = 0, count = 0, temporary_bytes = 0, temporary_count = 0;
};

// One level of one device: caching-allocator blocks (tensors), or CUDA-level memory (allocations
// and physical handles).
struct TimelineLevel {
  uint64_t allocations = 0;       // acquired over the run (and live records)
  uint64_t shown = 0;             // drawn as bands
  uint64_t aggregated = 0;        // counted in groups instead
  uint64_t aggregated_bytes = 0;
  TimelineMoment peak;            // the level's peak (the first time live bytes reached it)
  std::vector<TimelineMoment> ooms;  // at each out-of-memory failure of the device (the first kMaxOoms)
  // Time buckets: bucket i covers [origin_ns + i*bucket_ns, origin_ns + (i+1)*bucket_ns).
  uint64_t origin_ns = 0;
  uint64_t bucket_ns = 0;
  std::vector<uint64_t> live_max;  // per bucket: the highest live bytes in it (a step line)
  std::vector<TimelineGroup> groups;  // the first kMaxGroups sites aggregated, then other stacks
  std::vector<TimelineBand> bands;    // by start time
  std::vector<TimelineSite> sites;    // every site with a kept stack, most bytes first
  TimelineSite other_sites;           // the sites without one, together (stack 0)
  bool empty() const { return allocations == 0; }
};

// A device's event clock: which memory event (acquire, release or out-of-memory failure at any
// level, counted from 0) happened when, as knots `{time_ns, event}` in order, time never going
// back; between two knots the events are spread evenly over the time between them. At most
// kMaxKnots knots, each kept event a multiple of a stride that doubles when they would be more;
// the last event is always a knot. The HTML page's event-index axis (memory_viz's), where a run's
// idle minutes take no room.
struct EventClock {
  static constexpr size_t kMaxKnots = 2048;
  struct Knot {
    uint64_t time_ns = 0;
    uint64_t event = 0;
  };
  std::vector<Knot> knots;
  uint64_t events = 0;  // in all
};

struct DeviceTimeline {
  int32_t device = -1;
  TimelineLevel blocks;   // tensor level
  TimelineLevel memory;   // CUDA level
  EventClock clock;
};

struct AllocationTimeline {
  std::vector<Stack> stacks;
  uint64_t stacks_dropped = 0;     // bands whose stack was not kept (kMaxStacks): stack index 0
  std::vector<DeviceTimeline> devices;
  // The budgets in force (allocation_timeline.h): how many bands of each kind may be kept.
  uint64_t max_ordinary = 0;
  uint64_t max_pinned = 0;
};

// One call site's totals at one level of one device (top_sites.h).
struct SiteTotals {
  Stack stack;
  uint64_t bytes = 0;              // allocated over the run
  uint64_t count = 0;              // allocations
  uint64_t temporary_bytes = 0;    // of allocations freed within kTemporaryNs
  uint64_t temporary_count = 0;
  uint64_t peak_bytes = 0;         // live at its level's peak
};

struct TopSitesReport {
  int32_t device = -1;
  Level level{};                   // Block (tensors) or Allocation (CUDA level, physical included)
  uint64_t sites = 0;              // call sites that allocated at this level
  uint64_t temporary_ns = 0;       // the lifetime under which an allocation is temporary
  std::vector<SiteTotals> by_peak;       // largest first, at most kMaxTopSites each
  std::vector<SiteTotals> by_bytes;
  std::vector<SiteTotals> by_count;
  std::vector<SiteTotals> by_temporary;  // by temporary_count
};

}  // namespace gpumemtrace::report
