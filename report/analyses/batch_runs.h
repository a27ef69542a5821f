// report/analyses/batch_runs.h — one run of a program at a known batch size, as the batch what-if
// (batch_what_if.h) needs it: the events the allocator replay reads (allocator_model/replay.h), kept
// in order and in compact form so that the run can be replayed at many batch sizes without reading
// its trace again, and each PyTorch request's site, size and role.
//
// A request is a torch.alloc or torch.oom event that is not part of a snapshot's starting state
// ("initial"). Its site is its stack (or, for a frameless block on the autograd engine's thread, the
// backward() call it is charged to: autograd_attribution.h) on its device; two runs of the same
// program give the same site the same key (the frames' functions, files and lines, not the trace's
// ids). Its role is the one roles.h gives its block: what it is when it is freed (a block allocated
// inside backward() and still live when the outermost backward() returns is a gradient), or at the
// end of the run.
//
// The batch size of a run comes from the command line (--batch-of), else a mark in the trace
// ("batch=16", "batch_size 16", "bs:16"), else the file name (run_b16.jsonl, bs32, batch-8,
// batch_size64): batch_in_name(), batch_in_mark().
//
// Pure: events in, a BatchRun out (read_batch_run() is the one function that opens a file). Memory:
// kRecordBytes per kept event and 32 bytes per request, for the whole run: a run of more than
// kMaxBatchEvents such events is refused (TraceError).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "report/analyses/autograd_attribution.h"
#include "report/analyses/report_model.h"
#include "report/analyses/roles.h"
#include "report/analyses/suppressions.h"
#include "report/reader/trace_reader.h"

namespace gpumemtrace::report {

// One event the allocator replay reads, in compact form. MemInfo keeps its free bytes in `addr` and
// its total in `size`; a torch.oom its free bytes in `segment`; an allocator_settings record the
// index of its text in BatchRun::settings in `addr`.
struct BatchRecord {
  enum Api : uint8_t {
    Runtime,          // a CUDA-level call (cudaMalloc, cuMemCreate, ...): not PyTorch's
    TorchAlloc, TorchFreeRequested, TorchFreeCompleted, TorchOom,
    TorchSegmentAlloc, TorchSegmentFree, TorchSegmentMap, TorchSegmentUnmap,
    TorchOther,       // another torch.* event of a kind the replay reads (an importer's chunk)
    Settings,         // an allocator_settings record
  };
  enum Flags : uint8_t { Initial = 1, HasMeminfo = 2, HasSegment = 4, HasFraction = 8 };
  uint64_t seq = 0;
  uint64_t t = 0;
  uint64_t addr = 0;
  uint64_t size = 0;
  uint64_t stream = 0;
  uint64_t segment = 0;
  int32_t device = -1;
  int32_t result = 0;
  Op op = Op::Mark;
  Kind kind = Kind::None;
  Api api = Runtime;
  uint8_t flags = 0;
};
inline constexpr uint64_t kRecordBytes = sizeof(BatchRecord);
inline constexpr uint64_t kMaxBatchEvents = uint64_t{1} << 25;

struct BatchRequest {
  uint64_t key = 0;      // the site on its device (see above)
  uint64_t size = 0;     // bytes requested
  uint32_t record = 0;   // its event in BatchRun::records
  uint32_t site = 0;     // index into BatchRun::sites
  Role role = Role::Other;
};

struct BatchSettingsText {
  std::string source;  // the record's `api`: in_force, _set_allocator_settings, ...
  std::string conf;    // its `label`
  double fraction = 0.0;
};

struct BatchRun {
  std::string file;
  uint64_t batch = 0;          // 0: not known yet
  std::string batch_from;      // "--batch-of", "a mark", "the file name"
  std::optional<uint64_t> marked_batch;  // from the trace's marks
  std::string mark_conflict;   // two marks that disagree: what they said
  std::vector<DeviceInfo> devices;
  std::vector<BatchRecord> records;
  std::vector<BatchSettingsText> settings;
  std::vector<BatchRequest> requests;
  std::vector<Stack> sites;    // each distinct site's frames (resolve_site)
  uint64_t recorded_ooms = 0;  // torch.oom events: the run was refused memory
  bool complete = false;       // the trace has its footer
};

// The batch size a file name states ("b16", "bs32", "batch-8", "batch_size64", upper or lower case,
// between non-alphanumeric characters or at the ends of the name without its directory), or nullopt.
std::optional<uint64_t> batch_in_name(std::string_view path);
// The batch size a mark's label states ("batch=16", "batch_size: 16", "bs 16"), or nullopt.
std::optional<uint64_t> batch_in_mark(std::string_view label);

class BatchRunRecorder : public TraceHandler {
 public:
  BatchRunRecorder(const SymbolTable& symbols, std::string file);
  void on_device(const DeviceInfo& info) override { run_.devices.push_back(info); }
  void on_event(const Event& e) override;
  void on_allocator_settings(const Event& e) override;
  void on_footer(const Footer&) override { run_.complete = true; }
  // The run; every request's role settled.
  BatchRun finish();

 private:
  void keep(const Event& e, BatchRecord::Api api);
  void on_request(const Event& e);
  void on_block_free(const Event& e);
  uint32_t site_index(SiteId site, int32_t device, uint64_t* key);

  struct Live {
    uint32_t request;
    Holding holding;
  };
  const SymbolTable& symbols_;
  Suppressions no_rules_;  // Roles reads library rules only for CUDA-level memory: none here
  AutogradAttribution autograd_;
  Roles roles_;
  std::unordered_map<uint64_t, uint32_t> site_of_;  // SiteId ^ device -> index into run_.sites
  std::vector<uint64_t> site_keys_;
  std::unordered_map<uint64_t, Live> live_;           // (device, address) -> its request
  uint64_t position_ = 0;
  BatchRun run_;
};

// Reads the trace (or PyTorch snapshot) at `path` to the end; `name`: what messages and the report call
// it (and where its batch size may be read). Throws TraceError.
BatchRun read_batch_run(const std::string& path, const std::string& name);

}  // namespace gpumemtrace::report
