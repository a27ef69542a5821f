// report/analyses/oom_incidents.h — one out-of-memory incident per failed request, with a verdict
// that names its cause; every other failed allocation is a failed call, never an OOM.
//
// What makes an OOM: an allocation that failed with CUDA's out-of-memory error (runtime
// cudaErrorMemoryAllocation, driver CUDA_ERROR_OUT_OF_MEMORY: both 2), or a caching allocator's own
// OOM record (block_oom: PyTorch's torch.oom, gpumemtrace_block_oom). Anything else (invalid value,
// not permitted, not supported, ...) is grouped into failed calls.
//
// One request, one incident: a caching allocator that fails to get memory frees its cache and
// retries, and with expandable segments maps chunk after chunk until the device is full, before
// it gives up with its own OOM record. So an OOM failure joins the device's open incident when it
// comes from the same thread within kJoinWindowNs of that incident's last attempt; a block_oom
// joins the open incident in that window (from any thread: PyTorch reports it from its own) and
// closes it. Every attempt is kept as evidence (the first kMaxAttempts, and their count).
//
// Verdicts, from the figures at the incident's last attempt (free = the device's free bytes,
// ours = this process's reserved bytes, frag = free bytes inside the allocator's segments):
//  - capacity: the request exceeds free + frag, and this process holds most of the device
//    (or the request is larger than the whole device);
//  - other processes: it exceeds free + frag, but other processes hold more than the request and
//    more than 5% of the device;
//  - fragmentation: it fits in free + frag, but in no single free block and not in free;
//  - allocator limit: only the allocator refused (no CUDA call failed) although the device had
//    room for it: a cap such as set_per_process_memory_fraction;
//  - not enough information: neither the device's free bytes nor block data are known, or the
//    figures contradict each rule.
//
// Memory: the first kMaxIncidents incidents in full, a count beyond; failed calls grouped by site.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "report/analyses/memory_model.h"
#include "report/analyses/roles.h"
#include "report/analyses/report_model.h"
#include "report/reader/symbols.h"

namespace gpumemtrace::report {

inline constexpr uint64_t kJoinWindowNs = 2'000'000'000;

bool is_out_of_memory(const Event& e);
const char* cuda_error_name(std::string_view api, int64_t result);

// The verdict rules above, as a pure function (unit-tested).
struct OomFigures {
  uint64_t requested = 0;
  bool allocator_only = false;      // no CUDA call of the incident failed
  bool has_device_free = false;
  uint64_t device_free = 0;
  uint64_t device_total = 0;        // 0 = unknown
  uint64_t ours = 0;                // this process's reserved bytes on the device
  bool has_blocks = false;
  FragmentationPoint fragmentation;
};
Verdict oom_verdict(const OomFigures& figures, std::string* explanation);

class OomIncidents {
 public:
  // After the model applied a failed allocation or a block_oom.
  void on_failure(const Event& e, MemoryModel& model, const Roles& roles);
  // After the model applied a meminfo: fills the incidents waiting for the device's reading.
  void on_meminfo(const Event& e);
  void finish(ProcessReport& out, const SymbolTable& symbols);

 private:
  struct Incident {
    OomReport report;               // stack and holders resolved in finish()
    SiteId site = 0;
    std::vector<StackCount> holders;
    bool cuda_failed = false;       // a CUDA call of it failed
    bool awaiting_meminfo = false;
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

  void record_attempt(Incident& incident, const Event& e, MemoryModel& model, const Roles& roles);

  // The open incident of a device: the one later attempts may join. It may be one beyond
  // kMaxIncidents, counted but not kept (index == kNotKept).
  struct Open {
    static constexpr size_t kNotKept = SIZE_MAX;
    size_t index = kNotKept;
    uint64_t tid = 0;
    uint64_t last_time = 0;
    bool closed = true;
  };
  bool joins(const Open& open, const Event& e) const;

  std::vector<Incident> incidents_;
  uint64_t incidents_total_ = 0;
  std::map<int32_t, Open> open_;
  std::map<CallKey, Calls> failed_calls_;
};

}  // namespace gpumemtrace::report
