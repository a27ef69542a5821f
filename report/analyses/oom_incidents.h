// report/analyses/oom_incidents.h — one out-of-memory incident per failed request, with a verdict
// that names its cause; every other failed allocation is a failed call, never an OOM.
//
// What makes an OOM: an allocation that failed with CUDA's out-of-memory error (runtime
// cudaErrorMemoryAllocation, driver CUDA_ERROR_OUT_OF_MEMORY: both 2), or a caching allocator's own
// OOM record (block_oom: PyTorch's torch.oom, gpumemtrace_block_oom). Anything else (invalid value,
// not permitted, not supported, ...) is grouped into failed calls.
//
// One request, one incident. What one failed request looks like in a trace (PyTorch's
// DeviceCachingAllocator::malloc, c10/cuda/CUDACachingAllocator.cpp): alloc_block's cudaMalloc of
// the rounded allocation size fails; release_available_cached_blocks and then release_cached_blocks
// free cached segments (cudaFree, torch.segment_free) and alloc_block calls cudaMalloc again with the
// same size; after the last failure PyTorch reads cudaMemGetInfo and records its OOM (torch.oom, with
// the rounded request). With expandable segments each alloc_block maps chunk after chunk (cuMemCreate
// of 2 or 20 MiB) until one fails, then releases what it mapped before the retry. So an attempt joins
// the device's open incident only when it is that request again:
//  - a CUDA failure: from the same thread, of the same size, within kJoinWindowNs of the incident's
//    last attempt, and with nothing allocated between: the bytes that thread acquired on the device
//    since the last attempt do not exceed those it released there (at the CUDA level and at the
//    block level apart). A cache flushed, or chunks released and mapped again, is the same request;
//    a buffer allocated and kept is not. Anything else is a request of its own: a new incident;
//  - PyTorch's OOM record (torch.oom): from any thread (PyTorch's history is drained by whichever
//    thread; a snapshot has no threads), within the window, with nothing kept between, and when the
//    incident's CUDA attempts asked for the request or the allocator's rounding of it
//    (same_request_size below);
//  - another allocator's OOM record (gpumemtrace_block_oom: a custom pool): from the thread of the
//    incident's CUDA attempts (the pool called CUDA on the way to its refusal), within the window,
//    with nothing kept between, when those attempts asked for the request or more (a pool rounds a
//    block request up to its chunk: 48 MiB asked, a 64 MiB chunk refused);
//    either closes the incident: the allocator gave up that request. A block_oom that joins no
//    incident is an incident of its own, closed at once.
// Every attempt is kept as evidence (the first kMaxAttempts, and their count).
// Verdicts, from the figures at the incident's last attempt (free = the device's free bytes,
// ours = this process's reserved bytes, frag = free bytes inside the allocator's segments):
//  - capacity: the request exceeds free + frag, and this process holds most of the device
//    (or the request is larger than the whole device);
//  - other processes: it exceeds free + frag, but other processes hold more than the request and
//    more than 5% of the device;
//  - fragmentation: it fits in free + frag, but in no single free block and not in free; or, on a
//    device without block data whose total is known, it fits in free but the addresses show no free
//    range that large: the largest gap between the live allocations (AddressGaps), and whatever free
//    memory lies outside their span (free less the gaps), are both smaller than the request. Used
//    only when the picture is whole: every live allocation of the device is plain device memory
//    (cudaMalloc, cuMemAlloc), their span fits in the device's total and their gaps in its free
//    bytes, as in one first-fit heap of the device's size;
//  - allocator limit: only the allocator refused (no CUDA call failed) although the device had
//    room for it: a cap such as set_per_process_memory_fraction. When the trace records the cap
//    (allocator_settings records: cap = fraction x the device's total), it is named, and a request
//    past it is this verdict even without a reading of the device's free bytes;
//  - not enough information: neither the device's free bytes nor block data are known, the
//    figures contradict each rule, or each other (more free than the device's total: such readings
//    are not used in the first place, MemoryModel::reading_used).
// The device's free bytes are its reading at the attempt, or else its last reading, corrected by what
// this process reserved or released since (usable_free): a reading taken before the process filled
// the device is stale, and the room it showed is gone. Never more than the device's total less what
// this process holds.
//
// Memory: the first kMaxIncidents incidents in full, a count beyond; failed calls grouped by site.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "report/allocator_model/recorded_settings.h"
#include "report/analyses/memory_model.h"
#include "report/analyses/roles.h"
#include "report/analyses/report_model.h"
#include "report/reader/symbols.h"

namespace gpumemtrace::report {

inline constexpr uint64_t kJoinWindowNs = 2'000'000'000;
inline constexpr uint64_t kGapScanBudget = 64ull << 20;

bool is_out_of_memory(const Event& e);
// True when a CUDA attempt of `attempt` bytes (`physical`: a cuMemCreate chunk) may serve an
// allocator request of `request` bytes: the same size, PyTorch's allocation size for it (2 MiB up to
// 1 MiB, 20 MiB below 10 MiB, else rounded up to 2 MiB: get_allocation_size), or one chunk of an
// expandable segment (2 or 20 MiB).
bool same_request_size(uint64_t request, uint64_t attempt, bool physical);
const char* cuda_error_name(std::string_view api, int64_t result);

// The verdict rules above, as a pure function (unit-tested).
struct OomFigures {
  uint64_t requested = 0;
  bool allocator_only = false;      // no CUDA call of the incident failed
  bool has_device_free = false;
  uint64_t device_free = 0;         // the reading
  uint64_t device_total = 0;        // 0 = unknown
  uint64_t ours = 0;                // this process's reserved bytes on the device
  std::optional<uint64_t> reading_reserved;  // ours when the reading was taken (unknown: ours)
  bool has_blocks = false;
  FragmentationPoint fragmentation;
  bool has_address_gaps = false;
  AddressGaps address_gaps;
  double cap_fraction = 0.0;        // the allocator's recorded memory-fraction cap (0: none recorded)
  uint64_t cap_bytes = 0;           // fraction x the device's total (0: unknown)
  std::string cap_source;           // what set it (OomReport::cap_source)
};
Verdict oom_verdict(const OomFigures& figures, std::string* explanation);
// The device's free bytes at the attempt, from the reading (see above); the reading itself when
// nothing corrects it.
uint64_t usable_free(const OomFigures& figures);
// The free ranges between the live plain device allocations of `device`, in address order; nullopt
// when something else is live on it (other kinds, blocks) or nothing is.
std::optional<AddressGaps> measure_address_gaps(const MemoryModel& model, int32_t device);
// The recorded cap in words: "set_per_process_memory_fraction(0.02), 1.6 GiB of this device", or
// "the option per_process_memory_fraction:0.5, ..." ("" when `fraction` is 0).
std::string cap_text(double fraction, uint64_t bytes, const std::string& source);

// Hears the model's acquisitions and releases (a ModelListener) to tell what the thread of an open
// incident allocated between two attempts: before_event() names the event's thread.
class OomIncidents : public ModelListener {
 public:
  // After the model applied a failed allocation or a block_oom; `cap`: the allocator's memory-fraction
  // cap recorded on the event's device at that moment.
  void on_failure(const Event& e, MemoryModel& model, const Roles& roles, const allocator_model::MemoryCap& cap = {});
  // Before the model applies any other event, while an incident is open or a measurement waits
  // (tracking()).
  bool tracking() const { return tracking_ || gaps_pending_ != Open::kNotKept; }
  void before_event(const Event& e, const MemoryModel& model);
  // No attempt can follow (the trace's events ended at its cap; `model` is as they left it): nothing
  // is open any more.
  void close_all(const MemoryModel& model);
  void on_acquire(const Holding& h) override { count(h, 1); }
  void on_release(const Holding& h) override { count(h, -1); }
  // After the model applied a meminfo it could use (MemoryModel::reading_used): fills the incidents
  // waiting for the device's reading.
  void on_meminfo(const Event& e, const MemoryModel& model);
  // `model`: as at the trace's end (a measurement still waiting is taken from it).
  void finish(ProcessReport& out, const SymbolTable& symbols, const MemoryModel& model);

 private:
  struct Incident {
    OomReport report;               // stack and holders resolved in finish()
    SiteId site = 0;
    std::vector<StackCount> holders;
    bool cuda_failed = false;       // a CUDA call of it failed
    bool awaiting_meminfo = false;  // its last attempt carried no reading of the device's free bytes
  };
  struct CallKey {
    int32_t device;
    int64_t result;
    std::string api;
    StackId stack;
    bool operator<(const CallKey& o) const {
      return std::tie(device, result, api, stack) < std::tie(o.device, o.result, o.api, o.stack);
    }
  };
  struct Calls {
    uint64_t size = 0;
    uint64_t count = 0;
    uint64_t first_time = 0;
  };

  void record_attempt(Incident& incident, const Event& e, MemoryModel& model, const Roles& roles,
                      const allocator_model::MemoryCap& cap);
  void measure_pending_gaps(const MemoryModel& model);

  // An open incident: one later attempts may join, keyed by (device, thread of its CUDA attempts).
  // It may be one beyond kMaxIncidents, counted but not kept (index == kNotKept). Closed incidents
  // (a block_oom) and those past the window are erased.
  struct Open {
    static constexpr size_t kNotKept = SIZE_MAX;
    size_t index = kNotKept;
    uint64_t last_time = 0;
    uint64_t last_size = 0;         // of its last CUDA attempt
    bool last_physical = false;     // that attempt was a cuMemCreate chunk
    // Bytes its thread acquired on its device since the last attempt, less those it released.
    int64_t net_raw = 0;            // CUDA level (allocations, physical handles)
    int64_t net_blocks = 0;         // allocator blocks
  };
  using OpenKey = std::pair<int32_t, uint64_t>;  // (device, tid)
  using OpenMap = std::map<OpenKey, Open>;
  bool joins(const Open& open, const Event& e) const;
  OpenMap::iterator joinable(const Event& e);  // open_.end(): none
  void count(const Holding& h, int sign);

  std::vector<Incident> incidents_;
  uint64_t incidents_total_ = 0;
  OpenMap open_;
  bool tracking_ = false;                 // !open_.empty()
  uint64_t thread_ = 0;                   // of the event being applied (before_event)
  std::vector<size_t> awaiting_meminfo_;  // incidents (indices) waiting for the device's reading
  // The incident (an index) whose last attempt's address gaps are still to be measured: at the next
  // event that may change what is live (a failed allocation changes nothing), so that a run of
  // attempts costs one scan of the live allocations. Scans stop when they have visited
  // kGapScanBudget allocations in all (time bounded; the verdicts after that use no gaps).
  size_t gaps_pending_ = Open::kNotKept;
  uint64_t gap_scan_visits_ = 0;
  std::map<CallKey, Calls> failed_calls_;
};

}  // namespace gpumemtrace::report
