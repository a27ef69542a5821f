// report/allocator_model/replay.h — replays a trace's PyTorch tensor-level requests through the
// allocator model (caching_allocator.h) under one setting, device by device, and (optionally) checks
// that the model did what the recorded allocator did.
//
// What it reads, in timeline order (docs/trace-format.md, docs/pytorch.md):
//  - torch.alloc (block_alloc): a request of `size` bytes on `stream` -> model malloc;
//  - torch.free_requested / torch.free_completed (block_free): the block goes back. A trace that has
//    free_completed events (a snapshot's history) frees at free_completed, after a free_requested
//    that only drops the allocated bytes (a block used on another stream: record_stream);
//  - torch.oom (block_oom): a request the recorded allocator refused -> model malloc: does it fail
//    too? (a block it gets is given back at once: the program never had it);
//  - torch.segment_alloc/free/map/unmap: what the recorded allocator did with segments. A release the
//    model did not cause (no failed CUDA allocation before it: torch.cuda.empty_cache()) is replayed as
//    empty_cache() in every setting; with checking on, every segment operation of the model is compared
//    with the recorded one (kind, size, order) and every block's offset in its segment with the trace's;
//  - the device's free memory (meminfo, torch.oom's `free`): what cudaMalloc could still get, i.e. the
//    capacity = free + the recorded allocator's reserved bytes at that moment.
// The recorded settings: the trace's "allocator_settings" records (recorded_settings.h), applied in
// timeline order (on_settings), a change mid-run reaching the model at its place. A trace without them
// (recorded before they existed, or without the PyTorch hook's record): expandable segments are
// inferred (a device whose first PyTorch segment operation is a map), the rest are the defaults.
// `recorded_conf` (--recorded-settings) goes over either, at every point.
//
// Pure: events in, results out; no I/O, no globals. Memory: the model's blocks + bounded samples.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "report/allocator_model/caching_allocator.h"
#include "report/allocator_model/recorded_settings.h"
#include "report/reader/records.h"

namespace gpumemtrace::report::allocator_model {

struct Divergence {
  uint64_t seq = 0;      // the event at which the replay first differed from the recording
  uint64_t time_ns = 0;
  std::string what;      // one sentence
};

// What happened to one recorded OOM (torch.oom) in the replay.
struct OomOutcome {
  uint64_t seq = 0;
  uint64_t time_ns = 0;
  uint64_t requested = 0;
  bool still_happens = true;
  uint64_t reserved = 0;   // the model's reserved bytes after it tried
  uint64_t capacity = 0;   // what the model could hold reserved then (CachingAllocatorModel::limit)
};

struct ReservedSample {
  uint64_t time_ns = 0;
  uint64_t reserved = 0;
};

struct DeviceReplay {
  int32_t device = -1;
  std::string settings;               // what the model started under (PYTORCH_CUDA_ALLOC_CONF syntax)
  bool settings_recorded = false;     // from the trace's allocator_settings records (else inferred)
  uint64_t settings_changes = 0;      // recorded changes that reached the model after it was made
  std::vector<std::string> unmodeled; // recorded options the model does not replay
  ModelStats stats;
  uint64_t requests = 0;              // torch.alloc events replayed
  uint64_t recorded_reserved_peak = 0;  // from the trace's PyTorch segment events
  uint64_t capacity = 0;              // the last limit used: cudaMalloc's reach or the fraction's cap (0: never known)
  uint64_t kept_free = 0;             // the margin keep_free() took off it last, in bytes
  std::vector<OomOutcome> ooms;       // one per recorded torch.oom, in order
  uint64_t new_ooms = 0;              // requests the recording served and the model refused
  uint64_t first_new_oom_seq = 0;
  uint64_t first_new_oom_time_ns = 0;
  uint64_t first_new_oom_reserved = 0;   // the model's reserved bytes when it refused it
  uint64_t first_new_oom_capacity = 0;   // and what it could hold reserved then (limit)
  uint64_t empty_cache_calls = 0;     // releases replayed as torch.cuda.empty_cache()
  std::vector<ReservedSample> timeline;  // the model's reserved bytes, bounded, evenly thinned
  // Checking (the recorded settings only).
  bool checked = false;
  uint64_t segment_ops_compared = 0;
  uint64_t blocks_compared = 0;
  std::optional<Divergence> divergence;
};

class AllocatorReplay {
 public:
  // `overlay`: PYTORCH_CUDA_ALLOC_CONF text applied over the recorded settings ("" = the recorded
  // run itself); `recorded_conf`: what the recording ran under, where the trace cannot tell (a memory
  // fraction, max_split_size_mb, ...). `check`: compare with the recording. Both strings must parse
  // (parse_alloc_conf); they were checked on the command line.
  AllocatorReplay(std::string overlay, std::string recorded_conf, bool check);
  ~AllocatorReplay();
  AllocatorReplay(AllocatorReplay&&) noexcept;
  AllocatorReplay& operator=(AllocatorReplay&&) noexcept;

  void on_device(const DeviceInfo& info);
  // What the device could hold at most, where the trace says it only late (a snapshot: at an OOM, its
  // reserved bytes + the device's free bytes then): the capacity before the first reading, so that no
  // setting is replayed into more memory than the device has.
  void limit_device(int32_t device, uint64_t bytes);
  // Bytes of `device` that must stay free (the batch what-if's margin, batch_what_if.h), plus `share`
  // of the most the process may hold there (the device's memory, or a memory fraction's cap): the
  // capacity the model sees is this much lower, wherever it came from.
  void keep_free(int32_t device, uint64_t bytes, double share = 0);
  // An "allocator_settings" record, in timeline order.
  void on_settings(const Event& e);
  void apply(const Event& e);
  std::vector<DeviceReplay> finish();
  // Requests refused so far on any device: new OOMs, and recorded OOMs that happen in the replay too.
  uint64_t refusals() const { return refusals_; }

  static constexpr size_t kMaxSamples = 512;

 private:
  struct Device;
  Device& device(int32_t id);
  void on_block_alloc(Device& d, const Event& e);
  void on_block_free(Device& d, const Event& e);
  void on_oom(Device& d, const Event& e);
  void on_segment(Device& d, const Event& e);
  void seed_segment(Device& d, const Event& e);
  void ensure_model(Device& d, bool expandable_hint);
  AllocatorSettings settings_for(const Device& d) const;
  void update_capacity(Device& d);
  void take_reading(Device& d, uint64_t free);
  void after_model_call(Device& d, const Event& e);
  void reconcile(Device& d, const Event& e, bool settle);
  void diverge(Device& d, const Event& e, std::string what);
  void sample(Device& d, uint64_t t);

  std::string overlay_;
  std::string recorded_conf_;
  bool check_;
  RecordedSettings recorded_;
  std::map<int32_t, std::unique_ptr<Device>> devices_;
  Device* last_ = nullptr;  // the last device() looked up (elements of devices_ never move)
  uint64_t refusals_ = 0;
};

}  // namespace gpumemtrace::report::allocator_model
