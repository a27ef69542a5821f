// interpose/writer/held_state.cpp — see held_state.h.
#include "interpose/writer/held_state.h"

#include <algorithm>
#include <cstring>

namespace gpumemtrace {

void HeldEvent::fill(EventRecord* out) const {
  out->seq = seq;
  out->time_ns = time_ns;
  out->tid = tid;
  out->op = op;
  out->kind = kind;
  out->flags = flags;
  out->device = device;
  out->result = 0;
  out->api = api;
  out->driver_api = driver_api;
  out->addr = addr;
  out->size = size;
  out->stream = stream;
  out->pool = pool;
  out->segment = segment;
  out->handle = handle;
  out->range = range;
  out->fraction = fraction;
  memcpy(out->label, label, sizeof label);  // the text, or the interned pointer (the union's bytes)
  memcpy(out->pool_name, pool_name, sizeof pool_name);
}

void HeldState::keep(const EventRecord& r, uint32_t stack, HeldEvent* held) {
  HeldEvent& h = *held;
  h.seq = r.seq;
  h.time_ns = r.time_ns;
  h.tid = r.tid;
  h.op = r.op;
  h.kind = r.kind;
  h.flags = static_cast<uint16_t>(r.flags & ~kHasResult);
  h.device = r.device;
  h.api = r.api;
  h.driver_api = r.driver_api;
  h.addr = r.addr;
  h.size = r.size;
  h.stream = r.stream;
  h.pool = r.pool;
  h.segment = r.segment;
  h.handle = r.handle;
  h.range = r.range;
  h.fraction = r.fraction;
  h.stack = stack;
  // The texts only under their flags (as the serializer reads them): most events carry neither.
  if (r.flags & kHasLabel) memcpy(h.label, r.label, sizeof h.label);  // the text or the interned pointer
  if (r.flags & kHasPoolName) memcpy(h.pool_name, r.pool_name, sizeof h.pool_name);
}

void HeldState::hold(ByAddress* map, const EventRecord& r, uint32_t stack) {
  if (spare_.empty()) {
    keep(r, stack, &(*map)[r.addr]);
    return;
  }
  ByAddress::node_type node = std::move(spare_.back());
  spare_.pop_back();
  node.key() = r.addr;
  keep(r, stack, &node.mapped());
  auto placed = map->insert(std::move(node));
  if (placed.inserted) return;
  placed.position->second = placed.node.mapped();  // the address was held already: replaced
  spare_.push_back(std::move(placed.node));
}

void HeldState::release(ByAddress* map, uint64_t addr) {
  const auto it = map->find(addr);
  if (it == map->end()) return;
  if (spare_.size() < kMaxSpare) spare_.push_back(map->extract(it));
  else map->erase(it);
}

void HeldState::apply(const EventRecord& r, uint32_t stack) {
  using format::Op;
  const bool ok = !(r.flags & kHasResult) || r.result == 0;
  switch (r.op) {
    case Op::Alloc:
      if (ok) hold(&allocations_, r, stack);
      return;
    case Op::Free:
      release(&allocations_, r.addr);
      return;
    case Op::BlockAlloc:
      hold(&blocks_, r, stack);
      return;
    case Op::BlockFree:
      release(&blocks_, r.addr);
      return;
    case Op::Map:
      if (ok) hold(&mappings_, r, stack);
      return;
    case Op::Unmap:
      release(&mappings_, r.addr);
      return;
    case Op::Reserve:
      if (ok) hold(&reservations_, r, stack);
      return;
    case Op::Unreserve:
      release(&reservations_, r.addr);
      return;
    case Op::Reset:
      for (ByAddress* map : {&allocations_, &blocks_, &mappings_, &reservations_})
        for (auto it = map->begin(); it != map->end();) it = it->second.device == r.device ? map->erase(it) : std::next(it);
      return;
    case Op::AllocatorSettings: {
      // A device's record replaces its last; one for every device (-1) replaces them all.
      auto replaced = [&](const HeldEvent& s) { return r.device < 0 || s.device == r.device; };
      settings_.erase(std::remove_if(settings_.begin(), settings_.end(), replaced), settings_.end());
      keep(r, stack, &settings_.emplace_back());
      return;
    }
    case Op::ScopeBegin:
      if (scopes_.size() == kMaxOpenScopes) scopes_.erase(scopes_.begin());
      keep(r, stack, &scopes_.emplace_back());
      return;
    case Op::ScopeEnd: {
      const bool by_range = (r.flags & kHasRange) != 0;
      const char* name = r.label_text();
      for (size_t i = scopes_.size(); i-- > 0;) {
        const HeldEvent& s = scopes_[i];
        const char* open_name = (s.flags & kLabelInterned) ? s.interned_label : s.label;
        if (by_range ? ((s.flags & kHasRange) && s.range == r.range) : strcmp(open_name, name) == 0) {
          scopes_.erase(scopes_.begin() + static_cast<std::ptrdiff_t>(i));
          return;
        }
      }
      return;
    }
    default:
      return;
  }
}

size_t HeldState::size() const {
  return allocations_.size() + blocks_.size() + mappings_.size() + reservations_.size() + scopes_.size() +
         settings_.size();
}

std::vector<const HeldEvent*> HeldState::in_order() const {
  std::vector<const HeldEvent*> all;
  all.reserve(size());
  for (const ByAddress* map : {&allocations_, &blocks_, &mappings_, &reservations_})
    for (const auto& [addr, h] : *map) all.push_back(&h);
  for (const HeldEvent& s : scopes_) all.push_back(&s);
  for (const HeldEvent& s : settings_) all.push_back(&s);
  std::sort(all.begin(), all.end(), [](const HeldEvent* a, const HeldEvent* b) { return a->seq < b->seq; });
  return all;
}

}  // namespace gpumemtrace
