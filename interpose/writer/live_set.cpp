// interpose/writer/live_set.cpp — tracking the live allocations from the event stream.
#include "interpose/writer/live_set.h"

namespace gpumemtrace {
namespace {

template <typename Map>
void erase_device(Map& map, int32_t device) {
  for (auto it = map.begin(); it != map.end();) it = it->second.device == device ? map.erase(it) : std::next(it);
}

}  // namespace

void LiveSet::apply(const EventRecord& r, uint32_t stack) {
  using format::Op;
  switch (r.op) {
    case Op::Alloc:
    case Op::BlockAlloc: {
      if (!acquires(r)) return;
      LiveAllocation a;
      a.seq = r.seq;
      a.time_ns = r.time_ns;
      a.addr = r.addr;
      a.size = r.size;
      a.api = r.api;
      a.tid = r.tid;
      a.stack = stack;
      a.device = r.device;
      a.op = r.op;
      a.kind = r.kind;
      (r.op == Op::Alloc ? allocations_ : blocks_)[r.addr] = a;
      return;
    }
    case Op::Free:
      allocations_.erase(r.addr);
      return;
    case Op::BlockFree:
      blocks_.erase(r.addr);
      return;
    case Op::Reset:
      erase_device(allocations_, r.device);
      erase_device(blocks_, r.device);
      return;
    default:
      return;
  }
}

uint64_t LiveSet::bytes_since(uint64_t seq) const {
  uint64_t bytes = 0;
  for_each([&](const LiveAllocation& a) {
    if (a.seq > seq) bytes += a.size;
  });
  return bytes;
}

}  // namespace gpumemtrace
