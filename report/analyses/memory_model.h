// report/analyses/memory_model.h — the replayed memory of one process: live CUDA allocations,
// physical handles, caching-allocator blocks, async pools, and per device the live bytes by site at
// two levels (ledger.h). Every analysis reads this one model; none keeps its own copy of what is live.
//
// Accounting levels (docs/report.md):
//  - "reserved" (CUDA level): alloc of kinds device, async, managed, array and physical
//    (cuMemCreate) until their free or a reset. virtual reservations never count.
//  - "allocated" (block level): block_alloc until block_free, inside the segment (a live alloc
//    range) that contains it.
//  - pinned host memory (alloc of kind host): its own ledger (host()), in no device's levels.
//
// Analyses that need to see each piece of memory come and go register a ModelListener: it hears
// every acquire and release, in timeline order (a reset releases each holding of its device).
//
// Memory: live allocations + live blocks + one ledger site per stack + bounded samples; nothing
// per event. Single-threaded.
#pragma once

#include <cstdint>
#include <map>
#include <memory_resource>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "report/analyses/device_table.h"
#include "report/analyses/ledger.h"
#include "report/analyses/node_pool.h"
#include "report/analyses/report_model.h"
#include "report/analyses/site.h"
#include "report/reader/records.h"
#include "trace/torch_actions.h"

namespace gpumemtrace::report {

// The end of [start, start + size), clamped at 2^64 - 1.
inline uint64_t range_end(uint64_t start, uint64_t size) { return size > UINT64_MAX - start ? UINT64_MAX : start + size; }

using torch_actions::is_torch_api;

// One piece of memory, as the listeners see it.
struct Holding {
  Level level = Level::Allocation;
  int32_t device = -1;
  uint64_t key = 0;        // address (allocation, block) or handle (physical)
  uint64_t size = 0;
  SiteId site = 0;
  uint64_t position = 0;   // stream position (1-based) of the event that acquired it
  bool torch = false;      // reported by PyTorch (api "torch.*")
  uint64_t time_ns = 0;    // when it was acquired
  uint64_t addr = 0;       // where it lies: the key, or a physical handle's mapped address (0: not mapped)
  bool segment = false;    // on release of an allocation: it was a caching allocator's segment
  bool initial = false;    // acquired by an "initial" event: held before the history began
};

// One id per holding across levels: an allocation, a block at the same address and a physical
// handle of the same value are different holdings (the analyses that key holdings by it: scopes,
// scope_peaks, held_until_gc).
inline uint64_t holding_id(const Holding& h) {
  return h.level == Level::Physical ? h.key ^ (1ull << 63) : (h.level == Level::Block ? h.key ^ (1ull << 62) : h.key);
}

class ModelListener {
 public:
  virtual ~ModelListener() = default;
  virtual void on_acquire(const Holding&) {}
  virtual void on_release(const Holding&) {}
};

class MemoryModel {
 public:
  struct Allocation {
    uint64_t size = 0;
    SiteId site = 0;
    uint64_t position = 0;
    uint64_t time_ns = 0;      // when it was acquired
    int32_t device = -1;
    Kind kind = Kind::Device;
    bool has_blocks = false;   // a block landed in it: a caching allocator's segment, whose free
                               // part is cached, not leaked
    bool cached = false;       // a caching allocator's segment (PyTorch's, or has_blocks): in cached_,
                               // with or without a block now (fragmentation.cpp)
    uint64_t block_bytes = 0;  // live block bytes inside (when has_blocks)
    int32_t pool = -1;         // index into pools_ (async)
    bool torch = false;        // PyTorch's (api "torch.*": snapshot import, live events)
    bool torch_only = false;   // created by a torch event (no runtime-level record of it, yet)
    bool initial = false;      // held before the recording began (an "initial" event: leaks.h)
  };
  struct Block {
    uint64_t size = 0;
    SiteId site = 0;
    uint64_t position = 0;
    uint64_t time_ns = 0;
    int32_t device = -1;
    uint64_t segment = 0;      // start of the containing allocation; 0 = none known
    bool in_segment = false;
    bool torch = false;
    bool initial = false;      // as Allocation::initial
  };
  struct Pool {
    std::string name;
    uint64_t cached = 0;       // freed to the pool, not yet reused or trimmed
    bool trimmed = false;      // the trace told us about this pool's retention
    int32_t device = -1;
  };
  // Keeps between kMax/2 and kMax evenly spaced samples of the whole run.
  class Sampler {
   public:
    // Once per event: true when this event's sample is to be kept (then store() it).
    bool due();
    void store(const TimelineSample& sample);
    std::vector<TimelineSample> take(const TimelineSample& last);
   private:
    std::vector<TimelineSample> samples_;
    uint64_t stride_ = 1;
    uint64_t skipped_ = 0;
  };
  // Fragmentation bookkeeping of one device (fragmentation.cpp), updated on every block, segment
  // and mapping change in O(log n), so that a measurement (at each new block-level peak, at each OOM)
  // costs O(1): the caching allocators' cached memory (every live segment, with or without a block
  // now, and the mapped ranges of expandable segments: cached_) and the free gaps inside it. A gap is
  // the space between a block (or its range's start) and the next block that starts inside the range
  // (or the range's end); blocks never overlap in a well-formed trace.
  struct SegmentGaps {
    uint64_t reserved = 0;          // bytes of the cached ranges
    uint64_t allocated = 0;         // bytes of the blocks that start inside them
    // Every non-empty gap of those ranges, as size -> how many: gap sizes repeat (a step frees what
    // the last one did), so most changes update a count in place rather than add or erase a node;
    // the nodes that come and go are the model's pooled ones.
    std::pmr::map<uint64_t, uint64_t> gaps;

    explicit SegmentGaps(std::pmr::memory_resource* nodes = std::pmr::get_default_resource()) : gaps(nodes) {}
  };
  // One cached range: a segment (an Allocation with `cached`), or a run of mapped pages of
  // expandable segments (touching runs merge: one range, as PyTorch's snapshot reports them).
  struct CachedRange {
    uint64_t end = 0;
    int32_t device = -1;
    bool mapped = false;
  };
  struct DeviceState {
    explicit DeviceState(std::pmr::memory_resource* nodes = std::pmr::get_default_resource()) : segments(nodes) {}
    DeviceSummary summary;
    SegmentGaps segments;
    Ledger reserved;
    Ledger allocated;
    bool has_blocks = false;
    bool has_meminfo = false;
    uint64_t meminfo_free = 0;
    uint64_t meminfo_total = 0;
    uint64_t meminfo_reserved = 0;  // this process's reserved bytes when meminfo_free was read
    Sampler timeline;
    bool has_fragmentation_at_peak = false;
    FragmentationPoint fragmentation_at_peak;  // at allocated.peak_snapshot()
    TimelineSample history_end;                // live bytes when the history ended (end_history)
    // Readings of the device's memory whose free bytes exceed its total (usable_reading): how many,
    // and the first one's figures.
    uint64_t inconsistent_readings = 0;
    uint64_t inconsistent_free = 0;
    uint64_t inconsistent_total = 0;
  };

  // Pinned host memory: live bytes by site, and its peak (Level::Host holdings).
  struct HostState {
    Ledger ledger;
    uint64_t allocations = 0;
    uint64_t frees = 0;
  };

  void add_listener(ModelListener* listener) { listeners_.push_back(listener); }

  // Per event, in timeline order: the stream position and growth window of the event, the phase
  // it belongs to. `site` is where memory it acquires is charged (its stack, or an attribution).
  void set_window(uint32_t window, bool widened);
  // The pass (passes.h) a block the event allocates falls in, 0 for none (the block ledger's rises).
  void set_pass(uint64_t pass) { pass_ = pass; }
  void set_phase(const std::string& phase);
  void apply(const Event& e, uint64_t position, SiteId site);
  void settle_all();  // takes pending peak snapshots (end of trace, phase change)
  // A capped trace's events end here (GPUMEMTRACE_MAX_BYTES): what is applied from now on (the
  // `live` records, the reset before them) changes what is live, for the leaks, and nothing the
  // recorded part measured: per-device counts and times, peaks and their culprits, growth highs.
  void end_history();
  bool history_ended() const { return history_ended_; }

  DeviceState& device_state(int32_t device) {
    DeviceState& state = devices_.get(device);
    state.summary.device = device;  // names a new state; storing every time is cheaper than asking
    return state;
  }
  const std::map<int32_t, DeviceState>& devices() const { return devices_.all(); }
  // Live allocations and blocks come and go on nearly every event: their nodes come from a pool
  // (nodes_), so the common path allocates nothing.
  using AllocationMap = std::pmr::map<uint64_t, Allocation>;
  using PhysicalMap = std::pmr::unordered_map<uint64_t, Allocation>;
  using BlockMap = std::pmr::map<uint64_t, Block>;

  const AllocationMap& allocations() const { return allocations_; }
  const PhysicalMap& physical() const { return physical_; }
  const BlockMap& blocks() const { return blocks_; }
  const std::vector<Pool>& pools() const { return pools_; }
  const HostState& host() const { return host_; }
  const std::string& phase() const { return phase_; }
  uint64_t replaced_live() const { return replaced_live_; }
  uint64_t orphan_blocks() const { return orphan_blocks_; }
  uint64_t orphan_bytes() const { return orphan_bytes_; }
  // The event being applied: its stream position and time (listeners read them in their callbacks).
  uint64_t position() const { return position_; }
  uint64_t time_ns() const { return time_; }

  // A physical chunk (cuMemCreate, or a snapshot's segment_map) that belongs to a caching
  // allocator; *block_bytes: the live block bytes mapped inside it.
  bool is_allocator_chunk(uint64_t handle, const Allocation& chunk, uint64_t* block_bytes) const;
  // True when the live allocation at `addr` is a caching allocator's segment (block data inside,
  // or PyTorch said so).
  bool is_segment(uint64_t addr) const;
  // Where a physical handle is mapped (the last cuMemMap of it), 0 when it is not.
  uint64_t mapped_at(uint64_t handle) const;
  // Every holding still live on a device (pinned host memory aside), as the listeners heard it
  // acquired: allocations, physical chunks, then blocks.
  template <typename Visit>
  void for_each_live(Visit&& visit) const {
    for (const auto& [addr, a] : allocations_) {
      if (a.kind == Kind::Host) continue;
      visit(Holding{Level::Allocation, a.device, addr, a.size, a.site, a.position, a.torch, a.time_ns, addr,
                    a.has_blocks || a.torch});
    }
    for (const auto& [handle, a] : physical_) {
      visit(Holding{Level::Physical, a.device, handle, a.size, a.site, a.position, a.torch, a.time_ns,
                    mapped_at(handle), false});
    }
    for (const auto& [addr, b] : blocks_) {
      visit(Holding{Level::Block, b.device, addr, b.size, b.site, b.position, b.torch, b.time_ns, addr, false});
    }
  }
  FragmentationPoint measure_fragmentation(int32_t device) const;
  // Whether the last meminfo (or block_oom with free bytes) applied was a usable reading: one whose
  // free bytes do not exceed the device's total (its own, else the device's known total). Others are
  // counted in the device's inconsistent_readings and used by no analysis.
  bool reading_used() const { return reading_used_; }
  // A reading of the device's memory (a device record, say) whose free bytes exceed its total.
  void note_inconsistent_reading(int32_t device, uint64_t free, uint64_t total);

 private:
  using AllocationIt = AllocationMap::iterator;
  using BlockIt = BlockMap::iterator;

  void settle_before(const Event& event, DeviceState& state);
  static Level level_of(const Allocation& a) { return a.kind == Kind::Host ? Level::Host : Level::Allocation; }
  Ledger& ledger_of(DeviceState& state, Level level);
  void acquire(DeviceState& state, Level level, uint64_t key, const Allocation& a);
  void release(const Holding& h);

  bool merges_with_live_segment(const Event& e);
  void apply_after_history(const Event& e, SiteId site, DeviceState& state);
  void on_alloc(const Event& e, SiteId site, DeviceState& state);
  void on_free(const Event& e, DeviceState& state);
  void end_allocation(AllocationIt it);
  void on_block_alloc(const Event& e, SiteId site, DeviceState& state);
  void on_block_free(const Event& e, DeviceState& state);
  void on_meminfo(const Event& e, DeviceState& state);
  bool usable_reading(const Event& e);  // see reading_used()
  void on_reset(int32_t device, DeviceState& state);
  void on_trim(const Event& e);
  int32_t pool_index(std::string_view name, int32_t device);
  AllocationIt segment_of(const Event& e);
  void on_map(const Event& e);
  void on_unmap(const Event& e);
  uint64_t block_bytes_in(uint64_t start, uint64_t size, int32_t device) const;
  void end_blocks_in(uint64_t start, uint64_t size, int32_t device);

  // fragmentation.cpp: the cached ranges and their gaps.
  using CachedMap = std::map<uint64_t, CachedRange>;
  CachedMap::iterator cached_at(uint64_t addr);
  void add_cached(uint64_t start, uint64_t end, int32_t device, bool mapped);
  void remove_cached(CachedMap::iterator range);
  void cache_segment(AllocationIt segment);
  void uncache_segment(AllocationIt segment);
  void uncache_device(int32_t device);
  void map_cached(uint64_t start, uint64_t end, int32_t device);
  void unmap_cached(uint64_t start, uint64_t end, int32_t device);
  void gaps_around(BlockIt block, bool inserted);

  std::vector<ModelListener*> listeners_;
  uint64_t position_ = 0;
  uint64_t seq_ = 0;       // of the event being applied (peak snapshots name it)
  uint64_t time_ = 0;
  uint32_t window_ = 0;
  uint64_t pass_ = 0;
  std::string phase_;
  uint64_t replaced_live_ = 0;  // allocations at an address that was still live
  bool history_ended_ = false;
  bool initial_ = false;   // the event being applied is one of the state a snapshot's history started from
  bool reading_used_ = false;
  NodePool nodes_;                                    // before the containers it serves
  AllocationMap allocations_{&nodes_};                // CUDA-level ranges by start address
  PhysicalMap physical_{&nodes_};                     // cuMemCreate handles
  BlockMap blocks_{&nodes_};                          // caching-allocator blocks by address
  std::unordered_map<uint64_t, uint64_t> handle_at_;  // physical handle -> address it is mapped at
  std::map<uint64_t, uint64_t> torch_mapped_;         // ranges PyTorch said it mapped: addr -> size
  CachedMap cached_;                                  // the caching allocators' cached ranges, by start
  uint64_t orphan_blocks_ = 0;                        // blocks ended by their segment's free
  uint64_t orphan_bytes_ = 0;
  DeviceTable<DeviceState> devices_{&nodes_};
  std::vector<Pool> pools_;
  HostState host_;
};

}  // namespace gpumemtrace::report
