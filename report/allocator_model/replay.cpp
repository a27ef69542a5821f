// report/allocator_model/replay.cpp — see replay.h.
#include "report/allocator_model/replay.h"

#include <cstdio>
#include <deque>
#include <string_view>
#include <unordered_map>

#include "report/analyses/node_pool.h"

namespace gpumemtrace::report::allocator_model {

namespace {

constexpr std::string_view kApiAlloc = "torch.alloc";
constexpr std::string_view kApiFreeCompleted = "torch.free_completed";
constexpr std::string_view kApiSegmentAlloc = "torch.segment_alloc";
constexpr std::string_view kApiSegmentFree = "torch.segment_free";
constexpr std::string_view kApiSegmentMap = "torch.segment_map";
constexpr std::string_view kApiSegmentUnmap = "torch.segment_unmap";
constexpr int64_t kCudaOutOfMemory = 2;  // cudaErrorMemoryAllocation == CUDA_ERROR_OUT_OF_MEMORY

bool is_torch(std::string_view api) { return api.size() > 6 && api.substr(0, 6) == "torch."; }

// "20971520 B (20.0 MiB)": exact, and readable.
std::string bytes(uint64_t n) {
  char text[64];
  std::snprintf(text, sizeof text, "%llu B (%.1f MiB)", static_cast<unsigned long long>(n),
                static_cast<double>(n) / (1024.0 * 1024.0));
  return text;
}

std::string hex(uint64_t v) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(v));
  return text;
}

const char* op_name(SegmentOp::Kind kind) {
  switch (kind) {
    case SegmentOp::Alloc: return "segment_alloc";
    case SegmentOp::Free: return "segment_free";
    case SegmentOp::Map: return "segment_map";
    case SegmentOp::Unmap: return "segment_unmap";
  }
  return "?";
}

struct RecordedOp {
  SegmentOp::Kind kind = SegmentOp::Alloc;
  uint64_t addr = 0;
  uint64_t size = 0;
  uint64_t seq = 0;
};

}  // namespace

struct AllocatorReplay::Device {
  int32_t id = -1;
  uint64_t total = 0;
  std::unique_ptr<CachingAllocatorModel> model;
  NodePool nodes;                              // before the containers it serves
  std::pmr::unordered_map<uint64_t, Block*> live{&nodes};  // recorded block address -> the model's block
  uint64_t recorded_reserved = 0;
  // The capacity: the device's free bytes at the last reading, plus what this process held then
  // (CUDA-level: its live runtime allocations, which the PyTorch events may reach only later in the
  // merged timeline), less what it holds now outside PyTorch's segments.
  std::unordered_map<uint64_t, uint64_t> runtime_live;  // this process's CUDA allocations: addr -> size
  uint64_t runtime_bytes = 0;
  bool has_reading = false;
  uint64_t limit = 0;             // limit_device(): the capacity until the first reading
  uint64_t kept_free = 0;         // keep_free(): taken off every capacity
  double kept_share = 0;          // keep_free(): and this share of what the process may hold at most
  uint64_t reading_free = 0, reading_runtime = 0, reading_recorded = 0;
  bool oom_path_open = false;     // a CUDA allocation failed: releases now are the allocator's retry
  bool in_release_burst = false;  // the releases of one empty_cache() come together
  bool frees_complete_later = false;  // the trace has free_completed events
  bool inferred_expandable = false;   // no recorded settings: the first segment operation was a map
  // Checking.
  std::deque<RecordedOp> recorded;   // the recording's segment operations not yet matched
  std::deque<SegmentOp> replayed;    // the model's, likewise
  std::unordered_map<uint32_t, uint64_t> base_of;  // model segment -> recorded segment address
  uint64_t sample_stride = 1;
  uint64_t sample_skipped = 0;
  DeviceReplay out;
};

AllocatorReplay::AllocatorReplay(std::string overlay, std::string recorded_conf, bool check)
    : overlay_(std::move(overlay)), recorded_conf_(std::move(recorded_conf)), check_(check) {}

AllocatorReplay::~AllocatorReplay() = default;
AllocatorReplay::AllocatorReplay(AllocatorReplay&&) noexcept = default;
AllocatorReplay& AllocatorReplay::operator=(AllocatorReplay&&) noexcept = default;

AllocatorReplay::Device& AllocatorReplay::device(int32_t id) {
  if (last_ && last_->id == id) return *last_;  // an event's device is nearly always the previous one's
  std::unique_ptr<Device>& d = devices_[id];
  if (!d) {
    d = std::make_unique<Device>();
    d->id = id;
    d->out.device = id;
    d->out.checked = check_;
  }
  last_ = d.get();
  return *d;
}

void AllocatorReplay::on_device(const DeviceInfo& info) {
  if (info.device < 0) return;
  Device& d = device(info.device);
  if (info.total) d.total = info.total;
  if (info.has_free && !d.has_reading) {
    d.has_reading = true;  // written at start: nothing reserved yet
    d.reading_free = info.free;
  }
}

void AllocatorReplay::limit_device(int32_t device, uint64_t bytes) {
  if (device >= 0) this->device(device).limit = bytes;
}

void AllocatorReplay::keep_free(int32_t device, uint64_t bytes, double share) {
  if (device < 0) return;
  Device& d = this->device(device);
  d.kept_free = bytes;
  d.kept_share = share;
}

// The model is made at the device's first PyTorch event, under the recorded settings; without any, a
// map before any segment_alloc says the recording ran with expandable segments.
void AllocatorReplay::ensure_model(Device& d, bool expandable_hint) {
  if (d.model) return;
  d.inferred_expandable = expandable_hint;
  const AllocatorSettings settings = settings_for(d);
  d.model = std::make_unique<CachingAllocatorModel>(settings, d.total);
  d.out.settings = settings.describe();
  d.out.settings_recorded = recorded_.recorded();
}

// What the model runs under on `d` now: the recorded settings (or the inferred ones), then
// --recorded-settings, then the setting replayed. Both texts were checked on the command line.
AllocatorSettings AllocatorReplay::settings_for(const Device& d) const {
  AllocatorSettings base;
  base.expandable_segments = !recorded_.recorded() && d.inferred_expandable;
  const AllocatorSettings recorded = parse_alloc_conf(recorded_conf_, recorded_.for_device(d.id, base));
  return parse_alloc_conf(overlay_, recorded);
}

void AllocatorReplay::on_settings(const Event& e) {
  if (!recorded_.apply(e)) return;
  for (auto& [id, d] : devices_) {
    if (!d->model || (e.device >= 0 && e.device != id)) continue;
    const AllocatorSettings now = settings_for(*d);
    if (now.describe() == d->model->settings().describe()) continue;
    d->model->set_settings(now);
    ++d->out.settings_changes;
  }
}

// The capacity now (see Device): set before each request, since what the process holds outside
// PyTorch's segments moves.
// The margin comes off what the process may hold: cudaMalloc's reach, or the memory fraction's cap
// when that is lower (a capped process never reaches the device's free bytes). A share is of the
// most the process may hold: the device's memory, or the cap under a memory fraction (5% of a
// 139 GiB device is not a margin inside an 8 GiB cap).
void AllocatorReplay::update_capacity(Device& d) {
  const auto set = [&d](uint64_t capacity) {
    if (d.kept_free || d.kept_share > 0) {
      capacity = std::min(capacity, d.model->fraction_cap());
      const uint64_t most = std::min(d.total ? d.total : capacity, d.model->fraction_cap());
      const uint64_t margin = d.kept_free + static_cast<uint64_t>(d.kept_share * static_cast<double>(most));
      d.out.kept_free = margin;
      capacity -= std::min(capacity, margin);
    }
    d.model->set_capacity(capacity);
    d.out.capacity = d.model->limit();
  };
  if (!d.has_reading) {
    if (d.limit) set(d.limit);
    return;
  }
  uint64_t capacity;
  if (d.runtime_bytes || d.reading_runtime) {
    const uint64_t outside = d.runtime_bytes > d.recorded_reserved ? d.runtime_bytes - d.recorded_reserved : 0;
    const uint64_t avail = d.reading_free + d.reading_runtime;
    capacity = avail > outside ? avail - outside : 0;
  } else {  // PyTorch's events only (a snapshot): its reserved bytes at the reading
    capacity = d.reading_free + d.reading_recorded;
  }
  set(capacity);
}

void AllocatorReplay::take_reading(Device& d, uint64_t free) {
  d.has_reading = true;
  d.reading_free = free;
  d.reading_runtime = d.runtime_bytes;
  d.reading_recorded = d.recorded_reserved;
}

void AllocatorReplay::apply(const Event& e) {
  if (e.device < 0) return;
  const bool torch = is_torch(e.api);
  switch (e.op) {
    case Op::MemInfo: {
      Device& d = device(e.device);
      if (e.has_meminfo && e.total && !d.total) d.total = e.total;
      if (e.has_meminfo && (e.free || e.total)) take_reading(d, e.free);
      return;
    }
    case Op::Alloc:
      if (torch) break;
      if (e.result == kCudaOutOfMemory) device(e.device).oom_path_open = true;
      if (e.result == 0 && (e.kind == Kind::Device || e.kind == Kind::Physical)) {
        Device& d = device(e.device);
        auto [it, inserted] = d.runtime_live.emplace(e.addr, e.size);
        if (inserted) d.runtime_bytes += e.size;
      }
      return;
    case Op::Free:
      if (!torch) {
        Device& d = device(e.device);
        auto it = d.runtime_live.find(e.addr);
        if (it != d.runtime_live.end()) {
          d.runtime_bytes -= it->second;
          d.runtime_live.erase(it);
        }
        return;
      }
      break;
    case Op::BlockAlloc:
    case Op::BlockFree:
    case Op::BlockOom:
    case Op::Map:
    case Op::Unmap:
      if (!torch) return;
      break;
    default:
      return;
  }
  Device& d = device(e.device);
  switch (e.op) {
    case Op::BlockAlloc: return on_block_alloc(d, e);
    case Op::BlockFree: return on_block_free(d, e);
    case Op::BlockOom: return on_oom(d, e);
    default: return on_segment(d, e);
  }
}

// The state the recording started from (events marked "initial": a snapshot's history began mid-run):
// its segments and mapped ranges go into the model as they were, made before the replay starts.
void AllocatorReplay::seed_segment(Device& d, const Event& e) {
  const bool map = e.op == Op::Map && e.api == kApiSegmentMap;
  if (!map && !(e.op == Op::Alloc && e.api == kApiSegmentAlloc && e.kind == Kind::Device)) return;
  ensure_model(d, map);
  uint64_t base = e.addr;
  const uint32_t segment = map ? d.model->seed_mapped(e.addr, e.size, e.stream, &base)
                               : d.model->seed_segment(e.addr, e.size, e.stream);
  d.base_of[segment] = base;
  d.recorded_reserved += e.size;
  d.out.recorded_reserved_peak = std::max(d.out.recorded_reserved_peak, d.recorded_reserved);
}

void AllocatorReplay::on_segment(Device& d, const Event& e) {
  if (e.initial) return seed_segment(d, e);
  RecordedOp op;
  op.addr = e.addr;
  op.size = e.size;
  op.seq = e.seq;
  if (e.op == Op::Alloc && e.api == kApiSegmentAlloc && e.kind == Kind::Device) {
    op.kind = SegmentOp::Alloc;
  } else if (e.op == Op::Free && e.api == kApiSegmentFree) {
    op.kind = SegmentOp::Free;
  } else if (e.op == Op::Map && e.api == kApiSegmentMap) {
    op.kind = SegmentOp::Map;
  } else if (e.op == Op::Unmap && e.api == kApiSegmentUnmap) {
    op.kind = SegmentOp::Unmap;
  } else {
    return;  // the importer's physical chunks around a map: not a segment operation of their own
  }
  ensure_model(d, op.kind == SegmentOp::Map);
  const bool up = op.kind == SegmentOp::Alloc || op.kind == SegmentOp::Map;
  if (up) d.model->offer_address(op.addr);  // the next new segment's, in the recording
  if (up) {
    d.recorded_reserved += op.size;
    d.out.recorded_reserved_peak = std::max(d.out.recorded_reserved_peak, d.recorded_reserved);
  } else {
    d.recorded_reserved -= std::min(op.size, d.recorded_reserved);
  }
  if (check_ && !d.out.divergence) d.recorded.push_back(op);
  // A release with no failed CUDA allocation before it is the program's torch.cuda.empty_cache():
  // the recorded allocator frees segments only there, in a failing malloc, and in its garbage
  // collection (which only runs under a memory fraction with a threshold: then the model does it).
  const AllocatorSettings& s = d.model->settings();
  const bool model_collects = s.memory_fraction > 0 && s.garbage_collection_threshold > 0;
  if (!up && !d.oom_path_open && !d.in_release_burst && !model_collects) {
    d.in_release_burst = true;
    ++d.out.empty_cache_calls;
    d.model->empty_cache();
    after_model_call(d, e);
    if (check_ && !d.out.divergence) reconcile(d, e, false);
  } else if (check_ && !d.out.divergence) {
    reconcile(d, e, false);
  }
}

void AllocatorReplay::on_block_alloc(Device& d, const Event& e) {
  ensure_model(d, false);
  if (e.initial) {  // a block live when the recording started: where it was, with its extent
    const Placement placed = d.model->seed_block(e.addr, e.size);
    if (placed.block) {
      d.live[e.addr] = placed.block;
    } else if (check_) {
      diverge(d, e, "the block at " + hex(e.addr) + ", live when the recording started, lies in no segment of it");
    }
    return;
  }
  d.in_release_burst = false;
  d.oom_path_open = false;
  ++d.out.requests;
  update_capacity(d);
  const Placement placed = d.model->malloc(e.size, e.stream);
  d.model->offer_address(0);
  after_model_call(d, e);
  if (!placed.block) {
    ++refusals_;
    if (d.out.new_ooms++ == 0) {
      d.out.first_new_oom_seq = e.seq;
      d.out.first_new_oom_time_ns = e.t;
      d.out.first_new_oom_reserved = d.model->stats().reserved;
      d.out.first_new_oom_capacity = d.model->limit();
    }
    if (check_) {
      diverge(d, e, "the replay ran out of memory for a request of " + bytes(e.size) +
                        " that the recorded allocator served (capacity " + bytes(d.model->limit()) + ")");
    }
    return;
  }
  auto [it, inserted] = d.live.emplace(e.addr, placed.block);
  if (!inserted) {  // a free was not recorded: the old block is gone for the program too
    d.model->free(it->second);
    it->second = placed.block;
  }
  if (!check_ || d.out.divergence) return;
  reconcile(d, e, true);
  if (d.out.divergence) return;
  auto base = d.base_of.find(placed.segment);
  if (base == d.base_of.end()) {
    diverge(d, e, "the block at " + hex(e.addr) + " lies in a segment the replay cannot match to a recorded one");
    return;
  }
  // An expandable segment is reported as its mapped runs, each a "segment" of its own that moves as
  // pages are unmapped: the block's absolute address is what the two must agree on.
  const uint64_t recorded_base = e.has_segment && !placed.expandable ? e.segment : base->second;
  if (recorded_base != base->second || e.addr - recorded_base != placed.offset) {
    diverge(d, e, "block of " + bytes(e.size) + " at offset " + hex(e.addr - recorded_base) + " of segment " +
                      hex(recorded_base) + " in the recording, at offset " + hex(placed.offset) +
                      " of the replay's segment matched to " + hex(base->second));
    return;
  }
  ++d.out.blocks_compared;
}

void AllocatorReplay::on_block_free(Device& d, const Event& e) {
  d.in_release_burst = false;
  const bool completed = e.api == kApiFreeCompleted;
  if (completed) d.frees_complete_later = true;
  auto it = d.live.find(e.addr);
  if (it == d.live.end() || !d.model) return;  // allocated before the trace, or refused by the model
  if (completed) {
    // free_completed: the block is reusable now; when no free_requested came first (a snapshot's
    // importer writes only this one, as both are adjacent when no other stream used the block), its
    // bytes drop now too.
    d.model->free(it->second);
    d.live.erase(it);
  } else if (d.frees_complete_later) {
    d.model->request_free(it->second);  // stays in `live` until its free_completed
  } else {
    d.model->free(it->second);
    d.live.erase(it);
  }
  after_model_call(d, e);
  if (check_ && !d.out.divergence) reconcile(d, e, true);
}

void AllocatorReplay::on_oom(Device& d, const Event& e) {
  ensure_model(d, false);
  d.in_release_burst = false;
  d.oom_path_open = false;
  if (e.has_meminfo) take_reading(d, e.free);  // PyTorch's own reading of the free bytes when it gave up
  update_capacity(d);
  const Placement placed = d.model->malloc(e.size, e.stream);
  d.model->offer_address(0);
  OomOutcome outcome;
  outcome.seq = e.seq;
  outcome.time_ns = e.t;
  outcome.requested = e.size;
  outcome.still_happens = placed.block == nullptr;
  refusals_ += outcome.still_happens;
  outcome.reserved = d.model->stats().reserved;
  outcome.capacity = d.model->limit();
  // The program never got this block: a model that found room gives it back at once.
  if (placed.block) d.model->free(placed.block);
  after_model_call(d, e);
  d.out.ooms.push_back(outcome);
  if (!check_ || d.out.divergence) return;
  if (placed.block) {
    diverge(d, e, "the recorded allocator refused " + bytes(e.size) + " (torch.oom); the replay found room: " +
                      bytes(outcome.reserved) + " reserved of a capacity of " + bytes(outcome.capacity) +
                      (recorded_.recorded() ? std::string(" (a limit the model does not replay)")
                                            : std::string(" (a cap the trace does not show? give it with --recorded-settings)")));
    return;
  }
  reconcile(d, e, true);
}

void AllocatorReplay::after_model_call(Device& d, const Event& e) {
  if (d.model->ops().empty()) return;
  if (check_ && !d.out.divergence) {
    for (const SegmentOp& op : d.model->ops()) d.replayed.push_back(op);
  }
  d.model->clear_ops();
  sample(d, e.t);
}

// Pairs the recording's segment operations with the model's, in order. `settle`: a block event, by
// which every operation before it must have been paired.
void AllocatorReplay::reconcile(Device& d, const Event& e, bool settle) {
  while (!d.recorded.empty() && !d.replayed.empty()) {
    const RecordedOp r = d.recorded.front();
    const SegmentOp m = d.replayed.front();
    d.recorded.pop_front();
    d.replayed.pop_front();
    if (r.kind != m.kind || r.size != m.size) {
      diverge(d, e, std::string("segment operation: the recording made ") + op_name(r.kind) + " of " + bytes(r.size) +
                        " (event " + std::to_string(r.seq) + "), the replay " + op_name(m.kind) + " of " + bytes(m.size));
      return;
    }
    ++d.out.segment_ops_compared;
    const uint64_t base = r.addr - m.offset;  // Alloc/Free: offset 0
    auto [it, inserted] = d.base_of.emplace(m.segment, base);
    if (!inserted && it->second != base) {
      diverge(d, e, std::string("segment operation: the recording's ") + op_name(r.kind) + " at " + hex(r.addr) +
                        " (event " + std::to_string(r.seq) + ") is in another segment than the replay's");
      return;
    }
    if (r.kind == SegmentOp::Free) d.base_of.erase(m.segment);
  }
  if (!settle) return;
  if (!d.recorded.empty()) {
    const RecordedOp& r = d.recorded.front();
    diverge(d, e, std::string("the recording made ") + op_name(r.kind) + " of " + bytes(r.size) + " (event " +
                      std::to_string(r.seq) + ") where the replay needed none");
  } else if (!d.replayed.empty()) {
    const SegmentOp& m = d.replayed.front();
    diverge(d, e, std::string("the replay made ") + op_name(m.kind) + " of " + bytes(m.size) +
                      " where the recording made none");
  }
}

void AllocatorReplay::diverge(Device& d, const Event& e, std::string what) {
  if (d.out.divergence) return;
  d.out.divergence = Divergence{e.seq, e.t, std::move(what)};
  d.recorded.clear();
  d.replayed.clear();
}

// Evenly thinned: every `sample_stride`-th change is kept; at 2 * kMaxSamples every other one is
// dropped and the stride doubles.
void AllocatorReplay::sample(Device& d, uint64_t t) {
  if (++d.sample_skipped < d.sample_stride) return;
  d.sample_skipped = 0;
  std::vector<ReservedSample>& samples = d.out.timeline;
  samples.push_back(ReservedSample{t, d.model->stats().reserved});
  if (samples.size() >= 2 * kMaxSamples) {
    size_t kept = 0;
    for (size_t i = 0; i < samples.size(); i += 2) samples[kept++] = samples[i];
    samples.resize(kept);
    d.sample_stride *= 2;
  }
}

std::vector<DeviceReplay> AllocatorReplay::finish() {
  std::vector<DeviceReplay> out;
  for (auto& [id, d] : devices_) {
    if (!d->model) continue;  // no PyTorch event on this device
    DeviceReplay r = std::move(d->out);
    r.stats = d->model->stats();
    r.unmodeled = recorded_.skipped();
    if (r.timeline.empty() || r.timeline.back().reserved != r.stats.reserved) {
      r.timeline.push_back(ReservedSample{r.timeline.empty() ? 0 : r.timeline.back().time_ns, r.stats.reserved});
    }
    if (check_ && !r.divergence) {
      Event end;
      end.seq = 0;
      if (!d->recorded.empty() || !d->replayed.empty()) {
        d->out = std::move(r);
        reconcile(*d, end, true);
        r = std::move(d->out);
      }
      if (!r.divergence && r.stats.peak_reserved != r.recorded_reserved_peak) {
        r.divergence = Divergence{0, 0, "reserved peak: " + bytes(r.recorded_reserved_peak) + " recorded, " +
                                            bytes(r.stats.peak_reserved) + " replayed"};
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace gpumemtrace::report::allocator_model
