// report/analyses/oom_incidents.cpp — failed allocations -> OOM incidents and failed calls.
#include "report/analyses/oom_incidents.h"

#include <algorithm>

#include "report/outputs/units.h"

namespace gpumemtrace::report {
namespace {

constexpr int64_t kOutOfMemory = 2;  // cudaErrorMemoryAllocation == CUDA_ERROR_OUT_OF_MEMORY

bool is_driver_api(std::string_view api) {
  return api.size() > 2 && api.compare(0, 2, "cu") == 0 && api.compare(0, 4, "cuda") != 0;
}

constexpr uint64_t kMiB = 1ull << 20;

// PyTorch's DeviceCachingAllocator::get_allocation_size: what alloc_block asks cudaMalloc for.
uint64_t torch_allocation_size(uint64_t size) {
  if (size <= kMiB) return 2 * kMiB;                 // kSmallBuffer
  if (size < 10 * kMiB) return 20 * kMiB;            // kLargeBuffer
  return (size + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB);  // kRoundLarge
}

}  // namespace

bool is_out_of_memory(const Event& e) {
  return e.op == Op::BlockOom || (e.op == Op::Alloc && e.result == kOutOfMemory);
}

bool same_request_size(uint64_t request, uint64_t attempt, bool physical) {
  if (attempt == request || attempt == torch_allocation_size(request)) return true;
  return physical && (attempt == 2 * kMiB || attempt == 20 * kMiB);  // expandable segments' pages
}

const char* cuda_error_name(std::string_view api, int64_t result) {
  const bool driver = is_driver_api(api);
  switch (result) {
    case 0: return driver ? "CUDA_SUCCESS" : "cudaSuccess";
    case 1: return driver ? "CUDA_ERROR_INVALID_VALUE" : "cudaErrorInvalidValue";
    case 2: return driver ? "CUDA_ERROR_OUT_OF_MEMORY" : "cudaErrorMemoryAllocation";
    case 3: return driver ? "CUDA_ERROR_NOT_INITIALIZED" : "cudaErrorInitializationError";
    case 4: return driver ? "CUDA_ERROR_DEINITIALIZED" : "cudaErrorCudartUnloading";
    // 34-35: a machine without a GPU driver (the toolkit's stub libcuda, or none at all).
    case 34: return driver ? "CUDA_ERROR_STUB_LIBRARY" : "cudaErrorStubLibrary";
    case 35: return driver ? "unknown error" : "cudaErrorInsufficientDriver";
    case 100: return driver ? "CUDA_ERROR_NO_DEVICE" : "cudaErrorNoDevice";
    case 101: return driver ? "CUDA_ERROR_INVALID_DEVICE" : "cudaErrorInvalidDevice";
    case 201: return driver ? "CUDA_ERROR_INVALID_CONTEXT" : "cudaErrorDeviceUninitialized";
    case 400: return driver ? "CUDA_ERROR_INVALID_HANDLE" : "cudaErrorInvalidResourceHandle";
    case 700: return driver ? "CUDA_ERROR_ILLEGAL_ADDRESS" : "cudaErrorIllegalAddress";
    case 800: return driver ? "CUDA_ERROR_NOT_PERMITTED" : "cudaErrorNotPermitted";
    case 801: return driver ? "CUDA_ERROR_NOT_SUPPORTED" : "cudaErrorNotSupported";
    default: return "unknown error";
  }
}

Verdict oom_verdict(const OomFigures& f, std::string* explanation) {
  const uint64_t free = f.has_device_free ? f.device_free : 0;
  const uint64_t free_inside = f.has_blocks ? f.fragmentation.free_in_reserved : 0;
  auto say = [&](const std::string& text) {
    if (explanation) *explanation = text;
  };
  if (f.has_device_free && f.device_total && f.device_free > f.device_total) {
    say("the trace's figures contradict each other: " + format_bytes(f.device_free) + " free of a " +
        format_bytes(f.device_total) + " device");
    return Verdict::NotEnoughInformation;
  }
  if (f.device_total && f.requested > f.device_total) {
    say("the request is larger than the whole device (" + format_bytes(f.device_total) + ")");
    return Verdict::Capacity;
  }
  if (!f.has_device_free && !f.has_blocks) {
    say("no reading of the device's free memory and no allocator data in the trace");
    return Verdict::NotEnoughInformation;
  }
  if (f.allocator_only && f.has_device_free && f.requested <= free) {
    say("the device had " + format_bytes(free) + " free, but the allocator refused the request with " +
        format_bytes(f.ours) + " reserved: a cap such as torch.cuda.set_per_process_memory_fraction "
        "or a pool's maximum");
    return Verdict::AllocatorLimit;
  }
  if (f.requested > free + free_inside) {
    if (f.has_device_free && f.device_total) {
      const uint64_t used = f.device_total - std::min(f.device_total, free);
      const uint64_t others = used > f.ours ? used - f.ours : 0;
      if (others > f.requested && others > f.device_total / 20) {
        say("other processes hold about " + format_bytes(others) + " of the device's " +
            format_bytes(f.device_total) + "; this process " + format_bytes(f.ours));
        return Verdict::OtherProcesses;
      }
    }
    if (!f.has_device_free) {
      say("the request exceeds the free space inside the allocator's segments; the device's free "
          "memory is unknown");
      return Verdict::NotEnoughInformation;
    }
    say("this process holds " + format_bytes(f.ours) + (f.device_total ? " of " + format_bytes(f.device_total) : "") +
        "; " + format_bytes(free) + " free on the device" +
        (f.has_blocks ? " and " + format_bytes(free_inside) + " inside the allocator's segments" : ""));
    return Verdict::Capacity;
  }
  if (f.has_blocks && f.requested > std::max(f.fragmentation.largest_free_block, free)) {
    say(format_bytes(free + free_inside) + " free in all (" + format_bytes(free_inside) +
        " inside the allocator's segments), but the largest free block is " +
        format_bytes(f.fragmentation.largest_free_block));
    return Verdict::Fragmentation;
  }
  say("the request fits in the free memory the trace shows: a limit or a driver-side cause it cannot see");
  return Verdict::NotEnoughInformation;
}

bool OomIncidents::joins(const Open& open, const Event& e) const {
  if (e.t > open.last_time + kJoinWindowNs || open.net_raw > 0 || open.net_blocks > 0) return false;
  if (e.op == Op::BlockOom) return same_request_size(e.size, open.last_size, open.last_physical);
  return e.size == open.last_size;  // the thread is the key's
}

OomIncidents::OpenMap::iterator OomIncidents::joinable(const Event& e) {
  if (e.op != Op::BlockOom) {
    auto it = open_.find(OpenKey{e.device, e.tid});
    return it != open_.end() && joins(it->second, e) ? it : open_.end();
  }
  auto latest = open_.end();  // of the device's open incidents, the one whose last attempt is latest
  for (auto it = open_.lower_bound(OpenKey{e.device, 0}); it != open_.end() && it->first.first == e.device; ++it) {
    if (joins(it->second, e) && (latest == open_.end() || it->second.last_time > latest->second.last_time)) latest = it;
  }
  return latest;
}

void OomIncidents::on_failure(const Event& e, MemoryModel& model, const Roles& roles) {
  if (!is_out_of_memory(e)) {
    Calls& calls = failed_calls_[CallKey{e.device, e.result, std::string(e.api), e.stack}];
    if (calls.count++ == 0) {
      calls.size = e.size;
      calls.first_time = e.t;
    }
    return;
  }
  auto it = joinable(e);
  size_t index = Open::kNotKept;
  if (it != open_.end()) {
    index = it->second.index;
  } else {  // a request of its own
    ++incidents_total_;
    if (incidents_.size() < kMaxIncidents) {
      index = incidents_.size();
      incidents_.emplace_back();
    }
    // A new CUDA failure supersedes its thread's open incident: that request is over.
    if (e.op != Op::BlockOom) it = open_.insert_or_assign(OpenKey{e.device, e.tid}, Open{}).first;
    if (it != open_.end()) it->second.index = index;
  }
  if (e.op == Op::BlockOom) {
    if (it != open_.end()) open_.erase(it);  // the allocator gave up: the request ends here
  } else {
    Open& open = it->second;
    open.last_time = e.t;
    open.last_size = e.size;
    open.last_physical = e.kind == Kind::Physical;
    open.net_raw = open.net_blocks = 0;
  }
  tracking_ = !open_.empty();
  if (index != Open::kNotKept) record_attempt(incidents_[index], e, model, roles);
}

void OomIncidents::before_event(const Event& e) {
  thread_ = e.tid;
  for (auto it = open_.begin(); it != open_.end();) {  // rarely more than one
    it = e.t > it->second.last_time + kJoinWindowNs ? open_.erase(it) : std::next(it);
  }
  tracking_ = !open_.empty();
}

void OomIncidents::close_all() {
  open_.clear();
  tracking_ = false;
}

void OomIncidents::count(const Holding& h, int sign) {
  if (!tracking_ || h.level == Level::Host) return;  // pinned host memory is not the device's
  auto it = open_.find(OpenKey{h.device, thread_});
  if (it == open_.end()) return;
  (h.level == Level::Block ? it->second.net_blocks : it->second.net_raw) += sign * static_cast<int64_t>(h.size);
}

// Each attempt replaces the evidence: the incident is described as of its last attempt.
void OomIncidents::record_attempt(Incident& incident, const Event& e, MemoryModel& model, const Roles& roles) {
  OomReport& r = incident.report;
  if (r.attempts.size() < kMaxAttempts) {
    r.attempts.push_back(OomAttempt{e.seq, e.t, format::op_name(e.op), std::string(e.api), e.result, e.size});
  }
  ++r.attempts_total;
  if (e.op != Op::BlockOom) incident.cuda_failed = true;
  // The request as the program made it: the allocator's record when there is one, else the first
  // CUDA failure.
  const bool first = r.attempts_total == 1;
  if (first || e.op == Op::BlockOom) {
    r.op = format::op_name(e.op);
    r.api = std::string(e.api);
    r.result = e.result;
    r.requested = e.size;
    r.seq = e.seq;
    r.time_ns = e.t;
    r.phase = model.phase();
    if (first || e.stack) incident.site = make_site(e.stack);
  }
  MemoryModel::DeviceState& state = model.device_state(e.device);
  r.device = e.device;
  r.live_bytes = state.reserved.live();
  r.allocated_bytes = state.allocated.live();
  r.has_blocks = state.has_blocks;
  r.fragmentation = state.has_blocks ? model.measure_fragmentation(e.device) : FragmentationPoint();
  incident.holders = (state.has_blocks ? state.allocated : state.reserved).top(5, nullptr);
  r.roles = roles.split(e.device);
  // A live PyTorch block_oom carries the device's free bytes itself (the model took it as the
  // device's reading). Else the recorder writes a meminfo right after a failed allocation; until
  // it comes, the latest one known stands in.
  r.has_device_free = state.has_meminfo;
  r.device_free = state.meminfo_free;
  r.device_total = state.meminfo_total ? state.meminfo_total : state.summary.total;
  // Only the latest attempt of a device waits: an older incident keeps the reading it has.
  const size_t index = static_cast<size_t>(&incident - incidents_.data());
  incident.awaiting_meminfo = !e.has_meminfo;
  awaiting_meminfo_.erase(std::remove_if(awaiting_meminfo_.begin(), awaiting_meminfo_.end(),
                                         [&](size_t i) { return incidents_[i].report.device == e.device; }),
                          awaiting_meminfo_.end());
  if (incident.awaiting_meminfo) awaiting_meminfo_.push_back(index);
}

void OomIncidents::on_meminfo(const Event& e) {
  if (!e.has_meminfo) return;
  auto fill = [&](size_t index) {
    OomReport& r = incidents_[index].report;
    if (r.device != e.device) return false;
    incidents_[index].awaiting_meminfo = false;
    r.has_device_free = true;
    r.device_free = e.free;
    if (e.total) r.device_total = e.total;
    return true;
  };
  awaiting_meminfo_.erase(std::remove_if(awaiting_meminfo_.begin(), awaiting_meminfo_.end(), fill),
                          awaiting_meminfo_.end());
}

void OomIncidents::finish(ProcessReport& out, const SymbolTable& symbols) {
  for (Incident& incident : incidents_) {
    OomReport r = std::move(incident.report);
    r.stack = resolve_site(symbols, incident.site);
    for (const StackCount& c : incident.holders) {
      r.top_holders.push_back(StackBytes{c.bytes, c.count, resolve_site(symbols, c.site)});
    }
    OomFigures figures;
    figures.requested = r.requested;
    figures.allocator_only = !incident.cuda_failed;
    figures.has_device_free = r.has_device_free;
    figures.device_free = r.device_free;
    figures.device_total = r.device_total;
    figures.ours = r.live_bytes;
    figures.has_blocks = r.has_blocks;
    figures.fragmentation = r.fragmentation;
    r.verdict = oom_verdict(figures, &r.explanation);
    out.ooms.push_back(std::move(r));
  }
  if (incidents_total_ > incidents_.size()) {
    out.warnings.push_back(std::to_string(incidents_total_) + " out-of-memory incidents; the first " +
                           std::to_string(incidents_.size()) + " are reported");
  }
  for (const auto& [key, calls] : failed_calls_) {
    FailedCall call;
    call.device = key.device;
    call.api = key.api;
    call.result = key.result;
    call.error = cuda_error_name(key.api, key.result);
    call.size = calls.size;
    call.count = calls.count;
    call.first_time_ns = calls.first_time;
    call.stack = symbols.resolve(key.stack);
    out.failed_calls.push_back(std::move(call));
  }
  std::stable_sort(out.failed_calls.begin(), out.failed_calls.end(),
                   [](const FailedCall& a, const FailedCall& b) { return a.count > b.count; });
}

}  // namespace gpumemtrace::report
