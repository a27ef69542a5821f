// report/allocator_model/recorded_settings.h — the caching-allocator settings a trace records, as
// they stood at each point of its timeline ("allocator_settings" records, docs/trace-format.md).
//
// Fed the records in timeline order (TraceHandler::on_allocator_settings), it answers "what did
// device d run under now?" as AllocatorSettings, and "which cap was in force?":
//  - in_force / _set_allocator_settings: a settings text applied as PyTorch's parser applies it
//    (apply_recorded_conf: three options back to their defaults, then the text), process-wide;
//  - set_per_process_memory_fraction: that device's cap (DeviceCachingAllocator::setMemoryFraction,
//    per device; torch/cuda/memory.py at 00b65a04a2d30e498eedcb1e3476abd547f428f1 passes the device
//    index to torch._C._cuda_setMemoryFraction). A later text naming per_process_memory_fraction
//    (an option of newer releases, for every device) replaces the per-device caps.
// Options the model does not replay are collected (skipped()), not refused: the recorded PyTorch
// took them.
//
// Pure: records in, settings out. Memory: one entry per device given a cap. Single-threaded.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "report/allocator_model/settings.h"
#include "report/reader/records.h"

namespace gpumemtrace::report::allocator_model {

struct MemoryCap {
  double fraction = 0.0;  // 0: no cap
  std::string source;     // "set_per_process_memory_fraction" or "per_process_memory_fraction" (an option)
};

class RecordedSettings {
 public:
  // One record (Op::AllocatorSettings); an unknown source is ignored. True when it changed anything.
  bool apply(const Event& e);
  // A record was seen: the trace says what its allocator ran under.
  bool recorded() const { return records_ > 0; }
  uint64_t records() const { return records_; }
  // The settings in force on `device` now, over `base` (the defaults, or what the caller inferred,
  // when nothing is recorded).
  AllocatorSettings for_device(int32_t device, const AllocatorSettings& base = {}) const;
  MemoryCap cap(int32_t device) const;
  // Options the model does not replay, in the order first met (each once).
  const std::vector<std::string>& skipped() const { return skipped_; }

 private:
  uint64_t records_ = 0;
  bool has_conf_ = false;
  AllocatorSettings conf_;                 // the process-wide settings the texts gave
  std::map<int32_t, double> fractions_;    // set_per_process_memory_fraction, per device
  std::vector<std::string> skipped_;
};

}  // namespace gpumemtrace::report::allocator_model
