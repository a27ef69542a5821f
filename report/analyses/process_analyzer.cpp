// Event replay: how each op changes the memory model. finish() lives in process_report.cpp.
#include "report/analyses/process_analyzer.h"

#include <algorithm>

namespace gpumemtrace::report {

bool is_torch_api(std::string_view api) { return api.compare(0, 6, "torch.") == 0; }

void ProcessAnalyzer::Sampler::add(const TimelineSample& sample) {
  // Keeps between kMax/2 and kMax evenly spaced samples of the whole run: when full, drop every
  // other one and sample half as often from then on.
  constexpr size_t kMax = 512;
  if (++skipped_ < stride_) return;
  skipped_ = 0;
  samples_.push_back(sample);
  if (samples_.size() >= kMax) {
    size_t kept = 0;
    for (size_t i = 0; i < samples_.size(); i += 2) samples_[kept++] = samples_[i];
    samples_.resize(kept);
    stride_ *= 2;
  }
}

std::vector<TimelineSample> ProcessAnalyzer::Sampler::take(const TimelineSample& last) {
  std::vector<TimelineSample> out = std::move(samples_);
  if (out.empty() || out.back().time_ns != last.time_ns) out.push_back(last);
  return out;
}

void ProcessAnalyzer::on_device(const DeviceInfo& info) {
  DeviceState& state = device_state(info.device);
  state.summary.name = info.name;
  if (info.total) state.summary.total = info.total;
}

ProcessAnalyzer::DeviceState& ProcessAnalyzer::device_state(int32_t device) {
  auto it = devices_.find(device);
  if (it != devices_.end()) return it->second;
  DeviceState& state = devices_[device];
  state.summary.device = device;
  return state;
}

void ProcessAnalyzer::on_event(const Event& e) {
  ++events_;
  if (events_ == 1) first_time_ = e.t;
  last_time_ = std::max(last_time_, e.t);
  bool widened = false;
  // Growth windows count positions in the (time-ordered) stream, not seq: merged delayed events
  // carry the seq of their drain (docs/trace-format.md).
  window_ = windows_.window_of(events_, &widened);
  if (widened) {
    for (auto& [device, state] : devices_) {
      state.reserved.fold_windows();
      state.allocated.fold_windows();
    }
  }

  if (e.op == Op::Mark) {
    settle_all();  // the phase changes: peaks pending so far belong to the previous phase
    phase_ = std::string(e.label);
    ++marks_total_;
    if (marks_.size() < kMaxMarks) marks_.push_back(Mark{e.seq, e.t, phase_});
    return;
  }
  if (e.op == Op::Trim) return on_trim(e);

  DeviceState& state = device_state(e.device);
  DeviceSummary& summary = state.summary;
  ++summary.events;
  if (summary.events == 1) summary.first_time_ns = e.t;
  summary.last_time_ns = std::max(summary.last_time_ns, e.t);
  settle_before(e, state);

  switch (e.op) {
    case Op::Alloc:
      if (e.result == 0) {
        on_alloc(e, state);
        break;
      }
      ++summary.failed_allocations;
      on_oom(e, state);
      break;
    case Op::Free:
      on_free(e, state);
      break;
    case Op::BlockAlloc:
      ++summary.block_allocations;
      on_block_alloc(e, state);
      break;
    case Op::BlockFree:
      ++summary.block_frees;
      on_block_free(e, state);
      break;
    case Op::BlockOom:
      ++summary.block_ooms;
      on_oom(e, state);
      break;
    case Op::Reserve:
    case Op::Unreserve:
      break;  // address space only (docs/report.md)
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
    case Op::Trim:
    case Op::Mark:
      break;  // handled above
    case Op::Sync:
      break;  // consumed by the reader (event_merger.h)
    case Op::ScopeBegin:
    case Op::ScopeEnd:
      break;
  }
  state.timeline.add(TimelineSample{e.t, state.reserved.live(), state.allocated.live()});
}

// Takes pending peak snapshots while they still describe the peak. The block-level snapshot also
// records fragmentation, which any change to segments or blocks would alter; so anything but a
// further block_alloc settles it. The CUDA-level snapshot only needs settling before a decrease.
void ProcessAnalyzer::settle_before(const Event& e, DeviceState& state) {
  if (state.allocated.snapshot_pending() && e.op != Op::BlockAlloc) {
    state.allocated.take_snapshot(phase_);
    state.has_fragmentation_at_peak = true;
    state.fragmentation_at_peak = measure_fragmentation(state.summary.device);
  }
  if (state.reserved.snapshot_pending() && (e.op == Op::Free || e.op == Op::Reset)) {
    state.reserved.take_snapshot(phase_);
  }
}

void ProcessAnalyzer::settle_all() {
  Event any;  // an op that settles both levels
  any.op = Op::Reset;
  for (auto& [device, state] : devices_) settle_before(any, state);
}

void ProcessAnalyzer::acquire(Ledger& ledger, uint32_t stack, uint64_t size, const Event& e) {
  ledger.add(stack, size, e.seq, e.t, window_);
}

void ProcessAnalyzer::release(Ledger& ledger, uint32_t stack, uint64_t size) {
  ledger.remove(stack, size, phase_);
}

int32_t ProcessAnalyzer::pool_index(std::string_view name, int32_t device) {
  for (size_t i = 0; i < pools_.size(); ++i) {
    if (pools_[i].name == name) return static_cast<int32_t>(i);
  }
  pools_.push_back(Pool{std::string(name), 0, false, device});
  return static_cast<int32_t>(pools_.size() - 1);
}

// Live PyTorch events describe segments the runtime hooks also record (cudaMalloc at the same
// address): count them once, in whichever order they come (PyTorch's microsecond times and ours can
// be a microsecond apart either way). True when `e` only completes the record of a live segment.
bool ProcessAnalyzer::merges_with_live_segment(const Event& e) {
  auto live = allocations_.find(e.addr);
  if (live == allocations_.end() || live->second.device != e.device) return false;
  if (is_torch_api(e.api)) {
    if (live->second.torch) return false;
    live->second.torch = true;  // the torch event only says the range is a segment
    return true;
  }
  if (live->second.torch_only && live->second.size == e.size) {
    live->second.torch_only = false;  // the runtime-level record of that segment: its free ends it
    return true;
  }
  return false;
}

void ProcessAnalyzer::on_alloc(const Event& e, DeviceState& state) {
  const bool plain = e.kind != Kind::Virtual && e.kind != Kind::Block && e.kind != Kind::Physical;
  if (plain && merges_with_live_segment(e)) return;
  ++state.summary.allocations;
  if (e.kind == Kind::Virtual) return;  // address space only: never counted as memory
  if (e.kind == Kind::Block) return on_block_alloc(e, state);
  const bool torch = is_torch_api(e.api);
  Allocation allocation;
  allocation.size = e.size;
  allocation.stack = e.stack;
  allocation.device = e.device;
  allocation.kind = e.kind;
  allocation.torch = torch;
  allocation.torch_only = torch;
  if (e.kind == Kind::Physical) {
    // A cuMemCreate handle: "addr" is the handle value, and a free with the same addr ends it.
    auto [it, inserted] = physical_.emplace(e.addr, allocation);
    if (!inserted) {
      ++replaced_live_;
      release(device_state(it->second.device).reserved, it->second.stack, it->second.size);
      it->second = allocation;
    }
    acquire(state.reserved, e.stack, e.size, e);
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
  allocations_.emplace(e.addr, allocation);
  acquire(state.reserved, e.stack, e.size, e);
}

void ProcessAnalyzer::end_allocation(std::map<uint64_t, Allocation>::iterator it) {
  Allocation& allocation = it->second;
  const bool live_blocks = allocation.has_blocks && allocation.block_bytes;
  if (allocation.has_blocks) untrack_segment(it);
  if (live_blocks) end_blocks_in(it->first, allocation.size, allocation.device);
  release(device_state(allocation.device).reserved, allocation.stack, allocation.size);
  if (allocation.pool >= 0) pools_[static_cast<size_t>(allocation.pool)].cached += allocation.size;
  allocations_.erase(it);
}

void ProcessAnalyzer::on_free(const Event& e, DeviceState& state) {
  const bool plain = e.kind != Kind::Virtual && e.kind != Kind::Physical;
  auto it = plain ? allocations_.find(e.addr) : allocations_.end();
  // torch.segment_free of a segment the runtime hooks recorded: its cudaFree ends it (which may
  // come just before or just after it).
  if (plain && is_torch_api(e.api) && (it == allocations_.end() || !it->second.torch_only)) return;
  ++state.summary.frees;
  if (e.kind == Kind::Virtual) return;
  if (it != allocations_.end()) return end_allocation(it);
  auto handle = physical_.find(e.addr);
  if (handle != physical_.end()) {
    release(device_state(handle->second.device).reserved, handle->second.stack, handle->second.size);
    handle_at_.erase(handle->first);
    physical_.erase(handle);
    return;
  }
  if (e.kind == Kind::Block) return on_block_free(e, state);
  if (e.addr != 0) ++state.summary.unmatched_frees;  // cudaFree(NULL) is a legal no-op
}

std::map<uint64_t, ProcessAnalyzer::Allocation>::iterator ProcessAnalyzer::segment_of(const Event& e) {
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

void ProcessAnalyzer::on_block_alloc(const Event& e, DeviceState& state) {
  state.has_blocks = true;
  if (blocks_.count(e.addr)) {
    ++replaced_live_;  // a block_free we never saw: the old block ends here
    on_block_free(e, state);
  }
  Block block;
  block.size = e.size;
  block.stack = e.stack;
  block.device = e.device;
  auto segment = segment_of(e);
  if (segment != allocations_.end()) {
    if (!segment->second.has_blocks) track_segment(segment);
    segment->second.block_bytes += e.size;
    device_state(segment->second.device).segments.allocated += e.size;
    block.segment = segment->first;
    block.in_segment = true;
  }
  gaps_around(blocks_.emplace(e.addr, block).first, true);
  acquire(state.allocated, e.stack, e.size, e);
}

void ProcessAnalyzer::on_block_free(const Event& e, DeviceState& state) {
  auto it = blocks_.find(e.addr);
  if (it == blocks_.end()) {
    if (e.addr != 0) ++state.summary.unmatched_frees;
    return;
  }
  const Block& block = it->second;
  if (block.in_segment) {
    auto segment = allocations_.find(block.segment);
    if (segment != allocations_.end()) {
      const uint64_t gone = std::min(segment->second.block_bytes, block.size);
      segment->second.block_bytes -= gone;
      if (segment->second.has_blocks) {
        uint64_t& allocated = device_state(segment->second.device).segments.allocated;
        allocated -= std::min(allocated, gone);
      }
    }
  }
  gaps_around(it, false);
  release(device_state(block.device).allocated, block.stack, block.size);
  blocks_.erase(it);
}

void ProcessAnalyzer::on_oom(const Event& e, DeviceState& state) {
  OomRecord record;
  OomReport& r = record.report;
  r.device = e.device;
  r.seq = e.seq;
  r.time_ns = e.t;
  r.op = format::op_name(e.op);
  r.api = std::string(e.api);
  r.result = e.result;
  r.requested = e.size;
  r.live_bytes = state.reserved.live();
  r.allocated_bytes = state.allocated.live();
  r.has_blocks = state.has_blocks;
  r.phase = phase_;
  if (state.has_blocks) r.fragmentation = measure_fragmentation(e.device);
  record.stack = e.stack;
  record.holders = (state.has_blocks ? state.allocated : state.reserved).top(5, nullptr);
  // A live PyTorch block_oom carries the device's free bytes itself: that is the reading. Else the
  // recorder writes a meminfo right after a failed allocation; until it comes, the latest one known
  // stands in.
  const bool own_meminfo = e.has_meminfo;
  if (own_meminfo) on_meminfo(e, state);
  if (state.has_meminfo) {
    r.has_device_free = true;
    r.device_free = state.meminfo_free;
    r.device_total = state.meminfo_total;
  }
  if (!r.device_total) r.device_total = state.summary.total;
  if (!own_meminfo) state.ooms_awaiting_meminfo.push_back(ooms_.size());
  ooms_.push_back(std::move(record));
}

void ProcessAnalyzer::on_meminfo(const Event& e, DeviceState& state) {
  if (!e.has_meminfo) return;
  state.has_meminfo = true;
  state.meminfo_free = e.free;
  state.meminfo_total = e.total;
  if (e.total) state.summary.total = e.total;
  for (size_t index : state.ooms_awaiting_meminfo) {
    OomReport& r = ooms_[index].report;
    r.has_device_free = true;
    r.device_free = e.free;
    if (e.total) r.device_total = e.total;
  }
  state.ooms_awaiting_meminfo.clear();
}

void ProcessAnalyzer::on_reset(int32_t device, DeviceState& state) {
  for (auto it = allocations_.begin(); it != allocations_.end();) {
    it = it->second.device == device ? allocations_.erase(it) : std::next(it);
  }
  for (auto it = physical_.begin(); it != physical_.end();) {
    it = it->second.device == device ? physical_.erase(it) : std::next(it);
  }
  for (auto it = blocks_.begin(); it != blocks_.end();) {
    it = it->second.device == device ? blocks_.erase(it) : std::next(it);
  }
  for (Pool& pool : pools_) {
    if (pool.device == device) pool.cached = 0;
  }
  state.reserved.clear_live(phase_);
  state.allocated.clear_live(phase_);
  retrack_all();
}

void ProcessAnalyzer::on_trim(const Event& e) {
  Pool& pool = pools_[static_cast<size_t>(pool_index(e.pool, e.device))];
  pool.trimmed = true;
  pool.cached = std::min(pool.cached, e.size);  // "keep at most size bytes"
}

// A segment freed while blocks inside it are live: the memory is gone, so are the blocks. Counted
// (a warning). Live PyTorch events are merged into the timeline by time (the reader), so their block
// frees come before the cudaFree of the segment, as they happened.
void ProcessAnalyzer::end_blocks_in(uint64_t start, uint64_t size, int32_t device) {
  for (auto it = blocks_.lower_bound(start); it != blocks_.end() && it->first < start + size;) {
    if (it->second.device != device) {
      ++it;
      continue;
    }
    release(device_state(device).allocated, it->second.stack, it->second.size);
    ++orphan_blocks_;
    orphan_bytes_ += it->second.size;
    gaps_around(it, false);
    it = blocks_.erase(it);
  }
}

void ProcessAnalyzer::on_map(const Event& e) {
  if (e.has_handle) handle_at_[e.handle] = e.addr;
  if (is_torch_api(e.api) && e.size) torch_mapped_[e.addr] = std::max(torch_mapped_[e.addr], e.size);
}

void ProcessAnalyzer::on_unmap(const Event& e) {
  if (!is_torch_api(e.api)) return;  // the handle stays mapped as far as we know until it is freed
  auto it = torch_mapped_.lower_bound(e.addr);
  while (it != torch_mapped_.end() && it->first < e.addr + e.size) it = torch_mapped_.erase(it);
}

uint64_t ProcessAnalyzer::block_bytes_in(uint64_t start, uint64_t size, int32_t device) const {
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
bool ProcessAnalyzer::is_allocator_chunk(uint64_t handle, const Allocation& chunk, uint64_t* block_bytes) const {
  auto state = devices_.find(chunk.device);
  if (state == devices_.end() || !state->second.has_blocks) return false;
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

// ---- fragmentation bookkeeping (SegmentGaps) ----

namespace {

uint64_t end_of(uint64_t start, uint64_t size) { return size > UINT64_MAX - start ? UINT64_MAX : start + size; }
uint64_t gap(uint64_t from, uint64_t to) { return to > from ? to - from : 0; }
void add_gap(std::multiset<uint64_t>& gaps, uint64_t size) {
  if (size) gaps.insert(size);
}
void remove_gap(std::multiset<uint64_t>& gaps, uint64_t size) {
  if (!size) return;
  auto it = gaps.find(size);
  if (it != gaps.end()) gaps.erase(it);
}

}  // namespace

// The segment with block data whose range holds `addr`, or allocations_.end().
ProcessAnalyzer::AllocationIt ProcessAnalyzer::tracked_segment_at(uint64_t addr) {
  auto it = allocations_.upper_bound(addr);
  if (it == allocations_.begin()) return allocations_.end();
  --it;
  if (!it->second.has_blocks || addr >= end_of(it->first, it->second.size)) return allocations_.end();
  return it;
}

// A segment starts (or stops) carrying block data: its size, block bytes and gaps join (leave)
// its device's totals. O(blocks inside it), once per segment.
void ProcessAnalyzer::track_segment(AllocationIt segment) {
  Allocation& a = segment->second;
  a.has_blocks = true;
  SegmentGaps& totals = device_state(a.device).segments;
  totals.reserved += a.size;
  totals.allocated += a.block_bytes;
  const uint64_t end = end_of(segment->first, a.size);
  uint64_t cursor = segment->first;
  for (auto b = blocks_.lower_bound(segment->first); b != blocks_.end() && b->first < end; ++b) {
    add_gap(totals.gaps, gap(cursor, b->first));
    cursor = end_of(b->first, b->second.size);
  }
  add_gap(totals.gaps, gap(cursor, end));
}

void ProcessAnalyzer::untrack_segment(AllocationIt segment) {
  Allocation& a = segment->second;
  SegmentGaps& totals = device_state(a.device).segments;
  totals.reserved -= std::min(totals.reserved, a.size);
  totals.allocated -= std::min(totals.allocated, a.block_bytes);
  const uint64_t end = end_of(segment->first, a.size);
  uint64_t cursor = segment->first;
  for (auto b = blocks_.lower_bound(segment->first); b != blocks_.end() && b->first < end; ++b) {
    remove_gap(totals.gaps, gap(cursor, b->first));
    cursor = end_of(b->first, b->second.size);
  }
  remove_gap(totals.gaps, gap(cursor, end));
  a.has_blocks = false;
}

// After a reset: every device's totals again from the live segments (resets are rare, and the
// reset itself already walks every live allocation).
void ProcessAnalyzer::retrack_all() {
  for (auto& [device, state] : devices_) state.segments = SegmentGaps();
  for (auto it = allocations_.begin(); it != allocations_.end(); ++it) {
    if (it->second.has_blocks) track_segment(it);
  }
}

// `block` was just inserted into blocks_ (or is about to be erased): the gap it sits in splits in
// two (or the two around it merge). O(log n).
void ProcessAnalyzer::gaps_around(BlockIt block, bool inserted) {
  auto segment = tracked_segment_at(block->first);
  if (segment == allocations_.end()) return;
  const uint64_t start = segment->first, end = end_of(start, segment->second.size);
  uint64_t before = start;  // where the gap in front of `block` starts
  if (block != blocks_.begin()) {
    auto previous = std::prev(block);
    if (previous->first >= start) before = end_of(previous->first, previous->second.size);
  }
  uint64_t after = end;  // where the gap behind it ends
  auto next = std::next(block);
  if (next != blocks_.end() && next->first < end) after = next->first;
  std::multiset<uint64_t>& gaps = device_state(segment->second.device).segments.gaps;
  const uint64_t whole = gap(before, after), left = gap(before, block->first),
                 right = gap(end_of(block->first, block->second.size), after);
  if (inserted) {
    remove_gap(gaps, whole);
    add_gap(gaps, left);
    add_gap(gaps, right);
  } else {
    remove_gap(gaps, left);
    remove_gap(gaps, right);
    add_gap(gaps, whole);
  }
}

FragmentationPoint ProcessAnalyzer::measure_fragmentation(int32_t device) const {
  FragmentationPoint point;
  auto state = devices_.find(device);
  if (state == devices_.end()) return point;
  const SegmentGaps& totals = state->second.segments;
  point.reserved = totals.reserved;
  point.allocated = totals.allocated;
  point.largest_free_block = totals.gaps.empty() ? 0 : *totals.gaps.rbegin();
  point.free_in_reserved = point.reserved - std::min(point.reserved, point.allocated);
  return point;
}

}  // namespace gpumemtrace::report
