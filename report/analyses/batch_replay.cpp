// report/analyses/batch_replay.cpp — see batch_replay.h.
#include "report/analyses/batch_replay.h"

#include <algorithm>

#include "trace/torch_actions.h"

namespace gpumemtrace::report {

namespace {

using torch_actions::Action;

// The api text the replay tells events apart by (replay.cpp), per BatchRecord::Api.
std::string_view api_text(BatchRecord::Api api) {
  switch (api) {
    case BatchRecord::Runtime: return "cudaMalloc";
    case BatchRecord::TorchAlloc: return torch_actions::api(Action::Alloc);
    case BatchRecord::TorchFreeRequested: return torch_actions::api(Action::FreeRequested);
    case BatchRecord::TorchFreeCompleted: return torch_actions::api(Action::FreeCompleted);
    case BatchRecord::TorchOom: return torch_actions::api(Action::Oom);
    case BatchRecord::TorchSegmentAlloc: return torch_actions::api(Action::SegmentAlloc);
    case BatchRecord::TorchSegmentFree: return torch_actions::api(Action::SegmentFree);
    case BatchRecord::TorchSegmentMap: return torch_actions::api(Action::SegmentMap);
    case BatchRecord::TorchSegmentUnmap: return torch_actions::api(Action::SegmentUnmap);
    case BatchRecord::TorchOther: return "torch.other";
    case BatchRecord::Settings: return "";
  }
  return "";
}

bool any_scales(const SizeFits& fits) {
  for (const RequestFit& fit : fits.requests) {
    if (fit.b != 0 || fit.residual != 0) return true;
  }
  return false;
}

}  // namespace

std::vector<allocator_model::DeviceReplay> replay_at(const BatchRun& run, const BatchSizes& sizes,
                                                     const BatchReplayOptions& options) {
  allocator_model::AllocatorReplay replay(options.overlay, options.recorded, options.check);
  for (const DeviceInfo& info : run.devices) replay.on_device(info);
  for (const auto& [device, margin] : options.keep_free) replay.keep_free(device, margin.bytes, margin.share);
  size_t request = 0;
  for (size_t i = 0; i < run.records.size(); ++i) {
    const BatchRecord& r = run.records[i];
    Event e;
    e.seq = i + 1;  // 0 stays the replay's "at the end"
    e.t = r.t;
    e.op = r.op;
    e.kind = r.kind;
    e.device = r.device;
    e.result = r.result;
    e.stream = r.stream;
    e.initial = r.flags & BatchRecord::Initial;
    if (r.api == BatchRecord::Settings) {
      const BatchSettingsText& text = run.settings[r.addr];
      e.api = text.source;
      e.label = text.conf;
      e.has_fraction = r.flags & BatchRecord::HasFraction;
      e.fraction = text.fraction;
      replay.on_settings(e);
      continue;
    }
    e.api = api_text(r.api);
    e.addr = r.addr;
    e.size = r.size;
    e.segment = r.segment;
    e.has_segment = r.flags & BatchRecord::HasSegment;
    e.has_meminfo = r.flags & BatchRecord::HasMeminfo;
    if (r.op == Op::MemInfo) {
      e.addr = 0;
      e.free = r.addr;
      e.total = r.size;
    } else if (r.op == Op::BlockOom) {
      e.free = r.segment;
      e.segment = 0;
    }
    const bool is_request = (r.api == BatchRecord::TorchAlloc && r.op == Op::BlockAlloc) ||
                            (r.api == BatchRecord::TorchOom && r.op == Op::BlockOom);
    if (is_request && !e.initial) {
      if (sizes.fits) e.size = size_at(sizes.fits->requests[request], sizes.batch, sizes.spread, sizes.lo, sizes.hi);
      ++request;
    }
    replay.apply(e);
    if (is_request && options.stop_at_refusal && replay.refusals()) break;
  }
  return replay.finish();
}

bool replay_fits(const std::vector<allocator_model::DeviceReplay>& replays) {
  return !first_refusal(replays).any;
}

FirstRefusal first_refusal(const std::vector<allocator_model::DeviceReplay>& replays) {
  FirstRefusal first;
  auto consider = [&](const allocator_model::DeviceReplay& d, uint64_t record, bool recorded, uint64_t reserved,
                      uint64_t capacity) {
    if (!first.any || record < first.record) first = FirstRefusal{true, d.device, record, recorded, reserved, capacity};
  };
  for (const allocator_model::DeviceReplay& d : replays) {
    if (d.new_ooms) consider(d, d.first_new_oom_seq - 1, false, d.first_new_oom_reserved, d.first_new_oom_capacity);
    for (const allocator_model::OomOutcome& o : d.ooms) {
      if (!o.still_happens) continue;
      consider(d, o.seq - 1, true, o.reserved, o.capacity);
      break;
    }
  }
  return first;
}

MaxBatchSearch find_max_batch(const BatchRun& run, BatchSizes sizes, const BatchReplayOptions& options, uint64_t start) {
  MaxBatchSearch out;
  if (sizes.fits && !any_scales(*sizes.fits)) {
    out.unbounded = true;
    return out;
  }
  // hi only ever moves to a batch that failed, and each failure moves it: the last failing replay is
  // the one at the final hi, the only one kept.
  auto fits = [&](uint64_t batch) {
    sizes.batch = static_cast<double>(batch);
    std::vector<allocator_model::DeviceReplay> replays = replay_at(run, sizes, options);
    ++out.replays;
    const bool ok = replay_fits(replays);
    if (!ok) out.at_failing = std::move(replays);
    return ok;
  };
  uint64_t lo = 0, hi = 0;  // invariant once set: lo fits (0: none known), hi does not (0: none known)
  start = std::max<uint64_t>(1, std::min(start, kMaxSearchedBatch));
  if (fits(start)) {
    lo = start;
    while (!hi) {
      if (lo >= kMaxSearchedBatch) {
        out.unbounded = true;
        return out;
      }
      const uint64_t next = std::min(lo * 2, kMaxSearchedBatch);
      if (fits(next)) lo = next;
      else hi = next;
    }
  } else {
    hi = start;
    while (hi > 1 && !lo) {
      const uint64_t next = hi / 2;
      if (fits(next)) lo = next;
      else hi = next;
    }
  }
  while (lo && hi - lo > 1) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (fits(mid)) lo = mid;
    else hi = mid;
  }
  out.largest = lo;
  out.failing = hi;
  return out;
}

}  // namespace gpumemtrace::report
