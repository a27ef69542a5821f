// interpose/writer/live_set.h — the allocations live right now, as seen in the event stream, so that
// a trace capped by GPUMEMTRACE_MAX_BYTES can still end with what was live (one "live" record each).
// Tracks alloc/free (by address) and block_alloc/block_free (by address, apart: a block may start at
// its segment's address); a reset ends every allocation of its device. Failed allocations are not
// live. Memory: one small entry per live allocation, nothing per event.
// Not thread-safe: used by the writer thread only.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "interpose/recorder/event_record.h"

namespace gpumemtrace {

struct LiveAllocation {
  uint64_t seq = 0;
  uint64_t time_ns = 0;
  uint64_t addr = 0;
  uint64_t size = 0;
  const char* api = nullptr;  // static string, as in EventRecord
  uint32_t tid = 0;
  uint32_t stack = 0;  // the serializer's stack id (its definition is written)
  int32_t device = -1;
  format::Op op = format::Op::Alloc;
  format::Kind kind = format::Kind::Device;
};

class LiveSet {
 public:
  // True when `r` may start a live allocation: the caller then passes its stack id to apply().
  static bool acquires(const EventRecord& r) {
    return (r.op == format::Op::Alloc || r.op == format::Op::BlockAlloc) && r.result == 0;
  }
  void apply(const EventRecord& r, uint32_t stack);

  // Bytes of the allocations and blocks live now that came after event `seq` (scope_bound.h).
  uint64_t bytes_since(uint64_t seq) const;

  template <typename Fn>
  void for_each(Fn&& fn) const {
    for (const auto& [addr, a] : allocations_) fn(a);
    for (const auto& [addr, a] : blocks_) fn(a);
  }

 private:
  std::unordered_map<uint64_t, LiveAllocation> allocations_;
  std::unordered_map<uint64_t, LiveAllocation> blocks_;
};

}  // namespace gpumemtrace
