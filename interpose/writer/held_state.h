// interpose/writer/held_state.h — what the program holds right now, as the event stream says, for the
// flight recorder's checkpoints (flight.cpp): every allocation and block still live, every mapping and
// reservation not yet undone, every scope still open. Each is kept as the event that made it (its
// fields, not its frames: the serializer's stack id stands for those), so that a checkpoint writes it
// again as it was, marked "initial".
// Pairing, as the report's model pairs them: alloc/free, block_alloc/block_free, map/unmap and
// reserve/unreserve by address (each kind apart); a reset ends everything of its device; a scope end
// closes the innermost open scope of the same range id (cross-thread ranges) or else of the same name.
// PyTorch's allocator settings in force: the last record of each device, a record for every device
// (device -1) replacing all before it, so that a window is replayed under the settings its run had.
// Memory: one entry (about 200 bytes) per thing held (and up to kMaxSpare kept for reuse), nothing
// per event; open scopes at most kMaxOpenScopes (beyond, the oldest are forgotten: a program that
// never ends its scopes).
// Not thread-safe: used by the writer thread only.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "interpose/recorder/event_record.h"

namespace gpumemtrace {

// An EventRecord without its frames: the fields an event line writes.
struct HeldEvent {
  uint64_t seq = 0;
  uint64_t time_ns = 0;
  uint32_t tid = 0;
  format::Op op = format::Op::Alloc;
  format::Kind kind = format::Kind::Device;
  uint16_t flags = 0;
  int32_t device = -1;
  const char* api = nullptr;
  const char* driver_api = nullptr;
  uint64_t addr = 0, size = 0, stream = 0, pool = 0, segment = 0, handle = 0, range = 0;
  double fraction = 0;  // allocator settings: kHasFraction
  uint32_t stack = 0;  // the serializer's stack id
  union {
    char label[kLabelBytes] = {};
    const char* interned_label;  // kLabelInterned: never freed (label_table.h)
  };
  char pool_name[kPoolNameBytes] = {};

  // Back into `out` (whose frames are left as they are: the caller passes `stack` on its own).
  void fill(EventRecord* out) const;
};

class HeldState {
 public:
  static constexpr size_t kMaxOpenScopes = 256;
  static constexpr size_t kMaxSpare = 1024;

  // After `r` was written with `stack`.
  void apply(const EventRecord& r, uint32_t stack);

  // Everything held, oldest first (by seq): a segment allocated before its blocks, a reservation
  // before its mappings, an outer scope before the inner.
  std::vector<const HeldEvent*> in_order() const;
  size_t size() const;

 private:
  using ByAddress = std::unordered_map<uint64_t, HeldEvent>;
  // r's fields into `held` (its texts only under their flags: what is not set is never read).
  static void keep(const EventRecord& r, uint32_t stack, HeldEvent* held);
  // Entries are recycled (the map's nodes, taken out on an undoing and put back in on the next
  // allocation), so that an allocate/free loop costs the writer thread no malloc per event.
  void hold(ByAddress* map, const EventRecord& r, uint32_t stack);
  void release(ByAddress* map, uint64_t addr);

  ByAddress allocations_, blocks_, mappings_, reservations_;
  std::vector<HeldEvent> settings_;  // allocator settings in force: at most one per device, oldest first
  std::vector<ByAddress::node_type> spare_;  // at most kMaxSpare
  std::vector<HeldEvent> scopes_;  // innermost last
};

}  // namespace gpumemtrace
