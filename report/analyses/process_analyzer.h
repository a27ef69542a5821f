// report/analyses/process_analyzer.h — replays one process's events into a model of its memory
// (live allocations, caching-allocator blocks, physical handles, async pools) and collects what
// every analysis needs while streaming; finish() turns it into a ProcessReport.
//
// Memory: live allocations + live blocks + one ledger site per stack + bounded samples; nothing
// per event. Single-threaded.
//
// Accounting levels (docs/report.md):
//  - "reserved" (CUDA level): alloc of kinds device, async, managed, host, array and physical
//    (cuMemCreate) until their free or a reset. virtual reservations never count.
//  - "allocated" (block level): block_alloc until block_free, inside the segment (a live alloc
//    range) that contains it.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "report/analyses/ledger.h"
#include "report/analyses/report_model.h"
#include "report/analyses/suppressions.h"
#include "report/reader/trace_reader.h"

namespace gpumemtrace::report {

// True for events PyTorch reported (snapshot import, live tensor-level events): api "torch.*".
bool is_torch_api(std::string_view api);

class ProcessAnalyzer : public TraceHandler {
 public:
  void on_header(const Header& header) override { header_ = header; }
  void on_device(const DeviceInfo& info) override;
  void on_event(const Event& event) override;
  void on_dropped(uint64_t count) override { dropped_ += count; }
  void on_footer(const Footer& footer) override { end_time_ = footer.end_time; }

  ProcessReport finish(const std::string& file, const ReadResult& read, const SymbolTable& symbols,
                       const Suppressions& suppressions);

 private:
  struct Allocation {
    uint64_t size = 0;
    uint32_t stack = 0;
    int32_t device = -1;
    Kind kind = Kind::Device;
    bool has_blocks = false;   // a caching allocator's segment: its free part is cached, not leaked;
                               // its gaps are in its device's SegmentGaps while it is true
    uint64_t block_bytes = 0;  // live block bytes inside (when has_blocks)
    int32_t pool = -1;         // index into pools_ (async)
    bool torch = false;        // PyTorch's (api "torch.*": snapshot import, live events)
    bool torch_only = false;   // created by a torch event (no runtime-level record of it, yet)
  };
  struct Block {
    uint64_t size = 0;
    uint32_t stack = 0;
    int32_t device = -1;
    uint64_t segment = 0;      // start of the containing allocation; 0 = none known
    bool in_segment = false;
  };
  struct Pool {
    std::string name;
    uint64_t cached = 0;       // freed to the pool, not yet reused or trimmed
    bool trimmed = false;      // the trace told us about this pool's retention
    int32_t device = -1;
  };
  class Sampler {
   public:
    void add(const TimelineSample& sample);
    std::vector<TimelineSample> take(const TimelineSample& last);
   private:
    std::vector<TimelineSample> samples_;
    uint64_t stride_ = 1;
    uint64_t skipped_ = 0;
  };
  struct OomRecord {
    OomReport report;          // stack and holders filled in finish()
    uint32_t stack = 0;
    std::vector<StackCount> holders;
  };
  // Fragmentation bookkeeping of one device, updated on every block and segment change in
  // O(log n), so that a measurement (at each new block-level peak, at each OOM) costs O(1): the
  // segments with block data (Allocation::has_blocks) and the free gaps inside them. A gap is the
  // space between a block (or the segment's start) and the next block that starts inside the
  // segment (or the segment's end); blocks_ never overlap in a well-formed trace.
  struct SegmentGaps {
    uint64_t reserved = 0;          // bytes of the segments with block data
    uint64_t allocated = 0;         // their block_bytes
    std::multiset<uint64_t> gaps;   // every non-empty gap of those segments
  };
  struct DeviceState {
    DeviceSummary summary;
    SegmentGaps segments;
    Ledger reserved;
    Ledger allocated;
    bool has_blocks = false;
    bool has_meminfo = false;
    uint64_t meminfo_free = 0;
    uint64_t meminfo_total = 0;
    std::vector<size_t> ooms_awaiting_meminfo;  // indices into ooms_
    Sampler timeline;
    bool has_fragmentation_at_peak = false;
    FragmentationPoint fragmentation_at_peak;  // at allocated.peak_snapshot()
  };

  DeviceState& device_state(int32_t device);
  void settle_before(const Event& event, DeviceState& state);
  void settle_all();
  void acquire(Ledger& ledger, uint32_t stack, uint64_t size, const Event& e);
  void release(Ledger& ledger, uint32_t stack, uint64_t size);

  bool merges_with_live_segment(const Event& e);
  void on_alloc(const Event& e, DeviceState& state);
  void on_free(const Event& e, DeviceState& state);
  void end_allocation(std::map<uint64_t, Allocation>::iterator it);
  void on_block_alloc(const Event& e, DeviceState& state);
  void on_block_free(const Event& e, DeviceState& state);
  void on_oom(const Event& e, DeviceState& state);
  void on_meminfo(const Event& e, DeviceState& state);
  void on_reset(int32_t device, DeviceState& state);
  void on_trim(const Event& e);
  int32_t pool_index(std::string_view name, int32_t device);
  std::map<uint64_t, Allocation>::iterator segment_of(const Event& e);

  void on_map(const Event& e);
  void on_unmap(const Event& e);
  bool is_allocator_chunk(uint64_t handle, const Allocation& chunk, uint64_t* block_bytes) const;
  uint64_t block_bytes_in(uint64_t start, uint64_t size, int32_t device) const;
  void end_blocks_in(uint64_t start, uint64_t size, int32_t device);

  using AllocationIt = std::map<uint64_t, Allocation>::iterator;
  using BlockIt = std::map<uint64_t, Block>::iterator;
  AllocationIt tracked_segment_at(uint64_t addr);
  void track_segment(AllocationIt segment);
  void untrack_segment(AllocationIt segment);
  void retrack_all();
  void gaps_around(BlockIt block, bool inserted);
  FragmentationPoint measure_fragmentation(int32_t device) const;
  void collect_leaks(ProcessReport& out, const SymbolTable& symbols,
                     const Suppressions& suppressions);

  Header header_;
  uint64_t dropped_ = 0;
  uint64_t end_time_ = 0;
  uint64_t first_time_ = 0;
  uint64_t last_time_ = 0;
  uint64_t events_ = 0;
  uint64_t replaced_live_ = 0;  // allocations at an address that was still live
  std::map<uint64_t, Allocation> allocations_;        // CUDA-level ranges by start address
  std::unordered_map<uint64_t, Allocation> physical_; // cuMemCreate handles
  std::map<uint64_t, Block> blocks_;                  // caching-allocator blocks by address
  std::unordered_map<uint64_t, uint64_t> handle_at_;  // physical handle -> address it is mapped at
  std::map<uint64_t, uint64_t> torch_mapped_;         // ranges PyTorch said it mapped: addr -> size
  uint64_t orphan_blocks_ = 0;                        // blocks ended by their segment's free
  uint64_t orphan_bytes_ = 0;
  std::map<int32_t, DeviceState> devices_;
  std::vector<Pool> pools_;
  GrowthWindows windows_;
  uint32_t window_ = 0;
  std::string phase_;
  std::vector<Mark> marks_;
  uint64_t marks_total_ = 0;
  std::vector<OomRecord> ooms_;
};

}  // namespace gpumemtrace::report
