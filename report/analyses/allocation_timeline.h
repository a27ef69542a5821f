// report/analyses/allocation_timeline.h — every allocation that matters on the timeline, computed
// while the trace streams by, in bounded memory: the level of detail of the HTML report's
// "every allocation" view, decided here and not in the browser (docs/report.md, "Every allocation").
//
// Each acquisition of the memory model (a block, a CUDA allocation, a physical handle; not pinned
// host memory, which is not the device's) becomes a
// band [acquired, released) when it is released, or at the end of the trace. A band is kept
// individually when it is
//  - live at its level's peak: bands released after the current peak that were live at it are held
//    apart; when the peak moves on, they were not live at the new one and become ordinary bands;
//  - live at an out-of-memory failure of its device (kept for good);
//  - live at the end of the trace (leaks, memory held at exit, the allocator's cache);
//  - or among the kMaxOrdinary largest of the rest (a min-heap by size: the smallest gives way).
// A band that gives way is added to its level's aggregate: average live bytes per time bucket, for
// each of the first kMaxGroups call sites aggregated and for all others together, computed in O(1)
// per band (partial buckets directly, whole buckets through a difference array). The buckets double
// in width when the run outgrows them (kBuckets at most), so their memory is fixed.
// At the end, when more than kMaxBands are kept, the least important (ordinary, then live at the
// end only, by size) are aggregated too; the report says how much of each peak and OOM is drawn.
//
// Memory: the bands kept (bounded by the budgets), the buckets, one entry per call site aggregated;
// nothing per event. Cost: O(log budget) per release. Single-threaded.
//
// Listener order: registered before Roles, so that a block's role can still be asked on release.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "report/analyses/device_table.h"
#include "report/analyses/memory_model.h"
#include "report/analyses/report_model.h"
#include "report/analyses/roles.h"
#include "report/analyses/top_sites.h"

namespace gpumemtrace::report {

class AllocationTimelineAnalysis : public ModelListener {
 public:
  static constexpr size_t kMaxOrdinary = 20000;  // bands kept only for their size
  static constexpr size_t kMaxAtPeak = 20000;    // per level: bands live at its current peak, freed since
  static constexpr size_t kMaxPinned = 30000;    // live at an OOM or at the end
  static constexpr size_t kMaxBands = 60000;     // in all, at the end
  static constexpr size_t kBuckets = 1024;
  static constexpr size_t kMaxGroups = 24;
  static constexpr size_t kMaxStacks = 4000;
  static constexpr size_t kMaxOoms = 100;

  // Registered with the model only when the HTML page is asked for (ProcessAnalyzer): no other
  // output draws it. `sites`, when given, ranks the stacks it keeps (top_sites.h).
  AllocationTimelineAnalysis(const MemoryModel& model, const Roles& roles, const SymbolTable& symbols,
                             const TopSites* sites)
      : model_(model), roles_(roles), symbols_(symbols), sites_(sites) {}

  void on_acquire(const Holding& h) override;
  void on_release(const Holding& h) override;
  // An out-of-memory failure (a CUDA call that returned out-of-memory, the allocator's OOM) at the
  // event being applied: what is live on the device now is kept.
  void on_oom(int32_t device);
  // At the end, after the model settled: what is still live becomes bands; fills out.timeline.
  void finish(ProcessReport& out);

 private:
  struct Band {
    uint64_t start_ns = 0, end_ns = 0;
    uint64_t start_pos = 0, end_pos = 0;  // stream positions: live at position p when start <= p < end
    uint64_t addr = 0, size = 0;
    SiteId site = 0;
    int32_t device = -1;
    Level level = Level::Allocation;
    Role role = Role::Other;
    uint8_t why = 0;
    bool live_at_end = false;
    bool segment = false;
  };
  // A min-heap by size that keeps at most `capacity` bands; push() hands back the one that gave way.
  class SmallestOut {
   public:
    explicit SmallestOut(size_t capacity) : capacity_(capacity) {}
    bool push(const Band& band, Band* evicted);
    std::vector<Band>& bands() { return heap_; }
   private:
    size_t capacity_;
    std::vector<Band> heap_;
  };
  struct Group {
    SiteId site = 0;
    bool other = false;
    Role role = Role::Other;
    uint64_t bytes = 0, count = 0;
    std::vector<double> area;      // byte-ns per bucket, partial buckets and settled whole ones
    std::vector<int64_t> delta;    // difference array of whole-bucket coverage (bytes), kBuckets + 1
  };
  struct Buckets {
    bool started = false;
    uint64_t origin = 0;
    uint64_t width = 1024;         // ns, a power of two
    std::vector<uint64_t> live_max, live_last;
    std::vector<uint8_t> touched;
    std::vector<Group> groups;     // [0]: other stacks; then one per site, first come
    std::unordered_map<SiteId, size_t> group_of;
    size_t last_used = 0;
  };
  struct LevelState {
    uint64_t live = 0, count = 0;
    uint64_t allocations = 0, aggregated = 0, aggregated_bytes = 0;
    uint64_t peak = 0, peak_pos = 0, peak_time = 0, peak_count = 0;
    SmallestOut at_peak{kMaxAtPeak};
    Buckets buckets;
  };
  struct OomAt {
    uint64_t position = 0, time_ns = 0;
    uint64_t bytes[2] = {}, count[2] = {};  // [0]: blocks, [1]: CUDA level
  };
  // Builds the device's EventClock (timeline_model.h) one event at a time: O(1) amortized, kMaxKnots
  // knots of memory.
  struct Clock {
    EventClock clock;
    uint64_t stride = 1;
    EventClock::Knot last;
    void tick(uint64_t time_ns);
    EventClock finish() const;
  };
  struct DeviceState {
    LevelState blocks, memory;
    Clock clock;
    uint64_t last_oom_pos = 0;
    std::vector<OomAt> ooms;
    uint64_t ooms_total = 0;
  };

  LevelState& level_of(int32_t device, Level level) {
    DeviceState& d = devices_.get(device);
    return level == Level::Block ? d.blocks : d.memory;
  }
  Band band_of(const Holding& h, bool live_at_end, uint64_t end_ns) const;
  void changed(LevelState& level, uint64_t before);
  void keep(const Band& band);
  void give_way(const Band& band);
  void grow_to(Buckets& b, uint64_t time);
  size_t bucket_of(Buckets& b, uint64_t time);
  void settle(Buckets& b);
  Group& group_for(Buckets& b, const Band& band);

  const MemoryModel& model_;
  const Roles& roles_;
  const SymbolTable& symbols_;
  const TopSites* sites_;
  DeviceTable<DeviceState> devices_;
  SmallestOut ordinary_{kMaxOrdinary};
  SmallestOut pinned_{kMaxPinned};
};

}  // namespace gpumemtrace::report
