// report/analyses/memory_model.cpp — event replay: how each op changes the memory model.
#include "report/analyses/memory_model.h"

#include <algorithm>

#include "trace/torch_actions.h"

namespace gpumemtrace::report {

bool MemoryModel::Sampler::due() {
  if (++skipped_ < stride_) return false;
  skipped_ = 0;
  return true;
}

void MemoryModel::Sampler::store(const TimelineSample& sample) {
  // When full, drop every other sample and sample half as often from then on.
  constexpr size_t kMax = 512;
  samples_.push_back(sample);
  if (samples_.size() >= kMax) {
    size_t kept = 0;
    for (size_t i = 0; i < samples_.size(); i += 2) samples_[kept++] = samples_[i];
    samples_.resize(kept);
    stride_ *= 2;
  }
}

std::vector<TimelineSample> MemoryModel::Sampler::take(const TimelineSample& last) {
  std::vector<TimelineSample> out = std::move(samples_);
  if (out.empty() || out.back().time_ns != last.time_ns) out.push_back(last);
  return out;
}

void MemoryModel::set_window(uint32_t window, bool widened) {
  window_ = window;
  if (!widened) return;
  for (auto& [device, state] : devices_) {
    state.reserved.fold_windows();
    state.allocated.fold_windows();
  }
  host_.ledger.fold_windows();
}

void MemoryModel::set_phase(const std::string& phase) {
  settle_all();  // the phase changes: peaks pending so far belong to the previous phase
  phase_ = phase;
}

void MemoryModel::apply(const Event& e, uint64_t position, SiteId site) {
  position_ = position;
  seq_ = e.seq;
  time_ = e.t;
  initial_ = e.initial;
  if (e.op == Op::Trim) return on_trim(e);
  DeviceState& state = device_state(e.device);
  if (history_ended_) return apply_after_history(e, site, state);
  DeviceSummary& summary = state.summary;
  ++summary.events;
  if (summary.events == 1) summary.first_time_ns = e.t;
  summary.last_time_ns = std::max(summary.last_time_ns, e.t);
  settle_before(e, state);

  switch (e.op) {
    case Op::Alloc:
      if (e.result == 0) on_alloc(e, site, state);
      else ++summary.failed_allocations;
      break;
    case Op::Free:
      on_free(e, state);
      break;
    case Op::BlockAlloc:
      ++(initial_ ? summary.initial_blocks : summary.block_allocations);
      if (!initial_ && !summary.pytorch_blocks) summary.pytorch_blocks = torch_actions::is_torch_api(e.api);
      on_block_alloc(e, site, state);
      break;
    case Op::BlockFree:
      ++summary.block_frees;
      on_block_free(e, state);
      break;
    case Op::BlockOom:
      ++summary.block_ooms;
      if (e.has_meminfo) on_meminfo(e, state);  // a live PyTorch block_oom carries the device's free bytes
      break;
    case Op::Map:
      on_map(e);
      break;
    case Op::Unmap:
      on_unmap(e);
      break;
    case Op::Reset:
      on_reset(e.device, state);
      break;
    case Op::MemInfo:
      on_meminfo(e, state);
      break;
    default:
      break;  // reserve/unreserve: address space only (docs/report.md); marks, scopes: no memory
  }
  if (initial_) {  // the state so far is the one the history starts from (initial events come first)
    summary.initial_reserved = state.reserved.live();
    summary.initial_allocated = state.allocated.live();
    if ((e.op == Op::Alloc && e.kind == Kind::Device) || (e.op == Op::Map && is_torch_api(e.api))) ++summary.initial_segments;
  }
}

// The live set at the end of a capped trace: what is live changes, nothing the recorded part
// measured (counts, times, peaks, highs; acquire() keeps the ledgers' history as it was).
void MemoryModel::apply_after_history(const Event& e, SiteId site, DeviceState& state) {
  switch (e.op) {
    case Op::Alloc:
      if (e.result == 0) on_alloc(e, site, state);
      break;
    case Op::BlockAlloc:
      on_block_alloc(e, site, state);
      break;
    case Op::Reset:
      on_reset(e.device, state);
      break;
    default:
      break;  // the reader hands over live records (alloc, block_alloc) only
  }
}

void MemoryModel::end_history() {
  settle_all();
  for (auto& [device, state] : devices_) {
    state.history_end = TimelineSample{state.summary.last_time_ns, state.reserved.live(), state.allocated.live(),
                                       false, RoleSplit()};
  }
  history_ended_ = true;
}

// Takes pending peak snapshots while they still describe the peak. The block-level snapshot also
// records fragmentation, which any change to segments or blocks would alter; so anything but a
// further block_alloc settles it. The CUDA-level snapshot only needs settling before a decrease.
void MemoryModel::settle_before(const Event& e, DeviceState& state) {
  if (state.allocated.snapshot_pending() && e.op != Op::BlockAlloc) {
    state.allocated.take_snapshot(phase_);
    state.has_fragmentation_at_peak = true;
    state.fragmentation_at_peak = measure_fragmentation(state.summary.device);
  }
  if (state.reserved.snapshot_pending() && (e.op == Op::Free || e.op == Op::Reset)) {
    state.reserved.take_snapshot(phase_);
  }
}

void MemoryModel::settle_all() {
  Event any;  // an op that settles both levels
  any.op = Op::Reset;
  for (auto& [device, state] : devices_) settle_before(any, state);
}

Ledger& MemoryModel::ledger_of(DeviceState& state, Level level) {
  return level == Level::Block ? state.allocated : level == Level::Host ? host_.ledger : state.reserved;
}

namespace {

Holding holding_of(Level level, uint64_t key, const MemoryModel::Allocation& a, uint64_t addr) {
  return Holding{level, a.device, key, a.size, a.site, a.position, a.torch, a.time_ns, addr, a.has_blocks || a.torch};
}

Holding holding_of(uint64_t key, const MemoryModel::Block& b) {
  return Holding{Level::Block, b.device, key, b.size, b.site, b.position, b.torch, b.time_ns, key, false};
}

}  // namespace

void MemoryModel::acquire(DeviceState& state, Level level, uint64_t key, const Allocation& a) {
  Ledger& ledger = ledger_of(state, level);
  if (history_ended_) ledger.add_live(a.site, a.size);
  else if (initial_) ledger.add_initial(a.site, a.size, seq_, time_);
  else ledger.add(a.site, a.size, seq_, time_, window_, level == Level::Block ? pass_ : 0);
  Holding h = holding_of(level, key, a, level == Level::Physical ? 0 : key);
  h.initial = initial_;
  for (ModelListener* listener : listeners_) listener->on_acquire(h);
}

void MemoryModel::release(const Holding& h) {
  ledger_of(device_state(h.device), h.level).remove(h.site, h.size, phase_, window_);
  for (ModelListener* listener : listeners_) listener->on_release(h);
}

uint64_t MemoryModel::mapped_at(uint64_t handle) const {
  auto mapped = handle_at_.find(handle);
  return mapped == handle_at_.end() ? 0 : mapped->second;
}

int32_t MemoryModel::pool_index(std::string_view name, int32_t device) {
  for (size_t i = 0; i < pools_.size(); ++i) {
    if (pools_[i].name == name) return static_cast<int32_t>(i);
  }
  pools_.push_back(Pool{std::string(name), 0, false, device});
  return static_cast<int32_t>(pools_.size() - 1);
}

// Live PyTorch events describe segments the runtime hooks also record (cudaMalloc at the same
// address): count them once, in whichever order they come (PyTorch's microsecond times and ours can
// be a microsecond apart either way). True when `e` only completes the record of a live segment.
bool MemoryModel::merges_with_live_segment(const Event& e) {
  auto live = allocations_.find(e.addr);
  if (live == allocations_.end() || live->second.device != e.device) return false;
  if (is_torch_api(e.api)) {
    if (live->second.torch) return false;
    live->second.torch = true;  // the torch event only says the range is a segment
    if (!live->second.cached) cache_segment(live);
    return true;
  }
  if (live->second.torch_only && live->second.size == e.size) {
    live->second.torch_only = false;  // the runtime-level record of that segment: its free ends it
    return true;
  }
  return false;
}

void MemoryModel::on_alloc(const Event& e, SiteId site, DeviceState& state) {
  const bool plain = e.kind != Kind::Virtual && e.kind != Kind::Block && e.kind != Kind::Physical;
  if (plain && merges_with_live_segment(e)) return;
  if (!history_ended_ && !initial_) ++(e.kind == Kind::Host ? host_.allocations : state.summary.allocations);
  if (e.kind == Kind::Virtual) return;  // address space only: never counted as memory
  if (e.kind == Kind::Block) return on_block_alloc(e, site, state);
  const bool torch = is_torch_api(e.api);
  Allocation allocation;
  allocation.size = e.size;
  allocation.site = site;
  allocation.position = position_;
  allocation.time_ns = time_;
  allocation.device = e.device;
  allocation.kind = e.kind;
  allocation.torch = torch;
  allocation.torch_only = torch;
  allocation.initial = initial_;
  if (e.kind == Kind::Physical) {
    // A cuMemCreate handle: "addr" is the handle value, and a free with the same addr ends it.
    auto existing = physical_.find(e.addr);
    if (existing != physical_.end()) {
      ++replaced_live_;
      const Holding old = holding_of(Level::Physical, e.addr, existing->second, mapped_at(e.addr));
      physical_.erase(existing);
      release(old);
    }
    physical_.emplace(e.addr, allocation);
    acquire(state, Level::Physical, e.addr, allocation);
    return;
  }
  if (e.kind == Kind::Async && !e.pool.empty()) {
    allocation.pool = pool_index(e.pool, e.device);
    Pool& pool = pools_[static_cast<size_t>(allocation.pool)];
    pool.cached -= std::min(pool.cached, e.size);  // served from the pool's cache first
  }
  auto existing = allocations_.find(e.addr);
  if (existing != allocations_.end()) {
    ++replaced_live_;  // a free we never saw (or a writer bug): the old range ends here
    end_allocation(existing);
  }
  auto inserted = allocations_.emplace(e.addr, allocation).first;
  if (torch && e.kind == Kind::Device) cache_segment(inserted);  // PyTorch's segment: cached, blocks or not
  acquire(state, level_of(allocation), e.addr, allocation);
}

void MemoryModel::end_allocation(AllocationIt it) {
  const uint64_t addr = it->first;
  const Allocation allocation = it->second;
  if (allocation.has_blocks && allocation.block_bytes) end_blocks_in(addr, allocation.size, allocation.device);
  if (allocation.cached) uncache_segment(it);
  if (allocation.pool >= 0) pools_[static_cast<size_t>(allocation.pool)].cached += allocation.size;
  allocations_.erase(addr);
  release(holding_of(level_of(allocation), addr, allocation, addr));
}

void MemoryModel::on_free(const Event& e, DeviceState& state) {
  const bool plain = e.kind != Kind::Virtual && e.kind != Kind::Physical;
  auto it = plain ? allocations_.find(e.addr) : allocations_.end();
  // torch.segment_free of a segment the runtime hooks recorded: its cudaFree ends it (which may
  // come just before or just after it).
  if (plain && is_torch_api(e.api) && (it == allocations_.end() || !it->second.torch_only)) return;
  ++(it != allocations_.end() && it->second.kind == Kind::Host ? host_.frees : state.summary.frees);
  if (e.kind == Kind::Virtual) return;
  if (it != allocations_.end()) return end_allocation(it);
  auto handle = physical_.find(e.addr);
  if (handle != physical_.end()) {
    const Holding old = holding_of(Level::Physical, e.addr, handle->second, mapped_at(e.addr));
    handle_at_.erase(handle->first);
    physical_.erase(handle);
    release(old);
    return;
  }
  if (e.kind == Kind::Block) return on_block_free(e, state);
  if (e.addr != 0) ++state.summary.unmatched_frees;  // cudaFree(NULL) is a legal no-op
}

MemoryModel::AllocationIt MemoryModel::segment_of(const Event& e) {
  if (e.has_segment) {
    auto it = allocations_.find(e.segment);
    if (it != allocations_.end()) return it;
  }
  // The live allocation whose range contains [addr, addr+size).
  auto it = allocations_.upper_bound(e.addr);
  if (it == allocations_.begin()) return allocations_.end();
  --it;
  if (e.addr + e.size <= it->first + it->second.size) return it;
  return allocations_.end();
}

void MemoryModel::on_block_alloc(const Event& e, SiteId site, DeviceState& state) {
  state.has_blocks = true;
  if (blocks_.count(e.addr)) {
    ++replaced_live_;  // a block_free we never saw: the old block ends here
    on_block_free(e, state);
  }
  Block block;
  block.size = e.size;
  block.site = site;
  block.position = position_;
  block.time_ns = time_;
  block.device = e.device;
  block.torch = is_torch_api(e.api);
  block.initial = initial_;
  auto segment = segment_of(e);
  if (segment != allocations_.end()) {
    // Its site takes a caching allocator's segments: their growth is its blocks' (growth.h).
    if (!segment->second.has_blocks) state.reserved.note_holds_blocks(segment->second.site);
    segment->second.has_blocks = true;
    segment->second.block_bytes += e.size;
    block.segment = segment->first;
    block.in_segment = true;
    if (!segment->second.cached) cache_segment(segment);  // a cudaMalloc'ed range a block lands in
  }
  gaps_around(blocks_.emplace(e.addr, block).first, true);
  Allocation as_allocation;
  as_allocation.size = block.size;
  as_allocation.site = site;
  as_allocation.position = position_;
  as_allocation.time_ns = time_;
  as_allocation.device = e.device;
  as_allocation.torch = block.torch;
  acquire(state, Level::Block, e.addr, as_allocation);
}

void MemoryModel::on_block_free(const Event& e, DeviceState& state) {
  auto it = blocks_.find(e.addr);
  if (it == blocks_.end()) {
    if (e.addr != 0) ++state.summary.unmatched_frees;
    return;
  }
  const Block block = it->second;
  if (block.in_segment) {
    auto segment = allocations_.find(block.segment);
    if (segment != allocations_.end()) segment->second.block_bytes -= std::min(segment->second.block_bytes, block.size);
  }
  gaps_around(it, false);
  blocks_.erase(it);
  release(holding_of(e.addr, block));
}

bool MemoryModel::usable_reading(const Event& e) {
  if (!e.has_meminfo) return false;
  DeviceState& state = device_state(e.device);
  const uint64_t total = e.total ? e.total : state.summary.total;
  if (!total || e.free <= total) return true;
  note_inconsistent_reading(e.device, e.free, total);
  return false;
}

// More free than the device holds: a stand-in's figures (a simulated or wrapped runtime) that
// contradict each other. Which one is wrong is unknown: neither is used.
void MemoryModel::note_inconsistent_reading(int32_t device, uint64_t free, uint64_t total) {
  DeviceState& state = device_state(device);
  if (state.inconsistent_readings++ == 0) {
    state.inconsistent_free = free;
    state.inconsistent_total = total;
  }
}

void MemoryModel::on_meminfo(const Event& e, DeviceState& state) {
  reading_used_ = usable_reading(e);
  if (!reading_used_) return;
  state.has_meminfo = true;
  state.meminfo_free = e.free;
  state.meminfo_total = e.total;
  state.meminfo_reserved = state.reserved.live();
  if (e.total) state.summary.total = e.total;
}

namespace {

// Erases every entry of `device` from `live` (allocations, physical handles or blocks), noting each
// as a holding that ended (`holding` makes it).
template <typename Map, typename Make>
void take_device(Map& live, int32_t device, std::vector<Holding>& gone, Make holding) {
  for (auto it = live.begin(); it != live.end();) {
    if (it->second.device != device) {
      ++it;
      continue;
    }
    gone.push_back(holding(it->first, it->second));
    it = live.erase(it);
  }
}

}  // namespace

void MemoryModel::on_reset(int32_t device, DeviceState& state) {
  state.reserved.clear_live(phase_);  // takes a pending peak snapshot first
  state.allocated.clear_live(phase_);
  std::vector<Holding> gone;
  take_device(allocations_, device, gone,
              [](uint64_t addr, const Allocation& a) { return holding_of(level_of(a), addr, a, addr); });
  take_device(physical_, device, gone, [this](uint64_t handle, const Allocation& a) {
    return holding_of(Level::Physical, handle, a, mapped_at(handle));
  });
  take_device(blocks_, device, gone, [](uint64_t addr, const Block& b) { return holding_of(addr, b); });
  for (Pool& pool : pools_) {
    if (pool.device == device) pool.cached = 0;
  }
  uncache_device(device);
  for (const Holding& h : gone) {
    if (h.level == Level::Host) host_.ledger.remove(h.site, h.size, phase_);  // the context's pinned memory too
    for (ModelListener* listener : listeners_) listener->on_release(h);
  }
}

void MemoryModel::on_trim(const Event& e) {
  Pool& pool = pools_[static_cast<size_t>(pool_index(e.pool, e.device))];
  pool.trimmed = true;
  pool.cached = std::min(pool.cached, e.size);  // "keep at most size bytes"
}

// A segment freed while blocks inside it are live: the memory is gone, so are the blocks. Counted
// (a warning). Live PyTorch events are merged into the timeline by time (the reader), so their block
// frees come before the cudaFree of the segment, as they happened.
void MemoryModel::end_blocks_in(uint64_t start, uint64_t size, int32_t device) {
  for (auto it = blocks_.lower_bound(start); it != blocks_.end() && it->first < start + size;) {
    if (it->second.device != device) {
      ++it;
      continue;
    }
    const uint64_t addr = it->first;
    const Block block = it->second;
    ++orphan_blocks_;
    orphan_bytes_ += block.size;
    gaps_around(it, false);
    it = blocks_.erase(it);
    release(holding_of(addr, block));
  }
}

void MemoryModel::on_map(const Event& e) {
  if (e.has_handle) handle_at_[e.handle] = e.addr;
  if (is_torch_api(e.api) && e.size) {
    torch_mapped_[e.addr] = std::max(torch_mapped_[e.addr], e.size);
    map_cached(e.addr, range_end(e.addr, e.size), e.device);  // an expandable segment's pages: cached memory
  }
}

void MemoryModel::on_unmap(const Event& e) {
  if (!is_torch_api(e.api)) return;  // the handle stays mapped as far as we know until it is freed
  auto it = torch_mapped_.lower_bound(e.addr);
  while (it != torch_mapped_.end() && it->first < e.addr + e.size) it = torch_mapped_.erase(it);
  unmap_cached(e.addr, range_end(e.addr, e.size), e.device);
}

bool MemoryModel::is_segment(uint64_t addr) const {
  auto it = allocations_.find(addr);
  return it != allocations_.end() && it->second.cached;
}

uint64_t MemoryModel::block_bytes_in(uint64_t start, uint64_t size, int32_t device) const {
  uint64_t bytes = 0, end = start + size;
  auto it = blocks_.upper_bound(start);
  if (it != blocks_.begin()) --it;  // a block that starts before the range may reach into it
  for (; it != blocks_.end() && it->first < end; ++it) {
    if (it->second.device != device) continue;
    uint64_t lo = std::max(start, it->first), hi = std::min(end, it->first + it->second.size);
    if (hi > lo) bytes += hi - lo;
  }
  return bytes;
}

// A physical chunk (cuMemCreate, or a snapshot's segment_map) that belongs to a caching
// allocator: PyTorch created or mapped it (api "torch.*", or mapped inside a range a
// torch.segment_map event named), or blocks live inside it. Only on devices with block data.
bool MemoryModel::is_allocator_chunk(uint64_t handle, const Allocation& chunk, uint64_t* block_bytes) const {
  const DeviceState* state = devices_.find(chunk.device);
  if (!state || !state->has_blocks) return false;
  auto mapped = handle_at_.find(handle);
  uint64_t addr = mapped != handle_at_.end() ? mapped->second : (chunk.torch ? handle : 0);
  *block_bytes = addr ? block_bytes_in(addr, chunk.size, chunk.device) : 0;
  if (chunk.torch || *block_bytes) return true;
  if (!addr) return false;
  auto range = torch_mapped_.upper_bound(addr);
  if (range == torch_mapped_.begin()) return false;
  --range;
  return addr < range->first + range->second;
}

}  // namespace gpumemtrace::report
